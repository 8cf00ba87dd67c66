//! XProf's step grouping of GPU device events, for TensorFlow GPU captures that do not carry it.
//!
//! A TensorFlow capture written without post-processing (TensorFlow 2.21) has no `group_id`
//! stat on any plane and no `Steps` line on its GPU planes. XProf then groups the events itself
//! (`group_events.cc`, `GroupTfEvents`, over every plane of the space) and derives the `Steps`
//! lines from the groups (`derived_timeline.cc`, `DeriveStepEventsFromGroups`). The host side
//! is [`HostEventGroups`]; this module adds the device side:
//!
//! - **Launch to kernel.** A device event with a `correlation_id` stat (a kernel or a copy on a
//!   stream line; XProf's `KernelExecute`) is the child of the host launch event with the same
//!   correlation id (`KernelLaunch`, [`HostEventGroups::launch_group`]): it inherits the
//!   launch's group.
//! - **Nesting.** On each device line an event is also the child of the innermost event that
//!   contains it (start order, longer first; `_a` events left out), as on host lines.
//! - **Groups.** A device event's group is the first group (lowest id) that reaches it through
//!   either parent: the lower of its launch's group and its enclosing event's group. Device
//!   events root no group and lead to no host event, so the host groups are unchanged.
//! - **Ungrouped events.** XProf then gives every device event still without a group the group
//!   of the latest grouped event before it on the same plane (all lines, in start order;
//!   `ProcessUngroupedEvents` in `derived_timeline.cc`, for eager events between graph ones):
//!   a copy launched outside any step (a `tf.data` function's) lands in the step running then.
//!   Events before the plane's first grouped event stay ungrouped.
//! - **Steps.** Each plane's grouped events in start order (longer first on ties), runs of one
//!   group merged, give the plane's derived `Steps` events: one per run, named by the group id,
//!   from the run's first start to its latest end.
//!
//! Derived lines (`Steps`, `TensorFlow Ops`, …) are not read: a capture without groups has none
//! that depend on them, and XProf derives them after the grouping.

use xlens_xplane::{Picos, Plane, Space, StatValue, names};

use super::groups::{HostEventGroups, MAX_GROUPED_EVENTS, is_launch_name};
use crate::span::Span;

/// One GPU plane's grouped events and derived steps.
#[derive(Clone, Debug, Default)]
struct PlaneGroups {
    /// The plane's position in the space.
    plane: usize,
    /// Per line (the plane's line order), per event: its group, or `u32::MAX` for none; empty
    /// for derived lines.
    by_event: Vec<Vec<u32>>,
    /// The derived `Steps` events: (group, span), in start order.
    steps: Vec<(i64, Span)>,
}

/// The device events of a TensorFlow GPU capture without `group_id` stats, grouped into the
/// host's steps as XProf groups them (see the module notes).
#[derive(Clone, Debug, Default)]
pub struct DeviceEventGroups {
    planes: Vec<PlaneGroups>,
}

impl DeviceEventGroups {
    /// True when XProf would group this capture's events itself, device events included: a
    /// TensorFlow capture (executor events on `/host:CPU`) with GPU planes and no `group_id`
    /// stat metadata on any plane (a capture that carries TensorFlow's grouping keeps it). Reads
    /// metadata only.
    pub fn applies(space: &Space) -> bool {
        let Some(host) = space.host_threads() else { return false };
        let gpus = space.gpus();
        !gpus.is_empty()
            && space.planes().iter().all(|p| p.stat_id(names::stat::GROUP_ID).is_none())
            && HostEventGroups::has_tensorflow_executor(host)
    }

