//! Safe undo (K2, K6, K7) and crash-safe restores.
//!
//! An undo of turn T rewinds the session to the start of T: T and every later turn not yet undone,
//! newest first, as one operation.
//!
//! 1. **Precheck** (inside a `BEGIN IMMEDIATE` transaction, so no other writer of this database
//!    moves underneath): walk the turns newest first over a simulated tree that starts as the
//!    current files. Each recorded path must be in the turn's post state (same SHA-256, or absent
//!    when the turn left it absent); then it takes the turn's prior state. Any mismatch is a
//!    conflict; on any conflict nothing is written and every conflicting path is reported.
//! 2. **Intent**: the final action per path (write the oldest prior content with its mode, or
//!    remove) is committed as a restore plan row together with the precheck.
//! 3. **Restore**: each file is replaced atomically through the workspace handle (temp file +
//!    rename), so a file is always either before or after, never half-written.
//! 4. **Commit**: session rewind (scope `session`/`all`), checkpoints flagged undone, plan row
//!    deleted — one transaction. The messages and events the rewind takes out are kept, as they
//!    were, in the audit trail ([`Store::undone_history`]): the session continues as if the
//!    turns had not run, and what they did stays readable.
//!
//! A process killed between 2 and 4 leaves the plan row; [`Store::recover_restores`] rolls it
//! forward on the next start: paths already restored are skipped, paths still in the recorded
//! state are restored, and paths changed by someone else since are left alone and reported.

use clawsmith_fs::Workspace;
use clawsmith_protocol::{Event, ModelMessage};
use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use crate::blob::require_blob;
use crate::checkpoint::{checkpoint_id, file_records};
use crate::error::{JsonContext, SqlContext, StoreError};
use crate::restore::{
    self, Precheck, RecordedFile, RestoreAction, RestorePlan, Selection, SessionTarget, UndoTurn,
    remove_directories, roll_forward,
};
use crate::session::{events_in, messages_in, require_session, write_todos_json};
use crate::store::Store;

/// What an undo rewinds (K7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoScope {
    /// Hash-checked rollback of the files.
    Files,
    /// Truncate later messages and events, clear pending approvals, restore todos.
    Session,
    /// Precheck the files, then roll back files and session.
    All,
}

impl UndoScope {
    /// The scope as the CLI and the wire name it.
    pub fn name(self) -> &'static str {
        match self {
            UndoScope::Files => "files",
            UndoScope::Session => "session",
            UndoScope::All => "all",
        }
    }

    pub(crate) fn files(self) -> bool {
        matches!(self, UndoScope::Files | UndoScope::All)
    }

    pub(crate) fn session(self) -> bool {
        matches!(self, UndoScope::Session | UndoScope::All)
    }
}

/// How an undo ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoOutcome {
    /// Everything in scope was rewound.
    Undone,
    /// The turn was already undone in this scope; nothing changed.
    AlreadyUndone,
    /// Files changed since the turns wrote them; nothing changed.
    Conflicts(Vec<UndoConflict>),
}

/// A path whose current state is not what the turn left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoConflict {
    /// Workspace-relative path.
    pub path: String,
    /// The turn whose post state was expected.
    pub turn_id: String,
    /// The expected SHA-256 (hex); `None` = expected absent.
    pub expected_sha256: Option<String>,
    /// What is there; `None` = absent.
    pub found_sha256: Option<String>,
    /// A sentence for people.
    pub reason: String,
}

/// The result of [`Store::undo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoReport {
    /// The session.
    pub session_id: String,
    /// The turn asked for.
    pub turn_id: String,
    /// The scope asked for.
    pub scope: UndoScope,
    /// What happened.
    pub outcome: UndoOutcome,
    /// Turns rewound (or that would have been), newest first.
    pub turns: Vec<String>,
    /// Paths written back to their prior content.
    pub restored: Vec<String>,
    /// Paths removed (created by the turns).
    pub removed: Vec<String>,
    /// Paths that already held what the undo would leave there (put back by hand, say with
    /// `git checkout`): nothing was written, and they were no conflict.
    pub already_as_before: Vec<String>,
    /// Directories removed with them: parents of removed files, born during the turns and empty
    /// now (a `mkdir` the turn ran). Directories that existed before stay.
    pub removed_directories: Vec<String>,
    /// What the turns' commands changed in the workspace's repository, put back (files rewound
    /// also appear in `restored` and `removed`).
    pub repository: crate::RepositoryUndo,
}

