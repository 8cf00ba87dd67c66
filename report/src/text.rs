//! The text helpers every renderer shares: [`clip`] cuts a long name for a column, and
//! [`printable`] / [`printable_lines`] escape the control characters of text from a profile. A
//! leaf module: `render` (which re-exports them at their public paths, `render::clip`, ...) and
//! `tables` both use them, so that the page can build its sections from the tables' documents
//! without a module cycle.

/// `name` cut to at most `max` characters for a text column, with `…` where it was cut
/// (kernel names of C++ libraries run to thousands of characters).
///
/// ```
/// use xlens_report::render::clip;
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

/// The width of a text column: its longest entry (in characters), at least `min` (the width the
/// table has for short names, and its header) and at most `max` (longer entries are [`clip`]ped
/// to it), so that every row of the table keeps its columns aligned.
///
/// ```
/// use xlens_report::render::column_width;
/// assert_eq!(column_width(["Mul", "Sum"], 8, 40), 8);
/// assert_eq!(column_width(["_MklNativeConv2DBackpropFilterWithBias"], 28, 34), 34);
/// ```
pub fn column_width<'a>(entries: impl IntoIterator<Item = &'a str>, min: usize, max: usize) -> usize {
    entries.into_iter().map(|e| e.chars().count()).max().unwrap_or(0).clamp(min, max.max(min))
}

/// `text` with every control character (ESC, CR, LF, the C1 controls, ...) written as a `\u{..}`
/// escape, as JSON escapes them: names from a profile cannot move the cursor, retitle the
/// terminal or forge a report line.
///
/// ```
/// use xlens_report::render::printable;
/// assert_eq!(printable("fusion.1"), "fusion.1");
/// assert_eq!(printable("a\u{1b}]0;pwned\u{7}\n[P0] x"), "a\\u{1b}]0;pwned\\u{7}\\u{a}[P0] x");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, &[])
}

/// `text` with every control character but the line feed written as [`printable`] writes it: a
/// whole multi-line text (the diff, the runs table) made safe for a terminal at once.
///
/// ```
/// use xlens_report::render::printable_lines;
/// assert_eq!(printable_lines("run\u{1b}]0;x\u{7}\nnext\n"), "run\\u{1b}]0;x\\u{7}\nnext\n");
/// ```
pub fn printable_lines(text: &str) -> String {
    escape_controls(text, &['\n']).into_owned()
}

/// The one escaping rule for what reaches a terminal or a page: every control character of
/// `text` but those `kept` written as `\u{..}`.
pub(crate) fn escape_controls<'a>(text: &'a str, kept: &[char]) -> std::borrow::Cow<'a, str> {
    let escaped = |c: char| c.is_control() && !kept.contains(&c);
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
