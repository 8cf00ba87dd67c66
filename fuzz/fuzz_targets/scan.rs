//! libFuzzer shim: `cargo +nightly fuzz run scan` (from `fuzz/`).
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| xlens_fuzz::scan::run(data));

#[cfg(not(fuzzing))]
fn main() {
    // Built without `--cfg fuzzing` (plain `cargo build`): nothing to do.
}
