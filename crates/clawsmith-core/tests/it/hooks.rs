//! Hooks: external command hooks (JSON in, decision out; every failure denies with its reason)
//! and the hook → permission → approver interplay.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_core::{
    ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, BatchOptions, CommandHook, Hook,
    HookFuture, TurnOptions,
};
use clawsmith_protocol::ToolStatus;
use clawsmith_security::{HookDecision, HookInput, HookVerdict, PermissionMode, PermissionPolicy};

use crate::support::*;

fn sh(name: &str, script: &str) -> CommandHook {
    CommandHook::new(name, "/bin/sh", vec!["-c".into(), script.into()])
}

/// (hook script, expected status, expected code, text the refusal must show)
#[tokio::test]
async fn command_hook_table() {
    let cases: &[(&str, ToolStatus, Option<&str>, &str)] = &[
        (
            r#"cat >/dev/null; echo '{"decision":"allow"}'"#,
            ToolStatus::Success,
            None,
            "",
        ),
        (
            r#"cat >/dev/null; echo '{"decision":"deny","reason":"not on fridays"}'"#,
            ToolStatus::Denied,
            Some("hook_denied"),
            "not on fridays",
        ),
        (
            r#"cat >/dev/null; echo 'oops' >&2; exit 3"#,
            ToolStatus::Denied,
            Some("hook_denied"),
            "exited with status 3: oops",
        ),
        (
            r#"cat >/dev/null; echo 'not json'"#,
            ToolStatus::Denied,
            Some("hook_denied"),
            "invalid output",
        ),
        (
            r#"cat >/dev/null; echo '{"decision":"maybe"}'"#,
            ToolStatus::Denied,
            Some("hook_denied"),
            "invalid output",
        ),
        (
            r#"cat >/dev/null; echo '{"decision":"allow","extra":1}'"#,
            ToolStatus::Denied,
            Some("hook_denied"),
            "invalid output",
        ),
        (
            "sleep 5",
            ToolStatus::Denied,
            Some("hook_denied"),
            "timed out",
        ),
        // ask without an approver: permission_denied.
        (
            r#"cat >/dev/null; echo '{"decision":"ask","reason":"check"}'"#,
            ToolStatus::Denied,
            Some("permission_denied"),
            "hook `h` asks: check",
        ),
    ];
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    for (script, status, code, shows) in cases {
        let hook = sh("h", script).with_timeout(Duration::from_millis(300));
        let session = fixture
            .core(|config| config.command_hooks.push(hook))
            .open_session(None)
            .unwrap();
        let result = one(&session, "read_file", r#"{"path": "a.txt"}"#).await;
        assert_status(&result, *status, *code);
        assert!(
            result.content.contains(shows),
            "{script}: {}",
            result.content
        );
    }
    let missing = CommandHook::new("gone", "/nonexistent/hook", vec![]);
    let session = fixture
        .core(|config| config.command_hooks.push(missing))
        .open_session(None)
        .unwrap();
    let result = one(&session, "read_file", r#"{"path": "a.txt"}"#).await;
    assert_status(&result, ToolStatus::Denied, Some("hook_denied"));
    assert!(result.content.contains("could not be started"));
}

/// The hook's input, as the hook saw it: the hook denies with its whole stdin as the reason.
#[tokio::test]
async fn command_hook_sees_normalized_facts() {
    let fixture = Fixture::new();
    let script = "python3 -c 'import json, sys; print(json.dumps({\"decision\": \"deny\", \
                  \"reason\": sys.stdin.read()}))'";
    let session = fixture
        .core(|config| {
            config.policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
            config.command_hooks.push(sh("spy", script));
        })
        .open_session(None)
        .unwrap();
    let result = one(
        &session,
        "write_file",
        r#"{"path": "n.txt", "content": "x"}"#,
    )
    .await;
    assert_status(&result, ToolStatus::Denied, Some("hook_denied"));
    let start = result.content.find("{\"").expect("the input in the reason");
    let input: serde_json::Value = serde_json::Deserializer::from_str(&result.content[start..])
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(input["toolName"], "write_file");
    assert_eq!(input["risk"], "workspace-write");
    assert_eq!(input["sideEffect"], true);
    assert_eq!(input["input"]["path"], "n.txt");
    assert!(
        input["capabilities"]
            .as_array()
            .unwrap()
            .contains(&"filesystem.write".into())
    );
    assert_eq!(input["sessionId"], session.id());
}

/// A hook runs confined by the core's hook profile: the state database is out of sight, the
/// workspace and everything outside it read-only. Each row is an attempt the
/// hook makes; it allows the call only when the attempt failed.
#[tokio::test]
async fn command_hooks_run_confined() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let attempts = [
        (
            "read the state database",
            format!("head -c 16 '{}'", fixture.db.display()),
        ),
        (
            "write the workspace",
            format!("echo x > '{}/planted'", fixture.workspace.display()),
        ),
    ];
    for (what, attempt) in attempts {
        let script = format!(
            "cat >/dev/null; if {attempt} >/dev/null 2>&1; then echo \
             '{{\"decision\":\"deny\",\"reason\":\"ESCAPED\"}}'; else echo '{{\"decision\":\"allow\"}}'; fi"
        );
        let session = fixture
            .core(|config| config.command_hooks.push(sh("jail", &script)))
            .open_session(None)
            .unwrap();
        let result = one(&session, "read_file", r#"{"path": "a.txt"}"#).await;
        assert_status(&result, ToolStatus::Success, None);
        assert!(
            !result.content.contains("ESCAPED"),
            "{what}: {}",
            result.content
        );
    }
    assert!(!fixture.workspace.join("planted").exists());
}

struct AskHook;

impl Hook for AskHook {
    fn name(&self) -> &str {
        "careful"
    }
    fn check<'a>(&'a self, _input: &'a HookInput) -> HookFuture<'a> {
        Box::pin(async {
            HookDecision {
                decision: HookVerdict::Ask,
                reason: Some("double-check".into()),
            }
        })
    }
}

struct Answer(ApprovalAnswer, std::sync::Mutex<Vec<ApprovalRequest>>);

impl Approver for Answer {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        self.1.lock().unwrap().push(request.clone());
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn ask_goes_to_the_approver() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    // A hook's ask escalates an allowed read to the approver, who approves.
    let approver = Arc::new(Answer(ApprovalAnswer::Approve, Default::default()));
    let session = fixture
        .core(|config| {
            config.hooks.push(Arc::new(AskHook));
            config.approver = Some(approver.clone());
        })
        .open_session(None)
        .unwrap();
    assert_status(
        &one(&session, "read_file", r#"{"path": "a.txt"}"#).await,
        ToolStatus::Success,
        None,
    );
    let asked = approver.1.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].reason.contains("double-check"));
    // The mode asks for a write; the approver declines.
    let approver = Arc::new(Answer(
        ApprovalAnswer::Decline("not now".into()),
        Default::default(),
    ));
    let session = fixture
        .core(|config| config.approver = Some(approver.clone()))
        .open_session(None)
        .unwrap();
    let result = one(
        &session,
        "write_file",
        r#"{"path": "n.txt", "content": "x"}"#,
    )
    .await;
    assert_status(&result, ToolStatus::Denied, Some("permission_denied"));
    assert!(result.content.contains("not now"));
    assert!(!fixture.workspace.join("n.txt").exists());
    // Approved writes run with an authorized context (S5) and reach the file.
    let approver = Arc::new(Answer(ApprovalAnswer::Approve, Default::default()));
    let session = fixture
        .core(|config| config.approver = Some(approver.clone()))
        .open_session(None)
        .unwrap();
    let result = one(
        &session,
        "write_file",
        r#"{"path": "n.txt", "content": "x"}"#,
    )
    .await;
    assert_status(&result, ToolStatus::Success, None);
    assert_eq!(fixture.read("n.txt"), "x");
}

struct Slow;

impl Approver for Slow {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        let _ = request;
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn a_pending_approval_is_stored_and_cancelling_the_turn_stops_waiting() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| config.approver = Some(Arc::new(Slow)));
    let session = core.open_session(None).unwrap();
    let sink = clawsmith_core::CollectingSink::new();
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let signal = running.cancellation();
    let store = fixture.store.clone();
    let id = session.id().to_owned();
    let watcher = tokio::spawn(async move {
        // Wait until the question is stored, then cancel.
        loop {
            if !store.pending_approvals(&id).unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let pending = store.pending_approvals(&id).unwrap();
        signal.cancel();
        pending
    });
    let results = running
        .run_batch(
            vec![call(
                "c1",
                "write_file",
                r#"{"path": "n.txt", "content": "x"}"#,
            )],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    let pending = watcher.await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, "c1");
    assert_eq!(pending[0].request["toolName"], "write_file");
    assert_status(&results[0].1, ToolStatus::Cancelled, Some("cancelled"));
    assert!(
        fixture
            .store
            .pending_approvals(session.id())
            .unwrap()
            .is_empty()
    );
    assert!(!fixture.workspace.join("n.txt").exists());
    running.finish(&sink).unwrap();
}
