//! `vpu_bound`: the step is dominated by vector (elementwise, reduction) work while the matrix
//! units idle.

use xlens_roofline::{OpStats, Span, TimeClass, class_of};
use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::duration_text;
use crate::evidence::{self, DeviceOpLine};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct VpuBound;

const META: DetectorMeta = DetectorMeta {
    id: "vpu_bound",
    title: "Vector work dominates the step while the matrix units idle",
    severity: Severity::P1,
    needs: &[Need::DeviceTimeline, Need::Steps, Need::OpTimeline],
    doc: DetectorDoc {
        detects: "Steps in which vector work (loop fusions, reductions, elementwise ops: the VPU on TPU) takes \
                  most of the time while matmul/convolution work (the MXU) takes little, or vector-unit-bound \
                  stretches (layer norms, softmax, GELU, f32 elementwise) take a material share of a step whose \
                  matmuls take the rest, from the step anatomy; \
                  the vector ops behind it from the op profile, each placed on the roofline as vector-unit bound \
                  (neither HBM bandwidth nor the FLOP peak is the limit) or HBM bound; and the longest stretch of a \
                  step with no matmul.",
        why: "The matrix units hold nearly all of a TPU's FLOP/s; the vector units are an order of magnitude \
              slower. A step that spends most of its time in elementwise math, normalisations, softmax or \
              reductions runs far below the chip's peak however well its matmuls run, and the usual culprits \
              (f32 elementwise chains, exact transcendental activations, unfused reductions, tiny matmuls \
              between large elementwise blocks) are cheap to change.",
        evidence: "Vector and matmul shares of the step; the vector time per step; the largest vector ops with \
                   their share of the vector time, HBM and FLOP utilisation, bound (vector unit or HBM) and JAX \
                   source line (HLO instruction when the profile carries the module); the longest matmul-free \
                   stretch of a step on the timeline with its vector share.",
        thresholds: "Report when vector work is at least `vpu_bound.min_vector_pct` (default 50) % of the step \
                     time and matmul work at most `vpu_bound.max_matmul_pct` (default 15) %, or, whatever the matmul \
                     share, when vector ops using under `vpu_bound.stretch_max_hbm_utilization` (default 0.25) of \
                     the HBM bandwidth take at least `vpu_bound.min_vector_unit_excess_pct` (default 10) % of the \
                     step above their HBM-bandwidth floor (bytes ÷ peak HBM bandwidth): a vector-bound stretch. A vector op whose HBM utilisation is at least `vpu_bound.hbm_bound_utilization` \
                     (default 0.5) is HBM bound, else vector-unit bound. The impact is the time above the HBM floor \
                     (of all vector ops when they dominate, of the vector-unit-bound ones for a stretch), an upper \
                     bound of the gain. Severity P1, P0 from 20 % of the step, P2 under 2 %.",
        fix: "Cut or move vector work: keep elementwise math in bf16 (f32 only where accuracy needs it), use \
              approximate activations (tanh GELU), fuse normalisation and activation into the neighbouring matmul \
              (check the HLO for fusion breaks such as layout copies between them), express reductions over a \
              feature axis as matmuls with a ones vector, drop redundant casts and masks, and make the matmuls \
              larger (batch, sequence or model width) so MXU work dominates. Vector ops marked HBM bound move more \
              bytes than they compute on: fuse them with their producers or consumers to avoid the HBM round trip.",
        fix_lines: FixLines {
            jax: "`jax.nn.gelu(approximate=True)`.",
            tensorflow: "`tf.nn.gelu(x, approximate=True)` and a `mixed_bfloat16` policy.",
            pytorch_xla: "`F.gelu(x, approximate='tanh')` and bf16 through `torch_xla.amp.autocast`.",
        },
    },
};

impl Detector for VpuBound {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host, config)? else { return Ok(()) };
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score, config));
        Ok(())
    }
}

/// What the profile shows: the vector and matmul shares of the step and the vector ops' time above
/// their HBM floor.
struct Measured<'a> {
    profile: &'a xlens_roofline::OpProfile,
    steps: &'a xlens_roofline::Steps,
    step_ms: Option<f64>,
    /// Vector time over all steps.
    vector: Picos,
    vector_pct: f64,
    matmul_pct: f64,
    n_steps: f64,
    core_steps: f64,
    /// Vector ops, largest first, and their time split.
    ops: VectorOps<'a>,
    excess_ms: f64,
    vpu_excess_ms: f64,
    vpu_excess_pct: f64,
}

