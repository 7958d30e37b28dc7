//! Undo for what commands change: a manifest of the workspace before each foreground
//! `run_command`, compared with the workspace after it; every difference becomes a change of the
//! running turn, recorded through the same [`ChangeRecorder`] the file tools use, so undo treats
//! it like any other change (one precheck over post hashes, then one restore plan).
//!
//! The manifest lists every regular file the search walk visits (same ignore rules), with its
//! stamp (device, inode, size, mode, times) and SHA-256; the content of each file up to
//! [`CAPTURE_CONTENT_LIMIT`] sits in the store's blob table before the command starts, so a
//! file the command rewrites or deletes can be put back. The manifest is kept per session in
//! memory and refreshed incrementally: only files whose stamp moved are read again. A session
//! without one in this process (a one-shot `clawsmith call`, a new `clawsmith turn`) starts from
//! the workspace's last manifest in the store, minus the files whose content a prune freed, so
//! its first command too reads only what moved (its first refresh is still a full `lstat` pass).
//! It also
//! holds the set of directories the walk enters: those present after a command and absent
//! before it are recorded as made by the command (`CommandCaptureStore::record_created_directories`), and undo
//! removes exactly those once they are empty again.
//!
//! # Not passing over an unchanged tree: the workspace watch
//!
//! A full refresh `lstat`s every entry of the tree (20,000 per 20,000-file workspace, before and
//! after each command). From a core's second captured command on (a one-shot `clawsmith call`
//! never pays for it), the core keeps one [`WorkspaceWatch`] of its workspace across commands:
//! an inotify instance with one watch per directory, each added right before the directory is
//! read. A refresh then drains the events and `lstat`s only the entries they name, listing whole
//! only the subtrees of directories that appeared, moved or changed (watching them before
//! listing them). Several sessions share the watch; each takes its own share of the events.
//!
//! Why that finds every change a full pass finds, and where it falls back to the full pass:
//!
//! - **Order.** A directory is watched before it is listed, and events are drained before the
//!   entries they name are looked at; events that arrive later stay queued for the next refresh.
//!   So every change after a look at an entry is an event a later refresh sees (at worst an entry
//!   is looked at once more than needed).
//! - **What inotify reports.** Creation, removal, renames in both directions, writes
//!   (`IN_MODIFY`, also for `truncate`, `fallocate`, `copy_file_range`), closes after writing,
//!   and mode/owner/time changes (`IN_ATTRIB`) of every entry of a watched directory, through
//!   any path and from any mount namespace: watches are on inodes, so the sandbox's bind mount of
//!   the workspace reports like the host's own path. Not on file systems where other machines or
//!   a user-space server write (NFS, FUSE, 9p, virtiofs): the watch is only used where the root
//!   and every directory on another device are on a local disk file system, tmpfs or overlayfs.
//! - **Writes through a shared mapping** after the file descriptor was closed make no event.
//!   But the mapping needs a descriptor opened for writing, whose close is an `IN_CLOSE_WRITE`
//!   for that path, and the file is looked at when the next refresh runs: for a foreground
//!   command that is after it ended, and the sandbox guarantees nothing of it survives the call,
//!   so no mapping of it can write any more. A *background* command's processes can: while one
//!   of the core's background commands runs, and for the first refresh after a refresh that saw
//!   one running, every refresh is a full pass. A process outside clawsmith that writes through a
//!   mapping it made before the last full pass is the one writer left unseen, and the same holds
//!   for a hard link an outside process makes into the workspace from elsewhere (no event names
//!   the workspace's path): both are bounded by a full pass at least every
//!   [`FULL_PASS_EVERY`] per session (and the first command of each session is one).
//! - **Hard links.** A write through one name is an event for that name only. Files with several
//!   links seen by the last full pass are looked at on every refresh; a file that gains a second
//!   link (`ln`, into an ignored folder too) makes that refresh a full pass, which finds every
//!   name.
//! - **Directories moved in** (from outside the workspace, or from elsewhere in it) carry files
//!   that never had an event: `IN_MOVED_TO` on a directory lists its subtree whole, watching each
//!   folder before reading it. A directory moved *out* drops its entries; its watch's later events
//!   no longer map to workspace paths.
//! - **Which files count.** A change to an ignore file (`.gitignore`, `.ignore`, `.git`,
//!   `.git/info/exclude`) changes which files are captured: full pass. So does a queue
//!   overflow, an unmount, a directory that cannot be watched (the per-user watch limit, `ENOSPC`:
//!   the watch is then given up for the core), a changed entry whose folder the watch does not know,
//!   and a last listing cut short at [`OTHER_ENTRIES_MAX`] ignored entries.
//!
//! # Background commands
//!
//! `start_command` brings the session's manifest up to date right before the command starts, and
//! the command is then *pending* for its session. At each capture point of the session — its next
//! command (before it runs), and either end of each turn — what changed since the manifest is
//! recorded as changes of the running turn whose call id is the oldest pending command's id, with
//! the same prior contents and post hashes as any command's change. A command seen ended *before*
//! that look is no longer pending afterwards (it made all its changes by then). What cannot be
//! told apart is documented, not guessed: while a background command runs, every change seen at a
//! capture point is attributed to it (a user's concurrent edit too), and what it changes during a
//! foreground command of the same session is that foreground command's.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawsmith_checkpoint::{REPOSITORY_DIR, RepositorySnapshot};
use clawsmith_fs::{
    ChangeOrigin, ChangeRecorder, FileListing, FileStamp, ListingChanges, OTHER_ENTRIES_MAX,
    PostState, PriorState, SYMLINK_MODE, Uncaptured, Workspace, WorkspaceWatch, escape_control,
};
use clawsmith_protocol::{CancellationSignal, ToolExecutionContext, ToolExecutionResult};
use clawsmith_sandbox::{CommandExecutionService, CommandState};
use clawsmith_store::SessionStore;

