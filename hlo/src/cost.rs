//! The cost model: FLOPs, transcendentals and bytes accessed per instruction.
//!
//! The rules follow XLA's `HloCostAnalysis` (the numbers `jax.jit(f).lower(...).compile()
//! .cost_analysis()` reports), re-derived from its documented behaviour:
//!
//! - **Elementwise** ops cost one FLOP per output element; `exp`, `log`, `logistic`, `power`,
//!   `sqrt`, `cbrt`, `rsqrt`, `tanh`, `tan`, `sin`, `cos`, `expm1`, `log1p` and `atan2` count as
//!   one *transcendental* per element instead.
//! - **dot**: `2 × output elements × product of the lhs contracting dimensions`.
//! - **convolution**: `2 × (input features / feature groups) × output features ×
//!   (batch / batch groups) × valid kernel positions` per spatial dimension, counting only the
//!   window positions that land inside the (dilated, padded) input.
//! - **reduce**: the reducer's cost × (input elements − output elements); **reduce-window**:
//!   × (window size − 1) × output elements; **map**: × output elements; **scatter**: × update
//!   elements; **select-and-scatter**: select × source × (window − 1) + scatter × source;
//!   **sort**: `n × ⌈log2 n⌉`; **all-reduce**: one FLOP per output element.
//! - **fusion**: its body's FLOPs; **call** and **async-start**: the callee's costs; **while**:
//!   one trip of body and condition; **conditional**: the costlier branch per property.
//! - **Bytes accessed**: operands plus output (a collective's tuple output by its leaves) (`ShapeUtil::ByteSizeOf`, tuples as 8-byte index
//!   tables), with XLA's exceptions: parameters, constants, get-tuple-element, bitcasts and
//!   layout-preserving transposes touch nothing; slices and gathers read only what they write;
//!   a fusion reads each external operand as its fused parameter's users do (a sliced operand
//!   only its slices) and writes its outputs (an in-place dynamic-update-slice only the update).
//!
//! Known differences from XLA: custom calls cost 0 FLOPs and their operands plus output bytes
//! (XLA reports −1 for "unknown").
//!
//! **The GPU model** ([`CostModel::Gpu`]) is what XProf computes for GPU profiles (it runs XLA's
//! GPU cost analysis on the module), checked against XProf 2.24.2 on real ROCm captures:
//! - an elementwise op (transcendental ones included) costs, per output element, the clock cycles
//!   XLA's default GPU op profile measured for its opcode and output type (a sine in f32: 662),
//!   else 3; reducers, maps and windows scale that;
//! - custom calls cost nothing, except DNN convolutions (`__cudnn$conv…`), priced as the
//!   convolution they run; their bytes are the operands plus the convolution result (not the
//!   scratch buffer), of which only the operands count as HBM traffic ([`Module::gpu_hbm_bytes`] is
//!   what XProf's memory-space breakdown reports);
//! - a fusion weights each fused instruction by how often its result is read (XLA's fusion
//!   utilization: a value read twice counts twice, a reduce's init once per output element, a
//!   slice's operand by the share it reads) and reads each parameter at most once
//!   (`cost_gpu`); a concatenate costs 6 FLOPs per element (400 when unaligned);
//! - everything else as above.

use std::sync::OnceLock;

use rayon::prelude::*;

pub use crate::cost_types::{Cost, CostModel};
use crate::ids::{CompId, InstrId};
use crate::module::{Instruction, Module};
use crate::opcode::Opcode;
use crate::shape::Shape;

impl Module {
    /// The cost of one instruction under XLA's GPU cost analysis, as XProf prices the ops of a
    /// GPU profile (see [`crate::CostModel::Gpu`]); computed for the whole module on first use.
    pub fn gpu_cost(&self, id: InstrId) -> Cost {
        self.gpu_costs_and_hbm().0.get(id.index()).copied().unwrap_or_default()
    }

    /// The bytes of [`Module::gpu_cost`] that XProf counts as HBM traffic (a fusion's outputs and
    /// parameter reads without its constants; a DNN convolution's operands; else all of them).
    pub fn gpu_hbm_bytes(&self, id: InstrId) -> u64 {
        self.gpu_costs_and_hbm().1.get(id.index()).copied().unwrap_or_default()
    }

