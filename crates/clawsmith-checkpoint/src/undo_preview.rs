//! What an undo would do, without doing it: the precheck of [`Store::undo`] run in a read
//! transaction, for front ends that show a preview and ask for a confirmation (the web view).
//!
//! The preview is a snapshot: the undo itself runs the precheck again under its write lock, so
//! a file changed between the preview and the confirmation is still refused, never overwritten.

use clawsmith_fs::Workspace;

use crate::checkpoint::checkpoint_id;
use crate::error::StoreError;
use crate::restore::{Precheck, Selection};
use crate::session::require_session;
use crate::store::Store;
use crate::undo::{UndoConflict, UndoScope, precheck, turns_from};

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

impl UndoPreview {
    /// A preview of nothing yet: not undone, every list empty.
    pub fn new(session_id: &str, turn_id: &str, scope: UndoScope) -> UndoPreview {
        UndoPreview {
            session_id: session_id.to_string(),
            turn_id: turn_id.to_string(),
            scope,
            already_undone: false,
            turns: Vec::new(),
            restore: Vec::new(),
            remove: Vec::new(),
            already_as_before: Vec::new(),
            conflicts: Vec::new(),
        }
    }

    /// Takes in what the precheck found: the paths to restore and remove, or the conflicts.
    pub fn take(&mut self, precheck: Precheck) {
        match precheck {
            Precheck::Passed { actions, already } => {
                self.already_as_before = already;
                for action in actions {
                    match action.target {
                        Some(_) => self.restore.push(action.path),
                        None => self.remove.push(action.path),
                    }
                }
            }
            Precheck::Conflicts(conflicts) => self.conflicts = conflicts,
        }
    }
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
            if rows.is_empty() {
                return Err(StoreError::UnknownTurn {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                });
            }
            let mut preview = UndoPreview::new(session_id, turn_id, scope);
            let Some(selection) = Selection::of(&rows, scope) else {
                preview.already_undone = true;
                return Ok(preview);
            };
            preview.turns = selection.turns;
            if !selection.files.is_empty() {
                preview.take(precheck(tx, &rows, &selection.files, workspace)?);
            }
            Ok(preview)
        })
    }
}
