//! Turns and their checkpoints, todos and pending approvals: the rows the SQLite store keeps in
//! `checkpoints`, `checkpoint_files`, `session_todos` and `pending_approvals`, with the same
//! rules (`clawsmith_store::contract` checks both).
//!
//! Every write goes through [`PgStore::write`], so it is fenced by the session's lease like an
//! append. A file's state before a change names its blob (a foreign key, the blob's row taken
//! and touched in the same transaction, as an artifact does); its state after is a hash whose
//! bytes are kept only when the turn finishes and the file still holds them, so that name has no
//! foreign key, and the blobs' collection checks both names before it takes a blob.

use clawsmith_protocol::{Event, EventPayload};
use clawsmith_store::{
    ChangeKind, CheckpointInfo, CheckpointState, FileChange, FileDiff, OpenedTurn, PendingApproval,
    StoreError, Todo, TurnManifest, TurnOpening, TurnStore,
};
use futures_util::TryFutureExt;
use sha2::{Digest, Sha256};

use crate::{
    Param, PgStore, Take, blobs, connect, insert_event, json_error, now_ms, pg, prepared,
    send_events,
};

/// A changed file as a turn's finish writes it: its path, the post hash its counts were made
/// for, and its line counts (added, removed) when they could be made.
type FinishedFile = (String, Option<String>, Option<(u64, u64)>);

/// One `clawsmith_checkpoint_files` row.
struct FileRow {
    path: String,
    pre_hash: Option<String>,
    post_hash: Option<String>,
    bytes_before: i64,
    bytes_after: i64,
    lines_added: Option<i64>,
    lines_removed: Option<i64>,
    origin: Option<String>,
    call_id: Option<String>,
}

