//! Links the `xlens` command and the examples as position-dependent executables on Linux.
//!
//! A position-independent build of this size (polars, clap, the five crates) carries about
//! 78,000 relative relocations that the loader applies, page by page, before `main`: 1.2 ms of a
//! 10 ms scan of a 1 MB real capture (2.35 -> 1.14 ms for `xlens --version`, 571 -> 142 page
//! faults). Linked at a fixed address, the loader has nothing to patch. The libraries, the Python
//! extension and the tests are unchanged.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    // The GNU toolchain's C compiler drives the link there (musl and others keep the default).
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
        println!("cargo:rustc-link-arg-examples=-no-pie");
    }
}
