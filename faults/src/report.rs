//! What a scan reports: the verdict, the health metrics, the per-host summaries the session
//! detectors read, and the report itself. A leaf of the crate: detectors and the scan both read
//! these types.

use serde::{Deserialize, Serialize};
use xlens_roofline::{
    Chip, ExecutorBusy, FrameworkInfo, FrameworkOpStats, OpProfile, PerfEnv, ProgramWork, RooflinePoint, StepAnatomy,
    StepSource, TimeClass,
};
use xlens_xplane::Picos;

use crate::comparison::Comparison;
use crate::finding::{Finding, Severity};
use xlens_roofline::HostProfile;

/// The verdict of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Nothing important to fix.
    #[serde(rename = "OPTIMAL")]
    Optimal,
    /// At least one finding at the attention severity (P1 by default) or worse.
    #[serde(rename = "NEEDS_ATTENTION")]
    NeedsAttention,
    /// Part of the profile could not be read (a host file, or data inside one), a figure the
    /// scan computed is impossible (the data it comes from is wrong), or no detector ran:
    /// whatever was found, the verdict cannot vouch for what was lost ([`Report::errors`],
    /// [`Report::skipped_hosts`], the warnings, the summary's reasons).
    #[serde(rename = "INCOMPLETE")]
    Incomplete,
}

impl Status {
    /// `"OPTIMAL"`, `"NEEDS_ATTENTION"` or `"INCOMPLETE"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Optimal => "OPTIMAL",
            Status::NeedsAttention => "NEEDS_ATTENTION",
            Status::Incomplete => "INCOMPLETE",
        }
    }
}

/// A host file that could not be read: the rest of the session is analysed without it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedHost {
    /// The host name.
    pub host: String,
    /// The file.
    pub file: String,
    /// The error, one line.
    pub error: String,
}

impl SkippedHost {
    /// The host file `file` of `host` that could not be read, its error on one line.
    pub fn new(host: &str, file: &str, error: &dyn std::fmt::Display) -> SkippedHost {
        let error = error.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        SkippedHost { host: host.to_owned(), file: file.to_owned(), error }
    }
}

/// A detector that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The detector id.
    pub id: String,
    /// Why it did not run.
    pub reason: String,
}

/// What was scanned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileInfo {
    /// The run name, when scanned from a directory.
    pub run: Option<String>,
    /// Host names.
    pub hosts: Vec<String>,
    /// `TPU`, `GPU` or `CPU`.
    pub device: String,
    /// Device type string, when recorded (e.g. `TPU v5 Lite`).
    pub device_type: Option<String>,
    /// Analysed cores over all hosts.
    pub cores: usize,
    /// Steps (of the first host with steps).
    pub steps: usize,
    /// HLO programs over all hosts.
    pub hlo_programs: usize,
    /// The main program (most op time), `name(program_id)`.
    pub main_program: Option<String>,
    /// The steps analysed (`--steps`, [`crate::StepRange`]), when not all; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_range: Option<String>,
}

/// One op among the slowest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowOp {
    /// The program (`name(program_id)`) the op belongs to; on a capture without HLO, where
    /// the ops are the framework's, `TensorFlow device ops` or `TensorFlow host ops`.
    pub program: String,
    /// Op (instruction) name.
    pub name: String,
    /// Category (a framework op's type).
    pub category: String,
    /// Self time over the profile, in ms.
    pub self_time_ms: f64,
    /// Share of all ops' self time, in %.
    pub pct: f64,
    /// A framework device op's distinct kernels (and copies) it launched; absent on every
    /// other op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernels: Option<usize>,
}

/// The health snapshot: the numbers an engineer reads first. Absent figures are `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// What the per-step figures (step times, each finding's `impact`) are per: `steps` (the
    /// profile's step markers), `module_executions` (no markers: program executions),
    /// `device_window` (neither: the whole captured device window is one "step") or `none`.
    pub time_base: String,
    /// Number of steps (or module executions, or 1 for the device window).
    pub step_count: usize,
    /// Mean step time (ms).
    pub step_time_ms_mean: Option<f64>,
    /// Median step time (ms).
    pub step_time_ms_median: Option<f64>,
    /// Standard deviation of the step time (ms).
    pub step_time_ms_stddev: Option<f64>,
    /// Shortest step (ms).
    pub step_time_ms_min: Option<f64>,
    /// Longest step (ms).
    pub step_time_ms_max: Option<f64>,
    /// The mean iteration of the training loop (ms), where it is not the step: on PyTorch/XLA
    /// each step runs to the next step's marker (the loop fetches the next batch outside
    /// `xp.StepTrace`, and the step's graph runs after `xm.mark_step()` returns). The busy, idle
    /// and host-wait shares, the comparison's time per step and every finding's share of the
    /// step are of this iteration; the step times stay XProf's. Absent where they are the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_iteration_ms_mean: Option<f64>,
    /// Share of step time the device runs ops (%): `100 - idle_pct` (docs/metrics.md).
    pub device_busy_pct: Option<f64>,
    /// Share of step time the device runs no op of its own (%): nothing runs, or it waits on the
    /// host (host work, transfers and callbacks, `host_wait_pct`). Busy and idle add up to 100.
    pub idle_pct: Option<f64>,
    /// The part of `idle_pct` in which the device waits on the host (%): host-run work while no
    /// op runs, host transfers and callbacks (the step anatomy's `host` class). A barrier or a
    /// callback is host time, not input.
    #[serde(default)]
    pub host_wait_pct: Option<f64>,
    /// Share of step time in infeed and outfeed ops (%): the device waiting on its input
    /// pipeline (part of `device_busy_pct`, the ops run). XProf's input-bound figure for an
    /// input pipeline on the host is `input_starvation`'s.
    pub input_bound_pct: Option<f64>,
    /// Share of step time spent waiting on collectives (%).
    pub exposed_communication_pct: Option<f64>,
    /// Achieved FLOP/s over the profiled time as a share of the peak (%): each op's FLOPs per
    /// execution (library GEMM and attention calls priced from their shapes) times its
    /// executions, never its launches (docs/metrics.md).
    pub flops_utilization_pct: Option<f64>,
    /// FLOP utilisation as XProf reports it (%): a GPU op's FLOPs counted once per launch that
    /// carries its name (a cuBLAS GEMM's memset kernel included) and library calls at 0, which
    /// can read far above or below what the program reaches; kept to compare with XProf.
    #[serde(default)]
    pub xprof_flops_utilization_pct: Option<f64>,
    /// Achieved HBM bandwidth as a share of the peak (%).
    pub hbm_utilization_pct: Option<f64>,
    /// Program roofline efficiency (%).
    pub roofline_efficiency_pct: Option<f64>,
    /// What bounds the program on the roofline (`Compute`, `HBM`, ...; XProf's `bound_by`).
    pub bound_by: Option<String>,
    /// The program's FLOPs per byte accessed (XProf's operational intensity).
    pub operational_intensity_flop_per_byte: Option<f64>,
    /// XProf's device duty cycle: the share of the captured device window the devices ran
    /// on-duty ops (%).
    pub device_duty_cycle_pct: Option<f64>,
    /// Static memory peak of the main program (bytes).
    pub memory_peak_bytes: Option<u64>,
    /// Device memory capacity (bytes).
    pub memory_capacity_bytes: Option<u64>,
    /// Memory peak as a share of capacity (%).
    pub memory_peak_pct: Option<f64>,
    /// Why the FLOP and HBM utilisations, the roofline efficiency, the bound and the
    /// operational intensity are `null` on a device with peaks: no op of the profile carries a
    /// cost, so they are unknown, not zero. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_unknown: Option<String>,
    /// The slowest ops by self time.
    pub slowest_ops: Vec<SlowOp>,
    /// The host whose pace these step times are: the slowest host of a session (the one host
    /// of a single-host profile); `None` without steps.
    pub step_time_host: Option<String>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            time_base: StepSource::None.key().to_owned(),
            step_count: 0,
            step_time_ms_mean: None,
            step_time_ms_median: None,
            step_time_ms_stddev: None,
            step_time_ms_min: None,
            step_time_ms_max: None,
            loop_iteration_ms_mean: None,
            device_busy_pct: None,
            idle_pct: None,
            host_wait_pct: None,
            input_bound_pct: None,
            exposed_communication_pct: None,
            flops_utilization_pct: None,
            xprof_flops_utilization_pct: None,
            hbm_utilization_pct: None,
            roofline_efficiency_pct: None,
            bound_by: None,
            operational_intensity_flop_per_byte: None,
            device_duty_cycle_pct: None,
            memory_peak_bytes: None,
            memory_capacity_bytes: None,
            memory_peak_pct: None,
            utilization_unknown: None,
            slowest_ops: Vec::new(),
            step_time_host: None,
        }
    }
}

