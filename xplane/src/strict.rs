//! A strict structural check of protobuf bytes against a schema: finds exactly what prost 0.14
//! rejects when it decodes the bytes as the schema's message, without decoding them.
//!
//! The lazy readers of this crate (and `hlo`'s instruction fast path) read the fields an
//! analysis needs and skip the rest, so malformed bytes in a field nobody reads go unseen. A
//! [`Schema`] built from the `FileDescriptorSet` the build script compiled (the same `.proto`
//! prost-build generated the crate's types from) walks every field instead, allocation-free and
//! in one pass, and fails where prost would:
//!
//! - a key that is not a valid varint, over `u32::MAX`, of wire type 6 or 7, or of field 0;
//! - a declared field sent with another wire type than its type's, except that repeated numeric
//!   scalars take a packed (length-delimited) occurrence as well as single values;
//! - a packed occurrence that is not whole varints, or whole 4- or 8-byte values;
//! - a varint over ten bytes or whose tenth byte is over 1, a length or a fixed value beyond
//!   the end of its message;
//! - an unknown field that prost cannot skip (an end-group of no group, a group whose end is of
//!   another field or missing);
//! - nesting past prost's recursion limit (100), counted as prost counts it: each message, map
//!   entry or group entered, and an unknown field of a message 100 levels deep.
//!
//! Strings are not checked for UTF-8 (xlens reads the XSpace's names lossily, by design), but
//! by a schema built with [`Schema::from_descriptor_set_checking_utf8`] (the HLO messages, parts
//! of which xlens decodes with prost).
//!
//! The common shapes take fast paths decided from the schema (a message of three varint fields
//! in one step, a field by its wire type alone, a message of scalars in place); anything else,
//! and every fault, takes the general way, which says what prost would.
//!
//! ```
//! use xlens_xplane::strict::Schema;
//! let schema = Schema::xspace();
//! let space = schema.message("tensorflow.profiler.XSpace").unwrap();
//! // An XSpace with one empty plane, then a field of wire type 7.
//! assert!(schema.check(&[0x0a, 0x00], space).is_ok());
//! let fault = schema.check(&[0x0a, 0x00, 0x0f], space).unwrap_err();
//! assert_eq!((fault.offset, fault.path.as_str()), (2, "XSpace"));
//! ```

use std::fmt;
use std::ops::Range;

use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};

use crate::wire::Reader;

/// prost's recursion limit (`prost::RECURSION_LIMIT`): the messages nested in a message
/// decoded at the top.
pub const RECURSION_LIMIT: u32 = 100;

/// The encoded `FileDescriptorSet` of this crate's `proto/xplane.proto`.
const XSPACE_DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xplane.fds"));

/// What a field's bytes must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Not declared: skipped as prost skips unknown fields.
    Unknown,
    /// A varint scalar (`int32`, `int64`, `uint32`, `uint64`, `sint*`, `bool`, an enum).
    Varint { repeated: bool },
    /// A four-byte scalar (`fixed32`, `sfixed32`, `float`).
    Fixed32 { repeated: bool },
    /// An eight-byte scalar (`fixed64`, `sfixed64`, `double`).
    Fixed64 { repeated: bool },
    /// `bytes`, or a `string` of a schema that does not check UTF-8.
    Bytes,
    /// A `string` of a schema that checks UTF-8 ([`Schema::from_descriptor_set_checking_utf8`]).
    Str,
    /// A message (by index).
    Message(u32),
    /// A map field (its entry message, by index): read as a message.
    Map(u32),
    /// A group (by index).
    Group(u32),
}

/// One field of a message table.
#[derive(Clone, Copy, Debug)]
struct Field {
    kind: Kind,
    /// Its name, for paths: an index into [`Schema::names`].
    name: u32,
    /// Whether it is repeated (its occurrences are indexed in paths).
    repeated: bool,
}

const UNKNOWN: Field = Field { kind: Kind::Unknown, name: 0, repeated: false };

/// Field numbers up to this are looked up in a dense table; a message with a larger one keeps
/// a sorted table.
const DENSE_MAX: u32 = 1024;

