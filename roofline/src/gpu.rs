//! GPU devices and kernels: what a `/device:GPU:N` plane says about its device (XProf's device
//! capabilities), what its kernels are (launch parameters, tensor-core use, the library that
//! wrote them) and what its memory copies move.
//!
//! The peaks follow XProf (`cuda_type_utils`, `rocm_type_utils`, `device_caps_utils`): peak FLOP/s
//! is cores × clock × the most FLOPs a core retires per cycle in fp32 or fp16, vector or matrix
//! units (bf16 and fp8 are not used for the peak); shared memory (NVIDIA) or LDS (AMD) bandwidth
//! is cores × bytes per cycle × clock; HBM bandwidth is the `memory_bandwidth` stat.

use xlens_chips::Vendor;
use xlens_xplane::Plane;
use xlens_xplane::names::stat::capability as cap;

/// What a GPU plane's capability stats say about its device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuCaps {
    /// `device_vendor` (`Nvidia`, `AMD`); `None` when absent or unknown.
    pub vendor: Option<Vendor>,
    /// Clock in GHz (`clock_rate` is kHz).
    pub clock_ghz: f64,
    /// SMs (NVIDIA) or compute units (AMD): `core_count`.
    pub cores: f64,
    /// HBM bandwidth in bytes/s (`memory_bandwidth`).
    pub memory_bandwidth: f64,
    /// Device memory in bytes (`memory_size`).
    pub memory_size: f64,
    /// Compute capability (`compute_cap_major`, `compute_cap_minor`); on AMD it encodes the
    /// architecture (9.4 is gfx942, 9.5 is gfx950).
    pub compute_capability: (u32, u32),
    /// `gpu_device_name`, when recorded (AMD writes the `gfx…` name there).
    pub device_name: Option<String>,
}

impl GpuCaps {
    /// Reads the capability stats of a GPU plane (missing stats read as zero).
    pub fn of(plane: &Plane) -> GpuCaps {
        let num = |name: &str| plane.stat_by_name(name).and_then(|s| s.as_f64()).filter(|v| v.is_finite());
        let text = |name: &str| plane.stat_by_name(name).and_then(|s| s.as_str().map(|s| s.into_owned()));
        let vendor = match text(cap::DEVICE_VENDOR).as_deref() {
            Some("Nvidia") => Some(Vendor::Nvidia),
            Some("AMD") => Some(Vendor::Amd),
            _ => None,
        };
        GpuCaps {
            vendor,
            clock_ghz: num(cap::CLOCK_RATE).unwrap_or(0.0) / 1e6,
            cores: num(cap::CORE_COUNT).unwrap_or(0.0),
            memory_bandwidth: num(cap::MEMORY_BANDWIDTH).unwrap_or(0.0),
            memory_size: num(cap::MEMORY_SIZE).unwrap_or(0.0),
            compute_capability: (
                num(cap::COMPUTE_CAP_MAJOR).unwrap_or(0.0) as u32,
                num(cap::COMPUTE_CAP_MINOR).unwrap_or(0.0) as u32,
            ),
            device_name: text(cap::GPU_DEVICE_NAME),
        }
    }

