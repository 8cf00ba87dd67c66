//! A session scanned host by host elsewhere (each host's outcome shipped as a JSON record) and
//! combined gives exactly the report of a one-machine scan, on every multi-host fixture.

mod common;

use xlens::faults::{
    HostOutcome, HostProfile, ScanConfig, ScanObserver, StepRange, combine, scan_host, scan_session,
    scan_session_observed,
};
use xlens::report::render;

/// Every labelled profile with several hosts.
fn sessions() -> Vec<String> {
    let labels: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(common::root().join("testdata/labels.json")).unwrap()).unwrap();
    labels["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profile"].as_str().unwrap().to_owned())
        .filter(|rel| xlens_testkit::discover(common::root().join("testdata").join(rel)).hosts.len() > 1)
        .collect()
}

fn combined(source: &xlens::source::Run, config: &ScanConfig) -> xlens::faults::Report {
    let records: Vec<String> = source
        .hosts
        .iter()
        .map(|h| {
            let mut space = h.open().unwrap();
            if let Some(range) = config.steps {
                space = xlens::faults::select_steps(&space, range, None).unwrap();
            }
            serde_json::to_string(&scan_host(&HostProfile::new(h.host.clone(), space), config)).unwrap()
        })
        .collect();
    // In reverse: the order records arrive in does not matter.
    let outcomes: Vec<HostOutcome> = records.iter().rev().map(|r| serde_json::from_str(r).unwrap()).collect();
    combine(source.run.clone(), outcomes, Vec::new(), config)
}

/// A session of every TPU reference fixture as one host each (eight hosts, different programs,
/// stragglers, SparseCores, DCN): every cross-host detector has something to say.
fn fixture_session() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-combine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, name) in xlens_testkit::synth::FIXTURES.iter().enumerate() {
        let spec = xlens_testkit::synth::fixture(name).unwrap();
        std::fs::write(dir.join(format!("host{i}.xplane.pb")), xlens_testkit::synth::tpu_profile(&spec)).unwrap();
    }
    dir
}

#[test]
fn combining_host_records_equals_the_session_scan() {
    let synthetic = fixture_session();
    let mut dirs: Vec<std::path::PathBuf> =
        sessions().iter().map(|rel| common::root().join("testdata").join(rel)).collect();
    assert!(dirs.len() >= 2, "multi-host fixtures: {dirs:?}");
    dirs.push(synthetic.clone());
    for dir in &dirs {
        let rel = dir.display();
        let source = xlens_testkit::discover(dir);
        for config in
            [ScanConfig::default(), ScanConfig { steps: Some(StepRange { first: 1, last: 3 }), ..Default::default() }]
        {
            let whole = scan_session(source.run.clone(), &source.hosts, &config, &|_, _| {}).unwrap();
            let parts = combined(&source, &config);
            assert_eq!(render::json(&parts), render::json(&whole), "{rel}");
            assert_eq!(render::text(&parts), render::text(&whole), "{rel}");
            assert_eq!(render::html(&parts), render::html(&whole), "{rel}");
            assert_eq!(parts, whole, "{rel}: the charts too");
        }
    }
    std::fs::remove_dir_all(&synthetic).unwrap();
}

/// A record keeps each finding's variant (the report's JSON leaves it out): hosts' findings
/// merge by id and variant after the round trip as before it.
#[test]
fn records_round_trip_exactly() {
    for rel in sessions() {
        let source = xlens_testkit::discover(common::root().join("testdata").join(&rel));
        for h in &source.hosts {
            let outcome = scan_host(&HostProfile::new(h.host.clone(), h.open().unwrap()), &ScanConfig::default());
            let back: HostOutcome = serde_json::from_str(&serde_json::to_string(&outcome).unwrap()).unwrap();
            assert_eq!(back, outcome, "{rel}/{}", h.host);
        }
    }
}

/// An observer that keeps the hosts it is handed: each host comes once, after it is reported,
/// still whole (an embedder may go on querying it), and keeping them changes nothing in the
/// report.
#[test]
fn an_observer_may_keep_the_hosts_it_is_handed() {
    struct Keep {
        finished: std::sync::Mutex<Vec<String>>,
        kept: std::sync::Mutex<Vec<HostProfile>>,
    }
    impl ScanObserver for Keep {
        fn finished(&self, host: &HostProfile, _: &HostOutcome) {
            self.finished.lock().unwrap().push(host.name().to_owned());
        }
        fn release(&self, host: HostProfile) {
            assert!(self.finished.lock().unwrap().iter().any(|h| h == host.name()), "released before reported");
            self.kept.lock().unwrap().push(host);
        }
    }
    for rel in sessions() {
        let source = xlens_testkit::discover(common::root().join("testdata").join(&rel));
        let keep = Keep { finished: Default::default(), kept: Default::default() };
        let report = scan_session_observed(source.run.clone(), &source.hosts, &ScanConfig::default(), &keep).unwrap();
        assert_eq!(
            render::json(&report),
            render::json(&scan_session(source.run.clone(), &source.hosts, &ScanConfig::default(), &|_, _| {}).unwrap())
        );
        let mut kept: Vec<String> = keep.kept.lock().unwrap().iter().map(|h| h.name().to_owned()).collect();
        kept.sort();
        let mut hosts: Vec<String> = source.hosts.iter().map(|h| h.host.clone()).collect();
        hosts.sort();
        assert_eq!(kept, hosts, "{rel}: every host handed over once");
        for host in keep.kept.lock().unwrap().iter() {
            assert!(host.op_profile().is_ok() || !host.read_errors().is_empty(), "{rel}/{}", host.name());
        }
    }
}
