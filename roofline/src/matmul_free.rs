//! The longest matmul-free stretch of a core's steps, found while the timeline walks the core's
//! op line, so that no detector walks the line again for it.
//!
//! A stretch is a span of a step between two matrix-unit runs (or a step edge and one) and is
//! scored by the vector work inside it. The timeline's walk hands over the innermost segments
//! its nesting stack cuts (what [`crate::InnermostSegments`] gives); those of the matmul and
//! vector classes are merged into two unions, in time order, and each step window is scored as
//! soon as the walk has passed its end (no later segment can start inside it). Only
//! the union intervals that reach the earliest window not yet scored are kept (plus the last,
//! which a later segment may still extend), so memory follows one step, not the line: a
//! TensorCore line holds millions of ops, its unions a million intervals or more.

use xlens_xplane::Picos;

use crate::anatomy::TimeClass;
use crate::span::Span;

/// The stretch of a core's steps, between matmuls or a step edge and a matmul, that holds the
/// most vector work (the first such when several tie).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulFreeStretch {
    /// Start (a step start or the end of a matmul run).
    pub start: Picos,
    /// End (a matmul run's start or the step's end).
    pub end: Picos,
    /// Vector time inside it.
    pub vector: Picos,
    /// The first and last vector ops (in timeline order) that run wholly inside it, by their
    /// position in the plane's event metadata; `None` when no vector op fits inside.
    pub vector_ops: Option<(usize, usize)>,
}

/// What the walk of a core found: the longest matmul-free stretch of its steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulFreeStretches {
    /// The stretch with the most vector work, when some stretch has any.
    pub longest: Option<MatmulFreeStretch>,
    /// The op line came in timeline order (by start, longer first), so a later walk that needs
    /// the ops of a window may seek in it rather than sort it.
    pub in_order: bool,
}

/// The state of the search, fed the innermost segments of one core's ops in time order.
#[derive(Debug)]
pub(crate) struct StretchWalk {
    /// Matmul and vector unions from the earliest window not yet scored on.
    matmul: Vec<Span>,
    vector: Vec<Span>,
    /// Step windows, by start; `next` is the first not yet scored.
    windows: Vec<(Picos, Picos)>,
    next: usize,
    /// Best so far.
    best: Option<MatmulFreeStretch>,
    /// The vector ops (start, end, event-metadata position) from the start of the earliest
    /// window not yet scored, in timeline order.
    vector_ops: Vec<(Picos, Picos, u32)>,
    /// False once the walk met an op it segments differently from a walk of the line that
    /// clamps durations and names ops without metadata (see [`StretchWalk::reject`]): the
    /// result is then not offered.
    exact: bool,
}

impl StretchWalk {
    /// A search over these step windows (sorted by start).
    pub(crate) fn new(windows: Vec<(Picos, Picos)>) -> StretchWalk {
        StretchWalk {
            matmul: Vec::new(),
            vector: Vec::new(),
            windows,
            next: 0,
            best: None,
            vector_ops: Vec::new(),
            exact: true,
        }
    }

    /// The next innermost segment, `[start, end)` run by an op of `class` (time order).
    #[inline]
    pub(crate) fn segment(&mut self, start: Picos, end: Picos, class: TimeClass) {
        let union = match class {
            TimeClass::Matmul => &mut self.matmul,
            TimeClass::Vector => &mut self.vector,
            _ => return,
        };
        crate::anatomy::merge_in_order(union, start, end);
    }

    /// The next op is a vector op (timeline order), `meta` its event-metadata position.
    #[inline]
    pub(crate) fn vector_op(&mut self, start: Picos, end: Picos, meta: usize) {
        // Only a window not yet scored can take it, and those start no earlier than the next.
        if self.windows.get(self.next).is_some_and(|w| start >= w.0) {
            self.vector_ops.push((start, end, meta as u32));
        }
    }

    /// The walk has passed `t`: no later segment or op starts before it, so the windows that
    /// end before then are final (one that ends at `t` may still get an empty op there).
    #[inline]
    pub(crate) fn advance(&mut self, t: Picos) {
        if self.windows.get(self.next).is_some_and(|w| w.1 < t) {
            self.settle(Some(t));
        }
    }

    /// The line holds an op this search would segment differently from a walk of its own (a
    /// negative duration, or no event metadata): the result is withheld.
    pub(crate) fn reject(&mut self) {
        self.exact = false;
    }

    /// Scores the windows that end before `t` (all of them for `None`), in order, and drops
    /// the union intervals and vector ops the next window cannot use.
    fn settle(&mut self, t: Option<Picos>) {
        while let Some(&(lo, hi)) = self.windows.get(self.next).filter(|w| t.is_none_or(|t| w.1 < t)) {
            self.score(lo, hi);
            self.next += 1;
        }
        match self.windows.get(self.next) {
            Some(&(lo, _)) => {
                prune(&mut self.matmul, lo);
                prune(&mut self.vector, lo);
                let done = self.vector_ops.partition_point(|op| op.0 < lo);
                self.vector_ops.drain(..done);
            }
            None => self.vector_ops.clear(),
        }
    }

    /// One window: the gaps between its matmul runs (clipped to it) and the vector time in each.
    fn score(&mut self, lo: Picos, hi: Picos) {
        let mut cursor = lo;
        let from = self.matmul.partition_point(|m| m.end <= lo);
        let edges = self.matmul[from..].iter().take_while(|m| m.start < hi).map(|m| (m.start.max(lo), m.end.min(hi)));
        for (s, e) in edges.chain(std::iter::once((hi, hi))) {
            if s > cursor {
                let v = crate::anatomy::covered(&self.vector, cursor, s);
                if self.best.is_none_or(|b| v > b.vector) {
                    // Its vector ops: wholly inside, first and last in timeline order.
                    let mut inside = self.vector_ops.iter().filter(|op| op.0 >= cursor && op.1 <= s);
                    let first = inside.next().map(|op| op.2 as usize);
                    let ops = first.map(|f| (f, inside.next_back().map_or(f, |op| op.2 as usize)));
                    self.best = Some(MatmulFreeStretch { start: cursor, end: s, vector: v, vector_ops: ops });
                }
            }
            cursor = cursor.max(e);
        }
    }

