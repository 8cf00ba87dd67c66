//! HBM capacity planning and precision audits (skeleton).
//!
//! Filled by the `budget` issue.
