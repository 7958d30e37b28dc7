//! # clawsmith-checkpoint
//!
//! The persistent half of clawsmith: one SQLite file that holds every session's history (messages,
//! events, todos, pending approvals, artifacts), the journal of side-effecting calls, and the turn
//! checkpoints that make undo safe (K1–K7, the persistence parts of P9–P11, A2, A4 and A8).
//! It is the only crate that speaks SQL.
//!
//! ## Main types
//! - [`Store`]: the database. Sync methods on `&self` over a `Mutex<Connection>`; the async core
//!   calls them on its own worker thread (see *Decisions*). [`Store::open`] /
//!   [`Store::open_in_memory`], each with an injectable [`Clock`] for retention tests.
//! - Sessions and history: [`SessionInfo`], [`Store::append_message`], [`Store::append_event`]
//!   (assigns the per-session, gap-free `sequence` inside the insert transaction),
//!   [`Todo`] lists, [`PendingApproval`]s, [`Store::fork_session`] (K6).
//! - The journal (A8): [`Store::journal_start`] commits *before* the side effect,
//!   [`Store::journal_close`] after it, [`Store::unfinished_calls`] lists what a crash left open.
//! - Artifacts (A4): [`Store::put_artifact`] / [`Store::read_artifact`], scoped to one session.
//! - Checkpoints (K1, K7): [`Store::begin_turn`] records the message count, event sequence and a
//!   todo snapshot; [`CheckpointRecorder`] implements `clawsmith_fs::ChangeRecorder` and keeps the
//!   first prior state per path and turn plus the latest post-operation hash;
//!   [`Store::finish_turn`] returns a [`TurnManifest`] (paths and stats only).
//! - Undo (K2, K7): [`Store::undo`] with an [`UndoScope`] returns an [`UndoReport`];
//!   [`Store::recover_restores`] finishes a restore that a crash interrupted;
//!   [`Store::undone_history`] gives back what session rewinds took out ([`UndoneStretch`]).
//! - Diffs (K4): [`Store::change_list`], [`Store::diff`] → [`FileDiff`].
//! - Contents kept ahead of an unannounced change: [`Store::store_contents`] and
//!   [`Store::stored_content`]. The core puts the files of its workspace manifest here before a
//!   command runs and reads a prior content back when the command changed that file; the change
//!   itself is then recorded through [`CheckpointRecorder`] like a file tool's.
//! - Retention (K5): [`Store::prune`] with a [`RetentionPolicy`] → [`PruneReport`].
//! - The memory index: [`MemoryIndex`], a second SQLite file of FTS5 tables over
//!   chunks of memory files and notes ([`MemoryIndex::replace_source`], [`MemoryIndex::search`]
//!   with typed [`MemoryTerm`]s that are always quoted for FTS5, notes with
//!   [`MemoryIndex::add_note`]). `clawsmith-skills` finds, chunks and presents; the SQL is here.
//! - One writer per session: [`Store::lease_session`] → [`SessionLease`] (or
//!   [`StoreError::SessionInUse`] naming the holder's pid; [`LeaseWait::Wait`] to queue).
//!
//! ## Decisions
//! - **One file, many processes.** WAL journaling, `foreign_keys = ON`, `synchronous = NORMAL` by
//!   default (a journal row or prior state is in the operating system's hands before the side
//!   effect it guards, so it survives a killed process; hosts that need it to survive a power
//!   loss choose [`Durability::Full`] through [`StoreOptions`], at about 10× the cost per call), a
//!   [`BUSY_TIMEOUT`] of 15 s, and every write in a `BEGIN IMMEDIATE` transaction: a writer takes
//!   the lock up front and waits for it, instead of starting as a reader and failing with
//!   "database is locked" when it upgrades. An MCP server and a CLI undo can share the file.
//! - **Few commits, cheap ones, on the caller's thread.** A side-effecting call is two commits:
//!   its start (the batch's assistant message, the journal entry and `tool.started`:
//!   [`Store::start_call`]), durable before the side effect, and its close (journal close,
//!   `tool.completed`, the tool message: [`Store::close_call`]). What guards nothing is
//!   *deferred*: [`Store::defer_call_start`], [`Store::defer_call_close`],
//!   [`Store::defer_turn_start`] and [`Store::defer_message`] queue records that the store's
//!   next commit writes first, in order, in the same transaction (a read, or a dry run, commits
//!   them first; [`Store::flush_deferred`] commits them alone). So a read call's start and
//!   close are one commit after it ran, and a turn of reads finished at once is one commit;
//!   the durable history is always a prefix of what the process did, in order, and a killed
//!   process loses only records that no commit had taken yet. A turn's checkpoint closes with
//!   its `turn.completed` ([`Store::finish_turn_with_event`]). Under
//!   [`Durability::Full`] a commit that guards nothing (a read's start, a turn's start) is not
//!   fsynced on its own; the next fsynced commit covers it (the WAL is written in order). Hot
//!   statements are prepared once per connection and planned once for any bound value
//!   (`SQLITE_DBCONFIG_ENABLE_QPSG`: without it a `MAX(…) WHERE key = ?` statement was re-planned
//!   on every use). Messages and events live in rowid tables whose rowid is their key (schema
//!   V14: the session's `number` shifted left by 32, plus the index or sequence), so a call's
//!   commit writes one b-tree per table and no key-index leaves; a session's rows are one key
//!   range. (As `WITHOUT ROWID` tables every seek past a long row read that row's overflow pages
//!   from the file.) `messages` and `events` remain as writable views of the old shape for
//!   hand-written SQL. A `tool.completed` whose display body is its tool message's text stores
//!   it once.
//!   A commit is tens of microseconds under the default durability, less than a hop to a
//!   blocking thread would cost, so the async core
//!   calls the store directly on its worker; under `Full` each fsync holds that worker for its
//!   duration (the runtime's other workers keep serving). Closing a connection does not fold a
//!   short WAL into the main file (four fsyncs a process): a store's own checkpoint thread
//!   does, from 1,000 frames on, off the writer's path (a WAL hook replaces SQLite's automatic
//!   checkpoint; at 4,000 frames the writer waits for one round so the log starts over), and
//!   [`Store::checkpoint_wal`] does it on demand. A store whose last commit left 128 frames or
//!   more folds the log when it closes (`RESTART`, without waiting for a reader of another
//!   process) and starts it over with a one-frame no-op commit (the file keeps its blocks:
//!   emptying it was a synchronous discard on a file system mounted with `discard`): the next
//!   process to open the file rebuilds its WAL index from every frame of the log, so one-call
//!   processes must not leave a long log behind.
//! - **Forward-only migrations** keyed by `PRAGMA user_version`, applied in one immediate
//!   transaction; a file from a newer build is refused ([`StoreError::SchemaTooNew`]), garbage or
//!   a truncated file is refused with [`StoreError::NotADatabase`] instead of a panic later.
//! - **Content-addressed blobs** (K3): prior contents (and post contents captured at finish, for
//!   diffs) are stored once per SHA-256 and shared by turns, forks and artifacts. Checkpoint rows
//!   only refer to them, so a fork copies metadata, never content. A content over
//!   [`FILE_THRESHOLD`] (64 KiB) is a file beside the database (`<database>-blobs/ab/cdef…`)
//!   instead of row pages: a 1 MB prior content through the WAL (and again into the main file at
//!   the next checkpoint) was most of what the recorder cost an `edit_file`. The file is
//!   written before the commit that names it, and files are written and deleted only under the
//!   write lock, so [`Store::prune`] deletes exactly the files no row names (crash orphans
//!   included); every read verifies the hash.
//! - **Undo is one precheck, then one plan.** Undoing turn T rewinds T and every later turn not
//!   yet undone, newest first. The precheck simulates the rollback over the current files and
//!   requires each path to be exactly what the turn left (post hash, or absent); any conflict
//!   changes nothing and lists every path. User edits made after the agent's are never
//!   overwritten, and a file changed by another fork is refused the same way (K6).
//! - **Crash-safe restore.** The final action per path is committed as a restore-plan row
//!   *before* any file is touched; files are replaced atomically through the workspace handle
//!   (temp file + rename in `clawsmith-fs`), so each is either before or after. The session rewind,
//!   the "undone" flags and the plan's deletion commit together. A plan left by `kill -9` is rolled
//!   forward by [`Store::recover_restores`], which skips paths already restored and leaves alone
//!   (and reports) paths someone changed since. Until then, undo in that session is refused with
//!   [`StoreError::RestoreInProgress`] and blob GC pauses.
//! - **History is kept.** Undo flags checkpoints (`files_undone`, `session_undone`, state
//!   `undone`) rather than deleting them, so the change list still shows what happened; undoing an
//!   undone turn answers [`UndoOutcome::AlreadyUndone`].
//! - **Secrets never reach the disk, and neither do other users.** Every message, event, journal
//!   argument, approval request and artifact is masked with the one detector
//!   (`clawsmith_protocol::redact`, the same that masks displays) *before* it is written; the
//!   live result a caller gets back is untouched, so the model still reads what the tool
//!   returned. Stored call arguments are bounded ([`MAX_STORED_ARGUMENT_BYTES`]). The legacy
//!   `output` of `tool.completed` is not stored beside the tool message that holds the same text;
//!   [`Store::events`] derives it. Checkpoint blobs keep exact bytes (undo needs them): the
//!   database is created 0600 (SQLite gives its `-wal` and `-shm` the same mode), blob files
//!   0600 in 0700 directories, and none is opened through a symlink (`O_NOFOLLOW`,
//!   `SQLITE_OPEN_NOFOLLOW`).
//! - **One writer per session.** A writer takes the session's lease first: an OS file lock
//!   (`flock`) on `locks/<sha256(id)>.lock` beside the database, with the holder's pid written in
//!   it for the error message. The kernel releases it when the holder dies, however it dies, so
//!   whoever holds it knows every call left open belongs to a dead process: that is what makes
//!   crash recovery safe to run. Inside one process the lease is shared and marked not *fresh*
//!   (the owner of any open call is alive: it is this process). A second writer announces that
//!   it waits (a shared lock on `locks/<…>.wait`), so a host keeping its lease between turns
//!   (the MCP server) yields it ([`SessionLease::is_wanted`], [`Store::yield_lease`]); one that
//!   would fail waits up to [`LINGERING_HOLDER`] first. Restore plans are rolled forward
//!   per session ([`Store::recover_session_restores`]), so a plan of a live undo in another
//!   session is never touched.
//! - **Refusals are data.** Conflicts and already-undone turns are [`UndoOutcome`] values; `Err`
//!   means the store or the workspace broke.
//!
//! ## What it does not do
//! It never opens a workspace path itself: every read, hash, write and delete of a restore goes
//! through `clawsmith_fs::Workspace`. It does not run tools, decide permissions, or turn unfinished
//! journal entries into `tool.completed` events (the core does that on recovery, A8). Only files and symlinks (a link's
//! target stored as its content, its mode `clawsmith_fs::SYMLINK_MODE`) are checkpointed: a
//! directory is removed by undo only when it is the parent of a file the turn created, empty
//! now and born during the turn (`statx` birth time; a file system without one keeps it). A write whose post state was
//! never recorded (the process died between the write and `after_change`) makes that one path a
//! conflict: undo refuses to guess what the tool wrote. Pruning frees pages inside the SQLite file
//! for reuse; it does not `VACUUM` the file smaller.

