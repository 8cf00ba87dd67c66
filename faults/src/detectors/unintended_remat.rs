//! `unintended_remat`: the backward pass recomputes forward work (JAX `jax.checkpoint` /
//! `remat` policies, or XLA's own rematerialization pass) although nothing shows that memory
//! required it.

use xlens_hlo::{CompId, ComputationKind, InstrId, Module, Opcode};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct UnintendedRemat;

const META: DetectorMeta = DetectorMeta {
    id: "unintended_remat",
    title: "The backward pass recomputes the forward",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Rematerialized (recomputed) instructions in the main program: instructions whose JAX name scope \
                  contains `rematted_computation` (the forward of a `jax.checkpoint`/`remat` region replayed inside \
                  the backward, e.g. `transpose(jvp(...))/checkpoint/rematted_computation/dot_general`) or whose \
                  name carries XLA's `.remat` suffix (its rematerialization pass), when their FLOPs are a sizeable \
                  share of the step.",
        why: "Recomputation trades FLOPs for memory: a checkpointed layer runs its forward twice, about a third more \
              matmul work for a fully rematerialized model (8·P·T instead of 6·P·T FLOPs per step). That is the \
              right trade only when activations would not fit; a policy that saves nothing \
              (`checkpoint_policies.nothing_saveable`) on a model with plenty of memory headroom just makes every \
              step slower.",
        evidence: "Recomputed FLOPs and their share of the program's FLOPs (XLA cost model, loop bodies once); the \
                   number of recomputed instructions and matmuls; matmuls in the forward and the backward (name \
                   scopes with and without `transpose(`); the measured time of the recomputed work per step (op \
                   self time × the recomputed share of each op's FLOPs); step FLOPs against the 6·P·T estimate \
                   (P: elements of floating-point parameters that the step updates, i.e. that have an output of \
                   the same type and dimensions; T: elements of the largest integer entry parameter of rank ≥ 2, \
                   the token ids [batch, sequence]; not computed without such an input); the memory peak (and \
                   capacity when known); the largest recomputed instructions with their JAX source lines.",
        thresholds: "Reported when recomputed FLOPs are at least `unintended_remat.min_recomputed_flops_fraction` \
                     (default 0.05) of the program's FLOPs. Severity P1; P0 when the recomputed work takes at least \
                     20 % of the step, P2 under 2 %, and P2 as well when the device capacity is known and the memory \
                     peak is at least `unintended_remat.needed_peak_fraction` (default 0.8) of it (the \
                     recomputation is then probably needed).",
        fix: "Save more in the forward: use a checkpoint policy that keeps the expensive results (the matmul \
              outputs, or offload them to host memory) instead of saving nothing, checkpoint only every k-th layer, \
              or drop checkpointing where activations fit. For XLA's own `.remat` clones, lower the memory pressure \
              (smaller per-device batch, sharding, donation) so the pass has no reason to recompute.",
        fix_lines: FixLines {
            jax: "`jax.checkpoint_policies.dots_with_no_batch_dims_saveable`, `save_only_these_names` with \
                  `checkpoint_name`, or `offload_dot_with_no_batch_dims` instead of `nothing_saveable`; drop \
                  `jax.checkpoint` where activations fit.",
            tensorflow: "apply `tf.recompute_grad` to fewer blocks (every k-th layer), or drop it where activations \
                         fit.",
            pytorch_xla: "apply `torch_xla.utils.checkpoint.checkpoint` to fewer layers (every k-th), or drop it \
                          where activations fit.",
        },
    },
};

/// True for an instruction that recomputes forward work: `.remat` in the name (XLA's pass) or
/// `rematted_computation` in the JAX name scope (`jax.checkpoint`).
fn is_recompute(module: &Module, id: InstrId) -> bool {
    module.instruction(id).is_remat()
}

/// Computations whose instructions execute one by one (not fusion bodies or reducers).
fn executes(kind: ComputationKind) -> bool {
    matches!(
        kind,
        ComputationKind::Entry
            | ComputationKind::WhileBody
            | ComputationKind::WhileCondition
            | ComputationKind::Branch
            | ComputationKind::Call
            | ComputationKind::Async
    )
}

/// Opcodes whose cost is their callees' cost (counted through the callees' own instructions).
fn is_container(op: Opcode) -> bool {
    matches!(op, Opcode::While | Opcode::Call | Opcode::Conditional | Opcode::AsyncStart | Opcode::AsyncDone)
}