use crate::execute::execute_tool;
use crate::shared::Shared;
use crate::table::{Origin, ToolEntry};

/// Files larger than this are tracked by hash only: undo cannot give them back.
pub const CAPTURE_CONTENT_LIMIT: u64 = 8 * 1024 * 1024;

/// The origin a command's changes carry in the checkpoint (`undo list`, change lists). Changes
/// captured around an extension tool carry the tool's name instead.
pub const COMMAND_ORIGIN: &str = "command";

/// Whose changes a capture records: the call, and the label `undo list` shows for them.
struct Attribution<'a> {
    origin: &'a ChangeOrigin,
    /// [`COMMAND_ORIGIN`] for commands (and a capture recovered after a crash), else the name
    /// of the extension tool the capture surrounded.
    label: &'a str,
}

/// What a capture reads and writes: the workspace it lists, the store that keeps contents and
/// manifests, and the recorder its changes go through (the file tools' own).
#[derive(Clone, Copy)]
struct CaptureIo<'a> {
    workspace: &'a Workspace,
    store: &'a dyn SessionStore,
    recorder: &'a dyn ChangeRecorder,
}

impl<'a> CaptureIo<'a> {
    /// The core's workspace, store and recorder.
    fn of(shared: &'a Shared) -> CaptureIo<'a> {
        CaptureIo {
            workspace: &shared.workspace,
            store: &*shared.store,
            recorder: shared.recorder.as_ref(),
        }
    }

    /// Records differences through this store and recorder, as `who`'s changes.
    fn recording(self, who: &'a Attribution<'a>, content_limit: u64) -> Recording<'a> {
        Recording {
            store: self.store,
            recorder: self.recorder,
            who,
            content_limit,
        }
    }
}

/// How [`record_differences`] records: through which store and recorder, as whose changes.
struct Recording<'a> {
    store: &'a dyn SessionStore,
    recorder: &'a dyn ChangeRecorder,
    who: &'a Attribution<'a>,
    /// Files above this size were hashed, not stored: their prior content cannot be recorded.
    content_limit: u64,
}

/// Two manifests of one workspace and the paths between them that may differ (sorted): what a
/// refresh found.
#[derive(Clone, Copy)]
struct Difference<'a> {
    before: &'a Manifest,
    after: &'a Manifest,
    candidates: &'a [String],
}

/// The label of the changes captured around a call of `entry`.
fn change_label(entry: &ToolEntry) -> &str {
    if *entry.origin() == Origin::Command {
        COMMAND_ORIGIN
    } else {
        entry.name()
    }
}

/// Contents are written to the store in transactions of about this many bytes.
const STORE_BATCH_BYTES: usize = 32 * 1024 * 1024;

/// At most this many paths are named in a result's "not captured" note.
const NOT_CAPTURED_NOTES_MAX: usize = 20;

/// What the manifest knows about one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    files: HashMap<String, Known>,
    /// Everything else that is not a directory: compared by stamp only, to name what changed.
    others: HashMap<String, (Uncaptured, FileStamp)>,
    /// Whether `others` was cut short.
    others_truncated: bool,
    /// The directories the walk enters: those present after a command and not before are the
    /// ones it made, which undo removes once they are empty again. Not part of the stored
    /// encoding (a recovered command's directories go by birth time).
    directories: std::collections::HashSet<String>,
    /// The hash of this manifest's encoding when it is in the store as is (a manifest that did
    /// not change since is not stored again).
    persisted: Option<[u8; 32]>,
    /// When the last full pass behind this manifest started (`None`: never, or read back from
    /// the store): past [`FULL_PASS_EVERY`] the next refresh is a full pass again.
    verified_at: Option<Instant>,
    /// A background command was running during the refresh that made this manifest: the next
    /// refresh is a full pass (its processes may write where inotify does not look).
    background_during: bool,
    /// Read back from the store, as the workspace's last manifest of an earlier process or
    /// session: it spares reading unchanged files again, but what changed since it is not the
    /// session's to attribute (see [`Captures::remembered`]).
    remembered: bool,
}

/// The manifests of the sessions of one core, by session id, with when each was last used.
#[derive(Debug)]
pub(crate) struct Captures {
    manifests: Mutex<Manifests>,
    /// Files larger than this are hashed, not stored ([`CAPTURE_CONTENT_LIMIT`] by default).
    content_limit: u64,
    /// The workspace's inotify watch, shared by the sessions (see the module docs).
    watching: Mutex<Watching>,
    /// The core's background commands: while one runs, refreshes are full passes.
    background: Option<Arc<CommandExecutionService>>,
    /// Refreshes so far, by kind.
    passes: Mutex<CapturePasses>,
    /// By session: the background commands it started whose changes are not all recorded yet,
    /// oldest first.
    background_pending: Mutex<HashMap<String, Vec<String>>>,
}

/// How a core's command capture refreshed its manifests ([`AgentCore::capture_passes`]).
///
/// [`AgentCore::capture_passes`]: crate::AgentCore::capture_passes
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CapturePasses {
    /// Passes over the whole tree (one `lstat` per entry).
    pub full: u64,
    /// Refreshes that looked only at what the workspace watch's events named.
    pub from_events: u64,
    /// Files the refreshes read (new, or their stamp moved) or found gone: with a manifest of
    /// the session's own, or the workspace's last one read back from the store, an unchanged
    /// file is never read again.
    pub files_read_or_gone: u64,
}

