//! File contents kept ahead of a change nobody announces (a command's), in the blob store.

use rusqlite::{OptionalExtension, params};

use crate::blob::{get_blob, hash_hex, put_blob};
use crate::checkpoint::open_checkpoint_id;
use crate::error::{SqlContext, StoreError};
use crate::store::Store;

impl Store {
    /// Stores each content once (content-addressed, one transaction) and returns their hex
    /// hashes in order. The core keeps the files of its workspace manifest here before a command
    /// runs, so their prior content exists when the command turns out to have changed them.
    /// Like every blob, one that no checkpoint or artifact refers to is freed by
    /// [`Store::prune`].
    pub fn store_contents(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError> {
        if contents.is_empty() {
            return Ok(Vec::new());
        }
        let fsync = self.fsyncs();
        self.write("storing file contents", |tx| {
            contents
                .iter()
                .map(|content| put_blob(tx, content, fsync))
                .collect()
        })
    }

    /// Which of `hashes` are stored (a row in the blob table): a manifest read back from an
    /// earlier process trusts only the contents still there.
    pub fn stored_hashes(
        &self,
        hashes: &[[u8; 32]],
    ) -> Result<std::collections::HashSet<[u8; 32]>, StoreError> {
        let mut found = std::collections::HashSet::new();
        if hashes.is_empty() {
            return Ok(found);
        }
        self.read("looking for stored contents", |tx| {
            let mut statement = tx
                .prepare_cached("SELECT 1 FROM blobs WHERE hash = ?1")
                .ctx("looking for stored contents")?;
            for hash in hashes {
                if statement
                    .exists([hash_hex(hash)])
                    .ctx("looking for stored contents")?
                {
                    found.insert(*hash);
                }
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Remembers the manifest stored as the blob `manifest_sha256` as the last one of the
    /// workspace at `workspace_root` ([`Store::workspace_manifest`] gives it back).
    pub fn remember_workspace_manifest(
        &self,
        workspace_root: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        self.write("remembering the workspace manifest", |tx| {
            tx.execute(
                "INSERT INTO workspace_manifests (workspace_root, manifest_hash, updated_at)
                 VALUES (?1, ?2, ?3)
                 ON CONFLICT (workspace_root) DO UPDATE
                 SET manifest_hash = excluded.manifest_hash, updated_at = excluded.updated_at",
                params![workspace_root, hash_hex(manifest_sha256), now],
            )
            .ctx("remembering the workspace manifest")?;
            Ok(())
        })
    }

    /// The last manifest remembered for `workspace_root`, `None` when there is none or its blob
    /// was freed since.
    pub fn workspace_manifest(&self, workspace_root: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("reading the workspace manifest", |tx| {
            let hash: Option<String> = tx
                .query_row(
                    "SELECT manifest_hash FROM workspace_manifests WHERE workspace_root = ?1",
                    [workspace_root],
                    |row| row.get(0),
                )
                .optional()
                .ctx("reading the workspace manifest")?;
            let Some(hash) = hash else {
                return Ok(None);
            };
            match get_blob(tx, &hash) {
                Err(StoreError::MissingBlob(_)) => Ok(None),
                other => other,
            }
        })
    }

    /// The content stored under `sha256`, `None` if it is not (or no longer) stored. A blob that
    /// no longer matches its hash is [`StoreError::CorruptBlob`]. A blob file that a prune
    /// removed after this read's snapshot began counts as no longer stored.
    pub fn stored_content(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        let hash = hash_hex(sha256);
        match self.read("reading a file content", |tx| get_blob(tx, &hash)) {
            Err(StoreError::MissingBlob(_)) => Ok(None),
            other => other,
        }
    }

    /// Names who changed `path` in the open turn when it was not a file tool: `origin` (the
    /// core writes `command`) and the call id, shown by `undo list` and in change lists. The
    /// change itself must already be recorded ([`CheckpointRecorder`](crate::CheckpointRecorder)).
    pub fn attribute_change(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        origin: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        self.write("attributing a change", |tx| {
            let Some(id) = open_checkpoint_id(tx, session_id, turn_id)? else {
                return Err(StoreError::UnknownTurn {
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                });
            };
            tx.execute(
                "UPDATE checkpoint_files SET origin = ?3, call_id = ?4
                 WHERE checkpoint_id = ?1 AND path = ?2",
                params![id, path, origin, call_id],
            )
            .ctx("attributing a change")?;
            Ok(())
        })
    }
}

/// A command whose capture began and never ended: the process died while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptedCapture {
    /// The turn the command ran in.
    pub turn_id: String,
    /// The command's call id.
    pub call_id: String,
    /// The workspace manifest as it was when the command started (the core's encoding).
    pub manifest: Vec<u8>,
}

impl Store {
    /// Says, durably and before a command starts, that call `call_id` of turn `turn_id` runs
    /// against the workspace manifest stored as the blob `manifest_sha256` (see
    /// [`Store::store_contents`]). If the process dies before [`Store::end_command_capture`],
    /// [`Store::interrupted_captures`] gives the manifest back to the next open of the session,
    /// which records what changed since as the interrupted command's changes.
    /// [`StoreError::MissingBlob`] when the manifest is not (or no longer) stored.
    pub fn begin_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        let hash = hash_hex(manifest_sha256);
        self.write("noting a command's capture", |tx| {
            // A `prune` may have freed the manifest since it was stored: say so, and the caller
            // stores it again.
            let stored: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM blobs WHERE hash = ?1)",
                    [&hash],
                    |row| row.get(0),
                )
                .ctx("noting a command's capture")?;
            if !stored {
                return Err(StoreError::MissingBlob(hash.clone()));
            }
            tx.execute(
                "INSERT OR REPLACE INTO command_captures
                     (session_id, turn_id, call_id, manifest_hash)
                 VALUES (?1, ?2, ?3, ?4)",
                params![session_id, turn_id, call_id, hash],
            )
            .ctx("noting a command's capture")?;
            Ok(())
        })
    }

    /// The command's changes are recorded (or it never started): its note is dropped.
    pub fn end_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        self.write("ending a command's capture", |tx| {
            tx.execute(
                "DELETE FROM command_captures
                 WHERE session_id = ?1 AND turn_id = ?2 AND call_id = ?3",
                params![session_id, turn_id, call_id],
            )
            .ctx("ending a command's capture")?;
            Ok(())
        })
    }

