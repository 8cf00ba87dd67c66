//! The `Detector` trait: one fault, one unit struct, one file under `detectors/`.

use crate::config::ScanConfig;
use crate::finding::{Evidence, Finding, Findings, FixLines, Impact, Scope, Severity};
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
    /// The usual fix, framework-neutral: what to change, in words any framework's user reads
    /// (no framework's API).
    pub fix: &'static str,
    /// The usual fix in each framework's own API, added after `fix` for a profile of that
    /// framework ([`FixLines::text`]).
    pub fix_lines: FixLines,
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

/// What a detector is, fixed at compile time: its id, title, default severity, the analyses it
/// reads and its documentation (the catalogue, `docs/detectors.md`, is generated from these).
#[derive(Clone, Copy, Debug)]
pub struct DetectorMeta {
    /// Stable id, snake_case (`exposed_collective`). Users and tests key on it.
    pub id: &'static str,
    /// Short title.
    pub title: &'static str,
    /// Default severity of its findings (a finding may raise or lower it with the impact).
    pub severity: Severity,
    /// What it reads.
    pub needs: &'static [Need],
    /// Its documentation.
    pub doc: DetectorDoc,
}

/// One fault detector: its metadata as one associated constant, and its checks.
///
/// Implementations are unit structs listed once in [`crate::registry::DETECTORS`] (as
/// [`AnyDetector`], the object-safe view every `Detector` has). `run` reads one host's
/// [`HostProfile`] (its analyses are built once and shared); `run_session` sees every host's
/// [`HostSummary`], for cross-host checks. Neither may panic or fail on odd-but-decodable data:
/// they report nothing, or [`Skip`] with a reason.
///
/// A finding's text is final when the detector builds it: prose about the time base ("per step",
/// "of the step") goes through [`crate::TimeBase::of`] the host, so that a profile without step
/// markers reads "per module execution"; the scan does not rewrite it.
pub trait Detector: Sync {
    /// Its id, title, severity, needs and documentation.
    const META: DetectorMeta;
    /// Looks at one host.
    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip>;
    /// Looks at the whole session after every host ran, through the hosts' summaries (hosts
    /// are streamed: their profiles are gone by then). Default: nothing.
    fn run_session(&self, _hosts: &[HostSummary], _config: &ScanConfig, _out: &mut Findings) -> Result<(), Skip> {
        Ok(())
    }
}

/// A [`Detector`] as the registry holds it: the same detector behind `dyn` (a trait with an
/// associated constant cannot be a trait object), its metadata read through [`AnyDetector::meta`].
/// Every `Detector` is one; nothing else implements it.
pub trait AnyDetector: Sync {
    /// The detector's [`Detector::META`].
    fn meta(&self) -> &'static DetectorMeta;
    /// Looks at one host ([`Detector::run`]).
    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip>;
    /// Looks at the whole session ([`Detector::run_session`]).
    fn run_session(&self, hosts: &[HostSummary], config: &ScanConfig, out: &mut Findings) -> Result<(), Skip>;

    /// Stable id, snake_case.
    fn id(&self) -> &'static str {
        self.meta().id
    }
    /// Short title.
    fn title(&self) -> &'static str {
        self.meta().title
    }
    /// Default severity of its findings.
    fn severity(&self) -> Severity {
        self.meta().severity
    }
    /// What it reads.
    fn needs(&self) -> &'static [Need] {
        self.meta().needs
    }
    /// Its documentation.
    fn doc(&self) -> &'static DetectorDoc {
        &self.meta().doc
    }
}

impl<T: Detector> AnyDetector for T {
    fn meta(&self) -> &'static DetectorMeta {
        const { &T::META }
    }

    fn run(&self, host: &HostProfile, config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        Detector::run(self, host, config, out)
    }

    fn run_session(&self, hosts: &[HostSummary], config: &ScanConfig, out: &mut Findings) -> Result<(), Skip> {
        Detector::run_session(self, hosts, config, out)
    }
}

impl std::fmt::Debug for dyn AnyDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector").field("id", &self.id()).finish()
    }
}

// The constructor lives beside the trait it reads, so that `finding` does not depend on it.
impl Finding {
    /// A finding of `detector` (its id, title and fix), on the host being scanned: the scan
    /// fills in the host, and [`Findings::push`] the fix's line for the profile's framework.
    pub fn new(
        detector: &(impl AnyDetector + ?Sized),
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
            fix_lines: Some(detector.doc().fix_lines),
        }
    }
}
