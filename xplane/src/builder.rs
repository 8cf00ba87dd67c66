//! A writer for valid XSpace bytes, for tests, fixtures and synthetic TPU-shaped profiles.
//!
//! The builder encodes straight to the wire format as it goes (no intermediate message structs),
//! so writing a multi-hundred-MB synthetic profile costs about its size in memory.
//!
//! ```
//! use xlens_xplane::{Space, SpaceBuilder};
//! let mut b = SpaceBuilder::default();
//! {
//!     let mut tpu = b.plane(1, "/device:TPU:0");
//!     let flops = tpu.stat_metadata("flops");
//!     let fusion = tpu.event_metadata("fusion.1");
//!     tpu.metadata_stat(fusion, flops, 1_000_000u64);
//!     let mut ops = tpu.line(3, "XLA Ops", 0);
//!     ops.event(fusion, 0, 2_000_000);
//!     ops.event(fusion, 2_000_000, 2_000_000);
//! }
//! let space = Space::parse(b.finish().into())?;
//! assert_eq!(space.planes()[0].lines()[0].event_count(), 2);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;

use crate::ids::{EventMetadataId, StatMetadataId};

/// A stat value to write.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BuildValue<'a> {
    /// `int64_value`.
    Int(i64),
    /// `uint64_value`.
    Uint(u64),
    /// `double_value`.
    Double(f64),
    /// `str_value`.
    Str(&'a str),
    /// `bytes_value`.
    Bytes(&'a [u8]),
    /// `ref_value`: a string held as the name of this stat metadata.
    Ref(StatMetadataId),
}

impl From<i64> for BuildValue<'_> {
    fn from(v: i64) -> Self {
        BuildValue::Int(v)
    }
}
impl From<i32> for BuildValue<'_> {
    fn from(v: i32) -> Self {
        BuildValue::Int(i64::from(v))
    }
}
impl From<u64> for BuildValue<'_> {
    fn from(v: u64) -> Self {
        BuildValue::Uint(v)
    }
}
impl From<u32> for BuildValue<'_> {
    fn from(v: u32) -> Self {
        BuildValue::Uint(u64::from(v))
    }
}
impl From<f64> for BuildValue<'_> {
    fn from(v: f64) -> Self {
        BuildValue::Double(v)
    }
}
impl<'a> From<&'a str> for BuildValue<'a> {
    fn from(v: &'a str) -> Self {
        BuildValue::Str(v)
    }
}
impl<'a> From<&'a String> for BuildValue<'a> {
    fn from(v: &'a String) -> Self {
        BuildValue::Str(v)
    }
}
impl<'a> From<&'a [u8]> for BuildValue<'a> {
    fn from(v: &'a [u8]) -> Self {
        BuildValue::Bytes(v)
    }
}

/// Writes an XSpace. Add planes with [`plane`](Self::plane), then call [`finish`](Self::finish).
#[derive(Debug, Default)]
pub struct SpaceBuilder {
    out: Vec<u8>,
}

impl SpaceBuilder {
    /// Starts a plane; it is written when the returned builder is dropped.
    pub fn plane(&mut self, id: i64, name: &str) -> PlaneBuilder<'_> {
        PlaneBuilder::new(self, id, name)
    }

    /// Records a profiler error message (XSpace field 2).
    pub fn error(&mut self, msg: &str) {
        put_bytes_field(&mut self.out, 2, msg.as_bytes());
    }

    /// Records a profiler warning message (XSpace field 3).
    pub fn warning(&mut self, msg: &str) {
        put_bytes_field(&mut self.out, 3, msg.as_bytes());
    }

    /// Records a host name (XSpace field 4).
    pub fn hostname(&mut self, name: &str) {
        put_bytes_field(&mut self.out, 4, name.as_bytes());
    }

    /// Appends raw bytes to the output, for tests of malformed input.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The serialized XSpace.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

