//! `host_callback_stall`: host callbacks inside the compiled step (`jax.debug.print`,
//! `io_callback`, `pure_callback`, host send/recv) that make the device wait for the host.

use std::collections::BTreeMap;

use xlens_hlo::{InstrId, Module, Opcode};
use xlens_roofline::Span;
use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::{self, OpSpan};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct HostCallbackStall;

const META: DetectorMeta = DetectorMeta {
    id: "host_callback_stall",
    title: "Host callbacks stall the step",
    severity: Severity::P1,
    needs: &[Need::OpTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "Host callbacks executed inside the step: custom-calls to a Python callback target \
                  (`xla_ffi_python_cpu_callback`, `xla_python_gpu_callback`, ...: `jax.debug.print`, \
                  `jax.debug.callback`, `io_callback`, `pure_callback`), host send/recv transfers, and ops in \
                  XProf's `host send`/`host recv`/`host callback` categories, timed from their op events; \
                  `HostCallbackRequest`/`CompleteCallbacks` host events are reported alongside.",
        why: "A callback is a device→host→device round trip inside the program: the device copies the operands \
              out, the host wakes a Python thread (taking the GIL), runs the function and copies results back, \
              and everything ordered after the callback waits. A debug print left in the training step costs \
              this every step.",
        evidence: "The callback instructions with their JAX name scope and source line (from the HLO); per \
                   instruction its executions per step and time per step; the callback time per step and the \
                   part of it during which no other op ran (the stall); the longest callback events on the \
                   timeline.",
        thresholds: "Reported when the stall (callback time with no other op running, per core) is at least \
                     `host_callback_stall.min_pct_of_step` (default 2) % of the mean step time. P0 from 20 % of \
                     the step.",
        fix: "Take host callbacks out of the step: remove debug prints and callbacks of device values from the \
              training step (guard them with a Python flag so they are not traced in production), return the values \
              to log as outputs of the step and log them every N steps, and replace host-side work inside the step \
              by device code or move it between steps.",
        fix_lines: FixLines {
            jax: "remove `jax.debug.print`/`jax.debug.callback` from the step, log outside `jit`, and replace \
                  `io_callback`/`pure_callback` work with jittable code; unordered callbacks (`ordered=False`) at \
                  least let independent work overlap.",
            tensorflow: "remove `tf.print` and `tf.py_function`/`tf.numpy_function` from the `tf.function` step \
                         (each is a host round trip), or move them into the `tf.data` pipeline.",
            pytorch_xla: "remove `print(t)`, `.item()` and `.cpu()` of XLA tensors from the step, and log through \
                          `xm.add_step_closure` so it runs after the graph executes.",
        },
    },
};

/// Custom-call targets that run a host (Python) callback.
fn is_callback_target(target: &str) -> bool {
    target.contains("callback")
}

/// XProf categories of host transfers and callbacks (TPU).
fn is_callback_category(category: &str) -> bool {
    matches!(category, "host send" | "host send-done" | "host recv" | "host recv-done" | "host callback")
}

/// One callback instruction of a module.
struct Callback<'m> {
    module: &'m Module,
    id: InstrId,
}

/// The callback instructions of every module, by (program id, instruction name).
fn callback_instructions(host: &HostProfile) -> BTreeMap<(u64, String), Callback<'_>> {
    let mut out = BTreeMap::new();
    for module in host.modules() {
        let Some(program) = module.program_id() else { continue };
        for instr in module.instructions() {
            let callback = match instr.opcode() {
                Opcode::CustomCall => instr.custom_call_target().is_some_and(is_callback_target),
                Opcode::Send | Opcode::Recv | Opcode::SendDone | Opcode::RecvDone => instr.is_host_transfer(),
                _ => false,
            };
            if callback {
                out.insert((program, instr.name().to_owned()), Callback { module, id: instr.id() });
            }
        }
    }
    out
}

