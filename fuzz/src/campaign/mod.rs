//! The mutation campaign of issue 40: protobuf-aware mutations of the real captures of
//! `testdata`, each scanned and checked against every promise xlens makes about bad input.
//!
//! A case is one capture and one mutation ([`mutate::mutate`]: bit flips, varint and length
//! edits, duplicated and deleted fields, wire-type changes, junk bytes inside a message, cuts
//! inside a message, truncations at field boundaries; enclosing length prefixes fixed up), drawn
//! from the campaign's seed and the case's index alone, so any case can be replayed by
//! `(seed, index)`. Each case is checked by the [`oracle::Oracle`]s. `cargo test -p xlens-fuzz
//! --test campaign` runs a few hundred cases on every CI run; the `campaign` binary runs as many
//! as asked (`docs/campaign.md`).

pub mod alloc;
pub mod mutate;
pub mod oracle;
pub mod wire;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::mutate::{Mutant, Mutation};
use self::oracle::{Limits, Oracle, PeakProbe, Verdict};
use self::wire::Structure;
use crate::Rng;

/// A capture to mutate, with its wire structure parsed once.
#[derive(Clone, Debug)]
pub struct Capture {
    /// Its name, relative to the corpus folder it was found in.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its fields.
    pub structure: Structure,
}

impl Capture {
    /// Reads and parses a capture.
    pub fn load(path: &Path, name: String) -> std::io::Result<Capture> {
        let bytes = std::fs::read(path)?;
        let structure = Structure::parse(&bytes);
        Ok(Capture { name, bytes, structure })
    }
}

/// Every `*.xplane.pb` under `dir` of at most `max_bytes`, smallest first (then by path).
pub fn find_captures(dir: &Path, max_bytes: u64) -> std::io::Result<Vec<(PathBuf, u64)>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() && path.to_string_lossy().ends_with(xlens_xplane::XPLANE_SUFFIX) {
                let len = entry.metadata()?.len();
                if len > 0 && len <= max_bytes {
                    out.push((path, len));
                }
            }
        }
    }
    out.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    Ok(out)
}

/// How a campaign runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// The seed every case's mutation is drawn from (with the case's index).
    pub seed: u64,
    /// The first case's index (to resume or split a campaign).
    pub first: u64,
    /// How many cases.
    pub cases: u64,
    /// The bounds of a case.
    pub limits: Limits,
    /// The `xlens` binary and a scratch folder, to run every `cli_every`-th case through the
    /// CLI as well (oracle (f)).
    pub cli: Option<(PathBuf, PathBuf)>,
    /// Which cases also run through the CLI (every one with 1).
    pub cli_every: u64,
    /// Whether the CLI's file is cut short while it scans (issue 40 case 2), a random 0–300 ms
    /// after the start, to a random length.
    pub cli_shrink: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config { seed: 40, first: 0, cases: 300, limits: Limits::default(), cli: None, cli_every: 1, cli_shrink: false }
    }
}

/// One case and what it gave.
#[derive(Clone, Debug)]
pub struct Case {
    /// Its index in the campaign.
    pub index: u64,
    /// The capture mutated (index into the captures).
    pub capture: usize,
    /// The mutation.
    pub mutant: Mutant,
    /// The in-process checks.
    pub verdict: Verdict,
    /// The CLI's broken promise, when the case ran through it and broke one.
    pub cli: Option<(Oracle, String)>,
    /// Whether the case ran through the CLI.
    pub cli_run: bool,
    /// Whether the CLI's file was cut short during the scan.
    pub cli_shrunk: bool,
}

impl Case {
    /// Every broken promise of the case.
    pub fn failures(&self) -> impl Iterator<Item = &(Oracle, String)> {
        self.verdict.failures.iter().chain(self.cli.iter())
    }
}

/// The generator of case `index` of a campaign seeded with `seed` (splitmix64 of both).
pub fn case_rng(seed: u64, index: u64) -> Rng {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    Rng::new(z ^ (z >> 31))
}

