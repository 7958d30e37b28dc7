//! The attack table of the command sandbox: one row per confirmed break (and its variants),
//! each asserting that the outside stays unchanged — bytes and metadata —, that no process of
//! the call survives, and that nothing outside is read. Every attack is a harmless stand-in aimed
//! at the test's own throwaway directory. The table runs as the user the tests run as (root
//! here, as in most CI) and again, re-executed through `setpriv`, as the unprivileged uid 65534.
#![allow(clippy::disallowed_methods)]

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clawsmith_protocol::CancellationSignal;
use clawsmith_sandbox::{
    CommandOutcome, CommandRequest, KernelSupport, RunError, SandboxConfig, run_command,
};

use crate::{Fixture, landlock_or_skip};

/// What must hold after an attack.
struct Outside {
    /// `(path, bytes, mode, uid, gid, mtime)` of every file of the outside dir.
    files: Vec<(PathBuf, Vec<u8>, u32, u32, u32, i64)>,
}

impl Outside {
    fn take(dir: &Path) -> Outside {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(next) = stack.pop() {
            let meta = std::fs::symlink_metadata(&next).unwrap();
            let bytes = if meta.is_file() {
                std::fs::read(&next).unwrap()
            } else {
                Vec::new()
            };
            files.push((
                next.clone(),
                bytes,
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.mtime(),
            ));
            if meta.is_dir() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&next)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                entries.sort();
                stack.extend(entries);
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Outside { files }
    }
}

/// Live processes whose command line contains `marker`.
fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if text.contains(marker) && !zombie && !text.contains("attack_table") {
            found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

async fn run(
    config: &SandboxConfig,
    command: &str,
    timeout: Option<Duration>,
) -> Result<CommandOutcome, RunError> {
    let mut request = CommandRequest::new(command);
    request.timeout = timeout;
    run_command(config, &request, &CancellationSignal::new()).await
}

/// One attack: a script run in the workspace; after it, the outside must be unchanged and no
/// process whose command line holds the row's marker may be alive.
struct Row {
    name: &'static str,
    script: String,
    /// A check of what the command printed (e.g. that a read failed).
    output_must_not_contain: &'static [&'static str],
}

/// Reaching for the memory, descriptors and tracing of the command's init (pid 1): with warm
/// spares it runs in clawsmith's own address space.
const INIT_PROBE: &str = include_str!("../data/init_probe.py");

