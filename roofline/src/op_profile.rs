//! The op profile: per HLO op, over all cores and steps, the time, self time, occurrences, FLOPs,
//! bytes, rates and roofline bound, with the same numbers XProf's op profile and roofline tools
//! give for TPU profiles (facts §4).
//!
//! How XProf counts (and so do we), per TensorCore plane:
//! - events of the `XLA Ops` line, keyed by the metadata stats (`program_id`, `symbol_id`);
//!   events missing either, or with `symbol_id` 0, are dropped;
//! - time is the device timespan; self time is time minus the direct children's time (nesting by
//!   span); DVFS-normalised time multiplies each event by its `Time Scale Multiplier`;
//! - FLOPs and bytes are per-occurrence metadata values times the occurrences; bytes are split
//!   by `memory_access_breakdown` into HBM and on-chip;
//! - the core's total time spans its first to last op or step event; the rest of it, after the
//!   ops' self time, is `IDLE`.
//!
//! Cores are combined by (program, op name): times, FLOPs and bytes add up, so every rate is a
//! per-core rate (Σ FLOPs ÷ Σ time).

use std::collections::BTreeMap;

use xlens_xplane::{Picos, Space, names};

use crate::device::{DeviceStatIds, MemoryBytes, OpMetadata, op_metadata};
use crate::perf_env::PerfEnv;
use crate::timeline::DeviceTimeline;

/// Categories of ops that contain other ops; their own time is not counted in program totals.
pub const CATEGORIES_WITH_INNER_OPS: &[&str] = &["call", "conditional", "while", "megacore fusion"];

/// The category of time no op accounts for.
pub const IDLE: &str = "IDLE";

/// One HLO op, combined over every core and step.
#[derive(Clone, Debug, PartialEq)]
pub struct OpStats {
    /// The program (`program_id`) the op belongs to.
    pub program_id: u64,
    /// Op name (instruction name, e.g. `fusion.12`).
    pub name: String,
    /// Long name (HLO text).
    pub long_name: String,
    /// XProf category (`hlo_category`), e.g. `convolution fusion`.
    pub category: String,
    /// Executions over all cores and steps.
    pub occurrences: u64,
    /// Total time, children included.
    pub time: Picos,
    /// Time minus the children's time.
    pub self_time: Picos,
    /// Time scaled by the DVFS time-scale multiplier of each event.
    pub normalized_time: Picos,
    /// FLOPs over all executions: the cost model's per execution (a library GEMM or attention
    /// call the GPU cost model prices at nothing priced from its shapes) times the executions,
    /// not the launches (a cuBLAS GEMM's memset kernel carries its name but does no GEMM work).
    /// What the op really did, so its rate never exceeds the device's peak.
    pub flops: f64,
    /// FLOPs as XProf's op profile counts them: the cost model's per execution times every
    /// launch that carries the op's name, library calls at 0. Equal to `flops` on TPU and CPU.
    pub xprof_flops: f64,
    /// Model FLOPs over all occurrences (FLOPs when the profile has none).
    pub model_flops: f64,
    /// Bytes over all executions (as `flops`: not per launch), by memory.
    pub bytes: MemoryBytes,
    /// Bytes as XProf's op profile counts them (per launch, as `xprof_flops`).
    pub xprof_bytes: MemoryBytes,
    /// Cores the op ran on.
    pub num_cores: u32,
    /// `file:line` of the op, when the profile records it.
    pub source: Option<String>,
    /// Framework op path, when recorded.
    pub tf_op: Option<String>,
}

impl OpStats {
    /// True for ops that contain other ops (`while`, `call`, ...): their self time is overhead and
    /// they are left out of program and category totals.
    pub fn has_inner_ops(&self) -> bool {
        CATEGORIES_WITH_INNER_OPS.contains(&self.category.as_str())
    }

