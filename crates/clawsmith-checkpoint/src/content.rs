//! File contents kept ahead of a change nobody announces (a command's), in the blob store.

use rusqlite::params;

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
        self.write("storing file contents", |tx| {
            contents
                .iter()
                .map(|content| put_blob(tx, content))
                .collect()
        })
    }

    /// The content stored under `sha256`, `None` if it is not (or no longer) stored. A blob that
    /// no longer matches its hash is [`StoreError::CorruptBlob`].
    pub fn stored_content(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        let hash = hash_hex(sha256);
        self.read("reading a file content", |tx| get_blob(tx, &hash))
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
