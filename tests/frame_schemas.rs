//! Every table xlens writes (as a polars frame and in the Parquet dataset), its columns and their
//! types, in one place: `docs/frames.md`, generated here (`XLENS_BLESS=1` rewrites it). Numeric
//! columns say their unit in their name (`_ps`, `_us`, `_ms`, `_bytes`, `_pct`, `_per_s`,
//! `_flop_per_byte`, ...) unless they are counts, ids or carry their unit in a column beside them.

mod common;

use std::fmt::Write as _;

use polars::prelude::{DataFrame, DataType};
use xlens::faults::{HostProfile, Profile, ScanConfig, scan};
use xlens::report::frame as report_frame;
use xlens::xplane::{frame as xplane_frame, inventory};

/// Words of a column name that name a unit (`step_time_ms_mean`, `bytes_per_param`, `flop_per_s`).
const UNITS: &[&str] = &["ps", "us", "ms", "ns", "bytes", "pct", "ulps", "gib", "bits", "s", "byte"];

/// Numeric columns without a unit suffix, and why that is right.
const UNITLESS: &[(&str, &str)] = &[
    ("occurrences", "a count"),
    ("kernels", "a count of the distinct kernels a framework op launched"),
    ("number", "a step number"),
    ("index", "a position"),
    ("program_id", "an id"),
    ("line_id", "an id"),
    ("events", "a count"),
    ("cores", "a count"),
    ("cores_per_chip", "a count"),
    ("total_modules", "a count of programs (memory: XProf's `get_peak_allocations` key)"),
    ("allocations", "a count of allocation events (memory: an allocator's)"),
    ("deallocations", "a count of deallocation events (memory: an allocator's)"),
    ("events_beyond_limit", "a count of events (memory: those of memory ids over the limit)"),
    ("flops", "a count of floating-point operations (XLA's cost analysis name)"),
    ("xprof_flops", "floating-point operations as XProf counts them (per launch)"),
    ("transcendentals", "a count"),
    ("instructions", "a count"),
    ("value", "a metric's value, its unit in `unit`"),
    ("evidence_count", "a count"),
    ("step_count", "a count"),
    ("source_line", "a line number"),
    ("m", "a matrix dimension"),
    ("k", "a matrix dimension"),
    ("n", "a matrix dimension"),
    ("max_abs", "an error in the operands' own unit"),
    ("rel_frobenius", "a relative error (ratio)"),
    ("rel_error", "a relative error (ratio)"),
    ("bound", "an error bound (ratio)"),
    ("estimate", "an error estimate (ratio)"),
    ("first_order", "an error estimate (ratio)"),
    ("min_chips", "a count"),
    ("chips", "a count"),
    ("max_batch", "a count"),
    ("batch", "a count"),
    ("seq", "a count of tokens"),
    ("params", "a count"),
    ("budget", "a fraction of HBM"),
    ("group_size", "a count"),
    ("groups", "a count"),
    ("channel_id", "an id"),
    ("int", "a stat's value as the profile stores it (its unit is the stat's)"),
    ("uint", "a stat's value as the profile stores it (its unit is the stat's)"),
    ("double", "a stat's value as the profile stores it (its unit is the stat's)"),
    ("base", "a diff's figure in the base run, its unit in the metric's name (`idle_pct`)"),
    ("new", "a diff's figure in the new run, its unit in the metric's name"),
    ("delta", "new minus base, in the metric's unit"),
    ("step_index", "a position"),
    ("repeat_index", "which run of its side (a position among repeated runs)"),
    ("calls", "a count of a tf.data pipeline's calls"),
    ("slow_calls", "a count of a tf.data pipeline's calls over 50 us"),
    ("iterator_calls", "a count of an iterator's calls in the pipeline's slowest call"),
];

