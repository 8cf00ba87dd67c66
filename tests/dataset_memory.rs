//! Writing a session's dataset streams host by host: the heap a scan with `--out` holds does not
//! grow with the number of hosts (it once held about 9 MB more per host, the Parquet writer's
//! parallel buffers left behind on every scanning thread).
//!
//! A counting global allocator measures the peak heap; this binary holds this one test only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use xlens::faults::{ScanConfig, scan_session};
use xlens::report::frame::Dataset;
use xlens_testkit::synth;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator with the caller's arguments; the
// counters are atomics that do not allocate.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `hosts` hosts of about 1 MB each (different seeds) under `dir`.
fn session(dir: &Path, hosts: u32) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let base = synth::fixture("tpu_healthy").unwrap().with_target_size(1 << 20);
    for h in 0..hosts {
        let spec = synth::SynthSpec { seed: 100 + u64::from(h), ..base.clone() };
        std::fs::write(dir.join(format!("host{h:04}.xplane.pb")), synth::tpu_profile(&spec)).unwrap();
    }
}

/// Scans `dir` writing every host's frames into `out` as they are scanned; the peak heap.
fn peak_heap_of_scan(dir: &Path, out: &Path) -> usize {
    let source = xlens_testkit::discover(dir);
    let dataset = Dataset::new(out);
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let visit = |host: &xlens::faults::HostProfile, outcome: &xlens::faults::HostOutcome| {
        dataset.write_host(host, &outcome.summary.skipped).unwrap();
    };
    let report = scan_session(source.run.clone(), &source.hosts, &ScanConfig::default(), &visit).unwrap();
    dataset.write_report(&report).unwrap();
    drop(report);
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}

#[test]
fn dataset_memory_does_not_grow_with_hosts() {
    // As many scanning threads as a large machine has, whatever this one has.
    let _ = rayon::ThreadPoolBuilder::new().num_threads(8).build_global();
    let scratch = std::env::temp_dir().join(format!("xlens-dataset-memory-{}", std::process::id()));
    let (few, many) = (8, 40);
    session(&scratch.join("few"), few);
    session(&scratch.join("many"), many);
    let small = peak_heap_of_scan(&scratch.join("few"), &scratch.join("out-few"));
    let large = peak_heap_of_scan(&scratch.join("many"), &scratch.join("out-many"));
    println!("peak heap: {few} hosts {small} bytes, {many} hosts {large} bytes");
    // The scan keeps a small summary per host; the frames of a host are gone once written.
    assert!(
        large < small + small / 2 + (many - few) as usize * (256 << 10),
        "{few} hosts: {small} B, {many} hosts: {large} B"
    );
    std::fs::remove_dir_all(&scratch).unwrap();
}
