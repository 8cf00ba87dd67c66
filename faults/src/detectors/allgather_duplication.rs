//! `allgather_duplication`: the same data is all-gathered more than once per step, typically a
//! weight shard gathered in the forward and gathered again in the backward. (Activations
//! gathered in every layer, each a different one, are `replicated_activations`.)

use std::collections::BTreeMap;

use xlens_hlo::{Collective, InstrId, Module};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct AllgatherDuplication;

const META: DetectorMeta = DetectorMeta {
    id: "allgather_duplication",
    title: "The same data is all-gathered more than once per step",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "All-gathers of the main program that gather the same operand over the same replica groups more than \
                  once per step. Operands are followed back through `bitcast`, `copy`, `reshape` and `transpose` (and \
                  from an async computation's parameter to its caller's operand, and through fusions that only copy) \
                  to the instruction that produced the data, so a forward `all-gather(copy.K)` and a backward \
                  `all-gather(bitcast(copy.K))` of the same weight shard count as two gathers of `copy.K`'s source.",
        why: "Every all-gather moves (n-1)/n of its result over the interconnect and usually sits on the critical \
              path before the matmul that needs it. Gathering a weight again in the backward doubles the parameter \
              traffic of a step. Re-gathering is a deliberate memory trade in ZeRO-3/FSDP only when the gathered weights do not fit \
              between the forward and the backward.",
        evidence: "The number of all-gathers, of distinct gathered operands and of redundant gathers; the bytes the \
                   redundant gathers produce per step; their measured time per step when the profile times them \
                   (all occurrences minus the most expensive gather of each operand, per core and step); the \
                   gathered operand (for entry parameters the pytree path, e.g. `ps['layers'][0]['w1']`) and each of \
                   its gathers as HLO instructions with their name scopes (`jvp()` forward, `transpose(jvp())` \
                   backward) and JAX source lines.",
        thresholds: "An operand counts as duplicated when it is gathered at least \
                     `allgather_duplication.min_gathers_per_operand` times (default 2) per step. Severity P1; P0 when the \
                     redundant gathers take at least 20 % of the step, P2 under 2 %.",
        fix: "Gather once and reuse: keep the gathered weight for the backward pass instead of gathering it again \
              (save the all-gather result where the step rematerialises), or let the compiler see both uses of one \
              gather. Keep re-gathering only when memory forces it (ZeRO-3, FSDP), and then overlap it with compute.",
        fix_lines: FixLines {
            jax: "keep the gathered weight as a residual of the forward (in a `custom_vjp` return the gathered \
                  array, not the shard; with `jax.checkpoint` use a policy that saves the all-gather result, e.g. \
                  `save_only_these_names` with `checkpoint_name`), or write one `all_gather` feeding forward and \
                  backward.",
            tensorflow: "under `tf.distribute` (TPUStrategy, DTensor), keep the gathered weight outside a \
                         `tf.recompute_grad` block so the backward pass reuses it.",
            pytorch_xla: "with `XlaFullyShardedDataParallel`, set `reshard_after_forward=False` on the layers whose \
                          gathered weights fit, so the backward pass reuses them.",
        },
    },
};

/// A set of all-gathers that gather the same data.
#[derive(Debug)]
struct Duplicate {
    /// The gathered data (the operand's source).
    source: InstrId,
    gathers: Vec<InstrId>,
}

fn duplicates(module: &Module, collectives: &[&Collective], min_gathers: usize) -> Vec<Duplicate> {
    let min_gathers = min_gathers.max(2);
    // (source, groups) → gathers; a gather with several operands counts once per operand.
    let mut by_source: BTreeMap<(InstrId, String), Vec<InstrId>> = BTreeMap::new();
    for c in collectives {
        let instr = module.instruction(c.instruction);
        for &op in instr.operands() {
            let list = by_source.entry((module.value_source(op), c.groups_text())).or_default();
            if !list.contains(&c.instruction) {
                list.push(c.instruction);
            }
        }
    }
    by_source
        .into_iter()
        .filter(|(_, g)| g.len() >= min_gathers)
        .map(|((source, _), gathers)| Duplicate { source, gathers })
        .collect()
}

/// The gathers that only repeat a set's first gather, each counted once.
fn redundant_gathers(dups: &[Duplicate]) -> usize {
    let firsts: std::collections::BTreeSet<InstrId> = dups.iter().filter_map(|d| d.gathers.first().copied()).collect();
    dups.iter()
        .flat_map(|d| d.gathers.iter().skip(1).copied())
        .filter(|g| !firsts.contains(g))
        .collect::<std::collections::BTreeSet<InstrId>>()
        .len()
}

impl Detector for AllgatherDuplication {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host, config)? else { return Ok(()) };
        let score = score(host, &measured);
        out.push(describe(self, &measured, &score, TimeBase::of(host)));
        Ok(())
    }
}

