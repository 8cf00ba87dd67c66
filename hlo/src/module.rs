//! [`Module`]: a decoded HLO module as a graph of computations and instructions.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use bytes::Bytes;
use prost::Message;

use crate::collective::Collective;
use crate::cost_types::Cost;
use crate::error::{Error, ErrorKind, Location, Result, Warning};
use crate::ids::{CompId, InstrId, UniqueId};
use crate::opcode::{FusionKind, OpClass, Opcode};
use crate::raw;
use crate::shape::Shape;

/// How a computation is used by the instruction that calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ComputationKind {
    /// The module's entry computation.
    Entry,
    /// The body of a `fusion` instruction.
    Fusion,
    /// The body of a `while` loop.
    WhileBody,
    /// The condition of a `while` loop.
    WhileCondition,
    /// A branch of a `conditional`.
    Branch,
    /// The callee of a `call`.
    Call,
    /// The computation an `async-start` runs.
    Async,
    /// A function applied per element or per reduction (`to_apply` of `reduce`, `map`, `sort`,
    /// `scatter`, `all-reduce`, `select-and-scatter`, ...).
    Applied,
    /// Called by an instruction of another kind (a custom call's computation, ...).
    Other,
    /// Not reachable from the entry computation.
    Unreachable,
}

impl ComputationKind {
    /// A short lowercase name (`"fusion"`, `"while_body"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ComputationKind::Entry => "entry",
            ComputationKind::Fusion => "fusion",
            ComputationKind::WhileBody => "while_body",
            ComputationKind::WhileCondition => "while_condition",
            ComputationKind::Branch => "branch",
            ComputationKind::Call => "call",
            ComputationKind::Async => "async",
            ComputationKind::Applied => "applied",
            ComputationKind::Other => "other",
            ComputationKind::Unreachable => "unreachable",
        }
    }
}

/// What the model keeps of an instruction's proto, for every instruction (the rest of the proto
/// is decoded when [`Instruction::raw`] asks for it). Fields few instructions set are in
/// [`Rare`], allocated only for those.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Attrs {
    pub(crate) unique_id: i64,
    pub(crate) name: Box<str>,
    pub(crate) op_name: Box<str>,
    pub(crate) op_type: Box<str>,
    pub(crate) stack_frame_id: i32,
    pub(crate) parameter_number: i64,
    pub(crate) tuple_index: i64,
    pub(crate) dimensions: Vec<i64>,
    pub(crate) rare: Option<Box<Rare>>,
}

/// The attributes of custom calls, convolutions, dots, compares, collectives and fusions (their
/// backend config): set on a minority of instructions, so kept out of line.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Rare {
    /// The opcode's spelling when it is not a known one.
    pub(crate) unknown_opcode: Box<str>,
    pub(crate) is_host_transfer: bool,
    pub(crate) channel_id: i64,
    pub(crate) feature_group_count: i64,
    pub(crate) batch_group_count: i64,
    pub(crate) fft_length: Vec<i64>,
    pub(crate) custom_call_target: Box<str>,
    pub(crate) comparison_direction: Box<str>,
    /// A window into the module's bytes (never a copy).
    pub(crate) backend_config: Bytes,
    pub(crate) window: Option<Box<raw::Window>>,
    pub(crate) convolution_dimension_numbers: Option<Box<raw::ConvolutionDimensionNumbers>>,
    pub(crate) dot_dimension_numbers: Option<Box<raw::DotDimensionNumbers>>,
}

impl Attrs {
    /// The rare attributes, allocated on first write.
    pub(crate) fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Drops the rare part when every field of it is unset (written with its default value),
    /// so that an instruction reads the same however its proto spelled its defaults.
    pub(crate) fn settle(&mut self) {
        if self.rare.as_deref().is_some_and(|r| *r == Rare::default()) {
            self.rare = None;
        }
    }

