//! Keeping the workspace's repositories from being turned against the user: what a command's
//! view makes read-only in each `.git` ([`GitLock`]), and the check after the command that takes
//! back what it could still create.
//!
//! During a command, the built view keeps every repository's `.git` of the workspace pinned (it
//! cannot be renamed, removed or replaced; see [`scan`] for which repositories: the workspace's
//! own and the nested ones, `sub/.git`) and makes part of it read-only:
//! - **`start_command` and piped processes ([`GitLock::Whole`])**: the whole git dir. Nothing can
//!   be created or changed in it while the command runs, however long: there is no moment at which
//!   the user's own `git` could meet a planted `commondir`, hook or config key. The price: git
//!   commands that write the repository (`add`, `commit`, `checkout`, `fetch`) fail inside
//!   background commands (`Unable to create '.git/index.lock': Read-only file system`); they
//!   belong in `run_command`.
//! - **`run_command` ([`GitLock::CodePaths`])**: every code path (`hooks`, `config`,
//!   `commondir`, `worktrees`, …), so `git add`, `commit` and `checkout` keep working. A bind
//!   mount needs something to bind onto, and git needs to create files at the top of its git dir
//!   (`index.lock`, `HEAD.lock`, `ORIG_HEAD`) — which Landlock and seccomp cannot tell from a
//!   `commondir` —, so in a writable workspace each code path that does not exist gets a
//!   **stand-in** first, which the view binds read-only: an empty folder (`hooks/`,
//!   `worktrees/`, `modules/`), or a file git reads as if it were absent (`commondir` holding
//!   `.`, the git dir itself; an empty `config.worktree`, `gitdir`, `info/attributes`). The
//!   command cannot write, replace or remove it (`EROFS`, `EBUSY`), so there is no moment at
//!   which the user's own git could meet a planted code path; the stand-ins are removed when the
//!   command is over (the last of this process's commands holding one removes it). A
//!   clawsmith killed meanwhile leaves them, inert. Git commands that write a code path
//!   (`git worktree add`, `git submodule update --init`, a hook installer) fail in commands.
//!
//! After the command's whole process tree is gone (so nothing races it), [`Repositories::restore`]
//! takes back whatever the command created at a missing code path that got no stand-in (one that
//! could not be made, or a read-only workspace's) and makes every repository the
//! command made (`git init` at the root or in any subdirectory, a `.git` file or link) harmless:
//! a `.git` file or link is removed; a new git dir keeps its objects and refs and loses
//! `commondir`, `gitdir`, `config.worktree`, `worktrees`, `modules` and every hook that is not a
//! `.sample`, and its `config` keeps only the allowlist's inert keys as the host's git reads
//! them (`allowlist`). A repository made by `run_command` is cleaned then, when the command
//! ends: until then (bounded by its timeout) the user's own git inside it could meet what the
//! command planted. One made by a background command is cleaned as it appears, by a watch
//! (`watch`: inotify from before the command starts until its tree is gone) doing the same
//! cleaning; the window left is the time between a write and its cleaning, which a command
//! rewriting the file in a loop keeps reopening. Existing repositories have no window: their
//! code paths are bound read-only before the command's first instruction.
//!
//! [`scan`] walks directories only, without following links, skipping the usual heavy trees
//! (`node_modules`, `target`, virtual environments, caches) and stopping after
//! [`SCAN_MAX_DIRS`] directories; a repository beyond is not protected, and the report says the
//! scan was cut.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::platform::GIT_CODE_PATHS;

mod allowlist;
mod watch;

use watch::Watch;

/// The git that reads configs (found on clawsmith's `PATH`).
const GIT: &str = "git";

/// Hook names git ships as samples; anything else in a new repository's `hooks/` would run.
const SAMPLE_SUFFIX: &str = ".sample";

/// Directories the repository scan visits at most, per scan.
pub(crate) const SCAN_MAX_DIRS: usize = 20_000;

/// Directory names the scan does not enter (besides `.git` itself).
const SCAN_SKIP: &[&str] = &[
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".cache",
    ".gradle",
];

