//! Knowing what changed in the workspace without passing over it: one inotify instance per
//! workspace, one watch per listed directory, kept across listings ([`WorkspaceWatch`]).
//!
//! A full listing ([`Workspace::list_files_watched`]) watches each directory right before it
//! reads its entries, so whatever changes after that read is an event. Between listings the
//! events name the entries that may have changed (`dir/name`; a directory created, removed,
//! moved or changed in mode names its whole subtree). [`Workspace::changes_since`] drains them
//! and `lstat`s only those entries, lists only those subtrees (watching their directories before
//! it lists them, so a directory that appeared — created, or moved in from anywhere — is listed
//! whole, whatever happened in it before its watch existed), and returns the entries found
//! there. Events still queued after the drain are kept for the next call: a path can only be
//! looked at once too often, never once too few.
//!
//! Several consumers (the capture's sessions) share one watch: every drained event is added to
//! each consumer's pending set, and each consumer takes its own.
//!
//! `changes_since` answers `None` — list the whole tree again — whenever the events cannot be
//! trusted to name every change: before the consumer's first listing, after a queue overflow or
//! an unmount, when a directory could not be watched (the watch limit, `ENOSPC`) or lies on a
//! file system where inotify does not see every writer (only local disk file systems, tmpfs and
//! overlayfs qualify: NFS, FUSE and the like are listed every time), when an ignore file
//! (`.gitignore`, `.ignore`, `.git`, `.git/info/exclude`) changed (which files are captured
//! changed with it), when the last listing was cut short ([`OTHER_ENTRIES_MAX`]), when a changed
//! file turns out to have another hard link (its other names get no event), and when a changed
//! path's directory is unknown. What it cannot see at all is documented where the watch is used
//! (the command capture in clawsmith-core): writes through a shared mapping after the file was
//! closed, and hard links made from outside the workspace.
//!
//! Files with several hard links found by a full listing are `lstat`ed again on every call
//! (a write through any of their names changes the shared inode's times); past
//! [`LINKED_MAX`] of them the watch gives up and every call is a full listing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{DirectoryTask, FileListing, Judge, Scan, Sorted, Workspace, openat_beneath};
use crate::tools::walk::join;

/// What each directory's watch reports: every way an entry in it can change, and the directory
/// itself going away.
pub(super) const WATCH_MASK: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// Past this many files with several hard links, the watch is given up (each is `lstat`ed on
/// every call: a `pnpm` store's links would make that a full pass anyway).
pub const LINKED_MAX: usize = 4096;

/// File systems whose every writer inotify sees (all writes go through this kernel's page
/// cache): ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, F2FS, bcachefs, ZFS.
const LOCAL_FILE_SYSTEMS: [u64; 8] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0x794C_7630,
    0xF2F5_2010,
    0xCA45_1A4E,
    0x2FC1_2FC1,
];

/// Whether the file system of `fd` is one where inotify reports every change.
pub(super) fn sees_every_writer(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstatfs(fd).is_ok_and(|info| {
        #[allow(clippy::unnecessary_cast, clippy::cast_sign_loss)]
        let kind = info.f_type as u64;
        LOCAL_FILE_SYSTEMS.contains(&kind)
    })
}

/// An inotify instance watching every directory of the last full listing (and those listed
/// since), with what each consumer has not taken yet. One per workspace; kept across listings.
#[derive(Debug)]
pub struct WorkspaceWatch {
    inotify: OwnedFd,
    /// Watch descriptor → the directory it watches (workspace-relative, `""` for the root).
    directories: HashMap<i32, String>,
    /// Directory → the rules its entries are judged by.
    judged_by: HashMap<String, JudgeDebug>,
    /// Paths of non-directories with several hard links.
    linked: HashSet<String>,
    /// False once a directory could not be watched: every later call lists everything.
    usable: bool,
    /// The last full listing was cut short: its events cannot complete it.
    truncated: bool,
    /// What each consumer has not taken yet.
    pending: HashMap<String, Dirt>,
}

