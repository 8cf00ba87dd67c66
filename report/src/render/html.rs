//! The HTML summary page: one self-contained file (inline CSS and SVG, no script, nothing
//! loaded), readable from a phone (420 px) to a desktop. Charts are drawn twice, wide and
//! narrow, and CSS shows the one that fits, so that their text stays legible.

use std::fmt::Write as _;

use super::format::{escape, inline_code, si};
use super::layout::BREAKPOINT_PX;
use super::step_chart::{ANATOMY_COLORS, MAX_PANELS};
use super::{
    bytes, framework_sentence, memory_peak, profile_sentence, roofline_chart, step_chart, steps_sentence, where_found,
};
use crate::tables::kernel_stats::{HostKernelStats, kernel_stats_json_of};
use crate::tables::memory::memory_json;
use serde_json::Value;
use xlens_faults::{
    ANATOMY_CLASSES, Charts, Finding, HostRow, KernelChart, MemoryChart, Metrics, Report, StepSeries, TimeUnit, TopOp,
    fmt_value,
};

fn css() -> String {
    format!(
        "*{{box-sizing:border-box}}\
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#fafbfc;line-height:1.45}}\
main{{max-width:1100px;margin:0 auto;padding:1.2em 1.5em 3em}}\
h1{{font-size:1.6em;margin:.3em 0}}h2{{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}}h3{{font-size:1em;margin:1.2em 0 .4em;overflow-wrap:anywhere}}\
p,li,.fhead{{overflow-wrap:break-word}}.muted{{color:#667}}.note{{color:#556;font-size:.9em}}\
code{{font-size:.9em;background:#eef1f5;padding:0 .25em;border-radius:.2em;overflow-wrap:anywhere}}\
.status{{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;font-weight:600;font-size:.8em;vertical-align:.15em}}\
.OPTIMAL{{background:#2e7d32}}.NEEDS_ATTENTION{{background:#c62828}}.INCOMPLETE{{background:#6d4c41}}\
.scroll{{overflow-x:auto;max-width:100%}}table{{border-collapse:collapse;width:100%}}\
td,th{{text-align:left;padding:.3em .5em;border-bottom:1px solid #eee;font-size:.92em;vertical-align:top;overflow-wrap:anywhere}}\
th{{font-weight:600}}th,td.n{{overflow-wrap:normal}}\
.tiles{{display:grid;grid-template-columns:repeat(auto-fill,minmax(10.5em,1fr));gap:.5em}}\
.tile{{background:#fff;border:1px solid #e0e3e8;border-radius:.35em;padding:.4em .6em;min-width:0}}\
.tile .k{{font-size:.8em;color:#556}}.tile .v{{font-size:1.15em;font-weight:600;overflow-wrap:anywhere}}.wide2{{grid-column:span 2}}.n{{text-align:right;font-variant-numeric:tabular-nums}}\
tr.slowest,tr.slowest td{{background:#fdecea}}.badge{{display:inline-block;background:#c62828;color:#fff;border-radius:.3em;padding:0 .4em;font-size:.8em;margin-left:.4em}}\
.chart{{background:#fff;border:1px solid #ddd;border-radius:.3em;padding:.4em;margin:.5em 0}}svg{{display:block;width:100%;height:auto}}\
.narrow{{display:none}}\
.legend{{display:flex;flex-wrap:wrap;gap:.2em 1.1em;font-size:.88em;margin:.4em 0}}\
.sw{{display:inline-block;width:.9em;height:.9em;border-radius:.15em;vertical-align:-.1em;margin-right:.3em}}\
.bars{{display:grid;grid-template-columns:minmax(6em,16em) minmax(0,1fr) auto;gap:.3em .7em;align-items:center;font-size:.92em}}\
.lab{{overflow-wrap:anywhere;min-width:0}}.val{{text-align:right;font-variant-numeric:tabular-nums}}\
.track{{display:flex;background:#eef1f5;height:1.1em;border-radius:.2em;overflow:hidden}}.track span{{display:block;height:100%}}\
.meter{{display:block;width:100%;height:.6em;margin-top:.25em;background:#eef1f5;border-radius:.2em;overflow:hidden}}\
.meter span{{display:block;height:100%}}\
.finding{{background:#fff;border:1px solid #ddd;border-radius:.4em;padding:.6em 1em;margin:.8em 0}}\
.P0{{border-left:6px solid #c62828}}.P1{{border-left:6px solid #ef6c00}}.P2{{border-left:6px solid #f9a825}}.sev{{font-weight:700}}\
@media (max-width:{BREAKPOINT_PX}px){{.wide{{display:none}}.narrow{{display:block}}main{{padding:.8em .8em 2em}}h1{{font-size:1.3em}}\
.bars{{grid-template-columns:minmax(0,1fr) auto}}.bars .lab{{grid-column:1/-1;margin-top:.3em}}\
td,th{{padding:.25em .3em;font-size:.85em}}.tiles{{grid-template-columns:repeat(2,minmax(0,1fr))}}.finding{{padding:.5em .7em}}\
table.cards tr.head{{display:none}}table.cards tr{{display:flex;flex-wrap:wrap;gap:.1em .9em;padding:.35em .2em;border-bottom:1px solid #e3e6ea}}\
table.cards td{{display:block;border:0;padding:0;text-align:left;background:none}}table.cards td.key{{flex:1 1 75%;font-weight:600}}\
table.cards td[data-label]::before{{content:attr(data-label) \": \";color:#667;font-weight:400}}table.cards td.key code{{font-size:1em}}}}"
    )
}

