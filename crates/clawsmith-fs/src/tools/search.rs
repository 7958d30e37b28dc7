//! `search_files` (F3) and `glob_files` (F4).

// Helpers return the refusal itself as their error so `run` can hand it back unchanged; it is
// built once per call, so its size does not matter (the protocol's own `require_authorization`
// does the same).
#![allow(clippy::result_large_err)]

use std::io::Read;
use std::sync::Arc;

use clawsmith_protocol::{Display, DisplayKind, ToolExecutionContext, ToolExecutionResult};
use globset::{GlobBuilder, GlobMatcher};
use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use schemars::JsonSchema;
use serde::Deserialize;

use super::walk::{Skipped, Walk, Walked, WalkedFile, not_entered_note, skipped_notes};
use super::{FileTool, cancelled, clip, invalid_arguments};
use crate::escape::escape_control;
use crate::hidden::HiddenCheck;
use crate::workspace::{WalkedEntry, WalkedOpen, Workspace, WorkspacePath};

/// Results returned when `maxResults` is not given.
pub const SEARCH_DEFAULT_RESULTS: usize = 50;
/// The most results one search returns, whatever `maxResults` says.
pub const SEARCH_MAX_RESULTS: usize = 100;
/// Bytes read across all files of one search.
pub const SEARCH_MAX_TOTAL_BYTES: u64 = 2 * 1024 * 1024;
/// Files one search visits.
pub const SEARCH_MAX_FILES_VISITED: usize = 2_000;
/// Bytes read from any one file.
pub const SEARCH_MAX_BYTES_PER_FILE: u64 = 1024 * 1024;
/// Matched lines longer than this many bytes are cut.
const LINE_MAX_BYTES: usize = 300;

/// Results returned when `maxResults` is not given.
pub const GLOB_DEFAULT_RESULTS: usize = 100;
/// The most results one glob returns.
pub const GLOB_MAX_RESULTS: usize = 1_000;
/// Files one glob visits.
pub const GLOB_MAX_FILES_VISITED: usize = 20_000;

/// Arguments of `search_files`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchFilesInput {
    /// Text to find in file names and file contents.
    pub query: String,
    /// Folder to search, relative to the workspace root (default: the whole workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Treat `query` as a regular expression (default: literal text).
    #[serde(default)]
    pub regex: bool,
    /// Match case exactly (default: case-insensitive).
    #[serde(default)]
    pub case_sensitive: bool,
    /// Only search files matching this glob, e.g. `*.rs` (file name) or `src/**/*.rs` (path).
    #[serde(default)]
    pub glob: Option<String>,
    /// Most results to return (default 50, at most 100).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_results: Option<u64>,
}

/// Arguments of `glob_files`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobFilesInput {
    /// Workspace-relative glob: `*` within a name, `**` across folders, `?` one character.
    pub pattern: String,
    /// Most paths to return (default 100, at most 1000).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_results: Option<u64>,
}

pub(super) struct SearchFiles {
    pub(super) workspace: Arc<Workspace>,
}

pub(super) struct GlobFiles {
    pub(super) workspace: Arc<Workspace>,
}

impl FileTool for SearchFiles {
    type Input = SearchFilesInput;
    const NAME: &'static str = "search_files";
    const DESCRIPTION: &'static str = "Search file names and contents in the workspace (literal \
        and case-insensitive by default). One hit per line: `path:line: text` for content, `path` \
        for a matching file name. Skips .git, node_modules, dist, coverage, target and \
        .gitignore'd files; at most 100 results, 2000 files and 2 MB read per search.";
    const WRITES: bool = false;

    fn summarize(input: &SearchFilesInput) -> String {
        match &input.path {
            Some(path) => format!("Search {:?} in {}", input.query, escape_control(path)),
            None => format!("Search {:?}", input.query),
        }
    }

    fn run(&self, input: SearchFilesInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        search(&self.workspace, &input, context)
    }
}

