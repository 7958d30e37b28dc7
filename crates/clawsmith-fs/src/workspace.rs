//! The workspace handle: the only way into the workspace (F1, F9).
//!
//! Two checks guard every path. The lexical check ([`Workspace::resolve`]) normalizes the requested
//! string against the canonical root and refuses anything outside with
//! `Path is outside the workspace: <requested>` before any system call. The real check is the open
//! itself: every file and directory is opened with `openat2(root_fd, relative,
//! RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel refuses a symlink (or a chain, or a
//! directory swapped for a symlink mid-call) that would leave the root. Changes then happen with
//! `*at` calls on a single name relative to the parent directory's descriptor, which never follow a
//! final symlink.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::error::FsError;
use crate::escape::escape_control;
use crate::hidden::{HiddenCheck, HiddenMatch, HiddenPaths};
use crate::recorder::{PostState, PriorState};

mod manifest;

pub use manifest::{
    FileListing, FileSnapshot, FileStamp, LINKED_MAX, ListingChanges, OTHER_ENTRIES_MAX,
    SYMLINK_MODE, Uncaptured, WorkspaceWatch, is_symlink_mode,
};

/// The largest file [`Workspace::read_state`] snapshots into memory for the checkpoint.
pub const MAX_SNAPSHOT_BYTES: u64 = 128 * 1024 * 1024;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// How often an open is retried when the kernel reports a concurrent rename (`EAGAIN`).
const OPEN_RETRIES: usize = 16;

/// After a compare-and-swap of a recently written file, the old file is watched until it has
/// been quiet this long (a writer that opened it before the swap may still write to it) …
const SETTLE_QUIET: std::time::Duration = std::time::Duration::from_millis(3);
/// … but never longer than this.
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_millis(100);
/// The watch looks again after this pause, doubling up to [`SETTLE_MAX_PAUSE`].
const SETTLE_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_micros(50);
const SETTLE_MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);
/// The most bytes carried over from the old file in one look; more is treated as a rewrite.
const CARRY_MAX_BYTES: u64 = 1024 * 1024;

/// File timestamps tick coarsely (a jiffy on most filesystems): a file whose change time is this
/// close to the moment it was read is compared by content as well before it is replaced.
const TIMESTAMP_DOUBT: std::time::Duration = std::time::Duration::from_secs(2);

/// A directory tree the tools may touch, identified by its canonical root and an open descriptor
/// of that root. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    root_fd: OwnedFd,
    /// The hidden paths every read through this handle is checked against (by resolved path
    /// and identity, see [`HiddenPaths`]).
    hidden: Option<Arc<HiddenPaths>>,
}

/// A path that passed the lexical check: workspace-relative, `/`-separated, without `.`, `..` or
/// a leading `/`. The workspace root itself is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkspacePath {
    relative: String,
    requested: String,
}

impl WorkspacePath {
    /// The normalized relative form, e.g. `src/main.rs` (the root is `""`).
    pub fn as_str(&self) -> &str {
        &self.relative
    }

    /// The string the caller asked for, as given.
    pub fn requested(&self) -> &str {
        &self.requested
    }

    /// Whether this is the workspace root.
    pub fn is_root(&self) -> bool {
        self.relative.is_empty()
    }

    /// The relative form for messages: the root reads `.`.
    pub fn display(&self) -> &str {
        if self.relative.is_empty() {
            "."
        } else {
            &self.relative
        }
    }

    /// The last component, `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.relative.is_empty() {
            return None;
        }
        Some(self.relative.rsplit('/').next().unwrap_or(&self.relative))
    }

    /// The parent directory's relative form (`""` for a top-level entry), `None` for the root.
    pub fn parent_str(&self) -> Option<&str> {
        if self.relative.is_empty() {
            return None;
        }
        Some(
            self.relative
                .rsplit_once('/')
                .map_or("", |(parent, _)| parent),
        )
    }

    /// Whether the requested string can only name a folder: it ends with `/`, `/.` or `/..` (or
    /// is `.` or `..`). The lexical normalization drops that suffix, so `b.txt/` and `b.txt`
    /// resolve alike; tools that want a file check this and refuse instead of writing `b.txt`.
    pub fn names_folder(&self) -> bool {
        let requested = self.requested.as_str();
        requested.ends_with('/')
            || requested.ends_with("/.")
            || requested.ends_with("/..")
            || requested == "."
            || requested == ".."
    }

    /// What `openat2` receives: the relative form, or `.` for the root.
    fn open_arg(&self) -> &str {
        self.display()
    }
}

/// The relative form with control characters escaped ([`crate::escape_control`]): safe to put in
/// any message or listing.
impl std::fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&escape_control(self.display()))
    }
}

/// What a read-modify-write saw when it read a regular file: device, inode, size, modification
/// and change times, owner, group, mode, and the SHA-256 of the bytes read. The change is made
/// only if the file still matches it right before the swap ([`Workspace::replace_if_unchanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    stamp: Stamp,
    uid: u32,
    gid: u32,
    mode: u32,
    sha256: [u8; 32],
    /// When the read started: a file changed within [`TIMESTAMP_DOUBT`] of it may hide a
    /// same-size rewrite inside one timestamp tick, so its content is compared too.
    read_at: std::time::SystemTime,
}

impl FileVersion {
    /// The permission bits (`0o7777`), setuid, setgid and sticky included.
    pub fn mode(&self) -> u32 {
        self.mode
    }

    /// The owner and group ids.
    pub fn owner(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }

    /// The file's size when it was read.
    pub fn size(&self) -> u64 {
        self.stamp.size
    }

    /// Whether the owner may write it (`u+w`); a file without that bit is read-only.
    pub fn owner_can_write(&self) -> bool {
        self.mode & 0o200 != 0
    }
}

/// What opening a walked file gave.
pub(crate) enum WalkedOpen {
    Opened(File, u64),
    /// A regular file the hidden set covers by identity (a hard link): left closed unread.
    Hidden,
    /// Gone, not a regular file (any more), or not openable.
    Unusable,
}

/// What a walked entry is now.
pub(crate) enum WalkedEntry {
    Regular,
    /// A regular file the hidden set covers by identity.
    Hidden,
    Other,
}

/// The parts of a `stat` that change when a file is written, replaced or re-created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i128, i128),
    ctime: (i128, i128),
}

impl Stamp {
    fn of(stat: &Stat) -> Stamp {
        Stamp {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: file_size(stat),
            mtime: (i128::from(stat.st_mtime), i128::from(stat.st_mtime_nsec)),
            ctime: (i128::from(stat.st_ctime), i128::from(stat.st_ctime_nsec)),
        }
    }

    /// What a write through an open descriptor changes (a rename changes the ctime too, so the
    /// check after the swap leaves it out).
    fn written(&self) -> (u64, u64, u64, (i128, i128)) {
        (self.dev, self.ino, self.size, self.mtime)
    }
}

