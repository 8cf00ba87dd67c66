//! Compiles `proto/xplane.proto` with protox (no system `protoc`) and prost-build,
//! and writes its descriptor set to `OUT_DIR` for the strict check.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/xplane.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    // The descriptor set itself, for the strict check's message tables (`xlens_xplane::strict`).
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    std::fs::write(out.join("xplane.fds"), prost::Message::encode_to_vec(&fds))?;
    prost_build::Config::new()
        // `bytes` fields become refcounted windows into the input, not copies.
        .bytes(["."])
        // Deterministic map order, so encodings and comparisons are stable.
        .btree_map(["."])
        .compile_fds(fds)?;
    Ok(())
}
