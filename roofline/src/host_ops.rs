//! The op events of a host that are not on TPU op lines, read once per host: XLA:CPU thunks on
//! host threads, and the kernels and memory copies of GPU stream lines.
//!
//! A CPU profile holds millions of events on a few threads; a GPU profile holds its kernels on a
//! few streams per device. Every analysis of such a profile (the op profile, the step anatomy,
//! the detectors) needs the same few facts of each op event, so one walk of each event's stats
//! collects them into a compact table that the others share, together with the host threads
//! that carry step markers.
//!
//! - **CPU**: the `hlo_op` events of `/host:CPU` threads.
//! - **GPU** (`/device:GPU:N` planes and no TPU): every event of every stream line (the lines
//!   XProf does not derive, see [`xlens_xplane::names::line::is_derived`]): a kernel is named by
//!   its `hlo_op` stat (the last `::` part), else by the kernel's own name (TensorFlow kernels,
//!   library kernels); a memory copy by its event name (`MemcpyH2D`, ...). Its device is the GPU
//!   ordinal. Host threads are then read for step markers only: their kernel-launch events carry
//!   `hlo_op` stats too, but the device ran the op, not the host.
//!
//! The table is the largest allocation of a CPU profile's analysis (a 143 MB capture has
//! 860,000 ops), so it is kept small: an op is 24 bytes (its program, run and device ordinal are
//! interned as one [`OpContext`]), and each line's ops stay in the table its reader filled,
//! so no merged copy is ever made.

use std::collections::BTreeMap;

// foldhash, not SipHash: these maps intern names and contexts per event and name kernels per op;
// none is iterated.
use hashbrown::HashMap;

use xlens_xplane::{Picos, Space, names};

/// One executed op (a host-thread HLO op, or a GPU kernel or memory copy), compactly (24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// Start.
    pub start: Picos,
    /// End.
    pub end: Picos,
    /// Index into [`HostOps::names`] (the `hlo_op` stat).
    pub name: u32,
    /// Index into [`HostOps::contexts`]: the program, run and device ordinal.
    pub context: u32,
}

/// What an op ran as: its program, the program execution and the device (one entry per distinct
/// combination, shared by the ops).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpContext {
    /// `program_id` stat.
    pub program_id: Option<u64>,
    /// `run_id` stat (one program execution).
    pub run_id: Option<i64>,
    /// `device_ordinal` stat (0 when absent).
    pub core: i64,
    /// A GPU kernel that ran inside a CUDA graph (an XLA command buffer, stat `cuda_graph_id`):
    /// its `hlo_op` names the command buffer, so the op is named by its kernel, then by the
    /// instruction that kernel was emitted for ([`HostOps::attribute_graph_kernels`]).
    pub in_graph: bool,
}

/// A line of the space: the plane's index in the space and the line's index in the plane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LineRef {
    /// Index of the plane in [`Space::planes`].
    pub plane: usize,
    /// Index of the line in its plane.
    pub line: usize,
}

impl LineRef {
    /// The plane and line this refers to, when the space has them.
    pub fn resolve<'a>(&self, space: &'a Space) -> Option<(&'a xlens_xplane::Plane, &'a xlens_xplane::Line)> {
        let plane = space.planes().get(self.plane)?;
        Some((plane, plane.lines().get(self.line)?))
    }
}

/// The ops of one line (a host thread or a GPU stream), in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct LineTable {
    line: LineRef,
    ops: Vec<HostOp>,
}

/// Every op event of a host that is not on a TPU op line (host-thread HLO ops on CPU, stream
/// kernels and copies on GPU), read in one walk of each event's stats.
///
/// ```
/// use xlens_xplane::Session;
/// use xlens_roofline::HostOps;
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/clean");
/// let session = xlens_testkit::open_session(dir)?;
/// let ops = HostOps::read(session.hosts()[0].space())?;
/// assert!(!ops.is_empty());
/// let first = ops.iter().next().unwrap();
/// assert!(!ops.name(first).is_empty());
/// assert!(ops.context(first).program_id.is_some(), "XLA:CPU ops carry their program");
/// assert!(!ops.marker_lines.is_empty(), "the python thread carries the step markers");
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOps {
    /// The lines that ran ops, by ascending (plane, line), each with its ops in file order.
    lines: Vec<LineTable>,
    /// Where the ops come from.
    pub source: OpSource,
    /// The position of each thread's first op in [`HostOps::iter`] order, then the total.
    offsets: Vec<usize>,
    /// Interned op names.
    pub names: Vec<String>,
    /// Interned op contexts (program, run, device ordinal).
    pub contexts: Vec<OpContext>,
    /// The `hlo_module` stat of each program, as first seen.
    pub modules: BTreeMap<u64, String>,
    /// Host threads (line indices of `/host:CPU`) with a host step marker event (see
    /// [`crate::is_host_step_marker`]), ascending.
    pub marker_lines: Vec<usize>,
    /// Of those, the threads whose markers are root annotations (an `_r` stat): the threads that
    /// run the training loop.
    pub rooted_marker_lines: Vec<usize>,
    /// GPU stream events' time per event-metadata entry (a kernel or copy), by plane index and
    /// position in its event-metadata table: what [`HostOps::kernel_times`] names.
    kernel_time: BTreeMap<usize, Vec<Picos>>,
    /// Memset kernels that carry another op's `hlo_op` (cuBLAS zeroes a workspace before each
    /// GEMM launched on its own), by program and op name: launches, not executions, of that op.
    memsets: BTreeMap<(Option<u64>, u32), u64>,
    /// The TensorFlow op type of each op name ([`HostOps::names`] index) that is a TensorFlow
    /// op (`MatMul`, `Conv2DBackpropFilter`, ...): every op of a [`OpSource::TfExecutor`]
    /// table, and on a TensorFlow GPU capture without HLO the ops named by the TensorFlow op
    /// that launched their kernel (see [`OpSource::GpuStreams`]); empty otherwise.
    pub op_types: BTreeMap<u32, String>,
}

impl HostOps {
    /// Reads the host-thread plane (`/host:CPU`) of a space; empty without one. Events that fail
    /// to decode end their line, as everywhere else; the error is returned.
    pub fn read(space: &Space) -> xlens_xplane::Result<HostOps> {
        match HostOps::read_partial(space) {
            (ops, None) => Ok(ops),
            (_, Some(e)) => Err(e),
        }
    }

