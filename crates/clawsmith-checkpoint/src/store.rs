//! Opening the database: pragmas, schema check, migrations, and the transaction helpers every
//! other module goes through.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawsmith_protocol::Event;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{SqlContext, StoreError};
use crate::schema::{MIGRATIONS, SCHEMA_VERSION};

/// How long a writer waits for another process's write transaction before failing. Long enough
/// that an MCP server and a CLI undo sharing one file never see "database is locked" under
/// normal contention; a failure after this long means something is stuck.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// Prepared statements kept per connection (every statement of a call's path fits).
const STATEMENT_CACHE: usize = 64;

/// Milliseconds since the Unix epoch. Injected so retention can be tested without waiting.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    })
}

/// How hard a commit works to survive a power loss.
///
/// The default is [`Durability::Normal`]: in WAL mode every commit is in the operating system's
/// hands before it returns, so a journal row or a prior state is there before the side effect it
/// guards even when the process is killed (`kill -9`: the soak test proves it). A power loss may
/// roll back the last commits — exactly as it may the workspace files, which `clawsmith-fs`
/// writes atomically but without `fsync`. Fsyncing every commit cost about 10× per tool call on
/// the machines measured (`docs/benchmarks.md`), so it is the host's choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous = FULL`: every commit is fsynced before it returns, so a journal row or a
    /// prior state is on disk before the side effect it guards, even across a power loss.
    Full,
    /// `synchronous = NORMAL`: commits survive a killed process; the last ones may roll back on
    /// power loss.
    #[default]
    Normal,
}

/// Options of [`Store::open_with`].
#[derive(Clone)]
pub struct StoreOptions {
    /// The clock stamping rows (retention compares against it).
    pub clock: Clock,
    /// Commit durability.
    pub durability: Durability,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            clock: system_clock(),
            durability: Durability::default(),
        }
    }
}

impl std::fmt::Debug for StoreOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StoreOptions")
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// The session store: one SQLite file shared by every process of one user.
///
/// All methods are synchronous and take `&self`; the connection sits behind a mutex. The async
/// core calls them on its worker thread: a commit takes tens of microseconds under the default
/// durability (a hop to a blocking thread would cost more), an fsync under [`Durability::Full`]
/// holds that worker while it lasts. Writes run in `BEGIN IMMEDIATE` transactions, so concurrent
/// writers (threads with their own `Store`, or other processes) queue on SQLite's lock for up to
/// [`BUSY_TIMEOUT`] instead of failing half-way.
pub struct Store {
    connection: Mutex<Connection>,
    path: Option<PathBuf>,
    clock: Clock,
    /// Distinguishes in-memory stores in the process's lease table.
    instance_id: u64,
    /// Whether [`Store::lease_session`] waits for another holder.
    lease_wait: AtomicBool,
    /// The commit durability the connection was opened with.
    durability: Durability,
    /// Records held back until the next commit of this store ([`Store::defer_call_start`] and
    /// its kin), in the order they were deferred.
    deferred: Mutex<Vec<Deferred>>,
    /// Folds the write-ahead log into the main file off the writer's path (file stores only).
    checkpointer: Option<Arc<Checkpointer>>,
}

/// A record whose write waits for the next commit of the store: every write transaction (and a
/// read, which first commits them alone) writes the records deferred before it, in order and in
/// the same commit, ahead of its own. So the durable history is always a prefix of what the
/// process did, in the order it did it: deferring delays a record, never reorders it.
// Most records are events; boxing them would cost an allocation each for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Deferred {
    /// A turn's checkpoint opens ([`crate::checkpoint::begin_turn_in`]) at `at_ms`.
    BeginTurn {
        session_id: String,
        turn_id: String,
        at_ms: u64,
    },
    /// A message, as its stored JSON.
    Message { session_id: String, json: String },
    /// An event (its sequence is the session's next when it is written). With `result`, the
    /// tool message it completes (stored JSON and text) is written just before it and linked
    /// to it, as [`Store::close_call`] does.
    Event {
        event: Event,
        result: Option<(String, String)>,
        stored: Arc<OnceLock<Event>>,
    },
}

/// An event whose write was deferred to a later commit ([`Store::defer_call_start`]): what it
/// became (its sequence) once that commit is done.
#[derive(Debug, Clone)]
pub struct DeferredEvent(Arc<OnceLock<Event>>);

impl DeferredEvent {
    /// An event whose write waits for a later commit: the store sets `stored` once that commit
    /// is done.
    pub fn new(stored: Arc<OnceLock<Event>>) -> DeferredEvent {
        DeferredEvent(stored)
    }

    /// The event as stored, `None` while no commit has written it.
    pub fn stored(&self) -> Option<&Event> {
        self.0.get()
    }
}

/// Numbers the stores of this process.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

impl std::fmt::Debug for Store {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed, mode 0600) the database at `path` and migrates it to
    /// [`SCHEMA_VERSION`]. A file that is not an SQLite database fails with
    /// [`StoreError::NotADatabase`]; a symlink at `path` is refused ([`StoreError::Open`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with_clock(path, system_clock())
    }

    /// [`Store::open`] with an injected clock.
    pub fn open_with_clock(path: impl AsRef<Path>, clock: Clock) -> Result<Store, StoreError> {
        Store::open_with(
            path,
            StoreOptions {
                clock,
                ..StoreOptions::default()
            },
        )
    }

    /// [`Store::open`] with explicit options.
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store, StoreError> {
        let StoreOptions { clock, durability } = options;
        let path = path.as_ref();
        let shown = path.display().to_string();
        let connection = open_private_database(path, &shown)?;
        let mut connection = prepare(connection, &shown, true, durability)?;
        let checkpointer = Checkpointer::install(&mut connection, path)
            .map_err(|error| classify(&shown, error))?;
        Ok(Store {
            connection: Mutex::new(connection),
            path: Some(path.to_path_buf()),
            clock,
            instance_id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            lease_wait: AtomicBool::new(false),
            durability,
            deferred: Mutex::new(Vec::new()),
            checkpointer: Some(checkpointer),
        })
    }

    /// A private in-memory database (tests, throwaway sessions).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        Store::open_in_memory_with_clock(system_clock())
    }

    /// [`Store::open_in_memory`] with an injected clock.
    pub fn open_in_memory_with_clock(clock: Clock) -> Result<Store, StoreError> {
        let connection =
            Connection::open_in_memory().map_err(|error| classify(":memory:", error))?;
        let connection = prepare(connection, ":memory:", false, Durability::Full)?;
        Ok(Store {
            connection: Mutex::new(connection),
            path: None,
            clock,
            instance_id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            lease_wait: AtomicBool::new(false),
            durability: Durability::Full,
            deferred: Mutex::new(Vec::new()),
            checkpointer: None,
        })
    }

    /// The database file, `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Whether [`Store::lease_session`] fails at once (the default) or waits when another
    /// process holds the session.
    pub fn set_lease_wait(&self, wait: crate::LeaseWait) {
        self.lease_wait
            .store(wait == crate::LeaseWait::Wait, Ordering::Relaxed);
    }

    pub(crate) fn lease_wait(&self) -> crate::LeaseWait {
        if self.lease_wait.load(Ordering::Relaxed) {
            crate::LeaseWait::Wait
        } else {
            crate::LeaseWait::Fail
        }
    }

    pub(crate) fn instance_id(&self) -> u64 {
        self.instance_id
    }

    /// Whether commits are fsynced ([`Durability::Full`]): blob files beside the database are
    /// then fsynced before the commit that names them (`blob.rs`).
    pub(crate) fn fsyncs(&self) -> bool {
        self.durability == Durability::Full
    }

    /// Now, by the store's clock (ms since the epoch).
    pub fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// Locks the connection. A poisoned lock is taken over: the panicking thread's transaction
    /// was rolled back when it unwound, so the connection is consistent.
    pub(crate) fn connection(&self) -> MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction and commits it if `body` succeeds.
    pub(crate) fn write<T>(
        &self,
        context: &'static str,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        commit_one(&mut self.connection(), &self.deferred, context, body)
    }

    /// Queues `record` for the next commit ([`Deferred`]).
    pub(crate) fn defer(&self, records: impl IntoIterator<Item = Deferred>) {
        self.deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(records);
    }

    /// Whether records wait for a commit ([`Store::flush_deferred`]).
    pub fn has_deferred(&self) -> bool {
        !self
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// Commits the deferred records now, alone (nothing when none wait). They guard no side
    /// effect, so under [`Durability::Full`] this commit is not fsynced on its own: the next
    /// fsynced commit covers it (the WAL is written in order).
    pub fn flush_deferred(&self) -> Result<(), StoreError> {
        if !self.has_deferred() {
            return Ok(());
        }
        self.write_unsynced("writing deferred records", |_| Ok(()))
    }

    /// Folds the write-ahead log into the main database file and empties it
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), waiting for readers up to [`BUSY_TIMEOUT`]. The store
    /// never needs it (the log is folded as it grows, and started over by a close that leaves it long),
    /// but a copy or an inspection of the main file alone sees every commit only after it.
    /// In memory it does nothing.
    pub fn checkpoint_wal(&self) -> Result<(), StoreError> {
        if self.path.is_none() {
            return Ok(());
        }
        let connection = self.connection();
        let busy: i64 = connection
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .ctx("checkpointing the write-ahead log")?;
        if busy != 0 {
            return Err(StoreError::Sqlite {
                context: "checkpointing the write-ahead log",
                cause: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some("a reader kept the log from being folded in".to_string()),
                ),
            });
        }
        Ok(())
    }

    /// [`Store::write`] for a commit that guards no side effect (a read-only call's start, a
    /// turn's start): under [`Durability::Full`] it is not fsynced on its own but rides on the
    /// next fsynced commit (the WAL is one file written in order, so that fsync covers it). A
    /// power loss before then loses it together with everything after it, never alone; a
    /// killed process loses nothing. Under [`Durability::Normal`] it is [`Store::write`].
    pub(crate) fn write_unsynced<T>(
        &self,
        context: &'static str,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.durability == Durability::Normal || self.path.is_none() {
            return self.write(context, body);
        }
        let mut connection = self.connection();
        connection
            .execute_batch("PRAGMA synchronous = NORMAL")
            .ctx(context)?;
        let result = commit_one(&mut connection, &self.deferred, context, body);
        // Back to fsyncing every commit whatever happened; a connection that cannot is unusable.
        connection
            .execute_batch("PRAGMA synchronous = FULL")
            .ctx(context)?;
        result
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction that is always rolled back (dry runs).
    pub(crate) fn write_rolled_back<T>(
        &self,
        context: &'static str,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection();
        // A dry run answers for what this process did: deferred records are committed first.
        if self.has_deferred() {
            commit_one(&mut connection, &self.deferred, context, |_| Ok(()))?;
        }
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx(context)?;
        let value = body(&transaction)?;
        transaction.rollback().ctx(context)?;
        Ok(value)
    }

    /// Runs `body` in a read transaction (one consistent snapshot).
    pub(crate) fn read<T>(
        &self,
        context: &'static str,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut connection = self.connection();
        // A read sees what this process did: records still deferred are committed first.
        if self.has_deferred() {
            commit_one(&mut connection, &self.deferred, context, |_| Ok(()))?;
        }
        read_one(&mut connection, context, body)
    }

    /// [`Store::read`] of what no deferred record can change (the journal: a journal entry is
    /// never deferred), so records still deferred stay so.
    pub(crate) fn read_committed<T>(
        &self,
        context: &'static str,
        body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        read_one(&mut self.connection(), context, body)
    }
}

