//! The platform sandbox (C3): turns a [`SandboxConfig`] and what the kernel offers into the
//! child's setup and a report of what is enforced.
//!
//! The command's world is **built, not filtered** (the way bubblewrap builds one):
//! - **Namespaces**: new user (the caller's uid and gid mapped to themselves: root inside holds
//!   no capability outside), mount, PID (init is clawsmith's, so the tree dies with the call),
//!   IPC, UTS, cgroup and — unless the network is allowed — network namespaces (only a loopback).
//! - **The view**: the host's `/` bound read-only, `nosuid`, `nodev` (so `chmod`, `chown`,
//!   `touch` and `chattr` outside fail with `EROFS`); the workspace (by the descriptor the session
//!   holds, checked by device and inode) and the extra roots read-write; a private tmpfs `/tmp`
//!   and `/dev/shm` (size-limited); a minimal `/dev` (null, zero, full, random, urandom, tty and
//!   a new devpts instance); a fresh `/proc` of the PID namespace. The view is built from
//!   allowlists: the home directory and the runtime folders (`/run`, `/var/tmp`,
//!   `$XDG_RUNTIME_DIR`, …) are empty tmpfs mounts with only the allowlisted home entries (and
//!   the resolver's file) bound back read-only; the state dir, credential files inside the
//!   allowlisted entries, configured hidden paths, host files only clawsmith's root may read
//!   (by mode; folders the command could not enter are not scanned; a scan cut by its budget
//!   covers the folders it did not finish) and every
//!   pathname unix socket the host has bound (`/proc/net/unix`) are covered. The workspace's `.git` is bound onto itself (it cannot be renamed or replaced)
//!   and its hooks, config and the other code-execution points read-only.
//! - **Second walls**: all capabilities dropped, `no_new_privs`, Landlock (reads on `/`, writes
//!   only beneath the writable roots, the private `/tmp` and `/dev`, no device ioctls outside
//!   `/dev`; from ABI 9, connections to pathname unix sockets only beneath them too), seccomp (no `TIOCSTI`/`TIOCLINUX`, no device `mknod`, no keyring, no mount API, no
//!   new namespaces, no `io_uring`), descriptors above 2 closed on exec, a per-namespace
//!   `pid_max` (binds root too), rlimits with the address space capped by the machine's memory.
//!
//! Where user namespaces are unavailable, `Required` refuses and names what is missing;
//! `BestEffort` falls back to Landlock and seccomp in the host's view and reports exactly that.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};
use nix::sys::resource::Resource;
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use crate::child::{
    self, BaseNamespaces, BaseView, ChildSetup, CommandView, Landlock, LandlockRules, Namespaces,
    Pts,
};
use crate::config::{KernelSupport, ResourceLimits, SandboxConfig, SandboxPolicy};

/// The Landlock ABI whose rights clawsmith asks for; older kernels get the subset they know.
/// From ABI 9 (Linux 7.1) that includes connecting to pathname unix sockets: only those beneath
/// the writable roots, the private `/tmp` and `/dev` can be reached, so a host socket bound
/// after the view was built is refused by the kernel, wherever it lies.
const TARGET_ABI: ABI = ABI::V9;

/// Device files every command may write when it runs in the host's view (the fallback).
const HOST_VIEW_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Device files bound into the built `/dev`.
const VIEW_DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Credential files that stay covered inside home entries the view binds back
/// ([`SandboxConfig::home_allow`]): a user who allows `.config` or `.cargo` still does not hand
/// commands `gh`'s token or cargo's registry credentials. Everything else under `$HOME` that is
/// not allowlisted is out of sight whatever its name.
pub const HIDDEN_HOME_PATHS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/git/credentials",
    ".config/containers/auth.json",
    ".config/clawsmith",
    ".claude/.credentials.json",
    ".kube",
    ".docker",
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    ".local/state/clawsmith",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
];

/// Host folders of runtime state — daemons' sockets, other sessions' files — shown empty in the
/// built view (a socket bound there later cannot appear either), with only what commands need
/// bound back (the resolver's configuration when `/etc/resolv.conf` leads there).
/// `$XDG_RUNTIME_DIR` joins them ([`SandboxConfig::runtime_dirs`]). `/tmp`, `/dev/shm` and `/dev/pts` are private per command.
pub const RUNTIME_DIRS: &[&str] = &["/run", "/var/run", "/var/lock", "/var/tmp"];

/// Where the view looks, when clawsmith runs as root, for host files and folders that only
/// root may read (decided by their mode): a root command, holding no capability, would still
/// read them as their owner. The home directory and the runtime folders are covered whole, and
/// so is root's own home ([`ROOT_HOME`]) when `$HOME` names another. The folders commands read
/// (configuration, locally installed tools) come first, the data folders last: a scan cut by
/// [`ROOT_ONLY_SCAN_MAX`] covers what it did not reach.
const ROOT_ONLY_SCAN: &[&str] = &[
    "/etc",
    "/usr/local",
    "/opt",
    "/boot",
    "/srv",
    "/mnt",
    "/media",
    "/var",
];

/// Root's home directory: when clawsmith runs as root with `$HOME` elsewhere, it is covered
/// whole like a home (its toolchains are reached through `$HOME`'s allowlist, not from here).
const ROOT_HOME: &str = "/root";

/// Entries the root-only scan looks at, at most. Beyond, it fails closed: every folder it has
/// not finished is covered whole, and the report says so.
const ROOT_ONLY_SCAN_MAX: usize = 50_000;

/// Paths inside a repository's git dir that make git run code or point it elsewhere; bound
/// read-only when they exist.
pub const GIT_CODE_PATHS: &[&str] = &[
    "hooks",
    "config",
    "config.worktree",
    "commondir",
    "gitdir",
    "worktrees",
    "modules",
    "info/attributes",
];

/// What the sandbox enforced for one command, shown in the result's display fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    /// The configured policy.
    pub policy: SandboxPolicy,
    /// Whether the platform sandbox confines the command.
    pub confined: bool,
    /// e.g. `namespaces (user, mount, pid, ipc, net); read-only /; …`.
    pub filesystem: String,
    /// e.g. `none (network namespace with loopback only)` or `allowed`.
    pub network: String,
    /// e.g. `read-only: .git/hooks, .git/config`.
    pub protected: String,
    /// Whether `no_new_privs` was set.
    pub no_new_privs: bool,
    /// Why the command runs unconfined, when it does.
    pub unconfined_reason: Option<String>,
}

impl SandboxReport {
    /// One line for the model: `sandbox: …`.
    pub fn summary(&self) -> String {
        match &self.unconfined_reason {
            Some(reason) => format!("unconfined ({}: {reason})", self.policy.as_str()),
            None => format!(
                "{}; network {}; protected {}",
                self.filesystem, self.network, self.protected
            ),
        }
    }
}

/// Why the sandbox could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unavailable(pub(crate) String);

/// The parent's plan: what the child applies, and the report.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) setup: ChildSetup,
    pub(crate) report: SandboxReport,
}

/// Where the command runs and what it may write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The canonical workspace root.
    pub(crate) workspace: &'a Path,
    /// `(st_dev, st_ino)` of the workspace root the session opened.
    pub(crate) identity: (u64, u64),
    /// The canonical working directory (inside the workspace).
    pub(crate) cwd: &'a Path,
    /// The host temp dir (only in the host's view; the built view has a private `/tmp`).
    pub(crate) host_temp_dir: Option<&'a Path>,
    /// Whether fd 0 is a PTY to make the controlling terminal.
    pub(crate) pty: bool,
    /// The PTY slave's path on the host (`/dev/pts/N`), for a PTY command.
    pub(crate) pty_slave: Option<&'a Path>,
    /// The workspace's repositories, whose `.git` are pinned and code paths made read-only.
    pub(crate) repositories: Option<&'a crate::git_guard::Repositories>,
}

/// How the command's world is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum World {
    /// Namespaces and a built view.
    Built,
    /// The host's view with Landlock and seccomp (the best-effort fallback).
    HostView,
}

/// Builds the child setup for a command.
///
/// `Err` only under [`SandboxPolicy::Required`] when the kernel cannot enforce the sandbox;
/// under `BestEffort` the same failure yields a weaker or unconfined plan that says why.
pub(crate) fn plan(
    config: &SandboxConfig,
    target: Target<'_>,
    world: World,
) -> Result<Plan, Unavailable> {
    let mut setup = ChildSetup {
        controlling_tty: target.pty,
        rlimits: rlimits(&config.limits),
        ..ChildSetup::default()
    };
    if config.policy == SandboxPolicy::Off {
        return Ok(Plan {
            setup,
            report: unconfined_report(config, "the sandbox policy is off".to_owned(), false),
        });
    }
    setup.no_new_privs = true;
    let confined = match world {
        World::Built => build_world(config, target, &mut setup),
        World::HostView => host_view(config, target, &mut setup),
    };
    match confined {
        Ok(report) => Ok(Plan { setup, report }),
        // The built view's failure goes back to the caller, which falls back to the host's view.
        Err(Unavailable(reason))
            if config.policy == SandboxPolicy::BestEffort && world == World::HostView =>
        {
            setup.landlock = None;
            setup.seccomp = Vec::new();
            setup.namespaces = None;
            Ok(Plan {
                setup,
                report: unconfined_report(config, reason, true),
            })
        }
        Err(unavailable) => Err(unavailable),
    }
}

fn unconfined_report(config: &SandboxConfig, reason: String, no_new_privs: bool) -> SandboxReport {
    SandboxReport {
        policy: config.policy,
        confined: false,
        filesystem: "unconfined".to_owned(),
        network: "unconfined".to_owned(),
        protected: "not enforced".to_owned(),
        no_new_privs,
        unconfined_reason: Some(reason),
    }
}

/// What user namespaces need, for the refusal message.
pub(crate) const USER_NAMESPACE_HELP: &str = "the sandbox needs unprivileged user namespaces \
     (sysctl user.max_user_namespaces > 0; on Debian/Ubuntu also kernel.unprivileged_userns_clone=1 \
     and kernel.apparmor_restrict_unprivileged_userns=0); or run with --sandbox best-effort to \
     accept Landlock and seccomp alone";

fn build_world(
    config: &SandboxConfig,
    target: Target<'_>,
    setup: &mut ChildSetup,
) -> Result<SandboxReport, Unavailable> {
    let kernel: KernelSupport = config.kernel_support();
    let abi = kernel_walls(kernel)?;
    if !kernel.user_namespaces {
        return Err(Unavailable(format!(
            "user namespaces are not available: {USER_NAMESPACE_HELP}"
        )));
    }
    let writable = writable_roots(config, target.workspace);
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let (base, view, protected) = view(config, target, &writable, (uid, gid))?;
    let base = prepared(base)?;
    let gateway_failure = match &base.egress {
        Some(crate::egress::EgressState::Failed(why)) => Some(why.clone()),
        _ => None,
    };
    let covered = base
        .view
        .covered()
        .map_err(|e| Unavailable(format!("covered paths: {e}")))?;

    // Landlock: the private /tmp and /dev get their rules in the command process, where they
    // exist (see `ChildSetup::landlock_private_dirs`).
    setup.landlock = Some(landlock_ruleset(LandlockRules {
        writable: landlock_writable(config, &writable).to_vec(),
        handle_network: false,
    })?);
    setup.landlock_private_dirs = vec![cstring("/tmp")?, cstring("/dev")?];
    setup.landlock_fs_access = AccessFs::from_all(ABI::from(abi.min(TARGET_ABI as u32) as i32))
        .iter()
        .fold(0u64, |bits, access| bits | access as u64);
    setup.seccomp = vec![command_filter(false, false)?];

    let (lifeline_read, lifeline_write) =
        child::lifeline().map_err(|e| Unavailable(format!("lifeline pipe: {e}")))?;
    let clone_flags = libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP;
    // `kernel.pid_max` belongs to the PID namespace since Linux 6.14; on older kernels the
    // namespace has no process limit of its own (RLIMIT_NPROC still binds non-root users).
    let pid_max = config
        .limits
        .processes
        .filter(|_| kernel_at_least(6, 14))
        .map(|processes| cstring(&(processes.saturating_add(1).max(301)).to_string()))
        .transpose()?;
    setup.namespaces = Some(Namespaces {
        base,
        clone_flags,
        lifeline_read,
        lifeline_write,
        pid_max,
        workspace: cpath(target.workspace)?,
        identity: target.identity,
        covered,
        view,
        spare: None,
    });

    let extra = config
        .extra_writable_roots
        .iter()
        .filter(|root| root.exists())
        .count();
    let workspace = if config.workspace_writable {
        "the workspace"
    } else {
        "not the workspace (read-only)"
    };
    Ok(SandboxReport {
        policy: config.policy,
        confined: true,
        filesystem: format!(
            "namespaces (user, mount, pid, ipc{}); read-only host; writable: {workspace}{}, a \
             private /tmp and /dev/shm; home and runtime folders empty but for the allowlist; \
             root-only files{}, secrets and unix sockets hidden; landlock v{abi}, seccomp, \
             no capabilities",
            if config.network_allowed { "" } else { ", net" },
            if extra > 0 {
                format!(" and {extra} extra roots")
            } else {
                String::new()
            },
            match root_only_unscanned() {
                0 => String::new(),
                unscanned => format!(
                    " (the scan for them stopped at {ROOT_ONLY_SCAN_MAX} entries: {unscanned} \
                     folders it did not finish are shown empty)"
                ),
            }
        ),
        network: match (&config.egress, gateway_failure) {
            _ if config.network_allowed => "allowed".to_owned(),
            (Some(_), Some(why)) => format!(
                "blocked (the network allowlist's gateway did not start, so the network is \
                 closed: loopback only; {why})"
            ),
            (Some(egress), None) => format!(
                "allowlist (network namespace whose only exits are clawsmith's gateway: proxy \
                 127.0.0.1:{}, DNS 127.0.0.1:{}; {} allow and {} deny rules)",
                crate::egress::PROXY_PORT,
                crate::egress::DNS_PORT,
                egress.policy().allow.len(),
                egress.policy().deny.len()
            ),
            (None, _) => "blocked (network namespace: loopback only)".to_owned(),
        },
        protected: if protected.is_empty() {
            "nothing inside the writable roots".to_owned()
        } else {
            format!("read-only: {}", protected.join(", "))
        },
        no_new_privs: true,
        unconfined_reason: None,
    })
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    static RELEASE: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    let release = *RELEASE.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = text
            .trim()
            .split(|c: char| !c.is_ascii_digit())
            .map(|part| part.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    });
    release >= (major, minor)
}

