//! Running one command to completion (C2): shell, working directory, environment, limits,
//! sandbox, process group, timeout, merged and bounded output.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clawsmith_protocol::{CancellationSignal, ErrorCode, TraceHeaders};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

use crate::child;
use crate::classify::{CommandVerdict, check_command};
use crate::config::{SandboxConfig, SandboxPolicy};
use crate::direct;
use crate::egress::NetworkEvent;
use crate::env::command_environment;
use crate::git_guard::GitLock;
use crate::output::BoundedOutput;
use crate::platform::{self, SandboxReport, Target, Unavailable, World};

/// How long to keep reading after the shell exited and its group was killed, in case a process
/// that left the group still holds the output pipe.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// A program and its arguments, run without a shell in between: the entry point for processes
/// whose words are known (hooks, MCP servers, language servers, plugin tools), so their words
/// are never joined into shell text to be parsed back.
///
/// The program is `exec`ed as it is when it is an absolute path or a bare name found on the
/// command's `PATH`. Otherwise (a relative path, a name not found, a file that is not an
/// executable) bash runs [`Argv::script`], the same words quoted, and reports the failure as it
/// would. The disaster check reads that text too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argv {
    /// The program: an absolute path or a name looked up on `PATH`.
    pub program: String,
    pub args: Vec<String>,
    /// Variables set for the process on top of its command environment (a language server's
    /// `HOME`, a plugin's root).
    pub env: Vec<(String, String)>,
}

impl Argv {
    /// `program` with `args` and no extra variables.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Argv {
        Argv {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
        }
    }

    /// The same with `name=value` set for the process.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Argv {
        self.env.push((name.into(), value.into()));
        self
    }

    /// `exec 'program' 'arg' …`: shell text that runs exactly these words, for the disaster
    /// check, for people (logs, displays), and for bash when the program cannot be `exec`ed
    /// directly.
    pub fn script(&self) -> String {
        let mut script = String::from("exec");
        for word in std::iter::once(&self.program).chain(&self.args) {
            script.push(' ');
            script.push_str(&shell_quote(word));
        }
        script
    }
}

/// `text` as one single-quoted shell word.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRequest {
    /// The `bash -c` script; for an [`Argv`] request, its [`Argv::script`].
    pub command: String,
    /// The program and arguments to run without a shell, when the request was made from them
    /// ([`CommandRequest::argv`]).
    pub argv: Option<Argv>,
    /// Working directory, relative to the workspace or absolute inside it.
    pub cwd: Option<String>,
    /// Timeout; `None` means the configured default.
    pub timeout: Option<Duration>,
    /// Bytes written to the command's standard input through a pipe, which is closed after
    /// them (a command that exits without reading them is not an error); `None`: stdin is
    /// `/dev/null`. Plugin tools get their call's arguments this way.
    pub stdin: Option<Vec<u8>>,
    /// Keep stderr apart ([`CommandOutcome::stderr`]) instead of merging it into `output`,
    /// for callers that parse stdout (plugin tools print a JSON result there).
    pub separate_stderr: bool,
    /// The calling tool call's trace context: the command gets it as `TRACEPARENT` (and
    /// `TRACESTATE`); `None` leaves both unset, whatever the host's environment holds.
    pub trace: Option<TraceHeaders>,
}

impl CommandRequest {
    /// A request for `command` in the workspace root with the default timeout.
    pub fn new(command: impl Into<String>) -> CommandRequest {
        CommandRequest {
            command: command.into(),
            argv: None,
            cwd: None,
            timeout: None,
            stdin: None,
            separate_stderr: false,
            trace: None,
        }
    }

    /// A request for `argv`, run without a shell, in the workspace root with the default
    /// timeout.
    pub fn argv(argv: Argv) -> CommandRequest {
        CommandRequest {
            argv: Some(argv.clone()),
            ..CommandRequest::new(argv.script())
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl std::fmt::Display for ExitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitKind::Code(code) => write!(f, "exit code {code}"),
            ExitKind::Signal(signal) => match Signal::try_from(*signal) {
                Ok(name) => write!(f, "killed by signal {signal} ({})", name.as_str()),
                Err(_) => write!(f, "killed by signal {signal}"),
            },
        }
    }
}

