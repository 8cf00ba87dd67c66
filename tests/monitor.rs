//! `xlens monitor` against a real JAX program (`scripts/capture/train_server.py`): a baseline
//! of short captures, then the program slows down (its trigger file), an alert line appears
//! with a full capture that scans, and SIGTERM ends the command cleanly (exit 0, no staging
//! directory or partial file left). A monitor into an `s3://` logdir (moto's server,
//! `xlens_testkit::s3`) writes and scans each run there. Skipped where no Python imports jax
//! (`xlens_testkit::jax`; CI sets `XLENS_REQUIRE_JAX`) or moto's server (CI sets
//! `XLENS_REQUIRE_S3`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use xlens::{ScanRequest, scan_path};
use xlens_testkit::jax::{TrainServer, jax_python};
use xlens_testkit::s3::{S3Server, s3_python};

/// Every file and directory under `dir`, recursively.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(tree(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn a_slowdown_triggers_a_full_capture_and_sigterm_stops_cleanly() {
    let Some(python) = jax_python() else { return };
    let dir = std::env::temp_dir().join(format!("xlens-monitor-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trigger = dir.join("slow");
    let server = TrainServer::start(&python, Some(&trigger)).unwrap();
    let logdir = dir.join("logs");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(["monitor", &server.target(), "--every", "1s", "--duration", "500ms", "--baseline", "2"])
        .args(["--regression-pct", "20", "--full-duration", "1s", "--logdir"])
        .arg(&logdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")));
        }
    });
    let next = |what: &str| rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no {what} line"));

    // The baseline, then one capture compared with it: a steady program does not regress.
    let mut lines = Vec::new();
    for phase in ["baseline", "baseline", "watch"] {
        let line = next(phase);
        assert_eq!(line["phase"], phase, "{line}");
        assert!(line["step_time_ms"].as_f64().is_some_and(|t| t > 0.0), "{line}");
        assert_eq!(line["status"].as_str().map(|s| s != "ERROR"), Some(true), "{line}");
        lines.push(line);
    }
    // The fields of `runs --json` come first, in their order.
    let keys: Vec<&str> = lines[0].as_object().unwrap().keys().map(String::as_str).collect();
    let runs_keys = [
        "run",
        "captured",
        "hosts",
        "size_bytes",
        "status",
        "step_time_ms",
        "step_time_change_pct",
        "findings",
        "top_finding",
        "error",
        "device",
        "main_program",
    ];
    assert_eq!(keys[..runs_keys.len()], runs_keys);
    // Compared with the baseline (NEUTRAL, unless the machine's load made it differ).
    assert!(lines[2]["verdict"].is_string(), "{}", lines[2]);

    // The program slows down (each step sleeps 50 ms more): a capture regresses, and the alert
    // line follows it. An alert raised by noise before the slowdown (steps under a millisecond)
    // is not this one.
    std::fs::write(&trigger, b"").unwrap();
    let alert_deadline = Instant::now() + Duration::from_secs(90);
    let alert = loop {
        assert!(Instant::now() < alert_deadline, "no alert within 90 s of the slowdown");
        let line = next("alert");
        if line.get("alert").is_some() && line["step_time_ms"].as_f64().is_some_and(|t| t > 20.0) {
            break line;
        }
    };
    assert_eq!(alert["alert"], "step_time_regressed");
    assert!(alert["delta_pct"].as_f64().unwrap() > 20.0, "{alert}");
    assert!(alert["ci95_pct"][0].as_f64().unwrap() > 0.0, "{alert}");
    assert_eq!(alert["diff"]["verdict"], "REGRESSED", "{}", alert["diff"]["summary"]);
    assert!(alert["new_findings"].is_array());
    assert!(alert["full"]["step_time_ms"].as_f64().unwrap() > alert["baseline_step_time_ms"].as_f64().unwrap());
    let full = PathBuf::from(alert["full_run_dir"].as_str().unwrap());
    assert!(full.ends_with(format!("{}_full", alert["run"].as_str().unwrap())), "{}", full.display());
    let report = scan_path(&ScanRequest::new(&full)).unwrap().report;
    assert!(report.metrics.step_count > 5, "{} steps in the full capture", report.metrics.step_count);
    let main = report.profile.main_program.as_deref().unwrap_or_default();
    assert!(main.contains("train_step"), "main program {main:?}");
    assert_eq!(serde_json::to_value(&report).unwrap()["status"], alert["full"]["status"]);

    // SIGTERM: the command finishes the capture under way and exits 0.
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "monitor did not stop within 20 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    // Every line printed was whole JSON (the reader parsed each); nothing half-written is left:
    // no staging directory, no partial host file, no empty run.
    let top: Vec<_> = std::fs::read_dir(&logdir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(top, ["plugins"]);
    for path in tree(&logdir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.starts_with('.'), "left behind: {}", path.display());
        if path.is_dir() && path.parent().is_some_and(|p| p.ends_with("plugins/profile")) {
            assert!(std::fs::read_dir(&path).unwrap().count() > 0, "an empty run: {}", path.display());
        }
    }
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Usage mistakes exit 2 with one line, before anything is sent: an interval shorter than the
/// window, a threshold or baseline out of range, a target that is not `host:port`.
#[test]
fn usage_mistakes_exit_2() {
    let dir = std::env::temp_dir().join(format!("xlens-monitor-usage-{}", std::process::id()));
    let dir_arg = dir.display().to_string();
    for args in [
        &["localhost:1", "--every", "500ms", "--duration", "1s"][..],
        &["localhost:1", "--regression-pct", "-5"],
        &["localhost:1", "--baseline", "0"],
        &["nonsense"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_xlens"))
            .arg("monitor")
            .args(args)
            .args(["--logdir", &dir_arg])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().filter(|l| l.starts_with("error")).count(), 1, "{args:?}: {stderr}");
        assert!(o.stdout.is_empty());
    }
    assert!(!dir.exists(), "nothing was written");
}

/// `--logdir s3://…`: each capture's run is written into the store and scanned from there; its
/// line names the run by its URL.
#[test]
fn a_monitor_writes_its_runs_into_an_s3_logdir() {
    let Some(python) = jax_python() else { return };
    let Some(s3_python) = s3_python() else { return };
    let store = S3Server::start(&s3_python).unwrap();
    store.create_bucket("pod").unwrap();
    let server = TrainServer::start(&python, None).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(["monitor", &server.target(), "--every", "1s", "--duration", "300ms", "--baseline", "1"])
        .args(["--count", "2", "--logdir", "s3://pod/monitored"])
        .envs(store.env())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // One line per capture; a slower second capture (a loaded machine) adds an alert line, whose
    // full run goes into the store too.
    let (runs, alerts): (Vec<&Value>, Vec<&Value>) = lines.iter().partition(|l| l.get("alert").is_none());
    assert_eq!(runs.len(), 2, "{lines:?}");
    for (line, phase) in runs.iter().zip(["baseline", "watch"]) {
        assert_eq!(line["phase"], phase, "{line}");
        assert_ne!(line["status"], "ERROR", "{line}");
        let run = line["run"].as_str().unwrap();
        assert_eq!(line["run_dir"].as_str(), Some(format!("s3://pod/monitored/plugins/profile/{run}").as_str()));
        assert!(line["step_time_ms"].as_f64().is_some_and(|t| t > 0.0), "{line}");
    }
    for alert in alerts {
        let full = alert["full_run"].as_str().unwrap();
        assert_eq!(
            alert["full_run_dir"].as_str(),
            Some(format!("s3://pod/monitored/plugins/profile/{full}").as_str()),
            "{alert}"
        );
    }
}
