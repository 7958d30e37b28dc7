//! Attacks on the file tools, as tables of inputs: special files in the walk, lost
//! updates, owner and mode, names that forge output, and paths that name a folder. Every refusal
//! also asserts that nothing on disk changed; every call that could hang runs under a deadline.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clawsmith_protocol::{ErrorCode, ToolStatus};
use serde_json::{Value, json};

use crate::support::{Fixture, Tools};

/// A call that has not returned by then hangs; the suite fails instead of sticking.
const DEADLINE: Duration = Duration::from_secs(30);

/// The size cap on an ignore file (mirrors the crate's constant, which is private).
const IGNORE_FILE_CAP: usize = 1024 * 1024;

/// Runs `call` on its own thread and fails the test if it has not returned by [`DEADLINE`].
fn within_deadline<T: Send + 'static>(what: &str, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(call());
    });
    match receiver.recv_timeout(DEADLINE) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not return within {DEADLINE:?}: it hangs")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

fn socket(path: &Path) {
    // The socket file stays after the listener is dropped.
    std::os::unix::net::UnixListener::bind(path).unwrap();
}

/// How one attack case sets up its workspace.
type Setup = fn(&Fixture);

/// Tool calls of one case: (input, expected content).
type Calls = Vec<(Value, String)>;

/// The tree every walk case starts from: a root `.gitignore` hiding `*.log`.
fn walk_fixture(setup: Setup) -> Fixture {
    let fixture = Fixture::new();
    fixture.write(".gitignore", "*.log\n");
    fixture.write("keep.txt", "needle\n");
    fixture.write("drop.log", "needle\n");
    fixture.write("sub/inner.txt", "needle\n");
    std::fs::write(fixture.outside.join("ignore-all"), "*\n").unwrap();
    setup(&fixture);
    fixture
}

/// The peak resident memory of this process so far (`VmHWM`), in KiB; nextest runs each test in
/// its own process, so it measures this test.
fn peak_memory_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// How much a walk over an attack tree may add to the peak memory (a `/dev/zero` read grew past
/// 1.5 GiB in three seconds).
const MEMORY_GROWTH_MAX_KIB: u64 = 128 * 1024;

/// Calls `tool` under the deadline, asserts success with `expected` content, bounded memory, and
/// that the workspace and the outside tree are unchanged.
fn check_walk(case: &str, setup: Setup, tool: &str, input: Value, expected: &str) {
    let fixture = walk_fixture(setup);
    let before = Fixture::snapshot(&fixture.base);
    let tools = Arc::new(Tools::new(&fixture));
    let (name, call_input) = (tool.to_owned(), input.clone());
    let peak_before = peak_memory_kib();
    let result = within_deadline(case, move || tools.call(&name, call_input));
    let growth = peak_memory_kib().saturating_sub(peak_before);
    assert!(
        growth < MEMORY_GROWTH_MAX_KIB,
        "{case}: peak memory grew by {growth} KiB"
    );
    assert_eq!(
        result.status(),
        ToolStatus::Success,
        "{case}: {}",
        result.content
    );
    assert_eq!(result.content, expected, "{case}: {tool} {input}");
    assert_eq!(
        Fixture::snapshot(&fixture.base),
        before,
        "{case} changed disk"
    );
}

/// Replaces the root `.gitignore` with what `make` puts there.
fn replace_gitignore(fixture: &Fixture, make: impl FnOnce(&Path)) {
    let path = fixture.ws.join(".gitignore");
    std::fs::remove_file(&path).unwrap();
    make(&path);
}

