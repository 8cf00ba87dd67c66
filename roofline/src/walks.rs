//! Walks over a host's timelines, shared by the detectors: the host threads' events and the
//! host-run ops as [`OpSpan`]s, the device op lines as [`DeviceOpLine`]s (read, or streamed
//! without keeping their ops), the collective walk of a TensorCore's `XLA Ops` line with its
//! async windows, the per-class busy unions of a line, and the per-step op times of a program.
//! Everything here reads events and analyses; nothing formats.

use xlens_hlo::Module;
use xlens_xplane::{Event, Picos, Plane, PlaneKind};

use crate::host_profile::{HostProfile, host_step_medians};
use crate::{Span, merge_in_order};

/// The events of every host thread, flattened, with a predicate on the name (cheap: it is
/// decided once per metadata entry, not per event).
pub fn host_events<'a>(
    host: &'a HostProfile,
    mut keep: impl FnMut(&str) -> bool + 'a,
) -> impl Iterator<Item = Event<'a>> + 'a {
    let plane = host.space().host_threads();
    // The predicate runs once per metadata entry; a plane where nothing matches is not walked.
    let mask = plane.map(|p| p.metadata_mask(|m| keep(m.name()))).unwrap_or_default();
    let plane = plane.filter(|_| !mask.is_empty());
    plane
        .into_iter()
        .flat_map(move |p| p.lines().iter().flat_map(move |l| l.events(p).map_while(|e| e.ok())))
        .filter(move |e| mask.contains(e))
}

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
        && let Some(medians) = host_step_medians(host, program, n).filter(|m| !m.is_empty())
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

/// The host-run ops (`hlo_op` events of the host threads) as spans, in time order (by start,
/// longest first, then core; see [`HostProfile::host_op_order`]), made one at a time from the
/// shared host-op table: nothing is collected.
pub fn host_op_spans(host: &HostProfile) -> impl Iterator<Item = OpSpan<'_>> + '_ {
    let space = host.space();
    let cached = host.host_ops();
    let order = host.host_op_order();
    order.iter().filter_map(move |&i| {
        let (at, op) = cached.get(i as usize)?;
        host_op_span(space, cached, at, op)
    })
}

/// The span of an op of a host's op table (`None` when its line is not in `space`).
fn host_op_span<'a>(
    space: &'a xlens_xplane::Space,
    ops: &'a crate::HostOps,
    at: crate::LineRef,
    op: &crate::HostOp,
) -> Option<OpSpan<'a>> {
    let (plane, line) = at.resolve(space)?;
    let context = ops.context(op);
    Some(OpSpan {
        start: op.start,
        end: op.end,
        name: std::borrow::Cow::Borrowed(ops.name(op)),
        program_id: context.program_id,
        run_id: context.run_id,
        core: context.core,
        category: None,
        plane: plane.name(),
        line: line.name(),
    })
}

/// Host-run ops picked from the op table (each with its line, in table order) as
/// [`op_spans_where`] gives them: in time order (the order of `host_op_spans`: by start, longer
/// first, then core; ties in table order).
pub fn picked_host_op_spans<'a>(
    host: &'a HostProfile,
    mut picked: Vec<(crate::LineRef, &'a crate::HostOp)>,
) -> Vec<OpSpan<'a>> {
    let ops = host.host_ops();
    picked.sort_by_key(|(_, op)| (op.start, std::cmp::Reverse(op.end), ops.context(op).core));
    let space = host.space();
    picked.into_iter().filter_map(|(at, op)| host_op_span(space, ops, at, op)).collect()
}

/// Every op event of a host, sorted by start (longest first at equal starts): the `XLA Ops`
/// lines of the TPU TensorCores when there are any, else the `hlo_op` events of the host threads,
/// that pass two filters: `keep_op(category, name)`, decided once
/// per distinct TPU op (always true for host-run ops, whose category the HLO gives), and
/// `keep_span(start, end)`. Only kept events are materialised.
pub fn op_spans_where<'a>(
    host: &'a HostProfile,
    keep_op: impl Fn(&str, &str) -> bool,
    keep_span: impl Fn(Picos, Picos) -> bool,
) -> Vec<OpSpan<'a>> {
    use xlens_xplane::{PlaneKind, names};
    let mut out = Vec::new();
    let cores = host.space().tpu_tensor_cores();
    if cores.is_empty() {
        // The kept ops only, put in time order without sorting the whole table.
        let picked: Vec<(crate::LineRef, &crate::HostOp)> = host
            .host_ops()
            .by_line()
            .flat_map(|(at, line_ops)| line_ops.iter().map(move |op| (at, op)))
            .filter(|(_, op)| keep_span(op.start, op.end))
            .collect();
        out = picked_host_op_spans(host, picked);
    } else {
        for plane in cores {
            let core = match plane.kind() {
                PlaneKind::TpuTensorCore { ordinal } => i64::from(ordinal),
                _ => 0,
            };
            let Some(line) = plane.line_by_name(names::line::XLA_OPS) else { continue };
            // Decide per distinct op, once.
            let meta = crate::op_metadata_by_position(plane);
            let keep: Vec<bool> = plane
                .event_metadata()
                .iter()
                .zip(&meta)
                .map(|(m, op)| {
                    let category = op.as_ref().map_or("", |o| o.category.as_str());
                    keep_op(category, m.display_name())
                })
                .collect();
            if !keep.iter().any(|k| *k) {
                continue;
            }
            let offset = plane.stat_id(names::stat::DEVICE_OFFSET_PS);
            let duration = plane.stat_id(names::stat::DEVICE_DURATION_PS);
            for ev in line.events(plane).map_while(|e| e.ok()) {
                let Some(pos) = plane.event_metadata_position(ev.metadata_id()) else { continue };
                if !keep[pos] {
                    continue;
                }
                let start = offset.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).map_or(ev.start(), Picos);
                let length = duration.and_then(|id| ev.stat(id)).and_then(|s| s.as_i64()).map_or(ev.duration(), Picos);
                let end = start.saturating_add(length);
                if !keep_span(start, end) {
                    continue;
                }
                let op = meta[pos].as_ref();
                out.push(OpSpan {
                    start,
                    end,
                    name: std::borrow::Cow::Borrowed(ev.display_name()),
                    program_id: op.and_then(|o| o.program_id),
                    run_id: None,
                    core,
                    category: op.map(|o| std::borrow::Cow::Owned(o.category.clone())),
                    plane: plane.name(),
                    line: line.name(),
                });
            }
        }
    }
    if !host.space().tpu_tensor_cores().is_empty() {
        out.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)).then(a.core.cmp(&b.core)));
    }
    out
}