/// Recomputed FLOPs inside a fusion body (nested fusions included), bounded in depth.
fn recomputed_in(module: &Module, comp: CompId, depth: u32) -> u64 {
    if depth > 16 {
        return 0;
    }
    let mut total = 0u64;
    for &id in module.computation(comp).instructions() {
        let instr = module.instruction(id);
        if is_recompute(module, id) {
            total = total.saturating_add(module.cost(id).flops);
        } else if instr.opcode() == Opcode::Fusion
            && let Some(body) = module.fused_computation(id)
        {
            total = total.saturating_add(recomputed_in(module, body.id(), depth + 1));
        }
    }
    total
}

/// Recomputed FLOPs of one executing instruction.
fn recomputed_flops(module: &Module, id: InstrId) -> u64 {
    let instr = module.instruction(id);
    if is_container(instr.opcode()) {
        return 0;
    }
    if is_recompute(module, id) {
        return module.cost(id).flops;
    }
    match module.fused_computation(id) {
        Some(body) => recomputed_in(module, body.id(), 0),
        None => 0,
    }
}

/// Matmul counts over the whole module (fusion bodies included).
#[derive(Debug, Default, PartialEq)]
struct DotCounts {
    total: usize,
    backward: usize,
    recomputed: usize,
}

fn dot_counts(module: &Module) -> DotCounts {
    let mut c = DotCounts::default();
    for instr in module.instructions().iter().filter(|i| matches!(i.opcode(), Opcode::Dot | Opcode::Convolution)) {
        if module.computation(instr.computation()).kind() == ComputationKind::Unreachable {
            continue;
        }
        c.total += 1;
        if instr.op_name().contains("transpose(") {
            c.backward += 1;
        }
        if instr.is_remat() {
            c.recomputed += 1;
        }
    }
    c
}

/// `(P, T)` for the 6·P·T estimate: elements of updated floating-point parameters, and elements of
/// the largest integer parameter of rank ≥ 2 (token ids).
fn params_and_tokens(module: &Module) -> Option<(u64, u64)> {
    let params = module.entry_parameters();
    let root = module.instruction(module.entry().root()?);
    let outputs: Vec<&xlens_hlo::Shape> = root.shape().leaves();
    let mut used = vec![false; outputs.len()];
    let mut p = 0u64;
    for param in &params {
        let s = param.shape();
        if !s.is_array() || !s.element_type().is_float() {
            continue;
        }
        if let Some(k) = (0..outputs.len())
            .find(|&k| !used[k] && outputs[k].element_type() == s.element_type() && outputs[k].dims() == s.dims())
        {
            used[k] = true;
            p = p.saturating_add(s.element_count());
        }
    }
    let t = params
        .iter()
        .map(|i| i.shape())
        .filter(|s| s.is_array() && s.rank() >= 2 && !s.element_type().is_float() && s.element_type().bit_width() > 1)
        .map(|s| s.element_count())
        .max()?;
    (p > 0 && t > 0).then_some((p, t))
}

impl Detector for UnintendedRemat {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host)? else { return Ok(()) };
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score, config));
        Ok(())
    }
}

/// What the main program shows: its recomputed FLOPs, per instruction and in total.
struct Measured<'a> {
    module: &'a Module,
    /// Recomputed FLOPs per executing instruction.
    per_instr: Vec<(InstrId, u64)>,
    recomputed_instructions: usize,
    recomputed: u64,
    program_flops: u64,
}

/// Counts the main program's recomputed FLOPs; `None` when it recomputes nothing.
fn measure(host: &HostProfile) -> Result<Option<Measured<'_>>, Skip> {
    let module = host.main_module().ok_or_else(|| Skip::because("the profile carries no HLO module"))?;
    // Recomputed FLOPs per executing instruction.
    let mut per_instr: Vec<(InstrId, u64)> = Vec::new();
    let mut recomputed_instructions = 0usize;
    for comp in module.computations().iter().filter(|c| executes(c.kind())) {
        for &id in comp.instructions() {
            let f = recomputed_flops(module, id);
            if is_recompute(module, id) && !is_container(module.instruction(id).opcode()) {
                recomputed_instructions += 1;
            }
            if f > 0 {
                per_instr.push((id, f));
            }
        }
    }
    let recomputed: u64 = per_instr.iter().fold(0u64, |a, (_, f)| a.saturating_add(*f));
    let program_flops = module.entry_cost().flops;
    if recomputed == 0 || program_flops == 0 {
        return Ok(None);
    }
    Ok(Some(Measured { module, per_instr, recomputed_instructions, recomputed, program_flops }))
}

