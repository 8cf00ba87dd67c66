//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

/// The repository's `testdata/` directory.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// Every committed real trace directory that has XProf reference output: `testdata/corpus/*`
/// (copied from the shared corpus) and `testdata/real/*` (captured by `scripts/capture/`).
pub fn real_trace_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for group in ["corpus", "real"] {
        let Ok(entries) = std::fs::read_dir(testdata().join(group)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("xprof/list_xplane_lines.json").is_file() {
                dirs.push(path);
            }
        }
    }
    dirs.sort();
    dirs
}

/// Parsed `output` of an XProf reference file.
pub fn xprof_output(dir: &Path, command: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("xprof").join(format!("{command}.json"))).expect("reference file");
    let mut doc: serde_json::Value = serde_json::from_str(&text).expect("reference json");
    doc["output"].take()
}
