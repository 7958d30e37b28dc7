//! The memory index: SQLite FTS5 over chunks of the memory files and notes.
//!
//! It lives here because this crate is the one owner of SQL; what a source is, how it is split
//! into chunks and how hits are shown belong to `clawsmith-skills`, which hands this module typed
//! values only. The index is its own file (`memory.db` in the state directory), apart from the
//! session store, so a rebuilt or deleted index never touches history.
//!
//! Two FTS5 tables hold every chunk: `memory_words` (the `unicode61` tokenizer, ranked by BM25
//! with the heading weighted [`HEADING_WEIGHT`] times the body) and `memory_trigram` (the
//! `trigram` tokenizer: any run of three or more characters matches, so `parse_conf` finds
//! `parse_config` and `Index` finds `MemoryIndex`). A query is never handed to FTS5 as text the
//! caller wrote: every term becomes a double-quoted FTS5 string (quotes doubled), so `"`, `*`,
//! `NEAR(`, `-` or `OR OR` are searched for as words, never read as syntax.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use crate::error::{JsonContext, SqlContext, StoreError};
use crate::store::BUSY_TIMEOUT;

/// The schema version of the memory index (`PRAGMA user_version`).
pub const MEMORY_SCHEMA_VERSION: i64 = 1;

/// How much more a match in a chunk's heading counts than one in its body (BM25 column weight).
pub const HEADING_WEIGHT: f64 = 10.0;

/// A partial (trigram) match counts this fraction of a whole-word match, so a chunk holding the
/// word itself ranks above one that only contains it inside a longer word.
pub const TRIGRAM_FACTOR: f64 = 0.5;

/// The most candidates each index contributes before the two are merged.
const CANDIDATES_MAX: usize = 200;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memory_sources (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('workspace', 'user', 'notes')),
    root TEXT NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    modified_ms INTEGER NOT NULL,
    UNIQUE (scope, root, path)
);
CREATE TABLE IF NOT EXISTS memory_chunks (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES memory_sources(id) ON DELETE CASCADE,
    heading TEXT NOT NULL,
    body TEXT NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_chunks_source ON memory_chunks(source_id);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_words USING fts5(
    heading, body, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_trigram USING fts5(
    heading, body, tokenize = 'trigram'
);
CREATE TABLE IF NOT EXISTS memory_notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
";

/// Where a memory source comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    /// A file of the workspace (`AGENTS.md`, `.clawsmith/memory/**/*.md`, …).
    Workspace,
    /// A file of the user's configuration (`$XDG_CONFIG_HOME/clawsmith/memory/**/*.md`).
    User,
    /// A note added with `clawsmith memory add`.
    Notes,
}

impl MemoryScope {
    /// `workspace`, `user` or `notes`.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryScope::Workspace => "workspace",
            MemoryScope::User => "user",
            MemoryScope::Notes => "notes",
        }
    }

    fn parse(text: &str) -> Option<MemoryScope> {
        match text {
            "workspace" => Some(MemoryScope::Workspace),
            "user" => Some(MemoryScope::User),
            "notes" => Some(MemoryScope::Notes),
            _ => None,
        }
    }
}

/// Names one source: its scope, the root it belongs to (the canonical workspace for
/// [`MemoryScope::Workspace`], `""` otherwise) and its path under that root (a note's id for
/// notes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemorySourceKey {
    /// The scope.
    pub scope: MemoryScope,
    /// The root the path is relative to (`""` outside the workspace scope).
    pub root: String,
    /// The path under the root, or the note's id.
    pub path: String,
}

/// A source as the index last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedSource {
    /// Which source.
    pub key: MemorySourceKey,
    /// The SHA-256 (hex) of the content that was indexed.
    pub content_hash: String,
    /// Its modification time, milliseconds since the Unix epoch.
    pub modified_ms: i64,
}

/// One chunk of a source: a heading and the text under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryChunk {
    /// The heading line's text (`""` before the first heading).
    pub heading: String,
    /// The text of the chunk, heading line included.
    pub body: String,
    /// First line of the chunk in its source (1-based).
    pub line_start: u32,
    /// Last line of the chunk (inclusive).
    pub line_end: u32,
}

/// One searched term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryTerm {
    /// A word: matched as a whole word, and (three characters or more) inside longer words.
    Word(String),
    /// A phrase: its words in this order, adjacent.
    Phrase(String),
}

