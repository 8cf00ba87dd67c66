//! Steps: how long each training (or serving) step took, from device step markers or host ones,
//! grouped as XProf groups them (facts §3).
//!
//! - **TPU**: each TensorCore's `Steps` line has one event per step. Step *k* of every core forms
//!   step *k*; XProf keeps only steps every core has. The step time is the longest core's; each
//!   core's ops inside its step give the per-core breakdown (infeed, outfeed, collectives, idle),
//!   and the cross-core figures follow XProf's input-pipeline rules (§3.3).
//! - **CPU and GPU-less hosts**: host step markers (`StepTraceAnnotation("train", step_num=i)`
//!   gives an event named `train` with `step_num` and `_r` stats) are the steps; the step time is
//!   the marker's duration. XProf's overview drops the first and last of more than five such
//!   steps as possibly incomplete ([`Steps::complete_steps`]); the step list keeps them.

use xlens_xplane::{Picos, Space, names};

use crate::step_types::{CoreStepBreakdown, StepSource, is_host_step_marker};

/// One core's part of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreStep {
    /// The core's device ordinal.
    pub core: u32,
    /// Start of the core's `Steps` marker.
    pub marker_start: Picos,
    /// Duration of the core's `Steps` marker.
    pub marker_duration: Picos,
    /// The step time the core is accounted for: the step's time (the longest core's marker),
    /// as XProf charges every core.
    pub duration: Picos,
    /// What the core did in the step.
    pub breakdown: CoreStepBreakdown,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// XProf's name for it: `train 3` for host markers, the step number for TPU steps.
    pub name: String,
    /// The step number (`step_num`, or the position among device steps).
    pub number: i64,
    /// Earliest start.
    pub start: Picos,
    /// The step time: the longest core's step marker (TPU) or the host marker's duration.
    pub duration: Picos,
    /// Per-core detail (TPU only).
    pub cores: Vec<CoreStep>,
}

impl Step {
    /// End of the step (start + duration).
    pub fn end(&self) -> Picos {
        self.start + self.duration
    }

    /// XProf's cross-core breakdown of a TPU step (§3.3), `None` without per-core detail.
    pub fn tpu_breakdown(&self) -> Option<TpuStepSummary> {
        if self.cores.is_empty() {
            return None;
        }
        let min_step = self.cores.iter().map(|c| c.duration).min()?;
        let compute = self.cores.iter().map(|c| c.duration.saturating_sub(c.breakdown.wait_for_host())).min()?;
        let infeed = self.cores.iter().map(|c| c.breakdown.infeed).max()?;
        let outfeed = Picos(self.cores.iter().map(|c| c.breakdown.outfeed.0).sum::<i64>() / self.cores.len() as i64);
        let host_transfer = self.cores.iter().map(|c| c.breakdown.host_transfer).max()?;
        let idle = min_step.saturating_sub(compute + infeed + outfeed).max(Picos::ZERO);
        Some(TpuStepSummary { compute, infeed, outfeed, host_transfer, idle })
    }
}

/// The cross-core breakdown of a TPU step, as XProf's input-pipeline analysis computes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TpuStepSummary {
    /// Least time any core spent not waiting on the host.
    pub compute: Picos,
    /// The largest core infeed.
    pub infeed: Picos,
    /// Mean core outfeed.
    pub outfeed: Picos,
    /// The largest core host-transfer time.
    pub host_transfer: Picos,
    /// The shortest core step minus compute, infeed and outfeed.
    pub idle: Picos,
}

/// The steps of one host.
#[derive(Clone, Debug, PartialEq)]
pub struct Steps {
    /// Where the steps came from.
    pub source: StepSource,
    /// The steps in order.
    pub steps: Vec<Step>,
}