#[test]
fn special_ignore_files_never_block_the_walk() {
    let glob = || json!({"pattern": "**/*"});
    let search = || json!({"query": "needle"});
    let fifo_note = |name: &str| {
        format!("[skipped {name}: not a regular file (a FIFO); its ignore rules were not applied]")
    };
    let outside_note = "[skipped .gitignore: it leads outside the workspace; its ignore rules \
                        were not applied]";
    let all_hits = "drop.log:1: needle\nkeep.txt:1: needle\nsub/inner.txt:1: needle";
    // (case, setup, [(input, expected content)]): a pattern means glob_files, a query search_files.
    let cases: Vec<(&str, Setup, Calls)> = vec![
        (
            "fifo .gitignore",
            |f| replace_gitignore(f, mkfifo),
            vec![
                (
                    glob(),
                    format!(
                        "drop.log\nkeep.txt\nsub/inner.txt\n{}",
                        fifo_note(".gitignore")
                    ),
                ),
                (search(), format!("{all_hits}\n{}", fifo_note(".gitignore"))),
            ],
        ),
        (
            "fifo sub/.ignore",
            |f| mkfifo(&f.ws.join("sub/.ignore")),
            vec![
                (
                    glob(),
                    format!(
                        ".gitignore\nkeep.txt\nsub/inner.txt\n{}",
                        fifo_note("sub/.ignore")
                    ),
                ),
                (
                    search(),
                    format!(
                        "keep.txt:1: needle\nsub/inner.txt:1: needle\n{}",
                        fifo_note("sub/.ignore")
                    ),
                ),
            ],
        ),
        (
            "fifo .git/info/exclude",
            |f| {
                std::fs::create_dir_all(f.ws.join(".git/info")).unwrap();
                mkfifo(&f.ws.join(".git/info/exclude"));
            },
            vec![(
                glob(),
                format!(
                    ".gitignore\nkeep.txt\nsub/inner.txt\n{}",
                    fifo_note(".git/info/exclude")
                ),
            )],
        ),
        (
            ".gitignore -> /dev/zero",
            |f| {
                replace_gitignore(f, |path| {
                    std::os::unix::fs::symlink("/dev/zero", path).unwrap()
                })
            },
            vec![
                (
                    glob(),
                    format!("drop.log\nkeep.txt\nsub/inner.txt\n{outside_note}"),
                ),
                (search(), format!("{all_hits}\n{outside_note}")),
            ],
        ),
        (
            ".gitignore -> an outside file that ignores everything",
            |f| {
                replace_gitignore(f, |path| {
                    std::os::unix::fs::symlink("../outside/ignore-all", path).unwrap()
                })
            },
            vec![(
                glob(),
                format!("drop.log\nkeep.txt\nsub/inner.txt\n{outside_note}"),
            )],
        ),
        (
            "oversized sub/.gitignore",
            |f| f.write("sub/.gitignore", "#".repeat(IGNORE_FILE_CAP + 1)),
            vec![(
                json!({"pattern": "sub/*.txt"}),
                format!(
                    "sub/inner.txt\n[skipped sub/.gitignore: larger than {IGNORE_FILE_CAP} bytes; \
                     its ignore rules were not applied]"
                ),
            )],
        ),
        (
            "an ignore file linked inside the workspace is honoured",
            |f| {
                f.write("rules.txt", "inner.txt\n");
                f.symlink("../rules.txt", "sub/.gitignore");
            },
            vec![(glob(), ".gitignore\nkeep.txt\nrules.txt".to_owned())],
        ),
        (
            "fifo and socket among the walked files",
            |f| {
                mkfifo(&f.ws.join("pipe.txt"));
                socket(&f.ws.join("sub/sock.txt"));
            },
            vec![
                (
                    search(),
                    "keep.txt:1: needle\nsub/inner.txt:1: needle\n[skipped pipe.txt: not a \
                     regular file (a FIFO)]\n[skipped sub/sock.txt: not a regular file (a socket)]"
                        .to_owned(),
                ),
                (
                    json!({"pattern": "**/*.txt"}),
                    "keep.txt\nsub/inner.txt\n[skipped pipe.txt: not a regular file (a FIFO)]\n\
                     [skipped sub/sock.txt: not a regular file (a socket)]"
                        .to_owned(),
                ),
            ],
        ),
    ];
    for (case, setup, calls) in cases {
        for (input, expected) in calls {
            let tool = if input.get("pattern").is_some() {
                "glob_files"
            } else {
                "search_files"
            };
            check_walk(case, setup, tool, input, &expected);
        }
    }
}

