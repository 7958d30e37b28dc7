//! Integration tests of clawsmith-sandbox: the disaster-check corpus, the runner's limits and
//! sandbox, the `run_command` tool and the background command service.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::new_without_default)]

mod attack;
mod classify_corpus;
mod piped;
mod run;
mod service;
mod tool;

use std::path::PathBuf;

use clawsmith_sandbox::{KernelSupport, SandboxConfig};

/// A temp dir holding `ws/` (the workspace), `outside/` (a sibling the sandbox must not write)
/// and `tmp/` (where private temp dirs go).
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub outside: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        // Not under /tmp or /var/tmp: the built view shows both empty, so an "outside" there
        // would be out of sight and the write checks would prove nothing. Under the target
        // directory, in a folder every user may write (the attack table runs again as uid
        // 65534).
        let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
        std::fs::create_dir_all(&base).unwrap();
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(&base).unwrap().permissions().mode() & 0o7777 != 0o1777 {
            // Only its owner can change it; another user finds it made already.
            let _ = std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777));
        }
        let dir = tempfile::tempdir_in(&base).unwrap();
        let workspace = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
        Fixture {
            workspace: workspace.canonicalize().unwrap(),
            outside: outside.canonicalize().unwrap(),
            dir,
        }
    }

    pub fn config(&self) -> SandboxConfig {
        let mut config = SandboxConfig::new(&self.workspace, clawsmith_sandbox::StateDir::NotKept);
        config.temp_root = Some(self.dir.path().join("tmp"));
        config
    }
}

/// Whether the kernel can run the sandbox; prints why a test skips when it cannot.
pub fn landlock_or_skip(test: &str) -> bool {
    let support = KernelSupport::probe();
    if support.landlock_abi.is_none() || !support.seccomp {
        eprintln!("SKIP {test}: Landlock or seccomp unavailable in this kernel ({support:?})");
        return false;
    }
    true
}
