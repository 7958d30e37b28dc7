//! Warm spares: the next confined command's tree, started before the command exists.
//!
//! A sandboxed spawn forks the relay from clawsmith, enters the prepared view's namespaces,
//! unshares the per-command ones, clones the init and mounts the command's own `/proc`, `/tmp`,
//! `/dev/shm` and `/dev/pts` — all before the command can start. None of that depends on the
//! command, so for each workspace (and so each prepared view, a base of `platform.rs`) one such
//! tree is kept ready: a **spare**, made on this module's own thread after a `run_command` took
//! the previous one — from that command's own setup, which the spare made unnecessary — or found
//! none (then planned on the thread). A command that finds no idle spare while one is being made
//! for its workspace waits for it, [`WAIT_FOR_PENDING`] at most. Its init waits for a **go message** on a pipe: the command's program, arguments,
//! environment, working directory and `.git` pins ([`child::go_message`]); it then checks what
//! may have changed since (every covered path still covered), pins, enters the working
//! directory and wakes the command process, which it cloned **ahead** and which restricted
//! itself then (capabilities, `no_new_privs`, Landlock, seccomp, close-on-exec: everything of
//! the setup, none of it per command) and waited parked: it only `exec`s the plan's program
//! (`child::Tree::await_command`). The command so runs exactly as the ordinary way's does.
//!
//! A spare is used only when it makes the same tree as the ordinary way would: the command's
//! own setup is planned as always (the cover list computed now), and the spare must
//! [`ChildSetup::serves`] it — the same prepared view (so the same cover list), workspace
//! identity, namespaces, limits, Landlock rights and seccomp programs, all that its parked
//! command was restricted with — and its plan must fit the init's fixed buffers; otherwise the
//! command goes the ordinary way (and a spare made for other settings is replaced, never used). Only `run_command`
//! without standard input and with merged output takes spares (its output pipe is the spare's);
//! PTY and background commands keep the ordinary way.
//!
//! Lifetime: a spare is one relay, one init and its parked command, idle, per workspace at
//! most (the parked command dies with the init, pid 1 of its namespace). It is killed
//! when its view is dropped, expires or is replaced (checked on this thread every few seconds
//! and whenever a spare is made), when clawsmith dies (the relay's lifeline, as for every
//! tree; and its go pipe hangs up), and a spare whose tree died meanwhile is seen at go time (the
//! go pipe is broken, the init finds its parked command gone, or the result pipe ends before the
//! "starting" word) and discarded: the
//! command then goes the ordinary way, nothing of it having run. A spare runs nothing but the
//! command of the request that took it, and only once.
//!
//! The end of a spare's command is read from its init, not its relay ([`SpareChild`]): the
//! init writes the command's wait status on the result pipe, then exits; the call waits on a
//! pidfd of the init (readable only after its whole PID namespace was killed and reaped) and
//! hands the relay — about to exit by itself — to this module's thread to reap, so the relay's
//! teardown of its address space and of the command's mount namespace is not on the call's path.
//!
//! The relay is no copy of clawsmith when the setup has a Landlock ruleset: it, the init and
//! the parked command run in clawsmith's own address space (`child::spawn_shared`: no
//! page-table copy, no copy-on-write faults in clawsmith while the spare waits, no teardown of
//! a copy), watched by a keeper thread per tree that frees their stacks once none of them runs
//! there any more.
//!
//! What it saves is mostly latency: the namespaces and the mounts still happen per command, off
//! the call's critical path. A process that will run one command at most turns
//! spares off in its configuration ([`SandboxConfig::warm_spares`]): the spare its command would
//! order never serves. Such a command neither takes nor orders one (`exec.rs` decides, before
//! anything here is asked).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::child::{self, ChildSetup, PlanArea, SpareEnds};
use crate::config::SandboxConfig;
use crate::platform::{self, Target, World};

/// How often the spares' thread drops spares whose view expired or was dropped.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// An idle spare: its relay (a child of this process), the ends of its go and result pipes,
/// the read end of the output pipe its command will write to, and the setup it was made with.
pub(crate) struct Idle {
    setup: Arc<ChildSetup>,
    /// `None` once handed over to a [`SpareChild`].
    child: Option<RelayHandle>,
    go: std::fs::File,
    result: std::fs::File,
    output: Option<OwnedFd>,
    /// A pidfd of its init (pid 1 of the command's PID namespace, a child of the relay):
    /// readable once the init has exited, which is after the kernel killed and reaped every
    /// other process of that namespace.
    init: Option<OwnedFd>,
    /// The std `Command` a forked relay was forked from (it holds the setup): kept until the
    /// tree is gone, as `Spawned::plan`, so its pages are not freed while shared copy-on-write.
    _command: Option<std::process::Command>,
}

/// A spare's relay: shared with clawsmith's address space ([`child::spawn_shared`]) when the
/// setup has a Landlock ruleset, else forked by std as the ordinary way's is.
enum RelayHandle {
    Forked(std::process::Child),
    Shared(child::SharedRelay),
}

impl RelayHandle {
    fn id(&self) -> u32 {
        match self {
            RelayHandle::Forked(child) => child.id(),
            RelayHandle::Shared(relay) => relay.id(),
        }
    }

    fn kill(&mut self) {
        match self {
            RelayHandle::Forked(child) => drop(child.kill()),
            RelayHandle::Shared(relay) => relay.kill(),
        }
    }

    /// Waits for it to exit and reaps it.
    fn wait(&mut self) {
        match self {
            RelayHandle::Forked(child) => drop(child.wait()),
            RelayHandle::Shared(relay) => relay.wait(),
        }
    }

    fn running(&mut self) -> bool {
        match self {
            RelayHandle::Forked(child) => matches!(child.try_wait(), Ok(None)),
            RelayHandle::Shared(relay) => relay.running(),
        }
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL to the relay; its init follows (PR_SET_PDEATHSIG and the go pipe's end).
            child.kill();
            child.wait();
        }
    }
}

/// Why a taken spare did not start the command.
pub(crate) enum SpareFailure {
    /// Its tree was gone (or could not take the message): nothing ran; go the ordinary way.
    Dead,
    /// Setting up the command in the spare failed before anything of it ran, with this error
    /// (the same the ordinary way would report).
    Setup(io::Error),
}

/// A started command of a spare, waited for through a pidfd of its **init**, not its relay:
/// the init's exit comes after the kernel killed and reaped every process of the command's PID
/// namespace (`setsid` and double forks included), and the init wrote the command's wait status
/// on the result pipe before it. The relay (outside the namespace, running nothing of the
/// command) exits on its own right after; it is reaped, and the spare's memory freed, on the
/// spares' thread, so its exit — the teardown of its copy of clawsmith's address space and of
/// the command's mount namespace — is not on the call's path.
pub(crate) struct SpareChild {
    /// `None` only while dropped.
    idle: Option<Idle>,
    init: tokio::io::unix::AsyncFd<OwnedFd>,
    /// Whether the init was seen gone (then the relay needs no kill, only a reap).
    finished: bool,
}

