//! What a command runs with: workspace, limits, environment, sandbox policy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default timeout of a command (C2).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Default cap on the merged output kept for the model.
pub const DEFAULT_OUTPUT_CAP_BYTES: usize = 1024 * 1024;
/// Default amount of output after which a command that keeps printing is killed: reading and
/// discarding stays cheap, but `yes` would otherwise spin until its timeout.
pub const DEFAULT_OUTPUT_KILL_AFTER_BYTES: u64 = 64 * 1024 * 1024;

/// Home entries a command sees by default (read-only): toolchains and their caches. Everything
/// else under `$HOME` is out of sight — `~/.gitconfig` too, since it can hold tokens (inline
/// credential helpers, `http.extraHeader`, URLs with passwords).
pub const DEFAULT_HOME_ALLOW: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    ".nvm",
    ".bun",
    ".deno",
    ".volta",
    ".pyenv",
    ".rbenv",
    ".cache/pip",
    ".cache/uv",
    ".cache/go-build",
    ".cache/node",
    ".cache/yarn",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    "go",
    ".config/git/ignore",
    ".config/git/attributes",
];

/// Whether commands may run without the platform sandbox (C3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SandboxPolicy {
    /// Refuse to run (code `sandbox_unavailable`) when the kernel cannot enforce the sandbox.
    #[default]
    Required,
    /// Run anyway and say "unconfined" in the result.
    BestEffort,
    /// Never apply the platform sandbox (limits, environment and process group still apply).
    Off,
}

impl SandboxPolicy {
    /// `required`, `best-effort` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxPolicy::Required => "required",
            SandboxPolicy::BestEffort => "best-effort",
            SandboxPolicy::Off => "off",
        }
    }
}

/// POSIX resource limits applied in the child (C2). `None` leaves the inherited limit alone; a
/// value is set as both soft and hard limit, never above the inherited hard limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimits {
    /// `RLIMIT_CORE`: default 0, no core dumps of possibly secret memory.
    pub core_file_bytes: Option<u64>,
    /// `RLIMIT_FSIZE`: default 8 GiB, largest file a command may write (debug binaries are big).
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`: default 4096 open files.
    pub open_files: Option<u64>,
    /// `RLIMIT_CPU`: default 900 s of CPU per process (above the 600 s maximum wall timeout).
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`: default 64 GiB of address space, and never more than the machine's memory;
    /// generous because V8 and wasm runtimes reserve large virtual ranges, small enough to stop a
    /// runaway allocation loop.
    pub address_space_bytes: Option<u64>,
    /// Processes: default 1024 (a parallel build's compilers, test runners and their workers fit;
    /// a fork flood is stopped early). In the built view it is the `pid_max` of the command's own PID
    /// namespace (it binds root too, and counts only the command's tree; at least 300); it is
    /// also set as `RLIMIT_NPROC`, which counts all of the user's processes and does not bind
    /// root.
    pub processes: Option<u64>,
    /// Size of the private `/tmp` tmpfs (default 1 GiB; `/dev/shm` gets a quarter of it). It is
    /// memory-backed, so it also bounds what `/tmp` can take from the machine.
    pub tmp_bytes: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            core_file_bytes: Some(0),
            file_size_bytes: Some(8 * 1024 * 1024 * 1024),
            open_files: Some(4096),
            cpu_seconds: Some(900),
            address_space_bytes: Some(64 * 1024 * 1024 * 1024),
            processes: Some(1024),
            tmp_bytes: Some(1 << 30),
        }
    }
}

/// What the kernel offers, as far as the sandbox cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSupport {
    /// The Landlock ABI version, `None` when Landlock is missing or disabled.
    pub landlock_abi: Option<u32>,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// Whether user namespaces can be made (the built view needs them). The probe reads
    /// `user.max_user_namespaces`; a refusal at spawn time (a distribution's extra switch) is
    /// handled then.
    pub user_namespaces: bool,
}

