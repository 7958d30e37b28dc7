//! Read-only long-term memory: which files and notes are memory, how they are cut into chunks,
//! how a query is read, and how hits are shown. The SQL (FTS5, BM25, trigram) is
//! `clawsmith_checkpoint::MemoryIndex`'s.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_checkpoint::{
    IndexedSource, MemoryChunk, MemoryHit, MemoryIndex, MemoryNote, MemoryQuery, MemoryScope,
    MemorySourceKey, MemoryTerm,
};
use clawsmith_fs::{HiddenPaths, Workspace};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::config::UserDirs;
use crate::error::SkillsError;

/// The memory files at the workspace's root, in this order.
pub const WORKSPACE_MEMORY_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "GEMINI.md"];
/// The workspace's memory folder (`**/*.md` under it).
pub const WORKSPACE_MEMORY_DIR: &str = ".clawsmith/memory";
/// The largest memory file indexed; a larger one is skipped and said so.
pub const MEMORY_FILE_MAX_BYTES: u64 = 1024 * 1024;
/// The most files indexed per memory folder.
pub const MEMORY_FILES_MAX: usize = 1_000;
/// A chunk longer than this many lines is cut into several under the same heading.
pub const CHUNK_MAX_LINES: usize = 80;
/// The longest query read, in characters; the rest is ignored and said so.
pub const QUERY_MAX_CHARS: usize = 1_000;
/// The most terms of a query searched.
pub const QUERY_MAX_TERMS: usize = 32;
/// The default and the largest number of hits.
pub const DEFAULT_LIMIT: usize = 10;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 50;
/// The longest note, in bytes.
pub const NOTE_MAX_BYTES: usize = 64 * 1024;
/// A snippet line is cut at this many characters.
const SNIPPET_LINE_MAX_CHARS: usize = 200;

/// Where memory comes from for one workspace.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// The workspace whose `AGENTS.md`, `CLAUDE.md`, `GEMINI.md` and `.clawsmith/memory` are
    /// read; `None` searches user memory and notes only.
    pub workspace: Option<PathBuf>,
    /// The user's directories (`$XDG_CONFIG_HOME/clawsmith/memory`).
    pub dirs: UserDirs,
    /// The index file (in the state directory, never in the workspace).
    pub index_path: PathBuf,
    /// The workspace's hidden paths: a memory file that is (or leads to) a hidden file is
    /// skipped with a note, whatever its name (`AGENTS.md` as a link to `.env`).
    pub hidden: Option<Arc<HiddenPaths>>,
}

/// One hit as people and the model see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemorySearchHit {
    /// `workspace`, `user` or `notes`.
    pub scope: MemoryScope,
    /// A workspace-relative path, `user:<path under the user memory folder>` or `note:<id>`.
    pub source: String,
    /// First and last line of the chunk.
    pub lines: [u32; 2],
    /// The chunk's heading (`""` before the first heading).
    pub heading: String,
    /// Lines around the best matching line, numbered, the match marked `«…»`.
    pub snippet: String,
    /// Higher is better (BM25, heading weighted; partial matches count half).
    pub score: f64,
    /// When the source last changed, milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// The answer to a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemorySearchOutcome {
    /// Best first.
    pub hits: Vec<MemorySearchHit>,
    /// What was left out or cut (query truncated, files skipped), for the reader.
    pub notes: Vec<String>,
}