impl FileTool for GlobFiles {
    type Input = GlobFilesInput;
    const NAME: &'static str = "glob_files";
    const DESCRIPTION: &'static str = "List workspace files whose relative path matches a glob \
        (`*` within a name, `**` across folders, `?` one character), e.g. `src/**/*.rs`. Skips \
        .git, node_modules, dist, coverage, target and .gitignore'd files.";
    const WRITES: bool = false;

    fn summarize(input: &GlobFilesInput) -> String {
        format!("Glob {}", escape_control(&input.pattern))
    }

    fn run(&self, input: GlobFilesInput, context: &ToolExecutionContext) -> ToolExecutionResult {
        glob(&self.workspace, &input, context, GLOB_MAX_FILES_VISITED)
    }
}

/// What cut a walk short; every hit is reported in the content.
#[derive(Default)]
struct Budgets {
    results_limited: bool,
    files_limited: bool,
    bytes_limited: bool,
    large_files: u64,
    binary_files: u64,
    unreadable_files: u64,
    skipped_names: u64,
    /// Special files among the searched ones, reported after the ignore files the walk skipped.
    special_files: Vec<Skipped>,
}

fn search(
    workspace: &Workspace,
    input: &SearchFilesInput,
    context: &ToolExecutionContext,
) -> ToolExecutionResult {
    if input.query.is_empty() {
        return invalid_arguments("query must not be empty");
    }
    let (max_results, capped) = match result_limit(
        input.max_results,
        SEARCH_DEFAULT_RESULTS,
        SEARCH_MAX_RESULTS,
    ) {
        Ok(limit) => limit,
        Err(refusal) => return refusal,
    };
    let scope = match resolve_scope(workspace, input.path.as_deref()) {
        Ok(scope) => scope,
        Err(refusal) => return refusal,
    };
    let file_filter = match input.glob.as_deref().map(FileFilter::new).transpose() {
        Ok(filter) => filter,
        Err(refusal) => return refusal,
    };
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(!input.case_sensitive)
        .fixed_strings(!input.regex)
        .line_terminator(Some(b'\n'))
        .build(&input.query)
    {
        Ok(matcher) => matcher,
        Err(error) => {
            return invalid_arguments(format!("Invalid regular expression: {error}"));
        }
    };
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .build();

    let mut hits: Vec<String> = Vec::new();
    let mut budgets = Budgets::default();
    let mut visited = 0usize;
    let mut bytes_read = 0u64;
    let mut buffer = Vec::new();
    let hidden = workspace.hidden_check();
    let mut hidden_by_identity = 0u64;
    let mut walk = Walk::new(workspace, &scope);
    for walked in walk.by_ref() {
        if context.cancellation.is_cancelled() {
            return cancelled(SearchFiles::NAME);
        }
        let file = match walked {
            Walked::File(file) => file,
            Walked::Special(file, kind) => {
                if file_filter
                    .as_ref()
                    .is_none_or(|filter| filter.matches(&file))
                {
                    budgets.special_files.push(Skipped::special(&file, kind));
                }
                continue;
            }
        };
        if visited == SEARCH_MAX_FILES_VISITED {
            budgets.files_limited = true;
            break;
        }
        visited += 1;
        if let Some(filter) = &file_filter
            && !filter.matches(&file)
        {
            continue;
        }
        let shown_path = escape_control(&file.relative);
        if matcher.is_match(file.name().as_bytes()).unwrap_or(false)
            && workspace.entry_is_regular_beneath(&file.relative, &hidden)
        {
            hits.push(shown_path.to_string());
            if hits.len() > max_results {
                budgets.results_limited = true;
                break;
            }
        }
        let room = SEARCH_MAX_TOTAL_BYTES - bytes_read;
        if room == 0 {
            budgets.bytes_limited = true;
            break;
        }
        let size = match read_candidate(workspace, &file, room, &mut buffer, &hidden) {
            Candidate::Read(size) => size,
            Candidate::Hidden => {
                hidden_by_identity += 1;
                continue;
            }
            Candidate::Unreadable => {
                budgets.unreadable_files += 1;
                continue;
            }
        };
        bytes_read += buffer.len() as u64;
        if size > buffer.len() as u64 {
            if buffer.len() as u64 >= SEARCH_MAX_BYTES_PER_FILE {
                budgets.large_files += 1;
            } else {
                budgets.bytes_limited = true;
            }
        }
        let before = hits.len();
        let searched = searcher.search_slice(
            &matcher,
            &buffer,
            Lossy(|line_number, line| {
                let line = line.trim_end_matches(['\n', '\r']);
                hits.push(format!(
                    "{shown_path}:{line_number}: {}",
                    escape_line(&clip(line, LINE_MAX_BYTES))
                ));
                Ok(hits.len() <= max_results)
            }),
        );
        if searched.is_err() {
            budgets.unreadable_files += 1;
        }
        if hits.len() == before && buffer.contains(&0) {
            budgets.binary_files += 1;
        }
        if hits.len() > max_results {
            budgets.results_limited = true;
            break;
        }
        if budgets.bytes_limited {
            break;
        }
    }
    budgets.skipped_names = walk.skipped_non_utf8;
    let hidden_skipped = walk.hidden_skipped + hidden_by_identity;
    let not_entered = std::mem::take(&mut walk.not_entered);
    let mut skipped = std::mem::take(&mut walk.skipped);
    skipped.append(&mut budgets.special_files);
    if budgets.results_limited {
        hits.truncate(max_results);
    }

    let mut notes = Vec::new();
    if budgets.results_limited {
        notes.push(format!(
            "[results limited to {max_results}; more matches exist: narrow the query, `path` or \
             `glob`{}]",
            if max_results < SEARCH_MAX_RESULTS {
                format!(", or raise maxResults (at most {SEARCH_MAX_RESULTS})")
            } else {
                String::new()
            }
        ));
    }
    if capped {
        notes.push(format!("[maxResults is capped at {SEARCH_MAX_RESULTS}]"));
    }
    if budgets.files_limited {
        notes.push(format!(
            "[search stopped after visiting {SEARCH_MAX_FILES_VISITED} files; narrow `path` or \
             `glob` to search the rest]"
        ));
    }
    if budgets.bytes_limited {
        notes.push(format!(
            "[search stopped after reading {SEARCH_MAX_TOTAL_BYTES} bytes in total; narrow `path` \
             or `glob` to search the rest]"
        ));
    }
    if budgets.large_files > 0 {
        notes.push(format!(
            "[{} file(s) larger than {SEARCH_MAX_BYTES_PER_FILE} bytes were searched only in their \
             first {SEARCH_MAX_BYTES_PER_FILE} bytes]",
            budgets.large_files
        ));
    }
    if budgets.binary_files > 0 {
        notes.push(format!(
            "[{} binary file(s) were not searched for content]",
            budgets.binary_files
        ));
    }
    if budgets.unreadable_files > 0 {
        notes.push(format!(
            "[{} file(s) could not be read]",
            budgets.unreadable_files
        ));
    }
    if budgets.skipped_names > 0 {
        notes.push(format!(
            "[{} file(s) with names that are not UTF-8 were skipped]",
            budgets.skipped_names
        ));
    }
    notes.extend(hidden_note(hidden_skipped));
    notes.extend(not_entered_note(&not_entered));
    notes.extend(skipped_notes(&skipped));

    let title = format!("search {:?}", input.query);
    let body = hits.join("\n");
    let mut content = if hits.is_empty() {
        format!("No results for {:?}.", input.query)
    } else {
        body.clone()
    };
    for note in &notes {
        content.push('\n');
        content.push_str(note);
    }
    let display = Display::new(DisplayKind::Search)
        .with_title(title)
        .with_body(body)
        .with_field("results", hits.len())
        .with_field("files visited", visited)
        .with_field("bytes read", bytes_read)
        .with_field("skipped", skipped.len());
    ToolExecutionResult::success(content).with_display(display)
}

