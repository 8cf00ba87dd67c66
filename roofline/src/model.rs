//! Roofline math: arithmetic intensity, attainable FLOP/s, what bounds a piece of work, and its
//! efficiency.
//!
//! Two equivalent views, both from XProf (facts §4.4):
//!
//! - **Ridge test.** A kernel with arithmetic intensity (FLOPs per HBM byte) below the ridge
//!   point (peak FLOP/s ÷ HBM bytes/s) is HBM-bound, at or above it compute-bound
//!   ([`Roofline::bound_at`]); it can reach at most `min(peak, intensity × bandwidth)`
//!   ([`Roofline::attainable`]).
//! - **Utilisations.** For measured work ([`Work`]: FLOPs, bytes per memory, time), each resource's
//!   utilisation is its measured rate ÷ its peak; the largest one is what bounds the work
//!   (`bound_by`), and the efficiency is that largest utilisation ([`Roofline::analyze`]). With
//!   only compute and HBM this is the ridge test again: FLOP utilisation > HBM utilisation exactly
//!   when intensity > ridge.
//!
//! ```
//! use xlens_roofline::{Bound, ChipSpec, ChipSpecRoofline, FlopsPerByte};
//! let v5e = ChipSpec::by_name("v5e")?.roofline();
//! assert!((v5e.ridge_point().get() - 240.5).abs() < 0.05);
//! // Intensity 170 FLOP/B is under the ridge: bandwidth-bound, at 170 × 819e9 FLOP/s.
//! assert_eq!(v5e.bound_at(FlopsPerByte(170.0)), Bound::Hbm);
//! assert_eq!(v5e.attainable(FlopsPerByte(170.0)).per_s(), 170.0 * 819e9);
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use xlens_chips::{Bytes, BytesPerSec, Error, Flops, FlopsPerByte, FlopsPerSec, OnChip, Result};
use xlens_xplane::Picos;

/// What bounds a piece of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// The matrix/vector units: intensity at or above the ridge point.
    Compute,
    /// HBM bandwidth: intensity below the ridge point.
    Hbm,
    /// An on-chip memory's bandwidth.
    OnChip(OnChip),
}

impl Bound {
    /// XProf's `bound_by` label: `"Compute"`, `"HBM"`, or the on-chip label.
    pub fn label(self) -> &'static str {
        match self {
            Bound::Compute => "Compute",
            Bound::Hbm => "HBM",
            Bound::OnChip(m) => m.label(),
        }
    }

    /// True for any memory bound (HBM or on-chip).
    pub fn is_memory(self) -> bool {
        !matches!(self, Bound::Compute)
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Peak compute and bandwidths that bound performance: one core's (from a [`crate::Chip`]) or
/// one chip's (from a [`crate::ChipSpec`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Roofline {
    peak_flops: FlopsPerSec,
    hbm: BytesPerSec,
    on_chip: Vec<(OnChip, BytesPerSec)>,
}

/// Measured work: what an op (or a program, or a step) did and how long it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Work {
    /// FLOPs executed.
    pub flops: Flops,
    /// Bytes read from and written to HBM.
    pub hbm_bytes: Bytes,
    /// Bytes moved per on-chip resource (zero or absent when unknown).
    pub on_chip_bytes: Vec<(OnChip, Bytes)>,
    /// Time taken.
    pub time: Picos,
}

/// The roofline analysis of one [`Work`].
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Measured FLOP/s (0 when the time is 0).
    pub flop_rate: FlopsPerSec,
    /// FLOPs per HBM byte; `None` without HBM bytes.
    pub intensity: Option<FlopsPerByte>,
    /// The roof at that intensity, `min(peak, intensity × HBM bandwidth)` (the peak without HBM
    /// bytes).
    pub attainable: FlopsPerSec,
    /// Measured FLOP/s ÷ peak FLOP/s (not capped: above 1 means the peak is wrong).
    pub flop_utilization: f64,
    /// Measured HBM bytes/s ÷ peak HBM bytes/s (not capped).
    pub hbm_utilization: f64,
    /// Measured ÷ peak for each on-chip resource with bytes and a peak.
    pub on_chip_utilization: Vec<(OnChip, f64)>,
    /// The resource with the largest utilisation; `None` when nothing was measured (no time, or
    /// no FLOPs and no bytes).
    pub bound: Option<Bound>,
    /// FLOPs per byte of the bounding resource (FLOPs per HBM byte when compute-bound).
    pub bound_intensity: Option<FlopsPerByte>,
    /// XProf's roofline efficiency: the largest utilisation.
    pub efficiency: f64,
}

/// FLOPs per byte; `None` when `bytes` is 0.
///
/// ```
/// use xlens_roofline::{Bytes, Flops, arithmetic_intensity};
/// // A bf16 [4096,4096] x [4096,4096] matmul reads two and writes one 32 MiB matrix.
/// let n = 4096.0_f64;
/// let oi = arithmetic_intensity(Flops(2.0 * n * n * n), Bytes(3 * 2 * 4096 * 4096)).unwrap();
/// assert!((oi.get() - 1365.33).abs() < 0.01);
/// assert_eq!(arithmetic_intensity(Flops(1.0), Bytes(0)), None);
/// ```
pub fn arithmetic_intensity(flops: Flops, bytes: Bytes) -> Option<FlopsPerByte> {
    (bytes.0 > 0).then(|| FlopsPerByte(flops.0 / bytes.0 as f64))
}

