//! Helpers detectors share to build evidence: time figures, event and instruction evidence, name
//! lists, HLO helpers. The timeline walks they read are `xlens_roofline::walks`'s.

use xlens_hlo::{InstrId, Module};
use xlens_xplane::{Event, Picos};

// The interval helpers live beside the anatomy's in roofline; the detectors reach them here.
pub(crate) use xlens_roofline::{covered, covered_from, merge_in_order, partition_from};

use crate::finding::Evidence;
// The step medians and the programs the steps ran are the profile's analyses, the interval and
// median helpers sit below it, and the timeline walks beside it; the detectors reach them here.
pub(crate) use xlens_roofline::step_modules;
pub(crate) use xlens_roofline::walks::{
    AsyncPairer, ByDevice, CollectiveWalk, DeviceOp, DeviceOpInfo, DeviceOpLine, OpSpan, OpTime, async_line_windows,
    async_phase, busy_union, class_unions, device_ordinal, host_events, host_op_spans, metadata_op_name,
    op_spans_where, op_times, picked_host_op_spans, step_marker_lines, union, walk_collectives,
};
pub(crate) use xlens_roofline::{IntervalCursor, in_intervals, median_of};

use crate::profile::HostProfile;
use crate::units::TimeUnit;

/// One time figure in its own unit: `41.9 us` under a millisecond, `20.452 ms` above.
pub(crate) fn duration_text(ms: f64) -> String {
    TimeUnit::for_ms(ms).text(ms)
}

