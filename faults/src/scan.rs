//! `scan`: run every detector over a profile and build the [`Report`].

use std::path::Path;

use rayon::prelude::*;
use xlens_roofline::{FrameworkInfo, ProgramWork};
use xlens_xplane::{HostInput, Picos};

use crate::config::ScanConfig;
use crate::detector::{AnyDetector, Skip};
use crate::finding::{Evidence, Finding, Findings, HostImpact, SESSION_HOST, Scope, Severity};
use crate::profile::{HostNeeds, HostProfile, Profile, select_steps};

use crate::registry::DETECTORS;
use crate::report::{
    HostRow, HostSummary, Metrics, ProfileInfo, Report, Skipped, SkippedHost, Status, set_roofline, step_series,
};

/// The outcome of one host: its findings, per detector whether it ran (or why not), its summary.
///
/// It is the per-host record of a distributed scan: it serialises (to JSON with `serde_json`,
/// every number exact) on the worker that scanned the host, and [`combine`] turns the records
/// of a session's hosts into the report a one-machine scan gives.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostOutcome {
    /// Findings on this host (in the record with their `variant`, which the report's JSON leaves
    /// out but merging the hosts' findings needs, and their metrics' keys, which the report's
    /// frames carry).
    #[serde(with = "finding_records")]
    pub findings: Vec<Finding>,
    /// Per enabled detector, in registry order: `None` when it ran, else the skip reason.
    pub skips: Vec<Option<String>>,
    /// The host's summary.
    pub summary: HostSummary,
}

/// Findings with their variant and metric keys, for [`HostOutcome`]'s record.
mod finding_records {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::finding::{Evidence, Finding};

    #[derive(Serialize)]
    struct Out<'a> {
        variant: &'a str,
        /// The keys of the finding's metrics, in their order (the finding's JSON leaves them out).
        keys: Vec<&'a str>,
        finding: &'a Finding,
    }

    #[derive(Deserialize)]
    struct In {
        variant: String,
        #[serde(default)]
        keys: Vec<String>,
        finding: Finding,
    }

    pub(super) fn serialize<S: Serializer>(findings: &[Finding], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(findings.iter().map(|f| Out {
            variant: &f.variant,
            keys: f.evidence.iter().filter_map(Evidence::key).collect(),
            finding: f,
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Finding>, D::Error> {
        let records = Vec::<In>::deserialize(d)?;
        Ok(records
            .into_iter()
            .map(|r| {
                let mut finding = Finding { variant: r.variant, ..r.finding };
                let metric_keys = finding.evidence.iter_mut().filter_map(|e| match e {
                    Evidence::Metric { key, .. } => Some(key),
                    _ => None,
                });
                for (key, saved) in metric_keys.zip(r.keys) {
                    *key = saved.into();
                }
                finding
            })
            .collect())
    }
}

fn enabled_detectors(config: &ScanConfig) -> Vec<&'static dyn AnyDetector> {
    DETECTORS.iter().copied().filter(|d| config.enabled(d.id())).collect()
}

/// Runs the per-host detectors on one host (in parallel) and summarises it.
pub fn scan_host(host: &HostProfile, config: &ScanConfig) -> HostOutcome {
    scan_host_observed(host, config, &Quiet)
}

/// [`scan_host`], telling `observer` how long each phase took ([`ScanObserver::timed`]).
pub fn scan_host_observed(host: &HostProfile, config: &ScanConfig, observer: &dyn ScanObserver) -> HostOutcome {
    // The strict check of every field (what prost would not decode is a decode error, which
    // makes the report INCOMPLETE, though no analysis reads the field) beside the analyses
    // and detectors: a worker takes it when one is free, and the summary reads its result.
    let (_, (findings, skips, detectors)) = rayon::join(
        || {
            let start = std::time::Instant::now();
            host.space().check_structure();
            observer.timed(host.name(), "structure", start.elapsed());
        },
        || analyse(host, config, observer),
    );
    let start = std::time::Instant::now();
    let mut summary = HostSummary::of_page(host, !config.no_page);
    observer.timed(host.name(), "summary", start.elapsed());
    summary.skipped = detectors
        .iter()
        .zip(&skips)
        .filter_map(|(d, s)| s.as_ref().map(|reason| Skipped { id: d.id().to_owned(), reason: reason.clone() }))
        .collect();
    HostOutcome { findings, skips, summary }
}

/// The shared analyses, then the detectors: the findings, each detector's reason for not
/// running (in registry order) and the detectors that ran.
fn analyse(
    host: &HostProfile,
    config: &ScanConfig,
    observer: &dyn ScanObserver,
) -> (Vec<Finding>, Vec<Option<String>>, Vec<&'static dyn AnyDetector>) {
    let detectors = enabled_detectors(config);
    // Build the shared analyses first (cores in parallel inside): a detector job that found them
    // missing would build them while the other workers wait.
    // The GPU kernel statistics only the page shows, beside the analyses (a worker takes them
    // when one is free) rather than after them.
    let timed = |phase: &str, elapsed| observer.timed(host.name(), phase, elapsed);
    rayon::join(
        || host.prepare_timed(&timed),
        || {
            if !config.no_page {
                let start = std::time::Instant::now();
                let _ = host.kernel_stats();
                timed("kernel_stats", start.elapsed());
            }
        },
    );
    // One queue for every worker, the long-running detectors first: the short ones fill in
    // around them and the workers end together (rayon's split of the list in halves left the
    // last detector of the registry, launch_bound, to start late and run alone on GPU
    // profiles). The outcomes stay in registry order.
    let outcomes: Vec<Result<Vec<Finding>, Skip>> = xlens_xplane::queue::in_priority_order(
        &detectors,
        |_, d| LONG_RUNNING.iter().position(|&id| id == d.id()).unwrap_or(LONG_RUNNING.len()),
        |_, &d| {
            let start = std::time::Instant::now();
            let outcome = run_host(d, host, config);
            observer.timed(host.name(), d.id(), start.elapsed());
            outcome
        },
    );
    let mut findings = Vec::new();
    let mut skips = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(f) => {
                findings.extend(f);
                skips.push(None);
            }
            Err(Skip(reason)) => skips.push(Some(reason)),
        }
    }
    sort_findings(&mut findings);
    (findings, skips, detectors)
}

