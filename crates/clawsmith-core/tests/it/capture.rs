//! Undo covers what commands change: each case runs one command through the core in
//! the kernel sandbox, checks that it changed the tree (or, for a command that nets nothing,
//! that it did not), then undoes the turn's files and compares the tree byte for byte, modes and
//! symlinks included, with what it was before the command.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use clawsmith_checkpoint::{ChangeKind, UndoOutcome, UndoScope};
use clawsmith_core::{BatchOptions, SessionHandle, TurnOptions};
use clawsmith_fs::Workspace;
use clawsmith_protocol::ToolStatus;
use clawsmith_security::{PermissionMode, PermissionPolicy};

use crate::support::*;

/// One entry of a tree as the tests compare it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File { content: Vec<u8>, mode: u32 },
    Link(std::path::PathBuf),
    Directory,
}

/// Everything under `root` except `.git` (git refreshes its index on a read).
fn tree(root: &Path) -> BTreeMap<String, Entry> {
    fn visit(root: &Path, directory: &Path, tree: &mut BTreeMap<String, Entry>) {
        for item in std::fs::read_dir(directory).unwrap() {
            let item = item.unwrap();
            let path = item.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if relative == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let entry = if meta.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                visit(root, &path, tree);
                Entry::Directory
            } else {
                Entry::File {
                    content: std::fs::read(&path).unwrap(),
                    mode: meta.permissions().mode() & 0o7777,
                }
            };
            tree.insert(relative, entry);
        }
    }
    let mut found = BTreeMap::new();
    visit(root, root, &mut found);
    found
}

fn undo_files(fixture: &Fixture, session: &SessionHandle, turn: &str) -> UndoOutcome {
    let workspace = Workspace::open(&fixture.workspace).unwrap();
    fixture
        .store
        .undo(session.id(), turn, UndoScope::Files, &workspace)
        .unwrap()
        .outcome
}

/// Whether this machine can build the command sandbox (user namespaces); says so when not.
fn sandbox_available() -> bool {
    let available = clawsmith_sandbox::KernelSupport::probe().user_namespaces;
    if !available {
        eprintln!("skipped: the command sandbox needs user namespaces, which this kernel refuses");
    }
    available
}

/// Files a case starts with: `(path, content)`.
type Files = &'static [(&'static str, &'static str)];

/// `(name, setup files, command, whether the command changes the tree)`.
const CASES: &[(&str, Files, &str, bool)] = &[
    (
        "sed -i",
        &[("a.txt", "one\ntwo\n")],
        "sed -i s/one/uno/ a.txt",
        true,
    ),
    ("echo > new", &[], "echo hello > new.txt", true),
    ("rm", &[("gone.txt", "bye\n")], "rm gone.txt", true),
    ("mv a b", &[("a", "content of a\n")], "mv a b", true),
    (
        "mkdir -p && touch",
        &[],
        "mkdir -p a/b && touch a/b/c",
        true,
    ),
    (
        "chmod +x",
        &[("run.sh", "#!/bin/sh\n")],
        "chmod +x run.sh",
        true,
    ),
    (
        "temp file nets nothing",
        &[("keep.txt", "kept\n")],
        "echo x > tmp.txt && rm tmp.txt",
        false,
    ),
    (
        "rewrite nets nothing",
        &[("same.txt", "same\n")],
        "cp same.txt other && mv other same.txt",
        false,
    ),
];

#[tokio::test]
async fn commands_are_undone_byte_for_byte() {
    if !sandbox_available() {
        return;
    }
    for (name, files, command, changes) in CASES {
        check(name, files, command, *changes).await;
    }
}

