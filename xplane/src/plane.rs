//! Planes, lines and metadata tables.
//!
//! A [`Plane`] is decoded in one linear pass over its bytes: the metadata tables are decoded into
//! small owned tables, lines keep only their header and a window of their body, and events stay
//! undecoded until someone iterates them (see [`Line::events`]).

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::error::check_limit;
use crate::error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
use crate::ids::{EventMetadataId, LineId, Picos, PlaneId, StatMetadataId};
use crate::limits::{self, Limit};
use crate::names;
use crate::wire::{Reader, WireError, WireType, read_repeated_int64};

/// What a plane holds, from its name (XProf's naming rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlaneKind {
    /// A TPU TensorCore: `/device:TPU:<ordinal>`.
    TpuTensorCore {
        /// The device ordinal in the name.
        ordinal: u32,
    },
    /// A TPU SparseCore: `/device:TPU:<chip> SparseCore[ <kind>] <core>`.
    TpuSparseCore {
        /// The TPU ordinal the SparseCore belongs to.
        ordinal: u32,
        /// The SparseCore index.
        core: u32,
    },
    /// Another `/device:TPU:` plane.
    TpuOther,
    /// A TPU chip-level plane (HBM, ICI, ...): name starts with `#Chip`.
    TpuChip,
    /// A GPU: `/device:GPU:<ordinal>`.
    Gpu {
        /// The device ordinal in the name.
        ordinal: u32,
    },
    /// A custom device plane (`/device:CUSTOM:`, `/custom:`).
    Custom,
    /// A virtual device plane (`/virtualdevice:`).
    VirtualDevice,
    /// Another `/device` plane.
    OtherDevice,
    /// Host threads: `/host:CPU`.
    HostThreads,
    /// The HLO protos: `/host:metadata`.
    HostMetadata,
    /// Another host plane (`Host CPUs`, `/host:python-tracer`, ...).
    HostOther,
    /// `Task Environment`: profile start and stop.
    TaskEnvironment,
    /// Anything else.
    Other,
}

impl PlaneKind {
    /// Classifies a plane name.
    ///
    /// ```
    /// use xlens_xplane::PlaneKind;
    /// assert_eq!(PlaneKind::from_name("/device:TPU:3"), PlaneKind::TpuTensorCore { ordinal: 3 });
    /// assert_eq!(
    ///     PlaneKind::from_name("/device:TPU:0 SparseCore 1"),
    ///     PlaneKind::TpuSparseCore { ordinal: 0, core: 1 }
    /// );
    /// assert!(PlaneKind::from_name("/host:CPU").is_host());
    /// ```
    pub fn from_name(name: &str) -> PlaneKind {
        use names::plane as p;
        if let Some(rest) = name.strip_prefix(p::TPU_PREFIX) {
            if let Some(ordinal) = parse_u32(rest) {
                return PlaneKind::TpuTensorCore { ordinal };
            }
            return parse_sparse_core(rest).unwrap_or(PlaneKind::TpuOther);
        }
        if let Some(rest) = name.strip_prefix(p::GPU_PREFIX) {
            return match parse_u32(rest) {
                Some(ordinal) => PlaneKind::Gpu { ordinal },
                None => PlaneKind::OtherDevice,
            };
        }
        if name.starts_with(p::CUSTOM_PREFIX) || name.starts_with(p::LEGACY_CUSTOM_PREFIX) {
            return PlaneKind::Custom;
        }
        if name.starts_with(p::VIRTUAL_DEVICE_PREFIX) {
            return PlaneKind::VirtualDevice;
        }
        if name.starts_with(p::CHIP_PREFIX) {
            return PlaneKind::TpuChip;
        }
        if name == p::HOST_CPU {
            return PlaneKind::HostThreads;
        }
        if name == p::HOST_METADATA {
            return PlaneKind::HostMetadata;
        }
        if p::HOST_PREFIXES.iter().any(|prefix| name.starts_with(prefix)) {
            return PlaneKind::HostOther;
        }
        if name == p::TASK_ENVIRONMENT {
            return PlaneKind::TaskEnvironment;
        }
        if name.starts_with(p::DEVICE_PREFIX) {
            return PlaneKind::OtherDevice;
        }
        PlaneKind::Other
    }

    /// True for device planes (XProf's `IsDevicePlane`): TPU, GPU, chip, custom and other `/device` planes.
    pub fn is_device(self) -> bool {
        matches!(
            self,
            PlaneKind::TpuTensorCore { .. }
                | PlaneKind::TpuSparseCore { .. }
                | PlaneKind::TpuOther
                | PlaneKind::TpuChip
                | PlaneKind::Gpu { .. }
                | PlaneKind::Custom
                | PlaneKind::OtherDevice
        )
    }

    /// True for host planes (XProf's `IsHostPlane`).
    pub fn is_host(self) -> bool {
        matches!(self, PlaneKind::HostThreads | PlaneKind::HostMetadata | PlaneKind::HostOther)
    }

    /// A short stable label for tables: `tpu_tensor_core`, `gpu`, `host_threads`, ...
    pub fn label(self) -> &'static str {
        match self {
            PlaneKind::TpuTensorCore { .. } => "tpu_tensor_core",
            PlaneKind::TpuSparseCore { .. } => "tpu_sparse_core",
            PlaneKind::TpuOther => "tpu_other",
            PlaneKind::TpuChip => "tpu_chip",
            PlaneKind::Gpu { .. } => "gpu",
            PlaneKind::Custom => "custom",
            PlaneKind::VirtualDevice => "virtual_device",
            PlaneKind::OtherDevice => "other_device",
            PlaneKind::HostThreads => "host_threads",
            PlaneKind::HostMetadata => "host_metadata",
            PlaneKind::HostOther => "host_other",
            PlaneKind::TaskEnvironment => "task_environment",
            PlaneKind::Other => "other",
        }
    }
}

fn parse_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `<chip> SparseCore[ <word>] <core>`.
fn parse_sparse_core(rest: &str) -> Option<PlaneKind> {
    let mut words = rest.split(' ');
    let ordinal = parse_u32(words.next()?)?;
    if words.next()? != "SparseCore" {
        return None;
    }
    let a = words.next()?;
    let core = match words.next() {
        None => parse_u32(a)?,
        Some(b) => {
            if !a.bytes().all(|c| c.is_ascii_alphabetic()) || a.is_empty() {
                return None;
            }
            parse_u32(b)?
        }
    };
    if words.next().is_some() {
        return None;
    }
    Some(PlaneKind::TpuSparseCore { ordinal, core })
}

/// A range of a plane's bytes or of its names, in 8 bytes (planes are under 4 GiB, and so are
/// their names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// `start..end`; both are positions in a plane (under [`limits::MAX_PLANE_BYTES`]) or in its
    /// names (checked when they are pushed).
    #[inline]
    fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }

    #[inline]
    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    #[inline]
    fn is_empty(self) -> bool {
        self.start == self.end
    }
}

/// The names of a plane's lines and metadata entries: one string per plane, shared by every
/// record, each name a [`Span`] of it. Set once when the plane's decode ends.
#[derive(Clone, Default)]
struct Names(Arc<OnceLock<String>>);

impl Names {
    #[inline]
    fn get(&self, span: Span) -> &str {
        match self.0.get() {
            Some(all) => all.get(span.range()).unwrap_or(""),
            None => "",
        }
    }
}

/// An entry of a plane's event-metadata table.
///
/// Its names live in one string shared by the plane's records, and its stats and payload stay
/// encoded in the plane's bytes: an entry is 64 bytes plus its child ids.
#[derive(Clone)]
pub struct EventMetadata {
    id: EventMetadataId,
    names: Names,
    child_ids: Box<[i64]>,
    name: Span,
    display_name: Span,
    metadata: Span,
    body: Span,
}

