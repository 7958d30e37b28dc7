//! The one error type of the store.

/// Why a store operation failed. Refusals that a person should read as an answer (an undo
/// conflict, an already-undone turn) are not errors: they are [`crate::UndoOutcome`] values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file could not be opened at all (permissions, missing directory…).
    #[error("cannot open the clawsmith database {path}: {message}")]
    Open {
        /// The database file.
        path: String,
        /// SQLite's explanation.
        message: String,
    },
    /// The file exists but is not a readable SQLite database (garbage, truncated, corrupt).
    #[error(
        "{path} is not a usable clawsmith database ({message}); move it away or choose another file"
    )]
    NotADatabase {
        /// The database file.
        path: String,
        /// SQLite's explanation.
        message: String,
    },
    /// The file was written by a newer clawsmith.
    #[error(
        "the database {path} has schema version {found}, newer than this build supports ({supported}); upgrade clawsmith"
    )]
    SchemaTooNew {
        /// The database file.
        path: String,
        /// `PRAGMA user_version` of the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// Any other SQLite failure.
    ///
    /// The cause is part of the message (tool results quote the message alone), so it is not
    /// also returned as `source()`: a chain of causes prints it once.
    #[error("database error while {context}: {cause}")]
    Sqlite {
        /// What the store was doing.
        context: &'static str,
        /// The underlying error.
        cause: rusqlite::Error,
    },
    /// A stored JSON document did not parse (or a value did not serialize).
    /// The cause is in the message, not returned as `source()` (printed once).
    #[error("invalid stored JSON while {context}: {cause}")]
    Json {
        /// What the store was doing.
        context: &'static str,
        /// The underlying error.
        cause: serde_json::Error,
    },
    /// No session with this id.
    #[error("unknown session: {0}")]
    UnknownSession(String),
    /// A session with this id already exists.
    #[error("session already exists: {0}")]
    SessionExists(String),
    /// No checkpoint for this turn in this session.
    #[error("unknown turn {turn_id} in session {session_id}")]
    UnknownTurn {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
    },
    /// `begin_turn` for a turn that already has a checkpoint.
    #[error("turn {turn_id} of session {session_id} already has a checkpoint")]
    TurnExists {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
    },
    /// A change was reported for a turn that is finished or undone.
    #[error("turn {turn_id} of session {session_id} is {state}; it takes no more changes")]
    TurnClosed {
        /// The session.
        session_id: String,
        /// The turn.
        turn_id: String,
        /// `finished` or `undone`.
        state: String,
    },
    /// A todo list that breaks the rules (duplicate ids, two items in progress…).
    #[error("invalid todo list: {0}")]
    InvalidTodos(String),
    /// A workspace operation failed during a restore or a manifest.
    #[error("workspace error on {path}: {message}")]
    Workspace {
        /// The workspace-relative path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// An undo of this session is being restored, or one was interrupted and is finished the
    /// next time the session is opened.
    #[error(
        "session {0} has an undo in progress (or one a crash interrupted, which the next command on this session finishes); try again"
    )]
    RestoreInProgress(String),
    /// Another process holds the session's lease (one writer per session).
    #[error("session {session_id} is in use by {}; wait for it to finish, or pass --wait", .pid.map_or_else(|| "another process".to_string(), |pid| format!("pid {pid}")))]
    SessionInUse {
        /// The session.
        session_id: String,
        /// The holder, when it has said who it is.
        pid: Option<u32>,
    },
    /// Another host's process holds the session's lease (a store shared by several machines).
    #[error(
        "session {session_id} is in use by {holder} until its lease expires in at most {expires_in_seconds} s; wait for it to finish, or pass --wait"
    )]
    SessionHeldElsewhere {
        /// The session.
        session_id: String,
        /// Who holds it (`host:pid`).
        holder: String,
        /// When its lease runs out unless renewed.
        expires_in_seconds: u64,
    },
    /// This process's lease on the session was taken over (a writer that paused longer than
    /// the lease lasts): the write is refused, so no row of a stale writer lands.
    #[error(
        "session {session_id} was taken over by another writer (this writer's lease epoch {epoch} is stale); nothing was written"
    )]
    LeaseLost {
        /// The session.
        session_id: String,
        /// The epoch this writer held.
        epoch: u64,
    },
    /// A store other than the SQLite file failed (PostgreSQL, object storage): what it was
    /// doing and what the server or client said.
    #[error("{context}: {message}")]
    Backend {
        /// What the store was doing.
        context: &'static str,
        /// The cause, as the server or client gave it.
        message: String,
    },
    /// The session's lock file could not be opened or locked.
    #[error("cannot lock {path}: {message}")]
    Lease {
        /// The lock file.
        path: String,
        /// Why.
        message: String,
    },
    /// A blob a checkpoint refers to is gone (the database was edited by hand).
    #[error("blob {0} is missing from the store")]
    MissingBlob(String),
    /// A stored blob's content no longer hashes to its name (the database file is damaged or was
    /// edited by hand). Nothing is written from it.
    #[error(
        "blob {0} no longer matches its SHA-256: the database is damaged; nothing was restored from it"
    )]
    CorruptBlob(String),
    /// A blob file beside the database (a content over `FILE_THRESHOLD`, see `blob.rs`) could
    /// not be written or read (permissions, a full disk, a link planted where the file or its
    /// directory should be). Nothing was restored from it.
    #[error("cannot use the checkpoint blob file {path}: {message}")]
    BlobFile {
        /// The blob file (or the blob directory).
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Attaches a context to SQLite errors.
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T> SqlContext<T> for Result<T, rusqlite::Error> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|cause| StoreError::Sqlite { context, cause })
    }
}

/// Attaches a context to JSON errors.
pub(crate) trait JsonContext<T> {
    fn json_ctx(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T> JsonContext<T> for Result<T, serde_json::Error> {
    fn json_ctx(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|cause| StoreError::Json { context, cause })
    }
}