async fn check(name: &str, files: &[(&str, &str)], command: &str, changes: bool) {
    let fixture = Fixture::new();
    for (path, content) in files {
        fixture.write(path, content);
    }
    let session = fixture.full_session();
    let before = tree(&fixture.workspace);
    let (turn, _) = command_turn(&session, command).await;
    let after = tree(&fixture.workspace);
    assert_eq!(
        before != after,
        changes,
        "{name}: did the command change the tree?"
    );
    let changed = fixture.store.change_list(session.id(), &turn).unwrap();
    let real: Vec<_> = changed
        .iter()
        .filter(|change| change.kind != ChangeKind::Unchanged)
        .collect();
    assert_eq!(!real.is_empty(), changes, "{name}: change list {changed:?}");
    // Each change names the command that made it.
    for change in &real {
        assert_eq!(
            change.origin.as_deref(),
            Some(clawsmith_core::COMMAND_ORIGIN),
            "{name}"
        );
        assert_eq!(change.call_id.as_deref(), Some("c1"), "{name}");
    }
    assert_eq!(
        undo_files(&fixture, &session, &turn),
        UndoOutcome::Undone,
        "{name}"
    );
    assert_eq!(
        tree(&fixture.workspace),
        before,
        "{name}: undo restored the tree"
    );
}

#[tokio::test]
async fn a_generator_of_a_thousand_files_is_undone() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("keep.txt", "kept\n");
    let session = fixture.full_session();
    let before = tree(&fixture.workspace);
    let (turn, _) = command_turn(
        &session,
        "mkdir gen && for i in $(seq 1 1000); do echo \"file $i\" > gen/f$i.txt; done",
    )
    .await;
    assert_eq!(tree(&fixture.workspace).len(), before.len() + 1001);
    assert_eq!(
        fixture
            .store
            .change_list(session.id(), &turn)
            .unwrap()
            .len(),
        1000
    );
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), before);
}

#[tokio::test]
async fn git_checkout_of_a_file_is_undone() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("tracked.txt", "committed\n");
    // The test builds its repository itself; only the command under test runs in the sandbox.
    #[allow(clippy::disallowed_methods)]
    let git = |arguments: &[&str]| {
        let status = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(arguments)
            .current_dir(&fixture.workspace)
            .output()
            .unwrap();
        assert!(status.status.success(), "git {arguments:?}: {status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "tracked.txt"]);
    git(&["commit", "-q", "-m", "init"]);
    fixture.write(
        "tracked.txt",
        "work in progress the user had not committed\n",
    );
    let session = fixture.full_session();
    let before = tree(&fixture.workspace);
    let (turn, _) = command_turn(&session, "git checkout -- tracked.txt").await;
    assert_eq!(fixture.read("tracked.txt"), "committed\n");
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), before);
}

#[tokio::test]
async fn a_user_edit_after_the_command_makes_undo_refuse_and_change_nothing() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "one\n");
    fixture.write("b.txt", "bee\n");
    let session = fixture.full_session();
    let (turn, _) = command_turn(&session, "sed -i s/one/uno/ a.txt && rm b.txt").await;
    fixture.write("a.txt", "the user's own edit\n");
    let edited = tree(&fixture.workspace);
    match undo_files(&fixture, &session, &turn) {
        UndoOutcome::Conflicts(conflicts) => {
            let paths: Vec<&str> = conflicts.iter().map(|c| c.path.as_str()).collect();
            assert_eq!(paths, ["a.txt"]);
        }
        other => panic!("expected conflicts, got {other:?}"),
    }
    assert_eq!(
        tree(&fixture.workspace),
        edited,
        "a refused undo changes nothing"
    );
}

#[tokio::test]
async fn later_commands_hash_only_what_changed_and_undo_in_order() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "1\n");
    let session = fixture.full_session();
    let start = tree(&fixture.workspace);
    let (first, _) = command_turn(&session, "echo 2 > a.txt").await;
    let middle = tree(&fixture.workspace);
    // A user edit between two commands is the second command's starting point.
    fixture.write("b.txt", "user\n");
    let with_user_file = tree(&fixture.workspace);
    let (second, _) = command_turn(&session, "echo 3 > a.txt && rm b.txt").await;
    assert_eq!(undo_files(&fixture, &session, &second), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), with_user_file);
    std::fs::remove_file(fixture.workspace.join("b.txt")).unwrap();
    assert_eq!(tree(&fixture.workspace), middle);
    assert_eq!(undo_files(&fixture, &session, &first), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), start);
}

