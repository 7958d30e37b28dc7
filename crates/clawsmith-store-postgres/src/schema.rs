//! The database's schema: numbered migrations, applied by [`migrate`] under an advisory lock so
//! that hosts starting together apply each once, and checked by [`version`] when a store opens.

use tokio_postgres::Client;

use crate::backend;
use clawsmith_store::StoreError;

/// The schema this build reads and writes.
pub const SCHEMA_VERSION: i32 = 8;

/// The advisory lock every migration runs under (`clawsmith` in ASCII, as a number).
const MIGRATION_LOCK: i64 = 0x636c_6177_736d_6974;

/// Migration `n` is `MIGRATIONS[n - 1]`.
const MIGRATIONS: &[&str] = &[
    // 1: sessions with their counters, leases with their epochs, history, the journal, blobs.
    "CREATE TABLE clawsmith_sessions (
        id text PRIMARY KEY,
        parent_id text,
        created_at_ms bigint NOT NULL,
        workspace_root text NOT NULL,
        next_index bigint NOT NULL DEFAULT 0,
        next_sequence bigint NOT NULL DEFAULT 1
    );
    CREATE INDEX clawsmith_sessions_created ON clawsmith_sessions (created_at_ms DESC);
    CREATE TABLE clawsmith_leases (
        session_id text PRIMARY KEY,
        epoch bigint NOT NULL DEFAULT 0,
        holder text,
        expires_at timestamptz
    );
    CREATE TABLE clawsmith_messages (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        idx bigint NOT NULL,
        epoch bigint NOT NULL,
        message_json text NOT NULL,
        PRIMARY KEY (session_id, idx)
    );
    CREATE TABLE clawsmith_events (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        sequence bigint NOT NULL,
        epoch bigint NOT NULL,
        timestamp_ms bigint NOT NULL,
        type text NOT NULL,
        event_json text NOT NULL,
        PRIMARY KEY (session_id, sequence)
    );
    CREATE TABLE clawsmith_journal (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        tool_name text NOT NULL,
        args_json text NOT NULL,
        started_at_ms bigint NOT NULL,
        closed_at_ms bigint,
        status text,
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, turn_id, call_id)
    );
    CREATE INDEX clawsmith_journal_open ON clawsmith_journal (session_id) WHERE closed_at_ms IS NULL;
    CREATE TABLE clawsmith_blobs (
        hash text PRIMARY KEY,
        size bigint NOT NULL,
        content bytea,
        in_object boolean NOT NULL,
        touched_at timestamptz NOT NULL DEFAULT now()
    );",
    // 2: artifacts, each naming its blob (which then cannot be deleted under it).
    "CREATE TABLE clawsmith_artifacts (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        artifact_id text NOT NULL,
        blob_hash text NOT NULL REFERENCES clawsmith_blobs (hash),
        size bigint NOT NULL,
        lines bigint NOT NULL,
        created_at_ms bigint NOT NULL,
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, artifact_id)
    );
    CREATE INDEX clawsmith_artifacts_blob ON clawsmith_artifacts (blob_hash);
    CREATE INDEX clawsmith_blobs_touched ON clawsmith_blobs (touched_at);",
    // 3: turns' checkpoints and their files, todos, pending approvals; events by kind.
    "CREATE TABLE clawsmith_todos (
        session_id text PRIMARY KEY REFERENCES clawsmith_sessions ON DELETE CASCADE,
        todos_json text NOT NULL,
        epoch bigint NOT NULL
    );
    CREATE TABLE clawsmith_checkpoints (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        created_at_ms bigint NOT NULL,
        finished_at_ms bigint,
        message_count bigint NOT NULL,
        event_sequence bigint NOT NULL,
        todos_json text NOT NULL,
        state text NOT NULL CHECK (state IN ('open', 'finished', 'undone')),
        files_undone boolean NOT NULL DEFAULT false,
        session_undone boolean NOT NULL DEFAULT false,
        epoch bigint NOT NULL,
        UNIQUE (session_id, turn_id)
    );
    CREATE INDEX clawsmith_checkpoints_open ON clawsmith_checkpoints (session_id)
        WHERE state = 'open';
    CREATE TABLE clawsmith_checkpoint_files (
        checkpoint_id bigint NOT NULL REFERENCES clawsmith_checkpoints ON DELETE CASCADE,
        path text NOT NULL,
        position integer NOT NULL,
        pre_hash text REFERENCES clawsmith_blobs (hash),
        pre_mode bigint,
        post_hash text,
        post_mode bigint,
        bytes_before bigint NOT NULL,
        bytes_after bigint NOT NULL,
        lines_added bigint,
        lines_removed bigint,
        origin text,
        call_id text,
        epoch bigint NOT NULL,
        PRIMARY KEY (checkpoint_id, path)
    );
    CREATE INDEX clawsmith_checkpoint_files_pre ON clawsmith_checkpoint_files (pre_hash);
    CREATE INDEX clawsmith_checkpoint_files_post ON clawsmith_checkpoint_files (post_hash);
    CREATE TABLE clawsmith_approvals (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        approval_id text NOT NULL,
        position bigserial,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        request_json text NOT NULL,
        created_at_ms bigint NOT NULL,
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, approval_id)
    );
    CREATE INDEX clawsmith_events_kind ON clawsmith_events (session_id, type, sequence);",
    // 4: what the core keeps around a command: running commands' manifests, the last manifest
    // of each machine's workspace, changes undo cannot give back, directories commands made.
    "CREATE TABLE clawsmith_command_captures (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        position bigserial,
        manifest_hash text NOT NULL REFERENCES clawsmith_blobs (hash),
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, turn_id, call_id)
    );
    CREATE INDEX clawsmith_command_captures_blob ON clawsmith_command_captures (manifest_hash);
    CREATE TABLE clawsmith_workspace_manifests (
        host text NOT NULL,
        workspace_root text NOT NULL,
        manifest_hash text NOT NULL,
        updated_at_ms bigint NOT NULL,
        PRIMARY KEY (host, workspace_root)
    );
    CREATE TABLE clawsmith_uncaptured_changes (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        path text NOT NULL,
        reason text NOT NULL,
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, turn_id, path)
    );
    CREATE TABLE clawsmith_created_directories (
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        path text NOT NULL,
        epoch bigint NOT NULL,
        PRIMARY KEY (session_id, turn_id, path)
    );",
    // 5: a writer waiting for a lease says so, until when, for the holder to yield it.
    "ALTER TABLE clawsmith_leases ADD COLUMN wanted_by text, ADD COLUMN wanted_until timestamptz;",
    // 6: undo: the plan an undo commits before it touches a file, what session rewinds took out
    // of the history, and what commands changed in a workspace's repository.
    "CREATE TABLE clawsmith_restore_plans (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        workspace_root text NOT NULL,
        created_at_ms bigint NOT NULL,
        plan_json text NOT NULL,
        epoch bigint NOT NULL
    );
    CREATE INDEX clawsmith_restore_plans_session ON clawsmith_restore_plans (session_id);
    CREATE TABLE clawsmith_undone_history (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        scope text NOT NULL,
        undone_at_ms bigint NOT NULL,
        messages_json text NOT NULL,
        events_json text NOT NULL
    );
    CREATE INDEX clawsmith_undone_history_session ON clawsmith_undone_history (session_id, id);
    CREATE TABLE clawsmith_repository_changes (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL REFERENCES clawsmith_sessions ON DELETE CASCADE,
        turn_id text NOT NULL,
        call_id text NOT NULL,
        path text NOT NULL,
        object boolean NOT NULL,
        pre_hash text,
        pre_mode bigint,
        post_hash text,
        post_mode bigint,
        undone boolean NOT NULL DEFAULT false,
        epoch bigint NOT NULL
    );
    CREATE INDEX clawsmith_repository_changes_session ON clawsmith_repository_changes (session_id)
        WHERE NOT undone;
    CREATE INDEX clawsmith_repository_changes_pre ON clawsmith_repository_changes (pre_hash);",
    // 7: the columns that hold a call's arguments, answers and contents are compressed with
    // LZ4 where the server was built with it (PostgreSQL 14 on): every message and event of a
    // call goes through TOAST compression, and the default (pglz) cost a call ~7% of its time.
    // A server without LZ4 keeps pglz; rows written before keep theirs.
    "DO $$
     DECLARE
         target record;
     BEGIN
         IF EXISTS (SELECT 1 FROM pg_settings
                    WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
             FOR target IN SELECT * FROM (VALUES
                 ('clawsmith_messages', 'message_json'),
                 ('clawsmith_events', 'event_json'),
                 ('clawsmith_journal', 'args_json'),
                 ('clawsmith_blobs', 'content'),
                 ('clawsmith_todos', 'todos_json'),
                 ('clawsmith_checkpoints', 'todos_json'),
                 ('clawsmith_approvals', 'request_json'),
                 ('clawsmith_restore_plans', 'plan_json'),
                 ('clawsmith_undone_history', 'messages_json'),
                 ('clawsmith_undone_history', 'events_json')) AS columns (tab, col)
             LOOP
                 EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET COMPRESSION lz4',
                                target.tab, target.col);
             END LOOP;
         END IF;
     END $$;",
    // 8: the lease check and the numbering of a write whose numbers the writer knows already
    // (it holds the lease, and its last write left the session's counters where they are), as
    // one function that refuses on the server: the write's rows are sent with it, in the same
    // round trip, and a refusal fails the transaction before they run. CS001: the lease is not
    // held at that epoch by that holder; CS002: the counters are not where the writer thought
    // (the writer then asks for them, as any other write does). It answers whether another
    // writer waits for the lease.
    "CREATE FUNCTION clawsmith_fence_known_numbers(
         p_session text, p_holder text, p_epoch bigint, p_index bigint, p_sequence bigint,
         p_messages bigint, p_events bigint)
     RETURNS boolean
     LANGUAGE plpgsql AS $$
     DECLARE
         numbered integer;
         lease record;
     BEGIN
         UPDATE clawsmith_sessions
         SET next_index = next_index + p_messages, next_sequence = next_sequence + p_events
         WHERE id = p_session AND next_index = p_index AND next_sequence = p_sequence;
         GET DIAGNOSTICS numbered = ROW_COUNT;
         SELECT l.epoch, l.holder,
                l.wanted_until > now() AND l.wanted_by IS DISTINCT FROM p_holder AS wanted
         INTO lease
         FROM clawsmith_leases l WHERE l.session_id = p_session FOR SHARE;
         IF NOT FOUND OR lease.epoch IS DISTINCT FROM p_epoch
            OR lease.holder IS DISTINCT FROM p_holder THEN
             RAISE EXCEPTION 'the lease of session % is not held at epoch % by %',
                 p_session, p_epoch, p_holder
                 USING ERRCODE = 'CS001';
         END IF;
         IF numbered = 0 THEN
             RAISE EXCEPTION 'the numbers of session % are not at % and %',
                 p_session, p_index, p_sequence
                 USING ERRCODE = 'CS002';
         END IF;
         RETURN COALESCE(lease.wanted, false);
     END $$;",
];