/// The table. `outside` is a throwaway directory beside the workspace, `secret` a file in it.
fn table(fixture: &Fixture, home: &Path, state: &Path, runtime: &Path, host_pid: u32) -> Vec<Row> {
    let outside = fixture.outside.display().to_string();
    let shm_name = format!("clawsmith-attack-{}", std::process::id());
    let python = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    vec![
        Row {
            name: "1 /dev/shm is private",
            script: format!("echo planted > /dev/shm/{shm_name}; ls /dev/shm"),
            output_must_not_contain: &[],
        },
        Row {
            name: "2 no other terminal: only a new devpts instance",
            script: "ls /dev/pts; for t in /dev/pts/[0-9]*; do echo x > \"$t\"; done; \
                     ls /dev | tr '\\n' ' '"
                .to_owned(),
            output_must_not_contain: &["vda", "sda", "loop", "kmsg", "mem "],
        },
        Row {
            name: "2b TIOCSTI refused even on its own terminal",
            script: format!(
                "{python} -c 'import os,fcntl,termios,pty\nm,s=pty.openpty()\ntry:\n  \
                 fcntl.ioctl(s, termios.TIOCSTI, b\"x\"); print(\"INJECTED\")\nexcept OSError \
                 as e: print(\"refused\", e.errno)'"
            ),
            output_must_not_contain: &["INJECTED"],
        },
        Row {
            name: "3 no device nodes",
            script: "mknod blk b 7 0; mknod chr c 1 3; mkfifo fifo-is-fine; ls -l".to_owned(),
            output_must_not_contain: &["brw", "crw"],
        },
        Row {
            name: "4 no metadata changes outside",
            script: format!(
                "chmod 000 {outside}/secret; chmod u+s {outside}/secret; chown 65534 \
                 {outside}/secret; touch -d 2001-01-01 {outside}/secret; chattr +a \
                 {outside}/secret; setfattr -n user.x -v 1 {outside}/secret; ln \
                 {outside}/secret hardlink; rm -f {outside}/secret; mv {outside}/secret x"
            ),
            output_must_not_contain: &[],
        },
        Row {
            name: "5 no host environment or other processes",
            script: format!(
                "cat /proc/$PPID/environ; cat /proc/1/environ | tr '\\0' '\\n' | grep -c \
                 CLAWSMITH_ATTACK_SECRET; cat /proc/{host_pid}/environ; ls /proc | grep -E \
                 '^[0-9]+$' | wc -l"
            ),
            output_must_not_contain: &["attack-secret-value"],
        },
        Row {
            name: "6 nothing outside is read: home secrets, the state dir",
            script: format!(
                "cat {home}/.aws/credentials {home}/.ssh/id_ed25519 {home}/.netrc \
                 {home}/.bash_history; ls -a {home}/.ssh; cat {state}/clawsmith.db; cat \
                 /etc/shadow /etc/gshadow; cat /etc/ssh/ssh_host_*_key /etc/ssl/private/*.key; ls \
                 /etc/ssl/private",
                home = home.display(),
                state = state.display()
            ),
            output_must_not_contain: &[
                "AKIA-ATTACK",
                "PRIVATE-KEY-ATTACK",
                "netrc-attack",
                "history-attack",
                "db-attack",
                "root:",
                "PRIVATE KEY",
            ],
        },
        Row {
            name: "7 setsid and double forks die with the call",
            script: "setsid sleep 1001.5 & (sleep 1002.5 &) & nohup sleep 1003.5 >/dev/null 2>&1 \
                     & disown; echo started"
                .to_owned(),
            output_must_not_contain: &[],
        },
        Row {
            name: "8 host unix sockets are out of reach",
            script: format!(
                "{python} -c 'import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n  \
                 s.connect(\"{outside}/agent.sock\"); s.send(b\"LEAK\"); print(\"CONNECTED\")\n\
                 except OSError as e: print(\"refused\", e.errno)'"
            ),
            output_must_not_contain: &["CONNECTED"],
        },
        Row {
            name: "9 .git cannot be moved, replaced or given code",
            script: format!(
                "mv .git .git-old; mv .git/hooks .git/hooks-old; rm -rf .git/hooks; echo 'exit 1' > .git/hooks/pre-commit; \
                     printf '[core]\\n\\tfsmonitor = touch {outside}/pwned\\n' >> .git/config; \
                     echo ../elsewhere > .git/commondir; mkdir -p .git/worktrees/w; \
                     echo '[core]' > .git/config.worktree; \
                     printf '#!/bin/sh\\ntouch {outside}/pwned\\n' > .git/hooks/post-commit; ls .git"
            ),
            output_must_not_contain: &[],
        },
        Row {
            name: "9b nested repositories: existing ones protected, new ones made harmless",
            script: format!(
                "echo x > sub/.git/hooks/post-commit; printf '[core]\\n\\tfsmonitor = touch \
                 {outside}/pwned\\n' >> sub/.git/config; mv sub/.git sub/.git-old; \
                 mkdir -p made && cd made && git init -q && printf '#!/bin/sh\\ntouch \
                 {outside}/pwned\\n' > .git/hooks/post-commit && chmod +x .git/hooks/post-commit \
                 && git config core.fsmonitor 'touch {outside}/pwned' && git config user.name kept \
                 && echo made"
            ),
            output_must_not_contain: &[],
        },
        Row {
            name: "10 the init's memory, descriptors and tracing are out of reach",
            script: format!("{python} - <<'PY'\n{INIT_PROBE}PY"),
            output_must_not_contain: &["REACHED"],
        },
        Row {
            name: "11 SysV IPC: the host's objects are out of sight",
            script: format!(
                "{python} - <<'PY'\n{SYSV_PROBE}\
                 for kind in (\"shm\", \"msg\"):\n    \
                 print(kind, \"HOST-IPC-REACHED\" if get(kind, {host_key}, 0) >= 0 else \"absent\")\n    \
                 print(kind, \"made\" if get(kind, {made_key}, 0o1600) >= 0 else \"not made\")\nPY",
                host_key = sysv_keys(host_pid).0,
                made_key = sysv_keys(host_pid).1,
            ),
            output_must_not_contain: &["HOST-IPC-REACHED"],
        },
        Row {
            name: "11b SysV IPC: what one command made is gone for the next",
            script: format!(
                "{python} - <<'PY'\n{SYSV_PROBE}for kind in (\"shm\", \"msg\"):\n    \
                 print(kind, \"LEFTOVER-IPC\" if get(kind, {made_key}, 0) >= 0 else \"gone\")\nPY",
                made_key = sysv_keys(host_pid).1,
            ),
            output_must_not_contain: &["LEFTOVER-IPC"],
        },
        Row {
            name: "12 the home directory is an allowlist: secrets under any name are out of sight",
            script: format!(
                "cd {home}; cat .pgpass .config/git/credentials .claude/.credentials.json \
                 .config/containers/auth.json .vault-token .unlisted/anything \
                 .cargo/credentials.toml; ls -a . .config .cargo; cat .cargo/bin/tool",
                home = home.display()
            ),
            output_must_not_contain: &[
                "pgpass-attack",
                "gitcred-attack",
                "claude-attack",
                "containers-attack",
                "vault-attack",
                "unlisted-attack",
                "cargo-cred-attack",
            ],
        },
        Row {
            name: "13 runtime folders are empty: a daemon's socket bound again mid-command is out of reach",
            script: format!(
                "sleep 1; ls -a {runtime}; {python} -c 'import socket\ns=socket.socket(socket.AF_UNIX)\n\
                 try:\n  s.connect(\"{runtime}/daemon.sock\"); s.send(b\"LEAK\"); \
                 print(\"CONNECTED\")\nexcept OSError as e: print(\"refused\", e.errno)'",
                runtime = runtime.display()
            ),
            output_must_not_contain: &["CONNECTED", "daemon.sock"],
        },
    ]
}