    /// True for the start of an asynchronous op (`all-gather-start.5`, `copy-start.1`,
    /// `reduce-scatter-start`, `async-start`): the op returns at once and its data moves while
    /// other ops run, until its `-done`; its bytes over its own time are no rate.
    ///
    /// ```
    /// use xlens_roofline::OpProfile;
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let profile = OpProfile::from_tpu(&space)?;
    /// let op = |name: &str| profile.ops.iter().find(|o| o.name == name).unwrap();
    /// assert!(op("all-gather-start.5").is_async_start() && !op("fusion.6").is_async_start());
    /// assert!(profile.roofline(op("all-gather-start.5")).is_none());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_async_start(&self) -> bool {
        let base = match self.name.rsplit_once('.') {
            Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
            _ => self.name.as_str(),
        };
        base.ends_with("-start")
    }

    /// Achieved FLOP/s over the op's total time (per core).
    pub fn flops_per_s(&self) -> f64 {
        rate(self.flops, self.time)
    }

    /// Achieved HBM bytes/s over the op's total time (per core).
    pub fn hbm_bytes_per_s(&self) -> f64 {
        rate(self.bytes.hbm, self.time)
    }

    /// FLOPs per byte accessed (all memories), 0 without bytes.
    pub fn operational_intensity(&self) -> f64 {
        let b = self.bytes.total();
        if b > 0.0 { self.flops / b } else { 0.0 }
    }
}

fn rate(amount: f64, time: Picos) -> f64 {
    if time.0 > 0 { amount / time.as_secs_f64() } else { 0.0 }
}

/// What limits an op, from its utilisation of each resource (XProf's `bound_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BoundBy {
    /// No FLOPs and no bytes: nothing to measure.
    Unknown,
    /// The matrix/vector units.
    Compute,
    /// HBM bandwidth.
    Hbm,
    /// On-chip memory read bandwidth (VMEM/CMEM).
    OnChipRead,
    /// On-chip memory write bandwidth.
    OnChipWrite,
}

impl BoundBy {
    /// XProf's label: `Unknown`, `Compute`, `HBM`, `VMEM Read`/`CMEM Read`, ...; on-chip labels
    /// use VMEM, the memory the TPU catalogue exposes when CMEM is absent.
    pub fn label(self) -> &'static str {
        match self {
            BoundBy::Unknown => "Unknown",
            BoundBy::Compute => "Compute",
            BoundBy::Hbm => "HBM",
            BoundBy::OnChipRead => "VMEM Read",
            BoundBy::OnChipWrite => "VMEM Write",
        }
    }
}

/// The roofline position of an op (or a program) on a device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RooflinePoint {
    /// Achieved FLOP/s.
    pub flops_per_s: f64,
    /// FLOPs per byte (all memories).
    pub operational_intensity: f64,
    /// FLOPs per byte of the resource that bounds it (XProf's `bottleneck_operational_intensity`,
    /// the x of XProf's roofline chart): per HBM byte when HBM-bound, per on-chip byte read
    /// (written) when bound by on-chip reads (writes), per byte of all memories when
    /// compute-bound, 0 when unknown. At this intensity the point sits under the roof of the
    /// memory that bounds it.
    pub bottleneck_operational_intensity: f64,
    /// Achieved HBM bytes/s.
    pub hbm_bytes_per_s: f64,
    /// Utilisation of the compute peak (DVFS-normalised when the profile has DVFS factors).
    pub compute_utilization: f64,
    /// Largest memory utilisation (HBM or on-chip).
    pub memory_utilization: f64,
    /// What limits it.
    pub bound_by: BoundBy,
    /// max(compute, memory) utilisation; may exceed 1 when the reported peaks are conservative.
    pub efficiency: f64,
}

