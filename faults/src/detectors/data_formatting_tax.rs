//! `data_formatting_tax`: kernels that only reformat data (transposes, layout copies, reshapes
//! that move data, dtype conversions) take a large share of the step, or of its memory traffic.

use std::collections::BTreeMap;

use xlens_hlo::{InstrId, Module};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;
use xlens_hlo::layout::{Work, kernel_body, work_of};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DataFormattingTax;

const META: DetectorMeta = DetectorMeta {
    id: "data_formatting_tax",
    title: "Transposes, copies and casts take a large share of the step",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Kernels of the step's programs that do nothing but reformat data: transposes, copies and \
                  reshapes that move data (XProf's \"data formatting\" category: a bare copy/transpose/reshape, or \
                  a fusion that only moves data) and dtype conversions (a standalone convert, or a convert \
                  round trip such as f32 -> bf16 -> f32), with the JAX op and source line that introduced them.",
        why: "A formatting kernel reads and writes a whole array to compute nothing: on an accelerator, where \
              matmuls are fast, it costs about its share of the step's memory traffic, and it also adds a kernel \
              launch and an intermediate buffer. They usually come from einsum strings or explicit transposes that \
              fight the layout the matmuls want, or from casts between dtypes around every op.",
        evidence: "Formatting kernels per step, their self time per step (ms and % of the step), their share of the \
                   kernels and of the bytes the step's kernels access (HLO cost model), the split into layout and \
                   dtype work, the kernels that also compute but carry transposes or casts fused in, the JAX ops \
                   (op_name and source line) that produced the most formatting time, and the costliest kernels as \
                   HLO instructions. The trigger (time or structure) is stated.",
        thresholds: "Reported when formatting kernels take at least `data_formatting_tax.min_pct_of_step` (default 5) \
                     % of the step (time), or, whatever their time on this device, when they are at least \
                     `data_formatting_tax.min_kernel_share` (default 0.15) of the kernels run per step and move at \
                     least `data_formatting_tax.min_bytes_share` (default 0.12) of the bytes the step's kernels access \
                     (structure: on a memory-bound accelerator their time follows their bytes). Without an op \
                     timeline, each kernel counts once. The impact is the formatting kernels' self time; severity P1, \
                     P0 at 20 % of the step, P2 under 2 % when only the time rule fired.",
        fix: "Write the computation in the layout the matmuls want instead of transposing around them: pick output \
              dimension orders that match the next op, drop explicit transposes between matmuls (let the matmul \
              contract the right dimension), keep one dtype through a block (cast once at the boundary, or ask the \
              matmul for a wider output type) instead of casting around each op, and check the sources listed in the \
              evidence first.",
        fix_lines: FixLines {
            jax: "pick einsum output orders that match the next op (`btd,df->btf`, not `->ftb`), drop \
                  `.T`/`jnp.transpose` between matmuls (let `dot_general` contract the right dimension), and use \
                  `preferred_element_type` in the matmul instead of `astype` around it.",
            tensorflow: "pick `tf.einsum` output orders that match the next op, use `tf.matmul(a, b, \
                         transpose_b=True)` instead of `tf.transpose`, and set one mixed-precision policy \
                         (`tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')`) instead of `tf.cast` \
                         around each layer.",
            pytorch_xla: "use `torch.einsum`/`torch.matmul` with the dimension order the next op reads instead of \
                          `.permute(...)` between matmuls, and autocast (`torch_xla.amp.autocast`) instead of \
                          `.to(dtype)` around each op.",
        },
    },
};

/// One kernel that only reformats data.
#[derive(Debug)]
struct FormattingKernel {
    id: InstrId,
    layout: bool,
    ms: f64,
    count: f64,
    bytes: f64,
}

/// What the step's kernels of one program do.
#[derive(Debug, Default)]
struct Tally {
    kernels: f64,
    bytes: f64,
    formatting: Vec<FormattingKernel>,
    /// Kernels that compute and also carry a layout change or cast.
    mixed: f64,
}

fn tally(module: &Module, times: Option<&BTreeMap<String, evidence::OpTime>>) -> Tally {
    let mut t = Tally::default();
    for id in evidence::kernels(module) {
        let instr = module.instruction(id);
        // Executions per step: from the profile when it has one (kernels that never ran count 0).
        let (ms, count) = match times {
            Some(times) => times.get(instr.name()).map_or((0.0, 0.0), |o| (o.ms, o.count)),
            None => (0.0, 1.0),
        };
        if count <= 0.0 {
            continue;
        }
        let bytes = module.cost(id).bytes_accessed as f64 * count;
        t.kernels += count;
        t.bytes += bytes;
        let works: Vec<Work> = kernel_body(module, id).into_iter().map(|i| work_of(module, i)).collect();
        let layout = works.contains(&Work::Layout);
        let dtype = works.contains(&Work::Dtype);
        if !layout && !dtype {
            continue;
        }
        if works.contains(&Work::Compute) {
            t.mixed += count;
        } else {
            t.formatting.push(FormattingKernel { id, layout, ms, count, bytes });
        }
    }
    t
}

