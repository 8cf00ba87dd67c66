//! NVIDIA-shaped XLA:GPU profiles, written with [`SpaceBuilder`], deterministic for a seed.
//!
//! The layout follows XLA's CUPTI collector (`xla/backends/profiler/gpu/cupti_collector.cc`) and
//! what JAX adds around it (facts `real_world.md`, notes `xprof_gpu_semantics.md`):
//!
//! - one plane `/device:GPU:<n>` per GPU (plane id = ordinal) with the capability stats
//!   `device_vendor` ("Nvidia"), `gpu_device_name`, `clock_rate` (kHz), `core_count` (SMs),
//!   `memory_bandwidth` (B/s), `memory_size` (B), `compute_cap_major`/`compute_cap_minor`;
//! - one line per CUDA stream, id = stream id, named `Stream #<id>(<kinds>)` after the activity
//!   kinds it carries (`Stream #13(Kernel)`, `Stream #20(MemcpyH2D)`, `Stream #14(Kernel,MemcpyD2D)`);
//! - kernel events named by the demangled kernel name, with `correlation_id`, `context_id`,
//!   `theoretical_occupancy_pct`, `occupancy_min_grid_size`, `occupancy_suggested_block_size`,
//!   `kernel_details` (a ref stat: `regs:… static_shared:… dynamic_shared:… grid:x,y,z block:x,y,z
//!   occ_pct:…`) and, from XLA's annotations, `tf_op` (`XlaModule:`), `hlo_op`, `hlo_module`,
//!   `program_id`; memory copies named `MemcpyH2D`/`MemcpyD2H`/`MemcpyD2D` with a `memcpy_details`
//!   ref stat (`kind_src:… kind_dst:… size:… dest:… async:…`);
//! - `/host:CPU`: a `python` thread with a `train` step marker per step (`_r` = 1, `step_num`;
//!   none when the spec is stepless) around the `PjitFunction(…)` dispatch, which produces
//!   (`_pt`/`_p`) the executions of one launch thread per GPU (`Host Threads/<tid>`): a
//!   `GpuExecutable::ExecuteThunks` event consuming it (`_ct`/`_c`) around one driver API call per
//!   activity (`cuLaunchKernel`, `cuMemcpyHtoDAsync_v2`, …) carrying `device_id` and the
//!   `correlation_id` of its kernel (+ `hlo_op`, `hlo_module`, `program_id`). XProf groups steps
//!   through exactly this chain: `train` → dispatch → execution → launch → kernel (facts §3.1);
//! - `/host:metadata`: the HLO proto of the program (`<module>(<program_id>)`, stats `Hlo Proto`
//!   and `program_id`), built with [`HloBuilder`] from the program's [`HloOp`]s with real shapes:
//!   `__cublas$gemm` custom calls with a `gemm_backend_config`, Triton gemm fusions with a dot
//!   inside, loop and input fusions, copies, `all-reduce-start`/`all-reduce-done`;
//! - `Task Environment` with the profile start and stop times.
//!
//! Real XLA writes the driver API events on a `/host:CUPTI` plane whose lines XProf merges into
//! `/host:CPU` by thread id; they are written on `/host:CPU` directly here.
//!
//! Time model, per execution and GPU: activities run in program order (each starts when the one
//! before ends, plus its [`KernelSpec::gap_before_ps`]), and not before its launch call has
//! returned ([`LaunchModel`]); launch calls run back to back on the launch thread, a synchronous
//! copy blocks it until the copy ends. When launching takes longer than the kernels run, the GPU
//! idles between kernels: the launch-bound signature. Collective kernels start together on every
//! GPU. Durations vary with a seeded jitter; every time is a whole nanosecond, as from CUPTI.
//!
//! ```
//! use xlens_testkit::gpu::{GpuSpec, gpu_profile};
//! use xlens_xplane::Space;
//! let spec = GpuSpec { devices: 2, steps: 3, ..GpuSpec::default() };
//! let space = Space::parse(gpu_profile(&spec).into())?;
//! assert_eq!(space.gpus().len(), 2);
//! let python = space.host_threads().unwrap().line_by_name("python").unwrap();
//! assert_eq!(python.event_count(), 3 * 2); // a `train` marker and a dispatch per step
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use crate::synth::Rng;
use prost::Message;
use xlens_hlo::PrimitiveType;
use xlens_hlo::raw;
use xlens_hlo::testing::{HloBuilder, shape, tuple_shape};
use xlens_xplane::names::{plane, stat};
use xlens_xplane::{BuildValue, EventMetadataId, PlaneBuilder, SpaceBuilder, StatMetadataId};

/// Stat names the CUPTI collector writes that `xlens_xplane::names` does not list.
mod cupti {
    pub(super) const DEVICE_ID: &str = "device_id";
    pub(super) const CONTEXT_ID: &str = "context_id";
    pub(super) const THEORETICAL_OCCUPANCY_PCT: &str = "theoretical_occupancy_pct";
    pub(super) const OCCUPANCY_MIN_GRID_SIZE: &str = "occupancy_min_grid_size";
    pub(super) const OCCUPANCY_SUGGESTED_BLOCK_SIZE: &str = "occupancy_suggested_block_size";
    /// The name of the outermost XLA annotation, which the collector writes as `tf_op`.
    pub(super) const XLA_MODULE_ANNOTATION: &str = "XlaModule:";
}

/// Producer/consumer context type linking a dispatch to its executions (`_pt`/`_ct`).
const CONTEXT_GPU_LAUNCH: i64 = 9;
/// Plane ids of the host planes (GPU planes use their ordinal, as the collector does).
const HOST_CPU_ID: i64 = 1000;
const HOST_METADATA_ID: i64 = 1001;
const TASK_ENVIRONMENT_ID: i64 = 1002;
/// Thread ids of the python thread and of the first launch thread.
const PYTHON_TID: i64 = 18_204;
const LAUNCH_TID: i64 = 18_311;
/// Profile start (ns since the epoch) written to `Task Environment`.
const PROFILE_START_NS: u64 = 1_735_000_000_000_000_000;
/// Picoseconds per microsecond.
const US: i64 = 1_000_000;

/// The GPU a profile was captured on: the capability stats of each `/device:GPU:<n>` plane.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuDevice {
    /// `gpu_device_name`, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// `device_vendor`: XProf knows "Nvidia" and "AMD".
    pub vendor: String,
    /// `clock_rate`, SM clock in kHz.
    pub clock_rate_khz: i64,
    /// `core_count`: streaming multiprocessors.
    pub core_count: i64,
    /// `memory_bandwidth` in bytes/s.
    pub memory_bandwidth: u64,
    /// `memory_size` in bytes.
    pub memory_size: u64,
    /// `compute_cap_major`.
    pub compute_cap_major: i64,
    /// `compute_cap_minor`.
    pub compute_cap_minor: i64,
}

impl GpuDevice {
    /// An NVIDIA H100 SXM: compute capability 9.0, 132 SMs at 1.98 GHz, 3.35 TB/s, 80 GiB.
    pub fn h100_sxm() -> GpuDevice {
        GpuDevice {
            name: "NVIDIA H100 80GB HBM3".to_owned(),
            vendor: "Nvidia".to_owned(),
            clock_rate_khz: 1_980_000,
            core_count: 132,
            memory_bandwidth: 3_350_000_000_000,
            memory_size: 80 << 30,
            compute_cap_major: 9,
            compute_cap_minor: 0,
        }
    }
}

/// What an HLO instruction of the program computes, with the shapes its cost is priced from.
/// Every tensor is `bf16` (reductions accumulate and return `f32`).
#[derive(Clone, Debug, PartialEq)]
pub enum HloKind {
    /// A cuBLAS gemm: `custom-call` to `__cublas$gemm` of `bf16[m,k]` by `bf16[k,n]`, returning
    /// `(bf16[m,n], s8[workspace])`, with a `gemm_backend_config`.
    CublasGemm {
        /// Rows of the output.
        m: i64,
        /// Columns of the output.
        n: i64,
        /// Contracted dimension.
        k: i64,
    },
    /// A Triton gemm: a `kCustom` fusion (`__triton_gemm`) whose computation holds the `dot` of
    /// `bf16[m,k]` by `bf16[k,n]`.
    TritonGemm {
        /// Rows of the output.
        m: i64,
        /// Columns of the output.
        n: i64,
        /// Contracted dimension.
        k: i64,
    },
    /// A `kLoop` fusion applying `opcode` elementwise over `inputs` operands of shape `dims`
    /// (`inputs` = 1: a unary opcode such as `tanh`).
    Elementwise {
        /// The shape of every operand and of the result.
        dims: Vec<i64>,
        /// The elementwise HLO opcode (`add`, `multiply`, `tanh`, …).
        opcode: String,
        /// Number of operands.
        inputs: u32,
    },
    /// A `kInput` fusion reducing `bf16[dims]` over its last dimension to `f32`.
    Reduce {
        /// The operand's shape.
        dims: Vec<i64>,
    },
    /// A fusion holding one `transpose` of `bf16[dims]` by `permutation`.
    Transpose {
        /// The operand's shape.
        dims: Vec<i64>,
        /// The permutation (`dimensions` of the transpose).
        permutation: Vec<i64>,
        /// A `kInput` fusion (XLA's tiled transpose emitter) rather than `kLoop`.
        input_fusion: bool,
    },
    /// A bare `copy` of `bf16[dims]` (XLA runs it as a device-to-device memcpy).
    Copy {
        /// The shape copied.
        dims: Vec<i64>,
    },
    /// An `all-reduce-start` (this op) and its `all-reduce-done` (`done`) summing `bf16[elements]`
    /// over every GPU.
    AllReduce {
        /// Elements reduced.
        elements: i64,
        /// Name of the `all-reduce-done` instruction.
        done: String,
    },
}

