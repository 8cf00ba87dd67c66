//! `unnecessary_convert_reduce`: a narrow float (bf16, f16, f8) is upcast to f32, reduced in f32
//! and the result cast straight back to the narrow type: the upcast array is materialised (or
//! read) at full width only to produce a narrow result.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use xlens_hlo::{InstrId, Module, OpClass, Opcode, PrimitiveType};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;
use xlens_hlo::layout::{Work, kernel_body, work_of};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct UnnecessaryConvertReduce;

const META: DetectorMeta = DetectorMeta {
    id: "unnecessary_convert_reduce",
    title: "Narrow floats upcast only to be reduced and cast back",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Upcast -> reduce -> downcast chains: a `reduce` computing in a wide float (f32) whose input comes, \
                  through elementwise and layout ops (across fusion boundaries), from a `convert` of a narrower float \
                  (bf16, f16, f8) in another kernel, so that the wide intermediate is materialised in memory, and \
                  whose result reaches a `convert` back to that narrow type in a kernel that stores the narrow type. \
                  Fusion bodies are searched (XLA:CPU puts each reduce in a `ynn_fusion`). An upcast fused into the \
                  reduce's own fusion (accumulating in f32 as recommended) writes nothing wide and is not reported.",
        why: "`x.astype(f32).mean().astype(bf16)` makes XLA write (or read) the whole input at twice its width only \
              to return a bf16 result; when the upcast and the reduce land in different kernels the f32 copy of the \
              array goes through memory. Reductions can accumulate in f32 while reading the narrow input directly \
              (`jnp.mean(x, dtype=jnp.float32)`, `jnp.sum(x, dtype=...)`, or `preferred_element_type`), which keeps \
              the numerics and halves the bytes.",
        evidence: "The number of chains and of wide reduces, each chain's reduce (kernel and the reduce inside it, \
                   shape), the upcast and the downcast with the kernels they sit in, the JAX op and source line, and, \
                   with an op timeline, the time of the chains' kernels and the estimated saving.",
        thresholds: "Reported when there are at least `unnecessary_convert_reduce.min_chains` (default 1) chains in the \
                     step's programs. The impact estimate is, per chain, the reduce kernel's time times the fraction \
                     of its input bytes the wide type adds (1/2 for bf16 -> f32), plus the whole time of upcast \
                     kernels that only convert and feed nothing but chain reduces.",
        fix: "Reduce the narrow array directly and let the reduction accumulate wide instead of converting the whole \
              array first, then cast the (small) result; for norms use a fused layer-norm. Check the source lines in \
              the evidence.",
        fix_lines: FixLines {
            jax: "`jnp.mean(x, axis=-1, dtype=jnp.float32)` / `jnp.sum(x, dtype=jnp.float32)` instead of \
                  `x.astype(jnp.float32).mean()`; for norms `jax.lax.reduce_precision` or a fused layer-norm.",
            tensorflow: "let Keras's `LayerNormalization` under a mixed-precision policy do the wide accumulation, \
                         instead of `tf.cast(x, tf.float32)` of the whole activation before `tf.reduce_mean`.",
            pytorch_xla: "`x.mean(dim=-1, dtype=torch.float32)` / `x.sum(dim=-1, dtype=torch.float32)` instead of \
                          `x.float().mean(-1)`.",
        },
    },
};

fn is_narrower_float(narrow: PrimitiveType, wide: PrimitiveType) -> bool {
    narrow.is_float() && wide.is_float() && narrow.bit_width() > 0 && narrow.bit_width() < wide.bit_width()
}

/// Ops a value passes through unchanged in meaning (elementwise math keeps the dtype question
/// open; layout and data movement carry the value).
fn passes(module: &Module, id: InstrId) -> bool {
    let op = module.instruction(id).opcode();
    op == Opcode::Convert
        || op.class() == OpClass::Elementwise
        || matches!(
            op,
            Opcode::Bitcast
                | Opcode::Broadcast
                | Opcode::Reshape
                | Opcode::Transpose
                | Opcode::Copy
                | Opcode::Slice
                | Opcode::Concatenate
                | Opcode::GetTupleElement
                | Opcode::Tuple
        )
}

