//! The chip catalogue: one [`ChipSpec`] per chip, each with its public source.
//!
//! Figures are per chip and dense (no 2:4 sparsity). Bandwidths are decimal GB/s as vendors
//! quote them; HBM capacities are binary GiB (HBM stacks are GiB-sized; the Cloud TPU pages
//! label capacity "GiB"). `interconnect_bandwidth` is the bidirectional per-chip figure (ICI,
//! NVLink, Infinity Fabric). TPU fp32 peaks are left out: TPUs run f32 matmuls as several bf16
//! passes and publish no f32 peak.
//!
//! Profiles win over this table: `xlens_roofline::Chip::from_device_plane` uses the plane's
//! capability stats when present.
//!
//! ```
//! use xlens_chips::catalogue::CATALOGUE;
//! let ids: Vec<_> = CATALOGUE.iter().map(|c| c.id).collect();
//! assert_eq!(ids, ["v4", "v5e", "v5p", "v6e", "v7", "a100", "h100", "h200", "b200", "mi300x", "mi355x"]);
//! ```

use crate::error::{Error, ErrorKind, Result};
use crate::spec::{ChipSpec, MemoryKind, OnChipMemory, Vendor};
use crate::units::{Bytes, BytesPerSec, FlopsPerSec};

const fn tflops(v: f64) -> FlopsPerSec {
    FlopsPerSec::from_tflops(v)
}

const fn gbps(v: f64) -> BytesPerSec {
    BytesPerSec::from_gb_per_s(v)
}

const fn capacity_only(kind: MemoryKind, capacity: Bytes) -> OnChipMemory {
    OnChipMemory { kind, capacity: Some(capacity), read_bandwidth: None, write_bandwidth: None }
}

/// Every chip the crate knows, TPUs first by generation, then GPUs.
pub const CATALOGUE: &[ChipSpec] = &[TPU_V4, TPU_V5E, TPU_V5P, TPU_V6E, TPU_V7, A100, H100, H200, B200, MI300X, MI355X];

/// TPU v4.
// Source: cloud.google.com/tpu/docs/v4 (275 TFLOP/s bf16, 32 GiB HBM2 at 1200 GB/s, 2 TensorCores),
// int8 275 TOP/s from the jax-ml scaling book table; CMEM 128 MiB per chip from Jouppi et al., "TPU v4: An Optically
// Reconfigurable Supercomputer", ISCA 2023. XProf's CLI test oracle agrees (facts §8).
pub const TPU_V4: ChipSpec = ChipSpec {
    id: "v4",
    name: "TPU v4",
    vendor: Vendor::Google,
    aliases: &["TPU v4", "TPU V4", "v4", "tpu-v4", "v4p"],
    cores_per_chip: 2,
    sparse_cores: 4,
    compute_units: None,
    peak_bf16: tflops(275.0),
    peak_fp8: None,
    peak_int8: Some(tflops(275.0)),
    peak_fp32: None,
    hbm_bandwidth: gbps(1200.0),
    hbm_capacity: Bytes::from_gib(32),
    on_chip: &[capacity_only(MemoryKind::Cmem, Bytes::from_mib(128))],
    interconnect_bandwidth: None,
    dcn_bandwidth: None,
    source: "cloud.google.com/tpu/docs/v4; CMEM: Jouppi et al., ISCA 2023",
};