    /// The HBM bytes instruction `id` moves per execution: [`Module::gpu_hbm_bytes`] less what
    /// an in-place scatter fusion never reads or writes (XLA's model counts the whole buffer it
    /// updates both ways; the scatter touches only its updates' elements).
    ///
    /// ```
    /// use xlens_hlo::{Module, PrimitiveType::{F32, S32}, testing::{HloBuilder, shape}};
    /// let mut b = HloBuilder::new("m");
    /// let mut body = b.computation("scatter_body");
    /// let buf = body.param("buf", 0, shape(F32, &[1024, 1024]));
    /// let idx = body.param("idx", 1, shape(S32, &[8, 1]));
    /// let upd = body.param("upd", 2, shape(F32, &[8, 1024]));
    /// let s = body.op("scatter", "scatter", shape(F32, &[1024, 1024]), &[buf, idx, upd]);
    /// let body = body.finish(s);
    /// let mut main = b.computation("main");
    /// let ops = [main.param("p0", 0, shape(F32, &[1024, 1024])), main.param("p1", 1, shape(S32, &[8, 1])),
    ///            main.param("p2", 2, shape(F32, &[8, 1024]))];
    /// let f = main.op("fusion", "fusion", shape(F32, &[1024, 1024]), &ops);
    /// main.edit(f, |i| i.called_computation_ids.push(body));
    /// main.finish(f);
    /// let m = Module::from_proto(b.finish("main"), 0)?;
    /// let f = m.instruction_by_name("fusion").unwrap().id();
    /// // XLA's model: the 4 MiB buffer read and written; moved: the 32 KiB of updates, twice.
    /// assert!(m.gpu_hbm_bytes(f) > 8 << 20);
    /// assert_eq!(m.gpu_moved_hbm_bytes(f), m.gpu_hbm_bytes(f) - 2 * ((4 << 20) - (32 << 10)));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gpu_moved_hbm_bytes(&self, id: InstrId) -> u64 {
        let hbm = self.gpu_hbm_bytes(id);
        let instr = self.instruction(id);
        match instr.opcode {
            Opcode::Fusion => hbm.saturating_sub(crate::cost_gpu::in_place_scatter_excess(self, instr)),
            _ => hbm,
        }
    }

    /// Computes the costs of [`Module::gpu_cost`] now rather than on its first use (to compute
    /// several modules' side by side).
    pub fn prepare_gpu_costs(&self) {
        let _ = self.gpu_costs_and_hbm();
    }

    fn gpu_costs_and_hbm(&self) -> &(Vec<Cost>, Vec<u64>) {
        self.gpu_costs.get_or_init(|| compute_with_hbm(self, CostModel::Gpu))
    }
}

/// Costs of every instruction, computed callees first.
pub(crate) fn compute(module: &Module, model: CostModel) -> Vec<Cost> {
    compute_with_hbm(module, model).0
}

/// [`compute`], and per instruction the bytes XProf counts as HBM traffic (GPU model: a fusion's
/// outputs and parameter reads without its constants, a DNN convolution's operands; otherwise
/// its bytes accessed).
pub(crate) fn compute_with_hbm(module: &Module, model: CostModel) -> (Vec<Cost>, Vec<u64>) {
    let mut ctx = Ctx {
        module,
        model,
        costs: vec![Cost::default(); module.instructions.len()],
        totals: vec![Cost::default(); module.computations.len()],
        bodies: std::iter::repeat_with(OnceLock::new).take(module.computations.len()).collect(),
        reads: std::iter::repeat_with(OnceLock::new).take(module.instructions.len()).collect(),
        elementwise_bodies: if model == CostModel::Gpu {
            crate::cost_gpu::elementwise_bodies(module)
        } else {
            Vec::new()
        },
    };
    let mut fusion_hbm: Vec<Option<u64>> = vec![None; module.instructions.len()];
    let mut priced: Vec<(Cost, Option<u64>)> = Vec::new();
    for &c in &module.post_order {
        let comp = module.computation(c);
        // An instruction's cost reads its operands' shapes and its callees' costs, never another
        // cost of its own computation: a large computation (a program's entry, a loop body) is
        // priced in parallel, in its order, and the result equals the serial one.
        priced.clear();
        if comp.order.len() >= PARALLEL_MIN_INSTRUCTIONS {
            comp.order
                .par_iter()
                .with_min_len(PARALLEL_CHUNK)
                .map(|&i| ctx.instruction(i))
                .collect_into_vec(&mut priced);
        } else {
            priced.extend(comp.order.iter().map(|&i| ctx.instruction(i)));
        }
        let mut total = Cost::default();
        for (&i, &(cost, hbm)) in comp.order.iter().zip(&priced) {
            ctx.costs[i.index()] = cost;
            fusion_hbm[i.index()] = hbm;
            total += cost;
        }
        ctx.totals[c.index()] = total;
    }
    let hbm = (0..module.instructions.len())
        .map(|i| {
            let id = module.instructions[i].id;
            match fusion_hbm[i] {
                Some(h) => h,
                None if model == CostModel::Gpu => gpu_hbm_bytes(module, id, &ctx.costs[i]),
                None => ctx.costs[i].bytes_accessed,
            }
        })
        .collect();
    (ctx.costs, hbm)
}

/// Computations of fewer instructions are priced on the calling thread.
const PARALLEL_MIN_INSTRUCTIONS: usize = 128;

/// Instructions priced on one worker before another may take over.
const PARALLEL_CHUNK: usize = 32;

struct Ctx<'m> {
    module: &'m Module,
    model: CostModel,
    costs: Vec<Cost>,
    totals: Vec<Cost>,
    /// Per fusion body (by computation): its parameters by number, and the bytes of its large
    /// constants, once computed. Dense vectors by arena id, not hash maps: every instruction asks.
    bodies: Vec<OnceLock<Body>>,
    /// Bytes read through each fused parameter, by instruction (memoized: bodies can be shared).
    reads: Vec<OnceLock<u64>>,
    /// GPU model: per computation, whether its body is all elementwise.
    elementwise_bodies: Vec<bool>,
}

struct Body {
    /// Each parameter number's first parameter instruction, sorted by number.
    params: Vec<(u64, InstrId)>,
    constant_bytes: u64,
}

impl Body {
    fn param(&self, number: u64) -> Option<InstrId> {
        self.params.binary_search_by_key(&number, |&(n, _)| n).ok().map(|k| self.params[k].1)
    }
}

