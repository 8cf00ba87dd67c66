//! Static memory from the buffer assignment (`HloProto` field 3): what XProf's memory viewer
//! shows, following facts §6.2.
//!
//! Buffer allocations are grouped by color (0 = device memory, HBM on TPU). The heap-simulator
//! trace of a color is replayed over logical buffers: `ALLOC` adds a buffer, `SHARE_WITH` lets a
//! buffer reuse a canonical buffer's memory (adding it again only if that memory had been freed),
//! `FREE` drops a reference and releases the memory with the last one. The largest running total
//! is the heap peak. Allocations with an indefinite lifetime (entry parameters, possibly-live
//! outputs, constants, thread-local buffers) are outside the simulation and add to it.

use std::collections::BTreeMap;

// Keyed by XLA's ids and never iterated in an order that matters: foldhash, not SipHash.
use hashbrown::HashMap;

use crate::error::{Error, ErrorKind, Location, Result};
use crate::ids::InstrId;
use crate::memory_types::{AllocationRow, AllocationRowKind, MemoryStats, PeakAllocations, PeakBuffer};
use crate::module::Module;
use crate::raw;

fn indefinite(a: &raw::BufferAllocationProto) -> bool {
    a.is_thread_local || a.is_entry_computation_parameter || a.is_constant || a.maybe_live_out
}

fn bytes(v: i64) -> u64 {
    v.max(0) as u64
}

struct Buffer {
    size: u64,
    unpadded: u64,
    allocation: usize,
    color: i64,
    instruction: Option<InstrId>,
    shape_index: Vec<i64>,
    ref_count: i64,
    canonical: Option<i64>,
}

impl Module {
    /// Static memory of device memory (color 0); `Ok(None)` when the proto has no buffer
    /// assignment.
    ///
    /// Several detectors and the report ask for it: the first answer is kept (a failed replay
    /// is replayed again, and fails again, on each call).
    pub fn hbm_memory_stats(&self) -> Result<Option<MemoryStats>> {
        if let Some(stats) = self.hbm_stats.get() {
            return Ok(stats.clone());
        }
        let stats = self.memory_stats(0)?;
        Ok(self.hbm_stats.get_or_init(|| stats).clone())
    }

