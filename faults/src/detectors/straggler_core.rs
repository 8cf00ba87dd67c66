//! `straggler_core`: one core (or one host) computes longer than the others every step, and
//! everyone else waits for it.

use std::collections::BTreeMap;

use xlens_roofline::{CATEGORIES_WITH_INNER_OPS, StepAnatomy, TimeClass};
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, DetectorDoc, DetectorMeta, Need, Skip};
use crate::evidence;
use crate::finding::{Evidence, Finding, Findings, FixLines, HostImpact, Impact, Severity};
use crate::profile::HostProfile;
use crate::report::HostSummary;
use crate::units::{TimeBase, TimeUnit};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct StragglerCore;

const META: DetectorMeta = DetectorMeta {
    id: "straggler_core",
    title: "A straggler core or host computes longer than the others",
    severity: Severity::P1,
    needs: &[Need::DeviceTimeline, Need::Steps, Need::MultiCore],
    doc: DetectorDoc {
        detects: "A TensorCore whose compute time per step (matmul, vector and data-formatting work from its own \
                  step anatomy) exceeds the median core's, so the others wait for it at the next collective or \
                  at the step end; and, across hosts, a host whose compute per step is an outlier by the modified \
                  z-score XProf uses for straggler hosts (facts §7.2). Only compute counts: a core that is slow \
                  because it waits on communication is a victim, not the straggler.",
        why: "Synchronous data-parallel and model-parallel steps run at the pace of the slowest participant. A \
              core with more work (an overloaded mixture-of-experts expert, uneven sequence packing, an unbalanced \
              shard) or a slower chip (thermal throttling, a faulty host) stretches every step for the whole \
              slice; merged multi-host step times hide it.",
        evidence: "Per-core (per-host) compute per step; the slowest one, how many steps it was the slowest, its \
                   extra compute over the median split into matmul and vector work; its collective wait and idle \
                   time next to the median core's; the ops with the most extra time on it; across hosts the \
                   median, the MAD and the modified z-score.",
        thresholds: "Report a core (host) whose mean compute per step exceeds the median core's (host's) by at least \
                     `straggler_core.min_spread_pct` (default 10) %. Across three or more hosts the host must also \
                     have a modified z-score 0.6745 × (x − median) ÷ max(MAD, 1 % of the median) above \
                     `straggler_core.min_host_z` (default 3.5, XProf's); with two hosts the spread alone decides. \
                     The impact is the extra compute per step. Severity P1, P0 from 20 % of the step, P2 under 2 %.",
        fix: "Balance the work: for mixture-of-experts models raise the router's load-balancing loss weight, set an \
              expert capacity factor and drop or reroute overflow tokens, or shard experts so hot experts share \
              cores; pack sequences to equal token counts per device and shard the batch evenly; check that the \
              mesh puts the same amount of data on every device (uneven shapes pad some shards). When the slow core \
              or host does the same ops as the others only slower, suspect the hardware (throttling, a bad host): \
              compare its op times run to run and drain the host.",
        fix_lines: FixLines { jax: "", tensorflow: "", pytorch_xla: "" },
    },
};

/// Compute (matmul + vector + data formatting) of one partition.
fn compute(a: &StepAnatomy) -> Picos {
    a.compute()
}

/// One core's figures over the steps it took part in.
#[derive(Debug, Default)]
struct CoreStats {
    plane: String,
    steps: Vec<StepAnatomy>,
    /// Time per op (innermost ops, not `while`/`call` parents) inside the steps.
    op_time: BTreeMap<String, Picos>,
}

impl CoreStats {
    fn mean(&self, f: impl Fn(&StepAnatomy) -> Picos) -> Picos {
        let n = self.steps.len().max(1) as i128;
        let total: i128 = self.steps.iter().map(f).map(|p| i128::from(p.0)).sum();
        Picos(i64::try_from(total / n).unwrap_or(i64::MAX))
    }
}

