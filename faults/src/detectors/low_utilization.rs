//! `low_utilization`: the device's FLOP utilisation is low; what bounds the program on the
//! roofline, which ops hold it down, and how much time running them at their roofline would save.

use xlens_roofline::{BoundBy, KernelLibrary, OpStats};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LowUtilization;

const META: DetectorMeta = DetectorMeta {
    id: "low_utilization",
    title: "The device runs far below its peak",
    severity: Severity::P2,
    needs: &[Need::DevicePeaks, Need::OpTimeline],
    doc: DetectorDoc {
        detects: "A program whose achieved FLOP rate over the profiled device time is a small share of the device's \
                  peak (XProf's program roofline record: the innermost ops' FLOPs over the summed core spans, idle \
                  included). The finding says what bounds the program (compute, HBM or on-chip memory, from the \
                  largest utilisation, XProf's `bound_by`), its operational intensity against the ridge point, the \
                  ops that take the most time with their own bound and roofline efficiency, the time spent in ops \
                  with no place on the roofline (custom calls and copies the cost model cannot price, async \
                  starts, ops whose counts exceed the peaks), and on GPUs the time per kernel library.",
        why: "Low utilisation is the headline of most slow steps: the accelerator is paid for its peak and \
              delivers a fraction of it. Knowing whether the program is memory-bound, idle, or spending its time in \
              unpriced library kernels decides the fix; the roofline headroom of each op says where the time is.",
        evidence: "FLOP utilisation, HBM utilisation and roofline efficiency (%), the bound, the operational \
                   intensity and the ridge point (FLOP/B), the roofline headroom (time the ops would save at their \
                   own roofline), the attainable share of an op's roofline and the time above it (recoverable), \
                   the top ops by time with their category, bound and efficiency, the share of op \
                   time with no roofline place, and on GPUs the time per kernel library (cuBLAS, \
                   hipBLASLt, cuDNN/MIOpen, Triton, Transformer Engine, XLA fusions, NCCL/RCCL).",
        thresholds: "Report when FLOP utilisation is below `status.min_flops_utilization` (default 0.5) on a \
                     profile with device peaks. The utilisation is the op profile's (docs/metrics.md): library GEMM \
                     and fused-attention calls that XLA's cost model (and so XProf's figure) prices at nothing are \
                     priced from their shapes, and each op counts once per execution, not per launch (the memset \
                     kernel launched before a cuBLAS GEMM carries its name, and XProf counts it as an execution); \
                     XProf's figure is in the evidence where it differs. Impact: the recoverable time per step, each \
                     priced op's time above `low_utilization.attainable_roofline_share` (default 0.8) of its own \
                     roofline (an op at or above that share counts for nothing: tuned GEMMs reach 80 to 87 % of a \
                     GPU's datasheet peak, docs/metrics.md); the headroom to the full roofline is evidence only. \
                     Severity from that impact: P2, P1 from 20 % of the step (a symptom, never P0: the findings \
                     that name a cause rank above it, and the recoverable time is an upper bound that needs every \
                     op tuned).",
        fix: "Follow the bound. HBM-bound (operational intensity below the ridge point): raise the work per byte: \
              let XLA fuse elementwise chains into their producers, keep activations and weights in bf16, make \
              matmuls larger (more batch or sequence per device, fewer tiny ops), and avoid materialising \
              intermediate copies. Compute-bound but far from the roof: use the matrix units (bf16/fp8 inputs, \
              dimensions multiple of 128 on TPU and of 8/16 on GPU). Time in unpriced custom calls or copies: look \
              at those kernels first (`kernel_stats`), the roofline cannot see their work. Idle time inside the \
              window counts against utilisation too: see the idle and input findings.",
        fix_lines: FixLines {
            jax: "",
            tensorflow: "compile the step with `tf.function(jit_compile=True)` so XLA fuses elementwise ops, and set \
                         a mixed-precision policy (`tf.keras.mixed_precision.set_global_policy('mixed_float16')` on \
                         GPUs, `'mixed_bfloat16'` on TPUs) so matmuls and convolutions run on the matrix units.",
            pytorch_xla: "run matmuls in bf16 with `torch_xla.amp.autocast`, and keep layer widths and the batch at \
                          multiples of 8 (GPU) or 128 (TPU).",
        },
    },
};

