//! A8 with real processes: a child process (this test binary, re-executed) is killed with
//! SIGKILL while `run_command` runs and while `edit_file` is between its write and its
//! completion. Reopening the session closes the call as `unknown` / `interrupted`, pairs every
//! call with one result, and re-runs nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawsmith_checkpoint::{CheckpointRecorder, Store};
use clawsmith_core::{AgentCore, CoreConfig, NullSink};
use clawsmith_fs::{ChangeOrigin, ChangeRecorder, PostState, PriorState, RecorderError};
use clawsmith_protocol::{EventPayload, Role, ToolStatus};
use clawsmith_sandbox::SandboxPolicy;
use clawsmith_security::{PermissionMode, PermissionPolicy};

use crate::support::*;

const CHILD_ENV: &str = "CLAWSMITH_CORE_CRASH_CHILD";
const SESSION: &str = "crash-session";

/// Paths shared by parent and child.
struct Layout {
    workspace: PathBuf,
    db: PathBuf,
    marker: PathBuf,
}

impl Layout {
    fn under(root: &Path) -> Layout {
        Layout {
            workspace: root.join("workspace"),
            db: root.join("state.db"),
            marker: root.join("marker"),
        }
    }
}

fn core_for(
    layout: &Layout,
    store: Arc<Store>,
    recorder: Option<Arc<dyn ChangeRecorder>>,
) -> AgentCore {
    let mut config = CoreConfig::new(&layout.workspace, store);
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    // The crash is the subject here, not the kernel sandbox.
    config.sandbox.policy = SandboxPolicy::BestEffort;
    config.change_recorder = recorder;
    AgentCore::new(config).unwrap()
}

/// Records like the checkpoint recorder, then — after the file was changed — announces it and
/// blocks forever, so the parent can kill the process mid-call.
struct BlockAfterChange {
    inner: CheckpointRecorder,
    marker: PathBuf,
}

impl ChangeRecorder for BlockAfterChange {
    fn before_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        prior: &PriorState,
    ) -> Result<(), RecorderError> {
        self.inner.before_change(origin, path, prior)
    }
    fn after_change(
        &self,
        origin: &ChangeOrigin,
        path: &str,
        post: &PostState,
    ) -> Result<(), RecorderError> {
        self.inner.after_change(origin, path, post)?;
        std::fs::write(&self.marker, "edited").unwrap();
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
}

/// The child's side: runs when the test binary is re-executed with `CHILD_ENV` set; a no-op in
/// a normal test run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    let root = PathBuf::from(std::env::var("CLAWSMITH_CORE_CRASH_ROOT").unwrap());
    let layout = Layout::under(&root);
    let store = Arc::new(Store::open(&layout.db).unwrap());
    let (core, calls) = match scenario.as_str() {
        "run_command" => {
            // `runs.txt` (inside the workspace, where commands may write) is also the marker.
            let arguments =
                serde_json::json!({"command": "echo ran >> runs.txt; exec sleep 10"}).to_string();
            (
                core_for(&layout, store, None),
                vec![call("cmd-1", "run_command", &arguments)],
            )
        }
        "edit_file" => {
            let recorder = BlockAfterChange {
                inner: CheckpointRecorder::new(store.clone()),
                marker: layout.marker.clone(),
            };
            (
                core_for(&layout, store, Some(Arc::new(recorder))),
                vec![
                    call(
                        "edit-1",
                        "edit_file",
                        r#"{"path": "counter.txt", "oldText": "count=1", "newText": "count=2"}"#,
                    ),
                    call(
                        "after-1",
                        "write_file",
                        r#"{"path": "after.txt", "content": "never"}"#,
                    ),
                ],
            )
        }
        "reused_id" => {
            // Providers number calls per turn: `call_0` again in the second turn, which is
            // killed while its command runs.
            let core = core_for(&layout, store, None);
            let session = core.open_session(Some(SESSION.into())).unwrap();
            session
                .run_turn(
                    vec![call(
                        "call_0",
                        "write_file",
                        r#"{"path": "first.txt", "content": "first turn"}"#,
                    )],
                    &NullSink,
                )
                .await
                .unwrap();
            let arguments =
                serde_json::json!({"command": "echo ran >> runs.txt; exec sleep 10"}).to_string();
            (core, vec![call("call_0", "run_command", &arguments)])
        }
        other => panic!("unknown scenario {other}"),
    };
    let session = core.open_session(Some(SESSION.into())).unwrap();
    session.run_turn(calls, &NullSink).await.unwrap();
    panic!("the child should have been killed before the turn ended");
}

