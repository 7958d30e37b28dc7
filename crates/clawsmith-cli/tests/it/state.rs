//! The state directory at rest and the trust placed in it, through the
//! real binary: private modes whatever the umask, looser ones tightened, secrets masked before
//! they reach any file, nothing read from or written through a directory, configuration or
//! symlink another user could have planted, and undo writing only where it is told.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::mcp::Server;
use crate::{Fixture, Run};

/// A GitHub token and an AWS key pair: the detector's shapes (`ghp_…`, `AKIA…`, a secret-named
/// key).
const GITHUB_TOKEN: &str = "ghp_Zq8Lm2Xv7Rt4Np1Ks9Wd3Fh6Jb5Gc0Ya2Ue7Qo";
const AWS_KEY_ID: &str = "AKIAZ7QW3ER5TY8UI0PL";
const AWS_SECRET: &str = "wJalrXUtnFEMIK7MDENGbPxRfiCYz9q8v4b3n2m1";
const SECRETS: [&str; 3] = [GITHUB_TOKEN, AWS_KEY_ID, AWS_SECRET];

/// `clawsmith --state-dir <state> ARGS` run under `umask 000`.
fn run_umask_zero(f: &Fixture, args: &[&str], stdin: &str) -> Run {
    let mut full = vec![
        "-c",
        "umask 000 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_clawsmith"),
        "--state-dir",
    ];
    let state = f.state();
    full.push(state.to_str().unwrap());
    full.extend_from_slice(args);
    let output = Command::new("sh")
        .args(&full)
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(stdin.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Every path under `dir` (not following links), with its mode bits.
fn tree(dir: &Path) -> Vec<(PathBuf, u32, bool)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                pending.push(path.clone());
            }
            found.push((path, metadata.mode() & 0o7777, metadata.is_dir()));
        }
    }
    found
}

/// Every byte of the database (its WAL included) except the blob store's rows: undo needs the
/// exact bytes a turn replaced, or that a command might change (the core keeps the files of its
/// workspace manifest before a command runs), so those rows are the one place a secret may be.
fn database_without_blobs(database: &Path, scratch: &Path) -> Vec<u8> {
    let copy = scratch.join("inspected.db");
    let _ = std::fs::remove_file(&copy);
    let backup = Command::new("sqlite3")
        .arg(database)
        .arg(format!(".backup {}", copy.display()))
        .status()
        .unwrap();
    assert!(backup.success());
    let emptied = Command::new("sqlite3")
        .arg(&copy)
        .arg("DELETE FROM blobs; VACUUM;")
        .status()
        .unwrap();
    assert!(emptied.success());
    std::fs::read(&copy).unwrap()
}

