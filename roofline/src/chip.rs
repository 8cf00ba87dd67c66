//! Chips: the catalogue entry type [`ChipSpec`], and the effective [`Chip`] of a profile.
//!
//! A [`ChipSpec`] holds public datasheet figures for a whole chip (see [`crate::chips`], from
//! `xlens-chips`). A [`Chip`] holds the peaks an analysis divides by, **per core** as XProf
//! does: TPU device planes carry per-TensorCore capability stats (`peak_teraflops_per_second`,
//! `peak_hbm_bw_gigabytes_per_second`, ...), and when a profile carries them they win over the
//! catalogue. Missing stats fall back to the catalogue entry named by the plane's
//! `device_type_string`, divided by the chip's TensorCore count.

use xlens_chips::{
    Bytes, BytesPerSec, ChipSpec, Error, ErrorKind, FlopsPerByte, FlopsPerSec, MemoryKind, OnChip, Result,
};
use xlens_xplane::names::stat::{self, capability};
use xlens_xplane::{Plane, Space};

pub use crate::gpu::gpu_flops_per_cycle_per_sm;
use crate::model::Roofline;

/// Where a [`Chip`]'s peak figure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeakSource {
    /// A device capability stat of the profile.
    Profile,
    /// Derived from other profile stats (GPU: SM count × clock × FLOPs/cycle/SM).
    Derived,
    /// The catalogue entry for the device type.
    Catalogue,
}

impl PeakSource {
    /// `"profile"`, `"derived"` or `"catalogue"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PeakSource::Profile => "profile",
            PeakSource::Derived => "derived",
            PeakSource::Catalogue => "catalogue",
        }
    }
}

/// Peak rates of one core: what a roofline divides measured rates by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peaks {
    /// Peak FLOP/s (bf16 on TPUs; on GPUs XProf's fp16/fp32 tensor-core maximum).
    pub flops: FlopsPerSec,
    /// HBM bandwidth.
    pub hbm: BytesPerSec,
    /// CMEM read bandwidth (TPU v4/v5p).
    pub cmem_read: Option<BytesPerSec>,
    /// CMEM write bandwidth.
    pub cmem_write: Option<BytesPerSec>,
    /// VMEM read bandwidth (TPU).
    pub vmem_read: Option<BytesPerSec>,
    /// VMEM write bandwidth.
    pub vmem_write: Option<BytesPerSec>,
    /// Shared memory / L1 read bandwidth (GPU).
    pub sram_read: Option<BytesPerSec>,
    /// Shared memory / L1 write bandwidth.
    pub sram_write: Option<BytesPerSec>,
}

/// The effective chip of a profile (or of a catalogue entry), with per-core peaks.
///
/// ```
/// use xlens_roofline::{Chip, ChipSpec};
/// let v4 = Chip::from_spec(ChipSpec::by_name("TPU v4")?);
/// assert_eq!(v4.cores_per_chip(), 2);
/// assert_eq!(v4.peaks().flops.tflops(), 137.5); // 275 TFLOP/s per chip, 2 TensorCores
/// assert!((v4.ridge_point().get() - 229.17).abs() < 0.01);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Chip {
    spec: Option<&'static ChipSpec>,
    device_type: Option<String>,
    peaks: Peaks,
    cores_per_chip: u32,
    hbm_capacity: Option<Bytes>,
    flops_source: PeakSource,
    hbm_source: PeakSource,
    reported_hbm: Option<BytesPerSec>,
}

/// The bf16 roofline of a catalogue chip: an extension of [`ChipSpec`], which lives in
/// `xlens-chips` (a crate without the decoder) while [`Roofline`] lives here.
pub trait ChipSpecRoofline {
    /// The per-chip bf16 roofline with the on-chip memories whose bandwidths are public.
    ///
    /// ```
    /// use xlens_roofline::{ChipSpec, ChipSpecRoofline};
    /// let v5e = ChipSpec::by_name("v5e")?.roofline();
    /// assert_eq!(v5e.ridge_point(), ChipSpec::by_name("v5e")?.ridge_bf16());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn roofline(&self) -> Roofline;
}