impl Detector for StragglerCore {
    const META: DetectorMeta = META;

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let cores = core_stats(host)?;
        let Some(score) = score(host, &cores, config) else { return Ok(()) };
        out.push(describe(self, host, &cores, &score));
        Ok(())
    }

    fn run_session(&self, summaries: &[HostSummary], config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        let hosts = host_compute(summaries);
        if hosts.len() < 2 {
            return Err(Skip::because("fewer than two hosts with steps to compare"));
        }
        let Some(score) = score_session(&hosts, config) else { return Ok(()) };
        out.push(describe_session(self, &hosts, &score));
        Ok(())
    }
}

/// Per core: each step's anatomy and each op's time, from the shared device timeline.
fn core_stats(host: &HostProfile) -> Result<BTreeMap<u32, CoreStats>, Skip> {
    let steps = host.steps().map_err(Skip::because)?;
    let _ = steps;
    // Per core: each step's anatomy and each op's time, from the shared device timeline.
    let timeline = host.device_timeline().map_err(Skip::because)?;
    let mut cores: BTreeMap<u32, CoreStats> = BTreeMap::new();
    for core in &timeline.cores {
        let Some(plane) = host.space().planes().get(core.plane_index) else { continue };
        let meta = xlens_roofline::op_metadata_by_position(plane);
        let mut stats = CoreStats {
            plane: plane.name().to_owned(),
            steps: core.steps.iter().map(|s| s.anatomy).collect(),
            ..CoreStats::default()
        };
        for (agg, m) in core.ops.iter().zip(&meta) {
            let Some(m) = m else { continue };
            if agg.time.0 > 0 && !CATEGORIES_WITH_INNER_OPS.contains(&m.category.as_str()) {
                *stats.op_time.entry(m.name.clone()).or_default() += agg.time;
            }
        }
        if !stats.steps.is_empty() {
            cores.insert(core.core, stats);
        }
    }
    if cores.len() < 2 {
        let reason = if host.space().tpu_tensor_cores().is_empty() {
            "a TPU check (TensorCores of one host); GPU and CPU devices are compared across hosts"
        } else {
            "fewer than two TensorCores ran ops to compare"
        };
        return Err(Skip::because(reason));
    }
    Ok(cores)
}

/// The slowest core against the median one.
struct Score<'c> {
    slow: u32,
    slow_stats: &'c CoreStats,
    /// The core whose compute is closest to the median.
    typical: u32,
    typical_stats: &'c CoreStats,
    /// Median and slowest compute per step, in picoseconds.
    med: f64,
    slow_compute: f64,
    /// How much longer the slowest core computes than the median, in %.
    spread: f64,
    /// Steps in which the slowest core was the slowest.
    slowest_in: usize,
    impact: Impact,
}

/// Finds the slowest core and decides whether it straggles.
fn score<'c>(host: &HostProfile, cores: &'c BTreeMap<u32, CoreStats>, config: &ScanConfig) -> Option<Score<'c>> {
    let t = &config.thresholds.straggler_core;
    let mut means: Vec<f64> = cores.values().map(|c| c.mean(compute).0 as f64).collect();
    let med = evidence::median_of(&mut means);
    let (&slow, slow_stats) =
        cores.iter().max_by(|a, b| a.1.mean(compute).cmp(&b.1.mean(compute)).then(b.0.cmp(a.0)))?;
    let slow_compute = slow_stats.mean(compute).0 as f64;
    if med <= 0.0 {
        return None;
    }
    let spread = 100.0 * (slow_compute - med) / med;
    if spread < t.min_spread_pct {
        return None;
    }
    // The median core: the one whose compute is closest to the median (lowest ordinal on ties).
    let (&typical, typical_stats) = cores.iter().min_by(|a, b| {
        let d = |c: &CoreStats| (c.mean(compute).0 as f64 - med).abs();
        d(a.1).total_cmp(&d(b.1)).then(a.0.cmp(b.0))
    })?;
    let n_steps = slow_stats.steps.len();
    let slowest_in = (0..n_steps)
        .filter(|&k| {
            cores.iter().filter_map(|(&c, s)| s.steps.get(k).map(|a| (compute(a), std::cmp::Reverse(c)))).max()
                == Some((compute(&slow_stats.steps[k]), std::cmp::Reverse(slow)))
        })
        .count();
    let extra_ms = (slow_compute - med) / 1e9;
    let impact = Impact::of(extra_ms, host.step_ms());
    Some(Score { slow, slow_stats, typical, typical_stats, med, slow_compute, spread, slowest_in, impact })
}