/// [`Judge`], printable.
struct JudgeDebug(Judge);

impl std::fmt::Debug for JudgeDebug {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(if self.0.is_some() {
            "walked"
        } else {
            "ignored"
        })
    }
}

/// The paths events named since a consumer last took them.
#[derive(Debug, Default)]
struct Dirt {
    /// Entries to `lstat` again.
    paths: BTreeSet<String>,
    /// Directories whose whole subtree is listed again.
    subtrees: BTreeSet<String>,
    /// Nothing can be trusted: list everything.
    everything: bool,
}

impl Dirt {
    fn absorb(&mut self, other: &Dirt) {
        self.everything |= other.everything;
        if !self.everything {
            self.paths.extend(other.paths.iter().cloned());
            self.subtrees.extend(other.subtrees.iter().cloned());
        }
    }
}

/// What changed since a consumer's previous listing: every previous entry [`covers`] names is to
/// be replaced by what [`listing`] holds at that place (nothing: it is gone).
///
/// [`covers`]: ListingChanges::covers
/// [`listing`]: ListingChanges::listing
#[derive(Debug, Default, Clone)]
pub struct ListingChanges {
    /// Directories listed again, whole.
    pub subtrees: Vec<String>,
    /// Entries `lstat`ed again.
    pub paths: Vec<String>,
    /// What is there now (entries of `paths` that exist, everything below `subtrees`).
    pub listing: FileListing,
}

impl ListingChanges {
    /// Whether nothing may have changed.
    pub fn is_empty(&self) -> bool {
        self.subtrees.is_empty() && self.paths.is_empty()
    }

    /// Whether the previous entry at `path` is replaced (by what `listing` has there, or by
    /// nothing).
    pub fn covers(&self, path: &str) -> bool {
        self.paths
            .binary_search_by(|p| p.as_str().cmp(path))
            .is_ok()
            || self.subtrees.iter().any(|subtree| below(path, subtree))
    }
}

impl FileListing {
    /// This listing updated with `changes` (what a full listing would now return).
    pub fn apply(&mut self, changes: &ListingChanges) {
        self.files.retain(|path, _| !changes.covers(path));
        self.links.retain(|path, _| !changes.covers(path));
        self.others.retain(|path, _| !changes.covers(path));
        self.directories.retain(|path| !changes.covers(path));
        self.directories
            .extend(changes.listing.directories.iter().cloned());
        self.files.extend(changes.listing.files.clone());
        self.links.extend(changes.listing.links.clone());
        self.others.extend(changes.listing.others.clone());
    }
}

/// `path` is `subtree` or below it.
fn below(path: &str, subtree: &str) -> bool {
    path.strip_prefix(subtree)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Whether a change at `path` can change which files the walk visits.
fn touches_ignore_rules(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, ".gitignore" | ".ignore" | ".git")
        || [".git/info", ".git/info/exclude"]
            .iter()
            .any(|tail| path == *tail || path.ends_with(&format!("/{tail}")))
}

impl Workspace {
    /// A new, empty watch of this workspace; `None` where inotify cannot serve (no inotify, or
    /// a file system it does not see every writer of).
    pub fn watch(&self) -> Option<WorkspaceWatch> {
        if !sees_every_writer(self.root_fd.as_fd()) {
            return None;
        }
        let inotify =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        Some(WorkspaceWatch {
            inotify,
            directories: HashMap::new(),
            judged_by: HashMap::new(),
            linked: HashSet::new(),
            usable: true,
            truncated: false,
            pending: HashMap::new(),
        })
    }

