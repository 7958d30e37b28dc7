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
//! - **`run_command` ([`GitLock::CodePaths`])**: every code path that *exists* (`hooks`, `config`,
//!   `commondir`, `worktrees`, …), so `git add`, `commit` and `checkout` keep working. A bind mount
//!   cannot protect a path that does not exist yet, and git needs to create files at the top of
//!   its git dir (`index.lock`, `HEAD.lock`, `ORIG_HEAD`), so a command can create a missing
//!   `.git/commondir` (pointing git at a directory with its own hooks), `config.worktree`,
//!   `worktrees/*`, a first `hooks/`, until it ends. That window is open for the foreground
//!   command's duration (bounded by its timeout) and is closed by the check below.
//!
//! Ways considered to close the foreground window, and why not: creating the missing code paths
//! beforehand so they can be bound read-only works for directories only (an empty `hooks/`), and
//! changes the user's repository, read-only workspaces included; a missing *file* has no harmless
//! stand-in (git uses any `commondir` content as the common dir, and dies on an empty or unreadable
//! one). Watching the git dirs (inotify) and removing what appears still leaves a window per
//! write, which a loop rewriting the file keeps open. Landlock and seccomp cannot tell
//! `index.lock` from `commondir`: both are a new file in the same directory.
//!
//! After the command's whole process tree is gone (so nothing races it), [`Repositories::restore`]
//! takes back whatever the command created at a missing code path and makes every repository the
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
    /// Code paths that did not exist (relative to `.git`).
    missing: Vec<&'static str>,
}

/// How much of each repository's git dir a command's view makes read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GitLock {
    /// The existing code paths (`run_command`): the rest stays writable, so `git add`,
    /// `commit` and `checkout` work; what the command creates at a missing code path is taken
    /// back when it ends.
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
    pub(crate) fn before(workspace: &Path, lock: GitLock) -> Repositories {
        let own = workspace.join(".git");
        let (found, cut) = scan(workspace);
        let mut snapshots = vec![snapshot(&own)];
        snapshots.extend(
            found
                .iter()
                .filter(|git| **git != own)
                .map(|git| snapshot(git)),
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

/// Takes the snapshot of one `.git` (a directory, a `gitdir:` file, or nothing).
fn snapshot(git_dir: &Path) -> GitSnapshot {
    let absent = std::fs::symlink_metadata(git_dir).is_err();
    let missing = if absent {
        Vec::new()
    } else {
        GIT_CODE_PATHS
            .iter()
            .copied()
            .filter(|name| std::fs::symlink_metadata(git_dir.join(name)).is_err())
            .collect()
    };
    GitSnapshot {
        git_dir: git_dir.to_path_buf(),
        absent,
        missing,
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
    use super::clean_new_at;

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