impl HloKind {
    /// Model FLOPs of one execution (2·m·n·k for gemms, one per element and operand for
    /// elementwise ops and reductions, 0 for data movement).
    pub fn flops(&self) -> u64 {
        let n = |dims: &[i64]| dims.iter().product::<i64>().max(0) as u64;
        match self {
            HloKind::CublasGemm { m, n: cols, k } | HloKind::TritonGemm { m, n: cols, k } => {
                2 * (*m as u64) * (*cols as u64) * (*k as u64)
            }
            HloKind::Elementwise { dims, inputs, .. } => n(dims) * u64::from((*inputs).max(2) - 1),
            HloKind::Reduce { dims } => n(dims),
            HloKind::AllReduce { elements, .. } => *elements as u64,
            HloKind::Transpose { .. } | HloKind::Copy { .. } => 0,
        }
    }

    /// Bytes one execution reads and writes in HBM (operands and result, 2 bytes per element).
    pub fn bytes(&self) -> u64 {
        let n = |dims: &[i64]| dims.iter().product::<i64>().max(0) as u64;
        match self {
            HloKind::CublasGemm { m, n: cols, k } | HloKind::TritonGemm { m, n: cols, k } => {
                2 * (*m as u64 * *k as u64 + *k as u64 * *cols as u64 + *m as u64 * *cols as u64)
            }
            HloKind::Elementwise { dims, inputs, .. } => 2 * n(dims) * (u64::from(*inputs) + 1),
            HloKind::Reduce { dims } => {
                let rows = n(&dims[..dims.len().saturating_sub(1)]);
                2 * n(dims) + 4 * rows
            }
            HloKind::Transpose { dims, .. } | HloKind::Copy { dims } => 4 * n(dims),
            HloKind::AllReduce { elements, .. } => 4 * (*elements).max(0) as u64,
        }
    }
}

/// One HLO instruction of the program (an entry-computation instruction; fusions get their own
/// fused computation).
#[derive(Clone, Debug, PartialEq)]
pub struct HloOp {
    /// Instruction name, e.g. `custom-call.1` or `loop_add_fusion`: what kernels name in `hlo_op`.
    pub name: String,
    /// What it computes.
    pub kind: HloKind,
    /// JAX's `op_name` metadata, e.g. `jit(train_step)/jit(main)/dot_general`.
    pub op_name: String,
}

impl HloOp {
    /// An op with a name, a kind and an `op_name`.
    pub fn new(name: &str, kind: HloKind, op_name: &str) -> HloOp {
        HloOp { name: name.to_owned(), kind, op_name: op_name.to_owned() }
    }
}

/// The CUPTI activity kind of a device event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ActivityKind {
    /// A kernel.
    Kernel,
    /// A host-to-device copy.
    MemcpyH2D,
    /// A device-to-host copy.
    MemcpyD2H,
    /// A device-to-device copy.
    MemcpyD2D,
}

impl ActivityKind {
    /// The collector's name of the kind: the event name of copies and the word in stream line
    /// names (`Kernel`, `MemcpyH2D`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityKind::Kernel => "Kernel",
            ActivityKind::MemcpyH2D => "MemcpyH2D",
            ActivityKind::MemcpyD2H => "MemcpyD2H",
            ActivityKind::MemcpyD2D => "MemcpyD2D",
        }
    }

    /// The driver API call that issues a copy of this kind (`None` for kernels).
    pub fn copy_api(self, synchronous: bool) -> Option<&'static str> {
        Some(match (self, synchronous) {
            (ActivityKind::Kernel, _) => return None,
            (ActivityKind::MemcpyH2D, false) => "cuMemcpyHtoDAsync_v2",
            (ActivityKind::MemcpyH2D, true) => "cuMemcpyHtoD_v2",
            (ActivityKind::MemcpyD2H, false) => "cuMemcpyDtoHAsync_v2",
            (ActivityKind::MemcpyD2H, true) => "cuMemcpyDtoH_v2",
            (ActivityKind::MemcpyD2D, false) => "cuMemcpyDtoDAsync_v2",
            (ActivityKind::MemcpyD2D, true) => "cuMemcpyDtoD_v2",
        })
    }

    /// `kind_src` and `kind_dst` of a copy's `memcpy_details` (CUPTI memory kinds).
    fn memory_kinds(self) -> (&'static str, &'static str) {
        match self {
            ActivityKind::MemcpyH2D => ("pinned", "device"),
            ActivityKind::MemcpyD2H => ("device", "pinned"),
            ActivityKind::MemcpyD2D | ActivityKind::Kernel => ("device", "device"),
        }
    }
}

/// Launch parameters of a kernel: what `kernel_details` and the occupancy stats report.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchDims {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared: u32,
    /// Grid dimensions (blocks).
    pub grid: [u32; 3],
    /// Block dimensions (threads).
    pub block: [u32; 3],
    /// Theoretical occupancy, percent.
    pub occupancy_pct: f64,
}

impl LaunchDims {
    /// A cuBLAS sm90 gemm over an `m`×`n` output in 128×128 tiles: 384 threads, 208 KiB of
    /// dynamic shared memory, one block per SM.
    pub fn cublas(m: i64, n: i64) -> LaunchDims {
        let tiles = |x: i64| ((x + 127) / 128).clamp(1, i64::from(u32::MAX)) as u32;
        LaunchDims {
            registers: 168,
            static_shared: 0,
            dynamic_shared: 213_248,
            grid: [tiles(n), tiles(m), 1],
            block: [384, 1, 1],
            occupancy_pct: 18.75,
        }
    }

    /// A Triton gemm over an `m`×`n` output in 128×128 tiles: 8 warps, 128 KiB of dynamic shared
    /// memory.
    pub fn triton(m: i64, n: i64) -> LaunchDims {
        let tiles = ((m + 127) / 128) * ((n + 127) / 128);
        LaunchDims {
            registers: 232,
            static_shared: 0,
            dynamic_shared: 131_072,
            grid: [tiles.clamp(1, i64::from(u32::MAX)) as u32, 1, 1],
            block: [256, 1, 1],
            occupancy_pct: 12.5,
        }
    }

    /// An XLA loop-emitter kernel over `elements` (128 threads a block, 4 elements a thread).
    pub fn elementwise(elements: i64) -> LaunchDims {
        let blocks = ((elements + 511) / 512).clamp(1, i64::from(u32::MAX)) as u32;
        LaunchDims {
            registers: 24,
            static_shared: 0,
            dynamic_shared: 0,
            grid: [blocks, 1, 1],
            block: [128, 1, 1],
            occupancy_pct: 100.0,
        }
    }

    /// An XLA row reduction over `rows` rows (one warp a row, 8 rows a block).
    pub fn row_reduction(rows: i64) -> LaunchDims {
        LaunchDims {
            registers: 40,
            static_shared: 1_024,
            dynamic_shared: 0,
            grid: [((rows + 7) / 8).clamp(1, i64::from(u32::MAX)) as u32, 1, 1],
            block: [32, 8, 1],
            occupancy_pct: 100.0,
        }
    }

    /// XLA's tiled transpose over `elements` (32×32 tiles through shared memory).
    pub fn transpose(elements: i64) -> LaunchDims {
        LaunchDims {
            registers: 30,
            static_shared: 2_112,
            dynamic_shared: 0,
            grid: [((elements + 1023) / 1024).clamp(1, i64::from(u32::MAX)) as u32, 1, 1],
            block: [32, 4, 1],
            occupancy_pct: 100.0,
        }
    }

    /// An NCCL device kernel: one block of 640 threads per channel.
    pub fn nccl(channels: u32) -> LaunchDims {
        LaunchDims {
            registers: 96,
            static_shared: 0,
            dynamic_shared: 0,
            grid: [channels.max(1), 1, 1],
            block: [640, 1, 1],
            occupancy_pct: 31.25,
        }
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.block.iter().product()
    }

    /// The `kernel_details` string, as the collector's `ToXStat` writes it.
    pub fn details(&self) -> String {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        format!(
            "regs:{} static_shared:{} dynamic_shared:{} grid:{gx},{gy},{gz} block:{bx},{by},{bz} occ_pct:{}",
            self.registers, self.static_shared, self.dynamic_shared, self.occupancy_pct
        )
    }
}

/// One device activity of the program: a kernel or a memory copy, run once per execution on
/// every GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSpec {
    /// The event name: the demangled kernel name, or the copy kind (`MemcpyH2D`, …).
    pub name: String,
    /// Kernel or copy.
    pub kind: ActivityKind,
    /// CUDA stream id on GPU 0; GPU `d` uses `stream + d ·` [`GpuSpec::stream_stride`].
    pub stream: i64,
    /// Nominal duration on the device.
    pub duration_ps: i64,
    /// Device idle time before it, on top of waiting for the activity before it.
    pub gap_before_ps: i64,
    /// The HLO instruction it runs (`hlo_op`), if any: it must be an op of the program.
    pub hlo_op: Option<String>,
    /// Duration of its launch call, if not the [`LaunchModel`]'s.
    pub launch_ps: Option<i64>,
    /// The launch call's name, if not the [`LaunchModel`]'s (`cuLaunchKernelEx` for NCCL).
    pub launch_api: Option<String>,
    /// Launch parameters (kernels only).
    pub dims: LaunchDims,
    /// Bytes copied (copies only).
    pub bytes: u64,
    /// A synchronous copy: the host call blocks until the copy ends.
    pub synchronous: bool,
    /// Starts at the same time on every GPU (a collective).
    pub collective: bool,
}

impl KernelSpec {
    /// A kernel named `name` running `hlo_op` on `stream` for `duration_ps`.
    pub fn kernel(name: &str, hlo_op: Option<&str>, stream: i64, duration_ps: i64, dims: LaunchDims) -> KernelSpec {
        KernelSpec {
            name: name.to_owned(),
            kind: ActivityKind::Kernel,
            stream,
            duration_ps,
            gap_before_ps: 0,
            hlo_op: hlo_op.map(str::to_owned),
            launch_ps: None,
            launch_api: None,
            dims,
            bytes: 0,
            synchronous: false,
            collective: false,
        }
    }

