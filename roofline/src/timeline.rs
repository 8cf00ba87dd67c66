//! The device timeline: one streaming pass per TPU core that every device analysis reads.
//!
//! A profile is decoded once ([`xlens_xplane::Space`]); each core's `XLA Ops` line is then walked
//! exactly once, in start order, with a nesting stack. The walk produces small summaries only:
//! per-op aggregates (occurrences, time, self time, DVFS-normalised time), per-step category
//! breakdowns and step anatomies, and the core's span. Nothing per event is kept, so memory stays
//! at the input plus tables proportional to the number of distinct ops and steps. The op
//! profile, the steps and the step anatomy are views of these summaries, and so are the checks
//! of the detectors that read the device timeline.
//!
//! Events are expected in start order (parents before the children they contain), which is how
//! profilers write op lines; a line that is not is collected and sorted first (same result).

mod device_groups;
mod groups;

pub use device_groups::{DeviceEventGroups, TfEventGroups};
pub(crate) use groups::nest_events;
pub use groups::{HostEventGroups, MAX_GROUPED_EVENTS};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;
use xlens_xplane::{BareEvent, EventMetadataId, Picos, Plane, PlaneKind, Space, names};

use crate::anatomy::{PRIORITY, StepAnatomy, TimeClass, class_of};
use crate::device::{DeviceStatIds, OpMetadata, Span, device_span, op_metadata};
use crate::matmul_free::{MatmulFreeStretches, StretchWalk};
use crate::step_types::{CoreStepBreakdown, StepSource};

/// Aggregates of one op (one event metadata entry) on one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpAggregate {
    /// Executions (aggregated events count their occurrences).
    pub occurrences: u64,
    /// Total time, children included.
    pub time: Picos,
    /// Time minus direct children.
    pub self_time: Picos,
    /// Time scaled by each event's DVFS time-scale multiplier.
    pub normalized_time: Picos,
}

/// One step on one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreStepSummary {
    /// The core's `Steps` marker.
    pub marker: (Picos, Picos),
    /// Op self time by category family, for ops overlapping the marker.
    pub breakdown: CoreStepBreakdown,
    /// Where the accounted step window `[marker start, + step time)` went.
    pub anatomy: StepAnatomy,
    /// Start of the first op overlapping the marker.
    pub first_op: Option<Picos>,
    /// Ops overlapping the marker.
    pub ops: u32,
}

/// The summaries of one TPU TensorCore.
#[derive(Clone, Debug, PartialEq)]
pub struct CoreTimeline {
    /// Device ordinal.
    pub core: u32,
    /// Index of the plane in the space.
    pub plane_index: usize,
    /// Per event-metadata position of the plane: the op's aggregates (zero when it never ran).
    pub ops: Vec<OpAggregate>,
    /// Op events walked.
    pub events: u64,
    /// Earliest op start and latest op end.
    pub op_span: Option<(Picos, Picos)>,
    /// Earliest start and latest end over op and step events (XProf's core total time).
    pub span: Option<(Picos, Picos)>,
    /// One entry per step kept (see [`DeviceTimeline::step_times`]).
    pub steps: Vec<CoreStepSummary>,
    /// All `Steps` markers of the core, including steps other cores lack.
    pub markers: Vec<(Picos, Picos)>,
    /// Ops that start after the end of the core's last step marker.
    pub ops_after_last_marker: u64,
    /// `XLA Modules` events (program executions): start, end, event-metadata position.
    pub modules: Vec<(Picos, Picos, usize)>,
    /// Time the core ran an on-duty op: the union of its op events whose category is not
    /// off-duty (infeed, outfeed, host send/receive, `megacore fusion`, `async-done`), XProf's
    /// duty-cycle rule.
    pub active: Picos,
    /// The longest matmul-free stretch of the core's steps (the first core only; `None` on the
    /// others, and where the line held ops of negative duration or without event metadata).
    pub matmul_free: Option<MatmulFreeStretches>,
}

/// Op categories during which the core is not doing its own work (XProf's `IsOffDutyOp`): it
/// waits for the host, another core or an async op.
pub const OFF_DUTY_CATEGORIES: &[&str] = &[
    "infeed",
    "outfeed",
    "host send",
    "host send-done",
    "host recv",
    "host recv-done",
    "megacore fusion",
    "async-done",
];

impl CoreTimeline {
    /// The window XProf's duty cycle divides by: from the first to the last op or program
    /// execution (`XLA Modules` events widen it).
    pub fn duty_window(&self) -> Option<(Picos, Picos)> {
        let modules = self.modules.iter().map(|m| (m.0, m.1));
        self.op_span.into_iter().chain(modules).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
    }
}

impl DeviceTimeline {
    /// XProf's device duty cycle: the cores' on-duty time over their windows, in %
    /// (`None` without ops). Each TensorCore is its own chip here (v5e, v6e); on chips with
    /// two TensorCores XProf unions them first, which can only lower its figure.
    pub fn duty_cycle_pct(&self) -> Option<f64> {
        self.duty_cycle().map(|(busy, window)| 100.0 * busy.0 as f64 / window.0 as f64)
    }

