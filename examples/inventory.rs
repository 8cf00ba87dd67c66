//! Lists every plane of every host with its lines and event counts.
//!
//! `cargo run --release --example inventory -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};

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
                println!("usage: inventory PATH [--json]");
                return Ok(());
            }
            _ if path.is_none() => path = Some(arg.into()),
            _ => bail!("unexpected argument {arg:?}; usage: inventory PATH [--json]"),
        }
    }
    let path = path.context("usage: inventory PATH [--json]")?;
    support::jobs::inventory_of(&path, json)
}
