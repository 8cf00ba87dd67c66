//! The scan job shared by the `fault_scan` example and `xlens scan`: one implementation, two
//! command lines.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{Context, bail};
use xlens::faults::frame::Dataset;
use xlens::faults::{HostOutcome, HostProfile, ScanConfig, Severity, Status, render, scan_session_observed};
use xlens::xplane::discover;

/// The bundled sample profile (a real JAX CPU capture with a host callback in the step).
pub(crate) const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/host_callback");

/// What to scan and what to write.
pub(crate) struct ScanArgs {
    /// A `*.xplane.pb`, a session directory or a logdir.
    pub(crate) path: PathBuf,
    /// JSON on stdout instead of text.
    pub(crate) json: bool,
    /// Where to write the HTML page.
    pub(crate) html: Option<PathBuf>,
    /// Where to write the Parquet dataset.
    pub(crate) out: Option<PathBuf>,
    /// The severity (or worse) that fails the command.
    pub(crate) fail_on: Option<Severity>,
    /// No progress bar.
    pub(crate) quiet: bool,
    /// Only these hosts of the session (all when empty).
    pub(crate) hosts: Vec<String>,
    /// This run of a logdir (`<logdir>/plugins/profile/<run>`) instead of the newest.
    pub(crate) run: Option<String>,
    /// Which detectors run, with which thresholds.
    pub(crate) config: ScanConfig,
}

/// The progress of a scan, redrawn on stderr (see [`xlens::render::progress_line`]) when a host
/// starts and when it ends.
struct Progress {
    show: bool,
    total: usize,
    bytes_total: u64,
    state: Mutex<ProgressState>,
}

#[derive(Default)]
struct ProgressState {
    done: usize,
    bytes_done: u64,
    /// Hosts being read, in the order they started.
    working: Vec<String>,
}

impl Progress {
    fn new(show: bool, source: &xlens::xplane::SessionSource) -> Progress {
        let bytes_total = source.hosts.iter().filter_map(|h| std::fs::metadata(&h.path).ok()).map(|m| m.len()).sum();
        let p = Progress { show, total: source.hosts.len(), bytes_total, state: Mutex::default() };
        p.draw(&ProgressState::default());
        p
    }

    fn started(&self, host: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.working.push(host.to_owned());
        self.draw(&state);
    }

    fn finished(&self, host: &str, path: Option<&std::path::Path>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.working.retain(|h| h != host);
        state.done += 1;
        state.bytes_done += path.and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
        self.draw(&state);
    }

    fn draw(&self, state: &ProgressState) {
        if !self.show {
            return;
        }
        let working: Vec<&str> = state.working.iter().map(String::as_str).collect();
        let line = xlens::render::progress_line(state.done, self.total, state.bytes_done, self.bytes_total, &working);
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    /// Erases the line: the report follows on a clean terminal.
    fn clear(&self) {
        if self.show {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(xlens::render::PROGRESS_CLEAR.as_bytes());
            let _ = err.flush();
        }
    }
}

/// The directory of run `run` in a logdir (or in its `plugins/profile` directory); an unknown
/// run is an error that lists the runs there.
fn run_dir(logdir: &std::path::Path, run: &str) -> anyhow::Result<PathBuf> {
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
    bail!("no run {run:?} in {} (runs: {})", runs.display(), known.join(", "))
}

/// Scans, writes every output asked for, prints the report. `Ok(true)` when `--fail-on` trips
/// (the caller exits with 3).
pub(crate) fn run(args: &ScanArgs) -> anyhow::Result<bool> {
    let path = match &args.run {
        Some(run) => run_dir(&args.path, run)?,
        None => args.path.clone(),
    };
    let mut source = discover(&path).with_context(|| format!("opening {}", path.display()))?;
    if !args.hosts.is_empty() {
        if let Some(missing) = args.hosts.iter().find(|h| !source.hosts.iter().any(|s| &s.host == *h)) {
            let known: Vec<&str> = source.hosts.iter().map(|s| s.host.as_str()).collect();
            bail!("no host {missing:?} in {} (hosts: {})", args.path.display(), known.join(", "));
        }
        source.hosts.retain(|s| args.hosts.contains(&s.host));
    }
    let progress = Progress::new(!args.quiet && std::io::stderr().is_terminal(), &source);
    let paths: std::collections::BTreeMap<&str, &std::path::Path> =
        source.hosts.iter().map(|h| (h.host.as_str(), h.path.as_path())).collect();
    let frame_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let dataset = args.out.as_deref().map(Dataset::new);
    let visit = |host: &HostProfile, outcome: &HostOutcome| {
        if let Some(dataset) = &dataset
            && let Err(e) = dataset.write_host(host, &outcome.summary.skipped)
        {
            let mut slot = frame_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(anyhow::anyhow!("writing {}'s frames: {e}", host.name()));
        }
        progress.finished(host.name(), paths.get(host.name()).copied());
    };
    let started = |h: &xlens::xplane::HostSource| progress.started(&h.host);
    let report = scan_session_observed(&source, &args.config, &started, &visit);
    progress.clear();
    let report = report?;
    // Every output is attempted, whatever failed before it; the failures end the command.
    let mut failures: Vec<String> = Vec::new();
    if let Some(e) = frame_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        failures.push(e.to_string());
    }
    if let Some(dataset) = &dataset
        && let Err(e) = dataset.write_report(&report)
    {
        failures.push(format!("writing the report's frames: {e}"));
    }
    if let Some(html) = &args.html
        && let Err(e) = std::fs::write(html, render::html(&report))
    {
        failures.push(format!("writing {}: {e}", html.display()));
    }
    super::emit(&if args.json { render::json(&report) + "\n" } else { render::text(&report) })?;
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    // An incomplete profile fails any --fail-on: its verdict cannot vouch for what was lost.
    Ok(args.fail_on.is_some_and(|level| {
        report.status == Status::Incomplete || report.findings.iter().any(|f| f.severity <= level)
    }))
}
