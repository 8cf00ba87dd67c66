//! The framework op profile in the outputs: on a capture without HLO whose kernels name their
//! TensorFlow op, `ops` prints the framework ops instead of the kernel table, `ops --json` adds
//! `framework_ops` (equal to the analysis, which `roofline/tests/xprof_framework_ops.rs` holds to
//! XProf's framework-op statistics), the HTML page has a framework-op section and the Parquet
//! dataset a `framework_ops` table; on XLA captures (JAX) none of them appears.

use std::path::PathBuf;

use xlens::documents::{host_op_profiles, op_profile_document};
use xlens::faults::{Profile, ScanConfig, scan};
use xlens::report::tables::op_profile::op_profile_text;
use xlens::roofline::{DeviceAttribution, framework_op_analysis};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const TF: &str = "testdata/field/tf_v100_multiworker";

/// XLA captures of several shapes: AMD and NVIDIA GPUs, TPU, CPU.
const XLA: &[&str] = &[
    "testdata/field/amd_te_fused_attn",
    "testdata/field/amd_jax08_gemm",
    "testdata/field/tpu_v6e_host_offload",
    "testdata/gpu/gpu_healthy",
    "testdata/h200/h200_train_bf16",
    "testdata/tpu/tpu_basic",
    "testdata/real/sharded_collectives",
    "testdata/corpus/clean",
    "testdata/field/tf_cpu_keras_xla",
];

/// TensorFlow on the CPU alone, without XLA: no device plane, every op on the host's executor.
const TF_CPU: &[&str] = &[
    "testdata/field/tf_cpu_keras_steady",
    "testdata/field/tf_cpu_keras_input_bound",
    "testdata/field/tf_cpu_keras_warmup",
];

#[test]
fn ops_json_and_text_give_the_framework_ops_of_a_tf_capture() {
    let session = xlens_testkit::open_session(root().join(TF)).unwrap();
    let fw = framework_op_analysis(session.hosts()[0].space()).unwrap().unwrap();
    assert_eq!(fw.attribution, DeviceAttribution::Level0);
    let ops = host_op_profiles(&root().join(TF)).unwrap();
    let doc = op_profile_document(&ops);
    let host = &doc["hosts"][0];
    let f = &host["framework_ops"];
    assert_eq!(f["attribution"], "level_0");
    assert_eq!(f["device"]["ops"].as_array().unwrap().len(), fw.device.len());
    assert_eq!(f["host"]["ops"].as_array().unwrap().len(), fw.host.len());
    assert_eq!(f["device"]["total_us"].as_f64().unwrap(), fw.device_total.as_us_f64());
    assert_eq!(f["host"]["idle_us"].as_f64().unwrap(), fw.host_idle().as_us_f64());
    let first = &f["host"]["ops"][0];
    assert_eq!((first["type"].as_str(), first["name"].as_str()), (Some("Dataset"), Some("Iterator::Prefetch")));
    // Every device op names the kernels it launched, and their time is the op's.
    for op in f["device"]["ops"].as_array().unwrap() {
        let kernels = op["kernels"].as_array().unwrap();
        assert!(!kernels.is_empty());
        let sum: f64 = kernels.iter().map(|k| k["total_us"].as_f64().unwrap()).sum();
        assert!((sum - op["total_us"].as_f64().unwrap()).abs() < 1e-6, "{op}");
    }
    // The keys of XLA captures are all still there.
    for key in ["host", "device", "steps", "step_time_ms_mean", "categories_us", "ops", "anatomy"] {
        assert!(host.get(key).is_some(), "{key}");
    }
    let text = op_profile_text(&ops.hosts[0], 5);
    assert!(text.contains("framework ops (no HLO"), "{text}");
    assert!(text.contains("Iterator::Prefetch") && !text.contains("ops by self time"), "{text}");
    assert!(text.contains("`level 0`"), "{text}");
}

