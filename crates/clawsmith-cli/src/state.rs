//! Where clawsmith keeps its state, and the rule that it never lives inside a workspace it serves.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clawsmith_checkpoint::{Durability, Store, StoreOptions};

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "clawsmith.db";

/// The state directory from the flag/env value, else `$XDG_STATE_HOME/clawsmith`, else
/// `~/.local/state/clawsmith`.
pub fn state_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("clawsmith"));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("cannot find a state directory: set --state-dir, CLAWSMITH_STATE_DIR, XDG_STATE_HOME or HOME")?;
    Ok(PathBuf::from(home).join(".local/state/clawsmith"))
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
        bail!(
            "the state directory {} is inside the workspace {}; tools could read or change it. \
             Choose a --state-dir outside the workspace",
            state.display(),
            workspace.display()
        );
    }
    Ok(())
}

/// Whether every commit of the state database is fsynced (`--fsync`); set once at startup.
pub static FSYNC_EVERY_COMMIT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Opens (creating if needed) the store in `state`.
pub fn open_store(state: &Path) -> Result<Arc<Store>> {
    std::fs::create_dir_all(state)
        .with_context(|| format!("creating the state directory {}", state.display()))?;
    let path = state.join(DATABASE_FILE);
    let durability = if FSYNC_EVERY_COMMIT.load(std::sync::atomic::Ordering::Relaxed) {
        Durability::Full
    } else {
        Durability::Normal
    };
    let options = StoreOptions {
        durability,
        ..StoreOptions::default()
    };
    let store = Store::open_with(&path, options)
        .with_context(|| format!("opening the state database {}", path.display()))?;
    Ok(Arc::new(store))
}

/// Opens the store only if the database exists (read-only commands never create state).
pub fn open_existing_store(state: &Path) -> Result<Arc<Store>> {
    let path = state.join(DATABASE_FILE);
    if !path.exists() {
        bail!(
            "no clawsmith state at {} (nothing has run with this --state-dir yet)",
            path.display()
        );
    }
    open_store(state)
}