/// One message: its fields by number.
#[derive(Debug)]
struct MessageTable {
    /// Its short name (`XPlane`).
    name: Box<str>,
    /// Dense: `fields[number]`; sparse: sorted by number, in `sparse`.
    dense: Box<[Field]>,
    sparse: Box<[(u32, Field)]>,
    /// The one-byte key of a field of this message whose own message's fields 1, 2 and 3 are
    /// varints (an XLine's events): an occurrence holding exactly those three, in that order,
    /// is checked in one step ([`Reader::read_plain_of`]), the rest the general way.
    plain: Option<u8>,
    /// Per field number (as `dense`): what the fast path of [`Walk::message`] may do.
    fast: Box<[Fast]>,
    /// What it may do with a number past `fast` (an unknown field, or the general way for a
    /// sparse table).
    fast_default: Fast,
    /// Whether every declared field is a scalar, a string or bytes (an XStat): a message of
    /// such a type is checked in place by [`flat_ok`], without a level of recursion.
    flat: bool,
}

/// Whether `buf[pos..end]`, a message of the flat type `table`, holds only declared fields of
/// one simple value each; `false` leaves it to the general way, which finds what is wrong (or
/// what needs more: a packed list, an unknown field's recursion budget).
#[inline(always)]
fn flat_ok(table: &MessageTable, buf: &[u8], mut pos: usize, end: usize) -> bool {
    while pos < end {
        let key = buf[pos];
        let f = table.fast.get(usize::from(key >> 3)).copied().unwrap_or(table.fast_default);
        let wire = key & 7;
        if key >= 0x80 || f.simple & (1 << wire) == 0 || f.simple & (UNKNOWN_BIT | UTF8_BIT) != 0 {
            return false;
        }
        pos += 1;
        if wire & 1 != 0 {
            pos += 8usize >> (wire >> 2);
            continue;
        }
        let mut r = Reader::bounded(buf, pos..end);
        let Ok(v) = r.read_varint() else { return false };
        pos = r.pos();
        if wire == 2 {
            if v > (end - pos) as u64 {
                return false;
            }
            pos += v as usize;
        }
    }
    pos == end
}

/// A field's fast path: the wire types it takes as one simple value (bit `w` for wire type
/// `w`: a varint, 8 or 4 bytes, a length and its bytes), and the message a length-delimited
/// value holds (`NO_MESSAGE` for none). Anything else (packed numbers, groups, wrong wire
/// types) is the general way's.
#[derive(Clone, Copy, Debug)]
struct Fast {
    simple: u8,
    nest: u32,
}

const NO_MESSAGE: u32 = u32::MAX;
/// Set in [`Fast::simple`] for a string whose UTF-8 is checked.
const UTF8_BIT: u8 = 0x40;
/// Set in [`Fast::simple`] for an unknown field: skipped only while the recursion budget lasts.
const UNKNOWN_BIT: u8 = 0x80;
const FAST_UNKNOWN: Fast = Fast { simple: 0b0010_0111 | UNKNOWN_BIT, nest: NO_MESSAGE };
const FAST_GENERAL: Fast = Fast { simple: 0, nest: NO_MESSAGE };

impl Fast {
    fn of(kind: Kind) -> Fast {
        let simple = |bits: u8| Fast { simple: bits, nest: NO_MESSAGE };
        match kind {
            Kind::Unknown => FAST_UNKNOWN,
            Kind::Varint { .. } => simple(1 << 0),
            Kind::Fixed64 { .. } => simple(1 << 1),
            Kind::Fixed32 { .. } => simple(1 << 5),
            Kind::Bytes => simple(1 << 2),
            Kind::Str => Fast { simple: 1 << 2 | UTF8_BIT, nest: NO_MESSAGE },
            Kind::Message(m) | Kind::Map(m) => Fast { simple: 1 << 2, nest: m },
            Kind::Group(_) => FAST_GENERAL,
        }
    }
}

