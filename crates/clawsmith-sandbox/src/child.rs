//! The code that runs in the child between `fork` and `exec`, and the few raw system calls the
//! crate needs (kernel probes, PTY window size).
//!
//! This is the only module of clawsmith that allows `unsafe` (with its submodules), each use
//! under a `// SAFETY:` comment that says why it is sound. After `fork` in a multi-threaded
//! parent only async-signal-safe work is allowed: everything that allocates (building the
//! Landlock ruleset, compiling the seccomp BPF programs, formatting user-namespace maps, turning
//! paths into C strings, clamping rlimits) happens in the parent, before `fork`, and the children
//! only issue system calls over data prepared for them.
//!
//! ## A prepared base, then three processes per confined command
//! What is the same for every command of a configuration — the host read-only, the minimal
//! `/dev`, the workspace and extra roots bound read-write, protected paths read-only, secrets and
//! sockets covered, and without network a loopback-only network namespace — is assembled once
//! by a short-lived **builder** in new user and mount (and network) namespaces
//! ([`BaseView::create`]); clawsmith keeps those namespaces by descriptor and the builder exits.
//! Commands of one configuration so share a loopback, as processes of one machine do (abstract
//! unix sockets stay apart: each command is its own Landlock domain). A base is reused only while its description is equal, identities of every
//! bound, protected and covered path included, and for at most a minute (`platform.rs`).
//!
//! tokio forks the **relay** (`C`, the process whose pid clawsmith knows). The relay calls
//! `setsid`, checks that the workspace path still names the directory the session opened,
//! enters the base's user and mount (and, without network, network) namespaces (`setns`), and
//! unshares a copy of the mounts and new PID, IPC, UTS and cgroup namespaces; it starts the
//! **init** (`G`, pid 1 of the new PID namespace). The init adds what is the command's own
//! ([`CommandView`]: a `/proc` of its PID namespace, a private `/tmp` and `/dev/shm`, its
//! `/dev/pts`, the `.git` pins) and starts the **command** (`H`, pid 2), which drops every
//! capability, sets `no_new_privs`, restricts itself with Landlock and seccomp, marks every
//! descriptor above 2 close-on-exec and `exec`s the shell (or a plain command's program itself:
//! `direct.rs`) from an [`ExecPlan`] prepared in the parent.
//!
//! A **warm spare** (`spare.rs`) is the same tree started before its command exists: the relay
//! and the init do all of the above that does not depend on the command — the command process
//! included: the init clones it **ahead** (`CLONE_VM | CLONE_FS`, not `CLONE_VFORK`), and it
//! drops its capabilities, sets `no_new_privs`, restricts itself with Landlock and seccomp,
//! marks its descriptors close-on-exec and parks on a wake pipe (none of that depends on the
//! command: a spare serves only a command whose setup is equal, [`ChildSetup::serves`]) —, then
//! the init closes every descriptor but its status pipe and a spare's two pipes (the relay sees
//! end of file on its setup pipe and lets std's `spawn` return) and waits on the **go** pipe. The go message ([`go_message`]) carries the program, arguments,
//! environment, working directory and `.git` pins; the init reads it into a [`PlanArea`]
//! mapped before the fork (fixed capacity; it cannot allocate), re-checks every covered path,
//! binds the pins, enters the working directory (shared with the parked command, so entered
//! with the init's capabilities as the ordinary way's is), writes a zero word on the **result**
//! pipe and wakes the command, which `exec`s the plan; a setup error of the init or the command from then on
//! goes to the result pipe (clawsmith holds its read end), and its end of file means the
//! command has `exec`ed. The command's view is the ordinary one: the same mounts in the same
//! order, the same namespaces, limits and restrictions.
//!
//! A warm spare's relay is not even that when its setup has a Landlock ruleset (always, where
//! the built view runs): it is a `clone(CLONE_VM)` of clawsmith itself ([`spawn_shared`]), on a
//! stack of its own, made by a **keeper** thread that blocks every signal and waits, doing
//! nothing else, until the hold pipe every process of that tree keeps (close-on-exec) reports
//! that none of them runs in clawsmith's memory any more — then frees the stacks. The relay
//! resets clawsmith's signal handlers first, as `posix_spawn` does; the hard stop is read from
//! a signalfd (a handler would need a static every such relay shares); the command, its own
//! Landlock domain, cannot `ptrace` or read the memory of the init or of itself before `exec`.
//!
//! Otherwise the relay is a `fork` (std's) of clawsmith's address space. The init is a
//! `clone(CLONE_VM)` of the relay and the command a `clone(CLONE_VM | CLONE_VFORK)` of the init,
//! each on a stack of its own: they share the relay's memory instead of copying its page tables
//! (a profile of a spawn had the three copies — `kernel_clone` and the copy-on-write faults
//! after — at ~30% of its processor time), the way `posix_spawn` starts a program. They only
//! make system calls over data prepared before the fork; a setup error goes back to the relay
//! over a close-on-exec pipe (end of file: the command has `exec`ed) and from the relay to
//! `spawn` through std, as before. The init reaps whatever is
//! reparented to it and exits when the command does; the kernel then kills everything left in
//! the namespace, and the init's exit is only reported once they are all gone. The relay waits
//! for the init, mirrors the
//! command's exit status (sent by the init over a pipe), and exits. So:
//! - *the relay has exited* ⇒ *no process of the command is left*;
//! - `SIGUSR1` to the relay kills the init (and with it the namespace) at once: the hard stop
//!   (blocked in the relay and read from a signalfd by its waits; the init unblocks it);
//! - the relay watches a **lifeline** pipe whose write end only the clawsmith process holds:
//!   when clawsmith dies, however it dies (`SIGKILL` included), the read end reports a hang-up
//!   and the relay kills the init; the init has `PR_SET_PDEATHSIG(SIGKILL)` towards the relay
//!   and checks once that the relay is still there, closing the window before the `prctl`.
//!
//! ## Files
//! This file holds the setup ([`ChildSetup`], its [`SpareKey`]) and the relay, the init and
//! the command processes. Beside it: `child/shared.rs` (a spare's relay that shares
//! clawsmith's memory, [`spawn_shared`], and its keeper thread), `child/view.rs`
//! (the [`BaseView`] a builder assembles and the [`CommandView`] each init adds),
//! `child/mounts.rs` (the mount and file system calls those make), `child/restrict.rs` (what
//! the command applies to itself: capabilities, `no_new_privs`, Landlock, seccomp,
//! close-on-exec), `child/plan.rs` (a spare's go message, [`PlanArea`] and [`SpareEnds`]) and
//! `child/host.rs` (the system calls clawsmith makes in its own process for the rest of the
//! crate: the lifeline, pidfds, kernel probes, a PTY's window size).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use nix::sys::resource::{Resource, setrlimit};