/// The core's watch of its workspace.
#[derive(Debug, Default)]
struct Watching {
    /// Built at the core's second captured command (a one-shot process never pays for it).
    watch: Option<WorkspaceWatch>,
    /// Commands captured so far.
    commands: u64,
    /// The workspace cannot be watched (no inotify, or a file system it does not see every
    /// writer of): full passes only.
    unavailable: bool,
}

/// Even when every event says nothing changed, a session's manifest is rebuilt by a full pass at
/// least this often: the bound on what inotify cannot see (see the module docs).
pub(crate) const FULL_PASS_EVERY: Duration = Duration::from_secs(60);

/// Where a refresh's entries come from.
enum Listing {
    /// A pass over the whole tree.
    Full(FileListing),
    /// Only what the watch's events named since the session's previous refresh.
    Changes(ListingChanges),
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
    /// No manifest yet; files up to `content_limit` bytes are kept for undo.
    pub(crate) fn with_content_limit(content_limit: u64) -> Captures {
        Captures {
            manifests: Mutex::default(),
            content_limit,
            watching: Mutex::default(),
            background: None,
            passes: Mutex::default(),
            background_pending: Mutex::default(),
        }
    }

    pub(crate) fn passes(&self) -> CapturePasses {
        *self
            .passes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Refreshes are full passes while one of `service`'s commands runs.
    pub(crate) fn with_background(mut self, service: Option<Arc<CommandExecutionService>>) -> Self {
        self.background = service;
        self
    }

    /// Whether a background command of this core is running now.
    fn background_running(&self) -> bool {
        self.background.as_ref().is_some_and(|service| {
            service
                .list()
                .iter()
                .any(|command| command.state == CommandState::Running)
        })
    }

    /// The entries to refresh `previous` with: what the watch's events named when they can be
    /// trusted, else a full pass (watched, so that the next refresh can use the events). Also
    /// returns whether a background command is running.
    fn listing(
        &self,
        workspace: &Workspace,
        session_id: &str,
        previous: &Manifest,
    ) -> (Listing, bool) {
        let background = self.background_running();
        let mut watching = self
            .watching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let full = background
            || previous.background_during
            || previous
                .verified_at
                .is_none_or(|at| at.elapsed() >= FULL_PASS_EVERY);
        let listing = match watching.watch.as_mut() {
            Some(watch) => {
                let changes = if full {
                    None
                } else {
                    workspace.changes_since(watch, session_id)
                };
                match changes {
                    Some(changes) => Listing::Changes(changes),
                    None => Listing::Full(workspace.list_files_watched(watch, session_id)),
                }
            }
            None => Listing::Full(workspace.list_files()),
        };
        let mut passes = self
            .passes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match listing {
            Listing::Full(_) => passes.full += 1,
            Listing::Changes(_) => passes.from_events += 1,
        }
        (listing, background)
    }

    /// Counts a command; from the core's second one on, the workspace is watched.
    fn count_command(&self, workspace: &Workspace) {
        let mut watching = self
            .watching
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        watching.commands += 1;
        if watching.commands >= 2 && watching.watch.is_none() && !watching.unavailable {
            watching.watch = workspace.watch();
            watching.unavailable = watching.watch.is_none();
        }
    }

    /// Refreshes `previous` for `session_id`: its entries from [`Captures::listing`]. `None`
    /// when the watch's events say nothing changed (then `previous` is still right: no copy is
    /// made). Also returns whether a background command is running.
    fn refresh_session(
        &self,
        workspace: &Workspace,
        store: &dyn SessionStore,
        session_id: &str,
        previous: &Manifest,
    ) -> (Option<(Manifest, Vec<String>)>, bool) {
        let (listing, background) = self.listing(workspace, session_id, previous);
        if let Listing::Changes(changes) = &listing
            && changes.is_empty()
        {
            return (None, background);
        }
        let refreshed = refresh(workspace, store, previous, listing, self.content_limit);
        self.passes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .files_read_or_gone += refreshed.1.len() as u64;
        (Some(refreshed), background)
    }

    /// The background commands `session_id` started whose changes are not all recorded, oldest
    /// first, and those of them that are no longer running (looked at *before* the workspace is:
    /// a command seen ended has made all its changes by the time they are looked for).
    fn pending_background(&self, session_id: &str) -> (Vec<String>, Vec<String>) {
        let pending = self
            .background_pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(session_id)
            .cloned()
            .unwrap_or_default();
        let ended = pending
            .iter()
            .filter(|id| {
                self.background.as_ref().is_none_or(|service| {
                    !service
                        .status(id)
                        .is_ok_and(|status| status.state == CommandState::Running)
                })
            })
            .cloned()
            .collect();
        (pending, ended)
    }

    /// `command_id`, started by `session_id`, is captured until it ends.
    fn add_background(&self, session_id: &str, command_id: String) {
        self.background_pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(session_id.to_owned())
            .or_default()
            .push(command_id);
    }

    /// Forgets the `ended` background commands of `session_id` (their changes are recorded).
    fn forget_background(&self, session_id: &str, ended: &[String]) {
        if ended.is_empty() {
            return;
        }
        let mut pending = self
            .background_pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ids) = pending.get_mut(session_id) {
            ids.retain(|id| !ended.contains(id));
            if ids.is_empty() {
                pending.remove(session_id);
            }
        }
    }

