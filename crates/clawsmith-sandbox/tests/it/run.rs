//! `run_command` end to end with harmless commands: sandbox, limits, timeout, output cap.

use std::io::Read;
use std::time::Duration;

use clawsmith_protocol::{CancellationSignal, TraceHeaders};
use clawsmith_sandbox::{
    CommandOutcome, CommandRequest, ExitKind, KernelSupport, RunError, SandboxConfig,
    SandboxPolicy, StopReason, run_command,
};

use crate::{Fixture, landlock_or_skip};

async fn run(config: &SandboxConfig, command: &str) -> Result<CommandOutcome, RunError> {
    run_command(
        config,
        &CommandRequest::new(command),
        &CancellationSignal::new(),
    )
    .await
}

#[tokio::test]
async fn output_and_exit_codes() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    let cases: &[(&str, &str, ExitKind)] = &[
        ("echo hello", "hello\n", ExitKind::Code(0)),
        ("echo a; echo b >&2; echo c", "a\nb\nc\n", ExitKind::Code(0)),
        ("exit 3", "", ExitKind::Code(3)),
        ("kill -TERM $$", "", ExitKind::Signal(15)),
        (
            "pwd",
            &format!("{}\n", fixture.workspace.display()),
            ExitKind::Code(0),
        ),
        ("cat", "", ExitKind::Code(0)),
    ];
    for (command, output, exit) in cases {
        let outcome = run(&config, command).await.unwrap();
        assert_eq!(outcome.output, *output, "{command}");
        assert_eq!(outcome.exit, *exit, "{command}");
        assert!(!outcome.truncated);
    }
}

#[tokio::test]
async fn the_calls_trace_context_is_the_commands_traceparent() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let cases = [
        (
            Some(TraceHeaders {
                traceparent: traceparent.to_owned(),
                tracestate: None,
            }),
            format!("{traceparent} -\n"),
        ),
        (None, "- -\n".to_owned()),
    ];
    for (trace, output) in cases {
        let mut request = CommandRequest::new(r#"echo "${TRACEPARENT:--} ${TRACESTATE:--}""#);
        request.trace = trace;
        let outcome = run_command(&config, &request, &CancellationSignal::new())
            .await
            .unwrap();
        assert_eq!(outcome.output, output);
    }
}

/// `(command, stdin, separate stderr, output, stderr)`.
type StdinCase<'a> = (&'a str, Option<&'a str>, bool, &'a str, Option<&'a str>);

#[tokio::test]
async fn stdin_bytes_and_a_separate_stderr() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    // (command, stdin, separate stderr, output, stderr): more input than a pipe buffer holds,
    // input nobody reads, and stderr merged or apart.
    let big = "x".repeat(256 * 1024);
    let big_count = format!("{}\n", big.len());
    let cases: &[StdinCase<'_>] = &[
        ("cat", Some("{\"a\": 1}"), false, "{\"a\": 1}", None),
        ("wc -c | tr -d ' '", Some(&big), false, &big_count, None),
        ("echo out; echo err >&2", None, true, "out\n", Some("err\n")),
        ("echo out; echo err >&2", None, false, "out\nerr\n", None),
        (
            "echo never read",
            Some(&big),
            true,
            "never read\n",
            Some(""),
        ),
        ("cat", None, false, "", None),
    ];
    for (command, stdin, separate, output, stderr) in cases {
        let mut request = CommandRequest::new(*command);
        request.stdin = stdin.map(|text| text.as_bytes().to_vec());
        request.separate_stderr = *separate;
        let outcome = run_command(&config, &request, &CancellationSignal::new())
            .await
            .unwrap();
        assert_eq!(outcome.output, *output, "{command}");
        assert_eq!(outcome.stderr.as_deref(), *stderr, "{command}");
        assert_eq!(outcome.exit, ExitKind::Code(0), "{command}");
    }
}

#[tokio::test]
async fn blocked_commands_never_spawn() {
    let fixture = Fixture::new();
    let config = fixture.config();
    let marker = fixture.workspace.join("marker");
    let command = format!("touch {}; rm -rf /", marker.display());
    let error = run(&config, &command).await.unwrap_err();
    assert!(matches!(error, RunError::Blocked(_)), "{error}");
    assert_eq!(error.code().as_str(), "command_blocked");
    assert!(!marker.exists());
}

