//! The native module `xlens._xlens`, wrapped by the Python package `xlens` (`pysrc/xlens`): every
//! function runs the same library code as the command lines, with the GIL released, and returns
//! the same JSON documents; errors become `xlens.XlensError` with the error's location.

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use xlens::faults::{Report, ScanConfig, StepRange, Thresholds};
use xlens::report::diff::{DiffConfig, Repeats, diff_with_repeats};
use xlens::report::frame::Dataset;
use xlens::report::render;
use xlens::source::Location;

create_exception!(_xlens, XlensError, PyException, "An xlens error: the message names the file and place.");

fn error(e: impl std::fmt::Display) -> PyErr {
    XlensError::new_err(e.to_string().split_whitespace().collect::<Vec<_>>().join(" "))
}

/// An error and its causes on one line, as the command line prints them (without `error: `).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let line = xlens::report::tables::error_line(e);
    line.strip_prefix("error: ").unwrap_or(&line).to_owned()
}

/// What `xlens.scan(config=...)` accepts: `xlens.toml` as a dict (its `[detectors]` and
/// `[thresholds]` sections; `[output]` belongs to the command line and is refused by name), or
/// the shorthand of `only` and `disable` at the top.
#[derive(Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Config {
    detectors: Detectors,
    only: Option<Vec<String>>,
    disable: Vec<String>,
    thresholds: Thresholds,
    output: Option<serde_json::Value>,
}

/// `xlens.toml`'s `[detectors]`.
#[derive(Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Detectors {
    only: Option<Vec<String>>,
    disable: Vec<String>,
}

fn scan_config(config_json: Option<&str>, steps: Option<&str>) -> PyResult<ScanConfig> {
    let mut config: Config = match config_json {
        Some(text) => serde_json::from_str(text).map_err(|e| error(format!("config: {e}")))?,
        None => Config::default(),
    };
    if config.output.is_some() {
        return Err(error(
            "config: [output] is the command line's (format, html, out, fail_on); xlens.scan takes frames= and \
             returns the report",
        ));
    }
    if config.only.is_none() {
        config.only = config.detectors.only.take();
    }
    config.disable.append(&mut config.detectors.disable);
    for id in config.only.iter().flatten().chain(&config.disable) {
        if xlens::faults::detector(id).is_none() {
            return Err(error(format!("config: {id:?} is not a detector id (see docs/detectors.md)")));
        }
    }
    let steps = steps.map(StepRange::parse).transpose().map_err(error)?;
    let from = |set: bool| set.then(|| "xlens.scan(config=...)".to_owned());
    Ok(ScanConfig {
        only_from: from(config.only.is_some()),
        disabled_from: from(!config.disable.is_empty()),
        only: config.only,
        disabled: config.disable,
        thresholds: config.thresholds,
        steps,
        // The report object can draw its page (`.html()`), so the page's data is read.
        no_page: false,
    })
}

/// A scanned run: the report, and where its frames were written.
#[pyclass(module = "xlens._xlens", frozen)]
struct NativeReport {
    report: Report,
}

#[pymethods]
impl NativeReport {
    /// The report as the JSON document of `fault_scan --format json`.
    fn json(&self) -> String {
        render::json(&self.report)
    }

    /// The report as the text `fault_scan` prints.
    fn text(&self) -> String {
        render::text(&self.report)
    }

    /// The report as a self-contained HTML page.
    fn html(&self) -> String {
        render::html(&self.report)
    }
}

/// Scans a profile (a `*.xplane.pb`, a run directory or a logdir); writes the Parquet dataset to
/// `frames_dir` when given.
#[pyfunction]
#[pyo3(signature = (path, hosts=None, config_json=None, steps=None, frames_dir=None))]
fn scan(
    py: Python<'_>,
    path: PathBuf,
    hosts: Option<Vec<String>>,
    config_json: Option<String>,
    steps: Option<String>,
    frames_dir: Option<PathBuf>,
) -> PyResult<NativeReport> {
    let config = scan_config(config_json.as_deref(), steps.as_deref())?;
    py.detach(move || {
        let request = xlens::ScanRequest { path, run: None, hosts: hosts.unwrap_or_default(), config, frames_dir };
        let scanned = xlens::scan_path(&request).map_err(|e| error(chain(&e)))?;
        if let Some(e) = scanned.output_errors.first() {
            return Err(error(e));
        }
        let report = scanned.report;
        Ok(NativeReport { report })
    })
}