/// Memory of one workspace: sources, the index (opened at the first use) and notes.
pub struct Memory {
    config: MemoryConfig,
    index: Mutex<Option<Arc<MemoryIndex>>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Memory")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One source as read now.
struct CurrentSource {
    path: String,
    content: String,
    modified_ms: i64,
}

/// `"a b" c d` read as terms: quoted phrases (an unmatched `"` is a space) and words.
pub fn parse_query(query: &str) -> (Vec<MemoryTerm>, Vec<String>) {
    let mut notes = Vec::new();
    let total = query.chars().count();
    let query: String = if total > QUERY_MAX_CHARS {
        notes.push(format!(
            "the query has {total} characters; only the first {QUERY_MAX_CHARS} were searched"
        ));
        query.chars().take(QUERY_MAX_CHARS).collect()
    } else {
        query.to_owned()
    };
    let clean: String = query
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut terms = Vec::new();
    let pieces: Vec<&str> = clean.split('"').collect();
    let quotes = pieces.len() - 1;
    for (index, piece) in pieces.iter().enumerate() {
        // Odd pieces are inside a pair of quotes; the last one of an odd count of quotes is not.
        let quoted = index % 2 == 1 && !(quotes % 2 == 1 && index == pieces.len() - 1);
        if quoted {
            let phrase = piece.split_whitespace().collect::<Vec<_>>().join(" ");
            if !phrase.is_empty() {
                terms.push(MemoryTerm::Phrase(phrase));
            }
        } else {
            terms.extend(
                piece
                    .split_whitespace()
                    .map(|word| MemoryTerm::Word(word.to_owned())),
            );
        }
    }
    let mut seen = std::collections::HashSet::new();
    terms.retain(|term| {
        let text = match term {
            MemoryTerm::Word(text) | MemoryTerm::Phrase(text) => text.to_lowercase(),
        };
        seen.insert(text)
    });
    if terms.len() > QUERY_MAX_TERMS {
        notes.push(format!(
            "the query has {} terms; only the first {QUERY_MAX_TERMS} were searched",
            terms.len()
        ));
        terms.truncate(QUERY_MAX_TERMS);
    }
    (terms, notes)
}

/// Cuts Markdown at its headings (ATX `#` … `######`, outside fenced code): one chunk per
/// heading with the lines under it, the text before the first heading as a chunk without
/// heading, and sections longer than [`CHUNK_MAX_LINES`] cut into several.
pub fn chunk_markdown(text: &str) -> Vec<MemoryChunk> {
    let mut chunks = Vec::new();
    let mut heading = String::new();
    let mut lines: Vec<&str> = Vec::new();
    let mut start = 1u32;
    let mut fence: Option<&str> = None;
    let flush =
        |chunks: &mut Vec<MemoryChunk>, heading: &str, lines: &mut Vec<&str>, start: u32| {
            if lines.iter().any(|line| !line.trim().is_empty()) {
                let count = u32::try_from(lines.len()).unwrap_or(u32::MAX);
                chunks.push(MemoryChunk {
                    heading: heading.to_owned(),
                    body: lines.join("\n"),
                    line_start: start,
                    line_end: start.saturating_add(count).saturating_sub(1),
                });
            }
            lines.clear();
        };
    for (index, line) in text.lines().enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let trimmed = line.trim_start();
        if let Some(marker) = fence {
            if trimmed.starts_with(marker) {
                fence = None;
            }
        } else if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
        } else if let Some(title) = heading_text(line) {
            flush(&mut chunks, &heading, &mut lines, start);
            heading = title.to_owned();
            start = number;
        }
        if lines.len() >= CHUNK_MAX_LINES {
            flush(&mut chunks, &heading, &mut lines, start);
            start = number;
        }
        lines.push(line);
    }
    flush(&mut chunks, &heading, &mut lines, start);
    chunks
}

/// The text of an ATX heading line (`## Deploy` → `Deploy`), or `None`.
fn heading_text(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim())
}

impl Memory {
    /// Memory for `config`; nothing is opened until the first search or note.
    pub fn new(config: MemoryConfig) -> Memory {
        Memory {
            config,
            index: Mutex::new(None),
        }
    }

    /// The index, opened once.
    pub fn index(&self) -> Result<Arc<MemoryIndex>, SkillsError> {
        let mut slot = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = slot.as_ref() {
            return Ok(index.clone());
        }
        let index = Arc::new(MemoryIndex::open(&self.config.index_path)?);
        *slot = Some(index.clone());
        Ok(index)
    }

