//! Conversion of the lazy views into the owned prost types of [`crate::raw`].

use std::collections::BTreeMap;

use crate::error::Result;
use crate::event::{EventData, StatIter};
use crate::plane::Plane;
use crate::raw;
use crate::space::Space;

impl Space {
    /// Materialises the whole space as owned prost structs.
    ///
    /// This decodes every event and stat; it is for round-trip checks and for callers who want
    /// plain structs, not for analysis of large profiles.
    pub fn to_raw(&self) -> Result<raw::XSpace> {
        Ok(raw::XSpace {
            planes: self.planes().iter().map(Plane::to_raw).collect::<Result<_>>()?,
            errors: self.profiler_errors().to_vec(),
            warnings: self.profiler_warnings().to_vec(),
            hostnames: self.hostnames().to_vec(),
        })
    }
}

fn stats(iter: StatIter<'_>) -> Result<Vec<raw::XStat>> {
    iter.map(|s| s.map(|s| s.to_raw())).collect()
}

impl Plane {
    /// Materialises this plane as an owned prost struct.
    pub fn to_raw(&self) -> Result<raw::XPlane> {
        let mut lines = Vec::with_capacity(self.lines().len() + self.empty_line_count());
        for line in self.lines() {
            // The empty lines before this one (they are counted, not stored).
            lines.resize_with(line.index(), raw::XLine::default);
            let mut events = Vec::with_capacity(line.event_count());
            for ev in line.events(self) {
                let ev = ev?;
                let data = match ev.data() {
                    EventData::Offset(o) => Some(raw::x_event::Data::OffsetPs(o)),
                    EventData::Occurrences(n) => Some(raw::x_event::Data::NumOccurrences(n)),
                    EventData::Absent => None,
                };
                events.push(raw::XEvent {
                    metadata_id: ev.metadata_id().0,
                    data,
                    duration_ps: ev.duration().0,
                    stats: stats(ev.stats())?,
                });
            }
            lines.push(raw::XLine {
                id: line.id().0,
                display_id: line.raw_display_id(),
                name: line.name().to_owned(),
                display_name: line.raw_display_name().to_owned(),
                timestamp_ns: line.timestamp_ns(),
                duration_ps: line.duration().0,
                events,
            });
        }
        lines.resize_with(self.lines().len() + self.empty_line_count(), raw::XLine::default);
        let mut event_metadata = BTreeMap::new();
        for m in self.event_metadata() {
            event_metadata.insert(
                m.id().0,
                raw::XEventMetadata {
                    id: m.id().0,
                    name: m.name().to_owned(),
                    display_name: m.raw_display_name().to_owned(),
                    metadata: self.share(self.metadata_payload(m)).unwrap_or_default(),
                    stats: stats(self.metadata_stats(m))?,
                    child_id: m.child_ids().to_vec(),
                },
            );
        }
        let stat_metadata = self
            .stat_metadata()
            .iter()
            .map(|m| {
                (
                    m.id().0,
                    raw::XStatMetadata {
                        id: m.id().0,
                        name: m.name().to_owned(),
                        description: m.description().to_owned(),
                    },
                )
            })
            .collect();
        Ok(raw::XPlane {
            id: self.id().0,
            name: self.name().to_owned(),
            lines,
            event_metadata,
            stat_metadata,
            stats: self.stats().map(|s| s.map(|s| s.to_raw())).collect::<Result<_>>()?,
        })
    }
}
