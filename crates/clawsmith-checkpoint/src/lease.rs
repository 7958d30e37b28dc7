//! One writer per session: a lease every process takes before it writes a session.
//!
//! The lease is an OS file lock (`flock`, through `std::fs::File::try_lock`) on
//! `locks/<sha256(session id)>.lock` beside the database. The kernel drops it when its holder
//! exits, however it exits, so there is no stale lease to expire and no pid to trust: whoever
//! gets the lock knows every call a previous holder left open belongs to a dead process. The
//! holder writes its pid into the file so a second writer can say who is in the way.
//!
//! Inside one process the lease is shared: a second handle on a session this process already
//! holds (a library host reopening a session, a test) counts up on the same lock and is told it
//! is not *fresh*, so it must not run crash recovery — the owner of any open call is alive, and
//! it is this process. Serializing its own turns is the host's job, as for the MCP server.
//!
//! **Waiting is announced.** A host may keep a lease between its turns (the MCP server does:
//! taking it was an `open`, a `flock`, an `ftruncate` and a `write`, and closing a
//! truncated file started its writeback — ~8% of a call; the pid is now written over the last
//! holder's, and the file never shortened). So that a CLI `undo` between two calls
//! still gets in, a process that finds the lease taken by another process holds a shared
//! `flock` on `locks/<…>.wait` while it waits: the holder sees it ([`SessionLease::is_wanted`],
//! two `flock` calls) at its next turn and yields ([`Store::yield_lease`]): it lets go, waits
//! until the waiter has the lease (its shared lock is gone), and queues behind it. A waiter that
//! would fail ([`LeaseWait::Fail`]) first waits up to [`LINGERING_HOLDER`] for a holder that is
//! between turns (or idle: the MCP server lets go after a short idle time) before it says the
//! session is in use.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};

use crate::error::StoreError;
use crate::store::Store;

/// What a second writer does when another process holds the session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LeaseWait {
    /// Fail at once with [`StoreError::SessionInUse`].
    #[default]
    Fail,
    /// Block until the holder exits or releases the session.
    Wait,
}

/// The right to write one session, held until dropped.
#[derive(Debug)]
pub struct SessionLease {
    key: PathBuf,
    session_id: String,
    fresh: bool,
    /// Whether `key` names a lock file (file-backed store) rather than an in-memory store.
    on_disk: bool,
}

/// The leases this process holds: lock-file path (or in-memory store key) → holders and the
/// locked file. The file is kept open for as long as any holder lives; closing it releases the
/// lock.
struct Held {
    holders: usize,
    _file: Option<File>,
    /// The `.wait` file beside the lock file (file-backed stores): a waiting process holds a
    /// shared `flock` on it.
    wait: Option<File>,
}

static HELD: LazyLock<Mutex<HashMap<PathBuf, Held>>> = LazyLock::new(Mutex::default);

/// Directory of the lock files, beside the database.
pub const LOCK_DIR: &str = "locks";

impl SessionLease {
    /// Whether this lease was taken now, from no other holder in this process. Only a fresh
    /// lease may close calls left open (their owner is dead); a shared one must not.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// The session this lease is for.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}

impl SessionLease {
    /// Whether another process waits for this lease (it holds a shared lock on the `.wait` file,
    /// see the module docs). Always `false` for an in-memory store. A host keeping the lease
    /// between turns checks this at each turn and then [`Store::yield_lease`]s.
    pub fn is_wanted(&self) -> bool {
        if !self.on_disk {
            return false;
        }
        let held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(wait) = held.get(&self.key).and_then(|entry| entry.wait.as_ref()) else {
            return false;
        };
        match wait.try_lock() {
            Ok(()) => {
                let _ = wait.unlock();
                false
            }
            Err(std::fs::TryLockError::WouldBlock) => true,
            Err(std::fs::TryLockError::Error(_)) => false,
        }
    }

    /// Whether this is the lease of `session_id`.
    pub(crate) fn is_for(&self, session_id: &str) -> bool {
        self.session_id == session_id
    }

