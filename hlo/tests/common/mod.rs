//! Helpers shared by the integration tests: fixture discovery and an independent reader of the
//! optimized HLO text JAX printed for each committed program.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use xlens_hlo::{Module, modules_from_space};

/// The repository's `testdata/` directory.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata")
}

/// Every committed real profile directory (`testdata/corpus/*`, `testdata/real/*`).
pub fn profile_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for group in ["corpus", "real"] {
        let Ok(entries) = std::fs::read_dir(testdata().join(group)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.join("vm.xplane.pb").is_file() {
                dirs.push(path);
            }
        }
    }
    dirs.sort();
    dirs
}

/// Decodes every module of a profile directory; panics on warnings.
pub fn modules(dir: &Path) -> Vec<Module> {
    let session = xlens_source::open_session(&xlens_source::Location::from(dir)).expect("profile opens");
    let (modules, warnings) = modules_from_space(session.hosts()[0].space());
    assert!(warnings.is_empty(), "{}: {warnings:?}", dir.display());
    modules
}

/// One optimized-HLO text fixture.
#[derive(Debug)]
pub struct HloText {
    /// The text file.
    pub path: PathBuf,
    /// The jitted function's name (`train_step`, `train_step_b5`, `layer`, ...).
    pub function: String,
    /// The full text.
    pub text: String,
}

/// The optimized HLO texts stored with a profile (`hlo/*.optimized.hlo.txt[.gz]`).
pub fn hlo_texts(dir: &Path) -> Vec<HloText> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("hlo")) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".optimized.hlo.txt.gz").or_else(|| file.strip_suffix(".optimized.hlo.txt"))
        else {
            continue;
        };
        // Corpus files are `<trace>__<function>`, real ones `<function>`.
        let function = stem.rsplit("__").next().unwrap().to_owned();
        let raw = std::fs::read(&path).unwrap();
        let text = if file.ends_with(".gz") {
            let mut s = String::new();
            flate2::read::GzDecoder::new(raw.as_slice()).read_to_string(&mut s).unwrap();
            s
        } else {
            String::from_utf8(raw).unwrap()
        };
        out.push(HloText { path, function, text });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

impl HloText {
    /// The module name in the `HloModule <name>, ...` header.
    pub fn module_name(&self) -> &str {
        let first = self.text.lines().next().unwrap();
        let rest = first.strip_prefix("HloModule ").unwrap();
        rest.split([',', ' ']).next().unwrap()
    }

    /// The header's `entry_computation_layout`, without XLA's `/*index=N*/` comments.
    pub fn entry_layout(&self) -> String {
        let first = self.text.lines().next().unwrap();
        let start = first.find("entry_computation_layout={").unwrap() + "entry_computation_layout={".len();
        let mut depth = 1;
        let mut end = start;
        for (i, c) in first[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = start + i;
                break;
            }
        }
        strip_comments(&first[start..end])
    }

    /// Instruction counts per opcode over every computation, read from the text.
    pub fn opcode_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for line in self.text.lines() {
            if let Some(op) = instruction_opcode(line) {
                *counts.entry(op).or_default() += 1;
            }
        }
        counts
    }

    /// The instruction lines `(name, opcode, rest)`.
    pub fn instructions(&self) -> Vec<(String, String, String)> {
        self.text.lines().filter_map(parse_instruction).collect()
    }
}

/// Removes `/*...*/` comments.
pub fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        match rest[i..].find("*/") {
            Some(j) => rest = &rest[i + j + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

fn instruction_opcode(line: &str) -> Option<String> {
    parse_instruction(line).map(|(_, op, _)| op)
}

/// `  [ROOT ]name = shape opcode(operands), attrs` → `(name, opcode, after the opcode)`.
fn parse_instruction(line: &str) -> Option<(String, String, String)> {
    if !line.starts_with(' ') {
        return None;
    }
    let line = line.trim_start();
    let line = line.strip_prefix("ROOT ").unwrap_or(line);
    let eq = line.find(" = ")?;
    let name = line[..eq].trim_start_matches('%');
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || "._-".contains(c)) {
        return None;
    }
    let rest = &line[eq + 3..];
    // Skip the shape: a parenthesized tuple, or up to the first space outside brackets.
    let bytes = rest.as_bytes();
    let mut i = 0;
    let mut depth = 0i32;
    if bytes.first() == Some(&b'(') {
        while i < bytes.len() {
            match bytes[i] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    } else {
        while i < bytes.len() {
            match bytes[i] {
                b'[' | b'{' => depth += 1,
                b']' | b'}' => depth -= 1,
                b' ' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
    }
    let rest = rest[i..].trim_start();
    let paren = rest.find('(')?;
    let opcode = &rest[..paren];
    if opcode.is_empty() || !opcode.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return None;
    }
    Some((name.to_owned(), opcode.to_owned(), rest[paren..].to_owned()))
}

/// The reference numbers stored with a fixture for one jitted function: XLA's
/// `compile().cost_analysis()` and `memory_analysis()`.
#[derive(Debug, Default)]
pub struct XlaReference {
    /// `cost_analysis()["flops"]`.
    pub flops: f64,
    /// `cost_analysis()["transcendentals"]` (0 when absent).
    pub transcendentals: f64,
    /// `cost_analysis()["bytes accessed"]`.
    pub bytes_accessed: f64,
    /// `memory_analysis()` fields, when stored.
    pub memory: Option<serde_json::Value>,
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// XLA's numbers for `function` in a fixture: `hlo/<function>.cost_analysis.json` when present,
/// else the ground truth's `optimized_hlo.<function>`.
pub fn xla_reference(dir: &Path, function: &str) -> Option<XlaReference> {
    let gt = read_json(&dir.join("ground_truth.json"))?;
    let optimized = gt.get("optimized_hlo").or_else(|| gt["ground_truth"].get("optimized_hlo"))?;
    let entry = &optimized[function];
    let cost = read_json(&dir.join("hlo").join(format!("{function}.cost_analysis.json")))
        .map(|v| v["cost_analysis"].clone())
        .unwrap_or_else(|| entry["cost_analysis"].clone());
    Some(XlaReference {
        flops: cost["flops"].as_f64()?,
        transcendentals: cost["transcendentals"].as_f64().unwrap_or(0.0),
        bytes_accessed: cost["bytes accessed"].as_f64()?,
        memory: entry.get("memory_analysis").cloned(),
    })
}

/// Parsed `output` of an XProf reference file, when present.
pub fn xprof_output(dir: &Path, command: &str) -> Option<serde_json::Value> {
    let mut doc = read_json(&dir.join("xprof").join(format!("{command}.json")))?;
    Some(doc["output"].take())
}

/// The profile module the text was printed for: same name and entry computation layout.
pub fn module_for_text<'m>(modules: &'m [Module], text: &HloText) -> Option<&'m Module> {
    let layout = text.entry_layout();
    modules.iter().find(|m| m.name() == text.module_name() && m.entry_computation_layout() == layout)
}