/// Lets another uid walk down to the state directory, so only its own modes keep them out.
fn open_parents(f: &Fixture) {
    std::fs::set_permissions(f.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `cat path` as uid/gid 65534; whether it could read the file.
fn readable_by_nobody(path: &Path) -> bool {
    Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "cat",
        ])
        .arg(path)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn state_is_private_and_free_of_secrets_whatever_the_umask() {
    let f = Fixture::new();
    open_parents(&f);
    std::fs::write(
        f.ws().join(".env"),
        format!("GITHUB_TOKEN={GITHUB_TOKEN}\nAWS_ACCESS_KEY_ID={AWS_KEY_ID}\n"),
    )
    .unwrap();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let echo = json!({"command": format!("echo TOKEN={GITHUB_TOKEN}; echo aws_secret_access_key={AWS_SECRET}")}).to_string();
    let search = json!({"query": GITHUB_TOKEN}).to_string();
    let refused =
        json!({"path": "leak.txt", "content": format!("key {AWS_KEY_ID} secret={AWS_SECRET}")})
            .to_string();
    let turn = json!([{"id": "c1", "name": "read_file", "arguments": json!({"path": format!("missing-{AWS_KEY_ID}")}).to_string()}]).to_string();
    // (what, arguments, stdin, whether the live answer shows the secret to the model)
    let runs: Vec<(&str, Vec<&str>, &str, bool)> = vec![
        (
            "a read of .env",
            vec!["call", "--workspace", ws, "read_file", r#"{"path":".env"}"#],
            "",
            true,
        ),
        (
            "a command's output",
            vec![
                "call",
                "--workspace",
                ws,
                "--mode",
                "full",
                "--sandbox",
                "best-effort",
                "run_command",
                &echo,
            ],
            "",
            true,
        ),
        (
            "arguments of a search",
            vec!["call", "--workspace", ws, "search_files", &search],
            "",
            false,
        ),
        (
            "arguments of a refused call",
            vec![
                "call",
                "--workspace",
                ws,
                "--mode",
                "read-only",
                "write_file",
                &refused,
            ],
            "",
            false,
        ),
        (
            "a turn's arguments",
            vec!["turn", "--workspace", ws, "--session", "s"],
            &turn,
            false,
        ),
    ];
    for (what, args, stdin, shown_live) in &runs {
        let run = run_umask_zero(&f, args, stdin);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        if *shown_live {
            // The model still reads what the tool returned; only what is stored is masked.
            assert!(run.stdout.contains(GITHUB_TOKEN), "{what}: {}", run.stdout);
        }
    }
    // A long-lived server's background command, its log, and a clean disconnect.
    let mut server = Server::start(&f, &["--mode", "full", "--sandbox", "best-effort"]);
    let started = server.call(
        "start_command",
        json!({"command": format!("echo TOKEN={GITHUB_TOKEN}")}),
    );
    assert_eq!(started["isError"], false, "{started}");
    // While the server runs: the database with its -wal and -shm, and the command log.
    let state = f.state();
    let logs = state.join("commands").join(server.child.id().to_string());
    let modes = |files: &[(PathBuf, u32, bool)]| {
        for (path, mode, is_dir) in files {
            let wanted = if *is_dir { 0o700 } else { 0o600 };
            assert_eq!(*mode, wanted, "{} has mode {mode:04o}", path.display());
        }
    };
    // The command's log, once its output is in, holds the masked line and not the token.
    let log = logs.join("cmd-1.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("TOKEN=")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no output in {}",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("TOKEN=[REDACTED]") && !logged.contains(GITHUB_TOKEN),
        "{logged}"
    );
    let running = tree(&state);
    for name in ["clawsmith.db-wal", "clawsmith.db-shm", "cmd-1.log"] {
        assert!(
            running.iter().any(|(path, ..)| path.ends_with(name)),
            "{name}: {running:?}"
        );
    }
    assert!(logs.is_dir());
    modes(&running);
    assert_eq!(
        std::fs::metadata(&state).unwrap().mode() & 0o7777,
        0o700,
        "the state directory"
    );
    let status = server.close();
    assert!(status.success(), "{status:?}");
    let files = tree(&state);
    modes(&files);
    for (path, _, is_dir) in &files {
        if !is_dir {
            let bytes = if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("clawsmith.db"))
            {
                database_without_blobs(&state.join("clawsmith.db"), f.dir.path())
            } else {
                std::fs::read(path).unwrap()
            };
            for secret in SECRETS {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{secret} is readable in {}",
                    path.display()
                );
            }
            assert!(
                !readable_by_nobody(path),
                "another uid reads {}",
                path.display()
            );
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(state.join("commands"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(
        leftovers.is_empty(),
        "command logs left behind: {leftovers:?}"
    );
    // What is served is derived from what is stored: the legacy `output` of `tool.completed` is
    // the (masked) tool message, not a second copy.
    let show = f.run(&["--json", "session", "show", "s"], "").json();
    let output = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["type"] == "tool.completed")
        .map(|event| event["output"].clone())
        .unwrap();
    let message = show["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .map(|message| message["content"].clone())
        .unwrap();
    assert!(!message.as_str().unwrap().is_empty());
    assert_eq!(output, message);
}

#[test]
fn looser_existing_state_is_tightened_with_a_notice() {
    let f = Fixture::new();
    let seed = f.call(&[], "read_file", r#"{"path":"a.txt"}"#);
    assert_eq!(seed["status"], "success");
    let state = f.state();
    // (path, looser mode it is given, mode expected after the next command)
    let cases = [
        (state.clone(), 0o755, 0o700),
        (state.join("clawsmith.db"), 0o644, 0o600),
        (state.join("locks"), 0o755, 0o700),
    ];
    for (path, loose, _) in &cases {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(*loose)).unwrap();
    }
    let run = f.try_call(&[], "read_file", r#"{"path":"a.txt"}"#);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for (path, loose, wanted) in &cases {
        let mode = std::fs::metadata(path).unwrap().mode() & 0o7777;
        assert_eq!(mode, *wanted, "{}", path.display());
        let notice = format!(
            "tightened {} from {loose:04o} to {wanted:04o}",
            path.display()
        );
        assert!(
            run.stderr.contains(&notice),
            "{notice} missing: {}",
            run.stderr
        );
    }
}

/// What a hostile state directory looks like, and the words the refusal must contain.
struct Hostile {
    what: &'static str,
    plant: fn(&Fixture, &Path),
    refusal: &'static [&'static str],
}

/// A configuration whose "server" would leave `marker` behind if it were ever started.
fn planted_config(marker: &Path) -> String {
    format!(
        "[[mcp_servers]]\nname = \"evil\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"touch {}\"]\n",
        marker.display()
    )
}

fn chown_nobody(path: &Path) {
    std::os::unix::fs::lchown(path, Some(65534), Some(65534)).unwrap();
}

#[test]
fn a_state_dir_or_config_another_user_could_plant_is_refused() {
    let cases = [
        Hostile {
            what: "state dir owned by another user, with a configuration",
            plant: |f, marker| {
                std::fs::create_dir(f.state()).unwrap();
                std::fs::write(f.state().join("clawsmith.toml"), planted_config(marker)).unwrap();
                chown_nobody(&f.state().join("clawsmith.toml"));
                chown_nobody(&f.state());
            },
            refusal: &["owned by uid 65534", "not by you"],
        },
        Hostile {
            what: "state dir writable by the group",
            plant: |f, _| {
                std::fs::create_dir(f.state()).unwrap();
                std::fs::set_permissions(f.state(), std::fs::Permissions::from_mode(0o770))
                    .unwrap();
            },
            refusal: &["group or others can write", "chmod go-w"],
        },
        Hostile {
            what: "state dir under a directory anyone can rename it out of",
            plant: |f, _| {
                let open = f.dir.path().join("open");
                std::fs::create_dir(&open).unwrap();
                std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
                std::fs::create_dir(open.join("state")).unwrap();
                std::os::unix::fs::symlink(open.join("state"), f.state()).unwrap();
            },
            refusal: &["writable by everyone without the sticky bit", "/open"],
        },
        Hostile {
            what: "configuration owned by another user",
            plant: |f, marker| {
                std::fs::create_dir(f.state()).unwrap();
                std::fs::write(f.state().join("clawsmith.toml"), planted_config(marker)).unwrap();
                chown_nobody(&f.state().join("clawsmith.toml"));
            },
            refusal: &["clawsmith.toml", "owned by uid 65534"],
        },
        Hostile {
            what: "configuration writable by others",
            plant: |f, marker| {
                std::fs::create_dir(f.state()).unwrap();
                let config = f.state().join("clawsmith.toml");
                std::fs::write(&config, planted_config(marker)).unwrap();
                std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
            },
            refusal: &["clawsmith.toml", "group or others can write"],
        },
        Hostile {
            what: "the database is a symlink",
            plant: |f, marker| {
                std::fs::create_dir(f.state()).unwrap();
                std::fs::write(marker.with_extension("target"), "someone else's file\n").unwrap();
                std::os::unix::fs::symlink(
                    marker.with_extension("target"),
                    f.state().join("clawsmith.db"),
                )
                .unwrap();
            },
            refusal: &["clawsmith.db", "symlink"],
        },
        Hostile {
            what: "the configuration is a symlink",
            plant: |f, marker| {
                std::fs::create_dir(f.state()).unwrap();
                std::fs::write(marker.with_extension("target"), planted_config(marker)).unwrap();
                std::os::unix::fs::symlink(
                    marker.with_extension("target"),
                    f.state().join("clawsmith.toml"),
                )
                .unwrap();
            },
            refusal: &["clawsmith.toml", "symlink"],
        },
    ];
    for case in cases {
        let f = Fixture::new();
        let marker = f.dir.path().join("planted-server-ran");
        (case.plant)(&f, &marker);
        let target = marker.with_extension("target");
        let target_before = std::fs::read(&target).ok();
        let run = f.try_call(&[], "read_file", r#"{"path":"a.txt"}"#);
        assert_eq!(run.code, 1, "{}: {}", case.what, run.stdout);
        for words in case.refusal {
            assert!(
                run.stderr.contains(words),
                "{}: {words:?} not in {}",
                case.what,
                run.stderr
            );
        }
        assert!(!marker.exists(), "{}: the planted server ran", case.what);
        assert_eq!(std::fs::read(&target).ok(), target_before, "{}", case.what);
    }
}

#[test]
fn an_explicit_config_must_be_trusted_too() {
    let f = Fixture::new();
    let marker = f.dir.path().join("planted-server-ran");
    let config = f.dir.path().join("other.toml");
    std::fs::write(&config, planted_config(&marker)).unwrap();
    chown_nobody(&config);
    let ws = f.ws();
    let run = f.run(
        &[
            "call",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "read_file",
            r#"{"path":"a.txt"}"#,
        ],
        "",
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("owned by uid 65534"), "{}", run.stderr);
    assert!(!marker.exists());
}

#[test]
fn a_symlink_planted_at_a_command_log_path_is_refused_not_followed() {
    let f = Fixture::new();
    let outside = f.dir.path().join("outside.txt");
    std::fs::write(&outside, "precious\n").unwrap();
    let mut server = Server::start(&f, &["--mode", "full", "--sandbox", "best-effort"]);
    let logs = f
        .state()
        .join("commands")
        .join(server.child.id().to_string());
    assert!(logs.is_dir(), "{}", logs.display());
    for id in 0..4 {
        std::os::unix::fs::symlink(&outside, logs.join(format!("cmd-{id}.log"))).unwrap();
    }
    let started = server.call("start_command", json!({"command": "echo overwritten"}));
    assert_eq!(started["isError"], true, "{started}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious\n");
    server.close();
    assert!(
        !logs.exists(),
        "the server's log directory is removed when it ends"
    );
}

#[test]
fn undo_writes_only_in_the_workspace_it_is_given() {
    let f = Fixture::new();
    let ws = f.ws();
    let calls = json!([{"id": "e1", "name": "edit_file", "arguments": json!({"path": "a.txt", "oldText": "beta", "newText": "BETA"}).to_string()}]);
    let turn = f.turn(&["--mode", "full", "--session", "s"], &calls);
    assert_eq!(turn.code, 0, "{}", turn.stderr);
    let turn_id = turn.lines().pop().unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A copy of the workspace elsewhere, holding exactly what the turn left.
    let copy = f.dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for name in ["a.txt", "b.txt"] {
        std::fs::copy(ws.join(name), copy.join(name)).unwrap();
    }
    let run = f.run(
        &[
            "undo",
            "files",
            &turn_id,
            "--workspace",
            copy.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(run.code, 1, "{}", run.stdout);
    let canonical = ws.canonicalize().unwrap();
    assert!(
        run.stderr
            .contains(&format!("works in {}", canonical.display()))
            && run.stderr.contains("--workspace"),
        "{}",
        run.stderr
    );
    assert_eq!(crate::read(&copy.join("a.txt")), "alpha\nBETA\n");
    assert_eq!(crate::read(&ws.join("a.txt")), "alpha\nBETA\n");
    let undo = f.undo(true, &["files", &turn_id]);
    assert_eq!(undo.json()["outcome"], "undone", "{}", undo.stderr);
    assert_eq!(crate::read(&ws.join("a.txt")), "alpha\nbeta\n");
}

#[test]
fn turn_input_is_capped_and_refused_arguments_are_stored_bounded() {
    use std::io::Write;
    let f = Fixture::new();
    let ws = f.ws();
    // (stdin size, whether the turn runs) around the documented 16 MiB cap.
    let huge = json!({"path": "big.txt", "content": "x".repeat(3 << 20)}).to_string();
    let refused = json!([{"id": "big", "name": "write_file", "arguments": huge}]).to_string();
    let over = " ".repeat((16 << 20) + 1);
    for (stdin, runs) in [(refused.as_str(), true), (over.as_str(), false)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
            .arg("--state-dir")
            .arg(f.state())
            .args([
                "turn",
                "--mode",
                "read-only",
                "--session",
                "s",
                "--workspace",
            ])
            .arg(&ws)
            .env_remove("CLAWSMITH_STATE_DIR")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut pipe = child.stdin.take().unwrap();
        let bytes = stdin.as_bytes().to_vec();
        // The refusal closes stdin early: the rest of the write fails, as it should.
        let writer = std::thread::spawn(move || drop(pipe.write_all(&bytes)));
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if runs {
            assert!(output.status.success(), "{stderr}");
        } else {
            assert_eq!(output.status.code(), Some(1));
            assert!(stderr.contains("more than 16 MiB"), "{stderr}");
        }
    }
    let show = f.run(&["--json", "session", "show", "s"], "").json();
    let stored = show["messages"][0]["toolCalls"][0]["arguments"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        stored.len() <= clawsmith_checkpoint::MAX_STORED_ARGUMENT_BYTES + 100,
        "{} bytes stored",
        stored.len()
    );
    assert!(
        stored.ends_with("bytes]"),
        "{}",
        &stored[stored.len() - 80..]
    );
    assert!(!f.ws().join("big.txt").exists());
}
