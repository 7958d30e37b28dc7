//! The `run_command` tool (C1, C2, C3, S5).

use std::time::Duration;

use clawsmith_protocol::schema::input_schema;
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Display, DisplayKind, ErrorCode, Risk, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::classify::CommandVerdict;
use crate::config::SandboxConfig;
use crate::exec::{CommandOutcome, CommandRequest, ExitKind, RunError, StopReason, run_command};
use crate::platform::SandboxReport;

/// Input of `run_command`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunCommandInput {
    /// The shell command (run with `bash -c`, or `sh -c` where bash is missing).
    pub command: String,
    /// Working directory: relative to the workspace root, or absolute inside it.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Timeout in milliseconds (default 120000, at most 600000). The whole process group is
    /// killed when it elapses.
    #[serde(default)]
    #[schemars(range(min = 1, max = 600000))]
    pub timeout_ms: Option<u64>,
}

/// `run_command`: runs one shell command in the workspace under the disaster check, the limits
/// and the platform sandbox.
#[derive(Debug, Clone)]
pub struct RunCommandTool {
    config: SandboxConfig,
}

impl RunCommandTool {
    /// A tool running commands under `config`.
    pub fn new(config: SandboxConfig) -> RunCommandTool {
        RunCommandTool { config }
    }

    /// The configuration commands run under.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }
}

pub(crate) fn command_capabilities(config: &SandboxConfig) -> CapabilityDeclaration {
    let mut capabilities = vec![Capability::ProcessExecute];
    if config.network_allowed {
        capabilities.push(Capability::Network);
    }
    CapabilityDeclaration::Declared(capabilities)
}

/// First line of a command, bounded, for summaries and titles.
pub(crate) fn one_line(command: &str) -> String {
    let first = command.lines().next().unwrap_or("");
    let mut line: String = first.chars().take(160).collect();
    if line.len() < command.len() {
        line.push('…');
    }
    line
}

pub(crate) fn blocked_result(verdict: &CommandVerdict, command: &str) -> ToolExecutionResult {
    let rule = verdict.rule.unwrap_or("disaster_check");
    ToolExecutionResult::failure(
        ErrorCode::COMMAND_BLOCKED,
        format!(
            "Command blocked by the disaster check (rule {rule}): {}. No approval can override \
             this check.",
            verdict.reason
        ),
    )
    .with_display(
        Display::new(DisplayKind::Command)
            .with_title(one_line(command))
            .with_field("verdict", "blocked")
            .with_field("rule", rule)
            .with_field("reason", &verdict.reason),
    )
}

pub(crate) fn sandbox_fields(display: Display, report: &SandboxReport) -> Display {
    let display = display
        .with_field("sandbox policy", report.policy.as_str())
        .with_field(
            "sandbox",
            if report.confined {
                "confined"
            } else {
                "unconfined"
            },
        )
        .with_field("filesystem", &report.filesystem)
        .with_field("network", &report.network)
        .with_field("protected paths", &report.protected)
        .with_field("no_new_privs", report.no_new_privs);
    match &report.unconfined_reason {
        Some(reason) => display.with_field("unconfined because", reason),
        None => display,
    }
}

/// What the sandbox refused a command, as far as its hints need to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefusalPolicy {
    /// The command ran confined (the refusals below are the sandbox's).
    pub(crate) confined: bool,
    /// The command had the network.
    pub(crate) network_allowed: bool,
    /// The command's network was an allowlist.
    pub(crate) allowlist: bool,
}

/// What a failed command's output says the sandbox refused, as lines the model can act on: a
/// name that did not resolve while the network is off, or a missing path under `/tmp` (the
/// command's private, empty `/tmp`). A command that succeeded, or ran unconfined, gets none.
pub(crate) fn refusal_hints(
    policy: RefusalPolicy,
    failed: bool,
    output: &str,
) -> Vec<&'static str> {
    const RESOLUTION_FAILURES: &[&str] = &[
        "Could not resolve host",
        "Temporary failure in name resolution",
        "Name or service not known",
        "getaddrinfo",
        "Network is unreachable",
        "Failed to establish a new connection",
    ];
    let mut hints = Vec::new();
    if !failed || !policy.confined {
        return hints;
    }
    if !policy.network_allowed
        && RESOLUTION_FAILURES
            .iter()
            .any(|failure| output.contains(failure))
    {
        hints.push(if policy.allowlist {
            "the network is an allowlist: only names an `allow` rule under [network] in \
             clawsmith.toml names resolve and are reached (the [network: …] lines say what was \
             refused and why); a person can add a rule"
        } else {
            "the network is off for commands (loopback only), so names do not resolve; a person \
             can allow it with `--allow-network` on the clawsmith command line"
        });
    }
    let missing_in_tmp = output.lines().any(|line| {
        line.contains("/tmp/")
            && (line.contains("No such file or directory") || line.contains("not found"))
    });
    if missing_in_tmp {
        hints.push(
            "/tmp is the command's own private, empty /tmp: the host's /tmp is not visible; keep \
             the files in the workspace (or a folder listed in `writable_roots` of clawsmith.toml)",
        );
    }
    hints
}