impl Roofline {
    /// A roofline from peak FLOP/s and HBM bandwidth; both must be positive and finite.
    ///
    /// ```
    /// use xlens_roofline::{BytesPerSec, FlopsPerSec, Roofline};
    /// let r = Roofline::new(FlopsPerSec::from_tflops(918.0), BytesPerSec::from_gb_per_s(1638.0))?;
    /// assert!((r.ridge_point().get() - 560.44).abs() < 0.01);
    /// assert!(Roofline::new(FlopsPerSec(0.0), BytesPerSec(1.0)).is_err());
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(peak_flops: FlopsPerSec, hbm: BytesPerSec) -> Result<Roofline> {
        check_positive("peak FLOP/s", peak_flops.0)?;
        check_positive("HBM bandwidth", hbm.0)?;
        Ok(Roofline::from_parts(peak_flops, hbm))
    }

    /// The same roofline with an on-chip resource's peak bandwidth (replacing an earlier one).
    pub fn with_on_chip(self, resource: OnChip, bandwidth: BytesPerSec) -> Result<Roofline> {
        check_positive(resource.label(), bandwidth.0)?;
        Ok(self.push_on_chip(resource, bandwidth))
    }

    /// Without validation, for figures known to be positive (catalogue, filtered plane stats).
    pub(crate) fn from_parts(peak_flops: FlopsPerSec, hbm: BytesPerSec) -> Roofline {
        Roofline { peak_flops, hbm, on_chip: Vec::new() }
    }

    pub(crate) fn push_on_chip(mut self, resource: OnChip, bandwidth: BytesPerSec) -> Roofline {
        self.on_chip.retain(|(r, _)| *r != resource);
        self.on_chip.push((resource, bandwidth));
        self.on_chip.sort_by_key(|(r, _)| *r);
        self
    }

    /// Peak FLOP/s.
    pub fn peak_flops(&self) -> FlopsPerSec {
        self.peak_flops
    }

    /// Peak HBM bandwidth.
    pub fn hbm_bandwidth(&self) -> BytesPerSec {
        self.hbm
    }

    /// On-chip resources and their peak bandwidths, in [`OnChip`] order.
    pub fn on_chip(&self) -> &[(OnChip, BytesPerSec)] {
        &self.on_chip
    }

    /// The peak bandwidth of an on-chip resource, if modelled.
    pub fn on_chip_bandwidth(&self, resource: OnChip) -> Option<BytesPerSec> {
        self.on_chip.iter().find(|(r, _)| *r == resource).map(|(_, bw)| *bw)
    }

    /// The HBM ridge point: peak FLOP/s ÷ HBM bytes/s.
    pub fn ridge_point(&self) -> FlopsPerByte {
        FlopsPerByte(self.peak_flops.0 / self.hbm.0)
    }

    /// The ridge point of an on-chip resource: peak FLOP/s ÷ its bytes/s.
    pub fn on_chip_ridge_point(&self, resource: OnChip) -> Option<FlopsPerByte> {
        self.on_chip_bandwidth(resource).map(|bw| FlopsPerByte(self.peak_flops.0 / bw.0))
    }

    /// The roof at an arithmetic intensity: `min(peak, intensity × HBM bandwidth)`. Negative or
    /// NaN intensities count as 0.
    pub fn attainable(&self, intensity: FlopsPerByte) -> FlopsPerSec {
        let oi = if intensity.0 > 0.0 { intensity.0 } else { 0.0 };
        FlopsPerSec((oi * self.hbm.0).min(self.peak_flops.0))
    }

    /// The ridge test: HBM-bound below the ridge point, compute-bound at or above it.
    pub fn bound_at(&self, intensity: FlopsPerByte) -> Bound {
        if intensity.0 >= self.ridge_point().0 { Bound::Compute } else { Bound::Hbm }
    }

    /// [`attainable`](Self::attainable) ÷ peak: the fraction of peak FLOP/s an intensity allows.
    pub fn attainable_fraction(&self, intensity: FlopsPerByte) -> f64 {
        self.attainable(intensity).0 / self.peak_flops.0
    }

