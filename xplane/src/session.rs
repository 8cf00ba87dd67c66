//! Sessions: the host files of one profiling run, found from a file, a run directory or a logdir.
//!
//! `jax.profiler.trace(logdir)` writes `logdir/plugins/profile/<run>/<host>.xplane.pb`, one file
//! per host. [`discover`] accepts any of those levels:
//!
//! - a single `*.xplane.pb` file;
//! - a session (run) directory holding one or more `*.xplane.pb` files;
//! - a logdir (or its `plugins/profile` directory): the newest run is picked, where newest means
//!   the greatest run name, because runs are named by their start time (`2026_12_02_11_27_35`).

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use rayon::prelude::*;

use crate::error::check_limit;
use crate::error::{Error, ErrorKind, Location, Result};
use crate::limits::Limit;
use crate::residency::FileMap;
use crate::space::Space;

/// File name suffix of XSpace host files.
pub const XPLANE_SUFFIX: &str = ".xplane.pb";

/// One host file of a session, not yet opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSource {
    /// Host name: the file name without `.xplane.pb`.
    pub host: String,
    /// Path of the file.
    pub path: PathBuf,
}

impl HostSource {
    /// Maps and decodes the host file.
    pub fn open(&self) -> Result<Space> {
        #[cfg(feature = "stores")]
        if crate::stores::is_store_url(&self.path) {
            let url = self.path.to_string_lossy();
            return Space::parse(crate::stores::fetch_store(&url)?).map_err(|e| e.in_file(&self.path));
        }
        #[cfg(feature = "http")]
        if crate::remote::is_url(&self.path) {
            let url = self.path.to_string_lossy();
            return Space::parse(crate::remote::fetch(&url)?).map_err(|e| e.in_file(&self.path));
        }
        open_space(&self.path)
    }
}

/// The host files of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSource {
    /// The run name (the session directory's name), when the input was a directory.
    pub run: Option<String>,
    /// The host files, sorted by host name.
    pub hosts: Vec<HostSource>,
}

/// Finds the host files behind a file, a session directory or a logdir.
pub fn discover(path: &Path) -> Result<SessionSource> {
    #[cfg(feature = "stores")]
    if crate::stores::is_store_url(path) {
        return crate::stores::discover_store(&path.to_string_lossy());
    }
    #[cfg(feature = "http")]
    if crate::remote::is_url(path) {
        return crate::remote::discover_url(&path.to_string_lossy());
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(e, path))?;
    if meta.is_file() {
        return Ok(SessionSource { run: None, hosts: vec![host_source(path)] });
    }
    let hosts = host_files(path)?;
    if !hosts.is_empty() {
        return Ok(SessionSource { run: dir_name(path), hosts });
    }
    // A logdir: the newest run (run names are capture times, so the last in name order).
    discover_runs(path)?.pop().ok_or_else(|| Error::new(ErrorKind::NoProfiles, Location::default().with_file(path)))
}

/// Every run of a logdir (`<logdir>/plugins/profile/<run>`, or the `plugins/profile` directory
/// itself) that holds host files, in name order (XProf names runs by capture time, so oldest
/// first); a session directory is its one run. Empty when there is none.
pub fn discover_runs(path: &Path) -> Result<Vec<SessionSource>> {
    let hosts = host_files(path)?;
    if !hosts.is_empty() {
        return Ok(vec![SessionSource { run: dir_name(path), hosts }]);
    }
    let profile_dir = path.join("plugins").join("profile");
    let runs_dir = if profile_dir.is_dir() { profile_dir } else { path.to_path_buf() };
    let mut sources = Vec::new();
    for run in read_dir_sorted(&runs_dir)?.into_iter().filter(|p| p.is_dir()) {
        let hosts = host_files(&run)?;
        if !hosts.is_empty() {
            sources.push(SessionSource { run: dir_name(&run), hosts });
        }
    }
    Ok(sources)
}

/// Memory-maps and decodes one host file.
///
/// The file is mapped, not read: decoding touches each page once and the decoded [`Space`] keeps
/// refcounted windows into the mapping instead of copies. The pages of the host-thread plane,
/// which analyses read once into tables (most of a CPU capture), are then handed back to the
/// OS; they stay in the page cache and the pass that reads them maps them again (see
/// [`Space::release_pages`]). Device planes, which several passes walk, stay mapped.
///
/// Errors found later, while events and stats are decoded lazily, name the file in their
/// [`Location`].
pub fn open_space(path: &Path) -> Result<Space> {
    let map = FileMap::new(map(path)?);
    let mut space = Space::parse(map.bytes()).map_err(|e| e.in_file(path))?;
    space.attach_file(map, path);
    if let Some(plane) = space.host_threads() {
        plane.release_pages();
    }
    Ok(space)
}