impl fmt::Debug for EventMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventMetadata")
            .field("id", &self.id)
            .field("name", &self.name())
            .field("display_name", &self.raw_display_name())
            .field("metadata", &self.metadata.range())
            .field("body", &self.body.range())
            .field("child_ids", &self.child_ids)
            .finish()
    }
}

impl EventMetadata {
    fn empty(id: EventMetadataId, names: Names) -> Self {
        EventMetadata {
            id,
            names,
            child_ids: Box::default(),
            name: Span::default(),
            display_name: Span::default(),
            metadata: Span::default(),
            body: Span::default(),
        }
    }

    /// The id events use to refer to this entry.
    pub fn id(&self) -> EventMetadataId {
        self.id
    }

    /// The name (on TPU op lines, the long HLO text; on host threads, the TraceMe name).
    #[inline]
    pub fn name(&self) -> &str {
        self.names.get(self.name)
    }

    /// The display name, falling back to [`name`](Self::name) when empty.
    #[inline]
    pub fn display_name(&self) -> &str {
        if self.display_name.is_empty() { self.name() } else { self.raw_display_name() }
    }

    /// The display name as stored (possibly empty).
    pub fn raw_display_name(&self) -> &str {
        self.names.get(self.display_name)
    }

    /// Ids of child event metadata.
    pub fn child_ids(&self) -> &[i64] {
        &self.child_ids
    }
}

/// An entry of a plane's stat-metadata table: the name of a stat id (32 bytes; the names live in
/// one string shared by the plane's records).
#[derive(Clone)]
pub struct StatMetadata {
    id: StatMetadataId,
    names: Names,
    name: Span,
    description: Span,
}

impl fmt::Debug for StatMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatMetadata")
            .field("id", &self.id)
            .field("name", &self.name())
            .field("description", &self.description())
            .finish()
    }
}

impl StatMetadata {
    /// The id stats use to refer to this entry.
    pub fn id(&self) -> StatMetadataId {
        self.id
    }

    /// The stat name (e.g. `flops`, `program_id`).
    #[inline]
    pub fn name(&self) -> &str {
        self.names.get(self.name)
    }

    /// The description, often empty.
    pub fn description(&self) -> &str {
        self.names.get(self.description)
    }
}

/// One line of a plane: a thread, a stream or an XLA line such as `XLA Ops`.
///
/// A line is 72 bytes: its header, its names as spans of one string shared by the plane's
/// records, and the window of its events in the plane's bytes. Lines whose message is empty are
/// not stored (see [`Plane::empty_line_count`]).
#[derive(Clone)]
pub struct Line {
    id: LineId,
    display_id: i64,
    timestamp_ns: i64,
    duration_ps: i64,
    names: Names,
    name: Span,
    display_name: Span,
    body: Span,
    index: u32,
    event_count: u32,
}

impl fmt::Debug for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Line")
            .field("index", &self.index)
            .field("id", &self.id)
            .field("display_id", &self.display_id)
            .field("name", &self.name())
            .field("display_name", &self.raw_display_name())
            .field("timestamp_ns", &self.timestamp_ns)
            .field("duration_ps", &self.duration_ps)
            .field("body", &self.body.range())
            .field("event_count", &self.event_count)
            .finish()
    }
}

impl Line {
    /// Position of the line in its plane (file order, counting the empty lines that
    /// [`Plane::lines`] leaves out).
    #[inline]
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// The line id (on host planes, the thread id).
    pub fn id(&self) -> LineId {
        self.id
    }

    /// The display id, falling back to [`id`](Self::id) when 0.
    pub fn display_id(&self) -> LineId {
        if self.display_id == 0 { self.id } else { LineId(self.display_id) }
    }

    /// The display id as stored (0 when unset).
    pub fn raw_display_id(&self) -> i64 {
        self.display_id
    }

    /// The line name (e.g. `XLA Ops`, or a thread name).
    #[inline]
    pub fn name(&self) -> &str {
        self.names.get(self.name)
    }

    /// The display name, falling back to [`name`](Self::name) when empty.
    pub fn display_name(&self) -> &str {
        if self.display_name.is_empty() { self.name() } else { self.raw_display_name() }
    }

    /// The display name as stored (possibly empty).
    pub fn raw_display_name(&self) -> &str {
        self.names.get(self.display_name)
    }

    /// Start of the line in nanoseconds; events are offsets from it.
    #[inline]
    pub fn timestamp_ns(&self) -> i64 {
        self.timestamp_ns
    }

    /// Start of the line in picoseconds (saturating): events' starts are offsets from it.
    #[inline]
    pub fn start(&self) -> Picos {
        Picos::from_ns(self.timestamp_ns)
    }

    /// The recorded duration of the line.
    pub fn duration(&self) -> Picos {
        Picos(self.duration_ps)
    }

    /// The window of the line's events in its plane's bytes.
    pub(crate) fn body(&self) -> Range<usize> {
        self.body.range()
    }

    /// The bytes of the line's message in its plane (its events, mostly).
    pub fn byte_len(&self) -> usize {
        self.body.range().len()
    }

    /// Number of events on the line (counted without decoding them).
    #[inline]
    pub fn event_count(&self) -> usize {
        self.event_count as usize
    }
}

/// Maps ids from the input to positions in a table sorted by id: a dense array of slots when
/// ids are compact, else a binary search of the table itself (nothing stored).
#[derive(Clone, Debug)]
enum IdIndex {
    Dense { base: i64, slots: Box<[u32]> },
    Sorted,
}

const NO_SLOT: u32 = u32::MAX;

impl IdIndex {
    /// The first id and the number of slots of a dense index over `ids` (sorted, unique), when
    /// ids are compact enough for one.
    fn dense_span(ids: &[i64]) -> Option<(i64, usize)> {
        let (&min, &max) = (ids.first()?, ids.last()?);
        let span = (max as i128) - (min as i128) + 1;
        (span <= (2 * ids.len() as i128) + 64).then_some((min, span as usize))
    }

    /// Bytes the index over `ids` takes.
    fn heap_bytes(ids: &[i64]) -> usize {
        IdIndex::dense_span(ids).map_or(0, |(_, span)| span * std::mem::size_of::<u32>())
    }

    /// `ids` must be sorted and unique; position `i` holds `ids[i]`.
    fn build(ids: &[i64]) -> IdIndex {
        match IdIndex::dense_span(ids) {
            Some((base, span)) => {
                let mut slots = vec![NO_SLOT; span].into_boxed_slice();
                for (pos, &id) in ids.iter().enumerate() {
                    slots[(id - base) as usize] = pos as u32;
                }
                IdIndex::Dense { base, slots }
            }
            None => IdIndex::Sorted,
        }
    }

    /// The position of `id` in `table` (sorted by `key`, unique).
    #[inline]
    fn get<T>(&self, id: i64, table: &[T], key: impl Fn(&T) -> i64) -> Option<usize> {
        match self {
            IdIndex::Dense { base, slots } => {
                let slot = id.checked_sub(*base)?;
                let slot = usize::try_from(slot).ok()?;
                match slots.get(slot) {
                    Some(&pos) if pos != NO_SLOT => Some(pos as usize),
                    _ => None,
                }
            }
            IdIndex::Sorted => table.binary_search_by_key(&id, key).ok(),
        }
    }
}

