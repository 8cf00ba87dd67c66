//! The step-time chart: one panel per host on a shared ms axis, each step a bar stacked by the
//! step anatomy, steps numbered on the x axis (labels thinned, bars bucketed when there are more
//! steps than room).

use std::fmt::Write as _;

use super::clip;
use super::format::{escape, linear_ticks, tick_label};
use super::layout::{Layout, both};
use xlens_faults::{ANATOMY_CLASSES, StepBar, StepSeries};

/// Fill colours of the anatomy classes, in [`ANATOMY_CLASSES`] order.
pub(super) const ANATOMY_COLORS: [&str; ANATOMY_CLASSES.len()] =
    ["#3f6fb5", "#7fb3e0", "#9b7fc7", "#e08a2c", "#c9a227", "#c62828", "#c3c8cf"];

/// Colour of a bar without an anatomy.
const PLAIN: &str = "#3f6fb5";

/// Host panels drawn at most; the host table lists every host.
pub(super) const MAX_PANELS: usize = 8;

/// Narrowest slot of a bar (bar and gap) in viewBox units: with more steps, steps are bucketed.
const MIN_SLOT: f64 = 4.0;

/// Consecutive steps drawn as one bar.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Bucket {
    /// Its x label: the number of its first step (the step's name when that is a number, else
    /// its position in the series from 0).
    pub(super) label: String,
    /// Name of its first step.
    pub(super) first: String,
    /// Name of its last step.
    pub(super) last: String,
    /// Steps in it.
    pub(super) count: usize,
    /// Mean step time (ms).
    pub(super) mean_ms: f64,
    /// Longest step (ms).
    pub(super) max_ms: f64,
    /// Mean anatomy (ms per class), when every step has one.
    pub(super) anatomy_ms: Option<[f64; ANATOMY_CLASSES.len()]>,
}

/// `steps` in at most `max_bars` buckets of equal size (the last may be shorter): one step per
/// bucket when they fit.
pub(super) fn buckets(steps: &[StepBar], max_bars: usize) -> Vec<Bucket> {
    let size = steps.len().div_ceil(max_bars.max(1)).max(1);
    steps.chunks(size).enumerate().map(|(i, chunk)| bucket(chunk, i * size)).collect()
}

/// The number of a step: its name when that is a number, else `index`.
fn step_number(name: &str, index: usize) -> String {
    let name = name.trim();
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_digit()) { name.to_owned() } else { index.to_string() }
}

fn bucket(steps: &[StepBar], first_index: usize) -> Bucket {
    let n = steps.len().max(1) as f64;
    let mut anatomy = Some([0.0; ANATOMY_CLASSES.len()]);
    for s in steps {
        anatomy = match (anatomy, s.anatomy_ms) {
            (Some(mut sum), Some(a)) => {
                sum.iter_mut().zip(a).for_each(|(t, v)| *t += v / n);
                Some(sum)
            }
            _ => None,
        };
    }
    Bucket {
        label: step_number(steps.first().map_or("", |s| s.name.as_str()), first_index),
        first: steps.first().map_or_else(String::new, |s| s.name.clone()),
        last: steps.last().map_or_else(String::new, |s| s.name.clone()),
        count: steps.len(),
        mean_ms: steps.iter().map(|s| s.step_ms).sum::<f64>() / n,
        max_ms: steps.iter().map(|s| s.step_ms).fold(0.0, f64::max),
        anatomy_ms: anatomy,
    }
}

/// Every how many bars an x label fits, for labels of `chars` characters in slots of `slot`.
pub(super) fn label_every(slot: f64, chars: usize, font: f64) -> usize {
    let width = chars as f64 * font * 0.62 + font;
    ((width / slot.max(1e-9)).ceil() as usize).max(1)
}

/// The host series to draw, slowest (by mean step) first, at most [`MAX_PANELS`].
pub(super) fn panels(series: &[StepSeries]) -> Vec<&StepSeries> {
    let mut sorted: Vec<&StepSeries> = series.iter().filter(|s| !s.steps.is_empty()).collect();
    sorted.sort_by(|a, b| b.mean_ms().total_cmp(&a.mean_ms()).then(a.host.cmp(&b.host)));
    sorted.truncate(MAX_PANELS);
    sorted
}

/// The chart of every panel, wide and narrow.
pub(super) fn chart(panels: &[&StepSeries], slowest: Option<&str>) -> String {
    let max_ms = panels.iter().flat_map(|p| &p.steps).map(|s| s.step_ms).fold(0.0, f64::max);
    both(|l| svg(panels, slowest, max_ms, l))
}

/// Vertical geometry of one panel.
struct Panel {
    top: f64,
    height: f64,
    left: f64,
    right: f64,
}

