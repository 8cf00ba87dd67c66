//! Taking XProf profiles from running programs: the gRPC `ProfilerService` that
//! `jax.profiler.start_server(port)` (and TensorFlow's and PyTorch/XLA's equivalents) answers.
//!
//! [`capture`] takes one on-demand capture of several targets at once, in one session, and
//! leaves a normal multi-host run directory behind it,
//! `<logdir>/plugins/profile/<session>/<host>.xplane.pb`, one file per target that answered;
//! a target that is down, times out or returns an empty trace is a [`TargetCapture`] with its
//! [`Error`], and the others are kept. Nothing half-written is ever left under a final name:
//! the service writes its file into a staging directory beside the run, and a trace returned in
//! the response is written under a temporary name; either is then linked into the run under
//! its final name, which fails rather than overwrites.
//!
//! Continuous profiling ([`start_continuous`], [`snapshot`], [`stop_continuous`]) makes the
//! calls of XProf's `continuous_profiling_snapshot` API; a snapshot is saved as a run the same
//! way, and a target that returns no data is an error, never an empty host file.
//!
//! [`ProfilerClient`] is one target's connection ([`ProfilerClient::profile`]); the messages are
//! compiled from the service's own `.proto` files ([`proto`], vendored with their licence).
//! Reading what was captured is `xlens-source`'s and `xlens-xplane`'s job: this crate only
//! brings the files.
//!
//! ```no_run
//! use std::time::Duration;
//! use xlens_capture::{CaptureSpec, Options, Target, capture, session_name};
//!
//! let spec = CaptureSpec {
//!     targets: vec![Target::parse("localhost:9012")?, Target::parse("localhost:9013")?],
//!     logdir: "/tmp/logs".into(),
//!     session: session_name(std::time::SystemTime::now()),
//!     options: Options { duration: Duration::from_secs(2), ..Options::default() },
//!     remote_logdir: None,
//! };
//! let captured = capture(&spec)?;
//! for t in &captured.targets {
//!     println!("{}: {:?} {:?}", t.target, t.status, t.file);
//! }
//! # Ok::<(), xlens_capture::Error>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod client;
mod continuous;
mod error;
pub mod limits;
mod session;
mod space;
mod target;

/// The `ProfilerService` messages and client, compiled from the vendored protos
/// (`proto/xla/tsl/profiler/protobuf/`, package `tensorflow`).
pub mod proto {
    #![allow(missing_docs, unreachable_pub, missing_debug_implementations, clippy::all)]
    tonic::include_proto!("tensorflow");
}

pub use client::{ProfilerClient, TRACE_TOOL};
pub use continuous::{Control, snapshot, start_continuous, stop_continuous};
pub use error::{Error, ErrorKind};
pub use session::{
    CaptureSpec, Captured, Options, Status, TargetCapture, capture, session_name, validate_session_name,
};
pub use target::Target;
