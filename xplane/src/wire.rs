//! A minimal protobuf wire reader over a byte slice.
//!
//! The hot paths of the decoder (lines, events, stats) read the wire format directly instead of
//! materialising prost structs: that keeps decoding linear in the input size, allocation-free per
//! event, and lets every error carry the absolute byte offset where it happened.
//!
//! Every length read from the input is checked against the bytes that remain before it is used,
//! so no allocation or slice can be driven past the end of the input by a hostile length field.
//!
//! The crates above read the few protobuf messages they meet outside the XSpace (an HLO
//! instruction's fields, a serialized stat) with the same [`Reader`].
//!
//! ```
//! use xlens_xplane::wire::{Reader, WireType};
//! // Field 1 = 150 (varint), field 2 = "hi".
//! let bytes = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i'];
//! let mut r = Reader::new(&bytes);
//! assert_eq!(r.read_tag(), Ok((1, WireType::Varint)));
//! assert_eq!(r.read_varint(), Ok(150));
//! assert_eq!(r.read_tag(), Ok((2, WireType::Len)));
//! assert_eq!(r.read_len(), Ok(&b"hi"[..]));
//! assert!(r.is_empty());
//! ```

/// The wire type of a protobuf field (the low 3 bits of a tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireType {
    /// Varint-encoded integer (`int64`, `uint64`, `bool`, enums).
    Varint,
    /// Eight little-endian bytes (`double`, `fixed64`).
    Fixed64,
    /// Length-prefixed bytes (strings, bytes, nested messages, packed repeated fields).
    Len,
    /// Deprecated group start.
    StartGroup,
    /// Deprecated group end.
    EndGroup,
    /// Four little-endian bytes (`float`, `fixed32`).
    Fixed32,
}

impl WireType {
    fn from_bits(bits: u64) -> Option<Self> {
        Some(match bits {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            _ => return None,
        })
    }

    /// The protobuf name of the wire type, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            WireType::Varint => "varint",
            WireType::Fixed64 => "fixed64",
            WireType::Len => "length-delimited",
            WireType::StartGroup => "start-group",
            WireType::EndGroup => "end-group",
            WireType::Fixed32 => "fixed32",
        }
    }
}

/// What went wrong at the wire level. The caller adds the location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The input ended inside a value.
    Truncated,
    /// A varint ran over 10 bytes.
    VarintOverflow,
    /// A tag had wire type 6 or 7, or field number 0.
    BadTag,
    /// Groups are not used by any message we read.
    Group,
}

impl WireError {
    /// What went wrong, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            WireError::Truncated => "input ends inside a field",
            WireError::VarintOverflow => "varint longer than 10 bytes",
            WireError::BadTag => "invalid field tag",
            WireError::Group => "unsupported group wire type",
        }
    }
}

/// Bytes [`Reader::read_plain_event`] looks at: the longest plain event (29 bytes: key, length,
/// three keys, three eight-byte varints) read as eight-byte words from any of its positions.
const PLAIN_WINDOW: usize = 40;

/// An event read by [`Reader::read_plain_event`]: its three varint fields and where it ends in
/// the reader's buffer (where the stats of a general read would start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlainEvent {
    pub(crate) metadata_id: u64,
    pub(crate) offset: u64,
    pub(crate) duration: u64,
    pub(crate) end: usize,
}

/// The varint at `at` of `window` as the multi-byte fast path reads it: its value, its length
/// and whether it ends within eight bytes. `at` is at most 21 (the third field of a plain event
/// whose first two varints take eight bytes each), well within the window.
#[inline(always)]
fn window_varint(window: &[u8; PLAIN_WINDOW], at: usize) -> (u64, usize, bool) {
    debug_assert!(at <= 21);
    let at = at.min(PLAIN_WINDOW - 8);
    let mut array = [0u8; 8];
    array.copy_from_slice(&window[at..at + 8]);
    let word = u64::from_le_bytes(array);
    let stops = !word & 0x8080_8080_8080_8080;
    // 1..=8 bytes (8 also when no byte ends it: then `ok` is false).
    let len = ((stops.trailing_zeros() + 1) / 8).clamp(1, 8);
    (gather_groups(word, len), len as usize, stops != 0)
}

