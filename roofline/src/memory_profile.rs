//! The runtime memory profile of one host: what XProf's `memory_profile` tool computes from the
//! allocator events the runtime records (xprof/convert/xplane_to_memory_profile.cc, facts §6.1),
//! and what its CLI's `get_memory_profile` prints of it.
//!
//! The input is the `/host:CPU` plane's `MemoryAllocation` and `MemoryDeallocation` events
//! (TraceMes of the BFC allocators of TensorFlow and PJRT, and of the TPU runtime). Each is one
//! snapshot of an allocator, keyed by its memory id: the `allocator_name` stat, or the
//! `index_on_host` / `device_ordinal` integer in decimal, the last of them in the event's stat
//! order winning (an event with none counts under the empty id). A snapshot carries the
//! allocator's stack reservation (`bytes_reserved`), heap allocation (`bytes_allocated`), free
//! memory (`bytes_available`), fragmentation and lifetime peak (`peak_bytes_in_use`).
//!
//! **Peak.** Snapshots are read in file order (lines, then events in each line: before XProf
//! sorts them by time). In use is stack + heap; the peak is the *latest* snapshot whose in-use is
//! at least the running peak (which starts at 0), and the allocator's figures at the peak are
//! that snapshot's: heap, stack, free memory and fragmentation; its capacity is in use + free
//! there. The lifetime peak is the `peak_bytes_in_use` of the allocator's last snapshot.
//!
//! **Fragmentation is not computed by XProf.** It is the `fragmentation` stat of the peak
//! snapshot, as the allocator computed it when it recorded the event; the BFC allocator's is
//! `1 - largest free chunk / free bytes` over its allocated regions (so it can be `NaN` when
//! nothing is free). Neither XProf nor xlens can recompute it: the events do not list the free
//! chunks.
//!
//! **Where xlens reads more than XProf.** XProf reads integer stats from `int64_value` only and
//! the fragmentation from `double_value` only (a `uint64` byte count reads 0, an integer
//! fragmentation 0); xlens takes an unsigned integer that fits and an integer fragmentation as
//! their values. The TraceMe encoding writes every integer that fits `int64` as `int64` and the
//! fragmentation as a double (or the integer 0), so real captures read the same.

use std::collections::BTreeMap;

use xlens_xplane::names::{event, stat};
use xlens_xplane::{Plane, Space, StatMetadataId, StatValue};

/// The most memory ids kept per host; the events of further ids are counted in
/// [`MemoryProfile::events_beyond_limit`], not read. Real captures have one id per device and a
/// few host allocators.
pub const MAX_MEMORY_IDS: usize = 4096;

/// An allocator's figures at one snapshot (one allocation or deallocation event).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct AllocatorSnapshot {
    /// Stack reservation (`bytes_reserved`; the TPU runtime's program stack), bytes.
    pub stack_reserved_bytes: i64,
    /// Heap allocation (`bytes_allocated`), bytes.
    pub heap_allocated_bytes: i64,
    /// Free memory (`bytes_available`), bytes.
    pub free_memory_bytes: i64,
    /// Fragmentation as the allocator reported it, a fraction (`NaN` when the allocator wrote it).
    pub fragmentation: f64,
    /// The allocator's peak over its lifetime as the event carries it (`peak_bytes_in_use`).
    pub peak_bytes_in_use: i64,
}

impl AllocatorSnapshot {
    /// Memory in use: stack reservation plus heap allocation.
    pub fn in_use_bytes(&self) -> i64 {
        self.stack_reserved_bytes.saturating_add(self.heap_allocated_bytes)
    }

    /// Capacity as XProf counts it: in use plus free memory.
    pub fn capacity_bytes(&self) -> i64 {
        self.in_use_bytes().saturating_add(self.free_memory_bytes)
    }
}

/// One allocator's memory profile (XProf's `PerAllocatorMemoryProfile.profile_summary`).
#[derive(Clone, Debug, PartialEq)]
pub struct AllocatorProfile {
    /// Its memory id (XProf's `memory_ids` entry).
    pub memory_id: String,
    /// The snapshot at the peak; `None` when no snapshot reached the starting peak of 0 bytes
    /// (in use negative in every event).
    pub peak: Option<AllocatorSnapshot>,
    /// When the peak snapshot's event starts, relative to its line's timestamp (XProf's
    /// `peak_stats_time_ps`), ps.
    pub peak_time_offset_ps: i64,
    /// The `peak_bytes_in_use` of the allocator's last event (XProf's
    /// `peak_bytes_usage_lifetime`), bytes.
    pub peak_bytes_lifetime: i64,
    /// Its `MemoryAllocation` events.
    pub allocations: u64,
    /// Its `MemoryDeallocation` events.
    pub deallocations: u64,
}

