//! # clawsmith-store-postgres
//!
//! The session store of a fleet: many clawsmith processes on many machines write and read the
//! same sessions in one PostgreSQL database, and keep large blobs in S3-compatible object
//! storage (also Google Cloud Storage, Azure or a local folder, through `object_store`).
//! [`PgStore`] implements `clawsmith-store`'s traits, so it keeps the contract the embedded
//! SQLite store keeps (`clawsmith_store::contract`), and adds what several hosts need.
//!
//! ## Gap-free history under many writers
//! A session's row holds its next message index and next event sequence. An append updates
//! that row in the transaction that inserts the history rows, so the row lock orders the
//! session's writers, a rollback gives the numbers back, and the numbers have no gap and no
//! duplicate (no `bigserial`, whose values a rollback loses). Sessions do not wait for each
//! other.
//!
//! ## One writer per session, fenced
//! A lease is a row: the session, its holder (`host:pid:nonce`), when it expires (by the
//! database's clock, so hosts' clocks do not matter) and an epoch that grows each time the
//! lease changes hands. The holder renews it every third of its lifetime; a holder that
//! stops (killed, or paused longer than the lease lasts) loses it to the next taker. Every
//! write locks the lease row and checks it: a holder writes only while the epoch is still
//! its own ([`StoreError::LeaseLost`] otherwise), and a process without the lease writes only
//! while nobody else holds it. So no row of a stale writer lands after a takeover, and every
//! history row records the epoch it was written under. The taker's lease is fresh: the core's
//! recovery (A8) closes the calls the dead writer left open.
//!
//! A writer waiting for a lease says so in its row, for a second at a time, renewed while it
//! waits; a holder that keeps its lease between turns asks at each turn
//! (`Lease::is_wanted`) and yields it (`yield_lease`): it lets go at once, waits until the
//! waiter took it, and takes it back fresh once the waiter is done. Every write's lease check
//! reads the waiter's word too, and a holder's next question takes that answer while it is
//! younger than a quarter second, so a holder writing turn after turn asks nothing more; a
//! waiter that spoke after that check is seen one turn later.
//!
//! ## A write's round trips
//! A write is one transaction begun and ended by hand (`Tx`): BEGIN goes with the lease check
//! and the numbering (one statement), then the waiting records' rows (one statement for the
//! turns' checkpoints, the messages and the events) with the write's own statements, and COMMIT goes
//! with the last of them where the write allows it. The server runs one connection's
//! statements in the order sent and, once one fails, refuses the rest and answers COMMIT with a
//! rollback, so sending ahead writes nothing a failure should have stopped; a transaction whose
//! end the server did not acknowledge closes its connection rather than going back to the
//! pool. A turn of reads (its start still waiting when it finishes) is written in its finish:
//! the checkpoint already finished and `turn.completed` among the records.
//!
//! A write of records alone (a turn of reads, an append, deferred records written before a
//! read) by the lease's holder is one round trip once the holder knows the session's next
//! numbers, which its last write left (nobody else writes while it holds the lease): BEGIN,
//! the lease check on those numbers, the records and COMMIT are sent together. The check is a
//! function of the schema (`clawsmith_fence_known_numbers`) that takes the numbers only if
//! they are still next and the lease is still this holder's at its epoch, and otherwise fails
//! the transaction before the records run: CS001 is a lost lease; CS002 means the numbers
//! moved (an undo set the counters back, or another thread of this process took them first),
//! and the write is sent again the general way, which asks for them.
//!
//! ## Turns and checkpoints
//! A turn's checkpoint, the state of each path before its first change (a blob, committed before
//! the change may start) and after, its todos and pending approvals are rows like the SQLite
//! store's, written under the same fence (`turns.rs`). Finishing a turn reads the current
//! contents through the caller's function outside the transaction, then keeps those that still
//! match and closes the checkpoint in one commit with its `turn.completed` event (after the
//! lease check, two round trips: the close, which answers the state the checkpoint had, then
//! the line counts, the file rows, the event and COMMIT sent together, run in order). Around a
//! command the core notes the manifest it runs against, what undo cannot give back and the
//! directories it made (`captures.rs`); a workspace's last manifest is kept per machine, since
//! the same path on two hosts is two workspaces.
//!
//! ## Undo
//! Undo runs the same selection, precheck, plan and roll-forward as the SQLite store
//! (`clawsmith_checkpoint::restore`), with the plan and the rewind as rows here (`undo.rs`):
//! one read of the checkpoints from the target on and their files, the precheck against the
//! workspace and the fetch of every content to write (checked against its name) before a
//! fenced transaction commits the plan, then the restore, then one fenced commit deletes the
//! plan, keeps what the rewind takes out of the history, sets the session's counters back and
//! flags the checkpoints. A plan a killed writer left is rolled forward by the session's next
//! holder in the same workspace root. What commands did to the workspace's git repository comes
//! back after the files, as on SQLite (`repository.rs`): `.git`'s files are kept as blobs here,
//! its objects in a mirror folder of the machine that ran the command
//! ([`PgOptions::repository_mirror`]; without one, such changes are named as not captured).
//!
//! ## Records that wait for the next write
//! A round trip to the server is what a write costs here, so records that guard no side effect
//! (a turn's start, a read's start and close, a message) wait in the store, as they do in the
//! SQLite store, and its next write writes them first in the same transaction, their rows sent
//! together: an MCP `read_file` is one transaction in one round trip. A read of the store
//! writes them first, so a process reads what it did; other hosts see them once that write
//! commits. A failed write leaves them waiting, unless they can never be written (their session
//! was taken over): those go with the refused write, so one lost session does not stop the
//! store's other sessions.
//!
//! Threads of one process share the queue, so a turn's start may be on its way in another
//! thread's write when the turn finishes or its session is written again: neither waiting in
//! the queue nor committed. The queue names such turns until their write lands (written,
//! refused, or put back), and the turn's finish and the session's next writes wait for that,
//! where the SQLite store's one connection orders them by its lock.
//!
//! ## Followers on other hosts
//! Each commit that adds events notifies the channel `clawsmith_events` with
//! `session:last-sequence`; [`PgStore::follow`] listens on a connection of its own, so a web
//! view on another host learns of new events without polling.
//!
//! ## Migrations
//! [`PgStore::migrate`] (`clawsmith store migrate`) applies the migrations a database lacks in
//! one transaction under an advisory lock, so hosts that start together apply each once.
//! Opening a store never migrates: a database behind this build is refused with the command
//! to run, one ahead of it is refused too.
//!
//! ## Blobs
//! Content-addressed by SHA-256. Up to [`INLINE_MAX`] bytes a blob lives in its row; a larger
//! one is an object `blobs/ab/cdef…` created only if absent (an existing object is success), its
//! row taken (and touched) in the same transaction first. Reads check the bytes against the
//! name. Without an object store every blob lives in its row. Artifacts name their blob (a
//! foreign key), once per content per session.
//!
//! ## TLS
//! The connection string's `sslmode` and `sslrootcert` mean what they mean to libpq (`tls.rs`
//! has the table): `prefer`, the default, encrypts when the server offers it, `verify-full`
//! checks the certificate's chain and host name. tokio-postgres knows neither setting, so they
//! are taken out of the string before it is parsed; the TLS client is rustls with ring, and
//! every connection of a store (its pool, its followers) goes the same way.
//!
//! ## Retention and garbage collection
//! [`PgStore::delete_sessions_created_before`] deletes old sessions in batches, skipping any a
//! live writer holds; their history, journal and artifacts go with them.
//! [`PgStore::collect_blobs`] deletes blobs no artifact names once nobody touched them for a
//! grace period, and can race a writer storing the same content again without ever leaving
//! that writer's artifact without bytes (claim with `FOR UPDATE SKIP LOCKED`, check again under
//! the lock, objects before rows; `retention.rs` says why each step), then sweeps objects no row
//! names.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clawsmith_protocol::{ArtifactRef, Event, EventPayload, ModelMessage, ToolStatus};
use clawsmith_store::{
    Backend, BlobStore, JournalEntry, JournalStart, Lease, LeaseHold, PendingApproval, SessionInfo,
    SessionStore, StoreError, Todo,
};
use object_store::ObjectStore;
use tokio_postgres::GenericClient;

mod blobs;
mod calls;
mod captures;
mod deferred;
mod follow;
mod fork;
mod repository;
mod retention;
mod schema;
mod tls;
mod turns;
mod undo;

pub use blobs::{object_store_at, probe_objects};
pub use follow::Follower;
pub use retention::{BLOB_NAMES_NOT_KEPT, BLOB_REFERENCES, Collected};
pub use schema::SCHEMA_VERSION;
pub use tls::TlsMode;

/// The largest blob kept in its row; larger ones go to the object store when there is one.
pub const INLINE_MAX: usize = 64 * 1024;

