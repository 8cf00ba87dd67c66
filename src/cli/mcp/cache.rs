//! The profiles the server has opened, kept for the next call.
//!
//! A profile is keyed by its canonical path and the path, size and modification time of each of
//! its host files, so a file rewritten in place is a new profile (and the old one ages out). Each
//! keeps its decoded hosts (memory-mapped, [`OpenedRun`]), its scan reports (per scan arguments)
//! and the documents the tools computed from them; a warm call only pages a kept document. The
//! whole is bounded by `--cache-mb`: the mapped files count at their size and every kept
//! document at its JSON size, and after each call the least recently used profiles are dropped
//! until the rest fit (the one just used is kept even when it alone is larger).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use serde_json::Value;

use crate::documents::{OpenedRun, open_run};
use crate::faults::Report;
use crate::source::Run;

/// What identifies a profile's contents: its canonical path and each file's path, size and
/// modification time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    path: PathBuf,
    files: Vec<(PathBuf, u64, Option<SystemTime>)>,
}

impl Key {
    /// The key of `path` whose contents are `files`; a file that cannot be read is an error.
    pub(crate) fn new(path: PathBuf, files: &[PathBuf]) -> Result<Key, String> {
        let files = files
            .iter()
            .map(|f| {
                let meta = std::fs::metadata(f).map_err(|e| format!("{}: {e}", f.display()))?;
                Ok((f.clone(), meta.len(), meta.modified().ok()))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Key { path, files })
    }

    /// The bytes of its files.
    fn file_bytes(&self) -> u64 {
        self.files.iter().map(|(_, size, _)| size).sum()
    }
}

/// One profile and what was computed from it.
#[derive(Debug)]
pub(crate) struct Profile {
    /// Its canonical path.
    pub(crate) path: PathBuf,
    /// Its hosts (`None` for a lone `*.hlo_proto.pb`).
    pub(crate) run: Option<Run>,
    file_bytes: u64,
    opened: OnceLock<Result<Arc<OpenedRun>, String>>,
    documents: Mutex<HashMap<String, Arc<Value>>>,
    reports: Mutex<HashMap<String, Arc<Report>>>,
    /// Serializes the documents' computations of one profile: two calls that need the same
    /// analysis wait for one to make it rather than both making it.
    computing: Mutex<()>,
    /// The same for its scans (a document may be made of a scan: a lock of its own).
    scanning: Mutex<()>,
    held_bytes: AtomicU64,
    last_used: AtomicU64,
}

impl Profile {
    fn new(key: &Key, run: Option<Run>) -> Profile {
        Profile {
            path: key.path.clone(),
            run,
            file_bytes: key.file_bytes(),
            opened: OnceLock::new(),
            documents: Mutex::default(),
            reports: Mutex::default(),
            computing: Mutex::default(),
            scanning: Mutex::default(),
            held_bytes: AtomicU64::new(0),
            last_used: AtomicU64::new(0),
        }
    }

    /// Its hosts, decoded on first use and kept.
    pub(crate) fn opened(&self) -> Result<Arc<OpenedRun>, String> {
        let run = self.run.as_ref().ok_or_else(|| format!("{} is not a profile", self.path.display()))?;
        self.opened.get_or_init(|| open_run(run).map(Arc::new).map_err(|e| super::one_line(&e))).clone()
    }

    /// The document `key`, computed by `make` on first use and kept (errors are not kept).
    pub(crate) fn document(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<Value, String>,
    ) -> Result<Arc<Value>, String> {
        let kept = || lock(&self.documents).get(key).cloned();
        if let Some(doc) = kept() {
            return Ok(doc);
        }
        let _computing = lock(&self.computing);
        if let Some(doc) = kept() {
            return Ok(doc);
        }
        let doc = Arc::new(make()?);
        let bytes = serde_json::to_string(&*doc).map_or(0, |s| s.len() as u64);
        self.held_bytes.fetch_add(bytes, Ordering::Relaxed);
        lock(&self.documents).insert(key.to_owned(), doc.clone());
        Ok(doc)
    }

