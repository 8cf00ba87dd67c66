//! Formatting shared by the HTML page's tables and charts: escaping, Markdown code spans, SI
//! units, time units chosen per table, and axis ticks.

/// `s` as HTML text and attribute values: `&`, `<`, `>` and `"` escaped, and control characters
/// (ESC, BEL, ... from names in a profile) written as `\u{..}` as the text report writes them, so
/// that no raw control byte reaches the page; line feeds and tabs stay.
pub(crate) fn escape(s: &str) -> String {
    let s = s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    super::escape_controls(&s, &['\n', '\t']).into_owned()
}

/// `text` HTML-escaped, with its Markdown code spans (`` `x` ``) as `<code>x</code>`; a
/// backtick left without a partner stays a backtick. Nothing else of Markdown is rendered.
pub(super) fn inline_code(text: &str) -> String {
    let escaped = escape(text);
    let parts: Vec<&str> = escaped.split('`').collect();
    // Backticks pair up left to right; an odd one out (the last) is kept as text.
    let paired = (parts.len() - 1) / 2 * 2;
    let mut out = String::with_capacity(escaped.len() + 16 * paired);
    for (i, part) in parts.iter().enumerate() {
        if i > paired {
            out.push('`');
        } else if i > 0 {
            out.push_str(if i % 2 == 1 { "<code>" } else { "</code>" });
        }
        out.push_str(part);
    }
    out
}

/// `value` with an SI prefix and three significant digits, trailing zeros dropped:
/// `197 TFLOP/s`, `21.7 TB/s`, `1 GFLOP/s`; `n/a` when not finite.
pub(super) fn si(value: f64, unit: &str) -> String {
    const PREFIXES: [(f64, &str); 6] = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];
    if !value.is_finite() {
        return "n/a".to_owned();
    }
    // 999.96e9 rounds to 1000 G at three digits: take the next prefix from just below it.
    let (scale, prefix) =
        PREFIXES.iter().copied().find(|(scale, _)| value.abs() >= scale * 0.999_5).unwrap_or((1.0, ""));
    let v = value / scale;
    let digits = match v.abs() {
        a if a >= 99.95 => 0,
        a if a >= 9.995 => 1,
        _ => 2,
    };
    format!("{} {prefix}{unit}", trim_zeros(&format!("{v:.digits$}")))
}

/// `12.50` → `12.5`, `3.00` → `3`; integers unchanged.
fn trim_zeros(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

/// Ticks from 0 to at least `max`, about `target` intervals of 1, 2, 2.5 or 5 times a power of
/// ten; `[0, 1]` for a `max` that is not a positive number.
pub(super) fn linear_ticks(max: f64, target: usize) -> Vec<f64> {
    if !(max.is_finite() && max > 0.0) {
        return vec![0.0, 1.0];
    }
    let raw = max / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw * (1.0 - 1e-9));
    let step = step.unwrap_or(10.0 * magnitude);
    let n = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// The label of a linear tick: as many decimals as the step between ticks needs.
pub(super) fn tick_label(value: f64, step: f64) -> String {
    let digits = (0..6usize).find(|d| {
        let scaled = step * 10f64.powi(*d as i32);
        (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
    });
    format!("{:.*}", digits.unwrap_or(6), value)
}

/// The label of the decade `10^exp` on a log axis: `0.01`, `1`, `1000`.
pub(super) fn decade_label(exp: i32) -> String {
    if exp >= 0 {
        format!("{:.0}", 10f64.powi(exp))
    } else {
        format!("{:.*}", exp.unsigned_abs() as usize, 10f64.powi(exp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_become_code_after_escaping() {
        assert_eq!(inline_code("use `jax.jit` here"), "use <code>jax.jit</code> here");
        assert_eq!(inline_code("`a<b>` & `c`"), "<code>a&lt;b&gt;</code> &amp; <code>c</code>");
        // An unpaired backtick stays literal, and the pairs before it are still code.
        assert_eq!(inline_code("`x` and a ` alone"), "<code>x</code> and a ` alone");
        assert_eq!(inline_code("no code"), "no code");
        assert_eq!(inline_code("<script>"), "&lt;script&gt;");
    }

    #[test]
    fn si_uses_prefixes_and_three_digits() {
        assert_eq!(si(1.97e14, "FLOP/s"), "197 TFLOP/s");
        assert_eq!(si(1e12, "FLOP/s"), "1 TFLOP/s");
        assert_eq!(si(2.16961e13, "B/s"), "21.7 TB/s");
        assert_eq!(si(8.19e11, "B/s"), "819 GB/s");
        assert_eq!(si(9.9996e11, "FLOP/s"), "1 TFLOP/s");
        assert_eq!(si(1.25e9, "FLOP/s"), "1.25 GFLOP/s");
        assert_eq!(si(0.5, "FLOP/s"), "0.5 FLOP/s");
        assert_eq!(si(f64::NAN, "FLOP/s"), "n/a");
        assert!(!si(1.97e14, "FLOP/s").contains('e'), "never scientific notation");
    }

    #[test]
    fn linear_ticks_cover_the_maximum_with_round_steps() {
        assert_eq!(linear_ticks(8.135, 4), [0.0, 2.5, 5.0, 7.5, 10.0]);
        assert_eq!(linear_ticks(10.0, 5), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(linear_ticks(0.29, 3), [0.0, 0.1, 0.2, 0.30000000000000004]);
        assert_eq!(linear_ticks(0.0, 4), [0.0, 1.0]);
        assert_eq!(linear_ticks(f64::INFINITY, 4), [0.0, 1.0]);
        for max in [0.013, 1.0, 7.3, 99.0, 12_345.0] {
            let t = linear_ticks(max, 4);
            assert!(*t.last().unwrap() >= max && t.len() <= 6 && t.len() >= 2, "{max}: {t:?}");
        }
    }

    #[test]
    fn tick_labels_have_the_decimals_of_the_step() {
        assert_eq!(tick_label(7.5, 2.5), "7.5");
        assert_eq!(tick_label(10.0, 2.5), "10.0");
        assert_eq!(tick_label(4.0, 2.0), "4");
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(decade_label(-2), "0.01");
        assert_eq!(decade_label(0), "1");
        assert_eq!(decade_label(3), "1000");
    }
}
