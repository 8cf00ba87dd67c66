//! Named limits on counts read from untrusted input, checked by one helper.
//!
//! Decoding allocates at most in proportion to the input (protobuf items cost at least a byte);
//! these limits additionally reject shapes that are absurd for a real program, and bound the work
//! that grows faster than the input: expanded replica groups, call depth and stack-frame walks.
//!
//! Counts alone do not bound memory: an instruction takes two bytes of input (its field key and
//! a zero length) and hundreds of bytes once in the module's arena (its record, its shape, its
//! resolved ids, its cost, its index entries). So a module has a memory budget proportional to
//! its encoded size ([`MODULE_BUDGET_FACTOR`]) plus a fixed allowance
//! ([`MODULE_BUDGET_MARGIN`]); before anything is decoded, its computations and instructions are
//! counted in place and charged at what each costs once built ([`COMPUTATION_COST`],
//! [`INSTRUCTION_COST`]), as are the records of the rest of the proto (buffer assignment,
//! schedule, stack frames: twice their decoded size each) and, as each instruction is read, the
//! tuple elements of its shape ([`TUPLE_ELEMENT_COST`]); a module that would need more fails
//! with
//! [`ErrorKind::MemoryBudget`] before it is allocated. Strings (names, op names) are copied once
//! and cost at most the bytes they were read from. Real modules need about 4 to 6 bytes per input
//! byte in all (every module of `testdata/`); a crafted one stops with an error instead of
//! amplifying its size.

pub use crate::error::Limit;
use crate::error::{Error, ErrorKind, Location};

/// Largest number of computations accepted in one module.
pub const MAX_COMPUTATIONS: u64 = 1 << 20;
/// Largest number of instructions accepted in one module.
pub const MAX_INSTRUCTIONS: u64 = 1 << 24;
/// Largest rank (number of dimensions) accepted for an array shape.
pub const MAX_RANK: u64 = 1 << 10;
/// Deepest chain of computation calls accepted.
pub const MAX_CALL_DEPTH: u64 = 1 << 10;
/// Largest number of device ids one collective's replica groups may expand to.
pub const MAX_REPLICA_GROUP_DEVICES: u64 = 1 << 22;
/// Most frames walked for one call stack.
pub const MAX_STACK_DEPTH: u64 = 1 << 12;
/// Most hops a neighbourhood query ([`crate::Module::neighborhood_within`]) walks from its
/// instruction: a query's own argument, not the input's, bounded so that one query's answer
/// stays readable (at [`NEIGHBORHOOD_NODES`] it is cut anyway).
pub const MAX_NEIGHBORHOOD_HOPS: u64 = 32;
/// Most instructions a neighbourhood lists by default, nearest first: XProf's
/// `get_hlo_neighborhood --max_nodes` default.
pub const NEIGHBORHOOD_NODES: usize = 200;

/// Bytes of memory a module's decode may charge per byte of its encoded proto, beyond
/// [`MODULE_BUDGET_MARGIN`]. Real modules hold 130 to 200 bytes of proto per instruction, need 4
/// to 6 bytes of memory per byte of proto in all and are charged 5 to 7 (the large modules of
/// `testdata/`); 16 leaves them room while an instruction must bring about 48 bytes of input
/// to be built.
pub const MODULE_BUDGET_FACTOR: u64 = 16;
/// Bytes of memory every module's decode may charge whatever its size, so that small modules
/// (whose fixed costs are large next to their few bytes) and modules of many short
/// instructions always decode.
pub const MODULE_BUDGET_MARGIN: u64 = 64 << 20;
/// What one computation is charged: its record in the module and its entries in the id and name
/// indexes, the call graph and the schedules.
pub const COMPUTATION_COST: u64 = 256;
/// What one instruction is charged: its record in the arena (with its shape and attributes
/// inline), its encoded window and ids while it is read, its entries in the id and name indexes,
/// its cost, its place in its computation's lists; measured at about 700 bytes with the strings
/// of real instructions (test `decode_memory`).
pub const INSTRUCTION_COST: u64 = 768;

/// What one tuple element of an instruction's shape is charged (charged as instructions are
/// read, before their shapes are decoded): its proto record while it is read (twice, for a
/// vector's growth) and its [`crate::Shape`].
pub const TUPLE_ELEMENT_COST: u64 = 512;

/// The memory budget of a module whose proto is `encoded_bytes` long.
pub fn module_budget(encoded_bytes: usize) -> u64 {
    (encoded_bytes as u64).saturating_mul(MODULE_BUDGET_FACTOR).saturating_add(MODULE_BUDGET_MARGIN)
}

/// Warnings kept per module; the rest are counted in one
/// [`WarningKind::WarningsOmitted`](crate::WarningKind::WarningsOmitted).
pub const MAX_WARNINGS_PER_MODULE: usize = 256;

/// Fails with [`ErrorKind::MemoryBudget`] when `computations` and `instructions`, counted in a
/// proto of `encoded_bytes`, and `extra` bytes would cost more than its [`module_budget`]; else
/// returns what they cost.
pub(crate) fn check_budget(
    encoded_bytes: usize,
    computations: u64,
    instructions: u64,
    extra: u64,
    location: impl FnOnce() -> Location,
) -> Result<u64, Error> {
    let needed = computations
        .saturating_mul(COMPUTATION_COST)
        .saturating_add(instructions.saturating_mul(INSTRUCTION_COST))
        .saturating_add(extra);
    check_charge(encoded_bytes, needed, location)
}

/// Fails with [`ErrorKind::MemoryBudget`] when `needed` bytes are more than the
/// [`module_budget`] of a proto of `encoded_bytes`; else returns `needed`.
pub(crate) fn check_charge(
    encoded_bytes: usize,
    needed: u64,
    location: impl FnOnce() -> Location,
) -> Result<u64, Error> {
    let budget = module_budget(encoded_bytes);
    if needed > budget {
        let kind = ErrorKind::MemoryBudget { needed, budget, encoded_bytes: encoded_bytes as u64 };
        return Err(Error::new(kind, location()));
    }
    Ok(needed)
}

impl Limit {
    /// The largest accepted count.
    pub fn max(self) -> u64 {
        match self {
            Limit::Computations => MAX_COMPUTATIONS,
            Limit::Instructions => MAX_INSTRUCTIONS,
            Limit::Rank => MAX_RANK,
            Limit::CallDepth => MAX_CALL_DEPTH,
            Limit::ReplicaGroupDevices => MAX_REPLICA_GROUP_DEVICES,
            Limit::StackDepth => MAX_STACK_DEPTH,
            Limit::NeighborhoodHops => MAX_NEIGHBORHOOD_HOPS,
        }
    }

    /// What is being counted, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Limit::Computations => "number of computations in a module",
            Limit::Instructions => "number of instructions in a module",
            Limit::Rank => "rank of a shape",
            Limit::CallDepth => "depth of computation calls",
            Limit::ReplicaGroupDevices => "number of device ids in expanded replica groups",
            Limit::StackDepth => "depth of a call stack",
            Limit::NeighborhoodHops => "number of hops of a neighbourhood",
        }
    }
}

/// Fails with [`ErrorKind::LimitExceeded`] when `count` is above `limit`.
#[inline]
pub(crate) fn check(limit: Limit, count: u64, location: impl FnOnce() -> Location) -> Result<(), Error> {
    if count > limit.max() {
        return Err(Error::new(ErrorKind::LimitExceeded { limit, count }, location()));
    }
    Ok(())
}
