//! Every figure of every report keeps its invariants (issue 39, "Done when"): each profile of
//! `testdata/` and of `../shared/real` (or `$XLENS_SHARED/real`) is scanned once through the
//! library, and the shared checks of `xlens_testkit::invariants` run over its scan report (JSON),
//! its Parquet dataset (read back), its `ops --json` and its `kernels --json` documents: no share
//! outside [0, 100], no op above its device's peak FLOP rate or HBM bandwidth, a health block
//! that adds up, ordered step figures, one idle, no OPTIMAL verdict without evidence.
//!
//! The violations known today are listed in [`KNOWN`], each with the issue-39 bullet it belongs
//! to; the test fails on any violation not listed, and on a listed one that no longer occurs, so
//! the list shrinks to empty as the fixes land.

mod common;
mod outputs;

use std::collections::{BTreeMap, BTreeSet};

use outputs::{TestProfile, outputs, scratch, shared_real_profiles, testdata_profiles};
use rayon::prelude::*;
use xlens_testkit::invariants::{Context, Violation, check_frames, check_kernels, check_ops, check_report};

/// The violations known today, as (profile, output, rule): each a figure issue 39 says is wrong
/// and that is being fixed; remove an entry with its fix (the test fails while a listed one no
/// longer occurs). Outputs: `scan` (the report JSON), `frames` (the Parquet dataset), `ops`,
/// `kernels`.
const KNOWN: &[(&str, &str, &str)] = &[
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 120 %.
    ("field/amd_conv3d_jax08", "frames", "percent_range"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 110 %.
    ("field/amd_conv3d_legacy", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/amd_conv3d_legacy", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 13 op(s), up to 152 %.
    ("field/amd_jax08_attention", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/amd_jax08_attention", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 10 op(s), up to 159 %.
    ("field/amd_jax08_elementwise", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/amd_jax08_elementwise", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 2 op(s), up to 110 %.
    ("field/amd_jax08_gemm", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/amd_jax08_gemm", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 5 op(s), up to 172 % of the peak (loop_reduce_fusion.1).
    ("field/amd_te_fused_attn", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 5 op(s), up to 172 %.
    ("field/amd_te_fused_attn", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/amd_te_fused_attn", "scan", "idle_agrees"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("field/tf_v100_multiworker", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 3 op(s), up to 192446250 % of the peak (copy-start.1).
    ("field/tpu_v6e_host_offload", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 192447055 %.
    ("field/tpu_v6e_host_offload", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 24422 % of the peak (input_scatter_fusion.1).
    ("h200/h200_bf16_graphs", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 24350 %.
    ("h200/h200_bf16_graphs", "frames", "percent_range"),
    // Above the physical peak (HBM): 9 op(s), up to 27420 % of the peak (input_scatter_fusion.1).
    ("h200/h200_bf16_no_graphs", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 47 op(s), up to 27339 %.
    ("h200/h200_bf16_no_graphs", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 3201 % of the peak (input_scatter_fusion.1).
    ("h200/h200_host_callback", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3192 %.
    ("h200/h200_host_callback", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 3381 % of the peak (input_scatter_fusion.1).
    ("h200/h200_host_offload", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3371 %.
    ("h200/h200_host_offload", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 3350 % of the peak (input_scatter_fusion.1).
    ("h200/h200_input_starvation", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3340 %.
    ("h200/h200_input_starvation", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 24254 % of the peak (input_scatter_fusion.1).
    ("h200/h200_train_bf16", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 24182 %.
    ("h200/h200_train_bf16", "frames", "percent_range"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 120 %.
    ("shared/real/amd_conv3d_jax08", "frames", "percent_range"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 13 op(s), up to 152 %.
    ("shared/real/amd_jax08_attention", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("shared/real/amd_jax08_attention", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 5 op(s), up to 172 % of the peak (loop_reduce_fusion.1).
    ("shared/real/amd_te_fused_attn", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 5 op(s), up to 172 %.
    ("shared/real/amd_te_fused_attn", "frames", "percent_range"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("shared/real/amd_te_fused_attn", "scan", "idle_agrees"),
    // One definition per quantity (per device vs per host): the program ran on fewer GPUs than the
    // host has; IDLE per step sums the devices that ran ops, the report counts every GPU plane.
    ("shared/real/tf_v100_multiworker", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 3 op(s), up to 982 % of the peak (all-gather-start.5).
    ("tpu/tpu_basic", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 982 %.
    ("tpu/tpu_basic", "frames", "percent_range"),
    // Above the physical peak (HBM): 3 op(s), up to 970 % of the peak (all-gather-start.5).
    ("tpu/tpu_dcn_tail", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 970 %.
    ("tpu/tpu_dcn_tail", "frames", "percent_range"),
    // Above the physical peak (HBM): 4 op(s), up to 1031 % of the peak (all-gather-start.1).
    ("tpu/tpu_exposed_collective", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 4 op(s), up to 1031 %.
    ("tpu/tpu_exposed_collective", "frames", "percent_range"),
    // Above the physical peak (HBM): 3 op(s), up to 976 % of the peak (all-gather-start.5).
    ("tpu/tpu_hbm_pressure", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 977 %.
    ("tpu/tpu_hbm_pressure", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 607 % of the peak (all-gather-start.1).
    ("tpu/tpu_healthy", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 607 %.
    ("tpu/tpu_healthy", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 153 % of the peak (all-gather-start.35).
    ("tpu/tpu_sparsecore", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 153 %.
    ("tpu/tpu_sparsecore", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 454 % of the peak (all-gather-start.5).
    ("tpu/tpu_straggler", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 2 op(s), up to 454 %.
    ("tpu/tpu_straggler", "frames", "percent_range"),
    // Above the physical peak (HBM): 1 op(s), up to 255 % of the peak (all-gather-start.7).
    ("tpu/tpu_vector_bound", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 255 %.
    ("tpu/tpu_vector_bound", "frames", "percent_range"),
];

/// One violation found: on which profile, in which output.
struct Found {
    profile: String,
    output: &'static str,
    violation: Violation,
}

/// Scans `profile` and runs every check over its outputs.
fn check(profile: &TestProfile) -> Vec<Found> {
    let dir = scratch("invariants", &profile.name);
    let o = outputs(profile, &dir);
    let ctx = Context { peaks: o.peaks, detectors: Some(xlens::faults::DETECTORS.len()) };
    let mut found = Vec::new();
    let mut add = |output: &'static str, list: Vec<Violation>| {
        found.extend(list.into_iter().map(|violation| Found { profile: profile.name.clone(), output, violation }));
    };
    add("scan", check_report(&o.json, &ctx));
    add("frames", check_frames(&o.frames, &ctx));
    add("ops", check_ops(&o.ops, &ctx));
    add("kernels", check_kernels(&o.kernels));
    let _ = std::fs::remove_dir_all(&dir);
    found
}

#[test]
fn every_figure_of_every_report_keeps_the_invariants() {
    let mut profiles = testdata_profiles();
    assert!(profiles.len() >= 60, "testdata has {} profiles", profiles.len());
    profiles.extend(shared_real_profiles().unwrap_or_default());
    let found: Vec<Found> = profiles.par_iter().flat_map(check).collect();

    // Every violation, grouped by (profile, output, rule).
    let mut groups: BTreeMap<(&str, &str, &str), Vec<&Violation>> = BTreeMap::new();
    for f in &found {
        groups.entry((f.profile.as_str(), f.output, f.violation.rule.id())).or_default().push(&f.violation);
    }
    let mut report = String::new();
    for ((profile, output, rule), list) in &groups {
        let known = KNOWN.contains(&(*profile, *output, *rule));
        report.push_str(&format!(
            "{profile} {output} {rule}: {} violation(s){}\n",
            list.len(),
            if known { " (known)" } else { "" }
        ));
        for v in list {
            report.push_str(&format!("    {}: {}\n", v.path, v.message));
        }
    }
    println!("{report}");

    let seen: BTreeSet<(&str, &str, &str)> = groups.keys().copied().collect();
    let new: Vec<String> =
        seen.iter().filter(|k| !KNOWN.contains(k)).map(|(p, o, r)| format!("(\"{p}\", \"{o}\", \"{r}\")")).collect();
    let profiles: BTreeSet<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    let stale: Vec<String> = KNOWN
        .iter()
        // A known violation of a shared profile is only checked where the shared data is.
        .filter(|k| profiles.contains(k.0) && !seen.contains(k))
        .map(|(p, o, r)| format!("(\"{p}\", \"{o}\", \"{r}\")"))
        .collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "invariant violations not in KNOWN:\n  {}\nKNOWN entries that no longer occur (remove them):\n  {}\n\n{report}",
        new.join("\n  "),
        stale.join("\n  ")
    );
}

/// A verdict rests on detectors: a scan whose configuration enables none (`--only x --disable
/// x`) is never OPTIMAL, and the check says so when it is.
#[test]
fn no_verdict_rests_on_no_detector() {
    let profile = outputs::testdata("corpus/clean");
    let config = xlens::faults::ScanConfig {
        only: Some(vec!["device_idle".to_owned()]),
        disabled: vec!["device_idle".to_owned()],
        ..xlens::faults::ScanConfig::default()
    };
    let scanned = xlens::scan_path(&xlens::ScanRequest { config, ..xlens::ScanRequest::new(&profile.dir) }).unwrap();
    let json: serde_json::Value = serde_json::from_str(&xlens::report::render::json(&scanned.report)).unwrap();
    let violations = check_report(&json, &Context { detectors: Some(0), ..Context::default() });
    assert!(
        violations.iter().all(|v| v.rule != xlens_testkit::invariants::Rule::Verdict),
        "{}: {violations:?}",
        json["status"]
    );
    assert_ne!(json["status"], "OPTIMAL");
    // The same check flags an OPTIMAL verdict on no detector.
    let mut optimal = json.clone();
    optimal["status"] = "OPTIMAL".into();
    let flagged = check_report(&optimal, &Context { detectors: Some(0), ..Context::default() });
    assert!(flagged.iter().any(|v| v.rule == xlens_testkit::invariants::Rule::Verdict), "{flagged:?}");
}
