//! `profile_during_warmup`: the capture started before the program was warm, so its first step
//! holds tracing, compilation or autotuning and dwarfs the steady-state steps.

use xlens_roofline::Span;
use xlens_xplane::{Event, Picos};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ProfileDuringWarmup;

const META: DetectorMeta = DetectorMeta {
    id: "profile_during_warmup",
    title: "The profile captured warm-up, not steady-state steps",
    severity: Severity::P1,
    needs: &[Need::HostTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "A first profiled step that is many times slower than the others and contains compilation or \
                  autotuning (backend_compile_and_load, *Client::Compile, XlaCompile, autotuner events): the \
                  profile was started before warm-up finished. Also, whatever the step count (a capture of one \
                  step), a capture whose start up to the end of its first step is mostly warm-up work: compile \
                  and autotune events, graph construction on the host (a function traced into a graph, \
                  optimised and instantiated: func_graph_from_py_func, tf.function-graph_building, Grappler, \
                  FunctionLibraryRuntime Instantiate, trace_to_jaxpr), and autotuning on the GPUs (the redzone_checker buffer checks of \
                  cuDNN's, cuBLAS's and XLA's algorithm search, from the first to the last, and the FFT kernels \
                  it tries on streams beside the busiest). Compilations in later steps, or one function \
                  compiled under several programs, are `recompilation` findings instead.",
        why: "The warm-up step measures JAX tracing, XLA compilation and autotuning, not the training step: it \
              inflates the mean step time and every per-step average (XProf's overview hides it only when there \
              are more than five steps, by dropping the first and last), fills the trace buffer with compiler \
              events, and leaves fewer steady-state steps to analyse.",
        evidence: "The first step's time, the median of the other steps and their ratio; the compile and autotune \
                   events inside the first step with the compile time (overlapping events on several threads \
                   counted once); the steps right after it that compile too (each graph once, before the steady \
                   steps); the host events recorded in the first step against the median of the others \
                   (Python tracing); the longest compile events on the timeline; for a capture of warm-up work, its share of the \
                   capture up to the end of the first step, the compile, graph-construction and autotuning time \
                   in it, and per GPU the autotuner's buffer checks and FFT kernels.",
        thresholds: "Reported when the first step is at least `profile_during_warmup.min_first_step_factor` \
                     (default 3) times the median of the other steps and compile/autotune events inside it cover \
                     at least `profile_during_warmup.min_compile_share` (default 0.1) of its excess over that \
                     median; needs two steps or more. Or, with any number of steps, when warm-up work covers at \
                     least `profile_during_warmup.min_warmup_share` (default 0.3) of the capture up to the end of \
                     its first step (its impact: that work spread over all steps). On TPU the steps are device steps, which exclude host \
                     compile time, so it fires there only when the first device step itself is slow. The impact \
                     is the first step's excess over the median spread over all steps: P0 from 20 % of the mean \
                     step, P2 under 2 %.",
        fix: "Capture later steps: start the profiler once the first steps have run (they trace and compile the \
              step, build its graph and autotune its kernels) and profile a short window of steady-state steps; a \
              persistent compilation or autotuning cache shortens warm-up itself.",
        fix_lines: FixLines {
            jax: "call the jitted step once and `jax.block_until_ready` its result (or compile ahead with \
                  `jax.jit(f).lower(...).compile()`), then trace steps N..N+k with \
                  `jax.profiler.start_trace`/`stop_trace` or `jax.profiler.trace`; the persistent cache is \
                  `jax_compilation_cache_dir`.",
            tensorflow: "profile later batches: Keras's `TensorBoard(profile_batch=(10, 15))` callback, or \
                         `tf.profiler.experimental.start`/`stop` around steps N..N+k once the first steps have built \
                         the graph and autotuned cuDNN.",
            pytorch_xla: "run a few steps (every input shape once) before `xp.start_trace`/`xp.trace_detached` \
                          (`torch_xla.debug.profiler`), and keep compiled graphs across runs with \
                          `torch_xla.runtime.initialize_cache(path)`.",
        },
    },
};

