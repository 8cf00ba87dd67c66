//! `xlens runs LOGDIR` and `xlens watch LOGDIR`: every run of a logdir summarised (runs scanned
//! in parallel), each summary cached outside the logdir under a key made of the host files'
//! identity (path, size, modification time) and the xlens version, so a second listing reads
//! only the runs that changed.

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use crate::faults::{ScanConfig, scan_session};
use crate::report::runs::{RunSummary, capture_time, compare_runs, runs_text};
use crate::source::{Location, Run, discover_runs};
use anyhow::Context;
use rayon::prelude::*;

use super::emit;

/// Where run summaries are cached: `--cache-dir`, else `$XLENS_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/xlens`, else `~/.cache/xlens`; `None` (no cache) with `--no-cache` or when
/// none is known.
pub(crate) fn cache_dir(flag: Option<PathBuf>, no_cache: bool) -> Option<PathBuf> {
    if no_cache {
        return None;
    }
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    flag.or_else(|| env("XLENS_CACHE_DIR"))
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("xlens")))
        .or_else(|| env("HOME").map(|h| h.join(".cache").join("xlens")))
}

/// Each host file's absolute path, size and modification time (nanoseconds since the epoch).
type Identity = Vec<(PathBuf, u64, u128)>;

/// The identity of a run's files: each host file's absolute path, size and modification time.
fn identity(source: &Run) -> Identity {
    source
        .hosts
        .iter()
        .map(|h| {
            let file = h.location.local_path().map_or_else(|| PathBuf::from(h.location.to_string()), Path::to_path_buf);
            let meta = std::fs::metadata(&file).ok();
            let modified =
                meta.as_ref().and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(UNIX_EPOCH).ok());
            let path = std::fs::canonicalize(&file).unwrap_or(file);
            (path, meta.map_or(0, |m| m.len()), modified.map_or(0, |d| d.as_nanos()))
        })
        .collect()
}

/// The cache file of a run: FNV-1a (64 bits) of the version and the files' identity.
fn cache_file(dir: &Path, identity: &[(PathBuf, u64, u128)]) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    feed(concat!("xlens-runs-1 ", env!("CARGO_PKG_VERSION")).as_bytes());
    for (path, len, modified) in identity {
        feed(path.to_string_lossy().as_bytes());
        feed(&len.to_le_bytes());
        feed(&modified.to_le_bytes());
    }
    dir.join("runs").join(format!("{hash:016x}.json"))
}

/// Scans one run (or reads its cached summary) and summarises it. A run that cannot be scanned
/// is a summary with status `ERROR`; a cache that cannot be read or written is skipped.
pub(crate) fn summarize(source: &Run, cache: Option<&Path>) -> RunSummary {
    summarize_checked(source, cache).0
}

/// [`summarize`], and the identity of the run's files after the scan when it differs from
/// theirs before: a file changed while it was read, the run is still being written, and its
/// summary (an `ERROR` that says so) is not cached.
fn summarize_checked(source: &Run, cache: Option<&Path>) -> (RunSummary, Option<Identity>) {
    let id = identity(source);
    let file = cache.map(|dir| cache_file(dir, &id));
    if let Some(cached) = file.as_ref().and_then(|f| std::fs::read(f).ok())
        && let Ok(summary) = serde_json::from_slice::<RunSummary>(&cached)
    {
        return (summary, None);
    }
    let run = source.run.clone().unwrap_or_else(|| "-".to_owned());
    let size_bytes = id.iter().map(|(_, len, _)| len).sum();
    let newest_s = id.iter().map(|(_, _, m)| (m / 1_000_000_000) as i64).max();
    let captured = capture_time(&run, newest_s.filter(|s| *s > 0));
    let summary = match scan_session(source.run.clone(), &source.hosts, &ScanConfig::default(), &|_, _| {}) {
        Ok(report) => RunSummary::of(&run, captured.clone(), size_bytes, &report),
        Err(e) => {
            let error = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
            RunSummary::failed(&run, captured.clone(), id.len(), size_bytes, error)
        }
    };
    let after = identity(source);
    if after != id {
        let error = "a host file changed while the run was read: it is still being written (or was replaced); \
                     list it again when it is complete";
        return (RunSummary::failed(&run, captured, id.len(), size_bytes, error.to_owned()), Some(after));
    }
    if let Some(file) = file {
        store(&file, &summary);
    }
    (summary, None)
}

