//! The compiled XLA program inside a profile, as a graph (skeleton).
//!
//! Filled by the `hlo` issue: decoding `HloProto` from `/host:metadata` and `*.hlo_proto.pb`,
//! the module graph, shapes and layouts, source mapping and a cost model.
