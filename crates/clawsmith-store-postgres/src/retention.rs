//! Retention in bulk and the blobs' garbage collection.
//!
//! Old sessions go in one statement per batch (their history, journal, artifacts and checkpoints
//! go with them, by cascade), skipping any a live writer holds. A blob goes once no artifact and
//! no checkpoint file names it and nobody touched it for a grace period; the collection can race a writer that stores the same
//! content again, and never leaves that writer's artifact without its bytes:
//!
//! - it claims rows with `FOR UPDATE SKIP LOCKED`: a row a writer has just inserted or touched
//!   is locked by that writer until its commit, and skipped; a writer that comes after the claim
//!   waits on the lock until the collection's commit, then stores row and object anew;
//! - it checks again, under the lock and with a fresh snapshot, that no artifact names the
//!   claimed blobs (one may have been committed between the choice and the lock);
//! - it deletes the objects before the rows, in the transaction that holds the locks.
//!
//! Objects no row names (a writer's transaction that rolled back after creating one) are swept
//! once older than the grace period: the sweep inserts a placeholder row for the name first,
//! which either finds the row (not an orphan) or holds the name against writers until it has
//! deleted the object.

use std::time::Duration;

use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::blobs::object_path;
use crate::{PgStore, backend, connect, interval, pg};
use clawsmith_store::StoreError;

/// Every column that names a blob the collection must spare while its row lives, as
/// (table, column): an artifact's content, a checkpoint file's state before and after a change
/// (the state after is not a foreign key: it names its blob before the turn's finish stores it),
/// a running command's manifest. A test compares this with the database's catalog: a column of
/// a clawsmith table that names a blob and is not here (or in [`BLOB_NAMES_NOT_KEPT`]) fails it,
/// and so does every foreign key to the blobs that is not here.
pub const BLOB_REFERENCES: &[(&str, &str)] = &[
    ("clawsmith_artifacts", "blob_hash"),
    ("clawsmith_checkpoint_files", "pre_hash"),
    ("clawsmith_checkpoint_files", "post_hash"),
    ("clawsmith_command_captures", "manifest_hash"),
    ("clawsmith_repository_changes", "pre_hash"),
];

/// Columns that name a blob without keeping it: a workspace's last manifest is a cache, read as
/// absent once its blob is gone (the next command then lists the workspace whole); a repository
/// file's content after a command is only compared by its name (undo writes the content before).
pub const BLOB_NAMES_NOT_KEPT: &[(&str, &str)] = &[
    ("clawsmith_workspace_manifests", "manifest_hash"),
    ("clawsmith_repository_changes", "post_hash"),
];

