//! Borrowed views of events and stats, decoded on demand.

use std::borrow::Cow;
use std::fmt;

use crate::error::{Error, ErrorKind, Result};
use crate::ids::{EventMetadataId, Picos, StatMetadataId};
use crate::plane::{EventMetadata, Line, MetadataMask, PART_MIN_BYTES, Plane, wire_error};
use crate::undecoded::Undecoded;
use crate::wire::{Reader, WireError, WireType, split_tag};

/// The `data` oneof of an event: a start offset, or an occurrence count on aggregated events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventData {
    /// Start relative to the line's timestamp, in picoseconds.
    Offset(i64),
    /// Occurrences folded into an aggregated event.
    Occurrences(i64),
    /// Neither field was present (read as offset 0).
    Absent,
}

/// Which arm of the `data` oneof an event carries (stored beside its value, so that an
/// [`Event`] stays small: iterators move one per event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DataKind {
    Absent,
    Offset,
    Occurrences,
}

/// One event, borrowed from its plane. Cheap to copy.
#[derive(Clone, Copy)]
pub struct Event<'a> {
    plane: &'a Plane,
    line: &'a Line,
    metadata_id: EventMetadataId,
    data_value: i64,
    duration_ps: i64,
    /// Where the event's stats are searched from: `plane bytes[body_start..body_end]` is its body
    /// past the leading fields the decode read in writer order (planes are under 4 GiB).
    body_start: u32,
    body_end: u32,
    index: u32,
    data_kind: DataKind,
    has_stats: bool,
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("line", &self.line.name())
            .field("index", &self.index)
            .field("name", &self.name())
            .field("metadata_id", &self.metadata_id)
            .field("data", &self.data())
            .field("duration_ps", &self.duration_ps)
            .finish()
    }
}

impl<'a> Event<'a> {
    /// The plane holding the event.
    pub fn plane(&self) -> &'a Plane {
        self.plane
    }

    /// The line holding the event.
    pub fn line(&self) -> &'a Line {
        self.line
    }

    /// Position of the event in its line (file order).
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// The event-metadata id.
    pub fn metadata_id(&self) -> EventMetadataId {
        self.metadata_id
    }

    /// The resolved event metadata, if the plane defines the id.
    #[inline]
    pub fn metadata(&self) -> Option<&'a EventMetadata> {
        self.plane.event_metadata_by_id(self.metadata_id)
    }

    /// The metadata name, or `""` when the id is dangling.
    pub fn name(&self) -> &'a str {
        self.metadata().map_or("", |m| m.name())
    }

    /// The metadata display name (falling back to the name), or `""` when the id is dangling.
    pub fn display_name(&self) -> &'a str {
        self.metadata().map_or("", |m| m.display_name())
    }

    /// The raw `data` oneof.
    pub fn data(&self) -> EventData {
        match self.data_kind {
            DataKind::Absent => EventData::Absent,
            DataKind::Offset => EventData::Offset(self.data_value),
            DataKind::Occurrences => EventData::Occurrences(self.data_value),
        }
    }

    /// Start relative to the line's timestamp (0 for aggregated events).
    #[inline]
    pub fn offset_ps(&self) -> i64 {
        match self.data_kind {
            DataKind::Offset => self.data_value,
            _ => 0,
        }
    }

    /// Occurrences of an aggregated event, `None` for ordinary events.
    #[inline]
    pub fn num_occurrences(&self) -> Option<i64> {
        match self.data_kind {
            DataKind::Occurrences => Some(self.data_value),
            _ => None,
        }
    }

    /// The duration as recorded.
    pub fn duration(&self) -> Picos {
        Picos(self.duration_ps)
    }

    /// Absolute start: `line.timestamp_ns * 1000 + offset_ps`.
    #[inline]
    pub fn start(&self) -> Picos {
        self.line.start().saturating_add(Picos(self.offset_ps()))
    }

    /// Absolute end: start plus duration.
    #[inline]
    pub fn end(&self) -> Picos {
        Picos(self.start().0.saturating_add(self.duration_ps))
    }

    /// The event's own stats (not its metadata's), decoded lazily.
    #[inline]
    pub fn stats(&self) -> crate::StatIter<'a> {
        if !self.has_stats {
            return StatIter::empty(self.plane);
        }
        StatIter::new(self.plane, self.plane.reader(self.body_start as usize..self.body_end as usize), 4)
    }

    /// True when the event carries stats of its own (known without decoding them).
    #[inline]
    pub fn has_stats(&self) -> bool {
        self.has_stats
    }

    /// The stats of the event's metadata (constant for every event sharing it).
    pub fn metadata_stats(&self) -> crate::StatIter<'a> {
        match self.metadata() {
            Some(m) => self.plane.metadata_stats(m),
            None => StatIter::empty(self.plane),
        }
    }

    /// The event's own stats whose metadata id passes `wanted`; the others are skipped without
    /// decoding their values (hot loops that need a few stats of events that carry many).
    #[inline]
    pub fn stats_where<F: FnMut(StatMetadataId) -> bool>(&self, wanted: F) -> StatsWhere<'a, F> {
        StatsWhere { inner: self.stats(), wanted }
    }

    /// The event's own stat with this id, if present. A malformed stat ends the search (the
    /// stats after it read as absent) and is noted in the space's
    /// [`decode_errors`](crate::Space::decode_errors).
    #[inline]
    pub fn stat(&self, id: StatMetadataId) -> Option<Stat<'a>> {
        if !self.has_stats {
            return None;
        }
        self.stats().map_while(|s| s.ok()).find(|s| s.metadata_id == id)
    }

    /// The first stat with this id on the event itself, else on its metadata.
    pub fn stat_or_metadata_stat(&self, id: StatMetadataId) -> Option<Stat<'a>> {
        self.stat(id).or_else(|| self.metadata_stats().map_while(|s| s.ok()).find(|s| s.metadata_id == id))
    }

    /// The event's own stat with this name (resolves the name each call: prefer [`stat`](Self::stat)
    /// with an id from [`Plane::stat_id`] in loops).
    pub fn stat_by_name(&self, name: &str) -> Option<Stat<'a>> {
        self.stat(self.plane.stat_id(name)?)
    }

    /// Decodes an event body. `r` reads the body inside the plane's bytes (positions are plane
    /// offsets). The body of each of the event's stats goes to `stat` as the decode passes it
    /// (one pass over the event's bytes for walks that want some of its stats).
    #[inline(always)]
    fn decode_with(
        plane: &'a Plane,
        line: &'a Line,
        mut r: Reader<'a>,
        index: usize,
        stats: &mut impl StatSink<'a>,
    ) -> Result<Self> {
        // Plane offsets fit in u32 (checked when the plane is decoded), and so do event indexes
        // (every event takes at least two bytes of its plane).
        let mut ev = Event {
            plane,
            line,
            metadata_id: EventMetadataId(0),
            data_value: 0,
            duration_ps: 0,
            body_start: r.pos() as u32,
            body_end: r.end() as u32,
            index: index as u32,
            data_kind: DataKind::Absent,
            has_stats: false,
        };
        let fail = |e, pos: usize| wire_error(e, plane.location_at(pos)).in_line(line.index()).in_event(index);
        // Writers emit fields in number order: take that order first, with predictable branches;
        // the loop below then reads whatever follows (any order, repeats: the last value wins).
        if r.eat(0x08) {
            let val_pos = r.pos();
            ev.metadata_id = EventMetadataId(r.read_varint().map_err(|e| fail(e, val_pos))? as i64);
        }
        if r.eat(0x10) {
            let val_pos = r.pos();
            ev.data_value = r.read_varint().map_err(|e| fail(e, val_pos))? as i64;
            ev.data_kind = DataKind::Offset;
        }
        if r.eat(0x18) {
            let val_pos = r.pos();
            ev.duration_ps = r.read_varint().map_err(|e| fail(e, val_pos))? as i64;
        }
        // The stats come after those fields: their walks start here (any field that follows,
        // in any order, is read below and skipped by them).
        ev.body_start = r.pos() as u32;
        ev.has_stats = !r.is_empty() && skim_stats(&mut r, stats);
        while !r.is_empty() {
            let tag_pos = r.pos();
            let key = r.read_varint().map_err(|e| fail(e, tag_pos))?;
            let val_pos = r.pos();
            // Whole keys: field number << 3 | wire type.
            match key {
                0x08 => ev.metadata_id = EventMetadataId(r.read_varint().map_err(|e| fail(e, val_pos))? as i64),
                0x10 => {
                    ev.data_value = r.read_varint().map_err(|e| fail(e, val_pos))? as i64;
                    ev.data_kind = DataKind::Offset;
                }
                0x18 => ev.duration_ps = r.read_varint().map_err(|e| fail(e, val_pos))? as i64,
                0x28 => {
                    ev.data_value = r.read_varint().map_err(|e| fail(e, val_pos))? as i64;
                    ev.data_kind = DataKind::Occurrences;
                }
                0x22 => {
                    stats.take(r.read_message().map_err(|e| fail(e, val_pos))?);
                    ev.has_stats = true;
                }
                _ => match split_tag(key).map_err(|e| fail(e, tag_pos))? {
                    (field @ 1..=5, wire) => {
                        return Err(Error::new(
                            ErrorKind::WrongWireType { message: "XEvent", field, found: wire.name() },
                            plane.location_at(tag_pos),
                        )
                        .in_line(line.index())
                        .in_event(index));
                    }
                    (_, wire) => r.skip(wire).map_err(|e| fail(e, val_pos))?,
                },
            }
        }
        Ok(ev)
    }
}

