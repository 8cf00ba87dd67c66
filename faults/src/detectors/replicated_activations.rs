//! `replicated_activations`: activations that a sharding spec replicates are all-gathered in
//! every layer, each a different one: the program computes them in full on every device.

use std::collections::{BTreeMap, BTreeSet};

use xlens_hlo::{Collective, InstrId, Module};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ReplicatedActivations;

const META: DetectorMeta = DetectorMeta {
    id: "replicated_activations",
    title: "Activations are replicated and all-gathered in every layer",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "All-gathers of activations in the step's programs: the gathered data, followed back through layout \
                  ops, copy-only fusions, all-gathers and async wrappers, was computed by a matrix multiply (a dot, \
                  a convolution, a fusion or library call holding one) rather than read from a parameter, and \
                  several different activations are gathered (one per layer, forward and backward); gathers written \
                  by hand inside `shard_map` are left out. That is what \
                  XLA's SPMD partitioner emits when an activation is constrained to be replicated \
                  (`with_sharding_constraint(h, P(None))`, `P()`) or a layer's output spec does not match the next \
                  layer's input: the constraint itself does not survive compilation, its all-gathers do.",
        why: "An activation gathered to every device is computed, stored and moved n times instead of once: each \
              layer waits for the gather, the per-device matmuls grow to the full activation (XLA slices the \
              result back with `dynamic-slice` by partition id), and the weights the replicated compute needs are \
              gathered too. A correctly sharded tensor-parallel layer gathers no activation at all.",
        evidence: "The number of all-gathers, of activation gathers and of distinct activations; per activation its \
                   producer, the gathers (shape, gathered dimension, replica groups) and the JAX name scope and \
                   source line; the activation gathers' time per step when the profile times them; the other \
                   all-gathers of the program (weights and inputs the replicated compute needs).",
        thresholds: "Reported when at least `replicated_activations.min_activations` (default 2) different \
                     activations are all-gathered in a step's program. Severity P1; P0 when the activation gathers \
                     take at least 20 % of the step, P2 under 2 %.",
        fix: "Keep activations sharded: constrain them to the sharding their consumer wants (for a Megatron MLP, the \
              hidden activation sharded over data and model, the layer output over data) instead of replicating \
              them, or drop the constraint and let the partitioner propagate the weights' sharding. Check the source \
              lines in the evidence; the compiled HLO shows where the gathers appear. If the gathers are deliberate \
              (sequence parallelism), overlap them with compute.",
        fix_lines: FixLines {
            jax: "`P('data', 'model')` on the hidden activation and `P('data', None)` on the layer output instead of \
                  `P(None)`/`P()` in `with_sharding_constraint`; `jax.debug.inspect_array_sharding` or \
                  `.lower(...).compile().as_text()` shows where the gathers appear.",
            tensorflow: "with DTensor, give the activations a sharded `Layout` (`dtensor.relayout`) rather than a \
                         replicated one.",
            pytorch_xla: "with SPMD, `xs.mark_sharding(hidden, mesh, ('data', 'model'))` on the hidden activation \
                          instead of a replicated spec.",
        },
    },
};

/// The activation an all-gather gathers, followed through earlier gathers (a two-stage gather
/// of one tensor is one activation); `None` for parameters, constants and other data no matmul
/// computed.
fn gathered_activation(module: &Module, gather: InstrId) -> Option<InstrId> {
    let mut source = module.value_source(*module.instruction(gather).operands().first()?);
    for _ in 0..8 {
        let instr = module.instruction(source);
        if !evidence::is_all_gather(instr.opcode()) {
            break;
        }
        source = module.value_source(*instr.operands().first()?);
    }
    module.computed_by_matmul(source).then_some(source)
}

/// True for a collective the program's author wrote (its name scope is inside `shard_map` or
/// `pmap`/`xmap`), not one the SPMD partitioner inserted.
fn written_by_user(op_name: &str) -> bool {
    op_name.split('/').any(|part| matches!(part, "shard_map" | "pmap" | "xmap") || part.starts_with("shard_map("))
}

