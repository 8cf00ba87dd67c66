//! `exposed_async_copy`: the device waits on asynchronous copies between memory spaces (host
//! offload on TPU, `copy-start`/`copy-done`) or on host↔device memory copies (GPU `MemcpyH2D` /
//! `MemcpyD2H`) instead of computing while they run.

use std::collections::BTreeMap;

use xlens_hlo::Module;
use xlens_roofline::{CopyKind, OpSource, Span, copy_kind, memcpy_bytes};
use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::duration_text;
use crate::evidence::{self, AsyncPairer, DeviceOp, DeviceOpInfo, DeviceOpLine, async_phase, covered};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ExposedAsyncCopy;

const META: DetectorMeta = DetectorMeta {
    id: "exposed_async_copy",
    title: "The device waits on copies between host and device memory",
    severity: Severity::P1,
    needs: &[Need::OpTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "Copies the device waits for. On TPU: the windows of asynchronous copies (`copy-start` to \
                  `copy-done`, paired as XProf's `analyze_async_overlap` pairs them, or read from the `Async XLA \
                  Ops` line) that other ops of the core do not cover: the core sits in `copy-done` while a buffer \
                  moves between memory spaces, typically from pinned host memory (`S(5)` in the layout) into HBM \
                  and back. On GPU: host-to-device and device-to-host memory copies (`MemcpyH2D`, `MemcpyD2H` \
                  streams) during which no kernel runs on that GPU.",
        why: "An exposed copy is time the compute units idle while bytes cross the host link, which is one to two \
              orders of magnitude slower than HBM. Offloading activations or weights to host memory saves HBM only \
              if the copies overlap compute; started just before their consumer, they put the whole transfer on the \
              critical path. On GPUs, synchronous or unpipelined `device_put`s and host reads of results stall the \
              stream the same way.",
        evidence: "Exposed copy time per step and its share of the step, the copies per step, the bytes each copy \
                   moves (from the HLO shapes on TPU, `memcpy_details` on GPU), the direction and memory spaces, \
                   the achieved transfer bandwidth, the overlap ratio (covered ÷ window), the copy ops that wait \
                   the most with their HLO instruction and JAX source line, and the longest exposed occurrence on \
                   the timeline.",
        thresholds: "Report when exposed copy time is at least `exposed_async_copy.min_pct_of_step` (default 5) % \
                     of the step (the module execution, or the device window, on profiles without step markers). \
                     Severity P1, P0 from 20 % of the step, P2 under 2 %.",
        fix: "Keep the hot buffers in device memory when they fit (the report's memory peak says how much room there \
              is), and otherwise overlap the copies with compute: start host-to-device prefetches a layer or a step \
              ahead, offload only what the step does not need soon, and give the scheduler independent work between \
              a copy's start and its use. On GPUs, stage input batches with prefetching (the next batch copied \
              before the step, pinned host buffers), avoid host reads of device values inside the step, and keep \
              data on the device between steps.",
        fix_lines: FixLines {
            jax: "scan over layers so XLA can schedule the next layer's copy during the current one, offload with a \
                  `jax.checkpoint` policy such as `save_and_offload_only_these_names` (or \
                  `memory_kind='pinned_host'`) only for cold state, and `jax.device_put` the next batch before the \
                  step.",
            tensorflow: "end the input pipeline with `tf.data.experimental.prefetch_to_device('/gpu:0')` (or use \
                         `experimental_distribute_dataset` under `tf.distribute`) so batches reach the GPU ahead of \
                         the step, and keep variables on the device (no `tf.device('/cpu:0')` scopes inside the \
                         step).",
            pytorch_xla: "`MpDeviceLoader` copies the next batch ahead of the step; keep tensors on the XLA device \
                          between steps (no `.cpu()` round trips).",
        },
    },
};

/// One copy op over its occurrences.
#[derive(Debug, Default)]
struct CopyTotals {
    occurrences: u64,
    span: Picos,
    exposed: Picos,
    bytes: f64,
    direction: Option<&'static str>,
    /// Longest exposed occurrence: (plane, line, start, duration, exposed).
    worst: Option<(String, String, Picos, Picos, Picos)>,
    program_id: Option<u64>,
}

impl CopyTotals {
    fn add(&mut self, plane: &str, line: &str, start: Picos, end: Picos, exposed: Picos) {
        self.occurrences += 1;
        self.span += end - start;
        self.exposed += exposed;
        if self.worst.as_ref().is_none_or(|w| exposed > w.4) {
            self.worst = Some((plane.to_owned(), line.to_owned(), start, end - start, exposed));
        }
    }
}