/// Vector ops, largest first, with their time in total, above the HBM floor and vector-unit bound.
struct VectorOps<'a> {
    ops: Vec<&'a OpStats>,
    /// Their total self time.
    op_vector: Picos,
    /// Seconds above the HBM floor, of all of them.
    excess: f64,
    /// Seconds above the HBM floor, of those leaving HBM mostly idle.
    vpu_excess: f64,
    vpu_bound_time: Picos,
}

/// True when vector work dominates the step and matmuls take little of it.
fn is_dominant(vector_pct: f64, matmul_pct: f64, config: &ScanConfig) -> bool {
    let t = &config.thresholds.vpu_bound;
    vector_pct >= t.min_vector_pct && matmul_pct <= t.max_matmul_pct
}

/// Reads the step anatomy and the vector ops; `None` when no rule can hold.
fn measure<'a>(host: &'a HostProfile, config: &ScanConfig) -> Result<Option<Measured<'a>>, Skip> {
    let t = &config.thresholds.vpu_bound;
    if host.space().tpu_tensor_cores().is_empty() && !host.space().gpus().is_empty() {
        // The vector units and the MXU split are TPU facts; GPUs get low_utilization.
        return Err(Skip::because("a TPU check (vector units beside the MXUs); GPUs are read by low_utilization"));
    }
    let anatomy = host.anatomy().map_err(Skip::because)?;
    let steps = host.steps().map_err(Skip::because)?;
    let profile = host.op_profile().map_err(Skip::because)?;
    let total: Picos = anatomy.iter().map(|a| a.step_time).sum();
    if total.0 <= 0 {
        return Ok(None);
    }
    let share = |p: Picos| 100.0 * p.0 as f64 / total.0 as f64;
    let vector: Picos = anatomy.iter().map(|a| a.vector).sum();
    let matmul: Picos = anatomy.iter().map(|a| a.matmul).sum();
    let (vector_pct, matmul_pct) = (share(vector), share(matmul));
    let dominant = is_dominant(vector_pct, matmul_pct, config);
    if !dominant && vector_pct < t.min_vector_unit_excess_pct {
        // Neither rule can hold: the excess of a share is never more than the share.
        return Ok(None);
    }
    let n_steps = anatomy.len().max(1) as f64;
    let core_steps = n_steps * f64::from(profile.cores.max(1));
    let step_ms = host.step_ms();
    let peak_hbm = profile
        .perf_env
        .map(|e| e.peak_hbm_bytes_per_s)
        .filter(|b| *b > 0.0)
        .or_else(|| host.chip().map(|c| c.peaks().hbm.bytes_per_s()))
        .filter(|b| *b > 0.0);
    let ops = vector_ops(profile, peak_hbm, config);
    let excess_ms = ops.excess * 1e3 / core_steps;
    let vpu_excess_ms = ops.vpu_excess * 1e3 / core_steps;
    let vpu_excess_pct = step_ms.filter(|s| *s > 0.0).map_or(0.0, |s| 100.0 * vpu_excess_ms / s);
    Ok(Some(Measured {
        profile,
        steps,
        step_ms,
        vector,
        vector_pct,
        matmul_pct,
        n_steps,
        core_steps,
        ops,
        excess_ms,
        vpu_excess_ms,
        vpu_excess_pct,
    }))
}

