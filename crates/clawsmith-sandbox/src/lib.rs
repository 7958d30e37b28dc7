//! # clawsmith-sandbox
//!
//! The only crate of clawsmith that spawns processes (SPEC C1–C4, S5). It turns a shell command
//! from a model into a process that cannot do the obvious disasters, cannot write outside the
//! workspace, cannot reach the network unless allowed, cannot outlive its call, and cannot flood
//! memory with output.
//!
//! ## Main types
//! - [`classify::check_command`] → [`classify::CommandVerdict`]: the disaster check (C1), a pure
//!   function over the command text that runs before anything else and that no approval
//!   overrides. It parses with tree-sitter-bash and walks every simple command through lists,
//!   pipelines, subshells, substitutions, `bash -c` strings, `eval`, here-strings into shells and
//!   wrappers (`env`, `nohup`, `timeout`, `xargs`, `find -exec`, …). Serialized as
//!   `{"verdict":"blocked"|"allowed","rule":…,"reason":…}`.
//! - [`SandboxConfig`]: workspace, timeouts, output cap, [`ResourceLimits`], environment
//!   allow-list, extra writable roots, protected paths, network flag and [`SandboxPolicy`]
//!   (`Required` by default). [`KernelSupport`] can be injected to simulate a kernel without
//!   Landlock.
//! - [`run_command`] (a [`CommandRequest`] → [`CommandOutcome`] or [`RunError`]) and the
//!   [`RunCommandTool`] (`run_command`) over it.
//! - [`CommandExecutionService`] (C4), owned by a long-lived host, and [`command_tools`]: the
//!   eight tools `start_command`, `list_commands`, `command_terminal_capabilities`,
//!   `command_status`, `command_output`, `command_input`, `resize_command_pty`,
//!   `cancel_command`.
//!
//! ## Decisions
//! - **The check refuses, the sandbox contains.** The disaster check is a tripwire for the
//!   obvious, not a security boundary: text can always be obfuscated past a parser
//!   (`$(printf 'r%s' m) -rf /`). What holds is the kernel: Landlock for writes and TCP,
//!   seccomp for other sockets, rlimits, a process group. The check errs towards *data* for
//!   quoted text (`echo "rm -rf /"` passes) and towards *blocking* for text it cannot parse.
//! - **One session per command, killed whole.** The child calls `setsid`; a timeout, a
//!   cancellation or the end of the shell signals its process group and every group job
//!   control made inside the session (TERM, then KILL after `kill_grace`), and the runner waits
//!   until no live member is left. Background jobs of a
//!   finished `run_command` die with it; long-running work belongs to `start_command`.
//! - **One pipe for stdout and stderr**, so output keeps its arrival order; the capture keeps
//!   the first and last halves of the cap with an explicit marker between, reads and discards
//!   the rest, and kills the group past `output_kill_after_bytes`.
//! - **Landlock cannot take rights away beneath a writable directory**, so protected paths
//!   inside the workspace (`.git/hooks`, `.git/config`, the configured ones) are bound
//!   read-only in a private mount namespace (plus a user namespace when not root); after
//!   `landlock_restrict_self` the command cannot change mounts. Where no namespace can be made,
//!   `Required` refuses and `BestEffort` runs and says "not enforced".
//! - **Policies**: `Required` refuses with `sandbox_unavailable` and the reason; `BestEffort` runs
//!   and says "unconfined" in the content and the display; `Off` skips the platform sandbox
//!   (limits, environment and process group still apply). What was enforced is always in the
//!   display fields (`sandbox`, `filesystem`, `network`, `protected paths`, `no_new_privs`).
//! - **`unsafe` lives in one module**, `child`: the `pre_exec` hook (only async-signal-safe
//!   system calls over data prepared before `fork`: `setsid`, `TIOCSCTTY`, `setrlimit`,
//!   `unshare`/`mount`, `no_new_privs`, `landlock_restrict_self`, seccomp), the kernel probes,
//!   `TIOCSWINSZ`, and registering a PTY master with tokio. The Landlock ruleset and the BPF
//!   program are built in the parent.
//! - **Minimal environment**: `PATH`, `HOME`, `USER`, `LANG`/`LC_*`, `TERM`, toolchain homes,
//!   a private `TMPDIR` (removed afterwards) and the configured extras; names that look like
//!   secrets (`*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, …) never pass, even when listed.
//! - **PTY via nix `openpty`**, not portable-pty; input and resize of a PTY command need the
//!   random control token returned by `start_command` (compared in constant time).
//!
//! ## What this crate does not do
//! It does not decide permissions (the caller's `allow` decision arrives as the context's
//! authorization, checked again here per S5), does not know sessions or checkpoints (a command's
//! file changes are not recorded for undo), does not store artifacts (a command log is referred to
//! as `command-log/<id>` and read through `command_output`), and does not confine reads: like
//! its peers it keeps reads open so that toolchains work. Outside Linux it has no platform
//! sandbox. A process that leaves its session with `setsid` escapes the kill (a cgroup would be
//! needed; denying `setsid` would break `detached` spawns in Node and Python); rlimits are per
//! process, not per command tree.
pub mod classify;

mod child;
mod config;
mod env;
mod exec;
mod git_guard;
mod output;
mod platform;
mod service;
mod service_tools;
mod tool;

pub use config::{
    DEFAULT_OUTPUT_CAP_BYTES, DEFAULT_OUTPUT_KILL_AFTER_BYTES, DEFAULT_TIMEOUT, KernelSupport,
    MAX_TIMEOUT, ResourceLimits, SandboxConfig, SandboxPolicy,
};
pub use env::looks_secret;
pub use exec::{CommandOutcome, CommandRequest, ExitKind, RunError, StopReason, run_command};
pub use output::BoundedOutput;
pub use platform::SandboxReport;
pub use service::{
    CommandExecutionService, CommandSnapshot, CommandState, DEFAULT_MAX_COMMANDS,
    DEFAULT_MAX_LOG_BYTES, DEFAULT_MAX_RUNNING, DEFAULT_MAX_RUNTIME, DEFAULT_OUTPUT_CHUNK_BYTES,
    MAX_OUTPUT_CHUNK_BYTES, OutputChunk, ServiceConfig, ServiceError, StartRequest, StartedCommand,
};
pub use service_tools::{
    CommandIdInput, CommandInputInput, CommandOutputInput, ListCommandsInput, ResizeInput,
    StartCommandInput, TerminalCapabilitiesInput, command_tools,
};
pub use tool::{RunCommandInput, RunCommandTool};
