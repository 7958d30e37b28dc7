//! The code that runs in the child between `fork` and `exec`, and the few raw system calls the
//! crate needs (kernel probes, PTY window size).
//!
//! This is the only module of clawsmith that allows `unsafe`. After `fork` in a multi-threaded
//! parent only async-signal-safe work is allowed: everything that allocates (building the
//! Landlock ruleset, compiling the seccomp BPF program, formatting user-namespace maps, turning
//! paths into C strings, clamping rlimits) happens in the parent, before `fork`, and the child
//! only issues system calls over data prepared for it: `setsid`, `ioctl(TIOCSCTTY)`,
//! `setrlimit`, `unshare`, `open`/`write`/`close` of `/proc/self/*_map`, `mount`,
//! `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`, and `seccomp(SET_MODE_FILTER)`. The
//! parent-side calls here are the kernel probes, `TIOCSWINSZ`, and registering a PTY master or
//! pipe with the tokio reactor.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::sys::resource::{Resource, setrlimit};

/// Everything the child applies to itself, prepared by the parent.
#[derive(Debug, Default)]
pub(crate) struct ChildSetup {
    /// Make the PTY on fd 0 the controlling terminal of the new session.
    pub(crate) controlling_tty: bool,
    /// `(resource, value)` pairs, already clamped to the inherited hard limits.
    pub(crate) rlimits: Vec<(Resource, u64)>,
    /// Read-only bind mounts in a private mount namespace.
    pub(crate) mounts: Option<MountPlan>,
    /// Set `no_new_privs` (always, unless the policy is off).
    pub(crate) no_new_privs: bool,
    /// A created Landlock ruleset to restrict the child with.
    pub(crate) landlock: Option<OwnedFd>,
    /// A compiled seccomp filter.
    pub(crate) seccomp: Option<seccompiler::BpfProgram>,
}

/// A private mount namespace with read-only binds.
#[derive(Debug)]
pub(crate) struct MountPlan {
    /// For an unprivileged user: a user namespace mapping the user to itself.
    pub(crate) user_namespace: Option<UserMaps>,
    /// Paths to bind read-only onto themselves, with the mount flags they must keep.
    pub(crate) read_only_binds: Vec<(CString, libc::c_ulong)>,
}

/// The contents of `/proc/self/{setgroups,uid_map,gid_map}`.
#[derive(Debug)]
pub(crate) struct UserMaps {
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
}

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

    fn apply(&self) -> io::Result<()> {
        // SAFETY (whole function): each call is a plain system call on prepared, owned data.
        if unsafe { libc::setsid() } == -1 {
            return Err(io::Error::last_os_error());
        }
        if self.controlling_tty && unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) } == -1 {
            return Err(io::Error::last_os_error());
        }
        for (resource, value) in &self.rlimits {
            setrlimit(*resource, *value, *value)
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
        }
        if let Some(mounts) = &self.mounts {
            mounts.apply()?;
        }
        if self.no_new_privs && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(ruleset) = &self.landlock {
            let rc = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(program) = &self.seccomp {
            // `apply_filter` sets no_new_privs and calls seccomp(2); it allocates nothing.
            if seccompiler::apply_filter(program).is_err() {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl MountPlan {
    fn apply(&self) -> io::Result<()> {
        // SAFETY (whole function): system calls over C strings and buffers owned by `self`.
        let mut flags = libc::CLONE_NEWNS;
        if self.user_namespace.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }
        if unsafe { libc::unshare(flags) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(maps) = &self.user_namespace {
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", &maps.uid_map)?;
            write_proc(c"/proc/self/gid_map", &maps.gid_map)?;
        }
        let none = std::ptr::null::<libc::c_char>();
        let rc = unsafe {
            libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        for (path, keep) in &self.read_only_binds {
            let rc = unsafe {
                libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            let rc = unsafe {
                libc::mount(
                    none,
                    path.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | keep,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
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