/// The fusion whose body `id` is a parameter of, with the operand bound to it.
fn bound_operand(module: &Module, id: InstrId) -> Option<InstrId> {
    let instr = module.instruction(id);
    if instr.opcode() != Opcode::Parameter {
        return None;
    }
    let caller = *module.computation(instr.computation()).callers().first()?;
    let caller = module.instruction(caller);
    if caller.opcode() != Opcode::Fusion {
        return None;
    }
    caller.operands().get(usize::try_from(instr.parameter_number()?).ok()?).copied()
}

/// Searches the values `value` is computed from (across fusion boundaries) for a convert from a
/// narrower float to `wide`.
fn find_upcast(module: &Module, value: InstrId, wide: PrimitiveType) -> Option<InstrId> {
    let mut stack = vec![value];
    let mut seen = BTreeSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) || seen.len() > 256 {
            continue;
        }
        let instr = module.instruction(id);
        if instr.opcode() == Opcode::Convert
            && let Some(&from) = instr.operands().first()
            && instr.shape().element_type() == wide
            && is_narrower_float(module.instruction(from).shape().element_type(), wide)
        {
            return Some(id);
        }
        if let Some(outside) = bound_operand(module, id) {
            stack.push(outside);
        } else if let Some(body) = module.fused_computation(id) {
            stack.extend(body.root());
        } else if passes(module, id) {
            stack.extend(instr.operands().iter().rev());
        }
    }
    None
}

/// A convert from `wide` to a narrower float, in a kernel whose output holds that narrow type.
fn is_downcast(module: &Module, id: InstrId, wide: PrimitiveType) -> bool {
    let instr = module.instruction(id);
    if instr.opcode() != Opcode::Convert
        || instr.operands().first().is_none_or(|&o| module.instruction(o).shape().element_type() != wide)
        || !is_narrower_float(instr.shape().element_type(), wide)
    {
        return false;
    }
    let narrow = instr.shape().element_type();
    module.instruction(outermost(module, id)).shape().leaves().iter().any(|s| s.element_type() == narrow)
}

/// Follows `from` forward through pass-through ops inside its own computation; returns a
/// downcast when one is met, and collects the computation's root when the value reaches it.
fn forward_in_body(module: &Module, from: InstrId, wide: PrimitiveType, roots: &mut Vec<InstrId>) -> Option<InstrId> {
    let mut stack = vec![from];
    let mut seen = BTreeSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) || seen.len() > 256 {
            continue;
        }
        if is_downcast(module, id, wide) {
            return Some(id);
        }
        if module.computation(module.instruction(id).computation()).root() == Some(id) {
            roots.push(id);
        }
        for &user in module.instruction(id).users().iter().rev() {
            if passes(module, user) {
                stack.push(user);
            }
        }
    }
    None
}

/// Searches the users of a reduce for a convert from `wide` to a narrower float: in the reduce's
/// own kernel, or in a kernel that consumes the reduce's kernel (one kernel on).
fn find_downcast(module: &Module, reduce: InstrId, wide: PrimitiveType) -> Option<InstrId> {
    let outputs = match kernel_outputs(module, reduce, wide) {
        ControlFlow::Break(downcast) => return Some(downcast),
        ControlFlow::Continue(outputs) => outputs,
    };
    let (consumers, seen) = consumers_of(module, outputs);
    consumers.into_iter().find_map(|consumer| downcast_in_consumer(module, consumer, &seen, wide))
}

/// Follows a reduce inside its kernel and out of its (nested) fusion bodies: breaks with a
/// downcast found on the way, else continues with the kernel's outputs.
fn kernel_outputs(module: &Module, reduce: InstrId, wide: PrimitiveType) -> ControlFlow<InstrId, Vec<InstrId>> {
    // Inside the reduce's kernel, and out of its (nested) fusion bodies.
    let mut roots = Vec::new();
    if let Some(d) = forward_in_body(module, reduce, wide, &mut roots) {
        return ControlFlow::Break(d);
    }
    let mut outputs: Vec<InstrId> = Vec::new();
    let mut guard = 0;
    while let Some(root) = roots.pop() {
        guard += 1;
        if guard > 64 {
            break;
        }
        let comp = module.computation(module.instruction(root).computation());
        match comp.callers().first() {
            Some(&caller) if comp.is_fusion() => {
                let mut more = Vec::new();
                if let Some(d) = forward_in_body(module, caller, wide, &mut more) {
                    return ControlFlow::Break(d);
                }
                if module.computation(module.instruction(caller).computation()).is_fusion() {
                    roots.extend(more);
                } else {
                    outputs.push(caller);
                }
            }
            _ => outputs.push(root),
        }
    }
    ControlFlow::Continue(outputs)
}

