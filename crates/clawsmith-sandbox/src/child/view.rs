//! A command's view: the [`BaseView`] every command of a configuration shares, assembled once
//! by a builder process and held by its namespaces ([`BaseNamespaces`]), and the
//! [`CommandView`] each command's init adds on top of it.

use std::ffi::CString;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

use super::mounts::{
    FdPath, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, attach_tree, bind_read_only,
    clone_tree, close_fds, create_file, file_identity, make_dir, mount, mount_setattr, open_file,
    open_namespace, open_path, unless_vanished,
};
use super::{WORKSPACE_REPLACED_ERRNO, check, close_all_but, exits, loopback_up, pipe, write_proc};
use crate::egress::{Egress, EgressService, EgressState};

/// The part of a command's view that is the same for every command of a configuration: the
/// host read-only, the minimal `/dev`, the workspace and extra roots read-write, protected
/// paths read-only, secrets covered. Assembled once by a builder process in new user and mount
/// namespaces ([`BaseView::create`]); every target is prefixed with `staging`, where the new
/// root is assembled before `pivot_root`. Two equal descriptions make the same view, which is
/// how a prepared one is reused (the identities of the covered and bound paths are part of it,
/// so a secret deleted and made anew is covered again).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BaseView {
    /// Where the new root is assembled (an existing directory of the host, e.g. `/tmp`).
    pub(crate) staging: CString,
    /// The contents of `/proc/self/uid_map` and `gid_map`: the caller mapped to itself.
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// Whether the base has a network namespace of its own (loopback only: the network is
    /// off), which its commands enter.
    pub(crate) network_namespace: bool,
    /// The allowlist whose exits the builder opens in that namespace, with the ports of its
    /// transparent listeners (`crate::egress`); `None`: loopback only.
    pub(crate) egress: Option<(Egress, Vec<u16>)>,
    /// `(a file made in the new /dev, the view's /etc/resolv.conf)`: the view's resolver
    /// configuration replaced by one naming the DNS stub. `None` unless the network is an
    /// allowlist and the host's file is a plain file (a symlink's target may be out of sight).
    pub(crate) resolv_conf: Option<(CString, CString)>,
    /// The workspace in the host's view (opened by the builder, checked against `identity`).
    pub(crate) workspace: CString,
    /// `(st_dev, st_ino)` the workspace root must have.
    pub(crate) identity: (u64, u64),
    /// Where the workspace and the extra writable roots are bound read-write:
    /// `(source in the host view, target)`. The first is the workspace.
    pub(crate) writable: Vec<(CString, CString)>,
    /// Directories to create (in order) so that the targets exist inside private tmpfs mounts.
    pub(crate) mkdirs: Vec<CString>,
    /// Host folders shown empty (a tmpfs, read-only once the roots inside are bound): the home
    /// directory, the runtime folders, hidden folders that hold a writable root. Parents first.
    pub(crate) empty_dirs: Vec<CString>,
    /// Directories made inside the empty folders for what is bound back (parents first).
    pub(crate) empty_mkdirs: Vec<CString>,
    /// `(host source, target, whether a directory)` bound back read-only into the empty
    /// folders (at most [`ALLOWED_MAX`]).
    pub(crate) allowed: Vec<(CString, CString, bool)>,
    /// `staging/tmp` (covered again per command; here it only holds the roots that live
    /// under `/tmp`).
    pub(crate) tmp: CString,
    /// `staging/dev` and its tmpfs options.
    pub(crate) dev: (CString, CString),
    /// Device files bound from the host: `(source, target)`.
    pub(crate) devices: Vec<(CString, CString)>,
    /// `staging/dev/shm` and `staging/dev/pts`: mount points for each command's own.
    pub(crate) shm: CString,
    pub(crate) pts: CString,
    /// Symlinks in the new `/dev`: `(target of the link, link path)`.
    pub(crate) dev_links: Vec<(CString, CString)>,
    /// Paths bound read-only onto themselves (protected paths inside writable roots, or the
    /// whole workspace when it is read-only).
    pub(crate) read_only: Vec<CString>,
    /// Directories covered by an empty read-only tmpfs (secrets, the state dir).
    pub(crate) hidden_dirs: Vec<CString>,
    /// Files (and unix sockets) covered by `/dev/null`.
    pub(crate) hidden_files: Vec<CString>,
    /// `(st_dev, st_ino)` of every bound, protected and covered path, in order: the base is
    /// only reused while the host still has the same objects at those paths.
    pub(crate) identities: Vec<(u64, u64)>,
}