impl Detector for ExposedAsyncCopy {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host)? else { return Ok(()) };
        let Some(impact) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, impact));
        Ok(())
    }
}

/// What the profile shows: the copies, per copy op and in total, and the steps they are spread over.
struct Measured {
    unit: &'static str,
    step_ms: f64,
    n_steps: f64,
    /// Devices that ran copies (at least 1).
    devices: f64,
    copies: BTreeMap<String, CopyTotals>,
    /// Σ over devices of the union of exposed copy windows.
    exposed: Picos,
    /// Σ of the copies' own windows.
    span: Picos,
    /// Σ of the copies' own exposed time.
    exposed_sum: Picos,
    occurrences: u64,
    /// Bytes moved by all copies.
    bytes: f64,
}

impl Measured {
    /// Milliseconds per device and step.
    fn per_step(&self, p: Picos) -> f64 {
        p.as_ms_f64() / self.n_steps / self.devices
    }
}

/// Collects the copies of the TPU cores or the GPUs; `None` when there are none.
fn measure(host: &HostProfile) -> Result<Option<Measured>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let step_ms = host.step_ms().ok_or_else(|| Skip::because("the profile has no step times"))?;
    let n_steps = steps.steps.len().max(1) as f64;
    let Copies { by_name: copies, devices, exposed } =
        if host.space().tpu_tensor_cores().is_empty() { gpu_copies(host) } else { tpu_copies(host) };
    if copies.is_empty() {
        return Ok(None);
    }
    let devices = devices.max(1) as f64;
    let span: Picos = copies.values().map(|c| c.span).sum();
    let exposed_sum: Picos = copies.values().map(|c| c.exposed).sum();
    let occurrences: u64 = copies.values().map(|c| c.occurrences).sum();
    let bytes: f64 = copies.values().map(|c| c.bytes * c.occurrences as f64).sum();
    let unit = TimeBase::of(host).unit();
    Ok(Some(Measured { unit, step_ms, n_steps, devices, copies, exposed, span, exposed_sum, occurrences, bytes }))
}

/// The exposed copy time per device and step; `None` when it is under the threshold.
fn score(m: &Measured, config: &ScanConfig) -> Option<Impact> {
    let t = &config.thresholds.exposed_async_copy;
    // Per device and step: exposed time, as a share of the step. Copies in flight together
    // count once (`exposed` is the union); per-copy figures are each copy's own.
    let impact = Impact::of(m.per_step(m.exposed), Some(m.step_ms));
    (impact.pct_of_step >= t.min_pct_of_step).then_some(impact)
}

/// The evidence of all copies together: exposed time, count, overlap, bytes and bandwidth.
fn summary_evidence(host: &HostProfile, m: &Measured, impact: Impact) -> Vec<Evidence> {
    let (unit, span, bytes) = (m.unit, m.span, m.bytes);
    let mut evidence = vec![
        Evidence::metric("exposed_copy_time", format!("exposed copy time per {unit}"), impact.ms_per_step, "ms"),
        Evidence::metric("exposed_copy_share", format!("exposed copy share of the {unit}"), impact.pct_of_step, "%"),
        Evidence::metric(
            "copies_per_device",
            format!("copies per {unit} per device"),
            m.occurrences as f64 / m.n_steps / m.devices,
            "count",
        ),
        Evidence::metric(
            "copy_overlap_ratio",
            "overlap ratio (covered by compute / copy time)",
            if span.0 > 0 { 1.0 - m.exposed_sum.0 as f64 / span.0 as f64 } else { 0.0 },
            "ratio",
        ),
    ];
    if bytes > 0.0 && span.0 > 0 {
        evidence.push(Evidence::metric(
            "copied_bytes_per_device",
            format!("bytes copied per {unit} per device"),
            bytes / m.n_steps / m.devices,
            "bytes",
        ));
        let achieved = bytes / span.as_secs_f64();
        let mut note = format!("the copies move {:.2} GB/s while they run", achieved / 1e9);
        if let Some(hbm) = host.chip().map(|c| c.peaks().hbm.bytes_per_s()).filter(|b| *b > 0.0) {
            note.push_str(&format!(
                ", {:.1} % of the HBM bandwidth ({:.0} GB/s): the host link, not HBM, sets their pace",
                100.0 * achieved / hbm,
                hbm / 1e9
            ));
        }
        evidence.push(Evidence::note(note));
    }
    evidence
}

