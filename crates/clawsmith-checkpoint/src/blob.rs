//! Content-addressed blobs (K3): stored once per SHA-256, shared by checkpoints, forks and
//! artifacts.
//!
//! ## Where the bytes live
//! A content of at most [`FILE_THRESHOLD`] bytes sits in its `blobs` row (`in_file = 0`). A
//! larger one is a *blob file* beside the database: `<database>-blobs/ab/cdef…` (the first two
//! hex digits of its SHA-256 name the directory, the other 62 the file), and its row holds the
//! hash, the size and `in_file = 1` with an empty `content`. A profile of a 1 MB
//! `edit_file` put most of the recorder's cost in writing the prior content into the WAL page by
//! page and copying it again into the main file at the next automatic checkpoint; a file is
//! one `write`. The directory is named after the database file (like its `-wal`), so two
//! databases in one directory never share blob files: each one's [`sweep`] deletes the files
//! that *its* rows do not name.
//!
//! ## The rules that keep it safe
//! - **A row never names a file that is not there.** A blob file is written (to a temp file,
//!   fsynced under [`Durability::Full`](crate::Durability), renamed, the directory fsynced)
//!   inside the write transaction that inserts its row, before that transaction commits. A crash
//!   between the two leaves a file no row names: an orphan, which [`sweep`] deletes.
//! - **Files are written and deleted only under the database's write lock.** Every write
//!   transaction is `BEGIN IMMEDIATE`, and [`put_blob`] runs inside one; [`sweep`] runs inside
//!   one too. So while the sweep looks, no writer is between its file and its commit: a file
//!   that no committed row names is an orphan, never a blob about to be named.
//! - **Storing heals.** Storing a content whose row exists but whose file is gone or has the
//!   wrong size (a failed prune commit, a hand-deleted file) writes the file again.
//! - **Reading verifies.** Every read hashes the content again: a damaged file (or row) is
//!   [`StoreError::CorruptBlob`], a missing one [`StoreError::MissingBlob`], so nothing damaged
//!   is ever written into a workspace or shown as a diff side.
//! - **Private and never through a link.** The directories are created 0700 and the files 0600
//!   (whatever the umask), like the database; every step opens relative to the directory it
//!   checked (`openat` with `O_NOFOLLOW`), so a planted symlink is refused, not followed.
//! - An in-memory store keeps every content in its rows.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{OptionalExtension, Transaction, params};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::error::{SqlContext, StoreError};

/// Contents larger than this many bytes are blob files beside the database; smaller ones stay
/// in their row. 64 KiB is 16 database pages: below it a file's open, rename and directory
/// entry cost more than the pages; above it the WAL's per-page frames and the second copy
/// into the main file at checkpoint time dominate (SQLite's own measurements put the crossover
/// for reads between 50 and 100 KB at a 4 KiB page size: <https://sqlite.org/intern-v-extern-blob.html>).
pub const FILE_THRESHOLD: usize = 64 * 1024;

/// Suffix of the blob directory beside the database (`state.db` → `state.db-blobs`).
pub const BLOB_DIR_SUFFIX: &str = "-blobs";

/// Prefix of a blob file being written; a crash can leave one, [`sweep`] deletes it.
const TEMP_PREFIX: &str = ".tmp-";

/// SHA-256 of `content`.
pub fn sha256(content: &[u8]) -> [u8; 32] {
    Sha256::digest(content).into()
}

/// Lowercase hex of a hash.
pub fn hash_hex(hash: &[u8; 32]) -> String {
    hex::encode(hash)
}

/// The blob directory of the database `tx` belongs to; `None` in memory (and for a path
/// SQLite cannot give as UTF-8, whose contents then stay in their rows).
fn blob_dir(tx: &Transaction<'_>) -> Option<PathBuf> {
    let path = tx.path().filter(|path| !path.is_empty())?;
    let mut dir = path.to_owned();
    dir.push_str(BLOB_DIR_SUFFIX);
    Some(PathBuf::from(dir))
}