impl Drop for Store {
    /// Waits for a background checkpoint in progress (it holds its own connection to the file),
    /// then folds a log of 128 frames or more that its last commit left and starts it over.
    fn drop(&mut self) {
        let connection = self
            .connection
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        close_log(self.checkpointer.as_deref(), connection);
    }
}

impl Store {
    /// Closes the store for a process that exits next (`clawsmith call`): the log is
    /// left as dropping the store leaves it (a background checkpoint waited for, a long log
    /// folded and started over), but the connection itself is never closed — the exit releases
    /// its descriptors and locks, which is all that closing a connection does to the files here
    /// (`NO_CKPT_ON_CLOSE`: no checkpoint, nothing deleted). What closing also did, freeing the
    /// parsed schema, the page cache and the cached statements, was ~2% of a one-call process's
    /// processor time for memory the exit returns anyway. Records still deferred are not
    /// written (as at a drop). The store stays in memory until the exit, even when other owners
    /// of `self`'s clones drop theirs; nothing must use it afterwards.
    pub fn leave_to_exit(self: Arc<Store>) {
        close_log(self.checkpointer.as_deref(), &mut self.connection());
        std::mem::forget(self);
    }
}

/// What closing a store does to its files: ends the checkpoint thread (waiting for a round in
/// progress), then folds and starts over a log of [`CLOSE_CHECKPOINT_FRAMES`] or more.
fn close_log(checkpointer: Option<&Checkpointer>, connection: &mut Connection) {
    if let Some(checkpointer) = checkpointer {
        checkpointer.stop();
        if checkpointer.fold_at_close() {
            // Without waiting: another process reading or writing keeps its log (busy), to be
            // folded by a later close or writer; every commit stands in the log either way.
            let _ = connection.busy_timeout(Duration::ZERO);
            restart_log_at_close(connection);
        }
    }
}

/// Folds every frame of the log into the main file and starts the log over, so that the next
/// process to open the database — which rebuilds its WAL index by reading the log up to the first
/// frame that does not belong to it — reads a frame or two instead of hundreds.
///
/// A passive checkpoint is not enough: what it folded is recorded only in the WAL index, which
/// the next process rebuilds from the log, and the rebuild counts nothing as folded, so the log
/// would never start over. `TRUNCATE` empties the file, but on a file system mounted with
/// `discard` (the bench machine's ext4) freeing the log's blocks is a synchronous discard: ~12 ms
/// of a ~23 ms close for a log of 500 frames. So: `RESTART` (every frame folded, the fsyncs of the
/// log and the main file as before, no reader left on the log, the file kept), then a no-op commit
/// (the schema version written over itself, only if it is still this build's) whose frame goes at
/// the start of the log under a new salt — SQLite's own restart, with its fsync of the log's header
/// that the next writer would otherwise pay; the old frames after it no longer count. The commit
/// changes nothing a crash could lose, so it is not fsynced beyond that header.
fn restart_log_at_close(connection: &mut Connection) {
    let folded = connection.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::RESTART);
    if !matches!(folded, Ok((log, done)) if log > 0 && log == done) {
        return;
    }
    let _ = connection.execute_batch("PRAGMA synchronous = NORMAL");
    let Ok(transaction) = connection.transaction_with_behavior(TransactionBehavior::Immediate)
    else {
        return;
    };
    let version = transaction.pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0));
    if version == Ok(SCHEMA_VERSION)
        && transaction
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .is_ok()
    {
        let _ = transaction.commit();
    }
}

/// Frames of the log left by this store's last commit from which closing the store folds it
/// and starts it over. The connection's own checkpoint on
/// close is off (four fsyncs, half of a one-call process), but a log left behind is not free
/// either: the next process to open the database is the first to map its WAL index and rebuilds
/// it by reading and checksumming every frame of the log — the processor time of a `clawsmith
/// call` grew by ~2.3 µs a frame of the log it found (measured under a load of 3: ~10 ms at
/// 0–500 frames, ~19 ms at 3,000–4,000), and a row of one-call processes (~20 frames each) let
/// the log reach the writer's bound of [`INLINE_CHECKPOINT_FRAMES`] before anything folded it,
/// since their checkpoint thread is stopped before its first round (and a passive checkpoint's
/// work is forgotten by the rebuild). A fold's cost is mostly the fsync of the log, which grows
/// with the frames it writes out (~2 ms of a ~3.3 ms fold at 500 frames), so folding more often
/// costs a row of calls little more, while every call's rebuild shrinks with the threshold: a
/// row of 150 one-call reads (13 frames each) averaged 3.48 ms a call at 500 frames, 3.38 at
/// 250 and 3.04–3.07 from 60 to 150 (2026-12-04, alternated); 128 sits in that flat part (a fold
/// every ~10 such calls, a rebuild of ~65 frames on average).
pub(crate) const CLOSE_CHECKPOINT_FRAMES: u32 = 128;

/// Frames in the write-ahead log from which a commit asks for a checkpoint: SQLite's own
/// automatic checkpoint size (`wal_autocheckpoint`), which the store's hook replaces.
pub(crate) const CHECKPOINT_FRAMES: u32 = 1000;