impl AllocatorProfile {
    /// Memory in use at the peak (XProf's `peak_stats.peak_bytes_in_use`), 0 without a peak.
    pub fn peak_in_use_bytes(&self) -> i64 {
        self.peak.map_or(0, |p| p.in_use_bytes())
    }

    /// Capacity at the peak (XProf's `memory_capacity`), 0 without a peak.
    pub fn capacity_bytes(&self) -> i64 {
        self.peak.map_or(0, |p| p.capacity_bytes())
    }
}

/// Why a host has no memory profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoMemoryProfile {
    /// The space has no `/host:CPU` plane.
    NoHostPlane,
    /// The host plane has no allocator event: the runtime recorded no allocator activity (JAX on
    /// CPU records none; GPU and TPU runtimes do when the profiler traces the host).
    NoAllocatorEvents,
    /// Every allocator's peak is 0 bytes (XProf's `get_memory_profile` prints -1 then).
    NothingInUse,
}

impl std::fmt::Display for NoMemoryProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoMemoryProfile::NoHostPlane => "the profile has no /host:CPU plane, where allocator events are recorded",
            NoMemoryProfile::NoAllocatorEvents => {
                "no MemoryAllocation or MemoryDeallocation event on /host:CPU: the runtime recorded no allocator activity"
            }
            NoMemoryProfile::NothingInUse => "every allocator's peak is 0 bytes in use",
        })
    }
}

/// A host's runtime memory profile: every allocator's, by memory id.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MemoryProfile {
    /// Whether the space has a `/host:CPU` plane.
    pub host_plane: bool,
    /// The allocators, by memory id (byte order, as XProf sorts its `memory_ids`).
    pub allocators: Vec<AllocatorProfile>,
    /// Events of memory ids beyond [`MAX_MEMORY_IDS`], not read.
    pub events_beyond_limit: u64,
}

impl MemoryProfile {
    /// The allocator `get_memory_profile` reports: the one with the largest peak in use (of equal
    /// peaks, the first memory id; XProf takes the first in its hash map's order, which no
    /// caller can predict); `None` when the host has no memory profile
    /// ([`MemoryProfile::absence`]).
    pub fn peak_allocator(&self) -> Option<&AllocatorProfile> {
        if self.absence().is_some() {
            return None;
        }
        let mut best: Option<&AllocatorProfile> = None;
        for a in &self.allocators {
            if best.is_none_or(|b| a.peak_in_use_bytes() > b.peak_in_use_bytes()) {
                best = Some(a);
            }
        }
        best
    }

    /// The largest capacity of any allocator: what `get_memory_profile` prints as the memory
    /// capacity, whichever allocator it is (on a GPU host, the host allocator's when it is larger
    /// than the device's); `None` without a memory profile.
    pub fn largest_capacity_bytes(&self) -> Option<i64> {
        if self.absence().is_some() {
            return None;
        }
        self.allocators.iter().map(AllocatorProfile::capacity_bytes).max()
    }

    /// Why the host has no memory profile, or `None` when it has one.
    pub fn absence(&self) -> Option<NoMemoryProfile> {
        if !self.host_plane {
            Some(NoMemoryProfile::NoHostPlane)
        } else if self.allocators.is_empty() {
            Some(NoMemoryProfile::NoAllocatorEvents)
        } else if self.allocators.iter().all(|a| a.peak_in_use_bytes() <= 0) {
            Some(NoMemoryProfile::NothingInUse)
        } else {
            None
        }
    }
}

/// The stat ids of the host plane that a snapshot reads.
struct StatIds {
    allocator_name: Option<StatMetadataId>,
    index_on_host: Option<StatMetadataId>,
    device_ordinal: Option<StatMetadataId>,
    bytes_reserved: Option<StatMetadataId>,
    bytes_allocated: Option<StatMetadataId>,
    bytes_available: Option<StatMetadataId>,
    fragmentation: Option<StatMetadataId>,
    peak_bytes_in_use: Option<StatMetadataId>,
}

