//! Removes named stats and lines from a serialized XSpace, every other byte kept: a real capture
//! made to look as it would without some post-processing. For tests of captures that lack what
//! the real one carries (a TensorFlow GPU capture without its `group_id` stats and `Steps`
//! lines, as TensorFlow 2.21 writes it).
//!
//! ```
//! use xlens_testkit::strip::{Strip, strip};
//! use xlens_xplane::{Space, SpaceBuilder};
//! let mut b = SpaceBuilder::default();
//! {
//!     let mut gpu = b.plane(1, "/device:GPU:0");
//!     let gid = gpu.stat_metadata("group_id");
//!     let kernel = gpu.event_metadata("gemm");
//!     gpu.line(1, "Stream #1(Compute)", 0).event(kernel, 0, 10).stat(gid, 3i64);
//!     gpu.line(2, "Steps", 0).event(kernel, 0, 10);
//! }
//! let stripped = strip(&b.finish(), &Strip { stats: &["group_id"], lines: &["Steps"], add: &[] }).unwrap();
//! let space = Space::parse(stripped.into()).unwrap();
//! let plane = &space.planes()[0];
//! assert!(plane.stat_id("group_id").is_none());
//! assert_eq!(plane.lines().len(), 1);
//! assert!(!plane.lines()[0].events(plane).next().unwrap().unwrap().has_stats());
//! ```

use std::collections::{HashMap, HashSet};

use xlens_xplane::wire::{Reader, WireError, WireType};

/// What to remove (and the one kind of stat to add).
#[derive(Clone, Copy, Debug, Default)]
pub struct Strip<'a> {
    /// Stat names: their stat metadata entries, and every stat that refers to them (plane,
    /// event and event metadata stats).
    pub stats: &'a [&'a str],
    /// Line names: the lines and their events.
    pub lines: &'a [&'a str],
    /// (event name, stat name, value): an integer stat added to every event of that name that
    /// lacks it, on every plane (a new stat metadata entry where the plane has none by that
    /// name). For the stats a newer writer adds, such as TensorFlow's `_r` root level.
    pub add: &'a [(&'a str, &'a str, i64)],
}

