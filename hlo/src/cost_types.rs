//! The cost types: [`Cost`] (FLOPs, transcendentals, bytes accessed) and [`CostModel`]. The
//! rules that compute them from a module are in `cost` and `cost_gpu`.

use std::ops::{Add, AddAssign};

/// Which cost analysis to follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CostModel {
    /// XLA's `HloCostAnalysis` (what `compile().cost_analysis()` reports; TPU and CPU).
    #[default]
    Xla,
    /// XLA's GPU cost analysis as XProf runs it on GPU profiles (see the [`cost`](crate::cost) module docs).
    Gpu,
}

/// Costs of one instruction (or a sum of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cost {
    /// Floating-point (and integer) operations, FMA counted as 2.
    pub flops: u64,
    /// Transcendental function evaluations (exp, log, tanh, ...), not included in `flops`.
    pub transcendentals: u64,
    /// Bytes read and written from memory.
    pub bytes_accessed: u64,
}

impl Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops.saturating_add(o.flops),
            transcendentals: self.transcendentals.saturating_add(o.transcendentals),
            bytes_accessed: self.bytes_accessed.saturating_add(o.bytes_accessed),
        }
    }
}

impl AddAssign for Cost {
    fn add_assign(&mut self, o: Cost) {
        *self = *self + o;
    }
}

impl Cost {
    /// FLOPs per byte accessed (0 when no bytes are accessed).
    pub fn intensity(&self) -> f64 {
        if self.bytes_accessed == 0 { 0.0 } else { self.flops as f64 / self.bytes_accessed as f64 }
    }
}
