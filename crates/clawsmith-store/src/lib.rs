//! # clawsmith-store
//!
//! The session store of clawsmith as traits, so that one machine's SQLite file and a fleet's
//! PostgreSQL database (`clawsmith-store-postgres`) answer the same calls the same way.
//!
//! ## What a session store promises
//! - **Sessions** are created once under an id and listed newest first; a fork
//!   ([`SessionStore::fork_session`]) copies a session as it stands at one moment.
//! - **History** is append-only: messages get gap-free indexes from 0, events gap-free
//!   sequence numbers from 1, per session, whatever the number of writers. A page read after
//!   an append sees it.
//! - **The call journal** (requirement A8): [`SessionStore::start_call`] commits the batch's
//!   assistant message, the journal row and the `tool.started` event together, before the side
//!   effect may start; a call whose row is still open after its writer died is found by
//!   [`SessionStore::unfinished_calls`] and closed by whoever takes the session next.
//! - **One writer per session**: [`SessionStore::lease_session`] gives a [`Lease`]. While it is
//!   held no other writer takes it; a lease that is *fresh* ([`Lease::is_fresh`]) is the first
//!   holder in this process, which is when recovery of a dead writer's open calls runs. A store
//!   shared by several hosts fences its leases with an epoch ([`Lease::epoch`]): once a lease
//!   is taken over, every write of the old holder is refused
//!   ([`StoreError::LeaseLost`]).
//! - **Turns** ([`TurnStore`]): a turn's
//!   checkpoint records where the session stood (K7) and, per path it changed, the state
//!   before (kept as a blob, committed before the change starts) and after; a finished turn
//!   lists its changes with line counts (K4). Todos and pending approvals live with the
//!   session.
//! - **Command captures**: before a command runs, a note names the workspace manifest it ran
//!   against, so that the next writer of a session whose writer died mid-command finds what
//!   it changed ([`CommandCaptureStore::interrupted_captures`]); what undo cannot give back and the
//!   directories a command made are noted per turn.
//! - **Blobs** ([`BlobStore`]) are content-addressed by SHA-256: storing bytes that are stored
//!   already is success, and reading checks the bytes against their name.
//!
//! Every call is synchronous: the SQLite store answers on the caller's thread (its speed is
//! unchanged behind the trait), and the PostgreSQL store runs its own small runtime.
//!
//! ## Implementations
//! - [`clawsmith_checkpoint::Store`], the embedded default: this crate implements the traits for
//!   it by delegation.
//! - `clawsmith-store-postgres`: PostgreSQL for sessions, S3-compatible object storage for
//!   large blobs.
//!
//! The contract both must keep is [`contract`]: tests of each implementation run it.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use clawsmith_protocol::{
    ArtifactRef, Event, EventPayload, ModelMessage, ToolCompleted, ToolResultSummary, ToolStatus,
};

pub use clawsmith_checkpoint::{
    ChangeKind, CheckpointInfo, CheckpointState, DeferredEvent, DiffSide, FileChange, FileDiff,
    InterruptedCapture, JournalEntry, JournalStart, OpenedTurn, PendingApproval, RecoveredRestore,
    RepositorySnapshot, SessionInfo, StoreError, Todo, TodoStatus, TurnManifest, TurnOpening,
    UncapturedChange, UndoConflict, UndoOutcome, UndoPreview, UndoReport, UndoScope, UndoneStretch,
};
use clawsmith_fs::Workspace;

pub mod contract;
mod sqlite;

/// The [`clawsmith_fs::ChangeRecorder`] the write tools call (K1), over any session store: each
/// change's prior state is committed through [`TurnStore::record_before`] before the tool
/// touches the file, and its post state through [`TurnStore::record_after`]; a refusal (a
/// finished turn, a lease taken over) makes the tool refuse the change.
pub type TurnRecorder = clawsmith_checkpoint::CheckpointRecorder<dyn SessionStore>;

impl clawsmith_checkpoint::RecordTarget for dyn SessionStore {
    fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError> {
        TurnStore::record_before(self, session_id, turn_id, path, prior)
    }

    fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError> {
        TurnStore::record_after(self, session_id, turn_id, path, post)
    }
}

/// Which kind of store answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// One SQLite file on this machine.
    Sqlite,
    /// A PostgreSQL database shared by a fleet.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// Sessions, their history, the call journal, todos, approvals and the writer's lease; with
