//! The input time of TensorFlow steps equals XProf's input-pipeline analysis: per step, the step
//! time, the device compute and the input time; and the `tf.data` stages of its input-op table.
//!
//! Every capture under `testdata/` with XProf's `tool_input_pipeline_analyzer.json` whose space
//! carries TensorFlow's grouping (its `group_id` stats, or, on a CPU-only TensorFlow capture
//! without them, the grouping XProf makes itself) is checked, plus the session directories listed in
//! `XLENS_TF_INPUT_DIRS` (`:`-separated; each with `*.xplane.pb` and `xprof/`): captures that
//! may not be kept in the repository are checked the same way.

mod common;

use std::path::{Path, PathBuf};

use common::{table_rows, testdata, xprof_json};
use xlens_roofline::InputPipeline;

/// The session directories with XProf's input-pipeline tool data (`testdata/*/*`, and the extra
/// ones named in the environment).
fn dirs_with_reference() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for group in std::fs::read_dir(testdata()).into_iter().flatten().flatten() {
        for dir in std::fs::read_dir(group.path()).into_iter().flatten().flatten() {
            if dir.path().join("xprof/tool_input_pipeline_analyzer.json").is_file() {
                dirs.push(dir.path());
            }
        }
    }
    if let Ok(extra) = std::env::var("XLENS_TF_INPUT_DIRS") {
        dirs.extend(extra.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    dirs.sort();
    dirs
}

fn read(dir: &Path) -> Option<InputPipeline> {
    let session = xlens_testkit::open_session(dir).unwrap();
    InputPipeline::read(session.hosts()[0].space()).unwrap()
}

/// XProf prints times as fractional milliseconds with six decimals (1 ns).
fn close(ours_ms: f64, theirs_ms: f64) -> bool {
    (ours_ms - theirs_ms).abs() <= 1.5e-6
}

#[test]
fn tensorflow_steps_match_the_input_pipeline_analysis() {
    let mut checked = Vec::new();
    for dir in dirs_with_reference() {
        let Some(ours) = read(&dir) else { continue };
        let tables = xprof_json(&dir, "tool_input_pipeline_analyzer.json");
        let rows = table_rows(&tables[1]);
        let ctx = dir.display().to_string();
        assert_eq!(rows.len(), ours.steps.len(), "{ctx}: steps");
        for (row, step) in rows.iter().zip(&ours.steps) {
            let ctx = format!("{ctx} step {}", step.group);
            let get = |k: &str| row[k].as_f64().unwrap();
            assert_eq!(row["stepnum"].as_str().unwrap(), step.name, "{ctx}");
            assert!(close(step.span.duration().as_ms_f64(), get("stepTimeMs")), "{ctx}: step time");
            assert!(close(step.device_compute.as_ms_f64(), get("deviceComputeTimeMs")), "{ctx}: device compute");
            assert!(
                close(step.xprof_input().as_ms_f64(), get("infeedTimeMs")),
                "{ctx}: input {:?} vs {}",
                step,
                get("infeedTimeMs")
            );
        }
        // The input-op table: every `tf.data` stage with its count, total and self time.
        let ops = table_rows(&tables[2]);
        assert_eq!(ops.len(), ours.stages.len(), "{ctx}: stages");
        for op in &ops {
            let name = op["opName"].as_str().unwrap();
            let stage = ours.stages.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{ctx}: {name}"));
            assert_eq!(stage.count as f64, op["count"].as_f64().unwrap(), "{ctx}: {name} count");
            assert!(close(stage.total.as_ms_f64(), op["timeInMs"].as_f64().unwrap()), "{ctx}: {name} total");
            assert!(close(stage.self_time.as_ms_f64(), op["selfTimeInMs"].as_f64().unwrap()), "{ctx}: {name} self");
        }
        checked.push(dir.file_name().unwrap().to_string_lossy().into_owned());
    }
    assert!(!checked.is_empty(), "no TensorFlow capture with XProf's input-pipeline analysis");
    // The TensorFlow 2.21 CPU captures, grouped here as XProf groups them, are among them.
    for name in ["tf_cpu_keras_warmup", "tf_cpu_keras_steady", "tf_cpu_keras_input_bound", "tf_cpu_keras_xla"] {
        assert!(checked.iter().any(|c| c == name), "{name} not checked: {checked:?}");
    }
}

/// The TensorFlow 2.21 CPU captures carry no `group_id`: XProf groups their events itself, and
/// so must we, or their input time goes unmeasured.
#[test]
fn tensorflow_cpu_captures_without_group_ids_are_grouped_as_xprof_groups_them() {
    for (name, steps, input_pct) in [
        ("tf_cpu_keras_warmup", 2, 0.9),
        ("tf_cpu_keras_steady", 5, 0.5),
        ("tf_cpu_keras_input_bound", 5, 55.5),
        ("tf_cpu_keras_xla", 5, 4.3),
    ] {
        let dir = testdata().join("field").join(name);
        let ours = read(&dir).unwrap_or_else(|| panic!("{name}: no input pipeline"));
        assert_eq!(ours.steps.len(), steps, "{name}");
        assert!(ours.steps.iter().all(|s| s.name.starts_with("train ")), "{name}: {:?}", ours.steps);
        let input: f64 = ours.steps.iter().map(|s| s.xprof_input().as_ms_f64()).sum();
        let pct = 100.0 * input / ours.step_time().as_ms_f64();
        // XProf prints the share with one decimal.
        assert!((pct - input_pct).abs() < 0.05, "{name}: input {pct:.2} % vs XProf's {input_pct} %");
        assert!((ours.input_wait_pct().unwrap() - input_pct).abs() < 0.05, "{name}");
    }
}