/// Re-executes this test binary as the child, waits for `marker`, kills it with SIGKILL.
fn run_and_kill(root: &Path, scenario: &str, marker: &Path) {
    #[allow(clippy::disallowed_methods)] // Tests may spawn; the child is this test binary.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash::child_process_entry",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_ENV, scenario)
        .env("CLAWSMITH_CORE_CRASH_ROOT", root)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited before the marker appeared: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the child never reached the call"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// Reopens the session and checks the A8 promises; returns the reopened core's store.
fn reopen_and_check(root: &Path, interrupted_call: &str, never_ran: &[&str]) -> Arc<Store> {
    let layout = Layout::under(root);
    let store = Arc::new(Store::open(&layout.db).unwrap());
    let core = core_for(&layout, store.clone(), None);
    let session = core.open_session(Some(SESSION.into())).unwrap();
    let recovery = session.recovery().clone();
    assert_eq!(recovery.interrupted, [interrupted_call]);
    assert_eq!(recovery.never_ran, never_ran);
    assert_eq!(recovery.finished_turns.len(), 1);
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    let answer = messages
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(interrupted_call))
        .unwrap();
    let summary = answer.tool_result.as_ref().unwrap();
    assert_eq!(summary.status, ToolStatus::Unknown);
    assert_eq!(summary.code.as_ref().unwrap().as_str(), "interrupted");
    assert_eq!(summary.retryable, Some(false));
    assert!(answer.content.starts_with("Interrupted: "));
    // One start and one completion for the call; the journal is closed as unknown.
    let events = session.events().unwrap();
    assert_sequences(&events);
    let starts = events
        .iter()
        .filter(|e| matches!(&e.payload, EventPayload::ToolStarted(s) if s.tool_call_id == interrupted_call))
        .count();
    assert_eq!(starts, 1, "the call was started once and never replayed");
    let done: Vec<_> = completed(&events)
        .into_iter()
        .filter(|c| c.tool_call_id == interrupted_call)
        .collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status, ToolStatus::Unknown);
    assert!(store.unfinished_calls(SESSION).unwrap().is_empty());
    let journal = store.journal(SESSION).unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0].status, Some(ToolStatus::Unknown));
    // A second reopen finds nothing to do.
    let again = core.open_session(Some(SESSION.into())).unwrap();
    assert!(again.recovery().is_empty());
    assert_eq!(again.messages().unwrap().len(), messages.len());
    store
}

#[test]
fn killed_during_run_command() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::under(root.path());
    std::fs::create_dir(&layout.workspace).unwrap();
    run_and_kill(
        root.path(),
        "run_command",
        &layout.workspace.join("runs.txt"),
    );
    reopen_and_check(root.path(), "cmd-1", &[]);
    // The command ran once and was not replayed by the reopen.
    let runs = std::fs::read_to_string(layout.workspace.join("runs.txt")).unwrap();
    assert_eq!(runs, "ran\n");
}

#[test]
fn killed_during_edit_file() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::under(root.path());
    std::fs::create_dir(&layout.workspace).unwrap();
    std::fs::write(layout.workspace.join("counter.txt"), "count=1\n").unwrap();
    run_and_kill(root.path(), "edit_file", &layout.marker);
    let store = reopen_and_check(root.path(), "edit-1", &["after-1"]);
    // The edit happened once; the call after it never ran.
    assert_eq!(
        std::fs::read_to_string(layout.workspace.join("counter.txt")).unwrap(),
        "count=2\n"
    );
    assert!(!layout.workspace.join("after.txt").exists());
    // The interrupted turn's checkpoint was finished and still knows the file: undo works.
    let checkpoints = store.checkpoints(SESSION).unwrap();
    assert_eq!(checkpoints.len(), 1);
    assert_eq!(checkpoints[0].file_count, 1);
}

#[test]
fn killed_during_a_call_whose_id_an_earlier_turn_used() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::under(root.path());
    std::fs::create_dir(&layout.workspace).unwrap();
    run_and_kill(root.path(), "reused_id", &layout.workspace.join("runs.txt"));
    let store = Arc::new(Store::open(&layout.db).unwrap());
    let core = core_for(&layout, store.clone(), None);
    let session = core.open_session(Some(SESSION.into())).unwrap();
    assert_eq!(session.recovery().interrupted, ["call_0"]);
    let messages = session.messages().unwrap();
    assert_history_paired(&messages);
    // The first turn's answer is untouched; the second turn's call got the interrupted one,
    // naming the tool that was really running.
    let answers: Vec<_> = messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some("call_0"))
        .collect();
    assert_eq!(answers.len(), 2, "{answers:#?}");
    assert_eq!(
        answers[0].tool_result.as_ref().unwrap().status,
        ToolStatus::Success
    );
    let second = answers[1].tool_result.as_ref().unwrap();
    assert_eq!(second.status, ToolStatus::Unknown);
    assert!(
        answers[1].content.contains("run_command"),
        "{}",
        answers[1].content
    );
    // Each turn's call has exactly one completion, in its own turn.
    let events = session.events().unwrap();
    let done = completed(&events);
    let turns: Vec<_> = done.iter().map(|c| c.turn_id.clone()).collect();
    assert_eq!(done.len(), 2, "{done:#?}");
    assert_ne!(turns[0], turns[1], "one completion per turn");
    assert_eq!(done[1].status, ToolStatus::Unknown);
    assert_eq!(done[1].tool_name, "run_command");
    assert!(store.unfinished_calls(SESSION).unwrap().is_empty());
    let again = core.open_session(Some(SESSION.into())).unwrap();
    assert!(again.recovery().is_empty());
}
