//! The anatomy of a profile's steps: from the device timeline on TPU (mean over cores), from the
//! host-run or GPU ops elsewhere. The classes and the partition rule are [`crate::anatomy`]'s.

use rayon::prelude::*;
use xlens_xplane::Picos;

use crate::anatomy::{InnermostSegments, Interval, StepAnatomy, TimeClass, class_of, partition};

/// The anatomy of every TPU step (mean over cores), in step order.
///
/// ```
/// use xlens_testkit::synth::{fixture, tpu_profile};
/// use xlens_xplane::Space;
/// use xlens_roofline::{Steps, tpu_anatomy};
/// let space = Space::parse(tpu_profile(&fixture("tpu_basic").unwrap()).into())?;
/// let steps = Steps::from_space(&space)?;
/// let anatomy = tpu_anatomy(&space, &steps)?;
/// for (a, s) in anatomy.iter().zip(&steps.steps) {
///     assert_eq!(a.sum(), s.duration);
///     assert!(a.matmul > a.data_formatting);
/// }
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tpu_anatomy(space: &xlens_xplane::Space, steps: &crate::Steps) -> xlens_xplane::Result<Vec<StepAnatomy>> {
    let _ = steps;
    Ok(anatomy_from_timeline(&crate::DeviceTimeline::build(space)?))
}

/// The anatomy of every TPU step (mean over cores) of a walked device timeline.
pub fn anatomy_from_timeline(timeline: &crate::DeviceTimeline) -> Vec<StepAnatomy> {
    (0..timeline.step_times.len())
        .map(|k| {
            let parts: Vec<StepAnatomy> =
                timeline.cores.iter().filter_map(|c| c.steps.get(k).map(|s| s.anatomy)).collect();
            StepAnatomy::mean(&parts)
        })
        .collect()
}

/// Host events that are waits, not work (the device may be busy meanwhile).
fn is_host_wait(name: &str) -> bool {
    name.contains("block_until_ready") || name.contains("Await") || name.contains("Wait") || name.contains("wait")
}

/// The anatomy of every host-marker step of a profile whose ops run on host threads (XLA:CPU):
/// op events (`hlo_op`) on every thread, classed by their op-profile category, and the step
/// marker thread's own top-level work (dispatch, data loading) as host time. Concurrent ops on
/// several threads count once, by class priority.
///
/// ```
/// use xlens_xplane::Session;
/// use xlens_roofline::{OpProfile, Steps, host_anatomy};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/real/input_starvation");
/// let session = xlens_testkit::open_session(dir)?;
/// let space = session.hosts()[0].space();
/// let (modules, _) = xlens_hlo::modules_from_space(space);
/// let profile = OpProfile::from_host_threads(space, &modules)?;
/// let steps = Steps::from_space(space)?;
/// let anatomy = host_anatomy(space, &steps, &profile)?;
/// // A slow data loader runs before each step's ops: host time dominates.
/// assert!(anatomy.iter().all(|a| a.sum() == a.step_time && a.host > a.matmul));
/// Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn host_anatomy(
    space: &xlens_xplane::Space,
    steps: &crate::Steps,
    profile: &crate::OpProfile,
) -> xlens_xplane::Result<Vec<StepAnatomy>> {
    let mut ops = crate::HostOps::read(space)?;
    // CUDA graphs' kernels are named by their instructions, as the op profile names them.
    if ops.has_graph_kernels() {
        ops.attribute_graph_kernels(&xlens_hlo::modules_from_space(space).0);
    }
    host_anatomy_from_ops(space, steps, profile, &ops)
}

/// Steps whose host anatomy is computed together: the op intervals of one batch are built, used
/// and dropped, so memory follows the ops of a few steps rather than those of the whole capture.
const HOST_ANATOMY_BATCH_STEPS: usize = 32;

