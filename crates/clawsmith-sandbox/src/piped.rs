//! A long-lived confined process with its own stdin, stdout and stderr pipes: what a language
//! server (JSON-RPC over stdio, logs on stderr) needs and neither `run_command` (one merged
//! output, no input, runs to completion) nor the background service (merged output into a log)
//! gives. Same steps as every command: disaster check, sandbox plan, limits, process group.

use std::io;
use std::os::unix::process::ExitStatusExt;

use nix::sys::signal::Signal;
use tokio::net::unix::pipe::{Receiver, Sender};

use crate::config::SandboxConfig;
use crate::exec::{
    Argv, ChildIo, Cleared, ExitKind, GroupGuard, RunError, Spawned, kill_unreaped, spawn_checked,
    wait_tree_gone,
};
use crate::git_guard::GitLock;
use crate::platform::SandboxReport;

/// The three pipes of a [`PipedProcess`], taken once by whoever speaks to it.
#[derive(Debug)]
pub struct PipedIo {
    /// Its standard input.
    pub stdin: Sender,
    /// Its standard output.
    pub stdout: Receiver,
    /// Its standard error (read it, bounded: a full pipe blocks the process).
    pub stderr: Receiver,
}

/// A confined process spawned by [`spawn_piped`]. Dropping it kills its whole tree.
pub struct PipedProcess {
    child: crate::exec::Relay,
    guard: GroupGuard,
    report: SandboxReport,
    temp_dir: Option<tempfile::TempDir>,
    git: Option<crate::git_guard::Repositories>,
    /// Held while the process lives, so that a command sharing its network namespace meanwhile
    /// knows it did.
    _network: Option<crate::egress::Watch>,
}

impl std::fmt::Debug for PipedProcess {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PipedProcess")
            .field(
                "process_group",
                &self.guard.0.map(|tree| tree.process_group()),
            )
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

/// Spawns `script` (`bash -c`, as `start_command` does; use `exec` to replace the shell) under
/// `config` with a pipe for each standard stream. The process runs until it exits, is killed
/// with [`PipedProcess::kill`], or the handle is dropped. Must be called inside a tokio runtime.
pub fn spawn_piped(
    config: &SandboxConfig,
    script: &str,
) -> Result<(PipedProcess, PipedIo), RunError> {
    spawn_cleared(config, Cleared::check(script)?, None)
}

/// Spawns `argv` as [`spawn_piped`] does, without a shell in between (see [`Argv`]), in `cwd`
/// (relative to the workspace or absolute inside it; `None`: the workspace root).
pub fn spawn_piped_argv(
    config: &SandboxConfig,
    argv: &Argv,
    cwd: Option<&str>,
) -> Result<(PipedProcess, PipedIo), RunError> {
    let script = argv.script();
    spawn_cleared(config, Cleared::check_request(&script, Some(argv))?, cwd)
}

fn spawn_cleared(
    config: &SandboxConfig,
    script: Cleared<'_>,
    cwd: Option<&str>,
) -> Result<(PipedProcess, PipedIo), RunError> {
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from);
    let (stdin_read, stdin_write) = pipe().map_err(RunError::Spawn)?;
    let (stdout_read, stdout_write) = pipe().map_err(RunError::Spawn)?;
    let (stderr_read, stderr_write) = pipe().map_err(RunError::Spawn)?;
    // Registered before the spawn, so a failure here leaves no process behind.
    let io = PipedIo {
        stdin: Sender::from_owned_fd(stdin_write).map_err(RunError::Io)?,
        stdout: Receiver::from_owned_fd(stdout_read).map_err(RunError::Io)?,
        stderr: Receiver::from_owned_fd(stderr_read).map_err(RunError::Io)?,
    };
    let spawned = spawn_checked(
        config,
        script,
        cwd,
        ChildIo::Pipes {
            stdin: stdin_read,
            stdout: stdout_write,
            stderr: stderr_write,
        },
        None,
        GitLock::Whole,
    )?;
    // `ChildIo` (our copies of the child's ends) is gone: EOF comes when the process ends.
    let Spawned {
        child,
        tree,
        report,
        temp_dir,
        git,
        network,
        ..
    } = spawned;
    Ok((
        PipedProcess {
            child,
            guard: GroupGuard(Some(tree)),
            report,
            temp_dir,
            git,
            _network: network,
        },
        io,
    ))
}

impl PipedProcess {
    /// What the sandbox enforces for this process.
    pub fn report(&self) -> &SandboxReport {
        &self.report
    }

    /// Its process group (= session) id while it runs.
    pub fn process_group(&self) -> Option<i32> {
        self.guard.0.map(|tree| tree.process_group())
    }

    /// Kills the whole tree (nothing once it was reaped: its pid may be reused).
    pub fn kill(&self) {
        kill_unreaped(&self.guard, Signal::SIGKILL);
    }

    /// Waits for the process to exit, then makes sure nothing of its tree is left and takes
    /// back what it created at the workspace repositories' code paths (see `git_guard`).
    pub async fn wait(&mut self) -> io::Result<ExitKind> {
        let status = self.child.wait().await?;
        if let Some(tree) = self.guard.0.take() {
            if !tree.relay {
                crate::exec::kill_tree(tree, Signal::SIGKILL);
            }
            wait_tree_gone(tree).await;
        }
        self.temp_dir = None;
        if let Some(git) = self.git.take() {
            git.restore();
        }
        Ok(match (status.code(), status.signal()) {
            (Some(code), _) => ExitKind::Code(code),
            (None, Some(signal)) => ExitKind::Signal(signal),
            (None, None) => ExitKind::Code(-1),
        })
    }
}