#[tokio::test]
async fn cwd_must_stay_inside_the_workspace() {
    let fixture = Fixture::new();
    let config = fixture.config();
    std::fs::create_dir(fixture.workspace.join("sub")).unwrap();
    std::os::unix::fs::symlink(&fixture.outside, fixture.workspace.join("escape")).unwrap();
    let cases: &[(&str, Option<&str>)] = &[
        (
            "../outside",
            Some("Path is outside the workspace: ../outside"),
        ),
        ("/", Some("Path is outside the workspace: /")),
        (
            "sub/../../outside",
            Some("Path is outside the workspace: sub/../../outside"),
        ),
        ("escape", Some("Path is outside the workspace: escape")),
        ("missing", None),
    ];
    for (cwd, message) in cases {
        let mut request = CommandRequest::new("pwd");
        request.cwd = Some((*cwd).to_owned());
        let error = run_command(&config, &request, &CancellationSignal::new())
            .await
            .unwrap_err();
        if let Some(message) = message {
            assert_eq!(error.to_string(), *message);
        }
        assert_eq!(error.code().as_str(), "invalid_arguments", "{cwd}");
    }
    let mut config = config;
    config.policy = SandboxPolicy::BestEffort;
    let mut request = CommandRequest::new("pwd");
    request.cwd = Some("sub".to_owned());
    let outcome = run_command(&config, &request, &CancellationSignal::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.output.trim(),
        fixture.workspace.join("sub").to_str().unwrap()
    );
}

#[tokio::test]
async fn timeouts_are_bounded() {
    let fixture = Fixture::new();
    let config = fixture.config();
    for timeout in [Duration::ZERO, Duration::from_secs(601)] {
        let mut request = CommandRequest::new("true");
        request.timeout = Some(timeout);
        let error = run_command(&config, &request, &CancellationSignal::new())
            .await
            .unwrap_err();
        assert!(matches!(error, RunError::InvalidTimeout { .. }), "{error}");
    }
}

#[tokio::test]
async fn writes_are_confined_to_the_workspace() {
    if !landlock_or_skip("writes_are_confined_to_the_workspace") {
        return;
    }
    let fixture = Fixture::new();
    let config = fixture.config();
    std::fs::create_dir_all(fixture.workspace.join(".git/hooks")).unwrap();
    std::fs::write(fixture.workspace.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(fixture.workspace.join(".git/objects")).unwrap();
    let outside = fixture.outside.display();
    // (command, file that must exist afterwards or not)
    let cases = [
        (
            format!("echo x > {outside}/f"),
            fixture.outside.join("f"),
            false,
        ),
        (
            format!("mkdir {outside}/d"),
            fixture.outside.join("d"),
            false,
        ),
        (
            format!("touch {outside}/../escaped"),
            fixture.dir.path().join("escaped"),
            false,
        ),
        (
            "echo x > .git/hooks/pre-commit".to_owned(),
            fixture.workspace.join(".git/hooks/pre-commit"),
            false,
        ),
        (
            "echo inside > file.txt".to_owned(),
            fixture.workspace.join("file.txt"),
            true,
        ),
        (
            "mkdir -p new/dir && touch new/dir/f".to_owned(),
            fixture.workspace.join("new/dir/f"),
            true,
        ),
        (
            "touch .git/objects/x".to_owned(),
            fixture.workspace.join(".git/objects/x"),
            true,
        ),
        (
            "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" > from-tmp".to_owned(),
            fixture.workspace.join("from-tmp"),
            true,
        ),
    ];
    for (command, path, should_exist) in cases {
        let outcome = run(&config, &command).await.unwrap();
        assert!(outcome.sandbox.confined, "{:?}", outcome.sandbox);
        assert_eq!(path.exists(), should_exist, "{command}: {}", outcome.output);
        if !should_exist {
            assert_ne!(outcome.exit, ExitKind::Code(0), "{command}");
        }
    }
    let outcome = run(
        &config,
        "echo '[evil]' >> .git/config; cat /dev/null > /dev/null",
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(
        outcome.sandbox.protected.contains(".git/hooks"),
        "{:?}",
        outcome.sandbox
    );
    // Reads stay open.
    let outcome = run(
        &config,
        &format!("ls {outside} && cat /etc/hostname >/dev/null; echo ok"),
    )
    .await
    .unwrap();
    assert!(outcome.output.ends_with("ok\n"), "{}", outcome.output);
}

fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

#[tokio::test]
async fn network_is_off_unless_allowed() {
    if !landlock_or_skip("network_is_off_unless_allowed") {
        return;
    }
    if !std::path::Path::new("/bin/bash").exists() {
        eprintln!("SKIP network_is_off_unless_allowed: needs bash for /dev/tcp");
        return;
    }
    let fixture = Fixture::new();
    let (listener, port) = listener();
    let command =
        format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected >&3 && echo connected");

    let config = fixture.config();
    let outcome = run(&config, &command).await.unwrap();
    assert_ne!(outcome.exit, ExitKind::Code(0), "{}", outcome.output);
    assert!(!outcome.output.contains("connected"), "{}", outcome.output);
    assert!(
        outcome.sandbox.network.starts_with("blocked"),
        "{:?}",
        outcome.sandbox
    );

    let mut config = fixture.config();
    config.network_allowed = true;
    let accept = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    });
    let outcome = run(&config, &command).await.unwrap();
    assert_eq!(outcome.exit, ExitKind::Code(0), "{}", outcome.output);
    assert_eq!(outcome.output, "connected\n");
    assert_eq!(accept.join().unwrap(), "connected\n");
    assert_eq!(outcome.sandbox.network, "allowed");
}

