//! `input_starvation`: the device waits for the host to produce the next batch (a slow data
//! loader, host preprocessing, a synchronous host-to-device copy) at the start of every step.

use std::collections::BTreeMap;

use xlens_roofline::{Framework, InputPipeline, Span, StepSource, Steps, TfDataPipelines, TfDataStageKind};
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::{HostNeeds, HostProfile};
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct InputStarvation;

const META: DetectorMeta = DetectorMeta {
    id: "input_starvation",
    title: "The device waits for input at the start of each step",
    severity: Severity::P1,
    // Op events are needed except on TensorFlow captures with step groups (see `measure`).
    needs: &[Need::Steps],
    doc: DetectorDoc {
        detects: "Steps whose device work waits for the host to deliver input. TPU: XProf's input-pipeline \
                  rule: the largest core's `infeed` op time per step, plus, when the program has no infeed op, \
                  the idle time that host input waits (IteratorGetNext, data loaders, host-to-device transfers) \
                  explain. TensorFlow captures (step groups: TensorFlow's `group_id`, or on captures without it the \
                  groups XProf makes itself, GPU kernels and copies in the group of their host launch): per step, the host's wait in the `tf.data` iterator \
                  (`IteratorGetNext`) and the copies in while the device runs nothing of the step, measured with \
                  XProf's step-event priorities. Host-run programs (XLA:CPU): the host phase at the start of each \
                  step before the first op or program dispatch, during which the device has nothing to run (e.g. a \
                  `data_loader` TraceMe on the training thread). PyTorch/XLA captures: the host-to-device copies \
                  (`TransferToDevice`) and input events inside each step, plus the host time between one step \
                  marker and the next while the device runs nothing (the `for batch in loader` of the training loop \
                  fetches the next batch there, outside `xp.StepTrace`); the host phase before a step's first op is \
                  PyTorch/XLA tracing the model lazily, not input.",
        why: "While the input pipeline runs on the critical path the accelerator idles: the step is as slow as \
              the loader, and faster hardware or better kernels do not help. XProf calls a profile MODERATELY \
              input-bound from 5 % of the step and HIGHLY input-bound from 20 %.",
        evidence: "The input-bound share of the step time and the input wait per step; the steps affected; the \
                   host events of the input phase grouped by name (the loader TraceMe, IteratorGetNext, \
                   device_put) with the longest occurrences as timeline events; on TPU the infeed ops with their \
                   time per step; on TensorFlow XProf's own input figure and the slowest `tf.data` pipeline: its \
                   calls and the stage its slowest call waited on (XProf's tf.data bottleneck analysis: \
                   each element's producer on a background thread linked to the call that awaited it), whose \
                   kind (a Python generator, a source, a sequential or parallel transformation) picks the \
                   TensorFlow fix; without a root iterator, the slowest stages by self time; the gap between the step start and its first op.",
        thresholds: "Reported when the input wait is at least `input_starvation.min_input_pct` (default 5) % of \
                     the step time, as P0 from `input_starvation.p0_input_pct` (default 20) % (XProf's moderate \
                     and high input-bound thresholds); P2 below 2 % of the step.",
        fix: "Take input preparation off the critical path: prefetch batches on a background thread or process, \
              overlap the host-to-device copy of batch k+1 with step k, move expensive preprocessing (tokenisation, \
              decoding, augmentation) offline or onto more worker processes, and never sleep or block on I/O inside \
              the step.",
        fix_lines: FixLines {
            jax: "`jax.device_put` batch k+1 before running step k (or flax's `prefetch_to_device`), with grain or \
                  tf.data prefetching (`.prefetch(2)`) behind it.",
            tensorflow: "`dataset.map(f, num_parallel_calls=tf.data.AUTOTUNE)`, `.cache()` after the expensive steps \
                         that do not change between epochs, `.prefetch(tf.data.AUTOTUNE)` last, and \
                         `interleave` for parallel file reads, no Python generator (`from_generator`) on the hot \
                         path, and `tf.data.experimental.prefetch_to_device` (or `experimental_distribute_dataset` \
                         under `tf.distribute`) for the copy; the tf.data service spreads preprocessing over more \
                         machines.",
            pytorch_xla: "`MpDeviceLoader` over a `DataLoader` with `num_workers` > 0 and `persistent_workers=True`, \
                          so batches are prepared in worker processes and copied ahead of the step.",
        },
    },
};

/// Host events that belong to an input pipeline (case-insensitive substrings).
const INPUT_NAMES: &[&str] = &[
    "iteratorgetnext",
    "iterator::",
    "data_loader",
    "dataloader",
    "load_batch",
    "next_batch",
    "get_batch",
    "prefetch",
    "infeedenqueue",
    "transferh2d",
    "device_put",
    "deviceput",
];

fn is_input_event(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    INPUT_NAMES.iter().any(|n| lower.contains(n))
}

/// Host events that dispatch a program (the device work of the step starts behind them).
fn is_dispatch(name: &str) -> bool {
    name.starts_with("PjitFunction(")
        || name.starts_with("PmapFunction(")
        || name.contains("cache_miss")
        || name.contains("LoadedExecutable::Execute")
        || name.contains("ExecuteReplicated")
        || name.contains("ExecuteHelper")
        || name.contains("ThunkExecutor::Execute")
        || name == "tpu::System::Execute"
}

/// How XProf words an input-bound share.
fn xprof_label(pct: f64) -> &'static str {
    if pct >= 20.0 {
        "HIGHLY input-bound"
    } else if pct >= 5.0 {
        "MODERATELY input-bound"
    } else {
        "not input-bound"
    }
}

/// The input wait of every step, with what the host did meanwhile.
#[derive(Default)]
struct InputWaits<'a> {
    /// Per step: input wait.
    per_step: Vec<Picos>,
    /// Host events of the input phases: name → (total time, occurrences).
    by_name: BTreeMap<&'a str, (Picos, usize)>,
    /// The longest host events of the input phases (for the timeline evidence).
    longest: Vec<xlens_xplane::Event<'a>>,
    /// Extra evidence of the path taken.
    notes: Vec<Evidence>,
    /// Per step: the time before it and outside every step (PyTorch/XLA's loop between step
    /// markers), part of the loop's period; the input share is of the steps and this time
    /// together.
    outside: Vec<Picos>,
    /// On TensorFlow step groups: the slowest `tf.data` stages by self time, the evidence when
    /// no root iterator can be followed (the `tf.data` pipelines are read only for a finding).
    tf_stage_notes: Option<Vec<Evidence>>,
    /// The `tf.data` stage the slowest call of a slow pipeline waited on: the sentence the
    /// finding adds, and the TensorFlow fix line it calls for (`None`: the detector's own).
    tf_data_bottleneck: Option<(String, Option<&'static str>)>,
}

