//! The fast path of the instruction decode: the fields the model keeps, read straight from an
//! `HloInstructionProto`'s bytes.
//!
//! prost's decode of the whole message allocates a dozen strings and vectors per instruction
//! (the metadata's source file, scheduling name, ...), most of which nothing reads; a module has
//! thousands of instructions and a small profile spends most of its scan here. This reader walks
//! the message once and keeps only [`Attrs`], the shape and the id lists. It is exact where it
//! answers: a field read here reads as prost would read it (last value wins for a scalar or a
//! string, a repeated field appends, a message field merges). On anything it does not expect (a
//! wire type that does not match the field, a group, an over-long varint, bad UTF-8) it answers
//! `None`, and the caller decodes the message with prost instead, which either succeeds or
//! reports the error it always did. The full message is then decoded again only when a caller
//! asks for it ([`crate::Instruction::raw`]).

use bytes::Bytes;
use prost::Message;
use xlens_xplane::wire::{self, WireType};

use crate::module::Attrs;
use crate::opcode::{FusionKind, Opcode};
use crate::raw;

/// The instruction fields read as numbers.
mod field {
    pub(super) const NAME: u64 = 1;
    pub(super) const OPCODE: u64 = 2;
    pub(super) const SHAPE: u64 = 3;
    pub(super) const METADATA: u64 = 7;
    pub(super) const PARAMETER_NUMBER: u64 = 9;
    pub(super) const FUSION_KIND: u64 = 11;
    pub(super) const TUPLE_INDEX: u64 = 13;
    pub(super) const DIMENSIONS: u64 = 14;
    pub(super) const WINDOW: u64 = 15;
    pub(super) const CONVOLUTION_DIMENSION_NUMBERS: u64 = 16;
    pub(super) const CHANNEL_ID: u64 = 26;
    pub(super) const CUSTOM_CALL_TARGET: u64 = 28;
    pub(super) const DOT_DIMENSION_NUMBERS: u64 = 30;
    pub(super) const FFT_LENGTH: u64 = 32;
    pub(super) const ID: u64 = 35;
    pub(super) const OPERAND_IDS: u64 = 36;
    pub(super) const CONTROL_PREDECESSOR_IDS: u64 = 37;
    pub(super) const CALLED_COMPUTATION_IDS: u64 = 38;
    pub(super) const BACKEND_CONFIG: u64 = 43;
    pub(super) const IS_HOST_TRANSFER: u64 = 47;
    pub(super) const FEATURE_GROUP_COUNT: u64 = 50;
    pub(super) const BATCH_GROUP_COUNT: u64 = 58;
    pub(super) const COMPARISON_DIRECTION: u64 = 63;
    /// `OpMetadata` fields.
    pub(super) const OP_TYPE: u64 = 1;
    pub(super) const OP_NAME: u64 = 2;
    pub(super) const STACK_FRAME_ID: u64 = 15;
}

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// The ids an instruction names, resolved to the arena's ids once every instruction is in.
#[derive(Debug, Default)]
pub(crate) struct Links {
    pub(crate) operand_ids: Ids,
    pub(crate) control_predecessor_ids: Ids,
    pub(crate) called_computation_ids: Ids,
}

/// A repeated int64 field: where it lies packed in the instruction's bytes when it came as one
/// packed run (what XLA writes, read again when resolved, so nothing is allocated), else its
/// values.
#[derive(Debug, Clone)]
pub(crate) enum Ids {
    Packed(std::ops::Range<usize>),
    Values(Vec<i64>),
}

impl Default for Ids {
    fn default() -> Self {
        Ids::Packed(0..0)
    }
}

impl Ids {
    /// The values, reading a packed run from `encoded` (the bytes it was found in, whose
    /// varints were checked then).
    pub(crate) fn values<'a>(&'a self, encoded: &'a [u8]) -> impl Iterator<Item = i64> + 'a {
        let (packed, values) = match self {
            Ids::Packed(range) => (Some(Reader::new(&encoded[range.clone()])), &[][..]),
            Ids::Values(v) => (None, v.as_slice()),
        };
        let packed = packed.into_iter().flat_map(|mut r| std::iter::from_fn(move || r.varint().map(|v| v as i64)));
        packed.chain(values.iter().copied())
    }

    /// How many values [`Ids::values`] yields.
    pub(crate) fn len(&self, encoded: &[u8]) -> usize {
        match self {
            Ids::Packed(range) => encoded[range.clone()].iter().filter(|&&b| b < 0x80).count(),
            Ids::Values(v) => v.len(),
        }
    }

    /// Adds one occurrence of the field.
    fn read(&mut self, r: &mut Reader<'_>, wire: u64) -> Option<()> {
        if wire == LEN && matches!(self, Ids::Packed(range) if range.start == range.end) {
            let range = r.len_delimited()?;
            let mut packed = Reader::new(&r.buf[range.clone()]);
            while !packed.done() {
                packed.varint()?;
            }
            *self = Ids::Packed(range);
            return Some(());
        }
        let mut values = match std::mem::take(self) {
            Ids::Packed(range) => Reader::new(&r.buf[range]).packed_values()?,
            Ids::Values(v) => v,
        };
        let read = r.repeated_int64(wire, &mut values);
        *self = Ids::Values(values);
        read
    }
}