impl MessageTable {
    #[inline(always)]
    fn field(&self, number: u32) -> Field {
        match self.dense.get(number as usize) {
            Some(f) => *f,
            None if self.sparse.is_empty() => UNKNOWN,
            None => self.sparse.binary_search_by_key(&number, |(n, _)| *n).map_or(UNKNOWN, |i| self.sparse[i].1),
        }
    }
}

/// A message type of a [`Schema`], to check bytes as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageId(u32);

/// The message tables of a `FileDescriptorSet`: what [`Schema::check`] holds bytes to.
#[derive(Debug)]
pub struct Schema {
    messages: Box<[MessageTable]>,
    /// Fully qualified names (`tensorflow.profiler.XSpace`), by message index.
    full_names: Box<[Box<str>]>,
    /// Field names; index 0 is unused.
    names: Box<[Box<str>]>,
}

/// Where and why bytes fail a [`Schema::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// Byte offset of the fault in the checked buffer.
    pub offset: usize,
    /// What prost would say.
    pub why: &'static str,
    /// The message whose field is malformed: its type's name, then a field name (with the
    /// occurrence's index for a repeated field) per level: `XSpace.planes[2].lines[0]`.
    pub path: String,
    /// The bytes of that message in the buffer, from the key of the field that holds it (the
    /// whole buffer at the top).
    pub span: Range<usize>,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a field of {}: {} (byte {})", self.path, self.why, self.offset)
    }
}

/// A `FileDescriptorSet` that does not make a schema.
#[derive(Debug, thiserror::Error)]
#[error("descriptor set: {0}")]
pub struct SchemaError(String);

impl Schema {
    /// The schema of `proto/xplane.proto`, the XSpace messages (package `tensorflow.profiler`).
    pub fn xspace() -> Schema {
        // The descriptor is the build script's output, checked by this crate's tests: it cannot
        // fail at run time but for a broken build.
        Schema::from_descriptor_set(XSPACE_DESCRIPTOR).unwrap_or_else(|_| Schema::empty())
    }

    /// A schema of no message (what [`Schema::xspace`] falls back to on a broken build).
    fn empty() -> Schema {
        Schema { messages: Box::new([]), full_names: Box::new([]), names: Box::new(["".into()]) }
    }

    /// The tables of every message of an encoded `FileDescriptorSet` (what `protox::compile`
    /// returns, encoded), nested messages and map entries included.
    pub fn from_descriptor_set(encoded: &[u8]) -> Result<Schema, SchemaError> {
        Schema::build(encoded, false)
    }

    /// [`Schema::from_descriptor_set`] for a schema whose strings must be UTF-8, as prost
    /// checks them (the HLO messages: xlens decodes parts of them with prost).
    pub fn from_descriptor_set_checking_utf8(encoded: &[u8]) -> Result<Schema, SchemaError> {
        Schema::build(encoded, true)
    }

