//! Renderings of a [`Report`]: text for terminals, JSON for scripts, a self-contained HTML page.
//!
//! All three are pure functions of the report (golden-tested); nothing here prints.

mod format;
mod html;
mod layout;
mod roofline_chart;
mod step_chart;

pub use html::html;

/// One format a report is written in: the name `xlens scan --format` takes, and the function that
/// writes it (a pure function of the report).
#[derive(Clone, Copy, Debug)]
pub struct Format {
    /// The name on the command line and in `xlens.toml` (`output.format`).
    pub name: &'static str,
    /// What it is, for `--help`.
    pub about: &'static str,
    /// The document, as written to stdout.
    pub render: fn(&Report) -> String,
}

/// Every format of a report, the one list the command line offers: a new format is a function
/// here and an entry in this list, and `--format` takes it.
pub static FORMATS: &[Format] = &[
    Format { name: "text", about: "The text report", render: text },
    Format { name: "json", about: "The JSON document", render: json_document },
    Format { name: "html", about: "The self-contained HTML page", render: html },
];

/// The format named `name` ([`FORMATS`]).
///
/// ```
/// let json = xlens_report::render::format("json").unwrap();
/// assert_eq!(json.name, "json");
/// assert!(xlens_report::render::format("yaml").is_none());
/// ```
pub fn format(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

/// [`json`] as a document on stdout: with its final line feed.
fn json_document(report: &Report) -> String {
    json(report) + "\n"
}

pub(crate) use crate::text::escape_controls;
pub use crate::text::{clip, column_width, printable, printable_lines};
pub(crate) use format::escape;

use xlens_faults::{Finding, HostRow, Metrics, Report, Scope, fmt_value};
use xlens_roofline::Framework;

fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) => format!("{v:.1}{unit}"),
        None => "n/a".to_owned(),
    }
}

/// Appends one line of the text report, its control characters escaped ([`printable`]).
fn line(s: &mut String, text: std::fmt::Arguments<'_>) {
    let text = text.to_string();
    s.push_str(&printable(&text));
    s.push('\n');
}

fn bytes(v: u64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    const GIB: f64 = (1u64 << 30) as f64;
    let f = v as f64;
    if f >= GIB { format!("{:.2} GiB", f / GIB) } else { format!("{:.2} MiB", f / MIB) }
}

/// Where a finding was found, for its header: `host h0`, `4 hosts: h0, h1, h2, h3`,
/// `1000 hosts: h0, h1, h2 and 997 more`, or `session`.
fn where_found(f: &Finding) -> String {
    if f.scope == Scope::Session {
        return "session".to_owned();
    }
    match f.hosts.len() {
        0 | 1 => format!("host {}", f.host),
        n => {
            let names: Vec<&str> = f.host_names().take(if n > 4 { 3 } else { 4 }).collect();
            let more = if n > 4 { format!(" and {} more", n - 3) } else { String::new() };
            format!("{n} hosts: {}{more}", names.join(", "))
        }
    }
}

/// Rows of the host table that text shows: the slowest first, at most this many.
const HOST_ROWS: usize = 10;

/// The per-host step table, slowest hosts first (a session of more hosts lists the slowest
/// and counts the rest, naming the fastest).
fn host_table(rows: &[HostRow], m: &Metrics) -> String {
    let mut s = String::new();
    let mut sorted: Vec<&HostRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        b.step_time_ms_mean.unwrap_or(-1.0).total_cmp(&a.step_time_ms_mean.unwrap_or(-1.0)).then(a.host.cmp(&b.host))
    });
    let pace = match &m.step_time_host {
        Some(h) => format!("; the session runs at the pace of {h}, the slowest"),
        None => String::new(),
    };
    line(&mut s, format_args!("Hosts     {} hosts{pace}", rows.len()));
    let width = sorted.iter().take(HOST_ROWS).map(|r| r.host.chars().count()).max().unwrap_or(4).clamp(4, 40);
    line(
        &mut s,
        format_args!(
            "  {:<width$}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}  {:>6}",
            "host", "steps", "mean ms", "median ms", "max ms", "compute ms", "idle %", "FLOP %"
        ),
    );
    let cell = |v: Option<f64>, digits: usize| v.map_or("n/a".to_owned(), |v| format!("{v:.digits$}"));
    for r in sorted.iter().take(HOST_ROWS) {
        line(
            &mut s,
            format_args!(
                "  {:<width$}  {:>6}  {:>10}  {:>10}  {:>10}  {:>10}  {:>6}  {:>6}{}",
                clip(&r.host, width),
                r.step_count,
                cell(r.step_time_ms_mean, 3),
                cell(r.step_time_ms_median, 3),
                cell(r.step_time_ms_max, 3),
                cell(r.compute_ms_mean, 3),
                cell(r.idle_pct, 1),
                cell(r.flops_utilization_pct, 1),
                if r.slowest { "  slowest" } else { "" }
            ),
        );
    }
    if sorted.len() > HOST_ROWS
        && let Some(fastest) = sorted.last()
    {
        line(
            &mut s,
            format_args!(
                "  ... {} more hosts, the fastest {} at {} ms",
                sorted.len() - HOST_ROWS,
                fastest.host,
                cell(fastest.step_time_ms_mean, 3)
            ),
        );
    }
    s
}

