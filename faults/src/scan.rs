//! `scan`: run every detector over a profile and build the [`Report`].

use rayon::prelude::*;
use serde::Serialize;
use xlens_roofline::{OpProfile, ProgramWork, RooflinePoint, StepAnatomy, StepSource, TimeClass};
use xlens_xplane::Picos;

use crate::config::ScanConfig;
use crate::detector::{Detector, Skip};
use crate::finding::{Evidence, Finding, Findings, HostImpact, SESSION_HOST, Scope, Severity};
use crate::profile::{HostProfile, Profile};

use crate::registry::DETECTORS;

/// The verdict of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    /// Nothing important to fix.
    #[serde(rename = "OPTIMAL")]
    Optimal,
    /// At least one finding at the attention severity (P1 by default) or worse.
    #[serde(rename = "NEEDS_ATTENTION")]
    NeedsAttention,
    /// Part of the profile could not be read (a host file, or data inside one): whatever was
    /// found, the verdict cannot vouch for what was lost ([`Report::errors`],
    /// [`Report::skipped_hosts`]).
    #[serde(rename = "INCOMPLETE")]
    Incomplete,
}

impl Status {
    /// `"OPTIMAL"`, `"NEEDS_ATTENTION"` or `"INCOMPLETE"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Optimal => "OPTIMAL",
            Status::NeedsAttention => "NEEDS_ATTENTION",
            Status::Incomplete => "INCOMPLETE",
        }
    }
}

/// A host file that could not be read: the rest of the session is analysed without it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedHost {
    /// The host name.
    pub host: String,
    /// The file.
    pub file: String,
    /// The error, one line.
    pub error: String,
}

/// A detector that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The detector id.
    pub id: String,
    /// Why it did not run.
    pub reason: String,
}

/// What was scanned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileInfo {
    /// The run name, when scanned from a directory.
    pub run: Option<String>,
    /// Host names.
    pub hosts: Vec<String>,
    /// `TPU`, `GPU` or `CPU`.
    pub device: String,
    /// Device type string, when recorded (e.g. `TPU v5 Lite`).
    pub device_type: Option<String>,
    /// Analysed cores over all hosts.
    pub cores: usize,
    /// Steps (of the first host with steps).
    pub steps: usize,
    /// HLO programs over all hosts.
    pub hlo_programs: usize,
    /// The main program (most op time), `name(program_id)`.
    pub main_program: Option<String>,
}

/// One op among the slowest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlowOp {
    /// The program (`name(program_id)`) the op belongs to.
    pub program: String,
    /// Op (instruction) name.
    pub name: String,
    /// Category.
    pub category: String,
    /// Self time over the profile, in ms.
    pub self_time_ms: f64,
    /// Share of all ops' self time, in %.
    pub pct: f64,
}

