//! `xlens monitor` (over [`crate::monitor`]) and `xlens snapshot` (over
//! [`crate::snapshot_run`] and the capture crate's continuous-profiling calls).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::capture::{Options, Target, start_continuous, stop_continuous};
use crate::faults::ScanConfig;
use crate::monitor::{MAX_BASELINE, MonitorRequest, monitor};
use crate::report::render;
use crate::{CaptureRequest, snapshot_run};

use super::capture::{parse_session, parse_target, parse_timeout, parse_window};
use super::commands::Job;

/// The exit codes of `xlens monitor`, as its `--help` lists them.
pub const MONITOR_EXIT_CODES: &str = "\
Exit codes:
  0  stopped by SIGINT or SIGTERM (or after --count captures); a capture that failed is a line
     with status ERROR, and monitoring goes on
  1  an error before monitoring began, or stdout could not be written (one line on stderr)
  2  a usage mistake: a bad target, a duration, count or threshold out of range (one line on stderr)";

/// The exit codes of `xlens snapshot`, as its `--help` lists them.
pub const SNAPSHOT_EXIT_CODES: &str = "\
Exit codes:
  0  every target answered (start, stop); at least one target's buffer was saved (take)
  1  a target refused or could not be reached (start, stop); no target returned data, or the run
     could not be made or scanned (take) (one line on stderr per target)
  2  a usage mistake: a bad target, a duration or count out of range (one line on stderr)";

/// Watch running programs: a short capture every `--every`, each scanned and printed as one
/// JSON line (the fields of `xlens runs --json`); the first `--baseline` ones are the
/// baseline; a capture whose step time regresses beyond noise and `--regression-pct` triggers a
/// full capture at once, printed as an alert line with its diff against the baseline and its
/// new findings. SIGINT or SIGTERM stops it (a capture under way is finished first).
#[derive(Args, Debug)]
#[command(after_help = MONITOR_EXIT_CODES)]
pub struct MonitorCmd {
    /// The targets, `host:port` (comma-separated or repeated).
    #[arg(value_name = "TARGET", required = true, value_delimiter = ',', value_parser = parse_target)]
    targets: Vec<Target>,
    /// The time from one short capture's start to the next one's (`60s`, `5m`).
    #[arg(long, value_name = "DURATION", default_value = "60s", allow_hyphen_values = true, value_parser = parse_every)]
    every: Duration,
    /// The short captures' window.
    #[arg(long, value_name = "DURATION", default_value = "1s", allow_hyphen_values = true, value_parser = parse_window)]
    duration: Duration,
    /// The logdir every run goes into: a directory or an object-store URL (`s3://bucket/prefix`).
    #[arg(long, value_name = "DIR", required = true)]
    logdir: PathBuf,
    /// The short captures that make the baseline.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=MAX_BASELINE as u64))]
    baseline: u64,
    /// The smallest step-time regression (%) that triggers a full capture (the diff's verdict
    /// must also be REGRESSED: its 95 % interval excludes zero).
    #[arg(long, value_name = "PCT", default_value_t = 5.0, value_parser = parse_pct)]
    regression_pct: f64,
    /// The full capture's window.
    #[arg(long, value_name = "DURATION", default_value = "5s", allow_hyphen_values = true, value_parser = parse_window)]
    full_duration: Duration,
    /// How long to wait for a target's answer, window included.
    #[arg(long, value_name = "DURATION", default_value = "60s", allow_hyphen_values = true, value_parser = parse_timeout)]
    timeout: Duration,
    /// Stop after this many short captures.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

fn parse_every(s: &str) -> Result<Duration, String> {
    super::capture::in_range(s, Duration::from_millis(1), Duration::from_secs(7 * 24 * 3600))
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a percentage from 0 to 1000")),
    }
}

/// Raised by SIGINT or SIGTERM while `monitor` runs.
static STOP: AtomicBool = AtomicBool::new(false);

/// Has SIGINT and SIGTERM raise [`STOP`] instead of ending the process, so that the capture
/// under way finishes (its host files complete, or absent) and the command exits 0. The
/// handler only stores to an atomic, which is async-signal-safe. The CLI owns its process; the
/// library installs no handler.
fn stop_on_signals() {
    #[cfg(unix)]
    {
        extern "C" fn on_signal(_: libc::c_int) {
            STOP.store(true, Ordering::SeqCst);
        }
        for signal in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: installs a handler with the plain signature for one signal, from a zeroed
            // (then filled) `sigaction`; the handler only stores to a static atomic.
            #[allow(unsafe_code)]
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }
}

impl MonitorCmd {
    fn request(self) -> MonitorRequest {
        MonitorRequest {
            every: self.every,
            options: Options { duration: self.duration, timeout: self.timeout, ..Options::default() },
            baseline: usize::try_from(self.baseline).unwrap_or(usize::MAX),
            regression_pct: self.regression_pct,
            full_duration: self.full_duration,
            count: self.count.map(|c| usize::try_from(c).unwrap_or(usize::MAX)),
            ..MonitorRequest::new(self.targets, self.logdir)
        }
    }
}

impl Job for MonitorCmd {
    fn run(self) -> ExitCode {
        let request = self.request();
        if let Err(e) = request.validate() {
            eprintln!("error: {} (see xlens monitor --help)", render::printable(&e.to_string()));
            return ExitCode::from(2);
        }
        stop_on_signals();
        super::run(|| {
            let mut failed = None;
            monitor(&request, &STOP, &mut |event| {
                let line = format!("{}\n", event.json());
                match super::emit(&line) {
                    Ok(()) => true,
                    Err(e) => {
                        failed = Some(e);
                        false
                    }
                }
            })?;
            failed.map_or(Ok(()), Err)
        })
    }
}