/// Memory-maps a file as [`Bytes`]. A 0-byte file is [`ErrorKind::ZeroByteProfile`].
pub fn map_file(path: &Path) -> Result<Bytes> {
    Ok(FileMap::new(map(path)?).bytes())
}

fn map(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).map_err(|e| Error::io(e, path))?;
    let len = file.metadata().map_err(|e| Error::io(e, path))?.len();
    if len == 0 {
        return Err(Error::new(ErrorKind::ZeroByteProfile, Location::default().with_file(path)));
    }
    // SAFETY: the mapping is read-only. If another process truncates the file while it is mapped,
    // reads of the lost pages fault (SIGBUS); profiles are written once and then only read, which
    // is the usage this crate documents.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(e, path))?;
    populate(&map);
    Ok(map)
}

/// The bytes one worker maps in at a time by [`populate`].
const POPULATE_CHUNK_BYTES: usize = 4 << 20;

/// Maps the file's pages in (from the page cache, or reading them) on every worker before the
/// parse, which touches every page of the file anyway: a plane's parse is one sequential pass
/// that would otherwise take each page fault itself, on one worker (the single stream line of a
/// GPU capture is most of the file). The pages are the parse's own, so the peak resident size
/// does not change. Advice the kernel does not know (`MADV_POPULATE_READ` is Linux 5.14+) is
/// ignored: the parse then faults the pages in as before.
fn populate(map: &memmap2::Mmap) {
    use rayon::prelude::*;
    let chunks = map.len().div_ceil(POPULATE_CHUNK_BYTES);
    (0..chunks).into_par_iter().with_max_len(1).for_each(|i| {
        let start = i * POPULATE_CHUNK_BYTES;
        let len = POPULATE_CHUNK_BYTES.min(map.len() - start);
        #[cfg(target_os = "linux")]
        let _ = map.advise_range(memmap2::Advice::PopulateRead, start, len);
        #[cfg(not(target_os = "linux"))]
        let _ = (map, start, len);
    });
}

/// A decoded host.
#[derive(Debug)]
pub struct Host {
    name: String,
    path: Option<PathBuf>,
    space: Space,
}

impl Host {
    /// A host from an in-memory space.
    pub fn new(name: impl Into<String>, space: Space) -> Host {
        Host { name: name.into(), path: None, space }
    }

    /// The host name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file it came from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The decoded space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Takes the decoded space.
    pub fn into_space(self) -> Space {
        self.space
    }
}

/// Every host of one profiling run, decoded.
#[derive(Debug)]
pub struct Session {
    run: Option<String>,
    hosts: Vec<Host>,
}

impl Session {
    /// Opens a file, session directory or logdir (see [`discover`]); hosts are decoded in parallel.
    pub fn open(path: &Path) -> Result<Session> {
        let source = discover(path)?;
        Session::open_source(&source)
    }

    /// Opens the hosts of a discovered session, in parallel. The order is the source's.
    pub fn open_source(source: &SessionSource) -> Result<Session> {
        check_limit(Limit::HostsPerSession, source.hosts.len(), Location::default)?;
        let hosts: Result<Vec<Host>> = source
            .hosts
            .par_iter()
            .map(|h| Ok(Host { name: h.host.clone(), path: Some(h.path.clone()), space: h.open()? }))
            .collect();
        Ok(Session { run: source.run.clone(), hosts: hosts? })
    }

    /// A session of in-memory hosts.
    pub fn from_hosts(run: Option<String>, hosts: Vec<Host>) -> Session {
        Session { run, hosts }
    }

    /// The run name, when opened from a directory.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The hosts, sorted by name.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// Takes the hosts.
    pub fn into_hosts(self) -> Vec<Host> {
        self.hosts
    }
}

fn host_source(path: &Path) -> HostSource {
    let file_name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    // A file named just `.xplane.pb` keeps its whole name: every file has a host name.
    let host = match file_name.strip_suffix(XPLANE_SUFFIX) {
        Some(stem) if !stem.is_empty() => stem.to_owned(),
        _ => file_name.clone(),
    };
    HostSource { host, path: path.to_path_buf() }
}

fn dir_name(path: &Path) -> Option<String> {
    let canonical = path.canonicalize().ok()?;
    canonical.file_name().map(|f| f.to_string_lossy().into_owned())
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(e, dir))?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|e| Error::io(e, dir))?.path());
    }
    paths.sort();
    Ok(paths)
}

fn host_files(dir: &Path) -> Result<Vec<HostSource>> {
    let hosts: Vec<HostSource> = read_dir_sorted(dir)?
        .into_iter()
        .filter(|p| p.is_file() && p.file_name().is_some_and(|f| f.to_string_lossy().ends_with(XPLANE_SUFFIX)))
        .map(|p| host_source(&p))
        .collect();
    check_limit(Limit::HostsPerSession, hosts.len(), || Location::default().with_file(dir))?;
    Ok(hosts)
}
