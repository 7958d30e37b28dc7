//! The part of undo that does not depend on where the history is kept: choosing the turns,
//! the precheck against the workspace, the restore plan, applying its actions and rolling an
//! interrupted plan forward. [`Store::undo`](crate::Store::undo) runs it on SQLite rows; another
//! store (`clawsmith-store-postgres`) runs it on its own, so both refuse, restore and recover
//! alike.

use std::collections::HashMap;

use clawsmith_fs::{Workspace, WorkspacePath, is_symlink_mode};
use serde::{Deserialize, Serialize};

use crate::blob::hash_hex;
use crate::error::StoreError;
use crate::undo::{RecoveredRestore, UndoConflict, UndoScope};

/// The intent an undo commits before it touches a file: everything needed to finish it without
/// the process that began it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestorePlan {
    /// The session.
    pub session_id: String,
    /// The turn the undo was asked for.
    pub turn_id: String,
    /// The scope asked for.
    pub scope: UndoScope,
    /// Turns rewound, newest first.
    pub turns: Vec<String>,
    /// Checkpoints whose files are rolled back.
    pub files_checkpoints: Vec<i64>,
    /// Checkpoints whose session part is rewound.
    pub session_checkpoints: Vec<i64>,
    /// Where the session is rewound to, when its history is.
    pub session_target: Option<SessionTarget>,
    /// The final action per path.
    pub actions: Vec<RestoreAction>,
}

/// Where a session rewind leaves the session: the checkpoint's numbers and todo list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionTarget {
    /// Messages kept (the first `message_count`).
    pub message_count: u64,
    /// Events kept (sequences up to this one).
    pub event_sequence: u64,
    /// The todo list put back, as JSON.
    pub todos_json: String,
}

/// What the restore does at one path.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreAction {
    /// Workspace-relative path.
    pub path: String,
    /// What the precheck found there (hex, `link:`-prefixed for a symlink; `None` = absent).
    pub current: Option<String>,
    /// What to put there; `None` = remove.
    pub target: Option<TargetFile>,
}

/// Content to write back: its blob and mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetFile {
    /// The blob's SHA-256 (hex).
    pub sha256: String,
    /// The mode to give it (a symlink's mode makes it a link).
    pub mode: u32,
}

/// A turn's checkpoint as undo sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoTurn {
    /// The checkpoint's id (the store's row id; ordered as the turns began).
    pub id: i64,
    /// The turn.
    pub turn_id: String,
    /// When the turn began (milliseconds since the Unix epoch).
    pub created_at_ms: u64,
    /// Its files were rolled back.
    pub files_undone: bool,
    /// Its session part was rewound.
    pub session_undone: bool,
}

/// A path a turn changed, as undo needs it: the states before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedFile {
    /// Workspace-relative path.
    pub path: String,
    /// The content before (hex SHA-256; `None` = absent).
    pub pre_hash: Option<String>,
    /// The mode before.
    pub pre_mode: Option<u32>,
    /// The content after (hex SHA-256; `None` = absent or never recorded).
    pub post_hash: Option<String>,
    /// The mode after.
    pub post_mode: Option<u32>,
}

/// Which turns an undo of one of them rewinds, in one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Indexes (into the turns given) whose files are rolled back, newest first.
    pub files: Vec<usize>,
    /// Indexes whose session part is rewound, newest first.
    pub session: Vec<usize>,
    /// The turns rewound in either part, newest first.
    pub turns: Vec<String>,
}

