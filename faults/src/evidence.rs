//! Helpers detectors share to build evidence and walk timelines.

use xlens_hlo::{InstrId, Module};
use xlens_xplane::{Event, Line, Picos, Plane, PlaneKind};

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
// Device op timelines, shared by the device-timeline detectors (exposed_collective, vpu_bound,
// straggler_core, dcn_exposed_reduce, sparsecore_overflow).

/// What one op of a device op line is: read once per event metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceOpInfo {
    /// Short op name: the metadata's display name (else its name), without a leading `%` or
    /// anything after ` = ` (XProf's normalisation).
    pub name: String,
    /// XProf category (`hlo_category` metadata stat), empty when absent.
    pub category: String,
    /// FLOPs of one occurrence (`flops`).
    pub flops: f64,
    /// Bytes accessed by one occurrence (`bytes_accessed`).
    pub bytes_accessed: f64,
    /// `file:line` (`source`), when recorded.
    pub source: Option<String>,
}

/// One executed op: its device timespan and which [`DeviceOpInfo`] it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceOp {
    /// Start (absolute, profile clock; `device_offset_ps` when present).
    pub start: Picos,
    /// End (exclusive).
    pub end: Picos,
    /// Index into [`DeviceTimeline::infos`].
    pub info: usize,
}

impl DeviceOp {
    /// The op's duration.
    pub fn duration(&self) -> Picos {
        self.end - self.start
    }
}

/// An async collective's window: from its `*-start` op's begin to its `*-done` op's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsyncWindow {
    /// Window start.
    pub start: Picos,
    /// Window end (exclusive).
    pub end: Picos,
    /// The start op's name (`all-gather-start.5`).
    pub name: String,
    /// The start op's [`DeviceOpInfo`] index.
    pub info: usize,
}

/// The ops of one device op line (a TensorCore's `XLA Ops`, a SparseCore's `Sparse Core Ops`),
/// sorted by start, enclosing ops before the ops they contain.
#[derive(Debug)]
pub struct DeviceTimeline<'a> {
    /// The device plane.
    pub plane: &'a Plane,
    /// The op line.
    pub line: &'a Line,
    /// One entry per distinct op (event metadata) seen on the line.
    pub infos: Vec<DeviceOpInfo>,
    /// Every op event, sorted.
    pub ops: Vec<DeviceOp>,
}

/// The short name XProf uses for an op: no leading `%`, nothing after ` = `.
fn short_op_name(name: &str) -> &str {
    let name = name.trim_start_matches('%');
    name.split(" = ").next().unwrap_or(name)
}

