//! Frames of a report (findings, evidence, skipped detectors, metrics) and Parquet output.
//!
//! [`write_parquet`] writes every table of a scan as Hive-partitioned Parquet,
//! `DIR/<table>/host=<host>/part-0.parquet`, so that DuckDB (`read_parquet('DIR/findings/**',
//! hive_partitioning=true)`), Spark, or polars' lazy scanner read each table across hosts (and
//! across machines that scanned different hosts of one session) as one table with a `host`
//! column.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::profile::{HostProfile, Profile};
use crate::scan::{Report, host_metrics};

/// A frame or I/O failure.
#[derive(Debug)]
pub struct FrameError(String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FrameError {}

fn err(e: impl std::fmt::Display) -> FrameError {
    FrameError(e.to_string())
}

fn frame(columns: Vec<Column>) -> Result<DataFrame, FrameError> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(err)
}

/// Findings as a frame: `host`, `id`, `severity`, `title`, `what`, `ms_per_step`, `pct_of_step`,
/// `fix`, `evidence_count`.
pub fn findings_frame(report: &Report) -> Result<DataFrame, FrameError> {
    let f = &report.findings;
    frame(vec![
        Column::new("host".into(), f.iter().map(|x| x.host.as_str()).collect::<Vec<_>>()),
        Column::new("id".into(), f.iter().map(|x| x.id.as_str()).collect::<Vec<_>>()),
        Column::new("severity".into(), f.iter().map(|x| x.severity.as_str()).collect::<Vec<_>>()),
        Column::new("title".into(), f.iter().map(|x| x.title.as_str()).collect::<Vec<_>>()),
        Column::new("what".into(), f.iter().map(|x| x.what.as_str()).collect::<Vec<_>>()),
        Column::new("ms_per_step".into(), f.iter().map(|x| x.impact.ms_per_step).collect::<Vec<_>>()),
        Column::new("pct_of_step".into(), f.iter().map(|x| x.impact.pct_of_step).collect::<Vec<_>>()),
        Column::new("fix".into(), f.iter().map(|x| x.fix.as_str()).collect::<Vec<_>>()),
        Column::new("evidence_count".into(), f.iter().map(|x| x.evidence.len() as u32).collect::<Vec<_>>()),
    ])
}

/// Evidence as a frame, one row per item: `host`, `id` (finding), `index`, `kind`, `text`.
pub fn evidence_frame(report: &Report) -> Result<DataFrame, FrameError> {
    let mut host = Vec::new();
    let mut id = Vec::new();
    let mut index = Vec::new();
    let mut kind = Vec::new();
    let mut text = Vec::new();
    for f in &report.findings {
        for (i, e) in f.evidence.iter().enumerate() {
            host.push(f.host.clone());
            id.push(f.id.clone());
            index.push(i as u32);
            kind.push(match e {
                crate::Evidence::Metric { .. } => "metric",
                crate::Evidence::Event { .. } => "event",
                crate::Evidence::Instruction { .. } => "instruction",
                crate::Evidence::Note { .. } => "note",
            });
            text.push(e.to_string());
        }
    }
    frame(vec![
        Column::new("host".into(), host),
        Column::new("id".into(), id),
        Column::new("index".into(), index),
        Column::new("kind".into(), kind),
        Column::new("text".into(), text),
    ])
}

/// Skipped detectors as a frame: `id`, `reason`.
pub fn skipped_frame(report: &Report) -> Result<DataFrame, FrameError> {
    frame(vec![
        Column::new("id".into(), report.skipped.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()),
        Column::new("reason".into(), report.skipped.iter().map(|s| s.reason.as_str()).collect::<Vec<_>>()),
    ])
}