impl Selection {
    /// Chooses, from `turns` (the session's checkpoints from the target on, oldest first, the
    /// target first), what undoing the first in `scope` rewinds: every turn not yet undone in
    /// each part the target is not yet undone in. `None` when the target is already undone in
    /// every part of the scope (or `turns` is empty).
    pub fn of(turns: &[UndoTurn], scope: UndoScope) -> Option<Selection> {
        let target = turns.first()?;
        let files = scope.files() && !target.files_undone;
        let session = scope.session() && !target.session_undone;
        if !files && !session {
            return None;
        }
        let newest_first = |pending: fn(&UndoTurn) -> bool| -> Vec<usize> {
            (0..turns.len())
                .rev()
                .filter(|&index| pending(&turns[index]))
                .collect()
        };
        Some(Selection {
            files: if files {
                newest_first(|turn| !turn.files_undone)
            } else {
                Vec::new()
            },
            session: if session {
                newest_first(|turn| !turn.session_undone)
            } else {
                Vec::new()
            },
            turns: turns
                .iter()
                .rev()
                .filter(|turn| (files && !turn.files_undone) || (session && !turn.session_undone))
                .map(|turn| turn.turn_id.clone())
                .collect(),
        })
    }
}

/// What the precheck of an undo found.
#[derive(Debug, Clone)]
pub enum Precheck {
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
    path: &WorkspacePath,
) -> Result<Option<String>, clawsmith_fs::FsError> {
    Ok(workspace.hash_entry(path)?.map(|(hash, is_link)| {
        if is_link {
            format!("link:{}", hash_hex(&hash))
        } else {
            hash_hex(&hash)
        }
    }))
}

/// Simulates the rollback of `turns` (each with the files it recorded, newest turn first) over
/// the workspace as it is; returns the final action per path or every conflict.
///
/// Each recorded path must be in the turn's post state (same SHA-256, or absent when the turn
/// left it absent); then it takes the turn's prior state. A path that already holds its final
/// target — the content before the oldest rewound turn touched it, or nothing — is no conflict
/// whatever happened to it in between: undoing leaves exactly what is there, so refusing would
/// only block the undo for ever (a person who put a file back with `git checkout` could
/// otherwise never undo the turn).
pub fn precheck(turns: &[(String, Vec<RecordedFile>)], workspace: &Workspace) -> Precheck {
    // path → simulated current hash (None = absent); Err(reason) when the entry is unusable.
    let mut simulated: HashMap<String, Result<Option<String>, String>> = HashMap::new();
    let mut current: HashMap<String, Option<String>> = HashMap::new();
    let mut finals: Vec<(String, Option<TargetFile>)> = Vec::new();
    let mut final_index: HashMap<String, usize> = HashMap::new();
    let mut conflicts: Vec<UndoConflict> = Vec::new();
    for (turn_id, records) in turns {
        for record in records {
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
                    turn_id: turn_id.clone(),
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
                    turn_id: turn_id.clone(),
                    expected_sha256: record.post_hash.clone(),
                    found_sha256: None,
                    reason: reason.clone(),
                }),
            }
            simulated.insert(
                record.path.clone(),
                Ok(state_key(record.pre_hash.as_ref(), record.pre_mode)),
            );
            let target = record.pre_hash.as_ref().map(|hash| TargetFile {
                sha256: hash.clone(),
                mode: record.pre_mode.unwrap_or(0o644),
            });
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
        return Precheck::Conflicts(conflicts);
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
    Precheck::Passed { actions, already }
}

/// Resolves a plan's path in the workspace, as a [`StoreError::Workspace`] when it cannot be.
pub(crate) fn resolve(workspace: &Workspace, path: &str) -> Result<WorkspacePath, StoreError> {
    workspace
        .resolve(path)
        .map_err(|error| StoreError::Workspace {
            path: path.to_string(),
            message: error.to_string(),
        })
}

/// Carries out one action: writes `content` (the target's bytes, checked against its name by
/// the caller) atomically with the target's mode, or removes the entry.
pub fn apply_action(
    action: &RestoreAction,
    content: Option<&[u8]>,
    workspace: &Workspace,
) -> Result<(), StoreError> {
    let path = resolve(workspace, &action.path)?;
    let workspace_error = |error: clawsmith_fs::FsError| StoreError::Workspace {
        path: action.path.clone(),
        message: error.to_string(),
    };
    match (&action.target, content) {
        (Some(target), Some(content)) => workspace
            .restore_entry(&path, content, target.mode, true)
            .map_err(workspace_error),
        (Some(target), None) => Err(StoreError::MissingBlob(target.sha256.clone())),
        (None, _) => workspace.remove_entry(&path).map_err(workspace_error),
    }
}

