//! What the facade's integration tests share: the repository root and golden files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `actual` with the file at `path` (relative to the root), or rewrites the file when
/// `XLENS_BLESS` is set.
pub(crate) fn golden_at(path: &Path, actual: &str) {
    let path = root().join(path);
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with XLENS_BLESS=1 to create it)", path.display()));
    assert_eq!(actual, expected, "{} differs (XLENS_BLESS=1 rewrites it)", path.display());
}

/// [`golden_at`] for `tests/golden/<name>`.
pub(crate) fn check(name: &str, actual: &str) {
    golden_at(&Path::new("tests/golden").join(name), actual);
}
