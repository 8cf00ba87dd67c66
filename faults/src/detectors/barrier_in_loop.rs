//! `barrier_in_loop`: host syncs (`block_until_ready`, reading a device value) inside the step
//! that serialise dispatch: the host waits for each program to finish before it dispatches the
//! next one, and the device idles while the host wakes up and dispatches.

use std::collections::BTreeMap;

use xlens_xplane::{Event, Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct BarrierInLoop;

const META: DetectorMeta = DetectorMeta {
    id: "barrier_in_loop",
    title: "Host syncs inside the step serialise dispatch",
    severity: Severity::P1,
    needs: &[Need::HostTimeline, Need::Steps, Need::OpTimeline],
    doc: DetectorDoc {
        detects: "Host syncs inside the training step (`jax.block_until_ready`, `BlockHostUntilReady`, buffer \
                  awaits, `device_get`/`__array__` reads) that serialise dispatch: several syncs per step, and \
                  between consecutive program runs of a step the device idles because the host waited for the \
                  previous run and only then dispatched the next one.",
        why: "JAX dispatches asynchronously: without a barrier the host queues the next program while the device \
              runs the current one, so dispatch and Python overhead hide behind device work. A barrier after \
              each call exposes the full host round trip (wake-up, Python, dispatch) as device idle time, once \
              per call, which dominates short steps.",
        evidence: "Host syncs and program runs per step; the serialised gaps (a sync that began before run k \
                   ended returned before run k+1 started) with the device idle time in them per step and as a \
                   share of the step; the share of run-to-run transitions that were serialised; the sync events \
                   of one step on the timeline and the Python frame that called them.",
        thresholds: "Reported when the median step has at least `barrier_in_loop.min_syncs_per_step` (default 2) \
                     host syncs and the idle time in serialised gaps is at least `barrier_in_loop.min_idle_pct` \
                     (default 10) % of the step time. P0 when that idle is 20 % of the step or more, P2 under 2 %.",
        fix: "Remove host synchronisation from inside the step (reading a device value on the host, converting it to \
              a host number or array, printing it); keep one sync per step at most, ideally only when a value is \
              logged every N steps. Run the parts of the step as one compiled program so the whole step is a single \
              dispatch, and time steps with the profiler or a single sync at the end.",
        fix_lines: FixLines {
            jax: "remove `block_until_ready`, `.item()`, `float(x)`, `np.asarray(x)` and printing of device arrays \
                  from inside the step, and fuse its sub-calls under one `jax.jit`.",
            tensorflow: "remove `.numpy()`, `float(t)`, `print(t)` and `tf.print` of tensors from inside the step, \
                         wrap the whole step in one `tf.function`, and in Keras raise `steps_per_execution` in \
                         `model.compile` so several steps run per host call.",
            pytorch_xla: "remove `.item()`, `.cpu()`, `print(t)` and `xm.wait_device_ops()` from inside the step, \
                          call `xm.mark_step()` once per step (`MpDeviceLoader` does it), and log through \
                          `xm.add_step_closure`.",
        },
    },
};

/// Host events that block the calling thread until device work finishes.
fn is_sync(name: &str) -> bool {
    name.contains("block_until_ready")
        || name.contains("BlockHostUntilReady")
        || name.contains("Buffer::Await")
        || name.ends_with(" device_get")
        || name.ends_with(" __array__")
}

/// Python frames of JAX and the standard library (not the user's code that called the sync).
const LIBRARY_FRAMES: &[&str] = &[
    "api.py",
    "pjit.py",
    "traceback_util.py",
    "contextlib.py",
    "profiler.py",
    "tree_util.py",
    "array.py",
    "dispatch.py",
];

/// One execution of a program: the span from its first op to its last.
#[derive(Clone, Debug, PartialEq)]
struct Run {
    start: Picos,
    end: Picos,
    program: String,
}

/// Program executions: ops grouped by (`program_id`, `run_id`) on CPU; the first TPU core's
/// `XLA Modules` events on TPU.
fn program_runs(host: &HostProfile) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let host_ops = host.host_ops();
    let cpu = host.space().tpu_tensor_cores().is_empty();
    if cpu && host_ops.contexts.iter().any(|c| c.run_id.is_some()) {
        let programs = host.op_profile().map(|p| p.programs.clone()).unwrap_or_default();
        // Each interned context (program, run, device) spans its ops, an index per op; the
        // contexts of one run are then joined.
        let mut by_context: Vec<Option<(Picos, Picos)>> = vec![None; host_ops.contexts.len()];
        for op in host_ops.iter() {
            let Some(slot) = by_context.get_mut(op.context as usize) else { continue };
            let span = slot.get_or_insert((op.start, op.end));
            span.0 = span.0.min(op.start);
            span.1 = span.1.max(op.end);
        }
        let mut by_run: BTreeMap<(u64, i64), (Picos, Picos)> = BTreeMap::new();
        for (context, span) in host_ops.contexts.iter().zip(by_context) {
            let (Some(program), Some(run), Some((start, end))) = (context.program_id, context.run_id, span) else {
                continue;
            };
            let joined = by_run.entry((program, run)).or_insert((start, end));
            joined.0 = joined.0.min(start);
            joined.1 = joined.1.max(end);
        }
        runs = by_run
            .into_iter()
            .map(|((program, _), (start, end))| Run {
                start,
                end,
                program: programs.get(&program).cloned().unwrap_or_else(|| format!("program {program}")),
            })
            .collect();
    } else if let Some(plane) = host.space().tpu_tensor_cores().first()
        && let Some(line) = plane.line_by_name(names::line::XLA_MODULES)
    {
        runs = line
            .events(plane)
            .map_while(|e| e.ok())
            .map(|e| Run { start: e.start(), end: e.end(), program: e.name().to_owned() })
            .collect();
    }
    runs.sort_by(|a, b| a.start.cmp(&b.start).then(a.end.cmp(&b.end)).then(a.program.cmp(&b.program)));
    runs
}

