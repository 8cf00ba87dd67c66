//! Time intervals and medians: sorted-interval lookups ([`in_intervals`], [`IntervalCursor`])
//! and [`median_of`]. Plain arithmetic below the analyses: the profile's step medians and the
//! detectors' evidence both use it.

use xlens_xplane::Picos;

use crate::{Span, partition_from};

/// True when `t` lies in one of the sorted, disjoint `merged` intervals.
pub fn in_intervals(merged: &[Span], t: Picos) -> bool {
    let i = merged.partition_point(|s| s.start <= t);
    i > 0 && t < merged[i - 1].end
}

/// [`in_intervals`] for times that mostly come in order (the ops of a line): the position moves
/// on from the previous time's instead of being searched for every time. The intervals must be
/// sorted by start ([`IntervalCursor::seek`] needs no more; `contains` needs them disjoint).
#[derive(Debug)]
pub struct IntervalCursor<'a> {
    merged: &'a [Span],
    /// How many intervals start at or before the last time asked.
    at: usize,
}

impl<'a> IntervalCursor<'a> {
    /// A cursor at the first of `merged`.
    pub fn new(merged: &'a [Span]) -> Self {
        IntervalCursor { merged, at: 0 }
    }

    /// Whether `t` lies in one of the intervals (as [`in_intervals`]).
    #[inline]
    pub fn contains(&mut self, t: Picos) -> bool {
        let at = self.seek(t);
        at > 0 && t < self.merged[at - 1].end
    }

    /// The time of `[lo, hi)` the intervals cover (as [`covered`](crate::covered));
    /// cheapest for spans asked in time order.
    pub fn covered(&mut self, lo: Picos, hi: Picos) -> Picos {
        // The last interval starting at or before `lo`, unless it ends by then.
        let at = self.seek(lo);
        let from = if at > 0 && self.merged[at - 1].end > lo { at - 1 } else { at };
        self.merged[from..]
            .iter()
            .take_while(|s| s.start < hi)
            .map(|s| s.end.min(hi).saturating_sub(s.start.max(lo)))
            .sum()
    }

    /// How many intervals start at or before `t` (`partition_point` of their starts).
    #[inline]
    pub fn seek(&mut self, t: Picos) -> usize {
        partition_from(self.merged, &mut self.at, |s| s.start <= t)
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

#[cfg(test)]
mod tests {
    /// The selected median is the sorted one, bit for bit: odd and even counts, repeats, signed
    /// zeros.
    #[test]
    fn median_of_equals_the_sorted_median() {
        use proptest::prelude::*;
        let value = prop_oneof![Just(0.0), Just(-0.0), (0u32..50).prop_map(f64::from), -1e3f64..1e3];
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&proptest::collection::vec(value, 1..40), |mut v| {
                let mut sorted = v.clone();
                sorted.sort_by(f64::total_cmp);
                let n = v.len();
                let want = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
                prop_assert_eq!(super::median_of(&mut v).to_bits(), want.to_bits());
                Ok(())
            })
            .unwrap();
    }

    /// `partition_from` answers as `partition_point` does, whatever the previous answer: queries
    /// in order (short and long strides), out of order, repeated, past either end.
    #[test]
    fn partition_from_equals_partition_point() {
        use proptest::prelude::*;
        let case =
            (proptest::collection::vec(0i64..300, 0..80), proptest::collection::vec(-10i64..320, 0..60), any::<bool>());
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&case, |(mut items, mut asks, in_order)| {
                items.sort_unstable();
                if in_order {
                    asks.sort_unstable();
                }
                let mut cursor = 0;
                for t in asks {
                    let got = crate::partition_from(&items, &mut cursor, |&v| v <= t);
                    prop_assert_eq!(got, items.partition_point(|&v| v <= t), "t {}", t);
                }
                Ok(())
            })
            .unwrap();
    }
}
