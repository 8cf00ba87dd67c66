//! HBM capacity planning and BF16/INT8 precision audits.
//!
//! Before a run: how much HBM a model needs per chip, how many chips it takes and what batch
//! fits ([`Plan`], [`fit_table`], [`max_batch`]); after it: whether the profile's memory peak
//! matched the plan ([`check_plan`]). And before quantising: how far bf16 and int8 matmuls and
//! bf16 accumulation land from an exact result, beside the bounds theory gives ([`precision`]).
//!
//! - **Bytes, not guesses.** Every size is a checked `u64`; zero or negative sizes and models
//!   too large for 64 bits are typed errors ([`Error`]), never wrapped numbers.
//! - **Chips from the catalogue.** Capacities come from [`xlens_chips::catalogue`] (binary GiB).
//! - **Reproducible audits.** Random operands come from a seeded generator in this crate.
//!
//! ```
//! use xlens_budget::{Budget, DType, Model, Plan, PlanRequest, Transformer, Workload};
//! use xlens_chips::ChipSpec;
//! // Serving Llama-2-7B in bf16 with 8 sequences of 4096 tokens: 13.5 GB of weights and a
//! // 16 GiB KV cache do not fit one v5e (16 GiB at 80%), but fit 3.
//! let plan = Plan::new(&PlanRequest {
//!     model: Model::from_shape(Transformer::llama2_7b())?,
//!     workload: Workload::serve(DType::Bf16, DType::Bf16, 4096, 8),
//!     chip: ChipSpec::by_name("v5e")?,
//!     budget: Budget::default(),
//!     sharding: None,
//! })?;
//! assert_eq!(plan.total.kv_cache.as_gib(), 16.0);
//! assert_eq!(plan.min_chips, Some(3));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod check;
mod dtype;
mod error;
mod generations;
mod model;
pub mod parse;
mod plan;
pub mod precision;
mod rng;

#[cfg(feature = "frames")]
pub mod frame;

pub use check::{DEFAULT_TOLERANCE, MemorySource, PlanCheck, ProfileMemory, Verdict, check_plan, check_plan_with};
pub use dtype::{DType, Optimizer, Recipe, StateBytes};
pub use error::{Error, ErrorKind, Result};
pub use generations::generations_table;
pub use model::{ActivationConfig, Attention, KvShape, Remat, Transformer};
pub use plan::{
    Budget, FitRow, Footprint, MAX_BATCH, MAX_CHIPS, Model, Plan, PlanRequest, Sharding, State, Workload, fit_table,
    footprint, max_batch, min_chips,
};

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
