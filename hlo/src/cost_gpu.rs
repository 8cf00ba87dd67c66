//! XLA's GPU cost analysis of a fusion, as XProf runs it (default options, so one read of an
//! operand counts once however many times a broadcast or a window reuses it).
//!
//! A fusion's FLOPs are not the sum of its body: each fused instruction is weighted by its
//! *utilization*, how many times its result is consumed per element of the fusion's output.
//! The root has utilization 1. Walking the body from the root to the parameters, an instruction
//! hands its own "roots" to operands it reads element for element (elementwise ops, tuples,
//! get-tuple-elements, same-shape bitcasts, nested elementwise fusions): an operand reached
//! through several such paths that end at one root counts once. Any other operand becomes a
//! root of its own, accumulating the reader's utilization times the fraction of it read
//! (slices read the sliced share; a reduce reads its init once per output element; a dynamic
//! update slice does not read the part it overwrites), rounded up to whole elements. The FLOPs
//! of the fusion are Σ utilization × standalone cost, accumulated in single precision, as XLA
//! does, then truncated.
//!
//! Bytes: the outputs (an in-place dynamic-update-slice writes only its update), the large
//! constants and the parameters, each read at most once (`min(utilization, 1)` of its size,
//! rounded to the nearest byte), summed in single precision; the HBM figure XProf reports is the
//! exact integer sum of outputs and parameter reads, without constants.

// Per-fusion maps of arena ids, looked up, never iterated: foldhash, not SipHash.

use crate::cost_types::Cost;
use crate::ids::{CompId, InstrId};
use crate::module::{Instruction, Module};
use crate::opcode::Opcode;
use crate::shape::Shape;

/// A fusion's FLOPs and bytes under XLA's GPU cost analysis, and the bytes XProf counts as HBM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FusionCost {
    /// The cost (FLOPs; bytes accessed, constants included).
    pub cost: Cost,
    /// Outputs plus parameter reads: XProf's HBM breakdown.
    pub hbm_bytes: u64,
}

/// Prices `fusion`, whose body instructions' standalone costs are `costs` (indexed by
/// instruction), under the GPU model. `elementwise_body` tells, per computation, whether every
/// non-parameter instruction of it is elementwise (for nested fusions).
pub(crate) fn fusion_cost(
    module: &Module,
    fusion: &Instruction,
    costs: &[Cost],
    elementwise_body: &dyn Fn(CompId) -> bool,
) -> FusionCost {
    let Some(&body) = fusion.called.first() else {
        let out = fusion.shape.byte_size();
        return FusionCost { cost: Cost { bytes_accessed: out, ..Cost::default() }, hbm_bytes: out };
    };
    let comp = module.computation(body);
    let Some(root) = comp.root else { return FusionCost::default() };
    let instr = |id: InstrId| module.instruction(id);

    // Outputs first: they also tell which in-place updates do not read their operand 0.
    let mut bytes = 0f32;
    let mut hbm = 0u64;
    let mut no_read: Vec<InstrId> = Vec::new();
    let root_instr = instr(root);
    let leaves: Vec<(Option<usize>, &Shape)> = if fusion.shape.is_tuple() {
        fusion
            .shape
            .tuple_shapes()
            .iter()
            .enumerate()
            .flat_map(|(k, s)| s.leaves().into_iter().map(move |l| (Some(k), l)))
            .collect()
    } else {
        vec![(None, &fusion.shape)]
    };
    for (k, leaf) in leaves {
        let producer = match k {
            Some(k) if root_instr.opcode == Opcode::Tuple => root_instr.operands.get(k).map(|&o| instr(o)),
            _ => Some(root_instr),
        };
        let size = match producer {
            Some(p) if p.opcode == Opcode::DynamicUpdateSlice => {
                no_read.push(p.id);
                p.operands.get(1).map_or(0, |&u| instr(u).shape.byte_size())
            }
            _ => leaf.byte_size(),
        };
        bytes += size as f32;
        hbm = hbm.saturating_add(size);
    }

    // Utilizations, from the root to the parameters, in vectors indexed by position in the body
    // (a computation's instructions are a contiguous run of the arena, and operands are always
    // of the same computation).
    let local = Local::of(comp);
    let order = reverse_post_order(module, body);
    let mut roots: Vec<Vec<InstrId>> = vec![Vec::new(); local.len];
    let mut root_util: Vec<f32> = vec![0.0; local.len];
    let mut util: Vec<f32> = vec![0.0; local.len];
    roots[local.at(root)] = vec![root];
    root_util[local.at(root)] = 1.0;
    let mut flops = 0f32;
    for &id in &order {
        let i = instr(id);
        // Users come before their operands in this order: nothing adds to an instruction's
        // roots once it is reached.
        let own_roots = std::mem::take(&mut roots[local.at(id)]);
        let u = own_roots.iter().fold(0f32, |acc, &r| acc + root_util[local.at(r)]);
        util[local.at(id)] = u;
        flops += u * costs[id.index()].flops as f32;
        for (k, &o) in i.operands.iter().enumerate() {
            let entry = &mut roots[local.at(o)];
            if passes_through(module, i, instr(o), elementwise_body) {
                for r in &own_roots {
                    if !entry.contains(r) {
                        entry.push(*r);
                    }
                }
            } else {
                if !entry.contains(&o) {
                    entry.push(o);
                }
                let read = u * operand_utilization(module, i, k, &no_read);
                let elements = instr(o).shape.element_count_recursive();
                let add = if elements == 0 { 0.0 } else { (read * elements as f32).ceil() / elements as f32 };
                root_util[local.at(o)] += add;
            }
        }
    }

    // Large constants (scalar ones are immediates) and the parameters, read at most once.
    for &id in &comp.instructions {
        let c = instr(id);
        if c.opcode == Opcode::Constant && c.shape.element_count() > 1 {
            bytes += c.shape.byte_size() as f32 * util[local.at(id)].min(1.0);
        }
    }
    let mut params: Vec<&Instruction> =
        comp.instructions.iter().map(|&id| instr(id)).filter(|i| i.opcode == Opcode::Parameter).collect();
    params.sort_by_key(|p| p.attrs.parameter_number);
    let read_once = |id: InstrId, size: u64| -> u64 {
        let u = util[local.at(id)].min(1.0);
        (size as f32 * u).round() as u64
    };
    for p in params {
        let read = if p.shape.is_tuple() {
            // Per leaf, through the get-tuple-element that extracts it.
            p.users
                .iter()
                .map(|&u| instr(u))
                .filter(|u| u.opcode == Opcode::GetTupleElement)
                .fold(0u64, |acc, g| acc.saturating_add(read_once(g.id, g.shape.byte_size())))
        } else {
            read_once(p.id, p.shape.byte_size())
        };
        bytes += read as f32;
        hbm = hbm.saturating_add(read);
    }
    FusionCost { cost: Cost { flops: flops as u64, transcendentals: 0, bytes_accessed: bytes as u64 }, hbm_bytes: hbm }
}