/// Draws, mutates and checks case `index`.
pub fn run_case(captures: &[Capture], config: &Config, index: u64, probe: Option<&dyn PeakProbe>) -> Case {
    let mut rng = case_rng(config.seed, index);
    let capture = rng.below(captures.len());
    let c = &captures[capture];
    let mutant = mutate::mutate(&mut rng, &c.bytes, &c.structure);
    let verdict = oracle::check(&mutant.bytes, &config.limits, probe);
    let cli_run = config.cli.is_some() && index.is_multiple_of(config.cli_every.max(1));
    let cli = match &config.cli {
        Some((bin, dir)) if cli_run => {
            let timeout = config.limits.case_time.max(Duration::from_secs(30));
            let shrink = config.cli_shrink.then(|| oracle::Shrink {
                after: Duration::from_millis(rng.below(300) as u64),
                len: rng.below(mutant.bytes.len()) as u64,
            });
            oracle::check_cli(bin, &mutant.bytes, dir, timeout, shrink)
        }
        _ => None,
    };
    Case { index, capture, mutant, verdict, cli, cli_run, cli_shrunk: cli_run && config.cli_shrink }
}

/// A failing case kept for its reproducer.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The promise broken.
    pub oracle: Oracle,
    /// What broke it.
    pub detail: String,
    /// The case's index.
    pub index: u64,
    /// The capture mutated.
    pub capture: String,
    /// The mutation.
    pub mutation: String,
    /// The input.
    pub bytes: Vec<u8>,
    /// Whether [`oracle::check`] on the bytes alone shows it again: not so for a CLI failure on
    /// a file cut short during the scan, which depends on timing.
    pub replayable: bool,
}

/// The counts of a campaign.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cases run.
    pub cases: u64,
    /// Per mutation kind: cases, cases with a failure.
    pub mutations: BTreeMap<Mutation, (u64, u64)>,
    /// Per mutation kind: cases whose bytes prost rejects.
    pub invalid_by_mutation: BTreeMap<Mutation, u64>,
    /// Per oracle: cases it applied to, cases that broke it.
    pub oracles: BTreeMap<Oracle, (u64, u64)>,
    /// Per validity (`valid`, `utf8_only`, `hlo_invalid`, `invalid`) and outcome (a status or
    /// `error`): cases.
    pub outcomes: BTreeMap<(&'static str, &'static str), u64>,
    /// The slowest case, in seconds.
    pub slowest: f64,
    /// The highest peak heap of a case over its bound, as a fraction of the bound.
    pub worst_memory: f64,
    /// The failing cases kept (at most [`Summary::KEEP_PER_ORACLE`] per oracle).
    pub failures: Vec<Failure>,
}

impl Summary {
    /// Failing inputs kept per oracle.
    pub const KEEP_PER_ORACLE: usize = 8;

    /// Counts a case in.
    pub fn add(&mut self, case: &Case, captures: &[Capture], limits: &Limits) {
        self.cases += 1;
        let v = &case.verdict;
        let failed = case.failures().next().is_some();
        let m = self.mutations.entry(case.mutant.mutation).or_default();
        m.0 += 1;
        m.1 += u64::from(failed);
        if matches!(v.validity, oracle::Validity::Invalid(_)) {
            *self.invalid_by_mutation.entry(case.mutant.mutation).or_default() += 1;
        }
        let outcome = match v.status {
            Some(s) => s.as_str(),
            None if v.error.is_some() => "error",
            None => "panic",
        };
        *self.outcomes.entry((v.validity.name(), outcome)).or_default() += 1;
        for o in Oracle::ALL {
            let applies = match o {
                Oracle::NoPanic | Oracle::NoHang => true,
                Oracle::MemoryBound => v.peak.is_some(),
                Oracle::IncompleteOnDecodeError => matches!(v.validity, oracle::Validity::Invalid(_)),
                Oracle::IncompleteOnHloError => matches!(v.validity, oracle::Validity::HloInvalid(_)),
                Oracle::EscapedOutput => v.status.is_some() || case.cli_run,
                Oracle::NoSignal => case.cli_run,
            };
            let broke = case.failures().any(|(f, _)| *f == o);
            let e = self.oracles.entry(o).or_default();
            e.0 += u64::from(applies || broke);
            e.1 += u64::from(broke);
        }
        self.slowest = self.slowest.max(v.elapsed.as_secs_f64());
        if let Some(peak) = v.peak {
            let bound = limits.memory_bound(case.mutant.bytes.len()) as f64;
            self.worst_memory = self.worst_memory.max(peak as f64 / bound);
        }
        let in_process = case.verdict.failures.len();
        for (k, (o, detail)) in case.failures().enumerate() {
            if self.failures.iter().filter(|f| f.oracle == *o).count() < Self::KEEP_PER_ORACLE {
                self.failures.push(Failure {
                    oracle: *o,
                    detail: detail.clone(),
                    index: case.index,
                    capture: captures[case.capture].name.clone(),
                    mutation: format!("{}: {}", case.mutant.mutation.name(), case.mutant.detail),
                    bytes: case.mutant.bytes.clone(),
                    replayable: k < in_process || !case.cli_shrunk,
                });
            }
        }
    }