/// The evidence: compute per core, where the slow core's extra time goes, the ops that take longer on it.
fn evidence_of(host: &HostProfile, cores: &BTreeMap<u32, CoreStats>, s: &Score<'_>) -> Vec<Evidence> {
    let (slow, slow_stats, typical, typical_stats) = (s.slow, s.slow_stats, s.typical, s.typical_stats);
    let (slow_compute, med, spread, slowest_in) = (s.slow_compute, s.med, s.spread, s.slowest_in);
    let n_steps = slow_stats.steps.len();
    // Every figure of the core comparison in one unit, chosen by the largest (a step's compute).
    let unit = TimeUnit::for_ms(slow_compute / 1e9);
    let ms = |p: Picos| p.as_ms_f64();
    let per_core: Vec<String> =
        cores.iter().map(|(c, s)| format!("core {c}: {}", unit.text(ms(s.mean(compute))))).collect();
    let delta = |f: &dyn Fn(&StepAnatomy) -> Picos| ms(slow_stats.mean(f)) - ms(typical_stats.mean(f));
    let signed = |v: f64| if v >= 0.0 { format!("+{}", unit.number(v)) } else { unit.number(v) };
    let exposed = |a: &StepAnatomy| a.get(TimeClass::CollectiveExposed);
    let tb = TimeBase::of(host);
    let mut evidence = vec![
        unit.metric("slowest_core_compute_time", format!("slowest core compute {}", tb.per()), slow_compute / 1e9),
        unit.metric("median_core_compute_time", format!("median core compute {}", tb.per()), med / 1e9),
        Evidence::metric("compute_spread", "compute spread over the median core", spread, "%"),
        Evidence::note(format!("compute {}: {}", tb.per(), per_core.join(", "))),
        Evidence::note(format!(
            "core {slow} ({}) was the slowest in {slowest_in} of {n_steps} steps",
            slow_stats.plane
        )),
        Evidence::note(format!(
            "its extra time is compute: matmul {}, vector {}, data formatting {} {u} {per} against core \
             {typical}; collective wait {} vs {} {u}, idle {} vs {} {u}",
            signed(delta(&|a| a.matmul)),
            signed(delta(&|a| a.vector)),
            signed(delta(&|a| a.data_formatting)),
            unit.number(ms(slow_stats.mean(exposed))),
            unit.number(ms(typical_stats.mean(exposed))),
            unit.number(ms(slow_stats.mean(|a| a.idle))),
            unit.number(ms(typical_stats.mean(|a| a.idle))),
            u = unit.label_ascii(),
            per = tb.per(),
        )),
    ];
    extra_ops_evidence(host, s, &mut evidence);
    evidence
}