/// The HBM bytes XLA's GPU model (and XProf) counts for `fusion` that an in-place scatter never
/// moves: a scatter whose operand is a parameter of the fusion read by the scatter alone updates
/// that buffer in place (XLA aliases it with the output), reading and writing only the elements
/// its updates touch. The model counts the whole buffer read and the whole output written: a
/// scatter-add of 8,192 values into a 1 GiB buffer is priced at 2 GiB. The excess is the buffer's
/// size less the updates' size, once for the read and once for the write; 0 for any other fusion.
pub(crate) fn in_place_scatter_excess(module: &Module, fusion: &Instruction) -> u64 {
    let Some(body) = fusion.called.first().map(|&c| module.computation(c)) else { return 0 };
    let Some(root) = body.root.map(|r| module.instruction(r)) else { return 0 };
    let producers: Vec<&Instruction> = match root.opcode {
        Opcode::Tuple => root.operands.iter().map(|&o| module.instruction(o)).collect(),
        _ => vec![root],
    };
    let mut excess = 0u64;
    for scatter in producers.into_iter().filter(|p| p.opcode == Opcode::Scatter) {
        // Operands: N inputs, the indices, N updates.
        let n = scatter.operands.len().saturating_sub(1) / 2;
        for k in 0..n {
            let (Some(&input), Some(&update)) = (scatter.operands.get(k), scatter.operands.get(n + 1 + k)) else {
                continue;
            };
            let input = module.instruction(input);
            if input.opcode != Opcode::Parameter || input.users.len() != 1 {
                continue;
            }
            let touched = module.instruction(update).shape.byte_size();
            let whole = input.shape.byte_size();
            excess = excess.saturating_add(2 * whole.saturating_sub(touched));
        }
    }
    excess
}

/// A computation's instructions by their position in it: they are a contiguous run of the
/// module's arena (`decode::build` lays each computation out in one piece).
struct Local {
    base: usize,
    len: usize,
}

impl Local {
    fn of(comp: &crate::module::Computation) -> Local {
        let base = comp.instructions.first().map_or(0, |i| i.index());
        debug_assert!(comp.instructions.iter().enumerate().all(|(k, i)| i.index() == base + k));
        Local { base, len: comp.instructions.len() }
    }