/// The Landlock ABI, when both second walls (Landlock and seccomp) are there.
fn kernel_walls(kernel: KernelSupport) -> Result<u32, Unavailable> {
    let Some(abi) = kernel.landlock_abi else {
        return Err(Unavailable(
            "Landlock is not available in this kernel (needs Linux 5.13+ with landlock in the \
             lsm= boot list)"
                .to_owned(),
        ));
    };
    if !kernel.seccomp {
        return Err(Unavailable(
            "seccomp is not available in this kernel".to_owned(),
        ));
    }
    Ok(abi)
}

/// How long a prepared base view is reused. Within it, every command still checks what can
/// change under it (the workspace's identity, each covered and bound path's identity, the
/// host's unix sockets, the `.git` directories); the age bounds what a base cannot see, such
/// as mounts the host made or removed since.
const BASE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// How many prepared base views are kept (one per distinct configuration in use).
const BASES_KEPT: usize = 8;

static BASES: Mutex<Vec<Arc<BaseNamespaces>>> = Mutex::new(Vec::new());

/// Drops every prepared base view (the next command builds its own).
pub(crate) fn forget_bases() {
    BASES.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// Whether `base` is still a kept, unexpired prepared view (a warm spare of any other one is
/// dropped: `spare.rs`).
pub(crate) fn base_is_current(base: &Arc<BaseNamespaces>) -> bool {
    base.created.elapsed() < BASE_MAX_AGE
        && BASES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|kept| Arc::ptr_eq(kept, base))
}

/// The prepared base for `view`: reused when an equal one younger than [`BASE_MAX_AGE`] is
/// kept, else built now (about as much work as one command's whole view used to be).
fn prepared(view: BaseView) -> Result<Arc<BaseNamespaces>, Unavailable> {
    let mut bases = BASES.lock().unwrap_or_else(PoisonError::into_inner);
    bases.retain(|base| base.created.elapsed() < BASE_MAX_AGE);
    if let Some(base) = bases.iter().find(|base| base.view == view) {
        return Ok(Arc::clone(base));
    }
    let base = Arc::new(view.create().map_err(|error| {
        if error.raw_os_error() == Some(child::WORKSPACE_REPLACED_ERRNO) {
            Unavailable("the workspace root changed while its view was being built".to_owned())
        } else {
            Unavailable(format!("building the command's view: {error}"))
        }
    })?);
    // A base whose gateway did not start is used once (closed) and not kept: the next
    // command tries again.
    if matches!(base.egress, Some(crate::egress::EgressState::Failed(_))) {
        return Ok(base);
    }
    if bases.len() >= BASES_KEPT {
        bases.remove(0);
    }
    bases.push(Arc::clone(&base));
    Ok(base)
}

/// The workspace first, then the extra roots that exist (canonical), then the read-only roots
/// (bound like the others, then made read-only: see `view`).
fn writable_roots(config: &SandboxConfig, workspace: &Path) -> Vec<PathBuf> {
    let mut writable = vec![workspace.to_path_buf()];
    for root in config
        .extra_writable_roots
        .iter()
        .chain(&config.read_only_roots)
    {
        if let Ok(real) = root.canonicalize()
            && !writable.contains(&real)
        {
            writable.push(real);
        }
    }
    writable
}

/// The roots Landlock lets commands write: all of `writable` but the workspace (its first entry)
/// when the workspace is read-only.
fn landlock_writable<'a>(config: &SandboxConfig, writable: &'a [PathBuf]) -> &'a [PathBuf] {
    if config.workspace_writable {
        writable
    } else {
        &writable[1..]
    }
}

/// Where a host path is in the built view before `pivot_root`.
fn staged(staging: &Path, path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    staging.join(relative)
}

/// Host folders a built view shows empty, and what it binds back into them.
#[derive(Debug, Default)]
struct Covers {
    /// Canonical host directories covered by an empty tmpfs (the home directory and the
    /// runtime folders), outermost only.
    dirs: Vec<PathBuf>,
    /// `(host source, path in the view, whether it is a directory)` bound back read-only into
    /// one of `dirs`: the allowlisted home entries, the resolver's configuration.
    allowed: Vec<(PathBuf, PathBuf, bool)>,
}

/// The empty folders of the view and what is bound back into them, from the configuration and
/// the host as it is now. A home directory inside a writable root is not among them: [`hidden`]
/// covers it whole after the root is bound.
fn covers(config: &SandboxConfig, writable: &[PathBuf]) -> Covers {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let runtime = config.runtime_dirs.iter().cloned();
    let home = config.home_dir().and_then(|home| home.canonicalize().ok());
    let home = home.filter(|home| {
        home_can_be_covered(home) && !writable.iter().any(|root| home.starts_with(root))
    });
    for dir in runtime.chain(home.clone()) {
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if real.is_dir() && real != Path::new("/") && !dirs.contains(&real) {
            dirs.push(real);
        }
    }
    let outer = dirs.clone();
    dirs.retain(|dir| !outer.iter().any(|o| o != dir && dir.starts_with(o)));
    let under_cover = |path: &Path| dirs.iter().any(|dir| path.starts_with(dir));
    let mut allowed = Vec::new();
    if let Some(home) = home.as_ref().filter(|home| under_cover(home)) {
        // One listing of the home directory says which entries can be there at all: most are
        // absent, and resolving each path was a measurable part of a spawn.
        let names: Option<std::collections::HashSet<std::ffi::OsString>> = std::fs::read_dir(home)
            .ok()
            .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect());
        for entry in &config.home_allow {
            let first = entry.split('/').next().unwrap_or(entry);
            if names
                .as_ref()
                .is_some_and(|names| !names.contains(std::ffi::OsStr::new(first)))
            {
                continue;
            }
            let relative = Path::new(entry);
            if !relative
                .components()
                .all(|part| matches!(part, Component::Normal(_)))
            {
                continue;
            }
            let in_view = home.join(relative);
            let Ok(real) = in_view.canonicalize() else {
                continue;
            };
            // An entry that is a link leading back into a covered folder (`~/.cache/pip ->
            // ~/.ssh`) would uncover what the allowlist leaves out: not bound.
            if real != in_view && under_cover(&real) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&real) else {
                continue;
            };
            if meta.is_dir() || meta.is_file() {
                allowed.push((real, in_view, meta.is_dir()));
            }
        }
    }
    if let Ok(resolver) = Path::new("/etc/resolv.conf").canonicalize()
        && under_cover(&resolver)
        && resolver.is_file()
    {
        allowed.push((resolver.clone(), resolver, false));
    }
    Covers { dirs, allowed }
}

/// Whether a home directory may be shown empty: not `/` and not a folder of the system itself
/// (a service account's home can be `/var/lib/…`, never `/usr` or `/etc`).
fn home_can_be_covered(home: &Path) -> bool {
    const SYSTEM: &[&str] = &[
        "/", "/usr", "/etc", "/var", "/opt", "/bin", "/sbin", "/lib", "/lib64", "/srv", "/tmp",
        "/proc", "/dev", "/sys", "/run",
    ];
    !SYSTEM.iter().any(|system| home == Path::new(system))
        && !home.starts_with("/usr")
        && !home.starts_with("/etc")
}

/// What of the host a built view shows.
struct Sight<'a> {
    writable: &'a [PathBuf],
    covers: &'a Covers,
}

impl Sight<'_> {
    /// Where a host path appears in the view: under the allowlisted home entry bound from the
    /// folder it lies in, else at itself.
    fn in_view(&self, path: &Path) -> PathBuf {
        self.covers
            .allowed
            .iter()
            .find_map(|(source, in_view, _)| {
                path.strip_prefix(source).ok().map(|rest| {
                    if rest.as_os_str().is_empty() {
                        in_view.clone()
                    } else {
                        in_view.join(rest)
                    }
                })
            })
            .unwrap_or_else(|| path.to_path_buf())
    }

    /// Whether a host path can be seen in the built view: the private `/tmp`, `/dev` and
    /// `/proc` hide the host's and the covered folders show only what is bound back, except
    /// where a writable root is bound in.
    fn shows(&self, path: &Path) -> bool {
        if self.writable.iter().any(|root| path.starts_with(root)) {
            return true;
        }
        if ["/tmp", "/dev", "/proc"]
            .iter()
            .any(|hidden| path.starts_with(hidden))
        {
            return false;
        }
        !self.covers.dirs.iter().any(|dir| path.starts_with(dir))
            || self
                .covers
                .allowed
                .iter()
                .any(|(source, _, _)| path.starts_with(source))
    }
}

fn cstring(text: &str) -> Result<CString, Unavailable> {
    CString::new(text).map_err(|_| Unavailable(format!("text contains NUL: {text:?}")))
}

fn cpath(path: &Path) -> Result<CString, Unavailable> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Unavailable(format!("path contains NUL: {}", path.display())))
}