/// The kernels that consume the reduce's kernel `outputs`, through bitcasts and tuples, sorted,
/// and the values seen on the way.
fn consumers_of(module: &Module, outputs: Vec<InstrId>) -> (Vec<InstrId>, BTreeSet<InstrId>) {
    // The kernels that consume the reduce's kernel, through bitcasts and tuples.
    let mut consumers: Vec<InstrId> = Vec::new();
    let mut stack = outputs;
    let mut seen = BTreeSet::new();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) || seen.len() > 256 {
            continue;
        }
        for &user in module.instruction(id).users() {
            match module.instruction(user).opcode() {
                Opcode::Bitcast | Opcode::GetTupleElement | Opcode::Tuple => stack.push(user),
                _ => consumers.push(user),
            }
        }
    }
    consumers.sort_unstable();
    consumers.dedup();
    (consumers, seen)
}

/// The downcast a consumer kernel makes of the reduce's value (`seen`): itself, or inside its body.
fn downcast_in_consumer(
    module: &Module,
    consumer: InstrId,
    seen: &BTreeSet<InstrId>,
    wide: PrimitiveType,
) -> Option<InstrId> {
    let c = module.instruction(consumer);
    if is_downcast(module, consumer, wide) {
        return Some(consumer);
    }
    let body = module.fused_computation(consumer)?;
    // The parameters bound to the reduce kernel's value (looked through bitcasts).
    for (n, &operand) in c.operands().iter().enumerate() {
        if !seen.contains(&operand) {
            continue;
        }
        for &p in body.instructions() {
            let pi = module.instruction(p);
            if pi.opcode() == Opcode::Parameter && pi.parameter_number() == Some(n as u64) {
                let mut ignore = Vec::new();
                if let Some(d) = forward_in_body(module, p, wide, &mut ignore) {
                    return Some(d);
                }
            }
        }
    }
    None
}

/// The kernel an instruction runs in: the outermost fusion around it, or itself.
fn outermost(module: &Module, mut id: InstrId) -> InstrId {
    for _ in 0..16 {
        let comp = module.computation(module.instruction(id).computation());
        match comp.callers().first() {
            Some(&caller) if comp.is_fusion() => id = caller,
            _ => break,
        }
    }
    id
}

/// One upcast -> reduce -> downcast chain.
#[derive(Debug)]
struct Chain {
    reduce: InstrId,
    upcast: InstrId,
    downcast: InstrId,
    narrow: PrimitiveType,
    wide: PrimitiveType,
}

/// Every wide reduce of a module, and the chains among them.
fn chains(module: &Module) -> (usize, Vec<Chain>) {
    let mut wide_reduces = 0;
    let mut out = Vec::new();
    for instr in module.instructions_with_opcode(Opcode::Reduce) {
        let shape = instr.shape();
        let wide = shape.element_type();
        // Single-output float reduces whose input has the same (wide) type.
        let Some(&input) = instr.operands().first() else { continue };
        if shape.is_tuple() || !wide.is_float() || module.instruction(input).shape().element_type() != wide {
            continue;
        }
        wide_reduces += 1;
        let Some(upcast) = find_upcast(module, input, wide) else { continue };
        // An upcast fused into the reduce's own kernel widens values in registers: nothing wide
        // goes through memory (the recommended way to accumulate in f32). Only a materialised
        // wide intermediate, written by another kernel, is waste.
        if outermost(module, upcast) == outermost(module, instr.id()) {
            continue;
        }
        let Some(downcast) = find_downcast(module, instr.id(), wide) else { continue };
        let narrow =
            module.instruction(upcast).operands().first().map(|&o| module.instruction(o).shape().element_type());
        let Some(narrow) = narrow else { continue };
        out.push(Chain { reduce: instr.id(), upcast, downcast, narrow, wide });
    }
    (wide_reduces, out)
}