    /// Like [`HostOps::read`], but keeps what was read before a decoding error (the rest of
    /// that line is skipped, other lines are read) and returns the first error beside it.
    pub fn read_partial(space: &Space) -> (HostOps, Option<xlens_xplane::Error>) {
        use rayon::prelude::*;
        let mut out = HostOps { offsets: vec![0], ..HostOps::default() };
        let gpus = if space.tpu_tensor_cores().is_empty() { space.gpus() } else { Vec::new() };
        // What each line is read for: its ops, its step markers, or both.
        let mut wanted: Vec<Job<'_, ()>> = Vec::new();
        // Memset kernels, decided once per metadata entry of each GPU plane.
        let memset_masks: Vec<xlens_xplane::MetadataMask> = gpus
            .iter()
            .map(|p| p.metadata_mask(|m| crate::gpu::copy_kind(m.name()) == Some(crate::gpu::CopyKind::Memset)))
            .collect();
        if !gpus.is_empty() {
            out.source = OpSource::GpuStreams;
            for (plane, memsets) in gpus.into_iter().zip(&memset_masks) {
                let device = match plane.kind() {
                    xlens_xplane::PlaneKind::Gpu { ordinal } => i64::from(ordinal),
                    _ => 0,
                };
                let ids = StatIds::of(plane);
                for line in plane.lines().iter().filter(|l| !names::line::is_derived(l.id().0, l.name())) {
                    let ops = OpsFrom::Stream { device, memsets };
                    wanted.push(Job { plane, line, ids, marker: None, ops, events: () });
                }
            }
        }
        let marker;
        if let Some(plane) = space.host_threads() {
            // Step markers decided once per metadata entry, not per event.
            marker = plane.metadata_mask(|m| crate::is_host_step_marker(m.name()));
            let ops = if out.source == OpSource::HostThreads { OpsFrom::HloOpStats } else { OpsFrom::None };
            // On GPU profiles a host thread without a marker holds nothing the table wants.
            if !matches!(ops, OpsFrom::None) || !marker.is_empty() {
                let ids = StatIds::of(plane);
                // A thread read for its markers only is skipped when the parse saw that none of
                // its events is one (gpu300: eight launch threads of 281,000 events each).
                for line in
                    plane.lines().iter().filter(|l| !matches!(ops, OpsFrom::None) || plane.line_may_use(l, &marker))
                {
                    wanted.push(Job { plane, line, ids, marker: Some(&marker), ops, events: () });
                }
            }
        }
        // A line longer than its share of the work (a CPU runtime's worker thread, a busy GPU
        // stream) is cut into runs so that every worker has some; a line's runs are joined back
        // in order below. Four runs per worker's share: the HLO modules decode beside this read,
        // and a worker that finishes them takes its share of the runs left (h200_long_run
        // 184 -> 179 ms, gpu300 338 -> 333 ms against one run per share).
        let threads = rayon::current_num_threads();
        let runs = threads * HOST_OPS_RUNS_PER_WORKER;
        let total: usize = wanted.iter().map(|w| w.line.byte_len()).sum::<usize>().max(1);
        let jobs: Vec<Job<'_>> = wanted
            .par_iter()
            .flat_map_iter(|w| {
                // A line read for its markers only stops at the first one: never cut.
                let parts = match w.ops {
                    OpsFrom::None => 1,
                    _ => (w.line.byte_len() * runs).div_ceil(total).clamp(1, runs),
                };
                w.line.event_parts_releasing(w.plane, parts).into_iter().map(|events| {
                    let Job { plane, line, ids, marker, ops, .. } = *w;
                    Job { plane, line, ids, marker, ops, events }
                })
            })
            .collect();
        // Lines are read in parallel, each into its own table with its own interners. The
        // interned indices are then rewritten in place, in line order, so the result does not
        // depend on scheduling and no table is copied.
        let places: Vec<(&xlens_xplane::Plane, &xlens_xplane::Line)> = jobs.iter().map(|j| (j.plane, j.line)).collect();
        let lines = read_longest_first(jobs);
        let mut error = None;
        let mut names = Interner::default();
        let mut contexts: HashMap<OpContext, u32> = HashMap::new();
        // Each run's ops with the maps of its interned indices to the shared ones.
        let mut read_runs: Vec<ReadRun> = Vec::new();
        for ((plane, line), read) in places.into_iter().zip(lines) {
            let LineOps {
                ops,
                kernel_time,
                memsets,
                interner,
                contexts: local_contexts,
                modules,
                has_marker,
                rooted,
                error: e,
            } = read;
            let at = LineRef { plane: plane.index(), line: line.index() };
            if !kernel_time.is_empty() {
                let total = out.kernel_time.entry(at.plane).or_default();
                if total.len() < kernel_time.len() {
                    total.resize(kernel_time.len(), Picos::ZERO);
                }
                for (t, add) in total.iter_mut().zip(kernel_time) {
                    *t += add;
                }
            }
            if !ops.is_empty() {
                let name: Vec<u32> = interner.names.iter().map(|n| names.by_string(n)).collect();
                for ((program, local), n) in memsets {
                    *out.memsets.entry((program, name[local as usize])).or_default() += n;
                }
                let context: Vec<u32> = local_contexts
                    .iter()
                    .map(|c| {
                        *contexts.entry(*c).or_insert_with(|| {
                            out.contexts.push(*c);
                            out.contexts.len() as u32 - 1
                        })
                    })
                    .collect();
                read_runs.push(ReadRun { line: at, ops, names: name, contexts: context });
            }
            for (program, module) in modules {
                out.modules.entry(program).or_insert(module);
            }
            if has_marker && out.marker_lines.last() != Some(&at.line) {
                out.marker_lines.push(at.line);
            }
            if rooted && out.rooted_marker_lines.last() != Some(&at.line) {
                out.rooted_marker_lines.push(at.line);
            }
            if error.is_none() {
                error = e;
            }
        }
        // Each line's runs joined into its table, in line order.
        let mut first = 0;
        while first < read_runs.len() {
            let line = read_runs[first].line;
            let end = first + read_runs[first..].iter().take_while(|r| r.line == line).count();
            let ops = join_runs(&mut read_runs[first..end]);
            out.offsets.push(out.offsets[out.offsets.len() - 1] + ops.len());
            out.lines.push(LineTable { line, ops });
            first = end;
        }
        out.names = names.names;
        if out.source == OpSource::HostThreads && out.lines.is_empty() {
            let executor = read_executor_ops(space, &mut out);
            if error.is_none() {
                error = executor.err();
            }
        }
        if out.source == OpSource::GpuStreams && crate::FrameworkOpStats::applies(space) {
            let named = name_by_tf_ops(space, &mut out);
            if error.is_none() {
                error = named.err();
            }
        }
        (out, error)
    }

    /// The time of each kernel (and memory copy) name over every GPU stream, by name: the
    /// events' own names, as the device ran them (whatever op they count as). Empty on CPU and
    /// TPU profiles.
    ///
    /// ```
    /// use xlens_xplane::Session;
    /// use xlens_roofline::{HostOps, KernelStats};
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/gpu/gpu_healthy");
    /// let session = xlens_testkit::open_session(dir)?;
    /// let space = session.hosts()[0].space();
    /// let times = HostOps::read(space)?.kernel_times(space);
    /// // The totals of XProf's kernel stats, per kernel name.
    /// for (name, _, total) in KernelStats::read(space)?.by_name() {
    ///     assert_eq!(times.iter().find(|(n, _)| n == name).map(|(_, t)| *t), Some(total));
    /// }
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kernel_times(&self, space: &Space) -> Vec<(String, Picos)> {
        let mut by_name: BTreeMap<&str, Picos> = BTreeMap::new();
        for (&plane, times) in &self.kernel_time {
            let Some(plane) = space.planes().get(plane) else { continue };
            for (metadata, &time) in plane.event_metadata().iter().zip(times) {
                if time > Picos::ZERO {
                    *by_name.entry(metadata.name()).or_default() += time;
                }
            }
        }
        by_name.into_iter().map(|(n, t)| (n.to_owned(), t)).collect()
    }

    /// How many of an op's launches on the GPU streams were memset kernels carrying its name
    /// (cuBLAS zeroes a workspace before each GEMM it runs outside a CUDA graph, and both kernels
    /// carry the GEMM custom call's `hlo_op`): the op's executions are its occurrences less these.
    pub fn memset_launches(&self, program_id: Option<u64>, name: &str) -> u64 {
        self.memsets
            .iter()
            .filter(|((program, n), _)| {
                *program == program_id && self.names.get(*n as usize).is_some_and(|s| s == name)
            })
            .map(|(_, count)| *count)
            .sum()
    }

    /// [`HostOps::read`], with the kernels of CUDA graphs named by their instructions in
    /// `modules` ([`HostOps::attribute_graph_kernels`]).
    pub fn read_with_modules(space: &Space, modules: &[xlens_hlo::Module]) -> xlens_xplane::Result<HostOps> {
        let mut ops = HostOps::read(space)?;
        ops.attribute_graph_kernels(modules);
        Ok(ops)
    }

    /// Whether any op ran inside a CUDA graph (an XLA command buffer): then its name comes from
    /// [`HostOps::attribute_graph_kernels`], which needs the HLO modules.
    pub fn has_graph_kernels(&self) -> bool {
        self.contexts.iter().any(|c| c.in_graph)
    }