/// A program's FLOPs and bytes over its profiled time on one host, with the host's peaks.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ProgramWork {
    /// FLOPs of the innermost ops.
    pub flops: f64,
    /// The same as XProf counts them ([`OpStats::xprof_flops`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub xprof_flops: f64,
    /// Their bytes, by memory.
    pub bytes: MemoryBytes,
    /// The same as XProf counts them ([`OpStats::xprof_bytes`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub xprof_bytes: MemoryBytes,
    /// The profiled time (every core's, summed).
    pub time: Picos,
    /// The peaks.
    pub env: PerfEnv,
}

impl ProgramWork {
    /// True when some op carries a cost (FLOPs or bytes, by xlens's count or XProf's). Without
    /// one (a TensorFlow capture without XLA, whose kernels have no HLO cost model) the
    /// utilisations and the bound are unknown, not zero.
    pub fn is_priced(&self) -> bool {
        self.flops > 0.0 || self.xprof_flops > 0.0 || self.bytes.total() > 0.0 || self.xprof_bytes.total() > 0.0
    }

    /// Its point on the roofline.
    pub fn point(&self) -> RooflinePoint {
        roofline_point(self.flops, &self.bytes, self.time, self.time, &self.env)
    }

    /// The point XProf's overview and roofline place this work at: its FLOPs and bytes as XProf
    /// counts them ([`OpStats::xprof_flops`]), which can exceed the peaks where launches that did
    /// no work count as executions: why [`point`](Self::point) does not use them.
    pub fn xprof_point(&self) -> RooflinePoint {
        roofline_point(self.xprof_flops, &self.xprof_bytes, self.time, self.time, &self.env.xprof())
    }

    /// The FLOP utilisation (`0..=1` of the peak) XProf reports for this work
    /// ([`xprof_point`](Self::xprof_point)).
    pub fn xprof_flops_utilization(&self) -> f64 {
        self.xprof_point().compute_utilization
    }

    /// The work of several hosts as one, as XProf's all-hosts view adds them up (the first
    /// host's peaks); `None` for no hosts.
    pub fn combine(works: &[ProgramWork]) -> Option<ProgramWork> {
        let first = works.first()?;
        let mut all = ProgramWork {
            flops: 0.0,
            xprof_flops: 0.0,
            bytes: MemoryBytes::default(),
            xprof_bytes: MemoryBytes::default(),
            time: Picos::ZERO,
            env: first.env,
        };
        for w in works {
            all.flops += w.flops;
            all.xprof_flops += w.xprof_flops;
            all.xprof_bytes.add(&w.xprof_bytes);
            all.bytes.add(&w.bytes);
            all.time += w.time;
        }
        Some(all)
    }
}

/// Places an amount of work on the roofline of `env` (XProf's `bound_by` rule: the resource
/// with the largest utilisation wins; ties keep the earlier of compute, HBM, on-chip read, write).
pub fn roofline_point(
    flops: f64,
    bytes: &MemoryBytes,
    time: Picos,
    normalized_time: Picos,
    env: &PerfEnv,
) -> RooflinePoint {
    let flops_per_s = rate(flops, time);
    let dvfs = if normalized_time.0 > 0 && time.0 > 0 { time.0 as f64 / normalized_time.0 as f64 } else { 1.0 };
    let util = |r: f64, peak: f64| if peak > 0.0 { r / peak } else { 0.0 };
    let mut bound_by = BoundBy::Unknown;
    let mut best = 0.0;
    let compute = util(flops_per_s * dvfs, env.peak_flops_per_s);
    let mut memory = 0.0f64;
    let candidates = [
        (BoundBy::Compute, compute, true),
        (BoundBy::Hbm, util(rate(bytes.hbm, time), env.peak_hbm_bytes_per_s), false),
        (BoundBy::OnChipRead, util(rate(bytes.onchip_read, time), env.peak_onchip_read_bytes_per_s), false),
        (BoundBy::OnChipWrite, util(rate(bytes.onchip_write, time), env.peak_onchip_write_bytes_per_s), false),
    ];
    for (kind, u, is_compute) in candidates {
        if !is_compute {
            memory = memory.max(u);
        }
        if u > best {
            best = u;
            bound_by = kind;
        }
    }
    let per = |b: f64| if b > 0.0 { flops / b } else { 0.0 };
    let bottleneck_bytes = match bound_by {
        BoundBy::Unknown => 0.0,
        BoundBy::Compute => bytes.total(),
        BoundBy::Hbm => bytes.hbm,
        BoundBy::OnChipRead => bytes.onchip_read,
        BoundBy::OnChipWrite => bytes.onchip_write,
    };
    RooflinePoint {
        flops_per_s,
        operational_intensity: per(bytes.total()),
        bottleneck_operational_intensity: per(bottleneck_bytes),
        hbm_bytes_per_s: rate(bytes.hbm, time),
        compute_utilization: compute,
        memory_utilization: memory,
        bound_by,
        efficiency: best,
    }
}