#[tokio::test]
async fn ignored_paths_are_never_touched_by_undo() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write(".gitignore", "build/\n");
    fixture.write("src.txt", "source\n");
    let session = fixture.full_session();
    let (turn, content) = command_turn(&session,
        "mkdir -p target build && echo bin > target/out && echo obj > build/o && echo new > src.txt",
    )
    .await;
    // The result names what undo will not give back.
    for path in ["build/o", "target/out"] {
        let note = format!("[not captured for undo: {path}: ignored");
        assert!(content.contains(&note), "{path} not named in {content}");
    }
    assert!(!content.contains("src.txt"), "{content}");
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(fixture.read("src.txt"), "source\n");
    // Ignored outputs stay as the command left them.
    assert_eq!(fixture.read("target/out"), "bin\n");
    assert_eq!(fixture.read("build/o"), "obj\n");
}

/// `(command, whether the fixture starts with the link `link -> target.txt`)`.
const LINK_CASES: &[(&str, bool)] = &[
    ("ln -s target.txt link", false),
    ("ln -sfn other.txt link", true),
    ("rm link", true),
    ("rm link && echo now a file > link", true),
    ("rm target.txt && ln -s link target.txt", true),
    ("mkdir -p d/e && ln -s ../../target.txt d/e/up", false),
];

#[tokio::test]
async fn symlinks_a_command_makes_changes_or_removes_are_undone() {
    if !sandbox_available() {
        return;
    }
    for (command, with_link) in LINK_CASES {
        let fixture = Fixture::new();
        fixture.write("target.txt", "t\n");
        if *with_link {
            std::os::unix::fs::symlink("target.txt", fixture.workspace.join("link")).unwrap();
        }
        let session = fixture.full_session();
        let before = tree(&fixture.workspace);
        let (turn, content) = command_turn(&session, command).await;
        assert_ne!(tree(&fixture.workspace), before, "{command}");
        assert!(!content.contains("not captured"), "{command}: {content}");
        assert_eq!(
            undo_files(&fixture, &session, &turn),
            UndoOutcome::Undone,
            "{command}"
        );
        assert_eq!(
            tree(&fixture.workspace),
            before,
            "{command}: undo restored the tree"
        );
    }
}

#[tokio::test]
async fn a_file_where_the_command_left_a_link_makes_undo_refuse() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("target.txt", "target.txt");
    let session = fixture.full_session();
    let (turn, _) = command_turn(&session, "ln -s target.txt link").await;
    // The user replaces the link by a file holding the link's target: not what the turn left.
    std::fs::remove_file(fixture.workspace.join("link")).unwrap();
    fixture.write("link", "target.txt");
    let edited = tree(&fixture.workspace);
    assert!(matches!(
        undo_files(&fixture, &session, &turn),
        UndoOutcome::Conflicts(_)
    ));
    assert_eq!(tree(&fixture.workspace), edited);
}

#[tokio::test]
async fn a_file_over_the_content_limit_is_named_as_not_captured() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    let size = clawsmith_core::CAPTURE_CONTENT_LIMIT as usize + 1;
    std::fs::write(fixture.workspace.join("big.bin"), vec![b'x'; size]).unwrap();
    let session = fixture.full_session();
    let (_, content) = command_turn(&session, "echo y >> big.bin").await;
    assert!(
        content.contains("[not captured for undo: big.bin: larger than 8 MiB"),
        "{content}"
    );
}

/// The limit is configurable: with 1 KiB, a 2 KiB file a command changes is named, and undo of
/// the turn gives back the small file it also changed and leaves the large one alone.
#[tokio::test]
async fn the_content_limit_is_configurable() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("big.txt", &"b".repeat(2048));
    fixture.write("small.txt", "small\n");
    let session = fixture
        .core(|config| {
            config.policy = PermissionPolicy::new(PermissionMode::Full);
            config.capture_content_limit = 1024;
        })
        .open_session(None)
        .unwrap();
    let (turn, content) = command_turn(&session, "echo y >> big.txt && echo y >> small.txt").await;
    assert!(
        content.contains("[not captured for undo: big.txt: larger than 1 KiB"),
        "{content}"
    );
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    let read = |path: &str| std::fs::read_to_string(fixture.workspace.join(path)).unwrap();
    assert_eq!(read("small.txt"), "small\n");
    assert_eq!(read("big.txt"), format!("{}y\n", "b".repeat(2048)));
}