/// How many host paths a base view binds back into its empty folders, at most (their
/// descriptors are opened before the host is bound, in a fixed array: the builder is a fork of
/// a threaded process and does not allocate).
pub(crate) const ALLOWED_MAX: usize = 48;

/// The user and mount namespaces of a built [`BaseView`], held open by descriptor (no process
/// lives in them between commands).
#[derive(Debug)]
pub(crate) struct BaseNamespaces {
    pub(crate) view: BaseView,
    pub(super) user: OwnedFd,
    pub(super) mount: OwnedFd,
    pub(super) network: Option<OwnedFd>,
    pub(crate) created: std::time::Instant,
    /// The gateway serving the allowlist's exits, held for as long as the namespaces live, or
    /// why there is none.
    pub(crate) egress: Option<EgressState>,
}

/// What a command gets of its own on top of the base, as paths in the final view.
#[derive(Debug)]
pub(crate) struct CommandView {
    /// tmpfs options of the command's private `/tmp`.
    pub(crate) tmp_options: CString,
    /// Writable roots that live under `/tmp` (the private tmpfs would hide them): bound back
    /// from the base, parents first, after `tmp_mkdirs`.
    pub(crate) tmp_roots: Vec<CString>,
    pub(crate) tmp_mkdirs: Vec<CString>,
    /// tmpfs options of `/dev/shm`.
    pub(crate) shm_options: CString,
    /// What goes on `/dev/pts`.
    pub(crate) pts: Pts,
    /// Paths made non-renamable by binding them onto themselves (the workspace's `.git`).
    pub(crate) pinned: Vec<CString>,
    /// Paths bound read-only onto themselves (the `.git` code paths).
    pub(crate) read_only: Vec<CString>,
    /// The working directory, in the final view.
    pub(crate) cwd: CString,
}

/// What the built `/dev/pts` holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pts {
    /// A new devpts instance (with these options): the command can open PTYs of its own.
    NewInstance(CString),
    /// A PTY command: its own slave, bound from the host at its host name (`(source in the
    /// host's view, target in the final view)`), so `tty` and `ttyname` work; no other
    /// terminal is reachable.
    OwnSlave(CString, CString),
}

impl BaseView {
    /// The paths this base covers or binds read-only, as the command sees them (without the
    /// staging prefix).
    pub(crate) fn covered(&self) -> io::Result<Vec<CString>> {
        let prefix = self.staging.as_bytes().len();
        self.hidden_dirs
            .iter()
            .chain(&self.hidden_files)
            .chain(&self.read_only)
            .map(|staged| CString::new(&staged.as_bytes()[prefix..]).map_err(io::Error::other))
            .collect()
    }

