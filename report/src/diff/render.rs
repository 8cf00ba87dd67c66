//! A diff as text and as a self-contained HTML page (side by side: the two step-time series,
//! category deltas as diverging bars, the ops that moved most, the findings).

use crate::render::escape;
use std::fmt::Write;

use super::{Diff, MetricDelta};
use crate::render::clip;

/// Ops listed in the text and on the page.
const TOP_OPS: usize = 15;

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

fn signed(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:+.decimals$}"))
}

/// The metric's figures with its unit's precision (bytes as MiB).
fn metric_cells(name: &str, m: &MetricDelta) -> [String; 3] {
    if name.ends_with("_bytes") {
        let mib = |v: Option<f64>| v.map(|b| b / (1u64 << 20) as f64);
        return [opt(mib(m.base), 2), opt(mib(m.new), 2), signed(mib(m.delta), 2)];
    }
    let d = if name.ends_with("_ms_mean") || name.contains("_ms_") { 3 } else { 1 };
    [opt(m.base, d), opt(m.new, d), signed(m.delta, d)]
}

/// The metric's label with its unit.
fn metric_label(name: &str) -> String {
    if let Some(stem) = name.strip_suffix("_bytes") {
        return format!("{stem} (MiB)");
    }
    match name.rsplit_once("_ms_") {
        Some((stem, stat)) => format!("{stem} {stat} (ms)"),
        None => match name.strip_suffix("_pct") {
            // The window of each share (docs/metrics.md): the health block's are of the step,
            // the utilisations and the duty cycle of the profiled time, the memory peak of HBM.
            Some(
                stem @ ("device_duty_cycle"
                | "flops_utilization"
                | "xprof_flops_utilization"
                | "hbm_utilization"
                | "roofline_efficiency"),
            ) => format!("{stem} (% of capture)"),
            Some(stem @ "memory_peak") => format!("{stem} (% of HBM)"),
            Some(stem) => format!("{stem} (% of step)"),
            None => name.to_owned(),
        },
    }
}

/// The diff as text: the verdict, the step time, metrics, categories, the ops that moved most,
/// findings, hosts and warnings.
pub fn text(d: &Diff) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}\n", d.summary);
    let _ = writeln!(s, "Base      {} · {} host(s) · {}", d.base.device, d.base.hosts, d.base.status.as_str());
    let _ = writeln!(s, "New       {} · {} host(s) · {}", d.new.device, d.new.hosts, d.new.status.as_str());
    let st = &d.step_time_ms;
    let ci = st.ci95_pct.map_or_else(|| "n/a".to_owned(), |[lo, hi]| format!("{lo:+.1} .. {hi:+.1} %"));
    let _ = writeln!(
        s,
        "Step      {} -> {} ms ({} ms, {} %), 95 % CI {ci}, {} vs {} {}{}",
        opt(st.base, 3),
        opt(st.new, 3),
        signed(st.delta_ms, 3),
        signed(st.delta_pct, 1),
        st.base_steps,
        st.new_steps,
        st.time_base[1],
        match st.runs {
            [1, 1] => String::new(),
            [b, n] => format!(" over {b} vs {n} runs"),
        }
    );
    let _ = writeln!(s, "\n{:<42} {:>10} {:>12} {:>12}", "Metrics (mean of each side)", "base", "new", "delta");
    for (name, m) in &d.metrics {
        let [b, n, delta] = metric_cells(name, m);
        let _ = writeln!(s, "  {:<40} {b:>10} {n:>12} {delta:>12}", metric_label(name));
    }
    let _ = writeln!(s, "\nCategories (ms per step, over the devices that ran ops)");
    let _ = writeln!(s, "{:<34} {:>10} {:>12} {:>12}", "", "base", "new", "delta");
    for c in d.categories.iter().filter(|c| c.delta_ms_per_step.abs() > 0.0005).take(12) {
        let _ = writeln!(
            s,
            "  {:<32} {:>10.3} {:>12.3} {:>+12.3}",
            clip(&c.category, 32),
            c.base_ms_per_step,
            c.new_ms_per_step,
            c.delta_ms_per_step
        );
    }
    let _ = writeln!(s, "\nOps that moved most (ms per step, over the devices that ran them)");
    let _ = writeln!(s, "{:<34} {:>10} {:>12} {:>12}  status", "", "base", "new", "delta");
    for o in d.ops.iter().take(TOP_OPS) {
        let _ = writeln!(
            s,
            "  {:<32} {:>10} {:>12} {:>+12.3}  {} ({})",
            clip(&o.name, 32),
            opt(o.base_ms_per_step, 3),
            opt(o.new_ms_per_step, 3),
            o.delta_ms_per_step,
            o.status,
            clip(&o.program, 40)
        );
    }
    findings_text(&mut s, d);
    if d.hosts.len() > 1 {
        let _ = writeln!(s, "\nHosts (mean step ms)                  base          new        delta");
        for h in &d.hosts {
            let _ = writeln!(
                s,
                "  {:<32} {:>10} {:>12} {:>11} %",
                h.host,
                opt(h.base_ms, 3),
                opt(h.new_ms, 3),
                signed(h.delta_pct, 1)
            );
        }
        let _ = writeln!(
            s,
            "  slowest host: {} -> {}",
            d.straggler.base.as_deref().unwrap_or("n/a"),
            d.straggler.new.as_deref().unwrap_or("n/a")
        );
    }
    if !d.warnings.is_empty() {
        let _ = writeln!(s, "\nWarnings");
        for w in &d.warnings {
            let _ = writeln!(s, "  - {w}");
        }
    }
    crate::render::printable_lines(&s)
}

