//! GPU kernel statistics: per kernel, its launches, total/mean/min/max duration, launch
//! parameters (grid, block, registers, shared memory, occupancy) and tensor-core use, as
//! XProf's kernel stats give them.
//!
//! `cargo run --release --example kernel_stats -- PATH [--json] [--top N]`
//! PATH is a `*.xplane.pb`, a session directory or a logdir. `--json` prints one document for
//! the session: `{"total_device_duration_us","kernels":[{"kernel_name","hlo_op","occurrences",
//! "total_duration_us","avg_duration_us","min_duration_us","max_duration_us","registers_per_thread",
//! "static_shared_bytes","dynamic_shared_bytes","block":[x,y,z],"grid":[x,y,z],"occupancy_pct",
//! "uses_tensor_cores","host"}]}`.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};

const USAGE: &str = "usage: kernel_stats PATH [--json] [--top N]";

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let mut json = false;
    let mut top: Option<usize> = None;
    let mut path: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--top" => top = Some(args.next().context(USAGE)?.parse().context(USAGE)?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if path.is_none() && !arg.starts_with('-') => path = Some(arg.into()),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    let path = path.context(USAGE)?;
    support::jobs::kernels(&path, json, top)
}
