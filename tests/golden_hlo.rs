//! Golden tests of what the `hlo_ops` example prints: the same library functions, checked
//! against files in `tests/golden/` (prefix `hlo_`). Set `XLENS_BLESS=1` to rewrite them after
//! an intended change.

mod common;

use common::*;

use xlens::hlo::{module_hosts, modules_from_session};
use xlens::report::tables::hlo::{ModuleHosts, hlo_ops_json, hlo_ops_text};

fn modules(trace: &str) -> (Vec<xlens::hlo::Module>, ModuleHosts) {
    let session = xlens_testkit::open_session(root().join("testdata").join(trace)).unwrap();
    let (modules, warnings) = modules_from_session(&session);
    assert!(warnings.is_empty(), "{warnings:?}");
    (modules, module_hosts(&session))
}

#[test]
fn hlo_ops_outputs() {
    let (sharded, hosts) = modules("real/sharded_donation");
    check(
        "hlo_ops_sharded_donation.json",
        &(serde_json::to_string_pretty(&hlo_ops_json(&sharded, &hosts)).unwrap() + "\n"),
    );
    check("hlo_ops_sharded_donation.txt", &hlo_ops_text(&sharded, &hosts));
    let (permutes, hosts) = modules("corpus/sharded_collectives_baseline");
    check("hlo_ops_sharded_collectives_baseline.txt", &hlo_ops_text(&permutes, &hosts));
}

#[test]
fn hlo_ops_json_has_the_documented_fields() {
    let (m, hosts) = modules("real/sharded_donation");
    let doc = hlo_ops_json(&m, &hosts);
    let main = doc["modules"].as_array().unwrap().iter().find(|m| m["name"] == "jit_train_step(8)").unwrap();
    assert_eq!(main["program_id"], 8);
    assert_eq!(main["hosts"], serde_json::json!(["vm"]));
    assert_eq!((main["computations"].as_u64(), main["instructions"].as_u64()), (Some(57), Some(313)));
    assert_eq!(main["opcodes"]["dot"], 17);
    assert_eq!(main["opcodes"]["all-gather"], 6);
    assert_eq!(main["aliased_params"], serde_json::json!([0, 1, 2, 3, 4, 5]));
    assert_eq!(main["collectives"], 15);
    assert_eq!(main["entry_bytes_accessed"], 27_066_648);
}

#[test]
fn hlo_ops_output_is_identical_from_run_to_run() {
    let (m, hosts) = modules("corpus/clean");
    let a = hlo_ops_json(&m, &hosts);
    let (m, hosts) = modules("corpus/clean");
    let b = hlo_ops_json(&m, &hosts);
    assert_eq!(a, b);
}