impl KernelSupport {
    /// Nothing: what a kernel without Landlock or seccomp reports. Tests inject it.
    pub const NONE: KernelSupport = KernelSupport {
        landlock_abi: None,
        seccomp: false,
        user_namespaces: false,
    };

    /// Asks the running kernel (once per process).
    pub fn probe() -> KernelSupport {
        static PROBE: std::sync::OnceLock<KernelSupport> = std::sync::OnceLock::new();
        *PROBE.get_or_init(KernelSupport::probe_now)
    }

    fn probe_now() -> KernelSupport {
        KernelSupport {
            landlock_abi: crate::child::landlock_abi(),
            seccomp: crate::child::seccomp_available(),
            user_namespaces: std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
                .map(|text| text.trim() != "0")
                .unwrap_or(true),
        }
    }
}

/// Where the paths hidden from a command come from when they change between commands.
pub trait HiddenPathSource: Send + Sync + std::fmt::Debug {
    /// The absolute paths to cover in the view of the command about to start.
    fn hidden_paths(&self) -> Vec<PathBuf>;
}

/// Where clawsmith keeps its state (the session database, configuration, logs): out of sight of
/// every process it starts. Every [`SandboxConfig`] names it at construction, so no spawner can
/// hold a configuration that forgot it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDir {
    /// The state directory: hidden in the built view, and read-only where it cannot be hidden
    /// (inside a writable root).
    At(PathBuf),
    /// A host without a state directory (a library use with no store).
    NotKept,
}

/// The kinds of process clawsmith starts. Each is confined by a profile of the one
/// [`SandboxConfig`] the host assembled ([`SandboxConfig::for_process`]): the state directory,
/// the hidden and protected paths, the home allowlist and the limits carry over to every kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessKind {
    /// A model's command (`run_command`, `start_command`): the configuration as it is.
    Command,
    /// A plugin tool: writes the workspace (and the extra writable roots) only when it declared
    /// `filesystem.write`, reaches the network only when it declared `network` and the host
    /// allows the network at all.
    PluginTool {
        /// It declared `filesystem.write`.
        writes: bool,
        /// It declared `network`.
        network: bool,
    },
    /// A hook (policy or plugin): reads the workspace, writes nothing but its private `/tmp`,
    /// no network.
    Hook,
    /// A language server: the workspace read-only, `cache` its only writable folder, no
    /// network.
    LanguageServer {
        /// Its private cache (outside the workspace and the state directory).
        cache: PathBuf,
    },
    /// An external MCP server: the workspace read-only and no network unless its configuration
    /// says otherwise.
    McpServer {
        /// `workspace = "write"` in its configuration.
        writes: bool,
        /// `network = true` in its configuration.
        network: bool,
        /// Folders it may write (its `writable` list), besides its private `/tmp`.
        writable: Vec<PathBuf>,
    },
}

