//! Scan configuration: which detectors run, and every threshold, with documented defaults.
//!
//! Each detector reads its own section of [`Thresholds`]; the defaults are the values the
//! detector docs state. Percentages are of the mean step time unless said otherwise.

use crate::finding::Severity;

/// How a scan runs.
#[derive(Clone, Debug, Default)]
pub struct ScanConfig {
    /// Only these detector ids run (all when `None`).
    pub only: Option<Vec<String>>,
    /// These detector ids do not run.
    pub disabled: Vec<String>,
    /// Thresholds of every detector, and of the overall status.
    pub thresholds: Thresholds,
    /// Only these steps of every host are analysed (all when `None`); see [`StepRange`].
    pub steps: Option<StepRange>,
    /// Where `only` was set (`--only`, `xlens.toml`, ...), named in the report's
    /// [`disabled_by`](crate::Report::disabled_by); `None` reads as "the scan config".
    pub only_from: Option<String>,
    /// Where `disabled` was set (`--disable`, `xlens.toml`, ...), as `only_from`.
    pub disabled_from: Option<String>,
    /// The report will not be drawn as an HTML page: what only the page shows (each GPU host's
    /// kernel statistics, a second walk of every stream event) is not read, and the report's
    /// [`Charts::kernels`](crate::Charts::kernels) stay empty. `false` (the page's data is
    /// read) by default.
    pub no_page: bool,
}

/// Steps to analyse, by step number (XProf's step number: a marker's `step_num`, or the
/// position among device steps), both ends included: each host is cut to the time from the
/// start of its first step in the range to the end of its last (warm-up and compilation steps
/// left out, for instance).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepRange {
    /// The first step number analysed.
    pub first: i64,
    /// The last step number analysed.
    pub last: i64,
}

impl StepRange {
    /// Parses `A..B` (A to B, both included), `A..` (from A on), `..B` (up to B) or `N` (one step).
    ///
    /// ```
    /// use xlens_faults::StepRange;
    /// assert_eq!(StepRange::parse("10..20"), Ok(StepRange { first: 10, last: 20 }));
    /// assert_eq!(StepRange::parse("5"), Ok(StepRange { first: 5, last: 5 }));
    /// assert_eq!(StepRange::parse("3..").unwrap().last, i64::MAX);
    /// assert!(StepRange::parse("9..2").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<StepRange, String> {
        let number = |t: &str, default: i64| -> Result<i64, String> {
            let t = t.trim();
            if t.is_empty() {
                return Ok(default);
            }
            t.parse().map_err(|_| format!("{s:?} is not a step range (A..B, A.., ..B or N)"))
        };
        let range = match s.split_once("..") {
            Some((a, b)) => {
                StepRange { first: number(a, i64::MIN)?, last: number(b.trim_start_matches('='), i64::MAX)? }
            }
            None if !s.trim().is_empty() => {
                let n = number(s, 0)?;
                StepRange { first: n, last: n }
            }
            None => return Err("an empty step range (A..B, A.., ..B or N)".to_owned()),
        };
        if range.first > range.last {
            return Err(format!("{s:?} is an empty step range: {} comes after {}", range.first, range.last));
        }
        Ok(range)
    }

    /// True when step number `n` is in the range.
    pub fn contains(&self, n: i64) -> bool {
        (self.first..=self.last).contains(&n)
    }
}

impl std::fmt::Display for StepRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.first, self.last) {
            (a, b) if a == b => write!(f, "{a}"),
            (i64::MIN, b) => write!(f, "..{b}"),
            (a, i64::MAX) => write!(f, "{a}.."),
            (a, b) => write!(f, "{a}..{b}"),
        }
    }
}

impl ScanConfig {
    /// A config that runs a single detector (for tests and benches).
    pub fn only(id: &str) -> ScanConfig {
        ScanConfig { only: Some(vec![id.to_owned()]), ..ScanConfig::default() }
    }

    /// True when the detector with this id should run.
    pub fn enabled(&self, id: &str) -> bool {
        self.disabled_by(id).is_none()
    }

    /// What keeps the detector with this id from running (`--disable`, `xlens.toml`, ...), or
    /// `None` when it runs. A detector that `only` leaves out and `disabled` names is put down to
    /// `disabled`.
    pub fn disabled_by(&self, id: &str) -> Option<&str> {
        const CONFIG: &str = "the scan config";
        if self.disabled.iter().any(|d| d == id) {
            return Some(self.disabled_from.as_deref().unwrap_or(CONFIG));
        }
        match &self.only {
            Some(only) if !only.iter().any(|o| o == id) => Some(self.only_from.as_deref().unwrap_or(CONFIG)),
            _ => None,
        }
    }
}