    /// Names the ops that ran inside CUDA graphs (XLA command buffers, whose kernels carry the
    /// command buffer as `hlo_op`) by the instructions of their program they ran for:
    ///
    /// - a kernel XLA emitted, by the instruction it is named after ([`xlens_hlo::gpu_kernel_name`]);
    /// - a GEMM library's kernel (cuBLAS, CUTLASS), by the GEMM custom call it ran for: per
    ///   program execution (cut at each launch of the kernel of the first scheduled instruction
    ///   that ran), the library kernels pair in order with the entry computation's GEMM calls in
    ///   schedule order when there are as many of each; the rest pair with the GEMM calls the
    ///   schedule runs between the kernels named by instructions around them, again only when
    ///   the counts agree (else they keep their kernel's name).
    ///
    /// Other kernels (runtime memsets and copies) keep their own name. XLA emits one kernel for
    /// identical fusions and launches it for each: such launches all count under the instruction
    /// the kernel is named after (same shapes, same cost). Returns how many ops were named by an
    /// instruction; a profile without graph kernels is left as it is.
    pub fn attribute_graph_kernels(&mut self, modules: &[xlens_hlo::Module]) -> usize {
        if !self.has_graph_kernels() {
            return 0;
        }
        let HostOps { lines, contexts, names, .. } = self;
        let by_program: HashMap<u64, &xlens_hlo::Module> =
            modules.iter().filter_map(|m| m.program_id().map(|p| (p, m))).collect();
        let mut interned: HashMap<String, u32> = names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
        let mut intern = |name: &str, names: &mut Vec<String>| -> u32 {
            *interned.entry(name.to_owned()).or_insert_with(|| {
                names.push(name.to_owned());
                names.len() as u32 - 1
            })
        };
        let mut attributed = 0;

        // Kernels XLA emitted, by name: decided once per (context, kernel name), in a slot per
        // kernel name of each context (0: undecided, else the name's index plus one, times two,
        // plus one when an instruction named it).
        let kernel_names = names.len();
        let kernels = kernels_by_instruction(lines, contexts, names, &by_program);
        let mut decided: Vec<Vec<u64>> = vec![Vec::new(); contexts.len()];
        for table in lines.iter_mut() {
            for op in &mut table.ops {
                let context = contexts[op.context as usize];
                if !context.in_graph {
                    continue;
                }
                let slots = &mut decided[op.context as usize];
                if slots.is_empty() {
                    *slots = vec![0; kernel_names];
                }
                let slot = &mut slots[op.name as usize];
                if *slot == 0 {
                    let program = context.program_id.unwrap_or(0);
                    let instruction = kernels
                        .get(&program)
                        .and_then(|(module, found)| Some(module.instruction(found[op.name as usize]?).name()));
                    *slot = match instruction {
                        Some(name) => (u64::from(intern(name, names)) + 1) << 1 | 1,
                        None => (u64::from(op.name) + 1) << 1,
                    };
                }
                op.name = ((*slot >> 1) - 1) as u32;
                attributed += (*slot & 1) as usize;
            }
        }

        // Library GEMM kernels, by the schedule: per program, each entry instruction's position
        // and the GEMM custom calls in order.
        // Decided per program first: most captures have no scheduled GEMM call, and then no
        // line's ops are sorted out by program.
        let schedules: HashMap<u64, GemmSchedule<'_>> = contexts
            .iter()
            .filter(|c| c.in_graph)
            .map(|c| c.program_id.unwrap_or(0))
            .collect::<std::collections::BTreeSet<u64>>()
            .into_iter()
            .filter_map(|program| Some((program, GemmSchedule::of(by_program.get(&program)?)?)))
            .collect();
        if schedules.is_empty() {
            return attributed;
        }
        let mut library_gemm = LibraryGemmNames::default();
        for table in lines.iter_mut() {
            let mut by_program_ops: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
            for (i, op) in table.ops.iter().enumerate() {
                let context = contexts[op.context as usize];
                let program = context.program_id.unwrap_or(0);
                if context.in_graph && schedules.contains_key(&program) {
                    by_program_ops.entry(program).or_default().push(i);
                }
            }
            for (program, mut order) in by_program_ops {
                let Some(schedule) = schedules.get(&program) else {
                    continue;
                };
                order.sort_by_key(|&i| (table.ops[i].start, i));
                // First, whole executions: cut at each launch of the kernel of the program's first
                // scheduled instruction that ran, an execution whose library kernels are as many
                // as the entry's GEMM calls pairs them in order (the common case: a step program
                // without loops; XLA's kernel reuse makes neighbours ambiguous, not this).
                let first: Option<u32> = {
                    let ran: HashMap<&str, u32> = order
                        .iter()
                        .map(|&i| (names[table.ops[i].name as usize].as_str(), table.ops[i].name))
                        .collect();
                    schedule.entry_order.iter().find_map(|name| ran.get(name).copied())
                };
                if let Some(first) = first {
                    let starts: Vec<usize> = order
                        .iter()
                        .enumerate()
                        .filter(|&(_, &i)| table.ops[i].name == first)
                        .map(|(k, _)| k)
                        .collect();
                    for (k, &start) in starts.iter().enumerate() {
                        let end = starts.get(k + 1).copied().unwrap_or(order.len());
                        let library: Vec<usize> = order[start..end]
                            .iter()
                            .copied()
                            .filter(|&i| library_gemm.test(table.ops[i].name, names))
                            .collect();
                        if !library.is_empty() && library.len() == schedule.entry_gemms.len() {
                            for (&i, gemm) in library.iter().zip(&schedule.entry_gemms) {
                                table.ops[i].name = intern(gemm, names);
                                attributed += 1;
                            }
                        }
                    }
                }
                // Then the rest by their neighbours.
                let mut previous: Option<(xlens_hlo::CompId, usize)> = None;
                let mut pending: Vec<usize> = Vec::new();
                // Each name's scheduled position, looked up once per name rather than per op.
                let mut positions: Vec<Option<Option<(xlens_hlo::CompId, usize)>>> = Vec::new();
                for i in order {
                    let name = table.ops[i].name as usize;
                    if positions.len() <= name {
                        positions.resize(names.len().max(name + 1), None);
                    }
                    let position =
                        *positions[name].get_or_insert_with(|| schedule.position.get(names[name].as_str()).copied());
                    if let Some(position) = position {
                        for (op, gemm) in schedule.matching(previous, Some(position), pending.len()) {
                            table.ops[pending[op]].name = intern(gemm, names);
                            attributed += 1;
                        }
                        pending.clear();
                        previous = Some(position);
                    } else if library_gemm.test(table.ops[i].name, names) {
                        pending.push(i);
                    }
                }
                for (op, gemm) in schedule.matching(previous, None, pending.len()) {
                    table.ops[pending[op]].name = intern(gemm, names);
                    attributed += 1;
                }
            }
        }
        attributed
    }