impl Metrics {
    /// Every numeric figure by its name (the `metrics` table's rows, what a diff compares), in a
    /// fixed order; bytes as numbers of bytes.
    pub fn figures(&self) -> Vec<(&'static str, Option<f64>)> {
        let bytes = |v: Option<u64>| v.map(|b| b as f64);
        vec![
            ("step_count", Some(self.step_count as f64)),
            ("step_time_ms_mean", self.step_time_ms_mean),
            ("step_time_ms_median", self.step_time_ms_median),
            ("step_time_ms_stddev", self.step_time_ms_stddev),
            ("step_time_ms_min", self.step_time_ms_min),
            ("step_time_ms_max", self.step_time_ms_max),
            ("device_busy_pct", self.device_busy_pct),
            ("idle_pct", self.idle_pct),
            ("host_wait_pct", self.host_wait_pct),
            ("input_bound_pct", self.input_bound_pct),
            ("exposed_communication_pct", self.exposed_communication_pct),
            ("flops_utilization_pct", self.flops_utilization_pct),
            ("xprof_flops_utilization_pct", self.xprof_flops_utilization_pct),
            ("hbm_utilization_pct", self.hbm_utilization_pct),
            ("roofline_efficiency_pct", self.roofline_efficiency_pct),
            ("operational_intensity_flop_per_byte", self.operational_intensity_flop_per_byte),
            ("device_duty_cycle_pct", self.device_duty_cycle_pct),
            ("memory_peak_bytes", bytes(self.memory_peak_bytes)),
            ("memory_capacity_bytes", bytes(self.memory_capacity_bytes)),
            ("memory_peak_pct", self.memory_peak_pct),
        ]
    }

    /// XProf's FLOP utilisation where it differs from [`flops_utilization_pct`](Self::flops_utilization_pct)
    /// by 0.05 points or more (shown beside it, named as XProf's), else `None`.
    pub fn xprof_flops_utilization_if_different(&self) -> Option<f64> {
        let (ours, xprof) = (self.flops_utilization_pct?, self.xprof_flops_utilization_pct?);
        ((ours - xprof).abs() >= 0.05).then_some(xprof)
    }

    /// The unit of a per-step figure under this time base: `step`, `module execution` or
    /// `device window`.
    pub fn step_unit(&self) -> &'static str {
        match self.time_base.as_str() {
            "module_executions" => "module execution",
            "device_window" => "device window",
            _ => "step",
        }
    }
}

/// One op (or the whole program) placed on the roofline chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RooflineDot {
    /// Op name (`Program` for the program point).
    pub name: String,
    /// Op category (`program` for the program point).
    pub category: String,
    /// Self time over the profile, in ms (the program's profiled time for the program point).
    pub self_time_ms: f64,
    /// FLOPs per byte of the memory that bounds it: XProf's bottleneck operational intensity,
    /// the x of XProf's roofline chart (per HBM byte when HBM-bound).
    pub intensity: f64,
    /// FLOPs per byte of all memories (XProf's operational intensity, the text report's figure).
    pub all_bytes_intensity: f64,
    /// Achieved FLOP/s.
    pub flops_per_s: f64,
    /// What bounds it (`Compute`, `HBM`, `VMEM Read`, ...).
    pub bound: String,
    /// Share of its roofline reached, in % (above 100 when the reported peaks are conservative).
    pub efficiency_pct: f64,
}

/// A roof of the roofline chart: a compute peak (FLOP/s) or a memory bandwidth (bytes/s).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Roof {
    /// What it is: `peak`, `int8`, `HBM`, `VMEM read`, ...
    pub label: String,
    /// FLOP/s for a compute roof, bytes/s for a memory roof.
    pub per_s: f64,
}

/// The step anatomy classes the step-time chart stacks, bottom to top: the order of
/// [`StepBar::anatomy_ms`].
pub const ANATOMY_CLASSES: [&str; 7] =
    ["matmul", "vector", "data formatting", "exposed collective", "infeed/outfeed", "host", "idle"];

/// One step of a host's step-time series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepBar {
    /// Step name (the step number for marked steps).
    pub name: String,
    /// Step time, in ms.
    pub step_ms: f64,
    /// The step's anatomy in ms, one value per [`ANATOMY_CLASSES`] entry (they sum to the
    /// anatomy's step time); `None` without an anatomy.
    pub anatomy_ms: Option<[f64; ANATOMY_CLASSES.len()]>,
}

/// One host's steps, for the step-time chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSeries {
    /// Host name.
    pub host: String,
    /// The host's steps, in order.
    pub steps: Vec<StepBar>,
}

impl StepSeries {
    /// Mean step time in ms (0 without steps).
    pub fn mean_ms(&self) -> f64 {
        if self.steps.is_empty() {
            return 0.0;
        }
        self.steps.iter().map(|s| s.step_ms).sum::<f64>() / self.steps.len() as f64
    }