    /// The scan report for the arguments `key`, made by `make` on first use and kept.
    pub(crate) fn report(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<Report, String>,
    ) -> Result<Arc<Report>, String> {
        let kept = || lock(&self.reports).get(key).cloned();
        if let Some(report) = kept() {
            return Ok(report);
        }
        let _scanning = lock(&self.scanning);
        if let Some(report) = kept() {
            return Ok(report);
        }
        let report = Arc::new(make()?);
        let bytes = serde_json::to_string(&*report).map_or(0, |s| s.len() as u64);
        self.held_bytes.fetch_add(bytes, Ordering::Relaxed);
        lock(&self.reports).insert(key.to_owned(), report.clone());
        Ok(report)
    }

    /// What it holds: its files once mapped, and its documents and reports.
    fn bytes(&self) -> u64 {
        let mapped = if self.opened.get().is_some_and(Result::is_ok) { self.file_bytes } else { 0 };
        mapped + self.held_bytes.load(Ordering::Relaxed)
    }
}

/// The profiles kept, at most `limit` bytes of them.
#[derive(Debug)]
pub(crate) struct Cache {
    limit: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    profiles: Vec<(Key, Arc<Profile>)>,
    clock: u64,
}

impl Cache {
    /// An empty cache that keeps at most `limit` bytes.
    pub(crate) fn new(limit: u64) -> Cache {
        Cache { limit, state: Mutex::default() }
    }

    /// The profile of `key`, kept or new (then with `run`), marked as the most recently used.
    pub(crate) fn get(&self, key: Key, run: Option<Run>) -> Arc<Profile> {
        let mut state = lock(&self.state);
        state.clock += 1;
        let now = state.clock;
        let profile = match state.profiles.iter().find(|(k, _)| *k == key) {
            Some((_, p)) => p.clone(),
            None => {
                let p = Arc::new(Profile::new(&key, run));
                state.profiles.push((key, p.clone()));
                p
            }
        };
        profile.last_used.store(now, Ordering::Relaxed);
        profile
    }

    /// Drops the least recently used profiles until the others fit the limit (the most recent
    /// one stays). A profile still in use by a call is freed when that call ends.
    pub(crate) fn trim(&self) {
        let mut state = lock(&self.state);
        state.profiles.sort_by_key(|(_, p)| std::cmp::Reverse(p.last_used.load(Ordering::Relaxed)));
        let mut total = 0u64;
        let mut keep = 0;
        for (i, (_, p)) in state.profiles.iter().enumerate() {
            total = total.saturating_add(p.bytes());
            if i > 0 && total > self.limit {
                break;
            }
            keep = i + 1;
        }
        state.profiles.truncate(keep);
    }

    /// How many profiles are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).profiles.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key { path: PathBuf::from(name), files: Vec::new() }
    }

    #[test]
    fn a_kept_document_is_computed_once() {
        let cache = Cache::new(1 << 20);
        let p = cache.get(key("a"), None);
        let mut made = 0;
        for _ in 0..3 {
            let doc = p
                .document("ops", || {
                    made += 1;
                    Ok(serde_json::json!({ "n": 1 }))
                })
                .unwrap();
            assert_eq!(doc["n"], 1);
        }
        assert_eq!(made, 1);
        assert!(Arc::ptr_eq(&p, &cache.get(key("a"), None)));
        // An error is not kept.
        assert!(p.document("bad", || Err("no".to_owned())).is_err());
        assert_eq!(p.document("bad", || Ok(Value::Null)).unwrap().as_ref(), &Value::Null);
    }

    #[test]
    fn a_document_made_of_a_scan_does_not_wait_for_itself() {
        let cache = Cache::new(1 << 20);
        let p = cache.get(key("a"), None);
        let doc = p.document("scan", || {
            let report = p.report("default", || Err("no profile".to_owned()));
            Ok(Value::String(report.unwrap_err()))
        });
        assert_eq!(doc.unwrap().as_str(), Some("no profile"));
    }

    #[test]
    fn the_least_recently_used_profiles_go_first() {
        let cache = Cache::new(100);
        let big = serde_json::json!("x".repeat(60));
        for name in ["a", "b", "c"] {
            cache.get(key(name), None).document("d", || Ok(big.clone())).unwrap();
            cache.trim();
        }
        // Each holds 62 bytes: only the most recent fits with nothing else.
        assert_eq!(cache.len(), 1);
        let kept = cache.get(key("c"), None);
        assert!(kept.bytes() > 0);
        let mut made = false;
        kept.document("d", || {
            made = true;
            Ok(Value::Null)
        })
        .unwrap();
        assert!(!made, "c was kept");
    }
}
