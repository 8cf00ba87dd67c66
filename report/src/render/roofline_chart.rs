//! The roofline chart: log-log axes with decade ticks, every roof a point can sit under (the
//! compute peaks and each memory's bandwidth), the top ops placed at XProf's bottleneck
//! operational intensity (FLOPs per byte of the memory that bounds them), the busiest labelled.

use std::fmt::Write as _;

use super::format::{decade_label, escape, si};
use super::layout::{Layout, both};
use crate::render::clip;
use xlens_faults::{Charts, Roof, RooflineDot};

/// Line colours of the memory roofs, in [`Charts::memory_roofs`] order (HBM first).
pub(super) const ROOF_COLORS: [&str; 4] = ["#c62828", "#8e44ad", "#00897b", "#6d4c41"];

/// The colour of a point by what bounds it.
pub(super) fn bound_color(bound: &str) -> &'static str {
    match bound {
        "Compute" => "#3f6fb5",
        "HBM" => "#e08a2c",
        "program" => "#1d2330",
        b if b.contains("Read") || b.contains("Write") || b.contains("read") || b.contains("write") => "#8e44ad",
        _ => "#8a929c",
    }
}

/// The unit of a compute roof's rate: integer peaks count operations, not FLOPs.
pub(super) fn roof_unit(label: &str) -> &'static str {
    if label.starts_with("int") { "OP/s" } else { "FLOP/s" }
}

/// Decades (powers of ten) the axes span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Decades {
    /// Intensity axis, FLOP/B: `10^x.0 ..= 10^x.1`.
    pub(super) x: (i32, i32),
    /// Rate axis, FLOP/s: `10^y.0 ..= 10^y.1`.
    pub(super) y: (i32, i32),
}

/// The axes that hold every point, every ridge and the highest compute roof: at least three
/// decades of intensity (within 10^-3 ..= 10^6) and at most eight decades of rate.
pub(super) fn decades(c: &Charts) -> Decades {
    let dots = c.roofline.iter().chain(&c.program_dot);
    let peak = c.compute_roofs.first().map_or(1.0, |r| r.per_s);
    let top = c.compute_roofs.iter().map(|r| r.per_s).fold(peak, f64::max);
    let ridges = c.memory_roofs.iter().map(|m| peak / m.per_s);
    let xs: Vec<f64> = dots.clone().map(|d| d.intensity).chain(ridges).filter(|x| *x > 0.0 && x.is_finite()).collect();
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(0.0, f64::max);
    let x_lo = if lo.is_finite() { (lo.log10() - 0.05).floor() as i32 } else { -1 }.clamp(-3, 3);
    let x_hi = if hi > 0.0 { (hi.log10() + 0.3).ceil() as i32 } else { 3 }.clamp(x_lo + 3, 6);
    let y_hi = ((top * 1.3).log10().ceil() as i32).clamp(-20, 30);
    let slowest = dots.map(|d| d.flops_per_s).filter(|y| *y > 0.0).fold(f64::INFINITY, f64::min);
    let y_lo = if slowest.is_finite() { slowest.log10().floor() as i32 } else { y_hi - 4 };
    Decades { x: (x_lo, x_hi), y: (y_lo.clamp(y_hi - 8, y_hi - 3), y_hi) }
}

/// Plot area and the log scales onto it.
struct Plot {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    d: Decades,
}

impl Plot {
    fn new(l: Layout, d: Decades) -> Plot {
        let height = l.width * if l.narrow { 0.9 } else { 0.52 };
        Plot { left: l.font * 7.2, right: l.width - l.font * 2.4, top: l.font * 2.2, bottom: height - l.font * 3.6, d }
    }

    fn height(&self, l: Layout) -> f64 {
        self.bottom + l.font * 3.6
    }

    fn x(&self, intensity: f64) -> f64 {
        let (a, b) = self.d.x;
        let v = intensity.max(1e-30).log10().clamp(f64::from(a), f64::from(b));
        self.left + (self.right - self.left) * (v - f64::from(a)) / f64::from(b - a)
    }

    fn y(&self, rate: f64) -> f64 {
        let (a, b) = self.d.y;
        let v = rate.max(1e-30).log10().clamp(f64::from(a), f64::from(b));
        self.bottom - (self.bottom - self.top) * (v - f64::from(a)) / f64::from(b - a)
    }

