//! The prost-generated XSpace message types (package `tensorflow.profiler`).
//!
//! These are owned, fully materialised structs, generated at build time from `proto/xplane.proto`.
//! The fast path of this crate does not use them for decoding (see [`crate::Space`]); they serve
//! the writer's tests, round-trip checks and callers who want plain structs
//! ([`crate::Space::to_raw`]). Their shape follows the schema and may change with it.
#![allow(missing_docs, unreachable_pub, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/tensorflow.profiler.rs"));