    /// [`Workspace::list_files`], watching every directory it lists; from now on
    /// [`Workspace::changes_since`] can tell `consumer` what changed after this listing.
    pub fn list_files_watched(&self, watch: &mut WorkspaceWatch, consumer: &str) -> FileListing {
        if !watch.usable {
            return self.list_files();
        }
        // Events until now concern what this listing sees anyway (for this consumer).
        watch.drain();
        watch.pending.insert(consumer.to_owned(), Dirt::default());
        let root = DirectoryTask {
            relative: String::new(),
            rules: Some(None),
        };
        let scanned = self.scan(vec![root], Some(watch.inotify.as_fd()));
        if scanned.watch_failed || scanned.linked.len() > LINKED_MAX {
            watch.give_up();
            return scanned.listing;
        }
        watch.directories.clear();
        watch.judged_by.clear();
        for (wd, path, judge) in scanned.watched {
            watch.directories.insert(wd, path.clone());
            watch.judged_by.insert(path, JudgeDebug(judge));
        }
        watch.linked = scanned.linked.into_iter().collect();
        watch.truncated = scanned.listing.others_truncated;
        scanned.listing
    }

    /// What changed for `consumer` since its last listing (full, or this call's previous
    /// answer); `None` when the events cannot say it for sure: then list everything with
    /// [`Workspace::list_files_watched`].
    pub fn changes_since(
        &self,
        watch: &mut WorkspaceWatch,
        consumer: &str,
    ) -> Option<ListingChanges> {
        if !watch.usable || watch.truncated {
            return None;
        }
        watch.drain();
        let dirt = std::mem::take(watch.pending.get_mut(consumer)?);
        let changes = if dirt.everything {
            None
        } else {
            self.restat(watch, dirt)
        };
        if changes.is_none() {
            // Until its next full listing, this consumer has nothing to build on.
            watch.pending.remove(consumer);
        }
        changes
    }

    /// `lstat`s the entries of `dirt` and lists its subtrees (watching their directories).
    fn restat(&self, watch: &mut WorkspaceWatch, dirt: Dirt) -> Option<ListingChanges> {
        // The outermost subtrees only; paths below one are covered by it.
        let mut subtrees: Vec<String> = Vec::new();
        for subtree in dirt.subtrees {
            if !subtrees.iter().any(|outer| below(&subtree, outer)) {
                subtrees.retain(|inner| !below(inner, &subtree));
                subtrees.push(subtree);
            }
        }
        let paths: Vec<String> = dirt
            .paths
            .into_iter()
            .chain(watch.linked.iter().cloned())
            .filter(|path| !subtrees.iter().any(|subtree| below(path, subtree)))
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        if subtrees
            .iter()
            .chain(&paths)
            .any(|path| touches_ignore_rules(path))
        {
            return None;
        }
        // What was known below the subtrees is learnt again by listing them.
        let under_subtree = |path: &str| subtrees.iter().any(|subtree| below(path, subtree));
        watch.judged_by.retain(|path, _| !under_subtree(path));
        watch.directories.retain(|_, path| !under_subtree(path));
        watch.linked.retain(|path| !under_subtree(path));

        let scan = Scan {
            workspace: self,
            root: self.root().to_path_buf(),
            queue: std::sync::Mutex::new(super::Queue {
                tasks: Vec::new(),
                busy: 0,
            }),
            ready: std::sync::Condvar::new(),
            others: std::sync::atomic::AtomicUsize::new(0),
            inotify: None,
            root_device: 0,
        };
        let mut changes = ListingChanges::default();
        let mut tasks = Vec::new();
        for (path, is_subtree) in subtrees
            .iter()
            .map(|path| (path, true))
            .chain(paths.iter().map(|path| (path, false)))
        {
            let (parent, name) = match path.rsplit_once('/') {
                Some((parent, name)) => (parent, name),
                None => ("", path.as_str()),
            };
            let judge = &watch.judged_by.get(parent)?.0;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK;
            let opened = if parent.is_empty() { "." } else { parent };
            let stat = match openat_beneath(self.root_fd.as_fd(), opened, flags, Mode::empty()) {
                Ok(dir) => match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => stat,
                    Err(Errno::NOENT) => continue,
                    Err(_) => return None,
                },
                // The directory is gone: so is the entry (the directory's own event lists it).
                Err(Errno::NOENT | Errno::NOTDIR) => continue,
                Err(_) => return None,
            };
            let kind = FileType::from_raw_mode(stat.st_mode);
            if kind != FileType::Directory && stat.st_nlink > 1 && !watch.linked.contains(path) {
                // Its other names had no event: only a full listing finds them.
                return None;
            }
            match scan.sort(judge, path.clone(), name, kind, Some(&stat))? {
                Sorted::Directory(task) => {
                    if task.rules.is_some() {
                        changes.listing.directories.insert(path.clone());
                    }
                    if !is_subtree {
                        // A directory where a file was: listed whole.
                        changes.subtrees.push(path.clone());
                    }
                    tasks.push(task);
                }
                Sorted::File(stamp) => {
                    changes.listing.files.insert(path.clone(), stamp);
                }
                Sorted::Link(stamp) => {
                    changes.listing.links.insert(path.clone(), stamp);
                }
                Sorted::Other(other, stamp) => {
                    changes.listing.others.insert(path.clone(), (other, stamp));
                }
            }
        }
        if !tasks.is_empty() {
            let scanned = self.scan(tasks, Some(watch.inotify.as_fd()));
            if scanned.watch_failed {
                watch.give_up();
                return None;
            }
            if scanned.listing.others_truncated {
                return None;
            }
            for linked in &scanned.linked {
                if !watch.linked.contains(linked) {
                    return None;
                }
            }
            for (wd, path, judge) in scanned.watched {
                watch.directories.insert(wd, path.clone());
                watch.judged_by.insert(path, JudgeDebug(judge));
            }
            let found = scanned.listing;
            changes.listing.files.extend(found.files);
            changes.listing.links.extend(found.links);
            changes.listing.others.extend(found.others);
            changes.listing.skipped_non_utf8 += found.skipped_non_utf8;
            changes.listing.directories.extend(found.directories);
        }
        changes.subtrees.extend(subtrees);
        changes.subtrees.sort_unstable();
        changes.subtrees.dedup();
        changes.paths = paths;
        Some(changes)
    }
}