/// The op profile of one host's devices.
#[derive(Clone, Debug, PartialEq)]
pub struct OpProfile {
    /// The device type (`device_type_string`), when recorded.
    pub device_type: Option<String>,
    /// Cores analysed.
    pub cores: u32,
    /// Per-core peaks, when the profile reports them.
    pub perf_env: Option<PerfEnv>,
    /// Program names by id (`module(program_id)` names from `XLA Modules` / `/host:metadata`).
    pub programs: BTreeMap<u64, String>,
    /// Every op, sorted by self time (largest first), then program and name.
    pub ops: Vec<OpStats>,
    /// Σ over cores of each core's profiled span (first to last op or step event).
    pub total_time: Picos,
    /// Time in no op: `total_time` minus every op's self time.
    pub idle_time: Picos,
}

/// One core's part of the TPU op profile ([`OpProfile::from_timeline`]): its ops keyed by
/// (program, symbol), its time, and the programs its module events name.
struct CoreTable {
    ops: BTreeMap<(u64, u64), OpStats>,
    time: Picos,
    programs: BTreeMap<u64, String>,
}

impl OpProfile {
    /// Builds the op profile of the TPU TensorCores of a space (empty when it has none).
    ///
    /// ```
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// use xlens_roofline::OpProfile;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let profile = OpProfile::from_tpu(&space)?;
    /// let conv = profile.ops.iter().find(|o| o.name == "convolution.1").unwrap();
    /// assert_eq!(conv.occurrences, 24); // 6 steps on 4 cores
    /// assert_eq!(profile.categories()["convolution fusion"], conv.self_time);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_tpu(space: &Space) -> xlens_xplane::Result<OpProfile> {
        Ok(OpProfile::from_timeline(space, &DeviceTimeline::build(space)?))
    }

    /// Builds the op profile from an already walked device timeline of `space`.
    pub fn from_timeline(space: &Space, timeline: &DeviceTimeline) -> OpProfile {
        use rayon::prelude::*;
        // Per core, in parallel (each reads its plane's op metadata): ops keyed by (program_id,
        // symbol_id), events missing either dropped; its time; its programs. Merged below in
        // core order, as one pass over the cores would.
        let per_core: Vec<Option<CoreTable>> = timeline
            .cores
            .par_iter()
            .with_max_len(1)
            .map(|core| {
                let plane = space.planes().get(core.plane_index)?;
                let ids = DeviceStatIds::of(plane);
                let meta = op_metadata(plane, &ids);
                let mut by_key: BTreeMap<(u64, u64), OpStats> = BTreeMap::new();
                for (pos, agg) in core.ops.iter().enumerate() {
                    if agg.occurrences == 0 {
                        continue;
                    }
                    let Some(m) = plane.event_metadata().get(pos).and_then(|e| meta.get(&e.id())) else { continue };
                    let (Some(program_id), Some(symbol_id)) = (m.program_id, m.symbol_id) else { continue };
                    if symbol_id == 0 {
                        continue;
                    }
                    let entry = by_key.entry((program_id, symbol_id)).or_insert_with(|| empty_stats(program_id, m));
                    let n = agg.occurrences as f64;
                    entry.occurrences += agg.occurrences;
                    entry.time += agg.time;
                    entry.self_time += agg.self_time;
                    entry.normalized_time += agg.normalized_time;
                    entry.flops += m.flops * n;
                    entry.xprof_flops += m.flops * n;
                    entry.model_flops += if m.model_flops > 0.0 { m.model_flops * n } else { m.flops * n };
                    entry.bytes.add(&m.memory.scaled(n));
                    entry.xprof_bytes.add(&m.memory.scaled(n));
                }
                let op_time: Picos = by_key.values().map(|o| o.self_time).sum();
                let span = core.span.map_or(Picos::ZERO, |(a, b)| b - a);
                let mut programs: BTreeMap<u64, String> = BTreeMap::new();
                for &(_, _, pos) in &core.modules {
                    let Some(name) = plane.event_metadata().get(pos).map(|m| m.name()) else { continue };
                    if let Some(id) = program_id_of_module_name(name) {
                        programs.entry(id).or_insert_with(|| name.to_owned());
                    }
                }
                Some(CoreTable { ops: by_key, time: span.max(op_time), programs })
            })
            .collect();
        let mut combined: BTreeMap<(u64, String), OpStats> = BTreeMap::new();
        let mut total_time = Picos::ZERO;
        let mut programs = BTreeMap::new();
        for CoreTable { ops: by_key, time, programs: core_programs } in per_core.into_iter().flatten() {
            total_time += time;
            for (id, name) in core_programs {
                programs.entry(id).or_insert(name);
            }
            for op in by_key.into_values() {
                match combined.entry((op.program_id, op.name.clone())) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(op);
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        let c = o.get_mut();
                        c.occurrences += op.occurrences;
                        c.time += op.time;
                        c.self_time += op.self_time;
                        c.normalized_time += op.normalized_time;
                        c.flops += op.flops;
                        c.xprof_flops += op.xprof_flops;
                        c.model_flops += op.model_flops;
                        c.bytes.add(&op.bytes);
                        c.xprof_bytes.add(&op.xprof_bytes);
                        c.num_cores += 1;
                    }
                }
            }
        }
        let mut ops: Vec<OpStats> = combined.into_values().collect();
        ops.sort_by(|a, b| {
            b.self_time.cmp(&a.self_time).then(a.program_id.cmp(&b.program_id)).then(a.name.cmp(&b.name))
        });
        let op_time: Picos = ops.iter().map(|o| o.self_time).sum();
        let first = timeline.cores.first().and_then(|c| space.planes().get(c.plane_index));
        let device_type = first
            .and_then(|p| p.stat_by_name(names::stat::DEVICE_TYPE_STRING))
            .and_then(|s| s.as_str().map(|s| s.into_owned()));
        OpProfile {
            device_type,
            cores: timeline.cores.len() as u32,
            perf_env: first.and_then(PerfEnv::from_plane),
            programs,
            idle_time: total_time.saturating_sub(op_time),
            total_time,
            ops,
        }
    }

    /// Self time per category over ops without inner ops, plus `IDLE` (the category pie).
    pub fn categories(&self) -> BTreeMap<String, Picos> {
        let mut out: BTreeMap<String, Picos> = BTreeMap::new();
        for op in self.ops.iter().filter(|o| !o.has_inner_ops()) {
            *out.entry(op.category.clone()).or_default() += op.self_time;
        }
        if self.idle_time.0 > 0 {
            *out.entry(IDLE.to_owned()).or_default() += self.idle_time;
        }
        out
    }

    /// The roofline point of an op on this profile's devices: `None` without peaks, for the
    /// start of an asynchronous op ([`OpStats::is_async_start`]), and for an op whose FLOPs or
    /// bytes over its time exceed the device's peaks ([`OpProfile::above_peak`]): a rate no
    /// device can reach says the profile's counts for the op are wrong, not how the op ran.
    pub fn roofline(&self, op: &OpStats) -> Option<RooflinePoint> {
        let env = self.perf_env.as_ref()?;
        if op.is_async_start() {
            return None;
        }
        Some(roofline_point(op.flops, &op.bytes, op.time, op.normalized_time, env)).filter(|p| p.efficiency <= 1.0)
    }

    /// The roofline point XProf's op profile and roofline tools give the op: its FLOPs and bytes
    /// over its time against the peaks XProf uses ([`PerfEnv::xprof`]), async starts and rates
    /// above the peaks included (`None` without peaks). For comparing with XProf; the report's
    /// figures use [`OpProfile::roofline`].
    pub fn xprof_roofline(&self, op: &OpStats) -> Option<RooflinePoint> {
        let env = self.perf_env.as_ref()?.xprof();
        Some(roofline_point(op.xprof_flops, &op.xprof_bytes, op.time, op.normalized_time, &env))
    }

    /// The op's FLOP/s and HBM bytes/s over its time, when they mean something: `None` for the
    /// start of an asynchronous op and for an op above the device's peaks (see
    /// [`OpProfile::roofline`]); without peaks (a CPU), always the rates.
    pub fn rates(&self, op: &OpStats) -> Option<(f64, f64)> {
        let plausible = match self.perf_env {
            Some(_) => self.roofline(op).is_some(),
            None => !op.is_async_start(),
        };
        plausible.then(|| (op.flops_per_s(), op.hbm_bytes_per_s()))
    }

    /// The ops (not async starts) whose FLOPs or bytes over their time exceed the device's
    /// peaks, with the largest utilisation (above 1) and the resource it is of, in profile order:
    /// their counts in the profile are wrong, and [`OpProfile::roofline`] leaves them out.
    ///
    /// ```
    /// use xlens_roofline::{BoundBy, OpProfile};
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let profile = OpProfile::from_tpu(&space)?;
    /// // The synthetic fixture gives `transpose.4` 16 MB in 9 us on a v5e core (819 GB/s).
    /// let above = profile.above_peak();
    /// let (op, util, by) = above.iter().find(|(o, ..)| o.name == "transpose.4").unwrap();
    /// assert!(*util > 2.0 && *by == BoundBy::Hbm && profile.roofline(op).is_none());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn above_peak(&self) -> Vec<(&OpStats, f64, BoundBy)> {
        let Some(env) = self.perf_env.as_ref() else { return Vec::new() };
        self.ops
            .iter()
            .filter(|op| !op.is_async_start())
            .filter_map(|op| {
                let p = roofline_point(op.flops, &op.bytes, op.time, op.normalized_time, env);
                (p.efficiency > 1.0).then_some((op, p.efficiency, p.bound_by))
            })
            .collect()
    }

    /// The program-level roofline: innermost ops' FLOPs and bytes over the whole profiled time,
    /// idle included (XProf's "Program" record with infeed and outfeed included).
    pub fn program_roofline(&self) -> Option<RooflinePoint> {
        self.program_point(|_| true)
    }

    /// The program-level roofline without infeed and outfeed ops, and without their time
    /// (XProf's second "Program" record): what the device achieves when it is not waiting on the host.
    pub fn program_roofline_excluding_infeed_outfeed(&self) -> Option<RooflinePoint> {
        self.program_point(|op| !matches!(op.category.as_str(), "infeed" | "outfeed"))
    }

    fn program_point(&self, keep: impl Fn(&OpStats) -> bool) -> Option<RooflinePoint> {
        self.program_work_where(keep).map(|w| w.point())
    }

    /// The program's work over the whole profiled time (what [`OpProfile::program_roofline`]
    /// places), to combine hosts into a session's roofline with [`ProgramWork::combine`].
    pub fn program_work(&self) -> Option<ProgramWork> {
        self.program_work_where(|_| true)
    }

    fn program_work_where(&self, keep: impl Fn(&OpStats) -> bool) -> Option<ProgramWork> {
        let env = *self.perf_env.as_ref()?;
        let (mut flops, mut xprof_flops) = (0.0, 0.0);
        let (mut bytes, mut xprof_bytes) = (MemoryBytes::default(), MemoryBytes::default());
        let mut time = self.total_time;
        for op in self.ops.iter().filter(|o| !o.has_inner_ops()) {
            if keep(op) {
                flops += op.flops;
                xprof_flops += op.xprof_flops;
                bytes.add(&op.bytes);
                xprof_bytes.add(&op.xprof_bytes);
            } else {
                time = time.saturating_sub(op.time);
            }
        }
        Some(ProgramWork { flops, xprof_flops, bytes, xprof_bytes, time, env })
    }

    /// Share of the profiled time (`0..=1`) an op's FLOP utilisation represents: XProf's
    /// op-profile `flops` metric, utilisation weighted by the op's share of the total time.
    pub fn weighted_flops_utilization(&self, op: &OpStats) -> f64 {
        match self.xprof_roofline(op) {
            Some(p) if self.total_time.0 > 0 => {
                p.compute_utilization.min(1.0) * op.time.0 as f64 / self.total_time.0 as f64
            }
            _ => 0.0,
        }
    }
}

