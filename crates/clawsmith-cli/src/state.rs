//! Where clawsmith keeps its state, and the rules it holds the state directory to: never inside
//! a workspace it serves; private to its owner (0700, files 0600, whatever the umask; looser
//! modes are tightened with a notice); trusted only when the current user owns it and no one
//! else can write it, as ssh treats `~/.ssh`; and never read or written through a symlink.

use std::fs::{DirBuilder, Metadata};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clawsmith_checkpoint::{Durability, LeaseWait, Store, StoreOptions};

use crate::refusal;

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "clawsmith.db";

/// The MCP client configuration read from the state directory by default.
pub const CONFIG_FILE: &str = "clawsmith.toml";

/// Where background commands of a long-lived process keep their logs: `commands/<pid>/`.
pub const COMMANDS_DIR: &str = "commands";

/// Where the state lives and how its database is opened: the global `--state-dir`, `--fsync`
/// and `--wait`, read once at startup and handed to whatever opens the store.
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// The state directory ([`state_dir`]).
    pub dir: PathBuf,
    /// Whether every commit of the database is fsynced (`--fsync`: [`Durability::Full`]).
    pub durability: Durability,
    /// Whether a second writer of a session waits for the first (`--wait`:
    /// [`LeaseWait::Wait`]).
    pub lease_wait: LeaseWait,
}

impl StateOptions {
    /// The state directory `explicit` names ([`state_dir`]), its database opened with
    /// `durability` and `lease_wait`.
    pub fn new(
        explicit: Option<&Path>,
        durability: Durability,
        lease_wait: LeaseWait,
    ) -> Result<StateOptions> {
        Ok(StateOptions {
            dir: state_dir(explicit)?,
            durability,
            lease_wait,
        })
    }
}

/// The state directory from the flag/env value, else `$XDG_STATE_HOME/clawsmith`, else
/// `~/.local/state/clawsmith`.
///
/// The path is made absolute against the current directory at once: processes clawsmith starts
/// elsewhere (a language server's HOME under the state directory, a sandboxed command) must
/// not read a relative path against their own working directory.
pub fn state_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    let dir = if let Some(dir) = explicit {
        dir.to_path_buf()
    } else if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        PathBuf::from(xdg).join("clawsmith")
    } else {
        let home = std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .context("cannot find a state directory: set --state-dir, CLAWSMITH_STATE_DIR, XDG_STATE_HOME or HOME")?;
        PathBuf::from(home).join(".local/state/clawsmith")
    };
    if dir.is_absolute() {
        return Ok(dir);
    }
    Ok(std::env::current_dir()
        .context("reading the current directory to make the state directory absolute")?
        .join(dir))
}

/// The canonical form of `path`, also when its last components do not exist yet: the nearest
/// existing ancestor is canonicalized and the rest appended.
pub fn canonical_even_if_missing(path: &Path) -> Result<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .context("reading the current directory")?
            .join(path)
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(canonical) => {
                let mut result = canonical;
                for part in rest.iter().rev() {
                    result.push(part);
                }
                return Ok(result);
            }
            Err(_) => {
                let Some(name) = existing.file_name() else {
                    return Ok(absolute);
                };
                rest.push(name.to_os_string());
                existing = existing.parent().unwrap_or(Path::new("/"));
            }
        }
    }
}

/// Refuses a state directory inside `workspace` (or equal to it): undo data and the database
/// would otherwise be reachable by the very tools they audit.
pub fn ensure_outside(state: &Path, workspace: &Path) -> Result<()> {
    let state = canonical_even_if_missing(state)?;
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
    if state.starts_with(&workspace) {
        return Err(refusal(
            format!(
                "the state directory {} is inside the workspace {}; tools could read or change it",
                state.display(),
                workspace.display()
            ),
            "choose a --state-dir outside the workspace",
        ));
    }
    Ok(())
}

/// Creates the state directory (0700) or checks an existing one: it must be a directory the
/// current user owns that group and others cannot write, under ancestors no other user can swap
/// it in; looser read/search bits are removed with a notice, and so are those of the entries
/// directly in it (the database, its `-wal` and `-shm`, the configuration, `locks/`,
/// `commands/`). A symlink among them is refused: it could point anywhere.
pub fn prepare_state_dir(state: &Path) -> Result<()> {
    if !state.exists() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state)
            .with_context(|| format!("creating the state directory {}", state.display()))?;
    }
    let metadata = std::fs::metadata(state)
        .with_context(|| format!("reading the state directory {}", state.display()))?;
    if !metadata.is_dir() {
        bail!("the state directory {} is not a directory", state.display());
    }
    require_trusted("state directory", state, &metadata)?;
    require_safe_ancestors(state)?;
    tighten(state, &metadata, 0o700)?;
    let entries = std::fs::read_dir(state)
        .with_context(|| format!("listing the state directory {}", state.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", state.display()))?;
        let path = entry.path();
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            // Another process's `-wal` or `-shm`, gone since the listing.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("reading {}", path.display()));
            }
        };
        if metadata.file_type().is_symlink() {
            bail!(
                "refusing {}: it is a symlink inside the state directory, and clawsmith never \
                 follows links there. Remove it (the state directory holds only clawsmith's \
                 own files)",
                path.display()
            );
        }
        require_trusted("file in the state directory", &path, &metadata)?;
        tighten(
            &path,
            &metadata,
            if metadata.is_dir() { 0o700 } else { 0o600 },
        )?;
    }
    Ok(())
}

