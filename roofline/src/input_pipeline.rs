//! The input time of each step of a TensorFlow GPU (or CPU-only) capture, as XProf's
//! input-pipeline analysis counts it, and the capture's `tf.data` iterator stages.
//!
//! TensorFlow groups a capture's events by step: host op events, kernel launches and the kernels
//! and copies on the GPU streams carry a `group_id` stat, and the GPU planes a derived `Steps`
//! line with one event per group. XProf's analysis (`xplane_to_step_events.cc`,
//! `event_span.cc`, `step_events_to_steps_db.cc`, `xplane_to_op_stats.cc`) then, per step group:
//!
//! - takes the step's time span from its markers: the longest device `Steps` event of the group
//!   (without a device: the longest host marker, `train…`/`test…`/`TraceContext` roots and
//!   events with a `step_name` stat);
//! - classifies the group's events: on the device (stream lines, events with a `group_id` and a
//!   `correlation_id`), `MemcpyHToD`/`MemcpyDToH`/`MemcpyDToD` copies, `nccl*` collectives and
//!   compute; on the host, `MemcpyHToD`/`InfeedEnqueue` ops are *host-to-device*, events with a
//!   `correlation_id` (kernel launches) or `ExecutorState::Process*` are *host-prepare*, and
//!   `IteratorGetNext*` is *host-wait-input* (eager wrappers, `FunctionRun` and step markers
//!   are not counted);
//! - gives every instant of the step to the highest-priority class active then (device compute
//!   over device-to-host, device-to-device, host-wait-input, device collectives, host-prepare,
//!   host-to-device, …), and calls *input* what is left to host-wait-input and host-to-device;
//! - keeps only well-formed steps (with device compute, when the capture has a device).
//!
//! XProf 2.24 adds the host's events to the steps only when the capture has no device: on a GPU
//! capture its *input* is the host-to-device copies of the device streams alone, and the time the
//! host spends in `IteratorGetNext` while the GPU idles lands in *All others*.
//! [`StepInput::xprof_input`] is that figure; [`StepInput::host_wait_input`] is the host's wait
//! on the input iterator measured against the device's work of the step with the same rule and
//! priorities (what TensorFlow's profiler counted as input on GPU before), the wait an input
//! pipeline fix removes.
//!
//! The `tf.data` stages are the host events named `Iterator::…` (one per dataset op of the
//! pipeline: `Iterator::Model::ParallelMapV2::Zip[0]::…`), with their count, total and self time
//! (less the stages nested in them on the same thread), as XProf's input-op table lists them.
//!
//! This is read where the capture carries TensorFlow's grouping (a `group_id` stat on the host
//! plane), and on TensorFlow captures that carry none (TensorFlow 2.21 writes none; XProf groups
//! the events itself): there the events are grouped as XProf groups them
//! ([`HostEventGroups`], from the `train` step roots, nesting and the producer/consumer
//! stats; on GPUs, [`DeviceEventGroups`]: each device event in its launch's group, and the
//! device markers XProf derives from the groups) and the steps are named as XProf names them
//! (`train 19`). JAX, PyTorch/XLA and TPU
//! captures have their own input rules.

use std::collections::BTreeMap;

use xlens_xplane::{Picos, Plane, Space, names};

use crate::span::Span;
use crate::span::union;
use crate::timeline::{DeviceEventGroups, HostEventGroups, TfEventGroups};

/// The most step groups read (the first ones found are kept, the others are not analysed):
/// bounds the per-step tables of a capture that marks millions of groups.
pub const MAX_INPUT_STEPS: usize = 100_000;

/// The most distinct `tf.data` stage names listed (stages first seen past it are left out):
/// bounds the stage table.
pub const MAX_TF_DATA_STAGES: usize = 10_000;

/// How XProf classifies an instant of a step, in priority order (a larger one wins where several
/// overlap; XProf's `EventType` values). Classes below host-to-device cannot change the input
/// time and are not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    HostToDevice = 80,
    HostPrepare = 90,
    DeviceCollectives = 100,
    HostWaitInput = 110,
    DeviceToDevice = 120,
    DeviceToHost = 130,
    DeviceCompute = 140,
}