impl Steps {
    /// The steps of a space whose device timeline is already walked: on TPU the timeline's own
    /// time base (device steps, else module executions, else the device window); elsewhere host
    /// markers, else the `Steps` lines of GPU planes, else [`StepSource::None`] (use
    /// [`Steps::from_timeline_and_host_ops`] to cut stepless CPU and GPU profiles into module
    /// executions).
    pub fn from_timeline(space: &Space, timeline: &crate::DeviceTimeline) -> xlens_xplane::Result<Steps> {
        if !timeline.is_empty() {
            return Ok(Steps { source: timeline.source, steps: steps_from_timeline(timeline) });
        }
        marked_steps(space, None, || crate::TfEventGroups::build(space).map(|g| derived_gpu_steps(space, g.as_ref())))
    }

    /// [`Steps::from_timeline`] where the op events of a CPU or GPU profile were read already:
    /// host markers are looked for only on the threads [`crate::HostOps`] found them on, and a
    /// profile without markers is cut into module executions, else one device window.
    pub fn from_timeline_and_host_ops(
        space: &Space,
        timeline: &crate::DeviceTimeline,
        host_ops: &crate::HostOps,
    ) -> xlens_xplane::Result<Steps> {
        if !timeline.is_empty() {
            return Ok(Steps { source: timeline.source, steps: steps_from_timeline(timeline) });
        }
        Steps::from_timeline_host_ops_and_groups(space, timeline, host_ops, || {
            crate::TfEventGroups::build(space).map(|g| derived_gpu_steps(space, g.as_ref()))
        })
    }

    /// [`Steps::from_timeline_and_host_ops`] with the steps XProf derives from its own grouping
    /// of a TensorFlow GPU capture (asked for only where nothing else marks the steps).
    pub(crate) fn from_timeline_host_ops_and_groups<E: From<xlens_xplane::Error>>(
        space: &Space,
        timeline: &crate::DeviceTimeline,
        host_ops: &crate::HostOps,
        derived: impl FnOnce() -> Result<Vec<Step>, E>,
    ) -> Result<Steps, E> {
        if !timeline.is_empty() {
            return Ok(Steps { source: timeline.source, steps: steps_from_timeline(timeline) });
        }
        let marked = marked_steps(space, Some(&host_ops.marker_lines), derived)?;
        if !marked.steps.is_empty() {
            return Ok(marked);
        }
        Ok(op_windows(host_ops))
    }

    /// Finds the steps of a space (see [`Steps::from_timeline_and_host_ops`]).
    ///
    /// ```
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// use xlens_roofline::{StepSource, Steps};
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let steps = Steps::from_space(&space)?;
    /// assert_eq!((steps.source, steps.steps.len()), (StepSource::DeviceSteps, 6));
    /// assert!(steps.stats().unwrap().mean_ms > 0.28);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_space(space: &Space) -> xlens_xplane::Result<Steps> {
        let timeline = crate::DeviceTimeline::build(space)?;
        if !timeline.is_empty() {
            return Steps::from_timeline(space, &timeline);
        }
        Steps::from_timeline_and_host_ops(space, &timeline, &crate::HostOps::read(space)?)
    }

    /// Mean, median, standard deviation, min and max of the step times; `None` without steps.
    pub fn stats(&self) -> Option<StepStats> {
        StepStats::of(&self.steps.iter().map(|s| s.duration).collect::<Vec<_>>())
    }

    /// The steps XProf's overview averages: for host-marker steps, the first and last are
    /// dropped as possibly incomplete when there are more than five (facts §3.2).
    pub fn complete_steps(&self) -> &[Step] {
        if self.source == StepSource::HostMarkers && self.steps.len() > 5 {
            &self.steps[1..self.steps.len() - 1]
        } else {
            &self.steps
        }
    }
}

/// The shape of a step-time series.
///
/// A flat series means the step is as slow as it is for structural reasons (the op profile and
/// the anatomy say why); outliers point at one-off costs (compilation, warm-up, a stall); a
/// noisy series points at the host or the input pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum StepVariance {
    /// Fewer than two steps: nothing to compare.
    TooFewSteps,
    /// Coefficient of variation at most [`FLAT_CV`]: steady.
    Flat,
    /// A few steps take at least [`OUTLIER_FACTOR`] × the median: their numbers.
    Outliers(Vec<i64>),
    /// Steps vary widely without clear outliers (coefficient of variation above [`FLAT_CV`]).
    Noisy,
}