fn empty_stats(program_id: u64, m: &OpMetadata) -> OpStats {
    OpStats {
        program_id,
        name: m.name.clone(),
        long_name: m.long_name.clone(),
        category: m.category.clone(),
        occurrences: 0,
        time: Picos::ZERO,
        self_time: Picos::ZERO,
        normalized_time: Picos::ZERO,
        flops: 0.0,
        xprof_flops: 0.0,
        model_flops: 0.0,
        bytes: MemoryBytes::default(),
        xprof_bytes: MemoryBytes::default(),
        num_cores: 1,
        source: m.source.clone(),
        tf_op: m.tf_op.clone(),
    }
}

/// The program id in a `module(program_id)` name.
pub fn program_id_of_module_name(name: &str) -> Option<u64> {
    let open = name.rfind('(')?;
    name.strip_suffix(')')?.get(open + 1..)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_carry_program_ids() {
        assert_eq!(program_id_of_module_name("jit_train_step(36)"), Some(36));
        assert_eq!(program_id_of_module_name("jit_f(g)(4)"), Some(4));
        assert_eq!(program_id_of_module_name("jit_f"), None);
        assert_eq!(program_id_of_module_name("x()"), None);
    }

    #[test]
    fn roofline_bound_is_the_largest_utilisation() {
        let env = PerfEnv {
            peak_flops_per_s: 100e12,
            peak_hbm_bytes_per_s: 1e12,
            peak_onchip_read_bytes_per_s: 10e12,
            peak_onchip_write_bytes_per_s: 0.0,
            reported_hbm_bytes_per_s: 0.0,
        };
        let t = Picos(1_000_000_000); // 1 ms
        let compute = roofline_point(80e9, &MemoryBytes { hbm: 1e8, ..Default::default() }, t, t, &env);
        assert_eq!(compute.bound_by, BoundBy::Compute);
        assert!((compute.efficiency - 0.8).abs() < 1e-12);
        let hbm = roofline_point(10e9, &MemoryBytes { hbm: 9e8, ..Default::default() }, t, t, &env);
        assert_eq!((hbm.bound_by, hbm.efficiency), (BoundBy::Hbm, 0.9));
        let none = roofline_point(0.0, &MemoryBytes::default(), t, t, &env);
        assert_eq!((none.bound_by, none.efficiency), (BoundBy::Unknown, 0.0));
    }
}
