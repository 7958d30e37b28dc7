//! Integration tests of clawsmith-plugins: manifests read from real folders, plugin tools run
//! as real processes through the core's pipeline and the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod foreign;
mod load;
mod run;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// A temp folder holding a workspace and plugin folders.
pub struct Fixture {
    pub dir: TempDir,
    pub workspace: PathBuf,
}

impl Fixture {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        Fixture { dir, workspace }
    }

    /// A plugin folder `name` with `files` (`(relative path, content)`; names ending in `.sh`
    /// or under `bin/` are made executable).
    pub fn plugin(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = self.dir.path().join("plugins").join(name);
        std::fs::create_dir_all(&root).unwrap();
        for (path, content) in files {
            write(&root.join(path), content);
        }
        root
    }
}

pub fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
    let name = path.to_string_lossy();
    if name.ends_with(".sh") || name.contains("/bin/") {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Whether this machine can build the command sandbox (user namespaces, Landlock, seccomp);
/// says so when not.
pub fn sandbox_or_skip(test: &str) -> bool {
    let support = clawsmith_sandbox::KernelSupport::probe();
    if !support.user_namespaces || support.landlock_abi.is_none() || !support.seccomp {
        eprintln!("SKIP {test}: the kernel cannot build the command sandbox ({support:?})");
        return false;
    }
    true
}