    /// Static memory of one color of the buffer assignment; `Ok(None)` when the proto has none.
    /// Fails when the heap-simulator trace cannot be replayed (a buffer freed more often than
    /// allocated).
    pub fn memory_stats(&self, color: i64) -> Result<Option<MemoryStats>> {
        let Some(ba) = self.buffer_assignment() else { return Ok(None) };
        let fail = |msg: String| Error::new(ErrorKind::HeapTrace(msg), Location::in_module(self.display_name()));
        let unique: HashMap<i64, InstrId> = self.instructions().iter().map(|i| (i.unique_id().0, i.id())).collect();
        let logical: HashMap<i64, &raw::LogicalBufferProto> = ba.logical_buffers.iter().map(|b| (b.id, b)).collect();

        // Logical buffers that are assigned to an allocation, as the memory viewer keys them. The
        // table is sized once: grown by doubling, its discarded tables would touch fresh pages
        // several times its size.
        let assigned = ba.buffer_allocations.iter().map(|a| a.assigned.len()).sum::<usize>();
        let mut buffers: HashMap<i64, Buffer> = HashMap::with_capacity(assigned.min(ba.logical_buffers.len()));
        for (ai, a) in ba.buffer_allocations.iter().enumerate() {
            for assigned in &a.assigned {
                let Some(lb) = logical.get(&assigned.logical_buffer_id) else { continue };
                let at = lb.defined_at.as_ref();
                let instruction = at.and_then(|d| unique.get(&d.instruction_id).copied());
                let shape_index = at.map(|d| d.shape_index.clone()).unwrap_or_default();
                let unpadded = instruction
                    .and_then(|i| self.instruction(i).shape().subshape(&shape_index))
                    .map_or(bytes(lb.size), |s| s.byte_size());
                buffers.insert(
                    lb.id,
                    Buffer {
                        size: bytes(lb.size),
                        unpadded,
                        allocation: ai,
                        color: lb.color,
                        instruction,
                        shape_index,
                        ref_count: 0,
                        canonical: None,
                    },
                );
            }
        }

        let mut stats = MemoryStats {
            color,
            heap_peak_bytes: 0,
            heap_peak_unpadded_bytes: 0,
            peak_position: 0,
            peak_buffers: Vec::new(),
            trace_events: 0,
            indefinite_bytes: 0,
            argument_bytes: 0,
            output_bytes: 0,
            alias_bytes: 0,
            temp_bytes: 0,
            constant_bytes: 0,
            thread_local_bytes: 0,
            total_allocation_bytes: 0,
        };
        for a in ba.buffer_allocations.iter().filter(|a| a.color == color) {
            let size = bytes(a.size);
            if a.is_thread_local {
                stats.thread_local_bytes = stats.thread_local_bytes.saturating_add(size);
            } else {
                stats.total_allocation_bytes = stats.total_allocation_bytes.saturating_add(size);
            }
            if indefinite(a) {
                stats.indefinite_bytes = stats.indefinite_bytes.saturating_add(size);
            }
            if a.is_entry_computation_parameter {
                stats.argument_bytes = stats.argument_bytes.saturating_add(size);
                if a.is_parameter_aliased_with_output {
                    stats.alias_bytes = stats.alias_bytes.saturating_add(size);
                }
            }
            if a.maybe_live_out {
                stats.output_bytes = stats.output_bytes.saturating_add(size);
            }
            if a.is_constant {
                stats.constant_bytes = stats.constant_bytes.saturating_add(size);
            }
            if !indefinite(a) {
                stats.temp_bytes = stats.temp_bytes.saturating_add(size);
            }
        }

        let Some(trace) = heap_trace(ba, &buffers, color) else { return Ok(Some(stats)) };
        stats.trace_events = trace.events.len();
        let first = replay(trace, &mut buffers, None).map_err(fail)?;
        if first.peak > 0 {
            stats.heap_peak_bytes = first.peak;
            stats.heap_peak_unpadded_bytes = first.peak_unpadded;
            stats.peak_position = first.position;
            // Replay again up to the peak to list the buffers live there (cheaper than copying
            // the live set at every new peak).
            for b in buffers.values_mut() {
                b.ref_count = 0;
                b.canonical = None;
            }
            let at_peak = replay(trace, &mut buffers, Some(first.position)).map_err(fail)?;
            stats.peak_buffers = at_peak
                .live
                .values()
                .filter_map(|id| {
                    let b = buffers.get(id)?;
                    Some(PeakBuffer {
                        logical_buffer_id: *id,
                        size: b.size,
                        unpadded_size: b.unpadded,
                        instruction: b.instruction,
                        shape_index: b.shape_index.clone(),
                    })
                })
                .collect();
        }
        Ok(Some(stats))
    }
}

/// The size from which XProf's `get_peak_allocations` lists a buffer on its own row.
const OWN_ROW_BYTES: u64 = 1 << 20;

