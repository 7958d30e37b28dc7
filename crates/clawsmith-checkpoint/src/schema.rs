//! The schema, one forward migration per version (`PRAGMA user_version`).
//!
//! A migration is applied inside the same `BEGIN IMMEDIATE` transaction that bumps the version,
//! so two processes opening an old file at once migrate it exactly once. Migrations only ever
//! add: a released version's SQL is never edited.

/// Version 1: sessions, history, todos, blobs, checkpoints, the journal, pending approvals.
const V1: &str = r#"
CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    parent_id       TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    created_at      INTEGER NOT NULL,
    workspace_root  TEXT NOT NULL
);
CREATE TABLE messages (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    message_json  TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
) WITHOUT ROWID;
CREATE TABLE events (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    sequence      INTEGER NOT NULL,
    type          TEXT NOT NULL,
    timestamp_ms  INTEGER NOT NULL,
    event_json    TEXT NOT NULL,
    PRIMARY KEY (session_id, sequence)
) WITHOUT ROWID;
CREATE TABLE session_todos (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    todos_json  TEXT NOT NULL
);
CREATE TABLE blobs (
    hash     TEXT PRIMARY KEY,
    size     INTEGER NOT NULL,
    content  BLOB NOT NULL
);
CREATE TABLE checkpoints (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id         TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER,
    message_count   INTEGER NOT NULL,
    event_sequence  INTEGER NOT NULL,
    todos_json      TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('open', 'finished', 'undone')),
    files_undone    INTEGER NOT NULL DEFAULT 0,
    session_undone  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, turn_id)
);
CREATE TABLE checkpoint_files (
    checkpoint_id  INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,
    path           TEXT NOT NULL,
    position       INTEGER NOT NULL,
    pre_hash       TEXT REFERENCES blobs(hash),
    pre_mode       INTEGER,
    post_hash      TEXT,
    post_mode      INTEGER,
    bytes_before   INTEGER NOT NULL,
    bytes_after    INTEGER NOT NULL,
    lines_added    INTEGER,
    lines_removed  INTEGER,
    PRIMARY KEY (checkpoint_id, path)
);
CREATE INDEX checkpoint_files_pre ON checkpoint_files(pre_hash);
CREATE INDEX checkpoint_files_post ON checkpoint_files(post_hash);
CREATE TABLE journal (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    closed_at   INTEGER,
    status      TEXT,
    PRIMARY KEY (session_id, call_id)
);
CREATE TABLE pending_approvals (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    approval_id   TEXT NOT NULL,
    turn_id       TEXT NOT NULL,
    call_id       TEXT NOT NULL,
    request_json  TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (session_id, approval_id)
);
"#;

/// Version 2: artifacts (A4) and restore plans (crash-safe undo).
const V2: &str = r#"
CREATE TABLE artifacts (
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    artifact_id  TEXT NOT NULL,
    blob_hash    TEXT NOT NULL REFERENCES blobs(hash),
    size         INTEGER NOT NULL,
    lines        INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (session_id, artifact_id)
);
CREATE INDEX artifacts_blob ON artifacts(blob_hash);
CREATE TABLE restore_plans (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    workspace_root  TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    plan_json       TEXT NOT NULL
);
"#;

/// Version 3: a call id names one call per *turn*, not per session (providers that number calls
/// `call_0`, `call_1` in every turn reuse them), so the journal's key gains the turn.
const V3: &str = r#"
CREATE TABLE journal_v3 (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    tool_name   TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    closed_at   INTEGER,
    status      TEXT,
    PRIMARY KEY (session_id, turn_id, call_id)
);
INSERT INTO journal_v3
    SELECT session_id, call_id, turn_id, tool_name, args_json, started_at, closed_at, status
    FROM journal ORDER BY rowid;
DROP TABLE journal;
ALTER TABLE journal_v3 RENAME TO journal;
"#;

/// Version 4: opening a session reads what it needs by index, whatever the history's length —
/// the last event of a kind (the last `model.request` holds the activations), and the restore
/// plans and open checkpoints of one session.
const V4: &str = r#"
CREATE INDEX IF NOT EXISTS events_kind ON events(session_id, type, sequence);
CREATE INDEX IF NOT EXISTS restore_plans_session ON restore_plans(session_id);
CREATE INDEX IF NOT EXISTS checkpoints_state ON checkpoints(session_id, state);
"#;

/// Version 5: a `tool.completed` stored without its legacy `output` names the tool message that
/// holds the text (`message_idx`), so reading any page of events derives it by primary key
/// (call ids repeat across turns, so the id alone would not say which message).
const V5: &str = r#"
ALTER TABLE events ADD COLUMN message_idx INTEGER;
"#;

/// Version 6: the open calls of a session by index (recovery's first question on every open),
/// not by walking every call the session ever journaled.
const V6: &str = r#"
CREATE INDEX IF NOT EXISTS journal_open ON journal(session_id) WHERE closed_at IS NULL;
"#;

