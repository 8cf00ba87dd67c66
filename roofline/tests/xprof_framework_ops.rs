//! The framework op profile equals XProf's framework-op statistics (`framework_op_stats`, the
//! table with idle time) on every TensorFlow capture of `testdata/field` that carries XProf's
//! output (`xprof/tool_framework_op_stats.json`): each side's total and idle time, and every
//! op row XProf lists (type, name, occurrences, total and self time). That includes TensorFlow
//! run on the CPU alone (`tf_cpu_keras_*` without XLA), whose table has host rows only; the
//! capture with XLA (`tf_cpu_keras_xla`) keeps its HLO op profile and is not one for this table.
//!
//! Where the capture names its kernels' ops in the `level 0` stat (TensorFlow of 2020), XProf
//! 2.24 attributes no kernel and lists no device op; xlens does, and its device ops are checked
//! against the capture's own `TensorFlow Ops` line (the op spans TensorFlow derived when it
//! wrote the capture), and against XProf's output for a copy whose `level 0` stat is renamed
//! `tf_op` (`scripts/capture/level0_as_tf_op.py`, applied here in memory), on which XProf
//! attributes every kernel.

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

type Row = serde_json::Map<String, serde_json::Value>;

fn side_of(r: &Row) -> OpSide {
    if r["host_or_device"] == "Device" { OpSide::Device } else { OpSide::Host }
}

fn num(r: &Row, k: &str) -> f64 {
    r[k].as_f64().unwrap()
}

/// Checks one side of `ours` against XProf's table (with idle): the side's total and idle time
/// and every op row XProf lists.
fn compare_side(ctx: &str, ours: &FrameworkOpStats, rows: &[Row], side: OpSide) {
    let theirs: Vec<&Row> = rows.iter().filter(|r| side_of(r) == side).collect();
    let (total, idle, ops) = match side {
        OpSide::Device => (ours.device_total, ours.device_idle(), &ours.device),
        OpSide::Host => (ours.host_total, ours.host_idle(), &ours.host),
    };
    let share_key = match side {
        OpSide::Device => "device_total_self_time_percent",
        OpSide::Host => "host_total_self_time_percent",
    };
    if let Some(r) = theirs.iter().find(|r| r["type"] == "IDLE") {
        // The side's total from the idle row's share (the table lists 500 ops at most, so its
        // rows do not add up to it).
        let their_total = num(r, "total_self_time") / num(r, share_key);
        assert!(
            (their_total - total.0 as f64 / 1e6).abs() <= 1e-3 + 1e-9 * their_total,
            "{ctx} {side:?}: total {their_total} us, ours {total:?}"
        );
        if !(side == OpSide::Device && ours.attribution == DeviceAttribution::Level0) {
            assert!(us_eq(num(r, "total_self_time"), idle.0), "{ctx} {side:?}: idle");
        }
    }
    let listed: Vec<&&Row> = theirs.iter().filter(|r| r["type"] != "IDLE").collect();
    if side == OpSide::Device && ours.attribution == DeviceAttribution::Level0 {
        assert!(listed.is_empty(), "{ctx}: XProf 2.24 reads no `level 0` stat");
        return;
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
        // Not the execution mode: XProf 2.24.2 shows "Function" for the synthetic capture's
        // op whose event has `is_eager` 1, which its sources read as eager; xlens reads it so.
    }
}

/// The first table (with idle) of a stored `framework_op_stats` output.
fn xprof_rows(dir: &std::path::Path, file: &str) -> Vec<Row> {
    let json = xprof_json(dir, file);
    // The tool's output is a list of two tables (with idle, without); the first is kept.
    let table = if json.is_array() { json[0].clone() } else { json };
    table_rows(&table)
}