/// TPU v5e ("TPU v5 Lite" in profiles).
// Source: cloud.google.com/tpu/docs/v5e: 197 TFLOP/s bf16, 393 TOP/s int8, 16 GB HBM2 at 819 GB/s,
// 400 GB/s bidirectional ICI, 1 TensorCore; 2 x 100 Gbps NICs per 8-chip host = 25 Gbps per chip.
// VMEM 128 MiB: jax-ml scaling book, "How to Think About TPUs".
pub const TPU_V5E: ChipSpec = ChipSpec {
    id: "v5e",
    name: "TPU v5e",
    vendor: Vendor::Google,
    aliases: &["TPU v5 Lite", "TPU v5e", "TPU v5lite", "v5litepod", "v5lite", "tpu-v5-lite-podslice", "v5e"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: None,
    peak_bf16: tflops(197.0),
    peak_fp8: None,
    peak_int8: Some(tflops(393.0)),
    peak_fp32: None,
    hbm_bandwidth: gbps(819.0),
    hbm_capacity: Bytes::from_gib(16),
    on_chip: &[capacity_only(MemoryKind::Vmem, Bytes::from_mib(128))],
    interconnect_bandwidth: Some(gbps(400.0)),
    dcn_bandwidth: Some(BytesPerSec::from_gbit_per_s(25.0)),
    source: "cloud.google.com/tpu/docs/v5e; VMEM: jax-ml scaling book",
};

/// TPU v5p ("TPU v5" in profiles).
// Source: cloud.google.com/tpu/docs/v5p and /tpu7x comparison table: 459 TFLOP/s bf16 (fp8 runs
// at the bf16 rate), 95 GiB HBM at 2765 GB/s, 2 TensorCores + 4 SparseCores, 1200 GB/s
// bidirectional ICI, 50 Gbps DCN per chip. int8 918 TOP/s: jax-ml scaling book table.
pub const TPU_V5P: ChipSpec = ChipSpec {
    id: "v5p",
    name: "TPU v5p",
    vendor: Vendor::Google,
    aliases: &["TPU v5p", "TPU v5", "TPU V5", "v5p", "tpu-v5p-slice"],
    cores_per_chip: 2,
    sparse_cores: 4,
    compute_units: None,
    peak_bf16: tflops(459.0),
    peak_fp8: None,
    peak_int8: Some(tflops(918.0)),
    peak_fp32: None,
    hbm_bandwidth: gbps(2765.0),
    hbm_capacity: Bytes::from_gib(95),
    on_chip: &[],
    interconnect_bandwidth: Some(gbps(1200.0)),
    dcn_bandwidth: Some(BytesPerSec::from_gbit_per_s(50.0)),
    source: "cloud.google.com/tpu/docs/v5p; cloud.google.com/tpu/docs/tpu7x",
};

/// TPU v6e, Trillium ("TPU v6 Lite" in profiles).
// Source: cloud.google.com/tpu/docs/v6e and /tpu7x: 918 TFLOP/s bf16, 1836 TOP/s int8, 32 GiB HBM
// at 1638 GB/s (XProf's v6e trace reports 1525.5 GiB/s = 1638 GB/s per core), 1 TensorCore +
// 2 SparseCores, 800 GB/s bidirectional ICI, 100 Gbps DCN per chip. VMEM read/write bandwidths:
// XProf's recorded v6e trace (21696.1 / 15020.4 GiB/s per core, facts §8).
pub const TPU_V6E: ChipSpec = ChipSpec {
    id: "v6e",
    name: "TPU v6e",
    vendor: Vendor::Google,
    aliases: &["TPU v6 Lite", "TPU v6e", "Trillium", "v6e", "TPU v6lite", "tpu-v6e-slice"],
    cores_per_chip: 1,
    sparse_cores: 2,
    compute_units: None,
    peak_bf16: tflops(918.0),
    peak_fp8: None,
    peak_int8: Some(tflops(1836.0)),
    peak_fp32: None,
    hbm_bandwidth: gbps(1638.0),
    hbm_capacity: Bytes::from_gib(32),
    on_chip: &[OnChipMemory {
        kind: MemoryKind::Vmem,
        capacity: None,
        read_bandwidth: Some(BytesPerSec::from_gib_per_s(21696.1)),
        write_bandwidth: Some(BytesPerSec::from_gib_per_s(15020.4)),
    }],
    interconnect_bandwidth: Some(gbps(800.0)),
    dcn_bandwidth: Some(BytesPerSec::from_gbit_per_s(100.0)),
    source: "cloud.google.com/tpu/docs/v6e; cloud.google.com/tpu/docs/tpu7x; VMEM: XProf v6e trace",
};

/// TPU7x, Ironwood ("TPU v7x" in profiles).
// Source: cloud.google.com/tpu/docs/tpu7x: 2307 TFLOP/s bf16, 4614 TFLOP/s fp8, 192 GiB HBM at
// 7380 GB/s, 2 TensorCores + 4 SparseCores, 1200 GB/s bidirectional ICI, 100 Gbps DCN per chip.
pub const TPU_V7: ChipSpec = ChipSpec {
    id: "v7",
    name: "TPU7x (Ironwood)",
    vendor: Vendor::Google,
    aliases: &["TPU v7x", "TPU7x", "TPU v7", "Ironwood", "v7x", "tpu7x"],
    cores_per_chip: 2,
    sparse_cores: 4,
    compute_units: None,
    peak_bf16: tflops(2307.0),
    peak_fp8: Some(tflops(4614.0)),
    peak_int8: None,
    peak_fp32: None,
    hbm_bandwidth: gbps(7380.0),
    hbm_capacity: Bytes::from_gib(192),
    on_chip: &[],
    interconnect_bandwidth: Some(gbps(1200.0)),
    dcn_bandwidth: Some(BytesPerSec::from_gbit_per_s(100.0)),
    source: "cloud.google.com/tpu/docs/tpu7x",
};

/// NVIDIA A100 SXM4 80 GB.
// Source: NVIDIA A100 Tensor Core GPU datasheet: bf16 312 TFLOP/s dense (624 sparse), int8
// 624 TOP/s dense, fp32 19.5 TFLOP/s, 80 GB HBM2e at 2039 GB/s, NVLink 600 GB/s; 108 SMs and
// 40 MB L2 from the NVIDIA Ampere architecture whitepaper.
pub const A100: ChipSpec = ChipSpec {
    id: "a100",
    name: "A100 SXM 80GB",
    vendor: Vendor::Nvidia,
    aliases: &["A100", "NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "A100 SXM", "NVIDIA A100 80GB"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(108),
    peak_bf16: tflops(312.0),
    peak_fp8: None,
    peak_int8: Some(tflops(624.0)),
    peak_fp32: Some(tflops(19.5)),
    hbm_bandwidth: gbps(2039.0),
    hbm_capacity: Bytes::from_gib(80),
    on_chip: &[capacity_only(MemoryKind::L2Cache, Bytes::from_mib(40))],
    interconnect_bandwidth: Some(gbps(600.0)),
    dcn_bandwidth: None,
    source: "NVIDIA A100 Tensor Core GPU datasheet; NVIDIA A100 (Ampere) architecture whitepaper",
};

/// NVIDIA H100 SXM5 80 GB.
// Source: NVIDIA H100 Tensor Core GPU datasheet (SXM): bf16 989 TFLOP/s dense (1979 sparse), fp8
// and int8 1979 dense, fp32 67 TFLOP/s, 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s; 132 SMs and
// 50 MB L2 from the NVIDIA H100 (Hopper) architecture whitepaper.
pub const H100: ChipSpec = ChipSpec {
    id: "h100",
    name: "H100 SXM",
    vendor: Vendor::Nvidia,
    aliases: &["H100", "H100 SXM", "H100 SXM5", "NVIDIA H100 80GB HBM3", "NVIDIA H100", "H100-SXM5-80GB"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(132),
    peak_bf16: tflops(989.0),
    peak_fp8: Some(tflops(1979.0)),
    peak_int8: Some(tflops(1979.0)),
    peak_fp32: Some(tflops(67.0)),
    hbm_bandwidth: gbps(3350.0),
    hbm_capacity: Bytes::from_gib(80),
    on_chip: &[capacity_only(MemoryKind::L2Cache, Bytes::from_mib(50))],
    interconnect_bandwidth: Some(gbps(900.0)),
    dcn_bandwidth: None,
    source: "NVIDIA H100 Tensor Core GPU datasheet (SXM); NVIDIA H100 architecture whitepaper",
};

/// NVIDIA H200 SXM 141 GB.
// Source: NVIDIA H200 Tensor Core GPU datasheet (SXM): same compute as H100 SXM (bf16 989, fp8
// and int8 1979 dense, fp32 67 TFLOP/s), 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s, 132 SMs.
pub const H200: ChipSpec = ChipSpec {
    id: "h200",
    name: "H200 SXM",
    vendor: Vendor::Nvidia,
    aliases: &["H200", "H200 SXM", "NVIDIA H200", "NVIDIA H200 141GB HBM3e"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(132),
    peak_bf16: tflops(989.0),
    peak_fp8: Some(tflops(1979.0)),
    peak_int8: Some(tflops(1979.0)),
    peak_fp32: Some(tflops(67.0)),
    hbm_bandwidth: gbps(4800.0),
    hbm_capacity: Bytes::from_gib(141),
    on_chip: &[capacity_only(MemoryKind::L2Cache, Bytes::from_mib(50))],
    interconnect_bandwidth: Some(gbps(900.0)),
    dcn_bandwidth: None,
    source: "NVIDIA H200 Tensor Core GPU datasheet (SXM)",
};

/// NVIDIA B200 (HGX B200, per GPU).
// Source: NVIDIA HGX B200 datasheet, per GPU = 8-GPU figure / 8, sparse figures halved: bf16
// 2.25 PFLOP/s, fp8 and int8 4.5 PFLOP/s dense, fp32 75 TFLOP/s, 180 GB HBM3e (1.44 TB / 8) at
// 8 TB/s (DGX B200: 64 TB/s / 8), NVLink 5 1.8 TB/s; 148 SMs.
pub const B200: ChipSpec = ChipSpec {
    id: "b200",
    name: "B200",
    vendor: Vendor::Nvidia,
    aliases: &["B200", "NVIDIA B200", "HGX B200"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(148),
    peak_bf16: tflops(2250.0),
    peak_fp8: Some(tflops(4500.0)),
    peak_int8: Some(tflops(4500.0)),
    peak_fp32: Some(tflops(75.0)),
    hbm_bandwidth: gbps(8000.0),
    hbm_capacity: Bytes::from_gib(180),
    on_chip: &[],
    interconnect_bandwidth: Some(gbps(1800.0)),
    dcn_bandwidth: None,
    source: "NVIDIA HGX B200 / DGX B200 datasheets (per GPU)",
};

/// AMD Instinct MI300X.
// Source: AMD Instinct MI300X data sheet: bf16 1307.4 TFLOP/s dense (2614.9 sparse), fp8 and
// int8 2614.9 dense, fp32 163.4 TFLOP/s, 192 GB HBM3 at 5.3 TB/s, 304 CUs, 256 MB Infinity
// Cache, Infinity Fabric 7 links x 128 GB/s = 896 GB/s.
pub const MI300X: ChipSpec = ChipSpec {
    id: "mi300x",
    name: "MI300X",
    vendor: Vendor::Amd,
    aliases: &["MI300X", "AMD Instinct MI300X", "Instinct MI300X", "AMD MI300X"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(304),
    peak_bf16: tflops(1307.4),
    peak_fp8: Some(tflops(2614.9)),
    peak_int8: Some(tflops(2614.9)),
    peak_fp32: Some(tflops(163.4)),
    hbm_bandwidth: gbps(5300.0),
    hbm_capacity: Bytes::from_gib(192),
    on_chip: &[capacity_only(MemoryKind::InfinityCache, Bytes::from_mib(256))],
    interconnect_bandwidth: Some(gbps(896.0)),
    dcn_bandwidth: None,
    source: "AMD Instinct MI300X accelerator data sheet",
};

/// AMD Instinct MI355X.
// Source: AMD Instinct MI355X data sheet and AMD's CDNA 4 disclosures: 256 CUs at up to 2.4 GHz,
// 8,192 dense fp8 FLOPs per CU per clock (5.0 PFLOP/s fp8 and int8 dense, so 2.5 PFLOP/s bf16
// dense), fp32 157.3 TFLOP/s, 288 GB HBM3E at 8 TB/s. The MI350X shares the memory and CU count
// at a 2.2 GHz clock; profiles derive the FLOP peak from the clock they report.
pub const MI355X: ChipSpec = ChipSpec {
    id: "mi355x",
    name: "MI355X",
    vendor: Vendor::Amd,
    aliases: &["MI355X", "AMD Instinct MI355X", "Instinct MI355X", "AMD MI355X"],
    cores_per_chip: 1,
    sparse_cores: 0,
    compute_units: Some(256),
    peak_bf16: tflops(2516.6),
    peak_fp8: Some(tflops(5033.2)),
    peak_int8: Some(tflops(5033.2)),
    peak_fp32: Some(tflops(157.3)),
    hbm_bandwidth: gbps(8000.0),
    hbm_capacity: Bytes::from_gib(288),
    on_chip: &[],
    interconnect_bandwidth: None,
    dcn_bandwidth: None,
    source: "AMD Instinct MI355X accelerator data sheet",
};

/// Finding a chip of the catalogue by name.
impl ChipSpec {
    /// Finds a chip by id, name or alias, case-insensitively and ignoring spaces, `-` and `_`;
    /// a trailing `-<chips>` count as in accelerator types (`v5litepod-16`, `v5p-128`) is ignored.
    ///
    /// ```
    /// use xlens_chips::ChipSpec;
    /// assert_eq!(ChipSpec::by_name("TPU v5 Lite")?.id, "v5e");
    /// assert_eq!(ChipSpec::by_name("v5litepod-16")?.id, "v5e");
    /// assert_eq!(ChipSpec::by_name("NVIDIA H100 80GB HBM3")?.id, "h100");
    /// assert!(ChipSpec::by_name("TPU v9").unwrap_err().is_unknown_chip());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn by_name(name: &str) -> Result<&'static ChipSpec> {
        ChipSpec::lookup(name).ok_or_else(|| {
            Error::new(ErrorKind::UnknownChip {
                name: name.to_owned(),
                known: CATALOGUE.iter().map(|c| c.id).collect::<Vec<_>>().join(", "),
            })
        })
    }

    /// Like [`by_name`](Self::by_name), `None` when unknown.
    pub fn lookup(name: &str) -> Option<&'static ChipSpec> {
        let key = normalize(name);
        if key.is_empty() {
            return None;
        }
        let find = |key: &str| {
            CATALOGUE.iter().find(|c| {
                normalize(c.id) == key || normalize(c.name) == key || c.aliases.iter().any(|a| normalize(a) == key)
            })
        };
        if let Some(c) = find(&key) {
            return Some(c);
        }
        // Accelerator types end in a chip or core count: `v5p-128`, `v5litepod-16`.
        let trimmed = name.trim();
        let (head, tail) = trimmed.rsplit_once('-')?;
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) { find(&normalize(head)) } else { None }
    }
}

impl ChipSpec {
    /// Finds a GPU of the catalogue by what its profile's capability stats say about it: the
    /// vendor, the SM or CU count and the memory size (within 5 %). For GPUs whose profile names
    /// no model (an AMD plane says `gfx942`, which several products share).
    ///
    /// ```
    /// use xlens_chips::{ChipSpec, Vendor};
    /// let mi300x = ChipSpec::by_gpu(Vendor::Amd, 304, 192.0 * (1u64 << 30) as f64);
    /// assert_eq!(mi300x.map(|c| c.id), Some("mi300x"));
    /// assert!(ChipSpec::by_gpu(Vendor::Amd, 304, 64e9).is_none());
    /// ```
    pub fn by_gpu(vendor: Vendor, compute_units: u32, memory_bytes: f64) -> Option<&'static ChipSpec> {
        CATALOGUE.iter().find(|c| {
            c.vendor == vendor
                && c.compute_units == Some(compute_units)
                && c.hbm_capacity.0 > 0
                && (memory_bytes / c.hbm_capacity.0 as f64 - 1.0).abs() < 0.05
        })
    }
}

/// Lower-case, without spaces, `-`, `_` or `.`.
fn normalize(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, ' ' | '-' | '_' | '.')).flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_ignores_case_and_separators() {
        assert_eq!(normalize("TPU v5 Lite"), "tpuv5lite");
        assert_eq!(normalize("A100-SXM4_80GB"), "a100sxm480gb");
    }
}