/// Host events of compilation and autotuning (JAX, PjRt clients, XLA CPU/GPU/TPU compilers,
/// TensorFlow's XLA JIT).
fn is_warmup_event(name: &str) -> bool {
    evidence::is_compile_event(name)
        || name.contains("TpuCompile")
        || name.contains("XlaCompile")
        || name.contains("utotun")
        || name.contains("AlgorithmPicker")
}

/// Host events of graph construction: a function traced into a graph and the graph built,
/// optimised and instantiated for its executor (TensorFlow's `func_graph_from_py_func`,
/// `tf.function-graph_building` (TensorFlow 2.x tracing a `tf.function`, e.g. Keras's train
/// function on its first call), Grappler, `FunctionLibraryRuntime::Instantiate`,
/// `RemoteCall: Instantiate: …`; JAX's
/// `trace_to_jaxpr`, its lowering to MLIR). `InstantiatedCapturedFunction` (a `tf.data`
/// function running) is not one.
fn is_graph_build_event(name: &str) -> bool {
    const PARTS: [&str; 10] = [
        "func_graph_from_py_func",
        "graph_building",
        "FuncGraph",
        "Grappler",
        "MetaOptimizer",
        "GraphOptimiz",
        "OptimizeGraph",
        "ConvertGraphDefToGraph",
        "trace_to_jaxpr",
        "lower_jaxpr_to",
    ];
    PARTS.iter().any(|p| name.contains(p))
        || name.match_indices("Instantiate").any(|(i, m)| !name[i + m.len()..].starts_with('d'))
}

/// GPU kernels of autotuning: the buffer checks XLA's and cuDNN's algorithm search launch after
/// each candidate (`redzone_checker`).
fn is_autotune_kernel(name: &str) -> bool {
    name.contains("redzone")
}

/// FFT kernels: cuDNN's FFT convolution algorithms, which the autotuner tries on streams of their
/// own.
fn is_fft_kernel(name: &str) -> bool {
    name.to_ascii_lowercase().contains("fft")
}

fn median(mut v: Vec<Picos>) -> Picos {
    v.sort();
    if v.is_empty() {
        return Picos::ZERO;
    }
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) { Picos((v[mid - 1].0 + v[mid].0) / 2) } else { v[mid] }
}

impl Detector for ProfileDuringWarmup {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let steps = host.steps().map_err(Skip::because)?;
        let t = &config.thresholds.profile_during_warmup;
        // A first step many times the others, explained by its compilations.
        if let Some(first) = first_step(steps)
            && first.factor >= t.min_first_step_factor
            && let Some(warmup) = warmup_compiles(host, first.first)
            && compile_explains(&first, &warmup, config)
        {
            let events_per_step = events_per_step(host, steps);
            let mut finding = describe(self, host, steps, &first, &warmup, &events_per_step);
            finding.evidence.extend(later_warmup_steps(host, steps));
            let work = warmup_work(host, first.first);
            finding.evidence.extend(work.autotune.iter().map(GpuAutotune::evidence));
            out.push(finding);
            return Ok(());
        }
        // Whatever the step count (a capture of one Keras step): warm-up work (compiling,
        // building graphs, autotuning kernels) covering much of the capture up to the end of the
        // first step.
        let Some(first) = steps.steps.first() else { return Ok(()) };
        let work = warmup_work(host, first);
        if work.window.0 > 0
            && !work.spans.is_empty()
            && work.time.0 as f64 >= t.min_warmup_share * work.window.0 as f64
        {
            out.push(describe_work(self, host, steps, first, &work));
        }
        Ok(())
    }
}

/// Autotuning seen on one GPU inside the warm-up window.
struct GpuAutotune {
    /// The GPU's plane name.
    gpu: String,
    /// `redzone_checker` launches, their time, and the span from the first to the last.
    checks: usize,
    check_time: Picos,
    span: Span,
    /// FFT kernels on streams other than the GPU's busiest, and their time.
    fft: usize,
    fft_time: Picos,
    fft_streams: usize,
}

impl GpuAutotune {
    fn evidence(&self) -> Evidence {
        let mut text = format!(
            "{}: {} autotuning buffer check(s) (redzone_checker, {:.3} ms) from {:.3} ms to {:.3} ms",
            self.gpu,
            self.checks,
            self.check_time.as_ms_f64(),
            self.span.start.as_ms_f64(),
            self.span.end.as_ms_f64()
        );
        if self.fft > 0 {
            text.push_str(&format!(
                "; {} FFT kernel(s) ({:.3} ms) on {} stream(s) beside its busiest, the candidates tried",
                self.fft,
                self.fft_time.as_ms_f64(),
                self.fft_streams
            ));
        }
        Evidence::note(text)
    }
}

