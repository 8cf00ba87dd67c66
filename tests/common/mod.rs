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

/// The unit family of a metric unit: `ms` and `us` are both a time, `%` and `% of step` both a
/// share; any other unit (`bytes`, `count`, `ratio`, `x`, ...) is its own family.
pub(crate) fn unit_family(unit: &str) -> &str {
    match unit {
        "ms" | "us" => "time",
        u if u.starts_with('%') => "percent",
        other => other,
    }
}

/// Checks the metric keys of `findings` (found on `profile`): each a non-empty snake_case name
/// (`^[a-z][a-z0-9_]*$`), unique within its finding, and a given detector's key always in the
/// same unit family, here and in the findings seen before (`units`: (detector, key) -> family).
/// Returns the problems found.
pub(crate) fn metric_key_problems(
    profile: &str,
    findings: &[xlens::faults::Finding],
    units: &mut std::collections::BTreeMap<(String, String), (String, String)>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for f in findings {
        let mut seen = std::collections::BTreeSet::new();
        for e in &f.evidence {
            let xlens::faults::Evidence::Metric { key, name, unit, .. } = e else { continue };
            let mut chars = key.chars();
            let snake = chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !snake {
                problems.push(format!("{profile}: {} metric {name:?} has key {key:?}, not snake_case", f.id));
            }
            if !seen.insert(key.to_string()) {
                problems.push(format!("{profile}: {} has key {key:?} twice", f.id));
            }
            let family = unit_family(unit).to_owned();
            let first = units.entry((f.id.clone(), key.to_string())).or_insert((family.clone(), profile.to_owned()));
            if first.0 != family {
                problems.push(format!(
                    "{profile}: {} key {key:?} is in {unit:?} ({family}), but in {} on {}",
                    f.id, first.0, first.1
                ));
            }
        }
    }
    problems
}

/// Every `*.parquet` file under `dir`, recursively, sorted (none where `dir` cannot be read).
pub(crate) fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten().map(|e| e.path()) {
            if e.is_dir() {
                stack.push(e);
            } else if e.extension().is_some_and(|x| x == "parquet") {
                out.push(e);
            }
        }
    }
    out.sort();
    out
}

/// A logdir in the temp dir named after `name` (emptied first) with one run per
/// `(run, corpus profile)`: the profile's host files under `plugins/profile/<run>/`.
pub(crate) fn logdir_of(name: &str, runs: &[(&str, &str)]) -> std::path::PathBuf {
    let logdir = std::env::temp_dir().join(format!("xlens-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logdir);
    for (run, from) in runs {
        add_run(&logdir, run, from);
    }
    logdir
}

/// Adds run `run` to `logdir` with the host files of `testdata/corpus/<from>`.
pub(crate) fn add_run(logdir: &std::path::Path, run: &str, from: &str) {
    let dir = logdir.join("plugins/profile").join(run);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(root().join("testdata/corpus").join(from)).unwrap().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".xplane.pb") {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
}

/// XProf's `output` of `command` on every testdata profile that has its reference
/// (`testdata/<group>/<profile>/xprof/<command>.json`, run with no flag), by profile path;
/// `require_ok`: every reference must be a run of XProf that succeeded (exit status 0).
pub(crate) fn xprof_references(command: &str, require_ok: bool) -> Vec<(PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    for group in std::fs::read_dir(root().join("testdata")).unwrap().flatten() {
        let Ok(profiles) = std::fs::read_dir(group.path()) else { continue };
        for profile in profiles.flatten() {
            let file = profile.path().join("xprof").join(format!("{command}.json"));
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            if require_ok {
                assert_eq!(doc["rc"], 0, "{}", file.display());
            }
            assert_eq!(
                doc["argv"].as_array().unwrap().len(),
                3,
                "{}: flags this test does not translate",
                file.display()
            );
            out.push((profile.path(), doc["output"].take()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every XProf run of testdata whose reference name starts with `prefix`
/// (`testdata/<group>/<profile>/xprof/<prefix>*.json`): the profile's path, the reference's path
/// and the whole record (`argv`, `rc`, `output` or `stdout_text`), by profile then name; for
/// tests that replay XProf's argv.
pub(crate) fn xprof_runs(prefix: &str) -> Vec<(PathBuf, PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
    for group in std::fs::read_dir(root().join("testdata")).unwrap().flatten() {
        let Ok(profiles) = std::fs::read_dir(group.path()) else { continue };
        for profile in profiles.flatten() {
            let Ok(refs) = std::fs::read_dir(profile.path().join("xprof")) else { continue };
            for r in refs.flatten() {
                let name = r.file_name().to_string_lossy().into_owned();
                if name.starts_with(prefix) && name.ends_with(".json") {
                    let doc = serde_json::from_str(&std::fs::read_to_string(r.path()).unwrap()).unwrap();
                    out.push((profile.path(), r.path(), doc));
                }
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

/// The value of `--name=` in an XProf argv.
pub(crate) fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    argv.iter().find_map(|a| a.strip_prefix(&format!("--{name}=")))
}
