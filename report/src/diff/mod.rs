//! Compare two runs: did the change help? A verdict on the step time that respects noise, the
//! categories and ops that moved (ops matched across recompiled programs), and the findings a
//! change resolved, introduced or left.
//!
//! # The verdict
//! The relative change of the mean step time, `new / base - 1`, with a 95 % confidence interval
//! from a percentile bootstrap over steps: each run's steps are resampled with replacement
//! ([`BOOTSTRAP_RESAMPLES`] times, from a fixed seed, so the interval is the same run to run)
//! and the change recomputed. `IMPROVED` when the whole interval is below zero and the change
//! is at least [`DiffConfig::min_change_pct`] (a floor for run-to-run noise that steps of one
//! run cannot show: machine load, clocks); `REGRESSED` the other way round; else `NEUTRAL`.
//! Identical inputs give `NEUTRAL` with a zero change.
//!
//! Assumptions: the steps of a run are exchangeable (no trend, warm-up excluded, e.g. with
//! `scan --steps`); both runs do the same work per step. A run with fewer than two steps gives
//! no interval and the verdict stays `NEUTRAL` (said in the warnings). `INCOMPARABLE` when the
//! runs ran different programs or hardware, or one could not be read completely.
//!
//! Steps of one run cannot show run-to-run noise: two processes running the same program on a
//! shared machine can differ far more than their steps do. Given repeated runs of a side
//! ([`Repeats`]), the bootstrap resamples runs, then steps within each (a two-level bootstrap),
//! each run weighing the same, so the interval holds run-to-run noise too; with one run a side,
//! a verdict other than `NEUTRAL` carries a warning saying so.

mod render;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use xlens_faults::comparison::{CategoryTime, OpTime, program_name};
use xlens_faults::{Finding, Report, Status};

pub use render::{html, text};

/// Bootstrap resamples behind the confidence interval.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// More runs of each side: repeated captures of the same program and setup, so that the
/// interval holds run-to-run noise (see the module docs). The first report of each side, given
/// to [`diff_with_repeats`] apart, gives the categories, ops, findings and health figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Repeats<'a> {
    /// More runs of the base side.
    pub base: &'a [Report],
    /// More runs of the new side.
    pub new: &'a [Report],
}

/// What a diff needs to be told.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiffConfig {
    /// The smallest change of the mean step time (in %) that can be `IMPROVED` or `REGRESSED`.
    /// Default 2 %.
    pub min_change_pct: f64,
}

impl Default for DiffConfig {
    fn default() -> Self {
        DiffConfig { min_change_pct: 2.0 }
    }
}

/// The verdict of a diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The step time dropped beyond noise.
    #[serde(rename = "IMPROVED")]
    Improved,
    /// The step time grew beyond noise.
    #[serde(rename = "REGRESSED")]
    Regressed,
    /// No change beyond noise.
    #[serde(rename = "NEUTRAL")]
    Neutral,
    /// The runs cannot be compared (different programs or hardware, a run not read completely).
    #[serde(rename = "INCOMPARABLE")]
    Incomparable,
}

impl Verdict {
    /// `IMPROVED`, `REGRESSED`, `NEUTRAL` or `INCOMPARABLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "IMPROVED",
            Verdict::Regressed => "REGRESSED",
            Verdict::Neutral => "NEUTRAL",
            Verdict::Incomparable => "INCOMPARABLE",
        }
    }
}

/// The step time of both runs and its change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepTimeDelta {
    /// Mean step time of the base run (ms).
    pub base: Option<f64>,
    /// Mean step time of the new run (ms).
    pub new: Option<f64>,
    /// `new - base` (ms).
    pub delta_ms: Option<f64>,
    /// `new / base - 1`, in %.
    pub delta_pct: Option<f64>,
    /// The 95 % confidence interval of `delta_pct` (bootstrap over steps); absent with fewer
    /// than two steps in a run.
    pub ci95_pct: Option<[f64; 2]>,
    /// Steps of the base side (all its runs).
    pub base_steps: usize,
    /// Steps of the new side (all its runs).
    pub new_steps: usize,
    /// Runs of each side (base, new): with several, `base` and `new` are the means of the runs'
    /// mean step times and the interval holds run-to-run noise.
    pub runs: [usize; 2],
    /// What a step is (`steps`, `module_executions`, `device_window`) in each run.
    pub time_base: [String; 2],
}

