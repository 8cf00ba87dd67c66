//! Sessions: the decoded hosts of one profiling run, and the mapping of a host file.
//!
//! Finding the host files of a run (a file, a run directory, a logdir, a URL) is the `xlens-source`
//! crate's job; this module opens what it is given: [`open_space`] maps and decodes one file, a
//! [`HostInput`] is a host not yet opened (from wherever it comes), and [`Session::open_hosts`]
//! decodes a run's hosts in parallel.

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use rayon::prelude::*;

use crate::error::check_limit;
use crate::error::{Error, ErrorKind, Location, Result};
use crate::limits::Limit;
use crate::residency::FileMap;
use crate::space::Space;
use crate::stamp::{FileStamp, changed};

/// File name suffix of XSpace host files.
pub const XPLANE_SUFFIX: &str = ".xplane.pb";

/// A host of a run, not yet opened: a local file, or bytes somewhere else that `xlens-source`
/// knows how to read. Scans take hosts through this trait so that they open each one when a
/// worker is free for it, without knowing where the bytes come from.
pub trait HostInput: Sync {
    /// The host name (the file name without [`XPLANE_SUFFIX`]).
    fn host(&self) -> &str;
    /// The file or URL, as messages and reports name it.
    fn display(&self) -> String;
    /// The local file, when the host is one.
    fn path(&self) -> Option<&Path> {
        None
    }
    /// Reads and decodes the host (a local file is memory-mapped, see [`open_space`]).
    fn open(&self) -> Result<Space>;
}

impl<T: HostInput + ?Sized> HostInput for &T {
    fn host(&self) -> &str {
        (**self).host()
    }
    fn display(&self) -> String {
        (**self).display()
    }
    fn path(&self) -> Option<&Path> {
        (**self).path()
    }
    fn open(&self) -> Result<Space> {
        (**self).open()
    }
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
///
/// A file that changes while it is mapped (truncated, or rewritten in place) can change the bytes
/// under the decode, and reading a page past its new end raises `SIGBUS`, which no library code
/// can turn into an error: the stamp of the file as mapped (size, modification time, inode) is
/// kept, [`Space::check_file_unchanged`] compares it with the file as it is after an analysis,
/// and a program that maps files it does not own handles the signal (the `xlens` CLI does).
pub fn open_space(path: &Path) -> Result<Space> {
    let (map, stamp) = map(path)?;
    let map = FileMap::new(map);
    let bytes = map.bytes();
    let mut space = Space::parse(bytes.clone()).map_err(|e| not_hlo_text(&bytes, e).in_file(path))?;
    space.attach_file(map, path, stamp);
    if let Some(plane) = space.host_threads() {
        plane.release_pages();
    }
    Ok(space)
}

/// A parse error of `bytes` as it is, unless they are HLO text (a dump of `HloModule ...`, which
/// users pass for a profile): then [`ErrorKind::HloText`], which says so.
fn not_hlo_text(bytes: &[u8], e: Error) -> Error {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    if bytes[start..].starts_with(b"HloModule ") { Error::new(ErrorKind::HloText, Location::default()) } else { e }
}

/// Memory-maps a file as [`Bytes`]. A 0-byte file is [`ErrorKind::ZeroByteProfile`].
pub fn map_file(path: &Path) -> Result<Bytes> {
    Ok(FileMap::new(map(path)?.0).bytes())
}

/// Maps a regular file, with its stamp as mapped. A file whose size changed between the look at
/// its path and the mapping of the opened file is [`ErrorKind::FileChanged`].
fn map(path: &Path) -> Result<(memmap2::Mmap, FileStamp)> {
    // Only a regular file is mapped: opening a FIFO would wait for a writer, and a device or
    // socket is no profile.
    let before = std::fs::metadata(path).map_err(|e| Error::io(e, path))?;
    if !before.file_type().is_file() {
        let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
        return Err(Error::io(e, path));
    }
    let file = File::open(path).map_err(|e| Error::io(e, path))?;
    let stamp = FileStamp::of(&file.metadata().map_err(|e| Error::io(e, path))?);
    if stamp.len == 0 {
        return Err(Error::new(ErrorKind::ZeroByteProfile, Location::default().with_file(path)));
    }
    // SAFETY: the mapping is read-only. If another process truncates the file while it is mapped,
    // reads of the lost pages fault (SIGBUS); profiles are written once and then only read, which
    // is the usage this crate documents. A file seen changing here is not mapped, one that
    // changes later is found by `Space::check_file_unchanged`, and the signal is the program's
    // to handle (see `open_space`).
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(e, path))?;
    let after = FileStamp::of(&file.metadata().map_err(|e| Error::io(e, path))?);
    if after != stamp || before.len() != stamp.len {
        return Err(changed(path, before.len(), after.len));
    }
    populate(&map);
    Ok((map, stamp))
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
    /// Opens the hosts of one run, in parallel. The order is the slice's.
    pub fn open_hosts<H: HostInput>(run: Option<String>, hosts: &[H]) -> Result<Session> {
        check_limit(Limit::HostsPerSession, hosts.len(), Location::default)?;
        let hosts: Result<Vec<Host>> = hosts
            .par_iter()
            .map(|h| Ok(Host { name: h.host().to_owned(), path: h.path().map(Path::to_path_buf), space: h.open()? }))
            .collect();
        Ok(Session { run, hosts: hosts? })
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
