//! One file per detector; each is listed once in [`crate::registry::DETECTORS`].

pub mod allgather_duplication;
pub mod barrier_in_loop;
pub mod data_formatting_tax;
pub mod dcn_exposed_reduce;
pub mod device_idle;
pub mod donation_miss;
pub mod exposed_async_copy;
pub mod exposed_collective;
pub mod hbm_pressure;
pub mod host_callback_stall;
pub mod input_starvation;
pub mod launch_bound;
pub mod layout_mismatch_copy;
pub mod low_utilization;
pub mod padding_waste;
pub mod profile_during_warmup;
pub mod recompilation;
pub mod replicated_activations;
pub mod sparsecore_overflow;
pub mod straggler_core;
pub mod truncated_capture;
pub mod unfused_reshape;
pub mod unintended_remat;
pub mod unnecessary_convert_reduce;
pub mod vpu_bound;
pub mod wrong_mesh_mapping;