/// The status rule: `NEEDS_ATTENTION` exactly when a finding is at `attention_severity` or
/// worse, so every verdict names its findings. The utilisation and idle limits below are read by
/// the detectors that report them (`low_utilization`, `device_idle`); exposed communication and
/// memory pressure have their own detectors (`exposed_collective`, `hbm_pressure`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatusThresholds {
    /// Lowest FLOP utilisation (of the device peak) that counts as high; below it
    /// `low_utilization` reports. Default 0.5.
    pub min_flops_utilization: f64,
    /// Highest idle share of the step (%) that counts as low; above it `device_idle` reports.
    /// Default 10.
    pub max_idle_pct: f64,
    /// Findings at this severity or worse make the status `NEEDS_ATTENTION`. Default P1.
    pub attention_severity: Severity,
}

impl Default for StatusThresholds {
    fn default() -> Self {
        StatusThresholds { min_flops_utilization: 0.5, max_idle_pct: 10.0, attention_severity: Severity::P1 }
    }
}

/// Every threshold, one section per detector.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// The overall status.
    pub status: StatusThresholds,
    /// `exposed_collective`.
    pub exposed_collective: ExposedCollective,
    /// `exposed_async_copy`.
    pub exposed_async_copy: ExposedAsyncCopy,
    /// `launch_bound`.
    pub launch_bound: LaunchBound,
    /// `wrong_mesh_mapping`.
    pub wrong_mesh_mapping: WrongMeshMapping,
    /// `unintended_remat`.
    pub unintended_remat: UnintendedRemat,
    /// `data_formatting_tax`.
    pub data_formatting_tax: DataFormattingTax,
    /// `input_starvation`.
    pub input_starvation: InputStarvation,
    /// `recompilation`.
    pub recompilation: Recompilation,
    /// `vpu_bound`.
    pub vpu_bound: VpuBound,
    /// `padding_waste`.
    pub padding_waste: PaddingWaste,
    /// `straggler_core`.
    pub straggler_core: StragglerCore,
    /// `dcn_exposed_reduce`.
    pub dcn_exposed_reduce: DcnExposedReduce,
    /// `host_callback_stall`.
    pub host_callback_stall: HostCallbackStall,
    /// `donation_miss`.
    pub donation_miss: DonationMiss,
    /// `allgather_duplication`.
    pub allgather_duplication: AllgatherDuplication,
    /// `replicated_activations`.
    pub replicated_activations: ReplicatedActivations,
    /// `profile_during_warmup`.
    pub profile_during_warmup: ProfileDuringWarmup,
    /// `barrier_in_loop`.
    pub barrier_in_loop: BarrierInLoop,
    /// `sparsecore_overflow`.
    pub sparsecore_overflow: SparsecoreOverflow,
    /// `layout_mismatch_copy`.
    pub layout_mismatch_copy: LayoutMismatchCopy,
    /// `unfused_reshape`.
    pub unfused_reshape: UnfusedReshape,
    /// `unnecessary_convert_reduce`.
    pub unnecessary_convert_reduce: UnnecessaryConvertReduce,
    /// `hbm_pressure`.
    pub hbm_pressure: HbmPressure,
    /// `truncated_capture`.
    pub truncated_capture: TruncatedCapture,
    /// `low_utilization` (its reporting limit is `status.min_flops_utilization`).
    pub low_utilization: LowUtilization,
}

macro_rules! section {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }
    };
}

section!(
    /// Thresholds of `exposed_collective`.
    ExposedCollective {
        /// Report when exposed collective time is at least this % of the step. Default 5.
        min_pct_of_step: f64 = 5.0,
        /// A window covered at least this much by compute is hidden (XProf's 0.9).
        hidden_ratio: f64 = 0.9,
        /// A window covered at most this much by compute is exposed (XProf's 0.1).
        exposed_ratio: f64 = 0.1,
    }
);

section!(
    /// Thresholds of `exposed_async_copy`.
    ExposedAsyncCopy {
        /// Report when exposed copy time is at least this % of the step. Default 5.
        min_pct_of_step: f64 = 5.0,
    }
);

section!(
    /// Thresholds of `launch_bound`.
    LaunchBound {
        /// Report when launch gaps are at least this % of the step. Default 5.
        min_pct_of_step: f64 = 5.0,
        /// A gap between kernels counts when shorter than this (µs). Default 100.
        max_gap_us: f64 = 100.0,
        /// ... and the kernel after it is shorter than this (µs). Default 20.
        max_kernel_us: f64 = 20.0,
    }
);