    /// The attributes of an already decoded proto (copied: the proto itself is kept whole).
    pub(crate) fn from_proto(p: &raw::HloInstructionProto) -> Attrs {
        let metadata = p.metadata.as_ref();
        let mut attrs = Attrs {
            unique_id: p.id,
            name: p.name.as_str().into(),
            op_name: metadata.map_or("", |m| m.op_name.as_str()).into(),
            op_type: metadata.map_or("", |m| m.op_type.as_str()).into(),
            stack_frame_id: metadata.map_or(0, |m| m.stack_frame_id),
            parameter_number: p.parameter_number,
            tuple_index: p.tuple_index,
            dimensions: p.dimensions.clone(),
            rare: Some(Box::new(Rare {
                unknown_opcode: Box::default(),
                is_host_transfer: p.is_host_transfer,
                channel_id: p.channel_id,
                feature_group_count: p.feature_group_count,
                batch_group_count: p.batch_group_count,
                fft_length: p.fft_length.clone(),
                custom_call_target: p.custom_call_target.as_str().into(),
                comparison_direction: p.comparison_direction.as_str().into(),
                backend_config: p.backend_config.clone(),
                window: p.window.clone(),
                convolution_dimension_numbers: p.convolution_dimension_numbers.clone(),
                dot_dimension_numbers: p.dot_dimension_numbers.clone(),
            })),
        };
        attrs.settle();
        attrs
    }

    fn rare(&self) -> Option<&Rare> {
        self.rare.as_deref()
    }

    pub(crate) fn channel_id(&self) -> i64 {
        self.rare().map_or(0, |r| r.channel_id)
    }

    pub(crate) fn feature_group_count(&self) -> i64 {
        self.rare().map_or(0, |r| r.feature_group_count)
    }

    pub(crate) fn batch_group_count(&self) -> i64 {
        self.rare().map_or(0, |r| r.batch_group_count)
    }

    pub(crate) fn fft_length(&self) -> &[i64] {
        self.rare().map_or(&[], |r| &r.fft_length)
    }

    pub(crate) fn custom_call_target(&self) -> &str {
        self.rare().map_or("", |r| &r.custom_call_target)
    }

    pub(crate) fn comparison_direction(&self) -> &str {
        self.rare().map_or("", |r| &r.comparison_direction)
    }

    pub(crate) fn unknown_opcode(&self) -> &str {
        self.rare().map_or("", |r| &r.unknown_opcode)
    }

    pub(crate) fn backend_config(&self) -> &[u8] {
        self.rare().map_or(&[], |r| &r.backend_config)
    }

    pub(crate) fn window(&self) -> Option<&raw::Window> {
        self.rare().and_then(|r| r.window.as_deref())
    }

    pub(crate) fn convolution_dimension_numbers(&self) -> Option<&raw::ConvolutionDimensionNumbers> {
        self.rare().and_then(|r| r.convolution_dimension_numbers.as_deref())
    }

    pub(crate) fn dot_dimension_numbers(&self) -> Option<&raw::DotDimensionNumbers> {
        self.rare().and_then(|r| r.dot_dimension_numbers.as_deref())
    }

    pub(crate) fn is_host_transfer(&self) -> bool {
        self.rare().is_some_and(|r| r.is_host_transfer)
    }
}

/// One instruction: its opcode, shape, operands and users, the attributes the model reads, and
/// the bytes of the proto it came from.
#[derive(Debug)]
pub struct Instruction {
    pub(crate) id: InstrId,
    pub(crate) computation: CompId,
    pub(crate) opcode: Opcode,
    pub(crate) shape: Shape,
    pub(crate) operands: Box<[InstrId]>,
    pub(crate) control_predecessors: Box<[InstrId]>,
    pub(crate) called: Box<[CompId]>,
    pub(crate) users: Vec<InstrId>,
    pub(crate) fusion_kind: Option<FusionKind>,
    pub(crate) attrs: Attrs,
    /// The encoded `HloInstructionProto` (a window into the module's bytes; empty when the
    /// module was built from decoded protos, whose instructions are kept in `full`).
    pub(crate) encoded: Bytes,
    /// The whole proto, decoded from `encoded` on first use.
    pub(crate) full: OnceLock<Box<raw::HloInstructionProto>>,
}