    /// The cores' on-duty time and their windows, summed (to combine hosts into a session's
    /// duty cycle); `None` without ops.
    pub fn duty_cycle(&self) -> Option<(Picos, Picos)> {
        let mut busy = Picos::ZERO;
        let mut window = Picos::ZERO;
        for core in &self.cores {
            if let Some((a, b)) = core.duty_window() {
                window += b - a;
                busy += core.active.min(b - a);
            }
        }
        (window.0 > 0).then_some((busy, window))
    }
}

/// The device timeline of every TPU TensorCore of a space.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceTimeline {
    /// Cores in ordinal order.
    pub cores: Vec<CoreTimeline>,
    /// The time charged to every core for each step kept: the longest core's marker
    /// (steps kept are those every core has, as XProf intersects them).
    pub step_times: Vec<Picos>,
    /// What the steps are (the time base): `Steps` markers when the cores have them, else the
    /// program executions of the `XLA Modules` lines, else the whole captured op window of each
    /// core (one "step"); [`StepSource::None`] without cores or ops.
    pub source: StepSource,
    /// For module executions: the module (`name(program_id)`) each step ran, from the first
    /// core; empty otherwise.
    pub step_names: Vec<String>,
}

impl DeviceTimeline {
    /// Walks every TensorCore once (cores in parallel). Empty for profiles without TPU cores.
    ///
    /// ```
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// use xlens_roofline::DeviceTimeline;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let timeline = DeviceTimeline::build(&space)?;
    /// assert_eq!((timeline.cores.len(), timeline.step_times.len()), (4, 6));
    /// let anatomy = &timeline.cores[0].steps[0].anatomy;
    /// assert_eq!(anatomy.sum(), timeline.step_times[0]);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(space: &Space) -> xlens_xplane::Result<DeviceTimeline> {
        let planes = space.tpu_tensor_cores();
        // Phase 1: every core's step markers, to know the time charged to each step. Without
        // `Steps` events on any core the time base is the program executions, and without those
        // the whole op window of each core (facts §3.1: XProf groups by `XLA Modules` when the
        // `Steps` line is empty).
        let mut markers = Vec::with_capacity(planes.len());
        for plane in &planes {
            markers.push(step_markers(plane, names::line::STEPS)?);
        }
        let mut source = StepSource::DeviceSteps;
        let mut step_names = Vec::new();
        if markers.iter().all(|m| m.is_empty()) {
            source = StepSource::ModuleExecutions;
            markers.clear();
            for plane in &planes {
                markers.push(step_markers(plane, names::line::XLA_MODULES)?);
            }
            if let Some(plane) = planes.first() {
                step_names = module_names(plane)?;
            }
        }
        if markers.iter().all(|m| m.is_empty()) {
            source = StepSource::DeviceWindow;
            step_names.clear();
            markers.clear();
            for plane in &planes {
                markers.push(op_window(plane)?.into_iter().collect());
            }
        }
        if markers.iter().all(|m| m.is_empty()) {
            source = StepSource::None;
        }
        let count = markers.iter().map(Vec::len).min().unwrap_or(0);
        let step_times: Vec<Picos> =
            (0..count).map(|k| markers.iter().map(|m| m[k].1 - m[k].0).max().unwrap_or_default()).collect();
        // Phase 2: one pass per core.
        let cores: xlens_xplane::Result<Vec<CoreTimeline>> = planes
            .par_iter()
            .zip(markers.par_iter())
            .enumerate()
            .map(|(i, (plane, markers))| {
                walk_core(plane, markers, &step_times, source == StepSource::DeviceSteps, i == 0)
            })
            .collect();
        step_names.truncate(step_times.len());
        Ok(DeviceTimeline { cores: cores?, step_times, source, step_names })
    }

    /// True when the space had no TPU cores.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }
}

/// The spans of a marker line's events (`Steps`, or `XLA Modules`), sorted.
fn step_markers(plane: &Plane, line_name: &str) -> xlens_xplane::Result<Vec<(Picos, Picos)>> {
    let ids = DeviceStatIds::of(plane);
    let Some(line) = plane.line_by_name(line_name) else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(line.event_count());
    for ev in line.events(plane) {
        let span = device_span(&ev?, &ids);
        out.push((span.start, span.end()));
    }
    out.sort();
    Ok(out)
}

/// The names of a core's `XLA Modules` events in start order (the module each execution ran).
fn module_names(plane: &Plane) -> xlens_xplane::Result<Vec<String>> {
    let ids = DeviceStatIds::of(plane);
    let Some(line) = plane.line_by_name(names::line::XLA_MODULES) else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(line.event_count());
    for ev in line.events(plane) {
        let ev = ev?;
        out.push((device_span(&ev, &ids).start, ev.display_name().to_owned()));
    }
    out.sort();
    Ok(out.into_iter().map(|(_, n)| n).collect())
}

/// The first op start and the last op end of a core's `XLA Ops` line, `None` without ops.
fn op_window(plane: &Plane) -> xlens_xplane::Result<Option<(Picos, Picos)>> {
    let ids = DeviceStatIds::of(plane);
    let Some(line) = plane.line_by_name(names::line::XLA_OPS) else { return Ok(None) };
    let mut window: Option<(Picos, Picos)> = None;
    for ev in line.events(plane) {
        let span = device_span(&ev?, &ids);
        window = Some(match window {
            Some((a, b)) => (a.min(span.start), b.max(span.end())),
            None => (span.start, span.end()),
        });
    }
    Ok(window)
}

