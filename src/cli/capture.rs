//! `xlens capture`: the command line over [`crate::capture_run`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::capture::{Options, Target, limits, validate_session_name};
use crate::faults::{ScanConfig, StepRange};
use crate::report::render;
use crate::{CaptureRequest, capture_run};

use super::commands::{Job, detector_ids};

/// The exit codes of `xlens capture`, as its `--help` lists them.
pub const CAPTURE_EXIT_CODES: &str = "\
Exit codes:
  0  at least one target was captured (the others are listed with their error)
  1  no target was captured, or the run could not be made or scanned (one line on stderr)
  2  a usage mistake: a bad target, a duration, level or count out of range (one line on stderr)";

/// Take a profile of running programs now: every TARGET (the `host:port` of a program that
/// serves its profiler, e.g. `jax.profiler.start_server(PORT)`) in parallel, in one session,
/// into LOGDIR/plugins/profile/SESSION/HOST.xplane.pb; `--scan` then scans the run.
#[derive(Args, Debug)]
#[command(after_help = CAPTURE_EXIT_CODES)]
pub struct CaptureCmd {
    /// The targets, `host:port` (comma-separated or repeated).
    #[arg(value_name = "TARGET", required = true, value_delimiter = ',', value_parser = parse_target)]
    targets: Vec<Target>,
    /// The capture window: a number with a unit (`500ms`, `2s`, `1m`), at most 10 min.
    #[arg(long, value_name = "DURATION", default_value = "2s", allow_hyphen_values = true, value_parser = parse_window)]
    duration: Duration,
    /// The logdir the run goes into: a directory, or an object-store URL (`s3://bucket/prefix`,
    /// `gs://…`, `az://…`; credentials from the environment), which the targets are asked to
    /// write into themselves and xlens puts the rest of the run into.
    #[arg(long, value_name = "DIR", default_value = ".")]
    logdir: PathBuf,
    /// The session (run directory) name [default: the capture's start, YYYY_MM_DD_HH_MM_SS, UTC].
    #[arg(long, value_name = "NAME", value_parser = parse_session)]
    session: Option<String>,
    /// Host (CPU) tracing: 0 off, 1 your annotations only, 2 also the program's high-level
    /// execution, 3 also the low-level details (verbose).
    #[arg(long, value_name = "0-3", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=3))]
    host_tracer_level: u32,
    /// Device tracing: 0 off, 1 on.
    #[arg(long, value_name = "0-1", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=1))]
    device_tracer_level: u32,
    /// Python function calls: 0 off, 1 traced (slows the program while it is traced).
    #[arg(long, value_name = "0-1", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1))]
    python_tracer_level: u32,
    /// Wait this long before the capture starts (`30s`, `5m`).
    #[arg(long, value_name = "DURATION", default_value = "0s", allow_hyphen_values = true, value_parser = parse_delay)]
    delay: Duration,
    /// Attempts per target: one that is down or returns an empty trace is tried again.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=i64::from(limits::MAX_ATTEMPTS)))]
    attempts: u32,
    /// How long to wait for a target's answer, capture window included.
    #[arg(long, value_name = "DURATION", default_value = "60s", allow_hyphen_values = true, value_parser = parse_timeout)]
    timeout: Duration,
    /// Scan the captured run and print its report (INCOMPLETE, naming them, when targets are
    /// missing).
    #[arg(long)]
    scan: bool,
    /// One JSON document: {"run_dir", "session", "duration_ms", "targets": [...], "report"}.
    #[arg(long)]
    json: bool,
    /// With --scan: run only these detectors (comma-separated ids).
    #[arg(long, value_name = "ID", requires = "scan", value_delimiter = ',', value_parser = detector_ids(), hide_possible_values = true)]
    only: Vec<String>,
    /// With --scan: do not run these detectors (comma-separated ids).
    #[arg(long, value_name = "ID", requires = "scan", value_delimiter = ',', value_parser = detector_ids(), hide_possible_values = true)]
    disable: Vec<String>,
    /// With --scan: analyse only these steps (`A..B`, `A..`, `..B` or `N`).
    #[arg(long, value_name = "A..B", requires = "scan", value_parser = StepRange::parse)]
    steps: Option<StepRange>,
}