impl Detector for LowUtilization {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let utilization = utilization(host)?;
        if utilization.point.compute_utilization >= config.thresholds.status.min_flops_utilization {
            return Ok(());
        }
        let share = attainable_share(config);
        let ops = measure_ops(host, utilization.profile, share)?;
        let score = score(host, &ops);
        out.push(describe(self, host, &utilization, &ops, &score));
        Ok(())
    }
}

/// The program's place on the roofline, and XProf's FLOP utilisation beside it.
struct Utilization<'a> {
    profile: &'a xlens_roofline::OpProfile,
    point: xlens_roofline::RooflinePoint,
    /// XProf's FLOP utilisation (`0..=1`) where it differs: launches counted as executions,
    /// library calls at 0.
    xprof: Option<f64>,
}

/// Reads the program's roofline point.
fn utilization(host: &HostProfile) -> Result<Utilization<'_>, Skip> {
    let profile = host.op_profile().map_err(Skip::because)?;
    let Some(work) = profile.program_work() else {
        return Err(Skip::because("the op profile has no device peaks"));
    };
    if !work.is_priced() {
        return Err(Skip::because(crate::report::NO_COST));
    }
    let point = work.point();
    let xprof = work.xprof_flops_utilization();
    let xprof = ((xprof - point.compute_utilization).abs() >= 0.0005).then_some(xprof);
    Ok(Utilization { profile, point, xprof })
}

/// The innermost ops' time and how far it is above their rooflines.
struct Ops<'a> {
    /// The step unit (`step`, ...).
    unit: &'static str,
    /// Steps × cores.
    per: f64,
    innermost: Vec<&'a OpStats>,
    op_time: f64,
    /// Time above each priced op's own roofline, and time of the unpriced ops.
    headroom_ms: f64,
    unpriced_ms: f64,
    /// The share of its roofline an op can be expected to reach (`0.01..=1`).
    share: f64,
    /// Time above that share of each priced op's roofline: what tuning the ops can recover.
    recoverable_ms: f64,
}

/// The configured attainable share of an op's roofline, clamped to `0.01..=1` (1 when not a number).
fn attainable_share(config: &ScanConfig) -> f64 {
    let share = config.thresholds.low_utilization.attainable_roofline_share;
    if share.is_finite() { share.clamp(0.01, 1.0) } else { 1.0 }
}

/// The time of an op that runs at `efficiency` of its roofline above what it would take at
/// `share` of it: `time × (1 − efficiency / share)`, nothing for an op at or above the share.
fn recoverable(time_ms: f64, efficiency: f64, share: f64) -> f64 {
    time_ms * (1.0 - efficiency / share).max(0.0)
}

/// Reads the innermost ops, their roofline headroom and the part of it that `share` of each
/// op's roofline leaves recoverable.
fn measure_ops<'a>(host: &HostProfile, profile: &'a xlens_roofline::OpProfile, share: f64) -> Result<Ops<'a>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let unit = TimeBase::of(host).unit();
    let per = (steps.steps.len().max(1) as f64) * f64::from(profile.cores.max(1));
    let innermost: Vec<&OpStats> = profile.ops.iter().filter(|o| !o.has_inner_ops()).collect();
    let op_time: f64 = innermost.iter().map(|o| o.self_time.as_ms_f64()).sum();
    // Headroom: each priced op's time above what its own roofline allows.
    let mut headroom_ms = 0.0;
    let mut recoverable_ms = 0.0;
    let mut unpriced_ms = 0.0;
    for op in &innermost {
        let priced = op.flops > 0.0 || op.bytes.total() > 0.0;
        let time = op.self_time.as_ms_f64();
        match profile.roofline(op) {
            Some(p) if priced => {
                headroom_ms += recoverable(time, p.efficiency.min(1.0), 1.0);
                recoverable_ms += recoverable(time, p.efficiency.min(1.0), share);
            }
            _ => unpriced_ms += time,
        }
    }
    Ok(Ops { unit, per, innermost, op_time, headroom_ms, unpriced_ms, share, recoverable_ms })
}

