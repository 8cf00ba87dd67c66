//! Profiles on disk: a host file, a run directory or a logdir.
//!
//! `jax.profiler.trace(logdir)` writes `logdir/plugins/profile/<run>/<host>.xplane.pb`, one file
//! per host. [`Local`] accepts any of those levels:
//!
//! - a single `*.xplane.pb` file;
//! - a session (run) directory holding one or more `*.xplane.pb` files;
//! - a logdir (or its `plugins/profile` directory): the newest run is picked, where newest means
//!   the greatest run name, because runs are named by their start time (`2026_12_02_11_27_35`).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use xlens_xplane::limits::Limit;
use xlens_xplane::{ErrorKind, Space};

use crate::error::at;
use crate::{HostFile, Location, Result, Run, Source};

/// The local file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl Source for Local {
    /// Every run of a logdir (`<logdir>/plugins/profile/<run>`, or the `plugins/profile`
    /// directory itself) that holds host files, in name order (XProf names runs by capture time,
    /// so oldest first); a session directory is its one run. Empty when there is none.
    fn list(&self, location: &Location) -> Result<Vec<Run>> {
        at(location, discover_runs(&location.as_file()))
    }

    fn discover(&self, location: &Location) -> Result<Run> {
        at(location, discover(&location.as_file()))
    }

    /// The file memory-mapped ([`xlens_xplane::map_file`]).
    fn open(&self, location: &Location) -> Result<Bytes> {
        at(location, xlens_xplane::map_file(&location.as_file()))
    }

    /// The file memory-mapped and decoded ([`xlens_xplane::open_space`]).
    fn open_space(&self, location: &Location) -> Result<Space> {
        at(location, xlens_xplane::open_space(&location.as_file()))
    }
}

fn io(e: std::io::Error, path: &Path) -> xlens_xplane::Error {
    xlens_xplane::Error::io(e, path)
}

fn in_file(kind: ErrorKind, path: &Path) -> xlens_xplane::Error {
    xlens_xplane::Error::new(kind, xlens_xplane::Location::default().with_file(path))
}

fn discover(path: &Path) -> xlens_xplane::Result<Run> {
    let meta = std::fs::metadata(path).map_err(|e| io(e, path))?;
    if meta.is_file() {
        return Ok(Run { run: None, hosts: vec![host_file(path)] });
    }
    let hosts = host_files(path)?;
    if !hosts.is_empty() {
        return Ok(Run { run: dir_name(path), hosts });
    }
    // A logdir: the newest run (run names are capture times, so the last in name order).
    discover_runs(path)?.pop().ok_or_else(|| in_file(ErrorKind::NoProfiles, path))
}

fn discover_runs(path: &Path) -> xlens_xplane::Result<Vec<Run>> {
    let hosts = host_files(path)?;
    if !hosts.is_empty() {
        return Ok(vec![Run { run: dir_name(path), hosts }]);
    }
    let profile_dir = path.join("plugins").join("profile");
    let runs_dir = if profile_dir.is_dir() { profile_dir } else { path.to_path_buf() };
    let mut runs = Vec::new();
    for run in read_dir_sorted(&runs_dir)?.into_iter().filter(|p| p.is_dir()) {
        let hosts = host_files(&run)?;
        if !hosts.is_empty() {
            runs.push(Run { run: dir_name(&run), hosts });
        }
    }
    Ok(runs)
}

fn host_file(path: &Path) -> HostFile {
    let file_name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    // Every file has a host name (a file given by name may be named anything).
    HostFile { host: crate::host_name(&file_name).unwrap_or(file_name), location: Location::Local(path.to_path_buf()) }
}

fn dir_name(path: &Path) -> Option<String> {
    let canonical = path.canonicalize().ok()?;
    canonical.file_name().map(|f| f.to_string_lossy().into_owned())
}

fn read_dir_sorted(dir: &Path) -> xlens_xplane::Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| io(e, dir))?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|e| io(e, dir))?.path());
    }
    paths.sort();
    Ok(paths)
}

fn host_files(dir: &Path) -> xlens_xplane::Result<Vec<HostFile>> {
    let hosts: Vec<HostFile> = read_dir_sorted(dir)?
        .into_iter()
        // Every entry named like a host file but a directory: a FIFO, a dangling link or an
        // unreadable file is a host that cannot be read (listed with its error), not one
        // dropped without a word; so is a `*.xplane.riegeli` file, which xlens cannot read yet.
        .filter(|p| !p.is_dir() && p.file_name().is_some_and(|f| crate::host_name(&f.to_string_lossy()).is_some()))
        .map(|p| host_file(&p))
        .collect();
    // A host with both files is its `*.xplane.pb` (sorted by path, the `.pb` comes first).
    let mut hosts = hosts;
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    hosts.dedup_by(|later, first| later.host == first.host);
    let count = hosts.len() as u64;
    if count > Limit::HostsPerSession.max() {
        return Err(in_file(ErrorKind::LimitExceeded { limit: Limit::HostsPerSession, count }, dir));
    }
    Ok(hosts)
}
