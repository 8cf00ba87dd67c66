//! `xlens memory` against XProf 2.24's `get_peak_allocations` on every profile of `testdata/`
//! that has its reference (the corpus traces' copies of `../shared/corpus/xprof_refs/`, the
//! real, field, TPU and GPU captures): the number of programs, each listed program's total and
//! its rows (label and size, exactly: XProf's MiB are bytes / 2^20), and XProf's order of the
//! programs (by total, ties in either order). XProf lists 10 programs; all of ours are compared
//! with those it lists.

use std::collections::BTreeMap;

mod common;

use serde_json::Value;
use xlens::memory::{memory_document, memory_report, memory_report_document, program_memory};

const MIB: f64 = (1u64 << 20) as f64;

#[test]
fn peak_allocations_match_xprof() {
    let refs = common::xprof_references("get_peak_allocations", false);
    assert!(refs.len() > 30, "expected XProf's peak allocations: {}", refs.len());
    let mut compared = 0;
    for (dir, theirs) in refs {
        let what = dir.display().to_string();
        let ours = memory_document(&program_memory(&dir).unwrap_or_else(|e| panic!("{what}: {e}")), None);
        let Some(their_modules) = theirs["modules"].as_array() else {
            // XProf: "No memory viewer data returned for the session" (a TensorFlow capture
            // without HLO protos); ours has no program either.
            assert_eq!(theirs["status"], "ERROR", "{what}");
            assert_eq!(ours["summary"]["total_modules"], 0, "{what}");
            continue;
        };
        assert_eq!(ours["summary"]["total_modules"], theirs["summary"]["total_modules"], "{what}");
        let by_name: BTreeMap<&str, &Value> =
            ours["modules"].as_array().unwrap().iter().map(|m| (m["module_name"].as_str().unwrap(), m)).collect();
        for t in their_modules {
            let name = t["module_name"].as_str().unwrap();
            let o = by_name.get(name).unwrap_or_else(|| panic!("{what}: no program {name}"));
            assert_eq!(
                o["total_hbm_bytes"].as_u64().unwrap() as f64 / MIB,
                t["total_hbm_mib"].as_f64().unwrap(),
                "{what}: {name}"
            );
            let rows = |v: &Value, size: &dyn Fn(&Value) -> f64| -> Vec<(String, f64)> {
                v["top_buffers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| (b["instruction"].as_str().unwrap().to_owned(), size(b)))
                    .collect()
            };
            let ours_rows = rows(o, &|b| b["size_bytes"].as_u64().unwrap() as f64 / MIB);
            let their_rows = rows(t, &|b| b["size_mib"].as_f64().unwrap());
            assert_eq!(ours_rows, their_rows, "{what}: {name}");
            compared += 1;
        }
        // XProf's first programs are ours, up to the order of equal totals.
        let totals = |v: &Value, key: &str, scale: f64| -> Vec<f64> {
            v["modules"].as_array().unwrap().iter().map(|m| m[key].as_f64().unwrap() / scale).collect()
        };
        let n = their_modules.len();
        assert_eq!(
            totals(&ours, "total_hbm_bytes", MIB)[..n],
            totals(&theirs, "total_hbm_mib", 1.0)[..],
            "{what}: order"
        );
    }
    assert!(compared > 250, "{compared} programs compared");
}

const GIB: f64 = (1u64 << 30) as f64;

/// `x` rounded to 2 decimals, as XProf's CLI rounds (Python's `round(x, 2)`).
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap()
}

/// The runtime memory profile of `memory --json` on `dir`, per host.
fn memory_profile_hosts(dir: &std::path::Path) -> Vec<Value> {
    let what = dir.display().to_string();
    let r = memory_report(dir).unwrap_or_else(|e| panic!("{what}: {e}"));
    let doc = memory_report_document(&r, None);
    doc["memory_profile"]["hosts"].as_array().unwrap_or_else(|| panic!("{what}: {doc}")).clone()
}

/// XProf's `get_memory_profile` fields as its CLI computes them from one host's entry of ours:
/// the allocator with the largest peak, the largest capacity of any allocator, GiB rounded to
/// 2 decimals, -1 where XProf has no value.
fn as_xprof_cli(host: &Value) -> Value {
    let Some(id) = host["peak_memory_id"].as_str() else {
        assert!(host["reason"].as_str().is_some_and(|r| !r.is_empty()), "{host}");
        return serde_json::json!({
            "memory_capacity_gib": -1.0,
            "peak_memory_usage_gib": -1.0,
            "peak_usage_details": {
                "stack_reservation_gib": -1.0,
                "heap_allocation_gib": -1.0,
                "free_memory_gib": -1.0,
                "fragmentation_percent": -1.0,
                "utilization_percent": -1.0,
            },
        });
    };
    let a = host["allocators"].as_array().unwrap().iter().find(|a| a["memory_id"] == id).unwrap();
    let gib = |v: &Value| round2(v.as_f64().unwrap() / GIB);
    let capacity = gib(&host["xprof_memory_capacity_bytes"]);
    let peak = gib(&a["peak_bytes_in_use"]);
    serde_json::json!({
        "memory_capacity_gib": capacity,
        "peak_memory_usage_gib": peak,
        "peak_usage_details": {
            "stack_reservation_gib": gib(&a["stack_reserved_bytes"]),
            "heap_allocation_gib": gib(&a["heap_allocated_bytes"]),
            "free_memory_gib": gib(&a["free_memory_bytes"]),
            "fragmentation_percent": a["fragmentation_pct"].as_f64().map_or(-1.0, round2),
            "utilization_percent": round2(peak / capacity * 100.0),
        },
    })
}