/// One figure of both runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    /// In the base run.
    pub base: Option<f64>,
    /// In the new run.
    pub new: Option<f64>,
    /// `new - base`.
    pub delta: Option<f64>,
}

/// A category's time per step in both runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CategoryDelta {
    /// XProf's category.
    pub category: String,
    /// Self time per step in the base run (ms).
    pub base_ms_per_step: f64,
    /// Self time per step in the new run (ms).
    pub new_ms_per_step: f64,
    /// `new - base` (ms per step).
    pub delta_ms_per_step: f64,
}

/// An op's time per step in both runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpDelta {
    /// The program's name (without its id).
    pub program: String,
    /// The instruction name (the new run's, when renamed).
    pub name: String,
    /// `matched` (same name), `renamed` (paired by shape and opcode: `name` is the new one),
    /// `new` (only in the new run) or `vanished` (only in the base run).
    pub status: String,
    /// XProf's category.
    pub category: String,
    /// Self time per step in the base run (ms).
    pub base_ms_per_step: Option<f64>,
    /// Self time per step in the new run (ms).
    pub new_ms_per_step: Option<f64>,
    /// `new - base` (ms per step), a missing side counted as 0.
    pub delta_ms_per_step: f64,
}

/// Findings of both runs, matched by detector and title (several of one kind in order).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingsDelta {
    /// In the base run only: fixed by the change.
    pub resolved: Vec<Finding>,
    /// In the new run only: introduced by the change.
    pub new: Vec<Finding>,
    /// In both (the new run's finding).
    pub persisting: Vec<Finding>,
}

/// One figure of both runs, of a kind other than time (bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pair<T> {
    /// In the base run.
    pub base: Option<T>,
    /// In the new run.
    pub new: Option<T>,
}

/// Both sides' step times, in order: every run of a side, one after the other.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// The base side's (ms).
    pub base: Vec<f64>,
    /// The new side's (ms).
    pub new: Vec<f64>,
    /// How many of `base` each base run gave, in order (one entry for a single run).
    #[serde(default)]
    pub base_runs: Vec<usize>,
    /// How many of `new` each new run gave, in order.
    #[serde(default)]
    pub new_runs: Vec<usize>,
}

impl Series {
    fn of(base: &[&Report], new: &[&Report]) -> Series {
        let all = |side: &[&Report]| side.iter().flat_map(|r| r.comparison.step_times_ms.iter().copied()).collect();
        let runs = |side: &[&Report]| side.iter().map(|r| r.comparison.step_times_ms.len()).collect();
        Series { base: all(base), new: all(new), base_runs: runs(base), new_runs: runs(new) }
    }

    /// `(side, run, step index in the run, ms)` for every step of both sides.
    pub fn rows(&self) -> Vec<(&'static str, usize, usize, f64)> {
        let mut out = Vec::with_capacity(self.base.len() + self.new.len());
        for (side, steps, runs) in [("base", &self.base, &self.base_runs), ("new", &self.new, &self.new_runs)] {
            // Saved diffs from before `*_runs` existed: one run.
            let lengths = if runs.is_empty() { vec![steps.len()] } else { runs.clone() };
            let mut at = 0;
            for (run, len) in lengths.into_iter().enumerate() {
                for (i, v) in steps.iter().skip(at).take(len).enumerate() {
                    out.push((side, run, i, *v));
                }
                at += len;
            }
        }
        out
    }
}

/// A host's mean step time in both runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostDelta {
    /// The host.
    pub host: String,
    /// Mean step time in the base run (ms).
    pub base_ms: Option<f64>,
    /// Mean step time in the new run (ms).
    pub new_ms: Option<f64>,
    /// The change, in %.
    pub delta_pct: Option<f64>,
}