impl UndoReport {
    /// A report of an undo that has done nothing yet: outcome [`UndoOutcome::Undone`], every
    /// list empty.
    pub fn new(session_id: &str, turn_id: &str, scope: UndoScope) -> UndoReport {
        UndoReport {
            session_id: session_id.to_string(),
            turn_id: turn_id.to_string(),
            scope,
            outcome: UndoOutcome::Undone,
            turns: Vec::new(),
            restored: Vec::new(),
            removed: Vec::new(),
            already_as_before: Vec::new(),
            removed_directories: Vec::new(),
            repository: crate::RepositoryUndo::default(),
        }
    }
}

/// What [`Store::recover_restores`] did with one interrupted restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredRestore {
    /// The session.
    pub session_id: String,
    /// The turn the interrupted undo was asked for.
    pub turn_id: String,
    /// Paths restored now.
    pub completed: Vec<String>,
    /// Paths that were already restored before the crash.
    pub already_done: Vec<String>,
    /// Paths changed by someone else since; left alone.
    pub skipped: Vec<UndoConflict>,
    /// Temp files the killed undo left beside the paths it was restoring, removed.
    pub swept_temp_files: Vec<String>,
    /// The repository put back as the undo would have (what it had already put back is left
    /// alone and not named).
    pub repository: crate::RepositoryUndo,
}

/// An interrupted restore waiting for [`Store::recover_restores`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRestore {
    /// The session.
    pub session_id: String,
    /// The turn the undo was asked for.
    pub turn_id: String,
    /// The workspace root the plan writes into.
    pub workspace_root: String,
    /// Number of file actions.
    pub actions: usize,
}

/// A stretch of a session's history that an undo took out: the messages and events after the
/// turn it undid back to, as they were, kept for the audit trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UndoneStretch {
    /// The turn the session was rewound to the start of (it and every later turn were undone).
    pub turn_id: String,
    /// How it was undone: `session` or `all`.
    pub scope: String,
    /// When the undo completed (milliseconds since the Unix epoch).
    pub undone_at_ms: u64,
    /// The messages taken out, in order.
    pub messages: Vec<ModelMessage>,
    /// The events taken out, in order, with the sequences they had.
    pub events: Vec<Event>,
}

