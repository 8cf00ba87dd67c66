//! Decoding: from `HloProto` bytes to a [`Module`], with the graph, costs, collectives and
//! warnings computed once.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use prost::Message;
use rayon::prelude::*;

use crate::collective::{self, Collective, GroupEncoding};
use crate::cost;
use crate::error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
use crate::graph;
use crate::ids::{CompId, InstrId};
use crate::limits::{self, Limit};
use crate::module::{
    AliasKind, Attrs, BufferDonor, Computation, ComputationKind, Instruction, IoAlias, Module, NameIndex,
};
use crate::opcode::Opcode;
use crate::raw;
use crate::shape::Shape;
use crate::wire;
use xlens_xplane::strict::{MessageId, Schema};

/// [`CompParts`] from a computation message (`HloComputationProto` or
/// `HloComputationProtoEncoded`).
macro_rules! comp_parts {
    ($c:ident) => {
        CompParts {
            name: $c.name,
            id: $c.id,
            root_id: $c.root_id,
            is_fusion: $c.is_fusion_computation,
            execution_thread: $c.execution_thread,
            instructions: $c.instructions,
        }
    };
}

/// [`ModuleParts`] from a module message (`HloModuleProto` or `HloModuleProtoEncoded`, whose
/// fields the model reads are alike) and its computations, already taken out of it.
macro_rules! module_parts {
    ($module:ident, $computations:expr) => {
        ModuleParts {
            name: $module.name,
            entry_computation_name: $module.entry_computation_name,
            computations: $computations,
            host_program_shape: $module.host_program_shape,
            id: $module.id,
            entry_computation_id: $module.entry_computation_id,
            schedule: $module.schedule,
            input_output_alias: $module.input_output_alias,
            stack_frame_index: $module.stack_frame_index,
            buffer_donor: $module.buffer_donor,
            device_type: $module.device_type,
        }
    };
}

impl Module {
    /// Decodes a serialized `xla.HloProto` (what profiles and `*.hlo_proto.pb` files hold) and
    /// builds the graph. A bare `HloModuleProto` is accepted too.
    ///
    /// ```
    /// use xlens_hlo::{Module, Opcode, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// assert_eq!(module.name(), "jit_f");
    /// let dot = module.instruction_by_name("dot.1").unwrap();
    /// assert_eq!((dot.opcode(), module.cost(dot.id()).flops), (Opcode::Dot, 2 * 8 * 16 * 4));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decode(bytes: Bytes) -> Result<Module> {
        Module::decode_checked(bytes, &Strict::new(), false)
    }

    /// [`Module::decode`], every field of the proto checked with `strict` first (an `HloProto`,
    /// or a bare `HloModuleProto` when it is not one): bytes prost would not decode fail with
    /// [`ErrorKind::Malformed`], though the fields that hold them are ones the model skips.
    /// With `proto_only`, the bytes must be an `HloProto` (what a profile's `Hlo Proto` stat
    /// holds): no bare module is tried.
    pub(crate) fn decode_checked(bytes: Bytes, strict: &Strict, proto_only: bool) -> Result<Module> {
        if bytes.is_empty() {
            return Err(Error::new(ErrorKind::EmptyInput, Location::default()));
        }
        let encoded_len = bytes.len();
        // What the module would cost is charged before anything of it is decoded.
        let charged = check_budget(wire::Census::of_proto(&bytes), encoded_len)?;
        // The computations and their instructions are left encoded here, and decoded one by
        // one (in parallel, straight into the module's arena) when the graph is built.
        let first_error = match raw::HloProtoEncoded::decode(bytes.clone()) {
            Ok(raw::HloProtoEncoded { hlo_module: Some(module), buffer_assignment })
                if !module.computations.is_empty() =>
            {
                strict.check(&bytes, strict.proto)?;
                return build_encoded(module, buffer_assignment, encoded_len, Some(charged));
            }
            Ok(_) => None,
            Err(e) => Some(e),
        };
        if proto_only {
            // What prost (or the strict check) says of the bytes as an HloProto.
            strict.check(&bytes, strict.proto)?;
            return Err(Error::new(first_error.map_or(ErrorKind::NoModule, ErrorKind::Decode), Location::default()));
        }
        // Not an HloProto with a module: maybe a bare HloModuleProto.
        let charged = check_budget(wire::Census::of_module(&bytes), encoded_len)?;
        match raw::HloModuleProtoEncoded::decode(bytes.clone()) {
            Ok(m) if !m.computations.is_empty() => {
                strict.check(&bytes, strict.module)?;
                build_encoded(m, None, encoded_len, Some(charged))
            }
            _ => Err(Error::new(first_error.map_or(ErrorKind::NoModule, ErrorKind::Decode), Location::default())),
        }
    }

    /// Reads and decodes a `*.hlo_proto.pb` file.
    pub fn open(path: &Path) -> Result<Module> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(e, path))?;
        Module::decode(Bytes::from(bytes)).map_err(|e| e.in_file(path))
    }

    /// Builds the graph from an already decoded proto. `encoded_len` is informational.
    pub fn from_proto(proto: raw::HloProto, encoded_len: usize) -> Result<Module> {
        let raw::HloProto { hlo_module, buffer_assignment } = proto;
        let mut module = hlo_module.ok_or_else(|| Error::new(ErrorKind::NoModule, Location::default()))?;
        let name = module.name.clone();
        let computations = std::mem::take(&mut module.computations).into_iter().map(|c| comp_parts!(c)).collect();
        let parts = module_parts!(module, computations);
        build(parts, buffer_assignment, encoded_len, None).map_err(|e| e.in_module(&name))
    }
}

