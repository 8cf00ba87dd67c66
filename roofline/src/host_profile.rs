//! The analyses of a profile, built once on first use and shared (thread-safe): one
//! [`HostProfile`] per host holds its decoded space and, in lazily filled cells, the HLO modules,
//! the device timeline, the host-run op table, the steps, the op profile, the step anatomy, the
//! duty cycle, the per-step op medians and the chip. The detectors of `xlens-faults` and the
//! `ops` command read the same cells.

use std::sync::{Arc, OnceLock};

use xlens_hlo::Module;
use xlens_xplane::{DeviceKind, Error, Host, Picos, Session, Space, SpaceSummary, summarize};

use crate::intervals::{IntervalCursor, median_of};
use crate::{
    Chip, DeviceTimeline, FrameworkInfo, FrameworkOpStats, HostOps, OpProfile, StepAnatomy, Steps,
    anatomy_from_timeline,
};

/// Per op name of one program: the median over steps of its time in each step (ms).
pub type StepMedians = std::collections::BTreeMap<String, f64>;

/// One host of a profile, with its shared analyses.
#[derive(Debug)]
pub struct HostProfile {
    name: String,
    space: Space,
    summary: SpaceSummary,
    modules: OnceLock<(Vec<Module>, Vec<String>)>,
    timeline: OnceLock<Result<DeviceTimeline, Shared>>,
    steps: OnceLock<Result<Steps, Shared>>,
    op_profile: OnceLock<Result<OpProfile, Shared>>,
    anatomy: OnceLock<Result<Vec<StepAnatomy>, Shared>>,
    chip: OnceLock<Option<Chip>>,
    framework: OnceLock<FrameworkInfo>,
    host_ops: OnceLock<(HostOps, Option<Shared>)>,
    /// The op table as [`HostProfile::prepare`] reads it beside the HLO modules, before its
    /// graph kernels are named: naming them needs the modules, and a worker that waited for
    /// them inside that read would sit idle instead of helping to decode them.
    host_ops_read: std::sync::Mutex<Option<(HostOps, Option<xlens_xplane::Error>)>>,
    host_op_order: OnceLock<Vec<u32>>,
    duty_cycle: OnceLock<Option<(Picos, Picos)>>,
    kernel_stats: OnceLock<Option<crate::KernelStats>>,
    step_medians: std::sync::Mutex<std::collections::BTreeMap<u64, Arc<OnceLock<Arc<StepMedians>>>>>,
    framework_ops: OnceLock<Option<Result<FrameworkOpStats, Shared>>>,
    tf_groups: OnceLock<Result<Option<crate::TfEventGroups>, Shared>>,
    tf_data: OnceLock<Result<Option<crate::TfDataPipelines>, Shared>>,
    input_pipeline: OnceLock<Result<Option<crate::InputPipeline>, Shared>>,
}

impl HostProfile {
    /// Wraps a decoded host.
    pub fn new(name: impl Into<String>, space: Space) -> HostProfile {
        let summary = summarize(&space);
        HostProfile {
            name: name.into(),
            space,
            summary,
            modules: OnceLock::new(),
            timeline: OnceLock::new(),
            steps: OnceLock::new(),
            op_profile: OnceLock::new(),
            anatomy: OnceLock::new(),
            chip: OnceLock::new(),
            framework: OnceLock::new(),
            host_ops: OnceLock::new(),
            host_ops_read: std::sync::Mutex::default(),
            host_op_order: OnceLock::new(),
            duty_cycle: OnceLock::new(),
            kernel_stats: OnceLock::new(),
            step_medians: std::sync::Mutex::default(),
            framework_ops: OnceLock::new(),
            tf_groups: OnceLock::new(),
            tf_data: OnceLock::new(),
            input_pipeline: OnceLock::new(),
        }
    }

    /// The host name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The decoded space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Device and host facts from plane names and stats.
    pub fn summary(&self) -> &SpaceSummary {
        &self.summary
    }

    /// TPU, GPU or CPU.
    pub fn device_kind(&self) -> DeviceKind {
        self.summary.device_kind
    }

    /// Builds the shared analyses now (device timeline, steps, op profile, anatomy, HLO modules,
    /// duty cycle, the per-step op medians of host-thread ops, chip, framework, the GPU kernel
    /// statistics), instead of on first use. Errors are kept and reported by the accessors.
    pub fn prepare(&self) {
        self.prepare_timed(&|_, _| {});
    }

