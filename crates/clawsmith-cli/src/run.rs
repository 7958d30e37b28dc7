//! `tools`, `call`, `turn`: the commands that go through the core.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use clawsmith_checkpoint::LeaseWait;
use clawsmith_core::{
    AgentCore, ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, BatchOptions, CallResult,
    CoreConfig, EventSink, OpeningRequest, SessionHandle, Turn,
};
use clawsmith_protocol::{Event, ToolCall, ToolStatus};
use clawsmith_sandbox::{
    CommandExecutionService, SandboxConfig, SandboxPolicy, ServiceConfig, StateDir,
};
use clawsmith_security::PermissionMode;
use serde_json::json;

use crate::state::StateOptions;
use crate::{Help, Output, state};

/// The options every command that builds a core shares.
#[derive(Debug, Clone, Args)]
pub struct CoreOptions {
    /// The workspace the tools work in.
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// Permission mode: the default decision per effective risk (default `ask`; `accept-edits`
    /// for `mcp`).
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,
    /// Approve every `ask` decision (without it, `ask` becomes `permission_denied`).
    #[arg(long)]
    pub yes: bool,
    /// Continue this session (created under this id when new); `new` for a fresh session.
    /// Without it, `call` continues the workspace's session of the day (`ses_calls_…`, waiting
    /// for another `call` in it to finish) and `turn` and `mcp` start a fresh one.
    #[arg(long, value_parser = crate::history::session_id, value_name = "ID|new")]
    pub session: Option<String>,
    /// What to do when the kernel cannot sandbox commands.
    #[arg(long, value_enum, default_value_t = SandboxArg::Required)]
    pub sandbox: SandboxArg,
    /// Let commands use the whole network (the same as `--network full`).
    #[arg(long, conflicts_with = "network")]
    pub allow_network: bool,
    /// How commands reach the network: `off` (loopback only), `allowlist` (the hosts
    /// `[network] allow` names in the configuration, through clawsmith's gateway) or `full`
    /// (default: `[network] mode`, else `allowlist` when it allows a host, else `off`).
    #[arg(long, value_enum, value_name = "MODE")]
    pub network: Option<crate::policy::NetworkMode>,
    /// The configuration: policy (mode, rules, hooks, sandbox limits, writable, protected and
    /// hidden paths) and external MCP servers (TOML; default: `clawsmith.toml` in the state
    /// directory when it exists).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A plugin folder (repeatable; clawsmith-plugin.toml, or another agent's plugin for its
    /// skills and MCP servers), besides `plugins = […]` in the configuration.
    #[arg(long = "plugin", value_name = "DIR")]
    pub plugins: Vec<PathBuf>,
}

/// `turn`'s own options.
#[derive(Debug, Clone, Args)]
pub struct TurnOptions {
    /// Print a timeline for people instead of JSON lines: one row per call (time, tool,
    /// summary, status, duration) with its diff, command output or search hits, and a closing
    /// line per turn; the final `turn.result` JSON line only with --json.
    #[arg(long)]
    pub pretty: bool,
}

/// `--mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Deny everything above read.
    ReadOnly,
    /// Ask before workspace writes and commands.
    Ask,
    /// Allow workspace writes, ask before commands.
    AcceptEdits,
    /// Allow everything (hard command limits still apply).
    Full,
}

impl From<ModeArg> for PermissionMode {
    fn from(mode: ModeArg) -> PermissionMode {
        match mode {
            ModeArg::ReadOnly => PermissionMode::ReadOnly,
            ModeArg::Ask => PermissionMode::Ask,
            ModeArg::AcceptEdits => PermissionMode::AcceptEdits,
            ModeArg::Full => PermissionMode::Full,
        }
    }
}

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Refuse to run commands the kernel cannot confine.
    Required,
    /// Run unconfined when the kernel cannot confine, and say so.
    BestEffort,
    /// Do not confine commands (limits and the disaster check still apply).
    Off,
}

impl From<SandboxArg> for SandboxPolicy {
    fn from(policy: SandboxArg) -> SandboxPolicy {
        match policy {
            SandboxArg::Required => SandboxPolicy::Required,
            SandboxArg::BestEffort => SandboxPolicy::BestEffort,
            SandboxArg::Off => SandboxPolicy::Off,
        }
    }
}

/// Approves every request: `--yes`.
struct ApproveAll;

impl Approver for ApproveAll {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async { ApprovalAnswer::Approve })
    }
}