    /// A copy of `bytes` on `stream` for `duration_ps`.
    pub fn memcpy(kind: ActivityKind, stream: i64, bytes: u64, duration_ps: i64, synchronous: bool) -> KernelSpec {
        KernelSpec {
            name: kind.as_str().to_owned(),
            kind,
            stream,
            duration_ps,
            gap_before_ps: 0,
            hlo_op: None,
            launch_ps: None,
            launch_api: None,
            dims: LaunchDims::elementwise(1),
            bytes,
            synchronous,
            collective: false,
        }
    }

    /// The `memcpy_details` string of a copy to GPU `device`.
    fn memcpy_details(&self, device: u32) -> String {
        let (src, dst) = self.kind.memory_kinds();
        let dest = if self.kind == ActivityKind::MemcpyD2H { 0 } else { device };
        format!("kind_src:{src} kind_dst:{dst} size:{} dest:{dest} async:{}", self.bytes, u8::from(!self.synchronous))
    }
}

/// The compiled program and what one execution runs.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuProgram {
    /// HLO module name (`hlo_module` stat), e.g. `jit_train_step`.
    pub module_name: String,
    /// Program id (`program_id` stat and the `/host:metadata` key).
    pub program_id: u64,
    /// The entry instructions of the HLO module.
    pub ops: Vec<HloOp>,
    /// The device activities of one execution, in launch order.
    pub kernels: Vec<KernelSpec>,
}

/// How the host launches work: each activity is issued by one driver API call on the GPU's
/// launch thread, back to back.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchModel {
    /// The kernel launch call's name.
    pub api: String,
    /// Duration of one launch call.
    pub launch_ps: i64,
    /// Host time between two calls.
    pub gap_ps: i64,
    /// From a launch call's return to the earliest start of its kernel.
    pub latency_ps: i64,
}