#[cfg(test)]
pub(crate) use host::shares_our_memory;
pub(crate) use host::{
    async_file, async_pidfd, landlock_abi, lifeline, pidfd_open, seccomp_available,
    set_window_size, signal_process,
};
use mounts::{bind_read_only, file_identity, open_file, open_path, still_covered};
pub(crate) use plan::{EXECED_WORD, PlanArea, SpareEnds, go_message};
#[cfg(test)]
pub(crate) use plan::{PLAN_BYTES, PLAN_POINTERS};
use plan::{read_plan, read_whole};
use restrict::drop_capabilities;
#[cfg(test)]
pub(crate) use shared::kept_relay_stacks;
pub(crate) use shared::{SharedRelay, spawn_shared};
pub(crate) use view::{ALLOWED_MAX, BaseNamespaces, BaseView, CommandView, Pts};

mod exits;
mod host;
mod mounts;
mod plan;
mod restrict;
mod shared;
mod view;

/// Everything the child applies to itself, prepared by the parent.
#[derive(Debug, Default)]
pub(crate) struct ChildSetup {
    /// Make the PTY on fd 0 the controlling terminal of the new session.
    pub(crate) controlling_tty: bool,
    /// `(resource, value)` pairs, already clamped to the inherited hard limits.
    pub(crate) rlimits: Vec<(Resource, u64)>,
    /// The namespaces and the built view; `None` runs the command in the host's view.
    pub(crate) namespaces: Option<Namespaces>,
    /// Set `no_new_privs` (always, unless the policy is off).
    pub(crate) no_new_privs: bool,
    /// A created Landlock ruleset to restrict the command with.
    pub(crate) landlock: Option<Landlock>,
    /// Compiled seccomp filters, applied in order (each one can only take rights away).
    pub(crate) seccomp: Vec<seccompiler::BpfProgram>,
    /// Directories of the built view granted every handled Landlock right, added to the
    /// ruleset in the command process: the private tmpfs `/tmp` and `/dev` exist only there
    /// (Landlock skips the mount points they hide, so a rule on the host's `/tmp` would not do).
    pub(crate) landlock_private_dirs: Vec<CString>,
    /// The handled filesystem rights of the ruleset (what those rules grant).
    pub(crate) landlock_fs_access: u64,
    /// What the command process of a namespaced tree `exec`s itself (the same program,
    /// arguments and environment std was given): that process shares the init's memory and
    /// cannot return into std (see [`Namespaces::enter`]).
    pub(crate) exec: Option<ExecPlan>,
}

/// A created Landlock ruleset and the rules it was created from: the descriptor says nothing
/// comparable about what it allows, so a warm spare's [`SpareKey`] compares the rules.
#[derive(Debug)]
pub(crate) struct Landlock {
    pub(crate) ruleset: OwnedFd,
    pub(crate) rules: LandlockRules,
}

/// What a Landlock ruleset of the sandbox is created from (the handled rights are the target
/// ABI's, a constant): reads everywhere, every handled right beneath `writable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LandlockRules {
    /// The roots granted every handled filesystem right.
    pub(crate) writable: Vec<std::path::PathBuf>,
    /// Whether the network rights are handled (so refused): the host's view without network.
    pub(crate) handle_network: bool,
}

/// Everything of a [`ChildSetup`] a warm spare applies before its command exists (the view,
/// limits and restrictions its tree and its parked command already have): a spare serves a
/// command only when their keys are equal ([`ChildSetup::serves`]). Built by
/// [`ChildSetup::spare_key`], which destructures the setup, its namespaces and its command view
/// without `..`: a field added to any of them does not compile until it is put here or named
/// as one of the per-command parts the go message carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SpareKey<'a> {
    rlimits: &'a [(Resource, u64)],
    no_new_privs: bool,
    landlock: Option<&'a LandlockRules>,
    seccomp: &'a [seccompiler::BpfProgram],
    landlock_private_dirs: &'a [CString],
    landlock_fs_access: u64,
    /// The prepared view by identity: the very namespaces the relay enters (a base is rebuilt,
    /// as a new value, when its description changes; the setups hold it, so the address is not
    /// reused while they are compared).
    base: *const BaseNamespaces,
    clone_flags: libc::c_int,
    lifeline: (RawFd, RawFd),
    pid_max: Option<&'a CString>,
    workspace: &'a CString,
    identity: (u64, u64),
    covered: &'a [CString],
    tmp_options: &'a CString,
    tmp_roots: &'a [CString],
    tmp_mkdirs: &'a [CString],
    shm_options: &'a CString,
    pts: &'a Pts,
}

/// A program, its arguments and environment as `execve(2)` takes them, prepared before `fork`.
#[derive(Debug)]
pub(crate) struct ExecPlan {
    program: CString,
    /// Owned strings the pointer arrays below point into (their heap buffers never move).
    _strings: Vec<CString>,
    /// NULL-terminated `argv` and `envp`.
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into `_strings`, owned by the same value and never mutated;
// the plan is only read (by the child processes) after it is built.
unsafe impl Send for ExecPlan {}
// SAFETY: as above; nothing writes through the pointers.
unsafe impl Sync for ExecPlan {}

impl ExecPlan {
    /// `program` with `argv` and `env` (`NAME=value` each); `Err` when any holds a NUL byte.
    pub(crate) fn new(
        program: &std::ffi::OsStr,
        argv: &[&std::ffi::OsStr],
        env: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> io::Result<ExecPlan> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "nul byte found in the command's program, arguments or environment",
                )
            })
        };
        let program = c(program.as_bytes())?;
        let mut strings = Vec::with_capacity(argv.len() + env.len());
        for arg in argv {
            strings.push(c(arg.as_bytes())?);
        }
        for (name, value) in env {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            strings.push(c(&pair)?);
        }
        let pointers = |range: &[CString]| {
            range
                .iter()
                .map(|s| s.as_ptr())
                .chain([std::ptr::null()])
                .collect::<Vec<_>>()
        };
        let argv_pointers = pointers(&strings[..argv.len()]);
        let envp_pointers = pointers(&strings[argv.len()..]);
        Ok(ExecPlan {
            program,
            _strings: strings,
            argv: argv_pointers,
            envp: envp_pointers,
        })
    }

    /// The pointers `execve(2)` takes, into this plan.
    fn pointers(&self) -> ExecPointers {
        ExecPointers {
            program: self.program.as_ptr(),
            argv: self.argv.as_ptr(),
            envp: self.envp.as_ptr(),
        }
    }
}

