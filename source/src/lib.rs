//! Finding and opening XProf profiles: a host file, a run directory or a logdir, on disk, over
//! HTTP(S) (feature `http`) or in an object store (feature `stores`: `s3://`, `gs://`, `az://`).
//!
//! A [`Location`] is parsed from what the user typed; a [`Source`] lists the runs at a location
//! and opens its host files (a local file memory-mapped, a remote one read in ranged requests).
//! [`discover`] finds the run a location names (the newest of a logdir) as a [`Run`] of
//! [`HostFile`]s, which scans open one at a time through [`xlens_xplane::HostInput`];
//! [`open_session`] decodes them all. Decoding is `xlens-xplane`'s job: this crate only brings
//! it the bytes.
//!
//! ```
//! use xlens_source::{Location, discover, open_session};
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tpu/tpu_straggler_host");
//! let location = Location::parse(dir);
//! let run = discover(&location)?;
//! assert!(run.hosts.len() > 1);
//! let session = open_session(&location)?;
//! assert_eq!(session.hosts().len(), run.hosts.len());
//! assert_eq!(session.hosts()[0].name(), run.hosts[0].host);
//! # Ok::<(), xlens_source::Error>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod local;
mod location;
#[cfg(feature = "stores")]
pub mod stores;

use std::path::Path;

use bytes::Bytes;
use xlens_xplane::{HostInput, Session, Space};

pub use error::{Error, Result};
pub use local::Local;
pub use location::{Location, STORE_SCHEMES, StoreUrl};

/// The suffix of XProf's chunked host files (Riegeli records, brotli-compressed), which
/// continuous-profiling snapshots and chunked saves write beside or instead of `*.xplane.pb`.
/// They are listed with a run's hosts, so that none is passed over in silence, and refused when
/// opened ([`RIEGELI_UNSUPPORTED`]): xlens does not read them yet.
pub const RIEGELI_SUFFIX: &str = ".xplane.riegeli";

/// The error of opening a [`RIEGELI_SUFFIX`] host file.
pub const RIEGELI_UNSUPPORTED: &str = "*.xplane.riegeli host files (XProf's chunked Riegeli format, written by continuous \
     profiling snapshots and chunked saves) are not supported yet: save or capture the profile as *.xplane.pb";

/// The host name of a host file's name: the name without `.xplane.pb` or [`RIEGELI_SUFFIX`]
/// (a file named just the suffix keeps its whole name); `None` for a name that is not a host
/// file's.
///
/// ```
/// use xlens_source::host_name;
/// assert_eq!(host_name("worker0.xplane.pb").as_deref(), Some("worker0"));
/// assert_eq!(host_name("worker0.xplane.riegeli").as_deref(), Some("worker0"));
/// assert_eq!(host_name("notes.txt"), None);
/// ```
pub fn host_name(file_name: &str) -> Option<String> {
    let stem =
        file_name.strip_suffix(xlens_xplane::XPLANE_SUFFIX).or_else(|| file_name.strip_suffix(RIEGELI_SUFFIX))?;
    Some(if stem.is_empty() { file_name } else { stem }.to_owned())
}

/// Where profiles come from: lists the runs at a location and reads its host files.
pub trait Source: std::fmt::Debug + Send + Sync {
    /// The runs at `location` that hold host files, in name order (XProf names runs by capture
    /// time, so oldest first): a run is its one run, a logdir its runs (under
    /// `plugins/profile/`, else directly). Empty when there is none.
    fn list(&self, location: &Location) -> Result<Vec<Run>>;

    /// The run `location` names: a host file alone (no run name), a run, or the newest run of a
    /// logdir. [`xlens_xplane::ErrorKind::NoProfiles`] when there is none.
    fn discover(&self, location: &Location) -> Result<Run> {
        self.list(location)?.pop().ok_or_else(|| {
            let at = xlens_xplane::Location::default().with_file(&location.as_file());
            Error::new(location, xlens_xplane::Error::new(xlens_xplane::ErrorKind::NoProfiles, at))
        })
    }

    /// The bytes of the host file at `location`.
    fn open(&self, location: &Location) -> Result<Bytes>;

    /// The host file at `location`, decoded; errors inside it name the location.
    fn open_space(&self, location: &Location) -> Result<Space> {
        let bytes = self.open(location)?;
        Space::parse(bytes).map_err(|e| Error::new(location, e.in_file(&location.as_file())))
    }
}

/// The source that reads `location`: the file system, or (with the features that bring them)
/// HTTP(S) and object stores. Without a feature, such a URL is taken as a local path.
pub fn source_for(location: &Location) -> &'static dyn Source {
    match location {
        #[cfg(feature = "http")]
        Location::Http(_) => &http::Http,
        #[cfg(feature = "stores")]
        Location::Store(_) => &stores::Stores,
        _ => &Local,
    }
}

/// The host files of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The run name (the run directory's or prefix's name), when the location was not a file.
    pub run: Option<String>,
    /// The host files, sorted by host name.
    pub hosts: Vec<HostFile>,
}

/// One host file of a run, not yet opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFile {
    /// Host name: the file name without `.xplane.pb`.
    pub host: String,
    /// Where the file is.
    pub location: Location,
}

impl HostFile {
    /// A host file at `location`, named after its file name.
    pub fn new(location: Location) -> HostFile {
        let text = location.to_string();
        let file_name = match &location {
            Location::Local(path) => path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            _ => text.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_owned(),
        };
        HostFile { host: host_name(&file_name).unwrap_or(file_name), location }
    }

    /// Reads and decodes the host file (a local file is memory-mapped). A [`RIEGELI_SUFFIX`]
    /// file is [`xlens_xplane::ErrorKind::Unsupported`].
    pub fn open(&self) -> xlens_xplane::Result<Space> {
        if self.location.to_string().ends_with(RIEGELI_SUFFIX) {
            let at = xlens_xplane::Location::default().with_file(&self.location.as_file());
            return Err(xlens_xplane::Error::new(xlens_xplane::ErrorKind::Unsupported(RIEGELI_UNSUPPORTED), at));
        }
        source_for(&self.location).open_space(&self.location).map_err(Error::into_error)
    }
}

impl HostInput for HostFile {
    fn host(&self) -> &str {
        &self.host
    }

    fn display(&self) -> String {
        self.location.to_string()
    }

    fn path(&self) -> Option<&Path> {
        self.location.local_path()
    }

    fn open(&self) -> xlens_xplane::Result<Space> {
        HostFile::open(self)
    }
}

/// Finds the host files behind a location: a file, a run or a logdir (its newest run).
pub fn discover(location: &Location) -> Result<Run> {
    source_for(location).discover(location)
}

/// Every run of a logdir that holds host files, oldest first (see [`Source::list`]).
pub fn discover_runs(location: &Location) -> Result<Vec<Run>> {
    source_for(location).list(location)
}

/// Opens a file, run or logdir (see [`discover`]); hosts are decoded in parallel.
pub fn open_session(location: &Location) -> Result<Session> {
    let run = discover(location)?;
    Session::open_hosts(run.run, &run.hosts).map_err(|e| Error::new(location, e))
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