impl Panel {
    fn base(&self, font: f64) -> f64 {
        self.top + self.height - font * 2.6
    }

    fn plot_top(&self, font: f64) -> f64 {
        self.top + font * 2.0
    }
}

fn svg(panels: &[&StepSeries], slowest: Option<&str>, max_ms: f64, l: Layout) -> String {
    let height = if l.narrow { 170.0 } else { 190.0 };
    let total = height * panels.len() as f64;
    let ticks = linear_ticks(max_ms, if l.narrow { 3 } else { 4 });
    let mut s = format!(
        "<svg viewBox=\"0 0 {} {total}\" role=\"img\" aria-label=\"step times per host (ms)\" font-size=\"{}\">",
        l.width, l.font
    );
    let step = ticks.get(1).copied().unwrap_or(1.0);
    let widest = ticks.iter().map(|t| tick_label(*t, step).len()).max().unwrap_or(1) as f64;
    let left = l.font * (widest * 0.62 + 1.0).max(3.4);
    for (i, series) in panels.iter().enumerate() {
        let p = Panel { top: height * i as f64, height, left, right: l.font * 1.2 };
        let is_slowest = panels.len() > 1 && slowest == Some(series.host.as_str());
        panel_title(&mut s, &p, series, is_slowest, l);
        y_axis(&mut s, &p, &ticks, l);
        bars(&mut s, &p, &series.steps, *ticks.last().unwrap_or(&1.0), l);
    }
    s.push_str("</svg>");
    s
}

/// The host's name (cut to fit, whole in its tooltip) and mean step time above its panel.
fn panel_title(s: &mut String, p: &Panel, series: &StepSeries, slowest: bool, l: Layout) {
    let mean = format!("mean {:.3} ms", series.mean_ms());
    let suffix = if slowest { " (slowest)" } else { "" };
    // Characters of the bold name that fit beside the rest (0.62 em a character, bold included).
    let room = ((l.width - p.left - p.right) / (l.font * 0.62)) as usize;
    let chars = room.saturating_sub(mean.len() + suffix.len() + 1).max(8);
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"600\"><title>{}</title>{}{suffix} <tspan fill=\"#667\" font-weight=\"400\">{mean}</tspan></text>",
        p.left,
        p.top + l.font * 1.1,
        escape(&series.host),
        escape(&clip(&series.host, chars))
    );
}

fn y_axis(s: &mut String, p: &Panel, ticks: &[f64], l: Layout) {
    let (base, top) = (p.base(l.font), p.plot_top(l.font));
    let y_max = ticks.last().copied().unwrap_or(1.0).max(1e-12);
    let step = ticks.get(1).copied().unwrap_or(1.0);
    let x1 = l.width - p.right;
    for t in ticks {
        let y = base - (base - top) * t / y_max;
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#e3e6ea\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            p.left,
            p.left - 4.0,
            y + l.font * 0.35,
            tick_label(*t, step)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#667\">ms</text><line x1=\"{:.1}\" y1=\"{base:.1}\" x2=\"{x1:.1}\" y2=\"{base:.1}\" stroke=\"#667\"/>",
        p.left - 4.0,
        top - l.font * 0.6,
        p.left
    );
}

fn bars(s: &mut String, p: &Panel, steps: &[StepBar], y_max: f64, l: Layout) {
    let (base, top) = (p.base(l.font), p.plot_top(l.font));
    let plot_w = l.width - p.left - p.right;
    let groups = buckets(steps, (plot_w / MIN_SLOT).floor() as usize);
    let slot = plot_w / groups.len().max(1) as f64;
    let bar_w = (slot * 0.78).max(1.0);
    let chars = groups.iter().map(|g| g.label.chars().count()).max().unwrap_or(1);
    let every = label_every(slot, chars, l.font);
    let scale = (base - top) / y_max.max(1e-12);
    for (i, g) in groups.iter().enumerate() {
        let x = p.left + slot * i as f64 + (slot - bar_w) / 2.0;
        let _ = write!(s, "<g><title>{}</title>", escape(&bar_title(g)));
        stack(s, x, bar_w, base, g.mean_ms * scale, g);
        if g.count > 1 {
            let y = base - g.max_ms * scale;
            let _ = write!(
                s,
                "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>",
                x + bar_w
            );
        }
        s.push_str("</g>");
        if i % every == 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#445\">{}</text>",
                x + bar_w / 2.0,
                base + l.font * 1.2,
                escape(&g.label)
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#667\">step</text>",
        l.width - p.right,
        base + l.font * 2.1
    );
}

