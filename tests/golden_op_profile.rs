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

/// The `ops --json` document as it was rendered before it was streamed: a `serde_json::Value`
/// built whole (this code, kept as the reference), then printed. The streamed document must
/// equal it byte for byte.
mod in_memory {
    use serde_json::{Value, json};
    use xlens::documents::Partial;
    use xlens::report::tables::op_profile::HostOpProfile;

    fn us(t: xlens::xplane::Picos) -> f64 {
        t.as_us_f64()
    }

    fn host(h: &HostOpProfile) -> Value {
        let p = &h.profile;
        let mut categories = serde_json::Map::new();
        for (name, t) in p.categories() {
            categories.insert(name, json!(us(t)));
        }
        let ops: Vec<Value> = p
            .ops
            .iter()
            .map(|o| {
                json!({
                    "program": p.programs.get(&o.program_id).cloned().unwrap_or_else(|| o.program_id.to_string()),
                    "name": o.name,
                    "category": o.category,
                    "occurrences": o.occurrences,
                    "self_time_us": us(o.self_time),
                    "flops": o.flops,
                    "xprof_flops": o.xprof_flops,
                    "bytes_accessed": o.bytes.total(),
                    "bound": p.roofline(o).map(|r| r.bound_by.label()),
                })
            })
            .collect();
        let anatomy: Vec<Value> = h
            .steps
            .steps
            .iter()
            .zip(&h.anatomy)
            .map(|(s, a)| {
                json!({
                    "step": s.name,
                    "matmul_us": us(a.matmul),
                    "collective_exposed_us": us(a.collective_exposed),
                    "collective_hidden_us": us(a.collective_hidden),
                    "vector_us": us(a.vector),
                    "data_formatting_us": us(a.data_formatting),
                    "infeed_outfeed_us": us(a.infeed_outfeed),
                    "host_us": us(a.host),
                    "idle_us": us(a.idle),
                })
            })
            .collect();
        json!({
            "host": h.host,
            "device": p.device_type.clone().unwrap_or_else(|| "unknown".to_owned()),
            "steps": h.steps.steps.iter().map(|s| json!({"name": s.name, "step_time_ms": s.duration.as_ms_f64()})).collect::<Vec<_>>(),
            "step_time_ms_mean": h.steps.stats().map(|s| s.mean_ms),
            "categories_us": categories,
            "ops": ops,
            "anatomy": anatomy,
        })
    }

    /// The whole `ops --json` output of `ops`, trailing newline included.
    pub(super) fn document(ops: &Partial<Vec<HostOpProfile>>) -> String {
        format!("{}\n", serde_json::to_string_pretty(&value(ops)).unwrap())
    }

    /// The `ops --json` document of `ops` as a `Value`.
    pub(super) fn value(ops: &Partial<Vec<HostOpProfile>>) -> Value {
        let mut doc = json!({ "hosts": ops.hosts.iter().map(host).collect::<Vec<_>>() });
        if let Value::Object(map) = &mut doc {
            if !ops.skipped_hosts.is_empty() {
                map.insert("skipped_hosts".to_owned(), serde_json::to_value(&ops.skipped_hosts).unwrap_or_default());
            }
            if !ops.errors.is_empty() {
                map.insert("errors".to_owned(), serde_json::to_value(&ops.errors).unwrap_or_default());
            }
        }
        doc
    }
}

/// `ops --json` is written as it is serialized ([`xlens::documents::OpProfileDocument`]); on
/// TPU, GPU and CPU profiles, one host or several, with skipped hosts and decode errors or
/// without, it is byte for byte the document once built whole in memory, and the `Value` the
/// library gives ([`xlens::documents::op_profile_document`]) is that document too.
#[test]
fn streamed_ops_json_equals_the_in_memory_rendering() {
    use xlens::documents::{OpProfileDocument, Partial, host_op_profiles, op_profile_document};
    let runs = [
        "testdata/tpu/tpu_basic",
        "testdata/tpu/tpu_straggler_host",
        "testdata/corpus/clean",
        "testdata/real/sharded_collectives",
        "testdata/gpu/gpu_healthy",
        "testdata/gpu/gpu_stepless",
        "testdata/h200/h200_train_bf16",
    ];
    let same = |rel: &str, ops: &Partial<Vec<xlens::report::tables::op_profile::HostOpProfile>>| {
        let mut streamed = Vec::new();
        serde_json::to_writer_pretty(&mut streamed, &OpProfileDocument(ops)).unwrap();
        streamed.push(b'\n');
        let expected = in_memory::document(ops);
        assert!(String::from_utf8(streamed).unwrap() == expected, "{rel}: the streamed document differs");
        let value = format!("{}\n", serde_json::to_string_pretty(&op_profile_document(ops)).unwrap());
        assert!(value == expected, "{rel}: the document as a Value differs");
        // Compact, as the Python package returns it.
        let compact = serde_json::to_string(&OpProfileDocument(ops)).unwrap();
        let reference = in_memory::value(ops).to_string();
        assert!(compact == reference, "{rel}: the compact document differs");
    };
    let skipped = || vec![xlens::faults::SkippedHost::new("host9", "host9.xplane.pb", &"truncated\nfile")];
    for rel in runs {
        let complete = host_op_profiles(&root().join(rel)).unwrap();
        assert!(complete.skipped_hosts.is_empty() && complete.errors.is_empty(), "{rel}");
        same(rel, &complete);
        let errors = vec![format!("{rel}: stat 3 of event 7: wire type 7")];
        same(rel, &Partial { hosts: complete.hosts, skipped_hosts: skipped(), errors });
    }
    same("no host", &Partial { hosts: Vec::new(), skipped_hosts: skipped(), errors: Vec::new() });
}