    /// Adds a note (refused when empty, too long, or with an empty tag).
    pub fn add_note(&self, text: &str, tags: &[String]) -> Result<MemoryNote, SkillsError> {
        if text.trim().is_empty() {
            return Err(SkillsError::InvalidNote("the note is empty".to_owned()));
        }
        if text.len() > NOTE_MAX_BYTES {
            return Err(SkillsError::InvalidNote(format!(
                "the note is {} bytes; at most {NOTE_MAX_BYTES} are kept",
                text.len()
            )));
        }
        if let Some(bad) = tags
            .iter()
            .find(|tag| tag.trim().is_empty() || tag.chars().any(char::is_control))
        {
            return Err(SkillsError::InvalidNote(format!(
                "invalid tag {bad:?}: tags are non-empty and have no control characters"
            )));
        }
        Ok(self.index()?.add_note(text, tags, now_ms())?)
    }

    /// Every note, oldest first.
    pub fn notes(&self) -> Result<Vec<MemoryNote>, SkillsError> {
        Ok(self.index()?.notes()?)
    }

    /// Removes a note; `false` when there is none with this id.
    pub fn remove_note(&self, id: i64) -> Result<bool, SkillsError> {
        Ok(self.index()?.remove_note(id)?)
    }

    /// Brings the index up to date for `scopes` (changed content re-chunked, gone sources
    /// dropped: compared by SHA-256 of the content), then searches it.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        scopes: &[MemoryScope],
    ) -> Result<MemorySearchOutcome, SkillsError> {
        let index = self.index()?;
        let mut notes = Vec::new();
        for scope in scopes {
            self.refresh(&index, *scope, &mut notes)?;
        }
        let (terms, query_notes) = parse_query(query);
        notes.extend(query_notes);
        if terms.is_empty() {
            return Ok(MemorySearchOutcome {
                hits: Vec::new(),
                notes,
            });
        }
        let hits = index.search(&MemoryQuery {
            terms: terms.clone(),
            scopes: scopes.to_vec(),
            workspace_root: self.workspace_key(),
            limit: limit.clamp(1, MAX_LIMIT),
        })?;
        let hits = hits.iter().map(|hit| present(hit, &terms)).collect();
        Ok(MemorySearchOutcome { hits, notes })
    }

    fn workspace_key(&self) -> String {
        self.config
            .workspace
            .as_ref()
            .map(|workspace| {
                std::fs::canonicalize(workspace)
                    .unwrap_or_else(|_| workspace.clone())
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default()
    }

    fn refresh(
        &self,
        index: &MemoryIndex,
        scope: MemoryScope,
        notes: &mut Vec<String>,
    ) -> Result<(), SkillsError> {
        let (root, current) = match scope {
            MemoryScope::Workspace => {
                let Some(workspace) = &self.config.workspace else {
                    return Ok(());
                };
                let hidden = self.config.hidden.as_ref();
                (
                    self.workspace_key(),
                    workspace_sources(workspace, hidden, notes),
                )
            }
            MemoryScope::User => {
                let current = match self.config.dirs.config_home() {
                    Some(config_home) => {
                        let dir = config_home.join("clawsmith/memory");
                        folder_sources(&dir, None, self.config.hidden.as_ref(), notes)
                    }
                    None => Vec::new(),
                };
                (String::new(), current)
            }
            MemoryScope::Notes => (String::new(), note_sources(&index.notes()?)),
        };
        let indexed: HashMap<String, String> = index
            .sources(scope, &root)?
            .into_iter()
            .map(|source| (source.key.path, source.content_hash))
            .collect();
        let mut present = std::collections::HashSet::new();
        for source in current {
            let hash = hex::encode(Sha256::digest(source.content.as_bytes()));
            present.insert(source.path.clone());
            if indexed.get(&source.path) == Some(&hash) {
                continue;
            }
            let chunks = match scope {
                MemoryScope::Notes => note_chunks(&source.content),
                _ => chunk_markdown(&source.content),
            };
            index.replace_source(
                &IndexedSource {
                    key: MemorySourceKey {
                        scope,
                        root: root.clone(),
                        path: source.path,
                    },
                    content_hash: hash,
                    modified_ms: source.modified_ms,
                },
                &chunks,
            )?;
        }
        for path in indexed.keys().filter(|path| !present.contains(*path)) {
            index.remove_source(&MemorySourceKey {
                scope,
                root: root.clone(),
                path: path.clone(),
            })?;
        }
        Ok(())
    }
}

/// A handle on `dir` enforcing `hidden` (matched by where files really are, so it holds for a
/// folder inside the workspace as for the workspace itself).
fn open_hiding(
    dir: &Path,
    hidden: Option<&Arc<HiddenPaths>>,
) -> Result<Workspace, clawsmith_fs::FsError> {
    let handle = Workspace::open(dir)?;
    Ok(match hidden {
        Some(hidden) => handle.with_hidden(hidden.clone()),
        None => handle,
    })
}

/// The workspace's memory: the three root files, then `.clawsmith/memory/**/*.md`, each read
/// through the workspace handle (a symlink out of the workspace is refused by the kernel).
fn workspace_sources(
    workspace: &Path,
    hidden: Option<&Arc<HiddenPaths>>,
    notes: &mut Vec<String>,
) -> Vec<CurrentSource> {
    let handle = match open_hiding(workspace, hidden) {
        Ok(handle) => handle,
        Err(error) => {
            notes.push(format!("workspace memory skipped: {error}"));
            return Vec::new();
        }
    };
    let mut sources = Vec::new();
    for name in WORKSPACE_MEMORY_FILES {
        if let Some(source) = read_source(&handle, name, name, notes) {
            sources.push(source);
        }
    }
    sources.extend(folder_sources(
        &handle.root().join(WORKSPACE_MEMORY_DIR),
        Some((handle.root(), WORKSPACE_MEMORY_DIR)),
        hidden,
        notes,
    ));
    sources
}

/// `**/*.md` under `dir`. With `inside`, the folder must stay in that workspace, and paths are
/// shown under the given prefix; without, they are shown relative to `dir`.
fn folder_sources(
    dir: &Path,
    inside: Option<(&Path, &str)>,
    hidden: Option<&Arc<HiddenPaths>>,
    notes: &mut Vec<String>,
) -> Vec<CurrentSource> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Vec::new();
    }
    let handle = match open_hiding(dir, hidden) {
        Ok(handle) => handle,
        Err(error) => {
            notes.push(format!("memory folder skipped: {error}"));
            return Vec::new();
        }
    };
    if let Some((workspace, _)) = inside
        && !handle.root().starts_with(workspace)
    {
        notes.push(format!(
            "{WORKSPACE_MEMORY_DIR} leads outside the workspace; skipped"
        ));
        return Vec::new();
    }
    let listing = handle.list_files();
    let mut paths: Vec<&String> = listing
        .files
        .keys()
        .filter(|path| path.ends_with(".md"))
        .collect();
    // The listing's order is not promised: sort, so the files kept under the cap are stable.
    paths.sort();
    if paths.len() > MEMORY_FILES_MAX {
        notes.push(format!(
            "{} memory files in {}; only the first {MEMORY_FILES_MAX} are searched",
            paths.len(),
            dir.display()
        ));
        paths.truncate(MEMORY_FILES_MAX);
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let shown = match inside {
                Some((_, prefix)) => format!("{prefix}/{path}"),
                None => path.clone(),
            };
            read_source(&handle, path, &shown, notes)
        })
        .collect()
}