/// The warm-up work of a capture up to the end of its first step.
struct WarmupWork<'a> {
    /// From the capture's start (or the first step's, if earlier) to the first step's end.
    window: Picos,
    /// Outermost compile/autotune and graph-construction host events per thread, by start.
    compiles: Vec<Event<'a>>,
    graph_builds: Vec<Event<'a>>,
    compile_time: Picos,
    graph_time: Picos,
    autotune: Vec<GpuAutotune>,
    /// The union of all of it inside the window, and its length.
    spans: Vec<Span>,
    time: Picos,
}

/// The outermost events per host thread that `keep` takes and that start inside `[lo, hi)`.
fn host_events_in<'a>(host: &'a HostProfile, lo: Picos, hi: Picos, keep: impl Fn(&str) -> bool) -> Vec<Event<'a>> {
    let mut out = Vec::new();
    let Some(plane) = host.space().host_threads() else { return out };
    let mask = plane.metadata_mask(|m| keep(m.name()));
    if mask.is_empty() {
        return out;
    }
    for line in plane.lines() {
        let mut open_until = Picos(i64::MIN);
        for ev in line.events_where(plane, &mask).map_while(|e| e.ok()) {
            if ev.start() >= hi {
                break;
            }
            if ev.start() < lo || ev.start() < open_until {
                continue;
            }
            open_until = ev.end();
            out.push(ev);
        }
    }
    out.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index()));
    out
}

/// Autotuning kernels on each GPU inside `[lo, hi)`: its `redzone_checker` launches and, where
/// there are some, the FFT kernels on streams other than its busiest.
fn gpu_autotune(host: &HostProfile, lo: Picos, hi: Picos) -> Vec<GpuAutotune> {
    let mut out = Vec::new();
    for plane in host.space().gpus() {
        let checks_mask = plane.metadata_mask(|m| is_autotune_kernel(m.name()));
        if checks_mask.is_empty() {
            continue;
        }
        let streams: Vec<&xlens_xplane::Line> =
            plane.lines().iter().filter(|l| !xlens_xplane::names::line::is_derived(l.id().0, l.name())).collect();
        let busiest =
            streams.iter().map(|l| l.index()).max_by_key(|&i| (plane.lines()[i].event_count(), usize::MAX - i));
        let (mut checks, mut check_time, mut span) = (0usize, Picos::ZERO, None::<Span>);
        for line in &streams {
            for ev in line.events_where(plane, &checks_mask).map_while(|e| e.ok()) {
                if ev.start() < lo || ev.start() >= hi {
                    continue;
                }
                checks += 1;
                check_time += ev.duration();
                let s = span.get_or_insert(Span::new(ev.start(), ev.end()));
                *s = Span::new(s.start.min(ev.start()), s.end.max(ev.end()));
            }
        }
        let Some(span) = span else { continue };
        let fft_mask = plane.metadata_mask(|m| is_fft_kernel(m.name()));
        let (mut fft, mut fft_time, mut fft_streams) = (0usize, Picos::ZERO, 0usize);
        for line in streams.iter().filter(|l| Some(l.index()) != busiest) {
            let before = fft;
            for ev in line.events_where(plane, &fft_mask).map_while(|e| e.ok()) {
                if ev.start() >= lo && ev.start() < hi {
                    fft += 1;
                    fft_time += ev.duration();
                }
            }
            fft_streams += usize::from(fft > before);
        }
        out.push(GpuAutotune { gpu: plane.name().to_owned(), checks, check_time, span, fft, fft_time, fft_streams });
    }
    out
}