/// Reads the stats of the usual shape at the reader's position (see
/// [`Reader::read_small_stat`]), sending the wanted ones to `stats` and skipping the others
/// unread, up to the first field of another shape; returns whether it read any.
///
/// Kept out of line: inlined into the event walk, it slowed the stat-free events of TPU op lines
/// (tpu300's timeline, 6 %); a GPU kernel's dozen stats pay one call.
#[inline(never)]
fn skim_stats<'a>(r: &mut Reader<'a>, stats: &mut impl StatSink<'a>) -> bool {
    let mut any = false;
    while let Some((id, body)) = r.read_small_stat() {
        any = true;
        if stats.wants(StatMetadataId(i64::from(id))) {
            stats.take(body);
        }
    }
    any
}

/// Iterator over the events of a line. Yields `Err` once on malformed bytes, then stops (the
/// error is noted in the space's [`decode_errors`](crate::Space::decode_errors)).
/// A clone walks the same events again from where the original stands (a clone of a line's
/// first walk adds its bytes to the space's walk meter again).
#[derive(Clone, Debug)]
pub struct EventIter<'a> {
    plane: &'a Plane,
    line: &'a Line,
    reader: Reader<'a>,
    index: usize,
    remaining: usize,
    done: bool,
    /// Whether this is the line's first walk, whose bytes go to the space's walk meter.
    metering: bool,
    /// The reader position up to which bytes were metered.
    metered_to: usize,
    /// Events to read the general way before trying [`Reader::read_plain_event`] again: after
    /// an event that is not plain (most events of host and GPU lines carry stats), the next
    /// few are not tried, so such lines pay for one failed try in [`PLAIN_RETRY`] events. (A
    /// line's fields before its events are not events: failing on them skips nothing.)
    plain_skip: u8,
}

/// Events read the general way after one that is not plain, before the plain read is tried
/// again.
const PLAIN_RETRY: u8 = 16;

/// Bytes a metering walk reads between two additions to the meter.
const METER_STRIDE_BYTES: usize = 1 << 18;

impl<'a> EventIter<'a> {
    /// Events of `line`, whose body `reader` reads inside the plane's bytes.
    pub(crate) fn new(plane: &'a Plane, line: &'a Line, reader: Reader<'a>) -> Self {
        let metering = plane.first_walk(line.index());
        let metered_to = reader.pos();
        EventIter {
            plane,
            line,
            reader,
            index: 0,
            remaining: line.event_count(),
            done: false,
            metering,
            metered_to,
            plain_skip: 0,
        }
    }

    /// A run of the events of `line` (see [`Line::event_parts`]); the caller sets where its event
    /// indices start and how many events it holds.
    fn new_part(plane: &'a Plane, line: &'a Line, reader: Reader<'a>, metering: bool) -> Self {
        let metered_to = reader.pos();
        EventIter { plane, line, reader, index: 0, remaining: 0, done: false, metering, metered_to, plain_skip: 0 }
    }

    /// Counts an event just read and returns its index in the line; meters the bytes read.
    #[inline(always)]
    fn took_event(&mut self) -> usize {
        self.took_events(1)
    }