/// Reads one memory file beneath `handle`; `None` when absent, and said when unusable.
fn read_source(
    handle: &Workspace,
    relative: &str,
    shown: &str,
    notes: &mut Vec<String>,
) -> Option<CurrentSource> {
    let path = handle.resolve(relative).ok()?;
    let (file, size) = match handle.open_for_read(&path) {
        Ok(opened) => opened,
        Err(clawsmith_fs::FsError::NotFound { .. }) => return None,
        Err(error) => {
            notes.push(format!("{shown} skipped: {error}"));
            return None;
        }
    };
    if size > MEMORY_FILE_MAX_BYTES {
        notes.push(format!(
            "{shown} skipped: {size} bytes (at most {MEMORY_FILE_MAX_BYTES} are indexed)"
        ));
        return None;
    }
    let modified_ms = file
        .metadata()
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        });
    let mut bytes = Vec::new();
    if let Err(error) = (&file).take(MEMORY_FILE_MAX_BYTES).read_to_end(&mut bytes) {
        notes.push(format!("{shown} skipped: {error}"));
        return None;
    }
    Some(CurrentSource {
        path: shown.to_owned(),
        content: String::from_utf8_lossy(&bytes).into_owned(),
        modified_ms,
    })
}

/// Notes as sources: the path is the id; the content is the tags line and the text.
fn note_sources(notes: &[MemoryNote]) -> Vec<CurrentSource> {
    notes
        .iter()
        .map(|note| CurrentSource {
            path: note.id.to_string(),
            content: format!("{}\n{}", note.tags.join(", "), note.text),
            modified_ms: note.created_ms,
        })
        .collect()
}

