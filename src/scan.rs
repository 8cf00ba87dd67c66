//! The scan as one library call: [`scan_path`] takes a [`ScanRequest`] (what a user names: a
//! profile, a run of a logdir, some of its hosts, the detectors, where the Parquet dataset goes)
//! and returns the [`Report`]. The `xlens scan` command, the `fault_scan` example and the Python
//! package are thin over it, so they find, filter, scan and write frames the same way.
//! [`diff_paths`] does the same for `xlens diff`: a [`DiffRequest`] to a [`Diff`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::faults::{HostOutcome, HostProfile, Report, ScanConfig, ScanObserver, StepRange, scan_session_observed};
use crate::report::diff::{Diff, DiffConfig, Repeats, diff_with_repeats};
use crate::report::frame::Dataset;
use crate::source::{Location, Run, discover};
use crate::xplane::{HostInput, WalkMeter};

/// What to scan and where its frames go.
#[derive(Clone, Debug, Default)]
pub struct ScanRequest {
    /// A `*.xplane.pb`, a run directory or a logdir (its newest run), on disk or a URL.
    pub path: PathBuf,
    /// This run of the logdir (`<path>/plugins/profile/<run>`) instead of the newest.
    pub run: Option<String>,
    /// Only these hosts of the run (every host when empty).
    pub hosts: Vec<String>,
    /// Which detectors run, with which thresholds and steps.
    pub config: ScanConfig,
    /// Where to write the Hive-partitioned Parquet dataset, if anywhere.
    pub frames_dir: Option<PathBuf>,
}

/// A scan's report, with what could not be written beside it.
#[derive(Debug)]
pub struct Scanned {
    /// The report.
    pub report: Report,
    /// Outputs that failed (the frames of a host, the report's frames), one line each; the
    /// report itself is whole.
    pub output_errors: Vec<String>,
}

/// Why a scan could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The profile could not be found or listed.
    #[error("opening {location}")]
    Open {
        /// What the user named.
        location: String,
        /// Why.
        #[source]
        source: Box<crate::source::Error>,
    },
    /// The logdir has no run of that name.
    #[error("no run {run:?} in {runs} (runs: {known})")]
    NoRun {
        /// The run asked for.
        run: String,
        /// The folder of runs looked in.
        runs: String,
        /// The runs there, comma-separated.
        known: String,
    },
    /// The run has no host of that name.
    #[error("no host {host:?} in {location} (hosts: {known})")]
    NoHost {
        /// The host asked for.
        host: String,
        /// What the user named.
        location: String,
        /// The hosts there, comma-separated.
        known: String,
    },
    /// The session could not be scanned.
    #[error(transparent)]
    Scan(#[from] crate::xplane::Error),
    /// A saved report could not be read.
    #[error("reading {path}")]
    ReadReport {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A `.json` file that is not a saved report.
    #[error("{path} is not a saved `xlens scan --format json` report")]
    NotAReport {
        /// The file.
        path: String,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A saved report from an xlens that did not keep step times, which a diff needs.
    #[error("{path} was saved by an xlens without step times (no \"comparison\" section): scan the profile again")]
    NoStepTimes {
        /// The file.
        path: String,
    },
}

impl ScanRequest {
    /// A request to scan `path` with the default detectors.
    pub fn new(path: impl Into<PathBuf>) -> ScanRequest {
        ScanRequest { path: path.into(), ..ScanRequest::default() }
    }

    /// The run this request names, its hosts filtered: what [`scan_run`] scans.
    pub fn discover(&self) -> Result<Run, ScanError> {
        let path = match &self.run {
            Some(run) => run_dir(&self.path, run)?,
            None => self.path.clone(),
        };
        let mut run = discover(&Location::from(&path))
            .map_err(|source| ScanError::Open { location: path.display().to_string(), source: Box::new(source) })?;
        if !self.hosts.is_empty() {
            if let Some(missing) = self.hosts.iter().find(|h| !run.hosts.iter().any(|s| &s.host == *h)) {
                let known: Vec<&str> = run.hosts.iter().map(|s| s.host.as_str()).collect();
                return Err(ScanError::NoHost {
                    host: missing.clone(),
                    location: self.path.display().to_string(),
                    known: known.join(", "),
                });
            }
            run.hosts.retain(|s| self.hosts.contains(&s.host));
        }
        Ok(run)
    }
}

/// Scans what `request` names and writes its frames: [`ScanRequest::discover`], then
/// [`scan_run`] with no observer.
///
/// ```
/// use xlens::{ScanRequest, scan_path};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/recompilation");
/// let scanned = scan_path(&ScanRequest::new(dir))?;
/// assert!(scanned.report.findings.iter().any(|f| f.id == "recompilation"));
/// assert!(scanned.output_errors.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scan_path(request: &ScanRequest) -> Result<Scanned, ScanError> {
    scan_run(&request.discover()?, request, &Quiet)
}

/// Scans the hosts of `run` as `request` asks, in parallel and in bounded memory, telling
/// `observer` as it goes; each host's frames are written to `request.frames_dir` as soon as it
/// is scanned (before `observer` hears of it), then the report's. A host's frames or the
/// report's that cannot be written are in [`Scanned::output_errors`] (the first host's error,
/// then the report's), and the scan goes on.
pub fn scan_run(run: &Run, request: &ScanRequest, observer: &dyn ScanObserver) -> Result<Scanned, ScanError> {
    let dataset = request.frames_dir.as_deref().map(Dataset::new);
    let frames = Frames { inner: observer, dataset: dataset.as_ref(), error: Mutex::new(None) };
    let report = scan_session_observed(run.run.clone(), &run.hosts, &request.config, &frames)?;
    let mut output_errors: Vec<String> =
        frames.error.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().collect();
    if let Some(dataset) = &dataset
        && let Err(e) = dataset.write_report(&report)
    {
        output_errors.push(format!("writing the report's frames: {e}"));
    }
    Ok(Scanned { report, output_errors })
}

/// A run's report for a diff: read from a saved JSON report (`xlens scan --format json`), or
/// from scanning the profile (only `steps`, when given).
pub fn report_of(path: &Path, steps: Option<StepRange>) -> Result<Report, ScanError> {
    if path.is_file() && path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
        let shown = || path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScanError::ReadReport { path: shown(), source })?;
        let report = Report::from_json(&text).map_err(|source| ScanError::NotAReport { path: shown(), source })?;
        if report.comparison.step_times_ms.is_empty() && report.metrics.step_count > 0 {
            return Err(ScanError::NoStepTimes { path: shown() });
        }
        return Ok(report);
    }
    let request = ScanRequest { config: ScanConfig { steps, ..ScanConfig::default() }, ..ScanRequest::new(path) };
    Ok(scan_path(&request)?.report)
}