/// Host-marker steps (XLA:CPU and other host-run programs): the leading host phase of each step.
fn host_waits<'a>(host: &'a HostProfile, steps: &Steps) -> Option<InputWaits<'a>> {
    let plane = host.space().host_threads()?;
    let ops = host.host_ops();
    if ops.is_empty() {
        return None;
    }
    // The first op of a step is the earliest, over the lines, of each line's first op starting
    // in or after it, not the next of every op sorted (millions on a GPU or CPU capture). A
    // line's ops come by start; one that does not is sorted into a copy.
    let mut in_order: Vec<&[xlens_roofline::HostOp]> = Vec::new();
    let mut sorted: Vec<Vec<Picos>> = Vec::new();
    for (_, line_ops) in ops.by_line() {
        if line_ops.is_sorted_by_key(|o| o.start) {
            in_order.push(line_ops);
        } else {
            let mut starts: Vec<Picos> = line_ops.iter().map(|o| o.start).collect();
            starts.sort_unstable();
            sorted.push(starts);
        }
    }
    // Per line in order, a cursor: how many of its ops start before the last step asked (steps
    // come in time order, so each line is stepped through once).
    let mut cursors = vec![0usize; in_order.len()];
    let mut first_start_from = |lo: Picos| {
        let of_ordered = in_order
            .iter()
            .zip(cursors.iter_mut())
            .filter_map(|(l, at)| l.get(evidence::partition_from(l, at, |o| o.start < lo)).map(|o| o.start));
        let of_sorted = sorted.iter().filter_map(|s| s.get(s.partition_point(|&t| t < lo)).copied());
        of_ordered.chain(of_sorted).min()
    };
    // Each step's first op (none: nothing in the step waited for input).
    let first_ops: Vec<Option<Picos>> =
        steps.steps.iter().map(|step| first_start_from(step.start).filter(|&s| s < step.end())).collect();
    // An input phase ends at its step's first op or before (a dispatch): only the marker lines'
    // events that start before some step's first op can count, and only they are kept (the
    // windows by start, with the latest end of those begun so far).
    let mut windows: Vec<(Picos, Picos)> =
        steps.steps.iter().zip(&first_ops).filter_map(|(step, first)| first.map(|f| (step.start, f))).collect();
    windows.sort_unstable();
    let mut reach = Picos(i64::MIN);
    let reach_by_window: Vec<Picos> = windows
        .iter()
        .map(|&(_, end)| {
            reach = reach.max(end);
            reach
        })
        .collect();
    let (dispatches, mut events) = marker_line_events(host, plane, &windows, &reach_by_window);
    let mut out = InputWaits::default();
    let mut first_op_gaps = Vec::new();
    // Each step's input phase, from its start to its first dispatch or op.
    let mut phases: Vec<(Picos, Picos)> = Vec::new();
    for (step, first_op) in steps.steps.iter().zip(first_ops) {
        let (lo, hi) = (step.start, step.end());
        let first_dispatch = dispatches.get(dispatches.partition_point(|&s| s < lo)).copied().filter(|&s| s < hi);
        let Some(first_op) = first_op else {
            out.per_step.push(Picos::ZERO);
            continue;
        };
        first_op_gaps.push(first_op - lo);
        let lead_end = first_dispatch.map_or(first_op, |d| d.min(first_op));
        out.per_step.push(lead_end - lo);
        phases.push((lo, lead_end));
    }
    phases.sort_unstable();
    events.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index(), e.index()));
    for &(lo, lead_end) in &phases {
        // The outermost host events that run inside the input phase (frames that enclose the
        // whole step, like the Python function of the loop body, are not input work).
        let mut open_until = Picos(i64::MIN);
        for ev in &events[events.partition_point(|e| e.start() < lo)..] {
            if ev.start() >= lead_end {
                break;
            }
            if ev.start() < open_until || ev.end() > lead_end {
                continue;
            }
            open_until = ev.end();
            let t = ev.duration();
            let entry = out.by_name.entry(ev.name()).or_default();
            entry.0 += t;
            entry.1 += 1;
            out.longest.push(*ev);
        }
    }
    out.notes = host_notes(host, first_op_gaps);
    Some(out)
}

/// The dispatches and the other events of the step-marker lines (step markers aside) that start
/// inside an input window: the dispatch starts sorted, the events in line order (the caller
/// sorts them). `windows` are sorted by start and `reach[i]` is the latest end of
/// `windows[..=i]`, so an event starts inside their union when it starts before the reach of the
/// last window that starts at or before it. Only a dispatch inside a step's window can end its
/// input phase (the phase ends at the step's first op otherwise), so the others are not needed.
/// A line in start order is read around the windows only: its time index skips the rest.
fn marker_line_events<'a>(
    host: &HostProfile,
    plane: &'a xlens_xplane::Plane,
    windows: &[(Picos, Picos)],
    reach: &[Picos],
) -> (Vec<Picos>, Vec<xlens_xplane::Event<'a>>) {
    let mut dispatches: Vec<Picos> = Vec::new();
    let mut events: Vec<xlens_xplane::Event<'a>> = Vec::new();
    let Some(&(first, _)) = windows.first() else { return (dispatches, events) };
    // Dispatches and step markers, decided once per metadata entry.
    let dispatch = plane.metadata_mask(|m| is_dispatch(m.name()));
    let marker = plane.metadata_mask(|m| xlens_roofline::is_host_step_marker(m.name()));
    for index in evidence::step_marker_lines(host) {
        let mut walk = plane.lines()[index].events(plane);
        walk.skip_to(first);
        let mut skipped_to = first;
        // Events come by start: each one's window is found from the last one's.
        let mut cursor = 0usize;
        while let Some(Ok(ev)) = walk.next() {
            let start = ev.start();
            let at = evidence::partition_from(windows, &mut cursor, |&(lo, _)| lo <= start);
            if at == 0 || start >= reach[at - 1] {
                // Outside every window: on to the next one (past the last one, to the line's
                // end; a line out of start order is read whole, whatever the skip). The events
                // of the block skipped to ask for the same target, once.
                let next = windows.get(at).map_or(Picos(i64::MAX), |&(lo, _)| lo);
                if next > skipped_to {
                    walk.skip_to(next);
                    skipped_to = next;
                }
                continue;
            }
            if dispatch.contains(&ev) {
                dispatches.push(start);
            }
            if !marker.contains(&ev) {
                events.push(ev);
            }
        }
    }
    dispatches.sort();
    (dispatches, events)
}