    fn build(encoded: &[u8], utf8: bool) -> Result<Schema, SchemaError> {
        let set = prost_types::FileDescriptorSet::decode(encoded).map_err(|e| SchemaError(e.to_string()))?;
        // Every message with its fully qualified name (with a leading dot, as type names are).
        let mut all: Vec<(String, &prost_types::DescriptorProto)> = Vec::new();
        fn collect<'d>(
            prefix: &str,
            messages: &'d [prost_types::DescriptorProto],
            all: &mut Vec<(String, &'d prost_types::DescriptorProto)>,
        ) {
            for m in messages {
                let name = format!("{prefix}.{}", m.name());
                collect(&name, &m.nested_type, all);
                all.push((name, m));
            }
        }
        for file in &set.file {
            let prefix = if file.package().is_empty() { String::new() } else { format!(".{}", file.package()) };
            collect(&prefix, &file.message_type, &mut all);
        }
        let index: std::collections::HashMap<&str, u32> =
            all.iter().enumerate().map(|(i, (name, _))| (name.as_str(), i as u32)).collect();
        let mut names: Vec<Box<str>> = vec!["".into()];
        let mut messages = Vec::with_capacity(all.len());
        for (full, m) in &all {
            let mut fields: Vec<(u32, Field)> = Vec::with_capacity(m.field.len());
            for f in &m.field {
                let number = u32::try_from(f.number()).map_err(|_| SchemaError(format!("{full}: field number")))?;
                let repeated = f.label() == Label::Repeated;
                let target = || {
                    index
                        .get(f.type_name())
                        .copied()
                        .ok_or_else(|| SchemaError(format!("{full}.{}: unknown type {}", f.name(), f.type_name())))
                };
                let kind = match f.r#type() {
                    Type::Int32
                    | Type::Int64
                    | Type::Uint32
                    | Type::Uint64
                    | Type::Sint32
                    | Type::Sint64
                    | Type::Bool
                    | Type::Enum => Kind::Varint { repeated },
                    Type::Fixed32 | Type::Sfixed32 | Type::Float => Kind::Fixed32 { repeated },
                    Type::Fixed64 | Type::Sfixed64 | Type::Double => Kind::Fixed64 { repeated },
                    Type::String if utf8 => Kind::Str,
                    Type::String | Type::Bytes => Kind::Bytes,
                    Type::Group => Kind::Group(target()?),
                    Type::Message => {
                        let t = target()?;
                        let entry = all[t as usize].1.options.as_ref().is_some_and(|o| o.map_entry());
                        if entry && repeated { Kind::Map(t) } else { Kind::Message(t) }
                    }
                };
                names.push(f.name().into());
                fields.push((number, Field { kind, name: (names.len() - 1) as u32, repeated }));
            }
            fields.sort_by_key(|(n, _)| *n);
            let max = fields.last().map_or(0, |(n, _)| *n);
            let (dense, sparse) = if max <= DENSE_MAX {
                let mut dense = vec![UNKNOWN; max as usize + 1];
                for (n, f) in &fields {
                    dense[*n as usize] = *f;
                }
                (dense.into_boxed_slice(), Box::default())
            } else {
                (Box::default(), fields.into_boxed_slice())
            };
            let fast: Box<[Fast]> = dense.iter().map(|f| Fast::of(f.kind)).collect();
            let fast_default = if sparse.is_empty() { FAST_UNKNOWN } else { FAST_GENERAL };
            let flat = sparse.is_empty()
                && dense.iter().all(|f| {
                    matches!(
                        f.kind,
                        Kind::Unknown
                            | Kind::Varint { .. }
                            | Kind::Fixed32 { .. }
                            | Kind::Fixed64 { .. }
                            | Kind::Bytes
                            | Kind::Str
                    )
                });
            messages.push(MessageTable { name: m.name().into(), dense, sparse, plain: None, fast, fast_default, flat });
        }
        // The fields whose messages a plain read checks whole: a message field of a one-byte key
        // (number under 16) whose message declares fields 1, 2 and 3 as varints.
        let varints = |m: &MessageTable| (1..=3).all(|n| matches!(m.field(n).kind, Kind::Varint { .. }));
        for i in 0..messages.len() {
            let plain = (1..16u32).find(|&n| match messages[i].field(n).kind {
                Kind::Message(m) => varints(&messages[m as usize]),
                _ => false,
            });
            messages[i].plain = plain.map(|n| (n << 3 | 2) as u8);
        }
        let full_names = all.iter().map(|(name, _)| name.trim_start_matches('.').into()).collect();
        Ok(Schema { messages: messages.into_boxed_slice(), full_names, names: names.into_boxed_slice() })
    }

    /// The message of this fully qualified name (`tensorflow.profiler.XSpace`), if declared.
    pub fn message(&self, full_name: &str) -> Option<MessageId> {
        self.full_names.iter().position(|n| &**n == full_name).map(|i| MessageId(i as u32))
    }

    /// Checks `bytes` as one whole message `root`, as `prost::Message::decode` reads it.
    pub fn check(&self, bytes: &[u8], root: MessageId) -> Result<(), Fault> {
        self.check_nested(bytes, 0..bytes.len(), root, 0, None, &mut |_, _| {}).map_err(|f| f.named(self, root))
    }

    /// Checks `buf[range]` as the body of a message `root` nested `depth` levels inside the
    /// message a decode starts at (0: it is that message), as prost checks it there. With
    /// `defer = Some(field)`, the occurrences of that message field of `root` are not checked
    /// but handed to `deferred` (their body's range and their index among the field's
    /// occurrences), for the caller to check (at `depth + 1`), in parallel, say: their key, wire
    /// type, length and the recursion limit are checked here.
    ///
    /// A fault's path starts with a `.` and the first field below `root` (empty for a fault
    /// of `root`'s own fields), for the caller to prefix with where `root` is; its span is
    /// within `range`.
    pub fn check_nested(
        &self,
        buf: &[u8],
        range: Range<usize>,
        root: MessageId,
        depth: u32,
        defer: Option<u32>,
        deferred: &mut dyn FnMut(Range<usize>, usize),
    ) -> Result<(), Fault> {
        let Some(budget) = RECURSION_LIMIT.checked_sub(depth) else {
            return Err(Fault {
                offset: range.start,
                why: "recursion limit reached",
                path: String::new(),
                span: range,
            });
        };
        let end = range.end.min(buf.len());
        let frame =
            Frame { parent: None, message: root.0, start: range.start.min(end), span_start: range.start, via: 0 };
        let mut walk = Walk { schema: self, buf: &buf[..end], defer, deferred, occurrences: 0 };
        let mut r = Reader::bounded(buf, range);
        walk.message(&mut r, &frame, budget).map_err(|e| e.fault(self, buf))
    }
}