impl Default for LaunchModel {
    /// `cuLaunchKernel` calls of 4 µs, 1 µs apart, kernels starting 1 µs after their launch.
    fn default() -> Self {
        LaunchModel { api: "cuLaunchKernel".to_owned(), launch_ps: 4 * US, gap_ps: US, latency_ps: US }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSpec {
    /// GPUs (planes `/device:GPU:0..devices`), all running the program.
    pub devices: u32,
    /// Training steps, each one execution under a `train` marker; 0: stepless.
    pub steps: u32,
    /// Executions when stepless (`steps` = 0), with no step markers.
    pub stepless_executions: u32,
    /// Seed of the duration jitter.
    pub seed: u64,
    /// Relative jitter of durations (0.02 = ±2 %).
    pub jitter: f64,
    /// The GPU model.
    pub device: GpuDevice,
    /// The program.
    pub program: GpuProgram,
    /// The host launch model.
    pub launch: LaunchModel,
    /// From an execution's start (its `train` marker) to its first launch call: the dispatch.
    pub host_lead_ps: i64,
    /// Host time between executions (nothing runs).
    pub step_gap_ps: i64,
    /// Stream ids of GPU `d` are those of GPU 0 plus `d · stream_stride`.
    pub stream_stride: i64,
    /// The host name.
    pub hostname: String,
}

impl Default for GpuSpec {
    /// The `gpu_healthy` fixture's program on one H100 for 10 steps.
    fn default() -> Self {
        GpuSpec {
            devices: 1,
            steps: 10,
            stepless_executions: 20,
            seed: 1,
            jitter: 0.02,
            device: GpuDevice::h100_sxm(),
            program: healthy_program(),
            launch: LaunchModel::default(),
            host_lead_ps: 60 * US,
            step_gap_ps: 150 * US,
            stream_stride: 16,
            hostname: "gpu-host-0".to_owned(),
        }
    }
}

impl GpuSpec {
    /// Executions written: `steps`, or `stepless_executions` when stepless.
    pub fn executions(&self) -> u32 {
        if self.steps > 0 { self.steps } else { self.stepless_executions }
    }

    /// The stream line name of every stream of GPU 0, by stream id: `Stream #<id>(<kinds>)`.
    pub fn stream_names(&self) -> BTreeMap<i64, String> {
        self.streams(0)
    }

    fn streams(&self, device: u32) -> BTreeMap<i64, String> {
        let mut kinds: BTreeMap<i64, BTreeSet<ActivityKind>> = BTreeMap::new();
        for k in &self.program.kernels {
            kinds.entry(self.stream_id(k, device)).or_default().insert(k.kind);
        }
        kinds
            .into_iter()
            .map(|(id, kinds)| {
                let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
                (id, format!("Stream #{id}({})", kinds.join(",")))
            })
            .collect()
    }

    fn stream_id(&self, kernel: &KernelSpec, device: u32) -> i64 {
        kernel.stream + i64::from(device) * self.stream_stride
    }
}

fn whole_ns(ps: f64) -> i64 {
    ((ps / 1000.0).round() as i64).max(1) * 1000
}

/// One activity placed in time on one GPU.
#[derive(Clone, Copy, Debug)]
struct Placed {
    kernel: usize,
    device: u32,
    correlation_id: u64,
    launch_start: i64,
    launch_end: i64,
    start: i64,
    end: i64,
}

/// One execution of the program.
#[derive(Clone, Debug)]
struct Execution {
    /// The host span: the `train` marker.
    start: i64,
    end: i64,
    /// The `PjitFunction` dispatch.
    dispatch: (i64, i64),
    /// Per GPU, the span of its launch thread's execution event.
    launch_spans: Vec<(i64, i64)>,
    placed: Vec<Placed>,
}

fn schedule(spec: &GpuSpec) -> Vec<Execution> {
    let mut rng = Rng::new(spec.seed);
    let devices = spec.devices.max(1);
    let launch = &spec.launch;
    let mut correlation_id = 1u64;
    let mut t = 100 * US;
    let mut out = Vec::new();
    for _ in 0..spec.executions() {
        let start = t;
        let first_launch = start + whole_ns(spec.host_lead_ps as f64);
        let dispatch = (start + 2_000_000, first_launch - 1_000_000);
        let mut host: Vec<i64> = (0..devices).map(|d| first_launch + i64::from(d) * 1_000_000).collect();
        let launch_starts = host.clone();
        let mut free = vec![first_launch; devices as usize];
        let mut placed = Vec::new();
        for (index, k) in spec.program.kernels.iter().enumerate() {
            let mut row = Vec::with_capacity(devices as usize);
            for d in 0..devices as usize {
                let duration = whole_ns(k.duration_ps as f64 * rng.jitter(spec.jitter));
                let call = whole_ns(k.launch_ps.unwrap_or(launch.launch_ps) as f64 * rng.jitter(spec.jitter));
                let (launch_start, launch_end) = (host[d], host[d] + call);
                let issued = if k.synchronous { launch_start } else { launch_end };
                let gap = if k.gap_before_ps > 0 { whole_ns(k.gap_before_ps as f64) } else { 0 };
                let ready = free[d] + gap;
                row.push((launch_start, launch_end, ready.max(issued + launch.latency_ps), duration));
            }
            if k.collective {
                let together = row.iter().map(|r| r.2).max().unwrap_or(0);
                row.iter_mut().for_each(|r| r.2 = together);
            }
            for (d, (launch_start, launch_end, begin, duration)) in row.into_iter().enumerate() {
                let end = begin + duration;
                let launch_end = if k.synchronous { launch_end.max(end + 1_000_000) } else { launch_end };
                placed.push(Placed {
                    kernel: index,
                    device: d as u32,
                    correlation_id,
                    launch_start,
                    launch_end,
                    start: begin,
                    end,
                });
                correlation_id += 1;
                host[d] = launch_end + launch.gap_ps;
                free[d] = end;
            }
        }
        let launch_spans: Vec<(i64, i64)> = launch_starts.iter().zip(&host).map(|(&s, &e)| (s, e)).collect();
        let device_end = free.iter().chain(&host).copied().max().unwrap_or(first_launch);
        let end = device_end + 10 * US;
        out.push(Execution { start, end, dispatch, launch_spans, placed });
        t = end + whole_ns(spec.step_gap_ps as f64);
    }
    out
}

/// Writes the profile of `spec`: GPU planes, `/host:CPU`, `/host:metadata`, `Task Environment`.
pub fn gpu_profile(spec: &GpuSpec) -> Vec<u8> {
    let runs = schedule(spec);
    let mut b = SpaceBuilder::default();
    b.hostname(&spec.hostname);
    for device in 0..spec.devices.max(1) {
        write_device(&mut b, spec, device, &runs);
    }
    write_host(&mut b, spec, &runs);
    write_metadata(&mut b, spec);
    let stop = runs.last().map_or(0, |r| r.end + spec.step_gap_ps);
    {
        let mut env = b.plane(TASK_ENVIRONMENT_ID, plane::TASK_ENVIRONMENT);
        let start = env.stat_metadata(stat::PROFILE_START_TIME);
        let end = env.stat_metadata(stat::PROFILE_STOP_TIME);
        env.stat(start, PROFILE_START_NS);
        env.stat(end, PROFILE_START_NS + (stop / 1000) as u64);
    }
    b.finish()
}

fn capability<'v>(p: &mut PlaneBuilder<'_>, name: &str, value: impl Into<BuildValue<'v>>) {
    let id = p.stat_metadata(name);
    p.stat(id, value);
}

/// Stat ids of a plane's XLA annotation stats.
struct AnnotationIds {
    tf_op: StatMetadataId,
    hlo_op: StatMetadataId,
    hlo_module: StatMetadataId,
    program_id: StatMetadataId,
    /// Ref values: the `XlaModule:` annotation and the module name.
    xla_module_ref: StatMetadataId,
    module_ref: StatMetadataId,
}

impl AnnotationIds {
    fn new(p: &mut PlaneBuilder<'_>, spec: &GpuSpec) -> AnnotationIds {
        AnnotationIds {
            tf_op: p.stat_metadata(stat::TF_OP),
            hlo_op: p.stat_metadata(stat::HLO_OP),
            hlo_module: p.stat_metadata(stat::HLO_MODULE),
            program_id: p.stat_metadata(stat::PROGRAM_ID),
            xla_module_ref: p.stat_metadata(cupti::XLA_MODULE_ANNOTATION),
            module_ref: p.stat_metadata(&spec.program.module_name),
        }
    }
}

/// Per kernel of the program: the event metadata and the ref-value stat ids of one plane.
struct KernelIds {
    meta: EventMetadataId,
    details: StatMetadataId,
    hlo_op: Option<StatMetadataId>,
}

fn write_device(b: &mut SpaceBuilder, spec: &GpuSpec, device: u32, runs: &[Execution]) {
    let dev = &spec.device;
    let mut p = b.plane(i64::from(device), &format!("{}{device}", plane::GPU_PREFIX));
    {
        use stat::capability as cap;
        capability(&mut p, cap::DEVICE_VENDOR, dev.vendor.as_str());
        capability(&mut p, cap::GPU_DEVICE_NAME, dev.name.as_str());
        capability(&mut p, cap::CLOCK_RATE, dev.clock_rate_khz);
        capability(&mut p, cap::CORE_COUNT, dev.core_count);
        capability(&mut p, cap::MEMORY_BANDWIDTH, dev.memory_bandwidth);
        capability(&mut p, cap::MEMORY_SIZE, dev.memory_size);
        capability(&mut p, cap::COMPUTE_CAP_MAJOR, dev.compute_cap_major);
        capability(&mut p, cap::COMPUTE_CAP_MINOR, dev.compute_cap_minor);
    }
    let correlation = p.stat_metadata(stat::CORRELATION_ID);
    let context = p.stat_metadata(cupti::CONTEXT_ID);
    let occupancy = p.stat_metadata(cupti::THEORETICAL_OCCUPANCY_PCT);
    let min_grid = p.stat_metadata(cupti::OCCUPANCY_MIN_GRID_SIZE);
    let block_size = p.stat_metadata(cupti::OCCUPANCY_SUGGESTED_BLOCK_SIZE);
    let kernel_details = p.stat_metadata(stat::KERNEL_DETAILS);
    let memcpy_details = p.stat_metadata(stat::MEMCPY_DETAILS);
    let ann = AnnotationIds::new(&mut p, spec);
    let ids: Vec<KernelIds> = spec
        .program
        .kernels
        .iter()
        .map(|k| {
            let details = match k.kind {
                ActivityKind::Kernel => k.dims.details(),
                _ => k.memcpy_details(device),
            };
            KernelIds {
                meta: p.event_metadata(&k.name),
                details: p.stat_metadata(&details),
                hlo_op: k.hlo_op.as_deref().map(|op| p.stat_metadata(op)),
            }
        })
        .collect();
    let program_id = spec.program.program_id as i64;
    let cores = dev.core_count;
    for (stream, name) in spec.streams(device) {
        let mut line = p.line(stream, &name, 0);
        for run in runs {
            for placed in run.placed.iter().filter(|x| x.device == device) {
                let k = &spec.program.kernels[placed.kernel];
                if spec.stream_id(k, device) != stream {
                    continue;
                }
                let id = &ids[placed.kernel];
                let mut ev = line
                    .event(id.meta, placed.start, placed.end - placed.start)
                    .stat(correlation, placed.correlation_id)
                    .stat(context, "$$1");
                if k.kind == ActivityKind::Kernel {
                    let threads = k.dims.threads().max(1);
                    let per_sm = ((k.dims.occupancy_pct / 100.0 * 2048.0) / f64::from(threads)).floor().max(1.0);
                    ev = ev
                        .stat(occupancy, k.dims.occupancy_pct)
                        .stat(min_grid, per_sm as i64 * cores)
                        .stat(block_size, i64::from(threads))
                        .stat(kernel_details, BuildValue::Ref(id.details));
                } else {
                    ev = ev.stat(memcpy_details, BuildValue::Ref(id.details));
                }
                if let Some(op) = id.hlo_op {
                    ev.stat(ann.tf_op, BuildValue::Ref(ann.xla_module_ref))
                        .stat(ann.hlo_op, BuildValue::Ref(op))
                        .stat(ann.hlo_module, BuildValue::Ref(ann.module_ref))
                        .stat(ann.program_id, program_id);
                }
            }
        }
    }
}

/// The function name JAX puts in `PjitFunction(…)`: the module name without `jit_`.
fn function_name(module: &str) -> &str {
    module.strip_prefix("jit_").unwrap_or(module)
}

fn write_host(b: &mut SpaceBuilder, spec: &GpuSpec, runs: &[Execution]) {
    let mut h = b.plane(HOST_CPU_ID, plane::HOST_CPU);
    let train = h.event_metadata("train");
    let dispatch = h.event_metadata(&format!("PjitFunction({})", function_name(&spec.program.module_name)));
    let execute = h.event_metadata("GpuExecutable::ExecuteThunks");
    let step_num = h.stat_metadata(stat::STEP_NUM);
    let root = h.stat_metadata(stat::IS_ROOT);
    let pt = h.stat_metadata(stat::PRODUCER_TYPE);
    let p = h.stat_metadata(stat::PRODUCER_ID);
    let ct = h.stat_metadata(stat::CONSUMER_TYPE);
    let c = h.stat_metadata(stat::CONSUMER_ID);
    let device_id = h.stat_metadata(cupti::DEVICE_ID);
    let correlation = h.stat_metadata(stat::CORRELATION_ID);
    let ann = AnnotationIds::new(&mut h, spec);
    let apis: Vec<EventMetadataId> = spec
        .program
        .kernels
        .iter()
        .map(|k| {
            let api = match k.kind.copy_api(k.synchronous) {
                Some(api) => api,
                None => k.launch_api.as_deref().unwrap_or(&spec.launch.api),
            };
            h.event_metadata(api)
        })
        .collect();
    let ops: Vec<Option<StatMetadataId>> =
        spec.program.kernels.iter().map(|k| k.hlo_op.as_deref().map(|op| h.stat_metadata(op))).collect();
    {
        let mut python = h.line(PYTHON_TID, "python", 0);
        for (s, run) in runs.iter().enumerate() {
            if spec.steps > 0 {
                python.event(train, run.start, run.end - run.start).stat(step_num, s as i64).stat(root, 1i64);
            }
            python
                .event(dispatch, run.dispatch.0, run.dispatch.1 - run.dispatch.0)
                .stat(pt, CONTEXT_GPU_LAUNCH)
                .stat(p, s as i64 + 1);
        }
    }
    let program_id = spec.program.program_id as i64;
    for device in 0..spec.devices.max(1) {
        let tid = LAUNCH_TID + i64::from(device);
        let mut line = h.line(tid, &format!("Host Threads/{tid}"), 0);
        for (s, run) in runs.iter().enumerate() {
            let (from, to) = run.launch_spans[device as usize];
            line.event(execute, from, to - from).stat(ct, CONTEXT_GPU_LAUNCH).stat(c, s as i64 + 1);
            for placed in run.placed.iter().filter(|x| x.device == device) {
                let ev = line
                    .event(apis[placed.kernel], placed.launch_start, placed.launch_end - placed.launch_start)
                    .stat(device_id, device)
                    .stat(correlation, placed.correlation_id);
                if let Some(op) = ops[placed.kernel] {
                    ev.stat(ann.tf_op, BuildValue::Ref(ann.xla_module_ref))
                        .stat(ann.hlo_op, BuildValue::Ref(op))
                        .stat(ann.hlo_module, BuildValue::Ref(ann.module_ref))
                        .stat(ann.program_id, program_id);
                }
            }
        }
    }
}

fn write_metadata(b: &mut SpaceBuilder, spec: &GpuSpec) {
    let proto = gpu_hlo_proto(spec);
    let mut m = b.plane(HOST_METADATA_ID, plane::HOST_METADATA);
    let module = m.event_metadata(&format!("{}({})", spec.program.module_name, spec.program.program_id));
    let hlo = m.stat_metadata(stat::HLO_PROTO);
    let pid = m.stat_metadata(stat::PROGRAM_ID);
    m.metadata_stat(module, hlo, proto.as_slice());
    m.metadata_stat(module, pid, spec.program.program_id);
}

/// `backend_config` of a cuBLAS gemm (the JSON XLA writes, as in real captures).
fn gemm_backend_config(m: i64, n: i64, k: i64) -> String {
    format!(
        concat!(
            r#"{{"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":{{"#,
            r#""selected_algorithm":"7","alpha_real":1,"beta":0,"dot_dimension_numbers":{{"#,
            r#""lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"#,
            r#""lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}},"alpha_imag":0,"#,
            r#""precision_config":{{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"}},"#,
            r#""epilogue":"DEFAULT","lhs_stride":"{}","rhs_stride":"{}","grad_x":false,"grad_y":false,"#,
            r#""damax_output":false}},"force_earliest_schedule":false}}"#
        ),
        m * k,
        k * n
    )
}

const TRITON_BACKEND_CONFIG: &str = concat!(
    r#"{"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":"__triton_gemm","#,
    r#""triton_gemm_config":{"block_m":"128","block_n":"128","block_k":"64","split_k":"1","num_stages":"4","#,
    r#""num_warps":"8","num_ctas":"1"}},"force_earliest_schedule":false}"#
);

const ALL_REDUCE_BACKEND_CONFIG: &str = concat!(
    r#"{"operation_queue_id":"0","wait_on_operation_queues":[],"collective_backend_config":{"is_sync":false,"#,
    r#""no_parallel_custom_call":false,"is_pipelined":false},"force_earliest_schedule":false}"#
);

/// cuBLAS workspace on Hopper: 32 MiB.
const CUBLAS_WORKSPACE: i64 = 32 << 20;

fn bf16(dims: &[i64]) -> raw::ShapeProto {
    shape(PrimitiveType::Bf16, dims)
}

fn f32s(dims: &[i64]) -> raw::ShapeProto {
    shape(PrimitiveType::F32, dims)
}

fn metadata(op_name: &str, op_type: &str) -> Option<raw::OpMetadata> {
    Some(raw::OpMetadata { op_name: op_name.to_owned(), op_type: op_type.to_owned(), ..Default::default() })
}

/// The serialized `xla.HloProto` of `spec`'s program: an entry computation `main` with one
/// instruction per [`HloOp`] (fusions calling their fused computations), entry parameters for
/// every operand no earlier op produced, and a tuple of every result as root; with the host
/// program shape XLA needs to load it.
pub fn gpu_hlo_proto(spec: &GpuSpec) -> Vec<u8> {
    let proto = build_hlo(&spec.program, spec.devices.max(1)).encode_to_vec();
    wire::with_custom_call_api_version(&proto).unwrap_or(proto)
}

/// Just enough protobuf wire format to add a field that `xlens_hlo::raw` does not declare.
mod wire {
    /// `HloInstructionProto.custom_call_api_version`, and its value `API_VERSION_ORIGINAL`, which
    /// XLA writes on every `__cublas$gemm` custom call.
    const CUSTOM_CALL_API_VERSION: u64 = 77;
    const API_VERSION_ORIGINAL: u64 = 1;

    fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *buf.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A field: (field number, wire type, the field's whole encoding, payload).
    type Field<'a> = (u64, u64, &'a [u8], &'a [u8]);

    /// The fields of a message.
    fn fields(buf: &[u8]) -> Option<Vec<Field<'_>>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let start = at;
            let tag = varint(buf, &mut at)?;
            let payload = match tag & 7 {
                0 => {
                    let from = at;
                    varint(buf, &mut at)?;
                    &buf[from..at]
                }
                1 => {
                    at += 8;
                    buf.get(at - 8..at)?
                }
                2 => {
                    let len = usize::try_from(varint(buf, &mut at)?).ok()?;
                    at = at.checked_add(len)?;
                    buf.get(at - len..at)?
                }
                5 => {
                    at += 4;
                    buf.get(at - 4..at)?
                }
                _ => return None,
            };
            out.push((tag >> 3, tag & 7, buf.get(start..at)?, payload));
        }
        Some(out)
    }

    /// Rewrites the length-delimited fields numbered `field` of a message with `f`.
    fn rewrite(buf: &[u8], field: u64, f: &dyn Fn(&[u8]) -> Option<Vec<u8>>) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(buf.len() + 64);
        for (number, wire_type, whole, payload) in fields(buf)? {
            if number == field && wire_type == 2 {
                let inner = f(payload)?;
                put_varint(&mut out, (field << 3) | 2);
                put_varint(&mut out, inner.len() as u64);
                out.extend_from_slice(&inner);
            } else {
                out.extend_from_slice(whole);
            }
        }
        Some(out)
    }

    fn instruction(buf: &[u8]) -> Option<Vec<u8>> {
        let fields = fields(buf)?;
        let is_custom_call = fields.iter().any(|(n, w, _, p)| *n == 2 && *w == 2 && *p == b"custom-call");
        let mut out = buf.to_vec();
        if is_custom_call && !fields.iter().any(|(n, ..)| *n == CUSTOM_CALL_API_VERSION) {
            put_varint(&mut out, CUSTOM_CALL_API_VERSION << 3);
            put_varint(&mut out, API_VERSION_ORIGINAL);
        }
        Some(out)
    }

    /// An `HloProto` with `custom_call_api_version` set on every custom call (module field 1,
    /// computations field 3, instructions field 2); `None` if the bytes do not decode.
    pub(super) fn with_custom_call_api_version(proto: &[u8]) -> Option<Vec<u8>> {
        rewrite(proto, 1, &|module| rewrite(module, 3, &|computation| rewrite(computation, 2, &instruction)))
    }
}

fn build_hlo(program: &GpuProgram, devices: u32) -> raw::HloProto {
    let mut b = HloBuilder::new(&program.module_name);
    let reducer = |b: &mut HloBuilder, name: &str, ty: PrimitiveType| {
        let mut c = b.computation(name);
        let x = c.param(&format!("Arg_0.{name}"), 0, shape(ty, &[]));
        let y = c.param(&format!("Arg_1.{name}"), 1, shape(ty, &[]));
        let sum = c.op(&format!("add.{name}"), "add", shape(ty, &[]), &[x, y]);
        c.finish(sum)
    };
    let add_f32 = reducer(&mut b, "region_0.f32", PrimitiveType::F32);
    let add_bf16 = reducer(&mut b, "region_1.bf16", PrimitiveType::Bf16);
    // Fused computations first: XLA loads computations in order, callees before callers.
    let mut fused: Vec<Option<i64>> = Vec::new();
    for (i, op) in program.ops.iter().enumerate() {
        let name = format!("fused_computation.{i}");
        let param = |c: &mut xlens_hlo::testing::ComputationBuilder<'_>, n: usize, s: raw::ShapeProto| {
            c.param(&format!("param_{n}.{i}"), n as i64, s)
        };
        let id = match &op.kind {
            HloKind::TritonGemm { m, n, k } => {
                let mut c = b.computation(&format!("triton_gemm_computation.{i}"));
                let lhs = param(&mut c, 0, bf16(&[*m, *k]));
                let rhs = param(&mut c, 1, bf16(&[*k, *n]));
                let dot = c.op(&format!("dot.{i}"), "dot", bf16(&[*m, *n]), &[lhs, rhs]);
                c.edit(dot, |d| {
                    d.dot_dimension_numbers = Some(Box::new(raw::DotDimensionNumbers {
                        lhs_contracting_dimensions: vec![1],
                        rhs_contracting_dimensions: vec![0],
                        ..Default::default()
                    }));
                    d.metadata = metadata(&op.op_name, "dot_general");
                });
                Some(c.finish(dot))
            }
            HloKind::Elementwise { dims, opcode, inputs } => {
                let mut c = b.computation(&name);
                let params: Vec<i64> = (0..(*inputs).max(1) as usize).map(|n| param(&mut c, n, bf16(dims))).collect();
                let mut acc = params[0];
                if params.len() == 1 {
                    acc = c.op(&format!("{opcode}.{i}"), opcode, bf16(dims), &[acc]);
                } else {
                    for (j, &next) in params[1..].iter().enumerate() {
                        acc = c.op(&format!("{opcode}.{i}.{j}"), opcode, bf16(dims), &[acc, next]);
                    }
                }
                Some(c.finish(acc))
            }
            HloKind::Reduce { dims } => {
                let mut c = b.computation(&name);
                let x = param(&mut c, 0, bf16(dims));
                let wide = c.op(&format!("convert.{i}"), "convert", f32s(dims), &[x]);
                let zero = c.op(&format!("constant.{i}"), "constant", f32s(&[]), &[]);
                let out = &dims[..dims.len().saturating_sub(1)];
                let reduce = c.op(&format!("reduce.{i}"), "reduce", f32s(out), &[wide, zero]);
                c.edit(reduce, |r| {
                    r.dimensions = vec![dims.len() as i64 - 1];
                    r.called_computation_ids = vec![add_f32];
                    r.metadata = metadata(&op.op_name, "reduce_sum");
                });
                Some(c.finish(reduce))
            }
            HloKind::Transpose { dims, permutation, .. } => {
                let mut c = b.computation(&name);
                let x = param(&mut c, 0, bf16(dims));
                let out: Vec<i64> = permutation.iter().map(|&p| dims.get(p as usize).copied().unwrap_or(1)).collect();
                let t = c.op(&format!("transpose.{i}"), "transpose", bf16(&out), &[x]);
                c.edit(t, |t| {
                    t.dimensions = permutation.clone();
                    t.metadata = metadata(&op.op_name, "transpose");
                });
                Some(c.finish(t))
            }
            HloKind::CublasGemm { .. } | HloKind::Copy { .. } | HloKind::AllReduce { .. } => None,
        };
        fused.push(id);
    }

    let mut main = b.computation("main");
    let mut params: Vec<raw::ShapeProto> = Vec::new();
    let mut param_names: Vec<String> = Vec::new();
    let mut by_dims: HashMap<Vec<i64>, i64> = HashMap::new();
    let mut outputs: Vec<(i64, raw::ShapeProto)> = Vec::new();
    let mut param_of = |main: &mut xlens_hlo::testing::ComputationBuilder<'_>, s: raw::ShapeProto| {
        let n = params.len();
        let name = format!("Arg_{n}.{}", n + 1);
        let id = main.param(&name, n as i64, s.clone());
        params.push(s);
        param_names.push(name);
        id
    };
    // The latest bf16 value of these dimensions, or a new parameter.
    let mut operand = |main: &mut xlens_hlo::testing::ComputationBuilder<'_>,
                       by_dims: &HashMap<Vec<i64>, i64>,
                       dims: &[i64]| match by_dims.get(dims) {
        Some(&id) => id,
        None => param_of(main, bf16(dims)),
    };
    for (i, op) in program.ops.iter().enumerate() {
        let meta = metadata(&op.op_name, "");
        match &op.kind {
            HloKind::CublasGemm { m, n, k } => {
                let lhs = operand(&mut main, &by_dims, &[*m, *k]);
                let rhs = operand(&mut main, &HashMap::new(), &[*k, *n]);
                let out = tuple_shape(vec![bf16(&[*m, *n]), shape(PrimitiveType::S8, &[CUBLAS_WORKSPACE])]);
                let call = main.op(&op.name, "custom-call", out, &[lhs, rhs]);
                main.edit(call, |c| {
                    c.custom_call_target = "__cublas$gemm".to_owned();
                    c.backend_config = gemm_backend_config(*m, *n, *k).into_bytes().into();
                    c.metadata = meta.clone();
                });
                let gte = main.op(&format!("get-tuple-element.{i}"), "get-tuple-element", bf16(&[*m, *n]), &[call]);
                main.edit(gte, |g| g.tuple_index = 0);
                by_dims.insert(vec![*m, *n], gte);
                outputs.push((gte, bf16(&[*m, *n])));
            }
            HloKind::TritonGemm { m, n, k } => {
                let lhs = operand(&mut main, &by_dims, &[*m, *k]);
                let rhs = operand(&mut main, &HashMap::new(), &[*k, *n]);
                let f = main.op(&op.name, "fusion", bf16(&[*m, *n]), &[lhs, rhs]);
                main.edit(f, |f| {
                    f.fusion_kind = "kCustom".to_owned();
                    f.called_computation_ids = fused[i].into_iter().collect();
                    f.backend_config = TRITON_BACKEND_CONFIG.as_bytes().to_vec().into();
                    f.metadata = meta.clone();
                });
                by_dims.insert(vec![*m, *n], f);
                outputs.push((f, bf16(&[*m, *n])));
            }
            HloKind::Elementwise { dims, inputs, .. } => {
                let mut args = vec![operand(&mut main, &by_dims, dims)];
                for _ in 1..(*inputs).max(1) {
                    args.push(operand(&mut main, &HashMap::new(), dims));
                }
                let f = main.op(&op.name, "fusion", bf16(dims), &args);
                main.edit(f, |f| {
                    f.fusion_kind = "kLoop".to_owned();
                    f.called_computation_ids = fused[i].into_iter().collect();
                    f.metadata = meta.clone();
                });
                by_dims.insert(dims.clone(), f);
                outputs.push((f, bf16(dims)));
            }
            HloKind::Reduce { dims } => {
                let x = operand(&mut main, &by_dims, dims);
                let out = f32s(&dims[..dims.len().saturating_sub(1)]);
                let f = main.op(&op.name, "fusion", out.clone(), &[x]);
                main.edit(f, |f| {
                    f.fusion_kind = "kInput".to_owned();
                    f.called_computation_ids = fused[i].into_iter().collect();
                    f.metadata = meta.clone();
                });
                outputs.push((f, out));
            }
            HloKind::Transpose { dims, permutation, input_fusion } => {
                let x = operand(&mut main, &by_dims, dims);
                let out: Vec<i64> = permutation.iter().map(|&p| dims.get(p as usize).copied().unwrap_or(1)).collect();
                let f = main.op(&op.name, "fusion", bf16(&out), &[x]);
                main.edit(f, |f| {
                    f.fusion_kind = if *input_fusion { "kInput" } else { "kLoop" }.to_owned();
                    f.called_computation_ids = fused[i].into_iter().collect();
                    f.metadata = meta.clone();
                });
                by_dims.insert(out.clone(), f);
                outputs.push((f, bf16(&out)));
            }
            HloKind::Copy { dims } => {
                let x = operand(&mut main, &by_dims, dims);
                let copy = main.op(&op.name, "copy", bf16(dims), &[x]);
                main.edit(copy, |c| c.metadata = meta.clone());
                by_dims.insert(dims.clone(), copy);
                outputs.push((copy, bf16(dims)));
            }
            HloKind::AllReduce { elements, done } => {
                let x = operand(&mut main, &by_dims, &[*elements]);
                let start = main.op(&op.name, "all-reduce-start", bf16(&[*elements]), &[x]);
                main.edit(start, |s| {
                    s.called_computation_ids = vec![add_bf16];
                    s.replica_groups = vec![raw::ReplicaGroup { replica_ids: (0..i64::from(devices)).collect() }];
                    s.channel_id = 1;
                    s.use_global_device_ids = true;
                    s.backend_config = ALL_REDUCE_BACKEND_CONFIG.as_bytes().to_vec().into();
                    s.metadata = meta.clone();
                });
                let finish = main.op(done, "all-reduce-done", bf16(&[*elements]), &[start]);
                main.edit(finish, |d| d.metadata = meta.clone());
                by_dims.insert(vec![*elements], finish);
                outputs.push((finish, bf16(&[*elements])));
            }
        }
    }
    let result = tuple_shape(outputs.iter().map(|(_, s)| s.clone()).collect());
    let ids: Vec<i64> = outputs.iter().map(|(id, _)| *id).collect();
    let root = main.op("tuple.root", "tuple", result.clone(), &ids);
    main.finish(root);
    // The step donates its state (`donate_argnums`), as a well-written train step does.
    let aliases = crate::donated_aliases(&params, &outputs.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>());
    let module = b.module_mut();
    module.id = program.program_id as i64;
    module.input_output_alias = Some(aliases);
    module.host_program_shape =
        Some(raw::ProgramShapeProto { parameters: params, result: Some(result), parameter_names: param_names });
    b.finish("main")
}

