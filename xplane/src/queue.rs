//! Uneven jobs run from one queue: [`in_priority_order`].

/// Runs `run` on every item on the rayon pool and returns the results in the items' order. The
/// jobs are queued in the order of `priority` (lowest first, ties in the items' order) and each
/// is taken by whichever worker is free next (a FIFO scope), so the longest jobs, queued first,
/// do not start last on a busy worker while another runs out of work. Used for a space's planes
/// (largest first) and for a host's detectors (the long-running ones first).
///
/// ```
/// use xlens_xplane::queue::in_priority_order;
/// let sizes = [3, 10, 1, 7];
/// let doubled = in_priority_order(&sizes, |_, &s| std::cmp::Reverse(s), |_, &s| s * 2);
/// assert_eq!(doubled, [6, 20, 2, 14]);
/// ```
pub fn in_priority_order<T, K, R>(
    items: &[T],
    priority: impl Fn(usize, &T) -> K,
    run: impl Fn(usize, &T) -> R + Sync,
) -> Vec<R>
where
    T: Sync,
    K: Ord,
    R: Send,
{
    let mut slots: Vec<Option<R>> = items.iter().map(|_| None).collect();
    let mut queue: Vec<(&mut Option<R>, usize)> = slots.iter_mut().zip(0..).collect();
    queue.sort_by_cached_key(|&(_, index)| priority(index, &items[index]));
    let run = &run;
    rayon::scope_fifo(|scope| {
        for (slot, index) in queue {
            let item = &items[index];
            scope.spawn_fifo(move |_| *slot = Some(run(index, item)));
        }
    });
    // The scope returns once every job has filled its slot.
    slots.into_iter().flatten().collect()
}
