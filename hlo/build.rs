//! Compiles `proto/hlo.proto` with protox (no system `protoc`) and prost-build,
//! and writes its descriptor set to `OUT_DIR` for the strict check.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/hlo.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    // The descriptor set itself, for the strict check's message tables (`xlens_xplane::strict`).
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    std::fs::write(out.join("hlo.fds"), prost::Message::encode_to_vec(&fds))?;
    prost_build::Config::new()
        // `bytes` fields (backend configs) become refcounted windows into the input, not copies.
        .bytes(["."])
        // Deterministic map order, so encodings and comparisons are stable.
        .btree_map(["."])
        // An instruction keeps its proto for the fields the model does not expose, and a module
        // holds tens of thousands: the message fields most instructions leave unset are boxed,
        // so an absent one costs a pointer rather than its whole inline size.
        .boxed(".xla.HloInstructionProto.shape")
        .boxed(".xla.HloInstructionProto.window")
        .boxed(".xla.HloInstructionProto.convolution_dimension_numbers")
        .boxed(".xla.HloInstructionProto.padding_config")
        .boxed(".xla.HloInstructionProto.dot_dimension_numbers")
        .boxed(".xla.HloInstructionProto.sharding")
        .boxed(".xla.HloInstructionProto.frontend_attributes")
        .boxed(".xla.HloInstructionProto.collective_device_list")
        .boxed(".xla.HloInstructionProto.iota_collective_device_list")
        .boxed(".xla.HloInstructionProto.mesh_axes_replica_group_list")
        .compile_fds(fds)?;
    Ok(())
}
