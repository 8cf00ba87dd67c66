//! Frames of a report (findings, evidence, skipped detectors, metrics) and Parquet output.
//!
//! [`Dataset`] writes every table of a scan as Hive-partitioned Parquet,
//! `DIR/<table>/host=<host>/part-<writer>.parquet`, so that DuckDB
//! (`read_parquet('DIR/findings/**/*.parquet', hive_partitioning=true)`), Spark, or polars' lazy
//! scanner read each table across hosts (and across machines that scanned different hosts of one
//! session, concurrently, into one directory) as one table with a `host` column (the partition
//! value, percent-encoded; `host_name` in the files is the exact name).

use std::path::{Path, PathBuf};

use polars::prelude::*;
use xlens_roofline::FrameworkInfo;

use xlens_faults::{
    Evidence, Finding, HostProfile, HostRow, Impact, Profile, Report, Scope, Severity, Skipped, host_metrics,
};

/// A frame that could not be built, or a dataset file that could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// polars refused a frame.
    #[error("building a frame failed: {0}")]
    Polars(#[from] polars::error::PolarsError),
    /// A roofline frame (steps, anatomy, op profile) could not be built.
    #[error(transparent)]
    Roofline(#[from] xlens_roofline::Error),
    /// A dataset folder or file could not be created, written or renamed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Writing one dataset file failed (the temporary file is removed).
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file that was to be written.
        path: PathBuf,
        /// Why.
        source: Box<FrameError>,
    },
}

fn frame(columns: Vec<Column>) -> Result<DataFrame, FrameError> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(FrameError::from)
}

/// One row of the findings table: a finding on one of its hosts (or on the session).
struct FindingRow<'a> {
    host: &'a str,
    finding: &'a Finding,
    severity: Severity,
    impact: Impact,
}