/// How long [`SessionStore::yield_lease`] waits for the writer that wanted the lease to take
/// it before taking it again (as the SQLite store's lingering holder).
const YIELD_PATIENCE: Duration = Duration::from_millis(2000);

/// How long a holder trusts the last answer to "does another writer wait for this lease?"
/// ([`PgStore::wanted`]); a waiter says so again every 100 ms, for a second each time.
const WANTED_FRESH: Duration = Duration::from_millis(250);

/// How long a lease lasts unless renewed, by default.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// What a store waits for and where its blobs go.
#[derive(Clone)]
pub struct PgOptions {
    /// How long a lease lasts unless renewed (renewed every third of it).
    pub lease_ttl: Duration,
    /// Whether taking a held lease waits for it (or fails at once).
    pub wait_for_lease: bool,
    /// Where blobs over [`INLINE_MAX`] go; `None`: in their rows.
    pub objects: Option<Arc<dyn ObjectStore>>,
    /// The most connections the pool opens.
    pub max_connections: usize,
    /// Where this machine mirrors its workspaces' git objects, so that undo puts back what
    /// commands do to a repository (`.git`'s other files are kept as blobs in the database);
    /// `None`: no repository is kept, and commands' changes to `.git` are named as not captured.
    pub repository_mirror: Option<std::path::PathBuf>,
}

impl Default for PgOptions {
    fn default() -> PgOptions {
        PgOptions {
            lease_ttl: DEFAULT_LEASE_TTL,
            wait_for_lease: false,
            objects: None,
            max_connections: 8,
            repository_mirror: None,
        }
    }
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PgOptions")
            .field("lease_ttl", &self.lease_ttl)
            .field("wait_for_lease", &self.wait_for_lease)
            .field("objects", &self.objects.as_ref().map(ToString::to_string))
            .field("max_connections", &self.max_connections)
            .field("repository_mirror", &self.repository_mirror)
            .finish()
    }
}

/// A session store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Option<tokio::runtime::Runtime>,
    pool: deadpool_postgres::Pool,
    connection: tls::Connection,
    options: PgOptions,
    /// This process's name on its leases.
    holder: String,
    /// This machine's name (a workspace's manifest is per machine).
    host: String,
    /// The leases this store holds: session → holders, epoch, renewal.
    held: Mutex<HashMap<String, Held>>,
    /// Lease releases sent and perhaps not yet done: the store's drop waits for them (up to
    /// [`RELEASE_PATIENCE`]), so a process that ends right after a turn does not leave its
    /// sessions locked for a lease's life.
    releasing: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Records waiting for the store's next write ([`clawsmith_store::DeferredRecords`]), in
    /// order, and the turns whose start a write has taken and not yet landed.
    pending: Mutex<deferred::Queue>,
    /// Told when a write that took records has landed (written, refused or put back).
    landed: std::sync::Condvar,
}

struct Held {
    holders: usize,
    epoch: i64,
    lost: Arc<AtomicBool>,
    renewal: tokio::task::JoinHandle<()>,
    /// Whether another writer waited for the lease, and when that was read (by a write's
    /// lease check, or by [`PgStore::wanted`]).
    wanted: Option<(std::time::Instant, bool)>,
    /// The session's next message index and event sequence as this store's last write left
    /// them: a write of records sends its rows with its lease check on these numbers (one
    /// round trip), and the server refuses it if they moved ([`PgStore::write_known`]).
    next: Option<(i64, i64)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PgStore")
            .field("holder", &self.holder)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Releases still in flight are waited for, briefly, where blocking is allowed (not on
        // an async thread): otherwise another host would find the session held until the lease
        // expires.
        let releasing = std::mem::take(
            &mut *self
                .releasing
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if !releasing.is_empty() && tokio::runtime::Handle::try_current().is_err() {
            runtime.block_on(async {
                let _ = tokio::time::timeout(
                    RELEASE_PATIENCE,
                    futures_util::future::join_all(releasing),
                )
                .await;
            });
        }
        // Dropping a runtime blocks, which a caller on an async thread must not do.
        runtime.shutdown_background();
    }
}

/// How long dropping a store waits for its lease releases to reach the database.
const RELEASE_PATIENCE: Duration = Duration::from_secs(2);

/// A `StoreError::Backend` of `context` from any displayable cause.
pub(crate) fn backend<E: std::fmt::Display>(context: &'static str) -> impl Fn(E) -> StoreError {
    move |error| StoreError::Backend {
        context,
        message: error.to_string(),
    }
}

/// What a write's body gives back: its value, once its statements ran in the transaction.
type Written<'t, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 't>>;

/// A statement's parameter, for arrays of them bound before statements sent together.
pub(crate) type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// A transaction on a pooled connection, begun and ended by hand rather than with
/// `Client::transaction`, which waits a round trip for BEGIN and another for COMMIT: here BEGIN
/// is sent with the first statements ([`Tx::begin`]) and COMMIT may be sent with the last ones
/// ([`Tx::commit`]). The server runs what one connection is sent in the order sent, and once a
/// statement fails it refuses every later one of the transaction and answers its COMMIT with
/// a rollback, so nothing after a failure is written.
///
/// A transaction dropped without a commit or rollback that the server acknowledged (its future
/// was dropped, or the rollback failed) takes its connection out of the pool and closes it:
/// the server then rolls it back, and no later write can run inside it.
pub(crate) struct Tx {
    client: Option<deadpool_postgres::Object>,
    /// COMMIT was sent (by [`Tx::commit`]).
    committing: AtomicBool,
    /// The server acknowledged a COMMIT or a ROLLBACK: the connection may go back to the pool.
    settled: AtomicBool,
}

impl std::ops::Deref for Tx {
    type Target = deadpool_postgres::ClientWrapper;

    fn deref(&self) -> &deadpool_postgres::ClientWrapper {
        self.client
            .as_ref()
            .unwrap_or_else(|| unreachable!("a transaction has its connection until dropped"))
    }
}

impl Tx {
    fn on(client: deadpool_postgres::Object) -> Tx {
        Tx {
            client: Some(client),
            committing: AtomicBool::new(false),
            settled: AtomicBool::new(false),
        }
    }

    /// Sends BEGIN; the statements polled after this future's first poll run inside the
    /// transaction (the request is sent at once, the answer awaited).
    async fn begin(&self) -> Result<(), tokio_postgres::Error> {
        self.batch_execute("BEGIN").await
    }

    /// A transaction on a connection of `pool`, its BEGIN answered (for callers that have no
    /// statement to send with it).
    pub(crate) async fn begun(
        pool: &deadpool_postgres::Pool,
        context: &'static str,
    ) -> Result<Tx, StoreError> {
        let tx = Tx::on(connect(pool, context).await?);
        tx.begin().await.map_err(pg(context))?;
        Ok(tx)
    }

