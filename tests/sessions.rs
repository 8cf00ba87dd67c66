//! Multi-host sessions: hosts are scanned in parallel and streamed; the report is identical
//! whether hosts are processed in parallel or one by one, and whether they are held in memory or
//! streamed; cross-host detectors see every host.

use std::path::PathBuf;

use xlens::faults::{Profile, ScanConfig, render, scan, scan_session};
use xlens::xplane::{Session, discover, synth};

/// Writes a 4-host TPU session in which host `host0002` runs 40 % slower (a host straggler).
fn session_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-session-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("plugins/profile/2026_12_02_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    for h in 0..4u32 {
        let base = synth::fixture("tpu_healthy").unwrap();
        let spec = synth::SynthSpec {
            seed: 100 + u64::from(h),
            straggler: if h == 2 { Some((0, 1.4)) } else { None },
            ..base
        };
        std::fs::write(run.join(format!("host{h:04}.xplane.pb")), synth::tpu_profile(&spec)).unwrap();
    }
    dir
}

#[test]
fn parallel_streamed_and_serial_scans_agree() {
    let dir = session_dir("agree");
    let source = discover(&dir).unwrap();
    assert_eq!(source.hosts.len(), 4);
    let config = ScanConfig::default();
    let streamed = scan_session(&source, &config, &|_, _| {}).unwrap();
    let serial_pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let serial = serial_pool.install(|| scan_session(&source, &config, &|_, _| {}).unwrap());
    let held = scan(&Profile::from_session(Session::open(&dir).unwrap()), &config);
    assert_eq!(render::json(&streamed), render::json(&serial));
    assert_eq!(render::json(&streamed), render::json(&held));
    assert_eq!(render::text(&streamed), render::text(&serial));
    // The cross-host detector found the slow host from the per-host summaries.
    let straggler = streamed.findings.iter().find(|f| f.id == "straggler_core" && f.host.is_empty());
    assert!(straggler.is_some_and(|f| f.what.contains("host0002")), "{:#?}", streamed.findings);
    assert_eq!(streamed.profile.hosts, ["host0000", "host0001", "host0002", "host0003"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_host_is_visited_once() {
    let dir = session_dir("visit");
    let source = discover(&dir).unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    scan_session(&source, &ScanConfig::default(), &|host, _| seen.lock().unwrap().push(host.name().to_owned()))
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, ["host0000", "host0001", "host0002", "host0003"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every `<table>/host=<host>/part-0.parquet` under `dir`, by table, partitions in name order.
fn partitions(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<(String, PathBuf)>> {
    let mut out = std::collections::BTreeMap::new();
    for table in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        let mut parts: Vec<(String, PathBuf)> = std::fs::read_dir(&table)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_str().unwrap().to_owned(), p.join("part-0.parquet")))
            .collect();
        parts.sort();
        out.insert(table.file_name().unwrap().to_str().unwrap().to_owned(), parts);
    }
    out
}

fn read_parquet(path: &std::path::Path) -> polars::prelude::DataFrame {
    use polars::prelude::{ParquetReader, SerReader};
    ParquetReader::new(std::fs::File::open(path).unwrap()).finish().unwrap()
}

/// `fault_scan --out DIR`: per-host Parquet partitions (`<table>/host=<host>/part-0.parquet`)
/// that read back as one table per kind (one schema across partitions, every finding once), and
/// the same files whether hosts are streamed through `scan_session` or held in memory.
#[test]
fn parquet_partitions_form_one_table_per_kind() {
    use xlens::faults::frame::{write_host_parquet, write_parquet, write_session_parquet};
    let dir = session_dir("parquet");
    let streamed_dir = dir.join("frames-streamed");
    let held_dir = dir.join("frames-held");
    let source = discover(&dir).unwrap();
    let config = ScanConfig::default();
    let streamed = scan_session(&source, &config, &|host, outcome| {
        write_host_parquet(host, &outcome.findings, &streamed_dir).unwrap();
    })
    .unwrap();
    write_session_parquet(&streamed, &streamed_dir).unwrap();
    let profile = Profile::from_session(Session::open(&dir).unwrap());
    let held = scan(&profile, &config);
    write_parquet(&profile, &held, &held_dir).unwrap();

    let tables = partitions(&streamed_dir);
    for table in ["findings", "evidence", "metrics", "steps", "anatomy", "op_profile", "categories", "skipped"] {
        assert!(tables.contains_key(table), "{table}: {:?}", tables.keys());
    }
    let hosts: Vec<&str> = tables["metrics"].iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(hosts, ["host=host0000", "host=host0001", "host=host0002", "host=host0003"]);
    let findings: Vec<&str> = tables["findings"].iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(findings, ["host=_session", "host=host0000", "host=host0001", "host=host0002", "host=host0003"]);
    for (table, parts) in &tables {
        let frames: Vec<polars::prelude::DataFrame> = parts.iter().map(|(_, p)| read_parquet(p)).collect();
        // One table: every partition has the same columns and types, so they stack.
        for frame in &frames {
            assert_eq!(frame.schema(), frames[0].schema(), "{table}");
        }
        if table == "findings" {
            let rows: usize = frames.iter().map(|f| f.height()).sum();
            assert_eq!(rows, streamed.findings.len());
            assert!(rows > 0, "the session has a straggler finding");
        }
        if table == "metrics" || table == "steps" {
            assert!(frames.iter().all(|f| f.height() > 0), "{table}");
        }
        // Streamed and held scans write the same frames.
        for (part, path) in parts {
            let held_frame = read_parquet(&held_dir.join(table).join(part).join("part-0.parquet"));
            assert!(read_parquet(path).equals_missing(&held_frame), "{table}/{part}");
        }
    }
    assert_eq!(partitions(&held_dir).keys().collect::<Vec<_>>(), tables.keys().collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}
