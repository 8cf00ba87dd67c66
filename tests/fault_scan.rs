//! The main job, end to end: every scenario's injected fault is reported by its id, clean
//! profiles are OPTIMAL, and the text, JSON and HTML renderings are stable (golden files).

use std::path::{Path, PathBuf};

use xlens::faults::{Profile, Report, ScanConfig, Status, render, scan};
use xlens::xplane::Session;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn report(dir: &Path) -> Report {
    let session = Session::open(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    scan(&Profile::from_session(session), &ScanConfig::default())
}

fn check(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with XLENS_BLESS=1 to create it)", path.display()));
    assert_eq!(actual, expected, "{} differs (XLENS_BLESS=1 rewrites it)", path.display());
}

/// The corpus names faults by scenario; the detectors by id.
fn detector_id(fault: &str) -> &str {
    match fault {
        "host_callback" => "host_callback_stall",
        "data_formatting" => "data_formatting_tax",
        other => other,
    }
}

fn assert_scenario(dir: &Path, expected: &[String]) {
    let r = report(dir);
    let ids: Vec<&str> = r.findings.iter().map(|f| f.id.as_str()).collect();
    if expected.is_empty() {
        assert_eq!(r.status, Status::Optimal, "{}: {}", dir.display(), r.summary);
    } else {
        assert_eq!(r.status, Status::NeedsAttention, "{}: {}", dir.display(), r.summary);
        for fault in expected {
            assert!(ids.contains(&detector_id(fault)), "{}: {fault} not reported; found {ids:?}", dir.display());
        }
    }
}

fn manifest_scenarios(path: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dir = path.parent().unwrap();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
    };
    let mut out = Vec::new();
    for s in doc["scenarios"].as_array().unwrap() {
        match s.get("variants") {
            // The shared corpus: scenarios with variants.
            Some(variants) => {
                for v in variants.as_array().unwrap() {
                    out.push((dir.join(v["trace_id"].as_str().unwrap()), strings(&v["expected_faults"])));
                }
            }
            None => out.push((dir.join(s["dir"].as_str().unwrap()), strings(&s["expected_faults"]))),
        }
    }
    out
}

#[test]
fn every_corpus_scenario_reports_its_fault_and_clean_is_optimal() {
    let scenarios = manifest_scenarios(&root().join("testdata/corpus/manifest.json"));
    assert_eq!(scenarios.len(), 6);
    for (dir, expected) in scenarios {
        assert_scenario(&dir, &expected);
    }
}

#[test]
fn every_captured_scenario_reports_its_fault_and_baselines_are_optimal() {
    let scenarios = manifest_scenarios(&root().join("testdata/real/manifest.json"));
    assert!(scenarios.len() >= 12);
    for (dir, expected) in scenarios {
        assert_scenario(&dir, &expected);
    }
}

#[test]
fn tpu_shaped_fixtures_report_their_device_faults() {
    let cases: &[(&str, &[&str])] = &[
        ("tpu_healthy", &[]),
        ("tpu_basic", &["exposed_collective"]),
        ("tpu_exposed_collective", &["exposed_collective"]),
        ("tpu_vector_bound", &["vpu_bound"]),
        ("tpu_straggler", &["straggler_core"]),
        ("tpu_dcn_tail", &["dcn_exposed_reduce"]),
        ("tpu_sparsecore", &["sparsecore_overflow"]),
        ("tpu_hbm_pressure", &["hbm_pressure"]),
    ];
    for (name, faults) in cases {
        let expected: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
        assert_scenario(&root().join("testdata/tpu").join(name), &expected);
    }
}

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
    assert_eq!(keys, ["status", "summary", "profile", "metrics", "findings", "skipped", "warnings"]);
    let finding_keys: Vec<&str> = v["findings"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(finding_keys, ["id", "severity", "title", "what", "evidence", "impact", "fix", "host"]);
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
    assert_eq!(String::from_utf8(out.stdout).unwrap(), xlens::faults::render::text(&report(&dir)));
}

/// Bad input ends every example with one clean line and status 1, even with backtraces on.
#[test]
fn errors_are_one_clean_line_even_with_backtraces_on() {
    let exe = std::env::current_exe().unwrap();
    let examples = exe.parent().unwrap().parent().unwrap().join("examples");
    let cases: [(&str, &[&str], &str); 4] = [
        ("fault_scan", &["/nonexistent/profile"], "error: opening /nonexistent/profile: "),
        ("fault_scan", &["--bogus"], "error: unexpected argument \"--bogus\"; usage: fault_scan"),
        ("op_profile", &["/nonexistent/profile"], "error: "),
        ("kernel_stats", &["--top"], "error: usage: kernel_stats"),
    ];
    for (name, args, prefix) in cases {
        let out = std::process::Command::new(examples.join(name))
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LIB_BACKTRACE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(1), "{name} {args:?}: {err}");
        assert!(err.starts_with(prefix) && err.ends_with('\n') && err.lines().count() == 1, "{name} {args:?}: {err}");
        assert!(out.stdout.is_empty(), "{name} {args:?}");
    }
}

#[test]
fn the_progress_line_fills_with_the_hosts_done() {
    use xlens::render::progress_line;
    assert_eq!(progress_line(0, 4, "h"), format!("\r[{}] 0/4 hosts  {:<24}", " ".repeat(30), "h"));
    assert!(progress_line(1, 4, "h").starts_with(&format!("\r[{}{}] 1/4", "=".repeat(7), " ".repeat(23))));
    assert_eq!(progress_line(4, 4, "h"), format!("\r[{}] 4/4 hosts  {:<24}\n", "=".repeat(30), "h"));
    // No hosts yet known, or more done than announced, never overflows the bar.
    assert!(progress_line(5, 4, "h").contains(&format!("[{}]", "=".repeat(30))));
}