/// The report as a self-contained HTML page (inline CSS and SVG; nothing loaded from a network,
/// no script): health, hosts, step times with their anatomy, the slowest ops, time by category,
/// the roofline, the device memory of the HLO programs, the GPU kernels (on GPUs), the findings.
pub fn html(report: &Report) -> String {
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>xlens fault scan</title><style>{}</style></head><body><main>",
        css()
    );
    header(&mut s, report);
    health(&mut s, &report.metrics);
    if report.hosts.len() > 1 {
        s.push_str(&hosts(&report.hosts, &report.metrics));
    }
    s.push_str(&steps(report));
    s.push_str(&anatomy(&report.charts.step_series, report.metrics.step_time_host.as_deref()));
    s.push_str(&ops(&report.charts));
    s.push_str(&memory(&report.charts.memory));
    if report.profile.device == "GPU" || !report.charts.kernels.is_empty() {
        s.push_str(&kernels(&report.charts.kernels));
    }
    findings(&mut s, report);
    s.push_str("</main></body></html>\n");
    s
}

fn header(s: &mut String, report: &Report) {
    let _ = write!(
        s,
        "<h1>xlens fault scan <span class=\"status {0}\">{0}</span></h1><p>{1}</p><p class=\"note\">{2}</p>\
         <p class=\"note\" id=\"framework\">Framework: {3}</p>",
        report.status.as_str(),
        escape(&report.summary),
        escape(&profile_sentence(report)),
        escape(&framework_sentence(report))
    );
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1} %"))
}

fn health(s: &mut String, m: &Metrics) {
    let unit = m.step_unit();
    // Unknown, not zero, where no op carries a cost (`Metrics::utilization_unknown`).
    let unknown = m.utilization_unknown.is_some();
    let util = |v: Option<f64>| if unknown { super::UNKNOWN.to_owned() } else { pct(v) };
    let mut tiles = vec![
        (format!("Mean {unit} time"), m.step_time_ms_mean.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3} ms"))),
        ("Device busy".to_owned(), pct(m.device_busy_pct)),
        ("Idle".to_owned(), pct(m.idle_pct)),
        ("Waiting on the host (part of idle)".to_owned(), pct(m.host_wait_pct)),
        ("Infeed / outfeed (part of busy)".to_owned(), pct(m.input_bound_pct)),
        ("Exposed communication".to_owned(), pct(m.exposed_communication_pct)),
        (
            "FLOP utilisation".to_owned(),
            match m.xprof_flops_utilization_if_different() {
                Some(x) => format!("{} (XProf counts {x:.1} %)", util(m.flops_utilization_pct)),
                None => util(m.flops_utilization_pct),
            },
        ),
        ("HBM utilisation".to_owned(), util(m.hbm_utilization_pct)),
        ("Roofline efficiency".to_owned(), util(m.roofline_efficiency_pct)),
        ("Device duty cycle".to_owned(), pct(m.device_duty_cycle_pct)),
        (
            "Bound by".to_owned(),
            m.bound_by.clone().unwrap_or_else(|| if unknown { super::UNKNOWN } else { "n/a" }.to_owned()),
        ),
        (
            "Operational intensity (all memories)".to_owned(),
            m.operational_intensity_flop_per_byte
                .map_or_else(|| if unknown { super::UNKNOWN } else { "n/a" }.to_owned(), |v| format!("{v:.2} FLOP/B")),
        ),
    ];
    // On PyTorch/XLA the shares are of the loop's iteration (each step to the next marker).
    if let Some(ms) = m.loop_iteration_ms_mean {
        tiles.insert(1, ("Loop iteration (the shares' base)".to_owned(), format!("{ms:.3} ms")));
    }
    s.push_str("<h2 id=\"health\">Health</h2><div class=\"tiles\">");
    for (k, v) in tiles {
        let _ = write!(
            s,
            "<div class=\"tile\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>",
            escape(&k),
            escape(&v)
        );
    }
    let _ = write!(
        s,
        "<div class=\"tile wide2\"><div class=\"k\">Memory peak</div><div class=\"v\">{}{}</div></div></div>",
        escape(&memory_peak(m)),
        meter(m)
    );
}

/// A bar showing the memory peak's share of the capacity (red from 90 %).
fn meter(m: &Metrics) -> String {
    let Some(p) = m.memory_peak_pct.filter(|p| p.is_finite()) else { return String::new() };
    let color = if p >= 90.0 { "#c62828" } else { "#3f6fb5" };
    format!("<span class=\"meter\"><span style=\"width:{:.1}%;background:{color}\"></span></span>", p.clamp(0.0, 100.0))
}

/// Host rows the page lists at most (the slowest first); the rest are counted.
const HOST_ROWS: usize = 32;

/// A column of a [`cards`] table.
struct Col {
    /// Header text, with its unit.
    head: String,
    /// What the column holds.
    kind: ColKind,
}

