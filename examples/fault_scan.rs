//! The main job: scan a profile and say what is wrong with the step, with evidence and a fix.
//!
//! ```text
//! cargo run --release --example fault_scan -- [PATH] [--format text|json | --json] [--html FILE]
//!                                             [--out DIR] [--fail-on P0|P1|P2] [--quiet]
//! ```
//! PATH is a `*.xplane.pb`, a session directory or a logdir; without it the bundled sample runs.
//! Hosts are scanned in parallel and streamed (each is unmapped once scanned); a progress bar goes
//! to stderr when it is a terminal, unless `--quiet`. `--out DIR` writes every table as Parquet,
//! partitioned by host (`DIR/<table>/host=<host>/part-<scan>.parquet`, see
//! `xlens::faults::frame::Dataset`; concurrent scans into one DIR add files, never overwrite).
//! A host file that cannot be read is listed in the report (`skipped_hosts`) and the others are
//! analysed; the status is then `INCOMPLETE`.
//! Exit code: 0; 1 on an error (one line on stderr; every output is still attempted); 3 when
//! `--fail-on` is given and a finding is at that severity or worse, or the status is `INCOMPLETE`.

mod support;

use std::path::PathBuf;

use anyhow::{Context, bail};
use support::scan::{SAMPLE, ScanArgs};
use xlens::faults::{ScanConfig, Severity};

const USAGE: &str =
    "usage: fault_scan [PATH] [--format text|json | --json] [--html FILE] [--out DIR] [--fail-on P0|P1|P2] [--quiet]";

fn parse_args() -> anyhow::Result<Option<ScanArgs>> {
    let mut args = ScanArgs {
        path: PathBuf::from(SAMPLE),
        json: false,
        html: None,
        out: None,
        fail_on: None,
        quiet: false,
        hosts: Vec::new(),
        run: None,
        config: ScanConfig::default(),
    };
    let mut path = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value; {USAGE}"));
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--format" => match value()?.as_str() {
                "json" => args.json = true,
                "text" => args.json = false,
                other => bail!("unknown format {other:?}; {USAGE}"),
            },
            "--json" => args.json = true,
            "--html" => args.html = Some(value()?.into()),
            "--out" => args.out = Some(value()?.into()),
            "--fail-on" => {
                let v = value()?;
                args.fail_on = Some(Severity::parse(&v).with_context(|| format!("bad severity {v:?}; {USAGE}"))?);
            }
            "--quiet" | "-q" => args.quiet = true,
            _ if path.is_none() && !arg.starts_with('-') => path = Some(PathBuf::from(arg)),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    if let Some(p) = path {
        args.path = p;
    }
    Ok(Some(args))
}

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    if support::scan::run(&args)? {
        std::process::exit(3);
    }
    Ok(())
}
