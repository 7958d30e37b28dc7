//! The sorted, ignore-aware walk shared by `search_files` and `glob_files` (F3, F4).
//!
//! The walk always starts at the workspace root so that every `.gitignore` between the root and
//! the searched folder applies; a scope filter prunes everything outside the folder. It never
//! reads ignore files above the root (`parents(false)`) or the user's global gitignore, never
//! follows symlinks, and yields regular files only. A yielded name is only a candidate: callers
//! re-open it through the workspace handle, so a directory swapped for a symlink behind the
//! walker's back cannot lead outside.

use std::path::Path;

use ignore::WalkBuilder;

use crate::workspace::{Workspace, WorkspacePath};

/// Directories never entered, whatever the ignore files say.
pub(crate) const SKIPPED_DIRECTORIES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "dist",
    "coverage",
    "target",
];

/// A regular file found by the walk.
pub(crate) struct WalkedFile {
    /// Workspace-relative, `/`-separated.
    pub relative: String,
    /// The last component.
    pub name: String,
}

/// Regular files under `scope` in a deterministic order (siblings sorted by name, depth first).
/// Entries whose names are not UTF-8 are skipped and counted in `skipped_non_utf8`.
pub(crate) struct Walk {
    inner: ignore::Walk,
    root: std::path::PathBuf,
    pub skipped_non_utf8: u64,
}

impl Walk {
    pub(crate) fn new(workspace: &Workspace, scope: &WorkspacePath) -> Walk {
        let root = workspace.root().to_path_buf();
        let scope = scope.as_str().to_owned();
        let filter_root = root.clone();
        let mut builder = WalkBuilder::new(&root);
        builder
            .hidden(false)
            .parents(false)
            .ignore(true)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .filter_entry(move |entry| {
                let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
                if is_dir
                    && entry
                        .file_name()
                        .to_str()
                        .is_some_and(|name| SKIPPED_DIRECTORIES.contains(&name))
                {
                    return false;
                }
                in_scope(&filter_root, entry.path(), &scope, is_dir)
            });
        Walk {
            inner: builder.build(),
            root,
            skipped_non_utf8: 0,
        }
    }
}

impl Iterator for Walk {
    type Item = WalkedFile;

    fn next(&mut self) -> Option<WalkedFile> {
        loop {
            let entry = match self.inner.next()? {
                Ok(entry) => entry,
                // Unreadable directories and broken ignore files are skipped, not fatal.
                Err(_) => continue,
            };
            if !entry.file_type().is_some_and(|kind| kind.is_file()) {
                continue;
            }
            let Ok(relative) = entry.path().strip_prefix(&self.root) else {
                continue;
            };
            let Some(relative) = relative.to_str() else {
                self.skipped_non_utf8 += 1;
                continue;
            };
            let Some(name) = entry.file_name().to_str() else {
                self.skipped_non_utf8 += 1;
                continue;
            };
            return Some(WalkedFile {
                relative: relative.to_owned(),
                name: name.to_owned(),
            });
        }
    }
}

/// Whether the walk should keep `path`: inside the scope, or a directory on the way to it.
fn in_scope(root: &Path, path: &Path, scope: &str, is_dir: bool) -> bool {
    if scope.is_empty() {
        return true;
    }
    let Ok(relative) = path.strip_prefix(root) else {
        return false;
    };
    let scope = Path::new(scope);
    relative.starts_with(scope) || (is_dir && scope.starts_with(relative))
}
