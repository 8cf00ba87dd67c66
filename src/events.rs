//! `xlens events` as library calls: the timeline events of every host chosen by plane, line,
//! name pattern and time window, aggregated ([`event_aggregates`]), listed ([`event_list`]), or
//! the lines of each plane with their event counts ([`event_lines`]); XProf's
//! `aggregate_xplane_events`, `list_xplane_events` and `list_xplane_lines`.
//!
//! Names are matched with [`NamePattern`]: a regular expression searched anywhere in the name
//! (Python's `re.search`, as XProf does), with XProf's leading negative look-aheads
//! (`^(?!end: )...`) understood although the `regex` crate has no look-around.

use std::path::Path;

use regex::Regex;

use crate::documents::{BoxError, OpenedRun, Partial, open_readable, per_host_in};
use crate::report::tables::HostInventory;
use crate::report::tables::events::{HostEventAggregates, HostEventList};
use crate::roofline::events::{EventFilter, GroupBy, TimeWindow, aggregate_events, list_events};

/// A name pattern: a regular expression searched in the name, optionally after `^` and one or
/// more negative look-aheads `(?!…)` at the start (XProf's patterns exclude `end: ` markers
/// so), each a prefix the name must not match.
#[derive(Clone, Debug)]
pub struct NamePattern {
    source: String,
    keep: Regex,
    refuse: Vec<Regex>,
}

/// Why a pattern is refused.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// The regular expression does not compile (look-around other than leading negative
    /// look-aheads included).
    #[error("bad pattern {pattern:?}: {message}")]
    Invalid {
        /// The pattern as given.
        pattern: String,
        /// The compiler's reason, on one line.
        message: String,
    },
}

impl NamePattern {
    /// Compiles `pattern`.
    ///
    /// ```
    /// use xlens::events::NamePattern;
    /// let p = NamePattern::new("^(?!end: )(.*fusion.*|dot)$")?;
    /// assert!(p.is_match("multiply_fusion.3"));
    /// assert!(!p.is_match("end: multiply_fusion.3"));
    /// assert!(NamePattern::new("ExecuteReplicated")?.is_match("PjRt ExecuteReplicated x"));
    /// Ok::<(), xlens::events::PatternError>(())
    /// ```
    pub fn new(pattern: &str) -> Result<NamePattern, PatternError> {
        let invalid =
            |e: regex::Error| PatternError::Invalid { pattern: pattern.to_owned(), message: one_line(&e.to_string()) };
        let mut refuse = Vec::new();
        let mut rest = pattern;
        if let Some(after) = pattern.strip_prefix('^') {
            rest = after;
            while let Some(inner) = rest.strip_prefix("(?!") {
                let Some(end) = group_end(inner) else { break };
                refuse.push(Regex::new(&format!("^(?:{})", &inner[..end])).map_err(invalid)?);
                rest = &inner[end + 1..];
            }
            let keep = Regex::new(&format!("^(?:{rest})")).map_err(invalid)?;
            return Ok(NamePattern { source: pattern.to_owned(), keep, refuse });
        }
        Ok(NamePattern { source: pattern.to_owned(), keep: Regex::new(rest).map_err(invalid)?, refuse })
    }

    /// True when the pattern is found in `name` and no leading look-ahead refuses it.
    pub fn is_match(&self, name: &str) -> bool {
        self.keep.is_match(name) && !self.refuse.iter().any(|r| r.is_match(name))
    }

