//! `delegate_worktree` (a child that writes in an isolated checkout, returned as a patch) and
//! `worktree_apply` (that patch applied to the workspace, undoable).
//!
//! The checkout is a `git clone --local --no-hardlinks` of the workspace under
//! [`WorktreeConfig::checkouts_dir`] (the CLI uses `<state dir>/worktrees`, outside the
//! workspace), detached at the workspace's `HEAD`, with the workspace's uncommitted changes put on
//! top: the tracked diff against `HEAD` (staged and unstaged, binary included) and every untracked
//! file git does not ignore. That state is committed in the checkout as the *snapshot*, so the
//! patch is exactly what the child changed. A clone rather than `git worktree add`: a worktree's
//! `.git` file points into the main repository's `.git`, which the child would then write (its
//! index, its refs); a clone has a `.git` of its own, and the child's sandbox additionally lists
//! the main `.git` as protected.
//!
//! The child runs in a core built for the checkout (the full table: file tools and
//! `run_command`, confined to the checkout, same policy, hooks and approver as the parent; no
//! extension tools, so no delegate tools). Git is run by the host with the system and global
//! configuration off (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`), hooks off, and
//! without external diff drivers or text conversion, so nothing the child wrote in the checkout
//! runs on the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_core::sandbox::SandboxConfig;
use clawsmith_core::security::PermissionPolicy;
use clawsmith_core::store::SessionStore;
use clawsmith_core::{AgentCore, Approver, CoreConfig, Hook};
use clawsmith_protocol::schema::{input_schema, parse_input};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ErrorCode, EventPayload, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agent_loop::StopReason;
use crate::subagent::{ChildRun, Subagents};

/// `worktree_apply`: a hunk of the patch does not apply to the workspace as it is now; nothing
/// was changed.
pub const PATCH_CONFLICT: ErrorCode = ErrorCode::from_static("patch_conflict");
/// `worktree_apply`: no patch with that id in this session.
pub const PATCH_NOT_FOUND: ErrorCode = ErrorCode::from_static("patch_not_found");
/// `worktree_apply`: the patch is known only by its stored copy (made by an earlier process of
/// the session), in which secrets were masked at rest; applying it would write the masks into
/// the workspace. Nothing was changed.
pub const PATCH_MASKED: ErrorCode = ErrorCode::from_static("patch_masked");
/// `delegate_worktree`: the workspace is not the top level of a git repository with a commit.
pub const NOT_A_GIT_REPOSITORY: ErrorCode = ErrorCode::from_static("not_a_git_repository");
/// `worktree_apply`: the patch names a path outside the workspace or inside a `.git`.
pub const INVALID_PATCH: ErrorCode = ErrorCode::from_static("invalid_patch");

/// Bytes of the patch put in `delegate_worktree`'s result; the whole patch is an artifact.
pub const PATCH_PREVIEW_BYTES: usize = 16 * 1024;

/// What `delegate_worktree` needs besides the sub-agents' provider and limits.
#[derive(Clone)]
pub struct WorktreeConfig {
    /// The workspace (the top level of a git repository).
    pub workspace: PathBuf,
    /// Where checkouts are made (outside the workspace); created when missing.
    pub checkouts_dir: PathBuf,
    /// The store the child's session lives in (the parent's).
    pub store: Arc<dyn SessionStore>,
    /// The parent's policy (its workspace root is replaced by the checkout).
    pub policy: PermissionPolicy,
    /// The parent's hooks.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// The parent's approver: answers the child's `ask` decisions.
    pub approver: Option<Arc<dyn Approver>>,
    /// The parent's sandbox; the checkout becomes its workspace, protected paths that contain
    /// the checkout (the state dir) are dropped, and the main repository's `.git` is added.
    pub sandbox: SandboxConfig,
    /// Where the child's spans go (the parent's tracer); none by default.
    pub tracer: clawsmith_trace::Tracer,
}