    /// The number of ops.
    pub fn len(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0)
    }

    /// Whether no line ran an op.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every op, line by line (ascending plane, then line index), each line's in file order.
    /// The position of an op in this order is its index for [`HostOps::get`].
    pub fn iter(&self) -> impl Iterator<Item = &HostOp> + '_ {
        self.lines.iter().flat_map(|t| t.ops.iter())
    }

    /// The op at `index` in [`HostOps::iter`] order, with its line.
    pub fn get(&self, index: usize) -> Option<(LineRef, &HostOp)> {
        // `offsets` starts at 0 and ends at the total: the table holding `index` is the last
        // whose offset is at or below it.
        let table = self.offsets.partition_point(|&o| o <= index).checked_sub(1)?;
        let t = self.lines.get(table)?;
        t.ops.get(index - self.offsets[table]).map(|op| (t.line, op))
    }

    /// The ops of each line that ran any, by ascending (plane, line), with that line.
    pub fn by_line(&self) -> impl Iterator<Item = (LineRef, &[HostOp])> + '_ {
        self.lines.iter().map(|t| (t.line, t.ops.as_slice()))
    }

    /// The ops of one line, in file order (empty when it ran none).
    pub fn of_line(&self, line: LineRef) -> &[HostOp] {
        match self.lines.binary_search_by_key(&line, |t| t.line) {
            Ok(i) => &self.lines[i].ops,
            Err(_) => &[],
        }
    }

    /// The name of an op.
    pub fn name(&self, op: &HostOp) -> &str {
        self.names.get(op.name as usize).map_or("", String::as_str)
    }

    /// The device duty cycle in %: per device (GPU ordinal, or the `device_ordinal` of host-run
    /// ops), the union of its ops over its window from first op to last, summed over devices;
    /// `None` without ops. XProf reports none for GPUs; this is its TPU rule applied to streams.
    pub fn duty_cycle_pct(&self) -> Option<f64> {
        self.duty_cycle().map(|(busy, window)| 100.0 * busy.0 as f64 / window.0 as f64)
    }

    /// The devices' busy time and their windows, summed (to combine hosts into a session's duty
    /// cycle); `None` without ops.
    pub fn duty_cycle(&self) -> Option<(Picos, Picos)> {
        // Per device, each line's ops of that device are a source of intervals in start order
        // (a line out of order is sorted into a copy); the sources are merged in start order and
        // their union summed as it goes. No list of every op (millions on a CPU capture) is built
        // or sorted: that took longer than reading them.
        let core_of: Vec<i64> = self.contexts.iter().map(|c| c.core).collect();
        let core = |op: &HostOp| core_of.get(op.context as usize).copied().unwrap_or(0);
        let mut lines_of: BTreeMap<i64, Vec<(usize, bool)>> = BTreeMap::new();
        for (at, table) in self.lines.iter().enumerate() {
            // The devices of a line (one, but on host threads that run several) and whether its
            // ops come in start order.
            let mut devices: Vec<i64> = Vec::new();
            for op in &table.ops {
                let d = core(op);
                if !devices.contains(&d) {
                    devices.push(d);
                }
            }
            let sorted = table.ops.is_sorted_by_key(|o| o.start);
            for d in devices {
                lines_of.entry(d).or_default().push((at, sorted));
            }
        }
        let (mut busy, mut window) = (Picos::ZERO, Picos::ZERO);
        for (device, lines) in lines_of {
            let copies: Vec<Vec<(Picos, Picos)>> = lines
                .iter()
                .filter(|(_, sorted)| !sorted)
                .map(|&(at, _)| {
                    let mut spans: Vec<(Picos, Picos)> =
                        self.lines[at].ops.iter().filter(|o| core(o) == device).map(|o| (o.start, o.end)).collect();
                    spans.sort_by_key(|s| s.0);
                    spans
                })
                .collect();
            let mut copies = copies.iter();
            let mut sources: Vec<Spans<'_>> = lines
                .iter()
                .map(|&(at, sorted)| match sorted {
                    true => Spans::Ops { ops: &self.lines[at].ops, at: 0 },
                    false => Spans::Sorted { spans: copies.next().map_or(&[][..], Vec::as_slice), at: 0 },
                })
                .collect();
            let next = |source: &mut Spans<'_>| source.next_union(&|o: &HostOp| core(o) == device);
            let mut heads: Vec<Option<(Picos, Picos)>> = sources.iter_mut().map(next).collect();
            let (mut first, mut run, mut device_busy) = (None, None::<(Picos, Picos)>, Picos::ZERO);
            // The source whose next interval starts first, each time (a device has a few lines).
            while let Some((i, (s, e))) =
                heads.iter().enumerate().filter_map(|(i, h)| h.map(|h| (i, h))).min_by_key(|(_, h)| h.0)
            {
                heads[i] = next(&mut sources[i]);
                first.get_or_insert(s);
                run = match run {
                    Some((rs, re)) if s <= re => Some((rs, re.max(e))),
                    Some((rs, re)) => {
                        device_busy += re - rs;
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            let (Some(first), Some((rs, re))) = (first, run) else { continue };
            device_busy += re - rs;
            busy += device_busy;
            window += re - first;
        }
        (window.0 > 0).then_some((busy, window))
    }

    /// A dense numbering of the distinct (program, op name) pairs of the table, so that
    /// per-op work can index vectors instead of hashing each op.
    pub fn op_keys(&self) -> OpKeys {
        let mut programs: Vec<Option<u64>> = self.contexts.iter().map(|c| c.program_id).collect();
        programs.sort_unstable();
        programs.dedup();
        let program_of_context: Vec<u32> =
            self.contexts.iter().map(|c| programs.binary_search(&c.program_id).map_or(0, |i| i as u32)).collect();
        let mut index = vec![vec![u32::MAX; self.names.len()]; programs.len()];
        let mut keys = Vec::new();
        for op in self.iter() {
            let p = program_of_context.get(op.context as usize).copied().unwrap_or(0) as usize;
            if let Some(slot) = index.get_mut(p).and_then(|row| row.get_mut(op.name as usize))
                && *slot == u32::MAX
            {
                *slot = keys.len() as u32;
                keys.push((programs[p], op.name));
            }
        }
        OpKeys { program_of_context, index, keys }
    }

    /// The program, run and device ordinal of an op.
    pub fn context(&self, op: &HostOp) -> OpContext {
        self.contexts.get(op.context as usize).copied().unwrap_or_default()
    }
}

/// The distinct (program, op name) pairs of a [`HostOps`] table, numbered densely in the order
/// the table first holds them (see [`HostOps::op_keys`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpKeys {
    program_of_context: Vec<u32>,
    index: Vec<Vec<u32>>,
    /// Per key: the program and the interned op name.
    pub keys: Vec<(Option<u64>, u32)>,
}

impl OpKeys {
    /// The key of an op of the table these keys were made from.
    pub fn of(&self, op: &HostOp) -> usize {
        let p = self.program_of_context.get(op.context as usize).copied().unwrap_or(0) as usize;
        self.index.get(p).and_then(|row| row.get(op.name as usize)).map_or(0, |&k| k as usize)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Where the ops of a host come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OpSource {
    /// `hlo_op` events of `/host:CPU` threads (XLA:CPU).
    #[default]
    HostThreads,
    /// Kernels and memory copies of GPU stream lines. On a TensorFlow GPU capture without HLO
    /// (one [`crate::FrameworkOpStats`] applies to), a kernel that carries the TensorFlow op
    /// that launched it (its `tf_op` stat, or `level 0` on TensorFlow 2.2–2.4) is named by that
    /// op, with the op's type in [`HostOps::op_types`] (XProf's framework-op statistics, whose
    /// device rows these are); memory copies and collective library kernels keep their own
    /// names (their direction or collective is their category,
    /// [`crate::gpu::keeps_kernel_category`]), as do kernels no op names.
    GpuStreams,
    /// TensorFlow ops (events named `name:Type`) of the TensorFlow executor's host threads
    /// (`tf_Compute…`) of a capture with no device plane and no `hlo_op` event (TensorFlow on
    /// the CPU alone, without XLA): those threads do the device's work, as the host threads
    /// that run XLA ops do in a JAX CPU capture. Each op is named by its TensorFlow op name and
    /// has its op type in [`HostOps::op_types`]; ops nest (a function call around its ops).
    TfExecutor,
}

/// One run of a line as read, with the shared interners' indices of its own names and contexts.
struct ReadRun {
    line: LineRef,
    ops: Vec<HostOp>,
    names: Vec<u32>,
    contexts: Vec<u32>,
}

/// Ops a worker rewrites at a time when a line's runs are joined.
const JOIN_MIN_LEN: usize = 1 << 14;

/// One line's runs as one table, each op's name and context rewritten to the shared indices: in
/// place for a line read in one run, else gathered on every worker into a table of the line's
/// size (appending run after run was one worker's copy and page faults, 8 ms of
/// h200_long_run's 921,000-kernel stream).
fn join_runs(runs: &mut [ReadRun]) -> Vec<HostOp> {
    use rayon::prelude::*;
    let remap = |op: &HostOp, run: &ReadRun| HostOp {
        name: run.names[op.name as usize],
        context: run.contexts[op.context as usize],
        ..*op
    };
    if let [run] = runs {
        let mut ops = std::mem::take(&mut run.ops);
        ops.par_iter_mut().with_min_len(JOIN_MIN_LEN).for_each(|op| *op = remap(op, run));
        ops.shrink_to_fit();
        return ops;
    }
    // Where each run's ops start in the table.
    let mut starts = Vec::with_capacity(runs.len() + 1);
    starts.push(0);
    for run in runs.iter() {
        starts.push(starts[starts.len() - 1] + run.ops.len());
    }
    let total = starts[runs.len()];
    let mut table = Vec::with_capacity(total);
    (0..total)
        .into_par_iter()
        .with_min_len(JOIN_MIN_LEN)
        .map(|i| {
            let r = starts.partition_point(|&s| s <= i) - 1;
            remap(&runs[r].ops[i - starts[r]], &runs[r])
        })
        .collect_into_vec(&mut table);
    table
}

/// Reads the jobs on every worker, longest first (by events): each worker takes the next job
/// from one queue as it finishes one, so the last jobs to start are the shortest and the
/// workers end together. The results come in the jobs' order, whatever the schedule.
///
/// Rayon's splitting of the list stopped at a few jobs per worker, which kept the runs of one
/// long line (always neighbours in the list) on one worker, one after the other; one job per
/// task in list order still let a long job start last and run alone (gpu300: one worker read
/// the last 20 ms of its streams while the other waited).
fn read_longest_first(jobs: Vec<Job<'_>>) -> Vec<LineOps> {
    let mut read: Vec<Option<LineOps>> = jobs.iter().map(|_| None).collect();
    let mut queue: Vec<(&mut Option<LineOps>, Job<'_>)> = read.iter_mut().zip(jobs).collect();
    queue.sort_by_key(|(_, job)| std::cmp::Reverse(job.events.size_hint().1.unwrap_or(usize::MAX)));
    // Spawned in that order, taken in that order (FIFO) by whichever worker is free.
    rayon::scope_fifo(|scope| {
        for (slot, job) in queue {
            scope.spawn_fifo(move |_| *slot = Some(read_line(job)));
        }
    });
    // The scope returns once every job has filled its slot.
    read.into_iter().flatten().collect()
}

/// The TensorFlow executor's ops ([`OpSource::TfExecutor`]) of a space with no device plane
/// whose host threads ran no XLA op, into `out` (left as it is otherwise): each executor
/// thread's op events in file order, named by their TensorFlow op, one context (no program,
/// core 0). The ops are those [`crate::FrameworkOpStats::executor_busy`] measures, so the op
/// timeline and the executor's busy time are one set of events. An event that fails to decode
/// ends its line (the ops before it kept, the other lines read), as everywhere else; the first
/// such error is returned.
fn read_executor_ops(space: &Space, out: &mut HostOps) -> xlens_xplane::Result<()> {
    if space.planes().iter().any(|p| p.kind().is_device()) || !crate::FrameworkOpStats::applies(space) {
        return Ok(());
    }
    let Some(plane) = space.host_threads() else { return Ok(()) };
    let is_op = plane.metadata_mask(|m| crate::framework_ops::executor_op(m.name()).is_some());
    let mut interned: HashMap<String, u32> = out.names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
    let mut by_metadata: HashMap<i64, u32> = HashMap::new();
    let context = out.contexts.len() as u32;
    let lines = plane.lines().iter().filter(|l| l.name().starts_with(crate::framework_ops::TF_EXECUTOR_THREAD));
    let mut error = None;
    for line in lines {
        let mut ops: Vec<HostOp> = Vec::new();
        for ev in line.events(plane) {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    error.get_or_insert(e);
                    break;
                }
            };
            if !is_op.contains(&ev) {
                continue;
            }
            let name = match by_metadata.get(&ev.metadata_id().0) {
                Some(&n) => n,
                None => {
                    let Some((name, op_type)) = crate::framework_ops::executor_op(ev.name()) else { continue };
                    let n = *interned.entry(name.to_owned()).or_insert_with(|| {
                        out.names.push(name.to_owned());
                        out.names.len() as u32 - 1
                    });
                    out.op_types.entry(n).or_insert_with(|| op_type.to_owned());
                    by_metadata.insert(ev.metadata_id().0, n);
                    n
                }
            };
            ops.push(HostOp { start: ev.start(), end: ev.end(), name, context });
        }
        if ops.is_empty() {
            continue;
        }
        out.offsets.push(out.offsets[out.offsets.len() - 1] + ops.len());
        out.lines.push(LineTable { line: LineRef { plane: plane.index(), line: line.index() }, ops });
    }
    if !out.lines.is_empty() {
        out.contexts.push(OpContext::default());
        out.source = OpSource::TfExecutor;
    }
    error.map_or(Ok(()), Err)
}

/// On a TensorFlow GPU capture without HLO, names each stream op that is not a memory copy
/// or a collective library kernel ([`crate::gpu::keeps_kernel_category`]) by the TensorFlow
/// op its event names ([`crate::framework_ops::device_event_op`], the op
/// [`crate::FrameworkOpStats`] counts its time under), with that op's type in
/// [`HostOps::op_types`]: so the op profile, its categories and everything read from them
/// speak the framework's ops and types, and a category's time is the time of that type's
/// device ops in the framework-op table (less the copies and collective kernels they
/// launched). Each line's ops are
/// its events in order (every event of a stream is an op): an op is matched to the next event
/// with its start and end.
fn name_by_tf_ops(space: &Space, out: &mut HostOps) -> xlens_xplane::Result<()> {
    let HostOps { lines, names, op_types, .. } = out;
    let mut interned: HashMap<String, u32> = names.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect();
    let mut parsed: std::collections::HashMap<String, (String, String)> = std::collections::HashMap::new();
    for table in lines.iter_mut() {
        let Some((plane, line)) = table.line.resolve(space) else { continue };
        let ids = crate::framework_ops::DeviceOpStatIds::of(plane);
        let mut events = line.events(plane);
        for op in &mut table.ops {
            let ev = loop {
                match events.next() {
                    None => break None,
                    Some(ev) => {
                        let ev = ev?;
                        if ev.start() == op.start && ev.end() == op.end {
                            break Some(ev);
                        }
                    }
                }
            };
            let Some(ev) = ev else { break };
            if crate::gpu::keeps_kernel_category(ev.name()) {
                continue;
            }
            let Some((name, op_type)) = crate::framework_ops::device_event_op(&ev, ids, &mut parsed) else {
                continue;
            };
            let n = *interned.entry(name.clone()).or_insert_with(|| {
                names.push(name.clone());
                names.len() as u32 - 1
            });
            op_types.entry(n).or_insert_with(|| op_type.clone());
            op.name = n;
        }
    }
    Ok(())
}

/// Runs per worker the host-thread and stream lines are cut into, by their bytes.
const HOST_OPS_RUNS_PER_WORKER: usize = 4;

/// What a line is read for.
#[derive(Clone, Copy, Debug)]
enum OpsFrom<'a> {
    /// Nothing (the line is read for its step markers).
    None,
    /// Events with an `hlo_op` stat (host threads of a CPU profile).
    HloOpStats,
    /// Every event: a GPU stream of device `device`, with its plane's memset kernels.
    Stream { device: i64, memsets: &'a xlens_xplane::MetadataMask },
}

/// One line, or one run of a long line's events (`E`), to read.
#[derive(Clone, Copy)]
struct Job<'a, E = xlens_xplane::ReleasingEvents<'a>> {
    plane: &'a xlens_xplane::Plane,
    line: &'a xlens_xplane::Line,
    ids: StatIds,
    marker: Option<&'a xlens_xplane::MetadataMask>,
    ops: OpsFrom<'a>,
    events: E,
}

#[derive(Clone, Copy)]
struct StatIds {
    root: Option<xlens_xplane::StatMetadataId>,
    hlo_op: Option<xlens_xplane::StatMetadataId>,
    program: Option<xlens_xplane::StatMetadataId>,
    run: Option<xlens_xplane::StatMetadataId>,
    ordinal: Option<xlens_xplane::StatMetadataId>,
    module: Option<xlens_xplane::StatMetadataId>,
    graph: Option<xlens_xplane::StatMetadataId>,
    /// Which of the wanted ones (all but `root`) the plane defines, one bit each: `hlo_op`,
    /// program, run, ordinal, module, CUDA graph.
    wanted: u8,
    /// The wanted ids below 128, one bit each (XProf's writers number stats from 1): a stat is
    /// tested with one shift, not six comparisons, on every stat of every event.
    low_ids: u128,
    /// Whether a wanted id is 128 or more (or negative): those are compared one by one.
    high_ids: bool,
}

impl StatIds {
    fn of(plane: &xlens_xplane::Plane) -> StatIds {
        let mut ids = StatIds {
            root: plane.stat_id(names::stat::IS_ROOT),
            hlo_op: plane.stat_id(names::stat::HLO_OP),
            program: plane.stat_id(names::stat::PROGRAM_ID),
            run: plane.stat_id(names::stat::RUN_ID),
            ordinal: plane.stat_id(names::stat::DEVICE_ORDINAL),
            module: plane.stat_id(names::stat::HLO_MODULE),
            graph: plane.stat_id(names::stat::CUDA_GRAPH_ID),
            wanted: 0,
            low_ids: 0,
            high_ids: false,
        };
        let defined = [ids.hlo_op, ids.program, ids.run, ids.ordinal, ids.module, ids.graph];
        ids.wanted = defined.iter().enumerate().filter(|(_, i)| i.is_some()).fold(0, |m, (bit, _)| m | 1 << bit);
        for id in defined.into_iter().flatten() {
            match u32::try_from(id.0) {
                Ok(i) if i < 128 => ids.low_ids |= 1 << i,
                _ => ids.high_ids = true,
            }
        }
        ids
    }

    /// Whether a stat is one of the wanted ones.
    #[inline]
    fn wants(&self, id: xlens_xplane::StatMetadataId) -> bool {
        match u32::try_from(id.0) {
            Ok(i) if i < 128 => self.low_ids >> i & 1 == 1,
            _ => {
                self.high_ids
                    && [self.hlo_op, self.program, self.run, self.ordinal, self.module, self.graph].contains(&Some(id))
            }
        }
    }
}

/// What one line holds: its ops, with names and contexts indexing its own tables.
struct LineOps {
    ops: Vec<HostOp>,
    /// GPU streams: time per event-metadata position of the plane.
    kernel_time: Vec<Picos>,
    /// GPU streams: memset kernels named by another op's `hlo_op`, by (program, local name).
    memsets: BTreeMap<(Option<u64>, u32), u64>,
    interner: Interner,
    contexts: Vec<OpContext>,
    modules: BTreeMap<u64, String>,
    has_marker: bool,
    rooted: bool,
    error: Option<xlens_xplane::Error>,
}

fn read_line(job: Job<'_>) -> LineOps {
    let Job { plane, ids, marker, ops: from, mut events, .. } = job;
    // Sized once by the events counted when the line was parsed (every event of a GPU stream is
    // an op, most of a CPU worker thread's are): growing by doubling copied the table and
    // touched fresh pages at every step. The unused rest is handed back when the line's tables
    // are joined.
    let capacity = match from {
        OpsFrom::None => 0,
        _ => events.size_hint().1.unwrap_or(0),
    };
    let mut out = LineOps {
        ops: Vec::with_capacity(capacity),
        kernel_time: Vec::new(),
        memsets: BTreeMap::new(),
        interner: Interner::default(),
        contexts: Vec::new(),
        modules: BTreeMap::new(),
        has_marker: false,
        rooted: false,
        error: None,
    };
    if matches!(from, OpsFrom::None) && marker.is_none_or(|m| m.is_empty()) {
        return out;
    }
    let mut context_index: HashMap<OpContext, u32> = HashMap::new();
    // Consecutive ops usually share a context (one program run): remember the last one.
    let mut last: Option<(OpContext, u32)> = None;
    // A full walk of the line: the file pages behind it are released as it goes (a later pass
    // maps them again). The wanted stats of each event are gathered while it is decoded, in the
    // one pass over its bytes (a line read for its markers only wants none).
    let gather = !matches!(from, OpsFrom::None);
    let mut stats = xlens_xplane::GatheredStats::new(|id| ids.wants(id));
    loop {
        let next = if gather { events.next_gathering(&mut stats) } else { events.next() };
        let Some(ev) = next else { break };
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                out.error = Some(e);
                break;
            }
        };
        if let Some(marker) = marker
            && (!out.has_marker || !out.rooted)
            && marker.contains(&ev)
        {
            out.has_marker = true;
            out.rooted = out.rooted || ids.root.is_some_and(|r| ev.stat(r).is_some());
        }
        let read = match from {
            // Read for its markers only (a GPU profile's host thread): done once they are known
            // (the steps and the detectors that need the rest of the line walk it themselves).
            OpsFrom::None if out.has_marker && (out.rooted || ids.root.is_none()) => break,
            OpsFrom::None => continue,
            OpsFrom::HloOpStats => {
                if ids.hlo_op.is_none() || !ev.has_stats() {
                    continue;
                }
                read_op(&ev, stats.stats(), &ids, &mut out.interner, None)
            }
            OpsFrom::Stream { device, memsets } => {
                let at = plane.event_metadata_position(ev.metadata_id());
                if let Some(at) = at {
                    // Sized by the entries the line uses, not the plane's whole table.
                    if out.kernel_time.len() <= at {
                        out.kernel_time.resize(at + 1, Picos::ZERO);
                    }
                    out.kernel_time[at] += ev.duration();
                }
                let read = read_op(&ev, stats.stats(), &ids, &mut out.interner, Some((device, at)));
                if let Some((op, context, _)) = &read
                    && !context.in_graph
                    && memsets.contains(&ev)
                    && out.interner.names[op.name as usize] != ev.name()
                {
                    *out.memsets.entry((context.program_id, op.name)).or_default() += 1;
                }
                read
            }
        };
        let Some((mut op, context, module)) = read else { continue };
        op.context = match last {
            Some((c, i)) if c == context => i,
            _ => {
                // A new context may be a new program: its `hlo_module`, as first seen.
                out.modules
                    .entry(context.program_id.unwrap_or(0))
                    .or_insert_with(|| module.and_then(|s| s.as_str()).map(|s| s.into_owned()).unwrap_or_default());
                let i = *context_index.entry(context).or_insert_with(|| {
                    out.contexts.push(context);
                    out.contexts.len() as u32 - 1
                });
                last = Some((context, i));
                i
            }
        };
        out.ops.push(op);
    }
    out
}

