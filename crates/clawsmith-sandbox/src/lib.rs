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
mod tool;

pub use config::{
    DEFAULT_OUTPUT_CAP_BYTES, DEFAULT_OUTPUT_KILL_AFTER_BYTES, DEFAULT_TIMEOUT, KernelSupport,
    MAX_TIMEOUT, ResourceLimits, SandboxConfig, SandboxPolicy,
};
pub use env::looks_secret;
pub use exec::{CommandOutcome, CommandRequest, ExitKind, RunError, StopReason, run_command};
pub use output::BoundedOutput;
pub use platform::SandboxReport;
pub use tool::{RunCommandInput, RunCommandTool};
