//! Well-known plane, line, stat and event names, in one place.
//!
//! These are the exact strings that profilers write and XProf matches on (see the facts in
//! `xprof_facts.md` §2). Matching is by name: ids differ between producers.

/// Plane names and prefixes.
pub mod plane {
    /// Prefix of TPU device planes (TensorCores and SparseCores).
    pub const TPU_PREFIX: &str = "/device:TPU:";
    /// Prefix of GPU device planes.
    pub const GPU_PREFIX: &str = "/device:GPU:";
    /// Prefix of custom device planes.
    pub const CUSTOM_PREFIX: &str = "/device:CUSTOM:";
    /// Legacy prefix of custom planes.
    pub const LEGACY_CUSTOM_PREFIX: &str = "/custom:";
    /// Prefix of virtual device planes.
    pub const VIRTUAL_DEVICE_PREFIX: &str = "/virtualdevice:";
    /// Prefix of TPU chip-level planes (HBM, ICI, ...).
    pub const CHIP_PREFIX: &str = "#Chip";
    /// Generic device prefix.
    pub const DEVICE_PREFIX: &str = "/device";
    /// Host threads (TraceMe events, one line per thread).
    pub const HOST_CPU: &str = "/host:CPU";
    /// HLO protos of every compiled program.
    pub const HOST_METADATA: &str = "/host:metadata";
    /// Capture-wide facts: profile start and stop times.
    pub const TASK_ENVIRONMENT: &str = "Task Environment";
    /// Host CPU counters.
    pub const HOST_CPUS: &str = "Host CPUs";
    /// Syscall traces.
    pub const SYSCALLS: &str = "Syscalls";
    /// TensorFlow streamz metrics.
    pub const TFSTREAMZ: &str = "/host:tfstreamz";
    /// Python tracer.
    pub const PYTHON_TRACER: &str = "/host:python-tracer";
    /// CUPTI host-side trace.
    pub const CUPTI: &str = "/host:CUPTI";
    /// Scope range call stacks.
    pub const SCOPE_RANGE_CALL_STACK: &str = "/host:__ScopeRangeCallStack__";
    /// Prefixes that make a plane a host plane (XProf's `IsHostPlane`).
    pub const HOST_PREFIXES: &[&str] =
        &[HOST_CPU, HOST_CPUS, TFSTREAMZ, HOST_METADATA, SYSCALLS, PYTHON_TRACER, CUPTI, SCOPE_RANGE_CALL_STACK];
}

/// Line names.
pub mod line {
    /// Device step markers.
    pub const STEPS: &str = "Steps";
    /// One event per program execution, named `module(program_id)`.
    pub const XLA_MODULES: &str = "XLA Modules";
    /// One event per executed HLO op.
    pub const XLA_OPS: &str = "XLA Ops";
    /// Async op windows (start to done).
    pub const ASYNC_XLA_OPS: &str = "Async XLA Ops";
    /// Framework ops.
    pub const FRAMEWORK_OPS: &str = "Framework Ops";
    /// Framework name scopes.
    pub const FRAMEWORK_NAME_SCOPE: &str = "Framework Name Scope";
    /// Older name of framework ops.
    pub const TENSORFLOW_OPS: &str = "TensorFlow Ops";
    /// Older name of framework name scopes.
    pub const TENSORFLOW_NAME_SCOPE: &str = "TensorFlow Name Scope";
    /// Source code line.
    pub const SOURCE_CODE: &str = "Source code";
    /// Kernel launch statistics.
    pub const LAUNCH_STATS: &str = "Launch Stats";
    /// Host offload ops.
    pub const HOST_OFFLOAD_OPS: &str = "Host Offload Ops";
    /// Counter events.
    pub const COUNTERS: &str = "_counters_";
    /// SparseCore step markers.
    pub const SPARSE_CORE_STEPS: &str = "Sparse Core Steps";
    /// SparseCore modules.
    pub const SPARSE_CORE_MODULES: &str = "Sparse Core Modules";
    /// SparseCore ops.
    pub const SPARSE_CORE_OPS: &str = "Sparse Core Ops";
    /// TensorCore sync flags.
    pub const TENSOR_CORE_SYNC_FLAG: &str = "Tensor Core Sync Flag";
    /// SparseCore syncs.
    pub const SPARSE_CORE_SYNCS: &str = "Sparse Core Syncs";
    /// XLA TraceMe line on TPU.
    pub const XLA_TRACEME: &str = "XLA TraceMe";
    /// Lines whose events are ops (XProf's `IsOpLineName`).
    pub const OP_LINES: &[&str] = &[XLA_OPS, FRAMEWORK_OPS, SPARSE_CORE_OPS];