/// How a [`cards`] column shows.
#[derive(Clone, Copy, PartialEq)]
enum ColKind {
    /// The row's rank: unlabelled on a card.
    Rank,
    /// The row's name: the title of its card.
    Key,
    /// Text, labelled on a card.
    Text,
    /// A number, right-aligned in the table, labelled on a card.
    Number,
}

impl Col {
    fn new(head: impl Into<String>, kind: ColKind) -> Col {
        Col { head: head.into(), kind }
    }
}

/// A table on wide screens, one card per row on narrow ones (each value after its column's
/// name), so that no column is squeezed to a letter. `rows` are (highlighted, cell HTML).
fn cards(cols: &[Col], rows: &[(bool, Vec<String>)]) -> String {
    let class = |k: ColKind| match k {
        ColKind::Rank | ColKind::Number => " class=\"n\"",
        ColKind::Key => " class=\"key\"",
        ColKind::Text => "",
    };
    let mut s = String::from("<div class=\"scroll\"><table class=\"cards\"><tr class=\"head\">");
    for c in cols {
        let _ = write!(s, "<th{}>{}</th>", class(c.kind), escape(&c.head));
    }
    s.push_str("</tr>");
    for (highlight, cells) in rows {
        s.push_str(if *highlight { "<tr class=\"slowest\">" } else { "<tr>" });
        for (c, cell) in cols.iter().zip(cells) {
            let label = match c.kind {
                ColKind::Text | ColKind::Number => format!(" data-label=\"{}\"", escape(&c.head)),
                ColKind::Rank | ColKind::Key => String::new(),
            };
            let _ = write!(s, "<td{}{label}>{cell}</td>", class(c.kind));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table></div>");
    s
}

/// The per-host table, slowest first, the host the session waits for highlighted.
fn hosts(rows: &[HostRow], m: &Metrics) -> String {
    let mut sorted: Vec<&HostRow> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        b.step_time_ms_mean.unwrap_or(-1.0).total_cmp(&a.step_time_ms_mean.unwrap_or(-1.0)).then(a.host.cmp(&b.host))
    });
    let cell = |v: Option<f64>, digits: usize| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"));
    let mut cols = vec![Col::new("Host", ColKind::Key)];
    for head in ["Steps", "Mean (ms)", "Median (ms)", "Max (ms)", "Compute (ms)", "Idle %", "FLOP %"] {
        cols.push(Col::new(head, ColKind::Number));
    }
    let table: Vec<(bool, Vec<String>)> = sorted
        .iter()
        .take(HOST_ROWS)
        .map(|r| {
            let slowest = r.slowest || m.step_time_host.as_deref() == Some(r.host.as_str());
            let name =
                format!("{}{}", escape(&r.host), if slowest { "<span class=\"badge\">slowest</span>" } else { "" });
            let cells = vec![
                name,
                r.step_count.to_string(),
                cell(r.step_time_ms_mean, 3),
                cell(r.step_time_ms_median, 3),
                cell(r.step_time_ms_max, 3),
                cell(r.compute_ms_mean, 3),
                cell(r.idle_pct, 1),
                cell(r.flops_utilization_pct, 1),
            ];
            (slowest, cells)
        })
        .collect();
    let mut s = format!("<h2 id=\"hosts\">Hosts ({})</h2>{}", rows.len(), cards(&cols, &table));
    if sorted.len() > HOST_ROWS {
        let _ = write!(s, "<p class=\"note\">{} more hosts, faster than these.</p>", sorted.len() - HOST_ROWS);
    }
    s
}

/// The classes with time in any of `series`, with their colours, as a legend.
fn anatomy_legend(series: &[&StepSeries]) -> String {
    let mut used = [false; ANATOMY_CLASSES.len()];
    for a in series.iter().flat_map(|s| &s.steps).filter_map(|s| s.anatomy_ms) {
        used.iter_mut().zip(a).for_each(|(u, v)| *u |= v > 0.0);
    }
    let mut s = String::from("<div class=\"legend\">");
    for ((class, color), _) in ANATOMY_CLASSES.iter().zip(ANATOMY_COLORS).zip(used).filter(|(_, u)| *u) {
        let _ = write!(s, "<span><span class=\"sw\" style=\"background:{color}\"></span>{class}</span>");
    }
    s.push_str("</div>");
    s
}

fn steps(report: &Report) -> String {
    let series = &report.charts.step_series;
    let mut s = format!("<h2 id=\"steps\">Step times</h2><p>{}</p>", escape(&steps_sentence(report)));
    if series.is_empty() {
        s.push_str("<p class=\"muted\">No step markers in this profile: no step chart.</p>");
        return s;
    }
    let unit = report.metrics.step_unit();
    let panels = step_chart::panels(series);
    let stacked = panels.iter().flat_map(|p| &p.steps).any(|st| st.anatomy_ms.is_some());
    let _ = write!(
        s,
        "<p class=\"note\">Time (ms) per {unit}, numbered on the x axis{}{}; a bar of several {unit}s shows their mean, its black tick the longest.</p>",
        if series.len() > 1 { ", one panel per host on the same scale, the slowest first" } else { "" },
        if stacked { ", split by the step anatomy" } else { "" }
    );
    if stacked {
        s.push_str(&anatomy_legend(&panels));
    }
    s.push_str(&step_chart::chart(&panels, report.metrics.step_time_host.as_deref()));
    if series.len() > panels.len() {
        let _ = write!(
            s,
            "<p class=\"note\">{} hosts are not drawn (at most {MAX_PANELS}).</p>",
            series.len() - panels.len()
        );
    }
    s
}