/// What a front end builds besides the flags. Every front end has the same tool table, the
/// background commands (`start_command` …) included: a one-shot process's background commands
/// end with it (a batch of `turn` can start a server and query it), a long-lived host's outlive
/// its turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime<'a> {
    /// One process per turn (`turn`, `tools`, `run`): its background commands log into
    /// `commands/<pid>/`, left for the next process to remove (a one-shot process has no place
    /// to hold the directory's guard, and every start removes the directories of processes
    /// that are gone).
    OneShot,
    /// One process per tool call (`call`): as [`Lifetime::OneShot`], and its commands take no
    /// warm spare ([`SandboxConfig::warm_spares`]): it runs one command at most, so the spare
    /// its command would order never serves.
    OneCall,
    /// A server that outlives turns; its background commands log into `command_logs`.
    LongLived {
        /// This process's `commands/<pid>/` ([`state::command_log_dir`]).
        command_logs: &'a Path,
    },
}

impl CoreOptions {
    /// The session `--session` names: `None` for `--session new` (and for no `--session`: the
    /// caller decides what that means).
    pub fn named_session(&self) -> Option<String> {
        self.session.clone().filter(|id| id != NEW_SESSION)
    }

    /// The network mode the command line chose: `--network`, or `full` for `--allow-network`.
    pub fn network_choice(&self) -> Option<crate::policy::NetworkMode> {
        self.network.or(self
            .allow_network
            .then_some(crate::policy::NetworkMode::Full))
    }
}

/// `--session new`: a fresh session.
pub const NEW_SESSION: &str = "new";

/// The session `call` continues without `--session`: one per workspace and local day,
/// `ses_calls_<YYYYMMDD>_<first 12 hex digits of SHA-256(canonical workspace path)>`. People
/// running many calls in a row get one session to read back (`session show`) and one undo
/// list, not a session per call; a new day starts a new one, so sessions stay small.
pub fn daily_call_session(workspace: &Path) -> Result<String> {
    let root = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
    let digest = clawsmith_checkpoint::hash_hex(&clawsmith_checkpoint::sha256(
        root.as_os_str().as_encoded_bytes(),
    ));
    let day = jiff::Timestamp::now()
        .to_zoned(local_zone_for_dates())
        .strftime("%Y%m%d")
        .to_string();
    Ok(format!("ses_calls_{day}_{}", &digest[..12]))
}

/// The local zone, for a date only. `jiff::tz::TimeZone::system()` first lists every name under
/// /usr/share/zoneinfo (about 600 entries in 20 directories, at every start of `call`)
/// to name the zone; a date needs the rules, not the name, so without `TZ` the rules
/// are read from /etc/localtime directly.
fn local_zone_for_dates() -> jiff::tz::TimeZone {
    if std::env::var_os("TZ").is_none()
        && let Ok(bytes) = std::fs::read("/etc/localtime")
        && let Ok(zone) = jiff::tz::TimeZone::tzif("localtime", &bytes)
    {
        return zone;
    }
    jiff::tz::TimeZone::system()
}

/// The configuration file (`--config`, else `clawsmith.toml` in the state directory when it
/// exists), checked to be trusted. Its policy is read by `policy.rs`, its MCP servers by
/// clawsmith-mcp.
pub fn config_path(state_dir: &Path, options: &CoreOptions) -> Result<Option<PathBuf>> {
    config_file(state_dir, options.config.as_deref())
}

/// [`config_path`] for commands that take `--config` without the other core options.
pub fn config_file(state_dir: &Path, explicit: Option<&Path>) -> Result<Option<PathBuf>> {
    if explicit.is_none() {
        // The default is trusted only as far as the directory holding it is (owner, modes,
        // no symlinks); nothing is created when there is no state yet.
        if !state_dir.exists() {
            return Ok(None);
        }
        state::prepare_state_dir(state_dir)?;
    }
    config_in_prepared_state(state_dir, explicit)
}

/// [`config_file`] once `state_dir` has just been prepared ([`state::prepare_state_dir`], as
/// opening the store does): the file itself is still checked to be trusted.
fn config_in_prepared_state(state_dir: &Path, explicit: Option<&Path>) -> Result<Option<PathBuf>> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => {
            let default = state_dir.join(state::CONFIG_FILE);
            if std::fs::symlink_metadata(&default).is_err() {
                return Ok(None);
            }
            default
        }
    };
    state::require_trusted_config(&path)?;
    if let Ok(text) = std::fs::read_to_string(&path) {
        crate::store::withhold_connection_variable(&text);
    }
    Ok(Some(path))
}

/// The MCP client configuration of the configuration file, when there is one.
fn mcp_config(config_file: Option<&Path>) -> Result<Option<clawsmith_mcp::McpConfig>> {
    let Some(path) = config_file else {
        return Ok(None);
    };
    let config = clawsmith_mcp::McpConfig::load(path)
        .with_context(|| format!("reading the MCP server configuration {}", path.display()))?;
    Ok(Some(config))
}