    /// The AMD architecture (`gfx942`): the `gpu_device_name` stat when it names one, else the
    /// compute capability (9.4 → gfx942, 9.5 → gfx950).
    pub fn amd_arch(&self) -> Option<String> {
        if let Some(name) = &self.device_name
            && let Some(hex) = name.strip_prefix("gfx")
            && hex.len() >= 3
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Some(name.clone());
        }
        match self.compute_capability {
            (9, 4) => Some("gfx942".to_owned()),
            (9, 5) => Some("gfx950".to_owned()),
            _ => None,
        }
    }

    /// XProf's device type: `AMD GPU - gfx942`, `Nvidia GPU (Hopper)`, or `GPU` when the vendor
    /// is unknown.
    pub fn model_name(&self) -> String {
        let (major, minor) = self.compute_capability;
        match self.vendor {
            Some(Vendor::Amd) => match self.amd_arch() {
                Some(arch) => format!("AMD GPU - {arch}"),
                None if (9..=11).contains(&major) => format!("AMD GPU - gfx-{major}XX series"),
                None => "AMD GPU".to_owned(),
            },
            Some(Vendor::Nvidia) => {
                let arch = match (major, minor) {
                    (2, _) => "Fermi",
                    (3, _) => "Kepler",
                    (5, _) => "Maxwell",
                    (6, _) => "Pascal",
                    (7, m) if m < 5 => "Volta",
                    (7, _) => "Turing",
                    (8, m) if m < 9 => "Ampere",
                    (8, _) => "Ada Lovelace",
                    (9, _) => "Hopper",
                    (10, _) => "Blackwell",
                    _ => return "Nvidia GPU".to_owned(),
                };
                format!("Nvidia GPU ({arch})")
            }
            _ => "GPU".to_owned(),
        }
    }

    /// Most FLOPs one SM or CU retires per cycle (fp32/fp16, vector or matrix units). NVIDIA by
    /// compute capability; AMD by architecture; an unknown vendor is read with the NVIDIA table
    /// (XProf gives such a device no peak; a CUDA compute capability still names its SMs).
    pub fn flops_per_cycle_per_core(&self) -> Option<f64> {
        let (major, minor) = self.compute_capability;
        match self.vendor {
            Some(Vendor::Amd) => match self.amd_arch()?.as_str() {
                "gfx908" | "gfx90a" => Some(1024.0),
                "gfx942" => Some(2048.0),
                "gfx950" => Some(4096.0),
                _ => None,
            },
            _ => gpu_flops_per_cycle_per_sm(major, minor),
        }
    }

    /// Peak FLOP/s of the device, `None` when the stats do not determine it.
    pub fn peak_flops_per_s(&self) -> Option<f64> {
        let per_cycle = self.flops_per_cycle_per_core()?;
        let peak = self.cores * self.clock_ghz * per_cycle * 1e9;
        (peak > 0.0).then_some(peak)
    }

    /// Shared memory (NVIDIA) or LDS (AMD) bandwidth of the device in bytes/s: cores × bytes
    /// per cycle × clock (AMD 128 B/CU/cycle, 256 on gfx950; NVIDIA 256 B/SM/cycle, 64 up to
    /// compute capability 2).
    pub fn shared_memory_bytes_per_s(&self) -> Option<f64> {
        let per_cycle = match self.vendor {
            Some(Vendor::Amd) => match self.amd_arch()?.as_str() {
                "gfx950" => 256.0,
                "gfx908" | "gfx90a" | "gfx942" => 128.0,
                _ => return None,
            },
            _ if self.compute_capability.0 == 0 => return None,
            _ if self.compute_capability.0 <= 2 => 64.0,
            _ => 256.0,
        };
        let bw = self.cores * per_cycle * self.clock_ghz * 1e9;
        (bw > 0.0).then_some(bw)
    }
}

/// A kernel's launch parameters, from its `kernel_details` stat.
///
/// Both vendors' formats are read: NVIDIA's (XLA's CUPTI collector)
/// `regs:<n> static_shared:<b> dynamic_shared:<b> grid:<x>,<y>,<z> block:<x>,<y>,<z> occ_pct:<p>`,
/// older TensorFlow's `regs:<n> shm:<b> grid:… block:…`, and AMD's (roctracer)
/// `grid:… block:… private_mem:<b> group_mem:<b> occ_pct:<p>`, where `group_mem` (LDS) is the
/// shared memory and `private_mem` the scratch per work item. Unknown keys are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelDetails {
    /// Registers per thread (NVIDIA).
    pub registers_per_thread: u32,
    /// Static shared memory per block, bytes (NVIDIA `static_shared`, AMD `group_mem`,
    /// TensorFlow `shm`).
    pub static_shared_bytes: u64,
    /// Dynamic shared memory per block, bytes (NVIDIA).
    pub dynamic_shared_bytes: u64,
    /// Private (scratch) memory per work item, bytes (AMD).
    pub private_bytes: u64,
    /// Grid dimensions (blocks).
    pub grid: [u32; 3],
    /// Block dimensions (threads).
    pub block: [u32; 3],
    /// Theoretical occupancy the profiler reports, in % (`None` when absent).
    pub occupancy_pct: Option<f64>,
}

