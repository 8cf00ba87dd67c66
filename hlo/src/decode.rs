//! Decoding: from `HloProto` bytes to a [`Module`], with the graph, costs, collectives and
//! warnings computed once.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use prost::Message;

use crate::collective::{self, Collective, GroupEncoding};
use crate::cost;
use crate::error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
use crate::graph;
use crate::ids::{CompId, InstrId};
use crate::limits::{self, Limit};
use crate::module::{AliasKind, BufferDonor, Computation, ComputationKind, Instruction, IoAlias, Module};
use crate::opcode::{FusionKind, Opcode};
use crate::raw;
use crate::shape::Shape;

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
        if bytes.is_empty() {
            return Err(Error::new(ErrorKind::EmptyInput, Location::default()));
        }
        let encoded_len = bytes.len();
        let first_error = match raw::HloProto::decode(bytes.clone()) {
            Ok(proto) if proto.hlo_module.as_ref().is_some_and(|m| !m.computations.is_empty()) => {
                return Module::from_proto(proto, encoded_len);
            }
            Ok(_) => None,
            Err(e) => Some(e),
        };
        // Not an HloProto with a module: maybe a bare HloModuleProto.
        match raw::HloModuleProto::decode(bytes) {
            Ok(m) if !m.computations.is_empty() => {
                Module::from_proto(raw::HloProto { hlo_module: Some(m), buffer_assignment: None }, encoded_len)
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
        let module = hlo_module.ok_or_else(|| Error::new(ErrorKind::NoModule, Location::default()))?;
        let name = module.name.clone();
        build(module, buffer_assignment, encoded_len).map_err(|e| e.in_module(&name))
    }
}