    /// Sends COMMIT. A body may send it with its last statements (prepared before, so that
    /// each is sent when first polled, and polled before this), which saves the round trip a
    /// commit after them costs; the write then does not commit again.
    pub(crate) async fn commit(&self) -> Result<(), StoreError> {
        self.committing.store(true, Ordering::SeqCst);
        self.batch_execute("COMMIT")
            .await
            .map_err(pg("committing a write"))?;
        self.settled.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Rolls the transaction back (after a failure); a rollback that fails leaves the
    /// connection to be closed when this is dropped.
    pub(crate) async fn rollback(&self) {
        if self.batch_execute("ROLLBACK").await.is_ok() {
            self.settled.store(true, Ordering::SeqCst);
        }
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::SeqCst)
            && let Some(client) = self.client.take()
        {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// The connection's `options` (those of the connection string, if any) with prepared
/// statements planned once: `plan_cache_mode=force_generic_plan`. Left to itself the server
/// plans a statement anew at every run unless its generic plan looks as cheap as the custom
/// ones, which it never does for a write's statement of arrays (`unnest`) and CTEs: planning
/// was a fifth of the server's processor time in an MCP `read_file` call. The store's
/// statements find rows by key, which a generic plan does as well as a custom one. (The setting
/// is PostgreSQL 12's: an older server refuses the connection, naming it.)
fn with_generic_plans(options: Option<&str>) -> String {
    const GENERIC: &str = "-c plan_cache_mode=force_generic_plan";
    match options {
        Some(options) if !options.trim().is_empty() => format!("{options} {GENERIC}"),
        _ => GENERIC.to_owned(),
    }
}

/// `error` and each of its causes, apart by ": " (a server's message or a TLS handshake's
/// reason is a source, not part of the top error's text).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The full chain of a PostgreSQL error.
fn pg(context: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |error| StoreError::Backend {
        context,
        message: chain(&error),
    }
}

/// A connection from `pool`, or why there is none, for `context`.
pub(crate) async fn connect(
    pool: &deadpool_postgres::Pool,
    context: &'static str,
) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(|error| StoreError::Backend {
        context,
        message: chain(&error),
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

impl PgStore {
    /// Connects to the database `url` (`postgres://user:password@host:port/database`, or the
    /// key-value form) and checks that its schema is this build's.
    pub fn connect(url: &str, options: PgOptions) -> Result<PgStore, StoreError> {
        let store = PgStore::unchecked(url, options)?;
        let found = store.schema_version()?;
        if found < SCHEMA_VERSION {
            return Err(StoreError::Backend {
                context: "opening the PostgreSQL store",
                message: format!(
                    "the database's schema is version {found}, this clawsmith needs \
                     {SCHEMA_VERSION}: run `clawsmith store migrate`"
                ),
            });
        }
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                path: "the PostgreSQL database".to_owned(),
                found: i64::from(found),
                supported: i64::from(SCHEMA_VERSION),
            });
        }
        Ok(store)
    }

    /// A store on `url` whose schema is not checked (for `migrate` and `check`).
    pub fn unchecked(url: &str, options: PgOptions) -> Result<PgStore, StoreError> {
        let mut connection = tls::connection(url)?;
        let server_options = with_generic_plans(connection.config.get_options());
        connection.config.options(server_options);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("clawsmith-store-postgres")
            .enable_all()
            .build()
            .map_err(backend("starting the PostgreSQL store's runtime"))?;
        let manager = deadpool_postgres::Manager::from_config(
            connection.config.clone(),
            connection.tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(backend("making the PostgreSQL connection pool"))?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_owned())
            .unwrap_or_else(|_| "host".to_owned());
        let nonce: u64 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos().into());
        Ok(PgStore {
            inner: Arc::new(Inner {
                runtime: Some(runtime),
                pool,
                connection,
                options,
                holder: format!("{host}:{}:{nonce:x}", std::process::id()),
                host,
                held: Mutex::new(HashMap::new()),
                releasing: Mutex::new(Vec::new()),
                pending: Mutex::new(deferred::Queue::default()),
                landed: std::sync::Condvar::new(),
            }),
        })
    }

    /// How the connection string asked for TLS (`sslmode`).
    pub fn tls_mode(&self) -> TlsMode {
        self.inner.connection.mode
    }

    /// Whether the pooled connections are encrypted, as the server sees them (`pg_stat_ssl`).
    pub fn encrypted(&self) -> Result<bool, StoreError> {
        let pool = self.inner.pool.clone();
        self.run(async move {
            let client = connect(&pool, "asking whether the connection is encrypted").await?;
            let row = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .await
                .map_err(pg("asking whether the connection is encrypted"))?;
            Ok(row.get::<_, bool>(0))
        })
    }

    /// This machine's name, as its leases give it.
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// This process's name on the leases it holds (`host:pid:nonce`).
    pub fn holder(&self) -> &str {
        &self.inner.holder
    }

    /// Runs `work` on the store's runtime and waits for it: every call of the traits is
    /// synchronous, and may come from a thread of another runtime.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        // This process reads what it did: records still deferred are written first. Records
        // refused for good (their session was taken over) are dropped, and the read goes on.
        if self.has_pending()
            && let Err(error) = clawsmith_store::DeferredRecords::flush_deferred(self)
            && deferred::may_pass(&error)
        {
            return Err(error);
        }
        self.run_raw(work)
    }

    /// [`PgStore::run`] without writing the deferred records first (a write takes them itself).
    fn run_raw<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.inner.runtime().spawn(async move {
            let _ = answer.send(work.await);
        });
        answered.recv().map_err(|_| StoreError::Backend {
            context: "the PostgreSQL store",
            message: "its runtime stopped".to_owned(),
        })?
    }

    /// The schema version of the database (0: never migrated).
    pub fn schema_version(&self) -> Result<i32, StoreError> {
        let pool = self.inner.pool.clone();
        self.run(async move {
            let client = connect(&pool, "connecting to PostgreSQL").await?;
            schema::version(&client).await
        })
    }

    /// Applies the migrations the database lacks (under an advisory lock): the version before
    /// and after.
    pub fn migrate(&self) -> Result<(i32, i32), StoreError> {
        let pool = self.inner.pool.clone();
        self.run(async move {
            let mut client = connect(&pool, "connecting to PostgreSQL").await?;
            schema::migrate(&mut client).await
        })
    }

    /// The server's version string, when it answers.
    pub fn server_version(&self) -> Result<String, StoreError> {
        let pool = self.inner.pool.clone();
        self.run(async move {
            let client = connect(&pool, "connecting to PostgreSQL").await?;
            let row = client
                .query_one("SHOW server_version", &[])
                .await
                .map_err(pg("asking the server's version"))?;
            Ok(row.get::<_, String>(0))
        })
    }

    /// A listener for other writers' new events, on a connection of its own.
    pub fn follow(&self) -> Result<Follower, StoreError> {
        let connection = self.inner.connection.clone();
        let runtime = self.inner.runtime().handle().clone();
        self.run(async move { follow::listen(connection, runtime).await })
    }

    /// The object store blobs over [`INLINE_MAX`] go to, when there is one.
    pub fn objects(&self) -> Option<&Arc<dyn ObjectStore>> {
        self.inner.options.objects.as_ref()
    }

    /// The leases this store holds, locked.
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch and whether it was lost, of the lease this store holds on `session_id`.
    fn held_epoch(&self, session_id: &str) -> Option<(i64, bool)> {
        let held = self.held();
        held.get(session_id)
            .map(|held| (held.epoch, held.lost.load(Ordering::SeqCst)))
    }

    /// Runs `body` in one transaction fenced by the session's lease, given the epoch the rows
    /// are written under and, when `take` asks for any, the session's next numbers
    /// ([`take_numbers`]). The lease check and the numbering are sent together (one round trip
    /// for both: neither needs the other's answer, and the transaction is refused whole when
    /// the lease check fails). Records deferred before it are written first: in the same
    /// transaction when they are the session's, alone before it otherwise.
    fn write<T: Send + 'static>(
        &self,
        context: &'static str,
        session_id: &str,
        take: Take,
        body: impl for<'t> FnOnce(&'t Tx, i64, (i64, i64)) -> Written<'t, T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let records = self.take_pending_after_landing(session_id);
        self.write_records(context, session_id, take, records, body)
    }

    /// [`PgStore::write`] with the waiting records already taken (`records`).
    fn write_records<T: Send + 'static>(
        &self,
        context: &'static str,
        session_id: &str,
        take: Take,
        mut records: Vec<deferred::Pending>,
        body: impl for<'t> FnOnce(&'t Tx, i64, (i64, i64)) -> Written<'t, T> + Send + 'static,
    ) -> Result<T, StoreError> {
        if records.iter().any(|record| record.session() != session_id) {
            let waiting = records.len();
            match self.write_pending_alone(records) {
                Ok(()) => records = Vec::new(),
                // One session's records were refused for good and dropped; those after them
                // wait again, in order, and are taken from the top (fewer each time).
                Err(error) if !deferred::may_pass(&error) && self.pending_count() < waiting => {
                    return self.write(context, session_id, take, body);
                }
                // A passing failure (the connection) would stop this write too.
                Err(error) => return Err(error),
            }
        }
        self.write_with(context, session_id, take, records, body)
    }

    /// [`PgStore::write`] with `records` (deferred records of the session) written first in
    /// the same transaction; they wait again if it fails.
    fn write_with<T: Send + 'static>(
        &self,
        context: &'static str,
        session_id: &str,
        take: Take,
        records: Vec<deferred::Pending>,
        body: impl for<'t> FnOnce(&'t Tx, i64, (i64, i64)) -> Written<'t, T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let pool = self.inner.pool.clone();
        let mine = self.held_epoch(session_id);
        let holder = self.inner.holder.clone();
        let session_id = session_id.to_owned();
        let before = deferred::takes(&records);
        // Dropped last, after the records are put back if they are.
        let _flown = self.flown(&records);
        let records = Arc::new(records);
        let written = Arc::clone(&records);
        let fenced_session = session_id.clone();
        // Whether a failure is the records' own (the lease check, the numbering, their rows)
        // or the body's, the connection's or the commit's, which leave them as good as before.
        let result = self.run_raw(async move {
            let innocent = |error| (error, false);
            let tx = match connect(&pool, context).await {
                Ok(client) => Tx::on(client),
                Err(error) => return Ok(Err(innocent(error))),
            };
            let outcome = async {
                let all = Take::of(take.messages + before.messages, take.events + before.events);
                // BEGIN, the lease check and the numbering are sent together: one round trip.
                let fenced = async {
                    if all == Take::default() {
                        Ok((fence(&tx, &session_id, mine, &holder).await?, (0, 0)))
                    } else {
                        fence_and_number(&tx, &session_id, mine, &holder, all).await
                    }
                };
                let ((), ((epoch, wanted), first)) = futures_util::try_join!(
                    async { tx.begin().await.map_err(pg(context)).map_err(innocent) },
                    async { fenced.await.map_err(|error| (error, true)) },
                )?;
                // The records' statements are sent first, then the body's, in one round trip.
                let statements = if written.is_empty() {
                    None
                } else {
                    Some(deferred::Statements::prepare(&tx).await.map_err(innocent)?)
                };
                let numbers = (first.0 + before.messages, first.1 + before.events);
                let (stored, value) = futures_util::try_join!(
                    async {
                        match &statements {
                            Some(statements) => {
                                deferred::send(&tx, statements, &written, epoch, first)
                                    .await
                                    .map_err(|error| (error, true))
                            }
                            None => Ok(Vec::new()),
                        }
                    },
                    async { body(&tx, epoch, numbers).await.map_err(innocent) },
                )?;
                if !tx.committing.load(Ordering::SeqCst) {
                    tx.commit().await.map_err(innocent)?;
                }
                let next = (all != Take::default())
                    .then_some((first.0 + all.messages, first.1 + all.events));
                Ok((value, stored, wanted, (epoch, next)))
            };
            let outcome = outcome.await;
            if outcome.is_err() {
                tx.rollback().await;
            }
            Ok(outcome)
        });
        match result {
            Ok(Ok((value, stored, wanted, (epoch, next)))) => {
                for (slot, event) in stored {
                    let _ = slot.set(event);
                }
                if let Some(wanted) = wanted {
                    self.saw_wanted(&fenced_session, wanted);
                }
                if let Some(next) = next {
                    self.saw_next(&fenced_session, epoch, Some(next));
                }
                Ok(value)
            }
            Ok(Err((error, theirs))) => {
                let records = Arc::try_unwrap(records).unwrap_or_else(|shared| (*shared).clone());
                // Records that can never be written (a lease taken over, a turn begun twice)
                // are dropped with the write they refused, or every later write would fail on
                // them; records that were not at fault, or met a passing failure, wait again.
                if !theirs || deferred::may_pass(&error) {
                    self.put_back(records);
                }
                Err(error)
            }
            Err(error) => {
                let records = Arc::try_unwrap(records).unwrap_or_else(|shared| (*shared).clone());
                self.put_back(records);
                Err(error)
            }
        }
    }
}

