//! A plugin tool as a [`Tool`]: one sandboxed process per call, held by the kernel to what the
//! tool declared.

use std::sync::Arc;

use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Display, DisplayKind, ErrorCode, Risk, SearchMetadata, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use clawsmith_sandbox::{
    Argv, CommandOutcome, CommandRequest, ExitKind, SandboxConfig, StopReason, run_command,
};

use crate::plugin::PluginToolSpec;

/// How much of stderr a failure quotes (its tail).
pub const STDERR_TAIL_BYTES: usize = 2048;

/// The environment variable naming the plugin folder in every plugin process.
pub const PLUGIN_ROOT_VARIABLE: &str = "CLAWSMITH_PLUGIN_ROOT";

/// A plugin tool: runs [`PluginToolSpec::argv`] through clawsmith-sandbox with run_command's
/// limits, the call's arguments as JSON on stdin, the workspace as working directory.
///
/// What the tool may touch is what it declared, and the kernel holds it there: without
/// `filesystem.write` the workspace is bound read-only and Landlock grants no writes (nor do the
/// configured extra writable roots exist for it); without `network` the process has no network
/// namespace to reach out of. A declaration that failed closed declares everything, so such a
/// tool runs like `run_command` (and is `execute`).
#[derive(Debug, Clone)]
pub struct PluginTool {
    spec: Arc<PluginToolSpec>,
    sandbox: SandboxConfig,
}

impl PluginTool {
    /// The tool of `spec`, running under `base` (run_command's configuration) narrowed to the
    /// tool's declared capabilities.
    pub fn new(spec: Arc<PluginToolSpec>, base: &SandboxConfig) -> PluginTool {
        let capabilities = spec.normalized_capabilities();
        let mut sandbox = base.clone();
        if !capabilities.contains(Capability::FilesystemWrite) {
            sandbox.workspace_writable = false;
            sandbox.extra_writable_roots.clear();
        }
        sandbox.network_allowed =
            base.network_allowed && capabilities.contains(Capability::Network);
        // Its own code, seen read-only wherever the folder is (under /tmp or an empty $HOME).
        sandbox.read_only_roots.push(spec.root.clone());
        PluginTool { spec, sandbox }
    }

    /// The declaration and resolved command.
    pub fn spec(&self) -> &PluginToolSpec {
        &self.spec
    }

    /// The sandbox configuration its processes run under.
    pub fn sandbox(&self) -> &SandboxConfig {
        &self.sandbox
    }
}

impl Tool for PluginTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn risk(&self) -> Risk {
        self.spec.risk
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        self.spec.capabilities.clone()
    }

    fn concurrency_safe(&self) -> bool {
        self.spec.concurrency_safe
    }

    fn input_schema(&self) -> serde_json::Value {
        self.spec.input_schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let arguments = serde_json::to_string(input).unwrap_or_default();
        let mut line: String = arguments.chars().take(120).collect();
        if line.len() < arguments.len() {
            line.push('…');
        }
        format!("{} {line}", self.spec.name)
    }

    fn deferred(&self) -> Option<SearchMetadata> {
        self.spec
            .deferred
            .then(|| self.spec.search_metadata.clone().unwrap_or_default())
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(refusal) = context.require_authorization(&self.spec.name) {
                return ToolOutput::Result(refusal);
            }
            // The program and its arguments as words: no shell text is built and parsed back.
            let Some((program, args)) = self.spec.argv.split_first() else {
                return ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::TOOL_FAILED,
                    format!("plugin tool {} has an empty command", self.spec.name),
                ));
            };
            let argv = Argv::new(program, args)
                .with_env(PLUGIN_ROOT_VARIABLE, self.spec.root.to_string_lossy());
            let mut request = CommandRequest::argv(argv);
            request.timeout = self.spec.timeout;
            request.stdin = Some(serde_json::to_vec(&input).unwrap_or_default());
            request.separate_stderr = true;
            // The call's span, as `TRACEPARENT`.
            request.trace = context.trace.clone();
            match run_command(&self.sandbox, &request, &context.cancellation).await {
                Ok(outcome) => ToolOutput::Result(self.result(&outcome)),
                Err(error) => ToolOutput::Result(
                    ToolExecutionResult::failure(
                        error.code(),
                        format!("plugin tool {} did not run: {error}", self.spec.name),
                    )
                    .with_display(self.display(None)),
                ),
            }
        })
    }
}

