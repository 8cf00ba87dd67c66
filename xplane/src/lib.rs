//! Fast, safe decoding of XProf profiles (`*.xplane.pb`, the XSpace protobuf).
//!
//! `jax.profiler.trace` (and TensorFlow, PyTorch/XLA) write one XSpace per host: planes (a TPU
//! core, a GPU, the host threads, the HLO metadata) holding lines (XLA Ops, Steps, a thread)
//! holding timed events with typed stats. This crate reads them:
//!
//! - **Lazy and linear.** [`Space::parse`] reads metadata tables and line headers in one pass;
//!   events are decoded only while iterated ([`Line::events`]) as borrowed [`Event`] views, so a
//!   profile costs its size in memory (memory-mapped by [`open_space`]) plus small tables.
//! - **Safe on any input.** Every length is checked against the bytes that remain; counts are
//!   capped by [`limits`]; errors are typed and carry their [`Location`] (file, plane, line,
//!   event, byte offset). Odd but decodable data becomes a [`Warning`] ([`validate`]).
//! - **Sessions.** [`Session::open_hosts`] decodes the hosts of a run in parallel; finding them
//!   (a file, a run directory, a logdir, a URL) is the `xlens-source` crate's job.
//! - **Frames.** `frame` (feature `frames`, off by default) turns inventories, events and plane
//!   stats into polars DataFrames.
//! - **Writing.** [`SpaceBuilder`] writes valid XSpace bytes for tests and synthetic profiles.
//!
//! ```
//! use xlens_xplane::{Space, SpaceBuilder, names};
//!
//! // A tiny TPU-shaped profile, written and read back.
//! let mut b = SpaceBuilder::default();
//! {
//!     let mut tpu = b.plane(1, "/device:TPU:0");
//!     let flops = tpu.stat_metadata(names::stat::FLOPS);
//!     let dot = tpu.event_metadata("dot.3");
//!     tpu.metadata_stat(dot, flops, 2_000_000u64);
//!     let mut ops = tpu.line(3, names::line::XLA_OPS, 1_000);
//!     ops.event(dot, 0, 1_000_000);
//! }
//! let space = Space::parse(b.finish().into())?;
//!
//! let tpu = &space.tpu_tensor_cores()[0];
//! let flops = tpu.stat_id(names::stat::FLOPS).unwrap();
//! let ops = tpu.line_by_name(names::line::XLA_OPS).unwrap();
//! for event in ops.events(tpu) {
//!     let event = event?;
//!     let f = event.stat_or_metadata_stat(flops).and_then(|s| s.as_u64());
//!     assert_eq!((event.name(), event.start().0, f), ("dot.3", 1_000_000, Some(2_000_000)));
//! }
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod builder;
#[cfg(feature = "raw")]
mod convert;
mod error;
mod event;
mod ids;
mod inventory;
pub mod limits;
mod meter;
pub mod names;
mod plane;
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub mod queue;
#[cfg(feature = "raw")]
pub mod raw;
mod residency;
mod session;
mod space;
mod stamp;
pub mod strict;
mod time_index;
mod undecoded;
mod validate;
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub mod wire;

#[cfg(feature = "frames")]
pub mod frame;

pub use builder::{BuildValue, EventBuilder, LineBuilder, LineHeader, PlaneBuilder, SpaceBuilder};
pub use error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
pub use event::{
    BareEvent, Event, EventData, EventIter, GatheredStats, PlaneStats, ReleasingEvents, Stat, StatIter, StatValue,
    StatsWhere,
};
pub use ids::{EventMetadataId, LineId, Picos, PlaneId, StatMetadataId};
pub use inventory::{DeviceKind, LineInventory, PlaneInventory, SpaceSummary, inventory, summarize};
pub use meter::WalkMeter;
pub use plane::{EventMetadata, Line, MetadataMask, PART_MIN_BYTES, Plane, PlaneKind, StatMetadata};
pub use session::{Host, HostInput, Session, XPLANE_SUFFIX, map_file, open_space};
pub use space::Space;
pub use time_index::{EventsWhere, IndexingEvents, TIME_INDEX_BLOCK_EVENTS};
pub use undecoded::{DecodeError, DecodeErrors, Undecoded};
pub use validate::validate;

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
