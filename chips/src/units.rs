//! Unit newtypes: FLOPs, FLOP/s, bytes, bytes/s and arithmetic intensity.
//!
//! **GB vs GiB.** `GB` is 10^9 bytes ([`GB`]), `GiB` is 2^30 bytes ([`GIB`]); every constructor
//! and accessor names its unit. Vendors quote *bandwidths* in decimal units (819 GB/s = 819e9
//! bytes/s), and XProf converts its GB/s peaks to GiB/s (÷ 1.073741824) before dividing measured
//! GiB/s by them, so utilisations are the same either way. HBM *capacities* are binary: HBM stacks
//! come in GiB and the Cloud TPU pages state "HBM capacity per chip (GiB)", so the catalogue stores
//! capacities with [`Bytes::from_gib`].
//!
//! ```
//! use xlens_chips::{Bytes, BytesPerSec, FlopsPerSec};
//! let bw = BytesPerSec::from_gb_per_s(819.0);
//! assert_eq!(bw.bytes_per_s(), 819e9);
//! assert!((bw.gib_per_s() - 762.75).abs() < 0.01);
//! assert_eq!(Bytes::from_gib(16).as_u64(), 17_179_869_184);
//! assert_eq!(FlopsPerSec::from_tflops(197.0).per_s() / bw.bytes_per_s(), 197e12 / 819e9);
//! ```

use std::fmt;
use std::ops::{Add, AddAssign};

/// Bytes in a decimal gigabyte (GB): 10^9.
pub const GB: u64 = 1_000_000_000;
/// Bytes in a binary gibibyte (GiB): 2^30.
pub const GIB: u64 = 1 << 30;
/// Bytes in a binary mebibyte (MiB): 2^20.
pub const MIB: u64 = 1 << 20;

/// A count of floating-point (or integer) operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Flops(pub f64);

/// An operation rate in FLOP/s (or OP/s for integer types).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct FlopsPerSec(pub f64);

/// A byte count: sizes and capacities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

/// A bandwidth in bytes per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct BytesPerSec(pub f64);

/// Arithmetic (operational) intensity in FLOPs per byte; also the unit of ridge points.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct FlopsPerByte(pub f64);

impl Flops {
    /// The count as a float.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl FlopsPerSec {
    /// From TFLOP/s (10^12 FLOP/s), the unit of XProf's `peak_teraflops_per_second`.
    pub const fn from_tflops(tflops: f64) -> Self {
        FlopsPerSec(tflops * 1e12)
    }

    /// From GFLOP/s (10^9 FLOP/s), the unit of XProf's `peak_flop_rate`.
    pub const fn from_gflops(gflops: f64) -> Self {
        FlopsPerSec(gflops * 1e9)
    }

    /// FLOP/s.
    pub const fn per_s(self) -> f64 {
        self.0
    }

    /// TFLOP/s.
    pub const fn tflops(self) -> f64 {
        self.0 / 1e12
    }

    /// GFLOP/s.
    pub const fn gflops(self) -> f64 {
        self.0 / 1e9
    }

    /// The rate scaled by a factor (for example `1.0 / cores` for a per-core figure).
    pub const fn scaled(self, factor: f64) -> Self {
        FlopsPerSec(self.0 * factor)
    }
}

impl Bytes {
    /// Zero bytes.
    pub const ZERO: Bytes = Bytes(0);

    /// From binary gibibytes (2^30 bytes each); saturates at `u64::MAX`.
    pub const fn from_gib(gib: u64) -> Self {
        Bytes(gib.saturating_mul(GIB))
    }

    /// From binary mebibytes (2^20 bytes each); saturates at `u64::MAX`.
    pub const fn from_mib(mib: u64) -> Self {
        Bytes(mib.saturating_mul(MIB))
    }

    /// From decimal gigabytes (10^9 bytes each); saturates at `u64::MAX`.
    pub const fn from_gb(gb: u64) -> Self {
        Bytes(gb.saturating_mul(GB))
    }

