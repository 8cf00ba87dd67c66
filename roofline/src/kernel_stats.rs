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

use std::collections::HashMap;

use xlens_xplane::{Picos, PlaneKind, Space, names};

use crate::Vendor;
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
        let mut names_table: Vec<String> = Vec::new();
        let mut name_index: HashMap<String, u32> = HashMap::new();
        let mut intern = |s: &str| -> u32 {
            if let Some(&i) = name_index.get(s) {
                return i;
            }
            let i = names_table.len() as u32;
            names_table.push(s.to_owned());
            name_index.insert(s.to_owned(), i);
            i
        };
        let mut records: HashMap<Key, (KernelStat, Option<Vendor>)> = HashMap::new();
        let mut spans: Vec<(Picos, Picos)> = Vec::new();
        for plane in space.planes().iter().filter(|p| matches!(p.kind(), PlaneKind::Gpu { .. })) {
            let vendor = GpuCaps::of(plane).vendor;
            let stat = |name: &str| plane.stat_id(name);
            let (tf_op_name, hlo_op, details_id) =
                (stat("tf_op_name"), stat(names::stat::HLO_OP), stat(names::stat::KERNEL_DETAILS));
            let labels: Vec<_> = ["msg", "message", "annotation", "label"].iter().filter_map(|n| stat(n)).collect();
            // Launch parameters parsed once per distinct `kernel_details` value.
            let mut parsed: HashMap<String, KernelDetails> = HashMap::new();
            for line in plane.lines().iter().filter(|l| !names::line::is_derived(l.id().0, l.name())) {
                for ev in line.events(plane) {
                    let ev = ev?;
                    spans.push((ev.start(), ev.end()));
                    let mut name = std::borrow::Cow::Borrowed(ev.name());
                    let mut op = None;
                    let mut details = None;
                    if ev.has_stats() {
                        if let Some(s) = tf_op_name.and_then(|id| ev.stat(id)).and_then(|s| s.as_str()) {
                            name = std::borrow::Cow::Owned(s.into_owned());
                        } else if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
                            let label = labels
                                .iter()
                                .filter_map(|&id| ev.stat(id).and_then(|s| s.as_str()))
                                .find(|s| !s.is_empty());
                            if let Some(label) = label {
                                name = std::borrow::Cow::Owned(label.into_owned());
                            }
                        }
                        op = hlo_op
                            .and_then(|id| ev.stat(id))
                            .and_then(|s| s.as_str())
                            .map(|s| s.rsplit("::").next().unwrap_or(&s).to_owned());
                        if let Some(text) = details_id.and_then(|id| ev.stat(id)).and_then(|s| s.as_str()) {
                            let d = match parsed.get(text.as_ref()) {
                                Some(d) => *d,
                                None => {
                                    let d = KernelDetails::parse(&text);
                                    parsed.insert(text.into_owned(), d);
                                    d
                                }
                            };
                            details = Some(d);
                        }
                    }
                    let key: Key = (
                        intern(&name),
                        op.as_deref().map(&mut intern),
                        details.map(|d| {
                            (d.grid, d.block, d.registers_per_thread, d.static_shared_bytes, d.dynamic_shared_bytes)
                        }),
                    );
                    let duration = ev.duration();
                    let (record, _) = records.entry(key).or_insert_with(|| {
                        (
                            KernelStat {
                                kernel_name: name.clone().into_owned(),
                                hlo_op: op,
                                occurrences: 0,
                                total: Picos::ZERO,
                                min: duration,
                                max: duration,
                                details,
                                uses_tensor_cores: uses_tensor_cores(vendor, &name),
                            },
                            vendor,
                        )
                    });
                    record.occurrences += 1;
                    record.total += duration;
                    record.min = record.min.min(duration);
                    record.max = record.max.max(duration);
                }
            }
        }
        let mut kernels: Vec<KernelStat> = records.into_values().map(|(r, _)| r).collect();
        kernels.sort_by(|a, b| {
            b.total
                .cmp(&a.total)
                .then_with(|| a.kernel_name.cmp(&b.kernel_name))
                .then_with(|| a.hlo_op.cmp(&b.hlo_op))
                .then_with(|| launch_key(a).cmp(&launch_key(b)))
        });
        Ok(KernelStats { total_device_duration: union_length(spans), kernels })
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

/// Length of the union of intervals.
fn union_length(mut spans: Vec<(Picos, Picos)>) -> Picos {
    spans.sort_unstable();
    let mut total = Picos::ZERO;
    let mut current: Option<(Picos, Picos)> = None;
    for (s, e) in spans {
        match &mut current {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = current {
                    total += ce - cs;
                }
                current = Some((s, e));
            }
        }
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_counts_overlaps_once() {
        let p = |a: i64, b: i64| (Picos(a), Picos(b));
        assert_eq!(union_length(vec![p(5, 8), p(0, 2), p(1, 3), p(8, 9)]), Picos(7));
        assert_eq!(union_length(Vec::new()), Picos::ZERO);
    }
}
