//! One protobuf-aware mutation of a capture: an edit of one field, with the length prefixes of
//! every message around it fixed up, so that the damage stays where it was made (a malformed
//! stat inside a well-formed event inside a well-formed line …) instead of breaking the file at
//! the top.

use super::wire::{Field, Payload, Schema, Structure, varint};
use crate::Rng;
use xlens_testkit::splice::{LenField, encode_varint, replace};

/// The kinds of mutation, one per case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mutation {
    /// One bit of the file flipped (no fix-up: it may land in a tag, a length or a value).
    BitFlip,
    /// A varint field's value replaced (0, 1, max, ±1, huge, negative); lengths fixed up.
    Varint,
    /// A length prefix changed (0, ±1, doubled, huge); only the prefix's own size is fixed up
    /// around it, so the field lies about its length inside a consistent message.
    Length,
    /// A field written twice in a row; lengths fixed up.
    Duplicate,
    /// A field removed; lengths fixed up.
    Delete,
    /// A field's wire type changed in its tag; lengths fixed up.
    WireType,
    /// A byte that is no field (`0x0f`: field 1, wire type 7; a group end; a bare tag) appended
    /// inside a message; lengths fixed up.
    Junk,
    /// The content of a message cut at a point inside it; lengths fixed up, so the message is
    /// malformed inside a well-formed parent.
    CutInside,
    /// The file truncated at a field boundary (a tag, a value or a field's end).
    Truncate,
}

impl Mutation {
    /// Every kind, in the order the summary lists them.
    pub const ALL: [Mutation; 9] = [
        Mutation::BitFlip,
        Mutation::Varint,
        Mutation::Length,
        Mutation::Duplicate,
        Mutation::Delete,
        Mutation::WireType,
        Mutation::Junk,
        Mutation::CutInside,
        Mutation::Truncate,
    ];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::BitFlip => "bit_flip",
            Mutation::Varint => "varint",
            Mutation::Length => "length",
            Mutation::Duplicate => "duplicate",
            Mutation::Delete => "delete",
            Mutation::WireType => "wire_type",
            Mutation::Junk => "junk",
            Mutation::CutInside => "cut_inside",
            Mutation::Truncate => "truncate",
        }
    }
}

/// What one mutation did, for the report of a case.
#[derive(Clone, Debug)]
pub struct Mutant {
    /// The mutated bytes.
    pub bytes: Vec<u8>,
    /// The kind.
    pub mutation: Mutation,
    /// The message the edited field belongs to (`None` for a bit flip or a truncation between
    /// top-level fields).
    pub target: Option<Schema>,
    /// One line: what was done where.
    pub detail: String,
}

/// Applies one mutation of a kind drawn from `rng` to `data`, whose wire structure is
/// `structure` (from [`Structure::parse`] of the same bytes).
pub fn mutate(rng: &mut Rng, data: &[u8], structure: &Structure) -> Mutant {
    let mutation = Mutation::ALL[rng.below(Mutation::ALL.len())];
    mutate_as(rng, data, structure, mutation)
}

