//! `exposed_collective`: the core waits on collectives (all-gather, reduce-scatter, all-reduce,
//! all-to-all, collective-permute) instead of hiding them behind compute.

use std::collections::{BTreeMap, HashMap};

use xlens_hlo::Module;
use xlens_roofline::{OpSource, Span, TimeClass, class_of, is_collective};
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::duration_text;
use crate::evidence::{self, async_phase, covered, union};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ExposedCollective;

const META: DetectorMeta = DetectorMeta {
    id: "exposed_collective",
    title: "Collectives are not overlapped with compute",
    severity: Severity::P1,
    needs: &[Need::OpTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "Collective communication the core waits on. On TPU: async `*-start`/`*-done` windows \
                  (all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute) not covered by \
                  compute on the same core, plus synchronous collectives, which are exposed whole (XProf's \
                  `analyze_async_overlap` semantics: coverage by the other ops of the core; the step \
                  anatomy's exposed collective time). On XLA:CPU captures, whose collectives are synchronous \
                  thunks, the collective time of each device not covered by that device's other thunks. On GPU: \
                  NCCL/RCCL collective kernels (`all-reduce-start`, ... by their HLO op, or `nccl…`/`rccl…` kernel \
                  names) on their stream, not covered by compute kernels on the GPU's other streams.",
        why: "An exposed collective is time the matrix and vector units idle while bytes cross the \
              interconnect. Overlapped well (the latency-hiding scheduler starts the transfer early and runs \
              independent compute meanwhile) the same collective costs almost nothing; a collective the step \
              waits on right after starting it, or a synchronous one, adds its full latency to every step.",
        evidence: "Exposed and hidden collective time per step and the overlap ratio (1 − exposed ÷ window \
                   span); per collective op: its family, windows per step, exposed time, overlap ratio and class \
                   (hidden ≥ `hidden_ratio`, exposed ≤ `exposed_ratio`, else partial), the longest exposed \
                   occurrence on the timeline and the HLO instruction with its JAX source line; on TPU, the \
                   bytes the exposed collectives move ÷ the chip's ICI bandwidth compared with the step's matmul \
                   time (whether overlap could hide them at all); on CPU, the share spent waiting at the \
                   rendezvous for the other devices.",
        thresholds: "Report when exposed collective time is at least `exposed_collective.min_pct_of_step` \
                     (default 5) % of the mean step. Windows covered at least `exposed_collective.hidden_ratio` \
                     (default 0.9) are hidden, at most `exposed_collective.exposed_ratio` (default 0.1) exposed. \
                     Severity P1, P0 from 20 % of the step, P2 under 2 %. On XLA:CPU captures the finding is P2 at \
                     most: CPU collectives are synchronous thunks no scheduling can hide, and virtual devices \
                     sharing the host's cores inflate the rendezvous waits, so the figure describes how \
                     communication-heavy the program is rather than a TPU/GPU overlap fault.",
        fix: "Let the collectives overlap compute: keep them asynchronous and give the scheduler independent work; \
              do not consume a gathered weight immediately (loop over layers so the compiler prefetches the next \
              layer's all-gather); replace synchronous reductions inside the step by collectives the compiler can \
              schedule asynchronously; when the bytes exceed what the matmuls can hide, move fewer bytes: shard \
              along the mesh axis with the fastest links, use reduce-scatter instead of all-reduce plus slice, \
              gather in bf16, or enlarge the per-device batch so compute grows faster than communication. On TPU, \
              production configs enable XLA's async collective passes in `LIBTPU_INIT_ARGS` (e.g. \
              `--xla_tpu_enable_async_collective_fusion=true`, \
              `--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true`, \
              `--xla_tpu_overlap_compute_collective_tc=true`, `--xla_enable_async_all_gather=true`).",
        fix_lines: FixLines {
            jax: "scan over layers (`jax.lax.scan`) so XLA prefetches the next layer's all-gather, and replace \
                  synchronous `psum`s inside `shard_map` by collectives XLA can schedule asynchronously.",
            tensorflow: "under `tf.distribute`, let the gradient all-reduce run in packs while the backward pass \
                         goes on (`tf.distribute.experimental.CommunicationOptions(bytes_per_pack=...)`), and \
                         compile the step with `jit_compile=True` so XLA can schedule the collectives.",
            pytorch_xla: "with SPMD sharding (`torch_xla.distributed.spmd`) or `XlaFullyShardedDataParallel` XLA \
                          schedules the collectives; do not `xm.all_reduce` small tensors one by one (bucket them).",
        },
    },
};

/// One collective op aggregated over its occurrences (all cores or devices, all steps).
#[derive(Debug, Default)]
struct OpTotals {
    family: String,
    occurrences: u64,
    span: Picos,
    exposed: Picos,
    wait: Picos,
    bytes: f64,
    hidden: u64,
    partial: u64,
    exposed_count: u64,
    /// Longest exposed occurrence: (plane, line, start, duration, exposed).
    worst: Option<(String, String, Picos, Picos, Picos)>,
    /// The op runs asynchronously (a start/done pair).
    is_async: bool,
    program_id: Option<u64>,
}

