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

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use xlens::faults::frame::Dataset;
use xlens::faults::{HostOutcome, HostProfile, ScanConfig, Severity, Status, render, scan_session};
use xlens::xplane::discover;

/// The bundled sample profile (a real JAX CPU capture with a host callback in the step).
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/corpus/host_callback");

const USAGE: &str =
    "usage: fault_scan [PATH] [--format text|json | --json] [--html FILE] [--out DIR] [--fail-on P0|P1|P2] [--quiet]";

struct Args {
    path: PathBuf,
    json: bool,
    html: Option<PathBuf>,
    out: Option<PathBuf>,
    fail_on: Option<Severity>,
    quiet: bool,
}

fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut args =
        Args { path: PathBuf::from(SAMPLE), json: false, html: None, out: None, fail_on: None, quiet: false };
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

/// Redraws the progress bar on stderr (see [`xlens::render::progress_line`]).
fn progress(done: usize, total: usize, host: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(xlens::render::progress_line(done, total, host).as_bytes());
    let _ = err.flush();
}

fn main() -> std::process::ExitCode {
    support::run(body)
}

fn body() -> anyhow::Result<()> {
    let Some(args) = parse_args()? else { return Ok(()) };
    let source = discover(&args.path).with_context(|| format!("opening {}", args.path.display()))?;
    let total = source.hosts.len();
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let done = AtomicUsize::new(0);
    let frame_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let dataset = args.out.as_deref().map(Dataset::new);
    let visit = |host: &HostProfile, outcome: &HostOutcome| {
        if let Some(dataset) = &dataset
            && let Err(e) = dataset.write_host(host, &outcome.summary.skipped)
        {
            let mut slot = frame_error.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert(anyhow::anyhow!("writing {}'s frames: {e}", host.name()));
        }
        let n = done.fetch_add(1, Ordering::SeqCst) + 1;
        if show_progress {
            progress(n, total, host.name());
        }
    };
    let report = scan_session(&source, &ScanConfig::default(), &visit)?;
    // Every output is attempted, whatever failed before it; the failures end the command.
    let mut failures: Vec<String> = Vec::new();
    if let Some(e) = frame_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        failures.push(e.to_string());
    }
    if let Some(dataset) = &dataset
        && let Err(e) = dataset.write_report(&report)
    {
        failures.push(format!("writing the report's frames: {e}"));
    }
    if let Some(html) = &args.html
        && let Err(e) = std::fs::write(html, render::html(&report))
    {
        failures.push(format!("writing {}: {e}", html.display()));
    }
    support::emit(&if args.json { render::json(&report) + "\n" } else { render::text(&report) })?;
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    // An incomplete profile fails any --fail-on: its verdict cannot vouch for what was lost.
    if let Some(level) = args.fail_on
        && (report.status == Status::Incomplete || report.findings.iter().any(|f| f.severity <= level))
    {
        std::process::exit(3);
    }
    Ok(())
}