/// How an op takes part in async windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AsyncRole {
    None,
    Start(u32),
    Done(u32),
}

/// Per event-metadata position: what the walk needs to know about the op.
#[derive(Clone, Copy)]
struct OpInfo {
    /// Index of the op's [`TimeClass`] in [`CLASSES`].
    class: u8,
    /// Index of the op's [`Family`] in the per-step family array.
    family: u8,
    role: AsyncRole,
    /// The category is off-duty ([`OFF_DUTY_CATEGORIES`]).
    off_duty: bool,
}

/// The anatomy classes, indexed by [`OpInfo::class`]: the classes in priority order.
const CLASSES: [TimeClass; PRIORITY.len()] = PRIORITY;
/// The index of [`TimeClass::CollectiveExposed`] in [`CLASSES`] (checked by a test).
const COLLECTIVE_EXPOSED: u8 = 1;

fn class_index(class: TimeClass) -> u8 {
    CLASSES.iter().position(|&c| c == class).unwrap_or(2) as u8
}

/// What the walk accumulates per step, turned into [`CoreStepSummary`] by [`Walk::finish`]:
/// arrays indexed by family and class keep the per-event work free of jump tables.
#[derive(Clone, Copy, Default)]
struct StepAcc {
    family: [Picos; FAMILIES],
    class: [Picos; CLASSES.len()],
    collective_hidden: Picos,
    exposed_gap: Picos,
}

/// The category families of the TPU step breakdown (facts §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Family {
    Infeed,
    Outfeed,
    AllReduce,
    Send,
    Recv,
    HostTransfer,
    Megacore,
    HighFlops,
    Other,
}
const FAMILIES: usize = Family::Other as usize + 1;

fn family(category: &str) -> Family {
    match category {
        "infeed" => Family::Infeed,
        "outfeed" => Family::Outfeed,
        "all-reduce" | "all-reduce fusion" | "all-to-all" => Family::AllReduce,
        "send" | "send-done" => Family::Send,
        "recv" | "recv-done" => Family::Recv,
        "host send" | "host send-done" | "host recv" | "host recv-done" => Family::HostTransfer,
        "megacore fusion" => Family::Megacore,
        "convolution"
        | "convolution base-dilated"
        | "convolution window-dilated"
        | "convolution fusion"
        | "output fusion" => Family::HighFlops,
        _ => Family::Other,
    }
}

/// The async key of an op name: `all-gather-start.3` → (`all-gather.3`, start).
fn async_role(name: &str, keys: &mut HashMap<String, u32>) -> AsyncRole {
    let name = name.trim_start_matches('%');
    let name = name.split(" = ").next().unwrap_or(name);
    let (base, suffix) = match name.rfind('.') {
        Some(dot) if dot + 1 < name.len() && name[dot + 1..].bytes().all(|b| b.is_ascii_digit()) => {
            (&name[..dot], &name[dot..])
        }
        _ => (name, ""),
    };
    let (op, start) = if let Some(op) = base.strip_suffix("-start") {
        (op, true)
    } else if let Some(op) = base.strip_suffix("-done") {
        (op, false)
    } else {
        return AsyncRole::None;
    };
    // Async copies between memory spaces are not collectives: their windows are read by the
    // copy detector, not counted as communication.
    if op == "copy" {
        return AsyncRole::None;
    }
    let n = keys.len() as u32;
    let key = *keys.entry(format!("{op}{suffix}")).or_insert(n);
    if start { AsyncRole::Start(key) } else { AsyncRole::Done(key) }
}

/// What the walk needs per event-metadata position, and the number of distinct async keys.
fn op_infos(plane: &Plane, meta: &HashMap<xlens_xplane::EventMetadataId, OpMetadata>) -> (Vec<OpInfo>, usize) {
    let mut keys = HashMap::new();
    let infos = plane
        .event_metadata()
        .iter()
        .map(|m| {
            let (category, name) = match meta.get(&m.id()) {
                Some(op) => (op.category.as_str(), op.name.as_str()),
                None => ("", m.display_name()),
            };
            OpInfo {
                class: class_index(class_of(category)),
                family: family(category) as u8,
                role: async_role(name, &mut keys),
                off_duty: OFF_DUTY_CATEGORIES.contains(&category),
            }
        })
        .collect();
    (infos, keys.len())
}

/// An op on the nesting stack.
struct Open {
    end: Picos,
    /// `end` minus the op's start (not its recorded duration where the end saturated).
    duration: Picos,
    child_time: Picos,
    /// Event-metadata position.
    meta: u32,
    /// The step whose marker the op overlaps, or [`NO_STEP`].
    step: u32,
    /// [`OpInfo::class`] and [`OpInfo::family`] of the op, copied for the hot path.
    class: u8,
    family: u8,
    /// The op started inside the one below it but ends after it: not its child.
    orphan: bool,
}

const NO_STEP: u32 = u32::MAX;