/// Largest coefficient of variation (stddev ÷ mean) of a steady series.
pub const FLAT_CV: f64 = 0.10;
/// A step at least this many times the median is an outlier.
pub const OUTLIER_FACTOR: f64 = 2.0;

impl Steps {
    /// Classifies the step-time series (see [`StepVariance`]).
    ///
    /// ```
    /// use xlens_roofline::{Step, StepSource, StepVariance, Steps};
    /// use xlens_xplane::Picos;
    /// let step = |n: i64, ms: i64| Step {
    ///     name: n.to_string(), number: n, start: Picos(n * 1_000_000_000_000), duration: Picos(ms * 1_000_000_000), cores: vec![],
    /// };
    /// let steps = Steps { source: StepSource::HostMarkers, steps: vec![step(0, 250), step(1, 10), step(2, 10), step(3, 11)] };
    /// assert_eq!(steps.variance(), StepVariance::Outliers(vec![0]));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn variance(&self) -> StepVariance {
        let Some(stats) = self.stats() else { return StepVariance::TooFewSteps };
        if stats.count < 2 {
            return StepVariance::TooFewSteps;
        }
        let outliers: Vec<i64> = self
            .steps
            .iter()
            .filter(|s| s.duration.as_ms_f64() >= OUTLIER_FACTOR * stats.median_ms)
            .map(|s| s.number)
            .collect();
        if !outliers.is_empty() && outliers.len() * 4 <= self.steps.len().max(4) {
            return StepVariance::Outliers(outliers);
        }
        if stats.coefficient_of_variation() <= FLAT_CV { StepVariance::Flat } else { StepVariance::Noisy }
    }
}

/// Summary statistics of step times, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// Number of steps.
    pub count: usize,
    /// Mean step time.
    pub mean_ms: f64,
    /// Median step time.
    pub median_ms: f64,
    /// Sample standard deviation (n - 1 in the denominator, as XProf's step trace reports it).
    pub stddev_ms: f64,
    /// Shortest step.
    pub min_ms: f64,
    /// Longest step.
    pub max_ms: f64,
}

impl StepStats {
    /// Statistics of a series of durations; `None` when empty.
    pub fn of(durations: &[Picos]) -> Option<StepStats> {
        if durations.is_empty() {
            return None;
        }
        let ms: Vec<f64> = durations.iter().map(|d| d.as_ms_f64()).collect();
        let n = ms.len() as f64;
        let mean = ms.iter().sum::<f64>() / n;
        // The sample variance (n - 1), as XProf's step trace reports it; one step has none.
        let var = if ms.len() > 1 { ms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let mut sorted = ms.clone();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] };
        Some(StepStats {
            count: ms.len(),
            mean_ms: mean,
            median_ms: median,
            stddev_ms: var.sqrt(),
            min_ms: sorted[0],
            max_ms: sorted[sorted.len() - 1],
        })
    }

    /// Coefficient of variation (stddev ÷ mean).
    pub fn coefficient_of_variation(&self) -> f64 {
        if self.mean_ms > 0.0 { self.stddev_ms / self.mean_ms } else { 0.0 }
    }
}

