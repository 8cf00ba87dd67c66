//! Chains of one line's events (the outermost compile events of a thread, the host work directly
//! inside step markers), walked in runs on every worker when the line is long.

use rayon::prelude::*;
use xlens_xplane::{EventIter, Line, Picos, Plane};

/// Walks `line` in runs on every worker with a chain walk and joins the runs' chains into the
/// one a single walk gives.
///
/// `walk(events, last_end)` keeps a chain: every event it keeps starts at or after the end of
/// the last one kept (`last_end` before the walk, `None` at the line's start), and whether it
/// keeps an event depends on that end and on the event alone. `span` gives a kept item's start
/// and end. Each run is walked from no event kept; joined in order, a run's chain counts from
/// its first item that starts at or after the end of the chain so far. That is what one walk
/// gives unless an item the run kept before that point reaches past that end (it hid events one
/// walk keeps): such a run is walked again from the true end. The first error, in line order,
/// is the one a single walk meets first.
///
pub(crate) fn chain_in_runs<'a, T: Send>(
    plane: &'a Plane,
    line: &'a Line,
    walk: impl Fn(EventIter<'a>, Option<Picos>) -> xlens_xplane::Result<Vec<T>> + Sync,
    span: impl Fn(&T) -> (Picos, Picos),
) -> xlens_xplane::Result<Vec<T>> {
    let runs = line.event_parts(plane, rayon::current_num_threads());
    let walked: Vec<xlens_xplane::Result<Vec<T>>> =
        runs.par_iter().with_max_len(1).map(|run| walk(run.clone(), None)).collect();
    let mut chain: Vec<T> = Vec::new();
    let mut last_end: Option<Picos> = None;
    for (run, kept) in runs.iter().zip(walked) {
        let mut kept = kept?;
        let joined = match last_end {
            None => kept,
            Some(l) if kept.iter().map(&span).filter(|&(s, _)| s < l).all(|(_, e)| e <= l) => {
                let from = kept.iter().position(|t| span(t).0 >= l).unwrap_or(kept.len());
                kept.split_off(from)
            }
            Some(l) => walk(run.clone(), Some(l))?,
        };
        if let Some(last) = joined.last() {
            last_end = Some(span(last).1);
        }
        chain.extend(joined);
    }
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use xlens_xplane::{Picos, Space, SpaceBuilder};

    /// The outermost events of a walk that starts after `last_end`.
    fn outermost(
        events: xlens_xplane::EventIter<'_>,
        mut last_end: Option<Picos>,
    ) -> xlens_xplane::Result<Vec<(Picos, Picos)>> {
        let mut kept = Vec::new();
        for ev in events {
            let ev = ev?;
            if last_end.is_none_or(|end| ev.start() >= end) {
                kept.push((ev.start(), ev.end()));
                last_end = Some(ev.end());
            }
        }
        Ok(kept)
    }

    /// Runs joined give one walk's chain, whatever the workers, with items that reach past the
    /// cuts (a call every 100 ps with one nested in it, and a long one now and then).
    #[test]
    fn runs_joined_equal_one_walk() {
        let mut b = SpaceBuilder::default();
        {
            let mut plane = b.plane(1, "/host:CPU");
            let call = plane.event_metadata("call");
            let mut line = plane.line(1, "python", 0);
            for k in 0..300_000 {
                let long = if k % 10_007 == 0 { 50_000 } else { 50 };
                line.event(call, k * 100, long);
                line.event(call, k * 100 + 10, 20);
            }
        }
        let space = Space::parse(b.finish().into()).unwrap();
        let plane = &space.planes()[0];
        let line = &plane.lines()[0];
        let one = outermost(line.events(plane), None).unwrap();
        assert!(one.len() > 280_000 && one.len() < 300_000);
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let runs = pool.install(|| super::chain_in_runs(plane, line, outermost, |&span| span)).unwrap();
            assert_eq!(runs, one, "{threads} workers");
        }
    }
}