impl Instruction {
    /// This instruction's id in its module.
    pub fn id(&self) -> InstrId {
        self.id
    }

    /// The id XLA stored (`HloInstructionProto.id`).
    pub fn unique_id(&self) -> UniqueId {
        UniqueId(self.attrs.unique_id)
    }

    /// The instruction name, unique in its module (e.g. `"fusion.12"`, `"dot.3"`).
    pub fn name(&self) -> &str {
        &self.attrs.name
    }

    /// The opcode ([`Opcode::Other`] when unknown; see [`Instruction::opcode_name`]).
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// The opcode string as stored (`"all-reduce-start"`).
    pub fn opcode_name(&self) -> &str {
        if self.opcode == Opcode::Other { self.attrs.unknown_opcode() } else { self.opcode.as_str() }
    }

    /// The result shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The computation holding this instruction.
    pub fn computation(&self) -> CompId {
        self.computation
    }

    /// Operands, in order (an operand used twice appears twice).
    pub fn operands(&self) -> &[InstrId] {
        &self.operands
    }

    /// Instructions that must run before this one without a data edge.
    pub fn control_predecessors(&self) -> &[InstrId] {
        &self.control_predecessors
    }

    /// Instructions that use this one as an operand, each once, in module order.
    pub fn users(&self) -> &[InstrId] {
        &self.users
    }

    /// Computations this instruction calls: a fusion's body, a while's body and condition (in
    /// that order), a conditional's branches, a reduce's reducer, ...
    pub fn called_computations(&self) -> &[CompId] {
        &self.called
    }

    /// The fusion kind of a `fusion` instruction.
    pub fn fusion_kind(&self) -> Option<FusionKind> {
        self.fusion_kind
    }

    /// The framework name scope, e.g. `"jit(train_step)/jvp(mlp)/dot_general"` (empty if unset).
    pub fn op_name(&self) -> &str {
        &self.attrs.op_name
    }

    /// The framework op type (often empty for JAX).
    pub fn op_type(&self) -> &str {
        &self.attrs.op_type
    }

    /// The `stack_frame_id` of the metadata (1-based; 0 when unset).
    pub fn stack_frame_id(&self) -> i32 {
        self.attrs.stack_frame_id
    }

    /// The parameter number of a `parameter`.
    pub fn parameter_number(&self) -> Option<u64> {
        (self.opcode == Opcode::Parameter).then(|| self.attrs.parameter_number.max(0) as u64)
    }

    /// The tuple index of a `get-tuple-element`.
    pub fn tuple_index(&self) -> Option<u64> {
        (self.opcode == Opcode::GetTupleElement).then(|| self.attrs.tuple_index.max(0) as u64)
    }

    /// The `dimensions` attribute (broadcast, reduce, transpose, reverse, concatenate, ...).
    pub fn dimensions(&self) -> &[i64] {
        &self.attrs.dimensions
    }

    /// The channel id, when positive (non-positive means none).
    pub fn channel_id(&self) -> Option<i64> {
        let id = self.attrs.channel_id();
        (id > 0).then_some(id)
    }

    /// The target of a `custom-call`.
    pub fn custom_call_target(&self) -> Option<&str> {
        (self.opcode == Opcode::CustomCall).then(|| self.attrs.custom_call_target())
    }

    /// The dimension numbers of a `dot`.
    pub fn dot_dimension_numbers(&self) -> Option<&raw::DotDimensionNumbers> {
        self.attrs.dot_dimension_numbers()
    }

    /// The dimension numbers of a `convolution`.
    pub fn convolution_dimension_numbers(&self) -> Option<&raw::ConvolutionDimensionNumbers> {
        self.attrs.convolution_dimension_numbers()
    }

    /// The window of a `convolution`, `reduce-window` or `select-and-scatter`.
    pub fn window(&self) -> Option<&raw::Window> {
        self.attrs.window()
    }