/// One decoded plane of an XSpace.
///
/// Owns a refcounted window of the input; lines and events borrow from it. Its tables cost memory
/// in proportion to the plane's bytes (see [`crate::limits`]).
pub struct Plane {
    index: usize,
    id: PlaneId,
    name: String,
    kind: PlaneKind,
    bytes: Bytes,
    base_offset: u64,
    lines: Vec<Line>,
    empty_lines: usize,
    event_metadata: Vec<EventMetadata>,
    event_metadata_index: IdIndex,
    stat_metadata: Vec<StatMetadata>,
    stat_metadata_index: IdIndex,
    /// From the first plane stat's tag to the end of the last one (other fields in between are
    /// skipped when iterating).
    stats: Span,
    warnings: Vec<Warning>,
    /// The file mapping the bytes come from, when they do.
    file: Option<crate::residency::FileMap>,
    /// The path of that file, for the locations of errors found after the parse.
    path: Option<Arc<Path>>,
    /// Per stored line (as in `lines`): whether an event walk has started on it, so
    /// that [`Space::walk_meter`](crate::Space::walk_meter) counts each line's bytes once.
    walked: Box<[std::sync::atomic::AtomicBool]>,
    /// Bytes of line bodies walked at least once, shared by the planes of a space.
    meter: crate::meter::WalkMeter,
    /// The decode errors met after the parse, shared by the planes of a space.
    decode_log: crate::undecoded::DecodeLog,
    /// Stored lines not walked yet.
    unwalked: std::sync::atomic::AtomicUsize,
    /// Per stored line: its index, once a walk made it or a skip built it (`None` inside when
    /// the line cannot have one). Boxed: 16 bytes a line until then (see `tests/memory.rs`).
    pub(crate) time_indexes: Box<[std::sync::OnceLock<Option<Box<TimeIndex>>>]>,
    /// Where long lines can be cut for [`Line::event_parts`], noted by the parse as it counted
    /// the events: (plane position of an event's tag, the event's index in its line), one
    /// every [`CUT_POINT_BYTES`] or so of each line, in position order (lines follow each
    /// other in the plane's bytes).
    cut_points: Box<[(u32, u32)]>,
    /// The lines of a host-thread plane of [`NOTE_IDS_MIN_BYTES`] or more, by index, with the
    /// metadata ids their events use as the parse saw them. Other lines may use any id.
    line_ids: Box<[(u32, IdBloom)]>,
}

/// Where one block of events of a line's [`TimeIndex`] starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    /// Plane position from which a walk meets the block's first event first.
    pub(crate) pos: usize,
    /// The index of that event in its line.
    pub(crate) index: usize,
    /// Its start.
    pub(crate) start: Picos,
    /// Where the block's metadata entries begin in its index's `metadata`.
    pub(crate) metadata: usize,
}

/// The blocks of one line: a line's time index (built and read in `time_index`; declared here,
/// as each plane keeps one per line).
#[derive(Debug)]
pub(crate) struct TimeIndex {
    pub(crate) blocks: Vec<Block>,
    /// Per block (from its `metadata` to the next one's): the event-metadata positions its
    /// events use, each once.
    pub(crate) metadata: Vec<u32>,
    /// Whether the events come in start order (what skips by time need).
    pub(crate) in_order: bool,
    /// The plane position where the line's events end.
    pub(crate) end: usize,
}

/// The smallest line whose metadata ids the parse notes: walking a shorter one costs little.
const NOTE_IDS_MIN_BYTES: usize = 4096;

/// The metadata ids of a line's events, one bit per id modulo 256: a Bloom filter with one
/// hash, exact for the small dense ids writers give their metadata. Noted by the parse of a
/// host-thread plane from each event's first field, so that a pass looking for a few kinds of
/// event (the step markers) can skip the threads that have none without walking them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdBloom([u64; 4]);

impl IdBloom {
    const EMPTY: IdBloom = IdBloom([0; 4]);
    /// Every id possible: what a line whose ids were not all seen holds.
    const FULL: IdBloom = IdBloom([u64::MAX; 4]);

    /// Adds an id, given by its low 8 bits.
    #[inline]
    fn insert(&mut self, low_bits: u8) {
        self.0[usize::from(low_bits >> 6)] |= 1 << (low_bits & 63);
    }

    /// Adds the metadata id of an event's body (its bytes inside the event message), or makes
    /// the filter full when the id is not the body's first field (writers put it first). Only
    /// the first field is read: an event that repeats the id field further on, which no writer
    /// emits and whose decode keeps the last, is noted by its first. Stepping over every field
    /// of every event to catch that tripled the parse of a host plane (`long_run` open 19 ->
    /// 87 ms), so the rule stays with the first field.
    #[inline]
    fn insert_event(&mut self, body: &[u8]) {
        match body {
            // No field at all: the default id, 0.
            [] => self.insert(0),
            // Field 1, varint: the id's low 8 bits are the first byte's 7 and the next byte's
            // lowest (a one-byte varint has no next byte to take from).
            [0x08, first, rest @ ..] => {
                let high = if first & 0x80 != 0 { rest.first().map_or(0, |b| b & 1) << 7 } else { 0 };
                self.insert((first & 0x7f) | high);
            }
            _ => *self = IdBloom::FULL,
        }
    }

    fn intersects(&self, other: &IdBloom) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }
}

/// The fewest bytes of a run of [`Line::event_parts`]: cutting smaller lines costs more than
/// walking them on one thread.
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub const PART_MIN_BYTES: usize = 1 << 20;

/// The bytes between two cut points of a line ([`Plane`]'s `cut_points`): a quarter of the
/// smallest run [`Line::event_parts`] makes, so runs come out within a quarter of their share.
pub(crate) const CUT_POINT_BYTES: usize = PART_MIN_BYTES / 4;

impl fmt::Debug for Plane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plane")
            .field("index", &self.index)
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("bytes", &self.bytes.len())
            .field("lines", &self.lines.len())
            .field("empty_lines", &self.empty_lines)
            .field("event_metadata", &self.event_metadata.len())
            .field("stat_metadata", &self.stat_metadata.len())
            .finish()
    }
}

impl Plane {
    /// True for the first event walk of the line at file position `index` (the walk that meters
    /// its bytes).
    pub(crate) fn first_walk(&self, index: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        // Later passes, once every line was walked, pay one load.
        if self.unwalked.load(Relaxed) == 0 {
            return false;
        }
        let Ok(at) = self.lines.binary_search_by_key(&index, Line::index) else { return false };
        // A load before the swap: walked lines stay shared in every core's cache.
        let first = self.walked.get(at).is_some_and(|w| !w.load(Relaxed) && !w.swap(true, Relaxed));
        if first {
            self.unwalked.fetch_sub(1, Relaxed);
        }
        first
    }

