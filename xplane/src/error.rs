//! The crate's error and warning types.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::limits::Limit;

/// Where in the input something happened.
///
/// Every field is optional: a decoding error inside an event knows the plane, line, event and
/// byte offset; an I/O error knows only the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The host file, when the input came from disk.
    pub file: Option<PathBuf>,
    /// Index of the plane in the space (0-based, in file order).
    pub plane: Option<usize>,
    /// Index of the line in its plane (0-based, in file order).
    pub line: Option<usize>,
    /// Index of the event in its line (0-based, in file order).
    pub event: Option<usize>,
    /// Absolute byte offset in the input.
    pub offset: Option<u64>,
}

impl Location {
    /// A location at a byte offset of the input.
    pub fn at_offset(offset: u64) -> Self {
        Location { offset: Some(offset), ..Location::default() }
    }

    /// The same location, in the given plane.
    pub fn with_plane(mut self, plane: usize) -> Self {
        self.plane = Some(plane);
        self
    }

    /// The same location, in the given line.
    pub fn with_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    /// The same location, in the given event.
    pub fn with_event(mut self, event: usize) -> Self {
        self.event = Some(event);
        self
    }

    /// The same location, in the given file.
    pub fn with_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    fn is_empty(&self) -> bool {
        *self == Location::default()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(file) = &self.file {
            parts.push(file.display().to_string());
        }
        if let Some(plane) = self.plane {
            parts.push(format!("plane #{plane}"));
        }
        if let Some(line) = self.line {
            parts.push(format!("line #{line}"));
        }
        if let Some(event) = self.event {
            parts.push(format!("event #{event}"));
        }
        if let Some(offset) = self.offset {
            parts.push(format!("byte offset {offset}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// What kind of failure an [`Error`] is.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading the file or directory failed.
    Io(std::io::Error),
    /// The input has no bytes at all.
    EmptyInput,
    /// The input is HLO text (`HloModule ...`), not an XSpace profile.
    HloText,
    /// A `.xplane.pb` file exists but holds 0 bytes.
    ///
    /// Profilers leave such a file when the serialized XSpace would exceed protobuf's 2 GB limit.
    ZeroByteProfile,
    /// A directory contained no `*.xplane.pb` file.
    NoProfiles,
    /// The input ends inside a field.
    Truncated,
    /// The bytes do not follow the protobuf wire format.
    Malformed(&'static str),
    /// A known field was sent with a wire type its declared type cannot have.
    WrongWireType {
        /// The message being decoded.
        message: &'static str,
        /// The field number.
        field: u32,
        /// The wire type found.
        found: &'static str,
    },
    /// A count in the input exceeds a decoder limit.
    LimitExceeded {
        /// The limit.
        limit: Limit,
        /// The count that exceeded it.
        count: u64,
    },
    /// A plane's decoded tables (lines, metadata entries, their indexes) would take more memory
    /// than its budget ([`crate::limits::TABLE_BUDGET_PERCENT`] of the plane's size, plus an
    /// allowance): far more records than a real profile of that size holds.
    TableBudget {
        /// Bytes the tables would take, counted up to where the budget ran out.
        needed: u64,
        /// The plane's budget in bytes.
        budget: u64,
        /// The plane's encoded size in bytes.
        plane_bytes: u64,
    },
    /// Building a DataFrame failed.
    Frame(String),
    /// A selection asked of the profile (steps, hosts) matches nothing in it.
    Selection(String),
    /// The file changed while it was being read (truncated, rewritten or replaced): what was
    /// read of it may mix two versions, or end where the file now ends.
    FileChanged {
        /// Its size in bytes when it was opened.
        was: u64,
        /// Its size in bytes now (0 when it is gone).
        now: u64,
    },
    /// A profile in a format xlens cannot read yet (the message says which, and what to do).
    Unsupported(&'static str),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Io(e) => write!(f, "i/o error: {e}"),
            ErrorKind::EmptyInput => f.write_str("input is empty: an XSpace profile has at least one plane"),
            ErrorKind::HloText => f.write_str(
                "this is HLO text, not a profile: give the *.xplane.pb that jax.profiler.trace wrote (or, to `xlens hlo`, \
                 a *.hlo_proto.pb)",
            ),
            ErrorKind::ZeroByteProfile => f.write_str(
                "profile file is 0 bytes; profilers leave an empty file when the serialized \
                 profile exceeds protobuf's 2 GB limit: capture a shorter window or fewer steps",
            ),
            ErrorKind::NoProfiles => f.write_str("no *.xplane.pb profile found"),
            ErrorKind::Truncated => f.write_str("input is truncated: it ends inside a field"),
            ErrorKind::Malformed(what) => write!(f, "malformed protobuf: {what}"),
            ErrorKind::WrongWireType { message, field, found } => {
                write!(f, "field {field} of {message} has unexpected wire type {found}")
            }
            ErrorKind::LimitExceeded { limit, count } => {
                write!(f, "{} ({count}) exceeds the limit of {}", limit.what(), limit.max())
            }
            ErrorKind::TableBudget { needed, budget, plane_bytes } => write!(
                f,
                "the plane's lines and metadata tables would take over {needed} bytes of memory, more than \
                 its budget of {budget} bytes for {plane_bytes} bytes of input: far more (near-)empty \
                 records than a real profile holds"
            ),
            ErrorKind::Frame(msg) => write!(f, "building a frame failed: {msg}"),
            ErrorKind::Selection(what) => f.write_str(what),
            ErrorKind::FileChanged { was, now } => write!(
                f,
                "the file changed while it was being read ({was} bytes when opened, {now} now): it is still \
                 being written or was replaced; scan it again when it is complete"
            ),
            ErrorKind::Unsupported(what) => f.write_str(what),
        }
    }
}

/// An error from decoding or opening a profile, with its [`Location`].
pub struct Error(Box<Inner>);

struct Inner {
    kind: ErrorKind,
    location: Location,
}

impl Error {
    /// An error of `kind` at `location` (for code that reads profiles from elsewhere, such as
    /// `xlens-source`, and reports its failures as this crate does).
    #[cold]
    pub fn new(kind: ErrorKind, location: Location) -> Self {
        Error(Box::new(Inner { kind, location }))
    }

    /// An [`ErrorKind::Io`] failure reading `path` (a file, or the name of what was read).
    #[cold]
    pub fn io(err: std::io::Error, path: &Path) -> Self {
        Error::new(ErrorKind::Io(err), Location::default().with_file(path))
    }

    /// A selection (a step range, a host) that matches nothing in the profile at `file`.
    #[cold]
    pub fn selection(what: impl Into<String>, file: Option<&Path>) -> Self {
        let location = match file {
            Some(f) => Location::default().with_file(f),
            None => Location::default(),
        };
        Error::new(ErrorKind::Selection(what.into()), location)
    }

    /// A copy of the error (an I/O error's copy keeps its kind and message).
    #[cold]
    pub(crate) fn duplicate(&self) -> Error {
        let kind = match &self.0.kind {
            ErrorKind::Io(e) => ErrorKind::Io(std::io::Error::new(e.kind(), e.to_string())),
            ErrorKind::EmptyInput => ErrorKind::EmptyInput,
            ErrorKind::HloText => ErrorKind::HloText,
            ErrorKind::ZeroByteProfile => ErrorKind::ZeroByteProfile,
            ErrorKind::NoProfiles => ErrorKind::NoProfiles,
            ErrorKind::Truncated => ErrorKind::Truncated,
            ErrorKind::Malformed(what) => ErrorKind::Malformed(what),
            ErrorKind::WrongWireType { message, field, found } => {
                ErrorKind::WrongWireType { message, field: *field, found }
            }
            ErrorKind::LimitExceeded { limit, count } => ErrorKind::LimitExceeded { limit: *limit, count: *count },
            ErrorKind::TableBudget { needed, budget, plane_bytes } => {
                ErrorKind::TableBudget { needed: *needed, budget: *budget, plane_bytes: *plane_bytes }
            }
            ErrorKind::Frame(msg) => ErrorKind::Frame(msg.clone()),
            ErrorKind::Selection(what) => ErrorKind::Selection(what.clone()),
            ErrorKind::FileChanged { was, now } => ErrorKind::FileChanged { was: *was, now: *now },
            ErrorKind::Unsupported(what) => ErrorKind::Unsupported(what),
        };
        Error::new(kind, self.0.location.clone())
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// Where it went wrong.
    pub fn location(&self) -> &Location {
        &self.0.location
    }

    /// True when the input ended early (a cut-off download or an interrupted write).
    pub fn is_truncated(&self) -> bool {
        matches!(self.0.kind, ErrorKind::Truncated)
    }

    /// True for the 0-byte file profilers leave when a profile exceeds 2 GB.
    pub fn is_zero_byte_profile(&self) -> bool {
        matches!(self.0.kind, ErrorKind::ZeroByteProfile)
    }

    /// The same error, located in `file` (a decode error of bytes read from elsewhere, named).
    pub fn in_file(mut self, file: &Path) -> Self {
        self.0.location.file = Some(file.to_path_buf());
        self
    }

    /// Adds the line index to the location.
    pub(crate) fn in_line(mut self, line: usize) -> Self {
        self.0.location.line.get_or_insert(line);
        self
    }

    /// Adds the event index to the location.
    pub(crate) fn in_event(mut self, event: usize) -> Self {
        self.0.location.event.get_or_insert(event);
        self
    }

    /// Adds the plane index to the location.
    pub(crate) fn in_plane(mut self, plane: usize) -> Self {
        self.0.location.plane.get_or_insert(plane);
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("kind", &self.0.kind).field("location", &self.0.location).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.location.is_empty() {
            write!(f, "{}", self.0.kind)
        } else {
            write!(f, "{} (at {})", self.0.kind, self.0.location)
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Something odd but decodable in the input.
///
/// Decoding goes on; analyses may be less complete. Warnings are data, never printed by the library.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// What is odd.
    pub kind: WarningKind,
    /// Where.
    pub location: Location,
}

/// The kinds of [`Warning`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A name or string was not valid UTF-8 and was decoded lossily.
    InvalidUtf8 {
        /// What held the string (`"plane name"`, `"event metadata name"`, ...).
        what: &'static str,
    },
    /// An event refers to an event-metadata id its plane does not define.
    DanglingEventMetadata {
        /// The missing id.
        id: i64,
        /// How many events refer to it.
        events: u64,
    },
    /// A stat refers to a stat-metadata id its plane does not define.
    DanglingStatMetadata {
        /// The missing id.
        id: i64,
        /// How many stats refer to it.
        stats: u64,
    },
    /// A `ref_value` stat points at a stat-metadata id the plane does not define.
    DanglingStatRef {
        /// The missing id.
        id: u64,
    },
    /// The profiler reported an error while capturing (XSpace `errors`).
    ProfilerError(String),
    /// The profiler reported a warning while capturing (XSpace `warnings`).
    ProfilerWarning(String),
    /// More decode-time warnings of the plane than are kept
    /// ([`crate::limits::MAX_WARNINGS_PER_PLANE`]); this many were dropped.
    WarningsOmitted {
        /// How many warnings were not kept.
        count: u64,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            WarningKind::InvalidUtf8 { what } => write!(f, "{what} is not valid UTF-8 (decoded lossily)")?,
            WarningKind::DanglingEventMetadata { id, events } => {
                write!(f, "{events} events refer to undefined event metadata id {id}")?
            }
            WarningKind::DanglingStatMetadata { id, stats } => {
                write!(f, "{stats} stats refer to undefined stat metadata id {id}")?
            }
            WarningKind::DanglingStatRef { id } => {
                write!(f, "ref_value stat points at undefined stat metadata id {id}")?
            }
            WarningKind::ProfilerError(msg) => write!(f, "profiler error: {msg}")?,
            WarningKind::ProfilerWarning(msg) => write!(f, "profiler warning: {msg}")?,
            WarningKind::WarningsOmitted { count } => write!(f, "{count} more warnings like these were not kept")?,
        }
        if !self.location.is_empty() {
            write!(f, " (at {})", self.location)?;
        }
        Ok(())
    }
}

/// Fails with [`ErrorKind::LimitExceeded`] when `count` is above `limit`.
#[inline]
pub(crate) fn check_limit(limit: Limit, count: usize, location: impl FnOnce() -> Location) -> Result<(), Error> {
    let count = count as u64;
    if count > limit.max() {
        return Err(Error::new(ErrorKind::LimitExceeded { limit, count }, location()));
    }
    Ok(())
}