/// Writes one plane. Dropping it appends the plane to its space.
#[derive(Debug)]
pub struct PlaneBuilder<'s> {
    space: &'s mut SpaceBuilder,
    header: Vec<u8>,
    lines: Vec<u8>,
    metadata: Vec<u8>,
    event_meta: HashMap<String, EventMetadataId>,
    event_meta_entries: Vec<EventMetaEntry>,
    stat_meta: HashMap<String, StatMetadataId>,
    next_event_meta_id: i64,
    next_stat_meta_id: i64,
    stats: Vec<u8>,
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct EventMetaEntry {
    id: EventMetadataId,
    name: String,
    display_name: String,
    payload: Vec<u8>,
    stats: Vec<u8>,
    child_ids: Vec<i64>,
}

impl<'s> PlaneBuilder<'s> {
    fn new(space: &'s mut SpaceBuilder, id: i64, name: &str) -> Self {
        let mut header = Vec::new();
        put_varint_field(&mut header, 1, id as u64);
        put_bytes_field(&mut header, 2, name.as_bytes());
        PlaneBuilder {
            space,
            header,
            lines: Vec::new(),
            metadata: Vec::new(),
            event_meta: HashMap::new(),
            event_meta_entries: Vec::new(),
            stat_meta: HashMap::new(),
            next_event_meta_id: 1,
            next_stat_meta_id: 1,
            stats: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The id of the event metadata with this name, created on first use (ids 1, 2, ...).
    pub fn event_metadata(&mut self, name: &str) -> EventMetadataId {
        if let Some(&id) = self.event_meta.get(name) {
            return id;
        }
        let id = EventMetadataId(self.next_event_meta_id);
        self.next_event_meta_id += 1;
        self.event_meta.insert(name.to_owned(), id);
        self.event_meta_entries.push(EventMetaEntry {
            id,
            name: name.to_owned(),
            display_name: String::new(),
            payload: Vec::new(),
            stats: Vec::new(),
            child_ids: Vec::new(),
        });
        id
    }

    /// Creates event metadata with a display name (always a new entry).
    pub fn event_metadata_with_display(&mut self, name: &str, display_name: &str) -> EventMetadataId {
        let id = EventMetadataId(self.next_event_meta_id);
        self.next_event_meta_id += 1;
        self.event_meta.entry(name.to_owned()).or_insert(id);
        self.event_meta_entries.push(EventMetaEntry {
            id,
            name: name.to_owned(),
            display_name: display_name.to_owned(),
            payload: Vec::new(),
            stats: Vec::new(),
            child_ids: Vec::new(),
        });
        id
    }

    /// Sets the opaque `metadata` payload of an event metadata entry.
    pub fn metadata_payload(&mut self, id: EventMetadataId, payload: &[u8]) {
        if let Some(e) = self.event_meta_entries.iter_mut().rev().find(|e| e.id == id) {
            e.payload = payload.to_vec();
        }
    }

    /// Adds a child id to an event metadata entry.
    pub fn metadata_child(&mut self, id: EventMetadataId, child: EventMetadataId) {
        if let Some(e) = self.event_meta_entries.iter_mut().rev().find(|e| e.id == id) {
            e.child_ids.push(child.0);
        }
    }

    /// Adds a stat to an event metadata entry (shared by every event using it).
    pub fn metadata_stat<'v>(&mut self, id: EventMetadataId, stat: StatMetadataId, value: impl Into<BuildValue<'v>>) {
        let value = value.into();
        if let Some(e) = self.event_meta_entries.iter_mut().rev().find(|e| e.id == id) {
            put_stat(&mut e.stats, 5, &mut self.scratch, stat, value);
        }
    }

    /// The id of the stat metadata with this name, created on first use (ids 1, 2, ...).
    pub fn stat_metadata(&mut self, name: &str) -> StatMetadataId {
        if let Some(&id) = self.stat_meta.get(name) {
            return id;
        }
        let id = StatMetadataId(self.next_stat_meta_id);
        self.next_stat_meta_id += 1;
        self.stat_meta.insert(name.to_owned(), id);
        // Entry: key (1) + value (2: {id, name}).
        self.scratch.clear();
        put_varint_field(&mut self.scratch, 1, id.0 as u64);
        put_bytes_field(&mut self.scratch, 2, name.as_bytes());
        let mut entry = Vec::with_capacity(self.scratch.len() + 12);
        put_varint_field(&mut entry, 1, id.0 as u64);
        put_bytes_field(&mut entry, 2, &self.scratch);
        put_bytes_field(&mut self.metadata, 5, &entry);
        id
    }

    /// Adds a plane-level stat (device capabilities, versions, ...).
    pub fn stat<'v>(&mut self, stat: StatMetadataId, value: impl Into<BuildValue<'v>>) {
        put_stat(&mut self.stats, 6, &mut self.scratch, stat, value.into());
    }

