//! The one list of detectors. Adding a detector: write `detectors/<id>.rs`, add its `mod` line to
//! `detectors/mod.rs`, and list it here once. The tests at the bottom check the list as a whole.

use crate::detector::AnyDetector;
use crate::detectors;
use xlens_roofline::Framework;

/// Every detector, in catalogue order.
pub static DETECTORS: &[&dyn AnyDetector] = &[
    // Device timeline.
    &detectors::exposed_collective::ExposedCollective,
    &detectors::exposed_async_copy::ExposedAsyncCopy,
    &detectors::vpu_bound::VpuBound,
    &detectors::straggler_core::StragglerCore,
    &detectors::dcn_exposed_reduce::DcnExposedReduce,
    &detectors::sparsecore_overflow::SparsecoreOverflow,
    &detectors::hbm_pressure::HbmPressure,
    &detectors::low_utilization::LowUtilization,
    &detectors::device_idle::DeviceIdle,
    &detectors::launch_bound::LaunchBound,
    // HLO.
    &detectors::data_formatting_tax::DataFormattingTax,
    &detectors::layout_mismatch_copy::LayoutMismatchCopy,
    &detectors::unfused_reshape::UnfusedReshape,
    &detectors::unnecessary_convert_reduce::UnnecessaryConvertReduce,
    &detectors::padding_waste::PaddingWaste,
    &detectors::donation_miss::DonationMiss,
    &detectors::unintended_remat::UnintendedRemat,
    &detectors::allgather_duplication::AllgatherDuplication,
    &detectors::replicated_activations::ReplicatedActivations,
    &detectors::wrong_mesh_mapping::WrongMeshMapping,
    // Host timeline.
    &detectors::recompilation::Recompilation,
    &detectors::input_starvation::InputStarvation,
    &detectors::barrier_in_loop::BarrierInLoop,
    &detectors::profile_during_warmup::ProfileDuringWarmup,
    &detectors::host_callback_stall::HostCallbackStall,
    &detectors::truncated_capture::TruncatedCapture,
];

/// The detectors whose findings are about the capture, not the program (a capture of warm-up,
/// one that cuts steps short), with what the verdict says of them (what the capture is, and what
/// to do): the other findings measure what they describe, so they lead the findings of their
/// severity and the verdict names them first.
pub(crate) const CAPTURE_CHECKS: &[(&str, &str, &str)] = &[
    ("profile_during_warmup", "the capture holds warm-up", "capture later steps"),
    ("truncated_capture", "the capture cuts steps short", "the figures of those steps are partial"),
];

/// True for a finding of a [`CAPTURE_CHECKS`] detector.
pub(crate) fn is_capture_check(id: &str) -> bool {
    CAPTURE_CHECKS.iter().any(|(c, _, _)| *c == id)
}

/// The detector with this id.
pub fn detector(id: &str) -> Option<&'static dyn AnyDetector> {
    DETECTORS.iter().copied().find(|d| d.id() == id)
}

/// The detector catalogue as Markdown, generated from the registry (kept in `docs/detectors.md`
/// by a test, so the documentation cannot drift from the code).
pub fn catalogue_markdown() -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "# Detector catalogue\n\nGenerated from `faults/src/registry.rs` by `cargo test -p xlens-faults --test catalogue` \
         (set `XLENS_BLESS=1` to rewrite). Thresholds live in `xlens_faults::config::Thresholds`. Each fix is \
         framework-neutral; a finding on a JAX, TensorFlow or PyTorch/XLA profile adds the line for that framework \
         listed under it (`In TensorFlow: …`), and one on a profile of an unknown framework reads the neutral fix \
         alone.\n\n\
         | id | title | default severity | needs |\n|---|---|---|---|\n",
    );
    for d in DETECTORS {
        let needs: Vec<String> = d.needs().iter().map(|n| format!("{n:?}")).collect();
        let _ = writeln!(s, "| `{}` | {} | {} | {} |", d.id(), d.title(), d.severity(), needs.join(", "));
    }
    for d in DETECTORS {
        let doc = d.doc();
        let _ = write!(
            s,
            "\n## `{}`: {}\n\n**What it detects.** {}\n\n**Why it matters.** {}\n\n**Evidence.** {}\n\n\
             **Thresholds.** {}\n\n**Fix.** {}\n",
            d.id(),
            d.title(),
            doc.detects,
            doc.why,
            doc.evidence,
            doc.thresholds,
            doc.fix
        );
        // What the fix adds for each framework's users (a profile of an unknown framework gets
        // the core above alone).
        let lines: Vec<(Framework, &str)> = [Framework::Jax, Framework::TensorFlow, Framework::PyTorchXla]
            .into_iter()
            .map(|f| (f, doc.fix_lines.line(f)))
            .filter(|(_, line)| !line.is_empty())
            .collect();
        if !lines.is_empty() {
            s.push('\n');
            for (f, line) in lines {
                let _ = writeln!(s, "- In {}: {line}", f.label());
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn ids_are_unique_and_snake_case() {
        let mut seen = BTreeSet::new();
        for d in DETECTORS {
            assert!(seen.insert(d.id()), "duplicate id {}", d.id());
            assert!(
                d.id().bytes().all(|b| b.is_ascii_lowercase() || b == b'_') && !d.id().starts_with('_'),
                "{} is not snake_case",
                d.id()
            );
        }
    }

    #[test]
    fn every_detector_documents_every_section() {
        for d in DETECTORS {
            let doc = d.doc();
            for (section, text) in [
                ("detects", doc.detects),
                ("why", doc.why),
                ("evidence", doc.evidence),
                ("thresholds", doc.thresholds),
                ("fix", doc.fix),
            ] {
                assert!(text.trim().len() >= 20, "{}: doc section `{section}` is missing or too short", d.id());
            }
            assert!(!d.title().is_empty() && !d.needs().is_empty(), "{}", d.id());
        }
    }
}
