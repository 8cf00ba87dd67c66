//! What the chip catalogue records about a chip: its vendor, memories and peaks, and how a chip is
//! found by name (the catalogue itself is `catalogue.rs`; `xlens-roofline` reads peaks from
//! profiles).

use crate::units::{Bytes, BytesPerSec, FlopsPerByte, FlopsPerSec};

/// An on-chip memory resource that can bound work (XProf's `bound_by` names beyond HBM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OnChip {
    /// TPU CMEM reads.
    CmemRead,
    /// TPU CMEM writes.
    CmemWrite,
    /// TPU VMEM reads.
    VmemRead,
    /// TPU VMEM writes.
    VmemWrite,
    /// GPU shared memory / L1 reads.
    SramRead,
    /// GPU shared memory / L1 writes.
    SramWrite,
}

impl OnChip {
    /// XProf's label: `"CMEM Read"`, `"CMEM Write"`, `"VMEM Read"`, `"VMEM Write"`,
    /// `"Shm/L1 Read"`, `"Shm/L1 Write"`.
    pub fn label(self) -> &'static str {
        match self {
            OnChip::CmemRead => "CMEM Read",
            OnChip::CmemWrite => "CMEM Write",
            OnChip::VmemRead => "VMEM Read",
            OnChip::VmemWrite => "VMEM Write",
            OnChip::SramRead => "Shm/L1 Read",
            OnChip::SramWrite => "Shm/L1 Write",
        }
    }
}

/// Who makes a chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// Google Cloud TPU.
    Google,
    /// NVIDIA GPU.
    Nvidia,
    /// AMD Instinct GPU.
    Amd,
}

impl Vendor {
    /// `"Google"`, `"NVIDIA"` or `"AMD"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Google => "Google",
            Vendor::Nvidia => "NVIDIA",
            Vendor::Amd => "AMD",
        }
    }

    /// True for TPUs.
    pub fn is_tpu(self) -> bool {
        self == Vendor::Google
    }
}

/// A kind of on-chip memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// TPU common memory (v4, v5p): a large on-chip SRAM shared by the TensorCores.
    Cmem,
    /// TPU vector memory: the TensorCore's scratchpad between HBM and the MXUs.
    Vmem,
    /// GPU shared memory / L1 per SM (XProf's "SRAM").
    SharedMemory,
    /// GPU last-level L2 cache.
    L2Cache,
    /// AMD Infinity Cache (MI300X last-level cache).
    InfinityCache,
}

impl MemoryKind {
    /// `"CMEM"`, `"VMEM"`, `"Shm/L1"`, `"L2"`, `"Infinity Cache"`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Cmem => "CMEM",
            MemoryKind::Vmem => "VMEM",
            MemoryKind::SharedMemory => "Shm/L1",
            MemoryKind::L2Cache => "L2",
            MemoryKind::InfinityCache => "Infinity Cache",
        }
    }

    /// The roofline resources (read, write) this memory bounds, for the kinds XProf models.
    pub fn roofline_resources(self) -> Option<(OnChip, OnChip)> {
        match self {
            MemoryKind::Cmem => Some((OnChip::CmemRead, OnChip::CmemWrite)),
            MemoryKind::Vmem => Some((OnChip::VmemRead, OnChip::VmemWrite)),
            MemoryKind::SharedMemory => Some((OnChip::SramRead, OnChip::SramWrite)),
            MemoryKind::L2Cache | MemoryKind::InfinityCache => None,
        }
    }
}

/// One on-chip memory of a chip, with the figures that are public.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OnChipMemory {
    /// What it is.
    pub kind: MemoryKind,
    /// Capacity per chip, when public.
    pub capacity: Option<Bytes>,
    /// Read bandwidth per chip, when public.
    pub read_bandwidth: Option<BytesPerSec>,
    /// Write bandwidth per chip, when public.
    pub write_bandwidth: Option<BytesPerSec>,
}

/// Public datasheet figures of one chip; the catalogue ([`crate::catalogue::CATALOGUE`]) holds one
/// per supported chip, each with its source.
///
/// Rates are **dense** (no structured sparsity) and **per chip**. Bandwidths are decimal
/// (GB/s = 10^9 bytes/s); capacities are binary (GiB), see [`crate::units`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChipSpec {
    /// Short lower-case id used on command lines and in JSON (`"v5e"`, `"h100"`).
    pub id: &'static str,
    /// Display name (`"TPU v5e"`, `"H100 SXM"`).
    pub name: &'static str,
    /// Who makes it.
    pub vendor: Vendor,
    /// Other names it goes by: XProf `device_type_string` values, accelerator types, marketing
    /// names. Matched case-insensitively, ignoring spaces, `-` and `_`.
    pub aliases: &'static [&'static str],
    /// TensorCores per chip for TPUs (XProf's per-plane peaks are per TensorCore); 1 for GPUs
    /// (one device plane per GPU).
    pub cores_per_chip: u32,
    /// SparseCores per chip (TPU), 0 where none or not public.
    pub sparse_cores: u32,
    /// Streaming multiprocessors (NVIDIA) or compute units (AMD); `None` for TPUs.
    pub compute_units: Option<u32>,
    /// Peak dense bf16 matmul rate.
    pub peak_bf16: FlopsPerSec,
    /// Peak dense fp8 rate, where the chip has one.
    pub peak_fp8: Option<FlopsPerSec>,
    /// Peak dense int8 rate (OP/s), where public.
    pub peak_int8: Option<FlopsPerSec>,
    /// Peak fp32 rate, where public (GPU CUDA-core / vector fp32; TPUs publish none).
    pub peak_fp32: Option<FlopsPerSec>,
    /// HBM bandwidth per chip.
    pub hbm_bandwidth: BytesPerSec,
    /// HBM capacity per chip.
    pub hbm_capacity: Bytes,
    /// On-chip memories with public figures.
    pub on_chip: &'static [OnChipMemory],
    /// Chip-to-chip bandwidth per chip, bidirectional: ICI (TPU), NVLink (NVIDIA), Infinity
    /// Fabric (AMD).
    pub interconnect_bandwidth: Option<BytesPerSec>,
    /// Data-center network bandwidth per chip, where the vendor states it per chip.
    pub dcn_bandwidth: Option<BytesPerSec>,
    /// Where the figures come from.
    pub source: &'static str,
}

impl ChipSpec {
    /// The chip's ridge point at bf16 peak: peak FLOP/s ÷ HBM bytes/s.
    ///
    /// ```
    /// use xlens_chips::ChipSpec;
    /// let v5e = ChipSpec::by_name("v5e")?;
    /// assert!((v5e.ridge_bf16().get() - 240.54).abs() < 0.01); // 197e12 / 819e9
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ridge_bf16(&self) -> FlopsPerByte {
        FlopsPerByte(self.peak_bf16.per_s() / self.hbm_bandwidth.bytes_per_s())
    }

    /// The on-chip memory of this kind, if listed.
    pub fn on_chip_memory(&self, kind: MemoryKind) -> Option<&OnChipMemory> {
        self.on_chip.iter().find(|m| m.kind == kind)
    }
}