/// One bar of height `h` from `base` up: the anatomy classes in proportion, or one plain block.
fn stack(s: &mut String, x: f64, w: f64, base: f64, h: f64, g: &Bucket) {
    let sum: f64 = g.anatomy_ms.map_or(0.0, |a| a.iter().sum());
    let Some(anatomy) = g.anatomy_ms.filter(|_| sum > 0.0) else {
        let _ =
            write!(s, "<rect x=\"{x:.2}\" y=\"{:.2}\" width=\"{w:.2}\" height=\"{h:.2}\" fill=\"{PLAIN}\"/>", base - h);
        return;
    };
    let mut y = base;
    for (v, color) in anatomy.iter().zip(ANATOMY_COLORS) {
        let part = h * v / sum;
        if part <= 0.0 {
            continue;
        }
        y -= part;
        let _ = write!(s, "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{part:.2}\" fill=\"{color}\"/>");
    }
}

fn bar_title(g: &Bucket) -> String {
    let mut t = if g.count == 1 {
        format!("step {}: {:.3} ms", g.first, g.mean_ms)
    } else {
        format!("steps {} to {} ({}): mean {:.3} ms, longest {:.3} ms", g.first, g.last, g.count, g.mean_ms, g.max_ms)
    };
    if g.label != g.first {
        t = format!("{} ({t})", g.label);
    }
    if let Some(a) = g.anatomy_ms {
        let parts: Vec<String> =
            ANATOMY_CLASSES.iter().zip(a).filter(|(_, v)| *v > 0.0).map(|(c, v)| format!("{c} {v:.3} ms")).collect();
        let _ = write!(t, "; {}", parts.join(", "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(n: usize) -> Vec<StepBar> {
        (0..n)
            .map(|i| StepBar {
                name: i.to_string(),
                step_ms: 1.0 + (i % 10) as f64,
                anatomy_ms: Some([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, (i % 10) as f64]),
            })
            .collect()
    }

    #[test]
    fn steps_are_bucketed_when_they_outnumber_the_bars() {
        let few = buckets(&steps(8), 200);
        assert_eq!(few.len(), 8);
        assert_eq!((few[3].first.as_str(), few[3].count, few[3].mean_ms), ("3", 1, 4.0));
        let many = buckets(&steps(5000), 200);
        assert_eq!(many.len(), 200);
        assert!(many.iter().all(|b| b.count == 25));
        assert_eq!((many[1].first.as_str(), many[1].last.as_str()), ("25", "49"));
        // Steps 0..25 take 1..10 ms in a cycle: the longest is 10 ms, the mean (110 + 15) / 25 ms.
        assert_eq!(many[0].max_ms, 10.0);
        assert!((many[0].mean_ms - 5.0).abs() < 1e-9);
        let a = many[0].anatomy_ms.unwrap();
        assert!((a.iter().sum::<f64>() - many[0].mean_ms).abs() < 1e-9, "the mean anatomy sums to the mean step");
        assert_eq!(many[1].label, "25");
        let named = [StepBar { name: "jit_f(1219) #48".into(), step_ms: 1.0, anatomy_ms: None }];
        assert_eq!(buckets(&named, 10)[0].label, "0", "steps that are not numbered by name are by position");
        // A step without an anatomy makes the bucket plain.
        let mut mixed = steps(4);
        mixed[2].anatomy_ms = None;
        assert_eq!(buckets(&mixed, 1)[0].anatomy_ms, None);
    }

    #[test]
    fn x_labels_are_thinned_to_fit() {
        assert_eq!(label_every(100.0, 2, 14.0), 1);
        assert_eq!(label_every(4.0, 4, 14.0), 13);
        let svg = svg(
            &[&StepSeries { host: "h".into(), steps: steps(1000) }],
            None,
            10.0,
            Layout { width: 480.0, font: 14.0, narrow: true },
        );
        let labels = svg.matches("text-anchor=\"middle\"").count();
        assert!((3..=12).contains(&labels), "{labels} step labels on a narrow chart");
        let bars = svg.matches("<g><title>").count();
        assert!((60..=120).contains(&bars), "{bars} bars");
        assert!(svg.contains("steps 0 to "), "bucketed bars say which steps they hold");
    }

    #[test]
    fn panels_put_the_slowest_host_first() {
        let fast = StepSeries { host: "a".into(), steps: steps(3) };
        let mut slow = StepSeries { host: "b".into(), steps: steps(3) };
        slow.steps.iter_mut().for_each(|s| s.step_ms += 1.0);
        let both = [fast, slow];
        let order: Vec<&str> = panels(&both).iter().map(|s| s.host.as_str()).collect();
        assert_eq!(order, ["b", "a"]);
    }
}
