//! libFuzzer shim: `cargo +nightly fuzz run decode_hlo` (from `fuzz/`).
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| xlens_fuzz::decode_hlo::run(data));

#[cfg(not(fuzzing))]
fn main() {
    // Built without `--cfg fuzzing` (plain `cargo build`): nothing to do.
}