/// Builds the core for `options` with its state where `state_options` say: connects the
/// configured MCP servers (their tools enter as deferred tools), then freezes the table.
pub fn build_core(
    runtime: &tokio::runtime::Runtime,
    state_options: &StateOptions,
    options: &CoreOptions,
    lifetime: Lifetime<'_>,
    approver: Option<Arc<dyn Approver>>,
) -> Result<AgentCore> {
    let state_dir = state_options.dir.as_path();
    let workspace = options
        .workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", options.workspace.display()))?;
    if !workspace.is_dir() {
        bail!("workspace {} is not a directory", workspace.display());
    }
    state::ensure_outside(state_dir, &workspace)?;
    // The state directory is checked first (a planted configuration is refused). Invalid
    // configuration stops the start before any tool exists. The file is found and checked once
    // here, then read by each section's owner (finding it lists and checks the state directory
    // each time).
    state::prepare_state_dir(state_dir)?;
    let config_file = config_in_prepared_state(state_dir, options.config.as_deref())?;
    let file_policy = crate::policy::load_file(config_file.as_deref())?;
    // The session store `[store]` names: the fleet's, or this machine's file.
    let store = crate::store::open_tool_store(state_options, config_file.as_deref())?;
    // The one policy every process clawsmith starts is confined by (commands, background
    // commands, plugin tools and hooks, language servers, MCP servers): each gets a profile of
    // it (`SandboxConfig::for_process`), never a configuration of its own.
    let mut sandbox = SandboxConfig::new(
        &workspace,
        StateDir::At(state::canonical_even_if_missing(state_dir)?),
    );
    sandbox.policy = options.sandbox.into();
    sandbox.warm_spares = lifetime != Lifetime::OneCall;
    let default_mode = match lifetime {
        Lifetime::OneShot | Lifetime::OneCall => ModeArg::Ask,
        Lifetime::LongLived { .. } => ModeArg::AcceptEdits,
    };
    let mut config = CoreConfig::new(&workspace, store);
    config.policy = file_policy.permission_policy(
        options.mode.map(Into::into),
        default_mode.into(),
        &workspace,
    )?;
    config.command_hooks = file_policy.core_hooks();
    let hidden = file_policy.hidden_set(&workspace)?;
    file_policy.apply_to_sandbox(&mut sandbox, &workspace, &hidden, options.network_choice())?;
    // Plugins are loaded before any process starts: a plugin folder is code, read-only to every
    // process of the policy (a command could otherwise rewrite a hook a later call runs).
    let plugins = crate::plugins::load_for_core(config_file.as_deref(), &options.plugins)?;
    sandbox
        .read_only_roots
        .extend(plugins.plugins.iter().map(|plugin| plugin.root.clone()));
    config.approver = if options.yes {
        Some(Arc::new(ApproveAll))
    } else {
        approver
    };
    if let Some(mcp) = mcp_config(config_file.as_deref())? {
        // A server that fails to start or list is left out; the report goes to stderr.
        let startup = runtime.block_on(clawsmith_mcp::connect_servers(&mcp, &sandbox));
        for problem in &startup.problems {
            crate::output::notice(crate::output::Level::Warning, problem);
        }
        config.extension_tools = startup.tools;
    }
    // clawsmith-trace: OTLP export and the caller's TRACEPARENT; before the
    // sub-agents, whose cores take the same tracer.
    crate::traces::configure(&mut config)?;
    // clawsmith-agent: the sub-agent tools, when a [provider] is configured.
    crate::agent::add_to_core(state_dir, config_file.as_deref(), &sandbox, &mut config)?;
    // clawsmith-lsp: the deferred lsp_* tools over the language servers.
    crate::lsp::add_to_core(
        state_dir,
        config_file.as_deref(),
        &workspace,
        &sandbox,
        &hidden,
        &mut config,
    )?;
    // clawsmith-skills: skill_view (the catalog of the skills found) and memory_search.
    // clawsmith-plugins: their skills join the catalog as `<plugin>:<skill>`.
    config.extension_tools.extend(crate::skills::core_tools(
        state_dir,
        config_file.as_deref(),
        &workspace,
        &plugins.skill_roots(),
        &hidden,
    )?);
    // clawsmith-plugins: plugin tools (sandboxed as declared), hooks and MCP servers.
    crate::plugins::add_to_core(runtime, &plugins, &mut config, &sandbox);
    // One table for every front end: the background command service is built for one-shot
    // processes too, whose background commands end with them.
    {
        let log_dir = match lifetime {
            Lifetime::LongLived { command_logs } => command_logs.to_path_buf(),
            Lifetime::OneShot | Lifetime::OneCall => state::command_log_dir(state_dir)?.keep(),
        };
        let service = CommandExecutionService::new(ServiceConfig::new(sandbox.clone(), &log_dir))
            .with_context(|| {
            format!(
                "starting the background command service in {}",
                log_dir.display()
            )
        })?;
        config.command_service = Some(Arc::new(service));
    }
    config.sandbox = sandbox;
    let core = AgentCore::new(config).context("building the tool table")?;
    tracing::info!(
        workspace = %workspace.display(),
        tools = core.tools().entries().len(),
        "tool table frozen"
    );
    Ok(core)
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The runtime of `call`: the process's own thread, no workers. A one-call turn has nothing to
/// run in parallel (only a batch of several read calls does, which `turn` and `mcp` keep their
/// worker per core for), and the CLI sets no per-call timeout that a worker would let fire
/// while a tool blocks. The multi-thread runtime started a worker per core for each `call` and
/// handed the call to one of them and back (thread starts, their stacks and malloc arenas,
/// futex wake-ups).
pub fn one_call_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub fn tools(state_options: &StateOptions, options: &CoreOptions, out: &Output) -> Result<i32> {
    let runtime = runtime()?;
    let core = build_core(&runtime, state_options, options, Lifetime::OneShot, None)?;
    let table = core.tools();
    let rows: Vec<_> = table
        .entries()
        .iter()
        .map(|entry| {
            let facts = entry.facts();
            json!({
                "name": entry.name(),
                "origin": entry.origin().to_string(),
                "risk": facts.effective_risk,
                "declaredRisk": facts.declared_risk,
                "capabilities": facts.capabilities.to_vec(),
                "concurrencySafe": entry.tool().concurrency_safe(),
                "deferred": entry.is_deferred(),
                "description": entry.tool().description(),
                "inputSchema": entry.input_schema(),
            })
        })
        .collect();
    if out.json {
        out.json_line(&json!({
            "tools": rows,
            "toolSchemaSha256": core.initial_tool_schema_sha256(),
        }))?;
        return Ok(0);
    }
    let mut table =
        crate::output::Table::with_header(&["tool", "risk", "safe", "deferred", "capabilities"]);
    for row in &rows {
        let capabilities: Vec<&str> = row["capabilities"]
            .as_array()
            .map(|list| list.iter().filter_map(|c| c.as_str()).collect())
            .unwrap_or_default();
        let risk = row["risk"].as_str().unwrap_or_default();
        let risk_style = match risk {
            "read" => crate::output::style::ADDED,
            "workspace-write" => crate::output::style::WARNING,
            _ => crate::output::style::ERROR,
        };
        let yes_no = |yes: bool| if yes { "yes" } else { "no" };
        table.row(vec![
            crate::output::paint(
                crate::output::style::TOOL,
                row["name"].as_str().unwrap_or_default(),
            ),
            crate::output::paint(risk_style, risk),
            yes_no(row["concurrencySafe"] == true).to_owned(),
            yes_no(row["deferred"] == true).to_owned(),
            crate::output::paint(crate::output::style::DIM, capabilities.join(", ")),
        ]);
    }
    out.raw(&table.render())?;
    Ok(0)
}

pub fn call(
    state_options: &StateOptions,
    options: &CoreOptions,
    (tool, arguments): (&str, &str),
    pretty: bool,
    out: &Output,
) -> Result<ToolStatus> {
    // The called tool's schema is compiled on this thread when the call is checked, unless the
    // tool vouches for the arguments (the file tools' typed parse: `Tool::vouches_for_input`),
    // when none is. A second thread used to build jsonschema's 2020-12 meta-schema validator
    // meanwhile (~1.4 ms of processor time); shipped schemas no longer need it
    // (`compile_shipped` in clawsmith-core's table.rs), and what is left (~0.3 ms) cost no more
    // here than a thread's start, stack and malloc arena (processor time and page
    // faults, measured alternately).
    let mut state_options = state_options.clone();
    let session_id = match &options.session {
        Some(_) => options.named_session(),
        None => {
            // Calls share the day's session; a second `call` waits for the first rather
            // than failing with "session … is in use".
            state_options.lease_wait = LeaseWait::Wait;
            Some(daily_call_session(&options.workspace)?)
        }
    };
    let runtime = one_call_runtime()?;
    // One call runs one command at most: no warm spare for a next one.
    let core = build_core(&runtime, &state_options, options, Lifetime::OneCall, None)?;
    let waits = state_options.lease_wait == LeaseWait::Wait;
    let session = open_session_saying_when_waiting(&core, session_id, waits)?;
    tracing::debug!(session = session.id(), "call session");
    let call = ToolCall {
        // Unique anyway (ids need only be unique within a turn): the id names this call in the
        // journal, events and `session show` of a continued session.
        id: clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Call),
        name: tool.to_owned(),
        arguments: arguments.to_owned(),
    };
    let sink = clawsmith_core::NullSink;
    let searched = calls_search(std::slice::from_ref(&call));
    // The one request of this one-call turn is stored with the turn's start (A9 evidence),
    // without copies of the shown tools' schemas: nothing here sends them. The batch is the
    // turn's last, as in the MCP server: a call that guards no side effect is recorded by the
    // finish's commit, so a read is one commit in all (the turn's start and request, the call,
    // `turn.completed`, the checkpoint's close); a side-effecting call still commits the turn's
    // start and its journal entry before it runs (a read's two commits were ~0.2 ms of
    // the process).
    let mut turn = session.begin_turn(
        &sink,
        clawsmith_core::TurnOptions {
            parent: None,
            request: OpeningRequest::NamesOnly,
        },
    )?;
    let results = runtime.block_on(turn.run_batch(
        vec![call],
        &sink,
        BatchOptions {
            last: true,
            ..BatchOptions::default()
        },
    ))?;
    turn.finish(&sink)?;
    keep_activations(&session, searched, &sink)?;
    let Some(first) = results.into_iter().next() else {
        bail!("the core produced no result for the call");
    };
    if pretty || (!out.json && std::io::stdout().is_terminal()) {
        out.raw(&crate::timeline::call_result(tool, &first.1))?;
    } else {
        out.json_line(&first.1)?;
    }
    if tool == "start_command" && first.1.status() == ToolStatus::Success {
        note_background_commands_end();
    }
    if clawsmith_core::needs_an_approver(&first.1) && !options.yes {
        crate::output::notice(
            crate::output::Level::Help,
            format_args!(
                "approve this call with --yes, allow edits with --mode accept-edits (or \
                 everything with --mode full), or add an allow rule for {tool} to \
                 clawsmith.toml; `clawsmith policy check` explains the decision"
            ),
        );
    }
    // The process ends with this call: the session (its lease) and the core are dropped as
    // usual, but the store's connection is left to the exit once its log is closed as a drop
    // closes it (`Store::leave_to_exit`: freeing SQLite's schema, page cache and statements was
    // ~2% of the process's processor time). The call's records are committed above.
    let store = Arc::clone(core.store());
    drop(session);
    drop(core);
    store.leave_to_exit();
    Ok(first.1.status())
}

