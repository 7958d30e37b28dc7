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
            policy: SandboxPolicy::Required,
            temp_root: None,
            kernel_support: None,
            kill_grace: Duration::from_secs(2),
            env_exact: Vec::new(),
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
            }
            ProcessKind::Hook => {
                config.workspace_writable = false;
                config.extra_writable_roots.clear();
                config.network_allowed = false;
            }
            ProcessKind::LanguageServer { cache } => {
                config.workspace_writable = false;
                config.extra_writable_roots = vec![cache];
                config.network_allowed = false;
            }
            ProcessKind::McpServer {
                writes,
                network,
                writable,
            } => {
                config.workspace_writable = writes;
                config.extra_writable_roots = writable;
                config.network_allowed = network;
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