    /// Whether some event of `line` may have its metadata in `mask`: false only when the parse
    /// saw the metadata id of every event of the line (lines of 4 KiB or more of host-thread
    /// planes, whose events put the id first; an id field repeated later in an event is not
    /// seen) and none is one of the mask's, so the line need not be walked to know.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let (step, launch) = (plane.event_metadata("train_step"), plane.event_metadata("cuLaunchKernel"));
    ///     let mut python = plane.line(1, "python", 0);
    ///     python.event(step, 0, 10);
    ///     drop(python);
    ///     // Lines of 4 KiB or more have their ids noted (shorter ones cost little to walk).
    ///     let mut launcher = plane.line(2, "launcher", 0);
    ///     for i in 0..1_000 {
    ///         launcher.event(launch, i * 10, 1);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let steps = plane.metadata_mask(|m| m.name() == "train_step");
    /// let may: Vec<bool> = plane.lines().iter().map(|l| plane.line_may_use(l, &steps)).collect();
    /// assert_eq!(may, [true, false]);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn line_may_use(&self, line: &Line, mask: &MetadataMask) -> bool {
        if mask.is_empty() {
            return false;
        }
        let Ok(at) = self.line_ids.binary_search_by_key(&(line.index() as u32), |&(index, _)| index) else {
            return true;
        };
        let ids = self.line_ids[at].1;
        let mut wanted = IdBloom::EMPTY;
        for (metadata, _) in self.event_metadata.iter().zip(&mask.bits).filter(|(_, keep)| **keep) {
            wanted.insert(metadata.id.0 as u8);
        }
        ids.intersects(&wanted)
    }

    /// The cut points of `line` (see the field): those inside its body.
    pub(crate) fn cut_points(&self, line: &Line) -> &[(u32, u32)] {
        let body = line.body();
        let from = self.cut_points.partition_point(|&(pos, _)| (pos as usize) < body.start);
        let to = self.cut_points.partition_point(|&(pos, _)| (pos as usize) < body.end);
        &self.cut_points[from..to.max(from)]
    }

    /// The index of a line if a walk already made it (none is built here).
    pub(crate) fn time_index_built(&self, line: &Line) -> Option<&TimeIndex> {
        let at = self.lines.binary_search_by_key(&line.index(), Line::index).ok()?;
        self.time_indexes.get(at)?.get()?.as_deref()
    }

    /// Keeps a line's time index made by walks that indexed it on the way (an index already kept
    /// stays).
    pub(crate) fn keep_time_index(&self, line: &Line, index: Option<TimeIndex>) {
        if let Ok(at) = self.lines.binary_search_by_key(&line.index(), Line::index)
            && let Some(cell) = self.time_indexes.get(at)
        {
            let _ = cell.set(index.map(Box::new));
        }
    }

    /// Adds bytes walked for the first time to the space's meter.
    pub(crate) fn meter_bytes(&self, bytes: usize) {
        self.meter.add(bytes as u64);
    }

    /// Shares `meter` and `decode_log` (the space's) with this plane.
    pub(crate) fn set_meter(&mut self, meter: &crate::meter::WalkMeter, decode_log: &crate::undecoded::DecodeLog) {
        self.meter = meter.clone();
        self.decode_log = decode_log.clone();
    }

    /// Notes that `payload`, the value of a `bytes` stat of this plane (borrowed from it, as
    /// [`crate::Stat::as_bytes`] gives it), does not decode as the message it holds: `what`
    /// says which, as an [`ErrorKind::Malformed`] at the payload's offset in the space's
    /// [`decode_errors`](crate::Space::decode_errors). For the crates that read such payloads
    /// (a memory breakdown, say), whose figures then leave the stat out. A slice that is not
    /// part of the plane is noted at the plane alone.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder, Undecoded};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/device:TPU:0");
    ///     let breakdown = plane.stat_metadata("memory_access_breakdown");
    ///     plane.stat(breakdown, &b"\x0a\x09"[..]);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let payload = plane.stat_by_name("memory_access_breakdown").unwrap().as_bytes().unwrap();
    /// plane.note_undecoded_payload(payload, "memory_access_breakdown is not a MemoryAccessBreakdown");
    /// let errors = space.decode_errors();
    /// assert_eq!(errors.errors[0].what, Undecoded::StatPayload);
    /// assert!(errors.errors[0].error.location().offset.is_some());
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    #[cold]
    pub fn note_undecoded_payload(&self, payload: &[u8], what: &'static str) {
        let base = self.bytes.as_ptr() as usize;
        let start = payload.as_ptr() as usize;
        let location = if start >= base && start + payload.len() <= base + self.bytes.len() {
            self.location_at(start - base)
        } else {
            self.location()
        };
        self.decode_log.note(crate::Undecoded::StatPayload, &Error::new(ErrorKind::Malformed(what), location));
    }

    /// The plane's message body, as the strict check reads it.
    pub(crate) fn body(&self) -> &[u8] {
        &self.bytes
    }

    /// Notes the fault the strict check found at `fault.offset` of the plane's bytes, in the
    /// message named `path` (in line `line`, when in a line), in the space's decode log.
    #[cold]
    pub(crate) fn note_structure(&self, path: String, line: Option<usize>, fault: &crate::strict::Fault) {
        let mut location = self.location_at(fault.offset);
        location.line = line;
        let span = self.offset_of(fault.span.start)..self.offset_of(fault.span.end);
        let error = Error::new(ErrorKind::Malformed(fault.why), location);
        self.decode_log.note_structure(crate::Undecoded::Message(path.into()), &error, span);
    }

    /// Notes `error`, met decoding `what` after the parse, in the space's decode log
    /// ([`crate::Space::decode_errors`]), and returns it: the iterators' error path.
    #[cold]
    #[inline(never)]
    pub(crate) fn undecoded(&self, what: crate::Undecoded, error: Error) -> Error {
        self.decode_log.note(what, &error);
        error
    }

    /// Position of the plane in its space (file order).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The plane id.
    pub fn id(&self) -> PlaneId {
        self.id
    }

    /// The plane name (e.g. `/device:TPU:0`, `/host:CPU`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the plane holds, from its name.
    pub fn kind(&self) -> PlaneKind {
        self.kind
    }

    /// The lines in file order, except those whose message is empty: they have no id, name,
    /// time or event, and are only counted ([`empty_line_count`](Self::empty_line_count)).
    /// [`Line::index`] is the position among all lines.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// How many lines have an empty message (left out of [`lines`](Self::lines)). XProf lists
    /// them as lines with no name and no events.
    pub fn empty_line_count(&self) -> usize {
        self.empty_lines
    }

    /// The first line with this name.
    pub fn line_by_name(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name() == name)
    }

    /// The first line with this id.
    pub fn line_by_id(&self, id: LineId) -> Option<&Line> {
        self.lines.iter().find(|l| l.id == id)
    }

    /// Total number of events over all lines.
    pub fn event_count(&self) -> usize {
        self.lines.iter().map(Line::event_count).sum()
    }

    /// The event-metadata table, ordered by id.
    pub fn event_metadata(&self) -> &[EventMetadata] {
        &self.event_metadata
    }

    /// Looks up event metadata by id.
    #[inline]
    pub fn event_metadata_by_id(&self, id: EventMetadataId) -> Option<&EventMetadata> {
        self.event_metadata_position(id).map(|i| &self.event_metadata[i])
    }

    /// The position of an event-metadata id in [`event_metadata`](Self::event_metadata), for
    /// per-metadata arrays in analyses.
    #[inline]
    pub fn event_metadata_position(&self, id: EventMetadataId) -> Option<usize> {
        self.event_metadata_index.get(id.0, &self.event_metadata, |m| m.id.0)
    }

    /// Decides a predicate once per event-metadata entry, so hot loops test events by id
    /// instead of resolving and matching their names.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let (train, other) = (plane.event_metadata("train"), plane.event_metadata("other"));
    ///     let mut line = plane.line(1, "python", 0);
    ///     line.event(train, 0, 10);
    ///     line.event(other, 10, 5);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let mask = plane.metadata_mask(|m| m.name().starts_with("train"));
    /// let line = &plane.lines()[0];
    /// let hits: Vec<&str> =
    ///     line.events(plane).map_while(|e| e.ok()).filter(|e| mask.contains(e)).map(|e| e.name()).collect();
    /// assert_eq!(hits, ["train"]);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn metadata_mask(&self, mut keep: impl FnMut(&EventMetadata) -> bool) -> MetadataMask {
        let bits: Vec<bool> = self.event_metadata.iter().map(&mut keep).collect();
        MetadataMask { any: bits.iter().any(|b| *b), bits }
    }

    /// The stat-metadata table, ordered by id.
    pub fn stat_metadata(&self) -> &[StatMetadata] {
        &self.stat_metadata
    }

    /// Looks up stat metadata by id.
    #[inline]
    pub fn stat_metadata_by_id(&self, id: StatMetadataId) -> Option<&StatMetadata> {
        self.stat_metadata_index.get(id.0, &self.stat_metadata, |m| m.id.0).map(|i| &self.stat_metadata[i])
    }

    /// The id of the stat with this name, if the plane defines it.
    ///
    /// Resolve names once per plane, then match stats by id in hot loops.
    pub fn stat_id(&self, name: &str) -> Option<StatMetadataId> {
        self.stat_metadata.iter().find(|m| m.name() == name).map(|m| m.id)
    }

    /// The window of an event-metadata entry's body in the plane's bytes.
    pub(crate) fn metadata_body(&self, metadata: &EventMetadata) -> Range<usize> {
        metadata.body.range()
    }

    /// The window of the plane's own stats in its bytes.
    pub(crate) fn stats_window(&self) -> Range<usize> {
        self.stats.range()
    }

    /// The opaque `metadata` payload of an event-metadata entry.
    pub fn metadata_payload<'a>(&'a self, metadata: &EventMetadata) -> &'a [u8] {
        self.bytes.get(metadata.metadata.range()).unwrap_or_default()
    }

    /// Warnings found while decoding the plane (lossy UTF-8 in names), at most
    /// [`limits::MAX_WARNINGS_PER_PLANE`] and then one that counts the rest.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// A zero-copy, refcounted [`Bytes`] for a slice that borrows from this plane (for example a
    /// `bytes` stat value such as a serialized HLO proto). `None` if the slice is not part of it.
    pub fn share(&self, slice: &[u8]) -> Option<Bytes> {
        let base = self.bytes.as_ptr() as usize;
        let start = slice.as_ptr() as usize;
        if slice.is_empty() {
            return Some(Bytes::new());
        }
        if start < base || start + slice.len() > base + self.bytes.len() {
            return None;
        }
        Some(self.bytes.slice(start - base..start - base + slice.len()))
    }

    /// The plane's encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    /// Hands the resident pages of this plane's bytes back to the OS; see
    /// [`crate::Space::release_pages`].
    pub fn release_pages(&self) {
        self.release(0..self.bytes.len());
    }

    /// Lets the plane release the pages of the mapping it was parsed from, and names the file in
    /// the locations of errors and warnings.
    pub(crate) fn attach_file(&mut self, file: crate::residency::FileMap, path: Arc<Path>) {
        for w in &mut self.warnings {
            w.location.file = Some(path.to_path_buf());
        }
        self.file = Some(file);
        self.path = Some(path);
    }

    /// Releases the resident pages of `range` (plane positions) when the plane is file-mapped;
    /// see [`crate::Space::release_pages`].
    pub(crate) fn release(&self, range: Range<usize>) {
        if let Some(file) = &self.file {
            file.release(self.offset_of(range.start) as usize, self.offset_of(range.end) as usize);
        }
    }

    /// Absolute offset of `pos` (a position in this plane's bytes) in the input.
    pub(crate) fn offset_of(&self, pos: usize) -> u64 {
        self.base_offset + pos as u64
    }

    /// A reader over `range` of the plane's bytes (positions are plane offsets).
    #[inline]
    pub(crate) fn reader(&self, range: Range<usize>) -> Reader<'_> {
        Reader::bounded(&self.bytes, range)
    }

    /// The plane (and its file, when it came from one).
    pub(crate) fn location(&self) -> Location {
        let mut location = Location::default().with_plane(self.index);
        location.file = self.path.as_deref().map(Path::to_path_buf);
        location
    }

    /// A position in the plane's bytes, as a location in the input (and its file, if any).
    #[cold]
    pub(crate) fn location_at(&self, pos: usize) -> Location {
        let mut location = self.location();
        location.offset = Some(self.offset_of(pos));
        location
    }

    /// Decodes a plane from its message body. `base_offset` is where the body starts in the
    /// input; `budget` is what its tables may cost ([`limits::table_budget`]).
    pub(crate) fn decode(bytes: Bytes, index: usize, base_offset: u64, budget: u64) -> Result<Plane> {
        let mut dec = PlaneDecoder {
            index,
            base_offset,
            warnings: Vec::new(),
            omitted_warnings: 0,
            names: String::new(),
            shared: Names::default(),
            budget: TableBudget::new(bytes.len(), budget),
            cut_points: Vec::new(),
            note_ids: None,
            line_ids: Vec::new(),
        };
        dec.decode(bytes)
    }
}

