//! `donation_miss`: the training step returns updated parameters (an output of the same shape and
//! type that is computed from the parameter) without input/output aliasing, so the old and the
//! new copy of every such parameter are both alive at the step boundary.

use std::collections::{BTreeMap, BTreeSet};

use xlens_hlo::{InstrId, Instruction, MemoryStats, Module, Opcode, Shape};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, P2_IMPACT_PCT, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DonationMiss;

const META: DetectorMeta = DetectorMeta {
    id: "donation_miss",
    title: "Updated parameters are not donated",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Entry parameters of the main program (the training step: the program with the most op time) that \
                  the program updates (an output with the same element type and dimensions that is computed from \
                  the parameter) while no input/output alias (JAX `donate_argnums`) or buffer donor lets the output \
                  reuse the parameter's buffer.",
        why: "Without donation XLA must allocate a fresh buffer for every updated parameter (and optimizer state) \
              while the caller still holds the old one: two full copies of the state are alive at the step \
              boundary, which wastes device memory, lowers the largest batch or model that fits, and can turn a \
              run into an out-of-memory. The cost is memory, not step time, so the impact is reported as 0 ms and \
              the memory figures are in the evidence.",
        evidence: "The number and total bytes of updated, non-donated parameters; the program's argument, output and \
                   aliased bytes from its buffer assignment (argument + output - alias = bytes alive at the step \
                   boundary); the static memory peak; the largest such parameters as HLO instructions (their \
                   `op_name` is the pytree path, e.g. `params['layers'][0]['w1']`) and the instructions that \
                   compute their new values, with JAX source lines.",
        thresholds: "Parameters smaller than `donation_miss.min_param_bytes` (default 64 KiB) are ignored. Reported \
                     when the updated, non-donated parameters total at least `donation_miss.min_total_bytes` \
                     (default 512 KiB) and at least `donation_miss.min_fraction_of_arguments` (default 0.25) of \
                     the program's argument bytes. Severity P1; P0 when the device capacity is known and the \
                     program's memory peak is at least `donation_miss.p0_peak_fraction` (default 0.9) of it; P2 \
                     when the extra copies are under 2 % of the memory peak.",
        fix: "Let the step update its state in place: donate the input buffers the step overwrites (parameters, \
              optimizer state) so the compiler can alias each input with its output, and return the new state with \
              the same shapes, dtypes and shardings as the old one so every buffer can be reused. Do not use a \
              donated array after the call.",
        fix_lines: FixLines {
            jax: "`jax.jit(train_step, donate_argnums=(0,))` (or `donate_argnames`); JAX warns 'Some donated buffers \
                  were not usable' when it cannot alias a leaf.",
            tensorflow: "keep the state in `tf.Variable`s updated with `assign` or the optimizer's `apply_gradients` \
                         inside the compiled `tf.function(jit_compile=True)`, rather than passing tensors in and \
                         returning new ones: XLA then updates the variables in place.",
            pytorch_xla: "update the parameters in place (`optimizer.step()` on the module's own parameters, not new \
                          tensors each step), so PyTorch/XLA aliases them in the graph `xm.mark_step()` cuts \
                          (`XLA_ENABLE_PARAM_ALIASING`, on by default).",
        },
    },
};

/// One array leaf of an entry parameter or of the program's output.
#[derive(Clone, Debug)]
struct Leaf<'m> {
    /// Parameter number, or output tuple position.
    number: u64,
    /// Shape index inside the parameter or the output.
    index: Vec<i64>,
    shape: &'m Shape,
}

fn leaves_of<'m>(number: u64, shape: &'m Shape, prefix: &mut Vec<i64>, out: &mut Vec<Leaf<'m>>) {
    if shape.is_tuple() {
        for (i, s) in shape.tuple_shapes().iter().enumerate() {
            prefix.push(i as i64);
            leaves_of(number, s, prefix, out);
            prefix.pop();
        }
    } else if shape.is_array() {
        out.push(Leaf { number, index: prefix.clone(), shape });
    }
}

impl Leaf<'_> {
    /// The top-level position of an output leaf (its first shape index), as a parameter number.
    fn number_in_output(&self) -> u64 {
        self.index.first().map_or(self.number, |&i| i.max(0) as u64)
    }
}

/// For every instruction of the entry computation, which of a few tracked entry parameters it
/// depends on, as a bitset indexed by position in the tracked list.
struct Reach {
    words: usize,
    bits: Vec<Vec<u64>>,
}