#[test]
fn read_file_refuses_special_files_without_blocking() {
    let cases: [(&str, Setup, &str); 4] = [
        (
            "pipe",
            |f| mkfifo(&f.ws.join("pipe")),
            "Not a regular file: pipe",
        ),
        (
            "sock",
            |f| socket(&f.ws.join("sock")),
            "Not a regular file: sock",
        ),
        (
            "zero",
            |f| f.symlink("/dev/zero", "zero"),
            "Path is outside the workspace: zero",
        ),
        (
            "out",
            |f| f.symlink("../outside/secret.txt", "out"),
            "Path is outside the workspace: out",
        ),
    ];
    for (path, setup, expected) in cases {
        let fixture = Fixture::new();
        setup(&fixture);
        let before = Fixture::snapshot(&fixture.base);
        let tools = Arc::new(Tools::new(&fixture));
        let input = json!({"path": path});
        let message = within_deadline(path, move || tools.fails("read_file", input));
        assert_eq!(message, expected, "{path}");
        assert_eq!(Fixture::snapshot(&fixture.base), before, "{path}");
    }
}

#[test]
fn edits_racing_an_appender_lose_no_append() {
    const APPENDS: usize = 600;
    let fixture = Fixture::new();
    fixture.write("log.txt", "rev 0\n");
    let path = fixture.ws.join("log.txt");
    let done = Arc::new(AtomicBool::new(false));
    let appender = {
        let done = done.clone();
        std::thread::spawn(move || {
            for index in 0..APPENDS {
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                std::io::Write::write_all(&mut file, format!("append {index}\n").as_bytes())
                    .unwrap();
                drop(file);
                std::thread::sleep(Duration::from_micros(100));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let tools = Tools::new(&fixture);
    let (mut revision, mut refused) = (0usize, 0usize);
    while !done.load(Ordering::SeqCst) {
        let input = json!({
            "path": "log.txt",
            "oldText": format!("rev {revision}\n"),
            "newText": format!("rev {}\n", revision + 1),
        });
        let result = tools.call("edit_file", input);
        if result.status() == ToolStatus::Success {
            revision += 1;
            continue;
        }
        assert_eq!(
            result.content,
            "Error: log.txt changed while editing; read it again"
        );
        assert_eq!(result.code(), Some(&ErrorCode::TOOL_FAILED));
        assert_eq!(result.metadata.retryable, Some(true));
        refused += 1;
    }
    appender.join().unwrap();
    // Under load every racing edit may be refused; once the file is quiet an edit must go
    // through (a refusal then would be a false "changed while editing").
    let result = tools.call(
        "edit_file",
        json!({
            "path": "log.txt",
            "oldText": format!("rev {revision}\n"),
            "newText": format!("rev {}\n", revision + 1),
        }),
    );
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    revision += 1;
    let content = String::from_utf8(fixture.read("log.txt")).unwrap();
    let mut lines = content.lines();
    assert_eq!(lines.next(), Some(format!("rev {revision}").as_str()));
    // Appends that race the swap keep their bytes, not necessarily their order.
    let mut appended: Vec<String> = lines.map(str::to_owned).collect();
    appended.sort_by_key(|line| line["append ".len()..].parse::<usize>().unwrap());
    let expected: Vec<String> = (0..APPENDS)
        .map(|index| format!("append {index}"))
        .collect();
    assert_eq!(
        appended.len(),
        APPENDS,
        "{} of {APPENDS} appends lost ({revision} edits, {refused} refused)",
        APPENDS.saturating_sub(appended.len())
    );
    assert_eq!(appended, expected);
    assert!(fixture.temp_files().is_empty());
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn read_only_files_need_the_explicit_flag() {
    // (mode, allowReadOnly, expected refusal or None for success)
    let cases: [(u32, Option<bool>, Option<&str>); 5] = [
        (
            0o444,
            None,
            Some(
                "Cannot edit a.txt: it is read-only (mode 0444); pass allowReadOnly: true to edit it anyway",
            ),
        ),
        (
            0o555,
            Some(false),
            Some(
                "Cannot edit a.txt: it is read-only (mode 0555); pass allowReadOnly: true to edit it anyway",
            ),
        ),
        (0o444, Some(true), None),
        (0o644, None, None),
        (0o600, None, None),
    ];
    for (mode, allow, refusal) in cases {
        let fixture = Fixture::new();
        fixture.write("a.txt", "alpha\n");
        let file = fixture.ws.join("a.txt");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let before = Fixture::snapshot(&fixture.base);
        let tools = Tools::new(&fixture);
        let mut input = json!({"path": "a.txt", "oldText": "alpha", "newText": "beta"});
        if let Some(allow) = allow {
            input["allowReadOnly"] = json!(allow);
        }
        match refusal {
            Some(expected) => {
                assert_eq!(tools.fails("edit_file", input), expected, "{mode:o}");
                assert_eq!(Fixture::snapshot(&fixture.base), before, "{mode:o}");
            }
            None => {
                tools.ok("edit_file", input);
                assert_eq!(fixture.read("a.txt"), b"beta\n", "{mode:o}");
            }
        }
        assert_eq!(mode_of(&file), mode, "the mode is kept");
    }
}

/// Whether this process may chown files to other users (root in CI on this machine).
fn can_chown(fixture: &Fixture) -> bool {
    let probe = fixture.base.join("probe");
    std::fs::write(&probe, "").unwrap();
    let allowed = std::os::unix::fs::chown(&probe, Some(4321), Some(4321)).is_ok();
    std::fs::remove_file(probe).unwrap();
    allowed
}

#[test]
fn edits_keep_owner_group_and_mode() {
    let fixture = Fixture::new();
    if !can_chown(&fixture) {
        eprintln!("skipped: this process cannot chown to another user (needs root)");
        return;
    }
    // (mode, owner, group): the owner is kept, so the setuid and setgid bits may stay.
    let cases: [(u32, u32, u32); 4] = [
        (0o4755, 1234, 1234),
        (0o2755, 1234, 5678),
        (0o6750, 0, 5678),
        (0o640, 4321, 0),
    ];
    for (mode, owner, group) in cases {
        let fixture = Fixture::new();
        fixture.write("tool", "#!/bin/sh\necho old\n");
        let file = fixture.ws.join("tool");
        std::os::unix::fs::chown(&file, Some(owner), Some(group)).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let tools = Tools::new(&fixture);
        tools.ok(
            "edit_file",
            json!({"path": "tool", "oldText": "old", "newText": "new"}),
        );
        let metadata = std::fs::symlink_metadata(&file).unwrap();
        assert_eq!(fixture.read("tool"), b"#!/bin/sh\necho new\n");
        assert_eq!(
            (metadata.uid(), metadata.gid(), metadata.mode() & 0o7777),
            (owner, group, mode),
            "{mode:o} {owner}:{group}"
        );
    }
}

#[test]
fn control_characters_in_names_cannot_forge_lines() {
    let fixture = Fixture::new();
    let names = [
        "a\nfake.txt:1: needle",
        "b\rc.txt",
        "c1\u{9b}.txt",
        "del\u{7f}.txt",
        "esc\u{1b}[31m.txt",
        "ls\u{2028}.txt",
        "tab\t.txt",
    ];
    for name in names {
        fixture.write(name, "needle\n");
    }
    fixture.write("plain.txt", "needle \u{1b}[2J\r\u{7f} done\tnow\n");
    let tools = Tools::new(&fixture);
    let escaped = [
        "a\\nfake.txt:1: needle",
        "b\\rc.txt",
        "c1\\u{9b}.txt",
        "del\\x7f.txt",
        "esc\\x1b[31m.txt",
        "ls\\u{2028}.txt",
        "plain.txt",
        "tab\\t.txt",
    ];
    let glob = tools.ok("glob_files", json!({"pattern": "*"}));
    assert_eq!(glob, escaped.join("\n"));
    let search = tools.ok("search_files", json!({"query": "needle"}));
    let expected: Vec<String> = std::iter::once(escaped[0].to_owned())
        .chain(escaped.iter().map(|name| {
            if *name == "plain.txt" {
                "plain.txt:1: needle \\x1b[2J\\r\\x7f done\tnow".to_owned()
            } else {
                format!("{name}:1: needle")
            }
        }))
        .collect();
    assert_eq!(search, expected.join("\n"));
    assert_eq!(search.lines().count(), names.len() + 2);
    // Messages that name a path escape it too.
    assert_eq!(
        tools.fails("read_file", json!({"path": "no\nsuch\u{1b}"})),
        "File not found: no\\nsuch\\x1b"
    );
    assert_eq!(
        tools.ok("write_file", json!({"path": "new\r.txt", "content": "x"})),
        "Created new\\r.txt (1 bytes, 1 lines)."
    );
}

#[test]
fn paths_naming_a_folder_are_refused_and_change_nothing() {
    let folder = |path: &str| {
        format!(
            "Path names a folder, not a file: {path} (a trailing \"/\" or \"/.\" means a folder)"
        )
    };
    // (tool, input, the path it must refuse)
    let cases: [(&str, Value, &str); 8] = [
        (
            "write_file",
            json!({"path": "b.txt/", "content": "x"}),
            "b.txt/",
        ),
        (
            "write_file",
            json!({"path": "b.txt/.", "content": "x"}),
            "b.txt/.",
        ),
        (
            "write_file",
            json!({"path": "sub/c.txt//", "content": "x"}),
            "sub/c.txt//",
        ),
        (
            "edit_file",
            json!({"path": "a.txt/", "oldText": "alpha", "newText": "beta"}),
            "a.txt/",
        ),
        ("delete_file", json!({"path": "a.txt/"}), "a.txt/"),
        (
            "rename_file",
            json!({"from": "a.txt/", "to": "c.txt"}),
            "a.txt/",
        ),
        (
            "rename_file",
            json!({"from": "a.txt", "to": "c.txt/"}),
            "c.txt/",
        ),
        ("read_file", json!({"path": "a.txt/"}), "a.txt/"),
    ];
    for (tool, input, refused) in cases {
        let expected = folder(refused);
        let fixture = Fixture::new();
        fixture.write("a.txt", "alpha\n");
        std::fs::create_dir(fixture.ws.join("sub")).unwrap();
        let before = Fixture::snapshot(&fixture.base);
        let tools = Tools::new(&fixture);
        let result = tools.call(tool, input.clone());
        assert_eq!(
            result.code(),
            Some(&ErrorCode::INVALID_ARGUMENTS),
            "{tool} {input}"
        );
        assert_eq!(
            result.content.strip_prefix("Error: "),
            Some(expected.as_str()),
            "{tool} {input}"
        );
        assert_eq!(Fixture::snapshot(&fixture.base), before, "{tool} {input}");
    }
}

#[test]
fn compare_and_swap_refuses_any_change_since_the_read() {
    // (what another writer does between the read and the change)
    type Mutation = fn(&Path);
    let mutations: [(&str, Mutation); 5] = [
        ("append", |file| {
            let mut handle = std::fs::OpenOptions::new().append(true).open(file).unwrap();
            std::io::Write::write_all(&mut handle, b"more\n").unwrap();
        }),
        ("same-size rewrite", |file| {
            std::fs::write(file, "ALPHA\n").unwrap()
        }),
        ("replaced by another file", |file| {
            let other = file.with_extension("other");
            std::fs::write(&other, "alpha\n").unwrap();
            std::fs::rename(other, file).unwrap();
        }),
        ("mode changed", |file| {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).unwrap()
        }),
        ("deleted", |file| std::fs::remove_file(file).unwrap()),
    ];
    type Change = fn(
        &clawsmith_fs::Workspace,
        &clawsmith_fs::WorkspacePath,
        &clawsmith_fs::FileVersion,
    ) -> Result<(), clawsmith_fs::FsError>;
    let changes: [(&str, Change); 3] = [
        ("replace", |workspace, path, version| {
            workspace
                .replace_if_unchanged(path, version, b"new\n")
                .map(drop)
        }),
        ("remove", |workspace, path, version| {
            workspace.remove_if_unchanged(path, version)
        }),
        ("rename", |workspace, path, version| {
            let to = workspace.resolve("moved.txt").unwrap();
            workspace.rename_if_unchanged(path, version, &to)
        }),
    ];
    for (mutation, mutate) in mutations {
        for (change, apply) in changes {
            let fixture = Fixture::new();
            fixture.write("a.txt", "alpha\n");
            let workspace = fixture.workspace();
            let path = workspace.resolve("a.txt").unwrap();
            let (_, version) = workspace.read_versioned(&path, 1024).unwrap().unwrap();
            mutate(&fixture.ws.join("a.txt"));
            let before = Fixture::snapshot(&fixture.base);
            let error = apply(&workspace, &path, &version).unwrap_err();
            assert_eq!(
                error.to_string(),
                "a.txt changed while editing; read it again",
                "{mutation} then {change}"
            );
            assert_eq!(
                Fixture::snapshot(&fixture.base),
                before,
                "{mutation} then {change} wrote"
            );
        }
    }
}

/// Ignore files are now parsed from bytes read through the handle: git's syntax and precedence
/// still hold (deeper files win, `.ignore` over `.gitignore` over `.git/info/exclude`).
#[test]
fn ignore_rules_read_through_the_handle_keep_git_semantics() {
    // (files as (path, content), expected `glob_files **/*` output)
    let cases: [(&[(&str, &str)], &str); 6] = [
        (
            &[
                (".gitignore", "*.log\n"),
                ("sub/.gitignore", "!keep.log\n"),
                ("sub/keep.log", ""),
                ("sub/x.log", ""),
            ],
            ".gitignore\nsub/.gitignore\nsub/keep.log",
        ),
        (
            &[
                (".gitignore", "*.tmp\n"),
                (".ignore", "!a.tmp\n"),
                ("a.tmp", ""),
                ("b.tmp", ""),
            ],
            ".gitignore\n.ignore\na.tmp",
        ),
        (
            &[
                (".gitignore", "/top.txt\n"),
                ("top.txt", ""),
                ("sub/top.txt", ""),
            ],
            ".gitignore\nsub/top.txt",
        ),
        (
            &[
                (".gitignore", "build/\n"),
                ("build/out.txt", ""),
                ("sub/build", ""),
            ],
            ".gitignore\nsub/build",
        ),
        (
            &[
                (".git/info/exclude", "secret.txt\n"),
                ("secret.txt", ""),
                ("open.txt", ""),
            ],
            "open.txt",
        ),
        (
            &[
                (".gitignore", "\u{feff}# comment\r\n*.bak\r\n"),
                ("a.bak", ""),
                ("a.txt", ""),
            ],
            ".gitignore\na.txt",
        ),
    ];
    for (files, expected) in cases {
        let fixture = Fixture::new();
        for (path, content) in files {
            fixture.write(path, content);
        }
        let tools = Tools::new(&fixture);
        // The listing, without the note naming the ignored folders (tested in search.rs).
        let listed = tools.ok("glob_files", json!({"pattern": "**/*"}));
        let listed: Vec<&str> = listed
            .lines()
            .filter(|line| !line.starts_with("[ignored folders not searched: "))
            .collect();
        assert_eq!(listed.join("\n"), expected, "{files:?}");
    }
}
