//! Where a value's data comes from: through layout-only ops and data-moving wrappers to the
//! instruction that produced it, and whether it was computed by a matrix multiply.

use std::collections::BTreeSet;

use crate::custom_call::CustomCallKind;
use crate::{ComputationKind, InstrId, Module, Opcode};

/// Most hops [`Module::value_source`] follows.
const MAX_SOURCE_HOPS: usize = 64;
/// Most instructions [`Module::computed_by_matmul`] visits.
const MAX_UPSTREAM: usize = 4096;

/// Ops that move or relabel data without computing on it.
fn moves_data(op: Opcode) -> bool {
    matches!(op, Opcode::Bitcast | Opcode::Copy | Opcode::Reshape | Opcode::Transpose)
}

impl Module {
    /// True for a fusion whose body only moves data: parameters and layout ops (XLA:CPU wraps a
    /// lone `copy` or `transpose` in a `wrapped_copy` fusion).
    fn is_data_movement_fusion(&self, id: InstrId) -> bool {
        let Some(body) = self.fused_computation(id) else { return false };
        body.instructions().iter().all(|&i| {
            let op = self.instruction(i).opcode();
            op == Opcode::Parameter || moves_data(op)
        })
    }

    /// The instruction that produced a value's data: follows `bitcast`, `copy`, `reshape` and
    /// `transpose`, fusions that only move data (one operand), and the parameters of async
    /// computations to the operand their caller passes (at most 64 hops).
    ///
    /// ```
    /// let module = xlens_hlo::Module::decode(xlens_hlo::testing::tiny_module_bytes().into()).unwrap();
    /// let fusion = module.instruction_by_name("fusion.2").unwrap().id();
    /// // The loop fusion computes (exp + add): it is its own source.
    /// assert_eq!(module.value_source(fusion), fusion);
    /// ```
    pub fn value_source(&self, mut id: InstrId) -> InstrId {
        for _ in 0..MAX_SOURCE_HOPS {
            let instr = self.instruction(id);
            let op = instr.opcode();
            if (moves_data(op) || (op == Opcode::Fusion && self.is_data_movement_fusion(id)))
                && instr.operands().len() == 1
            {
                id = instr.operands()[0];
                continue;
            }
            if op != Opcode::Parameter {
                return id;
            }
            let comp = self.computation(instr.computation());
            if comp.kind() != ComputationKind::Async {
                return id;
            }
            let caller = comp.callers().first().copied();
            let number = instr.parameter_number().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
            match caller.and_then(|c| self.instruction(c).operands().get(number).copied()) {
                Some(operand) => id = operand,
                None => return id,
            }
        }
        id
    }

    /// True when the value `id` is computed, somewhere upstream in its computation, by a matrix
    /// multiply: a `dot` or `convolution`, a fusion holding one, or a library GEMM or attention
    /// custom call. Parameters and constants stop the search (a weight cast or copied is not
    /// computed by a matmul; an activation is). Looks at most 4096 instructions.
    pub fn computed_by_matmul(&self, id: InstrId) -> bool {
        let mut stack = vec![id];
        let mut seen = BTreeSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) || seen.len() > MAX_UPSTREAM {
                continue;
            }
            if self.is_matmul(id) {
                return true;
            }
            stack.extend(self.instruction(id).operands().iter().copied());
        }
        false
    }

    /// A matrix multiply, or a kernel (fusion, custom call) that runs one.
    fn is_matmul(&self, id: InstrId) -> bool {
        match self.instruction(id).opcode() {
            Opcode::Dot | Opcode::Convolution => true,
            Opcode::CustomCall => matches!(
                self.custom_call_kind(id),
                Some(CustomCallKind::Gemm | CustomCallKind::Convolution | CustomCallKind::Attention)
            ),
            Opcode::Fusion => self.fused_computation(id).is_some_and(|body| {
                body.instructions().iter().any(|&i| {
                    matches!(self.instruction(i).opcode(), Opcode::Dot | Opcode::Convolution | Opcode::Fusion)
                        && self.is_matmul(i)
                })
            }),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{HloBuilder, shape};
    use crate::{Module, PrimitiveType, raw};

    /// `w` (a weight) is copied through a data-movement fusion; `h = dot(x, w')` is an
    /// activation, bitcast before use.
    fn module() -> Module {
        let f = |d: &[i64]| shape(PrimitiveType::F32, d);
        let mut b = HloBuilder::new("m");
        let mut body = b.computation("wrapped_copy_computation");
        let p = body.param("p", 0, f(&[8, 4]));
        let c = body.op("copy.0", "copy", f(&[8, 4]), &[p]);
        let body = body.finish(c);
        let mut main = b.computation("main");
        let x = main.param("x", 0, f(&[2, 8]));
        let w = main.param("w", 1, f(&[8, 4]));
        let wc = main.op("wrapped_copy", "fusion", f(&[8, 4]), &[w]);
        main.edit(wc, |i| {
            i.fusion_kind = "kLoop".into();
            i.called_computation_ids = vec![body];
        });
        let h = main.op("dot", "dot", f(&[2, 4]), &[x, wc]);
        main.edit(h, |i| {
            i.dot_dimension_numbers = Some(Box::new(raw::DotDimensionNumbers {
                lhs_contracting_dimensions: vec![1],
                rhs_contracting_dimensions: vec![0],
                ..Default::default()
            }))
        });
        let e = main.op("exp", "exponential", f(&[2, 4]), &[h]);
        let bc = main.op("bitcast", "bitcast", f(&[8]), &[e]);
        main.finish(bc);
        Module::from_proto(b.finish("main"), 0).unwrap()
    }

    #[test]
    fn sources_look_through_layout_and_copy_wrappers() {
        let m = module();
        let id = |n: &str| m.instruction_by_name(n).unwrap().id();
        assert_eq!(m.value_source(id("wrapped_copy")), id("w"));
        assert_eq!(m.value_source(id("bitcast")), id("exp"));
        assert!(m.computed_by_matmul(id("bitcast")), "exp(dot(x, w)) is an activation");
        assert!(!m.computed_by_matmul(id("wrapped_copy")), "a copied weight is not");
        assert!(!m.computed_by_matmul(id("x")));
    }
}
