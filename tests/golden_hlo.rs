//! Golden tests of what the `hlo_ops` example prints: the same library functions, checked
//! against files in `tests/golden/` (prefix `hlo_`). Set `XLENS_BLESS=1` to rewrite them after
//! an intended change.

use std::path::PathBuf;

use xlens::hlo::modules_from_session;
use xlens::render::hlo::{hlo_ops_json, hlo_ops_text};
use xlens::xplane::Session;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `actual` with the golden file, or rewrites it when blessing.
fn check(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("XLENS_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with XLENS_BLESS=1 to create it)", path.display()));
    assert_eq!(actual, expected, "{} differs (XLENS_BLESS=1 rewrites it)", path.display());
}

fn modules(trace: &str) -> Vec<xlens::hlo::Module> {
    let session = Session::open(&root().join("testdata").join(trace)).unwrap();
    let (modules, warnings) = modules_from_session(&session);
    assert!(warnings.is_empty(), "{warnings:?}");
    modules
}

#[test]
fn hlo_ops_outputs() {
    let sharded = modules("real/sharded_donation");
    check("hlo_ops_sharded_donation.json", &(serde_json::to_string_pretty(&hlo_ops_json(&sharded)).unwrap() + "\n"));
    check("hlo_ops_sharded_donation.txt", &hlo_ops_text(&sharded));
    let permutes = modules("corpus/sharded_collectives_baseline");
    check("hlo_ops_sharded_collectives_baseline.txt", &hlo_ops_text(&permutes));
}

#[test]
fn hlo_ops_json_has_the_documented_fields() {
    let doc = hlo_ops_json(&modules("real/sharded_donation"));
    let main = doc["modules"].as_array().unwrap().iter().find(|m| m["name"] == "jit_train_step(8)").unwrap();
    assert_eq!(main["program_id"], 8);
    assert_eq!((main["computations"].as_u64(), main["instructions"].as_u64()), (Some(57), Some(313)));
    assert_eq!(main["opcodes"]["dot"], 17);
    assert_eq!(main["opcodes"]["all-gather"], 6);
    assert_eq!(main["aliased_params"], serde_json::json!([0, 1, 2, 3, 4, 5]));
    assert_eq!(main["collectives"], 15);
    assert_eq!(main["entry_bytes_accessed"], 27_066_648);
}

#[test]
fn hlo_ops_output_is_identical_from_run_to_run() {
    let a = hlo_ops_json(&modules("corpus/clean"));
    let b = hlo_ops_json(&modules("corpus/clean"));
    assert_eq!(a, b);
}