/// `execve(2)`'s arguments, into an [`ExecPlan`] or a spare's [`PlanArea`].
#[derive(Debug, Clone, Copy)]
struct ExecPointers {
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
}

impl ExecPointers {
    const NONE: ExecPointers = ExecPointers {
        program: std::ptr::null(),
        argv: std::ptr::null(),
        envp: std::ptr::null(),
    };

    /// `execve(2)`; returns only with its error.
    fn exec(self) -> io::Error {
        if self.program.is_null() {
            return io::Error::from_raw_os_error(libc::EINVAL);
        }
        // SAFETY: NUL-terminated strings and NULL-terminated arrays prepared before the fork (an
        // `ExecPlan`) or parsed and checked by the init (`read_plan`).
        unsafe {
            libc::execve(self.program, self.argv, self.envp);
        }
        io::Error::last_os_error()
    }
}

/// The namespaces of a confined command and what its view of the machine is made of.
#[derive(Debug)]
pub(crate) struct Namespaces {
    /// The prepared view the command starts from (its user and mount namespaces, entered with
    /// `setns`); kept alive here until the relay has entered it.
    pub(crate) base: Arc<BaseNamespaces>,
    /// `CLONE_NEW*` flags for the relay's `unshare` after entering the base: a copy of the
    /// base's mounts and new PID, IPC, UTS and cgroup namespaces per command.
    pub(crate) clone_flags: libc::c_int,
    /// The read end of the lifeline (see the module docs) and the write end to close.
    pub(crate) lifeline_read: RawFd,
    pub(crate) lifeline_write: RawFd,
    /// `kernel.pid_max` of the new PID namespace (Linux 6.14+): a process-count limit that
    /// binds root too.
    pub(crate) pid_max: Option<CString>,
    /// The workspace in the host's view, checked by the relay against `identity` before it
    /// enters the base: a root swapped since the session opened it is refused.
    pub(crate) workspace: CString,
    /// `(st_dev, st_ino)` the workspace root must have: the descriptor the file tools hold.
    pub(crate) identity: (u64, u64),
    /// The paths the base covers or binds read-only, in the final view: each must still be a
    /// mount point when the relay enters the base (else the host replaced it since and the
    /// cover no longer reaches it: [`STALE_VIEW_ERRNO`]).
    pub(crate) covered: Vec<CString>,
    /// What each command gets of its own on top of the base.
    pub(crate) view: CommandView,
    /// Set for a warm spare (`spare.rs`): the init waits for the command's plan.
    pub(crate) spare: Option<SpareEnds>,
}

/// Blocks (`SIG_BLOCK`) or unblocks (`SIG_UNBLOCK`) `SIGUSR1`, the hard stop; returns the set.
fn mask_hard_stop(how: libc::c_int) -> io::Result<libc::sigset_t> {
    // SAFETY: sigset operations on a local set; sigprocmask(2) of it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        check(libc::sigprocmask(how, &set, std::ptr::null_mut()))?;
        Ok(set)
    }
}

/// Blocks `SIGUSR1` (the hard stop) in this process and returns a signalfd that reads it: the
/// relay's waits poll it and kill the init. A handler would need the init's pid in a static,
/// which relays sharing clawsmith's memory (a spare's, [`spawn_shared`]) would share too. The
/// init unblocks it again (`mask_hard_stop(SIG_UNBLOCK)`) before it clones the command.
fn hard_stop_fd() -> io::Result<RawFd> {
    let set = mask_hard_stop(libc::SIG_BLOCK)?;
    // SAFETY: signalfd(2) of a local set.
    check(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })
}

/// Reads what the hard stop's signalfd holds (so that it stops polling readable) and kills the
/// init.
fn hard_stop(signals: RawFd, init: libc::pid_t) {
    let mut info = [0u8; 128];
    // SAFETY: read(2) into a stack buffer of a signalfd's record size; kill(2).
    unsafe {
        while libc::read(signals, info.as_mut_ptr().cast(), info.len()) > 0 {}
        libc::kill(init, libc::SIGKILL);
    }
}

/// The errno the init reports when the workspace root is not the directory the session opened.
pub(crate) const WORKSPACE_REPLACED_ERRNO: i32 = libc::ESTALE;

/// The errno the relay reports when a path the base view covers is no longer a mount point
/// (removed and made anew on the host since the base was built): the parent builds a new base.
pub(crate) const STALE_VIEW_ERRNO: i32 = libc::EUCLEAN;

impl ChildSetup {
    /// Registers the setup to run in the child of `command`.
    pub(crate) fn install(self, command: &mut tokio::process::Command) {
        // SAFETY: the closure runs after fork in the child and only calls `apply`, which makes
        // async-signal-safe system calls over data that was fully prepared before fork (no
        // allocation, no locks); it never touches state shared with other parent threads.
        unsafe {
            command.pre_exec(move || self.apply());
        }
    }

    /// Registers the setup to run in the child of a std `command` (a warm spare's relay, made
    /// on `spare.rs`'s own thread, outside any tokio runtime).
    pub(crate) fn install_std(self: Arc<Self>, command: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: as in `install`.
        unsafe {
            command.pre_exec(move || self.apply());
        }
    }

    /// Whether a warm spare prepared with this setup makes the same tree as `request` (a
    /// command's own setup) would: this is a spare's setup and their [`SpareKey`]s are equal.
    /// What differs per command (program, arguments, environment, working directory, `.git`
    /// pins) travels in the go message.
    pub(crate) fn serves(&self, request: &ChildSetup) -> bool {
        let spare = self
            .namespaces
            .as_ref()
            .is_some_and(|namespaces| namespaces.spare.is_some());
        spare
            && self
                .spare_key()
                .is_some_and(|mine| request.spare_key() == Some(mine))
    }

