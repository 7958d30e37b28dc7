//! The git attack table: commands that try to make the user's next `git` command (run outside
//! the sandbox) run code — config keys git runs or follows, written in the spellings a parser of
//! our own would miss, pointer files, nested repositories, hard links, and a background command
//! that plants a `commondir` and keeps running. After each command (during it, for a background
//! one) a real git on the host runs `status`, `log`, `diff`, `commit`, an alias, `fetch --all` and
//! `credential fill` in the repository, and the payload — a `touch` of a marker in the test's
//! throwaway directory — must not have run. Each row also runs once with the sandbox off, where
//! the marker must appear: the row's payload is real, so the table can fail. Runs as the user
//! the tests run as and again, through `setpriv`, as uid 65534.
#![allow(clippy::disallowed_methods)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::{
    CommandExecutionService, CommandRequest, CommandState, SandboxConfig, SandboxPolicy,
    ServiceConfig, StartRequest, run_command,
};

use crate::{Fixture, landlock_or_skip};

/// Makes a repository in the current directory with one commit and a modified file (so `diff`
/// has something to show), as a command inside the sandbox would.
const INIT: &str = "git init -q . && echo a > f && git add f && git -c user.name=t \
                    -c user.email=t@example.invalid commit -qm one && echo b > f";

/// How the row's command runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `run_command`: the checks run after it ended.
    Foreground,
    /// `start_command`: the checks run while it still runs (it prints `written` once its
    /// writes are done, then sleeps).
    Background,
    /// `run_command`, checked while it still runs: it touches `written` in the workspace once
    /// its writes are done, then waits (bounded) for the test to touch `done`. The host's
    /// repository has no `hooks/` before it (as `git init --template=` makes one), so every
    /// code path it writes is one that did not exist.
    ForegroundDuring,
}

/// One attack. In `script`, `MARK` stands for the marker's path and `REMOTE` for a bare
/// repository outside the workspace.
struct Row {
    name: &'static str,
    mode: Mode,
    /// Whether the host makes the workspace a repository (with one commit) before the command.
    host_repo: bool,
    script: &'static str,
    /// The repository (relative to the workspace) the user's git runs in afterwards.
    repo: &'static str,
    /// Keys (as `git config --list` names them) that must be gone from its `.git/config`.
    gone: &'static [&'static str],
    /// Keys that must still be there.
    kept: &'static [&'static str],
    /// Paths (relative to the workspace) a background command made that the watch must clean
    /// while it still runs; the checks wait (bounded) until they are gone.
    settle: &'static [&'static str],
    /// What the command must print with the sandbox on (empty: anything).
    prints: &'static str,
    /// Whether the payload runs at the user's git when nothing cleans (false where a key only
    /// redirects traffic, so there is nothing local to run).
    runs_unguarded: bool,
}