/// Evidence for a timeline event.
pub(crate) fn event(host: &HostProfile, ev: &Event<'_>) -> Evidence {
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
pub(crate) fn event_parts(
    host: &HostProfile,
    plane: &str,
    line: &str,
    name: &str,
    start: Picos,
    duration: Picos,
) -> Evidence {
    Evidence::Event {
        host: host.name().to_owned(),
        plane: plane.to_owned(),
        line: line.to_owned(),
        name: name.to_owned(),
        start_us: start.as_us_f64(),
        duration_us: duration.as_us_f64(),
    }
}

/// How many names an evidence list shows before it says how many more there are.
pub(crate) const LIST_NAMES: usize = 20;

/// The first [`LIST_NAMES`] names joined with `, `, then `… and N more` when there are more: a
/// long capture has thousands of steps, and evidence stays readable.
pub(crate) fn name_list<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    let mut more = 0usize;
    for (i, name) in names.into_iter().enumerate() {
        if i < LIST_NAMES {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(name.as_ref());
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push_str(&format!(", … and {more} more"));
    }
    out
}

/// Evidence for an HLO instruction, with its JAX source line when the module records it.
pub(crate) fn instruction(module: &Module, id: InstrId) -> Evidence {
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

/// Names of compile events on host threads: JAX's `backend_compile[_and_load]`, the PjRt
/// clients' `PjRtCpuClient::Compile`, `PjRtCApiClient::CompileAndLoad(jit_f)`, TF's `XlaCompile`.
pub(crate) fn is_compile_event(name: &str) -> bool {
    name == "backend_compile_and_load"
        || name == "backend_compile"
        || name.contains("Client::Compile")
        || name == "XlaCompile"
}

// ---------------------------------------------------------------------------------------------
// HLO helpers (shared by the HLO detectors).

/// True for all-gathers, synchronous or the start of an async pair.
pub(crate) fn is_all_gather(op: xlens_hlo::Opcode) -> bool {
    matches!(op, xlens_hlo::Opcode::AllGather | xlens_hlo::Opcode::AllGatherStart)
}

/// The all-gathers of `module` outside unreachable computations, in module order.
pub(crate) fn reachable_all_gathers(module: &Module) -> Vec<&xlens_hlo::Collective> {
    module
        .collectives()
        .iter()
        .filter(|c| is_all_gather(c.opcode))
        .filter(|c| {
            let computation = module.instruction(c.instruction).computation();
            module.computation(computation).kind() != xlens_hlo::ComputationKind::Unreachable
        })
        .collect()
}

/// The instruction whose events time `id`: the async-start wrapping it (its events carry the
/// start's name), else itself.
pub(crate) fn timed_instruction(module: &Module, id: InstrId) -> InstrId {
    let comp = module.computation(module.instruction(id).computation());
    if comp.kind() == xlens_hlo::ComputationKind::Async
        && let Some(&caller) = comp.callers().first()
    {
        return caller;
    }
    id
}

/// The instructions that run as kernels: those of the entry computation and of loop bodies,
/// branches and called computations, without the structural ones (parameters, constants,
/// tuples, bitcasts) and the control flow that only calls others. Fusion bodies are not
/// kernels; their fusion instruction is. In module order.
pub(crate) fn kernels(module: &Module) -> Vec<InstrId> {
    use xlens_hlo::{ComputationKind, OpClass};
    module
        .computations()
        .iter()
        .filter(|c| {
            matches!(
                c.kind(),
                ComputationKind::Entry
                    | ComputationKind::WhileBody
                    | ComputationKind::WhileCondition
                    | ComputationKind::Branch
                    | ComputationKind::Call
                    | ComputationKind::Async
            )
        })
        .flat_map(|c| c.instructions().iter().copied())
        .filter(|&i| !matches!(module.instruction(i).opcode().class(), OpClass::Structural | OpClass::ControlFlow))
        .collect()
}

/// The instruction that names the JAX op behind `id`: `id` itself when its metadata has an
/// `op_name`, else the instruction of its fused body nearest the root that has one (XLA:CPU
/// leaves many fusions without metadata), else `id`.
pub(crate) fn origin(module: &Module, id: InstrId) -> InstrId {
    if !module.instruction(id).op_name().is_empty() {
        return id;
    }
    let mut frontier = vec![id];
    // Breadth-first through nested fusion bodies, each body from its root backwards.
    for _ in 0..4 {
        let mut next = Vec::new();
        for f in frontier {
            let Some(body) = module.fused_computation(f) else { continue };
            if let Some(&found) =
                body.topological_order().iter().rev().find(|&&i| !module.instruction(i).op_name().is_empty())
            {
                return found;
            }
            next.extend(body.instructions().iter().copied().filter(|&i| module.fused_computation(i).is_some()));
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    id
}

/// Evidence for a kernel: the instruction itself, with the JAX op name and source line of its
/// [`origin`] when it carries none itself (a fusion without metadata).
pub(crate) fn kernel_instruction(module: &Module, id: InstrId) -> Evidence {
    let from = origin(module, id);
    let instr = module.instruction(id);
    Evidence::Instruction {
        module: module.display_name(),
        name: instr.name().to_owned(),
        opcode: instr.opcode_name().to_owned(),
        op_name: module.instruction(from).op_name().to_owned(),
        source: module.source(from).map(|s| format!("{}:{}", s.file, s.line)),
        text: module.instruction_text(id),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn compile_events() {
        assert!(super::is_compile_event("PjRtCApiClient::CompileAndLoad(jit_train_step)"));
        assert!(super::is_compile_event("backend_compile_and_load"));
        assert!(!super::is_compile_event("PjRtCApiClient::SerializeCompileOptions"));
    }

    use super::*;

    /// Long lists say how many names they leave out; short ones are whole.
    #[test]
    fn name_lists_stop_after_twenty_names() {
        let names: Vec<String> = (0..1510).map(|i| format!("train {i}")).collect();
        let text = name_list(&names);
        assert!(text.starts_with("train 0, train 1, "), "{text}");
        assert!(text.contains("train 19, … and 1490 more"), "{text}");
        assert!(!text.contains("train 20,"), "{text}");
        assert_eq!(name_list(["a", "b"]), "a, b");
        assert_eq!(name_list(Vec::<&str>::new()), "");
        let twenty: Vec<String> = (0..20).map(|i| i.to_string()).collect();
        assert!(!name_list(&twenty).contains("more"));
    }
}

#[cfg(test)]
mod time_unit_tests {
    use super::*;

    #[test]
    fn a_figure_alone_takes_its_own_unit() {
        assert_eq!(duration_text(0.0419), "41.9 us");
        assert_eq!(duration_text(20.4521), "20.452 ms");
    }
}
