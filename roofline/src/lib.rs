//! Chip catalogue, roofline math, steps, op profile and step anatomy, for TPU, GPU and CPU
//! profiles.
//!
//! - **Chips.** [`ChipSpec`] and the [`chips`] catalogue (from `xlens-chips`, re-exported here);
//!   [`Chip`] is the effective chip of a profile, with per-core peaks read from its device plane
//!   ([`Chip::from_space`]) or the catalogue.
//! - **Roofline.** [`Roofline`] says what bounds a piece of [`Work`] and how close it runs to
//!   its roof, as XProf's roofline model does.
//! - **Steps, op profile, anatomy.** [`Steps`], [`OpProfile`] and [`StepAnatomy`] read a
//!   profile's step markers, per-op statistics and where each step's time goes.
//! - **Shared analyses.** [`Profile`] holds one [`HostProfile`] per host: its decoded space and
//!   the analyses above (and the HLO modules, the host-run op table, the duty cycle, the
//!   per-step op medians), each built once on first use and shared by every reader.
//!
//! ```
//! use xlens_roofline::{Bound, Bytes, Chip, Flops, Work};
//! use xlens_xplane::Picos;
//!
//! // One TensorCore of a TPU v4: half the chip's 275 TFLOP/s and 1200 GB/s.
//! let core = Chip::by_name("v4")?;
//! assert_eq!(core.peaks().flops.tflops(), 137.5);
//! // 1 ms of work moving 0.3 GB (300 of the core's 600 GB/s) at 20% of peak FLOP/s:
//! // HBM-bound, at 50% of its roof.
//! let work = Work {
//!     flops: Flops(0.2 * 137.5e12 * 1e-3),
//!     hbm_bytes: Bytes(300_000_000),
//!     time: Picos(1_000_000_000),
//!     ..Work::default()
//! };
//! let a = core.roofline().analyze(&work);
//! assert_eq!(a.bound, Some(Bound::Hbm));
//! assert!((a.efficiency - 0.5).abs() < 1e-9);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod anatomy;
mod chain;
mod chip;
mod device;
pub mod events;
pub mod framework;
mod framework_ops;
mod gpu;
mod host_ops;
mod host_profile;
mod input_pipeline;
mod intervals;
mod kernel_stats;
mod matmul_free;
pub mod memory_profile;
mod model;
mod op_profile;
mod op_profile_cpu;
mod perf_env;
mod span;
mod step_anatomy;
mod step_types;
mod steps;
mod tf_data;
mod timeline;
pub mod walks;

/// The chip catalogue: one [`ChipSpec`] per chip, each with its public source (from
/// `xlens-chips`, re-exported at its old path).
pub mod chips {
    pub use xlens_chips::catalogue::*;
}
/// Unit newtypes: FLOPs, FLOP/s, bytes, bytes/s and arithmetic intensity (from `xlens-chips`,
/// re-exported at its old path).
pub mod units {
    pub use xlens_chips::units::*;
}

#[cfg(feature = "frames")]
pub mod frame;

pub use anatomy::{
    InnermostSegments, Interval, PRIORITY, StepAnatomy, TimeClass, class_of, covered, covered_from, is_collective,
    merge_in_order, partition, partition_from,
};
pub use chip::{Chip, ChipSpecRoofline, PeakSource, Peaks, gpu_flops_per_cycle_per_sm};
pub use device::{MemoryBytes, OpMetadata, device_timespan, op_metadata_by_position};
pub use framework::{FRAMEWORKS, Framework, FrameworkInfo};
pub use framework_ops::{
    DeviceAttribution, ExecutorBusy, FrameworkOp, FrameworkOpStats, MAX_FRAMEWORK_OPS, OpSide, TF_EXECUTOR_THREAD,
    UNKNOWN_OP_TYPE,
};
pub use gpu::{
    CopyKind, GpuCaps, KernelDetails, KernelLibrary, MEMCPY_D2H, MEMCPY_H2D, copy_kind, keeps_kernel_category,
    memcpy_bytes, unattributed_category, uses_tensor_cores,
};
pub use host_ops::{HostOp, HostOps, LineRef, OpContext, OpKeys, OpSource};
pub use host_profile::{
    HostProfile, Profile, StepMedians, framework_op_analysis, host_step_medians, op_analyses, prepare_step_medians,
    step_modules,
};
pub use input_pipeline::{InputPipeline, MAX_INPUT_STEPS, MAX_TF_DATA_STAGES, StepInput, TfDataStage};
pub use intervals::{IntervalCursor, in_intervals, median_of};
pub use kernel_stats::{KernelStat, KernelStats};
pub use matmul_free::{MatmulFreeStretch, MatmulFreeStretches};
pub use model::{Analysis, Bound, Roofline, Work, arithmetic_intensity};
pub use op_profile::{
    BoundBy, CATEGORIES_WITH_INNER_OPS, IDLE, OpProfile, OpStats, ProgramWork, RooflinePoint,
    program_id_of_module_name, roofline_point,
};
pub use op_profile_cpu::{ATTENTION_CUSTOM_CALL, CONVOLUTION_CUSTOM_CALL, GEMM_CUSTOM_CALL, hlo_category};
pub use perf_env::PerfEnv;
pub use span::Span;
pub use step_anatomy::{anatomy_from_timeline, host_anatomy, host_anatomy_from_ops, tpu_anatomy};
pub use step_types::{CoreStepBreakdown, StepSource, is_host_step_marker};
pub use steps::{
    CoreStep, FLAT_CV, OUTLIER_FACTOR, Step, StepStats, StepVariance, Steps, TpuStepSummary, steps_from_timeline,
};
pub use tf_data::{
    MAX_ITERATOR_DEPTH, MAX_ITERATOR_VISITS, MAX_TF_DATA_EVENTS, SLOW_TF_DATA_CALL, TfDataIterator, TfDataPipeline,
    TfDataPipelineKind, TfDataPipelines, TfDataStageKind,
};
pub use timeline::{CoreStepSummary, CoreTimeline, DeviceTimeline, OFF_DUTY_CATEGORIES, OpAggregate};
pub use timeline::{DeviceEventGroups, HostEventGroups, MAX_GROUPED_EVENTS, TfEventGroups};
pub use xlens_chips::{
    Bytes, BytesPerSec, ChipSpec, Error, ErrorKind, Flops, FlopsPerByte, FlopsPerSec, GB, GIB, MIB, MemoryKind, OnChip,
    OnChipMemory, Result, Vendor,
};

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
