//! Fault detectors over XProf profiles (skeleton).
//!
//! Filled by the `faults` issue: a `Detector` trait, a registry and `scan`.