/// Everything a command runs with. Built once by the host; every process clawsmith starts is
/// confined by a profile of it ([`SandboxConfig::for_process`]).
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The workspace: the default working directory and the main writable root.
    pub workspace_root: PathBuf,
    /// Timeout when the call gives none (default 120 s).
    pub default_timeout: Duration,
    /// Largest timeout a call may ask for (default 600 s).
    pub max_timeout: Duration,
    /// Bytes of merged output kept (default 1 MiB): the first and last halves, with a marker
    /// between them when output was cut.
    pub output_cap_bytes: usize,
    /// Output after which the command is killed (default 64 MiB).
    pub output_kill_after_bytes: u64,
    /// Resource limits (see [`ResourceLimits`] for the defaults).
    pub limits: ResourceLimits,
    /// Extra environment variable names passed through (a trailing `*` matches a prefix).
    /// Names that look like secrets (`*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, …) are never
    /// passed, even when listed.
    pub env_allow: Vec<String>,
    /// Extra writable roots besides the workspace and the private temp dir (e.g. a cargo or npm
    /// cache).
    pub extra_writable_roots: Vec<PathBuf>,
    /// Folders every process sees read-only wherever they are — under the private `/tmp`, the
    /// empty home directory — and cannot change (e.g. a plugin's folder: its code). Kept by every
    /// profile of [`for_process`](Self::for_process).
    pub read_only_roots: Vec<PathBuf>,
    /// Paths commands must not write even inside a writable root. The workspace's `.git` is
    /// always pinned and its code paths (`hooks`, `config`, `commondir`, …) always protected.
    pub protected_paths: Vec<PathBuf>,
    /// Paths commands must not see at all (e.g. the clawsmith state dir): covered by an empty
    /// directory or `/dev/null` in the built view. `$HOME` secrets (`.ssh`, `.aws`, …) are
    /// always hidden.
    pub hidden_paths: Vec<PathBuf>,
    /// Paths to hide that are known only when a command starts (the files the workspace's
    /// `hidden_paths` globs match now): asked again for every command's view, so a match
    /// created after the configuration was built is covered too.
    pub hidden_path_source: Option<Arc<dyn HiddenPathSource>>,
    /// The home directory (default: `$HOME`). In the built view it is an empty read-only
    /// directory with only [`home_allow`](Self::home_allow) bound back, so a secret under a name
    /// nobody listed stays out of sight.
    pub home: Option<PathBuf>,
    /// Entries of the home directory bound back read-only into the built view, relative to
    /// it (default [`DEFAULT_HOME_ALLOW`]): toolchains and caches commands need. Inside them,
    /// the credential files of those tools stay covered. A writable
    /// root under the home directory (the workspace, `writable_roots`) is bound as well.
    pub home_allow: Vec<String>,
    /// Host folders of runtime state shown empty in the built view (default
    /// `/run`, `/var/run`, `/var/lock`, `/var/tmp` and `$XDG_RUNTIME_DIR`): a daemon's socket
    /// there, bound before or while a command runs, is out of reach.
    pub runtime_dirs: Vec<PathBuf>,
    /// `(st_dev, st_ino)` of the workspace root as the session opened it (the file tools'
    /// descriptor). A command refuses to run when the path names anything else (the root was
    /// swapped, e.g. for a symlink). `None`: the root as found when the command starts.
    pub workspace_identity: Option<(u64, u64)>,
    /// Whether commands may write the workspace (default true). False for processes that
    /// declared no `filesystem.write` (plugin tools) and for language servers: the workspace is
    /// bound read-only in the built view and Landlock grants no writes beneath it, so the kernel
    /// refuses every write there whatever the process does; the extra writable roots (a cache
    /// directory) and the private `/tmp` stay writable. An extra root *inside* a read-only
    /// workspace is not writable.
    pub workspace_writable: bool,
    /// Whether commands may use the network (default false).
    pub network_allowed: bool,
    /// With the network off ([`network_allowed`](Self::network_allowed) false), the hosts
    /// commands may still reach, through clawsmith's gateway only (`None`, the default: none).
    pub egress: Option<crate::egress::Egress>,
    /// What to do when the kernel cannot enforce the sandbox (default [`SandboxPolicy::Required`]).
    pub policy: SandboxPolicy,
    /// Where private temp dirs are made (default: the system temp dir).
    pub temp_root: Option<PathBuf>,
    /// Overrides the kernel probe; tests set [`KernelSupport::NONE`] to make Landlock
    /// unavailable.
    pub kernel_support: Option<KernelSupport>,
    /// Seconds between TERM and KILL when a command is stopped (default 2 s).
    pub kill_grace: Duration,
    /// Variables passed exactly as the host has them, even names that look like secrets: what
    /// the user listed for an MCP server (`env = ["GITHUB_TOKEN"]`). Empty for commands.
    pub env_exact: Vec<String>,
    /// Whether a command may run in a warm spare, a tree started before it (`run_command`
    /// without input, with merged output), and order the next one (default true). A process that
    /// runs one command at most (the CLI's `call`) turns them off: the spare its first command
    /// orders would never serve, and making it — a fork, namespaces, mounts — is processor time
    /// taken from the call on a second core. Off, every command goes the ordinary way (the same
    /// tree, made at the call) and orders no spare.
    pub warm_spares: bool,
    /// Where clawsmith keeps its state; set at construction only.
    state_dir: StateDir,
}

