//! The [`ChangeRecorder`] implementation the write tools call (K1).

use std::sync::Arc;

use clawsmith_fs::{ChangeOrigin, ChangeRecorder, PostState, PriorState, RecorderError, Workspace};

use crate::checkpoint::TurnManifest;
use crate::error::StoreError;
use crate::store::Store;

/// What a [`CheckpointRecorder`] writes into: a turn's prior and post states of a path. This
/// store implements it; so does any session store behind `clawsmith-store`'s traits.
pub trait RecordTarget: Send + Sync {
    /// Records `path`'s state before a change (`None`: absent), committed before it returns.
    fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError>;

    /// Records `path`'s state right after a change: `None` absent, else (SHA-256, size, mode).
    fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError>;
}

impl RecordTarget for Store {
    fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError> {
        Store::record_before(self, session_id, turn_id, path, prior)
    }

    fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError> {
        Store::record_after(self, session_id, turn_id, path, post)
    }
}

/// Records every change of the write tools into the turn's checkpoint: the first prior state per
/// path and turn (content as a blob, or "absent"), and the latest post-operation hash.
///
/// Each call commits before it returns, so `before_change` is durable before the tool touches the
/// file. A failure (unknown session, finished turn, a lease taken over, database error) becomes a
/// [`RecorderError`], and the tool then refuses to make the change.
#[derive(Debug)]
pub struct CheckpointRecorder<T: RecordTarget + ?Sized = Store> {
    store: Arc<T>,
}

impl<T: RecordTarget + ?Sized> Clone for CheckpointRecorder<T> {
    fn clone(&self) -> Self {
        CheckpointRecorder {
            store: self.store.clone(),
        }
    }
}

impl<T: RecordTarget + ?Sized> CheckpointRecorder<T> {
    /// A recorder writing into `store`.
    pub fn new(store: Arc<T>) -> CheckpointRecorder<T> {
        CheckpointRecorder { store }
    }

    /// The store it writes into.
    pub fn store(&self) -> &Arc<T> {
        &self.store
    }
}

impl<T: RecordTarget + ?Sized> ChangeRecorder for CheckpointRecorder<T> {
    fn before_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        prior: &PriorState,
    ) -> Result<(), RecorderError> {
        let prior = match prior {
            PriorState::Absent => None,
            PriorState::File { content, mode } => Some((content.as_slice(), *mode)),
        };
        self.store
            .record_before(&origin.session_id, &origin.turn_id, path, prior)
            .map_err(|error| recorder_error(path, &error))
    }

    fn after_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        post: &PostState,
    ) -> Result<(), RecorderError> {
        let post = match post {
            PostState::Absent => None,
            PostState::File { sha256, size, mode } => Some((*sha256, *size, *mode)),
        };
        self.store
            .record_after(&origin.session_id, &origin.turn_id, path, post)
            .map_err(|error| recorder_error(path, &error))
    }
}

fn recorder_error(path: &str, error: &StoreError) -> RecorderError {
    RecorderError {
        path: path.to_string(),
        message: error.to_string(),
    }
}

impl Store {
    /// Finishes a turn (K1): reads each changed file's current content through `workspace`; when
    /// it still matches the recorded post hash it is kept as a blob (for later diffs) and the line
    /// stats are computed. Returns the manifest: paths and stats only. Finishing a finished turn
    /// returns the same manifest and changes nothing.
    pub fn finish_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        workspace: &Workspace,
    ) -> Result<TurnManifest, StoreError> {
        let read = |path: &str| -> Option<Vec<u8>> {
            let path = workspace.resolve(path).ok()?;
            match workspace.read_state(&path).ok()? {
                PriorState::File { content, .. } => Some(content),
                PriorState::Absent => None,
            }
        };
        self.finish_turn_with(session_id, turn_id, &read)
    }

    /// [`Store::finish_turn`] with the changed files' current contents from `post_content` (a
    /// path's bytes, `None` when absent or unreadable) rather than from a workspace.
    pub fn finish_turn_from(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<TurnManifest, StoreError> {
        self.finish_turn_with(session_id, turn_id, post_content)
    }

    /// [`Store::finish_turn`] and the event that says so (`turn.completed`, with the session's
    /// next sequence) in one commit. Finishing a finished turn changes no checkpoint but still
    /// appends the event.
    pub fn finish_turn_with_event(
        &self,
        session_id: &str,
        turn_id: &str,
        workspace: &Workspace,
        completed: clawsmith_protocol::EventPayload,
        timestamp_ms: u64,
    ) -> Result<(TurnManifest, clawsmith_protocol::Event), StoreError> {
        let read = |path: &str| -> Option<Vec<u8>> {
            let path = workspace.resolve(path).ok()?;
            match workspace.read_state(&path).ok()? {
                PriorState::File { content, .. } => Some(content),
                PriorState::Absent => None,
            }
        };
        self.finish_turn_reading(session_id, turn_id, &read, completed, timestamp_ms)
    }

    /// [`Store::finish_turn_with_event`] with the changed files' current contents from
    /// `post_content` (a path's bytes, `None` when absent or unreadable) rather than from a
    /// workspace.
    pub fn finish_turn_reading(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        completed: clawsmith_protocol::EventPayload,
        timestamp_ms: u64,
    ) -> Result<(TurnManifest, clawsmith_protocol::Event), StoreError> {
        let now = self.now_ms();
        let fsync = self.fsyncs();
        self.write("finishing a turn", |tx| {
            let manifest = crate::checkpoint::finish_turn_in(
                tx,
                session_id,
                turn_id,
                post_content,
                now,
                fsync,
            )?;
            let session = crate::session::require_session(tx, session_id)?;
            let event = crate::session::insert_event(
                tx,
                session,
                session_id,
                completed,
                timestamp_ms,
                None,
            )?;
            Ok((manifest, event))
        })
    }
}