/// The copies with exposed time, most exposed first.
fn ranked(m: &Measured) -> Vec<(&String, &CopyTotals)> {
    let mut ranked: Vec<(&String, &CopyTotals)> = m.copies.iter().filter(|(_, c)| c.exposed.0 > 0).collect();
    ranked.sort_by(|a, b| b.1.exposed.cmp(&a.1.exposed).then(a.0.cmp(b.0)));
    ranked
}

/// The evidence of the most exposed copy ops: a note, the HLO instruction and the worst occurrence.
fn op_evidence(host: &HostProfile, m: &Measured, ranked: &[(&String, &CopyTotals)]) -> Vec<Evidence> {
    let unit = m.unit;
    let mut evidence = Vec::new();
    let main = host.main_module();
    for (name, c) in ranked.iter().take(5) {
        let mut text = format!(
            "{name}: {} exposed per {unit} over {} copies ({:.0} % of their time)",
            duration_text(m.per_step(c.exposed)),
            c.occurrences,
            if c.span.0 > 0 { 100.0 * c.exposed.0 as f64 / c.span.0 as f64 } else { 0.0 }
        );
        if c.bytes > 0.0 {
            text.push_str(&format!(", {} per copy", bytes_text(c.bytes)));
        }
        if let Some(d) = c.direction {
            text.push_str(&format!(", {d}"));
        }
        evidence.push(Evidence::note(text));
        let module = c.program_id.and_then(|p| host.module(p)).or(main);
        if let Some(m) = module
            && let Some(instr) = m.instruction_by_name(name)
        {
            evidence.push(evidence::instruction(m, instr.id()));
        }
        if let Some((plane, line, start, duration, _)) = &c.worst {
            evidence.push(evidence::event_parts(host, plane, line, name, *start, *duration));
        }
    }
    evidence
}

/// The finding: the exposed copy time, the kind of copies, the most exposed ones, and the evidence.
fn describe(detector: &ExposedAsyncCopy, host: &HostProfile, m: &Measured, impact: Impact) -> Finding {
    let unit = m.unit;
    let ranked = ranked(m);
    let mut evidence = summary_evidence(host, m, impact);
    evidence.extend(op_evidence(host, m, &ranked));
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    let host_memory = m.copies.values().any(|c| c.direction.is_some_and(|d| d.contains("host")));
    let top: Vec<&str> = ranked.iter().take(3).map(|(n, _)| n.as_str()).collect();
    let what = format!(
        "Each device spends {} per {unit} ({:.1} % of the {unit}) waiting on {} copies{}; most exposed: {}.",
        duration_text(impact.ms_per_step),
        impact.pct_of_step,
        if host_memory { "host-memory" } else { "memory" },
        if m.bytes > 0.0 {
            format!(" moving {} per {unit}", bytes_text(m.bytes / m.n_steps / m.devices))
        } else {
            String::new()
        },
        top.join(", ")
    );
    Finding::new(detector, severity, what, evidence, impact)
}

/// The copies of a host: per copy op, and the time the devices waited on any of them.
struct Copies {
    by_name: BTreeMap<String, CopyTotals>,
    devices: usize,
    /// Σ over devices of the union of copy windows not covered by compute.
    exposed: Picos,
}

/// The time of `windows` (unsorted) not covered by the sorted, disjoint `compute`, counting
/// overlapping windows once.
fn exposed_union(windows: Vec<Span>, compute: &[Span]) -> Picos {
    evidence::union(windows)
        .into_iter()
        .map(|w| (w.end - w.start).saturating_sub(covered(compute, w.start, w.end)))
        .sum()
}