/// A note is one chunk: its tags are the heading, its text the body (line 1 is the text's
/// first line).
fn note_chunks(content: &str) -> Vec<MemoryChunk> {
    let (tags, text) = content.split_once('\n').unwrap_or(("", content));
    let count = u32::try_from(text.lines().count().max(1)).unwrap_or(u32::MAX);
    vec![MemoryChunk {
        heading: tags.to_owned(),
        body: text.to_owned(),
        line_start: 1,
        line_end: count,
    }]
}

/// A hit for people: its source name, and a snippet around the first line that matches.
fn present(hit: &MemoryHit, terms: &[MemoryTerm]) -> MemorySearchHit {
    let key = &hit.source.key;
    let source = match key.scope {
        MemoryScope::Workspace => key.path.clone(),
        MemoryScope::User => format!("user:{}", key.path),
        MemoryScope::Notes => format!("note:{}", key.path),
    };
    MemorySearchHit {
        scope: key.scope,
        source,
        lines: [hit.chunk.line_start, hit.chunk.line_end],
        heading: hit.chunk.heading.clone(),
        snippet: snippet(&hit.chunk, terms),
        score: hit.score,
        modified_ms: hit.source.modified_ms,
    }
}

/// The first line holding a term (else the chunk's first line) with one line either side,
/// numbered as in the source, each match marked `«…»`.
pub fn snippet(chunk: &MemoryChunk, terms: &[MemoryTerm]) -> String {
    let needles: Vec<String> = terms
        .iter()
        .map(|term| match term {
            MemoryTerm::Word(text) | MemoryTerm::Phrase(text) => text.to_lowercase(),
        })
        .filter(|needle| !needle.is_empty())
        .collect();
    let lines: Vec<&str> = chunk.body.lines().collect();
    let best = lines
        .iter()
        .position(|line| {
            let lower = line.to_lowercase();
            needles.iter().any(|needle| lower.contains(needle.as_str()))
        })
        .unwrap_or(0);
    let first = best.saturating_sub(1);
    let last = (best + 1).min(lines.len().saturating_sub(1));
    let mut out = Vec::new();
    for (offset, line) in lines.iter().enumerate().take(last + 1).skip(first) {
        let number = u64::from(chunk.line_start) + offset as u64;
        let clipped = clawsmith_protocol::truncate_to_boundary(
            line.chars().take(SNIPPET_LINE_MAX_CHARS + 1).collect(),
            SNIPPET_LINE_MAX_CHARS,
        );
        out.push(format!("{number}: {}", mark(&clipped, &needles)));
    }
    out.join("\n")
}

