//! Newtypes for ids and time.
//!
//! Ids are only meaningful inside the plane (or space) that issued them.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_newtype!(
    /// The `id` of an XPlane.
    PlaneId
);
id_newtype!(
    /// The `id` of an XLine (on host planes, the thread id; may be negative).
    LineId
);
id_newtype!(
    /// The id of an XEventMetadata entry within its plane.
    EventMetadataId
);
id_newtype!(
    /// The id of an XStatMetadata entry within its plane.
    StatMetadataId
);

/// A time or duration in picoseconds, the unit XSpace stores.
///
/// Absolute times are `line.timestamp_ns * 1000 + event.offset_ps`, on the profile's clock.
/// Conversions to coarser units happen only at the output edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct Picos(pub i64);

impl Picos {
    /// Zero picoseconds.
    pub const ZERO: Picos = Picos(0);

    /// From nanoseconds (saturating).
    pub fn from_ns(ns: i64) -> Picos {
        Picos(ns.saturating_mul(1_000))
    }

    /// As (fractional) nanoseconds.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// As (fractional) microseconds.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// As (fractional) milliseconds.
    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// As (fractional) seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }

    /// Saturating addition.
    #[inline(always)]
    pub fn saturating_add(self, other: Picos) -> Picos {
        Picos(add_saturating(self.0, other.0))
    }

    /// Saturating subtraction.
    #[inline(always)]
    pub fn saturating_sub(self, other: Picos) -> Picos {
        Picos(sub_saturating(self.0, other.0))
    }
}

// Saturating arithmetic written as a checked operation with an out-of-line saturation: the
// result is the add's (or sub's), and the overflow a jump predicted not taken. `saturating_add`
// itself computes the saturated value and selects on every call, three dependent instructions
// where one does: 9 % of the TPU op-line walk, which adds a dozen durations an op.
#[inline(always)]
fn add_saturating(a: i64, b: i64) -> i64 {
    match a.checked_add(b) {
        Some(v) => v,
        None => saturated(a, b, i64::saturating_add),
    }
}

#[inline(always)]
fn sub_saturating(a: i64, b: i64) -> i64 {
    match a.checked_sub(b) {
        Some(v) => v,
        None => saturated(a, b, i64::saturating_sub),
    }
}

#[cold]
#[inline(never)]
fn saturated(a: i64, b: i64, op: fn(i64, i64) -> i64) -> i64 {
    op(a, b)
}

impl Add for Picos {
    type Output = Picos;
    #[inline(always)]
    fn add(self, rhs: Picos) -> Picos {
        Picos(add_saturating(self.0, rhs.0))
    }
}

impl AddAssign for Picos {
    #[inline(always)]
    fn add_assign(&mut self, rhs: Picos) {
        self.0 = add_saturating(self.0, rhs.0);
    }
}

impl Sub for Picos {
    type Output = Picos;
    #[inline(always)]
    fn sub(self, rhs: Picos) -> Picos {
        Picos(sub_saturating(self.0, rhs.0))
    }
}

impl SubAssign for Picos {
    #[inline(always)]
    fn sub_assign(&mut self, rhs: Picos) {
        self.0 = sub_saturating(self.0, rhs.0);
    }
}

impl std::iter::Sum for Picos {
    fn sum<I: Iterator<Item = Picos>>(iter: I) -> Picos {
        iter.fold(Picos::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Picos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ps", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `+`, `-`, `+=`, `-=` and the named forms saturate as `i64`'s own do, at both ends and
    /// between (the checked form with the saturation out of line gives the same values).
    #[test]
    fn picos_arithmetic_saturates_as_i64_does() {
        let edges = [i64::MIN, i64::MIN + 1, -1_000_000, -1, 0, 1, 1_000_000, i64::MAX - 1, i64::MAX];
        for &a in &edges {
            for &b in &edges {
                let (pa, pb) = (Picos(a), Picos(b));
                assert_eq!((pa + pb).0, a.saturating_add(b), "{a} + {b}");
                assert_eq!((pa - pb).0, a.saturating_sub(b), "{a} - {b}");
                assert_eq!(pa.saturating_add(pb).0, a.saturating_add(b));
                assert_eq!(pa.saturating_sub(pb).0, a.saturating_sub(b));
                let (mut x, mut y) = (pa, pa);
                x += pb;
                y -= pb;
                assert_eq!((x.0, y.0), (a.saturating_add(b), a.saturating_sub(b)), "{a} +=/-= {b}");
            }
        }
    }

    #[test]
    fn unit_conversions() {
        let t = Picos(1_500_000_000);
        assert_eq!(t.as_ms_f64(), 1.5);
        assert_eq!(t.as_us_f64(), 1500.0);
        assert_eq!(Picos::from_ns(3), Picos(3000));
        assert_eq!(Picos(i64::MAX) + Picos(1), Picos(i64::MAX));
    }
}
