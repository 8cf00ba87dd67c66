//! Time intervals and medians: sorted-interval lookups ([`in_intervals`], [`IntervalCursor`])
//! and [`median_of`]. Plain arithmetic below the analyses: the profile's step medians and the
//! detectors' evidence both use it.

use xlens_xplane::Picos;

use crate::partition_from;

/// True when `t` lies in one of the sorted, disjoint `merged` intervals.
pub fn in_intervals(merged: &[(Picos, Picos)], t: Picos) -> bool {
    let i = merged.partition_point(|(s, _)| *s <= t);
    i > 0 && t < merged[i - 1].1
}

/// [`in_intervals`] for times that mostly come in order (the ops of a line): the position moves
/// on from the previous time's instead of being searched for every time. The intervals must be
/// sorted by start ([`IntervalCursor::seek`] needs no more; `contains` needs them disjoint).
#[derive(Debug)]
pub struct IntervalCursor<'a> {
    merged: &'a [(Picos, Picos)],
    /// How many intervals start at or before the last time asked.
    at: usize,
}

impl<'a> IntervalCursor<'a> {
    /// A cursor at the first of `merged`.
    pub fn new(merged: &'a [(Picos, Picos)]) -> Self {
        IntervalCursor { merged, at: 0 }
    }

    /// Whether `t` lies in one of the intervals (as [`in_intervals`]).
    #[inline]
    pub fn contains(&mut self, t: Picos) -> bool {
        let at = self.seek(t);
        at > 0 && t < self.merged[at - 1].1
    }

    /// The time of `[lo, hi)` the intervals cover (as [`covered`](crate::covered));
    /// cheapest for spans asked in time order.
    pub fn covered(&mut self, lo: Picos, hi: Picos) -> Picos {
        // The last interval starting at or before `lo`, unless it ends by then.
        let at = self.seek(lo);
        let from = if at > 0 && self.merged[at - 1].1 > lo { at - 1 } else { at };
        self.merged[from..]
            .iter()
            .take_while(|&&(s, _)| s < hi)
            .map(|&(s, e)| e.min(hi).saturating_sub(s.max(lo)))
            .sum()
    }

    /// How many intervals start at or before `t` (`partition_point` of their starts).
    #[inline]
    pub fn seek(&mut self, t: Picos) -> usize {
        partition_from(self.merged, &mut self.at, |(s, _)| *s <= t)
    }
}

/// The median of `v` (the mean of the two middle values when their count is even; 0 when
/// empty), reordering it: the middle values are selected rather than sorted, in the total
/// order, so they are the sort's bit for bit.
pub fn median_of(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    let (below, &mut middle, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    match below.iter().copied().max_by(f64::total_cmp) {
        Some(before) if n.is_multiple_of(2) => (before + middle) / 2.0,
        _ => middle,
    }
}
