//! The platform sandbox (C3): turns a [`SandboxConfig`] and what the kernel offers into the
//! child's setup and a report of what is enforced.
//!
//! - **Writes**: Landlock handles every filesystem right; reads and execution are granted on
//!   `/`, writes only beneath the workspace, the private temp dir, a few device files
//!   (`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/tty`, `/dev/ptmx`, `/dev/pts`, `/dev/shm`) and
//!   the configured extra roots.
//! - **Protected paths inside a writable root** (`.git/hooks`, `.git/config`, the configured
//!   ones): Landlock can only *add* rights beneath a directory, never take them away, so these
//!   are bound read-only onto themselves in a private mount namespace (a user namespace too when
//!   not root). Landlock then forbids changing the mount topology.
//! - **Network** (off by default): Landlock TCP bind/connect rules where the ABI has them (v4+),
//!   and a seccomp filter refusing `socket`/`socketpair` for every domain but `AF_UNIX` (and
//!   `io_uring_setup`, which could open sockets behind the filter's back).
//! - **Signals and abstract sockets** are scoped to the sandbox where the ABI has it (v6+).
//! - `no_new_privs` always (unless the policy is off).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};
use nix::sys::resource::Resource;
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

use crate::child::{ChildSetup, MountPlan, UserMaps};
use crate::config::{KernelSupport, ResourceLimits, SandboxConfig, SandboxPolicy};

/// The Landlock ABI whose rights clawsmith asks for; older kernels get the subset they know.
const TARGET_ABI: ABI = ABI::V6;

/// Device files and directories every command may write.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// What the sandbox enforced for one command, shown in the result's display fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    /// The configured policy.
    pub policy: SandboxPolicy,
    /// Whether the platform sandbox confines the command.
    pub confined: bool,
    /// e.g. `landlock v6: writes limited to 3 roots`.
    pub filesystem: String,
    /// e.g. `blocked (landlock tcp, seccomp)` or `allowed`.
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