impl Workspace {
    /// Opens the workspace at `root`, canonicalizing it once.
    pub fn open(root: impl AsRef<Path>) -> Result<Workspace, FsError> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given).map_err(|cause| FsError::Root {
            root: given.to_path_buf(),
            cause,
        })?;
        let root_fd = rustix::fs::open(
            &root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| FsError::Root {
            root: root.clone(),
            cause: errno.into(),
        })?;
        Ok(Workspace {
            root,
            root_fd,
            hidden: None,
        })
    }

    /// This handle with `hidden` enforced on every read for a model (`open_for_read`, the
    /// search and glob walks, `read_versioned`). `hidden` may belong to an enclosing workspace
    /// (a memory folder inside it): entries are matched against where a file really is.
    pub fn with_hidden(mut self, hidden: Arc<HiddenPaths>) -> Workspace {
        self.hidden = (!hidden.is_empty()).then_some(hidden);
        self
    }

    /// The hidden set this handle enforces, to hand to other handles opened for the same
    /// workspace.
    pub fn hidden_paths(&self) -> Option<&Arc<HiddenPaths>> {
        self.hidden.as_ref()
    }

    /// The absolute paths a command's view must cover for the hidden set now (see
    /// [`HiddenPaths::command_paths`]); empty without a hidden set.
    pub fn hidden_matches(&self) -> Vec<PathBuf> {
        self.hidden
            .as_ref()
            .map_or_else(Vec::new, |hidden| hidden.command_paths())
    }

    /// A check of the hidden set as it is now, for one call.
    pub(crate) fn hidden_check(&self) -> HiddenCheck<'_> {
        HiddenCheck::new(self.hidden.as_deref())
    }

    /// Refuses an opened file the hidden set covers, naming the entry, never the content.
    fn refuse_hidden(
        &self,
        check: &HiddenCheck<'_>,
        fd: BorrowedFd<'_>,
        stat: &Stat,
        path: &WorkspacePath,
    ) -> Result<(), FsError> {
        if check.is_empty() {
            return Ok(());
        }
        let found = check
            .by_path(&self.root.join(path.as_str()))
            .or_else(|| check.by_open_file(fd, stat));
        match found {
            Some(HiddenMatch { entry }) => Err(FsError::Hidden {
                path: path.requested().to_owned(),
                entry,
            }),
            None => Ok(()),
        }
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// F1 lexical check and normalization, before any filesystem access.
    ///
    /// Accepts a relative path or an absolute path inside the root; `.` and `..` are resolved
    /// lexically and the result must stay at or under the root (component-wise, so `ws_evil` is not
    /// inside `ws`). The normalized form is the one every later open uses. A NUL byte or an empty
    /// string is refused.
    pub fn resolve(&self, requested: &str) -> Result<WorkspacePath, FsError> {
        if requested.contains('\0') {
            return Err(FsError::NulByte);
        }
        if requested.is_empty() {
            return Err(FsError::EmptyPath);
        }
        let outside = || FsError::OutsideWorkspace {
            requested: requested.to_owned(),
        };
        let requested_path = Path::new(requested);
        let joined = if requested_path.is_absolute() {
            requested_path.to_path_buf()
        } else {
            self.root.join(requested_path)
        };
        let mut normal = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::Prefix(_) => return Err(outside()),
                Component::RootDir => normal.push(Component::RootDir.as_os_str()),
                Component::CurDir => {}
                Component::ParentDir => {
                    normal.pop();
                }
                Component::Normal(part) => normal.push(part),
            }
        }
        let relative = normal.strip_prefix(&self.root).map_err(|_| outside())?;
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                // `requested` is a `&str`, so every component is UTF-8.
                Component::Normal(part) => parts.push(part.to_str().ok_or_else(outside)?),
                _ => return Err(outside()),
            }
        }
        Ok(WorkspacePath {
            relative: parts.join("/"),
            requested: requested.to_owned(),
        })
    }

    /// The state of the entry at `path` before a change: `Absent` when neither it nor its parent
    /// exists, its content and mode when it is a regular file, an error for anything else
    /// (a directory, a symlink — even one that stays inside — or a special file).
    pub fn read_state(&self, path: &WorkspacePath) -> Result<PriorState, FsError> {
        self.read_state_capped(path, MAX_SNAPSHOT_BYTES)
    }

    /// [`Workspace::read_state`] refusing files larger than `limit` bytes before reading them.
    pub fn read_state_capped(
        &self,
        path: &WorkspacePath,
        limit: u64,
    ) -> Result<PriorState, FsError> {
        // A checkpoint's snapshot is not a read for the model: the hidden set does not apply.
        Ok(
            match self.read_versioned_as(path, limit, &HiddenCheck::new(None))? {
                None => PriorState::Absent,
                Some((content, version)) => PriorState::File {
                    content,
                    mode: version.mode,
                },
            },
        )
    }

    /// The content of the regular file at `path` (never following a final symlink) with the
    /// [`FileVersion`] a later compare-and-swap checks; `None` when it or its parent is absent.
    /// Files larger than `limit` bytes are refused before they are read.
    /// A hidden file (by name, resolved path or identity, a hard link included) is refused with
    /// [`FsError::Hidden`] before it is read.
    pub fn read_versioned(
        &self,
        path: &WorkspacePath,
        limit: u64,
    ) -> Result<Option<(Vec<u8>, FileVersion)>, FsError> {
        self.read_versioned_as(path, limit, &self.hidden_check())
    }

    fn read_versioned_as(
        &self,
        path: &WorkspacePath,
        limit: u64,
        hidden: &HiddenCheck<'_>,
    ) -> Result<Option<(Vec<u8>, FileVersion)>, FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(None);
        };
        let name = entry_name(path)?;
        let read_at = std::time::SystemTime::now();
        let Some((mut file, stat)) = open_regular_entry(dir.as_fd(), name, path)? else {
            return Ok(None);
        };
        self.refuse_hidden(hidden, file.as_fd(), &stat, path)?;
        let size = file_size(&stat);
        let too_large = |size: u64| FsError::TooLarge {
            path: path.display().to_owned(),
            size,
            limit,
        };
        if size > limit {
            return Err(too_large(size));
        }
        let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut file)
            .take(limit.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(|source| io_error("read", path, source))?;
        if content.len() as u64 > limit {
            return Err(too_large(content.len() as u64));
        }
        // The stamp is the one taken before the read: a write during the read makes the later
        // check fail (a retry), never pass on bytes that were not read.
        let version = FileVersion {
            stamp: Stamp::of(&stat),
            uid: stat.st_uid,
            gid: stat.st_gid,
            mode: permission_bits(&stat),
            sha256: Sha256::digest(&content).into(),
            read_at,
        };
        Ok(Some((content, version)))
    }

    /// Atomically puts `content` with `mode` at `path`: a temp file in the same directory, then a
    /// rename over the target. An existing entry must be a regular file. Missing parent
    /// directories are created (inside the workspace only) when `create_parents` is set.
    pub fn restore_file(
        &self,
        path: &WorkspacePath,
        content: &[u8],
        mode: u32,
        create_parents: bool,
    ) -> Result<(), FsError> {
        let dir = if create_parents {
            self.create_parent_dirs(path)?
        } else {
            self.open_parent(path)?
        };
        let name = entry_name(path)?;
        let owner = match stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if !is_regular(&stat) => {
                return Err(FsError::NotRegularFile {
                    path: path.display().to_owned(),
                });
            }
            Ok(stat) => stat.map(|stat| (stat.st_uid, stat.st_gid)),
            Err(errno) => return Err(io_error("inspect", path, errno.into())),
        };
        let replacement = Replacement {
            mode,
            owner,
            expected: None,
        };
        write_and_swap(dir.as_fd(), name, path, content, &replacement)?;
        Ok(())
    }

    /// Removes the regular file at `path`; `Ok(())` if it (or its parent) is already absent.
    pub fn remove_file(&self, path: &WorkspacePath) -> Result<(), FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(());
        };
        let name = entry_name(path)?;
        match stat_entry(dir.as_fd(), name) {
            Ok(None) => return Ok(()),
            Ok(Some(stat)) if !is_regular(&stat) => {
                return Err(FsError::NotRegularFile {
                    path: path.display().to_owned(),
                });
            }
            Ok(Some(_)) => {}
            Err(errno) => return Err(io_error("inspect", path, errno.into())),
        }
        match rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(errno) => Err(io_error("delete", path, errno.into())),
        }
    }

    /// SHA-256 of the regular file at `path`, `None` if it is absent. A directory, symlink or
    /// special file is an error.
    pub fn hash_file(&self, path: &WorkspacePath) -> Result<Option<[u8; 32]>, FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(None);
        };
        let name = entry_name(path)?;
        let Some((mut file, _)) = open_regular_entry(dir.as_fd(), name, path)? else {
            return Ok(None);
        };
        sha256_of(&mut file, path).map(Some)
    }

    /// Opens the regular file at `path` for reading. Symlinks are followed as long as they stay
    /// beneath the root; special files are refused before they are opened for reading.
    /// A hidden file (by name, resolved path or identity) is refused with [`FsError::Hidden`].
    pub fn open_for_read(&self, path: &WorkspacePath) -> Result<(File, u64), FsError> {
        match self.open_regular_beneath(path.open_arg()) {
            Ok((file, stat)) => {
                self.refuse_hidden(&self.hidden_check(), file.as_fd(), &stat, path)?;
                Ok((file, file_size(&stat)))
            }
            Err(OpenRefusal::Errno(errno)) => Err(open_error(errno, path)),
            Err(OpenRefusal::NotRegular(_)) => Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            }),
        }
    }

    /// Opens a regular file the search walk found, for reading. `relative` is built from
    /// directory entries (no `.`, `..` or empty component), so it skips the lexical check; the
    /// kernel still refuses any way out of the root, and the final component is not followed
    /// (the walk never follows symlinks). The walk's listing already proved the entry a regular
    /// file, so no `O_PATH` probe precedes the open (two system calls fewer per searched file):
    /// an entry swapped for something else since is opened non-blocking, found not regular by
    /// `fstat`, and closed unread, exactly as when the swap falls between a probe and the open.
    /// `None` if it cannot be opened or is not a regular file (any more).
    /// A file `hidden` covers by identity (a hard link) is `None` too; the walk already left
    /// out the ones it covers by name.
    pub(crate) fn open_walked_for_read(
        &self,
        relative: &str,
        hidden: &HiddenCheck<'_>,
    ) -> WalkedOpen {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW;
        let Ok(fd) = openat_beneath(self.root_fd.as_fd(), relative, flags, Mode::empty()) else {
            return WalkedOpen::Unusable;
        };
        let Ok(stat) = rustix::fs::fstat(&fd) else {
            return WalkedOpen::Unusable;
        };
        if !is_regular(&stat) {
            WalkedOpen::Unusable
        } else if hidden.by_identity(&stat).is_some() {
            WalkedOpen::Hidden
        } else {
            WalkedOpen::Opened(File::from(fd), file_size(&stat))
        }
    }

    /// `openat2` beneath the root (for the hidden set's own stats and walk).
    pub(crate) fn open_beneath_raw(
        &self,
        relative: &str,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, Errno> {
        openat_beneath(self.root_fd.as_fd(), relative, flags, mode)
    }

    /// Reads a file the walk does not trust (an ignore file): beneath the root (symlinks inside
    /// are followed, any way out is refused), regular only, opened non-blocking, at most `limit`
    /// bytes. `Ok(None)` when nothing is there. Never blocks: a FIFO, socket or device is refused
    /// from an `O_PATH` probe before anything opens it for reading.
    pub(crate) fn read_untrusted(
        &self,
        relative: &str,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, Unusable> {
        let (file, stat) = match self.open_regular_beneath(relative) {
            Ok(opened) => opened,
            Err(OpenRefusal::Errno(Errno::NOENT | Errno::NOTDIR)) => return Ok(None),
            Err(OpenRefusal::Errno(Errno::XDEV)) => return Err(Unusable::Outside),
            Err(OpenRefusal::Errno(errno)) => return Err(Unusable::Failed(errno.into())),
            Err(OpenRefusal::NotRegular(kind)) => {
                return Err(Unusable::Special {
                    kind: file_kind_name(kind),
                });
            }
        };
        if file_size(&stat) > limit {
            return Err(Unusable::TooLarge { limit });
        }
        let mut content = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(Unusable::Failed)?;
        if content.len() as u64 > limit {
            return Err(Unusable::TooLarge { limit });
        }
        Ok(Some(content))
    }

    /// The regular files beneath the directory `path`, workspace-relative and sorted, at most
    /// `max` of them (the `bool` says whether the listing stopped there). Every directory is
    /// opened beneath the root without following a symlink, and symlinks, special files and
    /// names that are not UTF-8 are left out. `None` when `path` is not a directory (absent, a
    /// symlink, a file).
    pub fn regular_files_beneath(
        &self,
        path: &WorkspacePath,
        max: usize,
    ) -> Option<(Vec<String>, bool)> {
        let mut files = Vec::new();
        let mut pending = vec![path.as_str().to_owned()];
        let mut first = true;
        while let Some(directory) = pending.pop() {
            let entries = match self.list_directory(&directory) {
                Ok(entries) => entries,
                Err(_) if first => return None,
                // A folder gone or swapped since its parent was listed: nothing below it.
                Err(_) => continue,
            };
            first = false;
            for entry in entries {
                let Some(name) = entry.name.to_str() else {
                    continue;
                };
                let relative = if directory.is_empty() {
                    name.to_owned()
                } else {
                    format!("{directory}/{name}")
                };
                match entry.kind {
                    FileType::Directory => pending.push(relative),
                    FileType::RegularFile => {
                        if files.len() == max {
                            files.sort();
                            return Some((files, true));
                        }
                        files.push(relative);
                    }
                    _ => {}
                }
            }
        }
        files.sort();
        Some((files, false))
    }

    /// The entries of the directory `relative` (already normalized; `""` is the root), opened
    /// beneath the root without following a final symlink, with their kinds, unsorted.
    pub(crate) fn list_directory(&self, relative: &str) -> Result<Vec<DirectoryEntry>, Errno> {
        let dir = openat_beneath(
            self.root_fd.as_fd(),
            if relative.is_empty() { "." } else { relative },
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
            Mode::empty(),
        )?;
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = std::ffi::OsStr::from_bytes(name).to_owned();
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .map_or(FileType::Unknown, |stat| {
                            FileType::from_raw_mode(stat.st_mode)
                        })
                }
                known => known,
            };
            let ino = entry.ino();
            entries.push(DirectoryEntry { name, kind, ino });
        }
        Ok(entries)
    }

    /// `openat2` beneath the root, probing with `O_PATH` first so that nothing but a regular file
    /// is ever opened for reading (opening a FIFO would block), then comparing the inodes.
    fn open_regular_beneath(&self, relative: &str) -> Result<(File, Stat), OpenRefusal> {
        let root = self.root_fd.as_fd();
        let probe = openat_beneath(root, relative, OFlags::PATH, Mode::empty())?;
        let probe_stat = rustix::fs::fstat(&probe)?;
        if !is_regular(&probe_stat) {
            return Err(OpenRefusal::NotRegular(file_type(&probe_stat)));
        }
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = openat_beneath(root, relative, flags, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd)?;
        if !same_inode(&stat, &probe_stat) || !is_regular(&stat) {
            return Err(OpenRefusal::NotRegular(file_type(&stat)));
        }
        Ok((File::from(fd), stat))
    }

    /// Checks that `path` is a directory beneath the root (symlinks inside are followed).
    pub fn check_directory(&self, path: &WorkspacePath) -> Result<(), FsError> {
        let fd = openat_beneath(
            self.root_fd.as_fd(),
            path.open_arg(),
            OFlags::PATH,
            Mode::empty(),
        )
        .map_err(|errno| open_error(errno, path))?;
        let stat = fstat(&fd, path)?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            Ok(())
        } else {
            Err(FsError::NotADirectory {
                path: path.display().to_owned(),
            })
        }
    }

    /// Whether the entry at `relative` (already normalized) can be reached beneath the root
    /// without following a final symlink. The search walk re-checks every hit with this, so a
    /// directory swapped for a symlink behind the walker's back cannot leak outside names.
    /// A file `hidden` covers by identity (a hard link) does not count.
    pub(crate) fn entry_is_regular_beneath(
        &self,
        relative: &str,
        hidden: &HiddenCheck<'_>,
    ) -> bool {
        matches!(self.walked_entry(relative, hidden), WalkedEntry::Regular)
    }

    /// What the walked entry `relative` is now, reached without following a final symlink.
    pub(crate) fn walked_entry(&self, relative: &str, hidden: &HiddenCheck<'_>) -> WalkedEntry {
        let stat = openat_beneath(
            self.root_fd.as_fd(),
            relative,
            OFlags::PATH | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .and_then(rustix::fs::fstat);
        match stat {
            Ok(stat) if !is_regular(&stat) => WalkedEntry::Other,
            Ok(stat) if hidden.by_identity(&stat).is_some() => WalkedEntry::Hidden,
            Ok(_) => WalkedEntry::Regular,
            Err(_) => WalkedEntry::Other,
        }
    }

    /// Fails unless `path`'s parent is a directory beneath the root and nothing (not even a
    /// dangling symlink) exists at `path`.
    pub fn check_creatable(&self, path: &WorkspacePath) -> Result<(), FsError> {
        let dir = self.open_parent(path)?;
        let name = entry_name(path)?;
        match stat_entry(dir.as_fd(), name) {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err(FsError::AlreadyExists {
                path: path.display().to_owned(),
            }),
            Err(errno) => Err(io_error("inspect", path, errno.into())),
        }
    }

    /// F5: creates a new file at `path` with `content` (mode 0o666 minus the umask): a temp file
    /// in the same directory, then an atomic no-clobber `linkat`. An existing entry (even a
    /// dangling symlink) is never replaced.
    pub fn create_new(&self, path: &WorkspacePath, content: &[u8]) -> Result<PostState, FsError> {
        let dir = self.open_parent(path)?;
        let name = entry_name(path)?;
        let (temp, mut file) = TempFile::create(dir.as_fd(), path, 0o666)?;
        write_content(&mut file, content, path)?;
        injected_fault(path)?;
        match rustix::fs::linkat(
            dir.as_fd(),
            temp.name.as_str(),
            dir.as_fd(),
            name,
            AtFlags::empty(),
        ) {
            Ok(()) => {}
            Err(Errno::EXIST) => {
                return Err(FsError::AlreadyExists {
                    path: path.display().to_owned(),
                });
            }
            Err(errno) => return Err(io_error("create", path, errno.into())),
        }
        let stat = fstat(&file, path)?;
        // The temp name is unlinked when `temp` drops; the new name keeps the inode.
        drop(temp);
        Ok(post_state(content, &stat))
    }

    /// F6/F9: atomically replaces the regular file at `path` with `content`, keeping `mode` and
    /// the owner and group of the file it replaces (see [`Workspace::replace_if_unchanged`] for
    /// the setuid rule). No compare-and-swap: the caller did not read the file.
    pub fn replace_file(
        &self,
        path: &WorkspacePath,
        content: &[u8],
        mode: u32,
    ) -> Result<PostState, FsError> {
        let dir = self.open_parent(path)?;
        let name = entry_name(path)?;
        let stat = match stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if is_regular(&stat) => stat,
            Ok(Some(_)) => {
                return Err(FsError::NotRegularFile {
                    path: path.display().to_owned(),
                });
            }
            Ok(None) => {
                return Err(FsError::NotFound {
                    path: path.display().to_owned(),
                });
            }
            Err(errno) => return Err(io_error("inspect", path, errno.into())),
        };
        let replacement = Replacement {
            mode,
            owner: Some((stat.st_uid, stat.st_gid)),
            expected: None,
        };
        write_and_swap(dir.as_fd(), name, path, content, &replacement)
    }

    /// F6/F9 with compare-and-swap: replaces the regular file at `path` with `content` only if it
    /// is still the file `expected` describes. Right before the swap its device, inode, size,
    /// modification and change times must match (and its content hash, when the change time is
    /// too recent for timestamps to tell); the new file then takes the old one's place with
    /// `RENAME_EXCHANGE`, and if the old file was written between that check and the swap it is
    /// swapped back. Any mismatch is [`FsError::Changed`] and nothing is written.
    ///
    /// The new file keeps the old one's mode, owner and group (`fchown` before the swap, which
    /// needs root for another user's file). When the owner cannot be kept the setuid and setgid
    /// bits are dropped, and setgid when the group cannot be kept: the swap never hands a
    /// privilege to a different owner.
    pub fn replace_if_unchanged(
        &self,
        path: &WorkspacePath,
        expected: &FileVersion,
        content: &[u8],
    ) -> Result<PostState, FsError> {
        let dir = self.open_parent(path)?;
        let name = entry_name(path)?;
        let replacement = Replacement {
            mode: expected.mode,
            owner: Some(expected.owner()),
            expected: Some(expected),
        };
        write_and_swap(dir.as_fd(), name, path, content, &replacement)
    }

    /// Removes the regular file at `path` only if it is still the file `expected` describes
    /// (the check of [`Workspace::replace_if_unchanged`]); [`FsError::Changed`] otherwise, also
    /// when it has disappeared.
    pub fn remove_if_unchanged(
        &self,
        path: &WorkspacePath,
        expected: &FileVersion,
    ) -> Result<(), FsError> {
        let dir = self
            .open_parent_if_exists(path)?
            .ok_or_else(|| changed(path))?;
        let name = entry_name(path)?;
        check_entry_unchanged(dir.as_fd(), name, path, expected)?;
        rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::empty())
            .map_err(|errno| io_error("delete", path, errno.into()))
    }

    /// F7: moves the regular file `from` to `to`, which must not exist; its parent must.
    pub fn rename_no_replace(
        &self,
        from: &WorkspacePath,
        to: &WorkspacePath,
    ) -> Result<(), FsError> {
        self.rename_checked(from, None, to)
    }

    /// [`Workspace::rename_no_replace`] only if `from` is still the file `expected` describes
    /// (the check of [`Workspace::replace_if_unchanged`]); [`FsError::Changed`] otherwise.
    pub fn rename_if_unchanged(
        &self,
        from: &WorkspacePath,
        expected: &FileVersion,
        to: &WorkspacePath,
    ) -> Result<(), FsError> {
        self.rename_checked(from, Some(expected), to)
    }

    fn rename_checked(
        &self,
        from: &WorkspacePath,
        expected: Option<&FileVersion>,
        to: &WorkspacePath,
    ) -> Result<(), FsError> {
        let from_dir = self.open_parent(from)?;
        let from_name = entry_name(from)?;
        match (expected, stat_entry(from_dir.as_fd(), from_name)) {
            (Some(expected), _) => {
                check_entry_unchanged(from_dir.as_fd(), from_name, from, expected)?;
            }
            (None, Ok(Some(stat))) if is_regular(&stat) => {}
            (None, Ok(Some(_))) => {
                return Err(FsError::NotRegularFile {
                    path: from.display().to_owned(),
                });
            }
            (None, Ok(None)) => {
                return Err(FsError::NotFound {
                    path: from.display().to_owned(),
                });
            }
            (None, Err(errno)) => return Err(io_error("inspect", from, errno.into())),
        }
        let to_dir = self.open_parent(to)?;
        let to_name = entry_name(to)?;
        let renamed = rustix::fs::renameat_with(
            from_dir.as_fd(),
            from_name,
            to_dir.as_fd(),
            to_name,
            RenameFlags::NOREPLACE,
        );
        match renamed {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(FsError::AlreadyExists {
                path: to.display().to_owned(),
            }),
            // A filesystem without RENAME_NOREPLACE: link (never clobbers), then unlink.
            Err(Errno::INVAL) => {
                match rustix::fs::linkat(
                    from_dir.as_fd(),
                    from_name,
                    to_dir.as_fd(),
                    to_name,
                    AtFlags::empty(),
                ) {
                    Ok(()) => {}
                    Err(Errno::EXIST) => {
                        return Err(FsError::AlreadyExists {
                            path: to.display().to_owned(),
                        });
                    }
                    Err(errno) => return Err(io_error("rename", from, errno.into())),
                }
                rustix::fs::unlinkat(from_dir.as_fd(), from_name, AtFlags::empty())
                    .map_err(|errno| io_error("rename", from, errno.into()))
            }
            Err(errno) => Err(io_error("rename", from, errno.into())),
        }
    }

    /// Removes the directory at `path` when it is empty, is a directory itself (a symlink is
    /// never followed) and was born at or after `since` (its birth time, `statx`). `Ok(false)`
    /// when any of that is not so, or when the file system keeps no birth time. Undo calls it for
    /// the parents of files a turn created: a directory made during the turn (by `mkdir` in a
    /// command) goes with them, one that existed before stays.
    pub fn remove_empty_directory_born_since(
        &self,
        path: &WorkspacePath,
        since: std::time::SystemTime,
    ) -> Result<bool, FsError> {
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(false);
        };
        let name = entry_name(path)?;
        let found = match rustix::fs::statx(
            dir.as_fd(),
            name,
            AtFlags::SYMLINK_NOFOLLOW,
            rustix::fs::StatxFlags::TYPE | rustix::fs::StatxFlags::BTIME,
        ) {
            Ok(found) => found,
            Err(Errno::NOENT | Errno::NOTDIR) => return Ok(false),
            Err(errno) => return Err(io_error("inspect", path, errno.into())),
        };
        let is_directory =
            FileType::from_raw_mode(u32::from(found.stx_mode)) == FileType::Directory;
        let has_birth_time = found.stx_mask & rustix::fs::StatxFlags::BTIME.bits() != 0;
        let born = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(found.stx_btime.tv_sec).unwrap_or(0),
                found.stx_btime.tv_nsec,
            );
        if !is_directory || !has_birth_time || born < since {
            return Ok(false);
        }
        match rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOENT) => Ok(false),
            Err(errno) => Err(io_error("remove directory", path, errno.into())),
        }
    }

    /// Removes temp files that a killed writer left next to `path` (`.clawsmith-tmp-<pid>-…`,
    /// regular files only, and only when process `<pid>` no longer exists, so a live writer's
    /// temp file is never touched). Returns the removed paths, workspace-relative. A missing
    /// parent directory is not an error: there is nothing to sweep.
    pub fn sweep_stale_temp_files(&self, path: &WorkspacePath) -> Result<Vec<String>, FsError> {
        let Some(parent) = path.parent_str() else {
            return Ok(Vec::new());
        };
        let shown_parent = parent.to_owned();
        let parent = if parent.is_empty() { "." } else { parent };
        let dir = match openat_beneath(
            self.root_fd.as_fd(),
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Ok(Vec::new()),
            Err(errno) => return Err(io_error("list the directory of", path, errno.into())),
        };
        let mut stale = Vec::new();
        let entries = rustix::fs::Dir::read_from(&dir)
            .map_err(|errno| io_error("list the directory of", path, errno.into()))?;
        for entry in entries {
            let entry =
                entry.map_err(|errno| io_error("list the directory of", path, errno.into()))?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            let Some(pid) = temp_file_owner(name) else {
                continue;
            };
            if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            stale.push(name.to_owned());
        }
        let mut removed = Vec::new();
        for name in stale {
            let Ok(stat) = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                continue;
            }
            if rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty()).is_ok() {
                removed.push(if shown_parent.is_empty() {
                    name
                } else {
                    format!("{shown_parent}/{name}")
                });
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// Opens the parent directory of `path` beneath the root.
    fn open_parent(&self, path: &WorkspacePath) -> Result<OwnedFd, FsError> {
        self.open_parent_if_exists(path)?
            .ok_or_else(|| FsError::ParentMissing {
                path: parent_display(path).to_owned(),
            })
    }

    /// Like [`Workspace::open_parent`], `None` when the parent does not exist.
    fn open_parent_if_exists(&self, path: &WorkspacePath) -> Result<Option<OwnedFd>, FsError> {
        let Some(parent) = path.parent_str() else {
            return Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            });
        };
        let parent = if parent.is_empty() { "." } else { parent };
        match openat_beneath(
            self.root_fd.as_fd(),
            parent,
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::NOTDIR) => Err(FsError::NotADirectory {
                path: parent.to_owned(),
            }),
            Err(errno) => Err(open_error(errno, path)),
        }
    }

    /// Opens `path`'s parent, creating missing directories one at a time, each with `mkdirat` of
    /// a single name relative to a directory already opened beneath the root.
    fn create_parent_dirs(&self, path: &WorkspacePath) -> Result<OwnedFd, FsError> {
        if let Some(dir) = self.open_parent_if_exists(path)? {
            return Ok(dir);
        }
        let parent = path.parent_str().unwrap_or("");
        let mut current =
            rustix::io::dup(&self.root_fd).map_err(|errno| io_error("open", path, errno.into()))?;
        let mut prefix = String::new();
        for part in parent.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            let flags = OFlags::PATH | OFlags::DIRECTORY;
            current = match openat_beneath(self.root_fd.as_fd(), &prefix, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(current.as_fd(), part, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(io_error("create directory", path, errno.into())),
                    }
                    openat_beneath(self.root_fd.as_fd(), &prefix, flags, Mode::empty())
                        .map_err(|errno| open_error(errno, path))?
                }
                Err(errno) => return Err(open_error(errno, path)),
            };
        }
        Ok(current)
    }
}

