//! A warm spare's relay that is no fork ([`spawn_shared`]): a `clone(CLONE_VM)` of clawsmith
//! on stacks of its own, started by a keeper thread that frees those stacks once no process of
//! its tree runs in clawsmith's memory any more (the hold pipe's end of file).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::{
    CHILD_STACK, ChildSetup, MappingPool, STACK_GUARD, check, map_stacks, pipe, reap,
    signal_process,
};

/// Shared relays' stacks (three each, [`map_stacks`]).
static RELAY_STACKS: MappingPool = MappingPool::new(3 * (STACK_GUARD + CHILD_STACK));

/// How many shared relays' stack mappings are kept for reuse.
#[cfg(test)]
pub(crate) fn kept_relay_stacks() -> usize {
    RELAY_STACKS.kept()
}

/// A warm spare's relay made without copying clawsmith's address space ([`spawn_shared`]): a
/// child process of clawsmith, reaped by pid.
#[derive(Debug)]
pub(crate) struct SharedRelay {
    pid: libc::pid_t,
    reaped: bool,
}

impl SharedRelay {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
    }

    pub(crate) fn kill(&self) {
        if !self.reaped {
            signal_process(self.pid, libc::SIGKILL);
        }
    }

    /// Waits for the relay to exit and reaps it.
    pub(crate) fn wait(&mut self) {
        if !self.reaped {
            reap(self.pid);
            self.reaped = true;
        }
    }

    /// Whether it is still running (reaped when it is not).
    pub(crate) fn running(&mut self) -> bool {
        if self.reaped {
            return false;
        }
        let mut status = 0;
        // SAFETY: waitpid(2) of our own child, without blocking.
        let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if reaped == 0 {
            return true;
        }
        self.reaped = true;
        false
    }
}

/// What a shared relay starts from, on the heap until its keeper thread is done.
struct RelayStart {
    setup: Arc<ChildSetup>,
    /// Its standard input (`/dev/null`) and its output (the spare's output pipe).
    null: RawFd,
    output: RawFd,
    /// Close-on-exec: the relay's errno when it could not start the tree; end of file once the
    /// spare is ready.
    report: RawFd,
    /// The three stacks ([`map_stacks`]): the relay's, the init's, the command's; unmapped
    /// when this is dropped.
    stacks: *mut u8,
}

// SAFETY: `stacks` is a mapping this value owns; the keeper thread that holds it is the only
// one that frees it.
unsafe impl Send for RelayStart {}

impl Drop for RelayStart {
    fn drop(&mut self) {
        // The mapping `map_stacks(3)` made, used by no process any more (the keeper drops this
        // only after the hold pipe's end of file, or unrun).
        RELAY_STACKS.give(self.stacks);
    }
}

