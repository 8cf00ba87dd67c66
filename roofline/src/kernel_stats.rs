//! GPU kernel statistics: every kernel and memory copy of the stream lines of a host's GPUs,
//! grouped by kernel, with its launch parameters (XProf's kernel stats).
//!
//! A kernel is named as XProf names it: the event's own name (the raw, demangled name the
//! tracer recorded; AMD names keep their `.kd` suffix), replaced by a `tf_op_name` stat when
//! there is one, and for a name made only of digits by its `msg`, `message`, `annotation` or
//! `label` stat. Records are kept apart by kernel name, HLO op and launch configuration (grid,
//! block, registers, shared memory), as XProf's kernel-stats table is; XProf's command-line
//! `get_kernel_stats` sums them by name, which [`KernelStats::by_name`] gives.
//!
//! Every event of the GPU planes' stream lines counts, memory copies and zero-length events
//! included; the lines XProf derives (`Steps`, `TensorFlow Ops`, ...) do not: they are not
//! kernels. The total device time is the union of all those events over all GPUs (concurrent
//! kernels, streams and devices count once).

use std::borrow::Cow;
use std::collections::HashMap;

use xlens_xplane::{Event, EventMetadataId, Picos, Plane, PlaneKind, Space, Stat, StatMetadataId, names};

use crate::Span;
use crate::gpu::{GpuCaps, KernelDetails, uses_tensor_cores};

/// One kernel (name, HLO op and launch configuration) over all its launches.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelStat {
    /// The kernel's name as XProf gives it.
    pub kernel_name: String,
    /// The HLO op that launched it (`hlo_op` stat, innermost part), when recorded.
    pub hlo_op: Option<String>,
    /// Launches.
    pub occurrences: u64,
    /// Sum of the launches' durations.
    pub total: Picos,
    /// Shortest launch.
    pub min: Picos,
    /// Longest launch.
    pub max: Picos,
    /// Launch parameters from `kernel_details`; `None` for memory copies and kernels without
    /// the stat.
    pub details: Option<KernelDetails>,
    /// The kernel runs on tensor (NVIDIA) or matrix (AMD) cores, by XProf's name patterns.
    pub uses_tensor_cores: bool,
}

impl KernelStat {
    /// Mean launch duration.
    pub fn average(&self) -> Picos {
        Picos(self.total.0 / self.occurrences.max(1) as i64)
    }
}

/// The kernel statistics of a host's GPUs.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct KernelStats {
    /// Time any GPU ran a kernel or copy (the union over every stream of every GPU): wall time,
    /// XProf's `total_device_duration`. On a host of several GPUs it is less than the kernels'
    /// summed time ([`kernel_time`](Self::kernel_time)), so it is not the base of a share.
    pub total_device_duration: Picos,
    /// Records by total duration (longest first), then name, HLO op and launch configuration.
    pub kernels: Vec<KernelStat>,
}

impl KernelStats {
    /// The kernels' summed time over every launch on every GPU: the base of a kernel's share,
    /// so that the shares add up to 100 % however many GPUs the host has.
    pub fn kernel_time(&self) -> Picos {
        self.kernels.iter().map(|k| k.total).sum()
    }

    /// A kernel's share of [`kernel_time`](Self::kernel_time), in % (0 when there is none).
    pub fn share_pct(&self, kernel: &KernelStat) -> f64 {
        let total = self.kernel_time();
        if total.0 > 0 { 100.0 * kernel.total.0 as f64 / total.0 as f64 } else { 0.0 }
    }
}

/// A launch configuration: grid, block, registers, static and dynamic shared memory.
type Launch = ([u32; 3], [u32; 3], u32, u64, u64);

/// A record's identity: kernel name, HLO op and the launch configuration.
type Key = (u32, Option<u32>, Option<Launch>);

