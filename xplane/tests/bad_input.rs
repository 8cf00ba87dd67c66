//! Bad input gets a typed error with its location, or a warning; never a panic.

mod common;

use bytes::Bytes;
use xlens_xplane::{ErrorKind, EventMetadataId, Space, SpaceBuilder, StatMetadataId, WarningKind, validate};

fn iterate_all(space: &Space) -> Result<usize, xlens_xplane::Error> {
    let mut n = 0;
    for plane in space.planes() {
        for line in plane.lines() {
            for ev in line.events(plane) {
                let ev = ev?;
                for s in ev.stats().chain(ev.metadata_stats()) {
                    let _ = s?.value();
                }
                n += 1;
            }
        }
    }
    Ok(n)
}

fn small_real_trace() -> Vec<u8> {
    std::fs::read(common::testdata().join("corpus/data_formatting_baseline/vm.xplane.pb")).unwrap()
}

#[test]
fn every_truncation_of_a_real_trace_is_an_error_or_a_shorter_valid_space() {
    let full = small_real_trace();
    // Every cut inside the first plane header and a spread of cuts through the file.
    let step = (full.len() / 1500).max(1);
    let cuts = (1..200).chain((200..full.len()).step_by(step));
    let mut truncated = 0;
    for cut in cuts {
        let bytes = Bytes::copy_from_slice(&full[..cut]);
        match Space::parse(bytes) {
            Err(e) => {
                assert!(e.is_truncated() || matches!(e.kind(), ErrorKind::Malformed(_)), "cut {cut}: {e}");
                assert!(e.location().offset.is_some(), "cut {cut}: no offset in {e}");
                truncated += 1;
            }
            // Cutting between top-level fields leaves a valid, shorter XSpace.
            Ok(space) => {
                let _ = iterate_all(&space);
            }
        }
    }
    assert!(truncated > 100);
}

#[test]
fn truncation_error_names_plane_and_offset() {
    let full = small_real_trace();
    let cut = full.len() - 10;
    let err = Space::parse(Bytes::copy_from_slice(&full[..cut])).unwrap_err();
    assert!(err.is_truncated());
    let loc = err.location();
    assert!(loc.offset.unwrap() <= cut as u64);
    let text = err.to_string();
    assert!(text.contains("truncated") && text.contains("byte offset"), "{text}");
}

#[test]
fn random_bytes_never_panic() {
    // The test kit's seeded generator, so failures reproduce.
    let mut rng = xlens_testkit::synth::Rng::new(1);
    let mut next = || rng.next_u64();
    let mut errors = 0;
    for _ in 0..2000 {
        let len = (next() % 512) as usize + 1;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        match Space::parse(Bytes::from(bytes)) {
            Ok(space) => {
                let _ = iterate_all(&space);
                let _ = validate(&space);
            }
            Err(_) => errors += 1,
        }
    }
    assert!(errors > 1000, "random bytes should mostly fail to decode ({errors})");
}

#[test]
fn huge_length_fields_fail_without_allocating() {
    // Field 1 (planes), length 2^60: must be a truncation error, not an allocation attempt.
    let mut bytes = vec![0x0a];
    let mut v: u64 = 1 << 60;
    while v >= 0x80 {
        bytes.push((v as u8) | 0x80);
        v >>= 7;
    }
    bytes.push(v as u8);
    let err = Space::parse(Bytes::from(bytes)).unwrap_err();
    assert!(err.is_truncated());
    assert_eq!(err.location().offset, Some(1));
}

#[test]
fn wrong_wire_types_are_typed_errors_with_location() {
    // XSpace field 1 (planes) sent as a varint.
    let err = Space::parse(Bytes::from_static(&[0x08, 0x01])).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::WrongWireType { message: "XSpace", field: 1, .. }), "{err}");
    // Inside a plane: XPlane.name (2) sent as a varint; plane 1 is the bad one.
    let mut b = SpaceBuilder::default();
    b.plane(1, "ok");
    b.raw(&[0x0a, 0x02, 0x10, 0x05]);
    let err = Space::parse(Bytes::from(b.finish())).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::WrongWireType { message: "XPlane", field: 2, .. }), "{err}");
    assert_eq!(err.location().plane, Some(1));
    // Inside an event, found while iterating: XEvent.duration_ps (3) as length-delimited.
    let mut b = SpaceBuilder::default();
    {
        let mut p = b.plane(1, "p");
        let m = p.event_metadata("m");
        let mut l = p.line(1, "l", 0);
        l.event(m, 0, 1);
    }
    let mut bytes = b.finish();
    // Append a second line whose only event has field 3 as LEN: line {4: {3: LEN ""}}.
    let bad_line = [0x22, 0x02, 0x1a, 0x00];
    let mut line = vec![0x1a, bad_line.len() as u8];
    line.extend_from_slice(&bad_line);
    // Rewrite the plane's length to include the new line.
    let mut plane = bytes.split_off(0);
    let (tag, rest) = plane.split_at_mut(1);
    assert_eq!(tag[0], 0x0a);
    let old_len = rest[0] as usize;
    assert!(old_len < 0x7f - line.len());
    let mut body = rest[1..].to_vec();
    body.extend_from_slice(&line);
    let mut out = vec![0x0a, body.len() as u8];
    out.extend_from_slice(&body);
    let space = Space::parse(Bytes::from(out)).unwrap();
    let plane = &space.planes()[0];
    let err = plane.lines()[1].events(plane).next().unwrap().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::WrongWireType { message: "XEvent", field: 3, .. }), "{err}");
    assert_eq!((err.location().plane, err.location().line, err.location().event), (Some(0), Some(1), Some(0)));
    // The offset is the bad tag's, in the file: the event's `0x1a` is two bytes from the end.
    let file_len = 2 + body.len() as u64;
    assert_eq!(err.location().offset, Some(file_len - 2), "{err}");
    // The iterator stops after its error.
    let mut it = plane.lines()[1].events(plane);
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none());
}