impl WorkspaceWatch {
    /// Forgets `consumer` (its next call lists everything).
    pub fn forget(&mut self, consumer: &str) {
        self.pending.remove(consumer);
    }

    /// Whether the watch still serves (no directory failed to be watched).
    pub fn is_usable(&self) -> bool {
        self.usable
    }

    fn give_up(&mut self) {
        self.usable = false;
        self.pending.clear();
        self.directories.clear();
        self.judged_by.clear();
        self.linked.clear();
    }

    /// Reads every queued event into each consumer's pending set.
    fn drain(&mut self) {
        let mut dirt = Dirt::default();
        let mut buffer = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(self.inotify.as_fd(), &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => {
                    dirt.everything = true;
                    break;
                }
            };
            let flags = event.events();
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::UNMOUNT) {
                dirt.everything = true;
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                // The directory is gone (its parent's event says so); its watch with it.
                self.directories.remove(&event.wd());
                continue;
            }
            // A descriptor no longer mapped watches a directory no listing has seen since
            // (removed or moved away, and every place it went has its own event).
            let Some(directory) = self.directories.get(&event.wd()) else {
                continue;
            };
            match event.file_name() {
                None if directory.is_empty() => dirt.everything = true,
                None => {
                    dirt.subtrees.insert(directory.clone());
                }
                Some(name) => {
                    let Ok(name) = name.to_str() else {
                        // Never listed (not UTF-8); a directory of that name was not watched.
                        continue;
                    };
                    let path = join(directory, name);
                    if flags.contains(ReadFlags::ISDIR) {
                        dirt.subtrees.insert(path);
                    } else {
                        dirt.paths.insert(path);
                    }
                }
            }
        }
        for pending in self.pending.values_mut() {
            pending.absorb(&dirt);
        }
    }
}
