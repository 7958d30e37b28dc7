//! Background commands (C4): a [`CommandExecutionService`] owned by a long-lived host keeps
//! commands running across turns, with their output in bounded log files, optional PTYs, and
//! control tokens for PTY input.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawsmith_protocol::{ArtifactRef, CancellationSignal, ErrorCode};
use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::sys::signal::Signal;
use serde::Serialize;
use tokio::io::unix::AsyncFd;
use tokio::time::Sleep;

use crate::config::SandboxConfig;
use crate::exec::{
    ChildIo, Cleared, ExitKind, GroupGuard, ProcessTree, RunError, Spawned, kill_tree,
    kill_unreaped, maybe_sleep, spawn_checked, wait_tree_gone,
};
use crate::git_guard::GitLock;
use crate::platform::SandboxReport;

/// Default bytes of log kept on disk per command.
pub const DEFAULT_MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;
/// Default wall-clock limit of a background command.
pub const DEFAULT_MAX_RUNTIME: Duration = Duration::from_secs(30 * 60);
/// Default number of commands remembered (running ones are never forgotten).
pub const DEFAULT_MAX_COMMANDS: usize = 64;
/// Default number of commands running at once.
pub const DEFAULT_MAX_RUNNING: usize = 16;
/// Largest `maxBytes` of one `command_output` call.
pub const MAX_OUTPUT_CHUNK_BYTES: u64 = 1024 * 1024;
/// `maxBytes` when a call gives none.
pub const DEFAULT_OUTPUT_CHUNK_BYTES: u64 = 64 * 1024;

/// How the service runs commands.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Workspace, limits and sandbox, as for `run_command`.
    pub sandbox: SandboxConfig,
    /// Where the per-command logs live (created if missing).
    pub log_dir: PathBuf,
    /// Bytes of log kept per command; later output is counted and dropped (default 8 MiB).
    pub max_log_bytes: u64,
    /// Wall-clock limit of one command; then its group gets TERM, then KILL (default 30 min).
    pub max_runtime: Duration,
    /// Finished commands remembered (default 64); the oldest are forgotten with their logs.
    pub max_commands: usize,
    /// Commands running at once (default 16).
    pub max_running: usize,
}

impl ServiceConfig {
    /// Defaults with `sandbox` and logs in `log_dir`.
    pub fn new(sandbox: SandboxConfig, log_dir: impl Into<PathBuf>) -> ServiceConfig {
        ServiceConfig {
            sandbox,
            log_dir: log_dir.into(),
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
            max_runtime: DEFAULT_MAX_RUNTIME,
            max_commands: DEFAULT_MAX_COMMANDS,
            max_running: DEFAULT_MAX_RUNNING,
        }
    }
}

/// What `start` needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartRequest {
    /// The `bash -c` script.
    pub command: String,
    /// Working directory inside the workspace.
    pub cwd: Option<String>,
    /// Run on a pseudo-terminal.
    pub pty: bool,
    /// PTY columns (default 80).
    pub cols: Option<u16>,
    /// PTY rows (default 24).
    pub rows: Option<u16>,
}

/// What `start` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedCommand {
    /// The id every other call takes.
    pub command_id: String,
    /// The control token for PTY input and resize (PTY commands only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whether it runs on a PTY.
    pub pty: bool,
    /// What the sandbox enforces, in one line.
    pub sandbox: String,
    /// The full report, for display.
    #[serde(skip)]
    pub sandbox_report: SandboxReport,
}

/// The state of a background command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandState {
    /// Still running.
    Running,
    /// Ended by itself (exit code or signal).
    Exited,
    /// Stopped by `cancel_command`.
    Cancelled,
    /// Stopped after the maximum runtime.
    TimedOut,
    /// Stopped because it printed past the output kill threshold.
    Killed,
}

