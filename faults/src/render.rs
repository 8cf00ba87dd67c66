//! Renderings of a [`Report`]: text for terminals, JSON for scripts, a self-contained HTML page.
//!
//! All three are pure functions of the report (golden-tested); nothing here prints.

use std::fmt::Write as _;

use crate::finding::{Finding, Scope, fmt_value};
use crate::report::{Charts, HostRow, Metrics, Report};

fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) => format!("{v:.1}{unit}"),
        None => "n/a".to_owned(),
    }
}

/// `name` cut to at most `max` characters for a text column, with `…` where it was cut
/// (kernel names of C++ libraries run to thousands of characters).
///
/// ```
/// use xlens_faults::render::clip;
/// assert_eq!(clip("void ck_tile::kentry<...>", 10), "void ck_t…");
/// assert_eq!(clip("fusion.3", 10), "fusion.3");
/// ```
pub fn clip(name: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if name.chars().count() <= max {
        return std::borrow::Cow::Borrowed(name);
    }
    let kept: String = name.chars().take(max.saturating_sub(1)).collect();
    std::borrow::Cow::Owned(format!("{kept}…"))
}

/// `text` with every control character (ESC, CR, LF, the C1 controls, ...) written as a `\u{..}`
/// escape, as JSON escapes them: names from a profile cannot move the cursor, retitle the
/// terminal or forge a report line.
///
/// ```
/// use xlens_faults::render::printable;
/// assert_eq!(printable("fusion.1"), "fusion.1");
/// assert_eq!(printable("a\u{1b}]0;pwned\u{7}\n[P0] x"), "a\\u{1b}]0;pwned\\u{7}\\u{a}[P0] x");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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

fn health(m: &Metrics) -> String {
    let mut s = String::new();
    line(
        &mut s,
        format_args!(
            "Health    device busy {}  idle {}  host+infeed {}  exposed communication {}{}",
            opt(m.device_busy_pct, "%"),
            opt(m.idle_pct, "%"),
            opt(m.input_bound_pct, "%"),
            opt(m.exposed_communication_pct, "%"),
            // Shares of the step; without step markers, of each module execution.
            if m.time_base == "module_executions" { "  (within module executions)" } else { "" }
        ),
    );
    let memory = match (m.memory_peak_bytes, m.memory_capacity_bytes) {
        (Some(p), Some(c)) => format!("{} of {} ({})", bytes(p), bytes(c), opt(m.memory_peak_pct, "%")),
        (Some(p), None) => format!("{} (capacity unknown)", bytes(p)),
        _ => "n/a".to_owned(),
    };
    line(
        &mut s,
        format_args!(
            "          FLOP utilisation {}  HBM utilisation {}  roofline efficiency {}  memory peak {memory}",
            opt(m.flops_utilization_pct, "%"),
            opt(m.hbm_utilization_pct, "%"),
            opt(m.roofline_efficiency_pct, "%")
        ),
    );
    if m.bound_by.is_some() || m.device_duty_cycle_pct.is_some() {
        line(
            &mut s,
            format_args!(
                "          duty cycle {}  bound by {}  operational intensity {}",
                opt(m.device_duty_cycle_pct, "%"),
                m.bound_by.as_deref().unwrap_or("n/a"),
                m.operational_intensity_flop_per_byte.map_or("n/a".to_owned(), |v| format!("{v:.2} FLOP/B"))
            ),
        );
    }
    s
}

