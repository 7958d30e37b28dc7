//! Deferred tools and `search_tools` (A9): local weighted ranking and per-session activation.
//!
//! Ranking: the query is split into lowercase terms; each term scores, per field it occurs in,
//! name 16, aliases 8, tags 4, searchHint 2, description 1. The weights are powers of two, so
//! for one term a hit in a higher field beats hits in every lower field together. A query equal
//! to a tool's full name gets a bonus that puts that tool first. Ties are broken by tool name.
//!
//! Activation is per session and becomes visible from the *next* model request: `search_tools`
//! puts its hits in the session's pending set; [`crate::Turn::model_request`] promotes pending
//! tools to active and records the evidence. A call to a deferred tool that is not active is
//! `inactive_tool` (retryable), also within the request that activated it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_protocol::{
    Capability, CapabilityDeclaration, Risk, Tool, ToolExecutionContext, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::table::ToolEntry;
use clawsmith_protocol::schema::{input_schema, parse_input};

/// Field weights of the ranking, highest first.
pub const NAME_WEIGHT: u32 = 16;
/// Alias weight.
pub const ALIAS_WEIGHT: u32 = 8;
/// Tag weight.
pub const TAG_WEIGHT: u32 = 4;
/// Search hint weight.
pub const HINT_WEIGHT: u32 = 2;
/// Description weight.
pub const DESCRIPTION_WEIGHT: u32 = 1;
const EXACT_NAME_BONUS: u32 = 1_000;

/// Default and maximum number of hits `search_tools` returns.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// Maximum `limit`.
pub const MAX_SEARCH_LIMIT: usize = 20;

/// A ranked hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// The tool's name.
    pub name: String,
    /// Its score (higher first).
    pub score: u32,
}

/// What is searchable about one deferred tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchDocument {
    /// The tool's name.
    pub name: String,
    /// Aliases.
    pub aliases: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// When to use it.
    pub search_hint: Option<String>,
    /// Description.
    pub description: String,
}

impl SearchDocument {
    pub(crate) fn of(entry: &ToolEntry) -> SearchDocument {
        let metadata = entry.search_metadata().cloned().unwrap_or_default();
        SearchDocument {
            name: entry.name().to_owned(),
            aliases: metadata.aliases,
            tags: metadata.tags,
            search_hint: metadata.search_hint,
            description: entry.tool().description().to_owned(),
        }
    }
}

/// Ranks `documents` for `query`: hits with a positive score, best first, ties by name.
pub fn rank(query: &str, documents: &[SearchDocument]) -> Vec<SearchHit> {
    let terms = terms(query);
    let whole = query.trim().to_lowercase();
    let mut hits: Vec<SearchHit> = documents
        .iter()
        .filter_map(|document| {
            let name = document.name.to_lowercase();
            let aliases: Vec<String> = document.aliases.iter().map(|a| a.to_lowercase()).collect();
            let tags: Vec<String> = document.tags.iter().map(|t| t.to_lowercase()).collect();
            let hint = document.search_hint.as_deref().unwrap_or("").to_lowercase();
            let description = document.description.to_lowercase();
            let mut score = 0;
            if !whole.is_empty() && whole == name {
                score += EXACT_NAME_BONUS;
            }
            for term in &terms {
                if name.contains(term.as_str()) {
                    score += NAME_WEIGHT;
                }
                if aliases.iter().any(|alias| alias.contains(term.as_str())) {
                    score += ALIAS_WEIGHT;
                }
                if tags.iter().any(|tag| tag.contains(term.as_str())) {
                    score += TAG_WEIGHT;
                }
                if hint.contains(term.as_str()) {
                    score += HINT_WEIGHT;
                }
                if description.contains(term.as_str()) {
                    score += DESCRIPTION_WEIGHT;
                }
            }
            (score > 0).then(|| SearchHit {
                name: document.name.clone(),
                score,
            })
        })
        .collect();
    hits.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
    hits
}

fn terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|term| !term.is_empty())
        .map(str::to_lowercase)
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

/// Per-session activation state of deferred tools.
#[derive(Debug, Default)]
pub(crate) struct Activations {
    sessions: Mutex<HashMap<String, SessionActivation>>,
}

#[derive(Debug, Default, Clone)]
struct SessionActivation {
    active: BTreeSet<String>,
    pending: BTreeSet<String>,
}

impl Activations {
    fn with<T>(&self, session_id: &str, body: impl FnOnce(&mut SessionActivation) -> T) -> T {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        body(sessions.entry(session_id.to_owned()).or_default())
    }

    /// Sets the active set (session open restores the last request's set).
    pub(crate) fn restore(&self, session_id: &str, active: BTreeSet<String>) {
        self.with(session_id, |state| state.active = active);
    }

    pub(crate) fn is_active(&self, session_id: &str, name: &str) -> bool {
        self.with(session_id, |state| state.active.contains(name))
    }

    pub(crate) fn is_pending(&self, session_id: &str, name: &str) -> bool {
        self.with(session_id, |state| state.pending.contains(name))
    }

    pub(crate) fn add_pending(&self, session_id: &str, names: impl IntoIterator<Item = String>) {
        self.with(session_id, |state| {
            for name in names {
                if !state.active.contains(&name) {
                    state.pending.insert(name);
                }
            }
        });
    }