    /// Time per anatomy class over the whole series, in ms; `None` when a step has no anatomy.
    pub fn anatomy_total_ms(&self) -> Option<[f64; ANATOMY_CLASSES.len()]> {
        let mut total = [0.0; ANATOMY_CLASSES.len()];
        for step in &self.steps {
            for (t, v) in total.iter_mut().zip(step.anatomy_ms?) {
                *t += v;
            }
        }
        (!self.steps.is_empty()).then_some(total)
    }
}

/// One of the op profile's slowest ops, for the HTML page's table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopOp {
    /// The program (`name(program_id)`) the op belongs to.
    pub program: String,
    /// Op name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Self time over the profile (all cores, all steps), in ms.
    pub self_time_ms: f64,
    /// Share of all ops' self time, in % (the text report's figure).
    pub pct: f64,
    /// Achieved FLOP/s over the op's time, when it has FLOPs.
    pub flops_per_s: Option<f64>,
    /// What bounds it on the roofline, when the device peaks are known.
    pub bound: Option<String>,
}

/// Chart data for the HTML page (not part of the JSON contract).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Charts {
    /// Each host's steps, in host order.
    pub step_series: Vec<StepSeries>,
    /// Category and self time (ms), largest first.
    pub categories_ms: Vec<(String, f64)>,
    /// The op profile's slowest ops by self time (ops without inner ops); on a GPU host
    /// without HLO whose kernels name their TensorFlow op, its framework device ops instead
    /// (the metrics' `slowest_ops`, program `TensorFlow device ops`), and on TensorFlow on the
    /// CPU alone its host's framework ops (program `TensorFlow host ops`).
    pub top_ops: Vec<TopOp>,
    /// Top ops on the roofline.
    pub roofline: Vec<RooflineDot>,
    /// The whole program on the roofline.
    pub program_dot: Option<RooflineDot>,
    /// Compute roofs of a core: the peak the utilisations divide by first, then any
    /// lower-precision peak above it (int8, fp8) the chip catalogue knows.
    pub compute_roofs: Vec<Roof>,
    /// Memory roofs of a core: HBM first, then the on-chip memories the profile reports.
    pub memory_roofs: Vec<Roof>,
    /// The host the op charts (categories, top ops, roofline) describe, in a session of
    /// several hosts (the slowest).
    pub ops_host: Option<String>,
    /// Set on a host without HLO whose kernels name their TensorFlow op: what the op charts
    /// show then (framework ops, XProf's framework-op statistics), in words.
    #[serde(default)]
    pub framework_ops: Option<String>,
    /// The device's framework ops, slowest first (op type as category, % of the device's op
    /// time, the first kernels they launched as program), with `framework_ops`; empty when
    /// they are the `top_ops`.
    #[serde(default)]
    pub device_framework_ops: Vec<TopOp>,
    /// The host's framework ops (executor threads, `tf.data`), slowest first, with
    /// `framework_ops`; empty when they are the `top_ops` (TensorFlow on the CPU alone).
    #[serde(default)]
    pub host_framework_ops: Vec<TopOp>,
    /// The device memory of the HLO programs (every host's programs in a session).
    #[serde(default)]
    pub memory: MemoryChart,
    /// The GPU kernels of each host with any, in host order (empty off GPUs).
    #[serde(default)]
    pub kernels: Vec<KernelChart>,
}

/// Buffer rows of a program kept for the page's memory section (the largest first).
pub const MEMORY_ROWS: usize = 10;
/// Kernels of a host kept for the page's kernel-statistics section (the longest first).
pub const KERNEL_ROWS: usize = 15;

/// One HLO program's device memory, for the page's memory section: what `xlens memory` lists of
/// it (XProf's `get_peak_allocations`, from [`xlens_hlo::Module::peak_allocations`]) and the
/// peak of its heap replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProgramMemory {
    /// The program id, when the module has one.
    pub program_id: Option<u64>,
    /// The program, `name(program_id)` as XProf names it.
    pub module_name: String,
    /// Its allocations: the total whole, the rows cut to the first [`MEMORY_ROWS`].
    pub allocations: xlens_hlo::PeakAllocations,
    /// Rows left out by the cut.
    pub more_rows: usize,
    /// The peak of its HBM heap replay with the indefinite-lifetime allocations
    /// ([`xlens_hlo::MemoryStats::peak_bytes`]): the health's memory peak for the main program.
    pub peak_bytes: u64,
}

/// The device memory of a profile's HLO programs, for the page's memory section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryChart {
    /// True when the profile carries HLO programs: without, there are no memory figures.
    pub has_hlo: bool,
    /// The programs with a buffer assignment, by program id then name (as `xlens memory`
    /// reads them; a session's programs once each, from the first host that has them).
    pub programs: Vec<ProgramMemory>,
    /// The programs whose heap trace did not replay, one line each with its error.
    pub failed: Vec<String>,
    /// The HBM capacity of one device, when known.
    pub capacity_bytes: Option<u64>,
}

/// One host's GPU kernels, for the page's kernel-statistics section: its statistics as
/// `xlens kernels` reads them ([`xlens_roofline::KernelStats::read`]), cut to the longest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelChart {
    /// Host name.
    pub host: String,
    /// The statistics, the kernels cut to the first [`KERNEL_ROWS`] (the device time whole).
    pub stats: xlens_roofline::KernelStats,
    /// Every kernel's summed time before the cut ([`xlens_roofline::KernelStats::kernel_time`]).
    pub kernel_time: Picos,
    /// Distinct kernels before the cut.
    pub kernel_count: usize,
    /// Launches of every kernel before the cut.
    pub launches: u64,
}

/// The result of a scan: rendered as text, JSON, HTML and frames.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The verdict.
    pub status: Status,
    /// One paragraph: the verdict, the profile, what could not be checked.
    pub summary: String,
    /// What was scanned.
    pub profile: ProfileInfo,
    /// The framework that produced the profile (`{"name": "tensorflow", "xla": false,
    /// "evidence": "…"}`): the hosts' own when they agree, else unknown; unknown in reports
    /// saved before it existed.
    #[serde(default)]
    pub framework: FrameworkInfo,
    /// The health snapshot of the session: its step times are the slowest host's per step (a
    /// synchronous session runs at its slowest host's pace, as XProf's overview reports), its
    /// utilisation and duty cycle every host's work and time added up (XProf's all-hosts view),
    /// the other figures those of the slowest host ([`Metrics::step_time_host`]).
    pub metrics: Metrics,
    /// The per-host step table, in host order.
    pub hosts: Vec<HostRow>,
    /// Findings, P0 first, then by impact.
    pub findings: Vec<Finding>,
    /// Detectors that did not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// The detectors that ran on at least one host or on the session, in registry order: what
    /// the verdict vouches for.
    #[serde(default)]
    pub detectors_run: Vec<String>,
    /// The detectors the scan's configuration kept from running, by id, with what did
    /// (`--only`, `--disable`, the config file): a verdict never silently rests on fewer
    /// detectors than the registry has.
    #[serde(default)]
    pub disabled_by: std::collections::BTreeMap<String, String>,
    /// Host files that could not be read at all (the report covers the others).
    pub skipped_hosts: Vec<SkippedHost>,
    /// Data that could not be read inside the hosts that were (`host: what: error`); any entry
    /// here or in `skipped_hosts` makes the status `INCOMPLETE`.
    pub errors: Vec<String>,
    /// Odd-but-decodable data met on the way.
    pub warnings: Vec<String>,
    /// What a profile diff compares (step times, categories and ops per step), so a saved JSON
    /// report can be a diff's baseline; absent from reports saved before it existed.
    #[serde(default)]
    pub comparison: Comparison,
    /// Chart data for the HTML rendering (not serialized).
    #[serde(skip)]
    pub charts: Charts,
}

