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
        // Not under /tmp: the built view replaces /tmp with a private tmpfs, so an "outside"
        // there would be out of sight and the write checks would prove nothing.
        let base = std::path::Path::new("/var/tmp");
        let dir = if base.is_dir() {
            tempfile::tempdir_in(base).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
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
        let mut config = SandboxConfig::new(&self.workspace);
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