    /// The comparison direction of a `compare` (`"LT"`, `"EQ"`, ...).
    pub fn comparison_direction(&self) -> Option<&str> {
        (self.opcode == Opcode::Compare).then(|| self.attrs.comparison_direction())
    }

    /// True for a `send`, `recv` or their `-done` that moves data to or from the host
    /// (`is_host_transfer`).
    pub fn is_host_transfer(&self) -> bool {
        self.attrs.is_host_transfer()
    }

    /// The whole proto this instruction was built from, for fields the model does not expose.
    /// It is decoded from the module's bytes on first use and kept; the error is a field the
    /// model does not read that does not decode.
    ///
    /// ```
    /// use xlens_hlo::{Module, testing};
    /// let module = Module::decode(testing::tiny_module_bytes().into())?;
    /// let dot = module.instruction_by_name("dot.1").unwrap();
    /// assert_eq!(dot.raw()?.metadata.as_ref().map(|m| m.stack_frame_id), Some(2));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn raw(&self) -> Result<&raw::HloInstructionProto> {
        if let Some(full) = self.full.get() {
            return Ok(full);
        }
        let full = raw::HloInstructionProto::decode(self.encoded.clone())
            .map_err(|e| Error::new(ErrorKind::Decode(e), Location::default().with_instruction(self.name())))?;
        Ok(self.full.get_or_init(|| Box::new(full)))
    }

    /// True when the name marks an XLA rematerialization (`.remat` in the name, facts §4.2), or
    /// the framework name scope contains `rematted_computation`.
    pub fn is_remat(&self) -> bool {
        self.name().contains(".remat") || self.op_name().contains("rematted_computation")
    }
}

/// One computation: its instructions, root and how it is called.
#[derive(Debug)]
pub struct Computation {
    pub(crate) id: CompId,
    pub(crate) unique_id: i64,
    pub(crate) name: String,
    pub(crate) instructions: Vec<InstrId>,
    pub(crate) order: Vec<InstrId>,
    pub(crate) root: Option<InstrId>,
    pub(crate) is_fusion: bool,
    pub(crate) callers: Vec<InstrId>,
    pub(crate) kind: ComputationKind,
    pub(crate) execution_thread: String,
}

impl Computation {
    /// This computation's id in its module.
    pub fn id(&self) -> CompId {
        self.id
    }

    /// The id XLA stored (`HloComputationProto.id`).
    pub fn unique_id(&self) -> i64 {
        self.unique_id
    }

    /// The computation name (e.g. `"main.40"`, `"fused_computation.3"`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Instructions in the order the proto lists them.
    pub fn instructions(&self) -> &[InstrId] {
        &self.instructions
    }

    /// Instructions in topological order: operands and control predecessors before users,
    /// ties broken by proto order.
    pub fn topological_order(&self) -> &[InstrId] {
        &self.order
    }

    /// The root (the computation's result); `None` only for an empty computation.
    pub fn root(&self) -> Option<InstrId> {
        self.root
    }

    /// True for a fusion body (flagged in the proto, or called by a `fusion`).
    pub fn is_fusion(&self) -> bool {
        self.is_fusion
    }

    /// Instructions that call this computation, in module order.
    pub fn callers(&self) -> &[InstrId] {
        &self.callers
    }

    /// How this computation is used (from its first caller).
    pub fn kind(&self) -> ComputationKind {
        self.kind
    }

    /// The execution thread (empty for the main thread).
    pub fn execution_thread(&self) -> &str {
        &self.execution_thread
    }
}

/// The kind of an input/output alias (`HloInputOutputAliasProto` `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AliasKind {
    /// The buffers may alias at runtime (JAX donation).
    MayAlias,
    /// The buffers must alias.
    MustAlias,
    /// Kind not set.
    Undefined,
}

