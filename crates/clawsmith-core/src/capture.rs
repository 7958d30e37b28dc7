//! Undo for what commands change (issue 16): a manifest of the workspace before each foreground
//! `run_command`, compared with the workspace after it; every difference becomes a change of the
//! running turn, recorded through the same [`ChangeRecorder`] the file tools use, so undo treats
//! it like any other change (one precheck over post hashes, then one restore plan).
//!
//! The manifest lists every regular file the search walk visits (same ignore rules), with its
//! stamp (device, inode, size, mode, times) and SHA-256; the content of each file up to
//! [`CAPTURE_CONTENT_LIMIT`] sits in the store's blob table before the command starts, so a
//! file the command rewrites or deletes can be put back. The manifest is kept per session in
//! memory and refreshed incrementally: only files whose stamp moved are read again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use clawsmith_checkpoint::Store;
use clawsmith_fs::{
    ChangeOrigin, ChangeRecorder, FileStamp, OTHER_ENTRIES_MAX, PostState, PriorState,
    SYMLINK_MODE, Uncaptured, Workspace, escape_control,
};
use clawsmith_protocol::{CancellationSignal, ToolExecutionContext, ToolExecutionResult};

use crate::core::Shared;
use crate::pipeline::execute_tool;
use crate::table::ToolEntry;

/// Files larger than this are tracked by hash only: undo cannot give them back.
pub const CAPTURE_CONTENT_LIMIT: u64 = 8 * 1024 * 1024;

/// The origin a command's changes carry in the checkpoint (`undo list`, change lists).
pub const COMMAND_ORIGIN: &str = "command";

/// Contents are written to the store in transactions of about this many bytes.
const STORE_BATCH_BYTES: usize = 32 * 1024 * 1024;

/// At most this many paths are named in a result's "not captured" note.
const NOT_CAPTURED_NOTES_MAX: usize = 20;

/// What the manifest knows about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    stamp: FileStamp,
    /// SHA-256 of the content, or of the target for a symlink.
    sha256: [u8; 32],
    /// Whether the content is in the store (false above the limit).
    stored: bool,
    /// A symlink: its "content" is its target.
    is_link: bool,
}

impl Known {
    /// The mode the recorder gets: permission bits, or [`SYMLINK_MODE`] for a link.
    fn recorded_mode(&self) -> u32 {
        if self.is_link {
            SYMLINK_MODE | 0o777
        } else {
            self.stamp.mode
        }
    }
}

/// The workspace as the last capture saw it.
#[derive(Debug, Clone, Default)]
struct Manifest {
    /// The captured files.
    files: BTreeMap<String, Known>,
    /// Everything else that is not a directory: compared by stamp only, to name what changed.
    others: BTreeMap<String, (Uncaptured, FileStamp)>,
    /// Whether `others` was cut short.
    others_truncated: bool,
}

/// The manifests of the sessions of one core, by session id, with when each was last used.
#[derive(Debug, Default)]
pub(crate) struct Captures {
    manifests: Mutex<Manifests>,
}

#[derive(Debug, Default)]
struct Manifests {
    by_session: HashMap<String, (u64, Manifest)>,
    uses: u64,
}

/// At most this many sessions keep a manifest (one per 20,000 files is a few MiB); the least
/// recently used goes first, and its next command reads every file once again.
const MANIFESTS_KEPT: usize = 4;

/// A path a command changed that undo cannot restore, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NotCaptured {
    pub path: String,
    pub reason: String,
}

impl Captures {
    /// Brings the session's manifest up to date right before a command and takes it out of the
    /// session until [`Captures::after_command`] puts the next one back (a capture that never
    /// ends only costs the next command a full read).
    fn before_command(&self, workspace: &Workspace, store: &Store, session_id: &str) -> Manifest {
        let previous = self.take(session_id);
        refresh(workspace, store, &previous)
    }