/// The health snapshot: the numbers an engineer reads first. Absent figures are `null`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// What the per-step figures (step times, each finding's `impact`) are per: `steps` (the
    /// profile's step markers), `module_executions` (no markers: program executions),
    /// `device_window` (neither: the whole captured device window is one "step") or `none`.
    pub time_base: String,
    /// Number of steps (or module executions, or 1 for the device window).
    pub step_count: usize,
    /// Mean step time (ms).
    pub step_time_ms_mean: Option<f64>,
    /// Median step time (ms).
    pub step_time_ms_median: Option<f64>,
    /// Standard deviation of the step time (ms).
    pub step_time_ms_stddev: Option<f64>,
    /// Shortest step (ms).
    pub step_time_ms_min: Option<f64>,
    /// Longest step (ms).
    pub step_time_ms_max: Option<f64>,
    /// Share of step time the device runs ops (%).
    pub device_busy_pct: Option<f64>,
    /// Share of step time nothing runs (%).
    pub idle_pct: Option<f64>,
    /// Share of step time the device waits for input or the host (%).
    pub input_bound_pct: Option<f64>,
    /// Share of step time spent waiting on collectives (%).
    pub exposed_communication_pct: Option<f64>,
    /// Achieved FLOP/s over the profiled time as a share of the peak (%).
    pub flops_utilization_pct: Option<f64>,
    /// Achieved HBM bandwidth as a share of the peak (%).
    pub hbm_utilization_pct: Option<f64>,
    /// Program roofline efficiency (%).
    pub roofline_efficiency_pct: Option<f64>,
    /// What bounds the program on the roofline (`Compute`, `HBM`, ...; XProf's `bound_by`).
    pub bound_by: Option<String>,
    /// The program's FLOPs per byte accessed (XProf's operational intensity).
    pub operational_intensity_flop_per_byte: Option<f64>,
    /// XProf's device duty cycle: the share of the captured device window the devices ran
    /// on-duty ops (%).
    pub device_duty_cycle_pct: Option<f64>,
    /// Static memory peak of the main program (bytes).
    pub memory_peak_bytes: Option<u64>,
    /// Device memory capacity (bytes).
    pub memory_capacity_bytes: Option<u64>,
    /// Memory peak as a share of capacity (%).
    pub memory_peak_pct: Option<f64>,
    /// The slowest ops by self time.
    pub slowest_ops: Vec<SlowOp>,
    /// The host whose pace these step times are: the slowest host of a session (the one host
    /// of a single-host profile); `None` without steps.
    pub step_time_host: Option<String>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            time_base: StepSource::None.key().to_owned(),
            step_count: 0,
            step_time_ms_mean: None,
            step_time_ms_median: None,
            step_time_ms_stddev: None,
            step_time_ms_min: None,
            step_time_ms_max: None,
            device_busy_pct: None,
            idle_pct: None,
            input_bound_pct: None,
            exposed_communication_pct: None,
            flops_utilization_pct: None,
            hbm_utilization_pct: None,
            roofline_efficiency_pct: None,
            bound_by: None,
            operational_intensity_flop_per_byte: None,
            device_duty_cycle_pct: None,
            memory_peak_bytes: None,
            memory_capacity_bytes: None,
            memory_peak_pct: None,
            slowest_ops: Vec::new(),
            step_time_host: None,
        }
    }
}

impl Metrics {
    /// The unit of a per-step figure under this time base: `step`, `module execution` or
    /// `device window`.
    pub fn step_unit(&self) -> &'static str {
        match self.time_base.as_str() {
            "module_executions" => "module execution",
            "device_window" => "device window",
            _ => "step",
        }
    }
}

/// One op placed on the roofline chart.
#[derive(Clone, Debug, PartialEq)]
pub struct RooflineDot {
    /// Op name.
    pub name: String,
    /// FLOPs per byte.
    pub intensity: f64,
    /// Achieved FLOP/s.
    pub flops_per_s: f64,
    /// What bounds it.
    pub bound: String,
}

/// Chart data for the HTML page (not part of the JSON contract).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Charts {
    /// Step name and time (ms).
    pub step_times_ms: Vec<(String, f64)>,
    /// Category and self time (ms), largest first.
    pub categories_ms: Vec<(String, f64)>,
    /// Top ops on the roofline.
    pub roofline: Vec<RooflineDot>,
    /// Peak FLOP/s of a core, when known.
    pub peak_flops_per_s: Option<f64>,
    /// Peak HBM bytes/s of a core, when known.
    pub peak_hbm_bytes_per_s: Option<f64>,
}

/// The result of a scan: rendered as text, JSON, HTML and frames.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The verdict.
    pub status: Status,
    /// One paragraph: the verdict, the profile, what could not be checked.
    pub summary: String,
    /// What was scanned.
    pub profile: ProfileInfo,
    /// The health snapshot of the session: its step times are the slowest host's per step (a
    /// synchronous session runs at its slowest host's pace, as XProf's overview reports), its
    /// utilisation and duty cycle every host's work and time added up (XProf's all-hosts view),
    /// the other figures those of the slowest host ([`Metrics::step_time_host`]).
    pub metrics: Metrics,
    /// The per-host step table, in host order.
    pub hosts: Vec<HostRow>,
    /// Findings, P0 first, then by impact.
    pub findings: Vec<Finding>,
    /// Detectors that did not run, with the reason.
    pub skipped: Vec<Skipped>,
    /// Host files that could not be read at all (the report covers the others).
    pub skipped_hosts: Vec<SkippedHost>,
    /// Data that could not be read inside the hosts that were (`host: what: error`); any entry
    /// here or in `skipped_hosts` makes the status `INCOMPLETE`.
    pub errors: Vec<String>,
    /// Odd-but-decodable data met on the way.
    pub warnings: Vec<String>,
    /// Chart data for the HTML rendering (not serialized).
    #[serde(skip)]
    pub charts: Charts,
}