/// Starts a warm spare's relay with `clone(CLONE_VM)`: the relay, and the init and parked
/// command it clones (`CLONE_VM` too), run in clawsmith's own address space on stacks mapped
/// here, instead of in a copy of it — no page-table copy for the fork, no copy-on-write faults
/// in clawsmith while the spare waits, no teardown of a copy at its end (the `fork` of the
/// relay and its faults were ~20% of a calling thread's processor time and part of the
/// relay's). Returns once the spare is ready (as std's `spawn` does for the forked relay) or
/// with the errno that kept it from starting.
///
/// What makes sharing safe:
/// - the tree only makes system calls over `setup` (immutable, kept alive with the stacks) and
///   its own stacks, as the forked relay's tree does over its copy;
/// - they share one thread-local area (`errno`) with the thread that cloned them, so that is a
///   **keeper** thread of their own, which blocks every signal and then does nothing but one
///   blocking `read` of the **hold** pipe until every process of the tree has exited or
///   `exec`ed (each holds its close-on-exec write end, [`SpareEnds::hold`](super::SpareEnds::hold)); only then are the
///   stacks unmapped and the setup released;
/// - the relay sets every caught signal's disposition back to the default and `SIGPIPE` too
///   before it unblocks any (clawsmith's handlers must not run in it), as `posix_spawn` does, and
///   its hard stop reads a signalfd, not a static shared with every other relay;
/// - a command is a Landlock domain of its own (the spare's setup has a ruleset: the caller
///   checks), and Landlock refuses a process `ptrace` and `/proc/<pid>/mem` access to a less
///   restricted one: the parked command before its `exec` and the init are out of its reach;
/// - entering the base's user namespace (made by clawsmith's own uid) leaves the shared memory's
///   `dumpable` flag as it was.
///
/// `hold` is the hold pipe (read end, write end), whose write end's number `setup`'s
/// `SpareEnds` carries; `output` the write end of the spare's output pipe. This process's
/// copies of both write ends are closed once the relay has its own.
pub(crate) fn spawn_shared(
    setup: Arc<ChildSetup>,
    output: OwnedFd,
    hold: (OwnedFd, OwnedFd),
) -> io::Result<SharedRelay> {
    use std::os::fd::FromRawFd;
    let (report_read, report_write) = pipe()?;
    // SAFETY: `pipe` made these two descriptors; each is owned once from here on.
    let report_read = unsafe { OwnedFd::from_raw_fd(report_read) };
    // SAFETY: as above.
    let report_write = unsafe { OwnedFd::from_raw_fd(report_write) };
    // SAFETY: open(2) of a constant path; the descriptor is owned once from here on.
    let null = check(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: the descriptor `open` just returned, owned by nothing else.
    let null = unsafe { OwnedFd::from_raw_fd(null) };
    let stacks = match RELAY_STACKS.take() {
        Some(stacks) => stacks,
        None => map_stacks(3)?,
    };
    let start = Box::new(RelayStart {
        setup,
        null: null.as_raw_fd(),
        output: output.as_raw_fd(),
        report: report_write.as_raw_fd(),
        stacks,
    });
    let pid = Arc::new(std::sync::atomic::AtomicI32::new(0));
    let (hold_read, hold_write) = hold;
    let keeper = {
        let pid = Arc::clone(&pid);
        move || {
            keep(
                start,
                &pid,
                [report_write, hold_write, output, null],
                hold_read,
            )
        }
    };
    let spawned = std::thread::Builder::new()
        .name("clawsmith-keep".to_owned())
        .stack_size(64 * 1024)
        .spawn(keeper);
    // On an error the closure (and with it the stacks' owner) was dropped unrun.
    spawned?;
    // End of file: ready (or the clone failed, reported the same way).
    let mut file = std::fs::File::from(report_read);
    let mut word = [0u8; 4];
    let ready = std::io::Read::read_exact(&mut file, &mut word).is_err();
    drop(file);
    let relay = pid.load(std::sync::atomic::Ordering::SeqCst);
    if ready && relay > 0 {
        return Ok(SharedRelay {
            pid: relay,
            reaped: false,
        });
    }
    if relay > 0 {
        // It wrote its errno and exits (its init, if any, was killed and reaped first).
        reap(relay);
    }
    let code = i32::from_ne_bytes(word);
    Err(io::Error::from_raw_os_error(if ready {
        libc::EIO
    } else {
        code
    }))
}

/// The keeper thread of a shared relay (see [`spawn_shared`]): clones the relay, closes this
/// process's copies of the ends it gave it (`ends`), then blocks until no process of the tree
/// runs in this memory any more and frees the stacks and the setup.
fn keep(
    start: Box<RelayStart>,
    pid: &std::sync::atomic::AtomicI32,
    ends: [OwnedFd; 4],
    hold: OwnedFd,
) {
    // SAFETY: sigfillset of a local set and pthread_sigmask(3) of this thread: no signal
    // handler runs on this thread (so no EINTR, and nothing of clawsmith writes this thread's
    // errno while the tree shares it); clone(2) of `relay_main` on its own stack over `start`,
    // which outlives the relay (freed below only after the hold pipe's end of file).
    let cloned = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
        libc::clone(
            relay_main,
            start.stacks.add(STACK_GUARD + CHILD_STACK).cast(),
            libc::CLONE_VM | libc::CLONE_PARENT_SETTID | libc::SIGCHLD,
            (&*start as *const RelayStart).cast_mut().cast(),
            pid.as_ptr(),
        )
    };
    if cloned < 0 {
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
            .to_ne_bytes();
        // SAFETY: write(2) of a stack buffer to the report pipe, before its end closes.
        unsafe {
            libc::write(ends[0].as_raw_fd(), errno.as_ptr().cast(), errno.len());
        }
    }
    drop(ends);
    if cloned > 0 {
        let mut byte = [0u8; 1];
        // End of file once every holder exited or `exec`ed; nothing interrupts it (every
        // signal is blocked here), and errno is not looked at.
        // SAFETY: read(2) into a stack byte from our own descriptor.
        while unsafe { libc::read(hold.as_raw_fd(), byte.as_mut_ptr().cast(), 1) } != 0 {}
    }
    // Unmaps the stacks, releases the setup.
    drop(start);
}

/// A shared relay's entry: clawsmith's signal handlers and mask undone, its standard streams
/// set, then the setup as the forked relay runs it.
extern "C" fn relay_main(start: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `start` is the keeper's `RelayStart`, alive until this tree is gone.
    let start = unsafe { &*start.cast::<RelayStart>() };
    // SAFETY: rt_sigaction(2), dup2(2) and sigprocmask(2) over local values and our own
    // descriptors; every signal is blocked on entry (the keeper's mask).
    let error = unsafe {
        // The kernel's `struct sigaction` (zeroed: `SIG_DFL`, no flags, an empty mask), through
        // rt_sigaction(2) itself: glibc's `sigaction` refuses the signals it keeps for itself
        // (its thread cancellation and set-id broadcast handlers), which must go too.
        let default = [0u64; 4];
        for signal in 1..=libc::SIGRTMAX() {
            let mut old = [0u64; 4];
            let queried = libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<[u64; 4]>(),
                &mut old,
                8usize,
            );
            let handler = old[0] as libc::sighandler_t;
            if queried == 0
                && handler != libc::SIG_DFL
                && (handler != libc::SIG_IGN || signal == libc::SIGPIPE)
            {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &default,
                    std::ptr::null_mut::<[u64; 4]>(),
                    8usize,
                );
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::dup2(start.null, 0) < 0
            || libc::dup2(start.output, 1) < 0
            || libc::dup2(start.output, 2) < 0
            || libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0
        {
            io::Error::last_os_error()
        } else {
            let stacks = start.stacks.add(STACK_GUARD + CHILD_STACK);
            match start.setup.apply_on(Some(stacks)) {
                Err(error) => error,
                Ok(()) => io::Error::from_raw_os_error(libc::EINVAL),
            }
        }
    };
    let errno = error.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
    // SAFETY: write(2) of a stack buffer to the report pipe; _exit(2).
    unsafe {
        libc::write(start.report, errno.as_ptr().cast(), errno.len());
        libc::_exit(127)
    }
}
