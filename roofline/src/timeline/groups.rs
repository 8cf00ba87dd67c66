//! XProf's step grouping of host events, for captures that do not carry it.
//!
//! TensorFlow 1.x and early 2.x wrote a `group_id` stat on the host events of each step;
//! TensorFlow 2.21 (and any capture written by `tsl::profiler` without post-processing) writes
//! none, and XProf groups the events itself when it analyses the capture (`group_events.cc`,
//! `GroupTfEvents`). This module applies the same rule to one host plane:
//!
//! - **Connections.** On each thread (line), an event is the child of the innermost event that
//!   contains it (events in start order, longer first; events with an `_a` (async) stat are left
//!   out of the nesting). Across threads, a producer (an event with `_pt`/`_p` context stats) is
//!   the parent of every consumer with the same type and id (`_ct`/`_c`), unless both sides have
//!   64 or more events; and `ExecutorState::Process` is the parent of the
//!   `IteratorGetNextOp::DoCompute` / `IteratorGetNextAsOptionalOp::DoCompute` with the same
//!   step id (`id`) and `iter_num` (own stats, else those of an ancestor).
//! - **Roots.** When the executor ran loops (`ExecutorState::Process` of a step id with
//!   `iter_num` other than 0), each loop iteration is a group rooted at its first event.
//!   Otherwise the roots are the events with a root level (`_r` stat), tf.data's own function
//!   runs apart (the step ids of `InstantiatedCapturedFunction::Run*`), taken by root level
//!   (higher first) then by start; a root already grouped, or below another root, is skipped.
//! - **Groups.** Each root's group id (0, 1, … in that order) goes to every event reachable
//!   from it through the connections that no earlier group took. The group is named
//!   `<graph_type or root name> <iter_num | step_num | group id>` (`train 19`); implicit roots
//!   (`FunctionRun`, `SessionRun`, `RunGraph`, `ExecutorState::Process`) are named by the number
//!   alone.
//!
//! - **Launches.** A host event with a `correlation_id` stat (a kernel launch or copy API call),
//!   unless its name is a TensorFlow op or one of the event types above, is a launch: its group
//!   is what the device event with the same correlation id inherits
//!   ([`HostEventGroups::launch_group`], read by [`super::DeviceEventGroups`]).
//!
//! XProf links `tf.data` producers to their consumers (`ConnectTfDataEvents`) only for its
//! `tf.data` analysis, not for the steps: that is [`crate::TfDataPipelines`]. Its marking of
//! eagerly run kernels (`is_eager`) changes no group and is not made here.

use std::collections::VecDeque;

// foldhash, not SipHash: the maps key every event's contexts and launches (none is iterated in
// hash order where the order shows).
use hashbrown::{HashMap, HashSet};

use xlens_xplane::{Event, Picos, Plane, Stat, StatMetadataId, StatValue, names};

/// The most host events grouped: a larger plane is not grouped (its steps are not analysed).
pub const MAX_GROUPED_EVENTS: usize = 20_000_000;

/// XProf skips a producer/consumer context with at least this many events on both sides.
const MAX_CONTEXT_FANOUT: usize = 64;

/// The host event types the grouping treats specially (`HostEventType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Other,
    ExecutorStateProcess,
    IteratorGetNextOp,
    FunctionRun,
    SessionRun,
    RunGraph,
    TfDataFunctionRun,
}

impl Kind {
    fn of(name: &str) -> Kind {
        match name {
            "ExecutorState::Process" => Kind::ExecutorStateProcess,
            "IteratorGetNextOp::DoCompute" | "IteratorGetNextAsOptionalOp::DoCompute" => Kind::IteratorGetNextOp,
            "FunctionRun" => Kind::FunctionRun,
            "SessionRun" => Kind::SessionRun,
            "RunGraph" => Kind::RunGraph,
            "InstantiatedCapturedFunction::Run"
            | "InstantiatedCapturedFunction::RunAsync"
            | "InstantiatedCapturedFunction::RunInstantiated"
            | "InstantiatedCapturedFunction::RunWithBorrowedArgs" => Kind::TfDataFunctionRun,
            _ => Kind::Other,
        }
    }

    /// XProf's implicit roots, named by their number alone.
    fn is_implicit_root(self) -> bool {
        matches!(self, Kind::FunctionRun | Kind::SessionRun | Kind::RunGraph | Kind::ExecutorStateProcess)
    }