/// One step's time as XProf's input-pipeline analysis splits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepInput {
    /// The step's group id (the name of its `Steps` events).
    pub group: i64,
    /// The step's name in XProf's input-pipeline analysis: the group id where the capture
    /// carries `group_id` stats, the group's name where XProf grouped it (`train 19`).
    pub name: String,
    /// The step's span (its device marker; its host marker without a device).
    pub span: Span,
    /// The host waiting on the input iterator (`IteratorGetNext*`) while the device runs
    /// nothing of the step (host and device events together).
    pub host_wait_input: Picos,
    /// Host-to-device copies (host ops and device copies together) not hidden by anything of
    /// higher priority.
    pub copy_in: Picos,
    /// Host-to-device copies not hidden by anything of higher priority, counted as XProf 2.24
    /// does: the device's copies on a GPU capture, the host's ops on a CPU-only one.
    pub host_to_device: Picos,
    /// Device compute of the step (kernels; copies and collectives apart).
    pub device_compute: Picos,
    /// True when XProf counts the host's events in this step (a capture without a device).
    pub host_counted_by_xprof: bool,
}

impl StepInput {
    /// XProf 2.24's per-step *input* time (`infeedTimeMs` of its input-pipeline analysis).
    pub fn xprof_input(&self) -> Picos {
        if self.host_counted_by_xprof { self.host_wait_input + self.copy_in } else { self.host_to_device }
    }

    /// The step's wait for input: the host's wait on the iterator and the copies in, while the
    /// device runs nothing of the step.
    pub fn input_wait(&self) -> Picos {
        self.host_wait_input + self.copy_in
    }
}

/// A `tf.data` iterator stage (a host event named `Iterator::…`) over the whole capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfDataStage {
    /// The stage name (`Iterator::Model::ParallelMapV2`, …).
    pub name: String,
    /// Occurrences.
    pub count: u64,
    /// Total time.
    pub total: Picos,
    /// Total time less the stages nested in it on the same thread.
    pub self_time: Picos,
}

/// The input pipeline of a TensorFlow capture: the input time of every step and the `tf.data`
/// stages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputPipeline {
    /// The well-formed steps, by group id.
    pub steps: Vec<StepInput>,
    /// The `tf.data` stages, largest self time first (then by name).
    pub stages: Vec<TfDataStage>,
}

impl InputPipeline {
    /// Reads the input pipeline of a space that carries TensorFlow's step grouping (a
    /// `group_id` stat on the `/host:CPU` plane), or of a TensorFlow capture without one whose
    /// events XProf would group ([`HostEventGroups`], and [`DeviceEventGroups`] with GPUs);
    /// `None` for any other capture (no host plane, no grouping, or TPU planes).
    ///
    /// ```
    /// use xlens_roofline::InputPipeline;
    /// use xlens_xplane::{Space, SpaceBuilder, names};
    /// // A host plane without TensorFlow's step grouping: nothing to read.
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut host = b.plane(1, names::plane::HOST_CPU);
    ///     let next = host.event_metadata("IteratorGetNext");
    ///     host.line(1, "python", 0).event(next, 0, 1_000);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// assert!(InputPipeline::read(&space)?.is_none());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(space: &Space) -> xlens_xplane::Result<Option<InputPipeline>> {
        InputPipeline::read_grouped(space, TfEventGroups::build(space)?.as_ref())
    }

    /// [`InputPipeline::read`] with XProf's grouping of the capture already made
    /// ([`TfEventGroups::build`] of the same space; a [`crate::HostProfile`] keeps it): the
    /// groups come from TensorFlow's `group_id` stats where the host plane has them, else from
    /// `groups`.
    pub fn read_grouped(space: &Space, groups: Option<&TfEventGroups>) -> xlens_xplane::Result<Option<InputPipeline>> {
        let Some(host) = space.host_threads() else { return Ok(None) };
        if !space.tpu_tensor_cores().is_empty() {
            return Ok(None);
        }
        let gpus = space.gpus();
        let (grouping, devices) = match (host.stat_id(names::stat::GROUP_ID), groups) {
            (Some(id), _) => (Grouping::Stat(id), None),
            // Without TensorFlow's stats: XProf's own grouping (the device events, with GPUs, in
            // their launches' groups).
            (None, Some(g)) => (Grouping::Derived(&g.host), g.devices.as_ref()),
            (None, None) => return Ok(None),
        };
        let mut groups: BTreeMap<i64, Group> = BTreeMap::new();
        for plane in &gpus {
            read_device_markers(plane, devices, &mut groups)?;
        }
        let has_device = !gpus.is_empty();
        for plane in &gpus {
            read_device_events(plane, devices, &mut groups)?;
        }
        let stages = read_host(host, has_device, &grouping, &mut groups)?;
        let mut steps = Vec::new();
        for (&group, g) in &groups {
            if let Some(mut step) = g.step(group, has_device) {
                if let Grouping::Derived(d) = &grouping
                    && let Some(name) = d.name(group)
                {
                    step.name = name.to_string();
                }
                steps.push(step);
            }
        }
        Ok(Some(InputPipeline { steps, stages }))
    }

    /// The steps by the names a step list gives them: each under its group id (`7`) and under
    /// its name (`train 19` where XProf named the group it made).
    pub fn steps_by_name(&self) -> BTreeMap<String, &StepInput> {
        self.steps.iter().flat_map(|s| [(s.group.to_string(), s), (s.name.clone(), s)]).collect()
    }

    /// Total step time of the well-formed steps.
    pub fn step_time(&self) -> Picos {
        self.steps.iter().map(|s| s.span.duration()).sum()
    }

    /// Total input wait of the well-formed steps ([`StepInput::input_wait`]).
    pub fn input_wait(&self) -> Picos {
        self.steps.iter().map(StepInput::input_wait).sum()
    }

    /// The input wait's share of the step time, in % (`None` without steps).
    pub fn input_wait_pct(&self) -> Option<f64> {
        let total = self.step_time();
        (total.0 > 0).then(|| 100.0 * self.input_wait().0 as f64 / total.0 as f64)
    }
}