/// The walk's state.
struct Walk<'a> {
    infos: &'a [OpInfo],
    markers: &'a [(Picos, Picos)],
    windows: Vec<(Picos, Picos)>,
    out: CoreTimeline,
    stack: Vec<Open>,
    cursor: Picos,
    marker_cursor: usize,
    /// The marker at the cursor (`(i64::MAX, i64::MAX)` past the last), so the per-op test
    /// reads no slice.
    marker: (Picos, Picos),
    window_cursor: usize,
    /// The window at the cursor and the start of the next (`i64::MAX` past the last).
    window: (Picos, Picos),
    next_window_start: Picos,
    /// Per async key: starts not yet matched by a done.
    open_starts: Vec<u32>,
    active_windows: i64,
    closing: BinaryHeap<Reverse<Picos>>,
    acc: Vec<StepAcc>,
    /// End of the last `Steps` marker (`i64::MAX` without markers).
    last_marker_end: Picos,
    /// First op start and latest op end so far.
    op_start: Option<Picos>,
    op_end: Picos,
    /// The on-duty interval being merged (ops arrive in start order).
    active_run: Option<(Picos, Picos)>,
    /// The first core's search for its longest matmul-free stretch.
    stretch: Option<StretchWalk>,
}

// The per-event steps (`feed`, `op`, `advance_to`, `close_top`, `emit`) are inlined into the op
// line's loop: as calls (about two `emit`s an op, each saving and restoring six registers) they
// were 6 % of the walk on tpu300, and `feed` as a call 3 % of it on a device-only snapshot.
impl Walk<'_> {
    /// Accounts one op: its metadata id, span on the device clock, time scale and occurrences.
    #[inline(always)]
    fn feed(&mut self, plane: &Plane, id: EventMetadataId, span: Span, scale: Option<f64>, occurrences: i64) {
        match plane.event_metadata_position(id) {
            Some(pos) if pos < u32::MAX as usize => {
                if let Some(stretch) = self.stretch.as_mut().filter(|_| span.duration < Picos::ZERO) {
                    stretch.reject();
                }
                self.op(span, pos, scale, occurrences)
            }
            // Dangling metadata: nothing to attribute the time to.
            _ => {
                // An op the walk does not nest: the stretch search would miss it.
                if let Some(stretch) = &mut self.stretch {
                    stretch.reject();
                }
                self.advance_to(span.start)
            }
        }
    }

    /// Accounts one op event. `time_scale` is the event's DVFS multiplier, when it has one.
    #[inline(always)]
    fn op(&mut self, span: Span, meta: usize, time_scale: Option<f64>, occurrences: i64) {
        let (start, end) = (span.start, span.end());
        let info = self.infos[meta];
        self.advance_to(start);
        if let Some(stretch) = &mut self.stretch {
            stretch.advance(start);
            if CLASSES[usize::from(info.class)] == TimeClass::Vector {
                stretch.vector_op(start, end, meta);
            }
        }
        self.out.events += 1;
        // Events arrive in start order: the first start is the earliest.
        self.op_start.get_or_insert(start);
        self.op_end = self.op_end.max(end);
        let agg = &mut self.out.ops[meta];
        agg.occurrences += occurrences.max(1) as u64;
        agg.time += span.duration;
        agg.normalized_time += match time_scale {
            Some(scale) => scaled(span.duration, scale),
            None => span.duration,
        };
        // The step whose marker the op overlaps (ops arrive in start order).
        if self.marker.1 <= start {
            self.next_marker(start);
        }
        let step = (end > self.marker.0).then_some(self.marker_cursor);
        if start >= self.last_marker_end {
            self.out.ops_after_last_marker += 1;
        }
        if let Some(s) = step.and_then(|k| self.out.steps.get_mut(k)) {
            s.ops += 1;
            s.first_op.get_or_insert(start);
        }
        match info.role {
            AsyncRole::Start(key) => {
                self.open_starts[key as usize] += 1;
                self.active_windows += 1;
            }
            AsyncRole::Done(key) => {
                let open = &mut self.open_starts[key as usize];
                if *open > 0 {
                    *open -= 1;
                    self.closing.push(Reverse(end));
                }
            }
            AsyncRole::None => {}
        }
        let orphan = self.stack.last().is_some_and(|parent| parent.end < end);
        if !info.off_duty {
            match &mut self.active_run {
                Some((_, e)) if start <= *e => *e = (*e).max(end),
                run => {
                    if let Some((a, b)) = run.take() {
                        self.out.active += b - a;
                    }
                    *run = Some((start, end));
                }
            }
        }
        self.stack.push(Open {
            end,
            duration: end - start,
            child_time: Picos::ZERO,
            meta: meta as u32,
            step: step.map_or(NO_STEP, |k| k as u32),
            class: info.class,
            family: info.family,
            orphan,
        });
    }

    /// Closes every op that ends at or before `t` and accounts the time up to `t`.
    #[inline(always)]
    fn advance_to(&mut self, t: Picos) {
        while let Some(top) = self.stack.last() {
            if top.end > t {
                break;
            }
            let (end, class) = (top.end, top.class);
            self.emit(self.cursor, end, Some(class));
            self.cursor = self.cursor.max(end);
            self.close_top();
        }
        if self.cursor < t {
            let top = self.stack.last().map(|o| o.class);
            self.emit(self.cursor, t, top);
        }
        self.cursor = self.cursor.max(t);
    }

    #[inline(always)]
    fn close_top(&mut self) {
        let Some(op) = self.stack.pop() else { return };
        let duration = op.duration;
        let self_time = duration.saturating_sub(op.child_time);
        self.out.ops[op.meta as usize].self_time += self_time;
        if let Some(parent) = self.stack.last_mut()
            && !op.orphan
        {
            parent.child_time += duration;
        }
        if let Some(acc) = self.acc.get_mut(op.step as usize) {
            acc.family[usize::from(op.family)] += self_time;
        }
    }

    /// Moves the marker cursor past the markers that end at or before `t`.
    #[inline(never)]
    fn next_marker(&mut self, t: Picos) {
        while self.marker_cursor < self.markers.len() && self.markers[self.marker_cursor].1 <= t {
            self.marker_cursor += 1;
        }
        self.marker = marker_at(self.markers, self.marker_cursor);
    }

    /// Moves the window cursor past the windows that end at or before `t`.
    #[inline(never)]
    fn next_window(&mut self, t: Picos) {
        while self.window_cursor < self.windows.len() && self.windows[self.window_cursor].1 <= t {
            self.window_cursor += 1;
        }
        (self.window, self.next_window_start) = window_at(&self.windows, self.window_cursor);
    }

    /// Accounts `[a, b)`, run by an op of class `class` (the innermost) or by nothing, to the
    /// step windows.
    #[inline(always)]
    fn emit(&mut self, a: Picos, b: Picos, class: Option<u8>) {
        if a >= b {
            return;
        }
        // The innermost segments of the first core, for its stretch search.
        if let (Some(stretch), Some(class)) = (&mut self.stretch, class) {
            stretch.segment(a, b, CLASSES[usize::from(class)]);
        }
        // Windows close exactly at op boundaries: process every closing up to `a`.
        while let Some(&Reverse(c)) = self.closing.peek() {
            if c > a {
                break;
            }
            self.closing.pop();
            self.active_windows -= 1;
        }
        let open = self.active_windows > 0;
        if class.is_none() && !open {
            // Idle time outside async windows: the step's idle, derived in `finish`.
            return;
        }
        if self.window.1 <= a {
            self.next_window(a);
        }
        // The usual case: the segment lies inside the window the cursor is at and before the
        // next (windows overlap when another core's step took longer).
        let (lo, hi) = self.window;
        if lo <= a
            && b <= hi
            && self.next_window_start >= b
            && let Some(acc) = self.acc.get_mut(self.window_cursor)
        {
            account(acc, b - a, class, open);
            return;
        }
        for (&(lo, hi), acc) in self.windows[self.window_cursor..].iter().zip(&mut self.acc[self.window_cursor..]) {
            if lo >= b {
                break;
            }
            let (s, e) = (a.max(lo), b.min(hi));
            if s < e {
                account(acc, e - s, class, open);
            }
        }
    }

    fn finish(mut self) -> CoreTimeline {
        self.advance_to(Picos(i64::MAX));
        if let Some((a, b)) = self.active_run.take() {
            self.out.active += b - a;
        }
        self.out.op_span = self.op_start.map(|start| (start, self.op_end));
        for (k, step) in self.out.steps.iter_mut().enumerate() {
            let acc = &self.acc[k];
            let b = &mut step.breakdown;
            let families = [
                &mut b.infeed,
                &mut b.outfeed,
                &mut b.all_reduce,
                &mut b.send,
                &mut b.recv,
                &mut b.host_transfer,
                &mut b.megacore,
                &mut b.high_flops_compute,
                &mut b.other_compute,
            ];
            for (slot, &t) in families.into_iter().zip(&acc.family) {
                *slot += t;
            }
            let a = &mut step.anatomy;
            for (&class, &t) in CLASSES.iter().zip(&acc.class) {
                a.add(class, t);
            }
            a.collective_hidden += acc.collective_hidden;
            a.collective_exposed += acc.exposed_gap;
            let (lo, hi) = self.windows[k];
            a.step_time = hi - lo;
            a.idle = Picos::ZERO;
            a.idle = a.step_time.saturating_sub(a.sum());
            let busy = step.breakdown.busy();
            step.breakdown.idle = a.step_time.saturating_sub(busy);
        }
        self.out
    }
}

