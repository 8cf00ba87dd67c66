//! The step vocabulary below the walks that find steps: where steps come from ([`StepSource`]),
//! what one core did in a step ([`CoreStepBreakdown`]) and which host events mark steps
//! ([`is_host_step_marker`]). The device timeline and the host-op read use it, and `steps`,
//! which builds the steps from both, sits above them.

use xlens_xplane::{Picos, names};

/// Where the steps came from: the time base every per-step figure is relative to.
///
/// XProf's order (facts §3.1): device steps when the profile has them, else host step markers;
/// profiles without either (inference and serving, micro-benchmarks, device-only snapshots) are
/// cut into program executions (`XLA Modules` events on TPU; on GPU and CPU the executions the
/// op events show), and failing those the whole captured device window is one "step".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StepSource {
    /// Device `Steps` lines (TPU, or the derived `Steps` line of a GPU plane).
    DeviceSteps,
    /// Host step markers (`train`, `test`, `TraceContext` roots).
    HostMarkers,
    /// Program executions: `XLA Modules` events on TPU; runs of one program's ops (one
    /// `run_id` on CPU, consecutive kernels of one program on GPU) elsewhere.
    ModuleExecutions,
    /// The whole captured device window: from the first op to the last, one "step".
    DeviceWindow,
    /// No op events at all.
    None,
}

impl StepSource {
    /// The unit a per-step figure is per: `step`, `module execution` or `device window`
    /// (`step` also for [`StepSource::None`]).
    pub fn unit(self) -> &'static str {
        match self {
            StepSource::DeviceSteps | StepSource::HostMarkers | StepSource::None => "step",
            StepSource::ModuleExecutions => "module execution",
            StepSource::DeviceWindow => "device window",
        }
    }

    /// A stable key for reports: `steps`, `module_executions`, `device_window` or `none`.
    pub fn key(self) -> &'static str {
        match self {
            StepSource::DeviceSteps | StepSource::HostMarkers => "steps",
            StepSource::ModuleExecutions => "module_executions",
            StepSource::DeviceWindow => "device_window",
            StepSource::None => "none",
        }
    }

    /// True when the profile marks its own steps (device or host markers).
    pub fn is_marked(self) -> bool {
        matches!(self, StepSource::DeviceSteps | StepSource::HostMarkers)
    }
}

/// Category self times of one core in one step (XProf's TPU step breakdown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreStepBreakdown {
    /// `infeed` ops.
    pub infeed: Picos,
    /// `outfeed` ops.
    pub outfeed: Picos,
    /// all-reduce, all-reduce fusion and all-to-all ops (XProf's "crs").
    pub all_reduce: Picos,
    /// `send` and `send-done`.
    pub send: Picos,
    /// `recv` and `recv-done`.
    pub recv: Picos,
    /// Host send and receive ops (with their done ops).
    pub host_transfer: Picos,
    /// `megacore fusion` ops (waiting for the other core).
    pub megacore: Picos,
    /// Convolutions and output fusions (the MXU-heavy categories).
    pub high_flops_compute: Picos,
    /// Every other op's self time.
    pub other_compute: Picos,
    /// Step time no op accounts for.
    pub idle: Picos,
}

impl CoreStepBreakdown {
    /// Self time of every op in the step.
    pub fn busy(&self) -> Picos {
        self.infeed
            + self.outfeed
            + self.all_reduce
            + self.send
            + self.recv
            + self.host_transfer
            + self.megacore
            + self.high_flops_compute
            + self.other_compute
    }

    /// Time the core waited on the host: infeed, outfeed, host transfers and idle.
    pub fn wait_for_host(&self) -> Picos {
        self.infeed + self.outfeed + self.host_transfer + self.idle
    }
}

/// True for host step-marker names: starting with `train`, `test` or `TraceContext`, no `/`.
pub fn is_host_step_marker(name: &str) -> bool {
    (name.starts_with("train") || name.starts_with("test") || name.starts_with(names::event::TRACE_CONTEXT))
        && !name.contains('/')
}
