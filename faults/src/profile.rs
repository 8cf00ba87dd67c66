//! What a detector needs of a host ([`Need`], checked by [`HostNeeds::has`]) and the step
//! selection of a scan ([`select_steps`]); the shared analyses themselves are
//! [`xlens_roofline::HostProfile`]'s.

use xlens_roofline::Steps;
use xlens_xplane::{Error, Space};

pub use xlens_roofline::{HostProfile, Profile, StepMedians};

/// What a detector reads. A detector whose inputs the profile lacks is skipped, with the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Need {
    /// Device op lines (TPU `XLA Ops`).
    DeviceTimeline,
    /// Host threads (`/host:CPU`).
    HostTimeline,
    /// Op events of any kind: device op lines, or host-thread op events (CPU).
    OpTimeline,
    /// Step markers (device or host).
    Steps,
    /// At least one HLO module.
    Hlo,
    /// Device peak FLOP/s and bandwidth (profile stats or the chip catalogue).
    DevicePeaks,
    /// A memory view: HLO buffer assignment or allocator events, and a capacity.
    Memory,
    /// Several hosts or cores to compare.
    MultiCore,
    /// GPU stream lines (`/device:GPU:N` planes with kernels or copies).
    GpuStreams,
}

impl Need {
    /// What is missing when this need is not met, for the skip reason.
    pub fn missing(self) -> &'static str {
        match self {
            Need::DeviceTimeline => "the profile has no device op lines (TPU XLA Ops)",
            Need::HostTimeline => "the profile has no host threads (/host:CPU)",
            Need::OpTimeline => "the profile has no op events (device op lines or host hlo_op events)",
            Need::Steps => "the profile has no step markers",
            Need::Hlo => "the profile carries no HLO module",
            Need::DevicePeaks => "the profile reports no device peak FLOP/s or bandwidth (CPU capture)",
            Need::Memory => "the profile has no memory view with a known capacity",
            Need::MultiCore => "the profile has a single core on a single host",
            Need::GpuStreams => "the profile has no GPU streams (a GPU-only check)",
        }
    }
}

/// [`Need`]s checked against a host's analyses (a trait, since [`HostProfile`] lives in
/// `xlens-roofline`).
pub trait HostNeeds {
    /// True when the profile provides what a detector needs.
    fn has(&self, need: Need) -> bool;
}

impl HostNeeds for HostProfile {
    fn has(&self, need: Need) -> bool {
        match need {
            Need::DeviceTimeline => !self.space().analysis_devices().is_empty(),
            Need::HostTimeline => self.space().host_threads().is_some_and(|p| !p.lines().is_empty()),
            Need::OpTimeline => self.op_profile().is_ok_and(|p| !p.ops.is_empty()),
            Need::Steps => self.steps().is_ok_and(|s| !s.steps.is_empty()),
            Need::Hlo => !self.modules().is_empty(),
            Need::DevicePeaks => self.chip().is_some(),
            Need::Memory => {
                self.chip().and_then(|c| c.hbm_capacity()).is_some()
                    && self.modules().iter().any(|m| m.buffer_assignment().is_some())
            }
            Need::MultiCore => self.summary().device_cores > 1,
            Need::GpuStreams => {
                self.space().tpu_tensor_cores().is_empty()
                    && self.host_ops().source == xlens_roofline::OpSource::GpuStreams
                    && !self.host_ops().is_empty()
            }
        }
    }
}

/// The host cut to the steps of `range` (see [`crate::StepRange`]): from the start of its first
/// step in the range to the end of its last. A host with no step in the range is an error that
/// names the steps it has; `file` goes into the error's location.
pub fn select_steps(space: &Space, range: crate::StepRange, file: Option<&std::path::Path>) -> Result<Space, Error> {
    let steps = Steps::from_space(space)?;
    let chosen: Vec<_> = steps.steps.iter().filter(|s| range.contains(s.number)).collect();
    let (Some(start), Some(end)) = (chosen.iter().map(|s| s.start).min(), chosen.iter().map(|s| s.end()).max()) else {
        let have = match (steps.steps.first(), steps.steps.last()) {
            (Some(a), Some(b)) => format!("it has steps {}..{}", a.number, b.number),
            _ => "it has no steps".to_owned(),
        };
        return Err(Error::selection(format!("no step in {range}: {have}"), file));
    };
    space.window(start, end)
}