/// One row of the per-host step table.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostRow {
    /// Host name.
    pub host: String,
    /// The host's time base (`steps`, `module_executions`, `device_window`, `none`).
    pub time_base: String,
    /// Steps (or module executions) on the host.
    pub step_count: usize,
    /// Mean step time.
    pub step_time_ms_mean: Option<f64>,
    /// Median step time.
    pub step_time_ms_median: Option<f64>,
    /// Shortest step.
    pub step_time_ms_min: Option<f64>,
    /// Longest step.
    pub step_time_ms_max: Option<f64>,
    /// Compute time per step (the anatomy's compute classes: matmul, vector, other compute).
    pub compute_ms_mean: Option<f64>,
    /// Device idle, % of the step.
    pub idle_pct: Option<f64>,
    /// Program FLOP utilisation, %.
    pub flops_utilization_pct: Option<f64>,
    /// True for the host whose pace the session runs at (the slowest mean step).
    pub slowest: bool,
    /// The detectors that could not run on this host, with the reason (in the frames' `skipped`
    /// table; the report's `skipped` sums them up).
    #[serde(skip)]
    pub skipped: Vec<Skipped>,
}

impl Report {
    /// The worst severity among the findings.
    pub fn worst_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).min()
    }
}

/// What a scan keeps of one host once its detectors ran: enough for the cross-host detectors
/// and the report, so that the host's profile itself can be dropped (hosts are streamed).
#[derive(Clone, Debug, PartialEq)]
pub struct HostSummary {
    /// Host name.
    pub name: String,
    /// TPU, GPU or CPU.
    pub device: String,
    /// Device type string, when recorded.
    pub device_type: Option<String>,
    /// Analysed cores.
    pub cores: usize,
    /// HLO programs.
    pub hlo_programs: usize,
    /// The main program (most op time).
    pub main_program: Option<String>,
    /// True when the profile reports device peaks (or the chip is known).
    pub has_peaks: bool,
    /// The anatomy of each step.
    pub anatomy: Vec<StepAnatomy>,
    /// Each step's name and time, in order.
    pub step_times: Vec<(String, Picos)>,
    /// The program's work over the profiled time (for the session's roofline).
    pub program_work: Option<ProgramWork>,
    /// The devices' on-duty time and windows (for the session's duty cycle).
    pub duty_cycle: Option<(Picos, Picos)>,
    /// The health snapshot.
    pub metrics: Metrics,
    /// Chart data.
    pub charts: Charts,
    /// Warnings met on the host.
    pub warnings: Vec<String>,
    /// What could not be read on the host ([`HostProfile::read_errors`], host-prefixed).
    pub errors: Vec<String>,
    /// The detectors that could not run on the host, with the reason.
    pub skipped: Vec<Skipped>,
}

impl HostSummary {
    /// Summarises a host whose analyses are built.
    pub fn of(host: &HostProfile) -> HostSummary {
        let mut warnings = Vec::new();
        for w in host.space().warnings() {
            warnings.push(format!("{}: {w}", host.name()));
        }
        for w in host.module_warnings() {
            warnings.push(format!("{}: {w}", host.name()));
        }
        let errors = host.read_errors().into_iter().map(|e| format!("{}: {e}", host.name())).collect();
        for plane in host.space().analysis_devices() {
            let odd = xlens_roofline::PerfEnv::odd_peaks(plane);
            if !odd.is_empty() {
                warnings.push(format!(
                    "{}: {} reports impossible peaks, ignored: {}",
                    host.name(),
                    plane.name(),
                    odd.join(", ")
                ));
            }
        }
        let metrics = host_metrics(host);
        for (what, value) in [
            ("FLOP utilisation", metrics.flops_utilization_pct),
            ("HBM utilisation", metrics.hbm_utilization_pct),
            ("roofline efficiency", metrics.roofline_efficiency_pct),
            ("device duty cycle", metrics.device_duty_cycle_pct),
        ] {
            // Rounding lets a fully busy figure reach a hair above 100 %.
            if let Some(v) = value.filter(|v| !v.is_finite() || *v > 100.5 || *v < 0.0) {
                warnings.push(format!(
                    "{}: {what} of {v:.1} % is impossible: the device peaks the profile reports or the ops' FLOPs \
                     and bytes are wrong, and every figure built on them is unreliable",
                    host.name()
                ));
            }
        }
        HostSummary {
            name: host.name().to_owned(),
            device: host.device_kind().as_str().to_owned(),
            device_type: host
                .summary()
                .device_type
                .clone()
                .or_else(|| host.chip().and_then(|c| c.device_type().map(str::to_owned))),
            cores: match host.summary().device_cores {
                0 => host.op_profile().map_or(0, |p| p.cores as usize),
                n => n,
            },
            hlo_programs: host.modules().len(),
            main_program: host.main_module().map(|m| m.display_name()),
            has_peaks: host.chip().is_some(),
            anatomy: host.anatomy().map(<[StepAnatomy]>::to_vec).unwrap_or_default(),
            step_times: host
                .steps()
                .map(|s| s.steps.iter().map(|s| (s.name.clone(), s.duration)).collect())
                .unwrap_or_default(),
            program_work: host.op_profile().ok().and_then(OpProfile::program_work),
            duty_cycle: host.duty_cycle(),
            metrics,
            charts: charts(host),
            warnings,
            errors,
            skipped: Vec::new(),
        }
    }
}

