//! One file per detector; each is listed once in [`crate::registry::DETECTORS`].

pub mod recompilation;