    /// Forks a builder that enters new user and mount namespaces, assembles the view and
    /// pivots into it; the namespaces outlive the builder through the returned descriptors.
    /// Runs in clawsmith (the parent); the builder only makes system calls over this prepared
    /// description, as the other children do.
    pub(crate) fn create(self) -> io::Result<BaseNamespaces> {
        let (ready_read, ready_write) = pipe()?;
        let (go_read, go_write) = match pipe() {
            Ok(pair) => pair,
            Err(error) => {
                close_fds(&[ready_read, ready_write]);
                return Err(error);
            }
        };
        let exits = match self.egress.is_some().then(exits::socket_pair).transpose() {
            Ok(exits) => exits,
            Err(error) => {
                close_fds(&[ready_read, ready_write, go_read, go_write]);
                return Err(error);
            }
        };
        let (exits_ours, exits_theirs) = exits.unwrap_or((-1, -1));
        // SAFETY: fork(2); the child makes only async-signal-safe system calls over data
        // prepared before the fork and ends with `_exit`.
        let builder = unsafe { libc::fork() };
        if builder < 0 {
            let error = io::Error::last_os_error();
            close_fds(&[
                ready_read,
                ready_write,
                go_read,
                go_write,
                exits_ours,
                exits_theirs,
            ]);
            return Err(error);
        }
        if builder == 0 {
            // Nothing of the parent's stays open here (a command's output pipe would not see
            // its end while the builder lives).
            close_all_but(&[ready_write, go_read, exits_theirs]);
            let code: i32 = match self.build_in_namespaces(exits_theirs) {
                Ok(()) => 0,
                Err(error) => error.raw_os_error().unwrap_or(libc::EIO),
            };
            // SAFETY: write/read/_exit over owned descriptors and a stack buffer.
            unsafe {
                libc::write(ready_write, (&code as *const i32).cast(), 4);
                if code == 0 {
                    // Stay until the parent holds the namespaces (or is gone: a hang-up).
                    let mut byte = 0u8;
                    while libc::read(go_read, (&mut byte as *mut u8).cast(), 1) < 0
                        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                    {
                    }
                }
                libc::_exit(0);
            }
        }
        close_fds(&[ready_write, go_read, exits_theirs]);
        let mut code = [0u8; 4];
        let read = loop {
            // SAFETY: read(2) into a stack buffer.
            let read = unsafe { libc::read(ready_read, code.as_mut_ptr().cast(), 4) };
            if read >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break read;
            }
        };
        let namespaces = match (read, i32::from_ne_bytes(code)) {
            (4, 0) => open_namespace(builder, "user").and_then(|user| {
                let mount = open_namespace(builder, "mnt")?;
                let network = self
                    .network_namespace
                    .then(|| open_namespace(builder, "net"))
                    .transpose()?;
                Ok((user, mount, network))
            }),
            (4, errno) => Err(io::Error::from_raw_os_error(errno)),
            _ => Err(io::Error::other(
                "the view builder ended before it was ready",
            )),
        };
        // The exits were sent before the builder said it was ready.
        let egress = match (&namespaces, &self.egress) {
            (Ok(_), Some((egress, _))) => {
                let started = exits::receive(exits_ours)
                    .map_err(|error| {
                        io::Error::new(
                            error.kind(),
                            format!(
                                "the view builder could not open the namespace's exits: {error}"
                            ),
                        )
                    })
                    .and_then(|exits| EgressService::start(egress, exits));
                Some(match started {
                    Ok(service) => EgressState::Serving(service),
                    Err(error) => {
                        // Fails closed: the namespace keeps its loopback only.
                        tracing::warn!(%error, "the network allowlist's gateway did not start; commands have no network");
                        EgressState::Failed(error.to_string())
                    }
                })
            }
            _ => None,
        };
        close_fds(&[go_write, ready_read, exits_ours]);
        let mut status = 0;
        // SAFETY: waitpid(2) of our own child.
        while unsafe { libc::waitpid(builder, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        let (user, mount, network) = namespaces?;
        Ok(BaseNamespaces {
            view: self,
            user,
            mount,
            network,
            created: std::time::Instant::now(),
            egress,
        })
    }

    /// Runs in the builder: new user and mount (and network) namespaces, the caller mapped to
    /// itself, the loopback up, then the view.
    fn build_in_namespaces(&self, exits_pair: RawFd) -> io::Result<()> {
        let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
        if self.network_namespace {
            flags |= libc::CLONE_NEWNET;
        }
        // SAFETY: unshare(2) with prepared flags.
        check(unsafe { libc::unshare(flags) })?;
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &self.uid_map)?;
        write_proc(c"/proc/self/gid_map", &self.gid_map)?;
        if self.network_namespace {
            loopback_up()?;
            if let Some((_, ports)) = &self.egress {
                exits::open_and_send(ports, exits_pair);
            }
        }
        self.build()
    }