    /// The first id of the lines XProf derives from GPU and host-driven traces
    /// (`kThreadIdDerivedMin` = 0xdeadbeef: steps, kernel launches, name scopes, framework ops,
    /// modules, ops, overhead, source); the range runs a few hundred ids up.
    pub const DERIVED_ID_MIN: i64 = 0xdead_beef;
    /// How many ids the derived range spans (XProf's `IsDerivedThreadId` covers `+289`).
    pub const DERIVED_ID_SPAN: i64 = 300;
    /// Names of the lines a converter derives on a GPU plane beside the stream lines.
    pub const DERIVED_NAMES: &[&str] = &[
        STEPS,
        XLA_MODULES,
        XLA_OPS,
        FRAMEWORK_OPS,
        FRAMEWORK_NAME_SCOPE,
        TENSORFLOW_OPS,
        TENSORFLOW_NAME_SCOPE,
        SOURCE_CODE,
        LAUNCH_STATS,
    ];

    /// True for a line XProf derives (by id: the 0xdeadbeef range, also as the negative value a
    /// 32-bit store leaves; or by name), not one the profiler recorded. On a GPU plane every
    /// other line is a stream of kernels and memory copies.
    ///
    /// ```
    /// use xlens_xplane::names::line::is_derived;
    /// assert!(is_derived(-559_038_737, "Steps"));
    /// assert!(is_derived(0xdead_beef + 5, "anything"));
    /// assert!(is_derived(7, "TensorFlow Ops"));
    /// assert!(!is_derived(134, "Stream #134(Compute)"));
    /// ```
    pub fn is_derived(id: i64, name: &str) -> bool {
        let as_i32 = i64::from(DERIVED_ID_MIN as u32 as i32);
        let in_range = |min: i64| (min..min + DERIVED_ID_SPAN).contains(&id);
        in_range(DERIVED_ID_MIN) || in_range(as_i32) || DERIVED_NAMES.contains(&name)
    }
}