impl Store {
    /// What undos took out of the session's history, oldest undo first (the audit trail that
    /// [`Store::events`] no longer shows).
    pub fn undone_history(&self, session_id: &str) -> Result<Vec<UndoneStretch>, StoreError> {
        self.read("reading undone history", |tx| {
            require_session(tx, session_id)?;
            let mut statement = tx
                .prepare(
                    "SELECT turn_id, scope, undone_at, messages_json, events_json
                     FROM undone_history WHERE session_id = ?1 ORDER BY id",
                )
                .ctx("reading undone history")?;
            let rows = statement
                .query_map([session_id], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                    ))
                })
                .ctx("reading undone history")?;
            let mut stretches = Vec::new();
            for row in rows {
                let (turn_id, scope, undone_at, messages, events) =
                    row.ctx("reading undone history")?;
                stretches.push(UndoneStretch {
                    turn_id,
                    scope,
                    undone_at_ms: u64::try_from(undone_at).unwrap_or(0),
                    messages: serde_json::from_str(&messages).json_ctx("reading undone history")?,
                    events: serde_json::from_str(&events).json_ctx("reading undone history")?,
                });
            }
            Ok(stretches)
        })
    }

    /// Undoes turn `turn_id` of the session and every later turn not yet undone in `scope`
    /// (see the module docs). Conflicts and already-undone turns are reported in the outcome and
    /// change nothing. An `Err` means the store or the workspace failed; if it failed while
    /// restoring files, the plan stays pending for [`Store::recover_restores`].
    pub fn undo(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoReport, StoreError> {
        let now = self.now_ms();
        let root = workspace.root().display().to_string();
        let planned = self.write("planning an undo", |tx| {
            let mut report = UndoReport::new(session_id, turn_id, scope);
            require_session(tx, session_id)?;
            if pending_plans(tx, Some(session_id))? > 0 {
                return Err(StoreError::RestoreInProgress(session_id.to_string()));
            }
            let target_id = checkpoint_id(tx, session_id, turn_id)?;
            let rows = turns_from(tx, session_id, target_id)?;
            let Some(selection) = Selection::of(&rows, scope) else {
                report.outcome = UndoOutcome::AlreadyUndone;
                return Ok((report, None));
            };
            report.turns = selection.turns.clone();
            let actions = if selection.files.is_empty() {
                Vec::new()
            } else {
                match precheck(tx, &rows, &selection.files, workspace)? {
                    Precheck::Passed { actions, already } => {
                        report.already_as_before = already;
                        actions
                    }
                    Precheck::Conflicts(conflicts) => {
                        report.outcome = UndoOutcome::Conflicts(conflicts);
                        return Ok((report, None));
                    }
                }
            };
            // Every content the plan will write must be present and intact *before* the plan is
            // committed: a damaged blob refuses the undo with nothing changed, instead of failing
            // halfway through the restore.
            for action in &actions {
                if let Some(target) = &action.target {
                    require_blob(tx, &target.sha256)?;
                }
            }
            let session_target = if !selection.session.is_empty() {
                Some(tx
                    .query_row(
                        "SELECT message_count, event_sequence, todos_json FROM checkpoints WHERE id = ?1",
                        [target_id],
                        |row| Ok(SessionTarget {
                            message_count: row.get(0)?,
                            event_sequence: row.get(1)?,
                            todos_json: row.get(2)?,
                        }),
                    )
                    .ctx("planning an undo")?)
            } else {
                None
            };
            // The directories the rewound turns' commands made: removed after the plan, once
            // empty.
            let mut made_directories = Vec::new();
            for &index in &selection.files {
                made_directories.extend(crate::content::created_directories_of(
                    tx,
                    session_id,
                    &rows[index].turn_id,
                )?);
            }
            let plan = RestorePlan {
                session_id: session_id.to_string(),
                turn_id: turn_id.to_string(),
                scope,
                turns: report.turns.clone(),
                files_checkpoints: selection.files.iter().map(|&index| rows[index].id).collect(),
                session_checkpoints: selection
                    .session
                    .iter()
                    .map(|&index| rows[index].id)
                    .collect(),
                session_target,
                actions,
            };
            let json = serde_json::to_string(&plan).json_ctx("planning an undo")?;
            tx.execute(
                "INSERT INTO restore_plans (session_id, workspace_root, created_at, plan_json)
                 VALUES (?1, ?2, ?3, ?4)",
                params![session_id, root, now, json],
            )
            .ctx("planning an undo")?;
            Ok((
                report,
                Some((
                    tx.last_insert_rowid(),
                    plan,
                    rows[0].created_at_ms,
                    made_directories,
                )),
            ))
        })?;
        let (mut report, Some((plan_id, plan, since_ms, made_directories))) = planned else {
            return Ok(planned.0);
        };
        for action in &plan.actions {
            self.apply_action(action, workspace)?;
            match action.target {
                Some(_) => report.restored.push(action.path.clone()),
                None => report.removed.push(action.path.clone()),
            }
        }
        if !plan.files_checkpoints.is_empty() {
            let turns: Vec<String> = report.turns.clone();
            report.repository = self.undo_repository(session_id, &turns, workspace)?;
            report
                .restored
                .extend(report.repository.restored.iter().cloned());
            report
                .removed
                .extend(report.repository.removed.iter().cloned());
        }
        let now = self.now_ms();
        self.write("completing an undo", |tx| {
            complete_plan(tx, plan_id, &plan, now)
        })?;
        report.removed_directories =
            remove_directories(workspace, made_directories, &report.removed, since_ms);
        Ok(report)
    }

    /// Restores interrupted by a crash, for every workspace.
    pub fn pending_restores(&self) -> Result<Vec<PendingRestore>, StoreError> {
        self.read("listing pending restores", |tx| {
            Ok(load_plans(tx)?
                .into_iter()
                .map(|(_, root, plan)| PendingRestore {
                    session_id: plan.session_id,
                    turn_id: plan.turn_id,
                    workspace_root: root,
                    actions: plan.actions.len(),
                })
                .collect())
        })
    }

    /// Rolls forward every interrupted restore whose plan targets `workspace` (see the module
    /// docs). Call it once at startup, before new turns run in that workspace.
    pub fn recover_restores(
        &self,
        workspace: &Workspace,
    ) -> Result<Vec<RecoveredRestore>, StoreError> {
        self.recover_plans(workspace, None)
    }

    /// [`Store::recover_restores`] for one session's plans only: what a process holding that
    /// session's lease may roll forward (a plan of another session may belong to a live undo).
    pub fn recover_session_restores(
        &self,
        workspace: &Workspace,
        session_id: &str,
    ) -> Result<Vec<RecoveredRestore>, StoreError> {
        self.recover_plans(workspace, Some(session_id))
    }

    fn recover_plans(
        &self,
        workspace: &Workspace,
        session_id: Option<&str>,
    ) -> Result<Vec<RecoveredRestore>, StoreError> {
        let root = workspace.root().display().to_string();
        let plans = self.read("listing pending restores", load_plans)?;
        let mut recovered = Vec::new();
        for (plan_id, plan_root, plan) in plans {
            if plan_root != root || session_id.is_some_and(|id| id != plan.session_id) {
                continue;
            }
            let mut result = roll_forward(&plan, workspace, |hash| {
                self.read("reading a blob", |tx| require_blob(tx, hash))
            })?;
            // The repository comes after the files, as in the undo itself; its changes are
            // marked undone only once they are handled, so a second crash repeats this.
            if !plan.files_checkpoints.is_empty() {
                result.repository =
                    self.undo_repository(&plan.session_id, &plan.turns, workspace)?;
            }
            let now = self.now_ms();
            self.write("completing an interrupted undo", |tx| {
                complete_plan(tx, plan_id, &plan, now)
            })?;
            recovered.push(result);
        }
        Ok(recovered)
    }

    fn apply_action(
        &self,
        action: &RestoreAction,
        workspace: &Workspace,
    ) -> Result<(), StoreError> {
        let content = match &action.target {
            Some(target) => {
                Some(self.read("reading a blob", |tx| require_blob(tx, &target.sha256))?)
            }
            None => None,
        };
        restore::apply_action(action, content.as_deref(), workspace)
    }
}

