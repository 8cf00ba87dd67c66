//! One file per detector; each is listed once in [`crate::registry::DETECTORS`].

pub mod dcn_exposed_reduce;
pub mod exposed_collective;
pub mod hbm_pressure;
pub mod recompilation;
pub mod sparsecore_overflow;
pub mod straggler_core;
pub mod vpu_bound;