    /// Counts `n` events just read and returns the first one's index in the line; meters the
    /// bytes read.
    #[inline(always)]
    fn took_events(&mut self, n: usize) -> usize {
        let index = self.index;
        self.index += n;
        self.remaining = self.remaining.saturating_sub(n);
        if self.metering && self.reader.pos() - self.metered_to >= METER_STRIDE_BYTES {
            self.meter();
        }
        index
    }

    /// Adds the bytes read since the last addition to the meter.
    #[cold]
    fn meter(&mut self) {
        let pos = self.reader.pos();
        self.plane.meter_bytes(pos.saturating_sub(self.metered_to));
        self.metered_to = pos;
    }

    /// The events `first..last` of `line`, read from plane positions `range` (a block of its
    /// index).
    pub(crate) fn block(
        plane: &'a Plane,
        line: &'a Line,
        range: std::ops::Range<usize>,
        first: usize,
        last: usize,
    ) -> Self {
        let mut it = EventIter::new_part(plane, line, plane.reader(range), false);
        it.index = first;
        it.remaining = last.saturating_sub(first);
        it
    }

    /// The plane position from which the next event is read.
    pub(crate) fn position(&self) -> usize {
        self.reader.pos()
    }

    /// The index in its line of the next event yielded.
    pub(crate) fn next_index(&self) -> usize {
        self.index
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    pub(crate) fn plane(&self) -> &'a Plane {
        self.plane
    }

    pub(crate) fn line(&self) -> &'a Line {
        self.line
    }

    /// Moves forward to the event `index` of the line, read from plane position `pos` (both
    /// from the line's time index); a position past this iterator's bytes ends it.
    pub(crate) fn seek(&mut self, pos: usize, index: usize) {
        if pos >= self.reader.end() {
            let end = self.reader.end();
            self.reader.seek(end);
            self.remaining = 0;
            return;
        }
        self.reader.seek(pos);
        self.remaining = self.remaining.saturating_sub(index - self.index);
        self.index = index;
    }

    #[cold]
    fn fail(&mut self, e: crate::wire::WireError, pos: usize) -> Error {
        self.failed(wire_error(e, self.plane.location_at(pos)).in_line(self.line.index()))
    }

    /// Ends the walk on `e`, noted in the space's decode log.
    #[cold]
    fn failed(&mut self, e: Error) -> Error {
        self.done = true;
        self.plane.undecoded(Undecoded::Event, e)
    }
}

/// An event of the bare shape: a metadata id, an offset and a duration, and nothing else (no
/// stats, no occurrences): most events of a TPU op line. Read in runs by
/// [`ReleasingEvents::next_bare_run`].
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BareEvent {
    /// The event-metadata id.
    pub metadata_id: EventMetadataId,
    /// Absolute start, as [`Event::start`] gives it.
    pub start: Picos,
    /// The duration as recorded.
    pub duration: Picos,
}

impl<'a> EventIter<'a> {
    /// [`ReleasingEvents::next_bare_run`] without the page hand-back: the run of bare events
    /// that comes next, read into `out` on the plain read, and how many it read.
    #[inline(always)]
    fn next_bare_run(&mut self, out: &mut [BareEvent]) -> usize {
        if self.done || self.plain_skip > 0 {
            return 0;
        }
        let base = self.line.start();
        let mut n = 0;
        for slot in out.iter_mut() {
            let Some(plain) = self.reader.read_plain_event() else { break };
            *slot = BareEvent {
                metadata_id: EventMetadataId(plain.metadata_id as i64),
                start: base.saturating_add(Picos(plain.offset as i64)),
                duration: Picos(plain.duration as i64),
            };
            n += 1;
        }
        self.took_events(n);
        n
    }

    /// The next event, as [`Iterator::next`] gives it, and its stats that `stats` wants, read in
    /// the same pass over the event's bytes: on events with many stats (GPU kernels carry a
    /// dozen), a second walk of them costs about as much as the decode.
    // Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
    #[doc(hidden)]
    #[inline(always)]
    pub fn next_gathering<F: FnMut(StatMetadataId) -> bool>(
        &mut self,
        stats: &mut GatheredStats<'a, F>,
    ) -> Option<Result<Event<'a>>> {
        stats.stats.clear();
        stats.broken = false;
        let plane = self.plane;
        self.next_with(&mut Gathering { plane, stats })
    }

    #[inline(always)]
    fn next_with(&mut self, stats: &mut impl StatSink<'a>) -> Option<Result<Event<'a>>> {
        if self.done {
            return None;
        }
        // Where the plain read was tried and failed, if it was.
        let mut tried_at = None;
        if self.plain_skip > 0 {
            self.plain_skip -= 1;
        } else if let Some(plain) = self.reader.read_plain_event() {
            let index = self.took_event();
            return Some(Ok(Event {
                plane: self.plane,
                line: self.line,
                metadata_id: EventMetadataId(plain.metadata_id as i64),
                data_value: plain.offset as i64,
                duration_ps: plain.duration as i64,
                body_start: plain.end as u32,
                body_end: plain.end as u32,
                index: index as u32,
                data_kind: DataKind::Offset,
                has_stats: false,
            }));
        } else {
            tried_at = Some(self.reader.pos());
        }
        while !self.reader.is_empty() {
            let tag_pos = self.reader.pos();
            let (field, wire) = match self.reader.read_varint() {
                // Field 4 (events), length-delimited.
                Ok(0x22) => (4, WireType::Len),
                Ok(key) => match split_tag(key) {
                    Ok(t) => t,
                    Err(e) => return Some(Err(self.fail(e, tag_pos))),
                },
                Err(e) => return Some(Err(self.fail(e, tag_pos))),
            };
            let val_pos = self.reader.pos();
            if field == 4 && wire == WireType::Len {
                if tried_at == Some(tag_pos) {
                    self.plain_skip = PLAIN_RETRY - 1;
                }
                let body = match self.reader.read_message() {
                    Ok(b) => b,
                    Err(e) => return Some(Err(self.fail(e, val_pos))),
                };
                let index = self.took_event();
                return Some(match Event::decode_with(self.plane, self.line, body, index, stats) {
                    Ok(ev) => Ok(ev),
                    Err(e) => Err(self.failed(e)),
                });
            }
            if let Err(e) = self.reader.skip(wire) {
                return Some(Err(self.fail(e, val_pos)));
            }
        }
        self.done = true;
        if self.metering {
            self.meter();
        }
        None
    }
}