/// The outermost sync events of the step-loop threads, in time order.
fn sync_episodes<'a>(host: &'a HostProfile) -> Vec<Event<'a>> {
    let Some(plane) = host.space().host_threads() else { return Vec::new() };
    let mut out = Vec::new();
    // Syncs decided once per metadata entry, not per event.
    let sync = plane.metadata_mask(|m| is_sync(m.name()));
    if sync.is_empty() {
        return out;
    }
    for index in evidence::step_marker_lines(host) {
        let line = &plane.lines()[index];
        let mut open_until = Picos(i64::MIN);
        for ev in line.events_where(plane, &sync).map_while(|e| e.ok()) {
            if ev.start() >= open_until {
                open_until = ev.end();
                out.push(ev);
            }
        }
    }
    out.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index()));
    out
}

/// The innermost user Python frame (python-tracer `$file:line name` event) around an event.
fn calling_frame<'a>(host: &'a HostProfile, sync: &Event<'a>) -> Option<&'a str> {
    let plane = host.space().host_threads()?;
    let line = sync.line();
    line.events(plane)
        .map_while(|e| e.ok())
        .take_while(|e| e.start() <= sync.start())
        .filter(|e| {
            e.end() >= sync.end()
                && e.name().starts_with('$')
                && !is_sync(e.name())
                && !LIBRARY_FRAMES.iter().any(|f| e.name()[1..].starts_with(f))
        })
        .max_by_key(|e| (e.start(), std::cmp::Reverse(e.duration())))
        .map(|e| e.name())
}

/// What one step shows.
#[derive(Clone, Debug, Default)]
struct StepBarriers {
    syncs: usize,
    runs: usize,
    transitions: usize,
    serialized: usize,
    idle: Picos,
}

impl Detector for BarrierInLoop {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host)?;
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// What the profile shows: the steps, the host syncs, and each step's runs and serialised gaps.
struct Measured<'a> {
    steps: &'a xlens_roofline::Steps,
    syncs: Vec<Event<'a>>,
    per_step: Vec<StepBarriers>,
}

/// Reads the program runs and host syncs, and counts each step's barriers.
fn measure(host: &HostProfile) -> Result<Measured<'_>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    // Program runs: host-run op events grouped by run_id (XLA:CPU), or the TPU `XLA Modules`
    // line, which records every run without walking the ops.
    let runs = program_runs(host);
    if runs.is_empty() {
        return Err(Skip::because("the profile records no program executions (run_id or XLA Modules)"));
    }
    let syncs = sync_episodes(host);
    let mut per_step: Vec<StepBarriers> = Vec::with_capacity(steps.steps.len());
    for step in &steps.steps {
        per_step.push(step_barriers(step, &syncs, &runs));
    }
    Ok(Measured { steps, syncs, per_step })
}