fn sat(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

impl<'m> Ctx<'m> {
    fn instr(&self, id: InstrId) -> &'m Instruction {
        self.module.instruction(id)
    }

    fn operand_shape(&self, instr: &Instruction, i: usize) -> Option<&'m Shape> {
        instr.operands.get(i).map(|&o| &self.instr(o).shape)
    }

    fn operand_bytes(&self, instr: &Instruction, i: usize) -> u64 {
        self.operand_shape(instr, i).map_or(0, Shape::byte_size)
    }

    fn sub(&self, comp: Option<&CompId>) -> Cost {
        comp.map_or(Cost::default(), |c| self.totals[c.index()])
    }

    /// The cost of one instruction and, for a fusion under the GPU model, its HBM bytes.
    fn instruction(&self, id: InstrId) -> (Cost, Option<u64>) {
        let instr = self.instr(id);
        let mut fusion_hbm = None;
        let out = instr.shape.byte_size();
        let operands_bytes =
            (0..instr.operands.len()).fold(0u64, |acc, i| acc.saturating_add(self.operand_bytes(instr, i)));
        let default_bytes = out.saturating_add(operands_bytes);
        let elements = instr.shape.element_count();
        let mut cost = Cost { flops: 0, transcendentals: 0, bytes_accessed: default_bytes };
        let scaled = |sub: Cost, n: u64| Cost {
            flops: sat(sub.flops, n),
            transcendentals: sat(sub.transcendentals, n),
            bytes_accessed: default_bytes,
        };
        match instr.opcode {
            Opcode::Parameter
            | Opcode::Constant
            | Opcode::GetTupleElement
            | Opcode::Bitcast
            | Opcode::AfterAll
            | Opcode::AddDependency
            | Opcode::Domain => cost.bytes_accessed = 0,
            Opcode::Tuple => cost.bytes_accessed = out,
            Opcode::Transpose if transpose_is_bitcast(self, instr) => cost.bytes_accessed = 0,
            Opcode::Map => cost = scaled(self.sub(instr.called.first()), elements),
            op if op.is_elementwise() && op != Opcode::Copy && self.model == CostModel::Gpu => {
                cost.flops = sat(elements, gpu_flops_per_element(op, instr.shape.element_type()));
            }
            Opcode::CustomCall if self.model == CostModel::Gpu => cost = gpu_custom_call(self, instr),
            op if op.is_elementwise() && op != Opcode::Copy => {
                if op.is_transcendental() {
                    cost.transcendentals = elements;
                } else {
                    cost.flops = elements;
                }
            }
            Opcode::Slice => cost.bytes_accessed = sat(out, 2),
            Opcode::DynamicSlice => {
                let idx = (1..instr.operands.len()).fold(0u64, |a, i| a.saturating_add(self.operand_bytes(instr, i)));
                cost.bytes_accessed = sat(out, 2).saturating_add(idx);
            }
            Opcode::DynamicUpdateSlice => {
                let idx = (2..instr.operands.len()).fold(0u64, |a, i| a.saturating_add(self.operand_bytes(instr, i)));
                cost.bytes_accessed = sat(self.operand_bytes(instr, 1), 2).saturating_add(idx);
            }
            Opcode::Gather => cost.bytes_accessed = sat(out, 2).saturating_add(self.operand_bytes(instr, 1)),
            Opcode::Scatter => {
                let n = instr.operands.len().saturating_sub(1) / 2;
                let updates =
                    (n + 1..instr.operands.len()).fold(0u64, |a, i| a.saturating_add(self.operand_bytes(instr, i)));
                let update_elements = self.operand_shape(instr, n + 1).map_or(0, Shape::element_count);
                cost = scaled(self.sub(instr.called.first()), update_elements);
                cost.bytes_accessed = sat(updates, 3).saturating_add(self.operand_bytes(instr, n));
            }
            Opcode::Dot => cost.flops = dot_flops(self, instr),
            Opcode::Convolution => cost.flops = convolution_flops(self, instr),
            Opcode::Reduce => {
                let input = self.operand_shape(instr, 0).map_or(0, Shape::element_count);
                let output = first_array(&instr.shape).element_count();
                cost = scaled(self.sub(instr.called.first()), input.saturating_sub(output));
            }
            Opcode::ReduceWindow => cost = scaled(self.sub(instr.called.first()), reduce_window_count(self, instr)),
            Opcode::SelectAndScatter => {
                let source = self.operand_shape(instr, 1).map_or(0, Shape::element_count);
                let window = window_elements(instr);
                let select = self.sub(instr.called.first());
                let scatter = self.sub(instr.called.get(1));
                let a = scaled(select, sat(source, window.saturating_sub(1)));
                let b = scaled(scatter, source);
                cost = Cost {
                    flops: a.flops.saturating_add(b.flops),
                    transcendentals: a.transcendentals.saturating_add(b.transcendentals),
                    bytes_accessed: default_bytes,
                };
            }
            Opcode::Sort => {
                let n = self.operand_shape(instr, 0).map_or(0, Shape::element_count);
                cost.flops = sat(n, log2_ceil(n));
            }
            Opcode::Fft => {
                let real = self.operand_shape(instr, 0).map(first_array).map_or(0, Shape::element_count);
                let log_factors =
                    instr.attrs.fft_length().iter().fold(1u64, |a, &d| sat(a, log2_floor(d.max(0) as u64)));
                cost.flops = sat(sat(2 * 4, log_factors), real);
            }
            Opcode::TriangularSolve => {
                let a = self.operand_shape(instr, 0);
                let b = self.operand_shape(instr, 1).map_or(0, Shape::element_count);
                let last = a.and_then(|a| a.dims().last()).map_or(0, |&d| d.max(0) as u64);
                cost.flops = sat(2, sat(last, b));
                cost.bytes_accessed =
                    out.saturating_add(self.operand_bytes(instr, 0) / 2).saturating_add(self.operand_bytes(instr, 1));
            }
            Opcode::Cholesky => {
                let a = self.operand_shape(instr, 0);
                let last = a.and_then(|a| a.dims().last()).map_or(0, |&d| d.max(0) as u64);
                cost.flops = sat(last, a.map_or(0, Shape::element_count)) / 3;
                cost.bytes_accessed = self.operand_bytes(instr, 0);
            }
            Opcode::AllReduce | Opcode::AllReduceStart => {
                let leaves = instr.shape.leaves();
                let elements = leaves.iter().fold(0u64, |a, s| a.saturating_add(s.element_count()));
                // The reducer's cost per element: one FLOP (an add), three under the GPU model.
                let per_element = match self.model {
                    CostModel::Gpu => self.sub(instr.called.first()).flops.max(1),
                    CostModel::Xla => 1,
                };
                cost.flops = sat(elements, per_element);
                let out_bytes = leaves.iter().fold(0u64, |a, s| a.saturating_add(s.byte_size()));
                // XProf's GPU figure counts the output only; its HBM breakdown (see
                // `gpu_hbm_bytes`) reads the operands too.
                cost.bytes_accessed = match self.model {
                    CostModel::Gpu => out_bytes,
                    CostModel::Xla => out_bytes.saturating_add(operands_bytes),
                };
            }
            Opcode::AllGather
            | Opcode::AllToAll
            | Opcode::RaggedAllToAll
            | Opcode::ReduceScatter
            | Opcode::CollectivePermute
            | Opcode::CollectiveBroadcast => {
                // Variadic collectives return tuples; their data is the leaves, not the index table.
                cost.bytes_accessed = leaves_bytes(&instr.shape).saturating_add(operands_bytes);
            }
            Opcode::Fusion if self.model == CostModel::Gpu => {
                let bodies = &self.elementwise_bodies;
                let elementwise = |c: CompId| bodies.get(c.index()).copied().unwrap_or(false);
                let f = crate::cost_gpu::fusion_cost(self.module, instr, &self.costs, &elementwise);
                fusion_hbm = Some(f.hbm_bytes);
                cost = f.cost;
            }
            Opcode::Concatenate if self.model == CostModel::Gpu => {
                cost.flops = crate::cost_gpu::concatenate_flops(self.module, instr);
            }
            Opcode::Fusion => cost = self.fusion(instr),
            Opcode::Call | Opcode::AsyncStart => cost = self.sub(instr.called.first()),
            Opcode::While => cost = self.sub(instr.called.first()) + self.sub(instr.called.get(1)),
            Opcode::Conditional => {
                let mut max = Cost::default();
                for c in &instr.called {
                    let t = self.totals[c.index()];
                    max.flops = max.flops.max(t.flops);
                    max.transcendentals = max.transcendentals.max(t.transcendentals);
                    max.bytes_accessed = max.bytes_accessed.max(t.bytes_accessed);
                }
                cost = max;
            }
            Opcode::Rng => cost.transcendentals = elements,
            Opcode::RngBitGenerator => cost.transcendentals = instr.shape.element_count_recursive(),
            Opcode::Infeed => cost.bytes_accessed = leaves_bytes(&instr.shape),
            Opcode::Outfeed => {
                cost.bytes_accessed =
                    instr.operands.iter().fold(0u64, |a, &o| a.saturating_add(leaves_bytes(&self.instr(o).shape)));
            }
            _ => {}
        }
        (cost, fusion_hbm)
    }

    /// A fusion: the body's arithmetic, the bytes its fused parameters' users read, its outputs.
    fn fusion(&self, instr: &Instruction) -> Cost {
        let Some(&body) = instr.called.first() else {
            return Cost { bytes_accessed: instr.shape.byte_size(), ..Cost::default() };
        };
        let total = self.totals[body.index()];
        let body_comp = self.module.computation(body);
        let root = body_comp.root.map(|r| self.instr(r));
        let mut bytes = 0u64;
        let is_dus = |i: &Instruction| i.opcode == Opcode::DynamicUpdateSlice;
        let update_bytes = |i: &Instruction| self.operand_bytes(i, 1);
        match root {
            Some(r) if instr.shape.is_array() && is_dus(r) => bytes = update_bytes(r),
            Some(r) if instr.shape.is_tuple() => {
                for (k, sub) in instr.shape.tuple_shapes().iter().enumerate() {
                    let dus = (r.opcode == Opcode::Tuple)
                        .then(|| r.operands.get(k).map(|&o| self.instr(o)))
                        .flatten()
                        .filter(|o| is_dus(o));
                    bytes = bytes.saturating_add(match dus {
                        Some(d) if sub.is_array() => update_bytes(d),
                        _ => leaves_bytes(sub),
                    });
                }
            }
            _ => bytes = leaves_bytes(&instr.shape),
        }
        let body_info = self.body(body);
        bytes = bytes.saturating_add(body_info.constant_bytes);
        for k in 0..instr.operands.len() as u64 {
            if let Some(p) = body_info.param(k) {
                bytes = bytes.saturating_add(self.parameter_read_bytes(p));
            }
        }
        Cost { flops: total.flops, transcendentals: total.transcendentals, bytes_accessed: bytes }
    }

    /// The parameters and large constants of a fusion body, computed once per body (or by each
    /// worker that asks first at the same time: the same value, whichever is kept).
    fn body(&self, comp: CompId) -> &Body {
        let cell = &self.bodies[comp.index()];
        if let Some(b) = cell.get() {
            return b;
        }
        let mut params = Vec::new();
        let mut constant_bytes = 0u64;
        for &i in &self.module.computation(comp).instructions {
            let b = self.instr(i);
            match b.opcode {
                Opcode::Parameter => {
                    params.push((b.attrs.parameter_number.max(0) as u64, i));
                }
                // Constants of more than one element are read from memory.
                Opcode::Constant if b.shape.element_count() > 1 => {
                    constant_bytes = constant_bytes.saturating_add(b.shape.byte_size());
                }
                _ => {}
            }
        }
        // Stable: of parameters sharing a number, the first in the body stays first (and is
        // the one kept).
        params.sort_by_key(|&(n, _)| n);
        params.dedup_by_key(|&mut (n, _)| n);
        cell.get_or_init(|| Body { params, constant_bytes })
    }

    /// Bytes a fused parameter (or a get-tuple-element of one) is read, as its users read it.
    /// Recursion follows nested fusions down the (acyclic, depth-limited) call graph.
    fn parameter_read_bytes(&self, param: InstrId) -> u64 {
        let cell = &self.reads[param.index()];
        if let Some(&v) = cell.get() {
            return v;
        }
        // Not `get_or_init` around the recursion: two workers pricing fusions that share a
        // body may both compute it (the same value), and neither waits on the other.
        let v = self.parameter_read_bytes_uncached(param);
        *cell.get_or_init(|| v)
    }

    fn parameter_read_bytes_uncached(&self, param: InstrId) -> u64 {
        let p = self.instr(param);
        if p.shape.is_tuple() {
            // Each leaf read through the get-tuple-elements that extract it.
            return p
                .users
                .iter()
                .map(|&u| self.instr(u))
                .filter(|u| u.opcode == Opcode::GetTupleElement)
                .fold(0u64, |a, u| a.saturating_add(self.parameter_read_bytes(u.id)));
        }
        let size = p.shape.byte_size();
        // A parameter that is its body's root (a nested fusion that only forwards its operand,
        // as XLA's block-level GEMM fusions write them) is read whole.
        if self.module.computation(p.computation).root == Some(param) {
            return size;
        }
        let mut total = 0u64;
        let mut seen_trivial = false;
        for &u in &p.users {
            let user = self.instr(u);
            let add = match user.opcode {
                Opcode::Fusion => {
                    let mut sum = 0u64;
                    if let Some(&nested) = user.called.first() {
                        let body = self.body(nested);
                        for (k, _) in user.operands.iter().enumerate().filter(|(_, o)| **o == param) {
                            if let Some(inner) = body.param(k as u64) {
                                sum = sum.saturating_add(self.parameter_read_bytes(inner));
                            }
                        }
                    }
                    sum
                }
                Opcode::Slice => user.shape.byte_size(),
                Opcode::DynamicSlice if user.operands.first() == Some(&param) => user.shape.byte_size(),
                Opcode::DynamicUpdateSlice if user.operands.first() == Some(&param) => 0,
                Opcode::Broadcast | Opcode::Reshape => size,
                _ if seen_trivial => 0,
                _ => {
                    seen_trivial = true;
                    size
                }
            };
            total = total.saturating_add(add);
        }
        total
    }
}