impl Reach {
    /// Most parameters tracked (beyond this the dependency check is skipped).
    const MAX_TRACKED: usize = 4096;

    fn new(module: &Module, tracked: &[InstrId]) -> Option<Reach> {
        if tracked.is_empty() || tracked.len() > Self::MAX_TRACKED {
            return None;
        }
        let words = tracked.len().div_ceil(64);
        let mut bits = vec![Vec::new(); module.instructions().len()];
        for (k, p) in tracked.iter().enumerate() {
            let mut v = vec![0u64; words];
            v[k / 64] |= 1 << (k % 64);
            bits[p.index()] = v;
        }
        for &id in module.entry().topological_order() {
            let instr = module.instruction(id);
            if instr.opcode() == Opcode::Parameter {
                continue;
            }
            let mut v = vec![0u64; words];
            for op in instr.operands() {
                for (w, b) in v.iter_mut().zip(&bits[op.index()]) {
                    *w |= *b;
                }
            }
            bits[id.index()] = v;
        }
        Some(Reach { words, bits })
    }

    fn depends(&self, id: InstrId, pos: usize) -> bool {
        pos / 64 < self.words
            && self.bits.get(id.index()).and_then(|v| v.get(pos / 64)).is_some_and(|w| w & (1 << (pos % 64)) != 0)
    }
}

/// A parameter leaf that an output updates without aliasing.
#[derive(Debug)]
struct Missed {
    param: InstrId,
    /// The instruction producing the output (the root's operand, or the root).
    producer: InstrId,
    bytes: u64,
}

/// The element type and dimensions of an array: what must match for an output to update a
/// parameter in place.
fn array_key(shape: &Shape) -> (i32, Vec<i64>) {
    (shape.element_type().proto_value(), shape.dims().to_vec())
}

/// The entry computation's parameter leaves, its output leaves that no alias covers, and the
/// parameter leaves an output could update.
struct Leaves<'m> {
    /// Entry parameter instructions by parameter number.
    param_id: BTreeMap<u64, InstrId>,
    params: Vec<Leaf<'m>>,
    /// Output leaves that no input/output alias covers.
    free_outputs: Vec<Leaf<'m>>,
    /// Candidate parameter leaves (positions in `params`) by array key.
    candidates: BTreeMap<(i32, Vec<i64>), Vec<usize>>,
}

/// Splits the entry parameters and the root's output into leaves and finds the candidates.
fn leaves<'m>(module: &'m Module, root_instr: &'m Instruction, min_param_bytes: u64) -> Leaves<'m> {
    let params = module.entry_parameters();
    let param_id: BTreeMap<u64, InstrId> = params.iter().map(|p| (p.parameter_number().unwrap_or(0), p.id())).collect();
    let mut param_leaves = Vec::new();
    for p in &params {
        leaves_of(p.parameter_number().unwrap_or(0), p.shape(), &mut Vec::new(), &mut param_leaves);
    }
    let mut out_leaves = Vec::new();
    leaves_of(0, root_instr.shape(), &mut Vec::new(), &mut out_leaves);
    let aliases = module.input_output_aliases();
    let donors = module.buffer_donors();
    let donated: BTreeSet<(u64, &[i64])> = aliases
        .iter()
        .map(|a| (a.parameter, a.parameter_index.as_slice()))
        .chain(donors.iter().map(|d| (d.parameter, d.parameter_index.as_slice())))
        .collect();
    let aliased_outputs: BTreeSet<&[i64]> = aliases.iter().map(|a| a.output_index.as_slice()).collect();
    let free_outputs: Vec<Leaf<'m>> =
        out_leaves.into_iter().filter(|o| !aliased_outputs.contains(o.index.as_slice())).collect();
    let output_keys: BTreeSet<(i32, Vec<i64>)> = free_outputs.iter().map(|o| array_key(o.shape)).collect();
    // Candidate parameter leaves by array key: large enough, not donated, and some free output
    // has their type and dimensions.
    let mut candidates: BTreeMap<(i32, Vec<i64>), Vec<usize>> = BTreeMap::new();
    for (k, p) in param_leaves.iter().enumerate() {
        let key = array_key(p.shape);
        if p.shape.byte_size() >= min_param_bytes
            && !donated.contains(&(p.number, p.index.as_slice()))
            && output_keys.contains(&key)
        {
            candidates.entry(key).or_default().push(k);
        }
    }
    Leaves { param_id, params: param_leaves, free_outputs, candidates }
}