/// Defines `get(kind, key, flags)`: `shmget` (one page) or `msgget`, the id or -1.
const SYSV_PROBE: &str = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
     def get(kind, key, flags):\n    \
     return libc.shmget(key, 4096, flags) if kind == \"shm\" else libc.msgget(key, flags)\n";

/// SysV IPC keys of one table run: one the host holds objects under, one the rows make theirs.
fn sysv_keys(host_pid: u32) -> (i32, i32) {
    let base = 0x434c_0000 | (host_pid & 0xffff) as i32;
    (base, base ^ 0x0001_0000)
}

/// Runs a SysV probe (`SYSV_PROBE` and `code`) with the host's python3 (the tests forbid
/// `unsafe`, so the host side goes through the same probe as the rows); its output.
fn host_sysv(code: &str) -> String {
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(format!("{SYSV_PROBE}{code}"))
        .output()
        .expect("python3 on the host");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A shared memory segment and a message queue the host holds during the table, removed on drop.
struct HostIpc {
    key: i32,
}

impl HostIpc {
    fn make(key: i32) -> HostIpc {
        let made = host_sysv(&format!(
            "print(get(\"shm\", {key}, 0o3600) >= 0, get(\"msg\", {key}, 0o3600) >= 0)"
        ));
        assert_eq!(made, "True True\n", "host SysV objects under key {key}");
        HostIpc { key }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        let key = self.key;
        host_sysv(&format!(
            "libc.shmctl(get(\"shm\", {key}, 0), 0, None); libc.msgctl(get(\"msg\", {key}, 0), 0, None)"
        ));
    }
}

/// Runs the table in `fixture` and asserts each row; returns how many rows ran.
async fn run_table() -> usize {
    let fixture = Fixture::new();
    // The home directory beside the workspace, as on a host; the state dir inside the
    // workspace, where the view shows it unless it is hidden.
    let home = fixture.dir.path().join("home");
    let state = fixture.workspace.join("state");
    let runtime = fixture.dir.path().join("run");
    for dir in [
        home.join(".aws"),
        home.join(".ssh"),
        home.join(".config/git"),
        home.join(".config/containers"),
        home.join(".claude"),
        home.join(".unlisted"),
        home.join(".cargo/bin"),
        state.clone(),
        runtime.clone(),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
    }
    for (path, secret) in [
        (".pgpass", "pgpass-attack"),
        (".config/git/credentials", "gitcred-attack"),
        (".claude/.credentials.json", "claude-attack"),
        (".config/containers/auth.json", "containers-attack"),
        (".vault-token", "vault-attack"),
        (".unlisted/anything", "unlisted-attack"),
        (".cargo/credentials.toml", "cargo-cred-attack"),
        (".cargo/bin/tool", "cargo-tool-visible"),
    ] {
        std::fs::write(home.join(path), secret).unwrap();
    }
    let daemon = runtime.join("daemon.sock");
    let mut daemon_listener = Some(std::os::unix::net::UnixListener::bind(&daemon).unwrap());
    std::fs::write(home.join(".aws/credentials"), "AKIA-ATTACK").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY-ATTACK").unwrap();
    std::fs::write(home.join(".netrc"), "netrc-attack").unwrap();
    std::fs::write(home.join(".bash_history"), "export TOKEN=history-attack").unwrap();
    std::fs::write(state.join("clawsmith.db"), "db-attack").unwrap();
    std::fs::write(fixture.outside.join("secret"), "outside bytes").unwrap();
    let socket_path = fixture.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::create_dir_all(fixture.workspace.join("sub")).unwrap();
    for dir in [fixture.workspace.clone(), fixture.workspace.join("sub")] {
        let git = std::process::Command::new("git")
            .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
            .args(["init", "-q"])
            .current_dir(&dir)
            .status();
        assert!(git.is_ok_and(|s| s.success()), "git init");
    }
    let sub_config = std::fs::read(fixture.workspace.join("sub/.git/config")).unwrap();

    let mut config = fixture.config();
    config.home = Some(home.clone());
    config.runtime_dirs.push(runtime.clone());
    // As the core passes them: the state dir and the database files in it.
    config.hidden_paths = vec![state.clone(), state.join("clawsmith.db")];
    let rows = table(&fixture, &home, &state, &runtime, std::process::id());
    let (host_key, made_key) = sysv_keys(std::process::id());
    let _host_ipc = HostIpc::make(host_key);
    let before = Outside::take(&fixture.outside);
    let git_before = Outside::take(&fixture.workspace.join(".git"));
    let mut ran = 0;
    let mut rebound = None;
    for row in &rows {
        if row.name.starts_with("13 ") {
            // The daemon restarts while the command runs: its socket is removed and bound anew.
            let daemon = daemon.clone();
            let old = daemon_listener.take();
            rebound = Some(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                drop(old);
                std::fs::remove_file(&daemon).unwrap();
                let listener = std::os::unix::net::UnixListener::bind(&daemon).unwrap();
                listener.set_nonblocking(true).unwrap();
                listener
            }));
        }
        let outcome = run(&config, &row.script, Some(Duration::from_secs(30)))
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", row.name));
        if row.name.starts_with("12 ") {
            // The allowlisted toolchain folder is there, and nothing else of the home.
            assert!(
                outcome.output.contains("cargo-tool-visible")
                    && outcome.output.contains(".:\n.\n..\n.cargo\n\n"),
                "{}: {}",
                row.name,
                outcome.output
            );
        }
        assert!(
            outcome.sandbox.confined,
            "{}: {:?}",
            row.name, outcome.sandbox
        );
        for needle in row.output_must_not_contain {
            assert!(
                !outcome.output.contains(needle),
                "{}: {needle:?} in {}",
                row.name,
                outcome.output
            );
        }
        assert_eq!(
            Outside::take(&fixture.outside).files,
            before.files,
            "{}: the outside changed\n{}",
            row.name,
            outcome.output
        );
        for marker in ["sleep 1001.5", "sleep 1002.5", "sleep 1003.5"] {
            let survivors = survivors(marker);
            assert!(survivors.is_empty(), "{}: {survivors:?}", row.name);
        }
        if row.name.starts_with("11 ") {
            // The probe ran and could make objects of its own (so that 11b's "gone" means gone).
            assert_eq!(
                outcome.output, "shm absent\nshm made\nmsg absent\nmsg made\n",
                "{}",
                row.name
            );
        }
        ran += 1;
    }
    // Row 13: nothing reached the daemon's new socket.
    let listener = rebound.expect("row 13 ran").join().unwrap();
    assert!(
        listener.accept().is_err(),
        "the re-bound runtime socket was reached"
    );
    // Row 1: nothing on the host's /dev/shm.
    let shm = format!("/dev/shm/clawsmith-attack-{}", std::process::id());
    assert!(!Path::new(&shm).exists(), "{shm} was created on the host");
    // Row 11: the command's SysV objects lived in its own namespace, never on the host's.
    let on_host = host_sysv(&format!(
        "print(get(\"shm\", {made_key}, 0), get(\"msg\", {made_key}, 0))"
    ));
    assert_eq!(on_host, "-1 -1\n", "a command's SysV object is on the host");
    // Row 3: no device node in the workspace.
    for name in ["blk", "chr"] {
        assert!(!fixture.workspace.join(name).exists(), "{name} was created");
    }
    // Row 8: nothing reached the listener.
    let mut accepted = listener.accept();
    if let Ok((stream, _)) = &mut accepted {
        let mut buffer = Vec::new();
        let _ = stream.read_to_end(&mut buffer);
        panic!(
            "the host socket was reached: {:?}",
            String::from_utf8_lossy(&buffer)
        );
    }
    // Row 9: the repository's code paths are as they were, and a real git outside runs no
    // planted code.
    let git_dir = fixture.workspace.join(".git");
    assert!(git_dir.join("HEAD").exists(), ".git was moved");
    for created in [
        "commondir",
        "worktrees",
        "config.worktree",
        "hooks/pre-commit",
    ] {
        assert!(
            !git_dir.join(created).exists(),
            ".git/{created} was left behind"
        );
    }
    // Only the code paths: the rest of .git (index, objects, logs) may change with git commands.
    let code_paths = |outside: Outside| -> Vec<_> {
        outside
            .files
            .into_iter()
            .filter(|f| {
                let name = f.0.strip_prefix(&git_dir).unwrap().to_string_lossy();
                name.starts_with("hooks") || name == "config"
            })
            .collect()
    };
    let after = code_paths(Outside::take(&git_dir));
    let before_code = code_paths(git_before);
    assert_eq!(after, before_code, "hooks or config changed");
    let status = std::process::Command::new("git")
        .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
        .args(["status", "--short"])
        .current_dir(&fixture.workspace)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let commit = std::process::Command::new("git")
        .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "after the attack",
        ])
        .current_dir(&fixture.workspace)
        .output()
        .unwrap();
    assert!(commit.status.success(), "{commit:?}");
    assert!(
        !fixture.outside.join("pwned").exists(),
        "planted code ran at the user's next git command"
    );
    // Row 9b: the nested repository kept its code, the one the command made lost its own, and
    // real git commands in both run nothing planted.
    let sub = fixture.workspace.join("sub");
    assert!(sub.join(".git/HEAD").exists(), "sub/.git was moved");
    assert!(!sub.join(".git/hooks/post-commit").exists());
    assert_eq!(std::fs::read(sub.join(".git/config")).unwrap(), sub_config);
    let made = fixture.workspace.join("made");
    assert!(
        made.join(".git/HEAD").exists(),
        "the new repository itself is kept"
    );
    assert!(
        !made.join(".git/hooks/post-commit").exists(),
        "planted hook left"
    );
    let made_config = std::fs::read_to_string(made.join(".git/config")).unwrap();
    assert!(!made_config.contains("fsmonitor"), "{made_config}");
    assert!(
        made_config.contains("kept"),
        "harmless keys stay: {made_config}"
    );
    for dir in [&sub, &made] {
        let commit = std::process::Command::new("git")
            .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
            .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t"])
            .args(["commit", "-q", "--allow-empty", "-m", "after"])
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(commit.status.success(), "{commit:?}");
        let status = std::process::Command::new("git")
            .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
            .arg("status")
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    }
    assert!(
        !fixture.outside.join("pwned").exists(),
        "planted code ran in a nested repository"
    );
    ran
}

