//! The HLO modules of a profile: sizes, opcode counts, entry costs, memory, donation and
//! collectives.
//!
//! `cargo run --release --example hlo_ops -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory, a logdir, or a standalone `*.hlo_proto.pb`.
//! A session prints one document (or report); each program names the hosts it was captured on.
//!
//! The same arguments as `xlens hlo` (one declaration, `examples/support/cli.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

mod support;

fn main() -> std::process::ExitCode {
    support::cli::example::<support::cli::HloCmd>("hlo_ops")
}