section!(
    /// Thresholds of `wrong_mesh_mapping`.
    WrongMeshMapping {
        /// Report a chain of at least this many collective-permutes per step. Default 4.
        min_permute_chain: usize = 4,
        /// A collective class taking at least this multiple of its single-hop time is suspect. Default 2.
        min_hop_multiple: f64 = 2.0,
    }
);

section!(
    /// Thresholds of `unintended_remat`.
    UnintendedRemat {
        /// Report when recomputed FLOPs are at least this fraction of the step's FLOPs. Default 0.05.
        min_recomputed_flops_fraction: f64 = 0.05,
        /// With a known device capacity, a memory peak at least this fraction of it suggests the
        /// recomputation is needed: the finding is then lowered to P2. Default 0.8.
        needed_peak_fraction: f64 = 0.8,
    }
);

section!(
    /// Thresholds of `data_formatting_tax`.
    DataFormattingTax {
        /// Report when kernels that only reformat data take at least this % of the step. Default 5.
        min_pct_of_step: f64 = 5.0,
        /// ... or, whatever their time, when they are at least this fraction of the kernels run per
        /// step ... Default 0.15.
        min_kernel_share: f64 = 0.15,
        /// ... and move at least this fraction of the bytes the step's kernels access. Default 0.12.
        min_bytes_share: f64 = 0.12,
    }
);

section!(
    /// Thresholds of `input_starvation`.
    InputStarvation {
        /// Report when the device waits for input at least this % of the step (XProf: 5 moderate). Default 5.
        min_input_pct: f64 = 5.0,
        /// P0 at or above this % (XProf: 20 highly input-bound). Default 20.
        p0_input_pct: f64 = 20.0,
    }
);

section!(
    /// Thresholds of `recompilation`.
    Recompilation {
        /// Ignore compilations shorter than this (ms). Default 1.
        min_compile_ms: f64 = 1.0,
    }
);

section!(
    /// Thresholds of `vpu_bound`.
    VpuBound {
        /// Report when vector work is at least this % of the step. Default 50.
        min_vector_pct: f64 = 50.0,
        /// ... and matmul work at most this %. Default 15.
        max_matmul_pct: f64 = 15.0,
        /// A vector op using at least this fraction of the HBM bandwidth is HBM bound, not
        /// vector-unit bound. Default 0.5.
        hbm_bound_utilization: f64 = 0.5,
        /// Also report a vector-unit-bound stretch: when the time vector-unit-bound ops take above
        /// their HBM floor is at least this % of the step, whatever the matmul share. Default 10.
        min_vector_unit_excess_pct: f64 = 10.0,
        /// For a stretch, a vector op counts as vector-unit bound only below this fraction of the
        /// HBM bandwidth (the memory system mostly idle while it runs). Default 0.25.
        stretch_max_hbm_utilization: f64 = 0.25,
    }
);

section!(
    /// Thresholds of `padding_waste`.
    PaddingWaste {
        /// A matmul counts as padded when at least this fraction of its tiled work (MXU FLOPs, or
        /// bytes for convolutions) is padding. Default 0.2.
        min_padding_fraction: f64 = 0.2,
        /// Report when the padding of such matmuls costs at least this % of the step (their time
        /// times their padding fraction) on a TPU capture. Default 5.
        min_pct_of_step: f64 = 5.0,
        /// The same on other devices, where the figure is a projection onto TPU tiles. Default 10.
        min_pct_of_step_projected: f64 = 10.0,
    }
);

section!(
    /// Thresholds of `straggler_core`.
    StragglerCore {
        /// Report when the slowest core's (host's) compute per step exceeds the median core's
        /// (host's) by this %. Default 10.
        min_spread_pct: f64 = 10.0,
        /// Across three or more hosts, the straggler's modified z-score must exceed this
        /// (XProf's straggler rule). Default 3.5.
        min_host_z: f64 = 3.5,
    }
);

section!(
    /// Thresholds of `dcn_exposed_reduce`.
    DcnExposedReduce {
        /// Report when the reduce tail after the backward pass is at least this % of the step. Default 5.
        min_tail_pct: f64 = 5.0,
        /// ... and DCN (MegaScale) host events cover at least this fraction of it. Default 0.5.
        min_dcn_overlap: f64 = 0.5,
    }
);

section!(
    /// Thresholds of `host_callback_stall`.
    HostCallbackStall {
        /// Report when host callbacks take at least this % of the step. Default 2.
        min_pct_of_step: f64 = 2.0,
    }
);

