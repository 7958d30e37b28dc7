//! The eight background-command tools (C4) over a shared [`CommandExecutionService`].

use std::sync::Arc;

use clawsmith_protocol::schema::{input_schema, parse_input};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Display, DisplayKind, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::exec::RunError;
use crate::service::{CommandExecutionService, ServiceError, StartRequest};
use crate::tool::{blocked_result, command_capabilities, one_line, sandbox_fields};

/// Input of `start_command`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartCommandInput {
    /// The shell command (`bash -c`).
    pub command: String,
    /// Working directory inside the workspace.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Run on a pseudo-terminal (for interactive programs); the result carries a control token.
    #[serde(default)]
    pub pty: bool,
    /// PTY columns (default 80).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub cols: Option<u16>,
    /// PTY rows (default 24).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub rows: Option<u16>,
}

/// Input of `list_commands`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListCommandsInput {}

/// Input of `command_terminal_capabilities`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TerminalCapabilitiesInput {
    /// A command to ask about; without it, what the service can do.
    #[serde(default)]
    pub command_id: Option<String>,
}

/// Input of `command_status` and `cancel_command`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandIdInput {
    /// The id `start_command` returned.
    pub command_id: String,
}

/// Input of `command_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandOutputInput {
    /// The id `start_command` returned.
    pub command_id: String,
    /// Byte offset in the log (default 0); pass the previous `nextOffset` to read on.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Bytes to return at most (default 65536, at most 1048576).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1048576))]
    pub max_bytes: Option<u64>,
}

/// Input of `command_input`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandInputInput {
    /// The id `start_command` returned.
    pub command_id: String,
    /// Text to send (include `\n` to press Enter).
    pub data: String,
    /// The control token (required for PTY commands).
    #[serde(default)]
    pub token: Option<String>,
}

/// Input of `resize_command_pty`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResizeInput {
    /// The id `start_command` returned.
    pub command_id: String,
    /// New columns.
    #[schemars(range(min = 1, max = 1000))]
    pub cols: u16,
    /// New rows.
    #[schemars(range(min = 1, max = 1000))]
    pub rows: u16,
    /// The control token.
    pub token: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Start,
    List,
    Capabilities,
    Status,
    Output,
    Input,
    Resize,
    Cancel,
}

const KINDS: [Kind; 8] = [
    Kind::Start,
    Kind::List,
    Kind::Capabilities,
    Kind::Status,
    Kind::Output,
    Kind::Input,
    Kind::Resize,
    Kind::Cancel,
];

/// The eight tools, in a stable order: `start_command`, `list_commands`,
/// `command_terminal_capabilities`, `command_status`, `command_output`, `command_input`,
/// `resize_command_pty`, `cancel_command`.
pub fn command_tools(service: Arc<CommandExecutionService>) -> Vec<Arc<dyn Tool>> {
    KINDS
        .into_iter()
        .map(|kind| {
            Arc::new(CommandTool {
                kind,
                service: Arc::clone(&service),
            }) as Arc<dyn Tool>
        })
        .collect()
}

struct CommandTool {
    kind: Kind,
    service: Arc<CommandExecutionService>,
}

// A refusal is a full result, as `require_authorization` returns it.
#[allow(clippy::result_large_err)]
fn json_result(value: &impl serde::Serialize, display: Display) -> ToolExecutionResult {
    let content = serde_json::to_string_pretty(value).unwrap_or_else(|e| e.to_string());
    ToolExecutionResult::success(content).with_display(display)
}

fn service_failure(error: &ServiceError) -> ToolExecutionResult {
    ToolExecutionResult::failure(error.code(), error.to_string())
}