/// Frames the log may hold before the writer checkpoints itself, in its commit, as SQLite's
/// automatic checkpoint did at [`CHECKPOINT_FRAMES`]. While writes continue, the background
/// checkpoint folds all but the frames written during its own run, and SQLite starts the log
/// over only when every frame is folded (the next write transaction then writes from the
/// start); so under a steady stream of commits the log is reset by this inline checkpoint of
/// the short tail, once per this many frames instead of once per [`CHECKPOINT_FRAMES`].
/// Bounded so a process starting on a log left behind rebuilds a bounded WAL index.
pub(crate) const INLINE_CHECKPOINT_FRAMES: u32 = 4 * CHECKPOINT_FRAMES;

/// Frames written since the last background checkpoint that make the next one worth its two
/// fsyncs (the log's, then the main file's). A round copies each page the log holds once, however
/// many frames of it the batch has: the pages every commit rewrites (page 1, the tables' parents,
/// the events and index leaves) are copied once a round, so fewer, larger rounds copy them
/// less often (at a whole [`CHECKPOINT_FRAMES`] rather than a quarter of it, the checkpoint
/// thread's processor time per MCP `read_file` call is ~25% lower). The log's bound,
/// [`INLINE_CHECKPOINT_FRAMES`], is unchanged.
const CHECKPOINT_BATCH_FRAMES: u32 = CHECKPOINT_FRAMES;

/// How long the writer must pause before the thread folds a tail shorter than a batch.
const TAIL_WAIT: Duration = Duration::from_millis(50);

/// Folds the write-ahead log into the main database file on a thread of its own.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses 1,000 frames: it copies
/// every page the log holds into the main file and fsyncs the log and the file (~3 ms each on
/// the disks measured), so one call in ~100 waited for it; in the pipeline pair that was a
/// third of the wall time. The store installs a WAL hook in its place (`sqlite3_wal_hook`, called
/// after each commit with the log's length): from [`CHECKPOINT_FRAMES`] on it wakes this thread,
/// which runs a `PASSIVE` checkpoint on its own connection — concurrently with the writer, which
/// goes on appending to the log. Durability is unchanged: a commit is durable (or not) when it
/// is in the log, whoever folds it later, and a checkpoint interrupted by a crash is redone from
/// the log on the next open. The thread starts on the first checkpoint a store needs (a
/// one-call process never starts it); if it cannot start or its connection cannot open, the
/// writer checkpoints inline as SQLite did.
pub(crate) struct Checkpointer {
    path: PathBuf,
    state: Mutex<CheckpointerState>,
    /// Signalled when a round is requested or the store closes.
    wake: std::sync::Condvar,
    /// Signalled when a round ends (or the thread gives up).
    done: std::sync::Condvar,
}

#[derive(Default)]
struct CheckpointerState {
    /// A commit asked for a checkpoint that has not started yet.
    requested: bool,
    /// The store is closing: the thread ends.
    stopping: bool,
    /// The thread could not start or open its connection: the writer checkpoints inline.
    failed: bool,
    /// The frames the last background checkpoint saw in the log (0: none ran since the log
    /// was started over).
    folded_log: u32,
    /// A background checkpoint is running.
    running: bool,
    /// Background checkpoints run (tests).
    rounds: u64,
    /// The log's length after the last commit (tests).
    last_frames: u32,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a commit's hook does with the log's length.
#[derive(Debug, PartialEq, Eq)]
enum AfterCommit {
    /// Nothing to do, or the thread was woken.
    Nothing,
    /// The writer checkpoints in its commit.
    Inline,
}

impl Checkpointer {
    /// Installs the hook on `connection` (the store's writer) for the database at `path`.
    fn install(connection: &mut Connection, path: &Path) -> rusqlite::Result<Arc<Checkpointer>> {
        let checkpointer = Arc::new(Checkpointer {
            path: path.to_path_buf(),
            state: Mutex::new(CheckpointerState::default()),
            wake: std::sync::Condvar::new(),
            done: std::sync::Condvar::new(),
        });
        let hooked = Arc::clone(&checkpointer);
        connection.wal_hook(Some(
            move |wal: &mut rusqlite::hooks::Wal, frames: std::ffi::c_int| {
                let frames = u32::try_from(frames).unwrap_or(0);
                if hooked.after_commit(frames) == AfterCommit::Inline {
                    // As SQLite's automatic checkpoint: a busy or failed checkpoint is retried
                    // by a later commit, and the commit itself stands.
                    let _ = wal.checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE);
                }
                Ok(())
            },
        ))?;
        Ok(checkpointer)
    }