/// `line` with every occurrence of a needle (ASCII case-insensitive) wrapped in `«…»`.
fn mark(line: &str, needles: &[String]) -> String {
    let lower = line.to_lowercase();
    // Lowercasing may change byte lengths outside ASCII; then positions would not line up.
    if lower.len() != line.len() {
        return line.to_owned();
    }
    let mut spans: BTreeMap<usize, usize> = BTreeMap::new();
    for needle in needles {
        let mut from = 0;
        while let Some(found) = lower[from..].find(needle.as_str()) {
            let start = from + found;
            let end = start + needle.len();
            let entry = spans.entry(start).or_insert(end);
            *entry = (*entry).max(end);
            from = end;
        }
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut at = 0;
    for (start, end) in spans {
        if start < at || !line.is_char_boundary(start) || !line.is_char_boundary(end) {
            continue;
        }
        out.push_str(&line[at..start]);
        out.push('«');
        out.push_str(&line[start..end]);
        out.push('»');
        at = end;
    }
    out.push_str(&line[at..]);
    out
}

/// The time as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_time(ms: i64) -> String {
    clawsmith_core::time::utc_time(ms, false)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// A score for people: three decimals, or three significant digits when it is tiny (BM25 gives
/// a word found in every chunk almost no weight).
fn shown_score(score: f64) -> String {
    if score.abs() >= 0.001 || score == 0.0 {
        format!("{score:.3}")
    } else {
        format!("{score:.2e}")
    }
}

/// The outcome as text for the model and people: an explicit "No results" when empty.
pub fn render(query: &str, outcome: &MemorySearchOutcome) -> String {
    let shown_query =
        clawsmith_protocol::truncate_to_boundary(query.chars().take(101).collect(), 100);
    let mut text = if outcome.hits.is_empty() {
        format!("No results for {shown_query:?} in memory.\n")
    } else {
        format!(
            "{} result(s) for {shown_query:?}, best first:\n",
            outcome.hits.len()
        )
    };
    for (rank, hit) in outcome.hits.iter().enumerate() {
        let heading = if hit.heading.is_empty() {
            String::new()
        } else {
            format!(" · {}", hit.heading)
        };
        text.push_str(&format!(
            "\n{}. {} lines {}-{}{heading} [{}; score {}; modified {}]\n{}\n",
            rank + 1,
            hit.source,
            hit.lines[0],
            hit.lines[1],
            hit.scope.as_str(),
            shown_score(hit.score),
            utc_time(hit.modified_ms),
            hit.snippet
        ));
    }
    for note in &outcome.notes {
        text.push_str(&format!("[note: {note}]\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries() {
        let word = |text: &str| MemoryTerm::Word(text.into());
        let phrase = |text: &str| MemoryTerm::Phrase(text.into());
        // (query, terms)
        let table: Vec<(&str, Vec<MemoryTerm>)> = vec![
            ("deploy staging", vec![word("deploy"), word("staging")]),
            (
                "\"run the  tests\" now",
                vec![phrase("run the tests"), word("now")],
            ),
            ("\"", vec![]),
            ("a \"b c", vec![word("a"), word("b"), word("c")]),
            ("OR OR", vec![word("OR")]),
            ("NEAR( x", vec![word("NEAR("), word("x")]),
            ("\"\"", vec![]),
        ];
        for (query, terms) in table {
            assert_eq!(parse_query(query).0, terms, "{query}");
        }
        let (terms, notes) = parse_query(&"w ".repeat(5_000));
        assert_eq!(terms, vec![word("w")]);
        assert!(notes[0].contains("10000 characters"));
    }

    #[test]
    fn chunks_at_headings_outside_code() {
        let text = "intro\n# One\nbody 1\n```\n# not a heading\n```\n## Two ##\nbody 2\n#hashtag\n";
        let chunks = chunk_markdown(text);
        let summary: Vec<(&str, u32, u32)> = chunks
            .iter()
            .map(|chunk| (chunk.heading.as_str(), chunk.line_start, chunk.line_end))
            .collect();
        assert_eq!(summary, [("", 1, 1), ("One", 2, 6), ("Two", 7, 9)]);
        let long = format!("# Big\n{}", "line\n".repeat(200));
        let pieces = chunk_markdown(&long);
        assert_eq!(pieces.len(), 3);
        assert!(pieces.iter().all(|chunk| chunk.heading == "Big"));
        assert_eq!(pieces[1].line_start, 81);
    }

    #[test]
    fn marks_and_times() {
        assert_eq!(
            mark("Run Deploy then deploy", &["deploy".into()]),
            "Run «Deploy» then «deploy»"
        );
        assert_eq!(utc_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_time(1_780_000_000_000), "2026-05-28T20:26:40Z");
    }
}