/// What the main program shows: its all-gathers and the operands gathered more than once.
struct Measured<'a> {
    module: &'a Module,
    gathers: Vec<&'a Collective>,
    dups: Vec<Duplicate>,
    /// Distinct gathered operands.
    distinct: usize,
    /// Redundant gathers, and the bytes they produce.
    redundant: usize,
    redundant_bytes: u64,
}

/// Finds the operands the main program gathers more than once; `None` when there are none.
fn measure<'a>(host: &'a HostProfile, config: &ScanConfig) -> Result<Option<Measured<'a>>, Skip> {
    let t = &config.thresholds.allgather_duplication;
    let module = host.main_module().ok_or_else(|| Skip::because("the profile carries no HLO module"))?;
    let gathers = evidence::reachable_all_gathers(module);
    let dups = duplicates(module, &gathers, t.min_gathers_per_operand);
    if dups.is_empty() {
        return Ok(None);
    }
    let distinct: std::collections::BTreeSet<InstrId> = gathers
        .iter()
        .flat_map(|c| module.instruction(c.instruction).operands().iter().map(|&o| module.value_source(o)))
        .collect();
    // Redundant gathers: those that only repeat a set's first gather, each counted once (a
    // combined all-gather of several operands sits in several sets), so never more than the
    // program's all-gathers.
    let redundant = redundant_gathers(&dups);
    // Bytes the redundant gathers produce: all but the largest gather of each set.
    let bytes_of = |id: InstrId| module.instruction(id).shape().byte_size();
    let redundant_bytes: u64 = dups.iter().fold(0u64, |acc, d| {
        let all = d.gathers.iter().fold(0u64, |a, &g| a.saturating_add(bytes_of(g)));
        acc.saturating_add(all.saturating_sub(d.gathers.iter().map(|&g| bytes_of(g)).max().unwrap_or(0)))
    });
    Ok(Some(Measured { module, gathers, dups, distinct: distinct.len(), redundant, redundant_bytes }))
}

/// Measured time of the redundant gathers per step: per set, all gathers' self time minus the
/// most expensive one's.
fn redundant_time(host: &HostProfile, module: &Module, dups: &[Duplicate]) -> f64 {
    let mut ms_per_step = 0.0;
    if let (Ok(profile), Ok(steps), Some(pid)) = (host.op_profile(), host.steps(), module.program_id()) {
        let time_of: BTreeMap<&str, f64> = profile
            .ops
            .iter()
            .filter(|o| o.program_id == pid)
            .map(|o| (o.name.as_str(), o.self_time.as_ms_f64()))
            .collect();
        let cores = f64::from(profile.cores.max(1));
        let n_steps = steps.steps.len().max(1) as f64;
        let mut ms = 0.0;
        for d in dups {
            let times: Vec<f64> = d
                .gathers
                .iter()
                .map(|&g| {
                    time_of
                        .get(module.instruction(evidence::timed_instruction(module, g)).name())
                        .copied()
                        .unwrap_or(0.0)
                })
                .collect();
            ms += times.iter().sum::<f64>() - times.iter().copied().fold(0.0, f64::max);
        }
        ms_per_step = ms / cores / n_steps;
    }
    ms_per_step
}

/// The redundant gathers' time per step, what it costs and the severity.
struct Score {
    ms_per_step: f64,
    impact: Impact,
    severity: Severity,
}

/// Prices the redundant gathers; under 2 % of the step they are minor only when timed.
fn score(host: &HostProfile, m: &Measured<'_>) -> Score {
    let ms_per_step = redundant_time(host, m.module, &m.dups);
    let impact = Impact::of(ms_per_step, host.step_ms());
    let timed = ms_per_step > 0.0;
    let severity = match Severity::from_impact(impact.pct_of_step, META.severity) {
        Severity::P2 if !timed => META.severity,
        severity => severity,
    };
    Score { ms_per_step, impact, severity }
}

/// The evidence: the counts, bytes and time, each duplicated operand, the first set in full.
fn evidence_of(m: &Measured<'_>, ms_per_step: f64, tb: TimeBase) -> Vec<Evidence> {
    let (module, gathers, dups) = (m.module, &m.gathers, &m.dups);
    let (distinct, redundant, redundant_bytes) = (m.distinct, m.redundant, m.redundant_bytes);
    let mut evidence = vec![
        Evidence::metric("all_gathers", "all-gathers in the program", gathers.len() as f64, "count"),
        Evidence::metric("distinct_gathered_operands", "distinct gathered operands", distinct as f64, "count"),
        Evidence::metric("duplicated_operands", "operands gathered more than once", dups.len() as f64, "count"),
        Evidence::metric(
            "redundant_all_gathers",
            format!("redundant all-gathers {}", tb.per()),
            redundant as f64,
            "count",
        ),
        Evidence::metric(
            "redundant_all_gather_bytes",
            format!("bytes produced by redundant all-gathers {}", tb.per()),
            redundant_bytes as f64,
            "bytes",
        ),
    ];
    if ms_per_step > 0.0 {
        evidence.push(Evidence::metric(
            "redundant_all_gather_time",
            format!("time of redundant all-gathers {}", tb.per()),
            ms_per_step,
            "ms",
        ));
    }
    for d in dups {
        let names: Vec<&str> = d.gathers.iter().map(|&g| module.instruction(g).name()).collect();
        let src = module.instruction(d.source);
        let label = if src.op_name().is_empty() {
            format!("{} gathered {} times", src.name(), names.len())
        } else {
            format!("{} ({}) gathered {} times", src.name(), src.op_name(), names.len())
        };
        evidence.push(Evidence::note(format!("{label}: {}", names.join(", "))));
    }
    // The first set in full: its source and every gather.
    if let Some(d) = dups.first() {
        evidence.push(evidence::instruction(module, d.source));
        evidence.extend(d.gathers.iter().map(|&g| evidence::instruction(module, g)));
    }
    evidence
}

