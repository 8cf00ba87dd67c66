//! Prints the chip catalogue with bf16 ridge points, and where an arithmetic intensity lands.
//!
//! `cargo run --example roofline_table -- [--chip NAME]... [--intensity FLOP_PER_BYTE] [--json]`
//!
//! The same arguments as `xlens roofline` (one declaration, `examples/support/cli.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

mod support;

fn main() -> std::process::ExitCode {
    support::cli::example::<support::cli::RooflineCmd>("roofline_table")
}