/// The detectors that read every op, kernel or step of a profile (the shared tables, again
/// line by line): the longest to run, started before the others, in this order, longest first
/// where they all run (gpu300: 36, 31, 22 and 11 ms; in registry order, the 11 ms one went
/// before the 22 ms one and one worker ended 10 ms after the other). Detectors that do not
/// apply to a profile return at once, so the order costs the others nothing.
const LONG_RUNNING: &[&str] =
    &["exposed_async_copy", "launch_bound", "truncated_capture", "input_starvation", "straggler_core"];

/// Runs every enabled detector over every host (hosts in parallel) and builds the report.
///
/// Output never depends on thread timing: findings are sorted by severity, impact, id and host.
pub fn scan(profile: &Profile, config: &ScanConfig) -> Report {
    let Some(range) = config.steps else {
        let outcomes: Vec<HostOutcome> = profile.hosts().par_iter().map(|h| scan_host(h, config)).collect();
        return finish(profile.run().map(str::to_owned), outcomes, Vec::new(), config);
    };
    let cut: Vec<Result<HostOutcome, SkippedHost>> = profile
        .hosts()
        .par_iter()
        .map(|h| {
            let space = select_steps(h.space(), range, None).map_err(|e| SkippedHost::new(h.name(), "", &e))?;
            Ok(scan_host(&HostProfile::new(h.name(), space), config))
        })
        .collect();
    let (outcomes, skipped): (Vec<_>, Vec<_>) = cut.into_iter().partition(Result::is_ok);
    let outcomes = outcomes.into_iter().filter_map(Result::ok).collect();
    finish(profile.run().map(str::to_owned), outcomes, skipped.into_iter().filter_map(Result::err).collect(), config)
}

/// What a session scan tells its caller as it goes, from worker threads, hosts in any order
/// (for a progress line, or to write each host's frames before the host is dropped).
pub trait ScanObserver: Sync {
    /// A host file begins to be read.
    fn started(&self, _host: &dyn HostInput) {}
    /// The host file is decoded; `meter` counts the bytes of its events walked so far (the
    /// detectors' first pass over them), for progress inside one large host.
    fn opened(&self, _host: &dyn HostInput, _meter: &xlens_xplane::WalkMeter) {}
    /// The host is scanned; it is handed to [`ScanObserver::release`] once this returns.
    fn finished(&self, _host: &HostProfile, _outcome: &HostOutcome) {}
    /// Takes each host once it is scanned and reported. The default drops it at once, so that
    /// memory follows the hosts being scanned; a program about to exit may keep the last one
    /// instead and skip tearing it down (its HLO modules alone are hundreds of thousands of
    /// allocations on a large program).
    fn release(&self, host: HostProfile) {
        drop(host);
    }
    /// One phase of a host's scan took `elapsed` (wall time): `open` (mapping and parsing the
    /// file), a shared analysis (`timeline`, `modules`, `host_ops`, `graph_kernels`, `gpu_costs`,
    /// `op_profile`, `steps`, `duty_cycle`, `anatomy`, `step_medians`, `chip`), a detector, by its id, or `summary`
    /// (the host's health snapshot after the detectors). Analyses built side by side overlap in
    /// time, and detectors run in parallel, so the phases add up to more than the host's wall
    /// time.
    fn timed(&self, _host: &str, _phase: &str, _elapsed: std::time::Duration) {}
}

/// The observer that listens to nothing.
struct Quiet;

impl ScanObserver for Quiet {}

/// A [`ScanObserver`] that only sees finished hosts.
struct Visit<'a>(&'a (dyn Fn(&HostProfile, &HostOutcome) + Sync));

