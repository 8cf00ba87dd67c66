//! Lists every plane of every host with its lines and event counts.
//!
//! `cargo run --release --example inventory -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir.
//!
//! The same arguments as `xlens inventory` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::InventoryCmd>("inventory")
}
