//! The `tf.data` input pipelines of a TensorFlow capture, and the iterator that holds each one
//! back (XProf's `tf.data` bottleneck analysis, `xplane_to_tf_data_stats.cc`).
//!
//! `tf.data` records a host event for every call of every iterator: `Iterator::Root` for the
//! call the training step makes (inside `IteratorGetNext`), and `Iterator::Root::Prefetch::Map…`
//! for each dataset op that call reaches, nested on the thread that runs it. Every iterator event
//! carries the iterator's id (`id`) and its parent's (`parent_id`). The asynchronous ops
//! (`Prefetch`, `ParallelMap`, `ParallelInterleave`, `MapAndBatch`, `ParseExample`,
//! `ParallelBatch`) make their elements on background threads: a `…Produce` event with the
//! element's `element_id` wraps the call that makes it, and a `…Consume` event with the same id
//! sits inside the consuming iterator's call.
//!
//! - **Links.** On each thread an event's children are the events directly inside it (events in
//!   start order, longer first; events with an `_a` stat are left out of the nesting). Across
//!   threads, the producing iterator (the first iterator directly inside a `…Produce` event)
//!   becomes a child of the consuming iterator (the iterator directly around the matching
//!   `…Consume` event) when the producer's `parent_id` is the consumer's `id` and the element ids
//!   agree (XProf's `ConnectTfDataEvents`).
//! - **Pipelines.** Each root iterator (a name with a single `::`, such as `Iterator::Root`) is
//!   one pipeline, and each of its events one call, whose latency is the event's duration. A
//!   pipeline whose root is the parent of `Iterator::Prefetch::Generator` feeds a device
//!   (`prefetch_to_device`).
//! - **One call.** From the root event down through the iterator children: each iterator's time,
//!   and its self time (its time less what its iterator children overlap of it). An iterator
//!   *blocks* the call when every link from the root down to it overlaps its parent: the caller
//!   was waiting for it.
//! - **Bottleneck.** In the pipeline's slowest call, the blocking iterator with the largest self
//!   time. A pipeline is slow when a call takes more than [`SLOW_TF_DATA_CALL`] (50 µs, the
//!   threshold of TensorFlow's guide to `tf.data` performance analysis).
//!
//! Where this differs from XProf: iterator and element ids are read as the 64 bits the capture
//! stores (XProf 2.24 reads an id stored unsigned, as TensorFlow stores ids above `i64::MAX`, as
//! 0, and so merges such iterators into one); a self time never goes below zero; pipelines are
//! numbered by their first call (`Host:0` first), not in hash order; the bottleneck's kind
//! ([`TfDataStageKind`]) also knows versioned dataset names (`ParallelMapV2`) and the ops that
//! already run in parallel.

use std::collections::BTreeMap;

// foldhash, not SipHash: keyed by element ids, never iterated.
use hashbrown::{HashMap, HashSet};

use xlens_xplane::{Event, Picos, Plane, Stat, StatMetadataId, StatValue, names};

use crate::span::Span;

/// A pipeline call slower than this is slow (TensorFlow's guide to `tf.data` performance
/// analysis: 50 µs).
pub const SLOW_TF_DATA_CALL: Picos = Picos(50_000_000);

/// The most `tf.data` events (iterator calls, produce and consume events) read; a plane with more
/// is not analysed.
pub const MAX_TF_DATA_EVENTS: usize = 10_000_000;

/// The deepest iterator chain followed from a pipeline's root (XProf stops at 100 levels).
pub const MAX_ITERATOR_DEPTH: usize = 100;

/// The most iterator calls visited for one pipeline call (bounds a capture whose links fan out).
pub const MAX_ITERATOR_VISITS: usize = 1_000_000;

/// The events that make an element on a background thread.
const PRODUCERS: [&str; 6] = [
    "PrefetchProduce",
    "ParallelInterleaveProduce",
    "ParallelMapProduce",
    "MapAndBatchProduce",
    "ParseExampleProduce",
    "ParallelBatchProduce",
];

/// The events that take a produced element.
const CONSUMERS: [&str; 6] = [
    "PrefetchConsume",
    "ParallelInterleaveConsume",
    "ParallelMapConsume",
    "MapAndBatchConsume",
    "ParseExampleConsume",
    "ParallelBatchConsume",
];

