//! Session tools (A2): `todo_write` / `todo_list` over the store's `session_todos`, and
//! `read_artifact` over the session's artifacts.

// A refusal *is* a `ToolExecutionResult` (data for the model); it is built once per call and
// moved, so boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use clawsmith_protocol::schema::{input_schema, parse_input};
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Display, DisplayKind, ErrorCode, Risk, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use clawsmith_store::{SessionStore, StoreError, Todo, TodoStatus};
use schemars::JsonSchema;
use serde::Deserialize;

/// `read_artifact` returns at most this many bytes per call (below the artifact threshold, so
/// reading an artifact never creates another one).
pub const READ_ARTIFACT_MAX_BYTES: usize = 32 * 1024;
/// Default `maxBytes` of `read_artifact`.
pub const READ_ARTIFACT_DEFAULT_BYTES: usize = 16 * 1024;
/// Maximum number of matching lines a `query` returns.
pub const READ_ARTIFACT_MAX_MATCHES: usize = 200;

/// The error code of an artifact id that is unknown in this session.
pub const ARTIFACT_NOT_FOUND: ErrorCode = ErrorCode::from_static("artifact_not_found");

fn render_todos(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "The todo list is empty.".to_owned();
    }
    let mut text = String::new();
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        text.push_str(&format!("{mark} {} ({})\n", todo.content, todo.id));
    }
    text
}

fn store_failure(tool: &str, error: &StoreError) -> ToolExecutionResult {
    ToolExecutionResult::tool_failed(format!("{tool} could not use the session store: {error}"))
}

/// `todo_write`: replaces the whole list.
pub(crate) struct TodoWriteTool {
    store: Arc<dyn SessionStore>,
}

impl TodoWriteTool {
    pub(crate) fn new(store: Arc<dyn SessionStore>) -> Self {
        TodoWriteTool { store }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoWriteInput {
    /// The complete new list.
    todos: Vec<TodoItem>,
}

/// One item of `todo_write`'s list.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TodoItem {
    /// Stable id of the item.
    #[schemars(length(min = 1))]
    id: String,
    /// What to do.
    #[schemars(length(min = 1))]
    content: String,
    /// Where it stands.
    status: TodoStatus,
}

impl From<TodoItem> for Todo {
    fn from(item: TodoItem) -> Todo {
        Todo {
            id: item.id,
            content: item.content,
            status: item.status,
        }
    }
}

/// `todo_list` takes no arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TodoListInput {}

impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        "todo_write"
    }

    fn description(&self) -> &str {
        "Replace the session's whole todo list. Each item has an id, content and a status \
         (pending, in_progress, completed); at most one item may be in_progress."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::SessionWrite])
    }

    fn concurrency_safe(&self) -> bool {
        false
    }

    fn input_schema(&self) -> serde_json::Value {
        input_schema::<TodoWriteInput>()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let count = input
            .get("todos")
            .and_then(serde_json::Value::as_array)
            .map_or(0, Vec::len);
        format!("write {count} todos")
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: TodoWriteInput = match parse_input(self.name(), input) {
                Ok(input) => input,
                Err(failure) => return ToolOutput::Result(failure),
            };
            let count = input.todos.len();
            let todos = input.todos.into_iter().map(Todo::from).collect();
            match self.store.set_todos(&context.session_id, todos) {
                Ok(()) => {}
                Err(StoreError::InvalidTodos(message)) => {
                    return ToolOutput::Result(ToolExecutionResult::failure(
                        ErrorCode::INVALID_ARGUMENTS,
                        format!("Invalid todo list: {message}"),
                    ));
                }
                Err(error) => return ToolOutput::Result(store_failure(self.name(), &error)),
            }
            // The list was stored; failing to read it back only empties the echo.
            let todos = self
                .store
                .todos(&context.session_id)
                .unwrap_or_else(|error| {
                    tracing::warn!(%error, "the todo list was stored but could not be read back");
                    Vec::new()
                });
            ToolOutput::Result(
                ToolExecutionResult::success(format!(
                    "Todo list updated ({count} items):\n{}",
                    render_todos(&todos)
                ))
                .with_display(
                    Display::new(DisplayKind::Text)
                        .with_title(format!("{count} todos"))
                        .with_body(render_todos(&todos)),
                ),
            )
        })
    }
}

/// `todo_list`: reads the list.
pub(crate) struct TodoListTool {
    store: Arc<dyn SessionStore>,
}

