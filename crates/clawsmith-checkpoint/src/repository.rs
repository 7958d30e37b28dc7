//! Repositories survive commands: the workspace's `.git` folder is kept around every captured
//! command, so that undo puts back a repository a command damaged or deleted (`rm -rf .git`,
//! `cd / && rm -rf *`, a script's `shutil.rmtree`), whatever spelling did it.
//!
//! The workspace capture leaves `.git` out (it is not the user's files, and its contents would
//! flood every change list). This keeper holds it instead, in two parts:
//!
//! - **Objects by name.** Loose objects (`objects/ab/cdef…`) and packs (`objects/pack/pack-*`)
//!   are named after their content and never rewritten by git, so one copy per name is enough
//!   for good: each is copied into a mirror folder of this machine (beside a SQLite database,
//!   `<database>-repositories/<workspace key>/`; where another store says,
//!   [`RepositoryStorage::repository_mirror`]), private, once, before the first command that
//!   could delete it. A copy, not a hard link: a link shares the file, and a command that
//!   truncates an object in place (root may write a read-only file) would truncate the kept one
//!   too. The first command in a repository pays for the copy (where the file system can share
//!   blocks, `copy_file_range` does); every later one lists the objects and copies only new ones.
//! - **Everything else by content.** `HEAD`, `config`, `index`, refs, reflogs, `packed-refs`,
//!   hooks and the other files are read before the command and their contents put in the blob
//!   store (content-addressed: an unchanged file costs a hash and no write); files over
//!   [`REPOSITORY_FILE_LIMIT`] are left out and named.
//!
//! After the command the folder is looked at again, and each difference is one row of
//! `repository_changes`: a file's content before and after (absent on either side), or an object
//! the command deleted. New objects are never recorded (an object nothing refers to is harmless,
//! and git's own `gc` removes it).
//!
//! # What undo does with them
//!
//! Undo of turn T goes over the rows of T and the later turns, newest first, path by path, as
//! the file undo's precheck does: a path whose current state is the state the row's command
//! left is put back to the state before it; a path that changed since (the user committed,
//! fetched, ran `git status`, which rewrites the index) stops there and is *kept* as it is and
//! named. Unlike the workspace's files, a kept repository path never refuses the undo: the
//! repository is put back as far as it can be without losing what happened since, and objects a
//! command deleted always come back (before the refs that name them). A command that made a
//! commit is undone with it: its branch points where it pointed before.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use clawsmith_fs::{FsError, PriorState, Workspace};
use rusqlite::params;

use crate::blob::{hash_hex, put_blob};
use crate::error::{SqlContext, StoreError};
use crate::store::Store;

/// The repository folder the keeper holds, relative to the workspace root.
pub const REPOSITORY_DIR: &str = ".git";

/// Files of the repository larger than this (outside its objects) are not kept: undo names
/// them instead of putting them back.
pub const REPOSITORY_FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// At most this many files of a repository are looked at; past them the rest are not kept and
/// the snapshot says so.
pub const REPOSITORY_FILES_MAX: usize = 1_000_000;

/// Suffix of the object mirror beside the database (`state.db` → `state.db-repositories`).
pub const REPOSITORY_MIRROR_SUFFIX: &str = "-repositories";

/// What the workspace's repository held at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepositorySnapshot {
    /// Whether `.git` was a folder.
    pub present: bool,
    /// Path (`.git/…`) → hex SHA-256 and mode of each file kept by content.
    files: BTreeMap<String, (String, u32)>,
    /// Paths of the objects kept by name in the mirror.
    objects: BTreeSet<String>,
    /// Paths looked at but not kept, each with why.
    pub not_kept: Vec<(String, String)>,
}

/// What undo did to the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepositoryUndo {
    /// Files written back to their content before the commands.
    pub restored: Vec<String>,
    /// Files the commands created, removed.
    pub removed: Vec<String>,
    /// Objects the commands deleted, put back.
    pub objects_restored: usize,
    /// Paths left as they are, each with why (changed since the commands, or not kept).
    pub kept: Vec<(String, String)>,
}

impl RepositoryUndo {
    /// Whether undo touched or named nothing of the repository.
    pub fn is_empty(&self) -> bool {
        self.restored.is_empty()
            && self.removed.is_empty()
            && self.objects_restored == 0
            && self.kept.is_empty()
    }
}