impl KernelDetails {
    /// Parses a `kernel_details` value.
    ///
    /// ```
    /// use xlens_roofline::KernelDetails;
    /// let nv = KernelDetails::parse("regs:32 static_shared:0 dynamic_shared:49152 grid:132,1,1 block:384,1,1 occ_pct:12.5");
    /// assert_eq!((nv.registers_per_thread, nv.dynamic_shared_bytes, nv.grid, nv.occupancy_pct), (32, 49152, [132, 1, 1], Some(12.5)));
    /// let amd = KernelDetails::parse(" grid:16,16,2 block:256,1,1 private_mem:168 group_mem:30240 occ_pct:0");
    /// assert_eq!((amd.static_shared_bytes, amd.private_bytes, amd.block), (30240, 168, [256, 1, 1]));
    /// ```
    pub fn parse(text: &str) -> KernelDetails {
        let mut d = KernelDetails { grid: [1, 1, 1], block: [1, 1, 1], ..KernelDetails::default() };
        for token in text.split([' ', '\n']).filter(|t| !t.is_empty()) {
            let Some((key, value)) = token.split_once(':') else { continue };
            match key {
                "regs" => d.registers_per_thread = value.parse().unwrap_or(0),
                "static_shared" | "shm" | "group_mem" => d.static_shared_bytes = value.parse().unwrap_or(0),
                "dynamic_shared" => d.dynamic_shared_bytes = value.parse().unwrap_or(0),
                "private_mem" => d.private_bytes = value.parse().unwrap_or(0),
                "grid" => d.grid = dims(value).unwrap_or(d.grid),
                "block" => d.block = dims(value).unwrap_or(d.block),
                "occ_pct" => d.occupancy_pct = value.parse().ok().filter(|v: &f64| v.is_finite()),
                _ => {}
            }
        }
        d
    }
}

fn dims(value: &str) -> Option<[u32; 3]> {
    let mut parts = value.split(',').map(|p| p.parse::<u32>());
    let out = [parts.next()?.ok()?, parts.next()?.ok()?, parts.next()?.ok()?];
    parts.next().is_none().then_some(out)
}

/// True when a kernel's name shows it runs on tensor cores (NVIDIA) or matrix cores (AMD), by
/// XProf's patterns for the vendor; never for an unknown vendor.
///
/// ```
/// use xlens_roofline::{Vendor, uses_tensor_cores};
/// assert!(uses_tensor_cores(Some(Vendor::Nvidia), "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"));
/// assert!(uses_tensor_cores(Some(Vendor::Amd), "Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI16x16x16x1_SN"));
/// assert!(!uses_tensor_cores(None, "volta_h884gemm_64x64_ldg8_nn"));
/// ```
pub fn uses_tensor_cores(vendor: Option<Vendor>, name: &str) -> bool {
    const NVIDIA: &[&str] = &[
        "16816",
        "c1688",
        "conv1x1",
        "conv2d_c1_k1",
        "dgrad_1x1_stride_2x2",
        "direct_group",
        "first_layer_wgrad_kernel",
        "h1688",
        "h884",
        "hmma",
        "i16832",
        "i8816",
        "s884",
        "s1688",
        "xmma_gemm",
        "xmma_implicit_gemm",
        "xmma_sparse_conv",
        "xmma_sparse_gemm",
        "xmma_warp_specialized_implicit_gemm",
    ];
    const AMD: &[&str] = &[
        "mfma",
        "wmma",
        "_xdl",
        "gemm_fusion",
        "TileGemmShape<",
        "TileFlatmmShape<",
        "TileFmhaShape<",
        "TileFmhaBwdShape<",
    ];
    match vendor {
        Some(Vendor::Nvidia) => NVIDIA.iter().any(|p| name.contains(p)),
        Some(Vendor::Amd) => AMD.iter().any(|p| name.contains(p)) || has_mfma_tile(name),
        _ => false,
    }
}