/// The checkpoints of the session from `from_id` on, oldest first.
pub(crate) fn turns_from(
    tx: &Transaction<'_>,
    session_id: &str,
    from_id: i64,
) -> Result<Vec<UndoTurn>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT id, turn_id, files_undone, session_undone, created_at FROM checkpoints
             WHERE session_id = ?1 AND id >= ?2 ORDER BY id",
        )
        .ctx("planning an undo")?;
    let rows = statement
        .query_map(params![session_id, from_id], |row| {
            Ok(UndoTurn {
                id: row.get(0)?,
                turn_id: row.get(1)?,
                files_undone: row.get(2)?,
                session_undone: row.get(3)?,
                created_at_ms: row.get(4)?,
            })
        })
        .ctx("planning an undo")?;
    rows.collect::<Result<Vec<_>, _>>().ctx("planning an undo")
}

/// [`restore::precheck`] of the turns at `selected` (indexes into `rows`, newest first), their
/// file rows read in this transaction.
pub(crate) fn precheck(
    tx: &Transaction<'_>,
    rows: &[UndoTurn],
    selected: &[usize],
    workspace: &Workspace,
) -> Result<Precheck, StoreError> {
    let mut turns = Vec::with_capacity(selected.len());
    for &index in selected {
        let records = file_records(tx, rows[index].id)?;
        turns.push((
            rows[index].turn_id.clone(),
            records.iter().map(RecordedFile::from).collect(),
        ));
    }
    Ok(restore::precheck(&turns, workspace))
}