/// Reads the warm-up work from the capture's start to the end of the first step.
fn warmup_work<'a>(host: &'a HostProfile, first: &xlens_roofline::Step) -> WarmupWork<'a> {
    let (lo, hi) = (Picos::ZERO.min(first.start), first.end());
    let clip = |e: &Event<'_>| Span::new(e.start().max(lo), e.end().min(hi));
    let total = |spans: &[Span]| -> Picos { spans.iter().map(|s| s.end - s.start).sum() };
    let compiles = host_events_in(host, lo, hi, is_warmup_event);
    let graph_builds = host_events_in(host, lo, hi, |n| is_graph_build_event(n) && !is_warmup_event(n));
    let compile_spans = evidence::union(compiles.iter().map(clip).collect());
    let graph_spans = evidence::union(graph_builds.iter().map(clip).collect());
    let autotune = gpu_autotune(host, lo, hi);
    let mut all: Vec<Span> = compile_spans.iter().chain(&graph_spans).copied().collect();
    all.extend(autotune.iter().map(|a| Span::new(a.span.start.max(lo), a.span.end.min(hi))));
    let spans = evidence::union(all.into_iter().filter(|s| s.end > s.start).collect());
    WarmupWork {
        window: hi.saturating_sub(lo),
        compile_time: total(&compile_spans),
        graph_time: total(&graph_spans),
        time: total(&spans),
        compiles,
        graph_builds,
        autotune,
        spans,
    }
}

/// The first step against the median of the others.
struct FirstStep<'a> {
    first: &'a xlens_roofline::Step,
    /// The other steps.
    rest: usize,
    rest_median: Picos,
    /// First step over the median of the others.
    factor: f64,
}

/// Measures the first step against the others; `None` without at least two steps.
fn first_step(steps: &xlens_roofline::Steps) -> Option<FirstStep<'_>> {
    let (first, rest) = steps.steps.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let rest_median = median(rest.iter().map(|s| s.duration).collect());
    if rest_median.0 <= 0 {
        return None;
    }
    let factor = first.duration.0 as f64 / rest_median.0 as f64;
    Some(FirstStep { first, rest: rest.len(), rest_median, factor })
}

/// The warm-up (compile) events of the first step, and the time they cover inside it.
struct Warmup<'a> {
    /// Outermost warm-up events per thread, by start.
    events: Vec<Event<'a>>,
    /// Their union inside the step (one span per compilation).
    spans: Vec<Span>,
    compile_time: Picos,
}

/// Steps after the first read for compilations of their own.
const MAX_LATER_WARMUP_STEPS: usize = 8;

/// The steps right after the first that compile too, up to the first that does not (at most
/// [`MAX_LATER_WARMUP_STEPS`]): a program compiles each of its graphs once, and PyTorch/XLA's
/// second step is a second graph (it holds the optimizer state the first step created). `None`
/// when none does, or when every step compiles (that is `recompilation`'s).
fn later_warmup_steps(host: &HostProfile, steps: &xlens_roofline::Steps) -> Option<Evidence> {
    let rest = steps.steps.get(1..)?;
    let mut found: Vec<(&str, Picos)> = Vec::new();
    for step in rest.iter().take(MAX_LATER_WARMUP_STEPS) {
        let Some(w) = warmup_compiles(host, step) else { break };
        found.push((step.name.as_str(), w.compile_time));
    }
    if found.is_empty() || found.len() == rest.len() {
        return None;
    }
    let listed: Vec<String> = found.iter().map(|(name, t)| format!("{name} ({:.1} ms)", t.as_ms_f64())).collect();
    Some(Evidence::note(format!(
        "the next step(s) compile too, each once before the steady steps: {} (warm-up as well, not counted as \
         recompilation)",
        listed.join(", ")
    )))
}

/// Reads the warm-up events that start inside the first step; `None` when there are none.
fn warmup_compiles<'a>(host: &'a HostProfile, first: &xlens_roofline::Step) -> Option<Warmup<'a>> {
    let (lo, hi) = (first.start, first.end());
    // Outermost warm-up events per thread that start inside the first step.
    let mut warmup: Vec<Event<'_>> = Vec::new();
    if let Some(plane) = host.space().host_threads() {
        for line in plane.lines() {
            let mut open_until = Picos(i64::MIN);
            for ev in line.events(plane).map_while(|e| e.ok()) {
                if ev.start() >= hi {
                    break;
                }
                if ev.start() < lo || ev.start() < open_until || !is_warmup_event(ev.name()) {
                    continue;
                }
                open_until = ev.end();
                warmup.push(ev);
            }
        }
    }
    if warmup.is_empty() {
        return None;
    }
    // A JAX-level compile and the client compile it calls run on different threads: events
    // that overlap in time are one compilation.
    warmup.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index()));
    let spans = evidence::union(warmup.iter().map(|e| Span::new(e.start(), e.end().min(hi))).collect());
    let compile_time: Picos = spans.iter().map(|s| s.end - s.start).sum();
    Some(Warmup { events: warmup, spans, compile_time })
}