/// `_MI<a>x<b>x<c>…`: an AMD matrix-instruction tile in a Tensile kernel name.
fn has_mfma_tile(name: &str) -> bool {
    name.match_indices("_MI").any(|(i, _)| {
        let rest = &name[i + 3..];
        let mut groups = 0;
        let mut digits = 0;
        for b in rest.bytes() {
            match b {
                b'0'..=b'9' => digits += 1,
                b'x' if digits > 0 => {
                    groups += 1;
                    digits = 0;
                }
                _ => break,
            }
        }
        groups >= 2 && digits > 0
    })
}

/// The library (or compiler) that wrote a GPU kernel, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelLibrary {
    /// NVIDIA cuBLAS / cuBLASLt GEMMs (`gemm`, `xmma`, `sm90_`, `cutlass` names inside cuBLAS).
    CuBlas,
    /// NVIDIA cuDNN (convolutions, fused attention).
    CuDnn,
    /// AMD hipBLASLt / rocBLAS Tensile GEMMs (`Cijk_…`).
    HipBlas,
    /// AMD MIOpen (convolutions: `Im2Col`, `Im3d2Col`, `naive_conv`, `MIOpen…`).
    MiOpen,
    /// AMD Composable Kernel (`ck::`, `ck_tile::`).
    ComposableKernel,
    /// NVIDIA CUTLASS templates.
    Cutlass,
    /// Triton kernels (`triton_…`).
    Triton,
    /// Transformer Engine kernels.
    TransformerEngine,
    /// NVIDIA NCCL / AMD RCCL collectives.
    Collectives,
    /// Kernels XLA generated (fusions and elementwise code).
    Xla,
    /// Framework kernels (TensorFlow, Eigen).
    Framework,
    /// Runtime copies written as kernels (`__amd_rocclr_copyBuffer`, ...).
    Runtime,
    /// None of the above.
    Other,
}

impl KernelLibrary {
    /// Recognises a kernel's library from its name.
    ///
    /// ```
    /// use xlens_roofline::KernelLibrary;
    /// assert_eq!(KernelLibrary::of("Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI16x16x16x1"), KernelLibrary::HipBlas);
    /// assert_eq!(KernelLibrary::of("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), KernelLibrary::Collectives);
    /// assert_eq!(KernelLibrary::of("loop_add_fusion.kd"), KernelLibrary::Xla);
    /// ```
    pub fn of(name: &str) -> KernelLibrary {
        let lower = name.to_ascii_lowercase();
        let has = |p: &str| lower.contains(p);
        if lower.starts_with("nccl") || lower.starts_with("rccl") || has("nccldevkernel") || has("ncclkernel") {
            KernelLibrary::Collectives
        } else if has("transformer_engine") || has("fused_attn") || name.contains("te_fused") {
            KernelLibrary::TransformerEngine
        } else if name.starts_with("Cijk_") || name.contains("Tensile") || has("hipblaslt") || has("rocblas") {
            KernelLibrary::HipBlas
        } else if has("ck_tile::") || has("ck::") || has("device_gemm") {
            KernelLibrary::ComposableKernel
        } else if has("miopen") || name.starts_with("Im2Col") || name.starts_with("Im3d2Col") || has("naive_conv") {
            KernelLibrary::MiOpen
        } else if has("cudnn") || has("fmha") || has("flash_fwd") || has("flash_bwd") || has("conv2d_grouped") {
            KernelLibrary::CuDnn
        } else if has("triton") {
            KernelLibrary::Triton
        } else if has("cutlass") {
            KernelLibrary::Cutlass
        } else if is_xla_kernel(name) {
            KernelLibrary::Xla
        } else if has("gemm")
            || has("xmma")
            || has("sgemm")
            || has("hgemm")
            || lower.starts_with("sm90_")
            || lower.starts_with("sm80_")
            || lower.starts_with("nvjet")
        {
            KernelLibrary::CuBlas
        } else if has("rocclr") || has("__amd_") {
            KernelLibrary::Runtime
        } else if has("tensorflow") || has("eigen") {
            KernelLibrary::Framework
        } else if has("fusion") || name.ends_with(".kd") || lower.starts_with("wrapped_") || lower.starts_with("loop_")
        {
            KernelLibrary::Xla
        } else {
            KernelLibrary::Other
        }
    }

