//! `sparsecore_overflow`: the SparseCores (TPU embedding engines) are saturated, drop trace
//! events, or embedding lookups fall back to dense gathers on the TensorCore.

use std::collections::BTreeMap;

use xlens_roofline::{OpStats, Span};
use xlens_xplane::{Picos, PlaneKind, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::duration_text;
use crate::evidence::{self, DeviceOpLine, covered, union};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct SparsecoreOverflow;

const META: DetectorMeta = DetectorMeta {
    id: "sparsecore_overflow",
    title: "SparseCores are saturated or embedding lookups fall back to the TensorCore",
    severity: Severity::P1,
    needs: &[Need::DeviceTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "On TPUs with SparseCores: SparseCore planes (`/device:TPU:N SparseCore M`) whose `Sparse Core \
                  Ops` keep the SparseCore busy for nearly the whole TensorCore step (saturated), SparseCore planes \
                  that report dropped trace events (`dropped_traces`), and embedding lookups that run as dense \
                  gathers or scatters on the TensorCore (`gather`/`scatter` categories) instead of on the \
                  SparseCores; on such chips without any SparseCore plane, dense gathers alone. The TensorCore time \
                  spent idle while its SparseCores are busy is the wait they cause.",
        why: "SparseCores run embedding lookups and their gradient updates next to the TensorCore. When they \
              saturate, the TensorCore stalls at the start of every step waiting for the embeddings; lookups left to \
              the TensorCore (tables not placed on the SparseCores, dense `take`s) run as dense gathers that burn \
              TensorCore time and HBM bandwidth. A SparseCore trace that overflowed drops events and hides what \
              happened.",
        evidence: "Busy share of the step per SparseCore (the busiest, the mean), the largest SparseCore ops, the \
                   TensorCore idle time while its SparseCores were busy per step, the dense gather/scatter ops on \
                   the TensorCore with their time per step and JAX source line, dropped SparseCore trace events, \
                   and one saturated SparseCore step on the timeline.",
        thresholds: "Report when a SparseCore is busy at least `sparsecore_overflow.min_busy_pct` (default 90) % of \
                     the TensorCore step, when SparseCore planes report dropped events, or when dense gathers and \
                     scatters take at least `sparsecore_overflow.min_dense_gather_pct` (default 5) % of the step on \
                     a chip with SparseCores. The impact is the TensorCore's wait on its SparseCores plus the dense \
                     gather time. Skipped on chips without SparseCores. Severity P1, P0 from 20 % of the step, P2 \
                     under 2 % (dropped events alone are P2).",
        fix: "Give the SparseCores less to do per step or more room: shard and stack embedding tables so every \
              SparseCore gets an even share, deduplicate ids before the lookup, lower the lookups per example \
              (feature hashing, smaller multivalent features), and size the per-partition id limits of the embedding \
              configuration to the real id distribution; run large-table lookups through the SparseCore embedding \
              API rather than as dense gathers on the TensorCore. When the trace dropped events, profile fewer steps \
              or trace fewer SparseCores to see the whole timeline.",
        fix_lines: FixLines {
            jax: "the limits are `max_ids_per_partition` / `max_unique_ids_per_partition` of a jax-tpu-embedding \
                  `TableSpec`; avoid `jnp.take` on large tables.",
            tensorflow: "use TensorFlow's TPU embedding API (`tf.tpu.experimental.embedding.TPUEmbeddingV2` on \
                         SparseCore) with each `TableConfig` sized to the id distribution, rather than `tf.gather` \
                         on the TensorCore.",
            pytorch_xla: "",
        },
    },
};

/// Dense embedding-style ops on the TensorCore.
fn is_dense_gather(category: &str) -> bool {
    matches!(category, "gather" | "gather fusion" | "scatter" | "scatter fusion")
}

/// One SparseCore's figures.
#[derive(Debug, Default)]
struct Core {
    plane: String,
    ordinal: u32,
    /// Busy share of each TensorCore step.
    busy: Vec<f64>,
    dropped: u64,
    op_time: BTreeMap<String, Picos>,
    /// The busiest step's window, for the timeline evidence.
    busiest: Option<(Picos, Picos)>,
}

impl Detector for SparsecoreOverflow {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host)?;
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// What the profile shows: the SparseCores' busy shares, the TensorCore's wait on them and the dense
/// gathers on the TensorCore.
struct Measured<'a> {
    step_ms: f64,
    chip_has_sparse_cores: bool,
    /// TensorCores × steps.
    core_steps: f64,
    /// Dense gathers and scatters on the TensorCores, longest first.
    gathers: Vec<&'a OpStats>,
    gather_ms: f64,
    gather_pct: f64,
    cores: Vec<Core>,
    /// TensorCore idle while its SparseCores are busy, per step.
    wait_ms: f64,
}