/// Builds the child setup for a command.
///
/// `Err` only under [`SandboxPolicy::Required`] when the kernel cannot enforce the sandbox;
/// under `BestEffort` the same failure yields an unconfined plan that says why.
pub(crate) fn plan(
    config: &SandboxConfig,
    workspace: &Path,
    temp_dir: &Path,
    pty: bool,
    with_mounts: bool,
) -> Result<Plan, Unavailable> {
    let mut setup = ChildSetup {
        controlling_tty: pty,
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
    match confine(config, workspace, temp_dir, &mut setup, with_mounts) {
        Ok(report) => Ok(Plan { setup, report }),
        Err(Unavailable(reason)) if config.policy == SandboxPolicy::BestEffort => {
            setup.landlock = None;
            setup.seccomp = None;
            setup.mounts = None;
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

fn confine(
    config: &SandboxConfig,
    workspace: &Path,
    temp_dir: &Path,
    setup: &mut ChildSetup,
    with_mounts: bool,
) -> Result<SandboxReport, Unavailable> {
    let kernel: KernelSupport = config.kernel_support();
    let Some(abi) = kernel.landlock_abi else {
        return Err(Unavailable(
            "Landlock is not available in this kernel (needs Linux 5.13+ with landlock in the \
             lsm= boot list)"
                .to_owned(),
        ));
    };
    if !config.network_allowed && !kernel.seccomp {
        return Err(Unavailable(
            "seccomp is not available, so the network cannot be turned off".to_owned(),
        ));
    }

    let mut writable: Vec<PathBuf> = vec![workspace.to_path_buf(), temp_dir.to_path_buf()];
    for root in &config.extra_writable_roots {
        if let Ok(real) = root.canonicalize() {
            writable.push(real);
        }
    }
    let devices: Vec<&Path> = WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .collect();

    let landlock_error = |e: landlock::RulesetError| Unavailable(format!("Landlock: {e}"));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(landlock_error)?;
    let tcp_rules = !config.network_allowed && abi >= 4;
    if !config.network_allowed {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(landlock_error)?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(landlock_error)?;
    let read = AccessFs::from_read(TARGET_ABI) | AccessFs::IoctlDev;
    let created = ruleset
        .create()
        .map_err(landlock_error)?
        .no_new_privs(false)
        .add_rules(path_beneath_rules(["/"], read))
        .map_err(landlock_error)?
        .add_rules(path_beneath_rules(
            &writable,
            AccessFs::from_all(TARGET_ABI),
        ))
        .map_err(landlock_error)?
        .add_rules(path_beneath_rules(&devices, AccessFs::from_all(TARGET_ABI)))
        .map_err(landlock_error)?;
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    let Some(fd) = fd else {
        return Err(Unavailable(
            "Landlock refused to create a ruleset".to_owned(),
        ));
    };
    setup.landlock = Some(fd);

    if !config.network_allowed {
        // The filter is the same for every command: compile it once.
        static NETWORK_FILTER: std::sync::OnceLock<Result<seccompiler::BpfProgram, String>> =
            std::sync::OnceLock::new();
        let program = NETWORK_FILTER
            .get_or_init(network_filter)
            .clone()
            .map_err(Unavailable)?;
        setup.seccomp = Some(program);
    }

    let protected = protected_inside(config, workspace, &writable);
    let with_mounts = with_mounts && kernel.mount_namespace;
    if !protected.is_empty() && !with_mounts && config.policy == SandboxPolicy::Required {
        return Err(Unavailable(
            "a private mount namespace is needed to keep .git/hooks and the protected paths \
             read-only, and this system cannot make one"
                .to_owned(),
        ));
    }
    let protected_text = if protected.is_empty() {
        "nothing inside the writable roots".to_owned()
    } else if with_mounts {
        setup.mounts = Some(mount_plan(&protected)?);
        let names: Vec<String> = protected
            .iter()
            .map(|p| p.strip_prefix(workspace).unwrap_or(p).display().to_string())
            .collect();
        format!("read-only: {}", names.join(", "))
    } else {
        "not enforced (no private mount namespace)".to_owned()
    };

    Ok(SandboxReport {
        policy: config.policy,
        confined: true,
        filesystem: format!(
            "landlock v{abi}: writes limited to the workspace, a private temp dir, /dev/null{}",
            if writable.len() > 2 {
                format!(" and {} extra roots", writable.len() - 2)
            } else {
                String::new()
            }
        ),
        network: if config.network_allowed {
            "allowed".to_owned()
        } else if tcp_rules {
            "blocked (landlock tcp, seccomp)".to_owned()
        } else {
            "blocked (seccomp)".to_owned()
        },
        protected: protected_text,
        no_new_privs: true,
        unconfined_reason: None,
    })
}

/// Existing protected paths that lie inside a writable root (outside them Landlock already
/// refuses writes).
fn protected_inside(
    config: &SandboxConfig,
    workspace: &Path,
    writable: &[PathBuf],
) -> Vec<PathBuf> {
    let mut candidates = vec![workspace.join(".git/hooks"), workspace.join(".git/config")];
    candidates.extend(config.protected_paths.iter().cloned());
    let mut out: Vec<PathBuf> = Vec::new();
    for path in candidates {
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if writable.iter().any(|root| real.starts_with(root)) && !out.contains(&real) {
            out.push(real);
        }
    }
    out
}

fn mount_plan(paths: &[PathBuf]) -> Result<MountPlan, Unavailable> {
    let mut binds = Vec::new();
    for path in paths {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Unavailable(format!("path contains NUL: {}", path.display())))?;
        binds.push((c_path, locked_mount_flags(path)));
    }
    let user_namespace = (!nix::unistd::geteuid().is_root()).then(|| {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        UserMaps {
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        }
    });
    Ok(MountPlan {
        user_namespace,
        read_only_binds: binds,
    })
}

/// Flags a read-only remount must keep: in a user namespace the kernel refuses to clear the
/// locked `nosuid`/`nodev`/`noexec`/atime flags of the original mount.
fn locked_mount_flags(path: &Path) -> libc::c_ulong {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let Ok(stat) = statvfs(path) else {
        return 0;
    };
    let flags = stat.flags();
    let mut out = 0;
    for (fs_flag, mount_flag) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if flags.contains(fs_flag) {
            out |= mount_flag;
        }
    }
    out
}

/// seccomp: `socket`/`socketpair` with a domain other than `AF_UNIX`, and `io_uring_setup`,
/// fail with `EACCES`; everything else is allowed.
fn network_filter() -> Result<seccompiler::BpfProgram, String> {
    let error = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let not_unix = || -> Result<Vec<SeccompRule>, String> {
        Ok(vec![
            SeccompRule::new(vec![
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    libc::AF_UNIX as u64,
                )
                .map_err(error)?,
            ])
            .map_err(error)?,
        ])
    };
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [
        (libc::SYS_socket, not_unix()?),
        (libc::SYS_socketpair, not_unix()?),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]
    .into_iter()
    .collect();
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(error)?;
    filter.try_into().map_err(error)
}

/// The configured limits, clamped to the hard limits this process has (the child inherits
/// them and cannot raise them).
fn rlimits(limits: &ResourceLimits) -> Vec<(Resource, u64)> {
    let wanted = [
        (Resource::RLIMIT_CORE, limits.core_file_bytes),
        (Resource::RLIMIT_FSIZE, limits.file_size_bytes),
        (Resource::RLIMIT_NOFILE, limits.open_files),
        (Resource::RLIMIT_CPU, limits.cpu_seconds),
        (Resource::RLIMIT_AS, limits.address_space_bytes),
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
