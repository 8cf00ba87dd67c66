//! Step anatomy: where each step's time goes, as a partition that sums to the step time exactly.
//!
//! Every instant of a step is given to one class: the class of the innermost op running on the
//! core at that instant, or, when several cores or threads run ops at once, the highest-priority
//! class among them (matmul, then collectives, vector, data formatting, infeed/outfeed, host);
//! instants with no op are idle. Collectives are *exposed* when the core waits on them (a
//! synchronous collective, a `*-done` op, or an open async window with no compute running);
//! the compute that runs inside async windows is counted in its own class and reported apart as
//! *hidden* collective time, which is therefore not part of the sum.

use xlens_xplane::Picos;

use crate::span::Span;

/// Op category of library GEMM custom calls (cuBLAS, hipBLASLt).
pub const GEMM_CUSTOM_CALL: &str = "custom-call gemm";
/// Op category of DNN convolution custom calls (cuDNN, MIOpen).
pub const CONVOLUTION_CUSTOM_CALL: &str = "custom-call convolution";
/// Op category of fused attention custom calls (cuDNN MHA, Transformer Engine, flash attention).
pub const ATTENTION_CUSTOM_CALL: &str = "custom-call attention";

/// What an instant of a step was spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeClass {
    /// Matrix units: convolutions, dots, output/convolution fusions.
    Matmul,
    /// Waiting on a collective (all-reduce, all-gather, reduce-scatter, all-to-all, permute).
    CollectiveExposed,
    /// Vector and elementwise work: loop fusions, reductions, other compute.
    Vector,
    /// Layout changes: copies, transposes, reshapes.
    DataFormatting,
    /// Infeed and outfeed.
    InfeedOutfeed,
    /// The host: host transfers and callbacks, or host work while no op runs.
    Host,
}

/// Classes in priority order (the first active one wins when several run at once).
pub const PRIORITY: [TimeClass; 6] = [
    TimeClass::Matmul,
    TimeClass::CollectiveExposed,
    TimeClass::Vector,
    TimeClass::DataFormatting,
    TimeClass::InfeedOutfeed,
    TimeClass::Host,
];