/// What to search: any of `terms`, in the given scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryQuery {
    /// The terms; a chunk matching any of them is a hit.
    pub terms: Vec<MemoryTerm>,
    /// The scopes searched.
    pub scopes: Vec<MemoryScope>,
    /// The canonical workspace whose workspace sources are searched.
    pub workspace_root: String,
    /// The most hits returned.
    pub limit: usize,
}

/// A chunk that matched, with its source and score (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    /// The source the chunk belongs to.
    pub source: IndexedSource,
    /// The chunk.
    pub chunk: MemoryChunk,
    /// BM25 of the word index plus [`TRIGRAM_FACTOR`] times that of the trigram index.
    pub score: f64,
}

/// A note added with `clawsmith memory add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryNote {
    /// Its id (`note:<id>` in hits).
    pub id: i64,
    /// The text.
    pub text: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// When it was added, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// The memory index database.
pub struct MemoryIndex {
    connection: Mutex<Connection>,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemoryIndex")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl MemoryIndex {
    /// Opens (creating it 0600, never through a symlink) the index at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<MemoryIndex, StoreError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let connection = crate::store::open_private_database(path, &shown)?;
        let connection = prepare(connection, &shown, true)?;
        Ok(MemoryIndex {
            connection: Mutex::new(connection),
            path: Some(path.to_path_buf()),
        })
    }

    /// A private in-memory index (tests).
    pub fn open_in_memory() -> Result<MemoryIndex, StoreError> {
        let connection = Connection::open_in_memory()
            .map_err(|error| crate::store::classify(":memory:", error))?;
        let connection = prepare(connection, ":memory:", false)?;
        Ok(MemoryIndex {
            connection: Mutex::new(connection),
            path: None,
        })
    }

    /// The database file, `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves no half-done SQL behind: every write is one
        // transaction, rolled back when its guard drops.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The indexed sources of `scope` under `root`.
    pub fn sources(
        &self,
        scope: MemoryScope,
        root: &str,
    ) -> Result<Vec<IndexedSource>, StoreError> {
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached(
                "SELECT path, content_hash, modified_ms FROM memory_sources
                 WHERE scope = ?1 AND root = ?2 ORDER BY path",
            )
            .ctx("listing memory sources")?;
        let rows = statement
            .query_map(params![scope.as_str(), root], |row| {
                Ok(IndexedSource {
                    key: MemorySourceKey {
                        scope,
                        root: root.to_owned(),
                        path: row.get(0)?,
                    },
                    content_hash: row.get(1)?,
                    modified_ms: row.get(2)?,
                })
            })
            .ctx("listing memory sources")?;
        rows.collect::<Result<_, _>>().ctx("listing memory sources")
    }

    /// Replaces everything indexed for `source` by `chunks`, in one transaction.
    pub fn replace_source(
        &self,
        source: &IndexedSource,
        chunks: &[MemoryChunk],
    ) -> Result<(), StoreError> {
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("indexing a memory source")?;
        delete_source(&transaction, &source.key)?;
        transaction
            .execute(
                "INSERT INTO memory_sources (scope, root, path, content_hash, modified_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    source.key.scope.as_str(),
                    source.key.root,
                    source.key.path,
                    source.content_hash,
                    source.modified_ms
                ],
            )
            .ctx("indexing a memory source")?;
        let source_id = transaction.last_insert_rowid();
        for chunk in chunks {
            transaction
                .execute(
                    "INSERT INTO memory_chunks (source_id, heading, body, line_start, line_end)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        source_id,
                        chunk.heading,
                        chunk.body,
                        chunk.line_start,
                        chunk.line_end
                    ],
                )
                .ctx("indexing a memory chunk")?;
            let chunk_id = transaction.last_insert_rowid();
            for table in ["memory_words", "memory_trigram"] {
                transaction
                    .execute(
                        &format!("INSERT INTO {table} (rowid, heading, body) VALUES (?1, ?2, ?3)"),
                        params![chunk_id, chunk.heading, chunk.body],
                    )
                    .ctx("indexing a memory chunk")?;
            }
        }
        transaction.commit().ctx("indexing a memory source")
    }

    /// Forgets `key` and its chunks. `false` when it was not indexed.
    pub fn remove_source(&self, key: &MemorySourceKey) -> Result<bool, StoreError> {
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("removing a memory source")?;
        let removed = delete_source(&transaction, key)?;
        transaction.commit().ctx("removing a memory source")?;
        Ok(removed)
    }

    /// The best chunks for `query`, best first: whole-word BM25 (heading weighted) plus a share
    /// of the trigram index's BM25. Terms are quoted for FTS5, so no query is a syntax error;
    /// a query without a searchable term has no hits.
    pub fn search(&self, query: &MemoryQuery) -> Result<Vec<MemoryHit>, StoreError> {
        let mut scores: std::collections::HashMap<i64, f64> = std::collections::HashMap::new();
        let connection = self.connection();
        if let Some(expression) = words_expression(&query.terms) {
            for (id, score) in ranked(&connection, "memory_words", &expression, query)? {
                *scores.entry(id).or_default() += score;
            }
        }
        if let Some(expression) = trigram_expression(&query.terms) {
            for (id, score) in ranked(&connection, "memory_trigram", &expression, query)? {
                *scores.entry(id).or_default() += TRIGRAM_FACTOR * score;
            }
        }
        let mut ranked: Vec<(i64, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(query.limit);
        let mut statement = connection
            .prepare_cached(
                "SELECT s.scope, s.root, s.path, s.content_hash, s.modified_ms,
                        c.heading, c.body, c.line_start, c.line_end
                 FROM memory_chunks c JOIN memory_sources s ON s.id = c.source_id
                 WHERE c.id = ?1",
            )
            .ctx("reading memory hits")?;
        let mut hits = Vec::with_capacity(ranked.len());
        for (id, score) in ranked {
            let hit = statement
                .query_row(params![id], |row| {
                    // The CHECK constraint admits only the three scopes.
                    let scope =
                        MemoryScope::parse(&row.get::<_, String>(0)?).unwrap_or(MemoryScope::Notes);
                    Ok((
                        IndexedSource {
                            key: MemorySourceKey {
                                scope,
                                root: row.get(1)?,
                                path: row.get(2)?,
                            },
                            content_hash: row.get(3)?,
                            modified_ms: row.get(4)?,
                        },
                        MemoryChunk {
                            heading: row.get(5)?,
                            body: row.get(6)?,
                            line_start: row.get(7)?,
                            line_end: row.get(8)?,
                        },
                    ))
                })
                .optional()
                .ctx("reading memory hits")?;
            if let Some((source, chunk)) = hit {
                hits.push(MemoryHit {
                    source,
                    chunk,
                    score,
                });
            }
        }
        Ok(hits)
    }

    /// Stores a note; the index picks it up at the next refresh.
    pub fn add_note(
        &self,
        text: &str,
        tags: &[String],
        created_ms: i64,
    ) -> Result<MemoryNote, StoreError> {
        let tags_json = serde_json::to_string(tags).json_ctx("storing a note's tags")?;
        let connection = self.connection();
        connection
            .execute(
                "INSERT INTO memory_notes (text, tags, created_ms) VALUES (?1, ?2, ?3)",
                params![text, tags_json, created_ms],
            )
            .ctx("adding a note")?;
        Ok(MemoryNote {
            id: connection.last_insert_rowid(),
            text: text.to_owned(),
            tags: tags.to_vec(),
            created_ms,
        })
    }

    /// Every note, oldest first.
    pub fn notes(&self) -> Result<Vec<MemoryNote>, StoreError> {
        let connection = self.connection();
        let mut statement = connection
            .prepare_cached("SELECT id, text, tags, created_ms FROM memory_notes ORDER BY id")
            .ctx("listing notes")?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                ))
            })
            .ctx("listing notes")?;
        let mut notes = Vec::new();
        for row in rows {
            let (id, text, tags, created_ms) = row.ctx("listing notes")?;
            let tags = serde_json::from_str(&tags).json_ctx("reading a note's tags")?;
            notes.push(MemoryNote {
                id,
                text,
                tags,
                created_ms,
            });
        }
        Ok(notes)
    }

    /// Removes note `id` and its indexed chunks in one transaction. `false` when there is no
    /// such note.
    pub fn remove_note(&self, id: i64) -> Result<bool, StoreError> {
        let mut connection = self.connection();
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("removing a note")?;
        let removed = transaction
            .execute("DELETE FROM memory_notes WHERE id = ?1", params![id])
            .ctx("removing a note")?;
        delete_source(
            &transaction,
            &MemorySourceKey {
                scope: MemoryScope::Notes,
                root: String::new(),
                path: id.to_string(),
            },
        )?;
        transaction.commit().ctx("removing a note")?;
        Ok(removed > 0)
    }
}