impl Detector for UnnecessaryConvertReduce {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host)?;
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, &measured, &score));
        Ok(())
    }
}

/// What the step's modules show: the convert-reduce chains, and their kernels' time when timed.
struct Measured<'a> {
    found: Vec<(&'a Module, Chain)>,
    wide_reduces: usize,
    /// Estimated saving per step, and the chains' kernels' time.
    saving: f64,
    chain_ms: f64,
    timed: bool,
}

/// Finds the chains of every step module and times their kernels.
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let modules = evidence::step_modules(host);
    if modules.is_empty() {
        return Err(Skip::because("no HLO module could be decoded"));
    }
    let mut found: Vec<(&Module, Chain)> = Vec::new();
    let mut wide_reduces = 0;
    let mut saving = 0.0;
    let mut chain_ms = 0.0;
    let mut timed = false;
    for module in modules {
        let (n, module_chains) = chains(module);
        wide_reduces += n;
        if module_chains.is_empty() {
            continue;
        }
        if let Some(times) = evidence::op_times(host, module) {
            timed = true;
            add_chain_times(module, &module_chains, &times, &mut saving, &mut chain_ms);
        }
        found.extend(module_chains.into_iter().map(|c| (module, c)));
    }
    Ok(Measured { found, wide_reduces, saving, chain_ms, timed })
}

/// Adds a module's chain kernels' time to `chain_ms` and what removing the wide copy saves to `saving`.
fn add_chain_times(
    module: &Module,
    module_chains: &[Chain],
    times: &BTreeMap<String, evidence::OpTime>,
    saving: &mut f64,
    chain_ms: &mut f64,
) {
    let time = |id: InstrId| times.get(module.instruction(id).name()).map_or(0.0, |t| t.ms);
    let reduce_kernels: BTreeSet<InstrId> = module_chains.iter().map(|c| outermost(module, c.reduce)).collect();
    let mut by_kernel: BTreeMap<InstrId, f64> = BTreeMap::new();
    for c in module_chains {
        let k = outermost(module, c.reduce);
        let extra = 1.0 - f64::from(c.narrow.bit_width()) / f64::from(c.wide.bit_width().max(1));
        let e = by_kernel.entry(k).or_insert(0.0);
        *e = e.max(time(k) * extra);
    }
    *saving += by_kernel.values().fold(0.0, |a, b| a + b);
    *chain_ms += reduce_kernels.iter().map(|&k| time(k)).fold(0.0, |a, b| a + b);
    // Upcast kernels that only convert and feed nothing but chain reduces vanish.
    let upcast_kernels: BTreeSet<InstrId> = module_chains.iter().map(|c| outermost(module, c.upcast)).collect();
    for k in upcast_kernels {
        let only_converts = kernel_body(module, k).iter().all(|&i| work_of(module, i) != Work::Compute);
        let users = module.instruction(k).users();
        let feeds_chains = !users.is_empty()
            && users.iter().all(|&u| {
                reduce_kernels.contains(&u)
                    || (module.instruction(u).opcode() == Opcode::Bitcast
                        && module.instruction(u).users().iter().all(|v| reduce_kernels.contains(v)))
            });
        if only_converts && feeds_chains && !reduce_kernels.contains(&k) {
            *saving += time(k);
            *chain_ms += time(k);
        }
    }
}

/// The step time (when timed) and what the chains cost.
struct Score {
    step_ms: Option<f64>,
    impact: Impact,
    /// What the per-step figures are per.
    tb: TimeBase,
}

/// Decides whether there are enough chains to report.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    if m.found.len() < config.thresholds.unnecessary_convert_reduce.min_chains.max(1) {
        return None;
    }
    let step_ms = host.step_ms().filter(|_| m.timed);
    let impact = Impact::of(m.saving, step_ms);
    Some(Score { step_ms, impact, tb: TimeBase::of(host) })
}

