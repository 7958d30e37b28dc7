//! # clawsmith-fs
//!
//! The workspace boundary and the seven file tools of clawsmith (F1–F9): `read_file`,
//! `search_files`, `glob_files`, `write_file`, `edit_file`, `rename_file`, `delete_file`. This is
//! the only crate that opens workspace paths; checkpoint restores go through the same handle.
//!
//! ## Main types
//! - [`Workspace`]: the handle. [`Workspace::open`] canonicalizes the root once and keeps a
//!   descriptor of it. [`Workspace::resolve`] is the lexical check (F1, part 1) and yields a
//!   [`WorkspacePath`], the validated, normalized, workspace-relative path that every other method
//!   takes. Checkpoint restores use [`Workspace::read_state`], [`Workspace::restore_entry`]
//!   (a regular file, or a symlink when the mode says [`SYMLINK_MODE`]),
//!   [`Workspace::remove_entry`] and [`Workspace::hash_entry`]; the tools use the rest.
//! - [`FileVersion`]: what a read-modify-write saw ([`Workspace::read_versioned`]); the change is
//!   made only if the file still matches it ([`Workspace::replace_if_unchanged`],
//!   [`Workspace::remove_if_unchanged`], [`Workspace::rename_if_unchanged`]).
//! - [`escape_control`]: the one function that makes a name (or a matched line) safe to print.
//! - [`Workspace::list_files`] → [`FileListing`] and [`Workspace::snapshot_file`] →
//!   [`FileSnapshot`]: what the core's command capture compares. The listing applies the search
//!   walk's rules (same ignore files, same skipped folders) for which files and links count, in
//!   one pass over the tree shared by a few threads: each directory listed once under its
//!   descriptor, one `lstat` per entry for its [`FileStamp`]; entries the walk leaves out
//!   (ignored, special files) are listed apart as [`Uncaptured`] so a caller can name what it
//!   cannot restore. [`WorkspaceWatch`] (inotify, one watch per listed directory) lets a
//!   long-lived caller learn what changed since a listing without passing over the tree again:
//!   [`Workspace::list_files_watched`], then [`Workspace::changes_since`] → [`ListingChanges`]
//!   (or `None` when the events cannot be trusted: list again). A snapshot reads (or, above a limit, hashes) one file through the same
//!   boundary-checked open as every read.
//! - [`builtin_tools`]: the seven [`clawsmith_protocol::Tool`]s in table order. Their argument
//!   structs ([`ReadFileInput`], [`SearchFilesInput`], …) derive both `Deserialize` and
//!   `JsonSchema`, so the schema the model sees is generated from the deserializer itself.
//! - [`ChangeRecorder`] with [`ChangeOrigin`], [`PriorState`], [`PostState`], [`RecorderError`]
//!   and [`NoopRecorder`]: the seam through which write tools report every change to
//!   `clawsmith-checkpoint` (before: prior content or absence; after: SHA-256, size, mode).
//! - [`FsError`]: why a workspace operation failed; its messages never quote file content.
//!
//! ## Decisions
//! - **Two checks, one path.** The lexical check normalizes the requested string against the
//!   canonical root *without touching the filesystem* and fails with the mission's
//!   `Path is outside the workspace: <requested>`. The normalized relative string is then the only
//!   thing ever opened: there is no second parse that could disagree with the first. Nothing is
//!   trimmed or unquoted, so `ws"`, `ws ` or `ws\n` next to `ws` are simply other directories.
//! - **The kernel does the real check.** Every open is `openat2(root_fd, relative,
//!   RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: symlinks that stay inside work, anything that
//!   would leave the root (a symlink, a chain, a directory swapped for a symlink between two calls)
//!   fails with `EXDEV`, reported as "outside the workspace". No check-then-open window exists
//!   because the check *is* the open. Changes are made with `*at` calls on a single name relative to
//!   the parent directory's descriptor (`linkat`, `renameat`, `unlinkat`), which never follow a
//!   final symlink; write tools therefore treat a final symlink as "not a regular file".
//! - **No half-written files (F9).** New content goes to an `O_EXCL` temp file in the target's
//!   directory; a guard unlinks it on every failure path. `write_file` publishes it with `linkat`
//!   (fails if anything, even a dangling symlink, holds the name: create-only, no clobber);
//!   `edit_file` and restores with `renameat` (atomic replace, mode set with `fchmod`);
//!   `rename_file` uses `RENAME_NOREPLACE`. No `fsync`: the guarantee is atomicity towards
//!   readers and failures, not durability across power loss.
//! - **Special files are never opened for reading** unless proven regular: a read first opens
//!   with `O_PATH`, checks the type, then opens `O_NONBLOCK` and compares the inode (a search
//!   candidate is proven by the walk's own listing of its directory, and opened without following
//!   a final symlink). Whatever is swapped in after the proof is opened non-blocking, found not
//!   regular by `fstat` and closed unread. A FIFO, a socket or a device can therefore never block
//!   a tool, and a symlink to `/dev/zero` leads outside the root and is refused.
//! - **Search is ripgrep's stack with budgets, walked through the handle.** The walk lists each
//!   directory itself, opened beneath the root without following a final symlink, from the
//!   workspace root (so every ignore file on the way applies, with or without a git repository,
//!   but never one above the root or the user's global one), sorted by name for deterministic
//!   results, skipping `.git`, `node_modules`, `dist`, `coverage`, `target` and never following
//!   symlinks. The folders it leaves out as ignored are named in the answer (`[ignored folders
//!   not searched: node_modules/, target/ …; name one as `path` to search it]`): a folder named
//!   as the scope, or one on the way to it, is entered whatever the ignore rules say (as
//!   `rg PATTERN node_modules/` does), version-control folders never. Every candidate is re-opened through the handle, so a walker racing a swapped
//!   directory still reads nothing outside. `grep-searcher` finds lines; `globset` filters. Each
//!   budget (results 50/100, 2 MiB total, 2,000 files, 1 MiB per file; glob: 100/1,000 results,
//!   20,000 files) is reported in the content when it cuts the answer short; an empty answer says
//!   `No results for "…".`
//! - **Ignore files are untrusted input.** `.ignore`, `.gitignore` and `.git/info/exclude` are
//!   never opened by path (the `ignore` crate's own reading is not used): each is read through
//!   the handle like any other file (beneath the root, regular only, non-blocking, at most 1 MiB)
//!   and its matcher is built from those bytes with `ignore::gitignore`, keeping git's precedence.
//!   One that is a FIFO, socket or device, leads outside the workspace, or is too large is
//!   skipped, and the result says so (`[skipped .gitignore: not a regular file (a FIFO); its
//!   ignore rules were not applied]`); so is a FIFO, socket or device among the walked files.
//! - **Hidden paths hold by identity, not by spelling.** A handle may carry a [`HiddenPaths`]
//!   set ([`Workspace::with_hidden`]; the core and the CLI build one from `hidden_paths`, and
//!   skills, memory and LSP handles inside the workspace carry the same one). After each open
//!   for a reader (`read_file`, the read of a read-modify-write, a search candidate, a glob
//!   hit) the opened file is checked: its resolved path (`/proc/self/fd/N`) against every
//!   literal and glob entry, its device and inode against each literal entry's (stat'd again
//!   for each call, so a hidden file replaced by a new inode stays hidden, and a hard link is
//!   caught), and, for a file with several links, against the identities of every covered file
//!   (a bounded walk of [`HIDDEN_WALK_MAX_ENTRIES`] entries; past it such files are refused).
//!   An explicit read is refused as `permission_denied` naming the entry
//!   (`` `notes.txt` is hidden (hidden_paths entry `.env`) ``); search and glob leave hidden
//!   files out and say how many (`[2 hidden file(s) skipped (hidden_paths)]`). Restores and
//!   checkpoint snapshots are not reads for the model and ignore the set.
//!   [`Workspace::hidden_matches`] lists what a command's view must cover now (literal
//!   entries, glob matches, other names of hard-linked covered files).
//! - **Compare-and-swap edits.** `edit_file`, `rename_file` and `delete_file` keep the
//!   [`FileVersion`] of what they read. Right before the change the file must still have the same
//!   device, inode, size, modification and change times, and (when its change time is within two
//!   seconds of the read, too close for timestamps to tell) the same SHA-256; otherwise the tool
//!   answers `tool_failed` `<path> changed while editing; read it again` with `retryable: true`
//!   and writes nothing. `edit_file` then swaps the new file in with `RENAME_EXCHANGE` and watches
//!   the old one: bytes a writer appended to it after the check (it opened the file before the
//!   swap) are appended to the new file, any other change puts the old file back and fails the
//!   same way. A recently written file is watched until it has been quiet for 3 ms (at most
//!   100 ms), so a writer that opens, appends and closes loses nothing unless it stalls between
//!   its open and its write for longer than that watch. Checkpoint restores
//!   ([`Workspace::restore_file`]) keep the owner of a file they replace the same way.
//! - **Owner, group and mode are kept.** The temp file gets the old file's owner and group
//!   (`fchown`, which needs root for another user's file) before its mode; when the owner cannot
//!   be kept the setuid and setgid bits are dropped (setgid alone when only the group cannot be
//!   kept), so an edit never leaves a privileged file owned by someone else. A read-only file (no
//!   write bit for its owner) is refused by `edit_file` unless `allowReadOnly` is set; the mode
//!   stays read-only either way.
//! - **Names cannot forge output.** Every listing line, search line, message and summary that
//!   names a path passes it through [`escape_control`]: newline, carriage return, tab, ESC and the
//!   other C0 and C1 controls, DEL, the Unicode line separators and bidirectional overrides
//!   become visible escapes (`\n`, `\x1b`, `\u{9b}`). Matched line text is escaped the same way
//!   (tabs kept). The escape is for safety, not a reversible quoting.
//! - **A path that names a folder is never a file.** `b.txt/` (or `b.txt/.`) normalizes to
//!   `b.txt`, so every file tool refuses it as `invalid_arguments` before touching anything
//!   ([`WorkspacePath::names_folder`]).
//! - **Recorder order is the contract.** Each write tool validates first, then calls
//!   `before_change` (an `Err` means nothing is changed), makes the change, then calls
//!   `after_change`. A failed `after_change` is reported as a failure that says the change *was*
//!   made.
//! - **Failures are results.** Tools answer `tool_failed` (or `invalid_arguments`) with the mission's
//!   messages (`The old text was not found`, `The old text must occur exactly once; provide more
//!   surrounding context`, `Tool <name> requires explicit authorization`); the model text is
//!   short, and a bounded display (`text`, `search`, or a `similar` unified `diff`) is attached.
//!
//! ## What this crate does not do
//! It does not decide permissions (the core and `clawsmith-security` do; write tools only insist
//! on an authorized context, S5), store checkpoints (`clawsmith-checkpoint` implements
//! [`ChangeRecorder`]), or spawn processes. It is Linux-only (`openat2`, kernel 5.6+). The tools
//! run synchronously inside `execute` (their work is bounded by the budgets). No rename-based
//! edit can save a write made through a descriptor opened before the swap and used after the
//! watch ends (a logger holding its file open for good keeps writing to the replaced file), and
//! `rename_file`/`delete_file` check right before their single system call, without a watch. It
//! does not detect a directory *moved* out of the workspace while a call holds its descriptor.
//! Ignore files only filter, and their content never reaches an output; a worktree's exclude file
//! (behind a `.git` *file*, outside the workspace) is not read. Snapshots for the recorder hold
//! whole files in memory, up to [`MAX_SNAPSHOT_BYTES`].

