//! `dcn_exposed_reduce`: the cross-slice (DCN) gradient reduce runs after the backward pass has
//! ended, as an exposed tail of every step.

use xlens_roofline::{Span, TimeClass, class_of};
use xlens_xplane::{Picos, names};

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence::duration_text;
use crate::evidence::{self, async_phase, covered, union};
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Severity};
use crate::profile::HostProfile;
use crate::units::TimeBase;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DcnExposedReduce;

const META: DetectorMeta = DetectorMeta {
    id: "dcn_exposed_reduce",
    title: "The cross-slice (DCN) gradient reduce is exposed at the end of the step",
    severity: Severity::P1,
    needs: &[Need::DeviceTimeline, Need::Steps],
    doc: DetectorDoc {
        detects: "A gradient reduction (all-reduce or reduce-scatter, synchronous or an async window) that runs at \
                  the end of the step after the last compute op of the core, with no compute left to hide it, \
                  while `MegaScale:` host events (the DCN transport of multi-slice runs: send, receive, reduction) \
                  are active: the cross-slice data-parallel reduce is exposed.",
        why: "DCN bandwidth per chip is one to two orders of magnitude below ICI bandwidth. When the cross-slice \
              gradient reduce starts only after the whole backward pass (one big reduce at the end of the step) \
              every step pays its full latency; done per layer as gradients become ready, or on a fraction of the \
              bytes, it hides behind the backward pass.",
        evidence: "The reduce tail per step and its share of the step; the reduce ops at the tail with their bytes \
                   and JAX source line; one tail on the timeline; the MegaScale events that overlap it, the share \
                   of the tail they cover, the DCN payload per step, the achieved DCN bandwidth against the chip's \
                   DCN bandwidth and the slices involved.",
        thresholds: "Report when the reduce tail after the last compute op is at least \
                     `dcn_exposed_reduce.min_tail_pct` (default 5) % of the step and MegaScale (DCN) host events \
                     cover at least `dcn_exposed_reduce.min_dcn_overlap` (default 0.5) of it. A tail without DCN \
                     activity is an ICI collective, reported by `exposed_collective`. Severity P1, P0 from 20 % of \
                     the step, P2 under 2 %.",
        fix: "Overlap the cross-slice reduce with the backward pass: reduce gradients in buckets (per layer or per \
              loop iteration) as soon as they are produced instead of once at the end, so the DCN transfer runs \
              under the remaining backward compute; reduce hierarchically (reduce-scatter inside the slice over ICI, \
              all-reduce only the 1/N shard across slices over DCN, all-gather inside the slice), which shrinks the \
              DCN bytes N-fold (sharding the optimizer state over the data axis gives this for free); accumulate \
              gradients over several micro-batches before one cross-slice reduce; send gradients in bf16.",
        fix_lines: FixLines {
            jax: "on TPU, MaxText's multi-slice configs set `--xla_tpu_enable_data_parallel_all_reduce_opt=true` and \
                  `--xla_tpu_data_parallel_opt_different_sized_ops=true` in `LIBTPU_INIT_ARGS` for this.",
            tensorflow: "under `tf.distribute`, pack the all-reduce into buckets with \
                         `tf.distribute.experimental.CommunicationOptions(bytes_per_pack=...)`; on TPU the \
                         `LIBTPU_INIT_ARGS` flags `--xla_tpu_enable_data_parallel_all_reduce_opt=true` and \
                         `--xla_tpu_data_parallel_opt_different_sized_ops=true` apply as well.",
            pytorch_xla: "`xm.optimizer_step` reduces every gradient once at the end: with \
                          `XlaFullyShardedDataParallel` or SPMD sharding the reduce-scatter runs per layer instead; \
                          on TPU the `LIBTPU_INIT_ARGS` flags `--xla_tpu_enable_data_parallel_all_reduce_opt=true` \
                          and `--xla_tpu_data_parallel_opt_different_sized_ops=true` apply as well.",
        },
    },
};

/// True for the gradient-reduction families.
fn is_reduce(family: &str) -> bool {
    family.starts_with("all-reduce") || family.starts_with("reduce-scatter")
}

/// One core's reduce tail in one step.
struct Tail {
    plane: String,
    start: Picos,
    end: Picos,
    /// Reduce time inside `[start, end)`.
    reduce: Picos,
    /// The reduce intervals inside it.
    pieces: Vec<(Picos, Picos)>,
}

