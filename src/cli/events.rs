//! `xlens events`: timeline events by plane, line, name pattern and time window, aggregated,
//! listed, or the lines of each plane (XProf's `aggregate_xplane_events`, `list_xplane_events`,
//! `list_xplane_lines`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::commands::{EXIT_CODES, Job};
use super::{emit, emit_json};
use crate::events::{
    EventsRequest, NamePattern, aggregates_document, event_aggregates, event_lines, event_list, lines_document,
    list_document,
};
use crate::report::tables::events::{aggregates_text, list_text};
use crate::report::tables::inventory_text;
use crate::roofline::events::GroupBy;

/// Timeline events: duration statistics by name or line (count, total, mean, p50/p90/p99, max,
/// std dev), the events themselves (`--list`), or each plane's lines (`--lines`).
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct EventsCmd {
    /// The profile: a `*.xplane.pb`, a session directory or a logdir.
    path: PathBuf,
    /// One JSON document for the session (XProf's field names).
    #[arg(long)]
    json: bool,
    /// Events whose name this regular expression is found in (leading `^(?!…)` look-aheads
    /// allowed, as XProf's `--event_regex`); all when absent.
    #[arg(long, value_name = "REGEX", value_parser = parse_pattern)]
    pattern: Option<NamePattern>,
    /// Only planes whose name this regular expression is found in.
    #[arg(long, value_name = "REGEX", value_parser = parse_pattern)]
    plane: Option<NamePattern>,
    /// Only lines whose name this regular expression is found in.
    #[arg(long, value_name = "REGEX", value_parser = parse_pattern)]
    line: Option<NamePattern>,
    /// Only events starting at or after this time (ms from the host's first line).
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    from_ms: Option<f64>,
    /// Only events starting before this time (ms from the host's first line).
    #[arg(long, value_name = "MS", value_parser = parse_ms)]
    to_ms: Option<f64>,
    /// Group the statistics by event name or by line name.
    #[arg(long, value_enum, default_value_t = Group::Name)]
    group_by: Group,
    /// Groups (or, with --list, events) shown per host: text 20 by default, JSON all.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// List the matching events (plane, line, name, start, duration) instead of aggregating.
    #[arg(long, conflicts_with_all = ["lines", "group_by"])]
    list: bool,
    /// List each plane's lines with their event counts.
    #[arg(long, conflicts_with_all = ["pattern", "plane", "line", "from_ms", "to_ms", "group_by", "top"])]
    lines: bool,
}

/// `--group-by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Group {
    /// By event name.
    Name,
    /// By line name.
    Line,
}

fn parse_pattern(s: &str) -> Result<NamePattern, String> {
    NamePattern::new(s).map_err(|e| e.to_string())
}

fn parse_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a time in ms")),
    }
}

impl Job for EventsCmd {
    fn run(self) -> ExitCode {
        super::run(|| self.job())
    }
}

impl EventsCmd {
    fn request(&self) -> EventsRequest {
        EventsRequest {
            name: self.pattern.clone(),
            plane: self.plane.clone(),
            line: self.line.clone(),
            from_ms: self.from_ms,
            to_ms: self.to_ms,
            group_by: match self.group_by {
                Group::Name => GroupBy::Name,
                Group::Line => GroupBy::Line,
            },
            top: if self.json { self.top } else { Some(self.top.unwrap_or(20)) },
        }
    }

    fn job(&self) -> anyhow::Result<()> {
        let path: &Path = &self.path;
        let req = self.request();
        if self.lines {
            let inv = event_lines(path).map_err(|e| anyhow::anyhow!(e))?;
            super::jobs::warn_skipped(&inv.skipped_hosts, &inv.errors);
            return if self.json { emit_json(&lines_document(&inv)) } else { emit(&inventory_text(&inv.hosts)) };
        }
        if self.list {
            let list = event_list(path, &req).map_err(|e| anyhow::anyhow!(e))?;
            super::jobs::warn_skipped(&list.skipped_hosts, &list.errors);
            return if self.json { emit_json(&list_document(&list)) } else { emit(&list_text(&list.hosts)) };
        }
        let agg = event_aggregates(path, &req).map_err(|e| anyhow::anyhow!(e))?;
        super::jobs::warn_skipped(&agg.skipped_hosts, &agg.errors);
        if self.json {
            emit_json(&aggregates_document(&agg, req.top))
        } else {
            emit(&aggregates_text(&agg.hosts, req.top))
        }
    }
}
