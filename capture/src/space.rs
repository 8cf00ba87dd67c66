//! What a returned trace holds, read without a decoder: whether a serialized XSpace has a
//! single event (a snapshot of a runtime that buffers nothing has none).

/// Whether a serialized XSpace holds at least one trace event (`XSpace.planes[].lines[].events`,
/// fields 1, 3 and 4): a snapshot of a runtime that buffers nothing is a space of metadata
/// planes without one. Bytes that do not parse are taken to hold events (the scan reports them).
pub(crate) fn has_events(space: &[u8]) -> bool {
    let in_field = |message: &[u8], field: u64, found: &mut dyn FnMut(&[u8]) -> bool| -> Option<bool> {
        let mut at = message;
        while !at.is_empty() {
            let key = varint(&mut at)?;
            match key & 7 {
                0 => drop(varint(&mut at)?),
                1 => at = at.get(8..)?,
                5 => at = at.get(4..)?,
                2 => {
                    let len = usize::try_from(varint(&mut at)?).ok()?;
                    let (value, rest) = (at.get(..len)?, at.get(len..)?);
                    if key >> 3 == field && found(value) {
                        return Some(true);
                    }
                    at = rest;
                }
                _ => return None,
            }
        }
        Some(false)
    };
    let any_event = |line: &[u8]| in_field(line, 4, &mut |_| true).unwrap_or(true);
    let any_line = |plane: &[u8]| in_field(plane, 3, &mut |line| any_event(line)).unwrap_or(true);
    in_field(space, 1, &mut |plane| any_line(plane)).unwrap_or(true)
}

/// A protobuf varint from the front of `at`, which moves past it.
fn varint(at: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = at.split_first()?;
        *at = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field's key and length-delimited value.
    fn field(number: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(value.len()).unwrap()];
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn a_space_without_events_has_none() {
        let line = [vec![0x08, 0x01], field(2, b"thread")].concat();
        let plane = [vec![0x08, 0x07], field(2, b"/host:CPU"), field(3, &line)].concat();
        assert!(!has_events(&field(1, &plane)));
        assert!(!has_events(&[]));
        let busy = [line.clone(), field(4, &[0x08, 0x02])].concat();
        let plane = [field(2, b"/host:CPU"), field(3, &busy)].concat();
        assert!(has_events(&[field(1, b""), field(1, &plane)].concat()));
        // Bytes that do not parse are left to the scan.
        assert!(has_events(&[0x0a, 0x7f]));
    }
}