/// The second iterator of a device input pipeline (`prefetch_to_device`): its `parent_id` is the
/// pipeline's root.
const DEVICE_PIPELINE_SECOND_ITERATOR: &str = "Iterator::Prefetch::Generator";

/// What a `tf.data` event is to the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Iterator,
    Produce,
    Consume,
}

impl Role {
    fn of(name: &str) -> Option<Role> {
        if name.split_once(':').is_some_and(|(head, _)| head == "Iterator") {
            Some(Role::Iterator)
        } else if PRODUCERS.contains(&name) {
            Some(Role::Produce)
        } else if CONSUMERS.contains(&name) {
            Some(Role::Consume)
        } else {
            None
        }
    }
}

/// One `tf.data` event while the links are made.
struct Node<'a> {
    name: &'a str,
    span: Span,
    role: Role,
    id: Option<u64>,
    parent_id: Option<u64>,
    element_id: Option<u64>,
    /// The event directly around it on its thread, when that is a `tf.data` event.
    outer: Option<u32>,
    /// The first iterator directly inside it on its thread.
    first_inner_iterator: Option<u32>,
    /// Its iterator children: those directly inside it, then the producers linked to it.
    children: Vec<u32>,
}

/// The 64 bits of an integer stat, however it is stored.
fn bits(stat: Option<Stat<'_>>) -> Option<u64> {
    match stat?.value() {
        StatValue::Int(v) => Some(v as u64),
        StatValue::Uint(v) => Some(v),
        _ => None,
    }
}

/// How the pipeline's iterators are fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TfDataPipelineKind {
    /// Called by the training step on the host (`Host:N`).
    Host,
    /// Feeding a device (`prefetch_to_device`, `Device:N`).
    Device,
}

impl TfDataPipelineKind {
    /// `host` or `device`: the JSON's and the frames' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TfDataPipelineKind::Host => "host",
            TfDataPipelineKind::Device => "device",
        }
    }
}

/// What kind of dataset op a `tf.data` stage is, for the advice its bottleneck calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfDataStageKind {
    /// A Python generator (`from_generator`): one element at a time, under the GIL.
    PythonGenerator,
    /// A source reading storage or memory (`TFRecord`, `TextLine`, `TensorSlice`, …).
    Source,
    /// The `tf.data` service (`DataService`).
    DataService,
    /// A source on another machine (Reverb, …).
    RemoteSource,
    /// A transformation that runs one element at a time and has a parallel form (`Map`,
    /// `Interleave`, `FlatMap`).
    Parallelisable,
    /// A transformation that already runs in parallel (`ParallelMap`, `ParallelInterleave`,
    /// `MapAndBatch`, `ParallelBatch`, `ParseExample`).
    Parallel,
    /// A transformation without a parallel form (`Filter`, `Batch`, `Unbatch`, …).
    Sequential,
    /// Anything else (`Prefetch`, `Shuffle`, `Repeat`, `Zip`, …).
    Other,
}

impl TfDataStageKind {
    /// The kind of a stage by its short name (the last part of the iterator name), a version
    /// suffix (`V2`) ignored.
    ///
    /// ```
    /// use xlens_roofline::TfDataStageKind;
    /// assert_eq!(TfDataStageKind::of("Generator"), TfDataStageKind::PythonGenerator);
    /// assert_eq!(TfDataStageKind::of("ParallelMapV2"), TfDataStageKind::Parallel);
    /// assert_eq!(TfDataStageKind::of("Map"), TfDataStageKind::Parallelisable);
    /// assert_eq!(TfDataStageKind::of("TFRecord"), TfDataStageKind::Source);
    /// ```
    pub fn of(short_name: &str) -> TfDataStageKind {
        match base_name(short_name) {
            "Generator" => TfDataStageKind::PythonGenerator,
            "TFRecord"
            | "SSTable"
            | "RecordIO"
            | "Spanner"
            | "TFColumn"
            | "SleepwalkRemoteDataset"
            | "TextLine"
            | "StitchedTimelineDataset"
            | "DateKeyDataset"
            | "CapacitorProto"
            | "LMDB"
            | "ExternalDataset"
            | "PearModel"
            | "FixedLengthRecord"
            | "FromTensor"
            | "TensorSlice"
            | "SyntheticDatasetOp"
            | "Range"
            | "CSV"
            | "Sql"
            | "FixedLengthRecordDataset" => TfDataStageKind::Source,
            "DataService" => TfDataStageKind::DataService,
            "GuzzlerDataGuzzlerRemoteDataset"
            | "ReverbDataset"
            | "DatasetSampleGame"
            | "Courier"
            | "ReverbEpisodeDataset" => TfDataStageKind::RemoteSource,
            "Map" | "Interleave" | "FlatMap" => TfDataStageKind::Parallelisable,
            "ParallelMap"
            | "ParallelInterleave"
            | "LegacyParallelInterleave"
            | "MapAndBatch"
            | "ParallelBatch"
            | "ParseExample" => TfDataStageKind::Parallel,
            "Filter" | "Batch" | "PaddedBatch" | "Unbatch" | "Scan" | "Window" => TfDataStageKind::Sequential,
            _ => TfDataStageKind::Other,
        }
    }

