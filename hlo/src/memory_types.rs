//! The static-memory types: [`MemoryStats`] (one color of a buffer assignment, its heap peak and
//! allocation totals) and [`PeakBuffer`]. The replay that computes them from a module is in
//! `memory`; a `Module` keeps its HBM replay, so the types live below both.

use crate::ids::InstrId;

/// A logical buffer live at the heap peak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeakBuffer {
    /// The logical buffer id.
    pub logical_buffer_id: i64,
    /// Its size as assigned (padded) in bytes.
    pub size: u64,
    /// Its shape's size without layout padding.
    pub unpadded_size: u64,
    /// The instruction that defines it, when found in the module.
    pub instruction: Option<InstrId>,
    /// Shape index inside the instruction's result.
    pub shape_index: Vec<i64>,
}

/// Static memory of one color of a module's buffer assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    /// The memory color (0 = device memory / HBM).
    pub color: i64,
    /// Peak of the replayed heap-simulator trace (padded logical-buffer sizes), without the
    /// indefinite-lifetime allocations.
    pub heap_peak_bytes: u64,
    /// The same heap at its peak, with each buffer at its unpadded shape size.
    pub heap_peak_unpadded_bytes: u64,
    /// Index of the trace event at which the peak was reached.
    pub peak_position: usize,
    /// Buffers live at the peak, in the order they were allocated.
    pub peak_buffers: Vec<PeakBuffer>,
    /// Events in the replayed trace (0 when the color has none).
    pub trace_events: usize,
    /// Allocations with an indefinite lifetime: parameters, possibly-live outputs, constants and
    /// thread-local buffers.
    pub indefinite_bytes: u64,
    /// Entry-computation parameter allocations (`argument_size_in_bytes`).
    pub argument_bytes: u64,
    /// Possibly-live-out allocations, including the output tuple's index table
    /// (`output_size_in_bytes`).
    pub output_bytes: u64,
    /// Parameter allocations that alias an output (donated buffers).
    pub alias_bytes: u64,
    /// Allocations that are neither parameters, outputs, constants nor thread-local
    /// (`temp_size_in_bytes`).
    pub temp_bytes: u64,
    /// Constant allocations.
    pub constant_bytes: u64,
    /// Thread-local allocations (small scalars XLA:CPU keeps on the stack).
    pub thread_local_bytes: u64,
    /// Every allocation of the color except thread-local ones: XProf's
    /// `totalBufferAllocationMib`, the `total_hbm_mib` of its `get_peak_allocations`.
    pub total_allocation_bytes: u64,
}

impl MemoryStats {
    /// The memory viewer's peak: the heap peak plus the indefinite-lifetime allocations.
    pub fn peak_bytes(&self) -> u64 {
        self.heap_peak_bytes.saturating_add(self.indefinite_bytes)
    }

    /// Padding at the heap peak: padded minus unpadded bytes.
    pub fn heap_padding_bytes(&self) -> u64 {
        self.heap_peak_bytes.saturating_sub(self.heap_peak_unpadded_bytes)
    }
}

/// What one row of [`PeakAllocations`] stands for.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AllocationRowKind {
    /// One buffer: the instruction that defines it and the index inside its result (empty for
    /// the whole result).
    Buffer {
        /// The instruction's name (`""` when the buffer names no instruction of the module).
        instruction: String,
        /// Shape index inside the instruction's result.
        shape_index: Vec<i64>,
    },
    /// Several buffers of one size whose instructions share a name up to a `.N` suffix
    /// (`ynn_fusion.8`, `ynn_fusion.12`, ...).
    Numbered {
        /// The name before the suffix (`ynn_fusion`).
        stem: String,
        /// How many buffers.
        count: usize,
        /// The size of each, in bytes.
        each_bytes: u64,
    },
    /// Every buffer under the size threshold, together.
    Others {
        /// The threshold in bytes.
        under_bytes: u64,
    },
}

/// A row of [`PeakAllocations`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllocationRow {
    /// What it stands for.
    pub kind: AllocationRowKind,
    /// Its bytes (a group's summed).
    pub bytes: u64,
}

/// The device memory of a program as XProf's `get_peak_allocations` gives it
/// ([`crate::Module::peak_allocations`]).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PeakAllocations {
    /// Every allocation of the color except thread-local ones
    /// ([`MemoryStats::total_allocation_bytes`]).
    pub total_bytes: u64,
    /// The buffers live at the heap peak and the indefinite-lifetime allocations, largest
    /// first: buffers of 1 MiB or more one by one (same-size buffers of one numbered name
    /// together), the others in one row.
    pub rows: Vec<AllocationRow>,
}
