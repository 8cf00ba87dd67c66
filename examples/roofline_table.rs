//! Prints the chip catalogue with bf16 ridge points, and where an arithmetic intensity lands.
//!
//! `cargo run --example roofline_table -- [--chip NAME]... [--intensity FLOP_PER_BYTE] [--json]`

mod support;

use anyhow::{Context, bail};
use xlens::roofline::{ChipSpec, FlopsPerByte, chips::CATALOGUE};

const USAGE: &str = "usage: roofline_table [--chip NAME]... [--intensity FLOP_PER_BYTE] [--json]";

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let mut json = false;
    let mut chips: Vec<&'static ChipSpec> = Vec::new();
    let mut intensity = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--chip" => chips.push(ChipSpec::by_name(&args.next().context(USAGE)?)?),
            "--intensity" => {
                let v: f64 = args.next().context(USAGE)?.parse().context("--intensity takes a number")?;
                if !(v.is_finite() && v >= 0.0) {
                    bail!("--intensity must be a non-negative number, got {v}");
                }
                intensity = Some(FlopsPerByte(v));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    if chips.is_empty() {
        chips = CATALOGUE.iter().collect();
    }
    support::jobs::roofline(&chips, json, intensity)
}