/// Host-marker steps; `lines` limits the walk to the threads known to hold markers.
fn host_steps(space: &Space, lines: Option<&[usize]>) -> xlens_xplane::Result<Vec<Step>> {
    let Some(host) = space.host_threads() else { return Ok(Vec::new()) };
    let step_num = host.stat_id(names::stat::STEP_NUM);
    let iter_num = host.stat_id(names::stat::ITER_NUM);
    let root = host.stat_id(names::stat::IS_ROOT);
    let mut steps = Vec::new();
    let marker = host.metadata_mask(|m| is_host_step_marker(m.name()));
    let wanted = |index: usize| lines.is_none_or(|l| l.contains(&index));
    // The markers of one run of a line's events, in order; the run's first error ends it.
    type Marker = (Picos, Picos, String, Option<i64>);
    let run_markers = |events: xlens_xplane::IndexingEvents<'_>| -> xlens_xplane::Result<Vec<Marker>> {
        let mut found = Vec::new();
        for ev in events {
            let ev = ev?;
            if !marker.contains(&ev) {
                continue;
            }
            // Markers are grouping roots: `_r` set, or the TraceContext name.
            let is_root = root.is_some_and(|r| ev.stat(r).is_some()) || ev.name() == names::event::TRACE_CONTEXT;
            if !is_root {
                continue;
            }
            let number = step_num
                .and_then(|id| ev.stat(id))
                .or_else(|| iter_num.and_then(|id| ev.stat(id)))
                .and_then(|s| s.as_i64());
            found.push((ev.start(), ev.duration(), ev.name().to_owned(), number));
        }
        Ok(found)
    };
    for line in host.lines().iter().filter(|l| !marker.is_empty() && wanted(l.index())) {
        // A long marker line (the Python tracer's thread holds a million events) is walked in runs
        // on every worker; the runs' markers join in order, and the first run's error is the
        // one a single walk would meet first. The walk leaves the line's time index behind: the
        // step anatomy and the input phases then read only parts of the line.
        use rayon::prelude::*;
        let runs = line.event_parts_indexing(host, rayon::current_num_threads());
        let found: Vec<xlens_xplane::Result<Vec<Marker>>> =
            runs.into_par_iter().with_max_len(1).map(run_markers).collect();
        for run in found {
            steps.extend(run?);
        }
    }
    steps.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
    Ok(steps
        .into_iter()
        .enumerate()
        .map(|(i, (start, duration, name, number))| {
            let number = number.unwrap_or(i as i64);
            Step { name: format!("{name} {number}"), number, start, duration, cores: Vec::new() }
        })
        .collect())
}

/// Host markers, else the `Steps` lines of GPU planes (or, on a TensorFlow GPU capture without
/// `group_id` stats, the `Steps` events XProf derives from its own grouping); [`StepSource::None`]
/// without any.
fn marked_steps<E: From<xlens_xplane::Error>>(
    space: &Space,
    lines: Option<&[usize]>,
    derived: impl FnOnce() -> Result<Vec<Step>, E>,
) -> Result<Steps, E> {
    let host = host_steps(space, lines)?;
    if !host.is_empty() {
        return Ok(Steps { source: StepSource::HostMarkers, steps: host });
    }
    let mut gpu = gpu_steps(space)?;
    if gpu.is_empty() {
        gpu = derived()?;
    }
    let source = if gpu.is_empty() { StepSource::None } else { StepSource::DeviceSteps };
    Ok(Steps { source, steps: gpu })
}

/// The events of the `Steps` lines of GPU planes (XProf derives them for TensorFlow GPU
/// captures, one event per step group): one step per event name, from the earliest start,
/// charged the longest device's duration, as XProf's step trace reports it.
fn gpu_steps(space: &Space) -> xlens_xplane::Result<Vec<Step>> {
    let mut by_name = StepsByName::new();
    for plane in space.gpus() {
        let Some(line) = plane.line_by_name(names::line::STEPS) else { continue };
        for ev in line.events(plane) {
            let ev = ev?;
            add_step_event(&mut by_name, ev.name(), ev.start(), ev.duration());
        }
    }
    Ok(steps_by_name(by_name))
}

/// Per `Steps` event name: the earliest start and the longest duration.
type StepsByName = std::collections::BTreeMap<String, (Picos, Picos)>;

fn add_step_event(by_name: &mut StepsByName, name: &str, start: Picos, duration: Picos) {
    let entry = by_name.entry(name.to_owned()).or_insert((start, duration));
    entry.0 = entry.0.min(start);
    entry.1 = entry.1.max(duration);
}

