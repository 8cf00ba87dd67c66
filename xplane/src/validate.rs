//! A separate checking pass over every event: dangling metadata ids and references.
//!
//! Decoding stays permissive and fast; this pass finds what needs a look at every event and stat.

use std::collections::BTreeMap;

use crate::error::{Result, Warning, WarningKind};
use crate::event::{Stat, StatValue};
use crate::plane::Plane;
use crate::space::Space;

/// Checks every event and stat of the space. Returns the decode-time warnings of
/// [`Space::warnings`] plus dangling event-metadata ids, stat-metadata ids and `ref_value`s, or the
/// first decoding error met.
///
/// ```
/// use xlens_xplane::{EventMetadataId, Space, SpaceBuilder, WarningKind, validate};
/// let mut b = SpaceBuilder::default();
/// b.plane(1, "/host:CPU").line(1, "t", 0).event(EventMetadataId(42), 0, 10);
/// let space = Space::parse(b.finish().into())?;
/// let warnings = validate(&space)?;
/// assert!(matches!(warnings[0].kind, WarningKind::DanglingEventMetadata { id: 42, events: 1 }));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate(space: &Space) -> Result<Vec<Warning>> {
    let mut out = space.warnings();
    for plane in space.planes() {
        validate_plane(plane, &mut out)?;
    }
    Ok(out)
}

fn validate_plane(plane: &Plane, out: &mut Vec<Warning>) -> Result<()> {
    let mut dangling_events: BTreeMap<i64, u64> = BTreeMap::new();
    let mut dangling_stats: BTreeMap<i64, u64> = BTreeMap::new();
    let mut dangling_refs: BTreeMap<u64, ()> = BTreeMap::new();
    let mut check_stat = |stat: Stat<'_>| {
        if plane.stat_metadata_by_id(stat.metadata_id()).is_none() {
            *dangling_stats.entry(stat.metadata_id().0).or_default() += 1;
        }
        if let StatValue::UnresolvedRef(id) = stat.value() {
            dangling_refs.insert(id, ());
        }
    };
    for stat in plane.stats() {
        check_stat(stat?);
    }
    for meta in plane.event_metadata() {
        for stat in plane.metadata_stats(meta) {
            check_stat(stat?);
        }
    }
    for line in plane.lines() {
        for event in line.events(plane) {
            let event = event?;
            if event.metadata().is_none() {
                *dangling_events.entry(event.metadata_id().0).or_default() += 1;
            }
            for stat in event.stats() {
                check_stat(stat?);
            }
        }
    }
    let loc = || plane.location();
    out.extend(
        dangling_events
            .into_iter()
            .map(|(id, events)| Warning { kind: WarningKind::DanglingEventMetadata { id, events }, location: loc() }),
    );
    out.extend(
        dangling_stats
            .into_iter()
            .map(|(id, stats)| Warning { kind: WarningKind::DanglingStatMetadata { id, stats }, location: loc() }),
    );
    out.extend(
        dangling_refs.into_keys().map(|id| Warning { kind: WarningKind::DanglingStatRef { id }, location: loc() }),
    );
    Ok(())
}