/// What each run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run's status.
    pub status: Status,
    /// Its summary line.
    pub summary: String,
    /// `TPU`, `GPU` or `CPU`, and the device type when known.
    pub device: String,
    /// The main program (without its id).
    pub main_program: Option<String>,
    /// Hosts.
    pub hosts: usize,
}

/// Two runs compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// `IMPROVED`, `REGRESSED`, `NEUTRAL` or `INCOMPARABLE`.
    pub verdict: Verdict,
    /// One paragraph: the verdict, the step time change and its interval, the findings.
    pub summary: String,
    /// The step time of both runs and its change.
    pub step_time_ms: StepTimeDelta,
    /// The health figures of both runs (`device_busy_pct`, `idle_pct`, …).
    pub metrics: BTreeMap<String, MetricDelta>,
    /// Self time per step by category, the largest change first.
    pub categories: Vec<CategoryDelta>,
    /// Ops, the largest change first (new and vanished ops included).
    pub ops: Vec<OpDelta>,
    /// Findings resolved, new and persisting.
    pub findings: FindingsDelta,
    /// Memory peak of both runs.
    pub memory_peak_bytes: Pair<u64>,
    /// Per host, in host order (hosts of either run).
    pub hosts: Vec<HostDelta>,
    /// The slowest host of each run.
    pub straggler: Pair<String>,
    /// Both runs' step times in order (ms).
    pub step_series_ms: Series,
    /// The base run.
    pub base: RunInfo,
    /// The new run.
    pub new: RunInfo,
    /// What limits the comparison.
    pub warnings: Vec<String>,
}

impl Diff {
    /// True when `new` regressed by more than `pct` % with the interval excluding zero (the CI
    /// gate of `profile_diff --fail-on-regression`).
    pub fn regressed_beyond(&self, pct: f64) -> bool {
        let s = &self.step_time_ms;
        matches!((s.delta_pct, s.ci95_pct), (Some(d), Some([lo, _])) if d > pct && lo > 0.0)
            && self.verdict != Verdict::Incomparable
    }
}

/// Compares two reports (scans of two runs, or saved JSON reports).
///
/// ```
/// use xlens_report::diff::{DiffConfig, Verdict, diff};
/// use xlens_faults::{Profile, ScanConfig, scan};
/// use xlens_testkit::synth::{fixture, tpu_profile};
/// let space = xlens_xplane::Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
/// let report = scan(&Profile::from_space("host0", space), &ScanConfig::default());
/// let same = diff(&report, &report, &DiffConfig::default());
/// assert_eq!((same.verdict, same.step_time_ms.delta_pct), (Verdict::Neutral, Some(0.0)));
/// assert!(same.findings.resolved.is_empty() && same.findings.new.is_empty());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn diff(base: &Report, new: &Report, config: &DiffConfig) -> Diff {
    diff_with_repeats(base, new, Repeats::default(), config)
}

/// [`diff`] with repeated runs of either side, whose run-to-run noise goes into the interval.
pub fn diff_with_repeats(base: &Report, new: &Report, repeats: Repeats<'_>, config: &DiffConfig) -> Diff {
    let mut warnings = Vec::new();
    let base_side: Vec<&Report> = std::iter::once(base).chain(repeats.base).collect();
    let new_side: Vec<&Report> = std::iter::once(new).chain(repeats.new).collect();
    let step_time_ms = step_delta(&base_side, &new_side, &mut warnings);
    let why_not =
        base_side.iter().flat_map(|b| new_side.iter().map(move |n| (b, n))).find_map(|(b, n)| incomparable(b, n));
    let verdict = match &why_not {
        Some(_) => Verdict::Incomparable,
        None => verdict_of(&step_time_ms, config),
    };
    if matches!(verdict, Verdict::Improved | Verdict::Regressed) && step_time_ms.runs == [1, 1] {
        warnings.push(
            "one run a side: the interval holds step-to-step noise only, and two processes of one program can differ \
             more (machine load, placement); give repeated runs of each side to include it"
                .to_owned(),
        );
    }
    if let Some(why) = &why_not {
        warnings.insert(0, why.clone());
    }
    let (ops, op_warnings) = op_deltas(&side_ops(&base_side), &side_ops(&new_side), cutoffs(&base_side, &new_side));
    warnings.extend(op_warnings);
    let findings = match_findings(&base.findings, &new.findings);
    let mut d = Diff {
        verdict,
        summary: String::new(),
        step_time_ms,
        metrics: metric_deltas(&base_side, &new_side),
        categories: category_deltas(&base_side, &new_side),
        ops,
        findings,
        memory_peak_bytes: Pair { base: side_peak(&base_side), new: side_peak(&new_side) },
        hosts: host_deltas(&base_side, &new_side),
        straggler: Pair { base: base.metrics.step_time_host.clone(), new: new.metrics.step_time_host.clone() },
        step_series_ms: Series::of(&base_side, &new_side),
        base: run_info(base),
        new: run_info(new),
        warnings,
    };
    d.summary = summary(&d, config);
    d
}