/// Reads up to `min(room, 1 MB)` bytes of `file` into `buffer` through the workspace handle;
/// returns the file's size, `None` if it cannot be opened (e.g. it turned into a symlink or a
/// FIFO since the walk listed it).
///
/// The file is read up to the size it had when opened: one `read` for a small file, without the
/// second one that would only confirm its end (bytes appended after the open are not searched,
/// as they would not be a moment earlier). A file that says it is empty is read to its end, as
/// some kernel files report no size.
fn read_candidate(
    workspace: &Workspace,
    file: &WalkedFile,
    room: u64,
    buffer: &mut Vec<u8>,
    hidden: &HiddenCheck<'_>,
) -> Candidate {
    buffer.clear();
    let (opened, size) = match workspace.open_walked_for_read(&file.relative, hidden) {
        WalkedOpen::Opened(file, size) => (file, size),
        WalkedOpen::Hidden => return Candidate::Hidden,
        WalkedOpen::Unusable => return Candidate::Unreadable,
    };
    let allowed = room.min(SEARCH_MAX_BYTES_PER_FILE);
    let wanted = if size == 0 {
        allowed
    } else {
        size.min(allowed)
    };
    if size > 0 {
        // `wanted` is at most 1 MiB, so it fits a `usize`.
        buffer.reserve(usize::try_from(wanted).unwrap_or(0));
    }
    match opened.take(wanted).read_to_end(buffer) {
        Ok(_) => Candidate::Read(size),
        Err(_) => Candidate::Unreadable,
    }
}