impl AliasKind {
    /// The HLO text spelling (`"may-alias"`).
    pub fn as_str(self) -> &'static str {
        match self {
            AliasKind::MayAlias => "may-alias",
            AliasKind::MustAlias => "must-alias",
            AliasKind::Undefined => "undefined",
        }
    }
}

/// An entry-computation output that reuses (aliases) a parameter's buffer: donation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoAlias {
    /// Shape index of the output inside the root's (tuple) shape.
    pub output_index: Vec<i64>,
    /// The entry parameter number.
    pub parameter: u64,
    /// Shape index inside the parameter.
    pub parameter_index: Vec<i64>,
    /// May or must alias.
    pub kind: AliasKind,
}

/// An entry parameter (buffer) declared donatable without a paired output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferDonor {
    /// The entry parameter number.
    pub parameter: u64,
    /// Shape index inside the parameter.
    pub parameter_index: Vec<i64>,
}

/// The instructions by name, over the module's arena: each entry is an instruction id, hashed
/// by that instruction's name, so no name is copied. On a clash, the first instruction.
#[derive(Clone, Debug, Default)]
pub(crate) struct NameIndex {
    table: hashbrown::HashTable<InstrId>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl NameIndex {
    /// Indexes `instructions` by name; `on_duplicate` hears of each instruction whose name an
    /// earlier one already holds (it is left out).
    pub(crate) fn build(instructions: &[Instruction], mut on_duplicate: impl FnMut(&Instruction)) -> NameIndex {
        let mut index =
            NameIndex { table: hashbrown::HashTable::with_capacity(instructions.len()), hasher: Default::default() };
        for instr in instructions {
            let hash = index.hasher.hash_one(instr.name());
            let name_of = |id: &InstrId| instructions[id.index()].name();
            match index.table.entry(hash, |id| name_of(id) == instr.name(), |id| index.hasher.hash_one(name_of(id))) {
                hashbrown::hash_table::Entry::Occupied(_) => on_duplicate(instr),
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert(instr.id);
                }
            }
        }
        index
    }

    /// The instruction named `name`.
    pub(crate) fn get(&self, instructions: &[Instruction], name: &str) -> Option<InstrId> {
        let hash = self.hasher.hash_one(name);
        self.table.find(hash, |id| instructions[id.index()].name() == name).copied()
    }
}

/// A decoded HLO module: computations, an instruction arena with typed ids, the call graph,
/// per-instruction costs, collectives and aliasing, and the raw buffer assignment.
///
/// Built once by [`Module::decode`] (or from a profile, [`crate::modules_from_space`]) and
/// read-only afterwards.
#[derive(Debug)]
pub struct Module {
    pub(crate) name: String,
    pub(crate) id: i64,
    pub(crate) program_id: Option<u64>,
    pub(crate) profile_name: Option<String>,
    pub(crate) entry: CompId,
    pub(crate) computations: Vec<Computation>,
    pub(crate) instructions: Vec<Instruction>,
    pub(crate) by_name: NameIndex,
    pub(crate) computation_by_name: HashMap<String, CompId>,
    pub(crate) post_order: Vec<CompId>,
    pub(crate) costs: Vec<Cost>,
    /// Costs under XLA's GPU cost analysis and their HBM bytes, computed on first use (GPU
    /// profiles only).
    pub(crate) gpu_costs: std::sync::OnceLock<(Vec<Cost>, Vec<u64>)>,
    /// [`Module::hbm_memory_stats`], once replayed.
    pub(crate) hbm_stats: OnceLock<Option<crate::memory_types::MemoryStats>>,
    pub(crate) elementwise: Vec<bool>,
    pub(crate) collectives: Vec<Collective>,
    pub(crate) aliases: Vec<IoAlias>,
    pub(crate) donors: Vec<BufferDonor>,
    pub(crate) stack_frames: raw::StackFrameIndexProto,
    pub(crate) host_program_shape: Option<raw::ProgramShapeProto>,
    pub(crate) buffer_assignment: Option<raw::BufferAssignmentProto>,
    pub(crate) device_type: String,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) encoded_len: usize,
    pub(crate) schedules: Vec<Vec<InstrId>>,
}