/// Time by anatomy class over the whole run: a stacked bar per host, and the table of the host
/// the health figures describe.
fn anatomy(series: &[StepSeries], pace: Option<&str>) -> String {
    let totals: Vec<(&StepSeries, [f64; ANATOMY_CLASSES.len()])> =
        step_chart::panels(series).into_iter().filter_map(|s| s.anatomy_total_ms().map(|t| (s, t))).collect();
    let Some(&(main, main_total)) = totals.iter().find(|(s, _)| Some(s.host.as_str()) == pace).or(totals.first())
    else {
        return String::new();
    };
    let mut s = String::from("<h2 id=\"anatomy\">Step anatomy</h2>");
    let refs: Vec<&StepSeries> = totals.iter().map(|(s, _)| *s).collect();
    s.push_str(&anatomy_legend(&refs));
    s.push_str("<div class=\"bars\">");
    for (series, total) in &totals {
        let sum: f64 = total.iter().sum::<f64>().max(1e-12);
        let _ = write!(s, "<span class=\"lab\">{}</span><span class=\"track\">", escape(&series.host));
        for ((v, color), class) in total.iter().zip(ANATOMY_COLORS).zip(ANATOMY_CLASSES) {
            if *v > 0.0 {
                let _ = write!(
                    s,
                    "<span style=\"width:{:.2}%;background:{color}\" title=\"{class} {:.1} %\"></span>",
                    100.0 * v / sum,
                    100.0 * v / sum
                );
            }
        }
        let _ = write!(s, "</span><span class=\"val\">{:.3} ms per step</span>", series.mean_ms());
    }
    s.push_str("</div>");
    s.push_str(&anatomy_table(main, &main_total, totals.len() > 1));
    s
}

fn anatomy_table(series: &StepSeries, total: &[f64; ANATOMY_CLASSES.len()], named: bool) -> String {
    let sum: f64 = total.iter().sum::<f64>().max(1e-12);
    let n = series.steps.len().max(1) as f64;
    let mut s = format!(
        "<p class=\"note\">Where the step time goes over the whole run{}.</p><div class=\"scroll\"><table>\
         <tr><th>Class</th><th class=\"n\">Run (ms)</th><th class=\"n\">Per step (ms)</th><th class=\"n\">% of step time</th></tr>",
        if named { format!(" on {}", escape(&series.host)) } else { String::new() }
    );
    for ((class, color), v) in ANATOMY_CLASSES.iter().zip(ANATOMY_COLORS).zip(total) {
        if *v > 0.0 {
            let _ = write!(
                s,
                "<tr><td><span class=\"sw\" style=\"background:{color}\"></span>{class}</td><td class=\"n\">{v:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.1}</td></tr>",
                v / n,
                100.0 * v / sum
            );
        }
    }
    s.push_str("</table></div>");
    s
}

fn ops(c: &Charts) -> String {
    if c.categories_ms.is_empty() && c.top_ops.is_empty() && c.framework_ops.is_none() {
        return "<h2 id=\"ops\">Ops</h2><p class=\"muted\">No op profile in this profile.</p>".to_owned();
    }
    let mut s = String::new();
    if let Some(h) = &c.ops_host {
        let _ = write!(s, "<p class=\"note\">The op figures below are {}'s, the slowest host.</p>", escape(h));
    }
    if let Some(note) = &c.framework_ops {
        s.push_str(&framework_ops(c, note));
    }
    s.push_str(&top_ops(c));
    s.push_str(&categories(c));
    s.push_str(&roofline(c));
    s
}

/// The framework ops of a profile without HLO, before its kernels: the device's and the host's
/// slowest framework ops (type, self time, share of the side's op time), the kernels of a
/// device op in its tooltip.
fn framework_ops(c: &Charts, note: &str) -> String {
    let mut s = format!("<h2 id=\"framework-ops\">Slowest framework ops</h2><p class=\"note\">{}</p>", escape(note));
    for (title, ops) in [("Device", &c.device_framework_ops), ("Host", &c.host_framework_ops)] {
        if ops.is_empty() {
            continue;
        }
        let unit = TimeUnit::for_ms(ops.iter().map(|o| o.self_time_ms).fold(0.0, f64::max));
        let cols = [
            Col::new("#", ColKind::Rank),
            Col::new("Op", ColKind::Key),
            Col::new("Type", ColKind::Text),
            Col::new(format!("Self time ({})", unit.label()), ColKind::Number),
            Col::new(format!("% of {} op time", title.to_lowercase()), ColKind::Number),
            Col::new("Cumulative %", ColKind::Number),
        ];
        let mut cumulative = 0.0;
        let rows: Vec<(bool, Vec<String>)> =
            ops.iter().enumerate().map(|(i, o)| (false, op_cells(i, o, unit, &mut cumulative))).collect();
        let _ = write!(s, "<h3>{title}</h3>{}", cards(&cols, &rows));
    }
    s
}

