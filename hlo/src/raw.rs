//! The prost-generated HLO message types (package `xla`), unstable.
//!
//! Generated at build time from `proto/hlo.proto`, which declares only the fields this crate reads
//! (unknown fields are skipped when decoding). [`crate::Module`] is built from these; callers who
//! need a field the model does not expose can read it from [`crate::Instruction::raw`] (decoded
//! from the instruction's bytes on first use),
//! [`crate::Module::buffer_assignment`] or [`crate::Module::stack_frame_index`]. Their shape
//! follows the schema file and may change with it. Rarely set message fields of
//! `HloInstructionProto` are boxed to keep an instruction small. `HloProtoEncoded`,
//! `HloModuleProtoEncoded` and `HloComputationProtoEncoded` are the same messages with their
//! computations and instructions left as bytes: `Module::decode` reads those, then decodes each
//! instruction on its own.
#![allow(missing_docs, unreachable_pub, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/xla.rs"));
