//! Reading device planes: op events with their device timespans, op metadata, and nesting.
//!
//! Shared by the op profile, the step analysis and the step anatomy so that every analysis
//! reads a TPU op the same way XProf does (facts §1.1 "Device time override", §4.1).

use std::collections::HashMap;

use xlens_xplane::wire::{Reader, WireType};
use xlens_xplane::{Event, EventMetadataId, Picos, Plane, Stat, StatMetadataId, names};

/// Stat ids of one device plane, resolved once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceStatIds {
    pub(crate) device_offset_ps: Option<StatMetadataId>,
    pub(crate) device_duration_ps: Option<StatMetadataId>,
    pub(crate) time_scale_multiplier: Option<StatMetadataId>,
    pub(crate) program_id: Option<StatMetadataId>,
    pub(crate) symbol_id: Option<StatMetadataId>,
    pub(crate) hlo_category: Option<StatMetadataId>,
    pub(crate) flops: Option<StatMetadataId>,
    pub(crate) model_flops: Option<StatMetadataId>,
    pub(crate) bytes_accessed: Option<StatMetadataId>,
    pub(crate) memory_access_breakdown: Option<StatMetadataId>,
    pub(crate) source: Option<StatMetadataId>,
    pub(crate) tf_op: Option<StatMetadataId>,
    pub(crate) deduplicated_name: Option<StatMetadataId>,
}

impl DeviceStatIds {
    pub(crate) fn of(plane: &Plane) -> Self {
        use names::stat as s;
        DeviceStatIds {
            device_offset_ps: plane.stat_id(s::DEVICE_OFFSET_PS),
            device_duration_ps: plane.stat_id(s::DEVICE_DURATION_PS),
            time_scale_multiplier: plane.stat_id(s::TIME_SCALE_MULTIPLIER),
            program_id: plane.stat_id(s::PROGRAM_ID),
            symbol_id: plane.stat_id(s::SYMBOL_ID),
            hlo_category: plane.stat_id(s::HLO_CATEGORY),
            flops: plane.stat_id(s::FLOPS),
            model_flops: plane.stat_id(s::MODEL_FLOPS),
            bytes_accessed: plane.stat_id(s::BYTES_ACCESSED),
            memory_access_breakdown: plane.stat_id(s::MEMORY_ACCESS_BREAKDOWN),
            source: plane.stat_id(s::SOURCE),
            tf_op: plane.stat_id(s::TF_OP),
            deduplicated_name: plane.stat_id(s::DEDUPLICATED_NAME),
        }
    }
}

/// An event's device timespan: `device_offset_ps` / `device_duration_ps` when present (absolute),
/// else the event's own start and duration (XProf's `GetDeviceEventTimespan`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: Picos,
    pub(crate) duration: Picos,
}

impl Span {
    pub(crate) fn end(&self) -> Picos {
        self.start + self.duration
    }

    pub(crate) fn contains(&self, other: &Span) -> bool {
        self.start <= other.start && other.end() <= self.end()
    }
}

#[inline]
pub(crate) fn device_span(ev: &Event<'_>, ids: &DeviceStatIds) -> Span {
    let (start, duration) = device_timespan(ev, ids.device_offset_ps, ids.device_duration_ps);
    Span { start, duration }
}

/// An op event's start and duration on the device clock: the values of its `device_offset_ps`
/// and `device_duration_ps` stats (given by their ids in the plane) when it carries them, else
/// its own timing. The duration is as recorded.
#[inline]
pub fn device_timespan(
    ev: &Event<'_>,
    offset_id: Option<StatMetadataId>,
    duration_id: Option<StatMetadataId>,
) -> (Picos, Picos) {
    if !ev.has_stats() || (offset_id.is_none() && duration_id.is_none()) {
        return (ev.start(), ev.duration());
    }
    timespan_of_stats(ev, ev.stats().map_while(|s| s.ok()), offset_id, duration_id)
}

