//! What the invariant and consistency tests share: the profiles of `testdata/` and
//! `../shared/real`, and every output of one scan of a profile (the report, its Parquet tables
//! read back, the `ops`, `kernels` and `memory` documents) with the peaks of its device.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use xlens::documents::{Partial, kernels_document, op_profile_document};
use xlens::faults::Report;
use xlens::report::tables::kernel_stats::HostKernelStats;
use xlens::report::tables::op_profile::{HostOpProfile, analyze};
use xlens::roofline::{Chip, GpuCaps, KernelStats};
use xlens::xplane::Space;
use xlens::{ScanRequest, scan_path};
use xlens_testkit::invariants::Peaks;

pub(crate) use crate::common::{parquet_files, root};

/// A profile of the test data: its name (`h200/h200_bf16_graphs`, `shared/real/amd_conv3d_jax08`)
/// and its directory.
#[derive(Clone, Debug)]
pub(crate) struct TestProfile {
    /// `<group>/<name>` under `testdata/`, or `shared/real/<name>`.
    pub(crate) name: String,
    /// Its directory.
    pub(crate) dir: PathBuf,
}

/// The folders directly under `dir` that hold a `*.xplane.pb`, sorted.
fn capture_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            std::fs::read_dir(p)
                .map(|f| f.flatten().any(|f| f.file_name().to_string_lossy().ends_with(".xplane.pb")))
                .unwrap_or(false)
        })
        .collect();
    out.sort();
    out
}

