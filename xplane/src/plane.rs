//! Planes, lines and metadata tables.
//!
//! A [`Plane`] is decoded in one linear pass over its bytes: the metadata tables are decoded into
//! small owned tables, lines keep only their header and a window of their body, and events stay
//! undecoded until someone iterates them (see [`Line::events`]).

use std::fmt;
use std::ops::Range;

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
use crate::event::{EventIter, Stat, StatIter};
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

/// An entry of a plane's event-metadata table.
#[derive(Clone, Debug)]
pub struct EventMetadata {
    id: EventMetadataId,
    name: String,
    display_name: String,
    metadata: Range<usize>,
    body: Range<usize>,
    child_ids: Vec<i64>,
}

impl EventMetadata {
    /// The id events use to refer to this entry.
    pub fn id(&self) -> EventMetadataId {
        self.id
    }

    /// The name (on TPU op lines, the long HLO text; on host threads, the TraceMe name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The display name, falling back to [`name`](Self::name) when empty.
    pub fn display_name(&self) -> &str {
        if self.display_name.is_empty() { &self.name } else { &self.display_name }
    }

    /// The display name as stored (possibly empty).
    pub fn raw_display_name(&self) -> &str {
        &self.display_name
    }

    /// Ids of child event metadata.
    pub fn child_ids(&self) -> &[i64] {
        &self.child_ids
    }
}

/// An entry of a plane's stat-metadata table: the name of a stat id.
#[derive(Clone, Debug)]
pub struct StatMetadata {
    id: StatMetadataId,
    name: String,
    description: String,
}

impl StatMetadata {
    /// The id stats use to refer to this entry.
    pub fn id(&self) -> StatMetadataId {
        self.id
    }

    /// The stat name (e.g. `flops`, `program_id`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description, often empty.
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// One line of a plane: a thread, a stream or an XLA line such as `XLA Ops`.
#[derive(Clone, Debug)]
pub struct Line {
    index: usize,
    id: LineId,
    display_id: i64,
    name: String,
    display_name: String,
    timestamp_ns: i64,
    duration_ps: i64,
    body: Range<usize>,
    event_count: usize,
}

impl Line {
    /// Position of the line in its plane (file order).
    pub fn index(&self) -> usize {
        self.index
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
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The display name, falling back to [`name`](Self::name) when empty.
    pub fn display_name(&self) -> &str {
        if self.display_name.is_empty() { &self.name } else { &self.display_name }
    }

    /// The display name as stored (possibly empty).
    pub fn raw_display_name(&self) -> &str {
        &self.display_name
    }

    /// Start of the line in nanoseconds; events are offsets from it.
    pub fn timestamp_ns(&self) -> i64 {
        self.timestamp_ns
    }

    /// Start of the line in picoseconds.
    pub fn start(&self) -> Picos {
        Picos::from_ns(self.timestamp_ns)
    }

    /// The recorded duration of the line.
    pub fn duration(&self) -> Picos {
        Picos(self.duration_ps)
    }

    /// Number of events on the line (counted without decoding them).
    pub fn event_count(&self) -> usize {
        self.event_count
    }

    /// Iterates the line's events, decoding each lazily.
    ///
    /// The iterator yields `Err` once on malformed event bytes and then stops.
    pub fn events<'a>(&'a self, plane: &'a Plane) -> EventIter<'a> {
        EventIter::new(plane, self, Reader::bounded(&plane.bytes, self.body.clone()))
    }

    /// Like [`Line::events`], for a pass that reads the line once: the file pages behind the walk
    /// are released as it goes (see [`crate::ReleasingEvents`]).
    pub fn events_releasing<'a>(&'a self, plane: &'a Plane) -> crate::ReleasingEvents<'a> {
        crate::ReleasingEvents::new(self.events(plane), self.body.clone())
    }
}

/// Maps ids from the input to positions in a table: dense when ids are compact, sorted otherwise.
#[derive(Clone, Debug)]
enum IdIndex {
    Dense { base: i64, slots: Vec<u32> },
    Sparse(Vec<(i64, u32)>),
}

const NO_SLOT: u32 = u32::MAX;

impl IdIndex {
    /// `ids` must be sorted and unique; position `i` holds `ids[i]`.
    fn build(ids: impl ExactSizeIterator<Item = i64> + Clone) -> IdIndex {
        let n = ids.len();
        let (Some(min), Some(max)) = (ids.clone().next(), ids.clone().last()) else {
            return IdIndex::Sparse(Vec::new());
        };
        let span = (max as i128) - (min as i128) + 1;
        if span <= (2 * n as i128) + 64 {
            let mut slots = vec![NO_SLOT; span as usize];
            for (pos, id) in ids.enumerate() {
                slots[(id - min) as usize] = pos as u32;
            }
            IdIndex::Dense { base: min, slots }
        } else {
            IdIndex::Sparse(ids.enumerate().map(|(pos, id)| (id, pos as u32)).collect())
        }
    }