#[test]
fn dangling_ids_decode_and_warn() {
    let mut b = SpaceBuilder::default();
    {
        let mut p = b.plane(1, "/host:CPU");
        let known = p.event_metadata("known");
        let mut l = p.line(1, "t", 0);
        l.event(known, 0, 1).stat(StatMetadataId(77), 1i64);
        l.event(EventMetadataId(5), 1, 1);
        l.event(EventMetadataId(5), 2, 1);
        l.event(known, 3, 1).stat(StatMetadataId(77), xlens_xplane::BuildValue::Ref(StatMetadataId(1234)));
    }
    let space = Space::parse(Bytes::from(b.finish())).unwrap();
    let plane = &space.planes()[0];
    let names: Vec<&str> = plane.lines()[0].events(plane).map(|e| e.unwrap().name()).collect();
    assert_eq!(names, ["known", "", "", "known"]);
    let warnings = validate(&space).unwrap();
    let kinds: Vec<_> = warnings.iter().map(|w| w.kind.clone()).collect();
    assert!(kinds.contains(&WarningKind::DanglingEventMetadata { id: 5, events: 2 }), "{kinds:?}");
    assert!(kinds.contains(&WarningKind::DanglingStatMetadata { id: 77, stats: 2 }), "{kinds:?}");
    assert!(kinds.contains(&WarningKind::DanglingStatRef { id: 1234 }), "{kinds:?}");
    assert!(warnings.iter().all(|w| w.location.plane == Some(0)));
}

#[test]
fn invalid_utf8_names_are_lossy_and_warned() {
    let mut b = SpaceBuilder::default();
    // Plane {name: b"dev\xff"}.
    b.raw(&[0x0a, 0x06, 0x12, 0x04, b'd', b'e', b'v', 0xff]);
    let space = Space::parse(Bytes::from(b.finish())).unwrap();
    assert_eq!(space.planes()[0].name(), "dev\u{fffd}");
    let w = space.warnings();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].kind, WarningKind::InvalidUtf8 { what: "plane name" });
    // The offset is where the field value (its length prefix) starts.
    assert_eq!(w[0].location.offset, Some(3));
}