/// The `.git` entries (directories, `gitdir:` files, links) under `workspace`, the workspace's
/// own first when it has one; and whether the scan was cut at [`SCAN_MAX_DIRS`].
pub(crate) fn scan(workspace: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([workspace.to_path_buf()]);
    let mut visited = 0;
    while let Some(dir) = queue.pop_front() {
        visited += 1;
        if visited > SCAN_MAX_DIRS {
            return (found, true);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == ".git" {
                found.push(entry.path());
            } else if kind.is_dir()
                && !SCAN_SKIP
                    .iter()
                    .any(|skip| name.as_encoded_bytes() == skip.as_bytes())
            {
                queue.push_back(entry.path());
            }
        }
    }
    (found, false)
}

/// What one repository looked like before the command.
#[derive(Debug)]
pub(crate) struct GitSnapshot {
    git_dir: PathBuf,
    /// `.git` did not exist at all.
    absent: bool,
    /// Code paths that did not exist (relative to `.git`) and have no stand-in: what the command
    /// creates there is taken back when it ends.
    missing: Vec<&'static str>,
    /// The stand-ins this command holds (see [`StandIn`]), in the order they were made.
    stand_ins: Vec<PathBuf>,
}

/// What stands in for a missing code path while a `run_command` runs, so the view can bind it
/// read-only: an empty folder, or a file whose content git reads as if it were absent —
/// `commondir` holding `.` names the git dir itself as the common dir; an empty `config`,
/// `config.worktree`, `gitdir` or `info/attributes` sets nothing.
fn stand_in_for(code: &str) -> Option<&'static [u8]> {
    match code {
        "hooks" | "worktrees" | "modules" => None,
        "commondir" => Some(b".\n"),
        _ => Some(b""),
    }
}

/// A stand-in on the host: the path, its identity when made, and how many running commands of
/// this process hold it (the last to end removes it; a command that started while it stood
/// finds it present and holds it too).
struct StandIn {
    path: PathBuf,
    identity: (u64, u64),
    holders: usize,
}

/// The stand-ins of this process's running commands.
static STAND_INS: std::sync::Mutex<Vec<StandIn>> = std::sync::Mutex::new(Vec::new());

fn stand_ins() -> std::sync::MutexGuard<'static, Vec<StandIn>> {
    STAND_INS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// Makes the stand-ins for the code paths of the git dir `git_dir` (beneath `workspace`, every
/// component opened without following links) that do not exist, or holds the ones another
/// command of this process made. Returns the paths held and the code paths left missing.
fn stand_in(workspace: &Path, git_dir: &Path) -> (Vec<PathBuf>, Vec<&'static str>) {
    let mut held = Vec::new();
    let mut missing = Vec::new();
    let Some(pinned) = PinnedDir::open(workspace, git_dir) else {
        // No stand-ins through a path that cannot be pinned; what exists is not "missing" (the
        // check after the command removes what it finds at a missing code path).
        return (held, missing_code_paths(git_dir));
    };
    let mut registry = stand_ins();
    // Holds `path` if another command's stand-in is still there; whether it did.
    let hold = |registry: &mut Vec<StandIn>, path: &Path, held: &mut Vec<PathBuf>| {
        let now = identity(path);
        match registry
            .iter_mut()
            .find(|stand| stand.path == path && Some(stand.identity) == now)
        {
            Some(stand) => {
                stand.holders += 1;
                held.push(path.to_path_buf());
                true
            }
            None => false,
        }
    };
    for code in GIT_CODE_PATHS {
        let path = git_dir.join(code);
        if hold(&mut registry, &path, &mut held) {
            continue;
        }
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        // Made through the pinned git dir, so a link swapped in for a component cannot send it
        // elsewhere; `create_new` does not follow a link at the name itself.
        let folder_dir;
        let (parent, name): (&PinnedDir, &str) = match code.split_once('/') {
            Some((folder, name)) => {
                let folder_path = git_dir.join(folder);
                if !hold(&mut registry, &folder_path, &mut held)
                    && std::fs::symlink_metadata(&folder_path).is_err()
                {
                    if std::fs::create_dir(pinned.path.join(folder)).is_err() {
                        missing.push(*code);
                        continue;
                    }
                    if let Some(id) = identity(&folder_path) {
                        registry.push(StandIn {
                            path: folder_path.clone(),
                            identity: id,
                            holders: 1,
                        });
                        held.push(folder_path);
                    }
                }
                let Some(child) = pinned.child(std::ffi::OsStr::new(folder)) else {
                    missing.push(*code);
                    continue;
                };
                folder_dir = child;
                (&folder_dir, name)
            }
            None => (&pinned, code),
        };
        let at = parent.path.join(name);
        let made = match stand_in_for(code) {
            None => std::fs::create_dir(&at),
            Some(content) => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&at)
                .and_then(|mut file| std::io::Write::write_all(&mut file, content)),
        };
        match (made, identity(&path)) {
            (Ok(()), Some(id)) => {
                registry.push(StandIn {
                    path: path.clone(),
                    identity: id,
                    holders: 1,
                });
                held.push(path);
            }
            _ => missing.push(*code),
        }
    }
    (held, missing)
}