    /// The TensorFlow executor's own events (what tells a TensorFlow capture).
    fn is_tf_executor(self) -> bool {
        matches!(self, Kind::FunctionRun | Kind::SessionRun | Kind::RunGraph | Kind::ExecutorStateProcess)
    }
}

/// One host event while the forest is built.
struct Node<'a> {
    line: u32,
    index: u32,
    start: Picos,
    end: Picos,
    name: &'a str,
    kind: Kind,
    root_level: i64,
    step_id: Option<u64>,
    iter_num: Option<u64>,
    step_num: Option<i64>,
    graph_type: Option<String>,
    /// An `_a` stat: left out of the nesting.
    is_async: bool,
    /// The `correlation_id` of a launch event (see [`is_launch_name`]).
    correlation: Option<u64>,
    parents: Vec<u32>,
    children: Vec<u32>,
    group: Option<u32>,
}

/// The stat ids the grouping reads.
struct Ids {
    root: Option<StatMetadataId>,
    is_async: Option<StatMetadataId>,
    producer_type: Option<StatMetadataId>,
    producer_id: Option<StatMetadataId>,
    consumer_type: Option<StatMetadataId>,
    consumer_id: Option<StatMetadataId>,
    step_id: Option<StatMetadataId>,
    iter_num: Option<StatMetadataId>,
    step_num: Option<StatMetadataId>,
    graph_type: Option<StatMetadataId>,
    correlation: Option<StatMetadataId>,
}

/// The stats [`Ids::gather`] reads, in slot order (the event's own, else its metadata's).
const GATHERED: usize = 10;

impl Ids {
    /// The ids of the gathered stats, by slot.
    fn slots(&self) -> [Option<StatMetadataId>; GATHERED] {
        [
            self.root,
            self.is_async,
            self.producer_type,
            self.producer_id,
            self.consumer_type,
            self.consumer_id,
            self.step_id,
            self.iter_num,
            self.step_num,
            self.graph_type,
        ]
    }

    /// The slot of a gathered stat's id.
    fn slot(&self, id: Option<StatMetadataId>) -> Option<usize> {
        let id = id?;
        self.slots().iter().position(|s| *s == Some(id))
    }

    /// Every gathered stat of an event, as [`Event::stat_or_metadata_stat`] finds each (the
    /// first on the event itself, else the first on its metadata), in one pass over each list
    /// instead of one search per stat.
    fn gather<'a>(&self, ev: &Event<'a>) -> [Option<Stat<'a>>; GATHERED] {
        let slots = self.slots();
        let mut found: [Option<Stat<'a>>; GATHERED] = [None; GATHERED];
        let mut fill = |s: Stat<'a>| {
            if let Some(k) = slots.iter().position(|w| *w == Some(s.metadata_id()))
                && found[k].is_none()
            {
                found[k] = Some(s);
            }
        };
        ev.stats().map_while(Result::ok).for_each(&mut fill);
        ev.metadata_stats().map_while(Result::ok).for_each(&mut fill);
        found
    }
}

/// A producer/consumer context: (type, id).
type ContextKey = (u64, u64);

/// The events of one context: (producers, consumers).
type Context = (Vec<u32>, Vec<u32>);

/// An integer stat as XProf's `IntOrUintValue` (the bits of either).
fn int_bits(stat: Option<Stat<'_>>) -> Option<u64> {
    match stat?.value() {
        StatValue::Int(v) => Some(v as u64),
        StatValue::Uint(v) => Some(v),
        _ => None,
    }
}

/// The host events of one plane grouped into steps as XProf groups them.
#[derive(Clone, Debug, Default)]
pub struct HostEventGroups {
    /// Per line (the plane's line order), per event (its index in the line): its group, or
    /// `u32::MAX` for none.
    by_event: Vec<Vec<u32>>,
    /// The group names, by group id.
    names: Vec<String>,
    /// The roots XProf gives a `step_name` stat (those that are not implicit), as (line, index).
    named_roots: HashSet<(u32, u32)>,
    /// True when the plane has TensorFlow executor events (`ExecutorState::Process`,
    /// `FunctionRun`, `SessionRun`, `RunGraph`).
    tensorflow: bool,
    /// The group of each launch event's `correlation_id` (`u32::MAX` for a launch in no
    /// group); where several launches share an id, the last in line order, as XProf's map of
    /// launches keeps it.
    launches: HashMap<u64, u32>,
}