/// FLOPs per element of an elementwise op in XLA's GPU cost analysis when its op and output
/// type have no measured timing.
const GPU_FLOPS_PER_ELEMENT: u64 = 3;

/// Measured cost per element, in clock cycles that XLA's GPU cost analysis counts as FLOPs, of
/// the elementwise ops whose cost is not the default: XLA's `sm_86` op profile (its default
/// profile, which XProf 2.24.2 uses for every GPU, NVIDIA or AMD), read from the tables compiled
/// into XProf 2.24.2 and checked against it. Keyed by HLO opcode and output element type; bf16
/// has no entries (it costs the default).
const GPU_OP_CYCLES: &[(&str, &str, u64)] = &[
    ("add", "c128", 97),
    ("add", "f64", 97),
    ("atan2", "c128", 39027),
    ("atan2", "c64", 5353),
    ("atan2", "f16", 482),
    ("atan2", "f32", 486),
    ("atan2", "f64", 3747),
    ("cbrt", "f16", 925),
    ("cbrt", "f32", 867),
    ("cbrt", "f64", 6339),
    ("cosine", "c128", 6613),
    ("cosine", "f16", 691),
    ("cosine", "f32", 662),
    ("cosine", "f64", 1717),
    ("divide", "c128", 7941),
    ("divide", "c64", 687),
    ("divide", "f64", 2016),
    ("divide", "s16", 367),
    ("divide", "s32", 306),
    ("divide", "s64", 918),
    ("divide", "s8", 370),
    ("divide", "u16", 302),
    ("divide", "u32", 115),
    ("divide", "u64", 838),
    ("divide", "u8", 306),
    ("exponential", "c128", 4028),
    ("exponential", "c64", 1360),
    ("exponential", "f16", 108),
    ("exponential", "f32", 86),
    ("exponential", "f64", 1652),
    ("exponential-minus-one", "c128", 4161),
    ("exponential-minus-one", "c64", 1400),
    ("exponential-minus-one", "f16", 396),
    ("exponential-minus-one", "f32", 381),
    ("exponential-minus-one", "f64", 1900),
    ("log", "c128", 7599),
    ("log", "c64", 950),
    ("log", "f16", 266),
    ("log", "f32", 244),
    ("log", "f64", 608),
    ("log-plus-one", "c128", 6962),
    ("log-plus-one", "c64", 842),
    ("log-plus-one", "f16", 284),
    ("log-plus-one", "f32", 262),
    ("log-plus-one", "f64", 2073),
    ("logistic", "f16", 226),
    ("logistic", "f32", 176),
    ("logistic", "f64", 2412),
    ("multiply", "c128", 270),
    ("multiply", "f64", 97),
    ("power", "c128", 18205),
    ("power", "c64", 3351),
    ("power", "f16", 975),
    ("power", "f32", 925),
    ("power", "f64", 5511),
    ("power", "s16", 396),
    ("power", "s64", 601),
    ("power", "s8", 392),
    ("power", "u16", 399),
    ("power", "u64", 604),
    ("power", "u8", 388),
    ("rsqrt", "c128", 11318),
    ("rsqrt", "c64", 2383),
    ("rsqrt", "f16", 97),
    ("rsqrt", "f32", 75),
    ("rsqrt", "f64", 698),
    ("sine", "c128", 5878),
    ("sine", "f32", 662),
    ("sine", "f64", 1789),
    ("sqrt", "c128", 15606),
    ("sqrt", "c64", 3193),
    ("sqrt", "f16", 97),
    ("sqrt", "f32", 75),
    ("sqrt", "f64", 986),
    ("subtract", "c128", 97),
    ("subtract", "f64", 97),
    ("tanh", "c128", 9939),
    ("tanh", "f16", 212),
    ("tanh", "f32", 190),
    ("tanh", "f64", 1609),
];