    fn lock(&self) -> MutexGuard<'_, CheckpointerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides, after a commit that left `frames` in the log, who checkpoints; wakes (and on
    /// first use starts) the thread when it is the background's turn.
    fn after_commit(self: &Arc<Self>, frames: u32) -> AfterCommit {
        let mut state = self.lock();
        state.last_frames = frames;
        if frames < state.folded_log {
            // The log was started over since the last background checkpoint.
            state.folded_log = 0;
        }
        if frames < CHECKPOINT_FRAMES {
            return AfterCommit::Nothing;
        }
        let bound = frames >= INLINE_CHECKPOINT_FRAMES;
        if !bound
            && (state.requested
                || state.running
                || frames - state.folded_log.min(frames) < CHECKPOINT_BATCH_FRAMES)
        {
            return AfterCommit::Nothing;
        }
        if state.failed {
            return AfterCommit::Inline;
        }
        if state.thread.is_none() {
            let worker = Arc::clone(self);
            match std::thread::Builder::new()
                .name("clawsmith-wal-checkpoint".to_owned())
                .spawn(move || worker.run())
            {
                Ok(handle) => state.thread = Some(handle),
                Err(_) => {
                    state.failed = true;
                    return AfterCommit::Inline;
                }
            }
        }
        // At the bound the writer waits for a round that starts after this commit: with this
        // process's writes held (the caller holds the store's connection), it folds every
        // frame, and the next write starts the log over. One wait per `INLINE_CHECKPOINT_FRAMES`.
        let target = state.rounds + if state.running { 2 } else { 1 };
        state.requested = true;
        self.wake.notify_all();
        if bound {
            while state.rounds < target && !state.failed && !state.stopping {
                state = self
                    .done
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.failed {
                return AfterCommit::Inline;
            }
        }
        AfterCommit::Nothing
    }

    /// The thread: one `PASSIVE` checkpoint per request until the store closes.
    fn run(self: Arc<Self>) {
        // This crate is the one place that speaks SQL (clippy.toml).
        #[allow(clippy::disallowed_methods)]
        let connection = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .and_then(|connection| {
            // Its close must not fold and delete the log under the writer's feet.
            connection.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
            // A connection opens the log on its first read; until then a checkpoint finds no
            // log to fold (it reports -1 frames).
            connection.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
                row.get::<_, i64>(0)
            })?;
            Ok(connection)
        });
        let Ok(connection) = connection else {
            self.lock().failed = true;
            self.done.notify_all();
            return;
        };
        loop {
            {
                let mut state = self.lock();
                while !state.requested && !state.stopping {
                    let seen = state.last_frames;
                    if seen < CHECKPOINT_FRAMES || seen <= state.folded_log {
                        state = self
                            .wake
                            .wait(state)
                            .unwrap_or_else(PoisonError::into_inner);
                        continue;
                    }
                    // A tail shorter than a batch is left: folded once the writer pauses (no
                    // commit for `TAIL_WAIT`), so the next write after a pause starts the log
                    // over; while commits go on, the next batch asks for a round.
                    let (next, waited) = self
                        .wake
                        .wait_timeout(state, TAIL_WAIT)
                        .unwrap_or_else(PoisonError::into_inner);
                    state = next;
                    if waited.timed_out() && state.last_frames == seen {
                        state.requested = true;
                    }
                }
                if state.stopping {
                    return;
                }
                state.requested = false;
                state.running = true;
            }
            let folded =
                connection.wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE);
            let mut state = self.lock();
            state.rounds += 1;
            state.running = false;
            if let Ok((log, _)) = folded {
                // -1: the log could not be read; the writer's own checkpoint is the fallback.
                match u32::try_from(log) {
                    Ok(log) => state.folded_log = log,
                    Err(_) => state.failed = true,
                }
            }
            // A batch committed while it ran: the next round at once.
            if !state.failed && state.last_frames >= state.folded_log + CHECKPOINT_BATCH_FRAMES {
                state.requested = true;
            }
            drop(state);
            self.done.notify_all();
        }
    }

    /// Whether the log this store's last commit left holds [`CLOSE_CHECKPOINT_FRAMES`] or more
    /// frames — folded by the thread or not: the next process rebuilds its index from all of
    /// them either way.
    fn fold_at_close(&self) -> bool {
        self.lock().last_frames >= CLOSE_CHECKPOINT_FRAMES
    }

    /// Ends the thread, waiting for a checkpoint in progress.
    fn stop(&self) {
        let thread = {
            let mut state = self.lock();
            state.stopping = true;
            state.thread.take()
        };
        self.wake.notify_one();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Store {
    /// Background checkpoints run so far, the log's length after the last commit, and whether
    /// the thread is idle with every frame of the log folded (tests).
    #[cfg(test)]
    pub(crate) fn checkpoint_status(&self) -> (u64, u32, bool) {
        self.checkpointer
            .as_ref()
            .map_or((0, 0, true), |checkpointer| {
                let state = checkpointer.lock();
                let settled =
                    !state.requested && !state.running && state.folded_log >= state.last_frames;
                (state.rounds, state.last_frames, settled)
            })
    }
}

/// Runs `body` in a read transaction on `connection`.
fn read_one<T>(
    connection: &mut Connection,
    context: &'static str,
    body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .ctx(context)?;
    let value = body(&transaction)?;
    transaction.commit().ctx(context)?;
    Ok(value)
}

/// Runs `body` in a `BEGIN IMMEDIATE` transaction on `connection` and commits it if `body`
/// succeeds (rolled back otherwise). The records `deferred` holds are written first, in the
/// same transaction; if it does not commit they stay deferred, ahead of any deferred meanwhile.
fn commit_one<T>(
    connection: &mut Connection,
    deferred: &Mutex<Vec<Deferred>>,
    context: &'static str,
    body: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .ctx(context)?;
    let mut records = std::mem::take(&mut *deferred.lock().unwrap_or_else(PoisonError::into_inner));
    let committed = write_deferred(&transaction, &mut records)
        .and_then(|()| body(&transaction))
        .and_then(|value| commit(transaction).ctx(context).map(|()| value));
    match committed {
        Ok(value) => {
            for record in records {
                if let Deferred::Event { event, stored, .. } = record {
                    // Set once: a record is written by exactly one commit.
                    let _ = stored.set(event);
                }
            }
            Ok(value)
        }
        Err(error) => {
            if !records.is_empty() {
                let mut queue = deferred.lock().unwrap_or_else(PoisonError::into_inner);
                records.append(&mut queue);
                *queue = records;
            }
            Err(error)
        }
    }
}

/// Commits `transaction` with a cached `COMMIT` statement: rusqlite's own commit
/// parses the statement again at every commit. A commit that fails leaves the transaction open,
/// and dropping it rolls it back, as rusqlite's commit does.
fn commit(transaction: Transaction<'_>) -> rusqlite::Result<()> {
    transaction.prepare_cached("COMMIT")?.execute([])?;
    // Now in autocommit mode: the drop finds nothing to roll back.
    drop(transaction);
    Ok(())
}

/// Writes deferred records in order inside `tx` (sequences and message indices assigned now).
/// `commit_one` calls it first in every write transaction, even with no records: it forgets the
/// session tail an earlier transaction left, and leaves its own for the transaction's body
/// ([`crate::session::Tail::taken_or_of`]: the body's records then do not look up what these
/// just wrote).
fn write_deferred(tx: &Transaction<'_>, records: &mut [Deferred]) -> Result<(), StoreError> {
    crate::session::Tail::forget_left();
    // Records of the session written last do not look it up again, nor its next message index
    // and event sequence (a read's deferred start is its batch's message and its
    // `tool.started`: one lookup each, not two). Nothing written here removes a session.
    let mut tail: Option<crate::session::Tail> = None;
    for record in records {
        match record {
            Deferred::BeginTurn {
                session_id,
                turn_id,
                at_ms,
            } => {
                // Reads the message count and sequence (kept in the tail for the records
                // after it); writes neither.
                let tail = crate::session::Tail::in_slot(&mut tail, tx, session_id)?;
                crate::checkpoint::begin_turn_at_tail(tx, tail, turn_id, *at_ms)?;
            }
            Deferred::Message { session_id, json } => {
                crate::session::Tail::in_slot(&mut tail, tx, session_id)?
                    .insert_message(tx, json)?;
            }
            Deferred::Event { event, result, .. } => {
                let tail = crate::session::Tail::in_slot(&mut tail, tx, &event.session_id)?;
                let output = match result {
                    Some((json, content)) => {
                        Some((tail.insert_message(tx, json)?, content.as_str()))
                    }
                    None => None,
                };
                tail.write_event(tx, event, output)?;
            }
        }
    }
    if let Some(tail) = tail {
        tail.leave(tx);
    }
    Ok(())
}

/// Sets the pragmas, proves the file is a database, and migrates.
fn prepare(
    mut connection: Connection,
    shown: &str,
    wal: bool,
    durability: Durability,
) -> Result<Connection, StoreError> {
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(|error| classify(shown, error))?;
    // The hot statements (one message, one event, one journal row per call) are parsed once per
    // connection, not once per call: parsing was about a tenth of a short process's time.
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Cached statements must stay compiled. SQLite marks a statement "re-prepare when this
    // parameter is re-bound" when the bound value might change the plan (`MAX(x) … WHERE k = ?`
    // does); rusqlite clears the bindings when a statement goes back to the cache, so every
    // use re-parsed and re-planned it (`sqlite3Reprepare`, 7.8% of the pipeline's samples). The
    // query-planner stability guarantee plans once for any value; every query here is shaped
    // for its index and needs no value-dependent plan.
    connection
        .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(|error| classify(shown, error))?;
    // `PRAGMA foreign_keys = ON` without a statement to parse (each statement a
    // one-call process prepares is parsed once, ~10% of its processor time in all).
    connection
        .set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_FKEY, true)
        .map_err(|error| classify(shown, error))?;
    if wal {
        // Closing the last connection would fold the WAL into the main file: four fsyncs, about
        // half of a one-call process's time here. Commits are already in the WAL (fsynced under
        // `Full`), so they survive without it; the next writer's checkpoint thread (from 1,000
        // frames, `Checkpointer`) folds them in, and readers read through the WAL meanwhile.
        connection
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(|error| classify(shown, error))?;
    }
    // Switching a brand-new file to WAL needs an exclusive lock, and SQLite does not call the
    // busy handler when waiting could deadlock; several processes opening a fresh file at once
    // then see SQLITE_BUSY right away. Every step below is idempotent, so retry the whole
    // sequence until the busy timeout.
    let started = std::time::Instant::now();
    let mut attempt: u64 = 0;
    loop {
        match prepare_once(&mut connection, shown, wal, durability) {
            Err(StoreError::Sqlite { cause, .. })
                if is_busy(&cause) && started.elapsed() < BUSY_TIMEOUT =>
            {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(2 + (attempt * 7) % 23));
            }
            Err(error) => return Err(error),
            Ok(()) => return Ok(connection),
        }
    }
}

pub(crate) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn prepare_once(
    connection: &mut Connection,
    shown: &str,
    wal: bool,
    durability: Durability,
) -> Result<(), StoreError> {
    // Reading the version in the file's header is the first access to the file: garbage fails
    // here with NOTADB. Only a file at another version takes the write lock to migrate (the
    // version is read again inside).
    let version: i64 = connection
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|error| classify(shown, error))?;
    if wal {
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|error| classify(shown, error))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Open {
                path: shown.to_string(),
                message: format!("cannot switch to WAL journaling (got {mode})"),
            });
        }
    }
    connection
        .execute_batch(match durability {
            Durability::Full => "PRAGMA synchronous = FULL",
            Durability::Normal => "PRAGMA synchronous = NORMAL",
        })
        .map_err(|error| classify(shown, error))?;
    if version != SCHEMA_VERSION {
        migrate(connection, shown, SCHEMA_VERSION)?;
    }
    // Parse the schema and read the root pages of the tables every command uses, so a file whose
    // schema pages are damaged fails now, not later. `EXISTS`, not `count(*)`: a count reads every
    // page of the table, and `checkpoints` gains a row a turn.
    connection
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sessions) + EXISTS (SELECT 1 FROM checkpoints)",
            [],
            |row| row.get::<_, i64>(0),
        )
        .map_err(|error| classify(shown, error))?;
    Ok(())
}