    fn x_min(&self) -> f64 {
        10f64.powi(self.d.x.0)
    }

    fn x_max(&self) -> f64 {
        10f64.powi(self.d.x.1)
    }
}

/// Text boxes already placed, so that labels do not overlap.
#[derive(Default)]
struct Placed(Vec<(f64, f64, f64, f64)>);

impl Placed {
    /// Claims the box `x0..x1 × y0..y1` when it is free and inside `bounds`; false otherwise.
    fn claim(&mut self, b: (f64, f64, f64, f64), bounds: (f64, f64, f64, f64)) -> bool {
        let inside = b.0 >= bounds.0 && b.1 <= bounds.1 && b.2 >= bounds.2 && b.3 <= bounds.3;
        let free = self.0.iter().all(|o| b.1 <= o.0 || b.0 >= o.1 || b.3 <= o.2 || b.2 >= o.3);
        if inside && free {
            self.0.push(b);
        }
        inside && free
    }
}

/// The chart, wide and narrow; the caller checks that there are peaks and points.
pub(super) fn chart(c: &Charts) -> String {
    let d = decades(c);
    both(|l| svg(c, d, l))
}

fn svg(c: &Charts, d: Decades, l: Layout) -> String {
    let p = Plot::new(l, d);
    let mut s = format!(
        "<svg viewBox=\"0 0 {} {:.0}\" role=\"img\" aria-label=\"roofline of the top ops\" font-size=\"{}\">",
        l.width,
        p.height(l),
        l.font
    );
    let mut placed = Placed::default();
    axes(&mut s, &p, l);
    roofs(&mut s, c, &p, l, &mut placed);
    points(&mut s, c, &p, l, &mut placed);
    s.push_str("</svg>");
    s
}

fn axes(s: &mut String, p: &Plot, l: Layout) {
    let f = l.font;
    // Thin the rate labels when the decades crowd the narrow chart.
    let every_y = if (p.bottom - p.top) / f64::from(p.d.y.1 - p.d.y.0) < f * 1.6 { 2 } else { 1 };
    for e in p.d.x.0..=p.d.x.1 {
        let x = p.x(10f64.powi(e));
        let _ = write!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#e3e6ea\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            p.top,
            p.bottom,
            p.bottom + f * 1.3,
            decade_label(e)
        );
    }
    for e in p.d.y.0..=p.d.y.1 {
        let y = p.y(10f64.powi(e));
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e3e6ea\"/>",
            p.left, p.right
        );
        if (p.d.y.1 - e) % every_y == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                p.left - 4.0,
                y + f * 0.35,
                si(10f64.powi(e), "FLOP/s")
            );
        }
    }
    let _ = write!(
        s,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#667\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#445\">FLOP/s per core (log)</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#445\">FLOP per byte of the bounding memory (log)</text>",
        p.left,
        p.top,
        p.right - p.left,
        p.bottom - p.top,
        p.left,
        p.top - f * 0.7,
        (p.left + p.right) / 2.0,
        p.bottom + f * 2.9
    );
}

fn roofs(s: &mut String, c: &Charts, p: &Plot, l: Layout, placed: &mut Placed) {
    let Some(peak) = c.compute_roofs.first().map(|r| r.per_s) else { return };
    let top = c.compute_roofs.iter().map(|r| r.per_s).fold(peak, f64::max);
    for (i, m) in c.memory_roofs.iter().enumerate() {
        let color = ROOF_COLORS[i % ROOF_COLORS.len()];
        memory_roof(s, p, m.per_s, peak, color);
        if top > peak {
            // The diagonal goes on up to the lower-precision peaks.
            let (x0, x1) = ((peak / m.per_s).min(p.x_max()), (top / m.per_s).min(p.x_max()));
            let _ = write!(
                s,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\"/>",
                p.x(x0),
                p.y(m.per_s * x0),
                p.x(x1),
                p.y(m.per_s * x1)
            );
        }
    }
    let fastest = c.memory_roofs.iter().map(|m| m.per_s).fold(0.0, f64::max).max(1e-30);
    for (i, r) in c.compute_roofs.iter().enumerate() {
        // From the ridge of the fastest memory: left of it no op can reach the peak.
        compute_roof(s, p, l, r, r.per_s / fastest, i > 0, placed);
    }
    for (i, m) in c.memory_roofs.iter().enumerate() {
        memory_label(s, p, l, m, peak, ROOF_COLORS[i % ROOF_COLORS.len()], placed);
    }
}