/// What running each op at the attainable share of its roofline would save, and the severity.
struct Score {
    /// The recoverable time per step: the finding's impact.
    impact: Impact,
    /// The headroom to each op's full roofline per step (context: no tuning reaches it).
    headroom: Impact,
    severity: Severity,
}

/// Prices the recoverable time and takes the severity from it (`Severity::from_impact`, usual
/// P2). A symptom, not a fault of its own: P1 at most (the findings that name a cause rank above
/// it), and P1 only where the recoverable time is at least the toolkit's P0 share of the step:
/// it is an upper bound, reached only by tuning every op, so a well-run program whose ops are
/// near what they attain (a transformer at 46 % of peak) is not a program that needs attention.
fn score(host: &HostProfile, ops: &Ops<'_>) -> Score {
    let impact = Impact::of(ops.recoverable_ms / ops.per, host.step_ms());
    let headroom = Impact::of(ops.headroom_ms / ops.per, host.step_ms());
    let severity = Severity::from_impact(impact.pct_of_step, META.severity).max(Severity::P1);
    Score { impact, headroom, severity }
}

/// The evidence: the utilisations, the bound, the headroom, the longest ops, the kernel libraries.
fn evidence_of(host: &HostProfile, u: &Utilization<'_>, ops: &Ops<'_>, s: &Score) -> Vec<Evidence> {
    let (profile, point) = (u.profile, &u.point);
    let (unit, innermost, op_time, unpriced_ms) = (ops.unit, &ops.innermost, ops.op_time, ops.unpriced_ms);
    let pct = |v: f64| 100.0 * v;
    let mut evidence = vec![
        Evidence::metric("flops_utilization", "FLOP utilisation", pct(point.compute_utilization), "%"),
        Evidence::metric(
            "memory_bandwidth_utilization",
            "memory bandwidth utilisation (largest memory)",
            pct(point.memory_utilization),
            "%",
        ),
        Evidence::metric("roofline_efficiency", "roofline efficiency", pct(point.efficiency), "%"),
        Evidence::metric("operational_intensity", "operational intensity", point.operational_intensity, "FLOP/B"),
    ];
    if let Some(xprof) = u.xprof {
        evidence.push(Evidence::metric(
            "xprof_flops_utilization",
            "FLOP utilisation as XProf counts it (each launch carrying an op's name as an execution, library \
             GEMM and attention calls at 0 FLOPs)",
            pct(xprof),
            "%",
        ));
    }
    let ridge = host.chip().map(|c| c.ridge_point().0).filter(|r| r.is_finite() && *r > 0.0);
    if let Some(ridge) = ridge {
        evidence.push(Evidence::metric("ridge_point", "HBM ridge point", ridge, "FLOP/B"));
    }
    evidence.push(Evidence::note(bound_note(point.bound_by, point.operational_intensity, ridge)));
    evidence.push(Evidence::metric(
        "roofline_headroom_time",
        format!("roofline headroom of the ops per {unit}"),
        s.headroom.ms_per_step,
        "ms",
    ));
    evidence.push(Evidence::metric(
        "attainable_roofline_share",
        "attainable share of an op's roofline",
        pct(ops.share),
        "%",
    ));
    evidence.push(Evidence::metric(
        "recoverable_time",
        format!("time above the attainable share of each op's roofline per {unit}"),
        s.impact.ms_per_step,
        "ms",
    ));
    if op_time > 0.0 && unpriced_ms > 0.0 {
        evidence.push(Evidence::metric(
            "unpriced_op_time_share",
            "op time with no roofline place (unpriced custom calls and copies, async starts, counts above the peaks)",
            100.0 * unpriced_ms / op_time,
            "%",
        ));
    }
    let mut by_time: Vec<&&OpStats> = innermost.iter().collect();
    by_time.sort_by(|a, b| b.self_time.cmp(&a.self_time).then(a.name.cmp(&b.name)));
    for op in by_time.iter().take(5) {
        let share = if op_time > 0.0 { 100.0 * op.self_time.as_ms_f64() / op_time } else { 0.0 };
        let place = match profile.roofline(op) {
            Some(p) if op.flops > 0.0 || op.bytes.total() > 0.0 => format!(
                "{}-bound at {:.1} % of its roofline, {:.2} FLOP/B",
                p.bound_by.label(),
                pct(p.efficiency),
                p.operational_intensity
            ),
            _ => "no roofline place (no work priced, an async start, or counts above the peaks)".to_owned(),
        };
        evidence.push(Evidence::note(format!(
            "{} ({}, {}): {share:.1} % of op time, {place}",
            op.name,
            op.category,
            profile.programs.get(&op.program_id).cloned().unwrap_or_else(|| op.program_id.to_string())
        )));
    }
    if !host.space().gpus().is_empty() && host.space().tpu_tensor_cores().is_empty() {
        evidence.extend(library_shares(&host.host_ops().kernel_times(host.space())));
    }
    evidence
}

