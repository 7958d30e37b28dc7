//! Session-scoped artifacts (A4): large tool output kept out of the model's context.

use clawsmith_protocol::ArtifactRef;
use rusqlite::{OptionalExtension, params};

use crate::blob::{line_count, put_blob};
use crate::error::{SqlContext, StoreError};
use crate::session::require_session;
use crate::store::Store;

impl Store {
    /// Stores `content` as an artifact of the session, secrets masked (text only). The id is
    /// derived from the stored content, so storing the same content twice in one session
    /// returns the same reference.
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
        self.write("storing an artifact", |tx| {
            require_session(tx, session_id)?;
            let hash = put_blob(tx, content)?;
            let artifact_id = format!("art_{}", &hash[..24]);
            let lines = line_count(content);
            tx.execute(
                "INSERT OR IGNORE INTO artifacts (session_id, artifact_id, blob_hash, size, lines, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![session_id, artifact_id, hash, content.len() as u64, lines, now],
            )
            .ctx("storing an artifact")?;
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
            tx.query_row(
                "SELECT blobs.content FROM artifacts JOIN blobs ON blobs.hash = artifacts.blob_hash
                 WHERE artifacts.session_id = ?1 AND artifacts.artifact_id = ?2",
                params![session_id, artifact_id],
                |row| row.get(0),
            )
            .optional()
            .ctx("reading an artifact")
        })
    }
}