/// A module's proto read as far as its parts: the module with its computations still encoded,
/// and the encoded occurrences of its buffer assignment, which are decoded apart
/// ([`decode_assignment`]) so that a large program's assignment (a third of its decode) is read
/// on another worker while its instructions are converted.
pub(crate) struct Parts {
    module: raw::HloModuleProtoEncoded,
    encoded_len: usize,
    /// What its census was charged to the memory budget.
    charged: u64,
}

impl Parts {
    /// The parts of an `HloProto` with a module of computations; `None` for anything else,
    /// which [`Module::decode`] reads (or fails on) as it always does.
    /// A proto over its memory budget, or one that fails the `strict` check, is `None` too:
    /// [`Module::decode_checked`] reports it.
    pub(crate) fn read(bytes: &Bytes, strict: &Strict) -> Option<(Parts, Vec<Bytes>)> {
        let charged = check_budget(wire::Census::of_proto(bytes), bytes.len()).ok()?;
        strict.check(bytes, strict.proto).ok()?;
        match raw::HloProtoParts::decode(bytes.clone()) {
            Ok(raw::HloProtoParts { hlo_module: Some(module), buffer_assignment })
                if !module.computations.is_empty() =>
            {
                Some((Parts { module, encoded_len: bytes.len(), charged }, buffer_assignment))
            }
            _ => None,
        }
    }

    /// Builds the module, without its buffer assignment (set it with
    /// [`Module::set_buffer_assignment`]).
    pub(crate) fn build(self) -> Result<Module> {
        build_encoded(self.module, None, self.encoded_len, Some(self.charged))
    }
}

/// The strict check of the HLO messages ([`xlens_xplane::strict`]), its tables built from
/// `proto/hlo.proto` as compiled for the generated types ([`crate::raw`]).
#[derive(Debug)]
pub(crate) struct Strict {
    /// The tables (`None` on a broken build, which the tests catch: nothing is checked).
    schema: Option<Schema>,
    /// `xla.HloProto` and `xla.HloModuleProto`.
    proto: Option<MessageId>,
    module: Option<MessageId>,
}

/// The encoded `FileDescriptorSet` of `proto/hlo.proto` (see `build.rs`).
const HLO_DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hlo.fds"));

impl Strict {
    /// The tables (a fraction of a millisecond to build: once per profile, not per module).
    /// Strings are checked for UTF-8, as prost checks them: parts of a module are decoded with
    /// prost, and the bytes a profile holds are judged by prost's decode of an `HloProto`.
    pub(crate) fn new() -> Strict {
        // The descriptor is the build script's output, which this crate's tests check.
        let schema = Schema::from_descriptor_set_checking_utf8(HLO_DESCRIPTOR).ok();
        let message = |name: &str| schema.as_ref().and_then(|s| s.message(name));
        let (proto, module) = (message("xla.HloProto"), message("xla.HloModuleProto"));
        Strict { schema, proto, module }
    }