/// [`device_timespan`] from stats already at hand (those a walk gathered while decoding the
/// event): the last offset and duration stats win.
#[inline(always)]
pub(crate) fn timespan_of_stats<'a>(
    ev: &Event<'a>,
    stats: impl IntoIterator<Item = Stat<'a>>,
    offset_id: Option<StatMetadataId>,
    duration_id: Option<StatMetadataId>,
) -> (Picos, Picos) {
    let (mut start, mut duration) = (ev.start(), ev.duration());
    for stat in stats {
        let id = Some(stat.metadata_id());
        if id == offset_id {
            if let Some(v) = stat.as_i64() {
                start = Picos(v);
            }
        } else if id == duration_id
            && let Some(v) = stat.as_i64()
        {
            duration = Picos(v);
        }
    }
    (start, duration)
}

/// Per-occurrence facts of one op, read from its event metadata's stats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpMetadata {
    /// `program_id` metadata stat.
    pub program_id: Option<u64>,
    /// `symbol_id` metadata stat.
    pub symbol_id: Option<u64>,
    /// The op's short name (event metadata display name).
    pub name: String,
    /// The long name (HLO text).
    pub long_name: String,
    /// `hlo_category`.
    pub category: String,
    /// FLOPs per occurrence.
    pub flops: f64,
    /// Model FLOPs per occurrence (0 when absent).
    pub model_flops: f64,
    /// `bytes_accessed` per occurrence.
    pub bytes_accessed: f64,
    /// Bytes per occurrence split by memory: HBM (read + write), on-chip read, on-chip write.
    pub memory: MemoryBytes,
    /// `source` ("file:line").
    pub source: Option<String>,
    /// `tf_op` (framework op path).
    pub tf_op: Option<String>,
    /// `deduplicated_name`.
    pub deduplicated_name: Option<String>,
}

/// Bytes accessed, split by memory as XProf's op profile splits them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MemoryBytes {
    /// HBM reads and writes.
    pub hbm: f64,
    /// On-chip (CMEM/VMEM/SRAM) reads.
    pub onchip_read: f64,
    /// On-chip writes.
    pub onchip_write: f64,
    /// Bytes accessed beyond those placed in a memory space (a GPU DNN convolution's result,
    /// host memory on TPU): part of the total, and so of the operational intensity, but of no
    /// bandwidth. Negative where the memory-space breakdown counts more than the scalar figure
    /// (a GPU all-reduce's operands), so that the total stays XProf's bytes accessed.
    pub unattributed: f64,
}

impl MemoryBytes {
    /// All bytes.
    pub fn total(&self) -> f64 {
        self.hbm + self.onchip_read + self.onchip_write + self.unattributed
    }

    pub(crate) fn scaled(&self, k: f64) -> MemoryBytes {
        MemoryBytes {
            hbm: self.hbm * k,
            onchip_read: self.onchip_read * k,
            onchip_write: self.onchip_write * k,
            unattributed: self.unattributed * k,
        }
    }

    pub(crate) fn add(&mut self, other: &MemoryBytes) {
        self.hbm += other.hbm;
        self.onchip_read += other.onchip_read;
        self.onchip_write += other.onchip_write;
        self.unattributed += other.unattributed;
    }
}

/// Memory space ids in `memory_access_breakdown` (PerformanceInfo.MemoryAccessed.MemorySpace).
const MEMORY_SPACE_HBM: u64 = 1;
/// Operation types in `memory_access_breakdown`.
const OPERATION_WRITE: u64 = 2;