/// FLOPs per output element of an elementwise op under the GPU model.
fn gpu_flops_per_element(op: Opcode, output: crate::shape::PrimitiveType) -> u64 {
    let (op, ty) = (op.as_str(), output.as_str());
    GPU_OP_CYCLES.iter().find(|(o, t, _)| *o == op && *t == ty).map_or(GPU_FLOPS_PER_ELEMENT, |r| r.2)
}

/// True for the custom-call targets of DNN convolutions (cuDNN, and MIOpen behind the same
/// names on ROCm).
pub(crate) fn is_dnn_convolution(target: &str) -> bool {
    target.starts_with("__cudnn$conv")
}

/// A custom call under the GPU model: a DNN convolution is priced as its convolution and a
/// cuBLAS GEMM as its dot product (over the contracting dimensions of its backend config), each
/// reading its operands and writing its result (the first output: not the workspace); anything
/// else costs nothing.
fn gpu_custom_call(ctx: &Ctx<'_>, instr: &Instruction) -> Cost {
    let operands = (0..instr.operands.len()).fold(0u64, |a, i| a.saturating_add(ctx.operand_bytes(instr, i)));
    if is_cublas_gemm(instr.attrs.custom_call_target()) {
        let (Some(contracting), Some(lhs)) =
            (crate::backend_config::gemm_lhs_contracting(instr.attrs.backend_config()), ctx.operand_shape(instr, 0))
        else {
            return Cost::default();
        };
        let width = contracting.iter().fold(1u64, |a, &c| sat(a, dim(lhs, c)));
        return Cost {
            flops: sat(2, sat(first_array(&instr.shape).element_count(), width)),
            transcendentals: 0,
            bytes_accessed: operands.saturating_add(first_array(&instr.shape).byte_size()),
        };
    }
    if !is_dnn_convolution(instr.attrs.custom_call_target()) {
        return Cost::default();
    }
    let result = first_array(&instr.shape);
    Cost {
        flops: convolution_flops_to(ctx, instr, result),
        transcendentals: 0,
        bytes_accessed: operands.saturating_add(result.byte_size()),
    }
}

