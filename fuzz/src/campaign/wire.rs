//! The wire structure of an XSpace, parsed once per capture for the mutator: every field with
//! where its tag, length prefix and value lie, which message holds it, and what it holds.
//!
//! The parse knows the XSpace schema (`xplane/proto/xplane.proto`): which fields are messages,
//! strings, packed ids or scalars. The `metadata` bytes of an event metadata entry (an `HloProto`
//! on `/host:metadata`) and `bytes_value` stats have no schema here: they are parsed as messages
//! when their bytes parse as one ([`Schema::Guess`]), so mutations reach inside embedded protos.

/// What a message is, by the XSpace schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Schema {
    /// `XSpace`, the whole file.
    Space,
    /// `XPlane`.
    Plane,
    /// `XLine`.
    Line,
    /// `XEvent`.
    Event,
    /// `XStat` (of an event, a plane or an event metadata entry).
    Stat,
    /// A map entry of `XPlane.event_metadata` (key, `XEventMetadata`).
    EventMetadataEntry,
    /// A map entry of `XPlane.stat_metadata` (key, `XStatMetadata`).
    StatMetadataEntry,
    /// `XEventMetadata`.
    EventMetadata,
    /// `XStatMetadata`.
    StatMetadata,
    /// Bytes with no schema here that parse as a message (an embedded `HloProto`, a bytes stat).
    Guess,
}

impl Schema {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Schema::Space => "XSpace",
            Schema::Plane => "XPlane",
            Schema::Line => "XLine",
            Schema::Event => "XEvent",
            Schema::Stat => "XStat",
            Schema::EventMetadataEntry => "event_metadata entry",
            Schema::StatMetadataEntry => "stat_metadata entry",
            Schema::EventMetadata => "XEventMetadata",
            Schema::StatMetadata => "XStatMetadata",
            Schema::Guess => "embedded proto",
        }
    }

    /// What field `number` of this message holds, when it is length-delimited.
    fn child(self, number: u64) -> Payload {
        use Payload::{Bytes, Message, Packed, Text};
        match (self, number) {
            (Schema::Space, 1) => Message(Schema::Plane),
            (Schema::Space, 2..=4) => Text,
            (Schema::Plane, 2) => Text,
            (Schema::Plane, 3) => Message(Schema::Line),
            (Schema::Plane, 4) => Message(Schema::EventMetadataEntry),
            (Schema::Plane, 5) => Message(Schema::StatMetadataEntry),
            (Schema::Plane, 6) => Message(Schema::Stat),
            (Schema::Line, 2 | 11) => Text,
            (Schema::Line, 4) => Message(Schema::Event),
            (Schema::Event, 4) => Message(Schema::Stat),
            (Schema::Stat, 5) => Text,
            (Schema::Stat, 6) => Bytes,
            (Schema::EventMetadataEntry, 2) => Message(Schema::EventMetadata),
            (Schema::StatMetadataEntry, 2) => Message(Schema::StatMetadata),
            (Schema::EventMetadata, 2 | 4) => Text,
            (Schema::EventMetadata, 3) => Bytes,
            (Schema::EventMetadata, 5) => Message(Schema::Stat),
            (Schema::EventMetadata, 6) => Packed,
            (Schema::StatMetadata, 2 | 3) => Text,
            _ => Bytes,
        }
    }
}

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// A varint (wire type 0).
    Varint,
    /// Eight bytes (wire type 1).
    Fixed64,
    /// Four bytes (wire type 5).
    Fixed32,
    /// A message of this schema (wire type 2).
    Message(Schema),
    /// A string (wire type 2).
    Text,
    /// Packed varints (wire type 2: `child_id`).
    Packed,
    /// Bytes with no structure found (wire type 2).
    Bytes,
}

/// One field of the file.
#[derive(Clone, Debug)]
pub struct Field {
    /// Where its tag starts.
    pub start: usize,
    /// Where its value starts (after the tag and any length prefix).
    pub value: usize,
    /// Where it ends.
    pub end: usize,
    /// Where its length prefix starts (wire type 2), else `value`.
    pub prefix: usize,
    /// Its field number.
    pub number: u64,
    /// Its wire type.
    pub wire: u8,
    /// What it holds.
    pub payload: Payload,
    /// The message that holds it.
    pub parent: Schema,
    /// The field (a message) that encloses it, by index into [`Structure::fields`]; `None` at
    /// the top level.
    pub enclosing: Option<usize>,
}

impl Field {
    /// Whether the field is length-delimited.
    pub fn delimited(&self) -> bool {
        self.wire == 2
    }
}

/// The fields of a capture, in file order (a message before the fields inside it).
#[derive(Clone, Debug, Default)]
pub struct Structure {
    /// Every field found.
    pub fields: Vec<Field>,
}

/// The deepest nesting followed (XSpace itself nests 5 deep; HLO a few more).
const MAX_DEPTH: usize = 24;

