//! polars DataFrames of the crate's tables.
//!
//! Every function returns a frame with its full schema, also when there is nothing to show
//! (zero rows). This is the only module that imports polars.

use polars::prelude::*;

use crate::ChipSpec;
use crate::{Error, ErrorKind, Result};

/// Builds a frame from columns of equal length (the one place that calls the constructor).
fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(|e| Error::new(ErrorKind::Frame(e.to_string())))
}

/// Catalogue chips as a frame, one row per chip. Columns: `chip`, `name`, `vendor`,
/// `cores_per_chip`, `peak_bf16_flop_per_s`, `peak_fp8_flop_per_s`, `peak_int8_op_per_s`,
/// `peak_fp32_flop_per_s` (null where not public), `hbm_bytes_per_s`, `hbm_capacity_bytes`,
/// `ridge_bf16_flop_per_byte`, `interconnect_bytes_per_s`, `dcn_bytes_per_s`, `source`.
///
/// ```
/// use xlens_roofline::{chips::CATALOGUE, frame};
/// let chips: Vec<_> = CATALOGUE.iter().collect();
/// let df = frame::chips_frame(&chips)?;
/// assert_eq!((df.height(), df.width()), (11, 14));
/// assert_eq!(frame::chips_frame(&[])?.width(), 14);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn chips_frame(chips: &[&ChipSpec]) -> Result<DataFrame> {
    let opt = |f: fn(&ChipSpec) -> Option<f64>| chips.iter().map(|c| f(c)).collect::<Vec<_>>();
    frame(vec![
        Column::new("chip".into(), chips.iter().map(|c| c.id).collect::<Vec<_>>()),
        Column::new("name".into(), chips.iter().map(|c| c.name).collect::<Vec<_>>()),
        Column::new("vendor".into(), chips.iter().map(|c| c.vendor.as_str()).collect::<Vec<_>>()),
        Column::new("cores_per_chip".into(), chips.iter().map(|c| c.cores_per_chip).collect::<Vec<_>>()),
        Column::new("peak_bf16_flop_per_s".into(), chips.iter().map(|c| c.peak_bf16.per_s()).collect::<Vec<_>>()),
        Column::new("peak_fp8_flop_per_s".into(), opt(|c| c.peak_fp8.map(|f| f.per_s()))),
        Column::new("peak_int8_op_per_s".into(), opt(|c| c.peak_int8.map(|f| f.per_s()))),
        Column::new("peak_fp32_flop_per_s".into(), opt(|c| c.peak_fp32.map(|f| f.per_s()))),
        Column::new("hbm_bytes_per_s".into(), chips.iter().map(|c| c.hbm_bandwidth.bytes_per_s()).collect::<Vec<_>>()),
        Column::new("hbm_capacity_bytes".into(), chips.iter().map(|c| c.hbm_capacity.as_u64()).collect::<Vec<_>>()),
        Column::new("ridge_bf16_flop_per_byte".into(), chips.iter().map(|c| c.ridge_bf16().get()).collect::<Vec<_>>()),
        Column::new("interconnect_bytes_per_s".into(), opt(|c| c.interconnect_bandwidth.map(|b| b.bytes_per_s()))),
        Column::new("dcn_bytes_per_s".into(), opt(|c| c.dcn_bandwidth.map(|b| b.bytes_per_s()))),
        Column::new("source".into(), chips.iter().map(|c| c.source).collect::<Vec<_>>()),
    ])
}

/// Steps as a frame, one row per step: `step`, `number`, `start_ps`, `step_time_ps`,
/// `step_time_ms`, `cores`.
pub fn steps_frame(steps: &crate::Steps) -> Result<DataFrame> {
    let s = &steps.steps;
    frame(vec![
        Column::new("step".into(), s.iter().map(|x| x.name.as_str()).collect::<Vec<_>>()),
        Column::new("number".into(), s.iter().map(|x| x.number).collect::<Vec<_>>()),
        Column::new("start_ps".into(), s.iter().map(|x| x.start.0).collect::<Vec<_>>()),
        Column::new("step_time_ps".into(), s.iter().map(|x| x.duration.0).collect::<Vec<_>>()),
        Column::new("step_time_ms".into(), s.iter().map(|x| x.duration.as_ms_f64()).collect::<Vec<_>>()),
        Column::new("cores".into(), s.iter().map(|x| x.cores.len() as u32).collect::<Vec<_>>()),
    ])
}