/// A matched line with its control characters escaped, tabs kept (code is indented with them and
/// a tab cannot forge a line).
fn escape_line(line: &str) -> String {
    line.split('\t')
        .map(escape_control)
        .collect::<Vec<_>>()
        .join("\t")
}

/// `max_files_visited` is [`GLOB_MAX_FILES_VISITED`] outside unit tests.
fn glob(
    workspace: &Workspace,
    input: &GlobFilesInput,
    context: &ToolExecutionContext,
    max_files_visited: usize,
) -> ToolExecutionResult {
    let (max_results, capped) =
        match result_limit(input.max_results, GLOB_DEFAULT_RESULTS, GLOB_MAX_RESULTS) {
            Ok(limit) => limit,
            Err(refusal) => return refusal,
        };
    if let Err(refusal) = check_pattern(&input.pattern) {
        return refusal;
    }
    let pattern = without_dot_prefix(&input.pattern);
    let matcher = match build_glob(pattern) {
        Ok(matcher) => matcher,
        Err(refusal) => return refusal,
    };
    // Start at the pattern's literal folder prefix (`src/**/*.rs` walks `src` only).
    let prefix = literal_prefix(pattern);
    let scope = match workspace.resolve(if prefix.is_empty() { "." } else { &prefix }) {
        Ok(scope) => scope,
        Err(error) => return ToolExecutionResult::tool_failed(error.to_string()),
    };
    let mut hits = Vec::new();
    let mut visited = 0usize;
    let mut files_limited = false;
    let mut results_limited = false;
    let scope_exists = match workspace.check_directory(&scope) {
        Ok(()) => true,
        Err(error @ crate::FsError::OutsideWorkspace { .. }) => {
            return ToolExecutionResult::tool_failed(error.to_string());
        }
        // A missing or non-directory prefix simply matches nothing.
        Err(_) => false,
    };
    let mut skipped = Vec::new();
    let mut not_entered = Vec::new();
    let hidden = workspace.hidden_check();
    let mut hidden_skipped = 0;
    if scope_exists {
        let mut walk = Walk::new(workspace, &scope);
        let mut special_files = Vec::new();
        for walked in walk.by_ref() {
            if context.cancellation.is_cancelled() {
                return cancelled(GlobFiles::NAME);
            }
            let file = match walked {
                Walked::File(file) => file,
                Walked::Special(file, kind) => {
                    if matcher.is_match(&file.relative) {
                        special_files.push(Skipped::special(&file, kind));
                    }
                    continue;
                }
            };
            if visited == max_files_visited {
                files_limited = true;
                break;
            }
            visited += 1;
            if matcher.is_match(&file.relative) {
                match workspace.walked_entry(&file.relative, &hidden) {
                    WalkedEntry::Regular => {}
                    WalkedEntry::Hidden => {
                        hidden_skipped += 1;
                        continue;
                    }
                    WalkedEntry::Other => continue,
                }
                if hits.len() == max_results {
                    results_limited = true;
                    break;
                }
                hits.push(escape_control(&file.relative).into_owned());
            }
        }
        skipped = std::mem::take(&mut walk.skipped);
        skipped.append(&mut special_files);
        hidden_skipped += walk.hidden_skipped;
        not_entered = std::mem::take(&mut walk.not_entered);
    }
    let mut notes = Vec::new();
    if results_limited {
        notes.push(format!(
            "[results limited to {max_results}; more files match: use a narrower pattern{}]",
            if max_results < GLOB_MAX_RESULTS {
                format!(" or raise maxResults (at most {GLOB_MAX_RESULTS})")
            } else {
                String::new()
            }
        ));
    }
    if capped {
        notes.push(format!("[maxResults is capped at {GLOB_MAX_RESULTS}]"));
    }
    if files_limited {
        notes.push(format!(
            "[stopped after visiting {max_files_visited} files; use a pattern with a folder \
             prefix to list the rest]"
        ));
    }
    notes.extend(hidden_note(hidden_skipped));
    notes.extend(not_entered_note(&not_entered));
    notes.extend(skipped_notes(&skipped));
    let body = hits.join("\n");
    let mut content = if hits.is_empty() {
        format!("No files match {:?}.", input.pattern)
    } else {
        body.clone()
    };
    for note in &notes {
        content.push('\n');
        content.push_str(note);
    }
    let display = Display::new(DisplayKind::Search)
        .with_title(format!("glob {}", escape_control(&input.pattern)))
        .with_body(body)
        .with_field("results", hits.len())
        .with_field("files visited", visited)
        .with_field("skipped", skipped.len());
    ToolExecutionResult::success(content).with_display(display)
}

