//! decode(encode(x)) == x for arbitrary XSpaces, and the builder writes what prost reads.

mod common;

use common::{len_field, varint_field};
use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use prost::Message;
use xlens_xplane::raw::{self, XEvent, XEventMetadata, XLine, XPlane, XSpace, XStat, XStatMetadata, x_event, x_stat};
use xlens_xplane::{BuildValue, EventMetadataId, Space, SpaceBuilder, StatMetadataId};

fn any_id() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..8, any::<i64>()]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9_:/ .()-]{0,12}", "\\PC{0,6}"]
}

fn stat() -> impl Strategy<Value = XStat> {
    let value = prop_oneof![
        Just(None),
        // Finite doubles: NaN never equals itself.
        (-1e300f64..1e300).prop_map(|v| Some(x_stat::Value::DoubleValue(v))),
        any::<u64>().prop_map(|v| Some(x_stat::Value::Uint64Value(v))),
        any::<i64>().prop_map(|v| Some(x_stat::Value::Int64Value(v))),
        name().prop_map(|v| Some(x_stat::Value::StrValue(v))),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(|v| Some(x_stat::Value::BytesValue(Bytes::from(v)))),
        any::<u64>().prop_map(|v| Some(x_stat::Value::RefValue(v))),
    ];
    (any_id(), value).prop_map(|(metadata_id, value)| XStat { metadata_id, value })
}

fn event() -> impl Strategy<Value = XEvent> {
    let data = prop_oneof![
        Just(None),
        any::<i64>().prop_map(|v| Some(x_event::Data::OffsetPs(v))),
        any::<i64>().prop_map(|v| Some(x_event::Data::NumOccurrences(v))),
    ];
    (any_id(), data, any::<i64>(), proptest::collection::vec(stat(), 0..3))
        .prop_map(|(metadata_id, data, duration_ps, stats)| XEvent { metadata_id, data, duration_ps, stats })
}

fn line() -> impl Strategy<Value = XLine> {
    let line =
        (any_id(), any_id(), name(), name(), any::<i64>(), any::<i64>(), proptest::collection::vec(event(), 0..5))
            .prop_map(|(id, display_id, name, display_name, timestamp_ns, duration_ps, events)| XLine {
                id,
                display_id,
                name,
                display_name,
                timestamp_ns,
                duration_ps,
                events,
            });
    // Lines whose message is empty are counted, not stored: they must still round-trip.
    prop_oneof![4 => line, 1 => Just(XLine::default())]
}

fn plane() -> impl Strategy<Value = XPlane> {
    let event_metadata = proptest::collection::btree_map(
        any_id(),
        (
            name(),
            name(),
            proptest::collection::vec(any::<u8>(), 0..8),
            proptest::collection::vec(stat(), 0..3),
            proptest::collection::vec(any::<i64>(), 0..3),
        ),
        0..4,
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(id, (name, display_name, metadata, stats, child_id))| {
                (id, XEventMetadata { id, name, display_name, metadata: Bytes::from(metadata), stats, child_id })
            })
            .collect::<BTreeMap<_, _>>()
    });
    let stat_metadata = proptest::collection::btree_map(any_id(), (name(), name()), 0..4).prop_map(|m| {
        m.into_iter()
            .map(|(id, (name, description))| (id, XStatMetadata { id, name, description }))
            .collect::<BTreeMap<_, _>>()
    });
    (
        any_id(),
        name(),
        proptest::collection::vec(line(), 0..4),
        event_metadata,
        stat_metadata,
        proptest::collection::vec(stat(), 0..3),
    )
        .prop_map(|(id, name, lines, event_metadata, stat_metadata, stats)| XPlane {
            id,
            name,
            lines,
            event_metadata,
            stat_metadata,
            stats,
        })
}