impl PluginTool {
    fn result(&self, outcome: &CommandOutcome) -> ToolExecutionResult {
        let name = &self.spec.name;
        let stderr = outcome.stderr.as_deref().unwrap_or_default();
        let display = self.display(Some(outcome));
        let stopped = match outcome.stopped {
            Some(StopReason::TimedOut(_)) => Some(ErrorCode::TIMEOUT),
            Some(StopReason::Cancelled) => Some(ErrorCode::CANCELLED),
            Some(StopReason::OutputLimit(_)) => Some(ErrorCode::TOOL_FAILED),
            None => None,
        };
        if let (Some(code), Some(reason)) = (stopped, outcome.stopped) {
            return ToolExecutionResult::failure(code, format!("plugin tool {name}: {reason}"))
                .with_display(display);
        }
        if outcome.exit != ExitKind::Code(0) {
            let mut message = format!("plugin tool {name} failed ({})", outcome.exit);
            let tail = tail(stderr, STDERR_TAIL_BYTES);
            if !tail.is_empty() {
                message.push_str(&format!("; its stderr ended with:\n{tail}"));
            }
            message.push_str(&self.confinement_note());
            return ToolExecutionResult::tool_failed(message).with_display(display);
        }
        match structured(&outcome.output) {
            Some(Structured {
                content,
                error,
                display: own,
            }) => {
                let display = own.unwrap_or(display);
                if error {
                    ToolExecutionResult::tool_failed(content).with_display(display)
                } else {
                    ToolExecutionResult::success(content).with_display(display)
                }
            }
            None => ToolExecutionResult::success(outcome.output.clone()).with_display(display),
        }
    }

    /// What the kernel held the process to, for a failure: a write the tool did not declare is
    /// refused by the kernel, and the model should read that it was, not guess.
    fn confinement_note(&self) -> String {
        let mut notes = Vec::new();
        if !self.sandbox.workspace_writable {
            notes.push(
                "the workspace is read-only to this tool: it did not declare filesystem.write, so \
                 the kernel refuses its writes there",
            );
        }
        if !self.sandbox.network_allowed {
            notes.push("it has no network (network was not declared, or not enabled)");
        }
        if notes.is_empty() {
            String::new()
        } else {
            format!("\n[sandbox: {}]", notes.join("; "))
        }
    }

    fn display(&self, outcome: Option<&CommandOutcome>) -> Display {
        let display = Display::new(DisplayKind::Command)
            .with_title(self.spec.name.clone())
            .with_field("plugin", &self.spec.plugin)
            .with_field(
                "workspace",
                if self.sandbox.workspace_writable {
                    "writable"
                } else {
                    "read-only"
                },
            )
            .with_field("network", self.sandbox.network_allowed);
        let Some(outcome) = outcome else {
            return display;
        };
        let display = display
            .with_field("exit", outcome.exit)
            .with_field("duration ms", outcome.duration.as_millis())
            .with_field("sandbox", outcome.sandbox.summary());
        match &outcome.stderr {
            Some(stderr) if !stderr.is_empty() => {
                display.with_body(tail(stderr, STDERR_TAIL_BYTES).to_owned())
            }
            _ => display,
        }
    }
}

/// A result the plugin printed as `{"content": "…", "status": "success"|"error", "display": …}`.
struct Structured {
    content: String,
    error: bool,
    display: Option<Display>,
}

/// stdout as a structured result, when it is one: an object with a string `content`, and only
/// `status` and `display` besides. Anything else is plain text.
fn structured(stdout: &str) -> Option<Structured> {
    let serde_json::Value::Object(object) = serde_json::from_str(stdout.trim()).ok()? else {
        return None;
    };
    if object
        .keys()
        .any(|key| !["content", "status", "display"].contains(&key.as_str()))
    {
        return None;
    }
    let content = object.get("content")?.as_str()?.to_owned();
    let error = match object.get("status") {
        None => false,
        Some(status) => match status.as_str()? {
            "success" => false,
            "error" => true,
            _ => return None,
        },
    };
    let display = object.get("display").map(|display| {
        serde_json::from_value::<Display>(display.clone()).unwrap_or_else(|_| {
            Display::new(DisplayKind::Json)
                .with_body(serde_json::to_string_pretty(display).unwrap_or_default())
        })
    });
    Some(Structured {
        content,
        error,
        display,
    })
}

/// The last `max` bytes of `text` (at a character boundary), trimmed.
fn tail(text: &str, max: usize) -> &str {
    text[text.ceil_char_boundary(text.len().saturating_sub(max))..].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_results() {
        // (stdout, Some((content, error)) or None for plain text)
        let table: &[(&str, Option<(&str, bool)>)] = &[
            (r#"{"content": "hi"}"#, Some(("hi", false))),
            (
                r#"{"content": "hi", "status": "success"}"#,
                Some(("hi", false)),
            ),
            (
                r#"  {"content": "bad", "status": "error"}  "#,
                Some(("bad", true)),
            ),
            (r#"{"content": "x", "status": "maybe"}"#, None),
            (r#"{"content": 3}"#, None),
            (r#"{"content": "x", "other": 1}"#, None),
            (r#"["content"]"#, None),
            ("plain text", None),
            ("", None),
        ];
        for (stdout, expected) in table {
            let got = structured(stdout).map(|s| (s.content, s.error));
            let expected = expected.map(|(c, e)| (c.to_owned(), e));
            assert_eq!(got, expected, "{stdout}");
        }
    }

    #[test]
    fn tails_cut_at_character_boundaries() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("aé", 1), "");
        assert_eq!(tail("  x  ", 100), "x");
    }
}