    /// Removes the lock file of a session that no longer exists (pruned), while still holding
    /// it; a process waiting on it then finds the name gone and locks a new file.
    pub(crate) fn remove_lock_file(&self) {
        if self.on_disk {
            let _ = std::fs::remove_file(&self.key);
            let _ = std::fs::remove_file(wait_path(&self.key));
        }
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = held.get_mut(&self.key) {
            entry.holders -= 1;
            if entry.holders == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl Store {
    /// Takes the lease on `session_id` (see the module docs). Another process holding it is
    /// told that this one waits, then fails this with [`StoreError::SessionInUse`] if it still
    /// holds it after [`LINGERING_HOLDER`], or is waited for under [`LeaseWait::Wait`]
    /// ([`Store::set_lease_wait`]).
    pub fn lease_session(&self, session_id: &str) -> Result<SessionLease, StoreError> {
        let taking = match self.lease_wait() {
            LeaseWait::Fail => Taking::Fail,
            LeaseWait::Wait => Taking::Wait,
        };
        self.lease_session_with(session_id, taking)
    }

    fn lease_session_with(
        &self,
        session_id: &str,
        wait: Taking,
    ) -> Result<SessionLease, StoreError> {
        let on_disk = self.path().is_some();
        let key = match self.path() {
            Some(database) => lock_path(database, session_id),
            None => PathBuf::from(format!(
                "memory:{}/{}",
                self.instance_id(),
                crate::blob::hash_hex(&crate::blob::sha256(session_id.as_bytes()))
            )),
        };
        let lease = |fresh| SessionLease {
            key: key.clone(),
            session_id: session_id.to_string(),
            fresh,
            on_disk,
        };
        // Another thread of this process may be between its OS lock and its entry here: the
        // lock then names our own pid, and a moment later the entry is there to share.
        let mut attempts = 0;
        loop {
            if let Some(entry) = HELD
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(&key)
            {
                entry.holders += 1;
                return Ok(lease(false));
            }
            // Taking the OS lock may block (LeaseWait::Wait); never while holding HELD.
            let (file, wait_file) = if on_disk {
                match lock_file(&key, session_id, wait) {
                    Err(StoreError::SessionInUse { pid, .. })
                        if pid == Some(std::process::id()) && attempts < 100 =>
                    {
                        attempts += 1;
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                    result => {
                        let file = result?;
                        // Opened once per lease taken, so `is_wanted` costs no `open`.
                        let wait_file =
                            open_private(&wait_path(&key)).map_err(|error| StoreError::Lease {
                                path: wait_path(&key).display().to_string(),
                                message: error.to_string(),
                            })?;
                        (Some(file), Some(wait_file))
                    }
                }
            } else {
                (None, None)
            };
            let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(entry) = held.get_mut(&key) {
                // Only an in-memory store gets here (an OS lock excludes a second taker).
                entry.holders += 1;
                return Ok(lease(false));
            }
            held.insert(
                key.clone(),
                Held {
                    holders: 1,
                    _file: file,
                    wait: wait_file,
                },
            );
            return Ok(lease(true));
        }
    }
}

impl Store {
    /// Lets go of `lease` because another process waits for it ([`SessionLease::is_wanted`]),
    /// waits until that process has taken it (or given up), then takes the lease again as
    /// [`Store::lease_session`] does (so under [`LeaseWait::Fail`] a waiter still holding it
    /// after [`LINGERING_HOLDER`] fails this with [`StoreError::SessionInUse`]). The lease
    /// returned is fresh when nobody else in this process shared the one given up: the caller
    /// must then look for what the other process changed (the core runs recovery when the
    /// session's last event moved).
    pub fn yield_lease(&self, lease: SessionLease) -> Result<SessionLease, StoreError> {
        let session_id = lease.session_id.clone();
        let key = lease.key.clone();
        let on_disk = lease.on_disk;
        drop(lease);
        if on_disk {
            let path = wait_path(&key);
            let io_error = |error: std::io::Error| StoreError::Lease {
                path: path.display().to_string(),
                message: error.to_string(),
            };
            // Every waiter holds a shared lock until it has the lease (or gave up): an
            // exclusive one is ours only after that.
            let wait = open_private(&path).map_err(io_error)?;
            wait.lock().map_err(io_error)?;
            drop(wait);
        }
        self.lease_session(&session_id)
    }

    /// The lease on `session_id` if it is free right now (never waits); `None` when another
    /// process or another holder in this process has it.
    pub(crate) fn try_lease_session(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionLease>, StoreError> {
        match self.lease_session_with(session_id, Taking::NowOnly) {
            Ok(lease) if lease.is_fresh() => Ok(Some(lease)),
            Ok(_) | Err(StoreError::SessionInUse { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// `locks/<sha256 of the id>.lock` beside `database`: any id is a safe file name this way.
fn lock_path(database: &Path, session_id: &str) -> PathBuf {
    let dir = database.parent().unwrap_or(Path::new("."));
    dir.join(LOCK_DIR).join(format!(
        "{}.lock",
        crate::blob::hash_hex(&crate::blob::sha256(session_id.as_bytes()))
    ))
}

/// `<lock file>.wait`: where waiting processes announce themselves (see the module docs).
fn wait_path(lock: &Path) -> PathBuf {
    lock.with_extension("wait")
}

/// Holds a shared lock on the `.wait` file beside `path` until dropped: the holder of `path`
/// sees that someone waits. `None` when the file cannot be opened or locked (then the waiter is
/// not seen, and waits as it did before announcements existed).
fn announce_waiting(path: &Path) -> Option<File> {
    let wait = open_private(&wait_path(path)).ok()?;
    wait.lock_shared().ok()?;
    Some(wait)
}

/// How [`lock_file`] treats a lock another process holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Taking {
    /// [`LeaseWait::Fail`]: announce, wait up to [`LINGERING_HOLDER`] for the holder, then fail.
    Fail,
    /// [`LeaseWait::Wait`]: announce and block until the holder lets go.
    Wait,
    /// Only if free now (pruning): neither announce nor wait for a live holder.
    NowOnly,
}

/// Opens (0600, never through a symlink) and locks the lock file, then writes our pid into it.
fn lock_file(path: &Path, session_id: &str, wait: Taking) -> Result<File, StoreError> {
    let io_error = |error: std::io::Error| StoreError::Lease {
        path: path.display().to_string(),
        message: error.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error)?;
    }
    // Pruning a session removes its lock file while holding it; whoever locked the old file
    // meanwhile holds a name that is gone, and tries again on the new one.
    let (file, length) = loop {
        let mut file = open_private(path).map_err(io_error)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => match wait {
                Taking::Fail | Taking::NowOnly => {
                    let pid = holder_pid(&mut file);
                    // Another thread of this process: the caller retries without waiting here.
                    let ours = pid == Some(std::process::id());
                    let got_it = !ours && wait == Taking::Fail && {
                        let _announced = announce_waiting(path);
                        lock_within(&file, LINGERING_HOLDER)
                    };
                    if !got_it {
                        let holder_dead = pid.is_some_and(|pid| !alive(pid));
                        if ours || !holder_dead || !lock_within(&file, DYING_HOLDER) {
                            return Err(StoreError::SessionInUse {
                                session_id: session_id.to_string(),
                                pid,
                            });
                        }
                    }
                }
                Taking::Wait => {
                    let _announced = announce_waiting(path);
                    file.lock().map_err(io_error)?;
                }
            },
            Err(std::fs::TryLockError::Error(error)) => return Err(io_error(error)),
        }
        let locked = file.metadata().map_err(io_error)?;
        match std::fs::symlink_metadata(path) {
            Ok(named) if named.ino() == locked.ino() && named.dev() == locked.dev() => {
                break (file, locked.len());
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io_error(error)),
        }
    };
    // The pid is written over the previous holder's, padded to a fixed width, and the file is
    // never shortened: truncating it to zero freed its block at every lease, which
    // on a file system mounted with `discard` is a synchronous discard the caller waited for
    // (0.16–3.5 ms of a `clawsmith call`). A file an older build left longer is cut once.
    let record = format!(
        "{:<width$}\n",
        std::process::id(),
        width = PID_RECORD_BYTES - 1
    );
    file.write_all_at(record.as_bytes(), 0).map_err(io_error)?;
    if length > PID_RECORD_BYTES as u64 {
        file.set_len(PID_RECORD_BYTES as u64).map_err(io_error)?;
    }
    Ok(file)
}

/// The length of the holder's record in a lock file: its pid, padded with spaces, and a newline
/// (a Linux pid has at most 7 digits).
const PID_RECORD_BYTES: usize = 11;

/// Opens `path` for reading and writing, creating it 0600 (whatever the umask) and never
/// through a symlink: how the store creates every file of its own.
pub(crate) fn open_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
}

/// How long a writer that would fail ([`LeaseWait::Fail`]) first waits for a live holder: one
/// that keeps the lease between turns yields it at its next turn or when idle (the MCP server
/// lets go after 50 ms without a call), so an `undo` between two calls gets in. A holder busy
/// with a longer turn still makes it fail, after this long.
pub const LINGERING_HOLDER: std::time::Duration = std::time::Duration::from_millis(500);

/// How long a second writer waits for a lock whose holder is dead. The kernel drops a lock when
/// the last descriptor of it closes; a holder killed by a signal can leave it in children that
/// were forked but have not yet closed what they inherited (a sandboxed command's relay and init
/// close everything they do not need within milliseconds of starting, and die with their
/// parent). Waiting for them is not waiting for a writer: the holder that wrote is gone.
const DYING_HOLDER: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Tries the lock until `limit` has passed.
fn lock_within(file: &File, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(2));
        if file.try_lock().is_ok() {
            return true;
        }
    }
    false
}

/// The pid the holder wrote, when it has written it yet.
fn holder_pid(file: &mut File) -> Option<u32> {
    // The holder truncates and writes right after locking; give it a moment to do so.
    for _ in 0..20 {
        let mut text = String::new();
        if file.seek(SeekFrom::Start(0)).is_ok()
            && file.read_to_string(&mut text).is_ok()
            && let Ok(pid) = text.trim().parse()
        {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (harness deadline) until `condition` holds.
    fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !condition() {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The holder's pid is written over whatever the file held, padded to a fixed width (the
    /// file is never truncated to zero); a longer record an older build or another
    /// writer left is cut, and the pid reads back whole either way.
    #[test]
    fn the_pid_is_written_over_the_last_record_and_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        let lock = lock_path(&dir.path().join("db"), "s");
        let ours = format!("{:<10}\n", std::process::id());
        for previous in [
            "",
            "7\n",
            "4194303\n",
            "4194303   \n",
            "123456789012345678\nstale\n",
        ] {
            std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
            std::fs::write(&lock, previous).unwrap();
            let lease = store.lease_session("s").unwrap();
            let text = std::fs::read_to_string(&lock).unwrap();
            assert_eq!(text, ours, "after {previous:?}");
            let mut file = File::open(&lock).unwrap();
            assert_eq!(
                holder_pid(&mut file),
                Some(std::process::id()),
                "{previous:?}"
            );
            drop(lease);
        }
    }

    /// A process waiting for the lease (here util-linux `flock(1)` holding the `.wait` file's
    /// shared lock, as `lock_file` does while it waits) is seen by the holder; pruning's
    /// `try_lease_session` neither announces itself nor waits for a live holder.
    #[test]
    fn a_waiting_process_is_seen_and_pruning_does_not_announce_itself() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db")).unwrap();
        let lease = store.lease_session("s").unwrap();
        assert!(!lease.is_wanted(), "nobody waits yet");
        let lock = lock_path(&dir.path().join("db"), "s");
        let marker = dir.path().join("announced");
        #[allow(clippy::disallowed_methods)] // Tests may spawn: the second process.
        let mut waiter = std::process::Command::new("flock")
            .arg("--shared")
            .arg(wait_path(&lock))
            .args(["sh", "-c"])
            .arg(format!("touch {}; exec sleep 1", marker.display()))
            .spawn()
            .unwrap();
        eventually("the waiter announced itself", || marker.exists());
        assert!(lease.is_wanted());
        // Our own second handle shares the lease: not a waiter.
        let shared = store.lease_session("s").unwrap();
        assert!(!shared.is_fresh());
        drop(shared);
        assert!(waiter.wait().unwrap().success());
        assert!(!lease.is_wanted(), "the waiter left");

        // A holder in another process: pruning's probe gives up without announcing.
        drop(lease);
        let started = dir.path().join("holding");
        #[allow(clippy::disallowed_methods)] // Tests may spawn: the holder.
        let mut holder = std::process::Command::new("flock")
            .arg(&lock)
            .args(["sh", "-c"])
            .arg(format!(
                "echo $$ > {}; touch {}; exec sleep 2",
                lock.display(),
                started.display()
            ))
            .spawn()
            .unwrap();
        eventually("the holder holds", || started.exists());
        assert!(store.try_lease_session("s").unwrap().is_none());
        let wait = File::open(wait_path(&lock)).unwrap();
        assert!(wait.try_lock().is_ok(), "no announcement left behind");
        drop(wait);
        // A writer that would fail says who holds the session (after waiting for it a while).
        let error = store.lease_session("s").unwrap_err();
        assert!(
            matches!(error, StoreError::SessionInUse { pid: Some(_), .. }),
            "{error}"
        );
        assert!(holder.wait().unwrap().success());
        assert!(store.lease_session("s").unwrap().is_fresh());
    }
}