impl OpTotals {
    fn add_occurrence(&mut self, plane: &str, line: &str, start: Picos, end: Picos, exposed: Picos) {
        self.occurrences += 1;
        self.span += end - start;
        self.exposed += exposed;
        if self.worst.as_ref().is_none_or(|w| exposed > w.4) {
            self.worst = Some((plane.to_owned(), line.to_owned(), start, end - start, exposed));
        }
    }

    fn overlap_ratio(&self) -> f64 {
        if self.span.0 > 0 { 1.0 - self.exposed.0 as f64 / self.span.0 as f64 } else { 0.0 }
    }
}

/// The collective family of an op: the base of an async pair, else its category, else its name
/// without the `.N` suffix.
fn family(name: &str, category: &str) -> String {
    if let Some((base, _, _)) = async_phase(name) {
        return base.to_owned();
    }
    if is_collective(category) {
        return category.to_owned();
    }
    name.rsplit_once('.').filter(|(_, n)| n.bytes().all(|b| b.is_ascii_digit())).map_or(name, |(b, _)| b).to_owned()
}

fn class_label(ratio: f64, hidden: f64, exposed: f64) -> &'static str {
    if ratio >= hidden {
        "hidden"
    } else if ratio <= exposed {
        "exposed"
    } else {
        "partial"
    }
}

/// What the TPU or CPU analysis found, before it becomes a finding.
struct Analysis {
    /// Exposed collective time per step (mean over cores or devices).
    exposed_per_step: Picos,
    /// Compute time under open async windows per step.
    hidden_per_step: Picos,
    /// Cores (devices) × steps the totals are over.
    core_steps: f64,
    ops: BTreeMap<String, OpTotals>,
    cpu: bool,
    /// Matmul time per step (TPU), for the hide-ability check.
    matmul_per_step: Option<Picos>,
}

impl Detector for ExposedCollective {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host, config)? else { return Ok(()) };
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score, config));
        Ok(())
    }
}

/// What the profile shows: the step time and the TPU or CPU/GPU analysis of the collectives.
struct Measured {
    step_ms: f64,
    /// A GPU profile (neither TPU nor XLA:CPU).
    gpu: bool,
    analysis: Analysis,
}

/// Reads the collectives; `None` when the TPU step anatomy already shows too little exposed time.
fn measure(host: &HostProfile, config: &ScanConfig) -> Result<Option<Measured>, Skip> {
    let t = &config.thresholds.exposed_collective;
    let step_ms = host.step_ms().ok_or_else(|| Skip::because("the profile has no step times"))?;
    let tpu = !host.space().tpu_tensor_cores().is_empty();
    if tpu {
        // The step anatomy has the total: attribute it to ops only when it is worth a finding.
        let anatomy = host.anatomy().map_err(Skip::because)?;
        let exposed: Picos = anatomy.iter().map(|a| a.collective_exposed).sum();
        let per_step_ms = exposed.as_ms_f64() / anatomy.len().max(1) as f64;
        if Impact::of(per_step_ms, Some(step_ms)).pct_of_step < t.min_pct_of_step {
            return Ok(None);
        }
    }
    let analysis = if tpu { tpu_analysis(host, t)? } else { host_op_analysis(host)? };
    let gpu = !tpu && !analysis.cpu;
    Ok(Some(Measured { step_ms, gpu, analysis }))
}

/// The exposed collective time per step and what it costs.
struct Score {
    exposed_ms: f64,
    impact: Impact,
}

/// Decides whether the exposed collective time is worth a finding.
fn score(m: &Measured, config: &ScanConfig) -> Option<Score> {
    let exposed_ms = m.analysis.exposed_per_step.as_ms_f64();
    let impact = Impact::of(exposed_ms, Some(m.step_ms));
    if impact.pct_of_step < config.thresholds.exposed_collective.min_pct_of_step || m.analysis.ops.is_empty() {
        return None;
    }
    Some(Score { exposed_ms, impact })
}

/// The collectives with exposed time, most exposed first.
fn ranked(ops: &BTreeMap<String, OpTotals>) -> Vec<(&String, &OpTotals)> {
    let mut ranked: Vec<(&String, &OpTotals)> = ops.iter().filter(|(_, o)| o.exposed.0 > 0).collect();
    ranked.sort_by(|a, b| b.1.exposed.cmp(&a.1.exposed).then(a.0.cmp(b.0)));
    ranked
}

