//! The bounds a capture request and a service's answer are checked against.

use std::time::Duration;

/// Targets in one capture (one session's hosts).
pub const MAX_TARGETS: usize = 1024;

/// The longest capture window. Profilers keep every event of the window in memory on the
/// target and a trace of minutes is gigabytes; anything longer is taken for a mistake in
/// the unit.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 60);

/// The longest wait before the capture starts (`--delay`).
pub const MAX_DELAY: Duration = Duration::from_secs(60 * 60);

/// The longest wait for one target's answer (`--timeout`).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);

/// Attempts per target (`--attempts`).
pub const MAX_ATTEMPTS: u32 = 100;

/// The host tracer's highest level (3: verbose, low-level program execution details).
pub const MAX_HOST_TRACER_LEVEL: u32 = 3;

/// The device tracer's highest level (1: device traces on).
pub const MAX_DEVICE_TRACER_LEVEL: u32 = 1;

/// The Python tracer's highest level (1: Python function calls traced).
pub const MAX_PYTHON_TRACER_LEVEL: u32 = 1;

/// A trace returned in the service's response, and the response itself: protobuf's own limit
/// for one message (2 GiB).
pub const MAX_TRACE_BYTES: u64 = 2 << 30;

/// Characters of a target (`host:port`): a DNS name's 253, a port and brackets.
pub const MAX_TARGET_CHARS: usize = 300;

/// Characters of a session (run directory) name.
pub const MAX_SESSION_CHARS: usize = 200;

/// The events a service may return in one trace (what XProf's own client asks for).
pub const MAX_EVENTS: u64 = 1_000_000;
