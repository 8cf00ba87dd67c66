//! The main job: scan a profile and say what is wrong with the step.
//!
//! `cargo run --release --example fault_scan -- [PATH]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir; without it the bundled sample runs.
//!
//! Until the detectors land, this prints each host's device/host summary and its inventory.

use std::path::PathBuf;

use anyhow::bail;
use xlens::render::{HostInventory, inventory_text, summary_text};
use xlens::xplane::{Session, inventory, summarize, validate};

/// The bundled sample profile (a real JAX CPU capture with a host callback in the step).
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/host_callback");

fn main() -> anyhow::Result<()> {
    let mut path: Option<PathBuf> = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("usage: fault_scan [PATH]");
                return Ok(());
            }
            _ if path.is_none() => path = Some(arg.into()),
            _ => bail!("unexpected argument {arg:?}; usage: fault_scan [PATH]"),
        }
    }
    let path = path.unwrap_or_else(|| PathBuf::from(SAMPLE));
    let session = Session::open(&path)?;
    for host in session.hosts() {
        print!("{}", summary_text(host.name(), &summarize(host.space())));
        for warning in validate(host.space())? {
            println!("  warning: {warning}");
        }
    }
    let hosts = session
        .hosts()
        .iter()
        .map(|h| Ok(HostInventory { host: h.name().to_owned(), planes: inventory(h.space())? }))
        .collect::<anyhow::Result<Vec<_>>>()?;
    print!("{}", inventory_text(&hosts));
    Ok(())
}