/// The cells every op table starts with: rank, op (its program in the tooltip), category, self
/// time, share and the cumulative share (`cumulative` carries the running sum).
fn op_cells(i: usize, o: &TopOp, unit: TimeUnit, cumulative: &mut f64) -> Vec<String> {
    *cumulative += o.pct;
    vec![
        (i + 1).to_string(),
        format!("<code title=\"{}\">{}</code>", escape(&o.program), escape(&o.name)),
        escape(&o.category),
        unit.number(o.self_time_ms),
        format!("{:.1}", o.pct),
        format!("{:.1}", *cumulative),
    ]
}

fn top_ops(c: &Charts) -> String {
    if c.top_ops.is_empty() {
        return String::new();
    }
    let unit = TimeUnit::for_ms(c.top_ops.iter().map(|o| o.self_time_ms).fold(0.0, f64::max));
    let cols = [
        Col::new("#", ColKind::Rank),
        Col::new("Op", ColKind::Key),
        Col::new("Category", ColKind::Text),
        Col::new(format!("Self time ({})", unit.label()), ColKind::Number),
        Col::new("% of op time", ColKind::Number),
        Col::new("Cumulative %", ColKind::Number),
        Col::new("FLOP/s", ColKind::Number),
        Col::new("Bound", ColKind::Text),
    ];
    let mut cumulative = 0.0;
    let rows: Vec<(bool, Vec<String>)> = c
        .top_ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut cells = op_cells(i, o, unit, &mut cumulative);
            cells.extend([
                o.flops_per_s.map_or_else(|| "n/a".to_owned(), |f| si(f, "FLOP/s")),
                escape(o.bound.as_deref().unwrap_or("n/a")),
            ]);
            (false, cells)
        })
        .collect();
    format!(
        "<h2 id=\"ops\">Slowest ops</h2>{}<p class=\"note\">Self time over all cores and steps; FLOP/s per core over the op's own time.</p>",
        cards(&cols, &rows)
    )
}

fn categories(c: &Charts) -> String {
    let mut s = String::from("<h2 id=\"categories\">Time by category</h2>");
    if c.categories_ms.is_empty() {
        s.push_str("<p class=\"muted\">No op timeline in this profile.</p>");
        return s;
    }
    let total: f64 = c.categories_ms.iter().map(|(_, v)| v).sum::<f64>().max(1e-12);
    let max = c.categories_ms.iter().map(|(_, v)| *v).fold(0.0, f64::max).max(1e-12);
    let unit = TimeUnit::for_ms(max);
    let _ = write!(
        s,
        "<p class=\"note\">Self time over all cores and steps ({}), the largest first.</p><div class=\"bars\">",
        unit.label()
    );
    for (name, v) in &c.categories_ms {
        let _ = write!(
            s,
            "<span class=\"lab\">{}</span><span class=\"track\"><span style=\"width:{:.2}%;background:#6a8fcb\"></span></span><span class=\"val\">{} {} · {:.1} %</span>",
            escape(name),
            100.0 * v / max,
            unit.number(*v),
            unit.label(),
            100.0 * v / total
        );
    }
    s.push_str("</div>");
    s
}

fn roofline(c: &Charts) -> String {
    let mut s = String::from("<h2 id=\"roofline\">Roofline of the top ops</h2>");
    if c.compute_roofs.is_empty() || c.memory_roofs.is_empty() {
        s.push_str("<p class=\"muted\">The profile reports no device peaks: no roofline.</p>");
        return s;
    }
    if c.roofline.is_empty() && c.program_dot.is_none() {
        s.push_str("<p class=\"muted\">No ops with FLOPs and bytes to place.</p>");
        return s;
    }
    s.push_str(
        "<p class=\"note\">Each op sits at its FLOPs per byte of the memory that bounds it (XProf's bottleneck \
         operational intensity: per HBM byte for an HBM-bound op, per byte of all memories for a compute-bound one), \
         as XProf's roofline tool places it, under that memory's roof. Hover a point for its figures.</p>",
    );
    s.push_str(&roofline_chart::chart(c));
    s.push_str(&roof_legend(c));
    s
}

fn roof_legend(c: &Charts) -> String {
    let peak = c.compute_roofs.first().map_or(0.0, |r| r.per_s);
    let mut s = String::from("<div class=\"legend\">");
    for (i, m) in c.memory_roofs.iter().enumerate() {
        let color = roofline_chart::ROOF_COLORS[i % roofline_chart::ROOF_COLORS.len()];
        let _ = write!(
            s,
            "<span><span class=\"sw\" style=\"background:{color}\"></span>{} {} (ridge {:.1} FLOP/B)</span>",
            escape(&m.label),
            si(m.per_s, "B/s"),
            peak / m.per_s
        );
    }
    for r in &c.compute_roofs {
        let _ = write!(
            s,
            "<span><span class=\"sw\" style=\"background:#1d2330\"></span>{} {}</span>",
            escape(&r.label),
            si(r.per_s, roofline_chart::roof_unit(&r.label))
        );
    }
    s.push_str("</div><div class=\"legend\">");
    let mut bounds: Vec<&str> = c.roofline.iter().map(|d| d.bound.as_str()).collect();
    bounds.sort_unstable();
    bounds.dedup();
    for b in bounds {
        let _ = write!(
            s,
            "<span><span class=\"sw\" style=\"background:{};border-radius:50%\"></span>{}-bound op</span>",
            roofline_chart::bound_color(b),
            escape(b)
        );
    }
    if c.program_dot.is_some() {
        s.push_str(
            "<span><span class=\"sw\" style=\"background:#1d2330;transform:rotate(45deg)\"></span>program</span>",
        );
    }
    s.push_str("</div>");
    let above = c.roofline.iter().filter(|d| d.efficiency_pct > 100.5).count();
    if above > 0 {
        let _ = write!(
            s,
            "<p class=\"note\">{above} op(s) sit above their roof (over 100 % of it): the peaks the profile reports are conservative for them.</p>"
        );
    }
    s
}