#[tokio::test]
async fn attack_table() {
    if !landlock_or_skip("attack_table") {
        return;
    }
    let ran = run_table().await;
    assert_eq!(ran, 16);
    println!("attack rows ran: {ran} as uid {}", nix::unistd::geteuid());
    // And again as an unprivileged user, when we are root and setpriv is there.
    let secret = [("CLAWSMITH_ATTACK_SECRET", "attack-secret-value")];
    let Some(stdout) = crate::rerun_unprivileged("attack::attack_table", &secret) else {
        return;
    };
    assert!(
        stdout.contains("attack rows ran: 16 as uid 65534"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_swapped_workspace_root_is_refused() {
    if !landlock_or_skip("a_swapped_workspace_root_is_refused") {
        return;
    }
    let fixture = Fixture::new();
    let mut config = fixture.config();
    let meta = std::fs::metadata(&fixture.workspace).unwrap();
    config.workspace_identity = Some((meta.dev(), meta.ino()));
    assert!(run(&config, "true", None).await.is_ok());
    // Between calls the root is replaced by a symlink to a directory outside.
    let old = fixture.dir.path().join("ws-old");
    std::fs::rename(&fixture.workspace, &old).unwrap();
    std::os::unix::fs::symlink(&fixture.outside, &fixture.workspace).unwrap();
    let error = run(&config, "touch escaped", None).await.unwrap_err();
    assert!(matches!(error, RunError::WorkspaceReplaced(_)), "{error}");
    assert!(error.to_string().contains("was replaced"), "{error}");
    assert!(!fixture.outside.join("escaped").exists());
    assert!(!old.join("escaped").exists());
}

#[tokio::test]
async fn inherited_descriptors_do_not_reach_the_command() {
    if !landlock_or_skip("inherited_descriptors_do_not_reach_the_command") {
        return;
    }
    use std::os::fd::AsRawFd;
    let fixture = Fixture::new();
    let target = fixture.outside.join("through-fd");
    std::fs::write(&target, "before").unwrap();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&target)
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut accepted, _) = listener.accept().unwrap();
    let inheritable = || nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty());
    nix::fcntl::fcntl(&file, inheritable()).unwrap();
    nix::fcntl::fcntl(&stream, inheritable()).unwrap();
    let script = format!(
        "ls /proc/self/fd | tr '\\n' ' '; echo LEAK >&{file} ; echo LEAK >&{socket}; \
         echo LEAK >> /proc/self/fd/{file}",
        file = file.as_raw_fd(),
        socket = stream.as_raw_fd()
    );
    let outcome = run(&fixture.config(), &script, None).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "before",
        "{}",
        outcome.output
    );
    accepted.set_nonblocking(true).unwrap();
    let mut buffer = [0u8; 16];
    let read = accepted.read(&mut buffer);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the inherited socket carried {read:?}: {}",
        outcome.output
    );
}

