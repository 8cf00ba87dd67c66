//! The error type shared by this crate and `xlens-roofline` (which re-exports it): one type, so
//! a chip lookup and a roofline analysis fail alike.

use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A chip name or device type string that the catalogue does not know.
    #[error("unknown chip {name:?}; known chips: {known}")]
    UnknownChip {
        /// The name asked for.
        name: String,
        /// The catalogue's chip names, comma separated.
        known: String,
    },
    /// A device plane carries no usable peak figures and names no catalogue chip.
    #[error("device plane {plane:?} has no peak capability stats and no known device type ({device_type:?})")]
    NoPeaks {
        /// The plane name.
        plane: String,
        /// Its `device_type_string`, if any.
        device_type: Option<String>,
    },
    /// A rate or size that must be positive and finite is not.
    #[error("{what} must be positive and finite, got {value}")]
    NotPositive {
        /// What the value is (`"peak FLOP/s"`, `"HBM bandwidth"`, ...).
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// Building a DataFrame failed.
    #[error("building a frame failed: {0}")]
    Frame(String),
}

/// An error from the chip catalogue or the roofline crate: an unknown chip, missing peaks or an
/// invalid rate.
#[derive(Clone, PartialEq)]
pub struct Error(Box<ErrorKind>);

impl Error {
    /// An error of this kind. For the workspace's crates (`xlens-roofline` builds its errors
    /// with it), not a stable API.
    #[doc(hidden)]
    #[cold]
    pub fn new(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }

    /// A [`ErrorKind::NotPositive`] error. For the workspace's crates, not a stable API.
    #[doc(hidden)]
    #[cold]
    pub fn not_positive(what: &'static str, value: f64) -> Self {
        Error::new(ErrorKind::NotPositive { what, value })
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// True when a chip name was not found in the catalogue.
    pub fn is_unknown_chip(&self) -> bool {
        matches!(*self.0, ErrorKind::UnknownChip { .. })
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Error").field(&self.0).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
