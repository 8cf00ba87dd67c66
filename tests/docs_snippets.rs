//! The shell snippets of the README and `docs/*.md` run as written, so the docs cannot drift
//! from the CLI and the examples (issue 39). Each `xlens …`, `cargo run --release -- …` and
//! `cargo run --release --example NAME -- …` line runs with the debug build's binaries, its
//! placeholders (`RUN`, `path/to/logdir`, `BASE NEW`, `[--json]`, …) replaced by profiles of
//! `testdata/`, in a scratch folder; it must exit with a documented code. Lines that install,
//! build or run for minutes (`cargo test`, `pip install`, cargo-fuzz, the long campaign runs)
//! are left to the CI steps that run them, and listed here by their start.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Line starts that are not run here, and where they are checked instead.
const NOT_RUN: &[(&str, &str)] = &[
    ("cargo test", "the test command itself (.ci/run)"),
    ("cargo install", "installs into the user's cargo bin; `.ci/run` runs the packaged binary"),
    ("pip install", "`.ci/run` installs the Python package into a fresh venv"),
    ("cd fuzz", "cargo-fuzz needs a nightly toolchain; its bodies run as fuzz smoke tests"),
    ("cargo run -p xlens-fuzz", "the campaign: fuzz/tests/campaign.rs runs it on every CI run"),
    ("campaign ", "a long campaign run, reported in docs/campaign.md"),
    ("xlens capture", "needs live programs: tests/capture.rs runs `xlens capture` against real JAX ones"),
    ("xlens monitor", "needs live programs: tests/monitor.rs runs `xlens monitor` against a real JAX one"),
    ("xlens snapshot", "needs live programs: tests/snapshot.rs runs it against a real JAX one and a test service"),
    ("--", "the continuation of a line above"),
];

/// Placeholders of the docs and the testdata profiles they stand for, longest first.
const PLACEHOLDERS: &[(&str, &str)] = &[
    ("/logs/run/plugins/profile/RUN/host0421.xplane.pb", "testdata/corpus/host_callback/vm.xplane.pb"),
    ("/shared/reports/host0421.json", "host0421.json"),
    ("/shared/frames", "frames_shared"),
    ("~/.local/share/bash-completion/completions/xlens", "completions.bash"),
    ("path/to/logdir", "testdata/corpus/host_callback"),
    ("[--fail-on-regression PCT]", "--fail-on-regression 5"),
    ("[--top N]", "--top 5"),
    ("[--json]", "--json"),
    ("--size 300MB", "--size 2MB"),
    ("--hosts 8", "--hosts 2"),
    ("/tmp/synth", "synth"),
    ("/tmp/gpu", "gpu"),
    ("RUN_A", "testdata/real/barrier_in_loop_baseline"),
    ("RUN_B", "testdata/real/barrier_in_loop"),
    ("BASE NEW", "testdata/real/barrier_in_loop_baseline testdata/real/barrier_in_loop"),
    ("RUN", "testdata/corpus/host_callback"),
];

/// The shell lines of the fenced `sh`/`bash`/`shell`/`console` blocks of a Markdown file.
fn shell_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (in_block, fence) {
            (false, Some(lang)) => in_block = matches!(lang.trim(), "sh" | "bash" | "shell" | "console"),
            (true, Some(_)) => in_block = false,
            (true, None) => {
                let l = line.trim();
                if !l.is_empty() && !l.starts_with('#') {
                    out.push(l.to_owned());
                }
            }
            (false, None) => {}
        }
    }
    out
}

/// A line without its trailing comment (`  # …`).
fn without_comment(line: &str) -> &str {
    match line.find("  #") {
        Some(at) => line[..at].trim_end(),
        None => line,
    }
}

/// The program a line runs and the rest of it, or `None` for a line not run here.
fn program(line: &str, bin: &Path) -> Option<(PathBuf, String)> {
    if let Some(rest) = line.strip_prefix("cargo run --release --example ") {
        let (name, args) = rest.split_once(" -- ").unwrap_or((rest, ""));
        return Some((bin.parent().unwrap().join("examples").join(name.trim()), args.to_owned()));
    }
    if let Some(rest) = line.strip_prefix("cargo run --release -- ") {
        return Some((bin.to_path_buf(), rest.to_owned()));
    }
    line.strip_prefix("xlens ").map(|rest| (bin.to_path_buf(), rest.to_owned()))
}

#[test]
fn every_shell_snippet_of_the_docs_runs() {
    let root = common::root();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_xlens"));
    let scratch = std::env::temp_dir().join(format!("xlens-docs-snippets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    std::os::unix::fs::symlink(root.join("testdata"), scratch.join("testdata")).unwrap();
    let mut docs = vec![root.join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    let (mut ran, mut unknown) = (Vec::new(), Vec::new());
    for doc in &docs {
        for raw in shell_lines(doc) {
            let line = without_comment(&raw);
            if NOT_RUN.iter().any(|(start, _)| line.starts_with(start)) {
                continue;
            }
            let Some((program, args)) = program(line, &bin) else {
                unknown.push(format!("{}: {line}", doc.display()));
                continue;
            };
            let mut args = args;
            for (from, to) in PLACEHOLDERS {
                args = args.replace(from, to);
            }
            let (args, stdout_to) = match args.split_once(" > ") {
                Some((a, file)) => (a.to_owned(), Some(file.trim().to_owned())),
                None => (args, None),
            };
            let words: Vec<&str> = args.split_whitespace().collect();
            assert!(
                program.is_file(),
                "{}: {line}: no {} (cargo test builds the examples)",
                doc.display(),
                program.display()
            );
            let out = Command::new(&program).args(&words).current_dir(&scratch).output().unwrap();
            let code = out.status.code();
            // 0, or what the line asks for: 3 for --fail-on, 4 for --fail-on-regression.
            let allowed = [
                Some(0),
                (line.contains("--fail-on ")).then_some(3),
                line.contains("--fail-on-regression").then_some(4),
            ];
            assert!(
                allowed.contains(&code),
                "{}: {line}\n  ran {} {args}\n  exit {code:?}\n  stderr: {}",
                doc.display(),
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            if let Some(file) = stdout_to {
                std::fs::write(scratch.join(file), &out.stdout).unwrap();
            }
            ran.push(line.to_owned());
        }
    }
    assert!(
        unknown.is_empty(),
        "shell lines this test does not know how to run (run them or list them in NOT_RUN):\n{}",
        unknown.join("\n")
    );
    // The README's commands: the first line, every example, the CI gate, the per-host scan.
    assert!(ran.len() >= 18, "only {} snippet lines ran: {ran:#?}", ran.len());
    std::fs::remove_dir_all(&scratch).unwrap();
}