/// The evidence: the exposed time, the async windows, the most exposed collectives.
fn evidence_of(
    host: &HostProfile,
    m: &Measured,
    s: &Score,
    ranked: &[(&String, &OpTotals)],
    config: &ScanConfig,
) -> Vec<Evidence> {
    let (analysis, gpu, exposed_ms, impact) = (&m.analysis, m.gpu, s.exposed_ms, s.impact);
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric("exposed_collective_time", format!("exposed collective time {}", tb.per()), exposed_ms, "ms"),
        Evidence::metric(
            "exposed_collective_share",
            format!("exposed collective share {}", tb.of_the()),
            impact.pct_of_step,
            "%",
        ),
    ];
    if !analysis.cpu && !gpu {
        evidence.push(Evidence::metric(
            "hidden_compute_time",
            format!("compute hidden under async collectives {}", tb.per()),
            analysis.hidden_per_step.as_ms_f64(),
            "ms",
        ));
    }
    evidence.extend(window_evidence(analysis, config));
    for (name, op) in ranked.iter().take(5) {
        op_evidence(host, m, name, op, config, &mut evidence);
    }
    evidence
}

/// The async windows' overlap ratio and how many are hidden, partial and exposed.
fn window_evidence(analysis: &Analysis, config: &ScanConfig) -> Vec<Evidence> {
    let t = &config.thresholds.exposed_collective;
    let mut evidence = Vec::new();
    let windows: Vec<&OpTotals> = analysis.ops.values().filter(|o| o.is_async).collect();
    if !windows.is_empty() {
        let span: Picos = windows.iter().map(|o| o.span).sum();
        let exposed: Picos = windows.iter().map(|o| o.exposed).sum();
        let ratio = if span.0 > 0 { 1.0 - exposed.0 as f64 / span.0 as f64 } else { 0.0 };
        evidence.push(Evidence::metric("async_window_overlap_ratio", "async window overlap ratio", ratio, "ratio"));
        let count = |f: fn(&OpTotals) -> u64| windows.iter().map(|o| f(o)).sum::<u64>();
        evidence.push(Evidence::note(format!(
            "async windows: {} hidden, {} partial, {} exposed (hidden ≥ {}, exposed ≤ {} covered by compute)",
            count(|o| o.hidden),
            count(|o| o.partial),
            count(|o| o.exposed_count),
            t.hidden_ratio,
            t.exposed_ratio
        )));
    }
    evidence
}

/// One collective: its exposed time, window and bytes, its instruction and worst occurrence.
fn op_evidence(
    host: &HostProfile,
    m: &Measured,
    name: &str,
    op: &OpTotals,
    config: &ScanConfig,
    evidence: &mut Vec<Evidence>,
) {
    let t = &config.thresholds.exposed_collective;
    let (analysis, gpu) = (&m.analysis, m.gpu);
    let per_step = |t: Picos| t.as_ms_f64() / analysis.core_steps.max(1.0);
    let module = host.main_module();
    let per = op.occurrences as f64 / analysis.core_steps.max(1.0);
    let tb = TimeBase::of(host);
    let mut text = format!(
        "{name} ({}{}): {} exposed {per_step}, {per:.0} {per_step} per {}",
        op.family,
        if op.is_async { ", async" } else { ", synchronous" },
        duration_text(per_step(op.exposed)),
        if analysis.cpu || gpu { "device" } else { "core" },
        per_step = tb.per(),
    );
    if op.is_async {
        let ratio = op.overlap_ratio();
        text.push_str(&format!(
            ", window {} {}, overlap ratio {ratio:.2} ({})",
            duration_text(per_step(op.span)),
            tb.per(),
            class_label(ratio, t.hidden_ratio, t.exposed_ratio)
        ));
    }
    if op.bytes > 0.0 {
        text.push_str(&format!(", {:.2} MB per occurrence", op.bytes / 1e6));
    }
    if analysis.cpu && op.exposed.0 > 0 {
        text.push_str(&format!(
            ", {:.0} % of it waiting at the rendezvous for the other devices",
            100.0 * op.wait.0 as f64 / op.exposed.0 as f64
        ));
    }
    evidence.push(Evidence::note(text));
    let op_module = op.program_id.and_then(|p| host.module(p)).or(module);
    if let Some(m) = op_module
        && let Some(instr) = m.instruction_by_name(name)
    {
        evidence.push(evidence::instruction(m, instr.id()));
        if let Some(groups) = replica_groups_note(m, name) {
            evidence.push(Evidence::note(groups));
        }
    }
    if let Some((plane, line, start, duration, _)) = &op.worst {
        evidence.push(evidence::event_parts(host, plane, line, name, *start, *duration));
    }
}

