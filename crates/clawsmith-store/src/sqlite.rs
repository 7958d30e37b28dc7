//! The traits for the embedded SQLite store: every call is the store's own method, so behaviour
//! and speed are the store's.

use clawsmith_checkpoint::{SessionLease, Store};
use clawsmith_protocol::{
    ArtifactRef, Event, EventPayload, ModelMessage, ToolCompleted, ToolResultSummary, ToolStatus,
};

use std::collections::HashSet;
use std::path::Path;

use clawsmith_fs::Workspace;

use crate::{
    Backend, BlobStore, CheckpointInfo, CommandCaptureStore, DeferredEvent, DeferredRecords,
    EventFollower, FileChange, FileDiff, InterruptedCapture, JournalEntry, JournalStart, Lease,
    LeaseHold, OpenedTurn, PendingApproval, RecoveredRestore, RepositoryKeeper, RepositorySnapshot,
    SessionInfo, SessionStore, StoreError, Todo, TurnManifest, TurnOpening, TurnStore,
    UncapturedChange, UndoPreview, UndoReport, UndoScope, UndoStore, UndoneStretch,
};

impl SessionStore for Store {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn now_ms(&self) -> u64 {
        Store::now_ms(self)
    }

    fn database_path(&self) -> Option<&Path> {
        Store::path(self)
    }

    fn journal_has_call(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<bool, StoreError> {
        Store::journal_has_call(self, session_id, turn_id, call_id)
    }

    fn close_call_with_message(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: ToolCompleted,
        timestamp_ms: u64,
        summary: ToolResultSummary,
    ) -> Result<Event, StoreError> {
        Store::close_call_with_message(
            self,
            session_id,
            journaled,
            completed,
            timestamp_ms,
            summary,
        )
    }

    fn repository_keeper(&self) -> Option<&dyn RepositoryKeeper> {
        Some(self)
    }

    fn leave_to_exit(self: std::sync::Arc<Self>) {
        Store::leave_to_exit(self);
    }

    fn create_session(&self, id: &str, workspace_root: &str) -> Result<SessionInfo, StoreError> {
        Store::create_session(self, id, workspace_root)
    }

    fn create_child_session(
        &self,
        id: &str,
        parent_id: &str,
        workspace_root: &str,
    ) -> Result<SessionInfo, StoreError> {
        Store::create_child_session(self, id, parent_id, workspace_root)
    }

    fn fork_session(&self, parent_id: &str, new_id: &str) -> Result<SessionInfo, StoreError> {
        Store::fork_session(self, parent_id, new_id)
    }

    fn get_session(&self, id: &str) -> Result<Option<SessionInfo>, StoreError> {
        Store::get_session(self, id)
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        Store::list_sessions(self)
    }

    fn append_message(&self, session_id: &str, message: &ModelMessage) -> Result<u64, StoreError> {
        Store::append_message(self, session_id, message)
    }

    fn messages_page(
        &self,
        session_id: &str,
        from_index: u64,
        limit: u64,
    ) -> Result<Vec<ModelMessage>, StoreError> {
        Store::messages_page(self, session_id, from_index, limit)
    }

    fn append_event(
        &self,
        session_id: &str,
        payload: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        Store::append_event(self, session_id, payload, timestamp_ms)
    }

    fn events_page(
        &self,
        session_id: &str,
        after_sequence: u64,
        limit: u64,
    ) -> Result<Vec<Event>, StoreError> {
        Store::events_page(self, session_id, after_sequence, limit)
    }

    fn last_event_sequence(&self, session_id: &str) -> Result<u64, StoreError> {
        Store::last_event_sequence(self, session_id)
    }

    fn start_call(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        journal: Option<&JournalStart>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        Store::start_call(self, session_id, assistant, journal, started, timestamp_ms)
    }

    fn journal_close(
        &self,
        session_id: &str,
        call_id: &str,
        status: ToolStatus,
    ) -> Result<bool, StoreError> {
        Store::journal_close(self, session_id, call_id, status)
    }

    fn unfinished_calls(&self, session_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        Store::unfinished_calls(self, session_id)
    }

    fn lease_session(&self, session_id: &str) -> Result<Lease, StoreError> {
        Store::lease_session(self, session_id).map(Lease::new)
    }

    fn yield_lease(&self, lease: Lease) -> Result<Lease, StoreError> {
        let session_id = lease.session_id().to_owned();
        let Some(lease) = lease.into_hold::<SessionLease>() else {
            return Err(StoreError::Lease {
                path: session_id,
                message: "a lease of another store was given to the SQLite store".to_owned(),
            });
        };
        Store::yield_lease(self, lease).map(Lease::new)
    }

    fn put_artifact(&self, session_id: &str, content: &[u8]) -> Result<ArtifactRef, StoreError> {
        Store::put_artifact(self, session_id, content)
    }

    fn read_artifact(
        &self,
        session_id: &str,
        artifact_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Store::read_artifact(self, session_id, artifact_id)
    }

    fn set_todos(&self, session_id: &str, todos: Vec<Todo>) -> Result<(), StoreError> {
        Store::set_todos(self, session_id, todos)
    }

    fn todos(&self, session_id: &str) -> Result<Vec<Todo>, StoreError> {
        Store::todos(self, session_id)
    }

    fn add_pending_approval(
        &self,
        session_id: &str,
        approval: &PendingApproval,
    ) -> Result<(), StoreError> {
        Store::add_pending_approval(self, session_id, approval)
    }

    fn resolve_pending_approval(
        &self,
        session_id: &str,
        approval_id: &str,
    ) -> Result<bool, StoreError> {
        Store::resolve_pending_approval(self, session_id, approval_id)
    }

    fn pending_approvals(&self, session_id: &str) -> Result<Vec<PendingApproval>, StoreError> {
        Store::pending_approvals(self, session_id)
    }

    fn last_event_of_kind(
        &self,
        session_id: &str,
        kind: &str,
    ) -> Result<Option<Event>, StoreError> {
        Store::last_event_of_kind(self, session_id, kind)
    }

    fn has_unfinished_work(&self, session_id: &str) -> Result<bool, StoreError> {
        Store::has_unfinished_work(self, session_id)
    }

    /// A SQLite file tells no one of its commits: readers ask for the last sequence.
    fn follow_events(&self) -> Result<Option<Box<dyn EventFollower>>, StoreError> {
        Ok(None)
    }

    fn undo_store(&self) -> Result<&dyn UndoStore, &'static str> {
        Ok(self)
    }
}

