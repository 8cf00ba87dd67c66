//! Memory follows the data, not the counts of empty containers: crafted inputs of a few MB cost at
//! most twice their size in heap, or stop with a typed error before allocating.
//!
//! A counting global allocator measures the peak heap of each step; the tests of this file take
//! turns (one lock), so that their allocations do not mix.

mod common;

use common::{len_field, varint_field};

use std::sync::Mutex;
use xlens_testkit::alloc::CountingAlloc;

use bytes::Bytes;
use xlens_xplane::limits::{MAX_PROFILER_MESSAGES, MAX_WARNINGS_PER_PLANE};
use xlens_xplane::{ErrorKind, Space, SpaceBuilder, WarningKind, inventory, validate};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc::new();

static TURN: Mutex<()> = Mutex::new(());

/// Runs `f` and returns its result and the most heap it held at once beyond what was allocated
/// before (including what it returns).
fn peak_heap<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATOR.peak_of(f)
}

/// Decodes `bytes` and walks every event (with `list`, also lists it as the `inventory` example
/// does) and checks the peak heap is at most `per_byte` bytes per input byte.
fn check_peak(what: &str, bytes: &Bytes, list: bool, per_byte: f64) -> Space {
    let (space, peak) = peak_heap(|| {
        let space = Space::parse(bytes.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let _ = validate(&space).unwrap();
        if list {
            drop(inventory(&space).unwrap());
        }
        space
    });
    let ratio = peak as f64 / bytes.len() as f64;
    println!("{what}: {} input bytes, peak heap {peak} bytes ({ratio:.3} per input byte)", bytes.len());
    assert!(ratio <= per_byte, "{what}: {peak} bytes of heap for {} bytes of input ({ratio:.2}/byte)", bytes.len());
    space
}

/// Decodes, validates and lists `bytes`: for inputs of empty containers, which cost nothing.
fn decode_and_list(what: &str, bytes: &Bytes, per_byte: f64) -> Space {
    check_peak(what, bytes, true, per_byte)
}

/// Decodes and validates `bytes`: for records that are kept. (Listing them copies every line's
/// name into the inventory as well.)
fn decode(what: &str, bytes: &Bytes, per_byte: f64) -> Space {
    check_peak(what, bytes, false, per_byte)
}

/// Decodes `bytes`, expecting the table budget to stop it with little heap.
fn over_budget(what: &str, bytes: &Bytes) {
    let (result, peak) = peak_heap(|| Space::parse(bytes.clone()));
    let err = result.expect_err(what);
    println!("{what}: {} input bytes, peak heap {peak} bytes: {err}", bytes.len());
    assert!(matches!(err.kind(), ErrorKind::TableBudget { .. }), "{what}: {err}");
    assert!(err.location().plane.is_some() && err.location().offset.is_some(), "{what}: {err}");
    assert!(peak <= bytes.len() / 16, "{what}: {peak} bytes of heap before the error");
}

// Raw protobuf: XSpace.planes = 1; XPlane: id 1, name 2, lines 3, event_metadata 4,
// stat_metadata 5, stats 6; map entries: key 1, value 2.

/// An XSpace of planes named `/device:TPU:<i>`, each with `body` after its id and name.
fn planes(count: usize, body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(count * (body.len() + 32));
    let mut plane = Vec::with_capacity(body.len() + 32);
    for i in 0..count {
        plane.clear();
        varint_field(&mut plane, 1, i as u64 + 1);
        len_field(&mut plane, 2, format!("/device:TPU:{i}").as_bytes());
        plane.extend_from_slice(body);
        len_field(&mut out, 1, &plane);
    }
    Bytes::from(out)
}

/// `count` copies of one record.
fn repeat(count: usize, record: impl Fn(&mut Vec<u8>, usize)) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..count {
        record(&mut out, i);
    }
    out
}

#[test]
fn empty_lines_are_counted_not_stored() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    // The shape of the report: many planes of empty lines (here 200 × 10,000, 4 MB).
    let bytes = planes(200, &repeat(10_000, |out, _| len_field(out, 3, &[])));
    let space = decode_and_list("200 planes × 10,000 empty lines", &bytes, 0.1);
    for plane in space.planes() {
        assert_eq!((plane.lines().len(), plane.empty_line_count()), (0, 10_000));
    }
    let inv = inventory(&space).unwrap();
    assert_eq!(inv[0].empty_lines, 10_000);
    assert!(inv[0].lines.is_empty());

    // One plane of 2 M empty lines (4 MB).
    let bytes = planes(1, &repeat(2_000_000, |out, _| len_field(out, 3, &[])));
    let space = decode_and_list("2 M empty lines", &bytes, 0.1);
    assert_eq!(space.planes()[0].empty_line_count(), 2_000_000);

    // Empty lines between real ones keep their place: indexes count them.
    let mut body = Vec::new();
    for i in 0..1_000u64 {
        len_field(&mut body, 3, &[]);
        let mut line = Vec::new();
        varint_field(&mut line, 1, i + 1);
        len_field(&mut line, 2, "a thread with a long enough name to be worth its line record".repeat(2).as_bytes());
        len_field(&mut body, 3, &line);
    }
    let space = decode("empty lines between named ones", &planes(1, &body), 2.0);
    let plane = &space.planes()[0];
    assert_eq!((plane.lines().len(), plane.empty_line_count()), (1_000, 1_000));
    assert!(plane.lines().iter().enumerate().all(|(i, l)| l.index() == 2 * i + 1 && l.id().0 == i as i64 + 1));
}

