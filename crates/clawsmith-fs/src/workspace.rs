//! The workspace handle: the only way into the workspace (SPEC F1, F9).
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
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::error::FsError;
use crate::recorder::{PostState, PriorState};

/// The largest file [`Workspace::read_state`] snapshots into memory for the checkpoint.
pub const MAX_SNAPSHOT_BYTES: u64 = 128 * 1024 * 1024;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// How often an open is retried when the kernel reports a concurrent rename (`EAGAIN`).
const OPEN_RETRIES: usize = 16;

/// A directory tree the tools may touch, identified by its canonical root and an open descriptor
/// of that root. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    root_fd: OwnedFd,
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

    /// What `openat2` receives: the relative form, or `.` for the root.
    fn open_arg(&self) -> &str {
        self.display()
    }
}

impl std::fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.display())
    }
}

impl Workspace {
    /// Opens the workspace at `root`, canonicalizing it once.
    pub fn open(root: impl AsRef<Path>) -> Result<Workspace, FsError> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given).map_err(|source| FsError::Root {
            root: given.to_path_buf(),
            source,
        })?;
        let root_fd = rustix::fs::open(
            &root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| FsError::Root {
            root: root.clone(),
            source: errno.into(),
        })?;
        Ok(Workspace { root, root_fd })
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
        let Some(dir) = self.open_parent_if_exists(path)? else {
            return Ok(PriorState::Absent);
        };
        let name = entry_name(path)?;
        let Some((mut file, stat)) = open_regular_entry(dir.as_fd(), name, path)? else {
            return Ok(PriorState::Absent);
        };
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
        Ok(PriorState::File {
            content,
            mode: permission_bits(&stat),
        })
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
        match stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if !is_regular(&stat) => {
                return Err(FsError::NotRegularFile {
                    path: path.display().to_owned(),
                });
            }
            Ok(_) => {}
            Err(errno) => return Err(io_error("inspect", path, errno.into())),
        }
        write_and_rename(dir.as_fd(), name, path, content, Some(mode))?;
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
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = match file.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(io_error("read", path, source)),
            };
            hasher.update(&buffer[..read]);
        }
        Ok(Some(hasher.finalize().into()))
    }

    /// Opens the regular file at `path` for reading. Symlinks are followed as long as they stay
    /// beneath the root; special files are refused before they are opened for reading.
    pub fn open_for_read(&self, path: &WorkspacePath) -> Result<(File, u64), FsError> {
        let probe = openat_beneath(
            self.root_fd.as_fd(),
            path.open_arg(),
            OFlags::PATH,
            Mode::empty(),
        )
        .map_err(|errno| open_error(errno, path))?;
        let probe_stat = fstat(&probe, path)?;
        if !is_regular(&probe_stat) {
            return Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            });
        }
        let fd = openat_beneath(
            self.root_fd.as_fd(),
            path.open_arg(),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|errno| open_error(errno, path))?;
        let stat = fstat(&fd, path)?;
        if !same_inode(&stat, &probe_stat) || !is_regular(&stat) {
            return Err(FsError::NotRegularFile {
                path: path.display().to_owned(),
            });
        }
        Ok((File::from(fd), file_size(&stat)))
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
    pub(crate) fn entry_is_regular_beneath(&self, relative: &str) -> bool {
        match openat_beneath(
            self.root_fd.as_fd(),
            relative,
            OFlags::PATH | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => rustix::fs::fstat(&fd).is_ok_and(|stat| is_regular(&stat)),
            Err(_) => false,
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

    /// F6/F9: atomically replaces the regular file at `path` with `content`, keeping `mode`.
    pub fn replace_file(
        &self,
        path: &WorkspacePath,
        content: &[u8],
        mode: u32,
    ) -> Result<PostState, FsError> {
        let dir = self.open_parent(path)?;
        let name = entry_name(path)?;
        match stat_entry(dir.as_fd(), name) {
            Ok(Some(stat)) if is_regular(&stat) => {}
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
        }
        write_and_rename(dir.as_fd(), name, path, content, Some(mode))
    }

    /// F7: moves the regular file `from` to `to`, which must not exist; its parent must.
    pub fn rename_no_replace(
        &self,
        from: &WorkspacePath,
        to: &WorkspacePath,
    ) -> Result<(), FsError> {
        let from_dir = self.open_parent(from)?;
        let from_name = entry_name(from)?;
        match stat_entry(from_dir.as_fd(), from_name) {
            Ok(Some(stat)) if is_regular(&stat) => {}
            Ok(Some(_)) => {
                return Err(FsError::NotRegularFile {
                    path: from.display().to_owned(),
                });
            }
            Ok(None) => {
                return Err(FsError::NotFound {
                    path: from.display().to_owned(),
                });
            }
            Err(errno) => return Err(io_error("inspect", from, errno.into())),
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

/// A temp file in the directory of its target. Dropping it unlinks its name, so no failure path
/// can leave it behind (F9); a successful rename disarms it.
/// The pid in a temp file name of ours (`.clawsmith-tmp-<pid>-<nanos>-<counter>`).
fn temp_file_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(".clawsmith-tmp-")?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let nanos_ok = parts.next()?.parse::<u64>().is_ok();
    let counter_ok = parts.next()?.parse::<u64>().is_ok();
    (nanos_ok && counter_ok && parts.next().is_none()).then_some(pid)
}

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

fn injected_fault(path: &WorkspacePath) -> Result<(), FsError> {
    #[cfg(test)]
    if FAIL_NEXT_WRITE.with(|flag| flag.replace(false)) {
        return Err(io_error("write", path, io::Error::other("injected fault")));
    }
    let _ = path;
    Ok(())
}

fn write_and_rename(
    dir: BorrowedFd<'_>,
    name: &str,
    path: &WorkspacePath,
    content: &[u8],
    mode: Option<u32>,
) -> Result<PostState, FsError> {
    let (mut temp, mut file) = TempFile::create(dir, path, 0o600)?;
    if let Some(mode) = mode {
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode & 0o7777))
            .map_err(|errno| io_error("set the mode of", path, errno.into()))?;
    }
    write_content(&mut file, content, path)?;
    injected_fault(path)?;
    rustix::fs::renameat(dir, temp.name.as_str(), dir, name)
        .map_err(|errno| io_error("replace", path, errno.into()))?;
    temp.armed = false;
    let stat = fstat(&file, path)?;
    Ok(post_state(content, &stat))
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
    FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
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

fn io_error(operation: &'static str, path: &WorkspacePath, source: io::Error) -> FsError {
    FsError::Io {
        operation,
        path: path.display().to_owned(),
        source,
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
