//! Hooks (S3): in-process [`Hook`]s and external [`CommandHook`]s. Both see the normalized
//! [`HookInput`] and answer a [`HookDecision`]; a broken hook denies (fail closed) with the
//! reason shown.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;

use clawsmith_security::{HookDecision, HookInput, HookVerdict};
use tokio::io::AsyncWriteExt;

/// The future a hook returns.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = HookDecision> + Send + 'a>>;

/// A hook consulted before the permission check of every call. `deny` refuses the call
/// (`hook_denied`); `ask` requires approval even where the mode would allow; `allow` leaves the
/// decision to the permission policy (a hook can never *grant* what the policy refuses).
pub trait Hook: Send + Sync {
    /// A short name shown in refusals, e.g. `no-push`.
    fn name(&self) -> &str;
    /// Decides about one call.
    fn check<'a>(&'a self, input: &'a HookInput) -> HookFuture<'a>;
}

/// Default time an external hook may take.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this much of a hook's stdout is read as its decision.
pub const HOOK_OUTPUT_MAX_BYTES: usize = 64 * 1024;

/// An external hook: the program gets the [`HookInput`] as JSON on stdin and must print a
/// [`HookDecision`] as JSON on stdout (`{"decision": "allow" | "ask" | "deny", "reason": "…"}`)
/// and exit 0. A non-zero exit, output that is not a decision, or running past the timeout
/// denies the call, and the refusal says which of these happened.
///
/// The program runs with a minimal environment (`PATH`, `HOME`, `LANG`, `TMPDIR` when set), its
/// own stdin/stdout pipes, and is killed if it outlives the timeout.
#[derive(Debug, Clone)]
pub struct CommandHook {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    timeout: Duration,
}

impl CommandHook {
    /// A hook that runs `program` with `args`.
    pub fn new(name: impl Into<String>, program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        CommandHook {
            name: name.into(),
            program: program.into(),
            args,
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn deny(&self, why: impl std::fmt::Display) -> HookDecision {
        HookDecision {
            decision: HookVerdict::Deny,
            reason: Some(why.to_string()),
        }
    }

    async fn run(&self, input: &HookInput) -> HookDecision {
        let payload = match serde_json::to_vec(input) {
            Ok(payload) => payload,
            Err(error) => return self.deny(format_args!("could not be given its input: {error}")),
        };
        // clawsmith-sandbox owns command execution for the *model's* commands (disaster check,
        // Landlock, limits) but offers no plain spawn helper; a hook is a program the host
        // configured, so it is spawned here with tokio (not std::process, which clippy.toml
        // reserves for the sandbox) with a minimal environment and a timeout.
        // The documented exception to "only the sandbox spawns" (ARCHITECTURE): a hook is the
        // user's own program, run with an empty environment, never a model's command.
        #[allow(clippy::disallowed_methods)]
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for variable in ["PATH", "HOME", "LANG", "TMPDIR"] {
            if let Some(value) = std::env::var_os(variable) {
                command.env(variable, value);
            }
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                return self.deny(format_args!(
                    "could not be started ({}): {error}",
                    self.program.display()
                ));
            }
        };
        let stdin = child.stdin.take();
        let exchange = async move {
            if let Some(mut stdin) = stdin {
                // A hook that exits without reading its input is not an error by itself.
                let _ = stdin.write_all(&payload).await;
                drop(stdin);
            }
            child.wait_with_output().await
        };
        let output = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                return self.deny(format_args!(
                    "timed out after {} ms",
                    self.timeout.as_millis()
                ));
            }
            Ok(Err(error)) => return self.deny(format_args!("failed: {error}")),
            Ok(Ok(output)) => output,
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let first_line = stderr.lines().next().unwrap_or("").trim();
            let status = output
                .status
                .code()
                .map_or_else(|| "a signal".to_owned(), |code| code.to_string());
            return self.deny(format_args!(
                "exited with status {status}{}{first_line}",
                if first_line.is_empty() { "" } else { ": " }
            ));
        }
        let stdout = &output.stdout[..output.stdout.len().min(HOOK_OUTPUT_MAX_BYTES)];
        match serde_json::from_slice::<HookDecision>(stdout) {
            Ok(decision) => decision,
            Err(error) => self.deny(format_args!("returned invalid output: {error}")),
        }
    }
}

impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn check<'a>(&'a self, input: &'a HookInput) -> HookFuture<'a> {
        Box::pin(self.run(input))
    }
}
