//! The mutation campaign of issue 40, for as long as asked:
//!
//! ```text
//! cargo run -p xlens-fuzz --release --bin campaign -- --cases N [--seed S] [--first I]
//!     [--corpus DIR]... [--max-bytes B] [--save DIR] [--subprocess BIN [--cli-every K] [--shrink]]
//!     [--case-seconds T] [--memory-factor F] [--memory-margin-mib M] [--calibrate]
//! ```
//!
//! Runs N cases over the captures (every `*.xplane.pb` of at most B bytes under each corpus
//! folder; `testdata/` and 1.2 MB by default), prints the counts per mutation, per oracle and per
//! outcome, and saves each failing input kept to `DIR/<oracle>_<hash>.xplane.pb` (default
//! `fuzz/regressions/campaign`). Exit 1 on any failure. With `--subprocess`, every K-th case also
//! runs through `BIN scan FILE --format json`; with `--shrink`, its file is cut short while the
//! CLI reads it (a profile rewritten during a scan). `--calibrate` scans the unmutated
//! captures and prints each one's time and heap peak against the bounds.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use xlens_fuzz::campaign::alloc::CountingAlloc;
use xlens_fuzz::campaign::oracle::{self, Oracle, PeakProbe};
use xlens_fuzz::campaign::wire::Schema;
use xlens_fuzz::campaign::{Capture, Config, find_captures, minimise, reproducer_path, run};

/// Scans spent shrinking each reproducer (a memory or CLI failure is kept as found: its
/// measure depends on the whole input or on the process).
const MINIMISE_SCANS: usize = 400;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

struct Args {
    config: Config,
    corpus: Vec<PathBuf>,
    max_bytes: u64,
    save: PathBuf,
    calibrate: bool,
}

