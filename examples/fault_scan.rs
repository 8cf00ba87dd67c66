//! The main job: scan a profile and say what is wrong with the step, with evidence and a fix.
//!
//! ```text
//! cargo run --release --example fault_scan -- (PATH | --sample) [--format text|json | --json] [--html FILE]
//!                                             [--out DIR] [--fail-on P0|P1|P2] [--quiet]
//! ```
//! PATH is a `*.xplane.pb`, a session directory or a logdir; `--sample` scans the bundled sample.
//! Hosts are scanned in parallel and streamed (each is unmapped once scanned); a progress bar goes
//! to stderr when it is a terminal, unless `--quiet`. `--out DIR` writes every table as Parquet,
//! partitioned by host (`DIR/<table>/host=<host>/part-<scan>.parquet`, see
//! `xlens::report::frame::Dataset`; concurrent scans into one DIR add files, never overwrite).
//! A host file that cannot be read is listed in the report (`skipped_hosts`) and the others are
//! analysed; the status is then `INCOMPLETE`.
//! Exit code: 0; 1 on an error (one line on stderr; every output is still attempted); 3 when
//! `--fail-on` is given and a finding is at that severity or worse, or the status is `INCOMPLETE`.
//!
//! The same arguments as `xlens scan` (one declaration, `src/cli/commands.rs`): `--help`
//! lists every flag and the exit codes; a usage mistake is one line on stderr and exit 2.

fn main() -> std::process::ExitCode {
    xlens::cli::example::<xlens::cli::ScanCmd>("fault_scan")
}