/// Time and executions of one callback op.
#[derive(Default)]
struct Usage {
    time: Picos,
    runs: usize,
    per_step: Vec<usize>,
}

impl Detector for HostCallbackStall {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host)? else { return Ok(()) };
        let Some(score) = score(host, &measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// Per core, the (start, end) spans of some of its ops.
type CoreSpans = BTreeMap<i64, Vec<Span>>;

/// The op spans inside steps, split into callbacks and the rest.
struct Spans<'a> {
    callbacks: CoreSpans,
    others: CoreSpans,
    usage: BTreeMap<(Option<u64>, String), Usage>,
    /// The callback op spans.
    longest: Vec<OpSpan<'a>>,
}

/// What the profile shows: the callbacks run inside steps and the time the device did nothing else.
struct Measured<'a> {
    /// Steps in the profile.
    n: usize,
    instructions: BTreeMap<(u64, String), Callback<'a>>,
    usage: BTreeMap<(Option<u64>, String), Usage>,
    /// The callback op spans, for the timeline.
    longest: Vec<OpSpan<'a>>,
    /// Cores that ran callbacks (at least one).
    cores: f64,
    callback_time: Picos,
    stall: Picos,
}

/// Reads the callback ops inside steps and the stall they cause; `None` without callbacks.
fn measure(host: &HostProfile) -> Result<Option<Measured<'_>>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let n = steps.steps.len();
    if n == 0 {
        return Err(Skip::because("the profile has no step markers"));
    }
    let instructions = callback_instructions(host);
    let Some(ops) = op_spans(host, instructions.is_empty())? else { return Ok(None) };
    let Spans { mut callbacks, mut others, usage, longest } = split_spans(steps, &instructions, ops);
    if usage.is_empty() {
        return Ok(None);
    }
    if host.host_ops().source == xlens_roofline::OpSource::GpuStreams {
        wait_for_the_host(steps, &mut callbacks, &mut others);
    }
    let cores = callbacks.len().max(1) as f64;
    let (callback_time, stall) = stall_of(callbacks, others);
    Ok(Some(Measured { n, instructions, usage, longest, cores, callback_time, stall }))
}

/// The op spans to look at; `None` when none can be a callback.
#[allow(clippy::type_complexity)]
fn op_spans(
    host: &HostProfile,
    no_instructions: bool,
) -> Result<Option<Box<dyn Iterator<Item = OpSpan<'_>> + '_>>, Skip> {
    // On TPU, callbacks are op categories: check the op profile first, and walk the op lines
    // for the callback events only when there are some.
    let ops: Box<dyn Iterator<Item = OpSpan<'_>> + '_> = if host.space().tpu_tensor_cores().is_empty() {
        // Host-run ops have no category: only the HLO's callback instructions can match.
        // They are made one at a time from the shared table; only callbacks are kept.
        if no_instructions {
            return Ok(None);
        }
        Box::new(evidence::host_op_spans(host))
    } else {
        let profile = host.op_profile().map_err(Skip::because)?;
        if !profile.ops.iter().any(|o| is_callback_category(&o.category)) {
            return Ok(None);
        }
        Box::new(evidence::op_spans_where(host, |category, _| is_callback_category(category), |_, _| true).into_iter())
    };
    Ok(Some(ops))
}