/// The finding: the exposed time per step, the most exposed collectives, and a fix that fits.
fn describe(detector: &ExposedCollective, host: &HostProfile, m: &Measured, s: &Score, config: &ScanConfig) -> Finding {
    let (analysis, gpu, exposed_ms, impact) = (&m.analysis, m.gpu, s.exposed_ms, s.impact);
    let ranked = ranked(&analysis.ops);
    let mut evidence = evidence_of(host, m, s, &ranked, config);
    let hideable = if analysis.cpu { None } else { hideability(host, analysis, &ranked, &mut evidence) };
    let mut severity = Severity::from_impact(impact.pct_of_step, META.severity);
    if analysis.cpu {
        severity = Severity::P2;
        evidence.push(Evidence::note(
            "XLA:CPU runs collectives as synchronous thunks that no scheduling can overlap, and the virtual \
                 devices of this capture share the host's cores: the figure shows how communication-heavy the \
                 program is, not a TPU/GPU overlap fault (P2 at most)",
        ));
    }
    let top: Vec<String> = ranked.iter().take(3).map(|(n, _)| (*n).clone()).collect();
    let what = format!(
        "{} {} {per} ({:.1} % {of_the}) waiting on collectives not hidden by compute; most exposed: {}.",
        if analysis.cpu {
            "Each device spends"
        } else if gpu {
            "Each GPU spends"
        } else {
            "Each core spends"
        },
        duration_text(exposed_ms),
        impact.pct_of_step,
        top.join(", "),
        per = TimeBase::of(host).per(),
        of_the = TimeBase::of(host).of_the(),
    );
    let finding = Finding::new(detector, severity, what, evidence, impact).with_fix(fix_for(hideable, analysis.cpu));
    // XLA:CPU's advice is the same in every framework.
    if analysis.cpu && hideable != Some(false) { finding.with_fix_lines(FixLines::NONE) } else { finding }
}

/// The fix's framework-neutral core: the usual one, with a note when overlap cannot hide the
/// bytes, or the XLA:CPU one (which no framework's line follows).
fn fix_for(hideable: Option<bool>, cpu: bool) -> String {
    match hideable {
        Some(false) => format!(
            "{} Here the bytes alone take longer on the interconnect than the step's matmuls: overlap \
                 cannot hide them all, so reduce the bytes first.",
            META.doc.fix
        ),
        _ if cpu => "On XLA:CPU collectives cannot overlap compute: to shorten them move fewer \
                                  bytes (avoid re-gathering the same weights, keep activations sharded along the \
                                  mesh axis the collectives run on, use reduce-scatter instead of all-reduce + \
                                  slice). Measure overlap on the target accelerator."
            .to_owned(),
        _ => META.doc.fix.to_owned(),
    }
}

/// A note with the replica groups of a collective instruction, when the HLO records them.
fn replica_groups_note(module: &Module, name: &str) -> Option<String> {
    let instr = module.instruction_by_name(name)?;
    let c = module.collectives().iter().find(|c| c.instruction == instr.id())?;
    if c.replica_groups.is_empty() {
        return None;
    }
    Some(format!("{name} runs over groups of {} devices: {}", c.group_size(), c.groups_text()))
}

/// Compares the bytes of the exposed collectives at the chip's ICI bandwidth with the step's
/// matmul time; `Some(true)` when overlap could hide them.
fn hideability(
    host: &HostProfile,
    analysis: &Analysis,
    ranked: &[(&String, &OpTotals)],
    evidence: &mut Vec<Evidence>,
) -> Option<bool> {
    let chip = host.chip()?;
    let spec = chip.spec()?;
    let ici = spec.interconnect_bandwidth?.bytes_per_s();
    let matmul = analysis.matmul_per_step?;
    if ici <= 0.0 {
        return None;
    }
    let bytes_per_step: f64 =
        ranked.iter().map(|(_, o)| o.bytes * o.occurrences as f64 / analysis.core_steps.max(1.0)).sum();
    if bytes_per_step <= 0.0 {
        return None;
    }
    let wire = bytes_per_step / ici;
    let hideable = wire <= matmul.as_secs_f64();
    evidence.push(Evidence::metric(
        "exposed_collective_bytes",
        format!("bytes moved by the exposed collectives {}", TimeBase::of(host).per()),
        bytes_per_step,
        "bytes",
    ));
    evidence.push(Evidence::note(format!(
        "at the {} ICI bandwidth ({:.0} GB/s) those bytes need at least {} {}; the step runs {} \
         of matmul {}",
        spec.name,
        ici / 1e9,
        duration_text(wire * 1e3),
        TimeBase::of(host).per(),
        duration_text(matmul.as_ms_f64()),
        if hideable {
            "that could hide them: the exposure is a scheduling problem"
        } else {
            "— less than the transfers need, so overlap alone cannot hide them"
        }
    )));
    Some(hideable)
}