/// `min(peak, bandwidth × intensity)` across the plot.
fn memory_roof(s: &mut String, p: &Plot, bw: f64, peak: f64, color: &str) {
    let y_min = 10f64.powi(p.d.y.0);
    let x0 = p.x_min().max(y_min / bw);
    let ridge = (peak / bw).min(p.x_max());
    let _ = write!(
        s,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\"/>",
        p.x(x0),
        p.y(bw * x0),
        p.x(ridge),
        p.y(bw * ridge),
        p.x(p.x_max()),
        p.y(peak.min(bw * p.x_max()))
    );
}

fn compute_roof(s: &mut String, p: &Plot, l: Layout, r: &Roof, from: f64, dashed: bool, placed: &mut Placed) {
    let y = p.y(r.per_s);
    let dash = if dashed { " stroke-dasharray=\"5 4\"" } else { "" };
    let _ = write!(
        s,
        "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#1d2330\" stroke-width=\"{}\"{dash}/>",
        p.x(from),
        p.right,
        if dashed { 1.5 } else { 0.8 }
    );
    let text = format!("{} {}", r.label, si(r.per_s, roof_unit(&r.label)));
    let w = text.chars().count() as f64 * l.font * 0.58;
    let b = (p.right - 4.0 - w, p.right - 4.0, y - l.font * 1.2, y - 2.0);
    if placed.claim(b, (p.left, p.right, p.top - l.font * 2.0, p.bottom)) {
        let _ = write!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>", b.1, y - 4.0, escape(&text));
    }
}

/// The memory's name along its diagonal, when it fits before the ridge without overlapping.
fn memory_label(s: &mut String, p: &Plot, l: Layout, m: &Roof, peak: f64, color: &str, placed: &mut Placed) {
    let text = format!("{} {}", m.label, si(m.per_s, "B/s"));
    let y_min = 10f64.powi(p.d.y.0);
    let x0 = p.x_min().max(y_min / m.per_s);
    let ridge = (peak / m.per_s).min(p.x_max());
    let (ax, ay, bx, by) = (p.x(x0), p.y(m.per_s * x0), p.x(ridge), p.y(m.per_s * ridge));
    let len = ((bx - ax).powi(2) + (by - ay).powi(2)).sqrt();
    let w = text.chars().count() as f64 * l.font * 0.58;
    if len < w + l.font * 2.0 {
        return;
    }
    let (cos, sin) = ((bx - ax) / len, (by - ay) / len);
    // Starts a font's width up the line, sits just above it.
    let (tx, ty) = (ax + cos * l.font * 1.2, ay + sin * l.font * 1.2 - 4.0);
    let b = (tx, tx + cos * w + l.font * 0.4, ty + sin * w - l.font, ty + 2.0);
    if placed.claim(b, (p.left, p.right, p.top, p.bottom)) {
        let angle = sin.atan2(cos).to_degrees();
        let _ = write!(
            s,
            "<text x=\"{tx:.1}\" y=\"{ty:.1}\" fill=\"{color}\" transform=\"rotate({angle:.1} {tx:.1} {ty:.1})\">{}</text>",
            escape(&text)
        );
    }
}

/// Ops labelled by name on the wide chart (the busiest first); the narrow chart labels fewer.
const LABELLED: usize = 5;

fn points(s: &mut String, c: &Charts, p: &Plot, l: Layout, placed: &mut Placed) {
    let r = if l.narrow { 5.0 } else { 5.5 };
    for d in c.roofline.iter().rev() {
        let (x, y) = (p.x(d.intensity), p.y(d.flops_per_s));
        let _ = write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{}\" fill-opacity=\"0.85\" stroke=\"#fff\"><title>{}</title></circle>",
            bound_color(&d.bound),
            escape(&dot_title(d))
        );
    }
    if let Some(d) = &c.program_dot {
        let (x, y) = (p.x(d.intensity), p.y(d.flops_per_s));
        let _ = write!(
            s,
            "<path d=\"M{x:.1},{:.1}l{r:.1},{r:.1}l-{r:.1},{r:.1}l-{r:.1},-{r:.1}z\" fill=\"#1d2330\"><title>{}</title></path>",
            y - r,
            escape(&dot_title(d))
        );
        point_label(s, p, l, x, y, "Program", placed);
    }
    let n = if l.narrow { 3 } else { LABELLED };
    for d in c.roofline.iter().take(n) {
        point_label(s, p, l, p.x(d.intensity), p.y(d.flops_per_s), &clip(&d.name, 18), placed);
    }
}