impl UndoStore for Store {
    fn undone_history(&self, session_id: &str) -> Result<Vec<UndoneStretch>, StoreError> {
        Store::undone_history(self, session_id)
    }

    fn undo_preview(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoPreview, StoreError> {
        Store::undo_preview(self, session_id, turn_id, scope, workspace)
    }

    fn undo(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoReport, StoreError> {
        Store::undo(self, session_id, turn_id, scope, workspace)
    }

    fn recover_session_restores(
        &self,
        workspace: &Workspace,
        session_id: &str,
    ) -> Result<Vec<RecoveredRestore>, StoreError> {
        Store::recover_session_restores(self, workspace, session_id)
    }
}

impl TurnStore for Store {
    fn begin_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        opening: TurnOpening,
    ) -> Result<OpenedTurn, StoreError> {
        Store::begin_turn(self, session_id, turn_id, opening)
    }

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

    fn finish_turn_reading(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        completed: EventPayload,
        timestamp_ms: u64,
    ) -> Result<(TurnManifest, Event), StoreError> {
        Store::finish_turn_reading(
            self,
            session_id,
            turn_id,
            post_content,
            completed,
            timestamp_ms,
        )
    }

    fn checkpoints(&self, session_id: &str) -> Result<Vec<CheckpointInfo>, StoreError> {
        Store::checkpoints(self, session_id)
    }

    fn change_list(&self, session_id: &str, turn_id: &str) -> Result<Vec<FileChange>, StoreError> {
        Store::change_list(self, session_id, turn_id)
    }

    fn finish_turn_without_event(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<TurnManifest, StoreError> {
        Store::finish_turn_from(self, session_id, turn_id, post_content)
    }

    fn diff(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
    ) -> Result<Option<FileDiff>, StoreError> {
        Store::diff(self, session_id, turn_id, path)
    }
}

impl CommandCaptureStore for Store {
    fn attribute_change(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        origin: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        Store::attribute_change(self, session_id, turn_id, path, origin, call_id)
    }

    fn remember_workspace_manifest(
        &self,
        workspace_root: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        Store::remember_workspace_manifest(self, workspace_root, manifest_sha256)
    }

    fn workspace_manifest(&self, workspace_root: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Store::workspace_manifest(self, workspace_root)
    }

    fn begin_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError> {
        Store::begin_command_capture(self, session_id, turn_id, call_id, manifest_sha256)
    }

    fn end_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<(), StoreError> {
        Store::end_command_capture(self, session_id, turn_id, call_id)
    }

    fn interrupted_captures(
        &self,
        session_id: &str,
    ) -> Result<Vec<InterruptedCapture>, StoreError> {
        Store::interrupted_captures(self, session_id)
    }

    fn record_uncaptured(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError> {
        Store::record_uncaptured(self, session_id, turn_id, call_id, entries)
    }

    fn uncaptured_changes(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<UncapturedChange>, StoreError> {
        Store::uncaptured_changes(self, session_id, turn_id)
    }

    fn record_created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        paths: &[String],
    ) -> Result<(), StoreError> {
        Store::record_created_directories(self, session_id, turn_id, call_id, paths)
    }

    fn created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<String>, StoreError> {
        Store::created_directories(self, session_id, turn_id)
    }
}

impl LeaseHold for SessionLease {
    fn session_id(&self) -> &str {
        SessionLease::session_id(self)
    }

    fn is_fresh(&self) -> bool {
        SessionLease::is_fresh(self)
    }

    /// One machine's file lock needs no epoch: a holder is alive as long as its lock is.
    fn epoch(&self) -> Option<u64> {
        None
    }

    fn is_wanted(&self) -> bool {
        SessionLease::is_wanted(self)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl BlobStore for Store {
    fn put_blobs(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError> {
        Store::store_contents(self, contents)
    }

    fn get_blob(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        Store::stored_content(self, sha256)
    }

    fn stored_hashes(&self, hashes: &[[u8; 32]]) -> Result<HashSet<[u8; 32]>, StoreError> {
        Store::stored_hashes(self, hashes)
    }
}

/// Deferred records wait for the store's next commit (a turn of reads is one commit).
impl DeferredRecords for Store {
    fn defer_message(&self, session_id: &str, message: &ModelMessage) -> Result<(), StoreError> {
        Store::defer_message(self, session_id, message)
    }

    fn defer_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        events: Vec<EventPayload>,
        timestamp_ms: u64,
    ) -> Result<Vec<DeferredEvent>, StoreError> {
        Ok(Store::defer_turn_start(
            self,
            session_id,
            turn_id,
            events,
            timestamp_ms,
        ))
    }

    fn defer_call_start(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<DeferredEvent, StoreError> {
        Store::defer_call_start(self, session_id, assistant, started, timestamp_ms)
    }

    fn defer_call_close(
        &self,
        session_id: &str,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<DeferredEvent, StoreError> {
        Store::defer_call_close(self, session_id, completed, timestamp_ms, message)
    }

    fn flush_deferred(&self) -> Result<(), StoreError> {
        Store::flush_deferred(self)
    }
}

impl RepositoryKeeper for Store {
    fn keep_repository(&self, workspace: &Workspace) -> Result<RepositorySnapshot, StoreError> {
        Store::keep_repository(self, workspace)
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
        Store::record_repository_changes(self, session_id, turn_id, call_id, before, after, touched)
    }
}
