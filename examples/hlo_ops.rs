//! The HLO modules of a profile: sizes, opcode counts, entry costs, memory, donation and
//! collectives.
//!
//! `cargo run --release --example hlo_ops -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory, a logdir, or a standalone `*.hlo_proto.pb`.
//! A session prints one document (or report); each program names the hosts it was captured on.
//!
//! The same arguments as `xlens hlo` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::HloCmd>("hlo_ops")
}
