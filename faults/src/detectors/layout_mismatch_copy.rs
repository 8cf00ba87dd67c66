//! `layout_mismatch_copy`: copies that only change the layout of an array (same dimensions, same
//! element type, another `minor_to_major`), which XLA inserts when a producer's layout does not
//! match what a consumer needs.
//!
//! The layout questions (does an op move data, is a copy layout-only) are `xlens_hlo::layout`'s.

use std::collections::BTreeMap;

use xlens_hlo::layout::{Work, is_layout_only_copy, kernel_body, outside_fusion, work_of};
use xlens_hlo::{InstrId, Module};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct LayoutMismatchCopy;

const META: DetectorMeta = DetectorMeta {
    id: "layout_mismatch_copy",
    title: "Copies that only change an array's layout",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Copies whose operand and result differ only in layout: same dimensions and element type, another \
                  `minor_to_major` order (ignoring dimensions of size 1), in the same memory space; standalone copy \
                  kernels and copies fused into other kernels alike. A copy that materialises a transpose (XLA:CPU \
                  writes a transpose as a layout-only `transpose` plus a copy) is a transpose the program asked for \
                  and is left to `data_formatting_tax` / `unfused_reshape`.",
        why: "XLA inserts such a copy when the layout an op produces is not the one its consumer needs (a collective \
              or custom call that returns column-major data feeding a row-major dot, an entry parameter in the wrong \
              layout): the whole array is read and rewritten in another order, with strided accesses, for no \
              computation, on every step.",
        evidence: "Layout-only copies per step, how many run as kernels of their own, their time per step and % of the \
                   step (a copy fused into a larger kernel gets the kernel's time in proportion of the bytes it moves), \
                   the bytes they read and write, each copy's layouts with the instruction that produced the operand, and the \
                   copies as HLO instructions with op_name and source line.",
        thresholds: "Reported when layout-only copies take at least `layout_mismatch_copy.min_pct_of_step` (default 1) \
                     % of the step and there are at least `layout_mismatch_copy.min_count` (default 1) of them per \
                     step; without an op timeline or steps, when there are at least `min_count` of them in the step's \
                     programs (impact then unknown, severity P2).",
        fix: "Make producer and consumer agree on the layout: gather or reduce along the major dimension (or \
              transpose the smaller operand before the collective instead of the gathered result), contract matmuls \
              over the dimension the operand already has minor, keep weights stored in the layout their matmul \
              reads, and let the compiler pick the layout of the step's arguments instead of forcing the default \
              row-major one.",
        fix_lines: FixLines {
            jax: "contract `dot_general` over the minor dimension, and let XLA pick the layout of jitted arguments \
                  (`jax.jit(..., in_shardings=...)` with `Layout(AUTO)` from `jax.experimental.layout`).",
            tensorflow: "keep variables in the shape their `tf.matmul` reads (`transpose_a`/`transpose_b` rather \
                         than `tf.transpose`) in the `jit_compile=True` step.",
            pytorch_xla: "store weights in the order `F.linear`/`torch.matmul` reads them, and avoid \
                          `.permute()`/`.t()` of a tensor right before a collective.",
        },
    },
};

/// A kernel with layout-only copies in it.
#[derive(Debug)]
struct CopyKernel<'m> {
    module: &'m Module,
    kernel: InstrId,
    copies: Vec<InstrId>,
    /// The kernel is nothing but the copies.
    standalone: bool,
    /// Time per step given to the copies (ms).
    ms: f64,
    /// Executions per step.
    count: f64,
    /// Bytes the copies read and write per step.
    bytes: f64,
}

