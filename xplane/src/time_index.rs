//! A sparse index of a line's events, so that a walk that wants the events of a few time windows
//! (the input phase at the start of each step, the top-level work inside step markers) or of a
//! few kinds (compile events on the Python tracer's thread) skips the rest of a long line in
//! whole blocks instead of decoding every event.
//!
//! Built by a walk of the line that reads every event anyway (the host steps' walk of the
//! step-marker threads, [`Line::event_parts_indexing`]), or by the first skip in it, in one walk
//! on the calling thread. It holds, per
//! [`TIME_INDEX_BLOCK_EVENTS`] events, where the block starts and the event-metadata entries its
//! events use, so it costs a few bytes per block. Skips by time need the events in start order
//! (XProf sorts them when it writes a profile): on a line that is not, or whose events fail to
//! decode, a skip does nothing and the walk reads every event, as a plain walk does.

use crate::plane::{Block, TimeIndex};
use crate::{Line, MetadataMask, Picos, Plane};

/// Events per block of a line's index: a skip decodes at most this many events before the one
/// it looks for.
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub const TIME_INDEX_BLOCK_EVENTS: usize = 256;

impl Plane {
    /// The index of one of this plane's lines, built on first use; `None` when one of the line's
    /// events fails to decode.
    pub(crate) fn time_index(&self, line: &Line) -> Option<&TimeIndex> {
        let at = self.lines().binary_search_by_key(&line.index(), Line::index).ok()?;
        self.time_indexes.get(at)?.get_or_init(|| TimeIndex::build(self, line).map(Box::new)).as_deref()
    }
}

/// What one run of a line's events gives the index.
#[derive(Clone, Debug)]
struct Run {
    blocks: Vec<Block>,
    metadata: Vec<u32>,
    /// The first and last starts of the run's events (`None` for an empty run).
    span: Option<(Picos, Picos)>,
    in_order: bool,
}

impl TimeIndex {
    /// Indexes `line` in one walk on the calling thread; `None` when one of its events fails to
    /// decode. It runs inside the line's `OnceLock`: a parallel walk there would let the worker
    /// take other jobs while it waits, one of which may skip in the same line and re-enter the
    /// lock, which deadlocks. (The walks that index lines on their way run in parallel outside
    /// any lock, [`Line::event_parts_indexing`].)
    pub(crate) fn build(plane: &Plane, line: &Line) -> Option<TimeIndex> {
        TimeIndex::join(line, vec![index_run(line.events(plane))])
    }

    /// The index of a line from its runs' parts, in order; `None` when a run could not be
    /// indexed.
    fn join(line: &Line, runs: Vec<Option<Run>>) -> Option<TimeIndex> {
        let mut index = TimeIndex { blocks: Vec::new(), metadata: Vec::new(), in_order: true, end: line.body().end };
        let mut last: Option<Picos> = None;
        for run in runs {
            let run = run?;
            index.in_order &= run.in_order;
            if let Some((first, end)) = run.span {
                index.in_order &= last.is_none_or(|l| first >= l);
                last = Some(end);
            }
            let base = index.metadata.len();
            index.blocks.extend(run.blocks.into_iter().map(|b| Block { metadata: b.metadata + base, ..b }));
            index.metadata.extend(run.metadata);
        }
        Some(index)
    }

    /// The block from which a walk meets every event that starts at or after `from` (the last
    /// block whose first event starts before `from`); `None` when that is the line's start or
    /// the line is not in start order.
    fn block_before(&self, from: Picos) -> Option<&Block> {
        if !self.in_order {
            return None;
        }
        let after = self.blocks.partition_point(|b| b.start < from);
        after.checked_sub(1).map(|at| &self.blocks[at])
    }

    /// Whether an event of block `at` may pass `mask`.
    fn block_uses(&self, at: usize, mask: &MetadataMask) -> bool {
        let from = self.blocks[at].metadata;
        let to = self.blocks.get(at + 1).map_or(self.metadata.len(), |b| b.metadata);
        self.metadata[from..to].iter().any(|&p| mask.contains_position(p as usize))
    }
}

/// One run's blocks, one every [`TIME_INDEX_BLOCK_EVENTS`] events from its first; `None` when
/// one of its events fails to decode.
fn index_run(events: crate::EventIter<'_>) -> Option<Run> {
    let mut recording = Recording::new(events);
    for ev in recording.by_ref() {
        ev.ok()?;
    }
    recording.run
}