    /// What a spare made with this setup has applied before its command exists; `None` for a
    /// setup no spare makes or serves: one without namespaces (the host's view), or a PTY
    /// command's (a spare's output is its pipe).
    pub(crate) fn spare_key(&self) -> Option<SpareKey<'_>> {
        let ChildSetup {
            controlling_tty,
            rlimits,
            namespaces,
            no_new_privs,
            landlock,
            seccomp,
            landlock_private_dirs,
            landlock_fs_access,
            // The program, arguments and environment: the go message's.
            exec: _,
        } = self;
        let Namespaces {
            base,
            clone_flags,
            lifeline_read,
            lifeline_write,
            pid_max,
            workspace,
            identity,
            covered,
            view,
            // The spare's own pipes and plan area.
            spare: _,
        } = namespaces.as_ref()?;
        let CommandView {
            tmp_options,
            tmp_roots,
            tmp_mkdirs,
            shm_options,
            pts,
            // The `.git` pins and the working directory: the go message's.
            pinned: _,
            read_only: _,
            cwd: _,
        } = view;
        if *controlling_tty || !matches!(pts, Pts::NewInstance(_)) {
            return None;
        }
        Some(SpareKey {
            rlimits,
            no_new_privs: *no_new_privs,
            landlock: landlock.as_ref().map(|landlock| &landlock.rules),
            seccomp,
            landlock_private_dirs,
            landlock_fs_access: *landlock_fs_access,
            base: Arc::as_ptr(base),
            clone_flags: *clone_flags,
            lifeline: (*lifeline_read, *lifeline_write),
            pid_max: pid_max.as_ref(),
            workspace,
            identity: *identity,
            covered,
            tmp_options,
            tmp_roots,
            tmp_mkdirs,
            shm_options,
            pts,
        })
    }

    fn apply(&self) -> io::Result<()> {
        self.apply_on(None)
    }

    /// `apply`, with the init's and the command's stacks already mapped (`stacks`, as
    /// [`map_stacks`] lays them out) or mapped here.
    fn apply_on(&self, stacks: Option<*mut u8>) -> io::Result<()> {
        // SAFETY: setsid(2) takes no arguments.
        check(unsafe { libc::setsid() })?;
        if self.controlling_tty {
            // SAFETY: ioctl(2) on fd 0 with an integer argument, no pointer.
            check(unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) })?;
        }
        // The init's and the command's stacks are mapped before the limits: `RLIMIT_AS` counts
        // this process's whole address space, inherited from clawsmith, and may be below it.
        let stacks = match (self.namespaces.is_some(), stacks) {
            (true, Some(stacks)) => stacks,
            (true, None) => map_stacks(2)?,
            (false, _) => std::ptr::null_mut(),
        };
        for (resource, value) in &self.rlimits {
            setrlimit(*resource, *value, *value)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        }
        if let Some(namespaces) = &self.namespaces {
            // Returns only with an error (std reports it); the command `exec`s from a process
            // of its own and the relay ends with `_exit`.
            return Err(namespaces.enter(self, stacks));
        }
        self.restrict()
    }
}

/// Size of the init's and the command's stacks (mapped lazily: a spawn touches a few pages).
const CHILD_STACK: usize = 1 << 20;

/// An inaccessible gap below each stack, so an overflow faults instead of writing into the
/// other (64 KiB: a whole number of pages whatever the page size).
pub(crate) const STACK_GUARD: usize = 1 << 16;

/// What the init and the command processes work from. Both run in the relay's address space
/// (`CLONE_VM`), on stacks of their own, so they read this from the relay's stack, where it lives
/// until the relay is gone.
struct Tree<'a> {
    setup: &'a ChildSetup,
    /// The command's program, arguments and environment: the `ExecPlan`'s, or for a spare
    /// what its init read from the go message.
    exec: std::cell::Cell<ExecPointers>,
    /// Where a setup error goes: `setup_pipe`'s write end, or for a spare after it is ready
    /// its result pipe (the relay no longer reads `setup_pipe` then).
    errors: std::cell::Cell<RawFd>,
    namespaces: &'a Namespaces,
    /// The init writes the command's wait status here, the relay reads it.
    status: (RawFd, RawFd),
    /// The relay holds the write end open for its whole life.
    alive: (RawFd, RawFd),
    /// Close-on-exec: the init or the command writes an errno here when setting up fails; the
    /// relay sees end of file once the command has `exec`ed.
    setup_pipe: (RawFd, RawFd),
    /// The PTY slave the relay opened, or -1.
    slave: RawFd,
    /// The relay's signalfd of the hard stop (`SIGUSR1`, blocked in the relay).
    hard_stop: RawFd,
    /// The top of the command's stack.
    command_stack: *mut libc::c_void,
    /// A spare's command, cloned ahead: the read end of its **wake** pipe (the init writes a
    /// byte once the command's plan is in place) and the write end of its **parked** pipe
    /// (close-on-exec: a word once it is restricted, end of file once it has `exec`ed or died).
    parking: std::cell::Cell<(RawFd, RawFd)>,
}

impl Namespaces {
    /// Runs in the relay (the process std forked from clawsmith, the only copy of clawsmith's
    /// address space a command costs). Enters the base view and new namespaces, then creates the
    /// init with `clone(CLONE_VM)` — it shares the relay's memory instead of copying its page
    /// tables — which creates the command with `clone(CLONE_VM | CLONE_VFORK)`, as
    /// `posix_spawn` does: the command only makes system calls until it `exec`s. Returns only
    /// with the error that kept the command from starting (std reports it to `spawn`); otherwise
    /// the relay waits for the init and ends with `_exit`.
    ///
    /// The three share one `errno` (one thread-local area): the relay does nothing but wait
    /// while the init and the command set up, and after the `exec` no loop of the relay or the
    /// init decides anything from an `errno` the other could have set.
    fn enter(&self, setup: &ChildSetup, stacks: *mut u8) -> io::Error {
        match self.start(setup, stacks) {
            Err(error) => error,
            Ok(never) => match never {},
        }
    }

