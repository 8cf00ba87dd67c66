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

/// One row of the findings table: a finding on one of its hosts (or on the session).
struct FindingRow<'a> {
    host: &'a str,
    finding: &'a crate::Finding,
    severity: crate::Severity,
    impact: crate::Impact,
}

/// A row per finding and host it was found on (with that host's severity and impact); one row
/// with host `_session` for a session-wide finding.
fn finding_rows(report: &Report) -> Vec<FindingRow<'_>> {
    let mut rows = Vec::new();
    for f in &report.findings {
        if f.scope == crate::Scope::Session || f.hosts.is_empty() {
            rows.push(FindingRow { host: &f.host, finding: f, severity: f.severity, impact: f.impact });
        } else {
            rows.extend(f.hosts.iter().map(|h| FindingRow {
                host: &h.host,
                finding: f,
                severity: h.severity,
                impact: h.impact,
            }));
        }
    }
    rows
}

fn findings_df(rows: &[&FindingRow<'_>], with_host: bool) -> Result<DataFrame, FrameError> {
    let mut columns = Vec::new();
    if with_host {
        columns.push(Column::new("host".into(), rows.iter().map(|r| r.host).collect::<Vec<_>>()));
    }
    let f = |g: fn(&crate::Finding) -> &str| rows.iter().map(|r| g(r.finding)).collect::<Vec<_>>();
    columns.extend([
        Column::new("id".into(), f(|x| x.id.as_str())),
        Column::new("severity".into(), rows.iter().map(|r| r.severity.as_str()).collect::<Vec<_>>()),
        Column::new("scope".into(), f(|x| if x.scope == crate::Scope::Session { "session" } else { "host" })),
        Column::new("title".into(), f(|x| x.title.as_str())),
        Column::new("what".into(), f(|x| x.what.as_str())),
        Column::new("ms_per_step".into(), rows.iter().map(|r| r.impact.ms_per_step).collect::<Vec<_>>()),
        Column::new("pct_of_step".into(), rows.iter().map(|r| r.impact.pct_of_step).collect::<Vec<_>>()),
        Column::new("fix".into(), f(|x| x.fix.as_str())),
        Column::new("evidence_count".into(), rows.iter().map(|r| r.finding.evidence.len() as u32).collect::<Vec<_>>()),
    ]);
    frame(columns)
}

/// Findings as a frame, a row per finding and host it was found on: `host` (`_session` for
/// session-wide findings), `id`, `severity` and the impact (`ms_per_step`, `pct_of_step`) on
/// that host, `scope`, `title`, `what`, `fix`, `evidence_count`.
pub fn findings_frame(report: &Report) -> Result<DataFrame, FrameError> {
    let rows = finding_rows(report);
    findings_df(&rows.iter().collect::<Vec<_>>(), true)
}

fn evidence_df(findings: &[&crate::Finding], with_host: bool) -> Result<DataFrame, FrameError> {
    let mut host = Vec::new();
    let mut id = Vec::new();
    let mut index = Vec::new();
    let mut kind = Vec::new();
    let mut text = Vec::new();
    for f in findings {
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
    let mut columns = Vec::new();
    if with_host {
        columns.push(Column::new("host".into(), host));
    }
    columns.extend([
        Column::new("id".into(), id),
        Column::new("index".into(), index),
        Column::new("kind".into(), kind),
        Column::new("text".into(), text),
    ]);
    frame(columns)
}

/// Evidence as a frame, one row per item: `host` (the host the evidence was measured on: the
/// worst of a finding's hosts, `_session` for session-wide findings), `id` (finding), `index`,
/// `kind`, `text`.
pub fn evidence_frame(report: &Report) -> Result<DataFrame, FrameError> {
    evidence_df(&report.findings.iter().collect::<Vec<_>>(), true)
}

/// The per-host step table as a frame: `host`, `time_base`, `step_count`, the step time's
/// `step_time_ms_mean`/`_median`/`_min`/`_max`, `compute_ms_mean`, `idle_pct`,
/// `flops_utilization_pct`, `slowest`.
pub fn hosts_frame(report: &Report) -> Result<DataFrame, FrameError> {
    hosts_df(&report.hosts, true)
}

fn hosts_df(h: &[crate::HostRow], with_host: bool) -> Result<DataFrame, FrameError> {
    let opt = |g: fn(&crate::HostRow) -> Option<f64>| h.iter().map(g).collect::<Vec<_>>();
    let mut columns = Vec::new();
    if with_host {
        columns.push(Column::new("host".into(), h.iter().map(|r| r.host.as_str()).collect::<Vec<_>>()));
    }
    columns.extend([
        Column::new("time_base".into(), h.iter().map(|r| r.time_base.as_str()).collect::<Vec<_>>()),
        Column::new("step_count".into(), h.iter().map(|r| r.step_count as u64).collect::<Vec<_>>()),
        Column::new("step_time_ms_mean".into(), opt(|r| r.step_time_ms_mean)),
        Column::new("step_time_ms_median".into(), opt(|r| r.step_time_ms_median)),
        Column::new("step_time_ms_min".into(), opt(|r| r.step_time_ms_min)),
        Column::new("step_time_ms_max".into(), opt(|r| r.step_time_ms_max)),
        Column::new("compute_ms_mean".into(), opt(|r| r.compute_ms_mean)),
        Column::new("idle_pct".into(), opt(|r| r.idle_pct)),
        Column::new("flops_utilization_pct".into(), opt(|r| r.flops_utilization_pct)),
        Column::new("slowest".into(), h.iter().map(|r| r.slowest).collect::<Vec<_>>()),
    ]);
    frame(columns)
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

/// Writes one host's tables under `dir` (`<table>/host=<host>/part-0.parquet`): its metrics,
/// steps, anatomy, op profile and categories. Called while the host is still open, so sessions
/// can stream hosts; the findings are the session's ([`write_session_parquet`]).
pub fn write_host_parquet(host: &HostProfile, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let name = host.name();
    let mut written = Vec::new();
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

/// Writes the report's tables under `dir`: findings partitioned by the host they were found on
/// (`host=_session` for session-wide ones), evidence by the host it was measured on, the
/// per-host step table (`hosts`, a row per host partition) and the skipped detectors (under
/// `host=_session`, or the host's own partition when the scan had one host, so that machines
/// scanning one host each into one dataset never write the same file).
pub fn write_session_parquet(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let mut written = Vec::new();
    let rows = finding_rows(report);
    let mut by_host: std::collections::BTreeMap<&str, Vec<&FindingRow<'_>>> = std::collections::BTreeMap::new();
    for r in &rows {
        by_host.entry(r.host).or_default().push(r);
    }
    // Every host gets a partition, empty when nothing was found there (the schema stays known);
    // `_session` only for a session of several hosts, so that machines each scanning one host
    // of a large session into one dataset never write the same file.
    for h in &report.hosts {
        by_host.entry(h.host.as_str()).or_default();
    }
    let session = match report.hosts.as_slice() {
        [one] => one.host.as_str(),
        _ => crate::SESSION_HOST,
    };
    if report.hosts.len() != 1 {
        by_host.entry(crate::SESSION_HOST).or_default();
    }
    for (host, rows) in &by_host {
        written.push(write(&mut findings_df(rows, false)?, dir, "findings", host)?);
    }
    let mut evidence: std::collections::BTreeMap<&str, Vec<&crate::Finding>> =
        by_host.keys().map(|&h| (h, Vec::new())).collect();
    for f in &report.findings {
        evidence.entry(f.host.as_str()).or_default().push(f);
    }
    for (host, findings) in &evidence {
        written.push(write(&mut evidence_df(findings, false)?, dir, "evidence", host)?);
    }
    written.push(write(&mut skipped_frame(report)?, dir, "skipped", session)?);
    for row in &report.hosts {
        written.push(write(&mut hosts_df(std::slice::from_ref(row), false)?, dir, "hosts", &row.host)?);
    }
    Ok(written)
}

/// Writes every table of a scan of an in-memory profile under `dir`, partitioned by host.
pub fn write_parquet(profile: &Profile, report: &Report, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let mut written = Vec::new();
    for host in profile.hosts() {
        written.extend(write_host_parquet(host, dir)?);
    }
    written.extend(write_session_parquet(report, dir)?);
    Ok(written)
}