/// The vector ops, largest first, and their time above the HBM floor.
fn vector_ops<'a>(profile: &'a xlens_roofline::OpProfile, peak_hbm: Option<f64>, config: &ScanConfig) -> VectorOps<'a> {
    let t = &config.thresholds.vpu_bound;
    let mut ops: Vec<&OpStats> = profile
        .ops
        .iter()
        .filter(|o| !o.has_inner_ops() && class_of(&o.category) == TimeClass::Vector && o.self_time.0 > 0)
        .collect();
    ops.sort_by(|a, b| b.self_time.cmp(&a.self_time).then(a.name.cmp(&b.name)));
    let op_vector: Picos = ops.iter().map(|o| o.self_time).sum();
    let mut excess = 0.0f64;
    let mut vpu_excess = 0.0f64;
    let mut vpu_bound_time = Picos::ZERO;
    for op in &ops {
        let floor = peak_hbm.map_or(0.0, |bw| op.bytes.hbm / bw);
        let above = (op.self_time.as_secs_f64() - floor).max(0.0);
        excess += above;
        if !hbm_bound(profile, op, t.hbm_bound_utilization) {
            vpu_bound_time += op.self_time;
        }
        if !hbm_bound(profile, op, t.stretch_max_hbm_utilization) {
            vpu_excess += above;
        }
    }
    VectorOps { ops, op_vector, excess, vpu_excess, vpu_bound_time }
}

/// Which rule holds (dominant vector work or a vector-unit-bound stretch) and its cost.
struct Score {
    dominant: bool,
    impact: Impact,
}

/// Decides whether the step is vector-unit bound; `None` when neither rule holds.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.vpu_bound;
    let (excess_ms, vpu_excess_ms) = (m.excess_ms, m.vpu_excess_ms);
    let dominant = is_dominant(m.vector_pct, m.matmul_pct, config);
    // A stretch: vector-unit-bound work above its HBM floor is a material share of the step
    // even though matmuls take the rest.
    let stretch = !dominant && m.vpu_excess_pct >= t.min_vector_unit_excess_pct;
    if !dominant && !stretch {
        return None;
    }
    // Dominant vector work is priced by all vector ops above their HBM floor; a stretch by
    // the ones that leave HBM mostly idle (the others are the fusion detectors' business).
    let impact = Impact::of(if dominant { excess_ms } else { vpu_excess_ms }, m.step_ms);
    Some(Score { dominant, impact })
}

/// The evidence: the shares, the vector time split, the largest vector ops and the longest
/// matmul-free stretch.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Vec<Evidence> {
    let t = &config.thresholds.vpu_bound;
    let (profile, ops, op_vector, core_steps) = (m.profile, &m.ops.ops, m.ops.op_vector, m.core_steps);
    let (vector_pct, matmul_pct, vector, n_steps) = (m.vector_pct, m.matmul_pct, m.vector, m.n_steps);
    let (vpu_bound_time, excess_ms) = (m.ops.vpu_bound_time, m.excess_ms);
    let (vpu_excess_ms, vpu_excess_pct) = (m.vpu_excess_ms, m.vpu_excess_pct);
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric("vector_share", format!("vector share {}", tb.of_the()), vector_pct, "%"),
        Evidence::metric("matmul_share", format!("matmul share {}", tb.of_the()), matmul_pct, "%"),
        Evidence::metric("vector_time", format!("vector time {}", tb.per()), vector.as_ms_f64() / n_steps, "ms"),
        Evidence::metric(
            "vpu_bound_time",
            format!("vector-unit-bound op time {}", tb.per()),
            vpu_bound_time.as_ms_f64() / core_steps,
            "ms",
        ),
        Evidence::metric(
            "vector_excess_time",
            format!("vector time above the HBM floor {}", tb.per()),
            excess_ms,
            "ms",
        ),
        Evidence::metric(
            "vpu_excess_time",
            format!("time above the HBM floor of vector ops using little HBM, {}", tb.per()),
            vpu_excess_ms,
            "ms",
        ),
        Evidence::metric(
            "vpu_excess_share",
            format!("time above the HBM floor of vector ops using little HBM, share {}", tb.of_the()),
            vpu_excess_pct,
            "%",
        ),
    ];
    let module = host.main_module();
    for op in ops.iter().take(5) {
        let pct_of_vector = if op_vector.0 > 0 { 100.0 * op.self_time.0 as f64 / op_vector.0 as f64 } else { 0.0 };
        let mut text = format!(
            "{} ({}): {} {}, {pct_of_vector:.0} % of the vector time",
            op.name,
            op.category,
            duration_text(op.self_time.as_ms_f64() / core_steps),
            tb.per(),
        );
        if let Some(point) = profile.roofline(op) {
            text.push_str(&format!(
                ", HBM {:.0} % and FLOPs {:.1} % of peak: {}",
                100.0 * point.hbm_bytes_per_s / profile.perf_env.map_or(1.0, |e| e.peak_hbm_bytes_per_s.max(1.0)),
                100.0 * point.compute_utilization,
                if hbm_bound(profile, op, t.hbm_bound_utilization) {
                    "HBM bound (fuse to save the round trip)"
                } else {
                    "vector-unit bound"
                }
            ));
        }
        if let Some(source) = &op.source {
            text.push_str(&format!(" at {source}"));
        }
        evidence.push(Evidence::note(text));
        if let Some(m) = module.filter(|m| m.program_id() == Some(op.program_id))
            && let Some(instr) = m.instruction_by_name(&op.name)
        {
            evidence.push(evidence::instruction(m, instr.id()));
        }
    }
    evidence.extend(stretch_evidence(host, m.steps));
    evidence
}