/// TPU: exposed and hidden totals from the step anatomy; per-op attribution from each core's
/// `XLA Ops` line (windows by XProf's pairing, coverage by the core's non-collective ops).
fn tpu_analysis(host: &HostProfile, t: &crate::config::ExposedCollective) -> Result<Analysis, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let anatomy = host.anatomy().map_err(Skip::because)?;
    let n_steps = anatomy.len().max(1) as i64;
    let exposed: Picos = anatomy.iter().map(|a| a.collective_exposed).sum();
    let hidden: Picos = anatomy.iter().map(|a| a.collective_hidden).sum();
    let matmul: Picos = anatomy.iter().map(|a| a.matmul).sum();
    let mut ops: BTreeMap<String, OpTotals> = BTreeMap::new();
    let mut cores = 0usize;
    for plane in host.space().tpu_tensor_cores() {
        let ordinal = evidence::device_ordinal(plane);
        // One streamed walk of the op line: compute time (every non-collective segment), the
        // synchronous collectives and the async windows; no op is kept.
        let is_sync_collective = |info: &evidence::DeviceOpInfo| {
            class_of(&info.category) == TimeClass::CollectiveExposed && async_phase(&info.name).is_none()
        };
        let Some(walk) = evidence::walk_collectives(plane, is_sync_collective, Vec::new, |compute, s| {
            if s.class != TimeClass::CollectiveExposed {
                evidence::merge_in_order(compute, s.start, s.end);
            }
        }) else {
            continue;
        };
        cores += 1;
        let spans: Vec<Span> = union(
            steps
                .steps
                .iter()
                .filter_map(|s| {
                    s.cores
                        .iter()
                        .find(|c| c.core == ordinal)
                        .map(|c| Span::new(c.marker_start, c.marker_start + s.duration))
                })
                .collect(),
        );
        add_core_ops(&mut ops, plane.name(), walk, &spans, t);
    }
    Ok(Analysis {
        exposed_per_step: Picos(exposed.0 / n_steps),
        hidden_per_step: Picos(hidden.0 / n_steps),
        core_steps: (cores.max(1) as f64) * anatomy.len().max(1) as f64,
        ops,
        cpu: false,
        matmul_per_step: Some(Picos(matmul.0 / n_steps)),
    })
}

/// Adds one TPU core's async windows and synchronous collectives inside its steps (`spans`) to `ops`.
fn add_core_ops(
    ops: &mut BTreeMap<String, OpTotals>,
    plane: &str,
    walk: evidence::CollectiveWalk<Vec<Span>>,
    spans: &[Span],
    t: &crate::config::ExposedCollective,
) {
    let compute = walk.segments;
    let windows = walk.windows;
    let window_spans = union(windows.iter().map(|w| Span::new(w.start, w.end)).collect());
    let line = walk.line;
    let in_step = |t: Picos| evidence::in_intervals(spans, t);
    for w in windows.iter().filter(|w| in_step(w.start)) {
        let cov = covered(&compute, w.start, w.end);
        let exposed = (w.end - w.start).saturating_sub(cov);
        let info = &walk.infos[w.info];
        let o = ops.entry(w.name.clone()).or_default();
        o.family = family(&w.name, &info.category);
        o.is_async = true;
        o.bytes = o.bytes.max(info.bytes_accessed);
        o.add_occurrence(plane, line, w.start, w.end, exposed);
        let span = (w.end - w.start).0.max(1) as f64;
        let ratio = cov.0 as f64 / span;
        match class_label(ratio, t.hidden_ratio, t.exposed_ratio) {
            "hidden" => o.hidden += 1,
            "exposed" => o.exposed_count += 1,
            _ => o.partial += 1,
        }
    }
    // Synchronous collectives: the core waits for them whole (minus any part already counted
    // inside an async window, or overlapped by compute).
    for op in walk.sync.iter().filter(|o| in_step(o.start)) {
        let info = &walk.infos[op.info];
        let inside = covered(&window_spans, op.start, op.end) + covered(&compute, op.start, op.end);
        let exposed = op.duration().saturating_sub(inside);
        let o = ops.entry(info.name.clone()).or_default();
        o.family = family(&info.name, &info.category);
        o.bytes = o.bytes.max(info.bytes_accessed);
        o.add_occurrence(plane, line, op.start, op.end, exposed);
    }
}

/// XLA:CPU and GPU: per device (`device_ordinal` of the thunk events, or the GPU), collective
/// time inside the steps not covered by that device's other ops (on GPU: NCCL/RCCL kernels not
/// covered by compute kernels on any stream of the GPU); on CPU, rendezvous waits nested in the
/// collective events are measured apart.
fn host_op_analysis(host: &HostProfile) -> Result<Analysis, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let profile = host.op_profile().map_err(Skip::because)?;
    let host_ops = host.host_ops();
    let gpu = host_ops.source == OpSource::GpuStreams;
    // Rendezvous waits are host-thread events (XLA:CPU); GPU collectives are stream kernels.
    let host_plane = host.space().host_threads().filter(|_| !gpu);
    if !gpu && host_plane.is_none() {
        return Err(Skip::because(Need::HostTimeline.missing()));
    }
    let categories: HashMap<(u64, &str), &str> =
        profile.ops.iter().map(|o| ((o.program_id, o.name.as_str()), o.category.as_str())).collect();
    // Without a collective among the ops (one device), nothing is exposed and there is no
    // finding: the ops are not walked.
    if !profile.ops.iter().any(|o| class_of(o.category.as_str()) == TimeClass::CollectiveExposed) {
        return Ok(Analysis {
            exposed_per_step: Picos::ZERO,
            hidden_per_step: Picos::ZERO,
            core_steps: 0.0,
            ops: BTreeMap::new(),
            cpu: !gpu,
            matmul_per_step: None,
        });
    }
    let spans = union(steps.steps.iter().map(|s| Span::new(s.start, s.end())).collect());
    let (collectives, compute) = occurrences(host, &categories, &spans, host_plane, gpu);
    let devices: std::collections::BTreeSet<i64> = collectives.keys().chain(compute.keys()).copied().collect();
    let (ops, exposed_total) = op_totals(&collectives, &compute, &categories);
    let core_steps = (devices.len().max(1) * steps.steps.len().max(1)) as f64;
    Ok(Analysis {
        exposed_per_step: Picos((exposed_total.0 as f64 / core_steps).round() as i64),
        hidden_per_step: Picos::ZERO,
        core_steps,
        ops,
        cpu: !gpu,
        matmul_per_step: None,
    })
}

