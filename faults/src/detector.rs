//! The `Detector` trait: one fault, one unit struct, one file under `detectors/`.

use crate::config::ScanConfig;
use crate::finding::{Findings, Severity};
use crate::profile::HostProfile;
use crate::scan::HostSummary;

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

/// The fixed documentation sections of a detector (the catalogue is generated from these).
#[derive(Clone, Copy, Debug)]
pub struct DetectorDoc {
    /// What it detects.
    pub detects: &'static str,
    /// Why it matters.
    pub why: &'static str,
    /// The evidence it reports.
    pub evidence: &'static str,
    /// Its thresholds, with their config names.
    pub thresholds: &'static str,
    /// The usual fix.
    pub fix: &'static str,
}

/// A detector declines to run on odd data with a reason (it is then listed as skipped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip(pub String);

impl Skip {
    /// A skip with a reason.
    pub fn because(reason: impl Into<String>) -> Skip {
        Skip(reason.into())
    }
}

/// One fault detector.
///
/// Implementations are unit structs listed once in [`crate::registry::DETECTORS`]. `run` reads
/// one host's [`HostProfile`] (its analyses are built once and shared); `run_session` sees every
/// host's [`HostSummary`], for cross-host checks. Neither may panic or fail on odd-but-decodable data:
/// they report nothing, or [`Skip`] with a reason.
pub trait Detector: Sync {
    /// Stable id, snake_case (`exposed_collective`). Users and tests key on it.
    fn id(&self) -> &'static str;
    /// Short title.
    fn title(&self) -> &'static str;
    /// Default severity of its findings (a finding may raise or lower it with the impact).
    fn severity(&self) -> Severity;
    /// What it reads.
    fn needs(&self) -> &'static [Need];
    /// Its documentation.
    fn doc(&self) -> &'static DetectorDoc;
    /// Looks at one host.
    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip>;
    /// Looks at the whole session after every host ran, through the hosts' summaries (hosts
    /// are streamed: their profiles are gone by then). Default: nothing.
    fn run_session(&self, _hosts: &[HostSummary], _config: &ScanConfig, _out: &mut Findings) -> Result<(), Skip> {
        Ok(())
    }
}

impl std::fmt::Debug for dyn Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector").field("id", &self.id()).finish()
    }
}
