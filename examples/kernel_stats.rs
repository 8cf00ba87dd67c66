//! GPU kernel statistics: per kernel, its launches, total/mean/min/max duration, launch
//! parameters (grid, block, registers, shared memory, occupancy) and tensor-core use, as
//! XProf's kernel stats give them.
//!
//! `cargo run --release --example kernel_stats -- PATH [--json] [--top N]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir. `--json` prints one document for
//! the session: `{"total_device_duration_us","kernels":[{"kernel_name","hlo_op","occurrences",
//! "total_duration_us","avg_duration_us","min_duration_us","max_duration_us","registers_per_thread",
//! "static_shared_bytes","dynamic_shared_bytes","block":[x,y,z],"grid":[x,y,z],"occupancy_pct",
//! "uses_tensor_cores","host"}]}`.
//!
//! The same arguments as `xlens kernels` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::KernelsCmd>("kernel_stats")
}
