//! Chip catalogue, roofline math, steps, op profile and step anatomy, for TPU, GPU and CPU
//! profiles.
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod anatomy;
mod chain;
mod chip;
pub mod chips;
mod device;
mod error;
mod gpu;
mod host_ops;
mod kernel_stats;
mod matmul_free;
mod model;
mod op_profile;
mod op_profile_cpu;
mod perf_env;
mod spec;
mod step_anatomy;
mod step_types;
mod steps;
mod timeline;
pub mod units;

#[cfg(feature = "frames")]
pub mod frame;

pub use anatomy::{
    InnermostSegments, Interval, PRIORITY, StepAnatomy, TimeClass, class_of, covered, covered_from, is_collective,
    merge_in_order, partition, partition_from,
};
pub use chip::{Chip, ChipSpec, MemoryKind, OnChipMemory, PeakSource, Peaks, Vendor, gpu_flops_per_cycle_per_sm};
pub use device::{MemoryBytes, OpMetadata, device_timespan, op_metadata_by_position};
pub use error::{Error, ErrorKind, Result};
pub use gpu::{
    CopyKind, GpuCaps, KernelDetails, KernelLibrary, MEMCPY_D2H, MEMCPY_H2D, copy_kind, memcpy_bytes,
    unattributed_category, uses_tensor_cores,
};
pub use host_ops::{HostOp, HostOps, LineRef, OpContext, OpKeys, OpSource};
pub use kernel_stats::{KernelStat, KernelStats};
pub use matmul_free::{MatmulFreeStretch, MatmulFreeStretches};
pub use model::{Analysis, Bound, OnChip, Roofline, Work, arithmetic_intensity};
pub use op_profile::{
    BoundBy, CATEGORIES_WITH_INNER_OPS, IDLE, OpProfile, OpStats, ProgramWork, RooflinePoint,
    program_id_of_module_name, roofline_point,
};
pub use op_profile_cpu::{ATTENTION_CUSTOM_CALL, CONVOLUTION_CUSTOM_CALL, GEMM_CUSTOM_CALL, hlo_category};
pub use perf_env::PerfEnv;
pub use step_anatomy::{anatomy_from_timeline, host_anatomy, host_anatomy_from_ops, tpu_anatomy};
pub use step_types::{CoreStepBreakdown, StepSource, is_host_step_marker};
pub use steps::{
    CoreStep, FLAT_CV, OUTLIER_FACTOR, Step, StepStats, StepVariance, Steps, TpuStepSummary, steps_from_timeline,
};
pub use timeline::{CoreStepSummary, CoreTimeline, DeviceTimeline, OFF_DUTY_CATEGORIES, OpAggregate};
pub use units::{Bytes, BytesPerSec, Flops, FlopsPerByte, FlopsPerSec, GB, GIB, MIB};