/// An entry of [`Workspace::list_directory`]: its name (any bytes) and kind (`lstat`'s, so a
/// symlink is a symlink).
pub(crate) struct DirectoryEntry {
    pub name: std::ffi::OsString,
    pub kind: FileType,
    /// The inode number the directory lists (`d_ino`).
    pub ino: u64,
}

/// Why [`Workspace::read_untrusted`] would not read a file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    #[error("not a regular file ({kind})")]
    Special { kind: &'static str },
    #[error("it leads outside the workspace")]
    Outside,
    #[error("larger than {limit} bytes")]
    TooLarge { limit: u64 },
    // The message quotes the I/O error, so it is not also the source (printed once).
    #[error("it cannot be read: {0}")]
    Failed(io::Error),
}

/// Why [`Workspace::open_regular_beneath`] failed: the open itself, or what the probe found.
enum OpenRefusal {
    Errno(Errno),
    NotRegular(FileType),
}

impl From<Errno> for OpenRefusal {
    fn from(errno: Errno) -> OpenRefusal {
        OpenRefusal::Errno(errno)
    }
}

/// What kind of entry a file type is, for messages: "a FIFO", "a socket", …
pub(crate) fn file_kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown kind",
    }
}

/// The pid in a temp file name of ours (`.clawsmith-tmp-<pid>-<nanos>-<counter>`).
fn temp_file_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(".clawsmith-tmp-")?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let nanos_ok = parts.next()?.parse::<u64>().is_ok();
    let counter_ok = parts.next()?.parse::<u64>().is_ok();
    (nanos_ok && counter_ok && parts.next().is_none()).then_some(pid)
}