/// The report as text (what `fault_scan` prints).
pub fn text(report: &Report) -> String {
    let mut s = String::new();
    line(&mut s, format_args!("{}", report.summary));
    s.push('\n');
    let p = &report.profile;
    let device = match &p.device_type {
        // `Nvidia GPU (Hopper)`, `TPU v6 Lite` already say which device.
        Some(t) if t.contains(p.device.as_str()) => t.clone(),
        Some(t) => format!("{} ({t})", p.device),
        None => p.device.clone(),
    };
    line(
        &mut s,
        format_args!(
            "Profile   {device}, {} core(s), host(s) {}, {} HLO program(s){}",
            p.cores,
            p.hosts.join(", "),
            p.hlo_programs,
            p.main_program.as_ref().map(|m| format!(", main program {m}")).unwrap_or_default()
        ),
    );
    let m = &report.metrics;
    match (m.step_time_ms_mean, m.time_base.as_str()) {
        (Some(mean), "device_window") => {
            line(
                &mut s,
                format_args!(
                    "Steps     no step markers or program executions: the device window of {mean:.3} ms is the time base"
                ),
            );
        }
        (Some(mean), base) => {
            let label = if base == "module_executions" { "module executions (no step markers)" } else { "steps" };
            let label = if report.hosts.len() > 1 && m.step_count > 0 {
                format!("{label} (each the slowest host's)")
            } else {
                label.to_owned()
            };
            line(
                &mut s,
                format_args!(
                    "Steps     {} {label}: mean {mean:.3} ms, median {:.3} ms, stddev {:.3} ms, min {:.3} ms, max {:.3} ms",
                    m.step_count,
                    m.step_time_ms_median.unwrap_or(0.0),
                    m.step_time_ms_stddev.unwrap_or(0.0),
                    m.step_time_ms_min.unwrap_or(0.0),
                    m.step_time_ms_max.unwrap_or(0.0)
                ),
            );
        }
        (None, _) => {
            line(&mut s, format_args!("Steps     no step markers"));
        }
    }
    if report.hosts.len() > 1 {
        s.push_str(&host_table(&report.hosts, m));
    }
    s.push_str(&health(m));
    if !m.slowest_ops.is_empty() {
        line(&mut s, format_args!("Slowest ops"));
        for (i, op) in m.slowest_ops.iter().enumerate() {
            line(
                &mut s,
                format_args!(
                    "  {}. {:<40} {:<24} {:>10.3} ms {:>6.1}%  {}",
                    i + 1,
                    clip(&op.name, 40),
                    clip(&op.category, 24),
                    op.self_time_ms,
                    op.pct,
                    op.program
                ),
            );
        }
    }
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
/// "warnings"}`, keys in that order, findings in report order. A session is one document.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;\
color:#1d2330;background:#fafbfc}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}\
.status{display:inline-block;padding:.2em .6em;border-radius:.3em;color:#fff;font-weight:600}\
.OPTIMAL{background:#2e7d32}.NEEDS_ATTENTION{background:#c62828}table{border-collapse:collapse;width:100%}\
td,th{text-align:left;padding:.25em .5em;border-bottom:1px solid #eee;font-size:.92em}\
.finding{background:#fff;border:1px solid #ddd;border-radius:.4em;padding:.6em 1em;margin:.8em 0}\
.P0{border-left:6px solid #c62828}.P1{border-left:6px solid #ef6c00}.P2{border-left:6px solid #f9a825}\
.sev{font-weight:700}svg{background:#fff;border:1px solid #ddd;border-radius:.3em}.muted{color:#667}\
code{font-size:.9em}";

fn step_chart(c: &Charts) -> String {
    let (w, h, pad) = (1000.0, 220.0, 40.0);
    if c.step_times_ms.is_empty() {
        return "<p class=\"muted\">No step markers in this profile.</p>".to_owned();
    }
    let max = c.step_times_ms.iter().map(|(_, v)| *v).fold(0.0f64, f64::max).max(1e-9);
    let n = c.step_times_ms.len();
    let bw = (w - 2.0 * pad) / n as f64;
    let mut svg = format!("<svg viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"step times\">");
    for (i, (name, v)) in c.step_times_ms.iter().enumerate() {
        let bh = (h - 2.0 * pad) * v / max;
        let x = pad + i as f64 * bw;
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#3f6fb5\"><title>{} {v:.3} ms</title></rect>",
            h - pad - bh,
            (bw * 0.8).max(1.0),
            escape(name)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{pad}\" y=\"20\" font-size=\"12\">max {max:.3} ms</text><line x1=\"{pad}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/></svg>",
        h - pad,
        w - pad,
        h - pad
    );
    svg
}

fn category_chart(c: &Charts) -> String {
    if c.categories_ms.is_empty() {
        return "<p class=\"muted\">No op timeline in this profile.</p>".to_owned();
    }
    let total: f64 = c.categories_ms.iter().map(|(_, v)| v).sum::<f64>().max(1e-12);
    let (w, row) = (1000.0, 22.0);
    let h = row * c.categories_ms.len() as f64 + 10.0;
    let mut svg = format!("<svg viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"time by category\">");
    for (i, (name, v)) in c.categories_ms.iter().enumerate() {
        let y = 5.0 + i as f64 * row;
        let bw = (w - 330.0) * v / total;
        let _ = write!(
            svg,
            "<text x=\"5\" y=\"{:.1}\" font-size=\"12\">{}</text><rect x=\"220\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"#6a8fcb\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{v:.3} ms ({:.1}%)</text>",
            y + 15.0,
            escape(name),
            row - 6.0,
            225.0 + bw,
            y + 15.0,
            100.0 * v / total
        );
    }
    svg.push_str("</svg>");
    svg
}

fn roofline_chart(c: &Charts) -> String {
    let (Some(peak), Some(bw)) = (c.peak_flops_per_s, c.peak_hbm_bytes_per_s) else {
        return "<p class=\"muted\">The profile reports no device peaks: no roofline.</p>".to_owned();
    };
    if c.roofline.is_empty() || peak <= 0.0 || bw <= 0.0 {
        return "<p class=\"muted\">No ops with FLOPs and bytes to place.</p>".to_owned();
    }
    let (w, h, pad) = (1000.0, 420.0, 50.0);
    // Log-log axes: intensity 1e-2..1e4, FLOP/s peak/1e6..peak*2.
    let (x0, x1) = (-2.0f64, 4.0f64);
    let (y1, y0) = ((peak * 2.0).log10(), (peak / 1e6).log10());
    let px = |oi: f64| pad + (w - 2.0 * pad) * (oi.max(1e-9).log10() - x0) / (x1 - x0);
    let py = |f: f64| h - pad - (h - 2.0 * pad) * (f.max(1e-9).log10() - y0) / (y1 - y0);
    let ridge = peak / bw;
    let mut svg = format!("<svg viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"roofline\">");
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#c62828\" stroke-width=\"2\" points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"/>",
        px(10f64.powf(x0)),
        py(bw * 10f64.powf(x0)),
        px(ridge),
        py(peak),
        px(10f64.powf(x1)),
        py(peak)
    );
    for p in &c.roofline {
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"#3f6fb5\"><title>{}: {:.2} FLOP/byte, {:.3e} FLOP/s, {}</title></circle>",
            px(p.intensity),
            py(p.flops_per_s),
            escape(&p.name),
            p.intensity,
            p.flops_per_s,
            escape(&p.bound)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{pad}\" y=\"{:.1}\" font-size=\"12\">arithmetic intensity (FLOP/byte, log) - ridge {ridge:.1}</text><text x=\"{pad}\" y=\"20\" font-size=\"12\">FLOP/s (log), peak {peak:.3e}</text></svg>",
        h - 15.0
    );
    svg
}

/// The report as a self-contained HTML page (inline CSS and SVG; nothing loaded from a network).
pub fn html(report: &Report) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>xlens fault scan</title><style>{CSS}</style></head><body>"
    );
    let _ = write!(
        s,
        "<h1>xlens fault scan <span class=\"status {}\">{}</span></h1><p>{}</p>",
        report.status.as_str(),
        report.status.as_str(),
        escape(&report.summary)
    );
    let m = &report.metrics;
    let _ = write!(s, "<h2>Health</h2><table>");
    let rows = [
        ("Mean step time", m.step_time_ms_mean.map(|v| format!("{v:.3} ms"))),
        ("Device busy", m.device_busy_pct.map(|v| format!("{v:.1}%"))),
        ("Idle", m.idle_pct.map(|v| format!("{v:.1}%"))),
        ("Host + infeed", m.input_bound_pct.map(|v| format!("{v:.1}%"))),
        ("Exposed communication", m.exposed_communication_pct.map(|v| format!("{v:.1}%"))),
        ("FLOP utilisation", m.flops_utilization_pct.map(|v| format!("{v:.1}%"))),
        ("HBM utilisation", m.hbm_utilization_pct.map(|v| format!("{v:.1}%"))),
        ("Roofline efficiency", m.roofline_efficiency_pct.map(|v| format!("{v:.1}%"))),
        ("Memory peak", m.memory_peak_bytes.map(bytes)),
    ];
    for (k, v) in rows {
        let _ = write!(s, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v.unwrap_or_else(|| "n/a".to_owned())));
    }
    s.push_str("</table>");
    if report.hosts.len() > 1 {
        let _ = write!(s, "<h2>Hosts</h2><pre>{}</pre>", escape(&host_table(&report.hosts, m)));
    }
    let _ = write!(s, "<h2>Step times</h2>{}", step_chart(&report.charts));
    let _ = write!(s, "<h2>Time by category</h2>{}", category_chart(&report.charts));
    let _ = write!(s, "<h2>Roofline of the top ops</h2>{}", roofline_chart(&report.charts));
    let _ = write!(s, "<h2>Findings ({})</h2>", report.findings.len());
    for f in &report.findings {
        let _ = write!(
            s,
            "<div class=\"finding {sev}\"><div><span class=\"sev\">{sev}</span> <code>{}</code> {} <span class=\"muted\">({})</span></div><p>{}</p><p><b>Impact:</b> {} ms per {unit} ({:.1}% of the {unit})</p><ul>",
            escape(&f.id),
            escape(&f.title),
            escape(&where_found(f)),
            escape(&f.what),
            fmt_value(f.impact.ms_per_step),
            f.impact.pct_of_step,
            sev = f.severity.as_str(),
            unit = m.step_unit()
        );
        for e in &f.evidence {
            let _ = write!(s, "<li>{}</li>", escape(&e.to_string()));
        }
        let _ = write!(s, "</ul><p><b>Fix:</b> {}</p></div>", escape(&f.fix));
    }
    if !report.skipped.is_empty() {
        let _ = write!(s, "<h2>Not checked</h2><ul>");
        for k in &report.skipped {
            let _ = write!(s, "<li><code>{}</code>: {}</li>", escape(&k.id), escape(&k.reason));
        }
        s.push_str("</ul>");
    }
    if !report.warnings.is_empty() {
        let _ = write!(s, "<h2>Warnings</h2><ul>");
        for w in &report.warnings {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    }
    s.push_str("</body></html>\n");
    s
}