/// The current user, as the kernel sees this process.
fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Refuses `path` unless the current user owns it and group and others cannot write it.
fn require_trusted(what: &str, path: &Path, metadata: &Metadata) -> Result<()> {
    let uid = current_uid();
    if metadata.uid() != uid {
        return Err(refusal(
            format!(
                "refusing the {what} {}: it is owned by uid {}, not by you (uid {uid}); another \
                 user could plant state or configuration there",
                path.display(),
                metadata.uid()
            ),
            "use a --state-dir you own (or `chown` it to yourself)",
        ));
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refusal(
            format!(
                "refusing the {what} {}: group or others can write it (mode {mode:04o})",
                path.display()
            ),
            format!(
                "run `chmod go-w {}` (clawsmith wants 0700 for directories, 0600 for files)",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Refuses a state directory whose ancestors another user could rename it out of (and a
/// look-alike in): each must be owned by root or the current user, and not writable by others
/// unless sticky (as `/tmp` is).
fn require_safe_ancestors(state: &Path) -> Result<()> {
    let canonical = state
        .canonicalize()
        .with_context(|| format!("resolving the state directory {}", state.display()))?;
    let uid = current_uid();
    for ancestor in canonical.ancestors().skip(1) {
        let metadata = std::fs::metadata(ancestor)
            .with_context(|| format!("reading {}", ancestor.display()))?;
        let mode = metadata.mode() & 0o7777;
        let foreign = metadata.uid() != 0 && metadata.uid() != uid;
        let open_to_all = mode & 0o002 != 0 && mode & 0o1000 == 0;
        if foreign || open_to_all {
            bail!(
                "refusing the state directory {}: its parent {} is {} (mode {mode:04o}), so \
                 another user could swap the state directory. Choose a --state-dir under \
                 directories only you (or root) can change",
                state.display(),
                ancestor.display(),
                if foreign {
                    format!("owned by uid {}", metadata.uid())
                } else {
                    "writable by everyone without the sticky bit".to_owned()
                }
            );
        }
    }
    Ok(())
}

/// Removes every group/other bit from `path` (to `wanted`), saying so on stderr.
fn tighten(path: &Path, metadata: &Metadata, wanted: u32) -> Result<()> {
    let mode = metadata.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(wanted)) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        result => {
            result.with_context(|| format!("tightening the permissions of {}", path.display()))?
        }
    }
    crate::output::notice(
        crate::output::Level::Note,
        format_args!(
            "tightened {} from {mode:04o} to {wanted:04o} (other users could read it)",
            path.display()
        ),
    );
    Ok(())
}

/// Checks a configuration file the way [`prepare_state_dir`] checks the state: owned by the
/// current user, not writable by group or others. It names commands clawsmith starts, so a file
/// someone else can write is a way to run their commands as you.
pub fn require_trusted_config(path: &Path) -> Result<()> {
    let metadata = std::fs::metadata(path)
        .with_context(|| format!("reading the configuration {}", path.display()))?;
    require_trusted("configuration", path, &metadata)
}

/// Opens (creating if needed) the store in `state.dir`, with its durability and lease wait: the
/// directory is prepared and checked, the database created 0600 (SQLite gives its `-wal` and
/// `-shm` the same mode) and never opened through a symlink.
pub fn open_store(state: &StateOptions) -> Result<Arc<Store>> {
    prepare_state_dir(&state.dir)?;
    open_prepared_store(state)
}

/// [`open_store`] once [`prepare_state_dir`] has checked the state directory.
pub fn open_prepared_store(state: &StateOptions) -> Result<Arc<Store>> {
    let path = state.dir.join(DATABASE_FILE);
    let options = StoreOptions {
        durability: state.durability,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&path, options)
        .with_context(|| format!("opening the state database {}", path.display()))?;
    store.set_lease_wait(state.lease_wait);
    Ok(Arc::new(store))
}

/// Opens the store only if the database exists (read-only commands never create state).
pub fn open_existing_store(state: &StateOptions) -> Result<Arc<Store>> {
    let path = state.dir.join(DATABASE_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        bail!(
            "no clawsmith state at {} (nothing has run with this --state-dir yet)",
            path.display()
        );
    }
    open_store(state)
}

/// The log directory of this process's background commands, `commands/<pid>/`, created fresh
/// (0700) after removing the directories of processes that are gone. The returned guard removes
/// it again when the process is done with it.
pub fn command_log_dir(state: &Path) -> Result<CommandLogDir> {
    let commands = state.join(COMMANDS_DIR);
    DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&commands)
        .with_context(|| format!("creating {}", commands.display()))?;
    let metadata = std::fs::symlink_metadata(&commands)
        .with_context(|| format!("reading {}", commands.display()))?;
    require_trusted("directory", &commands, &metadata)?;
    tighten(&commands, &metadata, 0o700)?;
    for entry in std::fs::read_dir(&commands)
        .with_context(|| format!("listing {}", commands.display()))?
        .flatten()
    {
        let name = entry.file_name();
        let owner_alive = name
            .to_str()
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| {
                pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()
            });
        if !owner_alive {
            // Best effort: a leftover that cannot be removed only costs disk space. Neither
            // call follows a symlink.
            let _ = std::fs::remove_dir_all(entry.path())
                .or_else(|_| std::fs::remove_file(entry.path()));
        }
    }
    let dir = commands.join(std::process::id().to_string());
    DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating the command log directory {}", dir.display()))?;
    Ok(CommandLogDir { path: dir })
}

/// `commands/<pid>/`, removed on drop.
#[derive(Debug)]
pub struct CommandLogDir {
    path: PathBuf,
}

impl CommandLogDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory, left in place: the next process that asks for its own removes it once
    /// this process is gone.
    pub fn keep(self) -> PathBuf {
        let this = std::mem::ManuallyDrop::new(self);
        this.path.clone()
    }
}

impl Drop for CommandLogDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