impl ScanObserver for Visit<'_> {
    fn finished(&self, host: &HostProfile, outcome: &HostOutcome) {
        (self.0)(host, outcome);
    }
}

/// Scans the hosts of a session (run `run`) one by one as they are opened, in parallel, keeping
/// only each host's findings and summary: at most as many hosts are mapped at once as there are worker
/// threads, so a session of many large hosts scans in bounded memory. `visit` sees each host
/// with its findings before it is dropped (to write per-host frames); it is called from worker
/// threads in any order.
pub fn scan_session<H: HostInput>(
    run: Option<String>,
    hosts: &[H],
    config: &ScanConfig,
    visit: &(dyn Fn(&HostProfile, &HostOutcome) + Sync),
) -> Result<Report, xlens_xplane::Error> {
    scan_session_observed(run, hosts, config, &Visit(visit))
}

/// [`scan_session`], telling `observer` when each host starts, is decoded and is scanned.
pub fn scan_session_observed<H: HostInput>(
    run: Option<String>,
    hosts: &[H],
    config: &ScanConfig,
    observer: &dyn ScanObserver,
) -> Result<Report, xlens_xplane::Error> {
    let opened: Vec<Result<HostOutcome, (SkippedHost, xlens_xplane::Error)>> = hosts
        .par_iter()
        .map(|h| {
            observer.started(h);
            let file = h.display();
            let skip = |e: xlens_xplane::Error| (SkippedHost::new(h.host(), &file, &e), e);
            let start = std::time::Instant::now();
            let mut space = h.open().map_err(skip)?;
            if let Some(range) = config.steps {
                let selected = select_steps(&space, range, Some(h.path().unwrap_or(Path::new(&file)))).map_err(skip)?;
                space.check_file_unchanged().map_err(skip)?;
                space = selected;
            }
            observer.timed(h.host(), "open", start.elapsed());
            observer.opened(h, &space.walk_meter());
            let host = HostProfile::new(h.host().to_owned(), space);
            let outcome = scan_host_observed(&host, config, observer);
            // A file that changed while it was read (a run still being written, a profile
            // copied over) may have given a mix of two versions: the host is skipped.
            if let Err(e) = host.space().check_file_unchanged() {
                observer.release(host);
                return Err(skip(e));
            }
            observer.finished(&host, &outcome);
            observer.release(host);
            Ok(outcome)
        })
        .collect();
    let mut outcomes = Vec::new();
    let mut skipped_hosts = Vec::new();
    let mut first_error = None;
    for o in opened {
        match o {
            Ok(outcome) => outcomes.push(outcome),
            Err((skipped, e)) => {
                skipped_hosts.push(skipped);
                first_error.get_or_insert(e);
            }
        }
    }
    // Nothing could be read: the scan fails with the first host's error.
    if outcomes.is_empty()
        && let Some(e) = first_error
    {
        return Err(e);
    }
    Ok(finish(run, outcomes, skipped_hosts, config))
}

/// The session report of hosts scanned apart (on other machines, by [`scan_host`]): their
/// records merged, the cross-host detectors run, exactly what [`scan_session`] gives for the
/// same hosts. `skipped_hosts` are the host files the workers could not read.
///
/// ```
/// use xlens_faults::{HostOutcome, HostProfile, ScanConfig, combine, scan_host, scan_session};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tpu/tpu_straggler_host");
/// // The run's host files, as `xlens_source::discover` finds them.
/// let run = xlens_testkit::discover(dir);
/// let config = ScanConfig::default();
/// // Each host on its own worker, its outcome shipped as JSON.
/// let records: Vec<String> = run.hosts.iter().map(|h| {
///     let host = HostProfile::new(h.host.clone(), h.open().unwrap());
///     serde_json::to_string(&scan_host(&host, &config)).unwrap()
/// }).collect();
/// let outcomes: Vec<HostOutcome> = records.iter().map(|r| serde_json::from_str(r).unwrap()).collect();
/// let report = combine(run.run.clone(), outcomes, Vec::new(), &config);
/// let scanned = scan_session(run.run.clone(), &run.hosts, &config, &|_, _| {})?;
/// assert_eq!(serde_json::to_string(&report)?, serde_json::to_string(&scanned)?);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn combine(
    run: Option<String>,
    outcomes: Vec<HostOutcome>,
    skipped_hosts: Vec<SkippedHost>,
    config: &ScanConfig,
) -> Report {
    finish(run, outcomes, skipped_hosts, config)
}