fn space() -> impl Strategy<Value = XSpace> {
    (
        proptest::collection::vec(plane(), 1..4),
        proptest::collection::vec(name(), 0..2),
        proptest::collection::vec(name(), 0..2),
        proptest::collection::vec(name(), 0..2),
    )
        .prop_map(|(planes, errors, warnings, hostnames)| XSpace { planes, errors, warnings, hostnames })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn decode_of_encode_is_identity(x in space()) {
        let bytes = x.encode_to_vec();
        let decoded = Space::parse(Bytes::from(bytes)).expect("valid encoding decodes");
        let back = decoded.to_raw().expect("events decode");
        prop_assert_eq!(back, x);
    }

    #[test]
    fn event_counts_and_times_follow_the_schema(x in space()) {
        let decoded = Space::parse(Bytes::from(x.encode_to_vec())).unwrap();
        for (plane, raw_plane) in decoded.planes().iter().zip(&x.planes) {
            let empty = raw_plane.lines.iter().filter(|l| **l == XLine::default()).count();
            prop_assert_eq!(plane.empty_line_count(), empty);
            prop_assert_eq!(plane.lines().len() + empty, raw_plane.lines.len());
            for line in plane.lines() {
                let raw_line = &raw_plane.lines[line.index()];
                prop_assert_eq!(line.name(), raw_line.name.as_str());
                prop_assert_eq!(line.event_count(), raw_line.events.len());
                for (ev, raw_ev) in line.events(plane).zip(&raw_line.events) {
                    let ev = ev.unwrap();
                    let offset = match raw_ev.data { Some(x_event::Data::OffsetPs(o)) => o, _ => 0 };
                    let start = raw_line.timestamp_ns.saturating_mul(1000).saturating_add(offset);
                    prop_assert_eq!(ev.start().0, start);
                    prop_assert_eq!(ev.end().0, start.saturating_add(raw_ev.duration_ps));
                }
            }
        }
    }
}

/// A varint-field value of every encoded length around the plain-event read's limits (one to
/// eight bytes, nine and ten), zero (not encoded at all) and negatives.
fn sized_value() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        1i64..128,
        128i64..(1 << 14),
        (1i64 << 35)..(1i64 << 49),
        (1i64 << 49)..(1i64 << 56),
        (1i64 << 55)..(1i64 << 57),
        any::<i64>(),
    ]
}

/// Op-line events: mostly the plain shape (metadata id, offset, duration; no stats), among
/// events with stats, occurrences or no data.
fn op_event() -> impl Strategy<Value = XEvent> {
    let data = prop_oneof![
        8 => sized_value().prop_map(|v| Some(x_event::Data::OffsetPs(v))),
        1 => Just(None),
        1 => sized_value().prop_map(|v| Some(x_event::Data::NumOccurrences(v))),
    ];
    let stats = prop_oneof![8 => Just(Vec::new()), 1 => proptest::collection::vec(stat(), 1..3)];
    (sized_value(), data, sized_value(), stats).prop_map(|(metadata_id, data, duration_ps, stats)| XEvent {
        metadata_id,
        data,
        duration_ps,
        stats,
    })
}

