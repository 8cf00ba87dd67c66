//! `unfused_reshape`: transposes and reshapes that run as kernels of their own right before or
//! after a matmul, where the compiler could have folded them into the matmul's operand or output.

use std::collections::{BTreeMap, BTreeSet};

use xlens_hlo::{InstrId, Module, Opcode};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;
use xlens_hlo::layout::{Work, is_layout_only_copy, kernel_body, work_of};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct UnfusedReshape;

const META: DetectorMeta = DetectorMeta {
    id: "unfused_reshape",
    title: "Transposes and reshapes left as kernels next to matmuls",
    severity: Severity::P1,
    needs: &[Need::Hlo],
    doc: DetectorDoc {
        detects: "Kernels of the step (not inside a larger fusion) that only transpose or reshape data (a bare \
                  transpose/reshape, or a fusion whose body only moves data, possibly with a cast) and whose operand \
                  comes from, or whose result feeds, a matmul kernel: a dot, a convolution, or a fusion containing \
                  one. Copies that only change the layout are left to `layout_mismatch_copy`.",
        why: "A matmul can read its operands in any dimension order (dot_general's dimension numbers) and a fusion \
              can write its output transposed: when the transpose stays a kernel of its own, the array makes an \
              extra round trip through memory and the step pays a kernel for it. It usually means the layout the \
              model asks for (einsum output order, head split/merge, explicit `.T`) fights the one the matmul wants, \
              or that the backend could not fuse it.",
        evidence: "Standalone transposes/reshapes next to a matmul per step, their time per step and % of the step, and \
                   for the costliest: the kernel as an HLO instruction with op_name and source line, its shapes, and \
                   the matmul it feeds or follows.",
        thresholds: "Reported when there are at least `unfused_reshape.min_count` (default 1) such kernels per step and, \
                     with an op timeline, they take at least `unfused_reshape.min_pct_of_step` (default 5) % of the \
                     step; without an op timeline, on the count alone (severity P2). The impact is their time.",
        fix: "Let the matmul absorb the permutation: write the matmul with the dimension order you need instead of \
              transposing before or after it, keep head split/merge as reshapes of the minor dimension, and drop \
              explicit transposes between matmuls. On TPU, check that the transpose sits inside the convolution \
              fusion in the optimized HLO.",
        fix_lines: FixLines {
            jax: "e.g. `jnp.einsum('bthd,bshd->bhts', q, k)` rather than transposing q and k to bhtd first, and no \
                  `.T` between matmuls.",
            tensorflow: "`tf.einsum('bthd,bshd->bhts', q, k)` rather than `tf.transpose` of q and k first, or \
                         `tf.matmul(..., transpose_b=True)`.",
            pytorch_xla: "`torch.einsum('bthd,bshd->bhts', q, k)` rather than `.permute()`/`.transpose()` of q and k \
                          first.",
        },
    },
};

fn is_matmul(module: &Module, id: InstrId) -> bool {
    kernel_body(module, id).iter().any(|&i| matches!(module.instruction(i).opcode(), Opcode::Dot | Opcode::Convolution))
}

/// The kernels an instruction's value comes from, looking through bitcasts and tuple plumbing.
fn producers(module: &Module, id: InstrId) -> Vec<InstrId> {
    let mut out = Vec::new();
    let mut stack: Vec<InstrId> = module.instruction(id).operands().to_vec();
    let mut seen = BTreeSet::new();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) || seen.len() > 64 {
            continue;
        }
        let instr = module.instruction(i);
        match instr.opcode() {
            Opcode::Bitcast | Opcode::GetTupleElement | Opcode::Tuple => stack.extend(instr.operands()),
            _ => out.push(i),
        }
    }
    out
}

/// The kernels that consume an instruction's value, looking through bitcasts and tuple plumbing.
fn consumers(module: &Module, id: InstrId) -> Vec<InstrId> {
    let mut out = Vec::new();
    let mut stack: Vec<InstrId> = module.instruction(id).users().to_vec();
    let mut seen = BTreeSet::new();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) || seen.len() > 64 {
            continue;
        }
        let instr = module.instruction(i);
        match instr.opcode() {
            Opcode::Bitcast | Opcode::GetTupleElement | Opcode::Tuple => stack.extend(instr.users()),
            _ => out.push(i),
        }
    }
    out
}

/// A standalone transpose or reshape kernel next to a matmul.
#[derive(Debug)]
struct Unfused<'m> {
    module: &'m Module,
    kernel: InstrId,
    /// Matmul kernels it reads from.
    after: Vec<InstrId>,
    /// Matmul kernels it feeds.
    before: Vec<InstrId>,
    ms: f64,
    count: f64,
}