/// The longest matmul-free stretch, as a note and on the timeline.
fn stretch_evidence(host: &HostProfile, steps: &xlens_roofline::Steps) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    if let Some(stretch) = longest_matmul_free_stretch(host, steps) {
        evidence.push(Evidence::note(format!(
            "longest matmul-free stretch: {} from {} to {}, {:.0} % of it vector work",
            duration_text(stretch.duration.as_ms_f64()),
            stretch.first,
            stretch.last,
            100.0 * stretch.vector.0 as f64 / stretch.duration.0.max(1) as f64
        )));
        evidence.push(evidence::event_parts(
            host,
            &stretch.plane,
            names::line::XLA_OPS,
            &format!("matmul-free stretch {} … {}", stretch.first, stretch.last),
            stretch.start,
            stretch.duration,
        ));
    }
    evidence
}

/// The finding: which rule holds, the top vector ops, and the evidence.
fn describe(detector: &VpuBound, host: &HostProfile, m: &Measured<'_>, s: &Score, config: &ScanConfig) -> Finding {
    let (vector_pct, matmul_pct) = (m.vector_pct, m.matmul_pct);
    let (vpu_excess_ms, vpu_excess_pct) = (m.vpu_excess_ms, m.vpu_excess_pct);
    let severity = Severity::from_impact(s.impact.pct_of_step, META.severity);
    let top: Vec<&str> = m.ops.ops.iter().take(3).map(|o| o.name.as_str()).collect();
    let tb = TimeBase::of(host);
    let what = if s.dominant {
        format!(
            "Vector work takes {vector_pct:.0} % {} and matmuls {matmul_pct:.0} %: the step is bound by \
                 the vector units ({}), while the matrix units idle.",
            tb.of_the(),
            top.join(", ")
        )
    } else {
        format!(
            "Vector-unit-bound stretches: vector work takes {vector_pct:.0} % {} (matmuls \
                 {matmul_pct:.0} %), and {vpu_excess_ms:.3} ms {} ({vpu_excess_pct:.0} %) of it is time the \
                 vector units take beyond what HBM bandwidth needs ({}).",
            tb.of_the(),
            tb.per(),
            top.join(", ")
        )
    };
    Finding::new(detector, severity, what, evidence_of(host, m, config), s.impact)
}

/// True when the op's HBM utilisation reaches `limit` (it is limited by memory, not by the VPU).
fn hbm_bound(profile: &xlens_roofline::OpProfile, op: &OpStats, limit: f64) -> bool {
    let Some(env) = profile.perf_env.filter(|e| e.peak_hbm_bytes_per_s > 0.0) else { return false };
    op.hbm_bytes_per_s() / env.peak_hbm_bytes_per_s >= limit
}

struct Stretch {
    plane: String,
    start: Picos,
    duration: Picos,
    vector: Picos,
    first: String,
    last: String,
}