/// The notes of the host path: the median time to the first op, and the anatomy's host-only share.
fn host_notes(host: &HostProfile, mut first_op_gaps: Vec<Picos>) -> Vec<Evidence> {
    let mut notes = Vec::new();
    first_op_gaps.sort();
    if let Some(median) = first_op_gaps.get(first_op_gaps.len() / 2) {
        notes.push(Evidence::metric(
            "first_op_delay_median",
            "median time from step start to its first op",
            median.as_ms_f64(),
            "ms",
        ));
    }
    if let Ok(anatomy) = host.anatomy() {
        let total: Picos = anatomy.iter().map(|a| a.step_time).sum();
        let host_time: Picos = anatomy.iter().map(|a| a.host).sum();
        if total.0 > 0 {
            notes.push(Evidence::metric(
                "host_only_share",
                format!("host-only time {} anatomy", TimeBase::of(host).of_the()),
                100.0 * host_time.0 as f64 / total.0 as f64,
                "%",
            ));
        }
    }
    notes
}

/// TPU device steps: the largest core's infeed, plus idle relabelled by host input waits.
fn tpu_waits<'a>(host: &'a HostProfile, steps: &Steps) -> InputWaits<'a> {
    // Host input waits (XProf: HOST_WAIT_INPUT + HOST_TO_DEVICE) anywhere on the host.
    let mut input_events: Vec<xlens_xplane::Event<'a>> = evidence::host_events(host, is_input_event).collect();
    input_events.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index(), e.index()));
    let union = evidence::union(input_events.iter().map(|e| Span::new(e.start(), e.end())).collect());
    let has_infeed_op = host.op_profile().is_ok_and(|p| p.ops.iter().any(|o| o.category == "infeed"));
    let mut out = InputWaits::default();
    let mut relabelled = Picos::ZERO;
    for step in &steps.steps {
        let Some(b) = step.tpu_breakdown() else {
            out.per_step.push(Picos::ZERO);
            continue;
        };
        let mut wait = b.infeed;
        let host_input = evidence::covered(&union, step.start, step.end());
        if !has_infeed_op && host_input > Picos::ZERO {
            // XProf's MayFixTpuStepAnalysis: min(input / idle, 1) of the idle becomes infeed.
            let extra = host_input.min(b.idle);
            relabelled += extra;
            wait += extra;
        }
        out.per_step.push(wait);
    }
    for ev in input_events {
        let entry = out.by_name.entry(ev.name()).or_default();
        entry.0 += ev.duration();
        entry.1 += 1;
        out.longest.push(ev);
    }
    if let Ok(profile) = host.op_profile() {
        let n = steps.steps.len().max(1) as f64;
        for op in profile.ops.iter().filter(|o| o.category == "infeed").take(5) {
            out.notes.push(Evidence::note(format!(
                "infeed op {} ran {} time(s), {:.3} ms {} (summed over {} core(s))",
                op.name,
                op.occurrences,
                op.self_time.as_ms_f64() / n,
                TimeBase::of(host).per(),
                op.num_cores
            )));
        }
    }
    if relabelled > Picos::ZERO {
        out.notes.push(Evidence::metric(
            "input_relabelled_idle_time",
            "idle relabelled as input by host input waits",
            relabelled.as_ms_f64(),
            "ms",
        ));
    }
    out
}

/// Where the steps come from on a TensorFlow capture with step groups.
const TF_SOURCE: &str = "TensorFlow step groups (host tf.data wait against the device)";

/// Where the steps come from on a TensorFlow capture without a device (XProf counts the host's
/// waits as input there).
const TF_HOST_SOURCE: &str = "TensorFlow step groups (host tf.data wait, no device)";

/// TensorFlow step groups: per step, the host's `tf.data` wait against the device's work.
fn tf_waits<'a>(host: &'a HostProfile, steps: &Steps, input: &InputPipeline) -> InputWaits<'a> {
    let by_name = input.steps_by_name();
    let per_step = steps.steps.iter().map(|s| by_name.get(&s.name).map_or(Picos::ZERO, |i| i.input_wait())).collect();
    let mut out = InputWaits { per_step, ..InputWaits::default() };
    let spans: Vec<Span> = input.steps.iter().map(|s| s.span).collect();
    for ev in evidence::host_events(host, |n| n.to_ascii_lowercase().starts_with("iteratorgetnext")) {
        if !spans.iter().any(|s| s.start < ev.end() && ev.start() < s.end) {
            continue;
        }
        let entry = out.by_name.entry(ev.name()).or_default();
        entry.0 += ev.duration();
        entry.1 += 1;
        out.longest.push(ev);
    }
    let n = input.steps.len().max(1) as f64;
    let xprof: Picos = input.steps.iter().map(|s| s.xprof_input()).sum();
    let host_counted = input.steps.iter().all(|s| s.host_counted_by_xprof);
    out.notes.push(Evidence::metric(
        "xprof_input_time",
        if host_counted {
            format!("XProf's input time {} (no device: the host's waits are its input)", TimeBase::of(host).per())
        } else {
            format!(
                "XProf's input time {} (host waits on a GPU capture are its 'All others')",
                TimeBase::of(host).per()
            )
        },
        xprof.as_ms_f64() / n,
        "ms",
    ));
    out.tf_stage_notes = Some(
        input
            .stages
            .iter()
            .take(3)
            .map(|stage| {
                Evidence::note(format!(
                    "tf.data stage `{}`: {} call(s), {:.3} ms self time in the capture",
                    stage.name,
                    stage.count,
                    stage.self_time.as_ms_f64()
                ))
            })
            .collect(),
    );
    out
}

/// The `tf.data` evidence of a TensorFlow finding: the slowest pipeline and the stage its
/// slowest call waited on, else (no root iterator to follow) the stages over the whole capture.
fn add_tf_data(host: &HostProfile, waits: &mut InputWaits<'_>) -> Result<(), Skip> {
    let Some(stages) = waits.tf_stage_notes.take() else { return Ok(()) };
    let pipelines = host.tf_data().map_err(Skip::because)?;
    match pipelines.and_then(TfDataPipelines::slowest_host) {
        Some(p) => tf_data_evidence(p, waits),
        None => waits.notes.extend(stages),
    }
    Ok(())
}