/// One occurrence of a collective on a host thread or GPU stream.
struct Occurrence {
    /// (program id, op name).
    key: (u64, String),
    start: Picos,
    end: Picos,
    /// Rendezvous wait inside it.
    wait: Picos,
    plane: String,
    line: String,
}

/// Per device: the collective occurrences (key, start, end, wait inside) and compute intervals
/// inside the steps (`spans`).
#[allow(clippy::type_complexity)]
fn occurrences(
    host: &HostProfile,
    categories: &HashMap<(u64, &str), &str>,
    spans: &[Span],
    host_plane: Option<&xlens_xplane::Plane>,
    gpu: bool,
) -> (BTreeMap<i64, Vec<Occurrence>>, BTreeMap<i64, Vec<Span>>) {
    let host_ops = host.host_ops();
    // Rendezvous waits, decided once per metadata entry.
    let is_wait: Vec<bool> = host_plane.map_or_else(Vec::new, |plane| {
        plane.event_metadata().iter().map(|m| m.name() == "Rendezvous" || m.name().starts_with("Wait")).collect()
    });
    let mut collectives: BTreeMap<i64, Vec<Occurrence>> = BTreeMap::new();
    let mut compute: evidence::ByDevice<Span> = evidence::ByDevice::default();
    // Collective or not, per (program, interned op name) key, decided once.
    let keys = host_ops.op_keys();
    let mut is_collective: Vec<Option<bool>> = vec![None; keys.len()];
    for (at, line_ops) in host_ops.by_line() {
        let Some((plane, line)) = at.resolve(host.space()) else { continue };
        let mut pending: Vec<(i64, Occurrence)> = Vec::new();
        let mut in_steps = evidence::IntervalCursor::new(spans);
        for op in line_ops.iter().filter(|o| in_steps.contains(o.start)) {
            let context = host_ops.context(op);
            let program = context.program_id.unwrap_or(0);
            let collective = *is_collective[keys.of(op)].get_or_insert_with(|| {
                let category = categories.get(&(program, host_ops.name(op))).copied().unwrap_or("");
                class_of(category) == TimeClass::CollectiveExposed
            });
            if collective {
                pending.push((
                    context.core,
                    Occurrence {
                        key: (program, host_ops.name(op).to_owned()),
                        start: op.start,
                        end: op.end,
                        wait: Picos::ZERO,
                        plane: plane.name().to_owned(),
                        line: line.name().to_owned(),
                    },
                ));
            } else {
                compute.push(context.core, Span::new(op.start, op.end));
            }
        }
        if pending.is_empty() {
            continue;
        }
        // Only threads that ran collectives are walked again, for their waits.
        let waits: Vec<Span> = if gpu { Vec::new() } else { thread_waits(plane, line, &is_wait) };
        let waits = union(waits);
        for (device, mut occ) in pending {
            occ.wait = covered(&waits, occ.start, occ.end);
            collectives.entry(device).or_default().push(occ);
        }
    }
    (collectives, compute.into_map())
}

/// The rendezvous waits (by metadata position in `is_wait`) on one host thread.
fn thread_waits(plane: &xlens_xplane::Plane, line: &xlens_xplane::Line, is_wait: &[bool]) -> Vec<Span> {
    line.events(plane)
        .map_while(|e| e.ok())
        .filter(|ev| plane.event_metadata_position(ev.metadata_id()).is_some_and(|i| is_wait[i]))
        .map(|ev| Span::new(ev.start(), ev.end()))
        .collect()
}

