//! The diff job (`xlens diff`, the `profile_diff` example): scan both runs (or read a saved
//! `scan --format json` report), compare them, write what was asked.

use std::path::PathBuf;

use crate::faults::StepRange;
use crate::report::diff::{DiffConfig, html, text};
use crate::report::frame::Dataset;
use anyhow::bail;

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

/// Compares, writes every output asked for, prints the diff. `Ok(true)` when
/// `--fail-on-regression` trips (the caller exits with 4).
pub(crate) fn run(args: &DiffArgs) -> anyhow::Result<bool> {
    let d = crate::diff_paths(&crate::DiffRequest {
        base: args.base.clone(),
        new: args.new.clone(),
        base_repeats: args.base_repeats.clone(),
        new_repeats: args.new_repeats.clone(),
        steps: args.steps,
        config: args.config,
    })?;
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
