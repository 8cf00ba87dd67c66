//! A TensorFlow GPU capture without `group_id` stats is grouped as XProf groups it: device events
//! take the group of the host launch with their `correlation_id` (and, still ungrouped, the
//! latest group before them on their GPU), the derived `Steps` and the steps equal those of the
//! same capture with TensorFlow's own grouping, and the per-step figures equal XProf's for the
//! ungrouped capture.
//!
//! `testdata/field/tf_v100_multiworker` is a real TensorFlow GPU capture (2020) that carries its
//! grouping (`group_id` on host and device events, `Steps` lines on the GPU planes). Stripped of
//! them (every `group_id` and `step_name` stat, the two stats grouping writes, and the `Steps`
//! lines derived from them), it is what a TensorFlow 2.21 capture is: the same events,
//! ungrouped. One stat is added: the `_r` root level TensorFlow 2.21 writes on `FunctionRun` (the
//! CPU captures of `testdata/field/tf_cpu_keras_*` carry it), which XProf 2.24 needs to find
//! roots; the 2020 grouping rooted `FunctionRun` by its name.
//!
//! The capture's grouping also made groups of the `tf.data` functions' `FunctionRun`s (groups 1,
//! 2, 4 and 5, host events only); XProf 2.24 skips roots of `tf.data` step ids, so those events
//! stay ungrouped here. Every other host event is in the capture's group, and so is every device
//! event the capture grouped. XProf's own grouping of the stripped capture
//! (`xprof/trace_viewer__stripped_device_groups.json`, `xprof/tool_input_pipeline_analyzer__stripped.json`;
//! see the folder's README) adds to the step the copies TensorFlow's 2020 grouping left out:
//! launched from `tf.data` functions, they take the latest group on their GPU
//! (`ProcessUngroupedEvents`), and as their names (`MemcpyH2D`) are not XProf's copy names they
//! count as device compute (14.899923 ms per step instead of the capture's 14.875539 ms).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{table_rows, testdata, xprof_json};
use xlens_roofline::{DeviceEventGroups, HostEventGroups, InputPipeline, StepSource, Steps};
use xlens_testkit::strip::{Strip, strip};
use xlens_xplane::{Space, names};

const DIR: &str = "field/tf_v100_multiworker";
const V100: &str = "field/tf_v100_multiworker/34.83.195.179_6003.xplane.pb";

/// The V100 capture as recorded, and stripped of its grouping.
fn spaces() -> (Space, Space) {
    let bytes = std::fs::read(testdata().join(V100)).unwrap();
    let stripped = strip(
        &bytes,
        &Strip {
            stats: &[names::stat::GROUP_ID, names::stat::STEP_NAME],
            lines: &[names::line::STEPS],
            add: &[("FunctionRun", names::stat::IS_ROOT, 1)],
        },
    )
    .unwrap();
    (Space::parse(bytes.into()).unwrap(), Space::parse(stripped.into()).unwrap())
}

/// Checks that `ours` (per event) is the capture's `group_id` up to a renaming of the groups,
/// one to one; returns the renaming (capture's group → ours) and the events compared.
fn same_partition(
    what: &str,
    pairs: impl Iterator<Item = (Option<i64>, Option<i64>)>,
    map: &mut BTreeMap<i64, i64>,
    not_grouped: &BTreeSet<i64>,
) -> usize {
    let mut n = 0;
    for (theirs, ours) in pairs {
        n += 1;
        match (theirs, ours) {
            (None, None) => {}
            (Some(t), None) if not_grouped.contains(&t) => {}
            (Some(t), Some(o)) => {
                assert_eq!(*map.entry(t).or_insert(o), o, "{what}: capture group {t} split");
            }
            (t, o) => panic!("{what}: capture's group {t:?}, ours {o:?}"),
        }
    }
    let mut seen = BTreeSet::new();
    assert!(map.values().all(|o| seen.insert(*o)), "{what}: groups merged: {map:?}");
    n
}

