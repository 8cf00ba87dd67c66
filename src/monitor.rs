//! Monitoring that captures by itself (feature `capture`): [`monitor`] takes short captures of
//! live targets at a fixed interval, scans each one, takes the first ones as the baseline, and
//! when a capture's step time regresses beyond noise and beyond a threshold (the diff's
//! bootstrap verdict against the baseline runs) takes a full capture at once, scans it and
//! reports it with its diff against the baseline. `xlens monitor` is thin over it.
//!
//! The library prints nothing and installs no signal handler: each capture and alert is handed
//! to the caller as a [`MonitorEvent`], and the caller's flag stops the loop between captures.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::capture::{Options, Target, session_name};
use crate::faults::{Report, ScanConfig, Status as Verdict};
use crate::report::diff::{Diff, DiffConfig, Repeats, Verdict as DiffVerdict, diff_with_repeats};
use crate::report::runs::{RunSummary, capture_time};
use crate::{CaptureError, CaptureOutcome, CaptureRequest, capture_run};

/// The most baseline captures (`--baseline`).
pub const MAX_BASELINE: usize = 1000;

/// How often the loop looks at the stop flag while it waits for the next capture.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What to monitor and how.
#[derive(Clone, Debug)]
pub struct MonitorRequest {
    /// The targets (`host:port`), captured together, one run per capture.
    pub targets: Vec<Target>,
    /// The logdir every run goes into.
    pub logdir: PathBuf,
    /// The time from one short capture's start to the next one's.
    pub every: Duration,
    /// How the short captures trace (`duration` is their window).
    pub options: Options,
    /// The short captures that make the baseline.
    pub baseline: usize,
    /// The smallest regression of the step time (in %) that raises an alert.
    pub regression_pct: f64,
    /// The full capture's window.
    pub full_duration: Duration,
    /// Stop after this many short captures (never when `None`).
    pub count: Option<usize>,
}

impl MonitorRequest {
    /// A request for `targets` into `logdir`: a 1 s capture every 60 s, 5 baseline captures,
    /// a 5 % threshold, a 5 s full capture.
    pub fn new(targets: Vec<Target>, logdir: impl Into<PathBuf>) -> MonitorRequest {
        MonitorRequest {
            targets,
            logdir: logdir.into(),
            every: Duration::from_secs(60),
            options: Options { duration: Duration::from_secs(1), ..Options::default() },
            baseline: 5,
            regression_pct: 5.0,
            full_duration: Duration::from_secs(5),
            count: None,
        }
    }

    /// Checks the request before anything is sent: the short and the full captures' options,
    /// the targets, a baseline of 1 to [`MAX_BASELINE`] captures, a threshold that is a
    /// number from 0 to 1000 %, and an interval at least as long as the short window.
    pub fn validate(&self) -> Result<(), CaptureError> {
        let bad = |what: String| Err(CaptureError::Capture(options_error(what)));
        self.short_request("check".to_owned()).spec()?;
        self.full_request("check".to_owned()).spec()?;
        if self.baseline == 0 || self.baseline > MAX_BASELINE {
            return bad(format!("the baseline must be from 1 to {MAX_BASELINE} captures, not {}", self.baseline));
        }
        if !self.regression_pct.is_finite() || !(0.0..=1000.0).contains(&self.regression_pct) {
            return bad(format!("the regression threshold must be from 0 to 1000 %, not {}", self.regression_pct));
        }
        if self.every < self.options.duration {
            return bad(format!(
                "the interval ({} ms) must be at least the capture window ({} ms)",
                self.every.as_millis(),
                self.options.duration.as_millis()
            ));
        }
        Ok(())
    }

    fn short_request(&self, session: String) -> CaptureRequest {
        CaptureRequest {
            session: Some(session),
            options: self.options.clone(),
            scan: Some(ScanConfig::default()),
            ..CaptureRequest::new(self.targets.clone(), &self.logdir)
        }
    }