    /// Starts a line; it is written to the plane when the returned builder is dropped.
    pub fn line(&mut self, id: i64, name: &str, timestamp_ns: i64) -> LineBuilder<'_, 's> {
        self.line_with(LineHeader { id, name, timestamp_ns, ..LineHeader::default() })
    }

    /// Starts a line with every header field given.
    pub fn line_with(&mut self, header: LineHeader<'_>) -> LineBuilder<'_, 's> {
        let mut body = Vec::new();
        put_varint_field(&mut body, 1, header.id as u64);
        put_bytes_field(&mut body, 2, header.name.as_bytes());
        put_varint_field(&mut body, 3, header.timestamp_ns as u64);
        if header.duration_ps != 0 {
            put_varint_field(&mut body, 9, header.duration_ps as u64);
        }
        if header.display_id != 0 {
            put_varint_field(&mut body, 10, header.display_id as u64);
        }
        if !header.display_name.is_empty() {
            put_bytes_field(&mut body, 11, header.display_name.as_bytes());
        }
        LineBuilder { plane: self, body, event: Vec::new() }
    }

    fn write_metadata(&mut self) {
        let mut value = Vec::new();
        let mut entry = Vec::new();
        for e in &self.event_meta_entries {
            value.clear();
            put_varint_field(&mut value, 1, e.id.0 as u64);
            put_bytes_field(&mut value, 2, e.name.as_bytes());
            if !e.payload.is_empty() {
                put_bytes_field(&mut value, 3, &e.payload);
            }
            if !e.display_name.is_empty() {
                put_bytes_field(&mut value, 4, e.display_name.as_bytes());
            }
            value.extend_from_slice(&e.stats);
            if !e.child_ids.is_empty() {
                let mut packed = Vec::new();
                for &c in &e.child_ids {
                    put_varint(&mut packed, c as u64);
                }
                put_bytes_field(&mut value, 6, &packed);
            }
            entry.clear();
            put_varint_field(&mut entry, 1, e.id.0 as u64);
            put_bytes_field(&mut entry, 2, &value);
            put_bytes_field(&mut self.metadata, 4, &entry);
        }
    }
}

impl Drop for PlaneBuilder<'_> {
    fn drop(&mut self) {
        self.write_metadata();
        let len = self.header.len() + self.lines.len() + self.metadata.len() + self.stats.len();
        let out = &mut self.space.out;
        put_tag(out, 1, 2);
        put_varint(out, len as u64);
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.lines);
        out.extend_from_slice(&self.metadata);
        out.extend_from_slice(&self.stats);
    }
}

/// Header fields of a line.
#[derive(Clone, Copy, Debug, Default)]
pub struct LineHeader<'a> {
    /// Line id (thread id on host planes).
    pub id: i64,
    /// Display id (0: same as id).
    pub display_id: i64,
    /// Name.
    pub name: &'a str,
    /// Display name (empty: same as name).
    pub display_name: &'a str,
    /// Start in ns.
    pub timestamp_ns: i64,
    /// Duration in ps.
    pub duration_ps: i64,
}

/// Writes one line. Dropping it appends the line to its plane.
#[derive(Debug)]
pub struct LineBuilder<'p, 's> {
    plane: &'p mut PlaneBuilder<'s>,
    body: Vec<u8>,
    event: Vec<u8>,
}