/// The secrets must be in *this* process's environment. Setting variables in a running,
/// multi-threaded test binary is unsafe, so the test re-runs itself with them set.
#[tokio::test]
#[allow(clippy::disallowed_methods)]
async fn parent_secrets_are_not_inherited() {
    if std::env::var_os("CLAWSMITH_TEST_API_TOKEN").is_none() {
        let rerun = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "run::parent_secrets_are_not_inherited",
                "--test-threads=1",
            ])
            .env("CLAWSMITH_TEST_API_TOKEN", "hunter2-token")
            .env("CLAWSMITH_TEST_DB_PASSWORD", "hunter2-password")
            .env("CLAWSMITH_TEST_PLAIN", "plain-value")
            .output()
            .unwrap();
        assert!(
            rerun.status.success(),
            "the re-run with secrets in the environment failed:\n{}{}",
            String::from_utf8_lossy(&rerun.stdout),
            String::from_utf8_lossy(&rerun.stderr)
        );
        return;
    }
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    config.env_allow = vec!["CLAWSMITH_TEST_*".to_owned()];
    let outcome = run(&config, "env").await.unwrap();
    assert!(!outcome.output.contains("hunter2"), "{}", outcome.output);
    assert!(outcome.output.contains("CLAWSMITH_TEST_PLAIN=plain-value"));
    assert!(outcome.output.contains("PATH="));
    let tmpdir = outcome
        .output
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap();
    assert_eq!(tmpdir, "/tmp", "the built view's private tmpfs");

    config.env_allow.clear();
    let outcome = run(&config, "env").await.unwrap();
    assert!(!outcome.output.contains("CLAWSMITH_TEST_PLAIN"));
}

/// Live (non-zombie) processes whose process group is `group`, once it has emptied or after a
/// harness deadline (see [`left_after`]).
pub fn processes_in_group(group: i32) -> Vec<String> {
    left_after(|| processes_where(2, group))
}

/// Live (non-zombie) processes whose session is `session`, as [`processes_in_group`].
pub fn processes_in_session(session: i32) -> Vec<String> {
    left_after(|| processes_where(3, session))
}

/// What `list` still finds after a harness deadline (not a timing assertion), or nothing as
/// soon as it finds nothing. Every process of a command is gone when its call returns; a warm
/// spare's call returns at its init's exit, and its relay (the group's leader, outside the
/// command's PID namespace, running nothing of it) exits right after.
fn left_after(list: impl Fn() -> Vec<String>) -> Vec<String> {
    let mut left = list();
    for _ in 0..500 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        left = list();
    }
    left
}

