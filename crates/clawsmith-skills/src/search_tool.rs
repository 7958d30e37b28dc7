//! `memory_search {query, limit?, scope?}`.

use std::sync::Arc;

use clawsmith_checkpoint::MemoryScope;
use clawsmith_fs::escape_control;
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Display, DisplayKind, ErrorCode, Risk, Tool,
    ToolExecutionContext, ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::memory::{DEFAULT_LIMIT, MAX_LIMIT, Memory, render};

/// The tool's name.
pub const MEMORY_SEARCH: &str = "memory_search";

/// Which memory `memory_search` looks in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchScope {
    /// `AGENTS.md`, `CLAUDE.md`, `GEMINI.md` and `.clawsmith/memory/**/*.md` of the workspace.
    Workspace,
    /// `$XDG_CONFIG_HOME/clawsmith/memory/**/*.md`.
    User,
    /// Notes added with `clawsmith memory add`.
    Notes,
    /// All of them.
    #[default]
    All,
}

impl SearchScope {
    /// The index scopes it stands for.
    pub fn scopes(self) -> Vec<MemoryScope> {
        match self {
            SearchScope::Workspace => vec![MemoryScope::Workspace],
            SearchScope::User => vec![MemoryScope::User],
            SearchScope::Notes => vec![MemoryScope::Notes],
            SearchScope::All => vec![
                MemoryScope::Workspace,
                MemoryScope::User,
                MemoryScope::Notes,
            ],
        }
    }
}

/// Arguments of `memory_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySearchInput {
    /// Words to look for (a chunk matching any of them is a hit; more matches rank higher;
    /// parts of words and identifiers match too) and "quoted phrases" matched exactly.
    pub query: String,
    /// How many hits at most (default 10).
    #[serde(default)]
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// Where to look (default `all`).
    #[serde(default)]
    pub scope: Option<SearchScope>,
}

/// The `memory_search` tool.
pub struct MemorySearchTool {
    memory: Arc<Memory>,
    schema: serde_json::Value,
}

impl std::fmt::Debug for MemorySearchTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemorySearchTool")
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

impl MemorySearchTool {
    /// The tool over `memory`.
    pub fn new(memory: Arc<Memory>) -> MemorySearchTool {
        MemorySearchTool {
            memory,
            schema: schemars::schema_for!(MemorySearchInput).to_value(),
        }
    }
}

/// One search as the tool answers it (also what the CLI's `memory search` prints).
pub fn search_result(memory: &Memory, input: &MemorySearchInput) -> ToolExecutionResult {
    let limit = input
        .limit
        .map_or(DEFAULT_LIMIT, |limit| limit as usize)
        .clamp(1, MAX_LIMIT);
    let scope = input.scope.unwrap_or_default();
    match memory.search(&input.query, limit, &scope.scopes()) {
        Ok(outcome) => {
            let text = render(&input.query, &outcome);
            let display = Display::new(DisplayKind::Text)
                .with_title(format!(
                    "memory search {}",
                    escape_control(&input.query.chars().take(80).collect::<String>())
                ))
                .with_body(text.clone())
                .with_field("hits", outcome.hits.len());
            ToolExecutionResult::success(text).with_display(display)
        }
        Err(error) => ToolExecutionResult::tool_failed(format!("Memory search failed: {error}")),
    }
}

impl Tool for MemorySearchTool {
    fn name(&self) -> &str {
        MEMORY_SEARCH
    }

    fn description(&self) -> &str {
        "Search long-term memory: the workspace's AGENTS.md, CLAUDE.md, GEMINI.md and \
         .clawsmith/memory/*.md, the user's memory files, and notes the user added. Returns the \
         best matching sections with their source, line range, heading, a snippet with the \
         match marked «…», score and last change. Plain words match any of them (parts of \
         words and identifiers too); \"quoted phrases\" match exactly. scope: workspace, user, \
         notes or all (default); limit: 1-50 (default 10)."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::FilesystemRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        match MemorySearchInput::deserialize(input) {
            Ok(input) => format!(
                "Search memory for {}",
                escape_control(&input.query.chars().take(80).collect::<String>())
            ),
            Err(_) => format!("{MEMORY_SEARCH} (invalid arguments)"),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if context.cancellation.is_cancelled() {
                return ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    format!("{MEMORY_SEARCH} was cancelled"),
                ));
            }
            let input = match serde_json::from_value::<MemorySearchInput>(input) {
                Ok(input) => input,
                Err(error) => {
                    return ToolOutput::Result(ToolExecutionResult::failure(
                        ErrorCode::INVALID_ARGUMENTS,
                        format!("Invalid arguments for {MEMORY_SEARCH}: {error}"),
                    ));
                }
            };
            // Refreshing reads files and writes SQLite: off the async workers.
            let memory = self.memory.clone();
            let result = tokio::task::spawn_blocking(move || search_result(&memory, &input)).await;
            ToolOutput::Result(result.unwrap_or_else(|error| {
                ToolExecutionResult::tool_failed(format!("Memory search failed: {error}"))
            }))
        })
    }
}