/// Splits the op spans inside steps into callbacks (with their usage) and the rest, per core.
fn split_spans<'a>(
    steps: &xlens_roofline::Steps,
    instructions: &BTreeMap<(u64, String), Callback<'_>>,
    ops: impl Iterator<Item = OpSpan<'a>>,
) -> Spans<'a> {
    let n = steps.steps.len();
    let callback_keys: std::collections::HashSet<(u64, &str)> =
        instructions.keys().map(|(p, name)| (*p, name.as_str())).collect();
    let step_of = |at: Picos| {
        let k = steps.steps.partition_point(|s| s.start <= at);
        (k > 0 && at < steps.steps[k - 1].end()).then(|| k - 1)
    };
    let is_callback = |op: &OpSpan<'_>| {
        op.category.as_deref().is_some_and(is_callback_category)
            || op.program_id.is_some_and(|p| callback_keys.contains(&(p, &*op.name)))
    };
    // Per core: callback spans and other op spans, inside steps.
    let mut callbacks: CoreSpans = BTreeMap::new();
    let mut others: CoreSpans = BTreeMap::new();
    let mut usage: BTreeMap<(Option<u64>, String), Usage> = BTreeMap::new();
    let mut longest: Vec<OpSpan<'_>> = Vec::new();
    for op in ops {
        let Some(k) = step_of(op.start) else { continue };
        if is_callback(&op) {
            callbacks.entry(op.core).or_default().push(Span::new(op.start, op.end));
            let u = usage.entry((op.program_id, op.name.to_string())).or_default();
            u.time += op.duration();
            u.runs += 1;
            if u.per_step.is_empty() {
                u.per_step = vec![0; n];
            }
            u.per_step[k] += 1;
            longest.push(op);
        } else {
            others.entry(op.core).or_default().push(Span::new(op.start, op.end));
        }
    }
    Spans { callbacks, others, usage, longest }
}

/// On a GPU the callback's kernel only hands the operands to the host: the stream then waits,
/// idle, until the host function returns. Each callback span is extended to the start of the
/// next other op of its device (or the end of its step), so that wait counts as the callback's.
fn wait_for_the_host(steps: &xlens_roofline::Steps, callbacks: &mut CoreSpans, others: &mut CoreSpans) {
    for (core, spans) in callbacks.iter_mut() {
        let Some(rest) = others.get_mut(core) else { continue };
        rest.sort_unstable();
        for Span { start, end } in spans.iter_mut() {
            let k = steps.steps.partition_point(|s| s.start <= *start);
            let step_end = steps.steps.get(k.wrapping_sub(1)).map_or(*end, |s| s.end());
            let next = rest.partition_point(|s| s.start < *end);
            let until = rest.get(next).map_or(step_end, |s| s.start.min(step_end));
            *end = (*end).max(until);
        }
    }
}

/// The callback time and the stall (callback time with no other op of the core running).
fn stall_of(callbacks: CoreSpans, mut others: CoreSpans) -> (Picos, Picos) {
    let mut callback_time = Picos::ZERO;
    let mut stall = Picos::ZERO;
    for (core, spans) in callbacks {
        let busy = evidence::union(others.remove(&core).unwrap_or_default());
        for Span { start: s, end: e } in evidence::union(spans) {
            callback_time += e - s;
            stall += (e - s).saturating_sub(evidence::covered(&busy, s, e));
        }
    }
    (callback_time, stall)
}

/// The callback time and stall per step, and what the stall costs.
struct Score {
    callback_ms: f64,
    ms_per_step: f64,
    impact: Impact,
}

/// Decides whether the stall is large enough to report.
fn score(host: &HostProfile, m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.host_callback_stall;
    let (cores, n, callback_time, stall) = (m.cores, m.n, m.callback_time, m.stall);
    let callback_ms = callback_time.as_ms_f64() / cores / n as f64;
    let ms_per_step = stall.as_ms_f64() / cores / n as f64;
    let impact = Impact::of(ms_per_step, host.step_ms());
    if impact.pct_of_step < t.min_pct_of_step {
        return None;
    }
    Some(Score { callback_ms, ms_per_step, impact })
}

/// The callbacks, longest in total first.
fn rows(usage: &BTreeMap<(Option<u64>, String), Usage>) -> Vec<(&(Option<u64>, String), &Usage)> {
    let mut rows: Vec<(&(Option<u64>, String), &Usage)> = usage.iter().collect();
    rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then(a.0.cmp(b.0)));
    rows
}

