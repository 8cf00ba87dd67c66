//! `recompilation`: XLA compiles inside the measured steps, usually because a jitted function saw
//! new shapes (or static arguments) and was retraced.

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use xlens_roofline::StepSource;
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Recompilation;

const META: DetectorMeta = DetectorMeta {
    id: "recompilation",
    title: "XLA recompiles inside the training loop",
    severity: Severity::P1,
    needs: &[Need::HostTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "XLA compilations inside the profiled steps after the first step or between two steps (a retrace \
                  on the host while the device waits; device step markers leave the gap out), or one jitted \
                  function executing under several compiled programs (the same module name with several program \
                  ids). Each is enough evidence on its own.",
        why: "A compilation takes from milliseconds to minutes of host time during which the device idles; \
              a function that keeps seeing new shapes recompiles again and again, and every variant also holds \
              its own executable in memory.",
        evidence: "The compile events (backend_compile_and_load, *Client::Compile) inside and between steps with \
                   their step and duration; the total compile time; the modules that ran under several program ids.",
        thresholds: "Compilations shorter than `recompilation.min_compile_ms` (default 1 ms) are ignored. A compile \
                     in the first step alone with a single program is left to `profile_during_warmup`, and so are \
                     the compiles of the capture's leading steps when each of them compiles and a step that compiles \
                     nothing follows (warm-up: every graph compiled once, as PyTorch/XLA's first two steps do). Without step \
                     markers (module executions as the time base) a compile counts only when the function executed \
                     next had already run. Severity P1, P0 when the compile time per step is at least 20 % of the \
                     step, P2 when only several programs are seen and no compile falls in the window to price.",
        fix: "Give the compiled step stable shapes: pad or bucket variable dimensions (e.g. pad the last batch to \
              the batch size), keep the arguments that change the program (static arguments, Python values) \
              constant, and run every shape once before measuring.",
        fix_lines: FixLines {
            jax: "mark shape-determining arguments static in `jax.jit` and keep them constant; \
                  `jax.config.update('jax_log_compiles', True)` names the function and the cause.",
            tensorflow: "give the `tf.function` an `input_signature` with `None` for the variable dimensions (or \
                         `reduce_retracing=True`), pass tensors rather than Python numbers, and batch with \
                         `drop_remainder=True`; TensorFlow's retracing warning names the function.",
            pytorch_xla: "pad inputs to a few fixed shapes and keep Python scalars out of the traced graph; \
                          `PT_XLA_DEBUG_LEVEL=2` (or the `CompileTime` count of `torch_xla.debug.metrics`) says what \
                          made each compilation.",
        },
    },
};

impl Detector for Recompilation {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let measured = measure(host, config)?;
        let Some(score) = score(host, &measured) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// A compile event and the index of the step it falls in (or precedes).
type Placed<'a> = (usize, xlens_xplane::Event<'a>);

/// What the profile shows: the compilations inside and between steps, and the functions that ran
/// under several programs.
struct Measured<'a> {
    steps: &'a xlens_roofline::Steps,
    in_steps: Vec<Placed<'a>>,
    between: Vec<Placed<'a>>,
    /// Modules that ran under several programs, with the program ids.
    multi: Vec<(String, BTreeSet<u64>)>,
    /// The warm-up steps ([`warmup_steps`]), whose compilations are not counted.
    warmup: BTreeSet<usize>,
    /// How many compilations fell in them.
    warmup_compiles: usize,
}

/// Reads the compile events, places them among the steps, and finds modules run as several programs.
fn measure<'a>(host: &'a HostProfile, config: &ScanConfig) -> Result<Measured<'a>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let compiles = compile_events(host, config.thresholds.recompilation.min_compile_ms);
    let (mut in_steps, mut between) = place(steps, compiles);
    let warmup = warmup_steps(steps, in_steps.iter().chain(&between).map(|(s, _)| *s));
    let warmup_compiles = in_steps.iter().chain(&between).filter(|(s, _)| warmup.contains(s)).count();
    in_steps.retain(|(s, _)| !warmup.contains(s));
    between.retain(|(s, _)| !warmup.contains(s));
    let multi = programs_by_module(host).into_iter().filter(|(_, p)| p.len() > 1).collect();
    Ok(Measured { steps, in_steps, between, multi, warmup, warmup_compiles })
}