impl<'a> Iterator for EventIter<'a> {
    type Item = Result<Event<'a>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(&mut NoStats)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done { (0, Some(0)) } else { (0, Some(self.remaining)) }
    }
}

impl std::iter::FusedIterator for EventIter<'_> {}

/// Where an event's decode sends its stats, as it passes them.
trait StatSink<'a> {
    /// Whether the stat with this metadata id is wanted (asked where the id is read cheaply,
    /// before the body): `false` skips the body.
    fn wants(&mut self, id: StatMetadataId) -> bool;
    /// One stat body, whole: the metadata id (when present) is read from it again.
    fn take(&mut self, body: Reader<'a>);
}

/// A walk that wants none of the events' stats.
struct NoStats;

impl<'a> StatSink<'a> for NoStats {
    #[inline(always)]
    fn wants(&mut self, _: StatMetadataId) -> bool {
        false
    }

    #[inline(always)]
    fn take(&mut self, _: Reader<'a>) {}
}

/// A walk that gathers the wanted stats into a [`GatheredStats`].
struct Gathering<'s, 'a, F> {
    plane: &'a Plane,
    stats: &'s mut GatheredStats<'a, F>,
}

impl<'a, F: FnMut(StatMetadataId) -> bool> StatSink<'a> for Gathering<'_, 'a, F> {
    #[inline(always)]
    fn wants(&mut self, id: StatMetadataId) -> bool {
        (self.stats.wanted)(id)
    }

    #[inline(always)]
    fn take(&mut self, body: Reader<'a>) {
        self.stats.offer(self.plane, body)
    }
}

/// The stats of one event that a walk gathers while it decodes the event
/// ([`EventIter::next_gathering`]): those whose metadata id `wanted` keeps, in the event's order,
/// as [`Event::stats_where`] yields them up to its first malformed stat (which is noted in the
/// space's [`decode_errors`](crate::Space::decode_errors)).
///
/// ```
/// use xlens_xplane::{GatheredStats, Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut plane = b.plane(1, "/device:GPU:0");
///     let (op, other) = (plane.stat_metadata("hlo_op"), plane.stat_metadata("correlation_id"));
///     let kernel = plane.event_metadata("fusion");
///     let mut line = plane.line(1, "Stream #1", 0);
///     line.event(kernel, 0, 10).stat(other, 7u64).stat(op, "fusion.1");
/// }
/// let space = Space::parse(b.finish().into())?;
/// let plane = &space.planes()[0];
/// let hlo_op = plane.stat_id("hlo_op").unwrap();
/// let mut events = plane.lines()[0].events(plane);
/// let mut gathered = GatheredStats::new(|id| id == hlo_op);
/// let event = events.next_gathering(&mut gathered).unwrap()?;
/// assert_eq!(event.name(), "fusion");
/// let names: Vec<String> = gathered.stats().iter().filter_map(|s| s.as_str().map(|s| s.into_owned())).collect();
/// assert_eq!(names, ["fusion.1"]);
/// # Ok::<(), xlens_xplane::Error>(())
/// ```
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub struct GatheredStats<'a, F> {
    wanted: F,
    stats: Vec<Stat<'a>>,
    /// A malformed stat was met: the ones after it are not gathered.
    broken: bool,
}

impl<F> std::fmt::Debug for GatheredStats<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatheredStats").field("stats", &self.stats).field("broken", &self.broken).finish()
    }
}

impl<'a, F: FnMut(StatMetadataId) -> bool> GatheredStats<'a, F> {
    /// Gathers the stats whose metadata id `wanted` keeps.
    pub fn new(wanted: F) -> Self {
        GatheredStats { wanted, stats: Vec::new(), broken: false }
    }

    /// The last event's stats that were wanted, in its order.
    pub fn stats(&self) -> &[Stat<'a>] {
        &self.stats
    }

    /// Takes one stat body (as [`StatsWhere`] does: the metadata id alone decides, the value is
    /// decoded only for a wanted stat). Written out here, not shared with `StatsWhere`: one
    /// helper returning `Result<Option<Stat>>` for both made the op-table read 6 % slower
    /// (h200_long_run, one worker, 123 -> 130 ms).
    #[inline(always)]
    fn offer(&mut self, plane: &'a Plane, mut peek: Reader<'a>) {
        if self.broken {
            return;
        }
        // The body is read in place and rewound for the general decode (a copy of the reader
        // kept aside was stored as words and read back whole: a stall on every wanted stat).
        let start = peek.pos();
        if peek.eat(0x08) {
            match peek.read_varint() {
                Ok(id) if !(self.wanted)(StatMetadataId(id as i64)) => return,
                Ok(id) => {
                    // The shape writers emit (the id, then one varint, string or double value,
                    // nothing after): the stat is written straight into its slot. Built whole by
                    // `Stat::decode` and then copied, its value was read back before its two
                    // halves had left the store buffer (gpu300's stream read, 20 % of it).
                    if let Ok(Some(raw)) = usual_value(&mut peek)
                        && peek.is_empty()
                    {
                        self.stats.push(Stat { plane, metadata_id: StatMetadataId(id as i64), raw });
                        return;
                    }
                }
                Err(e) => return self.broke(plane, wire_error(e, plane.location_at(start))),
            }
        }
        peek.rewind(start);
        match Stat::decode(plane, peek) {
            Ok(stat) if (self.wanted)(stat.metadata_id) => self.stats.push(stat),
            Ok(_) => {}
            Err(e) => self.broke(plane, e),
        }
    }

    /// A malformed stat: the ones after it are not gathered, and the error is noted in the
    /// space's decode log.
    #[cold]
    fn broke(&mut self, plane: &Plane, e: Error) {
        self.broken = true;
        plane.undecoded(Undecoded::EventStat, e);
    }
}

/// The events of one line for a pass that reads them once: like [`EventIter`], and every
/// few megabytes the file pages behind the walk are handed back to the OS, as are the rest of
/// the line's pages at its end (see [`crate::Space::release_pages`]; nothing happens for a
/// space parsed from bytes in memory). Events already yielded stay valid: reading their bytes
/// again maps the pages back.
///
/// ```
/// use xlens_xplane::{Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut plane = b.plane(1, "/host:CPU");
///     let op = plane.event_metadata("op");
///     let mut line = plane.line(7, "worker", 0);
///     for i in 0..3 {
///         line.event(op, i * 10, 5);
///     }
/// }
/// let space = Space::parse(b.finish().into())?;
/// let plane = &space.planes()[0];
/// let line = &plane.lines()[0];
/// assert_eq!(line.events_releasing(plane).count(), line.events(plane).count());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
#[derive(Debug)]
pub struct ReleasingEvents<'a> {
    inner: EventIter<'a>,
    /// Plane positions: released up to `released`; the line ends at `end`.
    released: usize,
    end: usize,
    count: u32,
}