impl WorktreeConfig {
    /// The defaults for `workspace`: `ask` policy, no hooks, no approver, the default sandbox.
    pub fn new(
        workspace: &Path,
        checkouts_dir: &Path,
        store: Arc<dyn SessionStore>,
    ) -> WorktreeConfig {
        let state_dir = match store.database_path().and_then(Path::parent) {
            Some(dir) => clawsmith_core::sandbox::StateDir::At(dir.to_path_buf()),
            None => clawsmith_core::sandbox::StateDir::NotKept,
        };
        WorktreeConfig {
            workspace: workspace.to_path_buf(),
            checkouts_dir: checkouts_dir.to_path_buf(),
            store,
            policy: PermissionPolicy::default(),
            hooks: Vec::new(),
            approver: None,
            sandbox: SandboxConfig::new(workspace, state_dir),
            tracer: clawsmith_trace::Tracer::noop(),
        }
    }

    /// The core a child runs in: the full table confined to `checkout`.
    fn child_core(&self, checkout: &Path, main_git: &Path) -> Result<AgentCore, String> {
        let mut config = CoreConfig::new(checkout, Arc::clone(&self.store));
        let mut policy = self.policy.clone();
        policy.workspace_root = None;
        config.policy = policy;
        config.hooks = self.hooks.clone();
        config.approver = self.approver.clone();
        let mut sandbox = self.sandbox.clone();
        sandbox
            .protected_paths
            .retain(|path| !checkout.starts_with(path));
        sandbox.protected_paths.push(main_git.to_path_buf());
        // The checkout sits in the state dir, which the sandbox then leaves visible (a workspace
        // inside a hidden directory stays usable): hide everything there but the checkout
        // itself — the configuration, logs, the other checkouts (the database is hidden anyway).
        for dir in [
            Some(self.checkouts_dir.as_path()),
            self.checkouts_dir.parent(),
        ]
        .into_iter()
        .flatten()
        {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let real = path.canonicalize().unwrap_or_else(|_| path.clone());
                if !checkout.starts_with(&real) {
                    sandbox.hidden_paths.push(real);
                }
            }
        }
        sandbox.workspace_identity = None;
        config.sandbox = sandbox;
        config.tracer = self.tracer.clone();
        AgentCore::new(config).map_err(|error| format!("building the child's core: {error}"))
    }
}

/// The patches of this process's delegations, by patch id (the id of the artifact holding it).
#[derive(Debug, Default)]
pub(crate) struct Patches {
    by_id: Mutex<BTreeMap<String, (String, String)>>,
}

impl Patches {
    fn put(&self, patch_id: &str, session_id: &str, patch: &str) {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                patch_id.to_owned(),
                (session_id.to_owned(), patch.to_owned()),
            );
    }

    /// The exact patch, when this process made it for `session_id`.
    fn get(&self, patch_id: &str, session_id: &str) -> Option<String> {
        self.by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(patch_id)
            .filter(|(session, _)| session == session_id)
            .map(|(_, patch)| patch.clone())
    }
}

/// Runs git in `dir` with the host's git configuration off and hooks disabled.
fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<std::process::Output, String> {
    // An exception to "only the sandbox spawns" (ARCHITECTURE): the host's own git with fixed
    // arguments on the workspace and on a checkout it made, never a model's command; with an
    // empty environment but PATH, no system or global configuration and hooks off.
    #[allow(clippy::disallowed_methods)]
    let mut command = Command::new("git");
    command.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.autocrlf=false",
            "-c",
            "user.name=clawsmith",
            "-c",
            "user.email=clawsmith@localhost",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("starting git: {error}"))?;
    // The input is written from a thread of its own, so a git that answers before it has read
    // everything cannot block on a full output pipe while we block on its input.
    let writer = match (stdin, child.stdin.take()) {
        (Some(input), Some(mut pipe)) => {
            let input = input.to_vec();
            Some(std::thread::spawn(move || {
                use std::io::Write;
                // git may stop reading early (it reports why on stderr).
                let _ = pipe.write_all(&input);
            }))
        }
        _ => None,
    };
    let output = child
        .wait_with_output()
        .map_err(|error| format!("running git: {error}"));
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    output
}

