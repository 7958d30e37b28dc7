//! `memory_search {query, limit?, scope?}`.

use std::sync::Arc;

use clawsmith_checkpoint::MemoryScope;
use clawsmith_fs::escape_control;
use clawsmith_protocol::{Display, DisplayKind, ToolExecutionResult};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::memory::{DEFAULT_LIMIT, MAX_LIMIT, Memory, render};
use crate::tool::{ReadOnly, ReadTool};

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

/// The state of `memory_search`: the memory it searches.
#[derive(Debug)]
pub struct MemorySearch {
    memory: Arc<Memory>,
}

/// The `memory_search` tool.
pub type MemorySearchTool = ReadOnly<MemorySearch>;

impl ReadOnly<MemorySearch> {
    /// The tool over `memory`.
    pub fn new(memory: Arc<Memory>) -> MemorySearchTool {
        ReadOnly::wrap(MemorySearch { memory })
    }
}

/// One search as the tool answers it.
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
                .with_title(format!("memory search {}", shown_query(&input.query)))
                .with_body(text.clone())
                .with_field("hits", outcome.hits.len());
            ToolExecutionResult::success(text).with_display(display)
        }
        Err(error) => ToolExecutionResult::tool_failed(format!("Memory search failed: {error}")),
    }
}

/// The query's first 80 characters, control characters escaped.
fn shown_query(query: &str) -> String {
    escape_control(&query.chars().take(80).collect::<String>()).into_owned()
}

impl ReadTool for MemorySearch {
    type Input = MemorySearchInput;
    const NAME: &'static str = MEMORY_SEARCH;

    fn description(&self) -> &str {
        "Search long-term memory: the workspace's AGENTS.md, CLAUDE.md, GEMINI.md and \
         .clawsmith/memory/*.md, the user's memory files, and notes the user added. Returns the \
         best matching sections with their source, line range, heading, a snippet with the \
         match marked «…», score and last change. Plain words match any of them (parts of \
         words and identifiers too); \"quoted phrases\" match exactly. scope: workspace, user, \
         notes or all (default); limit: 1-50 (default 10)."
    }

    fn summarize(input: &MemorySearchInput) -> String {
        format!("Search memory for {}", shown_query(&input.query))
    }

    fn run(&self, input: MemorySearchInput) -> ToolExecutionResult {
        search_result(&self.memory, &input)
    }
}
