//! The repository keeper on PostgreSQL: `clawsmith_checkpoint::repository`'s keeping, change
//! records and undo, with the rows of what commands changed in `clawsmith_repository_changes`
//! (fenced by the session's lease like every write), `.git`'s files kept as blobs of this store,
//! and the objects mirrored in a folder of this machine ([`crate::PgOptions::repository_mirror`]).
//! The mirror is per machine, as the workspace is: a turn undone on another host than the one
//! that ran its command finds no mirrored objects there and names them as kept.

use std::path::PathBuf;

use clawsmith_checkpoint::repository::{
    self, RepositoryChange, RepositorySnapshot, RepositoryStorage, repository_mirror_under,
};
use clawsmith_fs::Workspace;
use clawsmith_store::{BlobStore, RepositoryKeeper, StoreError};

use crate::{Param, PgStore, Take, connect, pg};

fn mode(value: Option<i64>) -> u32 {
    value
        .and_then(|mode| u32::try_from(mode).ok())
        .unwrap_or(0o644)
}

impl RepositoryStorage for PgStore {
    fn repository_mirror(&self, workspace: &Workspace) -> Option<PathBuf> {
        let base = self.inner.options.repository_mirror.as_ref()?;
        repository_mirror_under(base, workspace)
    }

    fn keep_contents(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError> {
        self.put_blobs(contents)
    }

    fn repository_content(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_blob(sha256)
    }

    fn insert_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        changes: &[RepositoryChange],
    ) -> Result<(), StoreError> {
        let (session, turn, call) = (
            session_id.to_owned(),
            turn_id.to_owned(),
            call_id.to_owned(),
        );
        let changes = changes.to_vec();
        self.write(
            "recording repository changes",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    let context = "recording repository changes";
                    crate::require_session(&***tx, &session).await?;
                    let statement = crate::prepared(
                        tx,
                        "INSERT INTO clawsmith_repository_changes
                           (session_id, turn_id, call_id, path, object, pre_hash, pre_mode,
                            post_hash, post_mode, epoch)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                        context,
                    )
                    .await?;
                    let sides: Vec<_> = changes
                        .iter()
                        .map(|change| {
                            let split = |side: &Option<(String, u32)>| match side {
                                Some((hash, mode)) => (Some(hash.clone()), Some(i64::from(*mode))),
                                None => (None, None),
                            };
                            (split(&change.pre), split(&change.post))
                        })
                        .collect();
                    let rows: Vec<[Param<'_>; 10]> = changes
                        .iter()
                        .zip(&sides)
                        .map(|(change, ((pre_hash, pre_mode), (post_hash, post_mode)))| {
                            [
                                &session as Param<'_>,
                                &turn,
                                &call,
                                &change.path,
                                &change.object,
                                pre_hash,
                                pre_mode,
                                post_hash,
                                post_mode,
                                &epoch,
                            ]
                        })
                        .collect();
                    // Sent together: no row needs another's answer.
                    futures_util::future::try_join_all(
                        rows.iter().map(|params| tx.execute(&statement, params)),
                    )
                    .await
                    .map_err(pg(context))?;
                    Ok(())
                })
            },
        )
    }

    fn repository_changes(&self, session_id: &str) -> Result<Vec<RepositoryChange>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let context = "reading repository changes";
            let client = connect(&pool, context).await?;
            let rows = client
                .query(
                    "SELECT id, turn_id, path, object, pre_hash, pre_mode, post_hash, post_mode
                     FROM clawsmith_repository_changes
                     WHERE session_id = $1 AND NOT undone ORDER BY id DESC",
                    &[&session],
                )
                .await
                .map_err(pg(context))?;
            Ok(rows
                .iter()
                .map(|row| RepositoryChange {
                    id: row.get(0),
                    turn_id: row.get(1),
                    path: row.get(2),
                    object: row.get(3),
                    pre: row
                        .get::<_, Option<String>>(4)
                        .map(|hash| (hash, mode(row.get(5)))),
                    post: row
                        .get::<_, Option<String>>(6)
                        .map(|hash| (hash, mode(row.get(7)))),
                })
                .collect())
        })
    }

    fn mark_repository_changes_undone(
        &self,
        session_id: &str,
        ids: &[i64],
    ) -> Result<(), StoreError> {
        let ids = ids.to_vec();
        self.write(
            "marking repository changes undone",
            session_id,
            Take::default(),
            move |tx, _, _| {
                Box::pin(async move {
                    tx.execute(
                        "UPDATE clawsmith_repository_changes SET undone = true WHERE id = ANY($1)",
                        &[&ids],
                    )
                    .await
                    .map_err(pg("marking repository changes undone"))?;
                    Ok(())
                })
            },
        )
    }
}

impl RepositoryKeeper for PgStore {
    fn keep_repository(&self, workspace: &Workspace) -> Result<RepositorySnapshot, StoreError> {
        repository::keep(self, workspace)
    }

    fn record_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        before: &RepositorySnapshot,
        after: &RepositorySnapshot,
        touched: &[&str],
    ) -> Result<usize, StoreError> {
        repository::record_changes(self, session_id, turn_id, call_id, before, after, touched)
    }
}