    /// Fails with [`ErrorKind::Malformed`] where prost would not decode `bytes` as `message`.
    fn check(&self, bytes: &[u8], message: Option<MessageId>) -> Result<()> {
        let (Some(schema), Some(message)) = (&self.schema, message) else { return Ok(()) };
        schema.check(bytes, message).map_err(|f| {
            Error::new(ErrorKind::Malformed { path: f.path, why: f.why, offset: f.offset }, Location::default())
        })
    }
}

/// Fails with [`ErrorKind::MemoryBudget`] when what `census` counted would cost more than the
/// budget of a proto of `encoded_len` bytes; else returns what it was charged.
fn check_budget(census: wire::Census<'_>, encoded_len: usize) -> Result<u64> {
    let location = || if census.name.is_empty() { Location::default() } else { Location::in_module(census.name) };
    limits::check_budget(encoded_len, census.computations, census.instructions, census.records, location)
}

/// A buffer assignment from its encoded occurrences, merged in order (as prost merges a message
/// field that occurs more than once); `Ok(None)` when there is none.
pub(crate) fn decode_assignment(
    occurrences: &[Bytes],
) -> std::result::Result<Option<raw::BufferAssignmentProto>, prost::DecodeError> {
    let Some((first, rest)) = occurrences.split_first() else { return Ok(None) };
    let mut assignment = raw::BufferAssignmentProto::decode(first.clone())?;
    for more in rest {
        assignment.merge(more.clone())?;
    }
    Ok(Some(assignment))
}

impl Module {
    /// Gives a module built from [`Parts`] its buffer assignment.
    pub(crate) fn set_buffer_assignment(&mut self, assignment: Option<raw::BufferAssignmentProto>) {
        self.buffer_assignment = assignment;
    }
}

/// What the model reads of a module, its instructions decoded (`I` is the proto) or still
/// encoded (`I` is its bytes).
struct ModuleParts<I> {
    name: String,
    entry_computation_name: String,
    computations: Vec<CompParts<I>>,
    host_program_shape: Option<raw::ProgramShapeProto>,
    id: i64,
    entry_computation_id: i64,
    schedule: Option<raw::HloScheduleProto>,
    input_output_alias: Option<raw::HloInputOutputAliasProto>,
    stack_frame_index: Option<raw::StackFrameIndexProto>,
    buffer_donor: Option<raw::HloBufferDonorProto>,
    device_type: String,
}

/// What the model reads of a computation.
struct CompParts<I> {
    name: String,
    id: i64,
    root_id: i64,
    is_fusion: bool,
    execution_thread: String,
    instructions: Vec<I>,
}

/// An instruction's proto, decoded already or still encoded.
trait InstructionSource: Send {
    /// What the model reads of the instruction, and the proto kept for [`Instruction::raw`];
    /// the tuple elements of an encoded instruction's shape are charged to `meter` before they
    /// are decoded.
    fn read(self, meter: &ShapeMeter) -> std::result::Result<Read, ReadError>;
}

/// Why an instruction could not be read.
enum ReadError {
    /// Its proto does not decode.
    Decode(prost::DecodeError),
    /// Its shape's tuple elements would take the module over its memory budget.
    Budget,
}

/// What the instructions' shapes may still allocate for their tuple elements, shared by the
/// workers that convert them: a tuple element takes two bytes of input and hundreds of bytes
/// decoded, and the census counts only whole instructions.
struct ShapeMeter {
    left: std::sync::atomic::AtomicU64,
    /// The largest charge refused (0 while none was).
    refused: std::sync::atomic::AtomicU64,
}

impl ShapeMeter {
    fn new(left: u64) -> ShapeMeter {
        ShapeMeter { left: left.into(), refused: 0.into() }
    }

    /// Charges `elements` tuple elements; false (and exhausted from then on) when they do not
    /// fit what is left.
    fn charge(&self, elements: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let bytes = elements.saturating_mul(limits::TUPLE_ELEMENT_COST);
        let fits = self.left.fetch_update(Relaxed, Relaxed, |left| left.checked_sub(bytes)).is_ok();
        if !fits {
            self.refused.fetch_max(bytes, Relaxed);
        }
        fits
    }

    fn exhausted(&self) -> bool {
        self.refused() > 0
    }

    fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn left(&self) -> u64 {
        self.left.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One instruction as read from its source, before its shape is converted.
struct Read {
    fields: wire::Fields,
    encoded: Bytes,
    full: Option<Box<raw::HloInstructionProto>>,
}

impl Read {
    /// From a decoded proto, which is kept whole.
    fn from_proto(p: raw::HloInstructionProto, encoded: Bytes) -> Read {
        let fields = wire::Fields::from_proto(&p);
        Read { fields, encoded, full: Some(Box::new(p)) }
    }
}

impl InstructionSource for raw::HloInstructionProto {
    fn read(self, _: &ShapeMeter) -> std::result::Result<Read, ReadError> {
        Ok(Read::from_proto(self, Bytes::new()))
    }
}

impl InstructionSource for Bytes {
    fn read(self, meter: &ShapeMeter) -> std::result::Result<Read, ReadError> {
        match wire::instruction_charged(&self, &mut |elements| meter.charge(elements)) {
            Some(fields) => Ok(Read { fields, encoded: self, full: None }),
            None if meter.exhausted() => Err(ReadError::Budget),
            // What the fast path leaves to prost: an error, or a message it decodes (its shapes
            // charged first: the fast path may have stopped before it met them).
            None => {
                if !meter.charge(wire::shape_tuple_elements(&self)) {
                    return Err(ReadError::Budget);
                }
                raw::HloInstructionProto::decode(self.clone())
                    .map(|p| Read::from_proto(p, self))
                    .map_err(ReadError::Decode)
            }
        }
    }
}

/// Decodes the computations of a module whose computations and instructions are still
/// encoded, then builds it.
fn build_encoded(
    mut module: raw::HloModuleProtoEncoded,
    buffer_assignment: Option<raw::BufferAssignmentProto>,
    encoded_len: usize,
    charged: Option<u64>,
) -> Result<Module> {
    let name = module.name.clone();
    let in_module = |e: Error| e.in_module(&name);
    limits::check(Limit::Computations, module.computations.len() as u64, Location::default).map_err(in_module)?;
    let computations = std::mem::take(&mut module.computations)
        .into_iter()
        .map(|bytes| {
            let c = raw::HloComputationProtoEncoded::decode(bytes)
                .map_err(|e| Error::new(ErrorKind::Decode(e), Location::default()))?;
            Ok(comp_parts!(c))
        })
        .collect::<Result<Vec<_>>>()
        .map_err(in_module)?;
    let parts = module_parts!(module, computations);
    build(parts, buffer_assignment, encoded_len, charged).map_err(in_module)
}

/// XLA's 64-bit ids to the arena's: hashbrown's foldhash, seeded per process like std's SipHash
/// but several times faster on integer keys (a module has tens of thousands).
type IdMap<V> = hashbrown::HashMap<i64, V>;

/// Instructions converted on one worker before the next takes over (a module of a few hundred
/// instructions is converted on the calling thread).
const CONVERT_MIN_LEN: usize = 256;

/// The first failure of a parallel conversion: decode errors first, then by instruction index
/// (the order a sequential conversion would have met them in).
type FirstFailure = std::sync::Mutex<Option<((bool, usize), Error)>>;

fn note_failure(first: &FirstFailure, key: (bool, usize), error: Error) {
    let mut slot = first.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if slot.as_ref().is_none_or(|(k, _)| key < *k) {
        *slot = Some((key, error));
    }
}

/// One instruction from what was read of it and its converted shape. Operands are resolved
/// later, from the ids returned beside it.
fn instruction(read: Read, shape: Shape, iid: InstrId, cid: CompId) -> (Instruction, wire::Links) {
    let Read { fields, encoded, full } = read;
    let instr = Instruction {
        id: iid,
        computation: cid,
        opcode: fields.opcode,
        shape,
        operands: Box::default(),
        control_predecessors: Box::default(),
        called: Box::default(),
        users: Vec::new(),
        fusion_kind: fields.fusion_kind,
        attrs: fields.attrs,
        encoded,
        full: full.map(std::sync::OnceLock::from).unwrap_or_default(),
    };
    (instr, fields.links)
}

/// Builds a module from its parts; `charged` is what the census of the `encoded_len` bytes they
/// were decoded from was charged to the memory budget, when it was (what the build adds is
/// charged on top).
fn build<I: InstructionSource>(
    module: ModuleParts<I>,
    buffer_assignment: Option<raw::BufferAssignmentProto>,
    encoded_len: usize,
    charged: Option<u64>,
) -> Result<Module> {
    let ModuleParts {
        name,
        entry_computation_name,
        computations: comp_protos,
        host_program_shape,
        id,
        entry_computation_id,
        schedule,
        input_output_alias,
        stack_frame_index,
        buffer_donor,
        device_type,
    } = module;
    limits::check(Limit::Computations, comp_protos.len() as u64, Location::default)?;
    let total: usize = comp_protos.iter().map(|c| c.instructions.len()).sum();
    limits::check(Limit::Instructions, total as u64, Location::default)?;
    let mut warnings = Vec::new();

    // Computations, keyed by their 64-bit ids.
    let mut comp_ids: IdMap<CompId> = IdMap::with_capacity(comp_protos.len());
    let mut computation_by_name: HashMap<String, CompId> = HashMap::with_capacity(comp_protos.len());
    for (ci, c) in comp_protos.iter().enumerate() {
        let cid = CompId(ci as u32);
        if comp_ids.insert(c.id, cid).is_some() {
            return Err(dup("computation", c.id, Location::default().with_computation(&c.name)));
        }
        computation_by_name.entry(c.name.clone()).or_insert(cid);
    }

    // The instruction arena, every instruction converted on its own (in parallel for a large
    // module); operands are resolved in a second pass.
    let mut computations: Vec<Computation> = Vec::with_capacity(comp_protos.len());
    let mut jobs: Vec<(CompId, I)> = Vec::with_capacity(total);
    let mut root_ids = Vec::with_capacity(comp_protos.len());
    for (ci, c) in comp_protos.into_iter().enumerate() {
        let cid = CompId(ci as u32);
        let first = jobs.len() as u32;
        jobs.extend(c.instructions.into_iter().map(|source| (cid, source)));
        root_ids.push(c.root_id);
        computations.push(Computation {
            id: cid,
            unique_id: c.id,
            name: c.name,
            instructions: (first..jobs.len() as u32).map(InstrId).collect(),
            order: Vec::new(),
            root: None,
            is_fusion: c.is_fusion,
            callers: Vec::new(),
            kind: ComputationKind::Unreachable,
            execution_thread: c.execution_thread,
        });
    }
    let failure: FirstFailure = std::sync::Mutex::new(None);
    let shape_allowance = charged.map_or(u64::MAX, |c| limits::module_budget(encoded_len).saturating_sub(c));
    let meter = ShapeMeter::new(shape_allowance);
    let mut instructions: Vec<Instruction> = Vec::with_capacity(total);
    let mut links: Vec<wire::Links> = Vec::with_capacity(total);
    jobs.into_par_iter()
        .with_min_len(CONVERT_MIN_LEN)
        .enumerate()
        .map(|(idx, (cid, source))| {
            let iid = InstrId(idx as u32);
            let comp_loc = || Location::default().with_computation(&computations[cid.index()].name);
            let mut read = match source.read(&meter) {
                Ok(read) => read,
                Err(ReadError::Decode(e)) => {
                    note_failure(&failure, (false, idx), Error::new(ErrorKind::Decode(e), comp_loc()));
                    return placeholder(iid, cid, Attrs::default());
                }
                Err(ReadError::Budget) => {
                    // What was charged before, and the charge refused.
                    let budget = limits::module_budget(encoded_len);
                    let needed = (budget - meter.left().min(budget)).saturating_add(meter.refused());
                    let kind = ErrorKind::MemoryBudget { needed, budget, encoded_bytes: encoded_len as u64 };
                    note_failure(&failure, (false, idx), Error::new(kind, comp_loc()));
                    return placeholder(iid, cid, Attrs::default());
                }
            };
            let shape = match read.fields.shape.take().map(Shape::from_proto_owned) {
                Some(Ok(shape)) => shape,
                Some(Err(e)) => {
                    note_failure(
                        &failure,
                        (true, idx),
                        relocate(e, comp_loc().with_instruction(read.fields.attrs.name.as_ref())),
                    );
                    return placeholder(iid, cid, read.fields.attrs);
                }
                None => Shape::tuple(Vec::new()),
            };
            instruction(read, shape, iid, cid)
        })
        .unzip_into_vecs(&mut instructions, &mut links);
    let failure = failure.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    // A decode error stops the build before any check; a duplicate id is met before a failed
    // conversion of the same or a later instruction.
    let convert_failed_at = match failure {
        Some(((false, _), e)) => return Err(e),
        Some(((true, idx), e)) => Some((idx, e)),
        None => None,
    };
    let mut local_ids: Vec<IdMap<InstrId>> = Vec::with_capacity(computations.len());
    for comp in &computations {
        let mut ids: IdMap<InstrId> = IdMap::with_capacity(comp.instructions.len());
        for &iid in &comp.instructions {
            if convert_failed_at.as_ref().is_some_and(|(idx, _)| *idx < iid.index()) {
                break;
            }
            let a = &instructions[iid.index()].attrs;
            if ids.insert(a.unique_id, iid).is_some() {
                return Err(dup(
                    "instruction",
                    a.unique_id,
                    Location::default().with_computation(&comp.name).with_instruction(&*a.name),
                ));
            }
        }
        local_ids.push(ids);
    }
    if let Some((_, e)) = convert_failed_at {
        return Err(e);
    }
    let mut omitted = 0;
    for instr in &instructions {
        if instr.opcode == Opcode::Other {
            note(&mut warnings, &mut omitted, || Warning {
                kind: WarningKind::UnknownOpcode(instr.opcode_name().to_owned()),
                location: Location::default()
                    .with_computation(&computations[instr.computation.index()].name)
                    .with_instruction(instr.name()),
            });
        }
    }

    // Resolve operands, control edges and called computations.
    let failure: FirstFailure = std::sync::Mutex::new(None);
    instructions.par_iter_mut().zip(links).with_min_len(CONVERT_MIN_LEN).enumerate().for_each(
        |(idx, (instr, links))| {
            let ids = &local_ids[instr.computation.index()];
            let loc = |instr: &Instruction| {
                Location::default()
                    .with_computation(&computations[instr.computation.index()].name)
                    .with_instruction(instr.name())
            };
            let encoded = &instr.encoded;
            // Each list allocated at its size once (a boxed slice: an instruction holds three).
            fn resolve<T: Copy>(
                what: &'static str,
                v: &wire::Ids,
                encoded: &[u8],
                map: &IdMap<T>,
            ) -> std::result::Result<Box<[T]>, (&'static str, i64)> {
                let mut out = Vec::with_capacity(v.len(encoded));
                for id in v.values(encoded) {
                    out.push(map.get(&id).copied().ok_or((what, id))?);
                }
                Ok(out.into_boxed_slice())
            }
            let resolved = resolve("operand id", &links.operand_ids, encoded, ids).and_then(|operands| {
                let control = resolve("control predecessor id", &links.control_predecessor_ids, encoded, ids)?;
                let called = resolve("called computation id", &links.called_computation_ids, encoded, &comp_ids)?;
                Ok((operands, control, called))
            });
            match resolved {
                Ok((operands, control, called)) => {
                    instr.operands = operands;
                    instr.control_predecessors = control;
                    instr.called = called;
                }
                Err((what, id)) => note_failure(&failure, (true, idx), dangling(what, id, loc(instr))),
            }
        },
    );
    if let Some((_, e)) = failure.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()) {
        return Err(e);
    }
    for (ci, root_id) in root_ids.into_iter().enumerate() {
        let comp = &mut computations[ci];
        if comp.instructions.is_empty() {
            continue;
        }
        match local_ids[ci].get(&root_id) {
            Some(&r) => comp.root = Some(r),
            None => return Err(dangling("root id", root_id, Location::default().with_computation(&comp.name))),
        }
    }

    // Users, each once per user, in module order.
    let mut ops = Vec::new();
    for idx in 0..instructions.len() {
        let user = InstrId(idx as u32);
        ops.clear();
        ops.extend_from_slice(&instructions[idx].operands);
        ops.sort_unstable();
        ops.dedup();
        for &op in &ops {
            instructions[op.index()].users.push(user);
        }
    }

    // The entry computation: by id, else by name, else the last one.
    let by_id = comp_ids.get(&entry_computation_id).copied();
    let by_name = computation_by_name.get(&entry_computation_name).copied();
    let entry = match (by_id, by_name) {
        (Some(a), Some(b)) if a != b => b,
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) if entry_computation_name.is_empty() && !computations.is_empty() => {
            CompId((computations.len() - 1) as u32)
        }
        _ => return Err(Error::new(ErrorKind::NoEntry(entry_computation_name), Location::default())),
    };
    // Each computation's order of execution, when the module is scheduled (ids the
    // computation does not hold are skipped).
    let mut sequences = schedule.map(|s| s.sequences).unwrap_or_default();
    let schedules: Vec<Vec<InstrId>> = computations
        .iter()
        .zip(&local_ids)
        .map(|(c, ids)| {
            sequences
                .remove(&c.unique_id)
                .map(|seq| seq.instruction_ids.iter().filter_map(|id| ids.get(id).copied()).collect())
                .unwrap_or_default()
        })
        .collect();
    drop(local_ids);