impl FileRow {
    fn change(&self) -> FileChange {
        FileChange {
            path: self.path.clone(),
            kind: ChangeKind::between(self.pre_hash.is_some(), self.post_hash.is_some()),
            bytes_before: unsigned(self.bytes_before),
            bytes_after: unsigned(self.bytes_after),
            lines_added: self.lines_added.map(unsigned),
            lines_removed: self.lines_removed.map(unsigned),
            origin: self.origin.clone(),
            call_id: self.call_id.clone(),
        }
    }
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

const FILE_COLUMNS: &str = "path, pre_hash, post_hash, bytes_before, bytes_after, lines_added, \
                            lines_removed, origin, call_id";

fn file_row(row: &tokio_postgres::Row) -> FileRow {
    FileRow {
        path: row.get(0),
        pre_hash: row.get(1),
        post_hash: row.get(2),
        bytes_before: row.get(3),
        bytes_after: row.get(4),
        lines_added: row.get(5),
        lines_removed: row.get(6),
        origin: row.get(7),
        call_id: row.get(8),
    }
}

async fn file_rows(
    client: &impl deadpool_postgres::GenericClient,
    checkpoint_id: i64,
) -> Result<Vec<FileRow>, StoreError> {
    // Prepared once per connection: a turn's finish reads these twice.
    let statement = client
        .prepare_cached(&format!(
            "SELECT {FILE_COLUMNS} FROM clawsmith_checkpoint_files
             WHERE checkpoint_id = $1 ORDER BY position"
        ))
        .await
        .map_err(pg("reading checkpoint files"))?;
    let rows = client
        .query(&statement, &[&checkpoint_id])
        .await
        .map_err(pg("reading checkpoint files"))?;
    Ok(rows.iter().map(file_row).collect())
}

pub(crate) fn unknown_turn(session_id: &str, turn_id: &str) -> StoreError {
    StoreError::UnknownTurn {
        session_id: session_id.to_owned(),
        turn_id: turn_id.to_owned(),
    }
}

/// The checkpoint's id and state, its row locked until the commit (so one turn's records
/// number their files one at a time); `None` when the turn has none.
pub(crate) async fn locked_checkpoint(
    tx: &crate::Tx,
    session_id: &str,
    turn_id: &str,
) -> Result<Option<(i64, String)>, StoreError> {
    let statement = prepared(
        tx,
        "SELECT id, state FROM clawsmith_checkpoints
         WHERE session_id = $1 AND turn_id = $2 FOR UPDATE",
        "looking up a checkpoint",
    )
    .await?;
    let row = tx
        .query_opt(&statement, &[&session_id, &turn_id])
        .await
        .map_err(pg("looking up a checkpoint"))?;
    Ok(row.map(|row| (row.get(0), row.get(1))))
}

/// The checkpoint's id when it is open; [`StoreError::TurnClosed`] when it is not.
pub(crate) fn require_open(
    session_id: &str,
    turn_id: &str,
    found: (i64, String),
) -> Result<i64, StoreError> {
    match found {
        (id, state) if state == "open" => Ok(id),
        (_, state) => Err(StoreError::TurnClosed {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            state,
        }),
    }
}

/// Inserts the turn's open checkpoint: where the session stands (`numbers`: its next message
/// index and first sequence after the checkpoint) and its todo list. `None` when the turn has
/// one already.
pub(crate) async fn insert_checkpoint(
    tx: &crate::Tx,
    session_id: &str,
    turn_id: &str,
    epoch: i64,
    (message_count, event_sequence): (i64, i64),
) -> Result<Option<(i64, String, i64)>, StoreError> {
    let now = signed(now_ms());
    let statement = prepared(
        tx,
        "INSERT INTO clawsmith_checkpoints
           (session_id, turn_id, created_at_ms, message_count, event_sequence, todos_json,
            state, epoch)
         VALUES ($1, $2, $3, $4, $5,
           COALESCE((SELECT todos_json FROM clawsmith_todos WHERE session_id = $1), '[]'),
           'open', $6)
         ON CONFLICT (session_id, turn_id) DO NOTHING
         RETURNING id, todos_json, created_at_ms",
        "beginning a turn",
    )
    .await?;
    let row = tx
        .query_opt(
            &statement,
            &[
                &session_id,
                &turn_id,
                &now,
                &message_count,
                &event_sequence,
                &epoch,
            ],
        )
        .await
        .map_err(pg("beginning a turn"))?;
    Ok(row.map(|row| (row.get(0), row.get(1), row.get(2))))
}

/// The session's next message index and last event sequence, its row locked as an append
/// locks it ([`StoreError::UnknownSession`] when there is none).
async fn standing(tx: &crate::Tx, session_id: &str) -> Result<(i64, i64), StoreError> {
    let (index, next) = crate::take_numbers(tx, session_id, 0, 0).await?;
    Ok((index, next - 1))
}

impl TurnStore for PgStore {
    fn begin_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        opening: TurnOpening,
    ) -> Result<OpenedTurn, StoreError> {
        let TurnOpening {
            events,
            timestamp_ms,
        } = opening;
        let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.write(
            "beginning a turn",
            session_id,
            Take::of(0, count),
            move |tx, epoch, numbers| {
                Box::pin(async move {
                    let (message_count, first) = if count == 0 {
                        let (index, last) = standing(tx, &session).await?;
                        (index, last + 1)
                    } else {
                        numbers
                    };
                    let Some((_, todos, created_at)) =
                        insert_checkpoint(tx, &session, &turn, epoch, (message_count, first - 1))
                            .await?
                    else {
                        return Err(StoreError::TurnExists {
                            session_id: session,
                            turn_id: turn,
                        });
                    };
                    let mut opened = Vec::with_capacity(events.len());
                    for (offset, payload) in (0_i64..).zip(events) {
                        let event = Event {
                            session_id: session.clone(),
                            sequence: unsigned(first + offset),
                            timestamp_ms,
                            payload,
                        };
                        insert_event(tx, &event, epoch).await?;
                        opened.push(event);
                    }
                    Ok(OpenedTurn {
                        checkpoint: CheckpointInfo {
                            session_id: session,
                            turn_id: turn,
                            created_at_ms: unsigned(created_at),
                            finished_at_ms: None,
                            message_count: unsigned(message_count),
                            event_sequence: unsigned(first - 1),
                            todos: serde_json::from_str(&todos)
                                .map_err(json_error("reading a todo snapshot"))?,
                            state: CheckpointState::Open,
                            files_undone: false,
                            session_undone: false,
                            file_count: 0,
                        },
                        events: opened,
                    })
                })
            },
        )
    }

    fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError> {
        let (session, turn, path) = (session_id.to_owned(), turn_id.to_owned(), path.to_owned());
        let prior = prior.map(|(content, mode)| (content.to_vec(), mode));
        let objects = self.inner.options.objects.clone();
        self.write(
            "recording a prior state",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    let id = match locked_checkpoint(tx, &session, &turn).await? {
                        Some(found) => require_open(&session, &turn, found)?,
                        None => {
                            // An unknown turn is begun, so its files are saved all the same.
                            let standing = standing(tx, &session).await?;
                            insert_checkpoint(tx, &session, &turn, epoch, standing).await?;
                            let found = locked_checkpoint(tx, &session, &turn)
                                .await?
                                .ok_or_else(|| unknown_turn(&session, &turn))?;
                            require_open(&session, &turn, found)?
                        }
                    };
                    let exists = tx
                        .query_opt(
                            "SELECT 1 FROM clawsmith_checkpoint_files
                             WHERE checkpoint_id = $1 AND path = $2",
                            &[&id, &path],
                        )
                        .await
                        .map_err(pg("recording a prior state"))?;
                    if exists.is_some() {
                        return Ok(());
                    }
                    let (hash, mode, size) = match prior {
                        Some((content, mode)) => {
                            let size = signed(content.len() as u64);
                            let hash = blobs::put_in(tx, objects.as_deref(), content).await?;
                            (Some(hash), Some(i64::from(mode)), size)
                        }
                        None => (None, None, 0),
                    };
                    // Until an after-change arrives the post state is the prior state: a change
                    // that never happened restores to itself.
                    let statement = prepared(
                        tx,
                        "INSERT INTO clawsmith_checkpoint_files
                           (checkpoint_id, path, position, pre_hash, pre_mode, post_hash,
                            post_mode, bytes_before, bytes_after, epoch)
                         VALUES ($1, $2,
                           (SELECT count(*) FROM clawsmith_checkpoint_files WHERE checkpoint_id = $1),
                           $3, $4, $3, $4, $5, $5, $6)",
                        "recording a prior state",
                    )
                    .await?;
                    tx.execute(&statement, &[&id, &path, &hash, &mode, &size, &epoch])
                        .await
                        .map_err(pg("recording a prior state"))?;
                    Ok(())
                })
            },
        )
    }

    fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError> {
        let (session, turn, path) = (session_id.to_owned(), turn_id.to_owned(), path.to_owned());
        self.write(
            "recording a post state",
            session_id,
            Take::default(),
            move |tx, _, _| {
                Box::pin(async move {
                    let found = locked_checkpoint(tx, &session, &turn)
                        .await?
                        .ok_or_else(|| unknown_turn(&session, &turn))?;
                    let id = require_open(&session, &turn, found)?;
                    let (hash, mode, size) = match post {
                        Some((hash, size, mode)) => {
                            (Some(hex::encode(hash)), Some(i64::from(mode)), signed(size))
                        }
                        None => (None, None, 0),
                    };
                    let statement = prepared(
                        tx,
                        "UPDATE clawsmith_checkpoint_files
                         SET post_hash = $3, post_mode = $4, bytes_after = $5,
                             lines_added = NULL, lines_removed = NULL
                         WHERE checkpoint_id = $1 AND path = $2",
                        "recording a post state",
                    )
                    .await?;
                    let changed = tx
                        .execute(&statement, &[&id, &path, &hash, &mode, &size])
                        .await
                        .map_err(pg("recording a post state"))?;
                    if changed == 0 {
                        return Err(StoreError::Workspace {
                            path,
                            message: "a change was reported without its prior state".to_owned(),
                        });
                    }
                    Ok(())
                })
            },
        )
    }

    fn finish_turn_reading(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        completed: EventPayload,
        timestamp_ms: u64,
    ) -> Result<(TurnManifest, Event), StoreError> {
        let (manifest, event) = self.finish_turn_in(
            session_id,
            turn_id,
            post_content,
            Some((completed, timestamp_ms)),
        )?;
        let event = event.ok_or_else(|| StoreError::Backend {
            context: "finishing a turn",
            message: "the turn's event was not appended".to_owned(),
        })?;
        Ok((manifest, event))
    }

    fn finish_turn_without_event(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<TurnManifest, StoreError> {
        self.finish_turn_in(session_id, turn_id, post_content, None)
            .map(|(manifest, _)| manifest)
    }

    fn checkpoints(&self, session_id: &str) -> Result<Vec<CheckpointInfo>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "listing checkpoints").await?;
            crate::require_session(&**client, &session).await?;
            let rows = client
                .query(
                    "SELECT turn_id, created_at_ms, finished_at_ms, message_count, event_sequence,
                            todos_json, state, files_undone, session_undone,
                            (SELECT count(*) FROM clawsmith_checkpoint_files f
                             WHERE f.checkpoint_id = c.id)
                     FROM clawsmith_checkpoints c WHERE session_id = $1 ORDER BY id",
                    &[&session],
                )
                .await
                .map_err(pg("listing checkpoints"))?;
            rows.iter()
                .map(|row| {
                    Ok(CheckpointInfo {
                        session_id: session.clone(),
                        turn_id: row.get(0),
                        created_at_ms: unsigned(row.get(1)),
                        finished_at_ms: row.get::<_, Option<i64>>(2).map(unsigned),
                        message_count: unsigned(row.get(3)),
                        event_sequence: unsigned(row.get(4)),
                        todos: serde_json::from_str(row.get::<_, &str>(5))
                            .map_err(json_error("reading a todo snapshot"))?,
                        state: match row.get::<_, &str>(6) {
                            "open" => CheckpointState::Open,
                            "finished" => CheckpointState::Finished,
                            _ => CheckpointState::Undone,
                        },
                        files_undone: row.get(7),
                        session_undone: row.get(8),
                        file_count: unsigned(row.get(9)),
                    })
                })
                .collect()
        })
    }

    fn change_list(&self, session_id: &str, turn_id: &str) -> Result<Vec<FileChange>, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading a change list").await?;
            let id: i64 = client
                .query_opt(
                    "SELECT id FROM clawsmith_checkpoints WHERE session_id = $1 AND turn_id = $2",
                    &[&session, &turn],
                )
                .await
                .map_err(pg("reading a change list"))?
                .ok_or_else(|| unknown_turn(&session, &turn))?
                .get(0);
            Ok(file_rows(&client, id)
                .await?
                .iter()
                .map(FileRow::change)
                .collect())
        })
    }

    fn diff(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
    ) -> Result<Option<FileDiff>, StoreError> {
        let (pool, objects) = (self.inner.pool.clone(), self.inner.options.objects.clone());
        let (session, turn, path) = (session_id.to_owned(), turn_id.to_owned(), path.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading a diff").await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {FILE_COLUMNS} FROM clawsmith_checkpoint_files
                         WHERE checkpoint_id = (SELECT id FROM clawsmith_checkpoints
                                                WHERE session_id = $1 AND turn_id = $2)
                           AND path = $3"
                    ),
                    &[&session, &turn, &path],
                )
                .await
                .map_err(pg("reading a diff"))?;
            let Some(row) = row.as_ref().map(file_row) else {
                // No such path in the turn, or no such turn: which one the caller is told.
                let known = client
                    .query_opt(
                        "SELECT 1 FROM clawsmith_checkpoints
                         WHERE session_id = $1 AND turn_id = $2",
                        &[&session, &turn],
                    )
                    .await
                    .map_err(pg("reading a diff"))?;
                return match known {
                    Some(_) => Ok(None),
                    None => Err(unknown_turn(&session, &turn)),
                };
            };
            // A side that existed is its stored bytes, or `Some(None)` when they are not
            // stored (a post state that changed before the turn finished).
            let side =
                async |hash: &Option<String>| -> Result<Option<Option<Vec<u8>>>, StoreError> {
                    let Some(hash) = hash else { return Ok(None) };
                    match blob_bytes(&pool, objects.as_deref(), hash).await {
                        Ok(bytes) => Ok(Some(Some(bytes))),
                        Err(StoreError::MissingBlob(_)) => Ok(Some(None)),
                        Err(other) => Err(other),
                    }
                };
            let before = side(&row.pre_hash).await?;
            let after = side(&row.post_hash).await?;
            Ok(Some(clawsmith_checkpoint::file_diff(
                row.change(),
                before,
                after,
            )))
        })
    }
}

