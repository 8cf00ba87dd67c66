//! Profile diffs of real capture pairs (the same JAX program with and without a fault): the
//! fault resolved and `IMPROVED` where the step time dropped beyond noise, `REGRESSED` the other
//! way round, `NEUTRAL` on a profile against itself, `INCOMPARABLE` across hardware; a saved JSON
//! report as the baseline; the CLI's exit code 4 and its outputs.

mod common;

use std::process::Command;

use xlens::faults::{Report, ScanConfig, scan_session};
use xlens::report::diff::{DiffConfig, Verdict, diff};
use xlens::report::render;

fn report(rel: &str) -> Report {
    let source = xlens_testkit::discover(common::root().join(rel));
    scan_session(source.run.clone(), &source.hosts, &ScanConfig::default(), &|_, _| {}).unwrap()
}

fn ids(list: &[xlens::faults::Finding]) -> Vec<&str> {
    list.iter().map(|f| f.id.as_str()).collect()
}

/// `block_until_ready` after every call of the step: removing it resolves `barrier_in_loop` and
/// halves the step; adding it regresses.
#[test]
fn removing_a_barrier_improves_and_resolves_it() {
    let (fault, fixed) = (report("testdata/real/barrier_in_loop"), report("testdata/real/barrier_in_loop_baseline"));
    let d = diff(&fault, &fixed, &DiffConfig::default());
    assert_eq!(d.verdict, Verdict::Improved, "{}", d.summary);
    let [lo, hi] = d.step_time_ms.ci95_pct.unwrap();
    assert!(lo < hi && hi < 0.0, "{lo} {hi}");
    assert_eq!(ids(&d.findings.resolved), ["barrier_in_loop"]);
    assert!(d.findings.new.is_empty());
    let back = diff(&fixed, &fault, &DiffConfig::default());
    assert_eq!(back.verdict, Verdict::Regressed, "{}", back.summary);
    assert_eq!(ids(&back.findings.new), ["barrier_in_loop"]);
    // The programs are the same: every op of the base run is matched by name.
    assert!(d.ops.iter().all(|o| o.status == "matched"), "{:?}", d.ops);
}

/// A replicated activation doubles the step (REGRESSED, new findings); a host callback too.
#[test]
fn injected_faults_regress() {
    let d = diff(
        &report("testdata/real/replicated_activations_baseline"),
        &report("testdata/real/replicated_activations"),
        &DiffConfig::default(),
    );
    assert_eq!(d.verdict, Verdict::Regressed, "{}", d.summary);
    assert!(!d.findings.new.is_empty());
    let d = diff(&report("testdata/corpus/clean"), &report("testdata/corpus/host_callback"), &DiffConfig::default());
    assert_eq!(d.verdict, Verdict::Regressed, "{}", d.summary);
    assert_eq!(ids(&d.findings.new), ["host_callback_stall"]);
}

/// A profile against itself: NEUTRAL, a zero change, every finding persisting, every op matched
/// with no change.
#[test]
fn a_profile_against_itself_is_neutral() {
    for rel in ["testdata/real/barrier_in_loop", "testdata/tpu/tpu_straggler_host"] {
        let r = report(rel);
        let d = diff(&r, &r, &DiffConfig::default());
        assert_eq!((d.verdict, d.step_time_ms.delta_pct), (Verdict::Neutral, Some(0.0)), "{rel}: {}", d.summary);
        assert_eq!(d.findings.persisting.len(), r.findings.len());
        assert!(d.findings.resolved.is_empty() && d.findings.new.is_empty());
        assert!(d.ops.iter().all(|o| o.status == "matched" && o.delta_ms_per_step == 0.0));
        assert!(d.categories.iter().all(|c| c.delta_ms_per_step == 0.0));
    }
}

/// Different hardware or a different main program cannot be compared, and the diff says why.
#[test]
fn different_hardware_is_incomparable() {
    let d = diff(&report("testdata/corpus/clean"), &report("testdata/tpu/tpu_basic"), &DiffConfig::default());
    assert_eq!(d.verdict, Verdict::Incomparable);
    assert!(d.warnings[0].starts_with("different hardware: CPU vs TPU"), "{:?}", d.warnings);
    assert!(d.summary.contains("Not comparable: different hardware"), "{}", d.summary);
}

/// A sessions's diff has a row per host and names the slowest host of each run.
#[test]
fn sessions_compare_per_host() {
    let r = report("testdata/tpu/tpu_straggler_host");
    let d = diff(&r, &r, &DiffConfig::default());
    let hosts: Vec<&str> = d.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(hosts, ["host0", "host1"]);
    assert_eq!(d.straggler.base.as_deref(), Some("host1"));
    assert_eq!(d.step_series_ms.base.len(), r.metrics.step_count);
}

fn xlens(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).env("RUST_BACKTRACE", "1").output().unwrap()
}

