//! The mount and file system calls that build a command's view, for the builder of a base
//! view, the relay and the init: each over paths and buffers prepared before the fork, none
//! allocating.

use std::ffi::CStr;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

use super::{STALE_VIEW_ERRNO, check};

/// Binds each of `pinned` and `read_only` onto itself — a mount point can no longer be
/// renamed, removed or replaced — and takes write access from the `read_only` ones.
pub(super) fn bind_read_only<'a>(
    pinned: impl Iterator<Item = &'a CStr>,
    read_only: impl Iterator<Item = &'a CStr> + Clone,
) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    for path in pinned.chain(read_only.clone()) {
        mount(
            path.as_ptr(),
            path,
            none,
            libc::MS_BIND | libc::MS_REC,
            None,
        )?;
    }
    for path in read_only {
        mount_setattr(path, MOUNT_ATTR_RDONLY, 0)?;
    }
    Ok(())
}

/// `Ok` when `path` is the root of a mount (the cover is still there) or is gone (nothing left
/// to cover); [`STALE_VIEW_ERRNO`] when it is an ordinary file or directory again.
pub(super) fn still_covered(path: &CStr) -> io::Result<()> {
    // SAFETY: `statx` is plain data, valid zeroed.
    let mut stat: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx(2) of a NUL-terminated path into that local struct.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_STATX_DONT_SYNC,
            0,
            &mut stat,
        )
    };
    if rc != 0 {
        let error = io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR) => Ok(()),
            _ => Err(error),
        };
    }
    let mount_root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    if stat.stx_attributes_mask & mount_root != 0 && stat.stx_attributes & mount_root == 0 {
        return Err(io::Error::from_raw_os_error(STALE_VIEW_ERRNO));
    }
    Ok(())
}

/// `/proc/PID/ns/NAME`, opened in the parent.
pub(super) fn open_namespace(pid: libc::pid_t, name: &str) -> io::Result<OwnedFd> {
    let file = std::fs::File::open(format!("/proc/{pid}/ns/{name}"))?;
    Ok(OwnedFd::from(file))
}

pub(super) fn close_fds(fds: &[RawFd]) {
    for fd in fds {
        // SAFETY: closing descriptors this function's caller owns and no longer uses.
        unsafe {
            libc::close(*fd);
        }
    }
}

/// `Ok(true)` when the mount was made, `Ok(false)` when its target no longer exists.
pub(super) fn unless_vanished(result: io::Result<()>) -> io::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(error) if matches!(error.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            Ok(false)
        }
        Err(error) => Err(error),
    }
}

pub(super) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(super) const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets (and clears) mount attributes on the mount at `path` and every mount below it.
pub(super) fn mount_setattr(path: &CStr, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr(2) reads `attr` (of the size passed) during the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(rc).map(drop)
}

pub(super) fn mount(
    source: *const libc::c_char,
    target: &CStr,
    fstype: *const libc::c_char,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let data = data.map_or(std::ptr::null(), |d| d.as_ptr().cast());
    // SAFETY: mount(2) over NUL-terminated strings that outlive the call.
    check(unsafe { libc::mount(source, target.as_ptr(), fstype, flags, data) }).map(drop)
}

/// `MOVE_MOUNT_F_EMPTY_PATH` of move_mount(2) (not in libc for every target).
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// A detached copy of the mount tree at `path` and everything mounted beneath it — what a
/// recursive bind of `path` attaches (open_tree(2) with `OPEN_TREE_CLONE | AT_RECURSIVE`; the
/// last component is not followed if it is a symlink).
pub(super) fn clone_tree(path: &CStr) -> io::Result<RawFd> {
    let flags = libc::OPEN_TREE_CLONE
        | libc::OPEN_TREE_CLOEXEC
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_SYMLINK_NOFOLLOW as libc::c_uint;
    // SAFETY: open_tree(2) of a prepared path; the descriptor is closed by the caller.
    let fd =
        check(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })?;
    Ok(fd as RawFd)
}

/// Attaches the detached tree of [`clone_tree`] at `target` (move_mount(2)).
pub(super) fn attach_tree(tree: RawFd, target: &CStr) -> io::Result<()> {
    // SAFETY: move_mount(2) of a descriptor this process holds onto a prepared path.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

pub(super) fn open_path(path: &CStr) -> io::Result<RawFd> {
    // SAFETY: open(2) of a prepared path; the descriptor is closed by the caller.
    check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    })
}

pub(super) fn open_file(path: &CStr) -> io::Result<RawFd> {
    // SAFETY: open(2) of a prepared path; the descriptor is closed by the caller.
    check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    })
}

pub(super) fn file_identity(fd: RawFd) -> io::Result<(u64, u64)> {
    // SAFETY: `stat` is plain data, valid zeroed.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat(2) into that local struct.
    check(unsafe { libc::fstat(fd, &mut stat) })?;
    Ok((stat.st_dev, stat.st_ino))
}

pub(super) fn create_file(path: &CStr) -> io::Result<()> {
    // SAFETY: open(2)/close(2) of a prepared path.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
            0o666,
        )
    })?;
    // SAFETY: close(2) of the descriptor opened above, used by nothing else.
    unsafe {
        libc::close(fd);
    }
    Ok(())
}

pub(super) fn make_dir(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: mkdir(2) of a prepared path.
    if unsafe { libc::mkdir(path.as_ptr(), mode) } != 0 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EEXIST) {
            return Err(error);
        }
    }
    Ok(())
}

/// `/proc/self/fd/N` without allocating.
pub(super) struct FdPath([u8; 32]);

impl FdPath {
    pub(super) fn new(fd: RawFd) -> FdPath {
        let mut buffer = [0u8; 32];
        let prefix = b"/proc/self/fd/";
        buffer[..prefix.len()].copy_from_slice(prefix);
        let mut digits = [0u8; 12];
        let mut count = 0;
        let mut value = fd.max(0) as u32;
        loop {
            digits[count] = b'0' + (value % 10) as u8;
            count += 1;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        for index in 0..count {
            buffer[prefix.len() + index] = digits[count - 1 - index];
        }
        FdPath(buffer)
    }

    pub(super) fn as_ptr(&mut self) -> *const libc::c_char {
        self.0.as_ptr().cast()
    }
}
