//! `run`: clawsmith as a complete agent — the model loop of clawsmith-agent over the same core
//! as `call` and `turn` — and the sub-agent tools that join the table when `[provider]` is
//! configured.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use anyhow::{Context, Result};
use clap::Args;
use clawsmith_agent::subagent::{ChildConfigFn, SubagentConfig, Subagents};
use clawsmith_agent::worktree::WorktreeConfig;
use clawsmith_agent::{HttpProvider, Provider, ProviderConfig, RunOptions, TextSink};
use clawsmith_core::sandbox::SandboxConfig;
use clawsmith_core::{
    AgentCore, ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, CoreConfig, EventSink,
};
use clawsmith_protocol::{CancellationSignal, Event};

use crate::run::{CoreOptions, Lifetime};
use crate::state::StateOptions;
use crate::{Help, Output};

/// `run`'s own options.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub core: CoreOptions,
    /// Most model requests of this run (default 50).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// The task, as the first user message.
    pub task: String,
}

/// The sub-agents of this process, set by [`add_to_core`] when a provider is configured, so
/// `run` hands the same pool (and its background tasks' notices) to its loop.
static SUBAGENTS: OnceLock<Arc<Subagents>> = OnceLock::new();

/// The provider configured in `config_file`'s `[provider]`, `None` without one.
fn provider(config_file: Option<&Path>) -> Result<Option<(ProviderConfig, HttpProvider)>> {
    let Some(path) = config_file else {
        return Ok(None);
    };
    let Some(config) = ProviderConfig::load(path)? else {
        return Ok(None);
    };
    let provider = HttpProvider::new(config.clone())?;
    Ok(Some((config, provider)))
}

/// The folder of the state directory where `delegate_worktree` makes its checkouts.
const WORKTREES_DIR: &str = "worktrees";

/// clawsmith-agent's tools (`delegate_task`, `delegate_background`, `background_task_list`,
/// `background_task_cancel`, `delegate_worktree`, `worktree_apply`), added when `[provider]` is configured. An invalid section stops
/// the start; a key variable that is not set leaves the tools out with a warning (only `run`
/// needs the provider itself).
pub fn add_to_core(
    state_dir: &Path,
    config_file: Option<&Path>,
    sandbox: &SandboxConfig,
    config: &mut CoreConfig,
) -> Result<()> {
    let Some(path) = config_file else {
        return Ok(());
    };
    let Some(provider_config) = ProviderConfig::load(path)? else {
        return Ok(());
    };
    let provider: Arc<dyn Provider> = match HttpProvider::new(provider_config) {
        Ok(provider) => Arc::new(provider),
        Err(error) => {
            crate::output::notice(
                crate::output::Level::Warning,
                format!("sub-agent tools left out: {error}"),
            );
            return Ok(());
        }
    };
    // Children run in a core of their own over the same store and workspace: read tools only
    // (no writes, no commands, no delegate tools), the same rules and hooks.
    let child_config: ChildConfigFn = {
        let (workspace, store) = (config.workspace_root.clone(), Arc::clone(&config.store));
        let (policy, hooks) = (config.policy.clone(), config.hooks.clone());
        let tracer = config.tracer.clone();
        Arc::new(move || {
            let mut child = CoreConfig::new(&workspace, Arc::clone(&store));
            child.policy = policy.clone();
            child.hooks = hooks.clone();
            child.read_only_tools = true;
            // A child's spans go where the parent's go (its parent span comes with each call).
            child.tracer = tracer.clone();
            child
        })
    };
    let child_core =
        AgentCore::new(child_config()).context("building the sub-agents' tool table")?;
    let mut subagents = SubagentConfig::new(provider, child_core);
    // Agent definitions that list their tools get a core of their own from the same recipe.
    subagents.child_config = Some(child_config);
    // delegate_worktree: children writing in checkouts under the state dir (outside the
    // workspace), with the parent's rules, hooks, approver and sandbox.
    let mut worktree = WorktreeConfig::new(
        &config.workspace_root,
        &state_dir.join(WORKTREES_DIR),
        Arc::clone(&config.store),
    );
    worktree.policy = config.policy.clone();
    worktree.hooks = config.hooks.clone();
    worktree.approver = config.approver.clone();
    worktree.sandbox = sandbox.clone();
    worktree.tracer = config.tracer.clone();
    subagents.worktree = Some(worktree);
    let subagents = Subagents::new(subagents);
    config
        .extension_tools
        .extend(subagents.tools(&config.workspace_root));
    // A second core of this process (none today) would keep the first pool.
    let _ = SUBAGENTS.set(subagents);
    Ok(())
}

/// Asks on the terminal: `ask` decisions of a run prompt yes/no.
struct TerminalApprover {
    lock: tokio::sync::Mutex<()>,
}

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async move {
            // One question at a time.
            let _guard = self.lock.lock().await;
            let question = format!(
                "allow {} ({}): {}? [y/N] ",
                request.tool_name, request.risk, request.summary
            );
            let answer = tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr().lock();
                let _ = write!(stderr, "\n{question}");
                let _ = stderr.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) if matches!(line.trim(), "y" | "Y" | "yes") => ApprovalAnswer::Approve,
                _ => ApprovalAnswer::Decline("declined at the terminal".to_owned()),
            }
        })
    }
}

/// Streams the model's text to the terminal.
struct StreamToStdout;

impl TextSink for StreamToStdout {
    fn text(&self, delta: &str) {
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, "{delta}");
        let _ = stdout.flush();
    }
}

