//! Integration tests of clawsmith-sandbox: the disaster-check corpus, the runner's limits and
//! sandbox, the `run_command` tool and the background command service.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::new_without_default)]

mod attack;
mod classify_corpus;
mod egress;
mod git_attack;
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

/// Runs the test `test` (`module::name`) again as the unprivileged uid 65534 through `setpriv`,
/// with `CLAWSMITH_ATTACK_UNPRIVILEGED` and `env` set, when we are root and not that rerun
/// already; its standard output, or `None` (saying why) when it does not rerun. Panics when the
/// rerun fails.
#[allow(clippy::disallowed_methods)]
pub fn rerun_unprivileged(test: &str, env: &[(&str, &str)]) -> Option<String> {
    let short = test.rsplit("::").next().unwrap_or(test);
    if std::env::var_os("CLAWSMITH_ATTACK_UNPRIVILEGED").is_some() {
        return None;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("{short} ran as uid {} only", nix::unistd::geteuid());
        return None;
    }
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIP {short} (unprivileged): setpriv is not installed");
        return None;
    }
    let rerun = std::process::Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env("CLAWSMITH_ATTACK_UNPRIVILEGED", "1")
        .envs(env.iter().copied())
        .env("HOME", "/nonexistent")
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&rerun.stdout).into_owned();
    assert!(
        rerun.status.success(),
        "the unprivileged run failed:\n{stdout}{}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    Some(stdout)
}
