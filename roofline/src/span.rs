//! [`Span`]: a half-open time span `[start, end)`, the unit of the interval helpers (unions,
//! coverage, cursors) in place of bare `(start, end)` pairs.

use xlens_xplane::Picos;

/// A half-open time span `[start, end)` on the profile clock.
///
/// ```
/// use xlens_roofline::Span;
/// use xlens_xplane::Picos;
/// let a = Span::new(Picos(10), Picos(30));
/// assert_eq!(a.duration(), Picos(20));
/// assert_eq!(a.overlap(Span::new(Picos(25), Picos(40))), Picos(5));
/// assert!(a.contains(Picos(10)) && !a.contains(Picos(30)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// Start.
    pub start: Picos,
    /// End (exclusive).
    pub end: Picos,
}

impl Span {
    /// The span `[start, end)`.
    #[inline]
    pub const fn new(start: Picos, end: Picos) -> Span {
        Span { start, end }
    }

    /// Its length: `end - start`, 0 when it ends before it starts.
    #[inline]
    pub fn duration(self) -> Picos {
        self.end.saturating_sub(self.start).max(Picos::ZERO)
    }

    /// True when it holds no time (`end <= start`).
    #[inline]
    pub fn is_empty(self) -> bool {
        self.end <= self.start
    }

    /// True when `t` lies in `[start, end)`.
    #[inline]
    pub fn contains(self, t: Picos) -> bool {
        self.start <= t && t < self.end
    }

    /// The time it shares with `other` (0 when they do not meet).
    #[inline]
    pub fn overlap(self, other: Span) -> Picos {
        self.end.min(other.end).saturating_sub(self.start.max(other.start)).max(Picos::ZERO)
    }
}

impl From<(Picos, Picos)> for Span {
    #[inline]
    fn from((start, end): (Picos, Picos)) -> Span {
        Span { start, end }
    }
}

/// Merges `[start, end)` intervals into a sorted, disjoint union, in place.
pub fn union(mut intervals: Vec<Span>) -> Vec<Span> {
    intervals.retain(|iv| iv.start < iv.end);
    // By start alone: which of two intervals with one start comes first does not change the
    // union. The stable sort merges the sorted runs that a device's lines give, one per line.
    if !intervals.is_sorted_by_key(|iv| iv.start) {
        intervals.sort_by_key(|iv| iv.start);
    }
    let mut kept = 0usize;
    for i in 0..intervals.len() {
        let iv = intervals[i];
        match kept.checked_sub(1).map(|k| &mut intervals[k]) {
            Some(last) if iv.start <= last.end => last.end = last.end.max(iv.end),
            _ => {
                intervals[kept] = iv;
                kept += 1;
            }
        }
    }
    intervals.truncate(kept);
    intervals
}