/// `--json`: every event as a JSON line as it is stored.
struct JsonLines {
    lock: Mutex<()>,
}

impl EventSink for JsonLines {
    fn event(&self, event: &Event) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut stdout = std::io::stdout().lock();
        // A closed stdout must not stop the run: the events are in the store anyway.
        if serde_json::to_writer(&mut stdout, event).is_ok() {
            let _ = writeln!(stdout);
        }
        let _ = stdout.flush();
    }
}

/// The final line of `run --json`, fields in contract order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct RunResult<'a> {
    r#type: &'static str,
    session_id: &'a str,
    answer: &'a str,
    turns: u32,
    stop_reason: &'static str,
    usage: clawsmith_agent::Usage,
}

/// Fires `cancellation` on Ctrl-C or SIGTERM, and records which one came (its exit status) in
/// `received`. The handlers are installed before this returns (inside the runtime): a signal
/// that arrives while the first request is in flight is never the default action's kill.
fn cancel_on_signals(cancellation: CancellationSignal, received: Arc<AtomicI32>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!(
            "could not install the Ctrl-C/SIGTERM handlers; a signal ends the run at once"
        );
        return;
    };
    tokio::spawn(async move {
        let status = tokio::select! {
            _ = interrupt.recv() => crate::exit::INTERRUPTED,
            _ = terminate.recv() => crate::exit::TERMINATED,
        };
        received.store(status, Ordering::SeqCst);
        cancellation.cancel();
    });
}

pub fn run(state_options: &StateOptions, args: &RunArgs, out: &Output) -> Result<i32> {
    let options = &args.core;
    let runtime = crate::run::runtime()?;
    let config_file = crate::run::config_path(&state_options.dir, options)?;
    let Some((provider_config, provider)) = provider(config_file.as_deref())? else {
        return Err(anyhow::anyhow!("no model provider is configured").context(Help(
            "add a [provider] table to clawsmith.toml (in the state directory, or --config FILE), \
             e.g. kind = \"openai\", base_url = \"http://127.0.0.1:11434/v1\", model = \"qwen3-coder\""
                .to_owned(),
        )));
    };
    let interactive = !out.json && std::io::stdin().is_terminal() && !options.yes;
    let approver: Option<Arc<dyn Approver>> = interactive.then(|| {
        Arc::new(TerminalApprover {
            lock: tokio::sync::Mutex::new(()),
        }) as Arc<dyn Approver>
    });
    let core = crate::run::build_core(
        &runtime,
        state_options,
        options,
        Lifetime::OneShot,
        approver,
    )?;
    let session = core.open_session(options.session.clone())?;
    let mut run_options = RunOptions::new();
    if let Some(max_turns) = args.max_turns {
        run_options.max_turns = max_turns;
    }
    run_options.system = Some(system_prompt(core.workspace_root()));
    run_options.subagents = SUBAGENTS.get().cloned();
    let stream = StreamToStdout;
    if !out.json {
        run_options.text_sink = Some(&stream);
        crate::output::notice(
            crate::output::Level::Note,
            format!(
                "session {} · {}:{}",
                session.id(),
                provider_config.kind.as_str(),
                provider_config.model
            ),
        );
    }
    let cancellation = run_options.cancellation.clone();
    let signalled = Arc::new(AtomicI32::new(crate::exit::OK));
    let outcome = runtime.block_on(async {
        cancel_on_signals(cancellation, Arc::clone(&signalled));
        if out.json {
            let sink = JsonLines {
                lock: Mutex::new(()),
            };
            clawsmith_agent::run_task(&session, &provider, &args.task, run_options, &sink).await
        } else {
            let sink = crate::run::PrintingSink::new(true);
            clawsmith_agent::run_task(&session, &provider, &args.task, run_options, &sink).await
        }
    });
    if let Some(subagents) = SUBAGENTS.get() {
        subagents.cancel_background(session.id());
    }
    let outcome = outcome.with_context(|| format!("session {}", session.id()))?;
    if out.json {
        out.json_line(&RunResult {
            r#type: "run.result",
            session_id: &outcome.session_id,
            answer: &outcome.answer,
            turns: outcome.turns,
            stop_reason: outcome.stop_reason.as_str(),
            usage: outcome.usage,
        })?;
    } else {
        out.line("")?;
        crate::output::notice(
            crate::output::Level::Note,
            format!(
                "{} after {} request(s) · {} in / {} out tokens · undo with `clawsmith undo all {} --workspace {}`",
                outcome.stop_reason.as_str().replace('_', " "),
                outcome.turns,
                outcome.usage.input_tokens,
                outcome.usage.output_tokens,
                outcome.turn_id,
                core.workspace_root().display()
            ),
        );
    }
    // A run ended by a signal says so in its status (the shell's 128 + signal number), after
    // the turn was finished and the result printed: a supervisor that sent SIGTERM learns the
    // task was not completed.
    Ok(match outcome.stop_reason {
        clawsmith_agent::StopReason::Cancelled => signalled.load(Ordering::SeqCst),
        _ => crate::exit::OK,
    })
}

fn system_prompt(workspace: &Path) -> String {
    format!(
        "You are a coding agent working in the workspace {}. Use the tools to read, search and \
         change files and to run commands there; every call is checked against the user's \
         policy and can be undone. When the task is done, answer with a short summary of what \
         you found or changed.",
        workspace.display()
    )
}
