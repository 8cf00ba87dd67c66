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
            assert!(page.contains("Slowest framework ops") && page.contains("Iterator::Prefetch"));
        }
    };
    check(TF, true);
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