/// [`host_anatomy`] over host ops already read: the op events come from `host_ops`, and only
/// the step-marker threads are walked again (for their top-level host work).
pub fn host_anatomy_from_ops(
    space: &xlens_xplane::Space,
    steps: &crate::Steps,
    profile: &crate::OpProfile,
    host_ops: &crate::HostOps,
) -> xlens_xplane::Result<Vec<StepAnatomy>> {
    host_anatomy_in_batches(space, steps, profile, host_ops, HOST_ANATOMY_BATCH_STEPS)
}

/// [`host_anatomy_from_ops`], `batch` steps at a time. Only the intervals that overlap a step
/// decide its partition, and every op that overlaps a batch's time window is in that batch's
/// walk, so the result does not depend on `batch`.
fn host_anatomy_in_batches(
    space: &xlens_xplane::Space,
    steps: &crate::Steps,
    profile: &crate::OpProfile,
    host_ops: &crate::HostOps,
    batch: usize,
) -> xlens_xplane::Result<Vec<StepAnatomy>> {
    use std::collections::HashMap;
    use xlens_xplane::names;
    let Some(host) = space.host_threads() else {
        return Ok(steps.steps.iter().map(|s| partition(s.start, s.duration, &[], &[])).collect());
    };
    let categories: HashMap<(u64, &str), &str> =
        profile.ops.iter().map(|o| ((o.program_id, o.name.as_str()), o.category.as_str())).collect();
    // The class of each (program, interned name) of the table, decided once up front so that
    // batches of steps can be partitioned in parallel.
    let keys = host_ops.op_keys();
    let classes: Vec<TimeClass> = keys
        .keys
        .iter()
        .map(|&(program, name)| {
            let name = host_ops.names.get(name as usize).map_or("", String::as_str);
            class_of(categories.get(&(program.unwrap_or(0), name)).copied().unwrap_or(""))
        })
        .collect();
    let class_of_op = |op: &crate::HostOp| classes.get(keys.of(op)).copied().unwrap_or(TimeClass::Vector);
    // Per thread: its ops by start (longest first at equal starts), and the longest op, which
    // bounds how early an op overlapping a window can start. A thread's ops usually come in
    // that order already.
    let lines: Vec<&[crate::HostOp]> = host_ops.by_line().map(|(_, ops)| ops).collect();
    let threads: Vec<ThreadOps<'_>> = lines.into_par_iter().with_max_len(1).map(ThreadOps::new).collect();
    let hlo_op = host.stat_id(names::stat::HLO_OP);
    let mut markers: Vec<(Picos, Picos)> = steps.steps.iter().map(|s| (s.start, s.end())).collect();
    markers.sort();
    // Host work counts only on the threads that run the step loop (the ones with the markers):
    // top-level events inside a step marker, a few per step.
    let mut host_work: Vec<Interval> = Vec::new();
    // Markers and waits are not work: decided once per metadata entry, not per event.
    let not_work = host.metadata_mask(|m| crate::is_host_step_marker(m.name()) || is_host_wait(m.name()));
    // Whether an event can be host work: not a marker or a wait, not an op.
    let is_op = |ev: &xlens_xplane::Event<'_>| {
        ev.has_stats() && hlo_op.is_some_and(|id| ev.stat(id).is_some_and(|s| s.as_str().is_some()))
    };
    let is_work = |ev: &xlens_xplane::Event<'_>| !not_work.contains(ev) && !is_op(ev);
    // The top-level work of a run of a marker line's events: each event inside a marker that
    // starts at or after the end of the last one kept (`last_end`, `None` at the line's start).
    // A line in start order (the Python tracer's thread holds a million events) is read in skips
    // (its time index, left by the steps' walk): from an event kept to its end, and from an
    // event past its marker's end to the next marker's start, since the events in between can
    // be neither; a line out of order is read whole.
    let top_level = |mut events: xlens_xplane::EventIter<'_>, mut last_end: Option<Picos>| {
        let mut kept: Vec<Interval> = Vec::new();
        // The events of the block skipped to ask for the same target: one skip each.
        let mut skipped_to = Picos(i64::MIN);
        let mut skip = |events: &mut xlens_xplane::EventIter<'_>, to: Picos| {
            if to > skipped_to {
                events.skip_to(to);
                skipped_to = to;
            }
        };
        if let Some(&(first, _)) = markers.first() {
            skip(&mut events, last_end.map_or(first, |l| l.max(first)));
        }
        // A line's events come by start: each one's marker is found from the last one's.
        let mut cursor = 0usize;
        while let Some(ev) = events.next() {
            let ev = ev?;
            if !is_work(&ev) {
                continue;
            }
            let (start, end) = (ev.start(), ev.end());
            // Markers are sorted by start and do not nest: the candidate is the last one that
            // starts at or before the event.
            let k = crate::anatomy::partition_from(&markers, &mut cursor, |&(s, _)| s <= start);
            if k == 0 || start > markers[k - 1].1 {
                skip(&mut events, markers.get(k).map_or(Picos(i64::MAX), |m| m.0));
                continue;
            }
            if end <= markers[k - 1].1 && last_end.is_none_or(|last| start >= last) {
                kept.push(Interval { start, end, class: TimeClass::Host });
                last_end = Some(end);
                skip(&mut events, end);
            }
        }
        Ok::<_, xlens_xplane::Error>(kept)
    };
    for &index in &host_ops.marker_lines {
        let Some(line) = host.lines().get(index) else { continue };
        host_work.extend(crate::chain::chain_in_runs(host, line, top_level, |i| (i.start, i.end))?);
    }
    host_work.sort_by_key(|i| (i.start, i.end));
    let longest_work = host_work.iter().map(|i| i.end - i.start).max().unwrap_or_default();
    // Batches in parallel, each with its own buffers; the batches' results are joined in order.
    let batches: Vec<Vec<StepAnatomy>> = steps
        .steps
        .par_chunks(batch.max(1))
        .map(|chunk| {
            let lo = chunk.iter().map(|s| s.start).min().unwrap_or_default();
            let hi = chunk.iter().map(|s| s.end()).max().unwrap_or_default();
            let mut intervals: Vec<Interval> = Vec::new();
            for thread in &threads {
                // Ops that start before `lo - longest` end before `lo`.
                let from = thread.first_from(lo.saturating_sub(thread.longest));
                let to = thread.first_from(hi);
                let mut segments = InnermostSegments::default();
                // A thread's segments come by start and do not overlap: one that touches the
                // last of the same class extends it (the same time covered, fewer to sort).
                let first = intervals.len();
                let mut sink = |s: Interval| {
                    let mine = intervals.len() > first;
                    match intervals.last_mut() {
                        Some(last) if mine && last.class == s.class && s.start <= last.end => {
                            last.end = last.end.max(s.end)
                        }
                        _ => intervals.push(s),
                    }
                };
                for op in (from..to).map(|k| thread.at(k)) {
                    segments.push(op.start, op.end, class_of_op(op), &mut sink);
                }
                segments.finish(&mut sink);
            }
            let from = host_work.partition_point(|i| i.start < lo.saturating_sub(longest_work));
            let to = host_work.partition_point(|i| i.start < hi);
            intervals.extend_from_slice(&host_work[from..to.max(from)]);
            // By start alone: a step takes the intervals by their starts, and the partition of a
            // step does not depend on their order (the stable sort merges the threads' runs).
            intervals.sort_by_key(|i| i.start);
            let longest = intervals.iter().map(|i| i.end - i.start).max().unwrap_or_default();
            chunk
                .iter()
                .map(|s| {
                    let from = intervals.partition_point(|i| i.start < s.start - longest);
                    let to = intervals.partition_point(|i| i.start < s.end());
                    partition(s.start, s.duration, &intervals[from..to.max(from)], &[])
                })
                .collect()
        })
        .collect();
    Ok(batches.into_iter().flatten().collect())
}

