//! `spawn_piped`: a long-lived confined process with separate stdin, stdout and stderr pipes
//! (what language servers need), under a read-only workspace; `spawn_piped_argv` and
//! `CommandRequest::argv`: a program and its arguments run as words, never shell text.

use clawsmith_sandbox::{
    Argv, CommandRequest, ExitKind, RunError, run_command, spawn_piped, spawn_piped_argv,
};
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

/// Runs `argv` through `spawn_piped_argv` in `cwd`: (stdout, stderr, exit).
async fn run_argv(
    config: &clawsmith_sandbox::SandboxConfig,
    argv: &Argv,
    cwd: Option<&str>,
) -> (String, String, ExitKind) {
    let (mut process, mut io) = spawn_piped_argv(config, argv, cwd).unwrap();
    drop(io.stdin);
    let mut stdout = String::new();
    io.stdout.read_to_string(&mut stdout).await.unwrap();
    let mut stderr = String::new();
    io.stderr.read_to_string(&mut stderr).await.unwrap();
    (stdout, stderr, process.wait().await.unwrap())
}

#[tokio::test]
async fn argv_words_reach_the_program_as_words() {
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.workspace.join("sub")).unwrap();
    let mut config = fixture.config();
    config.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
    // (words after `printf %s|`, what printf prints): nothing a shell would read is read.
    let table: [(&[&str], &str); 5] = [
        (&["a b", "it's"], "a b|it's|"),
        (
            &["$(touch pwned)", "`touch pwned`"],
            "$(touch pwned)|`touch pwned`|",
        ),
        (&["*", "~", "$HOME"], "*|~|$HOME|"),
        (&[";", "&&", "|", ">out"], ";|&&|||>out|"),
        (&["line\nbreak", ""], "line\nbreak||"),
    ];
    for (words, printed) in table {
        let argv = Argv::new("printf", ["%s|"].iter().chain(words).copied());
        let (stdout, stderr, exit) = run_argv(&config, &argv, None).await;
        assert_eq!(
            (stdout.as_str(), exit),
            (printed, ExitKind::Code(0)),
            "{words:?}: {stderr}"
        );
    }
    for name in ["pwned", "out"] {
        assert!(!fixture.workspace.join(name).exists(), "{name} was created");
    }
    // Variables of the request on top of the command environment, and the working folder.
    let argv = Argv::new("printenv", ["CLAWSMITH_ARGV"]).with_env("CLAWSMITH_ARGV", "x 'y'");
    assert_eq!(run_argv(&config, &argv, None).await.0, "x 'y'\n");
    let (stdout, _, _) = run_argv(&config, &Argv::new("/bin/pwd", ["-P"]), Some("sub")).await;
    assert!(stdout.ends_with("/ws/sub\n"), "{stdout}");
    // The same words through the one-shot runner.
    let request = CommandRequest::argv(Argv::new("printf", ["%s", "$(id)"]));
    assert_eq!(request.command, "exec 'printf' '%s' '$(id)'");
    let outcome = run_command(&config, &request, &Default::default())
        .await
        .unwrap();
    assert_eq!(outcome.output, "$(id)");
}

#[tokio::test]
async fn an_argv_program_that_cannot_be_executed_is_reported_as_bash_would() {
    let fixture = Fixture::new();
    let script = fixture.workspace.join("tool.sh");
    std::fs::write(&script, "#!/bin/sh\necho relative \"$1\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = fixture.config();
    config.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
    // A name found nowhere: bash's "not found" and 127.
    let argv = Argv::new("clawsmith-no-such-program", ["x"]);
    let (_, stderr, exit) = run_argv(&config, &argv, None).await;
    assert_eq!(exit, ExitKind::Code(127), "{stderr}");
    assert!(stderr.contains("not found"), "{stderr}");
    // A path relative to the working folder runs there (through bash, which resolves it).
    let (stdout, stderr, exit) = run_argv(&config, &Argv::new("./tool.sh", ["a b"]), None).await;
    assert_eq!(
        (stdout.as_str(), exit),
        ("relative a b\n", ExitKind::Code(0)),
        "{stderr}"
    );
    // A working folder outside the workspace is refused before anything runs.
    let outside = fixture.outside.to_string_lossy().into_owned();
    let refused = spawn_piped_argv(&config, &Argv::new("true", [""; 0]), Some(&outside));
    assert!(
        matches!(refused, Err(RunError::OutsideWorkspace(_))),
        "{:?}",
        refused.err()
    );
}

#[tokio::test]
async fn the_disaster_check_reads_the_words_of_an_argv_request() {
    let fixture = Fixture::new();
    let config = fixture.config();
    // Harmless even if it ran; refused by the privilege-escalation rule on its quoted text.
    let argv = Argv::new("sudo", ["--version"]);
    let refused = spawn_piped_argv(&config, &argv, None).unwrap_err();
    assert!(matches!(refused, RunError::Blocked(_)), "{refused}");
    let request = CommandRequest::argv(argv);
    let refused = run_command(&config, &request, &Default::default())
        .await
        .unwrap_err();
    assert!(matches!(refused, RunError::Blocked(_)), "{refused}");
}
