//! `xlens`: the command line over the library. `xlens scan PATH` is the main job (what the
//! `fault_scan` example runs, the same code); `ops`, `hlo`, `inventory`, `kernels`, `roofline`,
//! `plan` and `audit` run the jobs of the other examples; `completions SHELL` prints completions.
//!
//! Exit codes: 0; 1 on an error (one line on stderr); 2 on a usage mistake (one line on stderr);
//! 3 when `scan --fail-on` trips.

#[path = "../examples/support/mod.rs"]
mod support;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use support::scan::{SAMPLE, ScanArgs};
use xlens::faults::{DETECTORS, ScanConfig, Severity};
use xlens::roofline::{ChipSpec, FlopsPerByte, chips::CATALOGUE};

const EXIT_CODES: &str = "\
Exit codes:
  0  the command ran (whatever the verdict, unless --fail-on is given)
  1  an error: the profile or an output could not be read or written (one line on stderr)
  2  a usage mistake: an unknown flag, subcommand or value (one line on stderr)
  3  scan --fail-on: a finding at that severity or worse, or an INCOMPLETE profile";

/// Offline analysis of XProf profiles: what is wrong with a training or inference step, with
/// evidence and a fix.
#[derive(Parser)]
#[command(name = "xlens", version, propagate_version = true, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Scan a profile (a `*.xplane.pb`, a session directory or a logdir) and report its faults.
    Scan(ScanCmd),
    /// Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
    Ops {
        /// The profile: a `*.xplane.pb`, a session directory or a logdir.
        path: PathBuf,
        /// One JSON document for the session.
        #[arg(long)]
        json: bool,
        /// Ops listed per host.
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
    /// The HLO modules: opcodes, FLOPs, aliasing, collectives.
    Hlo {
        /// A profile (file, session directory, logdir) or a `*.hlo_proto.pb`.
        path: PathBuf,
        /// One JSON document for the session.
        #[arg(long)]
        json: bool,
    },
    /// Planes, lines and event counts of every host.
    Inventory {
        /// The profile: a `*.xplane.pb`, a session directory or a logdir.
        path: PathBuf,
        /// One JSON document for the session.
        #[arg(long)]
        json: bool,
    },
    /// GPU kernels: launches, durations, grid and block, tensor cores.
    Kernels {
        /// The profile: a `*.xplane.pb`, a session directory or a logdir.
        path: PathBuf,
        /// One JSON document for the session.
        #[arg(long)]
        json: bool,
        /// Kernels listed per host (text: 20 by default; JSON: all).
        #[arg(long)]
        top: Option<usize>,
    },
    /// The chip catalogue's rooflines and ridge points.
    Roofline {
        /// Only these chips (repeatable; names as in the catalogue or a device type).
        #[arg(long = "chip", value_name = "CHIP", value_parser = parse_chip)]
        chips: Vec<&'static ChipSpec>,
        /// Where a kernel of this intensity (FLOP/byte) falls on each chip.
        #[arg(long, value_name = "FLOP_PER_BYTE", value_parser = parse_intensity)]
        intensity: Option<FlopsPerByte>,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// HBM plans: state, activations, KV cache, bytes per chip, fewest chips, largest batch
    /// (the flags of `hbm_plan`; `xlens plan --help` lists them).
    #[command(disable_help_flag = true)]
    Plan {
        /// `hbm_plan`'s flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// BF16 / INT8 errors of matmuls and accumulation drift (the flags of `precision_audit`).
    #[command(disable_help_flag = true)]
    Audit {
        /// `precision_audit`'s flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Args)]
#[command(after_help = EXIT_CODES)]
struct ScanCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir [default: the bundled sample]
    path: Option<PathBuf>,
    /// The report on stdout [default: text, or the config file's output.format].
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Same as `--format json`.
    #[arg(long)]
    json: bool,
    /// Also write the report as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write every table as a Hive-partitioned Parquet dataset (safe for concurrent runs).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Exit with 3 when a finding is at this severity or worse (P0, P1 or P2), or the profile is
    /// INCOMPLETE.
    #[arg(long, value_name = "SEVERITY", value_parser = parse_severity)]
    fail_on: Option<Severity>,
    /// No progress bar on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Run only these detectors (comma-separated ids, see docs/detectors.md).
    #[arg(long, value_name = "ID", value_delimiter = ',', value_parser = parse_detector)]
    only: Vec<String>,
    /// Do not run these detectors (comma-separated ids).
    #[arg(long, value_name = "ID", value_delimiter = ',', value_parser = parse_detector)]
    disable: Vec<String>,
    /// Scan only these hosts of the session (comma-separated host names).
    #[arg(long, value_name = "HOST", value_delimiter = ',')]
    host: Vec<String>,
    /// Scan this run of the logdir (`PATH/plugins/profile/RUN`) instead of the newest.
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Thresholds, detectors and default outputs [default: ./xlens.toml when it exists].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// `xlens.toml`: what a team sets once. Flags given on the command line win.
///
/// ```toml
/// [detectors]
/// only = ["exposed_collective"]      # or
/// disable = ["padding_waste"]
///
/// [thresholds.exposed_collective]     # any field of xlens_faults::config::Thresholds
/// min_pct_of_step = 3.0
///
/// [output]
/// format = "json"
/// html = "summary.html"
/// out = "frames"
/// fail_on = "P1"
/// ```
#[derive(Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ConfigFile {
    detectors: DetectorsSection,
    thresholds: xlens::faults::Thresholds,
    output: OutputSection,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DetectorsSection {
    only: Vec<String>,
    disable: Vec<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct OutputSection {
    format: Option<String>,
    html: Option<PathBuf>,
    out: Option<PathBuf>,
    fail_on: Option<Severity>,
}

/// The config file named by `--config`, else `./xlens.toml` when it exists; unknown keys, ids and
/// values are errors.
fn config_file(path: Option<&std::path::Path>) -> anyhow::Result<ConfigFile> {
    use anyhow::Context;
    let (path, required) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from("xlens.toml"), false),
    };
    if !required && !path.is_file() {
        return Ok(ConfigFile::default());
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: ConfigFile = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
    for id in file.detectors.only.iter().chain(&file.detectors.disable) {
        parse_detector(id).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if let Some(f) = &file.output.format
        && f != "text"
        && f != "json"
    {
        anyhow::bail!("{}: output.format is \"text\" or \"json\", not {f:?}", path.display());
    }
    Ok(file)
}

fn parse_severity(s: &str) -> Result<Severity, String> {
    Severity::parse(s).ok_or_else(|| format!("{s:?} is not a severity (P0, P1 or P2)"))
}

fn parse_chip(s: &str) -> Result<&'static ChipSpec, String> {
    ChipSpec::by_name(s).map_err(|e| e.to_string())
}

fn parse_intensity(s: &str) -> Result<FlopsPerByte, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(FlopsPerByte(v)),
        _ => Err(format!("{s:?} is not a non-negative number")),
    }
}

/// Runs `plan` or `audit` on the words of their example: `--help` prints the example's usage;
/// a word the parser refuses is a usage mistake (exit 2).
fn words(args: Vec<String>, usage: &str, job: fn(Vec<String>) -> anyhow::Result<()>, empty_is_help: bool) -> ExitCode {
    if (empty_is_help && args.is_empty()) || args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{usage}");
        return ExitCode::SUCCESS;
    }
    match job(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e)
            if e.downcast_ref::<xlens::budget::Error>().is_some_and(|b| {
                matches!(b.kind(), xlens::budget::ErrorKind::Parse { .. } | xlens::budget::ErrorKind::Unknown { .. })
            }) =>
        {
            eprintln!("{} (see the usage with --help)", xlens::render::error_line(e.as_ref()));
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("{}", xlens::render::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn parse_detector(s: &str) -> Result<String, String> {
    if DETECTORS.iter().any(|d| d.id() == s) {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a detector id (see docs/detectors.md)"))
    }
}

impl ScanCmd {
    /// The job's arguments: the flags, then the config file, then the defaults.
    fn into_args(self, file: ConfigFile) -> ScanArgs {
        let mut config = ScanConfig { thresholds: file.thresholds, ..ScanConfig::default() };
        let only = if self.only.is_empty() { file.detectors.only } else { self.only };
        if !only.is_empty() {
            config.only = Some(only);
        }
        config.disabled = if self.disable.is_empty() { file.detectors.disable } else { self.disable };
        let json = match self.format {
            Some(Format::Json) => true,
            Some(Format::Text) => self.json,
            None => self.json || file.output.format.as_deref() == Some("json"),
        };
        ScanArgs {
            path: self.path.unwrap_or_else(|| PathBuf::from(SAMPLE)),
            json,
            html: self.html.or(file.output.html),
            out: self.out.or(file.output.out),
            fail_on: self.fail_on.or(file.output.fail_on),
            quiet: self.quiet,
            hosts: self.host,
            run: self.run,
            config,
        }
    }
}

/// A usage mistake as one line (clap's own message, without its usage block), exit 2; `--help`
/// and `--version` print as clap prints them, exit 0.
fn parse() -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| {
        use clap::error::ErrorKind;
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            let _ = e.print();
            return ExitCode::from(2);
        }
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("usage mistake").trim_start_matches("error: ");
        eprintln!("error: {first} (see xlens --help)");
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Scan(cmd) => {
            let file = match config_file(cmd.config.as_deref()) {
                Ok(file) => file,
                Err(e) => {
                    eprintln!("{}", xlens::render::error_line(e.as_ref()));
                    return ExitCode::from(2);
                }
            };
            let args = cmd.into_args(file);
            let mut tripped = false;
            let code = support::run(|| {
                tripped = support::scan::run(&args)?;
                Ok(())
            });
            if tripped { ExitCode::from(3) } else { code }
        }
        Command::Ops { path, json, top } => support::run(|| support::jobs::ops(&path, json, top)),
        Command::Hlo { path, json } => support::run(|| support::jobs::hlo(&path, json)),
        Command::Inventory { path, json } => support::run(|| support::jobs::inventory_of(&path, json)),
        Command::Kernels { path, json, top } => support::run(|| support::jobs::kernels(&path, json, top)),
        Command::Roofline { mut chips, intensity, json } => {
            if chips.is_empty() {
                chips = CATALOGUE.iter().collect();
            }
            support::run(|| support::jobs::roofline(&chips, json, intensity))
        }
        Command::Plan { args } => words(args, xlens::args::HBM_PLAN_USAGE, support::jobs::plan, true),
        Command::Audit { args } => words(args, xlens::args::PRECISION_AUDIT_USAGE, support::jobs::audit, false),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "xlens", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}
