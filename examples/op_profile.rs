//! Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
//!
//! `cargo run --release --example op_profile -- PATH [--json] [--top N]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir. `--json` prints one document for the
//! session, `{"hosts":[{"host",...}]}`; text prints a section per host, in host order.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};

const USAGE: &str = "usage: op_profile PATH [--json] [--top N]";

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let mut json = false;
    let mut top = 20usize;
    let mut path: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--top" => top = args.next().context(USAGE)?.parse().context(USAGE)?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if path.is_none() && !arg.starts_with('-') => path = Some(arg.into()),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    let path = path.context(USAGE)?;
    support::jobs::ops(&path, json, top)
}