    #[inline]
    fn get(&self, id: i64) -> Option<usize> {
        match self {
            IdIndex::Dense { base, slots } => {
                let slot = id.checked_sub(*base)?;
                let slot = usize::try_from(slot).ok()?;
                match slots.get(slot) {
                    Some(&pos) if pos != NO_SLOT => Some(pos as usize),
                    _ => None,
                }
            }
            IdIndex::Sparse(pairs) => pairs.binary_search_by_key(&id, |&(k, _)| k).ok().map(|i| pairs[i].1 as usize),
        }
    }
}

/// One decoded plane of an XSpace.
///
/// Owns a refcounted window of the input; lines and events borrow from it.
pub struct Plane {
    index: usize,
    id: PlaneId,
    name: String,
    kind: PlaneKind,
    bytes: Bytes,
    base_offset: u64,
    lines: Vec<Line>,
    event_metadata: Vec<EventMetadata>,
    event_metadata_index: IdIndex,
    stat_metadata: Vec<StatMetadata>,
    stat_metadata_index: IdIndex,
    stats: Vec<Range<usize>>,
    warnings: Vec<Warning>,
    /// The file mapping the bytes come from, when they do.
    file: Option<crate::residency::FileMap>,
}

impl fmt::Debug for Plane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plane")
            .field("index", &self.index)
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("bytes", &self.bytes.len())
            .field("lines", &self.lines.len())
            .field("event_metadata", &self.event_metadata.len())
            .field("stat_metadata", &self.stat_metadata.len())
            .finish()
    }
}

impl Plane {
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

    /// The lines in file order.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The first line with this name.
    pub fn line_by_name(&self, name: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.name == name)
    }

    /// The first line with this id.
    pub fn line_by_id(&self, id: LineId) -> Option<&Line> {
        self.lines.iter().find(|l| l.id == id)
    }

    /// Total number of events over all lines.
    pub fn event_count(&self) -> usize {
        self.lines.iter().map(|l| l.event_count).sum()
    }

    /// The event-metadata table, ordered by id.
    pub fn event_metadata(&self) -> &[EventMetadata] {
        &self.event_metadata
    }

    /// Looks up event metadata by id.
    #[inline]
    pub fn event_metadata_by_id(&self, id: EventMetadataId) -> Option<&EventMetadata> {
        self.event_metadata_index.get(id.0).map(|i| &self.event_metadata[i])
    }

    /// The position of an event-metadata id in [`event_metadata`](Self::event_metadata), for
    /// per-metadata arrays in analyses.
    #[inline]
    pub fn event_metadata_position(&self, id: EventMetadataId) -> Option<usize> {
        self.event_metadata_index.get(id.0)
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
        self.stat_metadata_index.get(id.0).map(|i| &self.stat_metadata[i])
    }

    /// The id of the stat with this name, if the plane defines it.
    ///
    /// Resolve names once per plane, then match stats by id in hot loops.
    pub fn stat_id(&self, name: &str) -> Option<StatMetadataId> {
        self.stat_metadata.iter().find(|m| m.name == name).map(|m| m.id)
    }

    /// The plane-level stats (device capabilities, versions, profile start/stop, ...).
    pub fn stats(&self) -> PlaneStats<'_> {
        PlaneStats { plane: self, ranges: self.stats.iter() }
    }

    /// The first plane-level stat with this name.
    pub fn stat_by_name(&self, name: &str) -> Option<Stat<'_>> {
        let id = self.stat_id(name)?;
        self.stats().filter_map(|s| s.ok()).find(|s| s.metadata_id() == id)
    }

    /// The stats of an event-metadata entry (constant for every event using it).
    pub fn metadata_stats<'a>(&'a self, metadata: &'a EventMetadata) -> StatIter<'a> {
        StatIter::new(self, Reader::bounded(&self.bytes, metadata.body.clone()), 5)
    }

    /// The opaque `metadata` payload of an event-metadata entry.
    pub fn metadata_payload<'a>(&'a self, metadata: &EventMetadata) -> &'a [u8] {
        &self.bytes[metadata.metadata.clone()]
    }

    /// Warnings found while decoding the plane (lossy UTF-8 in names).
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

    pub(crate) fn attach_file(&mut self, file: crate::residency::FileMap) {
        self.file = Some(file);
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

    pub(crate) fn location_at(&self, pos: usize) -> Location {
        Location::at_offset(self.offset_of(pos)).with_plane(self.index)
    }

    /// Decodes a plane from its message body. `base_offset` is where the body starts in the input.
    pub(crate) fn decode(bytes: Bytes, index: usize, base_offset: u64) -> Result<Plane> {
        let mut dec = PlaneDecoder { index, base_offset, warnings: Vec::new() };
        dec.decode(bytes)
    }
}