pub mod diff;
mod error;
mod escape;
mod hidden;
mod recorder;
pub mod secret;
mod tools;
mod workspace;

pub use error::FsError;
pub use escape::escape_control;
pub use hidden::{HIDDEN_WALK_MAX_ENTRIES, HiddenPaths};
pub use recorder::{
    ChangeOrigin, ChangeRecorder, NoopRecorder, PostState, PriorState, RecorderError,
};
pub use tools::{
    DeleteFileInput, EditFileInput, GLOB_DEFAULT_RESULTS, GLOB_MAX_FILES_VISITED, GLOB_MAX_RESULTS,
    GlobFilesInput, READ_MAX_BYTES, ReadFileInput, RenameFileInput, SEARCH_DEFAULT_RESULTS,
    SEARCH_MAX_BYTES_PER_FILE, SEARCH_MAX_FILES_VISITED, SEARCH_MAX_RESULTS,
    SEARCH_MAX_TOTAL_BYTES, SearchFilesInput, WRITE_MAX_BYTES, WriteFileInput, builtin_tools,
};
pub use workspace::{
    FileListing, FileSnapshot, FileStamp, FileVersion, LINKED_MAX, ListingChanges,
    MAX_SNAPSHOT_BYTES, OTHER_ENTRIES_MAX, SYMLINK_MODE, Uncaptured, Workspace, WorkspacePath,
    WorkspaceWatch, is_symlink_mode,
};
