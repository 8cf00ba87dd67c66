//! What the commands other than `scan` print (op profile, kernel stats, HLO ops, roofline, budget
//! plans and audits, inventory), and the scan's progress line, timings and error line: JSON
//! values and text, golden-tested in the facade's `tests/`.
//!
//! Examples stay thin: they parse arguments, call the library and print what these functions
//! return. Nothing here prints.

pub mod budget;
pub mod device;
pub mod events;
pub mod hlo;
pub mod kernel_stats;
pub mod memory;
pub mod memory_profile;
pub mod op_profile;
pub mod roofline;

use serde_json::{Value, json};
use xlens_xplane::{PlaneInventory, SpaceSummary};

use crate::text::printable;

/// The progress line a scan redraws on stderr: the bar by bytes of the host files read, the hosts
/// done, and the hosts being worked on (the first, and how many more). It starts before the
/// first host is read and is cleared by [`PROGRESS_CLEAR`] when the scan ends.
///
/// ```
/// let line = xlens_report::tables::progress_line(1, 4, 3 << 30, 6 << 30, &["host0002", "host0003"]);
/// assert_eq!(line, "\r\x1b[2K[===============               ] 1/4 hosts  3.0/6.0 GiB  reading host0002 +1");
/// let start = xlens_report::tables::progress_line(0, 1, 0, 2 << 20, &[]);
/// assert!(start.ends_with("0/1 hosts  0.0/2.0 MiB"));
/// ```
pub fn progress_line(done: usize, total: usize, bytes_done: u64, bytes_total: u64, working: &[&str]) -> String {
    const WIDTH: usize = 30;
    let filled = if bytes_total > 0 {
        ((WIDTH as u128 * u128::from(bytes_done)) / u128::from(bytes_total)).min(WIDTH as u128) as usize
    } else {
        (WIDTH * done / total.max(1)).min(WIDTH)
    };
    let (unit, scale) =
        if bytes_total >= 1 << 30 { ("GiB", (1u64 << 30) as f64) } else { ("MiB", (1u64 << 20) as f64) };
    let mut line = format!(
        "{PROGRESS_CLEAR}[{}{}] {done}/{total} hosts  {:.1}/{:.1} {unit}",
        "=".repeat(filled),
        " ".repeat(WIDTH - filled),
        bytes_done as f64 / scale,
        bytes_total as f64 / scale,
    );
    if let Some(first) = working.first() {
        line.push_str(&format!("  reading {}", printable(first)));
        if working.len() > 1 {
            line.push_str(&format!(" +{}", working.len() - 1));
        }
    }
    line
}

