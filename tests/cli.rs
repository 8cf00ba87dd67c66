//! The `xlens` command line, run as a real process: `--help` and `--version`, one-line usage
//! errors with exit 2 (no backtrace even with `RUST_BACKTRACE=1`), and `scan` giving the same
//! report as the library (and the `fault_scan` example) on the bundled sample.

mod common;

use std::process::{Command, Output};

fn xlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).env("RUST_BACKTRACE", "1").output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version_and_help_exit_zero() {
    let v = xlens(&["--version"]);
    assert_eq!(v.status.code(), Some(0));
    assert_eq!(stdout(&v).trim(), format!("xlens {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(xlens(&["scan", "--version"]).status.code(), Some(0));
    let help = xlens(&["scan", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    for flag in ["--format", "--json", "--html", "--out", "--fail-on", "--quiet", "--only", "--disable", "Exit codes"] {
        assert!(text.contains(flag), "scan --help lacks {flag}:\n{text}");
    }
    assert_eq!(xlens(&["--help"]).status.code(), Some(0));
}

#[test]
fn usage_mistakes_are_one_line_and_exit_two() {
    for args in [&["scan", "--bogus"][..], &["bogus"], &["scan", "--fail-on", "P7"], &["scan", "--only", "nope"]] {
        let o = xlens(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: ") && !err.contains("backtrace"), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn scan_reports_what_the_library_reports() {
    let o = xlens(&["scan", "--sample", "--json", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let expected = std::fs::read_to_string(common::root().join("tests/golden/fault_scan_host_callback.json")).unwrap();
    assert_eq!(stdout(&o), expected);
    let same = xlens(&["scan", "--sample", "--format", "json", "-q"]);
    assert_eq!(stdout(&same), expected);
}

/// `--timings` leaves the report as it is and tells on stderr how long each phase took: the file's
/// opening, the shared analyses, every detector that ran, the whole scan and the rendering.
#[test]
fn scan_times_each_phase() {
    let o = xlens(&["scan", "--sample", "--json", "--quiet", "--timings"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let expected = std::fs::read_to_string(common::root().join("tests/golden/fault_scan_host_callback.json")).unwrap();
    assert_eq!(stdout(&o), expected);
    let text = stderr(&o);
    let phases: Vec<&str> =
        text.lines().filter(|l| l.starts_with("  ")).filter_map(|l| l.split_whitespace().next()).collect();
    for phase in [
        "open",
        "modules",
        "host_ops",
        "op_profile",
        "steps",
        "anatomy",
        "memory",
        "recompilation",
        "host_callback_stall",
        "scan",
        "render",
    ] {
        assert!(phases.contains(&phase), "no {phase} in:\n{text}");
    }
    let registry = xlens::faults::DETECTORS.len();
    let detectors = phases.iter().filter(|p| xlens::faults::DETECTORS.iter().any(|d| d.id() == **p)).count();
    assert_eq!(detectors, registry, "every detector timed once:\n{text}");
    assert!(text.lines().all(|l| !l.starts_with("  ") || l.ends_with(" %")), "{text}");
    // Without the flag, nothing on stderr.
    assert!(stderr(&xlens(&["scan", "--sample", "--quiet"])).is_empty());
}

#[test]
fn scan_selects_detectors_and_fails_on_severity() {
    let o = xlens(&["scan", "--sample", "--json", "-q", "--only", "host_callback_stall,recompilation"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ids: Vec<&str> = doc["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|id| ["host_callback_stall", "recompilation"].contains(id)), "{ids:?}");
    let o = xlens(&["scan", "--sample", "--json", "-q", "--disable", "host_callback_stall"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["findings"].as_array().unwrap().iter().all(|f| f["id"] != "host_callback_stall"));
    assert_eq!(xlens(&["scan", "--sample", "-q", "--fail-on", "P2"]).status.code(), Some(3));
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = xlens(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).contains("scan"), "{shell}");
        // `plan` and `audit` are declared with clap like every subcommand: their flags complete.
        for flag in ["params", "kv-dtype", "generations", "outlier-scale", "trials"] {
            assert!(stdout(&o).contains(flag), "{shell}: {flag}");
        }
        // `--only` and `--disable` complete the registry's detector ids.
        assert!(stdout(&o).contains("host_callback_stall"), "{shell}: detector ids");
    }
}

/// `scan` needs a profile: with no path (`xlens scan $UNSET`) it is a usage mistake naming the
/// argument and `--sample`, never a silent scan of the bundled sample; clap's one-line errors keep
/// what clap says below its first line (the missing argument, the valid values, a "did you mean"
/// tip) and point to the subcommand's help.
#[test]
fn usage_mistakes_name_what_is_wrong_and_the_subcommands_help() {
    for (args, needles) in [
        (&["scan"][..], &["<PATH>", "(see xlens scan --help)"][..]),
        (&["scan", "--sample", "x"], &["--sample", "(see xlens scan --help)"]),
        (&["scan", "--format", "yaml", "--sample"], &["[possible values: text, json, html]"]),
        (&["scan", "--sample", "--jsn"], &["a similar argument exists: '--json'", "(see xlens scan --help)"]),
        (&["hlo"], &["not provided: <PATH>", "(see xlens hlo --help)"]),
        // With `snapshot` beside `scan`, clap names both: "some similar subcommands exist".
        (&["scna"], &["similar subcommand", "'scan'", "(see xlens --help)"]),
    ] {
        let o = xlens(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
        for needle in needles {
            assert!(stderr(&o).contains(needle), "{args:?}: {needle:?} not in {}", stderr(&o));
        }
    }
}

/// `plan` and `audit` follow every subcommand's exit codes: a bad value or a missing model is a
/// usage mistake (one line naming the flag, exit 2), never help with exit 0.
#[test]
fn plan_and_audit_usage_mistakes_exit_2() {
    for (args, needle) in [
        (&["plan"][..], "a model is needed"),
        (&["plan", "--params", "7B", "--chip", "v9"], "'--chip <CHIP>'"),
        (&["plan", "--params", "-7B"], "params must be positive"),
        (&["audit", "--trials", "0"], "'--trials <T>'"),
        (&["audit", "--bogus"], "'--bogus'"),
        // Once an abort with a 28.7 TB allocation: sizes are checked before anything is allocated.
        (&["audit", "--n", "7B"], "--k x --n"),
        (&["audit", "--ks", "64,100000000"], "--ks 100000000"),
    ] {
        let o = xlens(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// Every subcommand answers `--help` with exit 0, and prints what its example prints (the
/// goldens of `tests/golden/`).
#[test]
fn subcommands_print_what_their_examples_print() {
    for sub in
        ["scan", "ops", "hlo", "inventory", "kernels", "roofline", "plan", "audit", "synth", "mcp", "completions"]
    {
        let o = xlens(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{sub} --help: {}", stderr(&o));
        assert!(!o.stdout.is_empty(), "{sub}");
        let v = xlens(&[sub, "--version"]);
        assert_eq!(v.status.code(), Some(0), "{sub} --version: {}", stderr(&v));
        assert!(stdout(&v).trim_end().ends_with(env!("CARGO_PKG_VERSION")), "{sub}: {}", stdout(&v));
    }
    let golden = |name: &str| std::fs::read_to_string(common::root().join("tests/golden").join(name)).unwrap();
    let root = common::root();
    let path = |rel: &str| root.join(rel).display().to_string();
    let ops = xlens(&["ops", &path("testdata/tpu/tpu_basic"), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&ops.stdout).unwrap();
    let host: serde_json::Value = serde_json::from_str(&golden("op_profile_tpu_basic.json")).unwrap();
    assert_eq!(doc["hosts"][0], host);
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec!["inventory".into(), path("testdata/corpus/host_callback"), "--json".into()],
            "inventory_host_callback.json",
        ),
        (vec!["roofline".into(), "--json".into()], "roofline_table.json"),
        (vec!["hlo".into(), path("testdata/real/sharded_donation"), "--json".into()], "hlo_ops_sharded_donation.json"),
        (
            "plan --params 7e9 --recipe mixed-bf16 --optimizer adam --chip v5e --budget 0.8 --layers 32 \
             --kv-heads 32 --head-dim 128 --seq 4096 --batch 1 --kv-dtype bf16 --json"
                .split_whitespace()
                .map(String::from)
                .collect(),
            "budget_hbm_plan_7b_v5e.json",
        ),
    ];
    for (args, name) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = xlens(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), golden(name), "{args:?}");
    }
    let o = xlens(&["plan", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1);
}

/// `--format` takes every format of the report crate: the HTML page on stdout is the page
/// `--html` writes.
#[test]
fn scan_writes_each_format_of_the_report_crate() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.html");
    let o = xlens(&["scan", "--sample", "-q", "--format", "html", "--html", &page.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(o.stdout, std::fs::read(&page).unwrap());
    for f in xlens::report::render::FORMATS {
        assert_eq!(xlens(&["scan", "--sample", "-q", "--format", f.name]).status.code(), Some(0), "{}", f.name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `xlens.toml` sets detectors, thresholds and outputs; flags win; a bad file is a usage mistake.
#[test]
fn the_config_file_sets_detectors_thresholds_and_outputs() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-config-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("xlens.toml"),
        "[detectors]\nonly = [\"host_callback_stall\"]\n\n[thresholds.host_callback_stall]\nmin_pct_of_step = 0.5\n\n\
         [output]\nformat = \"json\"\nfail_on = \"P2\"\n",
    )
    .unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_xlens")).args(args).current_dir(&dir).output().unwrap();
    let o = run(&["scan", "--sample", "-q"]);
    assert_eq!(o.status.code(), Some(3), "fail_on from the file: {}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("format = json from the file");
    assert!(doc["findings"].as_array().unwrap().iter().all(|f| f["id"] == "host_callback_stall"));
    // What the file kept from running is in the JSON and the verdict line, naming the file: the
    // verdict does not depend silently on the working directory.
    assert_eq!(doc["detectors_run"], serde_json::json!(["host_callback_stall"]));
    let disabled = doc["disabled_by"].as_object().unwrap();
    assert_eq!(disabled.len(), xlens::faults::DETECTORS.len() - 1);
    assert!(disabled.values().all(|by| by == "xlens.toml [detectors]"), "{disabled:?}");
    let text = run(&["scan", "--sample", "-q", "--format", "text"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("NEEDS_ATTENTION"), "the flag wins");
    let verdict = text.lines().next().unwrap();
    assert!(
        verdict.contains(&format!("Disabled {} of", disabled.len())) && verdict.contains("by xlens.toml"),
        "{verdict}"
    );
    // A flag names itself.
    let o =
        run(&["scan", "--sample", "-q", "--only", "recompilation,host_callback_stall", "--disable", "recompilation"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["disabled_by"]["recompilation"], "--disable");
    assert_eq!(doc["disabled_by"]["padding_waste"], "--only");
    std::fs::write(dir.join("bad.toml"), "[thresholds.nope]\nx = 1\n").unwrap();
    let bad = run(&["scan", "--sample", "-q", "--config", "bad.toml"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
    assert!(stderr(&bad).contains("bad.toml"), "{}", stderr(&bad));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--host` scans only the named hosts of a session; an unknown host is an error naming the others.
#[test]
fn scan_selects_hosts() {
    let dir = common::root().join("testdata/tpu/tpu_straggler_host");
    let o = xlens(&["scan", &dir.display().to_string(), "--json", "-q", "--host", "host0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["profile"]["hosts"], serde_json::json!(["host0"]));
    let o = xlens(&["scan", &dir.display().to_string(), "-q", "--host", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no host \"nope\""), "{}", stderr(&o));
}

/// What `xlens scan DIR` writes to its terminal, run in a pseudo-terminal (`script`); `None`
/// (said on stderr) where util-linux's `script` is missing.
fn scan_in_a_terminal(dir: &std::path::Path, tick_ms: u32) -> Option<String> {
    let cmd = format!("{} scan {} > /dev/null", env!("CARGO_BIN_EXE_xlens"), dir.display());
    let script = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("XLENS_PROGRESS_TICK_MS", tick_ms.to_string())
        .output();
    let Ok(o) = script else {
        eprintln!("`script` (util-linux) is not installed: the pseudo-terminal test did not run");
        return None;
    };
    assert!(o.status.success(), "{}", stderr(&o));
    Some(stdout(&o))
}

/// Through a pseudo-terminal (`script`), the progress line starts before the first host is read,
/// names the hosts being read, and is erased at the end; without a terminal there is none.
#[test]
fn the_progress_line_in_a_terminal() {
    let dir = common::root().join("testdata/tpu/tpu_straggler_host");
    let Some(tty) = scan_in_a_terminal(&dir, 200) else { return };
    let clear = xlens::report::tables::PROGRESS_CLEAR;
    assert!(tty.starts_with(&format!("{clear}[{}] 0/2 hosts", " ".repeat(30))), "{tty:?}");
    assert!(tty.contains("reading host"), "{tty:?}");
    assert!(tty.contains("] 2/2 hosts"), "{tty:?}");
    assert!(tty.ends_with(clear), "the line is erased at the end: {tty:?}");
    let piped = xlens(&["scan", &dir.display().to_string()]);
    assert!(piped.stderr.is_empty(), "no progress without a terminal");
}

/// `--run` picks a run of a logdir instead of the newest; an unknown run lists the runs.
#[test]
fn scan_selects_a_run() {
    let logdir = std::env::temp_dir().join(format!("xlens-cli-runs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logdir);
    let root = common::root();
    for (run, from) in [("2026_01_01", "testdata/corpus/clean"), ("2026_02_02", "testdata/corpus/host_callback")] {
        let dir = logdir.join("plugins/profile").join(run);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(root.join(from)).unwrap().flatten() {
            if entry.file_name().to_string_lossy().ends_with(".xplane.pb") {
                std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
            }
        }
    }
    let path = logdir.display().to_string();
    let run_of = |args: &[&str]| {
        let o = xlens(args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        doc["profile"]["run"].as_str().map(str::to_owned)
    };
    assert_eq!(run_of(&["scan", &path, "--json", "-q"]).as_deref(), Some("2026_02_02"), "the newest by default");
    assert_eq!(run_of(&["scan", &path, "--json", "-q", "--run", "2026_01_01"]).as_deref(), Some("2026_01_01"));
    let o = xlens(&["scan", &path, "-q", "--run", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("runs: 2026_01_01, 2026_02_02"), "{}", stderr(&o));
    std::fs::remove_dir_all(&logdir).unwrap();
}

/// `xlens synth` writes what the `synth_profile` example writes (the same bytes for the same
/// seed), and what it writes scans; sizes and fixtures are checked as usage.
#[test]
fn synth_writes_profiles_that_scan() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-synth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (a, b) = (dir.join("a"), dir.join("b"));
    let o = xlens(&["synth", "--size", "512KB", "--hosts", "2", "--seed", "7", "--out", &a.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2, "one line per host file: {}", stdout(&o));
    let example = std::path::Path::new(env!("CARGO_BIN_EXE_xlens")).parent().unwrap().join("examples/synth_profile");
    let o = Command::new(example)
        .args(["--size", "512KB", "--hosts", "2", "--seed", "7", "--out", &b.display().to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for host in ["host0000", "host0001"] {
        let rel = format!("plugins/profile/synthetic/{host}.xplane.pb");
        let bytes = std::fs::read(a.join(&rel)).unwrap();
        assert!(bytes.len() > 256 << 10, "{host}: {} bytes", bytes.len());
        assert_eq!(bytes, std::fs::read(b.join(&rel)).unwrap(), "{host}");
    }
    let scan = xlens(&["scan", &a.display().to_string(), "--json", "-q"]);
    assert_eq!(scan.status.code(), Some(0), "{}", stderr(&scan));
    let doc: serde_json::Value = serde_json::from_slice(&scan.stdout).unwrap();
    assert_eq!(doc["profile"]["hosts"], serde_json::json!(["host0000", "host0001"]));
    // A device-only snapshot: the TPU planes and the metadata, no host threads; it still scans.
    let snap = dir.join("snap");
    let o = xlens(&["synth", "--size", "512KB", "--device-only", "--out", &snap.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let file = snap.join("plugins/profile/synthetic/host0000.xplane.pb");
    let space = xlens::xplane::Space::parse(std::fs::read(&file).unwrap().into()).unwrap();
    assert!(space.host_threads().is_none());
    assert_eq!(space.tpu_tensor_cores().len(), 4);
    let scan = xlens(&["scan", &snap.display().to_string(), "--json", "-q"]);
    assert_eq!(scan.status.code(), Some(0), "{}", stderr(&scan));
    let doc: serde_json::Value = serde_json::from_slice(&scan.stdout).unwrap();
    assert!(doc["metrics"]["step_time_ms_mean"].as_f64().is_some_and(|ms| ms > 0.0), "{}", doc["metrics"]);
    // Without step markers the time base is the program executions.
    let stepless = dir.join("stepless");
    let o =
        xlens(&["synth", "--size", "512KB", "--device-only", "--no-steps", "--out", &stepless.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let scan = xlens(&["scan", &stepless.display().to_string(), "--json", "-q"]);
    assert_eq!(scan.status.code(), Some(0), "{}", stderr(&scan));
    let doc: serde_json::Value = serde_json::from_slice(&scan.stdout).unwrap();
    assert_eq!(doc["metrics"]["time_base"], "module_executions", "{}", doc["metrics"]);
    for bad in
        [&["synth", "--out", "x", "--size", "-3MB"][..], &["synth", "--out", "x", "--fixture", "nope"], &["synth"]]
    {
        let o = xlens(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{bad:?}: {}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--steps A..B` cuts every host to those steps (the library's `scan` and the session scan
/// agree); a range with no steps is an error naming the steps the host has.
#[test]
fn scan_selects_steps() {
    let dir = common::root().join("testdata/tpu/tpu_straggler_host");
    let path = dir.display().to_string();
    let o = xlens(&["scan", &path, "--json", "-q", "--steps", "3..5"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((doc["profile"]["steps"].as_u64(), doc["profile"]["step_range"].as_str()), (Some(3), Some("3..5")));
    let all: serde_json::Value = serde_json::from_slice(&xlens(&["scan", &path, "--json", "-q"]).stdout).unwrap();
    assert_eq!(all["profile"]["steps"].as_u64(), Some(8));
    assert!(all["profile"].get("step_range").is_none(), "absent unless asked");
    let config =
        xlens::faults::ScanConfig { steps: Some(xlens::faults::StepRange { first: 3, last: 5 }), ..Default::default() };
    let profile = xlens::faults::Profile::from_session(xlens_testkit::open_session(&dir).unwrap());
    let report = xlens::faults::scan(&profile, &config);
    assert_eq!(xlens::report::render::json(&report) + "\n", stdout(&o), "scan(Profile) = the session scan");
    let o = xlens(&["scan", &path, "-q", "--steps", "100.."]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: no step in 100..: it has steps 0..7"), "{}", stderr(&o));
}

/// A logdir of runs copied from the corpus (`name` ← `testdata/corpus/<from>`).
fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path().is_dir() {
            all.extend(listing(&entry.path()));
        }
        all.push(entry.path().display().to_string());
    }
    all.sort();
    all
}

/// `xlens runs` lists every run with its verdict and step-time change, caches each summary
/// outside the logdir (read back while the files are unchanged) and writes nothing into it.
#[test]
fn runs_lists_every_run_and_caches_outside_the_logdir() {
    let logdir =
        common::logdir_of("runlist", &[("2026_01_01_10_00_00", "clean"), ("2026_02_02_11_00_00", "host_callback")]);
    let cache = logdir.with_extension("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let before = listing(&logdir);
    let args = ["runs", &logdir.display().to_string(), "--json", "--cache-dir", &cache.display().to_string()];
    let o = xlens(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = doc.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["status"].as_str(), runs[0]["captured"].as_str()),
        (Some("OPTIMAL"), Some("2026-01-01 10:00:00"))
    );
    assert_eq!(runs[1]["status"], "NEEDS_ATTENTION");
    assert!(runs[1]["top_finding"].as_str().unwrap().starts_with("P0 host_callback_stall"), "{doc}");
    let (a, b) = (runs[0]["step_time_ms"].as_f64().unwrap(), runs[1]["step_time_ms"].as_f64().unwrap());
    let change = runs[1]["step_time_change_pct"].as_f64().unwrap();
    assert!((change - 100.0 * (b - a) / a).abs() < 1e-9, "{change}");
    assert_eq!(listing(&logdir), before, "nothing written into the logdir");
    // The cache answers while the files are unchanged: a doctored entry shows through.
    let entries: Vec<_> = std::fs::read_dir(cache.join("runs")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(entries.len(), 2);
    for entry in &entries {
        let text = std::fs::read_to_string(entry).unwrap().replace("\"findings\":0", "\"findings\":99");
        std::fs::write(entry, text).unwrap();
    }
    let again: serde_json::Value = serde_json::from_slice(&xlens(&args).stdout).unwrap();
    assert_eq!(again[0]["findings"], 99, "read from the cache");
    let text = xlens(&["runs", &logdir.display().to_string(), "--no-cache"]);
    assert_eq!(stdout(&text).lines().count(), 3, "{}", stdout(&text));
    assert!(stdout(&text).contains("+77.1%"), "{}", stdout(&text));
    std::fs::remove_dir_all(&logdir).unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
}

/// `xlens watch` prints one JSON line for a run that lands after it started, with the change
/// from the newest run before it, and stops after `--count` runs.
#[test]
fn watch_reports_each_new_run() {
    use std::io::{BufRead, BufReader};
    let logdir = common::logdir_of("watch", &[("2026_01_01_10_00_00", "clean")]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(["watch", &logdir.display().to_string(), "--interval", "0.1", "--count", "1", "--no-cache"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    common::add_run(&logdir, "2026_02_02_11_00_00", "host_callback");
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(out).lines().map_while(Result::ok).collect();
        let _ = tx.send(lines);
    });
    let lines = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("watch printed nothing for a new run within 60 s");
    });
    assert!(child.wait().unwrap().success());
    assert_eq!(lines.len(), 1, "{lines:?}");
    let run: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(run["run"], "2026_02_02_11_00_00");
    assert_eq!(run["status"], "NEEDS_ATTENTION");
    assert!(run["step_time_change_pct"].as_f64().unwrap() > 50.0, "{run}");
    std::fs::remove_dir_all(&logdir).unwrap();
}

/// A run reported while a host file was still 0 bytes (ERROR) is scanned and reported again once
/// the file is complete: `watch` follows a run's files, not only its name.
#[test]
fn watch_rescans_a_run_whose_files_changed() {
    use std::io::{BufRead, BufReader};
    let logdir = common::logdir_of("rewatch", &[("2026_01_01_10_00_00", "clean")]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_xlens"))
        .args(["watch", &logdir.display().to_string(), "--interval", "0.1", "--count", "2", "--no-cache"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(400));
    let run = logdir.join("plugins/profile/2026_02_02_11_00_00");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("vm.xplane.pb"), b"").unwrap();
    let wait = |what: &str| {
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("watch printed no line for {what}"))
    };
    let first: serde_json::Value = serde_json::from_str(&wait("the 0-byte host")).unwrap();
    assert_eq!(first["status"], "ERROR", "{first}");
    std::fs::copy(common::root().join("testdata/corpus/host_callback/vm.xplane.pb"), run.join("vm.xplane.pb")).unwrap();
    let second: serde_json::Value = serde_json::from_str(&wait("the completed host")).unwrap();
    assert_eq!(second["run"], "2026_02_02_11_00_00");
    assert_eq!(second["status"], "NEEDS_ATTENTION", "{second}");
    assert!(child.wait().unwrap().success());
    std::fs::remove_dir_all(&logdir).unwrap();
}

/// One large host moves the progress bar too: before the host is done (`0/1 hosts`), the bytes
/// of its events walked so far show.
#[test]
fn the_progress_line_moves_inside_one_large_host() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-bighost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = xlens(&["synth", "--size", "32MB", "--out", &dir.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Redrawn every millisecond: this host is read in tens of them.
    let Some(tty) = scan_in_a_terminal(&dir, 1) else { return };
    let inside: Vec<&str> = tty
        .split(xlens::report::tables::PROGRESS_CLEAR)
        .filter(|l| l.contains("0/1 hosts") && !l.contains(" 0.0/"))
        .collect();
    assert!(!inside.is_empty(), "no bytes shown before the host was done: {tty:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Names from a profile (file, run and host names) that carry terminal escapes reach no output
/// raw: the text of `scan`, `inventory`, `runs` and `diff`, their error lines on stderr, and the
/// HTML pages of `scan` and `diff` write every control character as `\u{..}`.
#[test]
fn hostile_names_are_escaped_in_every_output() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = dir.join("logdir/plugins/profile/r\u{1b}]0;PWNED\u{7}");
    std::fs::create_dir_all(&run).unwrap();
    let sample = common::root().join("testdata/corpus/host_callback/vm.xplane.pb");
    std::fs::copy(&sample, run.join("h\u{1b}]0;PWNED\u{7}.xplane.pb")).unwrap();
    let bytes = std::fs::read(&sample).unwrap();
    std::fs::write(run.join("t\u{1b}[2J.xplane.pb"), &bytes[..100]).unwrap();
    let (logdir, run_dir) = (dir.join("logdir").display().to_string(), run.display().to_string());
    let (scan_html, diff_html) =
        (dir.join("scan.html").display().to_string(), dir.join("diff.html").display().to_string());
    let sample_dir = common::root().join("testdata/corpus/host_callback").display().to_string();
    let raw = |bytes: &[u8]| bytes.iter().any(|&b| b == 0x1b || b == 0x07);
    for args in [
        vec!["scan", &run_dir, "-q", "--html", &scan_html],
        vec!["scan", &run_dir, "-q", "--json"],
        vec!["inventory", &run_dir],
        vec!["runs", "--no-cache", &logdir],
        vec!["diff", &run_dir, &sample_dir, "--html", &diff_html],
        vec!["ops", &run_dir],
    ] {
        let o = xlens(&args);
        assert!(!raw(&o.stdout) && !raw(&o.stderr), "{args:?}: {}{}", stdout(&o), stderr(&o));
    }
    for page in [&scan_html, &diff_html] {
        let html = std::fs::read(page).unwrap();
        assert!(!raw(&html), "{page}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ops`, `kernels`, `inventory` and `hlo` handle a partial session as `scan` does: one truncated
/// host no longer fails the command; the good host is reported, the bad one is listed in the
/// JSON's `skipped_hosts` and named on stderr, and the exit status is 0.
#[test]
fn every_subcommand_reports_the_good_hosts_of_a_partial_session() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(common::root().join("testdata/h200/h200_train_bf16/vm.xplane.pb")).unwrap();
    std::fs::write(dir.join("good.xplane.pb"), &bytes).unwrap();
    std::fs::write(dir.join("bad.xplane.pb"), &bytes[..bytes.len() / 2]).unwrap();
    let path = dir.display().to_string();
    for sub in ["ops", "kernels", "inventory", "hlo"] {
        let o = xlens(&[sub, &path, "--json"]);
        assert_eq!(o.status.code(), Some(0), "{sub}: {}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let skipped = doc["skipped_hosts"].as_array().unwrap_or_else(|| panic!("{sub}: no skipped_hosts"));
        assert_eq!(skipped.len(), 1, "{sub}");
        assert_eq!(skipped[0]["host"], "bad", "{sub}");
        assert!(!skipped[0]["error"].as_str().unwrap().is_empty(), "{sub}");
        assert!(stderr(&o).contains("host bad skipped"), "{sub}: {}", stderr(&o));
        let text = xlens(&[sub, &path]);
        assert_eq!(text.status.code(), Some(0), "{sub} text: {}", stderr(&text));
    }
    let ops = xlens(&["ops", &path, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&ops.stdout).unwrap();
    assert_eq!(doc["hosts"].as_array().unwrap().len(), 1);
    assert_eq!(doc["hosts"][0]["host"], "good");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Entries of a run that are named like host files but cannot be read (a FIFO, a dangling link)
/// are hosts listed in `skipped_hosts` with their error, not dropped without a word, and a FIFO
/// is never opened (that would wait for a writer).
#[test]
fn unusable_entries_of_a_run_are_listed_as_skipped_hosts() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-unusable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(common::root().join("testdata/corpus/host_callback/vm.xplane.pb"), dir.join("vm.xplane.pb")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/xlens", dir.join("dangling.xplane.pb")).unwrap();
    let fifo = Command::new("mkfifo").arg(dir.join("fifo.xplane.pb")).status().unwrap();
    assert!(fifo.success());
    let o = xlens(&["scan", &dir.display().to_string(), "-q", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["status"], "INCOMPLETE");
    let skipped: Vec<&str> =
        doc["skipped_hosts"].as_array().unwrap().iter().map(|h| h["host"].as_str().unwrap()).collect();
    assert_eq!(skipped, ["dangling", "fifo"]);
    assert!(doc["skipped_hosts"][1]["error"].as_str().unwrap().contains("not a regular file"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--out DIR` writes inside DIR only: a symbolic link planted in it (here in place of a table's
/// folder) is refused with one line and exit 1, and nothing is created where it points.
#[test]
fn the_dataset_never_writes_through_a_link_inside_its_directory() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (out, elsewhere) = (dir.join("out"), dir.join("elsewhere"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, out.join("findings")).unwrap();
    let o = xlens(&["scan", "--sample", "-q", "--out", &out.display().to_string()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a symbolic link") && stderr(&o).lines().count() == 1, "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the link");
    assert!(out.join("metrics").is_dir(), "the other tables are still written");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// HLO text handed over for a profile (a common mix-up: `*.hlo.txt` dumps sit beside the
/// profiles) is named as such, not reported as a protobuf decode error.
#[test]
fn hlo_text_is_named_as_such() {
    let dir = std::env::temp_dir().join(format!("xlens-cli-hlotext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("module.hlo.txt");
    std::fs::write(&file, "HloModule jit_f, entry_computation_layout={()->f32[]}\n\nENTRY main {\n}\n").unwrap();
    for sub in ["hlo", "scan", "ops"] {
        let o = xlens(&[sub, &file.display().to_string()]);
        assert_eq!(o.status.code(), Some(1), "{sub}: {}", stderr(&o));
        assert!(stderr(&o).contains("this is HLO text, not a profile"), "{sub}: {}", stderr(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `xlens graph`: a name that matches nothing, a name in two programs without `--program`, hops
/// over the limit and `--text` with `--hops` are usage mistakes (one line, exit 2), an unreadable
/// profile an error (exit 1); the neighbourhood and the text print.
#[test]
fn graph_mistakes_exit_2_and_answers_print() {
    let clean = common::root().join("testdata/corpus/clean");
    let recompiled = common::root().join("testdata/corpus/recompilation");
    let (clean, recompiled) = (clean.to_str().unwrap(), recompiled.to_str().unwrap());
    for (args, why) in [
        (&["graph", clean, "--op", "nope.1"][..], "no instruction or computation \"nope.1\""),
        (&["graph", recompiled, "--op", "dot.32"], "pick one with --program"),
        (&["graph", clean, "--op", "dot.32", "--hops", "33"], "--hops 33"),
        (&["graph", clean, "--op", "dot.32", "--text", "--hops", "1"], "--hops"),
        (&["graph", clean], "--op"),
    ] {
        let o = xlens(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(why), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // An unreadable profile is an error, not a usage mistake: exit 1, one line.
    let o = xlens(&["graph", "/nonexistent/profile", "--op", "dot.32"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    let o = xlens(&["graph", clean, "--op", "dot.32", "--hops", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("jit_train_step(36) / main.40: dot.32 within 1 hops"), "{text}");
    assert!(text.contains("producer") && text.contains("consumer"), "{text}");
    let o = xlens(&["graph", recompiled, "--program", "jit_train_step(38)", "--text"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("HloModule jit_train_step\n"), "{}", stdout(&o));
}