/// The evidence: executions, times, each callback with its instruction, the host events, the longest spans.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, s: &Score) -> Vec<Evidence> {
    let (n, cores, usage, instructions) = (m.n, m.cores, &m.usage, &m.instructions);
    let (callback_ms, ms_per_step, impact) = (s.callback_ms, s.ms_per_step, s.impact);
    let mut executions = vec![0usize; n];
    for u in usage.values() {
        for (k, c) in u.per_step.iter().enumerate() {
            executions[k] += c;
        }
    }
    executions.sort_unstable();
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric(
            "callback_executions_median",
            format!("callback executions {} and core (median)", tb.per()),
            executions[n / 2] as f64 / cores,
            "count",
        ),
        Evidence::metric("callback_time", format!("host callback time {}", tb.per()), callback_ms, "ms"),
        Evidence::metric(
            "stall_time",
            format!("stall {} (callback with no other op running)", tb.per()),
            ms_per_step,
            "ms",
        ),
        Evidence::metric("stall_share", format!("stall share {}", tb.of_the()), impact.pct_of_step, "%"),
    ];
    for ((program, name), u) in &rows(usage) {
        let mut per_step = u.per_step.clone();
        per_step.sort_unstable();
        evidence.push(Evidence::note(format!(
            "{name}: {} execution(s), {} {per} (median), {:.3} ms {per}, {:.3} ms each on average",
            u.runs,
            per_step[per_step.len() / 2],
            u.time.as_ms_f64() / cores / n as f64,
            u.time.as_ms_f64() / u.runs.max(1) as f64,
            per = tb.per(),
        )));
        if let Some(cb) = program.and_then(|p| instructions.get(&(p, name.clone()))) {
            evidence.push(evidence::instruction(cb.module, cb.id));
        }
    }
    // Host-side callback events (TPU runtimes record these).
    let requests: Vec<_> = evidence::host_events(host, |name| {
        name == names::event::HOST_CALLBACK_REQUEST || name == names::event::COMPLETE_CALLBACKS
    })
    .collect();
    if !requests.is_empty() {
        let time: Picos = requests.iter().map(|e| e.duration()).sum();
        evidence.push(Evidence::note(format!(
            "{} HostCallbackRequest/CompleteCallbacks host event(s), {:.3} ms in total",
            requests.len(),
            time.as_ms_f64()
        )));
    }
    let mut longest: Vec<&OpSpan<'_>> = m.longest.iter().collect();
    longest.sort_by(|a, b| b.duration().cmp(&a.duration()).then(a.start.cmp(&b.start)).then(a.name.cmp(&b.name)));
    for op in longest.iter().take(3) {
        evidence.push(evidence::event_parts(host, op.plane, op.line, &op.name, op.start, op.duration()));
    }
    evidence
}

/// The finding: the callbacks and the stall they cause.
fn describe(detector: &HostCallbackStall, host: &HostProfile, m: &Measured<'_>, s: &Score) -> Finding {
    let (callback_ms, ms_per_step, impact) = (s.callback_ms, s.ms_per_step, s.impact);
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    let rows = rows(&m.usage);
    let names: Vec<&str> = rows.iter().map(|((_, name), _)| name.as_str()).collect();
    let what = format!(
        "{} host callback(s) ({}) run inside the step for {callback_ms:.3} ms {}; the device does \
             nothing else for {ms_per_step:.3} ms of it ({:.1} % {}).",
        rows.len(),
        names.join(", "),
        TimeBase::of(host).per(),
        impact.pct_of_step,
        TimeBase::of(host).of_the(),
    );
    Finding::new(detector, severity, what, evidence_of(host, m, s), impact)
}