/// A plugin tool that may execute processes or write files (here it writes and deletes through
/// std, as the process it would run does): captured like `run_command`. One that may only read
/// is not (nothing to capture, no walk paid).
#[tokio::test]
async fn an_extension_tool_that_executes_processes_is_captured() {
    for (capabilities, captured) in [
        (vec![clawsmith_protocol::Capability::ProcessExecute], true),
        (vec![clawsmith_protocol::Capability::FilesystemWrite], true),
        (vec![clawsmith_protocol::Capability::FilesystemRead], false),
    ] {
        let fixture = Fixture::new();
        fixture.write("a.txt", "before\n");
        let workspace = fixture.workspace.clone();
        let mut tool = TestTool::read(
            "plugin_build",
            std::sync::Arc::new(move |_, _| {
                let workspace = workspace.clone();
                Box::pin(async move {
                    std::fs::write(workspace.join("a.txt"), "after\n").unwrap();
                    std::fs::write(workspace.join("generated.txt"), "new\n").unwrap();
                    clawsmith_protocol::ToolOutput::Text("built".to_owned())
                })
            }),
        );
        tool.risk = clawsmith_protocol::Risk::Execute;
        tool.concurrency_safe = false;
        tool.capabilities = clawsmith_protocol::CapabilityDeclaration::Declared(capabilities);
        let session = fixture
            .core(|config| {
                config.policy = PermissionPolicy::new(PermissionMode::Full);
                config.extension_tools.push(clawsmith_core::ExtensionTool {
                    source: "plugin".to_owned(),
                    tool: tool.shared(),
                    deferred: false,
                });
            })
            .open_session(None)
            .unwrap();
        let before = tree(&fixture.workspace);
        let sink = clawsmith_core::CollectingSink::new();
        let outcome = session
            .run_turn(vec![call("p1", "plugin_build", "{}")], &sink)
            .await
            .unwrap();
        assert_eq!(outcome.results[0].1.status(), ToolStatus::Success);
        let changes = fixture
            .store
            .change_list(session.id(), &outcome.turn_id)
            .unwrap();
        assert_eq!(changes.len(), if captured { 2 } else { 0 }, "{changes:?}");
        if captured {
            assert_eq!(
                undo_files(&fixture, &session, &outcome.turn_id),
                UndoOutcome::Undone
            );
            assert_eq!(tree(&fixture.workspace), before);
        }
    }
}

/// A core keeps a few sessions' manifests; a session whose manifest was dropped reads every file
/// again on its next command and is captured just the same.
#[tokio::test]
async fn a_session_whose_manifest_was_dropped_is_still_captured() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "one\n");
    let core = fixture.core(|config| config.policy = PermissionPolicy::new(PermissionMode::Full));
    let first = core.open_session(None).unwrap();
    command_turn(&first, "true").await;
    for index in 0..6 {
        let other = core.open_session(None).unwrap();
        command_turn(&other, &format!("echo {index} > other{index}.txt")).await;
    }
    let before = tree(&fixture.workspace);
    let (turn, _) = command_turn(&first, "sed -i s/one/uno/ a.txt && rm other0.txt").await;
    assert_eq!(undo_files(&fixture, &first, &turn), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), before);
}

/// A file the command moves out of the capture (here by ignoring it) is named and left alone;
/// the rest of the turn still undoes (a half-known change must not make undo refuse or delete).
#[tokio::test]
async fn a_file_that_becomes_ignored_is_named_and_the_rest_undone() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write(".gitignore", "build/\n");
    fixture.write("a.txt", "one\n");
    let session = fixture.full_session();
    let (turn, content) =
        command_turn(&session, "echo a.txt >> .gitignore && echo two > a.txt").await;
    assert!(
        content.contains("[not captured for undo: a.txt: ignored"),
        "{content}"
    );
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(fixture.read(".gitignore"), "build/\n");
    assert_eq!(fixture.read("a.txt"), "two\n");
}

const CRASH_CHILD_ENV: &str = "CLAWSMITH_CAPTURE_CRASH_ROOT";
const CRASH_SESSION: &str = "capture-crash";