/// The condition that no row of [`BLOB_REFERENCES`] names the blob `hash` (an SQL expression).
fn named_by_nothing(hash: &str) -> String {
    BLOB_REFERENCES
        .iter()
        .map(|(table, column)| {
            format!("NOT EXISTS (SELECT 1 FROM {table} r WHERE r.{column} = {hash})")
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// How many rows one transaction of a collection handles.
const BATCH: i64 = 500;

/// What a collection removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    /// Blob rows deleted.
    pub blobs: u64,
    /// Objects deleted with their rows.
    pub objects: u64,
    /// Objects no row named, deleted.
    pub orphans: u64,
}

impl PgStore {
    /// Deletes the sessions created before `cutoff_ms` (ms since the epoch) that no live writer
    /// holds, with everything of theirs; how many.
    pub fn delete_sessions_created_before(&self, cutoff_ms: u64) -> Result<u64, StoreError> {
        let pool = self.inner.pool.clone();
        let cutoff = i64::try_from(cutoff_ms).unwrap_or(i64::MAX);
        self.run(async move {
            let mut deleted = 0_u64;
            loop {
                let mut client = connect(&pool, "deleting old sessions").await?;
                let tx = client
                    .transaction()
                    .await
                    .map_err(pg("deleting old sessions"))?;
                let candidates: Vec<String> = tx
                    .query(
                        "SELECT id FROM clawsmith_sessions WHERE created_at_ms < $1
                         ORDER BY created_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED",
                        &[&cutoff, &BATCH],
                    )
                    .await
                    .map_err(pg("choosing old sessions"))?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                if candidates.is_empty() {
                    tx.commit().await.map_err(pg("deleting old sessions"))?;
                    return Ok(deleted);
                }
                // Their leases, locked: a taker waits for this commit; a live holder keeps its
                // session.
                let held: Vec<String> = tx
                    .query(
                        "SELECT session_id FROM clawsmith_leases
                         WHERE session_id = ANY($1) AND holder IS NOT NULL AND expires_at > now()
                         FOR UPDATE",
                        &[&candidates],
                    )
                    .await
                    .map_err(pg("checking old sessions' leases"))?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                let doomed: Vec<&String> =
                    candidates.iter().filter(|id| !held.contains(id)).collect();
                let removed = tx
                    .execute(
                        "DELETE FROM clawsmith_sessions WHERE id = ANY($1)",
                        &[&doomed],
                    )
                    .await
                    .map_err(pg("deleting old sessions"))?;
                tx.execute(
                    "DELETE FROM clawsmith_leases WHERE session_id = ANY($1)",
                    &[&doomed],
                )
                .await
                .map_err(pg("deleting old sessions' leases"))?;
                tx.commit().await.map_err(pg("deleting old sessions"))?;
                deleted += removed;
                if doomed.is_empty() {
                    // Every candidate left is held: the next batch would be the same.
                    return Ok(deleted);
                }
            }
        })
    }

    /// What [`PgStore::delete_sessions_created_before`] and [`PgStore::collect_blobs`] would
    /// remove now, without removing it: (sessions, blob rows). Blobs of the sessions that would
    /// go are not counted: they become collectable once those are gone.
    pub fn retention_preview(
        &self,
        cutoff_ms: u64,
        grace: Duration,
    ) -> Result<(u64, u64), StoreError> {
        let pool = self.inner.pool.clone();
        let cutoff = i64::try_from(cutoff_ms).unwrap_or(i64::MAX);
        let grace = interval(grace);
        self.run(async move {
            let client = connect(&pool, "previewing retention").await?;
            let sessions: i64 = client
                .query_one(
                    "SELECT count(*) FROM clawsmith_sessions s WHERE created_at_ms < $1
                     AND NOT EXISTS (SELECT 1 FROM clawsmith_leases l WHERE l.session_id = s.id
                       AND l.holder IS NOT NULL AND l.expires_at > now())",
                    &[&cutoff],
                )
                .await
                .map_err(pg("previewing retention"))?
                .get(0);
            let blobs: i64 = client
                .query_one(
                    &format!(
                        "SELECT count(*) FROM clawsmith_blobs b
                         WHERE touched_at < now() - $1::text::interval AND {}",
                        named_by_nothing("b.hash")
                    ),
                    &[&grace],
                )
                .await
                .map_err(pg("previewing retention"))?
                .get(0);
            Ok((
                u64::try_from(sessions).unwrap_or(0),
                u64::try_from(blobs).unwrap_or(0),
            ))
        })
    }

    /// Deletes the blobs no artifact names and nobody touched for `grace`, and the objects no
    /// row names that are older than `grace`.
    pub fn collect_blobs(&self, grace: Duration) -> Result<Collected, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let grace_text = interval(grace);
        self.run(async move {
            let mut collected = Collected::default();
            loop {
                let mut client = connect(&pool, "collecting blobs").await?;
                let tx = client.transaction().await.map_err(pg("collecting blobs"))?;
                let claimed: Vec<(String, bool)> = tx
                    .query(
                        &format!(
                            "SELECT hash, in_object FROM clawsmith_blobs b
                             WHERE touched_at < now() - $1::text::interval AND {}
                             ORDER BY touched_at LIMIT $2 FOR UPDATE SKIP LOCKED",
                            named_by_nothing("b.hash")
                        ),
                        &[&grace_text, &BATCH],
                    )
                    .await
                    .map_err(pg("claiming unreferenced blobs"))?
                    .iter()
                    .map(|row| (row.get(0), row.get(1)))
                    .collect();
                if claimed.is_empty() {
                    tx.commit().await.map_err(pg("collecting blobs"))?;
                    break;
                }
                let hashes: Vec<&String> = claimed.iter().map(|(hash, _)| hash).collect();
                // Again, under the locks: an artifact committed since the choice keeps its blob.
                let still: Vec<String> = tx
                    .query(
                        &format!(
                            "SELECT h FROM unnest($1::text[]) AS h WHERE {}",
                            named_by_nothing("h")
                        ),
                        &[&hashes],
                    )
                    .await
                    .map_err(pg("checking claimed blobs again"))?
                    .iter()
                    .map(|row| row.get(0))
                    .collect();
                for (hash, in_object) in &claimed {
                    if !*in_object || !still.contains(hash) {
                        continue;
                    }
                    if let Some(objects) = objects.as_deref() {
                        delete_object(objects, hash).await?;
                        collected.objects += 1;
                    }
                }
                let removed = tx
                    .execute(
                        "DELETE FROM clawsmith_blobs WHERE hash = ANY($1)",
                        &[&still],
                    )
                    .await
                    .map_err(pg("deleting unreferenced blobs"))?;
                tx.commit().await.map_err(pg("collecting blobs"))?;
                collected.blobs += removed;
                if still.is_empty() {
                    break;
                }
            }
            if let Some(objects) = objects.as_deref() {
                collected.orphans = sweep_orphans(&pool, objects, grace).await?;
            }
            Ok(collected)
        })
    }
}

async fn delete_object(objects: &dyn ObjectStore, hash: &str) -> Result<(), StoreError> {
    match objects.delete(&object_path(hash)).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(backend("deleting a blob's object")(error)),
    }
}