/// Names of the committed NVIDIA-shaped reference fixtures (see [`gpu_fixture`]).
pub const GPU_FIXTURES: &[&str] = &[
    "gpu_healthy",
    "gpu_exposed_collective",
    "gpu_launch_bound",
    "gpu_memcpy_stall",
    "gpu_data_formatting",
    "gpu_stepless",
];

/// H100 SXM dense bf16 peak (NVIDIA datasheet), FLOP/s: the fixtures size gemm durations from it.
const H100_BF16_FLOPS: f64 = 989.4e12;
/// H100 SXM HBM3 bandwidth, bytes/s.
const H100_HBM_BYTES: f64 = 3.35e12;
/// Share of the HBM bandwidth transposes and layout copies reach.
const FORMATTING_EFFICIENCY: f64 = 0.54;

/// Builds a program's ops and kernels together.
struct ProgramBuilder {
    program: GpuProgram,
    training: bool,
}

/// XLA's kernel name for an instruction: LLVM-sanitized (`.` and `-` become `_`).
fn kernel_name(op: &str) -> String {
    op.replace(['.', '-'], "_")
}

const COMPUTE_STREAM: i64 = 13;
const COLLECTIVE_STREAM: i64 = 14;
const H2D_STREAM: i64 = 20;
const D2H_STREAM: i64 = 21;

/// cuBLAS sm90 kernel names by tile shape.
const CUBLAS_128: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas";
const CUBLAS_256: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas";
const NCCL_ALL_REDUCE: &str = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";

impl ProgramBuilder {
    fn new(module_name: &str, program_id: u64, training: bool) -> ProgramBuilder {
        ProgramBuilder {
            program: GpuProgram {
                module_name: module_name.to_owned(),
                program_id,
                ops: Vec::new(),
                kernels: Vec::new(),
            },
            training,
        }
    }

    /// JAX's `op_name` for a primitive, in the backward pass when `backward`.
    fn op_name(&self, primitive: &str, backward: bool) -> String {
        let f = function_name(&self.program.module_name);
        if self.training && backward {
            format!("jit({f})/jit(main)/transpose(jvp(model))/{primitive}")
        } else {
            format!("jit({f})/jit(main)/{primitive}")
        }
    }

    fn push(&mut self, op: HloOp, kernel: KernelSpec) -> &mut KernelSpec {
        self.program.ops.push(op);
        self.program.kernels.push(kernel);
        self.program.kernels.last_mut().unwrap_or_else(|| unreachable!())
    }

    /// A cuBLAS gemm at `efficiency` of the bf16 peak.
    fn cublas(&mut self, name: &str, m: i64, n: i64, k: i64, efficiency: f64, backward: bool) -> &mut KernelSpec {
        let kind = HloKind::CublasGemm { m, n, k };
        let us = kind.flops() as f64 / (H100_BF16_FLOPS * efficiency);
        let kernel_name = if m * n >= 8192 * 8192 { CUBLAS_256 } else { CUBLAS_128 };
        let op = HloOp::new(name, kind, &self.op_name("dot_general", backward));
        let kernel =
            KernelSpec::kernel(kernel_name, Some(name), COMPUTE_STREAM, (us * 1e12) as i64, LaunchDims::cublas(m, n));
        self.push(op, kernel)
    }

    /// A Triton gemm fusion at `efficiency` of the bf16 peak.
    fn triton(&mut self, name: &str, m: i64, n: i64, k: i64, efficiency: f64) -> &mut KernelSpec {
        let kind = HloKind::TritonGemm { m, n, k };
        let s = kind.flops() as f64 / (H100_BF16_FLOPS * efficiency);
        let op = HloOp::new(name, kind, &self.op_name("dot_general", false));
        let kernel = KernelSpec::kernel(
            &kernel_name(name),
            Some(name),
            COMPUTE_STREAM,
            (s * 1e12) as i64,
            LaunchDims::triton(m, n),
        );
        self.push(op, kernel)
    }

    /// A memory-bound fusion of `kind` at `efficiency` of the HBM bandwidth.
    fn fusion(
        &mut self,
        name: &str,
        kind: HloKind,
        primitive: &str,
        efficiency: f64,
        backward: bool,
    ) -> &mut KernelSpec {
        let s = kind.bytes() as f64 / (H100_HBM_BYTES * efficiency);
        let dims = match &kind {
            HloKind::Reduce { dims } => LaunchDims::row_reduction(dims[..dims.len() - 1].iter().product()),
            HloKind::Transpose { dims, .. } => LaunchDims::transpose(dims.iter().product()),
            HloKind::Elementwise { dims, .. } => LaunchDims::elementwise(dims.iter().product()),
            _ => LaunchDims::elementwise(1),
        };
        let op = HloOp::new(name, kind, &self.op_name(primitive, backward));
        let kernel = KernelSpec::kernel(&kernel_name(name), Some(name), COMPUTE_STREAM, (s * 1e12) as i64, dims);
        self.push(op, kernel)
    }

    fn elementwise(&mut self, name: &str, opcode: &str, dims: &[i64], inputs: u32, efficiency: f64) -> &mut KernelSpec {
        let kind = HloKind::Elementwise { dims: dims.to_vec(), opcode: opcode.to_owned(), inputs };
        self.fusion(name, kind, opcode, efficiency, false)
    }