#[test]
fn plane_stats_cost_nothing_per_stat() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    // Plane stats are read from the plane's bytes when asked for: 4 planes × 500,000 empty stats.
    let bytes = planes(4, &repeat(500_000, |out, _| len_field(out, 6, &[])));
    let space = decode_and_list("4 planes × 500,000 empty stats", &bytes, 0.1);
    assert_eq!(space.planes()[3].stats().count(), 500_000);
}

#[test]
fn records_within_the_budget_cost_at_most_twice_their_bytes() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    // Records just big enough for the budget (stored, they take 3/4 of their size): the most a
    // crafted input can make the decoder keep.
    // Lines holding an id, a time and a name of 90 bytes (100 bytes each, 72 bytes stored).
    let name = "n".repeat(90);
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, "/host:CPU");
        for i in 0..50_000 {
            plane.line(i + 1, &name, 0);
        }
    }
    let bytes = Bytes::from(b.finish());
    let space = decode("50,000 named lines", &bytes, 2.0);
    assert_eq!(space.planes()[0].lines().len(), 50_000);

    // Event metadata with distinct ids and 80-byte names (92 bytes each, 64 bytes stored), in
    // descending id order (maps come in hash order: the table is sorted in place).
    let body = repeat(60_000, |out, i| {
        let mut value = Vec::new();
        varint_field(&mut value, 1, 60_000 - i as u64);
        len_field(&mut value, 2, format!("{i:080}").as_bytes());
        let mut entry = Vec::new();
        varint_field(&mut entry, 1, 60_000 - i as u64);
        len_field(&mut entry, 2, &value);
        len_field(out, 4, &entry);
    });
    let space = decode("60,000 event metadata entries", &planes(1, &body), 2.0);
    let plane = &space.planes()[0];
    assert_eq!(plane.event_metadata().len(), 60_000);
    assert_eq!(plane.event_metadata_by_id(xlens_xplane::EventMetadataId(7)).unwrap().name(), format!("{:080}", 59_993));

    // Stat metadata with 44-byte names (53 bytes each, 32 bytes stored and 4 in the index).
    let body = repeat(100_000, |out, i| {
        let mut value = Vec::new();
        len_field(&mut value, 2, format!("{i:044}").as_bytes());
        let mut entry = Vec::new();
        varint_field(&mut entry, 1, i as u64 + 1);
        len_field(&mut entry, 2, &value);
        len_field(out, 5, &entry);
    });
    let space = decode("100,000 stat metadata entries", &planes(1, &body), 2.0);
    assert_eq!(space.planes()[0].stat_id(&format!("{:044}", 99_999)).map(|id| id.0), Some(100_000));
}

#[test]
fn records_over_the_budget_stop_before_allocating() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    // Beyond the space's allowance (64 MB). Lines holding only an id: 4 bytes of input for a
    // 72-byte record.
    over_budget("2 M id-only lines", &planes(1, &repeat(2_000_000, |out, _| len_field(out, 3, &[0x08, 0x01]))));
    // Event metadata entries holding only their key (the report's 4 M entries in 36 MB).
    let entries = repeat(2_000_000, |out, i| {
        let mut entry = Vec::new();
        varint_field(&mut entry, 1, i as u64 + (1 << 21));
        len_field(&mut entry, 2, &[]);
        len_field(out, 4, &entry);
    });
    over_budget("2 M key-only event metadata entries", &planes(1, &entries));
    // The same for stat metadata, and empty entries (all with key 0).
    over_budget("4 M empty stat metadata entries", &planes(1, &repeat(4_000_000, |out, _| len_field(out, 5, &[]))));
    over_budget("2 M empty event metadata entries", &planes(1, &repeat(2_000_000, |out, _| len_field(out, 4, &[]))));
    // Child ids: eight bytes each from one byte of a packed field.
    let mut value = Vec::new();
    varint_field(&mut value, 1, 1);
    len_field(&mut value, 6, &vec![1u8; 16 << 20]);
    let mut entry = Vec::new();
    varint_field(&mut entry, 1, 1);
    len_field(&mut entry, 2, &value);
    let mut body = Vec::new();
    len_field(&mut body, 4, &entry);
    over_budget("16 M packed child ids", &planes(1, &body));
}

#[test]
fn lossy_names_keep_a_bounded_number_of_warnings() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    // 100,000 lines named by one invalid byte each, with enough input behind each to store it.
    let body = repeat(100_000, |out, i| {
        let mut line = Vec::new();
        varint_field(&mut line, 1, i as u64 + 1);
        len_field(&mut line, 2, &[0xff]);
        len_field(&mut line, 99, &[0u8; 90]);
        len_field(out, 3, &line);
    });
    let space = decode("100,000 lossy line names", &planes(1, &body), 2.0);
    let plane = &space.planes()[0];
    assert_eq!(plane.lines()[9].name(), "\u{fffd}");
    let warnings = plane.warnings();
    assert_eq!(warnings.len(), MAX_WARNINGS_PER_PLANE + 1);
    let omitted = (100_000 - MAX_WARNINGS_PER_PLANE) as u64;
    assert_eq!(warnings.last().unwrap().kind, WarningKind::WarningsOmitted { count: omitted });
}

#[test]
fn profiler_messages_are_limited() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let mut b = SpaceBuilder::default();
    b.plane(1, "p");
    for _ in 0..MAX_PROFILER_MESSAGES / 2 {
        b.error("");
        b.warning("w");
    }
    assert!(Space::parse(Bytes::from(b.finish())).is_ok());
    let mut b = SpaceBuilder::default();
    b.plane(1, "p");
    for _ in 0..=MAX_PROFILER_MESSAGES {
        b.hostname("");
    }
    let err = Space::parse(Bytes::from(b.finish())).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::LimitExceeded { .. }), "{err}");
}