impl Module {
    /// Sets the program id and profile name (`name(program_id)`) a profile keyed this module by.
    pub fn with_program_id(mut self, program_id: u64, profile_name: impl Into<String>) -> Module {
        self.program_id = Some(program_id);
        self.profile_name = Some(profile_name.into());
        self
    }

    /// The module name (`"jit_train_step"`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name XProf shows: `name(program_id)` when the module came from a profile, else the name.
    pub fn display_name(&self) -> String {
        match (&self.profile_name, self.program_id) {
            (Some(n), _) => n.clone(),
            (None, Some(id)) => format!("{}({id})", self.name),
            (None, None) => self.name.clone(),
        }
    }

    /// The module id XLA stored.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The program id the profile keyed this module by.
    pub fn program_id(&self) -> Option<u64> {
        self.program_id
    }

    /// The device type recorded by XLA (often empty).
    pub fn device_type(&self) -> &str {
        &self.device_type
    }

    /// Size of the serialized proto in bytes.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// The entry computation.
    pub fn entry(&self) -> &Computation {
        &self.computations[self.entry.index()]
    }

    /// All computations, in proto order (XLA lists callees before callers).
    pub fn computations(&self) -> &[Computation] {
        &self.computations
    }

    /// A computation by id. Panics on an id from another module.
    pub fn computation(&self, id: CompId) -> &Computation {
        &self.computations[id.index()]
    }

    /// A computation by name.
    pub fn computation_by_name(&self, name: &str) -> Option<&Computation> {
        self.computation_by_name.get(name).map(|&c| self.computation(c))
    }

    /// Every instruction, computations in proto order.
    pub fn instructions(&self) -> &[Instruction] {
        &self.instructions
    }

    /// An instruction by id. Panics on an id from another module.
    pub fn instruction(&self, id: InstrId) -> &Instruction {
        &self.instructions[id.index()]
    }

    /// The instruction with this name (names are unique per module; on a clash, the first).
    ///
    /// CPU and GPU profile events carry the name as stat `hlo_op`; TPU op events are named by it.
    pub fn instruction_by_name(&self, name: &str) -> Option<&Instruction> {
        self.by_name.get(&self.instructions, name).map(|i| self.instruction(i))
    }

    /// A computation's instructions in the order they run, from the module's schedule (empty
    /// when the module carries none, and for fused computations; XLA schedules every module it
    /// compiles).
    pub fn schedule(&self, computation: CompId) -> &[InstrId] {
        self.schedules.get(computation.index()).map_or(&[], Vec::as_slice)
    }

