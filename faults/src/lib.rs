//! Fault detection over XProf profiles: independent detectors, a registry, and a scan that turns
//! a profile into a [`Report`] with a status, a health snapshot and prioritised findings.
//!
//! Every finding says what is happening, shows the evidence (numbers, timeline events, HLO
//! instructions with their JAX source line), estimates the impact in ms per step and % of the
//! step, and says what to do. Detectors run in parallel over a shared, read-only [`Profile`] whose
//! analyses (HLO modules, steps, op profile, step anatomy, chip) are built once on first use; a
//! detector whose inputs the profile lacks is reported as skipped, with the reason.
//!
//! ```
//! use xlens_faults::{Profile, ScanConfig, Status, scan};
//! use xlens_xplane::Session;
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/corpus/recompilation");
//! let profile = Profile::from_session(xlens_testkit::open_session(dir)?);
//! let report = scan(&profile, &ScanConfig::default());
//! assert_eq!(report.status, Status::NeedsAttention);
//! assert!(report.findings.iter().any(|f| f.id == "recompilation"));
//! assert!(report.summary.starts_with("NEEDS_ATTENTION"));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub mod comparison;
pub mod config;
mod detector;
mod detectors;
mod evidence;
mod finding;
mod profile;
mod registry;
mod report;
mod scan;
mod units;

#[cfg(test)]
pub(crate) mod testing;

pub use config::{ScanConfig, StatusThresholds, StepRange, Thresholds};
pub use detector::{AnyDetector, Detector, DetectorDoc, DetectorMeta, Need, Skip};
pub use finding::{
    Evidence, Finding, Findings, FixLines, HostImpact, Impact, SESSION_HOST, Scope, Severity, fmt_value,
};
pub use profile::{HostNeeds, HostProfile, Profile, StepMedians, select_steps};
pub use registry::{DETECTORS, catalogue_markdown, detector};
pub use report::{
    ANATOMY_CLASSES, Charts, HostRow, HostSummary, KERNEL_ROWS, KernelChart, MEMORY_ROWS, MemoryChart, Metrics,
    ProfileInfo, ProgramMemory, Report, Roof, RooflineDot, Skipped, SkippedHost, SlowOp, Status, StepBar, StepSeries,
    TopOp, host_metrics,
};
pub use scan::{
    HostOutcome, ScanObserver, combine, scan, scan_host, scan_host_observed, scan_session, scan_session_observed,
    sort_findings,
};
pub use units::{Phrase, TimeBase, TimeUnit};
pub use xlens_roofline::{HostOp, HostOps, OpContext};

// The README's example, run as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
