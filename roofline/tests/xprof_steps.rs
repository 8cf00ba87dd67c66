//! Step times and step breakdowns equal XProf's: on TPU-shaped fixtures (input-pipeline tool
//! data, full precision) and on real CPU traces (`get_step_trace`).

mod common;

use common::{table_rows, testdata, tpu_fixture_dirs, xprof_json};
use xlens_roofline::{StepSource, Steps};
use xlens_xplane::Picos;

fn steps(dir: &std::path::Path) -> Steps {
    let session = xlens_testkit::open_session(dir).unwrap();
    Steps::from_space(session.hosts()[0].space()).unwrap()
}

/// Milliseconds with XProf's JSON precision (the tool prints ps as fractional ms).
fn ms_to_ps(ms: f64) -> Picos {
    Picos((ms * 1e9).round() as i64)
}

#[test]
fn tpu_step_breakdown_matches_input_pipeline_analysis() {
    for dir in tpu_fixture_dirs() {
        let ours = steps(&dir);
        assert_eq!(ours.source, StepSource::DeviceSteps);
        let tables = xprof_json(&dir, "tool_input_pipeline_analyzer.json");
        let rows = table_rows(&tables[1]);
        assert_eq!(rows.len(), ours.steps.len(), "{}", dir.display());
        for (row, step) in rows.iter().zip(&ours.steps) {
            let ctx = format!("{} step {}", dir.display(), step.name);
            assert_eq!(row["stepnum"].as_str().unwrap(), step.name, "{ctx}");
            let b = step.tpu_breakdown().unwrap();
            let get = |k: &str| ms_to_ps(row[k].as_f64().unwrap());
            assert_eq!(b.compute, get("tcComputeTimeMs"), "{ctx}: compute");
            assert_eq!(b.infeed, get("tcInfeedTimeMs"), "{ctx}: infeed");
            assert_eq!(b.outfeed, get("tcOutfeedTimeMs"), "{ctx}: outfeed");
            assert_eq!(b.idle, get("tcIdleTimeMs"), "{ctx}: idle");
            assert_eq!(b.host_transfer, get("hostTransferTimeMs"), "{ctx}: host transfer");
        }
    }
}

#[test]
fn tpu_step_times_match_step_trace_and_per_step_roofline() {
    for dir in tpu_fixture_dirs() {
        let ours = steps(&dir);
        let trace = xprof_json(&dir, "get_step_trace.json");
        let breakdown = trace["output"]["step_breakdown"].as_array().unwrap();
        assert_eq!(breakdown.len(), ours.steps.len());
        for (row, step) in breakdown.iter().zip(&ours.steps) {
            // The CLI rounds to 0.1 us.
            let theirs = row["step_time_ms"].as_f64().unwrap();
            assert!((step.duration.as_ms_f64() - theirs).abs() <= 0.5e-4, "{}: {}", dir.display(), step.name);
        }
        // Per-step roofline records sum every core's step time: exact in ps.
        let tables = xprof_json(&dir, "tool_roofline_model.json");
        let rows = table_rows(&tables[0]);
        let mut checked = 0;
        for step in &ours.steps {
            let row = rows.iter().find(|r| r["step"] == step.name.as_str() && r["operation"] == "Program").unwrap();
            let sum: Picos = step.cores.iter().map(|c| c.duration).sum();
            assert_eq!(sum, Picos((row["total_time"].as_f64().unwrap() * 1e6).round() as i64), "{}", step.name);
            checked += 1;
        }
        assert_eq!(checked, ours.steps.len());
        let stats = ours.stats().unwrap();
        let summary = &trace["output"]["summary"];
        assert!((stats.mean_ms - summary["step_time_ms_average"].as_f64().unwrap()).abs() <= 0.5e-4);
        assert!((stats.stddev_ms - summary["step_time_ms_stddev"].as_f64().unwrap()).abs() <= 0.5e-3);
    }
}