/// The op profile as a frame, one row per op (combined over cores and steps): `program_id`,
/// `program`, `name`, `category`, `occurrences`, `time_ps`, `self_time_ps`, `flops`, `xprof_flops`,
/// `hbm_bytes`, `onchip_read_bytes`, `onchip_write_bytes`, `flop_per_s`, `hbm_bytes_per_s` (both
/// null for an async start and for an op above the device's peaks: [`crate::OpProfile::rates`]),
/// `intensity_flop_per_byte`, `bound` and `roofline_efficiency_pct` (null without device peaks,
/// and where the rates are), `source`.
///
/// ```
/// use xlens_testkit::synth::{fixture, tpu_profile};
/// use xlens_xplane::Space;
/// use xlens_roofline::{OpProfile, frame};
/// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
/// let df = frame::op_profile_frame(&OpProfile::from_tpu(&space)?)?;
/// assert_eq!((df.height(), df.width()), (14, 18));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn op_profile_frame(profile: &crate::OpProfile) -> Result<DataFrame> {
    let ops = &profile.ops;
    let points: Vec<Option<crate::RooflinePoint>> = ops.iter().map(|o| profile.roofline(o)).collect();
    frame(vec![
        Column::new("program_id".into(), ops.iter().map(|o| o.program_id).collect::<Vec<_>>()),
        Column::new(
            "program".into(),
            ops.iter().map(|o| profile.programs.get(&o.program_id).cloned()).collect::<Vec<_>>(),
        ),
        Column::new("name".into(), ops.iter().map(|o| o.name.as_str()).collect::<Vec<_>>()),
        Column::new("category".into(), ops.iter().map(|o| o.category.as_str()).collect::<Vec<_>>()),
        Column::new("occurrences".into(), ops.iter().map(|o| o.occurrences).collect::<Vec<_>>()),
        Column::new("time_ps".into(), ops.iter().map(|o| o.time.0).collect::<Vec<_>>()),
        Column::new("self_time_ps".into(), ops.iter().map(|o| o.self_time.0).collect::<Vec<_>>()),
        Column::new("flops".into(), ops.iter().map(|o| o.flops).collect::<Vec<_>>()),
        Column::new("xprof_flops".into(), ops.iter().map(|o| o.xprof_flops).collect::<Vec<_>>()),
        Column::new("hbm_bytes".into(), ops.iter().map(|o| o.bytes.hbm).collect::<Vec<_>>()),
        Column::new("onchip_read_bytes".into(), ops.iter().map(|o| o.bytes.onchip_read).collect::<Vec<_>>()),
        Column::new("onchip_write_bytes".into(), ops.iter().map(|o| o.bytes.onchip_write).collect::<Vec<_>>()),
        Column::new("flop_per_s".into(), ops.iter().map(|o| profile.rates(o).map(|r| r.0)).collect::<Vec<_>>()),
        Column::new("hbm_bytes_per_s".into(), ops.iter().map(|o| profile.rates(o).map(|r| r.1)).collect::<Vec<_>>()),
        Column::new(
            "intensity_flop_per_byte".into(),
            ops.iter().map(|o| o.operational_intensity()).collect::<Vec<_>>(),
        ),
        Column::new("bound".into(), points.iter().map(|p| p.map(|p| p.bound_by.label())).collect::<Vec<_>>()),
        Column::new(
            "roofline_efficiency_pct".into(),
            points.iter().map(|p| p.map(|p| 100.0 * p.efficiency)).collect::<Vec<_>>(),
        ),
        Column::new("source".into(), ops.iter().map(|o| o.source.clone()).collect::<Vec<_>>()),
    ])
}

