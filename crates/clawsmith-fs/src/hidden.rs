//! Hidden paths, enforced by what a name leads to rather than by how it is spelled.
//!
//! A [`HiddenPaths`] set holds the `hidden_paths` entries of a workspace (literal paths such as
//! `.env` or `secrets`, and globs such as `secrets/**` or `**/*.pem`; a directory stands for
//! everything under it). Every handle that carries it ([`crate::Workspace::with_hidden`]) checks
//! each file it opens for a reader, after the open, against:
//! - the **resolved path**: where the kernel actually opened the file (`/proc/self/fd/N`),
//!   beneath the root the entries are relative to, matched against every entry;
//! - the **identity** (`st_dev`, `st_ino`) of each literal entry, taken freshly for every call
//!   (a hidden file replaced by a new inode stays hidden, and a hard link to it is caught);
//! - for a file with more than one link, the identities of every file the entries cover (a hard
//!   link to `secrets/key` placed elsewhere), collected by a bounded walk beneath the root
//!   ([`HIDDEN_WALK_MAX_ENTRIES`]); when the walk is cut short, every file with more than one
//!   link is treated as hidden (fail closed).
//!
//! Symlinks need no identity: the resolved path names the file they lead to. Restores
//! (checkpoint writes) are not reads for the model and do not consult the set.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use globset::{GlobBuilder, GlobMatcher};
use rustix::fs::{FileType, Mode, OFlags, Stat};

use crate::error::FsError;
use crate::workspace::{DirectoryEntry, Workspace};

/// The most directory entries the walk behind [`Workspace::hidden_matches`] and the hard-link
/// check lists; past it the answer is incomplete (reported, and hard links fail closed).
pub const HIDDEN_WALK_MAX_ENTRIES: usize = 20_000;

/// The `hidden_paths` entries of a workspace, relative to its canonical root (an absolute entry
/// is kept absolute). Shared behind an `Arc` by every handle that reads workspace files.
#[derive(Debug)]
pub struct HiddenPaths {
    /// A handle on the root without a hidden set: stats and walks for the set go through it.
    base: Workspace,
    entries: Vec<HiddenEntry>,
}

#[derive(Debug)]
struct HiddenEntry {
    /// As written, normalized (`./` and a trailing `/` dropped).
    text: String,
    /// No glob character: the path itself is stat'd for its identity.
    literal: bool,
    /// The pattern and `pattern/**` (a directory hides what is inside it).
    matchers: [GlobMatcher; 2],
    /// The components before the first glob character: where the walk starts.
    literal_prefix: String,
}

/// Why a file is hidden: the entry that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HiddenMatch {
    pub entry: String,
}

/// One call's view of the set: the identities of the literal entries as they are now, and
/// (computed on the first file with several links) those of every covered file.
pub(crate) struct HiddenCheck<'h> {
    hidden: Option<&'h HiddenPaths>,
    literal_identities: Vec<((u64, u64), usize)>,
    linked: OnceLock<Covered>,
}

/// What a bounded walk of the covered places found.
#[derive(Debug, Default)]
struct Covered {
    /// The top-most matched paths (a matched directory stands for its content).
    paths: Vec<String>,
    /// `(st_dev, st_ino)` of each covered regular file with more than one link → entry index.
    linked: HashMap<(u64, u64), usize>,
    /// Whether the walk stopped at [`HIDDEN_WALK_MAX_ENTRIES`].
    truncated: bool,
}

/// A walk listed [`HIDDEN_WALK_MAX_ENTRIES`] entries and stopped.
struct BudgetSpent;

const GLOB_CHARACTERS: [char; 4] = ['*', '?', '[', '{'];