impl SandboxConfig {
    /// The defaults for `workspace_root`, with clawsmith's state directory out of sight.
    pub fn new(workspace_root: impl Into<PathBuf>, state_dir: StateDir) -> SandboxConfig {
        SandboxConfig {
            workspace_root: workspace_root.into(),
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            output_cap_bytes: DEFAULT_OUTPUT_CAP_BYTES,
            output_kill_after_bytes: DEFAULT_OUTPUT_KILL_AFTER_BYTES,
            limits: ResourceLimits::default(),
            env_allow: Vec::new(),
            extra_writable_roots: Vec::new(),
            read_only_roots: Vec::new(),
            protected_paths: Vec::new(),
            hidden_paths: Vec::new(),
            hidden_path_source: None,
            home: None,
            home_allow: DEFAULT_HOME_ALLOW
                .iter()
                .map(|entry| (*entry).to_owned())
                .collect(),
            runtime_dirs: crate::platform::RUNTIME_DIRS
                .iter()
                .map(PathBuf::from)
                .chain(
                    std::env::var_os("XDG_RUNTIME_DIR")
                        .map(PathBuf::from)
                        .filter(|dir| dir.is_absolute()),
                )
                .collect(),
            workspace_identity: None,
            workspace_writable: true,
            network_allowed: false,
            egress: None,
            policy: SandboxPolicy::Required,
            temp_root: None,
            kernel_support: None,
            kill_grace: Duration::from_secs(2),
            env_exact: Vec::new(),
            warm_spares: true,
            state_dir,
        }
    }

    /// This configuration with the folders of the files that `words` (a program and its
    /// arguments) name by absolute path bound read-only ([`read_only_roots`](Self::read_only_roots))
    /// where the view would not show them — under `/tmp`, `/var/tmp` or the home directory: a
    /// configured hook's or MCP server's own script stays visible. The home directory itself
    /// (or a folder above it) is never bound, so a script directly in `~` is not seen: keep it
    /// in a folder of its own. A state directory inside a bound folder stays covered.
    pub fn seeing_code_of(mut self, words: &[String]) -> SandboxConfig {
        let home = self.home_dir().and_then(|home| home.canonicalize().ok());
        for word in words {
            let file = std::path::Path::new(word);
            if !file.is_absolute() || !file.is_file() {
                continue;
            }
            let Some(folder) = file.parent().and_then(|parent| parent.canonicalize().ok()) else {
                continue;
            };
            let out_of_sight = folder.starts_with("/tmp")
                || folder.starts_with("/var/tmp")
                || home.as_ref().is_some_and(|home| folder.starts_with(home));
            let too_wide = ["/", "/tmp", "/var/tmp"]
                .iter()
                .any(|wide| folder == std::path::Path::new(wide))
                || home.as_ref().is_some_and(|home| home.starts_with(&folder));
            if out_of_sight && !too_wide && !self.read_only_roots.contains(&folder) {
                self.read_only_roots.push(folder);
            }
        }
        self
    }

    /// The state directory every process of this configuration is kept from.
    pub fn state_dir(&self) -> &StateDir {
        &self.state_dir
    }

