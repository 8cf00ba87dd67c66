//! Fuzz bodies for xlens, as library functions.
//!
//! Each module exposes `run(&[u8])`, called by a thin libFuzzer target in `fuzz_targets/` and by
//! seeded smoke tests here, so `cargo test` exercises the same code on stable. A body panics only
//! when an invariant breaks (a panic inside the decoder is a bug).

use xlens_xplane::raw::{XEvent, XPlane, XStat, x_event, x_stat};

pub mod campaign;
pub mod decode_hlo;
pub mod decode_xspace;
pub mod scan;

/// The seeded generator of the smoke tests: the test kit's, so every seeded test draws alike.
pub use xlens_testkit::synth::Rng;

/// Mutates `input` in place the way a fuzzer would: flips, overwrites, inserts, deletes, truncates.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        if input.is_empty() {
            input.push(rng.next_u64() as u8);
            continue;
        }
        let at = rng.below(input.len());
        match rng.below(6) {
            0 => input[at] ^= 1 << rng.below(8),
            1 => input[at] = rng.next_u64() as u8,
            2 => input.insert(at, rng.next_u64() as u8),
            3 => {
                input.remove(at);
            }
            4 => input.truncate(at),
            _ => {
                // A varint-looking run of continuation bytes (hostile lengths).
                let n = 1 + rng.below(10);
                for i in 0..n.min(input.len() - at) {
                    input[at + i] = 0xff;
                }
            }
        }
    }
}

/// Mutates a decoded XSpace the way a broken or hostile profiler might, keeping it a valid
/// protobuf: hostile times and stat values, dangling or swapped metadata ids, names with control
/// characters and markup, mutated embedded protos (HLO), and dropped or duplicated events, lines
/// and planes. Byte-level [`mutate`] mostly breaks the wire format; this reaches the detectors.
pub fn mutate_space(rng: &mut Rng, space: &mut xlens_xplane::raw::XSpace) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        if space.planes.is_empty() {
            return;
        }
        if rng.below(10) == 0 {
            // A suffix on every event name of every plane, so a hostile name reaches the report.
            let suffix = hostile_string(rng, &[]);
            for m in space.planes.iter_mut().flat_map(|p| p.event_metadata.values_mut()) {
                m.name.push_str(&suffix);
                if !m.display_name.is_empty() {
                    m.display_name.push_str(&suffix);
                }
            }
            continue;
        }
        let p = rng.below(space.planes.len());
        let plane = &mut space.planes[p];
        match rng.below(10) {
            0 => {
                if let Some(event) = pick_event(rng, plane) {
                    match rng.below(3) {
                        0 => event.duration_ps = hostile_i64(rng, event.duration_ps),
                        1 => {
                            let offset = match event.data {
                                Some(x_event::Data::OffsetPs(v)) => v,
                                _ => 0,
                            };
                            event.data = Some(x_event::Data::OffsetPs(hostile_i64(rng, offset)));
                        }
                        _ => event.data = Some(x_event::Data::NumOccurrences(hostile_i64(rng, 1))),
                    }
                }
            }
            1 => {
                if !plane.lines.is_empty() {
                    let l = rng.below(plane.lines.len());
                    let line = &mut plane.lines[l];
                    if rng.below(2) == 0 {
                        line.timestamp_ns = hostile_i64(rng, line.timestamp_ns);
                    } else {
                        line.duration_ps = hostile_i64(rng, line.duration_ps);
                    }
                }
            }
            2 => {
                let ids: Vec<i64> = plane.stat_metadata.keys().copied().collect();
                if let Some(stat) = pick_stat(rng, plane) {
                    stat.value = Some(hostile_value(rng, &ids));
                }
            }
            3 => {
                let ids: Vec<i64> = plane.stat_metadata.keys().copied().collect();
                if let Some(stat) = pick_stat(rng, plane) {
                    stat.metadata_id = hostile_id(rng, &ids);
                }
            }
            4 => {
                let ids: Vec<i64> = plane.event_metadata.keys().copied().collect();
                if let Some(event) = pick_event(rng, plane) {
                    event.metadata_id = hostile_id(rng, &ids);
                }
            }
            5 => {
                let names: Vec<String> = plane.event_metadata.values().map(|m| m.name.clone()).collect();
                let name = hostile_string(rng, &names);
                match rng.below(4) {
                    0 => plane.name = name,
                    1 if !plane.lines.is_empty() => {
                        let l = rng.below(plane.lines.len());
                        plane.lines[l].name = name;
                    }
                    2 if !plane.stat_metadata.is_empty() => {
                        let k = rng.below(plane.stat_metadata.len());
                        if let Some(m) = plane.stat_metadata.values_mut().nth(k) {
                            m.name = name;
                        }
                    }
                    _ if !plane.event_metadata.is_empty() => {
                        let k = rng.below(plane.event_metadata.len());
                        if let Some(m) = plane.event_metadata.values_mut().nth(k) {
                            if rng.below(2) == 0 { m.name = name } else { m.display_name = name }
                        }
                    }
                    _ => {}
                }
            }
            6 => {
                // Embedded protos: the HLO module in event metadata, or a bytes stat.
                let with_bytes: Vec<i64> =
                    plane.event_metadata.iter().filter(|(_, m)| !m.metadata.is_empty()).map(|(&k, _)| k).collect();
                if !with_bytes.is_empty() {
                    let k = with_bytes[rng.below(with_bytes.len())];
                    if let Some(m) = plane.event_metadata.get_mut(&k) {
                        let mut b = m.metadata.to_vec();
                        mutate(rng, &mut b);
                        m.metadata = b.into();
                    }
                } else if let Some(stat) = pick_stat(rng, plane)
                    && let Some(x_stat::Value::BytesValue(v)) = &mut stat.value
                {
                    let mut b = v.to_vec();
                    mutate(rng, &mut b);
                    *v = b.into();
                }
            }
            7 => {
                if !plane.lines.is_empty() {
                    let l = rng.below(plane.lines.len());
                    let events = &mut plane.lines[l].events;
                    if !events.is_empty() {
                        let e = rng.below(events.len());
                        match rng.below(3) {
                            0 => {
                                events.remove(e);
                            }
                            1 => events.insert(e, events[e].clone()),
                            _ => events.reverse(),
                        }
                    }
                }
            }
            8 => {
                if !plane.lines.is_empty() {
                    let l = rng.below(plane.lines.len());
                    if rng.below(2) == 0 {
                        plane.lines.remove(l);
                    } else {
                        let line = plane.lines[l].clone();
                        plane.lines.push(line);
                    }
                }
            }
            _ => {
                if rng.below(2) == 0 {
                    space.planes.remove(p);
                } else {
                    let plane = space.planes[p].clone();
                    space.planes.push(plane);
                }
            }
        }
    }
}