    /// [`HostProfile::prepare`], telling `timed` how long each analysis took to build.
    pub fn prepare_timed(&self, timed: &(dyn Fn(&str, std::time::Duration) + Sync)) {
        let time = |phase: &str, build: &dyn Fn()| {
            let start = std::time::Instant::now();
            build();
            timed(phase, start.elapsed());
        };
        // The device timeline first, on every worker (its cores run in parallel): an analysis
        // that waited for it inside a parallel branch would hold a worker idle.
        time("timeline", &|| {
            let _ = self.device_timeline();
        });
        // Two lists of phases side by side, each list in order on its worker.
        type Phase<'a> = (&'a str, &'a (dyn Fn() + Sync));
        let beside = |left: &[Phase<'_>], right: &[Phase<'_>]| {
            let run = |phases: &[Phase<'_>]| phases.iter().for_each(|(phase, build)| time(phase, build));
            rayon::join(|| run(left), || run(right));
        };
        // Then the HLO modules and the op table (one walk of the host threads and GPU streams)
        // in parallel; the op profile joins them, the steps read the marker threads they found,
        // and the anatomy needs all of them.
        let read_host_ops = || {
            if self.host_ops.get().is_none() {
                let read = HostOps::read_partial(&self.space);
                if let Ok(mut slot) = self.host_ops_read.lock() {
                    *slot = Some(read);
                }
            }
        };
        // Every profile's op table is read here, TPU ones too (their detectors ask for its read
        // errors): built lazily inside a detector, its parallel read would let the building
        // worker take another detector's job, which asks for the same cell and waits for itself.
        let host_ops: &[Phase<'_>] = &[("host_ops", &read_host_ops)];
        beside(
            &[("modules", &|| {
                let _ = self.modules();
            })],
            host_ops,
        );
        // The kernels of CUDA graphs named by their instructions, now that both are here; on a
        // GPU profile, the modules' GPU costs (the op profile prices ops with them) beside it.
        let name_graph_kernels = || {
            let _ = self.host_ops();
        };
        // The programs that ran ops (the op profile prices only theirs).
        let ran: std::collections::BTreeSet<u64> = {
            let slot = self.host_ops_read.lock().ok();
            let read = slot.as_ref().and_then(|s| s.as_ref()).map(|(ops, _)| ops);
            read.or_else(|| self.host_ops.get().map(|(ops, _)| ops))
                .map(|ops| ops.contexts.iter().map(|c| c.program_id.unwrap_or(0)).collect())
                .unwrap_or_default()
        };
        let gpu_costs = || {
            use rayon::prelude::*;
            let modules: Vec<&Module> =
                self.modules().iter().filter(|m| m.program_id().is_some_and(|p| ran.contains(&p))).collect();
            modules.par_iter().with_max_len(1).for_each(|m| m.prepare_gpu_costs());
        };
        // Two chains side by side: the op profile waits for the GPU costs it prices ops with,
        // and the steps and the duty cycle (a union of every op, millions on a CPU capture; the
        // report's health snapshot reads it after the detectors, on one thread) wait for the
        // named kernels. Paired phase by phase instead, a long steps phase (a Python tracer
        // thread of many markers) ran after the GPU costs rather than beside them.
        let op_profile = || {
            let _ = self.op_profile();
        };
        let steps = || {
            let _ = self.steps();
        };
        let duty_cycle = || {
            let _ = self.duty_cycle();
        };
        // Every program's HBM replay (the memory detector and the report's snapshot read them)
        // at the end of the host chain, which is the shorter one on GPU profiles.
        let memory = || {
            for module in self.modules() {
                let _ = module.hbm_memory_stats();
            }
        };
        let (host_chain, device_chain): (&[Phase<'_>], &[Phase<'_>]) = if self.device_kind() == DeviceKind::Gpu {
            (
                &[
                    ("graph_kernels", &name_graph_kernels),
                    ("steps", &steps),
                    ("duty_cycle", &duty_cycle),
                    ("memory", &memory),
                ],
                &[("gpu_costs", &gpu_costs), ("op_profile", &op_profile)],
            )
        } else {
            (
                &[
                    ("graph_kernels", &name_graph_kernels),
                    ("steps", &steps),
                    ("duty_cycle", &duty_cycle),
                    ("memory", &memory),
                ],
                &[("op_profile", &op_profile)],
            )
        };
        beside(host_chain, device_chain);
        // The per-step op medians of the step programs (host-thread ops) beside the anatomy: six
        // detectors read them, and one would compute them while the others wait.
        beside(
            &[("anatomy", &|| {
                let _ = self.anatomy();
            })],
            &[("step_medians", &|| prepare_step_medians(self))],
        );
        time("chip", &|| {
            let _ = self.chip();
        });
        // Every detector's findings read it (their fixes follow the framework): built here, no
        // detector waits for another to detect it.
        time("framework", &|| {
            let _ = self.framework();
        });
    }

    /// The HLO modules of `/host:metadata`, sorted by program id.
    pub fn modules(&self) -> &[Module] {
        &self.modules_and_warnings().0
    }

    /// Warnings from decoding the HLO modules (a module that fails to decode is skipped).
    pub fn module_warnings(&self) -> &[String] {
        &self.modules_and_warnings().1
    }

    fn modules_and_warnings(&self) -> &(Vec<Module>, Vec<String>) {
        self.modules.get_or_init(|| {
            let (modules, warnings) = xlens_hlo::modules_from_space(&self.space);
            (modules, warnings.iter().map(|w| w.to_string()).collect())
        })
    }

    /// The module with this program id.
    pub fn module(&self, program_id: u64) -> Option<&Module> {
        self.modules().iter().find(|m| m.program_id() == Some(program_id))
    }

    /// The module that runs the most op time (the training step, usually); without an op
    /// profile, the largest module.
    pub fn main_module(&self) -> Option<&Module> {
        if let Ok(profile) = self.op_profile() {
            let mut time_by_program: std::collections::BTreeMap<u64, Picos> = std::collections::BTreeMap::new();
            for op in &profile.ops {
                *time_by_program.entry(op.program_id).or_default() += op.self_time;
            }
            let best = time_by_program.iter().max_by_key(|(id, t)| (**t, std::cmp::Reverse(**id))).map(|(id, _)| *id);
            if let Some(m) = best.and_then(|id| self.module(id)) {
                return Some(m);
            }
        }
        self.modules().iter().max_by_key(|m| (m.instructions().len(), std::cmp::Reverse(m.program_id())))
    }

    /// The device timeline: one walk of every TPU core's op line, shared by the op profile, the
    /// steps, the anatomy and the device detectors (empty without TPU cores).
    pub fn device_timeline(&self) -> Result<&DeviceTimeline, &Error> {
        self.timeline_cell().as_ref().map_err(|e| &**e)
    }

    fn timeline_cell(&self) -> &Result<DeviceTimeline, Shared> {
        self.timeline.get_or_init(|| DeviceTimeline::build(&self.space).map_err(Arc::new))
    }

    /// The steps (device steps on TPU, host markers otherwise).
    pub fn steps(&self) -> Result<&Steps, &Error> {
        self.steps_cell().as_ref().map_err(|e| &**e)
    }

    fn steps_cell(&self) -> &Result<Steps, Shared> {
        self.steps.get_or_init(|| {
            let timeline = shared(self.timeline_cell())?;
            steps_of(
                &self.space,
                timeline,
                || self.host_ops_shared(),
                || shared(self.tf_groups_cell()).map(|g| crate::steps::derived_gpu_steps(&self.space, g.as_ref())),
            )
        })
    }

    /// XProf's own step grouping of a TensorFlow capture that carries none
    /// ([`crate::TfEventGroups`]), built once when first asked for: the steps of a GPU capture
    /// without `Steps` lines and the input pipeline both read it. `Ok(None)` for any other
    /// capture.
    pub fn tf_event_groups(&self) -> Result<Option<&crate::TfEventGroups>, &Error> {
        self.tf_groups_cell().as_ref().map(Option::as_ref).map_err(|e| &**e)
    }

    fn tf_groups_cell(&self) -> &Result<Option<crate::TfEventGroups>, Shared> {
        self.tf_groups.get_or_init(|| crate::TfEventGroups::build(&self.space).map_err(Arc::new))
    }

    /// The `tf.data` pipelines of the host plane ([`crate::TfDataPipelines`]), read once when
    /// first asked for (`input_starvation` on a finding, the `ops` outputs, the dataset);
    /// `Ok(None)` without `tf.data` iterator events.
    pub fn tf_data(&self) -> Result<Option<&crate::TfDataPipelines>, &Error> {
        self.tf_data
            .get_or_init(|| match self.space.host_threads() {
                Some(plane) => crate::TfDataPipelines::read(plane).map_err(Arc::new),
                None => Ok(None),
            })
            .as_ref()
            .map(Option::as_ref)
            .map_err(|e| &**e)
    }

    /// The input time of each step of a capture with TensorFlow's step grouping
    /// ([`crate::InputPipeline`]: its `group_id` stats, or the grouping of
    /// [`HostProfile::tf_event_groups`]), read once when first asked for (`input_starvation`, and
    /// the step anatomy of a TensorFlow capture with a device); `Ok(None)` for any other capture.
    pub fn input_pipeline(&self) -> Result<Option<&crate::InputPipeline>, &Error> {
        self.input_pipeline_init().as_ref().map(Option::as_ref).map_err(|e| &**e)
    }

    fn input_pipeline_cell(&self) -> Result<Option<&crate::InputPipeline>, Shared> {
        self.input_pipeline_init().as_ref().map(Option::as_ref).map_err(Arc::clone)
    }

    fn input_pipeline_init(&self) -> &Result<Option<crate::InputPipeline>, Shared> {
        self.input_pipeline.get_or_init(|| {
            let groups = shared(self.tf_groups_cell())?;
            crate::InputPipeline::read_grouped(&self.space, groups.as_ref()).map_err(Arc::new)
        })
    }

    /// XProf's device duty cycle (%): TPU cores' on-duty time over their windows; for GPU
    /// streams (and host-run ops) the union of each device's ops over its window.
    pub fn duty_cycle_pct(&self) -> Option<f64> {
        self.duty_cycle().map(|(busy, window)| 100.0 * busy.0 as f64 / window.0 as f64)
    }

    /// The GPU kernels as `xlens kernels` reads them ([`crate::KernelStats::read`]), read once,
    /// when first asked for (no other analysis needs them); `None` off GPUs, or when a stream
    /// line does not decode (the error is in the space's decode log).
    pub fn kernel_stats(&self) -> Option<&crate::KernelStats> {
        self.kernel_stats
            .get_or_init(|| {
                if self.device_kind() == DeviceKind::Gpu { crate::KernelStats::read(&self.space).ok() } else { None }
            })
            .as_ref()
    }

    /// The devices' on-duty time and their windows, summed over devices (what
    /// [`HostProfile::duty_cycle_pct`] divides; sessions add hosts up).
    pub fn duty_cycle(&self) -> Option<(Picos, Picos)> {
        *self.duty_cycle.get_or_init(|| {
            if self.space.tpu_tensor_cores().is_empty() {
                self.host_ops().duty_cycle()
            } else {
                self.device_timeline().ok()?.duty_cycle()
            }
        })
    }

    /// The mean step time in ms, when there are steps: the base of every "share of the step".
    ///
    /// On a PyTorch/XLA capture with host step markers it is the training loop's period: each
    /// step with the host time before the next step's marker. PyTorch/XLA's loop fetches the
    /// next batch outside `xp.StepTrace`, and `xm.mark_step()` returns before the step's graph has
    /// run, so the step's device work may run after its marker: the marker alone (XProf's step,
    /// which [`HostProfile::steps`] keeps) is not what a share of the step means there.
    pub fn step_ms(&self) -> Option<f64> {
        let steps = self.steps().ok()?;
        let mean = steps.stats().map(|s| s.mean_ms)?;
        if !runs_to_next_marker(steps, self.framework().name) {
            return Some(mean);
        }
        let total: Picos = iteration_durations(steps).sum();
        Some((total.as_ms_f64() / steps.steps.len() as f64).max(mean))
    }

    /// The op profile: TPU op lines when present, else host-thread op events joined with HLO.
    pub fn op_profile(&self) -> Result<&OpProfile, &Error> {
        self.op_profile_cell().as_ref().map_err(|e| &**e)
    }

    fn op_profile_cell(&self) -> &Result<OpProfile, Shared> {
        self.op_profile.get_or_init(|| {
            op_profile_of(&self.space, || shared(self.timeline_cell()), || self.host_ops_shared(), || self.modules())
        })
    }

    /// The anatomy of every step.
    pub fn anatomy(&self) -> Result<&[StepAnatomy], &Error> {
        self.anatomy
            .get_or_init(|| {
                let steps = shared(self.steps_cell())?;
                anatomy_of(
                    &self.space,
                    &loop_iterations(steps, self.framework().name),
                    || shared(self.timeline_cell()),
                    || shared(self.op_profile_cell()),
                    || self.host_ops_shared(),
                    || match self.framework().name {
                        crate::Framework::TensorFlow => self.input_pipeline_cell(),
                        _ => Ok(None),
                    },
                )
            })
            .as_ref()
            .map(Vec::as_slice)
            .map_err(|e| &**e)
    }

    /// The framework op profile ([`FrameworkOpStats`]) of a host without HLO: `None` when the
    /// host has HLO modules or its devices no `TensorFlow Ops` line
    /// ([`FrameworkOpStats::applies`]), so that XLA captures keep the HLO op profile alone.
    pub fn framework_ops(&self) -> Option<Result<&FrameworkOpStats, &Error>> {
        self.framework_ops
            .get_or_init(|| {
                (FrameworkOpStats::applies(&self.space) && self.modules().is_empty())
                    .then(|| FrameworkOpStats::read(&self.space).map_err(Arc::new))
            })
            .as_ref()
            .map(|r| r.as_ref().map_err(|e| &**e))
    }

    /// Every `hlo_op` event of the host threads (empty on profiles without them), read once and
    /// shared by the detectors that look at host-run ops.
    /// A host plane that fails to decode part way gives the ops read before the failure here;
    /// the op profile reports the error.
    pub fn host_ops(&self) -> &HostOps {
        &self.host_ops_and_error().0
    }

    /// Indices into [`HostProfile::host_ops`] in time order: by start, longer first, then core
    /// (the order op spans are walked in), sorted once and shared.
    pub fn host_op_order(&self) -> &[u32] {
        self.host_op_order.get_or_init(|| {
            use std::cmp::Reverse;
            let ops = self.host_ops();
            let key = |o: &crate::HostOp| (o.start, Reverse(o.end), ops.context(o).core);
            // Each thread's indices sorted on their own (the ops are read from the thread's
            // slice, not looked up), then the threads merged; ties keep index order.
            let mut runs: Vec<(&[crate::HostOp], u32, Vec<u32>)> = Vec::new();
            let mut base = 0u32;
            for (_, line_ops) in ops.by_line() {
                let mut order: Vec<u32> = (0..line_ops.len() as u32).collect();
                order.sort_by_key(|&i| key(&line_ops[i as usize]));
                runs.push((line_ops, base, order));
                base += line_ops.len() as u32;
            }
            let mut heads: std::collections::BinaryHeap<Reverse<(_, u32, usize, usize)>> = runs
                .iter()
                .enumerate()
                .filter_map(|(r, (line_ops, base, order))| {
                    let &i = order.first()?;
                    Some(Reverse((key(&line_ops[i as usize]), base + i, r, 0)))
                })
                .collect();
            let mut order = Vec::with_capacity(ops.len());
            while let Some(Reverse((_, index, r, at))) = heads.pop() {
                order.push(index);
                let (line_ops, base, run) = &runs[r];
                if let Some(&i) = run.get(at + 1) {
                    heads.push(Reverse((key(&line_ops[i as usize]), base + i, r, at + 1)));
                }
            }
            order
        })
    }

    /// Per-step op-time medians of one program, computed once by `compute` and shared by the
    /// detectors that read them (the per-op times of the HLO detectors).
    pub fn step_medians(&self, program: u64, compute: impl FnOnce() -> StepMedians) -> std::sync::Arc<StepMedians> {
        // The program's cell is taken under the lock and filled outside it: the first detector
        // to ask computes, the others wait for that result instead of computing it again
        // (`compute` runs no parallel work, so a waiting worker holds nothing it needs).
        let cell = match self.step_medians.lock() {
            Ok(mut cells) => cells.entry(program).or_default().clone(),
            Err(_) => Arc::default(),
        };
        cell.get_or_init(|| Arc::new(compute())).clone()
    }

    fn host_ops_and_error(&self) -> &(HostOps, Option<Shared>) {
        self.host_ops.get_or_init(|| {
            let read = self.host_ops_read.lock().ok().and_then(|mut slot| slot.take());
            let (mut ops, error) = read.unwrap_or_else(|| HostOps::read_partial(&self.space));
            // Kernels of CUDA graphs are named by their instructions (which needs the HLO).
            if ops.has_graph_kernels() {
                ops.attribute_graph_kernels(self.modules());
            }
            (ops, error.map(Arc::new))
        })
    }

    /// The host ops, or the error that cut them short (shared with the analyses built on them).
    fn host_ops_shared(&self) -> Result<&HostOps, Shared> {
        match self.host_ops_and_error() {
            (ops, None) => Ok(ops),
            (_, Some(e)) => Err(e.clone()),
        }
    }

    /// The framework that produced the profile (JAX, TensorFlow, PyTorch/XLA or unknown), with
    /// whether it ran through XLA and the names that say so ([`crate::framework`] gives the
    /// rule). Read from names the capture records; the HLO modules are decoded only when no
    /// name decides.
    pub fn framework(&self) -> &FrameworkInfo {
        self.framework
            .get_or_init(|| crate::framework::detect(&self.space, self.summary.hlo_programs, || self.modules()))
    }

    /// The chip: peaks from the profile's capability stats, else the catalogue; `None` on CPU.
    pub fn chip(&self) -> Option<&Chip> {
        self.chip.get_or_init(|| Chip::from_space(&self.space).ok()).as_ref()
    }

    /// What could not be read from this host: analyses whose decode hit an error (the steps, op
    /// profile, device timeline, host-run ops or step anatomy), HLO modules that did not
    /// decode, and every event or stat that did not decode in the walks so far
    /// ([`Space::decode_errors`](xlens_xplane::Space::decode_errors): a stat read as absent
    /// because it is malformed, one line each with its location, an error already listed by
    /// its analysis once). Empty for an intact profile; a scan calls such a host's report
    /// incomplete. Call it after the analyses and detectors ran: what they met lazily counts.
    pub fn read_errors(&self) -> Vec<String> {
        let mut out = self.analysis_errors();
        let decode = self.space.decode_errors();
        for e in &decode.errors {
            let error = e.error.to_string();
            if !out.iter().any(|o| o.ends_with(&error)) {
                out.push(e.to_string());
            }
        }
        // The count of the rest, if any.
        out.extend(decode.lines().into_iter().skip(decode.errors.len()));
        out
    }

    /// The part of [`read_errors`](Self::read_errors) that does not depend on which walks ran
    /// so far: the analyses that failed and the HLO modules that did not decode (a detector's
    /// reason for not running names the first, whichever detectors run beside it).
    pub fn analysis_errors(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut push = |what: &str, err: Option<&Error>| {
            if let Some(err) = err.map(ToString::to_string)
                && !out.iter().any(|o| o.ends_with(&err))
            {
                out.push(format!("{what} could not be read: {err}"));
            }
        };
        push("the device timeline", self.device_timeline().err());
        push("the host-run ops", self.host_ops_and_error().1.as_deref());
        push("the steps", self.steps().err());
        push("the op profile", self.op_profile().err());
        push("the step anatomy", self.anatomy().err());
        for w in self.module_warnings().iter().filter(|w| w.contains("module skipped")) {
            out.push(format!("an HLO module could not be read: {w}"));
        }
        out
    }
}

/// Computes now, in parallel, the per-step op-time medians that
/// the HLO detectors of `xlens-faults` reads for the programs the steps ran (profiles whose ops
/// are host-thread events): the detectors that need them then find them ready instead of one
/// computing while the others wait.
pub fn prepare_step_medians(host: &HostProfile) {
    use rayon::prelude::*;
    if !host.space().tpu_tensor_cores().is_empty() || host.host_ops().is_empty() {
        return;
    }
    let Ok(steps) = host.steps() else { return };
    let n = steps.steps.len();
    if n == 0 {
        return;
    }
    let programs: Vec<u64> = step_modules(host).iter().filter_map(|m| m.program_id()).collect();
    programs.par_iter().with_max_len(1).for_each(|&program| {
        let _ = host_step_medians(host, program, n);
    });
}

/// Per op of one program on host threads: the median over steps of its time inside each step
/// (ms, all cores together), for ops that run in at least half of the steps.
pub fn host_step_medians(host: &HostProfile, program: u64, n: usize) -> Option<std::sync::Arc<StepMedians>> {
    let steps = &host.steps().ok()?.steps;
    Some(host.step_medians(program, || {
        let mut bounds: Vec<(Picos, Picos, usize)> =
            steps.iter().enumerate().map(|(i, s)| (s.start, s.end(), i)).collect();
        bounds.sort();
        let cached = host.host_ops();
        // Per interned name: its time in each step.
        let mut per_name: Vec<Option<Vec<f64>>> = vec![None; cached.names.len()];
        let spans: Vec<crate::Span> = bounds.iter().map(|b| crate::Span::new(b.0, b.1)).collect();
        for (_, line_ops) in cached.by_line() {
            // The steps that start at or before an op, found by a cursor over the line's ops.
            let mut cursor = IntervalCursor::new(&spans);
            for op in line_ops.iter().filter(|o| cached.context(o).program_id == Some(program)) {
                let at = op.start;
                let k = cursor.seek(at);
                let Some(&(_, end, step)) = k.checked_sub(1).and_then(|k| bounds.get(k)) else { continue };
                if at >= end {
                    continue;
                }
                if let Some(slot) = per_name.get_mut(op.name as usize) {
                    slot.get_or_insert_with(|| vec![0.0; n])[step] += (op.end - op.start).as_ms_f64();
                }
            }
        }
        per_name
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| {
                let mut v = v?;
                let ran = v.iter().filter(|t| **t > 0.0).count();
                if 2 * ran < n {
                    return None;
                }
                Some((cached.names[i].clone(), median_of(&mut v)))
            })
            .collect()
    }))
}

/// The programs the profiled steps ran: modules with op time in the op profile, most op time
/// first (ties by program id); the main module alone when the profile has no op timeline.
pub fn step_modules(host: &HostProfile) -> Vec<&Module> {
    let mut timed: Vec<(Picos, &Module)> = Vec::new();
    if let Ok(profile) = host.op_profile() {
        let mut by_program: std::collections::BTreeMap<u64, Picos> = std::collections::BTreeMap::new();
        for op in profile.ops.iter().filter(|o| !o.has_inner_ops()) {
            *by_program.entry(op.program_id).or_default() += op.self_time;
        }
        for (program, time) in by_program {
            if let Some(module) = host.module(program).filter(|_| time.0 > 0) {
                timed.push((time, module));
            }
        }
    }
    if timed.is_empty() {
        return host.main_module().into_iter().collect();
    }
    timed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.program_id().cmp(&b.1.program_id())));
    timed.into_iter().map(|(_, m)| m).collect()
}

