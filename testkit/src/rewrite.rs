//! Rewrites a decoded profile: drop events, move the profile's stop time, add dropped-event
//! counts or profiler errors. For tests of damaged or truncated captures made from real ones.
//!
//! ```
//! use xlens_testkit::rewrite::{Edit, rewrite};
//! use xlens_testkit::synth::{fixture, tpu_profile};
//! use xlens_xplane::Space;
//! let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
//! let keep = |e: &xlens_xplane::Event<'_>| e.duration().0 > 1_000_000;
//! let edited = rewrite(&space, &Edit { keep: Some(&keep), errors: &["buffer full"], ..Edit::default() });
//! assert_eq!(edited.profiler_errors(), ["buffer full"]);
//! let events = |s: &Space| s.planes().iter().map(|p| p.event_count()).sum::<usize>();
//! assert!(events(&edited) < events(&space));
//! Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;

use xlens_xplane::{BuildValue, Event, LineHeader, Space, SpaceBuilder, StatMetadataId, StatValue, names};

/// How to rewrite a profile.
#[derive(Default)]
#[allow(missing_debug_implementations)] // holds a closure
pub struct Edit<'a> {
    /// Events to keep (all when `None`).
    pub keep: Option<&'a dyn Fn(&Event<'_>) -> bool>,
    /// New `profile_stop_time`, ns since the epoch.
    pub stop_ns: Option<u64>,
    /// A `dropped_traces` stat on `/host:CPU`.
    pub dropped: Option<i64>,
    /// XSpace errors to add.
    pub errors: &'a [&'a str],
}

fn build_value<'v>(value: &'v StatValue<'_>) -> Option<BuildValue<'v>> {
    match value {
        StatValue::Int(v) => Some(BuildValue::Int(*v)),
        StatValue::Uint(v) => Some(BuildValue::Uint(*v)),
        StatValue::Double(v) => Some(BuildValue::Double(*v)),
        StatValue::Str(s) => Some(BuildValue::Str(s)),
        StatValue::Bytes(b) => Some(BuildValue::Bytes(b)),
        StatValue::None | StatValue::UnresolvedRef(_) => None,
    }
}

/// Re-encodes a decoded space with [`SpaceBuilder`], applying `edit`: every plane, line, event,
/// metadata entry and stat whose value the builder can write (references to unknown stats are
/// dropped).
pub fn rewrite(space: &Space, edit: &Edit<'_>) -> Space {
    let mut b = SpaceBuilder::default();
    for h in space.hostnames() {
        b.hostname(h);
    }
    for e in space.profiler_errors().iter().map(String::as_str).chain(edit.errors.iter().copied()) {
        b.error(e);
    }
    for w in space.profiler_warnings() {
        b.warning(w);
    }
    for plane in space.planes() {
        let mut p = b.plane(plane.id().0, plane.name());
        let stat_ids: HashMap<i64, StatMetadataId> =
            plane.stat_metadata().iter().map(|m| (m.id().0, p.stat_metadata(m.name()))).collect();
        let mut event_ids = HashMap::new();
        for m in plane.event_metadata() {
            let id = p.event_metadata_with_display(m.name(), m.raw_display_name());
            for stat in plane.metadata_stats(m).map_while(|s| s.ok()) {
                let value = stat.value();
                if let (Some(&sid), Some(v)) = (stat_ids.get(&stat.metadata_id().0), build_value(&value)) {
                    p.metadata_stat(id, sid, v);
                }
            }
            event_ids.insert(m.id().0, id);
        }
        for stat in plane.stats().map_while(|s| s.ok()) {
            let Some(&sid) = stat_ids.get(&stat.metadata_id().0) else { continue };
            let value = stat.value();
            match (edit.stop_ns, build_value(&value)) {
                (Some(stop), _) if stat.name() == names::stat::PROFILE_STOP_TIME => p.stat(sid, stop),
                (_, Some(v)) => p.stat(sid, v),
                (_, None) => {}
            }
        }
        if let Some(dropped) = edit.dropped
            && plane.name() == names::plane::HOST_CPU
        {
            let sid = p.stat_metadata(names::stat::DROPPED_TRACES);
            p.stat(sid, dropped);
        }
        for line in plane.lines() {
            let mut l = p.line_with(LineHeader {
                id: line.id().0,
                display_id: line.raw_display_id(),
                name: line.name(),
                display_name: line.raw_display_name(),
                timestamp_ns: line.timestamp_ns(),
                duration_ps: line.duration().0,
            });
            for ev in line.events(plane).map_while(|e| e.ok()) {
                if edit.keep.is_some_and(|keep| !keep(&ev)) {
                    continue;
                }
                let mut e = l.event(event_ids[&ev.metadata_id().0], ev.offset_ps(), ev.duration().0);
                for stat in ev.stats().map_while(|s| s.ok()) {
                    let value = stat.value();
                    if let (Some(&sid), Some(v)) = (stat_ids.get(&stat.metadata_id().0), build_value(&value)) {
                        e = e.stat(sid, v);
                    }
                }
            }
        }
    }
    Space::parse(b.finish().into()).unwrap()
}
