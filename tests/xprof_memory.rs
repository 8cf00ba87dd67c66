//! `xlens memory` against XProf 2.24's `get_peak_allocations` on every profile of `testdata/`
//! that has its reference (the corpus traces' copies of `../shared/corpus/xprof_refs/`, the
//! real, field, TPU and GPU captures): the number of programs, each listed program's total and
//! its rows (label and size, exactly: XProf's MiB are bytes / 2^20), and XProf's order of the
//! programs (by total, ties in either order). XProf lists 10 programs; all of ours are compared
//! with those it lists.

use std::collections::BTreeMap;

mod common;

use serde_json::Value;
use xlens::memory::{memory_document, program_memory};

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
