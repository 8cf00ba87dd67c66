//! The command lines of `xlens` and of the examples, declared once with clap: every subcommand's
//! arguments are a struct here that an example parses on its own (`fault_scan` is `xlens scan`,
//! `op_profile` is `xlens ops`, …), so both answer `--help` and `--version` with exit 0 and a
//! usage mistake with one line and exit 2.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::faults::{DETECTORS, ScanConfig, Severity, StepRange};
use crate::roofline::{ChipSpec, FlopsPerByte, chips::CATALOGUE};
use clap::{ArgMatches, Args, FromArgMatches, ValueEnum};

use super::scan::{SAMPLE, ScanArgs};

/// The exit codes, as every `--help` lists them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  the command ran (whatever the verdict, unless --fail-on is given)
  1  an error: the profile or an output could not be read or written (one line on stderr)
  2  a usage mistake: an unknown flag, subcommand or value (one line on stderr)
  3  scan --fail-on: a finding at that severity or worse, or an INCOMPLETE profile
  4  diff --fail-on-regression: the step time regressed by more than PCT, its 95 % interval
     excluding zero";

/// A parsed command line that runs its job.
pub trait Job: Args + FromArgMatches {
    /// Runs the job; the exit code follows [`EXIT_CODES`].
    fn run(self) -> ExitCode;

    /// Runs the job as the program or subcommand `name` (which its messages name).
    fn run_as(self, _name: &str) -> ExitCode
    where
        Self: Sized,
    {
        self.run()
    }
}

/// An example's `main`: parses `std::env::args` as `name`'s arguments and runs the job.
pub fn example<T: Job>(name: &'static str) -> ExitCode {
    let command = T::augment_args(clap::Command::new(name).version(env!("CARGO_PKG_VERSION")).after_help(EXIT_CODES));
    match command.try_get_matches().and_then(|m: ArgMatches| T::from_arg_matches(&m)) {
        Ok(job) => job.run_as(name),
        Err(e) => usage_error(&e, name),
    }
}

/// `--help` and `--version` as clap prints them (exit 0); a usage mistake as one line (clap's
/// message without its usage block), exit 2.
pub fn usage_error(e: &clap::Error, name: &str) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("error: {} (see {name} --help)", crate::report::render::printable(&one_line(&e.to_string())));
            ExitCode::from(2)
        }
    }
}

/// A clap error message as one line: its first line, then what clap adds below it before the
/// usage block (the missing arguments' names, the valid values, a "did you mean" tip), so that
/// cutting the usage block loses nothing the user needs.
///
/// ```text
/// error: the following required arguments were not provided:\n  <PATH>\n\nUsage: ...
/// -> the following required arguments were not provided: <PATH>
/// ```
fn one_line(message: &str) -> String {
    let mut lines = message.lines();
    let mut out = lines.next().unwrap_or("usage mistake").trim_start_matches("error: ").trim_end().to_owned();
    for line in lines {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
            out.push_str(line);
        }
    }
    out
}

/// Text or JSON on stdout.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// The text report.
    Text,
    /// The JSON document.
    Json,
}

/// Scan a profile (a `*.xplane.pb`, a session directory or a logdir) and report its faults.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct ScanCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir (or `--sample`)
    #[arg(required_unless_present = "sample")]
    path: Option<PathBuf>,
    /// Scan the bundled sample profile (a real JAX CPU capture with a host callback in the step).
    #[arg(long, conflicts_with = "path")]
    sample: bool,
    /// The report on stdout, in one of the report's formats [default: text, or the config file's
    /// output.format].
    #[arg(long, value_name = "FORMAT", value_parser = report_format())]
    format: Option<String>,
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
    /// Print on stderr how long each phase took per host (open, shared analyses, each detector)
    /// and the rendering.
    #[arg(long)]
    timings: bool,
    /// Run only these detectors (comma-separated ids, see docs/detectors.md).
    #[arg(long, value_name = "ID", value_delimiter = ',', value_parser = detector_ids(), hide_possible_values = true)]
    only: Vec<String>,
    /// Do not run these detectors (comma-separated ids).
    #[arg(long, value_name = "ID", value_delimiter = ',', value_parser = detector_ids(), hide_possible_values = true)]
    disable: Vec<String>,
    /// Scan only these hosts of the session (comma-separated host names).
    #[arg(long, value_name = "HOST", value_delimiter = ',')]
    host: Vec<String>,
    /// Scan this run of the logdir (`PATH/plugins/profile/RUN`) instead of the newest.
    #[arg(long, value_name = "RUN")]
    run: Option<String>,
    /// Analyse only these steps, by step number: `A..B` (both included), `A..`, `..B` or `N`
    /// (e.g. `--steps 5..` leaves out warm-up and compilation steps).
    #[arg(long, value_name = "A..B", value_parser = StepRange::parse)]
    steps: Option<StepRange>,
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
pub(crate) struct ConfigFile {
    /// The file as the user named it (or `xlens.toml`), for the report's `disabled_by`.
    #[serde(skip)]
    path: String,
    detectors: DetectorsSection,
    thresholds: crate::faults::Thresholds,
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
pub(crate) fn config_file(path: Option<&std::path::Path>) -> anyhow::Result<ConfigFile> {
    use anyhow::Context;
    let (path, required) = match path {
        Some(p) => (p.to_path_buf(), true),
        None => (PathBuf::from("xlens.toml"), false),
    };
    if !required && !path.is_file() {
        return Ok(ConfigFile::default());
    }
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut file: ConfigFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
    file.path = path.display().to_string();
    for id in file.detectors.only.iter().chain(&file.detectors.disable) {
        parse_detector(id).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    if let Some(f) = &file.output.format
        && crate::report::render::format(f).is_none()
    {
        let names: Vec<&str> = crate::report::render::FORMATS.iter().map(|f| f.name).collect();
        anyhow::bail!("{}: output.format is one of {}, not {f:?}", path.display(), names.join(", "));
    }
    Ok(file)
}

/// `--format`'s values: the report's formats ([`crate::report::render::FORMATS`]).
fn report_format() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        crate::report::render::FORMATS.iter().map(|f| clap::builder::PossibleValue::new(f.name).help(f.about)),
    )
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

/// `--only`/`--disable`'s values: the registry's detector ids, which shell completions offer.
pub(crate) fn detector_ids() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(DETECTORS.iter().map(|d| d.id()))
}