impl Inner {
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .unwrap_or_else(|| unreachable!("the runtime lives as long as the store"))
    }
}

/// How many message indexes and event sequence numbers a write takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Take {
    messages: i64,
    events: i64,
}

impl Take {
    fn of(messages: i64, events: i64) -> Take {
        Take { messages, events }
    }
}

/// `sql` prepared on `tx`'s connection once (the pool keeps it with the connection): each
/// later run is one round trip, and the server plans it once, where an unprepared query costs
/// a round trip and a parse more every time.
pub(crate) async fn prepared(
    tx: &Tx,
    sql: &str,
    context: &'static str,
) -> Result<tokio_postgres::Statement, StoreError> {
    tx.prepare_cached(sql).await.map_err(pg(context))
}

/// The lease row as a write's check reads it: epoch, holder, whether it is live, seconds left,
/// whether another writer waits for it.
type LeaseRow = (i64, Option<String>, bool, i64, bool);

/// The columns of [`LeaseRow`], of the lease row `l`, the holder asking being `$2` (a literal,
/// so that the statements using it are spelled at compile time, not formatted at every write).
macro_rules! lease_columns {
    () => {
        "l.epoch, l.holder, l.expires_at > now(),
         GREATEST(0, extract(epoch FROM l.expires_at - now()))::bigint,
         l.wanted_until > now() AND l.wanted_by IS DISTINCT FROM $2"
    };
}

fn lease_row(row: &tokio_postgres::Row, first: usize) -> Option<LeaseRow> {
    Some((
        row.get::<_, Option<i64>>(first)?,
        row.get::<_, Option<String>>(first + 1),
        row.get::<_, Option<bool>>(first + 2).unwrap_or(false),
        row.get::<_, Option<i64>>(first + 3).unwrap_or(0),
        row.get::<_, Option<bool>>(first + 4).unwrap_or(false),
    ))
}

/// Checks the session's lease inside a write's transaction (the lease row is locked until the
/// commit, so a takeover waits for it): the epoch to write under and, when this store holds the
/// lease, whether another writer says it waits for it (read with the check, so that a holder
/// asks no more at its next turn: [`PgStore::wanted`]).
async fn fence(
    tx: &Tx,
    session_id: &str,
    mine: Option<(i64, bool)>,
    holder: &str,
) -> Result<(i64, Option<bool>), StoreError> {
    let statement = prepared(
        tx,
        concat!(
            "SELECT ",
            lease_columns!(),
            " FROM clawsmith_leases l WHERE l.session_id = $1 FOR SHARE"
        ),
        "checking the session's lease",
    )
    .await?;
    let row = tx
        .query_opt(&statement, &[&session_id, &holder])
        .await
        .map_err(pg("checking the session's lease"))?;
    judge(
        session_id,
        mine,
        holder,
        row.as_ref().and_then(|row| lease_row(row, 0)),
    )
}

/// [`fence`] and [`take_numbers`] in one statement, judged in that order.
async fn fence_and_number(
    tx: &Tx,
    session_id: &str,
    mine: Option<(i64, bool)>,
    holder: &str,
    take: Take,
) -> Result<((i64, Option<bool>), (i64, i64)), StoreError> {
    let statement = prepared(
        tx,
        concat!(
            "WITH numbered AS (
               UPDATE clawsmith_sessions
               SET next_index = next_index + $3, next_sequence = next_sequence + $4
               WHERE id = $1
               RETURNING next_index - $3 AS idx, next_sequence - $4 AS seq)
             SELECT n.idx, n.seq, ",
            lease_columns!(),
            " FROM (SELECT 1) AS one
               LEFT JOIN numbered n ON true
               LEFT JOIN (SELECT * FROM clawsmith_leases WHERE session_id = $1 FOR SHARE) l
                 ON true"
        ),
        "checking the session's lease",
    )
    .await?;
    let row = tx
        .query_one(
            &statement,
            &[&session_id, &holder, &take.messages, &take.events],
        )
        .await
        .map_err(pg("checking the session's lease"))?;
    let fenced = judge(session_id, mine, holder, lease_row(&row, 2))?;
    let numbers = match (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1)) {
        (Some(index), Some(sequence)) => (index, sequence),
        _ => return Err(StoreError::UnknownSession(session_id.to_owned())),
    };
    Ok((fenced, numbers))
}

/// What a write's lease check decides from the lease row (`current`, `None` without one).
fn judge(
    session_id: &str,
    mine: Option<(i64, bool)>,
    holder: &str,
    current: Option<LeaseRow>,
) -> Result<(i64, Option<bool>), StoreError> {
    match (mine, current) {
        (Some((epoch, _)), Some((current, Some(by), _, _, wanted)))
            if current == epoch && by == holder =>
        {
            Ok((epoch, Some(wanted)))
        }
        (Some((epoch, _)), _) => Err(StoreError::LeaseLost {
            session_id: session_id.to_owned(),
            epoch: u64::try_from(epoch).unwrap_or(0),
        }),
        (None, Some((_, Some(by), true, left, _))) => Err(StoreError::SessionHeldElsewhere {
            session_id: session_id.to_owned(),
            holder: by,
            expires_in_seconds: u64::try_from(left).unwrap_or(0),
        }),
        (None, Some((epoch, _, _, _, _))) => Ok((epoch, None)),
        (None, None) => Ok((0, None)),
    }
}

/// The session's next numbers, taken: `(first index, first sequence)` for `messages` and
/// `events` more; [`StoreError::UnknownSession`] when there is no such session.
async fn take_numbers(
    tx: &Tx,
    session_id: &str,
    messages: i64,
    events: i64,
) -> Result<(i64, i64), StoreError> {
    let statement = prepared(
        tx,
        "UPDATE clawsmith_sessions
         SET next_index = next_index + $2, next_sequence = next_sequence + $3
         WHERE id = $1
         RETURNING next_index - $2, next_sequence - $3",
        "numbering the session's history",
    )
    .await?;
    let row = tx
        .query_opt(&statement, &[&session_id, &messages, &events])
        .await
        .map_err(pg("numbering the session's history"))?;
    row.map(|row| (row.get(0), row.get(1)))
        .ok_or_else(|| StoreError::UnknownSession(session_id.to_owned()))
}

async fn insert_message(
    tx: &Tx,
    session_id: &str,
    index: i64,
    epoch: i64,
    json: &str,
) -> Result<(), StoreError> {
    insert_messages(tx, &[(session_id, index, json)], epoch).await
}