impl<'a> ReleasingEvents<'a> {
    pub(crate) fn new(inner: EventIter<'a>, body: std::ops::Range<usize>) -> Self {
        ReleasingEvents { inner, released: body.start, end: body.end, count: 0 }
    }
}

impl<'a> ReleasingEvents<'a> {
    /// [`EventIter::next_gathering`] for a pass that reads the line once.
    #[inline(always)]
    pub fn next_gathering<F: FnMut(StatMetadataId) -> bool>(
        &mut self,
        stats: &mut GatheredStats<'a, F>,
    ) -> Option<Result<Event<'a>>> {
        self.release_behind();
        let next = self.inner.next_gathering(stats);
        self.release_rest(next.is_none());
        next
    }

    /// Reads the run of bare events that comes next into `out`, as many as fit, and returns how
    /// many it read. The events read are the ones `next` would give, in order, without an
    /// [`Event`] built for each: a walk of a TPU op line reads most of its events this way.
    /// Fewer than fit are read where the next event is not bare, where the fast read cannot
    /// take it (the line's fields before its events, the last bytes of the plane) and at the
    /// line's end: [`next_gathering`](Self::next_gathering) or [`Iterator::next`] then reads the
    /// next event, or gives `None` at the end.
    ///
    /// ```
    /// use xlens_xplane::{BareEvent, Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/device:TPU:0");
    ///     let (op, flops) = (plane.event_metadata("fusion.1"), plane.stat_metadata("flops"));
    ///     let mut line = plane.line(1, "XLA Ops", 0);
    ///     for k in 0..100 {
    ///         line.event(op, 10 * k, 5);
    ///     }
    ///     line.event(op, 1_000, 5).stat(flops, 7i64);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let mut events = plane.lines()[0].events_releasing(plane);
    /// let (mut run, mut bare, mut general) = ([BareEvent::default(); 16], 0, 0);
    /// loop {
    ///     let n = events.next_bare_run(&mut run);
    ///     bare += n;
    ///     if n == run.len() {
    ///         continue;
    ///     }
    ///     match events.next() {
    ///         Some(ev) => general += usize::from(ev?.has_stats()),
    ///         None => break,
    ///     }
    /// }
    /// assert!(bare >= 90 && general == 1);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    #[inline(always)]
    pub fn next_bare_run(&mut self, out: &mut [BareEvent]) -> usize {
        let n = self.inner.next_bare_run(out);
        self.count = self.count.wrapping_add(n as u32);
        if n > 0 {
            self.release_due();
        }
        n
    }

    /// Hands back the bytes before the next event, a chunk at a time, when a chunk's worth was
    /// read since the last release.
    #[inline]
    fn release_due(&mut self) {
        let at = self.inner.reader.pos();
        if at - self.released >= crate::residency::RELEASE_CHUNK_BYTES {
            self.inner.plane.release(self.released..at);
            self.released = at;
        }
    }

    /// Every 4096 events: hands back the bytes before the next event, a chunk at a time.
    #[inline]
    fn release_behind(&mut self) {
        self.count = self.count.wrapping_add(1);
        if self.count.is_multiple_of(4096) {
            self.release_due();
        }
    }

    /// At the line's end: hands back the rest.
    #[inline]
    fn release_rest(&mut self, ended: bool) {
        if ended && self.released < self.end {
            self.inner.plane.release(self.released..self.end);
            self.released = self.end;
        }
    }
}

impl<'a> Iterator for ReleasingEvents<'a> {
    type Item = Result<Event<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.release_behind();
        let next = self.inner.next();
        self.release_rest(next.is_none());
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl std::iter::FusedIterator for ReleasingEvents<'_> {}

/// A stat value as stored, before name resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RawValue<'a> {
    None,
    Double(f64),
    Uint(u64),
    Int(i64),
    Str(&'a [u8]),
    Bytes(&'a [u8]),
    Ref(u64),
}

/// A typed stat value.
#[derive(Clone, Debug, PartialEq)]
pub enum StatValue<'a> {
    /// The stat carries no value.
    None,
    /// `int64_value`.
    Int(i64),
    /// `uint64_value`.
    Uint(u64),
    /// `double_value`.
    Double(f64),
    /// `str_value` (lossy if not UTF-8), or a resolved `ref_value`.
    Str(Cow<'a, str>),
    /// `bytes_value`, borrowed from the input.
    Bytes(&'a [u8]),
    /// A `ref_value` whose stat-metadata id the plane does not define.
    UnresolvedRef(u64),
}

impl<'a> StatValue<'a> {
    /// The value as a signed integer (int, or uint that fits; booleans are ints).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            StatValue::Int(v) => Some(v),
            StatValue::Uint(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an unsigned integer (uint, or non-negative int).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            StatValue::Uint(v) => Some(v),
            StatValue::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float (double, or any integer).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            StatValue::Double(v) => Some(v),
            StatValue::Int(v) => Some(v as f64),
            StatValue::Uint(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The value as a string (string or resolved reference).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            StatValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as bytes.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            StatValue::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// A short name of the value's type: `none`, `int`, `uint`, `double`, `str`, `bytes`, `ref`.
    pub fn type_name(&self) -> &'static str {
        match self {
            StatValue::None => "none",
            StatValue::Int(_) => "int",
            StatValue::Uint(_) => "uint",
            StatValue::Double(_) => "double",
            StatValue::Str(_) => "str",
            StatValue::Bytes(_) => "bytes",
            StatValue::UnresolvedRef(_) => "ref",
        }
    }
}

impl fmt::Display for StatValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatValue::None => Ok(()),
            StatValue::Int(v) => write!(f, "{v}"),
            StatValue::Uint(v) => write!(f, "{v}"),
            StatValue::Double(v) => write!(f, "{v}"),
            StatValue::Str(s) => f.write_str(s),
            StatValue::Bytes(b) => write!(f, "<{} bytes>", b.len()),
            StatValue::UnresolvedRef(id) => write!(f, "<ref {id}>"),
        }
    }
}

/// One stat, borrowed from its plane.
#[derive(Clone, Copy)]
pub struct Stat<'a> {
    plane: &'a Plane,
    metadata_id: StatMetadataId,
    raw: RawValue<'a>,
}

