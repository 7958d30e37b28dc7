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
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use sha2::{Digest, Sha256};

use super::{OpenRefusal, Workspace, WorkspacePath, file_size, openat_beneath, permission_bits};
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
    /// Path → stamp: the symlinks in the directories the walk enters (never followed).
    pub links: BTreeMap<String, FileStamp>,
    /// Path → what it is and its stamp: entries the walk does not visit (ignored or skipped
    /// paths, `.git` included) and special files anywhere.
    pub others: BTreeMap<String, (Uncaptured, FileStamp)>,
    /// Whether the listing of `others` stopped at [`OTHER_ENTRIES_MAX`].
    pub others_truncated: bool,
    /// Entries whose names are not UTF-8 (not listed).
    pub skipped_non_utf8: u64,
}

/// Why an entry of [`FileListing::others`] is not a captured file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncaptured {
    /// A regular file or symlink the walk leaves out (an ignore file, or a skipped directory).
    Ignored,
    /// A FIFO, socket or device.
    Special,
    /// A file the walk visits that could not be read (no read permission, gone mid-read); the
    /// capture lists it here so it is never mistaken for an absent one.
    Unreadable,
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
        let entered: HashSet<String> = std::mem::take(&mut walk.entered).into_iter().collect();
        let scope = Scope { visited, entered };
        self.stat_tree(String::new(), &scope, &mut listing);
        listing
    }

    /// Depth first from `relative`: one `statat` per entry under the directory's descriptor.
    fn stat_tree(&self, relative: String, scope: &Scope, listing: &mut FileListing) {
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
                FileType::RegularFile if scope.visited.contains(&path) => {
                    listing.files.insert(path, stamp);
                    continue;
                }
                FileType::Symlink if scope.entered.contains(&relative) => {
                    listing.links.insert(path, stamp);
                    continue;
                }
                FileType::RegularFile | FileType::Symlink => Uncaptured::Ignored,
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
            self.stat_tree(directory, scope, listing);
        }
    }

    /// Reads the regular file at `relative` (a path [`Workspace::list_files`] returned) through
    /// the boundary-checked open, never following a final symlink: its content when it has at
    /// most `content_limit` bytes, else its hash only. `Ok(None)` when it is gone or no longer a
    /// regular file (a symlink put in its place included).
    pub fn snapshot_file(
        &self,
        relative: &str,
        content_limit: u64,
    ) -> Result<Option<FileSnapshot>, FsError> {
        let path = self.resolve(relative)?;
        let (mut file, stat) = match self.open_entry_for_read(path.open_arg()) {
            Ok(opened) => opened,
            Err(OpenRefusal::NotRegular(_)) => return Ok(None),
            Err(OpenRefusal::Errno(
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP,
            )) => {
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

impl Workspace {
    /// Like `open_regular_beneath`, but the final component is never followed: a symlink that
    /// took a listed file's place is "not regular", not the file it points to.
    fn open_entry_for_read(&self, relative: &str) -> Result<(std::fs::File, Stat), OpenRefusal> {
        let root = self.root_fd.as_fd();
        let probe = openat_beneath(
            root,
            relative,
            OFlags::PATH | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
        let probe_stat = rustix::fs::fstat(&probe)?;
        if !super::is_regular(&probe_stat) {
            return Err(OpenRefusal::NotRegular(FileType::from_raw_mode(
                probe_stat.st_mode,
            )));
        }
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW;
        let fd = openat_beneath(root, relative, flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        let same = stat.st_dev == probe_stat.st_dev && stat.st_ino == probe_stat.st_ino;
        if !same || !super::is_regular(&stat) {
            return Err(OpenRefusal::NotRegular(FileType::from_raw_mode(
                stat.st_mode,
            )));
        }
        Ok((std::fs::File::from(fd), stat))
    }
}

/// The file-type bits (`S_IFLNK`) that mark a symlink in a recorder state's or checkpoint row's
/// mode: its "content" is the link's target, its mode `SYMLINK_MODE | 0o777`.
pub const SYMLINK_MODE: u32 = 0o120_000;

/// Whether `mode` (a recorder or checkpoint mode) describes a symlink.
pub fn is_symlink_mode(mode: u32) -> bool {
    mode & 0o170_000 == SYMLINK_MODE
}

impl Workspace {
    /// What undo compares: SHA-256 of the regular file's content, or of the symlink's target
    /// (never followed), with whether it is a link; `None` when absent. A directory or special
    /// file is an error.
    pub fn hash_entry(&self, path: &WorkspacePath) -> Result<Option<([u8; 32], bool)>, FsError> {
        match self.read_link(path)? {
            Some(target) => Ok(Some((Sha256::digest(&target).into(), true))),
            None => Ok(self.hash_file(path)?.map(|hash| (hash, false))),
        }
    }

    /// The target of the symlink at `path` (never followed); `None` when the entry is absent or
    /// not a symlink.
    pub fn read_link(&self, path: &WorkspacePath) -> Result<Option<Vec<u8>>, FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(None);
        };
        let name = super::entry_name(path)?;
        match super::stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {}
            Ok(_) => return Ok(None),
            Err(errno) => return Err(super::io_error("inspect", path, errno.into())),
        }
        match rustix::fs::readlinkat(dir.as_fd(), name, Vec::new()) {
            Ok(target) => Ok(Some(target.into_bytes())),
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INVAL) => Ok(None),
            Err(errno) => Err(super::io_error("read link", path, errno.into())),
        }
    }

    /// Atomically puts a symlink to `target` at `path`: a link under a temp name in the same
    /// directory, then a rename over the entry. An existing entry must be a regular file or a
    /// symlink. Missing parents are created (inside the workspace only) when `create_parents`.
    pub fn restore_symlink(
        &self,
        path: &WorkspacePath,
        target: &[u8],
        create_parents: bool,
    ) -> Result<(), FsError> {
        let dir = if create_parents {
            self.create_parent_dirs(path)?
        } else {
            self.open_parent(path)?
        };
        let name = super::entry_name(path)?;
        self.check_replaceable(dir.as_fd(), name, path)?;
        let target = std::ffi::OsStr::from_bytes(target);
        let temp = format!(
            ".clawsmith-tmp-{}-link-{}",
            std::process::id(),
            LINK_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        rustix::fs::symlinkat(target, dir.as_fd(), temp.as_str())
            .map_err(|errno| super::io_error("create link", path, errno.into()))?;
        rustix::fs::renameat(dir.as_fd(), temp.as_str(), dir.as_fd(), name).map_err(|errno| {
            let _ = rustix::fs::unlinkat(dir.as_fd(), temp.as_str(), AtFlags::empty());
            super::io_error("rename", path, errno.into())
        })
    }

    /// What undo writes back: a symlink to `content` when `mode` says a link
    /// ([`is_symlink_mode`]), else a regular file with `content` and `mode` — atomically either
    /// way, also where a symlink stands now (the file is written under a temp name beside it,
    /// then renamed over the link).
    pub fn restore_entry(
        &self,
        path: &WorkspacePath,
        content: &[u8],
        mode: u32,
        create_parents: bool,
    ) -> Result<(), FsError> {
        if is_symlink_mode(mode) {
            return self.restore_symlink(path, content, create_parents);
        }
        if self.read_link(path)?.is_none() {
            return self.restore_file(path, content, mode, create_parents);
        }
        let temp_name = format!(
            ".clawsmith-tmp-{}-file-{}",
            std::process::id(),
            LINK_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let temp = match path.parent_str() {
            Some("") | None => self.resolve(&temp_name)?,
            Some(parent) => self.resolve(&format!("{parent}/{temp_name}"))?,
        };
        self.restore_file(&temp, content, mode, false)?;
        let dir = self.open_parent(path)?;
        let name = super::entry_name(path)?;
        rustix::fs::renameat(dir.as_fd(), temp_name.as_str(), dir.as_fd(), name).map_err(|errno| {
            let _ = rustix::fs::unlinkat(dir.as_fd(), temp_name.as_str(), AtFlags::empty());
            super::io_error("rename", path, errno.into())
        })
    }

    /// Removes the regular file or symlink at `path` (a link is never followed); `Ok(())` when
    /// it is already absent.
    pub fn remove_entry(&self, path: &WorkspacePath) -> Result<(), FsError> {
        if self.read_link(path)?.is_none() {
            return self.remove_file(path);
        }
        let dir = self.open_parent(path)?;
        let name = super::entry_name(path)?;
        match rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(errno) => Err(super::io_error("delete", path, errno.into())),
        }
    }

    fn check_replaceable(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        name: &str,
        path: &WorkspacePath,
    ) -> Result<(), FsError> {
        match super::stat_entry(dir, name) {
            Ok(None) => Ok(()),
            Ok(Some(stat))
                if matches!(
                    FileType::from_raw_mode(stat.st_mode),
                    FileType::RegularFile | FileType::Symlink
                ) =>
            {
                Ok(())
            }
            Ok(Some(_)) => Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            }),
            Err(errno) => Err(super::io_error("inspect", path, errno.into())),
        }
    }
}

static LINK_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// What the walk decided: the files it visits and the directories it enters.
struct Scope {
    visited: HashSet<String>,
    entered: HashSet<String>,
}