/// Inserts `messages` (session, index, JSON) under `epoch` in one statement.
async fn insert_messages(
    tx: &Tx,
    messages: &[(&str, i64, &str)],
    epoch: i64,
) -> Result<(), StoreError> {
    let statement = prepared(
        tx,
        "INSERT INTO clawsmith_messages (session_id, idx, epoch, message_json)
         SELECT session_id, idx, $3, message_json
         FROM unnest($1::text[], $2::bigint[], $4::text[]) AS m (session_id, idx, message_json)",
        "appending a message",
    )
    .await?;
    let sessions: Vec<&str> = messages.iter().map(|(session, _, _)| *session).collect();
    let indexes: Vec<i64> = messages.iter().map(|(_, index, _)| *index).collect();
    let jsons: Vec<&str> = messages.iter().map(|(_, _, json)| *json).collect();
    tx.execute(&statement, &[&sessions, &indexes, &epoch, &jsons])
        .await
        .map_err(pg("appending a message"))?;
    Ok(())
}

/// Inserts `event` (its sequence set) and, in the same statement, notifies followers (the
/// notification is delivered when the transaction commits).
async fn insert_event(tx: &Tx, event: &Event, epoch: i64) -> Result<(), StoreError> {
    insert_events(tx, &[event], epoch).await
}

/// Inserts `events` (their sequences set) under `epoch` in one statement, which also notifies
/// followers of each session's last one (delivered when the transaction commits).
async fn insert_events(tx: &Tx, events: &[&Event], epoch: i64) -> Result<(), StoreError> {
    let statement = events_statement(tx).await?;
    send_events(tx, &statement, events, epoch).await
}

/// The statement [`send_events`] runs, prepared on `tx`'s connection.
async fn events_statement(tx: &Tx) -> Result<tokio_postgres::Statement, StoreError> {
    prepared(
        tx,
        "WITH inserted AS (
           INSERT INTO clawsmith_events
             (session_id, sequence, epoch, timestamp_ms, type, event_json)
           SELECT session_id, sequence, $3, timestamp_ms, type, event_json
           FROM unnest($1::text[], $2::bigint[], $4::bigint[], $5::text[], $6::text[])
             AS e (session_id, sequence, timestamp_ms, type, event_json)
           RETURNING session_id, sequence)
         SELECT pg_notify('clawsmith_events', session_id || ':' || max(sequence))
         FROM inserted GROUP BY session_id",
        "appending an event",
    )
    .await
}

/// [`insert_events`] with its statement prepared: the request is sent when the future is
/// first polled (it awaits nothing before), so it may go in one round trip with others.
async fn send_events(
    tx: &Tx,
    statement: &tokio_postgres::Statement,
    events: &[&Event],
    epoch: i64,
) -> Result<(), StoreError> {
    let mut sessions = Vec::with_capacity(events.len());
    let mut sequences = Vec::with_capacity(events.len());
    let mut timestamps = Vec::with_capacity(events.len());
    let mut kinds = Vec::with_capacity(events.len());
    let mut jsons = Vec::with_capacity(events.len());
    for event in events {
        sessions.push(event.session_id.as_str());
        sequences.push(i64::try_from(event.sequence).unwrap_or(i64::MAX));
        timestamps.push(i64::try_from(event.timestamp_ms).unwrap_or(i64::MAX));
        kinds.push(event.payload.kind());
        jsons.push(clawsmith_checkpoint::stored_event_json(event)?);
    }
    tx.query(
        statement,
        &[&sessions, &sequences, &epoch, &timestamps, &kinds, &jsons],
    )
    .await
    .map_err(pg("appending an event"))?;
    Ok(())
}

fn session_info(row: &tokio_postgres::Row) -> SessionInfo {
    SessionInfo {
        id: row.get(0),
        parent_id: row.get(1),
        created_at_ms: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
        workspace_root: row.get(3),
    }
}

async fn require_session(client: &impl GenericClient, session_id: &str) -> Result<(), StoreError> {
    let found = client
        .query_opt(
            "SELECT 1 FROM clawsmith_sessions WHERE id = $1",
            &[&session_id],
        )
        .await
        .map_err(pg("reading a session"))?;
    match found {
        Some(_) => Ok(()),
        None => Err(StoreError::UnknownSession(session_id.to_owned())),
    }
}

fn json_error(context: &'static str) -> impl Fn(serde_json::Error) -> StoreError {
    move |error| StoreError::Backend {
        context,
        message: error.to_string(),
    }
}

