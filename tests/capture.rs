//! `xlens capture` and `capture_run` against real JAX programs (`scripts/capture/train_server.py`
//! serving `jax.profiler.start_server`): one and two live targets, a closed port beside a live
//! one, no target at all, a program whose tracers are all off (its trace is empty), and a logdir
//! in an S3-compatible store (moto's server, `xlens_testkit::s3`). The tests that need a live
//! program skip with a message where no Python imports jax (`xlens_testkit::jax`; CI sets
//! `XLENS_REQUIRE_JAX`, so there they fail instead), and those that need the store where no
//! Python imports moto's server (CI sets `XLENS_REQUIRE_S3`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use xlens::capture::{Options, Status, Target};
use xlens::faults::{ScanConfig, Status as Verdict};
use xlens::{CaptureRequest, ScanRequest, capture_run, scan_path};
use xlens_testkit::jax::{TrainServer, free_port, jax_python};
use xlens_testkit::s3::{S3Server, env_for, s3_python};

/// An empty logdir of its own for each test.
fn logdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-capture-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn request(targets: &[String], logdir: &Path, session: &str) -> CaptureRequest {
    CaptureRequest {
        session: Some(session.to_owned()),
        options: Options { duration: Duration::from_secs(1), ..Options::default() },
        scan: Some(ScanConfig::default()),
        ..CaptureRequest::new(targets.iter().map(|t| Target::parse(t).unwrap()).collect(), logdir)
    }
}

fn xlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).output().unwrap()
}

/// `xlens` with the environment `env` added (an object store's endpoint and credentials).
fn xlens_with(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_xlens"));
    command.args(args);
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// The `*.xplane.pb` file names of a directory, sorted.
fn host_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".xplane.pb"))
        .collect();
    names.sort();
    names
}