/// The activation gathers of one module: activation → its gathers, in program order.
fn activation_gathers(module: &Module, gathers: &[&Collective]) -> BTreeMap<InstrId, Vec<InstrId>> {
    let mut out: BTreeMap<InstrId, Vec<InstrId>> = BTreeMap::new();
    for c in gathers {
        // A gather the user wrote (`lax.all_gather` inside `shard_map`) is deliberate.
        if written_by_user(module.instruction(c.instruction).op_name()) {
            continue;
        }
        if let Some(activation) = gathered_activation(module, c.instruction) {
            out.entry(activation).or_default().push(c.instruction);
        }
    }
    out
}

impl Detector for ReplicatedActivations {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let modules = evidence::step_modules(host);
        if modules.is_empty() {
            return Err(Skip::because("no HLO module could be decoded"));
        }
        for module in modules {
            let measured = measure(module);
            let Some(score) = score(host, &measured, config) else { continue };
            out.push(describe(self, &measured, &score, TimeBase::of(host)));
        }
        Ok(())
    }
}

/// What one module shows: its reachable all-gathers and the activations among what they gather.
struct Measured<'a> {
    module: &'a Module,
    /// The all-gathers outside unreachable computations.
    gathers: Vec<&'a Collective>,
    /// Activation → its gathers, in program order.
    activations: BTreeMap<InstrId, Vec<InstrId>>,
    /// The gathers of activations.
    of_activations: BTreeSet<InstrId>,
}

/// Finds a module's all-gathers and the activations they gather.
fn measure(module: &Module) -> Measured<'_> {
    let gathers = evidence::reachable_all_gathers(module);
    let activations = activation_gathers(module, &gathers);
    let of_activations: BTreeSet<InstrId> = activations.values().flatten().copied().collect();
    Measured { module, gathers, activations, of_activations }
}

/// The activation gathers' time per step and the finding's severity.
struct Score {
    /// Whether the profile times the module's ops.
    timed: bool,
    ms_per_step: f64,
    impact: Impact,
    severity: Severity,
}

/// Decides whether enough activations are gathered and prices their gathers; `None` when too few.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.replicated_activations;
    if m.activations.len() < t.min_activations.max(1) {
        return None;
    }
    let module = m.module;
    let times = evidence::op_times(host, module);
    let time = |id: InstrId| {
        times
            .as_ref()
            .and_then(|t| t.get(module.instruction(evidence::timed_instruction(module, id)).name()))
            .map_or(0.0, |o| o.ms)
    };
    let ms_per_step: f64 = m.of_activations.iter().map(|&g| time(g)).sum();
    let impact = Impact::of(ms_per_step, host.step_ms().filter(|_| times.is_some()));
    // `from_impact` with two exceptions: untimed gathers are P2 (their cost is unknown), and timed
    // gathers that take no time keep the usual severity.
    let severity = if times.is_none() {
        Severity::P2
    } else if ms_per_step > 0.0 {
        Severity::from_impact(impact.pct_of_step, META.severity)
    } else {
        META.severity
    };
    Some(Score { timed: times.is_some(), ms_per_step, impact, severity })
}

/// One note per activation (at most 12, in program order of their first gather) and the
/// instructions of the first one's gathers.
fn activation_evidence(m: &Measured<'_>) -> Vec<Evidence> {
    let module = m.module;
    let mut evidence = Vec::new();
    // In program order of their first gather.
    let mut listed: Vec<(&InstrId, &Vec<InstrId>)> = m.activations.iter().collect();
    listed.sort_by_key(|(_, g)| g.first().copied());
    for &(&activation, gathers) in listed.iter().take(12) {
        let src = module.instruction(activation);
        let parts: Vec<String> = gathers
            .iter()
            .map(|&g| {
                let c = module.collectives().iter().find(|c| c.instruction == g);
                format!(
                    "{} -> {} (dimension {:?}, groups {})",
                    module.instruction(g).name(),
                    module.instruction(g).shape(),
                    module.instruction(g).dimensions(),
                    c.map_or_else(String::new, Collective::groups_text)
                )
            })
            .collect();
        let scope = module.instruction(gathers[0]).op_name();
        evidence.push(Evidence::note(format!(
            "activation {} {} ({}) gathered by {}{}",
            src.name(),
            src.shape(),
            if src.op_name().is_empty() { src.opcode_name() } else { src.op_name() },
            parts.join(", then "),
            if scope.is_empty() { String::new() } else { format!(" in {scope}") }
        )));
    }
    if let Some((_, gathers)) = listed.first() {
        evidence.extend(gathers.iter().map(|&g| evidence::instruction(module, g)));
    }
    evidence
}