/// Op names interned by their stat-metadata reference when the writer used one (XProf's
/// writers do), else by the string itself; neither path allocates for a name seen before.
#[derive(Default)]
struct Interner {
    /// By reference id (a stat-metadata id, small and dense in XProf's writers): slot `r` holds
    /// the name's index plus one, 0 when unseen; ids past [`DENSE_REFS`] go to `by_sparse_ref`.
    by_dense_ref: Vec<u32>,
    by_sparse_ref: HashMap<u64, u32>,
    by_name: HashMap<String, u32>,
    /// Names taken from event metadata (GPU kernels without `hlo_op`, and those of CUDA
    /// graphs), by the metadata's position in its plane's table: slot `p` holds the name's index
    /// plus one, 0 when unseen.
    by_metadata: Vec<u32>,
    names: Vec<String>,
}

/// Reference ids below this are interned in a vector (4 bytes a slot, grown to the largest
/// id seen), the rest in a map.
const DENSE_REFS: u64 = 1 << 16;

impl Interner {
    #[inline]
    fn by_ref(&self, r: u64) -> Option<u32> {
        if r < DENSE_REFS {
            self.by_dense_ref.get(r as usize).and_then(|&i| i.checked_sub(1))
        } else {
            self.by_sparse_ref.get(&r).copied()
        }
    }