fn pick_event<'a>(rng: &mut Rng, plane: &'a mut XPlane) -> Option<&'a mut XEvent> {
    let lines: Vec<usize> = (0..plane.lines.len()).filter(|&l| !plane.lines[l].events.is_empty()).collect();
    let l = *lines.get(rng.below(lines.len().max(1)))?;
    let events = &mut plane.lines[l].events;
    let e = rng.below(events.len());
    Some(&mut events[e])
}

/// A stat of an event, of the plane, or of an event's metadata.
fn pick_stat<'a>(rng: &mut Rng, plane: &'a mut XPlane) -> Option<&'a mut XStat> {
    let stats = match rng.below(3) {
        0 => &mut pick_event(rng, plane)?.stats,
        1 => &mut plane.stats,
        _ => {
            let with: Vec<i64> =
                plane.event_metadata.iter().filter(|(_, m)| !m.stats.is_empty()).map(|(&k, _)| k).collect();
            let k = *with.get(rng.below(with.len().max(1)))?;
            &mut plane.event_metadata.get_mut(&k)?.stats
        }
    };
    let s = rng.below(stats.len().max(1));
    stats.get_mut(s)
}

fn hostile_i64(rng: &mut Rng, old: i64) -> i64 {
    match rng.below(9) {
        0 => 0,
        1 => -1,
        2 => 1,
        3 => i64::MAX,
        4 => i64::MIN,
        5 => old.wrapping_neg(),
        6 => old.saturating_mul(1_000_000),
        7 => old / (1 + rng.below(1000) as i64),
        _ => rng.next_u64() as i64,
    }
}

fn hostile_id(rng: &mut Rng, ids: &[i64]) -> i64 {
    match rng.below(4) {
        0 if !ids.is_empty() => ids[rng.below(ids.len())],
        1 => 0,
        2 => -1,
        _ => rng.next_u64() as i64,
    }
}

fn hostile_value(rng: &mut Rng, ids: &[i64]) -> x_stat::Value {
    use x_stat::Value;
    match rng.below(7) {
        0 => Value::DoubleValue([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, -1.0, 1e308, 5e-324][rng.below(7)]),
        1 => Value::Uint64Value([0, 1, u64::MAX, u64::MAX / 2, rng.next_u64()][rng.below(5)]),
        2 => Value::Int64Value(hostile_i64(rng, 1)),
        3 => Value::StrValue(hostile_string(rng, &[])),
        4 => {
            let mut b = Vec::new();
            mutate(rng, &mut b);
            Value::BytesValue(b.into())
        }
        5 => Value::RefValue(hostile_id(rng, ids) as u64),
        _ => Value::StrValue(String::new()),
    }
}

/// A name: another name of the plane, or one with control characters, markup or odd Unicode.
fn hostile_string(rng: &mut Rng, names: &[String]) -> String {
    const PIECES: [&str; 16] = [
        "\t", "\r", "\n", "\x1b[31m", "\0", "\u{7f}", "\u{85}", "\u{202e}", "<script>", "\"", "&", "%s{}", "é", "🙂",
        "fusion.1", "",
    ];
    if !names.is_empty() && rng.below(3) == 0 {
        return names[rng.below(names.len())].clone();
    }
    let mut s = String::new();
    for _ in 0..1 + rng.below(4) {
        s.push_str(PIECES[rng.below(PIECES.len())]);
        if rng.below(4) == 0 {
            s.push_str(&"x".repeat(rng.below(300)));
        }
    }
    s
}