    /// Records what a refresh found changed as the changes of the background command that
    /// `origin` names (its call id is the command's id).
    fn record_for_background(
        &self,
        io: CaptureIo<'_>,
        origin: &ChangeOrigin,
        difference: Difference<'_>,
    ) {
        let who = Attribution {
            origin,
            label: COMMAND_ORIGIN,
        };
        let Difference { before, after, .. } = difference;
        let mut not_captured =
            record_differences(&io.recording(&who, self.content_limit), difference);
        not_captured.extend(uncaptured_differences(before, after));
        record_made_directories(io.store, origin, before, after);
        let entries: Vec<(String, String)> = not_captured
            .into_iter()
            .map(|entry| (entry.path, entry.reason))
            .collect();
        if let Err(error) = io.store.record_uncaptured(
            &origin.session_id,
            &origin.turn_id,
            &origin.tool_call_id,
            &entries,
        ) {
            tracing::warn!(%error, "the paths left out of a background command's capture could not be recorded");
        }
    }

    /// Records, in turn `turn_id`, what changed since the session's manifest as the changes of
    /// its oldest pending background command, and forgets the commands that had ended. With
    /// `baseline`, the manifest is brought up to date even when no command is pending (right
    /// before a background command starts). Nothing happens while the session's manifest is
    /// out for a foreground command (that command's capture sees the changes).
    fn settle_background(
        &self,
        io: CaptureIo<'_>,
        (session_id, turn_id): (&str, &str),
        baseline: bool,
    ) {
        let (pending, ended) = self.pending_background(session_id);
        if pending.is_empty() && !baseline {
            return;
        }
        let existing = self.take(session_id);
        if existing.is_none() && !baseline {
            return;
        }
        let manifest =
            self.refresh_recording_background(io, (session_id, turn_id), existing, &pending);
        self.put(session_id, manifest);
        self.forget_background(session_id, &ended);
    }

    /// Refreshes the session's `existing` manifest (none: a first, full one); what changed since
    /// it is recorded, in turn `turn_id`, as the changes of the oldest of the session's `pending`
    /// background commands when there is one (a user's edit meanwhile too: see the module docs).
    fn refresh_recording_background(
        &self,
        io: CaptureIo<'_>,
        (session_id, turn_id): (&str, &str),
        existing: Option<Manifest>,
        pending: &[String],
    ) -> Manifest {
        let known = existing
            .as_ref()
            .is_some_and(|manifest| !manifest.remembered);
        let previous = existing.unwrap_or_default();
        let (refreshed, background) =
            self.refresh_session(io.workspace, io.store, session_id, &previous);
        let mut manifest = match refreshed {
            Some((after, candidates)) => {
                if let (Some(command_id), true) = (pending.first(), known) {
                    let origin = ChangeOrigin {
                        session_id: session_id.to_owned(),
                        turn_id: turn_id.to_owned(),
                        tool_call_id: command_id.to_owned(),
                    };
                    let difference = Difference {
                        before: &previous,
                        after: &after,
                        candidates: &candidates,
                    };
                    self.record_for_background(io, &origin, difference);
                }
                after
            }
            None => previous,
        };
        manifest.background_during = background;
        manifest
    }

    /// Brings the session's manifest up to date right before a command and takes it out of the
    /// session until [`Captures::after_command`] puts the next one back (a capture that never
    /// ends only costs the next command a full read). Then notes durably that the command runs
    /// against it, so that a process killed mid-command leaves the next open of the session what
    /// it needs ([`recover_interrupted`]); a note that cannot be written costs only that.
    fn before_command(&self, io: CaptureIo<'_>, origin: &ChangeOrigin) -> Manifest {
        let CaptureIo {
            workspace, store, ..
        } = io;
        self.count_command(workspace);
        let (pending, ended) = self.pending_background(&origin.session_id);
        let existing = self
            .take(&origin.session_id)
            .or_else(|| Self::remembered(workspace, store));
        let mut manifest = self.refresh_recording_background(
            io,
            (&origin.session_id, &origin.turn_id),
            existing,
            &pending,
        );
        self.forget_background(&origin.session_id, &ended);
        // The manifest is stored again only when it changed, or when a `prune` freed it.
        let mut persisted = manifest.persisted;
        for attempt in 0..2 {
            let hash = match persisted {
                Some(hash) => hash,
                None => {
                    let encoded = encode(&manifest);
                    if let Err(error) = store.put_blobs(&[&encoded]) {
                        tracing::warn!(%error, "the workspace manifest could not be stored");
                        break;
                    }
                    clawsmith_checkpoint::sha256(&encoded)
                }
            };
            match store.begin_command_capture(
                &origin.session_id,
                &origin.turn_id,
                &origin.tool_call_id,
                &hash,
            ) {
                Ok(()) => {
                    if manifest.persisted != Some(hash) {
                        let root = workspace.root().display().to_string();
                        if let Err(error) = store.remember_workspace_manifest(&root, &hash) {
                            tracing::warn!(%error, "the workspace manifest could not be remembered");
                        }
                    }
                    persisted = Some(hash);
                    break;
                }
                Err(clawsmith_checkpoint::StoreError::MissingBlob(_)) if attempt == 0 => {
                    persisted = None;
                }
                Err(error) => {
                    tracing::warn!(
                        %error,
                        "the command capture could not be noted; if clawsmith dies during this \
                         command, its changes will not be recorded"
                    );
                    persisted = None;
                    break;
                }
            }
        }
        manifest.persisted = persisted;
        manifest
    }