/// A detector id of the registry.
pub(crate) fn parse_detector(s: &str) -> Result<String, String> {
    if DETECTORS.iter().any(|d| d.id() == s) {
        Ok(s.to_owned())
    } else {
        Err(format!("{s:?} is not a detector id (see docs/detectors.md)"))
    }
}

impl ScanCmd {
    /// The job's arguments: the flags, then the config file, then the defaults.
    fn into_args(self, file: ConfigFile) -> ScanArgs {
        let mut config = ScanConfig { thresholds: file.thresholds, steps: self.steps, ..ScanConfig::default() };
        let from_file = || Some(format!("{} [detectors]", file.path));
        let (only, only_from) = if self.only.is_empty() {
            (file.detectors.only.clone(), from_file())
        } else {
            (self.only, Some("--only".to_owned()))
        };
        if !only.is_empty() {
            config.only = Some(only);
            config.only_from = only_from;
        }
        let (disabled, disabled_from) = if self.disable.is_empty() {
            (file.detectors.disable.clone(), from_file())
        } else {
            (self.disable, Some("--disable".to_owned()))
        };
        if !disabled.is_empty() {
            config.disabled = disabled;
            config.disabled_from = disabled_from;
        }
        // `--json` is `--format json`; an explicit `--format text` leaves the choice to it.
        let name = match self.format.as_deref() {
            Some("text") | None if self.json => "json",
            Some(name) => name,
            None => file.output.format.as_deref().unwrap_or("text"),
        };
        let format = crate::report::render::format(name).expect("clap and config_file accept only known formats");
        let html = self.html.or(file.output.html);
        // Without a page to draw, the page's own data (GPU kernel statistics) is not read.
        config.no_page = html.is_none() && format.name != "html";
        ScanArgs {
            // clap requires PATH unless --sample is given.
            path: self.path.unwrap_or_else(|| PathBuf::from(SAMPLE)),
            format,
            html,
            out: self.out.or(file.output.out),
            fail_on: self.fail_on.or(file.output.fail_on),
            quiet: self.quiet,
            timings: self.timings,
            hosts: self.host,
            run: self.run,
            config,
        }
    }
}

impl Job for ScanCmd {
    fn run(self) -> ExitCode {
        let file = match config_file(self.config.as_deref()) {
            Ok(file) => file,
            Err(e) => {
                eprintln!("{}", crate::report::tables::error_line(e.as_ref()));
                return ExitCode::from(2);
            }
        };
        let args = self.into_args(file);
        let mut tripped = false;
        let code = super::run(|| {
            tripped = super::scan::run(&args)?;
            Ok(())
        });
        if tripped { ExitCode::from(3) } else { code }
    }
}

/// Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct OpsCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
    /// Ops listed per host.
    #[arg(long, default_value_t = 20)]
    top: usize,
}

impl Job for OpsCmd {
    fn run(self) -> ExitCode {
        super::run(|| super::jobs::ops(&self.path, self.json, self.top))
    }
}

/// The HLO modules: sizes, opcodes, FLOPs, memory, aliasing, collectives.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct HloCmd {
    /// A profile (file, session directory, logdir) or a `*.hlo_proto.pb`.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
}

