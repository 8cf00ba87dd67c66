//! Timeline events chosen by plane, line, name and time window: the events themselves, and
//! their duration statistics grouped by name or by line, as XProf's `list_xplane_events` and
//! `aggregate_xplane_events` give them (every plane and line of the file as written, derived
//! lines included where the file holds them; an event's name is its metadata's name).
//!
//! The filters are predicates on names ([`EventFilter`]), so that the caller chooses the
//! pattern language; the name predicate runs once per metadata entry of a plane, not per event.
//! Statistics follow XProf's: percentiles interpolate linearly between the two nearest ranks
//! (numpy's default), and the standard deviation is the sample one (divided by `count - 1`, 0
//! for one event).

use std::collections::HashMap;

use xlens_xplane::{Event, Picos, Plane, Space};

/// Which events a query keeps: predicates on the plane, line and event names, and a window.
pub struct EventFilter<'f> {
    /// Keeps a plane by its name.
    pub plane: &'f (dyn Fn(&str) -> bool + Sync),
    /// Keeps a line by its name.
    pub line: &'f (dyn Fn(&str) -> bool + Sync),
    /// Keeps an event by its metadata's name (`""` for an event whose metadata id is dangling).
    pub name: &'f (dyn Fn(&str) -> bool + Sync),
    /// Keeps only events that start in this window, relative to [`timeline_origin`]; all when
    /// `None`.
    pub window: Option<TimeWindow>,
}

impl std::fmt::Debug for EventFilter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFilter").field("window", &self.window).finish_non_exhaustive()
    }
}

/// A window of time, relative to a host's [`timeline_origin`]: an event is in it when its start
/// is at or after `from` and before `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeWindow {
    /// First start kept.
    pub from: Picos,
    /// First start no longer kept.
    pub to: Picos,
}

/// How [`aggregate_events`] groups the events it keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// By event name (XProf's default).
    #[default]
    Name,
    /// By line name: lines of the same name on several planes (each TPU core's `XLA Ops`) are
    /// one group, as in XProf.
    Line,
}

/// Duration statistics of a group of events.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationStats {
    /// Events.
    pub count: u64,
    /// Sum of their durations.
    pub total: Picos,
    /// Mean duration (ps).
    pub mean_ps: f64,
    /// Shortest duration.
    pub min: Picos,
    /// Longest duration.
    pub max: Picos,
    /// Median duration, linearly interpolated (ps).
    pub p50_ps: f64,
    /// 90th percentile, linearly interpolated (ps).
    pub p90_ps: f64,
    /// 99th percentile, linearly interpolated (ps).
    pub p99_ps: f64,
    /// Sample standard deviation (ps; 0 for one event).
    pub std_dev_ps: f64,
}

impl DurationStats {
    /// The statistics of `durations` (ps), sorted in place; `None` when empty.
    pub fn of(durations: &mut [i64]) -> Option<DurationStats> {
        durations.sort_unstable();
        let (&min, &max) = (durations.first()?, durations.last()?);
        let count = durations.len() as u64;
        let total: i64 = durations.iter().fold(0i64, |a, &d| a.saturating_add(d));
        let mean = durations.iter().map(|&d| d as f64).sum::<f64>() / count as f64;
        let std_dev = if count > 1 {
            let squares: f64 = durations.iter().map(|&d| (d as f64 - mean).powi(2)).sum();
            (squares / (count - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(DurationStats {
            count,
            total: Picos(total),
            mean_ps: total as f64 / count as f64,
            min: Picos(min),
            max: Picos(max),
            p50_ps: percentile(durations, 0.5),
            p90_ps: percentile(durations, 0.9),
            p99_ps: percentile(durations, 0.99),
            std_dev_ps: std_dev,
        })
    }
}

/// The `q` quantile of sorted values, linearly interpolated between the nearest ranks at
/// `(n - 1) * q` (numpy's default), rounded as XProf's figures are: `a + (b - a) * t`.
fn percentile(sorted: &[i64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else { return f64::NAN };
    let h = last as f64 * q;
    let lo = (h.floor() as usize).min(last);
    let t = h - h.floor();
    let (a, b) = (sorted[lo] as f64, sorted[(lo + 1).min(last)] as f64);
    a + (b - a) * t
}

/// One group of [`aggregate_events`]: its key (an event or line name) and its statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct EventGroup {
    /// The event name or line name.
    pub key: String,
    /// Duration statistics of the group's events.
    pub stats: DurationStats,
}

/// What [`aggregate_events`] found on one host.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EventAggregates {
    /// Groups by total time, longest first (ties in the order their first event was met).
    pub groups: Vec<EventGroup>,
    /// Events of the planes and lines the filter keeps, matched or not.
    pub events_scanned: u64,
}

/// One event of [`list_events`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedEvent {
    /// Its plane's name.
    pub plane: String,
    /// Its line's name.
    pub line: String,
    /// Its metadata's name.
    pub name: String,
    /// Start on the profile's clock (its line's timestamp plus its offset), as XProf's
    /// `offset_ps`.
    pub offset: Picos,
    /// Start relative to the host's [`timeline_origin`].
    pub start: Picos,
    /// Duration.
    pub duration: Picos,
}

/// What [`list_events`] found on one host.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EventList {
    /// The first events matched, in file order (planes, lines, events), up to the limit.
    pub events: Vec<ListedEvent>,
    /// Events matched, listed or not.
    pub total_matched: u64,
}