/// How long `call` waits for a session's lease before it says on stderr that it is waiting.
const WAIT_NOTICE_AFTER: std::time::Duration = std::time::Duration::from_millis(300);

/// [`AgentCore::open_session`], saying on stderr when the session is busy: a `call` that waits
/// for another process's lease (the day's session, `--wait`) would otherwise look hung. Only
/// when it `waits` does a watcher thread start; a lease taken at once ends it silently.
fn open_session_saying_when_waiting(
    core: &AgentCore,
    session_id: Option<String>,
    waits: bool,
) -> Result<SessionHandle> {
    let Some(name) = session_id.clone().filter(|_| waits) else {
        return Ok(core.open_session(session_id)?);
    };
    let (taken, watched) = std::sync::mpsc::channel::<()>();
    let watcher = std::thread::spawn(move || {
        if watched.recv_timeout(WAIT_NOTICE_AFTER)
            == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        {
            crate::output::notice(
                crate::output::Level::Note,
                format_args!(
                    "session {name} is in use by another clawsmith process; waiting for it to \
                     finish (Ctrl-C stops waiting)"
                ),
            );
        }
    });
    let session = core.open_session(session_id);
    drop(taken);
    // The watcher only prints; it has ended or ends now that the channel is closed.
    let _ = watcher.join();
    Ok(session?)
}