/// What one step group holds while the capture is read.
#[derive(Default)]
struct Group {
    device_marker: Option<Span>,
    host_marker: Option<Span>,
    /// (class, span, on the device)
    events: Vec<(Class, Span, bool)>,
}

impl Group {
    /// XProf's `StepDetails::StepTime` over the markers XProf 2.24 combines: the device marker
    /// (host markers only count without a device).
    fn span(&self) -> Option<Span> {
        self.device_marker.or(self.host_marker)
    }

    fn step(&self, group: i64, has_device: bool) -> Option<StepInput> {
        let span = self.span().filter(|s| !s.is_empty())?;
        // The spans of the classes `keep` selects (device events only: `device_only`), clipped
        // to the step, as a union.
        let spans = |keep: &dyn Fn(Class) -> bool, device_only: bool| -> Vec<Span> {
            let v = self
                .events
                .iter()
                .filter(|&&(c, _, on_device)| keep(c) && (on_device || !device_only))
                .map(|&(_, s, _)| Span::new(s.start.max(span.start), s.end.min(span.end)))
                .filter(|s| !s.is_empty())
                .collect();
            union(v)
        };
        let compute = spans(&|c| c == Class::DeviceCompute, true);
        if has_device && compute.is_empty() {
            return None;
        }
        // XProf 2.24: on a capture with a device, the device's events only.
        let host_to_device = uncovered(
            &spans(&|c| c == Class::HostToDevice, has_device),
            &spans(&|c| c > Class::HostToDevice, has_device),
        );
        let host_wait_input =
            uncovered(&spans(&|c| c == Class::HostWaitInput, false), &spans(&|c| c > Class::HostWaitInput, false));
        let copy_in =
            uncovered(&spans(&|c| c == Class::HostToDevice, false), &spans(&|c| c > Class::HostToDevice, false));
        Some(StepInput {
            group,
            name: group.to_string(),
            span,
            host_wait_input,
            copy_in,
            host_to_device,
            device_compute: compute.iter().map(|s| s.duration()).sum(),
            host_counted_by_xprof: !has_device,
        })
    }
}

/// Where the step groups of the host events come from.
enum Grouping<'g> {
    /// TensorFlow's `group_id` stat.
    Stat(xlens_xplane::StatMetadataId),
    /// XProf's grouping, made here.
    Derived(&'g HostEventGroups),
}

impl Grouping<'_> {
    /// The group of the event at position `line` of the plane's lines.
    fn of(&self, line: usize, ev: &xlens_xplane::Event<'_>) -> Option<i64> {
        match self {
            Grouping::Stat(id) => group_of(ev, Some(*id)),
            Grouping::Derived(g) => g.group(line, ev.index()),
        }
    }

    /// True for the host events that mark a step: explicit markers, or the events with a
    /// `step_name` stat (those TensorFlow's grouping names; XProf's own grouping names its
    /// roots that are not implicit).
    fn is_marker(
        &self,
        line: usize,
        ev: &xlens_xplane::Event<'_>,
        step_name: Option<xlens_xplane::StatMetadataId>,
    ) -> bool {
        is_host_marker(ev, step_name) || matches!(self, Grouping::Derived(g) if g.is_named_root(line, ev.index()))
    }
}