/// Applies the migrations from the file's version up to `target`, in one immediate transaction.
pub(crate) fn migrate(
    connection: &mut Connection,
    shown: &str,
    target: i64,
) -> Result<(), StoreError> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|error| classify(shown, error))?;
    let found: i64 = transaction
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|error| classify(shown, error))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            path: shown.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found < 0 {
        return Err(StoreError::NotADatabase {
            path: shown.to_string(),
            message: format!("negative schema version {found}"),
        });
    }
    for version in found..target {
        let index = usize::try_from(version).unwrap_or(usize::MAX);
        let Some(sql) = MIGRATIONS.get(index) else {
            break;
        };
        transaction
            .execute_batch(sql)
            .map_err(|error| classify(shown, error))?;
        transaction
            .pragma_update(None, "user_version", version + 1)
            .map_err(|error| classify(shown, error))?;
    }
    transaction.commit().map_err(|error| classify(shown, error))
}

/// Turns an open-time SQLite error into the error a person can act on.
/// Opens the database file at `path` (`shown` in messages): created 0600 before SQLite sees it
/// (SQLite gives its `-wal` and `-shm` the mode of the database), and never through a symlink.
/// The session store and the memory index both open their files here.
pub(crate) fn open_private_database(path: &Path, shown: &str) -> Result<Connection, StoreError> {
    crate::lease::open_private(path).map_err(|error| StoreError::Open {
        path: shown.to_owned(),
        message: error.to_string(),
    })?;
    // This crate is the one place that speaks SQL (clippy.toml).
    #[allow(clippy::disallowed_methods)]
    Connection::open_with_flags(
        path,
        // Never through a symlink: whoever could plant one would choose where we write.
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|error| classify(shown, error))
}