/// Planes of several op lines, so that the last events of a line sit just before the next
/// line's bytes, and the plane's last events at the end of the input.
fn op_plane() -> impl Strategy<Value = XPlane> {
    let line = (any::<i64>(), proptest::collection::vec(op_event(), 0..40)).prop_map(|(timestamp_ns, events)| XLine {
        id: 1,
        name: "XLA Ops".into(),
        timestamp_ns: timestamp_ns >> 20,
        events,
        ..XLine::default()
    });
    proptest::collection::vec(line, 1..4).prop_map(|lines| XPlane {
        id: 1,
        name: "/device:TPU:0".into(),
        lines,
        ..XPlane::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The plain-event read (three varint fields, nothing else) and the general one read op
    /// lines as prost does, whatever each event's shape.
    #[test]
    fn op_line_events_decode_like_prost(planes in proptest::collection::vec(op_plane(), 1..3)) {
        let x = XSpace { planes, ..XSpace::default() };
        let space = Space::parse(Bytes::from(x.encode_to_vec())).expect("valid encoding decodes");
        prop_assert_eq!(space.to_raw().expect("events decode"), x);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Runs of bare events, each followed by one general read, give a line's events in order:
    /// the ones `next` gives, and as bare events only those with an offset and neither stats
    /// nor occurrences.
    #[test]
    fn bare_runs_and_general_reads_give_the_events_in_order(
        planes in proptest::collection::vec(op_plane(), 1..3),
        run_len in 1usize..70,
    ) {
        let x = XSpace { planes, ..XSpace::default() };
        let space = Space::parse(Bytes::from(x.encode_to_vec())).expect("valid encoding decodes");
        for plane in space.planes() {
            for line in plane.lines() {
                let expected: Vec<_> = line
                    .events(plane)
                    .map(|e| e.expect("event decodes"))
                    .map(|e| (e.metadata_id(), e.start(), e.duration(), e.has_stats(), e.data()))
                    .collect();
                let mut got = Vec::new();
                let mut events = line.events_releasing(plane);
                let mut run = vec![xlens_xplane::BareEvent::default(); run_len];
                loop {
                    let n = events.next_bare_run(&mut run);
                    for bare in &run[..n] {
                        let data = xlens_xplane::EventData::Offset(bare.start.0 - line.timestamp_ns() * 1000);
                        got.push((bare.metadata_id, bare.start, bare.duration, false, data));
                    }
                    if n == run_len {
                        continue;
                    }
                    match events.next() {
                        Some(e) => {
                            let e = e.expect("event decodes");
                            got.push((e.metadata_id(), e.start(), e.duration(), e.has_stats(), e.data()));
                        }
                        None => break,
                    }
                }
                prop_assert_eq!(got, expected);
            }
        }
    }
}

/// Stats as GPU kernels carry them: many per event, ids small or not, values of every kind
/// (strings long enough for two-byte lengths among them).
fn kernel_stat() -> impl Strategy<Value = XStat> {
    let value = prop_oneof![
        1 => Just(None),
        1 => (-1e300f64..1e300).prop_map(|v| Some(x_stat::Value::DoubleValue(v))),
        2 => sized_value().prop_map(|v| Some(x_stat::Value::Uint64Value(v as u64))),
        2 => sized_value().prop_map(|v| Some(x_stat::Value::Int64Value(v))),
        2 => "[a-z_.]{0,200}".prop_map(|v| Some(x_stat::Value::StrValue(v))),
        1 => proptest::collection::vec(any::<u8>(), 0..4).prop_map(|v| Some(x_stat::Value::BytesValue(Bytes::from(v)))),
        3 => sized_value().prop_map(|v| Some(x_stat::Value::RefValue(v as u64))),
    ];
    (prop_oneof![6 => 0i64..140, 1 => any::<i64>()], value)
        .prop_map(|(metadata_id, value)| XStat { metadata_id, value })
}

fn kernel_plane() -> impl Strategy<Value = XPlane> {
    let event = (sized_value(), sized_value(), proptest::collection::vec(kernel_stat(), 0..14)).prop_map(
        |(metadata_id, offset, stats)| XEvent {
            metadata_id,
            data: Some(x_event::Data::OffsetPs(offset)),
            duration_ps: 1,
            stats,
        },
    );
    proptest::collection::vec(proptest::collection::vec(event, 0..12), 1..3).prop_map(|lines| XPlane {
        id: 1,
        name: "/device:GPU:0".into(),
        lines: lines
            .into_iter()
            .enumerate()
            .map(|(i, events)| XLine { id: i as i64 + 1, name: format!("Stream #{i}"), events, ..XLine::default() })
            .collect(),
        ..XPlane::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A walk that gathers some stats while it decodes the events (every stat's id read first,
    /// the wanted ones decoded) finds exactly the wanted stats of a full decode, in order, on
    /// the line's one-pass walk too.
    #[test]
    fn gathered_stats_are_the_wanted_stats_of_a_full_decode(plane in kernel_plane(), modulus in 1i64..6) {
        let x = XSpace { planes: vec![plane], ..XSpace::default() };
        let space = Space::parse(Bytes::from(x.encode_to_vec())).expect("valid encoding decodes");
        let plane = &space.planes()[0];
        let wanted = |id: StatMetadataId| id.0.rem_euclid(modulus) == 0;
        for line in plane.lines() {
            let mut gathered = xlens_xplane::GatheredStats::new(wanted);
            let mut events = line.events(plane);
            let mut releasing_gathered = xlens_xplane::GatheredStats::new(wanted);
            let mut releasing = line.events_releasing(plane);
            let mut seen = 0;
            while let Some(ev) = events.next_gathering(&mut gathered) {
                let ev = ev.expect("event decodes");
                let all: Vec<_> = ev
                    .stats()
                    .map(|s| s.expect("stat decodes"))
                    .filter(|s| wanted(s.metadata_id()))
                    .map(|s| (s.metadata_id(), s.value()))
                    .collect();
                let got: Vec<_> = gathered.stats().iter().map(|s| (s.metadata_id(), s.value())).collect();
                prop_assert_eq!(&got, &all);
                prop_assert_eq!(ev.has_stats(), ev.stats().next().is_some());
                let again = releasing.next_gathering(&mut releasing_gathered).expect("same events").expect("decodes");
                prop_assert_eq!(again.start(), ev.start());
                let got: Vec<_> = releasing_gathered.stats().iter().map(|s| (s.metadata_id(), s.value())).collect();
                prop_assert_eq!(&got, &all);
                seen += 1;
            }
            prop_assert!(releasing.next_gathering(&mut releasing_gathered).is_none());
            prop_assert_eq!(seen, line.event_count());
        }
    }
}

#[test]
fn plain_looking_events_with_more_fields_decode_like_prost() {
    // Events that start like the plain shape but are not: a repeated duration (the last wins),
    // fields out of order, a stat after the three fields, a length that ends inside the third
    // field, and an occurrences field; between plain events, each at the end of its line.
    let plain = |out: &mut Vec<u8>, id: u64, offset: u64, duration: u64| {
        let mut event = Vec::new();
        varint_field(&mut event, 1, id);
        varint_field(&mut event, 2, offset);
        varint_field(&mut event, 3, duration);
        len_field(out, 4, &event);
    };
    let odd: Vec<Vec<u8>> = vec![
        [0x08, 0x05, 0x10, 0x80, 0x01, 0x18, 0x09, 0x18, 0x0a].to_vec(),
        [0x10, 0x80, 0x01, 0x08, 0x05, 0x18, 0x09].to_vec(),
        [0x08, 0x05, 0x10, 0x80, 0x01, 0x18, 0x09, 0x22, 0x02, 0x08, 0x01].to_vec(),
        [0x08, 0x05, 0x10, 0x80, 0x01, 0x18, 0x09, 0x28, 0x03].to_vec(),
        [0x08, 0x05, 0x18, 0x09, 0x10, 0x80, 0x01].to_vec(),
    ];
    let mut plane = Vec::new();
    len_field(&mut plane, 2, b"/device:TPU:0");
    for body in &odd {
        let mut line = Vec::new();
        len_field(&mut line, 2, b"XLA Ops");
        plain(&mut line, 3, 1 << 40, 1 << 20);
        len_field(&mut line, 4, body);
        len_field(&mut plane, 3, &line);
        let mut line = Vec::new();
        len_field(&mut line, 2, b"XLA Ops");
        len_field(&mut line, 4, body);
        plain(&mut line, 7, 1 << 41, 1 << 21);
        len_field(&mut plane, 3, &line);
    }
    // A length that ends inside the third field: the general read's error, at the same place.
    let mut line = Vec::new();
    len_field(&mut line, 2, b"XLA Ops");
    plain(&mut line, 3, 1 << 40, 1 << 20);
    line.extend_from_slice(&[0x22, 0x07, 0x08, 0x05, 0x10, 0x80, 0x01, 0x18, 0x89]);
    let mut bad_plane = plane.clone();
    len_field(&mut bad_plane, 3, &line);
    let mut bytes = Vec::new();
    len_field(&mut bytes, 1, &plane);
    let by_prost = XSpace::decode(bytes.as_slice()).unwrap();
    let space = Space::parse(Bytes::from(bytes)).unwrap();
    assert_eq!(space.to_raw().unwrap(), by_prost);
    let durations: Vec<i64> =
        by_prost.planes[0].lines.iter().flat_map(|l| l.events.iter().map(|e| e.duration_ps)).collect();
    assert_eq!(durations[..4], [1 << 20, 10, 10, 1 << 21]);

    // Malformed events of the plain shape whose varints do not end within eight bytes: as the
    // general read, an error (an invalid tag after a nine-byte metadata id; a duration that runs
    // to the event's end), never values.
    let continued = [0x81u8; 8];
    let mut bad_id = vec![0x08];
    bad_id.extend_from_slice(&continued);
    bad_id.extend_from_slice(&[0x10, 0x01, 0x18, 0x01]);
    let mut bad_offset = vec![0x08, 0x05, 0x10];
    bad_offset.extend_from_slice(&continued);
    bad_offset.extend_from_slice(&[0x18, 0x18]);
    let mut bad_duration = vec![0x08, 0x05, 0x10, 0x01, 0x18];
    bad_duration.extend_from_slice(&continued);
    for body in [&bad_id, &bad_offset, &bad_duration] {
        let mut line = Vec::new();
        len_field(&mut line, 2, b"XLA Ops");
        // A plain event first (the event after a line's other fields is read the general way),
        // and more after it (the plain read looks at 40 bytes from the event's start).
        plain(&mut line, 3, 1 << 40, 1 << 20);
        len_field(&mut line, 4, body);
        for _ in 0..4 {
            plain(&mut line, 7, 1 << 41, 1 << 21);
        }
        let mut plane = Vec::new();
        len_field(&mut plane, 3, &line);
        let mut bytes = Vec::new();
        len_field(&mut bytes, 1, &plane);
        assert!(XSpace::decode(bytes.as_slice()).is_err());
        let space = Space::parse(Bytes::from(bytes)).unwrap();
        let plane = &space.planes()[0];
        let events: Vec<_> = plane.lines()[0].events(plane).collect();
        assert_eq!(events.len(), 2, "{body:02x?}: {events:?}");
        assert!(events[0].is_ok() && events[1].is_err(), "{body:02x?}: {events:?}");
    }

    let mut bytes = Vec::new();
    len_field(&mut bytes, 1, &bad_plane);
    assert!(XSpace::decode(bytes.as_slice()).is_err());
    let space = Space::parse(Bytes::from(bytes)).unwrap();
    let plane = &space.planes()[0];
    let line = plane.lines().last().unwrap();
    let events: Vec<_> = line.events(plane).collect();
    assert_eq!(events.len(), 2);
    assert!(events[0].is_ok());
    let err = events[1].as_ref().unwrap_err().to_string();
    assert!(err.contains("ends inside a field") && err.contains("event #1"), "{err}");
}

/// A device plane's op line is counted on its events' tag and length bytes alone: an event
/// whose length runs past its line (by one byte, into the next line's bytes) is an error there,
/// as prost finds, not an event.
#[test]
fn an_op_line_event_past_its_line_fails_the_parse() {
    let plain = |out: &mut Vec<u8>, id: u64| {
        let mut event = Vec::new();
        varint_field(&mut event, 1, id);
        varint_field(&mut event, 2, 1 << 40);
        varint_field(&mut event, 3, 1 << 20);
        len_field(out, 4, &event);
    };
    let mut line = Vec::new();
    len_field(&mut line, 2, b"XLA Ops");
    for id in 1..6 {
        plain(&mut line, id);
    }
    let mut cut = line.clone();
    // The last event's length says one byte more than the line holds.
    let last_len = cut.len() - 14;
    assert_eq!(cut[last_len], 13);
    cut[last_len] = 14;
    let mut plane = Vec::new();
    len_field(&mut plane, 2, b"/device:TPU:0");
    len_field(&mut plane, 3, &cut);
    len_field(&mut plane, 3, &line);
    let mut bytes = Vec::new();
    len_field(&mut bytes, 1, &plane);
    assert!(XSpace::decode(bytes.as_slice()).is_err());
    let err = Space::parse(Bytes::from(bytes)).expect_err("a truncated event fails the parse").to_string();
    assert!(err.contains("ends inside a field"), "{err}");
}

#[test]
fn builder_output_is_what_prost_reads() {
    let mut b = SpaceBuilder::default();
    b.hostname("host-a");
    b.warning("w");
    {
        let mut p = b.plane(7, "/device:TPU:0");
        let flops = p.stat_metadata("flops");
        let kind = p.stat_metadata("device_type_string");
        let cat = p.stat_metadata("hlo_category");
        let conv = p.stat_metadata("convolution");
        p.stat(kind, "TPU v5 Lite");
        let m = p.event_metadata_with_display("%fusion.1 = f32[8] fusion(...)", "fusion.1");
        p.metadata_stat(m, flops, 1234u64);
        p.metadata_stat(m, cat, BuildValue::Ref(conv));
        p.metadata_payload(m, b"payload");
        p.metadata_child(m, EventMetadataId(9));
        let mut l = p.line(3, "XLA Ops", 1000);
        l.event(m, 0, 5).stat(flops, -3i64).stat(cat, 2.5f64);
        l.aggregated_event(m, 4, 20).stat(StatMetadataId(99), &b"bytes"[..]);
    }
    let bytes = b.finish();
    let x = XSpace::decode(bytes.as_slice()).unwrap();
    assert_eq!(x.hostnames, vec!["host-a"]);
    let p = &x.planes[0];
    assert_eq!((p.id, p.name.as_str()), (7, "/device:TPU:0"));
    let m = &p.event_metadata[&1];
    assert_eq!((m.name.as_str(), m.display_name.as_str()), ("%fusion.1 = f32[8] fusion(...)", "fusion.1"));
    assert_eq!(m.child_id, vec![9]);
    assert_eq!(&m.metadata[..], b"payload");
    assert_eq!(m.stats[1].value, Some(x_stat::Value::RefValue(4)));
    let l = &p.lines[0];
    assert_eq!(l.timestamp_ns, 1000);
    assert_eq!(l.events[0].data, Some(x_event::Data::OffsetPs(0)));
    assert_eq!(l.events[0].stats[0].value, Some(x_stat::Value::Int64Value(-3)));
    assert_eq!(l.events[1].data, Some(x_event::Data::NumOccurrences(4)));
    assert_eq!(p.stat_metadata.len(), 4);

    // And our decoder reads the same thing, refs resolved.
    let space = Space::parse(Bytes::from(bytes)).unwrap();
    assert_eq!(space.to_raw().unwrap(), x);
    let plane = &space.planes()[0];
    let meta = &plane.event_metadata()[0];
    let cat = plane.metadata_stats(meta).nth(1).unwrap().unwrap();
    assert_eq!((cat.name(), cat.as_str().unwrap().as_ref()), ("hlo_category", "convolution"));
    let _: &raw::XSpace = &x;
}

/// A `map<int64, message>` entry whose value is `{1: key, 2: name}`.
fn map_entry(out: &mut Vec<u8>, field: u32, key: u64, name: &str) {
    let mut value = Vec::new();
    varint_field(&mut value, 1, key);
    len_field(&mut value, 2, name.as_bytes());
    let mut entry = Vec::new();
    varint_field(&mut entry, 1, key);
    len_field(&mut entry, 2, &value);
    len_field(out, field, &entry);
}

#[test]
fn odd_layouts_decode_like_prost() {
    // Fields out of order and interleaved, repeated map keys (the last entry wins), plane stats
    // around the lines, and empty lines among the others.
    let mut plane = Vec::new();
    let stat = |out: &mut Vec<u8>, id: u64, v: u64| {
        let mut s = Vec::new();
        varint_field(&mut s, 1, id);
        varint_field(&mut s, 3, v);
        len_field(out, 6, &s);
    };
    stat(&mut plane, 2, 10);
    len_field(&mut plane, 3, &[]);
    map_entry(&mut plane, 4, 5, "five");
    map_entry(&mut plane, 5, 2, "two");
    let mut line = Vec::new();
    varint_field(&mut line, 1, 7);
    len_field(&mut line, 2, b"worker");
    let mut event = Vec::new();
    varint_field(&mut event, 1, 5);
    varint_field(&mut event, 3, 100);
    len_field(&mut line, 4, &event);
    len_field(&mut plane, 3, &line);
    stat(&mut plane, 1, 11);
    map_entry(&mut plane, 4, 3, "three");
    map_entry(&mut plane, 4, 5, "five again");
    map_entry(&mut plane, 5, 1, "one");
    map_entry(&mut plane, 5, 2, "two again");
    len_field(&mut plane, 3, &[]);
    len_field(&mut plane, 3, &[]);
    len_field(&mut plane, 2, b"/device:TPU:0");
    stat(&mut plane, 2, 12);
    let mut bytes = Vec::new();
    len_field(&mut bytes, 1, &plane);

    let by_prost = XSpace::decode(bytes.as_slice()).unwrap();
    let space = Space::parse(Bytes::from(bytes)).unwrap();
    assert_eq!(space.to_raw().unwrap(), by_prost);
    let plane = &space.planes()[0];
    assert_eq!((plane.lines().len(), plane.empty_line_count(), plane.lines()[0].index()), (1, 3, 1));
    assert_eq!(plane.event_metadata_by_id(EventMetadataId(5)).unwrap().name(), "five again");
    assert_eq!(plane.stat_metadata_by_id(StatMetadataId(2)).unwrap().name(), "two again");
    let stats: Vec<(i64, u64)> =
        plane.stats().map(|s| s.unwrap()).map(|s| (s.metadata_id().0, s.as_u64().unwrap())).collect();
    assert_eq!(stats, [(2, 10), (1, 11), (2, 12)]);
    assert_eq!(plane.stat_by_name("two again").and_then(|s| s.as_u64()), Some(10));
    let ev = plane.lines()[0].events(plane).next().unwrap().unwrap();
    assert_eq!((ev.name(), ev.duration().0), ("five again", 100));
}

#[test]
fn map_entries_without_a_value_are_empty_and_win_over_earlier_ones() {
    let mut plane = Vec::new();
    map_entry(&mut plane, 4, 4, "four");
    map_entry(&mut plane, 5, 4, "four");
    // Entries holding only their key.
    for field in [4, 5] {
        let mut entry = Vec::new();
        varint_field(&mut entry, 1, 4);
        len_field(&mut plane, field, &entry);
    }
    map_entry(&mut plane, 4, 1, "one");
    let mut bytes = Vec::new();
    len_field(&mut bytes, 1, &plane);
    let space = Space::parse(Bytes::from(bytes)).unwrap();
    let plane = &space.planes()[0];
    let ids: Vec<i64> = plane.event_metadata().iter().map(|m| m.id().0).collect();
    assert_eq!(ids, [1, 4]);
    let four = plane.event_metadata_by_id(EventMetadataId(4)).unwrap();
    assert_eq!((four.name(), plane.metadata_stats(four).count(), plane.metadata_payload(four)), ("", 0, &[][..]));
    assert_eq!(plane.stat_metadata_by_id(StatMetadataId(4)).unwrap().name(), "");
}