/// A snapshot of one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandSnapshot {
    /// Its id.
    pub command_id: String,
    /// The command text.
    pub command: String,
    /// State.
    pub state: CommandState,
    /// Exit code, once exited with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Signal that ended it, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it runs on a PTY.
    pub pty: bool,
    /// Its process group (= session) id; nothing in it survives the command.
    pub process_group: i32,
    /// Start time, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Bytes it printed in total.
    pub output_bytes: u64,
    /// Whether the log stopped at the size limit.
    pub log_truncated: bool,
    /// The log, as an artifact reference (`command-log/<id>`); read it with `command_output`.
    pub log: ArtifactRef,
}

/// One chunk of a command's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputChunk {
    /// Its id.
    pub command_id: String,
    /// Where this chunk starts in the log.
    pub offset: u64,
    /// Where the next call should start.
    pub next_offset: u64,
    /// The bytes, as text (invalid UTF-8 replaced).
    pub data: String,
    /// The log size now.
    pub log_bytes: u64,
    /// State now.
    pub state: CommandState,
    /// True when the command ended and everything was read.
    pub complete: bool,
}

/// Why a service call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// No command with that id.
    #[error("unknown commandId: {0}")]
    UnknownCommand(String),
    /// A PTY command's input or resize came without its control token.
    #[error("command {0} runs on a PTY: input and resize need its control token")]
    TokenRequired(String),
    /// The token does not match.
    #[error("wrong control token for command {0}")]
    TokenMismatch(String),
    /// Resize of a command without a PTY.
    #[error("command {0} has no PTY")]
    NotAPty(String),
    /// The command is not running any more.
    #[error("command {0} is not running")]
    NotRunning(String),
    /// Too many commands running.
    #[error("{0} commands are already running; cancel one first")]
    TooManyRunning(usize),
    /// Bad PTY size.
    #[error("cols and rows must be between 1 and 1000")]
    BadSize,
    /// Running the command failed before it started.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A log or terminal operation failed. The message quotes the I/O error, so it is not also
    /// the source (a chain printer would say it twice).
    #[error("I/O error: {0}")]
    Io(io::Error),
}

impl From<io::Error> for ServiceError {
    fn from(error: io::Error) -> Self {
        ServiceError::Io(error)
    }
}

impl ServiceError {
    /// The protocol code a tool reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            ServiceError::UnknownCommand(_) | ServiceError::NotAPty(_) | ServiceError::BadSize => {
                ErrorCode::INVALID_ARGUMENTS
            }
            ServiceError::TokenRequired(_) | ServiceError::TokenMismatch(_) => {
                ErrorCode::PERMISSION_DENIED
            }
            ServiceError::Run(error) => error.code(),
            ServiceError::NotRunning(_) | ServiceError::TooManyRunning(_) | ServiceError::Io(_) => {
                ErrorCode::TOOL_FAILED
            }
        }
    }
}

/// Runs and remembers background commands. Owned by a long-lived host (the MCP server, an agent
/// process) and shared with its tools through an `Arc`; dropping it kills every command still
/// running.
#[derive(Debug)]
pub struct CommandExecutionService {
    config: ServiceConfig,
    commands: Mutex<BTreeMap<u64, Arc<CommandEntry>>>,
    next_id: AtomicU64,
}

#[derive(Debug)]
struct CommandEntry {
    id: String,
    command: String,
    pty: bool,
    token: Option<String>,
    started_at_ms: u64,
    tree: ProcessTree,
    /// Set once the spawned process was reaped: its pid may be reused, never signal it again.
    reaped: AtomicBool,
    log_path: PathBuf,
    log_bytes: AtomicU64,
    output_bytes: AtomicU64,
    log_truncated: AtomicBool,
    status: Mutex<(CommandState, Option<ExitKind>)>,
    /// PTY master or pipe write end; `None` once the command ended.
    input: Mutex<Option<File>>,
    /// A second handle on the PTY master for resizing.
    pty_master: Option<OwnedFd>,
    cancel: CancellationSignal,
}

