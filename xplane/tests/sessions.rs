//! Opening files, session directories and logdirs.

mod common;

use std::path::Path;

use xlens_xplane::{Session, SpaceBuilder, discover};

fn write_host(dir: &Path, host: &str, plane: &str) {
    let mut b = SpaceBuilder::default();
    b.plane(1, plane);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(format!("{host}.xplane.pb")), b.finish()).unwrap();
}

#[test]
fn file_session_dir_and_logdir_resolve_to_hosts() {
    let root = std::env::temp_dir().join(format!("xlens-sessions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let profile = root.join("plugins/profile");
    write_host(&profile.join("2026_01_01_00_00_00"), "old", "/host:CPU");
    let newest = profile.join("2026_02_01_00_00_00");
    write_host(&newest, "host-b", "/device:TPU:1");
    write_host(&newest, "host-a", "/device:TPU:0");
    std::fs::write(newest.join("notes.txt"), "not a profile").unwrap();
    // An empty, even newer run is skipped.
    std::fs::create_dir_all(profile.join("2026_03_01_00_00_00")).unwrap();

    // The logdir picks the newest run with profiles; hosts sorted by name.
    let s = Session::open(&root).unwrap();
    assert_eq!(s.run(), Some("2026_02_01_00_00_00"));
    let hosts: Vec<(&str, &str)> = s.hosts().iter().map(|h| (h.name(), h.space().planes()[0].name())).collect();
    assert_eq!(hosts, [("host-a", "/device:TPU:0"), ("host-b", "/device:TPU:1")]);
    // So does plugins/profile, and the run directory itself.
    assert_eq!(discover(&profile).unwrap().run.as_deref(), Some("2026_02_01_00_00_00"));
    assert_eq!(discover(&newest).unwrap().hosts.len(), 2);
    // A single file is a one-host session named after the file.
    let one = Session::open(&newest.join("host-b.xplane.pb")).unwrap();
    assert_eq!((one.run(), one.hosts()[0].name()), (None, "host-b"));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn hosts_decode_in_parallel_with_the_same_result_as_one_by_one() {
    let dir = common::testdata().join("corpus/clean");
    let source = discover(&dir).unwrap();
    let parallel = Session::open_source(&source).unwrap();
    let serial = source.hosts[0].open().unwrap();
    assert_eq!(parallel.hosts()[0].space().to_raw().unwrap(), serial.to_raw().unwrap());
}