/// One message being walked, for the path of a fault: linked on the stack, nothing allocated.
struct Frame<'f> {
    parent: Option<&'f Frame<'f>>,
    /// The message's table.
    message: u32,
    /// Where its body starts (after the key and length, or the start-group key).
    start: usize,
    /// Where the field holding it starts (its key), for the fault's span.
    span_start: usize,
    /// The field of the parent that holds it (0 at the root).
    via: u32,
}

/// A fault as met, before its path is written.
struct Met {
    offset: usize,
    why: &'static str,
    /// The frames from the innermost message out: (message, body start, span start, field).
    path: Vec<(u32, usize, usize, u32)>,
    /// The end of the innermost message's body.
    end: usize,
}

impl Met {
    /// The fault with its path written: each level's field name, with the occurrence's index
    /// for a repeated field (counted by reading the parent's fields again up to it).
    fn fault(self, schema: &Schema, buf: &[u8]) -> Fault {
        let mut path = String::new();
        // `self.path` is innermost first: (message, start, span start, via).
        for pair in self.path.windows(2).rev() {
            let (_, _, span_start, via) = pair[0];
            let (parent, parent_start, _, _) = pair[1];
            let field = schema.messages[parent as usize].field(via);
            path.push('.');
            path.push_str(&schema.names[field.name as usize]);
            if field.repeated {
                let k = occurrences_before(buf, parent_start, span_start, via);
                path.push_str(&format!("[{k}]"));
            }
        }
        let span_start = self.path.first().map_or(0, |p| p.2);
        Fault { offset: self.offset, why: self.why, path, span: span_start..self.end.max(span_start) }
    }
}

impl Fault {
    /// The path with the root message's name in front.
    fn named(mut self, schema: &Schema, root: MessageId) -> Fault {
        let name = schema.messages.get(root.0 as usize).map_or("?", |m| &m.name);
        self.path.insert_str(0, name);
        self
    }
}

/// How many fields `field` precede the key at `at` in the message body from `start` (fields
/// already checked: read without a check of their own, stopping at anything odd).
fn occurrences_before(buf: &[u8], start: usize, at: usize, field: u32) -> usize {
    let mut r = Reader::bounded(buf, start..at);
    let mut count = 0;
    while !r.is_empty() {
        let Ok(key) = r.read_varint() else { break };
        if (key >> 3) as u32 == field {
            count += 1;
        }
        let skipped = match key & 7 {
            0 => r.read_varint().map(drop).is_ok(),
            1 => r.skip(crate::wire::WireType::Fixed64).is_ok(),
            2 => r.read_len().is_ok(),
            5 => r.skip(crate::wire::WireType::Fixed32).is_ok(),
            // Groups: their fields are counted as the parent's (groups are not used by the
            // schemas checked; the index is then approximate).
            3 | 4 => true,
            _ => false,
        };
        if !skipped {
            break;
        }
    }
    count
}