/// The outcome of one host: its findings, per detector whether it ran (or why not), its summary.
#[derive(Debug)]
pub struct HostOutcome {
    /// Findings on this host.
    pub findings: Vec<Finding>,
    /// Per enabled detector, in registry order: `None` when it ran, else the skip reason.
    pub skips: Vec<Option<String>>,
    /// The host's summary.
    pub summary: HostSummary,
}

fn enabled_detectors(config: &ScanConfig) -> Vec<&'static dyn Detector> {
    DETECTORS.iter().copied().filter(|d| config.enabled(d.id())).collect()
}

/// Runs the per-host detectors on one host (in parallel) and summarises it.
pub fn scan_host(host: &HostProfile, config: &ScanConfig) -> HostOutcome {
    let detectors = enabled_detectors(config);
    // Build the shared analyses first (cores in parallel inside): a detector job that found them
    // missing would build them while the other workers wait.
    host.prepare();
    let outcomes: Vec<Result<Vec<Finding>, Skip>> = detectors.par_iter().map(|d| run_host(*d, host, config)).collect();
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
    let mut summary = HostSummary::of(host);
    summary.skipped = detectors
        .iter()
        .zip(&skips)
        .filter_map(|(d, s)| s.as_ref().map(|reason| Skipped { id: d.id().to_owned(), reason: reason.clone() }))
        .collect();
    HostOutcome { findings, skips, summary }
}

/// Runs every enabled detector over every host (hosts in parallel) and builds the report.
///
/// Output never depends on thread timing: findings are sorted by severity, impact, id and host.
pub fn scan(profile: &Profile, config: &ScanConfig) -> Report {
    let outcomes: Vec<HostOutcome> = profile.hosts().par_iter().map(|h| scan_host(h, config)).collect();
    finish(profile.run().map(str::to_owned), outcomes, Vec::new(), config)
}