/// The warm-up steps: the leading steps of the capture (in time order) that each compile (inside
/// them or in the gap before them), when a step without a compilation follows them. A program's
/// first steps compile every graph it has once (PyTorch/XLA compiles a second graph in step 1,
/// once the optimizer's state exists; a JAX step meets each new input shape once) and later
/// steps reuse them: that is warm-up, `profile_during_warmup`'s to report. Compilations after a
/// step that compiled nothing, or in every step of the capture, are recompilations.
/// `compiling` lists the steps that compile (by index, repeats allowed).
fn warmup_steps(steps: &xlens_roofline::Steps, compiling: impl IntoIterator<Item = usize>) -> BTreeSet<usize> {
    let compiling: BTreeSet<usize> = compiling.into_iter().collect();
    let mut order: Vec<usize> = (0..steps.steps.len()).collect();
    order.sort_by_key(|&i| (steps.steps[i].start, i));
    let run = order.iter().take_while(|i| compiling.contains(i)).count();
    if run < order.len() { order[..run].iter().copied().collect() } else { BTreeSet::new() }
}

/// The compilations on the host threads of at least `min_compile_ms`, one per compilation.
fn compile_events<'h>(host: &'h HostProfile, min_compile_ms: f64) -> Vec<xlens_xplane::Event<'h>> {
    // Outermost compile events per thread (a client compile nests inside the JAX one), threads
    // in parallel. The threshold applies after: a short compile still hides the ones nested in
    // it.
    let mut compiles = Vec::new();
    if let Some(plane) = host.space().host_threads() {
        let compile = plane.metadata_mask(|m| evidence::is_compile_event(m.name()));
        let lines: Vec<&xlens_xplane::Line> = plane.lines().iter().filter(|_| !compile.is_empty()).collect();
        // On a thread a walk indexed (the step-marker threads: the Python tracer's holds a
        // million events), only the blocks of events that hold compile events are read.
        let per_line: Vec<Vec<xlens_xplane::Event<'h>>> = lines
            .into_par_iter()
            .with_max_len(1)
            .map(|line| {
                // An unreadable event ends its thread: the compilations before it.
                outermost(line.events_where(plane, &compile).map_while(Result::ok))
            })
            .collect();
        compiles.extend(per_line.into_iter().flatten().filter(|ev| ev.duration().as_ms_f64() >= min_compile_ms));
    }
    // The JAX-level compile and the client compile it calls run on different threads: events
    // that overlap in time are one compilation (the longest stands for it).
    compiles.sort_by_key(|e| (e.start(), std::cmp::Reverse(e.duration()), e.line().index()));
    let mut merged: Vec<xlens_xplane::Event<'_>> = Vec::new();
    for ev in compiles {
        match merged.last_mut() {
            Some(last) if ev.start() < last.end() => {
                if ev.end() > last.end() {
                    *last = ev;
                }
            }
            _ => merged.push(ev),
        }
    }
    merged
}

/// The outermost of a thread's compile events (in line order): each one kept starts at or
/// after the end of the last one kept.
fn outermost<'a>(compiles: impl Iterator<Item = xlens_xplane::Event<'a>>) -> Vec<xlens_xplane::Event<'a>> {
    let mut open_until: Option<Picos> = None;
    compiles
        .filter(|ev| {
            let outside = open_until.is_none_or(|end| ev.start() >= end);
            if outside {
                open_until = Some(ev.end());
            }
            outside
        })
        .collect()
}

