//! The `xlens` command line and the examples' command lines, as a library module (feature
//! `cli`): `src/main.rs` and each example are one call into it ([`main`], [`example`]), so every
//! program parses with the same clap declarations and runs the same job code.
//!
//! Errors end the command with one clean line on stderr (never a backtrace, whatever
//! `RUST_BACKTRACE` says) and exit status 1; usage mistakes exit 2 ([`EXIT_CODES`]).

#[cfg(feature = "capture")]
mod capture;
mod commands;
mod device;
mod diff;
mod events;
mod graph;
mod jobs;
mod mcp;
mod memory;
#[cfg(feature = "capture")]
mod monitor;
mod runs;
mod scan;
mod synth;

#[cfg(feature = "capture")]
pub use capture::{CAPTURE_EXIT_CODES, CaptureCmd};
pub use commands::{
    DiffCmd, EXIT_CODES, HloCmd, InventoryCmd, Job, KernelsCmd, OpsCmd, RooflineCmd, RunsCmd, ScanCmd, SynthCmd,
    WatchCmd, example, usage_error,
};
pub use device::DeviceCmd;
pub use events::EventsCmd;
pub use graph::GraphCmd;
pub use mcp::McpCmd;
pub use memory::MemoryCmd;
#[cfg(feature = "capture")]
pub use monitor::{MONITOR_EXIT_CODES, MonitorCmd, SNAPSHOT_EXIT_CODES, SnapshotCmd};

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
    /// Take a profile of running programs now (their profiler service, host:port), in
    /// parallel into one run; `--scan` scans it.
    #[cfg(feature = "capture")]
    Capture(CaptureCmd),
    /// Watch running programs: a short capture at a fixed interval, one JSON line each; a
    /// step-time regression beyond noise triggers a full capture and an alert line.
    #[cfg(feature = "capture")]
    Monitor(MonitorCmd),
    /// Continuous profiling of running programs: start, take (save the buffer as a run and
    /// scan it), stop.
    #[cfg(feature = "capture")]
    Snapshot(SnapshotCmd),
    /// Steps, the op profile (per-op self time, FLOPs, bytes, roofline bound) and the step anatomy.
    Ops(OpsCmd),
    /// The HLO modules: opcodes, FLOPs, aliasing, collectives.
    Hlo(HloCmd),
    /// Planes, lines and event counts of every host.
    Inventory(InventoryCmd),
    /// GPU kernels: launches, durations, grid and block, tensor cores.
    Kernels(KernelsCmd),
    /// Timeline events by plane, line, name pattern and time window: count, total, mean,
    /// percentiles, top groups; the events themselves; each plane's lines.
    Events(EventsCmd),
    /// Hosts, each host's device (type, peaks, ridge point) and the key figures: step time, duty
    /// cycle, utilisations, roofline efficiency, memory peak.
    Device(DeviceCmd),
    /// Each HLO program's device memory: its total and the buffers live at its peak.
    Memory(MemoryCmd),
    /// The HLO graph around one instruction (producers, consumers, their shapes, sources and
    /// times), or the HLO text of an instruction, a computation or a program.
    Graph(GraphCmd),
    /// The chip catalogue's rooflines and ridge points.
    Roofline(RooflineCmd),
    /// HBM plans: state, activations, KV cache, bytes per chip, fewest chips, largest batch.
    Plan(crate::args::PlanFlags),
    /// BF16 / INT8 errors of matmuls and accumulation drift.
    Audit(crate::args::AuditFlags),
    /// Write synthetic TPU- or GPU-shaped profiles for benchmarks and scale tests.
    Synth(SynthCmd),
    /// Serve the analyses as MCP tools over stdio, for agents (see docs/agents.md).
    Mcp(McpCmd),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The command whose `--help` a usage mistake points to: `xlens SUBCOMMAND` when the first
/// word names a subcommand, else `xlens`.
fn help_name(mut args: impl Iterator<Item = String>) -> String {
    let command = Cli::command();
    match args.next() {
        Some(word) if command.get_subcommands().any(|s| s.get_name() == word) => format!("xlens {word}"),
        _ => "xlens".to_owned(),
    }
}