/// Whether `relative` (beneath `.git/`) names a file git never rewrites: a loose object or a
/// pack's immutable part, both named after their content.
fn is_object(relative: &str) -> bool {
    let Some(rest) = relative.strip_prefix(".git/objects/") else {
        return false;
    };
    match rest.split_once('/') {
        Some(("pack", name)) => {
            name.starts_with("pack-")
                && [".pack", ".idx", ".rev", ".bitmap", ".mtimes"]
                    .iter()
                    .any(|suffix| name.ends_with(suffix))
        }
        Some((fan, name)) => {
            fan.len() == 2
                && fan.bytes().all(|byte| byte.is_ascii_hexdigit())
                && name.len() >= 38
                && name.bytes().all(|byte| byte.is_ascii_hexdigit())
        }
        None => false,
    }
}

/// A file's state in a row: its hex hash and mode, or absent. An object's row holds an empty
/// hash before (kept in the mirror) and nothing after.
type Side = Option<(String, u32)>;

/// One row of what a command changed in the workspace's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryChange {
    /// The store's id of the row (ordering rows as they were recorded); 0 before it is stored.
    pub id: i64,
    /// The turn whose command made the change.
    pub turn_id: String,
    /// The path (`.git/…`).
    pub path: String,
    /// Whether the path is an object kept by name in the mirror (deleted or rewritten by the
    /// command) rather than a file kept by content.
    pub object: bool,
    /// The file's hex SHA-256 and mode before the command; absent when it was absent (an
    /// object's row holds an empty hash: it is kept in the mirror).
    pub pre: Option<(String, u32)>,
    /// The same after the command.
    pub post: Option<(String, u32)>,
}

/// What the repository keeper needs from a store: where this machine mirrors a workspace's
/// objects, the blob store for the other files' contents, and the rows of what commands
/// changed. The SQLite store and the PostgreSQL store implement it, and share [`keep`],
/// [`record_changes`] and [`undo_changes`].
pub trait RepositoryStorage {
    /// The mirror folder of `workspace`'s objects on this machine, created private; `None` when
    /// there is none.
    fn repository_mirror(&self, workspace: &Workspace) -> Option<PathBuf>;

    /// Stores each of `contents` as a blob (an existing one is success); their hex names.
    fn keep_contents(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError>;

    /// The content stored under `sha256`, checked against it; `None` when it is not stored.
    fn repository_content(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Records `changes` as the call's, in one commit.
    fn insert_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        changes: &[RepositoryChange],
    ) -> Result<(), StoreError>;

    /// The session's changes not yet undone, newest first.
    fn repository_changes(&self, session_id: &str) -> Result<Vec<RepositoryChange>, StoreError>;

    /// Marks the rows `ids` (of the session) undone.
    fn mark_repository_changes_undone(
        &self,
        session_id: &str,
        ids: &[i64],
    ) -> Result<(), StoreError>;
}

/// The mirror folder of `workspace`'s objects beneath `base` (one per workspace root, named
/// after its hash), created private; `None` when it cannot be made.
pub fn repository_mirror_under(base: &Path, workspace: &Workspace) -> Option<PathBuf> {
    let key = hash_hex(&crate::sha256(
        workspace.root().as_os_str().as_encoded_bytes(),
    ));
    let mirror = base.join(&key[..32]);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&mirror)
        .ok()?;
    Some(mirror)
}

impl Store {
    /// Looks at the workspace's repository and keeps it ([`keep`]).
    pub fn keep_repository(&self, workspace: &Workspace) -> Result<RepositorySnapshot, StoreError> {
        keep(self, workspace)
    }

    /// Records what differs between the repository `before` a command and `after` it
    /// ([`record_changes`]).
    pub fn record_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        before: &RepositorySnapshot,
        after: &RepositorySnapshot,
        touched: &[&str],
    ) -> Result<usize, StoreError> {
        record_changes(self, session_id, turn_id, call_id, before, after, touched)
    }

    /// Puts the repository back to where it was before the commands of `turns`
    /// ([`undo_changes`]).
    pub(crate) fn undo_repository(
        &self,
        session_id: &str,
        turns: &[String],
        workspace: &Workspace,
    ) -> Result<RepositoryUndo, StoreError> {
        undo_changes(self, session_id, turns, workspace)
    }
}

