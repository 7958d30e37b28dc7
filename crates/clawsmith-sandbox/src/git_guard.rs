//! The post-command check of the workspace's repositories' code-execution points.
//!
//! During a command, the built view keeps every repository's `.git` of the workspace pinned (it
//! cannot be renamed, removed or replaced) and binds read-only every code path that *exists*:
//! `hooks`, `config`, `commondir`, `worktrees`, … (see [`scan`] for which repositories: the
//! workspace's own and the nested ones, `sub/.git`). A bind mount cannot protect a path that does
//! not exist yet, so a command could still create `.git/commondir` (pointing git at a directory
//! with its own hooks), `.git/config.worktree`, `.git/worktrees/*`, or a whole new repository
//! (`git init` at the root or in any subdirectory) with planted hooks or a `core.fsmonitor` in its
//! config. This check runs after the command's whole process tree is gone (so nothing races it),
//! takes back whatever the command created there — a new repository keeps its objects and refs,
//! loses what would run — and reports it: the user's next `git` command, in the workspace or in a
//! nested repository, runs no planted code.
//!
//! [`scan`] walks directories only, without following links, skipping the usual heavy trees
//! (`node_modules`, `target`, virtual environments, caches) and stopping after
//! [`SCAN_MAX_DIRS`] directories; a repository beyond is not protected, and the report says the
//! scan was cut.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::platform::GIT_CODE_PATHS;

/// Hook names git ships as samples; anything else in a new repository's `hooks/` would run.
const SAMPLE_SUFFIX: &str = ".sample";

/// `section.key` (lowercase; `*` for any subsection) whose value makes git run a program or
/// read more configuration.
const DANGEROUS_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.editor",
    "core.pager",
    "core.askpass",
    "core.gitproxy",
    "core.worktree",
    "sequence.editor",
    "diff.external",
    "gpg.program",
    "gpg.*.program",
    "credential.helper",
    "credential.*.helper",
    "include.path",
    "includeif.*.path",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "uploadpack.packobjectshook",
    "alias.*",
    "pager.*",
];

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

/// Every repository of the workspace before the command.
#[derive(Debug)]
pub(crate) struct Repositories {
    workspace: PathBuf,
    /// The workspace's own `.git` (present or not) first, then the nested ones found.
    snapshots: Vec<GitSnapshot>,
    /// Whether the scan was cut (repositories deeper than it went are not protected).
    cut: bool,
}

impl Repositories {
    /// Scans `workspace` and takes the snapshot of each repository.
    pub(crate) fn before(workspace: &Path) -> Repositories {
        let own = workspace.join(".git");
        let (found, cut) = scan(workspace);
        let mut snapshots = vec![snapshot(&own)];
        snapshots.extend(
            found
                .iter()
                .filter(|git| **git != own)
                .map(|git| snapshot(git)),
        );
        Repositories {
            workspace: workspace.to_path_buf(),
            snapshots,
            cut,
        }
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
    pub(crate) fn restore(&self) -> Vec<String> {
        let mut restored = Vec::new();
        let relative = |git: &Path, what: String| {
            let base = git
                .parent()
                .and_then(|dir| dir.strip_prefix(&self.workspace).ok())
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| format!("{}/", dir.display()))
                .unwrap_or_default();
            format!("{base}{what}")
        };
        for snapshot in &self.snapshots {
            for what in snapshot.restore() {
                restored.push(relative(&snapshot.git_dir, what));
            }
        }
        // Repositories the command made anywhere else in the workspace.
        let (after, _) = scan(&self.workspace);
        for git in after {
            if self.snapshots.iter().any(|s| s.git_dir == git) {
                continue;
            }
            let new = GitSnapshot {
                git_dir: git.clone(),
                absent: true,
                missing: Vec::new(),
            };
            for what in new.restore() {
                restored.push(relative(&git, what));
            }
        }
        if self.cut && !restored.is_empty() {
            restored.push(format!(
                "(repository scan cut at {SCAN_MAX_DIRS} directories)"
            ));
        }
        restored
    }
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
    pub(crate) fn restore(&self) -> Vec<String> {
        let mut restored = Vec::new();
        let Ok(meta) = std::fs::symlink_metadata(&self.git_dir) else {
            return restored;
        };
        if self.absent {
            // A repository the command made: keep it, without anything that would run.
            if meta.file_type().is_symlink() || meta.is_file() {
                // A link or `gitdir:` file pointing git somewhere the command chose.
                if std::fs::remove_file(&self.git_dir).is_ok() {
                    restored.push(".git".to_owned());
                }
                return restored;
            }
            restored.extend(self.clean_new_repository());
            return restored;
        }
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

    fn clean_new_repository(&self) -> Vec<String> {
        let mut restored = Vec::new();
        for name in [
            "commondir",
            "gitdir",
            "config.worktree",
            "worktrees",
            "modules",
        ] {
            if remove_any(&self.git_dir.join(name)) {
                restored.push(format!(".git/{name}"));
            }
        }
        let hooks = self.git_dir.join("hooks");
        if let Ok(meta) = std::fs::symlink_metadata(&hooks) {
            if meta.is_dir() {
                let entries = std::fs::read_dir(&hooks).into_iter().flatten().flatten();
                for entry in entries {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if !name.ends_with(SAMPLE_SUFFIX) && remove_any(&entry.path()) {
                        restored.push(format!(".git/hooks/{name}"));
                    }
                }
            } else if remove_any(&hooks) {
                restored.push(".git/hooks".to_owned());
            }
        }
        let config = self.git_dir.join("config");
        if let Ok(meta) = std::fs::symlink_metadata(&config) {
            if !meta.is_file() {
                if remove_any(&config) {
                    restored.push(".git/config".to_owned());
                }
            } else if let Ok(text) = std::fs::read_to_string(&config) {
                let (kept, removed) = without_dangerous_keys(&text);
                if !removed.is_empty() && std::fs::write(&config, kept).is_ok() {
                    restored.extend(removed.into_iter().map(|key| format!(".git/config: {key}")));
                }
            }
        }
        restored
    }
}

/// Removes a file, link or directory tree without following links; whether something was there.
fn remove_any(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path).is_ok(),
        Ok(_) => std::fs::remove_file(path).is_ok(),
        Err(_) => false,
    }
}