/// Every host of a profile.
#[derive(Debug)]
pub struct Profile {
    run: Option<String>,
    hosts: Vec<HostProfile>,
}

impl Profile {
    /// A profile of decoded hosts.
    pub fn new(run: Option<String>, hosts: Vec<HostProfile>) -> Profile {
        Profile { run, hosts }
    }

    /// Wraps an opened session.
    pub fn from_session(session: Session) -> Profile {
        let run = session.run().map(str::to_owned);
        let hosts = session.into_hosts().into_iter().map(|h: Host| {
            let name = h.name().to_owned();
            HostProfile::new(name, h.into_space())
        });
        Profile { run, hosts: hosts.collect() }
    }

    /// A single in-memory host.
    pub fn from_space(name: impl Into<String>, space: Space) -> Profile {
        Profile { run: None, hosts: vec![HostProfile::new(name, space)] }
    }

    /// The run name, when opened from a directory.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The hosts.
    pub fn hosts(&self) -> &[HostProfile] {
        &self.hosts
    }
}

/// The steps of a space: device steps from the timeline on TPU, else from the host ops (markers,
/// module executions, the device window). [`HostProfile::steps`] and [`op_analyses`] both
/// build them here.
fn steps_of<'a, E: From<Error>>(
    space: &Space,
    timeline: &DeviceTimeline,
    host_ops: impl FnOnce() -> Result<&'a HostOps, E>,
    derived: impl FnOnce() -> Result<Vec<crate::Step>, E>,
) -> Result<Steps, E> {
    if space.tpu_tensor_cores().is_empty() {
        Steps::from_timeline_host_ops_and_groups(space, timeline, host_ops()?, derived)
    } else {
        Ok(Steps::from_timeline(space, timeline)?)
    }
}