/// The framework op profile of a host without HLO ([`crate::FrameworkOpStats`]) as a frame,
/// one row per op and an `IDLE` row per side (XProf's framework-op statistics with idle), device
/// first, each side by self time: `side` (`Device`, `Host`), `type`, `name`, `occurrences`,
/// `time_ps`, `self_time_ps`, `share_pct` (of the side's total with idle), `eager`, `kernels`
/// (distinct kernels and copies a device op launched), `attribution` (`tf_op`, `level_0`, `none`).
///
/// ```
/// use xlens_roofline::{FrameworkOpStats, frame};
/// let df = frame::framework_ops_frame(&FrameworkOpStats::default())?;
/// assert_eq!((df.height(), df.width()), (0, 10));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn framework_ops_frame(stats: &crate::FrameworkOpStats) -> Result<DataFrame> {
    use crate::{FrameworkOp, OpSide};
    let idle = |side: OpSide, t: xlens_xplane::Picos| FrameworkOp {
        side,
        op_type: crate::IDLE.to_owned(),
        name: crate::IDLE.to_owned(),
        occurrences: 0,
        total: t,
        self_time: t,
        eager: false,
        kernels: Vec::new(),
    };
    let mut rows: Vec<FrameworkOp> = Vec::new();
    for (side, ops, total, idle_time) in [
        (OpSide::Device, &stats.device, stats.device_total, stats.device_idle()),
        (OpSide::Host, &stats.host, stats.host_total, stats.host_idle()),
    ] {
        rows.extend(ops.iter().cloned());
        if total.0 > 0 {
            rows.push(idle(side, idle_time));
        }
    }
    let attribution = stats.attribution.as_str();
    frame(vec![
        Column::new("side".into(), rows.iter().map(|o| o.side.label()).collect::<Vec<_>>()),
        Column::new("type".into(), rows.iter().map(|o| o.op_type.as_str()).collect::<Vec<_>>()),
        Column::new("name".into(), rows.iter().map(|o| o.name.as_str()).collect::<Vec<_>>()),
        Column::new("occurrences".into(), rows.iter().map(|o| o.occurrences).collect::<Vec<_>>()),
        Column::new("time_ps".into(), rows.iter().map(|o| o.total.0).collect::<Vec<_>>()),
        Column::new("self_time_ps".into(), rows.iter().map(|o| o.self_time.0).collect::<Vec<_>>()),
        Column::new("share_pct".into(), rows.iter().map(|o| 100.0 * stats.share(o)).collect::<Vec<_>>()),
        Column::new("eager".into(), rows.iter().map(|o| o.eager).collect::<Vec<_>>()),
        Column::new("kernels".into(), rows.iter().map(|o| o.kernels.len() as u64).collect::<Vec<_>>()),
        Column::new("attribution".into(), rows.iter().map(|_| attribution).collect::<Vec<_>>()),
    ])
}