/// One row of the per-host step table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRow {
    /// Host name.
    pub host: String,
    /// The host's time base (`steps`, `module_executions`, `device_window`, `none`).
    pub time_base: String,
    /// Steps (or module executions) on the host.
    pub step_count: usize,
    /// Mean step time.
    pub step_time_ms_mean: Option<f64>,
    /// Median step time.
    pub step_time_ms_median: Option<f64>,
    /// Shortest step.
    pub step_time_ms_min: Option<f64>,
    /// Longest step.
    pub step_time_ms_max: Option<f64>,
    /// Compute time per step (the anatomy's compute classes: matmul, vector, other compute).
    pub compute_ms_mean: Option<f64>,
    /// Device idle, % of the step.
    pub idle_pct: Option<f64>,
    /// Program FLOP utilisation, %.
    pub flops_utilization_pct: Option<f64>,
    /// True for the host whose pace the session runs at (the slowest mean step).
    pub slowest: bool,
    /// The detectors that could not run on this host, with the reason (in the frames' `skipped`
    /// table; the report's `skipped` sums them up).
    #[serde(skip)]
    pub skipped: Vec<Skipped>,
}

impl Report {
    /// A report saved as JSON (what `xlens_report::render::json` writes: the report's serde
    /// form), e.g. the baseline of a diff. The JSON does not carry the metrics' keys
    /// ([`crate::Evidence::key`]): they read back empty.
    ///
    /// ```
    /// use xlens_faults::{Profile, ScanConfig, Report, scan};
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// let space = xlens_xplane::Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let report = scan(&Profile::from_space("host0", space), &ScanConfig::default());
    /// let json = serde_json::to_string_pretty(&report)?;
    /// let saved = Report::from_json(&json)?;
    /// assert_eq!(saved.status, report.status);
    /// assert_eq!(serde_json::to_string_pretty(&saved)?, json);
    /// assert!(saved.findings.iter().flat_map(|f| &f.evidence).all(|e| e.key().is_none_or(str::is_empty)));
    /// assert_eq!(saved.comparison, report.comparison);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The worst severity among the findings.
    pub fn worst_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).min()
    }
}

/// What a scan keeps of one host once its detectors ran: enough for the cross-host detectors
/// and the report, so that the host's profile itself can be dropped (hosts are streamed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    /// Host name.
    pub name: String,
    /// TPU, GPU or CPU.
    pub device: String,
    /// Device type string, when recorded.
    pub device_type: Option<String>,
    /// The framework that produced the host's profile ([`HostProfile::framework`]).
    #[serde(default)]
    pub framework: FrameworkInfo,
    /// Analysed cores.
    pub cores: usize,
    /// HLO programs.
    pub hlo_programs: usize,
    /// The main program (most op time).
    pub main_program: Option<String>,
    /// True when the profile reports device peaks (or the chip is known).
    pub has_peaks: bool,
    /// The anatomy of each step.
    pub anatomy: Vec<StepAnatomy>,
    /// Each step's name and time, in order.
    pub step_times: Vec<(String, Picos)>,
    /// The program's work over the profiled time (for the session's roofline).
    pub program_work: Option<ProgramWork>,
    /// The devices' on-duty time and windows (for the session's duty cycle).
    pub duty_cycle: Option<(Picos, Picos)>,
    /// The health snapshot.
    pub metrics: Metrics,
    /// Chart data.
    pub charts: Charts,
    /// What a diff compares of this host.
    pub comparison: Comparison,
    /// Warnings met on the host.
    pub warnings: Vec<String>,
    /// What could not be read on the host ([`HostProfile::read_errors`], host-prefixed).
    pub errors: Vec<String>,
    /// The host's figures that are impossible (a utilisation over 100 %), each named with its
    /// value: the data they come from is wrong, and the verdict cannot vouch for the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub impossible: Vec<String>,
    /// The detectors that could not run on the host, with the reason.
    pub skipped: Vec<Skipped>,
}

impl HostSummary {
    /// Summarises a host whose analyses are built.
    pub fn of(host: &HostProfile) -> HostSummary {
        HostSummary::of_page(host, true)
    }