/// Where a marker or window cursor is past the last: a span that nothing reaches.
const PAST_THE_LAST: Picos = Picos(i64::MAX);

/// The marker at `k`, `(i64::MAX, i64::MAX)` where there is none.
fn marker_at(markers: &[(Picos, Picos)], k: usize) -> (Picos, Picos) {
    markers.get(k).copied().unwrap_or((PAST_THE_LAST, PAST_THE_LAST))
}

/// The window at `k` and the start of the next, `i64::MAX` where there is none.
fn window_at(windows: &[(Picos, Picos)], k: usize) -> ((Picos, Picos), Picos) {
    (marker_at(windows, k), windows.get(k + 1).map_or(PAST_THE_LAST, |w| w.0))
}

/// Accounts `len` of a segment run by an op of class `class` (or by nothing) to a step window;
/// `open`: an async window is open.
#[inline(always)]
fn account(acc: &mut StepAcc, len: Picos, class: Option<u8>, open: bool) {
    match class {
        Some(class) => {
            acc.class[usize::from(class)] += len;
            if open && class != COLLECTIVE_EXPOSED {
                acc.collective_hidden += len;
            }
        }
        None if open => acc.exposed_gap += len,
        None => {}
    }
}

/// `duration` scaled by a DVFS time-scale multiplier. Out of line: inlined, the walk computed
/// the scaled time of every op and then chose (with float conversions that wait on the previous
/// op's), 13 % of the walk on a line without multipliers.
#[inline(never)]
fn scaled(duration: Picos, scale: f64) -> Picos {
    Picos((duration.0 as f64 * scale) as i64)
}

