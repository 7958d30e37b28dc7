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

/// Version 7: a change a command made names it: `origin` (`command`; `NULL` for a file
/// tool's change) and the call's id.
const V7: &str = r#"
ALTER TABLE checkpoint_files ADD COLUMN origin TEXT;
ALTER TABLE checkpoint_files ADD COLUMN call_id TEXT;
"#;

/// Version 8: a command's capture, noted before the command starts: the workspace
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
/// at `message_idx`, put back when the event is read (the body was a second copy of
/// every read file in the log).
const V9: &str = r#"
ALTER TABLE events ADD COLUMN display_body_in_message INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 10: messages and events become rowid tables with their key in a separate index.
/// As `WITHOUT ROWID` tables the key's b-tree held the whole row, and a row over a
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

/// Version 11: the directories each command made, seen as absent before it and
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
/// `in_file = 1` and an empty `content` (a 1 MB prior content went through the WAL
/// page by page and was copied again into the main file). Rows already stored keep their
/// content (`in_file = 0`) and are read as before.
const V12: &str = r#"
ALTER TABLE blobs ADD COLUMN in_file INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 13: `events_kind` indexes only the kinds a session has few of. Every call
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

/// Version 14: messages and events are keyed by one integer, their rowid: `key` =
/// the session's `number` (a column `sessions` gains, unique, given at insert by a trigger)
/// shifted left by 32, plus the message's `idx` or the event's `sequence`. One b-tree per table:
/// V10's separate `(session_id, idx/sequence)` key index cost every call's commit two more WAL
/// frames (the two index leaves), and a rowid table keeps V10's point (no whole row read back
/// at a seek: the b-tree's cells are compared by their integer key alone). A session's rows are
/// the key range `[number << 32, (number << 32) + 2^32)`; the store reads and writes them by
/// that range (`SessionRows` in session.rs).
///
/// `messages` and `events` stay as views of the same shape as before (`session_id`, `idx` or
/// `sequence`, the other columns), writable through `INSTEAD OF` triggers, for people and
/// scripts who query the file with `sqlite3`; the store itself uses the tables. A session's
/// rows go with it (a trigger on `sessions`, where a foreign key's cascade was: with no
/// `session_id` column left, a cascade would have had nothing to find them by).
const V14: &str = r#"
ALTER TABLE sessions ADD COLUMN number INTEGER;
UPDATE sessions SET number = rowid;
CREATE UNIQUE INDEX sessions_number ON sessions(number);
CREATE TRIGGER sessions_numbered AFTER INSERT ON sessions WHEN NEW.number IS NULL BEGIN
    UPDATE sessions SET number = (SELECT COALESCE(MAX(number), 0) + 1 FROM sessions)
        WHERE rowid = NEW.rowid;
END;
CREATE TABLE message_rows (
    key           INTEGER PRIMARY KEY,
    message_json  TEXT NOT NULL
);
INSERT INTO message_rows (key, message_json)
    SELECT (s.number << 32) + m.idx, m.message_json
    FROM messages m JOIN sessions s ON s.id = m.session_id
    ORDER BY 1;
DROP TABLE messages;
CREATE TABLE event_rows (
    key           INTEGER PRIMARY KEY,
    type          TEXT NOT NULL,
    timestamp_ms  INTEGER NOT NULL,
    event_json    TEXT NOT NULL,
    message_idx   INTEGER,
    display_body_in_message INTEGER NOT NULL DEFAULT 0
);
INSERT INTO event_rows
    (key, type, timestamp_ms, event_json, message_idx, display_body_in_message)
    SELECT (s.number << 32) + e.sequence, e.type, e.timestamp_ms, e.event_json, e.message_idx,
           e.display_body_in_message
    FROM events e JOIN sessions s ON s.id = e.session_id
    ORDER BY 1;
DROP TABLE events;
CREATE INDEX events_kind ON event_rows(type)
    WHERE type NOT IN ('tool.started', 'tool.completed');
CREATE TRIGGER sessions_rows AFTER DELETE ON sessions BEGIN
    DELETE FROM message_rows
        WHERE key >= OLD.number << 32 AND key < (OLD.number + 1) << 32;
    DELETE FROM event_rows
        WHERE key >= OLD.number << 32 AND key < (OLD.number + 1) << 32;
END;
CREATE VIEW messages (session_id, idx, message_json) AS
    SELECT s.id, m.key & 4294967295, m.message_json
    FROM message_rows m JOIN sessions s ON s.number = m.key >> 32;
CREATE VIEW events
    (session_id, sequence, type, timestamp_ms, event_json, message_idx, display_body_in_message)
    AS SELECT s.id, e.key & 4294967295, e.type, e.timestamp_ms, e.event_json, e.message_idx,
              e.display_body_in_message
    FROM event_rows e JOIN sessions s ON s.number = e.key >> 32;