/// Every `testdata/<group>/<name>` folder holding a capture.
pub(crate) fn testdata_profiles() -> Vec<TestProfile> {
    let mut out = Vec::new();
    let mut groups: Vec<PathBuf> = std::fs::read_dir(root().join("testdata"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    groups.sort();
    for group in groups {
        for dir in capture_dirs(&group) {
            let name = dir.strip_prefix(root().join("testdata")).unwrap().to_string_lossy().replace('\\', "/");
            out.push(TestProfile { name, dir });
        }
    }
    out
}

/// The shared data folder: `$XLENS_SHARED` when set, else `<repo>/../shared`; `None` when
/// neither exists (a worktree elsewhere, a CI machine without it).
pub(crate) fn shared_dir() -> Option<PathBuf> {
    let candidates = [std::env::var_os("XLENS_SHARED").map(PathBuf::from), Some(root().join("../shared"))];
    candidates.into_iter().flatten().find(|d| d.join("real").is_dir())
}

/// Every capture of `<shared>/real`; `None` (with a note on stdout) without the shared folder.
pub(crate) fn shared_real_profiles() -> Option<Vec<TestProfile>> {
    let Some(shared) = shared_dir() else {
        println!("note: no shared data (set XLENS_SHARED or put it at <repo>/../shared): shared/real not checked");
        return None;
    };
    let dirs = capture_dirs(&shared.join("real"));
    Some(
        dirs.into_iter()
            .map(|dir| {
                let name = format!("shared/real/{}", dir.file_name().unwrap().to_string_lossy());
                TestProfile { name, dir }
            })
            .collect(),
    )
}

/// A testdata profile by its `<group>/<name>`.
pub(crate) fn testdata(name: &str) -> TestProfile {
    TestProfile { name: name.to_owned(), dir: root().join("testdata").join(name) }
}

/// Every output of one scan of a profile.
#[derive(Debug)]
pub(crate) struct Outputs {
    /// The report.
    pub(crate) report: Report,
    /// The report as `scan --format json` writes it, read back.
    pub(crate) json: Value,
    /// The Parquet dataset of the scan, read back: `{table: [row, ...]}`, a row an object of
    /// column name to value (`host_name` and `scan` included).
    pub(crate) frames: Value,
    /// `ops --json`.
    pub(crate) ops: Value,
    /// `kernels --json`, every kernel.
    pub(crate) kernels: Value,
    /// `memory --json`, every program ([`xlens::memory::program_memory`], the command's call).
    pub(crate) memory: Value,
    /// The device's peaks (per core), when it has any.
    pub(crate) peaks: Option<Peaks>,
    /// Where the Parquet dataset was written.
    pub(crate) frames_dir: PathBuf,
}

/// A scratch folder for `name`, empty.
pub(crate) fn scratch(test: &str, name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("xlens-{test}-{}", std::process::id())).join(name.replace(['/', '\\'], "__"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Scans `profile` once through the library ([`scan_path`], its Parquet dataset written under
/// `scratch`), reads its `ops` and `kernels` documents from one decode of its hosts, and its
/// `memory` document as `xlens memory` reads it.
pub(crate) fn outputs(profile: &TestProfile, scratch: &Path) -> Outputs {
    let frames_dir = scratch.join("frames");
    let request = ScanRequest { frames_dir: Some(frames_dir.clone()), ..ScanRequest::new(&profile.dir) };
    let scanned = scan_path(&request).unwrap_or_else(|e| panic!("{}: {e}", profile.name));
    assert_eq!(scanned.output_errors, Vec::<String>::new(), "{}", profile.name);
    let report = scanned.report;
    let json: Value = serde_json::from_str(&xlens::report::render::json(&report)).unwrap();
    let session = xlens_testkit::open_session(&profile.dir).unwrap_or_else(|e| panic!("{}: {e}", profile.name));
    let hosts = session.hosts();
    let ops: Vec<HostOpProfile> = hosts
        .iter()
        .map(|h| analyze(h.name(), h.space()).unwrap_or_else(|e| panic!("{}: {e}", profile.name)))
        .collect();
    let ops = op_profile_document(&Partial { hosts: ops, skipped_hosts: Vec::new(), errors: Vec::new() });
    let kernels: Vec<HostKernelStats> = hosts
        .iter()
        .map(|h| HostKernelStats {
            host: h.name().to_owned(),
            stats: KernelStats::read(h.space()).unwrap_or_else(|e| panic!("{}: {e}", profile.name)),
        })
        .collect();
    let kernels = kernels_document(&Partial { hosts: kernels, skipped_hosts: Vec::new(), errors: Vec::new() }, None);
    let peaks = hosts.first().and_then(|h| peaks(h.space()));
    let memory = xlens::memory::program_memory(&profile.dir).unwrap_or_else(|e| panic!("{}: {e}", profile.name));
    let memory = xlens::memory::memory_document(&memory, None);
    Outputs { report, json, frames: frames_json(&frames_dir), ops, kernels, memory, peaks, frames_dir }
}

/// The physical peaks of a host's device, per core: the chip catalogue's dense bf16 rate and
/// HBM bandwidth (divided by the chip's TensorCores) when the catalogue knows the chip (by its
/// device type, or a GPU by its vendor, SM or CU count and memory size), else the peaks the
/// profile reports (its capability stats, or derived from them as XProf derives them); `None`
/// for a device without peaks (a CPU).
pub(crate) fn peaks(space: &Space) -> Option<Peaks> {
    let chip = Chip::from_space(space).ok()?;
    let spec = chip.spec().or_else(|| {
        let plane = space.analysis_devices().first().copied()?;
        let caps = GpuCaps::of(plane);
        xlens::roofline::chips::CATALOGUE.iter().find(|c| {
            Some(c.vendor) == caps.vendor
                && c.compute_units.is_some_and(|n| f64::from(n) == caps.cores)
                && (caps.memory_size / c.hbm_capacity.0 as f64 - 1.0).abs() < 0.05
        })
    });
    Some(match spec {
        Some(s) => {
            let cores = f64::from(s.cores_per_chip.max(1));
            Peaks { flops_per_s: s.peak_bf16.per_s() / cores, hbm_bytes_per_s: s.hbm_bandwidth.bytes_per_s() / cores }
        }
        None => Peaks { flops_per_s: chip.peaks().flops.per_s(), hbm_bytes_per_s: chip.peaks().hbm.bytes_per_s() },
    })
}

/// The Parquet dataset under `dir` as `{table: [row, ...]}` (every file of a table, in path
/// order).
pub(crate) fn frames_json(dir: &Path) -> Value {
    use polars::prelude::{ParquetReader, SerReader};
    let mut tables = Map::new();
    for path in parquet_files(dir) {
        let table =
            path.strip_prefix(dir).unwrap().components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let file = std::fs::File::open(&path).unwrap();
        let df = ParquetReader::new(file).finish().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rows = tables.entry(table).or_insert_with(|| Value::Array(Vec::new())).as_array_mut().unwrap();
        for i in 0..df.height() {
            let mut row = Map::new();
            for c in df.columns() {
                row.insert(c.name().to_string(), any_value(c.get(i).unwrap()));
            }
            rows.push(Value::Object(row));
        }
    }
    Value::Object(tables)
}

/// A polars cell as JSON.
fn any_value(v: polars::prelude::AnyValue<'_>) -> Value {
    use polars::prelude::AnyValue as A;
    match v {
        A::Null => Value::Null,
        A::Boolean(b) => json!(b),
        A::String(s) => json!(s),
        A::StringOwned(s) => json!(s.as_str()),
        A::UInt8(x) => json!(x),
        A::UInt16(x) => json!(x),
        A::UInt32(x) => json!(x),
        A::UInt64(x) => json!(x),
        A::Int8(x) => json!(x),
        A::Int16(x) => json!(x),
        A::Int32(x) => json!(x),
        A::Int64(x) => json!(x),
        A::Float32(x) => json!(x),
        A::Float64(x) => json!(x),
        other => json!(other.to_string()),
    }
}