/// Walks one core; `markers_in_span`: the markers are `Steps` events, which XProf counts in the
/// core's total time (program executions and the op window do not widen it).
fn walk_core(
    plane: &Plane,
    markers: &[(Picos, Picos)],
    step_times: &[Picos],
    markers_in_span: bool,
    find_stretch: bool,
) -> xlens_xplane::Result<CoreTimeline> {
    let ids = DeviceStatIds::of(plane);
    let meta = op_metadata(plane, &ids);
    let (infos, async_keys) = op_infos(plane, &meta);
    let core = match plane.kind() {
        PlaneKind::TpuTensorCore { ordinal } => ordinal,
        _ => 0,
    };
    let windows: Vec<(Picos, Picos)> = markers.iter().zip(step_times).map(|(&(s, _), &t)| (s, s + t)).collect();
    // The core's timeline before its ops are walked, over the program executions `modules`.
    // A line out of start order, whose ops are walked a second time, builds it again, as each
    // walk allocates its steps' accumulators: no copy of either is held through the walk (each
    // grows with the steps, together 330 bytes a step and core).
    let blank = |modules: Vec<(Picos, Picos, usize)>| CoreTimeline {
        core,
        plane_index: plane.index(),
        ops: vec![OpAggregate::default(); plane.event_metadata().len()],
        events: 0,
        op_span: None,
        span: None,
        steps: markers
            .iter()
            .take(step_times.len())
            .map(|&m| CoreStepSummary { marker: m, ..Default::default() })
            .collect(),
        markers: markers.to_vec(),
        ops_after_last_marker: 0,
        modules,
        active: Picos::ZERO,
        matmul_free: None,
    };
    let step_count = markers.len().min(step_times.len());
    let mut modules = Vec::new();
    if let Some(line) = plane.line_by_name(names::line::XLA_MODULES) {
        for ev in line.events(plane) {
            let ev = ev?;
            let span = device_span(&ev, &ids);
            if let Some(pos) = plane.event_metadata_position(ev.metadata_id()) {
                modules.push((span.start, span.end(), pos));
            }
        }
        modules.sort();
    }
    let (first_window, after_first_window) = window_at(&windows, 0);
    let new_walk = |out: CoreTimeline| Walk {
        infos: &infos,
        markers,
        windows: windows.clone(),
        out,
        stack: Vec::new(),
        cursor: Picos(i64::MIN),
        marker_cursor: 0,
        marker: marker_at(markers, 0),
        window_cursor: 0,
        window: first_window,
        next_window_start: after_first_window,
        open_starts: vec![0; async_keys],
        active_windows: 0,
        closing: BinaryHeap::new(),
        acc: vec![StepAcc::default(); step_count],
        last_marker_end: markers.last().map_or(Picos(i64::MAX), |m| m.1),
        op_start: None,
        op_end: Picos(i64::MIN),
        active_run: None,
        stretch: find_stretch.then(|| StretchWalk::new(windows.clone())),
    };
    let mut walk = new_walk(blank(modules));
    // The general reads' op, out of line (the bare runs' loop has its own copy of `feed`).
    let feed = |id: EventMetadataId, span: Span, scale: Option<f64>, occurrences: i64, walk: &mut Walk<'_>| {
        walk.feed(plane, id, span, scale, occurrences)
    };
    let mut in_order = true;
    if let Some(line) = plane.line_by_name(names::line::XLA_OPS) {
        // One pass when the line is in start order (the usual case); a line that is not is
        // collected, sorted and walked again from scratch.
        // The last op's place in start order (starts first, longer first); at first, before
        // every op's.
        let mut last = (Picos(i64::MIN), Reverse(Picos(i64::MAX)));
        let mut sorted = true;
        // The op line's file pages are handed back behind the walk: on a device-only snapshot
        // they are nearly all of the file, and the few detectors that walk a line again map its
        // pages back.
        // The stats the walk reads of an op (its time scale, its device clock) are gathered in
        // the decode's own pass over it: a second walk of every op's stats for the time scale
        // took 12 % of the walk.
        let read = [ids.time_scale_multiplier, ids.device_offset_ps, ids.device_duration_ps];
        let mut stats = xlens_xplane::GatheredStats::new(|id| read.contains(&Some(id)));
        let mut events = line.events_releasing(plane);
        // Runs of bare events (no stats: most of an op line) are read without an `Event` built
        // for each; the general read takes the event after a run.
        let mut run = [BareEvent::default(); 64];
        'walk: loop {
            let bare = events.next_bare_run(&mut run);
            for op in &run[..bare] {
                let span = Span { start: op.start, duration: op.duration };
                let key = (span.start, Reverse(span.duration));
                if key < last {
                    sorted = false;
                    break 'walk;
                }
                last = key;
                walk.feed(plane, op.metadata_id, span, None, 1);
            }
            if bare == run.len() {
                continue;
            }
            let Some(ev) = events.next_gathering(&mut stats) else { break };
            let ev = ev?;
            let (span, scale) = gathered_span_and_scale(&ev, stats.stats(), &ids);
            let key = (span.start, Reverse(span.duration));
            if key < last {
                sorted = false;
                break;
            }
            last = key;
            feed(ev.metadata_id(), span, scale, ev.num_occurrences().unwrap_or(1), &mut walk);
        }
        in_order = sorted;
        if !sorted {
            let modules = std::mem::take(&mut walk.out.modules);
            walk = new_walk(blank(modules));
            let mut all = Vec::with_capacity(line.event_count());
            for ev in line.events(plane) {
                let ev = ev?;
                all.push((device_span(&ev, &ids), ev));
            }
            all.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.0.duration.cmp(&a.0.duration)));
            for (span, ev) in &all {
                let scale = ids.time_scale_multiplier.and_then(|id| ev.stat(id)?.as_f64());
                feed(ev.metadata_id(), *span, scale, ev.num_occurrences().unwrap_or(1), &mut walk);
            }
        }
    }
    // The ops still open end here: their last segments reach the stretch search first.
    walk.advance_to(Picos(i64::MAX));
    let stretch = walk.stretch.take();
    let mut out = walk.finish();
    out.matmul_free = stretch.and_then(|s| s.finish(in_order));
    let mut span = out.op_span;
    for &(s, e) in markers.iter().filter(|_| markers_in_span) {
        span = Some(match span {
            Some((a, b)) => (a.min(s), b.max(e)),
            None => (s, e),
        });
    }
    out.span = span;
    Ok(out)
}