/// Why clawsmith stopped a command before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The timeout elapsed; the whole group got TERM, then KILL.
    TimedOut(Duration),
    /// It printed more than the configured kill threshold.
    OutputLimit(u64),
    /// The call was cancelled.
    Cancelled,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::TimedOut(after) => write!(
                f,
                "timed out after {} ms; the whole process group was killed",
                after.as_millis()
            ),
            StopReason::OutputLimit(bytes) => write!(
                f,
                "killed after printing more than {bytes} bytes; the whole process group was killed"
            ),
            StopReason::Cancelled => write!(f, "cancelled; the whole process group was killed"),
        }
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Exit code or signal.
    pub exit: ExitKind,
    /// Merged stdout and stderr (stdout alone with [`CommandRequest::separate_stderr`]),
    /// bounded, with a truncation marker when cut.
    pub output: String,
    /// stderr, bounded like `output`, when the request kept it apart; `None` otherwise.
    pub stderr: Option<String>,
    /// Whether output was cut.
    pub truncated: bool,
    /// Bytes the command printed in total.
    pub total_output_bytes: u64,
    /// Set when clawsmith stopped the command.
    pub stopped: Option<StopReason>,
    /// What the sandbox enforced.
    pub sandbox: SandboxReport,
    /// The command's process group (= session) id; nothing in it survives the call.
    pub process_group: i32,
    /// Wall time.
    pub duration: Duration,
    /// Code paths of the workspace repository the command created and clawsmith took back
    /// (`.git/commondir`, a planted hook in a new repository, `.git/config: core.fsmonitor`, …).
    pub git_restored: Vec<String>,
    /// With a network allowlist: each distinct connection the gateway allowed or refused while
    /// the command ran, and each name the DNS stub refused, in the order they first happened.
    pub network: Vec<NetworkEvent>,
    /// Network events not in `network` (beyond its first distinct ones).
    pub network_unlisted: u64,
    /// Whether another command ran in the same network namespace meanwhile: `network` then
    /// holds its connections too.
    pub network_shared: bool,
}

/// Why a command did not run (or broke while running).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The disaster check refused it.
    #[error("command blocked by the disaster check ({}): {}", .0.rule.unwrap_or("?"), .0.reason)]
    Blocked(CommandVerdict),
    /// `cwd` lies outside the workspace.
    #[error("Path is outside the workspace: {0}")]
    OutsideWorkspace(String),
    /// `cwd` does not exist or is not a directory.
    #[error("working directory {path} is not a directory inside the workspace: {cause}")]
    BadCwd {
        /// As requested.
        path: String,
        /// What the filesystem said (quoted in the message, so not also the source).
        cause: io::Error,
    },
    /// The workspace root cannot be resolved.
    #[error("workspace root {path} cannot be used: {cause}")]
    Workspace {
        /// The configured root.
        path: PathBuf,
        /// What the filesystem said (quoted in the message, so not also the source).
        cause: io::Error,
    },
    /// The workspace root is no longer the directory the session opened (it was swapped, e.g.
    /// for a symlink, since).
    #[error(
        "the workspace root {0} was replaced since the session opened it; refusing to run the \
         command (reopen the workspace)"
    )]
    WorkspaceReplaced(PathBuf),
    /// The timeout is zero or above the maximum.
    #[error("timeoutMs must be between 1 and {max_ms}, got {requested_ms}")]
    InvalidTimeout {
        /// As requested.
        requested_ms: u128,
        /// The configured maximum.
        max_ms: u128,
    },
    /// The policy requires the sandbox and the kernel cannot provide it.
    #[error("the sandbox is required but unavailable: {0}; refusing to run the command")]
    SandboxUnavailable(String),
    /// Spawning failed.
    #[error("failed to start the command: {0}")]
    Spawn(io::Error),
    /// Reading output or waiting failed.
    #[error("I/O error while running the command: {0}")]
    Io(io::Error),
}

impl RunError {
    /// The protocol code a tool reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            RunError::Blocked(_) => ErrorCode::COMMAND_BLOCKED,
            RunError::OutsideWorkspace(_)
            | RunError::BadCwd { .. }
            | RunError::InvalidTimeout { .. } => ErrorCode::INVALID_ARGUMENTS,
            RunError::SandboxUnavailable(_) => ErrorCode::SANDBOX_UNAVAILABLE,
            RunError::Workspace { .. }
            | RunError::WorkspaceReplaced(_)
            | RunError::Spawn(_)
            | RunError::Io(_) => ErrorCode::TOOL_FAILED,
        }
    }
}

/// How the child's standard streams are wired.
pub(crate) enum ChildIo {
    /// stdin from /dev/null or a pipe, stdout+stderr into one pipe or stderr into its own
    /// (run_command).
    Pipe {
        input: Option<OwnedFd>,
        output: OwnedFd,
        errors: Option<OwnedFd>,
    },
    /// stdin from a pipe, stdout+stderr into another (background, no PTY).
    PipeWithInput { input: OwnedFd, output: OwnedFd },
    /// All three on a PTY slave, which becomes the controlling terminal.
    Pty { slave: OwnedFd },
    /// A pipe each (long-lived servers speaking on stdout, logging on stderr).
    Pipes {
        stdin: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
    },
}

/// The process clawsmith waits for: spawned through tokio, or a warm spare's relay.
pub(crate) enum Relay {
    Spawned(tokio::process::Child),
    Spare(Box<crate::spare::SpareChild>),
}

impl Relay {
    /// Waits for it to exit (and reaps it).
    pub(crate) async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        match self {
            Relay::Spawned(child) => child.wait().await,
            Relay::Spare(child) => child.wait().await,
        }
    }
}

