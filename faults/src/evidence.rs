//! Helpers detectors share to build evidence and walk timelines.

use xlens_hlo::{InstrId, Module};
use xlens_xplane::{Event, Picos};

use crate::finding::Evidence;
use crate::profile::HostProfile;

/// Evidence for a timeline event.
pub fn event(host: &HostProfile, ev: &Event<'_>) -> Evidence {
    Evidence::Event {
        host: host.name().to_owned(),
        plane: ev.plane().name().to_owned(),
        line: ev.line().name().to_owned(),
        name: ev.name().to_owned(),
        start_us: ev.start().as_us_f64(),
        duration_us: ev.duration().as_us_f64(),
    }
}

/// Evidence for an event known only by its parts.
pub fn event_parts(host: &HostProfile, plane: &str, line: &str, name: &str, start: Picos, duration: Picos) -> Evidence {
    Evidence::Event {
        host: host.name().to_owned(),
        plane: plane.to_owned(),
        line: line.to_owned(),
        name: name.to_owned(),
        start_us: start.as_us_f64(),
        duration_us: duration.as_us_f64(),
    }
}

/// Evidence for an HLO instruction, with its JAX source line when the module records it.
pub fn instruction(module: &Module, id: InstrId) -> Evidence {
    let instr = module.instruction(id);
    Evidence::Instruction {
        module: module.display_name(),
        name: instr.name().to_owned(),
        opcode: instr.opcode_name().to_owned(),
        op_name: instr.op_name().to_owned(),
        source: module.source(id).map(|s| format!("{}:{}", s.file, s.line)),
        text: module.instruction_text(id),
    }
}

/// The events of every host thread, flattened, with a predicate on the name (cheap: the name is
/// resolved from the metadata table before the event is inspected further).
pub fn host_events<'a>(
    host: &'a HostProfile,
    mut keep: impl FnMut(&str) -> bool + 'a,
) -> impl Iterator<Item = Event<'a>> + 'a {
    let plane = host.space().host_threads();
    plane
        .into_iter()
        .flat_map(move |p| p.lines().iter().flat_map(move |l| l.events(p).map_while(|e| e.ok())))
        .filter(move |e| keep(e.name()))
}

/// Milliseconds in a picosecond duration.
pub fn ms(t: Picos) -> f64 {
    t.as_ms_f64()
}