    /// Groups the device events of every GPU plane by their launches' groups (`host`, the
    /// grouping of the space's `/host:CPU` plane). `None` when the planes hold more than
    /// [`MAX_GROUPED_EVENTS`] events together (they are not grouped).
    ///
    /// ```
    /// use xlens_roofline::{DeviceEventGroups, HostEventGroups};
    /// use xlens_xplane::{Space, SpaceBuilder, names};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut host = b.plane(1, names::plane::HOST_CPU);
    ///     let root = host.stat_metadata(names::stat::IS_ROOT);
    ///     let corr = host.stat_metadata(names::stat::CORRELATION_ID);
    ///     let run = host.event_metadata("ExecutorState::Process");
    ///     let launch = host.event_metadata("cuLaunchKernel");
    ///     let mut line = host.line(1, "tf_Compute", 0);
    ///     line.event(run, 0, 1_000).stat(root, 1i64);
    ///     line.event(launch, 100, 10).stat(corr, 7u64);
    /// }
    /// {
    ///     let mut gpu = b.plane(2, "/device:GPU:0");
    ///     let corr = gpu.stat_metadata(names::stat::CORRELATION_ID);
    ///     let kernel = gpu.event_metadata("gemm");
    ///     gpu.line(7, "Stream #7(Compute)", 0).event(kernel, 200, 300).stat(corr, 7u64);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// assert!(DeviceEventGroups::applies(&space));
    /// let host = HostEventGroups::build(space.host_threads().unwrap())?.unwrap();
    /// let devices = DeviceEventGroups::build(&space, &host)?.unwrap();
    /// let gpu = &space.gpus()[0];
    /// assert_eq!(devices.group(gpu, 0, 0), Some(0));
    /// assert_eq!(devices.step_markers(gpu).len(), 1);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(space: &Space, host: &HostEventGroups) -> xlens_xplane::Result<Option<DeviceEventGroups>> {
        let mut planes = Vec::new();
        let mut seen = 0usize;
        for plane in space.gpus() {
            let Some(groups) = group_plane(plane, host, &mut seen)? else { return Ok(None) };
            planes.push(groups);
        }
        Ok(Some(DeviceEventGroups { planes }))
    }

    fn plane(&self, plane: &Plane) -> Option<&PlaneGroups> {
        self.planes.iter().find(|p| p.plane == plane.index())
    }

    /// The group of the event at `index` (its position in the line) of the line at position
    /// `line` of a GPU plane of the space.
    pub fn group(&self, plane: &Plane, line: usize, index: usize) -> Option<i64> {
        let g = *self.plane(plane)?.by_event.get(line)?.get(index)?;
        (g != u32::MAX).then_some(i64::from(g))
    }

    /// The `Steps` events XProf derives for a GPU plane of the space: (group id, span), in
    /// start order; empty for a plane without grouped events.
    pub fn step_markers(&self, plane: &Plane) -> &[(i64, Span)] {
        self.plane(plane).map_or(&[], |p| p.steps.as_slice())
    }

    /// True when no device event is in a group.
    pub fn is_empty(&self) -> bool {
        self.planes.iter().all(|p| p.steps.is_empty())
    }
}

/// An integer stat as XProf's `IntOrUintValue` (the bits of either).
fn int_bits(value: StatValue<'_>) -> Option<u64> {
    match value {
        StatValue::Int(v) => Some(v as u64),
        StatValue::Uint(v) => Some(v),
        _ => None,
    }
}

/// One device event while a line is grouped.
struct DeviceNode {
    start: Picos,
    end: Picos,
    index: u32,
    /// The group of its launch (`u32::MAX` for none).
    launch: u32,
    is_async: bool,
}