pub(crate) fn classify(shown: &str, error: rusqlite::Error) -> StoreError {
    let message = error.to_string();
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::NotADatabase {
            path: shown.to_string(),
            message,
        },
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::NotFound,
        ) => StoreError::Open {
            path: shown.to_string(),
            message,
        },
        _ => StoreError::Sqlite {
            context: "opening the database",
            cause: error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at `version`, as an older build would have left it.
    fn database_at(path: &Path, version: i64) {
        #[allow(clippy::disallowed_methods)]
        let mut connection = Connection::open(path).unwrap();
        migrate(&mut connection, "test", version).unwrap();
        let found: i64 = connection
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(found, version);
    }

    fn table_names(store: &Store) -> Vec<String> {
        let connection = store.connection();
        let mut statement = connection
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn migrates_an_empty_file_to_the_latest_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        let version: i64 = store
            .connection()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        assert!(table_names(&store).contains(&"restore_plans".to_string()));
    }

    #[test]
    fn migrates_version_1_keeping_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 1);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            connection
                .execute(
                    "INSERT INTO sessions (id, parent_id, created_at, workspace_root) VALUES ('s1', NULL, 5, '/w')",
                    [],
                )
                .unwrap();
            let tables: i64 = connection
                .query_row(
                    "SELECT count(*) FROM sqlite_master WHERE name = 'artifacts'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(tables, 0, "version 1 has no artifacts table");
        }
        let store = Store::open(&path).unwrap();
        let session = store.get_session("s1").unwrap().unwrap();
        assert_eq!(session.workspace_root, "/w");
        assert!(table_names(&store).contains(&"artifacts".to_string()));
        // The new tables work on migrated data.
        store.put_artifact("s1", b"hello").unwrap();
    }

    #[test]
    fn version_9_messages_and_events_move_to_rowid_tables_with_their_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 9);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            let body = "x".repeat(10_000); // over a page: the case V10 is for
            connection
                .execute_batch(&format!(
                    "INSERT INTO sessions (id, parent_id, created_at, workspace_root)
                         VALUES ('s', NULL, 1, '/w');
                     INSERT INTO messages VALUES
                         ('s', 0, '{{\"role\":\"user\",\"content\":\"{body}\"}}');
                     INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
                         VALUES ('s', 1, 'turn.started',
                         5, '{{\"sessionId\":\"s\",\"sequence\":1,\"timestampMs\":5,\"type\":\"turn.started\",\"turnId\":\"t\"}}');"
                ))
                .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.messages("s").unwrap()[0].content.len(), 10_000);
        assert_eq!(store.events("s").unwrap().len(), 1);
        // The index `last_event_of_kind` names came back with the table.
        assert!(
            store
                .last_event_of_kind("s", "turn.started")
                .unwrap()
                .is_some()
        );
        let layouts: Vec<String> = {
            let connection = store.connection();
            let mut statement = connection
                .prepare(
                    "SELECT sql FROM sqlite_master WHERE name IN ('messages', 'events') ORDER BY name",
                )
                .unwrap();
            statement
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(layouts.len(), 2);
        for sql in layouts {
            assert!(!sql.to_uppercase().contains("WITHOUT ROWID"), "{sql}");
        }
        store
            .append_message(
                "s",
                &clawsmith_protocol::ModelMessage::text(clawsmith_protocol::Role::User, "next"),
            )
            .unwrap();
        assert_eq!(store.messages("s").unwrap().len(), 2);
    }

    /// The `CREATE INDEX` of `events_kind` as the file holds it.
    fn events_kind_sql(store: &Store) -> String {
        store
            .connection()
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'events_kind'",
                [],
                |row| row.get(0),
            )
            .unwrap()
    }

    /// The sequence of the session's last event of `kind`.
    fn last_sequence(store: &Store, session: &str, kind: &str) -> Option<u64> {
        store
            .last_event_of_kind(session, kind)
            .unwrap()
            .map(|event| event.sequence)
    }

    #[test]
    fn version_12_events_kind_keeps_only_the_kinds_a_session_has_few_of() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 12);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            let event = |sequence: u32, kind: &str, turn: &str| {
                format!(
                    "INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
                         VALUES ('s', {sequence}, '{kind}', 5,
                         '{{\"sessionId\":\"s\",\"sequence\":{sequence},\"timestampMs\":5,\"type\":\"{kind}\",\"turnId\":\"{turn}\"}}');"
                )
            };
            connection
                .execute_batch(&format!(
                    "INSERT INTO sessions (id, parent_id, created_at, workspace_root)
                         VALUES ('s', NULL, 1, '/w');
                     {} {} {}",
                    event(1, "turn.started", "t1"),
                    event(2, "turn.started", "t2"),
                    event(3, "turn.started", "t3"),
                ))
                .unwrap();
            // Version 12's index holds every kind.
            let entries: i64 = connection
                .query_row(
                    "SELECT count(*) FROM events INDEXED BY events_kind WHERE session_id = 's'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(entries, 3);
        }
        let store = Store::open(&path).unwrap();
        let sql = events_kind_sql(&store);
        assert!(
            sql.contains("WHERE type NOT IN ('tool.started', 'tool.completed')"),
            "{sql}"
        );
        for kind in crate::session::UNINDEXED_KINDS {
            assert!(sql.contains(&format!("'{kind}'")), "{kind} in {sql}");
        }
        // Old rows and new ones of every kind are found, by the index or by the walk.
        let last = |kind: &str| last_sequence(&store, "s", kind);
        assert_eq!(last("turn.started"), Some(3));
        assert_eq!(last("turn.completed"), None);
        assert_eq!(last("tool.started"), None);
        let started =
            clawsmith_protocol::EventPayload::ToolStarted(clawsmith_protocol::ToolStarted {
                tool_call_id: "c1".into(),
                turn_id: "t2".into(),
                tool_name: "read_file".into(),
                risk: clawsmith_protocol::Risk::Read,
                capabilities: Vec::new(),
                side_effect: false,
                summary: None,
                tool_schema: None,
                batch: None,
                trace_id: None,
                span_id: None,
            });
        store.append_event("s", started, 6).unwrap();
        store.append_event("s", turn_started("t4"), 7).unwrap();
        assert_eq!(last("tool.started"), Some(4));
        assert_eq!(last("turn.started"), Some(5));
        // A call's events put nothing in the index.
        let entries: i64 = store
            .connection()
            .query_row(
                "SELECT count(*) FROM event_rows INDEXED BY events_kind
                 WHERE type NOT IN ('tool.started', 'tool.completed')",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(entries, 4);
    }

    #[test]
    fn version_15_events_kind_follows_the_key_and_finds_the_same_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 14);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            // Two sessions' turns, interleaved: (session, sequence, kind).
            let rows = [
                ("a", 1, "turn.started"),
                ("b", 1, "turn.started"),
                ("a", 2, "model.request"),
                ("a", 3, "tool.started"),
                ("b", 2, "model.request"),
                ("a", 4, "tool.completed"),
                ("a", 5, "turn.completed"),
                ("b", 3, "turn.completed"),
                ("b", 4, "turn.started"),
                ("b", 5, "tool.started"),
            ];
            let mut sql = String::from(
                "INSERT INTO sessions (id, parent_id, created_at, workspace_root)
                     VALUES ('a', NULL, 1, '/w'), ('b', NULL, 1, '/w');",
            );
            // The index and the lookup read the `type` column; the stored JSON is a
            // `turn.started` on every row (only its sequence is compared below).
            for (session, sequence, kind) in rows {
                sql.push_str(&format!(
                    "INSERT INTO events (session_id, sequence, type, timestamp_ms, event_json)
                         VALUES ('{session}', {sequence}, '{kind}', 5,
                         '{{\"sessionId\":\"{session}\",\"sequence\":{sequence},\"timestampMs\":5,\"type\":\"turn.started\",\"turnId\":\"t\"}}');"
                ));
            }
            connection.execute_batch(&sql).unwrap();
        }
        let store = Store::open(&path).unwrap();
        let sql = events_kind_sql(&store);
        assert!(sql.contains("event_rows(key, type)"), "{sql}");
        assert!(
            sql.contains("WHERE type NOT IN ('tool.started', 'tool.completed')"),
            "{sql}"
        );
        // The index's entries are in key order: a turn's kinds side by side, not one per kind.
        let indexed: Vec<(i64, String)> = {
            let connection = store.connection();
            let mut statement = connection
                .prepare(
                    "SELECT key, type FROM event_rows INDEXED BY events_kind
                     WHERE type NOT IN ('tool.started', 'tool.completed')",
                )
                .unwrap();
            statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(indexed.len(), 7);
        assert!(indexed.windows(2).all(|pair| pair[0].0 < pair[1].0));
        let last = |session: &str, kind: &str| last_sequence(&store, session, kind);
        // (session, kind, sequence): each session's own range only, by the index or the walk.
        let table = [
            ("a", "model.request", Some(2)),
            ("a", "turn.started", Some(1)),
            ("a", "turn.completed", Some(5)),
            ("a", "tool.completed", Some(4)),
            ("b", "model.request", Some(2)),
            ("b", "turn.started", Some(4)),
            ("b", "tool.completed", None),
            ("b", "agent.stopped", None),
            ("nobody", "model.request", None),
        ];
        for (session, kind, sequence) in table {
            assert_eq!(last(session, kind), sequence, "{session} {kind}");
        }
        // New events land in the same index, found as before.
        store.create_session("c", "/w").unwrap();
        store.append_event("c", turn_started("t9"), 6).unwrap();
        store.append_event("a", turn_started("t9"), 7).unwrap();
        assert_eq!(last("a", "turn.started"), Some(6));
        assert_eq!(last("c", "turn.started"), Some(1));
        assert_eq!(last("b", "turn.started"), Some(4));
    }

    /// Whether the statement `sql` runs an ephemeral b-tree (`OpenEphemeral`) on `connection`.
    fn uses_ephemeral_btree(connection: &Connection, sql: &str) -> bool {
        let mut statement = connection.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let unbound = std::iter::repeat_n(rusqlite::types::Null, statement.parameter_count());
        statement
            .query_map(rusqlite::params_from_iter(unbound), |row| {
                row.get::<_, String>(1)
            })
            .unwrap()
            .any(|opcode| opcode.unwrap() == "OpenEphemeral")
    }

    #[test]
    fn version_16_checks_a_checkpoints_state_without_an_ephemeral_btree() {
        const INSERT: &str = "INSERT INTO checkpoints (session_id, turn_id, created_at,
             message_count, event_sequence, todos_json, state)
             VALUES ('s', ?1, 1, 0, 0, '[]', ?2)";
        const FINISH: &str = "UPDATE checkpoints SET state = ?2 WHERE turn_id = ?1";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 15);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            connection
                .execute_batch(
                    "INSERT INTO sessions (id, parent_id, created_at, workspace_root)
                         VALUES ('s', NULL, 1, '/w');",
                )
                .unwrap();
            connection.execute(INSERT, ["t1", "finished"]).unwrap();
            connection.execute(INSERT, ["t2", "open"]).unwrap();
            // Version 15's `IN` list: an ephemeral b-tree at every insert and state change.
            assert!(uses_ephemeral_btree(&connection, INSERT));
            assert!(uses_ephemeral_btree(&connection, FINISH));
        }
        // The connection that migrates goes on with the new check, and so does a later one.
        let store = Store::open(&path).unwrap();
        let other = Store::open(&path).unwrap();
        for store in [&store, &other] {
            let connection = store.connection();
            assert!(!uses_ephemeral_btree(&connection, INSERT));
            assert!(!uses_ephemeral_btree(&connection, FINISH));
            let integrity: String = connection
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .unwrap();
            assert_eq!(integrity, "ok");
        }
        // The same values pass and the same are refused, rows kept as they were.
        assert_eq!(
            store.checkpoint("s", "t1").unwrap().state,
            crate::CheckpointState::Finished
        );
        let connection = store.connection();
        connection.execute(FINISH, ["t2", "undone"]).unwrap();
        connection.execute(INSERT, ["t3", "open"]).unwrap();
        for bad in ["closed", "Open", ""] {
            let refused = connection.execute(FINISH, ["t3", bad]).unwrap_err();
            assert_eq!(
                refused.sqlite_error_code(),
                Some(ErrorCode::ConstraintViolation),
                "{bad}"
            );
            let refused = connection.execute(INSERT, ["t4", bad]).unwrap_err();
            assert_eq!(
                refused.sqlite_error_code(),
                Some(ErrorCode::ConstraintViolation),
                "{bad}"
            );
        }
        let states: Vec<String> = connection
            .prepare("SELECT state FROM checkpoints ORDER BY id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(states, ["finished", "undone", "open"]);
    }

    fn checkpoint_ids(connection: &Connection, session: &str) -> Vec<i64> {
        connection
            .prepare("SELECT id FROM checkpoints WHERE session_id = ?1 ORDER BY id")
            .unwrap()
            .query_map([session], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn version_17_checkpoints_never_reuse_an_id_without_autoincrement() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, 16);
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            connection
                .execute_batch(
                    "PRAGMA foreign_keys = ON;
                     INSERT INTO sessions (id, parent_id, created_at, workspace_root)
                         VALUES ('s', NULL, 1, '/w');
                     INSERT INTO checkpoints (session_id, turn_id, created_at, message_count,
                         event_sequence, todos_json, state)
                         VALUES ('s', 't1', 1, 0, 0, '[]', 'finished'),
                                ('s', 't2', 2, 0, 0, '[]', 'finished'),
                                ('s', 't3', 3, 0, 0, '[]', 'finished');
                     INSERT INTO checkpoint_files (checkpoint_id, path, position, bytes_before,
                         bytes_after) VALUES (1, 'a.txt', 0, 0, 1);
                     DELETE FROM checkpoints WHERE id = 3;",
                )
                .unwrap();
            // Version 16: AUTOINCREMENT remembers the deleted newest id in sqlite_sequence.
            let seq: i64 = connection
                .query_row(
                    "SELECT seq FROM sqlite_sequence WHERE name = 'checkpoints'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(seq, 3);
        }
        let store = Store::open(&path).unwrap();
        {
            let connection = store.connection();
            let sql: String = connection
                .query_row(
                    "SELECT sql FROM sqlite_schema WHERE name = 'checkpoints'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            assert!(!sql.contains("AUTOINCREMENT"), "{sql}");
            assert!(
                sql.contains("id              INTEGER PRIMARY KEY,"),
                "{sql}"
            );
            // restore_plans keeps its AUTOINCREMENT; checkpoints leave sqlite_sequence.
            let sequences: Vec<String> = connection
                .prepare("SELECT name FROM sqlite_sequence")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(!sequences.contains(&"checkpoints".to_string()));
            let integrity: String = connection
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .unwrap();
            assert_eq!(integrity, "ok");
            // The tables a turn inserts into have no trigger but the delete one: a trigger
            // would give each insert a statement journal (a copy of every page it changes).
            let triggers: Vec<String> = connection
                .prepare(
                    "SELECT sql FROM sqlite_schema WHERE type = 'trigger'
                     AND tbl_name IN ('checkpoints', 'message_rows', 'event_rows', 'journal')",
                )
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(triggers.len(), 1, "{triggers:?}");
            assert!(
                triggers[0].contains("AFTER DELETE ON checkpoints"),
                "{triggers:?}"
            );
            // The rows, and the file row hanging off the first one, are all still there.
            assert_eq!(checkpoint_ids(&connection, "s"), [1, 2]);
            let files: i64 = connection
                .query_row("SELECT count(*) FROM checkpoint_files", [], |row| {
                    row.get(0)
                })
                .unwrap();
            assert_eq!(files, 1);
        }
        // The deleted newest id 3 is not given again.
        store
            .begin_turn("s", "t4", crate::TurnOpening::default())
            .unwrap();
        assert_eq!(checkpoint_ids(&store.connection(), "s"), [1, 2, 4]);
        // Nor is a newest id deleted after the migration.
        store
            .connection()
            .execute("DELETE FROM checkpoints WHERE id = 4", [])
            .unwrap();
        store
            .begin_turn("s", "t5", crate::TurnOpening::default())
            .unwrap();
        assert_eq!(checkpoint_ids(&store.connection(), "s"), [1, 2, 5]);
        // Nor the ids of a deleted session's checkpoints (deleted by its cascade).
        store.create_session("gone", "/w").unwrap();
        store
            .begin_turn("gone", "g1", crate::TurnOpening::default())
            .unwrap();
        store
            .begin_turn("gone", "g2", crate::TurnOpening::default())
            .unwrap();
        assert_eq!(checkpoint_ids(&store.connection(), "gone"), [6, 7]);
        store
            .connection()
            .execute("DELETE FROM sessions WHERE id = 'gone'", [])
            .unwrap();
        store
            .begin_turn("s", "t6", crate::TurnOpening::default())
            .unwrap();
        assert_eq!(checkpoint_ids(&store.connection(), "s"), [1, 2, 5, 8]);
        // A fork's copies get fresh ids after every one given.
        store.fork_session("s", "f").unwrap();
        assert_eq!(checkpoint_ids(&store.connection(), "f"), [9, 10, 11, 12]);
        // The store's statement is what a row inserted by hand uses too.
        let connection = store.connection();
        connection
            .execute(
                concat!(
                    "INSERT INTO checkpoints (id, session_id, turn_id, created_at, message_count,
                         event_sequence, todos_json, state) VALUES (",
                    crate::checkpoint::next_checkpoint_id!(),
                    ", 's', 'by-hand', 1, 0, 0, '[]', 'open')"
                ),
                [],
            )
            .unwrap();
        assert_eq!(checkpoint_ids(&connection, "s"), [1, 2, 5, 8, 13]);
    }

    #[test]
    fn reopening_the_latest_version_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        database_at(&path, SCHEMA_VERSION);
        Store::open(&path)
            .unwrap()
            .create_session("s", "/w")
            .unwrap();
        let store = Store::open(&path).unwrap();
        assert_eq!(store.list_sessions().unwrap().len(), 1);
    }

    fn synchronous(store: &Store) -> i64 {
        store
            .connection()
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn an_unsynced_write_goes_back_to_fsyncing_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            durability: Durability::Full,
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path().join("db"), options).unwrap();
        store.create_session("s", "/w").unwrap();
        // 2 = FULL, 1 = NORMAL.
        assert_eq!(synchronous(&store), 2);
        let inside: i64 = store
            .write_unsynced("test", |tx| {
                tx.pragma_query_value(None, "synchronous", |row| row.get(0))
                    .ctx("test")
            })
            .unwrap();
        assert_eq!(inside, 1, "the commit itself is not fsynced");
        assert_eq!(synchronous(&store), 2, "after a commit");
        let failed: Result<(), StoreError> =
            store.write_unsynced("test", |_| Err(StoreError::UnknownSession("x".into())));
        assert!(failed.is_err());
        assert_eq!(synchronous(&store), 2, "after a failed body");
        // The default durability never changes it.
        let normal = Store::open(dir.path().join("normal")).unwrap();
        normal.write_unsynced("test", |_| Ok(())).unwrap();
        assert_eq!(synchronous(&normal), 1);
    }

    fn turn_started(turn: &str) -> clawsmith_protocol::EventPayload {
        clawsmith_protocol::EventPayload::TurnStarted(clawsmith_protocol::TurnStarted {
            turn_id: turn.into(),
        })
    }

    fn kinds(store: &Store, session: &str) -> Vec<String> {
        store
            .events(session)
            .unwrap()
            .iter()
            .map(|event| event.payload.kind().to_owned())
            .collect()
    }

    #[test]
    fn deferred_records_ride_on_the_next_commit_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        let other = Store::open(&path).unwrap();
        let opened = store.defer_turn_start("s", "t1", vec![turn_started("t1")], 5);
        let user = clawsmith_protocol::ModelMessage::text(clawsmith_protocol::Role::User, "hi");
        store.defer_message("s", &user).unwrap();
        assert!(store.has_deferred());
        assert!(opened[0].stored().is_none());
        // Another connection sees nothing yet: no commit was made.
        assert!(kinds(&other, "s").is_empty());
        assert!(other.checkpoints("s").unwrap().is_empty());
        // A failing write stores nothing, and the records stay deferred.
        let failed: Result<(), StoreError> =
            store.write("test", |_| Err(StoreError::UnknownSession("x".into())));
        assert!(failed.is_err());
        assert!(store.has_deferred());
        assert!(kinds(&other, "s").is_empty());
        // The next write commits them first, then its own event: sequences 1, 2.
        let own = store
            .append_event(
                "s",
                clawsmith_protocol::EventPayload::TurnStarted(clawsmith_protocol::TurnStarted {
                    turn_id: "own".into(),
                }),
                6,
            )
            .unwrap();
        assert!(!store.has_deferred());
        assert_eq!(opened[0].stored().unwrap().sequence, 1);
        assert_eq!(opened[0].stored().unwrap().timestamp_ms, 5);
        assert_eq!(own.sequence, 2);
        assert_eq!(kinds(&other, "s"), ["turn.started", "turn.started"]);
        assert_eq!(other.messages("s").unwrap(), [user]);
        assert_eq!(other.checkpoints("s").unwrap()[0].turn_id, "t1");
        // A read of this store sees what it deferred: it commits them first.
        let later = store.defer_turn_start("s", "t2", vec![turn_started("t2")], 7);
        assert_eq!(store.events("s").unwrap().len(), 3);
        assert_eq!(later[0].stored().unwrap().sequence, 3);
        assert_eq!(kinds(&other, "s").len(), 3);
        store.flush_deferred().unwrap();
    }

    #[test]
    fn a_deferred_call_is_stored_as_a_committed_one() {
        use clawsmith_protocol::{EventPayload, ModelMessage, ToolCompleted, ToolExecutionResult};
        let store = Store::open_in_memory().unwrap();
        let record = |session: &str, deferred: bool| {
            store.create_session(session, "/w").unwrap();
            let result = ToolExecutionResult::success("x".repeat(5000));
            let call = clawsmith_protocol::ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            };
            let assistant = ModelMessage::assistant_with_calls(String::new(), vec![call]);
            let started = EventPayload::TurnStarted(clawsmith_protocol::TurnStarted {
                turn_id: "t".into(),
            });
            let completed =
                || EventPayload::ToolCompleted(ToolCompleted::new("c1", "t", "read_file", &result));
            let message = ModelMessage::tool_result(
                "c1",
                "read_file",
                result.content.clone(),
                result.summary(),
            );
            if deferred {
                store
                    .defer_call_start(session, Some(&assistant), started, 1)
                    .unwrap();
                store
                    .defer_call_close(session, completed(), 2, &message)
                    .unwrap();
                store.flush_deferred().unwrap();
            } else {
                store
                    .start_call(session, Some(&assistant), None, started, 1)
                    .unwrap();
                store
                    .close_call(session, None, completed(), 2, &message)
                    .unwrap();
            }
            let events: Vec<_> = store
                .events(session)
                .unwrap()
                .into_iter()
                .map(|event| (event.sequence, event.timestamp_ms, event.payload))
                .collect();
            (events, store.messages(session).unwrap())
        };
        let committed = record("a", false);
        assert_eq!(record("b", true), committed);
        assert_eq!(committed.0.len(), 2);
    }

    #[test]
    fn cached_statements_are_not_prepared_again_per_use() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        store.create_session("s", "/w").unwrap();
        let message =
            clawsmith_protocol::ModelMessage::text(clawsmith_protocol::Role::User, "hello");
        for _ in 0..5 {
            store.append_message("s", &message).unwrap();
            store
                .append_event(
                    "s",
                    clawsmith_protocol::EventPayload::TurnStarted(
                        clawsmith_protocol::TurnStarted {
                            turn_id: "t".into(),
                        },
                    ),
                    1,
                )
                .unwrap();
        }
        let connection = store.connection();
        // `MAX(…) WHERE key = ?` was re-planned on every use before the planner was told to
        // plan once for any value (SQLITE_DBCONFIG_ENABLE_QPSG).
        for sql in [
            crate::session::MESSAGE_COUNT_SQL,
            crate::session::LAST_EVENT_SEQUENCE_SQL,
        ] {
            let statement = connection.prepare_cached(sql).unwrap();
            let runs = statement.get_status(rusqlite::StatementStatus::Run);
            assert!(runs >= 5, "{sql} ran {runs} times");
            assert_eq!(
                statement.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "{sql}"
            );
        }
    }

    /// Appends `count` messages of ~3 KB (about one WAL frame of their own each), returning the
    /// longest log a commit left.
    fn append_large_messages(store: &Store, count: usize) -> u32 {
        let message = clawsmith_protocol::ModelMessage::text(
            clawsmith_protocol::Role::User,
            "y".repeat(3000),
        );
        let mut longest = 0;
        for _ in 0..count {
            store.append_message("s", &message).unwrap();
            longest = longest.max(store.checkpoint_status().1);
        }
        longest
    }

    /// Appends large messages until a commit leaves `frames` or more in the log, returning how
    /// many it appended.
    fn append_until_the_log_holds(store: &Store, frames: u32) -> usize {
        let mut written = 0;
        while store.checkpoint_status().1 < frames {
            append_large_messages(store, 1);
            written += 1;
        }
        written
    }

    /// Waits until the background checkpoint thread has folded every frame of the log.
    fn wait_until_folded(store: &Store) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !store.checkpoint_status().2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the background checkpoint did not fold the log: {:?}",
                store.checkpoint_status()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_log_is_folded_in_the_background_and_started_over_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        // Up to the threshold: the commit that reaches it starts the thread, which folds the log.
        let written = append_until_the_log_holds(&store, CHECKPOINT_FRAMES);
        // Writes paused, so the thread folds every frame (none by the writer: the log is far
        // from the inline bound), and the next write starts the log over (frames counted from
        // 1 again).
        wait_until_folded(&store);
        assert_eq!(store.checkpoint_status().0, 1, "one background checkpoint");
        append_large_messages(&store, 1);
        let (_, frames, _) = store.checkpoint_status();
        assert!(frames < 20, "the log was not started over: {frames} frames");
        // Every message is there, for this connection and another.
        assert_eq!(store.messages("s").unwrap().len(), written + 1);
        drop(store);
        assert_eq!(
            Store::open(&path).unwrap().messages("s").unwrap().len(),
            written + 1
        );
    }

    /// The length of the write-ahead log file of the database at `path`.
    fn log_length(path: &Path) -> u64 {
        let mut log = path.as_os_str().to_owned();
        log.push("-wal");
        std::fs::metadata(log).map_or(0, |metadata| metadata.len())
    }

    /// The frames of the log that the next process to open the database at `path` finds (and
    /// rebuilds its WAL index from), with no other connection open: a connection of its own
    /// rebuilds the index, as a new process does, and a passive checkpoint reports its length.
    fn frames_a_next_process_finds(path: &Path) -> i32 {
        #[allow(clippy::disallowed_methods)]
        let connection = Connection::open(path).unwrap();
        connection
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .unwrap();
        connection
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
                row.get::<_, i64>(0)
            })
            .unwrap();
        connection
            .wal_checkpoint_v2(None::<&str>, rusqlite::wal::CheckpointMode::PASSIVE)
            .unwrap()
            .0
    }

    #[test]
    fn closing_a_store_starts_a_long_log_over_and_keeps_a_short_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // A short log stays: the next process rebuilds little, and closing costs no fsync.
        let store = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        append_large_messages(&store, 10);
        let short = store.checkpoint_status().1;
        drop(store);
        assert_eq!(
            frames_a_next_process_finds(&path),
            i32::try_from(short).unwrap(),
            "a short log was folded"
        );
        // A log of CLOSE_CHECKPOINT_FRAMES or more (below the thread's threshold here) is
        // folded and started over when the store closes: the next process finds the one frame
        // of the closing commit, and the file keeps its blocks (no truncation, no discard).
        let store = Store::open(&path).unwrap();
        let written = 10 + append_until_the_log_holds(&store, CLOSE_CHECKPOINT_FRAMES);
        assert!(store.checkpoint_status().1 < CHECKPOINT_FRAMES);
        drop(store);
        assert_eq!(
            frames_a_next_process_finds(&path),
            1,
            "the long log was left behind"
        );
        assert!(log_length(&path) > u64::from(CLOSE_CHECKPOINT_FRAMES) * 4096);
        // Everything committed is in the main file, and the schema version is unchanged.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.messages("s").unwrap().len(), written);
        let version: i64 = store
            .connection()
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    #[test]
    fn a_store_left_to_the_exit_closes_its_log_as_a_drop_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        // A short log stays as it is.
        let store = Arc::new(Store::open(&path).unwrap());
        store.create_session("s", "/w").unwrap();
        append_large_messages(&store, 10);
        let short = store.checkpoint_status().1;
        let other_owner = Arc::clone(&store);
        store.leave_to_exit();
        // Another owner's drop does not close it (nor fold it) behind the exit's back.
        drop(other_owner);
        assert_eq!(
            frames_a_next_process_finds(&path),
            i32::try_from(short).unwrap()
        );
        // A long one is folded and started over, its commits in the main file.
        let store = Arc::new(Store::open(&path).unwrap());
        let written = 10 + append_until_the_log_holds(&store, CLOSE_CHECKPOINT_FRAMES);
        store.leave_to_exit();
        assert_eq!(
            frames_a_next_process_finds(&path),
            1,
            "the long log was left behind"
        );
        assert_eq!(
            Store::open(&path).unwrap().messages("s").unwrap().len(),
            written
        );
    }

    #[test]
    fn closing_a_store_leaves_the_log_to_a_reader_of_another_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = Store::open(&path).unwrap();
        store.create_session("s", "/w").unwrap();
        let written = append_until_the_log_holds(&store, CLOSE_CHECKPOINT_FRAMES);
        // Another process's reader in the middle of a read transaction.
        #[allow(clippy::disallowed_methods)]
        let mut reader = Connection::open(&path).unwrap();
        // Like every connection of clawsmith's, its close does not fold the log itself.
        reader
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .unwrap();
        let reading = reader
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .unwrap();
        let seen: i64 = reading
            .query_row("SELECT count(*) FROM messages", [], |row| row.get(0))
            .unwrap();
        assert_eq!(seen, i64::try_from(written).unwrap());
        // The close does not wait for it (no busy wait) and cannot start the log over under it.
        drop(store);
        reading.commit().unwrap();
        drop(reader);
        assert!(
            frames_a_next_process_finds(&path) >= i32::try_from(CLOSE_CHECKPOINT_FRAMES).unwrap()
        );
        // The next store that closes with a long log starts it over.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.messages("s").unwrap().len(), written);
        append_large_messages(&store, 1);
        assert!(store.checkpoint_status().1 >= CLOSE_CHECKPOINT_FRAMES);
        drop(store);
        assert_eq!(frames_a_next_process_finds(&path), 1);
        assert_eq!(
            Store::open(&path).unwrap().messages("s").unwrap().len(),
            written + 1
        );
    }

    #[test]
    fn a_steady_stream_of_commits_keeps_the_log_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        store.create_session("s", "/w").unwrap();
        // Several times the inline bound, without a pause for the thread to catch up.
        let longest = append_large_messages(&store, 2 * INLINE_CHECKPOINT_FRAMES as usize);
        // One commit here writes a few frames: the log never passes the bound by more.
        assert!(
            longest < INLINE_CHECKPOINT_FRAMES + 10,
            "the log reached {longest} frames"
        );
        assert!(longest >= CHECKPOINT_FRAMES);
    }

    #[test]
    fn refuses_a_newer_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            #[allow(clippy::disallowed_methods)]
            let connection = Connection::open(&path).unwrap();
            connection
                .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
        }
        let error = Store::open(&path).unwrap_err();
        assert!(
            matches!(error, StoreError::SchemaTooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{error}"
        );
    }
}
