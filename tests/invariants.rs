//! Every figure of every report keeps its invariants (issue 39, "Done when"): each profile of
//! `testdata/` and of `../shared/real` (or `$XLENS_SHARED/real`) is scanned once through the
//! library, and the shared checks of `xlens_testkit::invariants` run over its scan report (JSON),
//! its Parquet dataset (read back), its `ops --json`, `kernels --json` and `memory --json`
//! documents (the last two what the HTML page's kernel and memory sections show): no share
//! outside [0, 100], no op above its device's peak FLOP rate or HBM bandwidth, a health block
//! that adds up, ordered step figures, one idle, no OPTIMAL verdict without evidence.
//!
//! Violations known and being fixed would be listed in [`KNOWN`] (empty since the last of issue
//! 39's landed); the test fails on any violation not listed, and on a listed one that no longer
//! occurs.

mod common;
mod outputs;

use std::collections::{BTreeMap, BTreeSet};

use outputs::{TestProfile, outputs, scratch, shared_real_profiles, testdata_profiles};
use rayon::prelude::*;
use xlens_testkit::invariants::{
    Context, Violation, check_frames, check_kernels, check_memory, check_ops, check_report,
};

/// The violations known today, as (profile, output, rule): each a figure issue 39 says is wrong
/// and that is being fixed; remove an entry with its fix (the test fails while a listed one no
/// longer occurs). Outputs: `scan` (the report JSON), `frames` (the Parquet dataset), `ops`,
/// `kernels`, `memory`.
const KNOWN: &[(&str, &str, &str)] = &[];

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
    add("memory", check_memory(&o.memory));
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