/// Groups one GPU plane; `None` once `seen` (events of the planes so far) passes the limit.
fn group_plane(plane: &Plane, host: &HostEventGroups, seen: &mut usize) -> xlens_xplane::Result<Option<PlaneGroups>> {
    let corr = plane.stat_id(names::stat::CORRELATION_ID);
    let is_async = plane.stat_id(names::stat::IS_ASYNC);
    let launches = plane.metadata_mask(|m| is_launch_name(m.name()));
    let mut by_event = Vec::with_capacity(plane.lines().len());
    // Every event of the plane's stream lines: (start, end, line, index).
    let mut all: Vec<(Picos, Picos, u32, u32)> = Vec::new();
    for line in plane.lines() {
        if names::line::is_derived(line.id().0, line.name()) {
            by_event.push(Vec::new());
            continue;
        }
        *seen = seen.saturating_add(line.event_count());
        if *seen > MAX_GROUPED_EVENTS {
            return Ok(None);
        }
        let mut nodes = Vec::with_capacity(line.event_count());
        for ev in line.events(plane) {
            let ev = ev?;
            let launch = match corr {
                Some(id) if host.has_launches() && launches.contains(&ev) => {
                    ev.stat(id).and_then(|s| int_bits(s.value())).and_then(|c| host.launch_group(c)).unwrap_or(u32::MAX)
                }
                _ => u32::MAX,
            };
            nodes.push(DeviceNode {
                start: ev.start(),
                end: ev.end(),
                index: ev.index() as u32,
                launch,
                is_async: is_async.is_some_and(|id| ev.stat(id).is_some()),
            });
        }
        // Each event's group: its launch's, lowered to its enclosing event's (parents come
        // before their children, so a parent's group is final when its child takes it).
        let mut groups: Vec<u32> = nodes.iter().map(|n| n.launch).collect();
        let mut nested: Vec<(Picos, Picos, u32, usize)> =
            nodes.iter().enumerate().filter(|(_, n)| !n.is_async).map(|(i, n)| (n.start, n.end, n.index, i)).collect();
        super::nest_events(&mut nested, &mut Vec::new(), |parent, child| {
            groups[child] = groups[child].min(groups[parent]);
        });
        let mut by_index = vec![u32::MAX; nodes.len()];
        for (n, &group) in nodes.iter().zip(&groups) {
            if let Some(slot) = by_index.get_mut(n.index as usize) {
                *slot = group;
            }
            all.push((n.start, n.end, by_event.len() as u32, n.index));
        }
        by_event.push(by_index);
    }
    // XProf's `ProcessUngroupedEvents`, then `DeriveStepEventsFromGroups` (runs of one group),
    // both over the plane's events in start order.
    all.sort_by_key(|&(start, end, line, index)| (start, std::cmp::Reverse(end), line, index));
    let mut latest = u32::MAX;
    let mut steps: Vec<(i64, Span)> = Vec::new();
    for (start, end, line, index) in all {
        let Some(slot) = by_event.get_mut(line as usize).and_then(|v| v.get_mut(index as usize)) else { continue };
        if *slot == u32::MAX {
            *slot = latest;
        } else {
            latest = *slot;
        }
        let group = *slot;
        if group == u32::MAX {
            continue;
        }
        match steps.last_mut() {
            Some((g, span)) if *g == i64::from(group) => span.end = span.end.max(end),
            _ => steps.push((i64::from(group), Span::new(start, end))),
        }
    }
    Ok(Some(PlaneGroups { plane: plane.index(), by_event, steps }))
}

/// XProf's own step grouping of a TensorFlow capture that carries none: the host's
/// ([`HostEventGroups`]) and, on GPUs, the devices' ([`DeviceEventGroups`]). Built once per host
/// and read by the steps and the input pipeline.
#[derive(Clone, Debug)]
pub struct TfEventGroups {
    /// The host events' groups.
    pub host: HostEventGroups,
    /// The device events' groups (`None` on a capture without GPUs).
    pub devices: Option<DeviceEventGroups>,
}

