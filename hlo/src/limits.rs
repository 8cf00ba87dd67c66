//! Named limits on counts read from untrusted input, checked by one helper.
//!
//! Decoding allocates at most in proportion to the input (protobuf items cost at least a byte);
//! these limits additionally reject shapes that are absurd for a real program, and bound the work
//! that grows faster than the input: expanded replica groups, call depth and stack-frame walks.

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
