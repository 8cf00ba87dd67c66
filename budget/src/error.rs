//! The crate's error type.

use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A size or count that must be at least 1 is 0.
    #[error("{what} must be at least 1, got 0")]
    Zero {
        /// What the value is (`"params"`, `"layers"`, ...).
        what: &'static str,
    },
    /// A size or count given as a negative number.
    #[error("{what} must be positive, got {value}")]
    Negative {
        /// What the value is.
        what: &'static str,
        /// The text given.
        value: String,
    },
    /// A value that does not parse as a size, count or fraction.
    #[error("{what}: cannot parse {value:?} ({expected})")]
    Parse {
        /// What the value is.
        what: &'static str,
        /// The text given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A byte or element count does not fit in 64 bits.
    #[error("{what} overflows 64 bits: the model is too large to plan")]
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// A budget fraction outside (0, 1].
    #[error("budget fraction must be in (0, 1], got {0}")]
    Budget(f64),
    /// Model dimensions that contradict each other.
    #[error("inconsistent model shape: {0}")]
    Shape(String),
    /// A value from a closed set that is not in it (recipe, optimizer, dtype, remat policy).
    #[error("unknown {what} {value:?}; expected one of: {expected}")]
    Unknown {
        /// What the value is.
        what: &'static str,
        /// The text given.
        value: String,
        /// The accepted spellings.
        expected: &'static str,
    },
    /// A matrix shape that does not fit the data or the product.
    #[error("matrix shape mismatch: {0}")]
    Matrix(String),
    /// The chip catalogue does not know a chip.
    #[error(transparent)]
    Chip(xlens_chips::Error),
    /// Building a DataFrame failed.
    #[error("building a frame failed: {0}")]
    Frame(String),
}

/// An error from planning or auditing: bad sizes, overflow, an unknown chip.
pub struct Error(Box<ErrorKind>);

impl Error {
    #[cold]
    pub(crate) fn new(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }

    #[cold]
    pub(crate) fn zero(what: &'static str) -> Self {
        Error::new(ErrorKind::Zero { what })
    }

    #[cold]
    pub(crate) fn overflow(what: &'static str) -> Self {
        Error::new(ErrorKind::Overflow { what })
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// True when a computation overflowed 64 bits.
    pub fn is_overflow(&self) -> bool {
        matches!(*self.0, ErrorKind::Overflow { .. })
    }

    /// True for a zero or negative size.
    pub fn is_non_positive(&self) -> bool {
        matches!(*self.0, ErrorKind::Zero { .. } | ErrorKind::Negative { .. })
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

impl From<xlens_chips::Error> for Error {
    fn from(e: xlens_chips::Error) -> Self {
        Error::new(ErrorKind::Chip(e))
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.0 {
            // Transparent: the chip error's message is this error's message.
            ErrorKind::Chip(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checked `a * b` for a named quantity.
pub(crate) fn mul(what: &'static str, a: u64, b: u64) -> Result<u64> {
    a.checked_mul(b).ok_or_else(|| Error::overflow(what))
}

/// Checked product of several factors for a named quantity.
pub(crate) fn product(what: &'static str, factors: &[u64]) -> Result<u64> {
    factors.iter().try_fold(1u64, |acc, &f| mul(what, acc, f))
}

/// Checked `a + b` for a named quantity.
pub(crate) fn add(what: &'static str, a: u64, b: u64) -> Result<u64> {
    a.checked_add(b).ok_or_else(|| Error::overflow(what))
}

/// `Ok(v)` when `v >= 1`.
pub(crate) fn positive(what: &'static str, v: u64) -> Result<u64> {
    if v == 0 { Err(Error::zero(what)) } else { Ok(v) }
}