/// The evidence of a TensorFlow host's slowest `tf.data` pipeline: its calls and, when a call is
/// slow, the stage its slowest call waited on (which then picks the TensorFlow fix).
fn tf_data_evidence(p: &xlens_roofline::TfDataPipeline, out: &mut InputWaits<'_>) {
    out.notes.push(Evidence::metric(
        "tf_data_max_latency",
        format!("slowest call of tf.data pipeline {} (`{}`)", p.name, p.root_name),
        p.max_latency.as_ms_f64(),
        "ms",
    ));
    out.notes.push(Evidence::note(format!(
        "tf.data pipeline {}: {} call(s), mean {:.3} ms, min {:.3} ms, max {:.3} ms; {} slower than {:.0} us",
        p.name,
        p.calls,
        p.mean_latency.as_ms_f64(),
        p.min_latency.as_ms_f64(),
        p.max_latency.as_ms_f64(),
        p.slow_calls,
        xlens_roofline::SLOW_TF_DATA_CALL.as_ms_f64() * 1000.0,
    )));
    let Some(b) = p.bottleneck().filter(|_| p.is_slow()) else { return };
    let waited: Vec<&str> =
        p.iterators.iter().filter(|it| it.blocking).map(xlens_roofline::TfDataIterator::short_name).collect();
    let path = waited.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" → ");
    // An asynchronous stage's own time is its wait for an element of its background thread; the
    // capture shows that thread's stages only when their events link to the call.
    let unseen = b.is_async() && !p.reaches_below(b);
    let own = if unseen {
        format!(
            "an asynchronous stage, {:.3} ms waiting for its background thread, whose stages the capture does not \
             show (they ran before the capture or on a thread it did not trace)",
            b.self_time.as_ms_f64()
        )
    } else {
        format!(
            "{}, {:.3} ms of its own time, not in the stages it called",
            b.kind().describe(),
            b.self_time.as_ms_f64()
        )
    };
    out.notes.push(Evidence::note(format!(
        "tf.data bottleneck of the slowest call: `{}` (`{}`), {own}; the call waited through {path}",
        b.short_name(),
        b.name,
    )));
    let (what, line) = if unseen {
        (
            format!(
                "Its tf.data pipeline waits on `{}`, an asynchronous stage whose background thread the capture does \
                 not show.",
                b.short_name()
            ),
            Some(TF_DATA_UNSEEN_PRODUCER),
        )
    } else {
        (format!("Its tf.data pipeline waits on `{}`, {}.", b.short_name(), b.kind().describe()), tf_data_fix(b.kind()))
    };
    out.tf_data_bottleneck = Some((what, line));
}

/// The TensorFlow fix for a pipeline that waits on an asynchronous stage whose producer the
/// capture does not show.
const TF_DATA_UNSEEN_PRODUCER: &str = "the pipeline waits on an asynchronous stage (`prefetch`, a parallel `map` or \
     `interleave`) whose background thread the capture does not show: capture later steps, or a longer window, so \
     that the stages before it appear (the first elements of an epoch also wait for `shuffle` buffers to fill and \
     files to open); meanwhile give those stages `num_parallel_calls=tf.data.AUTOTUNE`, `.cache()` what does not \
     change between epochs, and put `.prefetch(tf.data.AUTOTUNE)` last.";

/// The TensorFlow fix for a pipeline held back by a stage of this kind (`None`: the detector's
/// own line).
fn tf_data_fix(kind: TfDataStageKind) -> Option<&'static str> {
    Some(match kind {
        TfDataStageKind::PythonGenerator => {
            "the pipeline waits on a Python generator (`tf.data.Dataset.from_generator`), which makes one element \
             at a time under the GIL: build it from `tf.data` sources and TensorFlow ops instead \
             (`from_tensor_slices`, `TFRecordDataset`, a `map` of TensorFlow ops), or split the generator's work \
             into shards and `interleave` several generators with `num_parallel_calls=tf.data.AUTOTUNE`; then \
             `.cache()` what does not change between epochs and put `.prefetch(tf.data.AUTOTUNE)` last."
        }
        TfDataStageKind::Source => {
            "the pipeline waits on its source: read in parallel (`interleave` over the files with \
             `num_parallel_calls=tf.data.AUTOTUNE`, or `TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)`), \
             keep the data close to the host (same region, local disk), `.cache()` what fits in memory, and put \
             `.prefetch(tf.data.AUTOTUNE)` last."
        }
        TfDataStageKind::DataService => {
            "the pipeline waits on the tf.data service: profile its workers, add workers or give them the \
             expensive transformations, and put `.prefetch(tf.data.AUTOTUNE)` after the service's dataset."
        }
        TfDataStageKind::RemoteSource => {
            "the pipeline waits on a source on another machine: profile that machine, fetch in parallel \
             (`interleave` with `num_parallel_calls=tf.data.AUTOTUNE`), and prefetch deeper \
             (`.prefetch(tf.data.AUTOTUNE)`)."
        }
        TfDataStageKind::Parallelisable => {
            "the pipeline waits on a transformation that runs one element at a time: give it \
             `num_parallel_calls=tf.data.AUTOTUNE` (`map`, or `interleave` in place of `flat_map`), vectorise its \
             function (`batch` before `map`), `.cache()` after it when its output does not change between epochs, \
             and put `.prefetch(tf.data.AUTOTUNE)` last."
        }
        TfDataStageKind::Parallel => {
            "the pipeline waits on a transformation that already runs in parallel: set \
             `num_parallel_calls=tf.data.AUTOTUNE` where it is a fixed number, make its function cheaper (batch \
             first and vectorise it; `tf.py_function` and Python code serialise on the GIL), `.cache()` after it \
             when its output does not change between epochs, or give it more CPUs (a larger host, or the tf.data \
             service)."
        }
        TfDataStageKind::Sequential => {
            "the pipeline waits on a transformation without a parallel form (`filter`, `batch`, `unbatch`, …): \
             run several copies of the pipeline over shards of the input and combine them (`interleave` of the \
             shards with `num_parallel_calls=tf.data.AUTOTUNE`), give `batch` `num_parallel_calls=tf.data.AUTOTUNE`, \
             and `.cache()` after it when its output does not change between epochs."
        }
        TfDataStageKind::Other => return None,
    })
}

/// Where the steps come from on a PyTorch/XLA capture.
const TORCH_SOURCE: &str = "PyTorch/XLA step markers (input copies in each step, the loop between steps)";

/// What the wait between PyTorch/XLA steps goes under: no event marks it (the Python tracer is
/// off by default), it is the host outside every step marker with the device idle.
const BETWEEN_STEPS: &str = "the loop between step markers (its next batch)";

/// PyTorch/XLA's input inside a step: the input events, and its runtime's host-to-device copies
/// (`PjRtComputationClient::TransferToDevice`, a batch moved with `.to(device)`).
fn is_torch_input_event(name: &str) -> bool {
    is_input_event(name) || name.contains("TransferToDevice")
}