    fn reduce(&mut self, name: &str, dims: &[i64], efficiency: f64) -> &mut KernelSpec {
        self.fusion(name, HloKind::Reduce { dims: dims.to_vec() }, "reduce_sum", efficiency, false)
    }

    fn transpose(&mut self, name: &str, dims: &[i64], permutation: &[i64], input_fusion: bool) -> &mut KernelSpec {
        let kind = HloKind::Transpose { dims: dims.to_vec(), permutation: permutation.to_vec(), input_fusion };
        self.fusion(name, kind, "transpose", FORMATTING_EFFICIENCY, false)
    }

    /// A `copy` run as a device-to-device memcpy on the compute stream.
    fn copy(&mut self, name: &str, dims: &[i64]) -> &mut KernelSpec {
        let kind = HloKind::Copy { dims: dims.to_vec() };
        let bytes = kind.bytes() / 2;
        let s = kind.bytes() as f64 / (H100_HBM_BYTES * FORMATTING_EFFICIENCY);
        let op = HloOp::new(name, kind, &self.op_name("copy", false));
        let mut kernel = KernelSpec::memcpy(ActivityKind::MemcpyD2D, COMPUTE_STREAM, bytes, (s * 1e12) as i64, false);
        kernel.hlo_op = Some(name.to_owned());
        self.push(op, kernel)
    }

    /// An NCCL all-reduce of `elements` bf16 on the collective stream, lasting `duration_ps`.
    fn all_reduce(&mut self, start: &str, done: &str, elements: i64, duration_ps: i64) -> &mut KernelSpec {
        let kind = HloKind::AllReduce { elements, done: done.to_owned() };
        let op = HloOp::new(start, kind, &self.op_name("psum", true));
        let mut kernel =
            KernelSpec::kernel(NCCL_ALL_REDUCE, Some(start), COLLECTIVE_STREAM, duration_ps, LaunchDims::nccl(2));
        kernel.collective = true;
        kernel.launch_api = Some("cuLaunchKernelEx".to_owned());
        self.push(op, kernel)
    }

    /// A copy with no HLO op (program inputs and outputs).
    fn memcpy(&mut self, kind: ActivityKind, bytes: u64, bytes_per_s: f64, synchronous: bool) -> &mut KernelSpec {
        let stream = if kind == ActivityKind::MemcpyD2H { D2H_STREAM } else { H2D_STREAM };
        let ps = (bytes as f64 / bytes_per_s * 1e12) as i64;
        self.program.kernels.push(KernelSpec::memcpy(kind, stream, bytes, ps, synchronous));
        self.program.kernels.last_mut().unwrap_or_else(|| unreachable!())
    }

    fn finish(self) -> GpuProgram {
        self.program
    }
}

/// Tokens per step and hidden size of the transformer-like layer the fixtures run.
const TOKENS: i64 = 8192;
const HIDDEN: i64 = 4096;
const FFN: i64 = 16_384;

/// The layer of `gpu_healthy`: four gemms (three cuBLAS, one Triton) about 80 % of the step,
/// elementwise and reduction fusions around them, a tiny input copy first.
fn healthy_program() -> GpuProgram {
    let mut p = ProgramBuilder::new("jit_train_step", 1, true);
    layer(&mut p, 256 * 1024);
    p.finish()
}

/// The same layer compiled for inference (`jit_forward`: no backward-pass scopes in `op_name`).
fn forward_program() -> GpuProgram {
    let mut p = ProgramBuilder::new("jit_forward", 1, false);
    layer(&mut p, 256 * 1024);
    p.finish()
}

fn layer(p: &mut ProgramBuilder, input_bytes: u64) {
    let (t, h, f) = (TOKENS, HIDDEN, FFN);
    if input_bytes > 0 {
        p.memcpy(ActivityKind::MemcpyH2D, input_bytes, 20e9, false);
    }
    p.reduce("input_reduce_fusion", &[t, h], 0.7);
    p.elementwise("loop_multiply_fusion", "multiply", &[t, h], 2, 0.7);
    p.cublas("custom-call.1", t, 3 * h, h, 0.72, false);
    p.triton("triton_gemm_dot.2", t, h, h, 0.69);
    p.elementwise("loop_add_fusion", "add", &[t, h], 2, 0.7);
    p.reduce("input_reduce_fusion.1", &[t, h], 0.7);
    p.cublas("custom-call.3", t, f, h, 0.72, true);
    p.elementwise("loop_tanh_fusion", "tanh", &[t, f], 1, 0.7);
    p.elementwise("loop_multiply_fusion.1", "multiply", &[t, f], 2, 0.7);
    p.cublas("custom-call.4", t, h, f, 0.72, true);
    p.elementwise("loop_add_fusion.1", "add", &[t, h], 2, 0.7);
}

fn exposed_collective_program() -> GpuProgram {
    let mut p = ProgramBuilder::new("jit_train_step", 1, true);
    layer(&mut p, 256 * 1024);
    // Computed from the compute part: 30 % of the step.
    let compute: i64 = p.program.kernels.iter().map(|k| k.duration_ps).sum();
    p.all_reduce("all-reduce-start", "all-reduce-done", 32 << 20, compute * 3 / 7);
    p.finish()
}

/// 200 tiny elementwise fusions (an unfused optimizer update over many small parameters), 3 µs
/// each, each launched by a 10 µs call: the GPU waits for the host most of the time.
fn launch_bound_program() -> GpuProgram {
    const OPS: &[(&str, &str, u32)] = &[
        ("add", "add", 2),
        ("multiply", "multiply", 2),
        ("subtract", "subtract", 2),
        ("divide", "divide", 2),
        ("sqrt", "sqrt", 1),
        ("maximum", "maximum", 2),
        ("negate", "negate", 1),
        ("exponential", "exponential", 1),
    ];
    let mut p = ProgramBuilder::new("jit_train_step", 1, true);
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for i in 0..200usize {
        let (word, opcode, inputs) = OPS[i % OPS.len()];
        let n = seen.entry(word).or_insert(0);
        let name = if *n == 0 { format!("loop_{word}_fusion") } else { format!("loop_{word}_fusion.{n}") };
        *n += 1;
        let dims = [64 + 64 * (i as i64 % 16), 256];
        let k = p.elementwise(&name, opcode, &dims, inputs, 0.05);
        k.duration_ps = 3 * US;
        k.launch_ps = Some(10 * US);
    }
    p.finish()
}

/// Each step waits 2 ms for a synchronous host-to-device copy of its input batch (pageable
/// memory), runs the layer, and copies its loss back synchronously at the end.
fn memcpy_stall_program() -> GpuProgram {
    let mut p = ProgramBuilder::new("jit_train_step", 1, true);
    let copy = p.memcpy(ActivityKind::MemcpyH2D, 24 << 20, 12.58e9, true);
    copy.duration_ps = 2_000 * US;
    layer(&mut p, 0);
    p.memcpy(ActivityKind::MemcpyD2H, 64 << 10, 10e9, true);
    p.finish()
}

/// A layer whose activations are re-laid out between gemms (head transposes, layout copies):
/// transpose fusions and device-to-device copies take about 35 % of the step.
fn data_formatting_program() -> GpuProgram {
    let (t, h, f) = (TOKENS, HIDDEN, FFN);
    let mut p = ProgramBuilder::new("jit_train_step", 1, true);
    p.memcpy(ActivityKind::MemcpyH2D, 256 * 1024, 20e9, false);
    p.cublas("custom-call.1", t, 3 * h, h, 0.72, false);
    p.transpose("loop_transpose_fusion", &[t, 3, 32, 128], &[1, 2, 0, 3], false);
    p.triton("triton_gemm_dot.2", t, h, h, 0.69);
    p.transpose("input_transpose_fusion", &[t, f], &[1, 0], true);
    p.copy("copy.3", &[f, t]);
    p.transpose("loop_transpose_fusion.1", &[f, t], &[1, 0], false);
    p.cublas("custom-call.4", t, f, h, 0.72, true);
    p.transpose("input_transpose_fusion.1", &[3, 32, t, 128], &[2, 0, 1, 3], true);
    p.elementwise("loop_add_fusion", "add", &[t, h], 2, 0.7);
    p.transpose("loop_transpose_fusion.2", &[t, f], &[1, 0], false);
    p.copy("copy.5", &[t, h]);
    p.finish()
}

/// The spec of a named reference fixture: NVIDIA-shaped XLA:GPU profiles on H100 SXM GPUs
/// (compute capability 9.0, 132 SMs, 1.98 GHz, 3.35 TB/s, 80 GiB), committed under
/// `testdata/gpu/<name>/` with XProf's own analysis of them.
///
/// - `gpu_healthy`: 1 GPU, 10 steps of a transformer-like layer: gemms (cuBLAS and Triton) about
///   80 % of each step, elementwise and reduction fusions, kernels back to back, a tiny
///   host-to-device copy at each step's start.
/// - `gpu_exposed_collective`: 2 GPUs running the layer, then an NCCL all-reduce on a second
///   stream for about 30 % of each step while no compute kernel runs.
/// - `gpu_launch_bound`: 1 GPU, 200 elementwise kernels of 3 µs per step, each launched by a
///   10 µs call: the GPU idles about 70 % of the step between kernels.
/// - `gpu_memcpy_stall`: 1 GPU, each step starts with a 2 ms synchronous host-to-device copy while
///   no kernel runs (about 25 % of the step) and ends with a synchronous device-to-host copy.
/// - `gpu_data_formatting`: 1 GPU, transpose fusions and layout copies about 35 % of each step.
/// - `gpu_stepless`: the healthy program compiled for inference (`jit_forward`), executed 20 times
///   with no step markers.
pub fn gpu_fixture(name: &str) -> Option<GpuSpec> {
    let base = GpuSpec::default();
    Some(match name {
        "gpu_healthy" => GpuSpec { seed: 101, ..base },
        "gpu_exposed_collective" => GpuSpec { devices: 2, seed: 102, program: exposed_collective_program(), ..base },
        "gpu_launch_bound" => GpuSpec {
            steps: 8,
            seed: 103,
            program: launch_bound_program(),
            launch: LaunchModel { gap_ps: 500_000, ..LaunchModel::default() },
            host_lead_ps: 30 * US,
            step_gap_ps: 50 * US,
            ..base
        },
        "gpu_memcpy_stall" => GpuSpec { seed: 104, program: memcpy_stall_program(), ..base },
        "gpu_data_formatting" => GpuSpec { seed: 105, program: data_formatting_program(), ..base },
        "gpu_stepless" => GpuSpec {
            steps: 0,
            stepless_executions: 20,
            seed: 106,
            program: forward_program(),
            step_gap_ps: 500 * US,
            ..base
        },
        _ => return None,
    })
}

