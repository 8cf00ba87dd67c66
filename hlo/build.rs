//! Compiles `proto/hlo.proto` with protox (no system `protoc`) and prost-build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/hlo.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    prost_build::Config::new()
        // `bytes` fields (backend configs) become refcounted windows into the input, not copies.
        .bytes(["."])
        // Deterministic map order, so encodings and comparisons are stable.
        .btree_map(["."])
        .compile_fds(fds)?;
    Ok(())
}
