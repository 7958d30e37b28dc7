//! The sorted, ignore-aware walk shared by `search_files` and `glob_files` (F3, F4).
//!
//! The walk lists directories itself, through the workspace handle: each directory is opened
//! beneath the root without following a final symlink, so it never lists anything outside, even
//! when a directory is swapped for a symlink behind its back. It always starts at the workspace
//! root so that every ignore file between the root and the searched folder applies; a scope
//! filter prunes everything outside the folder. It never follows symlinks and yields regular
//! files, plus the FIFOs, sockets and devices it passes so callers can report them.
//!
//! Ignore files (`.ignore`, `.gitignore`, `.git/info/exclude` next to a `.git` folder) are
//! untrusted input: a command can make one a FIFO (opening it would block forever), a symlink to
//! `/dev/zero` (reading it never ends) or a link outside the workspace. They are never read by
//! path. [`Workspace::read_untrusted`] opens each beneath the root, non-blocking, regular files
//! only, at most [`IGNORE_FILE_MAX_BYTES`]; the matcher is built from those bytes with
//! `ignore::gitignore` (git's syntax and precedence, as ripgrep applies it). One that cannot be
//! used is skipped and reported in [`Walk::skipped`]. Never read: ignore files above the root, the
//! user's global gitignore, and a worktree's exclude file (a `.git` *file* points outside).

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::FileType;

use crate::escape::escape_control;
use crate::hidden::HiddenCheck;
use crate::workspace::{DirectoryEntry, Workspace, WorkspacePath, file_kind_name};

/// Version-control folders: never entered, even when named as the scope.
const VCS_DIRECTORIES: &[&str] = &[".git", ".hg", ".svn"];

/// Directories never entered, whatever the ignore files say, unless the scope names one (or a
/// folder inside one): then the walk goes where it was asked, as `rg PATTERN node_modules/` does.
pub(crate) const SKIPPED_DIRECTORIES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "dist",
    "coverage",
    "target",
];

/// The largest ignore file read; a larger one is skipped and reported.
pub(crate) const IGNORE_FILE_MAX_BYTES: u64 = 1024 * 1024;

/// At most this many folders left out as ignored are named in a result; the rest are counted.
const NOT_ENTERED_NAMED: usize = 5;

/// At most this many skipped entries are named in a result; the rest are counted.
const SKIPPED_NOTES_MAX: usize = 20;

/// The ignore files of one directory, in git's order of precedence (first wins).
pub(crate) const IGNORE_FILES: [&str; 3] = [".ignore", ".gitignore", ".git/info/exclude"];

/// A file found by the walk.
pub(crate) struct WalkedFile {
    /// Workspace-relative, `/`-separated, built from directory entries: already normalized (no
    /// `.`, `..` or empty component), so it is opened as is.
    pub relative: String,
    /// Where the last component starts in `relative` (one allocation per file, not two).
    name_start: usize,
}

impl WalkedFile {
    /// The last component.
    pub(crate) fn name(&self) -> &str {
        &self.relative[self.name_start..]
    }
}

/// What the walk yields: a regular file, or a special file (FIFO, socket, device) to report.
pub(crate) enum Walked {
    File(WalkedFile),
    Special(WalkedFile, &'static str),
}

/// An entry the walk or its caller did not use, and why (reported in the result).
pub(crate) struct Skipped {
    pub relative: String,
    pub reason: String,
}

impl Skipped {
    /// A special file found among the walked files.
    pub(crate) fn special(file: &WalkedFile, kind: &'static str) -> Skipped {
        Skipped {
            relative: file.relative.clone(),
            reason: format!("not a regular file ({kind})"),
        }
    }
}

/// Files under `scope` in a deterministic order (siblings sorted by name, depth first). Entries
/// whose names are not UTF-8 are skipped and counted in `skipped_non_utf8`.
pub(crate) struct Walk<'w> {
    workspace: &'w Workspace,
    root: PathBuf,
    scope: String,
    /// The open directories from the root down to the current one.
    frames: Vec<Frame>,
    pub skipped_non_utf8: u64,
    /// Ignore files that could not be used, in the order met.
    pub skipped: Vec<Skipped>,
    /// Every directory the walk entered (workspace-relative, the root as `""`): what it did not
    /// enter is ignored or skipped.
    pub entered: Vec<String>,
    /// The hidden set as of this walk: covered files and folders are left out by name.
    hidden: HiddenCheck<'w>,
    /// Files left out because the hidden set covers them (folders count as one).
    pub hidden_skipped: u64,
    /// Folders inside the scope left out as ignored (an ignore file or [`SKIPPED_DIRECTORIES`]),
    /// in the order met; version-control folders are not listed.
    pub not_entered: Vec<String>,
}