/// The memory peak with the capacity: `15.00 GiB of 16.00 GiB (93.8%)`, `6.28 MiB (capacity
/// unknown)` or `n/a`.
fn memory_peak(m: &Metrics) -> String {
    match (m.memory_peak_bytes, m.memory_capacity_bytes) {
        (Some(p), Some(c)) => format!("{} of {} ({})", bytes(p), bytes(c), opt(m.memory_peak_pct, "%")),
        (Some(p), None) => format!("{} (capacity unknown)", bytes(p)),
        _ => "n/a".to_owned(),
    }
}

/// How a figure the profile cannot give reads on the page.
pub(crate) const UNKNOWN: &str = "unknown (no cost model)";

fn health(m: &Metrics) -> String {
    let mut s = String::new();
    // On PyTorch/XLA the shares are of the loop's iteration (each step to the next marker).
    let per = match m.loop_iteration_ms_mean {
        Some(ms) => format!("per loop iteration ({ms:.3} ms, each step to the next step's marker)"),
        None => "per step".to_owned(),
    };
    line(
        &mut s,
        format_args!(
            "Health    {per}: device busy {}  idle {} (waiting on the host {})  infeed/outfeed {}  exposed communication {}{}",
            opt(m.device_busy_pct, "%"),
            opt(m.idle_pct, "%"),
            opt(m.host_wait_pct, "%"),
            opt(m.input_bound_pct, "%"),
            opt(m.exposed_communication_pct, "%"),
            // Shares of the step; without step markers, of each module execution.
            if m.time_base == "module_executions" { "  (within module executions)" } else { "" }
        ),
    );
    let memory = memory_peak(m);
    // Unknown, not zero, where no op carries a cost (`Metrics::utilization_unknown`).
    let unknown = m.utilization_unknown.is_some();
    let util = |v: Option<f64>| if unknown { "unknown".to_owned() } else { opt(v, "%") };
    line(
        &mut s,
        format_args!(
            "          FLOP utilisation {}{}  HBM utilisation {}  roofline efficiency {}{}  memory peak {memory}",
            util(m.flops_utilization_pct),
            m.xprof_flops_utilization_if_different().map_or(String::new(), |x| format!(" (XProf counts {x:.1}%)")),
            util(m.hbm_utilization_pct),
            util(m.roofline_efficiency_pct),
            if unknown { " (no op carries a cost: no cost model)" } else { "" }
        ),
    );
    if m.bound_by.is_some() || m.device_duty_cycle_pct.is_some() {
        line(
            &mut s,
            format_args!(
                "          duty cycle over the capture {}  bound by {}  operational intensity {}",
                opt(m.device_duty_cycle_pct, "%"),
                m.bound_by.as_deref().unwrap_or(if unknown { "unknown" } else { "n/a" }),
                m.operational_intensity_flop_per_byte
                    .map_or_else(|| if unknown { "unknown" } else { "n/a" }.to_owned(), |v| format!("{v:.2} FLOP/B"))
            ),
        );
    }
    s
}

/// The step-time summary of a report, as the text report's `Steps` line says it: the count, the
/// time base and the mean, median, stddev, min and max in ms (3 decimals).
fn steps_sentence(report: &Report) -> String {
    let m = &report.metrics;
    match (m.step_time_ms_mean, m.time_base.as_str()) {
        (Some(mean), "device_window") => {
            format!("no step markers or program executions: the device window of {mean:.3} ms is the time base")
        }
        (Some(mean), base) => {
            let label = if base == "module_executions" { "module executions (no step markers)" } else { "steps" };
            let label = if report.hosts.len() > 1 && m.step_count > 0 {
                format!("{label} (each the slowest host's)")
            } else {
                label.to_owned()
            };
            format!(
                "{} {label}: mean {mean:.3} ms, median {:.3} ms, stddev {:.3} ms, min {:.3} ms, max {:.3} ms",
                m.step_count,
                m.step_time_ms_median.unwrap_or(0.0),
                m.step_time_ms_stddev.unwrap_or(0.0),
                m.step_time_ms_min.unwrap_or(0.0),
                m.step_time_ms_max.unwrap_or(0.0)
            )
        }
        (None, _) => "no step markers".to_owned(),
    }
}