fn unfused<'m>(module: &'m Module, times: Option<&BTreeMap<String, evidence::OpTime>>) -> Vec<Unfused<'m>> {
    let mut out = Vec::new();
    for kernel in evidence::kernels(module) {
        let body = kernel_body(module, kernel);
        let works: Vec<Work> = body.iter().map(|&i| work_of(module, i)).collect();
        if works.contains(&Work::Compute) {
            continue;
        }
        // A data-moving transpose or reshape (a transpose materialised by a copy counts; a copy
        // that only changes the layout does not).
        let reshapes = body.iter().zip(&works).any(|(&i, w)| *w == Work::Layout && !is_layout_only_copy(module, i));
        if !reshapes {
            continue;
        }
        let after: Vec<InstrId> = producers(module, kernel).into_iter().filter(|&p| is_matmul(module, p)).collect();
        let before: Vec<InstrId> = consumers(module, kernel).into_iter().filter(|&c| is_matmul(module, c)).collect();
        if after.is_empty() && before.is_empty() {
            continue;
        }
        let (ms, count) = match times {
            Some(t) => t.get(module.instruction(kernel).name()).map_or((0.0, 0.0), |o| (o.ms, o.count)),
            None => (0.0, 1.0),
        };
        if count <= 0.0 {
            continue;
        }
        out.push(Unfused { module, kernel, after, before, ms, count });
    }
    out
}

fn names(module: &Module, ids: &[InstrId]) -> String {
    let mut v: Vec<&str> = ids.iter().map(|&i| module.instruction(i).name()).collect();
    v.sort_unstable();
    v.dedup();
    v.join(", ")
}

impl Detector for UnfusedReshape {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host)?;
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, &measured, &score));
        Ok(())
    }
}

/// What the step's modules show: the standalone transposes/reshapes next to a matmul.
struct Measured<'a> {
    found: Vec<Unfused<'a>>,
    /// The step time, when the kernels are timed.
    step_ms: Option<f64>,
    /// Kernels per step, and their time.
    count: f64,
    ms: f64,
    /// What the per-step figures are per.
    tb: TimeBase,
}

/// Finds the unfused transposes/reshapes of every step module.
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let modules = evidence::step_modules(host);
    if modules.is_empty() {
        return Err(Skip::because("no HLO module could be decoded"));
    }
    let mut found: Vec<Unfused<'_>> = Vec::new();
    let mut timed = false;
    for module in modules {
        let times = evidence::op_times(host, module);
        timed |= times.is_some();
        found.extend(unfused(module, times.as_ref()));
    }
    let step_ms = host.step_ms().filter(|_| timed);
    let count = found.iter().map(|u| u.count).fold(0.0, |a, b| a + b);
    let ms = found.iter().map(|u| u.ms).fold(0.0, |a, b| a + b);
    Ok(Measured { found, step_ms, count, ms, tb: TimeBase::of(host) })
}

/// Decides whether the kernels are many and costly enough; their impact.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Impact> {
    let th = &config.thresholds.unfused_reshape;
    if m.found.is_empty() || m.count < th.min_count as f64 {
        return None;
    }
    let impact = Impact::of(m.ms, m.step_ms);
    if m.step_ms.is_some() && impact.pct_of_step < th.min_pct_of_step {
        return None;
    }
    Some(impact)
}

/// The evidence: the counts and time, and the costliest kernels with what they read and feed.
fn evidence_of(m: &Measured<'_>, impact: Impact, feeding: f64) -> Vec<Evidence> {
    let (step_ms, count, ms, tb) = (m.step_ms, m.count, m.ms, m.tb);
    let mut ev = vec![
        Evidence::metric(
            "standalone_reshapes",
            format!("standalone transposes/reshapes next to a matmul {}", tb.per()),
            count,
            "count",
        ),
        Evidence::metric("reshapes_feeding_matmul", "of which feed a matmul", feeding, "count"),
    ];
    if step_ms.is_some() {
        ev.push(Evidence::metric("reshape_time", format!("their time {}", tb.per()), ms, "ms"));
        ev.push(Evidence::metric("reshape_share", "their share of step", impact.pct_of_step, "%"));
    } else {
        ev.push(Evidence::note("the profile has no op timeline or steps: the kernels are counted once each"));
    }
    let mut found: Vec<&Unfused<'_>> = m.found.iter().collect();
    found.sort_by(|a, b| {
        b.ms.total_cmp(&a.ms).then(a.module.program_id().cmp(&b.module.program_id())).then(a.kernel.cmp(&b.kernel))
    });
    for u in found.iter().take(6) {
        let m = u.module;
        let k = m.instruction(u.kernel);
        let from: Vec<String> = k.operands().iter().map(|&o| m.instruction(o).shape().to_string()).collect();
        let mut place = Vec::new();
        if !u.after.is_empty() {
            place.push(format!("reads the output of {}", names(m, &u.after)));
        }
        if !u.before.is_empty() {
            place.push(format!("feeds {}", names(m, &u.before)));
        }
        let timing = if step_ms.is_some() { format!(", {:.3} ms {}", u.ms, tb.per()) } else { String::new() };
        ev.push(Evidence::note(format!(
            "{}: {} -> {}; {}{timing}",
            k.name(),
            from.join(", "),
            k.shape(),
            place.join(" and ")
        )));
        ev.push(evidence::kernel_instruction(m, u.kernel));
    }
    ev
}

