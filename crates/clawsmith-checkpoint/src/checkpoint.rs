//! Turn checkpoints (K1, K7): what a turn started from and which files it changed.

use clawsmith_fs::diff::{DiffPurpose, LineDiff};
use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use crate::blob::{put_blob, require_blob};
use crate::error::{JsonContext, SqlContext, StoreError};
use crate::session::{Tail, Todo, require_session, todos_json};
use crate::store::Store;

/// Where a checkpoint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointState {
    /// The turn is running (or its process died before finishing it).
    Open,
    /// The turn finished; it is a restore point.
    Finished,
    /// The turn was undone (files, session or both; see the flags on [`CheckpointInfo`]).
    Undone,
}

impl CheckpointState {
    /// The stored spelling: `open`, `finished`, `undone`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckpointState::Open => "open",
            CheckpointState::Finished => "finished",
            CheckpointState::Undone => "undone",
        }
    }

    pub(crate) fn parse(text: &str) -> CheckpointState {
        match text {
            "open" => CheckpointState::Open,
            "finished" => CheckpointState::Finished,
            _ => CheckpointState::Undone,
        }
    }
}

/// One checkpoint (one turn of one session).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// When the turn began (store clock, ms).
    pub created_at_ms: u64,
    /// When it finished.
    pub finished_at_ms: Option<u64>,
    /// Number of messages when the turn began (K7).
    pub message_count: u64,
    /// Last event sequence when the turn began (K7).
    pub event_sequence: u64,
    /// The todo list when the turn began (K7).
    pub todos: Vec<Todo>,
    /// Open, finished or undone.
    pub state: CheckpointState,
    /// The turn's file changes were rolled back.
    pub files_undone: bool,
    /// The session (messages, events, todos) was rewound to this turn's start.
    pub session_undone: bool,
    /// Number of paths the turn changed.
    pub file_count: u64,
}

/// How a path changed in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Absent before, present after.
    Added,
    /// Present before and after.
    Modified,
    /// Present before, absent after.
    Deleted,
    /// Absent before and after (created then removed, or a failed create).
    Unchanged,
}

impl ChangeKind {
    /// The change between a path's state before and after a turn, given whether it existed at
    /// each end.
    pub fn between(before: bool, after: bool) -> ChangeKind {
        match (before, after) {
            (false, true) => ChangeKind::Added,
            (true, true) => ChangeKind::Modified,
            (true, false) => ChangeKind::Deleted,
            (false, false) => ChangeKind::Unchanged,
        }
    }
}

/// One entry of a turn's change list (K4): a path and its stats, never its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Workspace-relative path.
    pub path: String,
    /// Added, modified, deleted.
    pub kind: ChangeKind,
    /// Size before the turn.
    pub bytes_before: u64,
    /// Size after the turn.
    pub bytes_after: u64,
    /// Lines added; `None` when not computable (binary, or the post content is gone).
    pub lines_added: Option<u64>,
    /// Lines removed; `None` when not computable.
    pub lines_removed: Option<u64>,
    /// Who made the change when it was not a file tool: `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The call that made it, when `origin` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// What [`Store::finish_turn`] returns (K1): paths and stats only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnManifest {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_id: String,
    /// Every path the turn changed, in the order first changed.
    pub files: Vec<FileChange>,
}

/// One checkpoint_files row as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRecord {
    pub path: String,
    pub pre_hash: Option<String>,
    pub pre_mode: Option<u32>,
    pub post_hash: Option<String>,
    pub post_mode: Option<u32>,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub lines_added: Option<u64>,
    pub lines_removed: Option<u64>,
    pub origin: Option<String>,
    pub call_id: Option<String>,
}

impl From<&FileRecord> for crate::restore::RecordedFile {
    fn from(record: &FileRecord) -> Self {
        crate::restore::RecordedFile {
            path: record.path.clone(),
            pre_hash: record.pre_hash.clone(),
            pre_mode: record.pre_mode,
            post_hash: record.post_hash.clone(),
            post_mode: record.post_mode,
        }
    }
}