/// What a table's columns mean where their name and type do not say it all, printed under it.
const NOTES: &[(&str, &str)] = &[
    (
        "tf_data",
        "Written only for a host with `tf.data` iterator events: XProf's `tf.data` bottleneck analysis, a row per \
         iterator of each pipeline's slowest call (`pipeline`: `Host:N` or `Device:N`, slowest first; the pipeline's \
         own columns repeat on its rows). `self_time_ps` is the iterator's time less what the iterators it called \
         overlap of it, producers on background threads linked to the call that awaited their element; `blocking`: \
         the call waited for it; `bottleneck`: the blocking iterator with the largest self time. `stage_kind`: \
         `python_generator`, `source`, `data_service`, `remote_source`, `parallelisable`, `parallel`, \
         `sequential` or `other`. `iterator_id` is a decimal string (ids run past 2^63).",
    ),
    (
        "framework_ops",
        "Written only for a host without HLO whose kernels name their TensorFlow op (TensorFlow without XLA): \
         XProf's framework-op statistics, a row per op and an `IDLE` row per side (`side`: `Device`, `Host`). \
         `share_pct` is the op's self time over its side's total, idle included. `kernels` counts the distinct \
         kernels and copies a device op launched. `attribution` is the stat that named the kernels' ops: `tf_op`, \
         `level_0` (TensorFlow 2.2-2.4, which XProf 2.24 no longer reads) or `none`.",
    ),
    (
        "metrics",
        "A row per health figure of a host (docs/metrics.md). A scan of several hosts also writes \
         `session_metrics`, with the same columns: the report's own figures (its step time the slowest \
         host's per step), which no host's table holds. The profile's framework is three rows of words \
         (`text`): `framework` (`jax`, `tensorflow`, `pytorch_xla` or `unknown`, the JSON's `framework.name`), \
         `framework_xla` (`true` or `false`) and `framework_evidence` (what in the capture says so).",
    ),
    (
        "evidence",
        "A row per evidence item of a finding, in its order (`index`). For metrics (`kind` = `metric`), `key` is \
     the metric's stable machine name (`exposed_collective_time`, `idle_share`: snake_case, unique within a \
     finding): it names the quantity, not the unit it is shown in, and stays the same across releases and \
     across time bases, while `name` is its label in words and may change (it reads \"per module execution\" \
     where a per-step profile reads \"per step\"). Select a figure by `id` and `key`; `unit` says the unit of \
     `value` (a time is in `ms` or `us`, whichever reads best). `key`, `name`, `value` and `unit` are null for \
     events, instructions and notes (`key` also for a metric of a report read back from JSON, which does not \
     carry keys). `session_evidence` has the same columns.",
    ),
];

fn describe(out: &mut String, table: &str, df: &DataFrame, bad: &mut Vec<String>) {
    let _ = writeln!(out, "## `{table}`\n\n| column | type |\n|---|---|");
    for column in df.columns() {
        let name = column.name().as_str();
        let dtype = column.dtype();
        let _ = writeln!(out, "| `{name}` | {dtype} |");
        let numeric = dtype.is_primitive_numeric() && *dtype != DataType::Boolean;
        let has_unit = name.split('_').any(|word| UNITS.contains(&word));
        if numeric && !has_unit && !UNITLESS.iter().any(|(n, _)| *n == name) {
            bad.push(format!("{table}.{name}"));
        }
    }
    out.push('\n');
    for (_, note) in NOTES.iter().filter(|(t, _)| *t == table) {
        let _ = writeln!(out, "{note}\n");
    }
}

