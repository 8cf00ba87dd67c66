//! One file per detector; each is listed once in [`crate::registry::DETECTORS`].

pub mod allgather_duplication;
pub mod donation_miss;
pub mod recompilation;
pub mod unintended_remat;
pub mod wrong_mesh_mapping;
