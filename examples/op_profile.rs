//! Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
//!
//! `cargo run --release --example op_profile -- PATH [--json] [--top N]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir. `--json` prints one document for the
//! session, `{"hosts":[{"host",...}]}`; text prints a section per host, in host order.
//!
//! The same arguments as `xlens ops` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::OpsCmd>("op_profile")
}