    /// Whether the library's kernels are matrix multiplies a GEMM custom call launches (cuBLAS,
    /// CUTLASS, hipBLASLt / rocBLAS).
    pub fn is_gemm(self) -> bool {
        matches!(self, KernelLibrary::CuBlas | KernelLibrary::Cutlass | KernelLibrary::HipBlas)
    }

    /// A display name: `cuBLAS`, `hipBLASLt`, `XLA`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            KernelLibrary::CuBlas => "cuBLAS",
            KernelLibrary::CuDnn => "cuDNN",
            KernelLibrary::HipBlas => "hipBLASLt/rocBLAS",
            KernelLibrary::MiOpen => "MIOpen",
            KernelLibrary::ComposableKernel => "Composable Kernel",
            KernelLibrary::Cutlass => "CUTLASS",
            KernelLibrary::Triton => "Triton",
            KernelLibrary::TransformerEngine => "Transformer Engine",
            KernelLibrary::Collectives => "NCCL/RCCL",
            KernelLibrary::Xla => "XLA",
            KernelLibrary::Framework => "framework",
            KernelLibrary::Runtime => "runtime",
            KernelLibrary::Other => "other",
        }
    }
}

/// A kernel XLA generated: named after its fusion or op (`loop_add_fusion`,
/// `gemm_fusion_dot.3.kd`, `wrapped_convert`), one identifier without C++ scopes or arguments.
fn is_xla_kernel(name: &str) -> bool {
    let base = name.strip_suffix(".kd").unwrap_or(name);
    let ident = !base.is_empty() && base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    ident
        && (base.contains("fusion")
            || base.starts_with("wrapped_")
            || base.starts_with("loop_")
            || base.starts_with("input_"))
}

/// The direction of a GPU memory copy or set, from the event name (`MemcpyH2D`, `MemcpyHtoD`,
/// `Memset`, ...); `None` for kernels.
///
/// ```
/// use xlens_roofline::{CopyKind, copy_kind};
/// assert_eq!(copy_kind("MemcpyH2D"), Some(CopyKind::HostToDevice));
/// assert_eq!(copy_kind("MemcpyDtoH"), Some(CopyKind::DeviceToHost));
/// assert_eq!(copy_kind("fusion.3"), None);
/// ```
pub fn copy_kind(name: &str) -> Option<CopyKind> {
    let n = name.to_ascii_lowercase();
    if !(n.starts_with("memcpy") || n.starts_with("memset") || n.starts_with("memcpyasync")) {
        return None;
    }
    if n.starts_with("memset") {
        return Some(CopyKind::Memset);
    }
    let d = n.trim_start_matches("memcpy");
    Some(if d.contains("h2d") || d.contains("htod") {
        CopyKind::HostToDevice
    } else if d.contains("d2h") || d.contains("dtoh") {
        CopyKind::DeviceToHost
    } else if d.contains("p2p") || d.contains("peer") {
        CopyKind::PeerToPeer
    } else {
        CopyKind::DeviceToDevice
    })
}

/// What a GPU memory operation moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CopyKind {
    /// Host memory to device memory.
    HostToDevice,
    /// Device memory to host memory.
    DeviceToHost,
    /// Within device memory.
    DeviceToDevice,
    /// Between devices.
    PeerToPeer,
    /// A memory set.
    Memset,
}

