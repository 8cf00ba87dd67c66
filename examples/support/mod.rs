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
    keep_freed_memory();
    start_workers();
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", xlens::render::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Has glibc's allocator keep the memory a phase frees for the next phases, instead of handing
/// every block of 128 KiB or more back to the OS and faulting fresh pages in for the next (about
/// 2 us a page on a VM): blocks up to 32 MiB come from the heap, and the heap is not trimmed.
/// A job runs once and exits, so what it keeps is its own peak, which it reached anyway
/// (peak RSS unchanged on the benchmark profiles; gpu300 0.228 -> 0.222 s). The heaps also grow
/// 16 MiB at a time, not 128 KiB: the HLO decode's tens of thousands of small allocations grew
/// them by one `brk` or `mprotect` call (and a wait for the address-space lock) every few
/// hundred (h200_train_bf16 11.5 -> 10.3 ms); address space reserved, not memory touched.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other thread
    // exists, and the values are in the documented ranges.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 16 << 20);
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