impl ChipSpecRoofline for ChipSpec {
    fn roofline(&self) -> Roofline {
        let mut r = Roofline::from_parts(self.peak_bf16, self.hbm_bandwidth);
        for m in self.on_chip {
            if let Some((read, write)) = m.kind.roofline_resources() {
                if let Some(bw) = m.read_bandwidth {
                    r = r.push_on_chip(read, bw);
                }
                if let Some(bw) = m.write_bandwidth {
                    r = r.push_on_chip(write, bw);
                }
            }
        }
        r
    }
}

/// How far below the datasheet a reported HBM bandwidth may be and still be taken as the peak
/// (parts sold with slower memory, rounding): 10 %.
const HBM_REPORT_SLACK: f64 = 1.1;

impl Chip {
    /// The catalogue chip, with per-core peaks (chip figures ÷ TensorCores per chip).
    pub fn from_spec(spec: &'static ChipSpec) -> Chip {
        let per_core = 1.0 / f64::from(spec.cores_per_chip.max(1));
        let on_chip = |kind: MemoryKind, read: bool| {
            spec.on_chip_memory(kind)
                .and_then(|m| if read { m.read_bandwidth } else { m.write_bandwidth })
                .map(|bw| bw.scaled(per_core))
        };
        Chip {
            spec: Some(spec),
            device_type: None,
            peaks: Peaks {
                flops: spec.peak_bf16.scaled(per_core),
                hbm: spec.hbm_bandwidth.scaled(per_core),
                cmem_read: on_chip(MemoryKind::Cmem, true),
                cmem_write: on_chip(MemoryKind::Cmem, false),
                vmem_read: on_chip(MemoryKind::Vmem, true),
                vmem_write: on_chip(MemoryKind::Vmem, false),
                sram_read: on_chip(MemoryKind::SharedMemory, true),
                sram_write: on_chip(MemoryKind::SharedMemory, false),
            },
            cores_per_chip: spec.cores_per_chip.max(1),
            hbm_capacity: Some(spec.hbm_capacity),
            flops_source: PeakSource::Catalogue,
            hbm_source: PeakSource::Catalogue,
            reported_hbm: None,
        }
    }

    /// The chip of a catalogue name or alias; see [`ChipSpec::by_name`].
    pub fn by_name(name: &str) -> Result<Chip> {
        ChipSpec::by_name(name).map(Chip::from_spec)
    }

    /// The effective chip of a device plane (a TPU TensorCore or a GPU).
    ///
    /// Peaks come from the plane's capability stats when present and positive
    /// (`peak_teraflops_per_second` in TFLOP/s, `peak_hbm_bw_gigabytes_per_second` and the
    /// CMEM/VMEM/SRAM peaks in GB/s, all per core). On GPUs without a FLOP/s stat the peak is
    /// derived as XProf does: SMs × clock × FLOPs/cycle/SM for the compute capability, and HBM
    /// bandwidth from `memory_bandwidth` (bytes/s). What is still missing comes from the catalogue
    /// entry named by `device_type_string`.
    ///
    /// ```
    /// use xlens_roofline::{Chip, PeakSource};
    /// use xlens_xplane::{Space, SpaceBuilder, names::stat};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut tpu = b.plane(1, "/device:TPU:0");
    ///     let ty = tpu.stat_metadata(stat::DEVICE_TYPE_STRING);
    ///     tpu.stat(ty, "TPU v6 Lite");
    ///     let tf = tpu.stat_metadata(stat::capability::PEAK_TERAFLOPS_PER_SECOND);
    ///     tpu.stat(tf, 946.7);
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let chip = Chip::from_device_plane(space.analysis_devices()[0])?;
    /// assert_eq!(chip.spec().map(|s| s.id), Some("v6e"));
    /// assert_eq!((chip.peaks().flops.tflops(), chip.flops_source()), (946.7, PeakSource::Profile));
    /// // No HBM stat: the catalogue's 1638 GB/s fills in.
    /// assert_eq!((chip.peaks().hbm.gb_per_s(), chip.hbm_source()), (1638.0, PeakSource::Catalogue));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_device_plane(plane: &Plane) -> Result<Chip> {
        let num = |name: &str| plane.stat_by_name(name).and_then(|s| s.as_f64()).filter(|v| v.is_finite() && *v > 0.0);
        let gbps = |name: &str| num(name).map(BytesPerSec::from_gb_per_s);
        let gpu = matches!(plane.kind(), xlens_xplane::PlaneKind::Gpu { .. }).then(|| crate::gpu::GpuCaps::of(plane));
        let device_type = plane
            .stat_by_name(stat::DEVICE_TYPE_STRING)
            .and_then(|s| s.as_str())
            .map(|s| s.into_owned())
            .or_else(|| gpu.as_ref().map(|g| g.model_name()));
        let spec = device_type.as_deref().and_then(ChipSpec::lookup).or_else(|| {
            // A GPU plane names its architecture (`gfx942`), not its product: known by its
            // vendor, SM or CU count and memory size.
            let g = gpu.as_ref()?;
            let units = (g.cores > 0.0 && g.cores <= f64::from(u32::MAX)).then_some(g.cores as u32)?;
            ChipSpec::by_gpu(g.vendor?, units, g.memory_size)
        });
        let fallback = spec.map(Chip::from_spec);
        let gpu_peak = gpu.as_ref().and_then(|g| g.peak_flops_per_s()).map(|f| FlopsPerSec::from_gflops(f / 1e9));
        let gpu_shared = gpu.as_ref().and_then(|g| g.shared_memory_bytes_per_s()).map(BytesPerSec);

