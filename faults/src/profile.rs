//! The profile a scan reads: hosts, each a decoded space plus analyses built once, on first use,
//! and shared by every detector (thread-safe).

use std::sync::OnceLock;

use xlens_hlo::Module;
use xlens_roofline::{Chip, DeviceTimeline, OpProfile, StepAnatomy, Steps, anatomy_from_timeline};
use xlens_xplane::{DeviceKind, Host, Picos, Session, Space, SpaceSummary, summarize};

use crate::detector::Need;

/// One host of a profile, with its shared analyses.
#[derive(Debug)]
pub struct HostProfile {
    name: String,
    space: Space,
    summary: SpaceSummary,
    modules: OnceLock<(Vec<Module>, Vec<String>)>,
    timeline: OnceLock<Result<DeviceTimeline, String>>,
    steps: OnceLock<Result<Steps, String>>,
    op_profile: OnceLock<Result<OpProfile, String>>,
    anatomy: OnceLock<Result<Vec<StepAnatomy>, String>>,
    chip: OnceLock<Option<Chip>>,
    host_ops: OnceLock<HostOps>,
}

/// One executed HLO op on a host thread (XLA:CPU runs its thunks there), compactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostOp {
    /// Start.
    pub start: Picos,
    /// End.
    pub end: Picos,
    /// Index into [`HostOps::names`] (the `hlo_op` stat).
    pub name: u32,
    /// `program_id` stat.
    pub program_id: Option<u64>,
    /// `run_id` stat (one program execution).
    pub run_id: Option<i64>,
    /// `device_ordinal` stat (0 when absent).
    pub core: i64,
    /// Index of the thread (line) in `/host:CPU`.
    pub line: u32,
}