    /// Ends the walk (after the last segment); `None` when it was rejected.
    pub(crate) fn finish(mut self, in_order: bool) -> Option<MatmulFreeStretches> {
        self.settle(None);
        let longest = self.best.filter(|b| b.vector > Picos::ZERO);
        self.exact.then_some(MatmulFreeStretches { longest, in_order })
    }
}

/// Drops the intervals that end at or before `lo`, except the last (a later segment may still
/// extend it).
fn prune(union: &mut Vec<Span>, lo: Picos) {
    let done = union.partition_point(|i| i.end <= lo).min(union.len().saturating_sub(1));
    if done > 0 {
        union.drain(..done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ops fed as the timeline feeds them: segmented by a nesting stack, the walk advanced to
    /// each op's start.
    struct Feed {
        walk: StretchWalk,
        segments: crate::InnermostSegments,
        /// Ops fed so far: the next op's stand-in event-metadata position.
        fed: usize,
    }

    impl Feed {
        fn new(windows: &[(i64, i64)]) -> Feed {
            let windows = windows.iter().map(|&(a, b)| (Picos(a), Picos(b))).collect();
            Feed { walk: StretchWalk::new(windows), segments: crate::InnermostSegments::default(), fed: 0 }
        }

        fn op(&mut self, start: i64, duration: i64, class: TimeClass) {
            if duration < 0 {
                self.walk.reject();
            }
            let walk = &mut self.walk;
            let (start, end) = (Picos(start), Picos(start + duration.max(0)));
            self.segments.push(start, end, class, &mut |s| walk.segment(s.start, s.end, s.class));
            self.walk.advance(start);
            if class == TimeClass::Vector {
                self.walk.vector_op(start, end, self.fed);
            }
            self.fed += 1;
        }

        fn finish(mut self) -> Option<MatmulFreeStretches> {
            let walk = &mut self.walk;
            self.segments.finish(&mut |s| walk.segment(s.start, s.end, s.class));
            self.walk.finish(true)
        }
    }

    fn walk(windows: &[(i64, i64)], ops: &[(i64, i64, TimeClass)]) -> Option<MatmulFreeStretches> {
        let mut feed = Feed::new(windows);
        for &(start, duration, class) in ops {
            feed.op(start, duration, class);
        }
        feed.finish()
    }

    /// Two steps; the second's gap between its matmuls holds the most vector time, including
    /// a vector op's time around a nested matmul.
    #[test]
    fn finds_the_gap_with_the_most_vector_time() {
        use TimeClass::{Matmul as M, Vector as V};
        let ops = [
            (0, 10, M),
            (10, 20, V),
            (30, 10, M),
            // Step 2: a vector op with a matmul nested in it, then a long vector run.
            (100, 40, V),
            (110, 10, M),
            (150, 45, V),
            (195, 5, M),
        ];
        let got = walk(&[(0, 100), (100, 200)], &ops).unwrap().longest.unwrap();
        // After the nested matmul (ends 120): vector 120..140 and 150..195, until the matmul at 195;
        // the only vector op wholly inside is the sixth (the first started at 100).
        assert_eq!(
            got,
            MatmulFreeStretch { start: Picos(120), end: Picos(195), vector: Picos(65), vector_ops: Some((5, 5)) }
        );
    }

    /// Windows scored as the walk goes keep only the union intervals they still need.
    #[test]
    fn memory_follows_the_steps() {
        let windows: Vec<(i64, i64)> = (0..1000).map(|k| (k * 100, k * 100 + 100)).collect();
        let mut feed = Feed::new(&windows);
        for k in 0..1000 {
            feed.op(k * 100, 10, TimeClass::Matmul);
            feed.op(k * 100 + 20, 30, TimeClass::Vector);
            assert!(feed.walk.matmul.len() <= 2 && feed.walk.vector.len() <= 2, "{k}");
        }
        let got = feed.finish().unwrap().longest.unwrap();
        assert_eq!(
            got,
            MatmulFreeStretch { start: Picos(10), end: Picos(100), vector: Picos(30), vector_ops: Some((1, 1)) }
        );
        assert!(feed_ops_kept_bounded());
    }

    /// A negative duration makes the result unavailable (a clamping walk reads such lines
    /// differently), and a profile without vector work has no stretch.
    #[test]
    fn negative_durations_and_no_vector_work() {
        assert_eq!(walk(&[(0, 100)], &[(0, 10, TimeClass::Matmul), (20, -5, TimeClass::Vector)]), None);
        let none = walk(&[(0, 100)], &[(0, 10, TimeClass::Matmul)]).unwrap();
        assert_eq!(none.longest, None);
    }

    /// The vector ops kept for naming follow the steps too.
    fn feed_ops_kept_bounded() -> bool {
        let windows: Vec<(i64, i64)> = (0..1000).map(|k| (k * 100, k * 100 + 100)).collect();
        let mut feed = Feed::new(&windows);
        for k in 0..1000 {
            feed.op(k * 100, 10, TimeClass::Matmul);
            feed.op(k * 100 + 20, 30, TimeClass::Vector);
            if feed.walk.vector_ops.len() > 2 {
                return false;
            }
        }
        true
    }
}
