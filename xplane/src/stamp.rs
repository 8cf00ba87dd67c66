//! A file's stamp: what tells that it changed under a reader (issue 40 case 2), shared by the
//! session that maps files and the space that keeps the stamp of its file.

use std::path::Path;

use crate::error::{Error, ErrorKind, Location, Result};

/// What identifies a file's contents without reading them: its size, modification time and
/// (on Unix) device and inode. A file truncated, appended to, rewritten in place or replaced by
/// another under its name changes its stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    pub(crate) len: u64,
    modified: Option<std::time::SystemTime>,
    inode: (u64, u64),
}

impl FileStamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> FileStamp {
        #[cfg(unix)]
        let inode = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let inode = (0, 0);
        FileStamp { len: meta.len(), modified: meta.modified().ok(), inode }
    }

    /// Fails with [`ErrorKind::FileChanged`] when the file at `path` no longer has this stamp
    /// (or cannot be read).
    pub(crate) fn check(&self, path: &Path) -> Result<()> {
        match std::fs::metadata(path) {
            Ok(meta) if FileStamp::of(&meta) == *self => Ok(()),
            Ok(meta) => Err(changed(path, self.len, meta.len())),
            Err(_) => Err(changed(path, self.len, 0)),
        }
    }
}

/// The error of a file that changed from `was` to `now` bytes while it was read.
#[cold]
pub(crate) fn changed(path: &Path, was: u64, now: u64) -> Error {
    Error::new(ErrorKind::FileChanged { was, now }, Location::default().with_file(path))
}