    /// True for the dataset ops that make their elements on background threads (`Prefetch`,
    /// `ParallelMap`, `ParallelInterleave`, `MapAndBatch`, `ParseExample`, `ParallelBatch`,
    /// `DataService`): a call of one waits for an element its producer makes (XProf's list).
    ///
    /// ```
    /// use xlens_roofline::TfDataStageKind;
    /// assert!(TfDataStageKind::is_async("Prefetch") && TfDataStageKind::is_async("ParallelMapV2"));
    /// assert!(!TfDataStageKind::is_async("Map"));
    /// ```
    pub fn is_async(short_name: &str) -> bool {
        matches!(
            base_name(short_name),
            "Prefetch"
                | "ParallelInterleave"
                | "ParallelMap"
                | "ParseExample"
                | "MapAndBatch"
                | "DataService"
                | "LegacyParallelInterleave"
                | "ParallelBatch"
        )
    }

    /// The stable machine name (`python_generator`, `source`, `data_service`, `remote_source`,
    /// `parallelisable`, `parallel`, `sequential`, `other`): the JSON's and the frames' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TfDataStageKind::PythonGenerator => "python_generator",
            TfDataStageKind::Source => "source",
            TfDataStageKind::DataService => "data_service",
            TfDataStageKind::RemoteSource => "remote_source",
            TfDataStageKind::Parallelisable => "parallelisable",
            TfDataStageKind::Parallel => "parallel",
            TfDataStageKind::Sequential => "sequential",
            TfDataStageKind::Other => "other",
        }
    }

    /// What the kind is, in a few words ("a Python generator (`from_generator`)").
    pub fn describe(self) -> &'static str {
        match self {
            TfDataStageKind::PythonGenerator => "a Python generator (`from_generator`)",
            TfDataStageKind::Source => "a source",
            TfDataStageKind::DataService => "the tf.data service",
            TfDataStageKind::RemoteSource => "a remote source",
            TfDataStageKind::Parallelisable => "a transformation run one element at a time",
            TfDataStageKind::Parallel => "a parallel transformation",
            TfDataStageKind::Sequential => "a sequential transformation",
            TfDataStageKind::Other => "a dataset op",
        }
    }
}

/// A dataset op's name without its version suffix (`ParallelMapV2` → `ParallelMap`) or index
/// (`FlatMap[0]` → `FlatMap`).
fn base_name(short_name: &str) -> &str {
    let base = short_name.split('[').next().unwrap_or(short_name);
    match base.rfind('V') {
        Some(at) if at > 0 && at + 1 < base.len() && base[at + 1..].chars().all(|c| c.is_ascii_digit()) => &base[..at],
        _ => base,
    }
}

/// One iterator of a pipeline call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfDataIterator {
    /// The iterator's id (`id`).
    pub id: u64,
    /// Its full name (`Iterator::Root::Prefetch::Map`).
    pub name: String,
    /// Its calls within the pipeline call.
    pub calls: u64,
    /// Its time within the pipeline call.
    pub total: Picos,
    /// Its time less what its iterator children overlap of it.
    pub self_time: Picos,
    /// True when the pipeline call waited for it (every link from the root to it overlaps).
    pub blocking: bool,
}