impl FileRecord {
    pub(crate) fn change(&self) -> FileChange {
        let kind = ChangeKind::between(self.pre_hash.is_some(), self.post_hash.is_some());
        FileChange {
            path: self.path.clone(),
            kind,
            bytes_before: self.bytes_before,
            bytes_after: self.bytes_after,
            lines_added: self.lines_added,
            lines_removed: self.lines_removed,
            origin: self.origin.clone(),
            call_id: self.call_id.clone(),
        }
    }
}

impl Store {
    /// The checkpoint of one turn.
    pub fn checkpoint(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<CheckpointInfo, StoreError> {
        self.read("reading a checkpoint", |tx| {
            checkpoint_info(tx, session_id, turn_id)
        })
    }

    /// Every checkpoint of the session, oldest first (undone ones included: history is kept).
    pub fn checkpoints(&self, session_id: &str) -> Result<Vec<CheckpointInfo>, StoreError> {
        self.read("listing checkpoints", |tx| {
            require_session(tx, session_id)?;
            let turns = turn_ids(tx, session_id)?;
            turns
                .iter()
                .map(|turn_id| checkpoint_info(tx, session_id, turn_id))
                .collect()
        })
    }

    /// The change list of a turn (K4): paths and stats, in first-change order.
    pub fn change_list(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<FileChange>, StoreError> {
        self.read("reading a change list", |tx| {
            let id = checkpoint_id(tx, session_id, turn_id)?;
            Ok(file_records(tx, id)?
                .iter()
                .map(FileRecord::change)
                .collect())
        })
    }

    /// Records the state of `path` before a change (the recorder's `before_change`): the first
    /// call per path and turn stores the prior content as a blob (`None` = absent); later calls
    /// change nothing. An unknown turn is begun implicitly, so a caller that forgot
    /// [`Store::begin_turn`] still gets its files saved; a finished or undone turn refuses.
    pub fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let fsync = self.fsyncs();
        self.write("recording a prior state", |tx| {
            let id = match open_checkpoint_id(tx, session_id, turn_id)? {
                Some(id) => id,
                None => {
                    begin_turn_in(tx, session_id, turn_id, now)?;
                    checkpoint_id(tx, session_id, turn_id)?
                }
            };
            if row_exists(
                tx,
                "SELECT 1 FROM checkpoint_files WHERE checkpoint_id = ?1 AND path = ?2",
                params![id, path],
            )
            .ctx("recording a prior state")?
            {
                return Ok(());
            }
            let (pre_hash, pre_mode, size) = match prior {
                Some((content, mode)) => (
                    Some(put_blob(tx, content, fsync)?),
                    Some(mode),
                    content.len() as u64,
                ),
                None => (None, None, 0),
            };
            let position: u64 = cached_row(
                tx,
                "SELECT count(*) FROM checkpoint_files WHERE checkpoint_id = ?1",
                [id],
                |row| row.get(0),
            )
            .ctx("recording a prior state")?;
            // Until an after-change arrives, the post state is the prior state: a change that
            // never happened restores to itself.
            cached_execute(
                tx,
                "INSERT INTO checkpoint_files (checkpoint_id, path, position, pre_hash, pre_mode,
                     post_hash, post_mode, bytes_before, bytes_after)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?5, ?6, ?6)",
                params![id, path, position, pre_hash, pre_mode, size],
            )
            .ctx("recording a prior state")?;
            Ok(())
        })
    }

    /// Records the state of `path` right after a change (the recorder's `after_change`):
    /// `None` = absent, otherwise (SHA-256, size, mode). Requires a prior
    /// [`Store::record_before`] for the path in this turn.
    pub fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError> {
        self.write("recording a post state", |tx| {
            let id = open_checkpoint_id(tx, session_id, turn_id)?.ok_or_else(|| {
                StoreError::UnknownTurn {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                }
            })?;
            let (post_hash, post_mode, size) = match post {
                Some((hash, size, mode)) => (Some(hex::encode(hash)), Some(mode), size),
                None => (None, None, 0),
            };
            let changed = cached_execute(
                tx,
                "UPDATE checkpoint_files SET post_hash = ?3, post_mode = ?4, bytes_after = ?5,
                         lines_added = NULL, lines_removed = NULL
                     WHERE checkpoint_id = ?1 AND path = ?2",
                params![id, path, post_hash, post_mode, size],
            )
            .ctx("recording a post state")?;
            if changed == 0 {
                return Err(StoreError::Workspace {
                    path: path.to_string(),
                    message: "a change was reported without its prior state".to_string(),
                });
            }
            Ok(())
        })
    }

    /// Finishes a turn and returns its manifest. `post_content` is asked for the current content
    /// of each changed path; when it matches the recorded post hash it is stored as a blob (for
    /// diffs) and the line stats are computed. Finishing a finished turn just returns the
    /// manifest again.
    pub(crate) fn finish_turn_with(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<TurnManifest, StoreError> {
        let now = self.now_ms();
        let fsync = self.fsyncs();
        self.write("finishing a turn", |tx| {
            finish_turn_in(tx, session_id, turn_id, post_content, now, fsync)
        })
    }
}

