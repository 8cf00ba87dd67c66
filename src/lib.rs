//! xlens: offline analysis of XProf profiles.
//!
//! This facade re-exports the member crates under short names:
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`xplane`] | `xlens-xplane` | decoding XSpace (`*.xplane.pb`), sessions, frames, writer |
//! | [`source`] | `xlens-source` | finding and opening profiles: paths, logdirs, HTTP(S), object stores |
//! | [`capture`] | `xlens-capture` | taking profiles from running programs (feature `capture`) |
//! | [`hlo`] | `xlens-hlo` | the HLO module graph, shapes, costs |
//! | [`roofline`] | `xlens-roofline` | chips, roofline, steps, op profile |
//! | [`budget`] | `xlens-budget` | HBM planning, precision audits |
//! | [`faults`] | `xlens-faults` | fault detectors and the scan report |
//! | [`report`] | `xlens-report` | text, JSON, HTML, the diff, run summaries, tables, frames |
//!
//! The main job is the `fault_scan` example: `cargo run --release --example fault_scan -- PATH`.
//!
//! ```
//! use xlens::roofline::{Bytes, Chip};
//! use xlens::xplane::{Space, SpaceBuilder, names::stat};
//!
//! // A TPU v5e profile that records only its device type, written and read back.
//! let mut b = SpaceBuilder::default();
//! {
//!     let mut tpu = b.plane(1, "/device:TPU:0");
//!     let ty = tpu.stat_metadata(stat::DEVICE_TYPE_STRING);
//!     tpu.stat(ty, "TPU v5 Lite");
//! }
//! let space = Space::parse(b.finish().into())?;
//! // Its chip: the peaks the profile lacks come from the catalogue.
//! let chip = Chip::from_space(&space)?;
//! assert_eq!(chip.name(), "TPU v5e");
//! assert_eq!(chip.hbm_capacity(), Some(Bytes::from_gib(16)));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use xlens_budget as budget;
#[cfg(feature = "capture")]
pub use xlens_capture as capture;
pub use xlens_faults as faults;
pub use xlens_hlo as hlo;
pub use xlens_report as report;
pub use xlens_roofline as roofline;
pub use xlens_source as source;
pub use xlens_xplane as xplane;

#[cfg(feature = "args")]
pub mod args;
#[cfg(feature = "capture")]
mod capture_run;
#[cfg(feature = "cli")]
pub mod cli;
pub mod device;
pub mod documents;
pub mod events;
pub mod graph;
pub mod memory;
#[cfg(feature = "capture")]
pub mod monitor;
mod scan;

#[cfg(feature = "capture")]
pub use capture_run::{CaptureError, CaptureOutcome, CaptureRequest, capture_run, snapshot_run};
#[cfg(feature = "capture")]
pub use monitor::{MonitorEvent, MonitorRequest, monitor};
pub use scan::{DiffRequest, ScanError, ScanRequest, Scanned, diff_paths, report_of, scan_path, scan_run};
