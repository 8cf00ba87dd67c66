//! `truncated_capture`: the profile is missing data: the profiler dropped events, a core's trace
//! buffer filled early, or the capture stopped in the middle of a step.

use std::collections::{BTreeMap, BTreeSet};

use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::{self, OpSpan};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct TruncatedCapture;

const META: DetectorMeta = DetectorMeta {
    id: "truncated_capture",
    title: "The capture is truncated or dropped events",
    severity: Severity::P1,
    needs: &[Need::HostTimeline],
    doc: DetectorDoc {
        detects: "Profiles that do not hold everything that ran: profiler errors or warnings that say events were \
                  lost (buffer full, event cap reached, dropped); `dropped_traces` stats; steps that end after \
                  the capture stopped (`profile_stop_time` on `Task Environment`); ops of the step program \
                  after the last step marker, fewer than a step's worth, in a profile whose steps otherwise hold \
                  all their ops (the capture stopped inside a step and the step's marker was lost), when they move \
                  the figures they distort by more than the noise (a handful of ops after the last marker is \
                  normal) and the last step is complete (a last step short of ops by what trails it ran its \
                  program past its marker, as PyTorch/XLA's asynchronous `xm.mark_step()` does); a TPU core \
                  whose op events end long before the other cores' or that recorded fewer steps.",
        why: "Every figure of a truncated profile is computed on partial data: dropped events make ops, steps and \
              idle time disappear, a core whose buffer filled looks idle or shows fewer steps (XProf keeps only \
              steps every core has), and a cut step skews the last step's breakdown. Such a profile can mislead \
              more than it helps. Lost events make the finding P1 whatever its (unmeasurable) step-time impact: \
              the fault is in the measurement, and it is critical to trusting the other findings.",
        evidence: "The profiler's messages about lost data; the dropped event count; the steps that end after the \
                   capture stop, with both times; the ops that ran after the last step marker (count against the \
                   ops of a complete step, programs, first and last op on the timeline, their share of the steps' \
                   work against the noise); per lagging core, when \
                   its op events end against the latest core and its step count.",
        thresholds: "Dropped events are reported from `truncated_capture.min_dropped_events` (default 1); a core \
                     lags when its last op ends at least `truncated_capture.min_core_lag_steps` (default 1) median \
                     steps before the latest core's. Trailing ops count when at least 95 % of the op time before \
                     the last step end lies inside steps, and when their work (op time; op count on TPU) as a share \
                     of the work inside the steps, which is how far the step count and per-step op time move, \
                     exceeds the noise: the steps' own spread of their work (1.4826 × MAD over the median, from \
                     three steps), at least `truncated_capture.min_trailing_pct` (default 2 %). Severity P1 with lost events or a lagging core, P2 when \
                     only the last step was cut; the impact is 0 ms per step (nothing runs faster once fixed).",
        fix: "Capture fewer steps or fewer events so the trace fits the buffers: profile a short window of \
              steady-state steps, lower the host tracer level or disable the Python tracer, trace SparseCore on \
              fewer cores, and stop the trace only after the last step's results are ready.",
        fix_lines: FixLines {
            jax: "`jax.profiler.start_trace`/`stop_trace` around steps N..N+k, `jax.profiler.ProfileOptions` \
                  (`host_tracer_level`, `python_tracer_level`), and `jax.block_until_ready` before `stop_trace`.",
            tensorflow: "`tf.profiler.experimental.start(logdir, \
                         options=tf.profiler.experimental.ProfilerOptions(host_tracer_level=1, \
                         python_tracer_level=0))` around a few steps, or a short `profile_batch` range in Keras's \
                         TensorBoard callback.",
            pytorch_xla: "a short `duration_ms` in `xp.trace_detached` (`torch_xla.debug.profiler`), and \
                          `xm.wait_device_ops()` before the trace stops.",
        },
    },
};

/// Profiler messages that say events were lost.
fn says_data_lost(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["drop", "reaches max", "reached max", "overflow", "buffer full", "buffer is full", "lost", "truncat", "exceed"]
        .iter()
        .any(|k| lower.contains(k))
}

/// How far ops after the last step marker move the figures they distort, against the noise of
/// the steps themselves.
///
/// Ops that ran after the last marker belong to no step: the step count misses a part of a step,
/// and every capture total divided by the step count (per-step op time) counts them. Both move by
/// the trailing ops' share of the op work inside the steps. The noise is the steps' own spread of
/// that work (the robust coefficient of variation, 1.4826 × MAD over the median, from three
/// steps up), with a floor of `truncated_capture.min_trailing_pct` (default 2 %) for captures of
/// one or two steps or of steps that repeat exactly.
#[derive(Clone, Copy, Debug)]
struct Distortion {
    /// The trailing ops' work as a share of the work inside the steps (%).
    pct: f64,
    /// `max(spread_pct, floor)`: the distortion must exceed it to be reported.
    noise_pct: f64,
}

