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