#[test]
fn frame_schemas_are_documented_and_carry_units() {
    let root = common::root();
    let tpu = xlens_testkit::open_session(root.join("testdata/tpu/tpu_basic")).unwrap();
    let cpu = xlens_testkit::open_session(root.join("testdata/real/sharded_collectives")).unwrap();
    let mut out = String::from(
        "# Frames and the Parquet dataset\n\nGenerated by `cargo test -p xlens --test frame_schemas` (set \
         `XLENS_BLESS=1` to rewrite). Every table is a polars `DataFrame` (the `frames` feature) and, for the \
         scan's tables, a Parquet dataset `DIR/<table>/host=<host>/part-<scan>.parquet` whose files add \
         `host_name` and `scan` (README, \"Scanning a 1000-host session\"). Numeric columns name their unit; \
         the few that do not are counts, ids or ratios (see `tests/frame_schemas.rs`).\n\n",
    );
    let mut bad = Vec::new();
    let space = tpu.hosts()[0].space();
    let planes = inventory(space).unwrap();
    describe(&mut out, "inventory", &xplane_frame::inventory_frame(&[("host0", planes)]).unwrap(), &mut bad);
    let events = xplane_frame::events_frame(space, &xplane_frame::EventSelection::default()).unwrap();
    describe(&mut out, "events", &events, &mut bad);
    describe(&mut out, "plane_stats", &xplane_frame::plane_stats_frame(space).unwrap(), &mut bad);
    let (modules, _) = xlens::hlo::modules_from_space(cpu.hosts()[0].space());
    let refs: Vec<&xlens::hlo::Module> = modules.iter().collect();
    describe(&mut out, "hlo_instructions", &xlens::hlo::frame::instructions_frame(&refs).unwrap(), &mut bad);
    describe(&mut out, "hlo_computations", &xlens::hlo::frame::computations_frame(&refs).unwrap(), &mut bad);
    describe(&mut out, "hlo_collectives", &xlens::hlo::frame::collectives_frame(&refs).unwrap(), &mut bad);
    let chips: Vec<_> = xlens::roofline::chips::CATALOGUE.iter().collect();
    describe(&mut out, "chips", &xlens::roofline::frame::chips_frame(&chips).unwrap(), &mut bad);
    let profile = Profile::new(
        None,
        vec![HostProfile::new(
            "host0",
            xlens::xplane::Space::parse(
                std::fs::read(root.join("testdata/tpu/tpu_basic/host0.xplane.pb")).unwrap().into(),
            )
            .unwrap(),
        )],
    );
    let host = &profile.hosts()[0];
    let steps = host.steps().unwrap();
    let ops = host.op_profile().unwrap();
    describe(&mut out, "steps", &xlens::roofline::frame::steps_frame(steps).unwrap(), &mut bad);
    let anatomy = xlens::roofline::frame::anatomy_frame(steps, host.anatomy().unwrap()).unwrap();
    describe(&mut out, "anatomy", &anatomy, &mut bad);
    describe(&mut out, "op_profile", &xlens::roofline::frame::op_profile_frame(ops).unwrap(), &mut bad);
    describe(&mut out, "categories", &xlens::roofline::frame::categories_frame(ops).unwrap(), &mut bad);
    let tf = xlens_testkit::open_session(root.join("testdata/field/tf_v100_multiworker")).unwrap();
    let fw = xlens::roofline::framework_op_analysis(tf.hosts()[0].space()).unwrap().unwrap();
    describe(&mut out, "framework_ops", &xlens::roofline::frame::framework_ops_frame(&fw).unwrap(), &mut bad);
    let keras = xlens_testkit::open_session(root.join("testdata/field/tf_cpu_keras_input_bound")).unwrap();
    let tf_data =
        xlens::roofline::TfDataPipelines::read(keras.hosts()[0].space().host_threads().unwrap()).unwrap().unwrap();
    describe(&mut out, "tf_data", &xlens::roofline::frame::tf_data_frame(&tf_data).unwrap(), &mut bad);
    let report = scan(&profile, &ScanConfig::default());
    describe(&mut out, "findings", &report_frame::findings_frame(&report).unwrap(), &mut bad);
    describe(&mut out, "evidence", &report_frame::evidence_frame(&report).unwrap(), &mut bad);
    describe(&mut out, "hosts", &report_frame::hosts_frame(&report).unwrap(), &mut bad);
    describe(&mut out, "skipped", &report_frame::skipped_frame(&report).unwrap(), &mut bad);
    describe(&mut out, "metrics", &report_frame::metrics_frame(host).unwrap(), &mut bad);
    let d = xlens::report::diff::diff(&report, &report, &xlens::report::diff::DiffConfig::default());
    for (table, df) in report_frame::diff_frames(&d).unwrap() {
        describe(&mut out, table, &df, &mut bad);
    }
    describe(&mut out, "budget_plans", &xlens::budget::frame::plans_frame(&[]).unwrap(), &mut bad);
    describe(&mut out, "budget_fit", &xlens::budget::frame::fit_frame(&[]).unwrap(), &mut bad);
    describe(&mut out, "precision_audit", &xlens::budget::frame::audit_frame(&[]).unwrap(), &mut bad);
    describe(&mut out, "precision_drift", &xlens::budget::frame::drift_frame(&[]).unwrap(), &mut bad);

    let path = root.join("docs/frames.md");
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, &out).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(expected == out, "docs/frames.md is stale: run with XLENS_BLESS=1");
    assert!(bad.is_empty(), "numeric columns without a unit in their name: {bad:?}");
}