/// Reads the SparseCore planes, the TensorCores' wait on them and the dense gathers.
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let step_ms = host.step_ms().ok_or_else(|| Skip::because("the profile has no step times"))?;
    let sc_planes: Vec<&xlens_xplane::Plane> =
        host.space().planes_where(|k| matches!(k, PlaneKind::TpuSparseCore { .. })).collect();
    let chip_has_sparse_cores = host.chip().and_then(|c| c.spec()).is_some_and(|s| s.sparse_cores > 0);
    if sc_planes.is_empty() && !chip_has_sparse_cores {
        return Err(Skip::because("the profile has no SparseCore planes and the chip has no SparseCores"));
    }
    let tc_count = host.space().tpu_tensor_cores().len().max(1);
    let core_steps = (tc_count * steps.steps.len().max(1)) as f64;

    // Dense gathers and scatters on the TensorCores.
    let mut gathers: Vec<&OpStats> = host
        .op_profile()
        .map(|p| p.ops.iter().filter(|o| is_dense_gather(&o.category) && o.self_time.0 > 0).collect())
        .unwrap_or_default();
    gathers.sort_by(|a, b| b.self_time.cmp(&a.self_time).then(a.name.cmp(&b.name)));
    let gather_ms = gathers.iter().map(|o| o.self_time.as_ms_f64()).sum::<f64>() / core_steps;
    let gather_pct = 100.0 * gather_ms / step_ms;
    let (cores, sc_busy_by_tc) = sparse_cores(&sc_planes, steps);
    let wait = tensor_core_wait(host, steps, sc_busy_by_tc);
    let wait_ms = wait.as_ms_f64() / core_steps;
    Ok(Measured { step_ms, chip_has_sparse_cores, core_steps, gathers, gather_ms, gather_pct, cores, wait_ms })
}

/// SparseCore busy time per TensorCore step, and each TensorCore's SparseCore busy intervals.
#[allow(clippy::type_complexity)]
fn sparse_cores(
    sc_planes: &[&xlens_xplane::Plane],
    steps: &xlens_roofline::Steps,
) -> (Vec<Core>, BTreeMap<u32, Vec<Span>>) {
    let mut cores: Vec<Core> = Vec::new();
    let mut sc_busy_by_tc: BTreeMap<u32, Vec<Span>> = BTreeMap::new();
    for plane in sc_planes {
        let ordinal = evidence::device_ordinal(plane);
        let dropped = plane.stat_by_name(names::stat::DROPPED_TRACES).and_then(|s| s.as_u64()).unwrap_or(0);
        let mut core = Core { plane: plane.name().to_owned(), ordinal, dropped, ..Core::default() };
        if let Some(timeline) = DeviceOpLine::read(plane, names::line::SPARSE_CORE_OPS) {
            let busy = union(timeline.ops.iter().map(|o| Span::new(o.start, o.end)).collect());
            let mut best = -1.0f64;
            for step in &steps.steps {
                let Some(tc) = step.cores.iter().find(|c| c.core == ordinal) else { continue };
                let (lo, hi) = (tc.marker_start, tc.marker_start + step.duration);
                let share = covered(&busy, lo, hi).0 as f64 / step.duration.0.max(1) as f64;
                core.busy.push(share);
                if share > best {
                    best = share;
                    core.busiest = Some((lo, hi));
                }
                for op in timeline.ops_starting_in(lo, hi) {
                    *core.op_time.entry(timeline.info(op).name.clone()).or_default() += op.duration();
                }
            }
            sc_busy_by_tc.entry(ordinal).or_default().extend(busy);
        }
        cores.push(core);
    }
    (cores, sc_busy_by_tc)
}