/// The base view (the same for every command of this configuration, prepared once) and what
/// this command gets of its own, with the names of the read-only paths for the report.
fn view(
    config: &SandboxConfig,
    target: Target<'_>,
    writable: &[PathBuf],
    (uid, gid): (u32, u32),
) -> Result<(BaseView, CommandView, Vec<String>), Unavailable> {
    for root in writable {
        if ["/dev", "/proc"]
            .iter()
            .any(|special| root.starts_with(special))
            || root == Path::new("/")
        {
            return Err(Unavailable(format!(
                "{} cannot be a writable root of the built view",
                root.display()
            )));
        }
    }
    let staging = ["/tmp", "/mnt", "/var/tmp"]
        .iter()
        .map(Path::new)
        .find(|dir| {
            std::fs::symlink_metadata(dir)
                .map(|m| m.is_dir())
                .unwrap_or(false)
        })
        .ok_or_else(|| Unavailable("no directory to assemble the view in (/tmp, /mnt)".into()))?;
    let at = |path: &Path| cpath(&staged(staging, path));
    let mut identities = Vec::new();
    let mut identity = |path: &Path| {
        identities.push(identity_of(path).unwrap_or((0, 0)));
    };

    let mut mkdirs = Vec::new();
    let mut writable_pairs = Vec::new();
    let mut tmp_roots = Vec::new();
    let mut tmp_mkdirs = Vec::new();
    for root in writable {
        let mut prefix = PathBuf::from("/");
        for component in root.components().skip(1) {
            prefix.push(component);
            let dir = at(&prefix)?;
            if !mkdirs.contains(&dir) {
                mkdirs.push(dir);
            }
            if prefix.starts_with("/tmp") && prefix != Path::new("/tmp") {
                let dir = cpath(&prefix)?;
                if !tmp_mkdirs.contains(&dir) {
                    tmp_mkdirs.push(dir);
                }
            }
        }
        writable_pairs.push((cpath(root)?, at(root)?));
        identity(root);
        // The command's private /tmp covers the base's: roots under it are bound back.
        if root.starts_with("/tmp") && !writable.iter().any(|r| r != root && root.starts_with(r)) {
            tmp_roots.push(cpath(root)?);
        }
    }

    let devices = VIEW_DEVICES
        .iter()
        .map(|name| Path::new("/dev").join(name))
        .filter(|path| path.exists())
        .map(|path| Ok((cpath(&path)?, at(&path)?)))
        .collect::<Result<Vec<_>, Unavailable>>()?;
    let dev = |name: &str| at(&Path::new("/dev").join(name));
    let dev_links = vec![
        (cstring("pts/ptmx")?, dev("ptmx")?),
        (cstring("/proc/self/fd")?, dev("fd")?),
        (cstring("/proc/self/fd/0")?, dev("stdin")?),
        (cstring("/proc/self/fd/1")?, dev("stdout")?),
        (cstring("/proc/self/fd/2")?, dev("stderr")?),
    ];
    let tmp_bytes = config.limits.tmp_bytes.unwrap_or(1 << 30);
    let shm_bytes = (tmp_bytes / 4).max(1 << 20);

    let mut base_read_only = Vec::new();
    let mut protected_names = Vec::new();
    if !config.workspace_writable {
        // Bound read-only onto itself after the read-write bind that pins its identity.
        base_read_only.push(at(target.workspace)?);
        protected_names.push("the workspace".to_owned());
    }
    let state = match config.state_dir() {
        crate::config::StateDir::At(state) => Some(state),
        crate::config::StateDir::NotKept => None,
    };
    for path in config
        .protected_paths
        .iter()
        .chain(&config.read_only_roots)
        .chain(state)
    {
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if writable.iter().any(|root| real.starts_with(root)) {
            let staged_path = at(&real)?;
            if !base_read_only.contains(&staged_path) {
                base_read_only.push(staged_path);
                identity(&real);
                protected_names.push(
                    real.strip_prefix(target.workspace)
                        .unwrap_or(&real)
                        .display()
                        .to_string(),
                );
            }
        }
    }

    // Every .git: pinned (cannot be renamed, replaced or removed) and its code paths
    // read-only — per command, since repositories come and go.
    let mut pinned = Vec::new();
    let mut read_only = Vec::new();
    for git in target.repositories.into_iter().flat_map(|r| r.present()) {
        let Ok(meta) = std::fs::symlink_metadata(git) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let name = git
            .strip_prefix(target.workspace)
            .unwrap_or(git)
            .display()
            .to_string();
        pinned.push(cpath(git)?);
        let whole = target
            .repositories
            .is_some_and(|r| r.lock() == crate::git_guard::GitLock::Whole);
        if meta.is_file() || whole {
            read_only.push(cpath(git)?);
            protected_names.push(name);
            continue;
        }
        for code in GIT_CODE_PATHS {
            let path = git.join(code);
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            read_only.push(cpath(&path)?);
            protected_names.push(format!("{name}/{code}"));
        }
    }

    let covers = covers(config, writable);
    if covers.allowed.len() > child::ALLOWED_MAX {
        return Err(Unavailable(format!(
            "more than {} home_allow entries exist; name fewer",
            child::ALLOWED_MAX
        )));
    }
    // A folder to empty under /tmp (a home there) is already out of sight: the view's own
    // empty /tmp covers it, and a mount made there first would be buried under that tmpfs.
    let under_tmp = |dir: &Path| dir.starts_with("/tmp");
    let mut empty_mkdirs: Vec<CString> = Vec::new();
    let mut allowed = Vec::new();
    for (source, in_view, is_dir) in &covers.allowed {
        let Some(cover) = covers.dirs.iter().find(|dir| in_view.starts_with(dir)) else {
            continue;
        };
        if under_tmp(cover) {
            continue;
        }
        let mut prefix = cover.clone();
        let parents = in_view
            .parent()
            .and_then(|parent| parent.strip_prefix(cover).ok());
        for component in parents.into_iter().flat_map(Path::components) {
            prefix.push(component);
            let dir = at(&prefix)?;
            if !empty_mkdirs.contains(&dir) {
                empty_mkdirs.push(dir);
            }
        }
        allowed.push((cpath(source)?, at(in_view)?, *is_dir));
        identity(source);
    }
    let mut empty_dirs = covers
        .dirs
        .iter()
        .filter(|dir| !under_tmp(dir))
        .map(|dir| at(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let sight = Sight {
        writable,
        covers: &covers,
    };
    let (hidden_dirs, hidden_files, hidden_identities, emptied) = hidden(config, &sight, &at)?;
    identities.extend(hidden_identities);
    // Parents before the folders inside them.
    empty_dirs.extend(emptied);
    empty_dirs.sort_by_key(|dir| dir.as_bytes().len());
    // An allowlist's exits live in the base's own network namespace; the view's resolver
    // names the DNS stub (mounted over the host's resolv.conf, a plain file or a link).
    let egress = config
        .egress
        .as_ref()
        .filter(|_| !config.network_allowed)
        .map(|egress| (egress.clone(), egress.transparent_ports()));
    let resolv_conf = match &egress {
        Some(_)
            if std::fs::symlink_metadata("/etc/resolv.conf")
                .is_ok_and(|metadata| metadata.is_file() || metadata.is_symlink()) =>
        {
            Some((
                at(Path::new("/dev/.clawsmith-resolv.conf"))?,
                at(Path::new("/etc/resolv.conf"))?,
            ))
        }
        _ => None,
    };
    let base = BaseView {
        staging: cpath(staging)?,
        uid_map: format!("{uid} {uid} 1").into_bytes(),
        gid_map: format!("{gid} {gid} 1").into_bytes(),
        network_namespace: !config.network_allowed,
        egress,
        resolv_conf,
        workspace: cpath(target.workspace)?,
        identity: target.identity,
        writable: writable_pairs,
        mkdirs,
        empty_dirs,
        empty_mkdirs,
        allowed,
        tmp: at(Path::new("/tmp"))?,
        dev: (at(Path::new("/dev"))?, cstring("size=64k,mode=0755")?),
        devices,
        shm: dev("shm")?,
        pts: dev("pts")?,
        dev_links,
        read_only: base_read_only,
        hidden_dirs,
        hidden_files,
        identities,
    };
    let view = CommandView {
        tmp_options: cstring(&format!("size={tmp_bytes},mode=1777"))?,
        tmp_roots,
        tmp_mkdirs,
        shm_options: cstring(&format!("size={shm_bytes},mode=1777"))?,
        pts: match target.pty_slave {
            Some(slave) => Pts::OwnSlave(cpath(slave)?, cpath(slave)?),
            None => Pts::NewInstance(cstring("newinstance,ptmxmode=0666,mode=0620")?),
        },
        pinned,
        read_only,
        cwd: cpath(target.cwd)?,
    };
    Ok((base, view, protected_names))
}

/// Directories and files to cover, the `(st_dev, st_ino)` of each (directories first), and the
/// hidden directories that hold a writable root (shown empty, the root bound in).
type Hidden = (Vec<CString>, Vec<CString>, Vec<(u64, u64)>, Vec<CString>);

/// Directories and files to cover: credential files inside the allowlisted home entries, the
/// configured hidden paths, what only clawsmith's user may read in the host's system folders
/// (when that user is root), and every pathname unix socket the host has bound.
fn hidden(
    config: &SandboxConfig,
    sight: &Sight<'_>,
    at: &dyn Fn(&Path) -> Result<CString, Unavailable>,
) -> Result<Hidden, Unavailable> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = config.home_dir() {
        // A home inside a writable root is bound with it: covered whole (the workspace itself
        // is never covered, so a home that is the workspace keeps only the names below hidden).
        if sight
            .writable
            .iter()
            .any(|root| home.starts_with(root) && home != *root)
        {
            candidates.push(home.clone());
        }
        // In a home shown empty, only what lies in a bound entry can be seen: the others are
        // left out before any system call.
        let home_real = home.canonicalize().ok();
        let covered_home = home_real
            .as_ref()
            .is_some_and(|real| sight.covers.dirs.iter().any(|dir| real.starts_with(dir)));
        candidates.extend(
            HIDDEN_HOME_PATHS
                .iter()
                .filter(|name| {
                    !covered_home
                        || sight.covers.allowed.iter().any(|(_, in_view, _)| {
                            home_real
                                .as_ref()
                                .is_some_and(|real| real.join(name).starts_with(in_view))
                        })
                })
                .map(|name| home.join(name)),
        );
    }
    if let crate::config::StateDir::At(state) = config.state_dir() {
        candidates.push(state.clone());
    }
    candidates.extend(config.hidden_paths.iter().cloned());
    if let Some(source) = &config.hidden_path_source {
        candidates.extend(source.hidden_paths());
    }
    let state_dir = match config.state_dir() {
        crate::config::StateDir::At(state) => Some(state.as_path()),
        crate::config::StateDir::NotKept => None,
    };
    candidates.extend(
        root_only_paths(sight.covers, state_dir)
            .paths
            .iter()
            .cloned(),
    );
    candidates.extend(host_unix_sockets());
    let mut emptied: Vec<CString> = Vec::new();
    // (staged path, (st_dev, st_ino)) of each.
    let mut dirs: Vec<(CString, (u64, u64))> = Vec::new();
    let mut files: Vec<(CString, (u64, u64))> = Vec::new();
    let mut real_parents = RealParents::default();
    for path in candidates {
        // Most candidates do not exist: one stat says so, where resolving the path reads the
        // link of every component (readlink was ~2% of a spawn's samples).
        let Ok(first) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let real = if first.file_type().is_symlink() {
            path.canonicalize().ok()
        } else {
            real_parents.real_path(&path)
        };
        let Some(real) = real else {
            continue;
        };
        if !sight.shows(&real) || real == Path::new("/") {
            continue;
        }
        // A workspace inside a hidden directory stays usable: the directory is shown empty
        // with the writable roots bound in.
        if sight.writable.iter().any(|root| root.starts_with(&real)) {
            if first.is_dir() || std::fs::metadata(&real).is_ok_and(|meta| meta.is_dir()) {
                let staged_dir = at(&real)?;
                if !emptied.contains(&staged_dir) {
                    emptied.push(staged_dir);
                }
            }
            continue;
        }
        // A path that is already its real path (never a symlink) names what the first stat
        // saw; only one reached through a symlink is looked at again, where it leads.
        let meta = if real == path {
            first
        } else {
            let Ok(meta) = std::fs::metadata(&real) else {
                continue;
            };
            meta
        };
        let entry = (at(&sight.in_view(&real))?, (meta.dev(), meta.ino()));
        if meta.is_dir() {
            if !dirs.iter().any(|(path, _)| *path == entry.0) {
                dirs.push(entry);
            }
        } else if (meta.is_file() || meta.file_type().is_socket() || meta.file_type().is_fifo())
            && !files.iter().any(|(path, _)| *path == entry.0)
        {
            files.push(entry);
        }
    }
    // What lies under a covered directory is out of sight already (and its path is gone).
    let covered: Vec<CString> = dirs.iter().map(|(dir, _)| dir.clone()).collect();
    let under_covered = |path: &CString| {
        covered.iter().any(|dir| {
            let dir = dir.as_bytes();
            let path = path.as_bytes();
            path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/'
        })
    };
    dirs.retain(|(dir, _)| !under_covered(dir));
    files.retain(|(file, _)| !under_covered(file));
    // A stable order, so that the same host state describes the same base. The identities
    // are part of it: a covered path removed and made anew (a new inode, which a mount made
    // before on the old one would not cover) makes a reused base stale.
    dirs.sort();
    files.sort();
    let identities = dirs.iter().chain(&files).map(|(_, id)| *id).collect();
    Ok((
        dirs.into_iter().map(|(path, _)| path).collect(),
        files.into_iter().map(|(path, _)| path).collect(),
        identities,
        emptied,
    ))
}

/// Real paths of entries that are not symlinks, from their parent directory's real path,
/// resolved once per directory: most covered paths share a few directories (`$HOME`, `/etc`,
/// a socket directory), and resolving a path reads the link of each of its components.
#[derive(Default)]
struct RealParents(Vec<(PathBuf, Option<PathBuf>)>);

impl RealParents {
    /// `path`'s real path, given that `lstat` found its last component not a symlink: the
    /// real path of its directory joined with its name (what resolving the whole path gives).
    /// Only for a plain absolute path — no `.` or `..` component, no doubled or trailing `/`
    /// (after which `lstat` would have followed a symlink); any other is resolved whole.
    fn real_path(&mut self, path: &Path) -> Option<PathBuf> {
        let plain = path.is_absolute()
            && path
                .components()
                .all(|part| matches!(part, Component::RootDir | Component::Normal(_)))
            && path.components().collect::<PathBuf>().as_os_str() == path.as_os_str();
        let (true, Some(parent), Some(name)) = (plain, path.parent(), path.file_name()) else {
            return path.canonicalize().ok();
        };
        let real_parent = match self.0.iter().find(|(known, _)| known == parent) {
            Some((_, real)) => real.clone(),
            None => {
                let real = parent.canonicalize().ok();
                self.0.push((parent.to_path_buf(), real.clone()));
                real
            }
        };
        Some(real_parent?.join(name))
    }
}

/// What the root-only scan found: host files and folders under [`ROOT_ONLY_SCAN`] that
/// clawsmith's user may use only as their owner or group — decided by mode, whatever their name
/// (`/etc/shadow`, `/etc/ssl/private`, host ssh keys, `/var/lib/private`) — when that user is
/// root; nothing otherwise (other users' files are guarded by their modes already, and the
/// user's own live in the covered home directory).
#[derive(Debug, Default)]
struct RootOnly {
    /// Every path to cover: the files and folders found (a folder is covered whole and not
    /// entered; one holding a writable root is shown empty with the root bound in: [`hidden`]),
    /// then the folders the scan did not finish.
    paths: Vec<PathBuf>,
    /// How many of `paths` are folders covered unscanned because the scan reached
    /// [`ROOT_ONLY_SCAN_MAX`] entries.
    unscanned: usize,
}

/// A root-only scan: when it was made, for which covered folders, and what it found.
type RootOnlyScan = (std::time::Instant, Vec<PathBuf>, Arc<RootOnly>);

/// The last root-only scan of the process.
static ROOT_ONLY: Mutex<Option<RootOnlyScan>> = Mutex::new(None);

/// How many folders the last root-only scan covered unscanned (0 when it finished).
fn root_only_unscanned() -> usize {
    ROOT_ONLY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or(0, |(_, _, found)| found.unscanned)
}

/// The root-only scan for `covers`, made again when it is older than [`BASE_MAX_AGE`] or the
/// covered folders differ (a folder not covered is scanned, one covered is skipped). A process
/// that has none yet reads the last one from the state directory (`state_dir`) when it is as
/// young and for the same folders, so one-shot processes share a scan as a long-lived one
/// keeps its own (the scan was a third of a one-shot `run_command`'s time as root).
fn root_only_paths(covers: &Covers, state_dir: Option<&Path>) -> Arc<RootOnly> {
    if !nix::unistd::getuid().is_root() {
        return Arc::new(RootOnly::default());
    }
    let mut kept = ROOT_ONLY.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, dirs, found)) = kept.as_ref()
        && at.elapsed() < BASE_MAX_AGE
        && *dirs == covers.dirs
    {
        return Arc::clone(found);
    }
    let file = state_dir.map(|dir| dir.join(ROOT_ONLY_FILE));
    if let Some((age, found)) = file
        .as_deref()
        .and_then(|file| read_root_only(file, &covers.dirs))
    {
        let found = Arc::new(found);
        let at = std::time::Instant::now()
            .checked_sub(age)
            .unwrap_or_else(std::time::Instant::now);
        *kept = Some((at, covers.dirs.clone(), Arc::clone(&found)));
        return found;
    }
    let roots: Vec<PathBuf> = ROOT_ONLY_SCAN.iter().map(PathBuf::from).collect();
    let mut found = scan_root_only(&roots, covers, ROOT_ONLY_SCAN_MAX);
    let root_home = Path::new(ROOT_HOME);
    if !covers.dirs.iter().any(|dir| root_home.starts_with(dir)) {
        found.paths.push(root_home.to_path_buf());
    }
    if let Some(file) = &file {
        write_root_only(file, &covers.dirs, &found);
    }
    let found = Arc::new(found);
    *kept = Some((
        std::time::Instant::now(),
        covers.dirs.clone(),
        Arc::clone(&found),
    ));
    found
}