    fn full_request(&self, session: String) -> CaptureRequest {
        let timeout = self.options.timeout.max(self.full_duration + Duration::from_secs(30));
        CaptureRequest {
            options: Options { duration: self.full_duration, timeout, ..self.options.clone() },
            ..self.short_request(session)
        }
    }
}

fn options_error(what: String) -> crate::capture::Error {
    crate::capture::Error::new(None, crate::capture::ErrorKind::Options(what))
}

/// What the monitor saw: a short capture, or an alert with its full capture.
#[derive(Debug)]
pub enum MonitorEvent {
    /// A short capture, scanned and summarised.
    Capture(Box<Captured>),
    /// A capture regressed: the full capture taken then, and its diff against the baseline.
    Alert(Box<Alert>),
}

/// One short capture.
#[derive(Debug)]
pub struct Captured {
    /// Its summary, as `xlens runs --json` gives one (`step_time_change_pct`: against the
    /// baseline's mean once there is a baseline, else against the capture before).
    pub summary: RunSummary,
    /// Its run directory (`None` when no target was captured and no run was left).
    pub run_dir: Option<PathBuf>,
    /// Whether it is one of the baseline captures.
    pub baseline: bool,
    /// Its diff against the baseline (after the baseline, when it could be scanned).
    pub verdict: Option<DiffVerdict>,
}

/// A regression and the full capture it triggered.
#[derive(Debug)]
pub struct Alert {
    /// The short capture that regressed.
    pub trigger: RunSummary,
    /// The trigger's diff against the baseline (what raised the alert).
    pub trigger_diff: Diff,
    /// The full capture's summary.
    pub full: RunSummary,
    /// The full capture's run directory (`None` when no target was captured).
    pub full_run_dir: Option<PathBuf>,
    /// The full capture's diff against the baseline (`None` when it could not be scanned).
    pub diff: Option<Diff>,
}

impl MonitorEvent {
    /// The event as one JSON line's object. A capture: the fields of `xlens runs --json`, then
    /// `"phase"` (`"baseline"` or `"watch"`), `"run_dir"` and `"verdict"` (the diff's against
    /// the baseline, `null` for the baseline). An alert: `{"alert": "step_time_regressed",
    /// "run", "step_time_ms", "baseline_step_time_ms", "delta_pct", "ci95_pct", "full_run",
    /// "full_run_dir", "full": <its summary>, "new_findings": [...], "diff": <the full capture's
    /// diff against the baseline, as `xlens diff --json`>}`.
    pub fn json(&self) -> Value {
        match self {
            MonitorEvent::Capture(c) => {
                let mut line = serde_json::to_value(&c.summary).unwrap_or(Value::Null);
                if let Some(object) = line.as_object_mut() {
                    object.insert("phase".into(), json!(if c.baseline { "baseline" } else { "watch" }));
                    object.insert("run_dir".into(), json!(c.run_dir.as_ref().map(|d| d.display().to_string())));
                    object.insert("verdict".into(), json!(c.verdict.map(DiffVerdict::as_str)));
                }
                line
            }
            MonitorEvent::Alert(a) => {
                let s = &a.trigger_diff.step_time_ms;
                let new_findings = a
                    .diff
                    .as_ref()
                    .map_or(Value::Array(Vec::new()), |d| serde_json::to_value(&d.findings.new).unwrap_or(Value::Null));
                json!({
                    "alert": "step_time_regressed",
                    "run": a.trigger.run,
                    "step_time_ms": s.new,
                    "baseline_step_time_ms": s.base,
                    "delta_pct": s.delta_pct,
                    "ci95_pct": s.ci95_pct,
                    "full_run": a.full.run,
                    "full_run_dir": a.full_run_dir.as_ref().map(|d| d.display().to_string()),
                    "full": serde_json::to_value(&a.full).unwrap_or(Value::Null),
                    "new_findings": new_findings,
                    "diff": a.diff.as_ref().map_or(Value::Null, |d| serde_json::to_value(d).unwrap_or(Value::Null)),
                })
            }
        }
    }
}

