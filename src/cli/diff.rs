//! The diff job (`xlens diff`, the `profile_diff` example): scan both runs (or read a saved
//! `scan --format json` report), compare them, write what was asked.

use std::path::{Path, PathBuf};

use crate::faults::{Report, ScanConfig, StepRange, scan_session};
use crate::report::diff::{DiffConfig, Repeats, diff_with_repeats, html, text};
use crate::report::frame::Dataset;
use crate::source::{Location, discover};
use anyhow::{Context, bail};

/// What to compare and what to write.
pub(crate) struct DiffArgs {
    /// The base run: a profile, or a saved JSON report.
    pub(crate) base: PathBuf,
    /// The new run: a profile, or a saved JSON report.
    pub(crate) new: PathBuf,
    /// More runs of the base side.
    pub(crate) base_repeats: Vec<PathBuf>,
    /// More runs of the new side.
    pub(crate) new_repeats: Vec<PathBuf>,
    /// JSON on stdout instead of text.
    pub(crate) json: bool,
    /// Where to write the HTML page.
    pub(crate) html: Option<PathBuf>,
    /// Where to write the Parquet tables.
    pub(crate) out: Option<PathBuf>,
    /// Fail (exit 4) when the step time regressed by more than this many %.
    pub(crate) fail_on_regression: Option<f64>,
    /// Only these steps of each profile.
    pub(crate) steps: Option<StepRange>,
    /// The verdict's noise floor.
    pub(crate) config: DiffConfig,
}

/// A run's report: read from a saved JSON report, or from scanning the profile.
fn report_of(path: &Path, steps: Option<StepRange>) -> anyhow::Result<Report> {
    if path.is_file() && path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let report = Report::from_json(&text)
            .with_context(|| format!("{} is not a saved `xlens scan --format json` report", path.display()))?;
        if report.comparison.step_times_ms.is_empty() && report.metrics.step_count > 0 {
            bail!(
                "{} was saved by an xlens without step times (no \"comparison\" section): scan the profile again",
                path.display()
            );
        }
        return Ok(report);
    }
    let run = discover(&Location::from(path)).with_context(|| format!("opening {}", path.display()))?;
    let config = ScanConfig { steps, ..ScanConfig::default() };
    Ok(scan_session(run.run, &run.hosts, &config, &|_, _| {})?)
}

/// Compares, writes every output asked for, prints the diff. `Ok(true)` when
/// `--fail-on-regression` trips (the caller exits with 4).
pub(crate) fn run(args: &DiffArgs) -> anyhow::Result<bool> {
    let base = report_of(&args.base, args.steps)?;
    let new = report_of(&args.new, args.steps)?;
    let reports =
        |paths: &[PathBuf]| paths.iter().map(|p| report_of(p, args.steps)).collect::<anyhow::Result<Vec<_>>>();
    let (base_more, new_more) = (reports(&args.base_repeats)?, reports(&args.new_repeats)?);
    let d = diff_with_repeats(&base, &new, Repeats { base: &base_more, new: &new_more }, &args.config);
    let mut failures = Vec::new();
    if let Some(out) = &args.out
        && let Err(e) = Dataset::new(out).write_diff(&d)
    {
        failures.push(format!("writing the diff's frames: {e}"));
    }
    if let Some(path) = &args.html
        && let Err(e) = std::fs::write(path, html(&d))
    {
        failures.push(format!("writing {}: {e}", path.display()));
    }
    let shown = if args.json { format!("{}\n", serde_json::to_string_pretty(&d)?) } else { text(&d) };
    super::emit(&shown)?;
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(args.fail_on_regression.is_some_and(|pct| d.regressed_beyond(pct)))
}
