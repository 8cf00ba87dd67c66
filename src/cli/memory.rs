//! `xlens memory`: each HLO program's device memory, its total and the buffers live at its
//! peak (XProf's `get_peak_allocations`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::commands::{EXIT_CODES, Job};
use super::{emit, emit_json};
use crate::memory::{memory_document, program_memory};
use crate::report::tables::memory::memory_text;

/// Each HLO program's device memory: the total of its buffer assignment and the buffers live
/// at its peak (parameters, outputs and constants included), largest first.
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
            let p = program_memory(&self.path).map_err(|e| anyhow::anyhow!(e))?;
            super::jobs::warn_skipped(&p.skipped_hosts, &p.errors);
            if self.json {
                emit_json(&memory_document(&p, self.top))
            } else {
                emit(&memory_text(&p.hosts, self.top.unwrap_or(10)))
            }
        })
    }
}
