//! Running one command to completion (C2): shell, working directory, environment, limits,
//! sandbox, process group, timeout, merged and bounded output.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::time::{Duration, Instant};

use clawsmith_protocol::{CancellationSignal, ErrorCode};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

use crate::classify::{CommandVerdict, check_command};
use crate::config::SandboxConfig;
use crate::env::command_environment;
use crate::output::BoundedOutput;
use crate::platform::{self, SandboxReport, Unavailable};

/// How long to keep reading after the shell exited and its group was killed, in case a process
/// that left the group still holds the output pipe.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRequest {
    /// The `bash -c` script.
    pub command: String,
    /// Working directory, relative to the workspace or absolute inside it.
    pub cwd: Option<String>,
    /// Timeout; `None` means the configured default.
    pub timeout: Option<Duration>,
}

impl CommandRequest {
    /// A request for `command` in the workspace root with the default timeout.
    pub fn new(command: impl Into<String>) -> CommandRequest {
        CommandRequest {
            command: command.into(),
            cwd: None,
            timeout: None,
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
    /// Merged stdout and stderr, bounded, with a truncation marker when cut.
    pub output: String,
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
    #[error("working directory {path} is not a directory inside the workspace: {source}")]
    BadCwd {
        /// As requested.
        path: String,
        /// What the filesystem said.
        source: io::Error,
    },
    /// The workspace root cannot be resolved.
    #[error("workspace root {path} cannot be used: {source}")]
    Workspace {
        /// The configured root.
        path: PathBuf,
        /// What the filesystem said.
        source: io::Error,
    },
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
            RunError::Workspace { .. } | RunError::Spawn(_) | RunError::Io(_) => {
                ErrorCode::TOOL_FAILED
            }
        }
    }
}

/// How the child's standard streams are wired.
pub(crate) enum ChildIo {
    /// stdin from /dev/null, stdout+stderr into one pipe (run_command).
    Pipe { output: OwnedFd },
    /// stdin from a pipe, stdout+stderr into another (background, no PTY).
    PipeWithInput { input: OwnedFd, output: OwnedFd },
    /// All three on a PTY slave, which becomes the controlling terminal.
    Pty { slave: OwnedFd },
}

/// A spawned command with everything that must live as long as it.
pub(crate) struct Spawned {
    pub(crate) child: tokio::process::Child,
    pub(crate) process_group: i32,
    pub(crate) report: SandboxReport,
    /// Removed when dropped.
    pub(crate) temp_dir: tempfile::TempDir,
}