    /// Utilisations, bound and efficiency of measured work, as XProf's roofline model computes
    /// them: utilisation = measured rate ÷ peak per resource, the largest wins (compute, then
    /// HBM, then on-chip resources in [`OnChip`] order; a later one must be strictly larger), and
    /// efficiency = that largest utilisation.
    ///
    /// ```
    /// use xlens_roofline::{Bound, Bytes, ChipSpec, ChipSpecRoofline, Flops, Work};
    /// use xlens_xplane::Picos;
    /// let v5e = ChipSpec::by_name("v5e")?.roofline();
    /// // 170 FLOP/B, running at 60% of HBM bandwidth for 1 ms.
    /// let bytes = 0.6 * 819e9 * 1e-3;
    /// let work = Work { flops: Flops(170.0 * bytes), hbm_bytes: Bytes(bytes as u64), time: Picos(1_000_000_000), ..Work::default() };
    /// let a = v5e.analyze(&work);
    /// assert_eq!(a.bound, Some(Bound::Hbm));
    /// assert!((a.efficiency - 0.6).abs() < 1e-9);
    /// assert!((a.flop_utilization - 0.6 * 170.0 / 240.54).abs() < 1e-4);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn analyze(&self, work: &Work) -> Analysis {
        let seconds = work.time.0 as f64 * 1e-12;
        let rate = |amount: f64| if seconds > 0.0 { amount / seconds } else { 0.0 };
        let flop_rate = FlopsPerSec(rate(work.flops.0.max(0.0)));
        let intensity = arithmetic_intensity(work.flops, work.hbm_bytes);
        let attainable = intensity.map_or(self.peak_flops, |oi| self.attainable(oi));
        let flop_utilization = flop_rate.0 / self.peak_flops.0;
        let hbm_utilization = rate(work.hbm_bytes.0 as f64) / self.hbm.0;
        let on_chip_utilization: Vec<(OnChip, f64)> = self
            .on_chip
            .iter()
            .filter_map(|&(res, bw)| {
                let bytes = work.on_chip_bytes.iter().filter(|(r, _)| *r == res).map(|(_, b)| b.0).sum::<u64>();
                (bytes > 0).then(|| (res, rate(bytes as f64) / bw.0))
            })
            .collect();

        let mut best: Option<(Bound, f64)> = None;
        let mut consider = |bound: Bound, util: f64| {
            if util > best.map_or(0.0, |(_, u)| u) {
                best = Some((bound, util));
            }
        };
        consider(Bound::Compute, flop_utilization);
        consider(Bound::Hbm, hbm_utilization);
        for &(res, util) in &on_chip_utilization {
            consider(Bound::OnChip(res), util);
        }
        let bound = best.map(|(b, _)| b);
        let bound_intensity = match bound {
            Some(Bound::OnChip(res)) => {
                let bytes = work.on_chip_bytes.iter().filter(|(r, _)| *r == res).map(|(_, b)| b.0).sum::<u64>();
                arithmetic_intensity(work.flops, Bytes(bytes))
            }
            Some(_) => intensity,
            None => None,
        };
        Analysis {
            flop_rate,
            intensity,
            attainable,
            flop_utilization,
            hbm_utilization,
            on_chip_utilization,
            bound,
            bound_intensity,
            efficiency: best.map_or(0.0, |(_, u)| u),
        }
    }
}

fn check_positive(what: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 { Ok(()) } else { Err(Error::not_positive(what, value)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v5e() -> Roofline {
        Roofline::new(FlopsPerSec::from_tflops(197.0), BytesPerSec::from_gb_per_s(819.0)).unwrap()
    }

    #[test]
    fn nothing_measured_has_no_bound() {
        let a = v5e().analyze(&Work::default());
        assert_eq!((a.bound, a.efficiency, a.intensity), (None, 0.0, None));
        let a = v5e().analyze(&Work { flops: Flops(1e9), ..Work::default() });
        assert_eq!(a.bound, None, "zero time gives no rates");
    }

    #[test]
    fn on_chip_resource_can_win() {
        let r = v5e().with_on_chip(OnChip::VmemRead, BytesPerSec::from_gb_per_s(10_000.0)).unwrap();
        // 1 µs: 0.5 GB of VMEM reads = 5e14 B/s = 50 x the VMEM peak; HBM at 10%.
        let work = Work {
            flops: Flops(1e6),
            hbm_bytes: Bytes(81_900),
            on_chip_bytes: vec![(OnChip::VmemRead, Bytes(500_000_000))],
            time: Picos(1_000_000),
        };
        let a = r.analyze(&work);
        assert_eq!(a.bound, Some(Bound::OnChip(OnChip::VmemRead)));
        assert!((a.efficiency - 50.0).abs() < 1e-9);
        assert!((a.hbm_utilization - 0.1).abs() < 1e-9);
        assert_eq!(a.bound_intensity, Some(FlopsPerByte(1e6 / 5e8)));
        assert_eq!(a.on_chip_utilization.len(), 1);
    }

    #[test]
    fn replacing_an_on_chip_peak_keeps_one_entry() {
        let r = v5e()
            .with_on_chip(OnChip::VmemWrite, BytesPerSec(2.0))
            .unwrap()
            .with_on_chip(OnChip::VmemRead, BytesPerSec(1.0))
            .unwrap()
            .with_on_chip(OnChip::VmemWrite, BytesPerSec(3.0))
            .unwrap();
        assert_eq!(r.on_chip(), &[(OnChip::VmemRead, BytesPerSec(1.0)), (OnChip::VmemWrite, BytesPerSec(3.0))]);
        assert!(r.clone().with_on_chip(OnChip::CmemRead, BytesPerSec(f64::NAN)).is_err());
    }
}