CREATE TRIGGER messages_insert INSTEAD OF INSERT ON messages BEGIN
    SELECT RAISE(ABORT, 'messages: no such session')
        WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id);
    SELECT RAISE(ABORT, 'messages: idx must be an integer from 0 to 4294967295')
        WHERE typeof(NEW.idx) != 'integer' OR NEW.idx < 0 OR NEW.idx > 4294967295;
    INSERT INTO message_rows (key, message_json) VALUES (
        ((SELECT number FROM sessions WHERE id = NEW.session_id) << 32) + NEW.idx,
        NEW.message_json);
END;
CREATE TRIGGER messages_update INSTEAD OF UPDATE ON messages BEGIN
    SELECT RAISE(ABORT, 'messages: session_id and idx cannot be changed')
        WHERE NEW.session_id IS NOT OLD.session_id OR NEW.idx IS NOT OLD.idx;
    UPDATE message_rows SET message_json = NEW.message_json
        WHERE key = ((SELECT number FROM sessions WHERE id = OLD.session_id) << 32) + OLD.idx;
END;
CREATE TRIGGER messages_delete INSTEAD OF DELETE ON messages BEGIN
    DELETE FROM message_rows
        WHERE key = ((SELECT number FROM sessions WHERE id = OLD.session_id) << 32) + OLD.idx;
END;
CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
    SELECT RAISE(ABORT, 'events: no such session')
        WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id);
    SELECT RAISE(ABORT, 'events: sequence must be an integer from 0 to 4294967295')
        WHERE typeof(NEW.sequence) != 'integer' OR NEW.sequence < 0
            OR NEW.sequence > 4294967295;
    INSERT INTO event_rows
        (key, type, timestamp_ms, event_json, message_idx, display_body_in_message)
        VALUES (
            ((SELECT number FROM sessions WHERE id = NEW.session_id) << 32) + NEW.sequence,
            NEW.type, NEW.timestamp_ms, NEW.event_json, NEW.message_idx,
            COALESCE(NEW.display_body_in_message, 0));
END;
CREATE TRIGGER events_update INSTEAD OF UPDATE ON events BEGIN
    SELECT RAISE(ABORT, 'events: session_id and sequence cannot be changed')
        WHERE NEW.session_id IS NOT OLD.session_id OR NEW.sequence IS NOT OLD.sequence;
    UPDATE event_rows SET type = NEW.type, timestamp_ms = NEW.timestamp_ms,
            event_json = NEW.event_json, message_idx = NEW.message_idx,
            display_body_in_message = NEW.display_body_in_message
        WHERE key = ((SELECT number FROM sessions WHERE id = OLD.session_id) << 32)
            + OLD.sequence;
END;
CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN
    DELETE FROM event_rows
        WHERE key = ((SELECT number FROM sessions WHERE id = OLD.session_id) << 32)
            + OLD.sequence;
END;
"#;

/// Version 15: `events_kind` is ordered by the event's key, not by its kind. Keyed
/// by `type` (V14), a turn's `turn.started`, `model.request` and `turn.completed` went to three
/// places in the index — the end of each kind's range — so an MCP call's commit (one turn) wrote
/// three of its leaves, three 4 KB WAL frames (strace of 500 calls: 16.0 frames a commit, 13.7
/// with this index; processor time ~10% less a call). In key order a commit's entries are
/// appended together at the end of the index. The `WHERE` is the same, so the index still
/// leaves out the kinds every call writes (V13) and `Store::last_event_of_kind`'s query (whose
/// `INDEXED BY` names it) is unchanged: it now walks the session's key range in the index
/// backwards, over the events that are not `tool.*`, to the last one of the kind — for
/// `model.request`, which opening a session asks for, the nearest few (one per turn or model
/// request). `type` is in the index, so the walk reads no row but the one it returns.
const V15: &str = r#"
DROP INDEX IF EXISTS events_kind;
CREATE INDEX events_kind ON event_rows(key, type)
    WHERE type NOT IN ('tool.started', 'tool.completed');
"#;

/// Version 16: the `checkpoints.state` check compares the value with each state instead of
/// `IN (…)`. SQLite evaluates an `IN` list of three or more constants through an
/// ephemeral b-tree built at every run of the statement — a temporary database opened, its page
/// cache allocated (page faults), the list inserted, the b-tree closed — and the check runs at
/// each turn's `INSERT` and its `UPDATE` to `finished`: ~6% of an MCP server's samples. The two
/// spellings accept and refuse the same values (`NULL` aside, which `NOT NULL` refuses first).
/// Only the text of the check changes, nothing on disk, so this is SQLite's documented way to
/// change a table's `CHECK` without copying it (`writable_schema`, "making other kinds of table
/// schema changes"). `RESET` turns it off and reloads this connection's schema (the process that
/// migrates a new file goes on with it); the index re-created after it is a schema change of the
/// usual kind, which bumps the schema cookie so every other connection re-reads the schema.
const V16: &str = r#"
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
    SET sql = replace(sql,
        'CHECK (state IN (''open'', ''finished'', ''undone''))',
        'CHECK (state = ''open'' OR state = ''finished'' OR state = ''undone'')')
    WHERE type = 'table' AND name = 'checkpoints';