/// A sum that starts from +0 (an empty `f64` sum is -0, which prints as "-0").
fn sum(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

/// The JAX op behind a kernel, for grouping: its origin's op_name, else "after" the op_name of
/// the first operand that has one (XLA:CPU leaves wrapped converts without metadata).
fn op_label(module: &Module, id: InstrId) -> (String, String) {
    let o = evidence::origin(module, id);
    let source = |i: InstrId| module.source(i).map(|s| format!("{}:{}", s.file, s.line)).unwrap_or_default();
    let name = module.instruction(o).op_name();
    if !name.is_empty() {
        return (name.to_owned(), source(o));
    }
    for &operand in module.instruction(id).operands() {
        let p = evidence::origin(module, operand);
        let name = module.instruction(p).op_name();
        if !name.is_empty() {
            return (format!("(no op_name) after {name}"), source(p));
        }
    }
    ("(no op_name)".to_owned(), String::new())
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

impl Detector for DataFormattingTax {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host)? else { return Ok(()) };
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, &measured, &score, config));
        Ok(())
    }
}

/// What the step's modules show: their kernels, bytes, and the formatting kernels among them.
struct Measured<'a> {
    step_ms: Option<f64>,
    /// Kernels per step.
    kernels: f64,
    /// Bytes the step's kernels access.
    bytes: f64,
    /// Compute kernels with a transpose or cast fused in.
    mixed: f64,
    /// Whether op times were found.
    timed: bool,
    /// (module, kernel) pairs, with the module kept for evidence.
    found: Vec<(&'a Module, FormattingKernel)>,
    /// Formatting kernels per step, their time and their bytes.
    f_count: f64,
    f_ms: f64,
    f_bytes: f64,
    /// What the per-step figures are per.
    tb: TimeBase,
}

/// Tallies the formatting kernels of the step's modules; `None` when there are none.
fn measure(host: &HostProfile) -> Result<Option<Measured<'_>>, Skip> {
    let modules = evidence::step_modules(host);
    if modules.is_empty() {
        return Err(Skip::because("no HLO module could be decoded"));
    }
    let step_ms = host.step_ms();
    let mut kernels = 0.0;
    let mut bytes = 0.0;
    let mut mixed = 0.0;
    let mut timed = false;
    // (module, kernel) pairs, with the module kept for evidence.
    let mut found: Vec<(&Module, FormattingKernel)> = Vec::new();
    for module in modules {
        let times = evidence::op_times(host, module);
        timed |= times.is_some();
        let t = tally(module, times.as_ref());
        kernels += t.kernels;
        bytes += t.bytes;
        mixed += t.mixed;
        found.extend(t.formatting.into_iter().map(|k| (module, k)));
    }
    if found.is_empty() || kernels <= 0.0 {
        return Ok(None);
    }
    let f_count = sum(found.iter().map(|(_, k)| k.count));
    let f_ms = sum(found.iter().map(|(_, k)| k.ms));
    let f_bytes = sum(found.iter().map(|(_, k)| k.bytes));
    let tb = TimeBase::of(host);
    Ok(Some(Measured { step_ms, kernels, bytes, mixed, timed, found, f_count, f_ms, f_bytes, tb }))
}

/// What the formatting costs and which rule (time, structure) it meets.
struct Score {
    impact: Impact,
    kernel_share: f64,
    bytes_share: f64,
    by_time: bool,
    by_structure: bool,
}

/// Decides whether the formatting is worth a finding, by time or by structure.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let th = &config.thresholds.data_formatting_tax;
    let (step_ms, timed, kernels, bytes) = (m.step_ms, m.timed, m.kernels, m.bytes);
    let (f_count, f_ms, f_bytes) = (m.f_count, m.f_ms, m.f_bytes);
    let impact = Impact::of(f_ms, step_ms);
    let kernel_share = share(f_count, kernels);
    let bytes_share = share(f_bytes, bytes);
    let by_time = timed && step_ms.is_some() && impact.pct_of_step >= th.min_pct_of_step;
    let by_structure = kernel_share >= th.min_kernel_share && bytes_share >= th.min_bytes_share;
    if !by_time && !by_structure {
        return None;
    }
    Some(Score { impact, kernel_share, bytes_share, by_time, by_structure })
}