/// PyTorch/XLA step markers: per step, the input events and copies inside it, plus the time
/// since the previous step's end during which the device ran nothing.
///
/// PyTorch/XLA records the model's ops lazily: the host phase before a step's first op is the
/// model traced into a graph (cut and dispatched by `xm.mark_step()` when `xp.StepTrace`
/// exits), not input, so the leading-phase rule of [`host_waits`] does not apply. Its training
/// loop is `for batch in loader:` around `with xp.StepTrace(...)`, so the loader's `next()` runs
/// between two step markers; what the device does not cover of that gap (it may still run the
/// step just dispatched) is the loop waiting for its next batch.
fn torch_waits<'a>(host: &'a HostProfile, steps: &Steps) -> InputWaits<'a> {
    let ops = evidence::union(host.host_ops().iter().map(|o| Span::new(o.start, o.end)).collect());
    let mut inputs: Vec<xlens_xplane::Event<'a>> = evidence::host_events(host, is_torch_input_event).collect();
    inputs.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index(), e.index()));
    let input_union = evidence::union(inputs.iter().map(|e| Span::new(e.start(), e.end())).collect());
    let n = steps.steps.len();
    let mut out = InputWaits { per_step: vec![Picos::ZERO; n], outside: vec![Picos::ZERO; n], ..InputWaits::default() };
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (steps.steps[i].start, i));
    let mut reach: Option<Picos> = None;
    let (mut inside_total, mut idle_total, mut gaps) = (Picos::ZERO, Picos::ZERO, 0usize);
    for &i in &order {
        let step = &steps.steps[i];
        let (lo, hi) = (step.start, step.end());
        let inside = evidence::covered(&input_union, lo, hi);
        let gap = match reach {
            Some(prev) if prev < lo => Span::new(prev, lo),
            _ => Span::new(lo, lo),
        };
        let idle_before = (gap.end - gap.start) - evidence::covered(&ops, gap.start, gap.end);
        if idle_before.0 > 0 {
            gaps += 1;
        }
        inside_total += inside;
        idle_total += idle_before;
        out.per_step[i] = inside + idle_before;
        out.outside[i] = gap.end - gap.start;
        reach = Some(reach.map_or(hi, |r| r.max(hi)));
    }
    // The steps' union, searched by start: a capture of many steps and copies stays linear-log.
    let spans = evidence::union(steps.steps.iter().map(|s| Span::new(s.start, s.end())).collect());
    let in_a_step = |ev: &xlens_xplane::Event<'_>| {
        let at = spans.partition_point(|s| s.start <= ev.start());
        at > 0 && ev.start() < spans[at - 1].end
    };
    for ev in inputs.into_iter().filter(|ev| in_a_step(ev)) {
        let entry = out.by_name.entry(ev.name()).or_default();
        entry.0 += ev.duration();
        entry.1 += 1;
        out.longest.push(ev);
    }
    if idle_total.0 > 0 {
        out.by_name.insert(BETWEEN_STEPS, (idle_total, gaps));
    }
    let between: Picos = out.outside.iter().copied().sum();
    let per = TimeBase::of(host).per();
    out.notes.push(Evidence::metric(
        "time_between_steps",
        format!("host time between step markers {per}"),
        between.as_ms_f64() / n.max(1) as f64,
        "ms",
    ));
    out.notes.push(Evidence::metric(
        "idle_between_steps",
        format!("host time between step markers with the device idle {per}"),
        idle_total.as_ms_f64() / n.max(1) as f64,
        "ms",
    ));
    out.notes.push(Evidence::metric(
        "input_in_steps",
        format!("host-to-device copies and input events inside the steps {per}"),
        inside_total.as_ms_f64() / n.max(1) as f64,
        "ms",
    ));
    out
}

impl Detector for InputStarvation {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let mut measured = measure(host)?;
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        add_tf_data(host, &mut measured.waits)?;
        out.push(describe(self, host, &measured, &score, config));
        Ok(())
    }
}

/// What the profile shows: the steps, their input waits, and where the steps come from.
struct Measured<'a> {
    steps: &'a Steps,
    waits: InputWaits<'a>,
    /// Where the steps come from, for the evidence.
    source: &'static str,
}

/// Reads the input wait of every step (TPU infeed, or the leading host phase).
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    if steps.steps.is_empty() {
        return Err(Skip::because("the profile has no step markers"));
    }
    let tpu = !host.space().tpu_tensor_cores().is_empty();
    // TensorFlow's step groups measure the input from the host's iterator events alone (a
    // CPU-only TensorFlow capture has no op timeline of its own); the other rules read the ops.
    let input = host.input_pipeline().map_err(Skip::because)?.filter(|i| !i.steps.is_empty());
    if input.is_none() && !host.has(Need::OpTimeline) {
        return Err(Skip::because(Need::OpTimeline.missing()));
    }
    let (waits, source) = if tpu {
        let source = match steps.source {
            StepSource::DeviceSteps => "device steps (infeed)",
            _ => "program executions on the device (infeed)",
        };
        (tpu_waits(host, steps), source)
    } else if let Some(input) = input {
        let source = if input.steps.iter().all(|s| s.host_counted_by_xprof) { TF_HOST_SOURCE } else { TF_SOURCE };
        (tf_waits(host, steps, input), source)
    } else if host.framework().name == Framework::PyTorchXla {
        (torch_waits(host, steps), TORCH_SOURCE)
    } else {
        let waits =
            host_waits(host, steps).ok_or_else(|| Skip::because("the profile has no op events on its host threads"))?;
        (waits, "host step markers (leading host phase)")
    };
    Ok(Measured { steps, waits, source })
}

/// The input-bound share of the step time and the wait per step.
struct Score {
    /// Input-bound share of the step time, in %.
    pct: f64,
    ms_per_step: f64,
    impact: Impact,
}

/// Decides whether the input wait reaches the threshold share of the step time.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.input_starvation;
    let (steps, waits) = (m.steps, &m.waits);
    let outside: Picos = waits.outside.iter().copied().sum();
    let total_step: Picos = steps.steps.iter().map(|s| s.duration).sum::<Picos>() + outside;
    let total_wait: Picos = waits.per_step.iter().copied().sum();
    if total_step.0 <= 0 {
        return None;
    }
    let pct = 100.0 * total_wait.0 as f64 / total_step.0 as f64;
    if pct < t.min_input_pct {
        return None;
    }
    let n = steps.steps.len() as f64;
    let ms_per_step = total_wait.as_ms_f64() / n;
    // Time counted outside the steps makes the loop's period the base of the impact.
    let base = if outside.0 > 0 { Some(total_step.as_ms_f64() / n) } else { host.step_ms() };
    let impact = Impact::of(ms_per_step, base);
    Some(Score { pct, ms_per_step, impact })
}

/// The host events of the input phases, longest in total first.
fn ranked_names<'a>(waits: &InputWaits<'a>) -> Vec<(&'a str, (Picos, usize))> {
    let mut names: Vec<(&str, (Picos, usize))> = waits.by_name.iter().map(|(k, v)| (*k, *v)).collect();
    names.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    names
}

