//! Byte edits of protobuf messages that keep their framing: bytes inserted deep inside a nested
//! field, with the length prefix of every field around them re-encoded. For tests that corrupt
//! one entry of a real capture and leave the rest of it intact.
//!
//! ```
//! use xlens_testkit::splice::{insert, stats};
//! use xlens_xplane::{Space, SpaceBuilder};
//! let mut b = SpaceBuilder::default();
//! {
//!     let mut plane = b.plane(1, "/device:GPU:0");
//!     let cores = plane.stat_metadata("core_count");
//!     plane.stat(cores, 132i64);
//! }
//! let bytes = b.finish();
//! let stat = &stats(&bytes).unwrap()[0];
//! // A field of wire type 7 (there is none) appended inside the stat.
//! let bad = insert(&bytes, stat, stat.last().unwrap().body.end, &[0x0f]);
//! let space = Space::parse(bad.into()).unwrap();
//! assert!(space.planes()[0].stats().next().unwrap().is_err());
//! ```

use std::ops::Range;

use xlens_xplane::wire::{Reader, WireType};

/// A length-delimited field of a message, by its positions in the whole buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LenField {
    /// The field number.
    pub number: u32,
    /// Where its length prefix starts.
    pub len_at: usize,
    /// Its body.
    pub body: Range<usize>,
}

/// The length-delimited fields of the message `buf[range]`, in order; `None` when the message
/// does not parse as protobuf.
pub fn len_fields(buf: &[u8], range: Range<usize>) -> Option<Vec<LenField>> {
    let base = range.start;
    let mut r = Reader::new(buf.get(range)?);
    let mut out = Vec::new();
    while !r.is_empty() {
        let (number, wire) = r.read_tag().ok()?;
        if wire == WireType::Len {
            let len_at = base + r.pos();
            let body = r.read_len().ok()?;
            let end = base + r.pos();
            out.push(LenField { number, len_at, body: end - body.len()..end });
        } else {
            r.skip(wire).ok()?;
        }
    }
    Some(out)
}

/// The fields numbered `number` of the message `buf[range]`.
fn fields(buf: &[u8], range: Range<usize>, number: u32) -> Option<Vec<LenField>> {
    Some(len_fields(buf, range)?.into_iter().filter(|f| f.number == number).collect())
}

/// `buf` with `bytes` inserted at `at`, inside the nested fields `path` (outermost first, each
/// inside the one before it, all holding `at`, which may be a body's end): their length
/// prefixes are re-encoded for the new lengths.
pub fn insert(buf: &[u8], path: &[LenField], at: usize, bytes: &[u8]) -> Vec<u8> {
    replace(buf, path, at..at, bytes)
}

/// `buf` with `buf[range]` replaced by `with`, inside the nested fields `path` (outermost first,
/// each inside the one before it, all holding `range`): their length prefixes are re-encoded
/// for the new lengths (a body cut below nothing reads as empty).
pub fn replace(buf: &[u8], path: &[LenField], range: Range<usize>, with: &[u8]) -> Vec<u8> {
    // (start, end, replacement). Innermost first: a body grows by the edit and by every prefix
    // inside it that grew a byte (127 to 128 takes two).
    let mut delta = with.len() as i64 - range.len() as i64;
    let mut edits: Vec<(usize, usize, Vec<u8>)> = Vec::with_capacity(path.len() + 1);
    for f in path.iter().rev() {
        assert!(f.body.start <= range.start && range.end <= f.body.end, "{range:?} is outside field {f:?}");
        let prefix = encode_varint((f.body.len() as i64 + delta).max(0) as u64);
        delta += prefix.len() as i64 - (f.body.start - f.len_at) as i64;
        edits.push((f.len_at, f.body.start, prefix));
    }
    edits.push((range.start, range.end, with.to_vec()));
    // In position order: each length prefix comes before the body holding the next one.
    edits.sort_by_key(|e| (e.0, e.1));
    let mut out = Vec::with_capacity(buf.len() + with.len() + path.len());
    let mut from = 0;
    for (start, end, with) in edits {
        out.extend_from_slice(&buf[from..start]);
        out.extend_from_slice(&with);
        from = end;
    }
    out.extend_from_slice(&buf[from..]);
    out
}

/// `v` as a protobuf varint.
pub fn encode_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// Every stat of an XSpace, as the path of fields that holds it (outermost first, the stat
/// last): the planes' own stats, the stats of their event-metadata entries and of their events,
/// in file order within each plane. `None` when the bytes do not parse.
pub fn stats(buf: &[u8]) -> Option<Vec<Vec<LenField>>> {
    let mut out = Vec::new();
    for plane in fields(buf, 0..buf.len(), 1)? {
        for f in len_fields(buf, plane.body.clone())? {
            match f.number {
                // XPlane.stats
                6 => out.push(vec![plane.clone(), f]),
                // XPlane.event_metadata: a map entry, its value (2), its stats (5).
                4 => {
                    for value in fields(buf, f.body.clone(), 2)? {
                        for stat in fields(buf, value.body.clone(), 5)? {
                            out.push(vec![plane.clone(), f.clone(), value.clone(), stat]);
                        }
                    }
                }
                // XPlane.lines: their events (4), their stats (4).
                3 => {
                    for event in fields(buf, f.body.clone(), 4)? {
                        for stat in fields(buf, event.body.clone(), 4)? {
                            out.push(vec![plane.clone(), f.clone(), event.clone(), stat]);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that grows from 127 to 128 bytes takes a two-byte prefix, and the message around
    /// it grows by that byte too.
    #[test]
    fn an_inner_prefix_that_grows_grows_the_outer_body() {
        // Outer field 1 holding inner field 2 of 127 bytes.
        let inner: Vec<u8> = [vec![0x12, 127], vec![0u8; 127]].concat();
        let buf: Vec<u8> = [vec![0x0a], encode_varint(inner.len() as u64), inner].concat();
        let outer = &len_fields(&buf, 0..buf.len()).unwrap()[0];
        let inner = &len_fields(&buf, outer.body.clone()).unwrap()[0];
        let out = insert(&buf, &[outer.clone(), inner.clone()], inner.body.end, &[1]);
        let outer2 = &len_fields(&out, 0..out.len()).unwrap()[0];
        assert_eq!(outer2.body.end, out.len(), "the outer length covers the grown prefix");
        let inner2 = &len_fields(&out, outer2.body.clone()).unwrap()[0];
        assert_eq!(inner2.body.len(), 128);
    }
}