/// `(limit, whether the request was capped)`.
fn result_limit(
    requested: Option<u64>,
    default: usize,
    hard: usize,
) -> Result<(usize, bool), ToolExecutionResult> {
    match requested {
        None => Ok((default, false)),
        Some(0) => Err(invalid_arguments("maxResults must be at least 1")),
        Some(requested) => match usize::try_from(requested) {
            Ok(requested) if requested <= hard => Ok((requested, false)),
            _ => Ok((hard, true)),
        },
    }
}

fn resolve_scope(
    workspace: &Workspace,
    path: Option<&str>,
) -> Result<WorkspacePath, ToolExecutionResult> {
    let scope = workspace
        .resolve(path.unwrap_or("."))
        .map_err(|error| ToolExecutionResult::tool_failed(error.to_string()))?;
    workspace
        .check_directory(&scope)
        .map_err(|error| ToolExecutionResult::tool_failed(error.to_string()))?;
    // The walk never follows symlinks, so a folder reached through an inside symlink is walked
    // under its real name; the real name is checked beneath the root again before use.
    let real = std::fs::canonicalize(workspace.root().join(scope.as_str()))
        .ok()
        .and_then(|real| {
            let relative = real
                .strip_prefix(workspace.root())
                .ok()?
                .to_str()?
                .to_owned();
            workspace
                .resolve(if relative.is_empty() { "." } else { &relative })
                .ok()
        })
        .filter(|real| workspace.check_directory(real).is_ok());
    Ok(real.unwrap_or(scope))
}

/// F4: a pattern must stay relative: no NUL, no leading `/` or `~`, no `..` segment (also inside
/// `{a,b}` alternatives).
fn check_pattern(pattern: &str) -> Result<(), ToolExecutionResult> {
    if pattern.is_empty() {
        return Err(invalid_arguments("pattern must not be empty"));
    }
    if pattern.contains('\0') {
        return Err(invalid_arguments("Pattern contains a NUL byte"));
    }
    let escapes = pattern.starts_with('/')
        || pattern.starts_with('\\')
        || pattern.starts_with('~')
        || pattern
            .split(['/', '\\', '{', '}', ','])
            .any(|segment| segment == "..");
    if escapes {
        return Err(ToolExecutionResult::tool_failed(format!(
            "Pattern is outside the workspace: {} (use a workspace-relative pattern without \
             `..`)",
            escape_control(pattern)
        )));
    }
    Ok(())
}