/// The end of the last compute (matmul, vector, data formatting) segment inside each step
/// window, from segments fed in time order. Segments do not overlap, so the last compute segment
/// that starts before a window's end is the one that ends last; it counts when it ends after
/// the window's start.
struct LastCompute {
    /// (end, start, position in the windows), by end.
    by_end: Vec<(Picos, Picos, usize)>,
    /// Windows before `next` (in `by_end`) are decided.
    next: usize,
    last: Option<(Picos, Picos)>,
    out: Vec<Option<Picos>>,
}

impl LastCompute {
    fn new(windows: &[(usize, Picos, Picos)]) -> LastCompute {
        let mut by_end: Vec<(Picos, Picos, usize)> =
            windows.iter().enumerate().map(|(i, &(_, lo, hi))| (hi, lo, i)).collect();
        by_end.sort();
        LastCompute { by_end, next: 0, last: None, out: vec![None; windows.len()] }
    }

    fn segment(&mut self, s: xlens_roofline::Interval) {
        if !matches!(s.class, TimeClass::Matmul | TimeClass::Vector | TimeClass::DataFormatting) {
            return;
        }
        self.decide(s.start);
        self.last = Some((s.start, s.end));
    }

    /// Decides every window that ends at or before `until`.
    fn decide(&mut self, until: Picos) {
        while let Some(&(hi, lo, i)) = self.by_end.get(self.next) {
            if hi > until {
                break;
            }
            self.out[i] = self.last.filter(|&(_, end)| end > lo).map(|(_, end)| end.min(hi));
            self.next += 1;
        }
    }

    fn finish(mut self) -> Vec<Option<Picos>> {
        self.decide(Picos(i64::MAX));
        self.out
    }
}

impl Detector for DcnExposedReduce {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let Some(measured) = measure(host)? else { return Ok(()) };
        let Some(score) = score(&measured, config) else { return Ok(()) };
        out.push(describe(self, host, &measured, &score));
        Ok(())
    }
}

/// What a host's profile shows: the reduce tails of every core-step and the DCN (MegaScale) events.
struct Measured<'a> {
    step_ms: f64,
    /// Steps in the profile.
    steps: usize,
    megascale: Vec<xlens_xplane::Event<'a>>,
    tails: Vec<Tail>,
    /// Reduce op name → (family, bytes, program-independent occurrences at the tail).
    at_tail: std::collections::BTreeMap<String, (String, f64, u64)>,
    core_steps: usize,
}

/// Reads the steps, the MegaScale events and each core's reduce tails; `None` on a single-slice run.
fn measure(host: &HostProfile) -> Result<Option<Measured<'_>>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let step_ms = host.step_ms().ok_or_else(|| Skip::because("the profile has no step times"))?;
    // DCN activity: MegaScale transport events on the host. Without any, no reduce crosses
    // slices (single-slice run): nothing to attribute.
    let megascale: Vec<xlens_xplane::Event<'_>> =
        evidence::host_events(host, |n| n.starts_with("MegaScale:")).collect();
    if megascale.is_empty() {
        return Ok(None);
    }
    let mut measured = Measured {
        step_ms,
        steps: steps.steps.len(),
        megascale,
        tails: Vec::new(),
        at_tail: std::collections::BTreeMap::new(),
        core_steps: 0,
    };
    for plane in host.space().tpu_tensor_cores() {
        measured.add_core(plane, steps);
    }
    Ok(Some(measured))
}