/// A row per finding and host it was found on (with that host's severity and impact); one row
/// with host `_session` for a session-wide finding.
fn finding_rows(report: &Report) -> Vec<FindingRow<'_>> {
    let mut rows = Vec::new();
    for f in &report.findings {
        if f.scope == Scope::Session || f.hosts.is_empty() {
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
    let f = |g: fn(&Finding) -> &str| rows.iter().map(|r| g(r.finding)).collect::<Vec<_>>();
    columns.extend([
        Column::new("id".into(), f(|x| x.id.as_str())),
        Column::new("severity".into(), rows.iter().map(|r| r.severity.as_str()).collect::<Vec<_>>()),
        Column::new("scope".into(), f(|x| if x.scope == Scope::Session { "session" } else { "host" })),
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

fn evidence_df(findings: &[&Finding], with_host: bool) -> Result<DataFrame, FrameError> {
    let mut host = Vec::new();
    let mut id = Vec::new();
    let mut index = Vec::new();
    let mut kind = Vec::new();
    let (mut key, mut name, mut value, mut unit) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut text = Vec::new();
    for f in findings {
        for (i, e) in f.evidence.iter().enumerate() {
            host.push(f.host.clone());
            id.push(f.id.clone());
            index.push(i as u32);
            kind.push(match e {
                Evidence::Metric { .. } => "metric",
                Evidence::Event { .. } => "event",
                Evidence::Instruction { .. } => "instruction",
                Evidence::Note { .. } => "note",
            });
            // A metric's figure stays a number with its unit, as in the JSON; its key is the
            // stable name to select it by (the label is prose).
            let (k, n, v, u) = match e {
                Evidence::Metric { key, name, value, unit } => {
                    // A metric read back from a JSON report has no key: null, not "".
                    let key = Some(key.as_ref()).filter(|k| !k.is_empty());
                    (key, Some(name.as_str()), Some(*value), Some(unit.as_str()))
                }
                _ => (None, None, None, None),
            };
            key.push(k);
            name.push(n);
            value.push(v);
            unit.push(u);
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
        Column::new("key".into(), key),
        Column::new("name".into(), name),
        Column::new("value".into(), value),
        Column::new("unit".into(), unit),
        Column::new("text".into(), text),
    ]);
    frame(columns)
}

/// Evidence as a frame, one row per item: `host` (the host the evidence was measured on: the
/// worst of a finding's hosts, `_session` for session-wide findings), `id` (finding), `index`,
/// `kind`, for metrics their stable `key` and their `name` (label), `value` and `unit` (null for
/// other evidence), and `text`.
pub fn evidence_frame(report: &Report) -> Result<DataFrame, FrameError> {
    evidence_df(&report.findings.iter().collect::<Vec<_>>(), true)
}

/// The per-host step table as a frame: `host`, `time_base`, `step_count`, the step time's
/// `step_time_ms_mean`/`_median`/`_min`/`_max`, `compute_ms_mean`, `idle_pct`,
/// `flops_utilization_pct`, `slowest`.
pub fn hosts_frame(report: &Report) -> Result<DataFrame, FrameError> {
    hosts_df(&report.hosts, true)
}

fn hosts_df(h: &[HostRow], with_host: bool) -> Result<DataFrame, FrameError> {
    let opt = |g: fn(&HostRow) -> Option<f64>| h.iter().map(g).collect::<Vec<_>>();
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
    skipped_df(&report.skipped)
}

fn skipped_df(skipped: &[Skipped]) -> Result<DataFrame, FrameError> {
    frame(vec![
        Column::new("id".into(), skipped.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()),
        Column::new("reason".into(), skipped.iter().map(|s| s.reason.as_str()).collect::<Vec<_>>()),
    ])
}

/// A host's health snapshot as a long frame: `metric`, `value` (null when not available), `text`
/// (the figures that are words: `time_base`, `bound_by`, and the profile's `framework`,
/// `framework_xla` and `framework_evidence`; null for the others).
pub fn metrics_frame(host: &HostProfile) -> Result<DataFrame, FrameError> {
    metrics_df(&host_metrics(host), host.framework())
}

/// A health block as the long `metrics` table: `metric`, `value` (numbers) and `text`
/// (`time_base`, `bound_by`, `framework`, `framework_xla`, `framework_evidence`).
fn metrics_df(m: &xlens_faults::Metrics, framework: &FrameworkInfo) -> Result<DataFrame, FrameError> {
    let mut rows: Vec<(&str, Option<f64>, Option<String>)> = vec![
        ("time_base", None, Some(m.time_base.clone())),
        ("bound_by", None, m.bound_by.clone()),
        ("framework", None, Some(framework.name.as_str().to_owned())),
        ("framework_xla", None, Some(framework.xla.to_string())),
        ("framework_evidence", None, Some(framework.evidence.clone())),
    ];
    let numbers = m.figures();
    rows.extend(numbers.into_iter().map(|(k, v)| (k, v, None)));
    frame(vec![
        Column::new("metric".into(), rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        Column::new("value".into(), rows.iter().map(|r| r.1).collect::<Vec<_>>()),
        Column::new("text".into(), rows.iter().map(|r| r.2.clone()).collect::<Vec<_>>()),
    ])
}

/// The longest partition value [`partition_value`] writes, in bytes: `host=` and the value must
/// fit a file name (255 bytes on Linux, macOS and Windows file systems), with room to spare for
/// file systems and tools that count differently.
pub const MAX_PARTITION_VALUE_BYTES: usize = 200;

/// A host name as a Hive partition value: bytes outside `[A-Za-z0-9_-]` (and a `.` that starts
/// the name, so no value is `.` or `..`) percent-encoded, `%XX`, as Hive escapes partition
/// values. The encoding is injective: `a:b` is `a%3Ab` and `a;b` is `a%3Bb`.
///
/// An encoded name longer than [`MAX_PARTITION_VALUE_BYTES`] would make a folder name the file
/// system refuses ("File name too long"), and that host's frames would be lost: such a name is
/// cut to its first bytes (whole `%XX` escapes only) and ends in `~` and 16 hex digits of a hash
/// of the whole name. `~` is escaped in every other value, so a short name never equals the
/// encoding of another host; the exact name is in each file's `host_name` column.
///
/// ```
/// use xlens_report::frame::{MAX_PARTITION_VALUE_BYTES, partition_value};
/// assert_eq!(partition_value("host0.example.com"), "host0.example.com");
/// assert_eq!(partition_value("a:b"), "a%3Ab");
/// assert_eq!(partition_value(".."), "%2E.");
/// assert_eq!(partition_value("50%"), "50%25");
/// let long = "h".repeat(300);
/// let short = partition_value(&long);
/// assert_eq!(short.len(), MAX_PARTITION_VALUE_BYTES);
/// assert!(short.starts_with("hhh") && short.as_bytes()[MAX_PARTITION_VALUE_BYTES - 17] == b'~');
/// assert_ne!(short, partition_value(&"h".repeat(301)));
/// ```
pub fn partition_value(host: &str) -> String {
    let mut out = String::with_capacity(host.len());
    for (i, b) in host.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() <= MAX_PARTITION_VALUE_BYTES {
        return out;
    }
    // `~` and 16 hex digits of the hash follow the kept prefix.
    let mut keep = MAX_PARTITION_VALUE_BYTES - 17;
    // Never cut inside an escape: a `%` in the last two kept bytes starts one.
    if let Some(p) = out.as_bytes()[keep.saturating_sub(2)..keep].iter().position(|&b| b == b'%') {
        keep = keep - 2 + p;
    }
    out.truncate(keep);
    format!("{out}~{:016x}", fnv1a_64(host.as_bytes()))
}

/// FNV-1a, 64 bits: a hash fixed by its definition (the same on every platform, release and
/// run), so that a host's shortened partition name is stable.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A Parquet dataset under one directory, written by one scan: every file is
/// `<table>/host=<host>/part-<writer>.parquet` (host tables) or `<table>/part-<writer>.parquet`
/// (the session tables, `session_metrics`, `session_findings` and `session_evidence`, written only by a scan of
/// several hosts), where `<writer>` is unique to this scan. Files are written to a hidden
/// temporary name in the same folder and renamed, so readers never see a partial file, and
/// concurrent or repeated scans into one directory add files without overwriting each other's
/// (scanning a host twice adds its rows twice: every row carries `scan`, the writer, to tell
/// runs apart). Every host file also carries `host_name`, the host's exact name.
#[derive(Debug)]
pub struct Dataset {
    dir: PathBuf,
    writer: String,
    count: std::sync::atomic::AtomicU64,
}

impl Dataset {
    /// A dataset under `dir`, with a writer id unique to this process and call (process id,
    /// clock and random bits).
    pub fn new(dir: &Path) -> Dataset {
        use std::hash::{BuildHasher, Hasher};
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let writer = format!("{:x}-{:x}-{:016x}", std::process::id(), nanos, random);
        Dataset { dir: dir.to_path_buf(), writer, count: std::sync::atomic::AtomicU64::new(0) }
    }

    /// The writer id in this scan's file names and `scan` column.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    fn write(&self, df: &mut DataFrame, table: &str, host: Option<&str>) -> Result<PathBuf, FrameError> {
        let mut folder = self.dir.join(table);
        if let Some(host) = host {
            folder = folder.join(format!("host={}", partition_value(host)));
            let n = df.height();
            df.with_column(Column::new("host_name".into(), vec![host; n]))?;
        }
        let n = df.height();
        df.with_column(Column::new("scan".into(), vec![self.writer.as_str(); n]))?;
        self.create_inside(&folder)?;
        let k = self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name =
            if k == 0 { format!("part-{}.parquet", self.writer) } else { format!("part-{}-{k}.parquet", self.writer) };
        let path = folder.join(&name);
        let temporary = folder.join(format!(".{name}.tmp"));
        let written = (|| {
            // A new file only: a link (or anything) planted under the temporary name is not
            // followed nor overwritten.
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
            // Serial: hosts are written from the scan's threads already, and polars' parallel
            // writer, called from each of them, left buffers behind that grew with the hosts.
            ParquetWriter::new(&mut file).set_parallel(false).finish(df)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &path).map_err(FrameError::from)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(FrameError::Write { path, source: Box::new(e) });
        }
        Ok(path)
    }

    /// Creates `folder` (below the dataset's directory) folder by folder, failing on one that is
    /// a symbolic link: the dataset writes inside the directory it was given, never where a link
    /// planted in it points, and creates nothing there either.
    fn create_inside(&self, folder: &Path) -> Result<(), FrameError> {
        std::fs::create_dir_all(&self.dir)?;
        let below = folder.strip_prefix(&self.dir).unwrap_or(folder);
        let mut at = self.dir.clone();
        for part in below.components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("{} is a symbolic link; the dataset does not write through links", at.display()),
                    );
                    return Err(FrameError::Io(e));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                    Ok(()) => {}
                    // Another writer of the same dataset made it in between.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes a diff's tables: `diff_steps` (side, repeat, step, ms: every run of each side), `diff_metrics`, `diff_categories`,
    /// `diff_ops` and `diff_findings` (change: resolved, new or persisting), one file each.
    pub fn write_diff(&self, diff: &crate::diff::Diff) -> Result<Vec<PathBuf>, FrameError> {
        let mut written = Vec::new();
        for (table, mut df) in diff_frames(diff)? {
            written.push(self.write(&mut df, table, None)?);
        }
        Ok(written)
    }

    /// Writes one host's tables: its metrics, steps, anatomy, op profile, categories, its
    /// framework ops when it has no HLO (`framework_ops`, TensorFlow without XLA), its `tf.data`
    /// pipelines when it has `tf.data` iterator events (`tf_data`) and the
    /// detectors that could not run on it. Called while the host is still open, so sessions
    /// can stream hosts; the findings come with the report ([`Dataset::write_report`]).
    pub fn write_host(&self, host: &HostProfile, skipped: &[Skipped]) -> Result<Vec<PathBuf>, FrameError> {
        let name = Some(host.name());
        let mut written = Vec::new();
        written.push(self.write(&mut metrics_frame(host)?, "metrics", name)?);
        if let Ok(steps) = host.steps() {
            written.push(self.write(&mut xlens_roofline::frame::steps_frame(steps)?, "steps", name)?);
            if let Ok(anatomy) = host.anatomy() {
                let mut df = xlens_roofline::frame::anatomy_frame(steps, anatomy)?;
                written.push(self.write(&mut df, "anatomy", name)?);
            }
        }
        if let Ok(ops) = host.op_profile() {
            written.push(self.write(&mut xlens_roofline::frame::op_profile_frame(ops)?, "op_profile", name)?);
            written.push(self.write(&mut xlens_roofline::frame::categories_frame(ops)?, "categories", name)?);
        }
        if let Some(Ok(fw)) = host.framework_ops() {
            let mut df = xlens_roofline::frame::framework_ops_frame(fw)?;
            written.push(self.write(&mut df, "framework_ops", name)?);
        }
        if let Ok(Some(tf_data)) = host.tf_data() {
            written.push(self.write(&mut xlens_roofline::frame::tf_data_frame(tf_data)?, "tf_data", name)?);
        }
        written.push(self.write(&mut skipped_df(skipped)?, "skipped", name)?);
        Ok(written)
    }

    /// Writes the report's tables: per host, the findings found on it (a row per finding, with
    /// the host's own severity and impact), the evidence measured on it and its row of the step
    /// table (`hosts`); for a scan of several hosts, `session_metrics` (the report's health block),
    /// `session_findings` and `session_evidence`
    /// (the findings that compare hosts), in folders no host partition can take.
    pub fn write_report(&self, report: &Report) -> Result<Vec<PathBuf>, FrameError> {
        let mut written = Vec::new();
        let rows = finding_rows(report);
        let mut by_host: std::collections::BTreeMap<&str, Vec<&FindingRow<'_>>> =
            report.hosts.iter().map(|h| (h.host.as_str(), Vec::new())).collect();
        let mut session_rows = Vec::new();
        for r in &rows {
            if r.finding.scope == Scope::Session {
                session_rows.push(r);
            } else {
                by_host.entry(r.host).or_default().push(r);
            }
        }
        for (host, rows) in &by_host {
            written.push(self.write(&mut findings_df(rows, false)?, "findings", Some(host))?);
        }
        let mut evidence: std::collections::BTreeMap<&str, Vec<&Finding>> =
            by_host.keys().map(|&h| (h, Vec::new())).collect();
        let mut session_evidence = Vec::new();
        for f in &report.findings {
            if f.scope == Scope::Session {
                session_evidence.push(f);
            } else {
                evidence.entry(f.host.as_str()).or_default().push(f);
            }
        }
        for (host, findings) in &evidence {
            written.push(self.write(&mut evidence_df(findings, false)?, "evidence", Some(host))?);
        }
        for row in &report.hosts {
            written.push(self.write(&mut hosts_df(std::slice::from_ref(row), false)?, "hosts", Some(&row.host))?);
        }
        if report.hosts.len() > 1 {
            // The session's own figures (its step time is the slowest host's per step), which
            // no host's `metrics` table holds.
            written.push(self.write(&mut metrics_df(&report.metrics, &report.framework)?, "session_metrics", None)?);
            written.push(self.write(&mut findings_df(&session_rows, true)?, "session_findings", None)?);
            written.push(self.write(&mut evidence_df(&session_evidence, true)?, "session_evidence", None)?);
        }
        Ok(written)
    }
}

/// Writes every table of a scan of an in-memory profile under `dir` (see [`Dataset`]).
pub fn write_parquet(profile: &Profile, report: &Report, dir: &Path) -> Result<Vec<PathBuf>, FrameError> {
    let dataset = Dataset::new(dir);
    let mut written = Vec::new();
    for host in profile.hosts() {
        let row = report.hosts.iter().find(|h| h.host == host.name());
        written.extend(dataset.write_host(host, row.map_or(&[][..], |r| r.skipped.as_slice()))?);
    }
    written.extend(dataset.write_report(report)?);
    Ok(written)
}

/// The tables of a diff, by name (see [`Dataset::write_diff`]).
pub fn diff_frames(d: &crate::diff::Diff) -> Result<Vec<(&'static str, DataFrame)>, FrameError> {
    let series = &d.step_series_ms;
    let rows = series.rows();
    let steps = frame(vec![
        Column::new("run".into(), rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        Column::new("repeat_index".into(), rows.iter().map(|r| r.1 as u32).collect::<Vec<_>>()),
        Column::new("step_index".into(), rows.iter().map(|r| r.2 as u32).collect::<Vec<_>>()),
        Column::new("step_time_ms".into(), rows.iter().map(|r| r.3).collect::<Vec<_>>()),
    ])?;
    let metrics = frame(vec![
        Column::new("metric".into(), d.metrics.keys().map(String::as_str).collect::<Vec<_>>()),
        Column::new("base".into(), d.metrics.values().map(|m| m.base).collect::<Vec<_>>()),
        Column::new("new".into(), d.metrics.values().map(|m| m.new).collect::<Vec<_>>()),
        Column::new("delta".into(), d.metrics.values().map(|m| m.delta).collect::<Vec<_>>()),
    ])?;
    let c = &d.categories;
    let categories = frame(vec![
        Column::new("category".into(), c.iter().map(|x| x.category.as_str()).collect::<Vec<_>>()),
        Column::new("base_ms_per_step".into(), c.iter().map(|x| x.base_ms_per_step).collect::<Vec<_>>()),
        Column::new("new_ms_per_step".into(), c.iter().map(|x| x.new_ms_per_step).collect::<Vec<_>>()),
        Column::new("delta_ms_per_step".into(), c.iter().map(|x| x.delta_ms_per_step).collect::<Vec<_>>()),
    ])?;
    let o = &d.ops;
    let ops = frame(vec![
        Column::new("program".into(), o.iter().map(|x| x.program.as_str()).collect::<Vec<_>>()),
        Column::new("name".into(), o.iter().map(|x| x.name.as_str()).collect::<Vec<_>>()),
        Column::new("status".into(), o.iter().map(|x| x.status.as_str()).collect::<Vec<_>>()),
        Column::new("category".into(), o.iter().map(|x| x.category.as_str()).collect::<Vec<_>>()),
        Column::new("base_ms_per_step".into(), o.iter().map(|x| x.base_ms_per_step).collect::<Vec<_>>()),
        Column::new("new_ms_per_step".into(), o.iter().map(|x| x.new_ms_per_step).collect::<Vec<_>>()),
        Column::new("delta_ms_per_step".into(), o.iter().map(|x| x.delta_ms_per_step).collect::<Vec<_>>()),
    ])?;
    let f = &d.findings;
    let rows: Vec<(&str, &Finding)> = [("resolved", &f.resolved), ("new", &f.new), ("persisting", &f.persisting)]
        .into_iter()
        .flat_map(|(change, list)| list.iter().map(move |x| (change, x)))
        .collect();
    let findings = frame(vec![
        Column::new("change".into(), rows.iter().map(|r| r.0).collect::<Vec<_>>()),
        Column::new("id".into(), rows.iter().map(|r| r.1.id.as_str()).collect::<Vec<_>>()),
        Column::new("severity".into(), rows.iter().map(|r| r.1.severity.as_str()).collect::<Vec<_>>()),
        Column::new("title".into(), rows.iter().map(|r| r.1.title.as_str()).collect::<Vec<_>>()),
        Column::new("ms_per_step".into(), rows.iter().map(|r| r.1.impact.ms_per_step).collect::<Vec<_>>()),
        Column::new("pct_of_step".into(), rows.iter().map(|r| r.1.impact.pct_of_step).collect::<Vec<_>>()),
    ])?;
    Ok(vec![
        ("diff_steps", steps),
        ("diff_metrics", metrics),
        ("diff_categories", categories),
        ("diff_ops", ops),
        ("diff_findings", findings),
    ])
}
