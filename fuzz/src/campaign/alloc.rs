//! The campaign's counting allocator is the test kit's ([`xlens_testkit::alloc::CountingAlloc`]):
//! a binary installs it with `#[global_allocator] static A: CountingAlloc = CountingAlloc::new();`
//! and hands it to [`super::oracle::check`] as its [`PeakProbe`].

pub use xlens_testkit::alloc::CountingAlloc;

use super::oracle::PeakProbe;

impl PeakProbe for CountingAlloc {
    fn reset(&self) {
        CountingAlloc::reset(self);
    }

    fn peak(&self) -> usize {
        CountingAlloc::peak(self)
    }
}
