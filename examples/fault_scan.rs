//! The main job: scan a profile and say what is wrong with the step, with evidence and a fix.
//!
//! ```text
//! cargo run --release --example fault_scan -- [PATH] [--format text|json] [--html FILE]
//!                                             [--out DIR] [--fail-on P0|P1|P2] [--quiet]
//! ```
//! PATH is a `*.xplane.pb`, a session directory or a logdir; without it the bundled sample runs.
//! Exit code: 0, or 3 when `--fail-on` is given and a finding is at that severity or worse.

use std::path::PathBuf;

use anyhow::{Context, bail};
use xlens::faults::{Profile, ScanConfig, Severity, render, scan};
use xlens::xplane::Session;

/// The bundled sample profile (a real JAX CPU capture with a host callback in the step).
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/host_callback");

const USAGE: &str =
    "usage: fault_scan [PATH] [--format text|json] [--html FILE] [--out DIR] [--fail-on P0|P1|P2] [--quiet]";

struct Args {
    path: PathBuf,
    json: bool,
    html: Option<PathBuf>,
    out: Option<PathBuf>,
    fail_on: Option<Severity>,
}

fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut args = Args { path: PathBuf::from(SAMPLE), json: false, html: None, out: None, fail_on: None };
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
            "--html" => args.html = Some(value()?.into()),
            "--out" => args.out = Some(value()?.into()),
            "--fail-on" => {
                let v = value()?;
                args.fail_on = Some(Severity::parse(&v).with_context(|| format!("bad severity {v:?}; {USAGE}"))?);
            }
            "--quiet" | "-q" => {}
            _ if path.is_none() && !arg.starts_with('-') => path = Some(PathBuf::from(arg)),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    if let Some(p) = path {
        args.path = p;
    }
    Ok(Some(args))
}

fn main() -> anyhow::Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    let session = Session::open(&args.path).with_context(|| format!("opening {}", args.path.display()))?;
    let profile = Profile::from_session(session);
    let report = scan(&profile, &ScanConfig::default());
    if args.json {
        println!("{}", render::json(&report));
    } else {
        print!("{}", render::text(&report));
    }
    if let Some(html) = &args.html {
        std::fs::write(html, render::html(&report)).with_context(|| format!("writing {}", html.display()))?;
    }
    if let Some(dir) = &args.out {
        xlens::faults::frame::write_parquet(&profile, &report, dir)
            .with_context(|| format!("writing frames to {}", dir.display()))?;
    }
    if let Some(level) = args.fail_on
        && report.findings.iter().any(|f| f.severity <= level)
    {
        std::process::exit(3);
    }
    Ok(())
}
