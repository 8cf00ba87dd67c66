//! The scan job shared by the `fault_scan` example and `xlens scan`: one implementation, two
//! command lines.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::faults::{HostOutcome, HostProfile, ScanConfig, ScanObserver, Severity, Status};
use crate::report::render;
use crate::xplane::{HostInput, WalkMeter};
use crate::{ScanRequest, Scanned};
use anyhow::bail;

/// The bundled sample profile (a real JAX CPU capture with a host callback in the step).
pub(crate) const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/host_callback");

/// What to scan and what to write.
pub(crate) struct ScanArgs {
    /// A `*.xplane.pb`, a session directory or a logdir.
    pub(crate) path: PathBuf,
    /// The format of the report on stdout.
    pub(crate) format: &'static crate::report::render::Format,
    /// Where to write the HTML page.
    pub(crate) html: Option<PathBuf>,
    /// Where to write the Parquet dataset.
    pub(crate) out: Option<PathBuf>,
    /// The severity (or worse) that fails the command.
    pub(crate) fail_on: Option<Severity>,
    /// No progress bar.
    pub(crate) quiet: bool,
    /// Each phase's wall time on stderr.
    pub(crate) timings: bool,
    /// Only these hosts of the session (all when empty).
    pub(crate) hosts: Vec<String>,
    /// This run of a logdir (`<logdir>/plugins/profile/<run>`) instead of the newest.
    pub(crate) run: Option<String>,
    /// Which detectors run, with which thresholds.
    pub(crate) config: ScanConfig,
}

/// The progress of a scan, redrawn on stderr (see [`crate::report::tables::progress_line`]) when a host
/// starts, is decoded and ends, and every 200 ms while hosts are read: the bar counts the bytes
/// of the hosts done plus, for each host being read, the bytes of its events walked so far, so
/// a single large host moves it too.
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
    /// Hosts being read, in the order they started: name, file size, and once decoded, the
    /// meter of its events walked.
    working: Vec<(String, u64, Option<WalkMeter>)>,
}

impl ProgressState {
    /// Bytes of the hosts done, plus those walked in the hosts being read.
    fn bytes(&self) -> u64 {
        let walking: u64 = self.working.iter().map(|(_, size, m)| m.as_ref().map_or(0, |m| m.bytes().min(*size))).sum();
        self.bytes_done + walking
    }
}

impl Progress {
    fn new(show: bool, source: &crate::source::Run) -> Progress {
        let bytes_total = source.hosts.iter().map(|h| file_len(h.location.local_path())).sum();
        let p = Progress { show, total: source.hosts.len(), bytes_total, state: Mutex::default() };
        p.redraw();
        p
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn redraw(&self) {
        if !self.show {
            return;
        }
        let state = self.state();
        let working: Vec<&str> = state.working.iter().map(|(h, _, _)| h.as_str()).collect();
        let line =
            crate::report::tables::progress_line(state.done, self.total, state.bytes(), self.bytes_total, &working);
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
    }

    /// Erases the line: the report follows on a clean terminal.
    fn clear(&self) {
        if self.show {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(crate::report::tables::PROGRESS_CLEAR.as_bytes());
            let _ = err.flush();
        }
    }
}

/// A local host file's size (0 for a remote one: its bytes are not known before they come).
fn file_len(path: Option<&std::path::Path>) -> u64 {
    path.and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len())
}

/// The scan's observer: the progress line, the timings, and the last host kept.
struct Observer<'a> {
    progress: &'a Progress,
    /// Host, phase and wall time of each phase, when `--timings` asks for them.
    timings: Option<Mutex<Vec<(String, String, Duration)>>>,
    /// The host scanned last, kept rather than dropped: the command ends after the report, and
    /// the process's exit frees it at no cost (tearing down a large host's tables and HLO
    /// modules took 40 ms). Each host before it is dropped when the next one arrives.
    last: Mutex<Option<HostProfile>>,
}

