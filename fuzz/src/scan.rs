//! Fuzz body for the whole scan: decode, every detector, every renderer and the frames.
//!
//! Invariants: nothing panics (decode errors are fine); the JSON report parses back and agrees
//! with the report; the text report holds no control character other than `'\n'` (behind
//! [`CHECK_TEXT_CONTROL_CHARS`]); the HTML report is one whole document; the frames build, with a
//! row per skipped detector and at least a row per finding.

use bytes::Bytes;
use xlens_faults::{HostProfile, Profile, Report, ScanConfig, scan};
use xlens_report::{frame, render};
use xlens_xplane::Space;

/// Whether [`run`] asserts that the text report holds no control character but `'\n'`.
///
/// Names come from the profile, so a hostile event name with `\t`, `\r` or `\x1b` in it reaches
/// the report; the text renderer escapes them (`render::printable`). Turn this off only while
/// that escaping is missing.
pub const CHECK_TEXT_CONTROL_CHARS: bool = true;

/// Decodes `data` as one host, scans it, renders the report every way and builds its frames.
pub fn run(data: &[u8]) {
    let Ok(space) = Space::parse(Bytes::copy_from_slice(data)) else {
        return;
    };
    let profile = Profile::new(None, vec![HostProfile::new("fuzz", space)]);
    let report = scan(&profile, &ScanConfig::default());
    check_report(&report);
    check_frames(&profile, &report);
}

/// The renderers' invariants, on a report.
pub fn check_report(report: &Report) {
    let json = render::json(report);
    let value: serde_json::Value = match serde_json::from_str(&json) {
        Ok(value) => value,
        Err(e) => panic!("JSON report does not parse back: {e}\n{json}"),
    };
    assert_eq!(value["status"].as_str(), Some(report.status.as_str()), "JSON status");
    assert_eq!(value["summary"].as_str(), Some(report.summary.as_str()), "JSON summary");
    let count = |key: &str| value[key].as_array().map(Vec::len);
    assert_eq!(count("findings"), Some(report.findings.len()), "JSON findings");
    assert_eq!(count("skipped"), Some(report.skipped.len()), "JSON skipped");
    assert_eq!(count("warnings"), Some(report.warnings.len()), "JSON warnings");

    let text = render::text(report);
    assert!(text.starts_with(report.status.as_str()), "text starts with the status");
    if CHECK_TEXT_CONTROL_CHARS {
        check_no_control_chars(&text);
    }

    let html = render::html(report);
    assert!(html.starts_with("<!DOCTYPE html>"), "HTML starts with its doctype");
    assert!(html.ends_with("</body></html>\n"), "HTML ends with its closing tags");
}

/// Panics on the first control character other than `'\n'` in `text`, showing where it is.
pub fn check_no_control_chars(text: &str) {
    if let Some((at, c)) = text.char_indices().find(|&(_, c)| c.is_control() && c != '\n') {
        let line = text[..at].matches('\n').count() + 1;
        let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
        panic!("text report holds control character {c:?} on line {line}: {:?}", &text[start..end]);
    }
}

