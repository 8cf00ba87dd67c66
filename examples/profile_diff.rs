//! Compare two runs: did the change help?
//!
//! ```text
//! cargo run --release --example profile_diff -- BASE NEW [--format text|json] [--html FILE]
//!                                               [--out DIR] [--fail-on-regression PCT]
//! ```
//! BASE and NEW are anything `fault_scan` accepts (a `*.xplane.pb`, a session directory, a
//! logdir) or a report saved with `fault_scan --format json`, so CI can keep a baseline without
//! keeping the profile. The verdict (`IMPROVED`, `REGRESSED`, `NEUTRAL`, `INCOMPARABLE`) rests on a
//! 95 % bootstrap interval of the mean step time's change (see `xlens::report::diff`).
//! Exit code: 0; 1 on an error; 2 on a usage mistake; 4 when `--fail-on-regression PCT` is given
//! and the step time regressed by more than PCT % with its interval excluding zero.
//!
//! The same arguments as `xlens diff` (one declaration, `src/cli/commands.rs`).

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::DiffCmd>("profile_diff")
}