/// Sets the pragmas and creates the tables (idempotent), refusing a newer schema.
fn prepare(connection: Connection, shown: &str, wal: bool) -> Result<Connection, StoreError> {
    let classify = |error| crate::store::classify(shown, error);
    connection.busy_timeout(BUSY_TIMEOUT).map_err(classify)?;
    // A fresh file switched to WAL by several processes at once can see SQLITE_BUSY without the
    // busy handler; every step is idempotent, so the whole sequence is retried.
    let started = std::time::Instant::now();
    let mut attempt: u64 = 0;
    loop {
        match prepare_once(&connection, wal) {
            Err(error) if crate::store::is_busy(&error) && started.elapsed() < BUSY_TIMEOUT => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(2 + (attempt * 7) % 23));
            }
            Err(error) => return Err(classify(error)),
            Ok(Some(found)) => {
                return Err(StoreError::SchemaTooNew {
                    path: shown.to_owned(),
                    found,
                    supported: MEMORY_SCHEMA_VERSION,
                });
            }
            Ok(None) => return Ok(connection),
        }
    }
}

/// One attempt; `Some(version)` when the file is from a newer build.
fn prepare_once(connection: &Connection, wal: bool) -> rusqlite::Result<Option<i64>> {
    // Reading the schema is the first access to the file: garbage fails here.
    let _schema_version: i64 =
        connection.pragma_query_value(None, "schema_version", |row| row.get(0))?;
    if wal {
        let _mode: String =
            connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    }
    connection.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")?;
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version > MEMORY_SCHEMA_VERSION {
        return Ok(Some(version));
    }
    if version < MEMORY_SCHEMA_VERSION {
        let created = connection.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {MEMORY_SCHEMA_VERSION}; COMMIT;"
        ));
        if created.is_err() && !connection.is_autocommit() {
            // Leave no transaction open for the retry.
            let _ = connection.execute_batch("ROLLBACK");
        }
        created?;
    }
    Ok(None)
}