/// The recomputed share of the FLOPs and what the recomputed work takes per step.
struct Score {
    fraction: f64,
    ms_per_step: f64,
    impact: Impact,
}

/// Decides whether the recomputed share reaches the threshold, and then prices it.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let fraction = m.recomputed as f64 / m.program_flops as f64;
    if fraction < config.thresholds.unintended_remat.min_recomputed_flops_fraction {
        return None;
    }
    let ms_per_step = recomputed_time(host, m.module);
    let impact = Impact::of(ms_per_step, host.step_ms());
    Some(Score { fraction, ms_per_step, impact })
}

/// Measured time of the recomputed work per step: each op's self time × its recomputed FLOP share.
fn recomputed_time(host: &HostProfile, module: &Module) -> f64 {
    let mut ms_per_step = 0.0;
    if let (Ok(profile), Ok(steps), Some(pid)) = (host.op_profile(), host.steps(), module.program_id()) {
        let cores = f64::from(profile.cores.max(1));
        let n_steps = steps.steps.len().max(1) as f64;
        let mut ms = 0.0;
        for op in profile.ops.iter().filter(|o| o.program_id == pid) {
            let Some(instr) = module.instruction_by_name(&op.name) else { continue };
            let total = module.cost(instr.id()).flops;
            let share = match recomputed_flops(module, instr.id()) {
                0 if is_recompute(module, instr.id()) && total == 0 => 1.0,
                0 => 0.0,
                r => r as f64 / total.max(r) as f64,
            };
            ms += share * op.self_time.as_ms_f64();
        }
        ms_per_step = ms / cores / n_steps;
    }
    ms_per_step
}

/// The evidence: the FLOPs recomputed, the matmuls, the time, and the 6·P·T estimate.
fn evidence_of(m: &Measured<'_>, s: &Score, dots: &DotCounts, tb: TimeBase) -> Vec<Evidence> {
    let (module, recomputed, program_flops, recomputed_instructions) =
        (m.module, m.recomputed, m.program_flops, m.recomputed_instructions);
    let (fraction, ms_per_step) = (s.fraction, s.ms_per_step);
    let mut evidence = vec![
        Evidence::metric("recomputed_flops", "recomputed FLOPs", recomputed as f64, "FLOPs"),
        Evidence::metric("program_flops", "program FLOPs", program_flops as f64, "FLOPs"),
        Evidence::metric("recomputed_flops_share", "recomputed share of the program's FLOPs", 100.0 * fraction, "%"),
        Evidence::metric("recomputed_instructions", "recomputed instructions", recomputed_instructions as f64, "count"),
        Evidence::metric("matmuls", "matmuls", dots.total as f64, "count"),
        Evidence::metric("forward_matmuls", "matmuls in the forward", (dots.total - dots.backward) as f64, "count"),
        Evidence::metric("backward_matmuls", "matmuls in the backward", dots.backward as f64, "count"),
        Evidence::metric("recomputed_matmuls", "recomputed matmuls", dots.recomputed as f64, "count"),
    ];
    if ms_per_step > 0.0 {
        evidence.push(Evidence::metric(
            "recomputed_time",
            format!("time of the recomputed work {}", tb.per()),
            ms_per_step,
            "ms",
        ));
    }
    if let Some((p, tokens)) = params_and_tokens(module) {
        let estimate = 6.0 * p as f64 * tokens as f64;
        evidence.extend([
            Evidence::metric("parameters", "parameters P (updated floating-point entry parameters)", p as f64, "count"),
            Evidence::metric("tokens", "tokens T (largest integer entry parameter)", tokens as f64, "count"),
            Evidence::metric("flops_over_6pt", "program FLOPs / 6·P·T", program_flops as f64 / estimate, "ratio"),
        ]);
    }
    evidence
}