impl<'a> DeviceTimeline<'a> {
    /// Reads the line named `line_name` of a device plane; `None` when the plane has no such line.
    /// Events that fail to decode end the line (the rest is ignored).
    pub fn read(plane: &'a Plane, line_name: &str) -> Option<DeviceTimeline<'a>> {
        use std::collections::HashMap;
        use xlens_xplane::names::stat;
        let line = plane.line_by_name(line_name)?;
        let id = |name: &str| plane.stat_id(name);
        let (offset_id, duration_id) = (id(stat::DEVICE_OFFSET_PS), id(stat::DEVICE_DURATION_PS));
        let (category_id, flops_id, bytes_id, source_id) =
            (id(stat::HLO_CATEGORY), id(stat::FLOPS), id(stat::BYTES_ACCESSED), id(stat::SOURCE));
        let mut by_metadata: HashMap<xlens_xplane::EventMetadataId, usize> = HashMap::new();
        let mut infos: Vec<DeviceOpInfo> = Vec::new();
        let mut ops = Vec::with_capacity(line.event_count());
        for ev in line.events(plane).map_while(|e| e.ok()) {
            let info = *by_metadata.entry(ev.metadata_id()).or_insert_with(|| {
                let display = ev.display_name();
                let name = short_op_name(if display.is_empty() { ev.name() } else { display }).to_owned();
                let mut info = DeviceOpInfo { name, ..DeviceOpInfo::default() };
                for s in ev.metadata_stats().map_while(|s| s.ok()) {
                    let sid = Some(s.metadata_id());
                    if sid == category_id {
                        info.category = s.as_str().map(|c| c.into_owned()).unwrap_or_default();
                    } else if sid == flops_id {
                        info.flops = s.as_f64().unwrap_or(0.0);
                    } else if sid == bytes_id {
                        info.bytes_accessed = s.as_f64().unwrap_or(0.0);
                    } else if sid == source_id {
                        info.source = s.as_str().map(|c| c.into_owned()).filter(|c| !c.is_empty());
                    }
                }
                infos.push(info);
                infos.len() - 1
            });
            let (mut start, mut duration) = (ev.start(), ev.duration());
            if offset_id.is_some() || duration_id.is_some() {
                for s in ev.stats().map_while(|s| s.ok()) {
                    let sid = Some(s.metadata_id());
                    if sid == offset_id {
                        start = s.as_i64().map_or(start, Picos);
                    } else if sid == duration_id {
                        duration = s.as_i64().map_or(duration, Picos);
                    }
                }
            }
            let duration = duration.max(Picos::ZERO);
            ops.push(DeviceOp { start, end: start + duration, info });
        }
        ops.sort_by_key(|o| (o.start, std::cmp::Reverse(o.end)));
        Some(DeviceTimeline { plane, line, infos, ops })
    }

    /// The ops that start in `[lo, hi)`.
    pub fn ops_starting_in(&self, lo: Picos, hi: Picos) -> &[DeviceOp] {
        let from = self.ops.partition_point(|o| o.start < lo);
        let to = self.ops.partition_point(|o| o.start < hi).max(from);
        &self.ops[from..to]
    }

    /// The facts of an op.
    pub fn info(&self, op: &DeviceOp) -> &DeviceOpInfo {
        &self.infos[op.info]
    }

    /// Evidence for one executed op.
    pub fn evidence(&self, host: &HostProfile, op: &DeviceOp) -> Evidence {
        event_parts(host, self.plane.name(), self.line.name(), &self.info(op).name, op.start, op.duration())
    }

    /// The timeline split into non-overlapping innermost segments (each instant belongs to the
    /// deepest op running), classed by the op's category as the step anatomy classes them.
    pub fn segments(&self) -> Vec<xlens_roofline::Interval> {
        use xlens_roofline::{Interval, class_of};
        let mut out = Vec::with_capacity(self.ops.len() * 2);
        let mut stack: Vec<(Picos, usize)> = Vec::new();
        let mut cursor = Picos(i64::MIN);
        let emit = |out: &mut Vec<Interval>, from: Picos, to: Picos, info: usize| {
            if from < to {
                out.push(Interval { start: from, end: to, class: class_of(&self.infos[info].category) });
            }
        };
        for op in &self.ops {
            while let Some(&(end, info)) = stack.last() {
                if end > op.start {
                    break;
                }
                emit(&mut out, cursor, end, info);
                cursor = cursor.max(end);
                stack.pop();
            }
            if let Some(&(_, parent)) = stack.last() {
                emit(&mut out, cursor, op.start, parent);
            }
            cursor = op.start;
            stack.push((op.end.max(op.start), op.info));
        }
        while let Some((end, info)) = stack.pop() {
            emit(&mut out, cursor, end, info);
            cursor = cursor.max(end);
        }
        out
    }

    /// Async collective windows: the plane's `Async XLA Ops` events when it has any (each spans a
    /// whole window), else every `<op>-start[.N]` paired in time order with the next
    /// `<op>-done[.N]` of the same key (XProf's `analyze_async_overlap` pairing, facts §5).
    /// Sorted by start.
    pub fn async_windows(&self) -> Vec<AsyncWindow> {
        use std::collections::{HashMap, VecDeque};
        if let Some(async_line) = DeviceTimeline::read(self.plane, xlens_xplane::names::line::ASYNC_XLA_OPS)
            && !async_line.ops.is_empty()
        {
            return async_line
                .ops
                .iter()
                .map(|o| AsyncWindow {
                    start: o.start,
                    end: o.end,
                    name: async_line.info(o).name.clone(),
                    info: o.info,
                })
                .collect();
        }
        let mut open: HashMap<String, VecDeque<(Picos, usize)>> = HashMap::new();
        let mut out = Vec::new();
        for op in &self.ops {
            let name = self.infos[op.info].name.as_str();
            let Some((base, phase, suffix)) = async_phase(name) else { continue };
            let key = format!("{base}{suffix}");
            if phase == AsyncPhase::Start {
                open.entry(key).or_default().push_back((op.start, op.info));
            } else if let Some((start, info)) = open.get_mut(&key).and_then(VecDeque::pop_front) {
                out.push(AsyncWindow { start, end: op.end, name: self.infos[info].name.clone(), info });
            }
        }
        out.sort_by(|a, b| (a.start, a.end, &a.name).cmp(&(b.start, b.end, &b.name)));
        out
    }
}

/// Which half of an async pair an op name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncPhase {
    /// `<op>-start[.N]`.
    Start,
    /// `<op>-done[.N]`.
    Done,
}

/// Splits `<base>-start[.N]` / `<base>-done[.N]` into (base, phase, `.N` or ``).
pub fn async_phase(name: &str) -> Option<(&str, AsyncPhase, &str)> {
    let (stem, suffix) = match name.rfind('.') {
        Some(dot) if dot + 1 < name.len() && name[dot + 1..].bytes().all(|b| b.is_ascii_digit()) => {
            (&name[..dot], &name[dot..])
        }
        _ => (name, ""),
    };
    if let Some(base) = stem.strip_suffix("-start") {
        Some((base, AsyncPhase::Start, suffix))
    } else {
        stem.strip_suffix("-done").map(|base| (base, AsyncPhase::Done, suffix))
    }
}

/// The ordinal of a TPU TensorCore or SparseCore plane (0 for other planes).
pub fn device_ordinal(plane: &Plane) -> u32 {
    match plane.kind() {
        PlaneKind::TpuTensorCore { ordinal } | PlaneKind::TpuSparseCore { ordinal, .. } => ordinal,
        PlaneKind::Gpu { ordinal } => ordinal,
        _ => 0,
    }
}

/// Merges intervals into sorted, disjoint ones (empty intervals are dropped).
pub fn merge_intervals(mut intervals: Vec<(Picos, Picos)>) -> Vec<(Picos, Picos)> {
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

/// How much of `[lo, hi)` sorted, disjoint `merged` intervals cover.
pub fn covered(merged: &[(Picos, Picos)], lo: Picos, hi: Picos) -> Picos {
    if lo >= hi {
        return Picos::ZERO;
    }
    let from = merged.partition_point(|(_, e)| *e <= lo);
    let mut total = Picos::ZERO;
    for &(s, e) in &merged[from..] {
        if s >= hi {
            break;
        }
        total += e.min(hi) - s.max(lo);
    }
    total
}

/// True when `t` lies in one of the sorted, disjoint `merged` intervals.
pub fn in_intervals(merged: &[(Picos, Picos)], t: Picos) -> bool {
    let i = merged.partition_point(|(s, _)| *s <= t);
    i > 0 && t < merged[i - 1].1
}

/// Total length of sorted, disjoint intervals.
pub fn total_length(merged: &[(Picos, Picos)]) -> Picos {
    merged.iter().map(|(s, e)| *e - *s).sum()
}
