//! A warm spare's command plan: the go message clawsmith writes ([`go_message`]) and the
//! init's side of it — the [`PlanArea`] mapped before the fork, where the init reads the
//! message and builds the pointer arrays `execve(2)` takes without allocating ([`read_plan`]),
//! and the ends of the spare's pipes ([`SpareEnds`]).

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use super::{CommandView, ExecPlan, ExecPointers, PLAN_AREAS};

/// The most bytes a spare's command plan may have (program, working directory, arguments,
/// environment, `.git` pins; each NUL-terminated), after its 20-byte header.
pub(crate) const PLAN_BYTES: usize = 64 * 1024;

/// The most pointers a spare's command plan may need: its arguments and environment variables,
/// a NULL after each list, and its pins.
pub(crate) const PLAN_POINTERS: usize = 1024;

/// Memory mapped before a spare's fork, where its init reads the command's plan and builds the
/// pointer arrays `execve(2)` takes (it cannot allocate: the relay is a fork of a
/// multi-threaded process, or shares its memory). Private: the init writes a forked relay's
/// copy, or for a shared relay this mapping itself, which clawsmith never reads; kept for the
/// next spare when dropped ([`MappingPool`](super::MappingPool)).
#[derive(Debug)]
pub(crate) struct PlanArea {
    base: *mut u8,
}

// SAFETY: the mapping is owned by the value; clawsmith's threads never read or write it (only
// the spare's init does: its copy after a fork, or this mapping when it shares our memory).
unsafe impl Send for PlanArea {}
// SAFETY: as above.
unsafe impl Sync for PlanArea {}

impl PlanArea {
    const POINTERS_SIZE: usize = PLAN_POINTERS * std::mem::size_of::<*const libc::c_char>();
    pub(super) const SIZE: usize = Self::POINTERS_SIZE + PLAN_BYTES;

    pub(crate) fn new() -> io::Result<PlanArea> {
        if let Some(base) = PLAN_AREAS.take() {
            return Ok(PlanArea { base });
        }
        // SAFETY: an anonymous private mapping of our own, unmapped on drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(PlanArea { base: base.cast() })
    }
}

impl Drop for PlanArea {
    fn drop(&mut self) {
        // The mapping `new` made, of that size: dropped with the last owner of its setup, after
        // the spare's tree is gone (a shared relay's keeper holds one until then).
        PLAN_AREAS.give(self.base);
    }
}

/// The command's part of a spare's tree, as one message for its init: a `u32` length, then
/// `argc`, `envc`, the number of pinned and of read-only `.git` paths (`u32` each), then the
/// program, the working directory, the arguments, the environment, the pinned and the read-only
/// paths, each NUL-terminated. `None` when it does not fit [`PLAN_BYTES`] or [`PLAN_POINTERS`]
/// (the command then goes the ordinary way).
pub(crate) fn go_message(exec: &ExecPlan, view: &CommandView) -> Option<Vec<u8>> {
    let argc = exec.argv.len() - 1;
    let envc = exec.envp.len() - 1;
    let pointers = argc + 1 + envc + 1 + view.pinned.len() + view.read_only.len();
    if pointers > PLAN_POINTERS {
        return None;
    }
    let strings = [exec.program.as_c_str(), view.cwd.as_c_str()]
        .into_iter()
        .chain(exec._strings.iter().map(CString::as_c_str))
        .chain(view.pinned.iter().map(CString::as_c_str))
        .chain(view.read_only.iter().map(CString::as_c_str));
    let mut body = Vec::with_capacity(4096);
    for count in [argc, envc, view.pinned.len(), view.read_only.len()] {
        body.extend_from_slice(&u32::try_from(count).ok()?.to_ne_bytes());
    }
    for string in strings {
        body.extend_from_slice(string.to_bytes_with_nul());
    }
    if body.len() > PLAN_BYTES {
        return None;
    }
    let mut message = Vec::with_capacity(4 + body.len());
    message.extend_from_slice(&u32::try_from(body.len()).ok()?.to_ne_bytes());
    message.extend_from_slice(&body);
    Some(message)
}

/// The init's side of a warm spare (`spare.rs`): the init prepares everything that does not
/// depend on the command, then reads the command's plan from `go` into `area` and reports on
/// `result` (see `Tree::init`).
#[derive(Debug)]
pub(crate) struct SpareEnds {
    /// The read end of the pipe the plan arrives on.
    pub(crate) go: RawFd,
    /// The write end of the pipe the init and the command report on: a 4-byte zero once the
    /// command is about to start, an errno when setting up failed, [`EXECED_WORD`] once the
    /// command has `exec`ed, then the command's wait status when it has ended; end of file
    /// when the init is gone (killed before the command ended: a hard stop).
    pub(crate) result: RawFd,
    pub(crate) area: PlanArea,
    /// The write end of the **hold** pipe (close-on-exec) when the relay shares clawsmith's
    /// address space ([`spawn_shared`](super::spawn_shared)), else -1: the relay, the init and the parked command
    /// keep it, so its end of file says that none of them runs in that memory any more.
    pub(crate) hold: RawFd,
}