/// A point's name to its right, else to its left, else nowhere (its tooltip still has it).
fn point_label(s: &mut String, p: &Plot, l: Layout, x: f64, y: f64, name: &str, placed: &mut Placed) {
    let f = l.font * 0.9;
    let w = name.chars().count() as f64 * f * 0.58;
    let bounds = (p.left, p.right, p.top, p.bottom);
    let (y0, y1) = (y - f * 0.5, y + f * 0.5);
    let right = (x + 8.0, x + 8.0 + w, y0, y1);
    let left = (x - 8.0 - w, x - 8.0, y0, y1);
    let at = if placed.claim(right, bounds) {
        Some((right.0, "start"))
    } else if placed.claim(left, bounds) {
        Some((left.1, "end"))
    } else {
        None
    };
    if let Some((tx, anchor)) = at {
        let _ = write!(
            s,
            "<text x=\"{tx:.1}\" y=\"{:.1}\" font-size=\"{f:.1}\" text-anchor=\"{anchor}\">{}</text>",
            y + f * 0.35,
            escape(name)
        );
    }
}

fn dot_title(d: &RooflineDot) -> String {
    format!(
        "{} ({}): {} at {:.2} FLOP/B of the bounding memory ({:.2} FLOP/B over all memories), {}-bound at {:.1} % of its roofline",
        d.name,
        d.category,
        si(d.flops_per_s, "FLOP/s"),
        d.intensity,
        d.all_bytes_intensity,
        d.bound,
        d.efficiency_pct
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(name: &str, intensity: f64, flops_per_s: f64) -> RooflineDot {
        RooflineDot {
            name: name.into(),
            category: "convolution fusion".into(),
            self_time_ms: 1.0,
            intensity,
            all_bytes_intensity: intensity / 2.0,
            flops_per_s,
            bound: "HBM".into(),
            efficiency_pct: 50.0,
        }
    }

    fn charts() -> Charts {
        Charts {
            roofline: vec![dot("convolution.1", 225.0, 1.06e14), dot("fusion.1", 0.2, 1.6e11)],
            compute_roofs: vec![
                Roof { label: "peak".into(), per_s: 1.97e14 },
                Roof { label: "int8".into(), per_s: 3.94e14 },
            ],
            memory_roofs: vec![
                Roof { label: "HBM".into(), per_s: 8.19e11 },
                Roof { label: "VMEM read".into(), per_s: 2.33e13 },
            ],
            ..Charts::default()
        }
    }

    #[test]
    fn decades_hold_points_ridges_and_peaks() {
        let d = decades(&charts());
        // 0.2 FLOP/B → from 0.1; the HBM ridge 240.5 → up to 1000.
        assert_eq!(d.x, (-1, 3));
        // 160 GFLOP/s → from 100 GFLOP/s; int8 394 TOP/s → up to 1 P.
        assert_eq!(d.y, (11, 15));
    }

    #[test]
    fn ticks_are_decades_with_si_labels_and_every_roof_is_drawn() {
        let svg = svg(&charts(), decades(&charts()), Layout { width: 1000.0, font: 14.0, narrow: false });
        for label in ["0.1", ">1<", ">10<", ">100<", ">1000<", "100 GFLOP/s", "1 TFLOP/s", "100 TFLOP/s"] {
            assert!(svg.contains(label), "{label} missing");
        }
        assert!(svg.contains("peak 197 TFLOP/s") && svg.contains("int8 394 TOP/s"), "compute roofs are labelled");
        assert_eq!(svg.matches("<polyline").count(), 2, "one roofline per memory");
        assert!(svg.contains(">convolution.1<"), "the busiest op is named");
        assert!(svg.contains("<title>fusion.1 (convolution fusion): 160 GFLOP/s at 0.20 FLOP/B"), "{svg}");
        assert!(!svg.contains("e14") && !svg.contains("e11"), "no scientific notation");
    }
}