impl Distortion {
    /// `trailing` work after the last marker against the work `per_step` of each step (op time
    /// or op count); `None` without work inside the steps.
    fn of(trailing: f64, per_step: &[f64], floor_pct: f64) -> Option<Distortion> {
        let inside: f64 = per_step.iter().sum();
        if inside.is_nan() || inside <= 0.0 {
            return None;
        }
        let spread_pct = if per_step.len() >= 3 { 100.0 * robust_cv(per_step) } else { 0.0 };
        let floor = if floor_pct.is_finite() { floor_pct.max(0.0) } else { 0.0 };
        Some(Distortion { pct: 100.0 * trailing / inside, noise_pct: spread_pct.max(floor) })
    }

    /// True when the figures move by more than the noise.
    fn beyond_noise(&self) -> bool {
        self.pct > self.noise_pct
    }

    /// The evidence: the distortion and the noise it is held against.
    fn evidence(&self) -> [Evidence; 2] {
        [
            Evidence::metric(
                "trailing_work_share",
                "work after the last step marker, as a share of the work inside the steps (the move of the step \
                 count and of per-step op time)",
                self.pct,
                "%",
            ),
            Evidence::metric(
                "step_work_noise",
                "noise: the steps' own spread of their work (robust CV), at least the floor",
                self.noise_pct,
                "%",
            ),
        ]
    }
}

/// The robust coefficient of variation: 1.4826 × the median absolute deviation over the median
/// (0 when the median is 0).
fn robust_cv(values: &[f64]) -> f64 {
    let median = |v: &mut Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            0.0
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut v = values.to_vec();
    let m = median(&mut v);
    if m.is_nan() || m <= 0.0 {
        return 0.0;
    }
    let mut dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    1.4826 * median(&mut dev) / m
}

fn median_picos(mut v: Vec<Picos>) -> Picos {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or(Picos::ZERO)
}