fn findings_text(s: &mut String, d: &Diff) {
    let f = &d.findings;
    for (label, list) in [("Resolved", &f.resolved), ("New", &f.new), ("Persisting", &f.persisting)] {
        let _ = writeln!(s, "\n{label} findings ({})", list.len());
        for x in list {
            let _ = writeln!(
                s,
                "  [{}] {} - {}: {:.3} ms per step ({:.1} %)",
                x.severity.as_str(),
                x.id,
                x.title,
                x.impact.ms_per_step,
                x.impact.pct_of_step
            );
        }
    }
}

const CSS: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em auto;max-width:1100px;\
padding:0 .8em;color:#1d2330;background:#fafbfc}h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.5em;\
border-bottom:1px solid #ddd}.verdict{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;\
font-weight:600}.IMPROVED{background:#2e7d32}.REGRESSED{background:#c62828}.NEUTRAL{background:#546e7a}\
.INCOMPARABLE{background:#8d6e63}.wrap{overflow-x:auto}table{border-collapse:collapse;width:100%}\
td,th{text-align:left;padding:.25em .5em;border-bottom:1px solid #eee;font-size:.9em;overflow-wrap:anywhere}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}svg{background:#fff;border:1px solid #ddd;\
border-radius:.3em;max-width:100%;height:auto}.muted{color:#667}.better{color:#2e7d32}.worse{color:#c62828}\
p{overflow-wrap:anywhere}";

/// The diff as a self-contained page (inline CSS and SVG, nothing loaded from a network).
pub fn html(d: &Diff) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width,initial-scale=1\"><title>xlens profile diff</title><style>{CSS}</style>\
         </head><body><h1>xlens profile diff <span class=\"verdict {v}\">{v}</span></h1><p>{}</p>",
        escape(&d.summary),
        v = d.verdict.as_str()
    );
    let _ = write!(s, "<h2>Step times (ms)</h2>{}", step_series_svg(d));
    let _ = write!(s, "<h2>Time per step by category (ms)</h2>{}", category_svg(d));
    s.push_str("<h2>Health</h2><div class=\"wrap\"><table><tr><th>figure</th><th class=\"n\">base</th><th class=\"n\">new</th><th class=\"n\">delta</th></tr>");
    for (name, m) in &d.metrics {
        let [b, n, delta] = metric_cells(name, m);
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"n\">{b}</td><td class=\"n\">{n}</td><td class=\"n\">{delta}</td></tr>",
            escape(&metric_label(name))
        );
    }
    s.push_str("</table></div><h2>Ops that moved most (ms per step, over the devices that ran them)</h2><div class=\"wrap\"><table><tr><th>op</th><th>program</th><th>status</th><th class=\"n\">base</th><th class=\"n\">new</th><th class=\"n\">delta</th></tr>");
    for o in d.ops.iter().take(TOP_OPS) {
        let class = if o.delta_ms_per_step < 0.0 { "better" } else { "worse" };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n {class}\">{:+.3}</td></tr>",
            escape(&o.name),
            escape(&o.program),
            escape(&o.status),
            opt(o.base_ms_per_step, 3),
            opt(o.new_ms_per_step, 3),
            o.delta_ms_per_step
        );
    }
    s.push_str("</table></div>");
    let f = &d.findings;
    for (label, list) in [("Resolved", &f.resolved), ("New", &f.new), ("Persisting", &f.persisting)] {
        let _ = write!(s, "<h2>{label} findings ({})</h2><ul>", list.len());
        for x in list {
            let _ = write!(
                s,
                "<li><b>{}</b> <code>{}</code> {}: {:.3} ms per step ({:.1} %)</li>",
                x.severity.as_str(),
                escape(&x.id),
                escape(&x.title),
                x.impact.ms_per_step,
                x.impact.pct_of_step
            );
        }
        s.push_str("</ul>");
    }
    if !d.warnings.is_empty() {
        s.push_str("<h2>Warnings</h2><ul>");
        for w in &d.warnings {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    }
    s.push_str("</body></html>\n");
    s
}