/// Continuous profiling: `start` has each target keep the last window of its device traces
/// in a buffer, `take` saves the buffers as one run and scans it, `stop` ends it.
#[derive(Args, Debug)]
#[command(after_help = SNAPSHOT_EXIT_CODES)]
pub struct SnapshotCmd {
    #[command(subcommand)]
    action: SnapshotAction,
}

/// What `xlens snapshot` does.
#[derive(Subcommand, Debug)]
enum SnapshotAction {
    /// Start continuous profiling on every target.
    Start(SnapshotTargets),
    /// Save every target's buffer as one run (LOGDIR/plugins/profile/SESSION/HOST.xplane.pb)
    /// and print its scan.
    Take(SnapshotTake),
    /// Stop continuous profiling on every target.
    Stop(SnapshotTargets),
}

/// The targets of `snapshot start` and `snapshot stop`.
#[derive(Args, Debug)]
struct SnapshotTargets {
    /// The targets, `host:port` (comma-separated or repeated).
    #[arg(value_name = "TARGET", required = true, value_delimiter = ',', value_parser = parse_target)]
    targets: Vec<Target>,
    /// How long to wait for a target's answer.
    #[arg(long, value_name = "DURATION", default_value = "60s", allow_hyphen_values = true, value_parser = parse_timeout)]
    timeout: Duration,
    /// Accepted for symmetry with `take` (nothing is written).
    #[arg(long, value_name = "DIR")]
    logdir: Option<PathBuf>,
}

/// `snapshot take`.
#[derive(Args, Debug)]
struct SnapshotTake {
    /// The targets, `host:port` (comma-separated or repeated).
    #[arg(value_name = "TARGET", required = true, value_delimiter = ',', value_parser = parse_target)]
    targets: Vec<Target>,
    /// The logdir the run goes into: a directory or an object-store URL (`s3://bucket/prefix`).
    #[arg(long, value_name = "DIR", default_value = ".")]
    logdir: PathBuf,
    /// The session (run directory) name [default: now, YYYY_MM_DD_HH_MM_SS, UTC].
    #[arg(long, value_name = "NAME", value_parser = parse_session)]
    session: Option<String>,
    /// How long to wait for a target's answer.
    #[arg(long, value_name = "DURATION", default_value = "60s", allow_hyphen_values = true, value_parser = parse_timeout)]
    timeout: Duration,
    /// One JSON document, as `xlens capture --scan --json` prints.
    #[arg(long)]
    json: bool,
}

impl Job for SnapshotCmd {
    fn run(self) -> ExitCode {
        match self.action {
            SnapshotAction::Start(t) => control("start", &t, |targets, timeout| {
                start_continuous(targets, &Options { timeout, ..Options::default() })
            }),
            SnapshotAction::Stop(t) => control("stop", &t, stop_continuous),
            SnapshotAction::Take(t) => take(t),
        }
    }
}

/// `start` or `stop`: one line per target; exit 1 when any failed.
fn control(
    what: &str,
    t: &SnapshotTargets,
    call: impl FnOnce(&[Target], Duration) -> Result<Vec<crate::capture::Control>, crate::capture::Error>,
) -> ExitCode {
    let answers = match call(&t.targets, t.timeout) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {} (see xlens snapshot --help)", render::printable(&e.to_string()));
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    let mut out = String::new();
    for a in &answers {
        match &a.error {
            None => out.push_str(&format!("{what}: {} ok\n", a.target)),
            Some(e) => {
                ok = false;
                eprintln!("error: {what} {}: {}", a.target, render::printable(&e.reason()));
            }
        }
    }
    if super::emit(&out).is_err() || !ok { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// `take`: the run, scanned; exit 1 when no target returned data.
fn take(t: SnapshotTake) -> ExitCode {
    let request = CaptureRequest {
        session: t.session,
        options: Options { timeout: t.timeout, attempts: 1, duration: Duration::from_millis(1), ..Options::default() },
        scan: Some(ScanConfig::default()),
        ..CaptureRequest::new(t.targets, t.logdir)
    };
    if let Err(e) = request.spec() {
        eprintln!("error: {} (see xlens snapshot --help)", render::printable(&e.to_string()));
        return ExitCode::from(2);
    }
    let json = t.json;
    let mut captured_any = false;
    let code = super::run(|| {
        let outcome = snapshot_run(&request)?;
        captured_any = outcome.any_captured();
        let text = if json {
            format!("{}\n", serde_json::to_string_pretty(&outcome.json())?)
        } else {
            let c = &outcome.captured;
            let full = outcome.text();
            let rest = full.split_once('\n').map_or("", |(_, rest)| rest);
            let mut text = if c.captured() == 0 {
                format!("saved no snapshot: none of {} target(s) returned data\n{rest}", c.targets.len())
            } else {
                format!(
                    "saved the snapshot of {} of {} target(s) into {}\n{rest}",
                    c.captured(),
                    c.targets.len(),
                    c.run_dir.display()
                )
            };
            if let Some(report) = &outcome.report {
                text.push('\n');
                text.push_str(&render::text(report));
            }
            text
        };
        super::emit(&text)?;
        if !captured_any {
            anyhow::bail!("no snapshot was saved: {}", outcome.captured.failures());
        }
        Ok(())
    });
    if code == ExitCode::SUCCESS && !captured_any { ExitCode::FAILURE } else { code }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_intervals_are_checked() {
        assert!(parse_pct("5").is_ok() && parse_pct("-1").is_err() && parse_pct("nan").is_err());
        assert!(parse_every("0s").is_err() && parse_every("60s").is_ok());
    }
}
