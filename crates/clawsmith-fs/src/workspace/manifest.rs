//! What the files of the workspace look like at one moment, for capturing what a command changed.
//!
//! [`Workspace::list_files`] applies the search walk's rules (same ignore files, same skipped
//! directories, symlinks never followed) to decide *which* files are captured, and stats every
//! entry of the whole tree for their stamps, in one pass: each directory is listed once, under
//! its descriptor opened beneath the root, and each entry that is not a directory gets one
//! `lstat` under that descriptor. The directories are shared out among a few threads (the
//! `lstat`s are what costs: about 20,000 per 20,000-file tree); no file is opened for reading.
//! Entries the walk leaves out are listed too, so a caller can name what changed where it
//! captures nothing. [`Workspace::snapshot_file`] then reads (or, above a limit, only hashes)
//! the files whose stamp changed, through the same boundary-checked open as every read. The
//! caller keeps the previous listing and compares stamps, so an unchanged tree costs one pass
//! and no reads.
//!
//! Why not `ignore::WalkParallel`: it opens paths by name from the root, so a directory swapped
//! for a symlink mid-walk would be listed through the link; this pass opens every directory
//! beneath the workspace's root descriptor, as every other read does.

use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use ignore::Match;
use ignore::gitignore::Gitignore;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use sha2::{Digest, Sha256};

use super::{OpenRefusal, Workspace, WorkspacePath, file_size, openat_beneath, permission_bits};
use crate::error::FsError;
use crate::tools::walk::{IGNORE_FILES, SKIPPED_DIRECTORIES, join, load_ignore_rules};

mod watch;

pub use watch::{LINKED_MAX, ListingChanges, WorkspaceWatch};

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
    /// Path → stamp: the regular files the walk visits.
    pub files: HashMap<String, FileStamp>,
    /// Path → stamp: the symlinks the walk passes (not ignored; never followed).
    pub links: HashMap<String, FileStamp>,
    /// Path → what it is and its stamp: entries the walk does not visit (ignored or skipped
    /// paths, `.git` included) and special files anywhere.
    pub others: HashMap<String, (Uncaptured, FileStamp)>,
    /// Whether the listing of `others` stopped at [`OTHER_ENTRIES_MAX`].
    pub others_truncated: bool,
    /// Entries whose names are not UTF-8 (not listed).
    pub skipped_non_utf8: u64,
    /// The directories the walk enters (not the root): comparing two listings' sets tells which
    /// directories a command made, for undo to remove once they are empty again.
    pub directories: std::collections::HashSet<String>,
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
    /// Every regular file and symlink the search walk would visit (the same ignore files and
    /// skipped directories: `.git`, `node_modules`, `target`, …), with its stamp, plus every
    /// other non-directory entry below the root (up to [`OTHER_ENTRIES_MAX`]). One listing of
    /// each directory and one `lstat` per entry that is not a directory, spread over a few
    /// threads; nothing is opened for reading, no symlink is followed.
    pub fn list_files(&self) -> FileListing {
        let root = DirectoryTask {
            relative: String::new(),
            rules: Some(None),
        };
        self.scan(vec![root], None).listing
    }

    /// Lists the directories of `tasks` and everything below them (see [`Workspace::list_files`]);
    /// with `inotify`, each directory is watched before it is listed.
    fn scan(&self, tasks: Vec<DirectoryTask>, inotify: Option<BorrowedFd<'_>>) -> Scanned {
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, SCAN_THREADS_MAX);
        let scan = Scan {
            workspace: self,
            root: self.root().to_path_buf(),
            queue: Mutex::new(Queue { tasks, busy: 0 }),
            ready: Condvar::new(),
            others: AtomicUsize::new(0),
            inotify,
            root_device: rustix::fs::fstat(&self.root_fd).map_or(0, |stat| stat.st_dev),
        };
        let found: Vec<Found> = std::thread::scope(|threads_scope| {
            let helpers: Vec<_> = (1..threads)
                .map(|_| threads_scope.spawn(|| scan.work()))
                .collect();
            let mut found = vec![scan.work()];
            // A worker only panics on a bug; its share of the listing is then missing, which
            // reads as deletions the capture would record: better to list nothing at all.
            for helper in helpers {
                match helper.join() {
                    Ok(part) => found.push(part),
                    Err(_) => {
                        return vec![Found {
                            watch_failed: true,
                            ..Found::default()
                        }];
                    }
                }
            }
            found
        });
        let mut scanned = Scanned::default();
        let listing = &mut scanned.listing;
        let (files, links) = found.iter().fold((0, 0), |(f, l), part| {
            (f + part.files.len(), l + part.links.len())
        });
        listing.files.reserve(files);
        listing.links.reserve(links);
        for part in found {
            listing.files.extend(part.files);
            listing.links.extend(part.links);
            listing.others.extend(part.others);
            listing.skipped_non_utf8 += part.skipped_non_utf8;
            listing.directories.extend(part.directories);
            listing.others_truncated |= part.others_truncated;
            scanned.watched.extend(part.watched);
            scanned.linked.extend(part.linked);
            scanned.watch_failed |= part.watch_failed;
        }
        scanned
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

    /// Removes the directory at `path` when it is one (a symlink is never followed) and is
    /// empty; `Ok(false)` when it is absent, not a directory or not empty. Undo calls it for the
    /// directories a command made, deepest first.
    pub fn remove_empty_directory(&self, path: &WorkspacePath) -> Result<bool, FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(false);
        };
        let name = super::entry_name(path)?;
        match super::stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if FileType::from_raw_mode(stat.st_mode) == FileType::Directory => {}
            Ok(_) => return Ok(false),
            Err(errno) => return Err(super::io_error("inspect", path, errno.into())),
        }
        match rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(
                rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST | rustix::io::Errno::NOENT,
            ) => Ok(false),
            Err(errno) => Err(super::io_error("remove directory", path, errno.into())),
        }
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

