//! Presentation of xlens results: everything that turns data into text, JSON, HTML or frames.
//!
//! The other crates compute: `xlens-faults` scans a profile into a [`Report`](xlens_faults::Report)
//! that is pure data. This crate is the only one that formats it, and nothing here computes a
//! finding or prints. [`render`] writes a report as text for terminals, JSON for scripts and a
//! self-contained HTML page with its charts; [`diff`] compares two reports (the verdict, the
//! categories and ops that moved, the findings) and writes the comparison; [`runs`] sums up many
//! runs of a logdir; [`tables`] holds the text and JSON of the other commands (op profile,
//! kernel stats, HLO ops, roofline, budget plans and audits, inventory, progress line); `frame`
//! (feature `frames`, polars) builds DataFrames and writes the Parquet dataset. Every function is
//! a pure function of its input, golden-tested byte for byte.
//!
//! ```
//! use xlens_faults::{Profile, ScanConfig, scan};
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/recompilation");
//! let profile = Profile::from_session(xlens_testkit::open_session(dir)?);
//! let report = scan(&profile, &ScanConfig::default());
//! let text = xlens_report::render::text(&report);
//! assert!(text.starts_with("NEEDS_ATTENTION"));
//! assert!(text.contains("recompilation"));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs, missing_debug_implementations)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod diff;
pub mod render;
pub mod runs;
pub mod tables;
mod text;

#[cfg(feature = "frames")]
pub mod frame;

#[cfg(test)]
pub(crate) mod testing;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