/// Stores `content` once; returns its hex hash. `durable`: the store's durability is
/// [`Durability::Full`](crate::Durability), so a blob file is fsynced (with its directory)
/// before the commit that names it.
pub(crate) fn put_blob(
    tx: &Transaction<'_>,
    content: &[u8],
    durable: bool,
) -> Result<String, StoreError> {
    let hash = hash_hex(&sha256(content));
    let dir = blob_dir(tx).filter(|_| content.len() > FILE_THRESHOLD);
    let Some(dir) = dir else {
        tx.prepare_cached("INSERT OR IGNORE INTO blobs (hash, size, content) VALUES (?1, ?2, ?3)")
            .and_then(|mut statement| {
                statement.execute(params![hash, content.len() as u64, content])
            })
            .ctx("storing a blob")?;
        return Ok(hash);
    };
    let known: Option<(bool, u64)> = tx
        .prepare_cached("SELECT in_file, size FROM blobs WHERE hash = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([&hash], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .ctx("storing a blob")?;
    match known {
        // In its row: nothing to write.
        Some((false, _)) => return Ok(hash),
        // Named and whole (by size; every read verifies the hash): nothing to write.
        Some((true, size)) if file_size(&dir, &hash) == Some(size) => return Ok(hash),
        _ => {}
    }
    write_file(&dir, &hash, content, durable).map_err(|error| StoreError::BlobFile {
        path: file_path(&dir, &hash).display().to_string(),
        message: error.to_string(),
    })?;
    if known.is_none() {
        tx.prepare_cached(
            "INSERT INTO blobs (hash, size, content, in_file) VALUES (?1, ?2, x'', 1)",
        )
        .and_then(|mut statement| statement.execute(params![hash, content.len() as u64]))
        .ctx("storing a blob")?;
    }
    Ok(hash)
}

/// A blob's content, `None` if absent. The content is hashed again on every read: a blob that
/// no longer matches its name (a damaged or hand-edited row or file) is
/// [`StoreError::CorruptBlob`], so no caller can write it into a workspace or show it as a diff
/// side; a row whose file is gone is [`StoreError::MissingBlob`].
pub(crate) fn get_blob(tx: &Transaction<'_>, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let row: Option<(Vec<u8>, bool)> = tx
        .prepare_cached("SELECT content, in_file FROM blobs WHERE hash = ?1")
        .and_then(|mut statement| {
            statement
                .query_row([hash], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .ctx("reading a blob")?;
    let content = match row {
        None => return Ok(None),
        Some((content, false)) => content,
        Some((_, true)) => read_file(tx, hash)?,
    };
    if hash_hex(&sha256(&content)) != hash {
        return Err(StoreError::CorruptBlob(hash.to_string()));
    }
    Ok(Some(content))
}

/// A blob's content, [`StoreError::MissingBlob`] if absent.
pub(crate) fn require_blob(tx: &Transaction<'_>, hash: &str) -> Result<Vec<u8>, StoreError> {
    get_blob(tx, hash)?.ok_or_else(|| StoreError::MissingBlob(hash.to_string()))
}

/// The content of the blob file of a row that says it has one.
fn read_file(tx: &Transaction<'_>, hash: &str) -> Result<Vec<u8>, StoreError> {
    let Some(dir) = blob_dir(tx) else {
        return Err(StoreError::MissingBlob(hash.to_string()));
    };
    // A name that is not a hash would be a path: never opened.
    if !is_hash_name(hash) {
        return Err(StoreError::CorruptBlob(hash.to_string()));
    }
    let read = || -> Result<Vec<u8>, Errno> {
        let root = open_dir(&dir)?;
        let sub = open_dir_at(&root, &hash[..2])?;
        let file = rustix::fs::openat(
            &sub,
            &hash[2..],
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut file = std::fs::File::from(file);
        let mut content = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut content).map_err(|error| {
            error
                .raw_os_error()
                .map_or(Errno::IO, Errno::from_raw_os_error)
        })?;
        Ok(content)
    };
    match read() {
        Ok(content) => Ok(content),
        Err(Errno::NOENT) => Err(StoreError::MissingBlob(hash.to_string())),
        Err(error) => Err(StoreError::BlobFile {
            path: file_path(&dir, hash).display().to_string(),
            message: std::io::Error::from(error).to_string(),
        }),
    }
}

/// `<dir>/ab/cdef…`.
fn file_path(dir: &Path, hash: &str) -> PathBuf {
    match hash.get(..2).zip(hash.get(2..)) {
        Some((head, tail)) => dir.join(head).join(tail),
        None => dir.join(hash),
    }
}

/// 64 lowercase hex digits.
fn is_hash_name(name: &str) -> bool {
    name.len() == 64 && is_hex(name)
}

/// Lowercase hex digits only.
fn is_hex(name: &str) -> bool {
    name.bytes()
        .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// Opens a directory, never through a symlink.
fn open_dir(path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory `name` inside `dir`, never through a symlink.
fn open_dir_at(dir: &impl AsFd, name: &str) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory `name` inside `dir`, creating it 0700 first if needed. Returns whether
/// it was created (its parent's entry then needs an fsync to be durable).
fn ensure_dir_at(dir: &impl AsFd, name: &str) -> Result<(OwnedFd, bool), Errno> {
    let created = match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(error) => return Err(error),
    };
    Ok((open_dir_at(dir, name)?, created))
}

/// The size of the blob file of `hash`, `None` if it cannot be seen as a regular file.
fn file_size(dir: &Path, hash: &str) -> Option<u64> {
    let root = open_dir(dir).ok()?;
    let sub = open_dir_at(&root, &hash[..2]).ok()?;
    let stat = rustix::fs::statat(&sub, &hash[2..], AtFlags::SYMLINK_NOFOLLOW).ok()?;
    (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile)
        .then(|| u64::try_from(stat.st_size).ok())
        .flatten()
}

/// Numbers this process's temp files.
static TEMP_FILES: AtomicU64 = AtomicU64::new(0);

/// Writes the blob file of `hash`: a private temp file beside it, renamed over the final name
/// (a reader sees no file or the whole one). Under `durable` the file and every directory
/// entry it needed are fsynced before this returns.
fn write_file(dir: &Path, hash: &str, content: &[u8], durable: bool) -> std::io::Result<()> {
    let (root, root_created) = match open_dir(dir) {
        Ok(root) => (root, false),
        Err(Errno::NOENT) => {
            let parent = dir.parent().unwrap_or(Path::new("."));
            let name = dir
                .file_name()
                .ok_or_else(|| std::io::Error::other("the blob directory has no name"))?;
            // The state directory may itself be a link (a user's choice); the blob directory
            // inside it may not.
            let parent = rustix::fs::open(
                parent,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            let (root, created) = ensure_dir_at(&parent, &name.to_string_lossy())?;
            if created && durable {
                rustix::fs::fsync(&parent)?;
            }
            (root, created)
        }
        Err(error) => return Err(error.into()),
    };
    let (sub, sub_created) = ensure_dir_at(&root, &hash[..2])?;
    if durable && (sub_created || root_created) {
        rustix::fs::fsync(&root)?;
    }
    let temp = format!(
        "{TEMP_PREFIX}{}-{}-{}",
        &hash[2..],
        std::process::id(),
        TEMP_FILES.fetch_add(1, Ordering::Relaxed)
    );
    let file = rustix::fs::openat(
        &sub,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(file);
    let written = file
        .write_all(content)
        .and_then(|()| if durable { file.sync_data() } else { Ok(()) });
    drop(file);
    if let Err(error) = written {
        let _ = rustix::fs::unlinkat(&sub, &temp, AtFlags::empty());
        return Err(error);
    }
    if let Err(error) = rustix::fs::renameat(&sub, &temp, &sub, &hash[2..]) {
        let _ = rustix::fs::unlinkat(&sub, &temp, AtFlags::empty());
        return Err(error.into());
    }
    if durable {
        rustix::fs::fsync(&sub)?;
    }
    Ok(())
}

/// What [`sweep`] removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Blob files (and temp files) no row names.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Deletes every blob file and leftover temp file of the database of `tx` that no row names:
/// the files of rows deleted by a prune, and the orphans of a crash between a file and its
/// commit. Must run inside a write transaction (see the module's rules): then no writer is
/// between a file and its commit. Entries that are not blob or temp files are left alone.
pub(crate) fn sweep(tx: &Transaction<'_>) -> Result<Swept, StoreError> {
    let mut swept = Swept::default();
    let Some(dir) = blob_dir(tx) else {
        return Ok(swept);
    };
    let failed = |error: std::io::Error| StoreError::BlobFile {
        path: dir.display().to_string(),
        message: error.to_string(),
    };
    let root = match open_dir(&dir) {
        Ok(root) => root,
        Err(Errno::NOENT) => return Ok(swept),
        Err(error) => return Err(failed(error.into())),
    };
    let mut named = tx
        .prepare_cached("SELECT 1 FROM blobs WHERE hash = ?1 AND in_file = 1")
        .ctx("sweeping blob files")?;
    for head in subdirectories(&root).map_err(failed)? {
        let sub = match open_dir_at(&root, &head) {
            Ok(sub) => sub,
            Err(Errno::NOENT) => continue,
            Err(error) => return Err(failed(error.into())),
        };
        for (name, size) in regular_files(&sub).map_err(failed)? {
            let hash = format!("{head}{name}");
            let orphan = if name.starts_with(TEMP_PREFIX) {
                true
            } else if is_hash_name(&hash) {
                !named.exists([&hash]).ctx("sweeping blob files")?
            } else {
                false
            };
            if orphan {
                match rustix::fs::unlinkat(&sub, name.as_str(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(error) => return Err(failed(error.into())),
                }
                swept.files += 1;
                swept.bytes += size;
            }
        }
    }
    Ok(swept)
}

/// The two-hex-digit subdirectories of the blob directory.
fn subdirectories(root: &OwnedFd) -> std::io::Result<Vec<String>> {
    Ok(entries(root)?
        .into_iter()
        .filter(|(name, kind, _)| {
            *kind == rustix::fs::FileType::Directory && name.len() == 2 && is_hex(name)
        })
        .map(|(name, _, _)| name)
        .collect())
}

/// The regular files of a blob subdirectory with their sizes.
fn regular_files(sub: &OwnedFd) -> std::io::Result<Vec<(String, u64)>> {
    Ok(entries(sub)?
        .into_iter()
        .filter(|(_, kind, _)| *kind == rustix::fs::FileType::RegularFile)
        .map(|(name, _, size)| (name, size))
        .collect())
}

/// The entries of a directory (without `.` and `..`) with their types and sizes as `lstat`
/// gives them. Entries that vanish meanwhile or are not UTF-8 are left out.
fn entries(dir: &OwnedFd) -> std::io::Result<Vec<(String, rustix::fs::FileType, u64)>> {
    let mut out = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        out.push((
            name.to_owned(),
            rustix::fs::FileType::from_raw_mode(stat.st_mode),
            u64::try_from(stat.st_size).unwrap_or(0),
        ));
    }
    Ok(out)
}

/// Number of lines as an editor counts them: a final line without `\n` counts.
pub fn line_count(content: &[u8]) -> u64 {
    let newlines = content.iter().filter(|&&byte| byte == b'\n').count() as u64;
    if content.last().is_some_and(|&byte| byte != b'\n') {
        newlines + 1
    } else {
        newlines
    }
}