/// [`git`], failing with its stderr unless it exits 0; returns stdout.
fn git_ok(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, String> {
    let output = git(dir, args, stdin)?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(format!(
            "git {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// Removes the checkout when dropped: after the child, on an error, on cancellation.
struct CheckoutGuard(PathBuf);

impl Drop for CheckoutGuard {
    fn drop(&mut self) {
        // Best effort: a checkout that cannot be removed only costs space under the state dir.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Distinguishes the checkouts of one process.
static CHECKOUTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Why `delegate_worktree` or `worktree_apply` gives no result: the code and the message.
struct Refusal(ErrorCode, String);

/// The workspace's `HEAD` (full hash) and its `.git` directory; refuses a workspace that is not
/// the top level of a repository with a commit.
fn repository(workspace: &Path) -> Result<(String, PathBuf), Refusal> {
    let not_a_repo = |why: String| {
        Refusal(
            NOT_A_GIT_REPOSITORY,
            format!(
                "delegate_worktree needs the workspace {} to be the top level of a git \
                 repository with at least one commit: {why}",
                workspace.display()
            ),
        )
    };
    let top = git_ok(workspace, &["rev-parse", "--show-toplevel"], None).map_err(not_a_repo)?;
    let top = PathBuf::from(text(top));
    let same = top.canonicalize().ok() == workspace.canonicalize().ok();
    if !same {
        return Err(not_a_repo(format!(
            "the repository's top level is {}",
            top.display()
        )));
    }
    let head = git_ok(workspace, &["rev-parse", "--verify", "HEAD^{commit}"], None)
        .map_err(|_| not_a_repo("HEAD names no commit yet".to_owned()))?;
    let git_dir =
        git_ok(workspace, &["rev-parse", "--absolute-git-dir"], None).map_err(not_a_repo)?;
    Ok((text(head), PathBuf::from(text(git_dir))))
}

/// Makes the checkout at `path`: a clone detached at `head`, the workspace's uncommitted changes
/// on top, committed as the snapshot the patch is taken against. Returns the snapshot commit.
fn prepare_checkout(workspace: &Path, path: &Path, head: &str) -> Result<String, String> {
    let parent = path.parent().unwrap_or(path);
    let path_text = path.to_string_lossy().into_owned();
    let workspace_text = workspace.to_string_lossy().into_owned();
    git_ok(
        parent,
        &[
            "clone",
            "--quiet",
            "--local",
            "--no-hardlinks",
            "--no-checkout",
            &workspace_text,
            &path_text,
        ],
        None,
    )?;
    git_ok(path, &["checkout", "--quiet", "--detach", head], None)?;
    // Tracked changes, staged or not, binary included.
    let diff = git_ok(
        workspace,
        &[
            "diff",
            "--binary",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-renames",
            "HEAD",
        ],
        None,
    )?;
    if !diff.is_empty() {
        git_ok(
            path,
            &["apply", "--binary", "--whitespace=nowarn", "-"],
            Some(&diff),
        )
        .map_err(|error| format!("carrying the uncommitted changes over: {error}"))?;
    }
    // Untracked files git does not ignore.
    let untracked = git_ok(
        workspace,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        None,
    )?;
    for name in untracked
        .split(|byte| *byte == 0)
        .filter(|name| !name.is_empty())
    {
        let relative =
            Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
        copy_entry(&workspace.join(relative), &path.join(relative))
            .map_err(|error| format!("copying {}: {error}", relative.display()))?;
    }
    git_ok(path, &["add", "--all"], None)?;
    git_ok(
        path,
        &[
            "commit",
            "--quiet",
            "--no-verify",
            "--allow-empty",
            "-m",
            "clawsmith: the workspace when the task was delegated",
        ],
        None,
    )?;
    Ok(text(git_ok(path, &["rev-parse", "HEAD"], None)?))
}

/// Copies a file or symlink (its target as is), with its permission bits.
fn copy_entry(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_file() {
        std::fs::copy(from, to).map(|_| ())
    } else {
        Ok(())
    }
}

/// One file of the diffstat.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct FileStat {
    path: String,
    /// Lines added (`None` for a binary file).
    added: Option<u64>,
    /// Lines removed (`None` for a binary file).
    removed: Option<u64>,
}

/// `git … --numstat -z` output: `added\tremoved\tpath\0` per file (`-` for binary).
fn parse_numstat(bytes: &[u8]) -> Vec<FileStat> {
    bytes
        .split(|byte| *byte == 0)
        .filter(|record| !record.is_empty())
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let mut fields = record.splitn(3, '\t');
            let added = fields.next()?.parse().ok();
            let removed = fields.next()?.parse().ok();
            let path = fields.next()?.to_owned();
            Some(FileStat {
                path,
                added,
                removed,
            })
        })
        .collect()
}

/// The child's changes against `snapshot`: the patch and its diffstat.
fn collect_patch(path: &Path, snapshot: &str) -> Result<(String, Vec<FileStat>), String> {
    git_ok(path, &["add", "--all"], None)?;
    let common = [
        "--cached",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-renames",
    ];
    let mut patch_args = vec!["diff", "--binary", "--full-index"];
    patch_args.extend(common);
    patch_args.push(snapshot);
    let patch = git_ok(path, &patch_args, None)?;
    let mut stat_args = vec!["diff", "--numstat", "-z"];
    stat_args.extend(common);
    stat_args.push(snapshot);
    let stats = parse_numstat(&git_ok(path, &stat_args, None)?);
    let patch = String::from_utf8(patch)
        .map_err(|_| "the child's patch is not UTF-8 text (a file name?)".to_owned())?;
    Ok((patch, stats))
}

/// Why `patch` does not apply to `workspace` (one line per problem); empty when it applies.
fn conflicts(workspace: &Path, patch: &str) -> Result<Vec<String>, String> {
    let output = git(
        workspace,
        &["apply", "--check", "--binary", "-"],
        Some(patch.as_bytes()),
    )?;
    if output.status.success() {
        return Ok(Vec::new());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<String> = stderr
        .lines()
        .map(|line| line.trim().trim_start_matches("error: ").to_owned())
        .filter(|line| !line.is_empty())
        .collect();
    Ok(if lines.is_empty() {
        vec![format!("git apply --check exited with {}", output.status)]
    } else {
        lines
    })
}

/// The paths a patch names (`git apply --numstat`); refuses absolute paths, `..` and `.git`.
fn patch_paths(workspace: &Path, patch: &str) -> Result<Vec<String>, String> {
    let listed = git_ok(
        workspace,
        &["apply", "--numstat", "-z", "--binary", "-"],
        Some(patch.as_bytes()),
    )?;
    let paths: Vec<String> = parse_numstat(&listed)
        .into_iter()
        .map(|stat| stat.path)
        .collect();
    for path in &paths {
        let bad = Path::new(path).components().any(
            |component| !matches!(component, std::path::Component::Normal(name) if name != ".git"),
        );
        if bad {
            return Err(format!(
                "the patch names {path:?}: only paths inside the workspace, outside any .git, \
                 may be patched"
            ));
        }
    }
    Ok(paths)
}

/// What the child ran: its commands with their status, and how many calls of each tool.
fn child_activity(core: &AgentCore, session_id: &str) -> Value {
    let Ok(events) = core.store().events(session_id) else {
        return json!({});
    };
    let mut summaries: BTreeMap<String, String> = BTreeMap::new();
    let mut commands = Vec::new();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for event in events {
        match event.payload {
            EventPayload::ToolStarted(started) => {
                if let Some(summary) = started.summary {
                    summaries.insert(started.tool_call_id, summary);
                }
            }
            EventPayload::ToolCompleted(done) => {
                *calls.entry(done.tool_name.clone()).or_default() += 1;
                if done.tool_name == "run_command" {
                    // The command's exit as run_command reports it ("exit code 1", "killed …").
                    let exit = done.result.display.as_ref().and_then(|display| {
                        display
                            .fields
                            .iter()
                            .find(|field| field.label == "exit")
                            .map(|field| field.value.clone())
                    });
                    let command = summaries
                        .get(&done.tool_call_id)
                        .map(|summary| summary.trim_start_matches("run_command: ").to_owned())
                        .unwrap_or_default();
                    commands.push(json!({
                        "command": command,
                        "status": done.status,
                        "exit": exit,
                    }));
                }
            }
            _ => {}
        }
    }
    json!({"commands": commands, "toolCalls": calls})
}

fn worktree_system_prompt(checkout: &Path) -> String {
    format!(
        "You are a sub-agent working in an isolated checkout of the repository at {}. Make the \
         change the task asks for with the tools (edit files, run commands there); your changes \
         are returned to the parent agent as a patch, which it may apply to its workspace. When \
         done, answer with a short summary of what you changed and why.",
        checkout.display()
    )
}

/// `delegate_worktree {task}`.
pub(crate) struct DelegateWorktree {
    pub subagents: Arc<Subagents>,
    pub config: WorktreeConfig,
    pub patches: Arc<Patches>,
}

impl DelegateWorktree {
    async fn run(&self, task: String, context: &ToolExecutionContext) -> Result<Value, Refusal> {
        let failed = |message: String| Refusal(ErrorCode::TOOL_FAILED, message);
        let workspace = self.config.workspace.clone();
        let (head, main_git) = {
            let workspace = workspace.clone();
            tokio::task::spawn_blocking(move || repository(&workspace))
                .await
                .map_err(|error| failed(error.to_string()))??
        };
        std::fs::create_dir_all(&self.config.checkouts_dir).map_err(|error| {
            failed(format!(
                "creating {}: {error}",
                self.config.checkouts_dir.display()
            ))
        })?;
        let dir = self
            .config
            .checkouts_dir
            .canonicalize()
            .map_err(|error| failed(error.to_string()))?;
        let number = CHECKOUTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let checkout = dir.join(format!("wt-{}-{number}", std::process::id()));
        // Dropped on every way out, cancellation included (the future is dropped then).
        let guard = CheckoutGuard(checkout.clone());
        let snapshot = {
            let (workspace, checkout, head) = (workspace.clone(), checkout.clone(), head.clone());
            tokio::task::spawn_blocking(move || prepare_checkout(&workspace, &checkout, &head))
                .await
                .map_err(|error| failed(error.to_string()))?
                .map_err(|error| failed(format!("preparing the checkout: {error}")))?
        };
        let core = self
            .config
            .child_core(&checkout, &main_git)
            .map_err(failed)?;
        let report = self
            .subagents
            .run_child(
                &context.session_id,
                &task,
                ChildRun {
                    core: core.clone(),
                    system: worktree_system_prompt(&checkout),
                    max_turns: self.subagents.child_max_turns(),
                    model: None,
                    agent_name: "delegate_worktree".to_owned(),
                    trace_parent: crate::subagent::call_span(context),
                },
                context.cancellation.clone(),
                |_| {},
            )
            .await;
        let report = match report {
            Ok(report)
                if report.stop_reason == StopReason::Cancelled
                    && context.cancellation.is_cancelled() =>
            {
                return Err(Refusal(
                    ErrorCode::CANCELLED,
                    format!(
                        "the sub-agent (session {}) was cancelled; its checkout was removed",
                        report.session_id
                    ),
                ));
            }
            Ok(report) => report,
            Err(message) if context.cancellation.is_cancelled() => {
                return Err(Refusal(ErrorCode::CANCELLED, message));
            }
            Err(message) => return Err(failed(format!("the sub-agent failed: {message}"))),
        };
        let (patch, stats) = {
            let checkout = checkout.clone();
            tokio::task::spawn_blocking(move || collect_patch(&checkout, &snapshot))
                .await
                .map_err(|error| failed(error.to_string()))?
                .map_err(|error| failed(format!("taking the child's patch: {error}")))?
        };
        // Removing a large checkout takes a while: off the async workers.
        let _ = tokio::task::spawn_blocking(move || drop(guard)).await;
        let activity = child_activity(&core, &report.session_id);
        let mut result = json!({
            "sessionId": report.session_id,
            "answer": report.answer,
            "stopReason": report.stop_reason,
            "turns": report.turns,
            "baseCommit": head,
            "includesUncommitted": true,
            "commands": activity["commands"],
            "toolCalls": activity["toolCalls"],
            "diffstat": {
                "filesChanged": stats.len(),
                "insertions": stats.iter().filter_map(|stat| stat.added).sum::<u64>(),
                "deletions": stats.iter().filter_map(|stat| stat.removed).sum::<u64>(),
                "files": stats,
            },
        });
        if patch.is_empty() {
            result["patchId"] = Value::Null;
            result["patch"] = json!("");
            result["appliesCleanly"] = json!(true);
            return Ok(result);
        }
        let artifact = self
            .config
            .store
            .put_artifact(&context.session_id, patch.as_bytes())
            .map_err(|error| failed(format!("storing the patch: {error}")))?;
        self.patches
            .put(&artifact.artifact_id, &context.session_id, &patch);
        let problems = {
            let (workspace, patch) = (workspace.clone(), patch.clone());
            tokio::task::spawn_blocking(move || conflicts(&workspace, &patch))
                .await
                .map_err(|error| failed(error.to_string()))?
                .map_err(failed)?
        };
        result["patchId"] = json!(artifact.artifact_id);
        result["patchBytes"] = json!(patch.len());
        result["patchTruncated"] = json!(patch.len() > PATCH_PREVIEW_BYTES);
        result["patch"] = json!(crate::wire::bounded(&patch, PATCH_PREVIEW_BYTES));
        result["appliesCleanly"] = json!(problems.is_empty());
        if !problems.is_empty() {
            result["conflicts"] = json!(problems);
        }
        Ok(result)
    }
}

impl Tool for DelegateWorktree {
    fn name(&self) -> &str {
        "delegate_worktree"
    }

    fn description(&self) -> &str {
        "Hand a change to a sub-agent that works in an isolated checkout of this repository (HEAD \
         plus the uncommitted changes) with the full tool set. Returns its answer and its changes \
         as a unified patch with a patchId (the whole patch is readable with read_artifact), the \
         diffstat, the commands it ran and whether the patch applies cleanly now; apply it with \
         worktree_apply."
    }

    fn risk(&self) -> Risk {
        Risk::Execute
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![
            Capability::AgentDelegate,
            Capability::ProcessExecute,
            Capability::FilesystemRead,
        ])
    }

    fn concurrency_safe(&self) -> bool {
        false
    }

    fn input_schema(&self) -> Value {
        input_schema::<DelegateWorktreeInput>()
    }

    fn summarize(&self, input: &Value) -> String {
        crate::subagent::summary_of(input)
    }

    fn execute<'a>(&'a self, input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input = match parse_input::<DelegateWorktreeInput>(self.name(), input) {
                Ok(input) => input,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let task = match crate::subagent::non_empty_task(input.task) {
                Ok(task) => task,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            match self.run(task, &context).await {
                Ok(result) => ToolOutput::Text(result.to_string()),
                Err(Refusal(code, message)) => {
                    ToolOutput::Result(ToolExecutionResult::failure(code, message))
                }
            }
        })
    }
}

/// `delegate_worktree`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DelegateWorktreeInput {
    /// The change to make.
    task: String,
}

/// `worktree_apply`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WorktreeApplyInput {
    /// delegate_worktree's patchId.
    patch_id: String,
}