    /// [`HostSummary::of`]; with `page` false, the charts only the HTML page shows and that cost
    /// a walk of their own (the GPU kernel statistics) are left empty.
    pub fn of_page(host: &HostProfile, page: bool) -> HostSummary {
        let mut warnings = Vec::new();
        for w in host.space().warnings() {
            warnings.push(format!("{}: {w}", host.name()));
        }
        for w in host.module_warnings() {
            warnings.push(format!("{}: {w}", host.name()));
        }
        for plane in host.space().analysis_devices() {
            let odd = xlens_roofline::PerfEnv::odd_peaks(plane);
            if !odd.is_empty() {
                warnings.push(format!(
                    "{}: {} reports impossible peaks, ignored: {}",
                    host.name(),
                    plane.name(),
                    odd.join(", ")
                ));
            }
        }
        if let Ok(profile) = host.op_profile() {
            let above = profile.above_peak();
            if !above.is_empty() {
                let named: Vec<String> = above
                    .iter()
                    .take(3)
                    .map(|(op, util, by)| format!("{} at {:.1} % of {}", op.name, 100.0 * util, peak_name(*by)))
                    .collect();
                let more = if above.len() > named.len() { ", ..." } else { "" };
                warnings.push(format!(
                    "{}: {} op(s) report more work than their time allows at the device's peaks ({}{more}): the \
                     profile's FLOP or byte counts for them are wrong; their rates, bound and efficiency are left out",
                    host.name(),
                    above.len(),
                    named.join(", ")
                ));
            }
        }
        // The executor's busy time (TensorFlow on the CPU alone) is read once, for the metrics
        // and the core count.
        let executor = executor_device(host);
        let metrics = host_metrics_with(host, executor.as_ref());
        let mut impossible = Vec::new();
        for (what, value) in [
            ("FLOP utilisation", metrics.flops_utilization_pct),
            ("HBM utilisation", metrics.hbm_utilization_pct),
            ("roofline efficiency", metrics.roofline_efficiency_pct),
            ("device duty cycle", metrics.device_duty_cycle_pct),
        ] {
            // Rounding lets a fully busy figure reach a hair above 100 %.
            if let Some(v) = value.filter(|v| !v.is_finite() || *v > 100.5 || *v < 0.0) {
                impossible.push(format!("{what} of {v:.1} %"));
                warnings.push(format!(
                    "{}: {what} of {v:.1} % is impossible: the device peaks the profile reports or the ops' FLOPs \
                     and bytes are wrong, and every figure built on them is unreliable",
                    host.name()
                ));
            }
        }
        let mut summary = HostSummary {
            name: host.name().to_owned(),
            device: host.device_kind().as_str().to_owned(),
            device_type: host
                .summary()
                .device_type
                .clone()
                .or_else(|| host.chip().and_then(|c| c.device_type().map(str::to_owned))),
            framework: host.framework().clone(),
            cores: match host.summary().device_cores {
                0 => match &executor {
                    Some((_, busy, _)) => busy.threads,
                    None => host.op_profile().map_or(0, |p| p.cores as usize),
                },
                n => n,
            },
            hlo_programs: host.modules().len(),
            main_program: host.main_module().map(|m| m.display_name()),
            has_peaks: host.chip().is_some(),
            anatomy: host.anatomy().map(<[StepAnatomy]>::to_vec).unwrap_or_default(),
            step_times: host
                .steps()
                .map(|s| s.steps.iter().map(|s| (s.name.clone(), s.duration)).collect())
                .unwrap_or_default(),
            program_work: host.op_profile().ok().and_then(OpProfile::program_work),
            duty_cycle: host.duty_cycle(),
            metrics,
            charts: charts(host, page),
            comparison: crate::comparison::of_host(host),
            warnings,
            errors: Vec::new(),
            impossible,
            skipped: Vec::new(),
        };
        // Last: the entries that did not decode in any walk so far (the detectors' and this
        // summary's) count.
        summary.errors = host.read_errors().into_iter().map(|e| format!("{}: {e}", host.name())).collect();
        summary
    }
}

/// The peak a [`xlens_roofline::BoundBy`] utilisation is of, in words.
fn peak_name(by: xlens_roofline::BoundBy) -> &'static str {
    match by {
        xlens_roofline::BoundBy::Compute => "the FLOP peak",
        xlens_roofline::BoundBy::Hbm => "the HBM bandwidth",
        xlens_roofline::BoundBy::OnChipRead => "the on-chip read bandwidth",
        xlens_roofline::BoundBy::OnChipWrite => "the on-chip write bandwidth",
        _ => "the peak",
    }
}

fn pct(part: Picos, whole: Picos) -> Option<f64> {
    if whole.0 > 0 { Some(100.0 * part.0 as f64 / whole.0 as f64) } else { None }
}

/// The program the slowest ops of a capture whose device is TensorFlow's executor name: they
/// are its framework ops (the host's, the `tf.data` ones among them), in no HLO program.
const EXECUTOR_PROGRAM: &str = "TensorFlow host ops";

/// The program the slowest ops of a GPU capture without HLO name: they are the TensorFlow ops
/// that launched its kernels, in no HLO program.
const FRAMEWORK_DEVICE_PROGRAM: &str = "TensorFlow device ops";

/// The framework op profile of a host whose slowest ops are its framework device ops: no HLO,
/// and kernels that name the TensorFlow op that launched them ([`FrameworkOpStats::device`]
/// not empty); `None` for every other host (JAX and XLA captures, CPU-only TensorFlow).
fn device_framework_ops(host: &HostProfile) -> Option<&FrameworkOpStats> {
    match host.framework_ops() {
        Some(Ok(fw)) if !fw.device.is_empty() => Some(fw),
        _ => None,
    }
}

/// The framework op profile of a host whose device is TensorFlow's executor (TensorFlow on the
/// CPU alone: no device plane, no HLO, host ops only), whose slowest ops are its host's
/// framework ops; `None` for every other host.
fn executor_framework_ops(host: &HostProfile) -> Option<&FrameworkOpStats> {
    if host.space().planes().iter().any(|p| p.kind().is_device()) || !host.modules().is_empty() {
        return None;
    }
    match host.framework_ops() {
        Some(Ok(ops)) if ops.device_total == Picos::ZERO && !ops.host.is_empty() => Some(ops),
        _ => None,
    }
}

/// A host whose device is TensorFlow's executor: TensorFlow on the CPU alone (no device plane,
/// no HLO), whose framework op table has host ops only. Its framework ops, the executor's busy
/// time in each step ([`FrameworkOpStats::executor_busy`]) and the steps' summed time; `None`
/// for every other host (JAX and XLA captures included) or without steps.
fn executor_device(host: &HostProfile) -> Option<(&FrameworkOpStats, ExecutorBusy, Picos)> {
    let ops = executor_framework_ops(host)?;
    let steps = host.steps().ok()?;
    if steps.steps.is_empty() {
        return None;
    }
    let windows: Vec<(Picos, Picos)> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
    let busy = FrameworkOpStats::executor_busy(host.space(), &windows).ok()?;
    let total = steps.steps.iter().map(|s| s.duration).sum();
    Some((ops, busy, total))
}

/// The first five framework ops of `rows` (one side of `stats`, already by self time) as the
/// health's slowest ops, named after `program`; with their kernel counts where `kernels`.
fn framework_slowest(
    stats: &FrameworkOpStats,
    rows: &[xlens_roofline::FrameworkOp],
    program: &str,
    kernels: bool,
) -> Vec<SlowOp> {
    rows.iter()
        .take(5)
        .map(|o| SlowOp {
            program: program.to_owned(),
            name: o.name.clone(),
            category: o.op_type.clone(),
            self_time_ms: o.self_time.as_ms_f64(),
            pct: 100.0 * stats.share_of_ops(o),
            kernels: kernels.then_some(o.kernels.len()),
        })
        .collect()
}

/// The health snapshot of one host.
pub fn host_metrics(host: &HostProfile) -> Metrics {
    host_metrics_with(host, executor_device(host).as_ref())
}