/// At most this many threads list the tree (the statting is what costs; past a few threads the
/// file system's locks, not the cores, bound it).
const SCAN_THREADS_MAX: usize = 4;

/// The ignore rules of one directory and of every directory above it: the walk's frames, shared
/// by the directories below.
struct Rules {
    parent: Option<Arc<Rules>>,
    /// One matcher per [`IGNORE_FILES`] entry.
    files: [Gitignore; 3],
}

/// A directory to list. `rules` is `Some` where the walk goes (with the rules above it, `None`
/// at the root), `None` below a skipped or ignored directory: everything there is outside the
/// capture and only listed to be named.
struct DirectoryTask {
    relative: String,
    rules: Judge,
}

/// The rules the entries of one directory are judged by: `Some(rules)` where the walk goes
/// (`Some(None)`: no ignore file applies), `None` below a skipped or ignored directory.
type Judge = Option<Option<Arc<Rules>>>;

/// What one [`Workspace::scan`] found.
#[derive(Default)]
struct Scanned {
    listing: FileListing,
    /// Each directory watched: its watch descriptor, path and the rules of its entries.
    watched: Vec<(i32, String, Judge)>,
    /// Non-directories with more than one hard link.
    linked: Vec<String>,
    /// A directory could not be watched (watch limit, a file system inotify does not see
    /// every writer of): the listing is right, the watch is not complete.
    watch_failed: bool,
}

struct Queue {
    tasks: Vec<DirectoryTask>,
    /// Workers listing a directory right now (they may add tasks).
    busy: usize,
}

/// One listing of the tree, shared by its worker threads.
struct Scan<'w> {
    workspace: &'w Workspace,
    root: std::path::PathBuf,
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Entries listed in `others` so far, by every worker.
    others: AtomicUsize,
    /// Watch each directory before listing it ([`WorkspaceWatch`]).
    inotify: Option<BorrowedFd<'w>>,
    /// The root's device: a directory on another one is a mount, checked before it is watched.
    root_device: u64,
}