/// TPU: per TensorCore, the `copy-start`/`copy-done` windows and how much of each the core's
/// other ops (not start/done ops) cover.
fn tpu_copies(host: &HostProfile) -> Copies {
    struct State {
        compute: Vec<Span>,
        pairer: AsyncPairer,
    }
    let mut out: BTreeMap<String, CopyTotals> = BTreeMap::new();
    let mut cores = 0;
    let mut exposed_total = Picos::ZERO;
    let modules = host.modules();
    let line = names::line::XLA_OPS;
    for plane in host.space().tpu_tensor_cores() {
        // Only cores that run async copies are walked (decided on the op names, not the events).
        let runs_copies = plane.event_metadata().iter().any(|m| {
            let name = if m.display_name().is_empty() { m.name() } else { m.display_name() };
            name.trim_start_matches('%').starts_with("copy-start")
        });
        if !runs_copies {
            continue;
        }
        let walk = DeviceOpLine::walk(
            plane,
            line,
            || State { compute: Vec::new(), pairer: AsyncPairer::default() },
            |s: &mut State, op: &DeviceOp, infos: &[DeviceOpInfo]| {
                if async_phase(&infos[op.info].name).is_none() {
                    evidence::merge_in_order(&mut s.compute, op.start, op.end);
                }
                s.pairer.push(op, infos);
            },
        );
        let Some((state, infos)) = walk else { continue };
        cores += 1;
        let windows = match evidence::async_line_windows(plane) {
            Some(w) => w,
            None => state.pairer.finish(),
        };
        let mut spans = Vec::new();
        for w in windows {
            let is_copy = async_phase(&w.name).is_some_and(|(base, _, _)| base == "copy")
                || infos.get(w.info).is_some_and(|i| i.category == "copy-start");
            if !is_copy {
                continue;
            }
            let cov = covered(&state.compute, w.start, w.end);
            let exposed = (w.end - w.start).saturating_sub(cov);
            let c = out.entry(w.name.clone()).or_default();
            if c.occurrences == 0 {
                let (program, bytes, direction) = copy_facts(modules, &w.name);
                c.program_id = program;
                c.bytes = bytes;
                c.direction = direction;
            }
            c.add(plane.name(), line, w.start, w.end, exposed);
            spans.push(Span::new(w.start, w.end));
        }
        exposed_total += exposed_union(spans, &state.compute);
    }
    Copies { by_name: out, devices: cores, exposed: exposed_total }
}

/// What a `copy-start` instruction moves: its program, the bytes of the copied array and the
/// direction between memory spaces (`S(5)` is host memory).
fn copy_facts(modules: &[Module], name: &str) -> (Option<u64>, f64, Option<&'static str>) {
    for m in modules {
        let Some(instr) = m.instruction_by_name(name) else { continue };
        let Some(&operand) = instr.operands().first() else { continue };
        // `copy-start` gives (destination, source alias, context): the destination is element 0.
        let src = m.instruction(operand).shape();
        let dst = instr.shape().tuple_shapes().first().unwrap_or(instr.shape());
        let direction = match (src.memory_space(), dst.memory_space()) {
            (HOST_MEMORY_SPACE, d) if d != HOST_MEMORY_SPACE => Some("host memory (S(5)) to HBM"),
            (s, HOST_MEMORY_SPACE) if s != HOST_MEMORY_SPACE => Some("HBM to host memory (S(5))"),
            (s, d) if s != d => Some("between memory spaces"),
            _ => None,
        };
        return (m.program_id(), src.byte_size() as f64, direction);
    }
    (None, 0.0, None)
}

/// The memory space XLA gives pinned host memory on TPU.
const HOST_MEMORY_SPACE: i64 = 5;