/// [`host_metrics`], given the host's [`executor_device`] (read once by the summary).
fn host_metrics_with(host: &HostProfile, executor: Option<&(&FrameworkOpStats, ExecutorBusy, Picos)>) -> Metrics {
    let mut m = Metrics::default();
    if let Ok(steps) = host.steps() {
        m.time_base = steps.source.key().to_owned();
    }
    m.device_duty_cycle_pct = host.duty_cycle_pct();
    if let Ok(steps) = host.steps()
        && let Some(stats) = steps.stats()
    {
        m.step_count = stats.count;
        m.step_time_ms_mean = Some(stats.mean_ms);
        m.step_time_ms_median = Some(stats.median_ms);
        m.step_time_ms_stddev = Some(stats.stddev_ms);
        m.step_time_ms_min = Some(stats.min_ms);
        m.step_time_ms_max = Some(stats.max_ms);
        m.loop_iteration_ms_mean = host.step_ms().filter(|&ms| ms > stats.mean_ms);
    }
    if let Ok(anatomy) = host.anatomy()
        && !anatomy.is_empty()
    {
        let total: Picos = anatomy.iter().map(|a| a.step_time).sum();
        let sum = |f: fn(&StepAnatomy) -> Picos| anatomy.iter().map(f).sum::<Picos>();
        let idle = sum(|a| a.idle);
        let host_time = sum(|a| a.host);
        let infeed = sum(|a| a.infeed_outfeed);
        // One partition of the step (docs/metrics.md): busy + idle = 100, the host wait a part
        // of idle, infeed/outfeed a part of busy.
        m.idle_pct = pct(idle + host_time, total);
        m.host_wait_pct = pct(host_time, total);
        m.device_busy_pct = pct(total.saturating_sub(idle + host_time), total);
        m.input_bound_pct = pct(infeed, total);
        m.exposed_communication_pct = pct(sum(|a| a.get(TimeClass::CollectiveExposed)), total);
    }
    if let Ok(profile) = host.op_profile() {
        if let Some(work) = profile.program_work() {
            set_roofline(&mut m, &work);
        }
        let op_time: Picos = profile.ops.iter().filter(|o| !o.has_inner_ops()).map(|o| o.self_time).sum();
        m.slowest_ops = profile
            .ops
            .iter()
            .filter(|o| !o.has_inner_ops())
            .take(5)
            .map(|o| SlowOp {
                program: profile.programs.get(&o.program_id).cloned().unwrap_or_else(|| o.program_id.to_string()),
                name: o.name.clone(),
                category: o.category.clone(),
                self_time_ms: o.self_time.as_ms_f64(),
                pct: pct(o.self_time, op_time).unwrap_or(0.0),
                kernels: None,
            })
            .collect();
    }
    // A GPU capture without HLO whose kernels name their TensorFlow op: the slowest ops are
    // those framework ops (XProf's framework-op statistics), not the kernels they launched.
    if let Some(fw) = device_framework_ops(host) {
        m.slowest_ops = framework_slowest(fw, &fw.device, FRAMEWORK_DEVICE_PROGRAM, true);
    }
    // TensorFlow on the CPU alone: the executor's threads are the device (as the host's XLA ops
    // are in a JAX CPU capture). Their ops are the op timeline the step anatomy above reads
    // (busy: the time they ran ops in the steps; the rest split into the step loop's host work
    // and idle). Where that timeline is not theirs, busy is still theirs and the rest of the
    // step the device waits on the rest of the host (the Python loop, the input pipeline).
    if host.host_ops().source != xlens_roofline::OpSource::TfExecutor
        && let Some(&(_, ref busy, total)) = executor
    {
        let busy: Picos = busy.busy.iter().copied().sum::<Picos>().min(total);
        let idle = total.saturating_sub(busy);
        m.device_busy_pct = pct(busy, total);
        m.idle_pct = pct(idle, total);
        m.host_wait_pct = pct(idle, total);
    }
    // Its slowest ops are the host's framework ops (the `tf.data` ones among them), with or
    // without steps: its op timeline holds the executor's ops only.
    if let Some(ops) = executor_framework_ops(host) {
        m.slowest_ops = framework_slowest(ops, &ops.host, EXECUTOR_PROGRAM, false);
    }
    if let Some(module) = host.main_module()
        && let Ok(Some(memory)) = module.hbm_memory_stats()
    {
        m.memory_peak_bytes = Some(memory.peak_bytes());
        if let Some(capacity) = host.chip().and_then(|c| c.hbm_capacity()) {
            let capacity = capacity.0;
            m.memory_capacity_bytes = Some(capacity);
            if capacity > 0 {
                m.memory_peak_pct = Some(100.0 * memory.peak_bytes() as f64 / capacity as f64);
            }
        }
    }
    m
}

/// The program roofline figures of `m`, from the work of a host or of a whole session.
pub(crate) fn set_roofline(m: &mut Metrics, work: &ProgramWork) {
    if !work.is_priced() {
        m.utilization_unknown = Some(NO_COST.to_owned());
        return;
    }
    let point: RooflinePoint = work.point();
    m.flops_utilization_pct = Some(100.0 * point.compute_utilization);
    m.xprof_flops_utilization_pct = Some(100.0 * work.xprof_flops_utilization());
    m.hbm_utilization_pct =
        (work.env.peak_hbm_bytes_per_s > 0.0).then(|| 100.0 * point.hbm_bytes_per_s / work.env.peak_hbm_bytes_per_s);
    m.roofline_efficiency_pct = Some(100.0 * point.efficiency);
    m.bound_by = Some(point.bound_by.label().to_owned());
    m.operational_intensity_flop_per_byte = Some(point.operational_intensity);
}

/// Why the utilisations of a profile without op costs are unknown ([`Metrics::utilization_unknown`]).
pub(crate) const NO_COST: &str = "no op of the profile carries a FLOP or byte cost (no HLO cost model: a TensorFlow capture \
                           without XLA, or kernels XLA did not compile): the utilisations are unknown, not zero";

fn charts(host: &HostProfile, page: bool) -> Charts {
    let kernels = if page { kernel_chart(host) } else { Vec::new() };
    let mut c = Charts { memory: memory_chart(host), kernels, ..Charts::default() };
    let Ok(profile) = host.op_profile() else { return c };
    let mut cats: Vec<(String, f64)> = profile.categories().into_iter().map(|(k, v)| (k, v.as_ms_f64())).collect();
    cats.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    c.categories_ms = cats;
    c.top_ops = top_ops(profile);
    if let Some(env) = profile.perf_env {
        c.roofline = roofline_dots(profile);
        c.program_dot = profile.program_work().filter(ProgramWork::is_priced).map(|w| {
            let p = w.point();
            dot("Program", "program", w.time.as_ms_f64(), w.flops, &p)
        });
        c.compute_roofs = compute_roofs(&env, host.chip());
        c.memory_roofs = memory_roofs(&env, host.chip());
    }
    if let Some(Ok(fw)) = host.framework_ops() {
        framework_charts(&mut c, fw);
    }
    // The slowest ops of a GPU capture without HLO are its framework device ops (as in the
    // text and the JSON): they move from the framework section to the op table.
    if device_framework_ops(host).is_some() {
        c.top_ops = std::mem::take(&mut c.device_framework_ops)
            .into_iter()
            .map(|o| TopOp { program: FRAMEWORK_DEVICE_PROGRAM.to_owned(), ..o })
            .collect();
        if let Some(note) = &mut c.framework_ops {
            note.push_str(" The host's are listed here, the device's in the slowest ops below.");
        }
    }
    // Likewise the host's framework ops on TensorFlow on the CPU alone, whose device is the
    // executor: its op profile holds the executor's ops only, the `tf.data` ones not.
    if executor_framework_ops(host).is_some() {
        c.top_ops = std::mem::take(&mut c.host_framework_ops)
            .into_iter()
            .map(|o| TopOp { program: EXECUTOR_PROGRAM.to_owned(), ..o })
            .collect();
        if let Some(note) = &mut c.framework_ops {
            note.push_str(" They are the slowest ops below (the executor's ops and the input pipeline's).");
        }
    }
    c
}

