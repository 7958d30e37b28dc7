//! Retention and garbage collection (K5).
//!
//! Pruning works in three passes inside one `BEGIN IMMEDIATE` transaction:
//! 0. **Whole sessions.** A session with nothing newer than `max_age` (its creation, its last
//!    event, its newest checkpoint), no open turn or call, no interrupted restore and no writer
//!    holding its lease goes with everything it owns (messages, events, todos, approvals,
//!    artifacts, journal, checkpoints): `keep_last` protects restore points of sessions still in
//!    use, it does not pin the one-turn sessions that `call` and every MCP connection leave behind
//!    forever. A fork of it keeps its own copies and loses only its parent link.
//! 1. **Metadata.** Checkpoints are removed when older than `max_age`, then (oldest first) while a
//!    session is over `per_session_bytes`, then (globally oldest first) while the store is over
//!    `global_bytes`. Never removed: open checkpoints (unfinished turns), each session's
//!    `keep_last` newest restore points (checkpoints not undone), and anything of a session with
//!    an interrupted restore. Closed journal entries go with their turn's checkpoint or when older
//!    than `max_age`; open entries and entries of open turns are never touched.
//! 2. **Blobs.** Every blob that no remaining checkpoint file (prior or post content) and no
//!    artifact refers to is deleted. While any restore is interrupted, no blob is collected.
//!
//! After that transaction commits, a second one (holding the write lock again, so no writer
//! is between a blob file and its commit) deletes every blob file beside the database that no
//! row names: those of the blobs just collected and the orphans of a crash (`blob.rs`). A dry
//! run deletes no file.
//!
//! For the quotas a content counts once however many checkpoints refer to it: a session's size
//! is the bytes of the distinct contents (by hash, before and after) its checkpoints recorded,
//! the store's size those of all checkpoints, so a fork sharing its parent's blobs or a file
//! written the same way in many turns is not counted again. Removing a checkpoint frees only the
//! contents no remaining checkpoint (of the session, or of the store) still names. A dry run runs
//! the same transaction and rolls it back.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rusqlite::{Transaction, params};
use serde::{Deserialize, Serialize};

use crate::error::{SqlContext, StoreError};
use crate::store::Store;
use crate::undo::pending_plans;

/// Retention limits. [`RetentionPolicy::default`] is K5's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicy {
    /// Checkpoints older than this go (30 days).
    pub max_age: Duration,
    /// Size limit per session (100 MiB).
    pub per_session_bytes: u64,
    /// Size limit for the whole store (1 GiB).
    pub global_bytes: u64,
    /// Restore points per session that are always kept (5).
    pub keep_last: usize,
}

impl Default for RetentionPolicy {
    fn default() -> RetentionPolicy {
        RetentionPolicy {
            max_age: Duration::from_secs(30 * 24 * 60 * 60),
            per_session_bytes: 100 * 1024 * 1024,
            global_bytes: 1024 * 1024 * 1024,
            keep_last: 5,
        }
    }
}

/// What [`Store::prune`] removed (or, for a dry run, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    /// Whether nothing was actually deleted.
    pub dry_run: bool,
    /// Whole sessions removed (expired, see the module docs), oldest first.
    pub sessions: Vec<String>,
    /// Number of sessions removed.
    pub sessions_removed: u64,
    /// Checkpoints removed, as (session, turn), oldest first.
    pub checkpoints: Vec<(String, String)>,
    /// Number of checkpoints removed.
    pub checkpoints_removed: u64,
    /// Closed journal entries removed.
    pub journal_entries_removed: u64,
    /// Blobs collected.
    pub blobs_removed: u64,
    /// Bytes of blob content collected.
    pub bytes_freed: u64,
    /// Blob files beside the database deleted: those of the blobs collected, and the orphans
    /// a crash between a blob file and its commit left (no row ever named them).
    #[serde(default)]
    pub blob_files_removed: u64,
}

struct Candidate {
    id: i64,
    session_id: String,
    turn_id: String,
    created_at: u64,
    /// The distinct contents it recorded: (hash, bytes).
    contents: Vec<(String, u64)>,
    protected: bool,
}

/// Bytes of distinct contents, counted once however many checkpoints name them.
#[derive(Default)]
struct SharedSize {
    references: HashMap<String, (u32, u64)>,
    total: u64,
}

impl SharedSize {
    fn add(&mut self, candidate: &Candidate) {
        for (hash, bytes) in &candidate.contents {
            let entry = self.references.entry(hash.clone()).or_insert((0, *bytes));
            if entry.0 == 0 {
                self.total += bytes;
            }
            entry.0 += 1;
        }
    }

    /// Drops `candidate`'s references; the contents no one else names stop counting.
    fn remove(&mut self, candidate: &Candidate) {
        for (hash, _) in &candidate.contents {
            if let Some(entry) = self.references.get_mut(hash) {
                entry.0 = entry.0.saturating_sub(1);
                if entry.0 == 0 {
                    self.total = self.total.saturating_sub(entry.1);
                }
            }
        }
    }
}

