//! Inventory and summary: what a profile holds, before any analysis.

use crate::error::Result;
use crate::ids::Picos;
use crate::names;
use crate::plane::{Plane, PlaneKind};
use crate::space::Space;

/// One line of the inventory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineInventory {
    /// Line name.
    pub name: String,
    /// Line id.
    pub id: i64,
    /// Number of events.
    pub events: u64,
    /// Earliest event start, absolute (`None` without events).
    pub first: Option<Picos>,
    /// Latest event end, absolute (`None` without events).
    pub last: Option<Picos>,
}

/// One plane of the inventory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaneInventory {
    /// Plane name.
    pub name: String,
    /// Plane kind.
    pub kind: PlaneKind,
    /// Lines in file order, except those whose message is empty.
    pub lines: Vec<LineInventory>,
    /// Lines whose message is empty (no name, no events: XProf lists each as a line named `""`
    /// with 0 events), counted instead of listed ([`Plane::empty_line_count`]).
    pub empty_lines: u64,
}

impl PlaneInventory {
    /// Total events over the plane's lines.
    pub fn events(&self) -> u64 {
        self.lines.iter().map(|l| l.events).sum()
    }
}

/// Lists every plane with its lines, event counts and time ranges, in file order.
///
/// The counts are those of XProf's `list_xplane_lines`, except that lines whose message is empty
/// are counted in [`PlaneInventory::empty_lines`] rather than listed one by one. Times need one
/// pass over every event.
///
/// ```
/// use xlens_xplane::{Space, SpaceBuilder, inventory};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut p = b.plane(1, "/host:CPU");
///     let m = p.event_metadata("work");
///     let mut t = p.line(5, "python", 10);
///     t.event(m, 0, 100);
///     t.event(m, 500, 100);
/// }
/// let inv = inventory(&Space::parse(b.finish().into())?)?;
/// assert_eq!(inv[0].lines[0].events, 2);
/// assert_eq!(inv[0].lines[0].last.unwrap().0, 10_000 + 600);
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inventory(space: &Space) -> Result<Vec<PlaneInventory>> {
    space.planes().iter().map(plane_inventory).collect()
}

fn plane_inventory(plane: &Plane) -> Result<PlaneInventory> {
    let mut lines = Vec::with_capacity(plane.lines().len());
    for line in plane.lines() {
        let mut first: Option<Picos> = None;
        let mut last: Option<Picos> = None;
        for ev in line.events(plane) {
            let ev = ev?;
            let (s, e) = (ev.start(), ev.end());
            first = Some(first.map_or(s, |f| f.min(s)));
            last = Some(last.map_or(e, |l| l.max(e)));
        }
        lines.push(LineInventory {
            name: line.name().to_owned(),
            id: line.id().0,
            events: line.event_count() as u64,
            first,
            last,
        });
    }
    Ok(PlaneInventory {
        name: plane.name().to_owned(),
        kind: plane.kind(),
        lines,
        empty_lines: plane.empty_line_count() as u64,
    })
}

/// The kind of accelerator a profile was captured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// TPU TensorCore planes are present.
    Tpu,
    /// GPU planes are present (and no TPU).
    Gpu,
    /// No device planes: a CPU capture (XLA:CPU runs ops on host threads).
    Cpu,
}

impl DeviceKind {
    /// `"TPU"`, `"GPU"` or `"CPU"`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Tpu => "TPU",
            DeviceKind::Gpu => "GPU",
            DeviceKind::Cpu => "CPU",
        }
    }
}

/// Device and host facts of one space, read from plane names and plane stats only.
#[derive(Clone, Debug, PartialEq)]
pub struct SpaceSummary {
    /// TPU, GPU or CPU.
    pub device_kind: DeviceKind,
    /// `device_type_string` of the first analysed device plane (e.g. "TPU v5 Lite").
    pub device_type: Option<String>,
    /// Number of analysed device planes (TensorCores, or GPUs).
    pub device_cores: usize,
    /// Number of all device planes (including SparseCores and chip planes).
    pub device_planes: usize,
    /// Number of host threads (lines of `/host:CPU`).
    pub host_threads: usize,
    /// Events on host planes.
    pub host_events: u64,
    /// Events on device planes.
    pub device_events: u64,
    /// Programs with an HLO proto in `/host:metadata`.
    pub hlo_programs: usize,
    /// Profile start, ns since the epoch.
    pub profile_start_ns: Option<u64>,
    /// Profile length (stop − start), when both are recorded.
    pub profile_duration: Option<Picos>,
    /// Host names recorded in the space.
    pub hostnames: Vec<String>,
}

/// Summarises a space without decoding events.
pub fn summarize(space: &Space) -> SpaceSummary {
    let devices = space.analysis_devices();
    let device_kind = match devices.first().map(|p| p.kind()) {
        Some(PlaneKind::TpuTensorCore { .. }) => DeviceKind::Tpu,
        Some(PlaneKind::Gpu { .. }) => DeviceKind::Gpu,
        _ => DeviceKind::Cpu,
    };
    let device_type = devices
        .first()
        .and_then(|p| p.stat_by_name(names::stat::DEVICE_TYPE_STRING))
        .and_then(|s| s.as_str().map(|s| s.into_owned()));
    let hlo_programs = space.metadata_plane().map_or(0, |p| {
        let proto = p.stat_id(names::stat::HLO_PROTO).or_else(|| p.stat_id(names::stat::HLO_PROTO_LEGACY));
        match proto {
            Some(id) => p
                .event_metadata()
                .iter()
                .filter(|m| p.metadata_stats(m).map_while(|s| s.ok()).any(|s| s.metadata_id() == id))
                .count(),
            None => 0,
        }
    });
    let start = space.profile_start_ns();
    let stop = space.profile_stop_ns();
    SpaceSummary {
        device_kind,
        device_type,
        device_cores: devices.len(),
        device_planes: space.planes_where(PlaneKind::is_device).count(),
        host_threads: space.host_threads().map_or(0, |p| p.lines().len()),
        host_events: space.planes_where(PlaneKind::is_host).map(|p| p.event_count() as u64).sum(),
        device_events: space.planes_where(PlaneKind::is_device).map(|p| p.event_count() as u64).sum(),
        hlo_programs,
        profile_start_ns: start,
        profile_duration: match (start, stop) {
            (Some(a), Some(b)) if b >= a => Some(Picos::from_ns((b - a) as i64)),
            _ => None,
        },
        hostnames: space.hostnames().to_vec(),
    }
}