/// One step's syncs, runs, and run-to-run transitions serialised by a sync (with the idle gaps).
fn step_barriers(step: &xlens_roofline::Step, syncs: &[Event<'_>], runs: &[Run]) -> StepBarriers {
    let (lo, hi) = (step.start, step.end());
    // Syncs and runs are sorted by start: the step's are one range of each.
    let range = |from: usize, to: usize| from..to.max(from);
    let step_syncs: Vec<&Event<'_>> = syncs
        [range(syncs.partition_point(|s| s.start() < lo), syncs.partition_point(|s| s.start() < hi))]
    .iter()
    .collect();
    let step_runs = &runs[range(runs.partition_point(|r| r.start < lo), runs.partition_point(|r| r.start < hi))];
    // Runs of the step; runs that overlap in time form one burst.
    let mut bursts: Vec<(Picos, Picos)> = Vec::new();
    let mut run_count = 0;
    for run in step_runs {
        run_count += 1;
        match bursts.last_mut() {
            Some(last) if run.start < last.1 => last.1 = last.1.max(run.end),
            _ => bursts.push((run.start, run.end)),
        }
    }
    let mut s = StepBarriers { syncs: step_syncs.len(), runs: run_count, ..StepBarriers::default() };
    for pair in bursts.windows(2) {
        let (cur, next) = (pair[0], pair[1]);
        s.transitions += 1;
        // The host was blocked while `cur` ran and dispatched `next` only after it returned.
        let serialized = step_syncs.iter().any(|sync| sync.start() < cur.1 && sync.end() <= next.0);
        if serialized {
            s.serialized += 1;
            s.idle += next.0.saturating_sub(cur.1);
        }
    }
    s
}

/// The median of counts (the upper one of an even count).
fn median(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The syncs and runs per step and the serialised idle they cause.
struct Score {
    syncs_per_step: usize,
    runs_per_step: usize,
    /// Transitions serialised by a sync, in %.
    serialized_pct: f64,
    /// Device idle in serialised gaps, per step and as a share of the steps.
    ms_per_step: f64,
    idle_pct: f64,
    impact: Impact,
}

/// Decides whether the syncs per step and the idle they cause reach the thresholds.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.barrier_in_loop;
    let (steps, per_step) = (m.steps, &m.per_step);
    if per_step.is_empty() {
        return None;
    }
    let syncs_per_step = median(per_step.iter().map(|s| s.syncs).collect());
    let runs_per_step = median(per_step.iter().map(|s| s.runs).collect());
    let total_step: Picos = steps.steps.iter().map(|s| s.duration).sum();
    let idle: Picos = per_step.iter().map(|s| s.idle).sum();
    if total_step.0 <= 0 {
        return None;
    }
    let idle_pct = 100.0 * idle.0 as f64 / total_step.0 as f64;
    if (syncs_per_step as f64) < t.min_syncs_per_step || idle_pct < t.min_idle_pct {
        return None;
    }
    let transitions: usize = per_step.iter().map(|s| s.transitions).sum();
    let serialized: usize = per_step.iter().map(|s| s.serialized).sum();
    let n = steps.steps.len();
    let ms_per_step = idle.as_ms_f64() / n as f64;
    let impact = Impact::of(ms_per_step, host.step_ms());
    let serialized_pct = if transitions > 0 { 100.0 * serialized as f64 / transitions as f64 } else { 0.0 };
    Some(Score { syncs_per_step, runs_per_step, serialized_pct, ms_per_step, idle_pct, impact })
}

/// The evidence: the counts, the idle, and the step with the median idle, its syncs and their caller.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, s: &Score) -> Vec<Evidence> {
    let (steps, syncs, per_step, n) = (m.steps, &m.syncs, &m.per_step, m.steps.steps.len());
    let (syncs_per_step, runs_per_step, serialized_pct, ms_per_step, idle_pct) =
        (s.syncs_per_step, s.runs_per_step, s.serialized_pct, s.ms_per_step, s.idle_pct);
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric(
            "host_syncs_median",
            format!("host syncs {} (median)", tb.per()),
            syncs_per_step as f64,
            "count",
        ),
        Evidence::metric(
            "program_runs_median",
            format!("program runs {} (median)", tb.per()),
            runs_per_step as f64,
            "count",
        ),
        Evidence::metric(
            "serialized_transition_share",
            "run-to-run transitions serialised by a sync",
            serialized_pct,
            "%",
        ),
        Evidence::metric(
            "serialized_idle_time",
            format!("device idle in serialised gaps {}", tb.per()),
            ms_per_step,
            "ms",
        ),
        Evidence::metric("serialized_idle_share", "device idle in serialised gaps", idle_pct, "% of step"),
    ];
    // One representative step: the one with the median serialised idle.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (per_step[i].idle, i));
    let k = order[n / 2];
    let step = &steps.steps[k];
    let step_syncs: Vec<&Event<'_>> =
        syncs.iter().filter(|s| step.start <= s.start() && s.start() < step.end()).collect();
    let mut sync_names: Vec<&str> = step_syncs.iter().map(|e| e.name()).collect();
    sync_names.sort_unstable();
    sync_names.dedup();
    evidence.push(Evidence::note(format!(
        "{}: {} syncs ({}), {} runs, {:.3} ms idle between runs in a {:.3} ms step",
        step.name,
        per_step[k].syncs,
        sync_names.join(", "),
        per_step[k].runs,
        per_step[k].idle.as_ms_f64(),
        step.duration.as_ms_f64()
    )));
    if let Some(frame) = step_syncs.first().and_then(|s| calling_frame(host, s)) {
        evidence.push(Evidence::note(format!("the syncs are called from the Python frame `{frame}`")));
    }
    evidence.extend(step_syncs.iter().take(6).map(|e| evidence::event(host, e)));
    evidence
}

