//! What every example shares: errors end the command with one clean line on stderr (never a
//! backtrace, whatever `RUST_BACKTRACE` says) and exit status 1.

#[allow(dead_code)]
pub(crate) mod cli;
#[allow(dead_code)]
pub(crate) mod diff;
#[allow(dead_code)]
pub(crate) mod jobs;
#[allow(dead_code)]
pub(crate) mod runs;
#[allow(dead_code)]
pub(crate) mod scan;
#[allow(dead_code)]
pub(crate) mod synth;

use std::io::Write;
use std::process::ExitCode;

/// Runs an example's body; an error prints [`xlens::render::error_line`] and exits with 1.
pub(crate) fn run(body: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    start_workers();
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", xlens::render::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Starts the worker threads and has each allocate once, before the job maps its first file.
///
/// A thread's first allocation makes its malloc arena, which takes the address space's lock for
/// writing. A worker that started while another mapped the profile's pages in (a read hold of
/// that lock, chunk after chunk) waited behind it: on gpu300 the file took 40 ms to open instead
/// of 27 in more than half the runs, one core idle.
fn start_workers() {
    rayon::broadcast(|_| drop(std::hint::black_box(Box::new(0u8))));
}

/// Writes `text` to stdout; a closed pipe (`fault_scan … | head`) ends the output quietly
/// instead of panicking.
#[allow(dead_code)]
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::Error::new(e).context("writing to stdout")),
        _ => Ok(()),
    }
}