/// A temp file in the directory of its target. Dropping it unlinks its name, so no failure path
/// can leave it behind (F9); a successful rename disarms it. After a compare-and-swap exchange
/// the name holds the old file, which the drop then removes.
struct TempFile<'dir> {
    dir: BorrowedFd<'dir>,
    name: String,
    armed: bool,
}

impl<'dir> TempFile<'dir> {
    fn create(
        dir: BorrowedFd<'dir>,
        path: &WorkspacePath,
        mode: u32,
    ) -> Result<(TempFile<'dir>, File), FsError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        for _ in 0..OPEN_RETRIES {
            let name = format!(
                ".clawsmith-tmp-{}-{}-{}",
                std::process::id(),
                nanos,
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            match openat_beneath(
                dir,
                &name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW,
                Mode::from_raw_mode(mode),
            ) {
                Ok(fd) => {
                    let temp = TempFile {
                        dir,
                        name,
                        armed: true,
                    };
                    return Ok((temp, File::from(fd)));
                }
                Err(Errno::EXIST) => continue,
                Err(errno) => return Err(io_error("create a temp file for", path, errno.into())),
            }
        }
        Err(io_error(
            "create a temp file for",
            path,
            io::Error::from(io::ErrorKind::AlreadyExists),
        ))
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: the name is ours (O_EXCL) and a single component of `dir`.
            let _ = rustix::fs::unlinkat(self.dir, self.name.as_str(), AtFlags::empty());
        }
    }
}

