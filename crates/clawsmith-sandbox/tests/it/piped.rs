//! `spawn_piped`: a long-lived confined process with separate stdin, stdout and stderr pipes
//! (what language servers need), under a read-only workspace.

use clawsmith_sandbox::{ExitKind, RunError, spawn_piped};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Fixture, landlock_or_skip};

#[tokio::test]
async fn stdin_stdout_and_stderr_are_separate_pipes_and_the_workspace_is_read_only() {
    if !landlock_or_skip("piped read-only workspace") {
        return;
    }
    let fixture = Fixture::new();
    std::fs::write(fixture.workspace.join("kept.txt"), "original\n").unwrap();
    let cache = fixture.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut config = fixture.config();
    config.workspace_writable = false;
    config.extra_writable_roots = vec![cache.clone()];
    let script = format!(
        "read line; echo \"got $line\"; echo to-stderr >&2; \
         {{ echo x > kept.txt; }} 2>/dev/null || echo workspace-refused >&2; \
         echo cached > '{}/written'; exit 7",
        cache.display()
    );
    let (mut process, mut io) = spawn_piped(&config, &script).unwrap();
    assert!(process.report().confined, "{:?}", process.report());
    io.stdin.write_all(b"hello\n").await.unwrap();
    let mut stdout = String::new();
    io.stdout.read_to_string(&mut stdout).await.unwrap();
    let mut stderr = String::new();
    io.stderr.read_to_string(&mut stderr).await.unwrap();
    assert_eq!(stdout, "got hello\n");
    assert_eq!(stderr, "to-stderr\nworkspace-refused\n");
    assert_eq!(process.wait().await.unwrap(), ExitKind::Code(7));
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("kept.txt")).unwrap(),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("written")).unwrap(),
        "cached\n"
    );
}

#[tokio::test]
async fn dropping_the_handle_kills_the_process_and_the_disaster_check_still_refuses() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
    let (process, mut io) = spawn_piped(&config, "exec sleep 600").unwrap();
    drop(process);
    // The process is gone: its stdout reaches EOF instead of waiting ten minutes.
    let mut rest = Vec::new();
    io.stdout.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());

    let refused = spawn_piped(&config, "rm -rf /").unwrap_err();
    assert!(matches!(refused, RunError::Blocked(_)), "{refused}");
}