    /// Assembles the new root under `staging` and pivots into it.
    fn build(&self) -> io::Result<()> {
        let none = std::ptr::null::<libc::c_char>();
        // Nothing we mount propagates back to the host.
        mount(none, c"/", none, libc::MS_REC | libc::MS_PRIVATE, None)?;
        // The workspace by the path, checked against the descriptor the session holds: a root
        // swapped for a symlink (or anything else) since then is refused, not followed.
        let workspace = open_path(&self.workspace)?;
        let identity = file_identity(workspace)?;
        if identity != self.identity {
            return Err(io::Error::from_raw_os_error(WORKSPACE_REPLACED_ERRNO));
        }
        let mut sources: [RawFd; 16] = [-1; 16];
        sources[0] = workspace;
        for (index, (source, _)) in self.writable.iter().enumerate().skip(1).take(15) {
            sources[index] = open_path(source)?;
        }
        // What goes back into the empty folders, opened while the host's paths still lead
        // there (a source under the staging directory is covered once the host is bound).
        let mut allowed: [RawFd; ALLOWED_MAX] = [-1; ALLOWED_MAX];
        for (index, (source, _, is_dir)) in self.allowed.iter().enumerate().take(ALLOWED_MAX) {
            allowed[index] = if *is_dir {
                open_path(source)?
            } else {
                open_file(source)?
            };
        }

        // The whole host, read-only, no setuid, no devices.
        mount(
            c"/".as_ptr(),
            &self.staging,
            none,
            libc::MS_BIND | libc::MS_REC,
            None,
        )?;
        mount_setattr(
            &self.staging,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            0,
        )?;
        // The home directory and the runtime folders empty, with the allowlisted entries
        // bound back read-only.
        let tmpfs = c"tmpfs".as_ptr();
        for dir in &self.empty_dirs {
            mount(
                tmpfs,
                dir,
                tmpfs,
                libc::MS_NOSUID | libc::MS_NODEV,
                Some(c"size=64k,mode=0755"),
            )?;
        }
        for dir in &self.empty_mkdirs {
            make_dir(dir, 0o755)?;
        }
        for (index, (_, target, is_dir)) in self.allowed.iter().enumerate().take(ALLOWED_MAX) {
            if *is_dir {
                make_dir(target, 0o755)?;
            } else {
                create_file(target)?;
            }
            let mut link = FdPath::new(allowed[index]);
            mount(
                link.as_ptr(),
                target,
                none,
                libc::MS_BIND | libc::MS_REC,
                None,
            )?;
            mount_setattr(
                target,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                0,
            )?;
            // SAFETY: closing a descriptor this process opened.
            unsafe {
                libc::close(allowed[index]);
            }
        }
        // The host's /tmp out of sight (each command mounts its own on top), a minimal /dev.
        mount(
            tmpfs,
            &self.tmp,
            tmpfs,
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(c"size=64k,mode=0755"),
        )?;
        mount(
            tmpfs,
            &self.dev.0,
            tmpfs,
            libc::MS_NOSUID,
            Some(&self.dev.1),
        )?;
        for (source, target) in &self.devices {
            create_file(target)?;
            mount(source.as_ptr(), target, none, libc::MS_BIND, None)?;
        }
        make_dir(&self.shm, 0o1777)?;
        make_dir(&self.pts, 0o755)?;
        for (target, link) in &self.dev_links {
            // SAFETY: symlink(2) over two prepared C strings.
            check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })?;
        }
        if let Some((file, _)) = &self.resolv_conf {
            write_small_file(file, b"nameserver 127.0.0.1\noptions ndots:0\n")?;
        }
        // No new files in /dev: the tmpfs itself becomes read-only (its submounts keep theirs).
        mount(
            none,
            &self.dev.0,
            none,
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID,
            None,
        )?;

        // The workspace and the extra roots, read-write, by descriptor.
        for dir in &self.mkdirs {
            // Most exist already (read-only); the ones under the private /tmp do not.
            // SAFETY: mkdir(2) on a prepared path; failures show up at the mount below.
            unsafe {
                libc::mkdir(dir.as_ptr(), 0o755);
            }
        }
        for (index, (_, target)) in self.writable.iter().enumerate().take(16) {
            let mut link = FdPath::new(sources[index]);
            mount(
                link.as_ptr(),
                target,
                none,
                libc::MS_BIND | libc::MS_REC,
                None,
            )?;
            mount_setattr(target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0)?;
            // SAFETY: closing a descriptor this process opened.
            unsafe {
                libc::close(sources[index]);
            }
        }
        // Nothing new in the empty folders (the roots bound inside keep their own rights).
        for dir in &self.empty_dirs {
            mount(
                none,
                dir,
                none,
                libc::MS_REMOUNT
                    | libc::MS_BIND
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV,
                None,
            )?;
        }
        bind_read_only(
            std::iter::empty(),
            self.read_only.iter().map(CString::as_c_str),
        )?;
        // A path that vanished since the parent looked (a host socket closed, a file removed)
        // has nothing left to hide: skipped, not an error.
        for path in &self.hidden_dirs {
            unless_vanished(mount(
                tmpfs,
                path,
                tmpfs,
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                Some(c"size=4k,mode=0755"),
            ))?;
        }
        for path in &self.hidden_files {
            if unless_vanished(mount(
                c"/dev/null".as_ptr(),
                path,
                none,
                libc::MS_BIND,
                None,
            ))? {
                mount(
                    none,
                    path,
                    none,
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                    None,
                )?;
            }
        }

        if let Some((file, target)) = &self.resolv_conf {
            // Attached without following `target`: where the host's resolv.conf is a symlink
            // (into a runtime folder the view shows empty), the file is mounted on the link
            // itself, and every path through the link reaches it.
            let tree = clone_tree(file)?;
            let attached = attach_tree(tree, target);
            close_fds(&[tree]);
            attached?;
            mount(
                none,
                target,
                none,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                None,
            )?;
        }

        // SAFETY: chdir(2) of a NUL-terminated path the view owns.
        check(unsafe { libc::chdir(self.staging.as_ptr()) })?;
        // SAFETY: pivot_root(2) of two static NUL-terminated strings.
        check(unsafe { libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) })?;
        // SAFETY: umount2(2) of a static NUL-terminated string.
        check(unsafe { libc::umount2(c".".as_ptr(), libc::MNT_DETACH) })?;
        // SAFETY: chdir(2) of a static NUL-terminated string.
        check(unsafe { libc::chdir(c"/".as_ptr()) })?;
        Ok(())
    }
}

