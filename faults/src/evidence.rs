//! Helpers detectors share to build evidence and walk timelines.

use xlens_hlo::{InstrId, Module};
use xlens_xplane::{Event, Picos};

use crate::finding::Evidence;
use crate::profile::HostProfile;

/// Evidence for a timeline event.
pub fn event(host: &HostProfile, ev: &Event<'_>) -> Evidence {
    Evidence::Event {
        host: host.name().to_owned(),
        plane: ev.plane().name().to_owned(),
        line: ev.line().name().to_owned(),
        name: ev.name().to_owned(),
        start_us: ev.start().as_us_f64(),
        duration_us: ev.duration().as_us_f64(),
    }
}

/// Evidence for an event known only by its parts.
pub fn event_parts(host: &HostProfile, plane: &str, line: &str, name: &str, start: Picos, duration: Picos) -> Evidence {
    Evidence::Event {
        host: host.name().to_owned(),
        plane: plane.to_owned(),
        line: line.to_owned(),
        name: name.to_owned(),
        start_us: start.as_us_f64(),
        duration_us: duration.as_us_f64(),
    }
}

/// Evidence for an HLO instruction, with its JAX source line when the module records it.
pub fn instruction(module: &Module, id: InstrId) -> Evidence {
    let instr = module.instruction(id);
    Evidence::Instruction {
        module: module.display_name(),
        name: instr.name().to_owned(),
        opcode: instr.opcode_name().to_owned(),
        op_name: instr.op_name().to_owned(),
        source: module.source(id).map(|s| format!("{}:{}", s.file, s.line)),
        text: module.instruction_text(id),
    }
}

/// The events of every host thread, flattened, with a predicate on the name (cheap: the name is
/// resolved from the metadata table before the event is inspected further).
pub fn host_events<'a>(
    host: &'a HostProfile,
    mut keep: impl FnMut(&str) -> bool + 'a,
) -> impl Iterator<Item = Event<'a>> + 'a {
    let plane = host.space().host_threads();
    plane
        .into_iter()
        .flat_map(move |p| p.lines().iter().flat_map(move |l| l.events(p).map_while(|e| e.ok())))
        .filter(move |e| keep(e.name()))
}

/// Milliseconds in a picosecond duration.
pub fn ms(t: Picos) -> f64 {
    t.as_ms_f64()
}

// ---------------------------------------------------------------------------------------------
// HLO helpers (shared by the HLO detectors).

/// Self time and executions of one HLO op per step, per core (an op of a program that runs once
/// per step has `count` 1). See [`op_times`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpTime {
    /// Self time per step (ms).
    pub ms: f64,
    /// Executions per step.
    pub count: f64,
}

/// The per-step self time of every op of `module`'s program, by instruction name; `None` when
/// the profile has no op timeline, no steps, or no op of this program.
///
/// Executions are the op profile's occurrences ÷ steps ÷ cores. Time is the op profile's self
/// time ÷ steps ÷ cores, except on profiles whose ops are host-thread events (XLA:CPU): there it
/// is the median over the steps of the op's time inside each step (scaled from time to self
/// time by the op profile's ratio), so that one warm-up or compile-laden step does not inflate
/// every op; an op that runs in fewer than half of the steps keeps the mean.
pub fn op_times(host: &HostProfile, module: &Module) -> Option<std::collections::BTreeMap<String, OpTime>> {
    let profile = host.op_profile().ok()?;
    let steps = host.steps().ok()?;
    let program = module.program_id()?;
    let n = steps.steps.len();
    if n == 0 {
        return None;
    }
    let cores = f64::from(profile.cores.max(1));
    let per = n as f64 * cores;
    let mut times: std::collections::BTreeMap<String, OpTime> = profile
        .ops
        .iter()
        .filter(|o| o.program_id == program && !o.has_inner_ops())
        .map(|o| (o.name.clone(), OpTime { ms: o.self_time.as_ms_f64() / per, count: o.occurrences as f64 / per }))
        .collect();
    if times.is_empty() {
        return None;
    }
    if host.space().tpu_tensor_cores().is_empty()
        && let Some(medians) = host_step_medians(host, program, n)
    {
        let ratio: std::collections::BTreeMap<&str, f64> = profile
            .ops
            .iter()
            .filter(|o| o.program_id == program && o.time.0 > 0)
            .map(|o| (o.name.as_str(), o.self_time.0 as f64 / o.time.0 as f64))
            .collect();
        for (name, t) in times.iter_mut() {
            if let Some(&median_ms) = medians.get(name.as_str()) {
                t.ms = median_ms * ratio.get(name.as_str()).copied().unwrap_or(1.0) / cores;
            }
        }
    }
    Some(times)
}

