//! polars DataFrames of plans, fit tables and precision audits.
//!
//! Every function returns a frame with its full schema, also when there is nothing to show
//! (zero rows). This is the only module that imports polars.

use polars::prelude::*;

use crate::error::{Error, ErrorKind, Result};
use crate::plan::{FitRow, Plan};
use crate::precision::{DriftRow, MatmulAudit};

/// Builds a frame from columns of equal length (the one place that calls the constructor).
fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(|e| Error::new(ErrorKind::Frame(e.to_string())))
}

fn plan_columns(labels: Vec<String>, chips: Vec<&str>, plans: &[&Plan]) -> Vec<Column> {
    let col_u64 =
        |name: &str, f: &dyn Fn(&Plan) -> u64| Column::new(name.into(), plans.iter().map(|p| f(p)).collect::<Vec<_>>());
    vec![
        Column::new("label".into(), labels),
        Column::new("chip".into(), chips),
        Column::new("mode".into(), plans.iter().map(|p| p.request.workload.mode()).collect::<Vec<_>>()),
        col_u64("params", &|p| p.request.model.params),
        col_u64("bytes_per_param", &|p| p.bytes_per_param.total()),
        col_u64("state_bytes", &|p| p.total.state.as_u64()),
        col_u64("activation_bytes", &|p| p.total.activations.as_u64()),
        col_u64("kv_cache_bytes", &|p| p.total.kv_cache.as_u64()),
        col_u64("chips", &|p| p.chips),
        col_u64("per_chip_bytes", &|p| p.per_chip.total().as_u64()),
        col_u64("capacity_bytes", &|p| p.capacity.as_u64()),
        col_u64("usable_bytes", &|p| p.usable.as_u64()),
        Column::new("budget".into(), plans.iter().map(|p| p.request.budget.fraction()).collect::<Vec<_>>()),
        Column::new("min_chips".into(), plans.iter().map(|p| p.min_chips).collect::<Vec<_>>()),
        Column::new("fits".into(), plans.iter().map(|p| p.fits).collect::<Vec<_>>()),
    ]
}

/// Plans as a frame, one row each. Columns: `label` (empty), `chip`, `mode`, `params`,
/// `bytes_per_param`, `state_bytes`, `activation_bytes`, `kv_cache_bytes` (whole job),
/// `chips`, `per_chip_bytes`, `capacity_bytes`, `usable_bytes`, `budget`, `min_chips` (null
/// when nothing fits), `fits`.
///
/// ```
/// use xlens_budget::{Budget, Model, Optimizer, Plan, PlanRequest, Recipe, Workload, frame};
/// use xlens_chips::ChipSpec;
/// let plan = Plan::new(&PlanRequest {
///     model: Model::from_params(7_000_000_000)?,
///     workload: Workload::train(Recipe::Fp32, Optimizer::Adam, 2048, 1),
///     chip: ChipSpec::by_name("v6e")?,
///     budget: Budget::default(),
///     sharding: None,
/// })?;
/// let df = frame::plans_frame(&[plan])?;
/// assert_eq!((df.height(), df.width()), (1, 15));
/// assert_eq!(frame::plans_frame(&[])?.width(), 15);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plans_frame(plans: &[Plan]) -> Result<DataFrame> {
    let refs: Vec<&Plan> = plans.iter().collect();
    frame(plan_columns(vec![String::new(); plans.len()], plans.iter().map(|p| p.request.chip.id).collect(), &refs))
}

/// A fit table ([`crate::fit_table`]) as a frame: the [`plans_frame`] columns with the row
/// labels.
pub fn fit_frame(rows: &[FitRow]) -> Result<DataFrame> {
    let plans: Vec<&Plan> = rows.iter().map(|r| &r.plan).collect();
    frame(plan_columns(rows.iter().map(|r| r.label.clone()).collect(), rows.iter().map(|r| r.chip).collect(), &plans))
}

/// Matmul audits as a frame. Columns: `scheme`, `m`, `k`, `n`, `a`, `b` (distributions),
/// `max_abs`, `rel_frobenius`, `median_ulps`, `max_ulps`, `bound`, `estimate` (null for int8).
pub fn audit_frame(rows: &[MatmulAudit]) -> Result<DataFrame> {
    let f = |g: &dyn Fn(&MatmulAudit) -> f64| rows.iter().map(g).collect::<Vec<_>>();
    let u = |g: &dyn Fn(&MatmulAudit) -> usize| rows.iter().map(|r| g(r) as u64).collect::<Vec<_>>();
    frame(vec![
        Column::new("scheme".into(), rows.iter().map(|r| r.scheme.as_str()).collect::<Vec<_>>()),
        Column::new("m".into(), u(&|r| r.m)),
        Column::new("k".into(), u(&|r| r.k)),
        Column::new("n".into(), u(&|r| r.n)),
        Column::new("a".into(), rows.iter().map(|r| r.a.to_string()).collect::<Vec<_>>()),
        Column::new("b".into(), rows.iter().map(|r| r.b.to_string()).collect::<Vec<_>>()),
        Column::new("max_abs".into(), f(&|r| r.error.max_abs)),
        Column::new("rel_frobenius".into(), f(&|r| r.error.rel_frobenius)),
        Column::new("median_ulps".into(), f(&|r| r.error.median_ulps)),
        Column::new("max_ulps".into(), f(&|r| r.error.max_ulps)),
        Column::new("bound".into(), f(&|r| r.bound)),
        Column::new("estimate".into(), rows.iter().map(|r| r.estimate).collect::<Vec<_>>()),
    ])
}

/// Accumulation drift as a frame. Columns: `k`, `accumulator`, `rel_error`, `bound` (null
/// where void), `first_order`.
pub fn drift_frame(rows: &[DriftRow]) -> Result<DataFrame> {
    frame(vec![
        Column::new("k".into(), rows.iter().map(|r| r.k as u64).collect::<Vec<_>>()),
        Column::new("accumulator".into(), rows.iter().map(|r| r.accumulator.as_str()).collect::<Vec<_>>()),
        Column::new("rel_error".into(), rows.iter().map(|r| r.rel_error).collect::<Vec<_>>()),
        Column::new("bound".into(), rows.iter().map(|r| r.bound).collect::<Vec<_>>()),
        Column::new("first_order".into(), rows.iter().map(|r| r.first_order).collect::<Vec<_>>()),
    ])
}
