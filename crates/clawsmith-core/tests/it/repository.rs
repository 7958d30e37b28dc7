//! Repositories survive commands: whatever spelling a command uses to delete or rewrite the
//! workspace's `.git`, undo of its turn leaves `git log` and `git status` as they were before it,
//! on a real repository with the command in the kernel sandbox. What the user changed in the
//! repository since is kept and named.

use std::path::Path;

use clawsmith_checkpoint::{UndoOutcome, UndoReport, UndoScope};
use clawsmith_core::SessionHandle;
use clawsmith_fs::Workspace;

use crate::support::*;

/// Host git in the workspace (the test's own set-up and checks, outside the sandbox).
#[allow(clippy::disallowed_methods)]
fn git(workspace: &Path, arguments: &[&str]) -> Result<String, String> {
    let output = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(arguments)
        .current_dir(workspace)
        .env("GIT_CEILING_DIRECTORIES", workspace.parent().unwrap())
        .output()
        .unwrap();
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// What a person looks at to tell a repository is intact.
#[derive(Debug, PartialEq, Eq)]
struct Looks {
    log: String,
    status: String,
    branches: String,
}

fn looks(workspace: &Path) -> Result<Looks, String> {
    Ok(Looks {
        log: git(workspace, &["log", "--all", "--format=%H %s"])?,
        status: git(workspace, &["status", "--porcelain=v1", "--branch"])?,
        branches: git(workspace, &["branch", "-v"])?,
    })
}

/// A repository with two commits (the second packed away with `gc`, so objects live both in a
/// pack and loose) and an uncommitted edit.
fn repository(fixture: &Fixture) {
    let workspace = &fixture.workspace;
    git(workspace, &["init", "-q", "-b", "main"]).unwrap();
    fixture.write("src/lib.rs", "pub fn one() {}\n");
    git(workspace, &["add", "-A"]).unwrap();
    git(workspace, &["commit", "-qm", "first"]).unwrap();
    git(workspace, &["gc", "-q"]).unwrap();
    fixture.write("README.md", "# project\n");
    git(workspace, &["add", "-A"]).unwrap();
    git(workspace, &["commit", "-qm", "second"]).unwrap();
    git(workspace, &["branch", "feature"]).unwrap();
    fixture.write("src/lib.rs", "pub fn one() {}\npub fn two() {}\n");
}

fn undo(fixture: &Fixture, session: &SessionHandle, turn: &str) -> UndoReport {
    let workspace = Workspace::open(&fixture.workspace).unwrap();
    fixture
        .store
        .undo(session.id(), turn, UndoScope::Files, &workspace)
        .unwrap()
}

fn sandbox_available() -> bool {
    let available = clawsmith_sandbox::KernelSupport::probe().user_namespaces;
    if !available {
        eprintln!("skipped: the command sandbox needs user namespaces, which this kernel refuses");
    }
    available
}

/// A fresh workspace holding [`repository`], how it looks, and a `full`-mode session on it;
/// `None` where the kernel cannot run the command sandbox.
fn set_up() -> Option<(Fixture, Looks, SessionHandle)> {
    if !sandbox_available() {
        return None;
    }
    let fixture = Fixture::new();
    repository(&fixture);
    let before = looks(&fixture.workspace).unwrap();
    let session = fixture.full_session();
    Some((fixture, before, session))
}

/// Spellings of "destroy the repository" that no rule names (`full` mode runs them), each with
/// what it leaves: the repository is unusable after every one.
const DESTROYERS: &[&str] = &[
    "python3 -c 'import shutil; shutil.rmtree(\".git\", ignore_errors=True)'",
    "x=.git; python3 -c 'import shutil, sys; shutil.rmtree(sys.argv[1], True)' $x; git init -q -b other; true",
    "cd .git && rm -rf objects refs HEAD packed-refs index logs",
    "d=.g; d=${d}it; rm -f $d/HEAD $d/refs/heads/* $d/objects/pack/*",
    "for f in .git/objects/*/* .git/objects/pack/*; do chmod u+w \"$f\"; : > \"$f\"; done; python3 -c 'import os; os.remove(\".git/HEAD\")'",
];

#[tokio::test]
async fn a_repository_a_command_destroys_is_whole_again_after_undo() {
    for command in DESTROYERS {
        let Some((fixture, before, session)) = set_up() else {
            return;
        };
        let (turn, content) = command_turn(&session, command).await;
        assert!(
            looks(&fixture.workspace).is_err_and(|error| !error.is_empty()),
            "{command}: the repository still works, so the case tests nothing"
        );
        assert!(
            !content.contains("[not captured for undo: .git"),
            "{command}: the repository is kept, so its paths are not named as lost: {content}"
        );
        let report = undo(&fixture, &session, &turn);
        assert_eq!(report.outcome, UndoOutcome::Undone, "{command}");
        assert!(report.repository.kept.is_empty(), "{command}: {report:?}");
        assert!(
            report.restored.iter().any(|path| path == ".git/HEAD"),
            "{command}: {report:?}"
        );
        assert_eq!(
            looks(&fixture.workspace).as_ref(),
            Ok(&before),
            "{command}: {report:?}"
        );
        git(&fixture.workspace, &["fsck", "--full", "--strict"])
            .unwrap_or_else(|error| panic!("{command}: fsck: {error}"));
    }
}

#[tokio::test]
async fn a_commit_a_command_made_is_undone_with_its_branch() {
    let Some((fixture, before, session)) = set_up() else {
        return;
    };
    let (turn, _) = command_turn(
        &session,
        "git -c user.name=agent -c user.email=a@a -c commit.gpgsign=false commit -qam agent \
         && git branch -qD feature",
    )
    .await;
    let after = looks(&fixture.workspace).unwrap();
    assert!(after.log.contains(" agent\n"), "{after:?}");
    assert!(!after.branches.contains("feature"), "{after:?}");
    let report = undo(&fixture, &session, &turn);
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert!(report.repository.kept.is_empty(), "{report:?}");
    assert_eq!(looks(&fixture.workspace).unwrap(), before, "{report:?}");
}

#[tokio::test]
async fn what_the_user_changed_in_the_repository_since_is_kept_and_named() {
    let Some((fixture, _, session)) = set_up() else {
        return;
    };
    let (turn, _) = command_turn(
        &session,
        "git -c user.name=agent -c user.email=a@a -c commit.gpgsign=false commit -qam agent",
    )
    .await;
    // The user commits on top of the agent's commit before undoing the turn.
    git(
        &fixture.workspace,
        &["commit", "-q", "--allow-empty", "-m", "user"],
    )
    .unwrap();
    let head = git(&fixture.workspace, &["rev-parse", "HEAD"]).unwrap();
    let report = undo(&fixture, &session, &turn);
    assert_eq!(report.outcome, UndoOutcome::Undone);
    let kept: Vec<&str> = report
        .repository
        .kept
        .iter()
        .map(|(path, _)| path.as_str())
        .collect();
    assert!(kept.contains(&".git/refs/heads/main"), "{report:?}");
    assert!(
        report
            .repository
            .kept
            .iter()
            .all(|(_, reason)| reason.contains("changed since")),
        "{report:?}"
    );
    assert_eq!(
        git(&fixture.workspace, &["rev-parse", "HEAD"]).unwrap(),
        head,
        "the user's commit stays where the user put it"
    );
    git(&fixture.workspace, &["fsck", "--full"]).unwrap();
}

#[tokio::test]
async fn undo_twice_and_a_second_command_chain_newest_first() {
    let Some((fixture, before, session)) = set_up() else {
        return;
    };
    let (first, _) = command_turn(
        &session,
        "git -c user.name=agent -c user.email=a@a -c commit.gpgsign=false commit -qam agent",
    )
    .await;
    let (_second, _) = command_turn(&session,
        "python3 -c 'import shutil; shutil.rmtree(\".git/refs\"); import os; os.remove(\".git/HEAD\")'",
    )
    .await;
    assert!(looks(&fixture.workspace).is_err());
    // Undoing the first turn rewinds both, newest first: the refs come back, then the commit
    // is undone.
    let report = undo(&fixture, &session, &first);
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert!(report.repository.kept.is_empty(), "{report:?}");
    assert_eq!(looks(&fixture.workspace).unwrap(), before);
    // A second undo finds every row already undone and changes nothing.
    let again = undo(&fixture, &session, &first);
    assert_eq!(again.outcome, UndoOutcome::AlreadyUndone);
    assert!(again.repository.is_empty());
    assert_eq!(looks(&fixture.workspace).unwrap(), before);
}

#[tokio::test]
async fn objects_are_mirrored_once_beside_the_database() {
    let Some((fixture, _, session)) = set_up() else {
        return;
    };
    command_turn(&session, "true").await;
    let mut mirror = fixture.db.as_os_str().to_owned();
    mirror.push(clawsmith_checkpoint::REPOSITORY_MIRROR_SUFFIX);
    let mirror = std::path::PathBuf::from(mirror);
    let mut mirrored = Vec::new();
    let mut stack = vec![mirror.clone()];
    while let Some(directory) = stack.pop() {
        for entry in std::fs::read_dir(&directory).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                mirrored.push(entry.path());
            }
        }
    }
    let packs = mirrored
        .iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "pack"))
        .count();
    assert_eq!(packs, 1, "{mirrored:?}");
    assert!(mirrored.len() > 3, "loose objects too: {mirrored:?}");
    // Copies, not links: truncating the workspace's object leaves the kept one whole.
    use std::os::unix::fs::MetadataExt;
    for path in &mirrored {
        let meta = std::fs::metadata(path).unwrap();
        assert_eq!(meta.nlink(), 1, "{path:?} is linked");
        assert!(meta.len() > 0, "{path:?}");
    }
    // Private: the mirror folder is the database's owner's alone.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&mirror).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

#[tokio::test]
async fn an_object_written_in_place_is_put_back() {
    let Some((fixture, before, session)) = set_up() else {
        return;
    };
    let (turn, _) = command_turn(
        &session,
        "for f in .git/objects/pack/*.pack; do chmod u+w \"$f\" && : > \"$f\"; done",
    )
    .await;
    let packs: Vec<u64> = std::fs::read_dir(fixture.workspace.join(".git/objects/pack"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "pack"))
        .map(|path| std::fs::metadata(path).unwrap().len())
        .collect();
    assert_eq!(packs, [0], "the command truncated the pack in place");
    assert!(looks(&fixture.workspace).is_err());
    let report = undo(&fixture, &session, &turn);
    assert_eq!(report.outcome, UndoOutcome::Undone);
    assert_eq!(report.repository.objects_restored, 1, "{report:?}");
    assert_eq!(looks(&fixture.workspace).unwrap(), before);
    git(&fixture.workspace, &["fsck", "--full", "--strict"]).unwrap();
}