    fn start(&self, setup: &ChildSetup, stacks: *mut u8) -> io::Result<std::convert::Infallible> {
        // SAFETY: close(2) of this process's copy of the lifeline's write end, which only
        // clawsmith itself may hold.
        unsafe {
            libc::close(self.lifeline_write);
        }
        let exec = match (&setup.exec, &self.spare) {
            (Some(plan), _) => plan.pointers(),
            // A spare's command arrives later, in its go message.
            (None, Some(_)) => ExecPointers::NONE,
            (None, None) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        // The workspace root must still be the directory the session opened (the base bound
        // that directory, not whatever the path names now; a swap is refused, not followed).
        let workspace = open_path(&self.workspace)?;
        let identity = file_identity(workspace);
        // SAFETY: close(2) of the descriptor `open_path` returned, used by nothing else.
        unsafe {
            libc::close(workspace);
        }
        if identity? != self.identity {
            return Err(io::Error::from_raw_os_error(WORKSPACE_REPLACED_ERRNO));
        }
        // A PTY command's slave, opened in the host's view before leaving it.
        let slave = match &self.view.pts {
            Pts::OwnSlave(source, _) => open_file(source)?,
            Pts::NewInstance(_) => -1,
        };
        // SAFETY: setns(2) of namespace descriptors the base owns (it outlives the relay's
        // setup); no pointer.
        check(unsafe { libc::setns(self.base.user.as_raw_fd(), libc::CLONE_NEWUSER) })?;
        // SAFETY: as above.
        check(unsafe { libc::setns(self.base.mount.as_raw_fd(), libc::CLONE_NEWNS) })?;
        if let Some(network) = &self.base.network {
            // SAFETY: as above.
            check(unsafe { libc::setns(network.as_raw_fd(), libc::CLONE_NEWNET) })?;
        }
        for path in &self.covered {
            still_covered(path)?;
        }
        // SAFETY: unshare(2) with flags only.
        check(unsafe { libc::unshare(self.clone_flags) })?;

        // The hard stop is blocked and read from a signalfd before the init exists, so it is
        // never missed (a pending signal is not inherited); the init unblocks it and sets it
        // back to its default (the command inherits that).
        let hard_stop_signals = hard_stop_fd()?;
        let setup_pipe = pipe()?;
        let tree = Tree {
            hard_stop: hard_stop_signals,
            setup,
            exec: std::cell::Cell::new(exec),
            errors: std::cell::Cell::new(setup_pipe.1),
            namespaces: self,
            status: pipe()?,
            alive: pipe()?,
            setup_pipe,
            slave,
            // SAFETY: inside the mapping `map_stacks` made (its end).
            command_stack: unsafe { stacks.add(2 * (STACK_GUARD + CHILD_STACK)) }.cast(),
            parking: std::cell::Cell::new((-1, -1)),
        };
        // SAFETY: the init runs `init_main` on its own stack over `tree`, which outlives it (the
        // relay never returns while the init lives); it ends with `_exit`.
        let init = check(unsafe {
            libc::clone(
                init_main,
                stacks.add(STACK_GUARD + CHILD_STACK).cast(),
                libc::CLONE_VM | libc::SIGCHLD,
                (&tree as *const Tree<'_>).cast_mut().cast(),
            )
        })?;
        // SAFETY: close(2) of the relay's copies of the init's ends of its pipes (the init,
        // sharing this memory but with descriptors of its own, keeps them open).
        unsafe {
            libc::close(tree.status.1);
            libc::close(tree.alive.0);
            libc::close(tree.setup_pipe.1);
        }
        let mut code = [0u8; 4];
        let read = loop {
            let mut fds = [poll_in(tree.setup_pipe.0), poll_in(hard_stop_signals)];
            // Only EINTR can make these fail (see above: errno is not looked at).
            // SAFETY: poll(2) of the two `pollfd`s of the local array.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } <= 0 {
                continue;
            }
            if fds[1].revents != 0 {
                // Then the setup pipe ends (the init is gone) and the relay exits as killed.
                hard_stop(hard_stop_signals, init);
            }
            if fds[0].revents != 0 {
                // SAFETY: read(2) of at most 4 bytes into the 4-byte local buffer.
                let read = unsafe { libc::read(tree.setup_pipe.0, code.as_mut_ptr().cast(), 4) };
                if read >= 0 {
                    break read;
                }
            }
        };
        if read == 4 {
            // The init or the command could not set up: nothing of the command ran.
            // SAFETY: kill(2) of our own child, not yet reaped (so its pid is not reused).
            unsafe {
                libc::kill(init, libc::SIGKILL);
            }
            reap(init);
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(code)));
        }
        // SAFETY: close(2) of the setup pipe's read end, read for the last time above.
        unsafe {
            libc::close(tree.setup_pipe.0);
        }
        let hold = self.spare.as_ref().map_or(-1, |spare| spare.hold);
        relay(
            init,
            [
                tree.status.0,
                tree.alive.1,
                self.lifeline_read,
                hard_stop_signals,
                hold,
            ],
        )
    }
}

/// Maps `count` stacks ([`CHILD_STACK`] each) in a row, each above an inaccessible guard: the
/// init's and the command's, and for a relay that shares clawsmith's memory its own below them.
fn map_stacks(count: usize) -> io::Result<*mut u8> {
    let size = count * (STACK_GUARD + CHILD_STACK);
    // SAFETY: an anonymous private mapping of our own; mprotect(2) over parts of it.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        for index in 0..count {
            let guard = base.add(index * (STACK_GUARD + CHILD_STACK));
            if libc::mprotect(guard.cast(), STACK_GUARD, libc::PROT_NONE) != 0 {
                let error = io::Error::last_os_error();
                libc::munmap(base.cast(), size);
                return Err(error);
            }
        }
        Ok(base)
    }
}

/// Mappings of one kind kept for reuse once their processes are gone (a few at most), so
/// that the next spare neither maps nor faults them in again, and their release is no
/// `munmap` — whose page-table teardown and TLB shootdown across every thread of clawsmith
/// a profile put at ~12% of a shared spare tree's processor time.
struct MappingPool {
    free: std::sync::Mutex<Vec<usize>>,
    size: usize,
}