impl SessionStore for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn database_path(&self) -> Option<&std::path::Path> {
        None
    }

    fn journal_has_call(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
    ) -> Result<bool, StoreError> {
        self.journal_has_call_in(session_id, turn_id, call_id)
    }

    fn close_call_with_message(
        &self,
        session_id: &str,
        journaled: Option<(&str, ToolStatus)>,
        completed: clawsmith_protocol::ToolCompleted,
        timestamp_ms: u64,
        summary: clawsmith_protocol::ToolResultSummary,
    ) -> Result<Event, StoreError> {
        self.close_call_with_message_in(session_id, journaled, completed, timestamp_ms, summary)
    }

    /// A repository is kept when this store has a mirror folder for its objects on this machine
    /// ([`PgOptions::repository_mirror`]); otherwise commands' changes to `.git` are named as not
    /// captured.
    fn repository_keeper(&self) -> Option<&dyn clawsmith_store::RepositoryKeeper> {
        self.inner
            .options
            .repository_mirror
            .as_ref()
            .map(|_| self as &dyn clawsmith_store::RepositoryKeeper)
    }

    fn create_session(&self, id: &str, workspace_root: &str) -> Result<SessionInfo, StoreError> {
        let pool = self.inner.pool.clone();
        let (id, root) = (id.to_owned(), workspace_root.to_owned());
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.run(async move {
            let client = connect(&pool, "creating a session").await?;
            let row = client
                .query_opt(
                    "INSERT INTO clawsmith_sessions (id, parent_id, created_at_ms, workspace_root)
                     VALUES ($1, NULL, $2, $3) ON CONFLICT (id) DO NOTHING
                     RETURNING id, parent_id, created_at_ms, workspace_root",
                    &[&id, &now, &root],
                )
                .await
                .map_err(pg("creating a session"))?;
            row.map(|row| session_info(&row))
                .ok_or(StoreError::SessionExists(id))
        })
    }

    fn create_child_session(
        &self,
        id: &str,
        parent_id: &str,
        workspace_root: &str,
    ) -> Result<SessionInfo, StoreError> {
        let pool = self.inner.pool.clone();
        let (id, parent, root) = (
            id.to_owned(),
            parent_id.to_owned(),
            workspace_root.to_owned(),
        );
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.run(async move {
            let client = connect(&pool, "creating a child session").await?;
            let row = client
                .query_opt(
                    "INSERT INTO clawsmith_sessions (id, parent_id, created_at_ms, workspace_root)
                     SELECT $1, $2, $3, $4
                     WHERE EXISTS (SELECT 1 FROM clawsmith_sessions WHERE id = $2)
                     ON CONFLICT (id) DO NOTHING
                     RETURNING id, parent_id, created_at_ms, workspace_root",
                    &[&id, &parent, &now, &root],
                )
                .await
                .map_err(pg("creating a child session"))?;
            if let Some(row) = row {
                return Ok(session_info(&row));
            }
            let exists = client
                .query_opt("SELECT 1 FROM clawsmith_sessions WHERE id = $1", &[&id])
                .await
                .map_err(pg("creating a child session"))?;
            Err(match exists {
                Some(_) => StoreError::SessionExists(id),
                None => StoreError::UnknownSession(parent),
            })
        })
    }

    fn fork_session(&self, parent_id: &str, new_id: &str) -> Result<SessionInfo, StoreError> {
        self.fork_session_in(parent_id, new_id)
    }

    fn get_session(&self, id: &str) -> Result<Option<SessionInfo>, StoreError> {
        let pool = self.inner.pool.clone();
        let id = id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading a session").await?;
            let row = client
                .query_opt(
                    "SELECT id, parent_id, created_at_ms, workspace_root
                     FROM clawsmith_sessions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(pg("reading a session"))?;
            Ok(row.map(|row| session_info(&row)))
        })
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let pool = self.inner.pool.clone();
        self.run(async move {
            let client = connect(&pool, "listing sessions").await?;
            let rows = client
                .query(
                    "SELECT id, parent_id, created_at_ms, workspace_root FROM clawsmith_sessions
                     ORDER BY created_at_ms DESC, id DESC",
                    &[],
                )
                .await
                .map_err(pg("listing sessions"))?;
            Ok(rows.iter().map(session_info).collect())
        })
    }

    fn append_message(&self, session_id: &str, message: &ModelMessage) -> Result<u64, StoreError> {
        let json = clawsmith_checkpoint::stored_message_json(message)?;
        let session = session_id.to_owned();
        self.write(
            "appending a message",
            session_id,
            Take::of(1, 0),
            move |tx, epoch, numbers| {
                Box::pin(async move {
                    let (index, _) = numbers;
                    insert_message(tx, &session, index, epoch, &json).await?;
                    Ok(u64::try_from(index).unwrap_or(0))
                })
            },
        )
    }

    fn messages_page(
        &self,
        session_id: &str,
        from_index: u64,
        limit: u64,
    ) -> Result<Vec<ModelMessage>, StoreError> {
        self.page(
            "reading messages",
            "SELECT message_json FROM clawsmith_messages
             WHERE session_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3",
            session_id,
            from_index,
            limit,
        )
    }

    fn append_event(
        &self,
        session_id: &str,
        payload: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        // When this store holds the lease and knows the session's next numbers, and nothing of
        // another session waits, the event is a record written at once: one round trip.
        let payload = if self.known_next(session_id).is_some() {
            match self.append_as_record(session_id, payload, timestamp_ms) {
                Ok(event) => return event,
                Err(unsent) => *unsent,
            }
        } else {
            payload
        };
        let session = session_id.to_owned();
        self.write(
            "appending an event",
            session_id,
            Take::of(0, 1),
            move |tx, epoch, numbers| {
                Box::pin(async move {
                    let (_, sequence) = numbers;
                    let event = Event {
                        session_id: session,
                        sequence: u64::try_from(sequence).unwrap_or(0),
                        timestamp_ms,
                        payload,
                    };
                    // The row and COMMIT in one round trip (the statement prepared first, so
                    // that it is sent before COMMIT).
                    let statement = events_statement(tx).await?;
                    let rows = [&event];
                    futures_util::try_join!(
                        send_events(tx, &statement, &rows, epoch),
                        tx.commit()
                    )?;
                    Ok(event)
                })
            },
        )
    }

    fn events_page(
        &self,
        session_id: &str,
        after_sequence: u64,
        limit: u64,
    ) -> Result<Vec<Event>, StoreError> {
        self.page(
            "reading events",
            "SELECT event_json FROM clawsmith_events
             WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
            session_id,
            after_sequence,
            limit,
        )
    }

    fn last_event_sequence(&self, session_id: &str) -> Result<u64, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading the event sequence").await?;
            // A follower may ask before the session exists: 0, as for a session without events.
            let statement = client
                .prepare_cached("SELECT next_sequence - 1 FROM clawsmith_sessions WHERE id = $1")
                .await
                .map_err(pg("reading the event sequence"))?;
            let row = client
                .query_opt(&statement, &[&session])
                .await
                .map_err(pg("reading the event sequence"))?;
            Ok(row.map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
        })
    }

    fn start_call(
        &self,
        session_id: &str,
        assistant: Option<&ModelMessage>,
        journal: Option<&JournalStart>,
        started: EventPayload,
        timestamp_ms: u64,
    ) -> Result<Event, StoreError> {
        let assistant = assistant
            .map(clawsmith_checkpoint::stored_message_json)
            .transpose()?;
        let journal = journal.cloned();
        let session = session_id.to_owned();
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.write(
            "starting a call",
            session_id,
            Take::of(i64::from(assistant.is_some()), 1),
            move |tx, epoch, numbers| {
                Box::pin(async move {
                    let (index, sequence) = numbers;
                    if let Some(json) = &assistant {
                        insert_message(tx, &session, index, epoch, json).await?;
                    }
                    if let Some(start) = &journal {
                        let statement = prepared(
                            tx,
                            "INSERT INTO clawsmith_journal
                         (session_id, turn_id, call_id, tool_name, args_json, started_at_ms, epoch)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                            "journaling a call",
                        )
                        .await?;
                        tx.execute(
                            &statement,
                            &[
                                &session,
                                &start.turn_id,
                                &start.call_id,
                                &start.tool_name,
                                &clawsmith_checkpoint::stored_arguments(&start.args_json),
                                &now,
                                &epoch,
                            ],
                        )
                        .await
                        .map_err(pg("journaling a call"))?;
                    }
                    let event = Event {
                        session_id: session,
                        sequence: u64::try_from(sequence).unwrap_or(0),
                        timestamp_ms,
                        payload: started,
                    };
                    insert_event(tx, &event, epoch).await?;
                    Ok(event)
                })
            },
        )
    }

    fn journal_close(
        &self,
        session_id: &str,
        call_id: &str,
        status: ToolStatus,
    ) -> Result<bool, StoreError> {
        let (session, call) = (session_id.to_owned(), call_id.to_owned());
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.write(
            "closing a journaled call",
            session_id,
            Take::default(),
            move |tx, _, _| {
                Box::pin(async move {
                    let statement = prepared(
                        tx,
                        "UPDATE clawsmith_journal SET closed_at_ms = $3, status = $4
                     WHERE session_id = $1 AND call_id = $2 AND closed_at_ms IS NULL",
                        "closing a journaled call",
                    )
                    .await?;
                    let changed = tx
                        .execute(&statement, &[&session, &call, &now, &status.as_str()])
                        .await
                        .map_err(pg("closing a journaled call"))?;
                    Ok(changed > 0)
                })
            },
        )
    }

    fn unfinished_calls(&self, session_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        self.run(async move {
            let client = connect(&pool, "reading the journal").await?;
            require_session(&**client, &session).await?;
            let rows = client
                .query(
                    "SELECT session_id, turn_id, call_id, tool_name, args_json, started_at_ms
                     FROM clawsmith_journal WHERE session_id = $1 AND closed_at_ms IS NULL
                     ORDER BY started_at_ms, turn_id, call_id",
                    &[&session],
                )
                .await
                .map_err(pg("reading the journal"))?;
            Ok(rows
                .iter()
                .map(|row| JournalEntry {
                    session_id: row.get(0),
                    turn_id: row.get(1),
                    call_id: row.get(2),
                    tool_name: row.get(3),
                    args_json: row.get(4),
                    started_at_ms: u64::try_from(row.get::<_, i64>(5)).unwrap_or(0),
                    closed_at_ms: None,
                    status: None,
                })
                .collect())
        })
    }

    fn lease_session(&self, session_id: &str) -> Result<Lease, StoreError> {
        {
            let mut held = self.held();
            if let Some(entry) = held.get_mut(session_id)
                && !entry.lost.load(Ordering::SeqCst)
            {
                entry.holders += 1;
                return Ok(Lease::new(PgLease {
                    store: self.clone(),
                    session_id: session_id.to_owned(),
                    epoch: entry.epoch,
                    fresh: false,
                    released: false,
                }));
            }
        }
        let epoch = loop {
            match self.try_take(session_id)? {
                Ok(epoch) => break epoch,
                Err(busy) if !self.inner.options.wait_for_lease => return Err(busy),
                Err(_) => {
                    // Said again at every try, so it lapses soon after a waiter gives up.
                    self.want(session_id)?;
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        let lost = Arc::new(AtomicBool::new(false));
        let renewal = self.inner.runtime().spawn(renew(
            self.inner.pool.clone(),
            session_id.to_owned(),
            epoch,
            self.inner.holder.clone(),
            self.inner.options.lease_ttl,
            Arc::clone(&lost),
        ));
        let mut held = self.held();
        if let Some(old) = held.insert(
            session_id.to_owned(),
            Held {
                holders: 1,
                epoch,
                lost,
                renewal,
                wanted: None,
                next: None,
            },
        ) {
            old.renewal.abort();
        }
        Ok(Lease::new(PgLease {
            store: self.clone(),
            session_id: session_id.to_owned(),
            epoch,
            fresh: true,
            released: false,
        }))
    }

    fn yield_lease(&self, lease: Lease) -> Result<Lease, StoreError> {
        let session_id = lease.session_id().to_owned();
        let Some(mut hold) = lease.into_hold::<PgLease>() else {
            return Err(StoreError::Backend {
                context: "yielding a lease",
                message: "a lease of another store was given to the PostgreSQL store".to_owned(),
            });
        };
        // The hold is given up here, awaited; its drop must not release it a second time.
        hold.released = true;
        self.release_now(&session_id, hold.epoch)?;
        self.await_taker(&session_id, YIELD_PATIENCE)?;
        self.lease_session(&session_id)
    }

    fn put_artifact(&self, session_id: &str, content: &[u8]) -> Result<ArtifactRef, StoreError> {
        self.put_artifact_in(session_id, content)
    }

    fn read_artifact(
        &self,
        session_id: &str,
        artifact_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_artifact_in(session_id, artifact_id)
    }

    fn set_todos(&self, session_id: &str, todos: Vec<Todo>) -> Result<(), StoreError> {
        self.set_todos_in(session_id, todos)
    }

    fn todos(&self, session_id: &str) -> Result<Vec<Todo>, StoreError> {
        self.todos_in(session_id)
    }

    fn add_pending_approval(
        &self,
        session_id: &str,
        approval: &PendingApproval,
    ) -> Result<(), StoreError> {
        self.add_pending_approval_in(session_id, approval)
    }

    fn resolve_pending_approval(
        &self,
        session_id: &str,
        approval_id: &str,
    ) -> Result<bool, StoreError> {
        self.resolve_pending_approval_in(session_id, approval_id)
    }

    fn pending_approvals(&self, session_id: &str) -> Result<Vec<PendingApproval>, StoreError> {
        self.pending_approvals_in(session_id)
    }

    fn last_event_of_kind(
        &self,
        session_id: &str,
        kind: &str,
    ) -> Result<Option<Event>, StoreError> {
        self.last_event_of_kind_in(session_id, kind)
    }

    fn has_unfinished_work(&self, session_id: &str) -> Result<bool, StoreError> {
        self.has_unfinished_work_in(session_id)
    }

    fn follow_events(&self) -> Result<Option<Box<dyn clawsmith_store::EventFollower>>, StoreError> {
        Ok(Some(Box::new(self.follow()?)))
    }

    fn undo_store(&self) -> Result<&dyn clawsmith_store::UndoStore, &'static str> {
        Ok(self)
    }
}

impl PgStore {
    fn put_artifact_in(&self, session_id: &str, content: &[u8]) -> Result<ArtifactRef, StoreError> {
        let masked = std::str::from_utf8(content)
            .ok()
            .map(clawsmith_protocol::redact::redact_text);
        let content = masked.as_ref().map_or(content, String::as_bytes).to_vec();
        let objects = self.inner.options.objects.clone();
        let session = session_id.to_owned();
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        self.write(
            "storing an artifact",
            session_id,
            Take::default(),
            move |tx, epoch, _| {
                Box::pin(async move {
                    require_session(&***tx, &session).await?;
                    let bytes = content.len() as u64;
                    let lines = clawsmith_checkpoint::line_count(&content);
                    let hash = blobs::put_in(tx, objects.as_deref(), content).await?;
                    let existing = tx
                        .query_opt(
                            "SELECT artifact_id FROM clawsmith_artifacts
                         WHERE session_id = $1 AND blob_hash = $2
                         ORDER BY created_at_ms, artifact_id LIMIT 1",
                            &[&session, &hash],
                        )
                        .await
                        .map_err(pg("storing an artifact"))?;
                    let artifact_id = match existing {
                        Some(row) => row.get(0),
                        None => {
                            let id = clawsmith_protocol::id::new_id(
                                clawsmith_protocol::id::IdKind::Artifact,
                            );
                            tx.execute(
                                "INSERT INTO clawsmith_artifacts
                             (session_id, artifact_id, blob_hash, size, lines, created_at_ms, epoch)
                             VALUES ($1, $2, $3, $4, $5, $6, $7)",
                                &[
                                    &session,
                                    &id,
                                    &hash,
                                    &i64::try_from(bytes).unwrap_or(i64::MAX),
                                    &i64::try_from(lines).unwrap_or(i64::MAX),
                                    &now,
                                    &epoch,
                                ],
                            )
                            .await
                            .map_err(pg("storing an artifact"))?;
                            id
                        }
                    };
                    Ok(ArtifactRef {
                        artifact_id,
                        bytes,
                        lines: Some(lines),
                        sha256: Some(hash),
                    })
                })
            },
        )
    }

    /// The rows `sql` selects for the session `$1`, from `$2`, at most `$3`, each one JSON
    /// column read as a `T`; [`StoreError::UnknownSession`] when there is no such session.
    fn page<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        context: &'static str,
        sql: &'static str,
        session_id: &str,
        from: u64,
        limit: u64,
    ) -> Result<Vec<T>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(async move {
            let client = connect(&pool, context).await?;
            // Whether the session exists and its page, asked together (one round trip).
            let exists = client
                .prepare_cached("SELECT 1 FROM clawsmith_sessions WHERE id = $1")
                .await
                .map_err(pg(context))?;
            let page = client.prepare_cached(sql).await.map_err(pg(context))?;
            let (one, three): (
                [&(dyn tokio_postgres::types::ToSql + Sync); 1],
                [&(dyn tokio_postgres::types::ToSql + Sync); 3],
            ) = ([&session], [&session, &from, &limit]);
            let (exists, rows) = futures_util::try_join!(
                client.query_opt(&exists, &one),
                client.query(&page, &three),
            )
            .map_err(pg(context))?;
            if exists.is_none() {
                return Err(StoreError::UnknownSession(session));
            }
            rows.iter()
                .map(|row| serde_json::from_str(row.get::<_, &str>(0)).map_err(json_error(context)))
                .collect()
        })
    }

    /// Takes the session's lease when nobody holds it, the holder's lease expired, or the
    /// holder is this store (its release, sent when its last holder went, has not landed yet):
    /// the new epoch, or the error that says who holds it.
    #[allow(clippy::type_complexity)]
    fn try_take(&self, session_id: &str) -> Result<Result<i64, StoreError>, StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        let ttl = interval(self.inner.options.lease_ttl);
        self.run(async move {
            let client = connect(&pool, "taking a lease").await?;
            client
                .execute(
                    "INSERT INTO clawsmith_leases (session_id) VALUES ($1)
                     ON CONFLICT (session_id) DO NOTHING",
                    &[&session],
                )
                .await
                .map_err(pg("taking a lease"))?;
            let taken = client
                .query_opt(
                    "UPDATE clawsmith_leases
                     SET epoch = epoch + 1, holder = $2, expires_at = now() + $3::text::interval,
                         wanted_by = CASE WHEN wanted_by = $2 THEN NULL ELSE wanted_by END,
                         wanted_until = CASE WHEN wanted_by = $2 THEN NULL ELSE wanted_until END
                     WHERE session_id = $1
                       AND (holder IS NULL OR expires_at < now() OR holder = $2)
                     RETURNING epoch",
                    &[&session, &holder, &ttl],
                )
                .await
                .map_err(pg("taking a lease"))?;
            if let Some(row) = taken {
                return Ok(Ok(row.get(0)));
            }
            let row = client
                .query_opt(
                    "SELECT holder, GREATEST(0, extract(epoch FROM expires_at - now()))::bigint
                     FROM clawsmith_leases WHERE session_id = $1",
                    &[&session],
                )
                .await
                .map_err(pg("reading a lease"))?;
            let (by, left) = row.map_or((None, 0), |row| {
                (
                    row.get::<_, Option<String>>(0),
                    row.get::<_, Option<i64>>(1).unwrap_or(0),
                )
            });
            Ok(Err(StoreError::SessionHeldElsewhere {
                session_id: session,
                holder: by.unwrap_or_else(|| "another writer".to_owned()),
                expires_in_seconds: u64::try_from(left).unwrap_or(0),
            }))
        })
    }

    /// Says that this store waits for `session_id`'s lease, for the next second.
    fn want(&self, session_id: &str) -> Result<(), StoreError> {
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        self.run(async move {
            let client = connect(&pool, "waiting for a lease").await?;
            client
                .execute(
                    "UPDATE clawsmith_leases
                     SET wanted_by = $2, wanted_until = now() + interval '1 second'
                     WHERE session_id = $1",
                    &[&session, &holder],
                )
                .await
                .map_err(pg("waiting for a lease"))?;
            Ok(())
        })
    }

    /// Whether another writer said it waits for `session_id`'s lease (and still does). The
    /// answer of the last write's lease check is taken when it is younger than
    /// [`WANTED_FRESH`] (a holder writing turn after turn asks the server nothing more); a
    /// writer that said so after that check is seen at the next turn.
    fn wanted(&self, session_id: &str) -> Result<bool, StoreError> {
        let seen = self.held().get(session_id).and_then(|held| held.wanted);
        if let Some((at, wanted)) = seen
            && at.elapsed() < WANTED_FRESH
        {
            return Ok(wanted);
        }
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        let wanted = self.run(async move {
            let client = connect(&pool, "asking whether a lease is wanted").await?;
            let statement = client
                .prepare_cached(
                    "SELECT wanted_until > now() AND wanted_by IS DISTINCT FROM $2
                     FROM clawsmith_leases WHERE session_id = $1",
                )
                .await
                .map_err(pg("asking whether a lease is wanted"))?;
            let row = client
                .query_opt(&statement, &[&session, &holder])
                .await
                .map_err(pg("asking whether a lease is wanted"))?;
            Ok(row
                .and_then(|row| row.get::<_, Option<bool>>(0))
                .unwrap_or(false))
        })?;
        self.saw_wanted(session_id, wanted);
        Ok(wanted)
    }

    /// Notes `session_id`'s next numbers as a write under `epoch` left them (`None`: not known).
    pub(crate) fn saw_next(&self, session_id: &str, epoch: i64, next: Option<(i64, i64)>) {
        if let Some(held) = self.held().get_mut(session_id)
            && held.epoch == epoch
        {
            held.next = next;
        }
    }

    /// The epoch this store holds `session_id`'s lease at and the session's next numbers as
    /// its last write left them, when it holds the lease and knows them.
    pub(crate) fn known_next(&self, session_id: &str) -> Option<(i64, (i64, i64))> {
        let held = self.held();
        let held = held.get(session_id)?;
        Some((held.epoch, held.next?))
    }

    /// Notes whether another writer waits for `session_id`'s lease, as read now.
    fn saw_wanted(&self, session_id: &str, wanted: bool) {
        if let Some(held) = self.held().get_mut(session_id) {
            held.wanted = Some((std::time::Instant::now(), wanted));
        }
    }

    /// Lets go of the lease row at once (awaited, where a dropped lease's release is sent):
    /// the waiter may take it as soon as this returns.
    fn release_now(&self, session_id: &str, epoch: i64) -> Result<(), StoreError> {
        {
            let mut held = self.held();
            match held.get_mut(session_id) {
                Some(entry) if entry.epoch == epoch && entry.holders > 1 => {
                    // Shared in this process: the others keep it, nothing to give up.
                    entry.holders -= 1;
                    return Ok(());
                }
                Some(entry) if entry.epoch == epoch => {
                    if let Some(entry) = held.remove(session_id) {
                        entry.renewal.abort();
                    }
                }
                _ => return Ok(()),
            }
        }
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        self.run(async move {
            let client = connect(&pool, "yielding a lease").await?;
            client
                .execute(
                    "UPDATE clawsmith_leases SET holder = NULL, expires_at = NULL
                     WHERE session_id = $1 AND epoch = $2 AND holder = $3",
                    &[&session, &epoch, &holder],
                )
                .await
                .map_err(pg("yielding a lease"))?;
            Ok(())
        })
    }

    /// Waits until the writer that wanted `session_id`'s lease took it or stopped waiting, for
    /// at most `patience`.
    fn await_taker(&self, session_id: &str, patience: Duration) -> Result<(), StoreError> {
        let deadline = std::time::Instant::now() + patience;
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        loop {
            let (pool, session, holder) = (pool.clone(), session.clone(), holder.clone());
            let settled = self.run(async move {
                let client = connect(&pool, "yielding a lease").await?;
                let row = client
                    .query_opt(
                        "SELECT (holder IS NOT NULL AND holder <> $2)
                                OR wanted_until IS NULL OR wanted_until <= now()
                         FROM clawsmith_leases WHERE session_id = $1",
                        &[&session, &holder],
                    )
                    .await
                    .map_err(pg("yielding a lease"))?;
                Ok(row.is_none_or(|row| row.get::<_, Option<bool>>(0).unwrap_or(true)))
            })?;
            if settled || std::time::Instant::now() >= deadline {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One holder of `session_id`'s lease is gone; the last one releases the row.
    fn release(&self, session_id: &str, epoch: i64) {
        let mut held = self.held();
        let Some(entry) = held.get_mut(session_id) else {
            return;
        };
        if entry.epoch != epoch {
            return;
        }
        entry.holders -= 1;
        if entry.holders > 0 {
            return;
        }
        if let Some(entry) = held.remove(session_id) {
            entry.renewal.abort();
        }
        let pool = self.inner.pool.clone();
        let session = session_id.to_owned();
        let holder = self.inner.holder.clone();
        // Not waited for here (the store's drop waits for what is still in flight): a lease
        // whose release is lost expires on its own.
        let task = self.inner.runtime().spawn(async move {
            if let Ok(client) = pool.get().await {
                let _ = client
                    .execute(
                        "UPDATE clawsmith_leases SET holder = NULL, expires_at = NULL
                         WHERE session_id = $1 AND epoch = $2 AND holder = $3",
                        &[&session, &epoch, &holder],
                    )
                    .await;
            }
        });
        let mut releasing = self
            .inner
            .releasing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        releasing.retain(|task| !task.is_finished());
        releasing.push(task);
    }
}

/// `duration` as a PostgreSQL interval literal.
fn interval(duration: Duration) -> String {
    format!("{} milliseconds", duration.as_millis().max(1))
}

/// Renews a lease every third of its lifetime until it is lost (another writer took it).
async fn renew(
    pool: deadpool_postgres::Pool,
    session_id: String,
    epoch: i64,
    holder: String,
    ttl: Duration,
    lost: Arc<AtomicBool>,
) {
    let every = (ttl / 3).max(Duration::from_millis(50));
    let ttl = interval(ttl);
    loop {
        tokio::time::sleep(every).await;
        let Ok(client) = pool.get().await else {
            continue;
        };
        let renewed = client
            .execute(
                "UPDATE clawsmith_leases SET expires_at = now() + $4::text::interval
                 WHERE session_id = $1 AND epoch = $2 AND holder = $3",
                &[&session_id, &epoch, &holder, &ttl],
            )
            .await;
        if matches!(renewed, Ok(0)) {
            tracing::warn!(session = %session_id, epoch, "the session's lease was taken over");
            lost.store(true, Ordering::SeqCst);
            return;
        }
    }
}

/// A lease of [`PgStore`].
#[derive(Debug)]
struct PgLease {
    store: PgStore,
    session_id: String,
    epoch: i64,
    fresh: bool,
    /// Given up already ([`SessionStore::yield_lease`]): dropping it releases nothing.
    released: bool,
}

impl LeaseHold for PgLease {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn is_fresh(&self) -> bool {
        self.fresh
    }

    fn epoch(&self) -> Option<u64> {
        u64::try_from(self.epoch).ok()
    }

    /// One query: a writer waiting says so in the lease's row, for a second at a time.
    fn is_wanted(&self) -> bool {
        self.store.wanted(&self.session_id).unwrap_or(false)
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        if !self.released {
            self.store.release(&self.session_id, self.epoch);
        }
    }
}

impl PgStore {
    fn read_artifact_in(
        &self,
        session_id: &str,
        artifact_id: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let (session, artifact) = (session_id.to_owned(), artifact_id.to_owned());
        self.run(async move {
            let client = connect(&pool, "reading an artifact").await?;
            let Some(row) = client
                .query_opt(
                    "SELECT blob_hash FROM clawsmith_artifacts
                     WHERE session_id = $1 AND artifact_id = $2",
                    &[&session, &artifact],
                )
                .await
                .map_err(pg("reading an artifact"))?
            else {
                return Ok(None);
            };
            let hash: String = row.get(0);
            let mut sha256 = [0_u8; 32];
            hex::decode_to_slice(&hash, &mut sha256).map_err(backend("reading an artifact"))?;
            match blobs::get_with(&**client, objects.as_deref(), sha256).await? {
                Some(bytes) => Ok(Some(bytes)),
                None => Err(StoreError::MissingBlob(hash)),
            }
        })
    }
}

impl BlobStore for PgStore {
    fn put_blobs(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let contents: Vec<Vec<u8>> = contents.iter().map(|content| content.to_vec()).collect();
        self.run(async move { blobs::put(&pool, objects.as_deref(), contents).await })
    }

    fn get_blob(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        let pool = self.inner.pool.clone();
        let objects = self.inner.options.objects.clone();
        let sha256 = *sha256;
        self.run(async move { blobs::get(&pool, objects.as_deref(), sha256).await })
    }

    fn stored_hashes(
        &self,
        hashes: &[[u8; 32]],
    ) -> Result<std::collections::HashSet<[u8; 32]>, StoreError> {
        self.stored_hashes_in(hashes)
    }
}

#[cfg(test)]
mod tests {
    use super::with_generic_plans;

    /// Generic plans are asked for whatever options the connection string gives, and those
    /// stay, ahead of it.
    #[test]
    fn the_connections_options_keep_the_strings_own_and_ask_for_generic_plans() {
        let generic = "-c plan_cache_mode=force_generic_plan";
        for (given, expected) in [
            (None, generic.to_owned()),
            (Some(""), generic.to_owned()),
            (Some("  "), generic.to_owned()),
            (
                Some("-c statement_timeout=5000"),
                format!("-c statement_timeout=5000 {generic}"),
            ),
            (
                Some("-c search_path=a -c work_mem=8MB"),
                format!("-c search_path=a -c work_mem=8MB {generic}"),
            ),
        ] {
            assert_eq!(with_generic_plans(given), expected, "{given:?}");
        }
    }
}