pub(crate) fn run_info(r: &Report) -> RunInfo {
    let device = match &r.profile.device_type {
        Some(t) if t.contains(r.profile.device.as_str()) => t.clone(),
        Some(t) => format!("{} ({t})", r.profile.device),
        None => r.profile.device.clone(),
    };
    RunInfo {
        status: r.status,
        summary: r.summary.clone(),
        device,
        main_program: r.profile.main_program.as_deref().map(|p| program_name(p).to_owned()),
        hosts: r.profile.hosts.len(),
    }
}

/// Why two runs cannot be compared, if they cannot.
fn incomparable(base: &Report, new: &Report) -> Option<String> {
    for (which, r) in [("base", base), ("new", new)] {
        if r.status == Status::Incomplete {
            return Some(format!("the {which} run is INCOMPLETE (part of it could not be read): {}", r.summary));
        }
    }
    let (b, n) = (run_info(base), run_info(new));
    if b.device != n.device {
        return Some(format!("different hardware: {} vs {}", b.device, n.device));
    }
    if let (Some(bp), Some(np)) = (&b.main_program, &n.main_program)
        && bp != np
    {
        return Some(format!("different programs: the main program is {bp} in the base run, {np} in the new one"));
    }
    None
}

/// One side's memory peak: the mean over its runs, as every figure of a side.
fn side_peak(side: &[&Report]) -> Option<u64> {
    side_figure(side, |r| r.metrics.memory_peak_bytes.map(|b| b as f64)).map(|b| b.round() as u64)
}

/// The mean of the runs' mean step times (each run weighs the same).
fn side_mean(side: &[&Report]) -> Option<f64> {
    let means: Vec<f64> = side.iter().filter_map(|r| r.metrics.step_time_ms_mean).collect();
    (!means.is_empty() && means.len() == side.len()).then(|| means.iter().sum::<f64>() / means.len() as f64)
}

fn step_delta(base: &[&Report], new: &[&Report], warnings: &mut Vec<String>) -> StepTimeDelta {
    let steps =
        |side: &[&Report]| -> Vec<Vec<f64>> { side.iter().map(|r| r.comparison.step_times_ms.clone()).collect() };
    let (b, n) = (steps(base), steps(new));
    let (bm, nm) = (side_mean(base), side_mean(new));
    let delta_ms = bm.zip(nm).map(|(b, n)| n - b);
    let delta_pct = bm.zip(nm).filter(|(b, _)| *b > 0.0).map(|(b, n)| 100.0 * (n / b - 1.0));
    let enough = |side: &[Vec<f64>]| side.iter().all(|s| s.len() >= 2);
    let ci95_pct = if enough(&b) && enough(&n) {
        Some(bootstrap_ci(&b, &n))
    } else {
        warnings.push("a run has fewer than two steps: no confidence interval, the verdict stays NEUTRAL".to_owned());
        None
    };
    let (bt, nt) = (&base[0].metrics.time_base, &new[0].metrics.time_base);
    if bt != nt {
        warnings.push(format!(
            "the runs count steps differently ({bt} vs {nt}): their step times may not measure the same work"
        ));
    }
    StepTimeDelta {
        base: bm,
        new: nm,
        delta_ms,
        delta_pct,
        ci95_pct,
        base_steps: b.iter().map(Vec::len).sum(),
        new_steps: n.iter().map(Vec::len).sum(),
        runs: [base.len(), new.len()],
        time_base: [bt.clone(), nt.clone()],
    }
}