const COLLECTIVE_PREFIXES: &[&str] =
    &["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "collective-broadcast"];

/// True when an op category or name is a collective (with `-start`/`-done`, fusions included).
pub fn is_collective(category: &str) -> bool {
    COLLECTIVE_PREFIXES.iter().any(|p| category.starts_with(p))
        || matches!(category, "send" | "send-done" | "recv" | "recv-done" | "all-reduce-scatter fusion")
}

/// The class of an op from its XProf category (TPU `hlo_category`, or the HLO category of a
/// CPU/GPU op), or from its TensorFlow op type (CPU-only TensorFlow: matrix products and
/// convolutions are matmul, transposes and reshapes data formatting).
pub fn class_of(category: &str) -> TimeClass {
    match category {
        "infeed" | "outfeed" => TimeClass::InfeedOutfeed,
        "host send" | "host send-done" | "host recv" | "host recv-done" | "host callback" => TimeClass::Host,
        "data formatting" | "copy" | "copy-start" | "copy-done" | "transpose" | "reshape" | "dynamic-reshape"
        | "bitcast" => TimeClass::DataFormatting,
        c if c.contains("convolution")
            || c == "output fusion"
            || c == "dot"
            || c == "matmul fusion"
            || c == GEMM_CUSTOM_CALL
            || c == ATTENTION_CUSTOM_CALL =>
        {
            TimeClass::Matmul
        }
        c if is_collective(c) => TimeClass::CollectiveExposed,
        // TensorFlow op types (the categories of a CPU-only TensorFlow capture's executor ops).
        c if crate::framework_ops::is_tf_matrix_op_type(c) => TimeClass::Matmul,
        "Transpose" | "ConjugateTranspose" | "Reshape" | "Squeeze" | "ExpandDims" | "_MklTranspose" => {
            TimeClass::DataFormatting
        }
        _ => TimeClass::Vector,
    }
}

/// Adds `[start, end)` to a union of intervals built from spans that arrive by start: merged
/// into the last entry when they touch, else appended (the union a sort of every span would
/// give, without collecting them). Empty spans are left out.
///
/// ```
/// use xlens_roofline::{Span, covered, merge_in_order};
/// use xlens_xplane::Picos;
/// let mut union = Vec::new();
/// for (s, e) in [(0, 10), (5, 20), (20, 25), (30, 40)] {
///     merge_in_order(&mut union, Picos(s), Picos(e));
/// }
/// assert_eq!(union, [Span::new(Picos(0), Picos(25)), Span::new(Picos(30), Picos(40))]);
/// assert_eq!(covered(&union, Picos(20), Picos(35)), Picos(10));
/// ```
pub fn merge_in_order(union: &mut Vec<Span>, start: Picos, end: Picos) {
    if start >= end {
        return;
    }
    match union.last_mut() {
        Some(last) if start <= last.end => last.end = last.end.max(end),
        _ => union.push(Span { start, end }),
    }
}

/// `items.partition_point(before)` (`before` holds for a prefix), found from `*cursor`, the
/// answer of the previous call on the same items, which it then becomes. Asked in order (times
/// rising, the usual case) the answer is found by stepping forward from the cursor, one item at
/// a time for a few and then by a search of the rest for a long stride, so a walk over sorted
/// queries reads the items once and an unchanged answer costs one test; asked out of order, by a
/// search from the start.
///
/// ```
/// use xlens_roofline::partition_from;
/// let starts = [1, 3, 5, 7, 9];
/// let mut cursor = 0;
/// assert_eq!(partition_from(&starts, &mut cursor, |&s| s <= 4), 2);
/// assert_eq!(partition_from(&starts, &mut cursor, |&s| s <= 8), 4);
/// assert_eq!(partition_from(&starts, &mut cursor, |&s| s <= 2), 1);
/// ```
#[inline]
pub fn partition_from<T>(items: &[T], cursor: &mut usize, before: impl Fn(&T) -> bool) -> usize {
    /// Items stepped over one by one before the rest is searched.
    const STEPS: usize = 16;
    let mut at = (*cursor).min(items.len());
    if at > 0 && !before(&items[at - 1]) {
        at = items.partition_point(&before);
    } else {
        let near = (at + STEPS).min(items.len());
        while at < near && before(&items[at]) {
            at += 1;
        }
        if at == near {
            at += items[at..].partition_point(&before);
        }
    }
    *cursor = at;
    at
}

/// The length of the part of `[lo, hi)` that a sorted, disjoint union of intervals covers.
pub fn covered(union: &[Span], lo: Picos, hi: Picos) -> Picos {
    covered_after(union, union.partition_point(|s| s.end <= lo), lo, hi)
}

/// [`covered`] for windows asked in order: the first interval that ends after `lo` is found from
/// `*cursor`, the previous call's (see [`partition_from`]), so a walk over windows in start
/// order reads the union once.
///
/// ```
/// use xlens_roofline::{Span, covered_from};
/// use xlens_xplane::Picos;
/// let busy = [Span::new(Picos(0), Picos(10)), Span::new(Picos(20), Picos(30))];
/// let mut cursor = 0;
/// assert_eq!(covered_from(&busy, &mut cursor, Picos(5), Picos(25)), Picos(10));
/// assert_eq!(covered_from(&busy, &mut cursor, Picos(28), Picos(40)), Picos(2));
/// ```
pub fn covered_from(union: &[Span], cursor: &mut usize, lo: Picos, hi: Picos) -> Picos {
    covered_after(union, partition_from(union, cursor, |s| s.end <= lo), lo, hi)
}

/// The part of `[lo, hi)` the intervals of `union` from `from` on cover.
fn covered_after(union: &[Span], from: usize, lo: Picos, hi: Picos) -> Picos {
    union[from..].iter().take_while(|s| s.start < hi).map(|s| s.end.min(hi).saturating_sub(s.start.max(lo))).sum()
}

/// A half-open time interval `[start, end)` with a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Start.
    pub start: Picos,
    /// End (exclusive).
    pub end: Picos,
    /// What runs.
    pub class: TimeClass,
}