/// Runs one assistant message's calls as the model request they came from: the request is
/// recorded first (A9 evidence; `search_tools` hits found by an earlier request become active).
async fn run_request(
    turn: &mut Turn,
    calls: Vec<ToolCall>,
    sink: &dyn EventSink,
) -> Result<Vec<CallResult>> {
    turn.model_request(sink)?;
    Ok(turn.run_batch(calls, sink, BatchOptions::default()).await?)
}

/// A one-shot process's background commands end with it: said on stderr after a
/// `start_command`, so nobody waits for output that will not come.
fn note_background_commands_end() {
    crate::output::notice(
        crate::output::Level::Note,
        "background commands end with this process; within one `turn` a later call can read \
         them, and `clawsmith mcp` keeps them running across calls",
    );
}

/// Whether `calls` ask `search_tools`, whose hits are activated for the *next* request.
fn calls_search(calls: &[ToolCall]) -> bool {
    calls.iter().any(|call| call.name == "search_tools")
}

/// This process ends with its turn, and with it what `search_tools` activated for the next
/// request: record that request's tool list now, so the session's next `call` or `turn` (another
/// process) opens with the hits active.
fn keep_activations(session: &SessionHandle, searched: bool, sink: &dyn EventSink) -> Result<()> {
    if searched {
        session.model_request(sink)?;
    }
    Ok(())
}