/// Whether a custom-call target is a cuBLAS GEMM (legacy cuBLAS or cuBLASLt, the names hipBLASLt
/// GEMMs also carry on ROCm), which XLA's GPU cost analysis prices as a dot.
fn is_cublas_gemm(target: &str) -> bool {
    matches!(target, "__cublas$gemm" | "__cublas$lt$matmul" | "__cublas$lt$matmul$f8")
}

/// The HBM bytes of a non-fusion instruction under the GPU model: its bytes, but for a DNN
/// convolution or a cuBLAS GEMM with a tuple result only its operands (XProf's memory-space
/// breakdown leaves the tuple result out).
fn gpu_hbm_bytes(module: &Module, id: InstrId, cost: &Cost) -> u64 {
    let instr = module.instruction(id);
    if matches!(instr.opcode, Opcode::AllReduce | Opcode::AllReduceStart) {
        let operands =
            instr.operands.iter().fold(0u64, |a, &o| a.saturating_add(module.instruction(o).shape.byte_size()));
        return cost.bytes_accessed.saturating_add(operands);
    }
    let target = instr.attrs.custom_call_target();
    if instr.opcode == Opcode::CustomCall
        && (is_dnn_convolution(target) || (is_cublas_gemm(target) && cost.flops > 0 && instr.shape.is_tuple()))
    {
        return instr.operands.iter().fold(0u64, |a, &o| a.saturating_add(module.instruction(o).shape.byte_size()));
    }
    cost.bytes_accessed
}

