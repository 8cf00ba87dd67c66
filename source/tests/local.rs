//! Opening files, session directories and logdirs on disk.

use std::path::Path;

use xlens_source::{HostFile, Location, discover, discover_runs, open_session};
use xlens_xplane::{HostInput, Session, SpaceBuilder};

fn local(path: &Path) -> Location {
    Location::Local(path.to_path_buf())
}

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
    let s = open_session(&local(&root)).unwrap();
    assert_eq!(s.run(), Some("2026_02_01_00_00_00"));
    let hosts: Vec<(&str, &str)> = s.hosts().iter().map(|h| (h.name(), h.space().planes()[0].name())).collect();
    assert_eq!(hosts, [("host-a", "/device:TPU:0"), ("host-b", "/device:TPU:1")]);
    // So does plugins/profile, and the run directory itself.
    assert_eq!(discover(&local(&profile)).unwrap().run.as_deref(), Some("2026_02_01_00_00_00"));
    assert_eq!(discover(&local(&newest)).unwrap().hosts.len(), 2);
    // A single file is a one-host session named after the file.
    let one = open_session(&local(&newest.join("host-b.xplane.pb"))).unwrap();
    assert_eq!((one.run(), one.hosts()[0].name()), (None, "host-b"));
    // Every run with profiles, oldest first; the empty one is left out.
    let runs = discover_runs(&local(&root)).unwrap();
    let names: Vec<_> = runs.iter().map(|r| r.run.as_deref().unwrap()).collect();
    assert_eq!(names, ["2026_01_01_00_00_00", "2026_02_01_00_00_00"]);
    // Nothing to find: the error names the directory.
    let empty = root.join("plugins/profile/2026_03_01_00_00_00");
    let err = discover(&local(&empty)).unwrap_err();
    assert_eq!(err.to_string(), format!("no *.xplane.pb profile found (at {})", empty.display()));
    assert_eq!(err.location(), &local(&empty));
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn hosts_decode_in_parallel_with_the_same_result_as_one_by_one() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/corpus/clean");
    let run = discover(&local(&dir)).unwrap();
    let parallel = Session::open_hosts(run.run.clone(), &run.hosts).unwrap();
    let serial = run.hosts[0].open().unwrap();
    assert_eq!(parallel.hosts()[0].space().to_raw().unwrap(), serial.to_raw().unwrap());
}

#[test]
fn a_host_file_names_itself_and_opens_as_bytes_or_a_space() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/corpus/clean");
    let run = discover(&local(&dir)).unwrap();
    let host = &run.hosts[0];
    assert_eq!(HostFile::new(host.location.clone()), *host);
    assert_eq!(host.display(), host.location.to_string());
    assert_eq!(HostInput::path(host), host.location.local_path());
    let bytes = xlens_source::source_for(&host.location).open(&host.location).unwrap();
    assert_eq!(bytes.len() as u64, std::fs::metadata(host.location.local_path().unwrap()).unwrap().len());
    assert_eq!(xlens_xplane::Space::parse(bytes).unwrap().planes().len(), host.open().unwrap().planes().len());
}

/// `*.xplane.riegeli` host files (XProf's chunked format) are listed with the run's hosts and
/// refused with "not supported yet" when opened, never passed over in silence; a host with both
/// files is its `*.xplane.pb`.
#[test]
fn riegeli_host_files_are_listed_and_refused() {
    let root = std::env::temp_dir().join(format!("xlens-riegeli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let run = root.join("plugins/profile/2026_04_01_00_00_00");
    write_host(&run, "host-a", "/host:CPU");
    write_host(&run, "host-c", "/host:CPU");
    std::fs::write(run.join("host-b.xplane.riegeli"), b"riegeli records").unwrap();
    std::fs::write(run.join("host-c.xplane.riegeli"), b"riegeli records").unwrap();
    let found = discover(&local(&root)).unwrap();
    let hosts: Vec<(&str, String)> = found.hosts.iter().map(|h| (h.host.as_str(), h.display())).collect();
    let file = |name: &str| run.join(name).display().to_string();
    assert_eq!(
        hosts,
        [
            ("host-a", file("host-a.xplane.pb")),
            ("host-b", file("host-b.xplane.riegeli")),
            ("host-c", file("host-c.xplane.pb"))
        ]
    );
    let refused = found.hosts[1].open().unwrap_err();
    assert!(matches!(refused.kind(), xlens_xplane::ErrorKind::Unsupported(_)), "{refused}");
    let text = refused.to_string();
    assert!(text.contains("not supported yet") && text.contains("host-b.xplane.riegeli"), "{text}");
    found.hosts[0].open().unwrap();
    // A run of Riegeli files alone, or one file named directly: the same error.
    let alone = root.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    std::fs::write(alone.join("w0.xplane.riegeli"), b"riegeli records").unwrap();
    let err = open_session(&local(&alone)).unwrap_err().to_string();
    assert!(err.contains("not supported yet"), "{err}");
    let err = open_session(&local(&alone.join("w0.xplane.riegeli"))).unwrap_err().to_string();
    assert!(err.contains("not supported yet"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