/// Parses a serialized `MemoryAccessBreakdown` (`{1: repeated {1 op type, 2 memory space, 3 bytes}}`).
/// Malformed bytes give `None`.
pub(crate) fn parse_memory_breakdown(bytes: &[u8]) -> Option<MemoryBytes> {
    let mut out = MemoryBytes::default();
    let mut outer = Reader::new(bytes);
    while !outer.is_empty() {
        let (field, wire) = outer.read_tag().ok()?;
        if field == 1 && wire == WireType::Len {
            let mut entry = Reader::new(outer.read_len().ok()?);
            let (mut kind, mut space, mut n) = (0u64, 0u64, 0u64);
            while !entry.is_empty() {
                match entry.read_tag().ok()? {
                    (1, WireType::Varint) => kind = entry.read_varint().ok()?,
                    (2, WireType::Varint) => space = entry.read_varint().ok()?,
                    (3, WireType::Varint) => n = entry.read_varint().ok()?,
                    (_, w) => entry.skip(w).ok()?,
                }
            }
            let n = n as f64;
            if space == MEMORY_SPACE_HBM {
                out.hbm += n;
            } else if kind == OPERATION_WRITE {
                out.onchip_write += n;
            } else {
                out.onchip_read += n;
            }
        } else {
            outer.skip(wire).ok()?;
        }
    }
    Some(out)
}

/// Reads the op facts of every event metadata of a plane that has them, keyed by metadata id.
pub(crate) fn op_metadata(plane: &Plane, ids: &DeviceStatIds) -> HashMap<EventMetadataId, OpMetadata> {
    let mut out = HashMap::new();
    for meta in plane.event_metadata() {
        let mut m = OpMetadata {
            name: meta.display_name().to_owned(),
            long_name: meta.name().to_owned(),
            ..OpMetadata::default()
        };
        let mut breakdown = None;
        let mut any = false;
        for stat in plane.metadata_stats(meta).map_while(|s| s.ok()) {
            let id = Some(stat.metadata_id());
            any = true;
            if id == ids.program_id {
                m.program_id = stat.as_u64();
            } else if id == ids.symbol_id {
                m.symbol_id = stat.as_u64();
            } else if id == ids.hlo_category {
                m.category = stat.as_str().map(|s| s.into_owned()).unwrap_or_default();
            } else if id == ids.flops {
                m.flops = stat.as_f64().unwrap_or(0.0);
            } else if id == ids.model_flops {
                m.model_flops = stat.as_f64().unwrap_or(0.0);
            } else if id == ids.bytes_accessed {
                m.bytes_accessed = stat.as_f64().unwrap_or(0.0);
            } else if id == ids.memory_access_breakdown {
                breakdown = stat.as_bytes().and_then(|payload| {
                    let parsed = parse_memory_breakdown(payload);
                    if parsed.is_none() {
                        // Its bytes then count as HBM: the report says the stat was not read.
                        plane.note_undecoded_payload(payload, "memory_access_breakdown is not a MemoryAccessBreakdown");
                    }
                    parsed
                });
            } else if id == ids.source {
                m.source = stat.as_str().map(|s| s.into_owned());
            } else if id == ids.tf_op {
                m.tf_op = stat.as_str().map(|s| s.into_owned());
            } else if id == ids.deduplicated_name {
                m.deduplicated_name = stat.as_str().map(|s| s.into_owned());
            }
        }
        if !any {
            continue;
        }
        // Without a breakdown every byte counts as HBM (facts §4.1 "Unit rates"). With one, the
        // bytes it does not place in a memory space (host memory, say) still count in the
        // operational intensity, which XProf takes over all bytes accessed.
        m.memory = match breakdown {
            Some(mut b) => {
                b.unattributed = (m.bytes_accessed - b.total()).max(0.0);
                b
            }
            None => MemoryBytes { hbm: m.bytes_accessed, ..MemoryBytes::default() },
        };
        out.insert(meta.id(), m);
    }
    out
}

/// One op execution with its device timespan and self time (time minus its direct children).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimedOp {
    pub(crate) metadata_id: EventMetadataId,
    pub(crate) span: Span,
    pub(crate) self_time: Picos,
    /// Nesting depth (0 = top level).
    pub(crate) depth: u32,
}

