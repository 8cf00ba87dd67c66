//! Named limits on counts read from untrusted input, checked by one helper.
//!
//! Allocation in the decoder is always bounded by the input size (every item consumes at least
//! one byte of input before it is stored); these limits additionally reject inputs whose shape is
//! absurd for a real profile, before they cost time.

use crate::error::{Error, ErrorKind, Location};

/// A decoder limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Planes in one XSpace.
    Planes,
    /// Lines in one plane.
    LinesPerPlane,
    /// Event-metadata entries in one plane.
    EventMetadataPerPlane,
    /// Stat-metadata entries in one plane.
    StatMetadataPerPlane,
    /// Stats on one plane.
    StatsPerPlane,
    /// Host files in one session directory.
    HostsPerSession,
    /// Bytes of one plane message (protobuf's own limit is 2 GiB per message).
    PlaneBytes,
}

/// Largest number of planes accepted in one XSpace.
pub const MAX_PLANES: u64 = 1 << 16;
/// Largest number of lines accepted in one plane.
pub const MAX_LINES_PER_PLANE: u64 = 1 << 24;
/// Largest number of event-metadata entries accepted in one plane.
pub const MAX_EVENT_METADATA_PER_PLANE: u64 = 1 << 26;
/// Largest number of stat-metadata entries accepted in one plane.
pub const MAX_STAT_METADATA_PER_PLANE: u64 = 1 << 24;
/// Largest number of plane-level stats accepted in one plane.
pub const MAX_STATS_PER_PLANE: u64 = 1 << 20;
/// Largest number of host files accepted in one session directory.
pub const MAX_HOSTS_PER_SESSION: u64 = 1 << 16;

/// Largest plane message accepted, in bytes: events address their plane's bytes with `u32`.
pub const MAX_PLANE_BYTES: u64 = u32::MAX as u64;

impl Limit {
    /// The largest accepted count.
    pub fn max(self) -> u64 {
        match self {
            Limit::Planes => MAX_PLANES,
            Limit::LinesPerPlane => MAX_LINES_PER_PLANE,
            Limit::EventMetadataPerPlane => MAX_EVENT_METADATA_PER_PLANE,
            Limit::StatMetadataPerPlane => MAX_STAT_METADATA_PER_PLANE,
            Limit::StatsPerPlane => MAX_STATS_PER_PLANE,
            Limit::HostsPerSession => MAX_HOSTS_PER_SESSION,
            Limit::PlaneBytes => MAX_PLANE_BYTES,
        }
    }

    /// What is being counted, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Limit::Planes => "number of planes",
            Limit::LinesPerPlane => "number of lines in a plane",
            Limit::EventMetadataPerPlane => "number of event metadata entries in a plane",
            Limit::StatMetadataPerPlane => "number of stat metadata entries in a plane",
            Limit::StatsPerPlane => "number of plane stats",
            Limit::HostsPerSession => "number of host files in a session",
            Limit::PlaneBytes => "size of a plane in bytes",
        }
    }
}

/// Fails with [`ErrorKind::LimitExceeded`] when `count` is above `limit`.
#[inline]
pub(crate) fn check(limit: Limit, count: usize, location: impl FnOnce() -> Location) -> Result<(), Error> {
    let count = count as u64;
    if count > limit.max() {
        return Err(Error::new(ErrorKind::LimitExceeded { limit, count }, location()));
    }
    Ok(())
}
