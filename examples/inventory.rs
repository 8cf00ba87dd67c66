//! Lists every plane of every host with its lines and event counts.
//!
//! `cargo run --release --example inventory -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir.
//!
//! The same arguments as `xlens inventory` (one declaration, `examples/support/cli.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

mod support;

fn main() -> std::process::ExitCode {
    support::cli::example::<support::cli::InventoryCmd>("inventory")
}