/// The evidence: the counts, the time and saving, the extra bytes, each chain's instructions.
fn evidence_of(m: &Measured<'_>, s: &Score) -> Vec<Evidence> {
    let (found, wide_reduces, chain_ms, saving, step_ms) = (&m.found, m.wide_reduces, m.chain_ms, m.saving, s.step_ms);
    let tb = s.tb;
    let mut ev = vec![
        Evidence::metric("convert_reduce_chains", "upcast -> reduce -> downcast chains", found.len() as f64, "count"),
        Evidence::metric("wide_float_reduces", "wide float reduces", wide_reduces as f64, "count"),
    ];
    if step_ms.is_some() {
        ev.push(Evidence::metric(
            "convert_reduce_chain_time",
            format!("time of the chains' reduce and upcast kernels {}", tb.per()),
            chain_ms,
            "ms",
        ));
        ev.push(Evidence::metric("convert_reduce_saving", format!("estimated saving {}", tb.per()), saving, "ms"));
    }
    let upcast_bytes: f64 = found
        .iter()
        .map(|(m, c)| {
            let s = m.instruction(c.upcast).shape();
            s.element_count() as f64 * f64::from(c.wide.bit_width().saturating_sub(c.narrow.bit_width())) / 8.0
        })
        .fold(0.0, |a, b| a + b);
    ev.push(Evidence::metric("upcast_extra_bytes", "extra bytes of the upcast arrays", upcast_bytes, "bytes"));
    for (m, c) in found.iter().take(12) {
        let r = m.instruction(c.reduce);
        let (rk, uk, dk) = (outermost(m, c.reduce), outermost(m, c.upcast), outermost(m, c.downcast));
        let input = m.instruction(r.operands()[0]).shape();
        ev.push(Evidence::note(format!(
            "{} in {}: reduce {} -> {}; upcast {} in {}, downcast {} in {}",
            r.name(),
            m.instruction(rk).name(),
            input,
            r.shape(),
            m.instruction(c.upcast).name(),
            m.instruction(uk).name(),
            m.instruction(c.downcast).name(),
            m.instruction(dk).name(),
        )));
        ev.push(evidence::instruction(m, c.reduce));
    }
    ev
}

/// The finding: how many reduces take an upcast input and are cast back, and what it costs.
fn describe(detector: &UnnecessaryConvertReduce, m: &Measured<'_>, s: &Score) -> Finding {
    let (found, wide_reduces, chain_ms, saving) = (&m.found, m.wide_reduces, m.chain_ms, m.saving);
    let (step_ms, impact, tb) = (s.step_ms, s.impact, s.tb);
    let narrow: BTreeSet<&str> = found.iter().map(|(_, c)| c.narrow.as_str()).collect();
    let wide: BTreeSet<&str> = found.iter().map(|(_, c)| c.wide.as_str()).collect();
    let severity = match step_ms {
        None => Severity::P2,
        Some(_) => Severity::from_impact(impact.pct_of_step, META.severity),
    };
    let join = |s: &BTreeSet<&str>| s.iter().copied().collect::<Vec<_>>().join("/");
    let what = format!(
        "{} of {wide_reduces} {} reduce(s) take a {} input upcast to {} and their result is cast back to {}{}.",
        found.len(),
        join(&wide),
        join(&narrow),
        join(&wide),
        join(&narrow),
        if step_ms.is_some() {
            format!(
                "; their kernels take {chain_ms:.3} ms {}, of which about {saving:.3} ms ({:.1}% {}) \
                     is the wide copy",
                tb.per(),
                impact.pct_of_step,
                tb.of_the(),
            )
        } else {
            String::new()
        }
    );
    Finding::new(detector, severity, what, evidence_of(m, s), impact)
}

#[cfg(test)]
mod tests {
    use xlens_hlo::testing::{HloBuilder, shape};
    use xlens_hlo::{Module, PrimitiveType};

    use super::chains;
    use crate::testing::{run_on, testdata};