/// `query_row` through the connection's statement cache: the turn's statements run at every
/// call, and parsing them again was ~13% of an MCP server's processor time (the ☉ profile).
fn cached_row<T, P: rusqlite::Params>(
    tx: &Transaction<'_>,
    sql: &str,
    params: P,
    row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    tx.prepare_cached(sql)?.query_row(params, row)
}

/// Whether `sql` (a `SELECT 1 …` through the statement cache, see [`cached_row`]) finds a row.
fn row_exists<P: rusqlite::Params>(
    tx: &Transaction<'_>,
    sql: &str,
    params: P,
) -> rusqlite::Result<bool> {
    tx.prepare_cached(sql)?.exists(params)
}

/// `execute` through the connection's statement cache (see [`cached_row`]).
fn cached_execute<P: rusqlite::Params>(
    tx: &Transaction<'_>,
    sql: &str,
    params: P,
) -> rusqlite::Result<usize> {
    tx.prepare_cached(sql)?.execute(params)
}

/// [`Store::finish_turn_with`] inside a caller's transaction. The checkpoint's id and state
/// are one lookup and its file rows are read once, the manifest built from them with the line
/// stats this computes (two statements fewer in every turn's finish).
pub(crate) fn finish_turn_in(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
    post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    now: u64,
    fsync: bool,
) -> Result<TurnManifest, StoreError> {
    let (id, state): (i64, String) = cached_row(
        tx,
        "SELECT id, state FROM checkpoints WHERE session_id = ?1 AND turn_id = ?2",
        params![session_id, turn_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()
    .ctx("finishing a turn")?
    .ok_or_else(|| StoreError::UnknownTurn {
        session_id: session_id.to_string(),
        turn_id: turn_id.to_string(),
    })?;
    let mut records = file_records(tx, id)?;
    if state == "open" {
        for record in &mut records {
            let post = match &record.post_hash {
                Some(hash) => post_content(&record.path)
                    .filter(|content| hex::encode(crate::blob::sha256(content)) == *hash),
                None => None,
            };
            if let Some(content) = &post {
                put_blob(tx, content, fsync)?;
            }
            let before = match &record.pre_hash {
                Some(hash) => Some(require_blob(tx, hash)?),
                None => None,
            };
            let stats = match (&record.post_hash, &post) {
                (Some(_), None) => None,
                _ => line_stats(
                    before.as_deref().unwrap_or(&[]),
                    post.as_deref().unwrap_or(&[]),
                ),
            };
            if let Some((added, removed)) = stats {
                cached_execute(
                    tx,
                    "UPDATE checkpoint_files SET lines_added = ?3, lines_removed = ?4
                     WHERE checkpoint_id = ?1 AND path = ?2",
                    params![id, record.path, added, removed],
                )
                .ctx("finishing a turn")?;
                record.lines_added = Some(added);
                record.lines_removed = Some(removed);
            }
        }
        cached_execute(
            tx,
            "UPDATE checkpoints SET state = 'finished', finished_at = ?2 WHERE id = ?1",
            params![id, now],
        )
        .ctx("finishing a turn")?;
    }
    Ok(TurnManifest {
        session_id: session_id.to_string(),
        turn_id: turn_id.to_string(),
        files: records.iter().map(FileRecord::change).collect(),
    })
}

/// Lines added and removed between two texts; `None` if either side is not UTF-8 text (or holds
/// a NUL): what every session store records for a finished turn's file.
pub fn line_stats(before: &[u8], after: &[u8]) -> Option<(u64, u64)> {
    let before = std::str::from_utf8(before).ok()?;
    let after = std::str::from_utf8(after).ok()?;
    if before.contains('\0') || after.contains('\0') {
        return None;
    }
    let (added, removed) = LineDiff::new(before, after, DiffPurpose::Record).counts();
    Some((added as u64, removed as u64))
}

/// The id a new checkpoint gets (schema V17): one past both the newest checkpoint's and the
/// highest id a deleted checkpoint had, so an id is never given twice — `AUTOINCREMENT`'s
/// promise without its `sqlite_sequence` write in every turn's commit. Evaluated inside the
/// store's write transaction (`BEGIN IMMEDIATE`), so no other writer can take the same id; both
/// lookups are one b-tree descent (the rowid's last entry, one key of `retired_ids`).
/// A macro, not a `const`, so the statements using it stay `concat!`ed literals.
macro_rules! next_checkpoint_id {
    () => {
        "(max(COALESCE((SELECT id FROM checkpoints ORDER BY id DESC LIMIT 1), 0),
              COALESCE((SELECT id FROM retired_ids WHERE name = 'checkpoints'), 0)) + 1)"
    };
}
// The tests insert rows by hand with it.
#[cfg(test)]
pub(crate) use next_checkpoint_id;