/// Per op of one program on host threads: the median over steps of its time inside each step
/// (ms, all cores together), for ops that run in at least half of the steps.
fn host_step_medians(host: &HostProfile, program: u64, n: usize) -> Option<std::collections::BTreeMap<String, f64>> {
    use xlens_xplane::names;
    let plane = host.space().host_threads()?;
    let (hlo_op, program_id) = (plane.stat_id(names::stat::HLO_OP)?, plane.stat_id(names::stat::PROGRAM_ID)?);
    let steps = &host.steps().ok()?.steps;
    let mut bounds: Vec<(Picos, Picos, usize)> = steps.iter().enumerate().map(|(i, s)| (s.start, s.end(), i)).collect();
    bounds.sort();
    let mut per_step: std::collections::BTreeMap<String, Vec<f64>> = std::collections::BTreeMap::new();
    for line in plane.lines() {
        for ev in line.events(plane).map_while(|e| e.ok()) {
            if ev.stat(program_id).and_then(|s| s.as_u64()) != Some(program) {
                continue;
            }
            let Some(name) = ev.stat(hlo_op).and_then(|s| s.as_str().map(|s| s.into_owned())) else { continue };
            let at = ev.start();
            let k = bounds.partition_point(|b| b.0 <= at);
            let Some(&(_, end, step)) = k.checked_sub(1).and_then(|k| bounds.get(k)) else { continue };
            if at >= end {
                continue;
            }
            per_step.entry(name).or_insert_with(|| vec![0.0; n])[step] += ev.duration().as_ms_f64();
        }
    }
    let medians = per_step
        .into_iter()
        .filter_map(|(name, mut v)| {
            let ran = v.iter().filter(|t| **t > 0.0).count();
            if 2 * ran < n {
                return None;
            }
            v.sort_by(f64::total_cmp);
            let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
            Some((name, median))
        })
        .collect();
    Some(medians)
}

/// The programs the profiled steps ran: modules with op time in the op profile, most op time
/// first (ties by program id); the main module alone when the profile has no op timeline.
pub fn step_modules(host: &HostProfile) -> Vec<&Module> {
    let mut timed: Vec<(Picos, &Module)> = Vec::new();
    if let Ok(profile) = host.op_profile() {
        let mut by_program: std::collections::BTreeMap<u64, Picos> = std::collections::BTreeMap::new();
        for op in profile.ops.iter().filter(|o| !o.has_inner_ops()) {
            *by_program.entry(op.program_id).or_default() += op.self_time;
        }
        for (program, time) in by_program {
            if let Some(module) = host.module(program).filter(|_| time.0 > 0) {
                timed.push((time, module));
            }
        }
    }
    if timed.is_empty() {
        return host.main_module().into_iter().collect();
    }
    timed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.program_id().cmp(&b.1.program_id())));
    timed.into_iter().map(|(_, m)| m).collect()
}