struct Walk<'s, 'b, 'd> {
    schema: &'s Schema,
    buf: &'b [u8],
    /// The field of the root whose occurrences are handed to `deferred`.
    defer: Option<u32>,
    deferred: &'d mut dyn FnMut(Range<usize>, usize),
    /// Occurrences of the deferred field so far.
    occurrences: usize,
}

/// A fault at `offset` in the message of `frame`.
#[cold]
#[inline(never)]
fn met(frame: &Frame<'_>, offset: usize, why: &'static str, end: usize) -> Box<Met> {
    let mut path = Vec::new();
    let mut f = Some(frame);
    while let Some(fr) = f {
        path.push((fr.message, fr.start, fr.span_start, fr.via));
        f = fr.parent;
    }
    Box::new(Met { offset, why, path, end })
}

const INVALID_VARINT: &str = "invalid varint";
const UNDERFLOW: &str = "buffer underflow: a value runs past the end of its message";

impl<'b> Walk<'_, 'b, '_> {
    /// Checks the fields of the message `frame` from `r` to its end; `budget` is prost's
    /// recursion count for the message's fields (100 at the top).
    fn message(&mut self, r: &mut Reader<'b>, frame: &Frame<'_>, budget: u32) -> Result<(), Box<Met>> {
        let table = &self.schema.messages[frame.message as usize];
        // The plain read enters the message (a level: `budget` must allow it), and does not
        // hand out deferred fields.
        let plain = table
            .plain
            .filter(|&key| budget > 0 && (frame.parent.is_some() || self.defer != Some(u32::from(key >> 3))));
        // The root of a check that hands out a field takes the general way.
        let fast = frame.parent.is_some() || self.defer.is_none();
        while !r.is_empty() {
            if let Some(key) = plain
                && r.read_plain_of(key).is_some()
            {
                continue;
            }
            let at = r.pos();
            let (number, wire) = self.key(r, frame)?;
            let f = table.fast.get(number as usize).copied().unwrap_or(table.fast_default);
            if fast
                && f.simple & (1 << wire) != 0
                && f.simple & UTF8_BIT == 0
                && (f.simple & UNKNOWN_BIT == 0 || budget > 0)
            {
                let end = r.end();
                if wire & 1 != 0 {
                    // 8 bytes (wire type 1) or 4 (wire type 5).
                    let n = 8usize >> (wire >> 2);
                    if end - r.pos() < n {
                        return Err(met(frame, r.pos(), UNDERFLOW, end));
                    }
                    r.seek(r.pos() + n);
                    continue;
                }
                // A varint, or a length (wire type 2) and its bytes.
                let pos = r.pos();
                let v = r.read_varint().map_err(|_| met(frame, pos, INVALID_VARINT, end))?;
                let len = if wire == 2 { v } else { 0 };
                let start = r.pos();
                if len > (end - start) as u64 {
                    return Err(met(frame, pos, UNDERFLOW, end));
                }
                r.seek(start + len as usize);
                if f.nest != NO_MESSAGE {
                    if budget == 0 {
                        return Err(met(frame, at, "recursion limit reached", end));
                    }
                    let inner = &self.schema.messages[f.nest as usize];
                    if inner.flat && flat_ok(inner, self.buf, start, start + len as usize) {
                        continue;
                    }
                    let mut body = Reader::bounded(self.buf, start..start + len as usize);
                    let child = Frame { parent: Some(frame), message: f.nest, start, span_start: at, via: number };
                    self.message(&mut body, &child, budget - 1)?;
                }
                continue;
            }
            self.field(r, frame, table, number, wire, at, budget)?;
        }
        Ok(())
    }