/// The time the TensorCores sit idle while their SparseCores are busy.
fn tensor_core_wait(
    host: &HostProfile,
    steps: &xlens_roofline::Steps,
    mut sc_busy_by_tc: BTreeMap<u32, Vec<Span>>,
) -> Picos {
    let mut wait = Picos::ZERO;
    for plane in host.space().tpu_tensor_cores() {
        let ordinal = evidence::device_ordinal(plane);
        let Some(sc) = sc_busy_by_tc.remove(&ordinal) else { continue };
        let sc = union(sc);
        if plane.line_by_name(names::line::XLA_OPS).is_none() {
            continue;
        }
        let tc = evidence::busy_union(plane, names::line::XLA_OPS);
        for step in &steps.steps {
            let Some(c) = step.cores.iter().find(|c| c.core == ordinal) else { continue };
            let (lo, hi) = (c.marker_start, c.marker_start + step.duration);
            let from = sc.partition_point(|s| s.end <= lo);
            for &Span { start: s, end: e } in sc[from..].iter().take_while(|s| s.start < hi) {
                let (s, e) = (s.max(lo), e.min(hi));
                wait += (e - s).saturating_sub(covered(&tc, s, e));
            }
        }
    }
    wait
}

/// A SparseCore's mean busy share of the step, in %.
fn mean_busy(c: &Core) -> f64 {
    if c.busy.is_empty() { 0.0 } else { 100.0 * c.busy.iter().sum::<f64>() / c.busy.len() as f64 }
}

/// What the figures amount to.
struct Score<'m> {
    /// The busiest SparseCore, if any.
    busiest: Option<&'m Core>,
    max_busy: f64,
    dropped: u64,
    saturated: bool,
    dense: bool,
    impact: Impact,
}

/// Decides whether the SparseCores overflow (saturated, dropping events, or bypassed by dense gathers).
fn score<'m>(m: &'m Measured<'_>, config: &ScanConfig) -> Option<Score<'m>> {
    let t = &config.thresholds.sparsecore_overflow;
    let cores = &m.cores;
    let busiest = cores.iter().max_by(|a, b| mean_busy(a).total_cmp(&mean_busy(b)).then(b.plane.cmp(&a.plane)));
    let max_busy = busiest.map_or(0.0, mean_busy);
    let dropped: u64 = cores.iter().fold(0u64, |a, c| a.saturating_add(c.dropped));
    let saturated = max_busy >= t.min_busy_pct;
    let dense = m.chip_has_sparse_cores && m.gather_pct >= t.min_dense_gather_pct;
    if !saturated && dropped == 0 && !dense {
        return None;
    }
    let impact = Impact::of(m.wait_ms + if dense || saturated { m.gather_ms } else { 0.0 }, Some(m.step_ms));
    Some(Score { busiest, max_busy, dropped, saturated, dense, impact })
}

/// The evidence: the busiest SparseCore (or the missing planes), the wait, the dense gathers.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, s: &Score<'_>) -> Vec<Evidence> {
    let tb = TimeBase::of(host);
    let mut evidence = Vec::new();
    if let Some(b) = s.busiest {
        busiest_evidence(host, &m.cores, b, s.max_busy, &mut evidence);
    } else {
        evidence.push(Evidence::note(format!(
            "the chip ({}) has SparseCores but the profile has no SparseCore plane: no lookup ran on them",
            host.chip().map_or("unknown", |c| c.name())
        )));
    }
    evidence.push(Evidence::metric(
        "sparsecore_wait_time",
        format!("TensorCore idle while its SparseCores are busy, {}", tb.per()),
        m.wait_ms,
        "ms",
    ));
    evidence.push(Evidence::metric(
        "dense_gather_scatter_time",
        format!("dense gathers and scatters on the TensorCore {}", tb.per()),
        m.gather_ms,
        "ms",
    ));
    let module = host.main_module();
    for op in m.gathers.iter().take(3) {
        let mut text = format!(
            "{} ({}) on the TensorCore: {} {}",
            op.name,
            op.category,
            duration_text(op.self_time.as_ms_f64() / m.core_steps),
            tb.per(),
        );
        if let Some(source) = &op.source {
            text.push_str(&format!(" at {source}"));
        }
        evidence.push(Evidence::note(text));
        if let Some(m) = module
            && let Some(instr) = m.instruction_by_name(&op.name)
        {
            evidence.push(evidence::instruction(m, instr.id()));
        }
    }
    if s.dropped > 0 {
        evidence.push(Evidence::metric(
            "dropped_sparsecore_events",
            "dropped SparseCore trace events",
            s.dropped as f64,
            "count",
        ));
    }
    evidence
}