#[test]
fn empty_inputs_and_directories_have_clear_errors() {
    let err = Space::parse(Bytes::new()).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::EmptyInput));

    let dir = std::env::temp_dir().join(format!("xlens-bad-input-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let err = xlens_testkit::open_session(&dir).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NoProfiles), "{err}");
    assert_eq!(err.location().file.as_deref(), Some(dir.as_path()));

    let zero = dir.join("host0.xplane.pb");
    std::fs::write(&zero, b"").unwrap();
    let err = xlens_testkit::open_session(&dir).unwrap_err();
    assert!(err.is_zero_byte_profile());
    let text = err.to_string();
    assert!(text.contains("2 GB") && text.contains("host0.xplane.pb"), "{text}");

    let missing = dir.join("missing.xplane.pb");
    let err = xlens_testkit::open_session(&missing).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io(_)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn profiler_errors_and_warnings_become_warnings() {
    let mut b = SpaceBuilder::default();
    b.error("buffer full");
    b.warning("clock skew");
    b.plane(1, "p");
    let space = Space::parse(Bytes::from(b.finish())).unwrap();
    let w = validate(&space).unwrap();
    assert_eq!(w[0].kind, WarningKind::ProfilerError("buffer full".into()));
    assert_eq!(w[1].kind, WarningKind::ProfilerWarning("clock skew".into()));
}

/// A stat or event that does not decode is noted in the space's `decode_errors`, with its
/// location, by whichever walk meets it (and once, however many walks do), even where the walk
/// reads it as absent.
#[test]
fn malformed_stats_and_events_are_noted_once_with_their_location() {
    use xlens_testkit::splice::{insert, stats};
    use xlens_xplane::{GatheredStats, Undecoded};
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, "/device:GPU:0");
        let (flops, name) = (plane.stat_metadata("flops"), plane.stat_metadata("hlo_op"));
        let op = plane.event_metadata("fusion");
        plane.metadata_stat(op, flops, 7u64);
        let mut line = plane.line(1, "Stream #1", 0);
        line.event(op, 0, 10).stat(name, "fusion.1");
        line.event(op, 20, 10).stat(name, "fusion.2");
    }
    let bytes = b.finish();
    let all = stats(&bytes).unwrap();
    let meta = all.iter().find(|p| p[1].number == 4).unwrap();
    let events: Vec<_> = all.iter().filter(|p| p[1].number == 3).collect();
    let (first, second) = (events[0], events[1]);
    let bad = |path: &[xlens_testkit::splice::LenField]| insert(&bytes, path, path.last().unwrap().body.end, &[0x0f]);

    // An event's stat, read by id (as absent), by a filtered walk and gathered: one entry.
    let space = Space::parse(bad(first).into()).unwrap();
    let plane = &space.planes()[0];
    let name = plane.stat_id("hlo_op").unwrap();
    let line = &plane.lines()[0];
    let event = line.events(plane).next().unwrap().unwrap();
    assert!(event.stat(name).is_none());
    assert!(event.stats_where(|id| id == name).next().unwrap().is_err());
    let mut gathered = GatheredStats::new(|id| id == name);
    let mut events = line.events(plane);
    assert!(events.next_gathering(&mut gathered).unwrap().is_ok() && gathered.stats().is_empty());
    assert!(events.next_gathering(&mut gathered).unwrap().is_ok() && gathered.stats().len() == 1);
    let errors = space.decode_errors();
    assert_eq!((errors.errors.len(), errors.omitted), (1, 0), "{errors:?}");
    assert_eq!(errors.errors[0].what, Undecoded::EventStat);
    // The 0x0f: where the stat ended, after the length prefixes before it grew (if they did).
    let offset = first[3].body.end + (bad(first).len() - bytes.len() - 1);
    assert_eq!(errors.errors[0].error.location().offset, Some(offset as u64));
    assert_eq!(errors.errors[0].error.location().plane, Some(0));

    // An event-metadata entry's stat, read by id through the event.
    let space = Space::parse(bad(meta).into()).unwrap();
    let plane = &space.planes()[0];
    let flops = plane.stat_id("flops").unwrap();
    let event = plane.lines()[0].events(plane).next().unwrap().unwrap();
    assert!(event.stat_or_metadata_stat(flops).is_none());
    let errors = space.decode_errors();
    assert_eq!(errors.errors.len(), 1, "{errors:?}");
    assert_eq!(errors.errors[0].what, Undecoded::MetadataStat);

    // An event whose fields do not decode (the byte lands after the second event's stat, inside
    // the event): the walk yields the error, and it is noted with its line and event.
    let event_path = &second[..3];
    let space = Space::parse(insert(&bytes, event_path, event_path[2].body.end, &[0x0f]).into()).unwrap();
    let plane = &space.planes()[0];
    assert_eq!(plane.lines()[0].events(plane).filter(Result::is_ok).count(), 1);
    let errors = space.decode_errors();
    assert_eq!(errors.errors.len(), 1, "{errors:?}");
    assert_eq!(errors.errors[0].what, Undecoded::Event);
    let location = errors.errors[0].error.location();
    assert_eq!((location.line, location.event), (Some(0), Some(1)));
    assert!(errors.errors[0].to_string().starts_with("an event could not be decoded: "), "{}", errors.errors[0]);
}

/// The decode errors a space lists are capped: the first in file order, and a count of the rest.
#[test]
fn decode_errors_are_capped_with_a_count_of_the_rest() {
    use xlens_testkit::splice::{insert, stats};
    use xlens_xplane::limits::MAX_DECODE_ERRORS_KEPT;
    let lines = MAX_DECODE_ERRORS_KEPT + 5;
    let mut b = SpaceBuilder::default();
    {
        let mut plane = b.plane(1, "/device:GPU:0");
        let name = plane.stat_metadata("hlo_op");
        let op = plane.event_metadata("fusion");
        for l in 0..lines {
            plane.line(l as i64, "Stream", 0).event(op, 0, 10).stat(name, "fusion.1");
        }
    }
    let mut bytes = b.finish();
    for k in 0..lines {
        let path = stats(&bytes).unwrap().into_iter().filter(|p| p[1].number == 3).nth(k).unwrap();
        bytes = insert(&bytes, &path, path[3].body.end, &[0x0f]);
    }
    let space = Space::parse(bytes.into()).unwrap();
    let plane = &space.planes()[0];
    for line in plane.lines().iter().rev() {
        for event in line.events(plane) {
            assert!(event.unwrap().stats().any(|s| s.is_err()));
        }
    }
    let errors = space.decode_errors();
    assert_eq!((errors.errors.len(), errors.omitted, errors.saturated), (MAX_DECODE_ERRORS_KEPT, 5, false));
    let offsets: Vec<u64> = errors.errors.iter().map(|e| e.error.location().offset.unwrap()).collect();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "in file order: {offsets:?}");
    let lines_out = errors.lines();
    assert_eq!(lines_out.len(), MAX_DECODE_ERRORS_KEPT + 1);
    assert_eq!(lines_out.last().unwrap(), "5 more entries of the profile could not be decoded");
}
