//! Files that change under a scan (issue 40, case 2): a profile truncated, or replaced by another,
//! while `xlens scan` or `xlens runs` reads it gives one error line and exit status 1 (or its
//! host skipped), never a death by signal (`SIGBUS`, exit 135, nothing on stderr).
//!
//! The files are memory-mapped, so a truncation races the scan's reads. Each case runs the real
//! binary on a synthetic profile of about 40 MB (a few seconds of scan in a debug build) and
//! changes the file after a few delays, until one run has seen the change; every run is checked.
#![cfg(unix)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A fresh directory under the system's temporary one, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("xlens-changing-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a synthetic run of one host into `logdir` and returns the host file.
fn synthetic_run(logdir: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(["synth", "--size", "40MB", "--out"])
        .arg(logdir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let host = logdir.join("plugins/profile/synthetic/host0000.xplane.pb");
    assert!(host.is_file());
    host
}

/// Runs `xlens ARGS`, and `change` once `delay` has passed; returns what the run gave.
fn run_while_changing(args: &[&std::ffi::OsStr], delay: Duration, change: impl FnOnce()) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    change();
    child.wait_with_output().unwrap()
}

/// Checks one run: no signal, exit 0 or 1, and an error is one line. True when the run
/// reported the change (its error line, or the host skipped for it).
fn check(what: &str, out: &Output) -> bool {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.signal(), None, "{what}: killed by a signal; stderr: {stderr}");
    let code = out.status.code().unwrap();
    assert!(code == 0 || code == 1, "{what}: exit {code}; stderr: {stderr}");
    if code == 1 {
        assert_eq!(stderr.lines().count(), 1, "{what}: not one line: {stderr}");
        assert!(stderr.starts_with("error: "), "{what}: {stderr}");
    }
    let said = |s: &str| s.contains("changed size while it was being read") || s.contains("changed while");
    said(&stderr) || said(&stdout)
}

const DELAYS_MS: [u64; 5] = [100, 300, 700, 1200, 2000];

#[test]
fn a_profile_truncated_during_a_scan_is_one_error_line_not_a_signal() {
    let dir = TempDir::new("truncate");
    let original = synthetic_run(&dir.0.join("run"));
    let file = dir.0.join("h.xplane.pb");
    let mut seen = 0;
    for delay in DELAYS_MS {
        std::fs::copy(&original, &file).unwrap();
        let out = run_while_changing(&["scan".as_ref(), file.as_os_str()], Duration::from_millis(delay), || {
            std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(1 << 20).unwrap();
        });
        seen += usize::from(check(&format!("truncated after {delay} ms"), &out));
    }
    assert!(seen > 0, "no run saw the truncation: the scan ended before it every time");
}

#[test]
fn a_profile_replaced_during_a_scan_is_reported_not_analysed_as_one() {
    let dir = TempDir::new("replace");
    let original = synthetic_run(&dir.0.join("run"));
    let file = dir.0.join("h.xplane.pb");
    let other = dir.0.join("other.pb");
    for command in ["scan", "ops"] {
        let mut seen = 0;
        for delay in DELAYS_MS {
            std::fs::copy(&original, &file).unwrap();
            // Another version written beside it and renamed over it (what an atomic writer
            // does): the mapping keeps the old file's pages, and the check after the analysis
            // finds the change.
            std::fs::write(&other, &std::fs::read(&original).unwrap()[..1 << 20]).unwrap();
            let out = run_while_changing(&[command.as_ref(), file.as_os_str()], Duration::from_millis(delay), || {
                std::fs::rename(&other, &file).unwrap();
            });
            seen += usize::from(check(&format!("{command}, replaced after {delay} ms"), &out));
        }
        assert!(seen > 0, "no run of {command} saw the replacement: it ended before it every time");
    }
}

#[test]
fn a_run_truncated_while_runs_lists_it_is_never_a_signal() {
    let dir = TempDir::new("runs");
    let logdir = dir.0.join("logdir");
    let host = synthetic_run(&logdir);
    let kept = dir.0.join("kept.pb");
    std::fs::copy(&host, &kept).unwrap();
    let mut seen = 0;
    for delay in DELAYS_MS {
        std::fs::copy(&kept, &host).unwrap();
        let args = ["runs".as_ref(), "--no-cache".as_ref(), logdir.as_os_str()];
        let out = run_while_changing(&args, Duration::from_millis(delay), || {
            std::fs::OpenOptions::new().write(true).open(&host).unwrap().set_len(1 << 20).unwrap();
        });
        seen += usize::from(check(&format!("runs, truncated after {delay} ms"), &out));
    }
    assert!(seen > 0, "no listing saw the truncation");
}

#[test]
fn a_profile_truncated_during_ops_is_one_error_line_not_a_signal() {
    let dir = TempDir::new("ops");
    let original = synthetic_run(&dir.0.join("run"));
    let file = dir.0.join("h.xplane.pb");
    let mut seen = 0;
    for delay in DELAYS_MS {
        std::fs::copy(&original, &file).unwrap();
        let out = run_while_changing(&["ops".as_ref(), file.as_os_str()], Duration::from_millis(delay), || {
            std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(1 << 20).unwrap();
        });
        seen += usize::from(check(&format!("ops, truncated after {delay} ms"), &out));
        if seen > 0 {
            break;
        }
    }
    assert!(seen > 0, "no run of ops saw the truncation");
}
