//! The on-demand capture as one library call (feature `capture`): [`capture_run`] takes a
//! [`CaptureRequest`] (the targets, the logdir, the session, how to trace, whether to scan) and
//! returns a [`CaptureOutcome`]: the run directory, each target's outcome, and the scan's
//! [`Report`] of what was captured. `xlens capture` is thin over it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::capture::{CaptureSpec, Captured, Options, Status, Target, session_name};
use crate::faults::{Report, ScanConfig, scan_session_observed};
use crate::source::HostFile;
use crate::xplane::{HostInput, Space};
use crate::{ScanError, ScanRequest};

/// What to capture, where to, and whether to scan it.
#[derive(Clone, Debug)]
pub struct CaptureRequest {
    /// The targets (`host:port`), captured in parallel in one session.
    pub targets: Vec<Target>,
    /// The logdir: the run goes to `<logdir>/plugins/profile/<session>/`.
    pub logdir: PathBuf,
    /// The session (run) name; `None`: the capture's start time, `YYYY_MM_DD_HH_MM_SS` (UTC).
    pub session: Option<String>,
    /// How to trace: the window, the tracers' levels, the delay, attempts and timeout.
    pub options: Options,
    /// Scan the run once captured, with this configuration.
    pub scan: Option<ScanConfig>,
}

impl CaptureRequest {
    /// A request for `targets` into `logdir` with the default options and no scan.
    pub fn new(targets: Vec<Target>, logdir: impl Into<PathBuf>) -> CaptureRequest {
        CaptureRequest { targets, logdir: logdir.into(), session: None, options: Options::default(), scan: None }
    }

