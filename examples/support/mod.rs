//! What every example shares: errors end the command with one clean line on stderr (never a
//! backtrace, whatever `RUST_BACKTRACE` says) and exit status 1.

use std::process::ExitCode;

/// Runs an example's body; an error prints [`xlens::render::error_line`] and exits with 1.
pub(crate) fn run(body: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", xlens::render::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
