//! Undo on PostgreSQL: the same selection, precheck, plan, restore and roll-forward as the
//! SQLite store (`clawsmith_checkpoint::restore`), with the plan and the rewind as rows here.
//!
//! 1. **Read** the checkpoints from the target on, their files and the directories their
//!    commands made (one read), and run the precheck against the workspace. The caller holds the
//!    session's lease, so no other writer of this session moves underneath; a file changed by
//!    someone outside clawsmith is what the precheck is for.
//! 2. **Fetch** every content the restore will write, checked against its name, before anything
//!    is committed: a missing or damaged blob refuses the undo with nothing changed.
//! 3. **Intent**: one fenced transaction locks the checkpoints' rows, checks that no plan is
//!    pending and the checkpoints are as read, and inserts the plan row
//!    (`clawsmith_restore_plans`). The row locks serialize two undos of one session even without
//!    the lease: the second waits, then sees the first's plan (refused, `RestoreInProgress`) or
//!    its flags (it decides again, and finds the turn already undone).
//! 4. **Restore** each file atomically through the workspace handle.
//! 5. **Commit** in one fenced transaction: the plan row deleted, the rewound messages and events
//!    kept in `clawsmith_undone_history` and deleted, the session's counters set back (the next
//!    append numbers from where the checkpoint stood, as on SQLite), approvals cleared, todos put
//!    back, checkpoints flagged undone.
//!
//! A writer killed between 3 and 5 leaves the plan row; the next holder of the session's lease
//! rolls it forward ([`clawsmith_store::UndoStore::recover_session_restores`]) in the same
//! workspace root. What the turns' commands did to the workspace's git repository is put back
//! after the files (`repository.rs`), when this store keeps repositories.

use std::collections::HashMap;

use clawsmith_checkpoint::restore::{
    self, Precheck, RecordedFile, RestorePlan, Selection, SessionTarget, UndoTurn,
};
use clawsmith_fs::Workspace;
use clawsmith_store::{
    RecoveredRestore, StoreError, UndoOutcome, UndoPreview, UndoReport, UndoScope, UndoStore,
    UndoneStretch,
};

use crate::{Param, PgStore, Take, connect, json_error, now_ms, pg, turns::blob_bytes};

/// How many times an undo decides again when another undo of the session changed its turns
/// between its read and its plan.
const UNDO_ATTEMPTS: usize = 5;

/// What an undo reads before it decides: the checkpoints from the target on (oldest first),
/// the target's session state, each checkpoint's recorded files, and the directories the turns'
/// commands made.
struct Loaded {
    turns: Vec<UndoTurn>,
    target: SessionTarget,
    files: HashMap<i64, Vec<RecordedFile>>,
    made: HashMap<String, Vec<String>>,
}