impl Measured<'_> {
    /// Adds one core's reduce tails, one per step.
    fn add_core(&mut self, plane: &xlens_xplane::Plane, steps: &xlens_roofline::Steps) {
        let ordinal = evidence::device_ordinal(plane);
        // This core's steps: (index, window).
        let windows: Vec<(usize, Picos, Picos)> = steps
            .steps
            .iter()
            .enumerate()
            .filter_map(|(k, step)| {
                let core = step.cores.iter().find(|c| c.core == ordinal)?;
                Some((k, core.marker_start, core.marker_start + step.duration))
            })
            .collect();
        // One streamed walk of the op line: the last compute op of each step, the synchronous
        // reduces and the async windows.
        let is_sync_reduce = |info: &evidence::DeviceOpInfo| {
            class_of(&info.category) == TimeClass::CollectiveExposed
                && async_phase(&info.name).is_none()
                && is_reduce(&info.category)
        };
        let Some(walk) = evidence::walk_collectives(
            plane,
            is_sync_reduce,
            || LastCompute::new(&windows),
            |last_compute, s| last_compute.segment(s),
        ) else {
            return;
        };
        let infos = walk.infos;
        let last_compute = walk.segments.finish();
        // Reduce intervals: async reduce windows, and synchronous reduces.
        let mut reduces: Vec<(Picos, Picos, String, usize)> = Vec::new();
        for w in walk.windows {
            let family = async_phase(&w.name).map_or("", |(base, _, _)| base);
            if is_reduce(family) {
                reduces.push((w.start, w.end, w.name, w.info));
            }
        }
        reduces.extend(walk.sync.iter().map(|op| (op.start, op.end, infos[op.info].name.clone(), op.info)));
        self.add_tails(plane.name(), &windows, last_compute, &reduces, &infos);
    }

    /// Adds the reduce tail after the last compute op of each of a core's steps, and counts its
    /// reduce ops at the tail.
    fn add_tails(
        &mut self,
        plane: &str,
        windows: &[(usize, Picos, Picos)],
        last_compute: Vec<Option<Picos>>,
        reduces: &[(Picos, Picos, String, usize)],
        infos: &[evidence::DeviceOpInfo],
    ) {
        let merged = union(reduces.iter().map(|r| Span::new(r.0, r.1)).collect());
        for (&(_, _, hi), last) in windows.iter().zip(last_compute) {
            self.core_steps += 1;
            let Some(last) = last else { continue };
            let reduce = covered(&merged, last, hi);
            if reduce.0 <= 0 {
                continue;
            }
            let end = reduces.iter().filter(|r| r.1 > last && r.0 < hi).map(|r| r.1.min(hi)).max().unwrap_or(hi);
            for r in reduces.iter().filter(|r| r.1 > last && r.0 < hi) {
                let info = &infos[r.3];
                let family = async_phase(&r.2).map_or(info.category.clone(), |(b, _, _)| b.to_owned());
                let e = self.at_tail.entry(r.2.clone()).or_insert((family, 0.0, 0));
                e.1 = e.1.max(info.bytes_accessed);
                e.2 += 1;
            }
            let from = merged.partition_point(|m| m.end <= last);
            let pieces: Vec<(Picos, Picos)> = merged[from..]
                .iter()
                .take_while(|m| m.start < hi)
                .map(|m| (m.start.max(last), m.end.min(hi)))
                .filter(|m| m.0 < m.1)
                .collect();
            self.tails.push(Tail { plane: plane.to_owned(), start: last, end, reduce, pieces });
        }
    }
}

/// How much the reduce tail costs and how much of it DCN transfers cover.
struct Score {
    /// Reduce tail per core-step, in ms.
    tail_ms: f64,
    impact: Impact,
    /// Share of all tails the MegaScale events cover.
    dcn_fraction: f64,
    /// Share of the best-covered core's tails they cover.
    best_core_fraction: f64,
}

/// Scores the tails against the thresholds; `None` when they are too short or not on DCN.
fn score(m: &Measured<'_>, config: &ScanConfig) -> Option<Score> {
    let t = &config.thresholds.dcn_exposed_reduce;
    let (tails, megascale) = (&m.tails, &m.megascale);
    if tails.is_empty() || m.core_steps == 0 {
        return None;
    }
    let total_tail: Picos = tails.iter().map(|t| t.reduce).sum();
    let tail_ms = total_tail.as_ms_f64() / m.core_steps as f64;
    let impact = Impact::of(tail_ms, Some(m.step_ms));
    if impact.pct_of_step < t.min_tail_pct {
        return None;
    }
    let dcn = union(megascale.iter().map(|e| Span::new(e.start(), e.end())).collect());
    let dcn_cover_of = |t: &Tail| t.pieces.iter().map(|&(s, e)| covered(&dcn, s, e)).sum::<Picos>();
    let dcn_cover: Picos = tails.iter().map(dcn_cover_of).sum();
    let dcn_fraction = if total_tail.0 > 0 { dcn_cover.0 as f64 / total_tail.0 as f64 } else { 0.0 };
    // The host traces each DCN transfer once, not per core: judge the coverage on the
    // best-covered core.
    let best_core_fraction = {
        let mut by_plane: std::collections::BTreeMap<&str, (Picos, Picos)> = std::collections::BTreeMap::new();
        for tail in tails {
            let e = by_plane.entry(tail.plane.as_str()).or_default();
            e.0 += tail.reduce;
            e.1 += dcn_cover_of(tail);
        }
        by_plane
            .values()
            .map(|(span, cov)| if span.0 > 0 { cov.0 as f64 / span.0 as f64 } else { 0.0 })
            .fold(0.0, f64::max)
    };
    if best_core_fraction < t.min_dcn_overlap {
        return None;
    }
    Some(Score { tail_ms, impact, dcn_fraction, best_core_fraction })
}