/// The compilations inside a step and those between two steps (with the step that follows).
#[allow(clippy::type_complexity)]
fn place<'a>(
    steps: &xlens_roofline::Steps,
    compiles: Vec<xlens_xplane::Event<'a>>,
) -> (Vec<Placed<'a>>, Vec<Placed<'a>>) {
    let step_of = |at: Picos| steps.steps.iter().position(|s| s.start <= at && at < s.end());
    // Compiles inside a step, and compiles between two steps (a retrace on the host while the
    // device waits: the device's step markers leave the gap out).
    let first_start = steps.steps.iter().map(|s| s.start).min();
    let last_end = steps.steps.iter().map(|s| s.end()).max();
    let mut in_steps: Vec<(usize, xlens_xplane::Event<'_>)> = Vec::new();
    let mut between: Vec<(usize, xlens_xplane::Event<'_>)> = Vec::new();
    // Without step markers the "steps" are executions of whichever functions ran: compiling a
    // function before its first run is normal, so a compile counts only when the function
    // executed next had run before it.
    let by_execution = steps.source == StepSource::ModuleExecutions;
    let function = |name: &str| -> String {
        let name = name.rsplit_once(" #").map_or(name, |(n, _)| n);
        name.rsplit_once('(').map_or(name, |(m, _)| m).to_owned()
    };
    let recompiles = |e: &xlens_xplane::Event<'_>| {
        let Some(next) = steps.steps.iter().filter(|s| s.start >= e.end()).min_by_key(|s| s.start) else {
            return false;
        };
        let f = function(&next.name);
        steps.steps.iter().any(|s| s.start < e.start() && function(&s.name) == f)
    };
    for e in compiles.iter().filter(|e| !by_execution || recompiles(e)) {
        if let Some(s) = step_of(e.start()) {
            in_steps.push((s, *e));
        } else if let (Some(first), Some(last)) = (first_start, last_end)
            && first <= e.start()
            && e.start() < last
        {
            // The step that follows the gap.
            let next = steps.steps.iter().position(|s| s.start >= e.start()).unwrap_or(steps.steps.len() - 1);
            between.push((next, *e));
        }
    }
    (in_steps, between)
}

/// The programs each executed module ran under (op events carry program_id).
fn programs_by_module(host: &HostProfile) -> BTreeMap<String, BTreeSet<u64>> {
    let mut programs_by_module: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    if let Ok(profile) = host.op_profile() {
        for op in &profile.ops {
            if let Some(name) = profile.programs.get(&op.program_id) {
                let module = name.rsplit_once('(').map_or(name.as_str(), |(m, _)| m);
                programs_by_module.entry(module.to_owned()).or_default().insert(op.program_id);
            }
        }
    }
    programs_by_module
}

/// The compilations that count and what they cost.
struct Score<'a> {
    /// The compilations inside and between steps.
    counted: Vec<Placed<'a>>,
    /// Their total time.
    total: Picos,
    impact: Impact,
}

/// Decides whether there is a recompilation to report; `None` when there is none past the first step.
fn score<'a>(host: &HostProfile, m: &Measured<'a>) -> Option<Score<'a>> {
    let (in_steps, between, steps) = (&m.in_steps, &m.between, m.steps);
    let after_first = in_steps.iter().any(|(s, _)| *s > 0);
    if !after_first && between.is_empty() && m.multi.is_empty() {
        return None;
    }
    let counted: Vec<Placed<'a>> = in_steps.iter().chain(between).copied().collect();
    let total: Picos = counted.iter().map(|(_, e)| e.duration()).sum();
    let step_count = steps.steps.len().max(1) as f64;
    let ms_per_step = total.as_ms_f64() / step_count;
    let impact = Impact::of(ms_per_step, host.step_ms());
    Some(Score { counted, total, impact })
}

/// The evidence: the counts, the steps affected, the modules with several programs, the longest compiles.
fn evidence_of(host: &HostProfile, m: &Measured<'_>, s: &Score<'_>) -> Vec<Evidence> {
    let (in_steps, between, steps, multi) = (&m.in_steps, &m.between, m.steps, &m.multi);
    let (counted, total) = (&s.counted, s.total);
    let name_of = |s: usize| steps.steps[s].name.as_str();
    let mut evidence = vec![
        Evidence::metric("compilations_in_steps", "compilations inside steps", in_steps.len() as f64, "count"),
        Evidence::metric("compilations_between_steps", "compilations between steps", between.len() as f64, "count"),
        Evidence::metric("compile_time", "compile time inside and between steps", total.as_ms_f64(), "ms"),
    ];
    if !in_steps.is_empty() {
        let affected: BTreeSet<&str> = in_steps.iter().map(|(s, _)| name_of(*s)).collect();
        evidence.push(Evidence::note(format!("steps with a compilation: {}", evidence::name_list(affected))));
    }
    if !between.is_empty() {
        let before: BTreeSet<&str> = between.iter().map(|(s, _)| name_of(*s)).collect();
        evidence.push(Evidence::note(format!(
            "steps preceded by a compilation on the host: {}",
            evidence::name_list(before)
        )));
    }
    if m.warmup_compiles > 0 {
        let names: Vec<&str> = m.warmup.iter().map(|&s| name_of(s)).collect();
        evidence.push(Evidence::note(format!(
            "not counted: {} compilation(s) in the capture's first steps ({}), each compiling before steady \
             steps ran (warm-up)",
            m.warmup_compiles,
            evidence::name_list(names)
        )));
    }
    for (module, programs) in multi {
        let ids: Vec<String> = programs.iter().map(u64::to_string).collect();
        evidence.push(Evidence::note(format!("{module} ran as {} programs: {}", programs.len(), ids.join(", "))));
    }
    let mut longest: Vec<_> = counted.iter().map(|(_, e)| *e).collect();
    longest.sort_by_key(|e| (std::cmp::Reverse(e.duration()), e.start()));
    evidence.extend(longest.iter().take(5).map(|e| evidence::event(host, e)));
    evidence
}