impl fmt::Debug for Stat<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stat").field("name", &self.name()).field("value", &self.value()).finish()
    }
}

impl<'a> Stat<'a> {
    /// The stat-metadata id.
    pub fn metadata_id(&self) -> StatMetadataId {
        self.metadata_id
    }

    /// The stat name, or `""` when the id is dangling.
    pub fn name(&self) -> &'a str {
        self.plane.stat_metadata_by_id(self.metadata_id).map_or("", |m| m.name())
    }

    /// True when the value was stored as a `ref_value`.
    pub fn is_ref(&self) -> bool {
        matches!(self.raw, RawValue::Ref(_))
    }

    /// The typed value; `ref_value` is resolved to the referenced stat-metadata name.
    pub fn value(&self) -> StatValue<'a> {
        match self.raw {
            RawValue::None => StatValue::None,
            RawValue::Double(v) => StatValue::Double(v),
            RawValue::Uint(v) => StatValue::Uint(v),
            RawValue::Int(v) => StatValue::Int(v),
            RawValue::Str(b) => StatValue::Str(String::from_utf8_lossy(b)),
            RawValue::Bytes(b) => StatValue::Bytes(b),
            RawValue::Ref(id) => {
                match i64::try_from(id).ok().and_then(|i| self.plane.stat_metadata_by_id(StatMetadataId(i))) {
                    Some(m) => StatValue::Str(Cow::Borrowed(m.name())),
                    None => StatValue::UnresolvedRef(id),
                }
            }
        }
    }

    /// Shorthand for `value().as_i64()`.
    #[inline]
    pub fn as_i64(&self) -> Option<i64> {
        match self.raw {
            RawValue::Int(v) => Some(v),
            RawValue::Uint(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Shorthand for `value().as_u64()`.
    #[inline]
    pub fn as_u64(&self) -> Option<u64> {
        match self.raw {
            RawValue::Uint(v) => Some(v),
            RawValue::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Shorthand for `value().as_f64()`.
    #[inline]
    pub fn as_f64(&self) -> Option<f64> {
        match self.raw {
            RawValue::Double(v) => Some(v),
            RawValue::Int(v) => Some(v as f64),
            RawValue::Uint(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The value as a string (string or resolved reference), without allocating when valid UTF-8.
    pub fn as_str(&self) -> Option<Cow<'a, str>> {
        match self.value() {
            StatValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The raw bytes of a `bytes_value`.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match self.raw {
            RawValue::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The `ref_value` id, for stats stored by reference.
    pub fn ref_id(&self) -> Option<u64> {
        match self.raw {
            RawValue::Ref(id) => Some(id),
            _ => None,
        }
    }

    /// Decodes one XStat message body; `r` reads it inside the plane's bytes.
    #[inline(always)]
    pub(crate) fn decode(plane: &'a Plane, mut r: Reader<'a>) -> Result<Self> {
        let mut stat = Stat { plane, metadata_id: StatMetadataId(0), raw: RawValue::None };
        // Writers emit the metadata id, then one value: take that shape first, with predictable
        // branches; the loop below reads whatever follows (any order, repeats: the last wins).
        let fast = |r: &mut Reader<'a>, stat: &mut Stat<'a>| -> std::result::Result<(), WireError> {
            if r.eat(0x08) {
                stat.metadata_id = StatMetadataId(r.read_varint()? as i64);
            }
            if let Some(raw) = usual_value(r)? {
                stat.raw = raw;
            }
            Ok(())
        };
        let start = r.pos();
        fast(&mut r, &mut stat).map_err(|e| wire_error(e, plane.location_at(start)))?;
        while !r.is_empty() {
            let tag_pos = r.pos();
            let (field, wire) = r.read_tag().map_err(|e| wire_error(e, plane.location_at(tag_pos)))?;
            let val_pos = r.pos();
            let fail = |e| wire_error(e, plane.location_at(val_pos));
            match (field, wire) {
                (1, WireType::Varint) => stat.metadata_id = StatMetadataId(r.read_varint().map_err(fail)? as i64),
                (2, WireType::Fixed64) => stat.raw = RawValue::Double(f64::from_bits(r.read_fixed64().map_err(fail)?)),
                (3, WireType::Varint) => stat.raw = RawValue::Uint(r.read_varint().map_err(fail)?),
                (4, WireType::Varint) => stat.raw = RawValue::Int(r.read_varint().map_err(fail)? as i64),
                (5, WireType::Len) => stat.raw = RawValue::Str(r.read_len().map_err(fail)?),
                (6, WireType::Len) => stat.raw = RawValue::Bytes(r.read_len().map_err(fail)?),
                (7, WireType::Varint) => stat.raw = RawValue::Ref(r.read_varint().map_err(fail)?),
                (1..=7, _) => {
                    return Err(Error::new(
                        ErrorKind::WrongWireType { message: "XStat", field, found: wire.name() },
                        plane.location_at(tag_pos),
                    ));
                }
                _ => r.skip(wire).map_err(fail)?,
            }
        }
        Ok(stat)
    }
}

/// The value field of a stat body as writers emit it, right after the metadata id: one
/// `ref_value`, `str_value`, `int64_value`, `uint64_value` or `double_value`; `Ok(None)`, reading
/// nothing, for anything else (the general decode reads it). Shared by [`Stat::decode`] and the
/// stats a walk gathers ([`GatheredStats`]).
#[inline(always)]
fn usual_value<'a>(r: &mut Reader<'a>) -> std::result::Result<Option<RawValue<'a>>, WireError> {
    Ok(Some(if r.eat(0x38) {
        RawValue::Ref(r.read_varint()?)
    } else if r.eat(0x2a) {
        RawValue::Str(r.read_len()?)
    } else if r.eat(0x20) {
        RawValue::Int(r.read_varint()? as i64)
    } else if r.eat(0x18) {
        RawValue::Uint(r.read_varint()?)
    } else if r.eat(0x11) {
        RawValue::Double(f64::from_bits(r.read_fixed64()?))
    } else {
        return Ok(None);
    }))
}

/// Iterator over the stats in a message body (an event's field 4, or a metadata's field 5).
/// Yields `Err` once on malformed bytes, then stops (the error is noted in the space's
/// [`decode_errors`](crate::Space::decode_errors)).
#[derive(Debug)]
pub struct StatIter<'a> {
    plane: &'a Plane,
    reader: Reader<'a>,
    field: u32,
    done: bool,
}

impl<'a> StatIter<'a> {
    /// The stats in field `field` of the message `reader` reads (positions are plane offsets).
    pub(crate) fn new(plane: &'a Plane, reader: Reader<'a>, field: u32) -> Self {
        // Stats are fields 4 (events) and 5 (metadata): their keys take one byte.
        debug_assert!(field < 16);
        StatIter { plane, reader, field, done: false }
    }

    pub(crate) fn empty(plane: &'a Plane) -> Self {
        StatIter { plane, reader: Reader::new(&[]), field: 0, done: true }
    }

    /// Ends the walk on `e`, noted in the space's decode log as a stat of an event (field 4)
    /// or of an event-metadata entry (field 5).
    #[cold]
    fn fail(&mut self, e: Error) -> Option<Result<Stat<'a>>> {
        self.done = true;
        let what = if self.field == 5 { Undecoded::MetadataStat } else { Undecoded::EventStat };
        Some(Err(self.plane.undecoded(what, e)))
    }
}

impl<'a> Iterator for StatIter<'a> {
    type Item = Result<Stat<'a>>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        // The stats' one-byte key (see [`StatsWhere`]).
        let key = (self.field << 3 | 2) as u8;
        while !self.reader.is_empty() {
            let tag_pos = self.reader.pos();
            let (field, wire) = if self.reader.eat(key) {
                (self.field, WireType::Len)
            } else {
                match self.reader.read_tag() {
                    Ok(t) => t,
                    Err(e) => return self.fail(wire_error(e, self.plane.location_at(tag_pos))),
                }
            };
            let val_pos = self.reader.pos();
            if field == self.field && wire == WireType::Len {
                let body = match self.reader.read_message() {
                    Ok(b) => b,
                    Err(e) => return self.fail(wire_error(e, self.plane.location_at(val_pos))),
                };
                return match Stat::decode(self.plane, body) {
                    Ok(stat) => Some(Ok(stat)),
                    Err(e) => self.fail(e),
                };
            }
            if let Err(e) = self.reader.skip(wire) {
                return self.fail(wire_error(e, self.plane.location_at(val_pos)));
            }
        }
        self.done = true;
        None
    }
}

impl std::iter::FusedIterator for StatIter<'_> {}

/// The stats of an event that a predicate on their metadata id keeps (see
/// [`Event::stats_where`]). Yields `Err` once on malformed bytes, then stops.
#[derive(Debug)]
pub struct StatsWhere<'a, F> {
    inner: StatIter<'a>,
    wanted: F,
}

/// Decodes a stat body whose first id was wanted: the stat when its (last) id is wanted too, or
/// its error (which ends the walk); `None` to go on.
#[inline(always)]
fn decode_wanted<'a>(
    it: &mut StatIter<'a>,
    wanted: &mut impl FnMut(StatMetadataId) -> bool,
    body: Reader<'a>,
) -> Option<Result<Stat<'a>>> {
    match Stat::decode(it.plane, body) {
        Err(e) => it.fail(e),
        Ok(s) if wanted(s.metadata_id) => Some(Ok(s)),
        Ok(_) => None,
    }
}

impl<'a, F: FnMut(StatMetadataId) -> bool> Iterator for StatsWhere<'a, F> {
    type Item = Result<Stat<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let it = &mut self.inner;
        if it.done {
            return None;
        }
        // The stats' one-byte key (fields 4 and 5, length-delimited): taken without the general
        // tag decode (any other key takes it).
        let key = (it.field << 3 | 2) as u8;
        while !it.reader.is_empty() {
            // A stat of the usual shape (one-byte length and id): skipped on its id alone.
            if let Some((id, body)) = it.reader.read_small_stat_of(key) {
                if (self.wanted)(StatMetadataId(i64::from(id)))
                    && let Some(found) = decode_wanted(it, &mut self.wanted, body)
                {
                    return Some(found);
                }
                continue;
            }
            let tag_pos = it.reader.pos();
            let fail = |e, pos: usize, it: &mut StatIter<'a>| it.fail(wire_error(e, it.plane.location_at(pos)));
            let (field, wire) = if it.reader.eat(key) {
                (it.field, WireType::Len)
            } else {
                match it.reader.read_tag() {
                    Ok(t) => t,
                    Err(e) => return fail(e, tag_pos, it),
                }
            };
            let val_pos = it.reader.pos();
            if field == it.field && wire == WireType::Len {
                let body = match it.reader.read_message() {
                    Ok(b) => b,
                    Err(e) => return fail(e, val_pos, it),
                };
                // The metadata id comes first in what writers emit: read it alone, and decode
                // the value only for a wanted stat (any other layout is decoded in full).
                let mut peek = body;
                if peek.eat(0x08) {
                    match peek.read_varint() {
                        Ok(id) if !(self.wanted)(StatMetadataId(id as i64)) => continue,
                        Ok(_) => {}
                        Err(e) => return fail(e, val_pos, it),
                    }
                }
                if let Some(found) = decode_wanted(it, &mut self.wanted, body) {
                    return Some(found);
                }
                continue;
            }
            if let Err(e) = it.reader.skip(wire) {
                return fail(e, val_pos, it);
            }
        }
        it.done = true;
        None
    }
}

