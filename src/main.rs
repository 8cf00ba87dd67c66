//! `xlens`: the command line over the library. `xlens scan PATH` is the main job (what the
//! `fault_scan` example runs, the same code); `runs` and `watch` summarise every run of a logdir;
//! `ops`, `hlo`, `inventory`, `kernels`, `roofline`,
//! `plan`, `audit` and `synth` run the jobs of the other examples; `completions SHELL` prints
//! completions. The arguments are declared once, in `examples/support/cli.rs`.
//!
//! Exit codes: 0; 1 on an error (one line on stderr); 2 on a usage mistake (one line on stderr);
//! 3 when `scan --fail-on` trips; 4 when `diff --fail-on-regression` trips.

#[path = "../examples/support/mod.rs"]
mod support;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use support::cli::{
    DiffCmd, EXIT_CODES, HloCmd, InventoryCmd, Job, KernelsCmd, OpsCmd, RooflineCmd, RunsCmd, ScanCmd, SynthCmd,
    WatchCmd, usage_error, words,
};

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
    /// Compare two runs (profiles or saved JSON reports): a verdict that respects noise, the
    /// categories and ops that moved, findings resolved, new and persisting.
    Diff(DiffCmd),
    /// Every run of a logdir: capture time, hosts, size, verdict, step time and its change, top
    /// finding (runs scanned in parallel, summaries cached outside the logdir).
    Runs(RunsCmd),
    /// Scan each new run of a logdir as it lands; one JSON line per run.
    Watch(WatchCmd),
    /// Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
    Ops(OpsCmd),
    /// The HLO modules: opcodes, FLOPs, aliasing, collectives.
    Hlo(HloCmd),
    /// Planes, lines and event counts of every host.
    Inventory(InventoryCmd),
    /// GPU kernels: launches, durations, grid and block, tensor cores.
    Kernels(KernelsCmd),
    /// The chip catalogue's rooflines and ridge points.
    Roofline(RooflineCmd),
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
    /// Write synthetic TPU- or GPU-shaped profiles for benchmarks and scale tests.
    Synth(SynthCmd),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, "xlens"),
    };
    match cli.command {
        Command::Scan(cmd) => cmd.run(),
        Command::Diff(cmd) => cmd.run(),
        Command::Runs(cmd) => cmd.run(),
        Command::Watch(cmd) => cmd.run(),
        Command::Ops(cmd) => cmd.run(),
        Command::Hlo(cmd) => cmd.run(),
        Command::Inventory(cmd) => cmd.run(),
        Command::Kernels(cmd) => cmd.run(),
        Command::Roofline(cmd) => cmd.run(),
        Command::Synth(cmd) => cmd.run(),
        Command::Plan { args } => words("xlens plan", args, xlens::args::HBM_PLAN_USAGE, support::jobs::plan, true),
        Command::Audit { args } => {
            words("xlens audit", args, xlens::args::PRECISION_AUDIT_USAGE, support::jobs::audit, false)
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "xlens", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}