impl SpareChild {
    pub(crate) fn id(&self) -> Option<u32> {
        self.idle
            .as_ref()
            .and_then(|idle| idle.child.as_ref())
            .map(RelayHandle::id)
    }

    /// Waits for the init to exit (the whole command's namespace gone) and returns the
    /// command's status as the relay would have mirrored it (`SIGKILL` when the init was killed
    /// before the command ended).
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let _ready = self.init.readable().await?;
        self.finished = true;
        let idle = self
            .idle
            .as_mut()
            .ok_or_else(|| io::Error::other("no spare"))?;
        // Never blocks: the init, the pipe's last writer, is gone.
        let mut word = [0u8; 4];
        let status = match read_word(&mut idle.result, &mut word) {
            Ok(()) => i32::from_ne_bytes(word),
            Err(_) => libc::SIGKILL,
        };
        Ok(ExitStatus::from_raw(status))
    }
}

impl Drop for SpareChild {
    fn drop(&mut self) {
        if let Some(idle) = self.idle.take()
            && self.finished
        {
            reap_later(idle);
        }
        // Otherwise (an abandoned call: its guard sent the hard stop) `Idle`'s drop kills the
        // relay and reaps it here.
    }
}

impl Idle {
    /// Sends the command's plan and waits for the init's "starting" word: from then on the
    /// command is this tree's (no way back to the ordinary way), so the caller may order the
    /// next spare from its setup before waiting for the `exec` ([`Starting::started`]).
    pub(crate) fn start(mut self, message: &[u8]) -> Result<Starting, SpareFailure> {
        let init = self.init.take().ok_or(SpareFailure::Dead)?;
        if self.go.write_all(message).is_err() {
            return Err(SpareFailure::Dead);
        }
        let mut word = [0u8; 4];
        if read_word(&mut self.result, &mut word).is_err() {
            // No "starting": the tree died before anything of the command ran.
            return Err(SpareFailure::Dead);
        }
        let code = i32::from_ne_bytes(word);
        if code != 0 {
            return Err(SpareFailure::Setup(io::Error::from_raw_os_error(code)));
        }
        Ok(Starting { idle: self, init })
    }
}

/// A spare whose init said "starting": it has woken the parked command (see [`Idle::start`]).
pub(crate) struct Starting {
    idle: Idle,
    /// The pidfd of the init.
    init: OwnedFd,
}

impl Starting {
    /// Waits until the command has `exec`ed (as `spawn` does), or for its setup's error (the
    /// same the ordinary way would report).
    pub(crate) fn started(mut self) -> io::Result<(SpareChild, OwnedFd)> {
        let mut word = [0u8; 4];
        // The init's word once the command has `exec`ed, or its setup's errno (end of file:
        // the init died meanwhile; the wait then reports `SIGKILL`).
        if read_word(&mut self.idle.result, &mut word).is_ok() {
            let code = i32::from_ne_bytes(word);
            if code != child::EXECED_WORD {
                return Err(io::Error::from_raw_os_error(code));
            }
        }
        let output = self
            .idle
            .output
            .take()
            .ok_or_else(|| io::Error::other("the spare's output was taken"))?;
        let init = child::async_pidfd(self.init)?;
        STARTED.fetch_add(1, Ordering::Relaxed);
        Ok((
            SpareChild {
                idle: Some(self.idle),
                init,
                finished: false,
            },
            output,
        ))
    }
}

impl Idle {
    /// Reaps the relay of a command that ended (it exits on its own once its init is gone).
    fn reap(mut self) {
        if let Some(mut child) = self.child.take() {
            child.wait();
        }
    }
}

/// Reads a 4-byte word; `Err` at end of file (or any error) before it is whole.
fn read_word(file: &mut std::fs::File, word: &mut [u8; 4]) -> io::Result<()> {
    file.read_exact(word)
}

/// Whether spares are taken and made at all in this module's tests, which compare both ways
/// in one process ([`set_warm_spares`]). A host's choice is per configuration
/// ([`SandboxConfig::warm_spares`]), never a switch of the process.
#[cfg(test)]
static ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether spares are taken and made: always, but in this module's tests.
#[cfg(not(test))]
fn enabled() -> bool {
    true
}

#[cfg(test)]
fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Turns warm spares on or off for this process, for the tests: off, no spare is taken or
/// ordered, and the idle spares are dropped (killed). Taking effect for the commands that start
/// after it.
#[cfg(test)]
fn set_warm_spares(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
    if !enabled {
        // A spare being made is finished first, then dropped with the others.
        drop(MAKING.lock().unwrap_or_else(PoisonError::into_inner));
        let dropped = std::mem::take(&mut state().idle);
        drop(dropped);
    }
}

/// Held while a spare is being made (so that the tests' switch waits for it).
static MAKING: Mutex<()> = Mutex::new(());

/// How many commands a spare started.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// How long a command waits for the spare being made for its workspace before it goes the
/// ordinary way (that spare has a head start on anything the command would do itself).
const WAIT_FOR_PENDING: Duration = Duration::from_millis(20);

/// The idle spares (one per workspace at most) and the workspaces a spare is being made for
/// (one entry per order not yet done).
struct State {
    idle: Vec<Idle>,
    pending: Vec<Vec<u8>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    idle: Vec::new(),
    pending: Vec::new(),
});

/// Signalled whenever an order is done (a spare made or not).
static DONE: Condvar = Condvar::new();

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The spares' thread's order queue.
static ORDERS: OnceLock<mpsc::Sender<Order>> = OnceLock::new();

/// What a spare is made from.
enum Order {
    /// A command's own setup, unused because a spare ran it: the next spare's, as it is (the
    /// per-command parts in it — working directory, `.git` pins — come from each go message).
    Setup(Box<ChildSetup>),
    /// Planned on the spares' thread.
    Plan {
        config: Box<SandboxConfig>,
        workspace: PathBuf,
        identity: (u64, u64),
    },
    /// Not an order for a spare: a used spare whose command ended, to reap (see
    /// [`SpareChild`]).
    Reap(Box<Idle>),
}

impl Order {
    /// The workspace it is for, as the spare's setup names it.
    fn workspace(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        match self {
            Order::Setup(setup) => setup
                .namespaces
                .as_ref()
                .map(|namespaces| namespaces.workspace.as_bytes().to_vec())
                .unwrap_or_default(),
            Order::Plan { workspace, .. } => workspace.as_os_str().as_bytes().to_vec(),
            Order::Reap(_) => Vec::new(),
        }
    }
}