fn build(
    module: raw::HloModuleProto,
    buffer_assignment: Option<raw::BufferAssignmentProto>,
    encoded_len: usize,
) -> Result<Module> {
    let raw::HloModuleProto {
        name,
        entry_computation_name,
        computations: comp_protos,
        host_program_shape,
        id,
        entry_computation_id,
        input_output_alias,
        stack_frame_index,
        buffer_donor,
        device_type,
        schedule,
        ..
    } = module;
    limits::check(Limit::Computations, comp_protos.len() as u64, Location::default)?;
    let total: usize = comp_protos.iter().map(|c| c.instructions.len()).sum();
    limits::check(Limit::Instructions, total as u64, Location::default)?;
    let mut warnings = Vec::new();

    // Computations, keyed by their 64-bit ids.
    let mut comp_ids: HashMap<i64, CompId> = HashMap::with_capacity(comp_protos.len());
    let mut computation_by_name: HashMap<String, CompId> = HashMap::with_capacity(comp_protos.len());
    for (ci, c) in comp_protos.iter().enumerate() {
        let cid = CompId(ci as u32);
        if comp_ids.insert(c.id, cid).is_some() {
            return Err(dup("computation", c.id, Location::default().with_computation(&c.name)));
        }
        computation_by_name.entry(c.name.clone()).or_insert(cid);
    }

    // The instruction arena; operands are resolved in a second pass.
    let mut instructions: Vec<Instruction> = Vec::with_capacity(total);
    let mut computations: Vec<Computation> = Vec::with_capacity(comp_protos.len());
    let mut local_ids: Vec<HashMap<i64, InstrId>> = Vec::with_capacity(comp_protos.len());
    let mut pending: Vec<(Vec<i64>, Vec<i64>, Vec<i64>)> = Vec::with_capacity(total);
    let mut root_ids = Vec::with_capacity(comp_protos.len());
    for (ci, c) in comp_protos.into_iter().enumerate() {
        let cid = CompId(ci as u32);
        let loc = || Location::default().with_computation(&c.name);
        let mut ids: HashMap<i64, InstrId> = HashMap::with_capacity(c.instructions.len());
        let mut members = Vec::with_capacity(c.instructions.len());
        for mut p in c.instructions {
            let iid = InstrId(instructions.len() as u32);
            if ids.insert(p.id, iid).is_some() {
                return Err(dup("instruction", p.id, loc().with_instruction(&p.name)));
            }
            // Moved out of the proto once converted: a module holds tens of thousands.
            let shape = match p.shape.take() {
                Some(s) => Shape::from_proto(&s).map_err(|e| relocate(e, loc().with_instruction(&p.name)))?,
                None => Shape::tuple(Vec::new()),
            };
            let opcode = Opcode::from_name(&p.opcode);
            if opcode == Opcode::Other {
                warnings.push(Warning {
                    kind: WarningKind::UnknownOpcode(p.opcode.clone()),
                    location: loc().with_instruction(&p.name),
                });
            }
            let fusion_kind = if opcode == Opcode::Fusion { FusionKind::from_name(&p.fusion_kind) } else { None };
            pending.push((
                std::mem::take(&mut p.operand_ids),
                std::mem::take(&mut p.control_predecessor_ids),
                std::mem::take(&mut p.called_computation_ids),
            ));
            members.push(iid);
            instructions.push(Instruction {
                id: iid,
                computation: cid,
                opcode,
                shape,
                operands: Vec::new(),
                control_predecessors: Vec::new(),
                called: Vec::new(),
                users: Vec::new(),
                fusion_kind,
                raw: p,
            });
        }
        root_ids.push(c.root_id);
        computations.push(Computation {
            id: cid,
            unique_id: c.id,
            name: c.name,
            instructions: members,
            order: Vec::new(),
            root: None,
            is_fusion: c.is_fusion_computation,
            callers: Vec::new(),
            kind: ComputationKind::Unreachable,
            execution_thread: c.execution_thread,
        });
        local_ids.push(ids);
    }

    // Resolve operands, control edges, called computations and roots.
    for (idx, (operand_ids, control_ids, called_ids)) in pending.into_iter().enumerate() {
        let cid = instructions[idx].computation;
        let ids = &local_ids[cid.index()];
        let loc = || {
            Location::default()
                .with_computation(&computations[cid.index()].name)
                .with_instruction(instructions[idx].name())
        };
        let resolve = |what: &'static str, v: &[i64]| -> Result<Vec<InstrId>> {
            v.iter().map(|id| ids.get(id).copied().ok_or_else(|| dangling(what, *id, loc()))).collect()
        };
        let operands = resolve("operand id", &operand_ids)?;
        let control = resolve("control predecessor id", &control_ids)?;
        let called = called_ids
            .iter()
            .map(|id| comp_ids.get(id).copied().ok_or_else(|| dangling("called computation id", *id, loc())))
            .collect::<Result<Vec<_>>>()?;
        let instr = &mut instructions[idx];
        instr.operands = operands;
        instr.control_predecessors = control;
        instr.called = called;
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
    for idx in 0..instructions.len() {
        let user = InstrId(idx as u32);
        let mut ops = instructions[idx].operands.clone();
        ops.sort_unstable();
        ops.dedup();
        for op in ops {
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

    let mut by_name: HashMap<String, InstrId> = HashMap::with_capacity(instructions.len());
    for instr in &instructions {
        if by_name.contains_key(instr.name()) {
            warnings.push(Warning {
                kind: WarningKind::DuplicateName(instr.name().to_owned()),
                location: Location::default().with_computation(&computations[instr.computation.index()].name),
            });
        } else {
            by_name.insert(instr.name().to_owned(), instr.id);
        }
    }

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
    let (collectives, warnings) = collectives(&module);
    module.collectives = collectives;
    module.warnings.extend(warnings);
    module.warnings.extend(crate::source::check_stack_frames(&module));
    Ok(module)
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

/// Collectives of a module and warnings for groups that could not be expanded.
fn collectives(module: &Module) -> (Vec<Collective>, Vec<Warning>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for instr in module.instructions() {
        if !instr.opcode().is_collective() {
            continue;
        }
        let raw = instr.raw();
        let (groups, encoding) = match collective::replica_groups(raw) {
            Ok(v) => v,
            Err(why) => {
                warnings.push(Warning {
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
    (out, warnings)
}
