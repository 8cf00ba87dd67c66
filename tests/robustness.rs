//! Robustness under partial failures, concurrent writers and crafted input: no data lost or
//! misreported. The writer tests run the `fault_scan` example as real processes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use xlens::faults::{HostProfile, Profile, ScanConfig, Scope, Status, scan};
use xlens::report::render;
use xlens::xplane::Space;
use xlens_testkit::synth::{self, Item, OpSpec, Program, SynthSpec};

/// The `fault_scan` example `cargo test` built beside the test binaries.
fn fault_scan() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let example = exe.parent().unwrap().parent().unwrap().join("examples").join("fault_scan");
    assert!(example.exists(), "{} is not built (cargo test --workspace builds the examples)", example.display());
    example
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xlens-robust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tpu_basic() -> Vec<u8> {
    std::fs::read(root().join("testdata/tpu/tpu_basic/host0.xplane.pb")).unwrap()
}

fn read_parquet(path: &Path) -> polars::prelude::DataFrame {
    use polars::prelude::{ParquetReader, SerReader};
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ParquetReader::new(file).finish().unwrap_or_else(|e| panic!("{} is not readable Parquet: {e}", path.display()))
}

/// Rows of one table across the dataset.
fn rows(dir: &Path, table: &str) -> usize {
    parquet_files(&dir.join(table)).iter().map(|p| read_parquet(p).height()).sum()
}