/// The evidence: the share and wait, the steps waiting, the host work of the input phase.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, s: &Score, affected: &[&str]) -> Vec<Evidence> {
    let (waits, source, n) = (&m.waits, m.source, m.steps.steps.len());
    let (pct, ms_per_step) = (s.pct, s.ms_per_step);
    let total_wait: Picos = waits.per_step.iter().copied().sum();
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric(
            "input_bound_share",
            if waits.outside.iter().any(|o| o.0 > 0) {
                format!("input-bound share {} time and the time between steps", tb.of_the())
            } else {
                format!("input-bound share {} time", tb.of_the())
            },
            pct,
            "%",
        ),
        Evidence::metric("input_wait_time", format!("input wait {}", tb.per()), ms_per_step, "ms"),
        Evidence::metric("input_waiting_steps", "steps waiting for input", affected.len() as f64, "count"),
        Evidence::note(format!("steps from {source}; waiting: {}", evidence::name_list(affected))),
    ];
    evidence.extend(waits.notes.iter().cloned());
    let names = ranked_names(waits);
    // The host work of the input phase, largest first (names under 1 % of the wait are noise).
    for (name, (time, count)) in names.iter().filter(|(_, (time, _))| time.0 * 100 >= total_wait.0).take(3) {
        evidence.push(Evidence::note(format!(
            "host `{name}`{}: {count} event(s), {:.3} ms {} in the input phase",
            if is_input_event(name) { " (input pipeline)" } else { "" },
            time.as_ms_f64() / n as f64,
            tb.per(),
        )));
    }
    let mut longest = waits.longest.clone();
    longest.sort_by_key(|e| (std::cmp::Reverse(e.duration()), e.start(), e.line().index()));
    evidence.extend(longest.iter().take(3).map(|e| evidence::event(host, e)));
    evidence
}

/// The steps whose own input wait reaches the threshold share.
fn affected_steps<'a>(m: &Measured<'a>, config: &ScanConfig) -> Vec<&'a str> {
    let t = &config.thresholds.input_starvation;
    m.steps
        .steps
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            let outside = m.waits.outside.get(*i).copied().unwrap_or(Picos::ZERO);
            let period = s.duration + outside;
            period.0 > 0 && 100.0 * m.waits.per_step[*i].0 as f64 / period.0 as f64 >= t.min_input_pct
        })
        .map(|(_, s)| s.name.as_str())
        .collect()
}

/// The finding: the input-bound share, the wait per step, the main loader, XProf's label.
fn describe(
    detector: &InputStarvation,
    host: &HostProfile,
    m: &Measured<'_>,
    s: &Score,
    config: &ScanConfig,
) -> Finding {
    let (pct, ms_per_step, impact, n) = (s.pct, s.ms_per_step, s.impact, m.steps.steps.len());
    let affected = affected_steps(m, config);
    let names = ranked_names(&m.waits);
    let severity = if pct >= config.thresholds.input_starvation.p0_input_pct {
        Severity::P0
    } else {
        Severity::from_impact(impact.pct_of_step, META.severity)
    };
    let loader = names.first().map_or(String::new(), |(name, _)| format!(", mostly in `{name}`"));
    // XProf 2.24 files the host's waits of GPU steps under "All others": its thresholds, not its
    // verdict, apply there.
    let xprof = if m.source == TF_SOURCE {
        format!("{} by XProf's thresholds (XProf itself counts this wait as 'All others')", xprof_label(pct))
    } else if m.waits.outside.iter().any(|o| o.0 > 0) {
        format!(
            "{} by XProf's thresholds (XProf's steps are the step markers alone and leave the time between them out)",
            xprof_label(pct)
        )
    } else {
        format!("XProf would call this profile {}", xprof_label(pct))
    };
    let of_the = if m.waits.outside.iter().any(|o| o.0 > 0) {
        format!("{} time and the host time between steps", TimeBase::of(host).of_the())
    } else {
        format!("{} time", TimeBase::of(host).of_the())
    };
    let what = format!(
        "The device waits for input {pct:.1} % {of_the} ({ms_per_step:.3} ms {per}{loader}) in {} of \
             {n} steps: {xprof}.",
        affected.len(),
        per = TimeBase::of(host).per(),
    );
    let finding = Finding::new(detector, severity, what, evidence_of(host, m, s, &affected), impact);
    let Some((stage, line)) = &m.waits.tf_data_bottleneck else { return finding };
    let finding = Finding { what: format!("{} {stage}", finding.what), ..finding };
    match line {
        Some(tensorflow) => finding.with_fix_lines(FixLines { tensorflow, ..META.doc.fix_lines }),
        None => finding,
    }
}

#[cfg(test)]
mod tests {
    use super::{is_dispatch, marker_line_events};
    use crate::evidence;
    use crate::testing::metric;
    use xlens_testkit::synth::{Item, OpSpec, Program, SynthSpec, fixture, tpu_profile};
    use xlens_xplane::{Picos, Space};