/// The value of a varint of `len` bytes (1 to 8) at the low end of `word` (little-endian): its
/// 7-bit groups gathered without a per-byte loop.
#[inline(always)]
fn gather_groups(word: u64, len: u32) -> u64 {
    let used = word & (u64::MAX >> (64 - 8 * len));
    let x = used & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// A cursor over a protobuf message body: the bytes `buf[pos..end]`.
///
/// `buf` may extend past `end` (a nested message read with [`Reader::read_message`] keeps its
/// parent's buffer): values never reach past `end`, but the multi-byte varint path may look at
/// the bytes after it, so short messages such as events decode their last varint as fast as
/// the others.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    /// A reader over the whole of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0, end: buf.len() }
    }

    /// A reader over `buf[range]` that may look at, but never read, the bytes around it.
    /// Positions stay relative to `buf`. A range outside `buf` is clamped to it.
    #[inline]
    pub(crate) fn bounded(buf: &'a [u8], range: std::ops::Range<usize>) -> Self {
        let end = range.end.min(buf.len());
        Reader { buf, pos: range.start.min(end), end }
    }

    /// Position in this reader's buffer (for a reader from [`Reader::read_message`], the
    /// parent's buffer).
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Moves forward to `pos`, a position in this reader's buffer at most its end.
    #[inline]
    pub(crate) fn seek(&mut self, pos: usize) {
        debug_assert!(self.pos <= pos && pos <= self.end);
        self.pos = pos.clamp(self.pos, self.end);
    }

    /// Moves back to `pos`, a position this reader has passed (its start or later).
    #[inline]
    pub(crate) fn rewind(&mut self, pos: usize) {
        debug_assert!(pos <= self.pos);
        self.pos = pos.min(self.pos);
    }

    /// Where this reader stops, in its buffer.
    #[inline]
    pub(crate) fn end(&self) -> usize {
        self.end
    }

    /// Whether every byte up to the end has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.end
    }

    /// The bytes not yet read.
    #[inline]
    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..self.end]
    }

    /// Consumes the next byte when it equals `byte` (a one-byte tag key), for decoders that try
    /// the usual field order before falling back to a general loop.
    #[inline(always)]
    pub(crate) fn eat(&mut self, byte: u8) -> bool {
        if self.pos < self.end && self.buf.get(self.pos) == Some(&byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Reads a varint of at most ten bytes whose value fits 64 bits.
    #[inline(always)]
    pub fn read_varint(&mut self) -> Result<u64, WireError> {
        // Fast path: one byte (ids, small offsets, tags).
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 && self.pos < self.end => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.read_varint_slow(),
        }
    }

    #[inline]
    fn read_varint_slow(&mut self) -> Result<u64, WireError> {
        // Multi-byte fast path: with eight bytes at hand, find the terminating byte and gather
        // the 7-bit groups without a per-byte loop (varints of 2..=8 bytes: offsets, durations).
        if let Some(chunk) = self.buf.get(self.pos..self.pos + 8) {
            let mut array = [0u8; 8];
            array.copy_from_slice(chunk);
            let word = u64::from_le_bytes(array);
            let stops = !word & 0x8080_8080_8080_8080;
            let len = (stops.trailing_zeros() + 1) / 8;
            if stops != 0 && self.pos + len as usize <= self.end {
                self.pos += len as usize;
                return Ok(gather_groups(word, len));
            }
        }
        self.read_varint_bytewise()
    }

    /// Reads the next field when it is the commonest shape of a stat in an event: field 4 with
    /// a one-byte key and length, whose body starts with a one-byte metadata id (key 0x08). Returns
    /// that id and a reader over the whole body (the id included), having moved past the field;
    /// `None`, reading nothing, for anything else (the general decode then reads the field).
    ///
    /// One four-byte look decides, so that the stats an event walk skips (most of a GPU
    /// kernel's dozen) cost a compare and a jump, not a key, a length and an id read in turn.
    #[inline(always)]
    pub(crate) fn read_small_stat(&mut self) -> Option<(u8, Reader<'a>)> {
        self.read_small_stat_of(0x22)
    }

    /// [`Reader::read_small_stat`] for stats under the one-byte key `stat_key` (0x22 in events,
    /// 0x2a in metadata).
    #[inline(always)]
    pub(crate) fn read_small_stat_of(&mut self, stat_key: u8) -> Option<(u8, Reader<'a>)> {
        let &[key, len, id_key, id] = self.buf.get(self.pos..self.pos + 4)?.first_chunk::<4>()?;
        let len = usize::from(len);
        // A length of at least two keeps the id inside the body; within this reader's end.
        let ok = (key == stat_key) & (2..0x80).contains(&len) & (id_key == 0x08) & (id < 0x80);
        if !ok || len + 2 > self.end.saturating_sub(self.pos) {
            return None;
        }
        let start = self.pos + 2;
        self.pos = start + len;
        Some((id, Reader { buf: self.buf, pos: start, end: self.pos }))
    }

    /// Reads the next field when it is the commonest shape of an event: field 4 (one-byte key
    /// and length) holding exactly fields 1, 2 and 3 in that order, each a varint of at most
    /// eight bytes, and nothing else (no stats, no occurrences). Returns `None`, reading
    /// nothing, for anything else, and within 40 bytes of the buffer's end (then the general
    /// decode reads the field).
    ///
    /// Events of this shape are most of a TPU op line. Every check is done on a 40-byte window
    /// from the current position, without a branch per field: one test at the end decides.
    #[inline(always)]
    pub(crate) fn read_plain_event(&mut self) -> Option<PlainEvent> {
        self.read_plain_of(0x22)
    }

    /// [`Reader::read_plain_event`] for a field whose key is the one byte `key` (0x22 for
    /// events): the strict check reads a message of three varint fields so, whatever holds it.
    #[inline(always)]
    pub(crate) fn read_plain_of(&mut self, key: u8) -> Option<PlainEvent> {
        let window: &[u8; PLAIN_WINDOW] = self.buf.get(self.pos..self.pos + PLAIN_WINDOW)?.try_into().ok()?;
        let len = usize::from(window[1]);
        // Key 0x08 at 2, its varint at 3; key 0x10 after it, then its varint; the same for 0x18.
        let (metadata_id, a, ok_a) = window_varint(window, 3);
        let key_b = 3 + a;
        let (offset, b, ok_b) = window_varint(window, key_b + 1);
        let key_c = key_b + 1 + b;
        let (duration, c, ok_c) = window_varint(window, key_c + 1);
        let body_end = key_c + 1 + c;
        let ok = (window[0] == key)
            & (len == body_end - 2)
            & (window[2] == 0x08)
            & (window[key_b.min(PLAIN_WINDOW - 1)] == 0x10)
            & (window[key_c.min(PLAIN_WINDOW - 1)] == 0x18)
            & ok_a
            & ok_b
            & ok_c
            // Parsing the plane checked that every event fits its line: this holds already.
            & (self.pos + body_end <= self.end);
        if !ok {
            return None;
        }
        // The next event's position from the length byte alone (equal to `body_end` here), so
        // the next decode need not wait for this one's fields.
        self.pos += 2 + len;
        Some(PlainEvent { metadata_id, offset, duration, end: self.pos })
    }

    /// Skips a run of length-delimited fields whose key is the one byte `key` and whose length
    /// is one byte (under 128), each wholly before the end; calls `each` with each field's
    /// position, its index in the run and its value, and returns how many it skipped. Stops, reading
    /// nothing more, at the first field that is not such (another key, a longer length, one
    /// that runs past the end), which the caller then reads the general way.
    #[inline]
    pub(crate) fn skip_short_run(&mut self, key: u8, mut each: impl FnMut(usize, usize, &'a [u8])) -> usize {
        let buf: &'a [u8] = &self.buf[..self.end];
        let (mut pos, mut count) = (self.pos, 0);
        while let (Some(&k), Some(&len)) = (buf.get(pos), buf.get(pos + 1)) {
            let next = pos + 2 + usize::from(len);
            if k != key || len >= 0x80 || next > buf.len() {
                break;
            }
            each(pos, count, &buf[pos + 2..next]);
            count += 1;
            pos = next;
        }
        self.pos = pos;
        count
    }

    /// The general case: byte by byte, near the end of the buffer or for 9- and 10-byte varints.
    #[cold]
    #[inline(never)]
    fn read_varint_bytewise(&mut self) -> Result<u64, WireError> {
        let buf = &self.buf[..self.end];
        let mut pos = self.pos;
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = buf.get(pos) else {
                return Err(WireError::Truncated);
            };
            pos += 1;
            if shift == 63 && b > 1 {
                return Err(WireError::VarintOverflow);
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                self.pos = pos;
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(WireError::VarintOverflow);
            }
        }
    }

    /// Reads a field tag: `(field number, wire type)`.
    #[inline]
    pub fn read_tag(&mut self) -> Result<(u32, WireType), WireError> {
        split_tag(self.read_varint()?)
    }

    /// Reads a length-delimited value and returns its bytes (a sub-slice, never a copy).
    #[inline]
    pub fn read_len(&mut self) -> Result<&'a [u8], WireError> {
        let message = self.read_message()?;
        Ok(message.rest())
    }

    /// Reads a length-delimited value as a reader over it, sharing this reader's buffer (so
    /// positions stay relative to it).
    #[inline]
    pub fn read_message(&mut self) -> Result<Reader<'a>, WireError> {
        let len = self.read_varint()?;
        let remaining = self.end - self.pos;
        if len > remaining as u64 {
            return Err(WireError::Truncated);
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(Reader { buf: self.buf, pos: start, end: self.pos })
    }

    #[inline]
    pub(crate) fn read_fixed64(&mut self) -> Result<u64, WireError> {
        let end = self.pos.checked_add(8).ok_or(WireError::Truncated)?;
        let bytes = self.buf[..self.end].get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(array))
    }

    #[inline]
    fn skip_n(&mut self, n: usize) -> Result<(), WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        if end > self.end {
            return Err(WireError::Truncated);
        }
        self.pos = end;
        Ok(())
    }

    /// Skips a value of the given wire type.
    #[inline]
    pub fn skip(&mut self, wire: WireType) -> Result<(), WireError> {
        match wire {
            WireType::Varint => self.read_varint().map(drop),
            WireType::Fixed64 => self.skip_n(8),
            WireType::Len => self.read_len().map(drop),
            WireType::Fixed32 => self.skip_n(4),
            WireType::StartGroup | WireType::EndGroup => Err(WireError::Group),
        }
    }
}