/// The op profile of a space: from the timeline on TPU, else from the host ops joined with the
/// HLO modules. [`HostProfile::op_profile`] and [`op_analyses`] both build it here.
fn op_profile_of<'a, E>(
    space: &Space,
    timeline: impl FnOnce() -> Result<&'a DeviceTimeline, E>,
    host_ops: impl FnOnce() -> Result<&'a HostOps, E>,
    modules: impl FnOnce() -> &'a [Module],
) -> Result<OpProfile, E> {
    if space.tpu_tensor_cores().is_empty() {
        let host_ops = host_ops()?;
        Ok(OpProfile::from_host_ops(host_ops, modules()).with_gpu_devices(space))
    } else {
        Ok(OpProfile::from_timeline(space, timeline()?))
    }
}

/// The anatomy of every step of a space: from the timeline on TPU, else from the op profile and
/// the host ops. [`HostProfile::anatomy`] and [`op_analyses`] both build it here.
fn anatomy_of<'a, E: From<Error>>(
    space: &Space,
    steps: &Steps,
    timeline: impl FnOnce() -> Result<&'a DeviceTimeline, E>,
    op_profile: impl FnOnce() -> Result<&'a OpProfile, E>,
    host_ops: impl FnOnce() -> Result<&'a HostOps, E>,
    tf_input: impl FnOnce() -> Result<Option<&'a crate::InputPipeline>, E>,
) -> Result<Vec<StepAnatomy>, E> {
    if space.tpu_tensor_cores().is_empty() {
        let profile = op_profile()?;
        let host_ops = host_ops()?;
        let mut anatomy = crate::host_anatomy_from_ops(space, steps, profile, host_ops)?;
        if let Some(input) = tf_input()? {
            add_tf_input_waits(steps, &mut anatomy, input);
        }
        Ok(anatomy)
    } else {
        Ok(anatomy_from_timeline(timeline()?))
    }
}