impl HiddenPaths {
    /// The set for the workspace at `root` with `patterns` (workspace-relative literals or
    /// globs; an absolute literal is kept as is). A bad glob is an error naming it.
    pub fn new<S: AsRef<str>>(
        root: impl AsRef<Path>,
        patterns: impl IntoIterator<Item = S>,
    ) -> Result<HiddenPaths, FsError> {
        let base = Workspace::open(root)?;
        let mut entries = Vec::new();
        for pattern in patterns {
            let text = pattern
                .as_ref()
                .trim()
                .trim_start_matches("./")
                .trim_end_matches('/');
            if text.is_empty() {
                continue;
            }
            let text = match Path::new(text).strip_prefix(base.root()) {
                Ok(relative) if Path::new(text).is_absolute() => {
                    relative.to_string_lossy().into_owned()
                }
                _ => text.to_owned(),
            };
            let glob = |pattern: &str| {
                GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map(|glob| glob.compile_matcher())
                    .map_err(|error| FsError::HiddenPattern {
                        pattern: text.clone(),
                        message: error.to_string(),
                    })
            };
            let literal = !text.contains(GLOB_CHARACTERS);
            let literal_prefix = text
                .split('/')
                .take_while(|part| !part.contains(GLOB_CHARACTERS))
                .collect::<Vec<_>>()
                .join("/");
            entries.push(HiddenEntry {
                matchers: [glob(&text)?, glob(&format!("{text}/**"))?],
                literal,
                literal_prefix: if literal {
                    String::new()
                } else {
                    literal_prefix
                },
                text,
            });
        }
        Ok(HiddenPaths { base, entries })
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The canonical root the entries are relative to.
    pub fn root(&self) -> &Path {
        self.base.root()
    }

    /// The entries, normalized.
    pub fn entries(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.text.as_str())
    }

    /// What a command's view must cover now, as absolute paths: every literal entry (whether
    /// or not it exists yet), what the glob entries match (top-most: a matched directory, not
    /// its content), and every other name of a covered file with several links (a hard link
    /// elsewhere in the workspace). Found by walks beneath the root that never follow a
    /// symlink, each listing at most [`HIDDEN_WALK_MAX_ENTRIES`] entries; the second (the
    /// whole workspace) runs only when a covered file has several links.
    pub fn command_paths(&self) -> Vec<PathBuf> {
        let mut relative: Vec<String> = Vec::new();
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in self.entries.iter().filter(|entry| entry.literal) {
            // `join` keeps an absolute entry as it is.
            paths.push(self.root().join(&entry.text));
            relative.push(entry.text.clone());
        }
        if self.is_empty() {
            return paths;
        }
        let covered = self.walk(true);
        let linked = self.linked_names(&covered.linked);
        for path in covered.paths.into_iter().chain(linked) {
            if !relative.contains(&path) {
                paths.push(self.root().join(&path));
                relative.push(path);
            }
        }
        paths
    }

    /// The names beneath the root of the files in `linked` (by identity), outside the places
    /// the entries cover by name.
    fn linked_names(&self, linked: &HashMap<(u64, u64), usize>) -> Vec<String> {
        if linked.is_empty() {
            return Vec::new();
        }
        let inodes: std::collections::HashSet<u64> = linked.keys().map(|(_, ino)| *ino).collect();
        let mut names = Vec::new();
        let mut budget = HIDDEN_WALK_MAX_ENTRIES;
        let mut pending = vec![String::new()];
        while let Some(directory) = pending.pop() {
            let Ok(children) = self.children(&directory, &mut budget) else {
                return names;
            };
            for (child, entry) in children {
                match entry.kind {
                    FileType::Directory => pending.push(child),
                    FileType::RegularFile if inodes.contains(&entry.ino) => {
                        if self.entry_index(&child).is_none()
                            && let Some(stat) = self.base.lstat_beneath(&child)
                            && linked.contains_key(&(stat.st_dev, stat.st_ino))
                        {
                            names.push(child);
                        }
                    }
                    _ => {}
                }
            }
        }
        names
    }