    let by_name = NameIndex::build(&instructions, |instr| {
        note(&mut warnings, &mut omitted, || Warning {
            kind: WarningKind::DuplicateName(instr.name().to_owned()),
            location: Location::default().with_computation(&computations[instr.computation.index()].name),
        })
    });

    for comp in &mut computations {
        comp.order = graph::topological_order(&instructions, &comp.instructions)
            .map_err(|e| relocate(e, Location::default().with_computation(&comp.name)))?;
    }
    let post_order = graph::call_graph(&instructions, &mut computations, entry)?;

    let aliases = input_output_alias
        .map(|a| {
            a.entries
                .into_iter()
                .map(|e| IoAlias {
                    output_index: e.output_shape_index,
                    parameter: e.parameter_number.max(0) as u64,
                    parameter_index: e.parameter_shape_index,
                    kind: match e.kind {
                        1 => AliasKind::MayAlias,
                        2 => AliasKind::MustAlias,
                        _ => AliasKind::Undefined,
                    },
                })
                .collect()
        })
        .unwrap_or_default();
    let donors = buffer_donor
        .map(|d| {
            d.entries
                .into_iter()
                .map(|e| BufferDonor {
                    parameter: e.parameter_number.max(0) as u64,
                    parameter_index: e.parameter_shape_index,
                })
                .collect()
        })
        .unwrap_or_default();