impl CopyKind {
    /// The op-profile category of the copy (`memcpy host-to-device`, ...).
    pub fn category(self) -> &'static str {
        match self {
            CopyKind::HostToDevice => MEMCPY_H2D,
            CopyKind::DeviceToHost => MEMCPY_D2H,
            CopyKind::DeviceToDevice => "memcpy device-to-device",
            CopyKind::PeerToPeer => "memcpy peer-to-peer",
            CopyKind::Memset => "memset",
        }
    }
}

/// Category of host-to-device memory copies.
pub const MEMCPY_H2D: &str = "memcpy host-to-device";
/// Category of device-to-host memory copies.
pub const MEMCPY_D2H: &str = "memcpy device-to-host";

/// The bytes of a memory copy from its `memcpy_details` stat (`size:<bytes> dest:… async:…`).
///
/// ```
/// assert_eq!(xlens_roofline::memcpy_bytes("size:6144 dest:4 async:1"), Some(6144));
/// ```
pub fn memcpy_bytes(details: &str) -> Option<u64> {
    // The first whitespace-separated token that starts with `size:`, found by a substring
    // search (the size is usually the third token, after the memory kinds) rather than by
    // splitting the string: an occurrence counts where a token starts, at 0 or after whitespace.
    // (A byte scan: `str::find` set up a two-way searcher on every call, most of the cost on
    // strings this short.)
    let mut from = 0;
    while let Some(found) = details.as_bytes()[from..].windows(5).position(|w| w == b"size:") {
        let at = from + found;
        if details[..at].chars().next_back().is_none_or(char::is_whitespace) {
            let value = &details[at + "size:".len()..];
            return value.split(char::is_whitespace).next().and_then(|v| v.parse().ok());
        }
        from = at + "size:".len();
    }
    None
}

/// The op-profile category of a GPU event that no HLO instruction names: a memory copy by its
/// direction, a collective library kernel by its collective, else `None` (the caller's
/// default).
pub fn unattributed_category(name: &str) -> Option<&'static str> {
    if let Some(kind) = copy_kind(name) {
        return Some(kind.category());
    }
    if KernelLibrary::of(name) == KernelLibrary::Collectives {
        let lower = name.to_ascii_lowercase();
        return Some(if lower.contains("allgather") {
            "all-gather"
        } else if lower.contains("reducescatter") {
            "reduce-scatter"
        } else if lower.contains("alltoall") || lower.contains("sendrecv") {
            "all-to-all"
        } else if lower.contains("broadcast") {
            "collective-broadcast"
        } else {
            "all-reduce"
        });
    }
    None
}

/// Whether a GPU kernel keeps its own name and category ([`unattributed_category`]) on a
/// TensorFlow GPU capture whose other kernels count under the TensorFlow op that launched them
/// ([`crate::OpSource::GpuStreams`]): memory copies (by direction: what the copy detectors and
/// the step anatomy's data movement read) and collective library kernels (by collective: the
/// anatomy's communication class and `exposed_collective`). XProf counts them under the op's
/// type too; here that op's type has its other kernels' time. Memsets are the op's work.
///
/// ```
/// use xlens_roofline::keeps_kernel_category;
/// assert!(keeps_kernel_category("MemcpyH2D"));
/// assert!(keeps_kernel_category("ncclKernel_AllReduce_RING_LL_Sum_float"));
/// assert!(!keeps_kernel_category("volta_sgemm_128x64_nn"));
/// ```
pub fn keeps_kernel_category(name: &str) -> bool {
    copy_kind(name).is_some_and(|k| k != CopyKind::Memset) || KernelLibrary::of(name) == KernelLibrary::Collectives
}

/// The op-profile category of a CUDA graph's kernel that no instruction names (XLA names the
/// kernels it emits after their instructions; library kernels and runtime copies keep their
/// own names): copies and collectives as for [`unattributed_category`], GEMM libraries'
/// kernels as GEMM custom calls (what their instruction would be), else `unknown`.
pub(crate) fn graph_kernel_category(name: &str) -> &'static str {
    if let Some(category) = unattributed_category(name) {
        return category;
    }
    if KernelLibrary::of(name).is_gemm() { crate::GEMM_CUSTOM_CALL } else { "unknown" }
}