/// The busiest SparseCore's evidence: busy shares, its top ops, its busiest step on the timeline.
fn busiest_evidence(host: &HostProfile, cores: &[Core], b: &Core, max_busy: f64, evidence: &mut Vec<Evidence>) {
    let all_mean = cores.iter().map(mean_busy).sum::<f64>() / cores.len().max(1) as f64;
    let tb = TimeBase::of(host);
    evidence.push(Evidence::metric(
        "busiest_sparsecore_busy_share",
        format!("busiest SparseCore busy share {}", tb.of_the()),
        max_busy,
        "%",
    ));
    evidence.push(Evidence::metric(
        "mean_sparsecore_busy_share",
        format!("mean SparseCore busy share {}", tb.of_the()),
        all_mean,
        "%",
    ));
    evidence.push(Evidence::note(format!(
        "{} SparseCore plane(s); the busiest is {} at {max_busy:.1} % of every TensorCore {} step",
        cores.len(),
        b.plane,
        b.ordinal
    )));
    let mut ops: Vec<(&String, &Picos)> = b.op_time.iter().collect();
    ops.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
    for (name, time) in ops.iter().take(3) {
        evidence.push(Evidence::note(format!(
            "{name} on {}: {} {}",
            b.plane,
            duration_text(time.as_ms_f64() / b.busy.len().max(1) as f64),
            tb.per(),
        )));
    }
    if let Some((lo, hi)) = b.busiest {
        evidence.push(evidence::event_parts(
            host,
            &b.plane,
            names::line::SPARSE_CORE_OPS,
            "busiest SparseCore step",
            lo,
            hi - lo,
        ));
    }
}