/// Splits a tag's key into `(field number, wire type)`.
///
/// Hot decoders match the whole key first (`0x08` is field 1 as a varint) and only split the
/// keys they do not expect.
#[inline]
pub(crate) fn split_tag(key: u64) -> Result<(u32, WireType), WireError> {
    let field = key >> 3;
    if field == 0 || field > u64::from(u32::MAX >> 3) {
        return Err(WireError::BadTag);
    }
    let wire = WireType::from_bits(key & 7).ok_or(WireError::BadTag)?;
    Ok((field as u32, wire))
}

/// Reads every value of a `repeated int64` field occurrence, packed or not, into `out`.
///
/// `wire` is the wire type the occurrence was sent with: `Len` for packed, `Varint` for one value.
pub(crate) fn read_repeated_int64(
    reader: &mut Reader<'_>,
    wire: WireType,
    out: &mut Vec<i64>,
) -> Result<(), WireError> {
    match wire {
        WireType::Varint => {
            out.push(reader.read_varint()? as i64);
            Ok(())
        }
        WireType::Len => {
            let packed = reader.read_len()?;
            let mut inner = Reader::new(packed);
            while !inner.is_empty() {
                out.push(inner.read_varint()? as i64);
            }
            Ok(())
        }
        _ => Err(WireError::BadTag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint_bytes(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    #[test]
    fn varints_round_trip_at_every_width() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX, (-1i64) as u64] {
            let bytes = varint_bytes(v);
            let mut r = Reader::new(&bytes);
            assert_eq!(r.read_varint(), Ok(v));
            assert!(r.is_empty());
        }
    }

    #[test]
    fn word_and_bytewise_varint_paths_agree() {
        // Every width from 1 to 10 bytes, read with trailing padding (the eight-byte path) and
        // at the very end of the buffer (the byte-by-byte path).
        let mut values = vec![0u64, 1, 0x7f, 0x80, 0x3fff, 0x4000, u64::MAX, 1 << 63];
        for bits in 1..64 {
            values.push((1u64 << bits) - 1);
            values.push(1u64 << bits);
            values.push(0x5555_5555_5555_5555 & ((1u64 << bits) - 1));
        }
        for v in values {
            let bytes = varint_bytes(v);
            let mut padded = bytes.clone();
            padded.extend_from_slice(&[0xff; 12]);
            let mut r = Reader::new(&padded);
            assert_eq!(r.read_varint(), Ok(v), "{v:#x} padded");
            assert_eq!(r.pos(), bytes.len());
            let mut r = Reader::new(&bytes);
            assert_eq!(r.read_varint(), Ok(v), "{v:#x} at end");
            assert!(r.is_empty());
        }
    }

    #[test]
    fn nested_readers_stop_at_their_end() {
        // A message [varint 300] followed by bytes that would extend the varint if read on.
        let mut bytes = vec![0x02, 0xac, 0x82];
        bytes.extend_from_slice(&[0x80; 12]);
        let mut outer = Reader::new(&bytes);
        let mut inner = outer.read_message().unwrap();
        assert_eq!(outer.pos(), 3);
        assert_eq!(inner.rest(), &[0xac, 0x82]);
        assert_eq!(inner.read_varint(), Err(WireError::Truncated));
        let bytes = [0x02, 0xac, 0x02, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01];
        let mut inner = Reader::new(&bytes).read_message().unwrap();
        assert_eq!(inner.read_varint(), Ok(300));
        assert!(inner.is_empty());
        assert_eq!(inner.read_varint(), Err(WireError::Truncated));
        let bytes = [0x01, 0x05, 0x07];
        let mut inner = Reader::new(&bytes).read_message().unwrap();
        assert_eq!(inner.read_varint(), Ok(5));
        assert_eq!(inner.read_fixed64(), Err(WireError::Truncated));
        assert_eq!(inner.skip(WireType::Fixed32), Err(WireError::Truncated));
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        let mut r = Reader::new(&[0xff; 11]);
        assert_eq!(r.read_varint(), Err(WireError::VarintOverflow));
        let mut r = Reader::new(&[0x80, 0x80]);
        assert_eq!(r.read_varint(), Err(WireError::Truncated));
        // Tenth byte may only carry the top bit.
        let mut bytes = vec![0xff; 9];
        bytes.push(0x02);
        assert_eq!(Reader::new(&bytes).read_varint(), Err(WireError::VarintOverflow));
    }

    #[test]
    fn length_beyond_input_is_truncation_not_allocation() {
        // Claims 2^62 bytes follow.
        let mut bytes = varint_bytes(1 << 62);
        bytes.push(0);
        assert_eq!(Reader::new(&bytes).read_len(), Err(WireError::Truncated));
    }

    #[test]
    fn bad_tags_are_rejected() {
        assert_eq!(Reader::new(&[0x00]).read_tag(), Err(WireError::BadTag));
        assert_eq!(Reader::new(&[0x0e]).read_tag(), Err(WireError::BadTag));
        assert_eq!(Reader::new(&[0x0a]).read_tag(), Ok((1, WireType::Len)));
    }

    #[test]
    fn a_small_stat_is_read_only_whole_and_inside_its_reader() {
        // A stat of id 5 and a ref value, then one byte of something else.
        let bytes = [0x22, 0x04, 0x08, 0x05, 0x38, 0x07, 0x99];
        let mut r = Reader::new(&bytes);
        let (id, body) = r.read_small_stat().expect("the usual shape");
        assert_eq!((id, body.pos(), body.end(), r.pos()), (5, 2, 6, 6));
        // Too few bytes left for a look, and a length past the reader's end: nothing is read.
        assert!(r.read_small_stat().is_none());
        let mut short = Reader::bounded(&bytes, 0..5);
        assert!(short.read_small_stat().is_none());
        assert_eq!(short.pos(), 0);
        // A body of one byte (its id would lie past it), a two-byte length, a two-byte id, a
        // body without an id first, another field: the general decode's.
        for odd in [
            [0x22, 0x01, 0x08, 0x05, 0x00, 0x00],
            [0x22, 0x84, 0x08, 0x05, 0x00, 0x00],
            [0x22, 0x04, 0x08, 0x85, 0x01, 0x38],
            [0x22, 0x04, 0x38, 0x05, 0x08, 0x01],
            [0x2a, 0x04, 0x08, 0x05, 0x38, 0x07],
        ] {
            let mut r = Reader::new(&odd);
            assert!(r.read_small_stat().is_none(), "{odd:?}");
            assert_eq!(r.pos(), 0);
        }
    }
}