impl Store {
    /// Applies `policy` as of `now_ms` (see the module docs). With `dry_run` nothing changes and
    /// the report says what would go.
    pub fn prune(
        &self,
        policy: &RetentionPolicy,
        now_ms: u64,
        dry_run: bool,
    ) -> Result<PruneReport, StoreError> {
        // Leases of the sessions about to go are held until the transaction ends, so no writer
        // starts on one of them meanwhile; a session someone holds is left alone.
        let held = std::cell::RefCell::new(Vec::new());
        let free = |session_id: &str| match self.try_lease_session(session_id) {
            Ok(Some(lease)) => {
                held.borrow_mut().push(lease);
                true
            }
            Ok(None) | Err(_) => false,
        };
        let body = |tx: &Transaction<'_>| prune_in(tx, policy, now_ms, dry_run, &free);
        let mut report = if dry_run {
            self.write_rolled_back("pruning (dry run)", body)
        } else {
            self.write("pruning", body)
        }?;
        // Then the blob files no row names, under the write lock again (`blob.rs`: no writer is
        // between a file and its commit meanwhile). After the commit, not inside it: a prune
        // whose commit failed must not have deleted the files of rows that are still there.
        if !dry_run {
            let swept = self.write("sweeping blob files", crate::blob::sweep)?;
            report.blob_files_removed = swept.files;
        }
        // The lock files of removed sessions go too (still held), so `locks/` stays bounded.
        for lease in held.into_inner() {
            if report.sessions.iter().any(|id| lease.is_for(id)) && !dry_run {
                lease.remove_lock_file();
            }
        }
        Ok(report)
    }
}

fn prune_in(
    tx: &Transaction<'_>,
    policy: &RetentionPolicy,
    now_ms: u64,
    dry_run: bool,
    free: &dyn Fn(&str) -> bool,
) -> Result<PruneReport, StoreError> {
    let mut report = PruneReport {
        dry_run,
        ..PruneReport::default()
    };
    let max_age_ms = u64::try_from(policy.max_age.as_millis()).unwrap_or(u64::MAX);
    let cutoff = now_ms.saturating_sub(max_age_ms);
    // 0. Whole expired sessions.
    for session_id in expired_sessions(tx, cutoff)? {
        if !free(&session_id) {
            continue;
        }
        tx.execute("DELETE FROM sessions WHERE id = ?1", [&session_id])
            .ctx("pruning sessions")?;
        report.sessions.push(session_id);
    }
    report.sessions_removed = report.sessions.len() as u64;
    let mut candidates = load_candidates(tx, policy.keep_last)?;
    let mut removed: HashSet<i64> = HashSet::new();

    // 1. Age.
    for candidate in &candidates {
        if !candidate.protected && candidate.created_at < cutoff {
            removed.insert(candidate.id);
        }
    }
    // 2. Per-session quota, oldest first.
    let mut per_session: HashMap<&str, SharedSize> = HashMap::new();
    for candidate in candidates.iter().filter(|c| !removed.contains(&c.id)) {
        per_session
            .entry(candidate.session_id.as_str())
            .or_default()
            .add(candidate);
    }
    for candidate in &candidates {
        let size = per_session
            .entry(candidate.session_id.as_str())
            .or_default();
        if size.total > policy.per_session_bytes
            && !candidate.protected
            && removed.insert(candidate.id)
        {
            size.remove(candidate);
        }
    }
    // 3. Global quota, globally oldest first.
    let mut global = SharedSize::default();
    for candidate in candidates.iter().filter(|c| !removed.contains(&c.id)) {
        global.add(candidate);
    }
    candidates.sort_by_key(|candidate| (candidate.created_at, candidate.id));
    for candidate in &candidates {
        if global.total <= policy.global_bytes {
            break;
        }
        if !candidate.protected && removed.insert(candidate.id) {
            global.remove(candidate);
        }
    }

    candidates.sort_by_key(|candidate| candidate.id);
    for candidate in candidates.iter().filter(|c| removed.contains(&c.id)) {
        report.journal_entries_removed += tx
            .execute(
                "DELETE FROM journal WHERE session_id = ?1 AND turn_id = ?2 AND closed_at IS NOT NULL",
                params![candidate.session_id, candidate.turn_id],
            )
            .ctx("pruning journals")? as u64;
        tx.execute("DELETE FROM checkpoints WHERE id = ?1", [candidate.id])
            .ctx("pruning checkpoints")?;
        report
            .checkpoints
            .push((candidate.session_id.clone(), candidate.turn_id.clone()));
    }
    report.checkpoints_removed = report.checkpoints.len() as u64;
    // Old closed journal entries whose turn is not open.
    report.journal_entries_removed += tx
        .execute(
            "DELETE FROM journal WHERE closed_at IS NOT NULL AND started_at < ?1
               AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.session_id = journal.session_id
                               AND c.turn_id = journal.turn_id AND c.state = 'open')
               AND NOT EXISTS (SELECT 1 FROM restore_plans p WHERE p.session_id = journal.session_id)",
            [cutoff],
        )
        .ctx("pruning journals")? as u64;

    // Repository changes of turns whose checkpoints are gone can no longer be undone.
    tx.execute(
        "DELETE FROM repository_changes WHERE NOT EXISTS (SELECT 1 FROM checkpoints c
             WHERE c.session_id = repository_changes.session_id
               AND c.turn_id = repository_changes.turn_id)",
        [],
    )
    .ctx("pruning repository changes")?;

    if pending_plans(tx, None)? == 0 {
        let unreferenced = "FROM blobs WHERE
                NOT EXISTS (SELECT 1 FROM checkpoint_files f WHERE f.pre_hash = blobs.hash)
            AND NOT EXISTS (SELECT 1 FROM checkpoint_files f WHERE f.post_hash = blobs.hash)
            AND NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.blob_hash = blobs.hash)
            AND NOT EXISTS (SELECT 1 FROM command_captures c WHERE c.manifest_hash = blobs.hash)
            AND NOT EXISTS (SELECT 1 FROM repository_changes r WHERE r.pre_hash = blobs.hash)";
        let (count, bytes): (u64, u64) = tx
            .query_row(
                &format!("SELECT count(*), COALESCE(SUM(size), 0) {unreferenced}"),
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .ctx("collecting blobs")?;
        tx.execute(&format!("DELETE {unreferenced}"), [])
            .ctx("collecting blobs")?;
        report.blobs_removed = count;
        report.bytes_freed = bytes;
    }
    Ok(report)
}