/// Deletes a source, its chunks and their rows in both FTS tables. `true` when it existed.
fn delete_source(connection: &Connection, key: &MemorySourceKey) -> Result<bool, StoreError> {
    let id: Option<i64> = connection
        .query_row(
            "SELECT id FROM memory_sources WHERE scope = ?1 AND root = ?2 AND path = ?3",
            params![key.scope.as_str(), key.root, key.path],
            |row| row.get(0),
        )
        .optional()
        .ctx("finding a memory source")?;
    let Some(id) = id else {
        return Ok(false);
    };
    for table in ["memory_words", "memory_trigram"] {
        connection
            .execute(
                &format!(
                    "DELETE FROM {table} WHERE rowid IN
                     (SELECT id FROM memory_chunks WHERE source_id = ?1)"
                ),
                params![id],
            )
            .ctx("removing memory chunks")?;
    }
    connection
        .execute("DELETE FROM memory_sources WHERE id = ?1", params![id])
        .ctx("removing a memory source")?;
    Ok(true)
}

/// Chunk ids and scores (higher is better) from one FTS table, within the query's scopes.
fn ranked(
    connection: &Connection,
    table: &str,
    expression: &str,
    query: &MemoryQuery,
) -> Result<Vec<(i64, f64)>, StoreError> {
    let wants = |scope| query.scopes.contains(&scope);
    let sql = format!(
        "SELECT {table}.rowid, -bm25({table}, {HEADING_WEIGHT}, 1.0)
         FROM {table}
         JOIN memory_chunks c ON c.id = {table}.rowid
         JOIN memory_sources s ON s.id = c.source_id
         WHERE {table} MATCH ?1
           AND ((s.scope = 'workspace' AND s.root = ?2 AND ?3)
                OR (s.scope = 'user' AND ?4)
                OR (s.scope = 'notes' AND ?5))
         ORDER BY bm25({table}, {HEADING_WEIGHT}, 1.0)
         LIMIT ?6"
    );
    let mut statement = connection
        .prepare_cached(&sql)
        .ctx("searching the memory index")?;
    let limit = i64::try_from(CANDIDATES_MAX.max(query.limit)).unwrap_or(i64::MAX);
    let rows = statement
        .query_map(
            params![
                expression,
                query.workspace_root,
                wants(MemoryScope::Workspace),
                wants(MemoryScope::User),
                wants(MemoryScope::Notes),
                limit
            ],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, f64>(1)?)),
        )
        .ctx("searching the memory index")?;
    rows.collect::<Result<_, _>>()
        .ctx("searching the memory index")
}

