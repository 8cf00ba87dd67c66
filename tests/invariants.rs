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
    // Three idles: IDLE category 19.1 % of the step, health idle 0.2 %.
    ("corpus/data_formatting", "scan", "idle_agrees"),
    // Three idles: IDLE category 13.3 % of the step, health idle 0.2 %.
    ("corpus/data_formatting_baseline", "scan", "idle_agrees"),
    // Three idles: IDLE category 4.0 % of the step, health idle 0.3 %.
    ("corpus/host_callback", "scan", "idle_agrees"),
    // Three idles: IDLE category 95.4 % of the step, health idle 0.0 %.
    ("corpus/recompilation", "scan", "idle_agrees"),
    // Three idles: IDLE category 14.0 % of the step, health idle 0.3 %.
    ("corpus/sharded_collectives_baseline", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 120 %.
    ("field/amd_conv3d_jax08", "frames", "percent_range"),
    // Three idles: IDLE category 106.2 % of the step, health idle 89.9 %.
    ("field/amd_conv3d_jax08", "scan", "idle_agrees"),
    // Three idles: IDLE 134.0999 ms per step on 8 core(s), 106.2 % of a 15.7872 ms step.
    ("field/amd_conv3d_jax08", "scan", "share_of_whole"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 110 %.
    ("field/amd_conv3d_legacy", "frames", "percent_range"),
    // Three idles: IDLE category 78.9 % of the step, health idle 43.5 %.
    ("field/amd_conv3d_legacy", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 13 op(s), up to 152 %.
    ("field/amd_jax08_attention", "frames", "percent_range"),
    // Three idles: IDLE category 64.4 % of the step, health idle 31.2 %.
    ("field/amd_jax08_attention", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 10 op(s), up to 159 %.
    ("field/amd_jax08_elementwise", "frames", "percent_range"),
    // Three idles: IDLE category 14.9 % of the step, health idle 24.5 %.
    ("field/amd_jax08_elementwise", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 2 op(s), up to 110 %.
    ("field/amd_jax08_gemm", "frames", "percent_range"),
    // Three idles: IDLE category 14.1 % of the step, health idle 35.6 %.
    ("field/amd_jax08_gemm", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 5 op(s), up to 172 % of the peak (loop_reduce_fusion.1).
    ("field/amd_te_fused_attn", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 5 op(s), up to 172 %.
    ("field/amd_te_fused_attn", "frames", "percent_range"),
    // Three idles: IDLE category 0.8 % of the step, health idle 2.0 %.
    ("field/amd_te_fused_attn", "scan", "idle_agrees"),
    // Three idles: IDLE category 347.9 % of the step, health idle 30.2 %.
    ("field/tf_v100_multiworker", "scan", "idle_agrees"),
    // Three idles: IDLE 593.0338 ms per step on 8 core(s), 347.9 % of a 21.3104 ms step.
    ("field/tf_v100_multiworker", "scan", "share_of_whole"),
    // Above the physical peak (HBM): 3 op(s), up to 192446250 % of the peak (copy-start.1).
    ("field/tpu_v6e_host_offload", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 192447055 %.
    ("field/tpu_v6e_host_offload", "frames", "percent_range"),
    // Three idles: IDLE category 13.6 % of the step, health idle 1.1 %.
    ("field/tpu_v6e_host_offload", "scan", "idle_agrees"),
    // Three idles: IDLE category 4.3 % of the step, health idle 0.4 %.
    ("gpu/gpu_data_formatting", "scan", "idle_agrees"),
    // Three idles: IDLE category 3.0 % of the step, health idle 0.2 %.
    ("gpu/gpu_exposed_collective", "scan", "idle_agrees"),
    // Three idles: IDLE category 3.8 % of the step, health idle 0.3 %.
    ("gpu/gpu_healthy", "scan", "idle_agrees"),
    // Three idles: IDLE category 73.7 % of the step, health idle 70.7 %.
    ("gpu/gpu_launch_bound", "scan", "idle_agrees"),
    // Three idles: IDLE category 29.2 % of the step, health idle 0.3 %.
    ("gpu/gpu_memcpy_stall", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 24422 % of the peak (input_scatter_fusion.1).
    ("h200/h200_bf16_graphs", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 24350 %.
    ("h200/h200_bf16_graphs", "frames", "percent_range"),
    // Three idles: IDLE category 10.1 % of the step, health idle 0.1 %.
    ("h200/h200_bf16_graphs", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 9 op(s), up to 27420 % of the peak (input_scatter_fusion.1).
    ("h200/h200_bf16_no_graphs", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 47 op(s), up to 27339 %.
    ("h200/h200_bf16_no_graphs", "frames", "percent_range"),
    // Three idles: IDLE category 9.6 % of the step, health idle 0.1 %.
    ("h200/h200_bf16_no_graphs", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 3201 % of the peak (input_scatter_fusion.1).
    ("h200/h200_host_callback", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3192 %.
    ("h200/h200_host_callback", "frames", "percent_range"),
    // Three idles: IDLE category 70.6 % of the step, health idle 0.1 %.
    ("h200/h200_host_callback", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 3381 % of the peak (input_scatter_fusion.1).
    ("h200/h200_host_offload", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3371 %.
    ("h200/h200_host_offload", "frames", "percent_range"),
    // Three idles: IDLE category 23.5 % of the step, health idle 0.3 %.
    ("h200/h200_host_offload", "scan", "idle_agrees"),
    // Three idles: IDLE category 75.9 % of the step, health idle 57.5 %.
    ("h200/h200_inference_stepless", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 3350 % of the peak (input_scatter_fusion.1).
    ("h200/h200_input_starvation", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 3340 %.
    ("h200/h200_input_starvation", "frames", "percent_range"),
    // Three idles: IDLE category 93.6 % of the step, health idle 0.1 %.
    ("h200/h200_input_starvation", "scan", "idle_agrees"),
    // Three idles: IDLE category 80.3 % of the step, health idle 0.4 %.
    ("h200/h200_small_command_buffer", "scan", "idle_agrees"),
    // Three idles: IDLE category 89.2 % of the step, health idle 0.5 %.
    ("h200/h200_small_launch_bound", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 24254 % of the peak (input_scatter_fusion.1).
    ("h200/h200_train_bf16", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 24182 %.
    ("h200/h200_train_bf16", "frames", "percent_range"),
    // Three idles: IDLE category 8.7 % of the step, health idle 0.1 %.
    ("h200/h200_train_bf16", "scan", "idle_agrees"),
    // Three idles: IDLE category 70.2 % of the step, health idle 0.6 %; barrier_in_loop finding 46.5 %.
    ("real/barrier_in_loop", "scan", "idle_agrees"),
    // Three idles: IDLE category 49.1 % of the step, health idle 0.8 %.
    ("real/barrier_in_loop_baseline", "scan", "idle_agrees"),
    // Three idles: IDLE category 61.2 % of the step, health idle 1.2 %.
    ("real/barrier_in_loop_baseline_rerun", "scan", "idle_agrees"),
    // Three idles: IDLE category 56.3 % of the step, health idle 1.0 %.
    ("real/barrier_in_loop_baseline_twice_a", "scan", "idle_agrees"),
    // Three idles: IDLE category 58.5 % of the step, health idle 1.2 %.
    ("real/barrier_in_loop_baseline_twice_b", "scan", "idle_agrees"),
    // Three idles: IDLE category 8.6 % of the step, health idle 0.2 %.
    ("real/convert_reduce", "scan", "idle_agrees"),
    // Three idles: IDLE category 4.7 % of the step, health idle 0.1 %.
    ("real/debug_print", "scan", "idle_agrees"),
    // Three idles: IDLE category 5.1 % of the step, health idle 0.2 %.
    ("real/donation_miss", "scan", "idle_agrees"),
    // Three idles: IDLE category 11.8 % of the step, health idle 0.1 %.
    ("real/donation_miss_baseline_twice_a", "scan", "idle_agrees"),
    // Three idles: IDLE category 4.2 % of the step, health idle 0.2 %.
    ("real/donation_miss_baseline_twice_b", "scan", "idle_agrees"),
    // Three idles: IDLE category 10.9 % of the step, health idle 0.3 %.
    ("real/fused_upcast_clean", "scan", "idle_agrees"),
    // Three idles: IDLE category 44.0 % of the step, health idle 0.1 %.
    ("real/input_starvation", "scan", "idle_agrees"),
    // Three idles: IDLE category 46.3 % of the step, health idle 1.1 %.
    ("real/padding_waste", "scan", "idle_agrees"),
    // Three idles: IDLE category 4609.3 % of the step, health idle 0.6 %.
    ("real/recompile_between_steps", "scan", "idle_agrees"),
    // Three idles: IDLE 63.6091 ms per step on 1 core(s), 4609.3 % of a 1.3800 ms step.
    ("real/recompile_between_steps", "scan", "share_of_whole"),
    // Three idles: IDLE category 4.5 % of the step, health idle 0.1 %.
    ("real/remat", "scan", "idle_agrees"),
    // Three idles: IDLE category 13.6 % of the step, health idle 0.1 %.
    ("real/remat_baseline", "scan", "idle_agrees"),
    // Three idles: IDLE category 8.3 % of the step, health idle 0.0 %.
    ("real/replicated_activations", "scan", "idle_agrees"),
    // Three idles: IDLE category 15.0 % of the step, health idle 0.1 %.
    ("real/replicated_activations_baseline", "scan", "idle_agrees"),
    // Three idles: IDLE category 6.9 % of the step, health idle 0.0 %.
    ("real/sharded_collectives", "scan", "idle_agrees"),
    // Three idles: IDLE category 1.4 % of the step, health idle 0.1 %.
    ("real/sharded_donation", "scan", "idle_agrees"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 120 %.
    ("shared/real/amd_conv3d_jax08", "frames", "percent_range"),
    // Three idles: IDLE category 106.2 % of the step, health idle 89.9 %.
    ("shared/real/amd_conv3d_jax08", "scan", "idle_agrees"),
    // Three idles: IDLE 134.0999 ms per step on 8 core(s), 106.2 % of a 15.7872 ms step.
    ("shared/real/amd_conv3d_jax08", "scan", "share_of_whole"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 13 op(s), up to 152 %.
    ("shared/real/amd_jax08_attention", "frames", "percent_range"),
    // Three idles: IDLE category 64.4 % of the step, health idle 31.2 %.
    ("shared/real/amd_jax08_attention", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 5 op(s), up to 172 % of the peak (loop_reduce_fusion.1).
    ("shared/real/amd_te_fused_attn", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 5 op(s), up to 172 %.
    ("shared/real/amd_te_fused_attn", "frames", "percent_range"),
    // Three idles: IDLE category 0.8 % of the step, health idle 2.0 %.
    ("shared/real/amd_te_fused_attn", "scan", "idle_agrees"),
    // Three idles: IDLE category 347.9 % of the step, health idle 30.2 %.
    ("shared/real/tf_v100_multiworker", "scan", "idle_agrees"),
    // Three idles: IDLE 593.0338 ms per step on 8 core(s), 347.9 % of a 21.3104 ms step.
    ("shared/real/tf_v100_multiworker", "scan", "share_of_whole"),
    // Above the physical peak (HBM): 3 op(s), up to 982 % of the peak (all-gather-start.5).
    ("tpu/tpu_basic", "frames", "above_peak_hbm"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.75 %.
    ("tpu/tpu_basic", "frames", "health_sum"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 982 %.
    ("tpu/tpu_basic", "frames", "percent_range"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.75 %.
    ("tpu/tpu_basic", "scan", "health_sum"),
    // Three idles: IDLE category 13.7 % of the step, health idle 3.8 %.
    ("tpu/tpu_basic", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 3 op(s), up to 970 % of the peak (all-gather-start.5).
    ("tpu/tpu_dcn_tail", "frames", "above_peak_hbm"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.60 %.
    ("tpu/tpu_dcn_tail", "frames", "health_sum"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 970 %.
    ("tpu/tpu_dcn_tail", "frames", "percent_range"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.60 %.
    ("tpu/tpu_dcn_tail", "scan", "health_sum"),
    // Three idles: IDLE category 12.9 % of the step, health idle 3.6 %.
    ("tpu/tpu_dcn_tail", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 4 op(s), up to 1031 % of the peak (all-gather-start.1).
    ("tpu/tpu_exposed_collective", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 4 op(s), up to 1031 %.
    ("tpu/tpu_exposed_collective", "frames", "percent_range"),
    // Three idles: IDLE category 11.5 % of the step, health idle 1.0 %.
    ("tpu/tpu_exposed_collective", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 3 op(s), up to 976 % of the peak (all-gather-start.5).
    ("tpu/tpu_hbm_pressure", "frames", "above_peak_hbm"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.82 %.
    ("tpu/tpu_hbm_pressure", "frames", "health_sum"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 3 op(s), up to 977 %.
    ("tpu/tpu_hbm_pressure", "frames", "percent_range"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.82 %.
    ("tpu/tpu_hbm_pressure", "scan", "health_sum"),
    // Three idles: IDLE category 13.6 % of the step, health idle 3.6 %.
    ("tpu/tpu_hbm_pressure", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 607 % of the peak (all-gather-start.1).
    ("tpu/tpu_healthy", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 607 %.
    ("tpu/tpu_healthy", "frames", "percent_range"),
    // Three idles: IDLE category 10.2 % of the step, health idle 0.5 %.
    ("tpu/tpu_healthy", "scan", "idle_agrees"),
    // Three idles: IDLE category 1.7 % of the step, health idle 0.0 %.
    ("tpu/tpu_padding_clean", "scan", "idle_agrees"),
    // Three idles: IDLE category 1.5 % of the step, health idle 0.0 %.
    ("tpu/tpu_padding_waste", "scan", "idle_agrees"),
    // Three idles: IDLE category 4450.7 % of the step, health idle 0.1 %.
    ("tpu/tpu_recompile_between_steps", "scan", "idle_agrees"),
    // Three idles: IDLE 1292.1469 ms per step on 4 core(s), 4450.7 % of a 7.2581 ms step.
    ("tpu/tpu_recompile_between_steps", "scan", "share_of_whole"),
    // Above the physical peak (HBM): 1 op(s), up to 153 % of the peak (all-gather-start.35).
    ("tpu/tpu_sparsecore", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 153 %.
    ("tpu/tpu_sparsecore", "frames", "percent_range"),
    // Three idles: IDLE category 24.4 % of the step, health idle 13.1 %.
    ("tpu/tpu_sparsecore", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 454 % of the peak (all-gather-start.5).
    ("tpu/tpu_straggler", "frames", "above_peak_hbm"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.31 %.
    ("tpu/tpu_straggler", "frames", "health_sum"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 2 op(s), up to 454 %.
    ("tpu/tpu_straggler", "frames", "percent_range"),
    // Three idles (host+infeed also counted as busy): busy + idle + host+infeed = 102.31 %.
    ("tpu/tpu_straggler", "scan", "health_sum"),
    // Three idles: IDLE category 25.6 % of the step, health idle 19.4 %.
    ("tpu/tpu_straggler", "scan", "idle_agrees"),
    // Above the physical peak (HBM): 1 op(s), up to 255 % of the peak (all-gather-start.7).
    ("tpu/tpu_vector_bound", "frames", "above_peak_hbm"),
    // Above the physical peak (Parquet roofline_efficiency_pct): 1 op(s), up to 255 %.
    ("tpu/tpu_vector_bound", "frames", "percent_range"),
    // Three idles: IDLE category 11.4 % of the step, health idle 1.0 %.
    ("tpu/tpu_vector_bound", "scan", "idle_agrees"),
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