#[test]
fn framework_op_stats_match_xprof_on_every_tf_capture() {
    let dirs = capture_dirs();
    assert!(dirs.iter().any(|d| d.ends_with("tf_v100_multiworker")), "the V100 capture has its reference");
    // TensorFlow on the CPU alone: no device plane, every op on the host's executor threads.
    let host_only = ["tf_cpu_keras_steady", "tf_cpu_keras_input_bound", "tf_cpu_keras_warmup"];
    for name in host_only {
        assert!(dirs.iter().any(|d| d.ends_with(name)), "{name} has its reference");
    }
    let mut checked = 0;
    for dir in dirs {
        let ctx = dir.display().to_string();
        let session = xlens_testkit::open_session(&dir).unwrap();
        let space = session.hosts()[0].space();
        let Some(ours) = xlens_roofline::framework_op_analysis(space) else {
            // A TensorFlow capture with XLA (`jit_compile=True`) keeps its HLO op profile.
            assert!(!xlens_hlo::modules_from_space(space).0.is_empty(), "{ctx}: a TF capture without HLO");
            continue;
        };
        assert!(FrameworkOpStats::applies(space), "{ctx}");
        let ours = ours.unwrap();
        let rows = xprof_rows(&dir, "tool_framework_op_stats.json");
        if host_only.iter().any(|n| dir.ends_with(n)) {
            // XProf's table of a CPU-only capture: host rows alone, an `IDLE` row among them.
            assert!(rows.iter().all(|r| side_of(r) == OpSide::Host), "{ctx}: host rows only");
            assert!(rows.iter().any(|r| r["type"] == "IDLE"), "{ctx}: an IDLE row");
            assert!(ours.device.is_empty() && ours.device_total == xlens_xplane::Picos::ZERO, "{ctx}: no device");
            assert!(!ours.host.is_empty(), "{ctx}: host ops");
        }
        checked += 1;
        for side in [OpSide::Device, OpSide::Host] {
            compare_side(&ctx, &ours, &rows, side);
        }
    }
    // The V100 capture and the three CPU ones.
    assert!(checked > host_only.len(), "{checked} captures checked");
}

/// A varint at `b[*i..]`.
fn read_varint(b: &[u8], i: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let c = b[*i];
        *i += 1;
        v |= u64::from(c & 0x7f) << shift;
        shift += 7;
        if c < 0x80 {
            return v;
        }
    }
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        out.push(if v > 0 { b | 0x80 } else { b });
        if v == 0 {
            return;
        }
    }
}

/// The fields of a message: (field, wire type, the value's bytes or the varint).
fn fields(b: &[u8]) -> Vec<(u64, u64, Vec<u8>, u64)> {
    let (mut i, mut out) = (0, Vec::new());
    while i < b.len() {
        let key = read_varint(b, &mut i);
        let (f, w) = (key >> 3, key & 7);
        match w {
            0 => out.push((f, w, Vec::new(), read_varint(b, &mut i))),
            1 | 5 => {
                let n = if w == 1 { 8 } else { 4 };
                out.push((f, w, b[i..i + n].to_vec(), 0));
                i += n;
            }
            2 => {
                let n = read_varint(b, &mut i) as usize;
                out.push((f, w, b[i..i + n].to_vec(), 0));
                i += n;
            }
            _ => panic!("wire type {w}"),
        }
    }
    out
}