    use crate::config::ScanConfig;
    use crate::finding::{Evidence, Severity};
    use crate::profile::Profile;
    use crate::scan::scan;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_data_loader_inside_every_step() {
        let findings = run_on("input_starvation", &testdata("real/input_starvation"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: the loader takes 7.6-7.8 ms of steps of 15-20 ms (loader fraction 0.43).
        let pct = metric(f, "input-bound share of the step time");
        assert!((30.0..60.0).contains(&pct), "{pct}");
        assert!((7.0..8.5).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert_eq!(metric(f, "steps waiting for input"), 8.0);
        assert_eq!(f.severity, Severity::P0, "HIGHLY input-bound is P0");
        assert!(f.what.contains("HIGHLY input-bound") && f.what.contains("`data_loader`"), "{}", f.what);
        assert!(
            f.evidence.iter().any(|e| e.to_string().starts_with("host `data_loader` (input pipeline): 8 event(s)")),
            "{f:#?}"
        );
        let loader_events = f
            .evidence
            .iter()
            .filter(|e| {
                matches!(e, Evidence::Event { name, line, duration_us, .. }
                if name == "data_loader" && line == "python" && *duration_us > 6000.0)
            })
            .count();
        assert_eq!(loader_events, 3, "{f:#?}");
    }

    /// The marker lines read around the windows (in skips) give what a walk of every event gives.
    #[test]
    fn marker_line_events_read_in_skips_equal_a_whole_walk() {
        let session = xlens_testkit::open_session(testdata("h200/h200_input_starvation")).unwrap();
        let profile = Profile::from_session(session);
        let host = &profile.hosts()[0];
        let plane = host.space().host_threads().unwrap();
        let steps = host.steps().unwrap();
        assert!(steps.steps.len() > 10);
        // Windows of a third of each step, and of a few steps only (long stretches skipped).
        for every in [1, 7] {
            let windows: Vec<(Picos, Picos)> =
                steps.steps.iter().step_by(every).map(|s| (s.start, s.start + Picos(s.duration.0 / 3))).collect();
            let mut reach = Vec::new();
            for w in &windows {
                reach.push(reach.last().map_or(w.1, |&r: &Picos| r.max(w.1)));
            }
            let (dispatches, events) = marker_line_events(host, plane, &windows, &reach);
            let inside = |t: Picos| windows.iter().any(|&(lo, hi)| lo <= t && t < hi);
            let dispatch = plane.metadata_mask(|m| is_dispatch(m.name()));
            let marker = plane.metadata_mask(|m| xlens_roofline::is_host_step_marker(m.name()));
            let (mut want_dispatches, mut want_events) = (Vec::new(), Vec::new());
            for index in evidence::step_marker_lines(host) {
                for ev in plane.lines()[index].events(plane).map(Result::unwrap).filter(|e| inside(e.start())) {
                    if dispatch.contains(&ev) {
                        want_dispatches.push(ev.start());
                    }
                    if !marker.contains(&ev) {
                        want_events.push((index, ev.index()));
                    }
                }
            }
            want_dispatches.sort();
            assert!(!want_events.is_empty());
            assert_eq!(dispatches, want_dispatches);
            assert_eq!(events.iter().map(|e| (e.line().index(), e.index())).collect::<Vec<_>>(), want_events);
        }
    }

    #[test]
    fn clean_and_dispatch_bound_profiles_are_not_input_bound() {
        for dir in [
            "corpus/clean",
            "corpus/host_callback",
            "real/barrier_in_loop",
            "real/barrier_in_loop_baseline",
            "real/profile_during_warmup",
            "real/debug_print",
        ] {
            assert!(run_on("input_starvation", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    fn synth_findings(spec: &SynthSpec) -> Vec<crate::finding::Finding> {
        let space = Space::parse(tpu_profile(spec).into()).unwrap();
        let report = scan(&Profile::from_space("synth", space), &ScanConfig::only("input_starvation"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        report.findings
    }

    #[test]
    fn tpu_infeed_counts_as_input_wait() {
        // tpu_basic: an 8 us infeed in ~290 us steps (under 3 %) is not input-bound.
        assert!(synth_findings(&fixture("tpu_basic").unwrap()).is_empty());
        // The same program with an 80 us infeed: about a fifth of every step waits for the host.
        let mut spec = fixture("tpu_basic").unwrap();
        for item in &mut spec.program.items {
            if let Item::Op(op) = item
                && op.category == "infeed"
            {
                op.duration_ps = 80_000_000;
            }
        }
        let findings = synth_findings(&spec);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        let pct = metric(f, "input-bound share of the step time");
        assert!((18.0..26.0).contains(&pct), "{pct}");
        assert!((0.075..0.09).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert!(f.evidence.iter().any(|e| e.to_string().starts_with("infeed op infeed.11 ran 24 time(s)")), "{f:#?}");
    }

    /// One TPU core, 1 ms steps whose op runs the last 600 us; the host waits `wait_us` in
    /// IteratorGetNext at the start of each step.
    fn tpu_with_host_input(wait_us: i64) -> Space {
        use xlens_xplane::{SpaceBuilder, names};
        const US: i64 = 1_000_000;
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let next = host.event_metadata(names::event::ITERATOR_GET_NEXT);
            let mut line = host.line(1, "input", 0);
            for s in 0..5 {
                line.event(next, s * 1000 * US + 50 * US, wait_us * US);
            }
        }
        {
            let mut tpu = b.plane(100, "/device:TPU:0");
            let program = tpu.stat_metadata(names::stat::PROGRAM_ID);
            let symbol = tpu.stat_metadata(names::stat::SYMBOL_ID);
            let category = tpu.stat_metadata(names::stat::HLO_CATEGORY);
            let op = tpu.event_metadata_with_display("%fusion.1 = f32[8]{0} fusion()", "fusion.1");
            tpu.metadata_stat(op, program, 1u64);
            tpu.metadata_stat(op, symbol, 1u64);
            tpu.metadata_stat(op, category, "loop fusion");
            let steps: Vec<_> = (0..5).map(|s| tpu.event_metadata(&s.to_string())).collect();
            {
                let mut line = tpu.line(1, names::line::STEPS, 0);
                for (s, &m) in steps.iter().enumerate() {
                    line.event(m, s as i64 * 1000 * US, 1000 * US);
                }
            }
            let mut line = tpu.line(3, names::line::XLA_OPS, 0);
            for s in 0..5 {
                line.event(op, s * 1000 * US + 400 * US, 600 * US);
            }
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn tpu_host_input_waits_relabel_idle_as_infeed() {
        let scan = |space| {
            let report = scan(&Profile::from_space("synth", space), &ScanConfig::only("input_starvation"));
            assert!(report.skipped.is_empty(), "{:?}", report.skipped);
            report.findings
        };
        // 300 us of IteratorGetNext per step, 400 us idle: XProf turns 300 us into infeed.
        let findings = scan(tpu_with_host_input(300));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!((29.9..30.1).contains(&metric(f, "input-bound share of the step time")), "{f:#?}");
        assert!((1.49..1.51).contains(&metric(f, "idle relabelled as input by host input waits")), "{f:#?}");
        assert!(
            f.evidence.iter().any(|e| e.to_string().starts_with("host `IteratorGetNext` (input pipeline): 5 event(s)"))
        );
        // 20 us per step is 2 %: not input-bound.
        assert!(scan(tpu_with_host_input(20)).is_empty());
    }

    /// A TensorFlow GPU capture (step groups): 4 steps of 1 ms, each with a kernel over its last
    /// `1000 - wait_us` us; the host waits in `IteratorGetNext` over the first `wait_us` us.
    fn tf_gpu_with_iterator_wait(wait_us: i64) -> Space {
        tf_gpu_capture(wait_us, false)
    }

    /// [`tf_gpu_with_iterator_wait`], its `tf.data` events a pipeline (`Iterator::Model` and its
    /// `Prefetch`, with ids) when `pipeline`, whose prefetch's producer thread is not captured.
    fn tf_gpu_capture(wait_us: i64, pipeline: bool) -> Space {
        use xlens_xplane::{SpaceBuilder, names};
        const US: i64 = 1_000_000;
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let gid = host.stat_metadata(names::stat::GROUP_ID);
            let id = host.stat_metadata(names::stat::STEP_ID);
            let parent = host.stat_metadata(names::stat::PARENT_ID);
            let next = host.event_metadata("IteratorGetNext:IteratorGetNext");
            let stage = host.event_metadata("Iterator::Model::MapAndBatch");
            let root = host.event_metadata("Iterator::Model");
            let prefetch = host.event_metadata("Iterator::Model::Prefetch");
            {
                let mut line = host.line(1, "tf_Compute", 0);
                for s in 0..4 {
                    line.event(next, s * 1000 * US, wait_us * US).stat(gid, s);
                }
            }
            let mut line = host.line(2, "tf_data_iterator_get_next", 0);
            for s in 0..4 {
                if pipeline {
                    line.event(root, s * 1000 * US, wait_us * US).stat(id, 1i64);
                    line.event(prefetch, s * 1000 * US + US, wait_us * US - 2 * US).stat(id, 2i64).stat(parent, 1i64);
                } else {
                    line.event(stage, s * 1000 * US, wait_us * US);
                }
            }
        }
        {
            let mut gpu = b.plane(2, "/device:GPU:0");
            let gid = gpu.stat_metadata(names::stat::GROUP_ID);
            let corr = gpu.stat_metadata(names::stat::CORRELATION_ID);
            let kernel = gpu.event_metadata("volta_sgemm_128x64_nn");
            let steps: Vec<_> = (0..4).map(|s| gpu.event_metadata(&s.to_string())).collect();
            {
                let mut line = gpu.line(1000, names::line::STEPS, 0);
                for (s, &m) in steps.iter().enumerate() {
                    line.event(m, s as i64 * 1000 * US, 1000 * US).stat(gid, s as i64);
                }
            }
            let mut line = gpu.line(3, "Stream #7(Compute)", 0);
            for s in 0..4 {
                line.event(kernel, (s * 1000 + wait_us) * US, (1000 - wait_us) * US).stat(gid, s).stat(corr, s);
            }
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn tensorflow_iterator_wait_against_the_device_is_input() {
        let scan = |space| {
            let report = scan(&Profile::from_space("synth", space), &ScanConfig::only("input_starvation"));
            assert!(report.skipped.is_empty(), "{:?}", report.skipped);
            report.findings
        };
        let findings = scan(tf_gpu_with_iterator_wait(300));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!((29.9..30.1).contains(&metric(f, "input-bound share of the step time")), "{f:#?}");
        assert_eq!(metric(f, "steps waiting for input"), 4.0);
        assert!(f.what.contains("HIGHLY input-bound") && f.what.contains("IteratorGetNext"), "{}", f.what);
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e.starts_with("tf.data stage `Iterator::Model::MapAndBatch`: 4 call(s)")),
            "{text:#?}"
        );
        assert!(text.iter().any(|e| e.contains("TensorFlow step groups")), "{text:#?}");
        // 20 us of a 1 ms step is 2 %: not input-bound.
        assert!(scan(tf_gpu_with_iterator_wait(20)).is_empty());
    }

    /// A step that waits on a `prefetch` whose background thread the capture does not show: the
    /// finding says so rather than call the prefetch itself slow, and asks for a later capture.
    #[test]
    fn a_prefetch_without_its_producer_asks_for_a_later_capture() {
        let report =
            scan(&Profile::from_space("synth", tf_gpu_capture(300, true)), &ScanConfig::only("input_starvation"));
        let f = &report.findings[0];
        assert!(
            f.what.ends_with("Its tf.data pipeline waits on `Prefetch`, an asynchronous stage whose background thread the capture does not show."),
            "{}",
            f.what
        );
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e
                .starts_with("tf.data bottleneck of the slowest call: `Prefetch` (`Iterator::Model::Prefetch`)")
                && e.contains("an asynchronous stage, 0.298 ms waiting for its background thread")),
            "{text:#?}"
        );
        assert!(f.fix.contains("capture later steps"), "{}", f.fix);
    }

    #[test]
    fn tensorflow_cpu_captures_without_group_ids_follow_xprof() {
        // TensorFlow 2.21 on CPU writes no `group_id`: the steps are grouped as XProf groups them.
        // A `from_generator` sleeping 60 ms per batch: XProf 55.5 % input, HIGHLY input-bound.
        let findings = run_on("input_starvation", &testdata("field/tf_cpu_keras_input_bound"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P0);
        assert!((55.4..55.6).contains(&metric(f, "input-bound share of the step time")), "{f:#?}");
        assert!(f.what.contains("IteratorGetNext") && f.what.contains("HIGHLY input-bound"), "{}", f.what);
        // The generator sleeps: XProf's tf.data analysis names it (its producer thread linked to
        // the call that waited), and the fix is for a generator.
        assert!(
            f.what.ends_with("Its tf.data pipeline waits on `Generator`, a Python generator (`from_generator`)."),
            "{}",
            f.what
        );
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e.starts_with(
                "tf.data bottleneck of the slowest call: `Generator` (`Iterator::Root::Prefetch::Map::FlatMap[0]::Generator`)"
            )),
            "{text:#?}"
        );
        assert_eq!(metric(f, "slowest call of tf.data pipeline Host:0 (`Iterator::Root`)"), 38.085211);
        assert!(
            f.fix.contains("from_generator") && f.fix.contains("interleave") && !f.fix.contains("jax"),
            "{}",
            f.fix
        );
        // XProf: 0.5 % (prefetching pipeline) and 4.3 % (XLA; its `EagerCopyToDevice` is host
        // compute, not input): not input-bound.
        for dir in ["field/tf_cpu_keras_steady", "field/tf_cpu_keras_xla"] {
            assert!(run_on("input_starvation", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    /// PyTorch/XLA on CPU (torch_xla 2.8): the loop `for x, y in loader:` around `xp.StepTrace`
    /// fetches each batch between the step markers. A `DataLoader` preparing each batch in 50 ms
    /// leaves the device idle there; a healthy `MpDeviceLoader` loop does not, and the host phase
    /// before each step's first op (the model traced lazily, 4-5 ms a step) is not input.
    #[test]
    fn pytorch_xla_loops_wait_between_their_step_markers() {
        let findings = run_on("input_starvation", &testdata("field/ptxla_cpu_input_bound"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P0);
        let share = metric(f, "input-bound share of the step time and the time between steps");
        assert!((55.0..80.0).contains(&share), "{f:#?}");
        assert!(metric(f, "host time between step markers per step") > 45.0, "{f:#?}");
        assert!(metric(f, "host time between step markers with the device idle per step") > 30.0, "{f:#?}");
        assert!(f.what.contains("the loop between step markers"), "{}", f.what);
        assert!(f.fix.contains("MpDeviceLoader") && !f.fix.contains("jax"), "{}", f.fix);
        for dir in ["field/ptxla_cpu_steady", "field/ptxla_cpu_warmup"] {
            assert!(run_on("input_starvation", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn tpu_program_without_infeed_is_not_input_bound() {
        let spec = SynthSpec {
            cores: 1,
            steps: 4,
            program: Program {
                items: vec![Item::Op(OpSpec::new("fusion.1", "fusion", "loop fusion", 1_000, 1_000, 50_000_000))],
            },
            ..SynthSpec::default()
        };
        assert!(synth_findings(&spec).is_empty());
    }
}