/// GPU: per GPU, host↔device memory copies and how much of each the GPU's kernels cover. The
/// copies and kernels come from the shared op table; only the lines that hold copies are read
/// again, for the bytes each copy moved (`memcpy_details`).
fn gpu_copies(host: &HostProfile) -> Copies {
    let mut out: BTreeMap<String, CopyTotals> = BTreeMap::new();
    let ops = host.host_ops();
    if ops.source != OpSource::GpuStreams {
        return Copies { by_name: out, devices: 0, exposed: Picos::ZERO };
    }
    // The direction of each interned name, decided once.
    let kinds: Vec<Option<CopyKind>> = ops
        .names
        .iter()
        .map(|n| copy_kind(n).filter(|k| matches!(k, CopyKind::HostToDevice | CopyKind::DeviceToHost)))
        .collect();
    let kind_of = |op: &xlens_roofline::HostOp| kinds.get(op.name as usize).copied().flatten();
    let mut compute: evidence::ByDevice<Span> = evidence::ByDevice::default();
    let mut copies: evidence::ByDevice<(xlens_roofline::LineRef, Picos, Picos, u32)> = evidence::ByDevice::default();
    for (at, line_ops) in ops.by_line() {
        // A stream's kernels come by start: they are merged into runs as they come (the union
        // taken below is the same), so a device's list holds its busy runs, not every kernel.
        // An empty or inverted op covers nothing and is left out, as the union leaves it out.
        let in_order = line_ops.is_sorted_by_key(|op| op.start);
        let mut run: Option<(i64, Picos, Picos)> = None;
        for op in line_ops {
            let device = ops.context(op).core;
            match kind_of(op) {
                Some(_) => copies.push(device, (at, op.start, op.end, op.name)),
                None if !in_order => compute.push(device, Span::new(op.start, op.end)),
                None => {
                    if let Some((d, start, end)) = extend_run(&mut run, device, op.start, op.end) {
                        compute.push(d, Span::new(start, end));
                    }
                }
            }
        }
        if let Some((d, start, end)) = run {
            compute.push(d, Span::new(start, end));
        }
    }
    let (mut compute, copies) = (compute.into_map(), copies.into_map());
    let bytes = copy_bytes(host, &copies);
    let devices = compute.keys().chain(copies.keys()).collect::<std::collections::BTreeSet<_>>().len();
    let mut exposed_total = Picos::ZERO;
    // Per interned name, its totals (named once at the end).
    let mut by_name: Vec<Option<CopyTotals>> = (0..ops.names.len()).map(|_| None).collect();
    for (device, list) in &copies {
        // Each device's kernels are read here only: taken, not copied.
        let busy = evidence::union(compute.remove(device).unwrap_or_default());
        exposed_total += exposed_union(list.iter().map(|c| Span::new(c.1, c.2)).collect(), &busy);
        // A device's copies come line by line, each line's in file order: its bytes are found
        // by a cursor that moves forward with them.
        let (mut current, mut of_line, mut cursor): (_, &[(Picos, u64)], usize) = (None, &[], 0);
        // The kernels' runs that cover each copy, found from the last copy's.
        let mut busy_cursor = 0usize;
        for &(at, start, end, name) in list {
            let Some((plane, line)) = at.resolve(host.space()) else { continue };
            if current != Some(at) {
                (current, of_line, cursor) = (Some(at), bytes.get(&at).map_or(&[][..], Vec::as_slice), 0);
            }
            let exposed = (end - start).saturating_sub(evidence::covered_from(&busy, &mut busy_cursor, start, end));
            let Some(c) = by_name.get_mut(name as usize).map(|slot| slot.get_or_insert_with(CopyTotals::default))
            else {
                continue;
            };
            let b = bytes_at(of_line, &mut cursor, start) as f64;
            c.bytes = (c.bytes * c.occurrences as f64 + b) / (c.occurrences + 1) as f64;
            c.direction = Some(match kinds[name as usize] {
                Some(CopyKind::HostToDevice) => "host memory to device memory",
                _ => "device memory to host memory",
            });
            c.add(plane.name(), line.name(), start, end, exposed);
        }
    }
    for (name, totals) in ops.names.iter().zip(by_name) {
        if let Some(totals) = totals {
            out.insert(name.clone(), totals);
        }
    }
    Copies { by_name: out, devices, exposed: exposed_total }
}

/// Adds the interval `[start, end)` of `device`, the next by start, to the open run: joined to
/// it when it overlaps or touches it on the same device, else it opens a new run and the closed
/// one is returned. Empty and inverted intervals cover nothing and change nothing. The runs'
/// union is the intervals' union.
fn extend_run(
    run: &mut Option<(i64, Picos, Picos)>,
    device: i64,
    start: Picos,
    end: Picos,
) -> Option<(i64, Picos, Picos)> {
    match run {
        _ if end <= start => None,
        Some((d, _, run_end)) if *d == device && start <= *run_end => {
            *run_end = (*run_end).max(end);
            None
        }
        _ => run.replace((device, start, end)),
    }
}