/// Lets go of the stand-ins `held` (newest first); the last holder removes each one that is
/// still the stand-in it made (a folder only when empty).
fn release(held: &[PathBuf]) {
    let mut registry = stand_ins();
    for path in held.iter().rev() {
        let Some(index) = registry.iter().position(|stand| stand.path == *path) else {
            continue;
        };
        registry[index].holders -= 1;
        if registry[index].holders > 0 {
            continue;
        }
        let stand = registry.remove(index);
        if identity(path) == Some(stand.identity) {
            // One that cannot be removed (a folder the command filled) stays: a stand-in is
            // inert, and a folder's content is the command's, kept by the repository keeper.
            let _removed = match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir(path),
                _ => std::fs::remove_file(path),
            };
        }
    }
}

/// How much of each repository's git dir a command's view makes read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GitLock {
    /// The code paths (`run_command`), stand-ins for the missing ones included: the rest stays
    /// writable, so `git add`, `commit` and `checkout` work.
    CodePaths,
    /// The whole git dir (`start_command`, piped processes): nothing can be created in it while
    /// the command runs, so there is nothing to take back and no moment the user's git could
    /// meet a planted code path. Git commands that write the repository fail in these commands.
    Whole,
}

/// Every repository of the workspace before the command.
#[derive(Debug)]
pub(crate) struct Repositories {
    workspace: PathBuf,
    lock: GitLock,
    /// The workspace's own `.git` (present or not) first, then the nested ones found.
    snapshots: Vec<GitSnapshot>,
    /// Whether the scan was cut (repositories deeper than it went are not protected).
    cut: bool,
    /// For [`GitLock::Whole`]: the watch cleaning new repositories while the command runs.
    watch: Option<Watch>,
}

impl Repositories {
    /// Scans `workspace` and takes the snapshot of each repository.
    /// With `stand_ins` (a `run_command` in a writable workspace: [`GitLock::CodePaths`]), the
    /// missing code paths of each existing git dir get a stand-in the view binds read-only.
    pub(crate) fn before(workspace: &Path, lock: GitLock, stand_ins: bool) -> Repositories {
        let own = workspace.join(".git");
        let (found, cut) = scan(workspace);
        let stand_ins = stand_ins && lock == GitLock::CodePaths;
        let mut snapshots = vec![snapshot(workspace, &own, stand_ins)];
        snapshots.extend(
            found
                .iter()
                .filter(|git| **git != own)
                .map(|git| snapshot(workspace, git, stand_ins)),
        );
        let watch = (lock == GitLock::Whole)
            .then(|| {
                let known = snapshots
                    .iter()
                    .filter(|snapshot| !snapshot.absent)
                    .map(|snapshot| snapshot.git_dir.clone())
                    .collect();
                Watch::start(workspace, known)
            })
            .flatten();
        Repositories {
            workspace: workspace.to_path_buf(),
            lock,
            snapshots,
            cut,
            watch,
        }
    }

    /// How much of each git dir the view makes read-only.
    pub(crate) fn lock(&self) -> GitLock {
        self.lock
    }

    /// The `.git` entries that exist now, for the view to pin and protect.
    pub(crate) fn present(&self) -> impl Iterator<Item = &Path> {
        self.snapshots
            .iter()
            .filter(|snapshot| !snapshot.absent)
            .map(|snapshot| snapshot.git_dir.as_path())
    }