impl Module {
    /// The device memory (color 0) of the program as XProf's `get_peak_allocations` lists it:
    /// the total of its allocations, and the buffers live at the heap peak with the
    /// indefinite-lifetime allocations (parameters, outputs, constants), each of those named
    /// after its largest logical buffer (the first of equal ones) and counted at its
    /// allocation's size. Rows are largest first; among equal sizes the indefinite
    /// allocations come first (in allocation order), then the heap's buffers (in the order
    /// they were allocated), as XProf orders them. `Ok(None)` without a buffer assignment.
    ///
    /// Every module of `testdata` with XProf's reference gives XProf's rows
    /// (`tests/xprof_memory.rs`).
    pub fn peak_allocations(&self) -> Result<Option<PeakAllocations>> {
        let (Some(stats), Some(ba)) = (self.hbm_memory_stats()?, self.buffer_assignment()) else { return Ok(None) };
        let logical: HashMap<i64, &raw::LogicalBufferProto> = ba.logical_buffers.iter().map(|b| (b.id, b)).collect();
        let unique: HashMap<i64, InstrId> = self.instructions().iter().map(|i| (i.unique_id().0, i.id())).collect();
        let name = |instruction: Option<InstrId>| {
            instruction.map_or_else(String::new, |i| self.instruction(i).name().to_owned())
        };
        // (instruction name, shape index, bytes), indefinite allocations first.
        let mut buffers: Vec<(String, Vec<i64>, u64)> = Vec::new();
        for a in ba.buffer_allocations.iter().filter(|a| a.color == 0 && !a.is_thread_local && indefinite(a)) {
            let mut largest: Option<&raw::LogicalBufferProto> = None;
            for lb in a.assigned.iter().filter_map(|x| logical.get(&x.logical_buffer_id)) {
                if largest.is_none_or(|b| lb.size > b.size) {
                    largest = Some(lb);
                }
            }
            let Some(lb) = largest else { continue };
            let at = lb.defined_at.as_ref();
            let instruction = at.and_then(|d| unique.get(&d.instruction_id).copied());
            buffers.push((name(instruction), at.map(|d| d.shape_index.clone()).unwrap_or_default(), bytes(a.size)));
        }
        for b in &stats.peak_buffers {
            buffers.push((name(b.instruction), b.shape_index.clone(), b.size));
        }
        let others: u64 = buffers.iter().filter(|b| b.2 < OWN_ROW_BYTES).fold(0, |s, b| s.saturating_add(b.2));
        let big: Vec<&(String, Vec<i64>, u64)> = buffers.iter().filter(|b| b.2 >= OWN_ROW_BYTES).collect();
        let stem = |b: &(String, Vec<i64>, u64)| -> Option<String> {
            let (p, d) = b.0.rsplit_once('.')?;
            (b.1.is_empty() && !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())).then(|| p.to_owned())
        };
        let mut rows = Vec::new();
        let mut taken = vec![false; big.len()];
        for i in 0..big.len() {
            if taken[i] {
                continue;
            }
            let key = stem(big[i]);
            let members: Vec<usize> = match &key {
                Some(k) => (i..big.len())
                    .filter(|&j| !taken[j] && big[j].2 == big[i].2 && stem(big[j]).as_ref() == Some(k))
                    .collect(),
                None => vec![i],
            };
            for &j in &members {
                taken[j] = true;
            }
            let each = big[i].2;
            rows.push(match key {
                Some(stem) if members.len() > 1 => AllocationRow {
                    bytes: each.saturating_mul(members.len() as u64),
                    kind: AllocationRowKind::Numbered { stem, count: members.len(), each_bytes: each },
                },
                _ => AllocationRow {
                    kind: AllocationRowKind::Buffer { instruction: big[i].0.clone(), shape_index: big[i].1.clone() },
                    bytes: each,
                },
            });
        }
        if others > 0 {
            rows.push(AllocationRow { kind: AllocationRowKind::Others { under_bytes: OWN_ROW_BYTES }, bytes: others });
        }
        // Stable: equal sizes keep the order above.
        rows.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        Ok(Some(PeakAllocations { total_bytes: stats.total_allocation_bytes, rows }))
    }
}

struct Replay {
    peak: u64,
    peak_unpadded: u64,
    position: usize,
    /// Live buffers by allocation sequence number.
    live: BTreeMap<u64, i64>,
}

struct Heap {
    bytes: i128,
    unpadded: i128,
    seq: u64,
    seq_of: HashMap<i64, u64>,
}

impl Heap {
    fn grow(&mut self, buffers: &HashMap<i64, Buffer>, id: i64, position: usize, out: &mut Replay) {
        let Some(b) = buffers.get(&id) else { return };
        self.bytes += i128::from(b.size);
        self.unpadded += i128::from(b.unpadded);
        self.seq += 1;
        out.live.insert(self.seq, id);
        self.seq_of.insert(id, self.seq);
        if self.bytes > i128::from(out.peak) {
            out.peak = u64::try_from(self.bytes).unwrap_or(u64::MAX);
            out.peak_unpadded = u64::try_from(self.unpadded).unwrap_or(0);
            out.position = position;
        }
    }
}