impl KernelStats {
    /// Reads the stream lines of every GPU plane of a space (empty without GPUs).
    ///
    /// ```
    /// use xlens_xplane::Session;
    /// use xlens_roofline::KernelStats;
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/field/amd_te_fused_attn");
    /// let session = xlens_testkit::open_session(dir)?;
    /// let stats = KernelStats::read(session.hosts()[0].space())?;
    /// let gemm = stats.kernels.iter().find(|k| k.kernel_name == "gemm_fusion_dot.kd").unwrap();
    /// assert_eq!((gemm.hlo_op.as_deref(), gemm.occurrences), (Some("gemm_fusion_dot"), 5));
    /// assert!(gemm.uses_tensor_cores);
    /// Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(space: &Space) -> xlens_xplane::Result<KernelStats> {
        let mut records: HashMap<Key, KernelStat> = HashMap::new();
        let mut names_table: Vec<String> = Vec::new();
        let mut name_index: HashMap<String, u32> = HashMap::new();
        let mut spans: Vec<Span> = Vec::new();
        for plane in space.planes().iter().filter(|p| matches!(p.kind(), PlaneKind::Gpu { .. })) {
            let vendor = GpuCaps::of(plane).vendor;
            let ids = StatIds::of(plane);
            // The launches of this plane by what the events hold (their metadata and the raw
            // values of the stats that name them), before any string is built: the per-event
            // work is one pass over the event's bytes and one hash of borrowed values.
            // In the order first met, so that a record's launch details are its first event's.
            // foldhash, not SipHash: one lookup per event.
            let mut index: hashbrown::HashMap<RawKey<'_>, usize> = hashbrown::HashMap::new();
            let mut launches: Vec<(RawKey<'_>, Launches)> = Vec::new();
            let mut gathered = xlens_xplane::GatheredStats::new(|id| ids.wants(id));
            for line in plane.lines().iter().filter(|l| !names::line::is_derived(l.id().0, l.name())) {
                let mut events = line.events(plane);
                while let Some(ev) = events.next_gathering(&mut gathered) {
                    let ev = ev?;
                    spans.push(Span::new(ev.start(), ev.end()));
                    let key = ids.raw_key(&ev, gathered.stats());
                    let i = *index.entry_ref(&key).or_insert_with(|| {
                        launches.push((key.clone(), Launches::new()));
                        launches.len() - 1
                    });
                    launches[i].1.add(ev.duration());
                }
            }
            // Launch parameters parsed once per distinct `kernel_details` value.
            let mut parsed: HashMap<&str, KernelDetails> = HashMap::new();
            for (raw, l) in &launches {
                let name: &str = match (&raw.tf_op_name, &raw.label) {
                    (Some(tf), _) => tf,
                    (None, Some(label)) => label,
                    (None, None) => plane.event_metadata_by_id(raw.metadata_id).map_or("", |m| m.name()),
                };
                let op = raw.hlo_op.as_deref().map(|s| s.rsplit("::").next().unwrap_or(s));
                let details = raw.details.as_deref().map(|text| match parsed.get(text) {
                    Some(d) => *d,
                    None => {
                        let d = KernelDetails::parse(text);
                        parsed.insert(text, d);
                        d
                    }
                });
                let mut intern = |s: &str| -> u32 {
                    if let Some(&i) = name_index.get(s) {
                        return i;
                    }
                    let i = names_table.len() as u32;
                    names_table.push(s.to_owned());
                    name_index.insert(s.to_owned(), i);
                    i
                };
                let key: Key = (
                    intern(name),
                    op.map(&mut intern),
                    details.map(|d| {
                        (d.grid, d.block, d.registers_per_thread, d.static_shared_bytes, d.dynamic_shared_bytes)
                    }),
                );
                let record = records.entry(key).or_insert_with(|| KernelStat {
                    kernel_name: name.to_owned(),
                    hlo_op: op.map(str::to_owned),
                    occurrences: 0,
                    total: Picos::ZERO,
                    min: l.min,
                    max: l.max,
                    details,
                    uses_tensor_cores: uses_tensor_cores(vendor, name),
                });
                record.occurrences += l.occurrences;
                record.total += l.total;
                record.min = record.min.min(l.min);
                record.max = record.max.max(l.max);
            }
        }
        let mut kernels: Vec<KernelStat> = records.into_values().collect();
        kernels.sort_by(|a, b| {
            b.total
                .cmp(&a.total)
                .then_with(|| a.kernel_name.cmp(&b.kernel_name))
                .then_with(|| a.hlo_op.cmp(&b.hlo_op))
                .then_with(|| launch_key(a).cmp(&launch_key(b)))
        });
        let total_device_duration = crate::span::union(spans).iter().map(|s| s.duration()).sum();
        Ok(KernelStats { total_device_duration, kernels })
    }