/// One thread's (or stream's) ops in start order, longest first at equal starts, for the
/// batches of [`host_anatomy_in_batches`] to find the ops of their windows.
struct ThreadOps<'a> {
    ops: &'a [crate::HostOp],
    /// The ops' positions in that order, when they do not come in it.
    order: Option<Vec<u32>>,
    /// The longest op.
    longest: Picos,
    /// The start of every [`THREAD_SKIP_OPS`]-th op in that order: a batch's search reads this
    /// short list, then one block of ops, rather than probing the whole thread (two dependent
    /// cache misses a probe through `order`; gpu300's 675 batches made 21,600 such searches).
    skip: Vec<Picos>,
}

/// Ops between two entries of [`ThreadOps`]'s skip list.
const THREAD_SKIP_OPS: usize = 64;

impl<'a> ThreadOps<'a> {
    fn new(ops: &'a [crate::HostOp]) -> ThreadOps<'a> {
        let by_start = |a: &crate::HostOp, b: &crate::HostOp| a.start.cmp(&b.start).then(b.end.cmp(&a.end));
        let order = (!ops.is_sorted_by(|a, b| by_start(a, b).is_le())).then(|| {
            let mut order: Vec<u32> = (0..ops.len() as u32).collect();
            order.sort_by(|&a, &b| by_start(&ops[a as usize], &ops[b as usize]));
            order
        });
        let longest = ops.iter().map(|o| o.end.saturating_sub(o.start)).max().unwrap_or_default();
        let mut thread = ThreadOps { ops, order, longest, skip: Vec::new() };
        thread.skip = (0..ops.len()).step_by(THREAD_SKIP_OPS).map(|k| thread.at(k).start).collect();
        thread
    }

    /// The `k`-th op in start order.
    #[inline]
    fn at(&self, k: usize) -> &'a crate::HostOp {
        match &self.order {
            Some(order) => &self.ops[order[k] as usize],
            None => &self.ops[k],
        }
    }