/// A spawned command with everything that must live as long as it.
pub(crate) struct Spawned {
    pub(crate) child: Relay,
    pub(crate) tree: ProcessTree,
    pub(crate) report: SandboxReport,
    /// The host temp dir of a command in the host's view; removed when dropped. A command in
    /// the built view has a private tmpfs `/tmp` that dies with its mount namespace.
    pub(crate) temp_dir: Option<tempfile::TempDir>,
    /// The workspace's repositories before the command (see `git_guard`).
    pub(crate) git: Option<crate::git_guard::Repositories>,
    /// What the spawn was prepared from (the program, arguments, environment and the child's
    /// setup, with our copies of its standard streams already closed), dropped only once the
    /// tree is gone: until the relay ends, the pages this memory lives on are shared
    /// copy-on-write with it, and freeing it right after the spawn cost a fault and a page copy
    /// each (a profile of a spawn: a fifth of the calling process's page faults).
    pub(crate) plan: Option<tokio::process::Command>,
    /// The read end of the command's output when it is not the caller's pipe (a warm spare
    /// brings its own: `spare.rs`).
    pub(crate) output: Option<OwnedFd>,
    /// The gateway's events from the command's start, when its network is an allowlist.
    pub(crate) network: Option<crate::egress::Watch>,
}

/// The processes of one command, as clawsmith can reach them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessTree {
    /// The pid of the process clawsmith spawned; its process group (= session) id too.
    pub(crate) pid: i32,
    /// Whether that process is the relay of a PID namespace (see the `child` module): then the
    /// relay's exit means the whole tree is gone, and `SIGUSR1` to it is the hard stop.
    pub(crate) relay: bool,
}

impl ProcessTree {
    /// The command's process group id, shown to callers.
    pub(crate) fn process_group(self) -> i32 {
        self.pid
    }
}

/// Signals a command's tree. `SIGTERM` goes to its process group (the relay, the init and a
/// shell that made no job-control groups ignore it or pass it on). A hard stop (`SIGKILL`) of a
/// namespaced tree is `SIGUSR1` to its relay, which kills the init and with it every process of
/// the PID namespace, whatever sessions or groups they made. A tree in the host's view is
/// signalled group by group, from `/proc` (a process that left the session with `setsid` is out
/// of reach there; see the crate docs). Call it only while the spawned process is unreaped.
pub(crate) fn kill_tree(tree: ProcessTree, signal: Signal) {
    let session = tree.pid;
    if session <= 0 {
        return;
    }
    if tree.relay {
        if signal == Signal::SIGKILL {
            crate::child::signal_process(session, libc::SIGUSR1);
        } else {
            let _ = killpg(Pid::from_raw(session), signal);
        }
        return;
    }
    let _ = killpg(Pid::from_raw(session), signal);
    let mut groups: Vec<i32> = live_session_members(session)
        .into_iter()
        .map(|(_, group)| group)
        .filter(|group| *group != session)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    for group in groups {
        let _ = killpg(Pid::from_raw(group), signal);
    }
}