/// Stat names (the `name` of XStatMetadata entries).
pub mod stat {
    /// Step id (also a `tf.data` iterator's own id).
    pub const STEP_ID: &str = "id";
    /// The id of a `tf.data` iterator's parent iterator.
    pub const PARENT_ID: &str = "parent_id";
    /// The id of the element a `tf.data` producer makes and its consumer takes.
    pub const ELEMENT_ID: &str = "element_id";
    /// Device ordinal.
    pub const DEVICE_ORDINAL: &str = "device_ordinal";
    /// Graph type of a step root.
    pub const GRAPH_TYPE: &str = "graph_type";
    /// Step number of a step root.
    pub const STEP_NUM: &str = "step_num";
    /// Iteration number.
    pub const ITER_NUM: &str = "iter_num";
    /// Root level of a grouping root.
    pub const IS_ROOT: &str = "_r";
    /// Async flag: ignored for nesting.
    pub const IS_ASYNC: &str = "_a";
    /// Producer type.
    pub const PRODUCER_TYPE: &str = "_pt";
    /// Consumer type.
    pub const CONSUMER_TYPE: &str = "_ct";
    /// Producer id.
    pub const PRODUCER_ID: &str = "_p";
    /// Consumer id.
    pub const CONSUMER_ID: &str = "_c";
    /// Group (step) id assigned by grouping.
    pub const GROUP_ID: &str = "group_id";
    /// Step name.
    pub const STEP_NAME: &str = "step_name";
    /// Framework op.
    pub const TF_OP: &str = "tf_op";
    /// HLO op name.
    pub const HLO_OP: &str = "hlo_op";
    /// HLO category (TPU metadata stat).
    pub const HLO_CATEGORY: &str = "hlo_category";
    /// HLO module name.
    pub const HLO_MODULE: &str = "hlo_module";
    /// The CUDA graph a GPU kernel ran in (XLA command buffers): the kernel's `hlo_op` then names
    /// the command buffer, not the instruction.
    pub const CUDA_GRAPH_ID: &str = "cuda_graph_id";
    /// Program id.
    pub const PROGRAM_ID: &str = "program_id";
    /// Symbol id of an op within its program.
    pub const SYMBOL_ID: &str = "symbol_id";
    /// Run id of a program execution.
    pub const RUN_ID: &str = "run_id";
    /// Deduplicated op name.
    pub const DEDUPLICATED_NAME: &str = "deduplicated_name";
    /// FLOPs of one occurrence.
    pub const FLOPS: &str = "flops";
    /// Model FLOPs of one occurrence.
    pub const MODEL_FLOPS: &str = "model_flops";
    /// Bytes accessed by one occurrence.
    pub const BYTES_ACCESSED: &str = "bytes_accessed";
    /// Raw bytes accessed.
    pub const RAW_BYTES_ACCESSED: &str = "raw_bytes_accessed";
    /// Serialized memory access breakdown.
    pub const MEMORY_ACCESS_BREAKDOWN: &str = "memory_access_breakdown";
    /// Shape with layout.
    pub const SHAPE_WITH_LAYOUT: &str = "shape_with_layout";
    /// Source "file:line".
    pub const SOURCE: &str = "source";
    /// Source stack.
    pub const SOURCE_STACK: &str = "source_stack";
    /// Device-side start override (absolute ps).
    pub const DEVICE_OFFSET_PS: &str = "device_offset_ps";
    /// Device-side duration override.
    pub const DEVICE_DURATION_PS: &str = "device_duration_ps";
    /// DVFS time scale factor.
    pub const TIME_SCALE_MULTIPLIER: &str = "Time Scale Multiplier";
    /// DMA stall time.
    pub const DMA_STALL_DURATION_PS: &str = "dma_stall_duration_ps";
    /// Unique id of an all-reduce instance.
    pub const ALL_REDUCE_UNIQUE_ID: &str = "all_reduce_unique_id";
    /// All-reduce id.
    pub const ALL_REDUCE_ID: &str = "all_reduce_id";
    /// Correlation id (GPU).
    pub const CORRELATION_ID: &str = "correlation_id";
    /// Kernel details (GPU).
    pub const KERNEL_DETAILS: &str = "kernel_details";
    /// Memcpy details (GPU).
    pub const MEMCPY_DETAILS: &str = "memcpy_details";
    /// Serialized HloProto on `/host:metadata`.
    pub const HLO_PROTO: &str = "Hlo Proto";
    /// Legacy spelling of [`HLO_PROTO`] (libtpu 0.0.37).
    pub const HLO_PROTO_LEGACY: &str = "HLO Proto";
    /// Device type of a device plane (e.g. "TPU v5 Lite").
    pub const DEVICE_TYPE_STRING: &str = "device_type_string";
    /// Core details (serialized).
    pub const CORE_DETAILS: &str = "core_details";
    /// Step idle time.
    pub const STEP_IDLE_TIME_PS: &str = "step_idle_time_ps";
    /// Self duration of an aggregated event.
    pub const SELF_DURATION_PS: &str = "self_duration_ps";
    /// Minimum duration of an aggregated event.
    pub const MIN_DURATION_PS: &str = "min_duration_ps";
    /// Profile start, ns since epoch (Task Environment).
    pub const PROFILE_START_TIME: &str = "profile_start_time";
    /// Profile stop, ns since epoch (Task Environment).
    pub const PROFILE_STOP_TIME: &str = "profile_stop_time";
    /// Profile options (Task Environment).
    pub const PROFILE_OPTIONS: &str = "profile_options";
    /// Events the profiler dropped.
    pub const DROPPED_TRACES: &str = "dropped_traces";
    /// Memory allocator name.
    pub const ALLOCATOR_NAME: &str = "allocator_name";
    /// Bytes reserved (stack).
    pub const BYTES_RESERVED: &str = "bytes_reserved";
    /// Bytes allocated (heap).
    pub const BYTES_ALLOCATED: &str = "bytes_allocated";
    /// Bytes available.
    pub const BYTES_AVAILABLE: &str = "bytes_available";
    /// Peak bytes in use over the allocator's lifetime.
    pub const PEAK_BYTES_IN_USE: &str = "peak_bytes_in_use";
    /// The allocator's fragmentation at the event (a fraction: 1 - largest free block / free
    /// memory, as the allocator computes it).
    pub const FRAGMENTATION: &str = "fragmentation";
    /// Requested bytes.
    pub const REQUESTED_BYTES: &str = "requested_bytes";
    /// Allocation bytes.
    pub const ALLOCATION_BYTES: &str = "allocation_bytes";
    /// Index on host.
    pub const INDEX_ON_HOST: &str = "index_on_host";
    /// SparseCore offload core id.
    pub const OFFLOAD_CORE_ID: &str = "offload_core_id";
    /// TensorCore offload start id.
    pub const TC_OFFLOAD_START_ID: &str = "tc_offload_start_id";