/// What the fast path read of one instruction.
#[derive(Debug)]
pub(crate) struct Fields {
    pub(crate) attrs: Attrs,
    pub(crate) opcode: Opcode,
    pub(crate) fusion_kind: Option<FusionKind>,
    pub(crate) shape: Option<raw::ShapeProto>,
    pub(crate) links: Links,
}

impl Fields {
    /// What [`instruction`] keeps, from an already decoded proto (copied: the caller keeps the
    /// proto whole). The fast path reads the same values from the bytes (proptests below).
    pub(crate) fn from_proto(p: &raw::HloInstructionProto) -> Fields {
        let mut attrs = Attrs::from_proto(p);
        let (opcode, fusion_kind) = opcode_and_kind(&p.opcode, &p.fusion_kind, &mut attrs);
        attrs.settle();
        Fields {
            attrs,
            opcode,
            fusion_kind,
            shape: p.shape.as_deref().cloned(),
            links: Links {
                operand_ids: Ids::Values(p.operand_ids.clone()),
                control_predecessor_ids: Ids::Values(p.control_predecessor_ids.clone()),
                called_computation_ids: Ids::Values(p.called_computation_ids.clone()),
            },
        }
    }
}

/// A cursor over one message's bytes: `xlens_xplane`'s wire reader (the XSpace decoder's), with
/// this reader's answer to anything unexpected, `None`, and payloads as ranges of `buf`.
struct Reader<'a> {
    buf: &'a [u8],
    inner: wire::Reader<'a>,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, inner: wire::Reader::new(buf) }
    }

    fn done(&self) -> bool {
        self.inner.is_empty()
    }

    /// A varint of at most ten bytes whose value fits 64 bits (prost's rule).
    fn varint(&mut self) -> Option<u64> {
        self.inner.read_varint().ok()
    }

    /// A field key as (field number, wire type); `None` for what prost rejects (field 0, a
    /// field number over 32 bits, wire types 6 and 7) and for groups, which this reader does
    /// not skip.
    fn key(&mut self) -> Option<(u64, u64)> {
        let (number, wire) = self.inner.read_tag().ok()?;
        let wire = match wire {
            WireType::Varint => VARINT,
            WireType::Fixed64 => FIXED64,
            WireType::Len => LEN,
            WireType::Fixed32 => FIXED32,
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        Some((u64::from(number), wire))
    }

    /// A length-delimited payload, as its range in the buffer.
    fn len_delimited(&mut self) -> Option<std::ops::Range<usize>> {
        let payload = self.inner.read_len().ok()?;
        let end = self.inner.pos();
        Some(end - payload.len()..end)
    }

    fn skip(&mut self, wire: u64) -> Option<()> {
        let wire = match wire {
            VARINT => WireType::Varint,
            FIXED64 => WireType::Fixed64,
            LEN => WireType::Len,
            FIXED32 => WireType::Fixed32,
            _ => return None,
        };
        self.inner.skip(wire).ok()
    }

    fn int64(&mut self, wire: u64) -> Option<i64> {
        (wire == VARINT).then(|| self.varint()).flatten().map(|v| v as i64)
    }

    fn string(&mut self, wire: u64) -> Option<&'a str> {
        if wire != LEN {
            return None;
        }
        let range = self.len_delimited()?;
        std::str::from_utf8(&self.buf[range]).ok()
    }

    fn message(&mut self, wire: u64) -> Option<&'a [u8]> {
        if wire != LEN {
            return None;
        }
        let range = self.len_delimited()?;
        Some(&self.buf[range])
    }

    /// A repeated int64, packed or not, appended to `out`.
    fn repeated_int64(&mut self, wire: u64, out: &mut Vec<i64>) -> Option<()> {
        match wire {
            VARINT => out.push(self.varint()? as i64),
            LEN => {
                let range = self.len_delimited()?;
                let mut packed = Reader::new(&self.buf[range]);
                if out.is_empty() {
                    *out = packed.packed_values()?;
                } else {
                    out.extend(packed.packed_values()?);
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A shape's `is_dynamic_dimension` (a repeated bool, packed or not, a varint each, true when
    /// not zero) appended to `out`; a run of only `false` flags is not kept when `out` is empty,
    /// as the shape keeps no flags when no dimension is dynamic ([`Shape::from_proto_owned`]).
    ///
    /// [`Shape::from_proto_owned`]: crate::shape::Shape
    fn dynamic_flags(&mut self, wire: u64, out: &mut Vec<bool>) -> Option<()> {
        match wire {
            VARINT => {
                let flag = self.varint()? != 0;
                if flag || !out.is_empty() {
                    out.push(flag);
                }
            }
            LEN => {
                let range = self.len_delimited()?;
                let bytes = &self.buf[range];
                let mut packed = Reader::new(bytes);
                let mut any = !out.is_empty();
                while !packed.done() {
                    any |= packed.varint()? != 0;
                }
                if any {
                    let mut packed = Reader::new(bytes);
                    out.reserve_exact(bytes.iter().filter(|&&b| b < 0x80).count());
                    while !packed.done() {
                        out.push(packed.varint()? != 0);
                    }
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// The rest of the buffer as packed varints, allocated once: a varint's last byte is the one
    /// byte of it below 0x80.
    fn packed_values(&mut self) -> Option<Vec<i64>> {
        let rest = &self.buf[self.inner.pos()..];
        let mut out = Vec::with_capacity(rest.iter().filter(|&&b| b < 0x80).count());
        while !self.done() {
            out.push(self.varint()? as i64);
        }
        Some(out)
    }
}

/// A sub-message merged into `slot` as prost merges a repeated occurrence of a message field.
fn merge_message<M: Message + Default>(slot: &mut Option<M>, bytes: &[u8]) -> Option<()> {
    slot.get_or_insert_with(M::default).merge(bytes).ok()
}

/// [`merge_message`] for a field the instruction keeps boxed.
fn merge_boxed<M: Message + Default>(slot: &mut Option<Box<M>>, bytes: &[u8]) -> Option<()> {
    slot.get_or_insert_with(Box::default).merge(bytes).ok()
}

/// How deep [`shape`] follows tuples before it leaves a shape to prost (whose own limit, 100
/// nested messages, then answers).
const MAX_SHAPE_DEPTH: usize = 16;

/// An encoded `ShapeProto`, read with every list allocated once at its size (prost grows them
/// one element at a time); `None` for anything left to prost.
fn shape(bytes: &[u8], depth: usize) -> Option<raw::ShapeProto> {
    if depth > MAX_SHAPE_DEPTH {
        return None;
    }
    let mut out = raw::ShapeProto::default();
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (number, wire) = r.key()?;
        match number {
            2 => out.element_type = r.int64(wire)? as i32,
            3 => r.repeated_int64(wire, &mut out.dimensions)?,
            4 => out.tuple_shapes.push(shape(r.message(wire)?, depth + 1)?),
            // A repeated layout would merge: left to prost.
            5 if out.layout.is_none() => out.layout = Some(layout(r.message(wire)?)?),
            5 => return None,
            6 => r.dynamic_flags(wire, &mut out.is_dynamic_dimension)?,
            _ => r.skip(wire)?,
        }
    }
    Some(out)
}

/// An encoded `LayoutProto` (see [`shape`]).
fn layout(bytes: &[u8]) -> Option<raw::LayoutProto> {
    let mut out = raw::LayoutProto::default();
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (number, wire) = r.key()?;
        match number {
            1 => r.repeated_int64(wire, &mut out.minor_to_major)?,
            6 => {
                let mut tile = raw::TileProto::default();
                let mut t = Reader::new(r.message(wire)?);
                while !t.done() {
                    match t.key()? {
                        (1, wire) => t.repeated_int64(wire, &mut tile.dimensions)?,
                        (_, wire) => t.skip(wire)?,
                    }
                }
                out.tiles.push(tile);
            }
            7 => out.element_size_in_bits = r.int64(wire)?,
            8 => out.memory_space = r.int64(wire)?,
            16 => out.tail_padding_alignment_in_elements = r.int64(wire)?,
            _ => r.skip(wire)?,
        }
    }
    Some(out)
}

/// The metadata's op type, op name and stack frame, merged into `attrs`.
fn metadata(bytes: &[u8], attrs: &mut Attrs) -> Option<()> {
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (number, wire) = r.key()?;
        match number {
            field::OP_TYPE => attrs.op_type = r.string(wire)?.into(),
            field::OP_NAME => attrs.op_name = r.string(wire)?.into(),
            field::STACK_FRAME_ID => attrs.stack_frame_id = r.int64(wire)? as i32,
            // The source file and line, ...: read by whoever asks for the whole proto.
            _ => r.skip(wire)?,
        }
    }
    Some(())
}

/// The fields the model keeps of one encoded `HloInstructionProto`; `None` when the bytes hold
/// anything this reader leaves to prost.
#[cfg(test)]
pub(crate) fn instruction(encoded: &Bytes) -> Option<Fields> {
    instruction_charged(encoded, &mut |_| true)
}

/// [`instruction`], telling `charge` how many tuple elements (at any depth) each shape holds
/// before it is decoded; `None` when `charge` refuses them.
pub(crate) fn instruction_charged(encoded: &Bytes, charge: &mut dyn FnMut(u64) -> bool) -> Option<Fields> {
    let mut out = Fields {
        attrs: Attrs::default(),
        opcode: Opcode::Other,
        fusion_kind: None,
        shape: None,
        links: Links::default(),
    };
    let (mut opcode, mut fusion_kind) = ("", "");
    let mut r = Reader::new(encoded);
    while !r.done() {
        let (number, wire) = r.key()?;
        let a = &mut out.attrs;
        match number {
            field::NAME => a.name = r.string(wire)?.into(),
            field::OPCODE => opcode = r.string(wire)?,
            field::SHAPE => {
                let bytes = r.message(wire)?;
                let elements = tuple_elements(bytes, 0);
                if elements > 0 && !charge(elements) {
                    return None;
                }
                match &out.shape {
                    None => {
                        out.shape = Some(shape(bytes, 0).map_or_else(|| raw::ShapeProto::decode(bytes).ok(), Some)?)
                    }
                    // A second occurrence merges into the first, as prost does.
                    Some(_) => merge_message(&mut out.shape, bytes)?,
                }
            }
            field::METADATA => metadata(r.message(wire)?, a)?,
            field::PARAMETER_NUMBER => a.parameter_number = r.int64(wire)?,
            field::FUSION_KIND => fusion_kind = r.string(wire)?,
            field::TUPLE_INDEX => a.tuple_index = r.int64(wire)?,
            field::DIMENSIONS => r.repeated_int64(wire, &mut a.dimensions)?,
            field::WINDOW => merge_boxed(&mut a.rare_mut().window, r.message(wire)?)?,
            field::CONVOLUTION_DIMENSION_NUMBERS => {
                merge_boxed(&mut a.rare_mut().convolution_dimension_numbers, r.message(wire)?)?
            }
            field::CHANNEL_ID => a.rare_mut().channel_id = r.int64(wire)?,
            field::CUSTOM_CALL_TARGET => a.rare_mut().custom_call_target = r.string(wire)?.into(),
            field::DOT_DIMENSION_NUMBERS => merge_boxed(&mut a.rare_mut().dot_dimension_numbers, r.message(wire)?)?,
            field::FFT_LENGTH => r.repeated_int64(wire, &mut a.rare_mut().fft_length)?,
            field::ID => a.unique_id = r.int64(wire)?,
            field::OPERAND_IDS => out.links.operand_ids.read(&mut r, wire)?,
            field::CONTROL_PREDECESSOR_IDS => out.links.control_predecessor_ids.read(&mut r, wire)?,
            field::CALLED_COMPUTATION_IDS => out.links.called_computation_ids.read(&mut r, wire)?,
            field::BACKEND_CONFIG => {
                if wire != LEN {
                    return None;
                }
                let range = r.len_delimited()?;
                a.rare_mut().backend_config = encoded.slice(range);
            }
            field::IS_HOST_TRANSFER => a.rare_mut().is_host_transfer = r.int64(wire)? != 0,
            field::FEATURE_GROUP_COUNT => a.rare_mut().feature_group_count = r.int64(wire)?,
            field::BATCH_GROUP_COUNT => a.rare_mut().batch_group_count = r.int64(wire)?,
            field::COMPARISON_DIRECTION => a.rare_mut().comparison_direction = r.string(wire)?.into(),
            _ => r.skip(wire)?,
        }
    }
    (out.opcode, out.fusion_kind) = opcode_and_kind(opcode, fusion_kind, &mut out.attrs);
    out.attrs.settle();
    Some(out)
}

/// What a module's proto would cost once decoded, counted in place (nothing is allocated), so
/// that it is charged before it is decoded ([`crate::limits::check_budget`]): its computations
/// and instructions, and the bytes of the records prost decodes for the rest of it (the buffer
/// assignment, the schedule, the stack-frame index, aliases and donors), each list's records at
/// twice their size (a vector grown one record at a time holds up to twice what it uses; a map
/// entry with its share of the table about as much). Counts what prost would read as far as the
/// bytes are well formed; past a malformed field it stops, and the decode that follows reports the
/// error.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Census<'a> {
    /// The module's name, when one was read (for the error's location).
    pub(crate) name: &'a str,
    pub(crate) computations: u64,
    pub(crate) instructions: u64,
    /// Bytes of the other records.
    pub(crate) records: u64,
}

/// Each length-delimited field of a message, as (field number, payload); `None` where the bytes
/// are malformed (the walk stops there). Groups are skipped whole, as prost skips them.
fn each_len_field<'a>(bytes: &'a [u8], mut f: impl FnMut(u64, &'a [u8])) -> Option<()> {
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (number, wire) = r.inner.read_tag().ok()?;
        match wire {
            WireType::Len => {
                let range = r.len_delimited()?;
                f(u64::from(number), &r.buf[range]);
            }
            WireType::StartGroup => skip_group(&mut r, number, 0)?,
            WireType::EndGroup => return None,
            wire => r.inner.skip(wire).ok()?,
        }
    }
    Some(())
}

/// Skips a group's fields up to its end (its start key read); `None` for a group that does not
/// end, or nests deeper than prost's recursion limit.
fn skip_group(r: &mut Reader<'_>, number: u32, depth: usize) -> Option<()> {
    if depth > MAX_COUNTED_SHAPE_DEPTH {
        return None;
    }
    loop {
        let (inner, wire) = r.inner.read_tag().ok()?;
        match wire {
            WireType::EndGroup => return (inner == number).then_some(()),
            WireType::StartGroup => skip_group(r, inner, depth + 1)?,
            wire => r.inner.skip(wire).ok()?,
        }
    }
}

/// What one record of type `T` is charged: twice its size (see [`Census`]).
const fn record<T>() -> u64 {
    2 * std::mem::size_of::<T>() as u64
}

impl<'a> Census<'a> {
    /// The census of an `HloProto` (its modules, merged as prost merges a repeated message).
    pub(crate) fn of_proto(bytes: &'a [u8]) -> Census<'a> {
        const HLO_MODULE: u64 = 1;
        const BUFFER_ASSIGNMENT: u64 = 3;
        let mut out = Census::default();
        let _ = each_len_field(bytes, |number, payload| match number {
            HLO_MODULE => out.add_module(payload),
            BUFFER_ASSIGNMENT => out.add_assignment(payload),
            _ => {}
        });
        out
    }

    /// The census of a bare `HloModuleProto`.
    pub(crate) fn of_module(bytes: &'a [u8]) -> Census<'a> {
        let mut out = Census::default();
        out.add_module(bytes);
        out
    }

    fn add_module(&mut self, bytes: &'a [u8]) {
        const NAME: u64 = 1;
        const COMPUTATIONS: u64 = 3;
        const INSTRUCTIONS: u64 = 2;
        const SCHEDULE: u64 = 7;
        const INPUT_OUTPUT_ALIAS: u64 = 8;
        const STACK_FRAME_INDEX: u64 = 17;
        const BUFFER_DONOR: u64 = 18;
        use raw::{hlo_buffer_donor_proto as donor, hlo_input_output_alias_proto as alias};
        use raw::{hlo_schedule_proto as schedule, stack_frame_index_proto as frames};
        let _ = each_len_field(bytes, |number, payload| match number {
            NAME => {
                if let Ok(name) = std::str::from_utf8(payload) {
                    self.name = name;
                }
            }
            COMPUTATIONS => {
                self.computations += 1;
                let _ = each_len_field(payload, |number, _| self.instructions += u64::from(number == INSTRUCTIONS));
            }
            // A map entry: its key and sequence, the table's share, and the module's copy.
            SCHEDULE => self.records += count(payload, 1) * (record::<(i64, schedule::InstructionSequence)>() + 16),
            INPUT_OUTPUT_ALIAS => {
                self.records += count(payload, 1) * (record::<alias::AliasEntryProto>() + record::<crate::IoAlias>())
            }
            STACK_FRAME_INDEX => {
                let _ = each_len_field(payload, |number, _| {
                    self.records += match number {
                        1 | 2 => record::<String>(),
                        3 => record::<frames::FileLocation>(),
                        4 => record::<frames::StackFrame>(),
                        _ => 0,
                    }
                });
            }
            BUFFER_DONOR => {
                self.records +=
                    count(payload, 1) * (record::<donor::BufferDonorEntryProto>() + record::<crate::BufferDonor>())
            }
            _ => {}
        });
    }

    fn add_assignment(&mut self, bytes: &'a [u8]) {
        const LOGICAL_BUFFERS: u64 = 1;
        const BUFFER_ALLOCATIONS: u64 = 3;
        const HEAP_SIMULATOR_TRACES: u64 = 4;
        use raw::{buffer_allocation_proto as allocation, heap_simulator_trace as trace};
        let _ = each_len_field(bytes, |number, payload| match number {
            LOGICAL_BUFFERS => {
                // Its location, a message of its own, is inline.
                self.records += record::<raw::LogicalBufferProto>();
            }
            BUFFER_ALLOCATIONS => {
                self.records +=
                    record::<raw::BufferAllocationProto>() + count(payload, 9) * record::<allocation::Assigned>()
            }
            HEAP_SIMULATOR_TRACES => {
                self.records += record::<raw::HeapSimulatorTrace>() + count(payload, 1) * record::<trace::Event>()
            }
            _ => {}
        });
    }
}

/// How many length-delimited occurrences of field `number` a message holds.
fn count(bytes: &[u8], number: u64) -> u64 {
    let mut n = 0;
    let _ = each_len_field(bytes, |found, _| n += u64::from(found == number));
    n
}

/// Deepest shape (or group) nesting [`tuple_elements`] walks: prost's own recursion limit,
/// past which it fails to decode.
const MAX_COUNTED_SHAPE_DEPTH: usize = 100;

/// How many tuple elements an encoded `ShapeProto` holds at any depth, counted in place (as far
/// as its bytes are well formed).
fn tuple_elements(bytes: &[u8], depth: usize) -> u64 {
    const TUPLE_SHAPES: u64 = 4;
    if depth > MAX_COUNTED_SHAPE_DEPTH {
        return 0;
    }
    let mut n = 0;
    let _ = each_len_field(bytes, |number, payload| {
        if number == TUPLE_SHAPES {
            n += 1 + tuple_elements(payload, depth + 1);
        }
    });
    n
}

/// How many tuple elements the shapes of an encoded instruction hold (see [`tuple_elements`]).
pub(crate) fn shape_tuple_elements(encoded: &[u8]) -> u64 {
    let mut n = 0;
    let _ = each_len_field(encoded, |number, payload| {
        if number == field::SHAPE {
            n += tuple_elements(payload, 0);
        }
    });
    n
}

/// Whether an instruction's bytes hold any of these fields, found without decoding them; `None`
/// when the bytes hold anything this reader leaves to prost.
pub(crate) fn has_any(encoded: &[u8], fields: &[u64]) -> Option<bool> {
    let mut r = Reader::new(encoded);
    let mut found = false;
    while !r.done() {
        let (number, wire) = r.key()?;
        found |= fields.contains(&number);
        r.skip(wire)?;
    }
    Some(found)
}

/// The metadata's source file, line and column, read in place from an instruction's bytes (a
/// repeated metadata merges: the last value of each wins, as prost reads it): `Some(None)` when
/// the instruction has no metadata, `None` when the bytes hold anything this reader leaves to
/// prost (a bad wire type, a file name that is not UTF-8).
pub(crate) fn source(encoded: &[u8]) -> Option<Option<(&str, i32, i32)>> {
    const SOURCE_FILE: u64 = 3;
    const SOURCE_LINE: u64 = 4;
    const SOURCE_COLUMN: u64 = 18;
    let mut out: Option<(&str, i32, i32)> = None;
    let mut r = Reader::new(encoded);
    while !r.done() {
        let (number, wire) = r.key()?;
        if number != field::METADATA {
            r.skip(wire)?;
            continue;
        }
        let source = out.get_or_insert(("", 0, 0));
        let mut m = Reader::new(r.message(wire)?);
        while !m.done() {
            match m.key()? {
                (SOURCE_FILE, wire) => source.0 = m.string(wire)?,
                (SOURCE_LINE, wire) => source.1 = m.int64(wire)? as i32,
                (SOURCE_COLUMN, wire) => source.2 = m.int64(wire)? as i32,
                (_, wire) => m.skip(wire)?,
            }
        }
    }
    Some(out)
}

/// The opcode and a fusion's kind from their spellings; an unknown opcode's spelling is kept.
pub(crate) fn opcode_and_kind(opcode: &str, fusion_kind: &str, attrs: &mut Attrs) -> (Opcode, Option<FusionKind>) {
    let code = Opcode::from_name(opcode);
    if code == Opcode::Other {
        attrs.rare_mut().unknown_opcode = opcode.into();
    }
    (code, if code == Opcode::Fusion { FusionKind::from_name(fusion_kind) } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode_varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// One field of an instruction, written by hand: any number (known or not), any wire type
    /// (matching or not), and payloads that are sometimes valid messages, sometimes not.
    fn arb_field() -> impl Strategy<Value = Vec<u8>> {
        let known = prop::sample::select(vec![
            1u64, 2, 3, 7, 9, 11, 13, 14, 15, 16, 26, 28, 30, 32, 35, 36, 37, 38, 43, 47, 50, 58, 63,
        ]);
        let number = prop_oneof![4 => known, 1 => 1u64..100];
        let payload = prop_oneof![
            // Valid sub-messages and strings.
            prop::collection::vec(any::<u8>().prop_map(|b| b & 0x7f), 0..12),
            Just(raw::ShapeProto { element_type: 11, dimensions: vec![8, 128], ..Default::default() }.encode_to_vec()),
            Just(arb_shape_of(vec![8, 128, 3], true).encode_to_vec()),
            Just(
                raw::OpMetadata {
                    op_name: "jit(f)/dot".into(),
                    stack_frame_id: 3,
                    source_file: "a.py".into(),
                    ..Default::default()
                }
                .encode_to_vec()
            ),
            Just(
                raw::DotDimensionNumbers { lhs_contracting_dimensions: vec![1], ..Default::default() }.encode_to_vec()
            ),
            // Anything, UTF-8 or not.
            prop::collection::vec(any::<u8>(), 0..12),
        ];
        let wire = prop::sample::select(vec![VARINT, FIXED64, LEN, FIXED32, 3, 4]);
        (number, prop::bool::weighted(0.9), wire, any::<u64>(), payload).prop_map(
            |(number, right, wire, value, payload)| {
                // Mostly the wire type the field is declared with, so that whole messages decode.
                let wire = if right { right_wire(number).unwrap_or(wire) } else { wire };
                let mut out = Vec::new();
                encode_varint(number << 3 | wire, &mut out);
                match wire {
                    VARINT => encode_varint(value, &mut out),
                    FIXED64 => out.extend_from_slice(&value.to_le_bytes()),
                    FIXED32 => out.extend_from_slice(&value.to_le_bytes()[..4]),
                    LEN => {
                        encode_varint(payload.len() as u64, &mut out);
                        out.extend_from_slice(&payload);
                    }
                    _ => {}
                }
                out
            },
        )
    }

    /// The wire type prost expects for a known instruction field (a repeated int64 also takes
    /// `LEN`, packed).
    fn right_wire(number: u64) -> Option<u64> {
        match number {
            1 | 2 | 3 | 7 | 11 | 14 | 15 | 16 | 28 | 30 | 32 | 36 | 37 | 38 | 43 | 63 => Some(LEN),
            9 | 13 | 26 | 35 | 47 | 50 | 58 => Some(VARINT),
            _ => None,
        }
    }

    /// The same fields, the id lists compared by value (`a` read from `encoded`).
    fn same(a: &Fields, encoded: &[u8], b: &Fields) -> bool {
        let ids = |f: &Fields, bytes: &[u8]| -> [Vec<i64>; 3] {
            let l = &f.links;
            [&l.operand_ids, &l.control_predecessor_ids, &l.called_computation_ids].map(|i| i.values(bytes).collect())
        };
        // Shapes compared as the model keeps them.
        let shape = |f: &Fields| f.shape.clone().map(crate::shape::Shape::from_proto_owned);
        let text = |f: &Fields| format!("{:?} {:?} {:?} {:?}", f.attrs, f.opcode, f.fusion_kind, shape(f));
        text(a) == text(b) && ids(a, encoded) == ids(b, &[])
    }

    proptest! {
        /// Where the fast path answers on a message prost decodes, it reads what prost reads.
        /// (Where prost fails on a field the fast path skips, the fast path still answers: the
        /// error is met by whoever asks for the whole proto.)
        #[test]
        fn fast_path_reads_what_prost_reads(fields in prop::collection::vec(arb_field(), 0..12), cut in any::<prop::sample::Index>()) {
            let mut bytes: Vec<u8> = fields.concat();
            // Sometimes a message cut short.
            if cut.index(4) == 0 && !bytes.is_empty() {
                bytes.truncate(cut.index(bytes.len()));
            }
            let bytes = Bytes::from(bytes);
            let fast = instruction(&bytes);
            if let (Ok(p), Some(fast)) = (raw::HloInstructionProto::decode(bytes.clone()), fast) {
                prop_assert!(same(&fast, &bytes, &Fields::from_proto(&p)), "{fast:?}");
            }
        }
    }

    /// A well-formed instruction with any of the fields the fast path reads set (and some it
    /// skips: source file, slices, sharding, replica groups).
    fn arb_instruction() -> impl Strategy<Value = raw::HloInstructionProto> {
        let text = "[a-z_.()/]{0,12}";
        let ids = prop::collection::vec(-3i64..1_000_000, 0..4);
        (
            (text, prop::sample::select(vec!["fusion", "dot", "custom-call", "compare", "frobnicate", ""]), text, text),
            (any::<i32>(), text, any::<i64>(), any::<i64>(), any::<i64>(), any::<bool>()),
            (ids.clone(), ids.clone(), ids.clone(), ids.clone(), ids),
            (prop::option::of(prop::collection::vec(0i64..64, 0..4)), any::<bool>(), text, text),
        )
            .prop_map(
                |(
                    (name, opcode, op_name, kind),
                    (frame, file, id, channel, number, host),
                    lists,
                    (shape, rare, target, direction),
                )| {
                    let (operands, control, called, dims, fft) = lists;
                    raw::HloInstructionProto {
                        name,
                        opcode: opcode.into(),
                        shape: shape.map(|d| Box::new(arb_shape_of(d, rare))),
                        metadata: Some(raw::OpMetadata {
                            op_name,
                            op_type: kind.clone(),
                            source_file: file,
                            source_line: frame / 3,
                            source_column: frame % 7,
                            stack_frame_id: frame,
                            ..Default::default()
                        }),
                        fusion_kind: kind,
                        id,
                        channel_id: channel,
                        parameter_number: number,
                        tuple_index: number / 3,
                        feature_group_count: number / 5,
                        batch_group_count: number / 7,
                        is_host_transfer: host,
                        operand_ids: operands,
                        control_predecessor_ids: control,
                        called_computation_ids: called,
                        dimensions: dims,
                        fft_length: fft,
                        custom_call_target: target,
                        comparison_direction: direction,
                        backend_config: Bytes::from(if rare { b"{}".to_vec() } else { Vec::new() }),
                        dot_dimension_numbers: rare.then(|| {
                            Box::new(raw::DotDimensionNumbers {
                                lhs_contracting_dimensions: vec![1],
                                ..Default::default()
                            })
                        }),
                        window: rare.then(|| {
                            Box::new(raw::Window {
                                dimensions: vec![raw::WindowDimension { size: 3, ..Default::default() }],
                            })
                        }),
                        convolution_dimension_numbers: rare.then(|| {
                            Box::new(raw::ConvolutionDimensionNumbers {
                                input_batch_dimension: 1,
                                ..Default::default()
                            })
                        }),
                        slice_dimensions: if rare {
                            vec![raw::hlo_instruction_proto::SliceDimensions { start: 0, limit: 4, stride: 1 }]
                        } else {
                            Vec::new()
                        },
                        replica_groups: if rare {
                            vec![raw::ReplicaGroup { replica_ids: vec![0, 1] }]
                        } else {
                            Vec::new()
                        },
                        ..Default::default()
                    }
                },
            )
    }

    /// A shape of these dimensions: with a layout, dynamic flags and a tiled tuple element when
    /// `rich`.
    fn arb_shape_of(dims: Vec<i64>, rich: bool) -> raw::ShapeProto {
        let array = raw::ShapeProto {
            element_type: 11,
            is_dynamic_dimension: dims.iter().map(|&d| rich && d % 2 == 1).collect(),
            layout: Some(raw::LayoutProto {
                minor_to_major: (0..dims.len() as i64).rev().collect(),
                tiles: if rich { vec![raw::TileProto { dimensions: vec![8, 128] }] } else { Vec::new() },
                element_size_in_bits: if rich { 4 } else { 0 },
                memory_space: i64::from(rich),
                tail_padding_alignment_in_elements: 0,
            }),
            dimensions: dims,
            ..Default::default()
        };
        if rich {
            raw::ShapeProto {
                element_type: 13,
                tuple_shapes: vec![array.clone(), raw::ShapeProto { element_type: 1, ..Default::default() }],
                ..Default::default()
            }
        } else {
            array
        }
    }

    proptest! {
        /// Well-formed instructions, one or two of them concatenated (which protobuf reads as one
        /// message, the second's scalars winning, lists appended, messages merged): the fast path
        /// answers, and reads what prost reads.
        #[test]
        fn fast_path_reads_well_formed_instructions(a in arb_instruction(), b in prop::option::of(arb_instruction())) {
            let mut bytes = a.encode_to_vec();
            if let Some(b) = b {
                bytes.extend(b.encode_to_vec());
            }
            let bytes = Bytes::from(bytes);
            let fast = instruction(&bytes);
            prop_assert!(fast.is_some());
            let p = raw::HloInstructionProto::decode(bytes.clone()).expect("a well-formed instruction decodes");
            prop_assert!(same(&fast.unwrap(), &bytes, &Fields::from_proto(&p)));
        }
    }

    proptest! {
        /// The in-place reads of the source and of which fields are present agree with prost's
        /// decode wherever they answer, and answer on every well-formed instruction.
        #[test]
        fn in_place_reads_agree_with_prost(a in arb_instruction(), slices in any::<bool>(), fields in prop::collection::vec(arb_field(), 0..4)) {
            let mut a = a;
            if slices {
                a.dynamic_slice_sizes = vec![4];
            }
            let well_formed = a.encode_to_vec();
            prop_assert!(source(&well_formed).is_some());
            prop_assert!(has_any(&well_formed, &[17, 20]).is_some());
            let mut bytes = well_formed;
            bytes.extend(fields.concat());
            if let Ok(p) = raw::HloInstructionProto::decode(&bytes[..]) {
                if let Some(found) = source(&bytes) {
                    let expected = p.metadata.as_ref().map(|m| (m.source_file.as_str(), m.source_line, m.source_column));
                    prop_assert_eq!(found, expected);
                }
                if let Some(found) = has_any(&bytes, &[17, 20]) {
                    // Present fields may be empty; non-empty ones are always found.
                    prop_assert!(found || (p.slice_dimensions.is_empty() && p.dynamic_slice_sizes.is_empty()));
                }
            }
        }
    }

    #[test]
    fn a_real_instruction_reads_alike() {
        let p = raw::HloInstructionProto {
            name: "fusion.3".into(),
            opcode: "fusion".into(),
            shape: Some(Box::new(raw::ShapeProto { element_type: 11, dimensions: vec![4, 8], ..Default::default() })),
            metadata: Some(raw::OpMetadata {
                op_type: "dot_general".into(),
                op_name: "jit(train)/dot".into(),
                source_file: "/home/me/train.py".into(),
                source_line: 12,
                stack_frame_id: 7,
                ..Default::default()
            }),
            fusion_kind: "kOutput".into(),
            dimensions: vec![1, 0],
            id: 42,
            operand_ids: vec![40, 41],
            called_computation_ids: vec![5],
            backend_config: Bytes::from_static(b"{\"x\":1}"),
            channel_id: 3,
            ..Default::default()
        };
        let bytes = Bytes::from(p.encode_to_vec());
        let fast = instruction(&bytes).expect("the fast path reads a well-formed instruction");
        assert!(same(&fast, &bytes, &Fields::from_proto(&p)));
        assert_eq!(&*fast.attrs.op_name, "jit(train)/dot");
        assert_eq!(fast.attrs.backend_config(), b"{\"x\":1}");
        assert!(matches!(fast.links.operand_ids, Ids::Packed(_)), "read in place");
        assert_eq!(fast.links.operand_ids.values(&bytes).collect::<Vec<_>>(), [40, 41]);
    }
}
