//! The device peaks a profile reports about itself (XProf's `PerfEnv`).
//!
//! libtpu writes per-TensorCore capability stats on each device plane; XProf copies them into
//! its performance environment and derives every utilisation from them (facts §2.4, §4.3, §4.4).
//! Units follow the stats: TFLOP/s and GB/s (10^9 bytes/s); bandwidth utilisations compare GiB/s
//! with GiB/s, which is the same ratio.

use xlens_xplane::{Plane, names::stat::capability as cap};

/// Peaks of one core as the profile reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PerfEnv {
    /// Peak FLOP/s per core (`peak_teraflops_per_second` × 1e12).
    pub peak_flops_per_s: f64,
    /// Peak HBM bandwidth per core in bytes/s (`peak_hbm_bw_gigabytes_per_second` × 1e9).
    pub peak_hbm_bytes_per_s: f64,
    /// Peak on-chip read bandwidth in bytes/s (CMEM when present, else merged VMEM), 0 if unknown.
    pub peak_onchip_read_bytes_per_s: f64,
    /// Peak on-chip write bandwidth in bytes/s, 0 if unknown.
    pub peak_onchip_write_bytes_per_s: f64,
    /// The HBM bandwidth the profile reports, in bytes/s, where it is below the chip's
    /// datasheet figure that [`peak_hbm_bytes_per_s`](Self::peak_hbm_bytes_per_s) holds
    /// ([`crate::Chip::reported_hbm`]); 0 when the two agree. XProf divides by it.
    #[cfg_attr(feature = "serde", serde(default))]
    pub reported_hbm_bytes_per_s: f64,
}

impl PerfEnv {
    /// Reads the capability stats of a device plane; `None` when it reports no FLOP/s peak.
    ///
    /// ```
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// use xlens_roofline::PerfEnv;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// let env = PerfEnv::from_plane(space.tpu_tensor_cores()[0]).unwrap();
    /// assert_eq!(env.peak_flops_per_s, 197e12);
    /// assert!((env.hbm_ridge_point() - 240.537).abs() < 1e-3);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_plane(plane: &Plane) -> Option<PerfEnv> {
        // A peak that is not a positive finite number is no peak (see [`PerfEnv::odd_peaks`]).
        let get = |name: &str| {
            plane.stat_by_name(name).and_then(|s| s.as_f64()).filter(|v| v.is_finite() && *v > 0.0).unwrap_or(0.0)
        };
        let tflops = get(cap::PEAK_TERAFLOPS_PER_SECOND);
        if tflops <= 0.0 {
            return None;
        }
        let gbps = |name: &str| get(name) * 1e9;
        let (cmem_rd, cmem_wr) =
            (gbps(cap::PEAK_CMEM_RD_BW_GIGABYTES_PER_SECOND), gbps(cap::PEAK_CMEM_WR_BW_GIGABYTES_PER_SECOND));
        let merged_vmem = get(cap::HAS_MERGED_VMEM) != 0.0;
        let (onchip_rd, onchip_wr) = if cmem_rd > 0.0 || cmem_wr > 0.0 {
            (cmem_rd, cmem_wr)
        } else if merged_vmem {
            (gbps(cap::PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND), gbps(cap::PEAK_VMEM_WR_BW_GIGABYTES_PER_SECOND))
        } else {
            (0.0, 0.0)
        };
        Some(PerfEnv {
            peak_flops_per_s: tflops * 1e12,
            peak_hbm_bytes_per_s: gbps(cap::PEAK_HBM_BW_GIGABYTES_PER_SECOND),
            peak_onchip_read_bytes_per_s: onchip_rd,
            peak_onchip_write_bytes_per_s: onchip_wr,
            reported_hbm_bytes_per_s: 0.0,
        })
    }

    /// The capability stats of a device plane that hold an impossible peak (negative, zero
    /// where a peak is given, NaN or infinite), as `name = value`: they are ignored, and a scan
    /// warns about them.
    ///
    /// ```
    /// use xlens_testkit::synth::{fixture, tpu_profile};
    /// use xlens_xplane::Space;
    /// use xlens_roofline::PerfEnv;
    /// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
    /// assert!(PerfEnv::odd_peaks(space.tpu_tensor_cores()[0]).is_empty());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn odd_peaks(plane: &Plane) -> Vec<String> {
        [
            cap::PEAK_TERAFLOPS_PER_SECOND,
            cap::PEAK_HBM_BW_GIGABYTES_PER_SECOND,
            cap::PEAK_CMEM_RD_BW_GIGABYTES_PER_SECOND,
            cap::PEAK_CMEM_WR_BW_GIGABYTES_PER_SECOND,
            cap::PEAK_VMEM_RD_BW_GIGABYTES_PER_SECOND,
            cap::PEAK_VMEM_WR_BW_GIGABYTES_PER_SECOND,
        ]
        .into_iter()
        .filter_map(|name| {
            let v = plane.stat_by_name(name)?.as_f64()?;
            (!v.is_finite() || v < 0.0).then(|| format!("{name} = {v}"))
        })
        .collect()
    }

    /// The peaks of a chip as a performance environment: for a GPU, the derived peaks of its
    /// capability stats, with shared memory (XProf's `SRAM`) as the on-chip memory.
    pub fn from_chip(chip: &crate::Chip) -> PerfEnv {
        let p = chip.peaks();
        let bw = |b: Option<crate::BytesPerSec>| b.map_or(0.0, |b| b.bytes_per_s());
        let (read, write) = if p.cmem_read.is_some() || p.cmem_write.is_some() {
            (bw(p.cmem_read), bw(p.cmem_write))
        } else if p.vmem_read.is_some() || p.vmem_write.is_some() {
            (bw(p.vmem_read), bw(p.vmem_write))
        } else {
            (bw(p.sram_read), bw(p.sram_write))
        };
        PerfEnv {
            peak_flops_per_s: p.flops.per_s(),
            peak_hbm_bytes_per_s: p.hbm.bytes_per_s(),
            peak_onchip_read_bytes_per_s: read,
            peak_onchip_write_bytes_per_s: write,
            reported_hbm_bytes_per_s: chip.reported_hbm().map_or(0.0, |b| b.bytes_per_s()),
        }
    }

    /// The environment XProf computes with: the HBM bandwidth the profile reports where it is
    /// below the datasheet's ([`reported_hbm_bytes_per_s`](Self::reported_hbm_bytes_per_s)).
    pub fn xprof(&self) -> PerfEnv {
        match self.reported_hbm_bytes_per_s {
            r if r > 0.0 => PerfEnv { peak_hbm_bytes_per_s: r, reported_hbm_bytes_per_s: 0.0, ..*self },
            _ => *self,
        }
    }

    /// HBM ridge point in FLOP/byte: peak FLOP/s ÷ peak HBM bytes/s.
    pub fn hbm_ridge_point(&self) -> f64 {
        if self.peak_hbm_bytes_per_s > 0.0 { self.peak_flops_per_s / self.peak_hbm_bytes_per_s } else { 0.0 }
    }
}
