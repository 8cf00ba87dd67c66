//! The main job, end to end: every scenario's injected fault is reported by its id, clean
//! profiles are OPTIMAL, and the text, JSON and HTML renderings are stable (golden files).

mod common;

use common::*;

use std::path::Path;

use xlens::faults::{Profile, Report, ScanConfig, scan};
use xlens::report::render;

fn report(dir: &Path) -> Report {
    let session = xlens_testkit::open_session(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    scan(&Profile::from_session(session), &ScanConfig::default())
}

/// The corpus names faults by scenario; the detectors by id.
#[test]
fn text_and_json_reports_are_golden() {
    for (name, rel) in [
        ("host_callback", "testdata/corpus/host_callback"),
        ("clean", "testdata/corpus/clean"),
        ("tpu_straggler", "testdata/tpu/tpu_straggler"),
        ("sharded_collectives", "testdata/real/sharded_collectives"),
    ] {
        let r = report(&root().join(rel));
        check(&format!("fault_scan_{name}.txt"), &render::text(&r));
        check(&format!("fault_scan_{name}.json"), &(render::json(&r) + "\n"));
    }
}

#[test]
fn json_contract_and_stable_order() {
    let r = report(&root().join("testdata/real/sharded_collectives"));
    let v: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "status",
            "summary",
            "profile",
            "framework",
            "metrics",
            "hosts",
            "findings",
            "skipped",
            "detectors_run",
            "disabled_by",
            "skipped_hosts",
            "errors",
            "warnings",
            "comparison"
        ]
    );
    let framework: Vec<&str> = v["framework"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(framework, ["name", "xla", "evidence"]);
    assert_eq!((&v["framework"]["name"], &v["framework"]["xla"]), (&"jax".into(), &true.into()));
    let comparison: Vec<&str> = v["comparison"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(comparison, ["step_times_ms", "categories", "ops", "ops_cutoff_ms_per_step", "cores"]);
    assert_eq!(v["comparison"]["step_times_ms"].as_array().unwrap().len(), r.metrics.step_count);
    let finding_keys: Vec<&str> = v["findings"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        finding_keys,
        ["id", "severity", "title", "what", "evidence", "impact", "fix", "host", "scope", "hosts"]
    );
    // Every host-scoped finding names its host.
    for f in v["findings"].as_array().unwrap() {
        assert_eq!(f["scope"], "host");
        assert_eq!(f["host"], "vm");
        assert_eq!(f["hosts"][0]["host"], "vm");
    }
    let impact_keys: Vec<&str> = v["findings"][0]["impact"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(impact_keys, ["ms_per_step", "pct_of_step"]);
    // Severity first (P0 before P1 before P2), then by impact.
    let severities: Vec<&str> =
        v["findings"].as_array().unwrap().iter().map(|f| f["severity"].as_str().unwrap()).collect();
    let mut sorted = severities.clone();
    sorted.sort();
    assert_eq!(severities, sorted);
    // Identical from run to run.
    let again = report(&root().join("testdata/real/sharded_collectives"));
    assert_eq!(render::json(&again), render::json(&r));
}

#[test]
fn html_is_self_contained() {
    for rel in ["testdata/tpu/tpu_straggler", "testdata/corpus/clean"] {
        let html = render::html(&report(&root().join(rel)));
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains("</html>"));
        assert!(html.contains("<svg"), "charts are inline SVG");
        for banned in ["http://", "https://", "<script", "<link", "src=", "@import"] {
            assert!(!html.contains(banned), "{rel}: the page must not load anything ({banned})");
        }
    }
    let tpu = render::html(&report(&root().join("testdata/tpu/tpu_straggler")));
    assert!(tpu.contains("roofline") && tpu.contains("<circle"), "TPU profiles get a roofline plot of the top ops");
}

/// The progress bar goes to a terminal only: with stderr piped, `fault_scan` writes nothing
/// there, and the report on stdout is the library's text rendering.
#[test]
fn fault_scan_is_silent_on_stderr_when_it_is_not_a_terminal() {
    // `cargo test` builds the examples beside the test binaries' `deps` folder.
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().unwrap().parent().unwrap().join("examples").join("fault_scan");
    assert!(
        example.exists(),
        "{} is not built: `cargo test --workspace` builds the examples (or `cargo build --example fault_scan`)",
        example.display()
    );
    let dir = root().join("testdata/corpus/clean");
    let out = std::process::Command::new(&example).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), xlens::report::render::text(&report(&dir)));
}