/// Each collective's totals, and the exposed collective time over all devices (not covered by the
/// device's compute).
fn op_totals(
    collectives: &BTreeMap<i64, Vec<Occurrence>>,
    compute: &BTreeMap<i64, Vec<Span>>,
    categories: &HashMap<(u64, &str), &str>,
) -> (BTreeMap<String, OpTotals>, Picos) {
    let mut ops: BTreeMap<String, OpTotals> = BTreeMap::new();
    let mut exposed_total = Picos::ZERO;
    for (device, occurrences) in collectives {
        let busy = union(compute.get(device).cloned().unwrap_or_default());
        let merged = union(occurrences.iter().map(|o| Span::new(o.start, o.end)).collect());
        for &Span { start: s, end: e } in &merged {
            exposed_total += (e - s).saturating_sub(covered(&busy, s, e));
        }
        for occ in occurrences {
            let exposed = (occ.end - occ.start).saturating_sub(covered(&busy, occ.start, occ.end));
            let o = ops.entry(occ.key.1.clone()).or_default();
            let category = categories.get(&(occ.key.0, occ.key.1.as_str())).copied().unwrap_or("");
            o.family = family(&occ.key.1, category);
            o.program_id = Some(occ.key.0);
            o.wait += occ.wait.min(exposed);
            o.add_occurrence(&occ.plane, &occ.line, occ.start, occ.end, exposed);
        }
    }
    (ops, exposed_total)
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::metric;
    use crate::testing::{run_on, testdata};

    fn text(f: &crate::Finding) -> String {
        f.evidence.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")
    }

    /// XProf's `analyze_async_overlap` summary of a fixture: (overlap ratio, hidden, partial, exposed).
    fn xprof_overlap(dir: &str) -> (f64, u64, u64, u64) {
        let path = testdata(dir).join("xprof/analyze_async_overlap.json");
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let s = &json["output"]["summary"];
        let n = |k: &str| s[k].as_u64().unwrap();
        (s["overlap_ratio"].as_f64().unwrap(), n("hidden"), n("partial"), n("exposed"))
    }

    #[test]
    fn finds_the_gathers_and_reduce_scatter_the_step_waits_on() {
        let findings = run_on("exposed_collective", &testdata("tpu/tpu_exposed_collective"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P1);
        // The windows, their coverage and classes are XProf's.
        let (ratio, hidden, partial, exposed) = xprof_overlap("tpu/tpu_exposed_collective");
        assert!((metric(f, "async window overlap ratio") - ratio).abs() < 1e-9, "{ratio}");
        let classes = format!("async windows: {hidden} hidden, {partial} partial, {exposed} exposed");
        assert!(text(f).contains(&classes), "{classes}\n{}", text(f));
        // all-gather window: 1 + 5 + 22 us, 5 us covered; reduce-scatter window: 1 + 18 us, uncovered.
        let exposed = metric(f, "exposed collective time per step");
        assert!((0.040..0.047).contains(&exposed), "{exposed}");
        assert!((13.0..18.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        let all = text(f);
        assert!(f.what.contains("all-gather-start.1") && f.what.contains("reduce-scatter-start.4"), "{}", f.what);
        assert!(all.contains("reduce-scatter-start.4 (reduce-scatter, async)"), "{all}");
        assert!(all.contains("overlap ratio 0.00 (exposed)"), "{all}");
        assert!(all.contains("(partial)"), "{all}");
        // The HLO instruction carries the JAX source line.
        assert!(
            all.contains("all-gather-start.1 (all-gather-start) from jit(train_step)/layer0/all_gather at model.py:33"),
            "{all}"
        );
        // 2 × 8 MiB per step at v5e ICI (400 GB/s) is ~42 us, well under the ~180 us of matmul.
        assert!(all.contains("TPU v5e ICI bandwidth (400 GB/s)") && all.contains("scheduling problem"), "{all}");
        assert!(
            f.evidence
                .iter()
                .any(|e| matches!(e, crate::Evidence::Event { name, .. } if name == "reduce-scatter-start.4"))
        );
    }

    #[test]
    fn tpu_basic_has_a_partly_exposed_all_gather_and_a_synchronous_all_reduce() {
        // XProf's analyze_async_overlap classes tpu_basic's all-gather windows `partial` (overlap
        // ratio 0.556, 382.5 us exposed over 24 windows); the synchronous all-reduce.7 (25 us) is
        // exposed whole: together 14 % of the step, as the health snapshot's exposed communication.
        let findings = run_on("exposed_collective", &testdata("tpu/tpu_basic"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!((13.0..15.5).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        let (ratio, ..) = xprof_overlap("tpu/tpu_basic");
        assert!((metric(f, "async window overlap ratio") - ratio).abs() < 1e-9, "{ratio}");
        let all = text(f);
        assert!(all.contains("all-reduce.7 (all-reduce, synchronous)"), "{all}");
        assert!(all.contains("async windows: 0 hidden, 24 partial, 0 exposed"), "{all}");
    }

    #[test]
    fn hidden_collectives_are_not_reported() {
        for dir in ["tpu/tpu_healthy", "tpu/tpu_vector_bound", "corpus/clean"] {
            let findings = run_on("exposed_collective", &testdata(dir));
            assert!(findings.is_empty(), "{dir}: {findings:#?}");
        }
    }

    /// Odd but decodable TPU-shaped profiles: no detector of the device timeline panics on them.
    #[test]
    fn device_detectors_survive_odd_profiles() {
        use xlens_xplane::{Space, SpaceBuilder, names};
        let ids = [
            "exposed_collective",
            "vpu_bound",
            "straggler_core",
            "dcn_exposed_reduce",
            "sparsecore_overflow",
            "hbm_pressure",
        ];
        let mut spaces = Vec::new();
        for case in 0..6 {
            let mut b = SpaceBuilder::default();
            for core in 0..2i64 {
                let mut p = b.plane(core + 1, &format!("/device:TPU:{core}"));
                let ty = p.stat_metadata(names::stat::DEVICE_TYPE_STRING);
                p.stat(ty, "TPU v5");
                let cat = p.stat_metadata(names::stat::HLO_CATEGORY);
                let off = p.stat_metadata(names::stat::DEVICE_OFFSET_PS);
                let start = p.event_metadata_with_display(
                    "%all-gather-start.1 = f32[] all-gather-start()",
                    "all-gather-start.1",
                );
                p.metadata_stat(start, cat, "all-gather");
                let done = p.event_metadata("all-reduce-done.7");
                p.metadata_stat(done, cat, "all-reduce");
                let fusion = p.event_metadata("fusion.2");
                let step = p.event_metadata("0");
                {
                    let mut steps = p.line(1, names::line::STEPS, 0);
                    match case {
                        0 => {}
                        1 => {
                            steps.event(step, 0, 0);
                        }
                        _ => {
                            steps.event(step, 0, 1_000_000 * (core + 1));
                            steps.event(step, 2_000_000, 1_000_000);
                        }
                    }
                }
                let mut ops = p.line(3, names::line::XLA_OPS, 0);
                match case {
                    2 => {
                        // Unpaired start and done, overlapping ops, zero durations.
                        ops.event(start, 10, 500_000);
                        ops.event(done, 5, 0);
                        ops.event(fusion, 100, 900_000);
                    }
                    3 => {
                        // Device offsets far away, negative durations.
                        ops.event(fusion, 0, 1000).stat(off, i64::MAX - 10);
                        ops.event(done, 0, -5);
                    }
                    4 => {
                        ops.event(done, 0, 3_000_000);
                    }
                    _ => {
                        ops.event(fusion, 0, 100);
                    }
                }
            }
            if case == 5 {
                let mut sc = b.plane(50, "/device:TPU:0 SparseCore 0");
                let d = sc.stat_metadata(names::stat::DROPPED_TRACES);
                sc.stat(d, u64::MAX);
                let op = sc.event_metadata("lookup");
                sc.line(3, names::line::SPARSE_CORE_OPS, 0).event(op, -5, i64::MAX);
            }
            {
                let mut meta = b.plane(90, names::plane::HOST_METADATA);
                let m = meta.event_metadata("jit_f(1)");
                let pid = meta.stat_metadata(names::stat::PROGRAM_ID);
                meta.metadata_stat(m, pid, 1u64);
                let hlo = meta.stat_metadata(names::stat::HLO_PROTO);
                meta.metadata_stat(m, hlo, &[0x0a, 0x02, 0x0a, 0x00][..]);
            }
            spaces.push(Space::parse(b.finish().into()).unwrap());
        }
        for space in spaces {
            let profile = crate::Profile::from_space("odd", space);
            for id in ids {
                let report = crate::scan(&profile, &crate::ScanConfig::only(id));
                assert!(report.findings.len() <= 1, "{id}: {report:#?}");
            }
        }
    }

    #[test]
    fn cpu_collectives_are_synchronous_and_reported_at_p2() {
        // Duplicated all-gathers over the slow mesh axis: ~20 ms of each 28 ms step per device.
        let findings = run_on("exposed_collective", &testdata("real/sharded_collectives"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P2);
        assert!((60.0..85.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        let all = text(f);
        assert!(all.contains("waiting at the rendezvous"), "{all}");
        assert!(all.contains("runs over groups of 4 devices: {{0,2,4,6},{1,3,5,7}}"), "{all}");
        assert!(
            f.evidence
                .iter()
                .any(|e| matches!(e, crate::Evidence::Instruction { opcode, .. } if opcode == "all-gather"))
        );
        // The well-sharded baseline is communication-heavy too (tiny matmuls, 8 devices on 2
        // cores), with fewer, cheaper collectives.
        let base = run_on("exposed_collective", &testdata("corpus/sharded_collectives_baseline"));
        assert_eq!(base.len(), 1, "{base:#?}");
        assert_eq!(base[0].severity, Severity::P2);
        assert!(base[0].impact.ms_per_step < 0.6 * f.impact.ms_per_step, "{:?} vs {:?}", base[0].impact, f.impact);
    }
}