/// An FTS5 string: the text between double quotes, inner quotes doubled. Inside a string FTS5
/// reads no operator, prefix star, column filter or parenthesis.
fn fts_string(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// Any of the terms, each quoted, for the word index. Terms without a letter or digit are left
/// out: the tokenizer would make an empty phrase of them.
fn words_expression(terms: &[MemoryTerm]) -> Option<String> {
    let parts: Vec<String> = terms
        .iter()
        .map(|term| match term {
            MemoryTerm::Word(text) | MemoryTerm::Phrase(text) => text,
        })
        .filter(|text| text.chars().any(char::is_alphanumeric))
        .map(|text| fts_string(text))
        .collect();
    (!parts.is_empty()).then(|| parts.join(" OR "))
}

/// Any of the words of three characters or more, each quoted, for the trigram index (shorter
/// strings cannot match a trigram). Phrases are matched exactly by the word index only.
fn trigram_expression(terms: &[MemoryTerm]) -> Option<String> {
    let parts: Vec<String> = terms
        .iter()
        .filter_map(|term| match term {
            MemoryTerm::Word(text) if text.chars().count() >= 3 => Some(fts_string(text)),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(path: &str, hash: &str) -> IndexedSource {
        IndexedSource {
            key: MemorySourceKey {
                scope: MemoryScope::Workspace,
                root: "/ws".into(),
                path: path.into(),
            },
            content_hash: hash.into(),
            modified_ms: 5,
        }
    }

    fn chunk(heading: &str, body: &str) -> MemoryChunk {
        MemoryChunk {
            heading: heading.into(),
            body: body.into(),
            line_start: 1,
            line_end: 2,
        }
    }

    fn search(index: &MemoryIndex, terms: Vec<MemoryTerm>) -> Vec<String> {
        index
            .search(&MemoryQuery {
                terms,
                scopes: vec![
                    MemoryScope::Workspace,
                    MemoryScope::User,
                    MemoryScope::Notes,
                ],
                workspace_root: "/ws".into(),
                limit: 10,
            })
            .unwrap()
            .into_iter()
            .map(|hit| format!("{}#{}", hit.source.key.path, hit.chunk.heading))
            .collect()
    }

    #[test]
    fn hostile_terms_are_strings_not_syntax() {
        let index = MemoryIndex::open_in_memory().unwrap();
        index
            .replace_source(
                &source("a.md", "h"),
                &[chunk("Deploy", "NEAR( OR -x \"q\"")],
            )
            .unwrap();
        for hostile in [
            "\"", "*", "NEAR(", "-", "OR", "OR OR", "a\"b", "(", ")", ":", "^",
        ] {
            let found = search(&index, vec![MemoryTerm::Word(hostile.into())]);
            assert!(found.len() <= 1, "{hostile}: {found:?}");
        }
        assert_eq!(
            search(&index, vec![MemoryTerm::Phrase("NEAR( OR".into())]),
            ["a.md#Deploy"]
        );
    }

    #[test]
    fn replacing_a_source_drops_its_old_chunks() {
        let index = MemoryIndex::open_in_memory().unwrap();
        index
            .replace_source(&source("a.md", "1"), &[chunk("Old", "alpha")])
            .unwrap();
        index
            .replace_source(&source("a.md", "2"), &[chunk("New", "beta")])
            .unwrap();
        assert!(search(&index, vec![MemoryTerm::Word("alpha".into())]).is_empty());
        assert_eq!(
            search(&index, vec![MemoryTerm::Word("beta".into())]),
            ["a.md#New"]
        );
        assert!(index.remove_source(&source("a.md", "2").key).unwrap());
        assert!(search(&index, vec![MemoryTerm::Word("beta".into())]).is_empty());
        assert!(
            index
                .sources(MemoryScope::Workspace, "/ws")
                .unwrap()
                .is_empty()
        );
    }
}