    /// Compares the workspace with `before` right after the command and records every
    /// difference as a change of the call `origin`. Returns what could not be recorded.
    fn after_command(
        &self,
        io: CaptureIo<'_>,
        who: &Attribution<'_>,
        before: Manifest,
    ) -> Vec<NotCaptured> {
        let store = io.store;
        let origin = who.origin;
        let noted = before.persisted.is_some();
        let (refreshed, background) =
            self.refresh_session(io.workspace, store, &origin.session_id, &before);
        let (mut after, not_captured) = match refreshed {
            Some((after, candidates)) => {
                let difference = Difference {
                    before: &before,
                    after: &after,
                    candidates: &candidates,
                };
                let mut not_captured =
                    record_differences(&io.recording(who, self.content_limit), difference);
                not_captured.extend(uncaptured_differences(&before, &after));
                record_made_directories(store, origin, &before, &after);
                (after, not_captured)
            }
            // Nothing changed: the manifest before is the one after.
            None => (before, Vec::new()),
        };
        after.background_during = background;
        // So that undo can name them too, not only this command's result.
        let entries: Vec<(String, String)> = not_captured
            .iter()
            .map(|entry| (entry.path.clone(), entry.reason.clone()))
            .collect();
        if let Err(error) = store.record_uncaptured(
            &origin.session_id,
            &origin.turn_id,
            &origin.tool_call_id,
            &entries,
        ) {
            tracing::warn!(%error, "the paths left out of the command capture could not be recorded");
        }
        if noted {
            // Recorded: a later open must not record these changes again.
            if let Err(error) =
                store.end_command_capture(&origin.session_id, &origin.turn_id, &origin.tool_call_id)
            {
                tracing::warn!(%error, "the command capture could not be marked ended");
            }
        }
        self.put(&origin.session_id, after);
        not_captured
    }

    /// The workspace's last manifest in the store (see [`clawsmith_store::CommandCaptureStore::remember_workspace_manifest`]),
    /// for a session without one of its own: a one-shot `clawsmith call` is always a session's
    /// first command in its process, and with it only the files whose stamps moved since are
    /// read again, not the whole tree. Entries whose content the store no longer holds (a prune
    /// freed it) are left out, so those files are read again too. The refresh after it is a
    /// full pass (it was never verified in this process); a stamp that did not move — device,
    /// inode, size, mode, modification and change times — is trusted as it is for a session's
    /// own manifest.
    fn remembered(workspace: &Workspace, store: &dyn SessionStore) -> Option<Manifest> {
        let root = workspace.root().display().to_string();
        let bytes = match store.workspace_manifest(&root) {
            Ok(bytes) => bytes?,
            Err(error) => {
                tracing::warn!(%error, "the workspace manifest could not be read back");
                return None;
            }
        };
        let mut manifest = decode(&bytes)?;
        let kept: Vec<[u8; 32]> = manifest
            .files
            .values()
            .filter(|known| known.stored)
            .map(|known| known.sha256)
            .collect();
        let present = store.stored_hashes(&kept).ok()?;
        manifest
            .files
            .retain(|_, known| !known.stored || present.contains(&known.sha256));
        manifest.remembered = true;
        Some(manifest)
    }

