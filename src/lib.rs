//! xlens: offline analysis of XProf profiles.
//!
//! This facade re-exports the member crates under short names:
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`xplane`] | `xlens-xplane` | decoding XSpace (`*.xplane.pb`), sessions, frames, writer |
//! | [`source`] | `xlens-source` | finding and opening profiles: paths, logdirs, HTTP(S), object stores |
//! | [`hlo`] | `xlens-hlo` | the HLO module graph, shapes, costs |
//! | [`roofline`] | `xlens-roofline` | chips, roofline, steps, op profile |
//! | [`budget`] | `xlens-budget` | HBM planning, precision audits |
//! | [`faults`] | `xlens-faults` | fault detectors and the scan report |
//!
//! The main job is the `fault_scan` example: `cargo run --release --example fault_scan -- PATH`.

pub use xlens_budget as budget;
pub use xlens_faults as faults;
pub use xlens_hlo as hlo;
pub use xlens_roofline as roofline;
pub use xlens_source as source;
pub use xlens_xplane as xplane;

pub mod args;
pub mod documents;
pub mod render;