/// The schema version the database is at (0: none of clawsmith's tables yet).
pub(crate) async fn version(client: &Client) -> Result<i32, StoreError> {
    let exists = client
        .query_one("SELECT to_regclass('clawsmith_schema') IS NOT NULL", &[])
        .await
        .map_err(backend("reading the schema version"))?;
    if !exists.get::<_, bool>(0) {
        return Ok(0);
    }
    let row = client
        .query_opt("SELECT version FROM clawsmith_schema", &[])
        .await
        .map_err(backend("reading the schema version"))?;
    Ok(row.map_or(0, |row| row.get(0)))
}

/// Applies the migrations the database lacks, under the advisory lock, in one transaction;
/// the version before and after. A database newer than this build is refused.
pub(crate) async fn migrate(client: &mut Client) -> Result<(i32, i32), StoreError> {
    let tx = client
        .transaction()
        .await
        .map_err(backend("starting a migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(backend("waiting for the migration lock"))?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS clawsmith_schema (version integer NOT NULL)")
        .await
        .map_err(backend("creating the schema table"))?;
    let before: i32 = tx
        .query_opt("SELECT version FROM clawsmith_schema", &[])
        .await
        .map_err(backend("reading the schema version"))?
        .map_or(0, |row| row.get(0));
    if before > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            path: "the PostgreSQL database".to_owned(),
            found: i64::from(before),
            supported: i64::from(SCHEMA_VERSION),
        });
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(before as usize) {
        tx.batch_execute(migration)
            .await
            .map_err(backend("applying a migration"))?;
        tracing::info!(version = index + 1, "applied a clawsmith store migration");
    }
    tx.execute("DELETE FROM clawsmith_schema", &[])
        .await
        .map_err(backend("recording the schema version"))?;
    tx.execute(
        "INSERT INTO clawsmith_schema (version) VALUES ($1)",
        &[&SCHEMA_VERSION],
    )
    .await
    .map_err(backend("recording the schema version"))?;
    tx.commit()
        .await
        .map_err(backend("committing a migration"))?;
    Ok((before, SCHEMA_VERSION))
}