pub use crate::span::union;

/// An op event's start and (non-negative) duration on the device clock (see
/// [`crate::device_timespan`]).
fn device_span(
    ev: &xlens_xplane::Event<'_>,
    offset_id: Option<xlens_xplane::StatMetadataId>,
    duration_id: Option<xlens_xplane::StatMetadataId>,
) -> (Picos, Picos) {
    let (start, duration) = crate::device_timespan(ev, offset_id, duration_id);
    (start, duration.max(Picos::ZERO))
}

/// The union of the op events of one line of a device plane (device time when the events carry
/// it), as [`union`] computes it, read in one streaming pass: events in start order, the usual
/// case, are merged as they come, so nothing per event is kept; a line out of order is collected
/// and sorted instead. Events that fail to decode end the line.
pub fn busy_union(plane: &Plane, line_name: &str) -> Vec<Span> {
    use xlens_xplane::names::stat;
    let Some(line) = plane.line_by_name(line_name) else { return Vec::new() };
    let (offset_id, duration_id) = (plane.stat_id(stat::DEVICE_OFFSET_PS), plane.stat_id(stat::DEVICE_DURATION_PS));
    let span = |ev: &xlens_xplane::Event<'_>| {
        let (start, duration) = device_span(ev, offset_id, duration_id);
        Span::new(start, start + duration)
    };
    let mut out: Vec<Span> = Vec::new();
    let mut last_start = Picos(i64::MIN);
    for ev in line.events(plane).map_while(|e| e.ok()) {
        let Span { start: s, end: e } = span(&ev);
        if s < last_start {
            // Out of order: fall back to collecting every interval.
            let all = line.events(plane).map_while(|e| e.ok()).map(|ev| span(&ev)).collect();
            return union(all);
        }
        last_start = s;
        merge_in_order(&mut out, s, e);
    }
    out
}

