//! # clawsmith-sandbox
//!
//! The only crate of clawsmith that spawns processes (C1–C4, S5). It turns a shell command
//! from a model into a process that cannot do the obvious disasters, cannot write outside the
//! workspace, cannot reach the network unless allowed, cannot outlive its call, and cannot flood
//! memory with output.
//!
//! ## Main types
//! - [`classify::check_command`] → [`classify::CommandVerdict`]: the disaster check (C1), a pure
//!   function over the command text that runs before anything else and that no approval
//!   overrides. It judges the parts `clawsmith-shell` (the one bash parse, shared with the
//!   permission rules) reads: every simple command through lists, pipelines, subshells,
//!   substitutions, `bash -c` strings, `eval`, here-strings into shells and wrappers (`env`,
//!   `nohup`, `timeout`, `xargs`, `find -exec`, …), every redirect and function. Serialized as
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
//! - [`spawn_piped`] → [`PipedProcess`] + [`PipedIo`]: a long-lived confined process with a
//!   pipe for each standard stream, for hosts that speak a protocol over stdio (language
//!   servers); the same checks and sandbox, killed with its tree when the handle drops.
//!
//! ## Decisions
//! - **The check refuses, the sandbox contains.** The disaster check is a tripwire for the
//!   obvious, not a security boundary: text can always be obfuscated past a parser
//!   (`$(printf 'r%s' m) -rf /`). What holds is the kernel. The check errs towards *data* for
//!   quoted text (`echo "rm -rf /"` passes) and towards *blocking* for text it cannot parse.
//! - **A world built, not filtered** (the `platform` module, the way bubblewrap builds one):
//!   new user, mount, PID, IPC, UTS, cgroup and (without network) network namespaces; the host
//!   bound read-only, `nosuid`, `nodev`; the workspace bound read-write from the path *checked
//!   against the identity of the root the session opened* (a root swapped for a symlink is
//!   refused); a private tmpfs `/tmp` and `/dev/shm`, a minimal `/dev` with a new devpts instance
//!   (or only its own PTY), a fresh `/proc`; `$HOME` secrets, the state dir, configured hidden
//!   paths and every pathname unix socket the host has bound covered. Then all capabilities
//!   dropped, `no_new_privs`, Landlock (writes only beneath the writable roots and the private
//!   `/tmp` and `/dev`; no device ioctls elsewhere), seccomp (no `TIOCSTI`, device `mknod`,
//!   keyring, mount API, new namespaces, `io_uring`, any x32 call — those carry the x86_64
//!   architecture with a number the native rules never name; `clone3` answers `ENOSYS` so libc falls back
//!   to the `clone` the filter can read; one program, behind a binary search on the call number so
//!   the kernel's per-call cache check at attach time is cheap, its jumps threaded and its
//!   unreachable instructions and tests that cannot fail dropped, so each attach copies and compiles 108 instructions instead of 258), descriptors above 2 closed on exec, `pid_max` of the
//!   PID namespace as a process limit that binds root, `RLIMIT_AS` capped by the machine's
//!   memory, a size-limited `/tmp`.
//! - **A plain command skips the shell**: text bash would run as one `exec` of a program found
//!   on `PATH` (no expansion, quoting, redirection or operator; not a builtin) is `exec`ed
//!   directly with the variables bash would set — the same process, arguments, status and
//!   environment, without bash's start (`direct`); anything else, or a program that cannot
//!   start in the command's view, goes through `bash -c`.
//! - **The workspace's repositories cannot be turned against the user**: each `.git` (the
//!   workspace's and the nested ones) is bound onto itself (a
//!   mount point cannot be renamed, removed or replaced); for a background command or a piped
//!   process the whole git dir is read-only while it runs (git commands that write the
//!   repository fail there), for `run_command` its code paths (`hooks`, `config`, `commondir`,
//!   `worktrees`, `modules`, …; one that does not exist gets an inert stand-in for the command's
//!   duration, bound read-only like the rest), so `git add`, `commit` and `checkout` keep working.
//!   After the command (`git_guard`) the hooks of a repository it made, and every config key of
//!   it not on an allowlist of inert keys, as the host's git reads the file, are taken back and
//!   reported; a repository a background command makes is cleaned the same way as soon as it
//!   appears (an inotify watch).
//! - **The tree dies with the call, and with clawsmith.** Each confined command is a relay
//!   (the process clawsmith spawned), an init (pid 1 of the PID namespace) and the shell (see
//!   the `child` module). The init exits when the shell does and the kernel kills the rest of
//!   the namespace — `setsid`, double forks and `nohup` included — before the relay can see it
//!   go; a timeout or cancellation sends TERM to the group, then (after `kill_grace`) the hard
//!   stop. Only the relay is a `fork` of clawsmith: it starts the init with `clone(CLONE_VM)` and
//!   the init the command with `clone(CLONE_VM | CLONE_VFORK)` (as `posix_spawn` does), so a
//!   spawn copies clawsmith's page tables once, not three times; the command `exec`s from a plan
//!   prepared before the fork. Until the relay ends, every page clawsmith writes is a
//!   copy-on-write fault: the plan is dropped only once the tree is gone and `run_command` reads
//!   output into reserved buffers it never zeroes. A `run_command` without input and with
//!   merged output usually finds that tree already made: a **warm spare** per prepared view
//!   (the `spare` module) — relay started, namespaces entered, init cloned, the command's
//!   `/proc`, `/tmp`, `/dev/shm` and `/dev/pts` mounted, the command process cloned and
//!   already restricted (capabilities dropped, `no_new_privs`, Landlock, seccomp) and parked,
//!   on a thread of its own — whose init waits for the command's plan (program, arguments,
//!   environment, working directory, `.git` pins) on a pipe, checks that every covered path is
//!   still covered, pins, enters the working directory (shared with the parked command) and
//!   wakes the command, which only `exec`s: the same view and restrictions as the ordinary
//!   way's. A spare serves only a command whose own plan, made as
//!   always (the cover list computed at the call), needs the same view, limits, Landlock
//!   rights and seccomp programs, and whose plan fits the init's fixed buffers; otherwise, or
//!   when the spare's tree died (its parked command included), the command goes the ordinary
//!   way. It moves the namespaces, the mounts and the command's restriction off the call's
//!   critical path; it does not remove their processor time. A spare's relay is no fork: when
//!   its setup has a Landlock ruleset (which keeps the command from `ptrace` access to its
//!   init) it is a `clone(CLONE_VM)` of clawsmith, its tree running in clawsmith's memory on
//!   stacks of its own, watched by a keeper thread that frees them only once a hold pipe every
//!   process of the tree keeps has ended — no page tables copied, no copy-on-write faults. A spare's call is answered at its **init's** exit, not its relay's: the
//!   init writes the command's wait status on the spare's result pipe and exits, and a pidfd
//!   of the init is readable only once the kernel has killed and reaped every other process of
//!   its PID namespace, so the call still returns after all of the command is gone; the relay
//!   (outside the namespace, running nothing of the command) exits on its own and is reaped
//!   on the spares' thread, its teardown off the call's path. A process that runs one command
//!   at most turns spares off in its configuration ([`SandboxConfig::warm_spares`]; the CLI's
//!   `call` does). A lifeline pipe only clawsmith holds makes every relay (a spare's
//!   included) kill its tree when clawsmith dies, whatever signal killed it. Background jobs of a finished `run_command` die with it;
//!   long-running work belongs to `start_command`.
//! - **One pipe for stdout and stderr**, so output keeps its arrival order; the capture keeps
//!   the first and last halves of the cap with an explicit marker between, reads and discards
//!   the rest, and kills the tree past `output_kill_after_bytes`.
//! - **Policies**: `Required` refuses with `sandbox_unavailable` and what is missing (Landlock,
//!   seccomp, or user namespaces with the switches that enable them); `BestEffort` runs in the
//!   host's view with Landlock and seccomp when namespaces are missing, or unconfined when those
//!   are missing too, and says exactly which layers held; `Off` skips the platform sandbox
//!   (limits, environment and process group still apply). What was enforced is always in the
//!   display fields (`sandbox`, `filesystem`, `network`, `protected paths`, `no_new_privs`). A
//!   timeout is `status: error`, `code: timeout`.
//! - **`unsafe` lives in one module**, `child`: the `pre_exec` code of the relay, the init and
//!   the command (only async-signal-safe system calls over data prepared before `fork`), the
//!   kernel probes, `TIOCSWINSZ`, and registering a PTY master with tokio. The Landlock ruleset,
//!   the BPF programs and every path of the view are built in the parent. Each `unsafe` there
//!   has a `// SAFETY:` comment directly above it saying why it is sound (`cargo xtask tidy`
//!   fails on one without).
//! - **Minimal environment**: `PATH`, `HOME`, `USER`, `LANG`/`LC_*`, `TERM`, toolchain homes,
//!   `TMPDIR=/tmp` (the private tmpfs; a host temp dir removed afterwards in the host's view) and
//!   the configured extras; names that look like secrets (`*_TOKEN`, `*_KEY`, `*SECRET*`,
//!   `*PASSWORD*`, …) never pass, even when listed. `TRACEPARENT`/`TRACESTATE` are the calling
//!   tool call's span (`CommandRequest::trace`) or absent, never the host's.
//! - **PTY via nix `openpty`**, not portable-pty; input and resize of a PTY command need the
//!   random control token returned by `start_command` (compared in constant time).
//!
//! ## What this crate does not do
//! It does not decide permissions (the caller's `allow` decision arrives as the context's
//! authorization, checked again here per S5), does not know sessions or checkpoints (a command's
//! file changes are not recorded for undo), does not store artifacts (a command log is referred to
//! as `command-log/<id>` and read through `command_output`). Reads of the host stay open (minus
//! the hidden paths) so that toolchains work; writes to caches outside the workspace (`~/.cargo`,
//! `~/.npm`) need an extra writable root. It does not protect repositories beyond the bounded scan
//! of `git_guard`, nor a `.git` that is a symlink. A unix socket the host binds after the
//! command started, or in another network namespace, is not covered. The memory of a command
//! tree is bounded per process (`RLIMIT_AS`), not as a whole (no cgroup). Outside Linux it has
//! no platform sandbox.
pub mod classify;

mod child;
mod config;
mod direct;
mod egress;
mod env;
mod exec;
mod git_guard;
mod output;
mod piped;
mod platform;
mod service;
mod service_tools;
mod spare;
mod tool;

pub use config::{
    DEFAULT_HOME_ALLOW, DEFAULT_OUTPUT_CAP_BYTES, DEFAULT_OUTPUT_KILL_AFTER_BYTES, DEFAULT_TIMEOUT,
    HiddenPathSource, KernelSupport, MAX_TIMEOUT, ProcessKind, ResourceLimits, SandboxConfig,
    SandboxPolicy, StateDir,
};
pub use egress::{DNS_PORT, Egress, NetworkEvent, PROXY_PORT};
pub use env::{credential, is_withheld, looks_secret, withhold};
pub use exec::{
    Argv, CommandOutcome, CommandRequest, ExitKind, RunError, StopReason, run_command, shell_quote,
};
pub use output::BoundedOutput;
pub use piped::{PipedIo, PipedProcess, spawn_piped, spawn_piped_argv};
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