fn build_glob(pattern: &str) -> Result<GlobMatcher, ToolExecutionResult> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| invalid_arguments(format!("Invalid glob pattern: {error}")))
}

/// `./src/*.rs` means `src/*.rs`: walked paths never start with `./`.
fn without_dot_prefix(mut pattern: &str) -> &str {
    while let Some(rest) = pattern.strip_prefix("./") {
        pattern = rest.trim_start_matches('/');
    }
    pattern
}

/// The folders at the start of `pattern` that contain no glob syntax (never the last segment).
fn literal_prefix(pattern: &str) -> String {
    let segments: Vec<&str> = pattern.split('/').collect();
    let mut prefix = Vec::new();
    for segment in &segments[..segments.len().saturating_sub(1)] {
        if segment.is_empty()
            || *segment == "."
            || segment.contains(['*', '?', '[', ']', '{', '}', '\\'])
        {
            break;
        }
        prefix.push(*segment);
    }
    prefix.join("/")
}

/// The `glob` filter of `search_files`: a pattern without `/` matches file names at any depth,
/// one with `/` matches the workspace-relative path.
struct FileFilter {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl FileFilter {
    fn new(pattern: &str) -> Result<FileFilter, ToolExecutionResult> {
        check_pattern(pattern)?;
        let pattern = without_dot_prefix(pattern);
        Ok(FileFilter {
            matcher: build_glob(pattern)?,
            whole_path: pattern.contains('/'),
        })
    }

    fn matches(&self, file: &WalkedFile) -> bool {
        if self.whole_path {
            self.matcher.is_match(&file.relative)
        } else {
            self.matcher.is_match(file.name())
        }
    }
}

/// What reading one walked candidate gave.
enum Candidate {
    /// Its size (the bytes are in the buffer).
    Read(u64),
    /// The hidden set covers it (a hard link to a hidden file): never read.
    Hidden,
    Unreadable,
}

/// The note for files the hidden set left out: their number, never their names.
fn hidden_note(count: u64) -> Option<String> {
    (count > 0).then(|| format!("[{count} hidden file(s) skipped (hidden_paths)]"))
}

#[cfg(test)]
mod tests {
    use clawsmith_protocol::ToolExecutionContext;

    use super::{GlobFilesInput, glob};
    use crate::workspace::Workspace;

    /// The visited-files budget at its boundary, with a small budget instead of 20,000 files
    /// (`GLOB_MAX_FILES_VISITED` is passed the same way in production).
    #[test]
    fn glob_visited_budget_boundary() {
        let temp = tempfile::tempdir().unwrap();
        for file in 0..50 {
            std::fs::write(temp.path().join(format!("f{file:02}.txt")), "").unwrap();
        }
        let workspace = Workspace::open(temp.path()).unwrap();
        let context = ToolExecutionContext::new("s", "t", "c");
        let run = |pattern: &str| {
            let input = GlobFilesInput {
                pattern: pattern.to_owned(),
                max_results: None,
            };
            glob(&workspace, &input, &context, 50).content
        };
        assert_eq!(run("*.rs"), "No files match \"*.rs\".");
        std::fs::create_dir(temp.path().join("zz")).unwrap();
        std::fs::write(temp.path().join("zz/last.rs"), "").unwrap();
        assert_eq!(
            run("**/*.rs"),
            "No files match \"**/*.rs\".\n[stopped after visiting 50 files; use a pattern with a \
             folder prefix to list the rest]"
        );
        // A literal folder prefix starts the walk there.
        assert_eq!(run("zz/*.rs"), "zz/last.rs");
    }
}
