//! The longest matmul-free stretch of a core's steps, found while the timeline walks the core's
//! op line, so that no detector walks the line again for it.
//!
//! A stretch is a span of a step between two matrix-unit runs (or a step edge and one) and is
//! scored by the vector work inside it. The walk feeds each op to an [`InnermostSegments`]
//! splitter; the segments of the matmul and vector classes are merged into two unions, in time
//! order, and each step window is scored as soon as no later segment can start inside it. Only
//! the union intervals that reach the earliest window not yet scored are kept (plus the last,
//! which a later segment may still extend), so memory follows one step, not the line: a
//! TensorCore line holds millions of ops, its unions a million intervals or more.

use xlens_xplane::Picos;

use crate::anatomy::{InnermostSegments, Interval, TimeClass};

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

/// The state of the search, fed the ops of one core in timeline order.
#[derive(Debug)]
pub(crate) struct StretchWalk {
    segments: InnermostSegments,
    /// Matmul and vector unions from the earliest window not yet scored on.
    matmul: Vec<(Picos, Picos)>,
    vector: Vec<(Picos, Picos)>,
    /// Step windows, by start; `next` is the first not yet scored.
    windows: Vec<(Picos, Picos)>,
    next: usize,
    /// Best so far: start, end, vector time.
    best: Option<(Picos, Picos, Picos)>,
    /// False once an op with a negative duration was seen: such lines are ordered and cut
    /// differently by a walk that clamps durations, so the result is not offered.
    exact: bool,
}

impl StretchWalk {
    /// A search over these step windows (sorted by start).
    pub(crate) fn new(windows: Vec<(Picos, Picos)>) -> StretchWalk {
        StretchWalk {
            segments: InnermostSegments::default(),
            matmul: Vec::new(),
            vector: Vec::new(),
            windows,
            next: 0,
            best: None,
            exact: true,
        }
    }

    /// Feeds the next op (timeline order): its start, duration and class.
    #[inline]
    pub(crate) fn op(&mut self, start: Picos, duration: Picos, class: TimeClass) {
        if duration < Picos::ZERO {
            self.exact = false;
        }
        let end = start + duration.max(Picos::ZERO);
        let (matmul, vector) = (&mut self.matmul, &mut self.vector);
        self.segments.push(start, end, class, &mut |s| add(matmul, vector, s));
        // Every segment that starts before `start` is out: windows that end by then are final.
        if self.windows.get(self.next).is_some_and(|w| w.1 <= start) {
            self.settle(start);
        }
    }

    /// Scores the windows that end at or before `t`, in order, and drops the union intervals
    /// that end before the next window.
    fn settle(&mut self, t: Picos) {
        while let Some(&(lo, hi)) = self.windows.get(self.next).filter(|w| w.1 <= t) {
            self.score(lo, hi);
            self.next += 1;
        }
        if let Some(&(lo, _)) = self.windows.get(self.next) {
            prune(&mut self.matmul, lo);
            prune(&mut self.vector, lo);
        }
    }

    /// One window: the gaps between its matmul runs (clipped to it) and the vector time in each.
    fn score(&mut self, lo: Picos, hi: Picos) {
        let mut cursor = lo;
        let from = self.matmul.partition_point(|m| m.1 <= lo);
        let edges = self.matmul[from..].iter().take_while(|m| m.0 < hi).map(|m| (m.0.max(lo), m.1.min(hi)));
        for (s, e) in edges.chain(std::iter::once((hi, hi))) {
            if s > cursor {
                let v = covered(&self.vector, cursor, s);
                if self.best.is_none_or(|b| v > b.2) {
                    self.best = Some((cursor, s, v));
                }
            }
            cursor = cursor.max(e);
        }
    }

    /// Ends the walk; `None` when the line held ops whose durations were negative.
    pub(crate) fn finish(mut self, in_order: bool) -> Option<MatmulFreeStretches> {
        let (matmul, vector) = (&mut self.matmul, &mut self.vector);
        self.segments.finish(&mut |s| add(matmul, vector, s));
        self.settle(Picos(i64::MAX));
        let longest = self.best.filter(|b| b.2 > Picos::ZERO).map(|(start, end, vector)| MatmulFreeStretch {
            start,
            end,
            vector,
        });
        self.exact.then_some(MatmulFreeStretches { longest, in_order })
    }
}

/// Adds a segment, arriving in time order, to the union of its class.
fn add(matmul: &mut Vec<(Picos, Picos)>, vector: &mut Vec<(Picos, Picos)>, s: Interval) {
    let union = match s.class {
        TimeClass::Matmul => matmul,
        TimeClass::Vector => vector,
        _ => return,
    };
    if s.start >= s.end {
        return;
    }
    match union.last_mut() {
        Some(last) if s.start <= last.1 => last.1 = last.1.max(s.end),
        _ => union.push((s.start, s.end)),
    }
}

/// Drops the intervals that end at or before `lo`, except the last (a later segment may still
/// extend it).
fn prune(union: &mut Vec<(Picos, Picos)>, lo: Picos) {
    let done = union.partition_point(|i| i.1 <= lo).min(union.len().saturating_sub(1));
    if done > 0 {
        union.drain(..done);
    }
}

/// The time of `[lo, hi)` that sorted, disjoint intervals cover.
fn covered(intervals: &[(Picos, Picos)], lo: Picos, hi: Picos) -> Picos {
    let from = intervals.partition_point(|i| i.1 <= lo);
    intervals[from..].iter().take_while(|&&(s, _)| s < hi).map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo))).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(windows: &[(i64, i64)], ops: &[(i64, i64, TimeClass)]) -> Option<MatmulFreeStretches> {
        let mut w = StretchWalk::new(windows.iter().map(|&(a, b)| (Picos(a), Picos(b))).collect());
        for &(start, duration, class) in ops {
            w.op(Picos(start), Picos(duration), class);
        }
        w.finish(true)
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
        // After the nested matmul (ends 120): vector 120..140 and 150..195, until the matmul at 195.
        assert_eq!(got, MatmulFreeStretch { start: Picos(120), end: Picos(195), vector: Picos(65) });
    }

    /// Windows scored as the walk goes keep only the union intervals they still need.
    #[test]
    fn memory_follows_the_steps() {
        let mut w = StretchWalk::new((0..1000).map(|k| (Picos(k * 100), Picos(k * 100 + 100))).collect());
        for k in 0..1000 {
            w.op(Picos(k * 100), Picos(10), TimeClass::Matmul);
            w.op(Picos(k * 100 + 20), Picos(30), TimeClass::Vector);
            assert!(w.matmul.len() <= 2 && w.vector.len() <= 2, "{k}");
        }
        let got = w.finish(true).unwrap().longest.unwrap();
        assert_eq!(got, MatmulFreeStretch { start: Picos(10), end: Picos(100), vector: Picos(30) });
    }

    /// A negative duration makes the result unavailable (a clamping walk reads such lines
    /// differently), and a profile without vector work has no stretch.
    #[test]
    fn negative_durations_and_no_vector_work() {
        assert_eq!(walk(&[(0, 100)], &[(0, 10, TimeClass::Matmul), (20, -5, TimeClass::Vector)]), None);
        let none = walk(&[(0, 100)], &[(0, 10, TimeClass::Matmul)]).unwrap();
        assert_eq!(none.longest, None);
    }
}