fn root(buffers: &HashMap<i64, Buffer>, mut id: i64) -> i64 {
    // Canonical chains are one or two links in real traces; the cap bounds hostile ones.
    for _ in 0..1024 {
        match buffers.get(&id).and_then(|b| b.canonical) {
            Some(next) => id = next,
            None => break,
        }
    }
    id
}

/// Replays a heap-simulator trace (through event `stop` inclusive, when given).
fn replay(
    trace: &raw::HeapSimulatorTrace,
    buffers: &mut HashMap<i64, Buffer>,
    stop: Option<usize>,
) -> std::result::Result<Replay, String> {
    let mut heap = Heap { bytes: 0, unpadded: 0, seq: 0, seq_of: HashMap::with_capacity(buffers.len()) };
    let mut out = Replay { peak: 0, peak_unpadded: 0, position: 0, live: BTreeMap::new() };
    for (position, event) in trace.events.iter().enumerate() {
        if stop.is_some_and(|s| position > s) {
            break;
        }
        if !buffers.contains_key(&event.buffer_id) {
            continue;
        }
        match event.kind {
            // ALLOC
            0 => {
                let r = root(buffers, event.buffer_id);
                if let Some(b) = buffers.get_mut(&r) {
                    b.ref_count += 1;
                }
                heap.grow(buffers, event.buffer_id, position, &mut out);
            }
            // FREE
            1 => {
                let r = root(buffers, event.buffer_id);
                let Some(b) = buffers.get_mut(&r) else { continue };
                b.ref_count -= 1;
                if b.ref_count < 0 {
                    return Err(format!("buffer {} is freed more often than allocated", event.buffer_id));
                }
                if b.ref_count == 0 {
                    heap.bytes -= i128::from(b.size);
                    heap.unpadded -= i128::from(b.unpadded);
                    // The memory was added under the freed id or under its canonical root.
                    for id in [r, event.buffer_id] {
                        if let Some(s) = heap.seq_of.remove(&id) {
                            out.live.remove(&s);
                            break;
                        }
                    }
                    if heap.bytes < 0 {
                        return Err(format!("heap size is negative after freeing buffer {r}"));
                    }
                }
            }
            // SHARE_WITH
            2 => {
                let canonical = event.share_with_canonical_id;
                if !buffers.contains_key(&canonical) || root(buffers, canonical) == event.buffer_id {
                    continue;
                }
                let r = root(buffers, canonical);
                if let Some(b) = buffers.get_mut(&event.buffer_id) {
                    b.canonical = Some(canonical);
                }
                let count = buffers.get_mut(&r).map_or(0, |b| {
                    b.ref_count += 1;
                    b.ref_count
                });
                if count == 1 {
                    // The canonical memory had been freed and is taken again.
                    heap.grow(buffers, r, position, &mut out);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The trace to replay for a color: the one whose first event's buffer belongs to a temporary
/// allocation of that color (the trace's own `buffer_allocation_index` is not trusted), else
/// the trace with the most events of that color.
fn heap_trace<'a>(
    ba: &'a raw::BufferAssignmentProto,
    buffers: &HashMap<i64, Buffer>,
    color: i64,
) -> Option<&'a raw::HeapSimulatorTrace> {
    let mut trace_of_allocation: HashMap<usize, usize> = HashMap::new();
    for (ti, t) in ba.heap_simulator_traces.iter().enumerate() {
        if let Some(b) = t.events.first().and_then(|e| buffers.get(&e.buffer_id)) {
            trace_of_allocation.insert(b.allocation, ti);
        }
    }
    for (ai, a) in ba.buffer_allocations.iter().enumerate() {
        if a.color == color
            && !indefinite(a)
            && let Some(&ti) = trace_of_allocation.get(&ai)
        {
            return ba.heap_simulator_traces.get(ti);
        }
    }
    let mut best: Option<(usize, usize)> = None;
    for (ti, t) in ba.heap_simulator_traces.iter().enumerate() {
        let n = t.events.iter().filter(|e| buffers.get(&e.buffer_id).is_some_and(|b| b.color == color)).count();
        if n > 0 && best.is_none_or(|(_, m)| n > m) {
            best = Some((ti, n));
        }
    }
    best.and_then(|(ti, _)| ba.heap_simulator_traces.get(ti))
}