/// The dependency of the candidates' parameters, and each tracked parameter's position by
/// parameter number.
fn reach_of(module: &Module, l: &Leaves<'_>) -> (Option<Reach>, BTreeMap<u64, usize>) {
    // Track the dependency of the candidates' parameters only.
    let tracked: Vec<InstrId> = l
        .candidates
        .values()
        .flatten()
        .filter_map(|&k| l.param_id.get(&l.params[k].number).copied())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let reach = Reach::new(module, &tracked);
    let position: BTreeMap<u64, usize> = tracked
        .iter()
        .enumerate()
        .map(|(k, &id)| (module.instruction(id).parameter_number().unwrap_or(0), k))
        .collect();
    (reach, position)
}

/// The instruction that produces an output leaf: the root tuple's operand when the root is a
/// tuple, else the root itself.
fn producer_of(root: InstrId, root_instr: &Instruction, l: &Leaf<'_>) -> InstrId {
    if root_instr.opcode() == Opcode::Tuple
        && let Some(&first) = l.index.first()
        && let Some(&op) = usize::try_from(first).ok().and_then(|i| root_instr.operands().get(i))
    {
        return op;
    }
    root
}

/// The updated, non-donated parameter leaves of a module, largest first.
fn missed_donations(module: &Module, min_param_bytes: u64) -> Vec<Missed> {
    let Some(root) = module.entry().root() else { return Vec::new() };
    let root_instr = module.instruction(root);
    let l = leaves(module, root_instr, min_param_bytes);
    let (param_id, param_leaves) = (&l.param_id, &l.params);
    let (reach, position) = reach_of(module, &l);
    let mut taken = vec![false; param_leaves.len()];
    let mut missed = Vec::new();
    for out in &l.free_outputs {
        let Some(list) = l.candidates.get(&array_key(out.shape)) else { continue };
        let prod = producer_of(root, root_instr, out);
        // Several parameters often share a shape (wq, wk, wv, wo): prefer the one the producer
        // reads directly (`p - lr * g` fuses the parameter in), then the one at the same
        // position, then any the output depends on.
        let direct_operand = |number: u64| {
            param_id.get(&number).is_some_and(|&pid| pid == prod || module.instruction(prod).operands().contains(&pid))
        };
        let candidate = list
            .iter()
            .copied()
            .filter(|&k| {
                !taken[k]
                    && match (&reach, position.get(&param_leaves[k].number)) {
                        (Some(r), Some(&pos)) => r.depends(prod, pos),
                        _ => true,
                    }
            })
            .min_by_key(|&k| {
                let p = &param_leaves[k];
                (!direct_operand(p.number), p.number != out.number_in_output(), k)
            });
        if let Some(k) = candidate {
            taken[k] = true;
            let p = &param_leaves[k];
            missed.push(Missed {
                param: param_id.get(&p.number).copied().unwrap_or(prod),
                producer: prod,
                bytes: p.shape.byte_size(),
            });
        }
    }
    missed.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.param.cmp(&b.param)));
    missed
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

impl Detector for DonationMiss {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let module = host.main_module().ok_or_else(|| Skip::because("the profile carries no HLO module"))?;
        let measured = measure(module, config);
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// What the main module shows: its updated, non-donated parameters and its memory figures.
struct Measured<'a> {
    module: &'a Module,
    /// The updated, non-donated parameter leaves, largest first.
    missed: Vec<Missed>,
    /// Their total bytes.
    total: u64,
    memory: Option<MemoryStats>,
    /// `total` as a share of the program's argument bytes (0 to 1).
    fraction: f64,
}

/// Finds the missed donations and reads the module's buffer assignment.
fn measure<'a>(module: &'a Module, config: &ScanConfig) -> Measured<'a> {
    let t = &config.thresholds.donation_miss;
    let missed = missed_donations(module, t.min_param_bytes);
    let total: u64 = missed.iter().fold(0u64, |a, m| a.saturating_add(m.bytes));
    let memory = module.hbm_memory_stats().ok().flatten();
    let argument_bytes = match &memory {
        Some(m) if m.argument_bytes > 0 => m.argument_bytes,
        _ => module.entry_parameters().iter().fold(0u64, |a, p| a.saturating_add(p.shape().logical_bytes())),
    };
    let fraction = if argument_bytes > 0 { total as f64 / argument_bytes as f64 } else { 0.0 };
    Measured { module, missed, total, memory, fraction }
}