/// The op charts of a host without HLO: its framework ops instead of its kernels.
fn framework_charts(c: &mut Charts, fw: &xlens_roofline::FrameworkOpStats) {
    if fw.is_empty() {
        return;
    }
    let rows = |ops: &[xlens_roofline::FrameworkOp]| -> Vec<TopOp> {
        ops.iter()
            .take(TOP_OPS)
            .map(|o| TopOp {
                program: o.kernels.iter().map(|k| k.0.as_str()).take(3).collect::<Vec<_>>().join("; "),
                name: o.name.clone(),
                category: o.op_type.clone(),
                self_time_ms: o.self_time.as_ms_f64(),
                pct: 100.0 * fw.share_of_ops(o),
                flops_per_s: None,
                bound: None,
            })
            .collect()
    };
    c.device_framework_ops = rows(&fw.device);
    c.host_framework_ops = rows(&fw.host);
    let source = match fw.attribution {
        xlens_roofline::DeviceAttribution::Level0 => " (named by the \"level 0\" stat of TensorFlow 2.2–2.4)",
        _ => "",
    };
    c.framework_ops = Some(format!(
        "No HLO in this profile: the ops are TensorFlow's, each kernel attributed to the op that launched it{source}, as XProf's framework op statistics count them."
    ));
}

/// The device memory of the host's programs: each one's allocations as `xlens memory` lists
/// them ([`xlens_hlo::Module::peak_allocations`]), its rows cut to [`MEMORY_ROWS`].
fn memory_chart(host: &HostProfile) -> MemoryChart {
    let mut c = MemoryChart {
        has_hlo: !host.modules().is_empty(),
        capacity_bytes: host.chip().and_then(|c| c.hbm_capacity()).map(|b| b.0),
        ..MemoryChart::default()
    };
    for m in host.modules() {
        match m.peak_allocations() {
            Ok(Some(mut allocations)) => {
                let more_rows = allocations.rows.len().saturating_sub(MEMORY_ROWS);
                allocations.rows.truncate(MEMORY_ROWS);
                let peak_bytes = m.hbm_memory_stats().ok().flatten().map_or(0, |s| s.peak_bytes());
                c.programs.push(ProgramMemory {
                    program_id: m.program_id(),
                    module_name: m.display_name(),
                    allocations,
                    more_rows,
                    peak_bytes,
                });
            }
            Ok(None) => {}
            Err(e) => c.failed.push(e.to_string()),
        }
    }
    c.programs.sort_by(|a, b| (a.program_id, &a.module_name).cmp(&(b.program_id, &b.module_name)));
    c
}

/// The host's GPU kernels as `xlens kernels` reads them ([`HostProfile::kernel_stats`], read
/// beside the analyses when the scan draws a page), cut to [`KERNEL_ROWS`]; none off GPUs, or when the stream lines
/// cannot be read (their errors are the host's read errors).
fn kernel_chart(host: &HostProfile) -> Vec<KernelChart> {
    let Some(mut stats) = host.kernel_stats().cloned() else { return Vec::new() };
    let (kernel_time, kernel_count) = (stats.kernel_time(), stats.kernels.len());
    let launches = stats.kernels.iter().map(|k| k.occurrences).sum();
    stats.kernels.truncate(KERNEL_ROWS);
    vec![KernelChart { host: host.name().to_owned(), stats, kernel_time, kernel_count, launches }]
}

/// The session's memory chart: every host's programs once (the first host's, in host order,
/// as `xlens memory` reads a session), by program id then name; the capacity of the host the
/// health figures describe, else the first known.
pub(crate) fn session_memory(hosts: &[HostSummary], pace: Option<&HostSummary>) -> MemoryChart {
    let mut c = MemoryChart {
        has_hlo: hosts.iter().any(|h| h.charts.memory.has_hlo),
        capacity_bytes: pace
            .and_then(|h| h.charts.memory.capacity_bytes)
            .or_else(|| hosts.iter().find_map(|h| h.charts.memory.capacity_bytes)),
        ..MemoryChart::default()
    };
    let mut seen = std::collections::BTreeSet::new();
    for h in hosts {
        for p in &h.charts.memory.programs {
            if seen.insert((p.program_id, p.module_name.clone())) {
                c.programs.push(p.clone());
            }
        }
        for f in &h.charts.memory.failed {
            if !c.failed.contains(f) {
                c.failed.push(f.clone());
            }
        }
    }
    c.programs.sort_by(|a, b| (a.program_id, &a.module_name).cmp(&(b.program_id, &b.module_name)));
    c
}

/// Ops in the page's top-ops table.
const TOP_OPS: usize = 10;
/// Ops placed on the roofline chart.
const ROOFLINE_OPS: usize = 20;

fn top_ops(profile: &OpProfile) -> Vec<TopOp> {
    let leaves = || profile.ops.iter().filter(|o| !o.has_inner_ops());
    let op_time: Picos = leaves().map(|o| o.self_time).sum();
    leaves()
        .take(TOP_OPS)
        .map(|o| TopOp {
            program: profile.programs.get(&o.program_id).cloned().unwrap_or_else(|| o.program_id.to_string()),
            name: o.name.clone(),
            category: o.category.clone(),
            self_time_ms: o.self_time.as_ms_f64(),
            pct: pct(o.self_time, op_time).unwrap_or(0.0),
            flops_per_s: (o.flops > 0.0 && o.time.0 > 0).then(|| o.flops_per_s()),
            bound: profile
                .roofline(o)
                .filter(|p| p.bound_by != xlens_roofline::BoundBy::Unknown)
                .map(|p| p.bound_by.label().to_owned()),
        })
        .collect()
}

fn roofline_dots(profile: &OpProfile) -> Vec<RooflineDot> {
    profile
        .ops
        .iter()
        .filter(|o| !o.has_inner_ops() && o.flops > 0.0 && o.bytes.total() > 0.0)
        .take(ROOFLINE_OPS)
        .filter_map(|o| {
            let p = profile.roofline(o)?;
            Some(dot(&o.name, &o.category, o.self_time.as_ms_f64(), o.flops, &p))
        })
        .collect()
}

