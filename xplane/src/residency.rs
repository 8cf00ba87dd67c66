//! Handing the pages of a mapped profile back to the OS once a pass has read them.
//!
//! [`crate::open_space`] maps the file instead of reading it, and every page a pass reads stays in
//! the process's resident set (RSS) until the mapping goes away. On a CPU capture the decoded
//! tables are small next to the file, so the file's own pages would dominate the peak. A
//! [`FileMap`] lets a pass that reads bytes once release them behind it (the host-thread plane
//! once parsed, the host-op walk): the pages stay in the kernel's page cache, and a later read
//! of the same bytes maps them again with a minor fault. Nothing is copied and no byte changes.
//! Device planes are left mapped: several passes walk their op lines, and mapping the pages
//! again for each would cost more time than the memory is worth.

use std::sync::Arc;

/// The granularity of a release: ranges are rounded inward to it, so a release never reaches
/// into the bytes just outside the range. 64 KiB is a multiple of every common page size.
pub(crate) const RELEASE_ALIGN: usize = 64 * 1024;

/// How many bytes a streaming walk reads between two releases.
pub(crate) const RELEASE_CHUNK_BYTES: usize = 8 * 1024 * 1024;

/// A read-only, shared file mapping whose resident pages can be released.
#[derive(Clone)]
pub(crate) struct FileMap(Arc<memmap2::Mmap>);

impl std::fmt::Debug for FileMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMap").field("len", &self.0.len()).finish()
    }
}

/// Lends the mapping to [`bytes::Bytes`] while [`FileMap`] keeps a handle to release pages.
struct Owner(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl FileMap {
    pub(crate) fn new(map: memmap2::Mmap) -> FileMap {
        FileMap(Arc::new(map))
    }

    /// The whole file as refcounted bytes that share the mapping.
    pub(crate) fn bytes(&self) -> bytes::Bytes {
        bytes::Bytes::from_owner(Owner(self.0.clone()))
    }

    /// Releases the resident pages of `start..end` (file offsets), rounded inward to
    /// [`RELEASE_ALIGN`]. Best effort: a failed or unsupported release changes nothing.
    pub(crate) fn release(&self, start: usize, end: usize) {
        let start = start.next_multiple_of(RELEASE_ALIGN);
        let end = end.min(self.0.len()) / RELEASE_ALIGN * RELEASE_ALIGN;
        if start >= end {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: the mapping is a read-only `MAP_SHARED` mapping of a file (memmap2's
            // `Mmap::map`). For shared file mappings `MADV_DONTNEED` only drops this process's
            // page-table entries: the next access reads the same bytes from the page cache, so
            // borrows into the range stay valid and see unchanged contents. (The zero-fill that
            // makes the advice unsafe in general applies to private and anonymous mappings.)
            #[allow(unsafe_code)]
            let _ = unsafe { self.0.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        }
    }
}