/// The anatomy of one step. All fields but `collective_hidden` sum to `step_time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StepAnatomy {
    /// The step time being partitioned.
    pub step_time: Picos,
    /// Matmul / convolution.
    pub matmul: Picos,
    /// Exposed collective time.
    pub collective_exposed: Picos,
    /// Compute time that ran under an open async collective (not part of the sum).
    pub collective_hidden: Picos,
    /// Vector / elementwise.
    pub vector: Picos,
    /// Data formatting.
    pub data_formatting: Picos,
    /// Infeed and outfeed.
    pub infeed_outfeed: Picos,
    /// Host.
    pub host: Picos,
    /// No op and no host work.
    pub idle: Picos,
}

impl StepAnatomy {
    /// Sum of the partition (equals `step_time`).
    pub fn sum(&self) -> Picos {
        self.matmul
            + self.collective_exposed
            + self.vector
            + self.data_formatting
            + self.infeed_outfeed
            + self.host
            + self.idle
    }

    /// Time the device computes: matmul, vector and data-formatting work (no communication,
    /// no waiting).
    pub fn compute(&self) -> Picos {
        self.matmul + self.vector + self.data_formatting
    }

    pub(crate) fn add(&mut self, class: TimeClass, t: Picos) {
        match class {
            TimeClass::Matmul => self.matmul += t,
            TimeClass::CollectiveExposed => self.collective_exposed += t,
            TimeClass::Vector => self.vector += t,
            TimeClass::DataFormatting => self.data_formatting += t,
            TimeClass::InfeedOutfeed => self.infeed_outfeed += t,
            TimeClass::Host => self.host += t,
        }
    }

    /// Time of one class.
    pub fn get(&self, class: TimeClass) -> Picos {
        match class {
            TimeClass::Matmul => self.matmul,
            TimeClass::CollectiveExposed => self.collective_exposed,
            TimeClass::Vector => self.vector,
            TimeClass::DataFormatting => self.data_formatting,
            TimeClass::InfeedOutfeed => self.infeed_outfeed,
            TimeClass::Host => self.host,
        }
    }

    /// The mean of several partitions of the same step (one per core), still summing exactly:
    /// classes are averaged (rounded down) and idle takes the remainder.
    pub fn mean(parts: &[StepAnatomy]) -> StepAnatomy {
        let n = parts.len().max(1) as i128;
        // Summed in i128: hostile step times near i64::MAX must not overflow.
        let avg = |f: fn(&StepAnatomy) -> Picos| {
            let sum: i128 = parts.iter().map(|p| f(p).0 as i128).sum();
            Picos((sum / n) as i64)
        };
        let mut out = StepAnatomy {
            step_time: avg(|p| p.step_time),
            matmul: avg(|p| p.matmul),
            collective_exposed: avg(|p| p.collective_exposed),
            collective_hidden: avg(|p| p.collective_hidden),
            vector: avg(|p| p.vector),
            data_formatting: avg(|p| p.data_formatting),
            infeed_outfeed: avg(|p| p.infeed_outfeed),
            host: avg(|p| p.host),
            idle: Picos::ZERO,
        };
        out.idle = out.step_time.saturating_sub(out.sum());
        out
    }
}