impl RepositoryStorage for Store {
    fn repository_mirror(&self, workspace: &Workspace) -> Option<PathBuf> {
        let database = self.path()?;
        let mut base = database.as_os_str().to_owned();
        base.push(REPOSITORY_MIRROR_SUFFIX);
        repository_mirror_under(Path::new(&base), workspace)
    }

    fn keep_contents(&self, contents: &[&[u8]]) -> Result<Vec<String>, StoreError> {
        let fsync = self.fsyncs();
        self.write("keeping the repository", |tx| {
            contents
                .iter()
                .map(|content| put_blob(tx, content, fsync))
                .collect::<Result<Vec<String>, StoreError>>()
        })
    }

    fn repository_content(&self, sha256: &[u8; 32]) -> Result<Option<Vec<u8>>, StoreError> {
        self.stored_content(sha256)
    }

    fn insert_repository_changes(
        &self,
        session_id: &str,
        turn_id: &str,
        call_id: &str,
        changes: &[RepositoryChange],
    ) -> Result<(), StoreError> {
        self.write("recording repository changes", |tx| {
            let mut statement = tx
                .prepare_cached(
                    "INSERT INTO repository_changes
                     (session_id, turn_id, call_id, path, object, pre_hash, pre_mode, post_hash,
                      post_mode)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .ctx("recording repository changes")?;
            for change in changes {
                let (pre_hash, pre_mode) = split(&change.pre);
                let (post_hash, post_mode) = split(&change.post);
                statement
                    .execute(params![
                        session_id,
                        turn_id,
                        call_id,
                        change.path,
                        change.object,
                        pre_hash,
                        pre_mode,
                        post_hash,
                        post_mode
                    ])
                    .ctx("recording repository changes")?;
            }
            Ok(())
        })
    }

    fn repository_changes(&self, session_id: &str) -> Result<Vec<RepositoryChange>, StoreError> {
        self.read("reading repository changes", |tx| {
            let mut statement = tx
                .prepare_cached(
                    "SELECT id, turn_id, path, object, pre_hash, pre_mode, post_hash, post_mode
                     FROM repository_changes WHERE session_id = ?1 AND undone = 0
                     ORDER BY id DESC",
                )
                .ctx("reading repository changes")?;
            let rows = statement
                .query_map([session_id], |row| {
                    Ok(RepositoryChange {
                        id: row.get(0)?,
                        turn_id: row.get(1)?,
                        path: row.get(2)?,
                        object: row.get(3)?,
                        pre: join(row.get(4)?, row.get(5)?),
                        post: join(row.get(6)?, row.get(7)?),
                    })
                })
                .ctx("reading repository changes")?
                .collect::<Result<Vec<RepositoryChange>, _>>()
                .ctx("reading repository changes")?;
            Ok(rows)
        })
    }

    fn mark_repository_changes_undone(
        &self,
        _session_id: &str,
        ids: &[i64],
    ) -> Result<(), StoreError> {
        self.write("marking repository changes undone", |tx| {
            let mut statement = tx
                .prepare_cached("UPDATE repository_changes SET undone = 1 WHERE id = ?1")
                .ctx("marking repository changes undone")?;
            for id in ids {
                statement
                    .execute([id])
                    .ctx("marking repository changes undone")?;
            }
            Ok(())
        })
    }
}

/// Looks at the workspace's repository and keeps it: objects not yet in the mirror are copied
/// there, the other files' contents go to the blob store. A workspace without a `.git` folder
/// gives a snapshot that is not [`present`](RepositorySnapshot::present). An object that cannot
/// be kept is named in [`RepositorySnapshot::not_kept`]; an `Err` means the store refused the
/// contents.
pub fn keep(
    storage: &(impl RepositoryStorage + ?Sized),
    workspace: &Workspace,
) -> Result<RepositorySnapshot, StoreError> {
    let mut snapshot = RepositorySnapshot::default();
    let Ok(root) = workspace.resolve(REPOSITORY_DIR) else {
        return Ok(snapshot);
    };
    let Some((paths, truncated)) = workspace.regular_files_beneath(&root, REPOSITORY_FILES_MAX)
    else {
        return Ok(snapshot);
    };
    snapshot.present = true;
    if truncated {
        snapshot.not_kept.push((
            REPOSITORY_DIR.to_owned(),
            format!("more than {REPOSITORY_FILES_MAX} files; the rest were not kept"),
        ));
    }
    let mirror = storage.repository_mirror(workspace);
    let mut contents: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for relative in paths {
        let Ok(path) = workspace.resolve(&relative) else {
            continue;
        };
        if is_object(&relative) {
            let kept = match &mirror {
                Some(mirror) => mirror_object(workspace, &path, &relative, mirror),
                None => Err("the store is in memory: no mirror to keep objects in".to_owned()),
            };
            match kept {
                Ok(()) => {
                    snapshot.objects.insert(relative);
                }
                Err(reason) => snapshot.not_kept.push((relative, reason)),
            }
            continue;
        }
        match workspace.read_state_capped(&path, REPOSITORY_FILE_LIMIT) {
            Ok(PriorState::File { content, mode }) => contents.push((relative, content, mode)),
            // Gone since it was listed: the command has not started, so it is not a change.
            Ok(PriorState::Absent) => {}
            Err(FsError::TooLarge { .. }) => snapshot.not_kept.push((
                relative,
                format!("larger than {} MiB", REPOSITORY_FILE_LIMIT >> 20),
            )),
            Err(error) => snapshot.not_kept.push((relative, error.to_string())),
        }
    }
    let bytes: Vec<&[u8]> = contents
        .iter()
        .map(|(_, content, _)| content.as_slice())
        .collect();
    let hashes = storage.keep_contents(&bytes)?;
    for ((relative, _, mode), hash) in contents.into_iter().zip(hashes) {
        snapshot.files.insert(relative, (hash, mode));
    }
    Ok(snapshot)
}

/// Records what differs between the repository `before` a command and `after` it as changes of
/// the call, for undo: files by content, objects the command deleted, and the objects of
/// `touched` (paths whose stamp the command moved: an object written in place) that were kept
/// before it. Paths not kept on either side are left out (a half-known change would make undo
/// delete or expect the wrong thing). Returns how many rows were recorded.
pub fn record_changes(
    storage: &(impl RepositoryStorage + ?Sized),
    session_id: &str,
    turn_id: &str,
    call_id: &str,
    before: &RepositorySnapshot,
    after: &RepositorySnapshot,
    touched: &[&str],
) -> Result<usize, StoreError> {
    let unknown: HashSet<&str> = before
        .not_kept
        .iter()
        .chain(&after.not_kept)
        .map(|(path, _)| path.as_str())
        .collect();
    let mut rows: Vec<(&str, bool, Side, Side)> = Vec::new();
    let paths: BTreeSet<&String> = before.files.keys().chain(after.files.keys()).collect();
    for path in paths {
        if unknown.contains(path.as_str()) {
            continue;
        }
        let (pre, post) = (before.files.get(path), after.files.get(path));
        if pre != post {
            rows.push((path, false, pre.cloned(), post.cloned()));
        }
    }
    let rewritten = touched
        .iter()
        .filter_map(|path| before.objects.get(*path))
        .filter(|path| after.objects.contains(*path));
    for path in before.objects.difference(&after.objects).chain(rewritten) {
        if !unknown.contains(path.as_str()) {
            rows.push((path, true, Some((String::new(), 0o444)), None));
        }
    }
    if rows.is_empty() {
        return Ok(0);
    }
    let changes: Vec<RepositoryChange> = rows
        .into_iter()
        .map(|(path, object, pre, post)| RepositoryChange {
            id: 0,
            turn_id: turn_id.to_owned(),
            path: path.to_owned(),
            object,
            pre,
            post,
        })
        .collect();
    storage.insert_repository_changes(session_id, turn_id, call_id, &changes)?;
    Ok(changes.len())
}

/// Puts the repository back to where it was before the commands of `turns` (see the module
/// docs): objects first, then files, newest row first per path, a path changed since kept. The
/// rows are marked undone. Fails only when the store does; a path that cannot be written is
/// named in [`RepositoryUndo::kept`].
pub fn undo_changes(
    storage: &(impl RepositoryStorage + ?Sized),
    session_id: &str,
    turns: &[String],
    workspace: &Workspace,
) -> Result<RepositoryUndo, StoreError> {
    let mut report = RepositoryUndo::default();
    let rows = storage.repository_changes(session_id)?;
    let rows: Vec<RepositoryChange> = rows
        .into_iter()
        .filter(|row| turns.contains(&row.turn_id))
        .collect();
    if rows.is_empty() {
        return Ok(report);
    }
    // Objects: every one a command deleted or wrote in place comes back (an object's name
    // is its content, so any other content is damage, whoever made it).
    let mirror = storage.repository_mirror(workspace);
    let mut objects: Vec<&str> = rows
        .iter()
        .filter(|row| row.object)
        .map(|row| row.path.as_str())
        .collect();
    objects.sort_unstable();
    objects.dedup();
    for relative in objects {
        let Ok(path) = workspace.resolve(relative) else {
            continue;
        };
        let kept = match &mirror {
            Some(mirror) => read_mirrored(mirror, relative)
                .map_err(|error| format!("not in the mirror: {error}")),
            None => Err("the store is in memory: no mirror".to_owned()),
        };
        let restored = kept.and_then(|content| {
            if matches!(
                workspace.read_state_capped(&path, content.len() as u64),
                Ok(PriorState::File { content: ref now, .. }) if *now == content
            ) {
                return Ok(false);
            }
            workspace
                .restore_entry(&path, &content, 0o444, true)
                .map(|()| true)
                .map_err(|error| error.to_string())
        });
        match restored {
            Ok(true) => report.objects_restored += 1,
            Ok(false) => {}
            Err(reason) => report.kept.push((relative.to_owned(), reason)),
        }
    }
    // Files: walk each path's rows newest first over its current state. A path already in
    // the state before its oldest command (an undo interrupted after writing it, rolled
    // forward now; or put back by hand) is left alone and not named.
    let mut oldest: HashMap<&str, &Side> = HashMap::new();
    for row in rows.iter().filter(|row| !row.object) {
        oldest.insert(row.path.as_str(), &row.pre);
    }
    let mut current: HashMap<&str, (Side, Side)> = HashMap::new();
    let mut stopped: HashSet<&str> = HashSet::new();
    for row in rows.iter().filter(|row| !row.object) {
        let path = row.path.as_str();
        if stopped.contains(path) {
            continue;
        }
        let state = match current.get(path) {
            Some((_, state)) => state.clone(),
            None => {
                let found = current_side(workspace, path);
                if found != row.post && oldest.get(path).is_some_and(|pre| **pre == found) {
                    stopped.insert(path);
                    continue;
                }
                current.insert(path, (found.clone(), found.clone()));
                found
            }
        };
        if state == row.post {
            if let Some(entry) = current.get_mut(path) {
                entry.1 = row.pre.clone();
            }
        } else {
            stopped.insert(path);
            report.kept.push((
                path.to_owned(),
                "changed since the command; left as it is".to_owned(),
            ));
        }
    }
    let mut targets: Vec<(&str, Side)> = current
        .into_iter()
        .filter(|(path, (found, target))| !stopped.contains(path) && found != target)
        .map(|(path, (_, target))| (path, target))
        .collect();
    // In path order, after the objects they may name.
    targets.sort_by(|a, b| a.0.cmp(b.0));
    for (relative, target) in targets {
        let Ok(path) = workspace.resolve(relative) else {
            continue;
        };
        let done = match &target {
            Some((hash, mode)) => {
                let Some(content) = storage.repository_content(&unhex(hash)?)? else {
                    report.kept.push((
                        relative.to_owned(),
                        "its content is no longer stored".to_owned(),
                    ));
                    continue;
                };
                workspace.restore_entry(&path, &content, *mode, true)
            }
            None => workspace.remove_entry(&path),
        };
        match (done, target) {
            (Ok(()), Some(_)) => report.restored.push(relative.to_owned()),
            (Ok(()), None) => report.removed.push(relative.to_owned()),
            (Err(error), _) => report.kept.push((relative.to_owned(), error.to_string())),
        }
    }
    let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
    storage.mark_repository_changes_undone(session_id, &ids)?;
    report.kept.sort();
    Ok(report)
}

fn split(side: &Side) -> (Option<&str>, Option<u32>) {
    match side {
        Some((hash, mode)) => (Some(hash.as_str()), Some(*mode)),
        None => (None, None),
    }
}

fn join(hash: Option<String>, mode: Option<u32>) -> Side {
    hash.map(|hash| (hash, mode.unwrap_or(0o644)))
}

/// The file at `relative` now, as a row states it; a path that is not a regular file counts as
/// something else than any row's state (a hash nobody recorded).
fn current_side(workspace: &Workspace, relative: &str) -> Side {
    let Ok(path) = workspace.resolve(relative) else {
        return Some((String::from("unreachable"), 0));
    };
    match workspace.read_state_capped(&path, REPOSITORY_FILE_LIMIT) {
        Ok(PriorState::Absent) => None,
        Ok(PriorState::File { content, mode }) => Some((hash_hex(&crate::sha256(&content)), mode)),
        Err(_) => Some((String::from("unreadable"), 0)),
    }
}

fn unhex(hash: &str) -> Result<[u8; 32], StoreError> {
    let bytes = hex::decode(hash).map_err(|_| StoreError::CorruptBlob(hash.to_owned()))?;
    bytes
        .try_into()
        .map_err(|_| StoreError::CorruptBlob(hash.to_owned()))
}

/// Where `relative` (`.git/objects/…`) lives in the mirror.
fn mirrored_path(mirror: &Path, relative: &str) -> PathBuf {
    mirror.join(relative.trim_start_matches(".git/"))
}

/// Copies the object at `path` into the mirror unless it is there already (named after its
/// content, so the name is enough).
fn mirror_object(
    workspace: &Workspace,
    path: &clawsmith_fs::WorkspacePath,
    relative: &str,
    mirror: &Path,
) -> Result<(), String> {
    let target = mirrored_path(mirror, relative);
    if std::fs::symlink_metadata(&target).is_ok() {
        return Ok(());
    }
    let parent = target.parent().unwrap_or(mirror);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|error| format!("the mirror folder cannot be made: {error}"))?;
    // Opened beneath the workspace: no way out through a planted symlink.
    let (mut file, _) = workspace
        .open_for_read(path)
        .map_err(|error| error.to_string())?;
    copy_into_mirror(&mut file, &target)
}