/// Signals everything in a command's session: its own process group (the child calls `setsid`,
/// so group id = session id = its pid) and every group job control made inside the session
/// (`set -m; sleep 100 &`). Errors (already gone) are ignored. A process that left the session
/// with `setsid` is out of reach (see the crate docs).
pub(crate) fn kill_tree(session: i32, signal: Signal) {
    if session <= 0 {
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

/// Disaster check, cwd check, sandbox plan, spawn: the steps every command goes through.
pub(crate) fn spawn_checked(
    config: &SandboxConfig,
    command: &str,
    cwd: Option<&str>,
    io: ChildIo,
) -> Result<Spawned, RunError> {
    let verdict = check_command(command);
    if verdict.is_blocked() {
        return Err(RunError::Blocked(verdict));
    }
    let workspace = config
        .workspace_root
        .canonicalize()
        .map_err(|source| RunError::Workspace {
            path: config.workspace_root.clone(),
            source,
        })?;
    let cwd = resolve_cwd(&workspace, cwd)?;
    // tempfile makes the directory 0700.
    let mut temp = tempfile::Builder::new();
    temp.prefix("clawsmith-cmd-");
    let temp_dir = match &config.temp_root {
        Some(root) => temp.tempdir_in(root),
        None => temp.tempdir(),
    }
    .map_err(RunError::Io)?;
    let temp_path = temp_dir
        .path()
        .canonicalize()
        .unwrap_or_else(|_| temp_dir.path().to_path_buf());
    let mut env = command_environment(std::env::vars_os(), &config.env_allow, &temp_path);
    let pty = matches!(io, ChildIo::Pty { .. });
    if pty {
        // The host's own TERM says nothing about the PTY clawsmith made; it renders ANSI.
        for (name, value) in &mut env {
            if name == "TERM" {
                *value = "xterm-256color".into();
            }
        }
    }

    let plan = platform::plan(config, &workspace, &temp_path, pty, true)
        .map_err(|Unavailable(reason)| RunError::SandboxUnavailable(reason))?;
    let had_mounts = plan.setup.mounts.is_some();
    let (stdin, stdout, stderr) = stdio(&io).map_err(RunError::Spawn)?;
    let mut process = shell_command(command, &cwd, &env, stdin, stdout, stderr);
    plan.setup.install(&mut process);
    let spawned = process.spawn();
    let (child, report) = match spawned {
        Ok(child) => (child, plan.report),
        Err(error) if had_mounts && config.policy != crate::SandboxPolicy::Required => {
            // Best effort: no mount namespace here; run without the read-only binds.
            let mut plan = platform::plan(config, &workspace, &temp_path, pty, false)
                .map_err(|Unavailable(reason)| RunError::SandboxUnavailable(reason))?;
            plan.report.protected = format!("not enforced (mount namespace: {error})");
            let (stdin, stdout, stderr) = stdio(&io).map_err(RunError::Spawn)?;
            let mut process = shell_command(command, &cwd, &env, stdin, stdout, stderr);
            plan.setup.install(&mut process);
            (process.spawn().map_err(RunError::Spawn)?, plan.report)
        }
        Err(error)
            if report_is_confined(config)
                && !matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
        {
            return Err(RunError::SandboxUnavailable(format!(
                "setting up the sandbox in the child failed: {error}"
            )));
        }
        Err(error) => return Err(RunError::Spawn(error)),
    };
    let process_group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    Ok(Spawned {
        child,
        process_group,
        report,
        temp_dir,
    })
}

fn report_is_confined(config: &SandboxConfig) -> bool {
    config.policy == crate::SandboxPolicy::Required
}

fn stdio(io: &ChildIo) -> io::Result<(Stdio, Stdio, Stdio)> {
    Ok(match io {
        ChildIo::Pipe { output } => (
            Stdio::null(),
            Stdio::from(output.try_clone()?),
            Stdio::from(output.try_clone()?),
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
    })
}

fn shell_command(
    command: &str,
    cwd: &Path,
    env: &[(OsString, OsString)],
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
) -> tokio::process::Command {
    let shell = if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let mut process = tokio::process::Command::new(shell);
    process
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
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
    let real = normal.canonicalize().map_err(|source| RunError::BadCwd {
        path: requested.to_owned(),
        source,
    })?;
    if !real.starts_with(workspace) {
        return Err(RunError::OutsideWorkspace(requested.to_owned()));
    }
    if !real.is_dir() {
        return Err(RunError::BadCwd {
            path: requested.to_owned(),
            source: io::Error::from(io::ErrorKind::NotADirectory),
        });
    }
    Ok(real)
}

/// Kills the group when dropped, so an abandoned future leaves nothing behind.
pub(crate) struct GroupGuard(pub(crate) i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_tree(self.0, Signal::SIGKILL);
    }
}

/// Signals are delivered asynchronously: kills the session and waits (a bounded while) until no
/// live process of it is left, so callers can rely on "nothing survives the call".
pub(crate) async fn wait_tree_gone(session: i32) {
    if session <= 0 {
        return;
    }
    for _ in 0..200 {
        kill_tree(session, Signal::SIGKILL);
        if live_session_members(session).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
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
    let timeout = effective_timeout(config, request.timeout)?;
    let (read_end, write_end) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| RunError::Spawn(e.into()))?;
    let started = Instant::now();
    let spawned = spawn_checked(
        config,
        &request.command,
        request.cwd.as_deref(),
        ChildIo::Pipe { output: write_end },
    )?;
    // `ChildIo` (and with it our copy of the write end) is gone: EOF comes when the group ends.
    let Spawned {
        mut child,
        process_group,
        report,
        temp_dir,
    } = spawned;
    let guard = GroupGuard(process_group);
    let mut reader =
        tokio::net::unix::pipe::Receiver::from_owned_fd(read_end).map_err(RunError::Io)?;
    let mut capture = BoundedOutput::new(config.output_cap_bytes);
    let mut buffer = vec![0u8; 64 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut kill_at: Option<Pin<Box<Sleep>>> = None;
    let mut drain_until: Option<Pin<Box<Sleep>>> = None;
    let mut status = None;
    let mut eof = false;
    let mut stopped = None;

    while !(eof && status.is_some()) {
        tokio::select! {
            read = reader.read(&mut buffer), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    capture.push(&buffer[..n]);
                    if stopped.is_none() && capture.total_bytes() > config.output_kill_after_bytes {
                        stopped = Some(StopReason::OutputLimit(config.output_kill_after_bytes));
                        kill_tree(process_group, Signal::SIGKILL);
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited.map_err(RunError::Io)?);
                // The shell is gone: whatever it left in its group (background jobs) goes too.
                kill_tree(process_group, Signal::SIGKILL);
                drain_until = Some(Box::pin(tokio::time::sleep(DRAIN_AFTER_EXIT)));
            },
            () = &mut deadline, if stopped.is_none() && status.is_none() => {
                stopped = Some(StopReason::TimedOut(timeout));
                kill_tree(process_group, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
            },
            () = cancellation.cancelled(), if stopped.is_none() && status.is_none() => {
                stopped = Some(StopReason::Cancelled);
                kill_tree(process_group, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(config.kill_grace)));
            },
            () = maybe_sleep(&mut kill_at) => {
                kill_tree(process_group, Signal::SIGKILL);
                kill_at = None;
            },
            () = maybe_sleep(&mut drain_until) => break,
        }
    }
    wait_tree_gone(process_group).await;
    drop(guard);
    drop(temp_dir);
    let status = status.ok_or_else(|| RunError::Io(io::Error::other("no exit status")))?;
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => ExitKind::Code(code),
        (None, Some(signal)) => ExitKind::Signal(signal),
        (None, None) => ExitKind::Code(-1),
    };
    let total_output_bytes = capture.total_bytes();
    let (output, truncated) = capture.finish();
    Ok(CommandOutcome {
        exit,
        output,
        truncated,
        total_output_bytes,
        stopped,
        sandbox: report,
        process_group,
        duration: started.elapsed(),
    })
}