/// The finding: how many operands the program gathers more than once, and what it costs.
fn describe(detector: &AllgatherDuplication, m: &Measured<'_>, s: &Score, tb: TimeBase) -> Finding {
    let (module, gathers, dups, redundant, ms_per_step) = (m.module, &m.gathers, &m.dups, m.redundant, s.ms_per_step);
    let what = format!(
        "{} all-gathers {} operand(s) more than once {per} ({redundant} of its {} all-gathers repeat one{}).",
        module.display_name(),
        dups.len(),
        gathers.len(),
        if ms_per_step > 0.0 { format!(", about {ms_per_step:.2} ms {}", tb.per()) } else { String::new() },
        per = tb.per(),
    );
    Finding::new(detector, s.severity, what, evidence_of(m, ms_per_step, tb), s.impact)
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_hlo::testing::{HloBuilder, shape};
    use xlens_hlo::{Module, PrimitiveType, raw};

    use super::*;

    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_weights_gathered_again_in_the_backward() {
        let findings = run_on("allgather_duplication", &testdata("real/sharded_collectives"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: 12 all-gathers = forward all-gather(copy.K) + backward
        // all-gather(bitcast(copy.K)) of each of the 6 weight shards.
        assert_eq!(metric(f, "all-gathers in the program"), 12.0);
        assert_eq!(metric(f, "distinct gathered operands"), 6.0);
        assert_eq!(metric(f, "operands gathered more than once"), 6.0);
        assert_eq!(metric(f, "redundant all-gathers per step"), 6.0);
        // 3 × (f32[256,512] + f32[512,256]) = 3 MiB gathered twice.
        assert_eq!(metric(f, "bytes produced by redundant all-gathers per step"), 3.0 * 2.0 * 524_288.0);
        assert!(f.what.contains("jit_train_step(12)") && f.what.contains("6 operand(s)"), "{}", f.what);
        // The first weight: param.10 = ps['layers'][0]['w1'], gathered by all_gather.36 (forward)
        // and all_gather.47 (the backward runs the layers in reverse).
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains("param.10 (ps['layers'][0]['w1']) gathered 2 times: all_gather.36, all_gather.47")),
            "{text:#?}"
        );
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Instruction { op_name, source: Some(_), .. }
                if op_name.ends_with("transpose(jvp())/all_gather"))),
            "{f:#?}"
        );
        assert!(f.impact.ms_per_step > 0.0, "{:?}", f.impact);
    }

    #[test]
    fn single_gathers_are_clean() {
        for dir in ["corpus/sharded_collectives_baseline", "real/sharded_donation", "corpus/clean"] {
            assert!(run_on("allgather_duplication", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn combined_gathers_count_once() {
        // Three combined all-gathers of the same two weights: two gathered operands, each three
        // times, but only two redundant gathers of three in all.
        let mut b = HloBuilder::new("jit_step");
        let mut main = b.computation("main");
        let f = |d: &[i64]| shape(PrimitiveType::F32, d);
        let w1 = main.param("w1", 0, f(&[64, 256]));
        let w2 = main.param("w2", 1, f(&[64, 256]));
        let pair = xlens_hlo::testing::tuple_shape(vec![f(&[128, 256]), f(&[128, 256])]);
        let mut last = w1;
        for n in 0..3 {
            last = main.op(&format!("all-gather.{n}"), "all-gather", pair.clone(), &[w1, w2]);
            main.edit(last, |i| {
                i.replica_groups = vec![raw::ReplicaGroup { replica_ids: vec![0, 1] }];
                i.dimensions = vec![0];
            });
        }
        main.finish(last);
        let m = Module::from_proto(b.finish("main"), 0).unwrap();
        let gathers: Vec<&Collective> = m.collectives().iter().filter(|c| evidence::is_all_gather(c.opcode)).collect();
        let d = duplicates(&m, &gathers, 2);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(redundant_gathers(&d), 2);
    }
}