fn crash_core(
    root: &Path,
) -> (
    clawsmith_core::AgentCore,
    std::sync::Arc<clawsmith_checkpoint::Store>,
) {
    let store =
        std::sync::Arc::new(clawsmith_checkpoint::Store::open(root.join("state.db")).unwrap());
    let mut config = clawsmith_core::CoreConfig::new(root.join("workspace"), store.clone());
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    // The crash is the subject here, not the kernel sandbox (as in `crash.rs`).
    config.sandbox.policy = clawsmith_sandbox::SandboxPolicy::BestEffort;
    (clawsmith_core::AgentCore::new(config).unwrap(), store)
}

/// The child's side of the kill -9 test: runs when this test binary is re-executed with
/// `CRASH_CHILD_ENV` set (a no-op in a normal run). The command changes files, writes the
/// marker, then sleeps until the parent kills the whole process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_entry() {
    let Ok(root) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let (core, _store) = crash_core(Path::new(&root));
    let session = core.open_session(Some(CRASH_SESSION.into())).unwrap();
    let command = "sed -i s/alpha/ALPHA/ a.txt && rm b.txt && echo new > new.txt && \
                   chmod +x run.sh && mkdir -p gen/deep && echo g > gen/deep/g.txt && \
                   echo started > started && exec sleep 60";
    let arguments = serde_json::json!({ "command": command }).to_string();
    session
        .run_turn(
            vec![call("cmd-1", "run_command", &arguments)],
            &clawsmith_core::NullSink,
        )
        .await
        .unwrap();
    panic!("the child should have been killed before the turn ended");
}

/// kill -9 of the process while a command that already changed files runs: reopening the
/// session closes the call `interrupted` (as for any call) and records the command's changes
/// from the manifest noted before it started, so `undo files` puts the tree back.
#[test]
fn a_command_killed_with_its_process_is_undone_after_reopening() {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(workspace.join("b.txt"), "beta\n").unwrap();
    std::fs::write(workspace.join("run.sh"), "#!/bin/sh\n").unwrap();
    let before = tree(&workspace);
    #[allow(clippy::disallowed_methods)] // Tests may spawn; the child is this test binary.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "capture::crash_child_entry",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CRASH_CHILD_ENV, root.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let marker = workspace.join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited before the command ran: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_ne!(tree(&workspace), before, "the command changed the tree");

    let (core, store) = crash_core(root.path());
    let session = core.open_session(Some(CRASH_SESSION.into())).unwrap();
    let recovery = session.recovery().clone();
    assert_eq!(recovery.interrupted, ["cmd-1"]);
    let mut recorded = recovery.command_changes.clone();
    recorded.sort();
    assert_eq!(
        recorded,
        [
            "a.txt",
            "b.txt",
            "gen/deep/g.txt",
            "new.txt",
            "run.sh",
            "started"
        ]
    );
    let turn = store.checkpoints(CRASH_SESSION).unwrap()[0].turn_id.clone();
    for change in store.change_list(CRASH_SESSION, &turn).unwrap() {
        assert_eq!(
            change.origin.as_deref(),
            Some(clawsmith_core::COMMAND_ORIGIN)
        );
        assert_eq!(change.call_id.as_deref(), Some("cmd-1"));
    }
    // A second open finds nothing left to record.
    let again = core.open_session(Some(CRASH_SESSION.into())).unwrap();
    assert!(again.recovery().command_changes.is_empty());
    let undo = store
        .undo(
            CRASH_SESSION,
            &turn,
            UndoScope::Files,
            &Workspace::open(&workspace).unwrap(),
        )
        .unwrap();
    assert_eq!(undo.outcome, UndoOutcome::Undone);
    assert_eq!(tree(&workspace), before, "undo put the tree back");
}