    /// The pattern as given.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// A regex error's reason: its last non-empty line (the pattern and caret above it are ours to
/// give), without its `error: ` prefix.
fn one_line(message: &str) -> String {
    let last = message.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

/// Where the group that starts at `s` (just after its opening parenthesis) closes: the byte
/// index of its `)`, skipping escapes and character classes; `None` when it does not close.
fn group_end(s: &str) -> Option<usize> {
    let (mut depth, mut class, mut escaped) = (1usize, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class => depth += 1,
            ')' if !class => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// What `xlens events` asks: patterns on plane, line and event names (all when `None`), a time
/// window in ms from each host's first line, the grouping and how many rows to keep.
#[derive(Clone, Debug, Default)]
pub struct EventsRequest {
    /// Event names.
    pub name: Option<NamePattern>,
    /// Plane names.
    pub plane: Option<NamePattern>,
    /// Line names.
    pub line: Option<NamePattern>,
    /// Events starting at or after this many ms from the host's timeline origin
    /// (`roofline::events::timeline_origin`).
    pub from_ms: Option<f64>,
    /// Events starting before this many ms from the origin.
    pub to_ms: Option<f64>,
    /// Grouping of the aggregates.
    pub group_by: GroupBy,
    /// Rows kept per host (groups, or listed events); all when `None`.
    pub top: Option<usize>,
}

impl EventsRequest {
    /// `f` with the filter this request describes.
    fn with_filter<T>(&self, f: impl FnOnce(&EventFilter<'_>) -> T) -> T {
        let matcher = |p: &Option<NamePattern>| {
            let p = p.clone();
            move |n: &str| p.as_ref().is_none_or(|p| p.is_match(n))
        };
        let (name, plane, line) = (matcher(&self.name), matcher(&self.plane), matcher(&self.line));
        let window = (self.from_ms.is_some() || self.to_ms.is_some()).then(|| TimeWindow {
            from: crate::xplane::Picos(self.from_ms.map_or(i64::MIN, |ms| (ms * 1e9).round() as i64)),
            to: crate::xplane::Picos(self.to_ms.map_or(i64::MAX, |ms| (ms * 1e9).round() as i64)),
        });
        f(&EventFilter { plane: &plane, line: &line, name: &name, window })
    }
}

/// The duration statistics of the events `req` chooses, per host (`xlens events`).
pub fn event_aggregates(path: &Path, req: &EventsRequest) -> Result<Partial<Vec<HostEventAggregates>>, BoxError> {
    event_aggregates_in(&open_readable(path)?, req)
}

/// [`event_aggregates`] of a run already opened.
pub fn event_aggregates_in(
    opened: &OpenedRun,
    req: &EventsRequest,
) -> Result<Partial<Vec<HostEventAggregates>>, BoxError> {
    per_host_in(opened, |h| {
        req.with_filter(|f| aggregate_events(h.space(), f, req.group_by)).map(|aggregates| HostEventAggregates {
            host: h.name().to_owned(),
            group_by: req.group_by,
            aggregates,
        })
    })
}

/// The events `req` chooses, per host, the first `req.top` of each (`xlens events --list`).
pub fn event_list(path: &Path, req: &EventsRequest) -> Result<Partial<Vec<HostEventList>>, BoxError> {
    event_list_in(&open_readable(path)?, req)
}

/// [`event_list`] of a run already opened.
pub fn event_list_in(opened: &OpenedRun, req: &EventsRequest) -> Result<Partial<Vec<HostEventList>>, BoxError> {
    per_host_in(opened, |h| {
        req.with_filter(|f| list_events(h.space(), f, req.top))
            .map(|list| HostEventList { host: h.name().to_owned(), list })
    })
}

/// Every plane's lines with their event counts, per host (`xlens events --lines`).
pub fn event_lines(path: &Path) -> Result<Partial<Vec<HostInventory>>, BoxError> {
    crate::documents::host_inventories(path)
}

/// The `events --json` document of what [`event_aggregates`] read.
pub fn aggregates_document(a: &Partial<Vec<HostEventAggregates>>, top: Option<usize>) -> serde_json::Value {
    a.document(crate::report::tables::events::aggregates_json(&a.hosts, top))
}

/// The `events --list --json` document of what [`event_list`] read.
pub fn list_document(l: &Partial<Vec<HostEventList>>) -> serde_json::Value {
    l.document(crate::report::tables::events::list_json(&l.hosts))
}

/// The `events --lines --json` document of what [`event_lines`] read.
pub fn lines_document(inv: &Partial<Vec<HostInventory>>) -> serde_json::Value {
    inv.document(crate::report::tables::events::lines_json(&inv.hosts))
}