/// `bytes` (an XSpace) less what `what` names.
pub fn strip(bytes: &[u8], what: &Strip<'_>) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut r = Reader::new(bytes);
    while !r.is_empty() {
        let start = r.pos();
        let (number, wire) = r.read_tag()?;
        if number == 1 && wire == WireType::Len {
            let plane = r.read_len()?;
            put_len(&mut out, 1, &strip_plane(plane, what)?);
        } else {
            r.skip(wire)?;
            out.extend_from_slice(&bytes[start..r.pos()]);
        }
    }
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_len(out: &mut Vec<u8>, number: u32, body: &[u8]) {
    put_varint(out, (u64::from(number) << 3) | 2);
    put_varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// The first varint field `number` and the first length field `len_number` of a message.
fn fields(msg: &[u8], number: u32, len_number: u32) -> Result<(Option<u64>, Option<&[u8]>), WireError> {
    let (mut v, mut l) = (None, None);
    let mut r = Reader::new(msg);
    while !r.is_empty() {
        let (n, wire) = r.read_tag()?;
        match wire {
            WireType::Varint if n == number && v.is_none() => v = Some(r.read_varint()?),
            WireType::Len if n == len_number && l.is_none() => l = Some(r.read_len()?),
            _ => r.skip(wire)?,
        }
    }
    Ok((v, l))
}

/// Copies a message, each length field passed through `each` (given its number and body; dropped on `None`).
fn filter<'m>(
    msg: &'m [u8],
    mut each: impl FnMut(u32, &'m [u8]) -> Result<Option<Vec<u8>>, WireError>,
) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(msg.len());
    let mut r = Reader::new(msg);
    while !r.is_empty() {
        let start = r.pos();
        let (n, wire) = r.read_tag()?;
        if wire == WireType::Len {
            let body = r.read_len()?;
            match each(n, body)? {
                Some(b) if b.as_slice() == body => out.extend_from_slice(&msg[start..r.pos()]),
                Some(b) => put_len(&mut out, n, &b),
                None => {}
            }
        } else {
            r.skip(wire)?;
            out.extend_from_slice(&msg[start..r.pos()]);
        }
    }
    Ok(out)
}

/// A stat (`XStat`) kept unless its metadata id is dropped.
fn keep_stat(stat: &[u8], dropped: &HashSet<u64>) -> Result<Option<Vec<u8>>, WireError> {
    let (id, _) = fields(stat, 1, 0)?;
    Ok((!dropped.contains(&id.unwrap_or(0))).then(|| stat.to_vec()))
}

fn strip_plane(plane: &[u8], what: &Strip<'_>) -> Result<Vec<u8>, WireError> {
    // The stat metadata ids to drop (map entries: key 1, value 2 = XStatMetadata{id 1, name 2}),
    // the stat ids by name, and the event metadata ids by name (value XEventMetadata{name 2}).
    let mut dropped = HashSet::new();
    let mut stat_ids: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut event_ids: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut r = Reader::new(plane);
    while !r.is_empty() {
        let (n, wire) = r.read_tag()?;
        if (n == 4 || n == 5) && wire == WireType::Len {
            let (key, value) = fields(r.read_len()?, 1, 2)?;
            let name = match value {
                Some(v) => fields(v, 0, 2)?.1.unwrap_or_default(),
                None => &[],
            };
            if n == 4 {
                event_ids.insert(key.unwrap_or(0), name.to_vec());
                continue;
            }
            stat_ids.insert(name.to_vec(), key.unwrap_or(0));
            if what.stats.iter().any(|s| s.as_bytes() == name) {
                dropped.insert(key.unwrap_or(0));
            }
        } else {
            r.skip(wire)?;
        }
    }
    // The stats to add: per event metadata id, (stat id, value); new stat metadata entries.
    let mut next_id = stat_ids.values().copied().max().unwrap_or(0) + 1;
    let mut new_entries = Vec::new();
    let mut adds: HashMap<u64, Vec<(u64, i64)>> = HashMap::new();
    for &(event, stat, value) in what.add {
        let targets: Vec<u64> =
            event_ids.iter().filter(|(_, name)| name.as_slice() == event.as_bytes()).map(|(&id, _)| id).collect();
        if targets.is_empty() {
            continue;
        }
        let id = match stat_ids.get(stat.as_bytes()) {
            Some(&id) => id,
            None => {
                let id = next_id;
                next_id += 1;
                stat_ids.insert(stat.as_bytes().to_vec(), id);
                let mut meta = Vec::new();
                put_varint(&mut meta, 1 << 3);
                put_varint(&mut meta, id);
                put_len(&mut meta, 2, stat.as_bytes());
                let mut entry = Vec::new();
                put_varint(&mut entry, 1 << 3);
                put_varint(&mut entry, id);
                put_len(&mut entry, 2, &meta);
                new_entries.push(entry);
                id
            }
        };
        for t in targets {
            adds.entry(t).or_default().push((id, value));
        }
    }
    let mut out = filter(plane, |n, body| match n {
        // Lines: dropped by name, else their events' stats filtered.
        3 => {
            let (_, name) = fields(body, 0, 2)?;
            if what.lines.iter().any(|l| Some(l.as_bytes()) == name) {
                return Ok(None);
            }
            filter(body, |n, event| match n {
                4 => {
                    let mut kept =
                        filter(
                            event,
                            |n, stat| if n == 4 { keep_stat(stat, &dropped) } else { Ok(Some(stat.to_vec())) },
                        )?;
                    let (metadata, _) = fields(event, 1, 0)?;
                    for &(id, value) in adds.get(&metadata.unwrap_or(0)).map_or(&[][..], Vec::as_slice) {
                        if !has_stat(&kept, id)? {
                            let mut stat = Vec::new();
                            put_varint(&mut stat, 1 << 3);
                            put_varint(&mut stat, id);
                            put_varint(&mut stat, 4 << 3);
                            put_varint(&mut stat, value as u64);
                            put_len(&mut kept, 4, &stat);
                        }
                    }
                    Ok(Some(kept))
                }
                _ => Ok(Some(event.to_vec())),
            })
            .map(Some)
        }
        // Event metadata entries: their value's stats (field 5) filtered.
        4 => filter(body, |n, value| match n {
            2 => filter(value, |n, stat| if n == 5 { keep_stat(stat, &dropped) } else { Ok(Some(stat.to_vec())) })
                .map(Some),
            _ => Ok(Some(value.to_vec())),
        })
        .map(Some),
        // Stat metadata entries of dropped stats.
        5 => {
            let (key, _) = fields(body, 1, 0)?;
            Ok((!dropped.contains(&key.unwrap_or(0))).then(|| body.to_vec()))
        }
        6 => keep_stat(body, &dropped),
        _ => Ok(Some(body.to_vec())),
    })?;
    for entry in new_entries {
        put_len(&mut out, 5, &entry);
    }
    Ok(out)
}

/// True when an event (`XEvent`) has a stat (field 4) with metadata id `id`.
fn has_stat(event: &[u8], id: u64) -> Result<bool, WireError> {
    let mut r = Reader::new(event);
    while !r.is_empty() {
        let (n, wire) = r.read_tag()?;
        if n == 4 && wire == WireType::Len {
            if fields(r.read_len()?, 1, 0)?.0 == Some(id) {
                return Ok(true);
            }
        } else {
            r.skip(wire)?;
        }
    }
    Ok(false)
}