/// Sessions with nothing newer than `cutoff` and nothing running or half-done, oldest first.
fn expired_sessions(tx: &Transaction<'_>, cutoff: u64) -> Result<Vec<String>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT s.id FROM sessions s
             WHERE s.created_at < ?1
               AND COALESCE((SELECT e.timestamp_ms FROM event_rows e
                             WHERE e.key >= s.number << 32 AND e.key < (s.number + 1) << 32
                             ORDER BY e.key DESC LIMIT 1), 0) < ?1
               AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.session_id = s.id
                               AND (c.state = 'open' OR c.created_at >= ?1))
               AND NOT EXISTS (SELECT 1 FROM journal j WHERE j.session_id = s.id
                               AND j.closed_at IS NULL)
               AND NOT EXISTS (SELECT 1 FROM restore_plans p WHERE p.session_id = s.id)
             ORDER BY s.created_at, s.rowid",
        )
        .ctx("finding expired sessions")?;
    let rows = statement
        .query_map([cutoff], |row| row.get(0))
        .ctx("finding expired sessions")?;
    rows.collect::<Result<Vec<String>, _>>()
        .ctx("finding expired sessions")
}

/// Per checkpoint, the distinct contents (hash, bytes) its files recorded before and after.
fn load_contents(tx: &Transaction<'_>) -> Result<HashMap<i64, Vec<(String, u64)>>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT checkpoint_id, pre_hash, bytes_before, post_hash, bytes_after
             FROM checkpoint_files",
        )
        .ctx("reading checkpoint contents for pruning")?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, u64>(4)?,
            ))
        })
        .ctx("reading checkpoint contents for pruning")?;
    let mut contents: HashMap<i64, Vec<(String, u64)>> = HashMap::new();
    for row in rows {
        let (checkpoint, pre, before, post, after) =
            row.ctx("reading checkpoint contents for pruning")?;
        let recorded = contents.entry(checkpoint).or_default();
        for (hash, bytes) in [(pre, before), (post, after)] {
            if let Some(hash) = hash
                && !recorded.iter().any(|(known, _)| *known == hash)
            {
                recorded.push((hash, bytes));
            }
        }
    }
    Ok(contents)
}

/// Every checkpoint with the contents it recorded and whether pruning must keep it.
fn load_candidates(tx: &Transaction<'_>, keep_last: usize) -> Result<Vec<Candidate>, StoreError> {
    let mut statement = tx
        .prepare(
            "SELECT c.id, c.session_id, c.turn_id, c.created_at, c.state,
                 EXISTS (SELECT 1 FROM restore_plans p WHERE p.session_id = c.session_id)
             FROM checkpoints c ORDER BY c.id DESC",
        )
        .ctx("reading checkpoints for pruning")?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                Candidate {
                    id: row.get(0)?,
                    session_id: row.get(1)?,
                    turn_id: row.get(2)?,
                    created_at: row.get(3)?,
                    contents: Vec::new(),
                    protected: row.get::<_, bool>(5)?,
                },
                row.get::<_, String>(4)?,
            ))
        })
        .ctx("reading checkpoints for pruning")?;
    let contents = load_contents(tx)?;
    // Newest first, so the first `keep_last` restore points seen per session are the newest.
    let mut kept: HashMap<String, usize> = HashMap::new();
    let mut candidates = Vec::new();
    for row in rows {
        let (mut candidate, state) = row.ctx("reading checkpoints for pruning")?;
        if let Some(recorded) = contents.get(&candidate.id) {
            candidate.contents.clone_from(recorded);
        }
        if state == "open" {
            candidate.protected = true;
        }
        if state != "undone" {
            let count = kept.entry(candidate.session_id.clone()).or_default();
            if *count < keep_last {
                candidate.protected = true;
            }
            *count += 1;
        }
        candidates.push(candidate);
    }
    candidates.reverse();
    Ok(candidates)
}