/// The finding: how many kernels run on their own next to a matmul, and their time.
fn describe(detector: &UnfusedReshape, m: &Measured<'_>, impact: &Impact) -> Finding {
    let (step_ms, count, ms, impact, tb) = (m.step_ms, m.count, m.ms, *impact, m.tb);
    let feeding = m.found.iter().filter(|u| !u.before.is_empty()).map(|u| u.count).fold(0.0, |a, b| a + b);
    let severity = match step_ms {
        None => Severity::P2,
        Some(_) => Severity::from_impact(impact.pct_of_step, META.severity),
    };
    let what = format!(
        "{count:.0} transpose/reshape kernel(s) {} run on their own next to a matmul ({feeding:.0} feed one){}.",
        tb.per(),
        if step_ms.is_some() {
            format!(", taking {ms:.3} ms ({:.1}% {})", impact.pct_of_step, tb.of_the())
        } else {
            String::new()
        }
    );
    Finding::new(detector, severity, what, evidence_of(m, impact, feeding), impact)
}

#[cfg(test)]
mod tests {

    use crate::config::ScanConfig;
    use crate::finding::Finding;
    use crate::profile::Profile;
    use crate::scan::scan;
    use crate::testing::{run_on, testdata};

    fn with_threshold(dir: &str, pct: f64) -> Vec<Finding> {
        let mut config = ScanConfig::only("unfused_reshape");
        config.thresholds.unfused_reshape.min_pct_of_step = pct;
        let profile = Profile::from_session(xlens_testkit::open_session(testdata(dir)).unwrap());
        let report = scan(&profile, &config);
        assert!(report.skipped.is_empty(), "{report:#?}");
        report.findings
    }

    #[test]
    fn finds_the_transpose_of_x_before_the_einsum_matmul() {
        // einsum('btd,df->ftb') makes XLA transpose the activations (16x64x128 -> 128x1024) in a
        // kernel of their own before each layer's first dot: under 1 % of a 2-core CPU step, far
        // below the default 5 %, so the pattern is checked with a low threshold.
        assert!(run_on("unfused_reshape", &testdata("corpus/data_formatting")).is_empty());
        let findings = with_threshold("corpus/data_formatting", 0.3);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("3 transpose/reshape kernel(s) per step"), "{}", f.what);
        let all: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        assert!(
            all.contains("copy_bitcast_fusion.10: f32[16,64,128]{2,1,0} -> f32[128,1024]{1,0}; feeds dot"),
            "{all}"
        );
        assert!(f.impact.pct_of_step > 0.3 && f.impact.pct_of_step < 5.0, "{:?}", f.impact);
    }

    #[test]
    fn finds_the_attention_head_transposes_between_matmuls_below_the_default_threshold() {
        // The clean transformer splits and merges heads with transposes between the projection
        // and attention matmuls: 14 kernels, ~3.6 % of the step, under the 5 % default.
        assert!(run_on("unfused_reshape", &testdata("corpus/clean")).is_empty());
        let findings = with_threshold("corpus/clean", 1.0);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("14 transpose/reshape kernel(s) per step"), "{}", f.what);
        let all: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        assert!(all.contains("transpose_copy_fusion.7: f32[256,128]{1,0} -> f32[8,4,32,32]{3,2,1,0}"), "{all}");
        assert!(all.contains("jit(train_step)/jvp()/reshape at "), "{all}");
    }

    #[test]
    fn clean_and_baseline_profiles_have_no_unfused_reshape() {
        for dir in
            ["corpus/clean", "corpus/data_formatting_baseline", "real/remat_baseline", "real/sharded_collectives"]
        {
            let findings = run_on("unfused_reshape", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }
}