impl HostEventGroups {
    /// Groups the events of a host plane; `None` when it has more than [`MAX_GROUPED_EVENTS`],
    /// or when it holds TensorFlow loop ops (`WhileOp-EvalCond`, `WhileOp-StartBody`, `ForOp`,
    /// `ParallelForOp`, `ForeverOp`), whose captures XProf does not group (`CheckLoopOp`).
    ///
    /// ```
    /// use xlens_roofline::HostEventGroups;
    /// use xlens_xplane::{Space, SpaceBuilder, names};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut host = b.plane(1, names::plane::HOST_CPU);
    ///     let root = host.stat_metadata(names::stat::IS_ROOT);
    ///     let num = host.stat_metadata(names::stat::STEP_NUM);
    ///     let train = host.event_metadata("train");
    ///     let op = host.event_metadata("MatMul");
    ///     let mut line = host.line(1, "python", 0);
    ///     line.event(train, 0, 1_000).stat(root, 1i64).stat(num, 7i64);
    ///     line.event(op, 100, 200);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let groups = HostEventGroups::build(space.host_threads().unwrap())?.unwrap();
    /// assert_eq!(groups.name(0), Some("train 7"));
    /// assert_eq!(groups.group(0, 1), Some(0));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(plane: &Plane) -> xlens_xplane::Result<Option<HostEventGroups>> {
        let ids = Ids {
            root: plane.stat_id(names::stat::IS_ROOT),
            is_async: plane.stat_id(names::stat::IS_ASYNC),
            producer_type: plane.stat_id(names::stat::PRODUCER_TYPE),
            producer_id: plane.stat_id(names::stat::PRODUCER_ID),
            consumer_type: plane.stat_id(names::stat::CONSUMER_TYPE),
            consumer_id: plane.stat_id(names::stat::CONSUMER_ID),
            step_id: plane.stat_id(names::stat::STEP_ID),
            iter_num: plane.stat_id(names::stat::ITER_NUM),
            step_num: plane.stat_id(names::stat::STEP_NUM),
            graph_type: plane.stat_id(names::stat::GRAPH_TYPE),
            correlation: plane.stat_id(names::stat::CORRELATION_ID),
        };
        // Launch events by name (decided per metadata entry, not per event).
        let launch_names = if ids.correlation.is_some() {
            plane.metadata_mask(|m| is_launch_name(m.name()))
        } else {
            plane.metadata_mask(|_| false)
        };
        if !plane.metadata_mask(|m| is_loop_op(m.name())).is_empty() {
            return Ok(None);
        }
        let mut nodes: Vec<Node<'_>> = Vec::new();
        let mut by_event: Vec<Vec<u32>> = Vec::with_capacity(plane.lines().len());
        let mut contexts: HashMap<ContextKey, Context> = HashMap::new();
        for (li, line) in plane.lines().iter().enumerate() {
            let first = nodes.len();
            for ev in line.events(plane) {
                let ev = ev?;
                if nodes.len() >= MAX_GROUPED_EVENTS {
                    return Ok(None);
                }
                let found = ids.gather(&ev);
                let get = |id: Option<StatMetadataId>| ids.slot(id).and_then(|k| found[k]);
                let n = nodes.len() as u32;
                if let (Some(t), Some(p)) = (int_bits(get(ids.producer_type)), int_bits(get(ids.producer_id))) {
                    contexts.entry((t, p)).or_default().0.push(n);
                }
                if let (Some(t), Some(c)) = (int_bits(get(ids.consumer_type)), int_bits(get(ids.consumer_id))) {
                    contexts.entry((t, c)).or_default().1.push(n);
                }
                nodes.push(Node {
                    line: li as u32,
                    index: ev.index() as u32,
                    start: ev.start(),
                    end: ev.end(),
                    name: ev.name(),
                    kind: Kind::of(ev.name()),
                    root_level: get(ids.root).and_then(|s| s.as_i64()).unwrap_or(0),
                    step_id: int_bits(get(ids.step_id)),
                    iter_num: int_bits(get(ids.iter_num)),
                    step_num: get(ids.step_num).and_then(|s| s.as_i64()),
                    graph_type: get(ids.graph_type).and_then(|s| s.value().as_str().map(str::to_string)),
                    is_async: get(ids.is_async).is_some(),
                    correlation: if launch_names.contains(&ev) {
                        ids.correlation.and_then(|id| ev.stat(id)).and_then(|s| int_bits(Some(s)))
                    } else {
                        None
                    },
                    parents: Vec::new(),
                    children: Vec::new(),
                    group: None,
                });
            }
            by_event.push(vec![u32::MAX; nodes.len() - first]);
            connect_nested(&mut nodes, first);
        }
        // Across threads: the executor to the iterator ops of its step.
        let mut executors: HashMap<(u64, u64), u32> = HashMap::new();
        for i in 0..nodes.len() {
            if nodes[i].kind == Kind::ExecutorStateProcess
                && let Some(key) = context_key(&nodes, i as u32)
            {
                executors.insert(key, i as u32);
            }
        }
        for i in 0..nodes.len() {
            if nodes[i].kind == Kind::IteratorGetNextOp
                && let Some(&parent) = context_key(&nodes, i as u32).and_then(|k| executors.get(&k))
            {
                add_child(&mut nodes, parent, i as u32);
            }
        }
        let mut contexts: Vec<(ContextKey, Context)> = contexts.into_iter().collect();
        contexts.sort_unstable_by_key(|(k, _)| *k);
        for (_, (producers, consumers)) in &contexts {
            if producers.len() >= MAX_CONTEXT_FANOUT && consumers.len() >= MAX_CONTEXT_FANOUT {
                continue;
            }
            for &p in producers {
                for &c in consumers {
                    add_child(&mut nodes, p, c);
                }
            }
        }
        let (names, roots) = create_groups(&mut nodes);
        let named_roots = roots
            .iter()
            .map(|&r| &nodes[r as usize])
            .filter(|n| !n.kind.is_implicit_root())
            .map(|n| (n.line, n.index))
            .collect();
        for n in &nodes {
            if let Some(g) = n.group
                && let Some(slot) = by_event.get_mut(n.line as usize).and_then(|v| v.get_mut(n.index as usize))
            {
                *slot = g;
            }
        }
        let tensorflow = nodes.iter().any(|n| n.kind.is_tf_executor());
        let mut launches = HashMap::new();
        for n in &nodes {
            if let Some(c) = n.correlation {
                launches.insert(c, n.group.unwrap_or(u32::MAX));
            }
        }
        Ok(Some(HostEventGroups { by_event, names, named_roots, tensorflow, launches }))
    }

    /// True when the plane defines TensorFlow executor events (`ExecutorState::Process`,
    /// `FunctionRun`, `SessionRun`, `RunGraph`), from its metadata alone: a cheap test before
    /// [`HostEventGroups::build`] walks every event.
    pub fn has_tensorflow_executor(plane: &Plane) -> bool {
        !plane.metadata_mask(|m| Kind::of(m.name()).is_tf_executor()).is_empty()
    }

    /// The group of the event at `index` (its position in the line) of the plane's line
    /// `line` (its position in the plane).
    pub fn group(&self, line: usize, index: usize) -> Option<i64> {
        let g = *self.by_event.get(line)?.get(index)?;
        (g != u32::MAX).then_some(i64::from(g))
    }

    /// True for the root of a group that XProf marks as a step (gives a `step_name` stat): a
    /// root that is not implicit (`train`, not `FunctionRun`).
    pub fn is_named_root(&self, line: usize, index: usize) -> bool {
        match (u32::try_from(line), u32::try_from(index)) {
            (Ok(l), Ok(i)) => self.named_roots.contains(&(l, i)),
            _ => false,
        }
    }

    /// The group of the launch event (a host event with a `correlation_id`, see the module
    /// notes) whose correlation id is `correlation`: `None` when no launch has it or the
    /// launch is in no group.
    pub fn launch_group(&self, correlation: u64) -> Option<u32> {
        self.launches.get(&correlation).copied().filter(|&g| g != u32::MAX)
    }

    /// True when some host event is a launch (has a `correlation_id`).
    pub fn has_launches(&self) -> bool {
        !self.launches.is_empty()
    }

    /// The name of a group (`train 19`).
    pub fn name(&self, group: i64) -> Option<&str> {
        usize::try_from(group).ok().and_then(|g| self.names.get(g)).map(String::as_str)
    }

    /// The number of groups.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no event roots a group.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// True when the plane has TensorFlow executor events (`ExecutorState::Process`,
    /// `FunctionRun`, `SessionRun`, `RunGraph`): the grouping is TensorFlow's.
    pub fn is_tensorflow(&self) -> bool {
        self.tensorflow
    }
}