fn first_array(shape: &Shape) -> &Shape {
    if shape.is_tuple() { shape.tuple_shapes().first().unwrap_or(shape) } else { shape }
}

fn leaves_bytes(shape: &Shape) -> u64 {
    shape.leaves().iter().filter(|s| s.is_array()).fold(0u64, |a, s| a.saturating_add(s.byte_size()))
}

fn log2_ceil(n: u64) -> u64 {
    if n <= 1 { 0 } else { u64::from(64 - (n - 1).leading_zeros()) }
}

fn log2_floor(n: u64) -> u64 {
    if n == 0 { 0 } else { u64::from(63 - n.leading_zeros()) }
}

fn dim(shape: &Shape, d: i64) -> u64 {
    usize::try_from(d).ok().and_then(|d| shape.dims().get(d)).map_or(1, |&v| v.max(0) as u64)
}

fn dot_flops(ctx: &Ctx<'_>, instr: &Instruction) -> u64 {
    let Some(lhs) = ctx.operand_shape(instr, 0) else { return 0 };
    let width = instr
        .attrs
        .dot_dimension_numbers()
        .map_or(1, |d| d.lhs_contracting_dimensions.iter().fold(1u64, |a, &c| sat(a, dim(lhs, c))));
    sat(2, sat(instr.shape.element_count(), width))
}

fn window_elements(instr: &Instruction) -> u64 {
    instr.attrs.window().map_or(1, |w| w.dimensions.iter().fold(1u64, |a, d| sat(a, d.size.max(0) as u64)))
}

fn reduce_window_count(ctx: &Ctx<'_>, instr: &Instruction) -> u64 {
    let out_shape = first_array(&instr.shape);
    let output = out_shape.element_count();
    let mut window = window_elements(instr);
    let mut count = sat(window.saturating_sub(1), output);
    if let Some(w) = instr.attrs.window() {
        let reduced = w.dimensions.iter().filter(|d| d.size != 1).count();
        let padded = w.dimensions.iter().filter(|d| d.padding_low != 0 || d.padding_high != 0).count();
        if reduced == 1 && padded == 1 && instr.shape.is_array() {
            // A reduce followed by a broadcast, written as one padded window: XLA prices it as the
            // reduction plus the broadcast.
            let found = w.dimensions.iter().enumerate().find(|(_, d)| {
                d.size != 1
                    && d.padding_low != 0
                    && d.padding_low == d.padding_high
                    && d.size == d.padding_low.saturating_mul(2).saturating_add(1)
            });
            if let Some((k, d)) = found {
                let span = instr.shape.dims().get(k).copied().unwrap_or(0);
                if d.padding_low == span - 1 && span > 0 {
                    window = span as u64;
                    count = (output / window).saturating_add(window - 1);
                }
            }
        }
    }
    let _ = ctx;
    count
}

fn convolution_flops(ctx: &Ctx<'_>, instr: &Instruction) -> u64 {
    convolution_flops_to(ctx, instr, &instr.shape)
}

/// Convolution FLOPs of `instr` producing `out` (the instruction's shape, or the convolution
/// result inside a custom call's tuple).
fn convolution_flops_to(ctx: &Ctx<'_>, instr: &Instruction, out: &Shape) -> u64 {
    let (Some(lhs), Some(rhs)) = (ctx.operand_shape(instr, 0), ctx.operand_shape(instr, 1)) else { return 0 };
    let Some(dn) = instr.attrs.convolution_dimension_numbers() else { return 0 };
    let input_feature = dim(lhs, dn.input_feature_dimension);
    let output_feature = dim(out, dn.output_feature_dimension);
    let batch = dim(lhs, dn.input_batch_dimension);
    let fgc = (instr.attrs.feature_group_count().max(1)) as u64;
    let bgc = (instr.attrs.batch_group_count().max(1)) as u64;
    let window = instr.attrs.window().map(|w| w.dimensions.as_slice()).unwrap_or(&[]);
    let mut positions = 1u64;
    for (s, wd) in window.iter().enumerate() {
        let k = dn.kernel_spatial_dimensions.get(s).map_or(1, |&d| dim(rhs, d)) as i64;
        let o = dn.output_spatial_dimensions.get(s).map_or(1, |&d| dim(out, d)) as i64;
        let i = dn.input_spatial_dimensions.get(s).map_or(1, |&d| dim(lhs, d)) as i64;
        positions = sat(positions, valid_positions(k, o, i, wd));
    }
    let fma = sat(sat(sat(input_feature / fgc, output_feature), batch / bgc), positions);
    sat(2, fma)
}