    /// The entry matching the absolute path `path`, if any.
    pub(crate) fn match_path(&self, path: &Path) -> Option<HiddenMatch> {
        let relative = path.strip_prefix(self.root()).ok();
        self.entries
            .iter()
            .find(|entry| {
                let subject = if Path::new(&entry.text).is_absolute() {
                    Some(path)
                } else {
                    relative
                };
                subject.is_some_and(|subject| entry.matchers.iter().any(|m| m.is_match(subject)))
            })
            .map(|entry| HiddenMatch {
                entry: entry.text.clone(),
            })
    }

    /// The identity of every literal entry that exists now (followed when it is a symlink).
    fn literal_identities(&self) -> Vec<((u64, u64), usize)> {
        let mut identities = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            if !entry.literal {
                continue;
            }
            let stat = if Path::new(&entry.text).is_absolute() {
                rustix::fs::stat(entry.text.as_str()).ok()
            } else {
                self.base.stat_beneath(&entry.text)
            };
            if let Some(stat) = stat {
                identities.push(((stat.st_dev, stat.st_ino), index));
            }
        }
        identities
    }

    /// Walks from each entry's literal part, recording matched paths and (with `identities`)
    /// the identity of every covered regular file with more than one link.
    fn walk(&self, identities: bool) -> Covered {
        let mut covered = Covered::default();
        let mut budget = HIDDEN_WALK_MAX_ENTRIES;
        let mut starts: Vec<&str> = self
            .entries
            .iter()
            .filter(|entry| !Path::new(&entry.text).is_absolute())
            .filter(|entry| identities || !entry.literal)
            .map(|entry| {
                if entry.literal {
                    entry.text.as_str()
                } else {
                    entry.literal_prefix.as_str()
                }
            })
            .collect();
        starts.sort_unstable();
        starts.dedup();
        // A start under another start is walked with it.
        let starts: Vec<&str> = starts
            .iter()
            .filter(|start| {
                !starts
                    .iter()
                    .any(|other| other != *start && under(start, other))
            })
            .copied()
            .collect();
        for start in starts {
            let kind = if start.is_empty() {
                Some(FileType::Directory)
            } else {
                self.base
                    .lstat_beneath(start)
                    .map(|stat| FileType::from_raw_mode(stat.st_mode))
            };
            let Some(kind) = kind else { continue };
            let mut pending = vec![(start.to_owned(), kind, None::<usize>)];
            while let Some((relative, kind, inherited)) = pending.pop() {
                let matched = inherited.or_else(|| self.entry_index(&relative));
                if matched.is_some() && inherited.is_none() && !relative.is_empty() {
                    covered.paths.push(relative.clone());
                }
                match kind {
                    FileType::Directory => {
                        if matched.is_some() && !identities {
                            continue;
                        }
                        let Ok(children) = self.children(&relative, &mut budget) else {
                            covered.truncated = true;
                            return covered;
                        };
                        for (child, entry) in children {
                            pending.push((child, entry.kind, matched));
                        }
                    }
                    FileType::RegularFile if identities => {
                        if let Some(index) = matched
                            && let Some(stat) = self.base.lstat_beneath(&relative)
                            && stat.st_nlink > 1
                        {
                            covered.linked.insert((stat.st_dev, stat.st_ino), index);
                        }
                    }
                    _ => {}
                }
            }
        }
        covered.paths.sort_unstable();
        covered
    }

    /// The entries of `directory` with UTF-8 names, as workspace-relative paths (none when it
    /// cannot be listed), each taken from `budget`; `Err` once the budget is spent.
    fn children(
        &self,
        directory: &str,
        budget: &mut usize,
    ) -> Result<Vec<(String, DirectoryEntry)>, BudgetSpent> {
        let Ok(entries) = self.base.list_directory(directory) else {
            return Ok(Vec::new());
        };
        let mut children = Vec::with_capacity(entries.len());
        for entry in entries {
            *budget = budget.checked_sub(1).ok_or(BudgetSpent)?;
            let Some(name) = entry.name.to_str() else {
                continue;
            };
            let child = if directory.is_empty() {
                name.to_owned()
            } else {
                format!("{directory}/{name}")
            };
            children.push((child, entry));
        }
        Ok(children)
    }

    fn entry_index(&self, relative: &str) -> Option<usize> {
        self.entries.iter().position(|entry| {
            !Path::new(&entry.text).is_absolute()
                && entry.matchers.iter().any(|m| m.is_match(relative))
        })
    }
}