/// Max FLOPs per cycle per SM by CUDA compute capability, falling back to the closest lower
/// known capability (XProf `cuda_type_utils.cc`).
pub fn gpu_flops_per_cycle_per_sm(major: u32, minor: u32) -> Option<f64> {
    const TABLE: [((u32, u32), f64); 12] = [
        ((2, 0), 64.0),
        ((3, 0), 384.0),
        ((5, 0), 256.0),
        ((6, 0), 256.0),
        ((6, 1), 256.0),
        ((7, 0), 1024.0),
        ((7, 5), 1024.0),
        ((8, 0), 2048.0),
        ((8, 6), 1024.0),
        ((8, 9), 1024.0),
        ((9, 0), 4096.0),
        ((10, 0), 8192.0),
    ];
    TABLE.iter().rev().find(|(cc, _)| *cc <= (major, minor)).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search finds what splitting on whitespace and taking the first `size:` token finds:
    /// strings of `size:`, digits, letters, colons and ASCII and Unicode whitespace.
    #[test]
    fn memcpy_bytes_reads_the_first_size_token() {
        use proptest::prelude::*;
        fn by_tokens(details: &str) -> Option<u64> {
            details.split_whitespace().find_map(|t| t.strip_prefix("size:")).and_then(|v| v.parse().ok())
        }
        let piece = prop_oneof![
            Just("size:".to_owned()),
            Just("kind_src:pinned".to_owned()),
            Just(" ".to_owned()),
            Just("\t".to_owned()),
            Just("\u{2003}".to_owned()),
            Just(":".to_owned()),
            Just("x".to_owned()),
            (0u64..100_000).prop_map(|n| n.to_string()),
        ];
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&proptest::collection::vec(piece, 0..12), |pieces| {
                let details = pieces.concat();
                prop_assert_eq!(memcpy_bytes(&details), by_tokens(&details), "{:?}", details);
                Ok(())
            })
            .unwrap();
        assert_eq!(memcpy_bytes("kind_src:pinned kind_dst:device size:8388608 dest:0 async:1"), Some(8388608));
        assert_eq!(memcpy_bytes("xsize:1 size:2"), Some(2));
        assert_eq!(memcpy_bytes("size:x size:2"), None);
    }

    #[test]
    fn mfma_tiles_need_three_groups_after_an_underscore() {
        assert!(has_mfma_tile("x_MI16x16x1"));
        assert!(has_mfma_tile("Cijk_MT64_MI32x32x8_SN"));
        assert!(!has_mfma_tile("x_MI16x16_"));
        assert!(!has_mfma_tile("MI16x16x16x1"));
    }

    #[test]
    fn details_keep_defaults_for_bad_dims() {
        let d = KernelDetails::parse("grid:2,3 block:a,b,c regs:x occ_pct:nan");
        assert_eq!((d.grid, d.block, d.registers_per_thread, d.occupancy_pct), ([1, 1, 1], [1, 1, 1], 0, None));
    }

    #[test]
    fn amd_arch_from_name_or_capability() {
        let caps = GpuCaps { vendor: Some(Vendor::Amd), compute_capability: (9, 4), ..GpuCaps::default() };
        assert_eq!(caps.model_name(), "AMD GPU - gfx942");
        let named = GpuCaps { device_name: Some("gfx90a".into()), ..caps.clone() };
        assert_eq!(named.flops_per_cycle_per_core(), Some(1024.0));
        let nv = GpuCaps { vendor: Some(Vendor::Nvidia), compute_capability: (9, 0), ..GpuCaps::default() };
        assert_eq!(nv.model_name(), "Nvidia GPU (Hopper)");
        assert_eq!(GpuCaps::default().model_name(), "GPU");
    }
}