/// Both runs' step times as two series over the step index, with a labelled y axis.
fn step_series_svg(d: &Diff) -> String {
    let (b, n) = (&d.step_series_ms.base, &d.step_series_ms.new);
    if b.is_empty() && n.is_empty() {
        return "<p class=\"muted\">No steps in either run.</p>".to_owned();
    }
    let (w, h, left, bottom, top) = (800.0, 260.0, 60.0, 30.0, 20.0);
    let max = b.iter().chain(n.iter()).copied().fold(0.0f64, f64::max).max(1e-9);
    let steps = b.len().max(n.len()).max(2) - 1;
    let x = |i: usize| left + (w - left - 20.0) * i as f64 / steps as f64;
    let y = |v: f64| h - bottom - (h - bottom - top) * v / max;
    let mut svg =
        format!("<svg viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"step times of both runs\">");
    for k in 0..=4 {
        let v = max * k as f64 / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"end\">{v:.2}</text>",
            w - 20.0,
            left - 6.0,
            y(v) + 4.0,
            y = y(v)
        );
    }
    for (series, colour, label) in [(b, "#78909c", "base"), (n, "#3f6fb5", "new")] {
        let points: Vec<String> = series.iter().enumerate().map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v))).collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"><title>{label}</title></polyline>",
            points.join(" ")
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{left}\" y=\"{}\" font-size=\"13\">step (0 to {steps}) · <tspan fill=\"#78909c\">base</tspan> · <tspan fill=\"#3f6fb5\">new</tspan></text></svg>",
        h - 8.0
    );
    svg
}

/// Category deltas as diverging bars around zero: left (green) faster, right (red) slower.
fn category_svg(d: &Diff) -> String {
    let cats: Vec<_> = d.categories.iter().filter(|c| c.delta_ms_per_step.abs() > 0.0005).take(12).collect();
    if cats.is_empty() {
        return "<p class=\"muted\">No category changed.</p>".to_owned();
    }
    let (w, row) = (800.0, 26.0);
    let h = row * cats.len() as f64 + 10.0;
    let max = cats.iter().map(|c| c.delta_ms_per_step.abs()).fold(0.0f64, f64::max).max(1e-9);
    // Room on the right of the longest bar for its label (and on the left, beyond the names).
    let (mid, half) = (w / 2.0 + 100.0, w / 2.0 - 170.0);
    let mut svg = format!("<svg viewBox=\"0 0 {w} {h}\" width=\"100%\" role=\"img\" aria-label=\"category deltas\">");
    let _ = write!(svg, "<line x1=\"{mid}\" x2=\"{mid}\" y1=\"0\" y2=\"{h}\" stroke=\"#999\"/>");
    for (i, c) in cats.iter().enumerate() {
        let y0 = 5.0 + i as f64 * row;
        let len = half * c.delta_ms_per_step.abs() / max;
        let (x0, colour) = if c.delta_ms_per_step < 0.0 { (mid - len, "#2e7d32") } else { (mid, "#c62828") };
        let _ = write!(
            svg,
            "<text x=\"4\" y=\"{:.1}\" font-size=\"13\">{}</text><rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{len:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{:.3} -> {:.3} ms</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"{}\">{:+.3}</text>",
            y0 + 16.0,
            escape(&clip(&c.category, 28)),
            row - 8.0,
            c.base_ms_per_step,
            c.new_ms_per_step,
            if c.delta_ms_per_step < 0.0 { x0 - 4.0 } else { x0 + len + 4.0 },
            y0 + 16.0,
            if c.delta_ms_per_step < 0.0 { "end" } else { "start" },
            c.delta_ms_per_step
        );
    }
    svg.push_str("</svg>");
    svg
}