/// Captures live targets (`host:port`, their profiler service) into one run of `logdir` and,
/// with `scan`, scans it: the capture's document (`xlens capture --json` without its report)
/// and the report. No target captured is an error that names each target's.
#[pyfunction]
#[pyo3(signature = (targets, duration_ms, logdir, session=None, scan=true, host_tracer_level=2, device_tracer_level=1, python_tracer_level=0, attempts=3, timeout_ms=60_000))]
#[allow(clippy::too_many_arguments)]
fn capture(
    py: Python<'_>,
    targets: Vec<String>,
    duration_ms: u64,
    logdir: PathBuf,
    session: Option<String>,
    scan: bool,
    host_tracer_level: u32,
    device_tracer_level: u32,
    python_tracer_level: u32,
    attempts: u32,
    timeout_ms: u64,
) -> PyResult<(String, Option<NativeReport>)> {
    use std::time::Duration;
    use xlens::capture::{Options, Target};
    let targets = targets.iter().map(|t| Target::parse(t.trim())).collect::<Result<Vec<_>, _>>().map_err(error)?;
    let request = xlens::CaptureRequest {
        session,
        options: Options {
            duration: Duration::from_millis(duration_ms),
            host_tracer_level,
            device_tracer_level,
            python_tracer_level,
            delay: Duration::ZERO,
            attempts,
            timeout: Duration::from_millis(timeout_ms),
        },
        scan: scan.then(ScanConfig::default),
        ..xlens::CaptureRequest::new(targets, logdir)
    };
    py.detach(move || {
        let mut outcome = xlens::capture_run(&request).map_err(|e| error(chain(&e)))?;
        if !outcome.any_captured() {
            return Err(error(format!("no target was captured ({})", outcome.captured.failures())));
        }
        let report = outcome.report.take().map(|report| NativeReport { report });
        Ok((outcome.json().to_string(), report))
    })
}

/// A report saved as JSON (`fault_scan --format json`).
#[pyfunction]
fn load_report(text: &str) -> PyResult<NativeReport> {
    Report::from_json(text).map(|report| NativeReport { report }).map_err(|e| error(format!("not a saved report: {e}")))
}

/// Two runs compared (the JSON of `xlens diff --json`); repeated runs of either side put
/// run-to-run noise into the interval.
#[pyfunction]
#[pyo3(signature = (base, new, base_repeats=Vec::new(), new_repeats=Vec::new(), min_change_pct=2.0))]
fn diff(
    py: Python<'_>,
    base: PyRef<'_, NativeReport>,
    new: PyRef<'_, NativeReport>,
    base_repeats: Vec<PyRef<'_, NativeReport>>,
    new_repeats: Vec<PyRef<'_, NativeReport>>,
    min_change_pct: f64,
) -> PyResult<String> {
    let more = |side: &[PyRef<'_, NativeReport>]| side.iter().map(|r| r.report.clone()).collect::<Vec<_>>();
    let (base_more, new_more) = (more(&base_repeats), more(&new_repeats));
    let (b, n) = (&base.report, &new.report);
    let config = DiffConfig { min_change_pct };
    py.detach(|| {
        let d = diff_with_repeats(b, n, Repeats { base: &base_more, new: &new_more }, &config);
        serde_json::to_string(&d).map_err(error)
    })
}

/// The HTML page of a diff given as its JSON.
#[pyfunction]
fn diff_html(diff_json: &str) -> PyResult<String> {
    let d: xlens::report::diff::Diff = serde_json::from_str(diff_json).map_err(error)?;
    Ok(xlens::report::diff::html(&d))
}

/// `op_profile --json`, serialized from the analyses into the string (no `Value` of a
/// document that grows with the steps).
#[pyfunction]
fn op_profile(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        let ops = xlens::documents::host_op_profiles(&path).map_err(error)?;
        serde_json::to_string(&xlens::documents::OpProfileDocument(&ops)).map_err(error)
    })
}

/// `kernel_stats --json`.
#[pyfunction]
#[pyo3(signature = (path, top=None))]
fn kernel_stats(py: Python<'_>, path: PathBuf, top: Option<usize>) -> PyResult<String> {
    py.detach(|| xlens::documents::kernels(&path, top).map(|v| v.to_string()).map_err(error))
}

/// `hlo_ops --json`, and the warnings met.
#[pyfunction]
fn hlo_modules(py: Python<'_>, path: PathBuf) -> PyResult<(String, Vec<String>)> {
    py.detach(|| xlens::documents::hlo_modules(&path).map(|(v, w)| (v.to_string(), w)).map_err(error))
}

/// `inventory --json`.
#[pyfunction]
fn inventory(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| xlens::documents::planes(&path).map(|v| v.to_string()).map_err(error))
}

/// `hbm_plan ARGS --json`: the plan (or plans) of the flags given as words.
#[pyfunction]
fn plan(py: Python<'_>, args: Vec<String>) -> PyResult<String> {
    py.detach(|| {
        let cli = xlens::args::HbmPlanArgs::parse(args).map_err(error)?;
        let plans =
            cli.requests().iter().map(xlens::budget::Plan::new).collect::<Result<Vec<_>, _>>().map_err(error)?;
        let docs: Vec<serde_json::Value> = plans.iter().map(xlens::report::tables::budget::hbm_plan_json).collect();
        Ok(match docs.as_slice() {
            [one] => one.to_string(),
            _ => serde_json::Value::Array(docs).to_string(),
        })
    })
}