/// A walk of a run of events that indexes them as it goes (`run` becomes `None` at the first
/// event that fails to decode).
struct Recording<'a> {
    events: crate::EventIter<'a>,
    run: Option<Run>,
    /// Events left before the next block starts.
    in_block: usize,
    /// The blocks begun so far.
    block: u32,
    /// Per event-metadata position: the last block (counted from 1) that noted it.
    noted: Vec<u32>,
}

impl<'a> Recording<'a> {
    fn new(events: crate::EventIter<'a>) -> Self {
        let noted = vec![0; events.plane().event_metadata().len()];
        let run = Run { blocks: Vec::new(), metadata: Vec::new(), span: None, in_order: true };
        Recording { events, run: Some(run), in_block: 0, block: 0, noted }
    }
}

impl<'a> Iterator for Recording<'a> {
    type Item = crate::Result<crate::Event<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (pos, index) = (self.events.position(), self.events.next_index());
        let next = self.events.next();
        match (&mut self.run, &next) {
            (Some(run), Some(Ok(ev))) => {
                let start = ev.start();
                run.span = match run.span {
                    Some((first, last)) => {
                        run.in_order &= start >= last;
                        Some((first, start))
                    }
                    None => Some((start, start)),
                };
                if self.in_block == 0 {
                    run.blocks.push(Block { pos, index, start, metadata: run.metadata.len() });
                    self.in_block = TIME_INDEX_BLOCK_EVENTS;
                    self.block += 1;
                }
                self.in_block -= 1;
                if let Some(noted) = self.events.plane().event_metadata_position(ev.metadata_id()).and_then(|p| {
                    let noted = self.noted.get_mut(p)?;
                    Some((p, noted))
                }) && *noted.1 != self.block
                {
                    *noted.1 = self.block;
                    run.metadata.push(noted.0 as u32);
                }
            }
            (Some(_), Some(Err(_))) => self.run = None,
            _ => {}
        }
        next
    }
}

/// The runs of one line whose walks index it ([`Line::event_parts_indexing`]): the last run to
/// finish joins them and keeps the index in the plane.
struct Runs {
    /// Per run: `None` until it finished, then what it gives the index.
    parts: std::sync::Mutex<Vec<Option<Option<Run>>>>,
}

/// One run of a line's events, from [`Line::event_parts_indexing`]: its events, as
/// [`Line::event_parts`] yields them, indexed by start on the way. When every run of the line has
/// been walked to its end, the line's time index is kept for later skips
/// ([`crate::EventIter::skip_to`]) without a walk of its own.
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
pub struct IndexingEvents<'a> {
    recording: Recording<'a>,
    runs: std::sync::Arc<Runs>,
    slot: usize,
    finished: bool,
}

impl std::fmt::Debug for IndexingEvents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexingEvents").field("events", &self.recording.events).field("slot", &self.slot).finish()
    }
}

impl<'a> Iterator for IndexingEvents<'a> {
    type Item = crate::Result<crate::Event<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let next = self.recording.next();
        if next.is_none() {
            self.finish();
        }
        next
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.recording.events.size_hint()
    }
}

impl IndexingEvents<'_> {
    /// Hands this run's part to the line's other runs, once; the last one joins them.
    #[cold]
    fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        // `None` (an unreadable event) leaves the line without an index.
        let run = self.recording.run.take();
        let Ok(mut parts) = self.runs.parts.lock() else { return };
        let Some(slot) = parts.get_mut(self.slot) else { return };
        *slot = Some(run);
        if parts.iter().all(Option::is_some) {
            let runs = std::mem::take(&mut *parts).into_iter().flatten().collect();
            let (plane, line) = (self.recording.events.plane(), self.recording.events.line());
            plane.keep_time_index(line, TimeIndex::join(line, runs));
        }
    }
}