    let mut module = Module {
        name,
        id,
        program_id: None,
        profile_name: None,
        entry,
        computations,
        instructions,
        by_name,
        computation_by_name,
        post_order,
        costs: Vec::new(),
        gpu_costs: std::sync::OnceLock::new(),
        hbm_stats: std::sync::OnceLock::new(),
        elementwise: Vec::new(),
        collectives: Vec::new(),
        aliases,
        donors,
        stack_frames: stack_frame_index.unwrap_or_default(),
        host_program_shape,
        buffer_assignment,
        device_type,
        warnings,
        encoded_len,
        schedules,
    };
    module.elementwise = graph::elementwise(&module);
    module.costs = cost::compute(&module, cost::CostModel::Xla);
    // A collective's whole proto is decoded and kept (its replica groups are read from it).
    let collective_count = module.instructions.iter().filter(|i| i.opcode.is_collective()).count() as u64;
    let collective_cost = (std::mem::size_of::<raw::HloInstructionProto>() + std::mem::size_of::<Collective>()) as u64;
    if let Some(charged) = charged {
        let shapes = shape_allowance - meter.left();
        let needed = charged.saturating_add(shapes).saturating_add(collective_count * collective_cost);
        limits::check_charge(encoded_len, needed, Location::default)?;
    }
    let (collectives, mut more) = collectives(&module)?;
    module.collectives = collectives;
    more.extend(crate::source::check_stack_frames(&module));
    for warning in more {
        note(&mut module.warnings, &mut omitted, || warning);
    }
    if omitted > 0 {
        module.warnings.push(Warning { kind: WarningKind::WarningsOmitted(omitted), location: Location::default() });
    }
    Ok(module)
}