    /// Takes back what the command created at any repository's code paths, and cleans the
    /// repositories it made; returns what it did, relative to the workspace.
    pub(crate) fn restore(mut self) -> Vec<String> {
        // What the watch cleaned while the command ran, first.
        let mut restored = self.watch.take().map(Watch::stop).unwrap_or_default();
        for snapshot in &self.snapshots {
            for what in snapshot.restore(&self.workspace) {
                restored.push(relative(&self.workspace, &snapshot.git_dir, what));
            }
        }
        // Repositories the command made anywhere else in the workspace.
        let (after, _) = scan(&self.workspace);
        for git in after {
            if self.snapshots.iter().any(|s| s.git_dir == git) {
                continue;
            }
            restored.extend(clean_new(&self.workspace, &git));
        }
        if self.cut && !restored.is_empty() {
            restored.push(format!(
                "(repository scan cut at {SCAN_MAX_DIRS} directories)"
            ));
        }
        restored
    }
}

/// `what` (a path in the git dir `git`, `.git/…`) relative to the workspace, for the report.
fn relative(workspace: &Path, git: &Path, what: String) -> String {
    let base = git
        .parent()
        .and_then(|dir| dir.strip_prefix(workspace).ok())
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| format!("{}/", dir.display()))
        .unwrap_or_default();
    format!("{base}{what}")
}

/// Makes the repository at `git` (which the command made) harmless; what it removed or cleaned,
/// relative to the workspace.
pub(crate) fn clean_new(workspace: &Path, git: &Path) -> Vec<String> {
    clean_new_at(workspace, git)
        .into_iter()
        .map(|what| relative(workspace, git, what))
        .collect()
}

/// The code paths that do not exist in `git_dir`.
fn missing_code_paths(git_dir: &Path) -> Vec<&'static str> {
    GIT_CODE_PATHS
        .iter()
        .copied()
        .filter(|name| std::fs::symlink_metadata(git_dir.join(name)).is_err())
        .collect()
}

/// Takes the snapshot of one `.git` (a directory, a `gitdir:` file, or nothing), standing in
/// for its missing code paths when asked to and it is a directory.
fn snapshot(workspace: &Path, git_dir: &Path, stand_ins: bool) -> GitSnapshot {
    let meta = std::fs::symlink_metadata(git_dir);
    let absent = meta.is_err();
    let (held, missing) = match meta {
        Err(_) => (Vec::new(), Vec::new()),
        Ok(meta) if stand_ins && meta.is_dir() => stand_in(workspace, git_dir),
        Ok(_) => (Vec::new(), missing_code_paths(git_dir)),
    };
    GitSnapshot {
        git_dir: git_dir.to_path_buf(),
        absent,
        missing,
        stand_ins: held,
    }
}

impl GitSnapshot {
    /// Takes back what the command created at the repository's code paths; returns what it
    /// removed or cleaned (relative to the workspace), for the report.
    pub(crate) fn restore(&self, workspace: &Path) -> Vec<String> {
        if self.absent {
            return clean_new_at(workspace, &self.git_dir);
        }
        let mut restored = Vec::new();
        let Ok(meta) = std::fs::symlink_metadata(&self.git_dir) else {
            return restored;
        };
        if !meta.is_dir() {
            return restored;
        }
        for name in &self.missing {
            let path = self.git_dir.join(name);
            if remove_any(&path) {
                restored.push(format!(".git/{name}"));
            }
        }
        restored
    }
}

impl Drop for GitSnapshot {
    /// The stand-ins go when the command is over, whichever way it ended.
    fn drop(&mut self) {
        release(&self.stand_ins);
    }
}