/// A report saved with `scan --format json` is a baseline as good as its profile; the CI gate
/// exits with 4 on a regression beyond its threshold; the JSON keeps its contract; the HTML and
/// the Parquet tables are written.
#[test]
fn the_cli_takes_a_saved_baseline_and_gates_regressions() {
    let root = common::root();
    let dir = std::env::temp_dir().join(format!("xlens-diff-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let base = root.join("testdata/real/barrier_in_loop_baseline").display().to_string();
    let new = root.join("testdata/real/barrier_in_loop").display().to_string();
    let saved = dir.join("base.json");
    std::fs::write(&saved, render::json(&report("testdata/real/barrier_in_loop_baseline"))).unwrap();
    let from_profile = xlens(&["diff", &base, &new, "--json"]);
    let from_saved = xlens(&["diff", &saved.display().to_string(), &new, "--json"]);
    assert_eq!(from_profile.status.code(), Some(0), "{}", String::from_utf8_lossy(&from_profile.stderr));
    assert_eq!(from_saved.stdout, from_profile.stdout, "a saved report diffs like its profile");
    let doc: serde_json::Value = serde_json::from_slice(&from_profile.stdout).unwrap();
    let keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
    for key in [
        "verdict",
        "summary",
        "step_time_ms",
        "metrics",
        "categories",
        "ops",
        "findings",
        "memory_peak_bytes",
        "warnings",
    ] {
        assert!(keys.contains(&key), "{key} missing: {keys:?}");
    }
    for key in ["base", "new", "delta_ms", "delta_pct", "ci95_pct"] {
        assert!(doc["step_time_ms"].get(key).is_some(), "step_time_ms.{key}");
    }
    for key in ["resolved", "new", "persisting"] {
        assert!(doc["findings"][key].is_array(), "findings.{key}");
    }
    let op = &doc["ops"][0];
    for key in ["program", "name", "status", "base_ms_per_step", "new_ms_per_step", "delta_ms_per_step"] {
        assert!(op.get(key).is_some(), "ops[0].{key}");
    }
    assert_eq!(doc["verdict"], "REGRESSED");
    let html = dir.join("diff.html");
    let out = dir.join("frames");
    let gated = xlens(&[
        "diff",
        &base,
        &new,
        "--fail-on-regression",
        "50",
        "--html",
        &html.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(gated.status.code(), Some(4), "{}", String::from_utf8_lossy(&gated.stderr));
    assert!(String::from_utf8_lossy(&gated.stdout).starts_with("REGRESSED: "));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("name=\"viewport\"") && page.contains("<svg"), "a self-contained page");
    for table in ["diff_steps", "diff_metrics", "diff_categories", "diff_ops", "diff_findings"] {
        assert!(std::fs::read_dir(out.join(table)).unwrap().count() == 1, "{table}");
    }
    assert_eq!(
        xlens(&["diff", &base, &new, "--fail-on-regression", "500"]).status.code(),
        Some(0),
        "under the threshold"
    );
    assert_eq!(xlens(&["diff", &new, &base, "--fail-on-regression", "0"]).status.code(), Some(0), "an improvement");
    let bad = xlens(&["diff", &base]);
    assert_eq!(bad.status.code(), Some(2));
    std::fs::write(dir.join("junk.json"), "{\"status\": 3}").unwrap();
    let junk = xlens(&["diff", &dir.join("junk.json").display().to_string(), &new]);
    assert_eq!(junk.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&junk.stderr).contains("is not a saved `xlens scan --format json` report"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two processes of one program differ more than their steps do on a shared machine (the
/// rerun's mean is 2.6 times the first run's): one run a side calls that a regression, with a
/// warning that run-to-run noise is not in the interval; with the rerun as a repeat of the base
/// side, the two-level bootstrap widens the interval and the barrier fault's step time is no
/// longer beyond noise (its finding still is new).
#[test]
fn repeated_runs_put_run_to_run_noise_into_the_interval() {
    use xlens::report::diff::{Repeats, diff_with_repeats};
    let base = report("testdata/real/barrier_in_loop_baseline");
    let rerun = report("testdata/real/barrier_in_loop_baseline_rerun");
    let one = diff(&base, &rerun, &DiffConfig::default());
    assert_eq!(one.verdict, Verdict::Regressed, "{}", one.summary);
    assert!(one.warnings.iter().any(|w| w.starts_with("one run a side")), "{:?}", one.warnings);
    assert!(one.findings.new.is_empty() && one.findings.resolved.is_empty(), "the same program, the same findings");
    let fault = report("testdata/real/barrier_in_loop");
    let repeats = std::slice::from_ref(&rerun);
    let d = diff_with_repeats(&base, &fault, Repeats { base: repeats, new: &[] }, &DiffConfig::default());
    assert_eq!(d.step_time_ms.runs, [2, 1]);
    assert_eq!(d.verdict, Verdict::Neutral, "{}", d.summary);
    let [lo, hi] = d.step_time_ms.ci95_pct.unwrap();
    assert!(lo < 0.0 && hi > 50.0, "a wide interval: {lo} {hi}");
    assert_eq!(ids(&d.findings.new), ["barrier_in_loop"]);
    // The mean of the runs' means, each run weighing the same.
    let mean = (base.metrics.step_time_ms_mean.unwrap() + rerun.metrics.step_time_ms_mean.unwrap()) / 2.0;
    assert!((d.step_time_ms.base.unwrap() - mean).abs() < 1e-12);
    // One mean a side everywhere: the metrics table (and so the frames and the page) has the
    // step line's figure, the categories and hosts are side means too, and the step series
    // holds every run's steps.
    assert_eq!(d.metrics["step_time_ms_mean"].base, d.step_time_ms.base);
    assert_eq!(d.metrics["step_time_ms_mean"].new, d.step_time_ms.new);
    let host_base = d.hosts.iter().map(|h| h.base_ms.unwrap()).fold(0.0, f64::max);
    assert!((host_base - mean).abs() < 1e-9, "{host_base} {mean}");
    let category_mean = |r: &xlens::faults::Report, c: &str| {
        r.comparison.categories.iter().filter(|x| x.category == c).map(|x| x.ms_per_step).sum::<f64>()
    };
    for c in &d.categories {
        let expected = (category_mean(&base, &c.category) + category_mean(&rerun, &c.category)) / 2.0;
        assert!((c.base_ms_per_step - expected).abs() < 1e-9, "{}: {} {expected}", c.category, c.base_ms_per_step);
    }
    let s = &d.step_series_ms;
    assert_eq!(s.base_runs, [base.comparison.step_times_ms.len(), rerun.comparison.step_times_ms.len()]);
    assert_eq!(s.base.len(), s.base_runs.iter().sum::<usize>());
    let rows = s.rows();
    assert_eq!(rows.iter().filter(|r| r.0 == "base" && r.1 == 1).count(), rerun.comparison.step_times_ms.len());
    let frames = xlens::report::frame::diff_frames(&d).unwrap();
    let steps = &frames.iter().find(|(name, _)| *name == "diff_steps").unwrap().1;
    assert_eq!(steps.height(), rows.len());
    let names: Vec<String> = steps.get_column_names().iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["run", "repeat_index", "step_index", "step_time_ms"]);
}

/// Fixing the missing donation resolves `donation_miss`, whatever the step times of the two
/// processes say.
#[test]
fn donating_the_parameters_resolves_donation_miss() {
    let d = diff(
        &report("testdata/real/donation_miss"),
        &report("testdata/real/donation_miss_baseline"),
        &DiffConfig::default(),
    );
    assert_eq!(ids(&d.findings.resolved), ["donation_miss"]);
    assert!(d.findings.persisting.is_empty());
    assert!(d.ops.iter().filter(|o| o.status == "matched").count() > 10, "the same program's ops pair up");
}

/// Real captures without step markers compare per module execution (AMD MI300X JAX); a run of
/// one step has no interval and stays NEUTRAL, saying why.
#[test]
fn stepless_profiles_compare_per_module_execution() {
    let gemm = report("testdata/field/amd_jax08_gemm");
    let d = diff(&gemm, &gemm, &DiffConfig::default());
    assert_eq!(d.step_time_ms.time_base, ["module_executions", "module_executions"]);
    // 30 executions of the benchmark's programs; the 12 one-copy staging programs
    // (`jit_convert_element_type`) are not units of work.
    assert_eq!((d.verdict, d.step_time_ms.base_steps), (Verdict::Neutral, 30));
    assert!(d.step_time_ms.ci95_pct.is_some());
    let one = report("testdata/field/tf_v100_multiworker");
    let d = diff(&one, &one, &DiffConfig::default());
    assert_eq!((d.verdict, d.step_time_ms.ci95_pct), (Verdict::Neutral, None));
    assert!(d.warnings.iter().any(|w| w.contains("fewer than two steps")), "{:?}", d.warnings);
}

/// Two traces of one program taken in one process (a job profiled twice): NEUTRAL, the same
/// findings, every op matched.
#[test]
fn two_runs_of_the_same_program_are_neutral() {
    for pair in ["barrier_in_loop_baseline_twice", "donation_miss_baseline_twice"] {
        let a = report(&format!("testdata/real/{pair}_a"));
        let b = report(&format!("testdata/real/{pair}_b"));
        let d = diff(&a, &b, &DiffConfig::default());
        assert_eq!(d.verdict, Verdict::Neutral, "{pair}: {}", d.summary);
        let [lo, hi] = d.step_time_ms.ci95_pct.unwrap();
        assert!(lo < 0.0 && hi > 0.0, "{pair}: {lo} {hi}");
        assert!(d.findings.new.is_empty() && d.findings.resolved.is_empty(), "{pair}");
        assert!(d.ops.iter().all(|o| o.status == "matched"), "{pair}");
    }
}
