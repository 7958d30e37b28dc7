//! What the files of the workspace look like at one moment, for capturing what a command changed.
//!
//! [`Workspace::list_files`] is the search walk (same ignore rules, same skipped directories,
//! symlinks never followed) with one `statx`-free `fstat` per regular file through an `O_PATH`
//! descriptor opened beneath the root: no file is opened for reading. [`Workspace::snapshot_file`]
//! then reads (or, above a limit, only hashes) the files whose stamp changed, through the same
//! boundary-checked open as every read. The caller keeps the previous listing and compares
//! stamps, so an unchanged tree costs one walk and no reads.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags, Stat};
use sha2::{Digest, Sha256};

use super::{OpenRefusal, Workspace, file_size, openat_beneath, permission_bits};
use crate::error::FsError;
use crate::tools::walk::{Walk, Walked};

/// What the stat of a file says. Two equal stamps are taken to mean the same content: a writer
/// changes the modification or change time (nanoseconds), a replacement changes the inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Device and inode.
    pub device: u64,
    /// Inode number.
    pub inode: u64,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Modification time (seconds, nanoseconds).
    pub modified: (i64, i64),
    /// Change time (seconds, nanoseconds): moves on `chmod` and on a rename over the file.
    pub changed: (i64, i64),
}

impl FileStamp {
    fn of(stat: &Stat) -> FileStamp {
        FileStamp {
            device: stat.st_dev,
            inode: stat.st_ino,
            size: file_size(stat),
            mode: permission_bits(stat),
            modified: (stat.st_mtime, stat.st_mtime_nsec as i64),
            changed: (stat.st_ctime, stat.st_ctime_nsec as i64),
        }
    }
}

/// Every regular file the walk visits, by workspace-relative path.
#[derive(Debug, Clone, Default)]
pub struct FileListing {
    /// Path → stamp, sorted by path.
    pub files: BTreeMap<String, FileStamp>,
    /// Regular files whose names are not UTF-8 (not listed).
    pub skipped_non_utf8: u64,
}

/// A file's content as read once through the handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSnapshot {
    /// The stamp of the descriptor that was read.
    pub stamp: FileStamp,
    /// SHA-256 of the content.
    pub sha256: [u8; 32],
    /// The content, `None` when the file was larger than the limit (hashed only).
    pub content: Option<Vec<u8>>,
}

impl Workspace {
    /// Every regular file the search walk would visit (the same ignore files and skipped
    /// directories: `.git`, `node_modules`, `target`, …), with its stamp. Symlinks, special
    /// files and entries that vanish during the walk are left out.
    pub fn list_files(&self) -> FileListing {
        let mut listing = FileListing::default();
        let Ok(root) = self.resolve(".") else {
            return listing;
        };
        let mut walk = Walk::new(self, &root);
        for walked in walk.by_ref() {
            let Walked::File(file) = walked else {
                continue;
            };
            let flags = OFlags::PATH | OFlags::NOFOLLOW;
            let Ok(probe) =
                openat_beneath(self.root_fd.as_fd(), &file.relative, flags, Mode::empty())
            else {
                continue;
            };
            let Ok(stat) = rustix::fs::fstat(&probe) else {
                continue;
            };
            if super::is_regular(&stat) {
                listing.files.insert(file.relative, FileStamp::of(&stat));
            }
        }
        listing.skipped_non_utf8 = walk.skipped_non_utf8;
        listing
    }

    /// Reads the regular file at `relative` (a path [`Workspace::list_files`] returned) through
    /// the boundary-checked open: its content when it has at most `content_limit` bytes, else its
    /// hash only. `Ok(None)` when it is gone or no longer a regular file.
    pub fn snapshot_file(
        &self,
        relative: &str,
        content_limit: u64,
    ) -> Result<Option<FileSnapshot>, FsError> {
        let path = self.resolve(relative)?;
        let (mut file, stat) = match self.open_regular_beneath(path.open_arg()) {
            Ok(opened) => opened,
            Err(OpenRefusal::NotRegular(_)) => return Ok(None),
            Err(OpenRefusal::Errno(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR)) => {
                return Ok(None);
            }
            Err(OpenRefusal::Errno(errno)) => return Err(super::open_error(errno, &path)),
        };
        let stamp = FileStamp::of(&stat);
        if stamp.size > content_limit {
            let sha256 = super::sha256_of(&mut file, &path)?;
            return Ok(Some(FileSnapshot {
                stamp,
                sha256,
                content: None,
            }));
        }
        let mut content = Vec::with_capacity(usize::try_from(stamp.size).unwrap_or(0));
        (&mut file)
            .take(content_limit.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(|source| super::io_error("read", &path, source))?;
        let sha256 = Sha256::digest(&content).into();
        // A file that grew past the limit while it was read keeps its hash only.
        let content = (content.len() as u64 <= content_limit).then_some(content);
        Ok(Some(FileSnapshot {
            stamp,
            sha256,
            content,
        }))
    }
}
