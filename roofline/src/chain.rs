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
/// ```
/// use xlens_roofline::chain_in_runs;
/// use xlens_xplane::{Picos, Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut plane = b.plane(1, "/host:CPU");
///     let call = plane.event_metadata("call");
///     let mut line = plane.line(1, "python", 0);
///     for k in 0..300_000 {
///         // A call and one nested in it.
///         line.event(call, k * 100, 50);
///         line.event(call, k * 100 + 10, 20);
///     }
/// }
/// let space = Space::parse(b.finish().into())?;
/// let plane = &space.planes()[0];
/// let line = &plane.lines()[0];
/// // The outermost calls.
/// let outermost = |events: xlens_xplane::EventIter<'_>, mut last_end: Option<Picos>| {
///     let mut kept = Vec::new();
///     for ev in events {
///         let ev = ev?;
///         if last_end.is_none_or(|end| ev.start() >= end) {
///             kept.push((ev.start(), ev.end()));
///             last_end = Some(ev.end());
///         }
///     }
///     Ok(kept)
/// };
/// let chain = chain_in_runs(plane, line, outermost, |&span| span)?;
/// assert_eq!(chain.len(), 300_000);
/// assert_eq!(chain, outermost(line.events(plane), None)?);
/// # Ok::<(), xlens_xplane::Error>(())
/// ```
pub fn chain_in_runs<'a, T: Send>(
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