/// What a spare's init writes on the result pipe once the command has `exec`ed (not an errno,
/// which is positive, nor the zero of "starting").
pub(crate) const EXECED_WORD: i32 = -1;

/// A command's plan as the init parsed it from the spare's [`PlanArea`].
pub(super) struct ReadPlan {
    pub(super) exec: ExecPointers,
    pub(super) cwd: *const libc::c_char,
    /// `[pinned…, read_only…]` in the area's pointer array, and how many of each.
    pub(super) paths: *const *const libc::c_char,
    pub(super) pinned: usize,
    pub(super) read_only: usize,
}

/// Reads exactly `buffer.len()` bytes, retrying a failed read whatever `errno` says (the
/// processes of a tree share it; see [`Tree::await_command`](super::Tree::await_command)); `false` at end of file.
pub(super) fn read_whole(fd: RawFd, buffer: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: read(2) into the unfilled rest of a buffer we own.
        let read =
            unsafe { libc::read(fd, buffer[done..].as_mut_ptr().cast(), buffer.len() - done) };
        if read == 0 {
            return false;
        }
        if read > 0 {
            done += read as usize;
        }
    }
    true
}

/// Reads exactly `buffer.len()` bytes; `Ok(false)` at end of file.
fn read_exact(fd: RawFd, buffer: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buffer.len() {
        // SAFETY: read(2) into the unfilled rest of a buffer we own.
        let read =
            unsafe { libc::read(fd, buffer[done..].as_mut_ptr().cast(), buffer.len() - done) };
        if read == 0 {
            return Ok(false);
        }
        if read < 0 {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(error);
        }
        done += read as usize;
    }
    Ok(true)
}

/// Runs in a spare's init: reads the plan [`go_message`] wrote into `area` and builds its
/// pointer arrays there, allocating nothing. `Ok(None)` at end of file (the spare was
/// discarded); `E2BIG` for a plan over the area's capacity, `EINVAL` for a malformed one.
pub(super) fn read_plan(go: RawFd, area: &PlanArea) -> io::Result<Option<ReadPlan>> {
    let mut length = [0u8; 4];
    if !read_exact(go, &mut length)? {
        return Ok(None);
    }
    let length = u32::from_ne_bytes(length) as usize;
    if length > PLAN_BYTES {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    // SAFETY: the area's byte part, PLAN_BYTES long, written only here (this process's copy).
    let bytes = unsafe {
        std::slice::from_raw_parts_mut(area.base.add(PlanArea::POINTERS_SIZE), PLAN_BYTES)
    };
    let body = &mut bytes[..length];
    if !read_exact(go, body)? {
        return Ok(None);
    }
    let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
    if body.len() < 16 {
        return Err(invalid());
    }
    let mut counts = [0usize; 4];
    for (index, count) in counts.iter_mut().enumerate() {
        let mut word = [0u8; 4];
        word.copy_from_slice(&body[index * 4..index * 4 + 4]);
        *count = u32::from_ne_bytes(word) as usize;
    }
    let [argc, envc, pinned, read_only] = counts;
    let needed = argc
        .checked_add(envc)
        .and_then(|n| n.checked_add(pinned))
        .and_then(|n| n.checked_add(read_only))
        .and_then(|n| n.checked_add(2))
        .ok_or_else(invalid)?;
    if needed > PLAN_POINTERS {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    // SAFETY: the area's pointer part, PLAN_POINTERS long, written only here.
    let pointers = unsafe {
        std::slice::from_raw_parts_mut(area.base.cast::<*const libc::c_char>(), PLAN_POINTERS)
    };
    // program, cwd, then the strings of the four lists; each must end inside the body.
    let mut at = 16;
    let mut next = || -> io::Result<*const libc::c_char> {
        let rest = &body[at..];
        let end = rest
            .iter()
            .position(|byte| *byte == 0)
            .ok_or_else(invalid)?;
        let string = rest.as_ptr().cast::<libc::c_char>();
        at += end + 1;
        Ok(string)
    };
    let program = next()?;
    let cwd = next()?;
    let mut slot = 0;
    let argv = slot;
    for _ in 0..argc {
        pointers[slot] = next()?;
        slot += 1;
    }
    pointers[slot] = std::ptr::null();
    slot += 1;
    let envp = slot;
    for _ in 0..envc {
        pointers[slot] = next()?;
        slot += 1;
    }
    pointers[slot] = std::ptr::null();
    slot += 1;
    let paths = slot;
    for _ in 0..pinned + read_only {
        pointers[slot] = next()?;
        slot += 1;
    }
    let base = pointers.as_ptr();
    // SAFETY: offsets inside the pointer array filled above.
    Ok(Some(unsafe {
        ReadPlan {
            exec: ExecPointers {
                program,
                argv: base.add(argv),
                envp: base.add(envp),
            },
            cwd,
            paths: base.add(paths),
            pinned,
            read_only,
        }
    }))
}