/// Keeps the warning `make` builds while fewer than [`limits::MAX_WARNINGS_PER_MODULE`] are
/// kept, else only counts it (each names its computation and instruction: a module of many odd
/// instructions would otherwise copy those names once per instruction).
fn note(warnings: &mut Vec<Warning>, omitted: &mut u64, make: impl FnOnce() -> Warning) {
    if warnings.len() < limits::MAX_WARNINGS_PER_MODULE {
        warnings.push(make());
    } else {
        *omitted += 1;
    }
}

/// What stands in the arena for an instruction that failed to convert (the build then fails).
#[cold]
fn placeholder(id: InstrId, computation: CompId, attrs: Attrs) -> (Instruction, wire::Links) {
    let instr = Instruction {
        id,
        computation,
        opcode: Opcode::Other,
        shape: Shape::tuple(Vec::new()),
        operands: Box::default(),
        control_predecessors: Box::default(),
        called: Box::default(),
        users: Vec::new(),
        fusion_kind: None,
        attrs,
        encoded: Bytes::new(),
        full: std::sync::OnceLock::new(),
    };
    (instr, wire::Links::default())
}

#[cold]
fn dup(what: &'static str, id: i64, location: Location) -> Error {
    Error::new(ErrorKind::DuplicateId { what, id }, location)
}