/// The finding: how many compilations, where, and what they cost.
fn describe(detector: &Recompilation, host: &HostProfile, m: &Measured<'_>, s: &Score<'_>) -> Finding {
    let (in_steps, between, multi) = (&m.in_steps, &m.between, &m.multi);
    let (counted, total) = (&s.counted, s.total);
    // Several programs alone, with no compile in the window to price, is a lead, not a cost.
    // Otherwise P0 from 20 % of the step; a small cost stays at the usual severity (no P2 rule).
    let severity = if counted.is_empty() {
        Severity::P2
    } else {
        Severity::from_impact(s.impact.pct_of_step, META.severity).min(META.severity)
    };
    let mut what = match (in_steps.len(), between.len()) {
        (0, 0) => format!("No recompilation falls among the profiled {}s, but", TimeBase::of(host).unit()),
        (n, 0) => {
            format!("XLA compiled {n} time(s) inside the profiled steps ({:.1} ms in total)", total.as_ms_f64())
        }
        (0, m) => format!(
            "XLA compiled {m} time(s) between device steps ({:.1} ms in total, while the device waited)",
            total.as_ms_f64()
        ),
        (n, m) => format!(
            "XLA compiled {n} time(s) inside and {m} time(s) between the profiled steps ({:.1} ms in total)",
            total.as_ms_f64()
        ),
    };
    if !multi.is_empty() {
        let sep = if counted.is_empty() { " " } else { "; " };
        what.push_str(&format!("{sep}{} function(s) ran under several compiled programs", multi.len()));
    }
    what.push('.');
    Finding::new(detector, severity, what, evidence_of(host, m, s), s.impact)
}

#[cfg(test)]
mod tests {
    use crate::testing::{run_on, testdata};