/// Scans the hosts of a session one by one as they are opened, in parallel, keeping only each
/// host's findings and summary: at most as many hosts are mapped at once as there are worker
/// threads, so a session of many large hosts scans in bounded memory. `visit` sees each host
/// with its findings before it is dropped (to write per-host frames, or report progress); it is
/// called from worker threads in any order.
pub fn scan_session(
    source: &xlens_xplane::SessionSource,
    config: &ScanConfig,
    visit: &(dyn Fn(&HostProfile, &HostOutcome) + Sync),
) -> Result<Report, xlens_xplane::Error> {
    let opened: Vec<Result<HostOutcome, (SkippedHost, xlens_xplane::Error)>> = source
        .hosts
        .par_iter()
        .map(|h| {
            let space = h.open().map_err(|e| {
                let error = e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
                (SkippedHost { host: h.host.clone(), file: h.path.display().to_string(), error }, e)
            })?;
            let host = HostProfile::new(h.host.clone(), space);
            let outcome = scan_host(&host, config);
            visit(&host, &outcome);
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
    Ok(finish(source.run.clone(), outcomes, skipped_hosts, config))
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
    for (d, detector) in detectors.iter().enumerate() {
        let mut out = Findings::default();
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
    build_report(run, &summaries, config, findings, skipped, skipped_hosts)
}

fn run_host(detector: &dyn Detector, host: &HostProfile, config: &ScanConfig) -> Result<Vec<Finding>, Skip> {
    if let Some(need) = detector.needs().iter().find(|n| !host.has(**n)) {
        // A profile that could not be read says so, not that it lacks the data.
        return Err(match host.read_errors().first() {
            Some(error) => Skip::because(format!("{} ({error})", need.missing())),
            None => Skip::because(need.missing()),
        });
    }
    let mut out = Findings::default();
    detector.run(host, config, &mut out)?;
    let mut findings = out.into_vec();
    // On profiles without step markers every per-step figure is per module execution (or of the
    // device window): the prose says so.
    let unit = host.steps().map_or("step", |s| s.source.unit());
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
        if unit != "step" {
            in_time_base(f, unit);
        }
    }
    Ok(findings)
}

/// Rewrites a finding's per-step phrases (`per step`, `of the step`, `each step`, `the step's`)
/// into the time base's unit (`per module execution`, ...), in its text and evidence names.
fn in_time_base(f: &mut Finding, unit: &str) {
    let phrases = [
        (" per step", format!(" per {unit}")),
        ("of the step", format!("of the {unit}")),
        ("each step", format!("each {unit}")),
        ("every step", format!("every {unit}")),
        ("the step's", format!("the {unit}'s")),
    ];
    let rewrite = |text: &mut String| {
        for (from, to) in &phrases {
            if text.contains(from) {
                *text = text.replace(from, to);
            }
        }
    };
    rewrite(&mut f.what);
    for e in &mut f.evidence {
        match e {
            crate::finding::Evidence::Metric { name, .. } => rewrite(name),
            crate::finding::Evidence::Note { text } => rewrite(text),
            _ => {}
        }
    }
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

/// Severity first, then the larger impact, then id and host: a total, stable order.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(b.impact.ms_per_step.total_cmp(&a.impact.ms_per_step))
            .then(a.id.cmp(&b.id))
            .then(a.host.cmp(&b.host))
            .then(a.title.cmp(&b.title))
    });
}

fn pct(part: Picos, whole: Picos) -> Option<f64> {
    if whole.0 > 0 { Some(100.0 * part.0 as f64 / whole.0 as f64) } else { None }
}

/// The health snapshot of one host.
pub fn host_metrics(host: &HostProfile) -> Metrics {
    let mut m = Metrics::default();
    if let Ok(steps) = host.steps() {
        m.time_base = steps.source.key().to_owned();
    }
    m.device_duty_cycle_pct = host.duty_cycle_pct();
    if let Ok(steps) = host.steps()
        && let Some(stats) = steps.stats()
    {
        m.step_count = stats.count;
        m.step_time_ms_mean = Some(stats.mean_ms);
        m.step_time_ms_median = Some(stats.median_ms);
        m.step_time_ms_stddev = Some(stats.stddev_ms);
        m.step_time_ms_min = Some(stats.min_ms);
        m.step_time_ms_max = Some(stats.max_ms);
    }
    if let Ok(anatomy) = host.anatomy()
        && !anatomy.is_empty()
    {
        let total: Picos = anatomy.iter().map(|a| a.step_time).sum();
        let sum = |f: fn(&StepAnatomy) -> Picos| anatomy.iter().map(f).sum::<Picos>();
        let idle = sum(|a| a.idle);
        let host_time = sum(|a| a.host);
        let infeed = sum(|a| a.infeed_outfeed);
        m.idle_pct = pct(idle, total);
        m.device_busy_pct = pct(total.saturating_sub(idle + host_time), total);
        m.input_bound_pct = pct(host_time + infeed, total);
        m.exposed_communication_pct = pct(sum(|a| a.get(TimeClass::CollectiveExposed)), total);
    }
    if let Ok(profile) = host.op_profile() {
        if let Some(work) = profile.program_work() {
            set_roofline(&mut m, &work);
        }
        let op_time: Picos = profile.ops.iter().filter(|o| !o.has_inner_ops()).map(|o| o.self_time).sum();
        m.slowest_ops = profile
            .ops
            .iter()
            .filter(|o| !o.has_inner_ops())
            .take(5)
            .map(|o| SlowOp {
                program: profile.programs.get(&o.program_id).cloned().unwrap_or_else(|| o.program_id.to_string()),
                name: o.name.clone(),
                category: o.category.clone(),
                self_time_ms: o.self_time.as_ms_f64(),
                pct: pct(o.self_time, op_time).unwrap_or(0.0),
            })
            .collect();
    }
    if let Some(module) = host.main_module()
        && let Ok(Some(memory)) = module.hbm_memory_stats()
    {
        m.memory_peak_bytes = Some(memory.peak_bytes());
        if let Some(capacity) = host.chip().and_then(|c| c.hbm_capacity()) {
            let capacity = capacity.0;
            m.memory_capacity_bytes = Some(capacity);
            if capacity > 0 {
                m.memory_peak_pct = Some(100.0 * memory.peak_bytes() as f64 / capacity as f64);
            }
        }
    }
    m
}

