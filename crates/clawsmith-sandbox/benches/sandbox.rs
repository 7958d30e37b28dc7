//! The cost of the sandbox: `run_command "true"` through the full pipeline (disaster check,
//! environment, rlimits, Landlock, seccomp, mount namespace, process group) against a bare
//! `sh -c true` spawn and, where installed, `bwrap --ro-bind / / --unshare-net true`; and the
//! disaster check alone. `cargo xtask bench` prints the ratios.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::LazyLock;

use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::classify::check_command;
use clawsmith_sandbox::{CommandRequest, KernelSupport, SandboxConfig, SandboxPolicy, run_command};

fn main() {
    divan::main();
}

struct Setup {
    _temp: tempfile::TempDir,
    config: SandboxConfig,
    runtime: tokio::runtime::Runtime,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| {
    let temp = tempfile::tempdir().unwrap();
    let mut config = SandboxConfig::new(temp.path());
    if KernelSupport::probe().landlock_abi.is_none() {
        eprintln!("Landlock unavailable: the sandboxed benchmark runs best-effort (unconfined)");
        config.policy = SandboxPolicy::BestEffort;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    Setup {
        _temp: temp,
        config,
        runtime,
    }
});

#[divan::bench]
fn run_command_true_sandboxed() {
    let setup = &*SETUP;
    let outcome = setup
        .runtime
        .block_on(run_command(
            &setup.config,
            &CommandRequest::new("true"),
            &CancellationSignal::new(),
        ))
        .unwrap();
    assert_eq!(outcome.exit, clawsmith_sandbox::ExitKind::Code(0));
}

#[divan::bench]
fn bare_sh_c_true() {
    let status = std::process::Command::new("/bin/sh")
        .args(["-c", "true"])
        .status()
        .unwrap();
    assert!(status.success());
}

#[divan::bench]
fn bwrap_true(bencher: divan::Bencher<'_, '_>) {
    if !Path::new("/usr/bin/bwrap").exists() {
        eprintln!("bubblewrap not installed: skipping bwrap_true");
        return;
    }
    bencher.bench(|| {
        std::process::Command::new("/usr/bin/bwrap")
            .args(["--ro-bind", "/", "/", "--unshare-net", "true"])
            .status()
            .unwrap()
    });
}

#[divan::bench(args = ["cargo test -p clawsmith-sandbox", "bash -c 'echo hi && rm -rf ./build' | tee log", "rm -rf /"])]
fn disaster_check(command: &str) -> bool {
    check_command(divan::black_box(command)).is_blocked()
}