        let (flops, flops_source) = match num(capability::PEAK_TERAFLOPS_PER_SECOND) {
            Some(tf) => (Some(FlopsPerSec::from_tflops(tf)), PeakSource::Profile),
            None => match gpu_peak {
                Some(f) => (Some(f), PeakSource::Derived),
                None => (fallback.as_ref().map(|c| c.peaks.flops), PeakSource::Catalogue),
            },
        };
        let (hbm, hbm_source) = match gbps(capability::PEAK_HBM_BW_GIGABYTES_PER_SECOND) {
            Some(bw) => (Some(bw), PeakSource::Profile),
            None => match num(capability::MEMORY_BANDWIDTH) {
                Some(bps) => (Some(BytesPerSec(bps)), PeakSource::Profile),
                None => (fallback.as_ref().map(|c| c.peaks.hbm), PeakSource::Catalogue),
            },
        };
        // A reported bandwidth below the datasheet's is not the chip's peak: ROCm reports half
        // the HBM bandwidth of an MI300X (2.66 of 5.3 TB/s) and of an MI355X (4.1 of 8 TB/s),
        // and measured ops move more than it. The datasheet's figure is the peak; the reported
        // one is kept as XProf's ([`Chip::reported_hbm`]).
        let datasheet_hbm = spec.map(|s| s.hbm_bandwidth.scaled(1.0 / f64::from(s.cores_per_chip.max(1))));
        let (hbm, hbm_source, reported_hbm) = match (hbm, datasheet_hbm) {
            (Some(reported), Some(sheet))
                if hbm_source == PeakSource::Profile
                    && reported.bytes_per_s() < sheet.bytes_per_s() / HBM_REPORT_SLACK =>
            {
                (Some(sheet), PeakSource::Catalogue, Some(reported))
            }
            (hbm, _) => (hbm, hbm_source, None),
        };
        let (Some(flops), Some(hbm)) = (flops, hbm) else {
            return Err(Error::new(ErrorKind::NoPeaks { plane: plane.name().to_owned(), device_type }));
        };
        let fb = fallback.as_ref().map(|c| c.peaks);
        let pick = |name: &str, fallback: Option<BytesPerSec>| gbps(name).or(fallback);
        let peaks = Peaks {
            flops,
            hbm,
            cmem_read: pick(capability::PEAK_CMEM_RD_BW_GIGABYTES_PER_SECOND, fb.and_then(|p| p.cmem_read)),
            cmem_write: pick(capability::PEAK_CMEM_WR_BW_GIGABYTES_PER_SECOND, fb.and_then(|p| p.cmem_write)),
            vmem_read: pick(capability::PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND, fb.and_then(|p| p.vmem_read)),
            vmem_write: pick(capability::PEAK_VMEM_WR_BW_GIGABYTES_PER_SECOND, fb.and_then(|p| p.vmem_write)),
            sram_read: pick(
                capability::PEAK_SRAM_RD_BW_GIGABYTES_PER_SECOND,
                gpu_shared.or(fb.and_then(|p| p.sram_read)),
            ),
            sram_write: pick(
                capability::PEAK_SRAM_WR_BW_GIGABYTES_PER_SECOND,
                gpu_shared.or(fb.and_then(|p| p.sram_write)),
            ),
        };
        let hbm_capacity = num(capability::MEMORY_SIZE).map(|b| Bytes(b as u64)).or(spec.map(|s| s.hbm_capacity));
        Ok(Chip {
            spec,
            device_type,
            peaks,
            cores_per_chip: spec.map_or(1, |s| s.cores_per_chip.max(1)),
            hbm_capacity,
            flops_source,
            hbm_source,
            reported_hbm,
        })
    }

    /// The chip of a host's profile: its first analysis device (TPU TensorCore, else GPU).
    pub fn from_space(space: &Space) -> Result<Chip> {
        match space.analysis_devices().first() {
            Some(plane) => Chip::from_device_plane(plane),
            None => Err(Error::new(ErrorKind::NoPeaks { plane: String::new(), device_type: None })),
        }
    }

    /// The catalogue entry, when the device type is known.
    pub fn spec(&self) -> Option<&'static ChipSpec> {
        self.spec
    }

    /// The profile's `device_type_string`, for chips built from a plane.
    pub fn device_type(&self) -> Option<&str> {
        self.device_type.as_deref()
    }

    /// A display name: the catalogue name, else the device type, else `"unknown"`.
    pub fn name(&self) -> &str {
        self.spec.map(|s| s.name).or(self.device_type.as_deref()).unwrap_or("unknown")
    }

    /// Per-core peaks.
    pub fn peaks(&self) -> &Peaks {
        &self.peaks
    }

    /// Cores (device planes) per chip: TensorCores for TPUs, 1 for GPUs and unknown chips.
    pub fn cores_per_chip(&self) -> u32 {
        self.cores_per_chip
    }

    /// HBM capacity per chip (the `memory_size` stat, else the catalogue).
    pub fn hbm_capacity(&self) -> Option<Bytes> {
        self.hbm_capacity
    }

    /// Where the FLOP/s peak came from.
    pub fn flops_source(&self) -> PeakSource {
        self.flops_source
    }

    /// Where the HBM bandwidth peak came from.
    pub fn hbm_source(&self) -> PeakSource {
        self.hbm_source
    }

    /// The HBM bandwidth the profile reports when it is below the catalogue chip's datasheet
    /// figure, which [`peaks`](Self::peaks) uses instead (`None` when the profile's figure is
    /// the peak): what XProf divides by.
    pub fn reported_hbm(&self) -> Option<BytesPerSec> {
        self.reported_hbm
    }

    /// Per-core HBM ridge point: peak FLOP/s ÷ HBM bytes/s.
    pub fn ridge_point(&self) -> FlopsPerByte {
        FlopsPerByte(self.peaks.flops.per_s() / self.peaks.hbm.bytes_per_s())
    }

    /// The per-core roofline, with on-chip resources chosen as XProf does: TPU CMEM when the
    /// chip has CMEM, else VMEM; GPU shared memory / L1.
    pub fn roofline(&self) -> Roofline {
        let p = &self.peaks;
        let on_chip = if p.cmem_read.is_some() || p.cmem_write.is_some() {
            [(OnChip::CmemRead, p.cmem_read), (OnChip::CmemWrite, p.cmem_write)]
        } else {
            [(OnChip::VmemRead, p.vmem_read), (OnChip::VmemWrite, p.vmem_write)]
        };
        let sram = [(OnChip::SramRead, p.sram_read), (OnChip::SramWrite, p.sram_write)];
        on_chip
            .into_iter()
            .chain(sram)
            .filter_map(|(res, bw)| bw.map(|bw| (res, bw)))
            .fold(Roofline::from_parts(p.flops, p.hbm), |r, (res, bw)| r.push_on_chip(res, bw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_table_falls_back_to_lower_capability() {
        assert_eq!(gpu_flops_per_cycle_per_sm(9, 0), Some(4096.0));
        assert_eq!(gpu_flops_per_cycle_per_sm(8, 7), Some(1024.0)); // 8.6
        assert_eq!(gpu_flops_per_cycle_per_sm(12, 0), Some(8192.0)); // 10.0
        assert_eq!(gpu_flops_per_cycle_per_sm(1, 0), None);
    }
}