impl Line {
    /// [`Line::event_parts`] for a walk that reads every event of the line anyway (the host
    /// steps read every event of the step-marker threads): walked to their ends, the runs leave
    /// the line's time index behind, so later walks skip in it
    /// ([`crate::EventIter::skip_to`]) without indexing the line themselves.
    ///
    /// ```
    /// use xlens_xplane::{Picos, Space, SpaceBuilder, TIME_INDEX_BLOCK_EVENTS};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let op = plane.event_metadata("op");
    ///     let mut line = plane.line(7, "python", 0);
    ///     for i in 0..100_000 {
    ///         line.event(op, i * 10, 5);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let line = &plane.lines()[0];
    /// let count: usize = line.event_parts_indexing(plane, 2).into_iter().map(|run| run.count()).sum();
    /// assert_eq!(count, 100_000);
    /// let mut events = line.events(plane);
    /// events.skip_to(Picos(990_000));
    /// // The last 1,000 events, and at most a block before them.
    /// assert!(events.count() <= 1_000 + TIME_INDEX_BLOCK_EVENTS);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    // Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
    #[doc(hidden)]
    pub fn event_parts_indexing<'a>(&'a self, plane: &'a Plane, parts: usize) -> Vec<IndexingEvents<'a>> {
        let parts = self.event_parts(plane, parts);
        let runs = std::sync::Arc::new(Runs { parts: std::sync::Mutex::new(vec![None; parts.len()]) });
        parts
            .into_iter()
            .enumerate()
            .map(|(slot, events)| IndexingEvents {
                recording: Recording::new(events),
                runs: runs.clone(),
                slot,
                finished: false,
            })
            .collect()
    }
}

/// The events of a line whose metadata passes a mask, in line order ([`Line::events_where`]).
/// Yields `Err` once on malformed bytes, then stops.
#[derive(Debug)]
pub struct EventsWhere<'a, 'm> {
    plane: &'a Plane,
    line: &'a Line,
    mask: &'m MetadataMask,
    index: Option<&'a TimeIndex>,
    /// The next block to look at (with an index).
    next_block: usize,
    /// The events being read: the current block's, or the whole line's without an index.
    events: crate::EventIter<'a>,
    done: bool,
}

impl<'a> Iterator for EventsWhere<'a, '_> {
    type Item = crate::Result<crate::Event<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.events.next() {
                Some(Ok(ev)) if self.mask.contains(&ev) => return Some(Ok(ev)),
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                None => {}
            }
            // On to the next block that uses one of the mask's entries.
            let Some(index) = self.index else { break };
            while self.next_block < index.blocks.len() && !index.block_uses(self.next_block, self.mask) {
                self.next_block += 1;
            }
            let Some(block) = index.blocks.get(self.next_block) else { break };
            let (end, count) = index
                .blocks
                .get(self.next_block + 1)
                .map_or((index.end, self.line.event_count()), |next| (next.pos, next.index));
            self.events = crate::EventIter::block(self.plane, self.line, block.pos..end, block.index, count);
            self.next_block += 1;
        }
        self.done = true;
        None
    }
}

impl Line {
    /// The events of the line whose metadata passes `mask` (one of its plane's), in line order:
    /// what `events(plane)` filtered by `mask.contains` yields. When a walk has indexed the line
    /// ([`Line::event_parts_indexing`]), only the blocks of [`TIME_INDEX_BLOCK_EVENTS`] events
    /// that use one of the mask's entries are read; otherwise every event is.
    ///
    /// ```
    /// use xlens_xplane::{Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let (call, compile) = (plane.event_metadata("call"), plane.event_metadata("backend_compile"));
    ///     let mut line = plane.line(7, "python", 0);
    ///     for i in 0..100_000 {
    ///         line.event(if i % 40_000 == 7 { compile } else { call }, i * 10, 5);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let line = &plane.lines()[0];
    /// // A walk that reads the line anyway indexes it; the compile events are then found by
    /// // reading two blocks of 256 events, not 100,000 events.
    /// line.event_parts_indexing(plane, 2).into_iter().for_each(|run| run.for_each(drop));
    /// let compile = plane.metadata_mask(|m| m.name() == "backend_compile");
    /// let found: Vec<usize> = line.events_where(plane, &compile).map(|e| e.unwrap().index()).collect();
    /// assert_eq!(found, [7, 40_007, 80_007]);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn events_where<'a, 'm>(&'a self, plane: &'a Plane, mask: &'m MetadataMask) -> EventsWhere<'a, 'm> {
        let index = plane.time_index_built(self);
        // With an index, the walk starts at the first block that uses the mask (an empty run
        // of events until then).
        let events = match index {
            Some(_) => crate::EventIter::block(plane, self, self.body().start..self.body().start, 0, 0),
            None => self.events(plane),
        };
        EventsWhere { plane, line: self, mask, index, next_block: 0, events, done: mask.is_empty() }
    }
}