/// The steps of a TensorFlow GPU capture without `group_id` stats: the `Steps` events XProf
/// derives after grouping the events itself (`groups`: [`crate::TfEventGroups`] of the space),
/// read as [`gpu_steps`] reads the capture's own. Empty without device groups.
pub(crate) fn derived_gpu_steps(space: &Space, groups: Option<&crate::TfEventGroups>) -> Vec<Step> {
    let Some(devices) = groups.and_then(|g| g.devices.as_ref()) else { return Vec::new() };
    let mut by_name = StepsByName::new();
    for plane in space.gpus() {
        for &(group, span) in devices.step_markers(plane) {
            add_step_event(&mut by_name, &group.to_string(), span.start, span.duration());
        }
    }
    steps_by_name(by_name)
}

/// One step per `Steps` event name, in start order (then by duration and name).
fn steps_by_name(by_name: StepsByName) -> Vec<Step> {
    let mut steps: Vec<(Picos, Picos, String)> = by_name.into_iter().map(|(n, (s, d))| (s, d, n)).collect();
    steps.sort();
    steps
        .into_iter()
        .enumerate()
        .map(|(i, (start, duration, name))| {
            let number = name.parse().unwrap_or(i as i64);
            Step { name, number, start, duration, cores: Vec::new() }
        })
        .collect()
}