    /// Occurrences and total duration per kernel name, longest first (then by name): the
    /// records XProf's `get_kernel_stats` prints.
    pub fn by_name(&self) -> Vec<(&str, u64, Picos)> {
        let mut by: HashMap<&str, (u64, Picos)> = HashMap::new();
        for k in &self.kernels {
            let e = by.entry(k.kernel_name.as_str()).or_default();
            e.0 += k.occurrences;
            e.1 += k.total;
        }
        let mut out: Vec<(&str, u64, Picos)> = by.into_iter().map(|(n, (c, t))| (n, c, t)).collect();
        out.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
        out
    }
}

fn launch_key(k: &KernelStat) -> Option<Launch> {
    k.details.map(|d| (d.grid, d.block, d.registers_per_thread, d.static_shared_bytes, d.dynamic_shared_bytes))
}

/// The stats that name a launch, by their ids on one plane.
struct StatIds {
    tf_op_name: Option<StatMetadataId>,
    hlo_op: Option<StatMetadataId>,
    details: Option<StatMetadataId>,
    /// `msg`, `message`, `annotation`, `label`: the first non-empty one names a kernel whose
    /// own name is only digits.
    labels: [Option<StatMetadataId>; 4],
}

impl StatIds {
    fn of(plane: &Plane) -> StatIds {
        let stat = |name: &str| plane.stat_id(name);
        StatIds {
            tf_op_name: stat("tf_op_name"),
            hlo_op: stat(names::stat::HLO_OP),
            details: stat(names::stat::KERNEL_DETAILS),
            labels: ["msg", "message", "annotation", "label"].map(stat),
        }
    }

    #[inline]
    fn wants(&self, id: StatMetadataId) -> bool {
        [self.tf_op_name, self.hlo_op, self.details].contains(&Some(id)) || self.labels.contains(&Some(id))
    }

    /// What names an event's launch, as borrowed from the plane: the first value of each stat,
    /// as [`Event::stat`](xlens_xplane::Event::stat) finds it.
    #[inline]
    fn raw_key<'a>(&self, ev: &Event<'a>, stats: &[Stat<'a>]) -> RawKey<'a> {
        let first = |id: Option<StatMetadataId>| {
            let id = id?;
            stats.iter().find(|s| s.metadata_id() == id).and_then(|s| s.as_str())
        };
        let tf_op_name = first(self.tf_op_name);
        let label = if tf_op_name.is_none() && !stats.is_empty() && is_number(ev.name()) {
            self.labels.iter().filter_map(|&id| first(id)).find(|s| !s.is_empty())
        } else {
            None
        };
        RawKey {
            metadata_id: ev.metadata_id(),
            tf_op_name,
            label,
            hlo_op: first(self.hlo_op),
            details: first(self.details),
        }
    }
}

/// A name made only of digits (a launch the tracer could not name).
fn is_number(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// A launch's identity as the event holds it: its metadata and the values of the stats that
/// name it ([`StatIds`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RawKey<'a> {
    metadata_id: EventMetadataId,
    tf_op_name: Option<Cow<'a, str>>,
    label: Option<Cow<'a, str>>,
    hlo_op: Option<Cow<'a, str>>,
    details: Option<Cow<'a, str>>,
}

/// Launches of one [`RawKey`]: count, summed, shortest and longest duration.
struct Launches {
    occurrences: u64,
    total: Picos,
    min: Picos,
    max: Picos,
}

impl Launches {
    fn new() -> Launches {
        Launches { occurrences: 0, total: Picos::ZERO, min: Picos(i64::MAX), max: Picos(i64::MIN) }
    }

    #[inline]
    fn add(&mut self, duration: Picos) {
        self.occurrences += 1;
        self.total += duration;
        self.min = self.min.min(duration);
        self.max = self.max.max(duration);
    }
}