#[cfg(test)]
mod tests {
    use crate::finding::{Evidence, Finding};
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    fn callback_instructions(f: &Finding) -> Vec<(String, String, Option<String>)> {
        f.evidence
            .iter()
            .filter_map(|e| match e {
                Evidence::Instruction { name, op_name, source, text, .. }
                    if text.contains("xla_ffi_python_cpu_callback") || text.contains("custom-call") =>
                {
                    Some((name.clone(), op_name.clone(), source.clone()))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn finds_the_debug_prints_of_every_layer() {
        let findings = run_on("host_callback_stall", &testdata("real/debug_print"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: 2 debug_print thunks per step, 0.93-1.36 ms per step in all.
        assert_eq!(metric(f, "callback executions per step and core (median)"), 2.0);
        let per_step = metric(f, "host callback time per step");
        assert!((0.8..1.6).contains(&per_step), "{per_step}");
        assert!(metric(f, "stall per step (callback with no other op running)") <= per_step);
        for name in ["debug_print.2", "debug_print.3"] {
            assert!(
                f.evidence.iter().any(|e| e.to_string().starts_with(&format!("{name}: 5 execution(s), 1 per step"))),
                "{f:#?}"
            );
        }
        let instrs = callback_instructions(f);
        assert_eq!(instrs.len(), 2, "{instrs:?}");
        for (_, op_name, source) in &instrs {
            assert!(op_name.ends_with("/debug_print"), "{op_name}");
            assert!(source.as_deref().is_some_and(|s| s.contains("capture_debug_print.py:")), "{source:?}");
        }
    }

    #[test]
    fn finds_the_io_callback_and_the_print() {
        let findings = run_on("host_callback_stall", &testdata("corpus/host_callback"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // The io_callback sleeps 2 ms every step, and nothing else runs meanwhile.
        let stall = metric(f, "stall per step (callback with no other op running)");
        assert!((2.0..4.0).contains(&stall), "{stall}");
        assert!(f.what.contains("io_callback.3") && f.what.contains("debug_print"), "{}", f.what);
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Event { name, duration_us, .. }
                if name == "io_callback.3" && *duration_us >= 2000.0)),
            "{f:#?}"
        );
        let mut sources: Vec<String> = callback_instructions(f).into_iter().filter_map(|(_, _, s)| s).collect();
        sources.sort();
        assert_eq!(sources.len(), 2, "{f:#?}");
        assert!(
            sources[0].ends_with("s03_host_callback.py:35") && sources[1].ends_with("s03_host_callback.py:37"),
            "{sources:?}"
        );
    }

    #[test]
    fn tpu_host_transfers_count_as_callbacks() {
        use xlens_testkit::synth::{Item, OpSpec, Program, SynthSpec, tpu_profile};
        use xlens_xplane::Space;
        let op = |name: &str, opcode: &str, category: &str, us: i64| {
            Item::Op(OpSpec::new(name, opcode, category, 0, 1_000, us * 1_000_000))
        };
        let spec = SynthSpec {
            cores: 2,
            steps: 4,
            jitter: 0.0,
            program: Program {
                items: vec![
                    op("fusion.1", "fusion", "loop fusion", 100),
                    op("send.2", "send", "host send", 2),
                    op("recv-done.3", "recv-done", "host recv-done", 40),
                ],
            },
            ..SynthSpec::default()
        };
        let space = Space::parse(tpu_profile(&spec).into()).unwrap();
        let profile = crate::profile::Profile::from_space("synth", space);
        let report = crate::scan::scan(&profile, &crate::config::ScanConfig::only("host_callback_stall"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
        let f = &report.findings[0];
        // 42 us of every 142 us step wait on the host, on each of the two cores.
        assert_eq!(metric(f, "callback executions per step and core (median)"), 2.0);
        assert!((0.041..0.043).contains(&metric(f, "stall per step (callback with no other op running)")), "{f:#?}");
        assert!((28.0..31.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert!(f.what.contains("recv-done.3") && f.what.contains("send.2"), "{}", f.what);
    }

    #[test]
    fn programs_without_callbacks_are_clean() {
        for dir in
            ["corpus/clean", "real/input_starvation", "real/barrier_in_loop", "corpus/sharded_collectives_baseline"]
        {
            assert!(run_on("host_callback_stall", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