/// The last root-only scan, in the state directory.
const ROOT_ONLY_FILE: &str = "root-only-scan";

/// The first field of [`ROOT_ONLY_FILE`].
const ROOT_ONLY_MAGIC: &str = "clawsmith-root-only-scan-1";

fn unix_ms() -> Option<u64> {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    u64::try_from(since.as_millis()).ok()
}

/// Writes `found` for `dirs` (NUL-separated: magic, time, unscanned count, the number of covered
/// folders, the folders, the paths) through a private temporary file renamed into place; a
/// failure only costs the next process a scan.
fn write_root_only(file: &Path, dirs: &[PathBuf], found: &RootOnly) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Some(now) = unix_ms() else { return };
    let mut bytes: Vec<u8> = Vec::new();
    for field in [
        ROOT_ONLY_MAGIC.to_owned(),
        now.to_string(),
        found.unscanned.to_string(),
        dirs.len().to_string(),
    ] {
        bytes.extend_from_slice(field.as_bytes());
        bytes.push(0);
    }
    for path in dirs.iter().chain(&found.paths) {
        bytes.extend_from_slice(path.as_os_str().as_bytes());
        bytes.push(0);
    }
    let temporary = file.with_extension(format!("tmp-{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temporary)
        .and_then(|mut out| out.write_all(&bytes));
    if written.is_err() || std::fs::rename(&temporary, file).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// The scan in `file` and its age, when it was made for `dirs` less than [`BASE_MAX_AGE`] ago
/// and the file is root's alone (not a link, no rights for group or others): anything else is
/// scanned again.
fn read_root_only(file: &Path, dirs: &[PathBuf]) -> Option<(std::time::Duration, RootOnly)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)
        .ok()?;
    let meta = opened.metadata().ok()?;
    if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o077 != 0 {
        return None;
    }
    let mut bytes = Vec::new();
    opened.read_to_end(&mut bytes).ok()?;
    let mut fields = bytes.split(|byte| *byte == 0);
    let mut text = || -> Option<String> { String::from_utf8(fields.next()?.to_vec()).ok() };
    if text()? != ROOT_ONLY_MAGIC {
        return None;
    }
    let made: u64 = text()?.parse().ok()?;
    let unscanned: usize = text()?.parse().ok()?;
    let count: usize = text()?.parse().ok()?;
    let age = std::time::Duration::from_millis(unix_ms()?.checked_sub(made)?);
    if age >= BASE_MAX_AGE {
        return None;
    }
    let mut paths: Vec<PathBuf> = bytes
        .split(|byte| *byte == 0)
        .skip(4)
        .filter(|field| !field.is_empty())
        .map(|field| PathBuf::from(std::ffi::OsStr::from_bytes(field)))
        .collect();
    if paths.len() < count || paths[..count] != *dirs {
        return None;
    }
    let paths = paths.split_off(count);
    Some((age, RootOnly { paths, unscanned }))
}

/// Walks `roots` in order, at most `budget` entries. When the budget runs out, the folder being
/// read, the folders waiting to be entered and the roots not begun are covered whole: what was
/// not looked at is out of sight rather than trusted.
fn scan_root_only(roots: &[PathBuf], covers: &Covers, budget: usize) -> RootOnly {
    let groups: Vec<u32> = std::iter::once(nix::unistd::getgid().as_raw())
        .chain(
            nix::unistd::getgroups()
                .unwrap_or_default()
                .into_iter()
                .map(|gid| gid.as_raw()),
        )
        .collect();
    let uid = nix::unistd::getuid().as_raw();
    let mut found = Vec::new();
    let mut seen = 0usize;
    let in_covered = |path: &Path| covers.dirs.iter().any(|dir| path.starts_with(dir));
    let mut roots = roots.iter().filter(|root| !in_covered(root));
    while let Some(root) = roots.next() {
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > budget {
                    let unscanned: Vec<PathBuf> = std::iter::once(dir)
                        .chain(stack)
                        .chain(roots.cloned())
                        .collect();
                    let count = unscanned.len();
                    found.extend(unscanned);
                    return RootOnly {
                        paths: found,
                        unscanned: count,
                    };
                }
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let path = entry.path();
                if in_covered(&path) {
                    continue;
                }
                if only_we_may(&meta, uid, &groups) {
                    found.push(path);
                } else if meta.is_dir() && may_enter(&path, &meta, uid, &groups) {
                    stack.push(path);
                }
            }
        }
    }
    RootOnly {
        paths: found,
        unscanned: 0,
    }
}

/// Whether a command of `uid` (in `groups`), which holds no capability, may enter the folder at
/// `path`: by its mode, or by an access ACL (which the mode does not show; one that cannot be
/// read counts as granting). A folder it may not enter hides everything beneath it, so the scan
/// neither spends its budget there nor covers anything inside (a cover would have to be mounted
/// through it, which the command's namespace cannot do): a database cluster's folders (0700, its
/// server's user) hold tens of thousands of files.
fn may_enter(path: &Path, meta: &std::fs::Metadata, uid: u32, groups: &[u32]) -> bool {
    let class = our_class(meta, uid, groups).unwrap_or(meta.mode() & 0o7);
    if class & 0o1 != 0 {
        return true;
    }
    let mut none: [u8; 0] = [];
    match rustix::fs::lgetxattr(path, "system.posix_acl_access", &mut none) {
        Ok(_) => true,
        Err(error) => error != rustix::io::Errno::NODATA && error != rustix::io::Errno::NOTSUP,
    }
}

/// The rights `meta`'s mode gives the user `uid` (in `groups`) as its owner or through its
/// group; `None` when only the rights of others apply to it.
fn our_class(meta: &std::fs::Metadata, uid: u32, groups: &[u32]) -> Option<u32> {
    let mode = meta.mode();
    if meta.uid() == uid {
        Some((mode >> 6) & 0o7)
    } else if groups.contains(&meta.gid()) {
        Some((mode >> 3) & 0o7)
    } else {
        None
    }
}

/// Whether `meta` gives the user `uid` (in `groups`) a right others lack: reading a file,
/// connecting to a socket, listing or entering a folder. Links are never followed.
fn only_we_may(meta: &std::fs::Metadata, uid: u32, groups: &[u32]) -> bool {
    let mode = meta.mode();
    let Some(ours) = our_class(meta, uid, groups) else {
        return false;
    };
    let others = mode & 0o7;
    let rights = match meta.file_type() {
        kind if kind.is_dir() => 0o5,
        kind if kind.is_file() => 0o4,
        kind if kind.is_socket() => 0o2,
        _ => return false,
    };
    ours & !others & rights != 0
}

