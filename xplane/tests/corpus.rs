//! Real traces: event counts agree with XProf, and the lazy decoder agrees with prost.

mod common;

use prost::Message;
use xlens_xplane::{WarningKind, inventory, raw, validate};

/// A plane as `list_xplane_lines` shows it: name, total events, (line name, events) per line.
type PlaneCounts = (String, u64, Vec<(String, u64)>);

#[test]
fn there_are_real_traces_to_check() {
    // The shared corpus is committed under testdata/corpus; this guards against a silent empty loop.
    assert!(common::real_trace_dirs().len() >= 6, "expected the corpus traces under testdata/");
}

#[test]
fn event_counts_match_xprof_list_xplane_lines() {
    for dir in common::real_trace_dirs() {
        let reference = common::xprof_output(&dir, "list_xplane_lines");
        let session = xlens_testkit::open_session(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        assert_eq!(session.hosts().len(), 1, "{}", dir.display());
        let space = session.hosts()[0].space();
        let inv = inventory(space).unwrap();
        let ref_planes = reference["planes"].as_array().expect("planes");
        let ours: Vec<PlaneCounts> = inv
            .iter()
            .map(|p| (p.name.clone(), p.events(), p.lines.iter().map(|l| (l.name.clone(), l.events)).collect()))
            .collect();
        let theirs: Vec<PlaneCounts> = ref_planes
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["total_events"].as_u64().unwrap(),
                    p["lines"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| (l["name"].as_str().unwrap().to_owned(), l["event_count"].as_u64().unwrap()))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(ours, theirs, "{}", dir.display());
    }
}

#[test]
fn lazy_decoder_agrees_with_prost_on_real_traces() {
    for dir in common::real_trace_dirs() {
        let session = xlens_testkit::open_session(&dir).unwrap();
        let host = &session.hosts()[0];
        let bytes = std::fs::read(host.path().unwrap()).unwrap();
        let by_prost = raw::XSpace::decode(bytes.as_slice()).unwrap();
        let ours = host.space().to_raw().unwrap();
        assert!(ours == by_prost, "{}: lazy decode differs from prost", dir.display());
    }
}

#[test]
fn real_traces_validate_without_dangling_ids() {
    for dir in common::real_trace_dirs() {
        let session = xlens_testkit::open_session(&dir).unwrap();
        let warnings = validate(session.hosts()[0].space()).unwrap();
        let dangling: Vec<_> = warnings
            .iter()
            .filter(|w| {
                matches!(
                    w.kind,
                    WarningKind::DanglingEventMetadata { .. }
                        | WarningKind::DanglingStatMetadata { .. }
                        | WarningKind::DanglingStatRef { .. }
                )
            })
            .collect();
        assert!(dangling.is_empty(), "{}: {dangling:?}", dir.display());
    }
}

#[test]
fn cpu_trace_reads_steps_and_thunk_stats() {
    let dir = common::testdata().join("corpus/clean");
    let session = xlens_testkit::open_session(&dir).unwrap();
    let space = session.hosts()[0].space();
    let host = space.host_threads().unwrap();
    let step_num = host.stat_id("step_num").unwrap();
    let python = host.line_by_name("python").unwrap();
    let steps: Vec<i64> = python
        .events(host)
        .map(|e| e.unwrap())
        .filter(|e| e.name() == "train")
        .map(|e| e.stat(step_num).and_then(|s| s.as_i64()).unwrap())
        .collect();
    assert_eq!(steps, vec![0, 1, 2, 3, 4]);
    // Thunk events carry hlo_op / hlo_module (the module by reference) on the XLA threads.
    let hlo_module = host.stat_id("hlo_module").unwrap();
    let modules: std::collections::BTreeSet<String> = host
        .lines()
        .iter()
        .filter(|l| l.name().starts_with("tf_XLA"))
        .flat_map(|l| l.events(host).map(|e| e.unwrap()))
        .filter_map(|e| e.stat(hlo_module).and_then(|s| s.as_str().map(|s| s.into_owned())))
        .collect();
    assert!(modules.contains("jit_train_step"), "{modules:?}");
    // Profile start/stop come from Task Environment.
    assert!(space.profile_stop_ns().unwrap() > space.profile_start_ns().unwrap());
}