/// Makes the repository at `git_dir` (which the command made) harmless, touching only what lies
/// beneath `workspace`: every directory on the way is opened without following links and the
/// work is done through those descriptors (`/proc/self/fd/N/…`), so a command still running
/// (see `watch`) that swaps a component for a link cannot turn the cleaning on another path.
/// What it removed or cleaned, relative to the git dir (`.git/…`).
fn clean_new_at(workspace: &Path, git_dir: &Path) -> Vec<String> {
    let mut restored = Vec::new();
    let (Some(parent), Some(name)) = (git_dir.parent(), git_dir.file_name()) else {
        return restored;
    };
    let Some(parent) = PinnedDir::open(workspace, parent) else {
        return restored;
    };
    let entry = parent.path.join(name);
    let Ok(meta) = std::fs::symlink_metadata(&entry) else {
        return restored;
    };
    if !meta.is_dir() {
        // A link or `gitdir:` file pointing git somewhere the command chose.
        if std::fs::remove_file(&entry).is_ok() {
            restored.push(".git".to_owned());
        }
        return restored;
    }
    let Some(git) = parent.child(name) else {
        return restored;
    };
    for name in [
        "commondir",
        "gitdir",
        "config.worktree",
        "worktrees",
        "modules",
    ] {
        if remove_any(&git.path.join(name)) {
            restored.push(format!(".git/{name}"));
        }
    }
    match git.child("hooks".as_ref()) {
        Some(hooks) => {
            let entries = std::fs::read_dir(&hooks.path)
                .into_iter()
                .flatten()
                .flatten();
            for entry in entries {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.ends_with(SAMPLE_SUFFIX) && remove_any(&hooks.path.join(entry.file_name()))
                {
                    restored.push(format!(".git/hooks/{name}"));
                }
            }
        }
        // Not a directory (a link, a file): taken away.
        None => {
            if remove_any(&git.path.join("hooks")) {
                restored.push(".git/hooks".to_owned());
            }
        }
    }
    let config = git.path.join("config");
    if let Ok(meta) = std::fs::symlink_metadata(&config) {
        if !meta.is_file() {
            if remove_any(&config) {
                restored.push(".git/config".to_owned());
            }
        } else {
            restored.extend(clean_config(&git.path));
        }
    }
    restored
}

/// A directory opened without following links (`O_PATH`), and the path that names it
/// whatever is renamed or swapped meanwhile (`/proc/self/fd/N`).
struct PinnedDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PinnedDir {
    /// `dir`, opened from `workspace` one component at a time; `None` when a component is a
    /// link, not a directory, or gone, or `dir` is not beneath `workspace`.
    fn open(workspace: &Path, dir: &Path) -> Option<PinnedDir> {
        let relative = dir.strip_prefix(workspace).ok()?;
        let fd = nix::fcntl::open(workspace, pin_flags(), Mode::empty()).ok()?;
        let mut pinned = PinnedDir::from_fd(fd);
        for component in relative.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            pinned = pinned.child(name)?;
        }
        Some(pinned)
    }

    /// The directory `name` in this one, not following a link.
    fn child(&self, name: &std::ffi::OsStr) -> Option<PinnedDir> {
        let fd = nix::fcntl::openat(&self.fd, name, pin_flags(), Mode::empty()).ok()?;
        Some(PinnedDir::from_fd(fd))
    }

    fn from_fd(fd: OwnedFd) -> PinnedDir {
        let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        PinnedDir { fd, path }
    }
}

fn pin_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// Removes a file, link or directory tree without following links; whether something was there.
fn remove_any(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path).is_ok(),
        Ok(_) => std::fs::remove_file(path).is_ok(),
        Err(_) => false,
    }
}