/// Copies `file` to `target` through a temporary name, so the mirror never holds half an object.
/// `std::io::copy` copies with `copy_file_range`, which shares the blocks instead where the file
/// system can (btrfs, XFS).
fn copy_into_mirror(file: &mut std::fs::File, target: &Path) -> Result<(), String> {
    let temp = target.with_extension(format!("clawsmith-tmp-{}", std::process::id()));
    let copied = (|| {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .custom_flags(no_follow())
            .open(&temp)?;
        std::io::copy(file, &mut out)?;
        out.flush()?;
        std::fs::rename(&temp, target)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    copied.map_err(|error| format!("it could not be copied into the mirror: {error}"))
}

fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The mirrored copy of `relative`, read whole.
fn read_mirrored(mirror: &Path, relative: &str) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(mirrored_path(mirror, relative))?;
    let mut content = Vec::new();
    file.read_to_end(&mut content)?;
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::is_object;

    #[test]
    fn objects_are_the_files_named_after_their_content() {
        let table = [
            (
                ".git/objects/ab/cdef0123456789abcdef0123456789abcdef01",
                true,
            ),
            (
                ".git/objects/ab/cdef0123456789abcdef0123456789abcdef0123456789abcdef012345",
                true,
            ),
            (".git/objects/pack/pack-0123abcd.pack", true),
            (".git/objects/pack/pack-0123abcd.idx", true),
            (".git/objects/pack/pack-0123abcd.rev", true),
            (".git/objects/pack/pack-0123abcd.keep", false),
            (".git/objects/pack/multi-pack-index", false),
            (".git/objects/info/commit-graph", false),
            (".git/objects/info/alternates", false),
            (".git/objects/ab/tmp_obj_XYZ", false),
            (
                ".git/objects/zz/cdef0123456789abcdef0123456789abcdef01",
                false,
            ),
            (".git/refs/heads/main", false),
            (".git/HEAD", false),
            ("objects/ab/cdef0123456789abcdef0123456789abcdef01", false),
        ];
        for (path, expected) in table {
            assert_eq!(is_object(path), expected, "{path}");
        }
    }
}
