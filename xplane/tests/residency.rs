//! File pages handed back to the OS: the bytes stay right, and the process stops holding them.

use std::path::{Path, PathBuf};

use xlens_xplane::{Space, SpaceBuilder, open_space};

/// A space of one host thread with 600,000 events carrying a stat each (about 11 MB).
fn big_space() -> Vec<u8> {
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, "/host:CPU");
        let op = plane.event_metadata("op");
        let stat = plane.stat_metadata("run_id");
        let mut line = plane.line(7, "worker", 0);
        for i in 0..600_000i64 {
            line.event(op, i * 100, 50 + i % 7).stat(stat, i);
        }
    }
    b.finish()
}

/// Every event's start, duration and stat, summed: equal sums mean equal bytes were read.
fn checksum<'a>(events: impl Iterator<Item = xlens_xplane::Result<xlens_xplane::Event<'a>>>) -> (usize, i64) {
    let mut n = 0;
    let mut sum = 0i64;
    for ev in events {
        let ev = ev.unwrap();
        n += 1;
        let stat = ev.stats().next().unwrap().unwrap().as_i64().unwrap();
        sum = sum.wrapping_add(ev.start().0).wrapping_add(ev.duration().0 * 3).wrapping_add(stat * 7);
    }
    (n, sum)
}

/// A file of its own per test: tests run in parallel, and rewriting a mapped file faults.
fn temp_file(test: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("xlens-residency-{}-{test}.xplane.pb", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The resident size of this process's mapping of `path`, from `/proc/self/smaps`.
#[cfg(target_os = "linux")]
fn mapped_rss_bytes(path: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let name = path.to_str().unwrap();
    let mut in_map = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            in_map = line.ends_with(name);
        } else if in_map && let Some(kb) = line.strip_prefix("Rss:") {
            total += kb.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024;
        }
    }
    total
}

#[test]
fn released_pages_read_back_the_same_bytes() {
    let bytes = big_space();
    let path = temp_file("read_back", &bytes);
    let in_memory = Space::parse(bytes.clone().into()).unwrap();
    let mapped = open_space(&path).unwrap();
    let expected = checksum(in_memory.planes()[0].lines()[0].events(&in_memory.planes()[0]));
    assert_eq!(expected.0, 600_000);
    let plane = &mapped.planes()[0];
    let line = &plane.lines()[0];
    // Twice each way: the second walk maps the released pages back.
    for _ in 0..2 {
        assert_eq!(checksum(line.events_releasing(plane)), expected);
        assert_eq!(checksum(line.events(plane)), expected);
        mapped.release_pages();
    }
    // In memory there is nothing to release, and nothing changes.
    in_memory.release_pages();
    let plane = &in_memory.planes()[0];
    assert_eq!(checksum(plane.lines()[0].events_releasing(plane)), expected);
    drop(mapped);
    std::fs::remove_file(path).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn a_mapped_space_holds_only_the_pages_a_pass_is_reading() {
    let bytes = big_space();
    let len = bytes.len() as u64;
    assert!(len > 8 << 20, "{len}");
    let path = temp_file("holds", &bytes);
    let space = open_space(&path).unwrap();
    // Parsing read every page, then handed them back.
    assert!(mapped_rss_bytes(&path) < len / 8, "after open: {} of {len}", mapped_rss_bytes(&path));
    let plane = &space.planes()[0];
    let line = &plane.lines()[0];
    // A plain walk keeps what it read.
    let mut walk = line.events(plane);
    for _ in 0..500_000 {
        walk.next().unwrap().unwrap();
    }
    assert!(mapped_rss_bytes(&path) > len / 2, "plain walk: {} of {len}", mapped_rss_bytes(&path));
    space.release_pages();
    assert!(mapped_rss_bytes(&path) < len / 8, "released: {}", mapped_rss_bytes(&path));
    // A releasing walk holds at most a chunk (8 MiB) behind it, and nothing once done.
    let mut walk = line.events_releasing(plane);
    for _ in 0..500_000 {
        walk.next().unwrap().unwrap();
    }
    let during = mapped_rss_bytes(&path);
    assert!(during < (8 << 20) + (1 << 20), "during: {during} of {len}");
    assert_eq!(walk.by_ref().count(), 100_000);
    assert!(mapped_rss_bytes(&path) < len / 8, "after: {}", mapped_rss_bytes(&path));
    drop(space);
    std::fs::remove_file(path).unwrap();
}

/// The strict check reads every byte of the file: it hands each line's pages back once checked,
/// so the scan's other analyses are not left beside a wholly resident file.
#[cfg(target_os = "linux")]
#[test]
fn the_strict_check_hands_back_what_it_read() {
    let bytes = big_space();
    let len = bytes.len() as u64;
    let path = temp_file("check", &bytes);
    let space = open_space(&path).unwrap();
    space.check_structure();
    assert!(space.decode_errors().is_empty(), "{:?}", space.decode_errors());
    assert!(mapped_rss_bytes(&path) < len / 8, "after the check: {} of {len}", mapped_rss_bytes(&path));
    drop(space);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_file_that_changes_after_its_mapping_is_found_changed() {
    let bytes = big_space();
    let path = temp_file("changed", &bytes);
    let space = open_space(&path).unwrap();
    space.check_file_unchanged().expect("nothing changed yet");
    // Appended to (what a writer still writing does; no mapped page is lost, so no fault).
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, &[0; 10]).unwrap();
    drop(file);
    let err = space.check_file_unchanged().expect_err("the file grew");
    assert!(matches!(err.kind(), xlens_xplane::ErrorKind::FileChanged { .. }), "{err}");
    assert_eq!(err.location().file.as_deref(), Some(path.as_path()));
    assert!(err.to_string().contains("changed while it was being read"), "{err}");
    // Replaced under its name by a file of the same size: another inode.
    let other = path.with_extension("other");
    std::fs::write(&other, &bytes).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let space = open_space(&path).unwrap();
    space.check_file_unchanged().unwrap();
    std::fs::write(&other, &bytes).unwrap();
    std::fs::rename(&other, &path).unwrap();
    assert!(space.check_file_unchanged().is_err(), "a file replaced under its name is a change");
    // A space not read from a file has nothing to change.
    assert!(Space::parse(bytes.into()).unwrap().check_file_unchanged().is_ok());
    let _ = std::fs::remove_file(&path);
}