/// Indices of the host-thread lines that carry step markers (`train` roots with `_r`): the
/// threads that run the training loop.
///
/// Profiles whose ops run on host threads read this from [`HostProfile::host_ops`] (built
/// anyway); others walk the threads, testing names once per metadata entry and leaving each
/// thread at its first rooted marker.
pub fn step_marker_lines(host: &HostProfile) -> Vec<usize> {
    if host.space().tpu_tensor_cores().is_empty() {
        return host.host_ops().rooted_marker_lines.clone();
    }
    let Some(plane) = host.space().host_threads() else { return Vec::new() };
    let Some(root) = plane.stat_id(xlens_xplane::names::stat::IS_ROOT) else { return Vec::new() };
    let marker = plane.metadata_mask(|m| crate::is_host_step_marker(m.name()));
    if marker.is_empty() {
        return Vec::new();
    }
    plane
        .lines()
        .iter()
        .filter(|line| {
            line.events(plane).map_while(|e| e.ok()).any(|ev| marker.contains(&ev) && ev.stat(root).is_some())
        })
        .map(|line| line.index())
        .collect()
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
    /// Index into [`DeviceOpLine::infos`].
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
pub struct DeviceOpLine {
    /// One entry per distinct op (event metadata) seen on the line.
    pub infos: Vec<DeviceOpInfo>,
    /// Every op event, sorted.
    pub ops: Vec<DeviceOp>,
}

/// An op's name as the device-op walks give it, from its event metadata: the short form of
/// its display name, else of its name.
pub fn metadata_op_name(metadata: &xlens_xplane::EventMetadata) -> String {
    let display = metadata.display_name();
    short_op_name(if display.is_empty() { metadata.name() } else { display }).to_owned()
}

/// The short name XProf uses for an op: no leading `%`, nothing after ` = `.
fn short_op_name(name: &str) -> &str {
    let name = name.trim_start_matches('%');
    name.split(" = ").next().unwrap_or(name)
}

/// The [`DeviceOpInfo`] of each event's metadata, read from its stats the first time it is seen.
struct InfoTable {
    category_id: Option<xlens_xplane::StatMetadataId>,
    flops_id: Option<xlens_xplane::StatMetadataId>,
    bytes_id: Option<xlens_xplane::StatMetadataId>,
    source_id: Option<xlens_xplane::StatMetadataId>,
    offset_id: Option<xlens_xplane::StatMetadataId>,
    duration_id: Option<xlens_xplane::StatMetadataId>,
    /// Info index per event-metadata position (dense), so events find theirs without hashing;
    /// ids without metadata share a map.
    by_position: Vec<usize>,
    by_metadata: std::collections::HashMap<xlens_xplane::EventMetadataId, usize>,
    infos: Vec<DeviceOpInfo>,
}

impl InfoTable {
    const NONE: usize = usize::MAX;

    fn new(plane: &Plane) -> InfoTable {
        use xlens_xplane::names::stat;
        let id = |name: &str| plane.stat_id(name);
        InfoTable {
            category_id: id(stat::HLO_CATEGORY),
            flops_id: id(stat::FLOPS),
            bytes_id: id(stat::BYTES_ACCESSED),
            source_id: id(stat::SOURCE),
            offset_id: id(stat::DEVICE_OFFSET_PS),
            duration_id: id(stat::DEVICE_DURATION_PS),
            by_position: vec![InfoTable::NONE; plane.event_metadata().len()],
            by_metadata: std::collections::HashMap::new(),
            infos: Vec::new(),
        }
    }

    /// The op an event is: its device span and info.
    fn op(&mut self, plane: &Plane, ev: &xlens_xplane::Event<'_>) -> DeviceOp {
        let position = plane.event_metadata_position(ev.metadata_id());
        let known =
            position.map_or_else(|| self.by_metadata.get(&ev.metadata_id()).copied(), |p| Some(self.by_position[p]));
        let info = match known {
            Some(i) if i != InfoTable::NONE => i,
            _ => {
                let display = ev.display_name();
                let name = short_op_name(if display.is_empty() { ev.name() } else { display }).to_owned();
                let mut info = DeviceOpInfo { name, ..DeviceOpInfo::default() };
                for s in ev.metadata_stats().map_while(|s| s.ok()) {
                    let sid = Some(s.metadata_id());
                    if sid == self.category_id {
                        info.category = s.as_str().map(|c| c.into_owned()).unwrap_or_default();
                    } else if sid == self.flops_id {
                        info.flops = s.as_f64().unwrap_or(0.0);
                    } else if sid == self.bytes_id {
                        info.bytes_accessed = s.as_f64().unwrap_or(0.0);
                    } else if sid == self.source_id {
                        info.source = s.as_str().map(|c| c.into_owned()).filter(|c| !c.is_empty());
                    }
                }
                self.infos.push(info);
                let i = self.infos.len() - 1;
                match position {
                    Some(p) => self.by_position[p] = i,
                    None => {
                        self.by_metadata.insert(ev.metadata_id(), i);
                    }
                }
                i
            }
        };
        let (start, duration) = device_span(ev, self.offset_id, self.duration_id);
        DeviceOp { start, end: start + duration, info }
    }
}

/// The order of a device timeline: by start, enclosing ops (longer) first.
fn timeline_key(op: &DeviceOp) -> (Picos, std::cmp::Reverse<Picos>) {
    (op.start, std::cmp::Reverse(op.end))
}

impl DeviceOpLine {
    /// Reads the line named `line_name` of a device plane; `None` when the plane has no such line.
    /// Events that fail to decode end the line (the rest is ignored).
    pub fn read(plane: &Plane, line_name: &str) -> Option<DeviceOpLine> {
        let line = plane.line_by_name(line_name)?;
        let mut table = InfoTable::new(plane);
        let mut ops = Vec::with_capacity(line.event_count());
        for ev in line.events(plane).map_while(|e| e.ok()) {
            ops.push(table.op(plane, &ev));
        }
        ops.sort_by_key(timeline_key);
        Some(DeviceOpLine { infos: table.infos, ops })
    }

    /// Feeds the ops of [`DeviceOpLine::read`], in the same order, to `push` without keeping
    /// them: `push` sees each op with the infos read so far (its own included). A TensorCore
    /// line holds millions of ops; this holds none. Returns the state and the infos; `None`
    /// when the plane has no such line.
    ///
    /// A line is walked once when its events come in timeline order (the usual case). One that
    /// does not is read, sorted and fed again from a fresh `init()` state.
    pub fn walk<S>(
        plane: &Plane,
        line_name: &str,
        init: impl FnMut() -> S,
        mut push: impl FnMut(&mut S, &DeviceOp, &[DeviceOpInfo]),
    ) -> Option<(S, Vec<DeviceOpInfo>)> {
        DeviceOpLine::walk_while(plane, line_name, init, |state, op, infos| {
            push(state, op, infos);
            true
        })
    }

    /// [`DeviceOpLine::walk`] that stops at the first op for which `push` returns `false`
    /// (ops come in timeline order, so a walk that only needs a time window ends there).
    pub fn walk_while<S>(
        plane: &Plane,
        line_name: &str,
        mut init: impl FnMut() -> S,
        mut push: impl FnMut(&mut S, &DeviceOp, &[DeviceOpInfo]) -> bool,
    ) -> Option<(S, Vec<DeviceOpInfo>)> {
        let line = plane.line_by_name(line_name)?;
        let mut table = InfoTable::new(plane);
        let mut state = init();
        let mut last: Option<(Picos, std::cmp::Reverse<Picos>)> = None;
        for ev in line.events(plane).map_while(|e| e.ok()) {
            let op = table.op(plane, &ev);
            if last.is_some_and(|l| timeline_key(&op) < l) {
                let timeline = DeviceOpLine::read(plane, line_name)?;
                let mut state = init();
                for op in &timeline.ops {
                    if !push(&mut state, op, &timeline.infos) {
                        break;
                    }
                }
                return Some((state, timeline.infos));
            }
            last = Some(timeline_key(&op));
            if !push(&mut state, &op, &table.infos) {
                break;
            }
        }
        Some((state, table.infos))
    }

    /// [`DeviceOpLine::walk_while`] from the ops that start at or after `from`, for a line known
    /// to decode and to be in timeline order ([`ClassUnions::in_order`]): the walk seeks to the
    /// run of the line ([`xlens_xplane::Line::event_parts`]) holding `from` by the first op of
    /// each run, and may feed a few ops that start before `from` (never one after it that the
    /// whole walk would feed first). The infos are those of the ops fed.
    pub fn walk_in_order_from<S>(
        plane: &Plane,
        line_name: &str,
        from: Picos,
        mut init: impl FnMut() -> S,
        mut push: impl FnMut(&mut S, &DeviceOp, &[DeviceOpInfo]) -> bool,
    ) -> Option<(S, Vec<DeviceOpInfo>)> {
        let line = plane.line_by_name(line_name)?;
        let runs = line.event_parts(plane, SEEK_RUNS);
        let mut table = InfoTable::new(plane);
        // The last run whose first op starts before `from`: the runs before it hold only ops that
        // start before `from`.
        let first_starts: Vec<Option<Picos>> = runs
            .iter()
            .map(|run| run.clone().next().and_then(|ev| ev.ok()).map(|ev| table.op(plane, &ev).start))
            .collect();
        if first_starts.iter().any(Option::is_none) {
            return DeviceOpLine::walk_while(plane, line_name, init, push);
        }
        let at = first_starts.partition_point(|s| s.is_some_and(|s| s < from)).saturating_sub(1);
        let mut table = InfoTable::new(plane);
        let mut state = init();
        for ev in runs[at..].iter().flat_map(|run| run.clone()).map_while(|e| e.ok()) {
            let op = table.op(plane, &ev);
            if !push(&mut state, &op, &table.infos) {
                break;
            }
        }
        Some((state, table.infos))
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
}

/// What one streamed walk of a TensorCore's `XLA Ops` line gives the collective detectors
/// (see [`walk_collectives`]).
#[derive(Debug)]
pub struct CollectiveWalk<C> {
    /// The consumer of the innermost segments, after the last one.
    pub segments: C,
    /// Async collective windows, sorted by start: the `Async XLA Ops` events, else each
    /// `<op>-start` paired with the next `<op>-done` of the same key.
    pub windows: Vec<AsyncWindow>,
    /// The synchronous ops kept by the caller's test, in timeline order.
    pub sync: Vec<DeviceOp>,
    /// The op infos the ops index.
    pub infos: Vec<DeviceOpInfo>,
    /// The op line's name, for evidence.
    pub line: &'static str,
}

/// Walks a TensorCore's `XLA Ops` line once without keeping its ops: every innermost segment
/// (each instant goes to the deepest op running) goes to `segment` on a consumer made by `init`,
/// the ops whose info passes `keep_sync` (decided once per distinct op) are kept, and the async
/// windows are paired (or read from the `Async XLA Ops` line). `None` without the line.
pub fn walk_collectives<C>(
    plane: &Plane,
    keep_sync: impl Fn(&DeviceOpInfo) -> bool,
    mut init: impl FnMut() -> C,
    mut segment: impl FnMut(&mut C, crate::Interval),
) -> Option<CollectiveWalk<C>> {
    struct State<C> {
        segmenter: Segmenter,
        consumer: C,
        keep: Vec<bool>,
        sync: Vec<DeviceOp>,
        pairer: Option<AsyncPairer>,
    }
    let line = xlens_xplane::names::line::XLA_OPS;
    let async_line = async_line_windows(plane);
    let (mut state, infos) = DeviceOpLine::walk(
        plane,
        line,
        || State {
            segmenter: Segmenter::default(),
            consumer: init(),
            keep: Vec::new(),
            sync: Vec::new(),
            pairer: async_line.is_none().then(AsyncPairer::default),
        },
        |state, op, infos| {
            while state.keep.len() < infos.len() {
                state.keep.push(keep_sync(&infos[state.keep.len()]));
            }
            if state.keep[op.info] {
                state.sync.push(*op);
            }
            if let Some(pairer) = &mut state.pairer {
                pairer.push(op, infos);
            }
            let consumer = &mut state.consumer;
            state.segmenter.push(op, infos, &mut |s| segment(consumer, s));
        },
    )?;
    let consumer = &mut state.consumer;
    state.segmenter.finish(&mut |s| segment(consumer, s));
    let windows = match (async_line, state.pairer) {
        (Some(windows), _) => windows,
        (None, Some(pairer)) => pairer.finish(),
        (None, None) => Vec::new(),
    };
    Some(CollectiveWalk { segments: state.consumer, windows, sync: state.sync, infos, line })
}

/// The windows of a plane's `Async XLA Ops` line, when it has events.
pub fn async_line_windows(plane: &Plane) -> Option<Vec<AsyncWindow>> {
    let async_line = DeviceOpLine::read(plane, xlens_xplane::names::line::ASYNC_XLA_OPS)?;
    if async_line.ops.is_empty() {
        return None;
    }
    Some(
        async_line
            .ops
            .iter()
            .map(|o| AsyncWindow { start: o.start, end: o.end, name: async_line.info(o).name.clone(), info: o.info })
            .collect(),
    )
}

/// Splits ops fed in timeline order into innermost segments classed by their op's category (see
/// [`DeviceOpLine::walk`]).
#[derive(Debug, Default)]
pub struct Segmenter {
    segments: crate::InnermostSegments,
    /// The class of each info, decided once.
    classes: Vec<crate::TimeClass>,
}

impl Segmenter {
    /// Feeds the next op (in timeline order) with the infos read so far; `f` gets the innermost
    /// segments that this op closes.
    pub fn push(&mut self, op: &DeviceOp, infos: &[DeviceOpInfo], f: &mut impl FnMut(crate::Interval)) {
        while self.classes.len() < infos.len() {
            self.classes.push(crate::class_of(&infos[self.classes.len()].category));
        }
        self.segments.push(op.start, op.end, self.classes[op.info], f);
    }

    /// Gives `f` the segments still open after the last op.
    pub fn finish(&mut self, f: &mut impl FnMut(crate::Interval)) {
        self.segments.finish(f);
    }

    /// True when no op fed so far is still open at `t`.
    fn is_closed_by(&self, t: Picos) -> bool {
        self.segments.is_closed_by(t)
    }
}

/// The time a device op line spends in each of `classes`, as one sorted union per class, from
/// its innermost segments (what a [`Segmenter`] fed by [`DeviceOpLine::walk`] gives), read on
/// all of rayon's threads. `None` when the plane has no such line.
///
/// The line is cut into runs ([`xlens_xplane::Line::event_parts`]). Each run is walked from an
/// empty nesting stack and on into the runs after it until an op starts with nothing open: from
/// that op on, the next run's own walk equals one walk of the whole line, so the runs are
/// stitched there. A line out of timeline order, or with bytes that do not decode, is walked once
/// instead (same result as the single walk).
pub fn class_unions(plane: &Plane, line_name: &str, classes: &[crate::TimeClass]) -> Option<ClassUnions> {
    class_unions_in(plane, line_name, classes, rayon::current_num_threads())
}

/// What [`class_unions`] gives.
#[derive(Debug, PartialEq)]
pub struct ClassUnions {
    /// One sorted union per class asked for, in their order.
    pub unions: Vec<Vec<Span>>,
    /// True when every event of the line was seen to decode and to come in timeline order (the
    /// line was walked in runs), so [`DeviceOpLine::walk_in_order_from`] may seek in it.
    pub in_order: bool,
}

/// [`class_unions`] with the line cut into at most `parts` runs.
fn class_unions_in(plane: &Plane, line_name: &str, classes: &[crate::TimeClass], parts: usize) -> Option<ClassUnions> {
    use rayon::prelude::*;
    let line = plane.line_by_name(line_name)?;
    let runs = line.event_parts(plane, parts);
    if runs.len() > 1 {
        let walked: Vec<RunUnions> =
            (0..runs.len()).into_par_iter().map(|k| walk_run(plane, &runs, k, classes)).collect();
        if walked.iter().all(|r| r.clean) {
            return Some(ClassUnions { unions: stitch(&walked, classes.len()), in_order: true });
        }
    }
    let init = || (Segmenter::default(), vec![Vec::new(); classes.len()]);
    let ((mut segmenter, mut unions), _) =
        DeviceOpLine::walk(plane, line_name, init, |(segmenter, unions), op, infos| {
            segmenter.push(op, infos, &mut |s| add_to_unions(unions, classes, s));
        })?;
    segmenter.finish(&mut |s| add_to_unions(&mut unions, classes, s));
    Some(ClassUnions { unions, in_order: false })
}

/// The runs [`DeviceOpLine::walk_in_order_from`] cuts a line into to find where to start.
const SEEK_RUNS: usize = 64;

/// Adds a segment, arriving in time order, to the union of its class (if it is one of `classes`).
fn add_to_unions(unions: &mut [Vec<Span>], classes: &[crate::TimeClass], s: crate::Interval) {
    if let Some(i) = classes.iter().position(|&c| c == s.class) {
        merge_in_order(&mut unions[i], s.start, s.end);
    }
}

/// One run's walk for [`class_unions`].
struct RunUnions {
    unions: Vec<Vec<Span>>,
    /// Events of the run itself.
    own: usize,
    /// Events of the runs after it walked before an op started with nothing open.
    carried: usize,
    /// The start of that op; `None` when the walk reached the end of the line.
    stop: Option<Picos>,
    /// False when an event came out of timeline order or did not decode.
    clean: bool,
}

/// Walks run `k` from an empty stack, then the runs after it until an op starts with nothing open.
fn walk_run(plane: &Plane, runs: &[xlens_xplane::EventIter<'_>], k: usize, classes: &[crate::TimeClass]) -> RunUnions {
    let mut table = InfoTable::new(plane);
    let mut segmenter = Segmenter::default();
    let mut unions = vec![Vec::new(); classes.len()];
    let mut last: Option<(Picos, std::cmp::Reverse<Picos>)> = None;
    let mut counts = [0usize; 2];
    let mut stop = None;
    'runs: for (i, run) in runs[k..].iter().enumerate() {
        let carrying = i > 0;
        for ev in run.clone() {
            let Ok(ev) = ev else {
                return RunUnions { unions, own: counts[0], carried: counts[1], stop: None, clean: false };
            };
            let op = table.op(plane, &ev);
            if last.is_some_and(|l| timeline_key(&op) < l) {
                return RunUnions { unions, own: counts[0], carried: counts[1], stop: None, clean: false };
            }
            last = Some(timeline_key(&op));
            if carrying && segmenter.is_closed_by(op.start) {
                stop = Some(op.start);
                break 'runs;
            }
            segmenter.push(&op, &table.infos, &mut |s| add_to_unions(&mut unions, classes, s));
            counts[usize::from(carrying)] += 1;
        }
    }
    segmenter.finish(&mut |s| add_to_unions(&mut unions, classes, s));
    RunUnions { unions, own: counts[0], carried: counts[1], stop, clean: true }
}

/// Joins the runs' unions: from the first event, take the run holding the event where the walk
/// so far stopped (its walk equals the single walk from there, where nothing was open), keep its
/// segments from that event's start, and go on from where that run's walk stopped.
fn stitch(runs: &[RunUnions], n_classes: usize) -> Vec<Vec<Span>> {
    let firsts: Vec<usize> = runs
        .iter()
        .scan(0usize, |next, r| {
            let first = *next;
            *next += r.own;
            Some(first)
        })
        .collect();
    let mut out = vec![Vec::new(); n_classes];
    let (mut at, mut from) = (0usize, Picos(i64::MIN));
    loop {
        // The last run starting at or before event `at`; its walk covers `at` (it goes on past
        // its own events until nothing is open, and nothing is open at `at`).
        let m = firsts.partition_point(|&f| f <= at).saturating_sub(1);
        let run = &runs[m];
        for (union, part) in out.iter_mut().zip(&run.unions) {
            // Segments before `from` end by it; the ones after start at or after it.
            for s in part.iter().filter(|s| s.end > from) {
                merge_in_order(union, s.start.max(from), s.end);
            }
        }
        match run.stop {
            Some(t) => {
                at = firsts[m] + run.own + run.carried;
                from = t;
            }
            None => return out,
        }
    }
}

/// Pairs `<op>-start` with `<op>-done` ops fed in timeline order (see
/// [`walk_collectives`]).
#[derive(Debug, Default)]
pub struct AsyncPairer {
    /// Pairing key of each `base + suffix`.
    keys: std::collections::HashMap<String, usize>,
    /// The phase and key of each info, decided once (not per event).
    roles: Vec<Option<(AsyncPhase, usize)>>,
    /// Open starts per key: (start, info).
    open: Vec<std::collections::VecDeque<(Picos, usize)>>,
    out: Vec<AsyncWindow>,
}

impl AsyncPairer {
    /// Feeds the next op (in timeline order) with the infos read so far.
    pub fn push(&mut self, op: &DeviceOp, infos: &[DeviceOpInfo]) {
        while self.roles.len() < infos.len() {
            let role = async_phase(&infos[self.roles.len()].name).map(|(base, phase, suffix)| {
                let next = self.keys.len();
                (phase, *self.keys.entry(format!("{base}{suffix}")).or_insert(next))
            });
            self.roles.push(role);
        }
        let Some((phase, key)) = self.roles[op.info] else { return };
        if self.open.len() <= key {
            self.open.resize(key + 1, std::collections::VecDeque::new());
        }
        if phase == AsyncPhase::Start {
            self.open[key].push_back((op.start, op.info));
        } else if let Some((start, info)) = self.open[key].pop_front() {
            self.out.push(AsyncWindow { start, end: op.end, name: infos[info].name.clone(), info });
        }
    }

    /// The windows, sorted by start.
    pub fn finish(mut self) -> Vec<AsyncWindow> {
        self.out.sort_by(|a, b| (a.start, a.end, &a.name).cmp(&(b.start, b.end, &b.name)));
        self.out
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

/// Items grouped by device, for ops that come in runs of one device (a line's ops): the list of
/// the run's device is kept at hand, and the map touched once per run. Each device's items keep
/// the order they were pushed in.
#[derive(Debug)]
pub struct ByDevice<T> {
    map: std::collections::BTreeMap<i64, Vec<T>>,
    last: Option<(i64, Vec<T>)>,
}

impl<T> Default for ByDevice<T> {
    fn default() -> Self {
        ByDevice { map: std::collections::BTreeMap::new(), last: None }
    }
}

impl<T> ByDevice<T> {
    #[inline]
    /// Adds `item` to the list of `device`.
    pub fn push(&mut self, device: i64, item: T) {
        match &mut self.last {
            Some((d, items)) if *d == device => items.push(item),
            _ => {
                self.flush();
                let mut items = self.map.remove(&device).unwrap_or_default();
                items.push(item);
                self.last = Some((device, items));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((device, items)) = self.last.take() {
            self.map.insert(device, items);
        }
    }

    /// The lists by device.
    pub fn into_map(mut self) -> std::collections::BTreeMap<i64, Vec<T>> {
        self.flush();
        self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor answers as the search does, times in order or not; devices keep their order.
    #[test]
    fn cursor_and_device_lists_match_the_plain_forms() {
        use super::ByDevice;
        use crate::{IntervalCursor, in_intervals};
        use xlens_xplane::Picos;
        let merged: Vec<Span> = (0..50).map(|i| Span::new(Picos(i * 100), Picos(i * 100 + 40))).collect();
        let times: Vec<Picos> =
            (0..3000).map(|i| Picos((i * 7919) % 5200)).chain((0..5200).step_by(3).map(Picos)).collect();
        let mut cursor = IntervalCursor::new(&merged);
        for &t in &times {
            assert_eq!(cursor.contains(t), in_intervals(&merged, t), "{t:?}");
        }
        let mut cursor = IntervalCursor::new(&merged);
        for (&lo, &len) in times.iter().zip([0i64, 5, 60, 130, 1000].iter().cycle()) {
            let hi = lo + Picos(len);
            assert_eq!(cursor.covered(lo, hi), crate::covered(&merged, lo, hi), "{lo:?} {hi:?}");
        }
        let mut by = ByDevice::default();
        let mut plain: std::collections::BTreeMap<i64, Vec<usize>> = std::collections::BTreeMap::new();
        for i in 0..1000usize {
            let device = [0i64, 0, 1, 2, 2, 2, 1, 0][i % 8] * (i as i64 / 300);
            by.push(device, i);
            plain.entry(device).or_default().push(i);
        }
        assert_eq!(by.into_map(), plain);
    }

    use xlens_xplane::{Space, SpaceBuilder};

    /// A device plane with one `XLA Ops` line holding `(offset_ps, duration_ps)` events.
    fn plane_with(events: &[(i64, i64)]) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/device:TPU:0");
            let op = plane.event_metadata("fusion.1");
            let mut line = plane.line(3, "XLA Ops", 0);
            for &(offset, duration) in events {
                line.event(op, offset, duration);
            }
        }
        Space::parse(b.finish().into()).expect("built space parses")
    }

    /// The streamed walk feeds exactly the ops `read` collects, in its order; a line out of
    /// order is fed again from a fresh state.
    #[test]
    fn walk_feeds_what_read_collects() {
        let in_order: &[(i64, i64)] = &[(0, 10), (0, 4), (10, 5), (30, 5)];
        let out_of_order: &[(i64, i64)] = &[(30, 5), (0, 10), (10, 5), (0, 4)];
        for (events, starts) in [(in_order, 1), (out_of_order, 2)] {
            let space = plane_with(events);
            let plane = &space.planes()[0];
            let read = DeviceOpLine::read(plane, "XLA Ops").unwrap();
            let mut inits = 0;
            let (fed, infos) = DeviceOpLine::walk(
                plane,
                "XLA Ops",
                || {
                    inits += 1;
                    Vec::new()
                },
                |fed: &mut Vec<DeviceOp>, op, infos| {
                    assert!(op.info < infos.len());
                    fed.push(*op);
                },
            )
            .unwrap();
            assert_eq!(fed, read.ops, "{events:?}");
            assert_eq!(infos, read.infos);
            assert_eq!(inits, starts, "{events:?}");
        }
        let space = plane_with(in_order);
        assert!(DeviceOpLine::walk(&space.planes()[0], "Steps", || (), |_, _, _| {}).is_none());
    }

    /// A TPU op line of nested ops (parents with children, some parents spanning tens of
    /// thousands of children), classes matmul, vector and data formatting, with gaps, touching
    /// ops and empty ones; `(start, end, class index)` in timeline order.
    fn nested_ops(seed: u64) -> Vec<(i64, i64, usize)> {
        let mut state = seed;
        let mut next = move |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut ops = Vec::new();
        let mut t = 0i64;
        while ops.len() < 300_000 {
            let children = match next(50) {
                0 => 20_000 + next(40_000) as usize,
                1..=20 => 0,
                _ => 1 + next(4) as usize,
            };
            let parent = ops.len();
            ops.push((t, t, next(3) as usize));
            let mut c = t + next(3) as i64;
            for _ in 0..children {
                let d = next(40) as i64;
                ops.push((c, c + d, next(3) as usize));
                if d > 10 && next(4) == 0 {
                    ops.push((c + 2, c + 2 + next(8) as i64, next(3) as usize));
                }
                // Ops in timeline order: an empty op is not followed by a longer one at its start.
                c += d + next(3) as i64 + i64::from(d == 0);
            }
            let end = c.max(t + 1 + next(30) as i64) + next(2) as i64;
            ops[parent].1 = end;
            t = end + next(3) as i64;
        }
        ops
    }

    fn plane_of_classes(ops: &[(i64, i64, usize)]) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/device:TPU:0");
            let category = plane.stat_metadata(xlens_xplane::names::stat::HLO_CATEGORY);
            let metas: Vec<_> = ["convolution", "loop fusion", "copy"]
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let id = plane.event_metadata(&format!("op.{i}"));
                    plane.metadata_stat(id, category, *c);
                    id
                })
                .collect();
            let mut line = plane.line(3, "XLA Ops", 0);
            for &(s, e, class) in ops {
                line.event(metas[class], s, e - s);
            }
        }
        Space::parse(b.finish().into()).expect("built space parses")
    }

    /// From any time, the seeking walk feeds the ops the whole walk feeds from there.
    fn seek_equals_whole_walk(plane: &Plane, ops: &[(i64, i64, usize)]) {
        let last = ops.last().unwrap().0;
        for from in [-5, 0, 1, last / 7, last / 2, last / 2 + 1, last - 3, last, last + 1] {
            let (from, to) = (Picos(from), Picos(from.saturating_add(300)));
            let init = Vec::new;
            let push = |fed: &mut Vec<(Picos, Picos, usize)>, op: &DeviceOp, _: &[DeviceOpInfo]| {
                if op.start > to {
                    return false;
                }
                if op.start >= from {
                    fed.push((op.start, op.end, op.info));
                }
                true
            };
            let names = |(fed, infos): (Vec<(Picos, Picos, usize)>, Vec<DeviceOpInfo>)| -> Vec<(Picos, Picos, String)> {
                fed.into_iter().map(|(s, e, i)| (s, e, infos[i].name.clone())).collect()
            };
            let whole = names(DeviceOpLine::walk_while(plane, "XLA Ops", init, push).unwrap());
            let seek = names(DeviceOpLine::walk_in_order_from(plane, "XLA Ops", from, init, push).unwrap());
            assert!(from.0 > last || !whole.is_empty(), "{from:?}");
            assert_eq!(seek, whole, "{from:?}");
        }
    }

    /// Walked in runs on several threads and stitched, the class unions equal one walk's, with
    /// parents open across the cuts; a line out of order falls back to the single walk.
    #[test]
    fn class_unions_in_runs_equal_one_walk() {
        use crate::TimeClass;
        let classes = [TimeClass::Matmul, TimeClass::Vector, TimeClass::DataFormatting];
        for seed in [1, 7] {
            let mut ops = nested_ops(seed);
            for shuffle in [false, true] {
                if shuffle {
                    let n = ops.len();
                    ops.swap(n / 3, n / 3 + 1000);
                }
                let space = plane_of_classes(&ops);
                let plane = &space.planes()[0];
                assert!(plane.line_by_name("XLA Ops").unwrap().event_parts(plane, 4).len() >= 3);
                let one = class_unions_in(plane, "XLA Ops", &classes, 1).unwrap().unions;
                assert!(one.iter().all(|u| u.len() > 1000), "{:?}", one.iter().map(Vec::len).collect::<Vec<_>>());
                // Sorted, the runs are walked apart, and parents stay open across the cuts.
                let line = plane.line_by_name("XLA Ops").unwrap();
                let runs = line.event_parts(plane, 4);
                let walked: Vec<RunUnions> = (0..runs.len()).map(|k| walk_run(plane, &runs, k, &classes)).collect();
                assert_eq!(walked.iter().all(|r| r.clean), !shuffle);
                assert!(shuffle || walked.iter().any(|r| r.carried > 1000), "seed {seed}");
                for parts in [2, 3, 4] {
                    let got = class_unions_in(plane, "XLA Ops", &classes, parts).unwrap();
                    assert_eq!(got.in_order, !shuffle);
                    let runs = got.unions;
                    // Not assert_eq: the unions hold a million intervals.
                    assert!(runs == one, "seed {seed}, {parts} runs: the unions differ");
                }
                assert!(class_unions_in(plane, "Steps", &classes, 4).is_none());
                if !shuffle {
                    seek_equals_whole_walk(plane, &ops);
                }
            }
        }
    }

    /// The in-place union equals sorting every interval and merging into a new list: runs of
    /// sorted intervals one after another (a device's lines), nested, touching, empty and
    /// reversed ones, equal starts with different ends.
    #[test]
    fn union_in_place_equals_sort_and_merge() {
        use proptest::prelude::*;
        let runs =
            proptest::collection::vec((proptest::collection::vec((0i64..500, -5i64..60), 0..30), any::<bool>()), 0..5);
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&runs, |runs| {
                let mut intervals = Vec::new();
                for (run, sorted) in runs {
                    let mut run: Vec<Span> = run.iter().map(|&(s, l)| Span::new(Picos(s), Picos(s + l))).collect();
                    if sorted {
                        run.sort();
                    }
                    intervals.extend(run);
                }
                let mut plain = intervals.clone();
                plain.sort();
                let mut expected: Vec<Span> = Vec::new();
                for s in plain {
                    merge_in_order(&mut expected, s.start, s.end);
                }
                prop_assert_eq!(union(intervals), expected);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn busy_union_streams_what_union_computes() {
        let cases: [&[(i64, i64)]; 3] = [
            // In start order: touching, nested, empty and disjoint events.
            &[(0, 10), (10, 5), (12, 1), (20, 0), (30, 5), (31, 10)],
            // Out of order: the fallback collects and sorts.
            &[(30, 5), (0, 10), (10, 5), (50, 1), (31, 10)],
            &[],
        ];
        for events in cases {
            let space = plane_with(events);
            let plane = &space.planes()[0];
            let expected = union(events.iter().map(|&(s, d)| Span::new(Picos(s), Picos(s + d.max(0)))).collect());
            assert_eq!(busy_union(plane, "XLA Ops"), expected, "{events:?}");
        }
        let space = plane_with(&[(0, 1)]);
        assert!(busy_union(&space.planes()[0], "Steps").is_empty());
    }
}