    /// The instructions by the name XLA:GPU gives the kernels it emits for them (see
    /// [`gpu_kernel_name`]), for kernels that carry no usable `hlo_op` stat: those of a CUDA graph
    /// (an XLA command buffer) name the command buffer there. On a clash, the first instruction.
    ///
    /// ```
    /// use xlens_hlo::{Module, PrimitiveType, testing::{HloBuilder, shape}};
    /// let mut b = HloBuilder::new("m");
    /// let mut main = b.computation("main");
    /// let x = main.param("x", 0, shape(PrimitiveType::F32, &[8]));
    /// let y = main.op("input_reduce_fusion.9", "negate", shape(PrimitiveType::F32, &[8]), &[x]);
    /// main.finish(y);
    /// let module = Module::from_proto(b.finish("main"), 0)?;
    /// let by_kernel = module.instructions_by_kernel_name();
    /// let found = by_kernel.get("input_reduce_fusion_9").map(|&i| module.instruction(i).name());
    /// assert_eq!(found, Some("input_reduce_fusion.9"));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn instructions_by_kernel_name(&self) -> std::collections::HashMap<String, InstrId> {
        let mut out = std::collections::HashMap::with_capacity(self.instructions.len());
        for instruction in &self.instructions {
            out.entry(gpu_kernel_name(instruction.name())).or_insert(instruction.id());
        }
        out
    }

    /// Computations in post order: every callee before its callers, the entry last among the
    /// reachable ones, unreachable computations after.
    pub fn computation_post_order(&self) -> &[CompId] {
        &self.post_order
    }

    /// Every instruction exactly once, callees' instructions before their callers' and each
    /// computation's instructions in topological order.
    pub fn topological_order(&self) -> impl Iterator<Item = InstrId> + '_ {
        self.post_order.iter().flat_map(move |&c| self.computation(c).order.iter().copied())
    }

    /// The fusion body of a `fusion` instruction.
    pub fn fused_computation(&self, id: InstrId) -> Option<&Computation> {
        let instr = self.instruction(id);
        if instr.opcode != Opcode::Fusion {
            return None;
        }
        instr.called.first().map(|&c| self.computation(c))
    }

    /// True when the instruction is the root of its computation.
    pub fn is_root(&self, id: InstrId) -> bool {
        self.computation(self.instruction(id).computation).root == Some(id)
    }

    /// True for instructions of the entry computation.
    pub fn is_in_entry(&self, id: InstrId) -> bool {
        self.instruction(id).computation == self.entry
    }

    /// XLA's `IsElementwise` for an instruction: its opcode's answer, and for a fusion, whether
    /// every fused instruction (parameters aside) is elementwise.
    pub fn is_elementwise(&self, id: InstrId) -> bool {
        self.elementwise[id.index()]
    }

    /// The category XLA (and XProf on CPU/GPU traces, facts §4.2) gives an instruction,
    /// `HloInstruction::ToCategory()`: `"data formatting"` for transpose, copy, reshape and
    /// dynamic-reshape; `"non-fusion elementwise"` for elementwise ops (including a fusion whose
    /// body is purely elementwise); otherwise the opcode string, so fusions are `"fusion"`.
    pub fn xla_category(&self, id: InstrId) -> &str {
        let instr = self.instruction(id);
        if instr.opcode.is_data_formatting() {
            "data formatting"
        } else if self.is_elementwise(id) {
            "non-fusion elementwise"
        } else {
            instr.opcode_name()
        }
    }

    /// The cost of one instruction (see [`crate::cost`]).
    pub fn cost(&self, id: InstrId) -> Cost {
        self.costs[id.index()]
    }

    /// The summed cost of a computation's instructions.
    pub fn computation_cost(&self, id: CompId) -> Cost {
        self.computation(id).instructions.iter().fold(Cost::default(), |acc, &i| acc + self.cost(i))
    }

    /// The cost of the whole program: the entry computation's instructions, each including what
    /// it calls (fusion bodies, loop bodies once, the costlier branch). This is the number XLA's
    /// `cost_analysis()` reports.
    pub fn entry_cost(&self) -> Cost {
        self.computation_cost(self.entry)
    }

    /// Collectives (synchronous ones and async `-start`s) with their replica groups, in module
    /// order.
    pub fn collectives(&self) -> &[Collective] {
        &self.collectives
    }

    /// Input/output aliases of the entry computation (donated parameters).
    pub fn input_output_aliases(&self) -> &[IoAlias] {
        &self.aliases
    }

    /// Parameter numbers that alias an output, sorted, each once.
    pub fn aliased_params(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.aliases.iter().map(|a| a.parameter).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Buffer donors declared without a paired output.
    pub fn buffer_donors(&self) -> &[BufferDonor] {
        &self.donors
    }

    /// The entry computation's parameters, by parameter number.
    pub fn entry_parameters(&self) -> Vec<&Instruction> {
        let mut params: Vec<&Instruction> = self
            .entry()
            .instructions
            .iter()
            .map(|&i| self.instruction(i))
            .filter(|i| i.opcode == Opcode::Parameter)
            .collect();
        params.sort_by_key(|i| i.attrs.parameter_number);
        params
    }

    /// The entry computation layout as HLO text prints it: `(param shapes)->result shape`,
    /// e.g. `(f32[8,256]{1,0}, f32[])->(f32[8,256]{1,0})`.
    pub fn entry_computation_layout(&self) -> String {
        let params: Vec<String> = self.entry_parameters().iter().map(|p| p.shape.to_string()).collect();
        let result = self.entry().root.map(|r| self.instruction(r).shape.to_string()).unwrap_or_default();
        format!("({})->{result}", params.join(", "))
    }

    /// The host program shape XLA recorded for the entry computation.
    pub fn host_program_shape(&self) -> Option<&raw::ProgramShapeProto> {
        self.host_program_shape.as_ref()
    }

    /// The module's stack-frame index (empty when the producer recorded none).
    pub fn stack_frame_index(&self) -> &raw::StackFrameIndexProto {
        &self.stack_frames
    }

    /// The raw buffer assignment (`HloProto` field 3), when the proto carried one.
    pub fn buffer_assignment(&self) -> Option<&raw::BufferAssignmentProto> {
        self.buffer_assignment.as_ref()
    }

    /// Odd but decodable things found while building (duplicate names, unknown opcodes, ...).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Instructions with an opcode, in module order.
    pub fn instructions_with_opcode(&self, opcode: Opcode) -> impl Iterator<Item = &Instruction> + '_ {
        self.instructions.iter().filter(move |i| i.opcode == opcode)
    }

    /// Instructions of a class, in module order.
    pub fn instructions_in_class(&self, class: OpClass) -> impl Iterator<Item = &Instruction> + '_ {
        self.instructions.iter().filter(move |i| i.opcode.class() == class)
    }

    /// Instructions whose [`Module::xla_category`] is `category`, in module order.
    pub fn instructions_in_category<'a>(&'a self, category: &'a str) -> impl Iterator<Item = &'a Instruction> + 'a {
        self.instructions.iter().filter(move |i| self.xla_category(i.id) == category)
    }

    /// Instruction counts per opcode string over every computation (fusion bodies included),
    /// sorted by opcode.
    pub fn opcode_counts(&self) -> Vec<(&str, usize)> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for i in &self.instructions {
            *counts.entry(i.opcode_name()).or_default() += 1;
        }
        let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
        v.sort_unstable();
        v
    }

    /// The `fusion` instructions with their bodies and the opcodes fused inside.
    pub fn fusions(&self) -> Vec<Fusion<'_>> {
        self.instructions_with_opcode(Opcode::Fusion)
            .filter_map(|f| {
                let body = self.fused_computation(f.id)?;
                let mut ops: Vec<Opcode> = body
                    .instructions
                    .iter()
                    .map(|&i| self.instruction(i).opcode)
                    .filter(|o| *o != Opcode::Parameter)
                    .collect();
                ops.sort_unstable();
                Some(Fusion { instruction: f, kind: f.fusion_kind, body, ops })
            })
            .collect()
    }
}

/// A fusion instruction with its body.
#[derive(Clone, Debug)]
pub struct Fusion<'m> {
    /// The `fusion` instruction.
    pub instruction: &'m Instruction,
    /// Its fusion kind.
    pub kind: Option<FusionKind>,
    /// The fused computation.
    pub body: &'m Computation,
    /// The opcodes fused inside (parameters excluded), sorted.
    pub ops: Vec<Opcode>,
}

/// The name XLA:GPU gives the kernel it emits for an instruction: every character other than an
/// ASCII letter, digit or `_` becomes `_` (`fusion.480` → `fusion_480`,
/// `input_reduce_fusion.9` → `input_reduce_fusion_9`).
pub fn gpu_kernel_name(instruction: &str) -> String {
    instruction.chars().map(gpu_kernel_char).collect()
}

/// One character of [`gpu_kernel_name`]: itself when ASCII alphanumeric or `_`, else `_`.
pub fn gpu_kernel_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn modules_can_be_shared_across_threads() {
        assert_send_sync::<Module>();
        assert_send_sync::<Error>();
    }
}