    /// The byte count.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// In decimal gigabytes (÷ 10^9).
    pub fn as_gb(self) -> f64 {
        self.0 as f64 / GB as f64
    }

    /// In binary gibibytes (÷ 2^30).
    pub fn as_gib(self) -> f64 {
        self.0 as f64 / GIB as f64
    }

    /// In binary mebibytes (÷ 2^20).
    pub fn as_mib(self) -> f64 {
        self.0 as f64 / MIB as f64
    }

    /// Sum, or `None` on overflow.
    pub const fn checked_add(self, other: Bytes) -> Option<Bytes> {
        match self.0.checked_add(other.0) {
            Some(b) => Some(Bytes(b)),
            None => None,
        }
    }

    /// Product with a count, or `None` on overflow.
    pub const fn checked_mul(self, n: u64) -> Option<Bytes> {
        match self.0.checked_mul(n) {
            Some(b) => Some(Bytes(b)),
            None => None,
        }
    }

    /// Division by a count, rounded up (what each of `n` shards holds); `None` when `n` is 0.
    pub const fn div_ceil(self, n: u64) -> Option<Bytes> {
        if n == 0 { None } else { Some(Bytes(self.0.div_ceil(n))) }
    }
}

impl BytesPerSec {
    /// From decimal GB/s (10^9 bytes/s), the unit of `peak_hbm_bw_gigabytes_per_second`.
    pub const fn from_gb_per_s(gb_per_s: f64) -> Self {
        BytesPerSec(gb_per_s * GB as f64)
    }

    /// From binary GiB/s (2^30 bytes/s), the unit of XProf's roofline bandwidth columns.
    pub const fn from_gib_per_s(gib_per_s: f64) -> Self {
        BytesPerSec(gib_per_s * GIB as f64)
    }

    /// From gigabits per second (10^9 bits/s), the unit of network links.
    pub const fn from_gbit_per_s(gbit_per_s: f64) -> Self {
        BytesPerSec(gbit_per_s * 1e9 / 8.0)
    }

    /// Bytes per second.
    pub const fn bytes_per_s(self) -> f64 {
        self.0
    }

    /// Decimal GB/s.
    pub const fn gb_per_s(self) -> f64 {
        self.0 / GB as f64
    }

    /// Binary GiB/s.
    pub const fn gib_per_s(self) -> f64 {
        self.0 / GIB as f64
    }

    /// The bandwidth scaled by a factor (for example `1.0 / cores` for a per-core figure).
    pub const fn scaled(self, factor: f64) -> Self {
        BytesPerSec(self.0 * factor)
    }
}

impl FlopsPerByte {
    /// FLOPs per byte.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl Add for Bytes {
    type Output = Bytes;

    /// Saturating sum (byte counts from profiles never reach `u64::MAX`).
    fn add(self, rhs: Bytes) -> Bytes {
        Bytes(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Bytes {
    fn add_assign(&mut self, rhs: Bytes) {
        *self = *self + rhs;
    }
}

impl Add for Flops {
    type Output = Flops;

    fn add(self, rhs: Flops) -> Flops {
        Flops(self.0 + rhs.0)
    }
}

impl AddAssign for Flops {
    fn add_assign(&mut self, rhs: Flops) {
        self.0 += rhs.0;
    }
}

impl fmt::Display for Bytes {
    /// Binary units: `512 B`, `1.50 KiB`, `16.00 GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut v = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        write!(f, "{v:.2} {}", UNITS[unit])
    }
}

impl fmt::Display for FlopsPerSec {
    /// In TFLOP/s: `197.0 TFLOP/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} TFLOP/s", self.tflops())
    }
}

impl fmt::Display for BytesPerSec {
    /// In decimal GB/s: `819.0 GB/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} GB/s", self.gb_per_s())
    }
}

impl fmt::Display for FlopsPerByte {
    /// `240.5 FLOP/B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} FLOP/B", self.0)
    }
}