impl ScanObserver for Observer<'_> {
    fn timed(&self, host: &str, phase: &str, elapsed: Duration) {
        if let Some(timings) = &self.timings {
            timings.lock().unwrap_or_else(|p| p.into_inner()).push((host.to_owned(), phase.to_owned(), elapsed));
        }
    }

    fn started(&self, host: &dyn HostInput) {
        self.progress.state().working.push((host.host().to_owned(), file_len(host.path()), None));
        self.progress.redraw();
    }

    fn opened(&self, host: &dyn HostInput, meter: &WalkMeter) {
        if let Some(w) = self.progress.state().working.iter_mut().find(|(h, _, _)| h == host.host()) {
            w.2 = Some(meter.clone());
        }
    }

    fn finished(&self, host: &HostProfile, _outcome: &HostOutcome) {
        let mut state = self.progress.state();
        if let Some(at) = state.working.iter().position(|(h, _, _)| h == host.name()) {
            let (_, size, _) = state.working.remove(at);
            state.bytes_done += size;
        }
        state.done += 1;
        drop(state);
        self.progress.redraw();
    }

    fn release(&self, host: HostProfile) {
        let previous = self.last.lock().unwrap_or_else(|p| p.into_inner()).replace(host);
        drop(previous);
    }
}

/// Scans, writes every output asked for, prints the report. `Ok(true)` when `--fail-on` trips
/// (the caller exits with 3).
pub(crate) fn run(args: &ScanArgs) -> anyhow::Result<bool> {
    let request = ScanRequest {
        path: args.path.clone(),
        run: args.run.clone(),
        hosts: args.hosts.clone(),
        config: args.config.clone(),
        frames_dir: args.out.clone(),
    };
    let source = request.discover()?;
    let progress = Progress::new(!args.quiet && std::io::stderr().is_terminal(), &source);
    let observer = Observer { progress: &progress, timings: args.timings.then(Mutex::default), last: Mutex::new(None) };
    let scanning = std::sync::atomic::AtomicBool::new(true);
    // The redraw period: 200 ms, or `XLENS_PROGRESS_TICK_MS` (the tests redraw often enough to
    // catch a host that is read in tens of milliseconds).
    let tick_ms = std::env::var("XLENS_PROGRESS_TICK_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let report = std::thread::scope(|s| {
        // Redraws while hosts are read, so the bytes walked inside a large host show.
        let ticker = progress.show.then(|| {
            s.spawn(|| {
                while scanning.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::park_timeout(std::time::Duration::from_millis(tick_ms));
                    if scanning.load(std::sync::atomic::Ordering::Relaxed) {
                        progress.redraw();
                    }
                }
            })
        });
        let scanning_since = Instant::now();
        let report = crate::scan_run(&source, &request, &observer);
        observer.timed("", "scan", scanning_since.elapsed());
        scanning.store(false, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = ticker {
            t.thread().unpark();
        }
        report
    });
    progress.clear();
    // Every output is attempted, whatever failed before it; the failures end the command.
    let Scanned { report, output_errors: mut failures } = report?;
    let rendering = Instant::now();
    if let Some(html) = &args.html
        && let Err(e) = std::fs::write(html, render::html(&report))
    {
        failures.push(format!("writing {}: {e}", html.display()));
    }
    let text = (args.format.render)(&report);
    if let Some(timings) = observer.timings {
        let mut rows = timings.into_inner().unwrap_or_else(|p| p.into_inner());
        rows.push((String::new(), "render".to_owned(), rendering.elapsed()));
        eprint!("{}", crate::report::tables::timings_text(&rows));
    }
    super::emit(&text)?;
    // The last host is left to the process's exit (see `Observer::last`).
    std::mem::forget(observer.last);
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    // An incomplete profile fails any --fail-on: its verdict cannot vouch for what was lost.
    Ok(args.fail_on.is_some_and(|level| {
        report.status == Status::Incomplete || report.findings.iter().any(|f| f.severity <= level)
    }))
}