/// Applies one mutation of kind `mutation` (falling back to a bit flip when the capture has no
/// field it applies to).
pub fn mutate_as(rng: &mut Rng, data: &[u8], structure: &Structure, mutation: Mutation) -> Mutant {
    let fields = &structure.fields;
    let flip = |rng: &mut Rng| {
        let mut bytes = data.to_vec();
        let at = rng.below(bytes.len().max(1));
        let bit = rng.below(8);
        if let Some(b) = bytes.get_mut(at) {
            *b ^= 1 << bit;
        }
        let target = innermost_at(structure, at).map(|i| fields[i].parent);
        Mutant { bytes, mutation: Mutation::BitFlip, target, detail: format!("bit {bit} of byte {at}") }
    };
    let edit = |i: usize, from: usize, to: usize, with: &[u8], detail: String| Mutant {
        bytes: splice_fixed(data, structure, i, from..to, with, false),
        mutation,
        target: Some(fields[i].parent),
        detail: format!("{} field {} at {}: {detail}", fields[i].parent.name(), fields[i].number, fields[i].start),
    };
    match mutation {
        Mutation::BitFlip => flip(rng),
        Mutation::Varint => {
            let Some(i) = pick(rng, structure, |f| f.payload == Payload::Varint) else { return flip(rng) };
            let f = &fields[i];
            let old = varint(&data[f.value..f.end]).map_or(0, |v| v.0);
            let new = match rng.below(9) {
                0 => 0,
                1 => 1,
                2 => u64::MAX,
                3 => old.wrapping_add(1),
                4 => old.wrapping_sub(1),
                5 => 1 << 63,
                6 => i64::MAX as u64,
                7 => old.wrapping_mul(1 << 20),
                _ => rng.next_u64(),
            };
            edit(i, f.value, f.end, &encode_varint(new), format!("varint {old} -> {new}"))
        }
        Mutation::Length => {
            let Some(i) = pick(rng, structure, Field::delimited) else { return flip(rng) };
            let f = &fields[i];
            let old = (f.end - f.value) as u64;
            let new = match rng.below(7) {
                0 => 0,
                1 => old.saturating_sub(1),
                2 => old + 1,
                3 => old * 2 + 1,
                4 => 1 << 31,
                5 => u64::MAX,
                _ => old + 1 + rng.below(64) as u64,
            };
            // The prefix is edited; the messages around see only its size change.
            edit(i, f.prefix, f.value, &encode_varint(new), format!("length {old} -> {new}"))
        }
        Mutation::Duplicate => {
            let Some(i) = pick(rng, structure, |_| true) else { return flip(rng) };
            let f = &fields[i];
            let copy = data[f.start..f.end].to_vec();
            edit(i, f.end, f.end, &copy, format!("duplicated ({} bytes)", copy.len()))
        }
        Mutation::Delete => {
            let Some(i) = pick(rng, structure, |_| true) else { return flip(rng) };
            let f = &fields[i];
            edit(i, f.start, f.end, &[], format!("deleted ({} bytes)", f.end - f.start))
        }
        Mutation::WireType => {
            let Some(i) = pick(rng, structure, |_| true) else { return flip(rng) };
            let f = &fields[i];
            let wire = (f.wire as usize + 1 + rng.below(7)) % 8;
            let tag = encode_varint(f.number << 3 | wire as u64);
            edit(i, f.start, f.prefix, &tag, format!("wire type {} -> {wire}", f.wire))
        }
        Mutation::Junk => {
            // Inside a message field: at its end, or before one of its fields.
            let Some(i) = pick(rng, structure, |f| matches!(f.payload, Payload::Message(_))) else {
                return flip(rng);
            };
            let f = &fields[i];
            let inside: Vec<usize> = structure.descendants(i).filter(|&j| fields[j].enclosing == Some(i)).collect();
            let at = match rng.below(inside.len() + 2) {
                k if k < inside.len() => fields[inside[k]].start,
                _ => f.end,
            };
            const JUNK: [&[u8]; 6] = [&[0x0f], &[0x07], &[0x0c], &[0x08], &[0x0b], &[0x12, 0x05, 0x01]];
            let junk = JUNK[rng.below(JUNK.len())];
            let Payload::Message(schema) = f.payload else { unreachable!("picked a message") };
            Mutant {
                bytes: splice_fixed(data, structure, i, at..at, junk, true),
                mutation,
                target: Some(schema),
                detail: format!("{junk:02x?} at {at} inside {} at {}", schema.name(), f.start),
            }
        }
        Mutation::CutInside => {
            let Some(i) = pick(rng, structure, |f| matches!(f.payload, Payload::Message(_)) && f.end > f.value + 1)
            else {
                return flip(rng);
            };
            let f = &fields[i];
            let cut = f.value + 1 + rng.below(f.end - f.value - 1);
            let Payload::Message(schema) = f.payload else { unreachable!("picked a message") };
            Mutant {
                bytes: splice_fixed(data, structure, i, cut..f.end, &[], true),
                mutation,
                target: Some(schema),
                detail: format!(
                    "{} at {} cut to {} of {} bytes",
                    schema.name(),
                    f.start,
                    cut - f.value,
                    f.end - f.value
                ),
            }
        }
        Mutation::Truncate => {
            let Some(i) = pick(rng, structure, |_| true) else { return flip(rng) };
            let f = &fields[i];
            let at = [f.start, f.prefix, f.value, f.end][rng.below(4)].min(data.len());
            Mutant {
                bytes: data[..at].to_vec(),
                mutation,
                target: Some(f.parent),
                detail: format!("file truncated to {at} of {} bytes", data.len()),
            }
        }
    }
}