/// The bytes each copy moved (`memcpy_details`), read from the lines that hold copies only: per
/// line, by start (equal starts in file order).
fn copy_bytes(
    host: &HostProfile,
    copies: &BTreeMap<i64, Vec<(xlens_roofline::LineRef, Picos, Picos, u32)>>,
) -> BTreeMap<xlens_roofline::LineRef, Vec<(Picos, u64)>> {
    let mut out = BTreeMap::new();
    // A device's copies come line by line: its lines are the changes of line along its list
    // (a set built from every copy took a fifth of the detector on gpu300's 173,000 copies).
    let mut lines: Vec<xlens_roofline::LineRef> = Vec::new();
    for list in copies.values() {
        for c in list {
            if lines.last() != Some(&c.0) {
                lines.push(c.0);
            }
        }
    }
    lines.sort();
    lines.dedup();
    for at in lines {
        let Some((plane, line)) = at.resolve(host.space()) else { continue };
        let Some(details) = plane.stat_id(names::stat::MEMCPY_DETAILS) else { continue };
        let is_copy = plane.metadata_mask(|m| copy_kind(m.name()).is_some());
        let mut of_line: Vec<(Picos, u64)> = Vec::new();
        // Details kept by reference (stat metadata) are read once per reference.
        let mut by_ref: std::collections::HashMap<u64, Option<u64>> = std::collections::HashMap::new();
        for ev in line.events_where(plane, &is_copy).map_while(|e| e.ok()) {
            // Only the details stat is decoded (the others are stepped over by their id).
            let Some(stat) = ev.stats_where(|id| id == details).next().and_then(|s| s.ok()) else { continue };
            let read = |s: xlens_xplane::Stat<'_>| s.as_str().and_then(|d| memcpy_bytes(&d));
            let bytes = match stat.ref_id() {
                Some(r) => *by_ref.entry(r).or_insert_with(|| read(stat)),
                None => read(stat),
            };
            if let Some(b) = bytes {
                of_line.push((ev.start(), b));
            }
        }
        if !of_line.is_sorted_by_key(|c| c.0) {
            of_line.sort_by_key(|c| c.0);
        }
        out.insert(at, of_line);
    }
    out
}

/// The bytes of the copy that starts at `start` on a line (the last in file order when several
/// do; 0 when none), from the line's copies by start. `cursor` is where the previous call on the
/// line ended (see [`evidence::partition_from`]): copies asked for in start order are found by
/// stepping forward.
fn bytes_at(by_start: &[(Picos, u64)], cursor: &mut usize, start: Picos) -> u64 {
    // One past the last copy starting at or before `start`.
    let at = evidence::partition_from(by_start, cursor, |c| c.0 <= start);
    match at.checked_sub(1).map(|i| by_start[i]) {
        Some((s, bytes)) if s == start => bytes,
        _ => 0,
    }
}

fn bytes_text(b: f64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    if b >= GIB { format!("{:.2} GiB", b / GIB) } else { format!("{:.2} MiB", b / MIB) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals in start order merged into runs as they come have the union of the intervals:
    /// overlapping, touching, nested, empty and inverted ones, on one device or alternating two.
    #[test]
    fn runs_have_the_union_of_their_intervals() {
        use proptest::prelude::*;
        let case = (proptest::collection::vec((0i64..200, -5i64..40, 0i64..2), 0..60), any::<bool>());
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&case, |(mut raw, two_devices)| {
                raw.sort_by_key(|r| r.0);
                let spans: Vec<(i64, Picos, Picos)> = raw
                    .iter()
                    .map(|&(s, len, d)| (if two_devices { d } else { 0 }, Picos(s), Picos(s + len)))
                    .collect();
                for device in [0, 1] {
                    let mine: Vec<Span> = spans.iter().filter(|s| s.0 == device).map(|s| Span::new(s.1, s.2)).collect();
                    let mut runs = Vec::new();
                    let mut run = None;
                    for &(d, s, e) in &spans {
                        if let Some(closed) = extend_run(&mut run, d, s, e) {
                            runs.push(closed);
                        }
                    }
                    runs.extend(run);
                    let of_device: Vec<Span> =
                        runs.iter().filter(|r| r.0 == device).map(|r| Span::new(r.1, r.2)).collect();
                    prop_assert_eq!(evidence::union(of_device), evidence::union(mine));
                }
                Ok(())
            })
            .unwrap();
    }

    /// The cursor finds what a lookup of the last copy with that start finds: starts asked for
    /// in order (the usual case, long strides included), out of order, repeated, and absent.
    #[test]
    fn bytes_at_equals_the_last_copy_with_that_start() {
        use proptest::prelude::*;
        let case = (
            proptest::collection::vec((0i64..300, 0u64..1000), 0..80),
            proptest::collection::vec(0i64..320, 0..60),
            any::<bool>(),
        );
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&case, |(copies, mut asks, in_order)| {
                let in_file: Vec<(Picos, u64)> = copies.iter().map(|&(s, b)| (Picos(s), b)).collect();
                let mut by_start = in_file.clone();
                by_start.sort_by_key(|c| c.0);
                if in_order {
                    asks.sort();
                }
                let mut cursor = 0;
                for ask in asks {
                    let expected = in_file.iter().rev().find(|c| c.0 == Picos(ask)).map_or(0, |c| c.1);
                    prop_assert_eq!(bytes_at(&by_start, &mut cursor, Picos(ask)), expected, "start {}", ask);
                }
                Ok(())
            })
            .unwrap();
    }
}