// Test-only fault injection: when set, the next write in this thread fails after its temp file
// was written, to prove that no temp file remains and the target is untouched (F9).
#[cfg(test)]
thread_local! {
    pub(crate) static FAIL_NEXT_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

// Test-only: runs once right after the compare-and-swap exchange, to act as a writer that
// opened the old file before the swap and writes to it after.
#[cfg(test)]
thread_local! {
    static AFTER_EXCHANGE: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

fn after_exchange_hook() {
    #[cfg(test)]
    if let Some(hook) = AFTER_EXCHANGE.with(|slot| slot.borrow_mut().take()) {
        hook();
    }
}

fn injected_fault(path: &WorkspacePath) -> Result<(), FsError> {
    #[cfg(test)]
    if FAIL_NEXT_WRITE.with(|flag| flag.replace(false)) {
        return Err(io_error("write", path, io::Error::other("injected fault")));
    }
    let _ = path;
    Ok(())
}

/// How a write treats the file it replaces.
struct Replacement<'a> {
    /// Permission bits for the new file (setuid and setgid may be dropped, see [`new_owner_mode`]).
    mode: u32,
    /// Owner and group to keep: those of the file replaced, `None` when there is none.
    owner: Option<(u32, u32)>,
    /// Compare-and-swap: the version the new content was derived from.
    expected: Option<&'a FileVersion>,
}

/// The new content in a temp file (owner, group, then mode, since `fchown` clears setuid), then
/// a rename over the target, or the compare-and-swap of [`swap_if_unchanged`].
fn write_and_swap(
    dir: BorrowedFd<'_>,
    name: &str,
    path: &WorkspacePath,
    content: &[u8],
    replacement: &Replacement<'_>,
) -> Result<PostState, FsError> {
    let (mut temp, mut file) = TempFile::create(dir, path, 0o600)?;
    let mode = adopt_owner(&file, path, replacement.owner, replacement.mode)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))
        .map_err(|errno| io_error("set the mode of", path, errno.into()))?;
    write_content(&mut file, content, path)?;
    injected_fault(path)?;
    match replacement.expected {
        Some(expected) => swap_if_unchanged(dir, name, &mut temp, &file, path, expected)?,
        None => {
            rustix::fs::renameat(dir, temp.name.as_str(), dir, name)
                .map_err(|errno| io_error("replace", path, errno.into()))?;
            temp.armed = false;
        }
    }
    let stat = fstat(&file, path)?;
    Ok(post_state(content, &stat))
}