/// Whether compiling explains enough of the first step's excess; if not, the first step is slow for
/// another reason and a small compile in it is incidental.
fn compile_explains(first: &FirstStep<'_>, warmup: &Warmup<'_>, config: &ScanConfig) -> bool {
    let excess = first.first.duration.saturating_sub(first.rest_median);
    (warmup.compile_time.0 as f64) >= config.thresholds.profile_during_warmup.min_compile_share * excess.0 as f64
}

/// Host events per step: tracing and compiling leave many more in the warm-up step.
fn events_per_step(host: &HostProfile, steps: &xlens_roofline::Steps) -> Vec<usize> {
    // Host events per step: tracing and compiling leave many more in the warm-up step.
    let mut events_per_step = vec![0usize; steps.steps.len()];
    for ev in evidence::host_events(host, |_| true) {
        let at = ev.start();
        let k = steps.steps.partition_point(|s| s.start <= at);
        if k > 0 && at < steps.steps[k - 1].end() {
            events_per_step[k - 1] += 1;
        }
    }
    events_per_step
}

/// The finding: the first step's time, its compilations and host events, and the longest compiles.
fn describe(
    detector: &ProfileDuringWarmup,
    host: &HostProfile,
    steps: &xlens_roofline::Steps,
    f: &FirstStep<'_>,
    w: &Warmup<'_>,
    events_per_step: &[usize],
) -> Finding {
    let (first, rest_median, factor) = (f.first, f.rest_median, f.factor);
    let (spans, compile_time) = (&w.spans, w.compile_time);
    let excess = first.duration.saturating_sub(rest_median);
    let mut others: Vec<usize> = events_per_step[1..].to_vec();
    others.sort_unstable();
    let others_median = others[others.len() / 2];
    let n = steps.steps.len();
    let ms_per_step = excess.as_ms_f64() / n as f64;
    let impact = Impact::of(ms_per_step, host.step_ms());
    let mut evidence = vec![
        Evidence::metric("first_step_time", format!("{} time", first.name), first.duration.as_ms_f64(), "ms"),
        Evidence::metric("other_steps_time_median", "median time of the other steps", rest_median.as_ms_f64(), "ms"),
        Evidence::metric("first_step_factor", "first step over the median of the others", factor, "x"),
        Evidence::metric("first_step_compilations", "compilations in the first step", spans.len() as f64, "count"),
        Evidence::metric("first_step_compile_time", "compile time in the first step", compile_time.as_ms_f64(), "ms"),
        Evidence::note(format!(
            "host events recorded in {}: {} (median of the other steps: {others_median})",
            first.name, events_per_step[0]
        )),
    ];
    if steps.steps.len() > 5 && steps.source == xlens_roofline::StepSource::HostMarkers {
        evidence.push(Evidence::note(
            "XProf's overview drops the first and last of more than five host steps, which hides this step \
                 from its average but not from the step-time graph",
        ));
    }
    let mut longest = w.events.clone();
    longest.sort_by_key(|e| (std::cmp::Reverse(e.duration()), e.start(), e.line().index()));
    evidence.extend(longest.iter().take(3).map(|e| evidence::event(host, e)));
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    let what = format!(
        "The first profiled step ({}) takes {:.3} ms, {factor:.0}x the median of the other {} steps ({:.3} ms), \
             and spends {:.3} ms compiling: the capture started before warm-up, so step averages include \
             compilation.",
        first.name,
        first.duration.as_ms_f64(),
        f.rest,
        rest_median.as_ms_f64(),
        compile_time.as_ms_f64()
    );
    Finding::new(detector, severity, what, evidence, impact)
}