impl TfDataIterator {
    /// The dataset op's name: the last part of the full name (`Map`).
    pub fn short_name(&self) -> &str {
        self.name.rsplit("::").next().unwrap_or(&self.name)
    }

    /// The kind of dataset op ([`TfDataStageKind::of`] its short name).
    pub fn kind(&self) -> TfDataStageKind {
        TfDataStageKind::of(self.short_name())
    }

    /// True when it makes its elements on a background thread ([`TfDataStageKind::is_async`]).
    pub fn is_async(&self) -> bool {
        TfDataStageKind::is_async(self.short_name())
    }
}

/// One `tf.data` pipeline: its calls' latencies and the iterators of its slowest call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfDataPipeline {
    /// `Host:N` or `Device:N` (numbered in the order of their first call).
    pub name: String,
    /// Host or device pipeline.
    pub kind: TfDataPipelineKind,
    /// The root iterator's id.
    pub root_id: u64,
    /// The root iterator's name (`Iterator::Root`).
    pub root_name: String,
    /// Calls of the root iterator.
    pub calls: u64,
    /// When the first call starts.
    pub first_call: Picos,
    /// Their mean duration.
    pub mean_latency: Picos,
    /// Their shortest duration.
    pub min_latency: Picos,
    /// Their longest duration.
    pub max_latency: Picos,
    /// Calls longer than [`SLOW_TF_DATA_CALL`].
    pub slow_calls: u64,
    /// The slowest call's span.
    pub slowest_call: Span,
    /// The iterators of the slowest call, in the order it reached them (the root first).
    pub iterators: Vec<TfDataIterator>,
    /// The position in `iterators` of the bottleneck: the blocking iterator with the largest
    /// self time (`None` when none blocks for any time).
    pub bottleneck: Option<usize>,
}

impl TfDataPipeline {
    /// The iterator that holds the slowest call back.
    pub fn bottleneck(&self) -> Option<&TfDataIterator> {
        self.bottleneck.and_then(|i| self.iterators.get(i))
    }

    /// True when the slowest call reached a stage below `it` (an asynchronous stage's producer
    /// shows up so): false where the call stops at `it`.
    pub fn reaches_below(&self, it: &TfDataIterator) -> bool {
        self.iterators.iter().any(|o| {
            o.name.len() > it.name.len() + 2
                && o.name.starts_with(&it.name)
                && o.name[it.name.len()..].starts_with("::")
        })
    }

    /// True when a call is slower than [`SLOW_TF_DATA_CALL`].
    pub fn is_slow(&self) -> bool {
        self.max_latency > SLOW_TF_DATA_CALL
    }
}

/// The `tf.data` pipelines of one host plane, slowest (longest call) first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TfDataPipelines {
    /// Slowest first, then by name.
    pub pipelines: Vec<TfDataPipeline>,
}

/// An iterator's figures while one call is walked.
struct Acc<'a> {
    name: &'a str,
    order: usize,
    calls: u64,
    total: i64,
    self_ps: i64,
    blocking: bool,
}