fn encode(fields: &[(u64, u64, Vec<u8>, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (f, w, bytes, v) in fields {
        write_varint(&mut out, (f << 3) | w);
        match w {
            0 => write_varint(&mut out, *v),
            2 => {
                write_varint(&mut out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            _ => out.extend_from_slice(bytes),
        }
    }
    out
}

/// `scripts/capture/level0_as_tf_op.py` in memory: the `level 0` stat metadata of every GPU
/// plane renamed `tf_op`, every other byte kept.
fn level0_as_tf_op(space: &[u8]) -> Vec<u8> {
    let mut top = fields(space);
    for plane in top.iter_mut().filter(|f| f.0 == 1) {
        let mut pf = fields(&plane.2);
        if !pf.iter().any(|f| f.0 == 2 && f.2.starts_with(b"/device:GPU:")) {
            continue;
        }
        for entry in pf.iter_mut().filter(|f| f.0 == 5) {
            let mut ef = fields(&entry.2);
            for md in ef.iter_mut().filter(|f| f.0 == 2) {
                let mut mf = fields(&md.2);
                for name in mf.iter_mut().filter(|f| f.0 == 2 && f.2 == b"level 0") {
                    name.2 = b"tf_op".to_vec();
                }
                md.2 = encode(&mf);
            }
            entry.2 = encode(&ef);
        }
        plane.2 = encode(&pf);
    }
    encode(&top)
}

/// XProf reads `tf_op` only: with the capture's `level 0` renamed `tf_op` (XProf's output for
/// that copy is stored), XProf attributes every kernel, and its device table is ours row for
/// row, idle included: the `tf_op` path of current TensorFlow captures, checked on real kernels.
#[test]
fn device_ops_match_xprof_where_the_kernels_name_their_op_in_tf_op() {
    let dir = testdata().join("field/tf_v100_multiworker");
    let bytes = std::fs::read(dir.join("34.83.195.179_6003.xplane.pb")).unwrap();
    let renamed = level0_as_tf_op(&bytes);
    assert_eq!(renamed.len() + 6, bytes.len(), "three stats renamed, two bytes shorter each");
    let space = xlens_xplane::Space::parse(renamed.into()).unwrap();
    let ours = FrameworkOpStats::read(&space).unwrap();
    assert_eq!(ours.attribution, DeviceAttribution::TfOp);
    let rows = xprof_rows(&dir, "tool_framework_op_stats__level0_as_tf_op.json");
    compare_side("tf_v100_multiworker, level 0 as tf_op", &ours, &rows, OpSide::Device);
    // The same ops as read from `level 0`.
    let original = FrameworkOpStats::read(xlens_testkit::open_session(&dir).unwrap().hosts()[0].space()).unwrap();
    assert_eq!((original.device, original.device_total), (ours.device, ours.device_total));
}

/// A type's ops, occurrences, total and self time (ps).
type PerType = (u64, u64, i64, i64);

/// Past XProf's 500 rows: every op of both sides of the same copy, against XProf's rows with
/// no cap (`xprof/framework_op_stats__level0_as_tf_op__all.json`, rebuilt in picoseconds from
/// the `OpStats` XProf 2.24.2 made its table from, by `scripts/capture/xprof_full_framework_ops.py`,
/// which checks them against the 500 it lists): the same ops, each with its type, occurrences,
/// total and self time to the picosecond, hence the same time per type; each side's total and
/// idle time.
#[test]
fn every_op_matches_xprofs_rows_without_the_500_op_cap() {
    use std::collections::{BTreeMap, BTreeSet};
    let dir = testdata().join("field/tf_v100_multiworker");
    let bytes = std::fs::read(dir.join("34.83.195.179_6003.xplane.pb")).unwrap();
    let space = xlens_xplane::Space::parse(level0_as_tf_op(&bytes).into()).unwrap();
    let ours = FrameworkOpStats::read(&space).unwrap();
    assert_eq!(ours.attribution, DeviceAttribution::TfOp);
    assert_eq!(ours.ops_dropped, 0);
    let all = xprof_json(&dir, "framework_op_stats__level0_as_tf_op__all.json");
    assert_eq!(all["self_check"]["passed"], true, "the reference agrees with XProf's table");
    let ps = |v: &serde_json::Value| v.as_i64().unwrap();
    for (side, key, ops, total, idle) in [
        (OpSide::Device, "Device", &ours.device, ours.device_total, ours.device_idle()),
        (OpSide::Host, "Host", &ours.host, ours.host_total, ours.host_idle()),
    ] {
        let s = &all["sides"][key];
        assert_eq!((total.0, idle.0), (ps(&s["total_ps"]), ps(&s["idle_ps"])), "{side:?}: total, idle");
        let rows: Vec<&serde_json::Value> =
            all["rows"].as_array().unwrap().iter().filter(|r| r["side"] == key).collect();
        assert_eq!(rows.len() as i64, ps(&s["ops"]), "{side:?}: rows");
        // Far more than XProf lists: the check reaches past its cap.
        assert!(rows.len() > 500, "{side:?}: {} ops", rows.len());
        let theirs: HashMap<&str, &serde_json::Value> =
            rows.iter().map(|r| (r["name"].as_str().unwrap(), *r)).collect();
        assert_eq!(theirs.len(), rows.len(), "{side:?}: one row per op");
        let mine: HashMap<&str, &xlens_roofline::FrameworkOp> = ops.iter().map(|o| (o.name.as_str(), o)).collect();
        assert_eq!(mine.len(), ops.len(), "{side:?}: one op per name");
        let (a, b): (BTreeSet<&str>, BTreeSet<&str>) =
            (theirs.keys().copied().collect(), mine.keys().copied().collect());
        assert_eq!(a.difference(&b).collect::<Vec<_>>(), Vec::<&&str>::new(), "{side:?}: XProf's ops xlens lacks");
        assert_eq!(b.difference(&a).collect::<Vec<_>>(), Vec::<&&str>::new(), "{side:?}: xlens's ops XProf lacks");
        let facts = |o: &xlens_roofline::FrameworkOp| (o.op_type.clone(), o.occurrences, o.total.0, o.self_time.0);
        let their_facts = |r: &serde_json::Value| {
            let t = r["type"].as_str().unwrap().to_owned();
            (t, r["occurrences"].as_u64().unwrap(), ps(&r["total_time_ps"]), ps(&r["self_time_ps"]))
        };
        let mut differ: Vec<String> = theirs
            .iter()
            .filter(|(name, r)| their_facts(r) != facts(mine[*name]))
            .map(|(name, r)| format!("{side:?} {name}: XProf {:?}, xlens {:?}", their_facts(r), facts(mine[name])))
            .collect();
        differ.sort();
        assert!(differ.is_empty(), "{} ops differ:\n{}", differ.len(), differ.join("\n"));
        // Per type over all ops: ops, occurrences, total and self time.
        let per_type = |all: Vec<(String, u64, i64, i64)>| {
            let mut m: BTreeMap<String, PerType> = BTreeMap::new();
            for (t, n, total, self_time) in all {
                let e = m.entry(t).or_default();
                *e = (e.0 + 1, e.1 + n, e.2 + total, e.3 + self_time);
            }
            m
        };
        assert_eq!(
            per_type(rows.iter().map(|r| their_facts(r)).collect()),
            per_type(ops.iter().map(facts).collect()),
            "{side:?}: per type"
        );
        // In XProf's order: self time descending, then name.
        let order: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(order.iter().copied().eq(ops.iter().map(|o| o.name.as_str())), "{side:?}: order");
        // The ops' time is the side's total less its idle time.
        let op_time: i64 = ops.iter().map(|o| o.self_time.0).sum();
        assert_eq!(op_time, total.0 - idle.0, "{side:?}: ops' self time");
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

/// A TensorFlow-executor-shaped capture (no XLA), small enough to read: host ops that nest
/// (a function call around its ops, `tf.data` iterators three deep, an allocation naming its op
/// by `tf_op` stat with no type, an unknown `ExecutorState::Process` that is no op), an eager op,
/// and two GPUs whose kernels and copies name their op by `tf_op` (two kernels per MatMul, on
/// both GPUs), an unattributed autotuning kernel, and the `TensorFlow Ops` line TensorFlow
/// derives. `XLENS_WRITE_XSPACE=PATH` writes it, for XProf
/// (`roofline/tests/xprof/framework_op_stats_synthetic.json` is XProf 2.24.2's
/// `framework_op_stats` of it, made cold with `scripts/capture/xprof_tool_data.py`).
fn synthetic_tf_capture() -> Vec<u8> {
    use xlens_xplane::SpaceBuilder;
    const US: i64 = 1_000_000;
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, names::plane::HOST_CPU);
        let tf_op = plane.stat_metadata(names::stat::TF_OP);
        let eager = plane.stat_metadata("is_eager");
        let call = plane.event_metadata("StatefulPartitionedCall:StatefulPartitionedCall");
        let matmul = plane.event_metadata("model/dense/MatMul:MatMul");
        let bias = plane.event_metadata("model/dense/BiasAdd:BiasAdd");
        let relu = plane.event_metadata("model/relu/Relu_1:");
        let process = plane.event_metadata("ExecutorState::Process");
        let alloc = plane.event_metadata("MemoryAllocation");
        let add = plane.event_metadata("AddV2:AddV2");
        let prefetch = plane.event_metadata("Iterator::Prefetch");
        let map = plane.event_metadata("Iterator::Prefetch::Map");
        let slices = plane.event_metadata("Iterator::Prefetch::Map::TensorSlice");
        {
            let mut line = plane.line(11, "tf_Compute/11", 1_000);
            for step in 0..2 {
                let t = step * 1_000 * US;
                line.event(call, t, 500 * US);
                line.event(process, t + 5 * US, 300 * US);
                line.event(matmul, t + 10 * US, 100 * US);
                line.event(alloc, t + 20 * US, 0).stat(tf_op, "model/dense/MatMul");
                line.event(bias, t + 120 * US, 20 * US);
                line.event(relu, t + 150 * US, 10 * US);
            }
            line.event(add, 2_000 * US, 7 * US).stat(eager, 1i64);
        }
        {
            let mut line = plane.line(12, "tf_data_iterator/12", 1_000);
            for step in 0..3 {
                let t = step * 700 * US;
                line.event(prefetch, t, 50 * US);
                line.event(map, t + 5 * US, 40 * US);
                line.event(slices, t + 10 * US, 10 * US);
            }
        }
    }
    for gpu in 0..2i64 {
        let mut plane = b.plane(10 + gpu, &format!("/device:GPU:{gpu}"));
        let tf_op = plane.stat_metadata(names::stat::TF_OP);
        let sgemm = plane.event_metadata("volta_sgemm_128x64_nn");
        let reduce = plane.event_metadata("splitKreduce_kernel");
        let bias_kernel = plane.event_metadata("BiasNHWCKernel");
        let redzone = plane.event_metadata("redzone_checker");
        let copy = plane.event_metadata("MemcpyH2D");
        let op_line = plane.event_metadata("model/dense/MatMul");
        let start = 1_000 + 50 * gpu;
        {
            let mut line = plane.line(7, "Stream #7(Compute)", start);
            line.event(redzone, 0, 3 * US);
            for step in 0..2 {
                let t = 10 * US + step * 1_000 * US;
                line.event(sgemm, t, (30 + gpu) * US).stat(tf_op, "model/dense/MatMul:MatMul");
                line.event(reduce, t + 40 * US, 2 * US).stat(tf_op, "model/dense/MatMul:MatMul");
                line.event(reduce, t + 45 * US, 2 * US).stat(tf_op, "model/dense/MatMul:MatMul");
                line.event(bias_kernel, t + 60 * US, 4 * US).stat(tf_op, "model/dense/BiasAdd:BiasAdd");
            }
        }
        {
            let mut line = plane.line(8, "Stream #8(MemcpyH2D)", start);
            line.event(copy, 2 * US, 5 * US).stat(tf_op, "IteratorGetNext:IteratorGetNext");
        }
        {
            let mut line = plane.line(names::line::DERIVED_ID_MIN + 3, names::line::TENSORFLOW_OPS, start);
            for step in 0..2 {
                line.event(op_line, 10 * US + step * 1_000 * US, 37 * US);
            }
        }
    }
    b.finish()
}

#[test]
fn synthetic_tf_capture_matches_xprof_row_for_row() {
    let bytes = synthetic_tf_capture();
    if let Some(path) = std::env::var_os("XLENS_WRITE_XSPACE") {
        std::fs::write(path, &bytes).unwrap();
    }
    let space = xlens_xplane::Space::parse(bytes.into()).unwrap();
    assert!(FrameworkOpStats::applies(&space));
    let ours = FrameworkOpStats::read(&space).unwrap();
    assert_eq!(ours.attribution, DeviceAttribution::TfOp);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let rows = xprof_rows(&dir, "framework_op_stats_synthetic.json");
    for side in [OpSide::Device, OpSide::Host] {
        compare_side("synthetic", &ours, &rows, side);
    }
    // What the rows say, in words: a MatMul ran twice (its reduce kernel ran four times per
    // GPU, but occurrences are the most launches of one kernel summed over GPUs) ...
    let matmul = ours.device.iter().find(|o| o.name == "model/dense/MatMul").unwrap();
    assert_eq!((matmul.occurrences, matmul.kernels.len()), (8, 2));
    // ... and the host's call has its children's time taken off.
    let call = ours.host.iter().find(|o| o.op_type == "StatefulPartitionedCall").unwrap();
    assert!(call.self_time < call.total);
}

/// TensorFlow on the CPU alone: the executor threads are the device. XProf's overview gives
/// such a capture no device figure (`device_core_count` 0, device compute 0 ms); its step time
/// is ours, and the executor's busy time per step (ops on any executor thread, counted once)
/// lies within its "host compute" time per step (`host_compute_time_ms_avg`).
#[test]
fn executor_busy_per_step_is_xprofs_host_compute_time() {
    for name in ["tf_cpu_keras_steady", "tf_cpu_keras_input_bound", "tf_cpu_keras_warmup"] {
        let dir = testdata().join("field").join(name);
        let session = xlens_testkit::open_session(&dir).unwrap();
        let space = session.hosts()[0].space();
        let (steps, _, _) = xlens_roofline::op_analyses(space).unwrap();
        let windows: Vec<_> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
        let busy = FrameworkOpStats::executor_busy(space, &windows).unwrap();
        assert!(busy.threads > 0, "{name}: executor threads");
        let n = windows.len() as f64;
        let ours = busy.busy.iter().map(|b| b.0 as f64 / 1e9).sum::<f64>() / n;
        let step = steps.steps.iter().map(|s| s.duration.0 as f64 / 1e9).sum::<f64>() / n;
        let overview = xprof_json(&dir, "tool_overview_page.json");
        let p = &overview[1]["p"];
        let theirs: f64 = p["host_compute_time_ms_avg"].as_str().unwrap().parse().unwrap();
        let their_step: f64 = p["steptime_ms_average"].as_str().unwrap().parse().unwrap();
        eprintln!(
            "{name}: busy {ours:.3} ms of {step:.3} ms, xprof host compute {theirs} of {their_step}, {} threads",
            busy.threads
        );
        assert!((step - their_step).abs() <= 0.05, "{name}: step {step} ms, XProf {their_step}");
        // XProf's host compute is every host event of the step that is not input (the Python
        // loop's dispatch included): the executor's ops are a part of it.
        assert!(ours <= theirs + 0.05, "{name}: busy {ours} ms, XProf host compute {theirs}");
        // Past warm-up it is most of it; the warm-up capture's first step is graph building
        // (`tf.function` tracing on the Python thread), which XProf counts as host compute.
        if name != "tf_cpu_keras_warmup" {
            assert!(ours >= 0.8 * theirs, "{name}: busy {ours} ms, XProf host compute {theirs}");
        } else {
            assert!(ours < 0.2 * theirs, "{name}: busy {ours} ms, XProf host compute {theirs}");
        }
    }
}

/// TensorFlow on the CPU alone: the op timeline (`HostOps`, what the step anatomy, the op
/// profile and the detectors read) is the executor threads' TensorFlow ops, the events
/// `executor_busy` measures. Every op of the op profile built on it is a host row of XProf's
/// framework-op statistics: the same name, its type as category, the same total time, and (self
/// time less its nested ops on the thread) the same self time.
#[test]
fn cpu_only_tf_op_timeline_is_the_executors_framework_ops() {
    use xlens_roofline::{HostOps, OpProfile, OpSource};
    for name in ["tf_cpu_keras_steady", "tf_cpu_keras_input_bound", "tf_cpu_keras_warmup"] {
        let dir = testdata().join("field").join(name);
        let session = xlens_testkit::open_session(&dir).unwrap();
        let space = session.hosts()[0].space();
        let ops = HostOps::read(space).unwrap();
        assert_eq!(ops.source, OpSource::TfExecutor, "{name}");
        let profile = OpProfile::from_host_ops(&ops, &[]);
        assert!(!profile.ops.is_empty(), "{name}");
        let rows = xprof_rows(&dir, "tool_framework_op_stats.json");
        let mut self_differs = Vec::new();
        for op in &profile.ops {
            let row = rows
                .iter()
                .find(|r| r["operation"] == op.name.as_str() && r["type"] == op.category.as_str())
                .unwrap_or_else(|| panic!("{name}: {} ({}) is no XProf row", op.name, op.category));
            let us = |k: &str| row[k].as_f64().unwrap();
            // XProf also counts the events that name the op by a `tf_op` stat (its memory
            // allocations, of no duration) as executions of it.
            assert!(op.occurrences as f64 <= us("occurrences"), "{name}: {}", op.name);
            assert!((op.time.as_us_f64() - us("total_time")).abs() < 1e-3, "{name}: {}", op.name);
            if (op.self_time.as_us_f64() - us("total_self_time")).abs() >= 1e-3 {
                self_differs.push(op.name.clone());
            }
        }
        assert!(self_differs.is_empty(), "{name}: self time differs: {self_differs:?}");
    }
}

/// A TensorFlow GPU capture without HLO: its op timeline's kernels are named by the TensorFlow
/// op that launched them (memory copies keep their own names), and the op profile built on it
/// has their types as categories. Each such op is a device row of XProf's framework-op
/// statistics (same name, its type the category, the same self time less the copies it
/// launched, which keep their direction as category), so a category's time is XProf's time
/// of that type's ops less their copies: on the synthetic capture (XProf's whole table) and the
/// V100 capture with `level 0` read as `tf_op` (the 500 rows XProf lists), whose op profile is
/// the one of the capture as written.
#[test]
fn tf_gpu_op_profile_categories_are_xprofs_framework_op_types() {
    use std::collections::BTreeMap;
    use xlens_roofline::{HostOps, OpProfile, OpSource, keeps_kernel_category};
    let dir = testdata().join("field/tf_v100_multiworker");
    let original = std::fs::read(dir.join("34.83.195.179_6003.xplane.pb")).unwrap();
    let synthetic_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let cases = [
        ("synthetic", synthetic_tf_capture(), synthetic_dir.as_path(), "framework_op_stats_synthetic.json"),
        (
            "tf_v100_multiworker",
            level0_as_tf_op(&original),
            dir.as_path(),
            "tool_framework_op_stats__level0_as_tf_op.json",
        ),
    ];
    for (ctx, bytes, xprof_dir, file) in cases {
        let space = xlens_xplane::Space::parse(bytes.into()).unwrap();
        let ops = HostOps::read(&space).unwrap();
        assert_eq!(ops.source, OpSource::GpuStreams, "{ctx}");
        assert!(!ops.op_types.is_empty(), "{ctx}: kernels named by their op");
        let profile = OpProfile::from_host_ops(&ops, &[]);
        let fw = FrameworkOpStats::read(&space).unwrap();
        // Per op: the time of the copies (and collective kernels) it launched: they keep their
        // own name and category.
        let copies = |name: &str| -> i64 {
            let op = fw.device.iter().find(|o| o.name == name).unwrap();
            op.kernels.iter().filter(|k| keeps_kernel_category(&k.0)).map(|k| k.2.0).sum()
        };
        let rows = xprof_rows(xprof_dir, file);
        let mut checked = 0;
        for r in rows.iter().filter(|r| side_of(r) == OpSide::Device && r["type"] != "IDLE") {
            let name = r["operation"].as_str().unwrap();
            let without_copies = num(r, "total_self_time") - copies(name) as f64 / 1e6;
            match profile.ops.iter().find(|o| o.name == name) {
                Some(op) => {
                    assert_eq!(op.category, r["type"].as_str().unwrap(), "{ctx}: {name}");
                    assert!(us_eq(without_copies, op.self_time.0), "{ctx}: {name}");
                    assert_eq!(profile.programs.get(&op.program_id).map(String::as_str), Some("TensorFlow executor"));
                    checked += 1;
                }
                // An op that launched copies only.
                None => assert!(without_copies.abs() < 1e-3, "{ctx}: {name} is no op of the profile"),
            }
        }
        assert!(checked > 0, "{ctx}");
        // Per category, over the whole capture: the framework op table's time per type, less
        // the copies; copies by direction; kernels no op names (autotuning) apart.
        let mut ours: BTreeMap<&str, i64> = BTreeMap::new();
        for op in &profile.ops {
            *ours.entry(op.category.as_str()).or_default() += op.self_time.0;
        }
        let mut by_type: BTreeMap<&str, i64> = BTreeMap::new();
        for op in &fw.device {
            *by_type.entry(op.op_type.as_str()).or_default() += op.self_time.0 - copies(&op.name);
        }
        for (t, time) in &by_type {
            assert_eq!(ours.get(t).copied().unwrap_or(0), *time, "{ctx}: {t}");
        }
        assert!(!ours.contains_key("unknown") || ctx == "synthetic", "{ctx}: {ours:?}");
    }
    // The V100 capture as written (`level 0`): the same op profile.
    let as_written = xlens_xplane::Space::parse(original.into()).unwrap();
    let renamed = xlens_xplane::Space::parse(
        level0_as_tf_op(&std::fs::read(dir.join("34.83.195.179_6003.xplane.pb")).unwrap()).into(),
    )
    .unwrap();
    let profile = |s: &xlens_xplane::Space| OpProfile::from_host_ops(&HostOps::read(s).unwrap(), &[]);
    assert_eq!(profile(&as_written).ops, profile(&renamed).ops);
    // The synthetic capture: the cuBLAS kernels are the MatMul, the autotuning kernel no op's.
    let space = xlens_xplane::Space::parse(synthetic_tf_capture().into()).unwrap();
    let p = profile(&space);
    let cat = |name: &str| p.ops.iter().find(|o| o.name == name).map(|o| o.category.clone());
    assert_eq!(cat("model/dense/MatMul").as_deref(), Some("MatMul"));
    assert_eq!(cat("MemcpyH2D").as_deref(), Some(xlens_roofline::MEMCPY_H2D));
    assert_eq!(cat("redzone_checker").as_deref(), Some("unknown"));
    assert!(cat("volta_sgemm_128x64_nn").is_none());
}