impl<'h> HiddenCheck<'h> {
    /// A check of `hidden` as it is now (`None`: nothing is hidden).
    pub(crate) fn new(hidden: Option<&'h HiddenPaths>) -> HiddenCheck<'h> {
        let hidden = hidden.filter(|hidden| !hidden.is_empty());
        HiddenCheck {
            literal_identities: hidden.map_or_else(Vec::new, HiddenPaths::literal_identities),
            hidden,
            linked: OnceLock::new(),
        }
    }

    /// Whether nothing is hidden (every check passes without a system call).
    pub(crate) fn is_empty(&self) -> bool {
        self.hidden.is_none()
    }

    /// The entry hiding the file at the absolute path `path`, by name.
    pub(crate) fn by_path(&self, path: &Path) -> Option<HiddenMatch> {
        self.hidden?.match_path(path)
    }

    /// The entry hiding the opened file `fd` (with `stat`): by where it really is, or by its
    /// identity.
    pub(crate) fn by_open_file(&self, fd: impl AsFd, stat: &Stat) -> Option<HiddenMatch> {
        let hidden = self.hidden?;
        let link = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
        );
        match std::fs::read_link(link) {
            Ok(resolved) => {
                if let Some(found) = hidden.match_path(&resolved) {
                    return Some(found);
                }
            }
            // Without the resolved path only the identities can tell: refuse rather than guess.
            Err(_) => {
                return Some(HiddenMatch {
                    entry: "(the opened file's path could not be checked)".to_owned(),
                });
            }
        }
        self.by_identity(stat)
    }

    /// The entry hiding a file with `stat` by identity: a literal entry's inode, or (for a file
    /// with several links) the inode of any covered file.
    pub(crate) fn by_identity(&self, stat: &Stat) -> Option<HiddenMatch> {
        let hidden = self.hidden?;
        let identity = (stat.st_dev, stat.st_ino);
        let entry = |index: usize| HiddenMatch {
            entry: hidden.entries[index].text.clone(),
        };
        if let Some((_, index)) = self
            .literal_identities
            .iter()
            .find(|(known, _)| *known == identity)
        {
            return Some(entry(*index));
        }
        if stat.st_nlink <= 1 {
            return None;
        }
        let covered = self.linked.get_or_init(|| hidden.walk(true));
        if let Some(index) = covered.linked.get(&identity) {
            return Some(entry(*index));
        }
        covered.truncated.then(|| HiddenMatch {
            entry: format!(
                "(a file with several links, and the hidden paths span more than \
                 {HIDDEN_WALK_MAX_ENTRIES} entries)"
            ),
        })
    }
}

/// Whether `path` is `ancestor` or lies under it (`""` is above everything).
fn under(path: &str, ancestor: &str) -> bool {
    ancestor.is_empty()
        || path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Workspace {
    /// `stat` of `relative` beneath the root, following symlinks that stay inside.
    pub(crate) fn stat_beneath(&self, relative: &str) -> Option<Stat> {
        self.stat_with(relative, OFlags::PATH)
    }

    /// `lstat` of `relative` beneath the root (a final symlink is not followed).
    pub(crate) fn lstat_beneath(&self, relative: &str) -> Option<Stat> {
        self.stat_with(relative, OFlags::PATH | OFlags::NOFOLLOW)
    }

    fn stat_with(&self, relative: &str, flags: OFlags) -> Option<Stat> {
        let relative = if relative.is_empty() { "." } else { relative };
        let fd = self.open_beneath_raw(relative, flags, Mode::empty()).ok()?;
        rustix::fs::fstat(&fd).ok()
    }
}