/// Paths of the pathname unix sockets bound in the host's network namespace.
///
/// `/proc/net/unix` is opened once per process and read from its start at every call
/// (`pread` at offset 0 starts the kernel's walk of the socket table over, so each call
/// lists the sockets bound at that moment, as a fresh open would). The open, the size probe and
/// the close were a third of this function's time: resolving `/proc/net` through
/// `/proc/self/net` and setting up the file cost about half as much as the walk. The
/// descriptor is close-on-exec (and closed by every relay, init and command like any other it
/// does not pass on) and names the network namespace clawsmith runs in, which it never leaves
/// (only the processes of a command's tree enter other namespaces).
fn host_unix_sockets() -> Vec<PathBuf> {
    static TABLE: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
    let Some(file) = TABLE
        .get_or_init(|| std::fs::File::open("/proc/net/unix").ok())
        .as_ref()
    else {
        return Vec::new();
    };
    let Some(table) = read_from_start(file) else {
        return Vec::new();
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// The whole text of a `/proc` file, read from offset 0 up to the empty read that ends it
/// (a `/proc` file reports no size, and one read returns at most a page of it). `None` on an
/// error or text that is not UTF-8.
fn read_from_start(file: &std::fs::File) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let mut table = vec![0u8; 16 * 1024];
    let mut length = 0;
    loop {
        if length == table.len() {
            table.resize(table.len() * 2, 0);
        }
        match file.read_at(&mut table[length..], length as u64) {
            Ok(0) => break,
            Ok(read) => length += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    table.truncate(length);
    String::from_utf8(table).ok()
}

/// The host's view with Landlock and seccomp only: what `BestEffort` falls back to without user
/// namespaces. Reads stay open, the host's `/tmp`, `/dev/shm` and devices stay visible.
fn host_view(
    config: &SandboxConfig,
    target: Target<'_>,
    setup: &mut ChildSetup,
) -> Result<SandboxReport, Unavailable> {
    let abi = kernel_walls(config.kernel_support())?;
    let mut writable =
        landlock_writable(config, &writable_roots(config, target.workspace)).to_vec();
    writable.extend(target.host_temp_dir.map(Path::to_path_buf));
    writable.extend(
        HOST_VIEW_DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists()),
    );
    setup.landlock = Some(landlock_ruleset(LandlockRules {
        writable,
        handle_network: !config.network_allowed,
    })?);
    setup.seccomp = vec![command_filter(
        !config.network_allowed,
        !config.workspace_writable,
    )?];
    Ok(SandboxReport {
        policy: config.policy,
        confined: true,
        filesystem: format!(
            "landlock v{abi} in the host's view (no user namespaces: reads, /dev/shm and unix \
             sockets are not confined; metadata outside can change)"
        ),
        network: if config.network_allowed {
            "allowed".to_owned()
        } else if config.egress.is_some() {
            "blocked (the network allowlist needs a network namespace, which this kernel does \
             not give: nothing is reachable)"
                .to_owned()
        } else if abi >= 4 {
            "blocked (landlock tcp, seccomp)".to_owned()
        } else {
            "blocked (seccomp)".to_owned()
        },
        protected: "not enforced (no private mount namespace)".to_owned(),
        no_new_privs: true,
        unconfined_reason: None,
    })
}

/// The ruleset `rules` describe, created (kept with them: see [`Landlock`]).
fn landlock_ruleset(rules: LandlockRules) -> Result<Landlock, Unavailable> {
    let landlock_error = |e: landlock::RulesetError| Unavailable(format!("Landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(landlock_error)?;
    if rules.handle_network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(landlock_error)?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(landlock_error)?;
    // Reads and execution everywhere, but no device ioctls outside the writable roots and /dev.
    let created = ruleset
        .create()
        .map_err(landlock_error)?
        .no_new_privs(false)
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(TARGET_ABI)))
        .map_err(landlock_error)?
        .add_rules(path_beneath_rules(
            &rules.writable,
            AccessFs::from_all(TARGET_ABI),
        ))
        .map_err(landlock_error)?;
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    let ruleset =
        fd.ok_or_else(|| Unavailable("Landlock refused to create a ruleset".to_owned()))?;
    Ok(Landlock { ruleset, rules })
}

fn seccomp_error(e: seccompiler::BackendError) -> Unavailable {
    Unavailable(format!("seccomp: {e}"))
}

fn condition(
    index: u8,
    length: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompRule, Unavailable> {
    SeccompRule::new(vec![
        SeccompCondition::new(index, length, op, value).map_err(seccomp_error)?,
    ])
    .map_err(seccomp_error)
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
) -> Result<seccompiler::BpfProgram, Unavailable> {
    let arch = std::env::consts::ARCH.try_into().map_err(seccomp_error)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(seccomp_error)?;
    filter.try_into().map_err(seccomp_error)
}

/// One program that decides as the given programs installed one after the other would, when
/// each rules on system calls the others allow (true of this module's filters: each names its
/// own calls and allows the rest): every program but the last jumps to the start of the next
/// where it would allow. The kernel then prepares and compiles one filter per command instead of
/// one per program (`seccomp(2)`'s JIT was 6.5% of a spawn's processor time).
fn chain(programs: &[seccompiler::BpfProgram]) -> seccompiler::BpfProgram {
    const BPF_RET_K: u16 = 0x06;
    const BPF_JMP_JA: u16 = 0x05;
    const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
    let mut chained = Vec::with_capacity(programs.iter().map(Vec::len).sum());
    for (index, program) in programs.iter().enumerate() {
        let last = index + 1 == programs.len();
        for (pc, instruction) in program.iter().enumerate() {
            let mut instruction = instruction.clone();
            if !last && instruction.code == BPF_RET_K && instruction.k == SECCOMP_RET_ALLOW {
                // `JA k` continues at pc + 1 + k: the first instruction of the next program.
                instruction.code = BPF_JMP_JA;
                instruction.jt = 0;
                instruction.jf = 0;
                instruction.k = (program.len() - pc - 1) as u32;
            }
            chained.push(instruction);
        }
    }
    chained
}

/// The one seccomp program a command installs: the base and `clone3` filters, plus the
/// host-view fallback's network and metadata filters when asked, chained, put behind a
/// dispatch on the system call number ([`dispatched`]) and [`compacted`]; built once per
/// process for each of the four combinations.
fn command_filter(network: bool, metadata: bool) -> Result<seccompiler::BpfProgram, Unavailable> {
    static PROGRAMS: [std::sync::OnceLock<Result<seccompiler::BpfProgram, Unavailable>>; 4] =
        [const { std::sync::OnceLock::new() }; 4];
    PROGRAMS[usize::from(network) | usize::from(metadata) << 1]
        .get_or_init(|| {
            let mut filters = vec![base_filter()?, clone3_filter()?];
            if network {
                filters.push(network_filter()?);
            }
            if metadata {
                filters.push(metadata_filter()?);
            }
            Ok(compacted(&without_x32(dispatched(&chain(&filters)))))
        })
        .clone()
}

/// `program` with its jumps threaded and what no path reaches dropped: a jump that lands on an
/// unconditional jump goes where that one leads; one that lands on a `RET` goes to the
/// program's last `RET` of the same value (classic BPF jumps only forward, so that one lies
/// beyond every jump to its value); an unconditional jump to a `RET` becomes that `RET`; a
/// test that cannot fail (a load masked to zero and compared with zero, before a load or a
/// `RET`) becomes a jump. Then the instructions no path from the start reaches are left out and
/// the offsets recomputed, in the same order. It decides exactly as `program` does, on every
/// input.
///
/// Why: seccompiler spends five instructions on a call refused outright (a test, two jumps, a
/// refusal and an allow of its own) and two jumps between rules; the kernel copies, checks,
/// converts and compiles every instruction at each attach (`bpf_prog_create_from_user` was
/// 80% of `seccomp(2)`'s time in a spawn's profile, ~8% of the command tree's). Returns
/// `program` as it is if it holds an instruction this pass does not know or a jump that would
/// not fit.
fn compacted(program: &[seccompiler::sock_filter]) -> seccompiler::BpfProgram {
    #[derive(Clone, Copy)]
    enum Next {
        /// Falls through to the next instruction (a load or an `AND`).
        Through,
        Jump(usize),
        Branch(usize, usize),
        Return,
    }
    let length = program.len();
    let mut next = Vec::with_capacity(length);
    for (pc, instruction) in program.iter().enumerate() {
        let after = pc + 1;
        let step = match instruction.code {
            bpf::LD_W_ABS | bpf::ALU_AND_K => Next::Through,
            bpf::JA => Next::Jump(after + instruction.k as usize),
            bpf::JEQ_K | bpf::JGT_K | bpf::JGE_K | bpf::JSET_K => Next::Branch(
                after + usize::from(instruction.jt),
                after + usize::from(instruction.jf),
            ),
            bpf::RET_K => Next::Return,
            _ => return program.to_vec(),
        };
        let lands_inside = match step {
            Next::Through => after < length,
            Next::Jump(to) => to < length,
            Next::Branch(taken, not_taken) => taken < length && not_taken < length,
            Next::Return => true,
        };
        if !lands_inside {
            return program.to_vec();
        }
        next.push(step);
    }
    // A load masked to nothing and tested against zero (seccompiler's test of the upper half of
    // a 64-bit argument under a 32-bit mask) always takes its branch: when what runs there
    // does not read the accumulator (a load or a `RET`), the load jumps there at once. The
    // `AND` and the test stay for any other jump that lands on them.
    let mut instructions = program.to_vec();
    for pc in 0..length.saturating_sub(2) {
        let (and, test) = (&program[pc + 1], &program[pc + 2]);
        let Next::Branch(mut taken, _) = next[pc + 2] else {
            continue;
        };
        while let Next::Jump(further) = next[taken] {
            taken = further;
        }
        if program[pc].code == bpf::LD_W_ABS
            && and.code == bpf::ALU_AND_K
            && and.k == 0
            && test.code == bpf::JEQ_K
            && test.k == 0
            && matches!(program[taken].code, bpf::LD_W_ABS | bpf::RET_K)
        {
            next[pc] = Next::Jump(taken);
            instructions[pc] = seccompiler::sock_filter {
                code: bpf::JA,
                jt: 0,
                jf: 0,
                k: 0,
            };
        }
    }
    let last_return = |k: u32| {
        (0..length)
            .rev()
            .find(|pc| program[*pc].code == bpf::RET_K && program[*pc].k == k)
    };
    // Where a jump to `to` ends up: past unconditional jumps, at the last `RET` of its value.
    let original = next.clone();
    let resolve = |mut to: usize| loop {
        match original[to] {
            Next::Jump(further) => to = further,
            Next::Return => return last_return(program[to].k).unwrap_or(to),
            Next::Through | Next::Branch(..) => return to,
        }
    };
    for pc in 0..length {
        next[pc] = match next[pc] {
            Next::Jump(to) => {
                let to = resolve(to);
                if let Next::Return = original[to] {
                    instructions[pc] = program[to].clone();
                    Next::Return
                } else {
                    Next::Jump(to)
                }
            }
            Next::Branch(taken, not_taken) => Next::Branch(resolve(taken), resolve(not_taken)),
            other => other,
        };
    }
    let mut reached = vec![false; length];
    let mut pending = vec![0usize];
    while let Some(pc) = pending.pop() {
        if std::mem::replace(&mut reached[pc], true) {
            continue;
        }
        match next[pc] {
            Next::Through => pending.push(pc + 1),
            Next::Jump(to) => pending.push(to),
            Next::Branch(taken, not_taken) => pending.extend([taken, not_taken]),
            Next::Return => {}
        }
    }
    let mut new_index = vec![usize::MAX; length];
    let mut count = 0;
    for pc in 0..length {
        if reached[pc] {
            new_index[pc] = count;
            count += 1;
        }
    }
    let mut out = Vec::with_capacity(count);
    for pc in (0..length).filter(|pc| reached[*pc]) {
        let mut instruction = instructions[pc].clone();
        let offset = |to: usize| new_index[to] - (new_index[pc] + 1);
        match next[pc] {
            Next::Jump(to) => instruction.k = offset(to) as u32,
            Next::Branch(taken, not_taken) => {
                let (Ok(jt), Ok(jf)) =
                    (u8::try_from(offset(taken)), u8::try_from(offset(not_taken)))
                else {
                    return program.to_vec();
                };
                instruction.jt = jt;
                instruction.jf = jf;
            }
            Next::Through | Next::Return => {}
        }
        out.push(instruction);
    }
    out
}

/// The bit that marks an x32 system call number on x86_64 (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `program` behind a refusal (`ENOSYS`) of every x32 system call. x32 calls arrive with the
/// x86_64 audit architecture and their number plus [`X32_SYSCALL_BIT`], so the filters' rules on
/// native numbers (`mount`, `unshare`, the `ioctl` of `TIOCSTI`, …) would not see them: on a
/// kernel built with x32 enabled, `syscall(X32_SYSCALL_BIT | SYS_unshare, …)` would pass. No
/// command the sandbox runs is an x32 binary; a kernel without x32 answers `ENOSYS` too.
fn without_x32(program: seccompiler::BpfProgram) -> seccompiler::BpfProgram {
    if !cfg!(target_arch = "x86_64") {
        return program;
    }
    let Some(arch) = native_audit_arch() else {
        return program;
    };
    let instruction =
        |code: u16, jt: u8, jf: u8, k: u32| seccompiler::sock_filter { code, jt, jf, k };
    let mut guarded = vec![
        instruction(bpf::LD_W_ABS, 0, 0, bpf::ARCH),
        // Another architecture: the program decides (it refuses foreign architectures).
        instruction(bpf::JEQ_K, 0, 3, arch),
        instruction(bpf::LD_W_ABS, 0, 0, bpf::NR),
        instruction(bpf::JSET_K, 0, 1, X32_SYSCALL_BIT),
        instruction(bpf::RET_K, 0, 0, 0x0005_0000 | libc::ENOSYS as u32),
    ];
    guarded.extend(program);
    guarded
}

/// System call numbers below this are dispatched by number ([`dispatched`]); the rest (none on
/// x86_64 or aarch64, and x32's) go through the whole program.
const DISPATCH_LIMIT: u32 = 1024;

/// Classic BPF opcodes the dispatch emits or reads.
mod bpf {
    pub(super) const LD_W_ABS: u16 = 0x20;
    pub(super) const ALU_AND_K: u16 = 0x54;
    pub(super) const JA: u16 = 0x05;
    pub(super) const JEQ_K: u16 = 0x15;
    pub(super) const JGT_K: u16 = 0x25;
    pub(super) const JGE_K: u16 = 0x35;
    pub(super) const JSET_K: u16 = 0x45;
    pub(super) const RET_K: u16 = 0x06;
    pub(super) const RET_ALLOW: u32 = 0x7fff_0000;
    /// Offsets in `struct seccomp_data`.
    pub(super) const NR: u32 = 0;
    pub(super) const ARCH: u32 = 4;
}

/// `AUDIT_ARCH_*` of this build's architecture, as the filters compare it.
fn native_audit_arch() -> Option<u32> {
    if cfg!(target_arch = "x86_64") {
        Some(0xc000_003e)
    } else if cfg!(target_arch = "aarch64") {
        Some(0xc000_00b7)
    } else {
        None
    }
}

/// Whether `program` allows system call `nr` of `arch` whatever its arguments: the question the
/// kernel asks of a new filter for every system call number (`seccomp_is_const_allow`, to fill
/// its per-filter cache of always-allowed calls), answered the same way — run the program with
/// only the number and architecture known, and give up at the first load of anything else.
fn allows_whatever_the_arguments(program: &[seccompiler::sock_filter], nr: u32, arch: u32) -> bool {
    let (mut a, mut pc) = (0u32, 0usize);
    while let Some(instruction) = program.get(pc) {
        pc += 1;
        let k = instruction.k;
        match instruction.code {
            bpf::LD_W_ABS => match k {
                bpf::NR => a = nr,
                bpf::ARCH => a = arch,
                _ => return false,
            },
            bpf::ALU_AND_K => a &= k,
            bpf::JA => pc += k as usize,
            bpf::RET_K => return k == bpf::RET_ALLOW,
            code @ (bpf::JEQ_K | bpf::JGT_K | bpf::JGE_K | bpf::JSET_K) => {
                let taken = match code {
                    bpf::JEQ_K => a == k,
                    bpf::JGT_K => a > k,
                    bpf::JGE_K => a >= k,
                    _ => a & k != 0,
                };
                pc += usize::from(if taken {
                    instruction.jt
                } else {
                    instruction.jf
                });
            }
            _ => return false,
        }
    }
    false
}

/// `program` behind a binary search on the system call number: a call of this architecture that
/// `program` allows whatever its arguments is allowed at once, every other input (the calls it
/// rules on, another architecture, a number from [`DISPATCH_LIMIT`] up) runs `program` from its
/// start. It decides exactly as `program` does.
///
/// Why: installing a filter, the kernel runs it once per system call number and architecture
/// to learn which calls it always allows (`seccomp_cache_prepare`, under the task's signal
/// lock). seccompiler's programs test the number against each ruled call in turn, so each of
/// the ~900 runs walked the whole list: half of `seccomp(2)`'s time in a spawn's profile. Behind
/// the dispatch each run takes a handful of instructions.
fn dispatched(program: &seccompiler::BpfProgram) -> seccompiler::BpfProgram {
    let Some(arch) = native_audit_arch() else {
        return program.clone();
    };
    let ruled: Vec<u32> = (0..DISPATCH_LIMIT)
        .filter(|nr| !allows_whatever_the_arguments(program, *nr, arch))
        .collect();
    #[derive(Clone, Copy)]
    enum To {
        Next,
        Program,
        Allow,
        At(usize),
    }
    struct Step {
        code: u16,
        k: u32,
        jt: To,
        jf: To,
    }
    let step = |code, k, jt, jf| Step { code, k, jt, jf };
    fn search(ruled: &[u32], out: &mut Vec<Step>) {
        if ruled.len() <= 4 {
            for nr in ruled {
                out.push(Step {
                    code: bpf::JEQ_K,
                    k: *nr,
                    jt: To::Program,
                    jf: To::Next,
                });
            }
            out.push(Step {
                code: bpf::JA,
                k: 0,
                jt: To::Allow,
                jf: To::Allow,
            });
            return;
        }
        let middle = ruled.len() / 2;
        let split = out.len();
        out.push(Step {
            code: bpf::JGE_K,
            k: ruled[middle],
            jt: To::Next,
            jf: To::Next,
        });
        search(&ruled[middle..], out);
        out[split].jf = To::At(out.len());
        search(&ruled[..middle], out);
    }
    let mut steps = vec![
        step(bpf::LD_W_ABS, bpf::ARCH, To::Next, To::Next),
        step(bpf::JEQ_K, arch, To::Next, To::Program),
        step(bpf::LD_W_ABS, bpf::NR, To::Next, To::Next),
        step(bpf::JGE_K, DISPATCH_LIMIT, To::Program, To::Next),
    ];
    search(&ruled, &mut steps);
    let allow = steps.len();
    steps.push(step(bpf::RET_K, bpf::RET_ALLOW, To::Next, To::Next));
    let start = steps.len();
    let mut out = Vec::with_capacity(start + program.len());
    for (pc, step) in steps.iter().enumerate() {
        let offset = |to: To| {
            let target = match to {
                To::Next => pc + 1,
                To::Program => start,
                To::Allow => allow,
                To::At(index) => index,
            };
            target - (pc + 1)
        };
        let (k, jt, jf) = match step.code {
            bpf::JA => (offset(step.jt) as u32, 0, 0),
            bpf::JEQ_K | bpf::JGE_K => {
                let (Ok(jt), Ok(jf)) =
                    (u8::try_from(offset(step.jt)), u8::try_from(offset(step.jf)))
                else {
                    // Too many ruled calls for short jumps: the plain program decides as well.
                    return program.clone();
                };
                (step.k, jt, jf)
            }
            _ => (step.k, 0, 0),
        };
        out.push(seccompiler::sock_filter {
            code: step.code,
            jt,
            jf,
            k,
        });
    }
    out.extend(program.iter().cloned());
    out
}

/// The `clone` flags that make a namespace: a command may set none of them.
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// What no command may do, whatever the view (`EPERM`): push keystrokes into a terminal
/// (`TIOCSTI`, `TIOCLINUX`), create device nodes, use the kernel keyring, change mounts, make or
/// join namespaces, open an `io_uring` (which would run calls behind this filter's back), load
/// BPF programs, or use `userfaultfd` (a staple of kernel exploits).
fn base_filter() -> Result<seccompiler::BpfProgram, Unavailable> {
    static FILTER: std::sync::OnceLock<Result<seccompiler::BpfProgram, Unavailable>> =
        std::sync::OnceLock::new();
    FILTER
        .get_or_init(|| {
            use SeccompCmpArgLen::Dword;
            let device = |index: u8| -> Result<Vec<SeccompRule>, Unavailable> {
                Ok(vec![
                    condition(
                        index,
                        Dword,
                        SeccompCmpOp::MaskedEq(libc::S_IFMT as u64),
                        libc::S_IFCHR as u64,
                    )?,
                    condition(
                        index,
                        Dword,
                        SeccompCmpOp::MaskedEq(libc::S_IFMT as u64),
                        libc::S_IFBLK as u64,
                    )?,
                ])
            };
            let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
            rules.insert(
                libc::SYS_ioctl,
                vec![
                    condition(1, Dword, SeccompCmpOp::Eq, libc::TIOCSTI)?,
                    condition(1, Dword, SeccompCmpOp::Eq, libc::TIOCLINUX)?,
                ],
            );
            rules.insert(libc::SYS_mknod, device(1)?);
            rules.insert(libc::SYS_mknodat, device(2)?);
            // Any namespace flag set: a rule per flag (rules of one call are alternatives).
            let mut clone_rules = Vec::new();
            for flag in NAMESPACE_FLAGS {
                clone_rules.push(condition(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(flag as u64),
                    flag as u64,
                )?);
            }
            rules.insert(libc::SYS_clone, clone_rules);
            for call in [
                libc::SYS_keyctl,
                libc::SYS_add_key,
                libc::SYS_request_key,
                libc::SYS_mount,
                libc::SYS_umount2,
                libc::SYS_pivot_root,
                libc::SYS_move_mount,
                libc::SYS_open_tree,
                libc::SYS_fsopen,
                libc::SYS_fsconfig,
                libc::SYS_fsmount,
                libc::SYS_fspick,
                libc::SYS_mount_setattr,
                libc::SYS_unshare,
                libc::SYS_setns,
                libc::SYS_io_uring_setup,
                libc::SYS_bpf,
                libc::SYS_userfaultfd,
            ] {
                rules.insert(call, Vec::new());
            }
            compile(rules, libc::EPERM)
        })
        .clone()
}

/// `clone3` passes its flags in memory a filter cannot read: it fails with `ENOSYS`, and libc
/// falls back to `clone`, whose flags the base filter checks.
fn clone3_filter() -> Result<seccompiler::BpfProgram, Unavailable> {
    static FILTER: std::sync::OnceLock<Result<seccompiler::BpfProgram, Unavailable>> =
        std::sync::OnceLock::new();
    FILTER
        .get_or_init(|| compile([(libc::SYS_clone3, Vec::new())].into(), libc::ENOSYS))
        .clone()
}

/// seccomp: `socket`/`socketpair` with a domain other than `AF_UNIX` fail with `EACCES` (the
/// host-view fallback's network wall; the built view has a network namespace instead).
fn network_filter() -> Result<seccompiler::BpfProgram, Unavailable> {
    static FILTER: std::sync::OnceLock<Result<seccompiler::BpfProgram, Unavailable>> =
        std::sync::OnceLock::new();
    FILTER
        .get_or_init(|| {
            let not_unix = || -> Result<Vec<SeccompRule>, Unavailable> {
                Ok(vec![condition(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    libc::AF_UNIX as u64,
                )?])
            };
            let rules: BTreeMap<i64, Vec<SeccompRule>> = [
                (libc::SYS_socket, not_unix()?),
                (libc::SYS_socketpair, not_unix()?),
            ]
            .into_iter()
            .collect();
            compile(rules, libc::EACCES)
        })
        .clone()
}

/// The host-view fallback with a read-only workspace: Landlock does not govern metadata (modes,
/// owners, times, extended attributes), so those calls are refused everywhere — a process that
/// may not write the workspace has no business changing metadata anywhere.
fn metadata_filter() -> Result<seccompiler::BpfProgram, Unavailable> {
    static FILTER: std::sync::OnceLock<Result<seccompiler::BpfProgram, Unavailable>> =
        std::sync::OnceLock::new();
    FILTER
        .get_or_init(|| {
            let rules: BTreeMap<i64, Vec<SeccompRule>> = [
                libc::SYS_chmod,
                libc::SYS_fchmod,
                libc::SYS_fchmodat,
                libc::SYS_fchmodat2,
                libc::SYS_chown,
                libc::SYS_fchown,
                libc::SYS_lchown,
                libc::SYS_fchownat,
                libc::SYS_utime,
                libc::SYS_utimes,
                libc::SYS_utimensat,
                libc::SYS_futimesat,
                libc::SYS_setxattr,
                libc::SYS_lsetxattr,
                libc::SYS_fsetxattr,
                libc::SYS_removexattr,
                libc::SYS_lremovexattr,
                libc::SYS_fremovexattr,
            ]
            .into_iter()
            .map(|call| (call, Vec::new()))
            .collect();
            compile(rules, libc::EPERM)
        })
        .clone()
}

/// The machine's memory in bytes (`MemTotal`), read once.
fn machine_memory() -> Option<u64> {
    static MEMORY: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *MEMORY.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    })
}

/// The configured limits, clamped to the hard limits this process has (the child inherits
/// them and cannot raise them); the address space also to the machine's memory.
fn rlimits(limits: &ResourceLimits) -> Vec<(Resource, u64)> {
    let address_space = limits
        .address_space_bytes
        .map(|bytes| machine_memory().map_or(bytes, |memory| bytes.min(memory)));
    let wanted = [
        (Resource::RLIMIT_CORE, limits.core_file_bytes),
        (Resource::RLIMIT_FSIZE, limits.file_size_bytes),
        (Resource::RLIMIT_NOFILE, limits.open_files),
        (Resource::RLIMIT_CPU, limits.cpu_seconds),
        (Resource::RLIMIT_AS, address_space),
        (Resource::RLIMIT_NPROC, limits.processes),
    ];
    wanted
        .into_iter()
        .filter_map(|(resource, value)| {
            let value = value?;
            let hard = nix::sys::resource::getrlimit(resource)
                .map(|(_, hard)| hard)
                .unwrap_or(u64::MAX);
            Some((resource, value.min(hard)))
        })
        .collect()
}

/// `(st_dev, st_ino)` of a path, following symlinks.
pub(crate) fn identity_of(path: &Path) -> std::io::Result<(u64, u64)> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root-only scan fails closed: whatever its budget, every file only its owner may read
    /// under the scanned roots is covered — found by mode, or inside a folder the scan did not
    /// finish — and a cut scan says how many folders it covered unscanned. Covered folders
    /// (the home, runtime folders) are neither entered nor listed.
    #[test]
    fn a_root_only_scan_cut_anywhere_still_covers_every_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        let private = |path: &Path| {
            std::fs::write(path, "secret").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        };
        let mut secrets = Vec::new();
        for root in ["first", "second", "third"] {
            for sub in ["a", "a/b", "c"] {
                let folder = top.join(root).join(sub);
                std::fs::create_dir_all(&folder).unwrap();
                for n in 0..3 {
                    std::fs::write(folder.join(format!("public{n}")), "").unwrap();
                }
                let secret = folder.join("key");
                private(&secret);
                secrets.push(secret);
            }
        }
        // A folder others may not enter is covered whole, not entered.
        let closed = top.join("second/closed");
        std::fs::create_dir(&closed).unwrap();
        private(&closed.join("inner"));
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        secrets.push(closed.join("inner"));
        let home = top.join("third/home");
        std::fs::create_dir(&home).unwrap();
        private(&home.join("token"));
        let covers = Covers {
            dirs: vec![home.clone()],
            allowed: Vec::new(),
        };
        let roots: Vec<PathBuf> = ["first", "second", "third"]
            .iter()
            .map(|root| top.join(root))
            .collect();
        let whole = scan_root_only(&roots, &covers, usize::MAX);
        assert_eq!(whole.unscanned, 0);
        let mut found = whole.paths.clone();
        found.sort();
        let mut expected = secrets.clone();
        expected.retain(|secret| *secret != closed.join("inner"));
        expected.push(closed.clone());
        expected.sort();
        assert_eq!(found, expected, "found by mode, the closed folder whole");
        assert!(!found.iter().any(|path| path.starts_with(&home)));
        for budget in 0..60 {
            let scan = scan_root_only(&roots, &covers, budget);
            for secret in &secrets {
                assert!(
                    scan.paths.iter().any(|path| secret.starts_with(path)),
                    "budget {budget}: {} is in sight (covered: {:?})",
                    secret.display(),
                    scan.paths
                );
            }
            assert_eq!(scan.unscanned > 0, budget < 47, "budget {budget}");
            assert!(!scan.paths.iter().any(|path| path.starts_with(&home)));
        }
    }

    /// A folder a command could not enter (another user's, 0700) is neither entered nor covered,
    /// however much it holds: the scan keeps its budget for what a command can reach. One whose
    /// access ACL lets the command in is entered like an open one. (Root only: the scan runs
    /// only as root, and giving a folder to another user takes root.)
    #[test]
    fn a_folder_the_command_cannot_enter_costs_the_root_only_scan_nothing() {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::getuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("root");
        std::fs::create_dir(&top).unwrap();
        let secret = top.join("key");
        std::fs::write(&secret, "secret").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let give = |folder: &Path, mode: u32| {
            std::fs::create_dir(folder).unwrap();
            for n in 0..100 {
                std::fs::write(folder.join(format!("f{n}")), "").unwrap();
            }
            let nobody = Some(nix::unistd::Uid::from_raw(65534));
            let nogroup = Some(nix::unistd::Gid::from_raw(65534));
            nix::unistd::chown(folder, nobody, nogroup).unwrap();
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let theirs = top.join("cluster");
        give(&theirs, 0o700);
        let covers = Covers {
            dirs: Vec::new(),
            allowed: Vec::new(),
        };
        let roots = vec![top.clone()];
        let scan = scan_root_only(&roots, &covers, 10);
        assert_eq!(scan.unscanned, 0, "{:?}", scan.paths);
        assert_eq!(scan.paths, vec![secret.clone()]);

        // Open to others, the same folder is entered (and the budget runs out inside it).
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o701)).unwrap();
        let scan = scan_root_only(&roots, &covers, 10);
        assert!(scan.unscanned > 0, "{:?}", scan.paths);

        // 0700 with an access ACL naming the command's user (root): entered too.
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        // version 2; user::rwx, user:0:r-x, group::---, mask::r-x, other::---
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (0x01u16, 7u16, u32::MAX),
            (0x02, 5, 0),
            (0x04, 0, u32::MAX),
            (0x10, 5, u32::MAX),
            (0x20, 0, u32::MAX),
        ] {
            acl.extend_from_slice(&tag.to_le_bytes());
            acl.extend_from_slice(&perm.to_le_bytes());
            acl.extend_from_slice(&id.to_le_bytes());
        }
        match rustix::fs::lsetxattr(
            &theirs,
            "system.posix_acl_access",
            &acl,
            rustix::fs::XattrFlags::empty(),
        ) {
            Ok(()) => {
                let scan = scan_root_only(&roots, &covers, 10);
                assert!(scan.unscanned > 0, "{:?}", scan.paths);
            }
            // A file system without ACLs cannot grant entry by one.
            Err(error) => assert_eq!(error, rustix::io::Errno::NOTSUP),
        }
    }

    /// The shared root-only scan is read back only when it was made for the same covered
    /// folders within the last minute and is root's alone (not a link, no rights for others):
    /// anything else is scanned again.
    #[test]
    fn a_kept_root_only_scan_is_trusted_only_fresh_private_and_for_the_same_folders() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(ROOT_ONLY_FILE);
        let dirs = vec![PathBuf::from("/root"), PathBuf::from("/run")];
        let found = RootOnly {
            paths: vec![
                PathBuf::from("/etc/shadow"),
                PathBuf::from("/var/lib/a b\nc"),
            ],
            unscanned: 2,
        };
        write_root_only(&file, &dirs, &found);
        if !nix::unistd::getuid().is_root() {
            // Only root's own file is trusted.
            assert!(read_root_only(&file, &dirs).is_none());
            return;
        }
        let (age, read) = read_root_only(&file, &dirs).expect("fresh, private, same folders");
        assert!(age < BASE_MAX_AGE);
        assert_eq!((read.paths, read.unscanned), (found.paths.clone(), 2));
        assert!(read_root_only(&file, &dirs[..1]).is_none(), "other folders");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_root_only(&file, &dirs).is_none(), "readable by others");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_root_only(&link, &dirs).is_none(), "a link");
        let written = |made: u64| {
            let text = format!("{ROOT_ONLY_MAGIC}\0{made}\x000\x002\0/root\0/run\0/etc/shadow\0");
            std::fs::write(&file, text).unwrap();
        };
        written(unix_ms().unwrap() - 1_000);
        assert_eq!(
            read_root_only(&file, &dirs).map(|(_, found)| found.paths),
            Some(vec![PathBuf::from("/etc/shadow")]),
            "the format as written by hand"
        );
        written(unix_ms().unwrap() - 61_000);
        assert!(
            read_root_only(&file, &dirs).is_none(),
            "older than a minute"
        );
        std::fs::write(&file, b"something else\0").unwrap();
        assert!(read_root_only(&file, &dirs).is_none(), "not a scan");
    }

    /// A covered path's real path from its directory's (resolved once per directory) is the
    /// path resolved whole, for every path `lstat` finds not to be a symlink — including those
    /// whose `lstat` followed one (a trailing `/` or `/.`) or that climb with `..`.
    #[test]
    fn a_covered_path_resolves_as_the_whole_path_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/f"), "").unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("d/e", root.join("relative")).unwrap();
        let rows = [
            "d/f",
            "d/e",
            "link/f",
            "link/e",
            "link/",
            "link/.",
            "relative/",
            "d//f",
            "d/./f",
            "d/e/../f",
            "link/e/..",
            "d/",
            "missing",
            "link/missing",
        ];
        let mut parents = RealParents::default();
        for _ in 0..2 {
            for row in rows {
                let path = PathBuf::from(format!("{}/{row}", root.display()));
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                assert!(!meta.file_type().is_symlink(), "{row}");
                assert_eq!(parents.real_path(&path), path.canonicalize().ok(), "{row}");
            }
        }
        assert_eq!(
            parents.real_path(Path::new("relative/f")),
            Path::new("relative/f").canonicalize().ok()
        );
    }

    /// The socket table is read through one descriptor kept for the process: every listing
    /// must still show the sockets bound at that moment — ones bound after the first read,
    /// not ones closed since — and all of a table longer than one read (a page) and than the
    /// first buffer.
    #[test]
    fn each_listing_of_host_sockets_is_the_table_of_that_moment() {
        let dir = tempfile::tempdir().unwrap();
        let late = dir.path().join("late.sock");
        let listed = |path: &Path| host_unix_sockets().iter().any(|p| p == path);
        assert!(!listed(&late));
        let listener = std::os::unix::net::UnixListener::bind(&late).unwrap();
        assert!(listed(&late), "a socket bound after the first read");
        drop(listener);
        assert!(!listed(&late), "a socket closed since the last read");

        // ~40 KB of table: several reads, and the buffer grown twice.
        let long = dir.path().join("d".repeat(60));
        std::fs::create_dir(&long).unwrap();
        let paths: Vec<PathBuf> = (0..300).map(|i| long.join(format!("{i}.sock"))).collect();
        let _listeners: Vec<_> = paths
            .iter()
            .map(|path| std::os::unix::net::UnixListener::bind(path).unwrap())
            .collect();
        let sockets = host_unix_sockets();
        let missing: Vec<_> = paths.iter().filter(|p| !sockets.contains(p)).collect();
        assert!(missing.is_empty(), "not listed: {missing:?}");
    }

    /// `struct seccomp_data` as the filter reads it: nr, arch, instruction pointer, six args.
    fn data(nr: i64, arch: u32, args: [u64; 6]) -> Vec<u32> {
        let mut words = vec![nr as u32, arch, 0, 0];
        for arg in args {
            words.push(arg as u32);
            words.push((arg >> 32) as u32);
        }
        words
    }

    /// A classic-BPF interpreter for the instructions seccompiler emits.
    fn run(program: &seccompiler::BpfProgram, data: &[u32]) -> u32 {
        run_counted(program, data).0
    }

    /// [`run`], and how many instructions it executed.
    fn run_counted(program: &seccompiler::BpfProgram, data: &[u32]) -> (u32, usize) {
        let (mut a, mut pc, mut executed) = (0u32, 0usize, 0usize);
        loop {
            let i = &program[pc];
            pc += 1;
            executed += 1;
            match i.code {
                0x20 => a = data[i.k as usize / 4], // LD W ABS
                0x54 => a &= i.k,                   // ALU AND K
                0x05 => pc += i.k as usize,         // JA
                0x06 => return (i.k, executed),     // RET K
                0x15 | 0x25 | 0x35 | 0x45 => {
                    let taken = match i.code {
                        0x15 => a == i.k,
                        0x25 => a > i.k,
                        0x35 => a >= i.k,
                        _ => a & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                code => panic!("instruction {code:#x} not interpreted"),
            }
        }
    }

    /// What the kernel answers with the programs installed one after the other: the action of
    /// highest precedence (the lowest as a signed action), the latest program's on a tie.
    fn stacked(programs: &[seccompiler::BpfProgram], data: &[u32]) -> u32 {
        let mut verdict = u32::MAX;
        for program in programs.iter().rev() {
            let ret = run(program, data);
            if verdict == u32::MAX
                || ((ret & 0xffff_0000) as i32) < ((verdict & 0xffff_0000) as i32)
            {
                verdict = ret;
            }
        }
        verdict
    }

    #[test]
    fn a_chained_program_decides_as_the_stacked_programs() {
        let programs = vec![
            base_filter().unwrap(),
            clone3_filter().unwrap(),
            network_filter().unwrap(),
            metadata_filter().unwrap(),
        ];
        let arch = if cfg!(target_arch = "x86_64") {
            0xc000_003e
        } else {
            0xc000_00b7
        };
        let chained = chain(&programs);
        let calls: Vec<(i64, [u64; 6])> = vec![
            (libc::SYS_read, [0; 6]),
            (libc::SYS_ioctl, [0, libc::TIOCSTI, 0, 0, 0, 0]),
            (libc::SYS_ioctl, [0, libc::TIOCLINUX, 0, 0, 0, 0]),
            (libc::SYS_ioctl, [0, libc::TIOCGWINSZ, 0, 0, 0, 0]),
            (libc::SYS_mknodat, [0, 0, u64::from(libc::S_IFCHR), 0, 0, 0]),
            (libc::SYS_mknodat, [0, 0, u64::from(libc::S_IFIFO), 0, 0, 0]),
            (libc::SYS_clone, [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0]),
            (libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            (libc::SYS_clone3, [0; 6]),
            (libc::SYS_socket, [libc::AF_INET as u64, 0, 0, 0, 0, 0]),
            (libc::SYS_socket, [libc::AF_UNIX as u64, 0, 0, 0, 0, 0]),
            (libc::SYS_fchmodat, [0; 6]),
            (libc::SYS_unshare, [0; 6]),
            (libc::SYS_bpf, [0; 6]),
            (libc::SYS_openat, [0; 6]),
        ];
        let mut refused = 0;
        for (nr, args) in calls {
            let words = data(nr, arch, args);
            let expected = stacked(&programs, &words);
            assert_eq!(run(&chained, &words), expected, "system call {nr} {args:?}");
            refused += usize::from(expected != 0x7fff_0000);
        }
        assert_eq!(refused, 9, "the table exercises each program's refusals");
        // Another architecture is killed by every program, and by the chain.
        let foreign = data(libc::SYS_read, 0x4000_0003, [0; 6]);
        assert_eq!(run(&chained, &foreign), stacked(&programs, &foreign));
        assert_ne!(run(&chained, &foreign), 0x7fff_0000);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_system_calls_are_refused_whatever_the_call() {
        let arch = native_audit_arch().unwrap();
        let enosys = 0x0005_0000 | libc::ENOSYS as u32;
        for (network, metadata) in [(false, false), (true, false), (false, true), (true, true)] {
            let program = command_filter(network, metadata).unwrap();
            for nr in [
                libc::SYS_unshare,
                libc::SYS_mount,
                libc::SYS_setns,
                libc::SYS_bpf,
                libc::SYS_io_uring_setup,
                libc::SYS_getpid,
                // x32's own numbers for calls with compat layouts (ioctl is 514).
                514,
                545,
            ] {
                let words = data(i64::from(X32_SYSCALL_BIT) | nr, arch, [0; 6]);
                assert_eq!(run(&program, &words), enosys, "x32 call {nr}");
            }
            // The native calls are decided as before.
            assert_eq!(
                run(&program, &data(libc::SYS_getpid, arch, [0; 6])),
                0x7fff_0000
            );
            assert_eq!(
                run(&program, &data(libc::SYS_unshare, arch, [0; 6])),
                0x0005_0000 | libc::EPERM as u32
            );
        }
    }

    /// Compaction keeps every path's verdict: the seccompiler programs alone (each rule's own
    /// `RET`s, the jumps between rules) on every number and argument set of the test below,
    /// and leaves a program with an instruction it does not know as it is.
    #[test]
    fn a_compacted_program_decides_as_the_program() {
        let arch = native_audit_arch().unwrap();
        // Rules whose upper-half test can fail (a mask or a value there): it must stay.
        let upper = |mask: u64, value: u64| {
            let rule = condition(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(mask),
                value,
            )
            .unwrap();
            compile([(libc::SYS_clone, vec![rule])].into(), libc::EPERM).unwrap()
        };
        for program in [
            base_filter().unwrap(),
            clone3_filter().unwrap(),
            network_filter().unwrap(),
            metadata_filter().unwrap(),
            upper(1 << 32, 1 << 32),
            upper(1 << 32, 0),
            upper(1, 1 << 32 | 1),
        ] {
            let compact = compacted(&program);
            assert!(compact.len() < program.len());
            // Every system call number of the native table and past it, and the same numbers
            // with the x32 bit set; under the native arch, i386, aarch64 and an unknown one.
            let numbers = (0..600).chain((0..600).map(|nr| nr | 0x4000_0000));
            for nr in numbers {
                for args in [
                    [0; 6],
                    [u64::MAX; 6],
                    [1 << 32, 0, 0, 0, 0, 0],
                    [1 << 32 | 1, 0, 0, 0, 0, 0],
                    [libc::CLONE_NEWPID as u64 | 1 << 33, 0, 0, 0, 0, 0],
                    [libc::CLONE_NEWPID as u64, libc::TIOCSTI, 0, 0, 0, 0],
                    [libc::AF_INET as u64, u64::from(libc::S_IFBLK), 0, 0, 0, 0],
                    [libc::AF_UNIX as u64, 0, u64::from(libc::S_IFCHR), 0, 0, 0],
                ] {
                    for call_arch in [arch, 0x4000_0003, 0xC000_00B7, 0] {
                        let words = data(nr, call_arch, args);
                        assert_eq!(run(&compact, &words), run(&program, &words), "{nr}");
                    }
                }
            }
        }
        // A test of a masked-out value against something else never passes: it must stay.
        let instruction =
            |code: u16, jt: u8, jf: u8, k: u32| seccompiler::sock_filter { code, jt, jf, k };
        let never = vec![
            instruction(bpf::LD_W_ABS, 0, 0, 0x14),
            instruction(bpf::ALU_AND_K, 0, 0, 0),
            instruction(bpf::JEQ_K, 0, 1, 1),
            instruction(bpf::RET_K, 0, 0, 0x0005_0001),
            instruction(bpf::RET_K, 0, 0, bpf::RET_ALLOW),
        ];
        // A test that cannot fail, before an instruction that reads what it left: it must stay.
        let reads_after = vec![
            instruction(bpf::LD_W_ABS, 0, 0, bpf::NR),
            instruction(bpf::LD_W_ABS, 0, 0, 0x14),
            instruction(bpf::ALU_AND_K, 0, 0, 0),
            instruction(bpf::JEQ_K, 0, 2, 0),
            instruction(bpf::JEQ_K, 0, 1, 0),
            instruction(bpf::RET_K, 0, 0, 0x0005_0001),
            instruction(bpf::RET_K, 0, 0, bpf::RET_ALLOW),
        ];
        for args in [[0; 6], [u64::MAX; 6], [1 << 32, 0, 0, 0, 0, 0]] {
            let words = data(libc::SYS_clone, arch, args);
            assert_eq!(run(&compacted(&never), &words), bpf::RET_ALLOW);
            assert_eq!(run(&compacted(&reads_after), &words), 0x0005_0001);
        }
        let mut unknown = base_filter().unwrap();
        unknown[3].code = 0x61; // LDX MEM: not one of the instructions the pass knows
        assert_eq!(compacted(&unknown), unknown);
    }

    #[test]
    fn the_dispatched_program_decides_as_the_chain_and_allows_other_calls_in_a_few_steps() {
        let arch = native_audit_arch().unwrap();
        let argument_sets: Vec<[u64; 6]> = vec![
            [0; 6],
            [u64::MAX; 6],
            [0, libc::TIOCSTI, 0, 0, 0, 0],
            [0, libc::TIOCLINUX, 0, 0, 0, 0],
            [
                0,
                u64::from(libc::S_IFCHR),
                u64::from(libc::S_IFBLK),
                0,
                0,
                0,
            ],
            [
                0,
                u64::from(libc::S_IFIFO),
                u64::from(libc::S_IFIFO),
                0,
                0,
                0,
            ],
            [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0],
            [
                libc::CLONE_NEWNET as u64 | libc::SIGCHLD as u64,
                0,
                0,
                0,
                0,
                0,
            ],
            [libc::AF_INET as u64, 0, 0, 0, 0, 0],
            [libc::AF_UNIX as u64, 0, 0, 0, 0, 0],
        ];
        let mut argument_sets = argument_sets;
        // Each namespace flag alone, with a thread's flags, and in the upper half of the word;
        // each rule's neighbours (the ioctl numbers around TIOCSTI, other file types).
        for flag in NAMESPACE_FLAGS {
            let flag = flag as u64;
            argument_sets.push([flag, 0, 0, 0, 0, 0]);
            argument_sets.push([flag | 0x3d0f00, 0, 0, 0, 0, 0]);
            argument_sets.push([flag << 32, 0, 0, 0, 0, 0]);
            argument_sets.push([!flag, 0, 0, 0, 0, 0]);
        }
        argument_sets.push([0x3d0f00 | libc::SIGCHLD as u64, 0, 0, 0, 0, 0]);
        for request in [
            libc::TIOCSTI - 1,
            libc::TIOCSTI + 1,
            libc::TIOCLINUX | 1 << 32,
        ] {
            argument_sets.push([0, request, 0, 0, 0, 0]);
        }
        for mode in [
            libc::S_IFREG,
            libc::S_IFSOCK,
            libc::S_IFDIR,
            libc::S_IFCHR | 0o666,
        ] {
            let mode = u64::from(mode);
            argument_sets.push([0, mode, mode, 0, 0, 0]);
            argument_sets.push([0, mode, u64::from(libc::S_IFCHR), 0, 0, 0]);
        }
        // Every number below the limit and past it, x32's numbers, both architectures.
        let numbers: Vec<i64> = (0..1100)
            .chain((0x4000_0000..0x4000_0000 + 600).step_by(7))
            .chain([i64::from(u32::MAX)])
            .collect();
        for (network, metadata) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut filters = vec![base_filter().unwrap(), clone3_filter().unwrap()];
            if network {
                filters.push(network_filter().unwrap());
            }
            if metadata {
                filters.push(metadata_filter().unwrap());
            }
            let plain = chain(&filters);
            let program = command_filter(network, metadata).unwrap();
            let uncompacted = without_x32(dispatched(&plain));
            assert!(uncompacted.len() > plain.len(), "the dispatch is in front");
            assert!(
                program.len() * 10 < uncompacted.len() * 7,
                "compacted: {} of {} instructions",
                program.len(),
                uncompacted.len()
            );
            let mut refused = 0;
            for call_arch in [arch, 0x4000_0003] {
                for nr in &numbers {
                    for args in &argument_sets {
                        let words = data(*nr, call_arch, *args);
                        let x32 = cfg!(target_arch = "x86_64")
                            && call_arch == arch
                            && (*nr as u32) & X32_SYSCALL_BIT != 0;
                        let expected = if x32 {
                            0x0005_0000 | libc::ENOSYS as u32
                        } else {
                            run(&plain, &words)
                        };
                        assert_eq!(
                            run(&program, &words),
                            expected,
                            "system call {nr} of {call_arch:#x} with {args:?}"
                        );
                        refused += usize::from(expected != 0x7fff_0000);
                    }
                }
            }
            assert!(refused > 0);
            // A call no filter rules on is allowed within a few instructions (the kernel's
            // per-number check walks as many; four of them are the x32 refusal in front), a
            // ruled one still reaches its rule.
            for nr in [
                libc::SYS_read,
                libc::SYS_openat,
                libc::SYS_execve,
                libc::SYS_exit_group,
            ] {
                let (verdict, executed) = run_counted(&program, &data(nr, arch, [0; 6]));
                assert_eq!(verdict, 0x7fff_0000);
                assert!(executed <= 20, "{nr}: {executed} instructions");
                assert!(allows_whatever_the_arguments(&program, nr as u32, arch));
            }
            assert!(!allows_whatever_the_arguments(
                &program,
                libc::SYS_mount as u32,
                arch
            ));
            assert_eq!(
                run(&program, &data(libc::SYS_mount, arch, [0; 6])),
                0x0005_0000 | libc::EPERM as u32
            );
        }
    }
}