/// One core, one session, many commands (a long-lived host): from the core's second command on
/// the capture refreshes from the workspace watch's events instead of passing over the tree, and
/// every command is still undone byte for byte — with a user edit before each command, a folder
/// moved and written in, and undo's own writes between commands.
#[tokio::test]
async fn a_long_lived_core_refreshes_from_events_and_undoes_every_command() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "one\ntwo\n");
    fixture.write("gone.txt", "bye\n");
    fixture.write("run.sh", "#!/bin/sh\n");
    fixture.write("dir/x", "x\n");
    fixture.write("target/cache", "c\n");
    let core = fixture.core(|config| config.policy = PermissionPolicy::new(PermissionMode::Full));
    let session = core.open_session(None).unwrap();
    command_turn(&session, "true").await;
    let commands = [
        ("sed -i s/one/uno/ a.txt", true),
        ("echo hello > new.txt", true),
        ("rm gone.txt", true),
        ("mv a.txt b.txt", true),
        ("mkdir -p m/n && touch m/n/c", true),
        ("chmod +x run.sh", true),
        ("ln -s b.txt link", true),
        ("cp -r dir copy && mv copy moved && echo y > moved/y", true),
        // `moved` is not a new directory (same inode as `dir`): only the directory sets before
        // and after say the command made it.
        ("mv dir moved && echo y > moved/y", true),
        ("for i in 1 2 3; do echo $i > gen$i.rs; done", true),
        ("echo x > tmp.txt && rm tmp.txt", false),
    ];
    for (index, (command, changes)) in commands.into_iter().enumerate() {
        // A user edit before each command: the command starts from it, undo keeps it.
        fixture.write(&format!("user{index}.txt"), "user\n");
        fixture.write("notes.txt", &format!("edited by the user {index}\n"));
        let before = tree(&fixture.workspace);
        let (turn, _) = command_turn(&session, command).await;
        assert_eq!(before != tree(&fixture.workspace), changes, "{command}");
        assert_eq!(
            undo_files(&fixture, &session, &turn),
            UndoOutcome::Undone,
            "{command}"
        );
        assert_eq!(tree(&fixture.workspace), before, "{command}: undo restored");
    }
    let passes = core.capture_passes();
    // The first command passes over the tree before and after; the second watches it with
    // one more full pass; every later refresh comes from events.
    assert_eq!(passes.full, 3, "{passes:?}");
    assert_eq!(passes.from_events, 2 * 12 - 3, "{passes:?}");
}

/// A core in full mode whose `start_command` runs in a command service over the fixture's
/// workspace (logs beside it), and that service.
fn core_with_background_commands(
    fixture: &Fixture,
) -> (
    std::sync::Arc<clawsmith_sandbox::CommandExecutionService>,
    clawsmith_core::AgentCore,
) {
    let sandbox = clawsmith_sandbox::SandboxConfig::new(
        &fixture.workspace,
        clawsmith_sandbox::StateDir::NotKept,
    );
    let service = std::sync::Arc::new(
        clawsmith_sandbox::CommandExecutionService::new(clawsmith_sandbox::ServiceConfig::new(
            sandbox,
            fixture.dir.path().join("logs"),
        ))
        .unwrap(),
    );
    let core = fixture.core(|config| {
        config.policy = PermissionPolicy::new(PermissionMode::Full);
        config.command_service = Some(service.clone());
    });
    (service, core)
}