fn dot(name: &str, category: &str, self_time_ms: f64, flops: f64, p: &RooflinePoint) -> RooflineDot {
    // A compute-bound point's bottleneck intensity is its all-bytes one; with FLOPs but no bytes of
    // the bounding memory it has none, and sits at its all-bytes intensity.
    let intensity = if p.bottleneck_operational_intensity > 0.0 || flops <= 0.0 {
        p.bottleneck_operational_intensity
    } else {
        p.operational_intensity
    };
    RooflineDot {
        name: name.to_owned(),
        category: category.to_owned(),
        self_time_ms,
        intensity,
        all_bytes_intensity: p.operational_intensity,
        flops_per_s: p.flops_per_s,
        bound: p.bound_by.label().to_owned(),
        efficiency_pct: 100.0 * p.efficiency,
    }
}

/// The compute roofs of a core: the profile's peak, then the chip's lower-precision peaks that
/// lie above it, scaled to the core as the peak is.
fn compute_roofs(env: &PerfEnv, chip: Option<&Chip>) -> Vec<Roof> {
    let mut roofs = vec![Roof { label: "peak".to_owned(), per_s: env.peak_flops_per_s }];
    if let Some(spec) = chip.and_then(Chip::spec) {
        let bf16 = spec.peak_bf16.per_s();
        for (label, peak) in [("fp8", spec.peak_fp8), ("int8", spec.peak_int8)] {
            let Some(peak) = peak.map(|p| p.per_s()).filter(|_| bf16 > 0.0) else { continue };
            let per_s = env.peak_flops_per_s * peak / bf16;
            if per_s > env.peak_flops_per_s * 1.01 && roofs.iter().all(|r| (r.per_s - per_s).abs() > per_s * 1e-6) {
                roofs.push(Roof { label: label.to_owned(), per_s });
            }
        }
    }
    roofs
}

/// The memory roofs of a core: HBM, then on-chip reads and writes (named after the memory the
/// chip has: CMEM, VMEM or GPU shared memory).
fn memory_roofs(env: &PerfEnv, chip: Option<&Chip>) -> Vec<Roof> {
    let on_chip = match chip.map(Chip::peaks) {
        Some(p) if p.cmem_read.is_some() || p.cmem_write.is_some() => "CMEM",
        Some(p) if p.vmem_read.is_some() || p.vmem_write.is_some() => "VMEM",
        Some(p) if p.sram_read.is_some() || p.sram_write.is_some() => "Shm/L1",
        _ => "on-chip",
    };
    [
        ("HBM".to_owned(), env.peak_hbm_bytes_per_s),
        (format!("{on_chip} read"), env.peak_onchip_read_bytes_per_s),
        (format!("{on_chip} write"), env.peak_onchip_write_bytes_per_s),
    ]
    .into_iter()
    .filter(|(_, per_s)| *per_s > 0.0)
    .map(|(label, per_s)| Roof { label, per_s })
    .collect()
}

/// Each host's step series: its step times, each with its anatomy when the host has one per step.
pub(crate) fn step_series(hosts: &[HostSummary]) -> Vec<StepSeries> {
    hosts
        .iter()
        .filter(|h| !h.step_times.is_empty())
        .map(|h| {
            let with_anatomy = h.anatomy.len() == h.step_times.len();
            let steps = h
                .step_times
                .iter()
                .enumerate()
                .map(|(i, (name, t))| StepBar {
                    name: name.clone(),
                    step_ms: t.as_ms_f64(),
                    anatomy_ms: with_anatomy.then(|| anatomy_ms(&h.anatomy[i])),
                })
                .collect();
            StepSeries { host: h.name.clone(), steps }
        })
        .collect()
}

fn anatomy_ms(a: &StepAnatomy) -> [f64; ANATOMY_CLASSES.len()] {
    [a.matmul, a.vector, a.data_formatting, a.collective_exposed, a.infeed_outfeed, a.host, a.idle]
        .map(Picos::as_ms_f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{report_of, testdata};

    /// The highest roof over `intensity`: min(peak, bandwidth × intensity), over every roof.
    fn roof_at(c: &Charts, intensity: f64) -> f64 {
        let top = c.compute_roofs.iter().map(|r| r.per_s).fold(0.0, f64::max);
        c.memory_roofs.iter().map(|m| (m.per_s * intensity).min(top)).fold(0.0, f64::max)
    }

    #[test]
    fn roofline_dots_sit_at_xprofs_bottleneck_intensity() {
        let c = report_of("device_idle", &testdata("tpu/tpu_basic")).charts;
        let conv = c.roofline.iter().find(|d| d.name == "convolution.1").unwrap();
        // XProf's roofline: operational intensity 26.47 over all memories, 225 per HBM byte
        // (HBM-bound), and its chart places the op at 225.
        assert!((conv.intensity - 225.0).abs() < 1e-9, "{conv:?}");
        assert!((conv.all_bytes_intensity - 26.470_588).abs() < 1e-5, "{conv:?}");
        assert_eq!(conv.bound, "HBM");
        let program = c.program_dot.as_ref().unwrap();
        assert!((program.intensity - 98.740_13).abs() < 1e-4, "{program:?}");
        let labels: Vec<&str> = c.memory_roofs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["HBM", "VMEM read", "VMEM write"]);
        assert_eq!(c.compute_roofs[0].per_s, 197e12);
    }

    #[test]
    fn every_dot_is_under_a_drawn_roof() {
        for dir in ["tpu/tpu_basic", "tpu/tpu_straggler", "tpu/tpu_vpu_stretch", "tpu/tpu_padding_waste"] {
            let c = report_of("device_idle", &testdata(dir)).charts;
            assert!(!c.roofline.is_empty(), "{dir}");
            for d in c.roofline.iter().chain(&c.program_dot).filter(|d| d.efficiency_pct <= 100.0) {
                let roof = roof_at(&c, d.intensity);
                assert!(
                    d.flops_per_s <= roof * (1.0 + 1e-9),
                    "{dir}: {} at {} FLOP/s above {roof}",
                    d.name,
                    d.flops_per_s
                );
            }
        }
    }

    #[test]
    fn step_series_has_one_host_each_with_its_anatomy() {
        let r = report_of("straggler_core", &testdata("tpu/tpu_straggler_host"));
        let hosts: Vec<&str> = r.charts.step_series.iter().map(|s| s.host.as_str()).collect();
        assert_eq!(hosts, ["host0", "host1"]);
        for s in &r.charts.step_series {
            assert_eq!(s.steps.len(), 8);
            for step in &s.steps {
                let a = step.anatomy_ms.unwrap();
                assert!((a.iter().sum::<f64>() - step.step_ms).abs() < 0.05 * step.step_ms, "{step:?}");
            }
        }
        assert_eq!(r.charts.ops_host.as_deref(), Some("host1"));
        assert!(r.charts.top_ops.len() == TOP_OPS && r.charts.top_ops[0].bound.as_deref() == Some("Compute"));
    }
}