/// The static memory peak against the device's memory, and a note when it is high enough that
/// the recomputation may be needed.
fn memory_evidence(host: &HostProfile, module: &Module, config: &ScanConfig) -> (Vec<Evidence>, Option<String>) {
    let t = &config.thresholds.unintended_remat;
    let mut evidence = Vec::new();
    let mut memory_note = None;
    if let Ok(Some(m)) = module.hbm_memory_stats() {
        evidence.push(Evidence::metric("memory_peak", "static memory peak", m.peak_bytes() as f64, "bytes"));
        if let Some(cap) = host.chip().and_then(|c| c.hbm_capacity()).map(|b| b.0).filter(|&c| c > 0) {
            let frac = m.peak_bytes() as f64 / cap as f64;
            evidence.push(Evidence::metric("memory_peak_share", "memory peak of capacity", 100.0 * frac, "%"));
            if frac >= t.needed_peak_fraction {
                memory_note = Some(format!(
                    " The memory peak is {:.0} % of the device memory, so the recomputation may be needed.",
                    100.0 * frac
                ));
            }
        }
    }
    (evidence, memory_note)
}

/// The finding: the recomputed share, its instructions and matmuls, its time, and the memory peak.
fn describe(
    detector: &UnintendedRemat,
    host: &HostProfile,
    m: &Measured<'_>,
    s: &Score,
    config: &ScanConfig,
) -> Finding {
    let (module, recomputed_instructions, fraction, ms_per_step) =
        (m.module, m.recomputed_instructions, s.fraction, s.ms_per_step);
    let dots = dot_counts(module);
    let tb = TimeBase::of(host);
    let mut evidence = evidence_of(m, s, &dots, tb);
    // Under 2 % of the step it is minor only when the recomputed work was timed.
    let timed = ms_per_step > 0.0;
    let mut severity = match Severity::from_impact(s.impact.pct_of_step, META.severity) {
        Severity::P2 if !timed => META.severity,
        severity => severity,
    };
    let (memory, memory_note) = memory_evidence(host, module, config);
    evidence.extend(memory);
    // A memory peak near the device's memory may need the recomputation: minor.
    if memory_note.is_some() {
        severity = Severity::P2;
    }
    let memory_note = memory_note.unwrap_or_default();
    let mut per_instr = m.per_instr.clone();
    per_instr.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    evidence.extend(per_instr.iter().take(4).map(|(id, _)| evidence::instruction(module, *id)));
    let what = format!(
        "{} recomputes {:.1} % of its FLOPs ({} instructions, {} of its {} matmuls) in the backward pass{}.{}",
        module.display_name(),
        100.0 * fraction,
        recomputed_instructions,
        dots.recomputed,
        dots.total,
        if ms_per_step > 0.0 { format!(", about {ms_per_step:.2} ms {}", tb.per()) } else { String::new() },
        memory_note
    );
    Finding::new(detector, severity, what, evidence, s.impact)
}

#[cfg(test)]
mod tests {
    use crate::finding::Evidence;
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_checkpointed_layers() {
        let findings = run_on("unintended_remat", &testdata("real/remat"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.contains("jit_train_step(18)"), "{}", f.what);
        // Ground truth: 65 dots vs 51 in the baseline, 14 of them recomputed (7 per layer).
        assert_eq!(metric(f, "matmuls"), 65.0);
        assert_eq!(metric(f, "recomputed matmuls"), 14.0);
        assert_eq!(metric(f, "matmuls in the forward"), 17.0);
        // cost_analysis: 846922752 FLOPs vs 701037056 in the baseline (+21 %).
        let flops = metric(f, "program FLOPs");
        assert!((flops - 846_922_752.0).abs() <= 16.0, "{flops}");
        let share = metric(f, "recomputed share of the program's FLOPs");
        assert!((12.0..=20.0).contains(&share), "{share}");
        // 6·P·T: the baseline's FLOPs are ~0.98 of it, the remat step's ~1.19.
        let ratio = metric(f, "program FLOPs / 6·P·T");
        assert!((1.1..1.3).contains(&ratio), "{ratio}");
        assert_eq!(metric(f, "tokens T (largest integer entry parameter)"), 256.0);
        assert!(f.impact.ms_per_step > 0.0 && f.impact.pct_of_step > 0.0, "{:?}", f.impact);
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Instruction { op_name, source: Some(src), .. }
                if op_name.contains("/checkpoint/rematted_computation/") && src.contains("models.py"))),
            "{f:#?}"
        );
    }

    #[test]
    fn programs_without_checkpoint_are_clean() {
        for dir in ["real/remat_baseline", "corpus/clean", "real/sharded_collectives", "real/donation_miss"] {
            assert!(run_on("unintended_remat", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