/// Gives the temp file `owner` (when it is not already ours) and returns the mode to set:
/// `mode`, less the privilege bits an owner change would hand to someone else.
fn adopt_owner(
    file: &File,
    path: &WorkspacePath,
    owner: Option<(u32, u32)>,
    mode: u32,
) -> Result<u32, FsError> {
    let Some((uid, gid)) = owner else {
        return Ok(mode & 0o7777);
    };
    let temp = fstat(file, path)?;
    if (temp.st_uid, temp.st_gid) == (uid, gid) {
        return Ok(mode & 0o7777);
    }
    let (uid_wanted, gid_wanted) = (
        rustix::fs::Uid::from_raw(uid),
        rustix::fs::Gid::from_raw(gid),
    );
    if rustix::fs::fchown(file, Some(uid_wanted), Some(gid_wanted)).is_ok() {
        return Ok(mode & 0o7777);
    }
    // Not root: a member may still give the file to one of its groups.
    let group_kept = temp.st_gid == gid || rustix::fs::fchown(file, None, Some(gid_wanted)).is_ok();
    Ok(new_owner_mode(mode, temp.st_uid == uid, group_kept))
}

/// The mode of a replacement whose owner or group could not be kept: no setuid or setgid for a
/// new owner, no setgid for a new group.
fn new_owner_mode(mode: u32, owner_kept: bool, group_kept: bool) -> u32 {
    let mut mode = mode & 0o7777;
    if !owner_kept {
        mode &= !0o6000;
    }
    if !group_kept {
        mode &= !0o2000;
    }
    mode
}