PRAGMA writable_schema = RESET;
DROP INDEX IF EXISTS checkpoints_state;
CREATE INDEX checkpoints_state ON checkpoints(session_id, state);
"#;

/// Version 17: `checkpoints` without `AUTOINCREMENT`. With it, every new checkpoint
/// — one a turn, one an MCP call — updated the table's row in `sqlite_sequence`, so that page
/// was one more 4 KB WAL frame in every turn's commit (strace of 300 MCP calls: 13.6 frames a
/// commit, `sqlite_sequence`'s page in each). What `AUTOINCREMENT` gave is kept another way: an
/// id is never given twice, even after the newest checkpoint is deleted (a pending restore plan
/// names checkpoints by id, so a new turn must never take a deleted one's). `retired_ids` holds,
/// per table, the highest id of a row ever deleted (a trigger on delete, cascades included; only
/// deletions write it); the store gives a new checkpoint `max(newest id, retired id) + 1`
/// (`next_checkpoint_id!` in checkpoint.rs) inside its write transaction. The migration seeds it
/// with the sequence `AUTOINCREMENT` kept, which covers every id given before. A row inserted by
/// hand must name its id the same way (without one SQLite takes the newest id plus one). No
/// trigger checks inserts: any trigger on a table makes SQLite run each insert into it as a
/// statement that may need to roll back halfway, with a statement journal — a copy of every
/// page the insert changes (3.6% of an MCP server's samples when one was tried).
///
/// Only the table's text changes, through `writable_schema` as in V16: `AUTOINCREMENT` is not
/// stored in the table's b-tree or its indexes — it decides how SQLite picks a rowid and keeps
/// `sqlite_sequence` — so nothing on disk changes shape, and the table is not copied (a copy
/// would have had to keep `checkpoint_files`' cascading foreign key from deleting every file row
/// with the old table). All of it runs in the migration's one transaction: a process killed
/// during it leaves version 16 untouched.
const V17: &str = r#"
CREATE TABLE IF NOT EXISTS retired_ids (
    name  TEXT PRIMARY KEY,
    id    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO retired_ids (name, id)
    SELECT 'checkpoints', seq FROM sqlite_sequence WHERE name = 'checkpoints'
    ON CONFLICT (name) DO UPDATE SET id = max(id, excluded.id);
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
    SET sql = replace(sql, 'INTEGER PRIMARY KEY AUTOINCREMENT', 'INTEGER PRIMARY KEY')
    WHERE type = 'table' AND name = 'checkpoints';
PRAGMA writable_schema = RESET;
DELETE FROM sqlite_sequence WHERE name = 'checkpoints';
CREATE TRIGGER IF NOT EXISTS checkpoints_retire AFTER DELETE ON checkpoints BEGIN
    INSERT INTO retired_ids (name, id) VALUES ('checkpoints', OLD.id)
        ON CONFLICT (name) DO UPDATE SET id = max(id, excluded.id);
END;
"#;

/// Version 18: what commands changed in the workspace's repository (`repository.rs`): per call,
/// each `.git` file's content before and after (hex SHA-256 of a blob and mode, NULL = absent),
/// or an object it deleted (`object = 1`, kept by name in the mirror beside the database).
/// `undone` marks the rows an undo already went over.
const V18: &str = r#"
CREATE TABLE IF NOT EXISTS repository_changes (
    id          INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id     TEXT NOT NULL,
    call_id     TEXT NOT NULL,
    path        TEXT NOT NULL,
    object      INTEGER NOT NULL,
    pre_hash    TEXT,
    pre_mode    INTEGER,
    post_hash   TEXT,
    post_mode   INTEGER,
    undone      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS repository_changes_session
    ON repository_changes (session_id, undone);
CREATE INDEX IF NOT EXISTS repository_changes_pre_hash ON repository_changes (pre_hash);
"#;

/// Version 19: the last workspace manifest stored for each workspace root (hex SHA-256 of its
/// blob), so a new process's first command reads again only the files whose stamps moved.
/// The blob is not kept by a prune: a freed one only costs the next command a full read.
const V19: &str = r#"
CREATE TABLE IF NOT EXISTS workspace_manifests (
    workspace_root TEXT PRIMARY KEY,
    manifest_hash  TEXT NOT NULL,
    updated_at     INTEGER NOT NULL
);
"#;

/// Version 20: what a session undo takes out of a session's history — the messages and events
/// after the turn undone back to — kept with when and how it was undone, so the session reads
/// as it was before the turns while its audit trail still shows what they did. Deleted with
/// the session.
const V20: &str = r#"
CREATE TABLE IF NOT EXISTS undone_history (
    id            INTEGER PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    turn_id       TEXT NOT NULL,
    scope         TEXT NOT NULL,
    undone_at     INTEGER NOT NULL,
    messages_json TEXT NOT NULL,
    events_json   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS undone_history_session ON undone_history (session_id, id);
"#;

/// Every migration, in order: entry `i` takes the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V20,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;