/// The program roofline figures of `m`, from the work of a host or of a whole session.
fn set_roofline(m: &mut Metrics, work: &ProgramWork) {
    let point: RooflinePoint = work.point();
    m.flops_utilization_pct = Some(100.0 * point.compute_utilization);
    m.hbm_utilization_pct =
        (work.env.peak_hbm_bytes_per_s > 0.0).then(|| 100.0 * point.hbm_bytes_per_s / work.env.peak_hbm_bytes_per_s);
    m.roofline_efficiency_pct = Some(100.0 * point.efficiency);
    m.bound_by = Some(point.bound_by.label().to_owned());
    m.operational_intensity_flop_per_byte = Some(point.operational_intensity);
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
    if important > 0 {
        reasons.push(format!("{important} finding(s) at {} or worse", t.attention_severity));
    }
    // Lost data outranks the findings: the verdict cannot vouch for what it did not read.
    let status = if !skipped_hosts.is_empty() || !errors.is_empty() {
        Status::Incomplete
    } else if important > 0 {
        Status::NeedsAttention
    } else {
        Status::Optimal
    };
    let summary = summary_text(status, &info, &metrics, &findings, &skipped, &reasons, has_peaks);
    let mut charts = pace.map(|h| h.charts.clone()).unwrap_or_default();
    if hosts.len() > 1
        && let Some(series) = session_steps(hosts)
    {
        charts.step_times_ms = series.into_iter().map(|(n, t)| (n, t.as_ms_f64())).collect();
    }
    Report {
        status,
        summary,
        profile: info,
        metrics,
        hosts: rows,
        findings,
        skipped,
        skipped_hosts,
        errors,
        warnings,
        charts,
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
    s.push_str(&format!(" on a {device} profile of {} host(s)", info.hosts.len()));
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

fn charts(host: &HostProfile) -> Charts {
    let mut c = Charts::default();
    if let Ok(steps) = host.steps() {
        c.step_times_ms = steps.steps.iter().map(|s| (s.name.clone(), s.duration.as_ms_f64())).collect();
    }
    if let Ok(profile) = host.op_profile() {
        let mut cats: Vec<(String, f64)> = profile.categories().into_iter().map(|(k, v)| (k, v.as_ms_f64())).collect();
        cats.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        c.categories_ms = cats;
        if let Some(env) = profile.perf_env {
            c.peak_flops_per_s = Some(env.peak_flops_per_s);
            c.peak_hbm_bytes_per_s = Some(env.peak_hbm_bytes_per_s);
            c.roofline = profile
                .ops
                .iter()
                .filter(|o| !o.has_inner_ops() && o.flops > 0.0 && o.bytes.total() > 0.0)
                .take(20)
                .filter_map(|o| {
                    let p = profile.roofline(o)?;
                    Some(RooflineDot {
                        name: o.name.clone(),
                        intensity: p.operational_intensity,
                        flops_per_s: p.flops_per_s,
                        bound: p.bound_by.label().to_owned(),
                    })
                })
                .collect();
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Evidence, Impact};

    fn finding(host: &str, ms: f64) -> Finding {
        let mut f = Finding::new(
            crate::registry::detector("device_idle").unwrap(),
            Severity::from_impact(ms, Severity::P1),
            format!("idle {ms} ms"),
            vec![Evidence::metric("idle", ms, "ms")],
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