    fn set_ref(&mut self, r: u64, i: u32) {
        if r < DENSE_REFS {
            let r = r as usize;
            if self.by_dense_ref.len() <= r {
                self.by_dense_ref.resize(r + 1, 0);
            }
            self.by_dense_ref[r] = i + 1;
        } else {
            self.by_sparse_ref.insert(r, i);
        }
    }

    /// The name of an event's metadata; `at` is the metadata's position in its plane's table
    /// (an event whose metadata the plane lacks is named by its empty name, uncached).
    fn by_metadata(&mut self, ev: &xlens_xplane::Event<'_>, at: Option<usize>) -> u32 {
        let Some(at) = at else { return self.by_string(ev.name()) };
        if let Some(i) = self.by_metadata.get(at).and_then(|&i| i.checked_sub(1)) {
            return i;
        }
        let i = self.by_string(ev.name());
        if self.by_metadata.len() <= at {
            self.by_metadata.resize(at + 1, 0);
        }
        self.by_metadata[at] = i + 1;
        i
    }

    fn by_string(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.by_name.insert(name.to_owned(), i);
        i
    }
}

/// An op from an event and its wanted stats (`stats`, gathered as the event was decoded). On
/// host threads (`stream` is `None`) an event without an `hlo_op` is not an op (`None`); on a GPU
/// stream (`stream` is the GPU ordinal and the event metadata's position in the plane) every
/// event is: a kernel without `hlo_op`, a kernel of a CUDA graph, or a memory copy, is named by
/// the event itself. The op's context index is left for the caller to intern; its `hlo_module`
/// stat comes beside it.
fn read_op<'a>(
    ev: &xlens_xplane::Event<'a>,
    stats: &[xlens_xplane::Stat<'a>],
    ids: &StatIds,
    interner: &mut Interner,
    stream: Option<(i64, Option<usize>)>,
) -> Option<(HostOp, OpContext, Option<xlens_xplane::Stat<'a>>)> {
    let device = stream.map(|(d, _)| d);
    let at = stream.and_then(|(_, at)| at);
    let mut name = None;
    let mut context = OpContext::default();
    let mut module = None;
    // Once every wanted stat the plane defines was seen, later repeats are not read (as a walk
    // that stops there would not).
    let mut seen = 0u8;
    for &s in stats {
        let id = Some(s.metadata_id());
        if id == ids.hlo_op {
            seen |= 1;
            name = Some(match s.ref_id() {
                Some(r) => match interner.by_ref(r) {
                    Some(i) => i,
                    None => {
                        let i = interner.by_string(last_scope(&s.as_str().unwrap_or_default()));
                        interner.set_ref(r, i);
                        i
                    }
                },
                None => interner.by_string(last_scope(&s.as_str()?)),
            });
        } else if id == ids.program {
            seen |= 2;
            context.program_id = s.as_u64();
        } else if id == ids.run {
            seen |= 4;
            context.run_id = s.as_i64();
        } else if id == ids.ordinal {
            seen |= 8;
            context.core = s.as_i64().unwrap_or(0);
        } else if id == ids.module {
            seen |= 16;
            module = Some(s);
        } else if id == ids.graph {
            seen |= 32;
            context.in_graph = device.is_some();
        }
        if seen == ids.wanted {
            break;
        }
    }
    let name = match (name, device) {
        // A CUDA graph's kernel: `hlo_op` names the command buffer; the kernel names the op.
        (Some(_), Some(_)) if context.in_graph => interner.by_metadata(ev, at),
        (Some(name), _) => name,
        (None, Some(_)) => interner.by_metadata(ev, at),
        (None, None) => return None,
    };
    if let Some(device) = device {
        context.core = device;
    }
    Some((HostOp { start: ev.start(), end: ev.end(), name, context: 0 }, context, module))
}

