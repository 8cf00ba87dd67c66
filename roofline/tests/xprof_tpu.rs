//! On TPU-shaped fixtures, the op profile and roofline equal XProf's own tool data
//! (`testdata/tpu/<fixture>/xprof/tool_*.json`, full precision, produced by
//! `scripts/capture/tpu_fixtures.sh`).

mod common;

use std::collections::BTreeMap;

use common::{close, table_rows, tpu_fixture_dirs, xprof_json};
use xlens_roofline::{IDLE, OpProfile};
use xlens_xplane::Picos;

fn profile(dir: &std::path::Path) -> OpProfile {
    let session = xlens_testkit::open_session(dir).unwrap();
    OpProfile::from_tpu(session.hosts()[0].space()).unwrap()
}

#[test]
fn fixtures_exist() {
    assert!(tpu_fixture_dirs().len() >= 2);
}

#[test]
fn op_profile_matches_xprof_exactly() {
    for dir in tpu_fixture_dirs() {
        let ours = profile(&dir);
        let reference = xprof_json(&dir, "tool_op_profile.json");
        let root = &reference["byProgram"];
        let programs = root["children"].as_array().unwrap();
        let mut leaf_count = 0;
        let mut their_categories = BTreeMap::new();
        for program in programs {
            let raw = |n: &serde_json::Value| n["metrics"]["rawTime"].as_i64().unwrap_or(0);
            if program["name"] == IDLE {
                assert_eq!(ours.idle_time, Picos(raw(program)), "{}: idle", dir.display());
                their_categories.insert(IDLE.to_owned(), Picos(raw(program)));
                continue;
            }
            for category in program["children"].as_array().unwrap() {
                let cat = category["name"].as_str().unwrap().to_owned();
                their_categories.insert(cat.clone(), Picos(raw(category)));
                for op in category["children"].as_array().unwrap() {
                    let name = op["name"].as_str().unwrap();
                    let m = &op["metrics"];
                    let o = ours.ops.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("{name} missing"));
                    let ctx = format!("{} {name}", dir.display());
                    assert_eq!(o.self_time, Picos(raw(op)), "{ctx}: self time");
                    assert_eq!(o.occurrences, m["occurrences"].as_u64().unwrap(), "{ctx}: occurrences");
                    assert_eq!(o.category, cat, "{ctx}: category");
                    let flops = m["rawFlops"].as_f64().unwrap_or(0.0);
                    assert!(close(o.flops, flops, 1e-12), "{ctx}: flops {} vs {flops}", o.flops);
                    let bytes = m["rawBytesAccessedArray"].as_array().unwrap();
                    let b = |i: usize| bytes[i].as_f64().unwrap_or(0.0);
                    assert!(close(o.bytes.hbm, b(0), 1e-9), "{ctx}: hbm bytes");
                    assert!(close(o.bytes.onchip_read, b(1), 1e-9), "{ctx}: on-chip read bytes");
                    assert!(close(o.bytes.onchip_write, b(2), 1e-9), "{ctx}: on-chip write bytes");
                    let normalized = m["normalizedTimePs"].as_i64().unwrap_or(0);
                    assert_eq!(o.normalized_time, Picos(normalized), "{ctx}: DVFS-normalised time");
                    let util = m["flops"].as_f64().unwrap_or(0.0);
                    let ours_util = ours.weighted_flops_utilization(o);
                    assert!(close(ours_util, util, 1e-9), "{ctx}: flops utilisation {ours_util} vs {util}");
                    leaf_count += 1;
                }
            }
        }
        assert!(leaf_count >= 10, "{}: only {leaf_count} ops compared", dir.display());
        assert_eq!(ours.categories(), their_categories, "{}: category pie", dir.display());
        // The root is the whole profiled time: the pie plus the self time of ops with inner ops.
        let total = root["metrics"]["rawTime"].as_i64().unwrap();
        assert_eq!(ours.total_time, Picos(total), "{}: total", dir.display());
        let overhead: Picos = ours.ops.iter().filter(|o| o.has_inner_ops()).map(|o| o.self_time).sum();
        let pie: Picos = ours.categories().values().copied().sum();
        assert_eq!(pie + overhead, ours.total_time);
    }
}

#[test]
fn roofline_matches_xprof() {
    for dir in tpu_fixture_dirs() {
        let ours = profile(&dir);
        let tables = xprof_json(&dir, "tool_roofline_model.json");
        let rows = table_rows(&tables[0]);
        let mut compared = 0;
        for row in rows.iter().filter(|r| r["step"] == "Total") {
            let name = row["operation"].as_str().unwrap();
            let ctx = format!("{} {name}", dir.display());
            let point = if name == "Program" {
                if row["include_infeed_outfeed"] == true {
                    ours.program_roofline().unwrap()
                } else {
                    ours.program_roofline_excluding_infeed_outfeed().unwrap()
                }
            } else {
                let op = ours.ops.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("{ctx} missing"));
                assert_eq!(op.occurrences as f64, row["occurrences"].as_f64().unwrap(), "{ctx}");
                assert!(close(op.time.as_us_f64(), row["total_time"].as_f64().unwrap(), 1e-12), "{ctx}: total time");
                assert!(close(op.self_time.as_us_f64(), row["total_self_time"].as_f64().unwrap(), 1e-12), "{ctx}");
                ours.xprof_roofline(op).unwrap()
            };
            assert_eq!(point.bound_by.label(), row["bound_by"].as_str().unwrap(), "{ctx}: bound");
            let eff = row["roofline_efficiency"].as_f64().unwrap();
            assert!(close(point.efficiency, eff, 1e-6), "{ctx}: efficiency {} vs {eff}", point.efficiency);
            let gflops = row["measured_flop_rate"].as_f64().unwrap();
            assert!(close(point.flops_per_s / 1e9, gflops, 1e-9), "{ctx}: FLOP rate");
            let oi = row["operational_intensity"].as_f64().unwrap();
            assert!(close(point.operational_intensity, oi, 1e-9), "{ctx}: intensity");
            // The x of XProf's roofline chart: FLOPs per byte of the bounding memory.
            let bottleneck = row["bottleneck_operational_intensity"].as_f64().unwrap();
            let ours_bottleneck = point.bottleneck_operational_intensity;
            assert!(
                close(ours_bottleneck, bottleneck, 1e-9),
                "{ctx}: bottleneck intensity {ours_bottleneck} vs {bottleneck}"
            );
            let hbm_gib = row["hbm_bw"].as_f64().unwrap();
            assert!(close(point.hbm_bytes_per_s / (1u64 << 30) as f64, hbm_gib, 1e-9), "{ctx}: HBM GiB/s");
            compared += 1;
        }
        assert!(compared >= 10, "{}: only {compared} roofline rows", dir.display());
    }
}
