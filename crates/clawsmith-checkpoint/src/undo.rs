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

use std::collections::HashMap;

use clawsmith_fs::{Workspace, is_symlink_mode};
use clawsmith_protocol::{Event, ModelMessage};
use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use crate::blob::{hash_hex, require_blob};
use crate::checkpoint::{checkpoint_id, file_records};
use crate::error::{JsonContext, SqlContext, StoreError};
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

    fn files(self) -> bool {
        matches!(self, UndoScope::Files | UndoScope::All)
    }

    fn session(self) -> bool {
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

/// The intent row: everything needed to finish the undo without the original process.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RestorePlan {
    session_id: String,
    turn_id: String,
    scope: UndoScope,
    turns: Vec<String>,
    /// Checkpoints whose files are rolled back.
    files_checkpoints: Vec<i64>,
    /// Checkpoints whose session part is rewound.
    session_checkpoints: Vec<i64>,
    session_target: Option<SessionTarget>,
    actions: Vec<RestoreAction>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SessionTarget {
    message_count: u64,
    event_sequence: u64,
    todos_json: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RestoreAction {
    pub(crate) path: String,
    /// What the precheck found there (hex; `None` = absent).
    current: Option<String>,
    /// What to put there; `None` = remove.
    pub(crate) target: Option<TargetFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TargetFile {
    sha256: String,
    mode: u32,
}

pub(crate) struct TurnRow {
    id: i64,
    pub(crate) turn_id: String,
    created_at: u64,
    pub(crate) files_undone: bool,
    pub(crate) session_undone: bool,
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
            let mut report = UndoReport {
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
            };
            require_session(tx, session_id)?;
            if pending_plans(tx, Some(session_id))? > 0 {
                return Err(StoreError::RestoreInProgress(session_id.to_string()));
            }
            let target_id = checkpoint_id(tx, session_id, turn_id)?;
            let rows = turns_from(tx, session_id, target_id)?;
            let Some(target) = rows.iter().find(|row| row.id == target_id) else {
                return Err(StoreError::UnknownTurn {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                });
            };
            let files_pending = scope.files() && !target.files_undone;
            let session_pending = scope.session() && !target.session_undone;
            if !files_pending && !session_pending {
                report.outcome = UndoOutcome::AlreadyUndone;
                return Ok((report, None));
            }
            let files_turns: Vec<&TurnRow> = if files_pending {
                rows.iter().rev().filter(|row| !row.files_undone).collect()
            } else {
                Vec::new()
            };
            let session_turns: Vec<&TurnRow> = if session_pending {
                rows.iter().rev().filter(|row| !row.session_undone).collect()
            } else {
                Vec::new()
            };
            report.turns = rows
                .iter()
                .rev()
                .filter(|row| {
                    (files_pending && !row.files_undone) || (session_pending && !row.session_undone)
                })
                .map(|row| row.turn_id.clone())
                .collect();
            let actions = if files_pending {
                match precheck(tx, &files_turns, workspace)? {
                    Precheck::Passed { actions, already } => {
                        report.already_as_before = already;
                        actions
                    }
                    Precheck::Conflicts(conflicts) => {
                        report.outcome = UndoOutcome::Conflicts(conflicts);
                        return Ok((report, None));
                    }
                }
            } else {
                Vec::new()
            };
            // Every content the plan will write must be present and intact *before* the plan is
            // committed: a damaged blob refuses the undo with nothing changed, instead of failing
            // halfway through the restore.
            for action in &actions {
                if let Some(target) = &action.target {
                    require_blob(tx, &target.sha256)?;
                }
            }
            let session_target = if session_pending {
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
            for row in &files_turns {
                made_directories.extend(crate::content::created_directories_of(
                    tx,
                    session_id,
                    &row.turn_id,
                )?);
            }
            let plan = RestorePlan {
                session_id: session_id.to_string(),
                turn_id: turn_id.to_string(),
                scope,
                turns: report.turns.clone(),
                files_checkpoints: files_turns.iter().map(|row| row.id).collect(),
                session_checkpoints: session_turns.iter().map(|row| row.id).collect(),
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
                    target.created_at,
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
        // Best effort, after the plan: a directory left behind is empty, never wrong content.
        // First the directories commands were seen to make, then (for the file tools' and a
        // recovered command's) the parents of removed files born during the turns.
        report.removed_directories = remove_made_directories(workspace, made_directories);
        let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(since_ms);
        for removed in remove_created_directories(workspace, &report.removed, since) {
            if !report.removed_directories.contains(&removed) {
                report.removed_directories.push(removed);
            }
        }
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
            let mut result = RecoveredRestore {
                session_id: plan.session_id.clone(),
                turn_id: plan.turn_id.clone(),
                completed: Vec::new(),
                already_done: Vec::new(),
                skipped: Vec::new(),
                swept_temp_files: Vec::new(),
                repository: crate::RepositoryUndo::default(),
            };
            for action in &plan.actions {
                // A plan row is data from the file, not a promise: a path that does not resolve
                // inside this workspace, or a target whose blob is gone or damaged, is never acted
                // on. It is reported and skipped like a path someone else changed.
                let unusable = match workspace.resolve(&action.path) {
                    Err(error) => Some(error.to_string()),
                    Ok(_) => match &action.target {
                        Some(target) => self
                            .read("reading a blob", |tx| require_blob(tx, &target.sha256))
                            .err()
                            .map(|error| error.to_string()),
                        None => None,
                    },
                };
                if let Some(reason) = unusable {
                    result.skipped.push(UndoConflict {
                        path: action.path.clone(),
                        turn_id: plan.turn_id.clone(),
                        expected_sha256: action.current.clone(),
                        found_sha256: None,
                        reason,
                    });
                    continue;
                }
                let path = resolve(workspace, &action.path)?;
                // A restore killed between its temp file and its rename left the temp file
                // beside the target (only dead writers' regular files are removed). Best effort.
                if let Ok(swept) = workspace.sweep_stale_temp_files(&path) {
                    result.swept_temp_files.extend(swept);
                }
                let found = current_key(workspace, &path);
                let target = action
                    .target
                    .as_ref()
                    .and_then(|target| state_key(Some(&target.sha256), Some(target.mode)));
                match found {
                    Ok(found) if found == target => result.already_done.push(action.path.clone()),
                    Ok(found) if found == action.current => {
                        self.apply_action(action, workspace)?;
                        result.completed.push(action.path.clone());
                    }
                    Ok(found) => result.skipped.push(UndoConflict {
                        path: action.path.clone(),
                        turn_id: plan.turn_id.clone(),
                        expected_sha256: action.current.clone(),
                        found_sha256: found,
                        reason: "changed after the interrupted restore began; left as it is"
                            .to_string(),
                    }),
                    Err(error) => result.skipped.push(UndoConflict {
                        path: action.path.clone(),
                        turn_id: plan.turn_id.clone(),
                        expected_sha256: action.current.clone(),
                        found_sha256: None,
                        reason: error.to_string(),
                    }),
                }
            }
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
        let path = resolve(workspace, &action.path)?;
        let workspace_error = |error: clawsmith_fs::FsError| StoreError::Workspace {
            path: action.path.clone(),
            message: error.to_string(),
        };
        match &action.target {
            Some(target) => {
                let content = self.read("reading a blob", |tx| require_blob(tx, &target.sha256))?;
                workspace
                    .restore_entry(&path, &content, target.mode, true)
                    .map_err(workspace_error)
            }
            None => workspace.remove_entry(&path).map_err(workspace_error),
        }
    }
}

fn resolve(workspace: &Workspace, path: &str) -> Result<clawsmith_fs::WorkspacePath, StoreError> {
    workspace
        .resolve(path)
        .map_err(|error| StoreError::Workspace {
            path: path.to_string(),
            message: error.to_string(),
        })
}

/// The checkpoints of the session from `from_id` on, oldest first.
/// Removes, deepest first, each of `directories` that is an empty directory now; returns them.
fn remove_made_directories(workspace: &Workspace, mut directories: Vec<String>) -> Vec<String> {
    directories.sort_by_key(|path| std::cmp::Reverse((path.matches('/').count(), path.clone())));
    directories.dedup();
    directories
        .into_iter()
        .filter(|directory| {
            workspace
                .resolve(directory)
                .is_ok_and(|path| workspace.remove_empty_directory(&path).unwrap_or(false))
        })
        .collect()
}

/// Removes, deepest first, the parents of `removed` files that were born at or after `since`
/// and are empty now; returns them.
fn remove_created_directories(
    workspace: &Workspace,
    removed: &[String],
    since: std::time::SystemTime,
) -> Vec<String> {
    let mut parents: Vec<&str> = removed
        .iter()
        .flat_map(|path| {
            std::iter::successors(path.rsplit_once('/').map(|(parent, _)| parent), |parent| {
                parent.rsplit_once('/').map(|(above, _)| above)
            })
        })
        .collect();
    parents.sort_by_key(|parent| std::cmp::Reverse((parent.matches('/').count(), *parent)));
    parents.dedup();
    parents
        .into_iter()
        .filter(|parent| {
            workspace.resolve(parent).is_ok_and(|path| {
                workspace
                    .remove_empty_directory_born_since(&path, since)
                    .unwrap_or(false)
            })
        })
        .map(str::to_owned)
        .collect()
}

pub(crate) fn turns_from(
    tx: &Transaction<'_>,
    session_id: &str,
    from_id: i64,
) -> Result<Vec<TurnRow>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT id, turn_id, files_undone, session_undone, created_at FROM checkpoints
             WHERE session_id = ?1 AND id >= ?2 ORDER BY id",
        )
        .ctx("planning an undo")?;
    let rows = statement
        .query_map(params![session_id, from_id], |row| {
            Ok(TurnRow {
                id: row.get(0)?,
                turn_id: row.get(1)?,
                files_undone: row.get(2)?,
                session_undone: row.get(3)?,
                created_at: row.get(4)?,
            })
        })
        .ctx("planning an undo")?;
    rows.collect::<Result<Vec<_>, _>>().ctx("planning an undo")
}

/// What undo compares at a path: the content's hex SHA-256, prefixed `link:` for a symlink (the
/// hash of its target), so a regular file holding a link's target never passes for the link.
fn state_key(hash: Option<&String>, mode: Option<u32>) -> Option<String> {
    let hash = hash?;
    Some(match mode {
        Some(mode) if is_symlink_mode(mode) => format!("link:{hash}"),
        _ => hash.clone(),
    })
}

/// Whether the regular file at `path` has the permission bits of `mode`; `false` when it
/// cannot be opened.
fn same_mode(workspace: &Workspace, path: &str, mode: u32) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(path) = workspace.resolve(path) else {
        return false;
    };
    let Ok((file, _)) = workspace.open_for_read(&path) else {
        return false;
    };
    file.metadata()
        .is_ok_and(|meta| meta.permissions().mode() & 0o7777 == mode & 0o7777)
}

/// The [`state_key`] of what is at `path` now (`None` = absent).
fn current_key(
    workspace: &Workspace,
    path: &clawsmith_fs::WorkspacePath,
) -> Result<Option<String>, clawsmith_fs::FsError> {
    Ok(workspace.hash_entry(path)?.map(|(hash, is_link)| {
        if is_link {
            format!("link:{}", hash_hex(&hash))
        } else {
            hash_hex(&hash)
        }
    }))
}

/// What the precheck of an undo found.
pub(crate) enum Precheck {
    /// Nothing stands in the way: what to write, and what already holds its target.
    Passed {
        /// The final action per path that needs one.
        actions: Vec<RestoreAction>,
        /// Paths already holding what the undo would leave there.
        already: Vec<String>,
    },
    /// Paths not as the rewound turns left them (changed since, or unusable): the undo is
    /// refused.
    Conflicts(Vec<UndoConflict>),
}

/// Simulates the rollback newest first; returns the final action per path or every conflict.
///
/// A path that already holds its final target — the content before the oldest rewound turn
/// touched it, or nothing — is no conflict whatever happened to it in between: undoing leaves
/// exactly what is there, so refusing would only block the undo for ever (a person who put a
/// file back with `git checkout` could otherwise never undo the turn).
pub(crate) fn precheck(
    tx: &Transaction<'_>,
    turns: &[&TurnRow],
    workspace: &Workspace,
) -> Result<Precheck, StoreError> {
    // path → simulated current hash (None = absent); Err(reason) when the entry is unusable.
    let mut simulated: HashMap<String, Result<Option<String>, String>> = HashMap::new();
    let mut current: HashMap<String, Option<String>> = HashMap::new();
    let mut finals: Vec<(String, Option<TargetFile>)> = Vec::new();
    let mut final_index: HashMap<String, usize> = HashMap::new();
    let mut conflicts: Vec<UndoConflict> = Vec::new();
    for turn in turns {
        for record in file_records(tx, turn.id)? {
            let state = match simulated.get(&record.path) {
                Some(state) => state.clone(),
                None => {
                    let found = match workspace.resolve(&record.path) {
                        Ok(path) => {
                            current_key(workspace, &path).map_err(|error| error.to_string())
                        }
                        Err(error) => Err(error.to_string()),
                    };
                    if let Ok(found) = &found {
                        current.insert(record.path.clone(), found.clone());
                    }
                    found
                }
            };
            let already_conflicting = conflicts
                .iter()
                .any(|conflict| conflict.path == record.path);
            let expected = state_key(record.post_hash.as_ref(), record.post_mode);
            match &state {
                Ok(found) if *found == expected => {}
                _ if already_conflicting => {}
                Ok(found) => conflicts.push(UndoConflict {
                    path: record.path.clone(),
                    turn_id: turn.turn_id.clone(),
                    expected_sha256: record.post_hash.clone(),
                    found_sha256: found.clone(),
                    reason: match (&record.post_hash, found) {
                        (Some(_), None) => "deleted after the turn wrote it".to_string(),
                        (None, Some(_)) => "created after the turn removed it".to_string(),
                        _ => "changed after the turn wrote it".to_string(),
                    },
                }),
                Err(reason) => conflicts.push(UndoConflict {
                    path: record.path.clone(),
                    turn_id: turn.turn_id.clone(),
                    expected_sha256: record.post_hash.clone(),
                    found_sha256: None,
                    reason: reason.clone(),
                }),
            }
            simulated.insert(
                record.path.clone(),
                Ok(state_key(record.pre_hash.as_ref(), record.pre_mode)),
            );
            let target = match (&record.pre_hash, record.pre_mode) {
                (Some(hash), mode) => Some(TargetFile {
                    sha256: hash.clone(),
                    mode: mode.unwrap_or(0o644),
                }),
                (None, _) => None,
            };
            match final_index.get(&record.path) {
                Some(&index) => finals[index].1 = target,
                None => {
                    final_index.insert(record.path.clone(), finals.len());
                    finals.push((record.path.clone(), target));
                }
            }
        }
    }
    let settled = |path: &str, target: &Option<TargetFile>| {
        let wanted = target
            .as_ref()
            .and_then(|file| state_key(Some(&file.sha256), Some(file.mode)));
        if current.get(path).is_none_or(|found| *found != wanted) {
            return false;
        }
        // The same bytes with other permission bits (a `chmod +x`) still need the undo.
        match target {
            Some(file) if !is_symlink_mode(file.mode) => same_mode(workspace, path, file.mode),
            _ => true,
        }
    };
    let already: Vec<String> = finals
        .iter()
        .filter(|(path, target)| settled(path, target))
        .map(|(path, _)| path.clone())
        .collect();
    // An unusable entry (`Err`) has no `current` and stays a conflict.
    conflicts.retain(|conflict| !already.contains(&conflict.path));
    if !conflicts.is_empty() {
        return Ok(Precheck::Conflicts(conflicts));
    }
    let actions = finals
        .into_iter()
        .filter(|(path, _)| !already.contains(path))
        .map(|(path, target)| RestoreAction {
            current: current.get(&path).cloned().flatten(),
            path,
            target,
        })
        .collect();
    // Absent now and absent at the target is settled too, but says nothing worth reporting.
    let already = already
        .into_iter()
        .filter(|path| current.get(path).is_some_and(Option::is_some))
        .collect();
    Ok(Precheck::Passed { actions, already })
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