/// How a monitor ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorEnd {
    /// The stop flag was raised.
    Stopped,
    /// `count` short captures were taken.
    Counted,
    /// The caller's `on_event` asked to stop (its output is gone).
    Abandoned,
}

/// Monitors `request.targets` until `stop` is raised (or `request.count` captures were taken):
/// a short capture every `request.every`, each scanned and handed to `on_event`; the first
/// `request.baseline` captures with a step time make the baseline; a later capture whose diff
/// against the baseline runs (the bootstrap over runs and steps, [`diff_with_repeats`]) is
/// `REGRESSED` by at least `request.regression_pct` % triggers a full capture of
/// `request.full_duration` at once, scanned and handed over as an [`Alert`] with its diff
/// against the baseline. After an alert the next alert waits for a capture that did not
/// regress, so that one slowdown gives one full capture, unless the step time grows again by
/// more than `request.regression_pct` % over the one that alerted (a further slowdown).
///
/// `stop` is looked at between captures and while waiting: a capture under way is finished
/// (each host file is complete under its final name, or absent), then the loop ends. A
/// capture in which no target answered is a summary with status `ERROR`, and monitoring goes
/// on. `on_event` returning `false` ends the loop. The error is the request's (refused before
/// anything is sent).
///
/// ```no_run
/// use std::sync::atomic::AtomicBool;
/// use std::time::Duration;
/// use xlens::capture::Target;
/// use xlens::{MonitorEvent, MonitorRequest, monitor};
///
/// // A program that called `jax.profiler.start_server(9012)`: a 1 s capture every 10 s into
/// // `logs/` (or `s3://bucket/logs`), three of them the baseline, twenty in all.
/// let request = MonitorRequest {
///     every: Duration::from_secs(10),
///     baseline: 3,
///     count: Some(20),
///     ..MonitorRequest::new(vec![Target::parse("localhost:9012")?], "logs")
/// };
/// let stop = AtomicBool::new(false); // raised by a signal handler, or another thread
/// monitor(&request, &stop, &mut |event| {
///     if let MonitorEvent::Alert(alert) = event {
///         eprintln!("regressed: full capture in {:?}", alert.full_run_dir);
///     }
///     println!("{}", event.json());
///     true
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn monitor(
    request: &MonitorRequest,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&MonitorEvent) -> bool,
) -> Result<MonitorEnd, CaptureError> {
    request.validate()?;
    let config = DiffConfig { min_change_pct: request.regression_pct };
    let started = Instant::now();
    let mut baseline: Vec<Report> = Vec::new();
    let mut previous: Option<f64> = None;
    // Disarmed after an alert until a capture is back within noise; while disarmed, the step
    // time the last alert saw, so a further regression beyond the threshold alerts again.
    let mut armed = true;
    let mut alerted_ms: Option<f64> = None;
    let mut taken = 0usize;
    loop {
        let due = started + request.every.saturating_mul(u32::try_from(taken).unwrap_or(u32::MAX));
        if !wait_until(due, stop) {
            return Ok(MonitorEnd::Stopped);
        }
        let at = SystemTime::now();
        let run = format!("{}_{:04}", session_name(at), taken);
        let outcome = capture_run(&request.short_request(run.clone()));
        taken += 1;
        let (mut summary, run_dir, report) = summarise(&run, at, outcome);
        let in_baseline = baseline.len() < request.baseline;
        let mut trigger = None;
        let mut verdict = None;
        match report {
            // A baseline capture counts when it scanned completely with a step time.
            Some(report) if in_baseline && usable(&report) => {
                summary.step_time_change_pct = change(previous, summary.step_time_ms);
                previous = summary.step_time_ms.or(previous);
                baseline.push(report);
            }
            // Past the baseline, which therefore holds at least one run.
            Some(report) if !in_baseline => {
                let d = diff_with_repeats(&baseline[0], &report, Repeats { base: &baseline[1..], new: &[] }, &config);
                summary.step_time_change_pct = d.step_time_ms.delta_pct;
                verdict = Some(d.verdict);
                if d.verdict == DiffVerdict::Regressed {
                    if armed || worse_again(alerted_ms, summary.step_time_ms, request.regression_pct) {
                        alerted_ms = summary.step_time_ms;
                        trigger = Some(d);
                    }
                    armed = false;
                } else {
                    armed = true;
                    alerted_ms = None;
                }
            }
            _ => {}
        }
        let event = MonitorEvent::Capture(Box::new(Captured {
            summary: summary.clone(),
            run_dir,
            baseline: in_baseline,
            verdict,
        }));
        if !on_event(&event) {
            return Ok(MonitorEnd::Abandoned);
        }
        if let Some(trigger_diff) = trigger {
            let at = SystemTime::now();
            let full_run = format!("{run}_full");
            let outcome = capture_run(&request.full_request(full_run.clone()));
            let (full, full_run_dir, report) = summarise(&full_run, at, outcome);
            let diff = report
                .map(|r| diff_with_repeats(&baseline[0], &r, Repeats { base: &baseline[1..], new: &[] }, &config));
            let alert =
                MonitorEvent::Alert(Box::new(Alert { trigger: summary, trigger_diff, full, full_run_dir, diff }));
            if !on_event(&alert) {
                return Ok(MonitorEnd::Abandoned);
            }
        }
        if request.count.is_some_and(|c| taken >= c) {
            return Ok(MonitorEnd::Counted);
        }
    }
}

