//! `xlens events` against XProf 2.24's `aggregate_xplane_events`, `list_xplane_events` and
//! `list_xplane_lines` on every profile of `testdata/` that has their reference output (the
//! corpus traces' copies of `../shared/corpus/xprof_refs/`, the real, field, TPU and GPU
//! captures): each reference's argv is parsed into the same query.
//!
//! Counts, totals, minima, maxima and percentiles are compared exactly, except that a total may
//! be 1 ps off: XProf's duration of one `copy-done` of `tpu_v6e_host_offload` is 1 ps shorter
//! than the one recorded (a round trip through a float). The mean and standard
//! deviation are compared to 1e-12 relative: XProf sums the floats in another order (numpy's
//! pairwise sums), so their last bits can differ. A reference whose `capture.combined` is true
//! merged the hosts of a session: there the sums (events scanned, each group's count and total,
//! its minimum and maximum) are checked against ours added up over the hosts, the quantiles not
//! (they are not sums).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::flag;
use serde_json::Value;
use xlens::events::{EventsRequest, NamePattern, aggregates_document, event_aggregates, event_lines, event_list};
use xlens::roofline::events::GroupBy;

/// Every `(profile dir, reference file)` of `testdata/*/*/xprof/` whose name starts with `prefix`.
fn references(prefix: &str) -> Vec<(PathBuf, PathBuf)> {
    common::xprof_runs(prefix).into_iter().map(|(profile, file, _)| (profile, file)).collect()
}

