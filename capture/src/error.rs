//! The crate's error: what failed, and for which target.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A capture failure: its [`ErrorKind`] and the target it happened to (none for a mistake in
/// the request itself, such as a malformed target or an out-of-range option).
#[derive(Debug)]
pub struct Error {
    target: Option<String>,
    kind: ErrorKind,
}

/// What kind of failure an [`Error`] is.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Not a `host:port` target.
    BadTarget {
        /// What was given.
        text: String,
        /// Why it is not a target.
        why: String,
    },
    /// An option out of its range, or options that contradict each other.
    Options(String),
    /// No connection to the target's service (nothing listens there, or it is unreachable).
    Connect(String),
    /// The service answered the call with an error status.
    Status {
        /// The gRPC status code's name.
        code: String,
        /// The service's message.
        message: String,
    },
    /// No answer within the timeout.
    Timeout(Duration),
    /// Every attempt returned an empty trace.
    EmptyTrace {
        /// The attempts made.
        attempts: u32,
    },
    /// The service said it wrote the trace, but the file is not on this machine.
    NotWritten(PathBuf),
    /// The service said it wrote the trace into the store ([`crate::CaptureSpec::remote_logdir`]),
    /// but the object cannot be read there.
    NotStored {
        /// The object's URL.
        url: String,
        /// Why it cannot be read.
        why: String,
    },
    /// The trace is larger than [`crate::limits::MAX_TRACE_BYTES`].
    TooLarge {
        /// Its size in bytes.
        bytes: u64,
    },
    /// A snapshot call that returned no trace, or one without a single event: continuous profiling is not running on the
    /// target, or its runtime keeps no buffer (the CPU runtime of jax accepts the calls but
    /// records nothing).
    NoSnapshotData,
    /// The run already holds this host's file: a capture never overwrites one.
    Exists(PathBuf),
    /// Reading, writing or moving a file or directory failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl Error {
    /// An error of `kind` that happened to `target` (`None`: to the request as a whole).
    pub fn new(target: Option<&str>, kind: ErrorKind) -> Error {
        Error { target: target.map(str::to_owned), kind }
    }

    /// A reading or writing failure on `path`.
    pub fn io(target: Option<&str>, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::new(target, ErrorKind::Io { path: path.into(), source })
    }

    /// The target (`host:port`), when the failure was one target's.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The failure without its target: what a per-target listing shows beside the target.
    pub fn reason(&self) -> String {
        self.kind.to_string()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Some(target) => write!(f, "capturing {target}: {}", self.kind),
            None => fmt::Display::fmt(&self.kind, f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::BadTarget { text, why } => write!(f, "{text:?} is not a target (host:port): {why}"),
            ErrorKind::Options(what) => f.write_str(what),
            ErrorKind::Connect(why) => write!(
                f,
                "cannot connect: {why} (is the program running and serving its profiler, e.g. \
                 jax.profiler.start_server(PORT)?)"
            ),
            ErrorKind::Status { code, message } => {
                write!(f, "the profiler service answered {code}")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            ErrorKind::Timeout(t) => write!(f, "no answer within {} ms (--timeout)", t.as_millis()),
            ErrorKind::EmptyTrace { attempts } => write!(
                f,
                "the trace was empty in each of {attempts} attempt(s): nothing ran on the target during the \
                 capture window, or its profiler was busy with another capture"
            ),
            ErrorKind::NotWritten(path) => write!(
                f,
                "the service reported a trace but {} is not on this machine: a target on another machine \
                 writes it on its own file system (give a --logdir that both reach)",
                path.display()
            ),
            ErrorKind::NotStored { url, why } => {
                write!(f, "the service reported writing {url}, but it cannot be read there: {why}")
            }
            ErrorKind::TooLarge { bytes } => write!(
                f,
                "the trace ({bytes} bytes) exceeds the limit of {} bytes: capture a shorter window",
                crate::limits::MAX_TRACE_BYTES
            ),
            ErrorKind::NoSnapshotData => f.write_str(
                "the target returned no continuous-profiling data (no trace events): continuous profiling is not running there \
                 (xlens snapshot start), or its runtime does not support it (it keeps no trace buffer; jax's CPU \
                 runtime accepts the calls but records nothing)",
            ),
            ErrorKind::Exists(path) => {
                write!(
                    f,
                    "{} exists already: a capture never overwrites a host file (give another --session)",
                    path.display()
                )
            }
            ErrorKind::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}
