//! What the files of the workspace look like at one moment, for capturing what a command changed.
//!
//! [`Workspace::list_files`] is the search walk (same ignore rules, same skipped directories,
//! symlinks never followed) for *which* files are captured, and one `lstat` per entry of the
//! whole tree, under each directory's descriptor opened beneath the root, for their stamps: no
//! file is opened for reading. Entries the walk leaves out are listed too, so a caller can name
//! what changed where it captures nothing. [`Workspace::snapshot_file`]
//! then reads (or, above a limit, only hashes) the files whose stamp changed, through the same
//! boundary-checked open as every read. The caller keeps the previous listing and compares
//! stamps, so an unchanged tree costs one walk and no reads.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
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

/// Every regular file the walk visits, by workspace-relative path, and every other entry below
/// the root that is not a directory (what capture cannot restore, so it can say what changed).
#[derive(Debug, Clone, Default)]
pub struct FileListing {
    /// Path → stamp, sorted by path: the regular files the walk visits.
    pub files: BTreeMap<String, FileStamp>,
    /// Path → what it is and its stamp: entries the walk does not visit (ignored or skipped
    /// paths, `.git` included) and symlinks and special files anywhere.
    pub others: BTreeMap<String, (Uncaptured, FileStamp)>,
    /// Whether the listing of `others` stopped at [`OTHER_ENTRIES_MAX`].
    pub others_truncated: bool,
    /// Entries whose names are not UTF-8 (not listed).
    pub skipped_non_utf8: u64,
}

/// Why an entry of [`FileListing::others`] is not a captured file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncaptured {
    /// A regular file the walk leaves out (an ignore file, or a skipped directory).
    Ignored,
    /// A symlink (never followed, never captured).
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// The stat pass lists at most this many entries the walk leaves out (a `node_modules` can hold
/// hundreds of thousands); past it, [`FileListing::others_truncated`] says so.
pub const OTHER_ENTRIES_MAX: usize = 100_000;

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
    /// directories: `.git`, `node_modules`, `target`, …), with its stamp, plus every other
    /// non-directory entry below the root (up to [`OTHER_ENTRIES_MAX`]). Only `lstat`s: nothing
    /// is opened for reading, no symlink is followed.
    pub fn list_files(&self) -> FileListing {
        let mut listing = FileListing::default();
        let Ok(root) = self.resolve(".") else {
            return listing;
        };
        let mut walk = Walk::new(self, &root);
        let visited: HashSet<String> = walk
            .by_ref()
            .filter_map(|walked| match walked {
                Walked::File(file) => Some(file.relative),
                Walked::Special(..) => None,
            })
            .collect();
        self.stat_tree(String::new(), &visited, &mut listing);
        listing
    }

    /// Depth first from `relative`: one `statat` per entry under the directory's descriptor.
    fn stat_tree(&self, relative: String, visited: &HashSet<String>, listing: &mut FileListing) {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let opened = if relative.is_empty() { "." } else { &relative };
        let Ok(dir) = openat_beneath(self.root_fd.as_fd(), opened, flags, Mode::empty()) else {
            return;
        };
        let Ok(entries) = rustix::fs::Dir::read_from(&dir) else {
            return;
        };
        let mut directories = Vec::new();
        for entry in entries {
            let Ok(entry) = entry else { break };
            let name = entry.file_name();
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            let Ok(text) = name.to_str() else {
                listing.skipped_non_utf8 += 1;
                continue;
            };
            let path = if relative.is_empty() {
                text.to_owned()
            } else {
                format!("{relative}/{text}")
            };
            let Ok(stat) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let kind = FileType::from_raw_mode(stat.st_mode);
            if kind == FileType::Directory {
                directories.push(path);
                continue;
            }
            let stamp = FileStamp::of(&stat);
            let other = match kind {
                FileType::RegularFile if visited.contains(&path) => {
                    listing.files.insert(path, stamp);
                    continue;
                }
                FileType::RegularFile => Uncaptured::Ignored,
                FileType::Symlink => Uncaptured::Symlink,
                _ => Uncaptured::Special,
            };
            if listing.others.len() >= OTHER_ENTRIES_MAX {
                listing.others_truncated = true;
                continue;
            }
            listing.others.insert(path, (other, stamp));
        }
        drop(dir);
        for directory in directories {
            self.stat_tree(directory, visited, listing);
        }
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
