//! Many runs of a logdir at a glance (`xlens runs`, `xlens watch`): one summary per run, its
//! verdict, step time and top finding, and the step time's change from the run before.

use serde::{Deserialize, Serialize};

use crate::render::clip;
use xlens_faults::Report;

/// One run of a logdir, summarised (a line of `xlens runs`, a JSON line of `xlens watch`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's name (its directory under `plugins/profile`).
    pub run: String,
    /// When it was captured (UTC, `YYYY-MM-DD HH:MM:SS`): from the run's name when XProf named
    /// it by time, else from its newest host file.
    pub captured: String,
    /// Host files.
    pub hosts: usize,
    /// Bytes of all its host files.
    pub size_bytes: u64,
    /// `OPTIMAL`, `NEEDS_ATTENTION`, `INCOMPLETE`, or `ERROR` when it could not be scanned.
    pub status: String,
    /// Mean step time (ms), when the run has steps.
    pub step_time_ms: Option<f64>,
    /// Change of the mean step time from the run before it (in %, positive is slower).
    pub step_time_change_pct: Option<f64>,
    /// Findings.
    pub findings: usize,
    /// The first finding: `P0 host_callback_stall (45.2 % of the step)`.
    pub top_finding: Option<String>,
    /// Why the run could not be scanned.
    pub error: Option<String>,
    /// The hardware, as `diff` names it (`CPU`, `NVIDIA H200 (…)`): a run's step time is compared
    /// only with a run on the same hardware.
    #[serde(default)]
    pub device: Option<String>,
    /// The main program (`jit_train_step`), as `diff` names it: a run's step time is compared only
    /// with a run of the same program.
    #[serde(default)]
    pub main_program: Option<String>,
}

impl RunSummary {
    /// The summary of a scanned run.
    pub fn of(run: &str, captured: String, size_bytes: u64, report: &Report) -> RunSummary {
        let unit = report.metrics.step_unit();
        let info = crate::diff::run_info(report);
        RunSummary {
            run: run.to_owned(),
            captured,
            hosts: report.profile.hosts.len() + report.skipped_hosts.len(),
            size_bytes,
            status: report.status.as_str().to_owned(),
            step_time_ms: report.metrics.step_time_ms_mean,
            step_time_change_pct: None,
            findings: report.findings.len(),
            top_finding: report
                .findings
                .first()
                .map(|f| format!("{} {} ({:.1} % of the {unit})", f.severity.as_str(), f.id, f.impact.pct_of_step)),
            error: None,
            device: Some(info.device),
            main_program: info.main_program,
        }
    }

    /// The summary of a run that could not be scanned.
    pub fn failed(run: &str, captured: String, hosts: usize, size_bytes: u64, error: String) -> RunSummary {
        RunSummary {
            run: run.to_owned(),
            captured,
            hosts,
            size_bytes,
            status: "ERROR".to_owned(),
            step_time_ms: None,
            step_time_change_pct: None,
            findings: 0,
            top_finding: None,
            error: Some(error),
            device: None,
            main_program: None,
        }
    }
}

/// Fills each run's [`RunSummary::step_time_change_pct`] from the closest earlier run (in the
/// order given) that has a step time and is comparable, as `diff` decides: the same hardware
/// and, where both name one, the same main program. A CPU test run is never compared with a GPU
/// run, nor a training step with an inference step.
pub fn compare_runs(runs: &mut [RunSummary]) {
    for i in 0..runs.len() {
        let change = runs[i].step_time_ms.and_then(|now| {
            let before = runs[..i].iter().rev().find(|b| b.step_time_ms.is_some() && comparable(b, &runs[i]))?;
            let before = before.step_time_ms.filter(|&b| b > 0.0)?;
            Some(100.0 * (now - before) / before)
        });
        runs[i].step_time_change_pct = change;
    }
}

/// Whether two runs' step times compare: same hardware, same main program where both name one.
fn comparable(a: &RunSummary, b: &RunSummary) -> bool {
    let programs = match (&a.main_program, &b.main_program) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    };
    a.device == b.device && programs
}