/// The config text without the entries that make git run code (and without `[include]`
/// sections' paths); the removed `section.key` names.
pub(crate) fn without_dangerous_keys(text: &str) -> (String, BTreeSet<String>) {
    let mut kept = String::with_capacity(text.len());
    let mut removed = BTreeSet::new();
    let mut section = String::new();
    let mut subsection = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix('[') {
            let header = header.split(']').next().unwrap_or_default();
            let mut parts = header.splitn(2, [' ', '.']);
            section = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            subsection = parts.next().is_some();
            kept.push_str(line);
            continue;
        }
        let key = trimmed
            .split(['=', ' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if key.is_empty() || key.starts_with(['#', ';']) {
            kept.push_str(line);
            continue;
        }
        let name = if subsection {
            format!("{section}.*.{key}")
        } else {
            format!("{section}.{key}")
        };
        let dangerous = DANGEROUS_KEYS.iter().any(|pattern| {
            *pattern == name
                || pattern
                    .strip_suffix(".*")
                    .is_some_and(|prefix| !subsection && section == prefix)
        });
        if dangerous {
            removed.insert(name);
        } else {
            kept.push_str(line);
        }
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::without_dangerous_keys;

    #[test]
    fn dangerous_keys_are_removed_and_the_rest_kept() {
        let cases = [
            (
                "[core]\n\tfsmonitor = evil\n\tbare = false\n",
                "[core]\n\tbare = false\n",
                1,
            ),
            ("[core]\nhooksPath=/x\n", "[core]\n", 1),
            (
                "[filter \"lfs\"]\n\tclean = evil %f\n",
                "[filter \"lfs\"]\n",
                1,
            ),
            ("[alias]\n\tst = !evil\n", "[alias]\n", 1),
            ("[include]\n\tpath = ../x\n", "[include]\n", 1),
            (
                "[includeIf \"gitdir:/\"]\n\tpath = x\n",
                "[includeIf \"gitdir:/\"]\n",
                1,
            ),
            (
                "[user]\n\tname = A\n# comment\n",
                "[user]\n\tname = A\n# comment\n",
                0,
            ),
            (
                "[remote \"origin\"]\n\turl = x\n",
                "[remote \"origin\"]\n\turl = x\n",
                0,
            ),
        ];
        for (input, expected, count) in cases {
            let (kept, removed) = without_dangerous_keys(input);
            assert_eq!(kept, expected, "{input:?}");
            assert_eq!(removed.len(), count, "{input:?}: {removed:?}");
        }
    }
}