/// Live processes whose `/proc/<pid>/stat` field `index` (counted from the state) is `value`.
fn processes_where(index: usize, value: i32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...
        let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest.to_owned()) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.len() > index && fields[index] == value.to_string() && fields[0] != "Z" {
            found.push(stat);
        }
    }
    found
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    let mut request = CommandRequest::new("sleep 100 & sleep 100");
    request.timeout = Some(Duration::from_millis(500));
    let outcome = run_command(&config, &request, &CancellationSignal::new())
        .await
        .unwrap();
    assert_eq!(
        outcome.stopped,
        Some(StopReason::TimedOut(Duration::from_millis(500)))
    );
    assert!(outcome.process_group > 0);
    assert_eq!(
        processes_in_group(outcome.process_group),
        Vec::<String>::new()
    );

    // A background job left behind by a shell that exits normally is killed too, also when
    // job control put it in a process group of its own (same session).
    for command in [
        "sleep 100 & echo started",
        "set -m; sleep 100 & echo started",
    ] {
        let outcome = run(&config, command).await.unwrap();
        assert_eq!(outcome.output, "started\n", "{command}");
        assert_eq!(
            processes_in_session(outcome.process_group),
            Vec::<String>::new(),
            "{command}"
        );
    }
    let mut request = CommandRequest::new("set -m; sleep 100 & sleep 100");
    request.timeout = Some(Duration::from_millis(300));
    let outcome = run_command(&config, &request, &CancellationSignal::new())
        .await
        .unwrap();
    assert_eq!(
        processes_in_session(outcome.process_group),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn cancellation_kills_the_group() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    let cancel = CancellationSignal::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let outcome = run_command(
        &config,
        &CommandRequest::new("sleep 100 & sleep 100"),
        &cancel,
    )
    .await
    .unwrap();
    assert_eq!(outcome.stopped, Some(StopReason::Cancelled));
    assert_eq!(
        processes_in_group(outcome.process_group),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn endless_output_is_bounded_and_marked() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    config.output_cap_bytes = 64 * 1024;
    config.output_kill_after_bytes = 8 * 1024 * 1024;
    let outcome = run(&config, "yes | cat").await.unwrap();
    assert!(outcome.truncated);
    assert!(outcome.total_output_bytes > config.output_kill_after_bytes);
    assert_eq!(
        outcome.stopped,
        Some(StopReason::OutputLimit(8 * 1024 * 1024))
    );
    assert!(outcome.output.contains("[... output truncated: "), "marker");
    assert!(
        outcome.output.len() < 64 * 1024 + 200,
        "{}",
        outcome.output.len()
    );
    assert!(outcome.output.starts_with("y\ny\n"));
}

#[tokio::test]
async fn limits_are_visible_inside() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    config.limits.open_files = Some(200);
    config.limits.cpu_seconds = Some(77);
    config.limits.file_size_bytes = Some(10 * 1024 * 1024);
    config.limits.address_space_bytes = Some(8 * 1024 * 1024 * 1024);
    config.limits.processes = Some(3000);
    let outcome = run(
        &config,
        "ulimit -c; ulimit -n; ulimit -t; ulimit -f; ulimit -v; ulimit -u; ulimit -a",
    )
    .await
    .unwrap();
    let lines: Vec<&str> = outcome.output.lines().collect();
    assert_eq!(
        &lines[..6],
        ["0", "200", "77", "10240", "8388608", "3000"],
        "{}",
        outcome.output
    );
    assert!(outcome.output.contains("open files"), "{}", outcome.output);
}

/// An address-space limit below clawsmith's own (its threads and heap reserve far more than a
/// command needs) still lets commands start: the relay, a copy of clawsmith, makes every mapping
/// it needs before the limit applies; the command gets the limit.
#[tokio::test]
async fn an_address_space_limit_below_clawsmiths_own_still_runs_commands() {
    if !landlock_or_skip("an_address_space_limit_below_clawsmiths_own_still_runs_commands") {
        return;
    }
    let vm_size = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    };
    // Reserved, never touched: address space without memory.
    let reserve: Vec<u8> = Vec::with_capacity(1 << 30);
    let own = vm_size();
    assert!(own > (1 << 30), "{own}");
    let limit = own - (512 << 20);
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.limits.address_space_bytes = Some(limit);
    for command in ["ulimit -v", "true"] {
        let outcome = run(&config, command).await.unwrap();
        assert_eq!(
            outcome.exit,
            ExitKind::Code(0),
            "{command}: {}",
            outcome.output
        );
        if command == "ulimit -v" {
            assert_eq!(outcome.output.trim(), (limit / 1024).to_string());
        }
    }
    drop(reserve);
}