/// When a run was captured: XProf names runs `YYYY_MM_DD_HH_MM_SS` (UTC); other names take the
/// newest host file's modification time (seconds since the Unix epoch), else `unknown`.
///
/// ```
/// use xlens_report::runs::capture_time;
/// assert_eq!(capture_time("2026_03_01_09_15_42", None), "2026-03-01 09:15:42");
/// assert_eq!(capture_time("my-run", Some(0)), "1970-01-01 00:00:00");
/// assert_eq!(capture_time("my-run", None), "unknown");
/// ```
pub fn capture_time(run: &str, modified_unix_s: Option<i64>) -> String {
    let parts: Vec<&str> = run.split('_').collect();
    let numeric = parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if parts.len() == 6 && numeric && parts[0].len() == 4 {
        return format!("{}-{}-{} {}:{}:{}", parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
    }
    modified_unix_s.map_or_else(|| "unknown".to_owned(), utc_time)
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS` (UTC, proleptic Gregorian calendar).
fn utc_time(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (the "days from civil" algorithm, inverted).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

/// The runs as a table, one line per run in the order given.
pub fn runs_text(runs: &[RunSummary]) -> String {
    let mut s = format!(
        "{:<28} {:<19} {:>5} {:>10} {:<15} {:>11} {:>8} {:>8}  {}\n",
        "RUN", "CAPTURED (UTC)", "HOSTS", "SIZE MiB", "STATUS", "STEP ms", "CHANGE", "FINDINGS", "TOP FINDING"
    );
    for r in runs {
        let step = r.step_time_ms.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
        let change = r.step_time_change_pct.map_or_else(|| "-".to_owned(), |v| format!("{v:+.1}%"));
        let top = match (&r.top_finding, &r.error) {
            (_, Some(e)) => clip(e, 80).into_owned(),
            (Some(t), None) => t.clone(),
            (None, None) => "-".to_owned(),
        };
        s.push_str(&format!(
            "{:<28} {:<19} {:>5} {:>10.1} {:<15} {:>11} {:>8} {:>8}  {top}\n",
            clip(&r.run, 28),
            r.captured,
            r.hosts,
            r.size_bytes as f64 / (1u64 << 20) as f64,
            r.status,
            step,
            change,
            r.findings,
        ));
    }
    crate::render::printable_lines(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, step: Option<f64>) -> RunSummary {
        RunSummary { step_time_ms: step, ..RunSummary::failed(name, "unknown".into(), 1, 0, String::new()) }
    }

    #[test]
    fn change_is_against_the_last_run_with_a_step_time() {
        let mut runs = vec![run("a", Some(10.0)), run("b", None), run("c", Some(12.5)), run("d", Some(10.0))];
        compare_runs(&mut runs);
        let change: Vec<Option<f64>> = runs.iter().map(|r| r.step_time_change_pct).collect();
        assert_eq!(change, [None, None, Some(25.0), Some(-20.0)]);
    }

    /// A run is compared with the closest earlier run on the same hardware running the same
    /// program: a CPU test between two H200 runs is skipped over, never compared (it once read
    /// +4964 %).
    #[test]
    fn change_is_against_a_comparable_run_only() {
        let on = |name: &str, step: f64, device: &str, program: &str| RunSummary {
            device: Some(device.into()),
            main_program: Some(program.into()),
            ..run(name, Some(step))
        };
        let mut runs = vec![
            on("a", 10.0, "H200", "jit_train_step"),
            on("b", 500.0, "CPU", "jit_train_step"),
            on("c", 11.0, "H200", "jit_train_step"),
            on("d", 1.0, "H200", "jit_infer"),
            on("e", 600.0, "CPU", "jit_train_step"),
        ];
        compare_runs(&mut runs);
        let change: Vec<Option<f64>> = runs.iter().map(|r| r.step_time_change_pct.map(|c| c.round())).collect();
        assert_eq!(change, [None, None, Some(10.0), None, Some(20.0)]);
    }

    #[test]
    fn utc_times_match_known_dates() {
        assert_eq!(utc_time(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc_time(1_798_761_599), "2026-12-31 23:59:59");
        assert_eq!(utc_time(-1), "1969-12-31 23:59:59");
        assert_eq!(capture_time("2026_1_x_0_0_0", Some(86_400)), "1970-01-02 00:00:00");
    }

    #[test]
    fn the_table_has_a_line_per_run() {
        let mut b = run("b", Some(2.0));
        b.error = None;
        b.top_finding = Some("P1 recompilation (3.0 % of the step)".into());
        let text = runs_text(&[run("a", Some(1.0)), b]);
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().nth(2).unwrap().ends_with("P1 recompilation (3.0 % of the step)"), "{text}");
    }
}
