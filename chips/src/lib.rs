//! The chip catalogue of xlens: public datasheet figures (peak FLOP/s, HBM bandwidth and capacity,
//! on-chip memories, interconnect) of the TPUs and GPUs it knows, each with its source, and the
//! unit newtypes they are stated in.
//!
//! This crate has no dependency on the profile decoder: a capacity planner (`xlens-budget`) or
//! any tool that only needs chip figures can use it alone. `xlens-roofline` re-exports all of it
//! and adds the roofline math and the peaks read from profiles.
//!
//! ```
//! use xlens_chips::{Bytes, CATALOGUE, ChipSpec};
//! let v5e = ChipSpec::by_name("TPU v5 Lite")?; // ids, names and profile aliases all match
//! assert_eq!(v5e.id, "v5e");
//! assert_eq!(v5e.hbm_capacity, Bytes::from_gib(16));
//! assert_eq!(v5e.peak_bf16.tflops(), 197.0);
//! assert!((v5e.ridge_bf16().get() - 240.54).abs() < 0.01); // FLOP/s ÷ HBM bytes/s
//! assert!(CATALOGUE.iter().any(|c| c.id == "h100"));
//! Ok::<(), xlens_chips::Error>(())
//! ```
#![deny(missing_docs)]

pub mod catalogue;
mod error;
mod spec;
pub mod units;

pub use catalogue::CATALOGUE;
pub use error::{Error, ErrorKind, Result};
pub use spec::{ChipSpec, MemoryKind, OnChip, OnChipMemory, Vendor};
pub use units::{Bytes, BytesPerSec, Flops, FlopsPerByte, FlopsPerSec, GB, GIB, MIB};

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
