//! Named limits on counts read from untrusted input, checked by one helper, and the memory
//! budget of a plane's decoded tables.
//!
//! Allocation in the decoder is always bounded by the input size (every item consumes at least
//! one byte of input before it is stored); these limits additionally reject inputs whose shape is
//! absurd for a real profile, before they cost time.
//!
//! Counts alone do not bound memory: a line or a metadata entry takes two bytes of input and tens
//! of bytes once decoded. So a plane's decoded tables (its lines, event and stat metadata, their
//! id indexes and child ids) have a budget proportional to the plane's encoded size
//! ([`TABLE_BUDGET_PERCENT`]) plus its share of a per-space allowance
//! ([`TABLE_ALLOWANCE_PER_SPACE`]); a plane whose tables would need more fails with [`ErrorKind::TableBudget`](crate::ErrorKind::TableBudget) before they are allocated. Names are copied
//! once into one string per plane and are not charged: they cost at most the bytes they were
//! read from. Lines whose message is empty are counted, not stored, and cost nothing. Plane
//! stats stay in the plane's bytes. Real profiles use a fraction of the budget (under a third on
//! every capture in `testdata/`); a crafted one stops with an error instead of amplifying its
//! size, and one within the budget holds under twice its size plus the allowance.

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
    /// Profiler errors, warnings and host names recorded in one XSpace.
    ProfilerMessages,
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

/// Largest number of profiler errors, warnings and host names accepted in one XSpace.
pub const MAX_PROFILER_MESSAGES: u64 = 1 << 16;

/// Largest plane message accepted, in bytes: events address their plane's bytes with `u32`.
pub const MAX_PLANE_BYTES: u64 = u32::MAX as u64;

/// Bytes of decoded tables (lines, metadata entries, id indexes, child ids) a plane may use, in
/// percent of its encoded size, beyond its allowance. With the names (copied once, at most the
/// bytes they were read from) a plane's decode then holds under twice its size.
pub const TABLE_BUDGET_PERCENT: u64 = 75;
/// Table bytes a space may use beyond its planes' budgets, shared equally by its planes, so that
/// planes of many short records (SparseCore and host planes of a thousand metadata entries with
/// short names) decode whatever their size. A space's decoded tables stay under
/// [`TABLE_BUDGET_PERCENT`] of its size plus this.
pub const TABLE_ALLOWANCE_PER_SPACE: u64 = 64 << 20;
/// Decode-time warnings kept per plane; the rest are counted in one
/// [`WarningKind::WarningsOmitted`](crate::WarningKind::WarningsOmitted).
pub const MAX_WARNINGS_PER_PLANE: usize = 256;

/// Decode errors met after the parse that a space lists
/// ([`Space::decode_errors`](crate::Space::decode_errors)), the first in file order; the rest are
/// counted.
pub const MAX_DECODE_ERRORS_KEPT: usize = 16;
/// Distinct decode errors a space tracks after its parse (each entry once, by byte offset);
/// beyond them it notes only that there were more.
pub const MAX_DECODE_ERRORS_TRACKED: usize = 1024;

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
            Limit::ProfilerMessages => MAX_PROFILER_MESSAGES,
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
            Limit::ProfilerMessages => "number of profiler errors, warnings and host names",
        }
    }
}

/// The table budget of a plane of `plane_bytes` bytes in a space of `planes` planes.
pub(crate) fn table_budget(plane_bytes: usize, planes: usize) -> u64 {
    let allowance = TABLE_ALLOWANCE_PER_SPACE / planes.max(1) as u64;
    (plane_bytes as u64).saturating_mul(TABLE_BUDGET_PERCENT) / 100 + allowance
}