/// Sorts ops by start (longest first on ties) and subtracts each op's duration from its parent's
/// self time.
pub(crate) fn nest(ops: &mut [TimedOp]) {
    ops.sort_by(|a, b| a.span.start.cmp(&b.span.start).then(b.span.duration.cmp(&a.span.duration)));
    let mut stack: Vec<usize> = Vec::new();
    for i in 0..ops.len() {
        while let Some(&top) = stack.last() {
            if ops[top].span.contains(&ops[i].span) {
                break;
            }
            stack.pop();
        }
        if let Some(&parent) = stack.last() {
            let d = ops[i].span.duration;
            ops[parent].self_time = ops[parent].self_time.saturating_sub(d);
            ops[i].depth = ops[parent].depth + 1;
        }
        stack.push(i);
    }
}

/// The op facts of every event-metadata entry of a device plane, by position in
/// [`Plane::event_metadata`] (`None` for entries without op stats). Pairs with
/// [`crate::CoreTimeline::ops`].
pub fn op_metadata_by_position(plane: &Plane) -> Vec<Option<OpMetadata>> {
    let ids = DeviceStatIds::of(plane);
    let mut by_id = op_metadata(plane, &ids);
    plane.event_metadata().iter().map(|m| by_id.remove(&m.id())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start: i64, dur: i64) -> TimedOp {
        TimedOp {
            metadata_id: EventMetadataId(0),
            span: Span { start: Picos(start), duration: Picos(dur) },
            self_time: Picos(dur),
            depth: 0,
        }
    }

    #[test]
    fn nesting_subtracts_direct_children_only() {
        let mut ops = vec![op(10, 5), op(0, 100), op(12, 2), op(50, 10)];
        nest(&mut ops);
        let selfs: Vec<(i64, i64, u32)> = ops.iter().map(|o| (o.span.start.0, o.self_time.0, o.depth)).collect();
        // parent 0..100 has children 10..15 and 50..60; 12..14 is inside 10..15.
        assert_eq!(selfs, vec![(0, 85, 0), (10, 3, 1), (12, 2, 2), (50, 10, 1)]);
    }

    #[test]
    fn memory_breakdown_splits_hbm_and_onchip() {
        // {1: {1:1, 2:1, 3:100}}, {1: {1:2, 2:1, 3:50}}, {1: {1:1, 2:3, 3:7}}, {1: {1:2, 2:3, 3:9}}
        let entry = |k: u8, s: u8, n: u8| vec![0x0a, 6, 0x08, k, 0x10, s, 0x18, n];
        let bytes: Vec<u8> = [entry(1, 1, 100), entry(2, 1, 50), entry(1, 3, 7), entry(2, 3, 9)].concat();
        let m = parse_memory_breakdown(&bytes).unwrap();
        assert_eq!(m, MemoryBytes { hbm: 150.0, onchip_read: 7.0, onchip_write: 9.0, unattributed: 0.0 });
        assert_eq!(parse_memory_breakdown(&[0x0a, 0x09]), None);
    }

    /// A breakdown that does not decode counts its op's bytes as HBM, and the space's decode
    /// errors say so: the figures built on it are not vouched for.
    #[test]
    fn a_malformed_breakdown_is_a_decode_error() {
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/device:TPU:0");
            let (bytes, breakdown) =
                (plane.stat_metadata("bytes_accessed"), plane.stat_metadata("memory_access_breakdown"));
            let op = plane.event_metadata("fusion.1");
            plane.metadata_stat(op, bytes, 64u64);
            plane.metadata_stat(op, breakdown, &[0x0a, 0x09][..]);
        }
        let space = xlens_xplane::Space::parse(b.finish().into()).unwrap();
        let plane = &space.planes()[0];
        let ops = op_metadata(plane, &DeviceStatIds::of(plane));
        assert_eq!(ops.values().next().unwrap().memory.hbm, 64.0);
        let errors = space.decode_errors();
        assert_eq!(errors.errors.len(), 1, "{errors:?}");
        assert_eq!(errors.errors[0].what, xlens_xplane::Undecoded::StatPayload);
        assert!(errors.errors[0].to_string().contains("memory_access_breakdown"), "{}", errors.errors[0]);
    }
}