/// Iterator over a plane's own stats.
#[derive(Debug)]
pub struct PlaneStats<'a> {
    plane: &'a Plane,
    ranges: std::slice::Iter<'a, Range<usize>>,
}

impl<'a> Iterator for PlaneStats<'a> {
    type Item = Result<Stat<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let range = self.ranges.next()?;
        Some(Stat::decode(self.plane, Reader::bounded(&self.plane.bytes, range.clone())))
    }
}

struct PlaneDecoder {
    index: usize,
    base_offset: u64,
    warnings: Vec<Warning>,
}

impl PlaneDecoder {
    fn loc(&self, pos: usize) -> Location {
        Location::at_offset(self.base_offset + pos as u64).with_plane(self.index)
    }

    fn wire_err(&self, e: WireError, pos: usize) -> Error {
        wire_error(e, self.loc(pos))
    }

    fn wrong_type(&self, message: &'static str, field: u32, wire: WireType, pos: usize) -> Error {
        Error::new(ErrorKind::WrongWireType { message, field, found: wire.name() }, self.loc(pos))
    }

    fn string(&mut self, raw: &[u8], what: &'static str, pos: usize) -> String {
        match std::str::from_utf8(raw) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                self.warnings.push(Warning { kind: WarningKind::InvalidUtf8 { what }, location: self.loc(pos) });
                String::from_utf8_lossy(raw).into_owned()
            }
        }
    }

    fn decode(&mut self, bytes: Bytes) -> Result<Plane> {
        // Events keep plane offsets as u32.
        limits::check(Limit::PlaneBytes, bytes.len(), || self.loc(0))?;
        let buf: &[u8] = &bytes;
        let mut r = Reader::new(buf);
        let mut id = 0i64;
        let mut name_raw: &[u8] = &[];
        let mut name_pos = 0usize;
        let mut lines = Vec::new();
        let mut event_metadata: Vec<EventMetadata> = Vec::new();
        let mut stat_metadata: Vec<StatMetadata> = Vec::new();
        let mut stats = Vec::new();
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
                    limits::check(Limit::LinesPerPlane, lines.len() + 1, || self.loc(val_pos))?;
                    let line = self.decode_line(body, start, lines.len())?;
                    lines.push(line);
                }
                (4, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    limits::check(Limit::EventMetadataPerPlane, event_metadata.len() + 1, || self.loc(val_pos))?;
                    event_metadata.push(self.decode_event_metadata_entry(body, start)?);
                }
                (5, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    limits::check(Limit::StatMetadataPerPlane, stat_metadata.len() + 1, || self.loc(val_pos))?;
                    stat_metadata.push(self.decode_stat_metadata_entry(body, start)?);
                }
                (6, WireType::Len) => {
                    let body = r.read_len().map_err(|e| self.wire_err(e, val_pos))?;
                    let start = r.pos() - body.len();
                    limits::check(Limit::StatsPerPlane, stats.len() + 1, || self.loc(val_pos))?;
                    stats.push(start..start + body.len());
                }
                (1..=6, _) => return Err(self.wrong_type("XPlane", field, wire, tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, val_pos))?,
            }
        }
        let name = self.string(name_raw, "plane name", name_pos);
        // Map semantics: the last entry for a key wins. Sort by id keeping file order among equals.
        let event_metadata = dedup_last_by_key(event_metadata, |m| m.id.0);
        let stat_metadata = dedup_last_by_key(stat_metadata, |m| m.id.0);
        let event_metadata_index = IdIndex::build(event_metadata.iter().map(|m| m.id.0));
        let stat_metadata_index = IdIndex::build(stat_metadata.iter().map(|m| m.id.0));
        Ok(Plane {
            index: self.index,
            id: PlaneId(id),
            kind: PlaneKind::from_name(&name),
            name,
            bytes,
            base_offset: self.base_offset,
            lines,
            event_metadata,
            event_metadata_index,
            stat_metadata,
            stat_metadata_index,
            stats,
            warnings: std::mem::take(&mut self.warnings),
            file: None,
        })
    }

    fn decode_line(&mut self, body: &[u8], start: usize, index: usize) -> Result<Line> {
        let mut r = Reader::new(body);
        let mut line = Line {
            index,
            id: LineId(0),
            display_id: 0,
            name: String::new(),
            display_name: String::new(),
            timestamp_ns: 0,
            duration_ps: 0,
            body: start..start + body.len(),
            event_count: 0,
        };
        let err = |this: &Self, e, pos: usize| this.wire_err(e, start + pos).in_line(index);
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| err(self, e, tag_pos))?;
            let val_pos = r.pos();
            match (field, wire) {
                (4, WireType::Len) => {
                    r.read_len().map_err(|e| err(self, e, val_pos))?;
                    line.event_count += 1;
                    // Events come in long runs: count the rest of the run on their one-byte tag
                    // (field 4, length-delimited) without the general tag match.
                    while r.eat(0x22) {
                        let len_pos = r.pos();
                        r.read_message().map_err(|e| err(self, e, len_pos))?;
                        line.event_count += 1;
                    }
                }
                (1, WireType::Varint) => line.id = LineId(r.read_varint().map_err(|e| err(self, e, val_pos))? as i64),
                (10, WireType::Varint) => line.display_id = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (3, WireType::Varint) => line.timestamp_ns = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (9, WireType::Varint) => line.duration_ps = r.read_varint().map_err(|e| err(self, e, val_pos))? as i64,
                (2, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| err(self, e, val_pos))?;
                    line.name = self.string(raw, "line name", start + val_pos);
                }
                (11, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| err(self, e, val_pos))?;
                    line.display_name = self.string(raw, "line display name", start + val_pos);
                }
                (1..=4 | 9..=11, _) => {
                    return Err(self.wrong_type("XLine", field, wire, start + tag_pos).in_line(index));
                }
                _ => r.skip(wire).map_err(|e| err(self, e, val_pos))?,
            }
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
        let mut meta = value.unwrap_or_else(|| EventMetadata {
            id: EventMetadataId(0),
            name: String::new(),
            display_name: String::new(),
            metadata: 0..0,
            body: 0..0,
            child_ids: Vec::new(),
        });
        // The map key is what events refer to; the value's own id is informational.
        meta.id = EventMetadataId(key);
        Ok(meta)
    }

    fn decode_event_metadata(&mut self, body: &[u8], start: usize) -> Result<EventMetadata> {
        let mut r = Reader::new(body);
        let mut meta = EventMetadata {
            id: EventMetadataId(0),
            name: String::new(),
            display_name: String::new(),
            metadata: 0..0,
            body: start..start + body.len(),
            child_ids: Vec::new(),
        };
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
                    meta.name = self.string(raw, "event metadata name", start + val_pos);
                }
                (4, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.display_name = self.string(raw, "event metadata display name", start + val_pos);
                }
                (3, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    let s = start + r.pos() - raw.len();
                    meta.metadata = s..s + raw.len();
                }
                (5, WireType::Len) => {
                    // Stats are decoded on access; check the framing now.
                    r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                }
                (6, WireType::Varint | WireType::Len) => {
                    read_repeated_int64(&mut r, wire, &mut meta.child_ids)
                        .map_err(|e| self.wire_err(e, start + val_pos))?;
                }
                (1..=6, _) => return Err(self.wrong_type("XEventMetadata", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        Ok(meta)
    }

    /// Decodes one `map<int64, XStatMetadata>` entry.
    fn decode_stat_metadata_entry(&mut self, body: &[u8], start: usize) -> Result<StatMetadata> {
        let mut r = Reader::new(body);
        let mut key = 0i64;
        let mut meta = StatMetadata { id: StatMetadataId(0), name: String::new(), description: String::new() };
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

    fn decode_stat_metadata(&mut self, body: &[u8], start: usize) -> Result<StatMetadata> {
        let mut r = Reader::new(body);
        let mut meta = StatMetadata { id: StatMetadataId(0), name: String::new(), description: String::new() };
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
                    meta.name = self.string(raw, "stat metadata name", start + val_pos);
                }
                (3, WireType::Len) => {
                    let raw = r.read_len().map_err(|e| self.wire_err(e, start + val_pos))?;
                    meta.description = self.string(raw, "stat metadata description", start + val_pos);
                }
                (1..=3, _) => return Err(self.wrong_type("XStatMetadata", field, wire, start + tag_pos)),
                _ => r.skip(wire).map_err(|e| self.wire_err(e, start + val_pos))?,
            }
        }
        Ok(meta)
    }
}

