//! What a custom call computes, from its target name: the library GEMMs, convolutions and fused
//! attention kernels XLA calls on GPUs, host callbacks, and everything else.

use crate::ids::InstrId;
use crate::module::Module;
use crate::shape::Shape;

/// The kind of work behind a custom-call target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CustomCallKind {
    /// A library matrix multiply (`__cublas$gemm`, `__cublas$lt$matmul`, hipBLASLt behind the same
    /// names on ROCm, `__triton_gemm`).
    Gemm,
    /// A DNN convolution (`__cudnn$conv…`: cuDNN, or MIOpen on ROCm).
    Convolution,
    /// A fused attention kernel (cuDNN fused MHA `__cudnn$fmha…`, Transformer Engine
    /// `te_fused_attn_*`, flash / splash attention kernels).
    Attention,
    /// A call back into the host (Python callbacks, `jax.debug.print`).
    HostCallback,
    /// Anything else (Pallas / Mosaic kernels, sharding annotations, FFI calls).
    Other,
}

impl CustomCallKind {
    /// Classifies a custom-call target.
    ///
    /// ```
    /// use xlens_hlo::CustomCallKind;
    /// assert_eq!(CustomCallKind::of_target("__cublas$lt$matmul"), CustomCallKind::Gemm);
    /// assert_eq!(CustomCallKind::of_target("__cudnn$convForward"), CustomCallKind::Convolution);
    /// assert_eq!(CustomCallKind::of_target("te_fused_attn_forward_ffi"), CustomCallKind::Attention);
    /// assert_eq!(CustomCallKind::of_target("xla_ffi_python_cpu_callback"), CustomCallKind::HostCallback);
    /// ```
    pub fn of_target(target: &str) -> CustomCallKind {
        let t = target.to_ascii_lowercase();
        if t.starts_with("__cudnn$conv") {
            CustomCallKind::Convolution
        } else if t.contains("fmha") || t.contains("attn") || t.contains("attention") || t.contains("flash") {
            CustomCallKind::Attention
        } else if t.starts_with("__cublas") || t.contains("gemm") || t.contains("matmul") || t.contains("hipblaslt") {
            CustomCallKind::Gemm
        } else if t.contains("callback") || t.contains("host_compute") {
            CustomCallKind::HostCallback
        } else {
            CustomCallKind::Other
        }
    }

    /// True for the kinds that run on the matrix units (GEMMs, convolutions, attention).
    pub fn is_matmul(self) -> bool {
        matches!(self, CustomCallKind::Gemm | CustomCallKind::Convolution | CustomCallKind::Attention)
    }
}

impl Module {
    /// The kind of a custom-call instruction, `None` for other instructions.
    pub fn custom_call_kind(&self, id: InstrId) -> Option<CustomCallKind> {
        self.instruction(id).custom_call_target().map(CustomCallKind::of_target)
    }
}

impl Module {
    /// FLOPs of one execution of a library GEMM or fused-attention custom call, derived from
    /// its operand and result shapes (XLA's cost model prices such calls at nothing; XProf's
    /// roofline tool derives them the same way). `None` for other instructions and when the
    /// shapes do not fit.
    ///
    /// A GEMM is `2·B·M·N·K`: the result is the largest array of the call's output (a scratch
    /// buffer loses), and the first two operands of rank ≥ 2 whose trailing dimensions multiply
    /// into it, either way round, give `K`; `B` is the product of the result's leading
    /// dimensions. Attention reads Q, K and V in `[batch, sequence, heads, head_dim]` layout
    /// (or one packed `[batch, sequence, 3, heads, head_dim]` operand) and costs
    /// `4·batch·heads·Sq·Skv·head_dim` forward, twice that for a backward call: an estimate
    /// that ignores causal masking.
    pub fn custom_call_shape_flops(&self, id: InstrId) -> Option<u64> {
        let instr = self.instruction(id);
        let operands: Vec<&Shape> = instr.operands().iter().map(|&o| self.instruction(o).shape()).collect();
        match self.custom_call_kind(id)? {
            CustomCallKind::Gemm => gemm_flops(largest_array(instr.shape())?, &operands),
            CustomCallKind::Attention => {
                let backward = instr.custom_call_target().is_some_and(|t| t.contains("backward") || t.contains("bwd"));
                attention_flops(&operands).map(|f| if backward { f.saturating_mul(2) } else { f })
            }
            _ => None,
        }
    }
}