/// The `tf.data` pipelines as a frame (XProf's `tf.data` bottleneck analysis): one row per
/// iterator of each pipeline's slowest call, in pipeline order (slowest first) and in the order
/// the call reached them. Columns: `pipeline`, `pipeline_kind` (`host` or `device`), `root`,
/// `calls` (the pipeline's), `mean_latency_ps`, `min_latency_ps`, `max_latency_ps`,
/// `slow_calls`, `iterator_id` (a decimal string: ids run past `i64`), `iterator`, `stage`,
/// `stage_kind`, `async`, `iterator_calls`, `time_ps`, `self_time_ps`, `blocking`,
/// `bottleneck`.
///
/// ```
/// use xlens_roofline::{TfDataPipelines, frame};
/// let df = frame::tf_data_frame(&TfDataPipelines::default())?;
/// assert_eq!((df.height(), df.width()), (0, 18));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tf_data_frame(tf_data: &crate::TfDataPipelines) -> Result<DataFrame> {
    let rows: Vec<(&crate::TfDataPipeline, usize, &crate::TfDataIterator)> =
        tf_data.pipelines.iter().flat_map(|p| p.iterators.iter().enumerate().map(move |(i, it)| (p, i, it))).collect();
    frame(vec![
        Column::new("pipeline".into(), rows.iter().map(|r| r.0.name.as_str()).collect::<Vec<_>>()),
        Column::new("pipeline_kind".into(), rows.iter().map(|r| r.0.kind.as_str()).collect::<Vec<_>>()),
        Column::new("root".into(), rows.iter().map(|r| r.0.root_name.as_str()).collect::<Vec<_>>()),
        Column::new("calls".into(), rows.iter().map(|r| r.0.calls).collect::<Vec<_>>()),
        Column::new("mean_latency_ps".into(), rows.iter().map(|r| r.0.mean_latency.0).collect::<Vec<_>>()),
        Column::new("min_latency_ps".into(), rows.iter().map(|r| r.0.min_latency.0).collect::<Vec<_>>()),
        Column::new("max_latency_ps".into(), rows.iter().map(|r| r.0.max_latency.0).collect::<Vec<_>>()),
        Column::new("slow_calls".into(), rows.iter().map(|r| r.0.slow_calls).collect::<Vec<_>>()),
        Column::new("iterator_id".into(), rows.iter().map(|r| r.2.id.to_string()).collect::<Vec<_>>()),
        Column::new("iterator".into(), rows.iter().map(|r| r.2.name.as_str()).collect::<Vec<_>>()),
        Column::new("stage".into(), rows.iter().map(|r| r.2.short_name()).collect::<Vec<_>>()),
        Column::new("stage_kind".into(), rows.iter().map(|r| r.2.kind().as_str()).collect::<Vec<_>>()),
        Column::new("async".into(), rows.iter().map(|r| r.2.is_async()).collect::<Vec<_>>()),
        Column::new("iterator_calls".into(), rows.iter().map(|r| r.2.calls).collect::<Vec<_>>()),
        Column::new("time_ps".into(), rows.iter().map(|r| r.2.total.0).collect::<Vec<_>>()),
        Column::new("self_time_ps".into(), rows.iter().map(|r| r.2.self_time.0).collect::<Vec<_>>()),
        Column::new("blocking".into(), rows.iter().map(|r| r.2.blocking).collect::<Vec<_>>()),
        Column::new("bottleneck".into(), rows.iter().map(|r| r.0.bottleneck == Some(r.1)).collect::<Vec<_>>()),
    ])
}

/// The category pie as a frame: `category`, `self_time_ps`, `self_time_us`.
pub fn categories_frame(profile: &crate::OpProfile) -> Result<DataFrame> {
    let cats = profile.categories();
    frame(vec![
        Column::new("category".into(), cats.keys().map(String::as_str).collect::<Vec<_>>()),
        Column::new("self_time_ps".into(), cats.values().map(|t| t.0).collect::<Vec<_>>()),
        Column::new("self_time_us".into(), cats.values().map(|t| t.as_us_f64()).collect::<Vec<_>>()),
    ])
}

/// Step anatomy as a frame, one row per step (picoseconds): `step`, `step_time_ps`, `matmul_ps`,
/// `collective_exposed_ps`, `collective_hidden_ps`, `vector_ps`, `data_formatting_ps`,
/// `infeed_outfeed_ps`, `host_ps`, `idle_ps`. `steps` names the rows (same order as `anatomy`).
pub fn anatomy_frame(steps: &crate::Steps, anatomy: &[crate::StepAnatomy]) -> Result<DataFrame> {
    let col = |f: fn(&crate::StepAnatomy) -> xlens_xplane::Picos| anatomy.iter().map(|a| f(a).0).collect::<Vec<_>>();
    let names: Vec<&str> = steps.steps.iter().take(anatomy.len()).map(|s| s.name.as_str()).collect();
    frame(vec![
        Column::new("step".into(), names),
        Column::new("step_time_ps".into(), col(|a| a.step_time)),
        Column::new("matmul_ps".into(), col(|a| a.matmul)),
        Column::new("collective_exposed_ps".into(), col(|a| a.collective_exposed)),
        Column::new("collective_hidden_ps".into(), col(|a| a.collective_hidden)),
        Column::new("vector_ps".into(), col(|a| a.vector)),
        Column::new("data_formatting_ps".into(), col(|a| a.data_formatting)),
        Column::new("infeed_outfeed_ps".into(), col(|a| a.infeed_outfeed)),
        Column::new("host_ps".into(), col(|a| a.host)),
        Column::new("idle_ps".into(), col(|a| a.idle)),
    ])
}