/// How many records of each table a plane holds, from a first pass over its fields.
#[derive(Debug, Default)]
struct Counts {
    lines: usize,
    event_metadata: usize,
    stat_metadata: usize,
}

#[cold]
fn location(base_offset: u64, plane: usize, pos: usize) -> Location {
    Location::at_offset(base_offset + pos as u64).with_plane(plane)
}

struct PlaneDecoder {
    index: usize,
    base_offset: u64,
    warnings: Vec<Warning>,
    omitted_warnings: u64,
    /// The names of the plane's records, appended as they are decoded.
    names: String,
    /// What the records share: set to `names` at the end.
    shared: Names,
    budget: TableBudget,
    /// The plane's cut points, line after line (see [`Plane`]'s field).
    cut_points: Vec<(u32, u32)>,
    /// Whether the lines' metadata ids are noted (a host-thread plane, decided by its name
    /// when the first line comes; `None` before).
    note_ids: Option<bool>,
    /// The metadata ids of the long lines so far, when noted.
    line_ids: Vec<(u32, IdBloom)>,
}

impl PlaneDecoder {
    fn loc(&self, pos: usize) -> Location {
        location(self.base_offset, self.index, pos)
    }

    fn wire_err(&self, e: WireError, pos: usize) -> Error {
        wire_error(e, self.loc(pos))
    }

    fn wrong_type(&self, message: &'static str, field: u32, wire: WireType, pos: usize) -> Error {
        Error::new(ErrorKind::WrongWireType { message, field, found: wire.name() }, self.loc(pos))
    }

    /// Charges `bytes` to the plane's table budget.
    #[inline]
    fn charge(&mut self, bytes: usize, pos: usize) -> Result<()> {
        let (base, plane) = (self.base_offset, self.index);
        self.budget.charge(bytes, || location(base, plane, pos))
    }

    fn warn(&mut self, kind: WarningKind, pos: usize) {
        if self.warnings.len() < limits::MAX_WARNINGS_PER_PLANE {
            let location = self.loc(pos);
            self.warnings.push(Warning { kind, location });
        } else {
            self.omitted_warnings += 1;
        }
    }