/// On a TensorFlow capture with a device, the host's wait on its `tf.data` iterator (and the
/// copies in) while the device runs nothing of the step ([`crate::StepInput::input_wait`], the
/// wait `input_starvation` reports) is time the device waits on the host, not idle time: it
/// moves from each step's idle to its host share (never more than the idle). Without a device
/// the host's events are the step's own work already.
fn add_tf_input_waits(steps: &Steps, anatomy: &mut [StepAnatomy], input: &crate::InputPipeline) {
    let by_name = input.steps_by_name();
    for (step, a) in steps.steps.iter().zip(anatomy.iter_mut()) {
        if let Some(s) = by_name.get(&step.name).filter(|s| !s.host_counted_by_xprof) {
            let moved = s.input_wait().min(a.idle).max(Picos::ZERO);
            a.idle -= moved;
            a.host += moved;
        }
    }
}

/// The steps, op profile and step anatomy of one decoded host, built as a [`HostProfile`] builds
/// them (the same builders, in the same order, from one device timeline and one op-table read),
/// without the other analyses: what the `ops` command prints, equal to what the detectors read.
/// The first error met is returned.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tpu/tpu_basic");
/// let session = xlens_testkit::open_session(dir)?;
/// let space = session.hosts()[0].space();
/// let (steps, profile, anatomy) = xlens_roofline::op_analyses(space)?;
/// assert_eq!(anatomy.len(), steps.steps.len());
/// assert!(!profile.ops.is_empty());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn op_analyses(space: &Space) -> Result<(Steps, OpProfile, Vec<StepAnatomy>), Error> {
    let timeline = DeviceTimeline::build(space)?;
    let (host_ops, modules) = if space.tpu_tensor_cores().is_empty() {
        let (mut ops, error) = HostOps::read_partial(space);
        if let Some(error) = error {
            return Err(error);
        }
        let (modules, _) = xlens_hlo::modules_from_space(space);
        // Kernels of CUDA graphs are named by their instructions (which needs the HLO).
        if ops.has_graph_kernels() {
            ops.attribute_graph_kernels(&modules);
        }
        (ops, modules)
    } else {
        (HostOps::default(), Vec::new())
    };
    let steps = steps_of(
        space,
        &timeline,
        || Ok::<_, Error>(&host_ops),
        || crate::TfEventGroups::build(space).map(|g| crate::steps::derived_gpu_steps(space, g.as_ref())),
    )?;
    let profile = op_profile_of(space, || Ok::<_, Error>(&timeline), || Ok(&host_ops), || &modules)?;
    let framework = crate::framework::detect(space, xlens_xplane::summarize(space).hlo_programs, || &modules).name;
    let iterations = loop_iterations(&steps, framework);
    let tf_input = if framework == crate::Framework::TensorFlow {
        crate::InputPipeline::read_grouped(space, crate::TfEventGroups::build(space)?.as_ref())?
    } else {
        None
    };
    let anatomy = anatomy_of(
        space,
        &iterations,
        || Ok::<_, Error>(&timeline),
        || Ok(&profile),
        || Ok(&host_ops),
        || Ok(tf_input.as_ref()),
    )?;
    Ok((steps, profile, anatomy))
}