/// Version 7: a change a command made names it (issue 16): `origin` (`command`; `NULL` for a file
/// tool's change) and the call's id.
const V7: &str = r#"
ALTER TABLE checkpoint_files ADD COLUMN origin TEXT;
ALTER TABLE checkpoint_files ADD COLUMN call_id TEXT;
"#;

/// Version 8: a command's capture, noted before the command starts (issue 16): the workspace
/// manifest it runs against, so a process killed mid-command leaves the next open of the session
/// what it needs to record the command's changes; and what a command changed that undo cannot
/// give back (an ignored path, a file over the size limit), so undo can name it.
const V8: &str = r#"
CREATE TABLE IF NOT EXISTS command_captures (
    session_id     TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id        TEXT NOT NULL,
    call_id        TEXT NOT NULL,
    manifest_hash  TEXT NOT NULL REFERENCES blobs(hash),
    PRIMARY KEY (session_id, turn_id, call_id)
);
CREATE TABLE IF NOT EXISTS uncaptured_changes (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    PRIMARY KEY (session_id, turn_id, path)
);
"#;

/// Version 9: a `tool.completed` whose display body is its tool message's text (a whole file
/// read) stores it once: `display_body_in_message` = 1 says the body is the text of the message
/// at `message_idx`, put back when the event is read (issue 15: the body was a second copy of
/// every read file in the log).
const V9: &str = r#"
ALTER TABLE events ADD COLUMN display_body_in_message INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 10: messages and events become rowid tables with their key in a separate index
/// (issue 15). As `WITHOUT ROWID` tables the key's b-tree held the whole row, and a row over a
/// page (a 10 KB tool result, a `model.request`) spills onto overflow pages: every seek that
/// compared against such a cell (the next index, the next sequence, the insert itself) read the
/// whole row back, and SQLite reads overflow pages straight from the file, past its cache — an
/// MCP `read_file` of 10 KB read 18 pages from disk per call. The key index holds only the key.
const V10: &str = r#"
CREATE TABLE messages_v10 (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx           INTEGER NOT NULL,
    message_json  TEXT NOT NULL,
    PRIMARY KEY (session_id, idx)
);
INSERT INTO messages_v10 (session_id, idx, message_json)
    SELECT session_id, idx, message_json FROM messages ORDER BY session_id, idx;
DROP TABLE messages;
ALTER TABLE messages_v10 RENAME TO messages;
CREATE TABLE events_v10 (
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    sequence      INTEGER NOT NULL,
    type          TEXT NOT NULL,
    timestamp_ms  INTEGER NOT NULL,
    event_json    TEXT NOT NULL,
    message_idx   INTEGER,
    display_body_in_message INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, sequence)
);
INSERT INTO events_v10
    (session_id, sequence, type, timestamp_ms, event_json, message_idx, display_body_in_message)
    SELECT session_id, sequence, type, timestamp_ms, event_json, message_idx,
           display_body_in_message
    FROM events ORDER BY session_id, sequence;
DROP TABLE events;
ALTER TABLE events_v10 RENAME TO events;
CREATE INDEX events_kind ON events(session_id, type, sequence);
"#;

/// Version 11: the directories each command made (issue 16), seen as absent before it and
/// present after it, so undo removes exactly those once they are empty again (birth times are
/// not reliable for this: the file system's clock is coarser than the turn's).
const V11: &str = r#"
CREATE TABLE IF NOT EXISTS created_directories (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    PRIMARY KEY (session_id, turn_id, path)
);
"#;

/// Version 12: a content over `blob::FILE_THRESHOLD` is a blob file beside the database
/// (`<database>-blobs/ab/cdef…`, see `blob.rs`), its row keeping the hash and size with
/// `in_file = 1` and an empty `content` (issue 15: a 1 MB prior content went through the WAL
/// page by page and was copied again into the main file). Rows already stored keep their
/// content (`in_file = 0`) and are read as before.
const V12: &str = r#"
ALTER TABLE blobs ADD COLUMN in_file INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 13: `events_kind` indexes only the kinds a session has few of (issue 15). Every call
/// writes a `tool.started` and a `tool.completed`, and each put an entry in this index: one more
/// b-tree leaf (a 4 KB WAL frame) in every call's commit, for an index that answers "the last
/// event of a kind" — which opening a session asks of `model.request`. The last `tool.*` event is
/// among the last few of the session, found by walking its key backwards
/// (`Store::last_event_of_kind`). The kinds left out are listed in `UNINDEXED_KINDS`
/// (session.rs), which must match this `WHERE` word for word (SQLite uses a partial index only
/// when the query repeats its condition).
const V13: &str = r#"
DROP INDEX IF EXISTS events_kind;
CREATE INDEX events_kind ON events(session_id, type, sequence)
    WHERE type NOT IN ('tool.started', 'tool.completed');
"#;

/// Every migration, in order: entry `i` takes the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
