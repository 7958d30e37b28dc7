//! A8 with real processes: a child process (this test binary, re-executed) is killed with
//! SIGKILL while `run_command` runs and while `edit_file` is between its write and its
//! completion. Reopening the session closes the call as `unknown` / `interrupted`, pairs every
//! call with one result, and re-runs nothing. A read killed before its records were committed
//! (they are written after it ran) leaves no trace of itself, nor of its turn; one
//! killed after its start was committed (it ran past the record window) is closed as
//! interrupted, with the other call of its parallel batch.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawsmith_checkpoint::{CheckpointRecorder, Store};
use clawsmith_core::{AgentCore, CoreConfig, ExtensionTool, NullSink};
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

/// A core whose `blocking_read` tool (effective risk `read`, concurrency-safe) writes the marker
/// and then never returns; a read's records wait for its close up to `window`.
fn read_core(layout: &Layout, store: Arc<Store>, window: Duration) -> AgentCore {
    let marker = layout.marker.clone();
    let blocking = TestTool::read(
        "blocking_read",
        Arc::new(move |_, _| {
            let marker = marker.clone();
            Box::pin(async move {
                std::fs::write(&marker, "reading").unwrap();
                std::future::pending::<()>().await;
                unreachable!("the read never returns")
            })
        }),
    );
    let mut config = CoreConfig::new(&layout.workspace, store);
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    config.sandbox.policy = SandboxPolicy::BestEffort;
    config.read_record_window = window;
    config.extension_tools.push(ExtensionTool {
        source: "test".into(),
        tool: blocking.shared(),
        deferred: false,
    });
    AgentCore::new(config).unwrap()
}

/// The calls of the read scenarios' second turn: a parallel batch (two concurrency-safe reads)
/// whose second call blocks, so neither is closed (a parallel batch closes its calls once all
/// have returned).
fn read_calls() -> Vec<clawsmith_protocol::ToolCall> {
    vec![
        call("read-1", "read_file", r#"{"path": "first.txt"}"#),
        call("slow-1", "blocking_read", "{}"),
    ]
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
            first_turn(&core, "call_0").await;
            let arguments =
                serde_json::json!({"command": "echo ran >> runs.txt; exec sleep 10"}).to_string();
            (core, vec![call("call_0", "run_command", &arguments)])
        }
        scenario @ ("read_in_window" | "read_past_window") => {
            let window = if scenario == "read_in_window" {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(20)
            };
            let core = read_core(&layout, store, window);
            first_turn(&core, "write-1").await;
            (core, read_calls())
        }
        other => panic!("unknown scenario {other}"),
    };
    let session = core.open_session(Some(SESSION.into())).unwrap();
    session.run_turn(calls, &NullSink).await.unwrap();
    panic!("the child should have been killed before the turn ended");
}

/// A first turn, committed whole: call `id` writes `first.txt`.
async fn first_turn(core: &AgentCore, id: &str) {
    let session = core.open_session(Some(SESSION.into())).unwrap();
    session
        .run_turn(
            vec![call(
                id,
                "write_file",
                r#"{"path": "first.txt", "content": "first turn"}"#,
            )],
            &NullSink,
        )
        .await
        .unwrap();
}

/// Re-executes this test binary as the child, waits for `marker`, kills it with SIGKILL.
fn run_and_kill(root: &Path, scenario: &str, marker: &Path) {
    run_and_kill_when(root, scenario, || marker.exists());
}

/// Re-executes this test binary as the child, waits until `ready`, kills it with SIGKILL.
fn run_and_kill_when(root: &Path, scenario: &str, ready: impl Fn() -> bool) {
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
    while !ready() {
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

/// Reopens the read scenarios' session after the kill: the first turn is whole, the history
/// paired and gap-free; returns the reopened session's events and recovery.
fn reopen_after_read(
    root: &Path,
) -> (
    Vec<clawsmith_protocol::Event>,
    clawsmith_core::RecoveryReport,
    Arc<Store>,
) {
    let layout = Layout::under(root);
    let store = Arc::new(Store::open(&layout.db).unwrap());
    let core = read_core(&layout, store.clone(), Duration::from_secs(3600));
    let session = core.open_session(Some(SESSION.into())).unwrap();
    let recovery = session.recovery().clone();
    assert_history_paired(&session.messages().unwrap());
    let events = session.events().unwrap();
    assert_sequences(&events);
    assert!(store.unfinished_calls(SESSION).unwrap().is_empty());
    // Nothing was re-run, and a second reopen finds nothing to do.
    assert_eq!(
        std::fs::read_to_string(layout.workspace.join("first.txt")).unwrap(),
        "first turn"
    );
    let again = core.open_session(Some(SESSION.into())).unwrap();
    assert!(again.recovery().is_empty());
    (events, recovery, store)
}

#[test]
fn killed_during_a_read_whose_records_were_not_committed_yet() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::under(root.path());
    std::fs::create_dir(&layout.workspace).unwrap();
    run_and_kill(root.path(), "read_in_window", &layout.marker);
    let (events, recovery, store) = reopen_after_read(root.path());
    // Neither read, nor their turn, left anything: the history is the first turn, whole.
    assert!(recovery.is_empty(), "{recovery:?}");
    let kinds: Vec<&str> = events.iter().map(|event| event.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "tool.started",
            "tool.completed",
            "turn.completed"
        ]
    );
    assert_eq!(completed(&events)[0].tool_call_id, "write-1");
    assert_eq!(store.messages(SESSION).unwrap().len(), 2);
    assert_eq!(store.checkpoints(SESSION).unwrap().len(), 1);
}

#[test]
fn killed_during_a_read_that_ran_past_its_record_window() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::under(root.path());
    std::fs::create_dir(&layout.workspace).unwrap();
    let db = layout.db.clone();
    let marker = layout.marker.clone();
    // Killed once the blocking read's start is committed (after the window).
    run_and_kill_when(root.path(), "read_past_window", || {
        marker.exists()
            && started_ids(&Store::open(&db).unwrap().events(SESSION).unwrap())
                .iter()
                .any(|id| id == "slow-1")
    });
    let (events, recovery, store) = reopen_after_read(root.path());
    assert_eq!(recovery.interrupted, ["read-1", "slow-1"]);
    assert!(recovery.never_ran.is_empty());
    assert_eq!(recovery.finished_turns.len(), 1);
    // Both calls of the batch were started once (committed together after the window) and
    // closed as interrupted; the first turn is untouched.
    let done = completed(&events);
    let statuses: Vec<(&str, ToolStatus)> = done
        .iter()
        .map(|done| (done.tool_call_id.as_str(), done.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("write-1", ToolStatus::Success),
            ("read-1", ToolStatus::Unknown),
            ("slow-1", ToolStatus::Unknown)
        ]
    );
    assert_eq!(started_ids(&events), ["write-1", "read-1", "slow-1"]);
    assert_eq!(store.checkpoints(SESSION).unwrap().len(), 2);
}