/// `xlens memory`'s runtime memory profile against XProf 2.24's `get_memory_profile` (its CLI's
/// output, on every profile of testdata with the reference): the same figures once rounded as
/// the CLI rounds them, and -1 exactly where ours has no memory profile (with its reason). XProf
/// refuses a session of several hosts; ours reports each.
#[test]
fn memory_profile_matches_xprof_cli() {
    let refs = common::xprof_references("get_memory_profile", false);
    assert!(refs.len() > 60, "expected XProf's memory profiles: {}", refs.len());
    let (mut with_profile, mut compared) = (0, 0);
    for (dir, mut theirs) in refs {
        let what = dir.display().to_string();
        let hosts = memory_profile_hosts(&dir);
        if theirs["status"] == "ERROR" {
            assert!(theirs["error"].as_str().unwrap().contains("needs exactly one trace"), "{what}: {theirs}");
            assert!(hosts.len() > 1, "{what}");
            continue;
        }
        assert_eq!(hosts.len(), 1, "{what}");
        if let Value::Object(map) = &mut theirs {
            map.remove("capture");
        }
        assert_eq!(as_xprof_cli(&hosts[0]), theirs, "{what}");
        with_profile += usize::from(!hosts[0]["peak_memory_id"].is_null());
        compared += 1;
    }
    assert!(compared > 60 && with_profile >= 17, "{compared} compared, {with_profile} with a memory profile");
}

/// Each allocator of every host against XProf's own `memory_profile` converter
/// (`testdata/**/xprof/memory_profile__per_allocator.json`, written by
/// `scripts/capture/xprof_memory_profile_refs.py`): the memory ids, and per memory id the peak in
/// use, stack, heap, free memory, fragmentation (XProf's JSON prints it to 6 significant digits;
/// `NaN` is our `null`), capacity, the peak's time offset and the lifetime peak, exactly.
#[test]
fn memory_profile_matches_xprof_per_allocator() {
    let mut files = Vec::new();
    for group in std::fs::read_dir(common::root().join("testdata")).unwrap().flatten() {
        for profile in std::fs::read_dir(group.path()).into_iter().flatten().flatten() {
            let file = profile.path().join("xprof/memory_profile__per_allocator.json");
            if file.is_file() {
                files.push((profile.path(), file));
            }
        }
    }
    files.sort();
    assert!(files.len() > 60, "{} references", files.len());
    let mut allocators = 0;
    for (dir, file) in files {
        let what = dir.display().to_string();
        let theirs: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let ours = memory_profile_hosts(&dir);
        let their_hosts = theirs["hosts"].as_object().unwrap();
        assert_eq!(ours.len(), their_hosts.len(), "{what}");
        for host in &ours {
            let name = host["host"].as_str().unwrap();
            let t = &their_hosts[name];
            assert_eq!(host["memory_ids"], t["memory_ids"], "{what} {name}");
            if t["memory_ids"].as_array().unwrap().is_empty() {
                assert!(host["peak_memory_id"].is_null() && host["reason"].is_string(), "{what} {name}: {host}");
                continue;
            }
            for a in host["allocators"].as_array().unwrap() {
                let id = a["memory_id"].as_str().unwrap();
                let s = &t["per_allocator"][id]["profile_summary"];
                let int = |v: &Value| -> i64 { v.as_str().map_or_else(|| v.as_i64().unwrap(), |s| s.parse().unwrap()) };
                let at = format!("{what} {name} {id}");
                assert_eq!(a["peak_bytes_in_use"].as_i64().unwrap(), int(&s["peakStats"]["peakBytesInUse"]), "{at}");
                assert_eq!(
                    a["stack_reserved_bytes"].as_i64().unwrap(),
                    int(&s["peakStats"]["stackReservedBytes"]),
                    "{at}"
                );
                assert_eq!(
                    a["heap_allocated_bytes"].as_i64().unwrap(),
                    int(&s["peakStats"]["heapAllocatedBytes"]),
                    "{at}"
                );
                assert_eq!(a["free_memory_bytes"].as_i64().unwrap(), int(&s["peakStats"]["freeMemoryBytes"]), "{at}");
                assert_eq!(a["capacity_bytes"].as_i64().unwrap(), int(&s["memoryCapacity"]), "{at}");
                assert_eq!(a["peak_time_offset_ps"].as_i64().unwrap(), int(&s["peakStatsTimePs"]), "{at}");
                assert_eq!(a["peak_bytes_lifetime"].as_i64().unwrap(), int(&s["peakBytesUsageLifetime"]), "{at}");
                match (&s["peakStats"]["fragmentation"], a["fragmentation_pct"].as_f64()) {
                    (Value::String(nan), None) => assert_eq!(nan, "NaN", "{at}"),
                    (theirs, Some(pct)) => {
                        let f = theirs.as_f64().unwrap();
                        assert!((pct / 100.0 - f).abs() <= 1e-5 * f.abs(), "{at}: fragmentation {pct} % vs {f}");
                    }
                    (theirs, None) => panic!("{at}: fragmentation {theirs} vs none"),
                }
                allocators += 1;
            }
        }
    }
    assert!(allocators >= 40, "{allocators} allocators compared");
}