impl CommandEntry {
    fn state(&self) -> (CommandState, Option<ExitKind>) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn snapshot(&self) -> CommandSnapshot {
        let (state, exit) = self.state();
        let log_bytes = self.log_bytes.load(Ordering::SeqCst);
        CommandSnapshot {
            command_id: self.id.clone(),
            command: self.command.clone(),
            state,
            exit_code: match exit {
                Some(ExitKind::Code(code)) => Some(code),
                _ => None,
            },
            signal: match exit {
                Some(ExitKind::Signal(signal)) => Some(signal),
                _ => None,
            },
            pty: self.pty,
            process_group: self.tree.process_group(),
            started_at_ms: self.started_at_ms,
            output_bytes: self.output_bytes.load(Ordering::SeqCst),
            log_truncated: self.log_truncated.load(Ordering::SeqCst),
            log: ArtifactRef {
                artifact_id: format!("command-log/{}", self.id),
                bytes: log_bytes,
                lines: None,
                sha256: None,
            },
        }
    }

    fn check_token(&self, token: Option<&str>) -> Result<(), ServiceError> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let Some(given) = token else {
            return Err(ServiceError::TokenRequired(self.id.clone()));
        };
        if constant_time_eq(expected.as_bytes(), given.as_bytes()) {
            Ok(())
        } else {
            Err(ServiceError::TokenMismatch(self.id.clone()))
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn set_cloexec_nonblocking(fd: &OwnedFd, nonblocking: bool) -> io::Result<()> {
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    if nonblocking {
        let flags = OFlag::from_bits_truncate(fcntl(fd.as_fd(), FcntlArg::F_GETFL)?);
        fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    Ok(())
}

impl CommandExecutionService {
    /// A service with no commands; creates the log directory.
    pub fn new(config: ServiceConfig) -> io::Result<CommandExecutionService> {
        std::fs::create_dir_all(&config.log_dir)?;
        Ok(CommandExecutionService {
            config,
            commands: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<CommandEntry>>> {
        self.commands.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn entry(&self, command_id: &str) -> Result<Arc<CommandEntry>, ServiceError> {
        self.entries()
            .values()
            .find(|e| e.id == command_id)
            .cloned()
            .ok_or_else(|| ServiceError::UnknownCommand(command_id.to_owned()))
    }

    /// Starts a command in the background (disaster check, sandbox and limits as for
    /// `run_command`). Must be called inside a tokio runtime.
    pub async fn start(&self, request: StartRequest) -> Result<StartedCommand, ServiceError> {
        let command = Cleared::check(&request.command)?;
        let running = self
            .entries()
            .values()
            .filter(|e| e.state().0 == CommandState::Running)
            .count();
        if running >= self.config.max_running {
            return Err(ServiceError::TooManyRunning(running));
        }
        let cols = request.cols.unwrap_or(80);
        let rows = request.rows.unwrap_or(24);
        if !(1..=1000).contains(&cols) || !(1..=1000).contains(&rows) {
            return Err(ServiceError::BadSize);
        }
        let (io, output, input, pty_master) = if request.pty {
            let winsize = nix::pty::Winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            let pty = nix::pty::openpty(&winsize, None).map_err(io::Error::from)?;
            set_cloexec_nonblocking(&pty.master, true)?;
            set_cloexec_nonblocking(&pty.slave, false)?;
            let output = pty.master.try_clone()?;
            let input = pty.master.try_clone()?;
            (
                ChildIo::Pty { slave: pty.slave },
                output,
                input,
                Some(pty.master),
            )
        } else {
            let (output_read, output_write) =
                nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
            let (input_read, input_write) =
                nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
            set_cloexec_nonblocking(&output_read, true)?;
            set_cloexec_nonblocking(&input_write, true)?;
            (
                ChildIo::PipeWithInput {
                    input: input_read,
                    output: output_write,
                },
                output_read,
                input_write,
                None,
            )
        };
        // Everything that can fail comes before the spawn, so a failure leaves no process.
        let number = self.next_id.fetch_add(1, Ordering::SeqCst);
        let id = format!("cmd-{number}");
        let token = if request.pty {
            Some(random_token()?)
        } else {
            None
        };
        let log_path = self.config.log_dir.join(format!("{id}.log"));
        // Private (0600 whatever the umask) and never through a symlink planted at the path.
        let log = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&log_path)?;
        let spawned = match spawn_checked(
            &self.config.sandbox,
            command,
            request.cwd.as_deref(),
            io,
            None,
            // Runs beside the user's own git for as long as it likes: no window at all.
            GitLock::Whole,
        ) {
            Ok(spawned) => spawned,
            Err(error) => {
                let _ = std::fs::remove_file(&log_path);
                return Err(error.into());
            }
        };
        let entry = Arc::new(CommandEntry {
            id: id.clone(),
            command: request.command.clone(),
            pty: request.pty,
            token: token.clone(),
            started_at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            tree: spawned.tree,
            reaped: AtomicBool::new(false),
            log_path,
            log_bytes: AtomicU64::new(0),
            output_bytes: AtomicU64::new(0),
            log_truncated: AtomicBool::new(false),
            status: Mutex::new((CommandState::Running, None)),
            input: Mutex::new(Some(File::from(input))),
            pty_master,
            cancel: CancellationSignal::new(),
        });
        let report = spawned.report.clone();
        let output = match crate::child::async_file(File::from(output)) {
            Ok(output) => output,
            Err(error) => {
                kill_tree(spawned.tree, Signal::SIGKILL);
                return Err(error.into());
            }
        };
        tokio::spawn(watch(
            Arc::clone(&entry),
            spawned,
            output,
            log,
            self.config.clone(),
        ));
        let mut commands = self.entries();
        commands.insert(number, Arc::clone(&entry));
        self.forget_old(&mut commands);
        Ok(StartedCommand {
            command_id: id,
            token,
            pty: request.pty,
            sandbox: report.summary(),
            sandbox_report: report,
        })
    }

    fn forget_old(&self, commands: &mut BTreeMap<u64, Arc<CommandEntry>>) {
        while commands.len() > self.config.max_commands {
            let Some(oldest) = commands
                .iter()
                .find(|(_, e)| e.state().0 != CommandState::Running)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(entry) = commands.remove(&oldest) {
                let _ = std::fs::remove_file(&entry.log_path);
            }
        }
    }

    /// Every remembered command, oldest first.
    pub fn list(&self) -> Vec<CommandSnapshot> {
        self.entries().values().map(|e| e.snapshot()).collect()
    }

    /// One command's state.
    pub fn status(&self, command_id: &str) -> Result<CommandSnapshot, ServiceError> {
        Ok(self.entry(command_id)?.snapshot())
    }

    /// Up to `max_bytes` of the log from `offset` (incremental reading).
    pub fn output(
        &self,
        command_id: &str,
        offset: u64,
        max_bytes: Option<u64>,
    ) -> Result<OutputChunk, ServiceError> {
        let entry = self.entry(command_id)?;
        // State first: if it says finished, the log is complete.
        let (state, _) = entry.state();
        let log_bytes = entry.log_bytes.load(Ordering::SeqCst);
        let max = max_bytes
            .unwrap_or(DEFAULT_OUTPUT_CHUNK_BYTES)
            .clamp(1, MAX_OUTPUT_CHUNK_BYTES);
        let start = offset.min(log_bytes);
        let length = (log_bytes - start).min(max);
        let mut bytes = vec![0u8; usize::try_from(length).unwrap_or(0)];
        if length > 0 {
            let mut file = File::open(&entry.log_path)?;
            file.seek(SeekFrom::Start(start))?;
            file.read_exact(&mut bytes)?;
        }
        // Do not split a UTF-8 character across calls (unless it is all there is).
        if start + length < log_bytes
            && let Err(error) = std::str::from_utf8(&bytes)
            && error.error_len().is_none()
            && error.valid_up_to() > 0
        {
            bytes.truncate(error.valid_up_to());
        }
        let next_offset = start + bytes.len() as u64;
        Ok(OutputChunk {
            command_id: entry.id.clone(),
            offset: start,
            next_offset,
            data: String::from_utf8_lossy(&bytes).into_owned(),
            log_bytes,
            state,
            complete: state != CommandState::Running && next_offset >= log_bytes,
        })
    }

    /// Writes `data` to the command's standard input (a pipe) or its PTY (token required).
    pub async fn input(
        &self,
        command_id: &str,
        data: &str,
        token: Option<&str>,
    ) -> Result<usize, ServiceError> {
        let entry = self.entry(command_id)?;
        entry.check_token(token)?;
        let mut remaining = data.as_bytes();
        let mut attempts = 0;
        while !remaining.is_empty() {
            let written = {
                let mut input = entry.input.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(file) = input.as_mut() else {
                    return Err(ServiceError::NotRunning(entry.id.clone()));
                };
                file.write(remaining)
            };
            match written {
                Ok(n) => remaining = &remaining[n..],
                Err(error) if error.kind() == io::ErrorKind::WouldBlock && attempts < 200 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(error) if error.raw_os_error() == Some(libc::EPIPE) => {
                    return Err(ServiceError::NotRunning(entry.id.clone()));
                }
                Err(error) => return Err(ServiceError::Io(error)),
            }
        }
        Ok(data.len())
    }

    /// Resizes a PTY command's terminal (token required); the program gets `SIGWINCH`.
    pub fn resize(
        &self,
        command_id: &str,
        cols: u16,
        rows: u16,
        token: Option<&str>,
    ) -> Result<(), ServiceError> {
        let entry = self.entry(command_id)?;
        let Some(master) = &entry.pty_master else {
            return Err(ServiceError::NotAPty(entry.id.clone()));
        };
        entry.check_token(token)?;
        if !(1..=1000).contains(&cols) || !(1..=1000).contains(&rows) {
            return Err(ServiceError::BadSize);
        }
        if entry.state().0 != CommandState::Running {
            return Err(ServiceError::NotRunning(entry.id.clone()));
        }
        use std::os::fd::AsRawFd;
        crate::child::set_window_size(master.as_raw_fd(), cols, rows)?;
        Ok(())
    }

    /// Stops a command and its whole process tree (TERM, then KILL after the grace period).
    pub fn cancel(&self, command_id: &str) -> Result<CommandSnapshot, ServiceError> {
        let entry = self.entry(command_id)?;
        entry.cancel.cancel();
        Ok(entry.snapshot())
    }

    /// Waits (bounded by `limit`) until the command is no longer running; returns its state.
    pub async fn wait(
        &self,
        command_id: &str,
        limit: Duration,
    ) -> Result<CommandSnapshot, ServiceError> {
        let entry = self.entry(command_id)?;
        let deadline = tokio::time::Instant::now() + limit;
        while entry.state().0 == CommandState::Running && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(entry.snapshot())
    }
}

impl Drop for CommandExecutionService {
    fn drop(&mut self) {
        for entry in self.entries().values() {
            if !entry.reaped.load(Ordering::SeqCst) {
                kill_tree(entry.tree, Signal::SIGKILL);
            }
        }
    }
}

async fn read_chunk(output: &AsyncFd<File>, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut guard = output.readable().await?;
        match guard.try_io(|inner| {
            let mut file: &File = inner.get_ref();
            file.read(buffer)
        }) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

/// Follows one command: output into the bounded log, timeout, cancellation, exit.
async fn watch(
    entry: Arc<CommandEntry>,
    spawned: Spawned,
    output: AsyncFd<File>,
    mut log: File,
    config: ServiceConfig,
) {
    let Spawned {
        mut child,
        tree,
        temp_dir,
        git,
        network,
        ..
    } = spawned;
    // Held while the command runs, so that a command sharing its network namespace meanwhile
    // knows it did.
    let _network = network;
    let mut guard = GroupGuard(Some(tree));
    let grace = config.sandbox.kill_grace;
    let deadline = tokio::time::sleep(config.max_runtime);
    tokio::pin!(deadline);
    let mut kill_at: Option<Pin<Box<Sleep>>> = None;
    let mut drain_until: Option<Pin<Box<Sleep>>> = None;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut status = None;
    let mut eof = false;
    let mut stopped: Option<CommandState> = None;
    let mut masker = LogMasker::default();
    // A word held back by the masker is written once output pauses (a prompt awaiting input).
    let mut flush_held: Option<Pin<Box<Sleep>>> = None;

    while !(eof && status.is_some()) {
        tokio::select! {
            read = read_chunk(&output, &mut buffer), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => {
                    let total = entry.output_bytes.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                    let masked = masker.push(&buffer[..n]);
                    append_bounded(&entry, &mut log, &masked, config.max_log_bytes);
                    flush_held = masker
                        .holds_bytes()
                        .then(|| Box::pin(tokio::time::sleep(MASK_HOLD_PAUSE)));
                    if stopped.is_none() && total > config.sandbox.output_kill_after_bytes {
                        stopped = Some(CommandState::Killed);
                        kill_unreaped(&guard, Signal::SIGKILL);
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                // A PTY master reads EIO once every slave is closed.
                Err(_) => eof = true,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited);
                entry.reaped.store(true, Ordering::SeqCst);
                if !tree.relay {
                    kill_tree(tree, Signal::SIGKILL);
                }
                guard.0 = None;
                drain_until = Some(Box::pin(tokio::time::sleep(Duration::from_secs(2))));
            },
            () = &mut deadline, if stopped.is_none() && status.is_none() => {
                stopped = Some(CommandState::TimedOut);
                kill_unreaped(&guard, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(grace)));
            },
            () = entry.cancel.cancelled(), if stopped.is_none() && status.is_none() => {
                stopped = Some(CommandState::Cancelled);
                kill_unreaped(&guard, Signal::SIGTERM);
                kill_at = Some(Box::pin(tokio::time::sleep(grace)));
            },
            () = maybe_sleep(&mut kill_at) => {
                kill_unreaped(&guard, Signal::SIGKILL);
                kill_at = None;
            },
            () = maybe_sleep(&mut flush_held) => {
                append_bounded(&entry, &mut log, &masker.finish(), config.max_log_bytes);
                flush_held = None;
            },
            () = maybe_sleep(&mut drain_until) => break,
        }
    }
    append_bounded(&entry, &mut log, &masker.finish(), config.max_log_bytes);
    wait_tree_gone(tree).await;
    drop(guard);
    drop(temp_dir);
    // What a background command created at the repository's code paths is taken back too.
    if let Some(git) = git {
        let restored = git.restore();
        if !restored.is_empty() {
            append_bounded(
                &entry,
                &mut log,
                format!(
                    "\n[sandbox: commands cannot make git run code; took back: {}]\n",
                    restored.join(", ")
                )
                .as_bytes(),
                config.max_log_bytes,
            );
        }
    }
    *entry.input.lock().unwrap_or_else(PoisonError::into_inner) = None;
    let exit = match status {
        Some(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Some(ExitKind::Code(code)),
            (None, Some(signal)) => Some(ExitKind::Signal(signal)),
            (None, None) => None,
        },
        _ => None,
    };
    let state = stopped.unwrap_or(CommandState::Exited);
    *entry.status.lock().unwrap_or_else(PoisonError::into_inner) = (state, exit);
}

/// Masks secrets in a command's output before it reaches the log, with the detector the store
/// uses (`clawsmith_protocol::redact`): state at rest holds no secret it knows. Output arrives in
/// chunks that may cut a secret in two, so the trailing run of non-blank bytes (a word that may
/// go on) waits for the next chunk, the end, or a pause of [`MASK_HOLD_PAUSE`] (a prompt waiting
/// for input), up to [`MASK_HOLD_MAX`] bytes; output ending in a blank is written at once.
#[derive(Debug, Default)]
struct LogMasker {
    held: Vec<u8>,
}

/// The longest word held back while waiting for the rest of it.
const MASK_HOLD_MAX: usize = 4096;

/// How long a held word waits for more output before it is written as it is.
const MASK_HOLD_PAUSE: Duration = Duration::from_millis(50);

impl LogMasker {
    /// What can be written now, masked.
    fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        let word = self
            .held
            .iter()
            .rev()
            .take_while(|byte| !byte.is_ascii_whitespace())
            .count();
        let ready = if word > MASK_HOLD_MAX {
            self.held.len()
        } else {
            self.held.len() - word
        };
        let ready: Vec<u8> = self.held.drain(..ready).collect();
        mask_output(&ready)
    }

    /// Whether a word is waiting for the rest of it.
    fn holds_bytes(&self) -> bool {
        !self.held.is_empty()
    }

    /// The rest, masked, at the end of the output or when it pauses.
    fn finish(&mut self) -> Vec<u8> {
        mask_output(&std::mem::take(&mut self.held))
    }
}

/// `bytes` with secrets masked in every valid UTF-8 run; other bytes pass as they are.
fn mask_output(bytes: &[u8]) -> Vec<u8> {
    let mut masked = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        masked.extend_from_slice(clawsmith_protocol::redact::redact_text(chunk.valid()).as_bytes());
        masked.extend_from_slice(chunk.invalid());
    }
    masked
}

fn append_bounded(entry: &CommandEntry, log: &mut File, chunk: &[u8], max: u64) {
    let written = entry.log_bytes.load(Ordering::SeqCst);
    if written >= max {
        return;
    }
    let room = usize::try_from(max - written).unwrap_or(usize::MAX);
    let keep = &chunk[..chunk.len().min(room)];
    let mut appended = 0;
    if log.write_all(keep).is_ok() {
        appended += keep.len() as u64;
    }
    if keep.len() < chunk.len() {
        entry.log_truncated.store(true, Ordering::SeqCst);
        let marker = format!("\n[... log truncated at {max} bytes; later output is dropped ...]\n");
        if log.write_all(marker.as_bytes()).is_ok() {
            appended += marker.len() as u64;
        }
    }
    entry.log_bytes.fetch_add(appended, Ordering::SeqCst);
}

#[cfg(test)]
mod log_masking_tests {
    use super::LogMasker;

    /// Chunks as they come out of a command, and the log they must leave.
    #[test]
    fn secrets_are_masked_even_when_a_chunk_cuts_them() {
        let token = "ghp_Zq8Lm2Xv7Rt4Np1Ks9Wd3Fh6Jb5Gc0Ya2Ue7Qo";
        let cases: [(&[&str], &str); 4] = [
            (&["TOKEN=", token, "\n"], "TOKEN=[REDACTED]\n"),
            (
                &["key ghp_Zq8Lm2", "Xv7Rt4Np1Ks9Wd3Fh6Jb5Gc0Ya2Ue7Qo done\n"],
                "key [REDACTED] done\n",
            ),
            (
                &["password=hun", "ter2\n", "plain\n"],
                "password=[REDACTED]\nplain\n",
            ),
            (&["Continue? ", "y\n"], "Continue? y\n"),
        ];
        for (chunks, expected) in cases {
            let mut masker = LogMasker::default();
            let mut log = Vec::new();
            for chunk in chunks {
                log.extend(masker.push(chunk.as_bytes()));
            }
            log.extend(masker.finish());
            assert_eq!(String::from_utf8(log).unwrap(), expected, "{chunks:?}");
        }
        // A prompt without a trailing word is written at once, not held for the next chunk.
        assert_eq!(LogMasker::default().push(b"Password: "), b"Password: ");
    }
}