/// Reduces the config of the git dir `git` to its inert keys (see `allowlist`); what it
/// removed, for the report (`.git/config: core.fsmonitor`, `.git/config: replaced (…)`).
fn clean_config(git: &Path) -> Vec<String> {
    match allowlist::clean(Path::new(GIT), git) {
        Ok(allowlist::Cleaned::Kept) => Vec::new(),
        Ok(allowlist::Cleaned::Removed(keys)) => keys
            .into_iter()
            .map(|key| format!(".git/config: {key}"))
            .collect(),
        Ok(allowlist::Cleaned::Replaced(reason)) => {
            vec![format!(".git/config: replaced ({reason})")]
        }
        // Neither cleaned nor replaced: take it away rather than leave it.
        Err(_) => match std::fs::remove_file(git.join("config")) {
            Ok(()) => vec![".git/config: removed".to_owned()],
            Err(_) => vec![".git/config: could not be cleaned".to_owned()],
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{GIT_CODE_PATHS, clean_new_at, snapshot};

    /// Stand-ins are made only for the code paths a git dir lacks, never through a link, and
    /// stay while any command holding them runs: the last to end removes them, leaving the git
    /// dir as it was.
    #[test]
    fn stand_ins_stay_while_any_holder_runs_and_never_leave_the_git_dir() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let git = workspace.join(".git");
        std::fs::create_dir_all(git.join("info")).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        let listing = |path: &std::path::Path| {
            let mut names: Vec<String> = walk(path);
            names.sort();
            names
        };
        fn walk(path: &std::path::Path) -> Vec<String> {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(path).unwrap().flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().unwrap().is_dir() {
                    names.extend(
                        walk(&entry.path())
                            .into_iter()
                            .map(|n| format!("{name}/{n}")),
                    );
                }
                names.push(name);
            }
            names
        }
        let before = listing(&git);
        let first = snapshot(&workspace, &git, true);
        let second = snapshot(&workspace, &git, true);
        assert!(first.missing.is_empty() && second.missing.is_empty());
        assert_eq!(std::fs::read(git.join("commondir")).unwrap(), b".\n");
        assert_eq!(std::fs::read(git.join("config")).unwrap(), b"[core]\n");
        for code in GIT_CODE_PATHS {
            assert!(git.join(code).exists(), "{code}");
        }
        drop(first);
        assert!(
            git.join("commondir").exists(),
            "the second command still runs"
        );
        assert!(git.join("hooks").is_dir());
        drop(second);
        assert_eq!(listing(&git), before);

        // A `.git` that is a link (planted by another command) gets nothing through it.
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let linked = dir.path().join("ws2");
        std::fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(&outside, linked.join(".git")).unwrap();
        let held = snapshot(&linked, &linked.join(".git"), true);
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        drop(held);
        // A folder on the way swapped for a link: nothing is made beyond it either.
        let nested = dir.path().join("ws3");
        std::fs::create_dir(&nested).unwrap();
        std::fs::create_dir_all(outside.join(".git")).unwrap();
        std::os::unix::fs::symlink(&outside, nested.join("sub")).unwrap();
        let held = snapshot(&nested, &nested.join("sub/.git"), true);
        assert_eq!(std::fs::read_dir(outside.join(".git")).unwrap().count(), 0);
        // Nothing exists behind the link's `.git` either, so every code path is missing; an
        // existing one would not be (the check after the command removes what is missing).
        assert_eq!(held.missing.len(), GIT_CODE_PATHS.len());
        drop(held);
        std::fs::create_dir(outside.join(".git/hooks")).unwrap();
        let held = snapshot(&nested, &nested.join("sub/.git"), true);
        assert!(!held.missing.contains(&"hooks"), "{:?}", held.missing);
    }

    /// A repository the command made whose parts are links out of the workspace: the cleaning
    /// removes the links and never writes or removes what they point at.
    #[test]
    fn cleaning_a_new_repository_never_follows_its_links_out() {
        // (the link the command planted, relative to the workspace; its target, in outside;
        //  the git dir cleaned; what the report names)
        let cases: &[(&str, &str, &str, &[&str])] = &[
            (".git", "repo", ".git", &[".git"]),
            ("a/.git/config", "repo/config", "a/.git", &[".git/config"]),
            ("b/.git/hooks", "repo/hooks", "b/.git", &[".git/hooks"]),
            ("c", "repo", "c/.git", &[]),
            ("d/.git/modules", "repo", "d/.git", &[".git/modules"]),
        ];
        for (link, target, git, report) in cases {
            let dir = tempfile::tempdir().unwrap();
            let workspace = dir.path().join("ws");
            let outside = dir.path().join("outside");
            std::fs::create_dir_all(outside.join("repo/hooks")).unwrap();
            std::fs::create_dir_all(outside.join("repo/.git")).unwrap();
            std::fs::write(outside.join("repo/config"), "[core]\n\tfsmonitor = x\n").unwrap();
            std::fs::write(outside.join("repo/hooks/pre-commit"), "kept").unwrap();
            std::fs::write(
                outside.join("repo/.git/config"),
                "[core]\n\tfsmonitor = x\n",
            )
            .unwrap();
            std::fs::create_dir_all(&workspace).unwrap();
            let planted = workspace.join(link);
            std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(outside.join(target), &planted).unwrap();
            let cleaned = clean_new_at(&workspace, &workspace.join(git));
            assert_eq!(&cleaned, report, "{link}");
            for (file, bytes) in [
                ("repo/config", "[core]\n\tfsmonitor = x\n"),
                ("repo/hooks/pre-commit", "kept"),
                ("repo/.git/config", "[core]\n\tfsmonitor = x\n"),
            ] {
                assert_eq!(
                    std::fs::read_to_string(outside.join(file)).unwrap(),
                    bytes,
                    "{link}: {file}"
                );
            }
        }
    }
}
