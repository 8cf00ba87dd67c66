//! Helpers shared by the roofline integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository's `testdata/` directory.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// The TPU-shaped fixtures with XProf's analysis (`testdata/tpu/*`).
pub fn tpu_fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(testdata().join("tpu"))
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.join("xprof/tool_op_profile.json").is_file()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// A JSON file under the fixture's `xprof/` folder.
pub fn xprof_json(dir: &Path, file: &str) -> Value {
    let text = std::fs::read_to_string(dir.join("xprof").join(file)).expect("reference file");
    serde_json::from_str(&text).expect("reference json")
}

/// The rows of a Google-charts style table (`{"cols":[{"id"}],"rows":[{"c":[{"v"}]}]}`) as maps.
pub fn table_rows(table: &Value) -> Vec<serde_json::Map<String, Value>> {
    let cols: Vec<String> =
        table["cols"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect();
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            cols.iter()
                .zip(r["c"].as_array().unwrap())
                .map(|(k, c)| (k.clone(), if c.is_null() { Value::Null } else { c["v"].clone() }))
                .collect()
        })
        .collect()
}

/// Relative closeness.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}