    /// Takes the session's manifest out (`None` when it has none, or one is out for a command).
    fn take(&self, session_id: &str) -> Option<Manifest> {
        self.lock()
            .by_session
            .remove(session_id)
            .map(|(_, manifest)| manifest)
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
                Some(session) => {
                    manifests.by_session.remove(&session);
                    if let Some(watch) = self
                        .watching
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .watch
                        .as_mut()
                    {
                        watch.forget(&session);
                    }
                }
                None => break,
            }
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

/// Reads every file of `listing` whose stamp differs from `previous` (content into the store up
/// to the limit, hash only above it), and takes the rest from `previous`. A file that cannot be
/// read is listed as unreadable, never absent. Also returns, sorted, the paths that may differ
/// from `previous`: those whose stamp moved, new ones and gone ones (every other path is the
/// same by stamp).
fn refresh(
    workspace: &Workspace,
    store: &dyn SessionStore,
    previous: &Manifest,
    listing: Listing,
    content_limit: u64,
) -> (Manifest, Vec<String>) {
    let mut candidates = Vec::new();
    let (mut manifest, files, links, full) = match listing {
        Listing::Full(listing) => {
            let manifest = Manifest {
                files: HashMap::with_capacity(listing.files.len() + listing.links.len()),
                others: listing.others,
                others_truncated: listing.others_truncated,
                directories: listing.directories,
                persisted: None,
                verified_at: Some(Instant::now()),
                background_during: false,
                remembered: false,
            };
            (manifest, listing.files, listing.links, true)
        }
        Listing::Changes(changes) => {
            let mut manifest = Manifest {
                persisted: None,
                remembered: false,
                ..previous.clone()
            };
            // What the changes cover is replaced by what they list there; the rest stays.
            let found = &changes.listing;
            manifest.files.retain(|path, _| {
                if !changes.covers(path) {
                    return true;
                }
                if !found.files.contains_key(path) && !found.links.contains_key(path) {
                    candidates.push(path.clone());
                }
                false
            });
            manifest.others.retain(|path, _| !changes.covers(path));
            manifest.directories.retain(|path| !changes.covers(path));
            let found = changes.listing;
            manifest.others.extend(found.others);
            manifest.directories.extend(found.directories);
            (manifest, found.files, found.links, false)
        }
    };
    let mut still_there = 0;
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut pending_bytes = 0;
    for (path, stamp) in files {
        if let Some(known) = previous.files.get(&path) {
            still_there += 1;
            if known.stamp == stamp && !known.is_link {
                manifest.files.insert(path, *known);
                continue;
            }
        }
        candidates.push(path.clone());
        let Ok(Some(snapshot)) = workspace.snapshot_file(&path, content_limit) else {
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
    for (path, stamp) in links {
        if let Some(known) = previous.files.get(&path) {
            still_there += 1;
            if known.is_link && known.stamp == stamp {
                manifest.files.insert(path, *known);
                continue;
            }
        }
        candidates.push(path.clone());
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
    // Only look for gone paths when some are gone (the common case costs no lookups); the
    // changes named theirs above.
    if full && still_there < previous.files.len() {
        candidates.extend(
            previous
                .files
                .keys()
                .filter(|path| !manifest.files.contains_key(*path))
                .cloned(),
        );
    }
    candidates.sort_unstable();
    candidates.dedup();
    if candidates.is_empty()
        && manifest.others == previous.others
        && manifest.directories == previous.directories
    {
        // The same files with the same stamps: the stored encoding still describes it.
        manifest.persisted = previous.persisted;
    }
    (manifest, candidates)
}

/// Notes the directories present in `after` and not in `before` as made by the call `origin`
/// (undo removes them once empty). `before` must be a real earlier state: a manifest without
/// directories (never refreshed, or read back from the store) notes nothing.
fn record_made_directories(
    store: &dyn SessionStore,
    origin: &ChangeOrigin,
    before: &Manifest,
    after: &Manifest,
) {
    if before.directories.is_empty() && before.verified_at.is_none() {
        return;
    }
    let mut made: Vec<String> = after
        .directories
        .difference(&before.directories)
        .cloned()
        .collect();
    made.sort_unstable();
    if let Err(error) = store.record_created_directories(
        &origin.session_id,
        &origin.turn_id,
        &origin.tool_call_id,
        &made,
    ) {
        tracing::warn!(%error, "the directories a command made could not be noted");
    }
}

/// The entries outside the capture (ignored paths, symlinks, special files) that the command
/// created, changed or removed: undo cannot give them back, so the result names them.
fn uncaptured_differences(before: &Manifest, after: &Manifest) -> Vec<NotCaptured> {
    let mut paths: Vec<&String> = after
        .others
        .iter()
        .filter(|(path, entry)| before.others.get(*path) != Some(*entry))
        .map(|(path, _)| path)
        .chain(
            before
                .others
                .keys()
                .filter(|path| !after.others.contains_key(*path)),
        )
        .collect();
    paths.sort_unstable();
    let mut found: Vec<NotCaptured> = paths
        .into_iter()
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
fn flush(store: &dyn SessionStore, pending: &mut Vec<Vec<u8>>, manifest: &mut Manifest) {
    if pending.is_empty() {
        return;
    }
    let contents: Vec<&[u8]> = pending.iter().map(Vec::as_slice).collect();
    if store.put_blobs(&contents).is_err() {
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

/// Records each of `candidates` (sorted) whose content or mode differs between `before` and
/// `after`, in path order.
fn record_differences(recording: &Recording<'_>, difference: Difference<'_>) -> Vec<NotCaptured> {
    let Difference {
        before,
        after,
        candidates,
    } = difference;
    let mut not_captured = Vec::new();
    for path in candidates {
        let (prior, post) = (before.files.get(path), after.files.get(path));
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
        if let Err(reason) = record_one(recording, path, prior, post) {
            not_captured.push(NotCaptured {
                path: path.clone(),
                reason,
            });
        }
    }
    not_captured
}

fn record_one(
    recording: &Recording<'_>,
    path: &str,
    prior: Option<&Known>,
    post: Option<&Known>,
) -> Result<(), String> {
    let Recording {
        store,
        recorder,
        who,
        content_limit,
    } = *recording;
    let origin = who.origin;
    let prior_state = match prior {
        None => PriorState::Absent,
        Some(known) if !known.stored => {
            return Err(format!(
                "larger than {} before the command, its content was not kept",
                size_text(content_limit)
            ));
        }
        Some(known) => match store.get_blob(&known.sha256) {
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
        who.label,
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
    if shared.capture_commands && starts_background(entry) {
        return start_background(shared, entry, input, context, cancellation).await;
    }
    if !shared.capture_commands || !captures_changes(entry) {
        return execute_tool(shared.execution, entry, input, context, cancellation).await;
    }
    let origin = ChangeOrigin::from_context(&context);
    let before = {
        let shared = Arc::clone(shared);
        let origin = origin.clone();
        tokio::task::spawn_blocking(move || {
            let manifest = shared
                .captures
                .before_command(CaptureIo::of(&shared), &origin);
            (manifest, keep_repository(&shared))
        })
        .await
    };
    let label = change_label(entry).to_owned();
    let mut result = execute_tool(shared.execution, entry, input, context, cancellation).await;
    let not_captured = match before {
        Ok((before, repository_before)) => {
            let shared = Arc::clone(shared);
            let origin = origin.clone();
            tokio::task::spawn_blocking(move || {
                let who = Attribution {
                    origin: &origin,
                    label: &label,
                };
                let mut not_captured =
                    shared
                        .captures
                        .after_command(CaptureIo::of(&shared), &who, before);
                let repository_after = keep_repository(&shared);
                record_repository(
                    &shared,
                    &origin,
                    repository_before.as_ref(),
                    repository_after.as_ref(),
                    &mut not_captured,
                );
                not_captured
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

/// The workspace's repository as the store keeps it (`None` when the store keeps no repository
/// or refused: the command's repository changes then go unrecorded, as the result says).
fn keep_repository(shared: &Shared) -> Option<RepositorySnapshot> {
    shared
        .store
        .repository_keeper()?
        .keep_repository(&shared.workspace)
        .inspect_err(|error| tracing::warn!(%error, "the repository could not be kept"))
        .ok()
}

/// Records what the command changed in the repository. The repository's paths then leave the
/// "not captured" note (undo puts them back), except those the keeper could not keep.
fn record_repository(
    shared: &Shared,
    origin: &ChangeOrigin,
    before: Option<&RepositorySnapshot>,
    after: Option<&RepositorySnapshot>,
    not_captured: &mut Vec<NotCaptured>,
) {
    let (Some(before), Some(after)) = (before, after) else {
        return;
    };
    if !before.present && !after.present {
        return;
    }
    // The workspace listing saw every entry of `.git` whose stamp moved.
    let touched: Vec<&str> = not_captured
        .iter()
        .map(|entry| entry.path.as_str())
        .collect();
    // Snapshots exist only where the store keeps the repository.
    let Some(keeper) = shared.store.repository_keeper() else {
        return;
    };
    if let Err(error) = keeper.record_repository_changes(
        &origin.session_id,
        &origin.turn_id,
        &origin.tool_call_id,
        before,
        after,
        &touched,
    ) {
        tracing::warn!(%error, "the command's repository changes could not be recorded");
        return;
    }
    let in_repository = |path: &str| {
        path == REPOSITORY_DIR
            || path
                .strip_prefix(REPOSITORY_DIR)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let unkept: HashMap<&str, &str> = before
        .not_kept
        .iter()
        .chain(&after.not_kept)
        .map(|(path, reason)| (path.as_str(), reason.as_str()))
        .collect();
    not_captured.retain_mut(|entry| {
        if !in_repository(&entry.path) {
            return true;
        }
        match unkept.get(entry.path.as_str()) {
            Some(reason) => {
                entry.reason = format!("the repository keeper left it out: {reason}");
                true
            }
            None => false,
        }
    });
}

/// Starts a background command with the session's manifest brought up to date first (what
/// changes from then on is the command's, recorded at the next capture point of the session:
/// its next command, or either end of a turn), and notes the command as pending.
async fn start_background(
    shared: &Arc<Shared>,
    entry: &ToolEntry,
    input: serde_json::Value,
    context: ToolExecutionContext,
    cancellation: &CancellationSignal,
) -> ToolExecutionResult {
    let origin = ChangeOrigin::from_context(&context);
    {
        let shared = Arc::clone(shared);
        let origin = origin.clone();
        let settled = tokio::task::spawn_blocking(move || {
            shared.captures.settle_background(
                CaptureIo::of(&shared),
                (&origin.session_id, &origin.turn_id),
                true,
            );
        })
        .await;
        if let Err(error) = settled {
            tracing::warn!(%error, "the workspace manifest before a background command failed");
        }
    }
    let result = execute_tool(shared.execution, entry, input, context, cancellation).await;
    if result.status() == clawsmith_protocol::ToolStatus::Success {
        let started: Option<String> = serde_json::from_str::<serde_json::Value>(&result.content)
            .ok()
            .and_then(|value| value.get("commandId")?.as_str().map(str::to_owned));
        match started {
            Some(command_id) => shared
                .captures
                .add_background(&origin.session_id, command_id),
            None => tracing::warn!("a started background command's id could not be read"),
        }
    }
    result
}

/// Records the changes of the session's pending background commands into turn `turn_id` (a turn
/// boundary: called as a turn begins and before it finishes). Costs nothing when none is pending.
pub(crate) fn settle_background(shared: &Shared, session_id: &str, turn_id: &str) {
    if !shared.capture_commands {
        return;
    }
    shared
        .captures
        .settle_background(CaptureIo::of(shared), (session_id, turn_id), false);
}

/// Whether the call starts a background command (`start_command` of the command service).
fn starts_background(entry: &ToolEntry) -> bool {
    *entry.origin() == Origin::Commands && entry.name() == "start_command"
}

/// Whether a call's workspace changes are captured: the foreground command tool, and every
/// extension tool that may execute processes or write files (a plugin tool declaring
/// `filesystem.write`, an MCP tool; one whose declaration could not be trusted has every
/// capability, so it is captured too). A background command is captured at later capture
/// points instead ([`settle_background`]): what it changes happens after its call returns.
fn captures_changes(entry: &ToolEntry) -> bool {
    let capabilities = &entry.facts().capabilities;
    *entry.origin() == Origin::Command
        || (matches!(entry.origin(), Origin::Extension(_))
            && (capabilities.contains(clawsmith_protocol::Capability::ProcessExecute)
                || capabilities.contains(clawsmith_protocol::Capability::FilesystemWrite)))
}

/// Records, when a session opens, the changes of the commands that were running when its last
/// process died: each noted capture's manifest (stored before its command started) is compared
/// with the workspace now, and every difference becomes a change of that command, in its turn
/// (still open: recovery finishes it afterwards). Returns the paths recorded. What changed in an
/// ignored path is not named here (there is no result left to name it in).
pub(crate) fn recover_interrupted(shared: &Shared, session_id: &str) -> Vec<String> {
    let store = &shared.store;
    let Ok(interrupted) = store.interrupted_captures(session_id) else {
        return Vec::new();
    };
    let mut recorded = Vec::new();
    for capture in interrupted {
        let origin = ChangeOrigin {
            session_id: session_id.to_owned(),
            turn_id: capture.turn_id.clone(),
            tool_call_id: capture.call_id.clone(),
        };
        if let Some(before) = decode(&capture.manifest) {
            let limit = shared.captures.content_limit;
            let listing = Listing::Full(shared.workspace.list_files());
            let (after, candidates) = refresh(&shared.workspace, &**store, &before, listing, limit);
            let who = Attribution {
                origin: &origin,
                label: COMMAND_ORIGIN,
            };
            let difference = Difference {
                before: &before,
                after: &after,
                candidates: &candidates,
            };
            let not_captured =
                record_differences(&CaptureIo::of(shared).recording(&who, limit), difference);
            recorded.extend(
                candidates
                    .into_iter()
                    .filter(|path| !not_captured.iter().any(|entry| &entry.path == path))
                    .filter(|path| {
                        let (prior, post) = (before.files.get(path), after.files.get(path));
                        prior.map(|k| (k.sha256, k.recorded_mode()))
                            != post.map(|k| (k.sha256, k.recorded_mode()))
                    }),
            );
            shared.captures.put(session_id, after);
        }
        if let Err(error) =
            store.end_command_capture(session_id, &capture.turn_id, &capture.call_id)
        {
            tracing::warn!(%error, "the command capture could not be marked ended");
        }
    }
    recorded
}

/// The first byte of an encoded manifest.
const MANIFEST_FORMAT: u8 = 1;

/// The manifest as stored before a command: the format byte, then per captured file its path,
/// stamp, hash and flags, then per entry outside the capture its path, kind and stamp
/// (integers little-endian, paths length-prefixed).
fn encode(manifest: &Manifest) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + manifest.files.len() * 128);
    out.push(MANIFEST_FORMAT);
    out.push(u8::from(manifest.others_truncated));
    out.extend_from_slice(&(manifest.files.len() as u64).to_le_bytes());
    for (path, known) in &manifest.files {
        encode_path(&mut out, path);
        encode_stamp(&mut out, &known.stamp);
        out.extend_from_slice(&known.sha256);
        out.push(u8::from(known.stored) | (u8::from(known.is_link) << 1));
    }
    out.extend_from_slice(&(manifest.others.len() as u64).to_le_bytes());
    for (path, (kind, stamp)) in &manifest.others {
        encode_path(&mut out, path);
        out.push(match kind {
            Uncaptured::Ignored => 0,
            Uncaptured::Special => 1,
            Uncaptured::Unreadable => 2,
        });
        encode_stamp(&mut out, stamp);
    }
    out
}

fn encode_path(out: &mut Vec<u8>, path: &str) {
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path.as_bytes());
}

fn encode_stamp(out: &mut Vec<u8>, stamp: &FileStamp) {
    for value in [stamp.device, stamp.inode, stamp.size] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend_from_slice(&stamp.mode.to_le_bytes());
    for value in [
        stamp.modified.0,
        stamp.modified.1,
        stamp.changed.0,
        stamp.changed.1,
    ] {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// The manifest [`encode`] wrote; `None` for anything else (a damaged or foreign blob).
fn decode(bytes: &[u8]) -> Option<Manifest> {
    let mut reader = Reader { bytes };
    if reader.take(1)? != [MANIFEST_FORMAT] {
        return None;
    }
    let others_truncated = reader.take(1)?[0] != 0;
    let mut manifest = Manifest {
        others_truncated,
        ..Manifest::default()
    };
    for _ in 0..reader.u64()? {
        let path = reader.path()?;
        let stamp = reader.stamp()?;
        let sha256: [u8; 32] = reader.take(32)?.try_into().ok()?;
        let flags = reader.take(1)?[0];
        let known = Known {
            stamp,
            sha256,
            stored: flags & 1 != 0,
            is_link: flags & 2 != 0,
        };
        manifest.files.insert(path, known);
    }
    for _ in 0..reader.u64()? {
        let path = reader.path()?;
        let kind = match reader.take(1)?[0] {
            0 => Uncaptured::Ignored,
            1 => Uncaptured::Special,
            2 => Uncaptured::Unreadable,
            _ => return None,
        };
        let stamp = reader.stamp()?;
        manifest.others.insert(path, (kind, stamp));
    }
    reader.bytes.is_empty().then_some(manifest)
}

struct Reader<'b> {
    bytes: &'b [u8],
}

impl<'b> Reader<'b> {
    fn take(&mut self, count: usize) -> Option<&'b [u8]> {
        if self.bytes.len() < count {
            return None;
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn path(&mut self) -> Option<String> {
        let length = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        let bytes = self.take(usize::try_from(length).ok()?)?;
        String::from_utf8(bytes.to_vec()).ok()
    }

    fn stamp(&mut self) -> Option<FileStamp> {
        let (device, inode, size) = (self.u64()?, self.u64()?, self.u64()?);
        let mode = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        Some(FileStamp {
            device,
            inode,
            size,
            mode,
            modified: (self.i64()?, self.i64()?),
            changed: (self.i64()?, self.i64()?),
        })
    }
}

/// `8 MiB`, `512 KiB`, `100 bytes`: the limit as a person reads it.
fn size_text(bytes: u64) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}