section!(
    /// Thresholds of `donation_miss`.
    DonationMiss {
        /// Only consider entry parameters at least this large (bytes); smaller ones (biases,
        /// norms, counters, RNG keys) are ignored. Default 64 KiB.
        min_param_bytes: u64 = 1 << 16,
        /// Report when the non-donated, updated parameters total at least this many bytes. Default 512 KiB.
        min_total_bytes: u64 = 1 << 19,
        /// Report when non-donated, updated parameters are at least this fraction of the arguments. Default 0.25.
        min_fraction_of_arguments: f64 = 0.25,
        /// P0 when the program's memory peak is at least this fraction of the device capacity
        /// (known capacity only): the extra copy then risks an out-of-memory. Default 0.9.
        p0_peak_fraction: f64 = 0.9,
    }
);

section!(
    /// Thresholds of `allgather_duplication`.
    AllgatherDuplication {
        /// Report when the same operand is gathered at least this many times per step. Default 2.
        min_gathers_per_operand: usize = 2,
    }
);

section!(
    /// Thresholds of `replicated_activations`.
    ReplicatedActivations {
        /// Report when at least this many different activations are all-gathered. Default 2.
        min_activations: usize = 2,
    }
);

section!(
    /// Thresholds of `profile_during_warmup`.
    ProfileDuringWarmup {
        /// Report when the first step is at least this multiple of the median of the rest. Default 3.
        min_first_step_factor: f64 = 3.0,
        /// ... and compilation/autotuning explains at least this fraction of its excess over that
        /// median. Default 0.1.
        min_compile_share: f64 = 0.1,
        /// Also report, whatever the step count, when warm-up work (compile and autotune events,
        /// graph construction, GPU autotuning kernels) covers at least this fraction of the
        /// capture up to the end of its first step. Default 0.3.
        min_warmup_share: f64 = 0.3,
    }
);

section!(
    /// Thresholds of `barrier_in_loop`.
    BarrierInLoop {
        /// Report when there are at least this many host syncs per step. Default 2.
        min_syncs_per_step: f64 = 2.0,
        /// ... and the device is idle at least this % of the step. Default 10.
        min_idle_pct: f64 = 10.0,
    }
);

section!(
    /// Thresholds of `sparsecore_overflow`.
    SparsecoreOverflow {
        /// Report when SparseCore ops are busy at least this % of the step. Default 90.
        min_busy_pct: f64 = 90.0,
        /// ... or when dense gathers/scatters on the TensorCore of a chip with SparseCores take at
        /// least this % of the step. Default 5.
        min_dense_gather_pct: f64 = 5.0,
    }
);

section!(
    /// Thresholds of `layout_mismatch_copy`.
    LayoutMismatchCopy {
        /// Report when layout-only copies take at least this % of the step (or, without
        /// timings, when there are at least `min_count` of them). Default 1.
        min_pct_of_step: f64 = 1.0,
        /// Minimum number of layout-only copies. Default 1.
        min_count: usize = 1,
    }
);

section!(
    /// Thresholds of `unfused_reshape`.
    UnfusedReshape {
        /// Minimum number of standalone reshapes/transposes next to a matmul (per step). Default 1.
        min_count: usize = 1,
        /// ... and, with an op timeline, they take at least this % of the step. Default 5.
        min_pct_of_step: f64 = 5.0,
    }
);

section!(
    /// Thresholds of `unnecessary_convert_reduce`.
    UnnecessaryConvertReduce {
        /// Minimum number of upcast → reduce → downcast chains. Default 1.
        min_chains: usize = 1,
    }
);

section!(
    /// Thresholds of `hbm_pressure`.
    HbmPressure {
        /// Report when the memory peak is at least this fraction of capacity. Default 0.85.
        min_peak_fraction: f64 = 0.85,
        /// P0 at or above this fraction. Default 0.95.
        p0_peak_fraction: f64 = 0.95,
    }
);

section!(
    /// Thresholds of `truncated_capture`.
    TruncatedCapture {
        /// Report when the profile's `dropped_traces` stats add up to at least this many events. Default 1.
        min_dropped_events: u64 = 1,
        /// Report a device core whose last op ends at least this many median steps before the
        /// latest core's last op. Default 1.
        min_core_lag_steps: f64 = 1.0,
        /// Report ops after the last step marker only when their work is more than this % of the
        /// work inside the steps, and more than the steps' own spread of it. Default 2 (the
        /// share under which any impact is minor, `Severity::from_impact`'s P2 line).
        min_trailing_pct: f64 = 2.0,
    }
);

section!(
    /// Thresholds of `low_utilization`.
    LowUtilization {
        /// The share of its own roofline an op can be expected to reach; time above it is
        /// recoverable, an op at or above it counts for nothing. Default 0.8: the maximum
        /// achievable matmul FLOPS measured on NVIDIA data-centre GPUs are 80 to 87 % of their
        /// datasheet peaks (docs/metrics.md). Values outside `0.01..=1` are clamped.
        attainable_roofline_share: f64 = 0.8,
    }
);