/// How many mappings of each kind are kept.
const POOLED: usize = 4;

impl MappingPool {
    const fn new(size: usize) -> MappingPool {
        MappingPool {
            free: std::sync::Mutex::new(Vec::new()),
            size,
        }
    }

    fn take(&self) -> Option<*mut u8> {
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        free.pop().map(|address| address as *mut u8)
    }

    /// Keeps `base` for the next `take`, or unmaps it when enough are kept. `base` must be a
    /// mapping of `self.size` bytes that no process uses any more.
    fn give(&self, base: *mut u8) {
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if free.len() < POOLED {
            free.push(base as usize);
            return;
        }
        drop(free);
        // SAFETY: a mapping of that size, used by nothing any more (the caller's word).
        unsafe {
            libc::munmap(base.cast(), self.size);
        }
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

/// Spares' plan areas ([`PlanArea`]).
static PLAN_AREAS: MappingPool = MappingPool::new(PlanArea::SIZE);

/// Waits for `pid`, a child of this process.
fn reap(pid: libc::pid_t) {
    let mut status = 0;
    loop {
        // SAFETY: waitpid(2) of our own child.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        if reaped == pid
            || (reaped < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
        {
            return;
        }
    }
}

/// The init's entry (pid 1 of the new PID namespace): on a setup failure it sends the errno to
/// the relay and exits.
extern "C" fn init_main(tree: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `tree` is the relay's `Tree` (see `Namespaces::start`).
    let tree = unsafe { &*tree.cast::<Tree<'_>>() };
    let error = match tree.init() {
        Err(error) => error,
        Ok(never) => match never {},
    };
    tree.fail(&error, 1)
}

/// A spare's command's entry (cloned ahead): restrictions, a wait for the plan, `exec`.
extern "C" fn parked_main(tree: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as for `init_main`; the init waits on the parked pipe while this process works.
    let tree = unsafe { &*tree.cast::<Tree<'_>>() };
    let Some(spare) = &tree.namespaces.spare else {
        tree.fail(&io::Error::from_raw_os_error(libc::EINVAL), 127)
    };
    let error = tree.parked_command(spare);
    tree.fail(&error, 127)
}

/// The command's entry: restrictions, then `exec`.
extern "C" fn command_main(tree: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as for `init_main`; the init is suspended until this process `exec`s or exits.
    let tree = unsafe { &*tree.cast::<Tree<'_>>() };
    let error = tree.command();
    tree.fail(&error, 127)
}

impl Tree<'_> {
    /// Sends `error` to the relay and exits with `code`.
    fn fail(&self, error: &io::Error, code: libc::c_int) -> ! {
        let errno = error.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
        // SAFETY: write/_exit over an owned descriptor and a stack buffer.
        unsafe {
            libc::write(self.errors.get(), errno.as_ptr().cast(), errno.len());
            libc::_exit(code)
        }
    }

    /// Runs as pid 1 of the new PID namespace: adds the command's own mounts to its copy of
    /// the base, starts the command, reaps.
    fn init(&self) -> io::Result<std::convert::Infallible> {
        // SAFETY: close(2) of the init's copies of the relay's ends (the relay, sharing this
        // memory but with descriptors of its own, keeps them open).
        unsafe {
            libc::close(self.status.0);
            libc::close(self.alive.1);
            libc::close(self.setup_pipe.0);
            libc::close(self.hard_stop);
        }
        set_handler(libc::SIGUSR1, libc::SIG_DFL)?;
        mask_hard_stop(libc::SIG_UNBLOCK)?;
        // SAFETY: prctl(2) with integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
        let mut alive = poll_in(self.alive.0);
        // The relay keeps the write end open for its whole life: a hang-up means it is gone.
        // SAFETY: poll(2) of one local `pollfd`, without waiting.
        if unsafe { libc::poll(&mut alive, 1, 0) } != 0 {
            // SAFETY: _exit(2) takes no pointer and runs no destructor of shared memory.
            unsafe { libc::_exit(1) };
        }
        let namespaces = self.namespaces;
        namespaces.view.enter(self.slave)?;
        if let Some(pid_max) = &namespaces.pid_max {
            write_proc(c"/proc/sys/kernel/pid_max", pid_max.as_bytes())?;
        }
        let command = match &namespaces.spare {
            None => {
                bind_read_only(
                    namespaces.view.pinned.iter().map(CString::as_c_str),
                    namespaces.view.read_only.iter().map(CString::as_c_str),
                )?;
                // SAFETY: chdir(2) of a NUL-terminated path the setup owns.
                check(unsafe { libc::chdir(namespaces.view.cwd.as_ptr()) })?;
                // Returns once the command has `exec`ed or exited.
                // SAFETY: the command runs `command_main` on its own stack (mapped with a
                // guard below it) over `self`, which outlives it: with `CLONE_VFORK` this
                // call returns only once the command has `exec`ed or exited.
                check(unsafe {
                    libc::clone(
                        command_main,
                        self.command_stack,
                        libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                        (self as *const Tree<'_>).cast_mut().cast(),
                    )
                })?
            }
            // Returns once the command has `exec`ed or exited, too.
            Some(spare) => self.await_command(spare)?,
        };
        // The init keeps only the status pipe (and a spare's result pipe): the command's output
        // pipe and std's error pipe must close when the command's side does.
        let result = namespaces.spare.as_ref().map_or(-1, |spare| spare.result);
        let hold = namespaces.spare.as_ref().map_or(-1, |spare| spare.hold);
        close_all_but(&[self.status.1, result, hold]);
        if result >= 0 {
            // The command has `exec`ed (or exited after writing its setup errno first).
            let word = EXECED_WORD.to_ne_bytes();
            // SAFETY: write(2) of a stack buffer to our own descriptor.
            unsafe {
                libc::write(result, word.as_ptr().cast(), word.len());
            }
        }
        let mut command_status: libc::c_int = 0;
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: waitpid(2) into a local integer.
            let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
            if pid == command {
                command_status = status;
                break;
            }
            // EINTR or ECHILD; only ECHILD (nothing left to wait for) ends the loop.
            if pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                break;
            }
        }
        let bytes = command_status.to_ne_bytes();
        // SAFETY: write(2) of a stack buffer to the init's own descriptors, then _exit(2).
        unsafe {
            if result >= 0 {
                // clawsmith reads it once this init is gone (its pidfd), without the relay.
                libc::write(result, bytes.as_ptr().cast(), bytes.len());
            }
            libc::write(self.status.1, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(0)
        }
    }

    /// A spare's init, its view ready but for the command's own part. It clones the command
    /// **ahead** (`CLONE_VM | CLONE_FS`, no `CLONE_VFORK`: both run, one at a time) and waits
    /// until that process has restricted itself — capabilities, `no_new_privs`, Landlock,
    /// seccomp, close-on-exec: everything of [`ChildSetup`], the same for every command a spare
    /// [`ChildSetup::serves`] — and parked on its wake pipe. Then it signals "ready" (the end
    /// of file of `setup_pipe` and std's error pipe, which lets the relay go on and `spawn`
    /// return), waits for the go message, checks what may have changed since the spare was
    /// made (every covered path still covered), pins the `.git` paths and enters the working
    /// directory — shared with the command (`CLONE_FS`), whose own `chdir` would run without
    /// the capabilities the init's has, as the ordinary way's does not — as a command of the
    /// ordinary way does, says "starting" on the result pipe and wakes the command, which
    /// `exec`s the plan's program. From "ready" on a setup error goes to the result pipe.
    /// Returns the command's pid once it has `exec`ed (or died).
    ///
    /// The init, the command and the relay share one `errno` (`CLONE_VM`): while one of the
    /// init and the command works, the other is blocked in a `read` that only a success ends
    /// (no handler is installed in either: nothing interrupts it), so neither reads an `errno`
    /// the other set.
    fn await_command(&self, spare: &SpareEnds) -> io::Result<libc::pid_t> {
        let wake = pipe()?;
        let parked = pipe()?;
        self.parking.set((wake.0, parked.1));
        // SAFETY: the command runs `parked_main` on its own stack over `self`, which outlives
        // it (the relay never returns while the tree lives); it ends with `exec` or `_exit`.
        let command = check(unsafe {
            libc::clone(
                parked_main,
                self.command_stack,
                libc::CLONE_VM | libc::CLONE_FS | libc::SIGCHLD,
                (self as *const Tree<'_>).cast_mut().cast(),
            )
        })?;
        // SAFETY: closing the command's ends in this process.
        unsafe {
            libc::close(wake.0);
            libc::close(parked.1);
        }
        let mut word = [0u8; 4];
        if !read_whole(parked.0, &mut word) {
            // The command could not restrict itself: its errno went to the relay (through
            // `setup_pipe`), which kills this init.
            // SAFETY: _exit(2) takes no pointers.
            unsafe { libc::_exit(1) }
        }
        close_all_but(&[
            self.status.1,
            spare.go,
            spare.result,
            wake.1,
            parked.0,
            spare.hold,
        ]);
        self.errors.set(spare.result);
        let Some(plan) = read_plan(spare.go, &spare.area)? else {
            // Discarded (or clawsmith is gone): nothing to run; the command dies with this
            // init, pid 1 of its namespace.
            // SAFETY: _exit(2) takes no pointers.
            unsafe { libc::_exit(0) }
        };
        // SAFETY: closing the go pipe, which nothing reads any more.
        // SAFETY: close(2) of the go pipe's read end, whose one message was read.
        unsafe {
            libc::close(spare.go);
        }
        for path in &self.namespaces.covered {
            still_covered(path)?;
        }
        // SAFETY: `read_plan` made `paths` point at `pinned + read_only` NUL-terminated strings
        // in the area, which lives as long as this process.
        let paths = unsafe { std::slice::from_raw_parts(plan.paths, plan.pinned + plan.read_only) };
        // SAFETY: each of those pointers is such a string (checked by `read_plan` to end inside
        // the area).
        let c = |pointer: &*const libc::c_char| unsafe { CStr::from_ptr(*pointer) };
        bind_read_only(
            paths[..plan.pinned].iter().map(c),
            paths[plan.pinned..].iter().map(c),
        )?;
        // SAFETY: chdir(2) of a NUL-terminated string in the area (the command's too).
        check(unsafe { libc::chdir(plan.cwd) })?;
        self.exec.set(plan.exec);
        // The parked command killed from outside meanwhile (its end of the parked pipe closed:
        // it cannot have `exec`ed before its wake byte): no "starting", so the call goes the
        // ordinary way, nothing of it having run.
        let mut hung_up = poll_in(parked.0);
        // SAFETY: poll(2) of one owned descriptor, without waiting; _exit(2) takes no pointers.
        if unsafe { libc::poll(&mut hung_up, 1, 0) } != 0 {
            // SAFETY: as above.
            unsafe { libc::_exit(0) }
        }
        let starting = 0i32.to_ne_bytes();
        // SAFETY: write(2) of a stack buffer to our own descriptor.
        let written =
            unsafe { libc::write(spare.result, starting.as_ptr().cast(), starting.len()) };
        if written != starting.len() as isize {
            // Nobody waits for this command any more.
            // SAFETY: _exit(2) takes no pointers.
            unsafe { libc::_exit(0) }
        }
        // SAFETY: signal(2) and write(2) of a stack byte to our own descriptor. A command killed
        // since the check above (no reader left: EPIPE, with SIGPIPE ignored here — the init's
        // own disposition, the command has its own) is reported by the wait below, as the
        // `SIGKILL` it got.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            libc::write(wake.1, [1u8].as_ptr().cast(), 1);
        }
        // End of file once the command has `exec`ed (its end is close-on-exec) or died.
        while read_whole(parked.0, &mut word) {}
        Ok(command)
    }

    /// A spare's command, cloned ahead by its init ([`Tree::await_command`]): drops its
    /// capabilities and restricts itself as the ordinary way's command does, keeps nothing
    /// but its standard streams, the result pipe and its two parking pipes, says so on the
    /// parked pipe and waits for the wake byte; then `exec`s the plan the init read (in the
    /// working directory the init entered for both). Returns the error that stopped it.
    fn parked_command(&self, spare: &SpareEnds) -> io::Error {
        let (wake, parked) = self.parking.get();
        // SAFETY: closing this process's copies of the init's descriptors.
        unsafe {
            libc::close(self.status.1);
            libc::close(self.alive.0);
        }
        if let Err(error) = drop_capabilities().and_then(|()| self.setup.restrict()) {
            return error;
        }
        // Not the go pipe, the ruleset, `setup_pipe` or std's error pipe: the relay sees
        // "ready" once the init has closed its copies too.
        close_all_but(&[0, 1, 2, spare.result, wake, parked, spare.hold]);
        let word = 0i32.to_ne_bytes();
        // SAFETY: write(2) of a stack buffer to our own descriptor.
        if unsafe { libc::write(parked, word.as_ptr().cast(), word.len()) } != 4 {
            // SAFETY: _exit(2) takes no pointers.
            unsafe { libc::_exit(127) }
        }
        let mut byte = [0u8; 1];
        if !read_whole(wake, &mut byte) {
            // The init is gone (the spare discarded): nothing to run.
            // SAFETY: _exit(2) takes no pointers.
            unsafe { libc::_exit(0) }
        }
        self.exec.get().exec()
    }

    /// Runs in the command process: no capabilities, `no_new_privs`, Landlock, seccomp, then
    /// `exec`. Returns the error that stopped it.
    fn command(&self) -> io::Error {
        // SAFETY: closing this process's copies of the init's descriptors (a spare's init
        // closed `alive.0` already; nothing has taken its number since).
        unsafe {
            libc::close(self.status.1);
            libc::close(self.alive.0);
        }
        if let Err(error) = drop_capabilities().and_then(|()| self.setup.restrict()) {
            return error;
        }
        self.exec.get().exec()
    }
}

/// The relay's life after the fork: wait for the init (or the lifeline's hang-up), mirror the
/// command's status, exit. The init shares this process's `errno`: a failed `poll` is retried
/// whatever it says (only EINTR can fail it here).
/// `fds` are the status pipe's read end, the alive pipe's write end, the lifeline, the hard
/// stop's signalfd and a spare's hold pipe (or -1), the only descriptors it keeps.
fn relay(init: libc::pid_t, fds: [RawFd; 5]) -> ! {
    let [
        status_read,
        _alive_write,
        lifeline,
        hard_stop_signals,
        _hold,
    ] = fds;
    // SAFETY: system calls over local values and the descriptors in `fds`, which the relay
    // owns; `sigset_t` is plain data, valid zeroed; the relay never returns to std (it ends
    // with `_exit` or its own signal).
    unsafe {
        close_all_but(&fds);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(signal, libc::SIG_IGN);
        }
        let pidfd = libc::syscall(libc::SYS_pidfd_open, init, 0) as libc::c_int;
        let mut fds = [
            poll_in(pidfd),
            poll_in(lifeline),
            poll_in(hard_stop_signals),
        ];
        if pidfd >= 0 {
            loop {
                fds[0].revents = 0;
                fds[1].revents = 0;
                fds[2].revents = 0;
                if libc::poll(fds.as_mut_ptr(), 3, -1) < 0 {
                    continue;
                }
                if fds[1].revents != 0 {
                    // clawsmith is gone: so is the command.
                    libc::kill(init, libc::SIGKILL);
                    break;
                }
                if fds[2].revents != 0 {
                    // The hard stop: the init's exit ends this wait.
                    hard_stop(hard_stop_signals, init);
                }
                if fds[0].revents != 0 {
                    break;
                }
            }
        }
        reap(init);
        let mut bytes = [0u8; 4];
        let read = libc::read(status_read, bytes.as_mut_ptr().cast(), bytes.len());
        let status = if read == 4 {
            libc::c_int::from_ne_bytes(bytes)
        } else {
            // The init was killed before the command ended (a hard stop): report SIGKILL.
            libc::SIGKILL
        };
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let signal = libc::WTERMSIG(status);
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

/// Brings up `lo` in the new network namespace, so servers on 127.0.0.1 inside the sandbox work.
fn loopback_up() -> io::Result<()> {
    // SAFETY: socket(2) with integer arguments only.
    let socket =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `ifreq` is plain data (a name and a union of integers), valid zeroed.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    let result = (|| {
        // SAFETY: SIOCGIFFLAGS fills the flags of the local `ifreq`, named "lo".
        check(unsafe { libc::ioctl(socket, libc::SIOCGIFFLAGS as _, &mut request) })?;
        // SAFETY: SIOCGIFFLAGS just set the union's `ifru_flags` member.
        unsafe {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        }
        // SAFETY: SIOCSIFFLAGS reads the local `ifreq`.
        check(unsafe { libc::ioctl(socket, libc::SIOCSIFFLAGS as _, &request) })
    })();
    // SAFETY: close(2) of the socket made above, used by nothing else.
    unsafe {
        libc::close(socket);
    }
    result.map(drop)
}

fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2(2) writes two descriptors into the owned array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

fn set_handler(signal: libc::c_int, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: `sigaction` is plain data, valid zeroed (an empty mask, no flags).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = handler;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: sigaction(2) of that local struct; its only caller sets `SIG_DFL`, no function.
    check(unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) }).map(drop)
}

/// A `pollfd` waiting for `fd` to be readable (or hung up).
fn poll_in(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Closes every descriptor except `keep` (which need not be sorted; -1 entries are ignored).
fn close_all_but(keep: &[RawFd]) {
    let mut sorted = [-1 as RawFd; 8];
    let count = keep.len().min(sorted.len());
    sorted[..count].copy_from_slice(&keep[..count]);
    sorted[..count].sort_unstable();
    let mut first: u32 = 0;
    for fd in sorted[..count].iter().filter(|fd| **fd >= 0) {
        let fd = *fd as u32;
        if fd > first {
            // SAFETY: close_range(2) over a range of this process's descriptors.
            unsafe {
                libc::syscall(libc::SYS_close_range, first, fd - 1, 0u32);
            }
        }
        first = fd + 1;
    }
    // SAFETY: as above.
    unsafe {
        libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32);
    }
}

/// A system call's return value, or the error it set (any negative value).
fn check<T: Into<i64> + Copy>(rc: T) -> io::Result<T> {
    if rc.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn write_proc(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a borrowed buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, data.as_ptr().cast(), data.len());
        let write_error = io::Error::last_os_error();
        libc::close(fd);
        if written < 0 || written as usize != data.len() {
            return Err(write_error);
        }
    }
    Ok(())
}