/// A directory being walked: its remaining entries and its ignore rules.
struct Frame {
    relative: String,
    entries: std::vec::IntoIter<DirectoryEntry>,
    /// One matcher per [`IGNORE_FILES`] entry.
    rules: [Gitignore; 3],
    /// Whether any of `rules` has a pattern (most directories have no ignore file).
    has_rules: bool,
}

impl<'w> Walk<'w> {
    pub(crate) fn new(workspace: &'w Workspace, scope: &WorkspacePath) -> Walk<'w> {
        let mut walk = Walk {
            workspace,
            root: workspace.root().to_path_buf(),
            scope: scope.as_str().to_owned(),
            frames: Vec::new(),
            skipped_non_utf8: 0,
            skipped: Vec::new(),
            entered: Vec::new(),
            hidden: workspace.hidden_check(),
            hidden_skipped: 0,
            not_entered: Vec::new(),
        };
        walk.enter(String::new());
        walk
    }

    /// Lists `relative` and loads its ignore files; an unreadable directory is skipped.
    fn enter(&mut self, relative: String) {
        self.entered.push(relative.clone());
        let Ok(mut entries) = self.workspace.list_directory(&relative) else {
            return;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let present = |name: &str| entries.iter().any(|entry| entry.name == name);
        let wanted = [present(".ignore"), present(".gitignore"), present(".git")];
        let directory = self.root.join(&relative);
        let rules = std::array::from_fn(|index| {
            if !wanted[index] {
                return Gitignore::empty();
            }
            let file = join(&relative, IGNORE_FILES[index]);
            self.load_rules(&directory, file)
        });
        let has_rules = rules.iter().any(|rules| !rules.is_empty());
        self.frames.push(Frame {
            relative,
            entries: entries.into_iter(),
            rules,
            has_rules,
        });
    }

    /// The matcher of one ignore file, built from bytes read through the handle.
    fn load_rules(&mut self, directory: &Path, file: String) -> Gitignore {
        load_ignore_rules(self.workspace, directory, file).unwrap_or_else(|skipped| {
            self.skipped.push(skipped);
            Gitignore::empty()
        })
    }

    /// Whether the rules of the open directories ignore `relative`: for each kind of ignore
    /// file in precedence order, the deepest directory with an opinion decides.
    fn ignored(&self, relative: &str, is_dir: bool) -> bool {
        // The common case (no ignore file on the way) costs no path building.
        if !self.frames.iter().any(|frame| frame.has_rules) {
            return false;
        }
        let path = self.root.join(relative);
        for kind in 0..IGNORE_FILES.len() {
            for frame in self.frames.iter().rev() {
                match frame.rules[kind].matched(&path, is_dir) {
                    Match::None => continue,
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
        }
        false
    }
}

impl Iterator for Walk<'_> {
    type Item = Walked;

    fn next(&mut self) -> Option<Walked> {
        loop {
            let frame = self.frames.last_mut()?;
            let Some(entry) = frame.entries.next() else {
                self.frames.pop();
                continue;
            };
            let Some(name) = entry.name.to_str() else {
                if entry.kind == FileType::RegularFile {
                    self.skipped_non_utf8 += 1;
                }
                continue;
            };
            let relative = join(&frame.relative, name);
            let is_dir = entry.kind == FileType::Directory;
            if is_dir && VCS_DIRECTORIES.contains(&name) {
                continue;
            }
            if !in_scope(&relative, &self.scope, is_dir) {
                continue;
            }
            // The scope itself and the folders on the way to it are entered whatever the ignore
            // rules say: the caller named them.
            let named = is_dir && Path::new(&self.scope).starts_with(&relative);
            if !named
                && ((is_dir && SKIPPED_DIRECTORIES.contains(&name))
                    || self.ignored(&relative, is_dir))
            {
                if is_dir {
                    self.not_entered.push(relative);
                }
                continue;
            }
            if !self.hidden.is_empty() && self.hidden.by_path(&self.root.join(&relative)).is_some()
            {
                self.hidden_skipped += 1;
                continue;
            }
            let file = WalkedFile {
                name_start: relative.len() - name.len(),
                relative,
            };
            match entry.kind {
                FileType::Directory => self.enter(file.relative),
                FileType::RegularFile => return Some(Walked::File(file)),
                // Never followed: the files they lead to inside are walked under their own name.
                FileType::Symlink | FileType::Unknown => {}
                // An ignore file that is special was reported when its directory was entered.
                _ if IGNORE_FILES.contains(&name) => {}
                kind => return Some(Walked::Special(file, file_kind_name(kind))),
            }
        }
    }
}

/// The matcher of the ignore file `file` (workspace-relative) of `directory` (absolute), built
/// from bytes read through the handle; an unusable one is the [`Skipped`] to report.
pub(crate) fn load_ignore_rules(
    workspace: &Workspace,
    directory: &Path,
    file: String,
) -> Result<Gitignore, Skipped> {
    let bytes = match workspace.read_untrusted(&file, IGNORE_FILE_MAX_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(Gitignore::empty()),
        Err(reason) => {
            return Err(Skipped {
                relative: file,
                reason: format!("{reason}; its ignore rules were not applied"),
            });
        }
    };
    let mut builder = GitignoreBuilder::new(directory);
    let text = String::from_utf8_lossy(&bytes);
    for line in text.strip_prefix('\u{feff}').unwrap_or(&text).lines() {
        // A line git cannot parse is skipped, as the `ignore` crate does with its own reads.
        let _ = builder.add_line(None, line);
    }
    builder.build().map_err(|error| Skipped {
        relative: file,
        reason: format!("cannot be parsed ({error}); its ignore rules were not applied"),
    })
}

/// The note naming the folders a walk left out as ignored (at most [`NOT_ENTERED_NAMED`] by
/// name, names escaped), and how to search one.
pub(crate) fn not_entered_note(folders: &[String]) -> Option<String> {
    if folders.is_empty() {
        return None;
    }
    let mut named: Vec<String> = folders
        .iter()
        .take(NOT_ENTERED_NAMED)
        .map(|folder| format!("{}/", escape_control(folder)))
        .collect();
    if folders.len() > NOT_ENTERED_NAMED {
        named.push(format!("… and {} more", folders.len() - NOT_ENTERED_NAMED));
    }
    Some(format!(
        "[ignored folders not searched: {} (an ignore file or a build/dependency folder); name \
         one as `path` to search it]",
        named.join(", ")
    ))
}

/// One note line per skipped entry (names escaped), at most [`SKIPPED_NOTES_MAX`] of them.
pub(crate) fn skipped_notes(skipped: &[Skipped]) -> Vec<String> {
    let mut notes: Vec<String> = skipped
        .iter()
        .take(SKIPPED_NOTES_MAX)
        .map(|entry| {
            format!(
                "[skipped {}: {}]",
                escape_control(&entry.relative),
                entry.reason
            )
        })
        .collect();
    if skipped.len() > SKIPPED_NOTES_MAX {
        notes.push(format!(
            "[… and {} more skipped]",
            skipped.len() - SKIPPED_NOTES_MAX
        ));
    }
    notes
}

/// `parent/name`, or `name` at the root.
pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// Whether the walk should keep `relative`: inside the scope, or a directory on the way to it.
fn in_scope(relative: &str, scope: &str, is_dir: bool) -> bool {
    if scope.is_empty() {
        return true;
    }
    let (relative, scope) = (Path::new(relative), Path::new(scope));
    relative.starts_with(scope) || (is_dir && scope.starts_with(relative))
}