/// The instructions that run as kernels: those of the entry computation and of loop bodies,
/// branches and called computations, without the structural ones (parameters, constants,
/// tuples, bitcasts) and the control flow that only calls others. Fusion bodies are not
/// kernels; their fusion instruction is. In module order.
pub fn kernels(module: &Module) -> Vec<InstrId> {
    use xlens_hlo::{ComputationKind, OpClass};
    module
        .computations()
        .iter()
        .filter(|c| {
            matches!(
                c.kind(),
                ComputationKind::Entry
                    | ComputationKind::WhileBody
                    | ComputationKind::WhileCondition
                    | ComputationKind::Branch
                    | ComputationKind::Call
                    | ComputationKind::Async
            )
        })
        .flat_map(|c| c.instructions().iter().copied())
        .filter(|&i| !matches!(module.instruction(i).opcode().class(), OpClass::Structural | OpClass::ControlFlow))
        .collect()
}

/// The instruction that names the JAX op behind `id`: `id` itself when its metadata has an
/// `op_name`, else the instruction of its fused body nearest the root that has one (XLA:CPU
/// leaves many fusions without metadata), else `id`.
pub fn origin(module: &Module, id: InstrId) -> InstrId {
    if !module.instruction(id).op_name().is_empty() {
        return id;
    }
    let mut frontier = vec![id];
    // Breadth-first through nested fusion bodies, each body from its root backwards.
    for _ in 0..4 {
        let mut next = Vec::new();
        for f in frontier {
            let Some(body) = module.fused_computation(f) else { continue };
            if let Some(&found) =
                body.topological_order().iter().rev().find(|&&i| !module.instruction(i).op_name().is_empty())
            {
                return found;
            }
            next.extend(body.instructions().iter().copied().filter(|&i| module.fused_computation(i).is_some()));
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    id
}

/// Evidence for a kernel: the instruction itself, with the JAX op name and source line of its
/// [`origin`] when it carries none itself (a fusion without metadata).
pub fn kernel_instruction(module: &Module, id: InstrId) -> Evidence {
    let from = origin(module, id);
    let instr = module.instruction(id);
    Evidence::Instruction {
        module: module.display_name(),
        name: instr.name().to_owned(),
        opcode: instr.opcode_name().to_owned(),
        op_name: module.instruction(from).op_name().to_owned(),
        source: module.source(from).map(|s| format!("{}:{}", s.file, s.line)),
        text: module.instruction_text(id),
    }
}

/// One executed HLO op on the timeline: an event of a TPU `XLA Ops` line, or a host-thread event
/// with an `hlo_op` stat (XLA:CPU runs its thunks on host threads).
#[derive(Clone, Debug, PartialEq)]
pub struct OpSpan<'a> {
    /// Start (device time on TPU: `device_offset_ps` when present).
    pub start: Picos,
    /// End.
    pub end: Picos,
    /// The HLO instruction name (`hlo_op` on CPU, the display name on TPU).
    pub name: std::borrow::Cow<'a, str>,
    /// The program it belongs to, when recorded.
    pub program_id: Option<u64>,
    /// The program execution it belongs to (`run_id`, CPU), when recorded.
    pub run_id: Option<i64>,
    /// TPU core ordinal, or the `device_ordinal` stat of a CPU op (0 when absent).
    pub core: i64,
    /// XProf category (`hlo_category` metadata stat, TPU only).
    pub category: Option<std::borrow::Cow<'a, str>>,
    /// Plane name, for evidence.
    pub plane: &'a str,
    /// Line name, for evidence.
    pub line: &'a str,
}

impl OpSpan<'_> {
    /// Duration.
    pub fn duration(&self) -> Picos {
        self.end.saturating_sub(self.start)
    }
}