/// The finding of a capture whose start, up to the end of its first step, is warm-up work.
fn describe_work(
    detector: &ProfileDuringWarmup,
    host: &HostProfile,
    steps: &xlens_roofline::Steps,
    first: &xlens_roofline::Step,
    w: &WarmupWork<'_>,
) -> Finding {
    let n = steps.steps.len().max(1);
    let impact = Impact::of(w.time.as_ms_f64() / n as f64, host.step_ms());
    // TensorFlow's step groups are named by number alone (`0`): "the end of step 0".
    let first_name =
        if first.name.parse::<i64>().is_ok() { format!("step {}", first.name) } else { first.name.clone() };
    let share = 100.0 * w.time.0 as f64 / w.window.0 as f64;
    let checks: usize = w.autotune.iter().map(|a| a.checks).sum();
    let mut evidence = vec![
        Evidence::metric(
            "warmup_window_time",
            format!("capture up to the end of {first_name}"),
            w.window.as_ms_f64(),
            "ms",
        ),
        Evidence::metric(
            "warmup_time",
            "warm-up work in it (compiling, graph building, autotuning)",
            w.time.as_ms_f64(),
            "ms",
        ),
        Evidence::metric("warmup_share", "warm-up share of it", share, "%"),
        Evidence::metric(
            "warmup_compile_time",
            "compile and autotune events on the host",
            w.compile_time.as_ms_f64(),
            "ms",
        ),
        Evidence::metric("graph_build_time", "graph construction on the host", w.graph_time.as_ms_f64(), "ms"),
        Evidence::metric(
            "autotune_kernel_launches",
            "autotuning buffer checks on the GPUs (redzone_checker)",
            checks as f64,
            "count",
        ),
    ];
    evidence.extend(w.autotune.iter().map(GpuAutotune::evidence));
    let mut longest: Vec<&Event<'_>> = w.compiles.iter().chain(&w.graph_builds).collect();
    longest.sort_by_key(|e| (std::cmp::Reverse(e.duration()), e.start(), e.line().index()));
    evidence.extend(longest.iter().take(3).map(|e| evidence::event(host, e)));
    let mut parts = Vec::new();
    if w.compile_time > Picos::ZERO {
        parts.push(format!("compiling {:.3} ms", w.compile_time.as_ms_f64()));
    }
    if w.graph_time > Picos::ZERO {
        parts.push(format!("building graphs {:.3} ms", w.graph_time.as_ms_f64()));
    }
    if checks > 0 {
        parts.push(format!("autotuning kernels ({checks} redzone_checker launches)"));
    }
    let what = format!(
        "The capture holds warm-up: {:.3} ms of the {:.3} ms up to the end of {} ({share:.0} %) go to {}, so its \
         figures measure warm-up, not steady-state steps.",
        w.time.as_ms_f64(),
        w.window.as_ms_f64(),
        first_name,
        parts.join(", ")
    );
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    Finding::new(detector, severity, what, evidence, impact)
}