fn copy_kernels<'m>(module: &'m Module, times: Option<&BTreeMap<String, evidence::OpTime>>) -> Vec<CopyKernel<'m>> {
    let mut out = Vec::new();
    for kernel in evidence::kernels(module) {
        let body = kernel_body(module, kernel);
        let copies: Vec<InstrId> = body.iter().copied().filter(|&i| is_layout_only_copy(module, i)).collect();
        if copies.is_empty() {
            continue;
        }
        let standalone = body.iter().all(|&i| copies.contains(&i) || work_of(module, i) == Work::Neutral);
        let (kernel_ms, count) = match times {
            Some(t) => t.get(module.instruction(kernel).name()).map_or((0.0, 0.0), |o| (o.ms, o.count)),
            None => (0.0, 1.0),
        };
        if count <= 0.0 {
            continue;
        }
        let copy_bytes: f64 =
            copies.iter().map(|&c| 2.0 * module.instruction(c).shape().logical_bytes() as f64).fold(0.0, |a, b| a + b);
        let kernel_bytes = module.cost(kernel).bytes_accessed as f64;
        let part = if standalone || kernel_bytes <= 0.0 { 1.0 } else { (copy_bytes / kernel_bytes).min(1.0) };
        out.push(CopyKernel {
            module,
            kernel,
            copies,
            standalone,
            ms: kernel_ms * part,
            count,
            bytes: copy_bytes * count,
        });
    }
    out
}

impl Detector for LayoutMismatchCopy {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let th = &config.thresholds.layout_mismatch_copy;
        let mut found = gather(host)?;
        let Some(totals) = score(&found, th, host.step_ms()) else { return Ok(()) };
        let severity = match totals.step_ms {
            None => Severity::P2,
            Some(_) => Severity::from_impact(totals.impact.pct_of_step, META.severity),
        };
        let (what, ev) = describe(&mut found.0, &totals, TimeBase::of(host));
        out.push(Finding::new(self, severity, what, ev, totals.impact));
        Ok(())
    }
}

/// The layout-only copies of every program the steps ran, and whether their time is known.
fn gather(host: &HostProfile) -> Result<(Vec<CopyKernel<'_>>, bool), Skip> {
    let modules = evidence::step_modules(host);
    if modules.is_empty() {
        return Err(Skip::because("no HLO module could be decoded"));
    }
    let mut found: Vec<CopyKernel<'_>> = Vec::new();
    let mut timed = false;
    for module in modules {
        let times = evidence::op_times(host, module);
        timed |= times.is_some();
        found.extend(copy_kernels(module, times.as_ref()));
    }
    Ok((found, timed))
}

/// What the copies add up to per step.
struct Totals {
    /// The step time, when the copies are timed.
    step_ms: Option<f64>,
    copies_per_step: f64,
    standalone: f64,
    bytes: f64,
    ms: f64,
    impact: Impact,
}