/// The evidence frame's `key` column is each metric's key, in the findings' order (null for the
/// other kinds of evidence), on a profile of every kind of device.
#[test]
fn the_evidence_frame_keys_each_metric() {
    for rel in ["testdata/corpus/recompilation", "testdata/tpu/tpu_vector_bound", "testdata/gpu/gpu_launch_bound"] {
        let session = xlens_testkit::open_session(common::root().join(rel)).unwrap();
        let report = scan(&Profile::from_session(session), &ScanConfig::default());
        let keys: Vec<Option<&str>> = report.findings.iter().flat_map(|f| &f.evidence).map(|e| e.key()).collect();
        assert!(keys.iter().any(Option::is_some), "{rel}: no metric");
        let frame = report_frame::evidence_frame(&report).unwrap();
        let column: Vec<Option<&str>> = frame.column("key").unwrap().str().unwrap().iter().collect();
        assert_eq!(column, keys, "{rel}");
    }
}

/// JSON keys of numbers that are not a quantity with a unit, and why.
const JSON_UNITLESS: &[(&str, &str)] = &[
    ("occurrences", "a count"),
    ("step_count", "a count"),
    ("cores", "a count"),
    ("hosts", "a count (diff and runs: the hosts of a run)"),
    ("findings", "a count (runs: the findings of a run)"),
    ("hlo_programs", "a count"),
    ("program_id", "an id"),
    ("registers_per_thread", "a count"),
    ("block", "launch dimensions"),
    ("grid", "launch dimensions"),
    ("flops", "a count of floating-point operations"),
    ("xprof_flops", "a count of floating-point operations"),
    ("entry_flops", "a count of floating-point operations"),
    ("aliased_params", "a count"),
    ("collectives", "a count"),
    ("computations", "a count"),
    ("instructions", "a count"),
    ("events", "a count"),
    ("steps", "a count"),
    ("value", "an evidence metric's value, its unit in `unit` beside it"),
    ("pct", "a share, in % (the key is the unit)"),
    ("count", "a count of events (events: XProf's `aggregate_xplane_events` key)"),
    ("returned", "a count of rows (events: XProf's key)"),
    ("total_matched", "a count of groups or events (events: XProf's key)"),
    ("events_scanned", "a count of events (events: XProf's key)"),
    ("event_count", "a count of events (events --lines: XProf's `list_xplane_lines` key)"),
    ("total_events", "a count of events (events --lines: XProf's key)"),
    ("empty_lines", "a count of lines"),
    ("devices", "a count (device: a host's TPU cores or GPUs)"),
    ("cores_per_chip", "a count"),
    ("total_modules", "a count of programs (memory: XProf's `get_peak_allocations` key)"),
    ("allocations", "a count of allocation events (memory: an allocator's)"),
    ("deallocations", "a count of deallocation events (memory: an allocator's)"),
    ("events_beyond_limit", "a count of events (memory: those of memory ids over the limit)"),
];

/// Objects whose keys are names (opcodes, plane names) and whose numbers are counts.
const JSON_COUNT_MAPS: &[&str] = &["opcodes", "counts"];