impl Stat<'_> {
    /// The stat as a prost message (lossy for non-UTF-8 strings).
    #[cfg(feature = "raw")]
    pub(crate) fn to_raw(self) -> crate::raw::XStat {
        use crate::raw::x_stat::Value;
        let value = match self.raw {
            RawValue::None => None,
            RawValue::Double(v) => Some(Value::DoubleValue(v)),
            RawValue::Uint(v) => Some(Value::Uint64Value(v)),
            RawValue::Int(v) => Some(Value::Int64Value(v)),
            RawValue::Str(b) => Some(Value::StrValue(String::from_utf8_lossy(b).into_owned())),
            RawValue::Bytes(b) => Some(Value::BytesValue(self.plane.share(b).unwrap_or_default())),
            RawValue::Ref(v) => Some(Value::RefValue(v)),
        };
        crate::raw::XStat { metadata_id: self.metadata_id.0, value }
    }
}

// The event and stat iterators of lines and planes live here, beside the types they yield.
impl Line {
    /// Iterates the line's events, decoding each lazily.
    ///
    /// The iterator yields `Err` once on malformed event bytes and then stops.
    pub fn events<'a>(&'a self, plane: &'a Plane) -> EventIter<'a> {
        EventIter::new(plane, self, plane.reader(self.body()))
    }