/// What a worker of a distributed scan sends back for one host: its outcome, or why its file
/// could not be read.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum HostRecord {
    Outcome(Box<xlens::faults::HostOutcome>),
    Skipped(xlens::faults::SkippedHost),
}

/// A run's name and its hosts' names and files.
type RunHosts = (Option<String>, Vec<(String, String)>);

/// The run and host files behind a path (a `*.xplane.pb`, a run directory or a logdir's newest
/// run, on disk or over HTTP(S)).
#[pyfunction]
fn discover(path: PathBuf) -> PyResult<RunHosts> {
    let source = xlens::source::discover(&Location::from(&path)).map_err(error)?;
    Ok((source.run, source.hosts.into_iter().map(|h| (h.host, h.location.to_string())).collect()))
}

/// Scans one host file (on a worker) and returns its record as JSON; the host's tables go to
/// `frames_dir` (unique part files, safe beside other workers).
#[pyfunction]
#[pyo3(signature = (host, path, config_json=None, steps=None, frames_dir=None))]
fn scan_host_record(
    py: Python<'_>,
    host: String,
    path: PathBuf,
    config_json: Option<String>,
    steps: Option<String>,
    frames_dir: Option<PathBuf>,
) -> PyResult<String> {
    let config = scan_config(config_json.as_deref(), steps.as_deref())?;
    py.detach(move || {
        let source = xlens::source::HostFile { host: host.clone(), location: Location::from(&path) };
        let opened = source.open().and_then(|space| match config.steps {
            Some(range) => xlens::faults::select_steps(&space, range, Some(&path)),
            None => Ok(space),
        });
        let record = match opened {
            Err(e) => HostRecord::Skipped(xlens::faults::SkippedHost {
                host,
                file: path.display().to_string(),
                error: e.to_string().split_whitespace().collect::<Vec<_>>().join(" "),
            }),
            Ok(space) => {
                let profile = xlens::faults::HostProfile::new(host, space);
                let outcome = xlens::faults::scan_host(&profile, &config);
                if let Some(dir) = &frames_dir {
                    Dataset::new(dir).write_host(&profile, &outcome.summary.skipped).map_err(error)?;
                }
                HostRecord::Outcome(Box::new(outcome))
            }
        };
        serde_json::to_string(&record).map_err(error)
    })
}

/// The session report of host records (`scan_host_record`): exactly what a one-machine scan of
/// the same hosts gives; the report's tables go to `frames_dir`.
#[pyfunction]
#[pyo3(signature = (run, records, config_json=None, steps=None, frames_dir=None))]
fn combine_records(
    py: Python<'_>,
    run: Option<String>,
    records: Vec<String>,
    config_json: Option<String>,
    steps: Option<String>,
    frames_dir: Option<PathBuf>,
) -> PyResult<NativeReport> {
    let config = scan_config(config_json.as_deref(), steps.as_deref())?;
    py.detach(move || {
        let mut outcomes = Vec::new();
        let mut skipped = Vec::new();
        for text in &records {
            match serde_json::from_str::<HostRecord>(text).map_err(|e| error(format!("not a host record: {e}")))? {
                HostRecord::Outcome(o) => outcomes.push(*o),
                HostRecord::Skipped(s) => skipped.push(s),
            }
        }
        if outcomes.is_empty() {
            let why = skipped.first().map_or("no hosts".to_owned(), |s| format!("{}: {}", s.file, s.error));
            return Err(error(format!("no host could be read ({why})")));
        }
        skipped.sort_by(|a, b| a.host.cmp(&b.host));
        let report = xlens::faults::combine(run, outcomes, skipped, &config);
        if let Some(dir) = &frames_dir {
            Dataset::new(dir).write_report(&report).map_err(error)?;
        }
        Ok(NativeReport { report })
    })
}

/// The native half of the `xlens` package.
#[pymodule]
fn _xlens(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("XlensError", m.py().get_type::<XlensError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeReport>()?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(capture, m)?)?;
    m.add_function(wrap_pyfunction!(load_report, m)?)?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_function(wrap_pyfunction!(diff_html, m)?)?;
    m.add_function(wrap_pyfunction!(op_profile, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_stats, m)?)?;
    m.add_function(wrap_pyfunction!(hlo_modules, m)?)?;
    m.add_function(wrap_pyfunction!(inventory, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(discover, m)?)?;
    m.add_function(wrap_pyfunction!(scan_host_record, m)?)?;
    m.add_function(wrap_pyfunction!(combine_records, m)?)?;
    Ok(())
}