impl PgStore {
    /// Finishes a turn in two steps: the file rows are read first and each file handled on the
    /// caller's thread (see below); then one transaction writes the line counts, closes the
    /// checkpoint (if it is still open) and appends `completed` when given. A line count is
    /// written only where the row still names the hash it was computed for.
    fn finish_turn_in(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        completed: Option<(EventPayload, u64)>,
    ) -> Result<(TurnManifest, Option<Event>), StoreError> {
        if let Some(finished) = self.finish_deferred_turn(session_id, turn_id, &completed)? {
            return Ok(finished);
        }
        let pool = self.inner.pool.clone();
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        // A turn whose start still waits in this store has recorded no file (recording one is
        // a write, which would have written its start): the finishing transaction writes the
        // start first. Otherwise the file rows are read without writing the waiting records
        // (none of them changes a file row): the finishing transaction writes them, so a turn
        // of reads is one transaction.
        let (state, rows) = if self.defers_turn(session_id, turn_id) {
            ("open".to_owned(), Vec::new())
        } else {
            self.read_turn_files(&pool, session, turn)?
        };
        let mut finished = Vec::new();
        self.finish_turn_files(&state, &rows, post_content, &mut finished)?;
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.write(
            "finishing a turn",
            session_id,
            Take::of(0, i64::from(completed.is_some())),
            move |tx, epoch, (_, sequence)| {
                Box::pin(async move {
                    let context = "finishing a turn";
                    // The checkpoint closed (when open) and locked in one statement, which
                    // answers the state it had.
                    let close = prepared(
                        tx,
                        "UPDATE clawsmith_checkpoints c
                         SET state = CASE WHEN old.state = 'open' THEN 'finished'
                                          ELSE old.state END,
                             finished_at_ms = CASE WHEN old.state = 'open' THEN $3
                                                   ELSE old.finished_at_ms END
                         FROM (SELECT id, state, finished_at_ms FROM clawsmith_checkpoints
                               WHERE session_id = $1 AND turn_id = $2 FOR UPDATE) old
                         WHERE c.id = old.id
                         RETURNING c.id, old.state",
                        context,
                    )
                    .await?;
                    let row = tx
                        .query_opt(&close, &[&session, &turn, &signed(now_ms())])
                        .await
                        .map_err(pg(context))?
                        .ok_or_else(|| unknown_turn(&session, &turn))?;
                    let (id, state): (i64, String) = (row.get(0), row.get(1));
                    // Then, sent together and run in order: the line counts (of a turn that was
                    // open), the file rows (which read them) and `turn.completed`.
                    // The line counts of the turn's files (when it was open), in one statement;
                    // a count is written only where the row still names the hash it was
                    // computed for.
                    let lines = prepared(
                        tx,
                        "UPDATE clawsmith_checkpoint_files f
                         SET lines_added = c.added, lines_removed = c.removed
                         FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[])
                           AS c (path, expected, added, removed)
                         WHERE f.checkpoint_id = $1 AND f.path = c.path
                           AND f.post_hash IS NOT DISTINCT FROM c.expected",
                        context,
                    )
                    .await?;
                    let listed = prepared(
                        tx,
                        &format!(
                            "SELECT {FILE_COLUMNS} FROM clawsmith_checkpoint_files
                             WHERE checkpoint_id = $1 ORDER BY position"
                        ),
                        context,
                    )
                    .await?;
                    let events = crate::events_statement(tx).await?;
                    let (mut paths, mut expected, mut added, mut removed) =
                        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                    if state == "open" {
                        for (path, hash, stats) in finished {
                            if let Some((plus, minus)) = stats {
                                paths.push(path);
                                expected.push(hash);
                                added.push(signed(plus));
                                removed.push(signed(minus));
                            }
                        }
                    }
                    let counts: [Param<'_>; 5] = [&id, &paths, &expected, &added, &removed];
                    let checkpoint: [Param<'_>; 1] = [&id];
                    let event = completed.map(|(payload, timestamp_ms)| Event {
                        session_id: session.clone(),
                        sequence: unsigned(sequence),
                        timestamp_ms,
                        payload,
                    });
                    // Every statement is prepared and sends its request when first polled, so
                    // they go in the order below with COMMIT last, in one round trip; if one
                    // fails, the server refuses the rest and rolls the transaction back.
                    let (_, files, (), ()) = futures_util::try_join!(
                        async {
                            if paths.is_empty() {
                                Ok(0)
                            } else {
                                tx.execute(&lines, &counts).await.map_err(pg(context))
                            }
                        },
                        tx.query(&listed, &checkpoint).map_err(pg(context)),
                        async {
                            match &event {
                                Some(event) => send_events(tx, &events, &[event], epoch).await,
                                None => Ok(()),
                            }
                        },
                        tx.commit(),
                    )?;
                    let files: Vec<FileRow> = files.iter().map(file_row).collect();
                    Ok((
                        TurnManifest {
                            session_id: session,
                            turn_id: turn,
                            files: files.iter().map(FileRow::change).collect(),
                        },
                        event,
                    ))
                })
            },
        )
    }

    /// The checkpoint's state and its file rows, read without writing this store's waiting
    /// records.
    fn read_turn_files(
        &self,
        pool: &deadpool_postgres::Pool,
        session: String,
        turn: String,
    ) -> Result<(String, Vec<FileRow>), StoreError> {
        let pool = pool.clone();
        self.run_raw(async move {
            let client = connect(&pool, "finishing a turn").await?;
            let statement = client
                .prepare_cached(
                    "SELECT id, state FROM clawsmith_checkpoints
                     WHERE session_id = $1 AND turn_id = $2",
                )
                .await
                .map_err(pg("finishing a turn"))?;
            let found = client
                .query_opt(&statement, &[&session, &turn])
                .await
                .map_err(pg("finishing a turn"))?
                .ok_or_else(|| unknown_turn(&session, &turn))?;
            let (id, state): (i64, String) = (found.get(0), found.get(1));
            Ok((state, file_rows(&client, id).await?))
        })
    }

    /// One changed file at a time, as the SQLite store does: its prior content is read, its
    /// current content asked for and, when it still matches the post state, stored now (its row
    /// already names the hash, so the blobs' collection spares it); only the line counts wait
    /// for the finishing transaction, in `finished` as (path, expected post hash, counts).
    fn finish_turn_files(
        &self,
        state: &str,
        rows: &[FileRow],
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        finished: &mut Vec<FinishedFile>,
    ) -> Result<(), StoreError> {
        if state == "open" {
            for row in rows {
                let prior = match &row.pre_hash {
                    Some(hash) => {
                        let (pool, objects, hash) = (
                            self.inner.pool.clone(),
                            self.inner.options.objects.clone(),
                            hash.clone(),
                        );
                        Some(self.run(async move {
                            blob_bytes(&pool, objects.as_deref(), &hash).await
                        })?)
                    }
                    None => None,
                };
                let post = row.post_hash.as_ref().and_then(|hash| {
                    post_content(&row.path)
                        .filter(|content| hex::encode(Sha256::digest(content)) == *hash)
                });
                if let Some(content) = &post {
                    clawsmith_store::BlobStore::put_blobs(self, &[content.as_slice()])?;
                }
                let stats = match (&row.post_hash, &post) {
                    (Some(_), None) => None,
                    _ => clawsmith_checkpoint::line_stats(
                        prior.as_deref().unwrap_or(&[]),
                        post.as_deref().unwrap_or(&[]),
                    ),
                };
                finished.push((row.path.clone(), row.post_hash.clone(), stats));
            }
        }
        Ok(())
    }
}

impl PgStore {
    pub(crate) fn set_todos_in(
        &self,
        session_id: &str,
        todos: Vec<Todo>,
    ) -> Result<(), StoreError> {
        clawsmith_checkpoint::validate_todos(&todos)?;
        let json = serde_json::to_string(&todos).map_err(json_error("storing todos"))?;
        let session = session_id.to_owned();
        self.write(
            "storing todos",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    crate::require_session(&***tx, &session).await?;
                    tx.execute(
                        "INSERT INTO clawsmith_todos (session_id, todos_json, epoch)
                     VALUES ($1, $2, $3)
                     ON CONFLICT (session_id)
                     DO UPDATE SET todos_json = EXCLUDED.todos_json, epoch = EXCLUDED.epoch",
                        &[&session, &json, &epoch],
                    )
                    .await
                    .map_err(pg("storing todos"))?;
                    Ok(())
                })
            },
        )
    }

    pub(crate) fn todos_in(&self, session_id: &str) -> Result<Vec<Todo>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading todos").await?;
            crate::require_session(&**client, &session).await?;
            let row = client
                .query_opt(
                    "SELECT todos_json FROM clawsmith_todos WHERE session_id = $1",
                    &[&session],
                )
                .await
                .map_err(pg("reading todos"))?;
            match row {
                Some(row) => {
                    serde_json::from_str(row.get::<_, &str>(0)).map_err(json_error("reading todos"))
                }
                None => Ok(Vec::new()),
            }
        })
    }

    pub(crate) fn add_pending_approval_in(
        &self,
        session_id: &str,
        approval: &PendingApproval,
    ) -> Result<(), StoreError> {
        let json = clawsmith_checkpoint::stored_request_json(&approval.request)?;
        let approval = approval.clone();
        let session = session_id.to_owned();
        let now = signed(now_ms());
        self.write(
            "storing an approval",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    crate::require_session(&***tx, &session).await?;
                    // The same id again is a new request: it replaces the old one, and goes last.
                    tx.execute(
                    "DELETE FROM clawsmith_approvals WHERE session_id = $1 AND approval_id = $2",
                    &[&session, &approval.approval_id],
                )
                .await
                .map_err(pg("storing an approval"))?;
                    tx.execute(
                        "INSERT INTO clawsmith_approvals
                       (session_id, approval_id, turn_id, call_id, request_json, created_at_ms,
                        epoch)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                        &[
                            &session,
                            &approval.approval_id,
                            &approval.turn_id,
                            &approval.call_id,
                            &json,
                            &now,
                            &epoch,
                        ],
                    )
                    .await
                    .map_err(pg("storing an approval"))?;
                    Ok(())
                })
            },
        )
    }

    pub(crate) fn resolve_pending_approval_in(
        &self,
        session_id: &str,
        approval_id: &str,
    ) -> Result<bool, StoreError> {
        let (session, approval) = (session_id.to_owned(), approval_id.to_owned());
        self.write("resolving an approval", session_id, Take::default(), move |tx, _, _| {
            Box::pin(async move {
                let removed = tx
                    .execute(
                        "DELETE FROM clawsmith_approvals WHERE session_id = $1 AND approval_id = $2",
                        &[&session, &approval],
                    )
                    .await
                    .map_err(pg("resolving an approval"))?;
                Ok(removed > 0)
            })
        })
    }

    pub(crate) fn pending_approvals_in(
        &self,
        session_id: &str,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading approvals").await?;
            crate::require_session(&**client, &session).await?;
            let rows = client
                .query(
                    "SELECT approval_id, turn_id, call_id, request_json FROM clawsmith_approvals
                     WHERE session_id = $1 ORDER BY position",
                    &[&session],
                )
                .await
                .map_err(pg("reading approvals"))?;
            rows.iter()
                .map(|row| {
                    Ok(PendingApproval {
                        approval_id: row.get(0),
                        turn_id: row.get(1),
                        call_id: row.get(2),
                        request: serde_json::from_str(row.get::<_, &str>(3))
                            .map_err(json_error("reading approvals"))?,
                    })
                })
                .collect()
        })
    }

    pub(crate) fn last_event_of_kind_in(
        &self,
        session_id: &str,
        kind: &str,
    ) -> Result<Option<Event>, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, kind) = (session_id.to_owned(), kind.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading the last event of a kind").await?;
            let row = client
                .query_opt(
                    "SELECT event_json FROM clawsmith_events
                     WHERE session_id = $1 AND type = $2 ORDER BY sequence DESC LIMIT 1",
                    &[&session, &kind],
                )
                .await
                .map_err(pg("reading the last event of a kind"))?;
            row.map(|row| {
                serde_json::from_str(row.get::<_, &str>(0))
                    .map_err(json_error("reading the last event of a kind"))
            })
            .transpose()
        })
    }

    pub(crate) fn has_unfinished_work_in(&self, session_id: &str) -> Result<bool, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "looking for unfinished work").await?;
            let row = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM clawsmith_checkpoints
                                    WHERE session_id = $1 AND state = 'open')
                         OR EXISTS (SELECT 1 FROM clawsmith_journal
                                    WHERE session_id = $1 AND closed_at_ms IS NULL)
                         OR EXISTS (SELECT 1 FROM clawsmith_approvals WHERE session_id = $1)
                         OR EXISTS (SELECT 1 FROM clawsmith_restore_plans WHERE session_id = $1)",
                    &[&session],
                )
                .await
                .map_err(pg("looking for unfinished work"))?;
            Ok(row.get(0))
        })
    }
}

/// The bytes of the blob named `hash` (hex), checked; [`StoreError::MissingBlob`] when it is
/// gone.
pub(crate) async fn blob_bytes(
    pool: &deadpool_postgres::Pool,
    objects: Option<&dyn object_store::ObjectStore>,
    hash: &str,
) -> Result<Vec<u8>, StoreError> {
    let mut name = [0_u8; 32];
    hex::decode_to_slice(hash, &mut name).map_err(|_| StoreError::MissingBlob(hash.to_owned()))?;
    blobs::get(pool, objects, name)
        .await?
        .ok_or_else(|| StoreError::MissingBlob(hash.to_owned()))
}