/// Prints every event as it happens: one JSON line each, or the timeline with `--pretty`.
pub(crate) struct PrintingSink {
    /// `Some` with `--pretty`; the lock also keeps lines of parallel calls whole.
    timeline: Option<Mutex<crate::timeline::Timeline>>,
    lock: Mutex<()>,
    /// A "running …" line on stderr while a call runs (a terminal only).
    progress: bool,
}

impl PrintingSink {
    pub(crate) fn new(pretty: bool) -> PrintingSink {
        PrintingSink {
            timeline: pretty.then(|| {
                Mutex::new(crate::timeline::Timeline::new(
                    crate::output::Clock::system(),
                ))
            }),
            lock: Mutex::new(()),
            progress: pretty && crate::output::stderr_is_live(),
        }
    }
}

impl EventSink for PrintingSink {
    fn event(&self, event: &Event) {
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // A closed stdout must not take the turn down: the events are in the store anyway.
        let Some(timeline) = &self.timeline else {
            let mut stdout = std::io::stdout().lock();
            if serde_json::to_writer(&mut stdout, event).is_ok() {
                let _ = writeln!(stdout);
            }
            let _ = stdout.flush();
            return;
        };
        let text = timeline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(event);
        if self.progress {
            let mut stderr = anstream::stderr().lock();
            // The previous "running" line goes before anything else is printed.
            let _ = write!(stderr, "\r\x1b[2K");
            if let clawsmith_protocol::EventPayload::ToolStarted(started) = &event.payload {
                let _ = write!(
                    stderr,
                    "{} {} {}",
                    crate::output::paint(crate::output::style::DIM, "⋯ running"),
                    crate::output::paint(crate::output::style::TOOL, &started.tool_name),
                    crate::output::clip(started.summary.as_deref().unwrap_or_default(), 60)
                );
            }
            let _ = stderr.flush();
        }
        if !text.is_empty() {
            let mut stdout = anstream::stdout().lock();
            let _ = write!(stdout, "{text}");
            let _ = stdout.flush();
        }
    }
}

/// `turn`'s stdin: one assistant message's calls (`[call, …]`), or several messages (batches)
/// of one turn (`[[call, …], …]`). The shape is read from the first element, then the text is
/// parsed as that shape, so a wrong call is reported by serde with its line and column (an
/// untagged enum would only say that no variant matched).
fn turn_input(input: &str) -> Result<Vec<Vec<ToolCall>>> {
    let value: serde_json::Value = serde_json::from_str(input)?;
    let batches = value
        .as_array()
        .and_then(|items| items.first())
        .is_some_and(serde_json::Value::is_array);
    let parsed = if batches {
        serde_json::from_str::<Vec<Vec<TurnCall>>>(input)
    } else {
        serde_json::from_str::<Vec<TurnCall>>(input).map(|calls| vec![calls])
    };
    // serde names the Rust type it expected; people read what the input should be.
    let parsed = parsed.map_err(|error| {
        anyhow::anyhow!(
            "{}",
            error
                .to_string()
                .replace("struct TurnCall", "a tool call object")
        )
    })?;
    Ok(parsed
        .into_iter()
        .map(|calls| calls.into_iter().map(TurnCall::into_tool_call).collect())
        .collect())
}

/// One call of `turn`'s stdin: `arguments` is the JSON text of the arguments (OpenAI's form)
/// or the arguments object itself (Anthropic's `input`, accepted under either name).
#[derive(serde::Deserialize)]
struct TurnCall {
    id: String,
    name: String,
    #[serde(alias = "input", deserialize_with = "arguments_text")]
    arguments: String,
}

impl TurnCall {
    fn into_tool_call(self) -> ToolCall {
        ToolCall {
            id: self.id,
            name: self.name,
            arguments: self.arguments,
        }
    }
}

/// A string is taken as it is (the core reports malformed JSON in it as `invalid_json`); an
/// object is written back as JSON text.
fn arguments_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<String, D::Error> {
    use serde::Deserialize as _;
    use serde::de::Error as _;
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => Ok(text),
        object @ serde_json::Value::Object(_) => Ok(object.to_string()),
        other => Err(D::Error::custom(format_args!(
            "`arguments` must be a JSON object or a string holding one, not {other}"
        ))),
    }
}

