//! The op profile of profiles without TPU op lines: XLA:CPU (and host-run) programs, whose
//! executed HLO instructions appear as events on host threads with an `hlo_op` stat.
//!
//! XProf has no op profile for these profiles; we build one the same way as for TPU: each event
//! is one occurrence of (`program_id`, `hlo_op`), time is its duration, self time subtracts the
//! `hlo_op` events nested in it on the same thread, and FLOPs and bytes come from the HLO cost
//! model of the instruction (the profile has no cost stats). Categories mirror the TPU ones so
//! every analysis reads both kinds of profile alike.

use std::collections::{BTreeMap, HashMap};

use xlens_hlo::{CustomCallKind, FusionKind, InstrId, Module, Opcode};

pub use crate::anatomy::{ATTENTION_CUSTOM_CALL, CONVOLUTION_CUSTOM_CALL, GEMM_CUSTOM_CALL};
use xlens_xplane::{Picos, Space};

use crate::device::{MemoryBytes, Span, TimedOp, nest};
use crate::host_ops::{HostOp, HostOps};
use crate::op_profile::{OpProfile, OpStats};

/// The category of an HLO instruction for the op profile: XLA's own category
/// (`HloInstruction::ToCategory`: data formatting, non-fusion elementwise, the opcode), with
/// library custom calls named by what they compute (`custom-call gemm`, `custom-call
/// convolution`, `custom-call attention`) and fusions named by what they do (`output fusion` when they contain a dot or convolution,
/// `data formatting` when they only move data, else `loop fusion` / `input fusion` /
/// `custom fusion`).
pub fn hlo_category(module: &Module, id: InstrId) -> String {
    let instr = module.instruction(id);
    // Library calls named by what they compute, so that the anatomy counts GEMMs, convolutions
    // and fused attention as matrix work (XProf calls them all `custom-call`).
    match module.custom_call_kind(id) {
        Some(CustomCallKind::Gemm) => return GEMM_CUSTOM_CALL.to_owned(),
        Some(CustomCallKind::Convolution) => return CONVOLUTION_CUSTOM_CALL.to_owned(),
        Some(CustomCallKind::Attention) => return ATTENTION_CUSTOM_CALL.to_owned(),
        _ => {}
    }
    if instr.opcode() != Opcode::Fusion {
        return module.xla_category(id).to_owned();
    }
    let Some(body) = module.fused_computation(id) else { return "fusion".to_owned() };
    let ops: Vec<Opcode> = body.instructions().iter().map(|&i| module.instruction(i).opcode()).collect();
    if ops.iter().any(|o| matches!(o, Opcode::Convolution)) {
        return "convolution fusion".to_owned();
    }
    if ops.iter().any(|o| matches!(o, Opcode::Dot)) {
        return "output fusion".to_owned();
    }
    let moves_only = ops.iter().all(|o| {
        o.is_data_formatting()
            || matches!(
                o,
                Opcode::Parameter
                    | Opcode::Bitcast
                    | Opcode::Broadcast
                    | Opcode::Slice
                    | Opcode::Concatenate
                    | Opcode::Tuple
                    | Opcode::GetTupleElement
                    | Opcode::Constant
            )
    });
    if moves_only && ops.iter().any(|o| o.is_data_formatting()) {
        return "data formatting".to_owned();
    }
    match instr.fusion_kind() {
        Some(FusionKind::Input) => "input fusion",
        Some(FusionKind::Output) => "output fusion",
        Some(FusionKind::Custom) => "custom fusion",
        _ => "loop fusion",
    }
    .to_owned()
}

impl OpProfile {
    /// Builds the op profile from host-thread op events (`hlo_op` stats), joined with the HLO
    /// modules of the profile for categories, FLOPs and bytes. Ops of programs without a module
    /// keep zero FLOPs and bytes and the category `unknown`.
    ///
    /// ```
    /// use xlens_xplane::Session;
    /// use xlens_roofline::OpProfile;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/clean");
    /// let session = xlens_testkit::open_session(dir)?;
    /// let space = session.hosts()[0].space();
    /// let (modules, _) = xlens_hlo::modules_from_space(space);
    /// let profile = OpProfile::from_host_threads(space, &modules)?;
    /// assert_eq!(profile.device_type.as_deref(), Some("CPU"));
    /// assert!(profile.ops.iter().any(|o| o.category == "output fusion" && o.flops > 0.0));
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_host_threads(space: &Space, modules: &[Module]) -> xlens_xplane::Result<OpProfile> {
        Ok(OpProfile::from_host_ops(&HostOps::read_with_modules(space, modules)?, modules))
    }