impl CommandView {
    /// Runs in the init, in its own copy of the base's mounts (and so already in the final
    /// view): a `/proc` of the new PID namespace, a private `/tmp` (with the roots that live
    /// under it bound back), `/dev/shm` and `/dev/pts` (the `.git` pins come after, from this
    /// view or a spare's go message). `slave` is the PTY slave the relay opened (or -1).
    pub(super) fn enter(&self, slave: RawFd) -> io::Result<()> {
        let none = std::ptr::null::<libc::c_char>();
        let proc = c"proc".as_ptr();
        mount(
            proc,
            c"/proc",
            proc,
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        )?;
        // Copies of the roots' mount trees, taken while the base's /tmp still shows them and
        // attached after the private one covers it: a bind from `/proc/self/fd/N` walked the
        // just-mounted /proc, whose every entry is a slow lookup on a new superblock (~2% of
        // the command tree's samples for a workspace under /tmp).
        let mut trees: [RawFd; 16] = [-1; 16];
        for (index, root) in self.tmp_roots.iter().enumerate().take(16) {
            trees[index] = clone_tree(root)?;
        }
        let tmpfs = c"tmpfs".as_ptr();
        mount(
            tmpfs,
            c"/tmp",
            tmpfs,
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&self.tmp_options),
        )?;
        for dir in &self.tmp_mkdirs {
            // SAFETY: mkdir(2) on a prepared path; failures show up at the mount below.
            unsafe {
                libc::mkdir(dir.as_ptr(), 0o755);
            }
        }
        for (index, root) in self.tmp_roots.iter().enumerate().take(16) {
            attach_tree(trees[index], root)?;
            // SAFETY: closing a descriptor this process opened.
            unsafe {
                libc::close(trees[index]);
            }
        }
        mount(
            tmpfs,
            c"/dev/shm",
            tmpfs,
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&self.shm_options),
        )?;
        match &self.pts {
            Pts::NewInstance(options) => {
                let devpts = c"devpts".as_ptr();
                mount(
                    devpts,
                    c"/dev/pts",
                    devpts,
                    libc::MS_NOSUID | libc::MS_NOEXEC,
                    Some(options),
                )?;
            }
            Pts::OwnSlave(_, target) => {
                mount(
                    tmpfs,
                    c"/dev/pts",
                    tmpfs,
                    libc::MS_NOSUID | libc::MS_NOEXEC,
                    Some(c"size=4k,mode=0755"),
                )?;
                create_file(target)?;
                let mut link = FdPath::new(slave);
                mount(link.as_ptr(), target, none, libc::MS_BIND, None)?;
                // SAFETY: closing a descriptor the relay opened.
                unsafe {
                    libc::close(slave);
                }
            }
        }
        Ok(())
    }
}

/// Creates `path` (0644) holding `contents`: system calls over prepared data only.
fn write_small_file(path: &CString, contents: &[u8]) -> io::Result<()> {
    // SAFETY: open(2) of a NUL-terminated path with constant flags.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644,
        )
    })?;
    // SAFETY: write(2) of a borrowed slice to the descriptor just opened, then close(2).
    let written = unsafe {
        let written = libc::write(fd, contents.as_ptr().cast(), contents.len());
        libc::close(fd);
        written
    };
    if written != contents.len() as isize {
        return Err(io::Error::other("short write"));
    }
    Ok(())
}