/// The module executions of a profile without step markers whose ops are not on TPU op lines:
/// on CPU the runs (`program_id`, `run_id`) of its ops; on GPU, where kernels carry no run id,
/// maximal runs of consecutive ops (by start, over every device) of one program (ops without
/// a program, such as memory copies, join the run they fall in; programs that only copy are left
/// out when others remain). Windows that overlap are merged. Without programs, the whole op
/// window is one [`StepSource::DeviceWindow`] step.
pub(crate) fn op_windows(host_ops: &crate::HostOps) -> Steps {
    let mut windows: Vec<(Picos, Picos, Option<u64>)> = Vec::new();
    let has_runs = host_ops.contexts.iter().any(|c| c.run_id.is_some());
    if has_runs {
        let mut by_run: std::collections::BTreeMap<(u64, i64), (Picos, Picos)> = std::collections::BTreeMap::new();
        for op in host_ops.iter() {
            let c = host_ops.context(op);
            let (Some(program), Some(run)) = (c.program_id, c.run_id) else { continue };
            let w = by_run.entry((program, run)).or_insert((op.start, op.end));
            w.0 = w.0.min(op.start);
            w.1 = w.1.max(op.end);
        }
        windows.extend(by_run.into_iter().map(|((program, _), (s, e))| (s, e, Some(program))));
    } else {
        // Per device, in start order: runs of one program, each split into its executions.
        // Programs that only copy their arguments (the one-copy `jit_stage` program each
        // `jnp.asarray` runs beside the step) stage data and are not the unit of work: left out
        // below when other programs remain. Decided per interned name and context, not per op.
        let copy_name: Vec<bool> = host_ops.names.iter().map(|n| n == "copy" || n.starts_with("copy.")).collect();
        let mut copies_only_context = vec![true; host_ops.contexts.len()];
        let mut by_device: std::collections::BTreeMap<i64, Vec<TimedOp>> = std::collections::BTreeMap::new();
        for o in host_ops.iter() {
            let c = host_ops.context(o);
            by_device.entry(c.core).or_default().push((o.start, o.end, c.program_id, o.name));
            if let Some(only) = copies_only_context.get_mut(o.context as usize) {
                *only &= copy_name.get(o.name as usize).copied().unwrap_or(false);
            }
        }
        let mut copies_only: std::collections::BTreeMap<Option<u64>, bool> = std::collections::BTreeMap::new();
        for (c, only) in host_ops.contexts.iter().zip(&copies_only_context) {
            *copies_only.entry(c.program_id).or_insert(true) &= *only;
        }
        // The k-th execution of a program on every device forms its k-th window when the devices
        // run in lock step (as TPU cores' steps are numbered); devices that run on their own
        // (one process per GPU, staggered) would chain those windows together, and then the
        // executions of the busiest device are the time base.
        let mut lockstep: std::collections::BTreeMap<Option<u64>, Vec<(Picos, Picos)>> =
            std::collections::BTreeMap::new();
        let mut per_device: Vec<(Picos, Vec<Window>)> = Vec::new();
        for mut ops in by_device.into_values() {
            let busy: Picos = ops.iter().map(|o| o.1 - o.0).sum();
            ops.sort_by_key(|o| (o.0, std::cmp::Reverse(o.1)));
            let mut device: Vec<(Picos, Picos, Option<u64>)> = Vec::new();
            let mut run: Vec<TimedOp> = Vec::new();
            for op in ops {
                let same = run.last().is_none_or(|_| {
                    let program = run.iter().find_map(|o| o.2);
                    op.2.is_none() || program.is_none() || program == op.2
                });
                if !same {
                    device.extend(executions(&run));
                    run.clear();
                }
                run.push(op);
            }
            device.extend(executions(&run));
            let mut seen: std::collections::BTreeMap<Option<u64>, usize> = std::collections::BTreeMap::new();
            for &(s, e, program) in &device {
                let k = seen.entry(program).or_default();
                let slots = lockstep.entry(program).or_default();
                match slots.get_mut(*k) {
                    Some(w) => *w = (w.0.min(s), w.1.max(e)),
                    None => slots.push((s, e)),
                }
                *k += 1;
            }
            per_device.push((busy, device));
        }
        let staging = |program: &Option<u64>| program.is_some() && copies_only.get(program) == Some(&true);
        if lockstep.keys().any(|p| p.is_some() && !staging(p)) {
            lockstep.retain(|p, _| !staging(p));
            for (_, device) in &mut per_device {
                device.retain(|w| !staging(&w.2));
            }
        }
        for (program, slots) in lockstep {
            windows.extend(slots.into_iter().map(|(s, e)| (s, e, program)));
        }
        windows.sort_by_key(|w| (w.0, std::cmp::Reverse(w.1)));
        if per_device.len() > 1 && windows.windows(2).any(|w| w[1].0 < w[0].1) {
            // Not in lock step: the busiest device's executions (the first of equals).
            let busiest = per_device.iter().map(|d| d.0).max().unwrap_or_default();
            windows = per_device.into_iter().find(|d| d.0 == busiest).map(|d| d.1).unwrap_or_default();
        }
        if windows.iter().all(|w| w.2.is_none()) {
            windows.clear();
        }
    }
    windows.sort_by_key(|w| (w.0, std::cmp::Reverse(w.1)));
    let mut merged: Vec<(Picos, Picos, Option<u64>)> = Vec::with_capacity(windows.len());
    for w in windows {
        match merged.last_mut() {
            Some(m) if w.0 < m.1 => {
                m.1 = m.1.max(w.1);
                if m.2 != w.2 {
                    m.2 = None;
                }
            }
            _ => merged.push(w),
        }
    }
    if merged.is_empty() {
        let start = host_ops.iter().map(|o| o.start).min();
        let end = host_ops.iter().map(|o| o.end).max();
        return match (start, end) {
            (Some(start), Some(end)) => Steps {
                source: StepSource::DeviceWindow,
                steps: vec![Step {
                    name: "device window".to_owned(),
                    number: 0,
                    start,
                    duration: end - start,
                    cores: Vec::new(),
                }],
            },
            _ => Steps { source: StepSource::None, steps: Vec::new() },
        };
    }
    let name = |program: Option<u64>| match program {
        Some(p) => match host_ops.modules.get(&p).filter(|m| !m.is_empty()) {
            Some(m) => format!("{m}({p})"),
            None => format!("program {p}"),
        },
        None => "programs".to_owned(),
    };
    let steps = merged
        .into_iter()
        .enumerate()
        .map(|(i, (start, end, program))| Step {
            name: format!("{} #{i}", name(program)),
            number: i as i64,
            start,
            duration: end - start,
            cores: Vec::new(),
        })
        .collect();
    Steps { source: StepSource::ModuleExecutions, steps }
}

/// An op as the execution finder reads it: start, end, program, interned name.
type TimedOp = (Picos, Picos, Option<u64>, u32);
/// A program execution: start, end, program.
type Window = (Picos, Picos, Option<u64>);