/// A field that `keep` accepts: half the time any such field, half the time one of a message
/// kind drawn first, so that the few planes, metadata entries and stats are reached as often as
/// the many events.
fn pick(rng: &mut Rng, structure: &Structure, keep: impl Fn(&Field) -> bool) -> Option<usize> {
    let candidates: Vec<usize> = (0..structure.fields.len()).filter(|&i| keep(&structure.fields[i])).collect();
    if candidates.is_empty() {
        return None;
    }
    if rng.below(2) == 0 {
        return Some(candidates[rng.below(candidates.len())]);
    }
    let mut kinds: Vec<Schema> = candidates.iter().map(|&i| structure.fields[i].parent).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let kind = kinds[rng.below(kinds.len())];
    let of_kind: Vec<usize> = candidates.into_iter().filter(|&i| structure.fields[i].parent == kind).collect();
    Some(of_kind[rng.below(of_kind.len())])
}

/// The innermost field whose bytes hold position `at`.
fn innermost_at(structure: &Structure, at: usize) -> Option<usize> {
    structure.fields.iter().rposition(|f| f.start <= at && at < f.end)
}

/// `data` with `data[range]` replaced by `with`, where the edit lies in field `i` (its tag, its
/// prefix, the field as a whole, or just after it for an insertion) or, with `inside`, in its
/// value; the length prefix of every message enclosing the edit is adjusted by the change in
/// size ([`xlens_testkit::splice::replace`]).
pub fn splice_fixed(
    data: &[u8],
    structure: &Structure,
    i: usize,
    range: std::ops::Range<usize>,
    with: &[u8],
    inside: bool,
) -> Vec<u8> {
    let mut enclosing = structure.ancestors(i);
    if inside {
        enclosing.insert(0, i);
    }
    // Outermost first, the length-delimited ones (the others have no prefix to fix).
    let path: Vec<LenField> = enclosing
        .into_iter()
        .rev()
        .map(|a| &structure.fields[a])
        .filter(|e| e.delimited())
        .map(|e| LenField { number: e.number as u32, len_at: e.prefix, body: e.value..e.end })
        .collect();
    replace(data, &path, range, with)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use xlens_xplane::raw;

    fn sample() -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/tpu/tpu_basic/host0.xplane.pb");
        std::fs::read(path).expect("capture")
    }

    /// Deletions, duplications and varint edits keep the file valid protobuf: the fix-ups are
    /// right (a field of the wrong type could appear only by a wire-type edit).
    #[test]
    fn fixed_up_edits_stay_valid_protobuf() {
        let data = sample();
        let structure = Structure::parse(&data);
        assert!(structure.fields.len() > 100, "the capture parses");
        let mut rng = Rng::new(7);
        for k in 0..300 {
            let kind = [Mutation::Delete, Mutation::Duplicate, Mutation::Varint][k % 3];
            let m = mutate_as(&mut rng, &data, &structure, kind);
            // A duplicated or deleted known field inside a known message keeps the protobuf
            // valid unless it hit a guessed message (an embedded proto stays bytes to prost).
            if let Err(e) = raw::XSpace::decode(m.bytes.as_slice()) {
                panic!("{}: {} gives invalid protobuf: {e}", kind.name(), m.detail);
            }
        }
    }

    /// A junk byte inside a stat is the case of issue 40: the file around it stays readable.
    #[test]
    fn junk_stays_inside_its_message() {
        let data = sample();
        let structure = Structure::parse(&data);
        let mut rng = Rng::new(9);
        for _ in 0..100 {
            let m = mutate_as(&mut rng, &data, &structure, Mutation::Junk);
            let again = Structure::parse(&m.bytes);
            // The top level still parses through to the end of the file.
            let top: Vec<_> = again.fields.iter().filter(|f| f.enclosing.is_none()).collect();
            assert_eq!(top.last().map(|f| f.end), Some(m.bytes.len()), "{}", m.detail);
        }
    }
}