impl Job for HloCmd {
    fn run(self) -> ExitCode {
        super::run(|| super::jobs::hlo(&self.path, self.json))
    }
}

/// Planes, lines and event counts of every host.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct InventoryCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
}

impl Job for InventoryCmd {
    fn run(self) -> ExitCode {
        super::run(|| super::jobs::inventory_of(&self.path, self.json))
    }
}

/// GPU kernels: launches, durations, grid and block, tensor cores.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct KernelsCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
    /// Kernels listed per host (text: 20 by default; JSON: all).
    #[arg(long)]
    top: Option<usize>,
}

impl Job for KernelsCmd {
    fn run(self) -> ExitCode {
        super::run(|| super::jobs::kernels(&self.path, self.json, self.top))
    }
}

/// The chip catalogue's rooflines and ridge points.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct RooflineCmd {
    /// Only these chips (repeatable; names as in the catalogue or a device type).
    #[arg(long = "chip", value_name = "CHIP", value_parser = parse_chip)]
    chips: Vec<&'static ChipSpec>,
    /// Where a kernel of this intensity (FLOP/byte) falls on each chip.
    #[arg(long, value_name = "FLOP_PER_BYTE", value_parser = parse_intensity)]
    intensity: Option<FlopsPerByte>,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

impl Job for RooflineCmd {
    fn run(mut self) -> ExitCode {
        if self.chips.is_empty() {
            self.chips = CATALOGUE.iter().collect();
        }
        super::run(|| super::jobs::roofline(&self.chips, self.json, self.intensity))
    }
}

/// Write synthetic TPU- or GPU-shaped profiles (deterministic for the seed) for benchmarks and
/// scale tests.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct SynthCmd {
    /// The logdir to write: `DIR/plugins/profile/synthetic/<host>.xplane.pb` (with `--fixture`:
    /// `DIR/host0.xplane.pb`).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// About this many bytes per host (suffixes KB, MB, GB: powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "300MB", value_parser = super::synth::parse_size)]
    size: u64,
    /// Hosts to write.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    hosts: u32,
    /// The random seed (host i uses seed + i).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// A multi-slice TPU v5p run: SparseCores and `MegaScale:` DCN transfers.
    #[arg(long, conflicts_with = "gpu")]
    multislice: bool,
    /// An NVIDIA-shaped XLA:GPU host instead of a TPU host.
    #[arg(long)]
    gpu: bool,
    /// TPU planes and metadata only, no host threads: what a continuous-profiling snapshot keeps.
    #[arg(long, conflicts_with = "gpu")]
    device_only: bool,
    /// TPU cores without their `Steps` line: no step markers, the time base is the program
    /// executions (what captures without step annotations give).
    #[arg(long, conflicts_with = "gpu")]
    no_steps: bool,
    /// GPUs per host with `--gpu`.
    #[arg(long, value_name = "N", default_value_t = 8, requires = "gpu",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    devices: u32,
    /// One named reference fixture instead (a single host file in DIR).
    #[arg(long, value_name = "NAME", value_parser = super::synth::parse_fixture,
          conflicts_with_all = ["gpu", "multislice", "hosts", "size"])]
    fixture: Option<String>,
}

impl Job for SynthCmd {
    fn run(self) -> ExitCode {
        let spec = super::synth::Synth {
            out: self.out,
            size: self.size,
            hosts: self.hosts,
            seed: self.seed,
            multislice: self.multislice,
            device_only: self.device_only,
            no_steps: self.no_steps,
            gpu: self.gpu.then_some(self.devices),
            fixture: self.fixture,
        };
        super::run(|| super::synth::write(&spec))
    }
}

/// List every run of a logdir: capture time, hosts, size, verdict, step time (and its change from
/// the run before), top finding. Runs are scanned in parallel; each summary is cached outside the
/// logdir, keyed by its files' path, size and modification time.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct RunsCmd {
    /// The logdir (`LOGDIR/plugins/profile/RUN/*.xplane.pb`).
    logdir: PathBuf,
    /// A JSON array of the run summaries.
    #[arg(long)]
    json: bool,
    /// Where to cache run summaries [default: $XLENS_CACHE_DIR, $XDG_CACHE_HOME/xlens or
    /// ~/.cache/xlens].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Scan every run again; read and write no cache.
    #[arg(long)]
    no_cache: bool,
}

impl Job for RunsCmd {
    fn run(self) -> ExitCode {
        let cache = super::runs::cache_dir(self.cache_dir, self.no_cache);
        super::run(|| super::runs::runs(&self.logdir, self.json, cache.as_deref()))
    }
}

