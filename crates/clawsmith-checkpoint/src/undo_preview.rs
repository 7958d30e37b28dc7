//! What an undo would do, without doing it: the precheck of [`Store::undo`] run in a read
//! transaction, for front ends that show a preview and ask for a confirmation (the web view).
//!
//! The preview is a snapshot: the undo itself runs the precheck again under its write lock, so
//! a file changed between the preview and the confirmation is still refused, never overwritten.

use clawsmith_fs::Workspace;

use crate::checkpoint::checkpoint_id;
use crate::error::StoreError;
use crate::session::require_session;
use crate::store::Store;
use crate::undo::{Precheck, TurnRow, UndoConflict, UndoScope, precheck, turns_from};

/// What [`Store::undo_preview`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoPreview {
    /// The session.
    pub session_id: String,
    /// The turn asked for.
    pub turn_id: String,
    /// The scope asked for.
    pub scope: UndoScope,
    /// The turn is already undone in this scope: the undo would change nothing.
    pub already_undone: bool,
    /// Turns the undo would rewind, newest first.
    pub turns: Vec<String>,
    /// Paths it would write back to their prior content.
    pub restore: Vec<String>,
    /// Paths it would remove (created by the turns).
    pub remove: Vec<String>,
    /// Paths that already hold what the undo would leave there: nothing to write, no conflict.
    pub already_as_before: Vec<String>,
    /// Paths changed since the turns wrote them: with any, the undo is refused and changes nothing.
    pub conflicts: Vec<UndoConflict>,
}

impl Store {
    /// Runs the precheck of undoing `turn_id` in `scope` against `workspace` and reports what the
    /// undo would restore, remove and refuse; nothing is written, in the database or on disk.
    pub fn undo_preview(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoPreview, StoreError> {
        self.read("previewing an undo", |tx| {
            require_session(tx, session_id)?;
            let target_id = checkpoint_id(tx, session_id, turn_id)?;
            let rows = turns_from(tx, session_id, target_id)?;
            let Some(target) = rows.first() else {
                return Err(StoreError::UnknownTurn {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                });
            };
            let files = matches!(scope, UndoScope::Files | UndoScope::All) && !target.files_undone;
            let session =
                matches!(scope, UndoScope::Session | UndoScope::All) && !target.session_undone;
            let mut preview = UndoPreview {
                session_id: session_id.to_string(),
                turn_id: turn_id.to_string(),
                scope,
                already_undone: !files && !session,
                turns: rows
                    .iter()
                    .rev()
                    .filter(|row| (files && !row.files_undone) || (session && !row.session_undone))
                    .map(|row| row.turn_id.clone())
                    .collect(),
                restore: Vec::new(),
                remove: Vec::new(),
                already_as_before: Vec::new(),
                conflicts: Vec::new(),
            };
            if files {
                let turns: Vec<&TurnRow> =
                    rows.iter().rev().filter(|row| !row.files_undone).collect();
                match precheck(tx, &turns, workspace)? {
                    Precheck::Passed { actions, already } => {
                        preview.already_as_before = already;
                        for action in actions {
                            match action.target {
                                Some(_) => preview.restore.push(action.path),
                                None => preview.remove.push(action.path),
                            }
                        }
                    }
                    Precheck::Conflicts(conflicts) => preview.conflicts = conflicts,
                }
            }
            Ok(preview)
        })
    }
}