/// Kernel-position × output-position pairs that read a real (not dilated-hole, not padding)
/// input element along one spatial dimension.
fn valid_positions(k: i64, o: i64, i: i64, wd: &crate::raw::WindowDimension) -> u64 {
    let stride = wd.stride.max(1);
    let wdil = wd.window_dilation.max(1);
    let bdil = wd.base_dilation.max(1);
    let (pl, ph) = (wd.padding_low, wd.padding_high);
    if i == o && k == o && i == bdil && wdil == 1 && (i - 1).max(1) == stride && pl == 0 && ph == 0 {
        return i.max(0) as u64;
    }
    if i == 1 && k == o && wdil == 1 && bdil == 1 && stride == 1 && ph == o - 1 && pl == o - 1 {
        return o.max(0) as u64;
    }
    // Hostile sizes: fall back to the upper bound instead of iterating.
    if k > 1 << 20 || (bdil > 1 && (k as i128) * (o as i128) > 1 << 24) {
        return sat(k.max(0) as u64, o.max(0) as u64) / bdil as u64;
    }
    let mut count = 0u64;
    for kk in 0..k.max(0) {
        let c = kk.saturating_mul(wdil).saturating_sub(pl);
        if bdil == 1 {
            // Output positions with 0 <= oo*stride + c < i, in closed form.
            let lo = if c >= 0 { 0 } else { (-c + stride - 1) / stride };
            let hi = if i - 1 - c < 0 { -1 } else { ((i - 1 - c) / stride).min(o - 1) };
            if hi >= lo {
                count = count.saturating_add((hi - lo + 1) as u64);
            }
        } else {
            for oo in 0..o.max(0) {
                let u = oo.saturating_mul(stride).saturating_add(c);
                if u >= 0 && u % bdil == 0 && u / bdil < i {
                    count += 1;
                }
            }
        }
    }
    count
}

/// A transpose whose result keeps the operand's memory order (XLA's `TransposeIsBitcast`).
fn transpose_is_bitcast(ctx: &Ctx<'_>, instr: &Instruction) -> bool {
    let Some(operand) = ctx.operand_shape(instr, 0) else { return false };
    let (Some(lo), Some(li)) = (instr.shape.layout(), operand.layout()) else { return false };
    let perm = &instr.attrs.dimensions;
    let (mo, mi) = (lo.minor_to_major(), li.minor_to_major());
    if mo.len() != mi.len() || perm.len() != mo.len() {
        return false;
    }
    mo.iter().zip(mi).all(|(&o, &i)| usize::try_from(o).ok().and_then(|o| perm.get(o)) == Some(&i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend_config::gemm_lhs_contracting;

    /// A cuBLAS GEMM's contracting dimensions come from its backend config as XLA writes it
    /// (64-bit integers as strings); a config XProf's XLA cannot read (not JSON, or naming the
    /// retired `wait_on_operation_queues`) leaves the GEMM unpriced; an empty one prices it
    /// with XLA's defaults.
    #[test]
    fn gemm_backend_configs() {
        let current = br#"{"operation_queue_id":"0","gemm_backend_config":{"dot_dimension_numbers":
            {"lhs_contracting_dimensions":["0"],"rhs_contracting_dimensions":["1"]}},"device_type":"X"}"#;
        assert_eq!(gemm_lhs_contracting(current), Some(vec![0]));
        let numbers = br#"{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":[1, 2]}}}"#;
        assert_eq!(gemm_lhs_contracting(numbers), Some(vec![1, 2]));
        let legacy = br#"{"operation_queue_id":"0","wait_on_operation_queues":[],"gemm_backend_config":
            {"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"]}}}"#;
        assert_eq!(gemm_lhs_contracting(legacy), None);
        assert_eq!(gemm_lhs_contracting(b"selected_algorithm: 7"), None);
        assert_eq!(gemm_lhs_contracting(b""), Some(Vec::new()));
        assert!(is_cublas_gemm("__cublas$lt$matmul") && is_cublas_gemm("__cublas$gemm"));
        assert!(!is_cublas_gemm("__cudnn$convForward") && !is_cublas_gemm("__triton_gemm"));
    }

    #[test]
    fn logs() {
        assert_eq!((log2_ceil(0), log2_ceil(1), log2_ceil(2), log2_ceil(5), log2_ceil(8)), (0, 0, 1, 3, 3));
        assert_eq!((log2_floor(1), log2_floor(8), log2_floor(9)), (0, 3, 3));
    }

    #[test]
    fn convolution_positions_match_brute_force() {
        for (k, o, i, stride, pl, ph, wdil) in
            [(3, 8, 8, 1, 1, 1, 1), (3, 4, 8, 2, 1, 0, 1), (5, 6, 10, 1, 0, 0, 1), (3, 5, 9, 2, 2, 2, 2)]
        {
            let wd = crate::raw::WindowDimension {
                size: k,
                stride,
                padding_low: pl,
                padding_high: ph,
                window_dilation: wdil,
                base_dilation: 1,
                window_reversal: false,
            };
            let mut brute = 0u64;
            for kk in 0..k {
                for oo in 0..o {
                    let u = oo * stride - pl + kk * wdil;
                    if (0..i).contains(&u) {
                        brute += 1;
                    }
                }
            }
            assert_eq!(valid_positions(k, o, i, &wd), brute, "{k} {o} {i}");
        }
    }
}