/// Bad input ends every example with one clean line and status 1, a usage mistake with one line
/// and status 2, even with backtraces on.
#[test]
fn errors_are_one_clean_line_even_with_backtraces_on() {
    let exe = std::env::current_exe().unwrap();
    let examples = exe.parent().unwrap().parent().unwrap().join("examples");
    // (example, arguments, the line's start, exit code: 1 for bad input, 2 for a usage mistake)
    let cases: [(&str, &[&str], &str, i32); 7] = [
        ("fault_scan", &["/nonexistent/profile"], "error: opening /nonexistent/profile: ", 1),
        ("fault_scan", &["--bogus"], "error: unexpected argument '--bogus' found", 2),
        ("op_profile", &["/nonexistent/profile"], "error: ", 1),
        ("kernel_stats", &["--top"], "error: a value is required for '--top <TOP>'", 2),
        ("hlo_ops", &[], "error: the following required arguments were not provided", 2),
        ("synth_profile", &["--out", "/tmp/x", "--size", "12XB"], "error: invalid value '12XB' for '--size", 2),
        ("hbm_plan", &["--bogus"], "error: unexpected argument '--bogus' found", 2),
    ];
    for (name, args, prefix, code) in cases {
        let out = std::process::Command::new(examples.join(name))
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(code), "{name} {args:?}: {err}");
        assert!(err.starts_with(prefix) && err.ends_with('\n') && err.lines().count() == 1, "{name} {args:?}: {err}");
        assert!(out.stdout.is_empty(), "{name} {args:?}");
    }
}

#[test]
fn the_progress_line_fills_with_the_bytes_read() {
    use xlens::report::tables::{PROGRESS_CLEAR, progress_line};
    let empty = format!("{PROGRESS_CLEAR}[{}] 0/4 hosts  0.0/4.0 MiB", " ".repeat(30));
    assert_eq!(progress_line(0, 4, 0, 4 << 20, &[]), empty);
    assert!(progress_line(1, 4, 1 << 20, 4 << 20, &["h"]).contains(&format!(
        "[{}{}] 1/4",
        "=".repeat(7),
        " ".repeat(23)
    )));
    assert!(progress_line(1, 4, 1 << 20, 4 << 20, &["h1", "h2", "h3"]).ends_with("reading h1 +2"));
    // Never past the end, nor a line feed: the line is erased when the scan ends.
    let over = progress_line(5, 4, 5 << 20, 4 << 20, &[]);
    assert!(over.contains(&format!("[{}]", "=".repeat(30))) && !over.contains('\n'));
    // Without sizes (files of 0 bytes), hosts fill the bar.
    assert!(progress_line(2, 4, 0, 0, &[]).contains(&format!("[{}{}]", "=".repeat(15), " ".repeat(15))));
}

/// Every example answers `--help` and `--version` with exit 0, and a mistyped flag with one line
/// and exit 2, as `xlens` does.
#[test]
fn every_example_answers_help_version_and_usage_mistakes() {
    let exe = std::env::current_exe().unwrap();
    let examples = exe.parent().unwrap().parent().unwrap().join("examples");
    for name in [
        "fault_scan",
        "op_profile",
        "hlo_ops",
        "inventory",
        "kernel_stats",
        "roofline_table",
        "hbm_plan",
        "precision_audit",
        "synth_profile",
        "profile_diff",
    ] {
        let run = |arg: &str| {
            std::process::Command::new(examples.join(name)).arg(arg).env("RUST_BACKTRACE", "1").output().unwrap()
        };
        let help = run("--help");
        assert_eq!(help.status.code(), Some(0), "{name} --help");
        assert!(!help.stdout.is_empty(), "{name} --help");
        let version = run("--version");
        assert_eq!(version.status.code(), Some(0), "{name} --version");
        assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), format!("{name} {}", env!("CARGO_PKG_VERSION")));
        let bogus = run("--bogus");
        let err = String::from_utf8_lossy(&bogus.stderr);
        assert_eq!(bogus.status.code(), Some(2), "{name} --bogus: {err}");
        assert!(err.starts_with("error: ") && err.lines().count() == 1, "{name}: {err}");
    }
}
