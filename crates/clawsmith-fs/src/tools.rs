//! The seven file tools as [`Tool`] implementations (SPEC F2–F8).
//!
//! Each tool is a small spec ([`FileTool`]): its input struct (one source of truth for both the
//! JSON Schema the model sees and the deserializer), its name and description, and a synchronous
//! `run`. [`Adapter`] turns a spec into a [`Tool`]: it checks authorization first for write tools
//! (S5), then cancellation, then parses the input, and maps everything to a result.

mod read;
mod search;
pub(crate) mod walk;
mod write;

use std::sync::Arc;

use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ErrorCode, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::escape::escape_control;
use crate::recorder::ChangeRecorder;
use crate::workspace::{Workspace, WorkspacePath};

pub use read::{READ_MAX_BYTES, ReadFileInput};
pub use search::{
    GLOB_DEFAULT_RESULTS, GLOB_MAX_FILES_VISITED, GLOB_MAX_RESULTS, GlobFilesInput,
    SEARCH_DEFAULT_RESULTS, SEARCH_MAX_BYTES_PER_FILE, SEARCH_MAX_FILES_VISITED,
    SEARCH_MAX_RESULTS, SEARCH_MAX_TOTAL_BYTES, SearchFilesInput,
};
pub use write::{DeleteFileInput, EditFileInput, RenameFileInput, WRITE_MAX_BYTES, WriteFileInput};

/// The seven built-in file tools, in this order: `read_file`, `search_files`, `glob_files`,
/// `write_file`, `edit_file`, `rename_file`, `delete_file`.
pub fn builtin_tools(
    workspace: Arc<Workspace>,
    recorder: Arc<dyn ChangeRecorder>,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Adapter::shared(read::ReadFile {
            workspace: workspace.clone(),
        }),
        Adapter::shared(search::SearchFiles {
            workspace: workspace.clone(),
        }),
        Adapter::shared(search::GlobFiles {
            workspace: workspace.clone(),
        }),
        Adapter::shared(write::WriteFile {
            workspace: workspace.clone(),
            recorder: recorder.clone(),
        }),
        Adapter::shared(write::EditFile {
            workspace: workspace.clone(),
            recorder: recorder.clone(),
        }),
        Adapter::shared(write::RenameFile {
            workspace: workspace.clone(),
            recorder: recorder.clone(),
        }),
        Adapter::shared(write::DeleteFile {
            workspace,
            recorder,
        }),
    ]
}

/// What distinguishes one file tool from another.
trait FileTool: Send + Sync + 'static {
    /// The arguments; `#[serde(rename_all = "camelCase", deny_unknown_fields)]`.
    type Input: DeserializeOwned + JsonSchema;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    /// Write tools: `workspace-write`, not concurrency-safe, authorization required.
    const WRITES: bool;

    /// One line for UIs and approval prompts.
    fn summarize(input: &Self::Input) -> String;

    /// Runs the call; every failure is a result.
    fn run(&self, input: Self::Input, context: &ToolExecutionContext) -> ToolExecutionResult;
}

struct Adapter<T: FileTool> {
    tool: T,
    schema: serde_json::Value,
}

impl<T: FileTool> Adapter<T> {
    fn shared(tool: T) -> Arc<dyn Tool> {
        let schema = schemars::schema_for!(T::Input).to_value();
        Arc::new(Adapter { tool, schema })
    }
}

impl<T: FileTool> Tool for Adapter<T> {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        T::DESCRIPTION
    }

    fn risk(&self) -> Risk {
        if T::WRITES {
            Risk::WorkspaceWrite
        } else {
            Risk::Read
        }
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        if T::WRITES {
            CapabilityDeclaration::Declared(vec![
                Capability::FilesystemRead,
                Capability::FilesystemWrite,
            ])
        } else {
            CapabilityDeclaration::Declared(vec![Capability::FilesystemRead])
        }
    }

    fn concurrency_safe(&self) -> bool {
        !T::WRITES
    }

    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        match <T::Input as serde::Deserialize>::deserialize(input) {
            Ok(parsed) => T::summarize(&parsed),
            Err(_) => format!("{} (invalid arguments)", T::NAME),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move { ToolOutput::Result(self.execute_now(input, &context)) })
    }
}

impl<T: FileTool> Adapter<T> {
    /// The whole call, synchronously: the work is bounded (F2–F8 limits), so it runs in place.
    fn execute_now(
        &self,
        input: serde_json::Value,
        context: &ToolExecutionContext,
    ) -> ToolExecutionResult {
        if T::WRITES
            && let Err(refusal) = context.require_authorization(T::NAME)
        {
            return refusal;
        }
        if context.cancellation.is_cancelled() {
            return cancelled(T::NAME);
        }
        match serde_json::from_value::<T::Input>(input) {
            Ok(parsed) => self.tool.run(parsed, context),
            Err(error) => ToolExecutionResult::failure(
                ErrorCode::INVALID_ARGUMENTS,
                format!("Invalid arguments for {}: {error}", T::NAME),
            ),
        }
    }
}

fn cancelled(tool: &str) -> ToolExecutionResult {
    ToolExecutionResult::failure(ErrorCode::CANCELLED, format!("{tool} was cancelled"))
}

fn invalid_arguments(message: impl AsRef<str>) -> ToolExecutionResult {
    ToolExecutionResult::failure(ErrorCode::INVALID_ARGUMENTS, message)
}

/// Resolves a path that must name a file: the lexical check (F1), then no folder syntax, so
/// `b.txt/` is refused instead of meaning `b.txt`. Every file-taking tool resolves through here.
#[allow(clippy::result_large_err)] // the refusal is the result handed back, built once per call
fn resolve_file(
    workspace: &Workspace,
    requested: &str,
) -> Result<WorkspacePath, ToolExecutionResult> {
    let path = workspace
        .resolve(requested)
        .map_err(|error| ToolExecutionResult::tool_failed(error.to_string()))?;
    if path.names_folder() {
        return Err(invalid_arguments(format!(
            "Path names a folder, not a file: {} (a trailing \"/\" or \"/.\" means a folder)",
            escape_control(requested)
        )));
    }
    Ok(path)
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut with `…`.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}