/// Sorts by key and keeps, for each key, the entry that came last in the input.
fn dedup_last_by_key<T>(mut items: Vec<T>, key: impl Fn(&T) -> i64) -> Vec<T> {
    let sorted = items.windows(2).all(|w| key(&w[0]) < key(&w[1]));
    if sorted {
        return items;
    }
    // Stable sort keeps input order among equal keys; then keep the last of each run.
    items.sort_by_key(|t| key(t));
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if let Some(last) = out.last_mut()
            && key(last) == key(&item)
        {
            *last = item;
            continue;
        }
        out.push(item);
    }
    out
}

#[cold]
pub(crate) fn wire_error(e: WireError, location: Location) -> Error {
    let kind = match e {
        WireError::Truncated => ErrorKind::Truncated,
        other => ErrorKind::Malformed(other.describe()),
    };
    Error::new(kind, location)
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
        let dense = IdIndex::build([1i64, 2, 3, 5].into_iter());
        assert!(matches!(dense, IdIndex::Dense { .. }));
        assert_eq!(dense.get(5), Some(3));
        assert_eq!(dense.get(4), None);
        assert_eq!(dense.get(-1), None);
        assert_eq!(dense.get(i64::MIN), None);
        let sparse = IdIndex::build([-5i64, 7, 1 << 40].into_iter());
        assert!(matches!(sparse, IdIndex::Sparse(_)));
        assert_eq!(sparse.get(1 << 40), Some(2));
        assert_eq!(sparse.get(0), None);
    }

    #[test]
    fn dedup_keeps_last_entry_per_key() {
        let v = dedup_last_by_key(vec![(3, 'a'), (1, 'b'), (3, 'c'), (2, 'd')], |t| t.0);
        assert_eq!(v, vec![(1, 'b'), (2, 'd'), (3, 'c')]);
    }
}

/// A predicate over a plane's event metadata, decided once per entry (see
/// [`Plane::metadata_mask`]). Events with dangling metadata ids never match.
#[derive(Clone, Debug, Default)]
pub struct MetadataMask {
    bits: Vec<bool>,
    any: bool,
}

impl MetadataMask {
    /// True when the event's metadata passed the predicate.
    #[inline]
    pub fn contains(&self, event: &crate::Event<'_>) -> bool {
        self.any && event.plane().event_metadata_position(event.metadata_id()).is_some_and(|i| self.bits[i])
    }

    /// True when no metadata entry passed (no event can match: a walk can be skipped).
    pub fn is_empty(&self) -> bool {
        !self.any
    }
}
