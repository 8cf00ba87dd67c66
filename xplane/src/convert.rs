//! Conversion of the lazy views into the owned prost types of [`crate::raw`].

use std::collections::BTreeMap;

use crate::error::Result;
use crate::event::{Event, EventData, StatIter};
use crate::ids::Picos;
use crate::plane::Plane;
use crate::raw;
use crate::space::Space;

impl Space {
    /// Materialises the whole space as owned prost structs.
    ///
    /// This decodes every event and stat; it is for round-trip checks and for callers who want
    /// plain structs, not for analysis of large profiles.
    pub fn to_raw(&self) -> Result<raw::XSpace> {
        self.to_raw_where(&|_| true)
    }

    fn to_raw_where(&self, keep: &dyn Fn(&Event<'_>) -> bool) -> Result<raw::XSpace> {
        Ok(raw::XSpace {
            planes: self.planes().iter().map(|p| p.to_raw_where(keep)).collect::<Result<_>>()?,
            errors: self.profiler_errors().to_vec(),
            warnings: self.profiler_warnings().to_vec(),
            hostnames: self.hostnames().to_vec(),
        })
    }

    /// The space cut to a time window: every plane, line, metadata table and stat kept, and of
    /// the timed events only those that overlap `[start, end)` (absolute, the time base of
    /// [`Event::start`]); an event that starts exactly at `end`, or ends exactly at `start`, is
    /// left out, and events without a time (occurrence counts) are kept.
    ///
    /// The space is re-encoded: this decodes every kept event and takes memory in proportion to
    /// them (a selection a user asks for, such as `xlens scan --steps`, not a scan's fast path).
    ///
    /// ```
    /// use xlens_xplane::{Picos, Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let m = plane.event_metadata("step");
    ///     let mut line = plane.line(1, "main", 0);
    ///     for i in 0..4 {
    ///         line.event(m, i * 1_000, 1_000);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let window = space.window(Picos(1_000), Picos(3_000))?;
    /// assert_eq!(window.event_count(), 2);
    /// Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn window(&self, start: Picos, end: Picos) -> Result<Space> {
        use prost::Message;
        let keep = |ev: &Event<'_>| match ev.data() {
            EventData::Offset(_) => ev.start() < end && (ev.end() > start || ev.start() >= start),
            EventData::Occurrences(_) | EventData::Absent => true,
        };
        Space::parse(self.to_raw_where(&keep)?.encode_to_vec().into())
    }
}

fn stats(iter: StatIter<'_>) -> Result<Vec<raw::XStat>> {
    iter.map(|s| s.map(|s| s.to_raw())).collect()
}

impl Plane {
    /// Materialises this plane as an owned prost struct.
    pub fn to_raw(&self) -> Result<raw::XPlane> {
        self.to_raw_where(&|_| true)
    }

    /// [`Plane::to_raw`] with only the events `keep` accepts.
    fn to_raw_where(&self, keep: &dyn Fn(&Event<'_>) -> bool) -> Result<raw::XPlane> {
        let mut lines = Vec::with_capacity(self.lines().len() + self.empty_line_count());
        for line in self.lines() {
            // The empty lines before this one (they are counted, not stored).
            lines.resize_with(line.index(), raw::XLine::default);
            let mut events = Vec::with_capacity(line.event_count());
            for ev in line.events(self) {
                let ev = ev?;
                if !keep(&ev) {
                    continue;
                }
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