/// The smallest bytes field tried as an embedded message.
const MIN_GUESS_BYTES: usize = 2;

impl Structure {
    /// Parses `data` as an XSpace; stops at the first field that does not parse (a capture is
    /// valid, so that happens only on an input that is already broken).
    pub fn parse(data: &[u8]) -> Structure {
        let mut s = Structure::default();
        s.message(data, 0, data.len(), Schema::Space, None, 0);
        s
    }

    /// The fields inside the message or bytes of field `i` (its descendants), as an index range.
    pub fn descendants(&self, i: usize) -> std::ops::Range<usize> {
        let end = self.fields[i].end;
        let mut j = i + 1;
        while j < self.fields.len() && self.fields[j].start < end {
            j += 1;
        }
        i + 1..j
    }

    /// The chain of enclosing fields of field `i`, innermost first (`i` itself not included).
    pub fn ancestors(&self, i: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = self.fields[i].enclosing;
        while let Some(a) = at {
            out.push(a);
            at = self.fields[a].enclosing;
        }
        out
    }

    /// Parses the fields of `data[from..to]` as a message of `schema`; returns whether they all
    /// parsed (for [`Schema::Guess`], whether the bytes are a message at all).
    fn message(
        &mut self,
        data: &[u8],
        from: usize,
        to: usize,
        schema: Schema,
        enclosing: Option<usize>,
        depth: usize,
    ) -> bool {
        let mark = self.fields.len();
        let mut at = from;
        while at < to {
            let start = at;
            let Some((tag, n)) = varint(&data[at..to]) else { return self.fail(mark, schema) };
            at += n;
            let (number, wire) = (tag >> 3, (tag & 7) as u8);
            if number == 0 {
                return self.fail(mark, schema);
            }
            let prefix = at;
            let (payload, value, end) = match wire {
                0 => match varint(&data[at..to]) {
                    Some((_, n)) => (Payload::Varint, at, at + n),
                    None => return self.fail(mark, schema),
                },
                1 if to - at >= 8 => (Payload::Fixed64, at, at + 8),
                5 if to - at >= 4 => (Payload::Fixed32, at, at + 4),
                2 => {
                    let Some((len, n)) = varint(&data[at..to]) else { return self.fail(mark, schema) };
                    let value = at + n;
                    if len > (to - value) as u64 {
                        return self.fail(mark, schema);
                    }
                    (schema.child(number), value, value + len as usize)
                }
                _ => return self.fail(mark, schema),
            };
            let index = self.fields.len();
            self.fields.push(Field { start, value, end, prefix, number, wire, payload, parent: schema, enclosing });
            if depth < MAX_DEPTH {
                match payload {
                    Payload::Message(child) => {
                        self.message(data, value, end, child, Some(index), depth + 1);
                    }
                    Payload::Bytes
                        if end - value >= MIN_GUESS_BYTES
                            && self.message(data, value, end, Schema::Guess, Some(index), depth + 1) =>
                    {
                        self.fields[index].payload = Payload::Message(Schema::Guess);
                    }
                    _ => {}
                }
            }
            at = end;
        }
        true
    }

    /// A message that did not parse: a guess leaves nothing behind; a known message keeps the
    /// fields before the break.
    fn fail(&mut self, mark: usize, schema: Schema) -> bool {
        if schema == Schema::Guess {
            self.fields.truncate(mark);
        }
        false
    }
}

/// A varint at the start of `data`: its value and length; `None` when cut short or longer than
/// ten bytes.
pub fn varint(data: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in data.iter().take(10).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::MAX, 1 << 63] {
            let bytes = xlens_testkit::splice::encode_varint(v);
            assert_eq!(varint(&bytes), Some((v, bytes.len())));
        }
        assert_eq!(varint(&[0x80]), None);
    }

    #[test]
    fn parses_nested_schema() {
        // XSpace { planes: XPlane { name: "ab", stats: XStat { metadata_id: 1, int64_value: 2 } } }
        let stat = [0x08, 0x01, 0x20, 0x02];
        let mut plane = vec![0x12, 0x02, b'a', b'b', 0x32, stat.len() as u8];
        plane.extend(stat);
        let mut space = vec![0x0a, plane.len() as u8];
        space.extend(&plane);
        let s = Structure::parse(&space);
        let kinds: Vec<_> = s.fields.iter().map(|f| (f.parent, f.number)).collect();
        assert_eq!(
            kinds,
            [(Schema::Space, 1), (Schema::Plane, 2), (Schema::Plane, 6), (Schema::Stat, 1), (Schema::Stat, 4)]
        );
        assert_eq!(s.ancestors(4), [2, 0]);
        assert_eq!(s.descendants(2), 3..5);
        assert_eq!(s.fields[2].payload, Payload::Message(Schema::Stat));
    }
}