#[tokio::test]
async fn required_policy_refuses_without_landlock() {
    let fixture = Fixture::new();
    let marker = fixture.workspace.join("ran");
    let mut config = fixture.config();
    config.kernel_support = Some(KernelSupport::NONE);
    let command = format!("touch {}", marker.display());
    let error = run(&config, &command).await.unwrap_err();
    assert!(matches!(error, RunError::SandboxUnavailable(_)), "{error}");
    assert_eq!(error.code().as_str(), "sandbox_unavailable");
    assert!(
        error.to_string().contains("Landlock is not available"),
        "{error}"
    );
    assert!(!marker.exists());

    config.policy = SandboxPolicy::BestEffort;
    let outcome = run(&config, &command).await.unwrap();
    assert!(marker.exists());
    assert!(!outcome.sandbox.confined);
    assert!(
        outcome.sandbox.summary().contains("unconfined"),
        "{}",
        outcome.sandbox.summary()
    );

    config.policy = SandboxPolicy::Off;
    let outcome = run(&config, "true").await.unwrap();
    assert!(
        outcome.sandbox.summary().contains("unconfined (off"),
        "{}",
        outcome.sandbox.summary()
    );
}

#[tokio::test]
async fn extra_roots_and_protected_paths() {
    if !landlock_or_skip("extra_roots_and_protected_paths") {
        return;
    }
    let fixture = Fixture::new();
    let cache = fixture.outside.join("cache");
    let state = fixture.workspace.join(".clawsmith-state");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let mut config = fixture.config();
    config.extra_writable_roots = vec![cache.clone()];
    config.protected_paths = vec![state.clone()];
    let cases = [
        (
            format!("touch {}/ok", cache.display()),
            cache.join("ok"),
            true,
        ),
        (
            format!("touch {}/no", fixture.outside.display()),
            fixture.outside.join("no"),
            false,
        ),
        (
            "touch .clawsmith-state/db".to_owned(),
            state.join("db"),
            false,
        ),
        (
            "touch elsewhere".to_owned(),
            fixture.workspace.join("elsewhere"),
            true,
        ),
    ];
    for (command, path, should_exist) in cases {
        let outcome = run(&config, &command).await.unwrap();
        assert_eq!(path.exists(), should_exist, "{command}: {}", outcome.output);
    }
    let outcome = run(&config, "true").await.unwrap();
    assert!(
        outcome.sandbox.protected.contains(".clawsmith-state"),
        "{:?}",
        outcome.sandbox
    );
    assert!(
        outcome.sandbox.filesystem.contains("1 extra roots"),
        "{:?}",
        outcome.sandbox
    );
}

#[tokio::test]
async fn udp_and_ipv6_sockets_are_refused_too() {
    if !landlock_or_skip("udp_and_ipv6_sockets_are_refused_too") {
        return;
    }
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("SKIP udp_and_ipv6_sockets_are_refused_too: needs python3 to open sockets");
        return;
    }
    // In the host's view (no user namespaces, best effort) seccomp is the network wall.
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.policy = SandboxPolicy::BestEffort;
    config.kernel_support = Some(KernelSupport {
        user_namespaces: false,
        ..KernelSupport::probe()
    });
    let script = "python3 -c 'import socket\n\
        for family, kind in [(socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET6, socket.SOCK_STREAM)]:\n\
        \x20   try:\n\
        \x20       socket.socket(family, kind); print(\"opened\")\n\
        \x20   except PermissionError: print(\"refused\")\n\
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print(\"unix ok\")'";
    let outcome = run(&config, script).await.unwrap();
    assert_eq!(outcome.output, "refused\nrefused\nunix ok\n");
}

#[tokio::test]
async fn required_needs_user_namespaces_and_best_effort_says_what_held() {
    if !landlock_or_skip("required_needs_user_namespaces_and_best_effort_says_what_held") {
        return;
    }
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.workspace.join(".git/hooks")).unwrap();
    let mut config = fixture.config();
    config.kernel_support = Some(KernelSupport {
        user_namespaces: false,
        ..KernelSupport::probe()
    });
    let marker = fixture.workspace.join("ran");
    let error = run(&config, &format!("touch {}", marker.display()))
        .await
        .unwrap_err();
    assert!(matches!(error, RunError::SandboxUnavailable(_)), "{error}");
    assert!(error.to_string().contains("user namespaces"), "{error}");
    assert!(
        error.to_string().contains("user.max_user_namespaces"),
        "says how to get them: {error}"
    );
    assert!(!marker.exists(), "nothing ran");

    config.policy = SandboxPolicy::BestEffort;
    let command = format!("touch {}/x; touch .git/hooks/y", fixture.outside.display());
    let outcome = run(&config, &command).await.unwrap();
    assert!(outcome.sandbox.confined, "{:?}", outcome.sandbox);
    assert!(
        outcome.sandbox.filesystem.contains("host's view")
            && outcome
                .sandbox
                .filesystem
                .contains("built view unavailable"),
        "{:?}",
        outcome.sandbox
    );
    assert_eq!(
        outcome.sandbox.protected,
        "not enforced (no private mount namespace)"
    );
    assert!(
        !fixture.outside.join("x").exists(),
        "Landlock still confines writes"
    );
    assert!(
        fixture.workspace.join(".git/hooks/y").exists(),
        "hooks are writable, as reported"
    );
}