/// The `dropped_traces` stats of every plane, summed.
fn dropped_events(host: &HostProfile) -> u64 {
    host.space()
        .planes()
        .iter()
        .filter_map(|p| p.stat_by_name(names::stat::DROPPED_TRACES))
        .map(|s| s.as_u64().or_else(|| s.as_i64().map(|v| v.max(0) as u64)).unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}

/// What a check found: a short label for the summary, its evidence, and whether data was lost.
struct Signal {
    label: String,
    evidence: Vec<Evidence>,
    lost: bool,
}

/// `train 3` for host steps, `step 3` for device steps (named by their number).
fn step_label(name: &str) -> String {
    if name.bytes().all(|b| b.is_ascii_digit()) { format!("step {name}") } else { name.to_owned() }
}

/// The capture length (stop − start), on the profile clock.
fn capture_window(host: &HostProfile) -> Option<Picos> {
    let (start, stop) = (host.space().profile_start_ns()?, host.space().profile_stop_ns()?);
    Some(Picos::from_ns(i64::try_from(stop.checked_sub(start)?).ok()?))
}

/// TPU cores with fewer ops after their last step marker than a complete step has: the capture
/// stopped inside a step whose marker was lost. A core counts only when those ops move its
/// figures by more than the noise ([`Distortion`], on op counts: the timeline keeps no time for
/// ops after the last marker).
fn tpu_trailing_partial_step(timeline: &xlens_roofline::DeviceTimeline, floor_pct: f64) -> Option<Signal> {
    let mut evidence = Vec::new();
    let mut count = 0u64;
    let mut full_steps = Vec::new();
    let mut worst: Option<Distortion> = None;
    for core in &timeline.cores {
        let mut per_step: Vec<u32> = core.steps.iter().map(|s| s.ops).collect();
        if per_step.is_empty() || core.ops_after_last_marker == 0 {
            continue;
        }
        per_step.sort_unstable();
        let full = u64::from(per_step[per_step.len() / 2]);
        if core.ops_after_last_marker >= full {
            continue;
        }
        let work: Vec<f64> = per_step.iter().map(|&n| f64::from(n)).collect();
        let Some(d) = Distortion::of(core.ops_after_last_marker as f64, &work, floor_pct) else { continue };
        if !d.beyond_noise() {
            continue;
        }
        if worst.is_none_or(|w| d.pct > w.pct) {
            worst = Some(d);
        }
        count += core.ops_after_last_marker;
        full_steps.push(full);
        evidence.push(Evidence::note(format!(
            "TPU core {}: {} op(s) after its last step marker, a complete step has {full}",
            core.core, core.ops_after_last_marker
        )));
    }
    if evidence.is_empty() {
        return None;
    }
    evidence
        .insert(0, Evidence::metric("ops_after_last_step", "ops after the last step marker", count as f64, "count"));
    if let Some(d) = worst {
        evidence.extend(d.evidence());
    }
    Some(Signal {
        label: format!("the capture stopped inside a step ({count} op(s) ran after the last step markers)"),
        evidence,
        lost: false,
    })
}

/// Steps and ops that end after the capture stopped.
fn past_the_stop(host: &HostProfile, steps: &xlens_roofline::Steps, ops: &[OpSpan<'_>]) -> Option<Signal> {
    let window = capture_window(host)?;
    let cut: Vec<&xlens_roofline::Step> = steps.steps.iter().filter(|s| s.end() > window).collect();
    let late: Vec<&OpSpan<'_>> = ops.iter().filter(|o| o.end > window).collect();
    if cut.is_empty() && late.is_empty() {
        return None;
    }
    let mut evidence = vec![Evidence::metric("capture_length", "capture length", window.as_ms_f64(), "ms")];
    for s in cut.iter().take(3) {
        evidence.push(Evidence::note(format!(
            "{} runs from {:.3} ms to {:.3} ms, past the capture stop at {:.3} ms",
            step_label(&s.name),
            s.start.as_ms_f64(),
            s.end().as_ms_f64(),
            window.as_ms_f64()
        )));
    }
    let mut labels = Vec::new();
    if !cut.is_empty() {
        labels.push(format!("{} step(s) end after the capture stopped", cut.len()));
    }
    if let Some(first) = late.first() {
        evidence.push(Evidence::metric(
            "ops_past_capture_stop",
            "ops that end after the capture stop",
            late.len() as f64,
            "count",
        ));
        evidence.push(evidence::event_parts(host, first.plane, first.line, &first.name, first.start, first.duration()));
        labels.push(format!("{} op(s) end after it", late.len()));
    }
    Some(Signal { label: labels.join(" and "), evidence, lost: false })
}

/// The ops of the step programs after the last step marker, and the ops of a complete step.
struct Trailing<'h> {
    /// When the last step ends.
    last_end: Picos,
    /// Ops of a complete step (median).
    full: usize,
    /// The step programs' ops after the last step, in timeline order (at least one, fewer than `full`).
    ops: Vec<OpSpan<'h>>,
    /// How far they move the figures, beyond the noise.
    distortion: Distortion,
}

/// What the signals of host-run ops ask of the op table, gathered in one walk of it (a walk per
/// question, four in all, took 19 ms of gpu300's two million kernels).
struct HostWalk<'h> {
    /// Ops that end after the capture stop, and ops that start at or after the last step's end,
    /// each with its line, in table order.
    late: Vec<(xlens_roofline::LineRef, &'h xlens_roofline::HostOp)>,
    after: Vec<(xlens_roofline::LineRef, &'h xlens_roofline::HostOp)>,
    /// Of the ops that start before the last step's end: the ops of each step, the programs of
    /// those inside a step, and their time inside steps and in all.
    per_step: Vec<usize>,
    /// Of the same ops, their time in each step.
    per_step_time: Vec<Picos>,
    programs: BTreeSet<Option<u64>>,
    inside: Picos,
    before: Picos,
    /// Each device's last op end.
    last_op: BTreeMap<i64, Picos>,
}

/// Walks the op table once for [`HostWalk`]; `window` is the capture's length, when known.
fn walk_host_ops<'h>(host: &'h HostProfile, steps: &xlens_roofline::Steps, window: Option<Picos>) -> HostWalk<'h> {
    let host_ops = host.host_ops();
    let last_end = steps.steps.last().map_or(Picos(i64::MIN), |s| s.end());
    let mut walk = HostWalk {
        late: Vec::new(),
        after: Vec::new(),
        per_step: vec![0usize; steps.steps.len()],
        per_step_time: vec![Picos::ZERO; steps.steps.len()],
        programs: BTreeSet::new(),
        inside: Picos::ZERO,
        before: Picos::ZERO,
        last_op: BTreeMap::new(),
    };
    // The steps that start at or before `at` are `steps[..k]`; ops of a line come by start, so
    // `k` moves on from the previous op's instead of being searched for every op.
    let mut k = 0usize;
    let mut step_of = |at: Picos| {
        let k = evidence::partition_from(&steps.steps, &mut k, |s| s.start <= at);
        (k > 0 && at < steps.steps[k - 1].end()).then(|| k - 1)
    };
    // Consecutive ops mostly share a context (one program run): the program is looked up, and
    // the set asked, only when the context changes.
    let mut last_context = None;
    for (at, ops) in host_ops.by_line() {
        for op in ops {
            if window.is_some_and(|w| op.end > w) {
                walk.late.push((at, op));
            }
            if op.start >= last_end {
                walk.after.push((at, op));
                continue;
            }
            let duration = op.end.saturating_sub(op.start);
            walk.before += duration;
            if let Some(k) = step_of(op.start) {
                walk.inside += duration;
                walk.per_step[k] += 1;
                walk.per_step_time[k] += duration;
                if last_context != Some(op.context) {
                    walk.programs.insert(host_ops.context(op).program_id);
                    last_context = Some(op.context);
                }
            }
        }
        // A line's ops are one device's in runs: the map is touched once per run.
        let same_core = |a: &xlens_roofline::HostOp, b: &xlens_roofline::HostOp| {
            a.context == b.context || host_ops.context(a).core == host_ops.context(b).core
        };
        for run in ops.chunk_by(same_core) {
            let run_end = run.iter().map(|o| o.end).max().unwrap_or_default();
            let end = walk.last_op.entry(host_ops.context(&run[0]).core).or_insert(run_end);
            *end = (*end).max(run_end);
        }
    }
    walk
}

