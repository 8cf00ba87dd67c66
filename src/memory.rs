//! `xlens memory` as a library call: each HLO program's device memory as XProf's
//! `get_peak_allocations` lists it ([`program_memory`]): the total of its buffer assignment and
//! the buffers live at its peak, grouped as XProf groups them.

use std::path::Path;

use crate::documents::{BoxError, Partial, hlo_modules_of};
use crate::report::tables::memory::{ProgramMemory, memory_json};

/// The device memory of every program of the profile at `path` (a session, or one
/// `*.hlo_proto.pb`) that carries a buffer assignment (`xlens memory`). A program whose
/// heap trace does not replay is left out with its error in `errors`.
pub fn program_memory(path: &Path) -> Result<Partial<Vec<ProgramMemory>>, BoxError> {
    let hlo = hlo_modules_of(path)?;
    let mut errors = hlo.warnings.clone();
    let mut programs = Vec::new();
    for m in &hlo.modules {
        match m.peak_allocations() {
            Ok(Some(allocations)) => programs.push(ProgramMemory { module_name: m.display_name(), allocations }),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    Ok(Partial { hosts: programs, skipped_hosts: hlo.skipped_hosts, errors })
}

/// The `memory --json` document of what [`program_memory`] read (`top` programs, all when
/// `None`).
pub fn memory_document(p: &Partial<Vec<ProgramMemory>>, top: Option<usize>) -> serde_json::Value {
    p.document(memory_json(&p.hosts, top))
}