impl CommandTool {
    async fn run(
        &self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolExecutionResult {
        let name = self.name().to_owned();
        if self.risk() == Risk::Execute
            && let Err(refusal) = context.require_authorization(&name)
        {
            return refusal;
        }
        match self.run_parsed(&name, input).await {
            Ok(result) | Err(result) => result,
        }
    }

    #[allow(clippy::result_large_err)]
    async fn run_parsed(
        &self,
        name: &str,
        input: serde_json::Value,
    ) -> Result<ToolExecutionResult, ToolExecutionResult> {
        let service = &self.service;
        let display = |title: String| Display::new(DisplayKind::Json).with_title(title);
        Ok(match self.kind {
            Kind::Start => {
                let input: StartCommandInput = parse_input(name, input)?;
                // `start` runs the disaster check first, before any other work.
                let started = service
                    .start(StartRequest {
                        command: input.command.clone(),
                        cwd: input.cwd,
                        pty: input.pty,
                        cols: input.cols,
                        rows: input.rows,
                    })
                    .await
                    .map_err(|error| match error {
                        ServiceError::Run(RunError::Blocked(verdict)) => {
                            blocked_result(&verdict, &input.command)
                        }
                        error => service_failure(&error),
                    })?;
                let shown = Display::new(DisplayKind::Command)
                    .with_title(one_line(&input.command))
                    .with_field("commandId", &started.command_id)
                    .with_field("pty", started.pty);
                let shown = sandbox_fields(shown, &started.sandbox_report);
                json_result(&started, shown)
            }
            Kind::List => {
                let _: ListCommandsInput = parse_input(name, input)?;
                let list = service.list();
                let count = list.len();
                json_result(
                    &serde_json::json!({ "commands": list }),
                    display(format!("{count} background commands")),
                )
            }
            Kind::Capabilities => {
                let input: TerminalCapabilitiesInput = parse_input(name, input)?;
                let pty = match &input.command_id {
                    Some(id) => Some(service.status(id).map_err(|e| service_failure(&e))?.pty),
                    None => None,
                };
                let value = serde_json::json!({
                    "commandId": input.command_id,
                    "pty": pty.unwrap_or(true),
                    "resize": pty.unwrap_or(true),
                    "ansi": pty.unwrap_or(true),
                    "input": true,
                    "inputRequiresToken": pty.unwrap_or(true),
                    "takeover": false,
                });
                json_result(&value, display("terminal capabilities".to_owned()))
            }
            Kind::Status => {
                let input: CommandIdInput = parse_input(name, input)?;
                let status = service
                    .status(&input.command_id)
                    .map_err(|e| service_failure(&e))?;
                let shown = display(format!("{} {:?}", status.command_id, status.state))
                    .with_field("command", one_line(&status.command));
                json_result(&status, shown)
            }
            Kind::Output => {
                let input: CommandOutputInput = parse_input(name, input)?;
                let chunk = service
                    .output(
                        &input.command_id,
                        input.offset.unwrap_or(0),
                        input.max_bytes,
                    )
                    .map_err(|e| service_failure(&e))?;
                let shown = Display::new(DisplayKind::Command)
                    .with_title(format!("{} output", chunk.command_id))
                    .with_body(chunk.data.clone())
                    .with_field("offset", chunk.offset)
                    .with_field("nextOffset", chunk.next_offset);
                json_result(&chunk, shown)
            }
            Kind::Input => {
                let input: CommandInputInput = parse_input(name, input)?;
                let written = service
                    .input(&input.command_id, &input.data, input.token.as_deref())
                    .await
                    .map_err(|e| service_failure(&e))?;
                json_result(
                    &serde_json::json!({ "commandId": input.command_id, "bytesWritten": written }),
                    display(format!("input to {}", input.command_id)),
                )
            }
            Kind::Resize => {
                let input: ResizeInput = parse_input(name, input)?;
                service
                    .resize(
                        &input.command_id,
                        input.cols,
                        input.rows,
                        Some(&input.token),
                    )
                    .map_err(|e| service_failure(&e))?;
                json_result(
                    &serde_json::json!({
                        "commandId": input.command_id, "cols": input.cols, "rows": input.rows
                    }),
                    display(format!("resized {}", input.command_id)),
                )
            }
            Kind::Cancel => {
                let input: CommandIdInput = parse_input(name, input)?;
                service
                    .cancel(&input.command_id)
                    .map_err(|e| service_failure(&e))?;
                let grace = service.config().sandbox.kill_grace;
                let status = service
                    .wait(&input.command_id, grace + std::time::Duration::from_secs(3))
                    .await
                    .map_err(|e| service_failure(&e))?;
                json_result(&status, display(format!("cancelled {}", status.command_id)))
            }
        })
    }
}

impl Tool for CommandTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Start => "start_command",
            Kind::List => "list_commands",
            Kind::Capabilities => "command_terminal_capabilities",
            Kind::Status => "command_status",
            Kind::Output => "command_output",
            Kind::Input => "command_input",
            Kind::Resize => "resize_command_pty",
            Kind::Cancel => "cancel_command",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::Start => {
                "Start a shell command in the background (same disaster check, limits and \
                 sandbox as run_command) and return its commandId at once; with pty=true it runs \
                 on a terminal and the result carries the control token needed for input and \
                 resize. Read its output with command_output."
            }
            Kind::List => "List background commands with their state and exit code.",
            Kind::Capabilities => {
                "What the background terminal supports (PTY, resize, ANSI output, takeover), \
                 overall or for one command."
            }
            Kind::Status => "State, exit code and log reference of one background command.",
            Kind::Output => {
                "Read a background command's output log incrementally: pass offset (the previous \
                 nextOffset) and maxBytes."
            }
            Kind::Input => {
                "Send text to a background command's standard input, or to its terminal (PTY \
                 commands need the control token)."
            }
            Kind::Resize => "Resize a PTY command's terminal (needs the control token).",
            Kind::Cancel => "Stop a background command and its whole process tree.",
        }
    }

    fn risk(&self) -> Risk {
        match self.kind {
            Kind::List | Kind::Capabilities | Kind::Status | Kind::Output => Risk::Read,
            Kind::Start | Kind::Input | Kind::Resize | Kind::Cancel => Risk::Execute,
        }
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        match self.kind {
            Kind::Start => command_capabilities(&self.service.config().sandbox),
            Kind::Input | Kind::Resize | Kind::Cancel => {
                CapabilityDeclaration::Declared(vec![Capability::ProcessExecute])
            }
            Kind::List | Kind::Capabilities | Kind::Status | Kind::Output => {
                CapabilityDeclaration::Declared(vec![Capability::SessionRead])
            }
        }
    }

    fn concurrency_safe(&self) -> bool {
        self.risk() == Risk::Read
    }

    fn input_schema(&self) -> serde_json::Value {
        match self.kind {
            Kind::Start => input_schema::<StartCommandInput>(),
            Kind::List => input_schema::<ListCommandsInput>(),
            Kind::Capabilities => input_schema::<TerminalCapabilitiesInput>(),
            Kind::Status | Kind::Cancel => input_schema::<CommandIdInput>(),
            Kind::Output => input_schema::<CommandOutputInput>(),
            Kind::Input => input_schema::<CommandInputInput>(),
            Kind::Resize => input_schema::<ResizeInput>(),
        }
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let text = |key: &str| input.get(key).and_then(serde_json::Value::as_str);
        match (self.kind, text("command"), text("commandId")) {
            (Kind::Start, Some(command), _) => format!("start_command: {}", one_line(command)),
            (_, _, Some(id)) => format!("{} {id}", self.name()),
            _ => self.name().to_owned(),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move { ToolOutput::Result(self.run(input, context).await) })
    }
}
