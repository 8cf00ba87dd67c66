//! A counting allocator for tests and tools that measure memory: it wraps the system allocator
//! and keeps the heap's current size and its peak since a measure started. Libraries install
//! nothing; a test binary or tool does, with
//! `#[global_allocator] static A: CountingAlloc = CountingAlloc::new();`.
//!
//! ```
//! use xlens_testkit::alloc::CountingAlloc;
//! // Not installed here, so it counts nothing; installed, `peak_of` measures a closure.
//! static A: CountingAlloc = CountingAlloc::new();
//! let (v, peak) = A.peak_of(|| vec![0u8; 16]);
//! assert_eq!((v.len(), peak), (16, 0));
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes it holds (see the module documentation).
#[derive(Debug)]
pub struct CountingAlloc {
    current: AtomicUsize,
    peak: AtomicUsize,
    base: AtomicUsize,
}

impl CountingAlloc {
    /// A counter at zero.
    pub const fn new() -> CountingAlloc {
        CountingAlloc { current: AtomicUsize::new(0), peak: AtomicUsize::new(0), base: AtomicUsize::new(0) }
    }

    /// The bytes allocated now.
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// Starts a measure: the peak is counted from the bytes allocated now.
    pub fn reset(&self) {
        let now = self.current.load(Ordering::Relaxed);
        self.base.store(now, Ordering::Relaxed);
        self.peak.store(now, Ordering::Relaxed);
    }

    /// The most bytes held at once since [`reset`](Self::reset), beyond what was held then.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed).saturating_sub(self.base.load(Ordering::Relaxed))
    }

    /// Runs `f` and returns its result with the peak heap it added (what it returns included).
    /// Measures of one binary must take turns: the counters are the process's.
    pub fn peak_of<T>(&self, f: impl FnOnce() -> T) -> (T, usize) {
        self.reset();
        let out = f();
        (out, self.peak())
    }

    fn grew(&self, by: usize) {
        let now = self.current.fetch_add(by, Ordering::Relaxed) + by;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn shrank(&self, by: usize) {
        self.current.fetch_sub(by, Ordering::Relaxed);
    }
}

impl Default for CountingAlloc {
    fn default() -> CountingAlloc {
        CountingAlloc::new()
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (through this wrapper).
        unsafe { System.dealloc(ptr, layout) };
        self.shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, and `new_size` is the caller's, checked by `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                self.grew(new_size - layout.size());
            } else {
                self.shrank(layout.size() - new_size);
            }
        }
        p
    }
}