/// The group of an event: its `group_id` stat.
fn group_of(ev: &xlens_xplane::Event<'_>, id: Option<xlens_xplane::StatMetadataId>) -> Option<i64> {
    id.and_then(|id| ev.stat(id)).and_then(|s| s.value().as_i64())
}

/// Keeps a step group's longest device marker (a new group only below [`MAX_INPUT_STEPS`]).
fn mark_device(groups: &mut BTreeMap<i64, Group>, group: i64, span: Span) {
    if groups.len() >= MAX_INPUT_STEPS && !groups.contains_key(&group) {
        return;
    }
    let g = groups.entry(group).or_default();
    if g.device_marker.is_none_or(|m| span.duration() > m.duration()) {
        g.device_marker = Some(span);
    }
}

/// The `Steps` events of a GPU plane (those XProf derives from the grouping made here, where
/// `devices` is given): each group's longest one is its device marker.
fn read_device_markers(
    plane: &Plane,
    devices: Option<&DeviceEventGroups>,
    groups: &mut BTreeMap<i64, Group>,
) -> xlens_xplane::Result<()> {
    if let Some(d) = devices {
        for &(group, span) in d.step_markers(plane) {
            mark_device(groups, group, span);
        }
        return Ok(());
    }
    let Some(line) = plane.line_by_name(names::line::STEPS) else { return Ok(()) };
    let gid = plane.stat_id(names::stat::GROUP_ID);
    for ev in line.events(plane) {
        let ev = ev?;
        let Some(group) = group_of(&ev, gid).or_else(|| ev.name().parse().ok()) else { continue };
        mark_device(groups, group, Span::new(ev.start(), ev.end()));
    }
    Ok(())
}

/// XProf's class of a device event (`ClassifyGpuEvent`).
fn device_class(name: &str) -> Class {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("memcpyhtod") {
        Class::HostToDevice
    } else if lower.starts_with("memcpydtoh") {
        Class::DeviceToHost
    } else if lower.starts_with("memcpydtod") {
        Class::DeviceToDevice
    } else if lower.starts_with("nccl") {
        Class::DeviceCollectives
    } else {
        Class::DeviceCompute
    }
}

/// The stream events of a GPU plane that belong to a step (a `group_id`, or the group `devices`
/// gives, of a step with a device marker, and a `correlation_id`).
fn read_device_events(
    plane: &Plane,
    devices: Option<&DeviceEventGroups>,
    groups: &mut BTreeMap<i64, Group>,
) -> xlens_xplane::Result<()> {
    let gid = plane.stat_id(names::stat::GROUP_ID);
    let Some(corr) = plane.stat_id(names::stat::CORRELATION_ID) else { return Ok(()) };
    if gid.is_none() && devices.is_none() {
        return Ok(());
    }
    for (li, line) in plane.lines().iter().enumerate().filter(|(_, l)| !names::line::is_derived(l.id().0, l.name())) {
        for ev in line.events(plane) {
            let ev = ev?;
            if ev.stat(corr).is_none() {
                continue;
            }
            let group = match devices {
                Some(d) => d.group(plane, li, ev.index()),
                None => group_of(&ev, gid),
            };
            let Some(group) = group else { continue };
            if let Some(g) = groups.get_mut(&group).filter(|g| g.device_marker.is_some()) {
                g.events.push((device_class(ev.name()), Span::new(ev.start(), ev.end()), true));
            }
        }
    }
    Ok(())
}

/// XProf's explicit host step markers (`IsExplicitHostStepMarker`).
fn is_explicit_marker(name: &str) -> bool {
    crate::is_host_step_marker(name)
}

/// Host events XProf does not count as host work (`IsRealCpuCompute`).
fn is_wrapper(name: &str) -> bool {
    name.starts_with("EagerExecute")
        || name.starts_with("EagerLocalExecute")
        || name.starts_with("EagerKernelExecute")
        || name.starts_with("FunctionRun")
        || is_explicit_marker(name)
}

/// The TensorFlow op type of a host event named `name:type` (the name itself otherwise).
fn op_type(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, t)| t)
}