/// The intervals of one line's ops of one device in start order, for [`HostOps::duty_cycle`]:
/// the line's own ops when they are in start order, else a sorted copy.
enum Spans<'a> {
    /// A line whose ops are in start order (those of other devices skipped).
    Ops { ops: &'a [HostOp], at: usize },
    /// A sorted copy of a line's intervals of the device.
    Sorted { spans: &'a [(Picos, Picos)], at: usize },
}

impl Spans<'_> {
    /// The next interval of the union of this source's intervals (consecutive overlapping ones
    /// merged, as nested ops are), or `None` at the end.
    #[inline]
    fn next_union(&mut self, mine: &dyn Fn(&HostOp) -> bool) -> Option<(Picos, Picos)> {
        let mut next = || match self {
            Spans::Ops { ops, at } => {
                while let Some(op) = ops.get(*at) {
                    *at += 1;
                    if mine(op) {
                        return Some((op.start, op.end));
                    }
                }
                None
            }
            Spans::Sorted { spans, at } => {
                let span = spans.get(*at).copied();
                *at += 1;
                span
            }
        };
        let (start, mut end) = next()?;
        // The first interval that does not overlap is left for the next call (the cursor steps
        // back onto it).
        loop {
            match next() {
                Some((s, e)) if s <= end => end = end.max(e),
                Some(_) => {
                    self.step_back();
                    return Some((start, end));
                }
                None => return Some((start, end)),
            }
        }
    }

    fn step_back(&mut self) {
        match self {
            Spans::Ops { at, .. } | Spans::Sorted { at, .. } => *at -= 1,
        }
    }
}

/// The op of a nested `hlo_op` value (`outer::inner` names the innermost op last).
fn last_scope(name: &str) -> &str {
    name.rsplit("::").next().unwrap_or(name)
}

/// A program's schedule, as [`HostOps::attribute_graph_kernels`] reads it: where each scheduled
/// instruction runs (its computation and position there), by name, and each computation's GEMM
/// custom calls with their positions, in order.
/// Per interned kernel name: whether a GEMM library launched it, decided once per name rather
/// than once per op ([`crate::gpu::KernelLibrary::of`] lowercases the name and searches it for
/// some thirty patterns).
/// For each program whose CUDA-graph kernels are to be named, the first instruction (in arena
/// order) whose kernel name ([`xlens_hlo::gpu_kernel_name`]) is each kernel name the program's
/// ops carry, by name index: one pass over the module's instructions for the names asked, not a
/// map of every instruction's kernel name.
fn kernels_by_instruction<'m>(
    lines: &[LineTable],
    contexts: &[OpContext],
    names: &[String],
    by_program: &HashMap<u64, &'m xlens_hlo::Module>,
) -> HashMap<u64, (&'m xlens_hlo::Module, Vec<Option<xlens_hlo::InstrId>>)> {
    let mut asked: BTreeMap<u64, Vec<bool>> = BTreeMap::new();
    for table in lines {
        for op in &table.ops {
            let context = contexts[op.context as usize];
            if context.in_graph {
                let slots = asked.entry(context.program_id.unwrap_or(0)).or_insert_with(|| vec![false; names.len()]);
                slots[op.name as usize] = true;
            }
        }
    }
    let mut out = HashMap::new();
    let mut kernel = String::new();
    for (program, slots) in asked {
        let Some(&module) = by_program.get(&program) else { continue };
        // The names are interned (each string at one index), so a name's index is its key.
        let wanted: HashMap<&str, usize> =
            slots.iter().enumerate().filter(|&(_, &asked)| asked).map(|(i, _)| (names[i].as_str(), i)).collect();
        let mut found: Vec<Option<xlens_hlo::InstrId>> = vec![None; names.len()];
        for instruction in module.instructions() {
            kernel.clear();
            kernel.extend(instruction.name().chars().map(xlens_hlo::gpu_kernel_char));
            if let Some(&i) = wanted.get(kernel.as_str()) {
                found[i].get_or_insert(instruction.id());
            }
        }
        out.insert(program, (module, found));
    }
    out
}

#[derive(Default)]
struct LibraryGemmNames(Vec<Option<bool>>);

impl LibraryGemmNames {
    fn test(&mut self, name: u32, names: &[String]) -> bool {
        let i = name as usize;
        if self.0.len() <= i {
            self.0.resize(names.len().max(i + 1), None);
        }
        *self.0[i].get_or_insert_with(|| names.get(i).is_some_and(|n| crate::gpu::KernelLibrary::of(n).is_gemm()))
    }
}

struct GemmSchedule<'m> {
    position: HashMap<&'m str, (xlens_hlo::CompId, usize)>,
    gemms: HashMap<xlens_hlo::CompId, Vec<(usize, &'m str)>>,
    /// The entry computation's instructions in schedule order, and its GEMM custom calls.
    entry_order: Vec<&'m str>,
    entry_gemms: Vec<&'m str>,
}