/// How urgent the finding is, and the memory peak as a share of the capacity when both are known.
struct Score {
    severity: Severity,
    /// Memory peak ÷ device capacity (0 to 1).
    peak_fraction: Option<f64>,
}

/// Decides whether the missed donations make a finding; `None` when they are too small.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.donation_miss;
    if m.missed.is_empty() || m.total < t.min_total_bytes || m.fraction < t.min_fraction_of_arguments {
        return None;
    }
    let mut severity = META.severity;
    let mut peak_fraction = None;
    if let Some(mem) = &m.memory {
        // The cost is memory, not step time, so `Severity::from_impact` does not apply: P0 when the
        // memory peak nears the device capacity, P2 when the extra copies are under
        // `P2_IMPACT_PCT` % of the memory peak (`P2_IMPACT_PCT / 100.0` is exactly 0.02).
        let capacity = host.chip().and_then(|c| c.hbm_capacity()).map(|b| b.0).filter(|&c| c > 0);
        if let Some(cap) = capacity {
            let fraction = mem.peak_bytes() as f64 / cap as f64;
            peak_fraction = Some(fraction);
            if fraction >= t.p0_peak_fraction {
                severity = Severity::P0;
            }
        }
        if severity != Severity::P0
            && mem.peak_bytes() > 0
            && (m.total as f64) < P2_IMPACT_PCT / 100.0 * mem.peak_bytes() as f64
        {
            severity = Severity::P2;
        }
    }
    Some(Score { severity, peak_fraction })
}

/// The evidence: the missed bytes, the buffer assignment, and the largest parameters with their
/// updates.
fn evidence_of(m: &Measured<'_>, s: &Score) -> Vec<Evidence> {
    let (module, missed) = (m.module, &m.missed);
    let mut evidence = vec![
        Evidence::metric("undonated_parameters", "updated parameters without donation", missed.len() as f64, "count"),
        Evidence::metric(
            "undonated_parameter_bytes",
            "bytes of updated parameters without donation",
            m.total as f64,
            "bytes",
        ),
        Evidence::metric("undonated_argument_share", "share of the argument bytes", 100.0 * m.fraction, "%"),
        Evidence::metric(
            "input_output_aliases",
            "input/output aliases in the program",
            module.input_output_aliases().len() as f64,
            "count",
        ),
    ];
    if let Some(mem) = &m.memory {
        let boundary = mem.argument_bytes.saturating_add(mem.output_bytes).saturating_sub(mem.alias_bytes);
        evidence.extend([
            Evidence::metric("argument_bytes", "argument bytes", mem.argument_bytes as f64, "bytes"),
            Evidence::metric("output_bytes", "output bytes", mem.output_bytes as f64, "bytes"),
            Evidence::metric("aliased_bytes", "aliased (donated) bytes", mem.alias_bytes as f64, "bytes"),
            Evidence::metric(
                "step_boundary_bytes",
                "bytes alive at the step boundary (arguments + outputs - aliased)",
                boundary as f64,
                "bytes",
            ),
            Evidence::metric("memory_peak", "static memory peak", mem.peak_bytes() as f64, "bytes"),
        ]);
        if let Some(peak_fraction) = s.peak_fraction {
            evidence.push(Evidence::metric("memory_peak_share", "memory peak of capacity", 100.0 * peak_fraction, "%"));
        }
    }
    let names: Vec<&str> = missed.iter().map(|m| module.instruction(m.param).name()).collect();
    evidence.push(Evidence::note(format!(
        "parameters updated without donation ({}): {}",
        names.len(),
        names.iter().take(24).copied().collect::<Vec<_>>().join(", ") + if names.len() > 24 { ", ..." } else { "" }
    )));
    for m in missed.iter().take(3) {
        evidence.push(evidence::instruction(module, m.param));
        if m.producer != m.param {
            evidence.push(evidence::instruction(module, m.producer));
        }
    }
    evidence
}