    /// A layer norm's mean: `bf16[64,512] -> f32 -> reduce -> bf16[64]`. With `fused_upcast` the
    /// convert sits in the reduce's fusion (as XLA:TPU/GPU fuse it); else a separate `convert`
    /// fusion writes the f32 array that the reduce fusion reads.
    fn layer_norm_mean(fused_upcast: bool) -> Module {
        let bf16 = |d: &[i64]| shape(PrimitiveType::Bf16, d);
        let f32_ = |d: &[i64]| shape(PrimitiveType::F32, d);
        let mut b = HloBuilder::new("jit_norm");
        let mut add = b.computation("add");
        let (x, y) = (add.param("x", 0, f32_(&[])), add.param("y", 1, f32_(&[])));
        let s = add.op("add.s", "add", f32_(&[]), &[x, y]);
        let add_id = add.finish(s);
        let reduce_into = |c: &mut xlens_hlo::testing::ComputationBuilder<'_>, input: i64| {
            let zero = c.op("zero", "constant", f32_(&[]), &[]);
            let r = c.op("reduce.1", "reduce", f32_(&[64]), &[input, zero]);
            c.edit(r, |i| {
                i.dimensions = vec![1];
                i.called_computation_ids = vec![add_id];
            });
            c.op("convert.down", "convert", bf16(&[64]), &[r])
        };
        let mut body = b.computation("fused_reduce");
        let p = body.param("param_0", 0, if fused_upcast { bf16(&[64, 512]) } else { f32_(&[64, 512]) });
        let input = if fused_upcast { body.op("convert.up", "convert", f32_(&[64, 512]), &[p]) } else { p };
        let down = reduce_into(&mut body, input);
        let body_id = body.finish(down);
        let up_body = if fused_upcast {
            None
        } else {
            let mut c = b.computation("fused_convert");
            let p = c.param("param_0", 0, bf16(&[64, 512]));
            let up = c.op("convert.up", "convert", f32_(&[64, 512]), &[p]);
            Some(c.finish(up))
        };
        let mut main = b.computation("main");
        let mut x = main.param("x", 0, bf16(&[64, 512]));
        if let Some(up_body) = up_body {
            x = main.op("convert_fusion", "fusion", f32_(&[64, 512]), &[x]);
            main.edit(x, |i| {
                i.fusion_kind = "kLoop".into();
                i.called_computation_ids = vec![up_body];
            });
        }
        let f = main.op("reduce_fusion", "fusion", bf16(&[64]), &[x]);
        main.edit(f, |i| {
            i.fusion_kind = "kInput".into();
            i.called_computation_ids = vec![body_id];
        });
        main.finish(f);
        Module::from_proto(b.finish("main"), 0).unwrap()
    }

    #[test]
    fn an_upcast_fused_into_its_reduce_is_not_waste() {
        let (wide, found) = chains(&layer_norm_mean(true));
        assert_eq!((wide, found.len()), (1, 0), "{found:?}");
        let (wide, found) = chains(&layer_norm_mean(false));
        assert_eq!((wide, found.len()), (1, 1), "{found:?}");
    }

    #[test]
    fn finds_the_f32_mean_and_sum_of_squares_of_the_bf16_network() {
        let findings = run_on("unnecessary_convert_reduce", &testdata("real/convert_reduce"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: 13 f32 reduces, 11 with a bf16->f32 producer and an f32->bf16 consumer
        // (the last layer's sum of squares and the final loss sum stay f32).
        assert!(f.what.starts_with("11 of 13 f32 reduce(s) take a bf16 input upcast to f32"), "{}", f.what);
        let all: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        assert!(
            all.contains("reduce_sum.21 in ynn_fusion.17: reduce f32[16,64,256]{2,1,0} -> f32[16,64]{1,0}"),
            "{all}"
        );
        assert!(all.contains("in wrapped_convert, downcast convert.501 in multiply_convert_fusion.5"), "{all}");
        assert!(all.contains("jit(eval_step)/reduce_sum at "), "{all}");
        assert!(!all.contains("in ynn_fusion.1:") && !all.contains("in ynn_fusion:"), "{all}");
        assert!(f.impact.ms_per_step > 0.0 && f.impact.pct_of_step < 50.0, "{:?}", f.impact);
    }

    #[test]
    fn f32_programs_have_no_convert_reduce_chain() {
        // fused_upcast_clean: a bf16 transformer whose layer norms upcast inside their reduce
        // fusions (accumulating in f32, as recommended).
        for dir in [
            "corpus/clean",
            "corpus/data_formatting_baseline",
            "real/remat",
            "real/padding_waste",
            "real/fused_upcast_clean",
        ] {
            let findings = run_on("unnecessary_convert_reduce", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }
}