    /// [`OpProfile::from_host_threads`] over host ops already read (profiles shared by several
    /// analyses read them once).
    ///
    /// On GPU profiles (ops read from stream lines) the op profile is XProf's: a kernel or copy
    /// counts as an op only when its `hlo_op` and `program_id` name an instruction of a module
    /// of the profile; other events (runtime copies, library kernels without `hlo_op`) count in
    /// the devices' spans only, so they are part of `IDLE`. A GPU profile without any HLO
    /// module (TensorFlow) keeps every kernel and copy as an op: one whose kernel names its
    /// TensorFlow op is named by that op ([`HostOps::op_types`]) with the op's type as category
    /// (XProf's framework-op statistics), in program `TensorFlow executor`; the others are
    /// named by themselves, with the category their name gives (memory copies by direction,
    /// collective library kernels by collective, else `unknown`). The device type is left for
    /// the caller.
    ///
    /// One departure from XProf: kernels that ran inside a CUDA graph (XLA's command buffers,
    /// on by default since 2025) carry the command buffer's name as `hlo_op`, so XProf counts
    /// them all as `IDLE`. Here they are named by the instruction their kernel was emitted for
    /// (see [`HostOps::attribute_graph_kernels`]), and those no instruction names (library
    /// GEMMs, runtime copies) are kept under their kernel's name with the category it gives
    /// (`custom-call gemm` for GEMM libraries).
    pub fn from_host_ops(host_ops: &HostOps, modules: &[Module]) -> OpProfile {
        let gpu = host_ops.source == crate::OpSource::GpuStreams;
        let mut profile = OpProfile {
            device_type: if gpu { None } else { Some("CPU".to_owned()) },
            cores: 0,
            perf_env: None,
            programs: BTreeMap::new(),
            ops: Vec::new(),
            total_time: Picos::ZERO,
            idle_time: Picos::ZERO,
        };
        let by_program: HashMap<u64, &Module> = modules.iter().filter_map(|m| m.program_id().map(|p| (p, m))).collect();
        // Per (program, op name) key: the op's index in `stats`, or `DROPPED` for a GPU event no
        // instruction names; decided once per key, not per event.
        const UNSEEN: usize = usize::MAX;
        const DROPPED: usize = usize::MAX - 1;
        let keep_all = by_program.is_empty();
        let keys = host_ops.op_keys();
        let mut index: Vec<usize> = vec![UNSEEN; keys.len()];
        // Programs without a program id share key 0 of `profile.programs`, as before.
        let mut stats: Vec<OpStats> = Vec::new();
        let mut device_spans: BTreeMap<i64, (Picos, Picos)> = BTreeMap::new();
        let mut ops: Vec<TimedOp> = Vec::new();
        let mut op_keys: Vec<usize> = Vec::new();
        // Each device's span, widened per run of a line's ops on one device (a line is one
        // device's, usually) rather than by a map lookup per op.
        let widen = |spans: &mut BTreeMap<i64, (Picos, Picos)>, run: Option<(i64, Picos, Picos)>| {
            if let Some((core, start, end)) = run {
                let entry = spans.entry(core).or_insert((start, end));
                entry.0 = entry.0.min(start);
                entry.1 = entry.1.max(end);
            }
        };
        let span_of = |op: &HostOp| Span { start: op.start, duration: op.end.saturating_sub(op.start) };
        let account = |s: &mut OpStats, span: Span, self_time: Picos| {
            s.occurrences += 1;
            s.time += span.duration;
            s.self_time += self_time;
            s.normalized_time += span.duration;
        };
        // The ops of a line in nesting order (by start, longest first), whose self times are
        // settled as they close; only a line out of that order is collected and sorted.
        let mut open: Vec<(Span, Picos, usize)> = Vec::new();
        for (_, line_ops) in host_ops.by_line() {
            ops.clear();
            op_keys.clear();
            let in_order = line_ops.is_sorted_by(|a, b| {
                let (a, b) = (span_of(a), span_of(b));
                (a.start, std::cmp::Reverse(a.duration)) <= (b.start, std::cmp::Reverse(b.duration))
            });
            let mut run: Option<(i64, Picos, Picos)> = None;
            for op in line_ops {
                let context = host_ops.context(op);
                let program = context.program_id.unwrap_or(0);
                let span = span_of(op);
                match &mut run {
                    Some((core, start, end)) if *core == context.core => {
                        *start = (*start).min(span.start);
                        *end = (*end).max(span.end());
                    }
                    _ => {
                        widen(&mut device_spans, run);
                        run = Some((context.core, span.start, span.end()));
                    }
                }
                let slot = &mut index[keys.of(op)];
                if *slot == UNSEEN {
                    let attributed = context
                        .program_id
                        .and_then(|p| by_program.get(&p))
                        .is_some_and(|m| m.instruction_by_name(host_ops.name(op)).is_some());
                    // A CUDA graph's kernel that no instruction names (a library GEMM, a
                    // runtime copy) still ran for its program: kept, by its kernel's name.
                    *slot = if gpu && !keep_all && !attributed && !context.in_graph {
                        DROPPED
                    } else {
                        let module_name = host_ops.modules.get(&program).map_or("", String::as_str);
                        profile.programs.entry(program).or_insert_with(|| {
                            if !host_ops.op_types.is_empty() && module_name.is_empty() {
                                // No program: the TensorFlow executor ran the ops (or launched
                                // their kernels).
                                "TensorFlow executor".to_owned()
                            } else {
                                format!("{module_name}({program})")
                            }
                        });
                        let module = by_program.get(&program).copied();
                        let mut stats_of = new_op(program, host_ops.name(op), module);
                        if let Some(op_type) = host_ops.op_types.get(&op.name) {
                            // A TensorFlow op (run by the executor, or launching this
                            // kernel): its type is its category, as XProf's framework ops.
                            stats_of.category.clone_from(op_type);
                        } else if gpu && module.is_none() {
                            stats_of.category =
                                crate::gpu::unattributed_category(&stats_of.name).unwrap_or("unknown").to_owned();
                        } else if gpu && !attributed {
                            stats_of.category = crate::gpu::graph_kernel_category(&stats_of.name).to_owned();
                        }
                        stats.push(stats_of);
                        stats.len() - 1
                    };
                }
                if *slot == DROPPED {
                    continue;
                }
                let k = *slot;
                if in_order {
                    // `nest` on the fly: the ops that do not contain this one are done.
                    while let Some(&(top, self_time, key)) = open.last() {
                        if top.contains(&span) {
                            break;
                        }
                        open.pop();
                        account(&mut stats[key], top, self_time);
                    }
                    if let Some(parent) = open.last_mut() {
                        parent.1 = parent.1.saturating_sub(span.duration);
                    }
                    open.push((span, span.duration, k));
                    continue;
                }
                ops.push(TimedOp {
                    metadata_id: xlens_xplane::EventMetadataId(op_keys.len() as i64),
                    span,
                    self_time: span.duration,
                    depth: 0,
                });
                op_keys.push(k);
            }
            widen(&mut device_spans, run);
            while let Some((span, self_time, key)) = open.pop() {
                account(&mut stats[key], span, self_time);
            }
            nest(&mut ops);
            for op in &ops {
                account(&mut stats[op_keys[op.metadata_id.0 as usize]], op.span, op.self_time);
            }
        }
        for s in &mut stats {
            let Some(module) = by_program.get(&s.program_id) else { continue };
            let Some(instr) = module.instruction_by_name(&s.name) else { continue };
            let n = s.occurrences as f64;
            if gpu {
                // XProf prices GPU ops with XLA's GPU cost analysis, per launch that carries the
                // op's name. The work is per execution: a cuBLAS GEMM's memset kernel carries
                // its name and does none, and a library GEMM or attention call the cost model
                // prices at nothing did the work its shapes say.
                let cost = module.gpu_cost(instr.id());
                let hbm = module.gpu_hbm_bytes(instr.id());
                let memsets = host_ops.memset_launches(Some(s.program_id), &s.name);
                let executions = s.occurrences.saturating_sub(memsets) as f64;
                s.xprof_flops = cost.flops as f64 * n;
                let per_execution = match cost.flops {
                    0 => module.custom_call_shape_flops(instr.id()).unwrap_or(0),
                    flops => flops,
                };
                s.flops = per_execution as f64 * executions;
                let bytes = |moved: u64, times: f64| MemoryBytes {
                    hbm: moved as f64 * times,
                    unattributed: (cost.bytes_accessed as f64 - hbm as f64) * times,
                    ..MemoryBytes::default()
                };
                // An in-place scatter moves its updates, not the buffer XLA's model counts.
                s.bytes = bytes(module.gpu_moved_hbm_bytes(instr.id()), executions);
                s.xprof_bytes = bytes(hbm, n);
            } else {
                let cost = module.cost(instr.id());
                s.flops = cost.flops as f64 * n;
                s.xprof_flops = s.flops;
                s.bytes = MemoryBytes { hbm: cost.bytes_accessed as f64 * n, ..MemoryBytes::default() };
                s.xprof_bytes = s.bytes;
            }
            s.model_flops = s.flops;
        }
        stats.retain(|s| s.occurrences > 0);
        stats.sort_by(|a, b| {
            b.self_time.cmp(&a.self_time).then(a.program_id.cmp(&b.program_id)).then(a.name.cmp(&b.name))
        });
        profile.cores = device_spans.len() as u32;
        profile.total_time = device_spans.values().map(|(a, b)| *b - *a).sum();
        let op_time: Picos = stats.iter().map(|s| s.self_time).sum();
        profile.idle_time = profile.total_time.saturating_sub(op_time);
        profile.ops = stats;
        profile
    }
}

