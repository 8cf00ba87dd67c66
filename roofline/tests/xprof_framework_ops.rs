//! The framework op profile equals XProf's framework-op statistics (`framework_op_stats`, the
//! table with idle time) on every TensorFlow capture of `testdata/field` that carries XProf's
//! output (`xprof/tool_framework_op_stats.json`): each side's total and idle time, and every
//! op row XProf lists (type, name, occurrences, total and self time).
//!
//! Where the capture names its kernels' ops in the `level 0` stat (TensorFlow of 2020), XProf
//! 2.24 attributes no kernel and lists no device op; xlens does, and its device ops are checked
//! against the capture's own `TensorFlow Ops` line instead (the op spans TensorFlow derived
//! when it wrote the capture).

mod common;

use std::collections::HashMap;
use std::path::PathBuf;

use common::{table_rows, testdata, xprof_json};
use xlens_roofline::{DeviceAttribution, FrameworkOpStats, OpSide};
use xlens_xplane::{PlaneKind, names};

/// Field captures with XProf's framework-op statistics.
fn capture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(testdata().join("field"))
        .map(|rd| {
            rd.flatten().map(|e| e.path()).filter(|p| p.join("xprof/tool_framework_op_stats.json").is_file()).collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Microseconds as XProf prints them, against picoseconds.
fn us_eq(theirs: f64, ours_ps: i64) -> bool {
    (theirs - ours_ps as f64 / 1e6).abs() <= 1e-3_f64.max(1e-9 * theirs.abs())
}

#[test]
fn framework_op_stats_match_xprof_on_every_tf_capture() {
    let dirs = capture_dirs();
    assert!(dirs.iter().any(|d| d.ends_with("tf_v100_multiworker")), "the V100 capture has its reference");
    for dir in dirs {
        let ctx = dir.display().to_string();
        let session = xlens_testkit::open_session(&dir).unwrap();
        let space = session.hosts()[0].space();
        assert!(FrameworkOpStats::applies(space), "{ctx}: a TF capture without HLO");
        let ours = FrameworkOpStats::read(space).unwrap();
        let json = xprof_json(&dir, "tool_framework_op_stats.json");
        // The tool's output is a list of two tables (with idle, without); the first is kept.
        let table = if json.is_array() { json[0].clone() } else { json };
        let rows = table_rows(&table);
        let side_of = |r: &serde_json::Map<String, serde_json::Value>| {
            if r["host_or_device"] == "Device" { OpSide::Device } else { OpSide::Host }
        };
        let num = |r: &serde_json::Map<String, serde_json::Value>, k: &str| r[k].as_f64().unwrap();
        for side in [OpSide::Device, OpSide::Host] {
            let theirs: Vec<_> = rows.iter().filter(|r| side_of(r) == side).collect();
            let (total, idle, ops) = match side {
                OpSide::Device => (ours.device_total, ours.device_idle(), &ours.device),
                OpSide::Host => (ours.host_total, ours.host_idle(), &ours.host),
            };
            let share_key = match side {
                OpSide::Device => "device_total_self_time_percent",
                OpSide::Host => "host_total_self_time_percent",
            };
            if let Some(r) = theirs.iter().find(|r| r["type"] == "IDLE") {
                // The side's total from the idle row's share (the table lists 500 ops at most,
                // so its rows do not add up to it).
                let their_total = num(r, "total_self_time") / num(r, share_key);
                // Each side's total (ops and idle) is XProf's; only the split differs where
                // XProf attributes no device op (`level 0` captures).
                assert!(
                    (their_total - total.0 as f64 / 1e6).abs() <= 1e-3 + 1e-9 * their_total,
                    "{ctx} {side:?}: total {their_total} us, ours {total:?}"
                );
                if !(side == OpSide::Device && ours.attribution == DeviceAttribution::Level0) {
                    assert!(us_eq(num(r, "total_self_time"), idle.0), "{ctx} {side:?}: idle");
                }
            }
            let listed: Vec<_> = theirs.iter().filter(|r| r["type"] != "IDLE").collect();
            if side == OpSide::Device && ours.attribution == DeviceAttribution::Level0 {
                assert!(listed.is_empty(), "{ctx}: XProf 2.24 reads no `level 0` stat");
                continue;
            }
            // XProf lists at most 500 ops a side, its `IDLE` row among them.
            let cap = 500 - (theirs.len() - listed.len());
            assert_eq!(listed.len(), ops.len().min(cap), "{ctx} {side:?}: op count");
            let by_name: HashMap<&str, _> = ops.iter().map(|o| (o.name.as_str(), o)).collect();
            for r in listed {
                let name = r["operation"].as_str().unwrap();
                let o = by_name.get(name).unwrap_or_else(|| panic!("{ctx} {side:?}: no op {name}"));
                assert_eq!(r["type"].as_str().unwrap(), o.op_type, "{ctx}: {name} type");
                assert_eq!(num(r, "occurrences") as u64, o.occurrences, "{ctx}: {name} occurrences");
                assert!(us_eq(num(r, "total_time"), o.total.0), "{ctx}: {name} total");
                assert!(us_eq(num(r, "total_self_time"), o.self_time.0), "{ctx}: {name} self");
            }
        }
    }
}

#[test]
fn level0_device_ops_equal_the_captures_own_tensorflow_ops_line() {
    let dir = testdata().join("field/tf_v100_multiworker");
    let session = xlens_testkit::open_session(&dir).unwrap();
    let space = session.hosts()[0].space();
    let ours = FrameworkOpStats::read(space).unwrap();
    assert_eq!(ours.attribution, DeviceAttribution::Level0);
    // Time per op on the `TensorFlow Ops` lines (names `name` or `name:type`).
    let mut line_time: HashMap<String, i64> = HashMap::new();
    for plane in space.planes().iter().filter(|p| matches!(p.kind(), PlaneKind::Gpu { .. })) {
        if let Some(line) = plane.line_by_name(names::line::TENSORFLOW_OPS) {
            for ev in line.events(plane) {
                let ev = ev.unwrap();
                let name = ev.name().split(':').next().unwrap().to_owned();
                *line_time.entry(name).or_default() += ev.duration().0;
            }
        }
    }
    assert!(!ours.device.is_empty());
    let ours_time: HashMap<String, i64> = ours.device.iter().map(|o| (o.name.clone(), o.self_time.0)).collect();
    // Copies carry their op too but are not on the line: compare the line's ops.
    for (name, t) in &line_time {
        assert_eq!(ours_time.get(name), Some(t), "{name}");
    }
    let rng = ours.device.iter().find(|o| o.op_type == "RandomUniform").unwrap();
    assert!(rng.kernels.iter().any(|k| k.0.contains("FillPhiloxRandomKernelLaunch")));
}