/// Merges host outcomes (sorted by host name), runs the session detectors, builds the report.
fn finish(
    run: Option<String>,
    mut outcomes: Vec<HostOutcome>,
    skipped_hosts: Vec<SkippedHost>,
    config: &ScanConfig,
) -> Report {
    outcomes.sort_by(|a, b| a.summary.name.cmp(&b.summary.name));
    let detectors = enabled_detectors(config);
    let summaries: Vec<HostSummary> = outcomes.iter().map(|o| o.summary.clone()).collect();
    let mut host_findings = Vec::new();
    let mut ran = vec![false; detectors.len()];
    let mut reasons: Vec<Option<String>> = vec![None; detectors.len()];
    for outcome in outcomes {
        host_findings.extend(outcome.findings);
        for (d, skip) in outcome.skips.into_iter().enumerate() {
            match skip {
                None => ran[d] = true,
                Some(reason) => {
                    reasons[d].get_or_insert(reason);
                }
            }
        }
    }
    let mut findings = merge_hosts(host_findings, summaries.len());
    let framework = session_framework(&summaries);
    for (d, detector) in detectors.iter().enumerate() {
        let mut out = Findings::for_framework(framework.name);
        match detector.run_session(&summaries, config, &mut out) {
            Ok(()) => findings.extend(out.into_vec().into_iter().map(|mut f| {
                f.scope = Scope::Session;
                f.host = SESSION_HOST.to_owned();
                if f.id.is_empty() {
                    f.id = detector.id().to_owned();
                }
                f
            })),
            Err(Skip(reason)) => {
                reasons[d].get_or_insert(reason);
            }
        }
    }
    let skipped: Vec<Skipped> = reasons
        .into_iter()
        .enumerate()
        .filter(|(d, _)| !ran[*d])
        .filter_map(|(d, r)| r.map(|reason| Skipped { id: detectors[d].id().to_owned(), reason }))
        .collect();
    sort_findings(&mut findings);
    let detectors_run = detectors.iter().zip(&ran).filter(|(_, r)| **r).map(|(d, _)| d.id().to_owned()).collect();
    let checked = Checked { enabled: detectors.len(), ran: detectors_run };
    build_report(run, &summaries, config, findings, skipped, skipped_hosts, checked)
}

/// The framework of a session: its hosts' when they agree ([`FrameworkInfo::of_hosts`]).
fn session_framework(hosts: &[HostSummary]) -> FrameworkInfo {
    FrameworkInfo::of_hosts(hosts.iter().map(|h| (h.name.as_str(), &h.framework)))
}

/// How many detectors the scan enabled, and which ran on at least one host (or the session).
struct Checked {
    enabled: usize,
    ran: Vec<String>,
}

fn run_host(detector: &dyn AnyDetector, host: &HostProfile, config: &ScanConfig) -> Result<Vec<Finding>, Skip> {
    if let Some(need) = detector.needs().iter().find(|n| !host.has(**n)) {
        // A profile that could not be read says so, not that it lacks the data.
        return Err(match host.analysis_errors().first() {
            Some(error) => Skip::because(format!("{} ({error})", need.missing())),
            None => Skip::because(need.missing()),
        });
    }
    let mut out = Findings::for_framework(host.framework().name);
    detector.run(host, config, &mut out)?;
    let mut findings = out.into_vec();
    for f in &mut findings {
        if f.host.is_empty() {
            f.host = host.name().to_owned();
        }
        if f.hosts.is_empty() {
            f.hosts.push(HostImpact { host: f.host.clone(), severity: f.severity, impact: f.impact });
        }
        if f.id.is_empty() {
            f.id = detector.id().to_owned();
        }
    }
    Ok(findings)
}

/// Per-host figures listed in a merged finding's evidence note; the rest are counted (all are
/// in [`Finding::hosts`]).
const HOSTS_LISTED: usize = 8;

/// One finding per detector (and variant) for the hosts that share it: the worst host's text,
/// impact and evidence, every host's own figures in [`Finding::hosts`] and summed up in one
/// evidence note, so that a fault on 1000 hosts is one entry of a readable report.
fn merge_hosts(findings: Vec<Finding>, host_count: usize) -> Vec<Finding> {
    let mut groups: std::collections::BTreeMap<(String, String), Vec<Finding>> = std::collections::BTreeMap::new();
    for f in findings {
        groups.entry((f.id.clone(), f.variant.clone())).or_default().push(f);
    }
    let mut out = Vec::new();
    for (_, mut group) in groups {
        let distinct: std::collections::BTreeSet<&str> = group.iter().map(|f| f.host.as_str()).collect();
        if group.len() == 1 || distinct.len() < group.len() {
            // One host, or a detector that reports several findings per host without variants:
            // left as they are.
            out.extend(group);
            continue;
        }
        // The worst host first: severity, then impact, then host name.
        group.sort_by(|a, b| {
            a.severity
                .cmp(&b.severity)
                .then(b.impact.ms_per_step.total_cmp(&a.impact.ms_per_step))
                .then(a.host.cmp(&b.host))
        });
        let mut hosts: Vec<HostImpact> = group.iter().flat_map(|f| f.hosts.iter().cloned()).collect();
        let mut merged = group.swap_remove(0);
        let listed: Vec<String> = hosts
            .iter()
            .take(HOSTS_LISTED)
            .map(|h| {
                format!(
                    "{} {} ms ({:.1}%, {})",
                    h.host,
                    crate::finding::fmt_value(h.impact.ms_per_step),
                    h.impact.pct_of_step,
                    h.severity
                )
            })
            .collect();
        let mut note = format!("per host, worst first: {}", listed.join("; "));
        if hosts.len() > HOSTS_LISTED {
            let rest = &hosts[HOSTS_LISTED..];
            let lo = rest.iter().map(|h| h.impact.ms_per_step).fold(f64::INFINITY, f64::min);
            let hi = rest.iter().map(|h| h.impact.ms_per_step).fold(f64::NEG_INFINITY, f64::max);
            note.push_str(&format!(
                "; {} more host(s) from {} to {} ms",
                rest.len(),
                crate::finding::fmt_value(lo),
                crate::finding::fmt_value(hi)
            ));
        }
        merged.what = format!(
            "On {} of {host_count} hosts (figures from {}, the worst): {}",
            hosts.len(),
            merged.host,
            merged.what
        );
        merged.evidence.insert(0, Evidence::note(note));
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        merged.hosts = hosts;
        out.push(merged);
    }
    out
}