#[tokio::test]
async fn process_count_binds_even_root() {
    if !landlock_or_skip("process_count_binds_even_root") {
        return;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if version < (6, 14) && nix::unistd::geteuid().is_root() {
        eprintln!("SKIP process_count_binds_even_root: pid_max is per PID namespace from 6.14");
        return;
    }
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.limits.processes = Some(50);
    let script = "/usr/bin/python3 -c 'import os,time\nn=0\ntry:\n  while n < 2000:\n    \
                  pid=os.fork()\n    if pid == 0:\n      time.sleep(30.25); os._exit(0)\n    \
                  n+=1\n  print(\"unbounded\", n)\nexcept OSError as e:\n  print(\"limit\", n)'";
    let outcome = run(&config, script, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let forked: u32 = outcome
        .output
        .trim()
        .strip_prefix("limit ")
        .unwrap_or_else(|| panic!("no limit hit: {}", outcome.output))
        .parse()
        .unwrap();
    assert!(forked < 400, "{forked} processes");
    assert!(survivors("time.sleep(30.25)").is_empty() && survivors("30.25").is_empty());
}

#[tokio::test]
async fn a_timed_out_command_leaves_no_process() {
    if !landlock_or_skip("a_timed_out_command_leaves_no_process") {
        return;
    }
    let fixture = Fixture::new();
    let outcome = run(
        &fixture.config(),
        "setsid sleep 1004.5 & (sleep 1007.5 &) ; sleep 1008.5",
        Some(Duration::from_millis(500)),
    )
    .await
    .unwrap();
    assert!(outcome.stopped.is_some(), "{outcome:?}");
    for marker in ["sleep 1004.5", "sleep 1007.5", "sleep 1008.5"] {
        assert!(
            survivors(marker).is_empty(),
            "{marker}: {:?}",
            survivors(marker)
        );
    }
}

/// The child mode of `a_killed_clawsmith_leaves_no_process`: runs a command that starts
/// detached processes and waits forever, until the parent test kills this process.
async fn child_mode_runs_forever(marker: &str) {
    let fixture = Fixture::new();
    let script = format!("setsid sleep {marker} & (sleep {marker} &) ; sleep {marker}");
    let _ = run(&fixture.config(), &script, Some(Duration::from_secs(120))).await;
}

#[tokio::test]
async fn a_killed_clawsmith_leaves_no_process() {
    if let Some(marker) = std::env::var_os("CLAWSMITH_ATTACK_CHILD") {
        child_mode_runs_forever(&marker.to_string_lossy()).await;
        return;
    }
    if !landlock_or_skip("a_killed_clawsmith_leaves_no_process") {
        return;
    }
    for (index, signal) in ["KILL", "TERM", "HUP", "INT"].iter().enumerate() {
        let marker = format!("1010.{index}{}", std::process::id() % 1000);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "attack::a_killed_clawsmith_leaves_no_process",
                "--test-threads=1",
            ])
            .env("CLAWSMITH_ATTACK_CHILD", &marker)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Harness deadlines, not timing assertions: wait for the command to be running.
        let mut started = false;
        for _ in 0..500 {
            if survivors(&format!("sleep {marker}")).len() >= 3 {
                started = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(started, "{signal}: the command never started");
        let signal_number = nix::sys::signal::Signal::try_from(match *signal {
            "KILL" => libc::SIGKILL,
            "TERM" => libc::SIGTERM,
            "HUP" => libc::SIGHUP,
            _ => libc::SIGINT,
        })
        .unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal_number)
            .unwrap();
        let _ = child.wait();
        let mut left = survivors(&format!("sleep {marker}"));
        for _ in 0..250 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            left = survivors(&format!("sleep {marker}"));
        }
        assert!(left.is_empty(), "SIG{signal} to clawsmith left {left:?}");
    }
}