impl<'p, 's> LineBuilder<'p, 's> {
    /// Adds an event at `offset_ps` from the line start.
    pub fn event(&mut self, metadata: EventMetadataId, offset_ps: i64, duration_ps: i64) -> EventBuilder<'_, 'p, 's> {
        self.event.clear();
        put_varint_field(&mut self.event, 1, metadata.0 as u64);
        // offset_ps is in a oneof: written even when 0.
        put_varint_field_always(&mut self.event, 2, offset_ps as u64);
        if duration_ps != 0 {
            put_varint_field(&mut self.event, 3, duration_ps as u64);
        }
        EventBuilder { line: self }
    }

    /// Adds an aggregated event (`num_occurrences` instead of an offset).
    pub fn aggregated_event(
        &mut self,
        metadata: EventMetadataId,
        num_occurrences: i64,
        duration_ps: i64,
    ) -> EventBuilder<'_, 'p, 's> {
        self.event.clear();
        put_varint_field(&mut self.event, 1, metadata.0 as u64);
        put_varint_field_always(&mut self.event, 5, num_occurrences as u64);
        if duration_ps != 0 {
            put_varint_field(&mut self.event, 3, duration_ps as u64);
        }
        EventBuilder { line: self }
    }

    /// The plane's stat metadata id for a name (see [`PlaneBuilder::stat_metadata`]).
    pub fn stat_metadata(&mut self, name: &str) -> StatMetadataId {
        self.plane.stat_metadata(name)
    }

    /// The plane's event metadata id for a name (see [`PlaneBuilder::event_metadata`]).
    pub fn event_metadata(&mut self, name: &str) -> EventMetadataId {
        self.plane.event_metadata(name)
    }

    /// Bytes written to this line so far.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// True when the line has no bytes yet (never: the header is written up front).
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    fn flush_event(&mut self) {
        put_bytes_field(&mut self.body, 4, &self.event);
        self.event.clear();
    }
}

impl Drop for LineBuilder<'_, '_> {
    fn drop(&mut self) {
        put_bytes_field(&mut self.plane.lines, 3, &self.body);
    }
}

/// Adds stats to an event. Dropping it appends the event to its line.
#[derive(Debug)]
pub struct EventBuilder<'l, 'p, 's> {
    line: &'l mut LineBuilder<'p, 's>,
}

impl EventBuilder<'_, '_, '_> {
    /// Adds a stat to the event.
    pub fn stat<'v>(self, stat: StatMetadataId, value: impl Into<BuildValue<'v>>) -> Self {
        let line = &mut *self.line;
        put_stat(&mut line.event, 4, &mut line.plane.scratch, stat, value.into());
        self
    }
}

impl Drop for EventBuilder<'_, '_, '_> {
    fn drop(&mut self) {
        self.line.flush_event();
    }
}

fn put_stat(out: &mut Vec<u8>, field: u32, scratch: &mut Vec<u8>, stat: StatMetadataId, value: BuildValue<'_>) {
    scratch.clear();
    put_varint_field(scratch, 1, stat.0 as u64);
    match value {
        BuildValue::Double(v) => {
            put_tag(scratch, 2, 1);
            scratch.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        BuildValue::Uint(v) => put_varint_field_always(scratch, 3, v),
        BuildValue::Int(v) => put_varint_field_always(scratch, 4, v as u64),
        BuildValue::Str(s) => put_bytes_field(scratch, 5, s.as_bytes()),
        BuildValue::Bytes(b) => put_bytes_field(scratch, 6, b),
        BuildValue::Ref(id) => put_varint_field_always(scratch, 7, id.0 as u64),
    }
    put_bytes_field(out, field, scratch);
}

/// Appends a varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn put_tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// Appends a varint field, omitted when zero (proto3 default).
#[inline]
fn put_varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        put_varint_field_always(out, field, v);
    }
}

/// Appends a varint field even when zero (oneof members have presence).
#[inline]
fn put_varint_field_always(out: &mut Vec<u8>, field: u32, v: u64) {
    put_tag(out, field, 0);
    put_varint(out, v);
}

/// Appends a length-delimited field.
#[inline]
fn put_bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_tag(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