/// XProf's class of a host event (`ClassifyCpuEvent`), `None` for the classes below
/// host-to-device.
fn host_class(name: &str, has_device: bool, has_correlation: bool) -> Option<Class> {
    let ty = op_type(name);
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("memcpyhtod") || ty == "InfeedEnqueue" || ty == "InfeedEnqueueTuple" {
        Some(Class::HostToDevice)
    } else if lower.starts_with("memcpyhtoh") {
        None
    } else if has_device && (has_correlation || lower.starts_with("executorstate::process")) {
        Some(Class::HostPrepare)
    } else if lower.starts_with("iteratorgetnext") {
        Some(Class::HostWaitInput)
    } else {
        None
    }
}

/// True for the host events that mark a step: explicit markers, or events with a `step_name`
/// stat (the implicit markers TensorFlow's grouping names).
fn is_host_marker(ev: &xlens_xplane::Event<'_>, step_name: Option<xlens_xplane::StatMetadataId>) -> bool {
    is_explicit_marker(ev.name()) || step_name.is_some_and(|id| ev.stat(id).is_some())
}

/// Keeps the longer of a group's host markers.
fn mark_host(g: &mut Group, span: Span) {
    if g.host_marker.is_none_or(|m| span.duration() > m.duration()) {
        g.host_marker = Some(span);
    }
}