/// Background commands: what one changes is recorded at the session's next capture point — here
/// the beginning of the next turn, after it ended — as a change of that turn whose call is the
/// background command's id, and `undo files` of that turn gives it back. One that ends within
/// its own turn is recorded as that turn finishes, the folder it made with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_command_is_captured_at_the_next_turn_and_undone() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("edited.txt", "before\n");
    let (service, core) = core_with_background_commands(&fixture);
    let session = core.open_session(None).unwrap();
    let start = tree(&fixture.workspace);
    let arguments = serde_json::json!({
        "command": "sleep 0.3; echo made > made.txt; echo after > edited.txt"
    })
    .to_string();
    let sink = clawsmith_core::CollectingSink::new();
    let first = session
        .run_turn(vec![call("s1", "start_command", &arguments)], &sink)
        .await
        .unwrap();
    let result = &first.results[0].1;
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    let started: serde_json::Value = serde_json::from_str(&result.content).unwrap();
    let command_id = started["commandId"].as_str().unwrap().to_owned();
    let ended = service
        .wait(&command_id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(ended.exit_code, Some(0), "{ended:?}");
    assert!(fixture.workspace.join("made.txt").exists());
    let (second, _) = command_turn(&session, "true").await;
    let changes = fixture.store.change_list(session.id(), &second).unwrap();
    let mut named: Vec<(&str, Option<&str>, Option<&str>)> = changes
        .iter()
        .map(|change| {
            (
                change.path.as_str(),
                change.origin.as_deref(),
                change.call_id.as_deref(),
            )
        })
        .collect();
    named.sort_unstable();
    assert_eq!(
        named,
        vec![
            ("edited.txt", Some("command"), Some(command_id.as_str())),
            ("made.txt", Some("command"), Some(command_id.as_str())),
        ]
    );
    assert!(
        fixture
            .store
            .change_list(session.id(), &first.turn_id)
            .unwrap()
            .is_empty(),
        "the first turn ended before the command wrote"
    );
    assert_eq!(undo_files(&fixture, &session, &second), UndoOutcome::Undone);
    assert_eq!(tree(&fixture.workspace), start);

    // One that ends within its own turn is recorded there, as the turn finishes.
    let mut turn = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let arguments = serde_json::json!({ "command": "mkdir quick && echo q > quick/q.txt" });
    let results = turn
        .run_batch(
            vec![call("s2", "start_command", &arguments.to_string())],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    let started: serde_json::Value = serde_json::from_str(&results[0].1.content).unwrap();
    let quick_id = started["commandId"].as_str().unwrap().to_owned();
    service
        .wait(&quick_id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    let third = turn.id().to_owned();
    turn.finish(&sink).unwrap();
    let changes = fixture.store.change_list(session.id(), &third).unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].path, "quick/q.txt");
    assert_eq!(changes[0].call_id.as_deref(), Some(quick_id.as_str()));
    assert_eq!(undo_files(&fixture, &session, &third), UndoOutcome::Undone);
    assert_eq!(
        tree(&fixture.workspace),
        start,
        "the folder it made went too"
    );
}

/// The directories a command made are recorded (absent before, present after) and undo removes
/// exactly those once empty: `mkdir -p` then a file in it, repeated in one session with the
/// commands started right after the turn (birth times alone, coarser than the turn's clock, left
/// them behind now and then), and folders a command renamed or made empty around a user's
/// folder, which stays.
#[tokio::test]
async fn directories_a_command_made_are_removed_by_undo_every_time() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("old/keep.txt", "k\n");
    let session = fixture.full_session();
    for round in 0..12 {
        let before = tree(&fixture.workspace);
        let command = format!(
            "mkdir -p a{round}/b/c && touch a{round}/b/c/f && mkdir -p old/new{round}/x && touch old/new{round}/x/g"
        );
        let (turn, _) = command_turn(&session, &command).await;
        let made = fixture
            .store
            .created_directories(session.id(), &turn)
            .unwrap();
        assert_eq!(
            made,
            [
                format!("a{round}"),
                format!("a{round}/b"),
                format!("a{round}/b/c"),
                format!("old/new{round}"),
                format!("old/new{round}/x"),
            ],
            "round {round}"
        );
        assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
        assert_eq!(tree(&fixture.workspace), before, "round {round}");
    }
    // A folder the user makes after the command is not the command's: it stays.
    let before = tree(&fixture.workspace);
    let (turn, _) = command_turn(&session, "mkdir made && echo x > made/f").await;
    std::fs::create_dir(fixture.workspace.join("made/users")).unwrap();
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert!(fixture.workspace.join("made/users").is_dir());
    std::fs::remove_dir_all(fixture.workspace.join("made")).unwrap();
    assert_eq!(tree(&fixture.workspace), before);
}