fn parse_args() -> Result<Args, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut args = Args {
        config: Config::default(),
        corpus: Vec::new(),
        max_bytes: 1_200_000,
        save: root.join("fuzz/regressions/campaign"),
        calibrate: false,
    };
    let mut cli_bin = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--cases" => args.config.cases = number(value()?)?,
            "--seed" => args.config.seed = number(value()?)?,
            "--first" => args.config.first = number(value()?)?,
            "--corpus" => args.corpus.push(PathBuf::from(value()?)),
            "--max-bytes" => args.max_bytes = number(value()?)?,
            "--save" => args.save = PathBuf::from(value()?),
            "--subprocess" => cli_bin = Some(PathBuf::from(value()?)),
            "--shrink" => args.config.cli_shrink = true,
            "--cli-every" => args.config.cli_every = number(value()?)?.max(1),
            "--case-seconds" => args.config.limits.case_time = Duration::from_secs(number(value()?)?),
            "--memory-factor" => args.config.limits.memory_factor = number(value()?)? as usize,
            "--memory-margin-mib" => args.config.limits.memory_margin = (number(value()?)? as usize) << 20,
            "--calibrate" => args.calibrate = true,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if args.corpus.is_empty() {
        args.corpus.push(root.join("testdata"));
    }
    if let Some(bin) = cli_bin {
        let dir = std::env::temp_dir().join(format!("xlens-campaign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        args.config.cli = Some((bin, dir));
    }
    Ok(args)
}

const USAGE: &str = "usage: campaign --cases N [--seed S] [--first I] [--corpus DIR]... [--max-bytes B] \
[--save DIR] [--subprocess XLENS_BIN [--cli-every K] [--shrink]] [--case-seconds T] [--memory-factor F] \
[--memory-margin-mib M] [--calibrate]";

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut captures = Vec::new();
    for dir in &args.corpus {
        let found = match find_captures(dir, args.max_bytes) {
            Ok(found) => found,
            Err(e) => {
                eprintln!("{}: {e}", dir.display());
                return ExitCode::from(2);
            }
        };
        for (path, _) in found {
            let name = path.strip_prefix(dir).unwrap_or(&path).display().to_string();
            match Capture::load(&path, name) {
                Ok(c) => captures.push(c),
                Err(e) => eprintln!("skipping {}: {e}", path.display()),
            }
        }
    }
    if captures.is_empty() {
        eprintln!("no capture of at most {} bytes found", args.max_bytes);
        return ExitCode::from(2);
    }
    // A panic is an oracle's finding, reported in the summary: keep stderr for the counts.
    std::panic::set_hook(Box::new(|_| {}));
    let limits = args.config.limits;
    if args.calibrate {
        for c in &captures {
            let v = oracle::check(&c.bytes, &limits, Some(&ALLOC as &dyn PeakProbe));
            let peak = v.peak.unwrap_or(0);
            let embedded = c.structure.fields.iter().filter(|f| f.parent == Schema::Guess).count();
            println!(
                "{:<60} {:>9} B {:>7} fields ({:>6} embedded) {:>7.3} s peak {:>6.1} x = {:>5.1} MiB ({:.0} % of bound) {} {:?}",
                c.name,
                c.bytes.len(),
                c.structure.fields.len(),
                embedded,
                v.elapsed.as_secs_f64(),
                peak as f64 / c.bytes.len() as f64,
                peak as f64 / (1 << 20) as f64,
                100.0 * peak as f64 / limits.memory_bound(c.bytes.len()) as f64,
                v.status.map_or("error", |s| s.as_str()),
                v.failures,
            );
        }
        return ExitCode::SUCCESS;
    }
    let total: usize = captures.iter().map(|c| c.bytes.len()).sum();
    eprintln!(
        "campaign: seed {}, cases {}..{}, {} captures ({:.1} MB), case limit {:?}, memory {} x input + {} MiB{}",
        args.config.seed,
        args.config.first,
        args.config.first + args.config.cases,
        captures.len(),
        total as f64 / 1e6,
        limits.case_time,
        limits.memory_factor,
        limits.memory_margin >> 20,
        args.config.cli.as_ref().map_or(String::new(), |(b, _)| format!(
            ", CLI {} every {} cases{}",
            b.display(),
            args.config.cli_every,
            if args.config.cli_shrink { ", its file cut short during the scan" } else { "" }
        )),
    );
    let start = Instant::now();
    let mut last = Instant::now();
    let summary = run(&captures, &args.config, Some(&ALLOC as &dyn PeakProbe), &mut |case, s| {
        for (o, detail) in case.failures() {
            eprintln!(
                "case {} ({}, {}: {}): {}: {detail}",
                case.index,
                captures[case.capture].name,
                case.mutant.mutation.name(),
                case.mutant.detail,
                o.name()
            );
        }
        if last.elapsed() > Duration::from_secs(30) {
            last = Instant::now();
            let failed: u64 = s.oracles.values().map(|c| c.1).sum();
            eprintln!("… {} cases in {:.0} s, {failed} failures", s.cases, start.elapsed().as_secs_f64());
        }
    });
    println!("{}", summary.table());
    println!("wall time {:.0} s", start.elapsed().as_secs_f64());
    if let Some((_, dir)) = &args.config.cli {
        let _ = std::fs::remove_dir_all(dir);
    }
    if summary.failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::create_dir_all(&args.save) {
        eprintln!("{}: {e}", args.save.display());
        return ExitCode::FAILURE;
    }
    println!("\nreproducers (at most {} per oracle, minimised):", xlens_fuzz::campaign::Summary::KEEP_PER_ORACLE);
    for f in &summary.failures {
        if !f.replayable {
            println!(
                "  not saved (depends on timing): case {} of {} ({}): {}",
                f.index, f.capture, f.mutation, f.detail
            );
            continue;
        }
        let bytes = if f.oracle == Oracle::NoSignal || f.oracle == Oracle::MemoryBound {
            f.bytes.clone()
        } else {
            minimise(&f.bytes, f.oracle, &limits, MINIMISE_SCANS)
        };
        let path = reproducer_path(&args.save, f.oracle, &bytes);
        if let Err(e) = std::fs::write(&path, &bytes) {
            eprintln!("{}: {e}", path.display());
        }
        println!(
            "  {} ({} of {} bytes) case {} of {} ({}): {}",
            path.display(),
            bytes.len(),
            f.bytes.len(),
            f.index,
            f.capture,
            f.mutation,
            f.detail
        );
    }
    ExitCode::FAILURE
}