/// Which rule triggered the finding, with its figures and thresholds.
fn trigger_text(m: &Measured<'_>, s: &Score, config: &ScanConfig) -> String {
    let th = &config.thresholds.data_formatting_tax;
    let (impact, kernel_share, bytes_share, timed, tb) = (s.impact, s.kernel_share, s.bytes_share, m.timed, m.tb);
    match (s.by_time, s.by_structure) {
        (true, true) => "time and structure".to_owned(),
        (true, false) => format!(
            "time: formatting kernels take {:.1}% {} (threshold {}%)",
            impact.pct_of_step,
            tb.of_the(),
            th.min_pct_of_step
        ),
        _ => format!(
            "structure: formatting kernels are {:.1}% of the kernels {} (threshold {:.0}%) and move \
                 {:.1}% of {} kernel bytes (threshold {:.0}%){}",
            100.0 * kernel_share,
            tb.per(),
            100.0 * th.min_kernel_share,
            100.0 * bytes_share,
            tb.possessive(),
            100.0 * th.min_bytes_share,
            if timed {
                format!(", while their time on this device is {:.1}% {}", impact.pct_of_step, tb.of_the())
            } else {
                String::new()
            }
        ),
    }
}

/// The evidence: the trigger, the counts and shares, the JAX ops behind the formatting, the costliest kernels.
fn evidence_of(m: &Measured<'_>, s: &Score, config: &ScanConfig) -> Vec<Evidence> {
    let (found, f_count, kernels, mixed, timed, f_ms) = (&m.found, m.f_count, m.kernels, m.mixed, m.timed, m.f_ms);
    let (kernel_share, bytes_share, impact) = (s.kernel_share, s.bytes_share, s.impact);
    let trigger = trigger_text(m, s, config);
    let layout_ms = sum(found.iter().filter(|(_, k)| k.layout).map(|(_, k)| k.ms));
    let dtype_only = sum(found.iter().filter(|(_, k)| !k.layout).map(|(_, k)| k.count));
    let layout_count = sum(found.iter().filter(|(_, k)| k.layout).map(|(_, k)| k.count));
    let tb = m.tb;
    let mut ev = vec![
        Evidence::note(format!("triggered by {trigger}")),
        Evidence::metric("formatting_kernels", format!("formatting kernels {}", tb.per()), f_count, "count"),
        Evidence::metric("kernels", format!("kernels {}", tb.per()), kernels, "count"),
        Evidence::metric("formatting_kernel_share", "formatting share of kernels", 100.0 * kernel_share, "%"),
        Evidence::metric(
            "formatting_bytes_share",
            "formatting share of kernel bytes accessed",
            100.0 * bytes_share,
            "%",
        ),
        Evidence::metric(
            "layout_formatting_kernels",
            "formatting kernels moving data (transpose/copy/reshape)",
            layout_count,
            "count",
        ),
        Evidence::metric(
            "dtype_only_formatting_kernels",
            "formatting kernels converting dtype only",
            dtype_only,
            "count",
        ),
        Evidence::metric(
            "fused_formatting_compute_kernels",
            "compute kernels with a transpose or cast fused in",
            mixed,
            "count",
        ),
    ];
    if timed {
        ev.push(Evidence::metric("formatting_time", format!("formatting time {}", tb.per()), f_ms, "ms"));
        ev.push(Evidence::metric("formatting_share", "formatting share of step", impact.pct_of_step, "%"));
        ev.push(Evidence::metric(
            "layout_formatting_time",
            format!("layout-moving formatting time {}", tb.per()),
            layout_ms,
            "ms",
        ));
    }
    // The JAX ops behind the formatting, by time (then count) per op_name and source line.
    let mut by_origin: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for (module, k) in found {
        let e = by_origin.entry(op_label(module, k.id)).or_default();
        e.0 += k.ms;
        e.1 += k.count;
    }
    let mut origins: Vec<_> = by_origin.into_iter().collect();
    origins.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(b.1.1.total_cmp(&a.1.1)).then(a.0.cmp(&b.0)));
    for ((name, source), (ms, count)) in origins.iter().take(6) {
        let at = if source.is_empty() { String::new() } else { format!(" at {source}") };
        ev.push(Evidence::note(format!("{name}{at}: {count:.0} formatting kernel(s) {}, {ms:.3} ms", tb.per())));
    }
    let mut costly: Vec<&(&Module, FormattingKernel)> = found.iter().collect();
    costly.sort_by(|a, b| {
        b.1.ms
            .total_cmp(&a.1.ms)
            .then(b.1.bytes.total_cmp(&a.1.bytes))
            .then(a.0.program_id().cmp(&b.0.program_id()))
            .then(a.1.id.cmp(&b.1.id))
    });
    ev.extend(costly.iter().take(8).map(|(m, k)| evidence::kernel_instruction(m, k.id)));
    ev
}