impl TodoListTool {
    pub(crate) fn new(store: Arc<dyn SessionStore>) -> Self {
        TodoListTool { store }
    }
}

impl Tool for TodoListTool {
    fn name(&self) -> &str {
        "todo_list"
    }

    fn description(&self) -> &str {
        "Show the session's todo list."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::SessionRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> serde_json::Value {
        input_schema::<TodoListInput>()
    }

    fn summarize(&self, _input: &serde_json::Value) -> String {
        "list todos".to_owned()
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if let Err(failure) = parse_input::<TodoListInput>(self.name(), input) {
                return ToolOutput::Result(failure);
            }
            match self.store.todos(&context.session_id) {
                Ok(todos) => ToolOutput::Text(render_todos(&todos)),
                Err(error) => ToolOutput::Result(store_failure(self.name(), &error)),
            }
        })
    }
}

/// `read_artifact`: reads part of one of the *current session's* artifacts by byte range, line
/// range or keyword. It takes an artifact id, never a path.
pub(crate) struct ReadArtifactTool {
    store: Arc<dyn SessionStore>,
}

impl ReadArtifactTool {
    pub(crate) fn new(store: Arc<dyn SessionStore>) -> Self {
        ReadArtifactTool { store }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadArtifactInput {
    /// The id from the tool result, e.g. art_…
    #[schemars(length(min = 1))]
    artifact_id: String,
    /// First byte to read (default 0).
    #[serde(default)]
    offset: Option<u64>,
    /// Bytes to return at most (default 16384).
    #[serde(default)]
    #[schemars(range(min = 1, max = READ_ARTIFACT_MAX_BYTES))]
    max_bytes: Option<u64>,
    /// First line (1-based).
    #[serde(default)]
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    /// Last line, inclusive.
    #[serde(default)]
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
    /// Return only lines containing this text.
    #[serde(default)]
    #[schemars(length(min = 1))]
    query: Option<String>,
}

impl Tool for ReadArtifactTool {
    fn name(&self) -> &str {
        "read_artifact"
    }

    fn description(&self) -> &str {
        "Read a large tool output that was stored as an artifact of this session. Give the \
         artifactId and either a byte range (offset, maxBytes), a line range (startLine, endLine, \
         1-based, inclusive) or a query (case-insensitive; returns matching lines with numbers)."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::SessionRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> serde_json::Value {
        input_schema::<ReadArtifactInput>()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let id = input
            .get("artifactId")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?");
        format!("read artifact {id}")
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: ReadArtifactInput = match parse_input(self.name(), input) {
                Ok(input) => input,
                Err(failure) => return ToolOutput::Result(failure),
            };
            let content = match self
                .store
                .read_artifact(&context.session_id, &input.artifact_id)
            {
                Ok(Some(content)) => content,
                Ok(None) => {
                    return ToolOutput::Result(ToolExecutionResult::failure(
                        ARTIFACT_NOT_FOUND,
                        format!(
                            "No artifact {} in this session. Artifacts are readable only from the session that produced them.",
                            input.artifact_id
                        ),
                    ));
                }
                Err(error) => return ToolOutput::Result(store_failure(self.name(), &error)),
            };
            ToolOutput::Result(read_artifact_part(&input, &content))
        })
    }
}

fn read_artifact_part(input: &ReadArtifactInput, content: &[u8]) -> ToolExecutionResult {
    let max_bytes = input
        .max_bytes
        .map_or(READ_ARTIFACT_DEFAULT_BYTES, |m| {
            usize::try_from(m).unwrap_or(usize::MAX)
        })
        .clamp(1, READ_ARTIFACT_MAX_BYTES);
    let id = &input.artifact_id;
    let total = content.len();
    if input.start_line.is_none() && input.end_line.is_none() && input.query.is_none() {
        let offset = usize::try_from(input.offset.unwrap_or(0)).unwrap_or(usize::MAX);
        if offset >= total && total > 0 {
            return ToolExecutionResult::failure(
                ErrorCode::INVALID_ARGUMENTS,
                format!("offset {offset} is past the end of artifact {id} ({total} bytes)"),
            );
        }
        let end = offset.saturating_add(max_bytes).min(total);
        let slice = String::from_utf8_lossy(&content[offset.min(total)..end]);
        let more = if end < total {
            format!(" More: offset {end}.")
        } else {
            String::new()
        };
        return ToolExecutionResult::success(format!(
            "Artifact {id}, bytes {offset}-{end} of {total}.{more}\n{slice}"
        ));
    }
    let text = String::from_utf8_lossy(content);
    let lines: Vec<&str> = text.lines().collect();
    let first = usize::try_from(input.start_line.unwrap_or(1)).unwrap_or(usize::MAX);
    let last = usize::try_from(input.end_line.unwrap_or(u64::MAX))
        .unwrap_or(usize::MAX)
        .min(lines.len());
    if first > last.max(1) || (first > lines.len() && !lines.is_empty()) {
        return ToolExecutionResult::failure(
            ErrorCode::INVALID_ARGUMENTS,
            format!(
                "line range {first}-{} is outside artifact {id} ({} lines)",
                input
                    .end_line
                    .map_or_else(|| "end".to_owned(), |l| l.to_string()),
                lines.len()
            ),
        );
    }
    let query = input.query.as_deref().map(str::to_lowercase);
    let mut body = String::new();
    let mut shown = 0usize;
    let mut truncated = false;
    for (index, line) in lines.iter().enumerate().take(last).skip(first - 1) {
        if let Some(query) = &query
            && !line.to_lowercase().contains(query.as_str())
        {
            continue;
        }
        let row = if query.is_some() {
            format!("{}: {line}\n", index + 1)
        } else {
            format!("{line}\n")
        };
        if body.len() + row.len() > max_bytes
            || shown >= READ_ARTIFACT_MAX_MATCHES && query.is_some()
        {
            truncated = true;
            break;
        }
        body.push_str(&row);
        shown += 1;
    }
    let header = match &input.query {
        Some(query) if shown == 0 => {
            return ToolExecutionResult::success(format!(
                "No line of artifact {id} (lines {first}-{last}) contains {query:?}."
            ));
        }
        Some(query) => format!(
            "{shown} matching lines for {query:?} in artifact {id} (lines {first}-{last} of {}){}:",
            lines.len(),
            if truncated { ", more not shown" } else { "" }
        ),
        None => format!(
            "Artifact {id}, lines {first}-{} of {}{}:",
            first + shown.saturating_sub(1),
            lines.len(),
            if truncated {
                "; output limit reached, continue from the next line"
            } else {
                ""
            }
        ),
    };
    ToolExecutionResult::success(format!("{header}\n{body}"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::search::SearchInput;

    /// The schema a model is shown and the parser that reads its call come from one type, so
    /// they agree on every input: (what the schema validator says, what the parser says).
    fn check<T: JsonSchema + serde::de::DeserializeOwned>(input: Value, valid: bool) {
        let schema = input_schema::<T>();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let by_schema = validator.is_valid(&input);
        let by_parser = parse_input::<T>("tool", input.clone()).is_ok();
        assert_eq!((by_schema, by_parser), (valid, valid), "{input}");
    }

    #[test]
    fn schemas_and_parsers_agree() {
        let todo = json!({"id": "1", "content": "write tests", "status": "pending"});
        let table = [
            (json!({"todos": []}), true),
            (json!({"todos": [todo]}), true),
            (json!({}), false),
            (json!({"todos": [todo], "extra": 1}), false),
            (
                json!({"todos": [{"id": "1", "content": "x", "status": "done"}]}),
                false,
            ),
            (
                json!({"todos": [{"id": "1", "content": "x", "status": "pending", "due": 1}]}),
                false,
            ),
        ];
        for (input, valid) in table {
            check::<TodoWriteInput>(input, valid);
        }
        for (input, valid) in [(json!({}), true), (json!({"all": true}), false)] {
            check::<TodoListInput>(input, valid);
        }
        let table = [
            (json!({"artifactId": "art_1"}), true),
            (
                json!({"artifactId": "art_1", "offset": 0, "maxBytes": 10, "query": "x"}),
                true,
            ),
            (
                json!({"artifactId": "art_1", "startLine": 1, "endLine": 2}),
                true,
            ),
            (json!({}), false),
            (json!({"artifactId": 7}), false),
            (json!({"artifactId": "art_1", "path": "/etc/passwd"}), false),
            (json!({"artifactId": "art_1", "offset": -1}), false),
        ];
        for (input, valid) in table {
            check::<ReadArtifactInput>(input, valid);
        }
        let table = [
            (json!({"query": "github issues"}), true),
            (json!({"query": "x", "limit": 3}), true),
            (json!({}), false),
            (json!({"query": "x", "limit": "3"}), false),
            (json!({"query": "x", "max": 3}), false),
        ];
        for (input, valid) in table {
            check::<SearchInput>(input, valid);
        }
    }
}
