//! The on-demand capture as one library call (feature `capture`): [`capture_run`] takes a
//! [`CaptureRequest`] (the targets, the logdir, the session, how to trace, whether to scan) and
//! returns a [`CaptureOutcome`]: the run directory, each target's outcome, and the scan's
//! [`Report`] of what was captured. `xlens capture` is thin over it.
//!
//! The logdir may be an object-store URL (`s3://bucket/prefix`, `gs://…`, `az://…`; feature
//! `stores`). The URL is then sent to the targets as their repository root, as XProf's client
//! does, so that a target that can write there writes its host file itself; a target that
//! returns its trace, or cannot write to the URL, is captured into a local staging logdir and
//! its file put into the store by xlens ([`crate::source::stores::Stores::put_new`]: one put per
//! file, nothing half-written under a final key). The run is then read back from the store to
//! be scanned, and `run_dir` and each target's `file` are URLs. A store that cannot be reached
//! or written is the capture's error, never a run left on local disk instead.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::capture::{CaptureSpec, Captured, Options, Status, Target, session_name};
use crate::faults::{Report, ScanConfig, scan_session_observed};
use crate::source::{HostFile, Location};
use crate::xplane::{HostInput, Space};
use crate::{ScanError, ScanRequest};

/// What to capture, where to, and whether to scan it.
#[derive(Clone, Debug)]
pub struct CaptureRequest {
    /// The targets (`host:port`), captured in parallel in one session.
    pub targets: Vec<Target>,
    /// The logdir: the run goes to `<logdir>/plugins/profile/<session>/`; a path that spells an
    /// object-store URL (`s3://bucket/prefix`) is one (see the module's docs).
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
            remote_logdir: None,
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
    /// The logdir is an object-store URL that could not be reached, or the run could not be
    /// written there (or this build reads and writes no object stores).
    #[error("{what} {url}")]
    Store {
        /// What was being done: "reaching the logdir", "writing the run to".
        what: &'static str,
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<crate::source::Error>,
    },
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
/// the request's (refused before anything is sent), the store's (a logdir URL that cannot be
/// reached or written: [`CaptureError::Store`]), or the scan's.
///
/// ```no_run
/// use std::time::Duration;
/// use xlens::capture::{Options, Target};
/// use xlens::faults::ScanConfig;
/// use xlens::{CaptureRequest, capture_run};
///
/// // Two programs that called `jax.profiler.start_server(9012)` (and 9013), one run in `logs/`
/// // (or `s3://bucket/logs`), scanned once captured.
/// let targets = vec![Target::parse("localhost:9012")?, Target::parse("localhost:9013")?];
/// let request = CaptureRequest {
///     options: Options { duration: Duration::from_secs(2), ..Options::default() },
///     scan: Some(ScanConfig::default()),
///     ..CaptureRequest::new(targets, "logs")
/// };
/// let outcome = capture_run(&request)?;
/// println!("{}", outcome.text());
/// if let Some(report) = &outcome.report {
///     println!("{:?}: {} steps", report.status, report.metrics.step_count);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn capture_run(request: &CaptureRequest) -> Result<CaptureOutcome, CaptureError> {
    let spec = request.spec()?;
    let captured = take(&request.logdir, spec, crate::capture::capture)?;
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
    let captured = take(&request.logdir, spec, crate::capture::snapshot)?;
    scanned(request, captured)
}

/// How the targets' traces are brought: [`crate::capture::capture`] or
/// [`crate::capture::snapshot`].
type Call = fn(&CaptureSpec) -> Result<Captured, crate::capture::Error>;

/// Runs `call` into `logdir`: a local logdir as it is, an object-store URL through a local
/// staging logdir and the store ([`into_store`]).
fn take(logdir: &Path, spec: CaptureSpec, call: Call) -> Result<Captured, CaptureError> {
    match Location::from(logdir) {
        location @ (Location::Store(_) | Location::Http(_)) => into_store(&location, spec, call),
        _ => Ok(call(&spec)?),
    }
}

