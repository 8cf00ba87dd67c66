//! `xlens events`: timeline events aggregated by name or line, listed, and the lines of each
//! plane, as text and JSON. The JSON keeps XProf's field names (`aggregate_xplane_events`,
//! `list_xplane_events`, `list_xplane_lines`), one entry per host.

use serde_json::{Value, json};
use xlens_roofline::events::{EventAggregates, EventList, GroupBy};

use super::{HostInventory, line};

/// The aggregates of one host.
#[derive(Debug)]
pub struct HostEventAggregates {
    /// Host name.
    pub host: String,
    /// How the events were grouped.
    pub group_by: GroupBy,
    /// The groups.
    pub aggregates: EventAggregates,
}

/// The events listed of one host.
#[derive(Debug)]
pub struct HostEventList {
    /// Host name.
    pub host: String,
    /// The events.
    pub list: EventList,
}

fn key_name(by: GroupBy) -> &'static str {
    match by {
        GroupBy::Name => "event",
        GroupBy::Line => "line",
    }
}

/// The `events --json` document:
/// `{"hosts":[{"host","group_by","aggregates":[{"event"|"line","count","total_duration_ps",
/// "avg_duration_ps","min_duration_ps","p50_duration_ps","p90_duration_ps","p99_duration_ps",
/// "max_duration_ps","std_dev_ps"}],"returned","total_matched","events_scanned","truncated"}]}`:
/// XProf's `aggregate_xplane_events` fields, per host. Groups by total time, longest first;
/// `top` keeps the first N (all when `None`), `truncated` says whether some were left out.
pub fn aggregates_json(hosts: &[HostEventAggregates], top: Option<usize>) -> Value {
    json!({
        "hosts": hosts.iter().map(|h| {
            let key = key_name(h.group_by);
            let groups = &h.aggregates.groups;
            let kept = groups.len().min(top.unwrap_or(usize::MAX));
            json!({
                "host": h.host,
                "group_by": if h.group_by == GroupBy::Line { "line" } else { "name" },
                "aggregates": groups[..kept].iter().map(|g| {
                    let s = &g.stats;
                    json!({
                        key: g.key,
                        "count": s.count,
                        "total_duration_ps": s.total.0,
                        "avg_duration_ps": s.mean_ps,
                        "min_duration_ps": s.min.0,
                        "p50_duration_ps": s.p50_ps,
                        "p90_duration_ps": s.p90_ps,
                        "p99_duration_ps": s.p99_ps,
                        "max_duration_ps": s.max.0,
                        "std_dev_ps": s.std_dev_ps,
                    })
                }).collect::<Vec<_>>(),
                "returned": kept,
                "total_matched": groups.len(),
                "events_scanned": h.aggregates.events_scanned,
                "truncated": kept < groups.len(),
            })
        }).collect::<Vec<_>>(),
    })
}

/// The aggregates as text: per host, one row per group (count, total, mean, p50/p90/p99, max,
/// std dev, in ms), `top` rows (all when `None`).
pub fn aggregates_text(hosts: &[HostEventAggregates], top: Option<usize>) -> String {
    let mut out = String::new();
    let ms = |ps: f64| ps / 1e9;
    for h in hosts {
        let groups = &h.aggregates.groups;
        let kept = groups.len().min(top.unwrap_or(usize::MAX));
        line(
            &mut out,
            format_args!(
                "host {}: {} {} groups matched of {} events scanned{}",
                h.host,
                groups.len(),
                key_name(h.group_by),
                h.aggregates.events_scanned,
                if kept < groups.len() { format!(", first {kept} shown") } else { String::new() }
            ),
        );
        if kept == 0 {
            continue;
        }
        line(
            &mut out,
            format_args!(
                "  {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}",
                "count",
                "total ms",
                "mean ms",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
                "std ms",
                key_name(h.group_by)
            ),
        );
        for g in &groups[..kept] {
            let s = &g.stats;
            line(
                &mut out,
                format_args!(
                    "  {:>8} {:>12.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}  {}",
                    s.count,
                    s.total.as_ms_f64(),
                    ms(s.mean_ps),
                    ms(s.p50_ps),
                    ms(s.p90_ps),
                    ms(s.p99_ps),
                    s.max.as_ms_f64(),
                    ms(s.std_dev_ps),
                    g.key
                ),
            );
        }
    }
    out
}

/// The `events --list --json` document:
/// `{"hosts":[{"host","events":[{"plane","line_id","event","offset_ps","start_ps","duration_ps"}],
/// "returned","total_matched","truncated"}]}`: XProf's `list_xplane_events` fields (`line_id`
/// is the line's name, as there; `offset_ps` the start on the profile's clock), plus
/// `start_ps`, the start from the host's first line (the origin of `--from-ms` / `--to-ms`).
pub fn list_json(hosts: &[HostEventList]) -> Value {
    json!({
        "hosts": hosts.iter().map(|h| json!({
            "host": h.host,
            "events": h.list.events.iter().map(|e| json!({
                "plane": e.plane,
                "line_id": e.line,
                "event": e.name,
                "offset_ps": e.offset.0,
                "start_ps": e.start.0,
                "duration_ps": e.duration.0,
            })).collect::<Vec<_>>(),
            "returned": h.list.events.len(),
            "total_matched": h.list.total_matched,
            "truncated": (h.list.events.len() as u64) < h.list.total_matched,
        })).collect::<Vec<_>>(),
    })
}

/// The events listed, as text: per host, one row per event (start and duration in ms, plane,
/// line, name).
pub fn list_text(hosts: &[HostEventList]) -> String {
    let mut out = String::new();
    for h in hosts {
        let l = &h.list;
        line(&mut out, format_args!("host {}: {} events matched, {} listed", h.host, l.total_matched, l.events.len()));
        if l.events.is_empty() {
            continue;
        }
        line(&mut out, format_args!("  {:>14} {:>12}  {}", "start ms", "duration ms", "plane / line / event"));
        for e in &l.events {
            line(
                &mut out,
                format_args!(
                    "  {:>14.6} {:>12.6}  {} / {} / {}",
                    e.start.as_ms_f64(),
                    e.duration.as_ms_f64(),
                    e.plane,
                    e.line,
                    e.name
                ),
            );
        }
    }
    out
}

/// The `events --lines --json` document:
/// `{"hosts":[{"host","planes":[{"name","lines":[{"name","event_count"}],"total_events"}]}]}`:
/// XProf's `list_xplane_lines` fields, per host; a plane with lines whose message is empty
/// (XProf lists each as a line named `""` with no events) counts them in `empty_lines`.
pub fn lines_json(hosts: &[HostInventory]) -> Value {
    json!({
        "hosts": hosts.iter().map(|h| json!({
            "host": h.host,
            "planes": h.planes.iter().map(|p| {
                let mut plane = json!({
                    "name": p.name,
                    "lines": p.lines.iter().map(|l| json!({"name": l.name, "event_count": l.events})).collect::<Vec<_>>(),
                    "total_events": p.events(),
                });
                if p.empty_lines > 0 {
                    plane["empty_lines"] = json!(p.empty_lines);
                }
                plane
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