/// The largest array leaf of a shape: by rank, then element count (the first of equals).
fn largest_array(shape: &Shape) -> Option<&Shape> {
    shape.leaves().into_iter().filter(|s| s.is_array()).fold(None, |best: Option<&Shape>, s| match best {
        Some(b) if (b.dims().len(), b.element_count()) >= (s.dims().len(), s.element_count()) => Some(b),
        _ => Some(s),
    })
}

fn dim(shape: &Shape, from_end: usize) -> Option<u64> {
    let d = shape.dims();
    d.len().checked_sub(from_end).and_then(|i| d.get(i)).map(|&v| v.max(0) as u64)
}

fn gemm_flops(out: &Shape, operands: &[&Shape]) -> Option<u64> {
    let (m, n) = (dim(out, 2)?, dim(out, 1)?);
    let batch: u64 = out.dims().iter().rev().skip(2).map(|&d| d.max(0) as u64).product();
    let candidates: Vec<&Shape> = operands.iter().take(10).copied().filter(|s| s.dims().len() >= 2).collect();
    for (i, a) in candidates.iter().enumerate() {
        for b in &candidates[i + 1..] {
            let (a2, a1, b2, b1) = (dim(a, 2)?, dim(a, 1)?, dim(b, 2)?, dim(b, 1)?);
            for (am, ak) in [(a2, a1), (a1, a2)] {
                for (bk, bn) in [(b2, b1), (b1, b2)] {
                    if am == m && bn == n && ak == bk {
                        return Some(2u64.saturating_mul(batch).saturating_mul(m).saturating_mul(n).saturating_mul(ak));
                    }
                }
            }
        }
    }
    None
}

fn attention_flops(operands: &[&Shape]) -> Option<u64> {
    // One packed QKV operand, or the first three of rank 4 with a common head dimension.
    let (q, kv): (Vec<u64>, Vec<u64>) = match operands.iter().find(|s| s.dims().len() == 5 && dim(s, 3) == Some(3)) {
        Some(packed) => {
            let d: Vec<u64> = packed.dims().iter().map(|&v| v.max(0) as u64).collect();
            let q = vec![d[0], d[1], d[3], d[4]];
            (q.clone(), q)
        }
        None => {
            let four: Vec<Vec<u64>> = operands
                .iter()
                .filter(|s| s.dims().len() == 4)
                .take(3)
                .map(|s| s.dims().iter().map(|&v| v.max(0) as u64).collect())
                .collect();
            if four.len() < 3 || four[0][3] != four[1][3] || four[1] != four[2] {
                return None;
            }
            (four[0].clone(), four[1].clone())
        }
    };
    let (batch, sq, heads, head_dim, skv) = (q[0], q[1], q[2], q[3], kv[1]);
    Some(
        4u64.saturating_mul(batch)
            .saturating_mul(heads)
            .saturating_mul(sq)
            .saturating_mul(skv)
            .saturating_mul(head_dim),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::PrimitiveType;

    fn array(dims: &[i64]) -> Shape {
        Shape::array(PrimitiveType::Bf16, dims)
    }

    #[test]
    fn gemm_flops_from_shapes() {
        let out = array(&[8192, 8192]);
        let (a, b) = (array(&[8192, 4096]), array(&[4096, 8192]));
        assert_eq!(gemm_flops(&out, &[&a, &b]), Some(2 * 8192 * 8192 * 4096));
        // Transposed rhs, batched.
        let out = array(&[4, 64, 32]);
        let (a, b) = (array(&[4, 64, 16]), array(&[4, 32, 16]));
        assert_eq!(gemm_flops(&out, &[&a, &b]), Some(2 * 4 * 64 * 32 * 16));
        assert_eq!(gemm_flops(&out, &[&array(&[3, 3])]), None);
    }

    #[test]
    fn attention_flops_from_packed_qkv() {
        let qkv = array(&[2, 2048, 3, 16, 128]);
        assert_eq!(attention_flops(&[&qkv]), Some(4 * 2 * 16 * 2048 * 2048 * 128));
        let q = array(&[2, 1024, 8, 64]);
        let kv = array(&[2, 512, 8, 64]);
        assert_eq!(attention_flops(&[&q, &kv, &kv]), Some(4 * 2 * 8 * 1024 * 512 * 64));
    }
}
