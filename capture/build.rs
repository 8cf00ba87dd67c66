//! Compiles the vendored `ProfilerService` protos with protox (no system `protoc`) and
//! tonic-prost-build: the messages and the client (no server).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/xla/tsl/profiler/protobuf/profiler_service.proto",
        "proto/xla/tsl/profiler/protobuf/profiler_options.proto",
        "proto/xla/tsl/profiler/protobuf/profiler_service_monitor_result.proto",
    ];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(["proto/xla/tsl/profiler/protobuf/profiler_service.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        // `bytes` fields (the trace a server returns) become refcounted buffers, not copies.
        .bytes(".")
        // Deterministic map order, so encodings and comparisons are stable.
        .btree_map(".")
        .compile_fds(fds)?;
    Ok(())
}