    /// Compares the workspace with `before` right after the command and records every
    /// difference as a change of the call `origin`. Returns what could not be recorded.
    fn after_command(
        &self,
        workspace: &Workspace,
        store: &Store,
        recorder: &dyn ChangeRecorder,
        origin: &ChangeOrigin,
        before: &Manifest,
    ) -> Vec<NotCaptured> {
        let after = refresh(workspace, store, before);
        let mut not_captured = record_differences(store, recorder, origin, before, &after);
        not_captured.extend(uncaptured_differences(before, &after));
        self.put(&origin.session_id, after);
        not_captured
    }

    fn take(&self, session_id: &str) -> Manifest {
        self.lock()
            .by_session
            .remove(session_id)
            .map(|(_, manifest)| manifest)
            .unwrap_or_default()
    }

    fn put(&self, session_id: &str, manifest: Manifest) {
        let mut manifests = self.lock();
        manifests.uses += 1;
        let used = manifests.uses;
        manifests
            .by_session
            .insert(session_id.to_owned(), (used, manifest));
        while manifests.by_session.len() > MANIFESTS_KEPT {
            let oldest = manifests
                .by_session
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(session, _)| session.clone());
            match oldest {
                Some(session) => manifests.by_session.remove(&session),
                None => break,
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Manifests> {
        // A panic while holding the lock leaves a manifest that is merely stale: the next
        // refresh compares stamps again, so the poisoned value is still safe to use.
        self.manifests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The note appended to a command's result when something it changed cannot be undone.
fn not_captured_note(not_captured: &[NotCaptured]) -> Option<String> {
    if not_captured.is_empty() {
        return None;
    }
    let mut lines: Vec<String> = not_captured
        .iter()
        .take(NOT_CAPTURED_NOTES_MAX)
        .map(|entry| {
            format!(
                "[not captured for undo: {}: {}]",
                escape_control(&entry.path),
                entry.reason
            )
        })
        .collect();
    if not_captured.len() > NOT_CAPTURED_NOTES_MAX {
        lines.push(format!(
            "[… and {} more not captured for undo]",
            not_captured.len() - NOT_CAPTURED_NOTES_MAX
        ));
    }
    Some(lines.join("\n"))
}

/// Lists the workspace and reads every file whose stamp differs from `previous` (content into
/// the store up to the limit, hash only above it). A file that cannot be read is left out, as if
/// absent: a command that changes it is then reported as creating it.
fn refresh(workspace: &Workspace, store: &Store, previous: &Manifest) -> Manifest {
    let listing = workspace.list_files();
    let mut manifest = Manifest {
        files: BTreeMap::new(),
        others: listing.others,
        others_truncated: listing.others_truncated,
    };
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut pending_bytes = 0;
    for (path, stamp) in listing.files {
        if let Some(known) = previous.files.get(&path)
            && known.stamp == stamp
        {
            manifest.files.insert(path, known.clone());
            continue;
        }
        let Ok(Some(snapshot)) = workspace.snapshot_file(&path, CAPTURE_CONTENT_LIMIT) else {
            // Never "absent": undo would then delete it (or expect it gone and refuse).
            manifest
                .others
                .insert(path, (Uncaptured::Unreadable, stamp));
            continue;
        };
        let stored = snapshot.content.is_some();
        if let Some(content) = snapshot.content {
            pending_bytes += content.len();
            pending.push(content);
        }
        if pending_bytes >= STORE_BATCH_BYTES {
            flush(store, &mut pending, &mut manifest);
            pending_bytes = 0;
        }
        manifest.files.insert(
            path,
            Known {
                stamp: snapshot.stamp,
                sha256: snapshot.sha256,
                stored,
                is_link: false,
            },
        );
    }
    for (path, stamp) in listing.links {
        if let Some(known) = previous.files.get(&path)
            && known.is_link
            && known.stamp == stamp
        {
            manifest.files.insert(path, known.clone());
            continue;
        }
        let Ok(resolved) = workspace.resolve(&path) else {
            continue;
        };
        let Ok(Some(target)) = workspace.read_link(&resolved) else {
            continue;
        };
        let known = Known {
            stamp,
            sha256: clawsmith_checkpoint::sha256(&target),
            stored: true,
            is_link: true,
        };
        pending.push(target);
        manifest.files.insert(path, known);
    }
    flush(store, &mut pending, &mut manifest);
    manifest
}

/// Both maps' paths in order, each with its value on either side: one pass, no lookups.
fn merged<'m, V>(
    before: &'m BTreeMap<String, V>,
    after: &'m BTreeMap<String, V>,
) -> Vec<(&'m String, Option<&'m V>, Option<&'m V>)> {
    let (mut left, mut right) = (before.iter().peekable(), after.iter().peekable());
    let mut out = Vec::with_capacity(before.len().max(after.len()));
    loop {
        let order = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some((a, _)), Some((b, _))) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        // Each arm takes the entries `peek` just saw, so `next` yields them.
        let (from_left, from_right) = match order {
            std::cmp::Ordering::Less => (left.next(), None),
            std::cmp::Ordering::Greater => (None, right.next()),
            std::cmp::Ordering::Equal => (left.next(), right.next()),
        };
        let Some(path) = from_left.or(from_right).map(|(path, _)| path) else {
            break;
        };
        out.push((path, from_left.map(|(_, v)| v), from_right.map(|(_, v)| v)));
    }
    out
}

/// The entries outside the capture (ignored paths, symlinks, special files) that the command
/// created, changed or removed: undo cannot give them back, so the result names them.
fn uncaptured_differences(before: &Manifest, after: &Manifest) -> Vec<NotCaptured> {
    let paths: BTreeSet<&String> = before.others.keys().chain(after.others.keys()).collect();
    let mut found: Vec<NotCaptured> = paths
        .into_iter()
        .filter(|path| before.others.get(*path) != after.others.get(*path))
        .filter_map(|path| {
            let (kind, _) = after.others.get(path).or_else(|| before.others.get(path))?;
            let reason = match kind {
                Uncaptured::Ignored => {
                    "ignored (an ignore file or a skipped folder such as \
                                        target/ or .git/); undo never touches it"
                }
                Uncaptured::Special => {
                    "not a regular file or symlink; undo restores files and links only"
                }
                Uncaptured::Unreadable => "it could not be read; undo does not touch it",
            };
            Some(NotCaptured {
                path: path.clone(),
                reason: reason.to_owned(),
            })
        })
        .collect();
    if before.others_truncated || after.others_truncated {
        found.push(NotCaptured {
            path: ".".to_owned(),
            reason: format!(
                "more than {OTHER_ENTRIES_MAX} ignored entries; changes past them were not checked"
            ),
        });
    }
    found
}

/// Writes the pending contents; if the store refuses, the files they belong to are marked not
/// stored (undo will name them instead of failing later).
fn flush(store: &Store, pending: &mut Vec<Vec<u8>>, manifest: &mut Manifest) {
    if pending.is_empty() {
        return;
    }
    let contents: Vec<&[u8]> = pending.iter().map(Vec::as_slice).collect();
    if store.store_contents(&contents).is_err() {
        let lost: BTreeSet<[u8; 32]> = pending
            .iter()
            .map(|content| clawsmith_checkpoint::sha256(content))
            .collect();
        for known in manifest.files.values_mut() {
            if lost.contains(&known.sha256) {
                known.stored = false;
            }
        }
    }
    pending.clear();
}

/// Records each path whose content or mode differs between `before` and `after`, in path order.
fn record_differences(
    store: &Store,
    recorder: &dyn ChangeRecorder,
    origin: &ChangeOrigin,
    before: &Manifest,
    after: &Manifest,
) -> Vec<NotCaptured> {
    let mut not_captured = Vec::new();
    for (path, prior, post) in merged(&before.files, &after.files) {
        // A path that is outside the capture on either side (it became ignored, unreadable or
        // special, or stopped being so) is named by `uncaptured_differences`, never recorded:
        // a half-known change would make undo delete or expect the wrong thing.
        if before.others.contains_key(path) || after.others.contains_key(path) {
            continue;
        }
        let same =
            |a: &Known, b: &Known| a.sha256 == b.sha256 && a.recorded_mode() == b.recorded_mode();
        if let (Some(prior), Some(post)) = (prior, post)
            && same(prior, post)
        {
            continue;
        }
        if let Err(reason) = record_one(store, recorder, origin, path, prior, post) {
            not_captured.push(NotCaptured {
                path: path.clone(),
                reason,
            });
        }
    }
    not_captured
}

fn record_one(
    store: &Store,
    recorder: &dyn ChangeRecorder,
    origin: &ChangeOrigin,
    path: &str,
    prior: Option<&Known>,
    post: Option<&Known>,
) -> Result<(), String> {
    let prior_state = match prior {
        None => PriorState::Absent,
        Some(known) if !known.stored => {
            return Err(format!(
                "larger than {} MiB before the command, its content was not kept",
                CAPTURE_CONTENT_LIMIT / (1024 * 1024)
            ));
        }
        Some(known) => match store.stored_content(&known.sha256) {
            Ok(Some(content)) => PriorState::File {
                content,
                mode: known.recorded_mode(),
            },
            Ok(None) => return Err("its prior content is no longer stored".to_owned()),
            Err(error) => return Err(format!("its prior content cannot be read: {error}")),
        },
    };
    let post_state = match post {
        None => PostState::Absent,
        Some(known) => PostState::File {
            sha256: known.sha256,
            size: known.stamp.size,
            mode: known.recorded_mode(),
        },
    };
    recorder
        .before_change(origin, path, &prior_state)
        .map_err(|error| error.message)?;
    recorder
        .after_change(origin, path, &post_state)
        .map_err(|error| error.message)?;
    // The label only tells `undo list` who made the change; the change is recorded either way
    // (and a host's own recorder may not write into this store at all).
    if let Err(error) = store.attribute_change(
        &origin.session_id,
        &origin.turn_id,
        path,
        COMMAND_ORIGIN,
        &origin.tool_call_id,
    ) {
        tracing::warn!(%error, "a command change could not be attributed to its call");
    }
    Ok(())
}

/// Runs a tool call, with capture around it when the tool is the foreground `run_command`.
pub(crate) async fn execute_with_capture(
    shared: &Arc<Shared>,
    entry: &ToolEntry,
    input: serde_json::Value,
    context: ToolExecutionContext,
    cancellation: &CancellationSignal,
) -> ToolExecutionResult {
    if !shared.capture_commands || !captures_changes(entry) {
        return execute_tool(shared, entry, input, context, cancellation).await;
    }
    let origin = ChangeOrigin::from_context(&context);
    let before = {
        let shared = Arc::clone(shared);
        let session_id = origin.session_id.clone();
        tokio::task::spawn_blocking(move || {
            shared
                .captures
                .before_command(&shared.workspace, &shared.store, &session_id)
        })
        .await
    };
    let mut result = execute_tool(shared, entry, input, context, cancellation).await;
    let not_captured = match before {
        Ok(before) => {
            let shared = Arc::clone(shared);
            let origin = origin.clone();
            tokio::task::spawn_blocking(move || {
                shared.captures.after_command(
                    &shared.workspace,
                    &shared.store,
                    shared.recorder.as_ref(),
                    &origin,
                    &before,
                )
            })
            .await
            .unwrap_or_else(|error| {
                vec![NotCaptured {
                    path: ".".to_owned(),
                    reason: format!("the capture after the command failed: {error}"),
                }]
            })
        }
        Err(error) => vec![NotCaptured {
            path: ".".to_owned(),
            reason: format!("the workspace manifest before the command failed: {error}"),
        }],
    };
    if let Some(note) = not_captured_note(&not_captured) {
        result.content.push('\n');
        result.content.push_str(&note);
    }
    result
}

/// Whether a call's workspace changes are captured: the foreground command tool, and every
/// extension tool that may execute processes (a plugin whose declaration could not be trusted
/// has every capability, so it is captured too). The background command tools are not: what a
/// background command changes happens after its call returns.
fn captures_changes(entry: &ToolEntry) -> bool {
    entry.origin() == "builtin:command"
        || (entry.origin().starts_with("extension:")
            && entry
                .facts()
                .capabilities
                .contains(clawsmith_protocol::Capability::ProcessExecute))
}
