//! The HLO modules of a profile: sizes, opcode counts, entry costs, memory, donation and
//! collectives.
//!
//! `cargo run --release --example hlo_ops -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory, a logdir, or a standalone `*.hlo_proto.pb`.
//! A session prints one document (or report); each program names the hosts it was captured on.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};

const USAGE: &str = "usage: hlo_ops PATH [--json]";

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let mut json = false;
    let mut path: Option<PathBuf> = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if path.is_none() => path = Some(arg.into()),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    let path = path.context(USAGE)?;
    support::jobs::hlo(&path, json)
}