#[tokio::test]
async fn everyday_commands_still_work_inside() {
    if !landlock_or_skip("everyday_commands_still_work_inside") {
        return;
    }
    let fixture = Fixture::new();
    let ws = &fixture.workspace;
    std::fs::write(ws.join("Makefile"), "all:\n\techo made > made.txt\n").unwrap();
    std::fs::write(
        ws.join("test_unit.py"),
        "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self):\n        \
         self.assertEqual(1 + 1, 2)\n",
    )
    .unwrap();
    let config = fixture.config();
    let rows = [
        (
            "git init -q && git add Makefile && git -c user.name=t -c user.email=t@e.invalid \
             commit -qm one && git log --oneline | wc -l",
            "1\n",
        ),
        ("make -s && cat made.txt", "made\n"),
        ("/usr/bin/python3 -m unittest -q 2>&1 | tail -1", "OK\n"),
        ("printf 'b\\na\\n' | sort | head -1", "a\n"),
        (
            "set -m; sleep 0.1 & wait; echo jobs-ok",
            "[1]+  Done                    sleep 0.1\njobs-ok\n",
        ),
        (
            "/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); \
             s.listen(); c=socket.create_connection(s.getsockname()); print(\"loopback-ok\")'",
            "loopback-ok\n",
        ),
        (
            "echo t > /tmp/t && cat /tmp/t && echo s > /dev/shm/s && cat /dev/shm/s",
            "t\ns\n",
        ),
        ("echo x > /dev/null && head -c 3 /dev/zero | wc -c", "3\n"),
    ];
    for (command, expected) in rows {
        let outcome = run(&config, command, Some(Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(outcome.output, expected, "{command}");
        assert_eq!(
            outcome.exit,
            clawsmith_sandbox::ExitKind::Code(0),
            "{command}"
        );
    }
}

/// Many commands at once from a multi-threaded runtime: each gets its own namespaces and view,
/// every one finishes with its own output, and no descriptor of this process leaks per command.
#[test]
fn concurrent_commands_stay_apart() {
    if !landlock_or_skip("concurrent_commands_stay_apart") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let fixture = Fixture::new();
    let config = fixture.config();
    let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    // Warm up once so lazily created process-wide descriptors (the lifeline) exist.
    runtime.block_on(run(&config, "true", None)).unwrap();
    let before = open_fds();
    let outputs = runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for index in 0..40 {
            let config = config.clone();
            tasks.spawn(async move {
                let script = format!("echo {index} > /tmp/mine; sleep 0.05; cat /tmp/mine");
                (
                    index,
                    run(&config, &script, Some(Duration::from_secs(60))).await,
                )
            });
        }
        let mut outputs = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            outputs.push(joined.unwrap());
        }
        outputs
    });
    assert_eq!(outputs.len(), 40);
    for (index, outcome) in outputs {
        let outcome = outcome.unwrap();
        // Each command's /tmp is its own: it reads back what it wrote, not a neighbour's.
        assert_eq!(outcome.output, format!("{index}\n"));
    }
    // A descriptor leaked per command would show as 40 more. The only descriptors that may
    // legitimately appear are a new prepared view's (three each, at most eight views cached):
    // one is built whenever the host's description changes meanwhile — a unix socket bound or
    // removed by any other process on the machine changes what the view must cover.
    let after = open_fds();
    assert!(
        after < before + 40,
        "descriptors leaked: {before} before, {after} after 40 commands"
    );
}

