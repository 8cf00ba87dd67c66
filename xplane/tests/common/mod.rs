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

/// Appends a protobuf varint.
pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-delimited field (hand-made protobuf, for layouts prost does not write).
pub fn len_field(out: &mut Vec<u8>, field: u32, payload: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a varint field.
pub fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, v);
}