/// Partitions `[lo, lo + step_time)`: each instant goes to the highest-priority class among the
/// intervals covering it, else to idle. `windows` are open async collectives: uncovered instants
/// inside them are exposed collective time, covered ones add to `collective_hidden`.
pub fn partition(lo: Picos, step_time: Picos, intervals: &[Interval], windows: &[(Picos, Picos)]) -> StepAnatomy {
    if windows.is_empty() && intervals.is_sorted_by_key(|i| i.start) {
        return partition_by_unions(lo, step_time, intervals);
    }
    let hi = lo + step_time;
    // A sweep over the boundaries: the starts in start order and the ends in end order, merged
    // as it goes. Every boundary at an instant is applied before the segment after it is
    // measured, so boundaries at the same instant may come in any order. Intervals usually come
    // in start order (the starts then need no sort) and their ends in a few sorted runs (one
    // per thread or core), which the stable sort merges rather than sorts.
    const WINDOW: u8 = u8::MAX;
    let rank = |c: TimeClass| PRIORITY.iter().position(|p| *p == c).unwrap_or(0) as u8;
    let mut starts: Vec<(Picos, u8)> = Vec::with_capacity(intervals.len() + windows.len());
    let mut ends: Vec<(Picos, u8)> = Vec::with_capacity(intervals.len() + windows.len());
    for iv in intervals {
        let (s, e) = (iv.start.max(lo), iv.end.min(hi));
        if s < e {
            let r = rank(iv.class);
            starts.push((s, r));
            ends.push((e, r));
        }
    }
    for &(ws, we) in windows {
        let (s, e) = (ws.max(lo), we.min(hi));
        if s < e {
            starts.push((s, WINDOW));
            ends.push((e, WINDOW));
        }
    }
    for edges in [&mut starts, &mut ends] {
        if !edges.is_sorted_by_key(|e| e.0) {
            edges.sort_by_key(|e| e.0);
        }
    }
    let mut active = [0i32; PRIORITY.len()];
    let mut open_windows = 0i32;
    let mut out = StepAnatomy { step_time, ..StepAnatomy::default() };
    let (mut t, mut i, mut j) = (lo, 0, 0);
    while t < hi {
        // Apply every boundary at time t.
        while let Some(&(_, r)) = starts.get(i).filter(|e| e.0 <= t) {
            match active.get_mut(r as usize) {
                Some(n) => *n += 1,
                None => open_windows += 1,
            }
            i += 1;
        }
        while let Some(&(_, r)) = ends.get(j).filter(|e| e.0 <= t) {
            match active.get_mut(r as usize) {
                Some(n) => *n -= 1,
                None => open_windows -= 1,
            }
            j += 1;
        }
        let next = starts.get(i).map_or(hi, |e| e.0).min(ends.get(j).map_or(hi, |e| e.0)).min(hi);
        credit(&mut out, &active, open_windows, next - t);
        t = next;
    }
    out
}

/// [`partition`] of intervals in start order, without async windows: the time of the class of
/// priority rank `k` is the length of the union of the classes of ranks up to `k` less that of
/// the ranks before it, and each union is merged as the starts come, in one pass with nothing
/// sorted or allocated (a host anatomy partitions every step of a capture this way).
fn partition_by_unions(lo: Picos, step_time: Picos, intervals: &[Interval]) -> StepAnatomy {
    let hi = lo + step_time;
    // Per rank: the union of the intervals of that rank and the ones before it, as the length
    // of its closed runs and the run still open.
    let mut closed = [Picos::ZERO; PRIORITY.len()];
    let mut open = [(lo, lo); PRIORITY.len()];
    for iv in intervals {
        let (s, e) = (iv.start.max(lo), iv.end.min(hi));
        if s >= e {
            continue;
        }
        let rank = PRIORITY.iter().position(|p| *p == iv.class).unwrap_or(0);
        for (closed, (run_start, run_end)) in closed[rank..].iter_mut().zip(&mut open[rank..]) {
            if s > *run_end {
                *closed += *run_end - *run_start;
                (*run_start, *run_end) = (s, e);
            } else if e > *run_end {
                *run_end = e;
            }
        }
    }
    let mut out = StepAnatomy { step_time, ..StepAnatomy::default() };
    let mut before = Picos::ZERO;
    for ((class, closed), (run_start, run_end)) in PRIORITY.iter().zip(closed).zip(open) {
        let union = closed + (run_end - run_start);
        out.add(*class, union - before);
        before = union;
    }
    out.idle = step_time.max(Picos::ZERO) - before;
    out
}