/// What one worker found.
#[derive(Default)]
struct Found {
    files: Vec<(String, FileStamp)>,
    links: Vec<(String, FileStamp)>,
    others: Vec<(String, (Uncaptured, FileStamp))>,
    others_truncated: bool,
    skipped_non_utf8: u64,
    directories: Vec<String>,
    watched: Vec<(i32, String, Judge)>,
    linked: Vec<String>,
    watch_failed: bool,
}

/// Where one entry of a listed directory goes.
enum Sorted {
    /// A directory: list it (with the rules it gets).
    Directory(DirectoryTask),
    File(FileStamp),
    Link(FileStamp),
    Other(Uncaptured, FileStamp),
}

impl Scan<'_> {
    /// Takes directories off the queue until none is left and no worker can add one.
    fn work(&self) -> Found {
        let mut found = Found::default();
        let mut children = Vec::new();
        loop {
            let task = {
                let mut queue = self.lock();
                loop {
                    if let Some(task) = queue.tasks.pop() {
                        queue.busy += 1;
                        break task;
                    }
                    if queue.busy == 0 {
                        self.ready.notify_all();
                        return found;
                    }
                    queue = self
                        .ready
                        .wait(queue)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            self.list(task, &mut found, &mut children);
            let mut queue = self.lock();
            queue.busy -= 1;
            queue.tasks.append(&mut children);
            if !queue.tasks.is_empty() || queue.busy == 0 {
                self.ready.notify_all();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue holds plain data; a panicking worker leaves it consistent.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists one directory: its subdirectories become tasks, every other entry is statted once
    /// under the directory's descriptor and sorted into `found`.
    fn list(&self, task: DirectoryTask, found: &mut Found, children: &mut Vec<DirectoryTask>) {
        if task.rules.is_none() && self.others.load(Ordering::Relaxed) >= OTHER_ENTRIES_MAX {
            found.others_truncated = true;
            return;
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let relative = task.relative;
        let opened = if relative.is_empty() { "." } else { &relative };
        let Ok(dir) = openat_beneath(self.workspace.root_fd.as_fd(), opened, flags, Mode::empty())
        else {
            return;
        };
        // Watched before it is listed: whatever changes after the listing is an event.
        let watch = self
            .inotify
            .and_then(|inotify| self.watch_directory(inotify, &dir, found));
        let Ok(listed) = rustix::fs::Dir::read_from(&dir) else {
            return;
        };
        let mut entries: Vec<(String, FileType)> = Vec::new();
        for entry in listed {
            let Ok(entry) = entry else { break };
            let name = entry.file_name();
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            match name.to_str() {
                Ok(text) => entries.push((text.to_owned(), entry.file_type())),
                Err(_) => found.skipped_non_utf8 += 1,
            }
        }
        let rules = task
            .rules
            .map(|above| self.rules_of(&relative, &entries, above));
        for (name, listed_kind) in entries {
            let stat = if listed_kind == FileType::Directory {
                None
            } else {
                match rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => Some(stat),
                    Err(_) => continue,
                }
            };
            let path = join(&relative, &name);
            if self.inotify.is_some() && stat.as_ref().is_some_and(|stat| stat.st_nlink > 1) {
                found.linked.push(path.clone());
            }
            let Some(sorted) = self.sort(&rules, path.clone(), &name, listed_kind, stat.as_ref())
            else {
                continue;
            };
            let (other, stamp) = match sorted {
                Sorted::Directory(task) => {
                    if task.rules.is_some() {
                        found.directories.push(path);
                    }
                    children.push(task);
                    continue;
                }
                Sorted::File(stamp) => {
                    found.files.push((path, stamp));
                    continue;
                }
                Sorted::Link(stamp) => {
                    found.links.push((path, stamp));
                    continue;
                }
                Sorted::Other(other, stamp) => (other, stamp),
            };
            if self.others.fetch_add(1, Ordering::Relaxed) >= OTHER_ENTRIES_MAX {
                found.others_truncated = true;
                continue;
            }
            found.others.push((path, (other, stamp)));
        }
        if let Some(wd) = watch {
            found.watched.push((wd, relative, rules));
        }
    }

    /// Sorts the entry `name` at `path` of a directory whose entries `rules` judges, as the
    /// search walk would: `stat` is its `lstat` (`None` for a directory, listed as one).
    /// `None` for an entry listed as something else than a directory without a stat.
    fn sort(
        &self,
        rules: &Judge,
        path: String,
        name: &str,
        listed_kind: FileType,
        stat: Option<&Stat>,
    ) -> Option<Sorted> {
        let kind = stat.map_or(listed_kind, |stat| FileType::from_raw_mode(stat.st_mode));
        let walked = rules.as_ref().filter(|rules| {
            let skipped = kind == FileType::Directory && SKIPPED_DIRECTORIES.contains(&name);
            !skipped && !self.ignored(rules.as_ref(), &path, kind == FileType::Directory)
        });
        if kind == FileType::Directory {
            return Some(Sorted::Directory(DirectoryTask {
                relative: path,
                rules: walked.cloned(),
            }));
        }
        let stamp = FileStamp::of(stat?);
        Some(match kind {
            FileType::RegularFile if walked.is_some() => Sorted::File(stamp),
            FileType::Symlink if walked.is_some() => Sorted::Link(stamp),
            FileType::RegularFile | FileType::Symlink => Sorted::Other(Uncaptured::Ignored, stamp),
            _ => Sorted::Other(Uncaptured::Special, stamp),
        })
    }

    /// Adds `dir` to the watch; `None` (and the scan marked failed) when it cannot be watched
    /// soundly: the watch limit, or a mount of a file system inotify does not see every writer
    /// of.
    fn watch_directory(
        &self,
        inotify: BorrowedFd<'_>,
        dir: &rustix::fd::OwnedFd,
        found: &mut Found,
    ) -> Option<i32> {
        let local = match rustix::fs::fstat(dir) {
            Ok(stat) if stat.st_dev == self.root_device => true,
            Ok(_) => watch::sees_every_writer(dir.as_fd()),
            Err(_) => false,
        };
        // The directory itself, through its descriptor (never a path that could be swapped).
        let watched = local
            .then(|| {
                let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
                rustix::fs::inotify::add_watch(inotify, path.as_str(), watch::WATCH_MASK).ok()
            })
            .flatten();
        if watched.is_none() {
            found.watch_failed = true;
        }
        watched
    }

    /// The rules that apply in `relative`: those above, plus its own ignore files if it has any.
    fn rules_of(
        &self,
        relative: &str,
        entries: &[(String, FileType)],
        above: Option<Arc<Rules>>,
    ) -> Option<Arc<Rules>> {
        let present = |name: &str| entries.iter().any(|(entry, _)| entry == name);
        let wanted = [present(".ignore"), present(".gitignore"), present(".git")];
        if !wanted.contains(&true) {
            return above;
        }
        let directory = self.root.join(relative);
        let files = std::array::from_fn(|index| {
            if !wanted[index] {
                return Gitignore::empty();
            }
            // An unusable ignore file is skipped, as the search walk skips it.
            load_ignore_rules(
                self.workspace,
                &directory,
                join(relative, IGNORE_FILES[index]),
            )
            .unwrap_or_else(|_| Gitignore::empty())
        });
        if files.iter().all(Gitignore::is_empty) {
            return above;
        }
        Some(Arc::new(Rules {
            parent: above,
            files,
        }))
    }

    /// The search walk's verdict: for each kind of ignore file in precedence order, the deepest
    /// directory with an opinion decides.
    fn ignored(&self, rules: Option<&Arc<Rules>>, relative: &str, is_dir: bool) -> bool {
        let Some(deepest) = rules else {
            return false;
        };
        let path = self.root.join(relative);
        for kind in 0..IGNORE_FILES.len() {
            let mut rules = Some(deepest);
            while let Some(current) = rules {
                match current.files[kind].matched(&path, is_dir) {
                    Match::None => rules = current.parent.as_ref(),
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
        }
        false
    }
}
