//! The scan of a TensorFlow GPU capture without `group_id` stats (as TensorFlow 2.21 writes it)
//! equals the scan of the same capture with TensorFlow's grouping: the steps, the input pipeline
//! and the step-based detectors read the groups xlens makes as XProf makes them (device events
//! in their launches' groups, `Steps` derived from the groups).
//!
//! One figure moves, as it does in XProf: XProf's own grouping puts in the step a few copies
//! that TensorFlow's 2020 grouping left out (launched from `tf.data` functions, they take the
//! latest group on their GPU), and they cover 0.024 ms of the host's wait for input, so
//! `input_starvation` reports that much less wait (2.365 ms per step instead of 2.390 ms): the
//! difference of XProf's device compute between its analyses of the two captures
//! (`xprof/tool_input_pipeline_analyzer*.json`). The step anatomy counts that wait as the host's
//! share, so the health's host wait is as much smaller and `device_idle`'s idle as much larger.
//!
//! The capture is `testdata/field/tf_v100_multiworker` stripped of every `group_id` and
//! `step_name` stat and of its `Steps` lines, with the `_r` root level TensorFlow 2.21 writes on
//! `FunctionRun` (see `roofline/tests/tf_gpu_grouping.rs`, which checks the groups event by
//! event).

use std::path::{Path, PathBuf};

use serde_json::Value;
use xlens::faults::{Profile, Report, ScanConfig, scan};

/// XProf's device compute of the capture's one step (ms), from its input-pipeline tool data.
fn xprof_device_compute(file: &str) -> f64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR).join("xprof").join(file);
    let tables: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cols = tables[1]["cols"].as_array().unwrap();
    let at = cols.iter().position(|c| c["id"] == "deviceComputeTimeMs").unwrap();
    tables[1]["rows"][0]["c"][at]["v"].as_f64().unwrap()
}
use xlens_testkit::strip::{Strip, strip};

const DIR: &str = "testdata/field/tf_v100_multiworker";
const FILE: &str = "34.83.195.179_6003.xplane.pb";

fn report(dir: &Path) -> Report {
    scan(&Profile::from_session(xlens_testkit::open_session(dir).unwrap()), &ScanConfig::default())
}

/// A session directory named as the capture's, holding the stripped capture.
fn stripped_dir() -> PathBuf {
    let bytes = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR).join(FILE)).unwrap();
    let what = Strip { stats: &["group_id", "step_name"], lines: &["Steps"], add: &[("FunctionRun", "_r", 1)] };
    let stripped = strip(&bytes, &what).unwrap();
    let dir =
        std::env::temp_dir().join(format!("xlens-tf-gpu-grouping-{}", std::process::id())).join("tf_v100_multiworker");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(FILE), stripped).unwrap();
    dir
}

/// The paths where two JSON values differ.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                differences(
                    &format!("{path}.{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), u, v, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} vs {b}")),
        _ => {}
    }
}

#[test]
fn scan_of_the_ungrouped_capture_equals_the_grouped_one() {
    let dir = stripped_dir();
    let (theirs, ours) = (report(&Path::new(env!("CARGO_MANIFEST_DIR")).join(DIR)), report(&dir));
    std::fs::remove_dir_all(dir.parent().unwrap()).ok();
    // The steps and the verdict, spelled out.
    assert_eq!(ours.status, theirs.status);
    let steps = |r: &Report| (r.metrics.time_base.clone(), r.metrics.step_count, r.metrics.step_time_ms_mean);
    assert_eq!(steps(&ours), steps(&theirs));
    assert_eq!((ours.metrics.time_base.as_str(), ours.metrics.step_count), ("steps", 1));
    let findings = |r: &Report| r.findings.iter().map(|f| (f.id.clone(), f.severity)).collect::<Vec<_>>();
    assert_eq!(findings(&ours), findings(&theirs));
    assert!(findings(&ours).iter().any(|(id, _)| id == "input_starvation"), "the input pipeline is read");
    // And everything else the report says, but the input wait (see the module notes) and what
    // the step anatomy counts with it: the host's share (the wait) and the idle left to
    // `device_idle`.
    let starvation = ours.findings.iter().position(|f| f.id == "input_starvation").unwrap();
    let idle = ours.findings.iter().position(|f| f.id == "device_idle").unwrap();
    let mut diff = Vec::new();
    differences("report", &serde_json::to_value(&ours).unwrap(), &serde_json::to_value(&theirs).unwrap(), &mut diff);
    let moved = [
        format!("report.findings[{starvation}]."),
        format!("report.findings[{idle}]."),
        "report.metrics.host_wait_pct".to_owned(),
    ];
    assert!(diff.iter().all(|d| moved.iter().any(|m| d.starts_with(m.as_str()))), "{}", diff.join("\n"));
    let added = xprof_device_compute("tool_input_pipeline_analyzer__stripped.json")
        - xprof_device_compute("tool_input_pipeline_analyzer.json");
    let less = theirs.findings[starvation].impact.ms_per_step - ours.findings[starvation].impact.ms_per_step;
    assert!(added > 0.02 && (less - added).abs() < 1e-6, "{less} ms less wait, XProf adds {added} ms");
    // The wait the copies cover is idle again, no more, no less.
    let more_idle = ours.findings[idle].impact.ms_per_step - theirs.findings[idle].impact.ms_per_step;
    assert!((more_idle - added).abs() < 1e-6, "{more_idle} ms more idle, XProf adds {added} ms");
    let step = ours.metrics.step_time_ms_mean.unwrap();
    let host_less = (theirs.metrics.host_wait_pct.unwrap() - ours.metrics.host_wait_pct.unwrap()) * step / 100.0;
    assert!((host_less - added).abs() < 1e-6, "{host_less} ms less host wait, XProf adds {added} ms");
}