pub(super) fn parse_target(s: &str) -> Result<Target, String> {
    Target::parse(s).map_err(|e| e.reason())
}

pub(super) fn parse_session(s: &str) -> Result<String, String> {
    validate_session_name(s).map(|()| s.to_owned()).map_err(|e| e.reason())
}

/// A duration with its unit (`ms`, `s`, `m`, `h`; a decimal number allowed), not negative.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => t.split_at(at),
        None => return Err(format!("{s:?} has no unit (write e.g. 500ms, 2s, 1m)")),
    };
    let scale = match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{unit:?} is not a unit of time (ms, s, m, h)")),
    };
    let value: f64 =
        number.trim().parse().map_err(|_| format!("{s:?} is not a duration (write e.g. 500ms, 2s, 1m)"))?;
    if value.is_sign_negative() {
        return Err(format!("{s:?} is negative"));
    }
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("{s:?} is not a duration"))
}

/// A duration within `min..=max`.
pub(super) fn in_range(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < min || d > max {
        let ms = |d: Duration| format!("{} ms", d.as_millis());
        return Err(format!("{s:?} is out of range ({} to {})", ms(min), ms(max)));
    }
    Ok(d)
}

pub(super) fn parse_window(s: &str) -> Result<Duration, String> {
    in_range(s, Duration::from_millis(1), limits::MAX_DURATION)
}

fn parse_delay(s: &str) -> Result<Duration, String> {
    in_range(s, Duration::ZERO, limits::MAX_DELAY)
}

pub(super) fn parse_timeout(s: &str) -> Result<Duration, String> {
    in_range(s, Duration::from_millis(1), limits::MAX_TIMEOUT)
}

impl CaptureCmd {
    fn request(self) -> CaptureRequest {
        let scan = self.scan.then(|| {
            let mut config = ScanConfig { steps: self.steps, ..ScanConfig::default() };
            if !self.only.is_empty() {
                config.only = Some(self.only);
                config.only_from = Some("--only".to_owned());
            }
            if !self.disable.is_empty() {
                config.disabled = self.disable;
                config.disabled_from = Some("--disable".to_owned());
            }
            config
        });
        CaptureRequest {
            targets: self.targets,
            logdir: self.logdir,
            session: self.session,
            options: Options {
                duration: self.duration,
                host_tracer_level: self.host_tracer_level,
                device_tracer_level: self.device_tracer_level,
                python_tracer_level: self.python_tracer_level,
                delay: self.delay,
                attempts: self.attempts,
                timeout: self.timeout,
            },
            scan,
        }
    }
}

impl Job for CaptureCmd {
    fn run(self) -> ExitCode {
        let json = self.json;
        let request = self.request();
        // What clap cannot see alone (a timeout shorter than the window, a target twice) is a
        // usage mistake too: one line, exit 2, nothing sent.
        if let Err(e) = request.spec() {
            eprintln!("error: {} (see xlens capture --help)", render::printable(&e.to_string()));
            return ExitCode::from(2);
        }
        let mut captured_any = false;
        let code = super::run(|| {
            let outcome = capture_run(&request)?;
            captured_any = outcome.any_captured();
            let text = if json {
                let mut doc = serde_json::to_string_pretty(&outcome.json())?;
                doc.push('\n');
                doc
            } else {
                let mut text = outcome.text();
                if let Some(report) = &outcome.report {
                    text.push('\n');
                    text.push_str(&render::text(report));
                }
                text
            };
            super::emit(&text)
        });
        if code == ExitCode::SUCCESS && !captured_any { ExitCode::FAILURE } else { code }
    }
}