#[test]
fn the_page_and_the_dataset_carry_the_framework_ops_of_a_tf_capture_only() {
    let check = |rel: &str, tf: bool| {
        let profile = Profile::from_session(xlens_testkit::open_session(root().join(rel)).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        let page = xlens::report::render::html(&report);
        assert_eq!(page.contains("id=\"framework-ops\""), tf, "{rel}");
        let dir =
            std::env::temp_dir().join(format!("xlens-framework-ops-{}-{}", rel.replace('/', "_"), std::process::id()));
        let written = xlens::report::frame::write_parquet(&profile, &report, &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let has_table = written.iter().any(|p| p.components().any(|c| c.as_os_str() == "framework_ops"));
        assert_eq!(has_table, tf, "{rel}");
        if tf {
            assert!(page.contains("Slowest framework ops"), "{rel}");
        }
        if rel == TF {
            assert!(page.contains("Iterator::Prefetch"));
        }
    };
    check(TF, true);
    for rel in TF_CPU {
        check(rel, true);
    }
    for rel in XLA {
        check(rel, false);
    }
}

#[test]
fn xla_captures_have_no_framework_op_table() {
    for rel in XLA {
        let session = xlens_testkit::open_session(root().join(rel)).unwrap();
        for host in session.hosts() {
            assert!(framework_op_analysis(host.space()).is_none(), "{rel}");
        }
        let ops = host_op_profiles(&root().join(rel)).unwrap();
        let doc = op_profile_document(&ops);
        for host in doc["hosts"].as_array().unwrap() {
            assert!(host.get("framework_ops").is_none(), "{rel}");
        }
    }
}

/// The scan of a TensorFlow capture made on the CPU alone: its device is the executor's threads
/// (their count the cores), busy the time they ran ops in the steps (not the 0 % of a device
/// that never ran), and the slowest ops are its framework ops.
#[test]
fn a_cpu_only_tf_scan_takes_its_device_figures_from_the_executor() {
    for rel in TF_CPU {
        let profile = Profile::from_session(xlens_testkit::open_session(root().join(rel)).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        let host = &profile.hosts()[0];
        let fw = framework_op_analysis(host.space()).unwrap().unwrap();
        assert!(fw.device.is_empty() && !fw.host.is_empty(), "{rel}");
        let steps = host.steps().unwrap();
        let windows: Vec<_> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
        let busy = xlens::roofline::FrameworkOpStats::executor_busy(host.space(), &windows).unwrap();
        assert_eq!(report.profile.cores, busy.threads, "{rel}");
        assert!(report.profile.cores > 0, "{rel}");
        let total: i64 = steps.steps.iter().map(|s| s.duration.0).sum();
        let pct = 100.0 * busy.busy.iter().map(|b| b.0).sum::<i64>() as f64 / total as f64;
        let m = &report.metrics;
        assert!((m.device_busy_pct.unwrap() - pct).abs() < 1e-9, "{rel}");
        assert!(pct > 5.0 && pct < 100.0, "{rel}: {pct}");
        assert!((m.device_busy_pct.unwrap() + m.idle_pct.unwrap() - 100.0).abs() < 1e-9, "{rel}");
        let names: Vec<&str> = m.slowest_ops.iter().map(|o| o.name.as_str()).collect();
        let theirs: Vec<&str> = fw.host.iter().take(5).map(|o| o.name.as_str()).collect();
        assert_eq!(names, theirs, "{rel}");
        let text = xlens::report::render::text(&report);
        assert!(!text.contains("0 core(s)") && text.contains("Slowest ops"), "{rel}: {text}");
    }
}

/// A small TensorFlow GPU capture without XLA: one GPU whose kernels name their op by `tf_op`
/// (a MatMul of two kernels launched twice, a BiasAdd, a Conv2D whose cuDNN kernel outlasts
/// both, a copy for `IteratorGetNext`, an NCCL all-reduce kernel for a `NcclAllReduce`), an
/// autotuning kernel that names none, and the `TensorFlow Ops` line TensorFlow derives;
/// written as a session folder named after `name` (one per test).
fn synthetic_tf_gpu_dir(name: &str) -> PathBuf {
    use xlens_xplane::{SpaceBuilder, names};
    const US: i64 = 1_000_000;
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, names::plane::HOST_CPU);
        let process = plane.event_metadata("ExecutorState::Process");
        let mut line = plane.line(11, "tf_Compute/11", 1_000);
        line.event(process, 0, 900 * US);
    }
    {
        let mut plane = b.plane(10, "/device:GPU:0");
        let tf_op = plane.stat_metadata(names::stat::TF_OP);
        let sgemm = plane.event_metadata("volta_sgemm_128x64_nn");
        let reduce = plane.event_metadata("splitKreduce_kernel");
        let bias = plane.event_metadata("BiasNHWCKernel");
        let conv = plane.event_metadata("volta_scudnn_128x64_relu_interior_nn_v1");
        let redzone = plane.event_metadata("redzone_checker");
        let copy = plane.event_metadata("MemcpyH2D");
        let nccl = plane.event_metadata("ncclKernel_AllReduce_RING_LL_Sum_float");
        let op_line = plane.event_metadata("model/dense/MatMul");
        {
            let mut line = plane.line(7, "Stream #7(Compute)", 1_000);
            line.event(redzone, 0, 3 * US);
            for step in 0..2 {
                let t = 10 * US + step * 400 * US;
                line.event(sgemm, t, 30 * US).stat(tf_op, "model/dense/MatMul:MatMul");
                line.event(reduce, t + 40 * US, 2 * US).stat(tf_op, "model/dense/MatMul:MatMul");
                line.event(bias, t + 60 * US, 4 * US).stat(tf_op, "model/dense/BiasAdd:BiasAdd");
                line.event(conv, t + 70 * US, 90 * US).stat(tf_op, "model/conv/Conv2D:Conv2D");
            }
        }
        {
            let mut line = plane.line(8, "Stream #8(MemcpyH2D)", 1_000);
            line.event(copy, 2 * US, 5 * US).stat(tf_op, "IteratorGetNext:IteratorGetNext");
        }
        {
            let mut line = plane.line(9, "Stream #9(Compute)", 1_000);
            line.event(nccl, 300 * US, 20 * US).stat(tf_op, "model/NcclAllReduce:NcclAllReduce");
        }
        {
            let mut line = plane.line(names::line::DERIVED_ID_MIN + 3, names::line::TENSORFLOW_OPS, 1_000);
            for step in 0..2 {
                line.event(op_line, 10 * US + step * 400 * US, 32 * US);
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("xlens-tf-gpu-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("host.xplane.pb"), b.finish()).unwrap();
    dir
}

/// A GPU capture without HLO whose kernels name their TensorFlow op: the scan's slowest ops
/// are its framework device ops (type, self time, share of the device's op time, how many
/// kernels each launched) in the JSON, the text and the page, the rows `ops --json` lists
/// first; never the kernels (category unknown, program `(0)`). XLA captures keep their HLO
/// ops.
#[test]
fn a_tf_gpu_scans_slowest_ops_are_its_framework_device_ops() {
    let synthetic = synthetic_tf_gpu_dir("slowest");
    for dir in [root().join(TF), synthetic.clone()] {
        let ctx = dir.display().to_string();
        let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        let doc = op_profile_document(&host_op_profiles(&dir).unwrap());
        let rows = doc["hosts"][0]["framework_ops"]["device"]["ops"].as_array().unwrap().clone();
        let op_time: f64 = rows.iter().map(|r| r["self_us"].as_f64().unwrap()).sum();
        let slowest = &report.metrics.slowest_ops;
        assert_eq!(slowest.len(), rows.len().min(5), "{ctx}");
        for (ours, theirs) in slowest.iter().zip(&rows) {
            assert_eq!(ours.name, theirs["name"].as_str().unwrap(), "{ctx}");
            assert_eq!(ours.category, theirs["type"].as_str().unwrap(), "{ctx}");
            assert_eq!(ours.program, "TensorFlow device ops", "{ctx}");
            let us = theirs["self_us"].as_f64().unwrap();
            assert!((ours.self_time_ms * 1e3 - us).abs() < 1e-6, "{ctx}: {}", ours.name);
            assert!((ours.pct - 100.0 * us / op_time).abs() < 1e-9, "{ctx}: {}", ours.name);
            assert_eq!(ours.kernels, Some(theirs["kernels"].as_array().unwrap().len()), "{ctx}");
        }
        let json: serde_json::Value = serde_json::from_str(&xlens::report::render::json(&report)).unwrap();
        assert_eq!(json["metrics"]["slowest_ops"][0]["kernels"].as_u64(), slowest[0].kernels.map(|k| k as u64));
        let text = xlens::report::render::text(&report);
        let block: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("Slowest ops"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert_eq!(block.len(), slowest.len(), "{ctx}: {text}");
        for l in &block {
            assert!(l.contains("TensorFlow device ops (") && !l.contains(" unknown "), "{ctx}: {l}");
        }
        let page = xlens::report::render::html(&report);
        let table = page.split("<h2 id=\"ops\">Slowest ops</h2>").nth(1).unwrap_or_else(|| panic!("{ctx}"));
        for op in slowest {
            let name = op.name.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
            assert!(table.contains(&format!("<code title=\"TensorFlow device ops\">{name}</code>")), "{ctx}");
        }
    }
    // The synthetic capture's slowest op is the Conv2D, not its cuDNN kernel.
    let profile = Profile::from_session(xlens_testkit::open_session(&synthetic).unwrap());
    let report = scan(&profile, &ScanConfig::default());
    let first = &report.metrics.slowest_ops[0];
    assert_eq!((first.name.as_str(), first.category.as_str(), first.kernels), ("model/conv/Conv2D", "Conv2D", Some(1)));
    let matmul = report.metrics.slowest_ops.iter().find(|o| o.category == "MatMul").unwrap();
    assert_eq!(matmul.kernels, Some(2));
    let _ = std::fs::remove_dir_all(&synthetic);
    for rel in XLA {
        let profile = Profile::from_session(xlens_testkit::open_session(root().join(rel)).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        for op in &report.metrics.slowest_ops {
            assert!(op.kernels.is_none() && op.program != "TensorFlow device ops", "{rel}: {}", op.name);
        }
    }
}

/// TensorFlow on the CPU alone: the executor's ops are the op timeline, so the detectors that
/// read one run (none is "not checked" for want of op events), the comparison categories are
/// their op types, and the step anatomy's busy time is the executor's; the verdicts stay those
/// of the input pipeline and warm-up checks (`input_starvation` at 55.5 % on the input-bound
/// capture, `profile_during_warmup` on the first-step one, no P0/P1 on the steady one).
#[test]
fn a_cpu_only_tf_scan_checks_the_op_timeline_detectors_on_the_executors_ops() {
    use xlens::faults::Severity;
    for rel in TF_CPU {
        let profile = Profile::from_session(xlens_testkit::open_session(root().join(rel)).unwrap());
        let host = &profile.hosts()[0];
        assert_eq!(host.host_ops().source, xlens::roofline::OpSource::TfExecutor, "{rel}");
        let report = scan(&profile, &ScanConfig::default());
        for id in ["exposed_collective", "exposed_async_copy", "host_callback_stall", "device_idle", "barrier_in_loop"]
        {
            let skip = report.skipped.iter().find(|k| k.id == id);
            assert!(skip.is_none_or(|k| !k.reason.contains("no op events")), "{rel}: {id} {skip:?}");
        }
        let json: serde_json::Value = serde_json::from_str(&xlens::report::render::json(&report)).unwrap();
        let cats = json["comparison"]["categories"].as_array().unwrap();
        assert!(cats.iter().any(|c| c["category"].as_str().is_some_and(|c| c.contains("Conv2D"))), "{rel}");
        let serious: Vec<&str> =
            report.findings.iter().filter(|f| f.severity <= Severity::P1).map(|f| f.id.as_str()).collect();
        match rel.rsplit('_').next().unwrap() {
            "warmup" => assert_eq!(serious, ["profile_during_warmup"], "{rel}"),
            "bound" => {
                assert_eq!(serious, ["input_starvation"], "{rel}");
                assert!((report.findings[0].impact.pct_of_step - 55.5).abs() < 0.05, "{rel}");
            }
            _ => assert!(serious.is_empty(), "{rel}: {serious:?}"),
        }
        // The anatomy's busy time is the executor's.
        let steps = host.steps().unwrap();
        let windows: Vec<_> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
        let busy = xlens::roofline::FrameworkOpStats::executor_busy(host.space(), &windows).unwrap();
        let anatomy = host.anatomy().unwrap();
        let compute: i64 = anatomy.iter().map(|a| a.step_time.0 - a.idle.0 - a.host.0).sum();
        assert_eq!(compute, busy.busy.iter().map(|b| b.0).sum::<i64>(), "{rel}");
    }
}

/// The framework op table's device time per op type, less the kernels that keep their own
/// category (copies, collective library kernels): what each TensorFlow type's category holds.
fn framework_time_by_type(fw: &xlens::roofline::FrameworkOpStats) -> std::collections::BTreeMap<String, f64> {
    let mut by_type = std::collections::BTreeMap::new();
    for op in &fw.device {
        let kept: i64 = op.kernels.iter().filter(|k| xlens::roofline::keeps_kernel_category(&k.0)).map(|k| k.2.0).sum();
        *by_type.entry(op.op_type.clone()).or_insert(0.0) += (op.self_time.0 - kept) as f64 / 1e6;
    }
    by_type
}

/// A GPU capture without HLO whose kernels name their TensorFlow op: device time is
/// categorised by the type of the op that launched each kernel (cuDNN and cuBLAS kernels count
/// as `Conv2D` and `MatMul`, never `unknown`), copies by direction and NCCL kernels by
/// collective, one value everywhere: `ops --json` and `ops` text, the scan's comparison
/// categories, the page's "Time by category" chart and the Parquet `categories` table, each
/// type's time the framework op table's; the step anatomy counts the matrix ops as matmul and
/// the all-reduce as communication.
#[test]
fn a_tf_gpu_captures_categories_are_its_op_types_in_every_output() {
    let synthetic = synthetic_tf_gpu_dir("categories");
    for dir in [root().join(TF), synthetic.clone()] {
        let ctx = dir.display().to_string();
        let session = xlens_testkit::open_session(&dir).unwrap();
        let fw = framework_op_analysis(session.hosts()[0].space()).unwrap().unwrap();
        let ops = host_op_profiles(&dir).unwrap();
        let doc = op_profile_document(&ops);
        let cats = doc["hosts"][0]["categories_us"].as_object().unwrap().clone();
        let by_type = framework_time_by_type(&fw);
        for (t, us) in &by_type {
            let ours = cats.get(t).and_then(|v| v.as_f64()).unwrap_or(0.0);
            assert!((ours - us).abs() < 1e-3, "{ctx}: {t} {ours} us, framework ops {us} us");
        }
        for op in doc["hosts"][0]["ops"].as_array().unwrap() {
            let name = op["name"].as_str().unwrap();
            assert!(
                op["category"] != "unknown" || name == "redzone_checker",
                "{ctx}: {name} is unknown but launched by an op"
            );
            assert_eq!(op["program"], "TensorFlow executor", "{ctx}");
        }
        // The text prints the same categories.
        let text = op_profile_text(&ops.hosts[0], 5);
        for (name, us) in &cats {
            let line = text
                .lines()
                .skip_while(|l| !l.starts_with("categories"))
                .find(|l| l.trim_start().starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{ctx}: {name} not in {text}"));
            assert!(line.contains(&format!("{:.3} us", us.as_f64().unwrap())), "{ctx}: {line}");
        }
        // The scan: its comparison categories (per step, within the steps) are op-profile
        // categories; the page's chart and the Parquet table carry the capture's totals.
        let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
        let report = scan(&profile, &ScanConfig::default());
        assert!(!report.comparison.categories.is_empty(), "{ctx}");
        for c in &report.comparison.categories {
            assert!(cats.contains_key(&c.category), "{ctx}: {}", c.category);
        }
        let page = xlens::report::render::html(&report);
        let chart = page.split("<h2 id=\"categories\">").nth(1).unwrap_or_else(|| panic!("{ctx}"));
        let chart = chart.split("<h2").next().unwrap();
        let frames = std::env::temp_dir().join(format!("xlens-tf-gpu-categories-frames-{}", std::process::id()));
        xlens::report::frame::write_parquet(&profile, &report, &frames).unwrap();
        let table = parquet_rows(&frames.join("categories"));
        let _ = std::fs::remove_dir_all(&frames);
        for (t, us) in &by_type {
            if *us <= 0.0 {
                continue;
            }
            assert!(chart.contains(&format!("<span class=\"lab\">{t}</span>")), "{ctx}: {t} not in the chart");
            let row = table.iter().find(|(c, _)| c == t).unwrap_or_else(|| panic!("{ctx}: {t} not in Parquet"));
            assert!((row.1 / 1e6 - us).abs() < 1e-3, "{ctx}: {t} Parquet {} ps", row.1);
        }
    }
    // The synthetic capture: the cuDNN kernel is the Conv2D's time, the cuBLAS kernels the
    // MatMul's, the copy and the all-reduce keep theirs; the matrix ops are the anatomy's matmul.
    let ops = host_op_profiles(&synthetic).unwrap();
    let doc = op_profile_document(&ops);
    let host = &doc["hosts"][0];
    let us = |c: &str| host["categories_us"][c].as_f64();
    assert_eq!(us("Conv2D"), Some(180.0));
    assert_eq!(us("MatMul"), Some(64.0));
    assert_eq!(us("BiasAdd"), Some(8.0));
    assert_eq!(us("memcpy host-to-device"), Some(5.0));
    assert_eq!(us("all-reduce"), Some(20.0));
    assert_eq!(us("unknown"), Some(3.0), "the autotuning kernel no op launched");
    let anatomy = host["anatomy"].as_array().unwrap();
    let sum = |k: &str| anatomy.iter().map(|a| a[k].as_f64().unwrap()).sum::<f64>();
    assert!(sum("matmul_us") >= 180.0, "{anatomy:?}");
    assert!(sum("collective_exposed_us") + sum("collective_hidden_us") > 0.0, "{anatomy:?}");
    let _ = std::fs::remove_dir_all(&synthetic);
}

/// The rows of a Parquet table folder: (category, self_time_ps).
fn parquet_rows(dir: &std::path::Path) -> Vec<(String, f64)> {
    use polars::prelude::{ParquetReader, SerReader};
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                files.push(p);
            }
        }
    }
    for f in files {
        let df = ParquetReader::new(std::fs::File::open(&f).unwrap()).finish().unwrap();
        let cat = df.column("category").unwrap().str().unwrap().clone();
        let time = df.column("self_time_ps").unwrap().cast(&polars::prelude::DataType::Float64).unwrap();
        let time = time.f64().unwrap().clone();
        for i in 0..df.height() {
            out.push((cat.get(i).unwrap_or("").to_owned(), time.get(i).unwrap_or(0.0)));
        }
    }
    out
}

/// TensorFlow names run long (`_MklNativeConv2DBackpropFilterWithBias`, scoped op names): every
/// text table of `ops` keeps its columns aligned, each column as wide as its longest entry up to
/// a cap (longer entries cut with `…`).
#[test]
fn ops_text_tables_stay_aligned_with_long_tensorflow_names() {
    let ops = host_op_profiles(&root().join("testdata/field/tf_cpu_keras_input_bound")).unwrap();
    let text = op_profile_text(&ops.hosts[0], 20);
    assert!(text.contains("_MklNativeConv2DBackpropFilterWithBias "), "{text}");
    // In each table (a header, then its rows up to a blank line) the numbers end at the same
    // column on every row.
    let tables: Vec<&str> = text.split("\n\n").collect();
    let mut checked = 0;
    for table in tables {
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("  ") && l.trim_end().ends_with('%')).collect();
        if rows.len() < 2 {
            continue;
        }
        let widths: Vec<usize> = rows.iter().map(|r| r.chars().count()).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "misaligned rows: {rows:#?}");
        checked += 1;
    }
    assert!(checked >= 2, "{text}");
}

/// The `tf.data` pipelines in the outputs: `ops` text and JSON and the Parquet dataset carry them
/// for a capture with `tf.data` iterator events (equal to the analysis, which
/// `roofline/tests/tf_data.rs` holds to XProf's `tf.data` bottleneck analysis), and no capture
/// without such events has them.
#[test]
fn ops_and_the_dataset_carry_the_tf_data_pipelines() {
    let rel = "testdata/field/tf_cpu_keras_input_bound";
    let ops = host_op_profiles(&root().join(rel)).unwrap();
    let doc = op_profile_document(&ops);
    let t = &doc["hosts"][0]["tf_data"];
    assert_eq!(t["slow_call_us"], 50.0);
    let p = &t["pipelines"][0];
    assert_eq!((p["name"].as_str(), p["kind"].as_str(), p["calls"].as_u64()), (Some("Host:0"), Some("host"), Some(5)));
    assert_eq!(p["max_latency_us"].as_f64(), Some(38085.211));
    assert_eq!(p["bottleneck"], "Iterator::Root::Prefetch::Map::FlatMap[0]::Generator");
    let its = p["iterators"].as_array().unwrap();
    let last = &its[its.len() - 1];
    assert_eq!((last["stage"].as_str(), last["kind"].as_str()), (Some("Generator"), Some("python_generator")));
    assert_eq!(last["self_us"].as_f64(), Some(60947.627));
    // The Prefetch's id does not fit an i64: a string keeps it exact.
    assert_eq!(its[1]["id"], "16284188312876208569");
    let text = op_profile_text(&ops.hosts[0], 5);
    assert!(text.contains("Host:0 (`Iterator::Root`): 5 call(s)") && text.contains("<- bottleneck"), "{text}");
    let profile = Profile::from_session(xlens_testkit::open_session(root().join(rel)).unwrap());
    let report = scan(&profile, &ScanConfig::default());
    let dir = std::env::temp_dir().join(format!("xlens-tf-data-{}", std::process::id()));
    let written = xlens::report::frame::write_parquet(&profile, &report, &dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(written.iter().any(|p| p.components().any(|c| c.as_os_str() == "tf_data")), "{written:?}");
    // Captures without tf.data iterator events have none of it.
    for rel in ["testdata/gpu/gpu_healthy", "testdata/tpu/tpu_basic", "testdata/corpus/clean"] {
        let ops = host_op_profiles(&root().join(rel)).unwrap();
        let doc = op_profile_document(&ops);
        assert!(doc["hosts"].as_array().unwrap().iter().all(|h| h.get("tf_data").is_none()), "{rel}");
        assert!(!op_profile_text(&ops.hosts[0], 5).contains("tf.data pipelines"), "{rel}");
    }
}

/// On a TensorFlow GPU capture the host's `tf.data` wait while the GPU runs nothing is the step
/// anatomy's host share, not idle: the health's host wait is the wait `input_starvation`
/// reports, `device_idle` counts the rest, and `ops` (which builds the anatomy apart) agrees.
#[test]
fn a_tf_gpu_steps_input_wait_is_host_time_in_every_output() {
    let profile = Profile::from_session(xlens_testkit::open_session(root().join(TF)).unwrap());
    let host = &profile.hosts()[0];
    let input = host.input_pipeline().unwrap().unwrap();
    let anatomy = host.anatomy().unwrap();
    assert_eq!(anatomy.len(), 1);
    let wait = input.steps[0].input_wait();
    assert!(wait.as_ms_f64() > 2.0, "{wait:?}");
    assert_eq!(anatomy[0].host, wait);
    assert_eq!(anatomy[0].sum(), anatomy[0].step_time);
    let report = scan(&profile, &ScanConfig::default());
    let starvation = report.findings.iter().find(|f| f.id == "input_starvation").unwrap();
    let idle = report.findings.iter().find(|f| f.id == "device_idle").unwrap();
    let step_ms = report.metrics.step_time_ms_mean.unwrap();
    assert!((report.metrics.host_wait_pct.unwrap() * step_ms / 100.0 - starvation.impact.ms_per_step).abs() < 1e-9);
    assert!((idle.impact.ms_per_step - anatomy[0].idle.as_ms_f64()).abs() < 1e-9);
    let ops = host_op_profiles(&root().join(TF)).unwrap();
    assert_eq!(ops.hosts[0].anatomy, anatomy);
}