    /// Like [`Line::events`], for a pass that reads the line once: the file pages behind the walk
    /// are released as it goes (see [`crate::ReleasingEvents`]).
    // Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
    #[doc(hidden)]
    pub fn events_releasing<'a>(&'a self, plane: &'a Plane) -> crate::ReleasingEvents<'a> {
        crate::ReleasingEvents::new(self.events(plane), self.body())
    }

    /// The line's events cut into at most `parts` runs of consecutive events of about equal
    /// bytes, in order, so that one long line can be walked on several threads: chained, the
    /// runs yield exactly what [`Line::events`] yields (event indices included). Lines under
    /// [`PART_MIN_BYTES`] stay whole. The cuts come from the parse, which noted where events
    /// start as it counted them: nothing is read here.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let op = plane.event_metadata("op");
    ///     let mut line = plane.line(7, "worker", 0);
    ///     for i in 0..400_000 {
    ///         line.event(op, i * 10, 5);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let line = &plane.lines()[0];
    /// let parts = line.event_parts(plane, 4);
    /// assert!(parts.len() > 1);
    /// let chained: Vec<_> = parts.into_iter().flatten().map(|e| e.unwrap().index()).collect();
    /// assert_eq!(chained, (0..400_000).collect::<Vec<_>>());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn event_parts<'a>(&'a self, plane: &'a Plane, parts: usize) -> Vec<EventIter<'a>> {
        let body = self.body();
        let cuts = self.cuts(plane, parts);
        if cuts.is_empty() {
            return vec![self.events(plane)];
        }
        let metering = plane.first_walk(self.index());
        let mut out = Vec::with_capacity(cuts.len() + 1);
        let (mut from, mut first) = (body.start, 0usize);
        for &(at, index) in cuts.iter().chain(std::iter::once(&(body.end, self.event_count()))) {
            let mut it = EventIter::new_part(plane, self, plane.reader(from..at), metering);
            it.index = first;
            it.remaining = index - first;
            out.push(it);
            (from, first) = (at, index);
        }
        out
    }

    /// [`Line::event_parts`], each run releasing the file pages behind it as it goes (see
    /// [`crate::ReleasingEvents`]).
    // Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
    #[doc(hidden)]
    pub fn event_parts_releasing<'a>(&'a self, plane: &'a Plane, parts: usize) -> Vec<crate::ReleasingEvents<'a>> {
        self.event_parts(plane, parts)
            .into_iter()
            .map(|it| {
                let range = it.reader.pos()..it.reader.end();
                crate::ReleasingEvents::new(it, range)
            })
            .collect()
    }

    /// Where to cut the line for [`Line::event_parts`]: plane positions of event tags with the
    /// index of the event there, ascending; empty to keep the line whole. The cuts are the
    /// parse's cut points ([`crate::plane::CUT_POINT_BYTES`] apart) nearest after each share's
    /// end: nothing is read.
    fn cuts(&self, plane: &Plane, parts: usize) -> Vec<(usize, usize)> {
        let body = self.body();
        let parts = parts.min(body.len() / PART_MIN_BYTES);
        if parts < 2 {
            return Vec::new();
        }
        let stride = body.len() / parts;
        let points = plane.cut_points(self);
        let mut cuts: Vec<(usize, usize)> = Vec::with_capacity(parts - 1);
        for k in 1..parts {
            let at = points.partition_point(|&(pos, _)| (pos as usize) < body.start + k * stride);
            if let Some(&(pos, index)) = points.get(at)
                && index > 0
                && cuts.last().is_none_or(|&(last, _)| last < pos as usize)
            {
                cuts.push((pos as usize, index as usize));
            }
        }
        cuts
    }
}

impl MetadataMask {
    /// True when the event's metadata passed the predicate.
    #[inline]
    pub fn contains(&self, event: &Event<'_>) -> bool {
        self.any && event.plane().event_metadata_position(event.metadata_id()).is_some_and(|i| self.bits[i])
    }
}

impl Plane {
    /// The plane-level stats (device capabilities, versions, profile start/stop, ...).
    pub fn stats(&self) -> PlaneStats<'_> {
        PlaneStats { plane: self, reader: self.reader(self.stats_window()) }
    }

    /// The first plane-level stat with this name.
    pub fn stat_by_name(&self, name: &str) -> Option<Stat<'_>> {
        let id = self.stat_id(name)?;
        self.stats().filter_map(|s| s.ok()).find(|s| s.metadata_id() == id)
    }

    /// The stats of an event-metadata entry (constant for every event using it).
    pub fn metadata_stats<'a>(&'a self, metadata: &'a EventMetadata) -> StatIter<'a> {
        StatIter::new(self, self.reader(self.metadata_body(metadata)), 5)
    }
}

/// Iterator over a plane's own stats. Yields `Err` for a stat that does not decode and goes on
/// with the next; on malformed framing, yields `Err` once and stops. Every error is noted in the
/// space's [`decode_errors`](crate::Space::decode_errors).
#[derive(Debug)]
pub struct PlaneStats<'a> {
    plane: &'a Plane,
    /// The plane's bytes from its first stat to its last.
    reader: Reader<'a>,
}

impl<'a> Iterator for PlaneStats<'a> {
    type Item = Result<Stat<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        // The framing was checked by the parse; a failure here ends the walk.
        let r = &mut self.reader;
        while !r.is_empty() {
            let pos = r.pos();
            let field = r.read_tag().and_then(|(field, wire)| match (field, wire) {
                (6, WireType::Len) => r.read_message().map(Some),
                _ => r.skip(wire).map(|()| None),
            });
            let e = match field {
                Ok(Some(body)) => match Stat::decode(self.plane, body) {
                    Ok(stat) => return Some(Ok(stat)),
                    // A stat's body: the walk goes on with the next stat.
                    Err(e) => e,
                },
                Ok(None) => continue,
                Err(e) => {
                    *r = Reader::new(&[]);
                    wire_error(e, self.plane.location_at(pos))
                }
            };
            return Some(Err(self.plane.undecoded(Undecoded::PlaneStat, e)));
        }
        None
    }
}