/// The finding: how many parameters miss donation, their bytes, and the evidence.
fn describe(detector: &DonationMiss, host: &HostProfile, m: &Measured<'_>, s: &Score) -> Finding {
    let module = m.module;
    let what = format!(
        "{} updates {} parameter(s) ({:.2} MiB, {:.0} % of its arguments) without donating them: {}, so the old \
         and the new copy are both alive at {} boundary.",
        module.display_name(),
        m.missed.len(),
        mib(m.total),
        100.0 * m.fraction,
        if module.input_output_aliases().is_empty() {
            "the program has no input/output alias at all".to_owned()
        } else {
            format!("only {} other output(s) alias a parameter", module.input_output_aliases().len())
        },
        TimeBase::of(host).every(),
    );
    Finding::new(detector, s.severity, what, evidence_of(m, s), Impact::of(0.0, host.step_ms()))
}

#[cfg(test)]
mod tests {
    use crate::finding::{Evidence, Severity};
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_undonated_train_state() {
        let findings = run_on("donation_miss", &testdata("real/donation_miss"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P1);
        assert!(f.what.contains("jit_train_step(18)") && f.what.contains("no input/output alias"), "{}", f.what);
        // Ground truth: alias_size_in_bytes 0, argument_size_in_bytes 1068032; the weights
        // (embed, w1, w2, wq/wk/wv/wo, out, ...) are ~1.07 MB of f32 re-output every step.
        assert_eq!(metric(f, "aliased (donated) bytes"), 0.0);
        assert_eq!(metric(f, "argument bytes"), 1_068_032.0);
        let total = metric(f, "bytes of updated parameters without donation");
        assert!((900_000.0..=1_068_032.0).contains(&total), "{total}");
        assert!(metric(f, "bytes alive at the step boundary (arguments + outputs - aliased)") > 2_000_000.0);
        assert_eq!(metric(f, "input/output aliases in the program"), 0.0);
        // The largest parameter is named by its pytree path.
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Instruction { opcode, op_name, .. }
                if opcode == "parameter" && op_name.starts_with("params"))),
            "{f:#?}"
        );
        assert_eq!(f.impact.ms_per_step, 0.0);
    }

    #[test]
    fn donated_programs_are_clean() {
        for dir in ["corpus/clean", "real/sharded_donation", "real/sharded_collectives", "real/remat"] {
            assert!(run_on("donation_miss", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    /// `(w - x, zeros)` from `(w, x)`: only `w` is updated; `x` is an input and the zeros depend on
    /// nothing. With `alias`, output 0 aliases parameter 0.
    fn update_module(alias: bool) -> xlens_hlo::Module {
        use xlens_hlo::raw::hlo_input_output_alias_proto::AliasEntryProto;
        use xlens_hlo::testing::{HloBuilder, shape, tuple_shape};
        use xlens_hlo::{PrimitiveType, raw};
        let f = || shape(PrimitiveType::F32, &[256, 256]);
        let mut b = HloBuilder::new("jit_step");
        let mut main = b.computation("main");
        let w = main.param("w", 0, f());
        let x = main.param("x", 1, f());
        let new_w = main.op("subtract.1", "subtract", f(), &[w, x]);
        let zero = main.op("constant.1", "constant", shape(PrimitiveType::F32, &[]), &[]);
        let zeros = main.op("broadcast.1", "broadcast", f(), &[zero]);
        let root = main.op("tuple.1", "tuple", tuple_shape(vec![f(), f()]), &[new_w, zeros]);
        main.finish(root);
        if alias {
            b.module_mut().input_output_alias = Some(raw::HloInputOutputAliasProto {
                entries: vec![AliasEntryProto {
                    output_shape_index: vec![0],
                    parameter_number: 0,
                    kind: 1,
                    ..Default::default()
                }],
            });
        }
        xlens_hlo::Module::from_proto(b.finish("main"), 0).unwrap()
    }

    #[test]
    fn matches_outputs_that_depend_on_the_parameter() {
        let m = update_module(false);
        let missed = super::missed_donations(&m, 1 << 16);
        assert_eq!(missed.len(), 1, "{missed:?}");
        assert_eq!(m.instruction(missed[0].param).name(), "w");
        assert_eq!(m.instruction(missed[0].producer).name(), "subtract.1");
        assert_eq!(missed[0].bytes, 256 * 256 * 4);
        // Donated: nothing left; below the size floor: ignored.
        assert!(super::missed_donations(&update_module(true), 1 << 16).is_empty());
        assert!(super::missed_donations(&m, 1 << 20).is_empty());
    }
}