/// The reduce ops at the tail, most frequent first.
fn ranked(at_tail: &std::collections::BTreeMap<String, (String, f64, u64)>) -> Vec<(&String, &(String, f64, u64))> {
    let mut ranked: Vec<(&String, &(String, f64, u64))> = at_tail.iter().collect();
    ranked.sort_by(|a, b| b.1.2.cmp(&a.1.2).then(a.0.cmp(b.0)));
    ranked
}

/// The finding: the tail's cost and the reduce ops that make it.
fn describe(detector: &DcnExposedReduce, host: &HostProfile, m: &Measured<'_>, s: &Score) -> Finding {
    let ranked = ranked(&m.at_tail);
    let names: Vec<&str> = ranked.iter().take(2).map(|(n, _)| n.as_str()).collect();
    Finding::new(
        detector,
        Severity::from_impact(s.impact.pct_of_step, META.severity),
        format!(
            "Every step ends with {} ({:.1} % {}) of cross-slice gradient reduction ({}) after \
                 the last compute op, with DCN transfers in flight and nothing to overlap them with.",
            duration_text(s.tail_ms),
            s.impact.pct_of_step,
            TimeBase::of(host).of_the(),
            names.join(", ")
        ),
        evidence_of(host, m, s, &ranked),
        s.impact,
    )
}

/// The evidence: the tail metrics, the reduce ops at the tail, one tail and its DCN events.
fn evidence_of(
    host: &HostProfile,
    m: &Measured<'_>,
    s: &Score,
    ranked: &[(&String, &(String, f64, u64))],
) -> Vec<Evidence> {
    let (tail_ms, impact, dcn_fraction, best_core_fraction) =
        (s.tail_ms, s.impact, s.dcn_fraction, s.best_core_fraction);
    let (tails, megascale, core_steps) = (&m.tails, &m.megascale, m.core_steps);
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        Evidence::metric(
            "reduce_tail_time",
            format!("reduce tail after the last compute op {}", tb.per()),
            tail_ms,
            "ms",
        ),
        Evidence::metric("reduce_tail_share", format!("reduce tail share {}", tb.of_the()), impact.pct_of_step, "%"),
        Evidence::metric(
            "dcn_tail_coverage",
            "share of the tail covered by DCN (MegaScale) events",
            best_core_fraction,
            "ratio",
        ),
    ];
    if (dcn_fraction - best_core_fraction).abs() > 1e-9 {
        evidence.push(Evidence::note(format!(
            "over all cores the MegaScale events cover {:.0} % of the reduce tails (the host traces each DCN \
                 transfer once, not per core)",
            100.0 * dcn_fraction
        )));
    }
    let module = host.main_module();
    for (name, (family, bytes, count)) in ranked.iter().take(3) {
        evidence.push(Evidence::note(format!(
            "{name} ({family}) ends {count} of {core_steps} core-steps after the last compute op{}",
            if *bytes > 0.0 { format!(", {:.2} MB per occurrence", bytes / 1e6) } else { String::new() }
        )));
        if let Some(m) = module
            && let Some(instr) = m.instruction_by_name(name)
        {
            evidence.push(evidence::instruction(m, instr.id()));
        }
    }
    if let Some(tail) = tails.first() {
        evidence.push(evidence::event_parts(
            host,
            &tail.plane,
            names::line::XLA_OPS,
            "reduce tail after the last compute op",
            tail.start,
            tail.end - tail.start,
        ));
    }
    let first_tail = tails.first().map(|t| (t.start, t.end));
    let overlapping: Vec<&xlens_xplane::Event<'_>> =
        megascale.iter().filter(|e| first_tail.is_some_and(|(s, end)| e.start() < end && e.end() > s)).collect();
    for ev in overlapping.iter().take(3) {
        evidence.push(evidence::event(host, ev));
    }
    if let Some(note) = dcn_traffic(host, megascale, m.steps) {
        evidence.push(note);
    }
    evidence
}

