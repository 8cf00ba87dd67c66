//! Test helpers shared by the detector tests (compiled for tests only).

use std::path::{Path, PathBuf};

use crate::config::ScanConfig;
use crate::finding::{Evidence, Finding};
use crate::profile::Profile;
use crate::report::Report;
use crate::scan::scan;

/// A path under the repository's `testdata/`.
pub(crate) fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

/// Scans a profile directory with one detector only.
pub(crate) fn report_of(id: &str, dir: &Path) -> Report {
    let session = xlens_testkit::open_session(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let profile = Profile::from_session(session);
    scan(&profile, &ScanConfig::only(id))
}

/// The findings of one detector on a profile directory; panics if the detector was skipped.
pub(crate) fn run_on(id: &str, dir: &Path) -> Vec<Finding> {
    let report = report_of(id, dir);
    assert!(report.skipped.is_empty(), "{id} was skipped on {}: {:?}", dir.display(), report.skipped);
    report.findings
}

/// The value of the metric evidence `name` of a finding; panics, showing the finding, when it
/// has none.
pub(crate) fn metric(f: &Finding, name: &str) -> f64 {
    f.evidence
        .iter()
        .find_map(|e| match e {
            Evidence::Metric { name: n, value, .. } if n == name => Some(*value),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no metric {name}: {f:#?}"))
}