/// 16 single-host scans at once into one directory, several rounds (the README's many-machine
/// recipe): every Parquet file is whole and readable, and no run's rows are lost.
#[test]
fn concurrent_writers_add_rows_and_never_corrupt_the_dataset() {
    let dir = scratch("concurrent");
    let hosts = dir.join("hosts");
    std::fs::create_dir_all(&hosts).unwrap();
    let bytes = tpu_basic();
    for h in 0..16 {
        std::fs::write(hosts.join(format!("host{h:02}.xplane.pb")), &bytes).unwrap();
    }
    let out = dir.join("frames");
    const ROUNDS: usize = 3;
    for _ in 0..ROUNDS {
        let children: Vec<_> = (0..16)
            .map(|h| {
                Command::new(fault_scan())
                    .arg(hosts.join(format!("host{h:02}.xplane.pb")))
                    .args(["--format", "json", "--quiet", "--out"])
                    .arg(&out)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
    }
    // One scan of one host, for the rows each run adds.
    let one = dir.join("one");
    let status = Command::new(fault_scan())
        .arg(hosts.join("host00.xplane.pb"))
        .args(["--quiet", "--out"])
        .arg(&one)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    for table in ["findings", "evidence", "metrics", "steps", "op_profile", "skipped", "hosts"] {
        let per_run = rows(&one, table);
        assert!(per_run > 0, "{table}");
        assert_eq!(rows(&out, table), 16 * ROUNDS * per_run, "{table}: rows lost");
    }
    // No temporary file is left, and one-host scans write no session table.
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
            let name = e.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "{}", e.display());
            assert!(!name.starts_with("session_") && name != "host=_session", "{}", e.display());
            if e.is_dir() {
                stack.push(e);
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A logdir with two readable hosts, a 0-byte file (what profilers leave past 2 GB) and a
/// truncated one: the readable hosts are analysed, the others listed, the status INCOMPLETE,
/// exit 0 without `--fail-on` and 3 with it.
#[test]
fn unreadable_hosts_are_listed_and_the_rest_analysed() {
    let dir = scratch("partial");
    let run = dir.join("plugins/profile/run");
    std::fs::create_dir_all(&run).unwrap();
    let bytes = tpu_basic();
    std::fs::write(run.join("a.xplane.pb"), &bytes).unwrap();
    std::fs::write(run.join("b.xplane.pb"), &bytes).unwrap();
    std::fs::write(run.join("c.xplane.pb"), b"").unwrap();
    std::fs::write(run.join("d.xplane.pb"), &bytes[..bytes.len() / 3]).unwrap();
    let out = Command::new(fault_scan()).arg(&dir).args(["--json", "--quiet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "INCOMPLETE");
    let skipped: Vec<&str> =
        doc["skipped_hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(skipped, ["c", "d"]);
    assert!(doc["skipped_hosts"][0]["error"].as_str().unwrap().contains("0 bytes"), "{}", doc["skipped_hosts"]);
    assert!(doc["skipped_hosts"][1]["file"].as_str().unwrap().ends_with("d.xplane.pb"));
    assert_eq!(doc["profile"]["hosts"], serde_json::json!(["a", "b"]));
    assert!(doc["findings"].as_array().is_some_and(|f| !f.is_empty()), "the readable hosts' findings");
    assert!(doc["summary"].as_str().unwrap().contains("2 of 4 host file(s) could not be read"), "{}", doc["summary"]);
    let failing = Command::new(fault_scan()).arg(&dir).args(["--quiet", "--fail-on", "P0"]).output().unwrap();
    assert_eq!(failing.status.code(), Some(3));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every event of every line of a space, decoded: the first error, if any.
fn full_decode(space: &Space) -> Option<String> {
    for plane in space.planes() {
        for line in plane.lines() {
            for ev in line.events(plane) {
                if let Err(e) = ev {
                    return Some(e.to_string());
                }
            }
        }
    }
    None
}

/// Single-bit flips of a TPU profile: a scan is OPTIMAL only when every event decodes; a
/// profile whose decode hit an error is INCOMPLETE, and says what could not be read.
#[test]
fn a_profile_whose_decode_fails_is_never_optimal() {
    let bytes = tpu_basic();
    let mut rng = synth::Rng::new(15);
    let (mut incomplete, mut checked) = (0, 0);
    for _ in 0..200 {
        let mut flipped = bytes.clone();
        let at = (rng.next_u64() % flipped.len() as u64) as usize;
        flipped[at] ^= 1 << (rng.next_u64() % 8);
        let Ok(space) = Space::parse(flipped.into()) else { continue };
        let broken = full_decode(&space);
        let report = scan(&Profile::new(None, vec![HostProfile::new("h", space)]), &ScanConfig::default());
        checked += 1;
        if report.status == Status::Optimal {
            assert!(broken.is_none(), "OPTIMAL although the decode fails: {broken:?}");
        }
        if broken.is_some() && report.status != Status::Incomplete {
            // Decode errors the analyses never reach (a plane nobody reads) leave the verdict as is.
            assert!(report.errors.is_empty());
        }
        if report.status == Status::Incomplete {
            incomplete += 1;
            assert!(!report.errors.is_empty() && report.summary.starts_with("INCOMPLETE: "), "{}", report.summary);
        }
    }
    assert!(checked > 150 && incomplete > 10, "{checked} parsed, {incomplete} incomplete");
}

/// An error met while decoding events lazily, after the parse, names its file: in a session of
/// many hosts, the reader can tell which file is damaged.
#[test]
fn errors_found_after_the_parse_name_their_file() {
    let bytes = tpu_basic();
    let mut rng = synth::Rng::new(8);
    let damaged = loop {
        let mut flipped = bytes.clone();
        let at = (rng.next_u64() % flipped.len() as u64) as usize;
        flipped[at] ^= 1 << (rng.next_u64() % 8);
        let Ok(space) = Space::parse(flipped.clone().into()) else { continue };
        if full_decode(&space).is_some_and(|e| e.contains("event #")) {
            break flipped;
        }
    };
    let dir = scratch("lazy-errors");
    std::fs::write(dir.join("good.xplane.pb"), &bytes).unwrap();
    std::fs::write(dir.join("damaged.xplane.pb"), &damaged).unwrap();
    let source = xlens_testkit::discover(&dir);
    let space = source.hosts.iter().find(|h| h.host == "damaged").unwrap().open().unwrap();
    let error = full_decode(&space).unwrap();
    assert!(error.contains(&dir.join("damaged.xplane.pb").display().to_string()), "{error}");

    let out = Command::new(fault_scan()).arg(&dir).args(["--json", "--quiet"]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let errors = doc["errors"].as_array().unwrap();
    assert_eq!(doc["status"], "INCOMPLETE");
    assert!(!errors.is_empty());
    assert!(errors.iter().all(|e| e.as_str().unwrap().contains("damaged.xplane.pb")), "{errors:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Host names that only differ in characters a path cannot hold, a host named like the session
/// partition, and a file named just `.xplane.pb`: every host keeps its own partition and rows.
#[test]
fn every_host_gets_its_own_partition() {
    let dir = scratch("names");
    let bytes = tpu_basic();
    let names = ["a:b", "a;b", "_session", ""];
    for n in names {
        std::fs::write(dir.join(format!("{n}.xplane.pb")), &bytes).unwrap();
    }
    let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
    let report = scan(&profile, &ScanConfig::default());
    let mut hosts: Vec<&str> = report.profile.hosts.iter().map(String::as_str).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, [".xplane.pb", "_session", "a:b", "a;b"]);
    assert!(report.findings.iter().filter(|f| f.scope == Scope::Host).all(|f| !f.host.is_empty()));
    let out = dir.join("frames");
    xlens::report::frame::write_parquet(&profile, &report, &out).unwrap();
    let partitions: Vec<String> = std::fs::read_dir(out.join("metrics"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(partitions, ["host=%2Explane.pb", "host=_session", "host=a%3Ab", "host=a%3Bb"]);
    // Each partition's rows name their host exactly; no host lost its rows.
    let per_host = rows(&out.join("metrics").join("host=a%3Ab"), "");
    assert!(per_host > 0);
    assert_eq!(rows(&out, "metrics"), 4 * per_host);
    for file in parquet_files(&out.join("findings")) {
        let df = read_parquet(&file);
        let host = df.column("host_name").unwrap().str().unwrap().get(0).map(str::to_owned);
        if let Some(host) = host {
            let folder = file.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
            assert_eq!(folder, format!("host={}", xlens::report::frame::partition_value(&host)));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Host names whose percent-encoded partition folder would pass the file-name limit (255 bytes)
/// keep their frames: the folder gets a short unique name, `host_name` the exact one.
#[test]
fn hosts_with_long_encoded_names_keep_their_frames() {
    let dir = scratch("long_names");
    let bytes = tpu_basic();
    // 120 and 121 bytes of file name, 240 and 243 bytes percent-encoded; 80 two-byte characters,
    // 480 bytes encoded.
    let names = ["a:".repeat(60), format!("{}x", "a:".repeat(60)), "\u{e9}".repeat(80)];
    for n in &names {
        std::fs::write(dir.join(format!("{n}.xplane.pb")), &bytes).unwrap();
    }
    let profile = Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
    let report = scan(&profile, &ScanConfig::default());
    assert_eq!(report.profile.hosts.len(), 3);
    let out = dir.join("frames");
    xlens::report::frame::write_parquet(&profile, &report, &out).unwrap();
    let folders: std::collections::BTreeSet<String> = std::fs::read_dir(out.join("metrics"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f != "host=_session")
        .collect();
    assert_eq!(folders.len(), 3, "{folders:?}");
    for f in &folders {
        assert!(f.len() <= "host=".len() + xlens::report::frame::MAX_PARTITION_VALUE_BYTES, "{f}");
    }
    // Every host's rows are there, under its exact name, in the folder its name maps to.
    let mut seen = std::collections::BTreeSet::new();
    for file in parquet_files(&out.join("metrics")) {
        let df = read_parquet(&file);
        let host = df.column("host_name").unwrap().str().unwrap().get(0).unwrap().to_owned();
        let folder = file.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(folder, format!("host={}", xlens::report::frame::partition_value(&host)));
        seen.insert(host);
    }
    assert_eq!(seen, names.iter().cloned().collect());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Op names carrying ESC, CR and LF cannot retitle the terminal or forge a report line.
#[test]
fn control_characters_in_names_are_escaped_in_text() {
    let forged = "fusion.1\u{1b}]0;pwned\u{7}\r\n[P0] forged - everything is fine";
    let op = |name: &str, us: f64| OpSpec::new(name, "fusion", "loop fusion", 1_000_000, 1_000_000, (us * 1e6) as i64);
    let program = Program { items: vec![Item::Op(op(forged, 50.0)), Item::Op(op("convolution.2", 10.0))] };
    let spec = SynthSpec { cores: 1, steps: 3, program, ..SynthSpec::default() };
    let space = Space::parse(synth::tpu_profile(&spec).into()).unwrap();
    let report = scan(&Profile::new(None, vec![HostProfile::new("h\u{1b}[2J", space)]), &ScanConfig::default());
    let text = render::text(&report);
    assert!(text.contains("fusion.1\\u{1b}]0;pwned\\u{7}\\u{d}\\u{a}[P0] forged"), "{text}");
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    assert!(!text.lines().any(|l| l.starts_with("[P0] forged")), "{text}");
    // JSON keeps the names exact (escaped by JSON's own rules).
    let json: serde_json::Value = serde_json::from_str(&render::json(&report)).unwrap();
    assert!(json["metrics"]["slowest_ops"].as_array().unwrap().iter().any(|o| o["name"] == forged));
}

/// Peaks the profile reports that make utilisation impossible are warned about, not silently
/// turned into a 2e11 % figure, and the report built on them is INCOMPLETE, never OPTIMAL.
#[test]
fn impossible_figures_are_warned_about() {
    let base = synth::fixture("tpu_basic").unwrap();
    let space = Space::parse(synth::tpu_profile(&base).into()).unwrap();
    let sane = scan(&Profile::new(None, vec![HostProfile::new("h", space)]), &ScanConfig::default());
    assert_ne!(sane.status, Status::Incomplete, "{}", sane.summary);
    let tiny = SynthSpec { peak_teraflops_per_second: 1e-9, ..base.clone() };
    let space = Space::parse(synth::tpu_profile(&tiny).into()).unwrap();
    let report = scan(&Profile::new(None, vec![HostProfile::new("h", space)]), &ScanConfig::default());
    assert!(report.metrics.flops_utilization_pct.is_some_and(|u| u > 1e6));
    assert!(
        report.warnings.iter().any(|w| w.contains("FLOP utilisation of") && w.contains("impossible")),
        "{:?}",
        report.warnings
    );
    assert_eq!(report.status, Status::Incomplete, "{}", report.summary);
    assert!(report.summary.contains("impossible figure(s)") && report.summary.contains("h: FLOP utilisation of"));
    let negative = SynthSpec { peak_hbm_bw_gigabytes_per_second: -819.0, ..base };
    let space = Space::parse(synth::tpu_profile(&negative).into()).unwrap();
    let report = scan(&Profile::new(None, vec![HostProfile::new("h", space)]), &ScanConfig::default());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("impossible peaks, ignored: peak_hbm_bw_gigabytes_per_second = -819")),
        "{:?}",
        report.warnings
    );
    assert!(report.metrics.hbm_utilization_pct.is_none_or(|u| (0.0..=100.5).contains(&u)));
}

/// One output failing (an HTML path that cannot be written) does not cost the others: the
/// report is printed and the dataset gets its report tables; the command then fails.
#[test]
fn a_failing_output_does_not_cost_the_others() {
    let dir = scratch("outputs");
    std::fs::write(dir.join("h.xplane.pb"), tpu_basic()).unwrap();
    let frames = dir.join("frames");
    let out = Command::new(fault_scan())
        .arg(dir.join("h.xplane.pb"))
        .args(["--json", "--quiet", "--html", "/nonexistent-dir/page.html", "--out"])
        .arg(&frames)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: writing /nonexistent-dir/page.html") && err.lines().count() == 1, "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["findings"].is_array());
    for table in ["findings", "evidence", "hosts", "metrics"] {
        assert!(!parquet_files(&frames.join(table)).is_empty(), "{table}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A scan in which no detector ran vouches for nothing: a file of two bytes (`PK`), a profile of
/// one empty plane, one of only a profiler error string, or a config that enables no detector is
/// INCOMPLETE with that reason, never OPTIMAL, and trips any `--fail-on`.
#[test]
fn a_scan_that_ran_no_detector_is_never_optimal() {
    let mut empty_plane = xlens::xplane::SpaceBuilder::default();
    empty_plane.plane(1, "/host:CPU");
    let mut profiler_error = xlens::xplane::SpaceBuilder::default();
    profiler_error.error("tracer: session failed to start");
    let cases: [(&str, Vec<u8>); 3] =
        [("pk", b"PK".to_vec()), ("empty_plane", empty_plane.finish()), ("profiler_error", profiler_error.finish())];
    for (name, bytes) in cases {
        let space = Space::parse(bytes.into()).unwrap();
        let report = scan(&Profile::new(None, vec![HostProfile::new(name, space)]), &ScanConfig::default());
        assert_eq!(report.status, Status::Incomplete, "{name}: {}", report.summary);
        assert!(report.summary.contains("no detector ran"), "{name}: {}", report.summary);
        if name == "profiler_error" {
            assert!(report.warnings.iter().any(|w| w.contains("session failed to start")), "{:?}", report.warnings);
        }
    }
    let sample = root().join("testdata/corpus/host_callback");
    let out = Command::new(fault_scan())
        .arg(&sample)
        .args(["--quiet", "--only", "barrier_in_loop", "--disable", "barrier_in_loop", "--fail-on", "P2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.starts_with("INCOMPLETE") && text.contains("none is enabled"), "{text}");
}

/// `ops` and `kernels`, whose documents have no status, list each entry of a host that did not
/// decode (a stat read as absent) in their JSON's `errors`, with its host and location; intact
/// files' documents have no `errors`.
#[test]
fn documents_without_a_status_list_the_entries_that_did_not_decode() {
    use xlens::documents::{host_kernel_stats, host_op_profiles, kernels_document, op_profile_document};
    use xlens_testkit::splice::{insert, stats};
    let bytes = std::fs::read(root().join("testdata/h200/h200_train_bf16/vm.xplane.pb")).unwrap();
    let dir = scratch("undecoded");
    let file = dir.join("vm.xplane.pb");
    std::fs::write(&file, &bytes).unwrap();
    assert!(op_profile_document(&host_op_profiles(&dir).unwrap()).get("errors").is_none());
    assert!(kernels_document(&host_kernel_stats(&dir).unwrap(), None).get("errors").is_none());
    // The events' stats, a sample spread over the file, each malformed in turn until one is
    // listed (the first: a stat the command does not read is listed by the strict check).
    let events: Vec<_> = stats(&bytes).unwrap().into_iter().filter(|p| p[1].number == 3).collect();
    let documents: [(&str, &dyn Fn() -> serde_json::Value); 2] = [
        ("ops", &|| op_profile_document(&host_op_profiles(&dir).unwrap())),
        ("kernels", &|| kernels_document(&host_kernel_stats(&dir).unwrap(), None)),
    ];
    for (command, document) in documents {
        let found = events.iter().step_by((events.len() / 40).max(1)).find_map(|path| {
            std::fs::write(&file, insert(&bytes, path, path[3].body.end, &[0x0f])).unwrap();
            document().get("errors").cloned()
        });
        let errors = found.unwrap_or_else(|| panic!("{command}: no malformed stat was listed"));
        let first = errors[0].as_str().unwrap();
        let walked = first.starts_with("vm: a stat of an event could not be decoded: ");
        let checked = first.starts_with("vm: a field of XSpace.planes[") && first.contains("could not be decoded: ");
        assert!(walked || checked, "{command}: {first}");
        assert!(first.contains(&file.display().to_string()) && first.contains("byte offset"), "{command}: {first}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