fn load(file: &Path) -> (Vec<String>, Value) {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let argv = doc["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
    assert_eq!(doc["rc"], 0, "{}", file.display());
    (argv, doc["output"].take())
}

fn request(argv: &[String]) -> EventsRequest {
    let known = ["--event_regex=", "--group_by=", "--max_events="];
    for a in argv.iter().skip(3) {
        assert!(known.iter().any(|k| a.starts_with(k)), "an XProf flag this test does not translate: {a}");
    }
    EventsRequest {
        name: flag(argv, "event_regex").map(|p| NamePattern::new(p).unwrap_or_else(|e| panic!("{e}"))),
        group_by: match flag(argv, "group_by") {
            None | Some("name") | Some("event") => GroupBy::Name,
            Some("line") => GroupBy::Line,
            Some(other) => panic!("group_by={other}"),
        },
        top: flag(argv, "max_events").and_then(|n| n.parse::<i64>().ok()).filter(|&n| n >= 0).map(|n| n as usize),
        ..EventsRequest::default()
    }
}

fn combined(output: &Value) -> bool {
    output["capture"]["combined"].as_bool().unwrap_or(false)
}

fn close(ours: f64, theirs: f64) -> bool {
    ours == theirs || (ours - theirs).abs() <= 1e-12 * theirs.abs().max(1.0)
}

#[test]
fn aggregates_match_xprof() {
    let refs = references("aggregate_xplane_events");
    assert!(refs.len() > 500, "expected XProf's aggregates of the corpus, real and field captures: {}", refs.len());
    let mut bad = Vec::new();
    for (dir, file) in refs {
        let (argv, theirs) = load(&file);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        let req = request(&argv);
        let agg = event_aggregates(&dir, &req).unwrap_or_else(|e| panic!("{what}: {e}"));
        let doc = aggregates_document(&agg, None);
        let hosts = doc["hosts"].as_array().unwrap();
        let key = if req.group_by == GroupBy::Line { "line" } else { "event" };
        let scanned: u64 = hosts.iter().map(|h| h["events_scanned"].as_u64().unwrap()).sum();
        assert_eq!(scanned, theirs["events_scanned"].as_u64().unwrap(), "{what}: events_scanned");
        let their_rows: Vec<&Value> = theirs["aggregates"].as_array().unwrap().iter().collect();
        if combined(&theirs) {
            // Sums over the hosts.
            let mut ours: BTreeMap<String, (u64, i64, i64, i64)> = BTreeMap::new();
            for row in hosts.iter().flat_map(|h| h["aggregates"].as_array().unwrap()) {
                let e = ours.entry(row[key].as_str().unwrap().to_owned()).or_insert((0, 0, i64::MAX, i64::MIN));
                e.0 += row["count"].as_u64().unwrap();
                e.1 += row["total_duration_ps"].as_i64().unwrap();
                e.2 = e.2.min(row["min_duration_ps"].as_i64().unwrap());
                e.3 = e.3.max(row["max_duration_ps"].as_i64().unwrap());
            }
            let theirs: BTreeMap<String, (u64, i64, i64, i64)> = their_rows
                .iter()
                .map(|r| {
                    let n = |k: &str| r[k].as_i64().unwrap();
                    (
                        r[key].as_str().unwrap().to_owned(),
                        (
                            r["count"].as_u64().unwrap(),
                            n("total_duration_ps"),
                            n("min_duration_ps"),
                            n("max_duration_ps"),
                        ),
                    )
                })
                .collect();
            assert_eq!(ours, theirs, "{what}");
            continue;
        }
        assert_eq!(hosts.len(), 1, "{what}: one host");
        let ours = hosts[0]["aggregates"].as_array().unwrap();
        assert_eq!(ours.len(), their_rows.len(), "{what}: groups");
        assert_eq!(hosts[0]["total_matched"], theirs["total_matched"], "{what}");
        let by_key: BTreeMap<&str, &Value> = ours.iter().map(|r| (r[key].as_str().unwrap(), r)).collect();
        for t in &their_rows {
            let name = t[key].as_str().unwrap();
            let o = by_key.get(name).unwrap_or_else(|| panic!("{what}: no group {name:?}"));
            for k in ["count", "total_duration_ps", "min_duration_ps", "max_duration_ps"] {
                let rounded = k == "total_duration_ps" && o[k].as_i64().unwrap().abs_diff(t[k].as_i64().unwrap()) <= 1;
                if o[k] != t[k] && !rounded {
                    bad.push(format!("{what}: {name} {k}: {} vs {}", o[k], t[k]));
                }
            }
            for k in ["p50_duration_ps", "p90_duration_ps", "p99_duration_ps"] {
                if o[k].as_f64() != t[k].as_f64() {
                    bad.push(format!("{what}: {name} {k}: {} vs {}", o[k], t[k]));
                }
            }
            for k in ["avg_duration_ps", "std_dev_ps"] {
                let (a, b) = (o[k].as_f64().unwrap(), t[k].as_f64().unwrap());
                if !close(a, b) {
                    bad.push(format!("{what}: {name} {k}: {a} vs {b}"));
                }
            }
        }
        // The same order, up to ties in total time.
        let totals =
            |rows: &[&Value]| rows.iter().map(|r| r["total_duration_ps"].as_i64().unwrap()).collect::<Vec<_>>();
        let (a, b) = (totals(&ours.iter().collect::<Vec<_>>()), totals(&their_rows));
        if a.iter().zip(&b).any(|(a, b)| a.abs_diff(*b) > 1) {
            bad.push(format!("{what}: order"));
        }
    }
    assert!(bad.is_empty(), "{} figures differ from XProf's:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn listed_events_match_xprof() {
    let refs = references("list_xplane_events");
    assert!(refs.len() > 30, "expected XProf's event lists: {}", refs.len());
    for (dir, file) in refs {
        let (argv, theirs) = load(&file);
        let what = format!("{} ({})", file.display(), argv.join(" "));
        let list = event_list(&dir, &request(&argv)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let doc = xlens::events::list_document(&list);
        let ours: Vec<(String, String, String, i64, i64)> =
            doc["hosts"].as_array().unwrap().iter().flat_map(|h| h["events"].as_array().unwrap()).map(row).collect();
        let theirs_rows: Vec<_> = theirs["events"].as_array().unwrap().iter().map(row).collect();
        assert_eq!(ours, theirs_rows, "{what}");
        let matched: u64 = doc["hosts"].as_array().unwrap().iter().map(|h| h["total_matched"].as_u64().unwrap()).sum();
        assert_eq!(matched, theirs["total_matched"].as_u64().unwrap(), "{what}");
    }
}

fn row(e: &Value) -> (String, String, String, i64, i64) {
    let s = |k: &str| e[k].as_str().unwrap().to_owned();
    (s("plane"), s("line_id"), s("event"), e["offset_ps"].as_i64().unwrap(), e["duration_ps"].as_i64().unwrap())
}

#[test]
fn lines_match_xprof() {
    let refs = references("list_xplane_lines");
    assert!(refs.len() > 60, "expected XProf's line lists: {}", refs.len());
    for (dir, file) in refs {
        let (_, theirs) = load(&file);
        let what = file.display().to_string();
        let inv = event_lines(&dir).unwrap_or_else(|e| panic!("{what}: {e}"));
        let doc = xlens::events::lines_document(&inv);
        // XProf lists a line whose message is empty as `""` with no events; ours counts them.
        let plane = |p: &Value, empty: bool| {
            let lines: Vec<(String, u64)> = p["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| (l["name"].as_str().unwrap().to_owned(), l["event_count"].as_u64().unwrap()))
                .filter(|(n, c)| !empty || !n.is_empty() || *c > 0)
                .collect();
            (p["name"].as_str().unwrap().to_owned(), lines, p["total_events"].as_u64().unwrap())
        };
        let ours: Vec<_> = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h["planes"].as_array().unwrap())
            .map(|p| plane(p, false))
            .collect();
        let theirs: Vec<_> = theirs["planes"].as_array().unwrap().iter().map(|p| plane(p, true)).collect();
        assert_eq!(ours, theirs, "{what}");
    }
}