/// Reads the host plane: each group's classified events, and the `tf.data` stages of the whole
/// capture. With a device, only the groups of device steps are read (XProf drops host events of
/// other groups); without one, the host markers make the steps (a first pass finds them).
fn read_host(
    host: &Plane,
    has_device: bool,
    grouping: &Grouping<'_>,
    groups: &mut BTreeMap<i64, Group>,
) -> xlens_xplane::Result<Vec<TfDataStage>> {
    let corr = host.stat_id(names::stat::CORRELATION_ID);
    let step_name = host.stat_id(names::stat::STEP_NAME);
    if !has_device {
        for (li, line) in host.lines().iter().enumerate() {
            for ev in line.events(host) {
                let ev = ev?;
                if grouping.is_marker(li, &ev, step_name)
                    && let Some(group) = grouping.of(li, &ev)
                    && (groups.len() < MAX_INPUT_STEPS || groups.contains_key(&group))
                {
                    mark_host(groups.entry(group).or_default(), Span::new(ev.start(), ev.end()));
                }
            }
        }
    }
    // name → (count, total, self)
    let mut stages: BTreeMap<&str, (u64, Picos, Picos)> = BTreeMap::new();
    for (li, line) in host.lines().iter().enumerate() {
        // The open `tf.data` stages of this thread (end, stage name), innermost last.
        let mut open: Vec<(Picos, &str)> = Vec::new();
        for ev in line.events(host) {
            let ev = ev?;
            let span = Span::new(ev.start(), ev.end());
            let name = ev.name();
            if name.starts_with("Iterator::") {
                stage(&mut stages, &mut open, name, span);
            }
            let Some(g) = grouping.of(li, &ev).and_then(|group| groups.get_mut(&group)) else { continue };
            // Step markers and wrappers are not host work.
            if !grouping.is_marker(li, &ev, step_name)
                && !is_wrapper(name)
                && let Some(class) = host_class(name, has_device, corr.is_some_and(|id| ev.stat(id).is_some()))
            {
                g.events.push((class, span, false));
            }
        }
    }
    let mut out: Vec<TfDataStage> = stages
        .into_iter()
        .map(|(name, (count, total, self_time))| TfDataStage { name: name.to_string(), count, total, self_time })
        .collect();
    out.sort_by(|a, b| b.self_time.cmp(&a.self_time).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

/// Adds one `tf.data` stage event (events of a line come by start): its time to its name, less
/// from the stage it is nested in.
fn stage<'a>(
    stages: &mut BTreeMap<&'a str, (u64, Picos, Picos)>,
    open: &mut Vec<(Picos, &'a str)>,
    name: &'a str,
    span: Span,
) {
    while open.last().is_some_and(|&(end, _)| end <= span.start) {
        open.pop();
    }
    let duration = span.duration();
    if let Some(&(end, parent)) = open.last()
        && span.end <= end
        && let Some(p) = stages.get_mut(parent)
    {
        p.2 = p.2.saturating_sub(duration);
    }
    if stages.len() < MAX_TF_DATA_STAGES || stages.contains_key(name) {
        let s = stages.entry(name).or_insert((0, Picos::ZERO, Picos::ZERO));
        s.0 += 1;
        s.1 += duration;
        s.2 += duration;
        open.push((span.end, name));
    }
}

/// The time of `a` (sorted, disjoint) not covered by `b` (sorted, disjoint).
fn uncovered(a: &[Span], b: &[Span]) -> Picos {
    let mut total = Picos::ZERO;
    let mut j = 0;
    for s in a {
        let mut left = s.duration();
        while j < b.len() && b[j].end <= s.start {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].start < s.end {
            left = left.saturating_sub(s.overlap(b[k]));
            k += 1;
        }
        total += left;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::SpaceBuilder;

    const US: i64 = 1_000_000;

    /// One GPU step of group 7 over [0, 1000) us whose kernels run [600, 1000) us; the host
    /// waits in IteratorGetNext over [100, 700) us and launches a kernel over [650, 660) us.
    fn tf_space(with_group: bool) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let gid = host.stat_metadata(names::stat::GROUP_ID);
            let corr = host.stat_metadata(names::stat::CORRELATION_ID);
            let next = host.event_metadata("IteratorGetNext:IteratorGetNext");
            let launch = host.event_metadata("cudaLaunchKernel");
            let stage = host.event_metadata("Iterator::Model::Map");
            let inner = host.event_metadata("Iterator::Model::Map::TensorSlice");
            {
                let mut line = host.line(1, "python", 0);
                if with_group {
                    line.event(next, 100 * US, 600 * US).stat(gid, 7i64);
                    line.event(launch, 650 * US, 10 * US).stat(gid, 7i64).stat(corr, 1i64);
                } else {
                    line.event(next, 100 * US, 600 * US);
                }
            }
            let mut data = host.line(2, "tf_data", 0);
            data.event(stage, 0, 300 * US);
            data.event(inner, 50 * US, 100 * US);
        }
        {
            let mut gpu = b.plane(2, "/device:GPU:0");
            let gid = gpu.stat_metadata(names::stat::GROUP_ID);
            let corr = gpu.stat_metadata(names::stat::CORRELATION_ID);
            let kernel = gpu.event_metadata("volta_sgemm_128x64_nn");
            let step = gpu.event_metadata("7");
            gpu.line(1000, names::line::STEPS, 0).event(step, 0, 1000 * US).stat(gid, 7i64);
            gpu.line(3, "Stream #7(Compute)", 0).event(kernel, 600 * US, 400 * US).stat(gid, 7i64).stat(corr, 1i64);
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn input_is_the_iterator_wait_the_device_does_not_cover() {
        let ip = InputPipeline::read(&tf_space(true)).unwrap().unwrap();
        assert_eq!(ip.steps.len(), 1);
        let s = &ip.steps[0];
        assert_eq!((s.group, s.span), (7, Span::new(Picos(0), Picos(1000 * US))));
        // IteratorGetNext [100, 700) less the kernel [600, 1000): 500 us.
        assert_eq!(s.host_wait_input, Picos(500 * US));
        assert_eq!(s.device_compute, Picos(400 * US));
        assert_eq!(ip.input_wait_pct(), Some(50.0));
        // XProf 2.24 does not add the host's events to the steps of a GPU capture.
        assert_eq!(s.xprof_input(), Picos::ZERO);
        // Stages: the Map's self time excludes the nested TensorSlice.
        assert_eq!(ip.stages[0].name, "Iterator::Model::Map");
        assert_eq!((ip.stages[0].total, ip.stages[0].self_time), (Picos(300 * US), Picos(200 * US)));
        assert_eq!(ip.stages[1].self_time, Picos(100 * US));
    }

    #[test]
    fn events_outside_every_group_do_not_count() {
        let ip = InputPipeline::read(&tf_space(false)).unwrap().unwrap();
        assert_eq!(ip.steps.len(), 1);
        assert_eq!(ip.input_wait(), Picos::ZERO);
    }

    #[test]
    fn uncovered_subtracts_overlaps() {
        let sp = |a: i64, b: i64| Span::new(Picos(a), Picos(b));
        assert_eq!(uncovered(&[sp(0, 10), sp(20, 30)], &[sp(5, 25)]), Picos(10));
        assert_eq!(uncovered(&[sp(0, 10)], &[]), Picos(10));
        assert_eq!(union(vec![sp(5, 8), sp(0, 6), sp(10, 12)]), vec![sp(0, 8), sp(10, 12)]);
    }
}