#[test]
fn stripping_leaves_an_ungrouped_tensorflow_gpu_capture() {
    let (original, stripped) = spaces();
    assert!(!DeviceEventGroups::applies(&original), "the capture's own grouping is kept");
    assert!(DeviceEventGroups::applies(&stripped));
    for plane in stripped.planes() {
        assert!(plane.stat_id(names::stat::GROUP_ID).is_none(), "{}", plane.name());
        assert!(plane.line_by_name(names::line::STEPS).is_none(), "{}", plane.name());
    }
    let count = |s: &Space| s.planes().iter().map(|p| p.event_count()).sum::<usize>();
    let steps_events: usize =
        original.gpus().iter().filter_map(|p| p.line_by_name(names::line::STEPS)).map(|l| l.event_count()).sum();
    assert_eq!(count(&stripped), count(&original) - steps_events);
}

/// Every host event, and every device event the capture grouped, falls in the group the capture
/// gave it (up to the groups' numbering); per GPU stream line, the groups are XProf's for the
/// stripped capture, and so are the derived `Steps` (which equal the capture's own).
#[test]
fn device_events_take_their_launches_groups() {
    let (original, stripped) = spaces();
    let host = HostEventGroups::build(stripped.host_threads().unwrap()).unwrap().unwrap();
    let devices = DeviceEventGroups::build(&stripped, &host).unwrap().unwrap();
    let regroup = xprof_json(&testdata().join(DIR), "trace_viewer__stripped_device_groups.json");
    let mut map = BTreeMap::new();
    // Host events.
    let (oh, sh) = (original.host_threads().unwrap(), stripped.host_threads().unwrap());
    let gid = oh.stat_id(names::stat::GROUP_ID).unwrap();
    let mut host_pairs = Vec::new();
    // The capture's groups rooted at a `tf.data` function's `FunctionRun`.
    let mut tf_data = BTreeSet::new();
    for (li, (ol, sl)) in oh.lines().iter().zip(sh.lines()).enumerate() {
        for (oe, se) in ol.events(oh).zip(sl.events(sh)) {
            let (oe, se) = (oe.unwrap(), se.unwrap());
            assert_eq!((oe.name(), oe.start()), (se.name(), se.start()));
            let theirs = oe.stat(gid).and_then(|s| s.as_i64());
            if ol.name().starts_with("tf_data_iterator_resource") && oe.name() == "FunctionRun" {
                tf_data.extend(theirs);
            }
            host_pairs.push((theirs, host.group(li, se.index())));
        }
    }
    assert_eq!(tf_data, BTreeSet::from([1, 2, 4, 5]));
    let host_events = same_partition("host", host_pairs.into_iter(), &mut map, &tf_data);
    assert_eq!(map, BTreeMap::from([(0, 0), (3, 1), (6, 2)]));
    // Device events of the stream lines (the capture's derived lines are not grouped here).
    let mut device_pairs = Vec::new();
    let mut grouped = 0;
    for (op, sp) in original.gpus().iter().zip(stripped.gpus()) {
        assert_eq!(op.name(), sp.name());
        let gid = op.stat_id(names::stat::GROUP_ID);
        for (li, sl) in sp.lines().iter().enumerate() {
            if names::line::is_derived(sl.id().0, sl.name()) {
                continue;
            }
            let ol = op.line_by_name(sl.name()).unwrap();
            let mut counts: BTreeMap<String, u64> = BTreeMap::new();
            for (oe, se) in ol.events(op).zip(sl.events(sp)) {
                let (oe, se) = (oe.unwrap(), se.unwrap());
                let theirs = gid.and_then(|id| oe.stat(id)).and_then(|s| s.as_i64());
                let ours = devices.group(sp, li, se.index());
                grouped += usize::from(theirs.is_some());
                *counts.entry(ours.map_or("none".to_string(), |g| g.to_string())).or_default() += 1;
                // The capture's groups are kept; its ungrouped events may join one.
                if theirs.is_some() {
                    device_pairs.push((theirs, ours));
                }
            }
            let xprof: BTreeMap<String, u64> = regroup["planes"][sp.name()][sl.name()]
                .as_object()
                .unwrap_or_else(|| panic!("{} {}", sp.name(), sl.name()))
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                .collect();
            assert_eq!(counts, xprof, "{} {}", sp.name(), sl.name());
        }
    }
    let device_events = same_partition("device", device_pairs.into_iter(), &mut map, &BTreeSet::new());
    // Every host event; the 1,342 device events the capture grouped (the step's 665 kernels and
    // 6 copies on each of the two busy GPUs).
    assert_eq!((host_events, device_events, grouped), (15_354, 1_342, 1_342));
    // The device `Steps` events XProf derives equal the capture's own, group for group.
    for (op, sp) in original.gpus().iter().zip(stripped.gpus()) {
        let theirs: Vec<(i64, i64, i64)> = match op.line_by_name(names::line::STEPS) {
            Some(line) => line
                .events(op)
                .map(|e| {
                    let e = e.unwrap();
                    (map[&e.name().parse::<i64>().unwrap()], e.start().0, e.end().0)
                })
                .collect(),
            None => Vec::new(),
        };
        let ours: Vec<(i64, i64, i64)> =
            devices.step_markers(sp).iter().map(|&(g, s)| (g, s.start.0, s.end.0)).collect();
        assert_eq!(ours, theirs, "{}", sp.name());
        let xprof: Vec<(i64, i64, i64)> = regroup["steps"][sp.name()]
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|s| {
                        let start = s["start_ps"].as_i64().unwrap();
                        (
                            s["group"].as_str().unwrap().parse().unwrap(),
                            start,
                            start + s["duration_ps"].as_i64().unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(ours, xprof, "{}", sp.name());
    }
}

/// The steps of the stripped capture equal the capture's and XProf's step trace of it; the
/// input pipeline's per-step figures equal XProf's for the stripped capture.
#[test]
fn steps_and_input_pipeline_equal_xprofs() {
    let (original, stripped) = spaces();
    let (theirs, ours) = (Steps::from_space(&original).unwrap(), Steps::from_space(&stripped).unwrap());
    assert_eq!((theirs.source, ours.source), (StepSource::DeviceSteps, StepSource::DeviceSteps));
    let spans = |s: &Steps| s.steps.iter().map(|s| (s.start, s.duration)).collect::<Vec<_>>();
    assert_eq!(spans(&ours), spans(&theirs));
    // XProf's step trace of the capture: one step of 21.3104 ms.
    let trace = xprof_json(&testdata().join("field/tf_v100_multiworker"), "get_step_trace.json");
    let summary = &trace["output"]["summary"];
    assert_eq!(ours.steps.len() as u64, summary["total_steps"].as_u64().unwrap());
    for (step, row) in ours.steps.iter().zip(trace["output"]["step_breakdown"].as_array().unwrap()) {
        assert!((step.duration.as_ms_f64() - row["step_time_ms"].as_f64().unwrap()).abs() < 5e-5);
    }
    // Per step: the span and the input times; the device compute with the copies XProf's
    // grouping adds (see the module notes).
    let (theirs, ours) =
        (InputPipeline::read(&original).unwrap().unwrap(), InputPipeline::read(&stripped).unwrap().unwrap());
    assert_eq!(ours.steps.len(), theirs.steps.len());
    assert!(!ours.steps.is_empty());
    for (o, t) in ours.steps.iter().zip(&theirs.steps) {
        assert_eq!(
            (o.name.as_str(), o.span, o.copy_in, o.host_to_device),
            (t.name.as_str(), t.span, t.copy_in, t.host_to_device)
        );
        assert!(o.device_compute > t.device_compute && o.host_wait_input < t.host_wait_input);
    }
    assert_eq!(ours.stages, theirs.stages);
    // XProf's input-pipeline analysis of the stripped capture, per step.
    let tables = xprof_json(&testdata().join(DIR), "tool_input_pipeline_analyzer__stripped.json");
    let rows = table_rows(&tables[1]);
    assert_eq!(rows.len(), ours.steps.len());
    for (row, step) in rows.iter().zip(&ours.steps) {
        let get = |k: &str| row[k].as_f64().unwrap();
        assert_eq!(row["stepnum"].as_str().unwrap(), step.name);
        assert!((step.span.duration().as_ms_f64() - get("stepTimeMs")).abs() <= 1.5e-6);
        assert!((step.device_compute.as_ms_f64() - get("deviceComputeTimeMs")).abs() <= 1.5e-6);
        assert!((step.xprof_input().as_ms_f64() - get("infeedTimeMs")).abs() <= 1.5e-6);
    }
}