    /// The configuration a process of `kind` runs under: this one, narrowed. Nothing of the
    /// state directory, hidden and protected paths, home allowlist or limits is dropped; a
    /// profile only takes rights away (writes, the network) or names a private folder.
    pub fn for_process(&self, kind: ProcessKind) -> SandboxConfig {
        let mut config = self.clone();
        config.env_exact.clear();
        match kind {
            ProcessKind::Command => {}
            ProcessKind::PluginTool { writes, network } => {
                if !writes {
                    config.workspace_writable = false;
                    config.extra_writable_roots.clear();
                }
                config.network_allowed = self.network_allowed && network;
                if !network {
                    config.egress = None;
                }
            }
            ProcessKind::Hook => {
                config.workspace_writable = false;
                config.extra_writable_roots.clear();
                config.network_allowed = false;
                config.egress = None;
            }
            ProcessKind::LanguageServer { cache } => {
                config.workspace_writable = false;
                config.extra_writable_roots = vec![cache];
                config.network_allowed = false;
                config.egress = None;
            }
            ProcessKind::McpServer {
                writes,
                network,
                writable,
            } => {
                config.workspace_writable = writes;
                config.extra_writable_roots = writable;
                config.network_allowed = network;
                // An MCP server's network is its entry's own choice: all or nothing.
                config.egress = None;
            }
        }
        config
    }

    /// The configured home, or `$HOME`.
    pub fn home_dir(&self) -> Option<PathBuf> {
        self.home
            .clone()
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
            .filter(|home| home.is_absolute())
    }