/// From the ops of each step, the step programs' ops after the last one; `None` when the steps
/// do not hold their own ops, the trailing ops make a complete step, or they move the figures by
/// no more than the noise ([`Distortion`]: a handful of ops after the last marker is normal).
fn trailing_ops<'h>(
    host: &'h HostProfile,
    steps: &xlens_roofline::Steps,
    walk: &mut HostWalk<'h>,
    floor_pct: f64,
) -> Option<Trailing<'h>> {
    let last_end = steps.steps.last()?.end();
    // Steps must hold their own ops (synchronous steps), else work after the last marker is
    // just the asynchronous tail of dispatch.
    if walk.before.0 <= 0 || (walk.inside.0 as f64) < 0.95 * walk.before.0 as f64 {
        return None;
    }
    let last_ops = walk.per_step.last().copied().unwrap_or(0);
    walk.per_step.sort_unstable();
    let full = walk.per_step[walk.per_step.len() / 2];
    let after = evidence::picked_host_op_spans(host, std::mem::take(&mut walk.after));
    let trailing: Vec<OpSpan<'h>> = after.into_iter().filter(|o| walk.programs.contains(&o.program_id)).collect();
    if trailing.is_empty() || trailing.len() >= full {
        return None;
    }
    // A last step short of ops by what trails it ran its own program past its marker (dispatch
    // returned before the program finished, as PyTorch/XLA's `xm.mark_step()` does): its tail,
    // not a step the stop cut. A step cut by the stop follows a complete last step.
    if last_ops < full && last_ops + trailing.len() <= full + full.div_ceil(LAST_STEP_TAIL_SLACK) {
        return None;
    }
    let trailing_time: Picos = trailing.iter().map(|o| o.duration()).sum();
    let work: Vec<f64> = walk.per_step_time.iter().map(|t| t.0 as f64).collect();
    let distortion = Distortion::of(trailing_time.0 as f64, &work, floor_pct)?;
    if !distortion.beyond_noise() {
        return None;
    }
    Some(Trailing { last_end, full, ops: trailing, distortion })
}

/// The slack, as a fraction `1 / LAST_STEP_TAIL_SLACK` of a complete step's ops, within which a
/// short last step and the ops after it make one step (op counts vary a little between steps).
const LAST_STEP_TAIL_SLACK: usize = 20;

/// Ops of the step programs after the last step marker, fewer than a complete step's (host-run
/// ops; only those after the marker are materialised).
fn trailing_partial_step<'h>(
    host: &'h HostProfile,
    steps: &xlens_roofline::Steps,
    walk: &mut HostWalk<'h>,
    floor_pct: f64,
) -> Option<Signal> {
    let Trailing { last_end, full, ops: trailing, distortion } = trailing_ops(host, steps, walk, floor_pct)?;
    let first = trailing.first()?;
    let last = trailing.iter().max_by_key(|o| (o.end, o.start))?;
    let names: BTreeSet<String> = trailing
        .iter()
        .map(|o| {
            o.program_id
                .and_then(|p| host.op_profile().ok()?.programs.get(&p).cloned())
                .unwrap_or_else(|| o.program_id.map_or("unknown program".to_owned(), |p| format!("program {p}")))
        })
        .collect();
    let names: Vec<String> = names.into_iter().collect();
    let mut evidence = vec![
        Evidence::metric("ops_after_last_step", "ops after the last step marker", trailing.len() as f64, "count"),
        Evidence::metric("complete_step_ops_median", "ops of a complete step (median)", full as f64, "count"),
        Evidence::note(format!(
            "after {} ended at {:.3} ms, {} op(s) of {} ran until {:.3} ms with no step marker around them",
            step_label(&steps.steps.last()?.name),
            last_end.as_ms_f64(),
            trailing.len(),
            names.join(", "),
            last.end.as_ms_f64()
        )),
        evidence::event_parts(host, first.plane, first.line, &first.name, first.start, first.duration()),
        evidence::event_parts(host, last.plane, last.line, &last.name, last.start, last.duration()),
    ];
    evidence.extend(distortion.evidence());
    Some(Signal {
        label: format!(
            "the capture stopped inside a step ({} of a step's {full} ops ran after the last marker)",
            trailing.len()
        ),
        evidence,
        lost: false,
    })
}