fn verdict_of(s: &StepTimeDelta, config: &DiffConfig) -> Verdict {
    match (s.delta_pct, s.ci95_pct) {
        (Some(d), Some([_, hi])) if hi < 0.0 && d <= -config.min_change_pct => Verdict::Improved,
        (Some(d), Some([lo, _])) if lo > 0.0 && d >= config.min_change_pct => Verdict::Regressed,
        _ => Verdict::Neutral,
    }
}

/// SplitMix64: the bootstrap's deterministic random numbers.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The 2.5th and 97.5th percentiles of `mean(new*) / mean(base*) - 1` (in %) over bootstrap
/// resamples of both sides: runs resampled with replacement, then each chosen run's steps (one
/// run a side: its steps only). Each run weighs the same.
fn bootstrap_ci(base: &[Vec<f64>], new: &[Vec<f64>]) -> [f64; 2] {
    let mut rng = SplitMix(0x786c_656e_735f_6466);
    let mut side_mean = |runs: &[Vec<f64>]| {
        let mut total = 0.0;
        for _ in 0..runs.len() {
            let xs = &runs[rng.below(runs.len())];
            total += (0..xs.len()).map(|_| xs[rng.below(xs.len())]).sum::<f64>() / xs.len() as f64;
        }
        total / runs.len() as f64
    };
    let mut changes: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let b = side_mean(base);
            let n = side_mean(new);
            if b > 0.0 { 100.0 * (n / b - 1.0) } else { 0.0 }
        })
        .collect();
    changes.sort_by(f64::total_cmp);
    let at = |q: f64| changes[((q * (changes.len() - 1) as f64).round() as usize).min(changes.len() - 1)];
    [at(0.025), at(0.975)]
}