/// Whether a capture that regressed while the monitor was disarmed regressed further: its step
/// time exceeds the one the last alert saw by more than `regression_pct`.
fn worse_again(alerted_ms: Option<f64>, now_ms: Option<f64>, regression_pct: f64) -> bool {
    match (alerted_ms, now_ms) {
        (Some(then), Some(now)) if then > 0.0 => (now - then) / then * 100.0 > regression_pct,
        _ => false,
    }
}

/// Waits until `due`; false when `stop` was raised first (or is raised already).
fn wait_until(due: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(STOP_POLL));
    }
}

/// A run that can be a baseline: scanned completely, with a step time.
fn usable(report: &Report) -> bool {
    report.status != Verdict::Incomplete && report.metrics.step_time_ms_mean.is_some()
}

/// The change from `before` to `now`, in %.
fn change(before: Option<f64>, now: Option<f64>) -> Option<f64> {
    let (b, n) = (before.filter(|b| *b > 0.0)?, now?);
    Some(100.0 * (n - b) / b)
}

/// A capture's summary, run directory and report (when it was captured and scanned).
fn summarise(
    run: &str,
    at: SystemTime,
    outcome: Result<CaptureOutcome, CaptureError>,
) -> (RunSummary, Option<PathBuf>, Option<Report>) {
    let captured = capture_time(&session_name(at), None);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            let error = crate::report::tables::error_line(&e);
            let error = error.strip_prefix("error: ").unwrap_or(&error).to_owned();
            return (RunSummary::failed(run, captured, 0, 0, error), None, None);
        }
    };
    let c = &outcome.captured;
    let size: u64 = c.targets.iter().map(|t| t.bytes).sum();
    let run_dir = (c.captured() > 0).then(|| c.run_dir.clone());
    match outcome.report {
        Some(report) => (RunSummary::of(run, captured, size, &report), run_dir, Some(report)),
        None => {
            let error = format!("no target was captured ({})", c.failures());
            (RunSummary::failed(run, captured, c.targets.len(), 0, error), run_dir, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::worse_again;

    #[test]
    fn a_disarmed_monitor_alerts_again_only_on_a_further_regression() {
        // An alert raised by noise at 1 ms, then the program slows to 50 ms: alert again.
        assert!(worse_again(Some(1.0), Some(50.0), 20.0));
        // Still as slow as at the last alert (within the threshold): stay quiet.
        assert!(!worse_again(Some(50.0), Some(55.0), 20.0));
        // No alert yet, or no step time: nothing to compare.
        assert!(!worse_again(None, Some(50.0), 20.0));
        assert!(!worse_again(Some(50.0), None, 20.0));
        assert!(!worse_again(Some(0.0), Some(50.0), 20.0));
    }
}