/// Deletes the objects under `blobs/` older than `grace` that no row names; how many.
async fn sweep_orphans(
    pool: &deadpool_postgres::Pool,
    objects: &dyn ObjectStore,
    grace: Duration,
) -> Result<u64, StoreError> {
    let cutoff = std::time::SystemTime::now() - grace;
    let mut candidates = Vec::new();
    let prefix = object_store::path::Path::from("blobs");
    let mut listing = objects.list(Some(&prefix));
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(backend("listing the blob store"))?;
        let modified = std::time::SystemTime::from(meta.last_modified);
        if modified > cutoff {
            continue;
        }
        let parts: Vec<&str> = meta.location.as_ref().split('/').collect();
        if let ["blobs", head, tail] = parts.as_slice() {
            let hash = format!("{head}{tail}");
            if hash.len() == 64 && hash.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                candidates.push(hash);
            }
        }
    }
    let mut swept = 0;
    for hash in candidates {
        let mut client = connect(pool, "sweeping the blob store").await?;
        let tx = client
            .transaction()
            .await
            .map_err(pg("sweeping the blob store"))?;
        // The placeholder holds the name: a writer storing this content now waits for the
        // commit, then stores row and object anew.
        let placed = tx
            .query_opt(
                "INSERT INTO clawsmith_blobs (hash, size, content, in_object, touched_at)
                 VALUES ($1, 0, NULL, true, 'epoch') ON CONFLICT (hash) DO NOTHING RETURNING hash",
                &[&hash],
            )
            .await
            .map_err(pg("sweeping the blob store"))?;
        if placed.is_some() {
            delete_object(objects, &hash).await?;
            tx.execute("DELETE FROM clawsmith_blobs WHERE hash = $1", &[&hash])
                .await
                .map_err(pg("sweeping the blob store"))?;
            swept += 1;
        }
        tx.commit().await.map_err(pg("sweeping the blob store"))?;
    }
    Ok(swept)
}