impl StatIds {
    fn of(plane: &Plane) -> StatIds {
        StatIds {
            allocator_name: plane.stat_id(stat::ALLOCATOR_NAME),
            index_on_host: plane.stat_id(stat::INDEX_ON_HOST),
            device_ordinal: plane.stat_id(stat::DEVICE_ORDINAL),
            bytes_reserved: plane.stat_id(stat::BYTES_RESERVED),
            bytes_allocated: plane.stat_id(stat::BYTES_ALLOCATED),
            bytes_available: plane.stat_id(stat::BYTES_AVAILABLE),
            fragmentation: plane.stat_id(stat::FRAGMENTATION),
            peak_bytes_in_use: plane.stat_id(stat::PEAK_BYTES_IN_USE),
        }
    }
}

/// An integer stat's value (0 for any other type, as XProf reads it).
fn int(v: &StatValue<'_>) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The runtime memory profile of `space` (XProf's `memory_profile` tool and `get_memory_profile`).
///
/// ```
/// use xlens_roofline::memory_profile::{NoMemoryProfile, memory_profile};
/// use xlens_xplane::{Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut p = b.plane(1, "/host:CPU");
///     let alloc = p.event_metadata("MemoryAllocation");
///     let name = p.stat_metadata("allocator_name");
///     let heap = p.stat_metadata("bytes_allocated");
///     let free = p.stat_metadata("bytes_available");
///     let frag = p.stat_metadata("fragmentation");
///     let mut t = p.line(3, "allocator", 0);
///     for (at, used, f) in [(0, 300i64, 0.0), (10, 500, 0.25), (20, 400, 0.5)] {
///         t.event(alloc, at, 1).stat(name, "GPU_0_bfc").stat(heap, used).stat(free, 1000 - used).stat(frag, f);
///     }
/// }
/// let profile = memory_profile(&Space::parse(b.finish().into())?)?;
/// let gpu = profile.peak_allocator().unwrap();
/// assert_eq!((gpu.memory_id.as_str(), gpu.peak_in_use_bytes(), gpu.capacity_bytes()), ("GPU_0_bfc", 500, 1000));
/// // The fragmentation is the allocator's own figure at the peak snapshot.
/// assert_eq!(gpu.peak.unwrap().fragmentation, 0.25);
/// // A space without the host plane has no memory profile, and says why.
/// let mut b = SpaceBuilder::default();
/// b.plane(2, "/device:TPU:0");
/// let none = memory_profile(&Space::parse(b.finish().into())?)?;
/// assert_eq!(none.absence(), Some(NoMemoryProfile::NoHostPlane));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn memory_profile(space: &Space) -> xlens_xplane::Result<MemoryProfile> {
    let Some(plane) = space.host_threads() else { return Ok(MemoryProfile::default()) };
    let mut profile = MemoryProfile { host_plane: true, ..MemoryProfile::default() };
    let mask = plane.metadata_mask(|m| m.name() == event::MEMORY_ALLOCATION || m.name() == event::MEMORY_DEALLOCATION);
    if mask.is_empty() {
        return Ok(profile);
    }
    let ids = StatIds::of(plane);
    let mut by_id: BTreeMap<String, AllocatorProfile> = BTreeMap::new();
    for line in plane.lines().iter().filter(|l| plane.line_may_use(l, &mask)) {
        for ev in line.events(plane) {
            let ev = ev?;
            if !mask.contains(&ev) {
                continue;
            }
            let allocation = ev.name() == event::MEMORY_ALLOCATION;
            let mut memory_id = String::new();
            let mut snap = AllocatorSnapshot::default();
            for s in ev.stats().map_while(Result::ok) {
                let id = Some(s.metadata_id());
                let v = s.value();
                if id == ids.allocator_name {
                    memory_id = v.as_str().unwrap_or("").to_owned();
                } else if id == ids.index_on_host || id == ids.device_ordinal {
                    memory_id = int(&v).to_string();
                } else if id == ids.bytes_reserved {
                    snap.stack_reserved_bytes = int(&v);
                } else if id == ids.bytes_allocated {
                    snap.heap_allocated_bytes = int(&v);
                } else if id == ids.bytes_available {
                    snap.free_memory_bytes = int(&v);
                } else if id == ids.fragmentation {
                    snap.fragmentation = v.as_f64().unwrap_or(0.0);
                } else if id == ids.peak_bytes_in_use {
                    snap.peak_bytes_in_use = int(&v);
                }
            }
            if !by_id.contains_key(&memory_id) && by_id.len() >= MAX_MEMORY_IDS {
                profile.events_beyond_limit += 1;
                continue;
            }
            let a = by_id.entry(memory_id).or_insert_with_key(|id| AllocatorProfile {
                memory_id: id.clone(),
                peak: None,
                peak_time_offset_ps: 0,
                peak_bytes_lifetime: 0,
                allocations: 0,
                deallocations: 0,
            });
            if allocation {
                a.allocations += 1;
            } else {
                a.deallocations += 1;
            }
            a.peak_bytes_lifetime = snap.peak_bytes_in_use;
            if snap.in_use_bytes() >= a.peak_in_use_bytes() {
                a.peak = Some(snap);
                a.peak_time_offset_ps = ev.offset_ps();
            }
        }
    }
    profile.allocators = by_id.into_values().collect();
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::SpaceBuilder;

    /// A space whose host plane has one line of allocator events: (name, stats as
    /// (stat name, value)).
    fn space(events: &[(&str, &[(&str, xlens_xplane::BuildValue<'_>)])]) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut p = b.plane(1, "/host:CPU");
            let metas: Vec<_> = events.iter().map(|(n, _)| p.event_metadata(n)).collect();
            let stats: Vec<Vec<_>> =
                events.iter().map(|(_, s)| s.iter().map(|(n, _)| p.stat_metadata(n)).collect()).collect();
            let mut t = p.line(2, "allocator", 0);
            for (i, (_, s)) in events.iter().enumerate() {
                let mut e = t.event(metas[i], 10 * i as i64, 1);
                for (j, (_, v)) in s.iter().enumerate() {
                    e = e.stat(stats[i][j], *v);
                }
            }
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn the_peak_is_the_latest_snapshot_at_the_running_peak() {
        use xlens_xplane::BuildValue::{Double, Int, Str};
        let ev = |heap: i64, frag: f64, lifetime: i64| {
            vec![
                ("allocator_name", Str("a")),
                ("bytes_allocated", Int(heap)),
                ("bytes_available", Int(100 - heap)),
                ("fragmentation", Double(frag)),
                ("peak_bytes_in_use", Int(lifetime)),
            ]
        };
        let (e1, e2, e3, e4) = (ev(50, 0.1, 50), ev(70, 0.2, 70), ev(70, 0.3, 70), ev(20, 0.9, 70));
        let s = space(&[
            ("MemoryAllocation", &e1),
            ("MemoryAllocation", &e2),
            ("MemoryAllocation", &e3),
            ("MemoryDeallocation", &e4),
        ]);
        let p = memory_profile(&s).unwrap();
        let a = &p.allocators[0];
        // The second of two equal peaks wins, and its fragmentation with it.
        assert_eq!(a.peak_in_use_bytes(), 70);
        assert_eq!(a.peak.unwrap().fragmentation, 0.3);
        assert_eq!(a.peak_time_offset_ps, 20);
        assert_eq!(a.capacity_bytes(), 100);
        assert_eq!((a.allocations, a.deallocations, a.peak_bytes_lifetime), (3, 1, 70));
    }

    #[test]
    fn the_last_id_stat_names_the_allocator_and_ties_go_to_the_first_id() {
        use xlens_xplane::BuildValue::{Int, Str};
        let e1: &[(&str, xlens_xplane::BuildValue<'_>)] =
            &[("allocator_name", Str("z")), ("device_ordinal", Int(3)), ("bytes_allocated", Int(8))];
        let e2: &[(&str, xlens_xplane::BuildValue<'_>)] = &[("allocator_name", Str("b")), ("bytes_allocated", Int(8))];
        let e3: &[(&str, xlens_xplane::BuildValue<'_>)] = &[("bytes_reserved", Int(1))];
        let p = memory_profile(&space(&[("MemoryAllocation", e1), ("MemoryAllocation", e2), ("MemoryAllocation", e3)]))
            .unwrap();
        let ids: Vec<&str> = p.allocators.iter().map(|a| a.memory_id.as_str()).collect();
        assert_eq!(ids, ["", "3", "b"]);
        assert_eq!(p.peak_allocator().unwrap().memory_id, "3");
    }

    #[test]
    fn a_host_without_allocator_events_says_why() {
        use xlens_xplane::BuildValue::Int;
        let none = memory_profile(&space(&[("other", &[("bytes_allocated", Int(5))])])).unwrap();
        assert_eq!(none.absence(), Some(NoMemoryProfile::NoAllocatorEvents));
        assert!(none.peak_allocator().is_none());
        let zero = memory_profile(&space(&[("MemoryAllocation", &[("bytes_allocated", Int(0))])])).unwrap();
        assert_eq!(zero.absence(), Some(NoMemoryProfile::NothingInUse));
    }
}
