//! One file per detector; each is listed once in [`crate::registry::DETECTORS`].

pub(crate) mod allgather_duplication;
pub(crate) mod barrier_in_loop;
pub(crate) mod data_formatting_tax;
pub(crate) mod dcn_exposed_reduce;
pub(crate) mod device_idle;
pub(crate) mod donation_miss;
pub(crate) mod exposed_async_copy;
pub(crate) mod exposed_collective;
pub(crate) mod hbm_pressure;
pub(crate) mod host_callback_stall;
pub(crate) mod input_starvation;
pub(crate) mod launch_bound;
pub(crate) mod layout_mismatch_copy;
pub(crate) mod low_utilization;
pub(crate) mod padding_waste;
pub(crate) mod profile_during_warmup;
pub(crate) mod recompilation;
pub(crate) mod replicated_activations;
pub(crate) mod sparsecore_overflow;
pub(crate) mod straggler_core;
pub(crate) mod truncated_capture;
pub(crate) mod unfused_reshape;
pub(crate) mod unintended_remat;
pub(crate) mod unnecessary_convert_reduce;
pub(crate) mod vpu_bound;
pub(crate) mod wrong_mesh_mapping;