/// A host's health snapshot as a long frame: `metric`, `value` (null when not available), `text`
/// (the figures that are words: `time_base`, `bound_by`; null for the others).
pub fn metrics_frame(host: &HostProfile) -> Result<DataFrame, FrameError> {
    let m = host_metrics(host);
    let mut rows: Vec<(&str, Option<f64>, Option<String>)> =
        vec![("time_base", None, Some(m.time_base.clone())), ("bound_by", None, m.bound_by.clone())];
    let numbers: Vec<(&str, Option<f64>)> = vec![
        ("step_count", Some(m.step_count as f64)),
        ("step_time_ms_mean", m.step_time_ms_mean),
        ("step_time_ms_median", m.step_time_ms_median),
        ("step_time_ms_stddev", m.step_time_ms_stddev),
        ("step_time_ms_min", m.step_time_ms_min),
        ("step_time_ms_max", m.step_time_ms_max),
        ("device_busy_pct", m.device_busy_pct),
        ("idle_pct", m.idle_pct),
        ("input_bound_pct", m.input_bound_pct),
        ("exposed_communication_pct", m.exposed_communication_pct),
        ("flops_utilization_pct", m.flops_utilization_pct),
        ("hbm_utilization_pct", m.hbm_utilization_pct),
        ("roofline_efficiency_pct", m.roofline_efficiency_pct),
        ("operational_intensity_flop_per_byte", m.operational_intensity_flop_per_byte),
        ("device_duty_cycle_pct", m.device_duty_cycle_pct),
        ("memory_peak_bytes", m.memory_peak_bytes.map(|v| v as f64)),
        ("memory_capacity_bytes", m.memory_capacity_bytes.map(|v| v as f64)),
        ("memory_peak_pct", m.memory_peak_pct),
    ];
    rows.extend(numbers.into_iter().map(|(k, v)| (k, v, None)));
    frame(vec![
        Column::new("metric".into(), rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        Column::new("value".into(), rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        Column::new("text".into(), rows.iter().map(|r| r.2.clone()).collect::<Vec<_>>()),
    ])
}

/// Makes a host name safe as a directory component (`host=<name>`).
fn partition_value(host: &str) -> String {
    host.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

fn write(df: &mut DataFrame, dir: &Path, table: &str, host: &str) -> Result<PathBuf, FrameError> {
    let folder = dir.join(table).join(format!("host={}", partition_value(host)));
    std::fs::create_dir_all(&folder).map_err(err)?;
    let path = folder.join("part-0.parquet");
    let mut file = std::fs::File::create(&path).map_err(err)?;
    ParquetWriter::new(&mut file).finish(df).map_err(err)?;
    Ok(path)
}

/// Findings (and their evidence) of one host as frames, without the `host` column (the
/// partition path carries it).
fn host_findings_frames(findings: &[crate::Finding]) -> Result<(DataFrame, DataFrame), FrameError> {
    let report = Report {
        status: crate::Status::Optimal,
        summary: String::new(),
        profile: crate::ProfileInfo {
            run: None,
            hosts: Vec::new(),
            device: String::new(),
            device_type: None,
            cores: 0,
            steps: 0,
            hlo_programs: 0,
            main_program: None,
        },
        metrics: crate::Metrics::default(),
        findings: findings.to_vec(),
        skipped: Vec::new(),
        warnings: Vec::new(),
        charts: crate::Charts::default(),
    };
    let f = findings_frame(&report)?.drop("host").map_err(err)?;
    let e = evidence_frame(&report)?.drop("host").map_err(err)?;
    Ok((f, e))
}

/// Writes one host's tables under `dir` (`<table>/host=<host>/part-0.parquet`): its findings and
/// evidence, metrics, steps, anatomy, op profile and categories. Called while the host is still
/// open, so sessions can stream hosts.
pub fn write_host_parquet(
    host: &HostProfile,
    findings: &[crate::Finding],
    dir: &Path,
) -> Result<Vec<PathBuf>, FrameError> {
    let name = host.name();
    let mut written = Vec::new();
    let (mut f, mut e) = host_findings_frames(findings)?;
    written.push(write(&mut f, dir, "findings", name)?);
    written.push(write(&mut e, dir, "evidence", name)?);
    written.push(write(&mut metrics_frame(host)?, dir, "metrics", name)?);
    if let Ok(steps) = host.steps() {
        written.push(write(&mut xlens_roofline::frame::steps_frame(steps).map_err(err)?, dir, "steps", name)?);
        if let Ok(anatomy) = host.anatomy() {
            let mut df = xlens_roofline::frame::anatomy_frame(steps, anatomy).map_err(err)?;
            written.push(write(&mut df, dir, "anatomy", name)?);
        }
    }
    if let Ok(ops) = host.op_profile() {
        written.push(write(&mut xlens_roofline::frame::op_profile_frame(ops).map_err(err)?, dir, "op_profile", name)?);
        written.push(write(&mut xlens_roofline::frame::categories_frame(ops).map_err(err)?, dir, "categories", name)?);
    }
    Ok(written)
}

/// Writes the session-wide tables under `dir`: cross-host findings and the skipped detectors,
/// under the partition `host=_session`.
pub fn write_session_parquet(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let session: Vec<crate::Finding> = report.findings.iter().filter(|f| f.host.is_empty()).cloned().collect();
    let (mut f, mut e) = host_findings_frames(&session)?;
    Ok(vec![
        write(&mut f, dir, "findings", "_session")?,
        write(&mut e, dir, "evidence", "_session")?,
        write(&mut skipped_frame(report)?, dir, "skipped", "_session")?,
    ])
}

/// Writes every table of a scan of an in-memory profile under `dir`, partitioned by host.
pub fn write_parquet(profile: &Profile, report: &Report, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let mut written = Vec::new();
    for host in profile.hosts() {
        let findings: Vec<crate::Finding> = report.findings.iter().filter(|f| f.host == host.name()).cloned().collect();
        written.extend(write_host_parquet(host, &findings, dir)?);
    }
    written.extend(write_session_parquet(report, dir)?);
    Ok(written)
}