/// The lines a result gets for the connections the network allowlist's gateway decided while
/// the command ran: one per distinct event, refused ones saying why.
fn network_lines(outcome: &CommandOutcome) -> String {
    let mut lines = String::new();
    for event in &outcome.network {
        lines.push_str(&format!("\n[network: {event}]"));
    }
    if outcome.network_unlisted > 0 {
        lines.push_str(&format!(
            "\n[network: {} more events not listed]",
            outcome.network_unlisted
        ));
    }
    if outcome.network_shared && !outcome.network.is_empty() {
        lines.push_str(
            "\n[network: another command ran in the same network namespace meanwhile; some of \
             these may be its connections]",
        );
    }
    lines
}

fn outcome_result(command: &str, outcome: &CommandOutcome) -> ToolExecutionResult {
    let mut content = outcome.output.clone();
    if !content.is_empty() && !content.ends_with('\n') {
        content.push('\n');
    }
    content.push_str(&format!("[{}]", outcome.exit));
    if let Some(stopped) = outcome.stopped {
        content.push_str(&format!("\n[{stopped}]"));
    }
    if !outcome.sandbox.confined {
        content.push_str(&format!("\n[sandbox: {}]", outcome.sandbox.summary()));
    }
    if !outcome.git_restored.is_empty() {
        content.push_str(&format!(
            "\n[sandbox: commands cannot make git run code; took back what the command created: \
             {}]",
            outcome.git_restored.join(", ")
        ));
    }
    content.push_str(&network_lines(outcome));
    let display = Display::new(DisplayKind::Command)
        .with_title(one_line(command))
        .with_body(outcome.output.clone())
        .with_field("exit", outcome.exit)
        .with_field("duration ms", outcome.duration.as_millis())
        .with_field("output bytes", outcome.total_output_bytes)
        .with_field("truncated", outcome.truncated);
    let display = if outcome.git_restored.is_empty() {
        display
    } else {
        display.with_field("git restored", outcome.git_restored.join(", "))
    };
    let display = match outcome.stopped {
        Some(stopped) => display.with_field("stopped", stopped),
        None => display,
    };
    let display = if outcome.network.is_empty() {
        display
    } else {
        display
            .with_field(
                "network allowed",
                outcome.network.iter().filter(|event| event.allowed).count(),
            )
            .with_field(
                "network refused",
                outcome
                    .network
                    .iter()
                    .filter(|event| !event.allowed)
                    .count(),
            )
    };
    let display = sandbox_fields(display, &outcome.sandbox);
    let failure = match outcome.stopped {
        Some(StopReason::Cancelled) => Some(ErrorCode::CANCELLED),
        Some(StopReason::TimedOut(_)) => Some(ErrorCode::TIMEOUT),
        _ => None,
    };
    if let Some(code) = failure {
        let mut result = ToolExecutionResult::failure(code, content);
        result.metadata.display = Some(display.bounded());
        return result;
    }
    ToolExecutionResult::success(content).with_display(display)
}

impl Tool for RunCommandTool {
    fn name(&self) -> &str {
        "run_command"
    }

    fn description(&self) -> &str {
        "Run a shell command in the workspace and return its exit code and merged stdout/stderr \
         (bounded; cut output is marked). Runs with a minimal environment, resource limits, a \
         timeout that kills the whole process group, and a kernel sandbox: writes only inside \
         the workspace and a private TMPDIR, no network unless enabled. Disastrous commands \
         (sudo, disk formatting, rm -rf /, shutdown, …) are refused. Standard input is empty: \
         use start_command for interactive or long-running programs."
    }

    fn risk(&self) -> Risk {
        Risk::Execute
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        command_capabilities(&self.config)
    }

    fn concurrency_safe(&self) -> bool {
        false
    }

    fn input_schema(&self) -> serde_json::Value {
        input_schema::<RunCommandInput>()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        match input.get("command").and_then(serde_json::Value::as_str) {
            Some(command) => format!("run_command: {}", one_line(command)),
            None => "run_command".to_owned(),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(refusal) = context.require_authorization("run_command") {
                return ToolOutput::Result(refusal);
            }
            let input: RunCommandInput = match serde_json::from_value(input) {
                Ok(input) => input,
                Err(error) => {
                    return ToolExecutionResult::failure(
                        ErrorCode::INVALID_ARGUMENTS,
                        format!("invalid run_command arguments: {error}"),
                    )
                    .into();
                }
            };
            // `run_command` runs the disaster check first, before any path or sandbox work.
            let request = CommandRequest {
                command: input.command.clone(),
                argv: None,
                cwd: input.cwd,
                timeout: input.timeout_ms.map(Duration::from_millis),
                stdin: None,
                separate_stderr: false,
                trace: context.trace.clone(),
            };
            match run_command(&self.config, &request, &context.cancellation).await {
                Ok(outcome) => {
                    let mut result = outcome_result(&input.command, &outcome);
                    let failed = outcome.exit != ExitKind::Code(0);
                    let policy = RefusalPolicy {
                        confined: outcome.sandbox.confined,
                        network_allowed: self.config.network_allowed,
                        allowlist: self.config.egress.is_some(),
                    };
                    for hint in refusal_hints(policy, failed, &outcome.output) {
                        result.content.push_str(&format!("\n[sandbox: {hint}]"));
                    }
                    result.into()
                }
                Err(RunError::Blocked(verdict)) => blocked_result(&verdict, &input.command).into(),
                Err(error) => ToolExecutionResult::failure(error.code(), error.to_string())
                    .with_display(
                        Display::new(DisplayKind::Command)
                            .with_title(one_line(&input.command))
                            .with_field("error", &error),
                    )
                    .into(),
            }
        })
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::{RefusalPolicy, refusal_hints};