/// `(pid, process group)` of the live (non-zombie) processes of `session`, from `/proc`.
fn live_session_members(session: i32) -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp session …`; comm may contain spaces and parentheses.
        let Some((pid, rest)) = stat.split_once(" (").and_then(|(pid, _)| {
            stat.rsplit_once(')')
                .map(|(_, rest)| (pid.to_owned(), rest.to_owned()))
        }) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(group), Some(member_session)) =
            (fields.first(), fields.get(2), fields.get(3))
        else {
            continue;
        };
        if *state == "Z" || member_session.parse::<i32>().ok() != Some(session) {
            continue;
        }
        if let (Ok(pid), Ok(group)) = (pid.parse(), group.parse()) {
            members.push((pid, group));
        }
    }
    members
}

/// Checks a requested timeout against the configuration.
pub(crate) fn effective_timeout(
    config: &SandboxConfig,
    requested: Option<Duration>,
) -> Result<Duration, RunError> {
    let timeout = requested.unwrap_or(config.default_timeout);
    if timeout.is_zero() || timeout > config.max_timeout {
        return Err(RunError::InvalidTimeout {
            requested_ms: timeout.as_millis(),
            max_ms: config.max_timeout.as_millis(),
        });
    }
    Ok(timeout)
}

/// A command text that passed the disaster check. [`spawn_checked`] takes only this, so every
/// way to start a process passes the check, and each passes it once: the entry points check
/// first, before any other argument or sandbox work, and a blocked command comes back as
/// [`RunError::Blocked`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cleared<'a> {
    /// The shell text (an argv request's quoted words).
    text: &'a str,
    argv: Option<&'a Argv>,
}

impl<'a> Cleared<'a> {
    /// Runs the disaster check on `command`.
    pub(crate) fn check(command: &'a str) -> Result<Self, RunError> {
        Self::check_request(command, None)
    }

    /// Runs the disaster check on `text`, the shell text of `argv` when there is one.
    pub(crate) fn check_request(text: &'a str, argv: Option<&'a Argv>) -> Result<Self, RunError> {
        let verdict = check_command(text);
        if verdict.is_blocked() {
            return Err(RunError::Blocked(verdict));
        }
        Ok(Cleared { text, argv })
    }
}

/// Cwd check, sandbox plan, spawn: the steps every command goes through after its disaster
/// check. `git_lock` says how much of the repositories' git dirs the view makes read-only.
pub(crate) fn spawn_checked(
    config: &SandboxConfig,
    Cleared {
        text: command,
        argv,
    }: Cleared<'_>,
    cwd: Option<&str>,
    io: ChildIo,
    trace: Option<&TraceHeaders>,
    git_lock: GitLock,
) -> Result<Spawned, RunError> {
    let workspace = config
        .workspace_root
        .canonicalize()
        .map_err(|cause| RunError::Workspace {
            path: config.workspace_root.clone(),
            cause,
        })?;
    let identity = platform::identity_of(&workspace).map_err(|cause| RunError::Workspace {
        path: config.workspace_root.clone(),
        cause,
    })?;
    if config
        .workspace_identity
        .is_some_and(|expected| expected != identity)
    {
        return Err(RunError::WorkspaceReplaced(config.workspace_root.clone()));
    }
    let cwd = resolve_cwd(&workspace, cwd)?;
    // run_command without input and with merged output may take a warm spare (`spare.rs`),
    // unless the configuration turns them off.
    let spare = config.warm_spares
        && matches!(
            io,
            ChildIo::Pipe {
                input: None,
                errors: None,
                ..
            }
        );
    let git = (config.policy != SandboxPolicy::Off).then(|| {
        crate::git_guard::Repositories::before(&workspace, git_lock, config.workspace_writable)
    });
    let request = SpawnRequest {
        config,
        command,
        argv,
        repositories: git.as_ref(),
        workspace: &workspace,
        identity,
        cwd: &cwd,
        io: &io,
        trace,
        spare,
    };
    if config.policy == SandboxPolicy::Off {
        return request
            .spawn(World::HostView)
            .map_err(SpawnFailure::into_run_error);
    }
    let spawned = match request.spawn(World::Built) {
        Ok(spawned) => Ok(spawned),
        Err(SpawnFailure::Setup(reason)) if config.policy == SandboxPolicy::BestEffort => {
            let mut spawned = request
                .spawn(World::HostView)
                .map_err(SpawnFailure::into_run_error)?;
            spawned.report.filesystem = format!(
                "{} [built view unavailable: {reason}]",
                spawned.report.filesystem
            );
            Ok(spawned)
        }
        Err(failure) => Err(failure.into_run_error()),
    };
    spawned.map(|spawned| Spawned { git, ..spawned })
}

/// Why one attempt to spawn failed.
enum SpawnFailure {
    /// The sandbox could not be set up (in the parent or the child).
    Setup(String),
    /// The prepared base view no longer covers what it must (see `platform::forget_bases`).
    StaleView,
    /// A command `exec`ed without bash could not be started: run it through bash instead.
    Direct,
    /// Anything else, final.
    Run(RunError),
}

impl SpawnFailure {
    fn into_run_error(self) -> RunError {
        match self {
            SpawnFailure::Setup(reason) => RunError::SandboxUnavailable(reason),
            SpawnFailure::StaleView => RunError::SandboxUnavailable(
                "the command's view went stale twice while it was being prepared".to_owned(),
            ),
            SpawnFailure::Direct => RunError::SandboxUnavailable(
                "the command could not be started without a shell".to_owned(),
            ),
            SpawnFailure::Run(error) => error,
        }
    }
}

struct SpawnRequest<'a> {
    config: &'a SandboxConfig,
    /// The shell text (an argv request's quoted words: bash's fallback).
    command: &'a str,
    /// The words to `exec` without a shell, when the request has them.
    argv: Option<&'a Argv>,
    repositories: Option<&'a crate::git_guard::Repositories>,
    workspace: &'a Path,
    identity: (u64, u64),
    cwd: &'a Path,
    io: &'a ChildIo,
    trace: Option<&'a TraceHeaders>,
    /// Whether a warm spare may run it.
    spare: bool,
}

impl SpawnRequest<'_> {
    /// One attempt, and a second one on a freshly built view when the relay found the prepared
    /// one stale (a covered path replaced on the host since it was built).
    fn spawn(&self, world: World) -> Result<Spawned, SpawnFailure> {
        match self.spawn_shell_or_direct(world) {
            Err(SpawnFailure::StaleView) => {
                platform::forget_bases();
                self.spawn_shell_or_direct(world)
            }
            other => other,
        }
    }

    /// A plain command is `exec`ed without bash (see `direct`); if that spawn fails — before
    /// anything ran — the same command goes through bash, whose result is the final one.
    fn spawn_shell_or_direct(&self, world: World) -> Result<Spawned, SpawnFailure> {
        match self.spawn_once(world, true) {
            Err(SpawnFailure::Direct) => self.spawn_once(world, false),
            other => other,
        }
    }

    fn spawn_once(&self, world: World, allow_direct: bool) -> Result<Spawned, SpawnFailure> {
        let config = self.config;
        let temp_dir = match world {
            World::Built => None,
            // tempfile makes the directory 0700.
            World::HostView => {
                let mut temp = tempfile::Builder::new();
                temp.prefix("clawsmith-cmd-");
                Some(
                    match &config.temp_root {
                        Some(root) => temp.tempdir_in(root),
                        None => temp.tempdir(),
                    }
                    .map_err(|e| SpawnFailure::Run(RunError::Io(e)))?,
                )
            }
        };
        let temp_path = match &temp_dir {
            Some(dir) => dir
                .path()
                .canonicalize()
                .unwrap_or_else(|_| dir.path().to_path_buf()),
            None => PathBuf::from("/tmp"),
        };
        let pty_slave = match self.io {
            ChildIo::Pty { slave } => Some(
                std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd()))
                    .map_err(|e| SpawnFailure::Run(RunError::Spawn(e)))?,
            ),
            _ => None,
        };
        let pty = pty_slave.is_some();
        let mut env = command_environment(
            std::env::vars_os(),
            &config.env_allow,
            &temp_path,
            self.trace,
        );
        // The view hides the user's git configuration; their identity still signs commits.
        if let Some(home) = config.home_dir() {
            for (name, value) in crate::env::git_identity(&home) {
                if !env.iter().any(|(existing, _)| *existing == name) {
                    env.push((name, value));
                }
            }
        }
        // An allowlisted network is reached through the gateway's proxy inside the namespace;
        // the host's own proxy settings would lead nowhere there.
        if config.egress.is_some() && !config.network_allowed {
            for (name, value) in crate::egress::proxy_environment() {
                env.retain(|(existing, _)| existing != name);
                env.push((name.into(), value.into()));
            }
        }
        // What the user listed for this process by name (an MCP server's API key) passes as the
        // host has it; command profiles have none.
        for name in &config.env_exact {
            if let Some(value) = std::env::var_os(name) {
                env.retain(|(existing, _)| existing != name.as_str());
                env.push((name.into(), value));
            }
        }
        if let Some(argv) = self.argv {
            for (name, value) in &argv.env {
                env.retain(|(existing, _)| existing != name.as_str());
                env.push((name.into(), value.into()));
            }
        }
        if pty {
            // The host's own TERM says nothing about the PTY clawsmith made; it renders ANSI.
            for (name, value) in &mut env {
                if name == "TERM" {
                    *value = "xterm-256color".into();
                }
            }
        }
        // The last word, after every source above: a withheld variable (a credential this
        // process read) reaches no process, whatever list named it.
        env.retain(|(name, _)| !crate::env::is_withheld(name));
        let target = Target {
            workspace: self.workspace,
            identity: self.identity,
            cwd: self.cwd,
            host_temp_dir: temp_dir.as_ref().map(|_| temp_path.as_path()),
            pty,
            pty_slave: pty_slave.as_deref(),
            repositories: self.repositories,
        };
        let mut plan = platform::plan(config, target, world)
            .map_err(|Unavailable(reason)| SpawnFailure::Setup(reason))?;
        let relay = plan.setup.namespaces.is_some();
        let network = plan
            .setup
            .namespaces
            .as_ref()
            .and_then(|namespaces| crate::egress::Watch::of(&namespaces.base));
        let (stdin, stdout, stderr) =
            stdio(self.io).map_err(|e| SpawnFailure::Run(RunError::Spawn(e)))?;
        let direct = match self.argv {
            // Words known as words are `exec`ed as they are whenever the program can be.
            Some(argv) if allow_direct => direct::locate(&argv.program, &argv.args, &env),
            // A program named without a slash would be searched for again by `execvp`; the
            // namespaced command `exec`s its path as it is (`child::ExecPlan`).
            None if allow_direct && shell() == "/bin/bash" => direct::resolve(self.command, &env)
                .filter(|direct| direct.program.as_os_str().as_bytes().contains(&b'/')),
            _ => None,
        };
        let (program, argv): (&Path, Vec<&OsStr>) = match &direct {
            Some(direct) => {
                direct::shell_variables(&mut env, self.cwd, &direct.program);
                let mut argv = vec![OsStr::new(&direct.name)];
                argv.extend(direct.args.iter().map(OsStr::new));
                (&direct.program, argv)
            }
            None => (
                Path::new(shell()),
                vec![
                    OsStr::new(shell()),
                    OsStr::new("-c"),
                    OsStr::new(self.command),
                ],
            ),
        };
        let exec = if relay {
            Some(
                child::ExecPlan::new(program.as_os_str(), &argv, &env)
                    .map_err(|e| SpawnFailure::Run(RunError::Spawn(e)))?,
            )
        } else {
            None
        };
        if let (Some(exec), true, World::Built) = (&exec, self.spare, world) {
            let started = self.start_spare(&plan, exec);
            // The next spare is made while this command runs: from this command's own setup
            // when a spare made it unnecessary.
            if !matches!(started, Some(Ok(_))) {
                crate::spare::order(config, self.workspace, self.identity);
            }
            match started {
                Some(Ok(starting)) => {
                    // The init said "starting": the command is this spare's now, so the next
                    // spare is ordered before the `exec` is waited for (a call that comes
                    // before it is ready waits for it).
                    crate::spare::order_from(plan.setup);
                    let (child, output) = starting.started().map_err(|error| {
                        self.spawn_error(error, direct.is_some(), relay, &plan.report)
                    })?;
                    let pid = child
                        .id()
                        .and_then(|id| i32::try_from(id).ok())
                        .unwrap_or(0);
                    return Ok(Spawned {
                        child: Relay::Spare(Box::new(child)),
                        tree: ProcessTree { pid, relay: true },
                        report: plan.report,
                        temp_dir,
                        git: None,
                        plan: None,
                        output: Some(output),
                        network,
                    });
                }
                Some(Err(error)) => {
                    return Err(self.spawn_error(error, direct.is_some(), relay, &plan.report));
                }
                None => {}
            }
        }
        let mut process = new_process(program, self.cwd, &env);
        process.arg0(argv[0]).args(&argv[1..]);
        plan.setup.exec = exec;
        process.stdin(stdin).stdout(stdout).stderr(stderr);
        plan.setup.install(&mut process);
        let child = match process.spawn() {
            Ok(child) => child,
            Err(error) => {
                return Err(self.spawn_error(error, direct.is_some(), relay, &plan.report));
            }
        };
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or(0);
        // Our copies of the child's ends of its pipes close now (end of file must come when
        // the command's side closes); the rest of the plan is kept (see `Spawned::plan`).
        process
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Ok(Spawned {
            child: Relay::Spawned(child),
            tree: ProcessTree { pid, relay },
            report: plan.report,
            temp_dir,
            git: None,
            plan: Some(process),
            output: None,
            network,
        })
    }

    /// Starts the command in the view's warm spare when one is ready and makes the same tree
    /// (see `spare.rs`), up to the init's "starting" word: `None` when there is none, its tree
    /// died, or the plan does not fit its buffers — the command then goes the ordinary way,
    /// nothing of it having run; `Some(Err)` with the error the command's setup failed with.
    fn start_spare(
        &self,
        plan: &platform::Plan,
        exec: &child::ExecPlan,
    ) -> Option<io::Result<crate::spare::Starting>> {
        let view = &plan.setup.namespaces.as_ref()?.view;
        let idle = crate::spare::take(&plan.setup)?;
        // Over the init's fixed capacity: the spare is dropped (killed), the ordinary way runs.
        let message = child::go_message(exec, view)?;
        match idle.start(&message) {
            Ok(starting) => Some(Ok(starting)),
            Err(crate::spare::SpareFailure::Dead) => None,
            Err(crate::spare::SpareFailure::Setup(error)) => Some(Err(error)),
        }
    }

    /// What a failed spawn (of either way) means.
    fn spawn_error(
        &self,
        error: io::Error,
        direct: bool,
        relay: bool,
        report: &SandboxReport,
    ) -> SpawnFailure {
        if direct {
            return SpawnFailure::Direct;
        }
        if error.raw_os_error() == Some(child::WORKSPACE_REPLACED_ERRNO) && relay {
            return SpawnFailure::Run(RunError::WorkspaceReplaced(
                self.config.workspace_root.clone(),
            ));
        }
        if error.raw_os_error() == Some(child::STALE_VIEW_ERRNO) && relay {
            return SpawnFailure::StaleView;
        }
        if report.confined
            && !matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            )
        {
            let help = if relay {
                format!("; {}", platform::USER_NAMESPACE_HELP)
            } else {
                String::new()
            };
            return SpawnFailure::Setup(format!(
                "setting up the sandbox in the child failed: {error}{help}"
            ));
        }
        SpawnFailure::Run(RunError::Spawn(error))
    }
}

fn stdio(io: &ChildIo) -> io::Result<(Stdio, Stdio, Stdio)> {
    Ok(match io {
        ChildIo::Pipe {
            input,
            output,
            errors,
        } => (
            match input {
                Some(input) => Stdio::from(input.try_clone()?),
                None => Stdio::null(),
            },
            Stdio::from(output.try_clone()?),
            Stdio::from(errors.as_ref().unwrap_or(output).try_clone()?),
        ),
        ChildIo::PipeWithInput { input, output } => (
            Stdio::from(input.try_clone()?),
            Stdio::from(output.try_clone()?),
            Stdio::from(output.try_clone()?),
        ),
        ChildIo::Pty { slave } => (
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave.try_clone()?),
            Stdio::from(slave.try_clone()?),
        ),
        ChildIo::Pipes {
            stdin,
            stdout,
            stderr,
        } => (
            Stdio::from(stdin.try_clone()?),
            Stdio::from(stdout.try_clone()?),
            Stdio::from(stderr.try_clone()?),
        ),
    })
}

/// The shell that runs a command's text: bash, or `sh` where there is no bash.
fn shell() -> &'static str {
    static SHELL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        }
    })
}

fn new_process(
    program: &Path,
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> tokio::process::Command {
    // The one place a model's command becomes a process (the power this crate owns).
    #[allow(clippy::disallowed_methods)]
    let mut process = tokio::process::Command::new(program);
    process
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    process
}

/// Resolves `cwd` inside the canonical `workspace`: a lexical check first (no probing outside),
/// then the real path must be inside too (no symlink escapes).
pub(crate) fn resolve_cwd(workspace: &Path, requested: Option<&str>) -> Result<PathBuf, RunError> {
    let Some(requested) = requested else {
        return Ok(workspace.to_path_buf());
    };
    let joined = workspace.join(requested);
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    if !normal.starts_with(workspace) {
        return Err(RunError::OutsideWorkspace(requested.to_owned()));
    }
    let real = normal.canonicalize().map_err(|cause| RunError::BadCwd {
        path: requested.to_owned(),
        cause,
    })?;
    if !real.starts_with(workspace) {
        return Err(RunError::OutsideWorkspace(requested.to_owned()));
    }
    if !real.is_dir() {
        return Err(RunError::BadCwd {
            path: requested.to_owned(),
            cause: io::Error::from(io::ErrorKind::NotADirectory),
        });
    }
    Ok(real)
}

/// Kills the tree when dropped, so an abandoned future leaves nothing behind. (A namespaced
/// tree also dies when tokio's `kill_on_drop` kills its relay.)
pub(crate) struct GroupGuard(pub(crate) Option<ProcessTree>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(tree) = self.0 {
            kill_tree(tree, Signal::SIGKILL);
        }
    }
}

/// Signals are delivered asynchronously: kills the session and waits (a bounded while) until no
/// live process of it is left, so callers can rely on "nothing survives the call". A namespaced
/// tree is gone once its relay was reaped; there is nothing to wait for.
pub(crate) async fn wait_tree_gone(tree: ProcessTree) {
    let session = tree.pid;
    if session <= 0 || tree.relay {
        return;
    }
    for _ in 0..200 {
        kill_tree(tree, Signal::SIGKILL);
        if live_session_members(session).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Signals the tree unless its spawned process was already reaped (its pid may be reused).
pub(crate) fn kill_unreaped(guard: &GroupGuard, signal: Signal) {
    if let Some(tree) = guard.0 {
        kill_tree(tree, signal);
    }
}

pub(crate) async fn maybe_sleep(sleep: &mut Option<Pin<Box<Sleep>>>) {
    match sleep {
        Some(sleep) => sleep.await,
        None => std::future::pending().await,
    }
}

/// Runs `request` to completion under `config` (disaster check, sandbox, limits, timeout).
pub async fn run_command(
    config: &SandboxConfig,
    request: &CommandRequest,
    cancellation: &CancellationSignal,
) -> Result<CommandOutcome, RunError> {
    let command = Cleared::check_request(&request.command, request.argv.as_ref())?;
    let timeout = effective_timeout(config, request.timeout)?;
    let pipe =
        || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| RunError::Spawn(e.into()));
    let (read_end, write_end) = pipe()?;
    let errors = request.separate_stderr.then(pipe).transpose()?;
    let input = request.stdin.as_ref().map(|_| pipe()).transpose()?;
    let (errors_read, errors_write) = errors.unzip();
    let (input_read, input_write) = input.unzip();
    // The read buffers are reserved, never zeroed: output is read into their spare capacity
    // (`read_buf`), so a page is only touched when output lands in it. Zeroing 64 KiB a call
    // was a third of the calling process's page faults in a profile of a spawn (16 fresh pages
    // each time: the freed buffer goes back to the top of the heap, which malloc trims).
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut errors_buffer: Vec<u8> = Vec::with_capacity(if request.separate_stderr {
        16 * 1024
    } else {
        0
    });
    let started = Instant::now();
    let spawned = spawn_checked(
        config,
        command,
        request.cwd.as_deref(),
        ChildIo::Pipe {
            input: input_read,
            output: write_end,
            errors: errors_write,
        },
        request.trace.as_ref(),
        GitLock::CodePaths,
    )?;
    // `ChildIo` (and with it our copy of the write end) is gone: EOF comes when the group ends.
    let Spawned {
        mut child,
        tree,
        report,
        temp_dir,
        git,
        plan,
        output,
        network,
    } = spawned;
    // A warm spare's command writes to the spare's own pipe (ours, unused, is closed).
    let read_end = output.unwrap_or(read_end);
    let mut guard = GroupGuard(Some(tree));
    let mut reader =
        tokio::net::unix::pipe::Receiver::from_owned_fd(read_end).map_err(RunError::Io)?;
    let mut capture = BoundedOutput::new(config.output_cap_bytes);
    // stderr apart: read like stdout; without it, it is at end of file from the start.
    let mut errors_reader = errors_read
        .map(tokio::net::unix::pipe::Receiver::from_owned_fd)
        .transpose()
        .map_err(RunError::Io)?;
    let mut errors_capture = BoundedOutput::new(config.output_cap_bytes);
    let mut errors_eof = errors_reader.is_none();
    // The input is written by a task of its own, so a command that reads slowly (or not at
    // all) never blocks the loop below; it ends with the call, whatever the command did.
    let _input_writer = match (input_write, &request.stdin) {
        (Some(input_write), Some(bytes)) => {
            let mut sender =
                tokio::net::unix::pipe::Sender::from_owned_fd(input_write).map_err(RunError::Io)?;
            let bytes = bytes.clone();
            Some(AbortOnDrop(tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                // EPIPE (the command exited without reading) is not the call's failure.
                let _ = sender.write_all(&bytes).await;
            })))
        }
        _ => None,
    };
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut kill_at: Option<Pin<Box<Sleep>>> = None;
    let mut drain_until: Option<Pin<Box<Sleep>>> = None;
    let mut status = None;
    let mut eof = false;
    let mut stopped = None;

    while !(eof && errors_eof && status.is_some()) {
        tokio::select! {
            read = read_errors(&mut errors_reader, &mut errors_buffer), if !errors_eof => {
                match read {
                    Ok(0) => errors_eof = true,
                    Ok(_) => {
                        errors_capture.push(&errors_buffer);
                        let total = capture.total_bytes() + errors_capture.total_bytes();
                        if stopped.is_none() && total > config.output_kill_after_bytes {
                            stopped =
                                Some(StopReason::OutputLimit(config.output_kill_after_bytes));
                            kill_unreaped(&guard, Signal::SIGKILL);
                        }
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => errors_eof = true,
                }
            },
            read = read_spare(&mut reader, &mut buffer), if !eof => match read {
                Ok(0) => eof = true,
                Ok(_) => {
                    capture.push(&buffer);
                    if stopped.is_none() && capture.total_bytes() > config.output_kill_after_bytes {
                        stopped = Some(StopReason::OutputLimit(config.output_kill_after_bytes));
                        kill_unreaped(&guard, Signal::SIGKILL);
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited.map_err(RunError::Io)?);
                // The shell is gone: whatever it left in its group (background jobs) goes too
                // (a namespaced tree is already gone: its relay only exits after all of it).
                if !tree.relay {
                    kill_tree(tree, Signal::SIGKILL);
                }
                guard.0 = None;
                drain_until = Some(Box::pin(tokio::time::sleep(DRAIN_AFTER_EXIT)));
            },
            () = &mut deadline, if stopped.is_none() && status.is_none() => {
                stopped = Some(StopReason::TimedOut(timeout));
                kill_unreaped(&guard, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
            },
            () = cancellation.cancelled(), if stopped.is_none() && status.is_none() => {
                stopped = Some(StopReason::Cancelled);
                kill_unreaped(&guard, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
            },
            () = maybe_sleep(&mut kill_at) => {
                kill_unreaped(&guard, Signal::SIGKILL);
                kill_at = None;
            },
            () = maybe_sleep(&mut drain_until) => break,
        }
    }
    wait_tree_gone(tree).await;
    drop(guard);
    drop(plan);
    drop(temp_dir);
    // The whole tree is gone: nothing races the check of the repository's code paths, and
    // every connection it made has been decided.
    let git_restored = git.map(|git| git.restore()).unwrap_or_default();
    let network = network
        .map(crate::egress::Watch::finish)
        .unwrap_or_default();
    let status = status.ok_or_else(|| RunError::Io(io::Error::other("no exit status")))?;
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => ExitKind::Code(code),
        (None, Some(signal)) => ExitKind::Signal(signal),
        (None, None) => ExitKind::Code(-1),
    };
    let total_output_bytes = capture.total_bytes() + errors_capture.total_bytes();
    let (output, truncated) = capture.finish();
    let stderr = errors_reader.is_some().then(|| errors_capture.finish().0);
    Ok(CommandOutcome {
        exit,
        output,
        stderr,
        truncated,
        total_output_bytes,
        stopped,
        sandbox: report,
        process_group: tree.process_group(),
        duration: started.elapsed(),
        git_restored,
        network: network.events,
        network_unlisted: network.unlisted,
        network_shared: network.shared,
    })
}

/// Aborts a task when dropped (the stdin writer of a call that ended).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads what is there into `buffer`'s spare capacity (emptied first, never zeroed); `Ok(0)`
/// is the end of the pipe.
async fn read_spare(
    reader: &mut tokio::net::unix::pipe::Receiver,
    buffer: &mut Vec<u8>,
) -> io::Result<usize> {
    buffer.clear();
    reader.read_buf(buffer).await
}

/// Reads the separate stderr pipe (only polled while it is open), as [`read_spare`].
async fn read_errors(
    reader: &mut Option<tokio::net::unix::pipe::Receiver>,
    buffer: &mut Vec<u8>,
) -> io::Result<usize> {
    match reader {
        Some(reader) => read_spare(reader, buffer).await,
        None => std::future::pending().await,
    }
}