    /// The position of one of the computation's instructions (operands are always of the same
    /// computation).
    fn at(&self, id: InstrId) -> usize {
        id.index() - self.base
    }
}

/// The body's instructions in the reverse of XLA's post order: a depth-first walk from every
/// instruction without users, in instruction order, visiting operands first to last.
fn reverse_post_order(module: &Module, body: CompId) -> Vec<InstrId> {
    const UNSEEN: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let comp = module.computation(body);
    let local = Local::of(comp);
    let mut post: Vec<InstrId> = Vec::with_capacity(comp.instructions.len());
    let mut state = vec![UNSEEN; local.len];
    let mut stack = Vec::new();
    for &top in comp.instructions.iter().filter(|&&i| module.instruction(i).users.is_empty()) {
        stack.push(top);
        while let Some(&id) = stack.last() {
            let seen = &mut state[local.at(id)];
            if *seen == UNSEEN {
                *seen = OPEN;
                stack.extend(module.instruction(id).operands.iter().rev());
            } else {
                stack.pop();
                if *seen == OPEN {
                    *seen = DONE;
                    post.push(id);
                }
            }
        }
    }
    post.reverse();
    post
}

/// Whether `user` reads `operand` element for element, so that the operand serves the user's
/// roots rather than becoming one.
fn passes_through(
    module: &Module,
    user: &Instruction,
    operand: &Instruction,
    elementwise_body: &dyn Fn(CompId) -> bool,
) -> bool {
    match user.opcode {
        Opcode::Tuple | Opcode::GetTupleElement | Opcode::Constant => true,
        Opcode::Bitcast => operand.shape.dims() == user.shape.dims() && operand.shape.layout() == user.shape.layout(),
        Opcode::Fusion => user.called.first().is_some_and(|&b| elementwise_body(b)),
        _ => module.is_elementwise(user.id),
    }
}

/// The share of operand `k` that `user` reads per element it produces (1 for most ops).
fn operand_utilization(module: &Module, user: &Instruction, k: usize, no_read: &[InstrId]) -> f32 {
    let operand = |i: usize| user.operands.get(i).map(|&o| module.instruction(o));
    let out_elements = |s: &Shape| {
        if s.is_tuple() { s.tuple_shapes().first().map_or(0, Shape::element_count) } else { s.element_count() }
    };
    match user.opcode {
        Opcode::Slice | Opcode::DynamicSlice | Opcode::Gather if k == 0 => {
            let input = operand(0).map_or(0, |o| o.shape.element_count());
            if input == 0 { 1.0 } else { (user.shape.element_count() as f64 / input as f64) as f32 }
        }
        Opcode::DynamicUpdateSlice if k == 0 => {
            if no_read.contains(&user.id) {
                return 0.0;
            }
            let out = user.shape.element_count();
            let update = operand(1).map_or(0, |o| o.shape.element_count());
            if out == 0 { 1.0 } else { (out.saturating_sub(update) as f64 / out as f64) as f32 }
        }
        // A reduce applies its init value once per output element.
        Opcode::Reduce if k >= user.operands.len() / 2 => out_elements(&user.shape) as f32,
        _ => 1.0,
    }
}

/// Per computation: every non-parameter instruction is elementwise (constants count), as XLA's
/// `IsElementwise` reads a fusion.
pub(crate) fn elementwise_bodies(module: &Module) -> Vec<bool> {
    let mut out = vec![false; module.computations.len()];
    for &c in &module.post_order {
        let comp = module.computation(c);
        out[c.index()] = !comp.instructions.is_empty()
            && comp.instructions.iter().all(|&i| {
                let instr = module.instruction(i);
                match instr.opcode {
                    Opcode::Parameter | Opcode::Constant => true,
                    Opcode::Fusion => instr.called.first().is_some_and(|b| out[b.index()]),
                    _ => module.is_elementwise(i),
                }
            });
    }
    out
}

/// A concatenate under the GPU model: 6 FLOPs per output element, or 400 when it joins along
/// an inner dimension whose first operand is not a multiple of 32 wide (the unaligned copy).
pub(crate) fn concatenate_flops(module: &Module, instr: &Instruction) -> u64 {
    let elements = instr.shape.element_count();
    let dim = instr.attrs.dimensions.first().copied().unwrap_or(0);
    let first = instr.operands.first().map(|&o| &module.instruction(o).shape);
    let unaligned = dim > 0
        && first.and_then(|s| usize::try_from(dim).ok().and_then(|d| s.dims().get(d))).is_some_and(|&w| w % 32 != 0);
    elements.saturating_mul(if unaligned { 400 } else { 6 })
}