/// The copies' totals, when they pass the thresholds.
fn score(
    (found, timed): &(Vec<CopyKernel<'_>>, bool),
    th: &crate::config::LayoutMismatchCopy,
    step_ms: Option<f64>,
) -> Option<Totals> {
    let step_ms = step_ms.filter(|_| *timed);
    let copies_per_step = found.iter().map(|k| k.copies.len() as f64 * k.count).fold(0.0, |a, b| a + b);
    if found.is_empty() || copies_per_step < th.min_count as f64 {
        return None;
    }
    let ms = found.iter().map(|k| k.ms).fold(0.0, |a, b| a + b);
    let impact = Impact::of(ms, step_ms);
    if step_ms.is_some() && impact.pct_of_step < th.min_pct_of_step {
        return None;
    }
    let standalone = found.iter().filter(|k| k.standalone).map(|k| k.count).fold(0.0, |a, b| a + b);
    let bytes = found.iter().map(|k| k.bytes).fold(0.0, |a, b| a + b);
    Some(Totals { step_ms, copies_per_step, standalone, bytes, ms, impact })
}

/// The finding's text and evidence: the totals, then the costliest kernels' copies.
fn describe(found: &mut [CopyKernel<'_>], t: &Totals, tb: TimeBase) -> (String, Vec<Evidence>) {
    let mut ev = vec![
        Evidence::metric("layout_copies", format!("layout-only copies {}", tb.per()), t.copies_per_step, "count"),
        Evidence::metric(
            "standalone_copy_kernels",
            format!("standalone copy kernels {}", tb.per()),
            t.standalone,
            "count",
        ),
        Evidence::metric("layout_copy_bytes", format!("bytes read and written {}", tb.per()), t.bytes, "bytes"),
    ];
    if t.step_ms.is_some() {
        ev.push(Evidence::metric("layout_copy_time", format!("layout copy time {}", tb.per()), t.ms, "ms"));
        ev.push(Evidence::metric("layout_copy_share", "layout copy share of step", t.impact.pct_of_step, "%"));
    } else {
        ev.push(Evidence::note(
            "the profile has no op timeline or steps: the copies are counted once each, their time is unknown",
        ));
    }
    found.sort_by(|a, b| {
        b.ms.total_cmp(&a.ms)
            .then(b.bytes.total_cmp(&a.bytes))
            .then(a.module.program_id().cmp(&b.module.program_id()))
            .then(a.kernel.cmp(&b.kernel))
    });
    for k in found.iter().take(6) {
        for &c in k.copies.iter().take(2) {
            ev.push(copy_note(k, c, t.step_ms.is_some(), tb));
            ev.push(evidence::instruction(k.module, c));
        }
    }
    let what = format!(
        "{:.0} copy(ies) {per} only change the layout of their array ({:.0} as kernels of their own), reading \
         and writing {:.1} MiB {per}{}.",
        t.copies_per_step,
        t.standalone,
        t.bytes / (1024.0 * 1024.0),
        if t.step_ms.is_some() {
            format!(" in {:.3} ms ({:.1}% {})", t.ms, t.impact.pct_of_step, tb.of_the())
        } else {
            String::new()
        },
        per = tb.per(),
    );
    (what, ev)
}

/// One copy: its shapes, where it runs and where its operand comes from.
fn copy_note(k: &CopyKernel<'_>, c: InstrId, timed: bool, tb: TimeBase) -> Evidence {
    let m = k.module;
    let copy = m.instruction(c);
    let from = m.instruction(copy.operands()[0]).shape();
    let producer = m.instruction(outside_fusion(m, copy.operands()[0]));
    let kernel = m.instruction(k.kernel);
    let place = if k.standalone {
        format!("kernel {} of its own", kernel.name())
    } else {
        format!("fused into {}", kernel.name())
    };
    let timing = if timed { format!(", {:.3} ms {}", k.ms, tb.per()) } else { String::new() };
    Evidence::note(format!(
        "{}: {} -> {} ({place}{timing}); the operand comes from {} ({})",
        copy.name(),
        from,
        copy.shape(),
        producer.name(),
        producer.opcode_name()
    ))
}

#[cfg(test)]
mod tests {
    use crate::finding::Evidence;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_copies_after_the_all_gathers() {
        let findings = run_on("layout_mismatch_copy", &testdata("real/sharded_collectives"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Six all-gathers return column-major weights; a wrapped copy per weight re-lays them
        // row-major for the dots: 6 kernels x 8 devices, 512 KiB read + written each.
        let metric = |name: &str| {
            f.evidence.iter().find_map(|e| match e {
                Evidence::Metric { name: n, value, .. } if n == name => Some(*value),
                _ => None,
            })
        };
        assert_eq!(metric("layout-only copies per step"), Some(6.0), "{f:#?}");
        assert_eq!(metric("standalone copy kernels per step"), Some(6.0));
        assert_eq!(metric("bytes read and written per step"), Some(6.0 * 2.0 * 512.0 * 1024.0));
        assert!(f.impact.pct_of_step > 1.0 && f.impact.pct_of_step < 20.0, "{:?}", f.impact);
        let all: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        assert!(all.contains("f32[256,512]{0,1} -> f32[256,512]{1,0}"), "{all}");
        assert!(all.contains("the operand comes from all_gather.42 (all-gather)"), "{all}");
        assert!(all.contains("all_gather at "), "{all}");
    }

    #[test]
    fn transposes_asked_for_are_not_layout_mismatches() {
        // Clean and the data-formatting traces materialise transposes as transpose + copy: none
        // of those copies is a layout mismatch.
        for dir in ["corpus/clean", "corpus/data_formatting", "corpus/data_formatting_baseline", "real/remat"] {
            let findings = run_on("layout_mismatch_copy", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }

    #[test]
    fn small_layout_copies_stay_below_the_threshold() {
        // The sharded baseline has 8 small layout copies around its collectives: 0.3 % of the step.
        let report =
            crate::testing::report_of("layout_mismatch_copy", &testdata("corpus/sharded_collectives_baseline"));
        assert!(report.skipped.is_empty() && report.findings.is_empty(), "{report:#?}");
    }
}
