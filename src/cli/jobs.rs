//! The jobs behind the examples and the `xlens` subcommands, after their arguments are parsed:
//! one implementation for both command lines.

use std::path::Path;

use crate::budget::precision::{Distribution, Scheme, accumulation_drift, audit_matmul};
use crate::budget::{Budget, Plan, generations_table};
use crate::documents;
use crate::report::tables::budget::{
    fit_pivot_text, hbm_plan_json, hbm_plan_text, plans_table_text, precision_json, precision_text,
};
use crate::report::tables::hlo::hlo_ops_text;
use crate::report::tables::inventory_text;
use crate::report::tables::kernel_stats::kernel_stats_text;
use crate::report::tables::op_profile::op_profile_text;
use crate::report::tables::roofline::{intensity_text, roofline_table_json, roofline_table_text};
use crate::roofline::{ChipSpec, FlopsPerByte};

use super::{emit, emit_json};

/// Steps, the op profile and the step anatomy of every host.
pub(crate) fn ops(path: &Path, json: bool, top: usize) -> anyhow::Result<()> {
    let ops = documents::host_op_profiles(path).map_err(|e| anyhow::anyhow!(e))?;
    warn_skipped(&ops.skipped_hosts, &ops.errors);
    if json {
        return emit_json(&documents::OpProfileDocument(&ops));
    }
    for analysis in &ops.hosts {
        emit(&op_profile_text(analysis, top))?;
    }
    Ok(())
}

/// The HLO modules of a session (or one `*.hlo_proto.pb`).
pub(crate) fn hlo(path: &Path, json: bool) -> anyhow::Result<()> {
    let hlo = documents::hlo_modules_of(path).map_err(|e| anyhow::anyhow!(e))?;
    for w in &hlo.warnings {
        eprintln!("warning: {}", crate::report::render::printable(w));
    }
    warn_skipped(&hlo.skipped_hosts, &[]);
    if json { emit_json(&documents::hlo_document(&hlo)) } else { emit(&hlo_ops_text(&hlo.modules, &hlo.hosts)) }
}

/// Planes, lines and event counts of every host.
pub(crate) fn inventory_of(path: &Path, json: bool) -> anyhow::Result<()> {
    let inv = documents::host_inventories(path).map_err(|e| anyhow::anyhow!(e))?;
    warn_skipped(&inv.skipped_hosts, &inv.errors);
    if json { emit_json(&documents::planes_document(&inv)) } else { emit(&inventory_text(&inv.hosts)) }
}

/// GPU kernels of every host: launches, durations, launch shapes.
pub(crate) fn kernels(path: &Path, json: bool, top: Option<usize>) -> anyhow::Result<()> {
    let k = documents::host_kernel_stats(path).map_err(|e| anyhow::anyhow!(e))?;
    warn_skipped(&k.skipped_hosts, &k.errors);
    if json {
        emit_json(&documents::kernels_document(&k, top))
    } else {
        emit(&kernel_stats_text(&k.hosts, top.unwrap_or(20)))
    }
}

/// One line on stderr per host file that could not be read (the output covers the others) and
/// per entry that did not decode (the output leaves it out).
pub(crate) fn warn_skipped(skipped: &[crate::faults::SkippedHost], errors: &[String]) {
    for h in skipped {
        let line = format!("warning: host {} skipped ({}): {}", h.host, h.file, h.error);
        eprintln!("{}", crate::report::render::printable(&line));
    }
    for e in errors {
        eprintln!("{}", crate::report::render::printable(&format!("warning: {e}")));
    }
}

/// The chips' roofline table, and where an intensity falls on each.
pub(crate) fn roofline(chips: &[&'static ChipSpec], json: bool, intensity: Option<FlopsPerByte>) -> anyhow::Result<()> {
    if json {
        return emit_json(&roofline_table_json(chips));
    }
    emit(&roofline_table_text(chips))?;
    if let Some(oi) = intensity {
        emit("\n")?;
        emit(&intensity_text(chips, oi))?;
    }
    Ok(())
}

/// `hbm_plan`: plans, or the table across generations (`--generations`).
pub(crate) fn plan(flags: crate::args::PlanFlags) -> anyhow::Result<()> {
    if flags.generations {
        return emit(&fit_pivot_text(&generations_table(Budget::default())?));
    }
    let cli = crate::args::HbmPlanArgs::from_flags(flags)?;
    let plans = cli.requests().iter().map(Plan::new).collect::<Result<Vec<_>, _>>()?;
    match (cli.json, plans.as_slice()) {
        (true, [one]) => emit_json(&hbm_plan_json(one)),
        (true, many) => emit_json(&serde_json::Value::Array(many.iter().map(hbm_plan_json).collect())),
        (false, [one]) => emit(&hbm_plan_text(one)),
        (false, many) => emit(&plans_table_text(many)),
    }
}

/// `precision_audit`: BF16 / INT8 errors of matmuls and accumulation drift.
pub(crate) fn audit(flags: crate::args::AuditFlags) -> anyhow::Result<()> {
    let cli = crate::args::PrecisionArgs::from_flags(flags)?;
    let mut audits = audit_matmul(&cli.spec, &Scheme::ALL)?;
    if let Some(outliers) = cli.outlier_spec() {
        audits.extend(audit_matmul(&outliers, &Scheme::ALL)?);
    }
    let drift = accumulation_drift(&cli.ks, &Distribution::unit_uniform(), cli.trials, cli.spec.seed)?;
    if cli.json { emit_json(&precision_json(&audits, &drift)) } else { emit(&precision_text(&audits, &drift)) }
}