/// The finding: what overflows, in a sentence, with its evidence.
fn describe(detector: &SparsecoreOverflow, host: &HostProfile, m: &Measured<'_>, s: &Score<'_>) -> Finding {
    let (saturated, dense, dropped, max_busy) = (s.saturated, s.dense, s.dropped, s.max_busy);
    let (wait_ms, gather_ms, gather_pct) = (m.wait_ms, m.gather_ms, m.gather_pct);
    // Only a lack of trace events (no saturation, no dense gathers) is minor whatever its impact.
    let severity =
        if !saturated && !dense { Severity::P2 } else { Severity::from_impact(s.impact.pct_of_step, META.severity) };
    let tb = TimeBase::of(host);
    let mut parts = Vec::new();
    if saturated {
        parts.push(format!(
            "a SparseCore is busy {max_busy:.0} % {} and the TensorCore waits {} {} for it",
            tb.of_the(),
            duration_text(wait_ms),
            tb.per(),
        ));
    }
    if dense || (saturated && gather_ms > 0.0) {
        parts.push(format!(
            "dense gathers on the TensorCore take {} {} ({gather_pct:.1} %)",
            duration_text(gather_ms),
            tb.per(),
        ));
    }
    if dropped > 0 {
        parts.push(format!("the SparseCore trace dropped {dropped} events"));
    }
    let mut what = parts.join("; ");
    if let Some(first) = what.get(..1) {
        what = format!("{}{}.", first.to_uppercase(), &what[1..]);
    }
    Finding::new(detector, severity, what, evidence_of(host, m, s), s.impact)
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_testkit::synth::{Item, OpSpec, Program, SynthSpec, tpu_profile};
    use xlens_xplane::Space;

    use crate::testing::{report_of, run_on, testdata};
    use crate::{Profile, ScanConfig, Severity, scan};

    #[test]
    fn finds_saturated_sparse_cores_dense_fallback_and_dropped_events() {
        let findings = run_on("sparsecore_overflow", &testdata("tpu/tpu_sparsecore"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // The SparseCore ops fill 97 % of each step; the TensorCore idles the first 30 us.
        let busy = metric(f, "busiest SparseCore busy share of the step");
        assert!((96.0..98.0).contains(&busy), "{busy}");
        let wait = metric(f, "TensorCore idle while its SparseCores are busy, per step");
        assert!((0.028..0.034).contains(&wait), "{wait}");
        let gather = metric(f, "dense gathers and scatters on the TensorCore per step");
        assert!((0.011..0.013).contains(&gather), "{gather}");
        assert_eq!(metric(f, "dropped SparseCore trace events"), 2048.0);
        let text: Vec<String> = f.evidence.iter().map(|e| e.to_string()).collect();
        let text = text.join("\n");
        assert!(text.contains("4 SparseCore plane(s)"), "{text}");
        assert!(text.contains("embedding-lookup.40 on /device:TPU:"), "{text}");
        assert!(
            text.contains("gather.30 (gather fusion) on the TensorCore") && text.contains("at embedding.py:57"),
            "{text}"
        );
        assert!(text.contains("jit_train_step(1): gather.30 (gather) from jit(train_step)/embed/gather"), "{text}");
        assert!(f.what.starts_with("A SparseCore is busy 97 % of the step"), "{}", f.what);
        assert!((14.0..20.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P1);
    }

    #[test]
    fn moderately_busy_sparse_cores_are_fine() {
        assert!(run_on("sparsecore_overflow", &testdata("tpu/tpu_healthy")).is_empty());
        // v6e has SparseCores; tpu_straggler runs no lookups at all.
        assert!(run_on("sparsecore_overflow", &testdata("tpu/tpu_straggler")).is_empty());
    }

    #[test]
    fn chips_without_sparse_cores_are_skipped() {
        for dir in ["tpu/tpu_basic", "corpus/clean"] {
            let report = report_of("sparsecore_overflow", &testdata(dir));
            assert!(report.findings.is_empty(), "{dir}");
            assert_eq!(report.skipped.len(), 1, "{dir}");
        }
        let report = report_of("sparsecore_overflow", &testdata("tpu/tpu_basic"));
        assert!(report.skipped[0].reason.contains("no SparseCore"), "{:?}", report.skipped);
    }

    #[test]
    fn dense_gathers_on_a_chip_whose_sparse_cores_are_unused() {
        let op = |n: &str, opcode: &str, cat: &str, us: i64| {
            OpSpec::new(n, opcode, cat, 1_000_000, 8_000_000, us * 1_000_000)
        };
        let program = Program {
            items: vec![
                Item::Op(op("gather.1", "gather", "gather fusion", 30)),
                Item::Op(op("convolution.2", "convolution", "convolution fusion", 80)),
                Item::Op(op("scatter.3", "scatter", "scatter fusion", 10)),
            ],
        };
        let spec = SynthSpec { cores: 2, steps: 3, program, device_type: "TPU v5".to_owned(), ..SynthSpec::default() };
        let space = Space::parse(tpu_profile(&spec).into()).unwrap();
        let report = scan(&Profile::from_space("h", space), &ScanConfig::only("sparsecore_overflow"));
        assert_eq!(report.findings.len(), 1, "{report:#?}");
        let f = &report.findings[0];
        assert!(f.what.starts_with("Dense gathers on the TensorCore take"), "{}", f.what);
        // 40 of ~120 us per step.
        assert!((28.0..38.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert!(
            f.evidence
                .iter()
                .any(|e| e.to_string().contains("has SparseCores but the profile has no SparseCore plane"))
        );
    }
}
