//! What the core keeps around a command, whose changes nobody announces: the workspace
//! manifest it ran against (a note per running command, so the next writer of a session whose
//! writer died mid-command can find what it changed), what undo cannot give back, the
//! directories it made, and who made a recorded change.
//!
//! A workspace's last manifest is this machine's: the same path on two hosts is two
//! workspaces, so the row is keyed by the host as well. It names its blob by hash only, and the
//! blobs' collection may take it (the next command then starts from a fresh manifest); a
//! running command's note names its manifest by a foreign key, taken and touched in the note's
//! transaction, so the collection spares it while the note lives.

use std::collections::HashSet;

use clawsmith_store::{CommandCaptureStore, InterruptedCapture, StoreError, UncapturedChange};

use crate::turns::{locked_checkpoint, require_open, unknown_turn};
use crate::{PgStore, Take, blobs, connect, now_ms, pg};

impl CommandCaptureStore for PgStore {
    fn attribute_change(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        origin: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        let (path, origin, call) = (path.to_owned(), origin.to_owned(), call_id.to_owned());
        self.write(
            "attributing a change",
            session_id,
            Take::default(),
            move |tx, _, _| {
                Box::pin(async move {
                    let found = locked_checkpoint(tx, &session, &turn)
                        .await?
                        .ok_or_else(|| unknown_turn(&session, &turn))?;
                    let id = require_open(&session, &turn, found)?;
                    tx.execute(
                        "UPDATE clawsmith_checkpoint_files SET origin = $3, call_id = $4
                     WHERE checkpoint_id = $1 AND path = $2",
                        &[&id, &path, &origin, &call],
                    )
                    .await
                    .map_err(pg("attributing a change"))?;
                    Ok(())
                })
            },
        )
    }

    fn remember_workspace_manifest(
        &self,
        workspace_root: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        let pool = self.inner.pool.clone();
        let host = self.host().to_owned();
        let (root, hash) = (workspace_root.to_owned(), hex::encode(manifest_sha256));
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.run(async move {
            let client = connect(&pool, "remembering the workspace manifest").await?;
            client
                .execute(
                    "INSERT INTO clawsmith_workspace_manifests
                       (host, workspace_root, manifest_hash, updated_at_ms)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (host, workspace_root) DO UPDATE
                     SET manifest_hash = EXCLUDED.manifest_hash,
                         updated_at_ms = EXCLUDED.updated_at_ms",
                    &[&host, &root, &hash, &now],
                )
                .await
                .map_err(pg("remembering the workspace manifest"))?;
            Ok(())
        })
    }