    /// Reads a key as prost's `decode_key` does.
    #[inline(always)]
    fn key(&self, r: &mut Reader<'b>, frame: &Frame<'_>) -> Result<(u32, u8), Box<Met>> {
        let at = r.pos();
        let key = r.read_varint().map_err(|_| met(frame, at, INVALID_VARINT, r.end()))?;
        if key > u64::from(u32::MAX) {
            return Err(met(frame, at, "invalid key value: over u32::MAX", r.end()));
        }
        let wire = (key & 7) as u8;
        if wire > 5 {
            return Err(met(frame, at, "invalid wire type value (6 or 7)", r.end()));
        }
        if key >> 3 == 0 {
            return Err(met(frame, at, "invalid tag value: 0", r.end()));
        }
        Ok(((key >> 3) as u32, wire))
    }

    /// Checks one field whose key (at `at`) was read: `budget` is the recursion count of the
    /// message it is a field of.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn field(
        &mut self,
        r: &mut Reader<'b>,
        frame: &Frame<'_>,
        table: &MessageTable,
        number: u32,
        wire: u8,
        at: usize,
        budget: u32,
    ) -> Result<(), Box<Met>> {
        let field = table.field(number);
        let end = r.end();
        let wrong = |r: &Reader<'b>| met(frame, r.pos(), "unexpected wire type for the field's type", end);
        match field.kind {
            Kind::Unknown => self.skip(r, frame, number, wire, budget),
            Kind::Varint { repeated } => match wire {
                0 => r.read_varint().map(drop).map_err(|_| met(frame, r.pos(), INVALID_VARINT, end)),
                2 if repeated => {
                    let mut packed = self.len(r, frame)?;
                    while !packed.is_empty() {
                        let pos = packed.pos();
                        packed
                            .read_varint()
                            .map_err(|_| met(frame, pos, "a packed varint runs past its field", end))?;
                    }
                    Ok(())
                }
                _ => Err(wrong(r)),
            },
            Kind::Fixed32 { repeated } => self.fixed(r, frame, wire, 5, 4, repeated),
            Kind::Fixed64 { repeated } => self.fixed(r, frame, wire, 1, 8, repeated),
            Kind::Bytes if wire == 2 => self.len(r, frame).map(drop),
            Kind::Str if wire == 2 => {
                let pos = r.pos();
                let text = self.len(r, frame)?;
                match std::str::from_utf8(text.rest()) {
                    Ok(_) => Ok(()),
                    Err(_) => Err(met(frame, pos, "invalid string value: data is not UTF-8 encoded", end)),
                }
            }
            Kind::Message(m) | Kind::Map(m) if wire == 2 => self.nested(r, frame, m, number, at, budget),
            Kind::Group(m) if wire == 3 => self.group(r, frame, m, number, at, budget),
            Kind::Bytes | Kind::Str | Kind::Message(_) | Kind::Map(_) | Kind::Group(_) => Err(wrong(r)),
        }
    }

    /// A group field of `frame`'s message (its start-group key at `at` read): its fields up to
    /// the end-group key of the same field.
    fn group(
        &mut self,
        r: &mut Reader<'b>,
        frame: &Frame<'_>,
        message: u32,
        number: u32,
        at: usize,
        budget: u32,
    ) -> Result<(), Box<Met>> {
        let end = r.end();
        if budget == 0 {
            return Err(met(frame, at, "recursion limit reached", end));
        }
        let child = Frame { parent: Some(frame), message, start: r.pos(), span_start: at, via: number };
        let inner = &self.schema.messages[message as usize];
        loop {
            let key_at = r.pos();
            let (n, w) = self.key(r, &child)?;
            if w == 4 {
                return if n == number { Ok(()) } else { Err(met(&child, key_at, "unexpected end group tag", end)) };
            }
            self.field(r, &child, inner, n, w, key_at, budget - 1)?;
        }
    }

    /// A fixed-size scalar of `width` bytes (wire type `expected`), or a packed run of them.
    #[inline(always)]
    fn fixed(
        &self,
        r: &mut Reader<'b>,
        frame: &Frame<'_>,
        wire: u8,
        expected: u8,
        width: usize,
        repeated: bool,
    ) -> Result<(), Box<Met>> {
        let end = r.end();
        if wire == expected {
            let pos = r.pos();
            let w = if width == 4 { crate::wire::WireType::Fixed32 } else { crate::wire::WireType::Fixed64 };
            return r.skip(w).map_err(|_| met(frame, pos, UNDERFLOW, end));
        }
        if wire == 2 && repeated {
            let pos = r.pos();
            let packed = self.len(r, frame)?;
            if packed.rest().len() % width != 0 {
                return Err(met(frame, pos, "a packed fixed-size field is not whole values", end));
            }
            return Ok(());
        }
        Err(met(frame, r.pos(), "unexpected wire type for the field's type", end))
    }

    /// A length and the bytes it covers.
    #[inline(always)]
    fn len(&self, r: &mut Reader<'b>, frame: &Frame<'_>) -> Result<Reader<'b>, Box<Met>> {
        let pos = r.pos();
        let end = r.end();
        r.read_message().map_err(|_| {
            // The length itself, or what it covers.
            let mut probe = Reader::bounded(self.buf, pos..end);
            met(frame, pos, if probe.read_varint().is_ok() { UNDERFLOW } else { INVALID_VARINT }, end)
        })
    }

    /// A message (or map entry) field of `frame`'s message: its length, the recursion limit,
    /// its fields.
    fn nested(
        &mut self,
        r: &mut Reader<'b>,
        frame: &Frame<'_>,
        message: u32,
        number: u32,
        at: usize,
        budget: u32,
    ) -> Result<(), Box<Met>> {
        if budget == 0 {
            return Err(met(frame, at, "recursion limit reached", r.end()));
        }
        let mut body = self.len(r, frame)?;
        if frame.parent.is_none() && self.defer == Some(number) {
            let k = self.occurrences;
            self.occurrences += 1;
            (self.deferred)(body.pos()..body.end(), k);
            return Ok(());
        }
        let child = Frame { parent: Some(frame), message, start: body.pos(), span_start: at, via: number };
        self.message(&mut body, &child, budget - 1)
    }

    /// An unknown field, skipped as prost's `skip_field` skips it.
    fn skip(
        &mut self,
        r: &mut Reader<'b>,
        frame: &Frame<'_>,
        number: u32,
        wire: u8,
        budget: u32,
    ) -> Result<(), Box<Met>> {
        let end = r.end();
        if budget == 0 {
            return Err(met(frame, r.pos(), "recursion limit reached", end));
        }
        let pos = r.pos();
        match wire {
            0 => r.read_varint().map(drop).map_err(|_| met(frame, pos, INVALID_VARINT, end)),
            1 => r.skip(crate::wire::WireType::Fixed64).map_err(|_| met(frame, pos, UNDERFLOW, end)),
            5 => r.skip(crate::wire::WireType::Fixed32).map_err(|_| met(frame, pos, UNDERFLOW, end)),
            2 => self.len(r, frame).map(drop),
            3 => loop {
                let key_at = r.pos();
                let (n, w) = self.key(r, frame)?;
                if w == 4 {
                    return if n == number { Ok(()) } else { Err(met(frame, key_at, "unexpected end group tag", end)) };
                }
                self.skip(r, frame, n, w, budget - 1)?;
            },
            _ => Err(met(frame, pos, "unexpected end group tag", end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xspace_schema_builds_from_the_compiled_descriptor() {
        let schema = Schema::from_descriptor_set(XSPACE_DESCRIPTOR).expect("descriptor");
        for name in ["XSpace", "XPlane", "XLine", "XEvent", "XStat", "XEventMetadata", "XStatMetadata"] {
            assert!(schema.message(&format!("tensorflow.profiler.{name}")).is_some(), "{name}");
        }
        let plane = schema.message("tensorflow.profiler.XPlane").unwrap();
        let table = &schema.messages[plane.0 as usize];
        assert!(matches!(table.field(4).kind, Kind::Map(_)), "event_metadata is a map");
        assert!(matches!(table.field(3).kind, Kind::Message(_)), "lines");
        let meta = schema.message("tensorflow.profiler.XEventMetadata").unwrap();
        assert_eq!(schema.messages[meta.0 as usize].field(6).kind, Kind::Varint { repeated: true });
    }
}
