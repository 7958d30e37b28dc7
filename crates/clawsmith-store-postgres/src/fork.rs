//! Forking a session (K6): a new session with a copy of the parent's history, todos and
//! checkpoints and artifacts as they stand at one moment, in one transaction.

use clawsmith_store::{SessionInfo, StoreError};

use crate::{PgStore, Take, now_ms, pg, session_info};

impl PgStore {
    pub(crate) fn fork_session_in(
        &self,
        parent_id: &str,
        new_id: &str,
    ) -> Result<SessionInfo, StoreError> {
        let (parent, id) = (parent_id.to_owned(), new_id.to_owned());
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        // Fenced as a write of the new session: nobody can hold a lease on it before it exists,
        // and its rows carry the epoch every row does.
        self.write(
            "forking a session",
            new_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    // The parent's counters, its row shared-locked until the commit: an append
                    // to the parent updates that row, so it waits, and the copy is of one moment.
                    let counters = tx
                        .query_opt(
                            "SELECT next_index, next_sequence, workspace_root
                             FROM clawsmith_sessions WHERE id = $1 FOR SHARE",
                            &[&parent],
                        )
                        .await
                        .map_err(pg("forking a session"))?
                        .ok_or_else(|| StoreError::UnknownSession(parent.clone()))?;
                    let (next_index, next_sequence, root): (i64, i64, String) =
                        (counters.get(0), counters.get(1), counters.get(2));
                    let made = tx
                        .query_opt(
                            "INSERT INTO clawsmith_sessions
                               (id, parent_id, created_at_ms, workspace_root, next_index,
                                next_sequence)
                             VALUES ($1, $2, $3, $4, $5, $6)
                             ON CONFLICT (id) DO NOTHING
                             RETURNING id, parent_id, created_at_ms, workspace_root",
                            &[&id, &parent, &now, &root, &next_index, &next_sequence],
                        )
                        .await
                        .map_err(pg("forking a session"))?
                        .ok_or_else(|| StoreError::SessionExists(id.clone()))?;
                    tx.execute(
                        "INSERT INTO clawsmith_messages (session_id, idx, epoch, message_json)
                         SELECT $2, idx, $3, message_json FROM clawsmith_messages
                         WHERE session_id = $1 AND idx < $4",
                        &[&parent, &id, &epoch, &next_index],
                    )
                    .await
                    .map_err(pg("forking messages"))?;
                    // Each event names its session: the copy names the fork.
                    tx.execute(
                        "INSERT INTO clawsmith_events
                           (session_id, sequence, epoch, timestamp_ms, type, event_json)
                         SELECT $2, sequence, $3, timestamp_ms, type,
                                jsonb_set(event_json::jsonb, '{sessionId}', to_jsonb($2::text))::text
                         FROM clawsmith_events WHERE session_id = $1 AND sequence < $4",
                        &[&parent, &id, &epoch, &next_sequence],
                    )
                    .await
                    .map_err(pg("forking events"))?;
                    tx.execute(
                        "INSERT INTO clawsmith_todos (session_id, todos_json, epoch)
                         SELECT $2, todos_json, $3 FROM clawsmith_todos WHERE session_id = $1",
                        &[&parent, &id, &epoch],
                    )
                    .await
                    .map_err(pg("forking todos"))?;
                    tx.execute(
                        "INSERT INTO clawsmith_checkpoints
                           (session_id, turn_id, created_at_ms, finished_at_ms, message_count,
                            event_sequence, todos_json, state, files_undone, session_undone, epoch)
                         SELECT $2, turn_id, created_at_ms, finished_at_ms, message_count,
                                event_sequence, todos_json, state, files_undone, session_undone, $3
                         FROM clawsmith_checkpoints WHERE session_id = $1 ORDER BY id",
                        &[&parent, &id, &epoch],
                    )
                    .await
                    .map_err(pg("forking checkpoints"))?;
                    // File contents stay shared: the copies name the same blobs.
                    tx.execute(
                        "INSERT INTO clawsmith_checkpoint_files
                           (checkpoint_id, path, position, pre_hash, pre_mode, post_hash,
                            post_mode, bytes_before, bytes_after, lines_added, lines_removed,
                            origin, call_id, epoch)
                         SELECT copy.id, f.path, f.position, f.pre_hash, f.pre_mode, f.post_hash,
                                f.post_mode, f.bytes_before, f.bytes_after, f.lines_added,
                                f.lines_removed, f.origin, f.call_id, $3
                         FROM clawsmith_checkpoint_files f
                         JOIN clawsmith_checkpoints original ON original.id = f.checkpoint_id
                         JOIN clawsmith_checkpoints copy
                           ON copy.session_id = $2 AND copy.turn_id = original.turn_id
                         WHERE original.session_id = $1",
                        &[&parent, &id, &epoch],
                    )
                    .await
                    .map_err(pg("forking checkpoint files"))?;
                    tx.execute(
                        "INSERT INTO clawsmith_artifacts
                           (session_id, artifact_id, blob_hash, size, lines, created_at_ms, epoch)
                         SELECT $2, artifact_id, blob_hash, size, lines, created_at_ms, $3
                         FROM clawsmith_artifacts WHERE session_id = $1",
                        &[&parent, &id, &epoch],
                    )
                    .await
                    .map_err(pg("forking artifacts"))?;
                    Ok(session_info(&made))
                })
            },
        )
    }
}