/// Writes a summary to the cache atomically (a temporary file renamed into place); failures
/// only cost a rescan next time.
fn store(file: &Path, summary: &RunSummary) {
    let Some(dir) = file.parent() else { return };
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, serde_json::to_vec(summary).unwrap_or_default()))
        .and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// `xlens runs`: every run of the logdir, oldest first, with its change from the run before.
pub(crate) fn runs(logdir: &Path, json: bool, cache: Option<&Path>) -> anyhow::Result<()> {
    // Runs are on disk: their summaries are cached by the files' sizes and modification times.
    let sources = discover_runs(&Location::Local(logdir.to_path_buf()))
        .with_context(|| format!("opening {}", logdir.display()))?;
    if sources.is_empty() {
        anyhow::bail!("no runs with *.xplane.pb files in {}", logdir.display());
    }
    let mut summaries: Vec<RunSummary> = sources.par_iter().map(|s| summarize(s, cache)).collect();
    compare_runs(&mut summaries);
    if json { emit(&format!("{}\n", serde_json::to_string_pretty(&summaries)?)) } else { emit(&runs_text(&summaries)) }
}

/// What `xlens watch` does.
pub(crate) struct Watch {
    /// The logdir.
    pub(crate) logdir: PathBuf,
    /// Time between two looks at the logdir.
    pub(crate) interval: Duration,
    /// Report the runs already there too (else only new ones).
    pub(crate) existing: bool,
    /// Stop after this many runs (never when `None`).
    pub(crate) count: Option<usize>,
    /// The summary cache.
    pub(crate) cache: Option<PathBuf>,
}

/// `xlens watch`: one JSON line per run as it lands (once its files stop changing between two
/// looks), with the step time's change from the run reported before it.
pub(crate) fn watch(w: &Watch) -> anyhow::Result<()> {
    let look =
        || discover_runs(&Location::Local(w.logdir.clone())).with_context(|| format!("opening {}", w.logdir.display()));
    // Each run reported (or already there), with the identity of its files then: a run whose
    // files change afterwards (a host file that was still 0 bytes, reported as ERROR) is
    // scanned and reported again once they are stable.
    let mut seen: std::collections::BTreeMap<String, Identity> = Default::default();
    // The runs seen with a step time, newest last: a new run's change is against the newest
    // comparable one (same hardware and program). Bounded: a long watch keeps the last ones.
    const HISTORY: usize = 64;
    let mut history: Vec<RunSummary> = Vec::new();
    if !w.existing {
        let sources = look()?;
        history.extend(sources.last().map(|s| summarize(s, w.cache.as_deref())));
        seen.extend(sources.iter().filter_map(|s| Some((s.run.clone()?, identity(s)))));
    }
    let mut pending: std::collections::BTreeMap<String, Identity> = Default::default();
    let mut reported = 0usize;
    loop {
        for source in look()? {
            let Some(run) = source.run.clone() else { continue };
            let id = identity(&source);
            if seen.get(&run) == Some(&id) {
                continue;
            }
            if pending.get(&run) != Some(&id) {
                // New or still being written: look again next time.
                pending.insert(run, id);
                continue;
            }
            pending.remove(&run);
            let (summary, changed) = summarize_checked(&source, w.cache.as_deref());
            if let Some(now) = changed {
                // Changed while it was scanned: still being written, looked at again later.
                pending.insert(run, now);
                continue;
            }
            let mut compared = history.clone();
            compared.push(summary);
            compare_runs(&mut compared);
            let summary = compared.pop().expect("the run just pushed");
            emit(&format!("{}\n", serde_json::to_string(&summary)?))?;
            seen.insert(run, id);
            reported += 1;
            if w.count.is_some_and(|c| reported >= c) {
                return Ok(());
            }
            if summary.step_time_ms.is_some() {
                history.push(summary);
                if history.len() > HISTORY {
                    history.remove(0);
                }
            }
        }
        std::thread::sleep(w.interval);
    }
}