/// Takes the spare that makes the same tree as `request` would: one that is idle, or the one
/// being made for its workspace once it is ready (waiting [`WAIT_FOR_PENDING`] at most).
pub(crate) fn take(request: &ChildSetup) -> Option<Idle> {
    if !enabled() {
        return None;
    }
    let workspace = request.namespaces.as_ref()?.workspace.as_bytes();
    let deadline = std::time::Instant::now() + WAIT_FOR_PENDING;
    let mut state = state();
    loop {
        if let Some(index) = state
            .idle
            .iter()
            .position(|idle| idle.setup.serves(request))
        {
            return Some(state.idle.swap_remove(index));
        }
        if !state.pending.iter().any(|pending| pending == workspace) {
            return None;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        state = DONE
            .wait_timeout(state, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Asks the spares' thread for a spare for commands of `config` in `workspace` (nothing
/// happens when one that serves them is ready).
pub(crate) fn order(config: &SandboxConfig, workspace: &Path, identity: (u64, u64)) {
    send(Order::Plan {
        config: Box::new(config.clone()),
        workspace: workspace.to_path_buf(),
        identity,
    });
}

/// Asks the spares' thread for a spare made from `setup`, a command's own setup that a spare
/// made unnecessary (so the next spare needs no planning of its own).
pub(crate) fn order_from(setup: ChildSetup) {
    send(Order::Setup(Box::new(setup)));
}

/// Hands a used spare whose command ended to the spares' thread, which waits for its relay and
/// frees it (off the call's path); reaped here when that thread is gone.
fn reap_later(idle: Idle) {
    REAPING.fetch_add(1, Ordering::SeqCst);
    if let Err(mpsc::SendError(Order::Reap(idle))) = orders().send(Order::Reap(Box::new(idle))) {
        idle.reap();
        reaped();
    }
}

/// Used spares handed to the spares' thread and not yet reaped.
static REAPING: AtomicU64 = AtomicU64::new(0);

fn reaped() {
    REAPING.fetch_sub(1, Ordering::SeqCst);
}

fn send(order: Order) {
    if !enabled() {
        return;
    }
    let sender = orders();
    let workspace = order.workspace();
    state().pending.push(workspace.clone());
    if sender.send(order).is_err() {
        done(&workspace);
    }
}

/// The sender of the spares' thread's queue (the thread is started on first use).
fn orders() -> &'static mpsc::Sender<Order> {
    ORDERS.get_or_init(|| {
        let (sender, orders) = mpsc::channel();
        // Without the thread the orders go nowhere and every command goes the ordinary way.
        let _ = std::thread::Builder::new()
            .name("clawsmith-spares".to_owned())
            .spawn(move || spares_thread(&orders));
        sender
    })
}

/// One order for `workspace` is done.
fn done(workspace: &[u8]) {
    let mut state = state();
    if let Some(index) = state
        .pending
        .iter()
        .position(|pending| pending == workspace)
    {
        state.pending.swap_remove(index);
    }
    DONE.notify_all();
}

fn spares_thread(orders: &mpsc::Receiver<Order>) {
    loop {
        match orders.recv_timeout(PRUNE_EVERY) {
            Ok(Order::Reap(idle)) => {
                idle.reap();
                reaped();
            }
            Ok(order) => {
                let workspace = order.workspace();
                prune();
                make(order);
                done(&workspace);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => prune(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Drops (kills) the spares whose view expired or is no longer kept, or whose tree is gone.
fn prune() {
    let mut dropped = Vec::new();
    {
        let mut state = state();
        let mut index = 0;
        while index < state.idle.len() {
            let idle = &mut state.idle[index];
            let alive = idle.child.as_mut().is_some_and(RelayHandle::running);
            let current = idle
                .setup
                .namespaces
                .as_ref()
                .is_some_and(|namespaces| platform::base_is_current(&namespaces.base));
            if alive && current {
                index += 1;
            } else {
                dropped.push(state.idle.swap_remove(index));
            }
        }
    }
    // Killed and reaped outside the lock.
    drop(dropped);
}

/// Makes a spare for `order` unless one that serves it is ready; it replaces the spare of the
/// same workspace made for another view or other settings (one idle tree per workspace).
fn make(order: Order) {
    let _making = MAKING.lock().unwrap_or_else(PoisonError::into_inner);
    if !enabled() {
        return;
    }
    let setup = match order {
        Order::Setup(setup) => *setup,
        Order::Reap(idle) => {
            idle.reap();
            reaped();
            return;
        }
        Order::Plan {
            config,
            workspace,
            identity,
        } => {
            let Some(setup) = planned(&config, &workspace, identity) else {
                return;
            };
            setup
        }
    };
    if state().idle.iter().any(|idle| idle.setup.serves(&setup)) {
        return;
    }
    let Ok(idle) = spawn(setup) else {
        return;
    };
    let replaced: Vec<Idle> = {
        let mut state = state();
        let same_workspace = |other: &Idle| match (&other.setup.namespaces, &idle.setup.namespaces)
        {
            (Some(theirs), Some(mine)) => {
                Arc::ptr_eq(&theirs.base, &mine.base)
                    || (theirs.workspace == mine.workspace && theirs.identity == mine.identity)
            }
            _ => false,
        };
        let (replaced, keep): (Vec<Idle>, Vec<Idle>) = std::mem::take(&mut state.idle)
            .into_iter()
            .partition(same_workspace);
        state.idle = keep;
        state.idle.push(idle);
        replaced
    };
    drop(replaced);
}

/// The setup a spare for commands of `config` in `workspace` is made with: a command's own,
/// planned in the built view at the workspace root, without a PTY or `.git` pins (those and
/// the working directory come from each go message). `None` when the built view cannot be
/// planned.
pub(crate) fn planned(
    config: &SandboxConfig,
    workspace: &Path,
    identity: (u64, u64),
) -> Option<ChildSetup> {
    let target = Target {
        workspace,
        identity,
        cwd: workspace,
        host_temp_dir: None,
        pty: false,
        pty_slave: None,
        repositories: None,
    };
    platform::plan(config, target, World::Built)
        .ok()
        .map(|plan| plan.setup)
}

/// Starts the spare's relay (which returns once its init is ready) with `setup` and the ends
/// of a go, a result and an output pipe: sharing clawsmith's address space
/// ([`child::spawn_shared`]) when the setup has a Landlock ruleset — which keeps the command
/// from reaching its init and parked command, which then run in clawsmith's own memory —, else
/// forked by std.
fn spawn(mut setup: ChildSetup) -> io::Result<Idle> {
    let pipe = || -> io::Result<(OwnedFd, OwnedFd)> {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)
    };
    let (go_read, go_write) = pipe()?;
    let (result_read, result_write) = pipe()?;
    let (output_read, output_write) = pipe()?;
    let hold = if setup.landlock.is_some() && shares_address_space() {
        Some(pipe()?)
    } else {
        None
    };
    let namespaces = setup
        .namespaces
        .as_mut()
        .ok_or_else(|| io::Error::other("not a namespaced setup"))?;
    namespaces.spare = Some(SpareEnds {
        go: go_read.as_raw_fd(),
        result: result_write.as_raw_fd(),
        area: PlanArea::new()?,
        hold: hold.as_ref().map_or(-1, |(_, write)| write.as_raw_fd()),
    });
    let setup = Arc::new(setup);
    let (child, command) = match hold {
        Some(hold) => (
            RelayHandle::Shared(child::spawn_shared(Arc::clone(&setup), output_write, hold)?),
            None,
        ),
        None => {
            // The one other place a process is made for a model's command (see
            // `exec::new_process`): the relay never `exec`s this program; the command `exec`s
            // what the go message says.
            #[allow(clippy::disallowed_methods)]
            let mut command = std::process::Command::new("/bin/sh");
            command
                .env_clear()
                .stdin(Stdio::null())
                .stdout(Stdio::from(output_write.try_clone()?))
                .stderr(Stdio::from(output_write));
            Arc::clone(&setup).install_std(&mut command);
            let child = command.spawn()?;
            command.stdout(Stdio::null()).stderr(Stdio::null());
            (RelayHandle::Forked(child), Some(command))
        }
    };
    // Our copies of the init's ends and of the output's write end close now.
    drop(go_read);
    drop(result_write);
    let relay = child.id();
    let mut idle = Idle {
        setup,
        child: Some(child),
        go: std::fs::File::from(go_write),
        result: std::fs::File::from(result_read),
        output: Some(output_read),
        init: None,
        _command: command,
    };
    // The relay is ready: the init waits for its go message.
    idle.init = Some(init_pidfd(relay)?);
    Ok(idle)
}

/// Whether a spare's relay (given a Landlock ruleset) shares clawsmith's address space: always
/// outside tests, which have no run-time switch. Tests compare both ways in one process
/// through `tests::FORKED_RELAYS`, a seam compiled only into the test build.
fn shares_address_space() -> bool {
    #[cfg(test)]
    if tests::FORKED_RELAYS.load(Ordering::Relaxed) {
        return false;
    }
    true
}

/// A pidfd of the relay's one child, the init. The pid is checked to still be the relay's
/// child after the pidfd is open: the relay reaps nothing but its init, and only after it
/// exited, so the pidfd cannot name a process that reused the init's pid.
fn init_pidfd(relay: u32) -> io::Result<OwnedFd> {
    let children = || -> io::Result<Vec<i32>> {
        let text = std::fs::read_to_string(format!("/proc/{relay}/task/{relay}/children"))?;
        Ok(text
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect())
    };
    let found = children()?;
    let [init] = found[..] else {
        return Err(io::Error::other("the spare's relay has no init"));
    };
    let pidfd = child::pidfd_open(init)?;
    if children()? != [init] {
        return Err(io::Error::other("the spare's init is gone"));
    }
    Ok(pidfd)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! Real spares, real commands. Each test runs in its own process under nextest; the
    //! counters and the switch are process-wide.
    use std::os::unix::fs::MetadataExt;
    use std::time::Duration;

    use clawsmith_protocol::CancellationSignal;

    use super::*;
    use crate::child::{PLAN_BYTES, PLAN_POINTERS};
    use crate::{CommandOutcome, CommandRequest, ExitKind, KernelSupport, run_command};

    /// Set, spares' relays are forks (copies) of this process even with a Landlock ruleset:
    /// the one way `a_spares_tree_shares_our_memory_and_releases_it_when_gone` makes the
    /// other kind of tree to compare. Production code has no such switch.
    pub(super) static FORKED_RELAYS: AtomicBool = AtomicBool::new(false);

    struct Fixture {
        dir: tempfile::TempDir,
        workspace: PathBuf,
    }

    /// A workspace under /var/tmp (the built view hides the host's /tmp), with a repository
    /// whose `.git` the command's view pins.
    fn fixture() -> Option<Fixture> {
        let support = KernelSupport::probe();
        if support.landlock_abi.is_none() || !support.seccomp || !support.user_namespaces {
            eprintln!("SKIP: the kernel cannot run the built view ({support:?})");
            return None;
        }
        // A child killed by its test makes its fixture where that test removes it.
        let parent = std::env::var_os("CLAWSMITH_SPARE_CHILD")
            .map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from);
        let dir = tempfile::tempdir_in(parent).unwrap();
        for path in ["ws/sub", "ws/.git/hooks", "outside", "tmp"] {
            std::fs::create_dir_all(dir.path().join(path)).unwrap();
        }
        std::fs::write(dir.path().join("ws/.git/config"), "").unwrap();
        let workspace = dir.path().join("ws").canonicalize().unwrap();
        Some(Fixture { dir, workspace })
    }

    impl Fixture {
        fn config(&self) -> SandboxConfig {
            let mut config = SandboxConfig::new(&self.workspace, crate::config::StateDir::NotKept);
            config.temp_root = Some(self.dir.path().join("tmp"));
            let meta = std::fs::metadata(&self.workspace).unwrap();
            config.workspace_identity = Some((meta.dev(), meta.ino()));
            config
        }
    }

    async fn run(config: &SandboxConfig, command: &str, cwd: Option<&str>) -> CommandOutcome {
        let mut request = CommandRequest::new(command);
        request.cwd = cwd.map(str::to_owned);
        run_command(config, &request, &CancellationSignal::new())
            .await
            .unwrap()
    }

    /// Whether `idle` is a spare for `config`'s workspace (other tests of this process may
    /// have spares of their own when the harness runs them in one process).
    fn for_workspace(idle: &Idle, config: &SandboxConfig) -> bool {
        use std::os::unix::ffi::OsStrExt;
        idle.setup.namespaces.as_ref().is_some_and(|namespaces| {
            namespaces.workspace.as_bytes() == config.workspace_root.as_os_str().as_bytes()
        })
    }

    fn idle_count(config: &SandboxConfig) -> usize {
        state()
            .idle
            .iter()
            .filter(|idle| for_workspace(idle, config))
            .count()
    }

    /// Waits (a harness deadline, not a timing assertion) until a spare is idle.
    async fn spare_ready(config: &SandboxConfig) {
        for _ in 0..1000 {
            if idle_count(config) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no spare was made");
    }

    fn started() -> u64 {
        STARTED.load(Ordering::Relaxed)
    }

    /// Drops every idle spare and stops making them; waits (a harness deadline) until the
    /// relays of used spares handed to the spares' thread are reaped.
    fn disable() {
        set_warm_spares(false);
        for _ in 0..500 {
            if REAPING.load(Ordering::SeqCst) == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("used spares' relays were not reaped");
    }

    /// Waits (a harness deadline, not a timing assertion) until `pid` is gone or a zombie.
    fn gone_soon(pid: i32) -> bool {
        for _ in 0..500 {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn enable() {
        set_warm_spares(true);
    }

    /// Runs `command` through a spare (asserting it took one) after a warm-up command. A spare
    /// made just before another process on the machine bound or removed a unix socket serves
    /// no command (the cover list changed): then the command ran the ordinary way, and it runs
    /// again (a few times at most) once the next spare is ready.
    async fn through_spare(
        config: &SandboxConfig,
        command: &str,
        cwd: Option<&str>,
    ) -> CommandOutcome {
        enable();
        for _ in 0..5 {
            if idle_count(config) == 0 {
                run(config, "true", None).await;
                spare_ready(config).await;
            }
            let before = started();
            let outcome = run(config, command, cwd).await;
            if started() == before + 1 {
                return outcome;
            }
            spare_ready(config).await;
        }
        panic!("{command} never went through a spare");
    }

    async fn the_ordinary_way(
        config: &SandboxConfig,
        command: &str,
        cwd: Option<&str>,
    ) -> CommandOutcome {
        disable();
        let before = started();
        let outcome = run(config, command, cwd).await;
        assert_eq!(started(), before);
        outcome
    }

    #[tokio::test]
    async fn a_spare_and_the_ordinary_way_give_identical_results() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        let outside = fixture.dir.path().join("outside");
        let table = [
            ("env | sort", None),
            ("pwd; echo $PWD", Some("sub")),
            ("umask", None),
            ("id", None),
            // Mount points, options and sources, without the ids and device numbers.
            (
                "sed -E 's/^[0-9]+ [0-9]+ [0-9]+:[0-9]+ //' /proc/self/mountinfo",
                None,
            ),
            ("ls -A /tmp /dev/shm; echo listed", None),
            (
                "echo $$ $PPID; cat /proc/1/status | grep -E '^(PPid|Pid):'",
                None,
            ),
            ("ulimit -a", None),
            (
                "grep -E '^(NoNewPrivs|Seccomp|Cap(Inh|Prm|Eff|Bnd|Amb)):' /proc/self/status",
                None,
            ),
            (
                "hostname; readlink /proc/self/ns/pid /proc/self/ns/ipc | wc -l",
                None,
            ),
            (
                "echo x > .git/hooks/pre-commit; echo $?; echo y > .git/config; echo $?",
                None,
            ),
            ("mv .git .git2; echo $?", None),
            // `ls` alone is `exec`ed directly (no bash), with bash's variables.
            ("ls -a", Some("sub")),
            ("/usr/bin/env", Some("sub")),
            // How many filters: one attach each way, not one ahead and one more at go.
            ("grep -E '^Seccomp_filters:' /proc/self/status", None),
        ];
        // As root, a working directory the command itself could not enter without
        // capabilities: entered by the init for the spare's command as for the ordinary one.
        // (As another user the ordinary way's relay, still in the host's view, cannot enter it.)
        let root = nix::unistd::geteuid().is_root();
        let locked_row = root.then_some(("pwd; ls -A . | wc -l", Some("locked")));
        let locked = fixture.workspace.join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::write(locked.join("f"), "").unwrap();
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        let table: Vec<(String, Option<&str>)> = table
            .into_iter()
            .chain(locked_row)
            .map(|(command, cwd)| (command.to_owned(), cwd))
            .chain([(format!("touch {}/x 2>&1; echo $?", outside.display()), None)])
            .collect();
        for (command, cwd) in &table {
            let ordinary = the_ordinary_way(&config, command, *cwd).await;
            let spare = through_spare(&config, command, *cwd).await;
            assert_eq!(spare.output, ordinary.output, "{command}");
            assert_eq!(spare.exit, ordinary.exit, "{command}");
            assert_eq!(spare.sandbox, ordinary.sandbox, "{command}");
            assert!(!outside.join("x").exists());
        }
        std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        // The view really is the confined one (not merely equal to something else).
        let status = through_spare(
            &config,
            "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; ls -A /tmp | wc -l",
            None,
        )
        .await;
        assert_eq!(status.output, "NoNewPrivs:\t1\nSeccomp:\t2\n0\n");
    }

    /// The `/proc/PID/status` lines of `pid` that say how it is restricted.
    fn restrictions(pid: i32) -> Vec<String> {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .filter(|line| {
                [
                    "NoNewPrivs:",
                    "Seccomp:",
                    "CapEff:",
                    "CapPrm:",
                    "CapBnd:",
                    "CapAmb:",
                ]
                .iter()
                .any(|field| line.starts_with(field))
            })
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    }

    /// An idle spare's command process exists before any command does (the init's one child)
    /// and has already restricted itself: no capabilities, `no_new_privs`, a seccomp filter,
    /// and nothing open but its standard streams and four pipes, all close-on-exec (the result
    /// pipe, its two parking pipes and the hold pipe; not the go pipe, not the Landlock
    /// ruleset). The command sent to it then
    /// runs as that process, with one filter attached, not two.
    #[tokio::test]
    async fn an_idle_spares_command_is_restricted_before_its_plan_arrives() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let (_, init) = idle_tree(&config);
        // The relay's `spawn` returned (the spare is idle) only once the command was parked.
        let command = parked(init);
        assert_eq!(
            restrictions(command),
            [
                "CapPrm: 0000000000000000",
                "CapEff: 0000000000000000",
                "CapBnd: 0000000000000000",
                "CapAmb: 0000000000000000",
                "NoNewPrivs: 1",
                "Seccomp: 2",
            ]
        );
        let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{command}/fd"))
            .unwrap()
            .map(|entry| {
                entry
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        fds.sort_unstable();
        assert_eq!(fds.len(), 7, "{fds:?}");
        assert_eq!(fds[..3], [0, 1, 2]);
        for fd in &fds[3..] {
            let target = std::fs::read_link(format!("/proc/{command}/fd/{fd}")).unwrap();
            assert!(
                target.to_string_lossy().starts_with("pipe:"),
                "fd {fd}: {target:?}"
            );
            assert!(
                close_on_exec(command, *fd),
                "fd {fd} is inherited by the command"
            );
        }
        let before = started();
        let outcome = run(
            &config,
            "grep -E '^(NoNewPrivs|Seccomp|Seccomp_filters):' /proc/self/status; echo $$",
            None,
        )
        .await;
        assert_eq!(started(), before + 1, "the idle spare did not run it");
        let filters = the_ordinary_way(
            &config,
            "grep -E '^Seccomp_filters:' /proc/self/status",
            None,
        )
        .await
        .output;
        assert_eq!(
            outcome.output,
            format!("NoNewPrivs:\t1\nSeccomp:\t2\n{filters}2\n")
        );
    }

    /// A spare restricted ahead for other limits than a command's is never used for it: the
    /// command goes the ordinary way with its own limits, the spare (and its parked command)
    /// is replaced by one for the new settings, which then serves.
    #[tokio::test]
    async fn a_spare_restricted_for_other_limits_is_discarded_not_used() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        let default = the_ordinary_way(&config, "ulimit -n", None).await.output;
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let (relay, init) = idle_tree(&config);
        let mut other = config.clone();
        other.limits.open_files = Some(64);
        assert_ne!(default, "64\n");
        let before = started();
        let outcome = run(&other, "ulimit -n", None).await;
        assert_eq!(outcome.output, "64\n");
        assert_eq!(
            started(),
            before,
            "a spare restricted for other limits ran it"
        );
        // The old spare is replaced (killed: its init, and with it the parked command).
        assert!(
            gone_soon(relay) && gone_soon(init),
            "the old spare was left"
        );
        assert_eq!(
            through_spare(&other, "ulimit -n", None).await.output,
            "64\n"
        );
        // And back: the spare for the other limits does not serve the first settings either.
        let before = started();
        assert_eq!(run(&config, "ulimit -n", None).await.output, default);
        assert_eq!(started(), before);
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_in_a_spare_fails_as_the_ordinary_way() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        for command in ["/nonexistent/program", "./missing-script.sh"] {
            let ordinary = the_ordinary_way(&config, command, None).await;
            let spare = through_spare(&config, command, None).await;
            assert_eq!(spare.output, ordinary.output, "{command}");
            assert_eq!(spare.exit, ordinary.exit, "{command}");
            assert_eq!(spare.exit, ExitKind::Code(127), "{command}");
        }
    }

    /// The pid of the idle spare's relay and of its init.
    fn idle_tree(config: &SandboxConfig) -> (i32, i32) {
        let state = state();
        let idle = state
            .idle
            .iter()
            .find(|idle| for_workspace(idle, config))
            .unwrap();
        let relay = idle.child.as_ref().unwrap().id() as i32;
        let children =
            std::fs::read_to_string(format!("/proc/{relay}/task/{relay}/children")).unwrap();
        let init = children.split_whitespace().next().unwrap().parse().unwrap();
        (relay, init)
    }

    /// The pid of an idle spare's parked command: its init's one child.
    fn parked(init: i32) -> i32 {
        let children = std::fs::read_to_string(format!("/proc/{init}/task/{init}/children"))
            .unwrap()
            .split_whitespace()
            .map(|pid| pid.parse::<i32>().unwrap())
            .collect::<Vec<_>>();
        let [command] = children[..] else {
            panic!("the idle spare's init has {children:?} as children")
        };
        command
    }

    /// Whether `fd` of `pid` is close-on-exec (`O_CLOEXEC` in its `fdinfo` flags, octal).
    fn close_on_exec(pid: i32, fd: i32) -> bool {
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .unwrap();
        let flags = u32::from_str_radix(flags.trim(), 8).unwrap();
        flags & libc::O_CLOEXEC as u32 != 0
    }

    /// Whether `pid` runs in this process's address space (`kcmp(KCMP_VM)`); `None` when the
    /// kernel has no `kcmp`.
    fn shares_our_memory(pid: i32) -> Option<bool> {
        match child::shares_our_memory(pid) {
            Ok(same) => Some(same),
            Err(error) => {
                assert_eq!(
                    error.raw_os_error(),
                    Some(libc::ENOSYS),
                    "kcmp of {pid}: {error}"
                );
                None
            }
        }
    }

    /// The threads of this process named `name` and its inaccessible mappings of `size` bytes
    /// (stack guards).
    fn threads_and_mappings(name: &str, size: usize) -> (usize, usize) {
        let threads = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == name)
            .count();
        let mappings = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .filter(|line| {
                let mut fields = line.split_whitespace();
                let range = fields.next().unwrap();
                if fields.next() != Some("---p") {
                    return false;
                }
                let (start, end) = range.split_once('-').unwrap();
                let start = usize::from_str_radix(start, 16).unwrap();
                let end = usize::from_str_radix(end, 16).unwrap();
                end - start == size
            })
            .count();
        (threads, mappings)
    }

    /// A spare's relay, init and parked command run in this process's own address space (no
    /// copy of it: `kcmp`), the command after its `exec` in its own; each tree's keeper
    /// thread ends and its stacks are unmapped once the tree is gone, after commands that
    /// ended, failed to start, timed out (the hard stop, read from the relay's signalfd, while
    /// the next spare's relay already runs beside it) or were discarded unused; with sharing off
    /// the relay is a fork (a copy) and the same commands give the same results.
    #[tokio::test]
    async fn a_spares_tree_shares_our_memory_and_releases_it_when_gone() {
        use crate::child::STACK_GUARD;
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        let (threads_before, mappings_before) = threads_and_mappings("clawsmith-keep", STACK_GUARD);
        let mut outcomes = Vec::new();
        for shared in [true, false] {
            FORKED_RELAYS.store(!shared, Ordering::Relaxed);
            enable();
            run(&config, "true", None).await;
            spare_ready(&config).await;
            let (relay, init) = idle_tree(&config);
            let command = parked(init);
            if shared {
                // The idle spare's keeper and its three stacks' guards (what the end must undo).
                let (threads, mappings) = threads_and_mappings("clawsmith-keep", STACK_GUARD);
                assert!(threads > threads_before && mappings >= mappings_before + 3);
                // None of clawsmith's handlers can run in the tree (they would run over its
                // live memory); the relay blocks only the hard stop (read from its signalfd),
                // the init and the parked command nothing.
                let signals = |pid: i32| -> Vec<String> {
                    std::fs::read_to_string(format!("/proc/{pid}/status"))
                        .unwrap()
                        .lines()
                        .filter(|line| line.starts_with("SigBlk:") || line.starts_with("SigCgt:"))
                        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
                        .collect()
                };
                assert_eq!(
                    signals(relay),
                    ["SigBlk: 0000000000000200", "SigCgt: 0000000000000000"]
                );
                for pid in [init, command] {
                    assert_eq!(
                        signals(pid),
                        ["SigBlk: 0000000000000000", "SigCgt: 0000000000000000"],
                        "pid {pid}"
                    );
                }
            }
            for pid in [relay, init, command] {
                let Some(same) = shares_our_memory(pid) else {
                    eprintln!("SKIP: no kcmp");
                    return;
                };
                assert_eq!(same, shared, "pid {pid}, shared {shared}");
            }
            let outcome = through_spare(&config, "echo $$; id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; ls -A /tmp | wc -l", None).await;
            outcomes.push(outcome.output);
            // Deaf to the group's SIGTERM: only the hard stop ends it.
            let mut request = CommandRequest::new("trap '' TERM; sleep 60; echo missed");
            request.timeout = Some(Duration::from_millis(300));
            spare_ready(&config).await;
            let before = started();
            let outcome = run_command(&config, &request, &CancellationSignal::new())
                .await
                .unwrap();
            assert_eq!(started(), before + 1, "the timed-out command took no spare");
            assert!(
                matches!(outcome.stopped, Some(crate::StopReason::TimedOut(_))),
                "{outcome:?}"
            );
            assert_eq!(outcome.exit, ExitKind::Signal(libc::SIGKILL), "{outcome:?}");
            let failed = through_spare(&config, "/nonexistent/program", None).await;
            assert_eq!(failed.exit, ExitKind::Code(127));
            spare_ready(&config).await;
            // Drops the idle spare unused.
            disable();
        }
        FORKED_RELAYS.store(false, Ordering::Relaxed);
        assert_eq!(outcomes[0], outcomes[1]);
        // A harness deadline, not a timing assertion: the keepers end once their trees are gone.
        let mut left = (usize::MAX, usize::MAX);
        for _ in 0..500 {
            let (threads, mappings) = threads_and_mappings("clawsmith-keep", STACK_GUARD);
            // Up to a few stack mappings are kept for the next spares, no more.
            let kept = child::kept_relay_stacks();
            assert!(kept <= 4);
            left = (threads, mappings - 3 * kept);
            if left == (threads_before, mappings_before) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(left, (threads_before, mappings_before));
    }

    /// The init (pid 1) of a spare's command runs in clawsmith's own memory: the command,
    /// its own Landlock domain, cannot read that memory or anything `ptrace` access guards
    /// (`/proc/1/mem`, `maps`, `environ`), while its own stays readable.
    #[tokio::test]
    async fn a_spares_command_cannot_reach_its_inits_memory() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        let probe = "for f in mem maps environ; do head -c 1 /proc/1/$f >/dev/null 2>&1; echo $f $?; done; \
                     head -c 1 /proc/self/maps >/dev/null; echo self $?";
        let outcome = through_spare(&config, probe, None).await;
        assert_eq!(outcome.output, "mem 1\nmaps 1\nenviron 1\nself 0\n");
        // Nor through the calls that copy memory, take descriptors or trace (the attack
        // table's row 10, here through a spare for certain).
        if !std::path::Path::new("/usr/bin/python3").exists() {
            eprintln!("SKIP: no /usr/bin/python3 for the system call probe");
            return;
        }
        let probe = format!(
            "/usr/bin/python3 - <<'PY'\n{}PY",
            include_str!("../tests/data/init_probe.py")
        );
        let outcome = through_spare(&config, &probe, None).await;
        assert_eq!(
            outcome.output,
            "process_vm_readv EPERM\nprocess_vm_writev EPERM\npidfd_getfd EPERM\n\
             ptrace_attach EPERM\nptrace_seize EPERM\nkcmp EPERM\nproc_fd EACCES\n"
        );
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    /// A configuration with warm spares off (a one-call process) neither takes nor orders a
    /// spare, even with one idle for its workspace, which stays as it was; the same
    /// configuration with them on takes it.
    #[tokio::test]
    async fn warm_spares_turned_off_are_neither_taken_nor_made() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let idle = idle_tree(&config);
        let mut off = config.clone();
        off.warm_spares = false;
        let before = started();
        for _ in 0..3 {
            let outcome = run(&off, "grep -E '^Seccomp:' /proc/self/status", None).await;
            assert_eq!(outcome.output, "Seccomp:\t2\n");
            assert!(outcome.sandbox.confined);
        }
        assert_eq!(started(), before, "a command took a spare");
        assert!(state().pending.is_empty(), "a spare was ordered");
        assert_eq!(idle_tree(&config), idle, "the idle spare was replaced");
        let outcome = through_spare(&config, "grep -E '^Seccomp:' /proc/self/status", None).await;
        assert_eq!(outcome.output, "Seccomp:\t2\n");
        // (`disable` also waits for the reaping of relays handed over before.)
        disable();
        assert_eq!(children(), Vec::<String>::new(), "processes left");
    }

    /// The call is answered from the init's exit (not the relay's): the status is the
    /// command's as the relay mirrored it, and nothing the command left behind — in another
    /// session, ignoring TERM and HUP, writing to the workspace in a loop — still runs or
    /// writes once the call has returned.
    #[tokio::test]
    async fn a_spare_answers_from_its_init_with_the_status_and_nothing_left_running() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        for (command, exit) in [
            ("exit 7", ExitKind::Code(7)),
            ("kill -KILL $$", ExitKind::Signal(9)),
            ("kill -TERM $$", ExitKind::Signal(15)),
            ("true", ExitKind::Code(0)),
        ] {
            let outcome = through_spare(&config, command, None).await;
            assert_eq!(outcome.exit, exit, "{command}");
        }
        let log = fixture.workspace.join("left-behind.log");
        let writer = "setsid sh -c 'trap \"\" TERM HUP; while :; do echo x >> left-behind.log; done' \
             > /dev/null 2>&1 & \
             (trap '' TERM HUP; while :; do echo y >> left-behind.log; done) > /dev/null 2>&1 & \
             while ! test -s left-behind.log; do :; done; echo started";
        let outcome = through_spare(&config, writer, None).await;
        assert_eq!(outcome.output, "started\n");
        assert_eq!(outcome.exit, ExitKind::Code(0));
        let length = std::fs::metadata(&log).unwrap().len();
        assert!(length > 0);
        // A writer still alive would have appended many lines by now.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(std::fs::metadata(&log).unwrap().len(), length);
    }

    #[tokio::test]
    async fn a_spare_killed_from_outside_is_replaced_and_the_command_still_runs_confined() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        for victim in ["relay", "init", "parked command"] {
            run(&config, "true", None).await;
            spare_ready(&config).await;
            let (relay, init) = idle_tree(&config);
            let command = parked(init);
            let pid = match victim {
                "relay" => relay,
                "init" => init,
                _ => command,
            };
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            // Harness deadline: the init follows the relay (or the relay the init), and the
            // parked command its init. A killed parked command leaves its init waiting: its
            // spare is found dead at go time.
            assert!(
                gone_soon(command),
                "{victim}: the parked command outlived the kill"
            );
            if victim != "parked command" {
                assert!(gone_soon(init), "{victim}: the init outlived the kill");
            }
            let before = started();
            let outcome = run(
                &config,
                "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; echo $$",
                None,
            )
            .await;
            assert_eq!(outcome.exit, ExitKind::Code(0), "{victim}");
            assert_eq!(
                outcome.output, "NoNewPrivs:\t1\nSeccomp:\t2\n2\n",
                "{victim}"
            );
            assert_eq!(started(), before, "{victim}: a dead spare was used");
            assert!(outcome.sandbox.confined);
        }
        // And the spare made after that serves again.
        let outcome = through_spare(&config, "echo again", None).await;
        assert_eq!(outcome.output, "again\n");
    }

    #[test]
    fn concurrent_commands_over_one_view_each_get_their_own_tree() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        enable();
        runtime.block_on(async {
            run(&config, "true", None).await;
            spare_ready(&config).await;
        });
        let before = started();
        let outputs = runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for index in 0..12 {
                let config = config.clone();
                tasks.spawn(async move {
                    let script = format!(
                        "ls -A /tmp | wc -l; echo {index} > /tmp/mine; sleep 0.05; cat /tmp/mine; echo $$"
                    );
                    (index, run(&config, &script, None).await)
                });
            }
            let mut outputs = Vec::new();
            while let Some(joined) = tasks.join_next().await {
                outputs.push(joined.unwrap());
            }
            outputs
        });
        assert!(started() > before, "no command went through a spare");
        disable();
        for (index, outcome) in outputs {
            // Its own empty /tmp, its own PID namespace (pid 2 under its init).
            assert_eq!(outcome.output, format!("0\n{index}\n2\n"));
            // Every relay reaped (`disable` waited for the spares' thread).
            assert!(
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(outcome.process_group), None)
                    .is_err()
            );
        }
    }

    /// The direct children of this process (threads' children included).
    fn children() -> Vec<String> {
        let mut found = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            found.extend(text.split_whitespace().map(str::to_owned));
        }
        found
    }

    #[tokio::test]
    async fn two_hundred_spawns_leave_no_descriptor_and_no_process() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        disable();
        let before = open_fds();
        enable();
        let first = started();
        let mut groups = Vec::new();
        for index in 0..200 {
            let command = match index % 3 {
                0 => "true".to_owned(),
                1 => format!("echo {index} > /tmp/mine; cat /tmp/mine"),
                _ => format!("setsid sleep 30 & (sleep 30 &); echo {index}"),
            };
            let outcome = run(&config, &command, None).await;
            assert_eq!(outcome.exit, ExitKind::Code(0), "{command}");
            if index % 3 != 0 {
                assert_eq!(outcome.output, format!("{index}\n"), "{command}");
            }
            groups.push(outcome.process_group);
            // The call returned once the init was gone; the relay exits on its own after it.
            assert!(
                gone_soon(outcome.process_group),
                "{command}: its relay is left"
            );
        }
        assert!(started() > first, "no command went through a spare");
        // Without the idle spare (three descriptors and a relay), nothing is left but the
        // descriptors of prepared views built anew meanwhile (three each, at most eight kept: a
        // unix socket bound or removed anywhere on the machine changes what a view must cover).
        disable();
        let after = open_fds();
        assert!(
            after <= before + 24,
            "descriptors leaked: {before} before, {after} after"
        );
        assert_eq!(children(), Vec::<String>::new(), "processes left");
    }

    #[tokio::test]
    async fn a_plan_over_the_fixed_capacity_goes_the_ordinary_way() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        let long_text = format!("echo {} | wc -c", "x".repeat(PLAN_BYTES + 1000));
        // `basename` is not a builtin: `exec`ed directly, each argument a pointer.
        let many_arguments = format!("basename -a{}", " a".repeat(PLAN_POINTERS + 10));
        for (command, expected) in [
            (long_text, format!("{}\n", PLAN_BYTES + 1001)),
            (many_arguments, "a\n".repeat(PLAN_POINTERS + 10)),
        ] {
            run(&config, "true", None).await;
            spare_ready(&config).await;
            let before = started();
            let outcome = run(&config, &command, None).await;
            assert_eq!(outcome.exit, ExitKind::Code(0));
            assert_eq!(outcome.output, expected);
            assert_eq!(started(), before, "an over-capacity plan went to a spare");
            // The spare taken for it was killed, not left idle.
            assert!(outcome.sandbox.confined);
        }
        // A command that fits still takes the next spare.
        assert_eq!(
            through_spare(&config, "echo fits", None).await.output,
            "fits\n"
        );
    }

    #[tokio::test]
    async fn a_socket_bound_after_the_spare_was_made_is_covered() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let socket = fixture.workspace.join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let before = started();
        let probe = format!(
            "test -S {0} && echo socket; test -c {0} && echo covered",
            socket.display()
        );
        let outcome = run(&config, &probe, None).await;
        assert_eq!(outcome.output, "covered\n");
        assert_eq!(
            started(),
            before,
            "the stale spare served a changed cover list"
        );
        // The next spare is made for the new view and covers it too.
        let outcome = through_spare(&config, &probe, None).await;
        assert_eq!(outcome.output, "covered\n");
    }

    /// The child mode of `a_killed_owner_leaves_no_spare`: makes a spare, prints its relay's
    /// and init's pids, and waits to be killed.
    async fn child_mode_holds_a_spare() {
        let Some(fixture) = fixture() else { return };
        let config = fixture.config();
        enable();
        run(&config, "true", None).await;
        spare_ready(&config).await;
        let (relay, init) = idle_tree(&config);
        println!("SPARE {relay} {init}");
        tokio::time::sleep(Duration::from_secs(600)).await;
    }

    #[tokio::test]
    #[allow(clippy::disallowed_methods)]
    async fn a_killed_owner_leaves_no_spare() {
        if std::env::var_os("CLAWSMITH_SPARE_CHILD").is_some() {
            child_mode_holds_a_spare().await;
            return;
        }
        let Some(fixture) = fixture() else { return };
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "spare::tests::a_killed_owner_leaves_no_spare",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CLAWSMITH_SPARE_CHILD", fixture.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let pids = loop {
            line.clear();
            let read = io::BufRead::read_line(&mut stdout, &mut line).unwrap();
            assert!(read > 0, "the child ended without a spare");
            // libtest's "test … ... " may precede it on the line.
            if let Some((_, rest)) = line.trim().split_once("SPARE ") {
                let pids: Vec<i32> = rest.split(' ').map(|pid| pid.parse().unwrap()).collect();
                break pids;
            }
        };
        assert!(pids.iter().all(|pid| alive(*pid)));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let _ = child.wait();
        // Harness deadline, not a timing assertion.
        for _ in 0..500 {
            if pids.iter().all(|pid| !alive(*pid)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<i32> = pids.into_iter().filter(|pid| alive(*pid)).collect();
        assert!(left.is_empty(), "kill -9 of the owner left {left:?}");
    }
}