/// Severity first, then the findings about the capture itself (`profile_during_warmup`,
/// `truncated_capture`: the others measure what they describe), then the larger impact, then id
/// and host: a total, stable order.
pub fn sort_findings(findings: &mut [Finding]) {
    let about_program = |f: &Finding| !crate::registry::is_capture_check(&f.id);
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(about_program(a).cmp(&about_program(b)))
            .then(b.impact.ms_per_step.total_cmp(&a.impact.ms_per_step))
            .then(a.id.cmp(&b.id))
            .then(a.host.cmp(&b.host))
            .then(a.title.cmp(&b.title))
    });
}

/// The session's steps when every host has the same steps (by name): each step's time is its
/// slowest host's. `None` when hosts disagree on their steps, or have none.
fn session_steps(hosts: &[HostSummary]) -> Option<Vec<(String, Picos)>> {
    let first = hosts.first()?;
    if first.step_times.is_empty() {
        return None;
    }
    let names: std::collections::BTreeSet<&str> = first.step_times.iter().map(|(n, _)| n.as_str()).collect();
    if names.len() != first.step_times.len() {
        return None;
    }
    let mut slowest: std::collections::BTreeMap<&str, Picos> = std::collections::BTreeMap::new();
    for h in hosts {
        let theirs: std::collections::BTreeSet<&str> = h.step_times.iter().map(|(n, _)| n.as_str()).collect();
        if theirs != names || h.step_times.len() != names.len() {
            return None;
        }
        for (n, t) in &h.step_times {
            let e = slowest.entry(n.as_str()).or_insert(*t);
            *e = (*e).max(*t);
        }
    }
    Some(first.step_times.iter().map(|(n, _)| (n.clone(), slowest[n.as_str()])).collect())
}

/// The session's health snapshot, the per-host step table and the host that sets the pace (the
/// slowest mean step; the first host when none has steps).
fn session_metrics(hosts: &[HostSummary]) -> (Metrics, Vec<HostRow>, Option<&HostSummary>) {
    let pace = hosts
        .iter()
        .filter(|h| h.metrics.step_time_ms_mean.is_some())
        .max_by(|a, b| {
            let (x, y) = (a.metrics.step_time_ms_mean.unwrap_or(0.0), b.metrics.step_time_ms_mean.unwrap_or(0.0));
            x.total_cmp(&y).then_with(|| b.name.cmp(&a.name))
        })
        .or(hosts.first());
    let mut metrics = pace.map(|h| h.metrics.clone()).unwrap_or_default();
    if pace.is_some_and(|h| h.metrics.step_time_ms_mean.is_some()) {
        metrics.step_time_host = pace.map(|h| h.name.clone());
    }
    if hosts.len() > 1
        && let Some(series) = session_steps(hosts)
        && let Some(stats) = xlens_roofline::StepStats::of(&series.iter().map(|(_, t)| *t).collect::<Vec<_>>())
    {
        metrics.step_count = stats.count;
        metrics.step_time_ms_mean = Some(stats.mean_ms);
        metrics.step_time_ms_median = Some(stats.median_ms);
        metrics.step_time_ms_stddev = Some(stats.stddev_ms);
        metrics.step_time_ms_min = Some(stats.min_ms);
        metrics.step_time_ms_max = Some(stats.max_ms);
    }
    if hosts.len() > 1 {
        // Utilisation and duty cycle of the session: every host's work and time added up, as
        // XProf's all-hosts view does.
        let works: Vec<ProgramWork> = hosts.iter().filter_map(|h| h.program_work).collect();
        if works.len() == hosts.len()
            && let Some(all) = ProgramWork::combine(&works)
        {
            set_roofline(&mut metrics, &all);
        }
        let duty: Vec<(Picos, Picos)> = hosts.iter().filter_map(|h| h.duty_cycle).collect();
        let (busy, window) = duty.iter().fold((Picos::ZERO, Picos::ZERO), |a, d| (a.0 + d.0, a.1 + d.1));
        if duty.len() == hosts.len() && window.0 > 0 {
            metrics.device_duty_cycle_pct = Some(100.0 * busy.0 as f64 / window.0 as f64);
        }
    }
    let rows = hosts
        .iter()
        .map(|h| {
            let m = &h.metrics;
            let compute_ms_mean = (!h.anatomy.is_empty())
                .then(|| h.anatomy.iter().map(|a| a.compute().as_ms_f64()).sum::<f64>() / h.anatomy.len() as f64);
            HostRow {
                host: h.name.clone(),
                time_base: m.time_base.clone(),
                step_count: m.step_count,
                step_time_ms_mean: m.step_time_ms_mean,
                step_time_ms_median: m.step_time_ms_median,
                step_time_ms_min: m.step_time_ms_min,
                step_time_ms_max: m.step_time_ms_max,
                compute_ms_mean,
                idle_pct: m.idle_pct,
                flops_utilization_pct: m.flops_utilization_pct,
                slowest: metrics.step_time_host.as_deref() == Some(h.name.as_str()),
                skipped: h.skipped.clone(),
            }
        })
        .collect();
    (metrics, rows, pace)
}