/// The executions of one device's run of consecutive ops of one program (GPU kernels carry no
/// run id): the run is cut before each launch of its first op when that op runs as often as
/// most ops of the run do (it is not inside a loop), else kept whole.
fn executions(run: &[TimedOp]) -> Vec<Window> {
    let Some(first) = run.iter().find(|o| o.2.is_some()) else {
        return run.first().map(|f| (f.0, run.iter().map(|o| o.1).max().unwrap_or(f.1), None)).into_iter().collect();
    };
    let program = first.2;
    let mut counts: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for o in run.iter().filter(|o| o.2.is_some()) {
        *counts.entry(o.3).or_default() += 1;
    }
    let leading = counts.get(&first.3).copied().unwrap_or(0);
    // The count most ops share (the smaller on a tie): the executions, when the ops outside
    // loops run once each.
    let mut tally: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    for &c in counts.values() {
        *tally.entry(c).or_default() += 1;
    }
    let usual = tally.iter().max_by_key(|&(c, n)| (*n, std::cmp::Reverse(*c))).map_or(0, |(c, _)| *c);
    let mut out: Vec<(Picos, Picos, Option<u64>)> = Vec::new();
    for o in run {
        let cut = leading > 1 && leading == usual && o.2.is_some() && o.3 == first.3;
        match out.last_mut() {
            Some(w) if !cut => w.1 = w.1.max(o.1),
            _ => out.push((o.0, o.1, program)),
        }
    }
    out
}

/// The TPU steps of a walked device timeline: step *k* of every core (steps every core has),
/// charged the longest core's marker.
pub fn steps_from_timeline(timeline: &crate::DeviceTimeline) -> Vec<Step> {
    let mut steps = Vec::with_capacity(timeline.step_times.len());
    for (k, &duration) in timeline.step_times.iter().enumerate() {
        // At most one entry a core, allocated exactly: collected from a filter, a one-core step
        // took room for four (336 bytes a step wasted).
        let mut cores: Vec<CoreStep> = Vec::with_capacity(timeline.cores.len());
        cores.extend(timeline.cores.iter().filter_map(|c| {
            let s = c.steps.get(k)?;
            Some(CoreStep {
                core: c.core,
                marker_start: s.marker.0,
                marker_duration: s.marker.1 - s.marker.0,
                duration,
                breakdown: s.breakdown,
            })
        }));
        let start = cores.iter().map(|c| c.marker_start).min().unwrap_or_default();
        let name = match timeline.step_names.get(k) {
            Some(module) => format!("{module} #{k}"),
            None if timeline.source == StepSource::DeviceWindow => "device window".to_owned(),
            None => k.to_string(),
        };
        steps.push(Step { name, number: k as i64, start, duration, cores });
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A marker line long enough to be walked in runs gives the steps one walk gives, in order,
    /// numbered by their `step_num`.
    #[test]
    fn long_marker_lines_walked_in_runs_equal_one_walk() {
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let root = plane.stat_metadata(names::stat::IS_ROOT);
            let step_num = plane.stat_metadata(names::stat::STEP_NUM);
            let step = plane.event_metadata("train_step");
            let call = plane.event_metadata("$python_call");
            let mut line = plane.line(1, "python3", 0);
            for i in 0..200_000i64 {
                if i % 1000 == 0 {
                    line.event(step, i * 100, 90_000).stat(root, 1i64).stat(step_num, i / 1000 + 7);
                }
                line.event(call, i * 100, 50);
            }
        }
        let space = Space::parse(b.finish().into()).unwrap();
        assert!(space.host_threads().unwrap().lines()[0].byte_len() > 2 * xlens_xplane::PART_MIN_BYTES);
        let walk = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| host_steps(&space, None).unwrap())
        };
        let (one, four) = (walk(1), walk(4));
        assert_eq!(one.len(), 200);
        assert_eq!(one.first().map(|s| (s.number, s.start)), Some((7, Picos(0))));
        assert_eq!(one.last().map(|s| s.name.as_str()), Some("train_step 206"));
        assert_eq!(four, one);
    }
}