/// DCN payload per step, achieved bandwidth of the transport events against the chip's DCN
/// bandwidth, and the slices, from the MegaScale events' stats.
fn dcn_traffic(host: &HostProfile, events: &[xlens_xplane::Event<'_>], steps: usize) -> Option<Evidence> {
    let plane = host.space().host_threads()?;
    let payload = plane.stat_id("payload_size_bytes")?;
    let (src, dst) = (plane.stat_id("dcn_source_slice_id"), plane.stat_id("dcn_destination_slice_id"));
    let mut bytes = 0.0f64;
    let mut busy = Picos::ZERO;
    let mut slices: std::collections::BTreeSet<(i64, i64)> = std::collections::BTreeSet::new();
    for ev in events.iter().filter(|e| e.name().contains("Send")) {
        let Some(b) = ev.stat(payload).and_then(|s| s.as_f64()) else { continue };
        bytes += b;
        busy += ev.duration();
        let slice = |id: Option<xlens_xplane::StatMetadataId>| id.and_then(|i| ev.stat(i)).and_then(|s| s.as_i64());
        if let (Some(a), Some(b)) = (slice(src), slice(dst)) {
            slices.insert((a, b));
        }
    }
    if bytes <= 0.0 || busy.0 <= 0 {
        return None;
    }
    let achieved = bytes / busy.as_secs_f64();
    let mut text = format!(
        "DCN sends carry {:.1} KB {} at {:.2} GB/s achieved",
        bytes / 1e3 / steps.max(1) as f64,
        TimeBase::of(host).per(),
        achieved / 1e9
    );
    if let Some(bw) = host.chip().and_then(|c| c.spec()).and_then(|s| s.dcn_bandwidth) {
        text.push_str(&format!(
            " ({:.0} % of the chip's {:.2} GB/s DCN bandwidth)",
            100.0 * achieved / bw.bytes_per_s(),
            bw.bytes_per_s() / 1e9
        ));
    }
    if !slices.is_empty() {
        let pairs: Vec<String> = slices.iter().map(|(a, b)| format!("slice {a} → slice {b}")).collect();
        text.push_str(&format!("; {}", pairs.join(", ")));
    }
    Some(Evidence::note(text))
}

#[cfg(test)]
mod tests {
    use crate::Severity;
    use crate::testing::metric;
    use crate::testing::{report_of, run_on, testdata};

    #[test]
    fn finds_the_cross_slice_all_reduce_after_the_backward_pass() {
        let findings = run_on("dcn_exposed_reduce", &testdata("tpu/tpu_dcn_tail"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.severity, Severity::P1);
        // all-reduce-start.20 (1 us) + all-reduce-done.20 (45 us) after the infeed that follows the
        // last compute op, in a ~306 us step.
        let tail = metric(f, "reduce tail after the last compute op per step");
        assert!((0.043..0.050).contains(&tail), "{tail}");
        assert!((13.0..17.0).contains(&f.impact.pct_of_step), "{:?}", f.impact);
        assert!(metric(f, "share of the tail covered by DCN (MegaScale) events") > 0.9);
        let text: Vec<String> = f.evidence.iter().map(|e| e.to_string()).collect();
        let text = text.join("\n");
        assert!(text.contains("all-reduce-start.20 (all-reduce) ends 24 of 24 core-steps"), "{text}");
        assert!(text.contains("from jit(train_step)/pmean at train.py:118"), "{text}");
        assert!(
            text.contains("event MegaScale: Communication Transport Send on host0 /host:CPU / megascale"),
            "{text}"
        );
        // 96 KiB per step over ~41 us of send (~2.4 GB/s), against v5e's 25 Gbit/s (3.125 GB/s).
        assert!(
            text.contains("DCN sends carry 98.3 KB per step at 2.4") && text.contains("slice 0 → slice 1"),
            "{text}"
        );
        assert!(text.contains("of the chip's 3.12 GB/s DCN bandwidth"), "{text}");
    }

    #[test]
    fn steps_that_end_with_compute_or_without_dcn_have_no_dcn_tail() {
        // tpu_exposed_collective's reduce-scatter is mid-step; tpu_basic ends with compute; neither
        // has DCN traffic.
        for dir in ["tpu/tpu_basic", "tpu/tpu_healthy", "tpu/tpu_exposed_collective", "tpu/tpu_straggler"] {
            assert!(run_on("dcn_exposed_reduce", &testdata(dir)).is_empty(), "{dir}");
        }
        let report = report_of("dcn_exposed_reduce", &testdata("corpus/clean"));
        assert!(report.findings.is_empty() && report.skipped.len() == 1, "{:?}", report.skipped);
    }

    #[test]
    fn a_tail_reduce_without_dcn_traffic_is_left_to_exposed_collective() {
        use xlens_testkit::synth::{fixture, tpu_profile};
        use xlens_xplane::Space;
        // The same profile without the MegaScale host events.
        let spec = xlens_testkit::synth::SynthSpec { megascale: None, ..fixture("tpu_dcn_tail").unwrap() };
        let space = Space::parse(tpu_profile(&spec).into()).unwrap();
        let report =
            crate::scan(&crate::Profile::from_space("host0", space), &crate::ScanConfig::only("dcn_exposed_reduce"));
        assert!(report.skipped.is_empty() && report.findings.is_empty(), "{report:#?}");
    }
}