/// A large NVIDIA-shaped host for benchmarks: the healthy program on `devices` GPUs, with as
/// many steps as make the file about `target_bytes` long (measured on a short run and scaled).
pub fn gpu_profile_of_size(target_bytes: u64, devices: u32, seed: u64) -> Vec<u8> {
    const PROBE_STEPS: u32 = 20;
    let spec = |steps: u32| GpuSpec { devices: devices.max(1), steps, seed, ..GpuSpec::default() };
    let probe = gpu_profile(&spec(PROBE_STEPS)).len().max(1) as u64;
    let steps = (target_bytes.saturating_mul(u64::from(PROBE_STEPS)) / probe).clamp(1, u64::from(u32::MAX)) as u32;
    gpu_profile(&spec(steps))
}

/// Writes fixture `name` to `<dir>/host0.xplane.pb` (creating `dir`); returns the file's path.
/// An unknown name is an `InvalidInput` error.
pub fn write_gpu_fixture(name: &str, dir: &Path) -> io::Result<PathBuf> {
    let spec = gpu_fixture(name).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("unknown GPU fixture {name:?}; known: {GPU_FIXTURES:?}"))
    })?;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("host0.xplane.pb");
    std::fs::write(&path, gpu_profile(&spec))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::Space;

    fn parse(spec: &GpuSpec) -> Space {
        Space::parse(gpu_profile(spec).into()).expect("parses")
    }

    #[test]
    fn every_fixture_parses_with_the_expected_planes_and_lines() {
        for &name in GPU_FIXTURES {
            let spec = gpu_fixture(name).expect("known fixture");
            let bytes = gpu_profile(&spec);
            assert!(bytes.len() < 500_000, "{name}: {} bytes", bytes.len());
            let space = Space::parse(bytes.into()).expect("parses");
            let gpus = space.gpus();
            assert_eq!(gpus.len(), spec.devices as usize, "{name}");
            for (d, gpu) in gpus.iter().enumerate() {
                assert_eq!(gpu.name(), format!("/device:GPU:{d}"));
                let vendor = gpu.stat_id("device_vendor").expect("vendor stat");
                assert!(gpu.stat_metadata_by_id(vendor).is_some());
                let names: Vec<&str> = gpu.lines().iter().map(|l| l.name()).collect();
                assert!(names.iter().all(|n| n.starts_with("Stream #")), "{name}: {names:?}");
                assert!(names.iter().any(|n| n.contains("(Kernel")), "{name}: {names:?}");
                let kernels: usize = gpu.lines().iter().map(|l| l.event_count()).sum();
                assert_eq!(kernels, spec.program.kernels.len() * spec.executions() as usize, "{name}");
            }
            let host = space.host_threads().expect("/host:CPU");
            let python = host.line_by_name("python").expect("python thread");
            let per_run = if spec.steps > 0 { 2 } else { 1 };
            assert_eq!(python.event_count(), per_run * spec.executions() as usize, "{name}");
            let launch_lines = host.lines().iter().filter(|l| l.name().starts_with("Host Threads/")).count();
            assert_eq!(launch_lines, spec.devices as usize, "{name}");
            assert!(space.metadata_plane().is_some() && space.task_environment().is_some(), "{name}");
            let (modules, _) = xlens_hlo::modules_from_space(&space);
            assert_eq!(modules.len(), 1, "{name}");
            for k in &spec.program.kernels {
                if let Some(op) = &k.hlo_op {
                    assert!(modules[0].instruction_by_name(op).is_some(), "{name}: {op} not in the HLO");
                }
            }
        }
    }

    #[test]
    fn kernels_link_to_their_launches_by_correlation_id() {
        let spec = gpu_fixture("gpu_exposed_collective").expect("known fixture");
        let space = parse(&spec);
        let mut device_ids = BTreeSet::new();
        for gpu in space.gpus() {
            let corr = gpu.stat_id(stat::CORRELATION_ID).expect("correlation_id");
            for line in gpu.lines() {
                for ev in line.events(gpu) {
                    let ev = ev.expect("event");
                    assert!(device_ids.insert(ev.stat(corr).and_then(|s| s.as_u64()).expect("id")), "unique ids");
                }
            }
        }
        let host = space.host_threads().expect("/host:CPU");
        let corr = host.stat_id(stat::CORRELATION_ID).expect("correlation_id");
        let mut host_ids = BTreeSet::new();
        for line in host.lines() {
            for ev in line.events(host) {
                if let Some(id) = ev.expect("event").stat(corr).and_then(|s| s.as_u64()) {
                    host_ids.insert(id);
                }
            }
        }
        assert_eq!(device_ids, host_ids);
    }

    #[test]
    fn custom_calls_carry_the_original_api_version() {
        let spec = gpu_fixture("gpu_healthy").expect("known fixture");
        let proto = gpu_hlo_proto(&spec);
        let marks = proto.windows(3).filter(|w| *w == [0xe8, 0x04, 0x01]).count();
        let gemms = spec.program.ops.iter().filter(|o| matches!(o.kind, HloKind::CublasGemm { .. })).count();
        assert_eq!((marks, gemms), (3, 3));
        let module = xlens_hlo::Module::decode(proto.into()).expect("decodes");
        let call = module.instruction_by_name("custom-call.1").expect("gemm");
        assert_eq!(call.custom_call_target(), Some("__cublas$gemm"));
    }

    #[test]
    fn stream_lines_are_named_after_their_kinds() {
        let spec = gpu_fixture("gpu_data_formatting").expect("known fixture");
        let names: Vec<String> = spec.stream_names().into_values().collect();
        assert_eq!(names, ["Stream #13(Kernel,MemcpyD2D)", "Stream #20(MemcpyH2D)"]);
        let spec = gpu_fixture("gpu_memcpy_stall").expect("known fixture");
        let names: Vec<String> = spec.stream_names().into_values().collect();
        assert_eq!(names, ["Stream #13(Kernel)", "Stream #20(MemcpyH2D)", "Stream #21(MemcpyD2H)"]);
    }

    #[test]
    fn generation_is_deterministic_and_seeded() {
        for &name in GPU_FIXTURES {
            let spec = gpu_fixture(name).expect("known fixture");
            assert_eq!(gpu_profile(&spec), gpu_profile(&spec), "{name}");
        }
        let spec = GpuSpec::default();
        assert_ne!(gpu_profile(&spec), gpu_profile(&GpuSpec { seed: 2, ..spec.clone() }));
        assert!(gpu_fixture("nope").is_none());
    }

    /// Share of GPU 0's busy time spent in kernels matching `pred`, and GPU 0's idle share of the
    /// steps, over the whole schedule.
    fn shares(spec: &GpuSpec, pred: impl Fn(&KernelSpec) -> bool) -> (f64, f64) {
        let runs = schedule(spec);
        let (mut matched, mut busy, mut span) = (0i64, 0i64, 0i64);
        for run in &runs {
            span += run.end - run.start;
            for p in run.placed.iter().filter(|p| p.device == 0) {
                busy += p.end - p.start;
                if pred(&spec.program.kernels[p.kernel]) {
                    matched += p.end - p.start;
                }
            }
        }
        (matched as f64 / span as f64, 1.0 - busy as f64 / span as f64)
    }

    #[test]
    fn fixtures_show_what_they_are_named_after() {
        let gemm = |k: &KernelSpec| k.name.contains("gemm");
        let (share, idle) = shares(&gpu_fixture("gpu_healthy").expect("fixture"), gemm);
        assert!((0.75..0.88).contains(&share) && idle < 0.05, "healthy: gemm {share}, idle {idle}");
        let (share, _) = shares(&gpu_fixture("gpu_exposed_collective").expect("fixture"), |k| k.collective);
        assert!((0.25..0.35).contains(&share), "collective {share}");
        let (_, idle) = shares(&gpu_fixture("gpu_launch_bound").expect("fixture"), |_| true);
        assert!((0.6..0.8).contains(&idle), "launch-bound idle {idle}");
        let spec = gpu_fixture("gpu_memcpy_stall").expect("fixture");
        let (share, _) = shares(&spec, |k| k.kind == ActivityKind::MemcpyH2D);
        assert!((0.2..0.3).contains(&share), "memcpy {share}");
        let formatting = |k: &KernelSpec| k.name.contains("transpose") || k.kind == ActivityKind::MemcpyD2D;
        let (share, _) = shares(&gpu_fixture("gpu_data_formatting").expect("fixture"), formatting);
        assert!((0.3..0.4).contains(&share), "formatting {share}");
    }

    #[test]
    fn launch_bound_kernels_wait_for_their_launches() {
        let spec = gpu_fixture("gpu_launch_bound").expect("fixture");
        for run in schedule(&spec) {
            for p in &run.placed {
                assert!(p.start >= p.launch_end, "a kernel starts after its launch returns");
            }
        }
    }

    #[test]
    fn collectives_start_together_on_every_gpu() {
        let spec = gpu_fixture("gpu_exposed_collective").expect("fixture");
        for run in schedule(&spec) {
            let starts: BTreeSet<i64> =
                run.placed.iter().filter(|p| spec.program.kernels[p.kernel].collective).map(|p| p.start).collect();
            assert_eq!(starts.len(), 1);
        }
    }
}