#[test]
fn cpu_step_times_match_xprof_step_trace() {
    let mut checked = 0;
    for group in ["corpus", "real"] {
        let Ok(entries) = std::fs::read_dir(testdata().join(group)) else { continue };
        let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let Ok(text) = std::fs::read_to_string(dir.join("xprof/get_step_trace.json")) else { continue };
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            let ours = steps(&dir);
            let Some(rows) = doc["output"]["step_breakdown"].as_array() else {
                assert!(ours.steps.is_empty(), "{}: XProf found no steps", dir.display());
                continue;
            };
            let names: Vec<&str> = rows.iter().map(|r| r["step_num"].as_str().unwrap()).collect();
            let ours_names: Vec<&str> = ours.steps.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(ours_names, names, "{}", dir.display());
            for (row, step) in rows.iter().zip(&ours.steps) {
                let theirs = row["step_time_ms"].as_f64().unwrap();
                assert!(
                    (step.duration.as_ms_f64() - theirs).abs() <= 0.5e-4,
                    "{} {}: {} vs {theirs}",
                    dir.display(),
                    step.name,
                    step.duration.as_ms_f64()
                );
            }
            // The summary's standard deviation is the sample one (n - 1); the CLI rounds to 0.1 us.
            if let (Some(stats), Some(theirs)) =
                (ours.stats(), doc["output"]["summary"]["step_time_ms_stddev"].as_f64())
            {
                assert!(
                    (stats.stddev_ms - theirs).abs() <= 0.5e-4 + 1e-4 * theirs,
                    "{}: stddev {} vs {theirs}",
                    dir.display(),
                    stats.stddev_ms
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} real traces compared");
}

#[test]
fn variance_verdicts_on_real_traces() {
    use xlens_roofline::StepVariance;
    // Recompilation inside step 5, compilation inside step 0: outliers. Steady steps: flat.
    let v = |p: &str| steps(&testdata().join(p)).variance();
    assert_eq!(v("corpus/recompilation"), StepVariance::Outliers(vec![5]));
    assert_eq!(v("real/profile_during_warmup"), StepVariance::Outliers(vec![0]));
    assert!(matches!(v("tpu/tpu_basic"), StepVariance::Flat));
}

/// The real PyTorch/XLA captures (torch_xla 2.8 on CPU): the `xp.StepTrace` markers are XProf's
/// steps, by name and duration, warm-up steps of 1.8 s included.
#[test]
fn pytorch_xla_step_times_match_xprof_step_trace() {
    for variant in ["steady", "warmup", "input_bound"] {
        let dir = testdata().join(format!("field/ptxla_cpu_{variant}"));
        let text = std::fs::read_to_string(dir.join("xprof/get_step_trace.json")).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rows = doc["output"]["step_breakdown"].as_array().unwrap();
        let ours = steps(&dir);
        let names: Vec<&str> = rows.iter().map(|r| r["step_num"].as_str().unwrap()).collect();
        let ours_names: Vec<&str> = ours.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(ours_names, names, "{variant}");
        assert!(names.iter().all(|n| n.starts_with("train_step ")), "{variant}: {names:?}");
        for (row, step) in rows.iter().zip(&ours.steps) {
            let theirs = row["step_time_ms"].as_f64().unwrap();
            assert!((step.duration.as_ms_f64() - theirs).abs() <= 0.5e-4, "{variant} {}", step.name);
        }
        let stats = ours.stats().unwrap();
        let summary = &doc["output"]["summary"];
        // The CLI prints 0.1 us; its mean is of the rounded step times.
        let mean = summary["step_time_ms_average"].as_f64().unwrap();
        assert!((stats.mean_ms - mean).abs() <= 1e-4, "{variant}: {} vs {mean}", stats.mean_ms);
    }
}

/// On PyTorch/XLA the steps stay XProf's (the markers), but the base of a share of the step is
/// the loop's period: the input-bound loop's 5.8 ms markers are ~51 ms apart (the DataLoader runs
/// between them); the steady loop's markers are back to back.
#[test]
fn pytorch_xla_shares_are_of_the_loop_period() {
    for (variant, lo, hi) in [("input_bound", 45.0, 60.0), ("steady", 15.3, 16.0)] {
        let dir = testdata().join(format!("field/ptxla_cpu_{variant}"));
        let profile = xlens_roofline::Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
        let host = &profile.hosts()[0];
        let period = host.step_ms().unwrap();
        assert!((lo..hi).contains(&period), "{variant}: {period}");
        assert!(period >= host.steps().unwrap().stats().unwrap().mean_ms, "{variant}");
    }
}