/// The finding: the program's utilisation and what running each op at its roofline would save.
fn describe(detector: &LowUtilization, host: &HostProfile, u: &Utilization<'_>, ops: &Ops<'_>, s: &Score) -> Finding {
    let (point, unit, op_time, unpriced_ms, impact) = (&u.point, ops.unit, ops.op_time, ops.unpriced_ms, s.impact);
    let pct = |v: f64| 100.0 * v;
    let share = pct(ops.share);
    // Where XProf's figure differs (launches counted as executions, library calls unpriced),
    // it is named beside the program's own.
    let reaches = match u.xprof {
        Some(x) => format!(
            "{:.1} % of the device's peak FLOP rate (XProf counts {:.1} %; ",
            pct(point.compute_utilization),
            pct(x)
        ),
        None => format!("{:.1} % of the device's peak FLOP rate (", pct(point.compute_utilization)),
    };
    let what = format!(
        "The program reaches {reaches}{:.1} % of its roofline, {}-bound at {:.2} \
             FLOP/B){}; running each op at {share:.0} % of its own roofline (what tuned kernels attain) would \
             save {:.3} ms per {unit} ({:.1} % of the {unit}).",
        pct(point.efficiency),
        point.bound_by.label(),
        point.operational_intensity,
        if op_time > 0.0 && unpriced_ms > 0.0 {
            format!("; {:.1} % of op time is in ops with no roofline place", 100.0 * unpriced_ms / op_time)
        } else {
            String::new()
        },
        impact.ms_per_step,
        impact.pct_of_step
    );
    Finding::new(detector, s.severity, what, evidence_of(host, u, ops, s), impact)
}

fn bound_note(bound: BoundBy, intensity: f64, ridge: Option<f64>) -> String {
    match (bound, ridge) {
        (BoundBy::Compute, _) => "compute-bound: the matrix and vector units are the limit".to_owned(),
        (BoundBy::Unknown, _) => "no op carries FLOPs or bytes the roofline can place".to_owned(),
        (b, Some(r)) if intensity < r => format!(
            "{}-bound: {intensity:.2} FLOP/B is below the ridge point of {r:.1} FLOP/B, so memory traffic, not \
             arithmetic, limits the program",
            b.label()
        ),
        (b, _) => format!("{}-bound", b.label()),
    }
}

/// Time per kernel library on the GPUs, largest first (libraries under 1 % left out).
fn library_shares(times: &[(String, xlens_xplane::Picos)]) -> Vec<Evidence> {
    let mut by: std::collections::BTreeMap<KernelLibrary, xlens_xplane::Picos> = std::collections::BTreeMap::new();
    for (kernel, time) in times {
        let library = match xlens_roofline::copy_kind(kernel) {
            Some(_) => continue,
            None => KernelLibrary::of(kernel),
        };
        *by.entry(library).or_default() += *time;
    }
    let total: i64 = by.values().fold(0i64, |a, t| a.saturating_add(t.0));
    if total <= 0 {
        return Vec::new();
    }
    let mut rows: Vec<(KernelLibrary, xlens_xplane::Picos)> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let parts: Vec<String> = rows
        .iter()
        .filter(|(_, t)| t.0 as i128 * 100 >= total as i128)
        .map(|(l, t)| format!("{} {:.1} %", l.as_str(), 100.0 * t.0 as f64 / total as f64))
        .collect();
    vec![Evidence::note(format!("kernel time by library: {}", parts.join(", ")))]
}