    /// Cases that broke `oracle`.
    pub fn failed(&self, oracle: Oracle) -> u64 {
        self.oracles.get(&oracle).map_or(0, |c| c.1)
    }

    /// The counts as text tables: per mutation, per oracle, per validity and outcome.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{} cases", self.cases);
        let _ = writeln!(s, "\n{:<14} {:>8} {:>14} {:>8}", "mutation", "cases", "prost-invalid", "failed");
        for m in Mutation::ALL {
            let (n, f) = self.mutations.get(&m).copied().unwrap_or_default();
            let inv = self.invalid_by_mutation.get(&m).copied().unwrap_or_default();
            let _ = writeln!(s, "{:<14} {n:>8} {inv:>14} {f:>8}", m.name());
        }
        let _ = writeln!(s, "\n{:<28} {:>8} {:>8}", "oracle", "checked", "failed");
        for o in Oracle::ALL {
            let (n, f) = self.oracles.get(&o).copied().unwrap_or_default();
            let _ = writeln!(s, "{:<28} {n:>8} {f:>8}", o.name());
        }
        let _ = writeln!(s, "\n{:<12} {:<16} {:>8}", "prost", "outcome", "cases");
        for ((validity, outcome), n) in &self.outcomes {
            let _ = writeln!(s, "{validity:<12} {outcome:<16} {n:>8}");
        }
        let _ = writeln!(
            s,
            "\nslowest case {:.2} s; highest heap peak {:.0} % of its bound",
            self.slowest,
            self.worst_memory * 100.0
        );
        s
    }
}

/// Runs `config.cases` cases from `config.first`, calling `each` after every case.
pub fn run(
    captures: &[Capture],
    config: &Config,
    probe: Option<&dyn PeakProbe>,
    each: &mut dyn FnMut(&Case, &Summary),
) -> Summary {
    let mut summary = Summary::default();
    for index in config.first..config.first + config.cases {
        let case = run_case(captures, config, index, probe);
        summary.add(&case, captures, &config.limits);
        each(&case, &summary);
    }
    summary
}

/// Shrinks `bytes`, which break `oracle` in process, by deleting whole fields (largest first,
/// length prefixes fixed up) while the smaller input still breaks it, within `budget` scans.
/// Returns the smallest input found.
pub fn minimise(bytes: &[u8], oracle: Oracle, limits: &Limits, budget: usize) -> Vec<u8> {
    let breaks = |b: &[u8]| oracle::check(b, limits, None).failures.iter().any(|(o, _)| *o == oracle);
    let mut best = bytes.to_vec();
    let mut tries = 0;
    'shrink: while tries < budget {
        let structure = Structure::parse(&best);
        let mut order: Vec<usize> = (0..structure.fields.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(structure.fields[i].end - structure.fields[i].start));
        for i in order {
            if tries >= budget {
                break 'shrink;
            }
            let f = &structure.fields[i];
            let smaller = mutate::splice_fixed(&best, &structure, i, f.start..f.end, &[], false);
            tries += 1;
            if breaks(&smaller) {
                best = smaller;
                continue 'shrink;
            }
        }
        break;
    }
    best
}

/// Where a reproducer of `oracle` for `bytes` goes under `dir`:
/// `<oracle>_<FNV-1a hash of the bytes>.xplane.pb`.
pub fn reproducer_path(dir: &Path, oracle: Oracle, bytes: &[u8]) -> PathBuf {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    dir.join(format!("{}_{h:016x}.xplane.pb", oracle.name()))
}

/// The oracle a reproducer's file name says it broke (`<oracle>_<hash>.xplane.pb`).
pub fn oracle_of_reproducer(name: &str) -> Option<Oracle> {
    Oracle::ALL.into_iter().find(|o| name.strip_prefix(o.name()).is_some_and(|rest| rest.starts_with('_')))
}
