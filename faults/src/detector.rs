//! The `Detector` trait: one fault, one unit struct, one file under `detectors/`.

use crate::config::ScanConfig;
use crate::finding::{Evidence, Finding, Findings, Impact, Scope, Severity};
use crate::profile::HostProfile;
pub use crate::profile::Need;
use crate::report::HostSummary;

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
    /// A skip with a reason (a message, or the error that stopped the detector).
    pub fn because(reason: impl std::fmt::Display) -> Skip {
        Skip(reason.to_string())
    }
}

/// One fault detector.
///
/// Implementations are unit structs listed once in [`crate::registry::DETECTORS`]. `run` reads
/// one host's [`HostProfile`] (its analyses are built once and shared); `run_session` sees every
/// host's [`HostSummary`], for cross-host checks. Neither may panic or fail on odd-but-decodable data:
/// they report nothing, or [`Skip`] with a reason.
///
/// A finding's text is final when the detector builds it: prose about the time base ("per step",
/// "of the step") goes through [`crate::TimeBase::of`] the host, so that a profile without step
/// markers reads "per module execution"; the scan does not rewrite it.
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

// The constructor lives beside the trait it reads, so that `finding` does not depend on it.
impl Finding {
    /// A finding of `detector` (its id, title and fix), on the host being scanned: the scan
    /// fills in the host.
    pub fn new(
        detector: &(impl Detector + ?Sized),
        severity: Severity,
        what: String,
        evidence: Vec<Evidence>,
        impact: Impact,
    ) -> Finding {
        Finding {
            id: detector.id().to_owned(),
            severity,
            title: detector.title().to_owned(),
            what,
            evidence,
            impact,
            fix: detector.doc().fix.to_owned(),
            host: String::new(),
            scope: Scope::Host,
            hosts: Vec::new(),
            variant: String::new(),
        }
    }
}