/// The frames' invariants: every frame builds (a polars error is fine, a panic is not).
pub fn check_frames(profile: &Profile, report: &Report) {
    if let Ok(df) = frame::findings_frame(report) {
        assert!(df.height() >= report.findings.len(), "a row per finding at least");
    }
    let _ = frame::evidence_frame(report);
    let _ = frame::hosts_frame(report);
    if let Ok(df) = frame::skipped_frame(report) {
        assert_eq!(df.height(), report.skipped.len(), "a row per skipped detector");
    }
    for host in profile.hosts() {
        let _ = frame::metrics_frame(host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use xlens_xplane::raw;

    use crate::{Rng, mutate, mutate_space};

    const BYTE_MUTANTS: usize = 660;
    const STRUCTURE_MUTANTS: usize = 1650;

    /// Real fixtures, each with its share of the mutants: small TPU and GPU captures (13-27 KiB,
    /// a few ms a scan in debug builds), a larger CPU capture with HLO (600 KiB, ~100 ms) and a
    /// real H200 capture whose kernels run in CUDA graphs (600 KiB: the graph kernels' naming
    /// by instruction and schedule, the staging programs, the Python tracer's host thread).
    const SEEDS: [(&str, usize); 5] = [
        ("tpu/tpu_basic/host0.xplane.pb", 4),
        ("gpu/gpu_healthy/host0.xplane.pb", 4),
        ("tpu/tpu_sparsecore/host0.xplane.pb", 2),
        ("corpus/clean/vm.xplane.pb", 1),
        ("h200/h200_inference_stepless/vm.xplane.pb", 1),
    ];

    fn seeds() -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
        SEEDS.iter().map(|(p, _)| std::fs::read(dir.join(p)).expect("seed trace")).collect()
    }

    /// The seed of mutant `i`, by the shares in [`SEEDS`].
    fn seed_of(i: usize) -> usize {
        let total: usize = SEEDS.iter().map(|s| s.1).sum();
        let mut k = i % total;
        for (n, (_, share)) in SEEDS.iter().enumerate() {
            if k < *share {
                return n;
            }
            k -= share;
        }
        unreachable!("k < total")
    }

    #[test]
    fn smoke_real_traces_scan_and_render() {
        for seed in seeds() {
            let space = Space::parse(Bytes::from(seed.clone())).expect("seed decodes");
            let profile = Profile::new(None, vec![HostProfile::new("fuzz", space)]);
            let report = scan(&profile, &ScanConfig::default());
            check_report(&report);
            // Real names hold no control characters, whatever the flag says.
            check_no_control_chars(&render::text(&report));
            check_frames(&profile, &report);
        }
    }

    /// The text check has teeth: a hostile name reaches the report (the JSON keeps it as is).
    #[test]
    fn hostile_names_reach_the_report() {
        let mut space = raw::XSpace::decode(seeds()[0].as_slice()).expect("seed decodes");
        for m in space.planes.iter_mut().flat_map(|p| p.event_metadata.values_mut()) {
            m.name.push_str("\u{1b}[31m\r");
            m.display_name.push_str("\u{1b}[31m\r");
        }
        let space = Space::parse(Bytes::from(space.encode_to_vec())).expect("still decodes");
        let profile = Profile::new(None, vec![HostProfile::new("fuzz", space)]);
        let report = scan(&profile, &ScanConfig::default());
        assert!(render::json(&report).contains("\\u001b[31m\\r"), "hostile names reach the report");
        check_report(&report);
        if CHECK_TEXT_CONTROL_CHARS {
            check_no_control_chars(&render::text(&report));
        }
    }

    /// Byte-level mutations (bit flips, overwrites, truncations, hostile lengths): most break the
    /// wire format, and those that decode reach the scan with odd values.
    #[test]
    fn smoke_byte_mutated_real_traces() {
        let seeds = seeds();
        let mut rng = Rng::new(0x5ca0_ff1e);
        let mut decoded = 0;
        for i in 0..BYTE_MUTANTS {
            let mut input = seeds[seed_of(i)].clone();
            mutate(&mut rng, &mut input);
            if Space::parse(Bytes::from(input.clone())).is_ok() {
                decoded += 1;
            }
            run(&input);
        }
        assert!(decoded > BYTE_MUTANTS / 10, "only {decoded} of {BYTE_MUTANTS} mutants decoded");
    }

    /// Structure-aware mutations that keep the protobuf valid, so most reach every detector.
    #[test]
    fn smoke_structure_mutated_real_traces() {
        let seeds: Vec<raw::XSpace> =
            seeds().iter().map(|s| raw::XSpace::decode(s.as_slice()).expect("seed decodes")).collect();
        let mut rng = Rng::new(0xde7_ec7);
        let mut decoded = 0;
        for i in 0..STRUCTURE_MUTANTS {
            let mut space = seeds[seed_of(i)].clone();
            mutate_space(&mut rng, &mut space);
            let input = space.encode_to_vec();
            if Space::parse(Bytes::from(input.clone())).is_ok() {
                decoded += 1;
            }
            run(&input);
        }
        assert!(decoded > STRUCTURE_MUTANTS / 2, "only {decoded} of {STRUCTURE_MUTANTS} mutants decoded");
    }

    #[test]
    fn smoke_random_bytes() {
        let mut rng = Rng::new(11);
        for _ in 0..1000 {
            let len = rng.below(256);
            let input: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            run(&input);
        }
    }
}

/// Inputs that made [`run`] panic, minimised, under `fuzz/regressions/scan/`: `i64`/`u64` sums or
/// products of profile values that overflowed ("attempt to add with overflow" in debug builds, a
/// wrapped value in release ones). Now summed saturating or in `i128`.
#[cfg(test)]
mod regressions {
    use super::*;

    fn input(name: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions/scan");
        std::fs::read(dir.join(name)).expect("regression input")
    }

    /// Two TPU cores with one step each, one of them `i64::MAX` ps long: `StepAnatomy::mean`
    /// (roofline/src/anatomy.rs) sums the cores' step times as `i64`. Found by the structure
    /// smoke test (mutant 991).
    #[test]
    fn anatomy_mean_overflow() {
        run(&input("anatomy_mean_overflow.xplane.pb"));
    }

    /// One GPU plane with a cuBLAS kernel and another kernel of `i64::MAX` ps: `library_shares`
    /// (faults/src/detectors/low_utilization.rs) sums the per-library times as `i64`.
    #[test]
    fn low_utilization_library_total_overflow() {
        run(&input("low_utilization_library_total_overflow.xplane.pb"));
    }

    /// One GPU kernel of `i64::MAX` ps: `library_shares` (faults/src/detectors/low_utilization.rs)
    /// multiplies a library's time by 100 to filter shares under 1 %.
    #[test]
    fn low_utilization_library_share_overflow() {
        run(&input("low_utilization_library_share_overflow.xplane.pb"));
    }

    /// Two SparseCore planes with `dropped_traces` of 512 and `u64::MAX`: the sparsecore_overflow
    /// detector (faults/src/detectors/sparsecore_overflow.rs) sums them as `u64`.
    #[test]
    fn sparsecore_dropped_overflow() {
        run(&input("sparsecore_dropped_overflow.xplane.pb"));
    }

    /// A host plane and two SparseCore planes with `dropped_traces` of `u64::MAX` and 512:
    /// `dropped_events` (faults/src/detectors/truncated_capture.rs) sums them as `u64`.
    #[test]
    fn truncated_capture_dropped_overflow() {
        run(&input("truncated_capture_dropped_overflow.xplane.pb"));
    }
}
