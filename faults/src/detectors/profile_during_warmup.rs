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
    title: "The profile captured warm-up: the first step compiles",
    severity: Severity::P1,
    needs: &[Need::HostTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "A first profiled step that is many times slower than the others and contains compilation or \
                  autotuning (backend_compile_and_load, *Client::Compile, XlaCompile, autotuner events): the \
                  profile was started before warm-up finished. Compilations in later steps, or one function \
                  compiled under several programs, are `recompilation` findings instead.",
        why: "The warm-up step measures JAX tracing, XLA compilation and autotuning, not the training step: it \
              inflates the mean step time and every per-step average (XProf's overview hides it only when there \
              are more than five steps, by dropping the first and last), fills the trace buffer with compiler \
              events, and leaves fewer steady-state steps to analyse.",
        evidence: "The first step's time, the median of the other steps and their ratio; the compile and autotune \
                   events inside the first step with the compile time (overlapping events on several threads \
                   counted once); the host events recorded in the first step against the median of the others \
                   (Python tracing); the longest compile events on the timeline.",
        thresholds: "Reported when the first step is at least `profile_during_warmup.min_first_step_factor` \
                     (default 3) times the median of the other steps and compile/autotune events inside it cover \
                     at least `profile_during_warmup.min_compile_share` (default 0.1) of its excess over that \
                     median; needs two steps or more. On TPU the steps are device steps, which exclude host \
                     compile time, so it fires there only when the first device step itself is slow. The impact \
                     is the first step's excess over the median spread over all steps: P0 from 20 % of the mean \
                     step, P2 under 2 %.",
        fix: "Run one or more warm-up steps before starting the profiler (run the compiled step once and wait for \
              its result, or compile ahead of time), then capture a window of steady-state steps; enable the \
              persistent compilation cache to shorten warm-up.",
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

/// Host events of compilation and autotuning (JAX, PjRt clients, XLA CPU/GPU/TPU compilers).
fn is_warmup_event(name: &str) -> bool {
    evidence::is_compile_event(name)
        || name.contains("TpuCompile")
        || name.contains("utotun")
        || name.contains("AlgorithmPicker")
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
        let Some(first) = first_step(steps) else { return Ok(()) };
        if first.factor < config.thresholds.profile_during_warmup.min_first_step_factor {
            return Ok(());
        }
        let Some(warmup) = warmup_compiles(host, first.first) else { return Ok(()) };
        if !compile_explains(&first, &warmup, config) {
            return Ok(());
        }
        let events_per_step = events_per_step(host, steps);
        out.push(describe(self, host, steps, &first, &warmup, &events_per_step));
        Ok(())
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
        // The first step is 682x the others: a factor of 1000 is not reached.
        config.thresholds.profile_during_warmup.min_first_step_factor = 1000.0;
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
}