/// Begins turn `turn_id` of `session_id` inside a caller's transaction ([`Store::begin_turn`]).
pub(crate) fn begin_turn_in(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
    now: u64,
) -> Result<(), StoreError> {
    begin_turn_at_tail(tx, &mut Tail::of(tx, session_id)?, turn_id, now)
}

/// [`begin_turn_in`] for the session of `tail`: the message count and the last event sequence
/// the checkpoint records are the tail's, so the records that follow in the same transaction
/// (an MCP turn's deferred start: its `turn.started`, `model.request` and the call's message)
/// do not look the session, its last message and its last event up again (three
/// statements of ~26 a one-read MCP turn). A turn begun twice is refused by the table's
/// `UNIQUE (session_id, turn_id)` rather than by a lookup before the insert (one statement
/// fewer; the failed insert changes nothing).
pub(crate) fn begin_turn_at_tail(
    tx: &Transaction<'_>,
    tail: &mut Tail,
    turn_id: &str,
    now: u64,
) -> Result<(), StoreError> {
    let messages = tail.next_index(tx)?;
    let sequence = tail.next_sequence(tx)? - 1;
    let todos = todos_json(tx, tail.session_id())?;
    let inserted = cached_execute(
        tx,
        concat!(
            "INSERT INTO checkpoints (id, session_id, turn_id, created_at, message_count,
                 event_sequence, todos_json, state)
             VALUES (",
            next_checkpoint_id!(),
            ", ?1, ?2, ?3, ?4, ?5, ?6, 'open')"
        ),
        params![tail.session_id(), turn_id, now, messages, sequence, todos],
    );
    match inserted {
        Ok(_) => Ok(()),
        Err(rusqlite::Error::SqliteFailure(error, _))
            if error.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE =>
        {
            Err(StoreError::TurnExists {
                session_id: tail.session_id().to_string(),
                turn_id: turn_id.to_string(),
            })
        }
        Err(error) => Err(error).ctx("beginning a turn"),
    }
}

/// The row id of a turn's checkpoint, [`StoreError::UnknownTurn`] if none.
pub(crate) fn checkpoint_id(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
) -> Result<i64, StoreError> {
    cached_row(
        tx,
        "SELECT id FROM checkpoints WHERE session_id = ?1 AND turn_id = ?2",
        params![session_id, turn_id],
        |row| row.get(0),
    )
    .optional()
    .ctx("looking up a checkpoint")?
    .ok_or_else(|| StoreError::UnknownTurn {
        session_id: session_id.to_string(),
        turn_id: turn_id.to_string(),
    })
}