/// Every numeric JSON key of `v` (the object key above an array's numbers), with the key of the
/// object it sits in.
fn numeric_keys(
    v: &serde_json::Value,
    key: &str,
    parent: &str,
    out: &mut std::collections::BTreeSet<(String, String)>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                numeric_keys(x, k, key, out);
            }
        }
        serde_json::Value::Array(items) => {
            for x in items {
                numeric_keys(x, key, parent, out);
            }
        }
        serde_json::Value::Number(_) => {
            out.insert((key.to_owned(), parent.to_owned()));
        }
        _ => {}
    }
}

/// The unit convention of issue 39 for the JSON documents, as `frame_schemas_are_documented_and_carry_units`
/// holds it for the Parquet columns: every numeric key of the scan, ops, kernels, inventory, hlo, events, device, memory,
/// diff and runs JSON names its unit, is a count or id listed in [`JSON_UNITLESS`], or sits in an object
/// keyed by unit (`categories_us`) or by name with counts ([`JSON_COUNT_MAPS`]).
#[test]
fn json_keys_carry_units() {
    let root = common::root();
    let bin = env!("CARGO_BIN_EXE_xlens");
    let mut keys = std::collections::BTreeSet::new();
    let at = |rel: &str| root.join(rel).display().to_string();
    let logdir =
        common::logdir_of("units", &[("2026_01_01_10_00_00", "clean"), ("2026_02_02_11_00_00", "host_callback")]);
    let runs: Vec<String> = vec!["runs".into(), logdir.display().to_string(), "--no-cache".into()];
    for args in [
        vec!["scan".into(), at("testdata/h200/h200_bf16_no_graphs")],
        vec!["scan".into(), at("testdata/tpu/tpu_two_hosts_clean")],
        vec!["scan".into(), at("testdata/corpus/host_callback")],
        vec!["ops".into(), at("testdata/h200/h200_bf16_no_graphs")],
        vec!["ops".into(), at("testdata/tpu/tpu_basic")],
        vec!["kernels".into(), at("testdata/field/amd_conv3d_jax08")],
        vec!["inventory".into(), at("testdata/tpu/tpu_basic")],
        vec!["hlo".into(), at("testdata/corpus/host_callback")],
        vec!["events".into(), at("testdata/tpu/tpu_basic"), "--group-by".into(), "line".into()],
        vec!["events".into(), at("testdata/corpus/clean"), "--list".into(), "--pattern".into(), "^train$".into()],
        vec!["events".into(), at("testdata/field/amd_jax08_gemm"), "--lines".into()],
        vec!["device".into(), at("testdata/field/tpu_v6e_host_offload")],
        vec!["device".into(), at("testdata/h200/h200_bf16_no_graphs")],
        vec!["memory".into(), at("testdata/field/amd_te_fused_attn")],
        vec!["diff".into(), at("testdata/h200/h200_bf16_graphs"), at("testdata/h200/h200_bf16_no_graphs")],
        vec!["diff".into(), at("testdata/corpus/clean"), at("testdata/corpus/host_callback")],
        runs,
    ] {
        let out = std::process::Command::new(bin).args(&args).arg("--json").output().unwrap();
        let cmd = args.join(" ");
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        numeric_keys(&v, "", "", &mut keys);
    }
    let unit = |k: &str| k.split(['_', ' ']).any(|w| UNITS.contains(&w));
    let bad: Vec<String> = keys
        .iter()
        .filter(|(k, parent)| {
            !unit(k)
                && !unit(parent)
                && !JSON_COUNT_MAPS.contains(&parent.as_str())
                && !JSON_UNITLESS.iter().any(|(n, _)| n == k)
        })
        .map(|(k, parent)| format!("{parent}.{k}"))
        .collect();
    let _ = std::fs::remove_dir_all(&logdir);
    assert!(bad.is_empty(), "numeric JSON keys without a unit: {bad:?}");
}