/// TPU cores whose op events end early, or that recorded fewer steps than the others.
fn lagging_cores(
    host: &HostProfile,
    last_op: &BTreeMap<i64, Picos>,
    median_step: Picos,
    lag_steps: f64,
) -> Option<Signal> {
    let cores = host.space().tpu_tensor_cores();
    if cores.len() < 2 {
        return None;
    }
    let mut step_counts: BTreeMap<i64, usize> = BTreeMap::new();
    for plane in &cores {
        let core = match plane.kind() {
            xlens_xplane::PlaneKind::TpuTensorCore { ordinal } => i64::from(ordinal),
            _ => continue,
        };
        if let Some(line) = plane.line_by_name(names::line::STEPS) {
            step_counts.insert(core, line.event_count());
        }
    }
    let latest = last_op.values().copied().max()?;
    let most_steps = step_counts.values().copied().max().unwrap_or(0);
    if median_step.0 <= 0 {
        return None;
    }
    let threshold = Picos((median_step.0 as f64 * lag_steps).round() as i64).max(Picos(1));
    let mut evidence = Vec::new();
    let mut lagging = BTreeSet::new();
    for (&core, &end) in last_op {
        let lag = latest - end;
        if lag >= threshold {
            lagging.insert(core);
            evidence.push(Evidence::note(format!(
                "TPU core {core}: last op ends at {:.3} ms, {:.3} ms before the latest core's ({:.1} median steps)",
                end.as_ms_f64(),
                lag.as_ms_f64(),
                lag.0 as f64 / median_step.0 as f64
            )));
        }
    }
    for (&core, &count) in &step_counts {
        if count < most_steps {
            lagging.insert(core);
            evidence.push(Evidence::note(format!(
                "TPU core {core} recorded {count} steps, other cores up to {most_steps} (XProf keeps only steps every \
                 core has)"
            )));
        }
    }
    if lagging.is_empty() {
        return None;
    }
    let list: Vec<String> = lagging.iter().map(i64::to_string).collect();
    Some(Signal {
        label: format!("TPU core(s) {} stopped recording before the others", list.join(", ")),
        evidence,
        lost: true,
    })
}

impl Detector for TruncatedCapture {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let signals = signals(host, config)?;
        let Some(severity) = score(&signals) else { return Ok(()) };
        out.push(describe(self, host, signals, severity));
        Ok(())
    }
}

/// What the profile says about lost data: the profiler's messages and the dropped events.
struct Lost<'h> {
    /// Profiler errors and warnings that say events were lost.
    messages: Vec<&'h String>,
    /// The `dropped_traces` stats, summed.
    dropped: u64,
}

/// Reads the profiler's messages about lost data and the dropped event count.
fn lost_data(host: &HostProfile) -> Lost<'_> {
    let space = host.space();
    let messages: Vec<&String> =
        space.profiler_errors().iter().chain(space.profiler_warnings()).filter(|m| says_data_lost(m)).collect();
    Lost { messages, dropped: dropped_events(host) }
}

/// The signals of lost data: the profiler's messages, and the dropped events from the threshold.
fn lost_signals(lost: &Lost<'_>, min_dropped_events: u64) -> Vec<Signal> {
    let (messages, dropped) = (&lost.messages, lost.dropped);
    let mut signals = Vec::new();
    if !messages.is_empty() {
        signals.push(Signal {
            label: format!("the profiler reported lost events ({} message(s))", messages.len()),
            evidence: messages.iter().take(5).map(|m| Evidence::note(format!("profiler: {m}"))).collect(),
            lost: true,
        });
    }
    if dropped > 0 && dropped >= min_dropped_events {
        signals.push(Signal {
            label: format!("{dropped} event(s) were dropped"),
            evidence: vec![Evidence::metric(
                "dropped_events",
                "dropped events (dropped_traces)",
                dropped as f64,
                "count",
            )],
            lost: true,
        });
    }
    signals
}

/// Host-run ops: ops past the capture stop, a trailing partial step and lagging cores.
fn host_step_signals(
    host: &HostProfile,
    steps: &xlens_roofline::Steps,
    median_step: Picos,
    t: &crate::config::TruncatedCapture,
) -> Vec<Signal> {
    let mut signals = Vec::new();
    let mut walk = walk_host_ops(host, steps, capture_window(host));
    // Only the ops past the stop are materialised.
    let late = evidence::picked_host_op_spans(host, std::mem::take(&mut walk.late));
    signals.extend(past_the_stop(host, steps, &late));
    signals.extend(trailing_partial_step(host, steps, &mut walk, t.min_trailing_pct));
    signals.extend(lagging_cores(host, &walk.last_op, median_step, t.min_core_lag_steps));
    signals
}

/// TPU: ops past the capture stop, a trailing partial step and lagging cores.
fn tpu_step_signals(
    host: &HostProfile,
    steps: &xlens_roofline::Steps,
    median_step: Picos,
    t: &crate::config::TruncatedCapture,
) -> Result<Vec<Signal>, Skip> {
    let mut signals = Vec::new();
    // TPU: the shared device timeline knows each core's last op and the ops after its
    // last step marker; only the ops past the stop are walked, and only when some are.
    let timeline = host.device_timeline().map_err(Skip::because)?;
    let window = capture_window(host);
    let late = window.is_some_and(|w| timeline.cores.iter().any(|c| c.op_span.is_some_and(|(_, e)| e > w)));
    let ops = match window {
        Some(w) if late => evidence::op_spans_where(host, |_, _| true, |_, end| end > w),
        _ => Vec::new(),
    };
    signals.extend(past_the_stop(host, steps, &ops));
    signals.extend(tpu_trailing_partial_step(timeline, t.min_trailing_pct));
    let ends: BTreeMap<i64, Picos> =
        timeline.cores.iter().filter_map(|c| c.op_span.map(|(_, e)| (i64::from(c.core), e))).collect();
    signals.extend(lagging_cores(host, &ends, median_step, t.min_core_lag_steps));
    Ok(signals)
}

