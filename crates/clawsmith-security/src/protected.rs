//! Protected paths: where a file write needs more than the mode's default.
//!
//! Git runs what it finds in a repository's `.git` — hooks, `core.fsmonitor`, `core.pager`,
//! aliases, a `gitdir:` pointer to another directory — the next time the *user* runs `git`,
//! outside any sandbox. A file tool that may write `.git/config` can therefore run code, so a
//! write there is treated like a command: it needs `execute`-level approval in every mode below
//! `full`, and `full` never writes the places git executes from without an allow rule that names
//! them. Host-configured protected paths are treated like those.
//!
//! The check is lexical, on the path after `.`/`..` normalization, like the rules it sits beside:
//! it does not follow symlinks (this crate touches no files).

use globset::GlobMatcher;

use crate::permission::{RuleError, compile_glob};

/// How strongly a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protection {
    /// Inside a `.git` directory: a write needs `execute`-level approval below `full`.
    Approval,
    /// Where git executes from (hooks, config, `commondir`, worktrees, module hooks and config, a
    /// `.git` entry itself) or a configured protected path: as [`Protection::Approval`], and in
    /// `full` mode only an allow rule naming the path lets it be written.
    Explicit,
}

/// The protected paths of a policy: every `.git` directory and `.git` file of the workspace
/// (always), plus the configured globs.
#[derive(Debug, Clone, Default)]
pub struct ProtectedPaths {
    configured: PathSet,
}

/// Workspace-relative globs (`secrets/**`, `.env*`, `deploy`) where a plain directory stands for
/// everything under it: the configured part of [`ProtectedPaths`], and a policy's hidden paths.
#[derive(Debug, Clone, Default)]
pub struct PathSet {
    entries: Vec<ConfiguredPath>,
}

#[derive(Debug, Clone)]
struct ConfiguredPath {
    text: String,
    /// The pattern itself, and `pattern/**` (a directory protects what is inside it).
    matchers: [GlobMatcher; 2],
    /// The components before the first glob character.
    literal_prefix: String,
}

/// Names inside a `.git` directory that git executes or follows: `hooks/**`, `config`,
/// `config.worktree`, `commondir`, `worktrees/**`.
const GIT_EXECUTES_FROM: [&str; 5] = [
    "hooks",
    "config",
    "config.worktree",
    "commondir",
    "worktrees",
];

impl PathSet {
    /// No paths.
    pub fn new() -> PathSet {
        PathSet::default()
    }

    /// Adds a workspace-relative glob (`secrets/**`, `.env*`, `deploy`); a plain directory
    /// stands for everything under it.
    pub fn with(mut self, pattern: &str) -> Result<PathSet, RuleError> {
        let text = pattern
            .trim()
            .trim_start_matches("./")
            .trim_end_matches('/');
        if text.is_empty() {
            return Err(RuleError::Empty);
        }
        let glob = |pattern: &str| compile_glob(text, pattern, true);
        self.entries.push(ConfiguredPath {
            text: text.to_owned(),
            matchers: [glob(text)?, glob(&format!("{text}/**"))?],
            literal_prefix: literal_prefix(text),
        });
        Ok(self)
    }

    /// The patterns, as written (normalized).
    pub fn patterns(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|path| path.text.as_str())
    }

    /// Whether `path` (workspace-relative, normalized, `/`-separated) is in the set.
    pub fn contains(&self, path: &str) -> bool {
        self.entries
            .iter()
            .any(|entry| entry.matchers.iter().any(|m| m.is_match(path)))
    }

    /// Whether a pattern whose literal part is `prefix` names a place in the set: the prefix is
    /// in the set, or lies under an entry's own literal part.
    fn named_by_prefix(&self, prefix: &str) -> bool {
        self.entries.iter().any(|entry| {
            entry.matchers.iter().any(|m| m.is_match(prefix))
                || (!entry.literal_prefix.is_empty() && under(prefix, &entry.literal_prefix))
        })
    }
}

impl ProtectedPaths {
    /// Only the built-in `.git` protection.
    pub fn new() -> ProtectedPaths {
        ProtectedPaths::default()
    }

    /// Adds a workspace-relative glob (`secrets/**`, `.env*`, `deploy`); a plain directory
    /// protects everything under it.
    pub fn with(mut self, pattern: &str) -> Result<ProtectedPaths, RuleError> {
        self.configured = self.configured.with(pattern)?;
        Ok(self)
    }

    /// The configured patterns, as written (normalized).
    pub fn configured(&self) -> impl Iterator<Item = &str> {
        self.configured.patterns()
    }

    /// How `path` (workspace-relative, normalized, `/`-separated) is protected, if at all.
    pub fn classify(&self, path: &str) -> Option<Protection> {
        let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let git = components
            .iter()
            .enumerate()
            .filter(|(_, component)| **component == ".git")
            .map(|(index, _)| git_protection(&components[index + 1..]))
            .max();
        let configured = self
            .configured
            .contains(path)
            .then_some(Protection::Explicit);
        git.max(configured)
    }

    /// Whether an allow rule's argument pattern names the protected place `path` lies in, so that
    /// the rule may lift the protection: the pattern's literal part (before any glob character)
    /// must itself lie in a protected place — `edit_file(.git/hooks/*)` names `.git`,
    /// `edit_file(**)` names nothing.
    pub(crate) fn named_by(&self, pattern: &str, path: &str) -> bool {
        let prefix = literal_prefix(pattern);
        if prefix.is_empty() {
            return false;
        }
        let path_is_configured = self.configured.contains(path);
        let names_configured = self.configured.named_by_prefix(&prefix);
        let path_is_git = path.split('/').any(|component| component == ".git");
        let names_git = prefix.split('/').any(|component| component == ".git");
        (!path_is_git || names_git) && (!path_is_configured || names_configured)
    }
}

/// The protection of a path whose components after a `.git` component are `rest`.
fn git_protection(rest: &[&str]) -> Protection {
    let Some(first) = rest.first() else {
        // The `.git` directory itself, or a `.git` file (a `gitdir:` pointer).
        return Protection::Explicit;
    };
    let executes = GIT_EXECUTES_FROM.contains(first)
        // `modules/<name>/…` is a submodule's git directory: its hooks and config run too.
        || (*first == "modules"
            && rest[1..]
                .iter()
                .any(|component| GIT_EXECUTES_FROM.contains(component)));
    if executes {
        Protection::Explicit
    } else {
        Protection::Approval
    }
}

/// The `/`-separated components of `pattern` before the first one holding a glob character.
fn literal_prefix(pattern: &str) -> String {
    pattern
        .trim()
        .trim_start_matches("./")
        .split('/')
        .filter(|component| !component.is_empty() && *component != ".")
        .take_while(|component| !component.contains(['*', '?', '[', '{', '\\']))
        .collect::<Vec<_>>()
        .join("/")
}

fn under(path: &str, ancestor: &str) -> bool {
    path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('/'))
}