/// Every host-thread op event of a host, read once (one walk of each event's stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOps {
    /// The ops, in thread order then file order.
    pub ops: Vec<HostOp>,
    /// Interned op names.
    pub names: Vec<String>,
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
            host_ops: OnceLock::new(),
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

    /// Builds the shared analyses now (device timeline, steps, op profile, anatomy, HLO modules),
    /// instead of on first use. Errors are kept and reported by the accessors.
    pub fn prepare(&self) {
        // The device timeline first, on every worker (its cores run in parallel): an analysis
        // that waited for it inside a parallel branch would hold a worker idle.
        let _ = self.device_timeline();
        // Then independent analyses in parallel: the HLO modules and the op profile (which joins
        // them on CPU profiles), the steps, and the host-run ops; the anatomy needs both.
        rayon::join(
            || {
                let _ = self.modules();
                let _ = self.op_profile();
            },
            || {
                rayon::join(
                    || {
                        let _ = self.steps();
                    },
                    || {
                        if self.space.tpu_tensor_cores().is_empty() {
                            let _ = self.host_ops();
                        }
                    },
                )
            },
        );
        let _ = self.anatomy();
        let _ = self.chip();
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
    pub fn device_timeline(&self) -> Result<&DeviceTimeline, &str> {
        self.timeline
            .get_or_init(|| DeviceTimeline::build(&self.space).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// The steps (device steps on TPU, host markers otherwise).
    pub fn steps(&self) -> Result<&Steps, &str> {
        self.steps
            .get_or_init(|| {
                let timeline = self.device_timeline().map_err(str::to_owned)?;
                Steps::from_timeline(&self.space, timeline).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// The mean step time in ms, when there are steps.
    pub fn step_ms(&self) -> Option<f64> {
        self.steps().ok()?.stats().map(|s| s.mean_ms)
    }

    /// The op profile: TPU op lines when present, else host-thread op events joined with HLO.
    pub fn op_profile(&self) -> Result<&OpProfile, &str> {
        self.op_profile
            .get_or_init(|| {
                if self.space.tpu_tensor_cores().is_empty() {
                    OpProfile::from_host_threads(&self.space, self.modules()).map_err(|e| e.to_string())
                } else {
                    let timeline = self.device_timeline().map_err(str::to_owned)?;
                    Ok(OpProfile::from_timeline(&self.space, timeline))
                }
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// The anatomy of every step.
    pub fn anatomy(&self) -> Result<&[StepAnatomy], &str> {
        self.anatomy
            .get_or_init(|| {
                let steps = self.steps().map_err(str::to_owned)?;
                if self.space.tpu_tensor_cores().is_empty() {
                    let profile = self.op_profile().map_err(str::to_owned)?;
                    xlens_roofline::host_anatomy(&self.space, steps, profile).map_err(|e| e.to_string())
                } else {
                    Ok(anatomy_from_timeline(self.device_timeline().map_err(str::to_owned)?))
                }
            })
            .as_ref()
            .map(Vec::as_slice)
            .map_err(|e| e.as_str())
    }

    /// Every `hlo_op` event of the host threads (empty on profiles without them), read once and
    /// shared by the detectors that look at host-run ops.
    pub fn host_ops(&self) -> &HostOps {
        self.host_ops.get_or_init(|| read_host_ops(&self.space))
    }

    /// The chip: peaks from the profile's capability stats, else the catalogue; `None` on CPU.
    pub fn chip(&self) -> Option<&Chip> {
        self.chip.get_or_init(|| Chip::from_space(&self.space).ok()).as_ref()
    }

    /// True when the profile provides what a detector needs.
    pub fn has(&self, need: Need) -> bool {
        match need {
            Need::DeviceTimeline => !self.space.analysis_devices().is_empty(),
            Need::HostTimeline => self.space.host_threads().is_some_and(|p| !p.lines().is_empty()),
            Need::OpTimeline => self.op_profile().is_ok_and(|p| !p.ops.is_empty()),
            Need::Steps => self.steps().is_ok_and(|s| !s.steps.is_empty()),
            Need::Hlo => !self.modules().is_empty(),
            Need::DevicePeaks => self.chip().is_some(),
            Need::Memory => {
                self.chip().and_then(|c| c.hbm_capacity()).is_some()
                    && self.modules().iter().any(|m| m.buffer_assignment().is_some())
            }
            Need::MultiCore => self.summary.device_cores > 1,
        }
    }
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

fn read_host_ops(space: &Space) -> HostOps {
    use std::collections::HashMap;
    use xlens_xplane::names::stat;
    let mut out = HostOps::default();
    let Some(plane) = space.host_threads() else { return out };
    let Some(hlo_op) = plane.stat_id(stat::HLO_OP) else { return out };
    let (program, run, ordinal) =
        (plane.stat_id(stat::PROGRAM_ID), plane.stat_id(stat::RUN_ID), plane.stat_id(stat::DEVICE_ORDINAL));
    let mut interned: HashMap<String, u32> = HashMap::new();
    for line in plane.lines() {
        for ev in line.events(plane).map_while(|e| e.ok()) {
            if !ev.has_stats() {
                continue;
            }
            let (mut name, mut program_id, mut run_id, mut core) = (None, None, None, 0);
            for s in ev.stats().map_while(|s| s.ok()) {
                let id = Some(s.metadata_id());
                if id == Some(hlo_op) {
                    name = s.as_str();
                } else if id == program {
                    program_id = s.as_u64();
                } else if id == run {
                    run_id = s.as_i64();
                } else if id == ordinal {
                    core = s.as_i64().unwrap_or(0);
                }
            }
            let Some(name) = name else { continue };
            let n = interned.len() as u32;
            let index = *interned.entry(name.into_owned()).or_insert(n);
            out.ops.push(HostOp {
                start: ev.start(),
                end: ev.end(),
                name: index,
                program_id,
                run_id,
                core,
                line: line.index() as u32,
            });
        }
    }
    out.names = vec![String::new(); interned.len()];
    for (name, i) in interned {
        out.names[i as usize] = name;
    }
    out
}