mod artifact;
mod at_rest;
mod blob;
mod checkpoint;
mod content;
mod diff;
mod error;
mod journal;
mod lease;
mod memory;
mod recorder;
pub mod repository;
pub mod restore;
mod retention;
mod schema;
mod session;
mod store;
mod undo;
mod undo_preview;

pub use at_rest::{
    MAX_STORED_ARGUMENT_BYTES, stored_arguments, stored_event_json, stored_message_json,
    stored_request_json,
};
pub use blob::{BLOB_DIR_SUFFIX, FILE_THRESHOLD, hash_hex, line_count, sha256};
pub use checkpoint::{
    ChangeKind, CheckpointInfo, CheckpointState, FileChange, TurnManifest, line_stats,
};
pub use content::{InterruptedCapture, UncapturedChange};
pub use diff::{DIFF_SIDE_MAX_BYTES, DiffSide, FileDiff, file_diff};
pub use error::StoreError;
pub use journal::{JournalEntry, JournalStart};
pub use lease::{LINGERING_HOLDER, LOCK_DIR, LeaseWait, SessionLease};
pub use memory::{
    HEADING_WEIGHT, IndexedSource, MEMORY_SCHEMA_VERSION, MemoryChunk, MemoryHit, MemoryIndex,
    MemoryNote, MemoryQuery, MemoryScope, MemorySourceKey, MemoryTerm, TRIGRAM_FACTOR,
};
pub use recorder::{CheckpointRecorder, RecordTarget};
pub use repository::{
    REPOSITORY_DIR, REPOSITORY_FILE_LIMIT, REPOSITORY_FILES_MAX, REPOSITORY_MIRROR_SUFFIX,
    RepositorySnapshot, RepositoryUndo,
};
pub use retention::{PruneReport, RetentionPolicy};
pub use schema::SCHEMA_VERSION;
pub use session::{
    OpenedTurn, PendingApproval, SessionInfo, Todo, TodoStatus, TurnOpening, validate_todos,
};
pub use store::{
    BUSY_TIMEOUT, Clock, DeferredEvent, Durability, Store, StoreOptions, system_clock,
};
pub use undo::{
    PendingRestore, RecoveredRestore, UndoConflict, UndoOutcome, UndoReport, UndoScope,
    UndoneStretch,
};
pub use undo_preview::UndoPreview;
