//! `delegate_worktree` and `worktree_apply` over a real git repository in /var/tmp, the scripted
//! provider, real tools (the child's commands in the sandbox) and a real SQLite store.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use clawsmith_agent::fixture::{RecordedRequest, Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::subagent::{SubagentConfig, Subagents};
use clawsmith_agent::worktree::WorktreeConfig;
use clawsmith_agent::{Provider, ProviderKind, RunOptions, RunOutcome, StopReason, run_task};
use clawsmith_core::checkpoint::{Store, UndoScope};
use clawsmith_core::security::{PermissionMode, PermissionPolicy, ProtectedPaths};
use clawsmith_core::{
    AgentCore, BatchOptions, CollectingSink, CoreConfig, SessionHandle, TurnOptions,
};
use clawsmith_protocol::{EventPayload, ToolStatus};
use serde_json::Value;

use crate::support::provider;

/// A git repository with a commit, then uncommitted changes: a tracked file changed, an
/// untracked file, an ignored file.
struct Repo {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
    store: Arc<Store>,
}

fn git(dir: &Path, args: &[&str]) -> String {
    // Tests set up their repository with the real git.
    #[allow(clippy::disallowed_methods)]
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn repo() -> Repo {
    let dir = tempfile::Builder::new()
        .prefix("clawsmith-worktree-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = dir.path().join("ws");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    git(&ws, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(ws.join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(ws.join("b.txt"), "gamma\n").unwrap();
    std::fs::write(ws.join(".gitignore"), "*.log\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "--quiet", "-m", "first"]);
    std::fs::write(ws.join("b.txt"), "gamma changed\n").unwrap();
    std::fs::write(ws.join("u.txt"), "untracked\n").unwrap();
    std::fs::write(ws.join("debug.log"), "ignored\n").unwrap();
    let store = Arc::new(Store::open(state.join("clawsmith.db")).unwrap());
    Repo {
        _dir: dir,
        ws: ws.canonicalize().unwrap(),
        state,
        store,
    }
}

impl Repo {
    fn worktrees(&self) -> PathBuf {
        self.state.join("worktrees")
    }

    /// The parent core (policy `full`) with the sub-agent tools, `delegate_worktree` included.
    fn parent(&self, provider: Arc<dyn Provider>) -> AgentCore {
        self.parent_with(provider, &PermissionPolicy::new(PermissionMode::Full))
    }

    /// The parent core with `policy` (for the parent and the worktree child).
    fn parent_with(&self, provider: Arc<dyn Provider>, policy: &PermissionPolicy) -> AgentCore {
        let mut child = CoreConfig::new(&self.ws, self.store.clone());
        child.read_only_tools = true;
        let mut config = SubagentConfig::new(provider, AgentCore::new(child).unwrap());
        let mut worktree = WorktreeConfig::new(&self.ws, &self.worktrees(), self.store.clone());
        worktree.policy = policy.clone();
        config.worktree = Some(worktree);
        let subagents = Subagents::new(config);
        let mut parent = CoreConfig::new(&self.ws, self.store.clone());
        parent.policy = policy.clone();
        parent.extension_tools = subagents.tools(&self.ws);
        AgentCore::new(parent).unwrap()
    }

    /// Runs `task` in a new session of the parent core against `server`.
    async fn run(
        &self,
        server: &ScriptedServer,
        kind: ProviderKind,
        task: &str,
    ) -> (AgentCore, SessionHandle, RunOutcome) {
        let policy = PermissionPolicy::new(PermissionMode::Full);
        self.run_with(server, kind, task, &policy).await
    }

    /// [`Repo::run`] under `policy`.
    async fn run_with(
        &self,
        server: &ScriptedServer,
        kind: ProviderKind,
        task: &str,
        policy: &PermissionPolicy,
    ) -> (AgentCore, SessionHandle, RunOutcome) {
        let provider: Arc<dyn Provider> = Arc::new(provider(server, kind));
        let core = self.parent_with(Arc::clone(&provider), policy);
        let session = core.open_session(None).unwrap();
        let outcome = run_task(
            &session,
            provider.as_ref(),
            task,
            RunOptions::new(),
            &CollectingSink::new(),
        )
        .await
        .unwrap();
        (core, session, outcome)
    }

    /// Every file of the workspace outside `.git`, with its bytes.
    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.ws).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != ".git" {
                files.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
        files.sort();
        files
    }
}

fn is_parent(request: &RecordedRequest) -> bool {
    request
        .tool_names()
        .contains(&"delegate_worktree".to_owned())
}

/// The JSON result of the last `delegate_worktree` call the request carries (both protocols).
fn delegation_result(request: &RecordedRequest) -> Value {
    request
        .message_texts()
        .iter()
        .rev()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .find(|content| content.get("baseCommit").is_some())
        .unwrap_or(Value::Null)
}

fn calls(calls: &[(&str, &str)]) -> Scripted {
    Scripted::Reply(ScriptedReply::calls(calls))
}

fn answer(text: &str) -> Scripted {
    Scripted::Reply(ScriptedReply::answer(text))
}

/// A server for one delegation: the child edits `a.txt`, creates `c.txt`, runs a command that
/// sees the uncommitted state and one that tries to write the main repository's `.git`; the
/// parent then does `between` (e.g. a conflicting write), calls `worktree_apply` with the
/// patch id it was given, and answers.
async fn server(main_git: &Path, between: Option<Scripted>) -> ScriptedServer {
    // The state dir (the checkout's parent's parent) holds a file the child must not see.
    let state = main_git.parent().unwrap().parent().unwrap().join("state");
    std::fs::write(state.join("secret.txt"), "state secret\n").unwrap();
    let touch = format!(
        r#"{{"command":"cat {}/secret.txt > leak.txt; touch {}/pwned"}}"#,
        state.display(),
        main_git.display(),
    );
    let child_steps = Mutex::new(vec![
        answer("changed a.txt, added c.txt and seen.txt"),
        Scripted::Reply(ScriptedReply {
            text: "working".to_owned(),
            calls: vec![
                (
                    "edit_file".to_owned(),
                    r#"{"path":"a.txt","oldText":"beta","newText":"BETA"}"#.to_owned(),
                ),
                (
                    "write_file".to_owned(),
                    r#"{"path":"c.txt","content":"new file\n"}"#.to_owned(),
                ),
                (
                    "run_command".to_owned(),
                    r#"{"command":"cat u.txt b.txt > seen.txt; test ! -e debug.log"}"#.to_owned(),
                ),
                ("run_command".to_owned(), touch),
            ],
        }),
    ]);
    let parent_steps = Mutex::new(0_usize);
    let between = Mutex::new(between);
    ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            return child_steps
                .lock()
                .unwrap()
                .pop()
                .unwrap_or(answer("nothing left"));
        }
        let mut step = parent_steps.lock().unwrap();
        *step += 1;
        match *step {
            1 => calls(&[(
                "delegate_worktree",
                r#"{"task":"capitalize beta in a.txt"}"#,
            )]),
            2 => {
                if let Some(script) = between.lock().unwrap().take() {
                    *step -= 1;
                    return script;
                }
                let patch_id = delegation_result(request)["patchId"]
                    .as_str()
                    .unwrap_or("missing")
                    .to_owned();
                calls(&[("worktree_apply", &format!(r#"{{"patchId":"{patch_id}"}}"#))])
            }
            _ => answer("done"),
        }
    }))
    .await
    .unwrap()
}

/// The child's edit of a.txt and its new c.txt are in the workspace.
fn assert_child_edits_applied(repo: &Repo) {
    let read = |name: &str| std::fs::read_to_string(repo.ws.join(name)).unwrap();
    assert_eq!(read("a.txt"), "alpha\nBETA\n");
    assert_eq!(read("c.txt"), "new file\n");
}

/// (status, error code, model text) of each closed call of `tool`.
fn completed(core: &AgentCore, session: &str, tool: &str) -> Vec<(ToolStatus, String, String)> {
    core.store()
        .events(session)
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.payload {
            EventPayload::ToolCompleted(done) if done.tool_name == tool => {
                let code = done.result.code.map(|code| code.as_str().to_owned());
                Some((done.status, code.unwrap_or_default(), done.output))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worktree_patch_is_applied_and_undone_byte_for_byte() {
    let repo = repo();
    let main_git = repo.ws.join(".git");
    let before = repo.snapshot();
    let head = git(&repo.ws, &["rev-parse", "HEAD"]);
    let server = server(&main_git, None).await;
    let (core, session, outcome) = repo.run(&server, ProviderKind::Openai, "delegate").await;
    assert_eq!(outcome.stop_reason, StopReason::Answered);
    assert_eq!(outcome.answer, "done");

    // The delegation's result, as the parent's model saw it.
    let result = last_delegation_result(&server);
    let delegated = completed(&core, session.id(), "delegate_worktree");
    assert_eq!(delegated[0].0, ToolStatus::Success, "{}", delegated[0].2);
    assert_eq!(result["baseCommit"], head.as_str());
    assert_eq!(result["appliesCleanly"], true, "{result}");
    assert_eq!(result["stopReason"], "answered");
    assert!(result["patchId"].as_str().unwrap().starts_with("art_"));
    let patch = result["patch"].as_str().unwrap();
    assert!(patch.contains("-beta\n+BETA\n"), "{patch}");
    // Only the child's changes: the uncommitted state it started from is not in the patch.
    assert!(!patch.contains("u.txt"), "{patch}");
    let files: Vec<&str> = result["diffstat"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["a.txt", "c.txt", "leak.txt", "seen.txt"]);
    assert_eq!(result["diffstat"]["insertions"], 4);
    assert_eq!(result["diffstat"]["deletions"], 1);
    // The commands the child ran, with their outcomes: the write into the main .git failed.
    let commands = result["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 2, "{result}");
    assert_eq!(
        commands[0]["command"],
        "cat u.txt b.txt > seen.txt; test ! -e debug.log"
    );
    assert_eq!(commands[0]["status"], "success", "{result}");
    assert_eq!(commands[0]["exit"], "exit code 0", "{result}");
    assert!(commands[1]["command"].as_str().unwrap().contains("pwned"));
    assert_eq!(commands[1]["exit"], "exit code 1", "{result}");
    assert!(!main_git.join("pwned").exists());
    assert_eq!(result["toolCalls"]["edit_file"], 1);
    // The child's session is linked and ran in the checkout, which is gone.
    let child = result["sessionId"].as_str().unwrap();
    assert_eq!(
        repo.store
            .get_session(child)
            .unwrap()
            .unwrap()
            .parent_id
            .as_deref(),
        Some(session.id())
    );
    assert_eq!(std::fs::read_dir(repo.worktrees()).unwrap().count(), 0);

    // The patch is applied: the workspace has the child's changes on top of its own.
    let applied = completed(&core, session.id(), "worktree_apply");
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].0, ToolStatus::Success, "{}", applied[0].2);
    assert_child_edits_applied(&repo);
    assert_eq!(
        std::fs::read_to_string(repo.ws.join("seen.txt")).unwrap(),
        "untracked\ngamma changed\n"
    );
    // The state dir's other files were hidden from the child (read as empty).
    assert_eq!(
        std::fs::read_to_string(repo.ws.join("leak.txt")).unwrap(),
        ""
    );

    // `undo list` names the call that made the changes: worktree_apply, not a command.
    let changes = repo
        .store
        .change_list(session.id(), &outcome.turn_id)
        .unwrap();
    let mut paths: Vec<&str> = changes.iter().map(|change| change.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["a.txt", "c.txt", "leak.txt", "seen.txt"]);
    for change in &changes {
        assert_eq!(
            change.origin.as_deref(),
            Some("worktree_apply"),
            "{change:?}"
        );
    }

    // Undo of the run's turn gives every byte back.
    let workspace = clawsmith_core::fs::Workspace::open(&repo.ws).unwrap();
    repo.store
        .undo(session.id(), &outcome.turn_id, UndoScope::Files, &workspace)
        .unwrap();
    assert_eq!(repo.snapshot(), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_patch_changes_nothing() {
    let repo = repo();
    let main_git = repo.ws.join(".git");
    // Between the delegation and the apply, the parent rewrites the line the patch changes.
    let conflicting = calls(&[(
        "edit_file",
        r#"{"path":"a.txt","oldText":"beta","newText":"BETA-parent"}"#,
    )]);
    let server = server(&main_git, Some(conflicting)).await;
    let (core, session, outcome) = repo.run(&server, ProviderKind::Anthropic, "delegate").await;
    assert_eq!(outcome.answer, "done");
    let after_edit = repo.snapshot();
    let applied = completed(&core, session.id(), "worktree_apply");
    assert_eq!(applied.len(), 1);
    let (status, code, output) = &applied[0];
    assert_eq!(*status, ToolStatus::Error, "{output}");
    assert_eq!(code, "patch_conflict", "{output}");
    assert!(output.contains("a.txt"), "{output}");
    // Nothing changed: neither the conflicting file nor the files that would have applied.
    assert_eq!(
        std::fs::read_to_string(repo.ws.join("a.txt")).unwrap(),
        "alpha\nBETA-parent\n"
    );
    assert!(!repo.ws.join("c.txt").exists());
    assert!(!repo.ws.join("seen.txt").exists());
    assert_eq!(repo.snapshot(), after_edit);

    // An unknown patch id is refused with its own code.
    apply_in_new_turn(&session, "art_nope").await;
    let (_, code, output) = completed(&core, session.id(), "worktree_apply")
        .pop()
        .unwrap();
    assert_eq!(code, "patch_not_found", "{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_that_is_not_a_repository_is_refused() {
    let repo = repo();
    std::fs::remove_dir_all(repo.ws.join(".git")).unwrap();
    let server = ScriptedServer::queue(vec![
        calls(&[("delegate_worktree", r#"{"task":"anything"}"#)]),
        answer("gave up"),
    ])
    .await
    .unwrap();
    let (core, session, _) = repo.run(&server, ProviderKind::Openai, "delegate").await;
    let delegated = completed(&core, session.id(), "delegate_worktree");
    assert_eq!(delegated.len(), 1);
    assert_eq!(delegated[0].1, "not_a_git_repository", "{}", delegated[0].2);
    assert_eq!(server.requests().len(), 2, "no child request was made");
    assert!(
        !repo.worktrees().exists() || std::fs::read_dir(repo.worktrees()).unwrap().count() == 0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_delegation_removes_its_checkout() {
    let repo = repo();
    let server = ScriptedServer::start(Arc::new(|request: &RecordedRequest| {
        if is_parent(request) {
            calls(&[("delegate_worktree", r#"{"task":"take forever"}"#)])
        } else {
            // Held far longer than the test: only the cancellation ends this child.
            Scripted::Delayed(
                std::time::Duration::from_secs(300),
                Box::new(answer("too late")),
            )
        }
    }))
    .await
    .unwrap();
    let provider: Arc<dyn Provider> = Arc::new(provider(&server, ProviderKind::Openai));
    let core = repo.parent(Arc::clone(&provider));
    let session = core.open_session(None).unwrap();
    let options = RunOptions::new();
    let cancellation = options.cancellation.clone();
    let run = {
        let provider = Arc::clone(&provider);
        tokio::spawn(async move {
            let outcome = run_task(
                &session,
                provider.as_ref(),
                "delegate",
                options,
                &CollectingSink::new(),
            )
            .await;
            (session, outcome)
        })
    };
    // Wait until the child is asking its model, inside its checkout.
    while !server.requests().iter().any(|request| !is_parent(request)) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let checkouts: Vec<_> = std::fs::read_dir(repo.worktrees())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(checkouts.len(), 1);
    assert!(checkouts[0].join("a.txt").exists());
    cancellation.cancel();
    let (session, outcome) = run.await.unwrap();
    assert_eq!(outcome.unwrap().stop_reason, StopReason::Cancelled);
    let delegated = completed(&core, session.id(), "delegate_worktree");
    assert_eq!(delegated.len(), 1);
    assert_eq!(delegated[0].0, ToolStatus::Cancelled, "{}", delegated[0].2);
    assert!(!checkouts[0].exists(), "the checkout is removed");
    assert_eq!(std::fs::read_dir(repo.worktrees()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_patch_reaching_a_protected_path_is_refused_whole() {
    let repo = repo();
    let steps = Mutex::new(0_usize);
    let server = ScriptedServer::start(Arc::new(move |request: &RecordedRequest| {
        if !is_parent(request) {
            let answered = request.body["messages"]
                .as_array()
                .is_some_and(|messages| messages.iter().any(|message| message["role"] == "tool"));
            return if answered {
                answer("wrote them")
            } else {
                calls(&[(
                    "run_command",
                    r#"{"command":"mkdir -p secrets && echo k > secrets/key.txt && echo ok > ok.txt"}"#,
                )])
            };
        }
        let mut step = steps.lock().unwrap();
        *step += 1;
        match *step {
            1 => calls(&[("delegate_worktree", r#"{"task":"write"}"#)]),
            2 => {
                let id = delegation_result(request)["patchId"]
                    .as_str()
                    .unwrap_or("missing")
                    .to_owned();
                calls(&[("worktree_apply", &format!(r#"{{"patchId":"{id}"}}"#))])
            }
            _ => answer("done"),
        }
    }))
    .await
    .unwrap();
    let mut policy = PermissionPolicy::new(PermissionMode::Full);
    policy.protected_paths = ProtectedPaths::new().with("secrets").unwrap();
    let before = repo.snapshot();
    let (core, session, _) = repo
        .run_with(&server, ProviderKind::Openai, "delegate", &policy)
        .await;
    let applied = completed(&core, session.id(), "worktree_apply");
    assert_eq!(applied.len(), 1);
    let (status, code, output) = &applied[0];
    assert_eq!(*status, ToolStatus::Denied, "{output}");
    assert_eq!(code, "permission_denied");
    assert!(output.contains("secrets/key.txt"), "{output}");
    assert!(!output.contains("ok.txt"), "{output}");
    assert_eq!(repo.snapshot(), before, "nothing was applied");
}

/// The delegation's result in the last request of the parent's loop.
fn last_delegation_result(server: &ScriptedServer) -> Value {
    let requests = server.requests();
    let last_parent = requests
        .iter()
        .rev()
        .find(|request| is_parent(request))
        .unwrap();
    delegation_result(last_parent)
}

/// Calls `worktree_apply {patchId}` in a turn of its own.
async fn apply_in_new_turn(session: &SessionHandle, patch_id: &str) {
    let mut turn = session
        .begin_turn(&CollectingSink::new(), TurnOptions::default())
        .unwrap();
    turn.run_batch(
        vec![clawsmith_protocol::ToolCall {
            id: "call_apply".to_owned(),
            name: "worktree_apply".to_owned(),
            arguments: format!(r#"{{"patchId":"{patch_id}"}}"#),
        }],
        &CollectingSink::new(),
        BatchOptions::default(),
    )
    .await
    .unwrap();
    turn.finish(&CollectingSink::new()).unwrap();
}

/// Applies `patch_id` in a new turn of `session_id` through a parent core made anew, as a later
/// clawsmith process would (its in-memory patches empty); returns (status, code, text).
async fn apply_after_restart(
    repo: &Repo,
    server: &ScriptedServer,
    session_id: &str,
    patch_id: &str,
) -> (ToolStatus, String, String) {
    let provider: Arc<dyn Provider> = Arc::new(provider(server, ProviderKind::Openai));
    let core = repo.parent(provider);
    let session = core.open_session(Some(session_id.to_owned())).unwrap();
    apply_in_new_turn(&session, patch_id).await;
    completed(&core, session_id, "worktree_apply")
        .pop()
        .expect("worktree_apply closed")
}

/// Runs a delegation whose parent stops before applying; returns the session id and patch id.
async fn delegate_only(repo: &Repo) -> (ScriptedServer, String, String) {
    let main_git = repo.ws.join(".git");
    let server = server(&main_git, Some(answer("later"))).await;
    let (_core, session, outcome) = repo.run(&server, ProviderKind::Openai, "delegate").await;
    assert_eq!(outcome.answer, "later");
    let patch_id = last_delegation_result(&server)["patchId"]
        .as_str()
        .unwrap()
        .to_owned();
    (server, session.id().to_owned(), patch_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_restart_the_stored_patch_is_applied() {
    let repo = repo();
    let (server, session_id, patch_id) = delegate_only(&repo).await;
    assert!(
        !repo.ws.join("c.txt").exists(),
        "not applied before the restart"
    );
    let (status, code, output) = apply_after_restart(&repo, &server, &session_id, &patch_id).await;
    assert_eq!(status, ToolStatus::Success, "{code}: {output}");
    assert_child_edits_applied(&repo);
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_restart_a_patch_stored_with_masked_secrets_is_refused_and_changes_nothing() {
    let repo = repo();
    // The child copies u.txt into seen.txt: the patch carries this secret, which the stored
    // copy (tool output at rest) has masked.
    std::fs::write(repo.ws.join("u.txt"), "password=hunter2\n").unwrap();
    let (server, session_id, patch_id) = delegate_only(&repo).await;
    let stored = repo
        .store
        .read_artifact(&session_id, &patch_id)
        .unwrap()
        .unwrap();
    let stored = String::from_utf8(stored).unwrap();
    assert!(stored.contains("+password=[REDACTED]"), "{stored}");
    let before = repo.snapshot();
    let (status, code, output) = apply_after_restart(&repo, &server, &session_id, &patch_id).await;
    assert_eq!(status, ToolStatus::Error, "{output}");
    assert_eq!(code, "patch_masked", "{output}");
    assert!(output.contains("delegate_worktree again"), "{output}");
    assert_eq!(repo.snapshot(), before, "nothing was applied");
    assert!(!repo.ws.join("seen.txt").exists());
}