/// One live program, then two: each capture is one run directory holding one complete host file
/// per target; its scan finds the steps and names the jitted training function's module; and
/// the two-target capture's report is exactly that of scanning its directory afterwards.
#[test]
fn live_programs_are_captured_into_one_run_and_scanned() {
    let Some(python) = jax_python() else { return };
    let (a, b) = (TrainServer::start(&python, None).unwrap(), TrainServer::start(&python, None).unwrap());
    let dir = logdir("live");

    let one = capture_run(&request(&[a.target()], &dir, "one")).unwrap();
    assert_eq!(one.captured.run_dir, std::path::absolute(dir.join("plugins/profile/one")).unwrap());
    assert_eq!(host_files(&one.captured.run_dir), [format!("localhost_{}.xplane.pb", a.port())]);
    let t = &one.captured.targets[0];
    assert_eq!((t.status, t.bytes > 0, t.error.is_none()), (Status::Ok, true, true), "{:?}", t.error);
    let report = one.report.as_ref().unwrap();
    assert!(report.metrics.step_count > 10, "{} steps in a 1 s window", report.metrics.step_count);
    let main = report.profile.main_program.as_deref().unwrap_or_default();
    assert!(main.contains("train_step"), "main program {main:?}");

    let two = capture_run(&request(&[a.target(), b.target()], &dir, "two")).unwrap();
    let run_dir = &two.captured.run_dir;
    let expected = [format!("localhost_{}.xplane.pb", a.port()), format!("localhost_{}.xplane.pb", b.port())];
    let mut expected = expected.to_vec();
    expected.sort();
    assert_eq!(host_files(run_dir), expected);
    assert_eq!(std::fs::read_dir(run_dir).unwrap().count(), 2, "nothing but the host files");
    assert!(two.captured.targets.iter().all(|t| t.status == Status::Ok));
    let report = two.report.as_ref().unwrap();
    assert_eq!(report.profile.hosts.len(), 2);
    assert!(report.metrics.step_count > 10);
    assert!(report.profile.main_program.as_deref().unwrap_or_default().contains("train_step"));
    let afterwards = scan_path(&ScanRequest::new(run_dir)).unwrap().report;
    assert_eq!(serde_json::to_string(report).unwrap(), serde_json::to_string(&afterwards).unwrap());
    // The logdir holds the two runs and nothing else (no staging directory left).
    let top: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(top, ["plugins"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A live program beside a closed port: the command exits 0 with the live target's file; the
/// closed one is listed as failed with its error, and the scan is INCOMPLETE and names it.
#[test]
fn a_closed_port_beside_a_live_program_is_a_partial_capture() {
    let Some(python) = jax_python() else { return };
    let live = TrainServer::start(&python, None).unwrap();
    let closed = format!("localhost:{}", free_port());
    let dir = logdir("partial");
    let targets = format!("{},{closed}", live.target());
    let dir_arg = dir.display().to_string();
    let o = xlens(&[
        "capture",
        &targets,
        "--duration",
        "1s",
        "--logdir",
        &dir_arg,
        "--session",
        "partial",
        "--scan",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys: Vec<&str> = doc.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["run_dir", "session", "duration_ms", "targets", "report"]);
    assert_eq!((doc["session"].as_str(), doc["duration_ms"].as_u64()), (Some("partial"), Some(1000)));
    let run_dir = PathBuf::from(doc["run_dir"].as_str().unwrap());
    assert_eq!(run_dir, std::path::absolute(dir.join("plugins/profile/partial")).unwrap());
    let rows = doc["targets"].as_array().unwrap();
    let row_keys: Vec<&str> = rows[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(row_keys, ["target", "host", "status", "file", "bytes", "error"]);
    let live_file = run_dir.join(format!("localhost_{}.xplane.pb", live.port()));
    assert_eq!(rows[0]["target"], live.target());
    assert_eq!(rows[0]["status"], "ok");
    assert_eq!(rows[0]["file"].as_str(), Some(live_file.to_str().unwrap()));
    assert_eq!(rows[0]["bytes"].as_u64(), Some(std::fs::metadata(&live_file).unwrap().len()));
    assert!(rows[0]["error"].is_null());
    assert_eq!(rows[1]["target"], closed.as_str());
    assert_eq!(rows[1]["status"], "failed");
    assert!(rows[1]["file"].is_null() && rows[1]["bytes"] == 0);
    assert!(rows[1]["error"].as_str().unwrap().contains("cannot connect"), "{}", rows[1]["error"]);
    assert_eq!(host_files(&run_dir), [format!("localhost_{}.xplane.pb", live.port())]);
    let report = &doc["report"];
    assert_eq!(report["status"], "INCOMPLETE");
    let skipped = report["skipped_hosts"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    let missing_host = closed.replace(':', "_");
    assert_eq!(skipped[0]["host"], missing_host.as_str());
    assert!(skipped[0]["error"].as_str().unwrap().contains(&closed), "{}", skipped[0]["error"]);
    assert!(report["summary"].as_str().unwrap().contains(&missing_host), "{}", report["summary"]);
    assert!(report["profile"]["main_program"].as_str().unwrap().contains("train_step"));

    // The same as text: one line per target, then the report.
    let o = xlens(&["capture", &targets, "--duration", "1s", "--logdir", &dir_arg, "--session", "text", "--scan"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("captured 1 of 2 target(s)"), "{text}");
    assert!(text.contains(&format!("  failed  {closed}")) && text.contains("INCOMPLETE"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// No target answers: exit 1, every target listed as failed, no report and no run left.
#[test]
fn no_live_target_exits_1_and_leaves_no_run() {
    let dir = logdir("down");
    let targets = format!("localhost:{},127.0.0.1:{}", free_port(), free_port());
    let dir_arg = dir.display().to_string();
    let o = xlens(&[
        "capture",
        &targets,
        "--duration",
        "100ms",
        "--attempts",
        "1",
        "--logdir",
        &dir_arg,
        "--scan",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let statuses: Vec<&str> =
        doc["targets"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "failed"]);
    assert!(doc["report"].is_null());
    // The default session is a capture time, as XProf names runs.
    let session = doc["session"].as_str().unwrap();
    assert!(session.len() == 19 && session.chars().filter(|&c| c == '_').count() == 5, "{session}");
    assert!(!Path::new(doc["run_dir"].as_str().unwrap()).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Usage mistakes exit 2 with one line, before anything is sent.
#[test]
fn usage_mistakes_exit_2_with_one_line() {
    for args in [
        &["capture", "localhost"][..],
        &["capture", "localhost:0"],
        &["capture", "localhost:9012", "--duration", "-2s"],
        &["capture", "localhost:9012", "--duration", "3h"],
        &["capture", "localhost:9012", "--duration", "2"],
        &["capture", "localhost:9012", "--host-tracer-level", "4"],
        &["capture", "localhost:9012", "--device-tracer-level", "2"],
        &["capture", "localhost:9012", "--python-tracer-level", "2"],
        &["capture", "localhost:9012", "--attempts", "0"],
        &["capture", "localhost:9012", "--duration", "2m", "--timeout", "1m"],
        &["capture", "localhost:9012,localhost:9012"],
        &["capture", "localhost:9012", "--session", "../up"],
        &["capture", "localhost:9012", "--only", "padding_waste"],
    ] {
        let o = xlens(args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// A run with one host's `*.xplane.riegeli` beside another's `*.xplane.pb` (as a capture's run
/// may hold): the scan lists that host as skipped, "not supported yet", and is INCOMPLETE.
#[test]
fn a_riegeli_host_in_a_run_is_refused_not_ignored() {
    let dir = logdir("riegeli");
    let run = dir.join("plugins/profile/2026_01_01_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/host_callback");
    let file = std::fs::read_dir(&sample)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".xplane.pb"))
        .unwrap();
    std::fs::copy(&file, run.join("host0.xplane.pb")).unwrap();
    std::fs::write(run.join("host1.xplane.riegeli"), b"riegeli records").unwrap();
    let report = scan_path(&ScanRequest::new(&dir)).unwrap().report;
    assert_eq!(report.status, Verdict::Incomplete);
    assert_eq!(report.skipped_hosts.len(), 1);
    assert_eq!(report.skipped_hosts[0].host, "host1");
    assert!(report.skipped_hosts[0].error.contains("not supported yet"), "{}", report.skipped_hosts[0].error);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A live program with every tracer off (`--host-tracer-level 0 --device-tracer-level 0`): its
/// service answers with `empty_trace` set (jax 0.10.2 still writes a file of metadata planes,
/// which is no host file of the run), so the target is `empty` with its error, no run is left,
/// and the command exits 1.
#[test]
fn a_program_with_every_tracer_off_is_an_empty_target() {
    let Some(python) = jax_python() else { return };
    let live = TrainServer::start(&python, None).unwrap();
    let dir = logdir("empty");
    let dir_arg = dir.display().to_string();
    let o = xlens(&[
        "capture",
        &live.target(),
        "--duration",
        "500ms",
        "--host-tracer-level",
        "0",
        "--device-tracer-level",
        "0",
        "--attempts",
        "2",
        "--logdir",
        &dir_arg,
        "--session",
        "empty",
        "--scan",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &doc["targets"][0];
    assert_eq!(row["status"], "empty", "{row}");
    assert!(row["file"].is_null() && row["bytes"] == 0, "{row}");
    let error = row["error"].as_str().unwrap();
    assert!(error.contains("the trace was empty in each of 2 attempt(s)"), "{error}");
    assert!(doc["report"].is_null());
    assert!(!Path::new(doc["run_dir"].as_str().unwrap()).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A logdir in an S3-compatible store: one live program, then two. jax's CPU runtime cannot
/// write to `s3://` (it answers the call with `Internal`, "File system scheme 's3' not
/// implemented"), so each target is captured again into a local staging logdir and xlens puts
/// its file into the store. `run_dir` and each `file` are URLs; the run's scan (read back from
/// the store) equals scanning the run in the store afterwards; nothing is left on local disk.
#[test]
fn live_programs_are_captured_into_an_s3_logdir() {
    let Some(python) = jax_python() else { return };
    let Some(s3_python) = s3_python() else { return };
    let store = S3Server::start(&s3_python).unwrap();
    store.create_bucket("pod").unwrap();
    let env = store.env();
    let (a, b) = (TrainServer::start(&python, None).unwrap(), TrainServer::start(&python, None).unwrap());
    for (session, targets) in [("s3-one", vec![a.target()]), ("s3-two", vec![a.target(), b.target()])] {
        let o = xlens_with(
            &[
                "capture",
                &targets.join(","),
                "--duration",
                "1s",
                "--logdir",
                "s3://pod/logs/",
                "--session",
                session,
                "--scan",
                "--json",
            ],
            &env,
        );
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        let run_dir = format!("s3://pod/logs/plugins/profile/{session}");
        assert_eq!(doc["run_dir"].as_str(), Some(run_dir.as_str()));
        let rows = doc["targets"].as_array().unwrap();
        assert_eq!(rows.len(), targets.len());
        for (row, target) in rows.iter().zip(&targets) {
            let host = target.replace(':', "_");
            assert_eq!(row["status"], "ok", "{row}");
            assert_eq!(row["file"].as_str(), Some(format!("{run_dir}/{host}.xplane.pb").as_str()));
            assert!(row["bytes"].as_u64().unwrap() > 1000, "{row}");
        }
        let report = &doc["report"];
        assert_eq!(report["profile"]["hosts"].as_array().unwrap().len(), targets.len(), "{}", report["profile"]);
        assert!(report["metrics"]["step_count"].as_u64().unwrap() > 10, "{}", report["metrics"]);
        assert!(report["profile"]["main_program"].as_str().unwrap().contains("train_step"));
        let afterwards = xlens_with(&["scan", &run_dir, "--format", "json"], &env);
        assert!(afterwards.status.success(), "{}", String::from_utf8_lossy(&afterwards.stderr));
        let afterwards: Value = serde_json::from_slice(&afterwards.stdout).unwrap();
        assert_eq!(report, &afterwards);
        // The staging logdir is gone.
        let left = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!(".xlens-capture-{session}-")))
            .collect::<Vec<_>>();
        assert!(left.is_empty(), "{left:?}");
    }
    // A capture never overwrites a host file, in the store too: the same session again fails.
    let o = xlens_with(
        &["capture", &a.target(), "--duration", "200ms", "--logdir", "s3://pod/logs", "--session", "s3-one"],
        &env,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("s3://pod/logs") && stderr.contains("exists already"), "{stderr}");
}

/// A logdir URL whose store cannot be reached: one line naming the URL, exit 1, before any
/// target is asked (the target here is a closed port, which would be a different error).
#[test]
fn an_unreachable_store_is_one_line_and_exit_1() {
    let closed_store = format!("http://127.0.0.1:{}", free_port());
    let dir = logdir("unreachable");
    let started = std::time::Instant::now();
    let o = xlens_with(
        &["capture", &format!("localhost:{}", free_port()), "--duration", "100ms", "--logdir", "s3://pod/logs"],
        &env_for(&closed_store),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: reaching the logdir s3://pod/logs"), "{stderr}");
    assert!(!stderr.contains("cannot connect (is the program"), "the targets were not asked: {stderr}");
    assert!(o.stdout.is_empty());
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    assert!(!dir.exists());
    // An HTTP URL cannot be written: one line too.
    let o = xlens(&["capture", "localhost:9012", "--logdir", "https://example.invalid/logs"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("https://example.invalid/logs") && stderr.contains("not over HTTP"), "{stderr}");
}