    /// Device capability stats on device planes.
    pub mod capability {
        /// Clock rate in kHz.
        pub const CLOCK_RATE: &str = "clock_rate";
        /// Cores (GPU: SM count).
        pub const CORE_COUNT: &str = "core_count";
        /// Memory bandwidth in bytes/s.
        pub const MEMORY_BANDWIDTH: &str = "memory_bandwidth";
        /// Memory size in bytes.
        pub const MEMORY_SIZE: &str = "memory_size";
        /// CUDA compute capability, major.
        pub const COMPUTE_CAP_MAJOR: &str = "compute_cap_major";
        /// CUDA compute capability, minor.
        pub const COMPUTE_CAP_MINOR: &str = "compute_cap_minor";
        /// Peak TFLOP/s per core.
        pub const PEAK_TERAFLOPS_PER_SECOND: &str = "peak_teraflops_per_second";
        /// Peak HBM GB/s per core.
        pub const PEAK_HBM_BW_GIGABYTES_PER_SECOND: &str = "peak_hbm_bw_gigabytes_per_second";
        /// Peak CMEM read GB/s.
        pub const PEAK_CMEM_RD_BW_GIGABYTES_PER_SECOND: &str = "peak_cmem_rd_bw_gigabytes_per_second";
        /// Peak CMEM write GB/s.
        pub const PEAK_CMEM_WR_BW_GIGABYTES_PER_SECOND: &str = "peak_cmem_wr_bw_gigabytes_per_second";
        /// Peak VMEM read GB/s.
        pub const PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND: &str = "peak_vmem_rd_bw_gigabytes_per_second";
        /// Peak VMEM write GB/s.
        pub const PEAK_VMEM_WR_BW_GIGABYTES_PER_SECOND: &str = "peak_vmem_wr_bw_gigabytes_per_second";
        /// Peak SRAM read GB/s.
        pub const PEAK_SRAM_RD_BW_GIGABYTES_PER_SECOND: &str = "peak_sram_rd_bw_gigabytes_per_second";
        /// Peak SRAM write GB/s.
        pub const PEAK_SRAM_WR_BW_GIGABYTES_PER_SECOND: &str = "peak_sram_wr_bw_gigabytes_per_second";
        /// Device vendor ("Nvidia", "AMD").
        pub const DEVICE_VENDOR: &str = "device_vendor";
        /// GPU architecture name (AMD writes `gfx942` here).
        pub const GPU_DEVICE_NAME: &str = "gpu_device_name";
        /// Megacore flag.
        pub const HAS_MEGACORE: &str = "has_megacore";
        /// Merged VMEM flag.
        pub const HAS_MERGED_VMEM: &str = "has_merged_vmem";
    }
}

/// Event (metadata) names with a meaning.
pub mod event {
    /// Host step root in TF-era traces.
    pub const TRACE_CONTEXT: &str = "TraceContext";
    /// Memory allocation TraceMe.
    pub const MEMORY_ALLOCATION: &str = "MemoryAllocation";
    /// Memory deallocation TraceMe.
    pub const MEMORY_DEALLOCATION: &str = "MemoryDeallocation";
    /// TPU host callback request.
    pub const HOST_CALLBACK_REQUEST: &str = "HostCallbackRequest";
    /// Callback completion.
    pub const COMPLETE_CALLBACKS: &str = "CompleteCallbacks";
    /// Host-to-device transfer request.
    pub const TRANSFER_H2D_REQUEST: &str = "TransferH2DRequest";
    /// Device-to-host transfer request.
    pub const TRANSFER_D2H_REQUEST: &str = "TransferD2HRequest";
    /// tf.data iterator wait.
    pub const ITERATOR_GET_NEXT: &str = "IteratorGetNext";
}