/// The iterations of the training loop that the step anatomy partitions and every share of the
/// step is of: the steps themselves, except on a PyTorch/XLA capture with host step markers,
/// where each step runs to the next step's marker (the last keeps its own end). PyTorch/XLA's
/// loop fetches the next batch outside `xp.StepTrace`, and `xm.mark_step()` returns before the
/// step's graph has run, so a step's device work and its input wait lie after its marker: the
/// marker alone (XProf's step, which [`HostProfile::steps`] keeps) would show the device idle.
fn loop_iterations(steps: &Steps, framework: crate::Framework) -> std::borrow::Cow<'_, Steps> {
    if !runs_to_next_marker(steps, framework) {
        return std::borrow::Cow::Borrowed(steps);
    }
    let mut iterations = steps.clone();
    let durations: Vec<Picos> = iteration_durations(steps).collect();
    for (step, duration) in iterations.steps.iter_mut().zip(durations) {
        step.duration = duration;
    }
    std::borrow::Cow::Owned(iterations)
}

/// Whether each step runs to the next step's marker ([`loop_iterations`]): PyTorch/XLA with host
/// step markers.
fn runs_to_next_marker(steps: &Steps, framework: crate::Framework) -> bool {
    framework == crate::Framework::PyTorchXla && steps.source == crate::StepSource::HostMarkers
}