/// Every check's signal, in the order the summary lists them.
fn signals(host: &HostProfile, config: &ScanConfig) -> Result<Vec<Signal>, Skip> {
    let t = &config.thresholds.truncated_capture;
    let mut signals = lost_signals(&lost_data(host), t.min_dropped_events);
    if let Ok(steps) = host.steps()
        && !steps.steps.is_empty()
    {
        let median_step = median_picos(steps.steps.iter().map(|s| s.duration).collect());
        if host.space().tpu_tensor_cores().is_empty() {
            signals.extend(host_step_signals(host, steps, median_step, t));
        } else {
            signals.extend(tpu_step_signals(host, steps, median_step, t)?);
        }
    }
    Ok(signals)
}

/// The severity: `None` without a signal, P1 when data was lost, else P2 (the impact is 0 ms per
/// step, so `Severity::from_impact` does not apply: the fault is in the measurement).
fn score(signals: &[Signal]) -> Option<Severity> {
    if signals.is_empty() {
        return None;
    }
    Some(if signals.iter().any(|s| s.lost) { Severity::P1 } else { Severity::P2 })
}

/// The finding: what is missing, what it makes partial, and every signal's evidence.
fn describe(detector: &TruncatedCapture, host: &HostProfile, signals: Vec<Signal>, severity: Severity) -> Finding {
    let lost = signals.iter().any(|s| s.lost);
    let labels: Vec<&str> = signals.iter().map(|s| s.label.as_str()).collect();
    let what = format!(
        "The profile is incomplete: {}. Figures computed from it ({}) are partial.",
        labels.join("; "),
        if lost { "op times, idle time, step counts" } else { "the last step" }
    );
    Finding::new(
        detector,
        severity,
        what,
        signals.into_iter().flat_map(|s| s.evidence).collect(),
        Impact::of(0.0, host.step_ms()),
    )
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_testkit::rewrite::{Edit, rewrite};
    use xlens_testkit::synth::{fixture, tpu_profile};
    use xlens_xplane::{Event, Picos, Space, SpaceBuilder, names};

    use crate::config::ScanConfig;
    use crate::finding::{Finding, Severity};
    use crate::profile::Profile;
    use crate::scan::scan;
    use crate::testing::{run_on, testdata};

    fn findings_of(space: Space) -> Vec<Finding> {
        let report = scan(&Profile::from_space("vm", space), &ScanConfig::only("truncated_capture"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        report.findings
    }

    fn open(dir: &str) -> Space {
        let mut hosts = xlens_testkit::open_session(testdata(dir)).unwrap().into_hosts();
        hosts.remove(0).into_space()
    }

    #[test]
    fn a_faithful_copy_is_still_clean() {
        // The rewrite itself must not create a finding (nor lose the steps).
        let space = rewrite(&open("corpus/clean"), &Edit::default());
        assert!(findings_of(space).is_empty());
    }

    #[test]
    fn finds_a_capture_stopped_inside_the_last_step() {
        let space = open("corpus/clean");
        let profile = Profile::from_space("vm", open("corpus/clean"));
        let steps = profile.hosts()[0].steps().unwrap().steps.clone();
        let last = steps.last().unwrap();
        // Stop halfway through `train 4`: events still open at the stop are lost (a TraceMe is
        // recorded when it ends), so the step marker goes and its first ops stay.
        let cut = last.start + Picos(last.duration.0 / 2);
        let keep = |e: &Event<'_>| e.end() <= cut;
        let start_ns = space.profile_start_ns().unwrap();
        let stop_ns = start_ns + (cut.0 / 1000) as u64;
        let truncated = rewrite(&space, &Edit { keep: Some(&keep), stop_ns: Some(stop_ns), ..Edit::default() });
        let findings = findings_of(truncated);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P2, "only the last step was cut");
        assert_eq!(f.impact.ms_per_step, 0.0);
        // 127 ops per step in the clean program; some of train 4's ran before the stop.
        assert_eq!(metric(f, "ops of a complete step (median)"), 127.0);
        let trailing = metric(f, "ops after the last step marker");
        assert!((1.0..127.0).contains(&trailing), "{trailing}");
        assert!(f.what.contains("the capture stopped inside a step"), "{}", f.what);
        assert!(f.evidence.iter().any(|e| e.to_string().contains("after train 3 ended at")), "{f:#?}");
        assert!(f.evidence.iter().any(|e| e.to_string().contains("jit_train_step(36)")), "{f:#?}");
        // Half a step of four moves the figures by about an eighth, far beyond the steps' spread.
        let (moved, noise) = (metric(f, TRAILING), metric(f, NOISE));
        assert!(moved > noise && (5.0..20.0).contains(&moved), "{moved} {noise}");
    }

    const TRAILING: &str = "work after the last step marker, as a share of the work inside the steps (the move of \
                            the step count and of per-step op time)";
    const NOISE: &str = "noise: the steps' own spread of their work (robust CV), at least the floor";

    /// corpus/clean stopped `cut` into its last step (`train 4`), the step's marker lost.
    fn cut_inside_the_last_step(fraction: f64) -> Space {
        let space = open("corpus/clean");
        let profile = Profile::from_space("vm", open("corpus/clean"));
        let steps = profile.hosts()[0].steps().unwrap().steps.clone();
        let last = steps.last().unwrap();
        let cut = last.start + Picos((last.duration.0 as f64 * fraction) as i64);
        let keep = |e: &Event<'_>| e.end() <= cut;
        let stop_ns = space.profile_start_ns().unwrap() + (cut.0 / 1000) as u64;
        rewrite(&space, &Edit { keep: Some(&keep), stop_ns: Some(stop_ns), ..Edit::default() })
    }

    #[test]
    fn a_handful_of_ops_after_the_last_marker_is_normal() {
        // Stopped 5 % into `train 4`: 20 of a step's 127 ops ran after the last marker, 0.35 % of
        // the work inside the four complete steps, whose own work varies by 6 % (robust CV).
        // Neither the step count nor per-step op time moves beyond that noise.
        assert!(findings_of(cut_inside_the_last_step(0.05)).is_empty());
        // Nor with the floor at 0: the steps' spread is the noise.
        let profile = Profile::from_space("vm", cut_inside_the_last_step(0.05));
        let mut config = ScanConfig::only("truncated_capture");
        config.thresholds.truncated_capture.min_trailing_pct = 0.0;
        assert!(scan(&profile, &config).findings.is_empty());
    }

    /// torch_xla 2.8 on CPU: `xm.mark_step()` returns before the last step's graph has run, so
    /// 60 of its 130 ops run after its marker, until the `xm.wait_device_ops()` before the stop.
    /// The last step holds the other 70: together one step, its tail, not a cut step.
    #[test]
    fn the_asynchronous_tail_of_the_last_step_is_not_truncation() {
        assert!(
            crate::testing::run_on("truncated_capture", &crate::testing::testdata("field/ptxla_cpu_steady")).is_empty()
        );
    }

    #[test]
    fn the_noise_is_the_steps_spread_with_a_floor() {
        use super::Distortion;
        // One Keras step of 1,265 ops and one op after its marker: no spread to measure, the 2 %
        // floor holds (0.08 %).
        let one = Distortion::of(1.0, &[1265.0], 2.0).unwrap();
        assert!(!one.beyond_noise() && one.noise_pct == 2.0, "{one:?}");
        // Steps that vary by about 10 %: a third of a step in eight is 4 %, within it.
        let steps = [90.0, 100.0, 110.0, 95.0, 105.0, 100.0, 92.0, 108.0];
        let third = Distortion::of(33.0, &steps, 2.0).unwrap();
        assert!((5.0..15.0).contains(&third.noise_pct) && !third.beyond_noise(), "{third:?}");
        // Steps that repeat exactly: the floor alone, and half a step of four is beyond it.
        let half = Distortion::of(50.0, &[100.0; 4], 2.0).unwrap();
        assert!(half.noise_pct == 2.0 && half.beyond_noise(), "{half:?}");
        // No work inside the steps: nothing to compare with.
        assert!(Distortion::of(1.0, &[0.0, 0.0], 2.0).is_none());
    }

    #[test]
    fn finds_dropped_events_and_profiler_errors() {
        let space = rewrite(
            &open("corpus/clean"),
            &Edit {
                dropped: Some(4096),
                errors: &["Total driver(callback) events reaches max 2000000"],
                ..Edit::default()
            },
        );
        let findings = findings_of(space);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P1);
        assert_eq!(metric(f, "dropped events (dropped_traces)"), 4096.0);
        assert!(
            f.evidence.iter().any(|e| e.to_string() == "profiler: Total driver(callback) events reaches max 2000000"),
            "{f:#?}"
        );
    }

    fn tpu_basic() -> (Space, Vec<xlens_roofline::Step>) {
        let bytes = tpu_profile(&fixture("tpu_basic").unwrap());
        let steps = Profile::from_space("synth", Space::parse(bytes.clone().into()).unwrap()).hosts()[0]
            .steps()
            .unwrap()
            .steps
            .clone();
        (Space::parse(bytes.into()).unwrap(), steps)
    }

    #[test]
    fn finds_a_tpu_core_that_stopped_recording() {
        let (space, steps) = tpu_basic();
        assert_eq!(steps.len(), 6);
        // Core 2 records nothing from step 3 on (its trace buffer filled).
        let after = steps[3].start;
        let keep = |e: &Event<'_>| !(e.plane().name() == "/device:TPU:2" && e.start() >= after);
        let findings = findings_of(rewrite(&space, &Edit { keep: Some(&keep), ..Edit::default() }));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P1);
        assert!(f.what.contains("TPU core(s) 2 stopped recording before the others"), "{}", f.what);
        assert!(
            f.evidence.iter().any(|e| e.to_string().starts_with("TPU core 2 recorded 3 steps, other cores up to 6")),
            "{f:#?}"
        );
        // Three steps of about 0.3 ms are missing at the end of core 2.
        let lag = f.evidence.iter().find_map(|e| {
            let text = e.to_string();
            let rest = text.strip_prefix("TPU core 2: last op ends at ")?;
            let (_, after) = rest.split_once(", ")?;
            after.split(' ').next()?.parse::<f64>().ok()
        });
        assert!(lag.is_some_and(|ms| (0.8..1.2).contains(&ms)), "{lag:?} {f:#?}");
    }

    #[test]
    fn finds_a_tpu_step_that_ends_after_the_capture_stop() {
        let (space, steps) = tpu_basic();
        // The capture stops 10 us before the last step ends.
        let last = steps.last().unwrap();
        let stop_ns = space.profile_start_ns().unwrap() + (last.end().0 / 1000) as u64 - 10_000;
        let findings = findings_of(rewrite(&space, &Edit { stop_ns: Some(stop_ns), ..Edit::default() }));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P2);
        assert!(f.what.contains("1 step(s) end after the capture stopped"), "{}", f.what);
        assert!(
            f.evidence.iter().any(|e| e.to_string().starts_with(&format!("step {} runs from ", last.name))
                && e.to_string().contains("past the capture stop")),
            "{f:#?}"
        );
        // The ops of the last 10 us of every core run past the stop too.
        assert!(metric(f, "ops that end after the capture stop") >= 4.0, "{f:#?}");
    }

    /// Odd but decodable profiles: none of the host-timeline detectors may panic on them.
    #[test]
    fn odd_profiles_do_not_panic() {
        let ids = [
            "input_starvation",
            "barrier_in_loop",
            "profile_during_warmup",
            "host_callback_stall",
            "truncated_capture",
        ];
        let mut spaces = Vec::new();
        // A host plane without lines.
        let mut b = SpaceBuilder::default();
        b.plane(1, names::plane::HOST_CPU);
        spaces.push(b.finish());
        // Zero-length and overlapping step markers, ops without program ids, a negative offset,
        // a dangling metadata id, a stop time before the start, errors with odd words.
        let mut b = SpaceBuilder::default();
        b.error("events dropped: buffer full");
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let train = host.event_metadata("train");
            let op = host.event_metadata("debug_print.1");
            let sync = host.event_metadata("$api.py:1 block_until_ready");
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let hlo_op = host.stat_metadata(names::stat::HLO_OP);
            let run = host.stat_metadata(names::stat::RUN_ID);
            let dropped = host.stat_metadata(names::stat::DROPPED_TRACES);
            host.stat(dropped, -5i64);
            let mut line = host.line(1, "python", 0);
            line.event(train, 0, 0).stat(root, 1i64);
            line.event(train, 0, 1_000).stat(root, 1i64);
            line.event(train, 500, 10_000).stat(root, 1i64);
            line.event(op, -50, 100).stat(hlo_op, "debug_print.1");
            line.event(op, 600, 0).stat(hlo_op, "debug_print.1").stat(run, 7i64);
            line.event(sync, 700, 5_000);
            line.event(xlens_xplane::EventMetadataId(999), 800, 10);
        }
        {
            let mut env = b.plane(2, names::plane::TASK_ENVIRONMENT);
            let start = env.stat_metadata(names::stat::PROFILE_START_TIME);
            let stop = env.stat_metadata(names::stat::PROFILE_STOP_TIME);
            env.stat(start, 1_000u64);
            env.stat(stop, 10u64);
        }
        spaces.push(b.finish());
        // TPU cores with steps but no ops, and ops but no steps.
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let m = host.event_metadata("HostCallbackRequest");
            host.line(1, "runtime", 0).event(m, 0, 10);
        }
        {
            let mut tpu = b.plane(100, "/device:TPU:0");
            let step = tpu.event_metadata("0");
            tpu.line(1, names::line::STEPS, 0).event(step, 0, 1_000_000);
        }
        {
            let mut tpu = b.plane(101, "/device:TPU:1");
            let op = tpu.event_metadata("host send");
            tpu.line(3, names::line::XLA_OPS, 0).event(op, 0, 1_000_000);
        }
        spaces.push(b.finish());
        let reports: Vec<_> = spaces
            .into_iter()
            .map(|bytes| {
                let profile = Profile::from_space("odd", Space::parse(bytes.into()).unwrap());
                let config =
                    ScanConfig { only: Some(ids.iter().map(|s| s.to_string()).collect()), ..ScanConfig::default() };
                scan(&profile, &config)
            })
            .collect();
        // The profiler's message is reported; the negative dropped count is not.
        let lost: Vec<&Finding> = reports[1].findings.iter().filter(|f| f.id == "truncated_capture").collect();
        assert_eq!(lost.len(), 1, "{:#?}", reports[1]);
        assert!(lost[0].evidence.iter().any(|e| e.to_string() == "profiler: events dropped: buffer full"));
        assert!(!lost[0].evidence.iter().any(|e| e.to_string().starts_with("dropped events")), "{:#?}", lost[0]);
    }

    #[test]
    fn untouched_profiles_are_complete() {
        for dir in [
            "corpus/clean",
            "corpus/recompilation",
            "corpus/host_callback",
            "corpus/sharded_collectives_baseline",
            "real/barrier_in_loop",
            "real/input_starvation",
            "real/profile_during_warmup",
            "real/debug_print",
            "real/sharded_collectives",
            "tpu/tpu_basic",
            "tpu/tpu_straggler",
        ] {
            assert!(run_on("truncated_capture", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
