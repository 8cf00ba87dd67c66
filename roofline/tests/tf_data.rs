//! The `tf.data` pipelines of real TensorFlow captures equal XProf's `tf.data` bottleneck
//! analysis (`tensorboard-plugin-profile` 2.19.0, the last release with the tool; see
//! `testdata/field/README.md`) where XProf reads the capture right.
//!
//! XProf reads an iterator id that TensorFlow stored unsigned (ids from 2^63) as 0, so those
//! iterators are one entry, id 0, in its per-call statistics: there the test checks that XProf's
//! entry is the sum of ours. Every other iterator, every pipeline's latencies and every
//! bottleneck XProf names by a real id must be equal.

mod common;

use std::path::{Path, PathBuf};

use common::{testdata, xprof_json};
use serde_json::Value;
use xlens_roofline::{TfDataPipelineKind, TfDataPipelines, TfDataStageKind};

const REFERENCE: &str = "tool_tf_data_bottleneck_analysis__combined_tf_data_stats.json";

/// The captures with XProf's reference, and each one's host name in it.
fn dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(testdata().join("field"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("xprof").join(REFERENCE).is_file())
        .collect();
    dirs.sort();
    dirs
}

fn read(dir: &Path) -> TfDataPipelines {
    let session = xlens_testkit::open_session(dir).unwrap();
    TfDataPipelines::read(session.hosts()[0].space().host_threads().unwrap()).unwrap().unwrap()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0))
}

#[test]
fn pipelines_and_bottlenecks_equal_xprof() {
    let dirs = dirs();
    assert_eq!(dirs.len(), 5, "{dirs:?}");
    for dir in dirs {
        let ctx = dir.file_name().unwrap().to_string_lossy().to_string();
        let reference = xprof_json(&dir, REFERENCE);
        let ours = read(&dir);
        let hosts = reference["tf_data_stats"].as_object().unwrap();
        assert_eq!(hosts.len(), 1, "{ctx}");
        let (_, stats) = hosts.iter().next().unwrap();
        let theirs = stats["input_pipelines"].as_object().unwrap();
        assert_eq!(theirs.len(), ours.pipelines.len(), "{ctx}: pipelines");
        for (root, p) in theirs {
            let ctx = format!("{ctx} {root}");
            let mine = ours.pipelines.iter().find(|m| m.root_id as i64 == root.parse::<i64>().unwrap()).unwrap();
            let kind =
                if p["metadata"]["type"] == "DEVICE" { TfDataPipelineKind::Device } else { TfDataPipelineKind::Host };
            assert_eq!(mine.kind, kind, "{ctx}");
            let calls = p["stats"].as_array().unwrap();
            assert_eq!(mine.calls, calls.len() as u64, "{ctx}");
            assert_eq!(mine.mean_latency.0, int(&p["avg_latency_ps"]), "{ctx}");
            assert_eq!(mine.min_latency.0, int(&p["min_latency_ps"]), "{ctx}");
            assert_eq!(mine.max_latency.0, int(&p["max_latency_ps"]), "{ctx}");
            assert_eq!(mine.slow_calls as i64, int(&p["num_slow_calls"]), "{ctx}");
            // XProf numbers pipelines in hash order: the name is checked where it is the only one
            // of its kind.
            if ours.pipelines.iter().filter(|o| o.kind == kind).count() == 1 {
                assert_eq!(mine.name, p["metadata"]["name"].as_str().unwrap(), "{ctx}");
            }
            // The slowest call (XProf sorts the calls by duration, longest first).
            let slowest = &calls[0];
            let mut lumped = (0i64, 0i64, 0i64, false);
            for it in mine.iterators.iter().filter(|it| it.id > i64::MAX as u64) {
                lumped = (
                    lumped.0 + it.total.0,
                    lumped.1 + it.self_time.0,
                    lumped.2 + it.calls as i64,
                    lumped.3 || it.blocking,
                );
            }
            let entries = slowest["iterator_stats"].as_object().unwrap();
            for (id, s) in entries {
                let got = if id == "0" {
                    lumped
                } else {
                    let it = mine.iterators.iter().find(|it| it.id as i64 == id.parse::<i64>().unwrap());
                    let it = it.unwrap_or_else(|| panic!("{ctx}: iterator {id}"));
                    (it.total.0, it.self_time.0, it.calls as i64, it.blocking)
                };
                let want =
                    (int(&s["duration_ps"]), int(&s["self_time_ps"]), int(&s["num_calls"]), s["is_blocking"] == true);
                assert_eq!(got, want, "{ctx}: iterator {id}");
            }
            // Ours lists the same iterators, those XProf reads as 0 apart.
            let unsigned = mine.iterators.iter().filter(|it| it.id > i64::MAX as u64).count();
            assert_eq!(mine.iterators.len() - unsigned + usize::from(unsigned > 0), entries.len(), "{ctx}");
            let bottleneck = int(&slowest["bottleneck_iterator_id"]);
            if bottleneck != 0 {
                let b = mine.bottleneck().unwrap();
                assert_eq!(b.id as i64, bottleneck, "{ctx}");
                assert_eq!(b.self_time.0, int(&slowest["bottleneck_iterator_latency_ps"]), "{ctx}");
            }
        }
        // The bottleneck rows: host pipelines, slowest first, each naming the bottleneck of its
        // slowest call (checked where XProf's is a real id; its id 0 is several iterators).
        let rows = reference["bottleneck_analysis"].as_array().map(Vec::as_slice).unwrap_or_default();
        let host: Vec<_> = ours.pipelines.iter().filter(|p| p.kind == TfDataPipelineKind::Host).collect();
        assert_eq!(host.len(), rows.len(), "{ctx}");
        for (mine, row) in host.iter().zip(rows) {
            assert_eq!(mine.max_latency.0, int(&row["max_latency_ps"]), "{ctx}");
            let slowest = &theirs[&(mine.root_id as i64).to_string()]["stats"][0];
            let b = mine.bottleneck().unwrap();
            if int(&slowest["bottleneck_iterator_id"]) != 0 {
                assert_eq!(
                    (b.short_name(), b.name.as_str(), b.self_time.0),
                    (
                        row["iterator_name"].as_str().unwrap(),
                        row["iterator_long_name"].as_str().unwrap(),
                        int(&row["iterator_latency_ps"])
                    ),
                    "{ctx}"
                );
            } else {
                // XProf's bottleneck is its id-0 entry: ours is one of the iterators it merges.
                assert!(b.id > i64::MAX as u64, "{ctx}: {b:?}");
                assert_eq!(b.short_name(), row["iterator_name"].as_str().unwrap(), "{ctx}");
            }
        }
        assert_eq!(ours.is_input_bound(), reference["is_input_bound"] == true, "{ctx}");
    }
}