/// The start every window of a host is relative to: the earliest timestamp of a line that has
/// events (`Picos::ZERO` for a host without events).
pub fn timeline_origin(space: &Space) -> Picos {
    space
        .planes()
        .iter()
        .flat_map(|p| p.lines().iter().filter(|l| l.event_count() > 0).map(|l| l.start()))
        .min()
        .unwrap_or(Picos::ZERO)
}

/// Calls `f` with each event the filter keeps, with its plane and line name, in file order;
/// returns the events of the planes and lines kept.
fn walk<'a>(
    space: &'a Space,
    filter: &EventFilter<'_>,
    mut f: impl FnMut(&'a Plane, &'a str, &Event<'a>, Picos),
) -> xlens_xplane::Result<u64> {
    let origin = timeline_origin(space);
    let dangling_kept = (filter.name)("");
    let mut scanned = 0u64;
    for plane in space.planes().iter().filter(|p| (filter.plane)(p.name())) {
        let mask = plane.metadata_mask(|m| (filter.name)(m.name()));
        for line in plane.lines().iter().filter(|l| (filter.line)(l.name())) {
            scanned += line.event_count() as u64;
            if mask.is_empty() && !dangling_kept {
                continue;
            }
            for ev in line.events(plane) {
                let ev = ev?;
                let kept = mask.contains(&ev) || (dangling_kept && ev.metadata().is_none());
                if !kept {
                    continue;
                }
                let start = Picos(ev.start().0.saturating_sub(origin.0));
                if filter.window.is_some_and(|w| start < w.from || start >= w.to) {
                    continue;
                }
                f(plane, line.name(), &ev, start);
            }
        }
    }
    Ok(scanned)
}

/// The duration statistics of the events `filter` keeps on one host, grouped by `by`
/// (XProf's `aggregate_xplane_events`).
///
/// ```
/// use xlens_roofline::events::{EventFilter, GroupBy, aggregate_events};
/// use xlens_xplane::{Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut p = b.plane(1, "/host:CPU");
///     let m = p.event_metadata("train");
///     let mut t = p.line(5, "python", 0);
///     for (start, d) in [(0, 100), (200, 300), (600, 200)] {
///         t.event(m, start, d);
///     }
/// }
/// let space = Space::parse(b.finish().into())?;
/// let all = |_: &str| true;
/// let filter = EventFilter { plane: &all, line: &all, name: &|n: &str| n == "train", window: None };
/// let agg = aggregate_events(&space, &filter, GroupBy::Name)?;
/// assert_eq!(agg.groups[0].stats.count, 3);
/// assert_eq!(agg.groups[0].stats.p50_ps, 200.0);
/// assert_eq!(agg.groups[0].stats.std_dev_ps, 100.0);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn aggregate_events(space: &Space, filter: &EventFilter<'_>, by: GroupBy) -> xlens_xplane::Result<EventAggregates> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut groups: Vec<(&str, Vec<i64>)> = Vec::new();
    let events_scanned = walk(space, filter, |_, line, ev, _| {
        let key = match by {
            GroupBy::Name => ev.name(),
            GroupBy::Line => line,
        };
        let at = *index.entry(key).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(ev.duration().0);
    })?;
    let mut groups: Vec<EventGroup> = groups
        .into_iter()
        .filter_map(|(key, mut d)| DurationStats::of(&mut d).map(|stats| EventGroup { key: key.to_owned(), stats }))
        .collect();
    // Stable: ties keep the order their first event was met in.
    groups.sort_by_key(|g| std::cmp::Reverse(g.stats.total));
    Ok(EventAggregates { groups, events_scanned })
}

/// The events `filter` keeps on one host, in file order, the first `limit` of them (all when
/// `None`) (XProf's `list_xplane_events`).
pub fn list_events(space: &Space, filter: &EventFilter<'_>, limit: Option<usize>) -> xlens_xplane::Result<EventList> {
    let mut list = EventList::default();
    walk(space, filter, |plane, line, ev, start| {
        list.total_matched += 1;
        if limit.is_none_or(|n| list.events.len() < n) {
            list.events.push(ListedEvent {
                plane: plane.name().to_owned(),
                line: line.to_owned(),
                name: ev.name().to_owned(),
                offset: ev.start(),
                start,
                duration: ev.duration(),
            });
        }
    })?;
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_as_numpy() {
        let mut v = [6074235000, 8230770000, 5899326000, 5558527000, 5497523000];
        let s = DurationStats::of(&mut v).unwrap();
        // XProf's figures for these five `train` steps (corpus `clean`).
        assert_eq!(s.p50_ps, 5899326000.0);
        assert_eq!(s.p90_ps, 7368156000.0);
        assert_eq!(s.p99_ps, 8144508600.0);
        assert!((s.std_dev_ps - 1131553177.5646694).abs() < 1e-3);
    }

    #[test]
    fn one_event_has_no_spread() {
        let s = DurationStats::of(&mut [7]).unwrap();
        assert_eq!((s.p50_ps, s.p99_ps, s.std_dev_ps), (7.0, 7.0, 0.0));
        assert!(DurationStats::of(&mut []).is_none());
    }
}