    const CONFINED_OFFLINE: RefusalPolicy = RefusalPolicy {
        confined: true,
        network_allowed: false,
        allowlist: false,
    };

    fn check(policy: RefusalPolicy, failed: bool, output: &str, expected: &[&str]) {
        let hints = refusal_hints(policy, failed, output);
        assert_eq!(hints.len(), expected.len(), "{output:?}: {hints:?}");
        for (hint, starts) in hints.iter().zip(expected) {
            assert!(hint.starts_with(starts), "{output:?}: {hint}");
        }
    }

    #[test]
    fn hints_name_what_the_sandbox_refused() {
        let network = "the network is off for commands";
        let tmp = "/tmp is the command's own private";
        let online = RefusalPolicy {
            network_allowed: true,
            ..CONFINED_OFFLINE
        };
        let unconfined = RefusalPolicy {
            confined: false,
            ..CONFINED_OFFLINE
        };
        let allowlist = RefusalPolicy {
            allowlist: true,
            ..CONFINED_OFFLINE
        };
        let listed = "the network is an allowlist";
        let resolve = "curl: (6) Could not resolve host: example.com";
        let missing = "cat: /tmp/notes.txt: No such file or directory";
        // (policy, failed, output, hints)
        let table: [(RefusalPolicy, bool, &str, &[&str]); 11] = [
            (CONFINED_OFFLINE, true, resolve, &[network]),
            (allowlist, true, resolve, &[listed]),
            (allowlist, false, resolve, &[]),
            (
                CONFINED_OFFLINE,
                true,
                "socket.gaierror: [Errno -3] Temporary failure in name resolution",
                &[network],
            ),
            (CONFINED_OFFLINE, true, missing, &[tmp]),
            (
                CONFINED_OFFLINE,
                true,
                &format!("{resolve}\n{missing}"),
                &[network, tmp],
            ),
            (online, true, resolve, &[]),
            (online, true, missing, &[tmp]),
            (unconfined, true, resolve, &[]),
            (CONFINED_OFFLINE, false, resolve, &[]),
            (
                CONFINED_OFFLINE,
                true,
                "cat: notes.txt: No such file or directory",
                &[],
            ),
        ];
        for (policy, failed, output, expected) in table {
            check(policy, failed, output, expected);
        }
    }
}

#[cfg(test)]
mod network_tests {
    use std::time::Duration;

    use super::{network_lines, outcome_result};
    use crate::{CommandOutcome, ExitKind, NetworkEvent, SandboxPolicy, SandboxReport};

    fn outcome(network: Vec<NetworkEvent>, unlisted: u64, shared: bool) -> CommandOutcome {
        CommandOutcome {
            exit: ExitKind::Code(7),
            output: "curl: (56) CONNECT tunnel failed, response 403\n".to_owned(),
            stderr: None,
            truncated: false,
            total_output_bytes: 47,
            stopped: None,
            sandbox: SandboxReport {
                policy: SandboxPolicy::Required,
                confined: true,
                filesystem: String::new(),
                network: "allowlist".to_owned(),
                protected: String::new(),
                no_new_privs: true,
                unconfined_reason: None,
            },
            process_group: 1,
            duration: Duration::from_millis(5),
            git_restored: Vec::new(),
            network,
            network_unlisted: unlisted,
            network_shared: shared,
        }
    }

    fn event(host: &str, allowed: bool, count: u32) -> NetworkEvent {
        NetworkEvent {
            host: host.to_owned(),
            port: 443,
            protocol: "http-connect",
            allowed,
            reason: format!("{host}:443 is not in the network allowlist"),
            count,
        }
    }

    #[test]
    fn the_result_lists_each_connection_the_gateway_decided() {
        let outcome = outcome(
            vec![event("evil.test", false, 3), event("ok.test", true, 1)],
            5,
            true,
        );
        let lines = network_lines(&outcome);
        assert_eq!(
            lines,
            "\n[network: refused evil.test:443 (http-connect): evil.test:443 is not in the \
             network allowlist (×3)]\n[network: allowed ok.test:443 (http-connect): ok.test:443 \
             is not in the network allowlist]\n[network: 5 more events not listed]\n[network: \
             another command ran in the same network namespace meanwhile; some of these may be \
             its connections]"
        );
        let result = outcome_result("curl https://evil.test", &outcome);
        assert!(result.content.ends_with(&lines), "{}", result.content);
        // No allowlist, no lines.
        assert_eq!(network_lines(&self::outcome(Vec::new(), 0, true)), "");
    }
}