#[cfg(test)]
mod tests {
    use crate::finding::{Evidence, Severity};
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    #[test]
    fn finds_the_compile_in_the_first_step() {
        let findings = run_on("profile_during_warmup", &testdata("real/profile_during_warmup"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        // Ground truth: step 0 is 252.7 ms, the others 0.36-0.64 ms (682x the median), one
        // compilation (backend_compile_and_load 132.6 ms, PjRtCpuClient::Compile on a pool thread).
        assert!((250.0..256.0).contains(&metric(f, "train 0 time")), "{f:#?}");
        assert!((0.3..0.5).contains(&metric(f, "median time of the other steps")), "{f:#?}");
        assert!(metric(f, "first step over the median of the others") > 300.0);
        assert_eq!(metric(f, "compilations in the first step"), 1.0);
        assert!((130.0..140.0).contains(&metric(f, "compile time in the first step")), "{f:#?}");
        assert!(
            f.evidence.iter().any(|e| matches!(e, Evidence::Event { name, duration_us, .. }
                if name == "backend_compile_and_load" && *duration_us > 130_000.0)),
            "{f:#?}"
        );
        assert!(f.evidence.iter().any(|e| e.to_string().contains("XProf's overview drops")), "{f:#?}");
        // Tracing and compiling record tens of thousands of host events in step 0 (61141 Python
        // tracer events alone), against a few dozen in the others.
        let events = f
            .evidence
            .iter()
            .find_map(|e| e.to_string().strip_prefix("host events recorded in train 0: ").map(str::to_owned));
        let events: usize = events.and_then(|s| s.split(' ').next()?.parse().ok()).expect("event count");
        assert!(events > 60_000, "{events}");
        // The excess (~252 ms) over 6 steps is almost the whole mean step (42.5 ms).
        assert!((41.0..43.0).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P0);
    }

    #[test]
    fn thresholds_are_read_from_the_config() {
        let profile = || {
            let session = xlens_testkit::open_session(testdata("real/profile_during_warmup")).unwrap();
            crate::profile::Profile::from_session(session)
        };
        let run = |config: &crate::config::ScanConfig| crate::scan::scan(&profile(), config).findings.len();
        let mut config = crate::config::ScanConfig::only("profile_during_warmup");
        assert_eq!(run(&config), 1);
        // The first step is 682x the others: a factor of 1000 is not reached, but compiling and
        // tracing still cover half of the capture up to the end of train 0.
        config.thresholds.profile_during_warmup.min_first_step_factor = 1000.0;
        assert_eq!(run(&config), 1);
        config.thresholds.profile_during_warmup.min_warmup_share = 0.9;
        assert_eq!(run(&config), 0);
        // Compilation covers about half of the first step's excess (tracing and lowering the rest).
        config.thresholds.profile_during_warmup.min_first_step_factor = 3.0;
        config.thresholds.profile_during_warmup.min_compile_share = 0.9;
        assert_eq!(run(&config), 0);
    }

    #[test]
    fn later_recompilations_and_clean_profiles_are_not_warmup() {
        // corpus/recompilation compiles in step 5, after a normal first step: that is `recompilation`.
        for dir in ["corpus/recompilation", "corpus/clean", "real/barrier_in_loop", "real/input_starvation"] {
            assert!(run_on("profile_during_warmup", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    #[test]
    fn names_graph_construction_and_autotuning() {
        use super::{is_autotune_kernel, is_fft_kernel, is_graph_build_event};
        for name in [
            "RemoteCall: Instantiate: __inference__next_func_331 on /job:worker/replica:0/task:0",
            "FunctionLibraryRuntime::Instantiate",
            "ProcessFunctionLibraryRuntime::InstantiateMultiDevice",
            "$func_graph.py:1000 func_graph_from_py_func",
            "Grappler",
            "$partial_eval.py:2300 trace_to_jaxpr_dynamic",
        ] {
            assert!(is_graph_build_event(name), "{name}");
        }
        for name in ["InstantiatedCapturedFunction::RunWithBorrowedArgs", "ExecutorState::Process", "FunctionRun"] {
            assert!(!is_graph_build_event(name), "{name}");
        }
        assert!(is_autotune_kernel("redzone_checker"));
        assert!(is_fft_kernel("void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int)"));
        assert!(!is_fft_kernel("volta_sgemm_128x64_nn"));
    }

    /// `gpu_healthy` with its first step autotuning: candidate FFT kernels on a second stream,
    /// each followed by a `redzone_checker` buffer check, before the program's kernels.
    fn autotuning_capture(steps: u32) -> Vec<crate::finding::Finding> {
        use xlens_testkit::gpu::{KernelSpec, LaunchDims, gpu_fixture, gpu_profile};
        let mut spec = gpu_fixture("gpu_healthy").unwrap();
        let main = spec.program.kernels[0].stream;
        let step: i64 = spec.program.kernels.iter().map(|k| k.duration_ps + k.gap_before_ps).sum();
        let mut tuning = Vec::new();
        for _ in 0..40 {
            tuning.push(KernelSpec::kernel("fft2d_r2c_32x32", None, main + 1, step / 40, LaunchDims::elementwise(1)));
            tuning.push(KernelSpec::kernel("redzone_checker", None, main, 2_000_000, LaunchDims::elementwise(1)));
        }
        spec.program.kernels.splice(0..0, tuning);
        spec.steps = steps;
        let space = xlens_xplane::Space::parse(gpu_profile(&spec).into()).unwrap();
        let profile = crate::profile::Profile::from_space("synth", space);
        let report = crate::scan::scan(&profile, &crate::config::ScanConfig::only("profile_during_warmup"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        report.findings
    }

    #[test]
    fn finds_gpu_autotuning_in_a_one_step_capture() {
        // One step, half of it autotuning: there is no other step to compare it with, and the
        // autotuner's kernels say what it is.
        let findings = autotuning_capture(1);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(metric(f, "autotuning buffer checks on the GPUs (redzone_checker)"), 40.0);
        let share = metric(f, "warm-up share of it");
        assert!((30.0..80.0).contains(&share), "{share} {f:#?}");
        assert!(
            f.evidence.iter().any(|e| e.to_string().contains("40 FFT kernel(s)")
                && e.to_string().contains("on 1 stream(s) beside its busiest")),
            "{f:#?}"
        );
        assert!(f.what.contains("autotuning kernels (40 redzone_checker launches)"), "{}", f.what);
        assert!(f.fix.contains("later steps"), "{}", f.fix);
        assert_eq!(f.severity, Severity::P0, "the whole capture is one warm-up step");
    }

    #[test]
    fn steady_gpu_captures_are_not_warmup() {
        // Real steady-state GPU captures (JAX on an H200, TensorFlow on V100s) and a healthy
        // fixture: no autotuning, no graph building worth a share of the first step.
        for dir in ["gpu/gpu_healthy", "h200/h200_train_bf16", "h200/h200_host_offload", "field/tf_v100_multiworker"] {
            assert!(run_on("profile_during_warmup", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    /// A host capture of `steps` marked steps of 10 ms, the first holding `build_ms` of graph
    /// construction (a TensorFlow function instantiated for its executor) on another thread.
    fn graph_building_capture(steps: i64, build_ms: i64) -> Vec<crate::finding::Finding> {
        use xlens_xplane::{SpaceBuilder, names};
        let ms = 1_000_000_000i64;
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, names::plane::HOST_CPU);
            let root = plane.stat_metadata(names::stat::IS_ROOT);
            let step_num = plane.stat_metadata(names::stat::STEP_NUM);
            let step = plane.event_metadata("train");
            let build = plane.event_metadata("FunctionLibraryRuntime::Instantiate");
            let run = plane.event_metadata("ExecutorState::Process");
            {
                let mut line = plane.line(1, "python3", 0);
                for i in 0..steps {
                    line.event(step, i * 10 * ms, 10 * ms).stat(root, 1i64).stat(step_num, i);
                }
            }
            let mut line = plane.line(2, "tf_executor", 0);
            line.event(build, ms / 10, build_ms * ms);
            for i in 0..steps {
                line.event(run, i * 10 * ms + 9 * ms, ms / 2);
            }
        }
        let space = xlens_xplane::Space::parse(b.finish().into()).unwrap();
        let profile = crate::profile::Profile::from_space("synth", space);
        let report = crate::scan::scan(&profile, &crate::config::ScanConfig::only("profile_during_warmup"));
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        report.findings
    }

    #[test]
    fn finds_a_first_step_dominated_by_graph_construction() {
        // One step of 10 ms, 8 ms of it instantiating the step's function graph.
        let findings = graph_building_capture(1, 8);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!((7.9..8.1).contains(&metric(f, "graph construction on the host")), "{f:#?}");
        assert!((79.0..81.0).contains(&metric(f, "warm-up share of it")), "{f:#?}");
        assert!(f.what.contains("building graphs 8.000 ms"), "{}", f.what);
        // A function instantiated in 1 ms of a 10 ms first step is no warm-up capture.
        assert!(graph_building_capture(1, 1).is_empty());
        assert!(graph_building_capture(5, 1).is_empty());
    }

    #[test]
    fn finds_keras_tracing_its_train_function_in_a_real_cpu_capture() {
        // TensorFlow 2.21 / Keras 3 on CPU, the first two steps of `fit`: step 0 (4.49 s) traces
        // `multi_step_on_iterator` into a graph (`tf.function-graph_building`, 3.1 s), step 1
        // takes 123 ms.
        let findings = run_on("profile_during_warmup", &testdata("field/tf_cpu_keras_warmup"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(metric(&findings[0], "graph construction on the host") > 3000.0, "{:#?}", findings[0]);
        // The steady-state captures of the same program hold no tracing.
        for dir in ["field/tf_cpu_keras_steady", "field/tf_cpu_keras_input_bound", "field/tf_cpu_keras_xla"] {
            assert!(run_on("profile_during_warmup", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