/// The phases of a scan with their wall time, for `xlens scan --timings`: one block per host
/// (hosts by name, phases in the order given: the order they ended), each phase with its
/// milliseconds and its share of the sum of the host's phases (analyses built side by side and
/// detectors overlap, so the sum exceeds the host's wall time), then the phases that belong to
/// no host (`(report)`: the whole `scan`, the `render`).
///
/// ```
/// use std::time::Duration;
/// let rows = vec![
///     ("h0".to_string(), "open".to_string(), Duration::from_millis(30)),
///     ("h0".to_string(), "timeline".to_string(), Duration::from_millis(10)),
///     (String::new(), "render".to_string(), Duration::from_millis(1)),
/// ];
/// let text = xlens_report::tables::timings_text(&rows);
/// let lines: Vec<&str> = text.lines().collect();
/// assert_eq!(lines[0], "h0");
/// assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["open", "30.0", "ms", "75.0", "%"]);
/// assert_eq!(lines[3], "(report)");
/// ```
pub fn timings_text(rows: &[(String, String, std::time::Duration)]) -> String {
    let mut hosts: Vec<&str> = rows.iter().map(|(h, _, _)| h.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    // The host-less phases last.
    hosts.sort_by_key(|h| h.is_empty());
    let width = rows.iter().map(|(_, p, _)| p.len()).max().unwrap_or(0).max(5);
    let mut out = String::new();
    for host in hosts {
        let phases: Vec<_> = rows.iter().filter(|(h, _, _)| h == host).collect();
        let sum: f64 = phases.iter().map(|(_, _, d)| d.as_secs_f64()).sum();
        line(&mut out, format_args!("{}", if host.is_empty() { "(report)".into() } else { printable(host) }));
        for (_, phase, d) in phases {
            let ms = d.as_secs_f64() * 1e3;
            let pct = if sum > 0.0 { 100.0 * d.as_secs_f64() / sum } else { 0.0 };
            line(&mut out, format_args!("  {phase:<width$} {ms:>9.1} ms {pct:>7.1} %"));
        }
    }
    out
}

/// Returns to the start of the line and erases it: what ends a progress line.
pub const PROGRESS_CLEAR: &str = "\r\x1b[2K";

/// An error and its causes as the one line a command prints: `error: opening x: no such file`.
/// Causes whose text the message already contains are not repeated, and line breaks inside a
/// message become spaces, so the line stays one line whatever `RUST_BACKTRACE` says.
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file\nor directory");
/// assert_eq!(xlens_report::tables::error_line(&io), "error: no such file or directory");
/// ```
pub fn error_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        // One line, and no control character of a file or module name reaches the terminal.
        let text = printable(&e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")).into_owned();
        if !text.is_empty() && !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    format!("error: {}", parts.join(": "))
}

/// Appends one line of a text output, its control characters escaped ([`printable`]): names
/// from a profile cannot move the cursor, retitle the terminal or forge a line.
pub(crate) fn line(out: &mut String, text: std::fmt::Arguments<'_>) {
    let text = text.to_string();
    out.push_str(&printable(&text));
    out.push('\n');
}

/// One host's inventory, as given to the renderers.
#[derive(Debug)]
pub struct HostInventory {
    /// Host name.
    pub host: String,
    /// Its planes.
    pub planes: Vec<PlaneInventory>,
}

/// The `inventory --json` document:
/// `{"hosts":[{"host":..,"planes":[{"name":..,"lines":[{"name":..,"events":N}]}]}]}`; a plane
/// whose lines include empty ones adds `"empty_lines": N`.
pub fn inventory_json(hosts: &[HostInventory]) -> Value {
    json!({
        "hosts": hosts.iter().map(|h| json!({
            "host": h.host,
            "planes": h.planes.iter().map(|p| {
                let mut plane = json!({
                    "name": p.name,
                    "lines": p.lines.iter().map(|l| json!({"name": l.name, "events": l.events})).collect::<Vec<_>>(),
                });
                // Lines whose message is empty are counted, not listed.
                if p.empty_lines > 0 {
                    plane["empty_lines"] = json!(p.empty_lines);
                }
                plane
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// The inventory as text: per host, each plane with its event total, then its lines.
pub fn inventory_text(hosts: &[HostInventory]) -> String {
    let mut out = String::new();
    for h in hosts {
        line(&mut out, format_args!("host {}", h.host));
        for p in &h.planes {
            line(&mut out, format_args!("  plane {:<40} {:>10} events  [{}]", p.name, p.events(), p.kind.label()));
            for l in &p.lines {
                let span = match (l.first, l.last) {
                    (Some(a), Some(b)) => format!("{:.3} ms", (b - a).as_ms_f64()),
                    _ => "-".to_owned(),
                };
                line(&mut out, format_args!("    line {:<38} {:>10} events  {}", l.name, l.events, span));
            }
            if p.empty_lines > 0 {
                line(&mut out, format_args!("    {} empty lines (no name, no events)", p.empty_lines));
            }
        }
    }
    out
}

/// The device and host summary of one host, as text.
pub fn summary_text(host: &str, s: &SpaceSummary) -> String {
    let mut out = String::new();
    line(&mut out, format_args!("host {host}"));
    let device = match &s.device_type {
        Some(t) => format!("{} ({t})", s.device_kind.as_str()),
        None => s.device_kind.as_str().to_owned(),
    };
    line(
        &mut out,
        format_args!("  device          {device}, {} cores, {} device planes", s.device_cores, s.device_planes),
    );
    line(&mut out, format_args!("  device events   {}", s.device_events));
    line(&mut out, format_args!("  host threads    {}", s.host_threads));
    line(&mut out, format_args!("  host events     {}", s.host_events));
    line(&mut out, format_args!("  HLO programs    {}", s.hlo_programs));
    if let Some(d) = s.profile_duration {
        line(&mut out, format_args!("  profile length  {:.3} ms", d.as_ms_f64()));
    }
    out
}
