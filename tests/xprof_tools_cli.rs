//! `xlens events`, `xlens device` and `xlens memory` as real processes: their text and JSON on one profile each
//! against `tests/golden/` (`XLENS_BLESS=1` rewrites them after an intended change), and the
//! exit codes every subcommand keeps (usage mistakes: one line, exit 2; an unreadable profile:
//! one line, exit 1).

mod common;

use std::process::{Command, Output};

fn xlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).env("RUST_BACKTRACE", "1").output().unwrap()
}

fn at(rel: &str) -> String {
    common::root().join(rel).display().to_string()
}

fn run_ok(args: &[&str]) -> String {
    let o = xlens(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn events_outputs() {
    let clean = at("testdata/corpus/clean");
    common::check("events_clean.txt", &run_ok(&["events", &clean, "--top", "12"]));
    common::check("events_clean.json", &run_ok(&["events", &clean, "--top", "12", "--json"]));
    let by_line = run_ok(&["events", &clean, "--group-by", "line", "--json"]);
    common::check("events_clean_by_line.json", &by_line);
    let steps = ["events", &clean, "--list", "--pattern", "^train$"];
    common::check("events_clean_steps.txt", &run_ok(&steps));
    common::check("events_clean_lines.json", &run_ok(&["events", &clean, "--lines", "--json"]));
}

#[test]
fn device_outputs() {
    let v6e = at("testdata/field/tpu_v6e_host_offload");
    common::check("device_tpu_v6e_host_offload.txt", &run_ok(&["device", &v6e]));
    common::check("device_tpu_v6e_host_offload.json", &run_ok(&["device", &v6e, "--json"]));
}

#[test]
fn memory_outputs() {
    let attn = at("testdata/field/amd_te_fused_attn");
    common::check("memory_amd_te_fused_attn.txt", &run_ok(&["memory", &attn, "--top", "3"]));
    common::check("memory_amd_te_fused_attn.json", &run_ok(&["memory", &attn, "--top", "3", "--json"]));
}

/// A window keeps the events that start in it; the list and the aggregate agree.
#[test]
fn a_window_narrows_the_events() {
    let clean = at("testdata/corpus/clean");
    let doc = |args: &[&str]| -> serde_json::Value { serde_json::from_str(&run_ok(args)).unwrap() };
    let all = doc(&["events", &clean, "--pattern", "^train$", "--list", "--json"]);
    let starts: Vec<i64> =
        all["hosts"][0]["events"].as_array().unwrap().iter().map(|e| e["start_ps"].as_i64().unwrap()).collect();
    assert_eq!(starts.len(), 5);
    // From just after the first step's start to just after the third's: the second and third.
    let (from, to) = (format!("{}", (starts[0] + 1) as f64 / 1e9), format!("{}", (starts[2] + 1) as f64 / 1e9));
    let some = doc(&["events", &clean, "--pattern", "^train$", "--from-ms", &from, "--to-ms", &to, "--json"]);
    assert_eq!(some["hosts"][0]["aggregates"][0]["count"], 2, "{some}");
    let line = doc(&["events", &clean, "--line", "^tf_XLAEigen", "--plane", "CPU", "--group-by", "line", "--json"]);
    let lines: Vec<&str> =
        line["hosts"][0]["aggregates"].as_array().unwrap().iter().map(|a| a["line"].as_str().unwrap()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|l| l.starts_with("tf_XLAEigen")), "{lines:?}");
}

#[test]
fn usage_mistakes_are_one_line_and_exit_two() {
    let clean = at("testdata/corpus/clean");
    for (args, needle) in [
        (vec!["events"], "<PATH>"),
        (vec!["events", &clean, "--pattern", "("], "--pattern <REGEX>"),
        (vec!["events", &clean, "--pattern", "(?<=a)b"], "look-around"),
        (vec!["events", &clean, "--group-by", "plane"], "possible values: name, line"),
        (vec!["events", &clean, "--from-ms", "soon"], "--from-ms <MS>"),
        (vec!["events", &clean, "--lines", "--pattern", "x"], "cannot be used with"),
        (vec!["events", &clean, "--list", "--lines"], "cannot be used with"),
        (vec!["device"], "<PATH>"),
        (vec!["device", &clean, "--top", "3"], "--top"),
        (vec!["memory"], "<PATH>"),
        (vec!["memory", &clean, "--top", "many"], "--top <N>"),
    ] {
        let o = xlens(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(needle), "{args:?}: {needle:?} not in {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    for sub in ["events", "device", "memory"] {
        assert_eq!(xlens(&[sub, "--help"]).status.code(), Some(0), "{sub}");
        let o = xlens(&[sub, "/nonexistent/profile"]);
        assert_eq!(o.status.code(), Some(1), "{sub}");
        assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1, "{sub}");
    }
}