/// The evidence: the gather counts, bytes and time, the activations, and the other all-gathers.
fn evidence_of(m: &Measured<'_>, s: &Score, tb: TimeBase) -> Vec<Evidence> {
    let (module, of_activations) = (m.module, &m.of_activations);
    let bytes: u64 =
        of_activations.iter().fold(0u64, |a, &g| a.saturating_add(module.instruction(g).shape().byte_size()));
    let mut evidence = vec![
        Evidence::metric("all_gathers", "all-gathers in the program", m.gathers.len() as f64, "count"),
        Evidence::metric("activation_all_gathers", "all-gathers of activations", of_activations.len() as f64, "count"),
        Evidence::metric("gathered_activations", "distinct activations gathered", m.activations.len() as f64, "count"),
        Evidence::metric(
            "activation_gather_bytes",
            format!("bytes the activation gathers produce {}", tb.per()),
            bytes as f64,
            "bytes",
        ),
    ];
    if s.timed {
        evidence.push(Evidence::metric(
            "activation_gather_time",
            format!("time of the activation gathers {}", tb.per()),
            s.ms_per_step,
            "ms",
        ));
    }
    evidence.extend(activation_evidence(m));
    let others: Vec<&str> = m
        .gathers
        .iter()
        .filter(|c| !of_activations.contains(&c.instruction))
        .map(|c| module.instruction(c.instruction).name())
        .collect();
    if !others.is_empty() {
        evidence.push(Evidence::note(format!(
            "the program's other all-gathers (of parameters: weights and inputs): {}",
            others.join(", ")
        )));
    }
    evidence
}

/// The finding for one module: how many activations are gathered, and the evidence.
fn describe(detector: &ReplicatedActivations, m: &Measured<'_>, s: &Score, tb: TimeBase) -> Finding {
    let module = m.module;
    let ms_per_step = s.ms_per_step;
    let what = format!(
        "{} all-gathers {} different activations ({} of its {} all-gathers){}: activations a sharding spec \
         replicates, computed and gathered on every device, layer after layer.",
        module.display_name(),
        m.activations.len(),
        m.of_activations.len(),
        m.gathers.len(),
        if ms_per_step > 0.0 { format!(", {ms_per_step:.3} ms {}", tb.per()) } else { String::new() }
    );
    Finding::new(detector, s.severity, what, evidence_of(m, s, tb), s.impact).with_variant(&module.display_name())
}

#[cfg(test)]
mod tests {
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_activations_a_replicated_spec_gathers() {
        let findings = run_on("replicated_activations", &testdata("real/replicated_activations"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let text = text.join("\n");
        // Ground truth: 12 all-gathers; the forward gathers of the residual adds (layers 1 and 2)
        // and the two-stage backward gathers of each layer's dh are activations; the gathers of
        // the input x and of the three W1 shards are of parameters.
        assert!(text.contains("all-gathers in the program: 12 count"), "{text}");
        assert!(text.contains("all-gathers of activations: 8 count"), "{text}");
        assert!(text.contains("distinct activations gathered: 5 count"), "{text}");
        assert!(text.contains("activation wrapped_add "), "{text}");
        assert!(
            text.contains(
                "all-gather.6 -> f32[16,512]{0,1} (dimension [1], groups {{0,1},{2,3},{4,5},{6,7}}), then all-gather.7"
            ),
            "{text}"
        );
        assert!(
            text.contains("other all-gathers (of parameters: weights and inputs): all-gather, all-gather.1"),
            "{text}"
        );
    }

    #[test]
    fn sharded_activations_and_gathered_weights_are_clean() {
        for dir in [
            "real/replicated_activations_baseline",
            "real/sharded_collectives",
            "real/sharded_donation",
            "corpus/sharded_collectives_baseline",
            "corpus/clean",
        ] {
            assert!(run_on("replicated_activations", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