impl TfDataPipelines {
    /// Reads the `tf.data` pipelines of a host plane; `None` when it has no `tf.data` iterator
    /// events, or more `tf.data` events than [`MAX_TF_DATA_EVENTS`].
    ///
    /// ```
    /// use xlens_roofline::TfDataPipelines;
    /// use xlens_xplane::{Space, SpaceBuilder, names};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut host = b.plane(1, names::plane::HOST_CPU);
    ///     let id = host.stat_metadata(names::stat::STEP_ID);
    ///     let parent = host.stat_metadata(names::stat::PARENT_ID);
    ///     let root = host.event_metadata("Iterator::Root");
    ///     let map = host.event_metadata("Iterator::Root::Map");
    ///     let mut line = host.line(1, "tf_data_iterator_get_next", 0);
    ///     line.event(root, 0, 200_000_000).stat(id, 1i64);
    ///     line.event(map, 1_000_000, 190_000_000).stat(id, 2i64).stat(parent, 1i64);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let tf_data = TfDataPipelines::read(space.host_threads().unwrap())?.unwrap();
    /// let p = &tf_data.pipelines[0];
    /// assert_eq!((p.name.as_str(), p.slow_calls), ("Host:0", 1));
    /// assert_eq!(p.bottleneck().unwrap().short_name(), "Map");
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(plane: &Plane) -> xlens_xplane::Result<Option<TfDataPipelines>> {
        if plane.metadata_mask(|m| Role::of(m.name()) == Some(Role::Iterator)).is_empty() {
            return Ok(None);
        }
        let Some(nodes) = link(plane)? else { return Ok(None) };
        // Root iterators by id, and the roots that feed a device.
        let mut roots: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        let mut device_roots: HashSet<u64> = HashSet::new();
        for (i, n) in nodes.iter().enumerate() {
            if n.role != Role::Iterator {
                continue;
            }
            if n.name == DEVICE_PIPELINE_SECOND_ITERATOR
                && let Some(p) = n.parent_id
            {
                device_roots.insert(p);
            }
            if let Some(id) = n.id
                && n.name.matches("::").count() == 1
            {
                roots.entry(id).or_default().push(i as u32);
            }
        }
        if roots.is_empty() {
            return Ok(None);
        }
        let mut pipelines: Vec<TfDataPipeline> =
            roots.into_iter().map(|(id, calls)| pipeline(&nodes, id, &calls, device_roots.contains(&id))).collect();
        // Numbered by first call, per kind.
        pipelines.sort_by_key(|p| (p.kind, p.first_call, p.root_id));
        let mut counts = [0usize; 2];
        for p in &mut pipelines {
            let k = p.kind as usize;
            p.name = format!("{}:{}", if p.kind == TfDataPipelineKind::Host { "Host" } else { "Device" }, counts[k]);
            counts[k] += 1;
        }
        pipelines.sort_by(|a, b| b.max_latency.cmp(&a.max_latency).then_with(|| a.name.cmp(&b.name)));
        Ok(Some(TfDataPipelines { pipelines }))
    }

    /// The slowest host pipeline (device pipelines are not the step's wait).
    pub fn slowest_host(&self) -> Option<&TfDataPipeline> {
        self.pipelines.iter().find(|p| p.kind == TfDataPipelineKind::Host)
    }

    /// True when a host pipeline has a call slower than [`SLOW_TF_DATA_CALL`].
    pub fn is_input_bound(&self) -> bool {
        self.slowest_host().is_some_and(TfDataPipeline::is_slow)
    }
}

/// The `tf.data` events of a plane with their links; `None` past [`MAX_TF_DATA_EVENTS`].
fn link(plane: &Plane) -> xlens_xplane::Result<Option<Vec<Node<'_>>>> {
    let mask = plane.metadata_mask(|m| Role::of(m.name()).is_some());
    let id_stat = plane.stat_id(names::stat::STEP_ID);
    let parent_stat = plane.stat_id(names::stat::PARENT_ID);
    let element_stat = plane.stat_id(names::stat::ELEMENT_ID);
    let async_stat = plane.stat_id(names::stat::IS_ASYNC);
    let stat = |ev: &Event<'_>, id: Option<StatMetadataId>| bits(id.and_then(|id| ev.stat_or_metadata_stat(id)));
    let mut nodes: Vec<Node<'_>> = Vec::new();
    // Every event of a line (the nesting needs them all): (start, end, index, node).
    let mut events: Vec<(Picos, Picos, u32, Option<u32>)> = Vec::new();
    let mut stack: Vec<(Picos, Picos, Option<u32>)> = Vec::new();
    for line in plane.lines() {
        if !plane.line_may_use(line, &mask) {
            continue;
        }
        events.clear();
        for ev in line.events(plane) {
            let ev = ev?;
            let node = match mask.contains(&ev).then(|| Role::of(ev.name())).flatten() {
                Some(role) => {
                    if nodes.len() >= MAX_TF_DATA_EVENTS {
                        return Ok(None);
                    }
                    nodes.push(Node {
                        name: ev.name(),
                        span: Span::new(ev.start(), ev.end()),
                        role,
                        id: stat(&ev, id_stat),
                        parent_id: stat(&ev, parent_stat),
                        element_id: stat(&ev, element_stat),
                        outer: None,
                        first_inner_iterator: None,
                        children: Vec::new(),
                    });
                    Some(nodes.len() as u32 - 1)
                }
                None => None,
            };
            if async_stat.is_some_and(|id| ev.stat(id).is_some()) {
                continue;
            }
            events.push((ev.start(), ev.end(), ev.index() as u32, node));
        }
        crate::timeline::nest_events(&mut events, &mut stack, |outer, node| {
            if let (Some(p), Some(c)) = (outer, node) {
                nest(&mut nodes, p, c);
            }
        });
    }
    // Across threads: each consumer iterator to the producers of its elements.
    let mut produced: HashMap<(u64, u64), Vec<u32>> = HashMap::new();
    for n in &nodes {
        if n.role == Role::Produce
            && let (Some(element), Some(it)) = (n.element_id, n.first_inner_iterator)
            && let Some(parent) = nodes[it as usize].parent_id
        {
            produced.entry((parent, element)).or_default().push(it);
        }
    }
    for c in 0..nodes.len() {
        let n = &nodes[c];
        if n.role != Role::Consume {
            continue;
        }
        let (Some(element), Some(outer)) = (n.element_id, n.outer) else { continue };
        let consumer = &nodes[outer as usize];
        if consumer.role != Role::Iterator {
            continue;
        }
        let Some(producers) = consumer.id.and_then(|id| produced.get(&(id, element))) else { continue };
        nodes[outer as usize].children.extend_from_slice(producers);
    }
    Ok(Some(nodes))
}