fn build_report(
    run: Option<String>,
    hosts: &[HostSummary],
    config: &ScanConfig,
    findings: Vec<Finding>,
    skipped: Vec<Skipped>,
    skipped_hosts: Vec<SkippedHost>,
    checked: Checked,
) -> Report {
    let first = hosts.first();
    let (metrics, rows, pace) = session_metrics(hosts);
    let info = ProfileInfo {
        run,
        hosts: hosts.iter().map(|h| h.name.clone()).collect(),
        device: first.map_or_else(|| "CPU".to_owned(), |h| h.device.clone()),
        device_type: first.and_then(|h| h.device_type.clone()),
        cores: hosts.iter().map(|h| h.cores).sum(),
        steps: metrics.step_count,
        hlo_programs: hosts.iter().map(|h| h.hlo_programs).sum(),
        main_program: first.and_then(|h| h.main_program.clone()),
        step_range: config.steps.map(|r| r.to_string()),
    };
    let warnings: Vec<String> = hosts.iter().flat_map(|h| h.warnings.iter().cloned()).collect();
    let t = &config.thresholds.status;
    let important = findings.iter().filter(|f| f.severity <= t.attention_severity).count();
    let has_peaks = first.is_some_and(|h| h.has_peaks);
    // The verdict rests on findings only: low utilisation, idle time, exposed communication and
    // memory pressure are findings of their own, with their evidence.
    let errors: Vec<String> = hosts.iter().flat_map(|h| h.errors.iter().cloned()).collect();
    let mut reasons = Vec::new();
    if !skipped_hosts.is_empty() {
        let files: Vec<String> = skipped_hosts.iter().map(|h| format!("{} ({})", h.file, h.error)).collect();
        reasons.push(format!(
            "{} of {} host file(s) could not be read: {}",
            skipped_hosts.len(),
            skipped_hosts.len() + hosts.len(),
            files.join("; ")
        ));
    }
    if !errors.is_empty() {
        reasons.push(format!("part of the profile could not be read: {}", errors.join("; ")));
    }
    // A figure that cannot be (a utilisation over 100 %) says the data under it is wrong: the
    // verdict built on it vouches for nothing either.
    let impossible: Vec<String> =
        hosts.iter().flat_map(|h| h.impossible.iter().map(move |what| format!("{}: {what}", h.name))).collect();
    if !impossible.is_empty() {
        reasons.push(format!(
            "impossible figure(s), so the device peaks or the ops' costs the profile reports are wrong: {}",
            impossible.join("; ")
        ));
    }
    // A scan in which no detector ran vouches for nothing: nothing was checked (every detector
    // lacked its inputs, as on a file with no usable plane, or the config enabled none).
    let unchecked = !hosts.is_empty() && checked.ran.is_empty();
    if unchecked {
        reasons.push(if checked.enabled == 0 {
            "no detector ran: none is enabled (--only, --disable or the config file)".to_owned()
        } else {
            format!(
                "no detector ran: all {} lacked what they read in this profile (see the skipped detectors)",
                checked.enabled
            )
        });
    }
    // A capture of warm-up, or one cut short, first: the other findings measure it.
    let others =
        findings.iter().any(|f| f.severity <= t.attention_severity && !crate::registry::is_capture_check(&f.id));
    for (id, what, then) in crate::registry::CAPTURE_CHECKS {
        if findings.iter().any(|f| f.id == *id && f.severity <= t.attention_severity) {
            let also = if others { ", which the other findings measure too" } else { "" };
            let then = if others { format!("{then}, before acting on them") } else { (*then).to_owned() };
            reasons.push(format!("{what} ({id}){also}: {then}"));
        }
    }
    if important > 0 {
        reasons.push(format!("{important} finding(s) at {} or worse", t.attention_severity));
    }
    // Lost data outranks the findings: the verdict cannot vouch for what it did not read.
    let status = if !skipped_hosts.is_empty() || !errors.is_empty() || !impossible.is_empty() || unchecked {
        Status::Incomplete
    } else if important > 0 {
        Status::NeedsAttention
    } else {
        Status::Optimal
    };
    let disabled_by: std::collections::BTreeMap<String, String> = DETECTORS
        .iter()
        .filter_map(|d| config.disabled_by(d.id()).map(|by| (d.id().to_owned(), by.to_owned())))
        .collect();
    let summary = summary_text(status, &info, &metrics, &findings, &skipped, &reasons, has_peaks);
    let summary = summary + &disabled_text(&disabled_by);
    let mut charts = pace.map(|h| h.charts.clone()).unwrap_or_default();
    let mut comparison = pace.map(|h| h.comparison.clone()).unwrap_or_default();
    if hosts.len() > 1
        && let Some(series) = session_steps(hosts)
    {
        comparison.step_times_ms = series.into_iter().map(|(_, t)| t.as_ms_f64()).collect();
    }
    charts.step_series = step_series(hosts);
    charts.memory = crate::report::session_memory(hosts, pace);
    charts.kernels = hosts.iter().flat_map(|h| h.charts.kernels.iter().cloned()).collect();
    if hosts.len() > 1 {
        charts.ops_host = pace.map(|h| h.name.clone());
    }
    Report {
        status,
        summary,
        profile: info,
        framework: session_framework(hosts),
        metrics,
        hosts: rows,
        findings,
        skipped,
        detectors_run: checked.ran,
        disabled_by,
        skipped_hosts,
        errors,
        warnings,
        comparison,
        charts,
    }
}

