//! One fixture per detector, as ruff keeps one per rule: the profile that shows its fault, and a
//! snapshot of the findings the detector reports on it alone (severity, text, impact, evidence,
//! fix). A change to what a detector says shows up as a snapshot diff to review:
//! `INSTA_UPDATE=always cargo test -p xlens-faults --test detector_snapshots` rewrites them, `cargo
//! insta review` walks through them. The snapshots live in `faults/tests/snapshots/`.

use std::fmt::Write as _;

use xlens_faults::{DETECTORS, Evidence, Finding, Profile, Report, ScanConfig, scan};

/// A detector, the profile under `testdata/` that shows its fault, and any threshold the fixture
/// needs lowered to fire.
struct Case {
    detector: &'static str,
    profile: &'static str,
    tweak: fn(&mut ScanConfig),
}

const fn case(detector: &'static str, profile: &'static str) -> Case {
    Case { detector, profile, tweak: |_| {} }
}

/// The fixture table: every detector of the registry, once.
const CASES: &[Case] = &[
    case("exposed_collective", "tpu/tpu_exposed_collective"),
    case("wrong_mesh_mapping", "real/sharded_collectives"),
    case("unintended_remat", "real/remat"),
    case("data_formatting_tax", "corpus/data_formatting"),
    case("input_starvation", "real/input_starvation"),
    case("recompilation", "corpus/recompilation"),
    case("vpu_bound", "tpu/tpu_vector_bound"),
    case("padding_waste", "tpu/tpu_padding_waste"),
    case("straggler_core", "tpu/tpu_straggler"),
    case("dcn_exposed_reduce", "tpu/tpu_dcn_tail"),
    case("host_callback_stall", "corpus/host_callback"),
    case("donation_miss", "real/donation_miss"),
    case("allgather_duplication", "real/sharded_collectives"),
    case("profile_during_warmup", "real/profile_during_warmup"),
    case("barrier_in_loop", "real/barrier_in_loop"),
    case("sparsecore_overflow", "tpu/tpu_sparsecore"),
    case("layout_mismatch_copy", "real/sharded_collectives"),
    // Its fixture's reshapes cost 0.5 % of the step, under the default 1 %.
    Case {
        detector: "unfused_reshape",
        profile: "corpus/data_formatting",
        tweak: |c| c.thresholds.unfused_reshape.min_pct_of_step = 0.3,
    },
    case("unnecessary_convert_reduce", "real/convert_reduce"),
    case("hbm_pressure", "tpu/tpu_hbm_pressure"),
    case("truncated_capture", "tpu/tpu_sparsecore"),
    case("exposed_async_copy", "gpu/gpu_memcpy_stall"),
    case("low_utilization", "tpu/tpu_vector_bound"),
    case("device_idle", "gpu/gpu_launch_bound"),
    case("launch_bound", "gpu/gpu_launch_bound"),
    case("replicated_activations", "real/replicated_activations"),
];

/// The findings as reviewable text: one block per finding.
fn findings_text(findings: &[Finding]) -> String {
    let mut s = String::new();
    for f in findings {
        let _ = writeln!(s, "[{}] {} on {} ({:?}): {}", f.severity, f.id, f.host, f.scope, f.title);
        let _ = writeln!(s, "what: {}", f.what);
        let _ =
            writeln!(s, "impact: {:.4} ms per step, {:.3} % of the step", f.impact.ms_per_step, f.impact.pct_of_step);
        for h in &f.hosts {
            let _ = writeln!(s, "host: {} [{}] {:.4} ms", h.host, h.severity, h.impact.ms_per_step);
        }
        for e in &f.evidence {
            let _ = writeln!(s, "- {e}");
        }
        let _ = writeln!(s, "fix: {}\n", f.fix);
    }
    s
}

#[test]
fn every_detector_has_one_fixture() {
    let mut table: Vec<&str> = CASES.iter().map(|c| c.detector).collect();
    let mut registry: Vec<&str> = DETECTORS.iter().map(|d| d.id()).collect();
    table.sort_unstable();
    registry.sort_unstable();
    assert_eq!(table, registry);
}

/// The report of a case's detector alone on its fixture.
fn report_of(case: &Case) -> Report {
    let dir = root().join("testdata").join(case.profile);
    let session = xlens_testkit::open_session(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut config = ScanConfig::only(case.detector);
    (case.tweak)(&mut config);
    scan(&Profile::from_session(session), &config)
}

#[test]
fn detector_findings_match_their_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let _guard = settings.bind_to_scope();
    for case in CASES {
        let report = report_of(case);
        assert!(report.skipped.is_empty(), "{} skipped on {}: {:?}", case.detector, case.profile, report.skipped);
        assert!(!report.findings.is_empty(), "{} found nothing on {}", case.detector, case.profile);
        insta::with_settings!({ description => case.profile }, {
            insta::assert_snapshot!(case.detector, findings_text(&report.findings));
        });
    }
}

/// Every detector's metrics carry a key on its fixture (the keys' form, uniqueness and units are
/// checked over every profile by the facade's scorecard test, the frame's `key` column by
/// `tests/frame_schemas.rs`).
#[test]
fn every_detector_keys_its_metrics() {
    for case in CASES {
        let report = report_of(case);
        let keys: Vec<&str> = report.findings.iter().flat_map(|f| &f.evidence).filter_map(Evidence::key).collect();
        assert!(!keys.is_empty(), "{} reports no metric on {}", case.detector, case.profile);
        assert!(keys.iter().all(|k| !k.is_empty()), "{} on {}: a metric without a key", case.detector, case.profile);
    }
}

/// The repository root.
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