/// The compare-and-swap of [`Workspace::replace_if_unchanged`]. On success `temp` names the old
/// file (its guard then unlinks it); on failure it names the new one; either way nothing of ours
/// stays.
fn swap_if_unchanged(
    dir: BorrowedFd<'_>,
    name: &str,
    temp: &mut TempFile<'_>,
    new_file: &File,
    path: &WorkspacePath,
    expected: &FileVersion,
) -> Result<(), FsError> {
    let (mut old_file, checked) = check_entry_unchanged(dir, name, path, expected)?;
    let exchange = |what| {
        rustix::fs::renameat_with(dir, temp.name.as_str(), dir, name, RenameFlags::EXCHANGE)
            .map_err(|errno| (errno, io_error(what, path, errno.into())))
    };
    match exchange("replace") {
        Ok(()) => {}
        // A filesystem without RENAME_EXCHANGE: the check just made is the last word.
        Err((Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP, _)) => {
            rustix::fs::renameat(dir, temp.name.as_str(), dir, name)
                .map_err(|errno| io_error("replace", path, errno.into()))?;
            temp.armed = false;
            return Ok(());
        }
        Err((_, error)) => return Err(error),
    }
    after_exchange_hook();
    // Anything but a quiet (or only appended-to) old file undoes the swap: the edit then fails
    // as a whole, with nothing of it written. (A write that reached the new file in the few
    // microseconds it was in place goes with it: a rewrite racing the swap has no lossless
    // answer.)
    let watched = watch_old_file(&mut old_file, new_file, &checked, expected, path);
    if !matches!(watched, Ok(true)) {
        exchange("put back").map_err(|(_, error)| error)?;
        return Err(watched.err().unwrap_or_else(|| changed(path)));
    }
    Ok(())
}

/// After the exchange: a writer that opened the old file before it may still write to it, and
/// that write would vanish with it. Watches the old file (for a while when it was written
/// recently) and carries bytes appended to it over to the new file. `false` when it changed in
/// another way (rewritten, shrunk, its original bytes touched).
fn watch_old_file(
    old_file: &mut File,
    new_file: &File,
    checked: &Stat,
    expected: &FileVersion,
    path: &WorkspacePath,
) -> Result<bool, FsError> {
    let recently_written = in_doubt(checked, expected.read_at);
    let started = std::time::Instant::now();
    let mut seen = *checked;
    let mut pause = SETTLE_FIRST_PAUSE;
    let mut quiet_for = std::time::Duration::ZERO;
    loop {
        let now = fstat(&*old_file, path)?;
        if Stamp::of(&now).written() != Stamp::of(&seen).written() {
            if !carry_appended(old_file, new_file, &seen, &now, expected, path)? {
                return Ok(false);
            }
            seen = now;
            (pause, quiet_for) = (SETTLE_FIRST_PAUSE, std::time::Duration::ZERO);
            continue;
        }
        if !recently_written {
            return Ok(true);
        }
        if quiet_for >= SETTLE_QUIET || started.elapsed() >= SETTLE_MAX {
            // A same-size rewrite within one timestamp tick leaves the stamp alone: compare bytes.
            return original_bytes_intact(old_file, expected, path);
        }
        std::thread::sleep(pause);
        quiet_for += pause;
        pause = (pause * 2).min(SETTLE_MAX_PAUSE);
    }
}

/// Appends to the new file what was appended to the old one between `seen` and `now`; `false`
/// when the old file changed otherwise (shrunk, rewritten, or its original bytes touched).
fn carry_appended(
    old_file: &mut File,
    new_file: &File,
    seen: &Stat,
    now: &Stat,
    expected: &FileVersion,
    path: &WorkspacePath,
) -> Result<bool, FsError> {
    let (from, to) = (file_size(seen), file_size(now));
    if to <= from || to - from > CARRY_MAX_BYTES {
        return Ok(false);
    }
    if !original_bytes_intact(old_file, expected, path)? {
        return Ok(false);
    }
    let mut appended = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
    old_file
        .read_exact_at(&mut appended, from)
        .map_err(|source| io_error("read", path, source))?;
    // O_APPEND: whatever others appended to the new file meanwhile stays before these bytes.
    rustix::fs::fcntl_setfl(new_file, OFlags::APPEND)
        .map_err(|errno| io_error("write", path, errno.into()))?;
    (&*new_file)
        .write_all(&appended)
        .map_err(|source| io_error("write", path, source))?;
    Ok(true)
}

/// Whether the old file still starts with the bytes the edit was made from.
fn original_bytes_intact(
    old_file: &mut File,
    expected: &FileVersion,
    path: &WorkspacePath,
) -> Result<bool, FsError> {
    old_file
        .seek(SeekFrom::Start(0))
        .map_err(|source| io_error("read", path, source))?;
    Ok(sha256_of(old_file.take(expected.stamp.size), path)? == expected.sha256)
}

/// Opens the entry `name` (never following it) and checks it against `expected`; returns it with
/// the `stat` that passed. A missing, replaced or no longer regular entry is [`FsError::Changed`].
fn check_entry_unchanged(
    dir: BorrowedFd<'_>,
    name: &str,
    path: &WorkspacePath,
    expected: &FileVersion,
) -> Result<(File, Stat), FsError> {
    let (mut current, stat) = match open_regular_entry(dir, name, path) {
        Ok(Some(opened)) => opened,
        Ok(None) | Err(FsError::NotRegularFile { .. }) => return Err(changed(path)),
        Err(error) => return Err(error),
    };
    if Stamp::of(&stat) != expected.stamp {
        return Err(changed(path));
    }
    if in_doubt(&stat, expected.read_at) && sha256_of(&mut current, path)? != expected.sha256 {
        return Err(changed(path));
    }
    Ok((current, stat))
}