    /// The captures of `session_id` that began and never ended, oldest first, each with its
    /// manifest (a note whose manifest blob is gone comes back with an empty one).
    pub fn interrupted_captures(
        &self,
        session_id: &str,
    ) -> Result<Vec<InterruptedCapture>, StoreError> {
        self.read("reading interrupted captures", |tx| {
            let mut statement = tx
                .prepare(
                    "SELECT turn_id, call_id, manifest_hash FROM command_captures
                     WHERE session_id = ?1 ORDER BY rowid",
                )
                .ctx("reading interrupted captures")?;
            let rows: Vec<(String, String, String)> = statement
                .query_map([session_id], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .ctx("reading interrupted captures")?
                .collect::<Result<_, _>>()
                .ctx("reading interrupted captures")?;
            rows.into_iter()
                .map(|(turn_id, call_id, hash)| {
                    Ok(InterruptedCapture {
                        turn_id,
                        call_id,
                        // A manifest a prune freed, or whose blob file is gone, comes back
                        // empty, as documented; a damaged one is an error.
                        manifest: match get_blob(tx, &hash) {
                            Ok(manifest) => manifest.unwrap_or_default(),
                            Err(StoreError::MissingBlob(_)) => Vec::new(),
                            Err(error) => return Err(error),
                        },
                    })
                })
                .collect()
        })
    }
}

/// A path a command changed that undo cannot give back, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UncapturedChange {
    /// Workspace-relative path (`.` for the whole workspace).
    pub path: String,
    /// Why undo cannot restore it.
    pub reason: String,
    /// The command's call id.
    pub call_id: String,
}

impl Store {
    /// Notes what call `call_id` of turn `turn_id` changed that undo cannot give back; undo
    /// names them ([`Store::uncaptured_changes`]). A path noted twice in a turn keeps the last
    /// reason.
    pub fn record_uncaptured(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        self.write("noting changes undo cannot restore", |tx| {
            let mut statement = tx
                .prepare(
                    "INSERT OR REPLACE INTO uncaptured_changes
                         (session_id, turn_id, call_id, path, reason)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .ctx("noting changes undo cannot restore")?;
            for (path, reason) in entries {
                statement
                    .execute(params![session_id, turn_id, call_id, path, reason])
                    .ctx("noting changes undo cannot restore")?;
            }
            Ok(())
        })
    }

    /// What commands of turn `turn_id` changed that undo cannot give back, by path.
    pub fn uncaptured_changes(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<UncapturedChange>, StoreError> {
        self.read("reading changes undo cannot restore", |tx| {
            let mut statement = tx
                .prepare(
                    "SELECT path, reason, call_id FROM uncaptured_changes
                     WHERE session_id = ?1 AND turn_id = ?2 ORDER BY path",
                )
                .ctx("reading changes undo cannot restore")?;
            let rows = statement
                .query_map(params![session_id, turn_id], |row| {
                    Ok(UncapturedChange {
                        path: row.get(0)?,
                        reason: row.get(1)?,
                        call_id: row.get(2)?,
                    })
                })
                .ctx("reading changes undo cannot restore")?
                .collect::<Result<Vec<_>, _>>()
                .ctx("reading changes undo cannot restore")?;
            Ok(rows)
        })
    }
}

impl Store {
    /// Notes the directories call `call_id` of turn `turn_id` made (absent before the command,
    /// there after it), so that undo of the turn removes exactly those once they are empty
    /// again, deepest first.
    pub fn record_created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        paths: &[String],
    ) -> Result<(), StoreError> {
        if paths.is_empty() {
            return Ok(());
        }
        self.write("noting directories a command made", |tx| {
            let mut statement = tx
                .prepare(
                    "INSERT OR IGNORE INTO created_directories
                         (session_id, turn_id, call_id, path)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .ctx("noting directories a command made")?;
            for path in paths {
                statement
                    .execute(params![session_id, turn_id, call_id, path])
                    .ctx("noting directories a command made")?;
            }
            Ok(())
        })
    }

    /// The directories commands of turn `turn_id` made, by path.
    pub fn created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.read("reading directories commands made", |tx| {
            created_directories_of(tx, session_id, turn_id)
        })
    }
}

/// [`Store::created_directories`] inside a transaction (undo reads them while it plans).
pub(crate) fn created_directories_of(
    tx: &rusqlite::Transaction<'_>,
    session_id: &str,
    turn_id: &str,
) -> Result<Vec<String>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT path FROM created_directories
             WHERE session_id = ?1 AND turn_id = ?2 ORDER BY path",
        )
        .ctx("reading directories commands made")?;
    let rows = statement
        .query_map(params![session_id, turn_id], |row| row.get(0))
        .ctx("reading directories commands made")?
        .collect::<Result<Vec<String>, _>>()
        .ctx("reading directories commands made")?;
    Ok(rows)
}
