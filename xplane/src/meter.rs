//! [`WalkMeter`], the count of event bytes walked that a space shares with its planes. Its own
//! module, below both `plane` (each plane adds to it) and `space` (which makes it).

/// How many bytes of a space's events have been walked at least once (each line's bytes counted
/// on its first walk, in steps of 256 KiB): how far the first pass over a large host has come,
/// for a progress line. Cloned handles read the same count, from any thread.
///
/// ```
/// use xlens_xplane::{Space, SpaceBuilder};
/// let mut b = SpaceBuilder::default();
/// {
///     let mut plane = b.plane(1, "/host:CPU");
///     let m = plane.event_metadata("op");
///     let mut line = plane.line(1, "main", 0);
///     for i in 0..100 {
///         line.event(m, i * 10, 10);
///     }
/// }
/// let space = Space::parse(b.finish().into())?;
/// let meter = space.walk_meter();
/// assert_eq!(meter.bytes(), 0);
/// let (plane, line) = (&space.planes()[0], &space.planes()[0].lines()[0]);
/// assert_eq!(line.events(plane).count(), 100);
/// let once = meter.bytes();
/// assert!(once > 0 && once <= space.encoded_len() as u64);
/// assert_eq!(line.events(plane).count(), 100);
/// assert_eq!(meter.bytes(), once, "a second walk is not counted again");
/// Ok::<(), xlens_xplane::Error>(())
/// ```
// Performance machinery for the workspace's crates (hidden from the docs): not a stable API.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct WalkMeter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl WalkMeter {
    /// Bytes walked so far.
    pub fn bytes(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn add(&self, bytes: u64) {
        self.0.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }
}
