//! Hooks (S3): in-process [`Hook`]s and external [`CommandHook`]s. Both see the normalized
//! [`HookInput`] and answer a [`HookDecision`]; a broken hook denies (fail closed) with the
//! reason shown.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use clawsmith_sandbox::{ExitKind, PipedIo, SandboxConfig};
use clawsmith_security::{HookDecision, HookInput, HookVerdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
/// This is the hook as configured; the core runs it only confined
/// ([`CoreConfig::command_hooks`](crate::CoreConfig::command_hooks)): through `clawsmith-sandbox` under the hook profile of the
/// core's sandbox — the workspace read-only, no network, the state directory, hidden paths and
/// everything of `$HOME` outside its allowlist out of sight, the command environment (no
/// secrets), its own private `/tmp` — and its whole process tree is killed at the timeout.
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

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hook, run under `sandbox` (the core's hook profile), seeing its own program and
    /// script read-only wherever they are ([`SandboxConfig::seeing_code_of`]).
    pub(crate) fn confined(self, sandbox: SandboxConfig) -> ConfinedHook {
        let words = std::iter::once(self.program.to_string_lossy().into_owned())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>();
        let sandbox = sandbox.seeing_code_of(&words);
        ConfinedHook {
            hook: self,
            sandbox,
        }
    }
}

/// A [`CommandHook`] with the sandbox it runs in.
pub(crate) struct ConfinedHook {
    hook: CommandHook,
    sandbox: SandboxConfig,
}

impl ConfinedHook {
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
        let program = self.hook.program.to_string_lossy();
        let argv = clawsmith_sandbox::Argv::new(program.as_ref(), &self.hook.args);
        let (mut process, io) =
            match clawsmith_sandbox::spawn_piped_argv(&self.sandbox, &argv, None) {
                Ok(started) => started,
                Err(error) => {
                    return self.deny(format_args!("could not be started ({program}): {error}"));
                }
            };
        let PipedIo {
            mut stdin,
            stdout,
            stderr,
        } = io;
        let exchange = async {
            // A hook that exits without reading its input is not an error by itself.
            let _ = stdin.write_all(&payload).await;
            drop(stdin);
            let limit = HOOK_OUTPUT_MAX_BYTES as u64 + 1;
            let mut out = Vec::new();
            let mut err = Vec::new();
            let mut stdout = stdout.take(limit);
            let mut stderr = stderr.take(limit);
            let (_, _) = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            let status = process.wait().await;
            (status, out, err)
        };
        let (status, stdout, stderr) = match tokio::time::timeout(self.hook.timeout, exchange).await
        {
            Err(_) => {
                return self.deny(format_args!(
                    "timed out after {} ms",
                    self.hook.timeout.as_millis()
                ));
            }
            Ok(done) => done,
        };
        let status = match status {
            Ok(status) => status,
            Err(error) => return self.deny(format_args!("failed: {error}")),
        };
        if status != ExitKind::Code(0) {
            let stderr = String::from_utf8_lossy(&stderr);
            let first_line = stderr.lines().next().unwrap_or("").trim();
            let status = match status {
                ExitKind::Code(127) => {
                    return self.deny(format_args!(
                        "could not be started ({program}): {}",
                        if first_line.is_empty() {
                            "not found"
                        } else {
                            first_line
                        }
                    ));
                }
                ExitKind::Code(code) => code.to_string(),
                _ => "a signal".to_owned(),
            };
            return self.deny(format_args!(
                "exited with status {status}{}{first_line}",
                if first_line.is_empty() { "" } else { ": " }
            ));
        }
        if stdout.len() > HOOK_OUTPUT_MAX_BYTES {
            return self.deny(format_args!(
                "returned invalid output: more than {HOOK_OUTPUT_MAX_BYTES} bytes"
            ));
        }
        match serde_json::from_slice::<HookDecision>(&stdout) {
            Ok(decision) => decision,
            Err(error) => self.deny(format_args!("returned invalid output: {error}")),
        }
    }
}

impl Hook for ConfinedHook {
    fn name(&self) -> &str {
        &self.hook.name
    }

    fn check<'a>(&'a self, input: &'a HookInput) -> HookFuture<'a> {
        Box::pin(self.run(input))
    }
}