fn table() -> Vec<Row> {
    let row = |name, script, gone, kept| Row {
        name,
        mode: Mode::Foreground,
        host_repo: false,
        script,
        repo: ".",
        gone,
        kept,
        settle: &[],
        prints: "",
        runs_unguarded: true,
    };
    vec![
        row(
            "1 a value on the section-header line",
            r#"INIT && printf '[core] fsmonitor = "touch MARK"\n' >> .git/config"#,
            &["core.fsmonitor"],
            &["core.repositoryformatversion"],
        ),
        row(
            "2 one non-UTF-8 byte in the config",
            r#"INIT && printf '[core]\n\tfsmonitor = "touch MARK"\n[user]\n\tname = \377x\n' >> .git/config"#,
            &["core.fsmonitor"],
            &["user.name"],
        ),
        row(
            "3 remote.origin.uploadpack at fetch",
            "INIT && git remote add origin REMOTE && \
             git config remote.origin.uploadpack 'touch MARK; git-upload-pack'",
            &["remote.origin.uploadpack"],
            &["remote.origin.url", "remote.origin.fetch"],
        ),
        row(
            "4 core.sshCommand at fetch",
            "INIT && git remote add origin ssh://127.0.0.1/x && \
             git config core.sshCommand 'touch MARK #'",
            &["core.sshcommand"],
            &["remote.origin.url"],
        ),
        row(
            "5 credential.helper",
            "INIT && git config credential.helper '!f() { touch MARK; }; f'",
            &["credential.helper"],
            &[],
        ),
        row(
            "6 diff.external",
            "INIT && git config diff.external 'f() { touch MARK; }; f'",
            &["diff.external"],
            &[],
        ),
        row(
            "7 protocol.ext.allow=always with an ext:: remote",
            "INIT && git remote add origin 'ext::sh -c touch% MARK' && \
             git config protocol.ext.allow always",
            &["protocol.ext.allow"],
            &["remote.origin.url"],
        ),
        Row {
            runs_unguarded: false,
            ..row(
                "8 http.proxy",
                "INIT && git config http.proxy http://127.0.0.1:9",
                &["http.proxy"],
                &[],
            )
        },
        row(
            "9 url.X.insteadOf turning a remote into ext::",
            "INIT && git remote add origin REMOTE && \
             git config 'url.ext::sh -c touch% MARK.insteadOf' REMOTE && \
             git config protocol.ext.allow always",
            &["url.ext::sh -c touch% ", "protocol.ext.allow"],
            &["remote.origin.url"],
        ),
        row(
            "10 include.path",
            r#"INIT && printf '[core]\n\tfsmonitor = "touch MARK"\n' > evil.cfg && git config include.path ../evil.cfg"#,
            &["include.path"],
            &[],
        ),
        row(
            "11 includeIf",
            r#"INIT && printf '[core]\n\tfsmonitor = "touch MARK"\n' > evil.cfg && git config 'includeIf.gitdir:/.path' ../evil.cfg"#,
            &["includeif."],
            &[],
        ),
        row(
            "12 core.hooksPath",
            r#"INIT && mkdir evilhooks && printf '#!/bin/sh\ntouch MARK\n' > evilhooks/pre-commit && chmod +x evilhooks/pre-commit && git config core.hooksPath "$PWD/evilhooks""#,
            &["core.hookspath"],
            &[],
        ),
        row(
            "13 alias.*",
            "INIT && git config alias.st '!touch MARK'",
            &["alias.st"],
            &[],
        ),
        row(
            "14 a subsection with quotes, a bracket and a backslash",
            r#"INIT && printf '[remote "we\\"ird] x"]\n\turl = REMOTE\n\tuploadpack = touch MARK; git-upload-pack\n' >> .git/config"#,
            &[r#"remote.we"ird] x.uploadpack"#],
            &[r#"remote.we"ird] x.url"#],
        ),
        row(
            "15 a continuation line inside the value",
            r#"INIT && printf '[core]\n\tbare = false\n\tfsmonitor = "touch \\\nMARK"\n' >> .git/config"#,
            &["core.fsmonitor"],
            &["core.bare"],
        ),
        row(
            "16 a .git file (gitdir:) pointing at a repository of the command's",
            r#"git init -q --bare evil.git && git -C evil.git config core.bare false && git -C evil.git config core.fsmonitor 'touch MARK' && echo "gitdir: $PWD/evil.git" > .git && echo a > f && git add f && git -c user.name=t -c user.email=t@example.invalid commit -qm one"#,
            &[],
            &[],
        ),
        Row {
            host_repo: true,
            repo: "sub",
            ..row(
                "17 a nested git init with a hook and core.fsmonitor",
                r#"mkdir sub && cd sub && INIT && printf '#!/bin/sh\ntouch MARK\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git config core.fsmonitor 'touch MARK'"#,
                &["core.fsmonitor"],
                &["core.repositoryformatversion"],
            )
        },
        Row {
            host_repo: true,
            ..row(
                "18 a hard link into the existing .git/hooks",
                r#"printf '#!/bin/sh\ntouch MARK\n' > evil; chmod +x evil; ln evil .git/hooks/pre-commit; ln .git/hooks/pre-commit.sample s && cat evil > s; true"#,
                &[],
                &[],
            )
        },
        Row {
            repo: "n",
            ..row(
                "19 a hard link into a new nested repository's hooks",
                r#"printf '#!/bin/sh\ntouch MARK\n' > evil && chmod +x evil && mkdir n && cd n && INIT && ln ../evil .git/hooks/pre-commit"#,
                &[],
                &[],
            )
        },
        Row {
            mode: Mode::Background,
            host_repo: true,
            ..row(
                "20 a background command plants commondir and keeps running",
                r#"mkdir -p evil/hooks && printf '#!/bin/sh\ntouch MARK\n' > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && cp -r .git/objects .git/refs evil/; echo "$PWD/evil" > .git/commondir; echo written; sleep 60"#,
                &[],
                &[],
            )
        },
        Row {
            mode: Mode::Background,
            host_repo: true,
            // Git commands that write the repository fail in background commands.
            prints: "index.lock': Read-only file system",
            ..row(
                "21 a background command plants a hook and config.worktree",
                r#"git add f 2>&1; printf '#!/bin/sh\ntouch MARK\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; git config extensions.worktreeConfig true; printf '[core]\n\tfsmonitor = "touch MARK"\n' > .git/config.worktree; echo written; sleep 60"#,
                &["extensions.worktreeconfig"],
                &["core.repositoryformatversion"],
            )
        },
        Row {
            mode: Mode::Background,
            host_repo: true,
            repo: "sub",
            settle: &["sub/.git/hooks/pre-commit"],
            ..row(
                "22 a background command makes a nested repository with a hook and core.fsmonitor",
                r#"mkdir sub && cd sub && INIT && printf '#!/bin/sh\ntouch MARK\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git config core.fsmonitor 'touch MARK'; echo written; sleep 60"#,
                &["core.fsmonitor"],
                &["core.repositoryformatversion"],
            )
        },
        Row {
            mode: Mode::ForegroundDuring,
            host_repo: true,
            ..row(
                "24 a foreground command plants commondir, a first hook and config.worktree, and keeps running",
                r#"mkdir -p evil/hooks && printf '#!/bin/sh\ntouch MARK\n' > evil/hooks/pre-commit && chmod +x evil/hooks/pre-commit && cp -r .git/objects .git/refs evil/; echo "$PWD/evil" > .git/commondir; mkdir -p .git/hooks; printf '#!/bin/sh\ntouch MARK\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; printf '[core]\n\tfsmonitor = "touch MARK"\n' > .git/config.worktree; mkdir -p .git/info; printf '* filter=x\n' > .git/info/attributes; touch written; for i in $(seq 1 400); do [ -e done ] && break; sleep 0.05; done"#,
                &[],
                &[],
            )
        },
        Row {
            mode: Mode::Background,
            settle: &[".git"],
            ..row(
                "23 a background command plants a .git file (gitdir:) at a workspace without one",
                r#"git init -q --bare evil.git && git -C evil.git config core.bare false && git -C evil.git config core.fsmonitor 'touch MARK' && echo "gitdir: $PWD/evil.git" > .git && echo a > f && git add f && git -c user.name=t -c user.email=t@example.invalid commit -qm one; echo written; sleep 60"#,
                &[],
                &[],
            )
        },
    ]
}

/// Waits (bounded polling, not a timing assertion) until the watch cleaned what `row` names.
async fn settle(row: &Row, fixture: &Fixture, repo: &Path) {
    for _ in 0..1000 {
        let keys = config_keys(fixture, repo);
        let cleaned = row
            .settle
            .iter()
            .all(|path| std::fs::symlink_metadata(fixture.workspace.join(path)).is_err())
            && !row
                .gone
                .iter()
                .any(|gone| keys.iter().any(|key| key.starts_with(gone)));
        if cleaned {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `git` on the host as the user would, with no system or global config and a stand-in
/// `ssh` that fails; returns whether it succeeded.
fn host_git(fixture: &Fixture, dir: &Path, args: &[&str], input: Option<&str>) -> bool {
    let bin = fixture.dir.path().join("bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", fixture.dir.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        // The fixture lives under the checkout's target directory: a row whose repository is
        // gone must not let git find the checkout's own repository above it.
        .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.unwrap_or_default().as_bytes());
    drop(stdin);
    child.wait().unwrap().success()
}

/// The keys of `repo`'s `.git/config`, lowercased as git lists them (section and key).
fn config_keys(fixture: &Fixture, repo: &Path) -> Vec<String> {
    let output = Command::new("git")
        .args(["config", "--no-includes", "--list", "--file"])
        .arg(repo.join(".git/config"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", fixture.dir.path())
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| line.split('=').next().unwrap_or_default().to_owned())
        .collect()
}

/// A workspace (made a repository with one commit when `host_repo`), a bare `remote.git` and a
/// failing `ssh` beside it.
fn prepare(row: &Row) -> (Fixture, PathBuf, PathBuf) {
    let fixture = Fixture::new();
    let marker = fixture.outside.join("marker");
    let remote = fixture.outside.join("remote.git");
    let bin = fixture.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("ssh"), "#!/bin/sh\nexit 1\n").unwrap();
    let ssh = bin.join("ssh");
    let chmod = Command::new("chmod").arg("+x").arg(&ssh).status().unwrap();
    assert!(chmod.success());
    assert!(host_git(
        &fixture,
        &fixture.outside,
        &["init", "-q", "--bare", "remote.git"],
        None
    ));
    if row.host_repo {
        let ws = fixture.workspace.clone();
        assert!(host_git(&fixture, &ws, &["init", "-q", "."], None));
        std::fs::write(ws.join("f"), "a\n").unwrap();
        assert!(host_git(&fixture, &ws, &["add", "f"], None));
        assert!(host_git(
            &fixture,
            &ws,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.invalid",
                "commit",
                "-qm",
                "one"
            ],
            None
        ));
        std::fs::write(ws.join("f"), "b\n").unwrap();
        if row.mode == Mode::ForegroundDuring {
            std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
        }
    }
    (fixture, marker, remote)
}

/// Everything the user might run next in `repo`; any of them may fail, none may run the payload.
fn user_git(fixture: &Fixture, repo: &Path) {
    let commit = [
        "-c",
        "user.name=u",
        "-c",
        "user.email=u@example.invalid",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "user",
    ];
    let credential = "protocol=https\nhost=example.invalid\n\n";
    host_git(fixture, repo, &["status"], None);
    host_git(fixture, repo, &["log", "--oneline"], None);
    host_git(fixture, repo, &["diff"], None);
    host_git(fixture, repo, &commit, None);
    host_git(fixture, repo, &["st"], None);
    host_git(fixture, repo, &["fetch", "--all"], None);
    host_git(fixture, repo, &["credential", "fill"], Some(credential));
}

/// Runs `row` under `policy`; whether the payload ran at the user's git. With the sandbox on,
/// also asserts the row's keys.
async fn run_row(row: &Row, policy: SandboxPolicy) -> bool {
    let (fixture, marker, remote) = prepare(row);
    let script = row
        .script
        .replace("INIT", INIT)
        .replace("MARK", &marker.display().to_string())
        .replace("REMOTE", &remote.display().to_string());
    let mut config: SandboxConfig = fixture.config();
    config.policy = policy;
    let repo = fixture.workspace.join(row.repo);
    let guarded = policy != SandboxPolicy::Off;
    match row.mode {
        Mode::Foreground => {
            let request = CommandRequest::new(&script);
            let outcome = run_command(&config, &request, &CancellationSignal::new())
                .await
                .unwrap();
            if guarded {
                check_keys(row, &fixture, &repo, &outcome.output);
            }
            user_git(&fixture, &repo);
        }
        Mode::ForegroundDuring => {
            let request = CommandRequest::new(&script);
            let running = tokio::spawn(async move {
                run_command(&config, &request, &CancellationSignal::new()).await
            });
            let written = fixture.workspace.join("written");
            for _ in 0..2000 {
                if written.exists() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(written.exists(), "{}: the command never wrote", row.name);
            let git = repo.join(".git");
            if guarded {
                // While it runs, every code path it wrote to is the stand-in it could not
                // change: commondir names the git dir itself, hooks/ is empty.
                assert_eq!(
                    std::fs::read_to_string(git.join("commondir")).unwrap(),
                    ".\n",
                    "{}",
                    row.name
                );
                assert_eq!(std::fs::read_dir(git.join("hooks")).unwrap().count(), 0);
                for empty in ["config.worktree", "info/attributes"] {
                    assert_eq!(
                        std::fs::read(git.join(empty)).unwrap(),
                        b"",
                        "{}: {empty}",
                        row.name
                    );
                }
            }
            user_git(&fixture, &repo);
            std::fs::write(fixture.workspace.join("done"), "").unwrap();
            let outcome = running.await.unwrap().unwrap();
            if guarded {
                check_keys(row, &fixture, &repo, &outcome.output);
                // Over, the stand-ins are gone with it: the repository is as it was.
                for gone in ["commondir", "hooks", "config.worktree", "info/attributes"] {
                    assert!(
                        std::fs::symlink_metadata(git.join(gone)).is_err(),
                        "{}: .git/{gone} left after the command\n{}",
                        row.name,
                        outcome.output
                    );
                }
            }
        }
        Mode::Background => {
            let service = CommandExecutionService::new(ServiceConfig::new(
                config,
                fixture.dir.path().join("logs"),
            ))
            .unwrap();
            let started = service
                .start(StartRequest {
                    command: script,
                    ..StartRequest::default()
                })
                .await
                .unwrap();
            let id = started.command_id;
            let mut output = String::new();
            for _ in 0..2000 {
                output = service.output(&id, 0, None).unwrap().data;
                if output.contains("written") {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(output.contains("written"), "{}: {output}", row.name);
            // Still running: what the user's git meets now is what it would meet at any moment.
            let state = service.status(&id).unwrap().state;
            assert_eq!(state, CommandState::Running, "{}", row.name);
            if guarded {
                settle(row, &fixture, &repo).await;
                check_keys(row, &fixture, &repo, &output);
                for path in row.settle {
                    assert!(
                        std::fs::symlink_metadata(fixture.workspace.join(path)).is_err(),
                        "{}: {path} still there while the command runs",
                        row.name
                    );
                }
                for planted in ["commondir", "config.worktree", "hooks/pre-commit"] {
                    assert!(
                        !repo.join(".git").join(planted).exists(),
                        "{}: .git/{planted} exists while the command runs",
                        row.name
                    );
                }
            }
            user_git(&fixture, &repo);
            service.cancel(&id).unwrap();
            let done = service.wait(&id, Duration::from_secs(20)).await.unwrap();
            assert_ne!(done.state, CommandState::Running, "{}", row.name);
        }
    }
    marker.exists()
}

fn check_keys(row: &Row, fixture: &Fixture, repo: &Path, output: &str) {
    assert!(output.contains(row.prints), "{}: {output}", row.name);
    let keys = config_keys(fixture, repo);
    for gone in row.gone {
        assert!(
            !keys.iter().any(|key| key.starts_with(gone)),
            "{}: {gone} left in {keys:?}\n{output}",
            row.name
        );
    }
    for kept in row.kept {
        assert!(
            keys.iter().any(|key| key == kept),
            "{}: {kept} not kept in {keys:?}\n{output}",
            row.name
        );
    }
}

async fn run_table() -> usize {
    let mut ran = 0;
    for row in table() {
        let ran_unguarded = run_row(&row, SandboxPolicy::Off).await;
        assert_eq!(
            ran_unguarded, row.runs_unguarded,
            "{}: the payload's effect without the sandbox",
            row.name
        );
        let ran_guarded = run_row(&row, SandboxPolicy::Required).await;
        assert!(
            !ran_guarded,
            "{}: planted code ran at the user's git",
            row.name
        );
        ran += 1;
    }
    ran
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_attack_table() {
    if !landlock_or_skip("git_attack_table") {
        return;
    }
    let ran = run_table().await;
    let rows = table().len();
    assert_eq!(ran, rows);
    println!(
        "git attack rows ran: {ran} as uid {}",
        nix::unistd::geteuid()
    );
    let Some(stdout) = crate::rerun_unprivileged("git_attack::git_attack_table", &[]) else {
        return;
    };
    assert!(
        stdout.contains(&format!("git attack rows ran: {rows} as uid 65534")),
        "{stdout}"
    );
}