/// The finding: how many kernels only reformat data, their share, and the rule that triggered.
fn describe(detector: &DataFormattingTax, m: &Measured<'_>, s: &Score, config: &ScanConfig) -> Finding {
    let (found, f_count, timed, f_ms, tb) = (&m.found, m.f_count, m.timed, m.f_ms, m.tb);
    let (kernel_share, bytes_share, impact, by_time, by_structure) =
        (s.kernel_share, s.bytes_share, s.impact, s.by_time, s.by_structure);
    let dtype_only = sum(found.iter().filter(|(_, k)| !k.layout).map(|(_, k)| k.count));
    let layout_count = sum(found.iter().filter(|(_, k)| k.layout).map(|(_, k)| k.count));
    // Under 2 % of the step it is minor only when time alone (not structure) triggered it.
    let severity = match Severity::from_impact(impact.pct_of_step, META.severity) {
        Severity::P2 if !timed || by_structure => META.severity,
        severity => severity,
    };
    let what = format!(
        "{f_count:.0} kernel(s) {per} only reformat data ({layout_count:.0} transpose/copy/reshape, \
             {dtype_only:.0} dtype conversion only){}; they are {:.0}% of the kernels and move {:.0}% of the bytes \
             {the_steps} kernels access. Triggered by {}.",
        if timed {
            format!(", {f_ms:.3} ms {} ({:.1}% {})", tb.per(), impact.pct_of_step, tb.of_the())
        } else {
            String::new()
        },
        100.0 * kernel_share,
        100.0 * bytes_share,
        if by_time && by_structure {
            "time and structure"
        } else if by_time {
            "time"
        } else {
            "structure"
        },
        per = tb.per(),
        the_steps = tb.possessive(),
    );
    Finding::new(detector, severity, what, evidence_of(m, s, config), impact)
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;

    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_transposes_and_casts_of_the_data_formatting_trace() {
        let findings = run_on("data_formatting_tax", &testdata("corpus/data_formatting"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // 16 of the 92 kernels per step only reformat: x.T copies, wrapped converts, f32->bf16->f32
        // round trips and convert+transpose fusions; on 2 CPU cores they take ~1 ms of ~20 ms.
        assert_eq!(metric(f, "formatting kernels per step"), 16.0, "{f:#?}");
        assert_eq!(metric(f, "kernels per step"), 92.0);
        assert!(metric(f, "formatting share of kernel bytes accessed") > 12.0, "{f:#?}");
        assert!(f.what.contains("Triggered by structure"), "{}", f.what);
        assert!(f.impact.ms_per_step > 0.5 && f.impact.ms_per_step < 2.0, "{:?}", f.impact);
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = text.join("\n");
        assert!(all.contains("convert_element_type"), "{all}");
        assert!(all.contains("copy_bitcast_fusion.10"), "{all}");
        assert!(all.contains("wrapped_convert"), "{all}");
        assert!(all.contains("convert_convert_fusion") || all.contains("transpose_copy_fusion"), "{all}");
    }

    #[test]
    fn baseline_and_clean_profiles_have_no_formatting_tax() {
        for dir in ["corpus/data_formatting_baseline", "corpus/clean", "real/remat", "real/sharded_collectives"] {
            let findings = run_on("data_formatting_tax", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }
}

#[cfg(test)]
mod hlo_detector_tests {
    use crate::testing::{report_of, testdata};

    #[test]
    fn hlo_detectors_skip_profiles_without_hlo() {
        // The TPU-shaped synthetic fixtures carry no HloProto: every HLO detector says so.
        for id in [
            "data_formatting_tax",
            "layout_mismatch_copy",
            "unfused_reshape",
            "unnecessary_convert_reduce",
            "padding_waste",
        ] {
            let report = report_of(id, &testdata("tpu/tpu_basic"));
            assert!(report.findings.is_empty(), "{id}: {report:#?}");
            assert_eq!(report.skipped.len(), 1, "{id}: {report:#?}");
            assert_eq!(report.skipped[0].reason, "the profile carries no HLO module");
        }
    }
}
