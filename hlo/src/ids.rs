//! Typed ids of instructions and computations.
//!
//! [`InstrId`] and [`CompId`] index the arenas of one [`crate::Module`]; they are only meaningful
//! inside the module that issued them. [`UniqueId`] is the 64-bit id XLA itself stores.

use std::fmt;

/// An instruction of a [`crate::Module`]: its index in the module's instruction arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstrId(pub u32);

/// A computation of a [`crate::Module`]: its index in the module's computation list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CompId(pub u32);

impl InstrId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl CompId {
    /// The computation-list index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The id XLA stores on an instruction (`HloInstructionProto.id`).
///
/// XLA's "unique ids" pack the computation's id in the high 32 bits and the instruction's
/// position-independent local id in the low 32 bits: the first instruction of computation 2 is
/// `2 << 32` (facts §1.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UniqueId(pub i64);

impl UniqueId {
    /// The high 32 bits: the id of the computation that created the instruction.
    ///
    /// ```
    /// use xlens_hlo::UniqueId;
    /// let id = UniqueId((2 << 32) | 7);
    /// assert_eq!((id.computation_part(), id.local_part()), (2, 7));
    /// ```
    pub fn computation_part(self) -> i64 {
        self.0 >> 32
    }

    /// The low 32 bits: the instruction's id within its computation.
    pub fn local_part(self) -> i64 {
        self.0 & 0xffff_ffff
    }
}

impl fmt::Display for InstrId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

impl fmt::Display for CompId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