    /// Promotes pending activations (a new model request is being built) and returns the set
    /// that request shows.
    pub(crate) fn promote(&self, session_id: &str) -> BTreeSet<String> {
        self.with(session_id, |state| {
            let pending = std::mem::take(&mut state.pending);
            state.active.extend(pending);
            state.active.clone()
        })
    }

    pub(crate) fn active(&self, session_id: &str) -> BTreeSet<String> {
        self.with(session_id, |state| state.active.clone())
    }
}

/// The `search_tools` tool: searches the deferred registry and activates the hits for the
/// session's next request.
pub(crate) struct SearchToolsTool {
    documents: Vec<SearchDocument>,
    activations: Arc<Activations>,
}

impl SearchToolsTool {
    pub(crate) fn new(documents: Vec<SearchDocument>, activations: Arc<Activations>) -> Self {
        SearchToolsTool {
            documents,
            activations,
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchInput {
    /// Keywords describing the capability you need.
    #[schemars(length(min = 1))]
    query: String,
    /// Maximum number of tools to activate (default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    limit: Option<usize>,
}

pub(crate) const SEARCH_TOOLS: &str = "search_tools";

impl Tool for SearchToolsTool {
    fn name(&self) -> &str {
        SEARCH_TOOLS
    }

    fn description(&self) -> &str {
        "Search the additional tools that are not loaded yet (MCP, LSP, plugins) by keywords. \
         The best matches are activated and can be called from your next request."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::SessionRead, Capability::SessionWrite])
    }

    fn concurrency_safe(&self) -> bool {
        // It changes the session's activation state.
        false
    }

    fn input_schema(&self) -> serde_json::Value {
        input_schema::<SearchInput>()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        let query = input.get("query").and_then(|q| q.as_str()).unwrap_or("");
        format!("search tools: {query}")
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: SearchInput = match parse_input(self.name(), input) {
                Ok(input) => input,
                Err(failure) => return ToolOutput::Result(failure),
            };
            let limit = input
                .limit
                .unwrap_or(DEFAULT_SEARCH_LIMIT)
                .clamp(1, MAX_SEARCH_LIMIT);
            let hits: Vec<SearchHit> = rank(&input.query, &self.documents)
                .into_iter()
                .take(limit)
                .collect();
            if hits.is_empty() {
                return ToolOutput::Text(format!(
                    "No deferred tool matches {:?}. Try other keywords.",
                    input.query
                ));
            }
            let mut text = String::from("Matching tools (callable from your next request):\n");
            for hit in &hits {
                let description = self
                    .documents
                    .iter()
                    .find(|document| document.name == hit.name)
                    .map(|document| document.description.as_str())
                    .unwrap_or("");
                let state = if self.activations.is_active(&context.session_id, &hit.name) {
                    " (already active)"
                } else {
                    ""
                };
                text.push_str(&format!("- {}{state}: {description}\n", hit.name));
            }
            self.activations
                .add_pending(&context.session_id, hits.into_iter().map(|hit| hit.name));
            ToolOutput::Text(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(
        name: &str,
        aliases: &[&str],
        tags: &[&str],
        hint: &str,
        description: &str,
    ) -> SearchDocument {
        SearchDocument {
            name: name.to_owned(),
            aliases: aliases.iter().map(|s| s.to_string()).collect(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            search_hint: (!hint.is_empty()).then(|| hint.to_owned()),
            description: description.to_owned(),
        }
    }

    fn names(hits: &[SearchHit]) -> Vec<&str> {
        hits.iter().map(|hit| hit.name.as_str()).collect()
    }

    #[test]
    fn field_order_decides_and_ties_break_by_name() {
        let documents = vec![
            document("in_description", &[], &[], "", "talks about issue trackers"),
            document("in_hint", &[], &[], "use for an issue", ""),
            document("in_tags", &[], &["issue"], "", ""),
            document("in_alias", &["issue-tool"], &[], "", ""),
            document("issue_search", &[], &[], "", ""),
            document("b_tie", &[], &["issue"], "", ""),
            document("unrelated", &[], &[], "", "nothing"),
        ];
        let hits = rank("issue", &documents);
        assert_eq!(
            names(&hits),
            [
                "issue_search",
                "in_alias",
                "b_tie",
                "in_tags",
                "in_hint",
                "in_description"
            ]
        );
    }

    #[test]
    fn one_higher_field_beats_all_lower_fields_together() {
        let documents = vec![
            document("lower", &[], &["git"], "git stuff", "git things"),
            document("zz_alias", &["git"], &[], "", ""),
        ];
        assert_eq!(names(&rank("git", &documents)), ["zz_alias", "lower"]);
    }

    #[test]
    fn exact_name_wins_and_empty_query_finds_nothing() {
        let documents = vec![
            document("github_issue", &[], &[], "", "github issue"),
            document("github", &[], &[], "", ""),
        ];
        assert_eq!(names(&rank("github", &documents))[0], "github");
        assert!(rank("  ", &documents).is_empty());
        assert!(rank("nomatch", &documents).is_empty());
    }
}