    /// A string as an owned `String` (lossy, with a warning, when not UTF-8).
    fn string(&mut self, raw: &[u8], what: &'static str, pos: usize) -> String {
        match std::str::from_utf8(raw) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                self.warn(WarningKind::InvalidUtf8 { what }, pos);
                String::from_utf8_lossy(raw).into_owned()
            }
        }
    }

    /// Appends a name to the plane's names (lossy, with a warning, when not UTF-8) and returns
    /// its span. Names cost what they were read from; what lossy decoding adds is charged.
    fn name(&mut self, raw: &[u8], what: &'static str, pos: usize) -> Result<Span> {
        let start = self.names.len();
        match std::str::from_utf8(raw) {
            Ok(s) => {
                self.reserve_names(s.len());
                self.names.push_str(s);
            }
            Err(_) => {
                self.warn(WarningKind::InvalidUtf8 { what }, pos);
                let lossy = String::from_utf8_lossy(raw);
                self.charge(lossy.len().saturating_sub(raw.len()), pos)?;
                self.reserve_names(lossy.len());
                self.names.push_str(&lossy);
            }
        }
        let end = self.names.len();
        if end > u32::MAX as usize {
            // Spans are u32: only a plane near 4 GiB of lossy names gets here.
            self.charge(usize::MAX, pos)?;
        }
        Ok(Span::new(start, end))
    }

    /// Room for `additional` more bytes of names, growing by a quarter (not doubling): the
    /// names are shrunk to their size at the end, and the spare room at the peak stays small.
    #[inline]
    fn reserve_names(&mut self, additional: usize) {
        if self.names.capacity() - self.names.len() < additional {
            self.names.reserve_exact(additional.max(self.names.len() / 4).max(256));
        }
    }

    /// The first pass: counts the records of each table, checks the count limits, and charges
    /// the records to the budget before anything is allocated. Stops quietly where the second
    /// pass will fail.
    fn count(&mut self, buf: &[u8]) -> Result<Counts> {
        let mut r = Reader::new(buf);
        let mut c = Counts::default();
        let (mut all_lines, mut stats) = (0usize, 0usize);
        while !r.is_empty() {
            let Ok((field, wire)) = r.read_tag() else { break };
            let val_pos = r.pos();
            if wire != WireType::Len {
                if matches!(field, 2..=6) || (field == 1 && wire != WireType::Varint) || r.skip(wire).is_err() {
                    break;
                }
                continue;
            }
            let Ok(body) = r.read_len() else { break };
            match field {
                3 => {
                    all_lines += 1;
                    check_limit(Limit::LinesPerPlane, all_lines, || self.loc(val_pos))?;
                    // Empty lines are counted, not stored.
                    if !body.is_empty() {
                        c.lines += 1;
                        self.charge(std::mem::size_of::<Line>(), val_pos)?;
                    }
                }
                4 => {
                    c.event_metadata += 1;
                    check_limit(Limit::EventMetadataPerPlane, c.event_metadata, || self.loc(val_pos))?;
                    self.charge(std::mem::size_of::<EventMetadata>(), val_pos)?;
                }
                5 => {
                    c.stat_metadata += 1;
                    check_limit(Limit::StatMetadataPerPlane, c.stat_metadata, || self.loc(val_pos))?;
                    self.charge(std::mem::size_of::<StatMetadata>(), val_pos)?;
                }
                6 => {
                    stats += 1;
                    check_limit(Limit::StatsPerPlane, stats, || self.loc(val_pos))?;
                }
                1 => break,
                _ => {}
            }
        }
        Ok(c)
    }

    fn decode(&mut self, bytes: Bytes) -> Result<Plane> {
        // Events keep plane offsets as u32.
        check_limit(Limit::PlaneBytes, bytes.len(), || self.loc(0))?;
        let buf: &[u8] = &bytes;
        let counts = self.count(buf)?;
        let mut r = Reader::new(buf);
        let mut id = 0i64;
        let mut name_raw: &[u8] = &[];
        let mut name_pos = 0usize;
        let mut lines = Vec::with_capacity(counts.lines);
        let mut line_index = 0usize;
        let mut event_metadata: Vec<EventMetadata> = Vec::with_capacity(counts.event_metadata);
        let mut stat_metadata: Vec<StatMetadata> = Vec::with_capacity(counts.stat_metadata);
        let mut stats: Option<Span> = None;
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| self.wire_err(e, tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (1, WireType::Varint) => id = r.read_varint().map_err(|e| self.wire_err(e, val_pos))? as i64,
                (2, WireType::Len) => {
                    name_raw = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    name_pos = val_pos;
                }
                (3, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    if !body.is_empty() {
                        // The name comes before the lines (field order); a plane whose name
                        // comes later notes no ids.
                        let kind = || PlaneKind::from_name(&String::from_utf8_lossy(name_raw));
                        let note = *self.note_ids.get_or_insert_with(|| kind() == PlaneKind::HostThreads);
                        if note && body.len() >= NOTE_IDS_MIN_BYTES {
                            self.charge(std::mem::size_of::<(u32, IdBloom)>(), val_pos)?;
                        }
                        let line = self.decode_line(body, start, line_index)?;
                        lines.push(line);
                    }
                    line_index += 1;
                }
                (4, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    event_metadata.push(self.decode_event_metadata_entry(body, start)?);
                }
                (5, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    stat_metadata.push(self.decode_stat_metadata_entry(body, start)?);
                }
                (6, WireType::Len) => {
                    r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let span = stats.get_or_insert(Span::new(tag_pos, tag_pos));
                    span.end = r.pos() as u32;
                }
                (1..=6, _) => return Err(self.wrong_type("XPlane", field, wire, tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, val_pos))?,
            }
        }
        let name = self.string(name_raw, "plane name", name_pos);
        // Map semantics: the last entry for a key wins. Entries' positions give their order:
        // event metadata by its body's (unique) start, stat metadata by the spans of its names,
        // which only grow in file order (equal only between entries whose names are all empty
        // and that are then alike).
        let event_metadata = dedup_last_by_key(event_metadata, |m| m.id.0, |m| m.body.start);
        let stat_metadata = dedup_last_by_key(
            stat_metadata,
            |m| m.id.0,
            |m| (m.name.start, m.name.end, m.description.start, m.description.end),
        );
        let event_ids: Vec<i64> = event_metadata.iter().map(|m| m.id.0).collect();
        let stat_ids: Vec<i64> = stat_metadata.iter().map(|m| m.id.0).collect();
        self.charge(IdIndex::heap_bytes(&event_ids) + IdIndex::heap_bytes(&stat_ids), 0)?;
        let event_metadata_index = IdIndex::build(&event_ids);
        let stat_metadata_index = IdIndex::build(&stat_ids);
        drop((event_ids, stat_ids));
        let mut names = std::mem::take(&mut self.names);
        names.shrink_to_fit();
        let _ = self.shared.0.set(names);
        let mut warnings = std::mem::take(&mut self.warnings);
        if self.omitted_warnings > 0 {
            warnings.push(Warning {
                kind: WarningKind::WarningsOmitted { count: self.omitted_warnings },
                location: Location::default().with_plane(self.index),
            });
        }
        Ok(Plane {
            index: self.index,
            id: PlaneId(id),
            kind: PlaneKind::from_name(&name),
            name,
            bytes,
            base_offset: self.base_offset,
            lines,
            empty_lines: line_index - counts.lines,
            event_metadata,
            event_metadata_index,
            stat_metadata,
            stat_metadata_index,
            stats: stats.unwrap_or_default(),
            warnings,
            file: None,
            path: None,
            walked: (0..counts.lines).map(|_| std::sync::atomic::AtomicBool::new(false)).collect(),
            meter: crate::meter::WalkMeter::default(),
            decode_log: crate::undecoded::DecodeLog::default(),
            unwalked: std::sync::atomic::AtomicUsize::new(counts.lines),
            time_indexes: (0..counts.lines).map(|_| std::sync::OnceLock::new()).collect(),
            cut_points: std::mem::take(&mut self.cut_points).into_boxed_slice(),
            line_ids: std::mem::take(&mut self.line_ids).into_boxed_slice(),
        })
    }

    fn decode_line(&mut self, body: &[u8], start: usize, index: usize) -> Result<Line> {
        let mut r = Reader::new(body);
        let mut line = Line {
            index: index as u32,
            id: LineId(0),
            display_id: 0,
            names: self.shared.clone(),
            name: Span::default(),
            display_name: Span::default(),
            timestamp_ns: 0,
            duration_ps: 0,
            body: Span::new(start, start + body.len()),
            event_count: 0,
        };
        // Under 2^31: every event takes at least two bytes of a plane under 4 GiB.
        let mut event_count = 0usize;
        // The first event is no cut: the first cut point is the first event a cut's worth in.
        let mut next_cut = CUT_POINT_BYTES;
        let note_ids = self.note_ids == Some(true) && body.len() >= NOTE_IDS_MIN_BYTES;
        let mut ids = IdBloom::EMPTY;
        let err = |this: &Self, e, pos: usize| this.wire_err(e, start + pos).in_line(index);
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| err(self, e, tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (4, WireType::Len) => {
                    if tag_pos >= next_cut {
                        self.cut_points.push(((start + tag_pos) as u32, event_count as u32));
                        next_cut = tag_pos + CUT_POINT_BYTES;
                    }
                    let event = r.read_len().map_err(|e| err(self, e, val_pos))?;
                    if note_ids {
                        ids.insert_event(event);
                    }
                    event_count += 1;
                    // Events come in long runs: count the rest of the run on their one-byte tag
                    // (field 4, length-delimited) without the general tag match.
                    loop {
                        // Events of under 128 bytes (a TPU op line's, most host events) on
                        // the tag and length bytes alone; the lines below take any other.
                        let cut_points = &mut self.cut_points;
                        event_count += r.skip_short_run(0x22, |at, run_index, event| {
                            if at >= next_cut {
                                cut_points.push(((start + at) as u32, (event_count + run_index) as u32));
                                next_cut = at + CUT_POINT_BYTES;
                            }
                            if note_ids {
                                ids.insert_event(event);
                            }
                        });
                        let at = r.pos();
                        if !r.eat(0x22) {
                            break;
                        }
                        if at >= next_cut {
                            self.cut_points.push(((start + at) as u32, event_count as u32));
                            next_cut = at + CUT_POINT_BYTES;
                        }
                        let len_pos = r.pos();
                        let event = r.read_len().map_err(|e| err(self, e, len_pos))?;
                        if note_ids {
                            ids.insert_event(event);
                        }
                        event_count += 1;
                    }
                }
                (1, WireType::Varint) => line.id = LineId(r.read_varint().map_err(|e| err(self, e, val_pos))? as i64),
                (10, WireType::Varint) => line.display_id = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (3, WireType::Varint) => line.timestamp_ns = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (9, WireType::Varint) => line.duration_ps = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (2, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| err(self, e, val_pos))?;
                    line.name = self.name(raw, "line name", start + val_pos).map_err(|e| e.in_line(index))?;
                }
                (11, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| err(self, e, val_pos))?;
                    line.display_name =
                        self.name(raw, "line display name", start + val_pos).map_err(|e| e.in_line(index))?;
                }
                (1..=4 | 9..=11, _) => {
                    return Err(self.wrong_type("XLine", field, wire, start + tag_pos).in_line(index));
                }
                _ => r.skip(wire).map_err(|e| err(self, e, val_pos))?,
            }
        }
        line.event_count = event_count as u32;
        if note_ids {
            self.line_ids.push((index as u32, ids));
        }
        Ok(line)
    }

    /// Decodes one `map<int64, XEventMetadata>` entry.
    fn decode_event_metadata_entry(&mut self, body: &[u8], start: usize) -> Result<EventMetadata> {
        let mut r = Reader::new(body);
        let mut key = 0i64;
        let mut value: Option<EventMetadata> = None;
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| self.wire_err(e, start + tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (1, WireType::Varint) => key = r.read_varint().map_err(|e| self.wire_err(e, start + val_pos))? as i64,
                (2, WireType::Len) => {
                    let inner = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    let inner_start = start + r.pos() - inner.len();
                    value = Some(self.decode_event_metadata(inner, inner_start)?);
                }
                (1 | 2, _) => return Err(self.wrong_type("XPlane.event_metadata entry", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        let mut meta = value.unwrap_or_else(|| {
            // No value: an empty body at the entry's own position (which orders entries).
            let mut meta = EventMetadata::empty(EventMetadataId(0), self.shared.clone());
            meta.body = Span::new(start, start);
            meta
        });
        // The map key is what events refer to; the value's own id is informational.
        meta.id = EventMetadataId(key);
        Ok(meta)
    }

    fn decode_event_metadata(&mut self, body: &[u8], start: usize) -> Result<EventMetadata> {
        let mut r = Reader::new(body);
        let mut meta = EventMetadata::empty(EventMetadataId(0), self.shared.clone());
        meta.body = Span::new(start, start + body.len());
        let mut child_ids = Vec::new();
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| self.wire_err(e, start + tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (1, WireType::Varint) => {
                    meta.id = EventMetadataId(r.read_varint().map_err(|e| self.wire_err(e, start + val_pos))? as i64)
                }
                (2, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.name = self.name(raw, "event metadata name", start + val_pos)?;
                }
                (4, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.display_name = self.name(raw, "event metadata display name", start + val_pos)?;
                }
                (3, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    let s = start + r.pos() - raw.len();
                    meta.metadata = Span::new(s, s + raw.len());
                }
                (5, WireType::Len) => {
                    // Stats are decoded on access; check the framing now.
                    r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                }
                (6, WireType::Varint | WireType::Len) => {
                    // Eight bytes per id, from as little as one byte of input: charge them first.
                    let ids = match wire {
                        WireType::Len => {
                            let mut peek = r;
                            let packed = peek.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                            packed.iter().filter(|&&b| b < 0x80).count()
                        }
                        _ => 1,
                    };
                    self.charge(ids * std::mem::size_of::<i64>(), start + val_pos)?;
                    child_ids.reserve_exact(ids);
                    read_repeated_int64(&mut r, wire, &mut child_ids).map_err(|e| self.wire_err(e, start + val_pos))?;
                }
                (1..=6, _) => return Err(self.wrong_type("XEventMetadata", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        meta.child_ids = child_ids.into_boxed_slice();
        Ok(meta)
    }

    /// Decodes one `map<int64, XStatMetadata>` entry.
    fn decode_stat_metadata_entry(&mut self, body: &[u8], start: usize) -> Result<StatMetadata> {
        let mut r = Reader::new(body);
        let mut key = 0i64;
        let mut meta = self.empty_stat_metadata();
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| self.wire_err(e, start + tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (1, WireType::Varint) => key = r.read_varint().map_err(|e| self.wire_err(e, start + val_pos))? as i64,
                (2, WireType::Len) => {
                    let inner = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    let inner_start = start + r.pos() - inner.len();
                    meta = self.decode_stat_metadata(inner, inner_start)?;
                }
                (1 | 2, _) => return Err(self.wrong_type("XPlane.stat_metadata entry", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        meta.id = StatMetadataId(key);
        Ok(meta)
    }

    /// A stat-metadata entry with empty names, placed where the names end now (so that the
    /// spans of entries increase in file order: see `dedup_last_by_key`).
    fn empty_stat_metadata(&self) -> StatMetadata {
        let here = Span::new(self.names.len(), self.names.len());
        StatMetadata { id: StatMetadataId(0), names: self.shared.clone(), name: here, description: here }
    }

    fn decode_stat_metadata(&mut self, body: &[u8], start: usize) -> Result<StatMetadata> {
        let mut r = Reader::new(body);
        let mut meta = self.empty_stat_metadata();
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| self.wire_err(e, start + tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (1, WireType::Varint) => {
                    meta.id = StatMetadataId(r.read_varint().map_err(|e| self.wire_err(e, start + val_pos))? as i64)
                }
                (2, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.name = self.name(raw, "stat metadata name", start + val_pos)?;
                }
                (3, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.description = self.name(raw, "stat metadata description", start + val_pos)?;
                }
                (1..=3, _) => return Err(self.wrong_type("XStatMetadata", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        Ok(meta)
    }
}

/// Sorts by id and keeps, for each id, the entry that came last in the input (map semantics), in
/// place. `order` must increase in file order, except between entries of identical content.
fn dedup_last_by_key<T, K: Ord>(mut items: Vec<T>, id: impl Fn(&T) -> i64, order: impl Fn(&T) -> K) -> Vec<T> {
    if items.windows(2).all(|w| id(&w[0]) < id(&w[1])) {
        return items;
    }
    // The latest entry of each id first, then drop the others.
    items.sort_unstable_by(|a, b| id(a).cmp(&id(b)).then_with(|| order(b).cmp(&order(a))));
    items.dedup_by(|next, kept| id(next) == id(kept));
    items.shrink_to_fit();
    items
}

#[cold]
pub(crate) fn wire_error(e: WireError, location: Location) -> Error {
    let kind = match e {
        WireError::Truncated => ErrorKind::Truncated,
        other => ErrorKind::Malformed(other.describe()),
    };
    Error::new(kind, location)
}

/// What a plane's tables have cost so far, against its budget.
#[derive(Debug)]
pub(crate) struct TableBudget {
    spent: u64,
    budget: u64,
    plane_bytes: u64,
}

impl TableBudget {
    pub(crate) fn new(plane_bytes: usize, budget: u64) -> Self {
        TableBudget { spent: 0, budget, plane_bytes: plane_bytes as u64 }
    }

    /// Charges `bytes`; fails with [`ErrorKind::TableBudget`] when the total goes over budget.
    #[inline]
    pub(crate) fn charge(&mut self, bytes: usize, location: impl FnOnce() -> Location) -> Result<(), Error> {
        self.spent = self.spent.saturating_add(bytes as u64);
        if self.spent > self.budget {
            return Err(self.exceeded(location()));
        }
        Ok(())
    }

    #[cold]
    fn exceeded(&self, location: Location) -> Error {
        Error::new(
            ErrorKind::TableBudget { needed: self.spent, budget: self.budget, plane_bytes: self.plane_bytes },
            location,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plane_kinds_follow_xprof_naming() {
        let cases = [
            ("/device:TPU:0", PlaneKind::TpuTensorCore { ordinal: 0 }),
            ("/device:TPU:12", PlaneKind::TpuTensorCore { ordinal: 12 }),
            ("/device:TPU:0 SparseCore 3", PlaneKind::TpuSparseCore { ordinal: 0, core: 3 }),
            ("/device:TPU:1 SparseCore Foo 2", PlaneKind::TpuSparseCore { ordinal: 1, core: 2 }),
            ("/device:TPU:1 SparseCore", PlaneKind::TpuOther),
            ("/device:TPU:", PlaneKind::TpuOther),
            ("#Chip 0 HBM", PlaneKind::TpuChip),
            ("/device:GPU:7", PlaneKind::Gpu { ordinal: 7 }),
            ("/device:CUSTOM:MOSAIC:1", PlaneKind::Custom),
            ("/custom:x", PlaneKind::Custom),
            ("/host:CPU", PlaneKind::HostThreads),
            ("/host:metadata", PlaneKind::HostMetadata),
            ("/host:python-tracer", PlaneKind::HostOther),
            ("Host CPUs", PlaneKind::HostOther),
            ("Task Environment", PlaneKind::TaskEnvironment),
            ("/device:FOO", PlaneKind::OtherDevice),
            ("whatever", PlaneKind::Other),
        ];
        for (name, kind) in cases {
            assert_eq!(PlaneKind::from_name(name), kind, "{name}");
        }
        assert!(PlaneKind::TpuChip.is_device());
        assert!(!PlaneKind::HostMetadata.is_device());
        assert!(PlaneKind::HostMetadata.is_host());
        assert!(!PlaneKind::TaskEnvironment.is_host());
    }

    #[test]
    fn id_index_dense_and_sparse() {
        let ids = [1i64, 2, 3, 5];
        let dense = IdIndex::build(&ids);
        assert!(matches!(dense, IdIndex::Dense { .. }));
        assert_eq!(IdIndex::heap_bytes(&ids), 5 * 4);
        let get = |index: &IdIndex, table: &[i64], id| index.get(id, table, |&k| k);
        assert_eq!(get(&dense, &ids, 5), Some(3));
        assert_eq!(get(&dense, &ids, 4), None);
        assert_eq!(get(&dense, &ids, -1), None);
        assert_eq!(get(&dense, &ids, i64::MIN), None);
        let ids = [-5i64, 7, 1 << 40];
        let sparse = IdIndex::build(&ids);
        assert!(matches!(sparse, IdIndex::Sorted));
        assert_eq!(IdIndex::heap_bytes(&ids), 0);
        assert_eq!(get(&sparse, &ids, 1 << 40), Some(2));
        assert_eq!(get(&sparse, &ids, 0), None);
    }

    /// A line's noted metadata ids never hide an event of a mask: for masks of one entry each
    /// (ids of one- and two-byte varints, and past the filter's 256 bits), a line the parse says
    /// cannot use the entry has no such event, and while every id is under 256 the answer is
    /// exact.
    #[test]
    fn noted_line_ids_never_hide_an_event() {
        let mut b = crate::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let ids: Vec<_> = (0..300).map(|i| plane.event_metadata(&format!("m{i}"))).collect();
            for l in 0..6usize {
                let mut line = plane.line(l as i64 + 1, &format!("t{l}"), 0);
                for i in 0..2_000usize {
                    line.event(ids[l * 37 + i % 20], i as i64 * 10, 5);
                }
            }
        }
        let space = crate::Space::parse(b.finish().into()).unwrap();
        let plane = &space.planes()[0];
        assert!(plane.lines().iter().all(|l| l.byte_len() >= NOTE_IDS_MIN_BYTES));
        let mut skipped = 0;
        for m in plane.event_metadata() {
            let mask = plane.metadata_mask(|x| x.id == m.id);
            for line in plane.lines() {
                let uses = line.events(plane).any(|e| mask.contains(&e.unwrap()));
                let may = plane.line_may_use(line, &mask);
                assert!(may || !uses, "line {} hides metadata {}", line.index(), m.id.0);
                if m.id.0 < 256 {
                    assert_eq!(may, uses, "line {} metadata {}", line.index(), m.id.0);
                }
                skipped += usize::from(!may);
            }
        }
        assert!(skipped > 1_000, "{skipped}");
    }

    /// The filter takes an event's id from its first field, and is full when the id is not there.
    #[test]
    fn id_bloom_reads_the_first_field() {
        let bits =
            |b: &IdBloom| (0..=255u8).filter(|&i| b.0[usize::from(i >> 6)] >> (i & 63) & 1 == 1).collect::<Vec<_>>();
        let mut ids = IdBloom::EMPTY;
        ids.insert_event(&[0x08, 0x05, 0x10, 0x01]);
        ids.insert_event(&[0x08, 0xC8, 0x01]);
        ids.insert_event(&[0x08, 0x81, 0x02]);
        ids.insert_event(&[]);
        // 5, 200, 257 (as 1) and the default 0.
        assert_eq!(bits(&ids), [0, 1, 5, 200]);
        ids.insert_event(&[0x10, 0x01, 0x08, 0x05]);
        assert_eq!(ids, IdBloom::FULL);
    }

    #[test]
    fn records_are_small() {
        // What a record costs is what the table budget charges; keep them compact.
        assert_eq!(std::mem::size_of::<Line>(), 72);
        // A line's index cell, until a walk makes its index.
        assert_eq!(std::mem::size_of::<std::sync::OnceLock<Option<Box<TimeIndex>>>>(), 16);
        assert_eq!(std::mem::size_of::<EventMetadata>(), 64);
        assert_eq!(std::mem::size_of::<StatMetadata>(), 32);
    }

    #[test]
    fn dedup_keeps_last_entry_per_key() {
        let items = vec![(3, 0, 'a'), (1, 1, 'b'), (3, 2, 'c'), (2, 3, 'd'), (3, 4, 'e'), (1, 5, 'f')];
        let v = dedup_last_by_key(items, |t| t.0, |t| t.1);
        assert_eq!(v, vec![(1, 5, 'f'), (2, 3, 'd'), (3, 4, 'e')]);
        let sorted = vec![(1, 0, 'a'), (2, 1, 'b')];
        assert_eq!(dedup_last_by_key(sorted.clone(), |t| t.0, |t| t.1), sorted);
    }
}

/// A predicate over a plane's event metadata, decided once per entry (see
/// [`Plane::metadata_mask`]). Events with dangling metadata ids never match.
#[derive(Clone, Debug, Default)]
pub struct MetadataMask {
    /// Per entry of the plane's event-metadata table: whether it passed.
    pub(crate) bits: Vec<bool>,
    /// Whether any entry passed.
    pub(crate) any: bool,
}

impl MetadataMask {
    /// True when the metadata entry at `position` in its plane's table passed.
    #[inline]
    pub(crate) fn contains_position(&self, position: usize) -> bool {
        self.any && self.bits.get(position).copied().unwrap_or(false)
    }

    /// True when no metadata entry passed (no event can match: a walk can be skipped).
    pub fn is_empty(&self) -> bool {
        !self.any
    }
}
