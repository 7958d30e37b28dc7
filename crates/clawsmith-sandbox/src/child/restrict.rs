//! What the command process applies to itself before it `exec`s: every capability dropped,
//! `no_new_privs`, the Landlock ruleset (with the rules of the private `/tmp` and `/dev`, which
//! exist only in its view), the seccomp programs, and close-on-exec above descriptor 2. All of
//! it is prepared in the parent ([`ChildSetup`]); this only makes the system calls.

use std::io;
use std::os::fd::AsRawFd;

use super::{ChildSetup, Landlock, check};

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

impl ChildSetup {
    /// `no_new_privs`, Landlock, seccomp, and close-on-exec for every descriptor above 2.
    pub(super) fn restrict(&self) -> io::Result<()> {
        if self.no_new_privs {
            // SAFETY: prctl(2) with integer arguments only.
            check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        }
        if let Some(Landlock { ruleset, .. }) = &self.landlock {
            for dir in &self.landlock_private_dirs {
                // SAFETY: open(2) of a NUL-terminated path the setup owns.
                let fd = check(unsafe {
                    libc::open(
                        dir.as_ptr(),
                        libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                })?;
                let rule = PathBeneath {
                    allowed_access: self.landlock_fs_access,
                    parent_fd: fd,
                };
                // SAFETY: landlock_add_rule(2) reads the local `PathBeneath`, the kernel's
                // `struct landlock_path_beneath_attr` (`#[repr(C, packed)]`); the ruleset
                // descriptor is the setup's.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_landlock_add_rule,
                        ruleset.as_raw_fd(),
                        LANDLOCK_RULE_PATH_BENEATH,
                        &rule as *const PathBeneath,
                        0u32,
                    )
                };
                // SAFETY: close(2) of the descriptor opened above, used by nothing else.
                unsafe {
                    libc::close(fd);
                }
                check(rc)?;
            }
            // SAFETY: landlock_restrict_self(2) with the setup's ruleset descriptor and no
            // pointer.
            let rc = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            check(rc)?;
        }
        for program in &self.seccomp {
            // `apply_filter` sets no_new_privs and calls seccomp(2); it allocates nothing.
            if seccompiler::apply_filter(program).is_err() {
                return Err(io::Error::last_os_error());
            }
        }
        if self.namespaces.is_some() {
            // Nothing the caller left inheritable reaches the command (std's own error pipe is
            // already close-on-exec, so marking is enough and keeps it working).
            // SAFETY: close_range(2) with integer arguments; it only sets close-on-exec flags.
            check(unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    3u32,
                    u32::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                ) as libc::c_int
            })?;
        }
        Ok(())
    }
}

/// Drops every capability: bounding set, ambient set, and the effective, permitted and
/// inheritable sets. A uid-0 command then holds none even across `exec`.
pub(super) fn drop_capabilities() -> io::Result<()> {
    for capability in 0..=63 {
        // SAFETY: prctl(2) with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
        if rc != 0 {
            // EINVAL is the first number past the kernel's last capability (`cap_valid`), and
            // every higher one is past it too: ~23 calls a command fewer on Linux 6.x.
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: prctl(2) with integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset(2) reads a header and two data structs of the kernel's
    // `_LINUX_CAPABILITY_VERSION_3` layout (`#[repr(C)]`), local to this frame.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) })
        .map(drop)
}