/// The ops with the most extra time on the slow core, per step, with their instructions.
fn extra_ops_evidence(host: &HostProfile, s: &Score<'_>, evidence: &mut Vec<Evidence>) {
    let (slow, slow_stats, typical, typical_stats) = (s.slow, s.slow_stats, s.typical, s.typical_stats);
    // Ops with the most extra time on the slow core, per step.
    let per_step = |p: Picos, s: &CoreStats| p.as_ms_f64() / s.steps.len().max(1) as f64;
    let mut extra: Vec<(f64, &String, f64, f64)> = slow_stats
        .op_time
        .iter()
        .map(|(name, &time)| {
            let theirs = typical_stats.op_time.get(name).copied().unwrap_or_default();
            let (a, b) = (per_step(time, slow_stats), per_step(theirs, typical_stats));
            (a - b, name, a, b)
        })
        .filter(|e| e.0 > 0.0)
        .collect();
    extra.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let module = host.main_module();
    let tb = TimeBase::of(host);
    for (delta, name, mine, theirs) in extra.iter().take(5) {
        let unit = TimeUnit::for_ms(*mine);
        evidence.push(Evidence::note(format!(
            "{name}: {} {} on core {slow} vs {} on core {typical} (+{})",
            unit.text(*mine),
            tb.per(),
            unit.text(*theirs),
            unit.text(*delta)
        )));
        if let Some(m) = module
            && let Some(instr) = m.instruction_by_name(name)
        {
            evidence.push(evidence::instruction(m, instr.id()));
        }
    }
}

/// The finding: the slow core, how much longer it computes, and the evidence.
fn describe(detector: &StragglerCore, host: &HostProfile, cores: &BTreeMap<u32, CoreStats>, s: &Score<'_>) -> Finding {
    let (slow, spread, slow_compute, med, impact) = (s.slow, s.spread, s.slow_compute, s.med, s.impact);
    let unit = TimeUnit::for_ms(slow_compute / 1e9);
    let what = format!(
        "TensorCore {slow} computes {spread:.0} % longer {} than the median core ({} vs {} {}); \
             the other cores wait for it {}.",
        TimeBase::of(host).per(),
        unit.number(slow_compute / 1e9),
        unit.number(med / 1e9),
        unit.label_ascii(),
        TimeBase::of(host).every(),
    );
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    Finding::new(detector, severity, what, evidence_of(host, cores, s), impact)
}

/// One host of a session: name, mean compute and mean step time per step (picoseconds).
type HostCompute<'a> = (&'a str, f64, f64);

/// Per host: mean compute and step time per step.
fn host_compute(summaries: &[HostSummary]) -> Vec<HostCompute<'_>> {
    // Per host: mean compute and step time per step.
    let mut hosts: Vec<(&str, f64, f64)> = Vec::new();
    for host in summaries {
        let anatomy = &host.anatomy;
        if anatomy.is_empty() {
            continue;
        }
        let n = anatomy.len() as f64;
        let c: f64 = anatomy.iter().map(|a| compute(a).0 as f64).sum::<f64>() / n;
        let s: f64 = anatomy.iter().map(|a| a.step_time.0 as f64).sum::<f64>() / n;
        hosts.push((host.name.as_str(), c, s));
    }
    hosts
}

/// The slowest host against the others.
struct SessionScore<'a> {
    name: &'a str,
    /// Its compute per step.
    slow: f64,
    /// Hosts other than it.
    others: usize,
    /// Median compute of the other hosts and its median absolute deviation.
    med: f64,
    mad: f64,
    spread: f64,
    z: f64,
    /// Whether the z-score counts (three hosts or more).
    use_z: bool,
    impact: Impact,
}

/// Finds the slowest host and decides whether it straggles (spread, and z-score from three hosts).
fn score_session<'a>(hosts: &[HostCompute<'a>], config: &ScanConfig) -> Option<SessionScore<'a>> {
    let t = &config.thresholds.straggler_core;
    let &(name, slow, _) = hosts.iter().max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)))?;
    // The straggler against the other hosts (with two hosts, the median of both would
    // halve the gap).
    let others: Vec<&(&str, f64, f64)> = hosts.iter().filter(|h| h.0 != name).collect();
    let med = evidence::median_of(&mut others.iter().map(|h| h.1).collect::<Vec<_>>());
    let med_step = evidence::median_of(&mut others.iter().map(|h| h.2).collect::<Vec<_>>());
    let mad = evidence::median_of(&mut others.iter().map(|h| (h.1 - med).abs()).collect::<Vec<_>>());
    let scale = mad.max(0.01 * med);
    if med <= 0.0 || scale <= 0.0 {
        return None;
    }
    let spread = 100.0 * (slow - med) / med;
    let z = 0.6745 * (slow - med) / scale;
    let use_z = hosts.len() >= 3;
    if spread < t.min_spread_pct || (use_z && z <= t.min_host_z) {
        return None;
    }
    let extra_ms = (slow - med) / 1e9;
    let impact = Impact::of(extra_ms, Some(med_step / 1e9));
    Some(SessionScore { name, slow, others: others.len(), med, mad, spread, z, use_z, impact })
}

