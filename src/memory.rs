//! `xlens memory` as a library call: each HLO program's device memory as XProf's
//! `get_peak_allocations` lists it ([`program_memory`]): the total of its buffer assignment and
//! the buffers live at its peak, grouped as XProf groups them; and each host's runtime memory
//! profile as XProf's `get_memory_profile` computes it ([`memory_report`]): per allocator its
//! peak, stack, heap, free memory, fragmentation and capacity.

use std::path::Path;

use crate::documents::{BoxError, HloModules, OpenedRun, Partial, hlo_modules_in, hlo_modules_of, open_readable};
use crate::report::tables::memory::{ProgramMemory, memory_json};
use crate::report::tables::memory_profile::{HostMemoryProfile, memory_profile_json};
use crate::roofline::memory_profile::memory_profile;

/// The device memory of every program of the profile at `path` (a session, or one
/// `*.hlo_proto.pb`) that carries a buffer assignment (`xlens memory`). A program whose
/// heap trace does not replay is left out with its error in `errors`.
pub fn program_memory(path: &Path) -> Result<Partial<Vec<ProgramMemory>>, BoxError> {
    Ok(programs_of(&hlo_modules_of(path)?))
}

/// The programs of `hlo` that carry a buffer assignment, with their peak allocations.
fn programs_of(hlo: &HloModules) -> Partial<Vec<ProgramMemory>> {
    let mut errors = hlo.warnings.clone();
    let mut programs = Vec::new();
    for m in &hlo.modules {
        match m.peak_allocations() {
            Ok(Some(allocations)) => programs.push(ProgramMemory { module_name: m.display_name(), allocations }),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    Partial { hosts: programs, skipped_hosts: hlo.skipped_hosts.clone(), errors }
}

/// The `memory --json` document of what [`program_memory`] read (`top` programs, all when
/// `None`).
pub fn memory_document(p: &Partial<Vec<ProgramMemory>>, top: Option<usize>) -> serde_json::Value {
    p.document(memory_json(&p.hosts, top))
}

/// What `xlens memory` reads of a profile: the programs' peak allocations and the hosts' runtime
/// memory profiles.
#[derive(Debug)]
pub struct MemoryReport {
    /// The programs with a buffer assignment ([`program_memory`]).
    pub programs: Partial<Vec<ProgramMemory>>,
    /// Each host's runtime memory profile; `None` for a lone `*.hlo_proto.pb`, which holds no
    /// runtime events.
    pub runtime: Option<Partial<Vec<HostMemoryProfile>>>,
}

/// The programs' memory and the hosts' runtime memory profiles of the profile at `path` (a
/// session, or one `*.hlo_proto.pb`): `xlens memory`.
pub fn memory_report(path: &Path) -> Result<MemoryReport, BoxError> {
    if path.to_string_lossy().ends_with(".hlo_proto.pb") {
        return Ok(MemoryReport { programs: program_memory(path)?, runtime: None });
    }
    memory_report_in(&open_readable(path)?)
}

/// [`memory_report`] of a run already opened. A host whose allocator events do not decode is
/// skipped from the memory profile (with its error); the programs are answered whatever the
/// memory profile's fate.
pub fn memory_report_in(opened: &OpenedRun) -> Result<MemoryReport, BoxError> {
    let programs = programs_of(&hlo_modules_in(opened));
    let runtime = crate::documents::per_host_in(opened, |h| {
        memory_profile(h.space()).map(|profile| HostMemoryProfile { host: h.name().to_owned(), profile })
    })
    // Every host's allocator events failed to decode: the programs are still answered, and the
    // memory profile says why it has no host.
    .unwrap_or_else(|e| {
        let line = crate::report::tables::error_line(&*e);
        let why = line.strip_prefix("error: ").unwrap_or(&line);
        Partial { hosts: Vec::new(), skipped_hosts: Vec::new(), errors: vec![format!("memory profile: {why}")] }
    });
    Ok(MemoryReport { programs, runtime: Some(runtime) })
}

/// The `memory --json` document of what [`memory_report`] read: [`memory_document`]'s, with
/// `memory_profile`: `{"hosts": [...]}` (see [`memory_profile_json`]), or `{"hosts": null,
/// "reason"}` for a lone `*.hlo_proto.pb`.
pub fn memory_report_document(r: &MemoryReport, top: Option<usize>) -> serde_json::Value {
    let mut doc = memory_document(&r.programs, top);
    let runtime = match &r.runtime {
        Some(p) => p.document(serde_json::json!({ "hosts": memory_profile_json(&p.hosts) })),
        None => serde_json::json!({
            "hosts": null,
            "reason": "a *.hlo_proto.pb holds no runtime events: the memory profile is in the profile's *.xplane.pb",
        }),
    };
    if let serde_json::Value::Object(map) = &mut doc {
        map.insert("memory_profile".to_owned(), runtime);
    }
    doc
}