/// The finding: the syncs per step, the serialised transitions and the idle between runs.
fn describe(detector: &BarrierInLoop, host: &HostProfile, m: &Measured<'_>, s: &Score) -> Finding {
    let (syncs_per_step, runs_per_step, serialized_pct, ms_per_step, idle_pct) =
        (s.syncs_per_step, s.runs_per_step, s.serialized_pct, s.ms_per_step, s.idle_pct);
    let severity = Severity::from_impact(s.impact.pct_of_step, META.severity);
    let tb = TimeBase::of(host);
    let what = format!(
        "The host syncs with the device {syncs_per_step} times {per} and, for {serialized_pct:.0} % of the \
             transitions between {the_steps} {runs_per_step} program runs, dispatches the next run only after waiting \
             for the previous one: the device idles {ms_per_step:.3} ms {per} ({idle_pct:.1} % {of_the}) \
             between runs.",
        per = tb.per(),
        the_steps = tb.possessive(),
        of_the = tb.of_the(),
    );
    Finding::new(detector, severity, what, evidence_of(host, m, s), s.impact)
}

#[cfg(test)]
mod tests {
    use crate::finding::{Evidence, Severity};
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_a_sync_after_every_sub_call() {
        let findings = run_on("barrier_in_loop", &testdata("real/barrier_in_loop"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: 6 block_until_ready per step, 5 module runs, every dispatch after the
        // previous run ended (serialised fraction 1.0), 23-217 us idle between runs.
        assert_eq!(metric(f, "host syncs per step (median)"), 6.0);
        assert_eq!(metric(f, "program runs per step (median)"), 5.0);
        assert!(metric(f, "run-to-run transitions serialised by a sync") >= 90.0, "{f:#?}");
        let idle_pct = metric(f, "device idle in serialised gaps");
        assert!((20.0..80.0).contains(&idle_pct), "{idle_pct}");
        assert!((0.1..0.5).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P0);
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Event { name, line, .. }
                if name.starts_with("$api.py:") && name.ends_with(" block_until_ready") && line == "python")),
            "{f:#?}"
        );
        assert!(f.evidence.iter().any(|e| e.to_string().contains("`$capture_barrier_in_loop.py:44 step`")), "{f:#?}");
    }

    /// A TPU-shaped profile: per 1 ms step, 5 runs of 100 us, each dispatched 180 us after the
    /// previous one; with `barrier`, the host blocks on every run before dispatching the next,
    /// else it blocks once at the end of the step.
    fn tpu_loop(barrier: bool) -> xlens_xplane::Space {
        use xlens_xplane::{SpaceBuilder, names};
        const US: i64 = 1_000_000;
        let mut b = SpaceBuilder::default();
        {
            let mut host = b.plane(1, names::plane::HOST_CPU);
            let train = host.event_metadata("train");
            let dispatch = host.event_metadata("PjitFunction(layer)");
            let sync = host.event_metadata("$api.py:2479 block_until_ready");
            let step_num = host.stat_metadata(names::stat::STEP_NUM);
            let root = host.stat_metadata(names::stat::IS_ROOT);
            let mut python = host.line(1, "python", 0);
            for s in 0..6i64 {
                let t0 = s * 1000 * US;
                python.event(train, t0, 900 * US).stat(step_num, s).stat(root, 1i64);
                for k in 0..5 {
                    python.event(dispatch, t0 + k * 180 * US, 10 * US);
                    if barrier {
                        python.event(sync, t0 + k * 180 * US + 12 * US, 128 * US);
                    }
                }
                if !barrier {
                    python.event(sync, t0 + 820 * US, 70 * US);
                }
            }
        }
        {
            let mut tpu = b.plane(100, "/device:TPU:0");
            let program = tpu.stat_metadata(names::stat::PROGRAM_ID);
            let symbol = tpu.stat_metadata(names::stat::SYMBOL_ID);
            let category = tpu.stat_metadata(names::stat::HLO_CATEGORY);
            let op = tpu.event_metadata_with_display("%fusion.1 = f32[32,256]{1,0} fusion(...)", "fusion.1");
            tpu.metadata_stat(op, program, 1u64);
            tpu.metadata_stat(op, symbol, 1u64);
            tpu.metadata_stat(op, category, "loop fusion");
            let module = tpu.event_metadata("jit_layer(1)");
            let steps: Vec<_> = (0..6).map(|s| tpu.event_metadata(&s.to_string())).collect();
            {
                let mut line = tpu.line(1, names::line::STEPS, 0);
                for (s, &m) in steps.iter().enumerate() {
                    line.event(m, s as i64 * 1000 * US + 5 * US, 880 * US);
                }
            }
            {
                let mut line = tpu.line(2, names::line::XLA_MODULES, 0);
                for s in 0..6i64 {
                    for k in 0..5 {
                        line.event(module, s * 1000 * US + k * 180 * US + 20 * US, 100 * US);
                    }
                }
            }
            let mut line = tpu.line(3, names::line::XLA_OPS, 0);
            for s in 0..6i64 {
                for k in 0..5 {
                    line.event(op, s * 1000 * US + k * 180 * US + 20 * US, 100 * US);
                }
            }
        }
        xlens_xplane::Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn tpu_runs_come_from_the_xla_modules_line() {
        let scan = |space| {
            let profile = crate::profile::Profile::from_space("synth", space);
            let report = crate::scan::scan(&profile, &crate::config::ScanConfig::only("barrier_in_loop"));
            assert!(report.skipped.is_empty(), "{:?}", report.skipped);
            report.findings
        };
        let findings = scan(tpu_loop(true));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(metric(f, "host syncs per step (median)"), 5.0);
        assert_eq!(metric(f, "program runs per step (median)"), 5.0);
        assert_eq!(metric(f, "run-to-run transitions serialised by a sync"), 100.0);
        // 4 gaps of 80 us in an 880 us device step.
        assert!((0.3199..0.3201).contains(&metric(f, "device idle in serialised gaps per step")), "{f:#?}");
        assert!((36.0..36.5).contains(&metric(f, "device idle in serialised gaps")), "{f:#?}");
        // Same device timeline, one sync at the end of the step: not serialised by the host.
        assert!(scan(tpu_loop(false)).is_empty());
    }

    #[test]
    fn one_sync_per_step_is_not_a_barrier_in_the_loop() {
        for dir in [
            "real/barrier_in_loop_baseline",
            "corpus/clean",
            "corpus/host_callback",
            "real/debug_print",
            "real/input_starvation",
            "real/profile_during_warmup",
        ] {
            assert!(run_on("barrier_in_loop", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