impl<'a> crate::EventIter<'a> {
    /// Skips ahead, in whole blocks of events, past events that start before `from`: every event
    /// that starts at or after `from` is still yielded, after at most
    /// [`TIME_INDEX_BLOCK_EVENTS`] that start before it. Never moves back. On a line whose events
    /// are not in start order (or fail to decode) it skips nothing, so a walk that filters what
    /// it is given by start is exact either way. A line no walk indexed is indexed by its first
    /// skip, in one walk on the calling thread.
    ///
    /// ```
    /// use xlens_xplane::{Picos, Space, SpaceBuilder};
    /// let mut b = SpaceBuilder::default();
    /// {
    ///     let mut plane = b.plane(1, "/host:CPU");
    ///     let op = plane.event_metadata("op");
    ///     let mut line = plane.line(7, "python", 0);
    ///     for i in 0..100_000 {
    ///         line.event(op, i * 10, 5);
    ///     }
    /// }
    /// let space = Space::parse(b.finish().into())?;
    /// let plane = &space.planes()[0];
    /// let mut events = plane.lines()[0].events(plane);
    /// events.skip_to(Picos(500_000));
    /// let first = events.next().unwrap()?;
    /// // A block boundary at or before the event that starts at 500,000 ps (event 50,000).
    /// assert!(first.start() <= Picos(500_000) && first.index() > 49_000);
    /// let starts: Vec<Picos> = events.map(|e| e.unwrap().start()).collect();
    /// assert!(starts.contains(&Picos(500_000)) && starts.len() < 51_000);
    /// # Ok::<(), xlens_xplane::Error>(())
    /// ```
    pub fn skip_to(&mut self, from: Picos) {
        if self.is_done() {
            return;
        }
        let Some(index) = self.plane().time_index(self.line()) else { return };
        let Some(block) = index.block_before(from) else { return };
        if block.index > self.next_index() {
            self.seek(block.pos, block.index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Space, SpaceBuilder};

    fn space(starts: &[i64]) -> Space {
        space_on("/host:CPU", starts)
    }

    /// [`space`] with the line on a plane named `plane_name` (a device plane's lines are parsed
    /// without noting their ids, on their events' tag and length bytes alone).
    fn space_on(plane_name: &str, starts: &[i64]) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, plane_name);
            let op = plane.event_metadata("op");
            let mut line = plane.line(7, "python", 0);
            for &s in starts {
                line.event(op, s, 3);
            }
        }
        Space::parse(b.finish().into()).unwrap()
    }

    /// A line of 400,000 events 10 ps apart (long enough to be cut into several runs, each at
    /// least `PART_MIN_BYTES`), and their starts.
    fn long_line() -> (Vec<i64>, Space) {
        let starts: Vec<i64> = (0..400_000).map(|i| i * 10).collect();
        let space = space(&starts);
        (starts, space)
    }

    /// The events a walk that skips to `from` yields, filtered to those starting at or after it.
    fn from(space: &Space, from: i64) -> Vec<usize> {
        let plane = &space.planes()[0];
        let mut events = plane.lines()[0].events(plane);
        events.skip_to(Picos(from));
        events.map(|e| e.unwrap()).filter(|e| e.start() >= Picos(from)).map(|e| e.index()).collect()
    }

    /// A skip to each target keeps every event that starts at or after it.
    fn assert_skips_keep_every_event(space: &Space, starts: &[i64], targets: &[i64]) {
        for &target in targets {
            let want: Vec<usize> = (0..starts.len()).filter(|&i| starts[i] >= target).collect();
            assert_eq!(from(space, target), want, "target {target}");
        }
    }

    #[test]
    fn skipping_keeps_every_event_at_or_after_the_target() {
        // Repeated starts straddle block boundaries.
        let starts: Vec<i64> = (0..5_000).map(|i| i / 7 * 10).collect();
        let space = space(&starts);
        assert_skips_keep_every_event(&space, &starts, &[-5, 0, 1, 10, 3_570, 3_571, 7_000, 7_130, 7_140, 100_000]);
    }

    #[test]
    fn skipping_moves_forward_only_and_in_blocks() {
        let starts: Vec<i64> = (0..5_000).map(|i| i * 10).collect();
        let space = space(&starts);
        let plane = &space.planes()[0];
        let mut events = plane.lines()[0].events(plane);
        events.skip_to(Picos(30_000));
        let at = events.next().unwrap().unwrap().index();
        assert!(at <= 3_000 && 3_000 - at < TIME_INDEX_BLOCK_EVENTS, "{at}");
        // Back in time: nothing moves.
        events.skip_to(Picos(0));
        assert_eq!(events.next().unwrap().unwrap().index(), at + 1);
    }

    #[test]
    fn lines_out_of_start_order_are_walked_whole() {
        let mut starts: Vec<i64> = (0..5_000).map(|i| i * 10).collect();
        starts.swap(10, 4_000);
        let space = space(&starts);
        let plane = &space.planes()[0];
        assert!(plane.time_index(&plane.lines()[0]).is_some_and(|i| !i.in_order));
        let mut events = plane.lines()[0].events(plane);
        events.skip_to(Picos(45_000));
        assert_eq!(events.count(), 5_000);
    }

    #[test]
    fn runs_of_a_long_line_join_into_one_index() {
        let (starts, space) = long_line();
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        assert!(line.event_parts(plane, 4).len() > 1);
        assert_skips_keep_every_event(&space, &starts, &[0, 1_234_560, 3_999_990, 4_000_000]);
    }

    /// The indexing runs of a line leave its index behind, and skips in it keep every event.
    #[test]
    fn indexing_runs_leave_an_index_behind() {
        let (starts, space) = long_line();
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        let runs = line.event_parts_indexing(plane, 4);
        assert!(runs.len() > 1);
        let walked: usize = runs.into_iter().map(|run| run.count()).sum();
        assert_eq!(walked, starts.len());
        let kept = plane.time_indexes[0].get().expect("kept by the runs").as_ref().expect("an index");
        // A block every `TIME_INDEX_BLOCK_EVENTS` events from each run's first.
        assert!(kept.blocks.len() >= starts.len() / TIME_INDEX_BLOCK_EVENTS);
        assert!(
            kept.blocks
                .windows(2)
                .all(|w| w[0].index < w[1].index && w[1].index - w[0].index <= TIME_INDEX_BLOCK_EVENTS)
        );
        assert_skips_keep_every_event(&space, &starts, &[0, 1_234_560, 4_000_000]);
    }

    /// Runs not walked to their ends leave nothing (a skip indexes the line itself), and runs of a
    /// line out of order leave an index that skips nothing by time.
    #[test]
    fn unfinished_runs_leave_no_index_and_unordered_ones_one_that_skips_nothing() {
        let (starts, space) = long_line();
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        for mut run in line.event_parts_indexing(plane, 4) {
            run.next();
        }
        assert!(plane.time_indexes[0].get().is_none());
        assert_eq!(from(&space, 2_000_000).len(), 200_000);
        let mut starts = starts;
        starts.swap(5, 350_000);
        let space = self::space(&starts);
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        line.event_parts_indexing(plane, 4).into_iter().for_each(|run| run.for_each(drop));
        assert!(plane.time_indexes[0].get().is_some_and(|i| i.as_ref().is_some_and(|i| !i.in_order)));
        let mut events = line.events(plane);
        events.skip_to(Picos(3_000_000));
        assert_eq!(events.count(), 400_000);
    }

    /// A space with one long line of calls, other events and, every `every` events, a compile
    /// (every thousandth event out of start order when `out_of_order`).
    fn with_compiles(every: usize, out_of_order: bool) -> Space {
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let (call, compile, other) =
                (plane.event_metadata("call"), plane.event_metadata("compile"), plane.event_metadata("other"));
            let mut line = plane.line(7, "python", 0);
            for i in 0..300_000usize {
                let metadata = if i % every == every / 2 {
                    compile
                } else if i % 3 == 0 {
                    other
                } else {
                    call
                };
                let start = if out_of_order && i % 1_000 == 999 { 0 } else { i as i64 * 10 };
                line.event(metadata, start, 5);
            }
        }
        Space::parse(b.finish().into()).unwrap()
    }

    #[test]
    fn events_where_reads_the_blocks_that_use_the_mask_and_yields_what_a_filter_does() {
        for (every, out_of_order) in [(1_000, false), (97, false), (5_000, true), (300_001, false)] {
            let space = with_compiles(every, out_of_order);
            let plane = &space.planes()[0];
            let line = &plane.lines()[0];
            for name in ["compile", "other", "nothing"] {
                let mask = plane.metadata_mask(|m| m.name() == name);
                let want: Vec<usize> =
                    line.events(plane).map(|e| e.unwrap()).filter(|e| mask.contains(e)).map(|e| e.index()).collect();
                // Before and after a walk indexed the line.
                let plain: Vec<usize> = line.events_where(plane, &mask).map(|e| e.unwrap().index()).collect();
                assert_eq!(plain, want, "{every} {name}");
                if plane.time_index_built(line).is_none() {
                    line.event_parts_indexing(plane, 3).into_iter().for_each(|run| run.for_each(drop));
                }
                let indexed: Vec<usize> = line.events_where(plane, &mask).map(|e| e.unwrap().index()).collect();
                assert_eq!(indexed, want, "{every} {name} indexed");
            }
        }
    }

    /// Skips in one line nobody indexed, from many jobs of a pool at once: the line is indexed
    /// once, by one of them, and none waits on itself (a parallel build inside the line's lock
    /// could take, while it waited, a job that skips in the same line).
    #[test]
    fn many_jobs_skipping_in_an_unindexed_line_index_it_once() {
        use rayon::prelude::*;
        let (_, space) = long_line();
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
        let counts: Vec<usize> = pool.install(|| {
            (0..64i64)
                .into_par_iter()
                .map(|k| {
                    let mut events = line.events(plane);
                    events.skip_to(Picos(k * 60_000));
                    events.map(|e| e.unwrap()).filter(|e| e.start() >= Picos(k * 60_000)).count()
                })
                .collect()
        });
        assert_eq!(counts, (0..64).map(|k| 400_000 - k as usize * 6_000).collect::<Vec<_>>());
        assert!(plane.time_indexes[0].get().is_some_and(Option::is_some));
    }

    /// A line is cut at the cut points its parse noted, whether a walk indexed it or not: the
    /// runs chain into the line's events and share its bytes about evenly (not its events:
    /// later events take more bytes here), each within a cut point's spacing of its share.
    #[test]
    fn a_line_is_cut_at_its_parse_cut_points() {
        let (starts, space) = long_line();
        assert_cut_at_parse_cut_points(&starts, &space);
        let device = space_on("/device:TPU:0", &starts);
        assert_eq!(device.planes()[0].kind(), crate::PlaneKind::TpuTensorCore { ordinal: 0 });
        assert_cut_at_parse_cut_points(&starts, &device);
    }

    fn assert_cut_at_parse_cut_points(starts: &[i64], space: &Space) {
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        let cuts = |parts| line.event_parts(plane, parts).iter().map(|r| r.position()).collect::<Vec<_>>();
        let before: Vec<Vec<usize>> = [2, 3, 4, 7].into_iter().map(cuts).collect();
        line.event_parts_indexing(plane, 3).into_iter().for_each(|run| run.for_each(drop));
        assert!(plane.time_index_built(line).is_some());
        assert_eq!([2, 3, 4, 7].into_iter().map(cuts).collect::<Vec<_>>(), before);
        for parts in [2, 3, 4, 7] {
            let runs = line.event_parts(plane, parts);
            let parts = parts.min(line.byte_len() / crate::PART_MIN_BYTES);
            assert_eq!(runs.len(), parts);
            // Each run's bytes are its share, give or take a cut point's spacing.
            let bounds: Vec<usize> = runs.iter().map(|r| r.position()).chain([line.body().end]).collect();
            let stride = line.byte_len() / parts;
            assert!(
                bounds.windows(2).all(|w| (w[1] - w[0]).abs_diff(stride) <= crate::plane::CUT_POINT_BYTES),
                "{bounds:?}"
            );
            let indices: Vec<usize> = runs.into_iter().flatten().map(|e| e.unwrap().index()).collect();
            assert_eq!(indices, (0..starts.len()).collect::<Vec<_>>());
        }
    }
}