/// The session finding: the straggler host, the hosts slowest first, and the z-score.
fn describe_session(detector: &StragglerCore, hosts: &[HostCompute<'_>], s: &SessionScore<'_>) -> Finding {
    let (name, slow, med, mad, spread, z, use_z, impact) =
        (s.name, s.slow, s.med, s.mad, s.spread, s.z, s.use_z, s.impact);
    // Every figure in one unit, chosen by the largest (the slowest host's step).
    let unit = TimeUnit::for_ms(hosts.iter().map(|h| h.2).fold(slow, f64::max) / 1e9);
    // The slowest hosts first, at most eight listed (the session's host table has them all).
    let mut listed: Vec<&(&str, f64, f64)> = hosts.iter().collect();
    listed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    let mut per_host: Vec<String> = listed
        .iter()
        .take(8)
        .map(|(h, c, s)| format!("{h}: compute {}, step {}", unit.text(c / 1e9), unit.text(s / 1e9)))
        .collect();
    if listed.len() > 8 {
        per_host.push(format!("{} more host(s)", listed.len() - 8));
    }
    let mut evidence = vec![
        unit.metric("straggler_host_compute_time", "straggler host compute per step", slow / 1e9),
        unit.metric("other_hosts_compute_time_median", "median compute per step of the other hosts", med / 1e9),
        Evidence::metric("compute_spread", "compute spread over the other hosts", spread, "%"),
        Evidence::note(format!("per host, slowest first: {}", per_host.join("; "))),
    ];
    if use_z {
        evidence.push(Evidence::metric("modified_z_score", "modified z-score", z, "z"));
        evidence.push(unit.metric("host_compute_mad", "median absolute deviation of host compute", mad / 1e9));
    } else {
        evidence.push(Evidence::note("two hosts: the spread alone decides (a z-score needs three or more)"));
    }
    let severity = Severity::from_impact(impact.pct_of_step, META.severity);
    let mut finding = Finding::new(
        detector,
        severity,
        format!(
            "Host {name} computes {spread:.0} % longer per step than {} ({} vs {} {}); every synchronous \
                 step waits for it.",
            if s.others == 1 { "the other host" } else { "the median of the other hosts" },
            unit.number(slow / 1e9),
            unit.number(med / 1e9),
            unit.label_ascii()
        ),
        evidence,
        impact,
    );
    finding.hosts.push(HostImpact { host: name.to_owned(), severity, impact });
    finding
}

#[cfg(test)]
mod tests {
    use crate::testing::metric;
    use xlens_testkit::synth::{Item, OpSpec, Program, SynthSpec, tpu_profile};
    use xlens_xplane::Space;

    use crate::testing::{run_on, testdata};
    use crate::{Finding, HostProfile, Profile, ScanConfig, Severity, scan};

    #[test]
    fn finds_the_core_that_runs_every_op_slower() {
        // tpu_straggler: core 2 runs every op 1.3x slower.
        let findings = run_on("straggler_core", &testdata("tpu/tpu_straggler"));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("TensorCore 2 computes"), "{}", f.what);
        let spread = metric(f, "compute spread over the median core");
        assert!((25.0..35.0).contains(&spread), "{spread}");
        let text: Vec<String> = f.evidence.iter().map(|e| e.to_string()).collect();
        assert!(text.iter().any(|t| t == "core 2 (/device:TPU:2) was the slowest in 8 of 8 steps"), "{text:#?}");
        // The convolution (90 us nominal) gains the most.
        assert!(text.iter().any(|t| t.starts_with("convolution.1: ") && t.contains("on core 2")), "{text:#?}");
        // ~30 % of ~225 us of compute, in a ~370 us step.
        assert!((0.055..0.08).contains(&f.impact.ms_per_step), "{:?}", f.impact);
        assert_eq!(f.severity, Severity::P1);
    }

    #[test]
    fn balanced_cores_are_not_stragglers() {
        for dir in ["tpu/tpu_basic", "tpu/tpu_healthy", "tpu/tpu_exposed_collective", "tpu/tpu_vector_bound"] {
            assert!(run_on("straggler_core", &testdata(dir)).is_empty(), "{dir}");
        }
    }

    fn host(name: &str, scale: f64, seed: u64) -> HostProfile {
        let op = |n: &str, opcode: &str, cat: &str, us: f64| {
            OpSpec::new(n, opcode, cat, 1_000_000, 1_000_000, (us * scale * 1e6) as i64)
        };
        let program = Program {
            items: vec![
                Item::Op(op("fusion.1", "fusion", "loop fusion", 20.0)),
                Item::Op(op("convolution.2", "convolution", "convolution fusion", 80.0)),
                Item::Op(op("all-reduce.3", "all-reduce", "all-reduce", 10.0)),
            ],
        };
        let spec = SynthSpec { cores: 2, steps: 4, program, seed, ..SynthSpec::default() };
        HostProfile::new(name, Space::parse(tpu_profile(&spec).into()).unwrap())
    }

    fn session(scales: &[f64]) -> Vec<Finding> {
        let hosts = scales.iter().enumerate().map(|(i, &s)| host(&format!("host{i}"), s, i as u64 + 1)).collect();
        scan(&Profile::new(None, hosts), &ScanConfig::only("straggler_core")).findings
    }

    #[test]
    fn finds_the_straggler_host_by_modified_z_score() {
        let findings = session(&[1.0, 1.0, 1.0, 1.3]);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.host == crate::SESSION_HOST && f.what.starts_with("Host host3 computes 30 %"), "{f:#?}");
        assert_eq!(f.host_names().collect::<Vec<_>>(), ["host3"]);
        assert!(metric(f, "modified z-score") > 3.5, "{f:#?}");
        assert!((25.0..35.0).contains(&metric(f, "compute spread over the other hosts")));
        // 30 % of 100 us of compute.
        assert!((0.027..0.033).contains(&f.impact.ms_per_step), "{:?}", f.impact);
    }

    #[test]
    fn two_hosts_compare_by_spread_alone() {
        let findings = session(&[1.0, 1.25]);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(findings[0].what.starts_with("Host host1"), "{}", findings[0].what);
        assert!(findings[0].evidence.iter().any(|e| e.to_string().starts_with("two hosts: the spread alone decides")));
    }

    /// Two hosts, every op on one 12 % slower: against the median of both the gap would halve
    /// to 6 % and hide under the threshold; against the other host it is 12 %.
    #[test]
    fn a_host_twelve_percent_slower_than_its_only_peer_is_a_straggler() {
        let findings = session(&[1.0, 1.12]);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert!(f.what.starts_with("Host host1 computes 12 % longer per step than the other host"), "{}", f.what);
        assert!((11.0..13.0).contains(&metric(f, "compute spread over the other hosts")), "{f:#?}");
    }

    #[test]
    fn hosts_within_jitter_are_not_stragglers() {
        assert!(session(&[1.0, 1.02, 0.99, 1.01]).is_empty());
        assert!(session(&[1.0, 1.05]).is_empty());
    }
}