/// Programs in the page's memory table (the largest first).
const MEMORY_PROGRAMS: usize = 8;
/// Programs whose largest buffers the page lists.
const BUFFER_PROGRAMS: usize = 3;

const MIB: f64 = (1u64 << 20) as f64;

/// Bytes as MiB with `xlens memory`'s three decimals.
fn mib(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{:.3}", v as f64 / MIB))
}

/// The device memory of the HLO programs: per program the HBM of its buffer assignment and its
/// peak against the capacity, then the largest programs' buffers, from `xlens memory`'s own
/// document ([`memory_json`]); without HLO or buffer assignments, a sentence that says so.
fn memory(c: &MemoryChart) -> String {
    let mut s = String::from("<h2 id=\"memory\">Device memory</h2>");
    if !c.has_hlo {
        s.push_str("<p class=\"muted\">No HLO programs in this profile: no buffer assignment to show.</p>");
        return s;
    }
    if c.programs.is_empty() {
        s.push_str(
            "<p class=\"muted\">No HLO program of this profile carries a buffer assignment: no device memory figures.</p>",
        );
        failed_programs(&mut s, c);
        return s;
    }
    let programs: Vec<crate::tables::memory::ProgramMemory> = c
        .programs
        .iter()
        .map(|p| crate::tables::memory::ProgramMemory {
            module_name: p.module_name.clone(),
            allocations: p.allocations.clone(),
        })
        .collect();
    let doc = memory_json(&programs, Some(MEMORY_PROGRAMS));
    let modules = doc["modules"].as_array().map_or(&[][..], Vec::as_slice);
    let count = doc["summary"]["total_modules"].as_u64().unwrap_or(0);
    let capacity = match c.capacity_bytes {
        Some(cap) => format!("HBM capacity {} per device.", bytes(cap)),
        None => "The device's HBM capacity is unknown.".to_owned(),
    };
    let _ = write!(
        s,
        "<p class=\"note\">Per HLO program, the HBM of its buffer assignment as <code>xlens memory</code> (XProf's \
         peak allocations) counts it: every allocation, parameters, outputs and constants included; its peak is the \
         heap replay's highest point with the buffers that live throughout. {count} program(s) with a buffer \
         assignment{}. {capacity}</p>",
        if count as usize > modules.len() { format!(", the {} largest shown", modules.len()) } else { String::new() }
    );
    let peak_of = |name: &str| c.programs.iter().find(|p| p.module_name == name).map(|p| p.peak_bytes);
    let cols = [
        Col::new("#", ColKind::Rank),
        Col::new("Program", ColKind::Key),
        Col::new("Allocated (MiB)", ColKind::Number),
        Col::new("Peak (MiB)", ColKind::Number),
        Col::new("Peak % of capacity", ColKind::Number),
    ];
    let rows: Vec<(bool, Vec<String>)> = modules
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let name = m["module_name"].as_str().unwrap_or("");
            let peak = peak_of(name);
            let share = match (peak, c.capacity_bytes) {
                (Some(p), Some(cap)) if cap > 0 => {
                    let pct = 100.0 * p as f64 / cap as f64;
                    let color = if pct >= 90.0 { "#c62828" } else { "#3f6fb5" };
                    format!(
                        "{pct:.1}<span class=\"meter\"><span style=\"width:{:.1}%;background:{color}\"></span></span>",
                        pct.clamp(0.0, 100.0)
                    )
                }
                _ => "n/a".to_owned(),
            };
            let cells = vec![
                (i + 1).to_string(),
                format!("<code>{}</code>", escape(name)),
                mib(m["total_hbm_bytes"].as_u64()),
                mib(peak),
                share,
            ];
            (false, cells)
        })
        .collect();
    s.push_str(&cards(&cols, &rows));
    for (i, m) in modules.iter().take(BUFFER_PROGRAMS).enumerate() {
        let name = m["module_name"].as_str().unwrap_or("");
        let total = m["total_hbm_bytes"].as_u64().unwrap_or(0);
        let _ = write!(s, "<h3 id=\"memory-{}\">Largest buffers of <code>{}</code></h3>", i + 1, escape(name));
        let cols = [
            Col::new("#", ColKind::Rank),
            Col::new("Buffer", ColKind::Key),
            Col::new("Size (MiB)", ColKind::Number),
            Col::new("% of allocated", ColKind::Number),
        ];
        let buffers = m["top_buffers"].as_array().map_or(&[][..], Vec::as_slice);
        let rows: Vec<(bool, Vec<String>)> = buffers
            .iter()
            .enumerate()
            .map(|(j, b)| {
                let size = b["size_bytes"].as_u64();
                let share = size
                    .filter(|_| total > 0)
                    .map_or_else(|| "n/a".to_owned(), |v| format!("{:.1}", 100.0 * v as f64 / total as f64));
                let cells = vec![
                    (j + 1).to_string(),
                    format!("<code>{}</code>", escape(b["instruction"].as_str().unwrap_or(""))),
                    mib(size),
                    share,
                ];
                (false, cells)
            })
            .collect();
        s.push_str(&cards(&cols, &rows));
        let more = c.programs.iter().find(|p| p.module_name == name).map_or(0, |p| p.more_rows);
        if more > 0 {
            let _ = write!(
                s,
                "<p class=\"note\">{more} smaller row(s) not shown (<code>xlens memory</code> lists them).</p>"
            );
        }
    }
    failed_programs(&mut s, c);
    s
}