/// On the first core: the stretch between matmuls (or step edges) holding the most vector time,
/// with the first and last vector ops inside it.
fn longest_matmul_free_stretch(host: &HostProfile, steps: &xlens_roofline::Steps) -> Option<Stretch> {
    let plane = *host.space().tpu_tensor_cores().first()?;
    // The device timeline's walk of the first core finds it as it goes (the usual case); a
    // line it could not answer for is walked here.
    let found = host.device_timeline().ok().and_then(|t| t.cores.first()).and_then(|c| c.matmul_free);
    let (start, end, vector, first, last) = match found {
        Some(found) => {
            let s = found.longest?;
            let (first, last) = s.vector_ops?;
            let name = |at: usize| plane.event_metadata().get(at).map(evidence::metadata_op_name);
            (s.start, s.end, s.vector, name(first)?, name(last)?)
        }
        None => walked_stretch(plane, steps)?,
    };
    Some(Stretch { plane: plane.name().to_owned(), start, duration: end - start, vector, first, last })
}

/// [`longest_matmul_free_stretch`]'s search by walks of the first core's op line of its own:
/// start, end, vector time, and the names of the first and last vector ops inside.
fn walked_stretch(
    plane: &xlens_xplane::Plane,
    steps: &xlens_roofline::Steps,
) -> Option<(Picos, Picos, Picos, String, String)> {
    let ordinal = evidence::device_ordinal(plane);
    // Matmul and vector time as unions, from a streamed walk of the op line (no op is kept).
    let unions = evidence::class_unions(plane, names::line::XLA_OPS, &[TimeClass::Matmul, TimeClass::Vector])?;
    let in_order = unions.in_order;
    let [matmul, vector]: [Vec<Span>; 2] = unions.unions.try_into().ok()?;
    let mut best: Option<(Picos, Picos, Picos)> = None;
    // Steps come in time order, and the gaps within a step too.
    let mut in_vector = evidence::IntervalCursor::new(&vector);
    for step in &steps.steps {
        let Some(core) = step.cores.iter().find(|c| c.core == ordinal) else { continue };
        let (lo, hi) = (core.marker_start, core.marker_start + step.duration);
        let mut cursor = lo;
        let from = matmul.partition_point(|m| m.end <= lo);
        let edges = matmul[from..].iter().take_while(|m| m.start < hi).map(|m| (m.start.max(lo), m.end.min(hi)));
        for (s, e) in edges.chain(std::iter::once((hi, hi))) {
            if s > cursor {
                let v = in_vector.covered(cursor, s);
                if best.is_none_or(|b| v > b.2) {
                    best = Some((cursor, s, v));
                }
            }
            cursor = cursor.max(e);
        }
    }
    let (start, end, vector_time) = best.filter(|b| b.2.0 > 0)?;
    // The first and last vector ops inside the stretch: a second walk, keeping only their names.
    // Ops come by start: the walk ends at the first op that starts after the stretch's end, and
    // on a line seen in order it starts near the stretch.
    let init = || (None, None);
    let push = |(first, last): &mut (Option<usize>, Option<usize>),
                op: &evidence::DeviceOp,
                infos: &[evidence::DeviceOpInfo]| {
        if op.start > end {
            return false;
        }
        if op.start >= start && op.end <= end && class_of(&infos[op.info].category) == TimeClass::Vector {
            first.get_or_insert(op.info);
            *last = Some(op.info);
        }
        true
    };
    let ((first, last), infos) = if in_order {
        DeviceOpLine::walk_in_order_from(plane, names::line::XLA_OPS, start, init, push)?
    } else {
        DeviceOpLine::walk_while(plane, names::line::XLA_OPS, init, push)?
    };
    Some((start, end, vector_time, infos.get(first?)?.name.clone(), infos.get(last?)?.name.clone()))
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::metric;
    use crate::testing::{report_of, run_on, testdata};

    /// The stretch the device timeline finds while it walks the first core equals the one a
    /// walk of that core's op line finds on its own, on TPU captures with and without a
    /// vector-bound stretch and on the synthetic TPU profile of the benchmarks.
    #[test]
    fn the_timeline_finds_the_stretch_a_walk_of_the_line_finds() {
        use xlens_testkit::synth::{SynthSpec, fixture, tpu_profile};
        let mut profiles: Vec<crate::profile::Profile> = Vec::new();
        for dir in ["tpu/tpu_vector_bound", "tpu/tpu_vpu_stretch", "tpu/tpu_basic", "tpu/tpu_healthy"] {
            let session = xlens_testkit::open_session(testdata(dir)).unwrap();
            profiles.push(crate::profile::Profile::from_session(session));
        }
        let spec = SynthSpec { steps: 20, ..fixture("tpu_vector_bound").unwrap() };
        let space = xlens_xplane::Space::parse(tpu_profile(&spec).into()).unwrap();
        let synthetic = crate::profile::HostProfile::new("synthetic", space);
        let mut found = 0;
        for host in profiles.iter().flat_map(|p| p.hosts()).chain(std::iter::once(&synthetic)) {
            let plane = *host.space().tpu_tensor_cores().first().unwrap();
            let steps = host.steps().unwrap();
            let timeline = host.device_timeline().unwrap().cores[0].matmul_free.expect("the first core is searched");
            assert!(timeline.in_order, "{}", host.name());
            let walked = super::walked_stretch(plane, steps);
            let from_timeline = super::longest_matmul_free_stretch(host, steps)
                .map(|s| (s.start, s.start + s.duration, s.vector, s.first, s.last));
            assert_eq!(from_timeline, walked, "{}", host.name());
            found += usize::from(walked.is_some());
        }
        assert!(found >= 3, "{found}");
    }

    #[test]
    fn finds_a_step_of_loop_fusions_and_reductions() {
        let findings = run_on("vpu_bound", &testdata("tpu/tpu_vector_bound"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // 236 of ~275 us per step are loop fusions and reductions, 20 us the one dot.
        let vector = metric(f, "vector share of the step");
        let matmul = metric(f, "matmul share of the step");
        assert!((80.0..92.0).contains(&vector), "{vector}");
        assert!((5.0..10.0).contains(&matmul), "{matmul}");
        assert!(f.what.starts_with("Vector work takes"), "{}", f.what);
        let text: Vec<String> = f.evidence.iter().map(|e| e.to_string()).collect();
        let text = text.join("\n");
        // gelu (fusion.1, 80 us) leads; the 30 us add moving 24 MB runs at ~98 % of HBM bandwidth.
        let first = text.lines().find(|l| l.starts_with("fusion.1 (loop fusion): ")).expect("fusion.1");
        let us: f64 = first["fusion.1 (loop fusion): ".len()..].split(' ').next().unwrap().parse().unwrap();
        assert!((76.0..84.0).contains(&us), "{first}");
        assert!(text.contains("vector-unit bound at model.py:61"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("fusion.6 (loop fusion)") && l.contains("HBM bound")), "{text}");
        assert!(
            text.contains("jit_train_step(1): fusion.1 (fusion) from jit(train_step)/gelu at model.py:61"),
            "{text}"
        );
        // From the step start to the dot: gelu, layer norm and the reduction, all vector work.
        assert!(text.contains("from fusion.1 to reduce.3, 100 % of it vector work"), "{text}");
        // Time above the HBM floor: ~175 us of the ~275 us step.
        assert!((0.15..0.20).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P0);
    }

    /// Layer norms, softmax, GELU and f32 elementwise ops take 36 % of the step beside the
    /// matmuls, at 5-8 % of the HBM bandwidth: a vector-unit-bound stretch, priced above the
    /// ops' HBM floor.
    #[test]
    fn finds_a_vector_unit_bound_stretch_beside_the_matmuls() {
        let findings = run_on("vpu_bound", &testdata("tpu/tpu_vpu_stretch"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("Vector-unit-bound stretches: vector work takes 36 % of the step"), "{}", f.what);
        assert!((30.0..36.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P0);
        assert!(f.evidence.iter().any(|e| e.to_string().contains("jit(train_step)/mlp/gelu")), "{f:#?}");
    }

    #[test]
    fn matmul_heavy_steps_are_not_vector_bound() {
        for dir in [
            "tpu/tpu_basic",
            "tpu/tpu_healthy",
            "tpu/tpu_exposed_collective",
            "tpu/tpu_straggler",
            "tpu/tpu_vpu_clean",
            "tpu/tpu_padding_waste",
        ] {
            assert!(run_on("vpu_bound", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn cpu_captures_have_no_vector_units_to_check() {
        let report = report_of("vpu_bound", &testdata("corpus/clean"));
        assert!(report.findings.is_empty());
        assert_eq!(report.skipped.len(), 1);
        assert!(report.skipped[0].reason.contains("no device op lines"), "{:?}", report.skipped);
    }
}