    /// The position in start order of the first op that starts at or after `t` (the count of
    /// those that start before it).
    fn first_from(&self, t: Picos) -> usize {
        // Blocks whose first op starts before `t`: every op before the last such block's first
        // does too, and the first op of the next block does not.
        let blocks = self.skip.partition_point(|&s| s < t);
        let lo = blocks.saturating_sub(1) * THREAD_SKIP_OPS;
        let hi = (blocks * THREAD_SKIP_OPS).min(self.ops.len());
        let (mut lo, mut hi) = (lo, hi.max(lo));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.at(mid).start < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod host_batch_tests {
    use super::*;

    /// A thread's search gives the count of its ops (in start order) that start before the
    /// time, in and out of order, around its skip list's blocks and past both ends.
    #[test]
    fn thread_search_counts_the_ops_before_a_time() {
        let op =
            |start: i64, len: i64| crate::HostOp { start: Picos(start), end: Picos(start + len), name: 0, context: 0 };
        let sorted: Vec<crate::HostOp> = (0..1_000).map(|i| op(i / 3 * 10, 10 - i % 3)).collect();
        // Out of order: the same ops, reversed.
        let shuffled: Vec<crate::HostOp> = sorted.iter().rev().copied().collect();
        for ops in [&sorted, &shuffled] {
            let thread = ThreadOps::new(ops);
            assert_eq!(thread.order.is_some(), std::ptr::eq(ops, &shuffled));
            assert!((1..ops.len()).all(|k| thread.at(k - 1).start <= thread.at(k).start));
            for t in (-20..3_400).step_by(7).map(Picos) {
                let before = ops.iter().filter(|o| o.start < t).count();
                assert_eq!(thread.first_from(t), before, "t {t:?}");
            }
        }
        assert_eq!(ThreadOps::new(&[]).first_from(Picos(5)), 0);
    }

    /// A long marker line walked in runs gives the anatomy one walk gives, whatever the cuts:
    /// host events that reach past a cut (and events that start inside one but end after it,
    /// which a run walked from nothing kept would keep) are joined as one walk keeps them.
    #[test]
    fn marker_lines_walked_in_runs_equal_one_walk() {
        // With a last event out of start order the line has no time index and is read whole;
        // without it, in skips: the same anatomy either way.
        let whole = marker_line_anatomy(true);
        assert_eq!(marker_line_anatomy(false), whole);
    }

    fn marker_line_anatomy(out_of_order: bool) -> Vec<StepAnatomy> {
        use xlens_xplane::names;
        let mut b = xlens_xplane::SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let root = plane.stat_metadata(names::stat::IS_ROOT);
            let hlo_op = plane.stat_metadata(names::stat::HLO_OP);
            let program = plane.stat_metadata(names::stat::PROGRAM_ID);
            let step = plane.event_metadata("train_step");
            let (call, late, next, op) = (
                plane.event_metadata("$call"),
                plane.event_metadata("$late"),
                plane.event_metadata("$next"),
                plane.event_metadata("thunk"),
            );
            let mut line = plane.line(1, "python3", 0);
            for k in 0..18_000i64 {
                let s = k * 10_000;
                line.event(step, s, 9_000).stat(root, 1i64);
                // A call with nested calls, one that starts inside it and ends after it (on odd
                // steps after the nested calls end: a run cut among them keeps it, one walk does
                // not, so that run is walked again), then the next call, which one walk keeps
                // only if it starts after the first ends.
                line.event(call, s + 100, 4_000 + (k % 7) * 100);
                for i in 0..20 {
                    line.event(call, s + 200 + i * 150, 100);
                }
                line.event(late, s + 3_000 + (k % 2) * 200, 2_000);
                line.event(next, s + 4_600 + (k % 5) * 200, 1_000);
                line.event(op, s + 7_000, 500).stat(hlo_op, "fusion.1").stat(program, 1u64);
            }
            if out_of_order {
                // Before every marker: host work of no step.
                line.event(call, -5_000, 1_000);
            }
        }
        let space = xlens_xplane::Space::parse(b.finish().into()).unwrap();
        assert!(space.host_threads().unwrap().lines()[0].byte_len() > 4 * xlens_xplane::PART_MIN_BYTES);
        let steps = crate::Steps::from_space(&space).unwrap();
        let profile = crate::OpProfile::from_host_threads(&space, &[]).unwrap();
        let ops = crate::HostOps::read(&space).unwrap();
        assert_eq!(ops.marker_lines, [0]);
        let anatomy = |threads| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| host_anatomy_in_batches(&space, &steps, &profile, &ops, 64).unwrap())
        };
        let one = anatomy(1);
        assert_eq!(one.len(), 18_000);
        assert!(one.iter().all(|a| a.host > Picos::ZERO));
        for threads in [2, 3, 4, 5, 7, 8] {
            assert_eq!(anatomy(threads), one, "{threads} workers");
        }
        one
    }

    /// Batching steps changes memory, not the result: one step at a time, a few at a time and
    /// all at once give the same anatomy on real CPU captures.
    #[test]
    fn host_anatomy_does_not_depend_on_the_batch() {
        for name in ["corpus/clean", "real/input_starvation", "real/debug_print", "real/sharded_collectives"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(name);
            let session = xlens_testkit::open_session(&dir).unwrap();
            let space = session.hosts()[0].space();
            let (modules, _) = xlens_hlo::modules_from_space(space);
            let profile = crate::OpProfile::from_host_threads(space, &modules).unwrap();
            let steps = crate::Steps::from_space(space).unwrap();
            let ops = crate::HostOps::read(space).unwrap();
            let all = host_anatomy_in_batches(space, &steps, &profile, &ops, usize::MAX).unwrap();
            assert!(steps.steps.len() > 3, "{name}");
            assert_eq!(all.len(), steps.steps.len(), "{name}");
            assert!(all.iter().any(|a| a.idle < a.step_time), "{name}: some op time");
            for batch in [1, 2, 5] {
                assert_eq!(host_anatomy_in_batches(space, &steps, &profile, &ops, batch).unwrap(), all, "{name}");
            }
        }
    }
}
