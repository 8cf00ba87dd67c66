//! The HLO modules of a profile: sizes, opcode counts, entry costs, memory, donation and
//! collectives.
//!
//! `cargo run --release --example hlo_ops -- PATH [--json]`
//! PATH is a `*.xplane.pb`, a session directory, a logdir, or a standalone `*.hlo_proto.pb`.
//! A session prints one document (or report); each program names the hosts it was captured on.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};
use xlens::hlo::{Module, module_hosts, modules_from_session};
use xlens::render::hlo::{ModuleHosts, hlo_ops_json, hlo_ops_text};
use xlens::xplane::Session;

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
    let (modules, hosts) = if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        (vec![Module::open(&path)?], ModuleHosts::new())
    } else {
        let session = Session::open(&path)?;
        let (modules, warnings) = modules_from_session(&session);
        for w in warnings {
            eprintln!("warning: {w}");
        }
        (modules, module_hosts(&session))
    };
    if json {
        support::emit(&format!("{}\n", serde_json::to_string_pretty(&hlo_ops_json(&modules, &hosts))?))?;
    } else {
        support::emit(&hlo_ops_text(&modules, &hosts))?;
    }
    Ok(())
}
