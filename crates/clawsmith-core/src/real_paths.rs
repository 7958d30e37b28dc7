//! Where a call's path arguments really lead, for the permission check.
//!
//! Rules and protected paths match the path as spelled, but the file tools follow symlinks in
//! the parent directories (inside the workspace): with `link -> .git`, `edit_file link/config`
//! writes `.git/config`. So the policy is also shown each path with its parent resolved. The
//! final component is not followed: the tools replace or remove the name itself.
//!
//! This is a lookup (`realpath` of the parent), not an open; the write itself still goes through
//! clawsmith-fs's boundary-checked handle. A symlink swapped between this check and the write
//! can still redirect it: commands cannot write `.git`'s code paths (the sandbox pins them), so
//! this closes the planted-link road, not a race with a concurrent background command.

use std::path::{Path, PathBuf};

use clawsmith_fs::Workspace;

/// The fields of an input that name workspace paths.
const PATH_FIELDS: [&str; 3] = ["path", "from", "to"];

/// The real workspace-relative form of each path argument of `input` whose parent directories
/// lead somewhere else than its spelling (absent when nothing differs or it cannot be
/// resolved: the tool refuses what does not resolve inside the workspace).
pub(crate) fn resolved_paths(workspace: &Workspace, input: &serde_json::Value) -> Vec<String> {
    PATH_FIELDS
        .iter()
        .filter_map(|field| input.get(field).and_then(serde_json::Value::as_str))
        .filter_map(|requested| {
            let path = workspace.resolve(requested).ok()?;
            let name = path.file_name()?;
            let parent = path.parent_str()?;
            // A name directly in the root has no parent to resolve: the root was made canonical
            // once, when the workspace was opened, and resolving it again (three `readlink` and
            // a `faccessat2` a call) could only give it back or lead outside, which
            // both add nothing here.
            if parent.is_empty() {
                return None;
            }
            let real_parent = real_relative(workspace.root(), parent)?;
            let real = if real_parent.is_empty() {
                name.to_owned()
            } else {
                format!("{real_parent}/{name}")
            };
            (real != path.as_str()).then_some(real)
        })
        .collect()
}

/// `relative` (a directory under `root`) with every symlink resolved, relative to `root`; the
/// part that does not exist yet is kept as spelled. `None` when it leads outside `root`.
fn real_relative(root: &Path, relative: &str) -> Option<String> {
    let mut existing = root.join(relative);
    let mut missing: Vec<String> = Vec::new();
    let canonical: PathBuf = loop {
        match std::fs::canonicalize(&existing) {
            Ok(canonical) => break canonical,
            Err(_) => {
                let name = existing.file_name()?.to_string_lossy().into_owned();
                missing.push(name);
                if !existing.pop() || !existing.starts_with(root) {
                    return None;
                }
            }
        }
    };
    let inside = canonical.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = inside
        .components()
        .map(|component| component.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.extend(missing.into_iter().rev());
    Some(parts.join("/"))
}
