//! Golden tests of the `op_profile` example's output, and its JSON contract.

mod common;

use common::*;

use xlens::report::tables::op_profile::{analyze, op_profile_json, op_profile_session_json, op_profile_text};

fn analysis(rel: &str) -> xlens::report::tables::op_profile::HostOpProfile {
    let session = xlens_testkit::open_session(root().join(rel)).unwrap();
    let host = &session.hosts()[0];
    analyze(host.name(), host.space()).unwrap()
}

#[test]
fn tpu_fixture_text_and_json() {
    let a = analysis("testdata/tpu/tpu_basic");
    check("op_profile_tpu_basic.txt", &op_profile_text(&a, 20));
    check("op_profile_tpu_basic.json", &(serde_json::to_string_pretty(&op_profile_json(&a)).unwrap() + "\n"));
}

#[test]
fn cpu_trace_text() {
    let a = analysis("testdata/corpus/clean");
    check("op_profile_clean.txt", &op_profile_text(&a, 15));
}

#[test]
fn json_contract_keys_and_sums() {
    for rel in ["testdata/tpu/tpu_basic", "testdata/corpus/clean", "testdata/real/sharded_collectives"] {
        let a = analysis(rel);
        let v = op_profile_json(&a);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["host", "device", "steps", "step_time_ms_mean", "categories_us", "ops", "anatomy"]);
        let op_keys: Vec<&str> = v["ops"][0].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            op_keys,
            [
                "program",
                "name",
                "category",
                "occurrences",
                "self_time_us",
                "flops",
                "xprof_flops",
                "bytes_accessed",
                "bound"
            ]
        );
        let an = &v["anatomy"];
        assert_eq!(an.as_array().unwrap().len(), v["steps"].as_array().unwrap().len(), "{rel}");
        for (row, step) in an.as_array().unwrap().iter().zip(v["steps"].as_array().unwrap()) {
            let parts = [
                "matmul_us",
                "collective_exposed_us",
                "vector_us",
                "data_formatting_us",
                "infeed_outfeed_us",
                "host_us",
                "idle_us",
            ];
            let sum: f64 = parts.iter().map(|k| row[*k].as_f64().unwrap()).sum();
            let step_us = step["step_time_ms"].as_f64().unwrap() * 1e3;
            assert!((sum - step_us).abs() < 1e-6 * step_us.max(1.0), "{rel}: {sum} vs {step_us}");
        }
    }
}

/// A session is one document naming each host.
#[test]
fn a_session_is_one_document_naming_its_hosts() {
    for (rel, expected) in
        [("testdata/tpu/tpu_straggler_host", &["host0", "host1"][..]), ("testdata/corpus/clean", &["vm"])]
    {
        let session = xlens_testkit::open_session(root().join(rel)).unwrap();
        let hosts: Vec<_> = session.hosts().iter().map(|h| analyze(h.name(), h.space()).unwrap()).collect();
        let doc = op_profile_session_json(&hosts);
        let names: Vec<&str> = doc["hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
        assert_eq!(names, expected);
    }
}