    /// The injected kernel support, or the probed one.
    pub fn kernel_support(&self) -> KernelSupport {
        self.kernel_support.unwrap_or_else(KernelSupport::probe)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::child::{ChildSetup, PlanArea, SpareEnds};

    /// The names of every field of `$value` (a `$type`), each after `$prefix`: the pattern has
    /// no `..`, so a field added to the type does not compile until it is listed here.
    macro_rules! every_field {
        ($type:ident, $value:expr, $prefix:literal, $($field:ident),* $(,)?) => {{
            let $type { $($field: _),* } = $value;
            [$(concat!($prefix, stringify!($field))),*]
        }};
    }

    /// A change to a configuration, a row of the table below.
    type Change<'a> = Box<dyn Fn(&mut SandboxConfig) + 'a>;

    #[derive(Debug)]
    struct Paths(Vec<PathBuf>);

    impl HiddenPathSource for Paths {
        fn hidden_paths(&self) -> Vec<PathBuf> {
            self.0.clone()
        }
    }

    /// The setup a spare would be made with for commands of `config` (the workspace resolved
    /// as `run_command` resolves it), or what a command of `config` is planned with — the same
    /// plan; `None` when the built view is refused.
    fn planned(config: &SandboxConfig) -> Option<ChildSetup> {
        let workspace = config.workspace_root.canonicalize().unwrap();
        let identity = crate::platform::identity_of(&workspace).unwrap();
        crate::spare::planned(config, &workspace, identity)
    }

    /// `setup` as a spare's (the ends its init would wait on; this one never runs).
    fn as_spare(mut setup: ChildSetup) -> ChildSetup {
        setup.namespaces.as_mut().unwrap().spare = Some(SpareEnds {
            go: -1,
            result: -1,
            area: PlanArea::new().unwrap(),
            hold: -1,
        });
        setup
    }

    /// Whether a spare made for `spare_config` serves a command of `config`. A unix socket
    /// bound or removed on the machine between the two plans changes the cover list (so the
    /// tree), so a pair expected to match is asked a few times.
    fn serves(spare_config: &SandboxConfig, config: &SandboxConfig, tries: usize) -> bool {
        (0..tries).any(|_| {
            let spare = as_spare(planned(spare_config).unwrap());
            planned(config).is_some_and(|setup| spare.serves(&setup))
        })
    }

    /// A warm spare is restricted and given its view before its command exists, so it may run
    /// only a command whose configuration makes the same tree. Each row changes one field of a
    /// configuration: a field that shapes the tree (the view, the limits, Landlock, seccomp,
    /// the namespaces) must keep the first configuration's spare from serving it; a field the
    /// call applies itself (timeouts, output caps, the environment, which the go message
    /// carries) must not. Every field of `SandboxConfig` and `ResourceLimits` needs a row.
    #[test]
    fn a_spare_serves_only_a_configuration_that_makes_the_same_tree() {
        let support = KernelSupport::probe();
        if support.landlock_abi.is_none() || !support.seccomp || !support.user_namespaces {
            eprintln!("SKIP: the kernel cannot run the built view ({support:?})");
            return;
        }
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = |name: &str| root.join(name);
        for name in [
            "ws/protected",
            "ws2",
            "home/.cargo",
            "home/.npm",
            "home2/.cargo",
            "cache",
            "code",
            "ws/state",
            "ws/hidden",
            "ws/found",
            "tmp",
            "tmp2",
        ] {
            std::fs::create_dir_all(path(name)).unwrap();
        }
        // What the rows hide lives in the workspace: the built view shows nothing of `/var/tmp`
        // (a runtime folder, like the `/run` the `runtime_dirs` row uncovers) but the
        // workspace, so hiding more there would change nothing.
        let mut config = SandboxConfig::new(path("ws"), StateDir::NotKept);
        config.home = Some(path("home"));
        config.temp_root = Some(path("tmp"));

        // (field, whether the first configuration's spare serves the changed one, the change)
        let table: Vec<(&str, bool, Change<'_>)> = vec![
            (
                "workspace_root",
                false,
                Box::new(|c| c.workspace_root = path("ws2")),
            ),
            (
                "default_timeout",
                true,
                Box::new(|c| c.default_timeout = Duration::from_secs(5)),
            ),
            (
                "max_timeout",
                true,
                Box::new(|c| c.max_timeout = Duration::from_secs(5)),
            ),
            (
                "output_cap_bytes",
                true,
                Box::new(|c| c.output_cap_bytes = 10),
            ),
            (
                "output_kill_after_bytes",
                true,
                Box::new(|c| c.output_kill_after_bytes = 10),
            ),
            (
                "limits.core_file_bytes",
                false,
                Box::new(|c| c.limits.core_file_bytes = None),
            ),
            (
                "limits.file_size_bytes",
                false,
                Box::new(|c| c.limits.file_size_bytes = Some(1 << 20)),
            ),
            (
                "limits.open_files",
                false,
                Box::new(|c| c.limits.open_files = Some(64)),
            ),
            (
                "limits.cpu_seconds",
                false,
                Box::new(|c| c.limits.cpu_seconds = Some(60)),
            ),
            (
                "limits.address_space_bytes",
                false,
                Box::new(|c| c.limits.address_space_bytes = Some(1 << 30)),
            ),
            (
                "limits.processes",
                false,
                Box::new(|c| c.limits.processes = Some(500)),
            ),
            (
                "limits.tmp_bytes",
                false,
                Box::new(|c| c.limits.tmp_bytes = Some(1 << 20)),
            ),
            (
                "env_allow",
                true,
                Box::new(|c| c.env_allow.push("CLAWSMITH_TEST".into())),
            ),
            (
                "extra_writable_roots",
                false,
                Box::new(|c| c.extra_writable_roots.push(path("cache"))),
            ),
            (
                "read_only_roots",
                false,
                Box::new(|c| c.read_only_roots.push(path("code"))),
            ),
            (
                "protected_paths",
                false,
                Box::new(|c| c.protected_paths.push(path("ws/protected"))),
            ),
            (
                "hidden_paths",
                false,
                Box::new(|c| c.hidden_paths.push(path("ws/hidden"))),
            ),
            (
                "hidden_path_source",
                false,
                Box::new(|c| c.hidden_path_source = Some(Arc::new(Paths(vec![path("ws/found")])))),
            ),
            ("home", false, Box::new(|c| c.home = Some(path("home2")))),
            (
                "home_allow",
                false,
                Box::new(|c| c.home_allow.retain(|entry| entry != ".npm")),
            ),
            ("runtime_dirs", false, Box::new(|c| c.runtime_dirs.clear())),
            // Checked against the root before anything is planned (a command whose root is
            // not that directory is refused); the tree has the root's own identity either way.
            (
                "workspace_identity",
                true,
                Box::new(|c| {
                    let root = c.workspace_root.canonicalize().unwrap();
                    c.workspace_identity = Some(crate::platform::identity_of(&root).unwrap());
                }),
            ),
            (
                "workspace_writable",
                false,
                Box::new(|c| c.workspace_writable = false),
            ),
            (
                "network_allowed",
                false,
                Box::new(|c| c.network_allowed = true),
            ),
            (
                "egress",
                false,
                Box::new(|c| {
                    let policy =
                        clawsmith_egress::EgressPolicy::parse(&["example.com"], &[] as &[&str]);
                    c.egress = Some(crate::egress::Egress::new(policy.unwrap()));
                }),
            ),
            // The same tree where the kernel can build it; off, nothing is built.
            (
                "policy",
                true,
                Box::new(|c| c.policy = SandboxPolicy::BestEffort),
            ),
            ("policy", false, Box::new(|c| c.policy = SandboxPolicy::Off)),
            // The built view's `/tmp` is private; a host temp dir is made only in the host's view.
            (
                "temp_root",
                true,
                Box::new(|c| c.temp_root = Some(path("tmp2"))),
            ),
            // Landlock ABI 1 handles fewer rights than the running kernel's.
            (
                "kernel_support",
                support.landlock_abi == Some(1),
                Box::new(|c| {
                    c.kernel_support = Some(KernelSupport {
                        landlock_abi: Some(1),
                        ..KernelSupport::probe()
                    })
                }),
            ),
            (
                "kernel_support",
                false,
                Box::new(|c| c.kernel_support = Some(KernelSupport::NONE)),
            ),
            (
                "kill_grace",
                true,
                Box::new(|c| c.kill_grace = Duration::from_secs(9)),
            ),
            (
                "env_exact",
                true,
                Box::new(|c| c.env_exact.push("CLAWSMITH_TEST".into())),
            ),
            // Whether a command looks for a spare at all, decided before one is looked for; the
            // tree is the same.
            ("warm_spares", true, Box::new(|c| c.warm_spares = false)),
            (
                "state_dir",
                false,
                Box::new(|c| c.state_dir = StateDir::At(path("ws/state"))),
            ),
        ];

        let fields = every_field!(
            SandboxConfig,
            &config,
            "",
            workspace_root,
            default_timeout,
            max_timeout,
            output_cap_bytes,
            output_kill_after_bytes,
            limits,
            env_allow,
            extra_writable_roots,
            read_only_roots,
            protected_paths,
            hidden_paths,
            hidden_path_source,
            home,
            home_allow,
            runtime_dirs,
            workspace_identity,
            workspace_writable,
            network_allowed,
            egress,
            policy,
            temp_root,
            kernel_support,
            kill_grace,
            env_exact,
            warm_spares,
            state_dir,
        );
        let limits = every_field!(
            ResourceLimits,
            &config.limits,
            "limits.",
            core_file_bytes,
            file_size_bytes,
            open_files,
            cpu_seconds,
            address_space_bytes,
            processes,
            tmp_bytes,
        );
        for field in fields.iter().filter(|f| **f != "limits").chain(&limits) {
            assert!(
                table.iter().any(|(row, _, _)| row == field),
                "no row for {field}"
            );
        }

        assert!(
            serves(&config, &config.clone(), 5),
            "an equal configuration"
        );
        let setup = planned(&config).unwrap();
        assert!(
            !setup.serves(&planned(&config).unwrap()),
            "not a spare's setup"
        );
        let mut wrong = Vec::new();
        for (field, expected, change) in &table {
            let mut changed = config.clone();
            change(&mut changed);
            let tries = if *expected { 5 } else { 1 };
            if serves(&config, &changed, tries) != *expected {
                wrong.push((*field, *expected));
            }
        }
        assert!(wrong.is_empty(), "(field, expected to serve): {wrong:?}");
    }
}
