//! Test helpers shared by the renderers' tests (compiled for tests only).

use std::path::{Path, PathBuf};

use xlens_faults::{Profile, Report, ScanConfig, scan};

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