    /// A long thread read in blocks (once a walk indexed it) gives the compilations one walk
    /// gives: compiles nested in others (a short outer one hides a long inner one) and compiles
    /// that straddle the blocks.
    #[test]
    fn compiles_of_an_indexed_thread_equal_one_walk() {
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let (jax, client, other) = (
                plane.event_metadata("backend_compile_and_load"),
                plane.event_metadata("PjRtCApiClient::CompileAndLoad(jit_f)"),
                plane.event_metadata("$call"),
            );
            let mut line = plane.line(1, "python3", 0);
            let ms = 1_000_000_000i64;
            for k in 0..200_000i64 {
                let s = k * 10 * ms;
                line.event(other, s, 10);
                if k % 3 == 0 {
                    // A 6 ms compile with a 2 ms client compile inside it.
                    line.event(jax, s + 100, 6 * ms);
                    line.event(client, s + 200, 2 * ms);
                }
                if k % 5 == 1 {
                    line.event(client, s + 100, ms);
                }
                line.event(other, s + 300, 10);
            }
        }
        let profile =
            crate::profile::Profile::from_space("synth", xlens_xplane::Space::parse(b.finish().into()).unwrap());
        let host = &profile.hosts()[0];
        let plane = host.space().host_threads().unwrap();
        let compile = plane.metadata_mask(|m| crate::evidence::is_compile_event(m.name()));
        for min_ms in [0.0, 3.0] {
            let want: Vec<(i64, i64)> =
                super::outermost(plane.lines()[0].events(plane).map(Result::unwrap).filter(|e| compile.contains(e)))
                    .into_iter()
                    .filter(|e| e.duration().as_ms_f64() >= min_ms)
                    .map(|e| (e.start().0, e.end().0))
                    .collect();
            assert!(!want.is_empty());
            for threads in [1, 2, 3, 8] {
                if threads == 3 {
                    // The steps' walk indexes the marker threads before the detectors run.
                    let line = &plane.lines()[0];
                    line.event_parts_indexing(plane, 4).into_iter().for_each(|run| run.for_each(drop));
                }
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let got: Vec<(i64, i64)> = pool
                    .install(|| super::compile_events(host, min_ms))
                    .iter()
                    .map(|e| (e.start().0, e.end().0))
                    .collect();
                assert_eq!(got, want, "{threads} workers, {min_ms} ms");
            }
        }
    }

    #[test]
    fn finds_the_retrace_of_a_smaller_last_batch() {
        let findings = run_on("recompilation", &testdata("corpus/recompilation"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.contains("compiled 1 time"), "{}", f.what);
        // Step 5 holds the compile; the profile keeps both jit_train_step programs.
        assert!(f.evidence.iter().any(|e| e.to_string().contains("train 5")), "{f:#?}");
        assert!(f.evidence.iter().any(|e| e.to_string().contains("jit_train_step ran as 2 programs")), "{f:#?}");
        assert!(f.impact.ms_per_step > 10.0);
    }

    /// A retrace compiled on the host between two device steps: the TPU `Steps` line leaves
    /// the 3 s gap out, and the module runs under a second program id afterwards.
    #[test]
    fn finds_a_compile_between_device_steps() {
        let findings = run_on("recompilation", &testdata("tpu/tpu_recompile_between_steps"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("XLA compiled 1 time(s) between device steps (3050.0 ms"), "{}", f.what);
        let text: Vec<String> = f.evidence.iter().map(ToString::to_string).collect();
        assert!(text.iter().any(|t| t == "jit_train_step ran as 2 programs: 1, 2"), "{text:#?}");
        assert!(text.iter().any(|t| t.starts_with("steps preceded by a compilation on the host: ")), "{text:#?}");
        assert_eq!(f.severity, crate::Severity::P0);
        // The real capture: a 345 ms compile between steps 2 and 3 on the CPU.
        let findings = run_on("recompilation", &testdata("real/recompile_between_steps"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(findings[0].what.contains("between device steps"), "{}", findings[0].what);
    }

    /// PyTorch/XLA's first two steps each compile a graph (step 1's holds the optimizer state
    /// step 0 created), and the steps after them compile nothing: warm-up, not recompilation.
    #[test]
    fn compiles_of_the_first_steps_before_steady_ones_are_warmup() {
        assert!(run_on("recompilation", &testdata("field/ptxla_cpu_warmup")).is_empty());
        let warmup = run_on("profile_during_warmup", &testdata("field/ptxla_cpu_warmup"));
        assert_eq!(warmup.len(), 1, "{warmup:#?}");
        let text: Vec<String> = warmup[0].evidence.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.starts_with("the next step(s) compile too") && t.contains("train_step 1")),
            "{text:#?}"
        );
    }

    /// The warm-up run: the leading compiling steps, only when a step without a compile follows.
    #[test]
    fn the_warmup_run_ends_at_the_first_step_that_compiles_nothing() {
        use xlens_roofline::{Step, StepSource, Steps};
        let ms = 1_000_000_000i64;
        let steps = Steps {
            steps: (0..5)
                .map(|i| Step {
                    name: format!("train {i}"),
                    number: i,
                    start: xlens_xplane::Picos(i * 10 * ms),
                    duration: xlens_xplane::Picos(9 * ms),
                    cores: Vec::new(),
                })
                .collect(),
            source: StepSource::HostMarkers,
        };
        let compiling = |list: &[usize]| super::warmup_steps(&steps, list.iter().copied());
        assert_eq!(compiling(&[0, 1]), [0, 1].into());
        assert_eq!(compiling(&[0, 3]), [0].into());
        assert_eq!(compiling(&[2]), Default::default());
        assert_eq!(compiling(&[0, 1, 2, 3, 4]), Default::default(), "every step compiles: recompilation");
    }

    #[test]
    fn clean_and_warmup_profiles_have_no_recompilation() {
        for dir in ["corpus/clean", "real/profile_during_warmup", "corpus/host_callback", "tpu/tpu_recompile_clean"] {
            assert!(run_on("recompilation", &testdata(dir)).is_empty(), "{dir}");
        }
    }
}
