//! Writes synthetic TPU-shaped sessions for benchmarks and scale tests.
//!
//! `cargo run --release --example synth_profile -- --size 300MB [--hosts N] [--seed S] [--multislice] --out DIR`
//! `cargo run --release --example synth_profile -- --fixture NAME --out DIR` (a reference fixture)
//! `cargo run --release --example synth_profile -- --gpu --size 300MB [--devices N] --out DIR`
//! (an NVIDIA-shaped XLA:GPU host, `xlens-testkit`'s healthy program on N GPUs, default 8)
//!
//! Writes `DIR/plugins/profile/synthetic/<host>.xplane.pb` for N hosts (default 1), each about
//! `--size` long (suffixes KB, MB, GB; powers of 1024), deterministic for the seed: 4 TensorCores
//! per host running a 2000-op program (fusions, convolutions, dots, copies, transposes, async
//! all-gathers) step after step, host threads with step markers linked to the device steps, an
//! HLO proto with a buffer assignment in `/host:metadata`, and a runtime memory profile.
//! `--multislice` adds what a multi-slice TPU v5p run (`TPU v5`) with embeddings records: two SparseCores
//! per TensorCore and `MegaScale:` DCN transfers on the host, so every device detector runs its
//! full path.
//!
//! The same arguments as `xlens synth` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::SynthCmd>("synth_profile")
}
