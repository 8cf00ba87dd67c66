//! A minimal protobuf wire reader over a byte slice.
//!
//! The hot paths of the decoder (lines, events, stats) read the wire format directly instead of
//! materialising prost structs: that keeps decoding linear in the input size, allocation-free per
//! event, and lets every error carry the absolute byte offset where it happened.
//!
//! Every length read from the input is checked against the bytes that remain before it is used,
//! so no allocation or slice can be driven past the end of the input by a hostile length field.

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
pub(crate) enum WireError {
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
    pub(crate) fn describe(self) -> &'static str {
        match self {
            WireError::Truncated => "input ends inside a field",
            WireError::VarintOverflow => "varint longer than 10 bytes",
            WireError::BadTag => "invalid field tag",
            WireError::Group => "unsupported group wire type",
        }
    }
}

/// A cursor over a protobuf message body.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far, relative to the start of this reader's buffer.
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline(always)]
    pub(crate) fn read_varint(&mut self) -> Result<u64, WireError> {
        // Fast path: one byte (ids, small offsets, tags).
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.read_varint_slow(),
        }
    }

    #[inline(never)]
    fn read_varint_slow(&mut self) -> Result<u64, WireError> {
        let buf = self.buf;
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
    pub(crate) fn read_tag(&mut self) -> Result<(u32, WireType), WireError> {
        let key = self.read_varint()?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(WireError::BadTag);
        }
        let wire = WireType::from_bits(key & 7).ok_or(WireError::BadTag)?;
        Ok((field as u32, wire))
    }

    /// Reads a length-delimited value and returns its bytes (a sub-slice, never a copy).
    #[inline]
    pub(crate) fn read_len(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.read_varint()?;
        let remaining = self.buf.len() - self.pos;
        if len > remaining as u64 {
            return Err(WireError::Truncated);
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.buf[start..self.pos])
    }

    #[inline]
    pub(crate) fn read_fixed64(&mut self) -> Result<u64, WireError> {
        let end = self.pos.checked_add(8).ok_or(WireError::Truncated)?;
        let bytes = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(array))
    }

    #[inline]
    fn skip_n(&mut self, n: usize) -> Result<(), WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        if end > self.buf.len() {
            return Err(WireError::Truncated);
        }
        self.pos = end;
        Ok(())
    }

    /// Skips a value of the given wire type.
    #[inline]
    pub(crate) fn skip(&mut self, wire: WireType) -> Result<(), WireError> {
        match wire {
            WireType::Varint => self.read_varint().map(drop),
            WireType::Fixed64 => self.skip_n(8),
            WireType::Len => self.read_len().map(drop),
            WireType::Fixed32 => self.skip_n(4),
            WireType::StartGroup | WireType::EndGroup => Err(WireError::Group),
        }
    }
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
}