/// While a background command runs — and for the refresh after one that saw it running — the
/// capture passes over the whole tree instead of trusting the watch's events (its processes may
/// write through a mapping, which makes no event); then the events serve again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_background_command_runs_every_refresh_is_a_full_pass() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "a\n");
    let (service, core) = core_with_background_commands(&fixture);
    let session = core.open_session(None).unwrap();
    command_turn(&session, "true").await;
    command_turn(&session, "true").await;
    command_turn(&session, "true").await;
    let watched = core.capture_passes();
    assert!(watched.from_events >= 2, "{watched:?}");
    let sink = clawsmith_core::CollectingSink::new();
    let arguments = serde_json::json!({ "command": "sleep 30" }).to_string();
    let outcome = session
        .run_turn(vec![call("s1", "start_command", &arguments)], &sink)
        .await
        .unwrap();
    let started: serde_json::Value = serde_json::from_str(&outcome.results[0].1.content).unwrap();
    let command_id = started["commandId"].as_str().unwrap().to_owned();
    let before = core.capture_passes();
    command_turn(&session, "echo b > b.txt").await;
    let during = core.capture_passes();
    assert_eq!(during.from_events, before.from_events, "{during:?}");
    assert!(during.full > before.full, "{during:?}");
    service.cancel(&command_id).unwrap();
    service
        .wait(&command_id, std::time::Duration::from_secs(20))
        .await
        .unwrap();
    // The first refresh after one that saw it running is full too; later ones use the events.
    command_turn(&session, "true").await;
    command_turn(&session, "true").await;
    let after = core.capture_passes();
    assert!(after.from_events > during.from_events, "{after:?}");
}

/// A new core (a new process) starts from the workspace's last manifest in the store: what
/// changed between the processes is still seen with its own content, so undo of the new
/// process's command puts back the user's edit made in between, not the older content.
#[tokio::test]
async fn a_remembered_manifest_still_sees_what_changed_between_processes() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "one\n");
    fixture.write("keep/b.txt", "bee\n");
    // The first process: one command, which remembers the manifest.
    command_turn(&fixture.full_session(), "true").await;
    // Between the processes, the user edits a.txt (same size: only the stamp's times move)
    // and adds c.txt.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fixture.write("a.txt", "two\n");
    fixture.write("c.txt", "sea\n");
    // The second process: a fresh core on the same store. Before its command it reads only
    // what moved (a.txt, c.txt), not the unchanged keep/b.txt; after it, what the command
    // changed or removed (a.txt, c.txt, keep/b.txt).
    let core = fixture.core(|config| config.policy = PermissionPolicy::new(PermissionMode::Full));
    let session = core.open_session(None).unwrap();
    let (turn, _) =
        command_turn(&session, "sed -i s/two/agent/ a.txt && rm c.txt keep/b.txt").await;
    assert_eq!(core.capture_passes().files_read_or_gone, 2 + 3);
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(
        fixture.read("a.txt"),
        "two\n",
        "the user's edit, not the older content"
    );
    assert_eq!(fixture.read("c.txt"), "sea\n");
    assert_eq!(
        fixture.read("keep/b.txt"),
        "bee\n",
        "an unchanged file's kept content"
    );
}

/// A remembered manifest whose contents a prune freed is not trusted for them: those files are
/// read again, so their content is there for undo.
#[tokio::test]
async fn a_remembered_manifest_whose_contents_were_freed_reads_them_again() {
    if !sandbox_available() {
        return;
    }
    let fixture = Fixture::new();
    fixture.write("a.txt", "one\n");
    command_turn(&fixture.full_session(), "true").await;
    let root = fixture
        .workspace
        .canonicalize()
        .unwrap()
        .display()
        .to_string();
    let manifest = fixture.store.workspace_manifest(&root).unwrap().unwrap();
    // Every content no checkpoint refers to is freed (the manifest's included).
    let report = fixture
        .store
        .prune(
            &clawsmith_checkpoint::RetentionPolicy::default(),
            fixture.store.now_ms(),
            false,
        )
        .unwrap();
    assert!(report.blobs_removed > 0, "{report:?}");
    let sha = clawsmith_checkpoint::sha256(b"one\n");
    assert_eq!(fixture.store.stored_content(&sha).unwrap(), None);
    // The manifest itself is stored again (as another session's command would), so it is read
    // back while the contents it names are gone.
    fixture.store.store_contents(&[&manifest]).unwrap();
    assert!(fixture.store.workspace_manifest(&root).unwrap().is_some());
    let session = fixture.full_session();
    let (turn, _) = command_turn(&session, "sed -i s/one/two/ a.txt").await;
    assert_eq!(fixture.read("a.txt"), "two\n");
    assert_eq!(undo_files(&fixture, &session, &turn), UndoOutcome::Undone);
    assert_eq!(fixture.read("a.txt"), "one\n");
}
