//! Prints the chip catalogue with bf16 ridge points, and where an arithmetic intensity lands.
//!
//! `cargo run --example roofline_table -- [--chip NAME]... [--intensity FLOP_PER_BYTE] [--json]`
//!
//! The same arguments as `xlens roofline` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::RooflineCmd>("roofline_table")
}