/// The relay starts the init and the command in its own address space (`CLONE_VM`, the
/// command with `CLONE_VFORK`, as `posix_spawn` does): each command is still pid 2 of a PID
/// namespace of its own, the child of its init (pid 1), with its own limits and every
/// restriction, also when many start at once on several threads; a plain command and one bash
/// runs come out alike; and nothing of any of them is left afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commands_each_get_their_own_init_limits_and_restrictions() {
    if !landlock_or_skip("concurrent_commands_each_get_their_own_init_limits_and_restrictions") {
        return;
    }
    let fixture = Fixture::new();
    let mut tasks = Vec::new();
    for index in 0..12u64 {
        let mut config = fixture.config();
        config.limits.open_files = Some(1024 + index);
        config.limits.file_size_bytes = Some((index + 1) << 20);
        // Half of them on a second prepared view (the network allowed).
        config.network_allowed = index % 2 == 1;
        let command = if index % 3 == 0 {
            // Plain: `exec`ed without bash.
            "cat /proc/self/status".to_owned()
        } else {
            format!(
                "echo \"$$ $PPID $(ulimit -n) $(ulimit -f) {index}\"; cat /proc/self/status; \
                 sleep 0.2"
            )
        };
        tasks.push(tokio::spawn(async move {
            let outcome = run(&config, &command).await.unwrap();
            (index, outcome)
        }));
    }
    let mut groups = Vec::new();
    for task in tasks {
        let (index, outcome) = task.await.unwrap();
        assert_eq!(
            outcome.exit,
            ExitKind::Code(0),
            "{index}: {}",
            outcome.output
        );
        let status = &outcome.output;
        for line in ["NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000"] {
            assert!(
                status.lines().any(|l| l == line),
                "{index}: {line} in {status}"
            );
        }
        if index % 3 == 0 {
            // `cat` itself is the command: pid 2 of its namespace, its parent the init.
            assert!(status.lines().any(|l| l == "Pid:\t2"), "{index}: {status}");
            assert!(status.lines().any(|l| l == "PPid:\t1"), "{index}: {status}");
        } else {
            let first = status.lines().next().unwrap();
            assert_eq!(
                first,
                format!("2 1 {} {} {index}", 1024 + index, (index + 1) << 10),
                "{index}"
            );
        }
        groups.push(outcome.process_group);
    }
    // Every relay is gone, and with it its namespace: no process of any group is left (a
    // warm spare's call returns at its init's exit; its relay is reaped just after).
    for group in groups {
        assert!(
            group_empties(group),
            "process group {group} still has members"
        );
    }
}