/// The programs whose heap trace did not replay, when any.
fn failed_programs(s: &mut String, c: &MemoryChart) {
    if c.failed.is_empty() {
        return;
    }
    let _ =
        write!(s, "<p class=\"note\">{} program(s) left out: their heap trace did not replay.</p><ul>", c.failed.len());
    for f in &c.failed {
        let _ = write!(s, "<li>{}</li>", inline_code(f));
    }
    s.push_str("</ul>");
}

/// The GPU kernels, the longest first, from `xlens kernels`' own document
/// ([`kernel_stats_json_of`], over the kernels each host kept and the session's whole kernel
/// time).
fn kernels(charts: &[KernelChart]) -> String {
    let mut s = String::from("<h2 id=\"kernels\">GPU kernels</h2>");
    if charts.is_empty() {
        s.push_str("<p class=\"muted\">No GPU kernels in this profile (no stream lines on its GPU planes).</p>");
        return s;
    }
    let hosts: Vec<HostKernelStats> =
        charts.iter().map(|k| HostKernelStats { host: k.host.clone(), stats: k.stats.clone() }).collect();
    let kernel_time = charts.iter().map(|k| k.kernel_time).sum();
    let doc = kernel_stats_json_of(&hosts, kernel_time, Some(xlens_faults::KERNEL_ROWS));
    let rows = doc["kernels"].as_array().map_or(&[][..], Vec::as_slice);
    let count: usize = charts.iter().map(|k| k.kernel_count).sum();
    let launches: u64 = charts.iter().map(|k| k.launches).sum();
    let ms = |key: &str| doc[key].as_f64().unwrap_or(0.0) / 1000.0;
    let _ = write!(
        s,
        "<p class=\"note\">The longest kernels by total time over the capture, as <code>xlens kernels</code> (XProf's \
         kernel stats) gives them: {count} kernel(s), {launches} launch(es); kernel time {:.3} ms (every launch on \
         every GPU added up: the base of each share), a GPU busy {:.3} ms.{}</p>",
        ms("kernel_time_us"),
        ms("total_device_duration_us"),
        if count > rows.len() { format!(" The {} longest shown.", rows.len()) } else { String::new() }
    );
    let several = charts.len() > 1;
    let us = |v: &Value| v.as_f64();
    let total_unit =
        TimeUnit::for_ms(rows.iter().filter_map(|r| us(&r["total_duration_us"])).fold(0.0, f64::max) / 1e3);
    let launch_unit = TimeUnit::for_ms(rows.iter().filter_map(|r| us(&r["max_duration_us"])).fold(0.0, f64::max) / 1e3);
    let mut cols = vec![Col::new("#", ColKind::Rank), Col::new("Kernel (the op that launched it)", ColKind::Key)];
    if several {
        cols.push(Col::new("Host", ColKind::Text));
    }
    cols.extend([
        Col::new("Launches", ColKind::Number),
        Col::new(format!("Total ({})", total_unit.label()), ColKind::Number),
        Col::new(format!("Mean ({})", launch_unit.label()), ColKind::Number),
        Col::new(format!("Min ({})", launch_unit.label()), ColKind::Number),
        Col::new(format!("Max ({})", launch_unit.label()), ColKind::Number),
        Col::new("% of kernel time", ColKind::Number),
        Col::new("Occupancy %", ColKind::Number),
        Col::new("Registers / thread", ColKind::Number),
        Col::new("Shared memory, static + dynamic (B)", ColKind::Number),
    ]);
    let na = || "n/a".to_owned();
    let table: Vec<(bool, Vec<String>)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let name = r["kernel_name"].as_str().unwrap_or("");
            let time = |key: &str, unit: TimeUnit| us(&r[key]).map_or_else(na, |v| unit.number(v / 1e3));
            let shared = match (r["static_shared_bytes"].as_u64(), r["dynamic_shared_bytes"].as_u64()) {
                (Some(st), Some(0)) => st.to_string(),
                (Some(st), Some(dy)) => format!("{st} + {dy}"),
                _ => na(),
            };
            let op = r["hlo_op"]
                .as_str()
                .map_or_else(String::new, |o| format!("<br><span class=\"note\">op <code>{}</code></span>", escape(o)));
            let mut cells = vec![
                (i + 1).to_string(),
                format!("<code title=\"{}\">{}</code>{op}", escape(name), escape(&super::clip(name, 80))),
            ];
            if several {
                cells.push(escape(r["host"].as_str().unwrap_or("")));
            }
            cells.extend([
                r["occurrences"].as_u64().map_or_else(na, |n| n.to_string()),
                time("total_duration_us", total_unit),
                time("avg_duration_us", launch_unit),
                time("min_duration_us", launch_unit),
                time("max_duration_us", launch_unit),
                us(&r["share_pct"]).map_or_else(na, |v| format!("{v:.1}")),
                us(&r["occupancy_pct"]).map_or_else(na, |v| format!("{v:.1}")),
                r["registers_per_thread"].as_u64().map_or_else(na, |n| n.to_string()),
                shared,
            ]);
            (false, cells)
        })
        .collect();
    s.push_str(&cards(&cols, &table));
    s
}