/// What `xlens diff` compares: two runs (profiles or saved JSON reports), more runs of either
/// side for run-to-run noise, the steps to keep and the verdict's noise floor.
#[derive(Clone, Debug, Default)]
pub struct DiffRequest {
    /// The base run.
    pub base: PathBuf,
    /// The new run.
    pub new: PathBuf,
    /// More runs of the base side.
    pub base_repeats: Vec<PathBuf>,
    /// More runs of the new side.
    pub new_repeats: Vec<PathBuf>,
    /// Only these steps of each profile.
    pub steps: Option<StepRange>,
    /// The verdict's noise floor.
    pub config: DiffConfig,
}

/// Compares the runs of `request` ([`report_of`] each side, then
/// [`diff_with_repeats`](crate::report::diff::diff_with_repeats)).
///
/// ```
/// use xlens::{DiffRequest, diff_paths};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/recompilation");
/// let d = diff_paths(&DiffRequest { base: dir.into(), new: dir.into(), ..DiffRequest::default() })?;
/// assert_eq!(d.verdict, xlens::report::diff::Verdict::Neutral);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn diff_paths(request: &DiffRequest) -> Result<Diff, ScanError> {
    let base = report_of(&request.base, request.steps)?;
    let new = report_of(&request.new, request.steps)?;
    let reports = |paths: &[PathBuf]| paths.iter().map(|p| report_of(p, request.steps)).collect::<Result<Vec<_>, _>>();
    let (base_more, new_more) = (reports(&request.base_repeats)?, reports(&request.new_repeats)?);
    Ok(diff_with_repeats(&base, &new, Repeats { base: &base_more, new: &new_more }, &request.config))
}

/// The observer that listens to nothing.
pub(crate) struct Quiet;

impl ScanObserver for Quiet {}

/// Writes each scanned host's frames, then hands every event to the caller's observer.
struct Frames<'a> {
    inner: &'a dyn ScanObserver,
    dataset: Option<&'a Dataset>,
    error: Mutex<Option<String>>,
}

impl ScanObserver for Frames<'_> {
    fn started(&self, host: &dyn HostInput) {
        self.inner.started(host);
    }

    fn opened(&self, host: &dyn HostInput, meter: &WalkMeter) {
        self.inner.opened(host, meter);
    }

    fn finished(&self, host: &HostProfile, outcome: &HostOutcome) {
        if let Some(dataset) = self.dataset
            && let Err(e) = dataset.write_host(host, &outcome.summary.skipped)
        {
            let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(format!("writing {}'s frames: {e}", host.name()));
        }
        self.inner.finished(host, outcome);
    }

    fn release(&self, host: HostProfile) {
        self.inner.release(host);
    }

    fn timed(&self, host: &str, phase: &str, elapsed: std::time::Duration) {
        self.inner.timed(host, phase, elapsed);
    }
}

/// The directory of run `run` in a logdir (or in its `plugins/profile` directory); an unknown
/// run is an error that lists the runs there.
fn run_dir(logdir: &Path, run: &str) -> Result<PathBuf, ScanError> {
    let profile = logdir.join("plugins").join("profile");
    let runs = if profile.is_dir() { profile } else { logdir.to_path_buf() };
    let dir = runs.join(run);
    if dir.is_dir() && !run.contains(['/', '\\']) && run != ".." {
        return Ok(dir);
    }
    let mut known: Vec<String> = std::fs::read_dir(&runs)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    known.sort();
    Err(ScanError::NoRun { run: run.to_owned(), runs: runs.display().to_string(), known: known.join(", ") })
}