/// What was scanned, as the text report's `Profile` line says it: device, cores, hosts, programs.
fn profile_sentence(report: &Report) -> String {
    let p = &report.profile;
    let device = match &p.device_type {
        // `Nvidia GPU (Hopper)`, `TPU v6 Lite` already say which device.
        Some(t) if t.contains(p.device.as_str()) => t.clone(),
        Some(t) => format!("{} ({t})", p.device),
        None => p.device.clone(),
    };
    format!(
        "{device}, {} core(s), host(s) {}, {} HLO program(s){}",
        p.cores,
        p.hosts.join(", "),
        p.hlo_programs,
        p.main_program.as_ref().map(|m| format!(", main program {m}")).unwrap_or_default()
    )
}

/// What the header says of the framework: which one (and whether XLA ran), and what in the
/// capture says so; an unknown one says that the fixes stay framework-neutral.
pub(crate) fn framework_sentence(report: &Report) -> String {
    let f = &report.framework;
    match (f.name, f.evidence.is_empty()) {
        (Framework::Unknown, true) => {
            "unknown: nothing in the profile names it (fixes are framework-neutral)".to_owned()
        }
        (Framework::Unknown, false) => format!("unknown: {} (fixes are framework-neutral)", f.evidence),
        (_, true) => f.describe(),
        (_, false) => format!("{}, from {}", f.describe(), f.evidence),
    }
}

/// The text report's `Slowest ops` list (nothing without ops).
fn slowest_ops(s: &mut String, m: &Metrics) {
    if m.slowest_ops.is_empty() {
        return;
    }
    line(s, format_args!("Slowest ops (self time summed over the capture, share of all op time)"));
    for (i, op) in m.slowest_ops.iter().enumerate() {
        line(
            s,
            format_args!(
                "  {}. {:<40} {:<24} {:>10.3} ms {:>6.1}%  {}",
                i + 1,
                clip(&op.name, 40),
                clip(&op.category, 24),
                op.self_time_ms,
                op.pct,
                match op.kernels {
                    Some(n) => format!("{} ({n} kernel{})", op.program, if n == 1 { "" } else { "s" }),
                    None => op.program.clone(),
                }
            ),
        );
    }
}

/// The report as text (what `fault_scan` prints).
pub fn text(report: &Report) -> String {
    let mut s = String::new();
    line(&mut s, format_args!("{}", report.summary));
    s.push('\n');
    line(&mut s, format_args!("Profile   {}", profile_sentence(report)));
    line(&mut s, format_args!("Framework {}", framework_sentence(report)));
    let m = &report.metrics;
    line(&mut s, format_args!("Steps     {}", steps_sentence(report)));
    if report.hosts.len() > 1 {
        s.push_str(&host_table(&report.hosts, m));
    }
    s.push_str(&health(m));
    slowest_ops(&mut s, m);
    s.push('\n');
    line(&mut s, format_args!("Findings ({})", report.findings.len()));
    for f in &report.findings {
        line(&mut s, format_args!("[{}] {} - {} ({})", f.severity, f.id, f.title, where_found(f)));
        line(&mut s, format_args!("     {}", f.what));
        let unit = m.step_unit();
        line(
            &mut s,
            format_args!(
                "     impact: {} ms per {unit} ({:.1}% of the {unit})",
                fmt_value(f.impact.ms_per_step),
                f.impact.pct_of_step
            ),
        );
        line(&mut s, format_args!("     evidence:"));
        for e in &f.evidence {
            line(&mut s, format_args!("       - {e}"));
        }
        line(&mut s, format_args!("     fix: {}", f.fix));
    }
    if !report.skipped.is_empty() {
        s.push('\n');
        line(&mut s, format_args!("Not checked ({})", report.skipped.len()));
        for k in &report.skipped {
            line(&mut s, format_args!("  - {}: {}", k.id, k.reason));
        }
    }
    if !report.disabled_by.is_empty() {
        s.push('\n');
        line(&mut s, format_args!("Disabled ({})", report.disabled_by.len()));
        for (id, by) in &report.disabled_by {
            line(&mut s, format_args!("  - {id}: by {by}"));
        }
    }
    if !report.warnings.is_empty() {
        s.push('\n');
        line(&mut s, format_args!("Warnings ({})", report.warnings.len()));
        for w in &report.warnings {
            line(&mut s, format_args!("  - {w}"));
        }
    }
    s
}

/// The report as JSON: `{"status","summary","profile","metrics","hosts","findings","skipped",
/// "detectors_run","disabled_by","skipped_hosts","errors","warnings","comparison"}`, keys in that order, findings in report order. A session is one document.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