/// The `xlens` program: parses `std::env::args` and runs the subcommand; the exit code follows
/// [`EXIT_CODES`].
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, &help_name(std::env::args().skip(1))),
    };
    match cli.command {
        Command::Scan(cmd) => cmd.run(),
        Command::Diff(cmd) => cmd.run(),
        Command::Runs(cmd) => cmd.run(),
        Command::Watch(cmd) => cmd.run(),
        #[cfg(feature = "capture")]
        Command::Capture(cmd) => cmd.run(),
        #[cfg(feature = "capture")]
        Command::Monitor(cmd) => cmd.run(),
        #[cfg(feature = "capture")]
        Command::Snapshot(cmd) => cmd.run(),
        Command::Ops(cmd) => cmd.run(),
        Command::Hlo(cmd) => cmd.run(),
        Command::Inventory(cmd) => cmd.run(),
        Command::Kernels(cmd) => cmd.run(),
        Command::Events(cmd) => cmd.run(),
        Command::Device(cmd) => cmd.run(),
        Command::Memory(cmd) => cmd.run(),
        Command::Graph(cmd) => cmd.run(),
        Command::Roofline(cmd) => cmd.run(),
        Command::Synth(cmd) => cmd.run(),
        Command::Mcp(cmd) => cmd.run(),
        Command::Plan(cmd) => cmd.run_as("xlens plan"),
        Command::Audit(cmd) => cmd.run_as("xlens audit"),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "xlens", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}

use std::io::Write;

/// Runs an example's body; an error prints [`crate::report::tables::error_line`] and exits with 1.
pub(crate) fn run(body: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    keep_freed_memory();
    exit_on_sigbus();
    start_workers();
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", crate::report::tables::error_line(e.as_ref()));
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

/// What a program ended by [`exit_on_sigbus`] prints: one line, as every error does.
const SIGBUS_LINE: &[u8] = b"error: a profile file changed size while it was being read (truncated or replaced during \
the scan); scan it again when it is complete\n";

/// Turns the `SIGBUS` of a profile file that shrinks while it is mapped into one error line and
/// exit status 1, where the default action killed the program (exit 135) without a word.
///
/// Host files are memory-mapped (`xlens_xplane::open_space`); a file truncated or rewritten in
/// place while it is read (a run still being written, `cp` over a profile during `runs`) makes
/// each read of a page past its new end raise `SIGBUS`. No library can turn that into an error
/// (a signal handler is process-wide state, and the library crates hold none), so the CLI, which
/// owns its process, installs the handler once here; the scan's own check
/// (`Space::check_file_unchanged`) reports a file that changed without a fault. The handler is
/// async-signal-safe: it only calls `write(2)` and `_exit(2)`, with a static message. On Linux,
/// only a fault on a missing page of a mapping (`BUS_ADRERR`) is taken for a changed file; any
/// other `SIGBUS` (a misaligned access, a hardware error) gets the default action back and
/// happens again as it would have.
fn exit_on_sigbus() {
    #[cfg(unix)]
    {
        extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler; resetting
            // the disposition is async-signal-safe, and returning re-runs the faulting access,
            // which the default action then ends as it would have without this handler.
            #[allow(unsafe_code)]
            unsafe {
                if info.is_null() || (*info).si_code != libc::BUS_ADRERR {
                    libc::signal(libc::SIGBUS, libc::SIG_DFL);
                    return;
                }
            }
            #[cfg(not(any(target_os = "linux", target_os = "android")))]
            let _ = info;
            // Several workers can read past the new end at once: the first writes the line and
            // ends the process; the others wait for it (an atomic swap and `pause` are
            // async-signal-safe), so the user reads one line, not one per thread.
            static FIRST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if FIRST.swap(true, std::sync::atomic::Ordering::SeqCst) {
                loop {
                    // SAFETY: `pause` is async-signal-safe; the first handler's `_exit` ends
                    // this thread with the process.
                    #[allow(unsafe_code)]
                    unsafe {
                        libc::pause();
                    }
                }
            }
            // SAFETY: `write` and `_exit` are async-signal-safe; the buffer is a static.
            #[allow(unsafe_code)]
            unsafe {
                libc::write(2, SIGBUS_LINE.as_ptr().cast(), SIGBUS_LINE.len());
                libc::_exit(1);
            }
        }
        // SAFETY: installs a handler for one signal, with a zeroed (then filled) `sigaction`; the
        // handler has the `SA_SIGINFO` signature. Called before the worker threads start.
        #[allow(unsafe_code)]
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
        }
    }
}