#[cfg(test)]
mod tests {
    use super::recoverable;
    use crate::config::ScanConfig;
    use crate::finding::Severity;
    use crate::testing::{metric, run_on, testdata};

    fn scan_with(dir: &str, config: &ScanConfig) -> Vec<crate::finding::Finding> {
        let session = xlens_testkit::open_session(testdata(dir)).unwrap();
        crate::scan::scan(&crate::profile::Profile::from_session(session), config).findings
    }

    #[test]
    fn an_op_at_its_attainable_share_counts_for_nothing() {
        // 10 ms at 80 % of its roofline, with 80 % attainable: nothing to recover.
        assert_eq!(recoverable(10.0, 0.8, 0.8), 0.0);
        assert_eq!(recoverable(10.0, 0.95, 0.8), 0.0);
        // At 40 %, half its time goes at 80 %.
        assert!((recoverable(10.0, 0.4, 0.8) - 5.0).abs() < 1e-12);
        // The full roofline (share 1) is the old headroom.
        assert!((recoverable(10.0, 0.4, 1.0) - 6.0).abs() < 1e-12);
    }

    #[test]
    fn a_well_run_transformer_is_not_p1() {
        // Our H200 bf16 transformer: 46.6 % of peak, its GEMMs near 80 % of their roofline. Each
        // op at its full roofline would save a quarter of the step, which no change recovers; at
        // 80 % of it about a tenth, spread over every fusion: P2.
        let findings = run_on("low_utilization", &testdata("h200/h200_train_bf16"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P2, "{f:#?}");
        assert!((46.0..47.0).contains(&metric(f, "FLOP utilisation")), "{f:#?}");
        assert_eq!(metric(f, "attainable share of an op's roofline"), 80.0);
        let headroom = metric(f, "roofline headroom of the ops per step");
        let recoverable = metric(f, "time above the attainable share of each op's roofline per step");
        assert!(recoverable < 0.5 * headroom, "{recoverable} of {headroom}");
        assert_eq!(recoverable, f.impact.ms_per_step);
        assert!((5.0..20.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert!(f.what.contains("at 80 % of its own roofline"), "{}", f.what);
    }

    #[test]
    fn ops_far_from_their_roof_keep_p1() {
        // Vector-bound ops far below their roofline: most of the step is recoverable.
        let findings = run_on("low_utilization", &testdata("tpu/tpu_vector_bound"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].severity, Severity::P1);
        assert!(findings[0].impact.pct_of_step >= 20.0, "{:?}", findings[0].impact);
    }

    #[test]
    fn the_attainable_share_is_read_from_the_config() {
        let mut config = ScanConfig::only("low_utilization");
        let at = |config: &ScanConfig| {
            let findings = scan_with("h200/h200_train_bf16", config);
            assert_eq!(findings.len(), 1, "{findings:#?}");
            findings[0].impact.ms_per_step
        };
        let default = at(&config);
        // Priced against the whole roofline, the impact is the headroom again.
        config.thresholds.low_utilization.attainable_roofline_share = 1.0;
        let whole = at(&config);
        assert!(whole > default, "{whole} {default}");
        let f = &scan_with("h200/h200_train_bf16", &config)[0];
        assert_eq!(whole, metric(f, "roofline headroom of the ops per step"));
        // A lower share recovers less; values out of range are clamped, not trusted.
        config.thresholds.low_utilization.attainable_roofline_share = 0.5;
        assert!(at(&config) < default);
        config.thresholds.low_utilization.attainable_roofline_share = 7.0;
        assert_eq!(at(&config), whole);
        config.thresholds.low_utilization.attainable_roofline_share = f64::NAN;
        assert_eq!(at(&config), whole);
    }
}
