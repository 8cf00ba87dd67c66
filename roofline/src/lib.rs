//! Chip catalogue, roofline math, steps, op profile and step anatomy.
//!
//! Work in progress: filled by the `roofline` issue.
#![warn(clippy::print_stdout, clippy::print_stderr)]
