//! Session-scoped artifacts (A4): large tool output kept out of the model's context.

use clawsmith_protocol::ArtifactRef;
use rusqlite::{OptionalExtension, params};

use crate::blob::{line_count, put_blob, require_blob};
use crate::error::{SqlContext, StoreError};
use crate::session::require_session;
use crate::store::Store;

impl Store {
    /// Stores `content` as an artifact of the session, secrets masked (text only). A new
    /// artifact gets a fresh `art_<ULID>` id (the one id generator); storing the same content
    /// again in the same session returns the reference it already has.
    pub fn put_artifact(
        &self,
        session_id: &str,
        content: &[u8],
    ) -> Result<ArtifactRef, StoreError> {
        let now = self.now_ms();
        // Tool output at rest is masked like the messages that point to it.
        let masked = std::str::from_utf8(content)
            .ok()
            .map(clawsmith_protocol::redact::redact_text);
        let content = masked.as_ref().map_or(content, String::as_bytes);
        let fsync = self.fsyncs();
        self.write("storing an artifact", |tx| {
            require_session(tx, session_id)?;
            let hash = put_blob(tx, content, fsync)?;
            let lines = line_count(content);
            let existing: Option<String> = tx
                .query_row(
                    "SELECT artifact_id FROM artifacts WHERE session_id = ?1 AND blob_hash = ?2
                     ORDER BY created_at LIMIT 1",
                    params![session_id, hash],
                    |row| row.get(0),
                )
                .optional()
                .ctx("storing an artifact")?;
            let artifact_id = match existing {
                Some(id) => id,
                None => {
                    let id = clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Artifact);
                    tx.execute(
                        "INSERT INTO artifacts (session_id, artifact_id, blob_hash, size, lines, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        params![session_id, id, hash, content.len() as u64, lines, now],
                    )
                    .ctx("storing an artifact")?;
                    id
                }
            };
            Ok(ArtifactRef {
                artifact_id,
                bytes: content.len() as u64,
                lines: Some(lines),
                sha256: Some(hash),
            })
        })
    }

    /// The artifact's content if it belongs to `session_id`; `None` for unknown ids and for
    /// artifacts of other sessions (an id never opens another session's data).
    pub fn read_artifact(
        &self,
        session_id: &str,
        artifact_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.read("reading an artifact", |tx| {
            let hash: Option<String> = tx
                .query_row(
                    "SELECT blob_hash FROM artifacts
                     WHERE session_id = ?1 AND artifact_id = ?2",
                    params![session_id, artifact_id],
                    |row| row.get(0),
                )
                .optional()
                .ctx("reading an artifact")?;
            // In its row or in a blob file beside the database; verified either way.
            hash.map(|hash| require_blob(tx, &hash)).transpose()
        })
    }
}
