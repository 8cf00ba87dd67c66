//! Layout questions about HLO instructions: whether a transpose, copy or reshape moves data or
//! only reinterprets it, which copies only change a layout, and how a kernel's body splits into
//! layout, dtype and compute work.
//!
//! ```
//! use xlens_hlo::{Opcode, layout, modules_from_space, testing};
//! use xlens_xplane::Space;
//!
//! let space = Space::parse(testing::tiny_profile_bytes().into())?;
//! let module = &modules_from_space(&space).0[0];
//! let dot = module.instruction_by_name("dot.1").unwrap().id();
//! assert_eq!(layout::work_of(module, dot), layout::Work::Compute);
//! assert_eq!(layout::kernel_body(module, dot), vec![dot]);
//! assert!(!layout::is_layout_only_copy(module, dot));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::{InstrId, Module, OpClass, Opcode, Shape};

/// The physical order of an array's dimensions, minor to major, leaving out dimensions of size 1
/// (they do not change where elements live). Row-major when the shape has no layout.
pub fn physical_order(shape: &Shape) -> Vec<usize> {
    let rank = shape.rank();
    let m2m: Vec<usize> = match shape.layout().map(|l| l.minor_to_major()) {
        Some(m) if m.len() == rank => m.iter().filter_map(|&d| usize::try_from(d).ok()).collect(),
        _ => (0..rank).rev().collect(),
    };
    m2m.into_iter().filter(|&d| shape.dims().get(d).is_some_and(|&n| n > 1)).collect()
}

fn is_row_major(shape: &Shape) -> bool {
    let order = physical_order(shape);
    order.windows(2).all(|w| w[0] > w[1])
}

/// True when a `transpose`, `copy`, `reshape` or `dynamic-reshape` moves data rather than
/// reinterpreting it in place (the cases XLA would make a `bitcast`): a transpose whose result
/// layout undoes its permutation, a copy into the same physical order, and a reshape between
/// row-major layouts do not move data. Tiled TPU layouts are compared by dimension order only.
/// Other opcodes: `false`.
pub fn moves_data(module: &Module, id: InstrId) -> bool {
    let instr = module.instruction(id);
    let Some(&operand) = instr.operands().first() else { return false };
    let (from, to) = (module.instruction(operand).shape(), instr.shape());
    if !from.is_array() || !to.is_array() || from.element_count() <= 1 {
        return false;
    }
    match instr.opcode() {
        Opcode::Transpose => {
            let perm = instr.dimensions();
            if perm.len() != to.rank() {
                return true;
            }
            // The result's physical order, in operand dimensions.
            let mapped: Vec<usize> = physical_order(to)
                .into_iter()
                .filter_map(|d| perm.get(d).and_then(|&p| usize::try_from(p).ok()))
                .collect();
            mapped != physical_order(from)
        }
        Opcode::Copy => {
            from.dims() == to.dims()
                && from.memory_space() == to.memory_space()
                && physical_order(from) != physical_order(to)
        }
        Opcode::Reshape => !(is_row_major(from) && is_row_major(to)),
        Opcode::DynamicReshape => true,
        _ => false,
    }
}

/// The instruction behind `id` once bitcasts are looked through (at most 64 of them).
pub fn through_bitcasts(module: &Module, mut id: InstrId) -> InstrId {
    for _ in 0..64 {
        let instr = module.instruction(id);
        match (instr.opcode(), instr.operands().first()) {
            (Opcode::Bitcast, Some(&o)) => id = o,
            _ => break,
        }
    }
    id
}

/// True for a copy that only changes the layout: same dimensions, element type and memory space
/// as its operand, another physical order, and not the second half of a transpose (XLA:CPU
/// writes a transpose as a layout-only `transpose` followed by this kind of copy; that pair is
/// a transpose the program asked for, not a layout mismatch).
pub fn is_layout_only_copy(module: &Module, id: InstrId) -> bool {
    let instr = module.instruction(id);
    if instr.opcode() != Opcode::Copy || !moves_data(module, id) {
        return false;
    }
    let Some(&operand) = instr.operands().first() else { return false };
    module.instruction(through_bitcasts(module, operand)).opcode() != Opcode::Transpose
}

/// What an instruction of a kernel does: layout work, a dtype conversion, nothing, or compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Work {
    /// A transpose, copy or reshape that moves data.
    Layout,
    /// A conversion to another element type.
    Dtype,
    /// Moves nothing or only copies through: parameters, constants, bitcasts, tuples,
    /// broadcasts, slices, concatenations, pads, reverses, layout-preserving copies.
    Neutral,
    /// Arithmetic, reductions, contractions, gathers, scatters, collectives, calls: real work.
    Compute,
}

/// What one (non-fusion) instruction does.
pub fn work_of(module: &Module, id: InstrId) -> Work {
    let instr = module.instruction(id);
    match instr.opcode() {
        Opcode::Transpose | Opcode::Copy | Opcode::Reshape | Opcode::DynamicReshape => {
            if moves_data(module, id) {
                Work::Layout
            } else {
                Work::Neutral
            }
        }
        Opcode::Convert => {
            let from = instr.operands().first().map(|&o| module.instruction(o).shape().element_type());
            if from.is_some_and(|t| t != instr.shape().element_type()) { Work::Dtype } else { Work::Neutral }
        }
        Opcode::BitcastConvert
        | Opcode::Broadcast
        | Opcode::Slice
        | Opcode::Concatenate
        | Opcode::Pad
        | Opcode::Reverse => Work::Neutral,
        op if op.class() == OpClass::Structural => Work::Neutral,
        _ => Work::Compute,
    }
}

/// The instructions a kernel runs: the bodies of a fusion (nested fusions included, their
/// fusion instructions left out), or the instruction itself.
pub fn kernel_body(module: &Module, kernel: InstrId) -> Vec<InstrId> {
    let mut out = Vec::new();
    let mut stack = vec![kernel];
    let mut visited = 0usize;
    while let Some(id) = stack.pop() {
        visited += 1;
        if visited > 100_000 {
            break;
        }
        match module.fused_computation(id) {
            Some(body) => stack.extend(body.topological_order().iter().rev().copied()),
            None => out.push(id),
        }
    }
    out
}

/// A fusion parameter's value outside the fusion: the caller's operand (through bitcasts).
pub fn outside_fusion(module: &Module, id: InstrId) -> InstrId {
    let mut id = through_bitcasts(module, id);
    for _ in 0..8 {
        let instr = module.instruction(id);
        if instr.opcode() != Opcode::Parameter {
            break;
        }
        let comp = module.computation(instr.computation());
        let (Some(&caller), Some(n)) = (comp.callers().first(), instr.parameter_number()) else { break };
        if module.instruction(caller).opcode() != Opcode::Fusion {
            break;
        }
        match usize::try_from(n).ok().and_then(|n| module.instruction(caller).operands().get(n)) {
            Some(&o) => id = through_bitcasts(module, o),
            None => break,
        }
    }
    id
}