/// The id of the turn's checkpoint if it is open; `None` if the turn has no checkpoint;
/// [`StoreError::TurnClosed`] if it is finished or undone.
pub(crate) fn open_checkpoint_id(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
) -> Result<Option<i64>, StoreError> {
    let row: Option<(i64, String)> = cached_row(
        tx,
        "SELECT id, state FROM checkpoints WHERE session_id = ?1 AND turn_id = ?2",
        params![session_id, turn_id],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .optional()
    .ctx("looking up a checkpoint")?;
    match row {
        None => Ok(None),
        Some((id, state)) if state == "open" => Ok(Some(id)),
        Some((_, state)) => Err(StoreError::TurnClosed {
            session_id: session_id.to_string(),
            turn_id: turn_id.to_string(),
            state,
        }),
    }
}

/// Turn ids of the session in order.
pub(crate) fn turn_ids(tx: &Transaction<'_>, session_id: &str) -> Result<Vec<String>, StoreError> {
    let mut statement = tx
        .prepare_cached("SELECT turn_id FROM checkpoints WHERE session_id = ?1 ORDER BY id")
        .ctx("listing checkpoints")?;
    let rows = statement
        .query_map([session_id], |row| row.get(0))
        .ctx("listing checkpoints")?;
    rows.collect::<Result<Vec<String>, _>>()
        .ctx("listing checkpoints")
}

pub(crate) fn checkpoint_info(
    tx: &Transaction<'_>,
    session_id: &str,
    turn_id: &str,
) -> Result<CheckpointInfo, StoreError> {
    let id = checkpoint_id(tx, session_id, turn_id)?;
    let (info, todos) = cached_row(
        tx,
        "SELECT created_at, finished_at, message_count, event_sequence, todos_json, state,
                 files_undone, session_undone,
                 (SELECT count(*) FROM checkpoint_files WHERE checkpoint_id = checkpoints.id)
             FROM checkpoints WHERE id = ?1",
        [id],
        |row| {
            Ok((
                CheckpointInfo {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                    created_at_ms: row.get(0)?,
                    finished_at_ms: row.get(1)?,
                    message_count: row.get(2)?,
                    event_sequence: row.get(3)?,
                    todos: Vec::new(),
                    state: CheckpointState::parse(&row.get::<_, String>(5)?),
                    files_undone: row.get(6)?,
                    session_undone: row.get(7)?,
                    file_count: row.get(8)?,
                },
                row.get::<_, String>(4)?,
            ))
        },
    )
    .ctx("reading a checkpoint")?;
    Ok(CheckpointInfo {
        todos: serde_json::from_str(&todos).json_ctx("reading a todo snapshot")?,
        ..info
    })
}

/// The file rows of a checkpoint in first-change order.
pub(crate) fn file_records(
    tx: &Transaction<'_>,
    checkpoint_id: i64,
) -> Result<Vec<FileRecord>, StoreError> {
    let mut statement = tx
        .prepare_cached(
            "SELECT path, pre_hash, pre_mode, post_hash, post_mode, bytes_before, bytes_after,
                 lines_added, lines_removed, origin, call_id
             FROM checkpoint_files WHERE checkpoint_id = ?1 ORDER BY position",
        )
        .ctx("reading checkpoint files")?;
    let rows = statement
        .query_map([checkpoint_id], |row| {
            Ok(FileRecord {
                path: row.get(0)?,
                pre_hash: row.get(1)?,
                pre_mode: row.get(2)?,
                post_hash: row.get(3)?,
                post_mode: row.get(4)?,
                bytes_before: row.get(5)?,
                bytes_after: row.get(6)?,
                lines_added: row.get(7)?,
                lines_removed: row.get(8)?,
                origin: row.get(9)?,
                call_id: row.get(10)?,
            })
        })
        .ctx("reading checkpoint files")?;
    rows.collect::<Result<Vec<_>, _>>()
        .ctx("reading checkpoint files")
}

/// Copies every checkpoint of `parent_id` (with its file rows) to `new_id`, in order (K6).
pub(crate) fn copy_checkpoints(
    tx: &Transaction<'_>,
    parent_id: &str,
    new_id: &str,
) -> Result<(), StoreError> {
    let mut statement = tx
        .prepare_cached("SELECT id FROM checkpoints WHERE session_id = ?1 ORDER BY id")
        .ctx("forking checkpoints")?;
    let ids = statement
        .query_map([parent_id], |row| row.get::<_, i64>(0))
        .ctx("forking checkpoints")?
        .collect::<Result<Vec<_>, _>>()
        .ctx("forking checkpoints")?;
    for id in ids {
        cached_execute(
            tx,
            concat!(
                "INSERT INTO checkpoints (id, session_id, turn_id, created_at, finished_at,
                     message_count, event_sequence, todos_json, state, files_undone,
                     session_undone)
                 SELECT ",
                next_checkpoint_id!(),
                ", ?2, turn_id, created_at, finished_at, message_count,
                     event_sequence, todos_json, state, files_undone, session_undone
                 FROM checkpoints WHERE id = ?1"
            ),
            params![id, new_id],
        )
        .ctx("forking checkpoints")?;
        let copy = tx.last_insert_rowid();
        cached_execute(
            tx,
            "INSERT INTO checkpoint_files (checkpoint_id, path, position, pre_hash, pre_mode,
                 post_hash, post_mode, bytes_before, bytes_after, lines_added, lines_removed,
                 origin, call_id)
             SELECT ?2, path, position, pre_hash, pre_mode, post_hash, post_mode, bytes_before,
                 bytes_after, lines_added, lines_removed, origin, call_id
             FROM checkpoint_files WHERE checkpoint_id = ?1",
            params![id, copy],
        )
        .ctx("forking checkpoints")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clawsmith_protocol::{EventPayload, ModelMessage, Role, TurnStarted};

    use super::*;

    fn started(turn: &str) -> EventPayload {
        EventPayload::TurnStarted(TurnStarted {
            turn_id: turn.into(),
        })
    }

    /// A store with session `s` holding `messages` messages and `events` events.
    fn store_with(messages: usize, events: usize) -> Store {
        let store = Store::open_in_memory().unwrap();
        store.create_session("s", "/w").unwrap();
        for _ in 0..messages {
            let message = ModelMessage::text(Role::User, "hi");
            store.append_message("s", &message).unwrap();
        }
        for _ in 0..events {
            store.append_event("s", started("earlier"), 1).unwrap();
        }
        store
    }

    /// (messages, events) before the turn: the checkpoint records them, the turn's own events
    /// and message go on from them, and the next turn's checkpoint counts those too.
    #[test]
    fn a_turn_start_records_the_counts_the_records_after_it_go_on_from() {
        for (messages, events) in [(0, 0), (2, 3), (0, 5), (4, 0)] {
            for deferred in [true, false] {
                let store = store_with(messages, events);
                let turn_events = vec![started("t1"), started("t1")];
                let sequences: Vec<u64> = if deferred {
                    let handles = store.defer_turn_start("s", "t1", turn_events, 2);
                    store
                        .defer_message("s", &ModelMessage::text(Role::User, "x"))
                        .unwrap();
                    store.flush_deferred().unwrap();
                    handles
                        .iter()
                        .map(|handle| handle.stored().unwrap().sequence)
                        .collect()
                } else {
                    let stored = store
                        .begin_turn(
                            "s",
                            "t1",
                            crate::TurnOpening {
                                events: turn_events,
                                timestamp_ms: 2,
                            },
                        )
                        .unwrap()
                        .events;
                    store
                        .append_message("s", &ModelMessage::text(Role::User, "x"))
                        .unwrap();
                    stored.iter().map(|event| event.sequence).collect()
                };
                let case = format!("{messages} messages, {events} events, deferred {deferred}");
                let first = store.checkpoint("s", "t1").unwrap();
                assert_eq!(
                    (first.message_count, first.event_sequence),
                    (messages as u64, events as u64),
                    "{case}"
                );
                let after = events as u64;
                assert_eq!(sequences, [after + 1, after + 2], "{case}");
                assert_eq!(store.messages("s").unwrap().len(), messages + 1, "{case}");
                let second = store
                    .begin_turn("s", "t2", crate::TurnOpening::default())
                    .unwrap()
                    .checkpoint;
                assert_eq!(
                    (second.message_count, second.event_sequence),
                    (messages as u64 + 1, after + 2),
                    "{case}"
                );
            }
        }
    }

    /// Every way of beginning a turn refuses a turn id the session already has, and writes
    /// nothing of it; another session may use the id.
    #[test]
    fn a_turn_begun_twice_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        store.create_session("s", "/w").unwrap();
        store.create_session("other", "/w").unwrap();
        store.append_event("s", started("earlier"), 1).unwrap();
        store
            .begin_turn("s", "t1", crate::TurnOpening::default())
            .unwrap();
        assert!(matches!(
            store.begin_turn("s", "t1", crate::TurnOpening::default()),
            Err(StoreError::TurnExists { .. })
        ));
        assert!(matches!(
            store.begin_turn(
                "s",
                "t1",
                crate::TurnOpening {
                    events: vec![started("t1")],
                    timestamp_ms: 3
                }
            ),
            Err(StoreError::TurnExists { .. })
        ));
        store.defer_turn_start("s", "t1", vec![started("t1")], 3);
        assert!(matches!(
            store.flush_deferred(),
            Err(StoreError::TurnExists { .. })
        ));
        // The refused deferred start stays deferred; another connection sees none of it.
        assert!(store.has_deferred());
        let reader = Store::open(dir.path().join("db")).unwrap();
        assert_eq!(reader.events("s").unwrap().len(), 1);
        assert_eq!(reader.checkpoints("s").unwrap().len(), 1);
        reader
            .begin_turn("other", "t1", crate::TurnOpening::default())
            .unwrap();
        assert_eq!(reader.checkpoints("other").unwrap().len(), 1);
    }

    /// The manifest a finish returns is the change list it stored (line stats included), and
    /// finishing again returns it unchanged.
    #[test]
    fn a_finish_returns_the_change_list_it_stored() {
        let store = store_with(0, 0);
        store
            .begin_turn("s", "t1", crate::TurnOpening::default())
            .unwrap();
        // (path, content before the call, after it)
        type File<'a> = (&'a str, Option<&'a [u8]>, Option<&'a [u8]>);
        let files: [File<'_>; 4] = [
            ("kept.txt", Some(b"one\ntwo\n"), Some(b"one\nTWO\nthree\n")),
            ("new.txt", None, Some(b"fresh\n")),
            ("gone.txt", Some(b"old\n"), None),
            ("moved-on.txt", Some(b"a\n"), Some(b"b\n")),
        ];
        for (path, before, after) in files {
            store
                .record_before("s", "t1", path, before.map(|content| (content, 0o644)))
                .unwrap();
            let post = after.map(|content| {
                (
                    crate::blob::sha256(content),
                    content.len() as u64,
                    0o644_u32,
                )
            });
            store.record_after("s", "t1", path, post).unwrap();
        }
        // The file on disk changed again after the call: its post state is not known there.
        let now = |path: &str| -> Option<Vec<u8>> {
            let (_, _, after) = files.iter().find(|(name, _, _)| *name == path)?;
            match path {
                "moved-on.txt" => Some(b"c\n".to_vec()),
                _ => after.map(<[u8]>::to_vec),
            }
        };
        let manifest = store.finish_turn_with("s", "t1", &now).unwrap();
        assert_eq!(manifest.files, store.change_list("s", "t1").unwrap());
        let stats: Vec<_> = manifest
            .files
            .iter()
            .map(|file| (file.path.as_str(), file.lines_added, file.lines_removed))
            .collect();
        assert_eq!(
            stats,
            [
                ("kept.txt", Some(2), Some(1)),
                ("new.txt", Some(1), Some(0)),
                ("gone.txt", Some(0), Some(1)),
                ("moved-on.txt", None, None),
            ]
        );
        assert_eq!(store.finish_turn_with("s", "t1", &now).unwrap(), manifest);
        assert_eq!(
            store.checkpoint("s", "t1").unwrap().state,
            CheckpointState::Finished
        );
        assert!(matches!(
            store.finish_turn_with("s", "nope", &now),
            Err(StoreError::UnknownTurn { .. })
        ));
    }
}