/// Every op event of a host, sorted by start (longest first at equal starts): the `XLA Ops` lines
/// of the TPU TensorCores when there are any, else the `hlo_op` events of the host threads.
/// Events that fail to decode end their line's walk (as everywhere in the analyses).
pub fn op_spans(host: &HostProfile) -> Vec<OpSpan<'_>> {
    use xlens_xplane::{PlaneKind, names};
    let mut out = Vec::new();
    let cores = host.space().tpu_tensor_cores();
    if cores.is_empty() {
        let Some(plane) = host.space().host_threads() else { return out };
        let Some(hlo_op) = plane.stat_id(names::stat::HLO_OP) else { return out };
        let program = plane.stat_id(names::stat::PROGRAM_ID);
        let run = plane.stat_id(names::stat::RUN_ID);
        let ordinal = plane.stat_id(names::stat::DEVICE_ORDINAL);
        for line in plane.lines() {
            for ev in line.events(plane).map_while(|e| e.ok()) {
                let Some(name) = ev.stat(hlo_op).and_then(|s| s.as_str()) else { continue };
                out.push(OpSpan {
                    start: ev.start(),
                    end: ev.end(),
                    name,
                    program_id: program.and_then(|id| ev.stat(id)).and_then(|s| s.as_u64()),
                    run_id: run.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()),
                    core: ordinal.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).unwrap_or(0),
                    category: None,
                    plane: plane.name(),
                    line: line.name(),
                });
            }
        }
    } else {
        for plane in cores {
            let core = match plane.kind() {
                PlaneKind::TpuTensorCore { ordinal } => i64::from(ordinal),
                _ => 0,
            };
            let Some(line) = plane.line_by_name(names::line::XLA_OPS) else { continue };
            let program = plane.stat_id(names::stat::PROGRAM_ID);
            let category = plane.stat_id(names::stat::HLO_CATEGORY);
            let offset = plane.stat_id(names::stat::DEVICE_OFFSET_PS);
            let duration = plane.stat_id(names::stat::DEVICE_DURATION_PS);
            for ev in line.events(plane).map_while(|e| e.ok()) {
                let start = offset.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).map_or(ev.start(), Picos);
                let length = duration.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).map_or(ev.duration(), Picos);
                out.push(OpSpan {
                    start,
                    end: start.saturating_add(length),
                    name: std::borrow::Cow::Borrowed(ev.display_name()),
                    program_id: program.and_then(|id| ev.stat_or_metadata_stat(id)).and_then(|s| s.as_u64()),
                    run_id: None,
                    core,
                    category: category.and_then(|id| ev.stat_or_metadata_stat(id)).and_then(|s| s.as_str()),
                    plane: plane.name(),
                    line: line.name(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(a.core.cmp(&b.core)));
    out
}

/// Merges `[start, end)` intervals into a sorted, disjoint union.
pub fn union(mut intervals: Vec<(Picos, Picos)>) -> Vec<(Picos, Picos)> {
    intervals.retain(|(s, e)| s < e);
    intervals.sort();
    let mut out: Vec<(Picos, Picos)> = Vec::with_capacity(intervals.len());
    for (s, e) in intervals {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Length of the part of `[lo, hi)` that a sorted, disjoint union covers.
pub fn covered(union: &[(Picos, Picos)], lo: Picos, hi: Picos) -> Picos {
    let from = union.partition_point(|&(_, e)| e <= lo);
    union[from..].iter().take_while(|&&(s, _)| s < hi).map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo))).sum()
}

/// Indices of the host-thread lines that carry step markers (`train` roots with `_r`): the
/// threads that run the training loop.
pub fn step_marker_lines(host: &HostProfile) -> Vec<usize> {
    let Some(plane) = host.space().host_threads() else { return Vec::new() };
    let root = plane.stat_id(xlens_xplane::names::stat::IS_ROOT);
    plane
        .lines()
        .iter()
        .filter(|line| {
            line.events(plane)
                .map_while(|e| e.ok())
                .any(|ev| xlens_roofline::is_host_step_marker(ev.name()) && root.is_some_and(|r| ev.stat(r).is_some()))
        })
        .map(|line| line.index())
        .collect()
}