    fn workspace_manifest(&self, workspace_root: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let host = self.host().to_owned();
        let root = workspace_root.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading the workspace manifest").await?;
            let row = client
                .query_opt(
                    "SELECT manifest_hash FROM clawsmith_workspace_manifests
                     WHERE host = $1 AND workspace_root = $2",
                    &[&host, &root],
                )
                .await
                .map_err(pg("reading the workspace manifest"))?;
            drop(client);
            let Some(row) = row else {
                return Ok(None);
            };
            let mut name = [0_u8; 32];
            if hex::decode_to_slice(row.get::<_, &str>(0), &mut name).is_err() {
                return Ok(None);
            }
            blobs::get(&pool, objects.as_deref(), name).await
        })
    }

    fn begin_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        let hash = hex::encode(manifest_sha256);
        self.write(
            "noting a command's capture",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    crate::require_session(&***tx, &session).await?;
                    // Touching the manifest's row locks it to the commit, so a collection that
                    // claimed it finishes first (and this finds it gone) or skips it.
                    let stored = tx
                    .query_opt(
                        "UPDATE clawsmith_blobs SET touched_at = now() WHERE hash = $1 RETURNING 1",
                        &[&hash],
                    )
                    .await
                    .map_err(pg("noting a command's capture"))?;
                    if stored.is_none() {
                        return Err(StoreError::MissingBlob(hash));
                    }
                    // The same call again is a new note: it replaces the old one, and goes last.
                    tx.execute(
                        "DELETE FROM clawsmith_command_captures
                     WHERE session_id = $1 AND turn_id = $2 AND call_id = $3",
                        &[&session, &turn, &call],
                    )
                    .await
                    .map_err(pg("noting a command's capture"))?;
                    tx.execute(
                        "INSERT INTO clawsmith_command_captures
                       (session_id, turn_id, call_id, manifest_hash, epoch)
                     VALUES ($1, $2, $3, $4, $5)",
                        &[&session, &turn, &call, &hash, &epoch],
                    )
                    .await
                    .map_err(pg("noting a command's capture"))?;
                    Ok(())
                })
            },
        )
    }

    fn end_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        self.write(
            "ending a command's capture",
            session_id,
            Take::default(),
            move |tx, _, _| {
                Box::pin(async move {
                    tx.execute(
                        "DELETE FROM clawsmith_command_captures
                     WHERE session_id = $1 AND turn_id = $2 AND call_id = $3",
                        &[&session, &turn, &call],
                    )
                    .await
                    .map_err(pg("ending a command's capture"))?;
                    Ok(())
                })
            },
        )
    }

    fn interrupted_captures(
        &self,
        session_id: &str,
    ) -> Result<Vec<InterruptedCapture>, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading interrupted captures").await?;
            let rows: Vec<(String, String, String)> = client
                .query(
                    "SELECT turn_id, call_id, manifest_hash FROM clawsmith_command_captures
                     WHERE session_id = $1 ORDER BY position",
                    &[&session],
                )
                .await
                .map_err(pg("reading interrupted captures"))?
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect();
            drop(client);
            let mut captures = Vec::with_capacity(rows.len());
            for (turn_id, call_id, hash) in rows {
                let mut name = [0_u8; 32];
                let manifest = if hex::decode_to_slice(&hash, &mut name).is_ok() {
                    blobs::get(&pool, objects.as_deref(), name)
                        .await?
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                captures.push(InterruptedCapture {
                    turn_id,
                    call_id,
                    manifest,
                });
            }
            Ok(captures)
        })
    }

    fn record_uncaptured(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        let entries = entries.to_vec();
        self.write(
            "noting changes undo cannot restore",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    let statement = tx
                        .prepare(
                            "INSERT INTO clawsmith_uncaptured_changes
                               (session_id, turn_id, call_id, path, reason, epoch)
                             VALUES ($1, $2, $3, $4, $5, $6)
                             ON CONFLICT (session_id, turn_id, path) DO UPDATE
                             SET call_id = EXCLUDED.call_id, reason = EXCLUDED.reason,
                                 epoch = EXCLUDED.epoch",
                        )
                        .await
                        .map_err(pg("noting changes undo cannot restore"))?;
                    for (path, reason) in &entries {
                        tx.execute(&statement, &[&session, &turn, &call, path, reason, &epoch])
                            .await
                            .map_err(pg("noting changes undo cannot restore"))?;
                    }
                    Ok(())
                })
            },
        )
    }

    fn uncaptured_changes(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<UncapturedChange>, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading changes undo cannot restore").await?;
            let rows = client
                .query(
                    "SELECT path, reason, call_id FROM clawsmith_uncaptured_changes
                     WHERE session_id = $1 AND turn_id = $2 ORDER BY path",
                    &[&session, &turn],
                )
                .await
                .map_err(pg("reading changes undo cannot restore"))?;
            Ok(rows
                .iter()
                .map(|row| UncapturedChange {
                    path: row.get(0),
                    reason: row.get(1),
                    call_id: row.get(2),
                })
                .collect())
        })
    }

    fn record_created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        paths: &[String],
    ) -> Result<(), StoreError> {
        if paths.is_empty() {
            return Ok(());
        }
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        let paths = paths.to_vec();
        self.write(
            "noting directories a command made",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    tx.execute(
                        "INSERT INTO clawsmith_created_directories
                           (session_id, turn_id, call_id, path, epoch)
                         SELECT $1, $2, $3, path, $5 FROM unnest($4::text[]) AS path
                         ON CONFLICT (session_id, turn_id, path) DO NOTHING",
                        &[&session, &turn, &call, &paths, &epoch],
                    )
                    .await
                    .map_err(pg("noting directories a command made"))?;
                    Ok(())
                })
            },
        )
    }

    fn created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        let pool = self.inner.pool.clone();
        let (session, turn) = (session_id.to_owned(), turn_id.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading directories commands made").await?;
            let rows = client
                .query(
                    "SELECT path FROM clawsmith_created_directories
                     WHERE session_id = $1 AND turn_id = $2 ORDER BY path",
                    &[&session, &turn],
                )
                .await
                .map_err(pg("reading directories commands made"))?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }
}

impl PgStore {
    pub(crate) fn stored_hashes_in(
        &self,
        hashes: &[[u8; 32]],
    ) -> Result<HashSet<[u8; 32]>, StoreError> {
        if hashes.is_empty() {
            return Ok(HashSet::new());
        }
        let pool = self.inner.pool.clone();
        let names: Vec<String> = hashes.iter().map(hex::encode).collect();
        let hashes = hashes.to_vec();
        self.run(async move {
            let client = connect(&pool, "looking for stored contents").await?;
            let found: HashSet<String> = client
                .query(
                    "SELECT hash FROM clawsmith_blobs WHERE hash = ANY($1)",
                    &[&names],
                )
                .await
                .map_err(pg("looking for stored contents"))?
                .iter()
                .map(|row| row.get(0))
                .collect();
            Ok(hashes
                .into_iter()
                .filter(|hash| found.contains(&hex::encode(hash)))
                .collect())
        })
    }
}