impl TfEventGroups {
    /// The grouping XProf makes of a TensorFlow capture without `group_id` stats: a `/host:CPU`
    /// plane with TensorFlow executor events, no TPU planes, and either no GPU planes or GPU
    /// planes that carry no `group_id` either ([`DeviceEventGroups::applies`]). `None` for any
    /// other capture, and where the grouping finds no TensorFlow step or too many events.
    /// Metadata alone rules out the captures it does not apply to.
    pub fn build(space: &Space) -> xlens_xplane::Result<Option<TfEventGroups>> {
        let Some(host) = space.host_threads() else { return Ok(None) };
        let gpus = space.gpus();
        if !space.tpu_tensor_cores().is_empty()
            || host.stat_id(names::stat::GROUP_ID).is_some()
            || !HostEventGroups::has_tensorflow_executor(host)
            || (!gpus.is_empty() && !DeviceEventGroups::applies(space))
        {
            return Ok(None);
        }
        let Some(groups) = HostEventGroups::build(host)?.filter(|g| g.is_tensorflow() && !g.is_empty()) else {
            return Ok(None);
        };
        let devices = if gpus.is_empty() {
            None
        } else {
            let Some(d) = DeviceEventGroups::build(space, &groups)? else { return Ok(None) };
            Some(d)
        };
        Ok(Some(TfEventGroups { host: groups, devices }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::SpaceBuilder;

    /// Two steps (`FunctionRun` roots at 0 and 1 000) on the host, each launching kernels; on
    /// the device, kernels take their launch's group, a kernel nested in another takes the lower
    /// group, a TF-op-named host event with a correlation id is no launch, the last launch of a
    /// repeated id wins, an ungrouped kernel takes the latest group before it (none before the
    /// first grouped one), and the derived `Steps` follow runs of one group in time order.
    #[test]
    fn kernels_take_their_launches_groups_and_runs_make_steps() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let corr = host.stat_metadata(names::stat::CORRELATION_ID);
            let run = host.event_metadata("FunctionRun");
            let launch = host.event_metadata("cuLaunchKernel");
            let op = host.event_metadata("dense/MatMul:MatMul");
            let mut line = host.line(1, "python", 0);
            line.event(run, 0, 900).stat(root, 1i64);
            line.event(launch, 10, 5).stat(corr, 1u64);
            line.event(launch, 20, 5).stat(corr, 2u64);
            line.event(op, 30, 5).stat(corr, 3u64);
            line.event(launch, 40, 5).stat(corr, 4u64);
            line.event(run, 1_000, 900).stat(root, 1i64);
            line.event(launch, 1_010, 5).stat(corr, 5u64);
            // Correlation id 4 again, in the second step: this launch is the one kept.
            line.event(launch, 1_020, 5).stat(corr, 4u64);
            // A launch outside any step.
            line.event(launch, 2_000, 5).stat(corr, 6u64);
        }
        {
            let mut gpu = b.plane(2, "/device:GPU:0");
            let corr = gpu.stat_metadata(names::stat::CORRELATION_ID);
            let k = gpu.event_metadata("kernel");
            let mut s = gpu.line(7, "Stream #7(Compute)", 0);
            s.event(k, 20, 10).stat(corr, 3u64); // a TF op's id: no launch, nothing before it
            s.event(k, 100, 100).stat(corr, 1u64); // step 0
            s.event(k, 300, 400).stat(corr, 2u64); // step 0, encloses the next
            s.event(k, 350, 50).stat(corr, 5u64); // launched in step 1, nested in step 0's
            s.event(k, 800, 50).stat(corr, 3u64); // no launch: the latest group, step 0
            s.event(k, 1_100, 50).stat(corr, 4u64); // the last launch with id 4: step 1
            s.event(k, 1_200, 50).stat(corr, 1u64); // step 0 again, after step 1's kernel
            s.event(k, 2_100, 50).stat(corr, 6u64); // a launch in no group: step 0, the latest
        }
        let space = Space::parse(b.finish().into()).unwrap();
        assert!(DeviceEventGroups::applies(&space));
        let host = HostEventGroups::build(space.host_threads().unwrap()).unwrap().unwrap();
        let d = DeviceEventGroups::build(&space, &host).unwrap().unwrap();
        let gpu = &space.gpus()[0];
        let groups: Vec<Option<i64>> = (0..8).map(|i| d.group(gpu, 0, i)).collect();
        assert_eq!(groups, [None, Some(0), Some(0), Some(0), Some(0), Some(1), Some(0), Some(0)]);
        let steps: Vec<(i64, i64, i64)> = d.step_markers(gpu).iter().map(|&(g, s)| (g, s.start.0, s.end.0)).collect();
        assert_eq!(steps, [(0, 100, 850), (1, 1_100, 1_150), (0, 1_200, 2_150)]);
    }

    /// A capture that carries `group_id` anywhere keeps its own grouping.
    #[test]
    fn captures_with_group_ids_are_not_regrouped() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let run = host.event_metadata("ExecutorState::Process");
            host.line(1, "tf_Compute", 0).event(run, 0, 10);
        }
        {
            let mut gpu = b.plane(2, "/device:GPU:0");
            let gid = gpu.stat_metadata(names::stat::GROUP_ID);
            let k = gpu.event_metadata("kernel");
            gpu.line(7, "Stream #7(Compute)", 0).event(k, 0, 10).stat(gid, 3i64);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        assert!(!DeviceEventGroups::applies(&space));
    }
}