/// An op's span on the device clock and its time scale, from the stats gathered as it was
/// decoded: what [`device_span`] and the first `Time Scale Multiplier` stat give.
#[inline(always)]
fn gathered_span_and_scale(
    ev: &xlens_xplane::Event<'_>,
    stats: &[xlens_xplane::Stat<'_>],
    ids: &DeviceStatIds,
) -> (Span, Option<f64>) {
    let (start, duration) =
        crate::device::timespan_of_stats(ev, stats.iter().copied(), ids.device_offset_ps, ids.device_duration_ps);
    let scale = ids.time_scale_multiplier.and_then(|id| stats.iter().find(|s| s.metadata_id() == id)?.as_f64());
    (Span { start, duration }, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The span and time scale gathered in the decode's pass are what a walk of each op's stats
    /// finds: no stats, a time scale alone (as a float, an integer, a string), the device clock's
    /// offset and duration, repeated stats (the last offset and duration, the first time scale),
    /// and stats the walk does not read.
    #[test]
    fn gathered_span_and_scale_equal_a_walk_of_the_stats() {
        use xlens_xplane::{Space, SpaceBuilder, names::stat};
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/device:TPU:0");
            let op = plane.event_metadata("fusion.1");
            let other = plane.stat_metadata("flops");
            let scale = plane.stat_metadata(stat::TIME_SCALE_MULTIPLIER);
            let offset = plane.stat_metadata(stat::DEVICE_OFFSET_PS);
            let duration = plane.stat_metadata(stat::DEVICE_DURATION_PS);
            let mut line = plane.line(1, "XLA Ops", 0);
            line.event(op, 10, 5);
            line.event(op, 20, 5).stat(scale, 1.5);
            line.event(op, 30, 5).stat(other, 7i64).stat(scale, 2i64).stat(scale, 0.5);
            line.event(op, 40, 5).stat(scale, "x");
            line.event(op, 50, 5).stat(offset, 1000i64).stat(duration, 300i64).stat(other, 1i64);
            line.event(op, 60, 5).stat(offset, 2000i64).stat(offset, 2500i64).stat(duration, 10i64).stat(scale, 0.25);
            line.event(op, 70, 5).stat(duration, 77i64);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let plane = &space.planes()[0];
        let ids = DeviceStatIds::of(plane);
        let line = &plane.lines()[0];
        let read = [ids.time_scale_multiplier, ids.device_offset_ps, ids.device_duration_ps];
        let mut stats = xlens_xplane::GatheredStats::new(|id| read.contains(&Some(id)));
        let mut events = line.events(plane);
        let mut seen = 0;
        while let Some(ev) = events.next_gathering(&mut stats) {
            let ev = ev.unwrap();
            let walked = (device_span(&ev, &ids), ids.time_scale_multiplier.and_then(|id| ev.stat(id)?.as_f64()));
            assert_eq!(gathered_span_and_scale(&ev, stats.stats(), &ids), walked, "event at {:?}", ev.start());
            seen += 1;
        }
        assert_eq!(seen, 7);
    }

    /// Adds TensorCore `core` with `Steps` markers and `XLA Ops` events, each `(start, duration)`.
    fn tpu_core(b: &mut xlens_xplane::SpaceBuilder, core: i64, steps: &[(i64, i64)], ops: &[(i64, i64)]) {
        let mut plane = b.plane(core + 1, &format!("/device:TPU:{core}"));
        let step = plane.event_metadata("1");
        let op = plane.event_metadata("fusion.1");
        {
            let mut line = plane.line(1, "Steps", 0);
            for &(start, duration) in steps {
                line.event(step, start, duration);
            }
        }
        let mut line = plane.line(2, "XLA Ops", 0);
        for &(start, duration) in ops {
            line.event(op, start, duration);
        }
    }

    /// An op line out of start order is walked a second time, from the core's timeline before
    /// its ops (built again, with the program executions read once): the timeline is the one
    /// the same ops in start order give, whichever op comes too early.
    #[test]
    fn a_line_out_of_start_order_gives_the_timeline_of_the_sorted_line() {
        use xlens_xplane::{Space, SpaceBuilder};
        let steps: Vec<(i64, i64)> = (0..6).map(|k| (k * 100, 90)).collect();
        let ops: Vec<(i64, i64)> = (0..6).flat_map(|k| [(k * 100 + 5, 30), (k * 100 + 40, 40)]).collect();
        let build = |ops: &[(i64, i64)]| {
            let mut b = SpaceBuilder::default();
            {
                let mut plane = b.plane(1, "/device:TPU:0");
                let step = plane.event_metadata("1");
                let module = plane.event_metadata("jit_train_step(1)");
                let (fusion, conv) = (plane.event_metadata("fusion.1"), plane.event_metadata("convolution.2"));
                {
                    let mut line = plane.line(1, "Steps", 0);
                    for &(start, duration) in &steps {
                        line.event(step, start, duration);
                    }
                }
                {
                    let mut line = plane.line(2, "XLA Modules", 0);
                    for &(start, duration) in &steps {
                        line.event(module, start, duration);
                    }
                }
                let mut line = plane.line(3, "XLA Ops", 0);
                for &(start, duration) in ops {
                    line.event(if duration == 30 { fusion } else { conv }, start, duration);
                }
            }
            let space = Space::parse(b.finish().into()).unwrap();
            let mut timeline = DeviceTimeline::build(&space).unwrap();
            // The matmul-free stretch is searched on a line in start order only.
            timeline.cores[0].matmul_free = None;
            timeline
        };
        let sorted = build(&ops);
        assert_eq!(sorted.cores[0].modules.len(), steps.len());
        assert!(sorted.cores[0].steps.iter().all(|s| s.ops == 2));
        for late in [1, ops.len() / 2, ops.len() - 1] {
            let mut shuffled = ops.clone();
            shuffled.swap(late - 1, late);
            assert_eq!(build(&shuffled), sorted, "op {late} before op {}", late - 1);
        }
    }

    /// A core's step windows take the longest core's step time, so they overlap when another
    /// core's step took longer: an op in the overlap counts in both steps.
    #[test]
    fn an_op_where_step_windows_overlap_counts_in_both() {
        use xlens_xplane::{Space, SpaceBuilder};
        let mut b = SpaceBuilder::default();
        tpu_core(&mut b, 0, &[(0, 100), (100, 100)], &[(110, 30)]);
        tpu_core(&mut b, 1, &[(0, 150), (150, 100)], &[(110, 30)]);
        let space = Space::parse(b.finish().into()).unwrap();
        let timeline = DeviceTimeline::build(&space).unwrap();
        assert_eq!(timeline.step_times, [Picos(150), Picos(100)]);
        let core = timeline.cores.iter().find(|c| c.core == 0).unwrap();
        let idle: Vec<Picos> = core.steps.iter().map(|s| s.anatomy.idle).collect();
        // Windows [0, 150) and [100, 200): the op's 30 ps are busy time in each.
        assert_eq!(idle, [Picos(120), Picos(70)]);
    }

    /// Ops before the first marker, between two, across the end of one and after the last:
    /// each is counted in the step whose marker it overlaps, or in none, and only the window
    /// part of an op that crosses a window's end is busy time of that step.
    #[test]
    fn ops_around_and_past_the_markers_count_in_the_steps_they_overlap() {
        use xlens_xplane::{Space, SpaceBuilder};
        let mut b = SpaceBuilder::default();
        tpu_core(&mut b, 0, &[(100, 100), (300, 100)], &[(50, 10), (150, 20), (250, 10), (390, 30), (450, 10)]);
        let space = Space::parse(b.finish().into()).unwrap();
        let timeline = DeviceTimeline::build(&space).unwrap();
        let core = &timeline.cores[0];
        assert_eq!(core.events, 5);
        let steps: Vec<(u32, Option<Picos>, Picos)> =
            core.steps.iter().map(|s| (s.ops, s.first_op, s.anatomy.idle)).collect();
        assert_eq!(steps, [(1, Some(Picos(150)), Picos(80)), (1, Some(Picos(390)), Picos(90))]);
        assert_eq!(core.ops_after_last_marker, 1);
    }

    #[test]
    fn class_indexes_cover_every_class() {
        assert_eq!(
            usize::from(COLLECTIVE_EXPOSED),
            CLASSES.iter().position(|&c| c == TimeClass::CollectiveExposed).unwrap()
        );
        for (i, &class) in CLASSES.iter().enumerate() {
            assert_eq!(usize::from(class_index(class)), i);
        }
    }

    #[test]
    fn async_roles_pair_starts_and_dones_by_name() {
        let mut keys = HashMap::new();
        assert_eq!(async_role("all-gather-start.3", &mut keys), AsyncRole::Start(0));
        assert_eq!(async_role("all-gather-start", &mut keys), AsyncRole::Start(1));
        assert_eq!(async_role("%all-gather-done.3 = f32[8] all-gather-done(...)", &mut keys), AsyncRole::Done(0));
        assert_eq!(async_role("all-gather-done", &mut keys), AsyncRole::Done(1));
        assert_eq!(async_role("copy-done.1", &mut keys), AsyncRole::None);
        assert_eq!(async_role("collective-permute-done.1", &mut keys), AsyncRole::Done(2));
        assert_eq!(async_role("fusion.1", &mut keys), AsyncRole::None);
    }
}