/// Gives `len` of a step to the highest-priority class active (`active` counts the open
/// intervals of each class, in [`PRIORITY`] order), else to idle; inside an open async window
/// uncovered time is exposed collective time and covered time also counts as hidden.
fn credit(out: &mut StepAnatomy, active: &[i32; PRIORITY.len()], open_windows: i32, len: Picos) {
    match PRIORITY.iter().zip(active).find(|(_, n)| **n > 0) {
        Some((&class, _)) => {
            out.add(class, len);
            if open_windows > 0 && class != TimeClass::CollectiveExposed {
                out.collective_hidden += len;
            }
        }
        None if open_windows > 0 => out.collective_exposed += len,
        None => out.idle += len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep as first written (every boundary in one list, sorted): the reference for
    /// [`partition`].
    fn partition_by_sorting_edges(
        lo: Picos,
        step_time: Picos,
        intervals: &[Interval],
        windows: &[(Picos, Picos)],
    ) -> StepAnatomy {
        let hi = lo + step_time;
        // Boundary sweep: +1/-1 per class, and per window.
        let mut edges: Vec<(Picos, i32, Option<TimeClass>)> = Vec::with_capacity(2 * (intervals.len() + windows.len()));
        for iv in intervals {
            let (s, e) = (iv.start.max(lo), iv.end.min(hi));
            if s < e {
                edges.push((s, 1, Some(iv.class)));
                edges.push((e, -1, Some(iv.class)));
            }
        }
        for &(ws, we) in windows {
            let (s, e) = (ws.max(lo), we.min(hi));
            if s < e {
                edges.push((s, 1, None));
                edges.push((e, -1, None));
            }
        }
        edges.sort_by_key(|&(t, d, _)| (t, d));
        let mut active = [0i32; 6];
        let mut open_windows = 0i32;
        let mut out = StepAnatomy { step_time, ..StepAnatomy::default() };
        let mut t = lo;
        let mut i = 0;
        while t < hi {
            // Apply every edge at time t.
            while i < edges.len() && edges[i].0 <= t {
                let (_, d, class) = edges[i];
                match class {
                    Some(c) => active[PRIORITY.iter().position(|p| *p == c).unwrap_or(0)] += d,
                    None => open_windows += d,
                }
                i += 1;
            }
            let next = if i < edges.len() { edges[i].0.min(hi) } else { hi };
            credit(&mut out, &active, open_windows, next - t);
            t = next;
        }
        out
    }

    fn iv(s: i64, e: i64, class: TimeClass) -> Interval {
        Interval { start: Picos(s), end: Picos(e), class }
    }

    /// The merged sweep equals sorting every boundary: random intervals of every class, in and
    /// out of start order, nested, overlapping, touching, clipped at the step's edges, with
    /// async windows.
    #[test]
    fn partition_equals_the_sorted_sweep() {
        use proptest::prelude::*;
        let class = proptest::sample::select(PRIORITY.to_vec());
        let interval = (-20i64..220, 0i64..60, class).prop_map(|(s, len, class)| iv(s, s + len, class));
        let case = (
            proptest::collection::vec(interval, 0..40),
            any::<bool>(),
            // No window in half the cases (the one-pass path for intervals in start order).
            proptest::collection::vec((-20i64..220, 0i64..80), 0..4)
                .prop_flat_map(|w| (Just(w), any::<bool>()).prop_map(|(w, none)| if none { Vec::new() } else { w })),
            0i64..50,
            0i64..200,
        );
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        runner
            .run(&case, |(mut ivs, in_order, windows, lo, len)| {
                if in_order {
                    ivs.sort_by_key(|i| i.start);
                }
                let windows: Vec<(Picos, Picos)> = windows.iter().map(|&(s, l)| (Picos(s), Picos(s + l))).collect();
                let got = partition(Picos(lo), Picos(len), &ivs, &windows);
                prop_assert_eq!(got, partition_by_sorting_edges(Picos(lo), Picos(len), &ivs, &windows));
                prop_assert_eq!(got.sum(), Picos(len));
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn partition_sums_to_the_step_and_prefers_matmul() {
        let ivs = [
            iv(0, 10, TimeClass::Vector),
            iv(5, 20, TimeClass::Matmul),
            iv(30, 40, TimeClass::DataFormatting),
            iv(35, 45, TimeClass::Host),
        ];
        let a = partition(Picos(0), Picos(50), &ivs, &[]);
        assert_eq!(a.sum(), Picos(50));
        assert_eq!(
            (a.vector, a.matmul, a.data_formatting, a.host, a.idle),
            (Picos(5), Picos(15), Picos(10), Picos(5), Picos(15))
        );
    }

    #[test]
    fn async_windows_split_exposed_and_hidden() {
        // Window 10..30; compute covers 10..18; nothing 18..30.
        let a = partition(Picos(0), Picos(40), &[iv(10, 18, TimeClass::Vector)], &[(Picos(10), Picos(30))]);
        assert_eq!(
            (a.collective_exposed, a.collective_hidden, a.vector, a.idle),
            (Picos(12), Picos(8), Picos(8), Picos(20))
        );
        assert_eq!(a.sum(), Picos(40));
    }

    #[test]
    fn intervals_outside_the_step_are_clipped() {
        let a =
            partition(Picos(100), Picos(10), &[iv(0, 105, TimeClass::Matmul), iv(108, 200, TimeClass::Vector)], &[]);
        assert_eq!((a.matmul, a.idle, a.vector), (Picos(5), Picos(3), Picos(2)));
    }

    #[test]
    fn classes_from_categories() {
        assert_eq!(class_of("convolution fusion"), TimeClass::Matmul);
        assert_eq!(class_of("output fusion"), TimeClass::Matmul);
        assert_eq!(class_of("all-gather"), TimeClass::CollectiveExposed);
        assert_eq!(class_of("all-reduce fusion"), TimeClass::CollectiveExposed);
        assert_eq!(class_of("data formatting"), TimeClass::DataFormatting);
        assert_eq!(class_of("infeed"), TimeClass::InfeedOutfeed);
        assert_eq!(class_of("loop fusion"), TimeClass::Vector);
        assert_eq!(class_of("host send"), TimeClass::Host);
    }

    #[test]
    fn mean_keeps_the_sum_exact() {
        let a = partition(Picos(0), Picos(7), &[iv(0, 3, TimeClass::Matmul)], &[]);
        let b = partition(Picos(0), Picos(7), &[iv(0, 4, TimeClass::Matmul)], &[]);
        let m = StepAnatomy::mean(&[a, b]);
        assert_eq!(m.sum(), m.step_time);
        assert_eq!(m.matmul, Picos(3));
    }
}

/// Splits nested op spans into non-overlapping innermost segments (each instant belongs to the
/// deepest op covering it). `ops` must be sorted as [`crate::device::nest`] sorts them.
#[cfg(test)]
pub(crate) fn innermost_segments(ops: &[(Picos, Picos, TimeClass)]) -> Vec<Interval> {
    let mut out = Vec::with_capacity(ops.len() * 2);
    let mut segments = InnermostSegments::default();
    for &(start, end, class) in ops {
        segments.push(start, end, class, &mut |s| out.push(s));
    }
    segments.finish(&mut |s| out.push(s));
    out
}

/// Splits nested op spans fed one at a time in timeline order (by start, enclosing ops first)
/// into non-overlapping innermost segments, each instant going to the deepest op covering it,
/// and hands each segment on as soon as it is known: nothing per op is kept but the open ops.
///
/// ```
/// use xlens_roofline::{InnermostSegments, Interval, TimeClass};
/// use xlens_xplane::Picos;
/// let mut segments = InnermostSegments::default();
/// let mut out: Vec<Interval> = Vec::new();
/// // A vector op from 0 to 100 with a matmul inside it from 10 to 20.
/// segments.push(Picos(0), Picos(100), TimeClass::Vector, &mut |s| out.push(s));
/// segments.push(Picos(10), Picos(20), TimeClass::Matmul, &mut |s| out.push(s));
/// segments.finish(&mut |s| out.push(s));
/// let got: Vec<(i64, i64, TimeClass)> = out.iter().map(|s| (s.start.0, s.end.0, s.class)).collect();
/// assert_eq!(got, [(0, 10, TimeClass::Vector), (10, 20, TimeClass::Matmul), (20, 100, TimeClass::Vector)]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct InnermostSegments {
    /// Open ops: (end, class).
    stack: Vec<(Picos, TimeClass)>,
    /// Where the next segment starts; `None` before the first op.
    cursor: Option<Picos>,
}

impl InnermostSegments {
    /// Feeds the next op; the segments it completes go to `f`.
    pub fn push(&mut self, start: Picos, end: Picos, class: TimeClass, f: &mut impl FnMut(Interval)) {
        let mut cursor = self.cursor.unwrap_or(Picos(i64::MIN));
        // Close every op that ends before this one starts.
        while let Some(&(top_end, top_class)) = self.stack.last() {
            if top_end > start {
                break;
            }
            emit(cursor, top_end, top_class, f);
            cursor = cursor.max(top_end);
            self.stack.pop();
        }
        if let Some(&(_, parent_class)) = self.stack.last() {
            emit(cursor, start, parent_class, f);
        }
        self.cursor = Some(start);
        self.stack.push((end.max(start), class));
    }

    /// True when every open op ends at or before `t`: an op starting at `t` finds nothing open,
    /// so the segments from `t` on do not depend on the ops fed before it.
    pub fn is_closed_by(&self, t: Picos) -> bool {
        self.stack.iter().all(|&(end, _)| end <= t)
    }

    /// Closes the ops still open; their segments go to `f`.
    pub fn finish(&mut self, f: &mut impl FnMut(Interval)) {
        let mut cursor = self.cursor.unwrap_or(Picos(i64::MIN));
        while let Some((top_end, top_class)) = self.stack.pop() {
            emit(cursor, top_end, top_class, f);
            cursor = cursor.max(top_end);
        }
        self.cursor = Some(cursor);
    }
}

fn emit(from: Picos, to: Picos, class: TimeClass, f: &mut impl FnMut(Interval)) {
    if from < to {
        f(Interval { start: from, end: to, class });
    }
}

#[cfg(test)]
mod segment_tests {
    use super::*;

    #[test]
    fn innermost_segments_cover_parents_around_children() {
        let v = TimeClass::Vector;
        let m = TimeClass::Matmul;
        let d = TimeClass::DataFormatting;
        // parent 0..100 (vector) with children 10..20 (matmul) and 50..60 (data formatting).
        let segs =
            innermost_segments(&[(Picos(0), Picos(100), v), (Picos(10), Picos(20), m), (Picos(50), Picos(60), d)]);
        let got: Vec<(i64, i64, TimeClass)> = segs.iter().map(|s| (s.start.0, s.end.0, s.class)).collect();
        assert_eq!(got, vec![(0, 10, v), (10, 20, m), (20, 50, v), (50, 60, d), (60, 100, v)]);
    }
}