impl Loaded {
    /// The precheck's input: the selected turns (newest first) with their files.
    fn recorded(&self, selected: &[usize]) -> Vec<(String, Vec<RecordedFile>)> {
        selected
            .iter()
            .map(|&index| {
                let turn = &self.turns[index];
                (
                    turn.turn_id.clone(),
                    self.files.get(&turn.id).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The directories the selected turns' commands made.
    fn made(&self, selected: &[usize]) -> Vec<String> {
        selected
            .iter()
            .flat_map(|&index| {
                self.made
                    .get(&self.turns[index].turn_id)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn mode(value: Option<i64>) -> Option<u32> {
    value.and_then(|mode| u32::try_from(mode).ok())
}

/// [`StoreError::RestoreInProgress`] when the session has a plan pending.
async fn no_pending_plan(
    client: &impl tokio_postgres::GenericClient,
    session_id: &str,
) -> Result<(), StoreError> {
    let pending = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM clawsmith_restore_plans WHERE session_id = $1)",
            &[&session_id],
        )
        .await
        .map_err(pg("planning an undo"))?;
    if pending.get::<_, bool>(0) {
        return Err(StoreError::RestoreInProgress(session_id.to_owned()));
    }
    Ok(())
}

impl PgStore {
    /// Reads what an undo of `turn_id` decides on. With `refuse_pending`, a pending plan of
    /// the session refuses first ([`StoreError::RestoreInProgress`]), as the undo itself does.
    fn load_undo(
        &self,
        session_id: &str,
        turn_id: &str,
        refuse_pending: bool,
    ) -> Result<Loaded, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.run(async move {
            let context = "planning an undo";
            let client = connect(&pool, context).await?;
            crate::require_session(&**client, &session).await?;
            if refuse_pending {
                no_pending_plan(&**client, &session).await?;
            }
            let rows = client
                .query(
                    "SELECT id, turn_id, created_at_ms, files_undone, session_undone,
                            message_count, event_sequence, todos_json
                     FROM clawsmith_checkpoints
                     WHERE session_id = $1 AND id >= (SELECT id FROM clawsmith_checkpoints
                                                      WHERE session_id = $1 AND turn_id = $2)
                     ORDER BY id",
                    &[&session, &turn],
                )
                .await
                .map_err(pg(context))?;
            let Some(first) = rows.first() else {
                return Err(crate::turns::unknown_turn(&session, &turn));
            };
            let target = SessionTarget {
                message_count: unsigned(first.get(5)),
                event_sequence: unsigned(first.get(6)),
                todos_json: first.get(7),
            };
            let turns: Vec<UndoTurn> = rows
                .iter()
                .map(|row| UndoTurn {
                    id: row.get(0),
                    turn_id: row.get(1),
                    created_at_ms: unsigned(row.get(2)),
                    files_undone: row.get(3),
                    session_undone: row.get(4),
                })
                .collect();
            let ids: Vec<i64> = turns.iter().map(|turn| turn.id).collect();
            let names: Vec<String> = turns.iter().map(|turn| turn.turn_id.clone()).collect();
            let (by_id, by_name): ([Param<'_>; 1], [Param<'_>; 2]) = ([&ids], [&session, &names]);
            let (file_rows, made_rows) = futures_util::try_join!(
                client.query(
                    "SELECT checkpoint_id, path, pre_hash, pre_mode, post_hash, post_mode
                     FROM clawsmith_checkpoint_files
                     WHERE checkpoint_id = ANY($1) ORDER BY checkpoint_id, position",
                    &by_id,
                ),
                client.query(
                    "SELECT turn_id, path FROM clawsmith_created_directories
                     WHERE session_id = $1 AND turn_id = ANY($2)",
                    &by_name,
                ),
            )
            .map_err(pg(context))?;
            let mut files: HashMap<i64, Vec<RecordedFile>> = HashMap::new();
            for row in &file_rows {
                files.entry(row.get(0)).or_default().push(RecordedFile {
                    path: row.get(1),
                    pre_hash: row.get(2),
                    pre_mode: mode(row.get(3)),
                    post_hash: row.get(4),
                    post_mode: mode(row.get(5)),
                });
            }
            let mut made: HashMap<String, Vec<String>> = HashMap::new();
            for row in &made_rows {
                made.entry(row.get(0)).or_default().push(row.get(1));
            }
            Ok(Loaded {
                turns,
                target,
                files,
                made,
            })
        })
    }

    /// The bytes of the blob named `hash`, checked against it.
    fn blob(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        let (pool, objects, hash) = (
            self.inner.pool.clone(),
            self.inner.options.objects.clone(),
            hash.to_owned(),
        );
        self.run(async move { blob_bytes(&pool, objects.as_deref(), &hash).await })
    }

    /// Commits the plan row of an undo whose precheck passed, after checking (under the
    /// session's fence) that no other plan is pending and the checkpoints are as `turns` read
    /// them; the plan's id, or `None` when they changed since (nothing is written).
    fn insert_plan(
        &self,
        plan: &RestorePlan,
        turns: &[UndoTurn],
        root: String,
    ) -> Result<Option<i64>, StoreError> {
        let json = serde_json::to_string(plan).map_err(json_error("planning an undo"))?;
        let session = plan.session_id.clone();
        let first = turns.first().map_or(0, |turn| turn.id);
        let read: Vec<(i64, bool, bool)> = turns
            .iter()
            .map(|turn| (turn.id, turn.files_undone, turn.session_undone))
            .collect();
        self.write(
            "planning an undo",
            &plan.session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    let context = "planning an undo";
                    // The checkpoints' rows locked first: a concurrent undo of the session waits
                    // here until the other commits, then sees its plan (or its flags).
                    let now: Vec<(i64, bool, bool)> = tx
                        .query(
                            "SELECT id, files_undone, session_undone FROM clawsmith_checkpoints
                             WHERE session_id = $1 AND id >= $2 ORDER BY id FOR UPDATE",
                            &[&session, &first],
                        )
                        .await
                        .map_err(pg(context))?
                        .iter()
                        .map(|row| (row.get(0), row.get(1), row.get(2)))
                        .collect();
                    no_pending_plan(&***tx, &session).await?;
                    if now != read {
                        return Ok(None);
                    }
                    let row = tx
                        .query_one(
                            "INSERT INTO clawsmith_restore_plans
                               (session_id, workspace_root, created_at_ms, plan_json, epoch)
                             VALUES ($1, $2, $3, $4, $5) RETURNING id",
                            &[&session, &root, &signed(now_ms()), &json, &epoch],
                        )
                        .await
                        .map_err(pg(context))?;
                    Ok(Some(row.get(0)))
                })
            },
        )
    }

    /// The session rewind and the undone flags, in the fenced transaction that deletes the plan
    /// (nothing, when another writer completed it first). What the rewind takes out of the
    /// history is kept in `clawsmith_undone_history`, as it was stored.
    fn complete_plan(&self, plan_id: i64, plan: &RestorePlan) -> Result<(), StoreError> {
        let plan = plan.clone();
        let session_id = plan.session_id.clone();
        self.write(
            "completing an undo",
            &session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    let context = "completing an undo";
                    let session = &plan.session_id;
                    let deleted = tx
                        .execute(
                            "DELETE FROM clawsmith_restore_plans WHERE id = $1",
                            &[&plan_id],
                        )
                        .await
                        .map_err(pg(context))?;
                    if deleted == 0 {
                        return Ok(());
                    }
                    if let Some(target) = &plan.session_target {
                        let (messages, sequence) = (
                            signed(target.message_count),
                            signed(target.event_sequence),
                        );
                        tx.execute(
                            "WITH m AS (SELECT '[' || string_agg(message_json, ',' ORDER BY idx)
                                               || ']' AS json
                                        FROM clawsmith_messages
                                        WHERE session_id = $1 AND idx >= $5),
                                  e AS (SELECT '[' || string_agg(event_json, ',' ORDER BY sequence)
                                               || ']' AS json
                                        FROM clawsmith_events
                                        WHERE session_id = $1 AND sequence > $6)
                             INSERT INTO clawsmith_undone_history
                               (session_id, turn_id, scope, undone_at_ms, messages_json,
                                events_json)
                             SELECT $1, $2, $3, $4, COALESCE(m.json, '[]'), COALESCE(e.json, '[]')
                             FROM m, e WHERE m.json IS NOT NULL OR e.json IS NOT NULL",
                            &[
                                session,
                                &plan.turn_id,
                                &plan.scope.name(),
                                &signed(now_ms()),
                                &messages,
                                &sequence,
                            ],
                        )
                        .await
                        .map_err(pg("keeping undone history"))?;
                        let (kept, numbers, alone, todos): (
                            [Param<'_>; 2],
                            [Param<'_>; 3],
                            [Param<'_>; 1],
                            [Param<'_>; 3],
                        ) = (
                            [session, &messages],
                            [session, &messages, &sequence],
                            [session],
                            [session, &target.todos_json, &epoch],
                        );
                        let events: [Param<'_>; 2] = [session, &sequence];
                        // Sent together: none needs another's answer.
                        futures_util::try_join!(
                            tx.execute(
                                "DELETE FROM clawsmith_messages WHERE session_id = $1 AND idx >= $2",
                                &kept,
                            ),
                            tx.execute(
                                "DELETE FROM clawsmith_events
                                 WHERE session_id = $1 AND sequence > $2",
                                &events,
                            ),
                            tx.execute(
                                "UPDATE clawsmith_sessions
                                 SET next_index = $2, next_sequence = $3::bigint + 1 WHERE id = $1",
                                &numbers,
                            ),
                            tx.execute(
                                "DELETE FROM clawsmith_approvals WHERE session_id = $1",
                                &alone,
                            ),
                            tx.execute(
                                "INSERT INTO clawsmith_todos (session_id, todos_json, epoch)
                                 VALUES ($1, $2, $3)
                                 ON CONFLICT (session_id) DO UPDATE
                                 SET todos_json = EXCLUDED.todos_json, epoch = EXCLUDED.epoch",
                                &todos,
                            ),
                        )
                        .map_err(pg("rewinding the session"))?;
                    }
                    let (files, rewound): ([Param<'_>; 1], [Param<'_>; 1]) =
                        ([&plan.files_checkpoints], [&plan.session_checkpoints]);
                    futures_util::try_join!(
                        tx.execute(
                            "UPDATE clawsmith_checkpoints SET files_undone = true, state = 'undone'
                             WHERE id = ANY($1)",
                            &files,
                        ),
                        tx.execute(
                            "UPDATE clawsmith_checkpoints SET session_undone = true,
                                 state = CASE WHEN state = 'open' THEN 'finished' ELSE state END
                             WHERE id = ANY($1)",
                            &rewound,
                        ),
                    )
                    .map_err(pg("marking checkpoints undone"))?;
                    Ok(())
                })
            },
        )
    }

    /// One attempt of [`UndoStore::undo`]: `None` when the checkpoints changed between the read
    /// and the plan (nothing was written).
    fn attempt_undo(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<Option<UndoReport>, StoreError> {
        let mut report = UndoReport::new(session_id, turn_id, scope);
        let loaded = self.load_undo(session_id, turn_id, true)?;
        let Some(selection) = Selection::of(&loaded.turns, scope) else {
            report.outcome = UndoOutcome::AlreadyUndone;
            return Ok(Some(report));
        };
        report.turns = selection.turns.clone();
        let actions = if selection.files.is_empty() {
            Vec::new()
        } else {
            match restore::precheck(&loaded.recorded(&selection.files), workspace) {
                Precheck::Passed { actions, already } => {
                    report.already_as_before = already;
                    actions
                }
                Precheck::Conflicts(conflicts) => {
                    report.outcome = UndoOutcome::Conflicts(conflicts);
                    return Ok(Some(report));
                }
            }
        };
        // Every content the restore writes, fetched and checked before the plan is committed.
        let mut contents: HashMap<String, Vec<u8>> = HashMap::new();
        for action in &actions {
            if let Some(target) = &action.target
                && !contents.contains_key(&target.sha256)
            {
                contents.insert(target.sha256.clone(), self.blob(&target.sha256)?);
            }
        }
        let ids = |selected: &[usize]| -> Vec<i64> {
            selected
                .iter()
                .map(|&index| loaded.turns[index].id)
                .collect()
        };
        let plan = RestorePlan {
            session_id: session_id.to_owned(),
            turn_id: turn_id.to_owned(),
            scope,
            turns: report.turns.clone(),
            files_checkpoints: ids(&selection.files),
            session_checkpoints: ids(&selection.session),
            session_target: (!selection.session.is_empty()).then(|| loaded.target.clone()),
            actions,
        };
        let root = workspace.root().display().to_string();
        let Some(plan_id) = self.insert_plan(&plan, &loaded.turns, root)? else {
            return Ok(None);
        };
        for action in &plan.actions {
            let content = action
                .target
                .as_ref()
                .and_then(|target| contents.get(&target.sha256));
            restore::apply_action(action, content.map(Vec::as_slice), workspace)?;
            match action.target {
                Some(_) => report.restored.push(action.path.clone()),
                None => report.removed.push(action.path.clone()),
            }
        }
        // The repository after the files, as on SQLite; its rows are marked undone once
        // handled, so an undo killed before its plan completes repeats this on recovery.
        if !plan.files_checkpoints.is_empty() {
            report.repository = clawsmith_checkpoint::repository::undo_changes(
                self,
                session_id,
                &report.turns,
                workspace,
            )?;
            report
                .restored
                .extend(report.repository.restored.iter().cloned());
            report
                .removed
                .extend(report.repository.removed.iter().cloned());
        }
        self.complete_plan(plan_id, &plan)?;
        report.removed_directories = restore::remove_directories(
            workspace,
            loaded.made(&selection.files),
            &report.removed,
            loaded.turns[0].created_at_ms,
        );
        Ok(Some(report))
    }
}

impl UndoStore for PgStore {
    fn undone_history(&self, session_id: &str) -> Result<Vec<UndoneStretch>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let context = "reading undone history";
            let client = connect(&pool, context).await?;
            crate::require_session(&**client, &session).await?;
            let rows = client
                .query(
                    "SELECT turn_id, scope, undone_at_ms, messages_json, events_json
                     FROM clawsmith_undone_history WHERE session_id = $1 ORDER BY id",
                    &[&session],
                )
                .await
                .map_err(pg(context))?;
            rows.iter()
                .map(|row| {
                    Ok(UndoneStretch {
                        turn_id: row.get(0),
                        scope: row.get(1),
                        undone_at_ms: unsigned(row.get(2)),
                        messages: serde_json::from_str(row.get::<_, &str>(3))
                            .map_err(json_error(context))?,
                        events: serde_json::from_str(row.get::<_, &str>(4))
                            .map_err(json_error(context))?,
                    })
                })
                .collect()
        })
    }

    fn undo_preview(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoPreview, StoreError> {
        let loaded = self.load_undo(session_id, turn_id, false)?;
        let mut preview = UndoPreview::new(session_id, turn_id, scope);
        let Some(selection) = Selection::of(&loaded.turns, scope) else {
            preview.already_undone = true;
            return Ok(preview);
        };
        preview.turns = selection.turns;
        if !selection.files.is_empty() {
            preview.take(restore::precheck(
                &loaded.recorded(&selection.files),
                workspace,
            ));
        }
        Ok(preview)
    }

    fn undo(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoReport, StoreError> {
        // The checkpoints change between the read and the plan only when another undo of the
        // session ran meanwhile (the caller holds the lease; without it, undos of one session
        // are serialized by the checkpoints' row locks): decide again on what it left.
        for _ in 0..UNDO_ATTEMPTS {
            if let Some(report) = self.attempt_undo(session_id, turn_id, scope, workspace)? {
                return Ok(report);
            }
        }
        Err(StoreError::Backend {
            context: "planning an undo",
            message: format!(
                "the session's turns changed under each of {UNDO_ATTEMPTS} attempts to plan the \
                 undo; nothing was changed, try again"
            ),
        })
    }

    fn recover_session_restores(
        &self,
        workspace: &Workspace,
        session_id: &str,
    ) -> Result<Vec<RecoveredRestore>, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, root) = (
            session_id.to_owned(),
            workspace.root().display().to_string(),
        );
        let plans: Vec<(i64, String)> = self.run(async move {
            let context = "reading restore plans";
            let client = connect(&pool, context).await?;
            let rows = client
                .query(
                    "SELECT id, plan_json FROM clawsmith_restore_plans
                     WHERE session_id = $1 AND workspace_root = $2 ORDER BY id",
                    &[&session, &root],
                )
                .await
                .map_err(pg(context))?;
            Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
        })?;
        let mut recovered = Vec::new();
        for (plan_id, json) in plans {
            let plan: RestorePlan =
                serde_json::from_str(&json).map_err(json_error("reading a restore plan"))?;
            let mut result = restore::roll_forward(&plan, workspace, |hash| self.blob(hash))?;
            if !plan.files_checkpoints.is_empty() {
                result.repository = clawsmith_checkpoint::repository::undo_changes(
                    self,
                    &plan.session_id,
                    &plan.turns,
                    workspace,
                )?;
            }
            self.complete_plan(plan_id, &plan)?;
            recovered.push(result);
        }
        Ok(recovered)
    }
}