/// A store error of `what` at `url`.
fn store_error(what: &'static str, url: &str, source: crate::source::Error) -> CaptureError {
    CaptureError::Store { what, url: url.to_owned(), source: Box::new(source) }
}

/// The capture into the logdir URL `logdir`: the store is checked first (nothing is sent to
/// the targets when it cannot be reached), the targets are asked to write there themselves,
/// those that did not are captured into a local staging logdir (removed afterwards) and their
/// files put into the store, and the outcome names the run and its files by their URLs.
#[cfg(feature = "stores")]
fn into_store(logdir: &Location, spec: CaptureSpec, call: Call) -> Result<Captured, CaptureError> {
    use crate::source::stores::Stores;
    let url = logdir.to_string();
    if !matches!(logdir, Location::Store(_)) {
        let e = crate::source::Error::new(
            logdir,
            crate::xplane::Error::new(
                crate::xplane::ErrorKind::Unsupported(
                    "a run is written to a local logdir or an object store, not over HTTP",
                ),
                crate::xplane::Location::default().with_file(Path::new(&url)),
            ),
        );
        return Err(store_error("writing the run to", &url, e));
    }
    Stores.check_logdir(logdir).map_err(|e| store_error("reaching the logdir", &url, e))?;
    let base = url.trim_end_matches('/').to_owned();
    let staging = std::env::temp_dir().join(format!(".xlens-capture-{}-{}", spec.session, std::process::id()));
    let local = CaptureSpec { logdir: staging.clone(), remote_logdir: Some(base.clone()), ..spec };
    let result = call(&local).map_err(CaptureError::from).and_then(|captured| upload(captured, &base));
    // Best effort: the staging logdir is no part of the run, which is in the store.
    let _ = std::fs::remove_dir_all(&staging);
    result
}

/// Without the `stores` feature, a logdir URL is an error naming it.
#[cfg(not(feature = "stores"))]
fn into_store(logdir: &Location, _spec: CaptureSpec, _call: Call) -> Result<Captured, CaptureError> {
    let url = logdir.to_string();
    let e = crate::source::Error::new(
        logdir,
        crate::xplane::Error::new(
            crate::xplane::ErrorKind::Unsupported("this build writes no object stores (the `stores` feature is off)"),
            crate::xplane::Location::default().with_file(Path::new(&url)),
        ),
    );
    Err(store_error("writing the run to", &url, e))
}

/// Puts each host file captured locally into the store under
/// `<base>/plugins/profile/<session>/<host>.xplane.pb`, checks those the targets wrote there
/// themselves (their size), and names the run and its files by their URLs. A target whose
/// file the store does not have is failed with its error; a put that fails is the capture's
/// error.
#[cfg(feature = "stores")]
fn upload(mut captured: Captured, base: &str) -> Result<Captured, CaptureError> {
    use crate::capture::{Error, ErrorKind};
    use crate::source::stores::Stores;
    let run_url = format!("{base}/plugins/profile/{}", captured.session);
    for t in captured.targets.iter_mut().filter(|t| t.status == Status::Ok) {
        let url = format!("{run_url}/{}{}", t.host, crate::xplane::XPLANE_SUFFIX);
        let location = Location::parse(&url);
        if t.stored {
            match Stores.size(&location) {
                Ok(bytes) => t.bytes = bytes,
                Err(e) => {
                    let why = crate::report::tables::error_line(&e);
                    let why = why.strip_prefix("error: ").unwrap_or(&why).to_owned();
                    t.error = Some(Error::new(Some(&t.target.to_string()), ErrorKind::NotStored { url, why }));
                    t.status = Status::Failed;
                    t.file = None;
                    continue;
                }
            }
        } else if let Some(file) = &t.file {
            t.bytes = Stores.put_new(file, &location).map_err(|e| store_error("writing the run to", base, e))?;
        }
        t.file = Some(PathBuf::from(url));
    }
    captured.run_dir = PathBuf::from(run_url);
    Ok(captured)
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
