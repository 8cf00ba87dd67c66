//! polars DataFrames of planes, lines, events and stats.
//!
//! Frames are built at the edge from typed rows or from the lazy views; every function returns a
//! frame with its full schema, also when there is nothing to show (zero rows).

use polars::prelude::*;

use crate::error::{Error, ErrorKind, Location, Result};
use crate::event::StatValue;
use crate::inventory::PlaneInventory;
use crate::space::Space;

fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    let height = columns.first().map_or(0, |c| c.len());
    DataFrame::new(height, columns).map_err(|e| Error::new(ErrorKind::Frame(e.to_string()), Location::default()))
}

/// The inventory as a frame: one row per line (and one row with a null line for planes without
/// lines). Columns: `host`, `plane`, `plane_kind`, `line`, `line_id`, `events`, `first_ps`, `last_ps`.
///
/// ```
/// use xlens_xplane::{Space, SpaceBuilder, frame, inventory};
/// let mut b = SpaceBuilder::default();
/// b.plane(1, "/host:metadata");
/// let space = Space::parse(b.finish().into())?;
/// let df = frame::inventory_frame(&[("vm", inventory(&space)?)])?;
/// assert_eq!(df.height(), 1);
/// assert_eq!(df.width(), 8);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inventory_frame(hosts: &[(&str, Vec<PlaneInventory>)]) -> Result<DataFrame> {
    let mut host = Vec::new();
    let mut plane = Vec::new();
    let mut kind = Vec::new();
    let mut line: Vec<Option<String>> = Vec::new();
    let mut line_id: Vec<Option<i64>> = Vec::new();
    let mut events: Vec<u64> = Vec::new();
    let mut first: Vec<Option<i64>> = Vec::new();
    let mut last: Vec<Option<i64>> = Vec::new();
    for (h, planes) in hosts {
        for p in planes {
            let mut push = |l: Option<&crate::inventory::LineInventory>| {
                host.push(h.to_string());
                plane.push(p.name.clone());
                kind.push(p.kind.label());
                line.push(l.map(|l| l.name.clone()));
                line_id.push(l.map(|l| l.id));
                events.push(l.map_or(0, |l| l.events));
                first.push(l.and_then(|l| l.first.map(|t| t.0)));
                last.push(l.and_then(|l| l.last.map(|t| t.0)));
            };
            if p.lines.is_empty() {
                push(None);
            }
            for l in &p.lines {
                push(Some(l));
            }
        }
    }
    frame(vec![
        Column::new("host".into(), host),
        Column::new("plane".into(), plane),
        Column::new("plane_kind".into(), kind),
        Column::new("line".into(), line),
        Column::new("line_id".into(), line_id),
        Column::new("events".into(), events),
        Column::new("first_ps".into(), first),
        Column::new("last_ps".into(), last),
    ])
}

/// Which events to put in a frame, and which stats to add as columns.
#[derive(Clone, Debug, Default)]
pub struct EventSelection {
    /// Planes with one of these names; all planes when empty (kinds are in
    /// [`Space::planes_where`]).
    pub planes: Vec<String>,
    /// Lines with one of these names; all lines when empty.
    pub lines: Vec<String>,
    /// Stat names to add as columns (the event's own stat, else its metadata's).
    pub stats: Vec<String>,
}

/// Selected events as a frame. Columns: `plane`, `line`, `name`, `display_name`, `start_ps`,
/// `duration_ps`, then one column per selected stat, typed `i64` when every present value is an
/// integer that fits, `f64` when numeric, else string.
pub fn events_frame(space: &Space, selection: &EventSelection) -> Result<DataFrame> {
    let mut plane_col = Vec::new();
    let mut line_col = Vec::new();
    let mut name_col = Vec::new();
    let mut display_col = Vec::new();
    let mut start_col = Vec::new();
    let mut dur_col = Vec::new();
    let mut stat_cols: Vec<Vec<Option<Owned>>> = vec![Vec::new(); selection.stats.len()];
    for plane in space.planes() {
        if !selection.planes.is_empty() && !selection.planes.iter().any(|p| p == plane.name()) {
            continue;
        }
        let ids: Vec<_> = selection.stats.iter().map(|s| plane.stat_id(s)).collect();
        for line in plane.lines() {
            if !selection.lines.is_empty() && !selection.lines.iter().any(|l| l == line.name()) {
                continue;
            }
            for ev in line.events(plane) {
                let ev = ev?;
                plane_col.push(plane.name().to_owned());
                line_col.push(line.name().to_owned());
                name_col.push(ev.name().to_owned());
                display_col.push(ev.display_name().to_owned());
                start_col.push(ev.start().0);
                dur_col.push(ev.duration().0);
                for (col, id) in stat_cols.iter_mut().zip(&ids) {
                    let v = id.and_then(|id| ev.stat_or_metadata_stat(id)).map(|s| Owned::from(s.value()));
                    col.push(v);
                }
            }
        }
    }
    let mut columns = vec![
        Column::new("plane".into(), plane_col),
        Column::new("line".into(), line_col),
        Column::new("name".into(), name_col),
        Column::new("display_name".into(), display_col),
        Column::new("start_ps".into(), start_col),
        Column::new("duration_ps".into(), dur_col),
    ];
    for (name, values) in selection.stats.iter().zip(stat_cols) {
        columns.push(stat_column(name, values));
    }
    frame(columns)
}