/// Starts the worker threads and has each allocate once, before the job maps its first file.
///
/// A thread's first allocation makes its malloc arena, which takes the address space's lock for
/// writing. A worker that started while another mapped the profile's pages in (a read hold of
/// that lock, chunk after chunk) waited behind it: on gpu300 the file took 40 ms to open instead
/// of 27 in more than half the runs, one core idle. Each worker's heap is then backed by huge
/// pages ([`huge_page_heap`]).
fn start_workers() {
    rayon::broadcast(|_| huge_page_heap());
}

/// Has the calling thread's malloc heap take 2 MiB pages as it is first written, where the
/// kernel offers transparent huge pages on request (the usual `madvise` setting).
///
/// A small capture's scan writes about 2 MiB of fresh heap on each worker (the HLO modules'
/// instructions, shapes and names) and took a page fault for every 4 KiB of it, some 1,000 a
/// scan at a few microseconds each on a VM: 35-40 % of the CPU of a 10 ms scan was the kernel's.
/// The heap is grown by one block first, so that its writable part spans whole 2 MiB ranges
/// (a thread heap otherwise grows a few pages at a time and no fault finds a whole range
/// inside it), advised to take huge pages, and its first 2 MiB, which the allocator had
/// already touched when it made the arena (so they would stay small pages), are collapsed
/// into one. The h200 captures scan 15-20 % faster with about 1,100 fewer faults and 1-4 MiB
/// more resident; large profiles are unchanged (their heaps are written in full either way).
///
/// Best effort: glibc keeps a thread's heap in a 64 MiB block aligned to its size (its
/// `HEAP_MAX_SIZE` on 64-bit), which locates the heap from any pointer into it; a heap that is
/// not found, advice the kernel does not know, and huge pages it cannot find all leave the
/// small pages, and the advice never changes what memory holds.
fn huge_page_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    {
        /// Large enough to grow the heap over several 2 MiB ranges, under the 32 MiB mmap
        /// threshold set by [`keep_freed_memory`] so that it comes from the heap; freed at once,
        /// never written.
        const GROW_BYTES: usize = 16 << 20;
        const HEAP_BLOCK_BYTES: usize = 64 << 20;
        const HUGE_PAGE_BYTES: usize = 2 << 20;
        // Where the block cannot be had (a strict overcommit limit), the heap keeps small pages.
        let mut block: Vec<u8> = Vec::new();
        if block.try_reserve_exact(GROW_BYTES).is_err() {
            drop(std::hint::black_box(Box::new(0u8)));
            return;
        }
        let at = std::hint::black_box(block.as_ptr()) as usize;
        // SAFETY: `sbrk(0)` only reads the program break. The advice is given on a range of
        // this process's own address space; `MADV_HUGEPAGE` and `MADV_COLLAPSE` change how
        // memory is backed, never what it holds, and fail harmlessly on a range that is not
        // mapped or not anonymous.
        #[allow(unsafe_code)]
        unsafe {
            // Below the program break: the main arena's heap (a worker that got no arena of its
            // own), which is not laid out in blocks; left alone.
            if at >= libc::sbrk(0) as usize {
                let heap = (at & !(HEAP_BLOCK_BYTES - 1)) as *mut libc::c_void;
                if libc::madvise(heap, HEAP_BLOCK_BYTES, libc::MADV_HUGEPAGE) == 0 {
                    libc::madvise(heap, HUGE_PAGE_BYTES, libc::MADV_COLLAPSE);
                }
            }
        }
        drop(block);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
    drop(std::hint::black_box(Box::new(0u8)));
}

/// Writes `value` to stdout as pretty JSON and a newline, as it is serialized (through a
/// buffer, no copy of the document in memory: `ops --json`'s rows are written from the
/// analyses); a closed pipe ends the output quietly, as [`emit`].
pub(crate) fn emit_json<T: serde::Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(JSON_BUFFER_BYTES, std::io::stdout().lock());
    let written = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::Error::new(e).context("writing to stdout")),
        _ => Ok(()),
    }
}

/// The buffer between a JSON serializer and stdout: large enough that a document's many small
/// writes reach the pipe in few system calls.
const JSON_BUFFER_BYTES: usize = 1 << 16;

/// Writes `text` to stdout; a closed pipe (`fault_scan … | head`) ends the output quietly
/// instead of panicking.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::Error::new(e).context("writing to stdout")),
        _ => Ok(()),
    }
}