#[cold]
fn dangling(what: &'static str, id: i64, location: Location) -> Error {
    Error::new(ErrorKind::DanglingId { what, id }, location)
}

fn relocate(e: Error, location: Location) -> Error {
    e.at(location)
}

/// Collectives of a module and warnings for groups that could not be expanded. Their groups are
/// in the part of the proto the model reads on demand, so a collective whose proto does not
/// decode fails the build, as any instruction did before the fast path.
fn collectives(module: &Module) -> Result<(Vec<Collective>, Vec<Warning>)> {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for instr in module.instructions() {
        if !instr.opcode().is_collective() {
            continue;
        }
        let raw = instr.raw().map_err(|e| {
            relocate(e, Location::default().with_computation(module.computation(instr.computation()).name()))
        })?;
        let (groups, encoding) = match collective::replica_groups(raw) {
            Ok(v) => v,
            Err(why) => {
                note(&mut warnings, &mut 0, || Warning {
                    kind: WarningKind::InvalidReplicaGroups(why),
                    location: Location::default()
                        .with_computation(module.computation(instr.computation()).name())
                        .with_instruction(instr.name()),
                });
                (Vec::new(), GroupEncoding::Invalid)
            }
        };
        out.push(Collective {
            instruction: instr.id(),
            opcode: instr.opcode(),
            channel_id: instr.channel_id(),
            use_global_device_ids: raw.use_global_device_ids,
            replica_groups: groups,
            encoding,
            source_target_pairs: raw.source_target_pairs.iter().map(|p| (p.source, p.target)).collect(),
        });
    }
    Ok((out, warnings))
}

#[cfg(test)]
mod strict_tests {
    use super::*;

    #[test]
    fn the_hlo_schema_builds_from_the_compiled_descriptor() {
        let strict = Strict::new();
        assert!(strict.schema.is_some() && strict.proto.is_some() && strict.module.is_some());
    }

    /// A field the model skips (an instruction's `OpMetadata.op_name`, here sent with wire
    /// type 7 in place of its key, the length unchanged) fails the decode as prost's decode of
    /// the proto fails, with the message named.
    #[test]
    fn a_malformed_field_the_model_skips_fails_the_decode() {
        let bytes = crate::testing::tiny_module_bytes();
        assert!(Module::decode(bytes.clone().into()).is_ok());
        let name = b"jit(f)/dot_general";
        let at = bytes.windows(name.len() + 2).position(|w| w[0] == 0x12 && w[1] == 18 && &w[2..] == name).unwrap();
        let mut bad = bytes.clone();
        bad[at] = 0x17;
        assert!(<raw::HloProto as prost::Message>::decode(&bad[..]).is_err());
        let e = Module::decode(bad.clone().into()).unwrap_err();
        match e.kind() {
            ErrorKind::Malformed { path, offset, .. } => {
                assert!(path.starts_with("HloProto.hlo_module.computations[") && path.ends_with(".metadata"), "{path}");
                assert_eq!(*offset, at);
            }
            other => panic!("{other}"),
        }
        assert!(e.is_decode());
    }

    /// A string the model skips that is not UTF-8 (here an instruction's `OpMetadata.op_name`)
    /// fails the decode, as prost's decode of the proto fails (the campaign's seed 4042 found it
    /// in a program shape's parameter names).
    #[test]
    fn a_string_that_is_not_utf8_fails_the_decode() {
        let bytes = crate::testing::tiny_module_bytes();
        let name = b"jit(f)/dot_general";
        let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
        let mut bad = bytes.clone();
        bad[at + 3] = 0xff;
        assert!(<raw::HloProto as prost::Message>::decode(&bad[..]).is_err());
        let e = Module::decode(bad.into()).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Malformed { why, .. } if why.contains("UTF-8")), "{e}");
    }
}