/// the turns' checkpoints ([`TurnStore`]), the notes around commands ([`CommandCaptureStore`])
/// and the blobs they name ([`BlobStore`]) of the same store.
pub trait SessionStore:
    BlobStore + TurnStore + CommandCaptureStore + DeferredRecords + Send + Sync + fmt::Debug
{
    /// Which kind of store this is.
    fn backend(&self) -> Backend;

    /// The store's clock, in ms since the Unix epoch: what its rows record as "now" (a test
    /// store's clock may be injected).
    fn now_ms(&self) -> u64;

    /// The database file, for a store that is one file on this machine (commands are kept out
    /// of it and of the folder holding it); `None` for a server's database.
    fn database_path(&self) -> Option<&Path>;

    /// Creates the session `id`; [`StoreError::SessionExists`] when it exists.
    fn create_session(&self, id: &str, workspace_root: &str) -> Result<SessionInfo, StoreError>;

    /// Creates the session `id` linked to `parent_id` (a sub-agent's session): it starts empty,
    /// and lists with its parent. [`StoreError::SessionExists`] when `id` exists,
    /// [`StoreError::UnknownSession`] when the parent does not; neither creates anything.
    fn create_child_session(
        &self,
        id: &str,
        parent_id: &str,
        workspace_root: &str,
    ) -> Result<SessionInfo, StoreError>;

    /// The session `id`, when it exists.
    /// Forks `parent_id` into a new session `new_id` (K6) as the parent stands at one moment:
    /// a copy of its messages and events (same numbers, each event naming the fork), todos,
    /// checkpoints with their change lists, and artifacts; contents stay shared through the
    /// blobs. The journal and pending approvals belong to the parent's running calls and are
    /// not copied. [`StoreError::UnknownSession`] for an unknown parent and
    /// [`StoreError::SessionExists`] for a taken id create nothing.
    fn fork_session(&self, parent_id: &str, new_id: &str) -> Result<SessionInfo, StoreError>;

    fn get_session(&self, id: &str) -> Result<Option<SessionInfo>, StoreError>;

    /// Every session, newest first.
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// Appends `message` (masked at rest); its index.
    fn append_message(&self, session_id: &str, message: &ModelMessage) -> Result<u64, StoreError>;

    /// Up to `limit` messages from index `from_index`.
    fn messages_page(
        &self,
        session_id: &str,
        from_index: u64,
        limit: u64,
    ) -> Result<Vec<ModelMessage>, StoreError>;

    /// Every message of the session, in order (a page without end).
    fn messages(&self, session_id: &str) -> Result<Vec<ModelMessage>, StoreError> {
        self.messages_page(session_id, 0, u64::MAX)
    }

    /// Every event of the session, in order (a page without end).
    fn events(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        self.events_page(session_id, 0, u64::MAX)
    }

    /// Appends an event with the session's next sequence number.
    fn append_event(
        &self,
        session_id: &str,
        payload: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError>;

    /// Up to `limit` events with sequence numbers after `after_sequence`.
    fn events_page(
        &self,
        session_id: &str,
        after_sequence: u64,
        limit: u64,
    ) -> Result<Vec<Event>, StoreError>;

    /// The session's last event sequence number (0: none yet, or no such session).
    fn last_event_sequence(&self, session_id: &str) -> Result<u64, StoreError>;

    /// Starts a call in one commit: `assistant` (the batch's first write carries it), the
    /// journal row of a side-effecting call, and its `tool.started` event. On `Err` nothing of
    /// it was stored, and the side effect must not start.
    fn start_call(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        journal: Option<&JournalStart>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError>;

    /// Closes the journal row of `call_id` with `status`; whether it was open.
    fn journal_close(
        &self,
        session_id: &str,
        call_id: &str,
        status: ToolStatus,
    ) -> Result<bool, StoreError>;

    /// The journal rows still open: calls whose writer has not said how they ended.
    fn unfinished_calls(&self, session_id: &str) -> Result<Vec<JournalEntry>, StoreError>;

    /// Whether the journal holds `call_id` in this turn, open or closed (a provider's call ids
    /// name one call per turn).
    fn journal_has_call(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<bool, StoreError>;

    /// Closes a call in one commit: its journal entry (when `journaled`), its `tool.completed`
    /// event (the session's next sequence) and the tool message made from it (its call id, tool
    /// name, `output` as the text, and `summary`). Returns the event as given.
    fn close_call_with_message(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: ToolCompleted,
        timestamp_ms: u64,
        summary: ToolResultSummary,
    ) -> Result<Event, StoreError>;

    /// The session's lease: waits or fails (per the store's configuration) while another writer
    /// holds it. A writer that waits says so ([`Lease::is_wanted`] of the holder's lease).
    fn lease_session(&self, session_id: &str) -> Result<Lease, StoreError>;

    /// Lets go of `lease` because another writer waits for it ([`Lease::is_wanted`]), waits
    /// until that writer has taken it (or given up), then takes the lease again as
    /// [`SessionStore::lease_session`] does. The lease returned is fresh when nobody else in
    /// this process shared the one given up: the caller must then look for what the other
    /// writer changed. A lease of another store is refused.
    fn yield_lease(&self, lease: Lease) -> Result<Lease, StoreError>;

    /// Keeps `content` (masked when it is text) as an artifact of the session, once per content
    /// per session: the same content again is the same artifact.
    fn put_artifact(&self, session_id: &str, content: &[u8]) -> Result<ArtifactRef, StoreError>;

    /// The bytes of the session's artifact `artifact_id`, checked; `None` when the session has
    /// no such artifact.
    fn read_artifact(
        &self,
        session_id: &str,
        artifact_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replaces the session's todo list, checked first ([`StoreError::InvalidTodos`]).
    fn set_todos(&self, session_id: &str, todos: Vec<Todo>) -> Result<(), StoreError>;

    /// The session's todo list (empty if never set).
    fn todos(&self, session_id: &str) -> Result<Vec<Todo>, StoreError>;

    /// Keeps an approval request (masked) until it is answered; the same id again replaces it.
    fn add_pending_approval(
        &self,
        session_id: &str,
        approval: &PendingApproval,
    ) -> Result<(), StoreError>;

    /// Removes an answered approval; whether it was pending.
    fn resolve_pending_approval(
        &self,
        session_id: &str,
        approval_id: &str,
    ) -> Result<bool, StoreError>;

    /// The session's pending approvals, oldest first.
    fn pending_approvals(&self, session_id: &str) -> Result<Vec<PendingApproval>, StoreError>;

    /// The session's latest event of `kind` (`model.request`, …); `None` when it has none (or
    /// there is no such session).
    fn last_event_of_kind(&self, session_id: &str, kind: &str)
    -> Result<Option<Event>, StoreError>;

    /// Whether a writer that died could have left work to recover: an open turn, an open
    /// journal row, a pending approval (or, on a store that keeps them, a restore plan).
    fn has_unfinished_work(&self, session_id: &str) -> Result<bool, StoreError>;

    /// Tells of new events as writers commit them, those of other processes and hosts included,
    /// when this store can; `Ok(None)` when it cannot, and a reader that wants to keep up asks
    /// [`SessionStore::last_event_sequence`] now and then instead.
    fn follow_events(&self) -> Result<Option<Box<dyn EventFollower>>, StoreError>;

    /// Undo on this store, or why this store cannot undo (a sentence a person reads).
    fn undo_store(&self) -> Result<&dyn UndoStore, &'static str>;

    /// For a process about to exit: this owner's share of the store is let go of without the
    /// work the exit does anyway (the SQLite store leaves its connection to the exit once its
    /// log is closed). Nothing must use the store afterwards. By default, a drop.
    fn leave_to_exit(self: std::sync::Arc<Self>) {
        drop(self);
    }

    /// What keeps a workspace's git repository for undo of what commands do to it, when this
    /// store keeps one (its objects mirrored in a folder of this machine: beside a SQLite
    /// database, or where the fleet store is told); `None` when it does not,
    /// and commands' repository changes are then named as not captured.
    fn repository_keeper(&self) -> Option<&dyn RepositoryKeeper>;
}

/// Records that guard no side effect, which a store may hold back and write with its next
/// commit (so a turn of reads costs one commit), or write at once. Either way a record is
/// written no later than the store's next write of any kind, and in the order given.
pub trait DeferredRecords: Send + Sync {
    /// [`SessionStore::append_message`], deferred.
    fn defer_message(&self, session_id: &str, message: &ModelMessage) -> Result<(), StoreError>;

    /// [`TurnStore::begin_turn`] with `events` as its opening, deferred: the events get their
    /// sequences when written.
    fn defer_turn_start(
        &self,
        session_id: &str,
        turn_id: &str,
        events: Vec<EventPayload>,
        timestamp_ms: u64,
    ) -> Result<Vec<DeferredEvent>, StoreError>;

    /// [`SessionStore::start_call`] of a call that guards no side effect (no journal entry),
    /// deferred.
    fn defer_call_start(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<DeferredEvent, StoreError>;

    /// The close of a call without a journal entry (its `tool.completed` and its tool
    /// `message`), deferred.
    fn defer_call_close(
        &self,
        session_id: &str,
        completed: EventPayload,
        timestamp_ms: u64,
        message: &ModelMessage,
    ) -> Result<DeferredEvent, StoreError>;

    /// Writes what waits now.
    fn flush_deferred(&self) -> Result<(), StoreError>;
}

/// The keeper of a workspace's git repository (see [`SessionStore::repository_keeper`]).
pub trait RepositoryKeeper: Send + Sync {
    /// Looks at the workspace's repository and keeps what is not kept yet.
    fn keep_repository(&self, workspace: &Workspace) -> Result<RepositorySnapshot, StoreError>;

    /// Records what differs between the repository `before` a command and `after` it as the
    /// call's changes, for undo; how many were recorded.
    fn record_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        before: &RepositorySnapshot,
        after: &RepositorySnapshot,
        touched: &[&str],
    ) -> Result<usize, StoreError>;
}

/// New events as writers commit them (see [`SessionStore::follow_events`]).
pub trait EventFollower: Send + fmt::Debug {
    /// The sessions that got events, each with its last sequence, waiting at most `timeout` for
    /// the first; empty when none came. An error means the follower stopped hearing: a reader
    /// reads again from its last sequence and follows anew.
    fn wait(&self, timeout: std::time::Duration) -> Result<Vec<(String, u64)>, StoreError>;
}

/// Undo of turns (K2, K5, K7): files put back as they were before a turn, checked first against
/// what the turn left, and with scope `session` or `all` the session's history rewound.
pub trait UndoStore: Send + Sync {
    /// What undos took out of the session's history, oldest undo first.
    fn undone_history(&self, session_id: &str) -> Result<Vec<UndoneStretch>, StoreError>;

    /// What undoing `turn_id` in `scope` would restore, remove and refuse; writes nothing.
    fn undo_preview(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoPreview, StoreError>;

    /// Undoes `turn_id` and every later turn of the session not yet undone in `scope`; the caller
    /// holds the session's lease. Conflicts change nothing and are reported in the outcome.
    fn undo(
        &self,
        session_id: &str,
        turn_id: &str,
        scope: UndoScope,
        workspace: &Workspace,
    ) -> Result<UndoReport, StoreError>;

    /// Rolls forward the session's restores that a dead writer left half done; the caller holds
    /// the session's lease.
    fn recover_session_restores(
        &self,
        workspace: &Workspace,
        session_id: &str,
    ) -> Result<Vec<RecoveredRestore>, StoreError>;
}

/// Turns and their checkpoints (K1, K4, K7).
pub trait TurnStore: Send + Sync {
    /// Begins turn `turn_id`: its checkpoint records the session's message count, last event
    /// sequence and todo list (K7), and the events of `opening` follow it in the same commit.
    /// A turn id is begun once per session ([`StoreError::TurnExists`]).
    fn begin_turn(
        &self,
        session_id: &str,
        turn_id: &str,
        opening: TurnOpening,
    ) -> Result<OpenedTurn, StoreError>;

    /// Records `path`'s state before a change in the turn (K1): the first call per path and
    /// turn keeps the prior content (`None`: absent) as a blob, later ones change nothing. An
    /// unknown turn is begun; a finished or undone one refuses ([`StoreError::TurnClosed`]).
    /// Committed before it returns: the change may start only then.
    fn record_before(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        prior: Option<(&[u8], u32)>,
    ) -> Result<(), StoreError>;

    /// Records `path`'s state right after a change: `None` absent, else (SHA-256, size, mode).
    /// Needs the path's [`TurnStore::record_before`] in this turn.
    fn record_after(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        post: Option<([u8; 32], u64, u32)>,
    ) -> Result<(), StoreError>;

    /// Finishes the turn and appends `completed` in one commit. `post_content` gives each
    /// changed path's current bytes (`None`: absent or unreadable); those that still match the
    /// recorded post state are kept (for diffs) and counted in lines. Finishing a finished turn
    /// changes no checkpoint and still appends the event.
    fn finish_turn_reading(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
        completed: EventPayload,
        timestamp_ms: u64,
    ) -> Result<(TurnManifest, Event), StoreError>;

    /// [`TurnStore::finish_turn_reading`] without an event: what recovery does with a turn its
    /// dead writer left open.
    fn finish_turn_without_event(
        &self,
        session_id: &str,
        turn_id: &str,
        post_content: &dyn Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<TurnManifest, StoreError>;

    /// Every checkpoint of the session, oldest first.
    fn checkpoints(&self, session_id: &str) -> Result<Vec<CheckpointInfo>, StoreError>;

    /// The turn's change list (K4): paths and stats in first-change order.
    fn change_list(&self, session_id: &str, turn_id: &str) -> Result<Vec<FileChange>, StoreError>;

    /// The diff of `path` in the turn (K4), each side cut at
    /// [`clawsmith_checkpoint::DIFF_SIDE_MAX_BYTES`]; `Ok(None)` when the turn did not change
    /// `path`.
    fn diff(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
    ) -> Result<Option<FileDiff>, StoreError>;
}

/// What the core keeps around a command, whose changes nobody announces.
pub trait CommandCaptureStore: Send + Sync {
    /// Names who changed `path` in the open turn when it was not a file tool (`origin`, e.g.
    /// `command`, and the call); the change itself must be recorded already.
    fn attribute_change(
        &self,
        session_id: &str,
        turn_id: &str,
        path: &str,
        origin: &str,
        call_id: &str,
    ) -> Result<(), StoreError>;

    /// Remembers the blob `manifest_sha256` as the last manifest of the workspace at
    /// `workspace_root` on this machine.
    fn remember_workspace_manifest(
        &self,
        workspace_root: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError>;

    /// The last manifest remembered for `workspace_root` on this machine; `None` when there is
    /// none or its blob was collected since.
    fn workspace_manifest(&self, workspace_root: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Notes, durably and before a command starts, that call `call_id` runs against the stored
    /// manifest `manifest_sha256`; [`StoreError::MissingBlob`] (and nothing noted) when that
    /// manifest is not stored.
    fn begin_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        manifest_sha256: &[u8; 32],
    ) -> Result<(), StoreError>;

    /// The command's changes are recorded (or it never ran): its note goes.
    fn end_command_capture(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<(), StoreError>;

    /// The session's captures that began and never ended (their writer died), oldest first,
    /// each with its manifest (empty when the manifest's blob is gone).
    fn interrupted_captures(&self, session_id: &str)
    -> Result<Vec<InterruptedCapture>, StoreError>;

    /// Notes what a command changed that undo cannot give back, `(path, reason)`; a path noted
    /// twice in a turn keeps the last reason.
    fn record_uncaptured(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        entries: &[(String, String)],
    ) -> Result<(), StoreError>;

    /// What commands of the turn changed that undo cannot give back, by path.
    fn uncaptured_changes(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<UncapturedChange>, StoreError>;

    /// Notes the directories a command made (undo removes them once empty again).
    fn record_created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        paths: &[String],
    ) -> Result<(), StoreError>;

    /// The directories commands of the turn made, by path.
    fn created_directories(
        &self,
        session_id: &str,
        turn_id: &str,
    ) -> Result<Vec<String>, StoreError>;
}

/// Content-addressed blobs.
pub trait BlobStore: Send + Sync + fmt::Debug {
    /// Stores each of `contents` unless it is stored already; their SHA-256 names (lower-case
    /// hex), in order.
    fn put_blobs(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError>;

    /// The bytes named `sha256`, checked against it; `None` when no such blob is stored.
    fn get_blob(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Which of `hashes` are stored.
    fn stored_hashes(&self, hashes: &[[u8; 32]]) -> Result<HashSet<[u8; 32]>, StoreError>;
}

/// What a lease of each store is made of.
pub trait LeaseHold: Send + Sync + fmt::Debug {
    /// The session.
    fn session_id(&self) -> &str;
    /// Whether this holder is the first in its process (recovery of a dead writer runs then).
    fn is_fresh(&self) -> bool;
    /// The fencing epoch, where the store has one: it grows at every change of holder.
    fn epoch(&self) -> Option<u64>;
    /// Whether another writer waits for this lease (a holder keeping it between turns then
    /// yields it). A store that cannot tell answers `false`.
    fn is_wanted(&self) -> bool;
    /// The hold itself, for the store that made it to take back ([`SessionStore::yield_lease`]).
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// One writer's hold on a session; released when dropped.
#[derive(Debug)]
pub struct Lease(Box<dyn LeaseHold>);

impl Lease {
    /// A lease made of `hold`.
    pub fn new(hold: impl LeaseHold + 'static) -> Lease {
        Lease(Box::new(hold))
    }

    /// The session.
    pub fn session_id(&self) -> &str {
        self.0.session_id()
    }

    /// Whether this holder is the first in its process.
    pub fn is_fresh(&self) -> bool {
        self.0.is_fresh()
    }

    /// The fencing epoch, where the store has one.
    pub fn epoch(&self) -> Option<u64> {
        self.0.epoch()
    }

    /// Whether another writer waits for this lease.
    pub fn is_wanted(&self) -> bool {
        self.0.is_wanted()
    }

    /// The hold, as the store that made it gave it; `None` (and the lease let go of) when it is
    /// of another type.
    pub fn into_hold<T: 'static>(self) -> Option<T> {
        self.0.into_any().downcast::<T>().ok().map(|hold| *hold)
    }
}