/// A figure of one side: the mean over its runs (each run weighs the same), `None` unless every
/// run has it, as [`side_mean`] is for the step time, so one figure has one value a side in the
/// step line, the metrics, the frames and the page.
fn side_figure(side: &[&Report], figure: impl Fn(&Report) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = side.iter().filter_map(|r| figure(r)).collect();
    (!values.is_empty() && values.len() == side.len()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn metric_deltas(base: &[&Report], new: &[&Report]) -> BTreeMap<String, MetricDelta> {
    // The step count is not a figure to compare (the step time is).
    let names: Vec<&'static str> =
        base[0].metrics.figures().into_iter().map(|(name, _)| name).filter(|name| *name != "step_count").collect();
    let figure =
        |r: &Report, name: &str| r.metrics.figures().into_iter().find(|(n, _)| *n == name).and_then(|(_, v)| v);
    names
        .into_iter()
        .map(|name| {
            let (b, n) = (side_figure(base, |r| figure(r, name)), side_figure(new, |r| figure(r, name)));
            (name.to_owned(), MetricDelta { base: b, new: n, delta: b.zip(n).map(|(b, n)| n - b) })
        })
        .collect()
}

/// Per-step times of one side by key: the mean over its runs, a run without the key counting 0.
fn side_times<'a, T: 'a, K: Ord>(
    side: &[&'a Report],
    items: impl Fn(&'a Report) -> &'a [T],
    key: impl Fn(&'a T) -> K,
    ms: impl Fn(&T) -> f64,
) -> BTreeMap<K, (f64, &'a T)> {
    let mut by: BTreeMap<K, (f64, &'a T)> = BTreeMap::new();
    for r in side {
        for item in items(r) {
            by.entry(key(item)).or_insert((0.0, item)).0 += ms(item);
        }
    }
    let runs = side.len().max(1) as f64;
    for v in by.values_mut() {
        v.0 /= runs;
    }
    by
}

fn category_deltas(base: &[&Report], new: &[&Report]) -> Vec<CategoryDelta> {
    fn categories(r: &Report) -> &[CategoryTime] {
        &r.comparison.categories
    }
    fn name(c: &CategoryTime) -> &str {
        c.category.as_str()
    }
    let mut by: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (c, (v, _)) in side_times(base, categories, name, |c| c.ms_per_step) {
        by.entry(c).or_default().0 = v;
    }
    for (c, (v, _)) in side_times(new, categories, name, |c| c.ms_per_step) {
        by.entry(c).or_default().1 = v;
    }
    let mut out: Vec<CategoryDelta> = by
        .into_iter()
        .map(|(category, (b, n))| CategoryDelta {
            category: category.to_owned(),
            base_ms_per_step: b,
            new_ms_per_step: n,
            delta_ms_per_step: n - b,
        })
        .collect();
    out.sort_by(|a, b| {
        b.delta_ms_per_step.abs().total_cmp(&a.delta_ms_per_step.abs()).then(a.category.cmp(&b.category))
    });
    out
}

/// One side's ops: each op's time per step the mean over the side's runs (in the first run's
/// order, then the ops only later runs have), so the op table has one value a side.
fn side_ops(side: &[&Report]) -> Vec<OpTime> {
    if side.len() == 1 {
        return side[0].comparison.ops.clone();
    }
    fn ops(r: &Report) -> &[OpTime] {
        &r.comparison.ops
    }
    fn key(o: &OpTime) -> (&str, &str) {
        (o.program.as_str(), o.name.as_str())
    }
    let by = side_times(side, ops, key, |o| o.ms_per_step);
    let mut out: Vec<OpTime> = by.into_values().map(|(ms, o)| OpTime { ms_per_step: ms, ..o.clone() }).collect();
    out.sort_by(|a, b| {
        b.ms_per_step.total_cmp(&a.ms_per_step).then_with(|| (&a.program, &a.name).cmp(&(&b.program, &b.name)))
    });
    out
}

/// Each side's op-list cutoff: the largest of its runs' (an op below it may be missing from
/// any of them).
fn cutoffs(base: &[&Report], new: &[&Report]) -> (Option<f64>, Option<f64>) {
    let side = |s: &[&Report]| s.iter().filter_map(|r| r.comparison.ops_cutoff_ms_per_step).reduce(f64::max);
    (side(base), side(new))
}

/// Ops matched by program and name, then the rest by program, shape and opcode, and category
/// when that pairs one op of each run; an op missing from a truncated list and shorter than its
/// cutoff is left out (it may be there, below the cutoff).
fn op_deltas(base: &[OpTime], new: &[OpTime], cutoff: (Option<f64>, Option<f64>)) -> (Vec<OpDelta>, Vec<String>) {
    let mut out = Vec::new();
    let key = |o: &OpTime| (o.program.clone(), o.name.clone());
    let new_by_name: BTreeMap<(String, String), usize> = new.iter().enumerate().map(|(i, o)| (key(o), i)).collect();
    let mut new_used = vec![false; new.len()];
    let mut base_left = Vec::new();
    for b in base {
        match new_by_name.get(&key(b)) {
            Some(&i) if !new_used[i] => {
                new_used[i] = true;
                out.push(op_row(Some(b), Some(&new[i]), "matched"));
            }
            _ => base_left.push(b),
        }
    }
    // Renamed instructions: the same program, signature and category, one of each side.
    /// Program, signature and category: what identifies a renamed instruction.
    type Signature = (String, String, String);
    let sig = |o: &OpTime| (o.program.clone(), o.signature.clone(), o.category.clone());
    let mut groups: BTreeMap<Signature, (Vec<&OpTime>, Vec<usize>)> = BTreeMap::new();
    for b in &base_left {
        groups.entry(sig(b)).or_default().0.push(b);
    }
    for (i, n) in new.iter().enumerate().filter(|(i, _)| !new_used[*i]) {
        groups.entry(sig(n)).or_default().1.push(i);
    }
    let mut left_out = 0usize;
    for ((_, signature, _), (bs, ns)) in groups {
        if !signature.is_empty() && bs.len() == 1 && ns.len() == 1 {
            new_used[ns[0]] = true;
            out.push(op_row(Some(bs[0]), Some(&new[ns[0]]), "renamed"));
            continue;
        }
        for b in bs {
            if cutoff.1.is_some_and(|c| b.ms_per_step <= c) {
                left_out += 1;
            } else {
                out.push(op_row(Some(b), None, "vanished"));
            }
        }
        for i in ns {
            new_used[i] = true;
            if cutoff.0.is_some_and(|c| new[i].ms_per_step <= c) {
                left_out += 1;
            } else {
                out.push(op_row(None, Some(&new[i]), "new"));
            }
        }
    }
    out.sort_by(|a, b| {
        b.delta_ms_per_step
            .abs()
            .total_cmp(&a.delta_ms_per_step.abs())
            .then_with(|| (&a.program, &a.name, &a.status).cmp(&(&b.program, &b.name, &b.status)))
    });
    let warnings = if left_out > 0 {
        vec![format!("{left_out} short op(s) of one run are beyond the other run's op list and are left out")]
    } else {
        Vec::new()
    };
    (out, warnings)
}

fn op_row(base: Option<&OpTime>, new: Option<&OpTime>, status: &str) -> OpDelta {
    let named = new.or(base).expect("an op of one run at least");
    let (b, n) = (base.map(|o| o.ms_per_step), new.map(|o| o.ms_per_step));
    OpDelta {
        program: named.program.clone(),
        name: named.name.clone(),
        status: status.to_owned(),
        category: named.category.clone(),
        base_ms_per_step: b,
        new_ms_per_step: n,
        delta_ms_per_step: n.unwrap_or(0.0) - b.unwrap_or(0.0),
    }
}

/// Findings matched by detector id and title; several of one kind pair in report order.
fn match_findings(base: &[Finding], new: &[Finding]) -> FindingsDelta {
    let mut out = FindingsDelta::default();
    let mut new_used = vec![false; new.len()];
    for b in base {
        match new.iter().enumerate().position(|(i, n)| !new_used[i] && n.id == b.id && n.title == b.title) {
            Some(i) => {
                new_used[i] = true;
                out.persisting.push(new[i].clone());
            }
            None => out.resolved.push(b.clone()),
        }
    }
    out.new = new.iter().zip(&new_used).filter(|(_, used)| !**used).map(|(f, _)| f.clone()).collect();
    out
}

fn host_deltas(base: &[&Report], new: &[&Report]) -> Vec<HostDelta> {
    let hosts: std::collections::BTreeSet<&str> =
        base.iter().chain(new).flat_map(|r| r.hosts.iter().map(|h| h.host.as_str())).collect();
    let mean = |side: &[&Report], host: &str| {
        side_figure(side, |r| r.hosts.iter().find(|h| h.host == host).and_then(|h| h.step_time_ms_mean))
    };
    hosts
        .into_iter()
        .map(|host| {
            let (b, n) = (mean(base, host), mean(new, host));
            HostDelta {
                host: host.to_owned(),
                base_ms: b,
                new_ms: n,
                delta_pct: b.zip(n).filter(|(b, _)| *b > 0.0).map(|(b, n)| 100.0 * (n / b - 1.0)),
            }
        })
        .collect()
}

fn summary(d: &Diff, config: &DiffConfig) -> String {
    let s = &d.step_time_ms;
    let mut out = format!("{}: ", d.verdict.as_str());
    match (s.base, s.new, s.delta_pct) {
        (Some(b), Some(n), Some(pct)) => {
            out.push_str(&format!("mean step time {b:.3} -> {n:.3} ms ({pct:+.1} %"));
            if let Some([lo, hi]) = s.ci95_pct {
                out.push_str(&format!(", 95 % CI {lo:+.1} to {hi:+.1} %"));
            }
            match s.runs {
                [1, 1] => out.push_str(&format!(", {} vs {} steps)", s.base_steps, s.new_steps)),
                [b, n] => out.push_str(&format!(", {b} vs {n} runs of {} vs {} steps)", s.base_steps, s.new_steps)),
            }
        }
        _ => out.push_str("no step time in one of the runs"),
    }
    if d.verdict == Verdict::Neutral && s.ci95_pct.is_some() {
        out.push_str(&format!(
            "; no change beyond noise (the interval holds zero or the change is under {:.0} %)",
            config.min_change_pct
        ));
    }
    let f = &d.findings;
    out.push_str(&format!(
        ". Findings: {} resolved, {} new, {} persisting.",
        f.resolved.len(),
        f.new.len(),
        f.persisting.len()
    ));
    if d.verdict == Verdict::Incomparable
        && let Some(why) = d.warnings.first()
    {
        out.push_str(&format!(" Not comparable: {why}."));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(program: &str, name: &str, sig: &str, ms: f64) -> OpTime {
        OpTime {
            program: program.into(),
            name: name.into(),
            signature: sig.into(),
            category: "loop fusion".into(),
            ms_per_step: ms,
        }
    }

    #[test]
    fn the_interval_holds_zero_for_the_same_steps_and_excludes_it_for_a_shift() {
        let base = vec![vec![10.0, 10.4, 9.8, 10.1, 10.2, 9.9]];
        let [lo, hi] = bootstrap_ci(&base, &base);
        assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
        let slower = vec![base[0].iter().map(|v| v * 1.3).collect::<Vec<f64>>()];
        let [lo, hi] = bootstrap_ci(&base, &slower);
        assert!(lo > 20.0 && hi < 40.0, "{lo} {hi}");
        assert_eq!(bootstrap_ci(&base, &slower), [lo, hi], "the same interval run to run");
        // Runs that differ from each other as much as the sides do: the interval holds zero.
        let runs =
            |a: f64, b: f64| vec![base[0].iter().map(|v| v * a).collect(), base[0].iter().map(|v| v * b).collect()];
        let [lo, hi] = bootstrap_ci(&runs(1.0, 1.3), &runs(1.05, 1.25));
        assert!(lo < 0.0 && hi > 0.0, "run-to-run noise is in the interval: {lo} {hi}");
    }

    #[test]
    fn ops_match_by_name_then_by_shape_and_opcode() {
        let base = [op("jit_f", "fusion.1", "f32[8] fusion", 2.0), op("jit_f", "dot.3", "f32[8,8] dot", 1.0)];
        let new = [
            op("jit_f", "fusion.1", "f32[8] fusion", 1.5),
            op("jit_f", "dot.7", "f32[8,8] dot", 1.0),
            op("jit_f", "copy.2", "f32[8] copy", 0.25),
        ];
        let (rows, warnings) = op_deltas(&base, &new, (None, None));
        let got: Vec<(&str, &str, f64)> =
            rows.iter().map(|r| (r.name.as_str(), r.status.as_str(), r.delta_ms_per_step)).collect();
        assert_eq!(got, [("fusion.1", "matched", -0.5), ("copy.2", "new", 0.25), ("dot.7", "renamed", 0.0)]);
        assert!(warnings.is_empty());
        // Beyond a truncated list: left out, said in a warning.
        let (rows, warnings) = op_deltas(&base, &new, (Some(0.5), None));
        assert!(rows.iter().all(|r| r.status != "new") && warnings.len() == 1);
    }

    #[test]
    fn the_verdict_needs_the_interval_and_the_floor() {
        let s = |d: f64, ci: [f64; 2]| StepTimeDelta {
            base: Some(10.0),
            new: Some(10.0 + d / 10.0),
            delta_ms: None,
            delta_pct: Some(d),
            ci95_pct: Some(ci),
            base_steps: 5,
            new_steps: 5,
            runs: [1, 1],
            time_base: Default::default(),
        };
        let c = DiffConfig::default();
        assert_eq!(verdict_of(&s(-30.0, [-35.0, -25.0]), &c), Verdict::Improved);
        assert_eq!(verdict_of(&s(30.0, [25.0, 35.0]), &c), Verdict::Regressed);
        assert_eq!(verdict_of(&s(-30.0, [-60.0, 5.0]), &c), Verdict::Neutral);
        assert_eq!(verdict_of(&s(-1.0, [-1.5, -0.5]), &c), Verdict::Neutral, "under the floor");
    }
}