/// The session rewind and the undone flags, in the transaction that deletes the plan. What the
/// rewind takes out of the session's history is kept in `undone_history`, with when and how it
/// was undone: the session reads as it was before the turns, and the audit trail still shows
/// what they did.
fn complete_plan(
    tx: &Transaction<'_>,
    plan_id: i64,
    plan: &RestorePlan,
    now_ms: u64,
) -> Result<(), StoreError> {
    let still_pending = tx
        .query_row(
            "SELECT 1 FROM restore_plans WHERE id = ?1",
            [plan_id],
            |_| Ok(()),
        )
        .optional()
        .ctx("completing an undo")?;
    if still_pending.is_none() {
        // Another process completed it.
        return Ok(());
    }
    if let Some(target) = &plan.session_target {
        let session = require_session(tx, &plan.session_id)?;
        let messages = messages_in(tx, session, target.message_count, u64::MAX)?;
        let events = events_in(tx, session, target.event_sequence, u64::MAX)?;
        if !messages.is_empty() || !events.is_empty() {
            tx.execute(
                "INSERT INTO undone_history
                     (session_id, turn_id, scope, undone_at, messages_json, events_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    plan.session_id,
                    plan.turn_id,
                    plan.scope.name(),
                    i64::try_from(now_ms).unwrap_or(i64::MAX),
                    serde_json::to_string(&messages).json_ctx("keeping undone history")?,
                    serde_json::to_string(&events).json_ctx("keeping undone history")?,
                ],
            )
            .ctx("keeping undone history")?;
        }
        tx.execute(
            "DELETE FROM message_rows WHERE key >= ?1 AND key < ?2",
            params![session.key_at_most(target.message_count), session.end()],
        )
        .ctx("rewinding messages")?;
        tx.execute(
            "DELETE FROM event_rows WHERE key > ?1 AND key < ?2",
            params![session.key_at_most(target.event_sequence), session.end()],
        )
        .ctx("rewinding events")?;
        tx.execute(
            "DELETE FROM pending_approvals WHERE session_id = ?1",
            [&plan.session_id],
        )
        .ctx("clearing approvals")?;
        write_todos_json(tx, &plan.session_id, &target.todos_json)?;
    }
    for id in &plan.files_checkpoints {
        tx.execute(
            "UPDATE checkpoints SET files_undone = 1, state = 'undone' WHERE id = ?1",
            [id],
        )
        .ctx("marking checkpoints undone")?;
    }
    for id in &plan.session_checkpoints {
        tx.execute(
            "UPDATE checkpoints SET session_undone = 1,
                 state = CASE WHEN state = 'open' THEN 'finished' ELSE state END
             WHERE id = ?1",
            [id],
        )
        .ctx("marking checkpoints undone")?;
    }
    tx.execute("DELETE FROM restore_plans WHERE id = ?1", [plan_id])
        .ctx("completing an undo")?;
    Ok(())
}

/// Number of pending plans (of one session, or of all).
pub(crate) fn pending_plans(
    tx: &Transaction<'_>,
    session_id: Option<&str>,
) -> Result<u64, StoreError> {
    match session_id {
        Some(session_id) => tx.query_row(
            "SELECT count(*) FROM restore_plans WHERE session_id = ?1",
            [session_id],
            |row| row.get(0),
        ),
        None => tx.query_row("SELECT count(*) FROM restore_plans", [], |row| row.get(0)),
    }
    .ctx("reading restore plans")
}

fn load_plans(tx: &Transaction<'_>) -> Result<Vec<(i64, String, RestorePlan)>, StoreError> {
    let mut statement = tx
        .prepare("SELECT id, workspace_root, plan_json FROM restore_plans ORDER BY id")
        .ctx("reading restore plans")?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
            ))
        })
        .ctx("reading restore plans")?;
    let mut plans = Vec::new();
    for row in rows {
        let (id, root, json) = row.ctx("reading restore plans")?;
        plans.push((
            id,
            root,
            serde_json::from_str(&json).json_ctx("reading a restore plan")?,
        ));
    }
    Ok(plans)
}