/// Each step's iteration, in step order (the anatomy's order): to the next step's start when
/// that is later than its own end; the last keeps its own.
fn iteration_durations(steps: &Steps) -> impl Iterator<Item = Picos> + '_ {
    let next_starts = steps.steps.iter().skip(1).map(|s| Some(s.start)).chain(std::iter::once(None));
    steps.steps.iter().zip(next_starts).map(|(step, next)| match next {
        Some(next) => step.duration.max(next - step.start),
        None => step.duration,
    })
}

/// The framework op profile of a decoded space without HLO, as
/// [`HostProfile::framework_ops`] gives it: `None` for a space with HLO modules or without
/// `TensorFlow Ops` lines.
///
/// ```
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/tf_v100_multiworker");
/// let session = xlens_testkit::open_session(dir)?;
/// let stats = xlens_roofline::framework_op_analysis(session.hosts()[0].space()).unwrap()?;
/// assert!(!stats.device.is_empty());
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn framework_op_analysis(space: &Space) -> Option<Result<FrameworkOpStats, Error>> {
    (FrameworkOpStats::applies(space) && xlens_hlo::modules_from_space(space).0.is_empty())
        .then(|| FrameworkOpStats::read(space))
}

/// An analysis's error, shared by the analyses built on it (a failed timeline fails the steps).
type Shared = Arc<Error>;