#[test]
fn the_input_bound_capture_waits_on_its_python_generator() {
    let ours = read(&testdata().join("field/tf_cpu_keras_input_bound"));
    let p = ours.slowest_host().unwrap();
    // Five calls, all slow; the slowest waits 38.1 ms for an element whose production (linked
    // from the background thread's `PrefetchProduce`) spent 60.9 ms in the generator.
    assert_eq!((p.name.as_str(), p.calls, p.slow_calls), ("Host:0", 5, 5));
    let names: Vec<&str> = p.iterators.iter().map(|it| it.short_name()).collect();
    assert_eq!(names, ["Root", "Prefetch", "Map", "FlatMap", "Generator"]);
    assert!(p.iterators.iter().all(|it| it.blocking));
    let b = p.bottleneck().unwrap();
    assert_eq!((b.short_name(), b.kind()), ("Generator", TfDataStageKind::PythonGenerator));
    assert_eq!(b.self_time.0, 60_947_627_000);
    // The consumer's Prefetch keeps only what the producer does not cover.
    assert!(p.iterators[1].self_time.0 < 200_000_000, "{:?}", p.iterators[1]);
}

#[test]
fn device_pipelines_are_not_the_steps_wait() {
    let ours = read(&testdata().join("field/tf_v100_multiworker"));
    assert_eq!(ours.pipelines.len(), 2);
    assert!(ours.pipelines.iter().all(|p| p.kind == TfDataPipelineKind::Device));
    assert_eq!(ours.pipelines.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["Device:0", "Device:1"]);
    assert!(ours.slowest_host().is_none() && !ours.is_input_bound());
}
