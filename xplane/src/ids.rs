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
    pub fn saturating_add(self, other: Picos) -> Picos {
        Picos(self.0.saturating_add(other.0))
    }

    /// Saturating subtraction.
    pub fn saturating_sub(self, other: Picos) -> Picos {
        Picos(self.0.saturating_sub(other.0))
    }
}

impl Add for Picos {
    type Output = Picos;
    fn add(self, rhs: Picos) -> Picos {
        Picos(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Picos {
    fn add_assign(&mut self, rhs: Picos) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for Picos {
    type Output = Picos;
    fn sub(self, rhs: Picos) -> Picos {
        Picos(self.0.saturating_sub(rhs.0))
    }
}

impl SubAssign for Picos {
    fn sub_assign(&mut self, rhs: Picos) {
        self.0 = self.0.saturating_sub(rhs.0);
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

    #[test]
    fn unit_conversions() {
        let t = Picos(1_500_000_000);
        assert_eq!(t.as_ms_f64(), 1.5);
        assert_eq!(t.as_us_f64(), 1500.0);
        assert_eq!(Picos::from_ns(3), Picos(3000));
        assert_eq!(Picos(i64::MAX) + Picos(1), Picos(i64::MAX));
    }
}