fn findings(s: &mut String, report: &Report) {
    let _ = write!(s, "<h2 id=\"findings\">Findings ({})</h2>", report.findings.len());
    let unit = report.metrics.step_unit();
    for f in &report.findings {
        finding(s, f, unit);
    }
    if !report.skipped.is_empty() {
        s.push_str("<h2>Not checked</h2><ul>");
        for k in &report.skipped {
            let _ = write!(s, "<li><code>{}</code>: {}</li>", escape(&k.id), inline_code(&k.reason));
        }
        s.push_str("</ul>");
    }
    if !report.disabled_by.is_empty() {
        s.push_str("<h2>Disabled</h2><ul>");
        for (id, by) in &report.disabled_by {
            let _ = write!(s, "<li><code>{}</code>: by {}</li>", escape(id), escape(by));
        }
        s.push_str("</ul>");
    }
    if !report.warnings.is_empty() {
        s.push_str("<h2>Warnings</h2><ul>");
        for w in &report.warnings {
            let _ = write!(s, "<li>{}</li>", inline_code(w));
        }
        s.push_str("</ul>");
    }
}

fn finding(s: &mut String, f: &Finding, unit: &str) {
    let _ = write!(
        s,
        "<div class=\"finding {sev}\"><div class=\"fhead\"><span class=\"sev\">{sev}</span> <code>{}</code> {} <span class=\"muted\">({})</span></div>\
         <p>{}</p><p><b>Impact:</b> {} ms per {unit} ({:.1} % of the {unit})</p><ul>",
        escape(&f.id),
        escape(&f.title),
        escape(&where_found(f)),
        inline_code(&f.what),
        fmt_value(f.impact.ms_per_step),
        f.impact.pct_of_step,
        sev = f.severity.as_str(),
    );
    for e in &f.evidence {
        let _ = write!(s, "<li>{}</li>", inline_code(&e.to_string()));
    }
    let _ = write!(s, "</ul><p><b>Fix:</b> {}</p></div>", inline_code(&f.fix));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(host: &str, mean: f64, slowest: bool) -> HostRow {
        HostRow {
            host: host.into(),
            time_base: "steps".into(),
            step_count: 8,
            step_time_ms_mean: Some(mean),
            slowest,
            ..HostRow::default()
        }
    }

    #[test]
    fn the_straggler_row_is_highlighted_and_first() {
        let m = Metrics { step_time_host: Some("host1".into()), ..Metrics::default() };
        let table = hosts(&[row("host0", 7.26, false), row("host1", 8.13, true), row("host2", 7.3, false)], &m);
        assert_eq!(table.matches("class=\"slowest\"").count(), 1, "{table}");
        let slow = table
            .find("<tr class=\"slowest\"><td class=\"key\">host1<span class=\"badge\">slowest</span>")
            .expect(&table);
        assert!(slow < table.find("host2").unwrap() && slow < table.find("host0").unwrap(), "slowest first");
        assert!(table.contains("data-label=\"Mean (ms)\">8.130</td>"), "step times with the text report's 3 decimals");
        assert!(!table.contains("<pre"), "an HTML table, not preformatted text");
    }

    #[test]
    fn memory_peak_shows_the_capacity() {
        let report = crate::testing::report_of("hbm_pressure", &crate::testing::testdata("tpu/tpu_hbm_pressure"));
        let html = html(&report);
        assert!(html.contains("15.00 GiB of 16.00 GiB (93.8%)"), "peak with capacity and share");
        assert!(
            html.contains("<span class=\"meter\"><span style=\"width:93.8%;background:#c62828\">"),
            "a red meter above 90 %"
        );
        let m = Metrics { memory_peak_bytes: Some(6_589_168), ..Metrics::default() };
        let mut s = String::new();
        health(&mut s, &m);
        assert!(s.contains("6.28 MiB (capacity unknown)") && !s.contains("class=\"meter\""));
    }

    #[test]
    fn page_has_a_viewport_and_no_script() {
        let page = css();
        assert!(page.contains("@media (max-width:720px)") && page.contains("overflow-wrap:anywhere"));
        let report = crate::testing::report_of("device_idle", &crate::testing::testdata("tpu/tpu_basic"));
        let html = html(&report);
        assert!(html.contains("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"));
        assert!(!html.contains("<script") && !html.contains("<pre"));
        assert!(html.contains("class=\"chart wide\"") && html.contains("class=\"chart narrow\""));
        assert!(html.contains("Slowest ops") && html.contains("Cumulative %") && html.contains("Step anatomy"));
        assert!(!html.contains("e14") && html.contains("peak 197 TFLOP/s"), "peaks in SI units");
    }
}