/// The seccomp wall, row by row: each call the view cannot stop is refused with `EPERM`
/// (`ENOSYS` for `clone3`, so that libc falls back to the `clone` the filter can read). The
/// system call numbers are x86_64's.
#[cfg(target_arch = "x86_64")]
#[tokio::test]
async fn seccomp_refuses_what_the_view_cannot_stop() {
    if !landlock_or_skip("seccomp_refuses_what_the_view_cannot_stop") {
        return;
    }
    let fixture = Fixture::new();
    let script = r#"/usr/bin/python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, number, *args):
    rc = libc.syscall(number, *args)
    print(name, rc if rc >= 0 else os.strerror(ctypes.get_errno()))
call("unshare", 272, 0x10000000)          # CLONE_NEWUSER
call("keyctl", 250, 0)
call("add_key", 248, 0, 0, 0, 0, 0)
call("mount", 165, 0, 0, 0, 0, 0)
call("setns", 308, 0, 0)
call("bpf", 321, 0, 0, 0)
call("userfaultfd", 323, 0)
call("io_uring_setup", 425, 1, 0)
call("clone3", 435, 0, 0)
call("mknod", 133, b"dev", 0o20644, 0x0103)
PY"#;
    let outcome = run(&fixture.config(), script, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let expected = "unshare Operation not permitted\nkeyctl Operation not permitted\nadd_key \
                    Operation not permitted\nmount Operation not permitted\nsetns Operation not \
                    permitted\nbpf Operation not permitted\nuserfaultfd Operation not \
                    permitted\nio_uring_setup Operation not permitted\nclone3 Function not \
                    implemented\nmknod Operation not permitted\n";
    assert_eq!(outcome.output, expected);
    assert!(!fixture.workspace.join("dev").exists());
}

/// A workspace made read-only (`workspace_writable = false`, how plugin tools without
/// `filesystem.write` and language servers run): every kind of write inside it is refused by
/// the kernel — in the built view and in the host-view fallback (where seccomp refuses the
/// metadata calls Landlock does not govern) —, as root too, while reads, the private temp dir
/// and an extra writable root still work.
#[tokio::test]
async fn a_read_only_workspace_refuses_every_write() {
    if !landlock_or_skip("a_read_only_workspace_refuses_every_write") {
        return;
    }
    let fixture = Fixture::new();
    let ws = &fixture.workspace;
    std::fs::write(ws.join("keep.txt"), "kept\n").unwrap();
    std::fs::create_dir_all(ws.join("dir")).unwrap();
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    let cache = fixture.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let writes = [
        "echo x > new.txt",
        "echo x >> keep.txt",
        "rm keep.txt",
        "mv keep.txt moved.txt",
        "mkdir made",
        "rmdir dir",
        "chmod 777 keep.txt",
        "ln -s keep.txt link",
        "touch -d 2001-01-01 keep.txt",
        "echo x > .git/config",
        "python3 -c 'open(\"py.txt\", \"w\").write(\"x\")'",
    ];
    let host_view = KernelSupport {
        user_namespaces: false,
        ..KernelSupport::probe()
    };
    for kernel in [None, Some(host_view)] {
        let before = Outside::take(ws);
        let mut config = fixture.config();
        config.workspace_writable = false;
        config.extra_writable_roots = vec![cache.clone()];
        config.kernel_support = kernel;
        if kernel.is_some() {
            config.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
        }
        for script in writes {
            let outcome = run(&config, script, Some(Duration::from_secs(30)))
                .await
                .unwrap();
            assert_ne!(
                outcome.exit,
                clawsmith_sandbox::ExitKind::Code(0),
                "{script} succeeded in a read-only workspace ({kernel:?}): {}",
                outcome.output
            );
        }
        let after = Outside::take(ws);
        assert_eq!(
            before.files, after.files,
            "the workspace changed ({kernel:?})"
        );
        let cache_file = cache.join("c.txt");
        let script = format!(
            "cat keep.txt && t=${{TMPDIR:-/tmp}}/t && echo t > $t && cat $t && echo c > {}",
            cache_file.display()
        );
        let outcome = run(&config, &script, Some(Duration::from_secs(30)))
            .await
            .unwrap();
        assert_eq!(outcome.output, "kept\nt\n", "{kernel:?}");
        assert_eq!(outcome.exit, clawsmith_sandbox::ExitKind::Code(0));
        assert_eq!(std::fs::read_to_string(&cache_file).unwrap(), "c\n");
        std::fs::remove_file(&cache_file).unwrap();
    }
}

/// Commands reuse a prepared base view; what changed on the host since it was built must not
/// slip through it: a secret that appears afterwards, one deleted and made anew (a new inode the
/// old cover does not reach), and a new unix socket are all covered for the next command.
#[tokio::test]
async fn a_reused_view_still_covers_what_appeared_since() {
    if !landlock_or_skip("a_reused_view_still_covers_what_appeared_since") {
        return;
    }
    let fixture = Fixture::new();
    let home = fixture.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut config = fixture.config();
    config.home = Some(home.clone());
    let read_secrets = format!(
        "cat {home}/.aws/credentials {home}/.netrc 2>/dev/null; \
         [ -S {home}/agent.sock ] && echo socket-visible; echo done",
        home = home.display()
    );
    // A first command builds the base: nothing to hide yet.
    let outcome = run(&config, &read_secrets, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(outcome.output, "done\n");

    // A secret appears.
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "aws-secret\n").unwrap();
    std::fs::write(home.join(".netrc"), "netrc-secret\n").unwrap();
    let outcome = run(&config, &read_secrets, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(outcome.output, "done\n", "a new secret was readable");

    // Deleted and made anew: a new inode at the same path.
    std::fs::remove_dir_all(home.join(".aws")).unwrap();
    std::fs::remove_file(home.join(".netrc")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "aws-secret-2\n").unwrap();
    std::fs::write(home.join(".netrc"), "netrc-secret-2\n").unwrap();
    let outcome = run(&config, &read_secrets, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(outcome.output, "done\n", "a remade secret was readable");

    // A unix socket bound on the host after the base was built.
    let socket = std::os::unix::net::UnixListener::bind(home.join("agent.sock")).unwrap();
    let outcome = run(&config, &read_secrets, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(outcome.output, "done\n", "a new host socket was reachable");
    drop(socket);
}