/// The most `turn` reads from stdin (16 MiB): one turn's calls, never a whole file's worth of
/// memory per byte sent.
pub const MAX_TURN_INPUT_BYTES: u64 = 16 << 20;

/// The final line of `turn`, fields in contract order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnResult<'a> {
    r#type: &'static str,
    session_id: &'a str,
    turn_id: &'a str,
    results: Vec<CallLine<'a>>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CallLine<'a> {
    tool_call_id: &'a str,
    result: &'a clawsmith_protocol::ToolExecutionResult,
}

pub fn turn(
    state_options: &StateOptions,
    options: &CoreOptions,
    turn_options: &TurnOptions,
    out: &Output,
) -> Result<i32> {
    let mut input = String::new();
    std::io::stdin()
        .take(MAX_TURN_INPUT_BYTES + 1)
        .read_to_string(&mut input)
        .context("reading the tool calls from stdin")?;
    if input.len() as u64 > MAX_TURN_INPUT_BYTES {
        bail!(
            "stdin holds more than {} MiB of tool calls, the most `turn` reads; split the calls \
             over several turns",
            MAX_TURN_INPUT_BYTES >> 20
        );
    }
    let batches = turn_input(&input)
        .context(Help(
            "stdin must be a JSON array of tool calls, [{\"id\":\"c1\",\"name\":\"read_file\",\"arguments\":\"{...}\"}], \
             or an array of such arrays (one per assistant message of the turn)"
                .to_owned(),
        ))
        .context("stdin is not a turn")?;
    let runtime = runtime()?;
    let core = build_core(&runtime, state_options, options, Lifetime::OneShot, None)?;
    let session = core.open_session(options.named_session())?;
    let sink = PrintingSink::new(turn_options.pretty);
    let mut turn = session.begin_turn(&sink, clawsmith_core::TurnOptions::default())?;
    let mut results = Vec::new();
    let mut searched = false;
    let started_background = batches
        .iter()
        .flatten()
        .any(|call| call.name == "start_command");
    for calls in batches {
        searched |= calls_search(&calls);
        results.extend(runtime.block_on(run_request(&mut turn, calls, &sink))?);
    }
    let session_id = turn.session_id().to_owned();
    let turn_id = turn.id().to_owned();
    turn.finish(&sink)?;
    keep_activations(&session, searched, &sink)?;
    if started_background {
        note_background_commands_end();
    }
    if turn_options.pretty && !out.json {
        return Ok(0);
    }
    out.json_line(&TurnResult {
        r#type: "turn.result",
        session_id: &session_id,
        turn_id: &turn_id,
        results: results
            .iter()
            .map(|(id, result)| CallLine {
                tool_call_id: id,
                result,
            })
            .collect(),
    })?;
    Ok(0)
}

/// `mcp --http`: where and for whom the Streamable HTTP transport is served.
#[derive(Debug, Clone, clap::Args)]
pub struct McpHttpOptions {
    /// Serve MCP's Streamable HTTP transport on this address (e.g. 127.0.0.1:8765; port 0
    /// picks one) instead of stdio. Every request needs `Authorization: Bearer <token>`: the
    /// token is $CLAWSMITH_MCP_TOKEN, or a new one printed on stderr.
    #[arg(long, value_name = "ADDRESS")]
    pub http: Option<std::net::SocketAddr>,
    /// A browser origin allowed to call the HTTP server (repeatable); requests from any other
    /// origin are refused.
    #[arg(long = "http-allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allowed_origins: Vec<String>,
    /// Requests the HTTP server serves at once; one more is refused with 503.
    #[arg(long = "http-max-requests", value_name = "N", requires = "http",
          default_value_t = clawsmith_mcp::DEFAULT_MAX_CONCURRENT_REQUESTS as u64,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_requests: u64,
    /// Server streams (GET) the HTTP server keeps open at once, apart from the requests; one
    /// more is refused with 503.
    #[arg(long = "http-max-streams", value_name = "N", requires = "http",
          default_value_t = clawsmith_mcp::DEFAULT_MAX_STREAMS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub max_streams: u64,
    /// Seconds a server stream may go without an event before the server closes it.
    #[arg(long = "http-stream-idle", value_name = "SECONDS", requires = "http",
          default_value_t = clawsmith_mcp::DEFAULT_STREAM_IDLE.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub stream_idle: u64,
}

/// The variable `mcp --http` takes its bearer token from.
pub const MCP_TOKEN_VAR: &str = "CLAWSMITH_MCP_TOKEN";

