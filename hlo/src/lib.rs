//! The compiled XLA program inside a profile, as a graph with shapes, layouts, costs and source
//! lines.
//!
//! XLA's performance faults are compiler-visible decisions: fusion breaks, transposes and
//! copies, rematerialization, sharding collectives, padding. This crate decodes the `HloProto`
//! a profile carries (or a standalone `*.hlo_proto.pb`) into a [`Module`] that can be queried:
//!
//! - **Graph.** Computations and an instruction arena with typed ids ([`InstrId`], [`CompId`]);
//!   operands, users, called computations (fusion bodies, loop bodies, branches), roots, the
//!   entry, topological orders, fusion kinds. XLA's 64-bit unique ids (computation id in the
//!   high 32 bits) are resolved once.
//! - **Shapes.** [`Shape`]: element types with bit widths, dimensions, tuples, layouts (minor to
//!   major, tiles, memory space), logical bytes and TPU-padded bytes.
//! - **Costs.** [`Cost`] per instruction and for the whole program, following XLA's
//!   `HloCostAnalysis` ([`cost`]).
//! - **Sources.** [`Module::source`] resolves `stack_frame_id`s to the user's file and line.
//! - **Queries.** By name, opcode, class or category; neighborhoods
//!   ([`Module::neighborhood_within`]: producers, consumers, siblings); collectives with their
//!   replica groups ([`Collective`]); donation ([`Module::input_output_aliases`]); fusions;
//!   one-line text ([`Module::instruction_text`]), a computation's or the module's text
//!   ([`Module::computation_text`], [`Module::module_text`]); shardings
//!   ([`Module::sharding_text`]); static memory ([`Module::memory_stats`]).
//! - **Safe on any input.** Decoding is bounded by [`limits`]; bad protos are typed
//!   [`Error`]s; odd data becomes [`Warning`]s.
//! - **Frames.** [`frame`] (feature `frames`) turns modules into DataFrames.
//!
//! ```
//! use xlens_hlo::{Module, Opcode, modules_from_space, testing};
//! use xlens_xplane::Space;
//!
//! // A profile whose /host:metadata plane holds one program, `jit_f(7)`.
//! let space = Space::parse(testing::tiny_profile_bytes().into())?;
//! let (modules, warnings) = modules_from_space(&space);
//! assert!(warnings.is_empty());
//! let module = &modules[0];
//!
//! let dot = module.instruction_by_name("dot.1").unwrap();
//! assert_eq!(dot.opcode(), Opcode::Dot);
//! assert_eq!(module.cost(dot.id()).flops, 2 * 8 * 4 * 16);
//! assert_eq!(module.source(dot.id()).unwrap().to_string(), "/home/me/train.py:12 (loss)");
//! // The fusion's body: an exponential (a transcendental) and an add.
//! assert_eq!(module.entry_cost().transcendentals, 8 * 16);
//! assert_eq!(module.xla_category(dot.id()), "dot");
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod backend_config;
mod collective;
pub mod cost;
mod cost_gpu;
mod cost_types;
mod custom_call;
mod dataflow;
mod decode;
mod error;
mod graph;
mod ids;
pub mod layout;
pub mod limits;
mod memory;
mod memory_types;
mod module;
mod opcode;
mod profile;
pub mod raw;
mod shape;
pub mod sharding;
mod source;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod text;
mod wire;

#[cfg(feature = "frames")]
pub mod frame;

pub use collective::{Collective, GroupEncoding};
pub use cost::{Cost, CostModel};
pub use custom_call::CustomCallKind;
pub use error::{Error, ErrorKind, Location, Result, Warning, WarningKind};
pub use graph::{GraphSummary, Neighbor, Neighborhood, Relation};
pub use ids::{CompId, InstrId, UniqueId};
pub use memory_types::{AllocationRow, AllocationRowKind, MemoryStats, PeakAllocations, PeakBuffer};
pub use module::{
    AliasKind, BufferDonor, Computation, ComputationKind, Fusion, Instruction, IoAlias, Module, gpu_kernel_char,
    gpu_kernel_name,
};
pub use opcode::{FusionKind, OpClass, Opcode};
pub use profile::{
    CostCheck, HloProtoEntry, hlo_protos, module_hosts, modules_from_session, modules_from_space, profile_cost_checks,
};
pub use shape::{Layout, POINTER_SIZE, PrimitiveType, Shape, TPU_LANES, Tile2D};
pub use source::SourceLocation;

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
