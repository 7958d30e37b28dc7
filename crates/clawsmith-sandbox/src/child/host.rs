//! The system calls clawsmith makes in its own process for the rest of the crate, none of
//! them between `fork` and `exec`: the lifeline pipe, pidfds, the kernel probes, a PTY's window
//! size, and registering descriptors with tokio.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::check;

/// The process-wide lifeline: a pipe whose write end only this process holds (close-on-exec,
/// and every relay closes its inherited copy first thing), so its read end hangs up in the
/// relays exactly when this process is gone.
pub(crate) fn lifeline() -> io::Result<(RawFd, RawFd)> {
    static LIFELINE: std::sync::OnceLock<Result<(OwnedFd, OwnedFd), i32>> =
        std::sync::OnceLock::new();
    let pair = LIFELINE.get_or_init(|| {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2(2) writes two fresh descriptors, which the OwnedFds then own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        // SAFETY: both descriptors were just created and are owned by nothing else.
        Ok(unsafe {
            (
                std::os::fd::FromRawFd::from_raw_fd(fds[0]),
                std::os::fd::FromRawFd::from_raw_fd(fds[1]),
            )
        })
    });
    match pair {
        Ok((read, write)) => Ok((read.as_raw_fd(), write.as_raw_fd())),
        Err(code) => Err(io::Error::from_raw_os_error(*code)),
    }
}

/// A pidfd of `pid` (a child of this process, not yet reaped): readable once it has exited.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) takes no pointers; the descriptor it returns is ours to own.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })?;
    // SAFETY: a fresh descriptor owned by nothing else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as RawFd) })
}

/// Registers a pidfd with the tokio reactor (readable once its process has exited).
pub(crate) fn async_pidfd(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: `AsyncFd` owns the descriptor; nothing else closes or replaces it while it is
    // registered (the I/O-safety condition of `register`).
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(io::Error::from)
}

/// Whether `pid` runs in this process's address space (`kcmp(KCMP_VM)`).
#[cfg(test)]
pub(crate) fn shares_our_memory(pid: i32) -> io::Result<bool> {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp(2) takes no pointers.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            libc::c_long::from(libc::getpid()),
            libc::c_long::from(pid),
            KCMP_VM,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    })?;
    Ok(rc == 0)
}

/// Sends `signal` to one process (the relay's hard stop, `SIGUSR1`).
pub(crate) fn signal_process(pid: i32, signal: libc::c_int) {
    if pid > 0 {
        // SAFETY: kill(2) takes no pointers.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// The Landlock ABI version of the running kernel, `None` when Landlock is unavailable.
pub(crate) fn landlock_abi() -> Option<u32> {
    // SAFETY: with a null attribute, size 0 and LANDLOCK_CREATE_RULESET_VERSION (1) the call only
    // reports the ABI version.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(version).ok().filter(|v| *v > 0)
}

/// Whether the kernel was built with seccomp.
pub(crate) fn seccomp_available() -> bool {
    // SAFETY: PR_GET_SECCOMP takes no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Sets a PTY's window size (`TIOCSWINSZ`); the foreground process group gets `SIGWINCH`.
pub(crate) fn set_window_size(fd: RawFd, cols: u16, rows: u16) -> io::Result<()> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a `winsize` that lives for the duration of the call.
    if unsafe { libc::ioctl(fd, libc::TIOCSWINSZ as _, &size) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Registers an owned, non-blocking file (a pipe or PTY master) with the tokio reactor.
pub(crate) fn async_file(
    file: std::fs::File,
) -> io::Result<tokio::io::unix::AsyncFd<std::fs::File>> {
    // SAFETY: `AsyncFd` owns the `File`, which owns its descriptor; nothing else closes or
    // replaces that descriptor while it is registered (the I/O-safety condition of `register`).
    unsafe { tokio::io::unix::AsyncFd::register(file) }.map_err(io::Error::from)
}
