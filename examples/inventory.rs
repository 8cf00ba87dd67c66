//! Lists every plane of every host with its lines and event counts.
//!
//! `cargo run --release --example inventory -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};
use xlens::render::{HostInventory, inventory_json, inventory_text};
use xlens::xplane::{Session, inventory};

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
    let session = Session::open(&path)?;
    let hosts = session
        .hosts()
        .iter()
        .map(|h| Ok(HostInventory { host: h.name().to_owned(), planes: inventory(h.space())? }))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if json {
        support::emit(&format!("{}\n", serde_json::to_string_pretty(&inventory_json(&hosts))?))?;
    } else {
        support::emit(&inventory_text(&hosts))?;
    }
    Ok(())
}
