//! The crate's error: a reading or decoding failure and the location it happened at.

use std::fmt;

use xlens_xplane::ErrorKind;

use crate::Location;

/// A failure finding or opening a profile, with the [`Location`] that was asked for.
///
/// It prints as the [`xlens_xplane::Error`] it wraps, which names the file or URL (and, for a
/// decoding error, where inside it): messages are those of the decoder, whatever the source.
#[derive(Debug)]
pub struct Error {
    location: Location,
    error: xlens_xplane::Error,
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error `error` met while reading `location`.
    pub fn new(location: &Location, error: xlens_xplane::Error) -> Error {
        Error { location: location.clone(), error }
    }

    /// The location that was being found or opened.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        self.error.kind()
    }

    /// The decoder's error, which names the file or URL.
    pub fn error(&self) -> &xlens_xplane::Error {
        &self.error
    }

    /// Takes the decoder's error.
    pub fn into_error(self) -> xlens_xplane::Error {
        self.error
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for Error {
    // Transparent: the chain goes on from the wrapped error's own source, so a printed chain
    // does not repeat its message.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl From<Error> for xlens_xplane::Error {
    fn from(e: Error) -> xlens_xplane::Error {
        e.error
    }
}

/// Wraps the decoder's errors of a call at `location`.
pub(crate) fn at<T>(location: &Location, r: xlens_xplane::Result<T>) -> Result<T> {
    r.map_err(|e| Error::new(location, e))
}