/// `clawsmith mcp-login SERVER`: the OAuth authorization code flow for the remote server
/// `server` of the configuration, its tokens stored where the MCP client reads them.
pub fn mcp_login(
    state_dir: &Path,
    server: &str,
    config: Option<&Path>,
    timeout: std::time::Duration,
    out: &Output,
) -> Result<i32> {
    state::prepare_state_dir(state_dir)?;
    let config_file = config_file(state_dir, config)?;
    let mcp = mcp_config(config_file.as_deref())?.unwrap_or_default();
    let Some(entry) = mcp.mcp_servers.iter().find(|entry| entry.name == server) else {
        let known: Vec<&str> = mcp
            .mcp_servers
            .iter()
            .map(|entry| entry.name.as_str())
            .collect();
        bail!(
            "no MCP server named `{server}` in {} (servers: {})",
            config_file.as_deref().map_or_else(
                || "the configuration (there is no clawsmith.toml)".to_owned(),
                |path| path.display().to_string()
            ),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    let credentials =
        state::canonical_even_if_missing(state_dir)?.join(clawsmith_mcp::CREDENTIALS_DIR);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(clawsmith_mcp::login(
        entry,
        &credentials,
        |url| {
            crate::output::notice(
                crate::output::Level::Help,
                format!(
                    "open this URL in a browser to authorize clawsmith at `{server}` (waiting {} s for the redirect to 127.0.0.1):\n\n  {url}\n",
                    timeout.as_secs()
                ),
            );
        },
        timeout,
    ))?;
    let file = clawsmith_mcp::FileCredentialStore::new(&credentials, server);
    if out.json {
        out.json_line(&serde_json::json!({
            "server": server,
            "credentials": file.path(),
        }))?;
    } else {
        out.line(&format!(
            "authorized: the tokens for `{server}` are in {}",
            file.path().display()
        ))?;
    }
    Ok(crate::exit::OK)
}

/// `mcp`: the frozen table over the Model Context Protocol on stdio (or HTTP), one long-lived
/// session.
pub fn mcp(
    state_options: &StateOptions,
    options: &CoreOptions,
    http: &McpHttpOptions,
) -> Result<i32> {
    let state_dir = state_options.dir.as_path();
    // clawsmith-mcp: a second worker keeps timeouts and signals live while a file tool works.
    let runtime = clawsmith_mcp::stdio_runtime().context("starting the async runtime")?;
    let eliciting = clawsmith_mcp::ElicitingApprover::new();
    let approver: Arc<dyn Approver> = eliciting.clone();
    // Checked before anything is created in the state directory; the log directory of this
    // process's background commands is removed again when the server ends.
    state::ensure_outside(state_dir, &options.workspace)?;
    state::prepare_state_dir(state_dir)?;
    let command_logs = state::command_log_dir(state_dir)?;
    let core = build_core(
        &runtime,
        state_options,
        options,
        Lifetime::LongLived {
            command_logs: command_logs.path(),
        },
        Some(approver),
    )?;
    let server_options = clawsmith_mcp::ServerOptions {
        session_id: options.named_session(),
        approver: (!options.yes).then_some(eliciting),
        ..Default::default()
    };
    let Some(address) = http.http else {
        runtime
            .block_on(clawsmith_mcp::serve_stdio(Arc::new(core), server_options))
            .context("serving MCP on stdio")?;
        return Ok(0);
    };
    let (token, generated) = match clawsmith_sandbox::credential(MCP_TOKEN_VAR) {
        Some(token) => (token, false),
        None => (
            clawsmith_core::fs::secret::new_secret().context("drawing a token")?,
            true,
        ),
    };
    let http_options = clawsmith_mcp::HttpOptions {
        allowed_origins: http.allowed_origins.clone(),
        max_concurrent_requests: usize::try_from(http.max_requests).unwrap_or(usize::MAX),
        max_streams: usize::try_from(http.max_streams).unwrap_or(usize::MAX),
        stream_idle: std::time::Duration::from_secs(http.stream_idle),
        ..clawsmith_mcp::HttpOptions::new(token.clone())
    };
    runtime.block_on(async {
        let server =
            clawsmith_mcp::HttpServer::bind(address, Arc::new(core), server_options, http_options)
                .await
                .context("starting the MCP HTTP server")?;
        let token_note = if generated {
            format!("bearer token {token}")
        } else {
            format!("bearer token from ${MCP_TOKEN_VAR}")
        };
        eprintln!(
            "clawsmith mcp: serving {} (session {}); {token_note}",
            server.url(),
            server.session_id()
        );
        let stop = async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut terminate), Ok(mut interrupt)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        };
        server
            .serve_until(stop)
            .await
            .context("serving MCP over HTTP")
    })?;
    Ok(0)
}