/// Whether `stat`'s change time is too close to `read_at` for timestamps to rule out a
/// same-size rewrite within one tick.
fn in_doubt(stat: &Stat, read_at: std::time::SystemTime) -> bool {
    let seconds = u64::try_from(stat.st_ctime).unwrap_or(0);
    let nanos = u32::try_from(stat.st_ctime_nsec).unwrap_or(0);
    let changed_at = std::time::UNIX_EPOCH + std::time::Duration::new(seconds, nanos);
    match read_at.duration_since(changed_at) {
        Ok(before_read) => before_read < TIMESTAMP_DOUBT,
        Err(_) => true,
    }
}

fn changed(path: &WorkspacePath) -> FsError {
    FsError::Changed {
        path: path.display().to_owned(),
    }
}

/// SHA-256 of everything `reader` yields.
fn sha256_of(mut reader: impl Read, path: &WorkspacePath) -> Result<[u8; 32], FsError> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(io_error("read", path, source)),
        };
        hasher.update(&buffer[..read]);
    }
    Ok(hasher.finalize().into())
}

fn write_content(file: &mut File, content: &[u8], path: &WorkspacePath) -> Result<(), FsError> {
    file.write_all(content)
        .map_err(|source| io_error("write", path, source))
}

fn post_state(content: &[u8], stat: &Stat) -> PostState {
    PostState::File {
        sha256: Sha256::digest(content).into(),
        size: content.len() as u64,
        mode: permission_bits(stat),
    }
}

/// `openat2` beneath `dir`, retrying the `EAGAIN`/`EINTR` a concurrent rename can cause.
fn openat_beneath(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let mut attempt = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, mode, RESOLVE) {
            Err(Errno::AGAIN | Errno::INTR) if attempt < OPEN_RETRIES => attempt += 1,
            other => return other,
        }
    }
}

/// Opens the single name `name` in `dir` without following it; `None` if absent.
fn open_regular_entry(
    dir: BorrowedFd<'_>,
    name: &str,
    path: &WorkspacePath,
) -> Result<Option<(File, Stat)>, FsError> {
    let before = match stat_entry(dir, name) {
        Ok(Some(stat)) => stat,
        Ok(None) => return Ok(None),
        Err(errno) => return Err(io_error("inspect", path, errno.into())),
    };
    if !is_regular(&before) {
        return Err(FsError::NotRegularFile {
            path: path.display().to_owned(),
        });
    }
    let fd = match openat_beneath(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => {
            return Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            });
        }
        Err(errno) => return Err(open_error(errno, path)),
    };
    let stat = fstat(&fd, path)?;
    if !is_regular(&stat) || !same_inode(&stat, &before) {
        return Err(FsError::NotRegularFile {
            path: path.display().to_owned(),
        });
    }
    Ok(Some((File::from(fd), stat)))
}

/// `lstat` of a single name in `dir`; `None` if absent.
fn stat_entry(dir: BorrowedFd<'_>, name: &str) -> Result<Option<Stat>, Errno> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(errno),
    }
}

fn fstat(fd: impl AsFd, path: &WorkspacePath) -> Result<Stat, FsError> {
    rustix::fs::fstat(fd).map_err(|errno| io_error("inspect", path, errno.into()))
}

fn entry_name(path: &WorkspacePath) -> Result<&str, FsError> {
    path.file_name().ok_or_else(|| FsError::NotRegularFile {
        path: path.display().to_owned(),
    })
}

fn parent_display(path: &WorkspacePath) -> &str {
    match path.parent_str() {
        Some("") | None => ".",
        Some(parent) => parent,
    }
}

fn is_regular(stat: &Stat) -> bool {
    file_type(stat) == FileType::RegularFile
}

fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

fn same_inode(a: &Stat, b: &Stat) -> bool {
    a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

fn file_size(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

fn permission_bits(stat: &Stat) -> u32 {
    stat.st_mode & 0o7777
}

fn io_error(operation: &'static str, path: &WorkspacePath, cause: io::Error) -> FsError {
    FsError::Io {
        operation,
        path: path.display().to_owned(),
        cause,
    }
}

/// Maps an `openat2` failure: `EXDEV` is the kernel's "this would leave the root".
fn open_error(errno: Errno, path: &WorkspacePath) -> FsError {
    match errno {
        Errno::XDEV => FsError::OutsideWorkspace {
            requested: path.requested().to_owned(),
        },
        Errno::NOENT => FsError::NotFound {
            path: path.display().to_owned(),
        },
        Errno::NOTDIR => FsError::NotFound {
            path: path.display().to_owned(),
        },
        other => io_error("open", path, other.into()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    use super::{AFTER_EXCHANGE, Workspace, new_owner_mode};
    use crate::error::FsError;

    #[test]
    fn new_owner_mode_table() {
        // (mode, owner kept, group kept, expected)
        let cases = [
            (0o4755, true, true, 0o4755),
            (0o4755, false, true, 0o755),
            (0o6755, false, false, 0o755),
            (0o2755, true, false, 0o755),
            (0o6750, true, false, 0o4750),
            (0o1777, false, false, 0o1777),
            (0o100644, true, true, 0o644),
        ];
        for (mode, owner_kept, group_kept, expected) in cases {
            assert_eq!(
                new_owner_mode(mode, owner_kept, group_kept),
                expected,
                "{mode:o} {owner_kept} {group_kept}"
            );
        }
    }

    /// A writer that opened the file before the swap writes to the old file right after the
    /// exchange: an append is carried over, an in-place rewrite puts the old file back.
    #[test]
    fn writes_to_the_old_file_after_the_exchange() {
        // (append?, what the late writer writes, expected outcome, expected file content)
        let cases: [(bool, &[u8], bool, &[u8]); 2] = [
            (true, b"late\n", true, b"new\nlate\n"),
            (false, b"OLD", false, b"OLD\n"),
        ];
        for (append, late, succeeds, expected) in cases {
            let temp = tempfile::tempdir().unwrap();
            std::fs::write(temp.path().join("f.txt"), "old\n").unwrap();
            let workspace = Workspace::open(temp.path()).unwrap();
            let path = workspace.resolve("f.txt").unwrap();
            let (_, version) = workspace.read_versioned(&path, 1024).unwrap().unwrap();
            let writer = std::fs::OpenOptions::new()
                .append(append)
                .write(true)
                .open(temp.path().join("f.txt"))
                .unwrap();
            AFTER_EXCHANGE.with(|slot| {
                *slot.borrow_mut() = Some(Box::new(move || {
                    if append {
                        (&writer).write_all(late).unwrap();
                    } else {
                        writer.write_all_at(late, 0).unwrap();
                    }
                }));
            });
            let result = workspace.replace_if_unchanged(&path, &version, b"new\n");
            match (succeeds, result) {
                (true, Ok(_)) => {}
                (false, Err(FsError::Changed { path })) => assert_eq!(path, "f.txt"),
                (_, other) => panic!("{late:?}: {other:?}"),
            }
            assert_eq!(std::fs::read(temp.path().join("f.txt")).unwrap(), expected);
            let names: Vec<_> = std::fs::read_dir(temp.path()).unwrap().collect();
            assert_eq!(names.len(), 1, "a temp file was left behind");
        }
    }
}