impl OpProfile {
    /// For an op profile read from GPU streams: the device type and peaks of the first GPU
    /// plane's capability stats (XProf's performance environment); unchanged otherwise.
    pub fn with_gpu_devices(mut self, space: &Space) -> OpProfile {
        if space.tpu_tensor_cores().is_empty() && !space.gpus().is_empty() {
            let chip = crate::Chip::from_space(space).ok();
            self.device_type = chip.as_ref().and_then(|c| c.device_type().map(str::to_owned));
            self.perf_env = chip.as_ref().map(crate::PerfEnv::from_chip);
        }
        self
    }
}

fn new_op(program_id: u64, name: &str, module: Option<&Module>) -> OpStats {
    let instr = module.and_then(|m| m.instruction_by_name(name).map(|i| (m, i)));
    let (category, source, op_name) = match instr {
        Some((m, i)) => (
            hlo_category(m, i.id()),
            m.source(i.id()).map(|s| format!("{}:{}", s.file, s.line)),
            i.op_name().to_owned(),
        ),
        None => ("unknown".to_owned(), None, String::new()),
    };
    OpStats {
        program_id,
        name: name.to_owned(),
        long_name: instr.map(|(m, i)| m.instruction_text(i.id())).unwrap_or_default(),
        category,
        occurrences: 0,
        time: Picos::ZERO,
        self_time: Picos::ZERO,
        normalized_time: Picos::ZERO,
        flops: 0.0,
        xprof_flops: 0.0,
        model_flops: 0.0,
        bytes: MemoryBytes::default(),
        xprof_bytes: MemoryBytes::default(),
        num_cores: 1,
        source,
        tf_op: if op_name.is_empty() { None } else { Some(op_name) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlens_xplane::names;

    /// A host thread's ops, each `(name, start, duration)`, in the file order given.
    fn profile_of(ops: &[(&str, i64, i64)]) -> OpProfile {
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let hlo_op = plane.stat_metadata(names::stat::HLO_OP);
            let program = plane.stat_metadata(names::stat::PROGRAM_ID);
            let event = plane.event_metadata("thunk");
            let mut line = plane.line(1, "worker", 0);
            for &(name, start, duration) in ops {
                line.event(event, start, duration).stat(hlo_op, name).stat(program, 7u64);
            }
        }
        let space = Space::parse(b.finish().into()).unwrap();
        OpProfile::from_host_ops(&HostOps::read(&space).unwrap(), &[])
    }

    /// Self times settled as a line in nesting order is read equal those of the sorted copy a
    /// line out of order gets: parents lose their direct children's time, children keep theirs.
    #[test]
    fn lines_in_order_nest_as_sorted_copies_do() {
        let ops = [
            ("while", 0, 100),
            ("fusion.1", 0, 30),
            ("dot", 5, 10),
            ("fusion.2", 40, 20),
            ("fusion.1", 70, 30),
            ("copy", 120, 5),
        ];
        let in_order = profile_of(&ops);
        let mut shuffled = ops;
        shuffled.reverse();
        let sorted = profile_of(&shuffled);
        let facts = |p: &OpProfile| {
            let mut v: Vec<(String, u64, i64, i64)> =
                p.ops.iter().map(|o| (o.name.clone(), o.occurrences, o.time.0, o.self_time.0)).collect();
            v.sort();
            v
        };
        assert_eq!(facts(&in_order), facts(&sorted));
        assert_eq!(
            facts(&in_order),
            [
                ("copy".to_owned(), 1, 5, 5),
                ("dot".to_owned(), 1, 10, 10),
                ("fusion.1".to_owned(), 2, 60, 50),
                ("fusion.2".to_owned(), 1, 20, 20),
                ("while".to_owned(), 1, 100, 20),
            ]
        );
    }
}