/// Plane-level stats as a frame: `plane`, `stat`, `type`, `int`, `uint`, `double`, `str`.
pub fn plane_stats_frame(space: &Space) -> Result<DataFrame> {
    let mut plane_col = Vec::new();
    let mut stat_col = Vec::new();
    let mut type_col = Vec::new();
    let mut int_col: Vec<Option<i64>> = Vec::new();
    let mut uint_col: Vec<Option<u64>> = Vec::new();
    let mut dbl_col: Vec<Option<f64>> = Vec::new();
    let mut str_col: Vec<Option<String>> = Vec::new();
    for plane in space.planes() {
        for stat in plane.stats() {
            let stat = stat?;
            let value = stat.value();
            plane_col.push(plane.name().to_owned());
            stat_col.push(stat.name().to_owned());
            type_col.push(value.type_name());
            int_col.push(match value {
                StatValue::Int(v) => Some(v),
                _ => None,
            });
            uint_col.push(match value {
                StatValue::Uint(v) => Some(v),
                _ => None,
            });
            dbl_col.push(match value {
                StatValue::Double(v) => Some(v),
                _ => None,
            });
            str_col.push(match &value {
                StatValue::Str(_) | StatValue::Bytes(_) | StatValue::UnresolvedRef(_) => Some(value.to_string()),
                _ => None,
            });
        }
    }
    frame(vec![
        Column::new("plane".into(), plane_col),
        Column::new("stat".into(), stat_col),
        Column::new("type".into(), type_col),
        Column::new("int".into(), int_col),
        Column::new("uint".into(), uint_col),
        Column::new("double".into(), dbl_col),
        Column::new("str".into(), str_col),
    ])
}

#[derive(Clone, Debug)]
enum Owned {
    Int(i64),
    Uint(u64),
    Double(f64),
    Text(String),
}

impl From<StatValue<'_>> for Owned {
    fn from(v: StatValue<'_>) -> Self {
        match v {
            StatValue::Int(v) => Owned::Int(v),
            StatValue::Uint(v) => Owned::Uint(v),
            StatValue::Double(v) => Owned::Double(v),
            other => Owned::Text(other.to_string()),
        }
    }
}

fn stat_column(name: &str, values: Vec<Option<Owned>>) -> Column {
    let all_int = values.iter().flatten().all(|v| match v {
        Owned::Int(_) => true,
        Owned::Uint(u) => i64::try_from(*u).is_ok(),
        _ => false,
    });
    let all_num = values.iter().flatten().all(|v| !matches!(v, Owned::Text(_)));
    if all_int {
        let col: Vec<Option<i64>> = values
            .into_iter()
            .map(|v| match v {
                Some(Owned::Int(i)) => Some(i),
                Some(Owned::Uint(u)) => i64::try_from(u).ok(),
                _ => None,
            })
            .collect();
        Column::new(name.into(), col)
    } else if all_num {
        let col: Vec<Option<f64>> = values
            .into_iter()
            .map(|v| match v {
                Some(Owned::Int(i)) => Some(i as f64),
                Some(Owned::Uint(u)) => Some(u as f64),
                Some(Owned::Double(d)) => Some(d),
                _ => None,
            })
            .collect();
        Column::new(name.into(), col)
    } else {
        let col: Vec<Option<String>> = values
            .into_iter()
            .map(|v| {
                v.map(|v| match v {
                    Owned::Int(i) => i.to_string(),
                    Owned::Uint(u) => u.to_string(),
                    Owned::Double(d) => d.to_string(),
                    Owned::Text(s) => s,
                })
            })
            .collect();
        Column::new(name.into(), col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SpaceBuilder;

    fn sample() -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut p = b.plane(1, "/device:TPU:0");
            let flops = p.stat_metadata("flops");
            let gid = p.stat_metadata("group_id");
            let kind = p.stat_metadata("device_type_string");
            p.stat(kind, "TPU v5 Lite");
            let m = p.event_metadata("fusion.1");
            p.metadata_stat(m, flops, 100u64);
            let mut l = p.line(3, "XLA Ops", 1);
            l.event(m, 0, 10).stat(gid, 7i64);
            l.event(m, 20, 10);
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn events_frame_has_stat_columns_typed() {
        let space = sample();
        let sel =
            EventSelection { stats: vec!["flops".into(), "group_id".into(), "nope".into()], ..Default::default() };
        let df = events_frame(&space, &sel).unwrap();
        assert_eq!(df.height(), 2);
        assert_eq!(df.column("flops").unwrap().dtype(), &DataType::Int64);
        assert_eq!(df.column("group_id").unwrap().null_count(), 1);
        assert_eq!(df.column("start_ps").unwrap().i64().unwrap().get(1), Some(1020));
    }

    #[test]
    fn empty_selection_keeps_schema() {
        let space = sample();
        let sel = EventSelection { lines: vec!["Steps".into()], stats: vec!["flops".into()], ..Default::default() };
        let df = events_frame(&space, &sel).unwrap();
        assert_eq!(df.height(), 0);
        assert_eq!(df.width(), 7);
        let inv = inventory_frame(&[]).unwrap();
        assert_eq!((inv.height(), inv.width()), (0, 8));
    }

    #[test]
    fn plane_stats_frame_lists_capabilities() {
        let df = plane_stats_frame(&sample()).unwrap();
        assert_eq!(df.height(), 1);
        assert_eq!(df.column("str").unwrap().str().unwrap().get(0), Some("TPU v5 Lite"));
    }
}