/// XProf's TensorFlow loop-op event types (`CheckLoopOp`).
fn is_loop_op(name: &str) -> bool {
    matches!(name, "WhileOp-EvalCond" | "WhileOp-StartBody" | "ForOp" | "ParallelForOp" | "ForeverOp")
}

/// True for an event name XProf reads as a launch when the event has a `correlation_id`: not a
/// host event type the grouping uses, nor a TensorFlow op (`name:Type`) or `tf.data` iterator
/// (`Iterator::…`), which XProf types by name first (`GetEventType`, `FindTfOpEventType`).
pub(crate) fn is_launch_name(name: &str) -> bool {
    if Kind::of(name) != Kind::Other {
        return false;
    }
    match name.split_once(':') {
        Some(("Iterator", _)) => false,
        Some((op, ty)) => !(crate::framework_ops::is_tf_op_name(op) && crate::framework_ops::is_tf_op_type(ty)),
        None => true,
    }
}

fn add_child(nodes: &mut [Node<'_>], parent: u32, child: u32) {
    nodes[parent as usize].children.push(child);
    nodes[child as usize].parents.push(parent);
}

/// Nests the events of one line (nodes `first..`): each is the child of the innermost event
/// containing it, in start order, longer first.
fn connect_nested(nodes: &mut [Node<'_>], first: usize) {
    let mut events: Vec<(Picos, Picos, u32, u32)> = (first as u32..nodes.len() as u32)
        .filter(|&i| !nodes[i as usize].is_async)
        .map(|i| (nodes[i as usize].start, nodes[i as usize].end, nodes[i as usize].index, i))
        .collect();
    nest_events(&mut events, &mut Vec::new(), |parent, child| add_child(nodes, parent, child));
}

/// XProf's nesting of one thread's events (`ConnectIntraThread`): in start order, longer first
/// (then by position in the line), each event is the child of the innermost earlier event that
/// contains it. `events` are (start, end, position, item) of the events that nest (those with an
/// `_a` stat left out); they are sorted in place, and `nest(parent, child)` is called for each
/// event that has a parent, parents before their children. `stack` is scratch space, kept by the
/// caller across lines.
pub(crate) fn nest_events<T: Copy>(
    events: &mut [(Picos, Picos, u32, T)],
    stack: &mut Vec<(Picos, Picos, T)>,
    mut nest: impl FnMut(T, T),
) {
    events.sort_by_key(|&(start, end, index, _)| (start, std::cmp::Reverse(end), index));
    stack.clear();
    for &(start, end, _, item) in events.iter() {
        while let Some(&(s, e, outer)) = stack.last() {
            if s <= start && end <= e {
                nest(outer, item);
                break;
            }
            stack.pop();
        }
        stack.push((start, end, item));
    }
}

/// XProf's `GetContextStat` of the step id and iteration: the event's own, else the nearest
/// ancestor's (breadth first).
fn context_key(nodes: &[Node<'_>], i: u32) -> Option<(u64, u64)> {
    let find = |get: &dyn Fn(&Node<'_>) -> Option<u64>| -> Option<u64> {
        let mut seen: HashSet<u32> = HashSet::from_iter([i]);
        let mut queue = VecDeque::from([i]);
        while let Some(n) = queue.pop_front() {
            let node = &nodes[n as usize];
            if let Some(v) = get(node) {
                return Some(v);
            }
            for &p in &node.parents {
                if seen.insert(p) {
                    queue.push_back(p);
                }
            }
        }
        None
    };
    Some((find(&|n| n.step_id)?, find(&|n| n.iter_num)?))
}

/// Picks the roots and gives each its group; returns the group names and roots, by group id.
fn create_groups(nodes: &mut [Node<'_>]) -> (Vec<String>, Vec<u32>) {
    let tf_data_steps: HashSet<u64> =
        nodes.iter().filter(|n| n.kind == Kind::TfDataFunctionRun).filter_map(|n| n.step_id).collect();
    let mut names = Vec::new();
    let mut picked = Vec::new();
    // TensorFlow loops: per step id, per iteration, the executor events.
    let mut loops: HashMap<u64, HashMap<u64, Vec<u32>>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.kind == Kind::ExecutorStateProcess
            && let (Some(step), Some(iter)) = (n.step_id, n.iter_num)
            && !tf_data_steps.contains(&step)
        {
            loops.entry(step).or_default().entry(iter).or_default().push(i as u32);
        }
    }
    let mut iterations: Vec<(u32, Vec<u32>)> = Vec::new();
    for tf_loop in loops.values() {
        if tf_loop.len() == 1 && tf_loop.contains_key(&0) {
            continue;
        }
        for events in tf_loop.values() {
            let first = *events.iter().min_by_key(|&&e| (nodes[e as usize].start, e)).expect("non-empty");
            iterations.push((first, events.clone()));
        }
    }
    if !iterations.is_empty() {
        iterations.sort_by_key(|(first, _)| (nodes[*first as usize].start, *first));
        for (root, events) in &iterations {
            for &e in events {
                if e != *root {
                    add_child(nodes, *root, e);
                }
            }
        }
        for (root, _) in &iterations {
            let group = names.len() as u32;
            propagate(nodes, *root, group);
            names.push(group_name(&nodes[*root as usize], group));
            picked.push(*root);
        }
        return (names, picked);
    }
    let mut roots: Vec<u32> = (0..nodes.len() as u32)
        .filter(|&i| {
            let n = &nodes[i as usize];
            n.root_level > 0 && !n.step_id.is_some_and(|s| tf_data_steps.contains(&s))
        })
        .collect();
    roots.sort_by_key(|&i| {
        let n = &nodes[i as usize];
        (std::cmp::Reverse(n.root_level), n.start, i)
    });
    for root in roots {
        if nodes[root as usize].group.is_some() || has_root_ancestor(nodes, root) {
            continue;
        }
        let group = names.len() as u32;
        propagate(nodes, root, group);
        names.push(group_name(&nodes[root as usize], group));
        picked.push(root);
    }
    (names, picked)
}

/// True when an ancestor of the event (not the event) has a root level.
fn has_root_ancestor(nodes: &[Node<'_>], i: u32) -> bool {
    let mut seen: HashSet<u32> = HashSet::from_iter([i]);
    let mut queue: VecDeque<u32> = nodes[i as usize].parents.iter().copied().collect();
    while let Some(n) = queue.pop_front() {
        if !seen.insert(n) {
            continue;
        }
        if nodes[n as usize].root_level > 0 {
            return true;
        }
        queue.extend(nodes[n as usize].parents.iter().copied());
    }
    false
}

/// Gives `group` to the root and every event reachable from it that has no group yet (an event
/// already grouped stops the walk).
fn propagate(nodes: &mut [Node<'_>], root: u32, group: u32) {
    let mut seen: HashSet<u32> = HashSet::from_iter([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(n) = queue.pop_front() {
        if nodes[n as usize].group.is_some() {
            continue;
        }
        nodes[n as usize].group = Some(group);
        for k in 0..nodes[n as usize].children.len() {
            let c = nodes[n as usize].children[k];
            if seen.insert(c) {
                queue.push_back(c);
            }
        }
    }
}

/// XProf's `GetGroupName`.
fn group_name(root: &Node<'_>, group: u32) -> String {
    let number = root.iter_num.map(|v| v as i64).or(root.step_num).unwrap_or(i64::from(group));
    match (&root.graph_type, root.kind.is_implicit_root()) {
        (Some(graph), _) => format!("{graph} {number}"),
        (None, false) => format!("{} {number}", root.name),
        (None, true) => number.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::{Space, SpaceBuilder};

    /// A `train` root on the Python thread whose `FunctionRun` hands its step to an executor
    /// thread (context stats), where the iterator op of the step runs on a third thread.
    #[test]
    fn groups_follow_nesting_context_and_executor_links() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let num = host.stat_metadata(names::stat::STEP_NUM);
            let pt = host.stat_metadata(names::stat::PRODUCER_TYPE);
            let p = host.stat_metadata(names::stat::PRODUCER_ID);
            let ct = host.stat_metadata(names::stat::CONSUMER_TYPE);
            let c = host.stat_metadata(names::stat::CONSUMER_ID);
            let id = host.stat_metadata(names::stat::STEP_ID);
            let iter = host.stat_metadata(names::stat::ITER_NUM);
            let train = host.event_metadata("train");
            let run = host.event_metadata("FunctionRun");
            let exec = host.event_metadata("ExecutorState::Process");
            let next = host.event_metadata("IteratorGetNextOp::DoCompute");
            let other = host.event_metadata("Unrelated");
            {
                let mut py = host.line(1, "python", 0);
                for (k, t) in [(19i64, 0i64), (20, 1_000)] {
                    py.event(train, t, 900).stat(root, 1i64).stat(num, k);
                    py.event(run, t + 10, 20).stat(root, 1i64).stat(pt, 2i64).stat(p, 100 + k).stat(id, k);
                }
            }
            {
                let mut ex = host.line(2, "tf_Compute", 0);
                for (k, t) in [(19i64, 0i64), (20, 1_000)] {
                    ex.event(exec, t + 50, 10).stat(ct, 2i64).stat(c, 100 + k).stat(id, k).stat(iter, 0i64);
                }
                ex.event(other, 2_000, 10);
            }
            let mut it = host.line(3, "tf_data_iterator_get_next", 0);
            it.event(next, 1_100, 300).stat(id, 20i64).stat(iter, 0i64);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let g = HostEventGroups::build(space.host_threads().unwrap()).unwrap().unwrap();
        assert_eq!((g.len(), g.name(0), g.name(1)), (2, Some("train 19"), Some("train 20")));
        assert!(g.is_tensorflow());
        assert!(g.is_named_root(0, 0) && !g.is_named_root(0, 1));
        // python: train, FunctionRun of each step.
        assert_eq!((g.group(0, 0), g.group(0, 1), g.group(0, 2), g.group(0, 3)), (Some(0), Some(0), Some(1), Some(1)));
        // The executor events by their context; the unrelated event in none.
        assert_eq!((g.group(1, 0), g.group(1, 1), g.group(1, 2)), (Some(0), Some(1), None));
        // The iterator op through its executor's step id and iteration.
        assert_eq!(g.group(2, 0), Some(1));
    }

    /// A plane with a TensorFlow loop op is not grouped, as XProf does not group it.
    #[test]
    fn loop_ops_leave_the_capture_ungrouped() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let train = host.event_metadata("train");
            let for_op = host.event_metadata("ForOp");
            let mut line = host.line(1, "python", 0);
            line.event(train, 0, 1_000).stat(root, 1i64);
            line.event(for_op, 10, 100);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        assert!(HostEventGroups::build(space.host_threads().unwrap()).unwrap().is_none());
    }

    /// An executor loop (`iter_num` 0, 1, 2 of one step id): each iteration is a group, rooted
    /// at its first event, whatever `_r` roots the capture has.
    #[test]
    fn executor_loop_iterations_are_the_groups() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let id = host.stat_metadata(names::stat::STEP_ID);
            let iter = host.stat_metadata(names::stat::ITER_NUM);
            let train = host.event_metadata("train");
            let exec = host.event_metadata("ExecutorState::Process");
            host.line(1, "python", 0).event(train, 0, 10_000).stat(root, 1i64);
            let mut ex = host.line(2, "tf_Compute", 0);
            for k in 0..3i64 {
                ex.event(exec, 100 + 1_000 * k, 100).stat(id, 5i64).stat(iter, k);
                ex.event(exec, 300 + 1_000 * k, 100).stat(id, 5i64).stat(iter, k);
            }
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let g = HostEventGroups::build(space.host_threads().unwrap()).unwrap().unwrap();
        assert_eq!((g.len(), g.name(0), g.name(2)), (3, Some("0"), Some("2")));
        assert_eq!((g.group(1, 0), g.group(1, 1), g.group(1, 5)), (Some(0), Some(0), Some(2)));
        // The `train` root is not one: loops take precedence, as in XProf.
        assert_eq!(g.group(0, 0), None);
        assert!(!g.is_named_root(1, 0));
    }
}
