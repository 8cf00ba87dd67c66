//! Chip catalogue, roofline math, steps, op profile and step anatomy (skeleton).
//!
//! Filled by the `roofline` issue.
