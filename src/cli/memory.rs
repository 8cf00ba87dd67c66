//! `xlens memory`: each HLO program's device memory, its total and the buffers live at its
//! peak (XProf's `get_peak_allocations`), and each host's runtime memory profile (XProf's
//! `get_memory_profile`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::commands::{EXIT_CODES, Job};
use super::{emit, emit_json};
use crate::memory::{memory_report, memory_report_document};
use crate::report::tables::memory::memory_text;
use crate::report::tables::memory_profile::memory_profile_text;

/// Each HLO program's device memory: the total of its buffer assignment and the buffers live
/// at its peak (parameters, outputs and constants included), largest first; and each host's
/// runtime memory profile: per allocator its peak, stack, heap, free memory, fragmentation and
/// capacity, from the allocator events of the capture (GPU and TPU runtimes record them).
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct MemoryCmd {
    /// A profile (file, session directory, logdir) or a `*.hlo_proto.pb`.
    path: PathBuf,
    /// One JSON document for the session.
    #[arg(long)]
    json: bool,
    /// Programs shown, largest first (text: 10 by default; JSON: all).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
}

impl Job for MemoryCmd {
    fn run(self) -> ExitCode {
        super::run(|| {
            let r = memory_report(&self.path).map_err(|e| anyhow::anyhow!(e))?;
            let mut skipped = r.programs.skipped_hosts.clone();
            let mut errors = r.programs.errors.clone();
            if let Some(runtime) = &r.runtime {
                skipped
                    .extend(runtime.skipped_hosts.iter().filter(|h| !skipped.contains(h)).cloned().collect::<Vec<_>>());
                errors.extend(runtime.errors.iter().filter(|e| !errors.contains(e)).cloned().collect::<Vec<_>>());
            }
            super::jobs::warn_skipped(&skipped, &errors);
            if self.json {
                emit_json(&memory_report_document(&r, self.top))
            } else {
                let mut text = memory_text(&r.programs.hosts, self.top.unwrap_or(10));
                if let Some(runtime) = &r.runtime {
                    text.push('\n');
                    text.push_str(&memory_profile_text(&runtime.hosts));
                }
                emit(&text)
            }
        })
    }
}