/// A filled analysis cell as a result whose error can be shared.
fn shared<T>(cell: &Result<T, Shared>) -> Result<&T, Shared> {
    cell.as_ref().map_err(Arc::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `prepare` builds every shared analysis a detector reads, on TPU, GPU and CPU profiles: a
    /// cell first built inside a detector could run its parallel read there, and the building
    /// worker could then take another detector's job that waits on the same cell, for itself.
    #[test]
    fn prepare_leaves_no_analysis_for_the_detectors_to_build() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        for dir in ["testdata/tpu/tpu_basic", "testdata/gpu/gpu_data_formatting", "testdata/corpus/host_callback"] {
            let profile = Profile::from_session(xlens_testkit::open_session(root.join(dir)).unwrap());
            let profile = &profile.hosts()[0];
            profile.prepare();
            assert!(profile.host_ops.get().is_some(), "{dir}: the op table");
            assert!(profile.modules.get().is_some(), "{dir}: the modules");
            assert!(profile.timeline.get().is_some(), "{dir}: the timeline");
            assert!(profile.steps.get().is_some(), "{dir}: the steps");
            assert!(profile.op_profile.get().is_some(), "{dir}: the op profile");
            assert!(profile.anatomy.get().is_some(), "{dir}: the anatomy");
            assert!(profile.duty_cycle.get().is_some(), "{dir}: the duty cycle");
            assert!(profile.chip.get().is_some(), "{dir}: the chip");
        }
    }
}