/// Rolls the file actions of an interrupted `plan` forward: a path already restored is
/// skipped, a path still as the precheck found it is restored, and a path changed by someone
/// else since (or one that does not resolve in this workspace, or whose content `blob` cannot
/// give intact) is left alone and reported. `blob` gives a target's bytes, checked.
pub fn roll_forward(
    plan: &RestorePlan,
    workspace: &Workspace,
    mut blob: impl FnMut(&str) -> Result<Vec<u8>, StoreError>,
) -> Result<RecoveredRestore, StoreError> {
    let mut result = RecoveredRestore {
        session_id: plan.session_id.clone(),
        turn_id: plan.turn_id.clone(),
        completed: Vec::new(),
        already_done: Vec::new(),
        skipped: Vec::new(),
        swept_temp_files: Vec::new(),
        repository: crate::RepositoryUndo::default(),
    };
    let skip = |action: &RestoreAction, found: Option<String>, reason: String| UndoConflict {
        path: action.path.clone(),
        turn_id: plan.turn_id.clone(),
        expected_sha256: action.current.clone(),
        found_sha256: found,
        reason,
    };
    for action in &plan.actions {
        // A plan row is data from the store, not a promise: a path that does not resolve inside
        // this workspace, or a target whose blob is gone or damaged, is never acted on. It is
        // reported and skipped like a path someone else changed.
        let path = match workspace.resolve(&action.path) {
            Ok(path) => path,
            Err(error) => {
                result.skipped.push(skip(action, None, error.to_string()));
                continue;
            }
        };
        let content = match &action.target {
            Some(target) => match blob(&target.sha256) {
                Ok(content) => Some(content),
                Err(error) => {
                    result.skipped.push(skip(action, None, error.to_string()));
                    continue;
                }
            },
            None => None,
        };
        // A restore killed between its temp file and its rename left the temp file beside the
        // target (only dead writers' regular files are removed). Best effort.
        if let Ok(swept) = workspace.sweep_stale_temp_files(&path) {
            result.swept_temp_files.extend(swept);
        }
        let target = action
            .target
            .as_ref()
            .and_then(|target| state_key(Some(&target.sha256), Some(target.mode)));
        match current_key(workspace, &path) {
            Ok(found) if found == target => result.already_done.push(action.path.clone()),
            Ok(found) if found == action.current => {
                apply_action(action, content.as_deref(), workspace)?;
                result.completed.push(action.path.clone());
            }
            Ok(found) => result.skipped.push(skip(
                action,
                found,
                "changed after the interrupted restore began; left as it is".to_string(),
            )),
            Err(error) => result.skipped.push(skip(action, None, error.to_string())),
        }
    }
    Ok(result)
}

/// Removes, deepest first, each of `directories` (those the rewound turns' commands made) that
/// is an empty directory now; returns them.
pub fn remove_made_directories(workspace: &Workspace, mut directories: Vec<String>) -> Vec<String> {
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
pub fn remove_created_directories(
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

/// The directories a finished undo leaves removed: first those the rewound turns' commands
/// were seen to make, then (for the file tools' and a recovered command's) the parents of
/// removed files born since the oldest rewound turn began (`since_ms`). Best effort, after the
/// plan: a directory left behind is empty, never wrong content.
pub fn remove_directories(
    workspace: &Workspace,
    made: Vec<String>,
    removed: &[String],
    since_ms: u64,
) -> Vec<String> {
    let mut directories = remove_made_directories(workspace, made);
    let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(since_ms);
    for parent in remove_created_directories(workspace, removed, since) {
        if !directories.contains(&parent) {
            directories.push(parent);
        }
    }
    directories
}