/// The verdict's word on detectors the configuration kept from running, grouped by what did
/// (ids listed up to a handful per group), so a verdict never depends silently on the working
/// directory's `xlens.toml`. Empty when every detector was enabled.
fn disabled_text(disabled_by: &std::collections::BTreeMap<String, String>) -> String {
    const LISTED: usize = 8;
    let mut by_source: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for (id, by) in disabled_by {
        by_source.entry(by).or_default().push(id);
    }
    let groups: Vec<String> = by_source
        .into_iter()
        .map(|(by, ids)| {
            if ids.len() <= LISTED {
                format!("{} by {by} ({})", ids.len(), ids.join(", "))
            } else {
                format!("{} by {by}", ids.len())
            }
        })
        .collect();
    if groups.is_empty() {
        String::new()
    } else {
        format!(" Disabled {} of {} detectors: {}.", disabled_by.len(), DETECTORS.len(), groups.join("; "))
    }
}

fn summary_text(
    status: Status,
    info: &ProfileInfo,
    metrics: &Metrics,
    findings: &[Finding],
    skipped: &[Skipped],
    reasons: &[String],
    has_peaks: bool,
) -> String {
    let mut s = format!("{}: ", status.as_str());
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    if findings.is_empty() {
        s.push_str("no findings");
    } else {
        s.push_str(&format!(
            "{} finding(s) ({} P0, {} P1, {} P2)",
            findings.len(),
            count(Severity::P0),
            count(Severity::P1),
            count(Severity::P2)
        ));
    }
    let device = match &info.device_type {
        // `Nvidia GPU (Hopper)`, `TPU v6 Lite` already say which device.
        Some(t) if t.contains(info.device.as_str()) => t.clone(),
        Some(t) => format!("{} ({t})", info.device),
        None => info.device.clone(),
    };
    // "an AMD GPU", "an Intel CPU", "a TPU v6 Lite".
    let article = if device.starts_with(['A', 'E', 'I', 'O', 'U', 'a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    s.push_str(&format!(" on {article} {device} profile of {} host(s)", info.hosts.len()));
    if let Some(main) = &info.main_program {
        s.push_str(&format!(", main program {main}"));
    }
    if let Some(mean) = metrics.step_time_ms_mean {
        match metrics.time_base.as_str() {
            "device_window" => {
                s.push_str(&format!(", no step markers or program executions: one device window of {mean:.3} ms"))
            }
            "module_executions" => s.push_str(&format!(
                ", no step markers: {} module execution(s) of {mean:.3} ms on average",
                metrics.step_count
            )),
            _ => s.push_str(&format!(", {} steps of {mean:.3} ms on average", metrics.step_count)),
        }
    }
    if let Some(range) = &info.step_range {
        s.push_str(&format!(" (steps {range} only)"));
    }
    s.push('.');
    if !reasons.is_empty() {
        s.push_str(&format!(" Why: {}.", reasons.join("; ")));
    }
    if !has_peaks {
        s.push_str(
            " The profile reports no device peak FLOP/s or bandwidth, so the status rests on the detectors \
             (utilisation and roofline checks could not run).",
        );
    }
    if !skipped.is_empty() {
        let ids: Vec<&str> = skipped.iter().map(|k| k.id.as_str()).collect();
        s.push_str(&format!(" Not checked ({}): {}.", ids.len(), ids.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Evidence, Impact};

    /// On profiles without step markers the detectors word their findings in the time base
    /// (`TimeBase`) when they build them, as nothing rewrites the text afterwards: no host
    /// finding's text, metric label or note speaks of the step.
    #[test]
    fn stepless_findings_are_worded_in_their_time_base() {
        const STEP_WORDING: [&str; 5] = [" per step", "of the step", "each step", "every step", "the step's"];
        for dir in ["h200/h200_inference_stepless", "field/amd_jax08_attention", "field/tpu_v6e_host_offload"] {
            let session = xlens_testkit::open_session(crate::testing::testdata(dir)).unwrap();
            let report = scan(&Profile::from_session(session), &ScanConfig::default());
            assert!(report.findings.len() >= 2, "{dir}: {report:#?}");
            for f in report.findings.iter().filter(|f| f.scope == Scope::Host) {
                let labels = f.evidence.iter().filter_map(|e| match e {
                    Evidence::Metric { name, .. } => Some(name.as_str()),
                    Evidence::Note { text } => Some(text.as_str()),
                    _ => None,
                });
                for text in std::iter::once(f.what.as_str()).chain(labels) {
                    assert!(!STEP_WORDING.iter().any(|p| text.contains(p)), "{dir} {}: {text}", f.id);
                }
            }
        }
    }

    /// The detectors started first are registered ones (a renamed detector would silently run
    /// in registry order again).
    #[test]
    fn long_running_detectors_are_registered() {
        for id in LONG_RUNNING {
            assert!(DETECTORS.iter().any(|d| d.id() == *id), "{id}");
        }
    }

    /// A capture of warm-up leads the findings of its severity, and the verdict says so first,
    /// whether other findings (which measure the warm-up too) come with it or not.
    #[test]
    fn a_warmup_capture_leads_the_findings_and_the_verdict() {
        let with = |id: &str, ms: f64| {
            let mut f = finding("h", ms);
            f.id = id.to_owned();
            f.severity = Severity::P0;
            f
        };
        let mut findings =
            vec![with("device_idle", 90.0), with("input_starvation", 60.0), with("profile_during_warmup", 30.0)];
        sort_findings(&mut findings);
        assert_eq!(findings[0].id, "profile_during_warmup");
        assert_eq!(findings[1].id, "device_idle");
        let session = xlens_testkit::open_session(crate::testing::testdata("real/profile_during_warmup")).unwrap();
        let report = scan(&Profile::from_session(session), &ScanConfig::default());
        assert_eq!(report.findings[0].id, "profile_during_warmup");
        let alone = "Why: the capture holds warm-up (profile_during_warmup): capture later steps; 1 finding(s)";
        assert!(report.summary.contains(alone), "{}", report.summary);
    }

    fn finding(host: &str, ms: f64) -> Finding {
        let mut f = Finding::new(
            crate::registry::detector("device_idle").unwrap(),
            Severity::from_impact(ms, Severity::P1),
            format!("idle {ms} ms"),
            vec![Evidence::metric("idle_time", "idle", ms, "ms")],
            Impact::of(ms, Some(100.0)),
        );
        f.host = host.to_owned();
        f.hosts.push(HostImpact { host: host.to_owned(), severity: f.severity, impact: f.impact });
        f
    }

    /// A fault on 1000 hosts is one finding: the worst host's text, eight hosts listed in the
    /// evidence and the rest counted, every host's figures kept in `hosts`.
    #[test]
    fn a_thousand_hosts_merge_into_one_readable_finding() {
        let findings: Vec<Finding> =
            (0..1000).map(|h| finding(&format!("host{h:04}"), 1.0 + f64::from(h % 97) / 10.0)).collect();
        let merged = merge_hosts(findings, 1000);
        assert_eq!(merged.len(), 1);
        let f = &merged[0];
        assert_eq!(f.hosts.len(), 1000);
        assert!(f.hosts.windows(2).all(|w| w[0].host < w[1].host), "hosts in host order");
        assert_eq!(f.host, "host0096", "the worst: 1 + 96/10 ms, first by name");
        assert!(f.what.starts_with("On 1000 of 1000 hosts (figures from host0096, the worst): idle 10.6 ms"));
        let note = f.evidence[0].to_string();
        assert_eq!(note.matches("; host").count(), 7, "eight listed, then a count: {note}");
        assert!(note.ends_with("; 992 more host(s) from 1 to 10.600 ms"), "{note}");
        // One host alone stays as it was.
        let single = merge_hosts(vec![finding("h", 3.0)], 4);
        assert_eq!(single[0].what, "idle 3 ms");
    }
}