/// A plain command is `exec`ed without bash: what it sees and what it returns are what
/// `bash -c` would give (the quoted twin of each command is not plain, so bash runs it). A
/// program that cannot start in the command's view (here covered by `/dev/null`) is run through
/// bash after all, with bash's answer.
#[tokio::test]
async fn plain_commands_run_as_bash_runs_them() {
    if !landlock_or_skip("plain_commands_run_as_bash_runs_them") {
        return;
    }
    let fixture = Fixture::new();
    std::fs::write(fixture.workspace.join("a file"), "x").unwrap();
    std::fs::create_dir(fixture.workspace.join("src")).unwrap();
    let config = fixture.config();
    let sorted = |text: &str| {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        lines.join("\n")
    };
    for (plain, quoted) in [
        ("env", "\"env\""),
        ("ls -la", "\"ls\" -la"),
        ("ls /nonexistent-clawsmith", "\"ls\" /nonexistent-clawsmith"),
        ("true", "\"true\""),
        ("false", "\"false\""),
        ("stat -c %n:%F src", "\"stat\" -c %n:%F src"),
    ] {
        let direct = run(&config, plain).await.unwrap();
        let bash = run(&config, quoted).await.unwrap();
        assert_eq!(direct.exit, bash.exit, "{plain}");
        assert_eq!(sorted(&direct.output), sorted(&bash.output), "{plain}");
    }
    let env = run(&config, "env").await.unwrap().output;
    assert!(
        env.lines()
            .any(|l| l == format!("PWD={}", fixture.workspace.display())),
        "{env}"
    );
    assert!(env.lines().any(|l| l.starts_with("_=/")), "{env}");

    let env_program = ["/usr/bin/env", "/bin/env"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap();
    let mut covered = fixture.config();
    covered.hidden_paths.push(env_program.into());
    let direct = run(&covered, "env").await.unwrap();
    let bash = run(&covered, "\"env\"").await.unwrap();
    assert_eq!(direct.exit, bash.exit);
    assert_eq!(direct.output, bash.output);
    assert_ne!(direct.exit, ExitKind::Code(0), "{}", direct.output);
}

/// Two hundred commands one after another leave nothing behind: no descriptor of this process
/// (a spawn keeps what it was prepared from until its tree is gone, then drops it) and no
/// process of any command's group.
#[tokio::test]
async fn two_hundred_commands_leak_no_descriptor_and_no_process() {
    if !landlock_or_skip("two_hundred_commands_leak_no_descriptor_and_no_process") {
        return;
    }
    let fixture = Fixture::new();
    let config = fixture.config();
    let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    // Warm up once so lazily created process-wide descriptors (the lifeline) exist.
    run(&config, "true").await.unwrap();
    let before = open_fds();
    let mut groups = Vec::new();
    for index in 0..200 {
        // Plain commands (`exec`ed directly), scripts through bash, and background jobs.
        let command = match index % 3 {
            0 => "true".to_owned(),
            1 => format!("echo {index} > /tmp/mine; cat /tmp/mine"),
            _ => format!("sleep 30 & echo {index}"),
        };
        let outcome = run(&config, &command).await.unwrap();
        assert_eq!(
            outcome.exit,
            ExitKind::Code(0),
            "{command}: {}",
            outcome.output
        );
        if index % 3 != 0 {
            assert_eq!(outcome.output, format!("{index}\n"), "{command}");
        }
        groups.push(outcome.process_group);
    }
    // One descriptor leaked per command would show as 200 more; a prepared view built anew
    // meanwhile (a unix socket bound or removed on the machine changes what it must cover)
    // holds three, and at most eight views are kept.
    let after = open_fds();
    assert!(
        after <= before + 24,
        "descriptors leaked: {before} before, {after} after 200 commands"
    );
    for group in groups {
        assert!(
            group_empties(group),
            "process group {group} still has members"
        );
    }
}

/// Whether process group `group` has no member (zombies included) within a harness deadline
/// (not a timing assertion): a warm spare's call is answered once its init — and with it every
/// process of the command's PID namespace — is gone; the relay, outside that namespace, exits
/// right after and is reaped on the spares' thread.
fn group_empties(group: i32) -> bool {
    for _ in 0..500 {
        if nix::sys::signal::killpg(nix::unistd::Pid::from_raw(group), None).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// A workspace and an extra root under /tmp, which each command's private /tmp covers, are
/// attached back into it (as a spare's tree does too: the later rounds): writes there reach the
/// host, the rest of the host's /tmp stays out of sight, the repository's hooks stay read-only,
/// and the command's own /tmp files stay its own.
#[tokio::test]
async fn roots_under_tmp_are_attached_back_into_the_private_tmp() {
    if !landlock_or_skip("roots_under_tmp_are_attached_back_into_the_private_tmp") {
        return;
    }
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("ws");
    let cache = root.join("cache");
    for path in [&workspace, &cache, &workspace.join(".git/hooks")] {
        std::fs::create_dir_all(path).unwrap();
    }
    std::fs::write(root.join("neighbour"), "host /tmp").unwrap();
    let mut config = SandboxConfig::new(&workspace, clawsmith_sandbox::StateDir::NotKept);
    config.extra_writable_roots = vec![cache.clone()];
    for round in 0..3 {
        let command = format!(
            "echo w{round} > f{round} && echo c{round} > {cache}/c{round} && ls {root} && \
             ! cat {root}/neighbour 2>/dev/null && ! touch .git/hooks/h{round} 2>/dev/null && \
             echo t > /tmp/t{round} && ls -A /tmp | tr '\\n' ' '",
            cache = cache.display(),
            root = root.display(),
        );
        let outcome = run(&config, &command).await.unwrap();
        assert!(outcome.sandbox.confined, "{:?}", outcome.sandbox);
        assert_eq!(
            outcome.exit,
            ExitKind::Code(0),
            "round {round}: {}",
            outcome.output
        );
        let seen: Vec<&str> = outcome.output.split_whitespace().collect();
        assert_eq!(
            seen[..2],
            ["cache", "ws"],
            "round {round}: {}",
            outcome.output
        );
        assert!(
            !seen.contains(&"neighbour") && !outcome.output.contains("host /tmp"),
            "round {round}: {}",
            outcome.output
        );
        // The private /tmp holds this command's file and the path to the roots, nothing else.
        let first = root.strip_prefix("/tmp").unwrap().iter().next().unwrap();
        assert_eq!(
            seen[2..],
            [first.to_str().unwrap(), &format!("t{round}")],
            "round {round}: {}",
            outcome.output
        );
        let written = std::fs::read_to_string(workspace.join(format!("f{round}"))).unwrap();
        assert_eq!(written, format!("w{round}\n"));
        let cached = std::fs::read_to_string(cache.join(format!("c{round}"))).unwrap();
        assert_eq!(cached, format!("c{round}\n"));
        assert!(!workspace.join(format!(".git/hooks/h{round}")).exists());
        assert!(!std::path::Path::new(&format!("/tmp/t{round}")).exists());
    }
}

/// Everyday commands work in the view built from the default allowlist: `git commit` with the
/// identity of a `~/.gitconfig` the view does not show, and the toolchains of the user running
/// the tests (bound read-only from their home; a tool that is not installed is skipped and
/// named).
#[tokio::test]
#[allow(clippy::disallowed_methods)] // asks the host whether each tool is installed
async fn everyday_commands_work_with_the_default_allowlist() {
    if !landlock_or_skip("everyday_commands_work_with_the_default_allowlist") {
        return;
    }
    let fixture = Fixture::new();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Ada\n\temail = ada@example.invalid\n[credential]\n\thelper = store\n",
    )
    .unwrap();
    let mut config = fixture.config();
    config.home = Some(home.clone());
    let outcome = run(
        &config,
        &format!(
            "git init -q . && echo x > f && git add f && git commit -qm one && git log \
             --format='%an <%ae>' && (cat '{}/.gitconfig' 2>/dev/null || echo out of sight)",
            home.display()
        ),
    )
    .await
    .unwrap();
    assert_eq!(outcome.exit, ExitKind::Code(0), "{}", outcome.output);
    assert_eq!(
        outcome.output, "Ada <ada@example.invalid>\nout of sight\n",
        "the identity reaches git; the file holding it is not shown"
    );

    // The host's own toolchains, as the user running the tests has them.
    let config = fixture.config();
    for (tool, command) in [
        ("cargo", "cargo --version"),
        ("rustc", "rustc --version"),
        ("python3", "python3 -c 'import json, sqlite3; print(1)'"),
        ("pip", "python3 -m pip --version"),
        ("npm", "npm --version"),
    ] {
        let installed = std::process::Command::new("sh")
            .args(["-c", &format!("{command} >/dev/null 2>&1")])
            .status()
            .is_ok_and(|status| status.success());
        if !installed {
            eprintln!("SKIP {tool}: not installed on this host");
            continue;
        }
        let outcome = run(&config, command).await.unwrap();
        assert_eq!(
            outcome.exit,
            ExitKind::Code(0),
            "{tool}: {}",
            outcome.output
        );
    }
}

/// A home under /tmp (a CI user's, a container's) is out of sight under the view's own empty
/// /tmp; the view still builds and the command runs.
#[tokio::test]
async fn a_home_under_tmp_is_out_of_sight_and_commands_run() {
    if !landlock_or_skip("a_home_under_tmp_is_out_of_sight_and_commands_run") {
        return;
    }
    let fixture = Fixture::new();
    let home = tempfile::Builder::new()
        .prefix("clawsmith-home-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::write(home.path().join("secret"), "home-secret-value\n").unwrap();
    std::fs::create_dir(home.path().join(".cargo")).unwrap();
    let mut config = fixture.config();
    config.home = Some(home.path().to_path_buf());
    let outcome = run(
        &config,
        &format!("cat {}/secret; echo ran", home.path().display()),
    )
    .await
    .unwrap();
    assert_eq!(outcome.exit, ExitKind::Code(0), "{}", outcome.output);
    assert!(outcome.output.contains("ran"), "{}", outcome.output);
    assert!(
        !outcome.output.contains("home-secret-value"),
        "{}",
        outcome.output
    );
}