impl<'m> GemmSchedule<'m> {
    /// `None` when the module has no schedule or no scheduled GEMM custom call.
    fn of(module: &'m xlens_hlo::Module) -> Option<GemmSchedule<'m>> {
        let mut out = GemmSchedule {
            position: HashMap::new(),
            gemms: HashMap::new(),
            entry_order: Vec::new(),
            entry_gemms: Vec::new(),
        };
        let entry = module.entry().id();
        for computation in module.computations() {
            for (position, &id) in module.schedule(computation.id()).iter().enumerate() {
                let name = module.instruction(id).name();
                out.position.entry(name).or_insert((computation.id(), position));
                let gemm = module.custom_call_kind(id) == Some(xlens_hlo::CustomCallKind::Gemm);
                if gemm {
                    out.gemms.entry(computation.id()).or_default().push((position, name));
                }
                if computation.id() == entry {
                    out.entry_order.push(name);
                    if gemm {
                        out.entry_gemms.push(name);
                    }
                }
            }
        }
        (!out.gemms.is_empty()).then_some(out)
    }

    /// The GEMM custom calls scheduled after `previous` and before `next` (where the kernels
    /// named by instructions around some library kernels ran), paired in order with `count`
    /// library kernels; nothing when the numbers differ. Within one computation, a `next` at or
    /// before `previous` is its next execution (a loop body, the next step), so the calls after
    /// `previous` and those before `next` both count; across computations, those after
    /// `previous` in its computation and before `next` in its own.
    fn matching(
        &self,
        previous: Option<(xlens_hlo::CompId, usize)>,
        next: Option<(xlens_hlo::CompId, usize)>,
        count: usize,
    ) -> Vec<(usize, &'m str)> {
        if count == 0 {
            return Vec::new();
        }
        let none: &[(usize, &str)] = &[];
        let of = |c: xlens_hlo::CompId| self.gemms.get(&c).map_or(none, Vec::as_slice);
        let after = |(c, p): (xlens_hlo::CompId, usize)| of(c).iter().filter(move |(g, _)| *g > p);
        let before = |(c, q): (xlens_hlo::CompId, usize)| of(c).iter().filter(move |(g, _)| *g < q);
        let between: Vec<&(usize, &str)> = match (previous, next) {
            (Some(p), Some(q)) if p.0 == q.0 && p.1 < q.1 => after(p).filter(|(g, _)| *g < q.1).collect(),
            (Some(p), Some(q)) => after(p).chain(before(q)).collect(),
            (None, Some(q)) => before(q).collect(),
            (Some(p), None) => after(p).collect(),
            (None, None) => return Vec::new(),
        };
        if between.len() != count {
            return Vec::new();
        }
        between.into_iter().enumerate().map(|(i, (_, name))| (i, *name)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line long enough to be cut into runs reads the same on one worker and on several: the
    /// runs join into one table per line, in event order, names and contexts interned once.
    #[test]
    fn long_lines_read_in_runs_equal_one_walk() {
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let hlo_op = plane.stat_metadata(names::stat::HLO_OP);
            let program = plane.stat_metadata(names::stat::PROGRAM_ID);
            let run = plane.stat_metadata(names::stat::RUN_ID);
            let step = plane.event_metadata("train_step");
            let op = plane.event_metadata("op");
            let interned: Vec<_> = (0..40).map(|i| plane.stat_metadata(&format!("fusion.{i}"))).collect();
            for (thread, events) in [(1i64, 150_000i64), (2, 2_000)] {
                let mut line = plane.line(thread, "worker", 0);
                for i in 0..events {
                    if i % 500 == 0 {
                        line.event(step, i * 100, 50_000);
                    }
                    line.event(op, i * 100, 80)
                        .stat(hlo_op, xlens_xplane::BuildValue::Ref(interned[(i % 40) as usize]))
                        .stat(program, (i / 10_000) as u64)
                        .stat(run, i / 500);
                }
            }
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let line = &space.host_threads().unwrap().lines()[0];
        assert!(line.byte_len() > 2 * xlens_xplane::PART_MIN_BYTES, "{}", line.byte_len());
        let read = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| HostOps::read(&space).unwrap())
        };
        let (one, four) = (read(1), read(4));
        assert_eq!(one.len(), 152_000);
        assert_eq!(one.by_line().count(), 2);
        assert_eq!(four, one);
        assert_eq!(four.names.len(), 40);
    }

    /// The parallel, interned read equals a plain walk of every event's stats.
    #[test]
    fn matches_a_plain_walk() {
        for name in ["corpus/clean", "real/debug_print", "real/sharded_collectives"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(name);
            let session = xlens_testkit::open_session(&dir).unwrap();
            let space = session.hosts()[0].space();
            let plane = space.host_threads().unwrap();
            let hlo_op = plane.stat_id(names::stat::HLO_OP).unwrap();
            let program = plane.stat_id(names::stat::PROGRAM_ID).unwrap();
            let root = plane.stat_id(names::stat::IS_ROOT);
            let mut expected = Vec::new();
            let mut markers = Vec::new();
            for line in plane.lines() {
                let mut marked = false;
                for ev in line.events(plane).map(|e| e.unwrap()) {
                    marked |= crate::is_host_step_marker(ev.name()) && root.is_some_and(|r| ev.stat(r).is_some());
                    if let Some(op) = ev.stat(hlo_op).and_then(|s| s.as_str()) {
                        let p = ev.stat(program).and_then(|s| s.as_u64());
                        expected.push((line.index(), ev.start(), ev.end(), op.into_owned(), p));
                    }
                }
                if marked {
                    markers.push(line.index());
                }
            }
            let ops = HostOps::read(space).unwrap();
            let actual: Vec<_> = ops
                .by_line()
                .flat_map(|(line, t)| t.iter().map(move |o| (line.line, o)))
                .map(|(line, o)| (line, o.start, o.end, ops.name(o).to_owned(), ops.context(o).program_id))
                .collect();
            assert!(!expected.is_empty(), "{name}");
            assert_eq!(actual, expected, "{name}");
            assert_eq!(ops.len(), expected.len(), "{name}");
            assert_eq!(ops.rooted_marker_lines, markers, "{name}");
            assert!(ops.modules.values().all(|m| !m.is_empty()), "{name}: {:?}", ops.modules);
            // Indices follow `iter` order and know their thread.
            for (i, op) in ops.iter().enumerate() {
                let (line, at) = ops.get(i).unwrap();
                assert_eq!((line.line, at.start, at.end), (expected[i].0, op.start, op.end), "{name}");
            }
            assert_eq!(ops.get(ops.len()), None);
            let (line, first) = ops.by_line().next().unwrap();
            assert_eq!(ops.of_line(line).first(), first.first());
            assert!(ops.of_line(LineRef { plane: usize::MAX, line: 0 }).is_empty());
            let groups: Vec<(LineRef, &[HostOp])> = ops.by_line().collect();
            assert!(groups.iter().all(|(_, g)| !g.is_empty()), "{name}");
            assert!(groups.windows(2).all(|w| w[0].0 < w[1].0), "{name}");
            // Contexts are interned: each distinct (program, run, ordinal) once.
            let distinct: std::collections::BTreeSet<OpContext> = ops.contexts.iter().copied().collect();
            assert_eq!(distinct.len(), ops.contexts.len(), "{name}");
        }
    }

    /// On a TensorFlow GPU capture, a kernel XLA compiled (`jit_compile=True`) keeps its HLO op,
    /// though it also carries the TensorFlow op and a `TensorFlow Ops` line is there; a kernel of
    /// TensorFlow's own is named by its op.
    #[test]
    fn tf_gpu_kernels_of_xla_keep_their_hlo_ops() {
        use xlens_xplane::SpaceBuilder;
        let mut b = SpaceBuilder::default();
        {
            let mut gpu = b.plane(10, "/device:GPU:0");
            let (tf_op, hlo_op) = (gpu.stat_metadata(names::stat::TF_OP), gpu.stat_metadata(names::stat::HLO_OP));
            let (fused, bias) = (gpu.event_metadata("loop_fusion_kernel"), gpu.event_metadata("BiasNHWCKernel"));
            let op = gpu.event_metadata("model/dense/MatMul");
            let mut line = gpu.line(7, "Stream #7(Compute)", 0);
            line.event(fused, 0, 10_000).stat(tf_op, "model/dense/MatMul:_XlaRun").stat(hlo_op, "fusion.3");
            line.event(bias, 20_000, 5_000).stat(tf_op, "model/dense/BiasAdd:BiasAdd");
            drop(line);
            gpu.line(names::line::DERIVED_ID_MIN + 3, names::line::TENSORFLOW_OPS, 0).event(op, 0, 10_000);
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let ops = HostOps::read(&space).unwrap();
        let names: Vec<&str> = ops.iter().map(|o| ops.name(o)).collect();
        assert_eq!(names, ["fusion.3", "model/dense/BiasAdd"]);
    }

    #[test]
    fn a_host_op_is_24_bytes() {
        assert_eq!(std::mem::size_of::<HostOp>(), 24);
    }

    /// The duty cycle's streaming merge equals the plain definition: per device, every op's
    /// interval sorted by start and unioned, busy time over the window from first start to last
    /// end, summed over devices. Lines in and out of start order, nested and overlapping ops,
    /// lines that run several devices.
    #[test]
    fn duty_cycle_equals_the_union_of_every_op() {
        use proptest::prelude::*;
        let op = (0i64..1_000, 0i64..200, 0u32..3);
        let line = (proptest::collection::vec(op, 0..40), any::<bool>());
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&proptest::collection::vec(line, 0..6), |lines| {
                let mut table = HostOps { offsets: vec![0], ..HostOps::default() };
                table.contexts = (0..3).map(|core| OpContext { core, ..OpContext::default() }).collect();
                for (i, (ops, in_order)) in lines.iter().enumerate() {
                    let mut ops: Vec<HostOp> = ops
                        .iter()
                        .map(|&(start, len, context)| HostOp {
                            start: Picos(start),
                            end: Picos(start + len),
                            name: 0,
                            context,
                        })
                        .collect();
                    if *in_order {
                        ops.sort_by_key(|o| o.start);
                    }
                    table.offsets.push(table.offsets[i] + ops.len());
                    table.lines.push(LineTable { line: LineRef { plane: 0, line: i }, ops });
                }
                let (mut busy, mut window) = (0i64, 0i64);
                for core in 0..3 {
                    let mut spans: Vec<(i64, i64)> =
                        table.iter().filter(|o| table.context(o).core == core).map(|o| (o.start.0, o.end.0)).collect();
                    spans.sort_unstable();
                    let Some(&(first, _)) = spans.first() else { continue };
                    let mut run = spans[0];
                    for &(s, e) in &spans[1..] {
                        if s <= run.1 {
                            run.1 = run.1.max(e);
                        } else {
                            busy += run.1 - run.0;
                            run = (s, e);
                        }
                    }
                    busy += run.1 - run.0;
                    window += run.1 - first;
                }
                let expected = (window > 0).then_some((Picos(busy), Picos(window)));
                prop_assert_eq!(table.duty_cycle(), expected);
                Ok(())
            })
            .unwrap();
    }

    /// Library GEMM kernels pair with the GEMM calls scheduled between the kernels around them,
    /// across a loop's next iteration too, and not at all when the counts differ.
    #[test]
    fn library_gemm_kernels_match_the_scheduled_gemm_calls_between_their_neighbours() {
        let (a, b) = (xlens_hlo::CompId(0), xlens_hlo::CompId(1));
        let schedule = GemmSchedule {
            position: HashMap::new(),
            gemms: HashMap::from([
                (a, vec![(2, "gemm.a2"), (5, "gemm.a5"), (9, "gemm.a9")]),
                (b, vec![(1, "gemm.b1")]),
            ]),
            entry_order: Vec::new(),
            entry_gemms: Vec::new(),
        };
        let names = |m: Vec<(usize, &str)>| m.into_iter().map(|(_, n)| n.to_owned()).collect::<Vec<_>>();
        assert_eq!(names(schedule.matching(Some((a, 1)), Some((a, 6)), 2)), ["gemm.a2", "gemm.a5"]);
        assert_eq!(names(schedule.matching(Some((a, 3)), Some((a, 6)), 1)), ["gemm.a5"]);
        // The next execution: after 6 in this one, before 3 in the next.
        assert_eq!(names(schedule.matching(Some((a, 6)), Some((a, 3)), 2)), ["gemm.a9", "gemm.a2"]);
        // Across computations: after 6 in `a`, before 4 in `b`.
        assert_eq!(names(schedule.matching(Some((a, 6)), Some((b, 4)), 2)), ["gemm.a9", "gemm.b1"]);
        assert_eq!(names(schedule.matching(None, Some((a, 6)), 2)), ["gemm.a2", "gemm.a5"]);
        assert_eq!(names(schedule.matching(Some((a, 6)), None, 1)), ["gemm.a9"]);
        // Counts that differ pin nothing.
        assert!(schedule.matching(Some((a, 1)), Some((a, 6)), 1).is_empty());
        assert!(schedule.matching(None, None, 1).is_empty());
        assert!(schedule.matching(Some((a, 1)), Some((a, 6)), 0).is_empty());
    }
}