/// `worktree_apply {patchId}`. The core captures the workspace around it (an extension tool
/// declaring `filesystem.write`), so what it changes is recorded in the turn and undoable.
pub(crate) struct WorktreeApply {
    pub workspace: PathBuf,
    pub store: Arc<dyn SessionStore>,
    pub patches: Arc<Patches>,
    /// The parent's policy: a patch may not reach its protected or hidden paths.
    pub policy: PermissionPolicy,
}

impl WorktreeApply {
    fn apply(&self, patch_id: &str, session_id: &str) -> Result<String, Refusal> {
        let patch = match self.patches.get(patch_id, session_id) {
            Some(patch) => patch,
            // A patch of an earlier process of this session: its stored copy.
            None => match self.store.read_artifact(session_id, patch_id) {
                Ok(Some(bytes)) if patch_id.starts_with("art_") => {
                    let stored = String::from_utf8_lossy(&bytes).into_owned();
                    // Tool output is stored masked: a copy with a mask in it is not the patch.
                    if stored.contains(clawsmith_protocol::redact::REDACTED) {
                        return Err(Refusal(
                            PATCH_MASKED,
                            format!(
                                "patch {patch_id} was made by an earlier clawsmith process and \
                                 its stored copy has secrets masked as {}; applying it would \
                                 write the masks into the workspace. Run delegate_worktree \
                                 again for a fresh patch.",
                                clawsmith_protocol::redact::REDACTED
                            ),
                        ));
                    }
                    stored
                }
                Ok(_) => {
                    return Err(Refusal(
                        PATCH_NOT_FOUND,
                        format!(
                            "no patch {patch_id:?} in this session (patch ids come from \
                             delegate_worktree's result)"
                        ),
                    ));
                }
                Err(error) => {
                    return Err(Refusal(
                        ErrorCode::TOOL_FAILED,
                        format!("reading patch {patch_id}: {error}"),
                    ));
                }
            },
        };
        let paths = patch_paths(&self.workspace, &patch)
            .map_err(|message| Refusal(INVALID_PATCH, message))?;
        // The file tools would need an approval naming these paths; one approval of the whole
        // patch does not stand for it.
        let guarded: Vec<&str> = paths
            .iter()
            .map(String::as_str)
            .filter(|path| {
                self.policy.protected_paths.classify(path).is_some()
                    || self.policy.hidden_paths.contains(path)
            })
            .collect();
        if !guarded.is_empty() {
            return Err(Refusal(
                ErrorCode::PERMISSION_DENIED,
                format!(
                    "patch {patch_id} changes protected paths ({}); nothing was changed. Change \
                     them with the file tools, which ask for them one by one",
                    guarded.join(", ")
                ),
            ));
        }
        let problems = conflicts(&self.workspace, &patch)
            .map_err(|message| Refusal(ErrorCode::TOOL_FAILED, message))?;
        if !problems.is_empty() {
            return Err(Refusal(
                PATCH_CONFLICT,
                format!(
                    "patch {patch_id} does not apply to the workspace as it is now; nothing was \
                     changed. Conflicts:\n{}",
                    problems.join("\n")
                ),
            ));
        }
        // `git apply` is all or nothing: a hunk that fails now leaves every file as it was.
        let output = git(
            &self.workspace,
            &["apply", "--binary", "-"],
            Some(patch.as_bytes()),
        )
        .map_err(|message| Refusal(ErrorCode::TOOL_FAILED, message))?;
        if !output.status.success() {
            return Err(Refusal(
                PATCH_CONFLICT,
                format!(
                    "patch {patch_id} does not apply; nothing was changed. Conflicts:\n{}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            ));
        }
        Ok(json!({"patchId": patch_id, "applied": true, "files": paths}).to_string())
    }
}

impl Tool for WorktreeApply {
    fn name(&self) -> &str {
        "worktree_apply"
    }

    fn description(&self) -> &str {
        "Apply a patch returned by delegate_worktree (by its patchId) to the workspace, as \
         undoable changes of this turn. If any hunk does not apply, nothing changes and the \
         conflicts are listed."
    }

    fn risk(&self) -> Risk {
        Risk::WorkspaceWrite
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![
            Capability::FilesystemRead,
            Capability::FilesystemWrite,
        ])
    }

    fn concurrency_safe(&self) -> bool {
        false
    }

    fn input_schema(&self) -> Value {
        input_schema::<WorktreeApplyInput>()
    }

    fn summarize(&self, input: &Value) -> String {
        input["patchId"].as_str().unwrap_or("").to_owned()
    }

    fn execute<'a>(&'a self, input: Value, context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let patch_id = match parse_input::<WorktreeApplyInput>(self.name(), input) {
                Ok(input) => input.patch_id,
                Err(refusal) => return ToolOutput::Result(refusal),
            };
            let this = WorktreeApply {
                workspace: self.workspace.clone(),
                store: Arc::clone(&self.store),
                patches: Arc::clone(&self.patches),
                policy: self.policy.clone(),
            };
            let session = context.session_id.clone();
            let outcome =
                tokio::task::spawn_blocking(move || this.apply(&patch_id, &session)).await;
            match outcome {
                Ok(Ok(text)) => ToolOutput::Text(text),
                Ok(Err(Refusal(code, message))) => {
                    ToolOutput::Result(ToolExecutionResult::failure(code, message))
                }
                Err(error) => ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::TOOL_FAILED,
                    error.to_string(),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_records() {
        let parsed = parse_numstat(b"3\t1\ta.txt\0-\t-\tlogo.png\0\0");
        assert_eq!(
            parsed,
            [
                FileStat {
                    path: "a.txt".to_owned(),
                    added: Some(3),
                    removed: Some(1)
                },
                FileStat {
                    path: "logo.png".to_owned(),
                    added: None,
                    removed: None
                },
            ]
        );
    }
}