/// Watch a logdir: scan each new run once its files stop changing and print its summary as one
/// JSON line (the fields of `xlens runs --json`, with the step time's change from the run before,
/// for alerting when a run regresses).
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct WatchCmd {
    /// The logdir (`LOGDIR/plugins/profile/RUN/*.xplane.pb`).
    logdir: PathBuf,
    /// Seconds between two looks at the logdir.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0, value_parser = parse_interval)]
    interval: f64,
    /// Also report the runs already in the logdir (oldest first); by default only new ones.
    #[arg(long)]
    existing: bool,
    /// Stop after this many runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Where to cache run summaries (as for `xlens runs`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Read and write no cache.
    #[arg(long)]
    no_cache: bool,
}

fn parse_interval(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.01..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds between 0.01 and 86400")),
    }
}

impl Job for WatchCmd {
    fn run(self) -> ExitCode {
        let watch = super::runs::Watch {
            logdir: self.logdir,
            interval: std::time::Duration::from_secs_f64(self.interval),
            existing: self.existing,
            count: self.count.map(|c| usize::try_from(c).unwrap_or(usize::MAX)),
            cache: super::runs::cache_dir(self.cache_dir, self.no_cache),
        };
        super::run(|| super::runs::watch(&watch))
    }
}

/// Compare two runs: did the change help? The verdict (IMPROVED, REGRESSED, NEUTRAL or
/// INCOMPARABLE) rests on a 95 % bootstrap interval of the step time's change over steps; ops are
/// matched across recompiled programs; findings are resolved, new or persisting.
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct DiffCmd {
    /// The base run: a `*.xplane.pb`, a session directory, a logdir, or a saved
    /// `xlens scan --format json` report.
    base: PathBuf,
    /// The new run (the same kinds of input).
    new: PathBuf,
    /// The diff on stdout [default: text].
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Same as `--format json`.
    #[arg(long)]
    json: bool,
    /// Also write the diff as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write the diff's tables as Parquet (`DIR/diff_<table>/part-<writer>.parquet`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Exit with 4 when the step time regressed by more than PCT % with its interval excluding
    /// zero (a CI gate).
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    fail_on_regression: Option<f64>,
    /// The smallest change (in %) the verdict counts as IMPROVED or REGRESSED: run-to-run noise
    /// the steps of one run cannot show.
    #[arg(long, value_name = "PCT", default_value_t = 2.0, value_parser = parse_pct)]
    min_change: f64,
    /// Compare only these steps of each profile (`A..B`, `A..`, `..B`, `N`).
    #[arg(long, value_name = "A..B", value_parser = StepRange::parse)]
    steps: Option<StepRange>,
    /// Another run of the base side (repeatable): repeated runs put run-to-run noise into the
    /// interval.
    #[arg(long, value_name = "PATH")]
    base_repeat: Vec<PathBuf>,
    /// Another run of the new side (repeatable).
    #[arg(long, value_name = "PATH")]
    new_repeat: Vec<PathBuf>,
    /// Accepted for symmetry with `scan` (the diff draws no progress line).
    #[arg(long, short)]
    quiet: bool,
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a non-negative percentage")),
    }
}

impl Job for DiffCmd {
    fn run(self) -> ExitCode {
        let args = super::diff::DiffArgs {
            base: self.base,
            new: self.new,
            base_repeats: self.base_repeat,
            new_repeats: self.new_repeat,
            json: matches!(self.format, Some(Format::Json))
                || (self.json && !matches!(self.format, Some(Format::Text))),
            html: self.html,
            out: self.out,
            fail_on_regression: self.fail_on_regression,
            steps: self.steps,
            config: crate::report::diff::DiffConfig { min_change_pct: self.min_change },
        };
        let mut tripped = false;
        let code = super::run(|| {
            tripped = super::diff::run(&args)?;
            Ok(())
        });
        if tripped { ExitCode::from(4) } else { code }
    }
}

impl Job for crate::args::PlanFlags {
    fn run(self) -> ExitCode {
        self.run_as("hbm_plan")
    }

    fn run_as(self, name: &str) -> ExitCode {
        flags_job(name, || super::jobs::plan(self))
    }
}

impl Job for crate::args::AuditFlags {
    fn run(self) -> ExitCode {
        self.run_as("precision_audit")
    }

    fn run_as(self, name: &str) -> ExitCode {
        flags_job(name, || super::jobs::audit(self))
    }
}

/// Runs `plan` or `audit`: flags that parse but do not make a model (a size of zero, no model at
/// all) are a usage mistake like any flag clap refuses (exit 2, pointing at `name --help`); a plan
/// that cannot be made is an error (exit 1).
fn flags_job(name: &str, job: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    match job() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<crate::args::ArgsError>().is_some() => {
            eprintln!("{} (see {name} --help)", crate::report::tables::error_line(e.as_ref()));
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("{}", crate::report::tables::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