/// Records that `child` is directly inside `parent` on their thread.
fn nest(nodes: &mut [Node<'_>], parent: u32, child: u32) {
    nodes[child as usize].outer = Some(parent);
    if nodes[child as usize].role != Role::Iterator {
        return;
    }
    let p = &mut nodes[parent as usize];
    match p.role {
        Role::Iterator => p.children.push(child),
        Role::Produce if p.first_inner_iterator.is_none() => p.first_inner_iterator = Some(child),
        _ => {}
    }
}

/// One pipeline from its root's calls.
fn pipeline(nodes: &[Node<'_>], root_id: u64, calls: &[u32], device: bool) -> TfDataPipeline {
    let latency = |&i: &u32| nodes[i as usize].span.duration();
    let slowest = *calls
        .iter()
        .max_by(|a, b| {
            latency(a)
                .cmp(&latency(b))
                .then_with(|| nodes[**b as usize].span.start.cmp(&nodes[**a as usize].span.start))
        })
        .expect("a pipeline has a call");
    let total: i64 = calls.iter().map(|i| latency(i).0).sum();
    let mut acc: BTreeMap<u64, Acc<'_>> = BTreeMap::new();
    let mut visits = 0usize;
    visit(nodes, slowest, true, 0, &mut acc, &mut visits);
    let mut its: Vec<Acc<'_>> = Vec::new();
    let mut ids: Vec<u64> = Vec::new();
    for (id, a) in acc {
        ids.push(id);
        its.push(a);
    }
    let mut order: Vec<usize> = (0..its.len()).collect();
    order.sort_by_key(|&i| its[i].order);
    let iterators: Vec<TfDataIterator> = order
        .iter()
        .map(|&i| TfDataIterator {
            id: ids[i],
            name: its[i].name.to_string(),
            calls: its[i].calls,
            total: Picos(its[i].total),
            self_time: Picos(its[i].self_ps.max(0)),
            blocking: its[i].blocking,
        })
        .collect();
    let mut bottleneck: Option<usize> = None;
    for (i, it) in iterators.iter().enumerate() {
        if it.blocking && it.self_time > bottleneck.map_or(Picos::ZERO, |b| iterators[b].self_time) {
            bottleneck = Some(i);
        }
    }
    let root = &nodes[slowest as usize];
    TfDataPipeline {
        name: String::new(),
        kind: if device { TfDataPipelineKind::Device } else { TfDataPipelineKind::Host },
        root_id,
        root_name: root.name.to_string(),
        calls: calls.len() as u64,
        first_call: calls.iter().map(|&i| nodes[i as usize].span.start).min().unwrap_or(Picos::ZERO),
        mean_latency: Picos(total / calls.len() as i64),
        min_latency: calls.iter().map(latency).min().unwrap_or(Picos::ZERO),
        max_latency: latency(&slowest),
        slow_calls: calls.iter().filter(|i| latency(i) > SLOW_TF_DATA_CALL).count() as u64,
        slowest_call: root.span,
        iterators,
        bottleneck,
    }
}

/// Adds one iterator call and the iterator calls under it to `acc` (XProf's
/// `ProcessIteratorEvent`).
fn visit<'a>(
    nodes: &[Node<'a>],
    n: u32,
    blocking: bool,
    level: usize,
    acc: &mut BTreeMap<u64, Acc<'a>>,
    visits: &mut usize,
) {
    if level > MAX_ITERATOR_DEPTH || *visits >= MAX_ITERATOR_VISITS {
        return;
    }
    *visits += 1;
    let node = &nodes[n as usize];
    let Some(id) = node.id else { return };
    let next = acc.len();
    acc.entry(id).or_insert(Acc { name: node.name, order: next, calls: 0, total: 0, self_ps: 0, blocking: false });
    let duration = node.span.duration().0;
    let mut self_ps = duration;
    for &c in &node.children {
        let overlap = node.span.overlap(nodes[c as usize].span).0;
        visit(nodes, c, blocking && overlap > 0, level + 1, acc, visits);
        self_ps -= overlap;
    }
    if let Some(a) = acc.get_mut(&id) {
        a.calls += 1;
        a.total += duration;
        a.self_ps += self_ps;
        a.blocking |= blocking;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::{Space, SpaceBuilder};

    const US: i64 = 1_000_000;

    /// A pipeline `Root → Prefetch` whose element `element` is made on a background thread by
    /// `Prefetch::Map` (over [`produce_at`, +300) us); the consumer waits [100, 400) us.
    fn space(element: i64, consumed: i64, produce_at: i64) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let id = host.stat_metadata(names::stat::STEP_ID);
            let parent = host.stat_metadata(names::stat::PARENT_ID);
            let el = host.stat_metadata(names::stat::ELEMENT_ID);
            let root = host.event_metadata("Iterator::Root");
            let prefetch = host.event_metadata("Iterator::Root::Prefetch");
            let consume = host.event_metadata("PrefetchConsume");
            let produce = host.event_metadata("PrefetchProduce");
            let map = host.event_metadata("Iterator::Root::Prefetch::Map");
            let source = host.event_metadata("Iterator::Root::Prefetch::Map::TFRecord");
            {
                let mut line = host.line(1, "tf_data_iterator_get_next", 0);
                line.event(root, 100 * US, 300 * US).stat(id, 1i64);
                // An unsigned id above i64::MAX, as TensorFlow stores such ids.
                line.event(prefetch, 101 * US, 298 * US).stat(id, u64::MAX - 5).stat(parent, 1i64);
                line.event(consume, 398 * US, US).stat(el, consumed);
            }
            let mut worker = host.line(2, "tf_data_iterator_resource", 0);
            worker.event(produce, produce_at * US, 300 * US).stat(el, element);
            worker.event(map, produce_at * US + US, 298 * US).stat(id, 3i64).stat(parent, u64::MAX - 5);
            worker.event(source, produce_at * US + 2 * US, 250 * US).stat(id, 4i64).stat(parent, 3i64);
        }
        Space::parse(b.finish().into()).unwrap()
    }

    fn read(space: &Space) -> TfDataPipeline {
        TfDataPipelines::read(space.host_threads().unwrap()).unwrap().unwrap().pipelines.remove(0)
    }

    #[test]
    fn the_producer_of_the_awaited_element_is_the_bottleneck() {
        let p = read(&space(7, 7, 50));
        let names: Vec<&str> = p.iterators.iter().map(TfDataIterator::short_name).collect();
        assert_eq!(names, ["Root", "Prefetch", "Map", "TFRecord"]);
        // The producing Map [51, 349) overlaps the consumer's Prefetch [101, 399) by 248 us.
        assert_eq!(p.iterators[1].self_time, Picos(298 * US - 248 * US));
        assert_eq!(p.iterators[1].id, u64::MAX - 5);
        let b = p.bottleneck().unwrap();
        assert_eq!((b.short_name(), b.self_time, b.kind()), ("TFRecord", Picos(250 * US), TfDataStageKind::Source));
        assert!(p.is_slow());
        // The consumer's Prefetch reaches its producer's stages.
        assert!(p.iterators[1].is_async() && p.reaches_below(&p.iterators[1]));
        assert!(!p.reaches_below(&p.iterators[3]));
    }

    #[test]
    fn another_element_is_not_linked() {
        let p = read(&space(7, 8, 50));
        assert_eq!(p.iterators.len(), 2);
        let b = p.bottleneck().unwrap();
        assert_eq!(b.short_name(), "Prefetch");
        // An asynchronous stage whose producer the call does not reach.
        assert!(b.is_async() && !p.reaches_below(b));
    }

    #[test]
    fn a_producer_done_before_the_wait_does_not_block() {
        // Made over [-250, 50) us: linked, but the consumer did not wait for it.
        let p = read(&space(7, 7, -250));
        assert_eq!(p.iterators.len(), 4);
        assert!(!p.iterators[2].blocking && !p.iterators[3].blocking);
        assert_eq!(p.bottleneck().unwrap().short_name(), "Prefetch");
    }

    #[test]
    fn stage_kinds_ignore_versions() {
        assert_eq!(TfDataStageKind::of("FixedLengthRecordV2"), TfDataStageKind::Source);
        assert_eq!(TfDataStageKind::of("BatchV2"), TfDataStageKind::Sequential);
        assert_eq!(TfDataStageKind::of("ParallelInterleaveV4"), TfDataStageKind::Parallel);
        assert_eq!(TfDataStageKind::of("V2"), TfDataStageKind::Other);
        assert_eq!(TfDataStageKind::of("Prefetch"), TfDataStageKind::Other);
    }

    #[test]
    fn a_plane_without_iterators_has_no_pipelines() {
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let op = host.event_metadata("PrefetchConsume");
            host.line(1, "python", 0).event(op, 0, 10);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        assert!(TfDataPipelines::read(space.host_threads().unwrap()).unwrap().is_none());
    }

    proptest::proptest! {
        /// Any nesting, ids and element links (cycles included) read without error, and the
        /// figures hold together: latencies ordered, no self time above its total, the
        /// bottleneck a blocking iterator with the largest self time.
        #[test]
        fn any_pipeline_reads_and_its_figures_hold(
            events in proptest::collection::vec(
                (0usize..2, 0usize..7, 0i64..1_000, 1i64..500, 0u64..4, 0u64..4, 0u64..3),
                1..60,
            )
        ) {
            const NAMES: [&str; 7] = [
                "Iterator::Root", "Iterator::Root::Prefetch", "Iterator::Root::Prefetch::Map",
                "PrefetchProduce", "PrefetchConsume", "Iterator::Root::Prefetch::Map::TFRecord", "other",
            ];
            let mut b = SpaceBuilder::default();
            {
                let mut host = b.plane(1, names::plane::HOST_CPU);
                let id = host.stat_metadata(names::stat::STEP_ID);
                let parent = host.stat_metadata(names::stat::PARENT_ID);
                let el = host.stat_metadata(names::stat::ELEMENT_ID);
                let metas: Vec<_> = NAMES.iter().map(|n| host.event_metadata(n)).collect();
                for line_no in 0..2usize {
                    let mut line = host.line(line_no as i64 + 1, "t", 0);
                    for &(_, n, start, dur, i, p, e) in events.iter().filter(|ev| ev.0 == line_no) {
                        line.event(metas[n], start * US, dur * US).stat(id, i).stat(parent, p).stat(el, e);
                    }
                }
            }
            let space = Space::parse(b.finish().into()).unwrap();
            let Some(found) = TfDataPipelines::read(space.host_threads().unwrap()).unwrap() else { return Ok(()) };
            for p in &found.pipelines {
                proptest::prop_assert!(p.min_latency <= p.mean_latency && p.mean_latency <= p.max_latency);
                proptest::prop_assert!(p.slow_calls <= p.calls && p.calls > 0);
                proptest::prop_assert_eq!(p.iterators[0].id, p.root_id);
                for it in &p.iterators {
                    proptest::prop_assert!(it.self_time <= it.total && it.self_time >= Picos::ZERO, "{:?}", it);
                }
                if let Some(bn) = p.bottleneck() {
                    proptest::prop_assert!(bn.blocking);
                    proptest::prop_assert!(p.iterators.iter().filter(|it| it.blocking).all(|it| it.self_time <= bn.self_time));
                }
            }
        }
    }
}