    /// The capture this request asks for, its session named now when it has no name; checked
    /// ([`CaptureSpec::validate`]) before anything is sent.
    pub fn spec(&self) -> Result<CaptureSpec, CaptureError> {
        let spec = CaptureSpec {
            targets: self.targets.clone(),
            logdir: self.logdir.clone(),
            session: self.session.clone().unwrap_or_else(|| session_name(std::time::SystemTime::now())),
            options: self.options.clone(),
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// A capture's run, each target's outcome, and the scan's report.
#[derive(Debug)]
pub struct CaptureOutcome {
    /// The run directory, the session and each target's outcome.
    pub captured: Captured,
    /// The scan of the run (when asked for and at least one target was captured): a target not
    /// captured is a skipped host, which makes it `INCOMPLETE` and names the target.
    pub report: Option<Report>,
}

/// Why a capture could not start, or its run could not be scanned.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The request was refused (an option out of range, no target, a target twice), or the run
    /// directory could not be made.
    #[error(transparent)]
    Capture(#[from] crate::capture::Error),
    /// The captured run could not be scanned.
    #[error("scanning the captured run {run_dir}")]
    Scan {
        /// The run directory.
        run_dir: String,
        /// Why.
        #[source]
        source: Box<ScanError>,
    },
}

/// Captures every target of `request` in parallel into one run and, when asked, scans it.
///
/// A target that is down, times out or returns an empty trace is in the outcome with its
/// error; the run holds the others, and the scan lists the missing ones as skipped hosts
/// (their error naming the target), so the report is `INCOMPLETE`. With every target
/// captured, the report is exactly that of scanning the run directory afterwards. The error is
/// the request's (refused before anything is sent), or the scan's.
pub fn capture_run(request: &CaptureRequest) -> Result<CaptureOutcome, CaptureError> {
    let spec = request.spec()?;
    let captured = crate::capture::capture(&spec)?;
    scanned(request, captured)
}

/// `xlens snapshot take`: saves every target's continuous-profiling buffer as one run
/// ([`crate::capture::snapshot`]) and, when asked, scans it, as [`capture_run`] does with an
/// on-demand capture (`request.options`' window and tracer levels are not used). A target that
/// returns no data is `empty` with its error (its runtime keeps no buffer, or continuous
/// profiling was not started), never an empty host file; with no target captured the outcome
/// has no run and no report ([`CaptureOutcome::any_captured`] is false).
pub fn snapshot_run(request: &CaptureRequest) -> Result<CaptureOutcome, CaptureError> {
    let spec = request.spec()?;
    let captured = crate::capture::snapshot(&spec)?;
    scanned(request, captured)
}

/// The outcome of `captured`, scanned when `request` asks.
fn scanned(request: &CaptureRequest, captured: Captured) -> Result<CaptureOutcome, CaptureError> {
    let report = match &request.scan {
        Some(config) if captured.captured() > 0 => Some(scan_captured(&captured, config).map_err(|source| {
            CaptureError::Scan { run_dir: captured.run_dir.display().to_string(), source: Box::new(source) }
        })?),
        _ => None,
    };
    Ok(CaptureOutcome { captured, report })
}

/// Scans the run's host files, with each target not captured as a host that could not be read.
fn scan_captured(captured: &Captured, config: &ScanConfig) -> Result<Report, ScanError> {
    let run = ScanRequest::new(&captured.run_dir).discover()?;
    let mut hosts: Vec<CaptureHost> = run.hosts.into_iter().map(CaptureHost::File).collect();
    for t in captured.targets.iter().filter(|t| t.status != Status::Ok) {
        let error = t.error.as_ref().map_or_else(|| "not captured".to_owned(), ToString::to_string);
        hosts.push(CaptureHost::Missing {
            host: t.host.clone(),
            file: captured.run_dir.join(format!("{}{}", t.host, crate::xplane::XPLANE_SUFFIX)),
            error,
        });
    }
    hosts.sort_by(|a, b| a.host().cmp(b.host()));
    Ok(scan_session_observed(run.run, &hosts, config, &crate::scan::Quiet)?)
}

/// A host of a captured run: its file, or a target that gave none.
enum CaptureHost {
    File(HostFile),
    Missing { host: String, file: PathBuf, error: String },
}

impl HostInput for CaptureHost {
    fn host(&self) -> &str {
        match self {
            CaptureHost::File(f) => &f.host,
            CaptureHost::Missing { host, .. } => host,
        }
    }

    fn display(&self) -> String {
        match self {
            CaptureHost::File(f) => f.display(),
            CaptureHost::Missing { file, .. } => file.display().to_string(),
        }
    }

    fn path(&self) -> Option<&Path> {
        match self {
            CaptureHost::File(f) => HostInput::path(f),
            CaptureHost::Missing { .. } => None,
        }
    }

    fn open(&self) -> crate::xplane::Result<Space> {
        match self {
            CaptureHost::File(f) => f.open(),
            CaptureHost::Missing { file, error, .. } => Err(crate::xplane::Error::io(
                std::io::Error::new(std::io::ErrorKind::NotFound, format!("not captured: {error}")),
                file,
            )),
        }
    }
}

impl CaptureOutcome {
    /// True when at least one target's host file is in the run (`xlens capture` exits 0).
    pub fn any_captured(&self) -> bool {
        self.captured.captured() > 0
    }

    /// The JSON document of `xlens capture --json`: `{"run_dir", "session", "duration_ms",
    /// "targets": [{"target", "host", "status", "file", "bytes", "error"}], "report"}`, keys in
    /// that order; `status` is `"ok"`, `"empty"` or `"failed"`, `file` and `error` are `null`
    /// when there is none, and `report` is the scan's JSON document, `null` without a scan.
    pub fn json(&self) -> Value {
        let c = &self.captured;
        let targets: Vec<Value> = c
            .targets
            .iter()
            .map(|t| {
                json!({
                    "target": t.target.to_string(),
                    "host": t.host,
                    "status": t.status.as_str(),
                    "file": t.file.as_ref().map(|f| f.display().to_string()),
                    "bytes": t.bytes,
                    "error": t.error.as_ref().map(crate::capture::Error::reason),
                })
            })
            .collect();
        json!({
            "run_dir": c.run_dir.display().to_string(),
            "session": c.session,
            "duration_ms": u64::try_from(c.duration.as_millis()).unwrap_or(u64::MAX),
            "targets": targets,
            "report": self.report.as_ref().map_or(Value::Null, |r| serde_json::to_value(r).unwrap_or(Value::Null)),
        })
    }

    /// What `xlens capture` prints before the report: where the run is, then one line per
    /// target (its status, host file and size, or its error).
    pub fn text(&self) -> String {
        let c = &self.captured;
        let mut out = format!(
            "captured {} of {} target(s), {} ms each, into {}\n",
            c.captured(),
            c.targets.len(),
            c.duration.as_millis(),
            c.run_dir.display()
        );
        let width = c.targets.iter().map(|t| t.target.to_string().len()).max().unwrap_or(0);
        for t in &c.targets {
            let what = match (&t.file, &t.error) {
                (Some(file), _) => format!(
                    "{} ({} bytes)",
                    file.file_name().map_or_else(|| file.display().to_string(), |f| f.to_string_lossy().into_owned()),
                    t.bytes
                ),
                (None, Some(e)) => e.reason(),
                (None, None) => String::new(),
            };
            let line = format!("  {:<6}  {:<width$}  {what}", t.status.as_str(), t.target.to_string());
            out.push_str(&crate::report::render::printable(line.trim_end()));
            out.push('\n');
        }
        out
    }
}
