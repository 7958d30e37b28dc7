//! # clawsmith-sandbox
//!
//! The only crate of clawsmith that spawns processes (SPEC C1–C4).
//!
//! ## Main types
//! - [`classify::check_command`]: the disaster check (C1), a pure function over the command text
//!   that runs before anything else and that no approval overrides.
//! - [`SandboxConfig`]: workspace, limits, environment allow-list, writable roots, protected
//!   paths, network flag and [`SandboxPolicy`].
//! - [`run_command`]: runs one command to completion.
pub mod classify;

mod child;
mod config;
mod env;
mod exec;
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
