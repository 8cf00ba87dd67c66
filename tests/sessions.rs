//! Multi-host sessions: hosts are scanned in parallel and streamed; the report is identical
//! whether hosts are processed in parallel or one by one, and whether they are held in memory or
//! streamed; cross-host detectors see every host.

use std::path::PathBuf;

use xlens::faults::{Profile, SESSION_HOST, ScanConfig, Scope, scan, scan_session};
use xlens::report::render;
use xlens_testkit::synth;

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
    let source = xlens_testkit::discover(&dir);
    assert_eq!(source.hosts.len(), 4);
    let config = ScanConfig::default();
    let streamed = scan_session(source.run.clone(), &source.hosts, &config, &|_, _| {}).unwrap();
    let serial_pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let serial = serial_pool.install(|| scan_session(source.run.clone(), &source.hosts, &config, &|_, _| {}).unwrap());
    let held = scan(&Profile::from_session(xlens_testkit::open_session(&dir).unwrap()), &config);
    assert_eq!(render::json(&streamed), render::json(&serial));
    assert_eq!(render::json(&streamed), render::json(&held));
    assert_eq!(render::text(&streamed), render::text(&serial));
    // The cross-host detector found the slow host from the per-host summaries.
    let straggler = streamed.findings.iter().find(|f| f.id == "straggler_core" && f.scope == Scope::Session);
    assert!(straggler.is_some_and(|f| f.what.contains("host0002")), "{:#?}", streamed.findings);
    let straggler = straggler.unwrap();
    assert_eq!(straggler.host, SESSION_HOST);
    assert_eq!(straggler.host_names().collect::<Vec<_>>(), ["host0002"]);
    assert_eq!(streamed.profile.hosts, ["host0000", "host0001", "host0002", "host0003"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_host_is_visited_once() {
    let dir = session_dir("visit");
    let source = xlens_testkit::discover(&dir);
    let seen = std::sync::Mutex::new(Vec::new());
    scan_session(source.run.clone(), &source.hosts, &ScanConfig::default(), &|host, _| {
        seen.lock().unwrap().push(host.name().to_owned())
    })
    .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, ["host0000", "host0001", "host0002", "host0003"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every Parquet file under `dir`, by table: `(partition, file)`, the partition being
/// `host=<host>`, or `-` for the session tables (files right under the table's folder).
fn partitions(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<(String, PathBuf)>> {
    let parquet = |folder: &std::path::Path| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
        files.sort();
        files
    };
    let mut out = std::collections::BTreeMap::new();
    for table in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        let mut parts: Vec<(String, PathBuf)> = Vec::new();
        for entry in std::fs::read_dir(&table).unwrap().map(|e| e.unwrap().path()) {
            if entry.is_dir() {
                let name = entry.file_name().unwrap().to_str().unwrap().to_owned();
                parts.extend(parquet(&entry).into_iter().map(|f| (name.clone(), f)));
            }
        }
        parts.extend(parquet(&table).into_iter().map(|f| ("-".to_owned(), f)));
        parts.sort();
        out.insert(table.file_name().unwrap().to_str().unwrap().to_owned(), parts);
    }
    out
}

fn read_parquet(path: &std::path::Path) -> polars::prelude::DataFrame {
    use polars::prelude::{ParquetReader, SerReader};
    ParquetReader::new(std::fs::File::open(path).unwrap()).finish().unwrap()
}

/// `fault_scan --out DIR`: per-host Parquet partitions (`<table>/host=<host>/part-<scan>.parquet`)
/// that read back as one table per kind (one schema across partitions, every finding once), the
/// session tables in folders of their own, and the same rows whether hosts are streamed through
/// `scan_session` or held in memory.
#[test]
fn parquet_partitions_form_one_table_per_kind() {
    use xlens::report::frame::{Dataset, write_parquet};
    let dir = session_dir("parquet");
    let streamed_dir = dir.join("frames-streamed");
    let held_dir = dir.join("frames-held");
    let source = xlens_testkit::discover(&dir);
    let config = ScanConfig::default();
    let dataset = Dataset::new(&streamed_dir);
    let streamed = scan_session(source.run.clone(), &source.hosts, &config, &|host, outcome| {
        dataset.write_host(host, &outcome.summary.skipped).unwrap();
    })
    .unwrap();
    dataset.write_report(&streamed).unwrap();
    let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
    let held = scan(&profile, &config);
    write_parquet(&profile, &held, &held_dir).unwrap();

    let tables = partitions(&streamed_dir);
    for table in [
        "findings",
        "evidence",
        "metrics",
        "steps",
        "anatomy",
        "op_profile",
        "categories",
        "skipped",
        "hosts",
        "session_findings",
        "session_evidence",
    ] {
        assert!(tables.contains_key(table), "{table}: {:?}", tables.keys());
    }
    let hosts: Vec<&str> = tables["metrics"].iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(hosts, ["host=host0000", "host=host0001", "host=host0002", "host=host0003"]);
    let findings: Vec<&str> = tables["findings"].iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(findings, ["host=host0000", "host=host0001", "host=host0002", "host=host0003"]);
    assert_eq!(tables["session_findings"].len(), 1);
    // Only whole files: no temporary left behind.
    for parts in tables.values() {
        assert!(parts.iter().all(|(_, f)| f.file_name().unwrap().to_str().unwrap().starts_with("part-")));
    }
    let strip = |df: polars::prelude::DataFrame| df.drop("scan").unwrap();
    for (table, parts) in &tables {
        let frames: Vec<polars::prelude::DataFrame> = parts.iter().map(|(_, p)| read_parquet(p)).collect();
        // One table: every partition has the same columns and types, so they stack.
        for frame in &frames {
            assert_eq!(frame.schema(), frames[0].schema(), "{table}");
        }
        if table == "findings" || table == "session_findings" {
            let rows: usize = frames.iter().map(|f| f.height()).sum();
            let session = table == "session_findings";
            // A row per finding and host it was found on; one for a session-wide finding.
            let expected: usize = streamed
                .findings
                .iter()
                .filter(|f| (f.scope == Scope::Session) == session)
                .map(|f| if session { 1 } else { f.hosts.len() })
                .sum();
            assert_eq!(rows, expected, "{table}");
            if session {
                assert!(rows > 0, "the session has a straggler finding");
            }
        }
        if table == "hosts" {
            let rows: Vec<usize> = frames.iter().map(|f| f.height()).collect();
            assert_eq!(rows, [1, 1, 1, 1], "a row per host");
        }
        if table == "metrics" || table == "steps" {
            assert!(frames.iter().all(|f| f.height() > 0), "{table}");
        }
        // Streamed and held scans write the same rows (each under its own scan id).
        let held_parts = &partitions(&held_dir)[table];
        assert_eq!(held_parts.len(), parts.len(), "{table}");
        for ((part, path), (held_part, held_path)) in parts.iter().zip(held_parts) {
            assert_eq!(part, held_part);
            assert!(strip(read_parquet(path)).equals_missing(&strip(read_parquet(held_path))), "{table}/{part}");
        }
    }
    assert_eq!(partitions(&held_dir).keys().collect::<Vec<_>>(), tables.keys().collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// XProf's overview of a two-host session: the step time is the slowest host's per step,
/// utilisation and duty cycle add both hosts up, and the per-host table matches XProf's
/// `per_host_step_time_ms`.
#[test]
fn two_host_sessions_equal_xprofs_overview() {
    let pct = |v: &serde_json::Value| -> f64 { v.as_str().unwrap().trim_end_matches('%').parse().unwrap() };
    let num = |v: &serde_json::Value| -> f64 { v.as_str().unwrap().parse().unwrap() };
    for name in ["tpu_straggler_host", "tpu_two_hosts_clean"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/tpu").join(name);
        let run = xlens_testkit::discover(&dir);
        let r = scan_session(run.run, &run.hosts, &ScanConfig::default(), &|_, _| {}).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("xprof/get_overview.json")).unwrap()).unwrap();
        let p = &doc["output"]["performance_summary"];
        let m = &r.metrics;
        // The CLI prints two decimals (one for the duty cycle).
        let close_to = |ours: Option<f64>, theirs: f64, what: &str, tolerance: f64| {
            let ours = ours.unwrap_or_else(|| panic!("{name}: no {what}"));
            assert!((ours - theirs).abs() <= tolerance, "{name}: {what} {ours} vs XProf {theirs}");
        };
        let close = |ours: Option<f64>, theirs: f64, what: &str| close_to(ours, theirs, what, 0.0051);
        close(m.step_time_ms_mean, num(&p["steptime_ms_average"]), "step time");
        close(m.flops_utilization_pct, pct(&p["compute_efficiency_percent"]), "FLOP utilisation");
        close(m.hbm_utilization_pct, pct(&p["hbm_bw_utilization_percent"]), "HBM utilisation");
        close_to(m.device_duty_cycle_pct, pct(&p["device_duty_cycle_percent"]), "duty cycle", 0.051);
        assert_eq!(m.bound_by.as_deref(), p["bound_by"].as_str(), "{name}");
        for row in &r.hosts {
            let theirs = &p["per_host_step_time_ms"][&row.host];
            close(row.step_time_ms_mean, num(&theirs["steptime_ms_average"]), "host step time");
            close(row.step_time_ms_min, num(&theirs["steptime_ms_minimum"]), "host min step time");
            close(row.step_time_ms_max, num(&theirs["steptime_ms_maximum"]), "host max step time");
        }
        assert_eq!(r.hosts.len(), 2);
    }
}

/// Machines that each scan one host of a large session into one dataset never write the same
/// file: a one-host scan has no `_session` partition.
#[test]
fn one_host_scans_write_only_their_own_partitions() {
    use xlens::report::frame::write_parquet;
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus/clean");
    let out = std::env::temp_dir().join(format!("xlens-one-host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let profile = Profile::from_session(xlens_testkit::open_session(&src).unwrap());
    let report = scan(&profile, &ScanConfig::default());
    write_parquet(&profile, &report, &out).unwrap();
    for (table, parts) in partitions(&out) {
        let names: Vec<&str> = parts.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["host=vm"], "{table}: no session table for a one-host scan");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// A fault present on several hosts is one finding listing them, each with its own figures,
/// and the report stays one entry per fault however many hosts share it.
#[test]
fn a_fault_on_several_hosts_is_one_finding_listing_them() {
    let dir = std::env::temp_dir().join(format!("xlens-session-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("plugins/profile/2026_12_03_00_00_00");
    std::fs::create_dir_all(&run).unwrap();
    for h in 0..3u32 {
        let spec = synth::SynthSpec { seed: 7 + u64::from(h), ..synth::fixture("tpu_basic").unwrap() };
        std::fs::write(run.join(format!("host{h}.xplane.pb")), synth::tpu_profile(&spec)).unwrap();
    }
    let run = xlens_testkit::discover(&dir);
    let r = scan_session(run.run, &run.hosts, &ScanConfig::default(), &|_, _| {}).unwrap();
    let f = r.findings.iter().find(|f| f.id == "exposed_collective").expect("exposed_collective");
    assert_eq!(r.findings.iter().filter(|f| f.id == "exposed_collective").count(), 1);
    assert_eq!(f.scope, Scope::Host);
    assert_eq!(f.host_names().collect::<Vec<_>>(), ["host0", "host1", "host2"]);
    assert!(f.what.starts_with(&format!("On 3 of 3 hosts (figures from {}, the worst): ", f.host)), "{}", f.what);
    // The worst host's figures lead; every host's own impact is kept.
    let worst = f.hosts.iter().map(|h| h.impact.ms_per_step).fold(0.0, f64::max);
    assert_eq!(f.impact.ms_per_step, worst);
    let note = f.evidence[0].to_string();
    assert!(note.starts_with(&format!("per host, worst first: {} ", f.host)), "{note}");
    assert!(f.hosts.iter().all(|h| note.contains(&h.host)), "{note}");
    // In the JSON too: one entry naming its hosts.
    let doc: serde_json::Value = serde_json::from_str(&render::json(&r)).unwrap();
    let entry = doc["findings"].as_array().unwrap().iter().find(|f| f["id"] == "exposed_collective").unwrap();
    assert_eq!(entry["hosts"].as_array().unwrap().len(), 3);
    assert!(render::text(&r).contains("(3 hosts: host0, host1, host2)"));
    std::fs::remove_dir_all(&dir).unwrap();
}
