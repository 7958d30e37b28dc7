//! The six deferred tools over one [`LspService`].

use std::sync::Arc;

use clawsmith_protocol::schema::input_schema;
use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ErrorCode, Risk, SearchMetadata, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::LspError;
use crate::service::LspService;

/// Input of `lsp_diagnostics` and `lsp_document_symbols`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathInput {
    /// The file, relative to the workspace root (or absolute inside it).
    pub path: String,
}

/// Input of `lsp_definition`, `lsp_references` and `lsp_hover`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineColumnInput {
    /// The file, relative to the workspace root (or absolute inside it).
    pub path: String,
    /// Line number, 1-based (as `read_file` shows them).
    #[schemars(range(min = 1))]
    pub line: u32,
    /// Column in characters, 1-based: put it on the symbol's name.
    #[schemars(range(min = 1))]
    pub column: u32,
}

/// Input of `lsp_workspace_symbols`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryInput {
    /// Part of a symbol name (functions, classes, types, variables).
    pub query: String,
}

/// The names of the tools, in the order [`lsp_tools`] returns them.
pub const LSP_TOOL_NAMES: [&str; 6] = [
    "lsp_diagnostics",
    "lsp_definition",
    "lsp_references",
    "lsp_hover",
    "lsp_document_symbols",
    "lsp_workspace_symbols",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Diagnostics,
    Definition,
    References,
    Hover,
    DocumentSymbols,
    WorkspaceSymbols,
}

struct Spec {
    kind: Kind,
    name: &'static str,
    description: &'static str,
    aliases: &'static [&'static str],
    tags: &'static [&'static str],
    hint: &'static str,
}

const SPECS: [Spec; 6] = [
    Spec {
        kind: Kind::Diagnostics,
        name: "lsp_diagnostics",
        description: "Type errors, compile errors, undefined names and warnings of one file, from \
                      its language server, for the file's content on disk now (after your \
                      edits). Each with path:line:column and the source line.",
        aliases: &[
            "diagnostics",
            "type check",
            "compile errors",
            "lint",
            "check file",
        ],
        tags: &[
            "lsp",
            "type errors",
            "compile errors",
            "errors",
            "warnings",
            "undefined name",
            "linter",
            "typecheck",
        ],
        hint: "check a file for type errors or compile errors after editing it",
    },
    Spec {
        kind: Kind::Definition,
        name: "lsp_definition",
        description: "Go to definition: where the symbol at path:line:column (1-based: the \
                      line as read_file's offset counts it, the column in characters) is \
                      defined, across files, with the source line.",
        aliases: &[
            "go to definition",
            "goto definition",
            "jump to definition",
            "find definition",
        ],
        tags: &["lsp", "definition", "declaration", "navigate", "symbol"],
        hint: "find where a function, class or variable is defined",
    },
    Spec {
        kind: Kind::References,
        name: "lsp_references",
        description: "Find usages: every reference to the symbol at path:line:column (1-based) \
                      across the workspace, declaration included, with source lines.",
        aliases: &[
            "find usages",
            "find references",
            "who calls",
            "callers",
            "usages",
        ],
        tags: &[
            "lsp",
            "references",
            "usages",
            "callers",
            "rename impact",
            "symbol",
        ],
        hint: "find every place a function, class or variable is used",
    },
    Spec {
        kind: Kind::Hover,
        name: "lsp_hover",
        description: "Type, signature and documentation of the symbol at path:line:column \
                      (1-based), as the language server infers them.",
        aliases: &[
            "hover",
            "type of",
            "signature",
            "docs of symbol",
            "quick info",
        ],
        tags: &["lsp", "type", "signature", "documentation", "inferred type"],
        hint: "see the type or signature of a symbol",
    },
    Spec {
        kind: Kind::DocumentSymbols,
        name: "lsp_document_symbols",
        description: "Outline of one file: its classes, functions, methods and variables, \
                      nested, each with line:column.",
        aliases: &[
            "outline",
            "document symbols",
            "file structure",
            "list functions",
        ],
        tags: &[
            "lsp",
            "outline",
            "symbols",
            "structure",
            "functions",
            "classes",
        ],
        hint: "get the outline of a file (classes, functions) without reading it all",
    },
    Spec {
        kind: Kind::WorkspaceSymbols,
        name: "lsp_workspace_symbols",
        description: "Find symbols (functions, classes, types) by name across the workspace, \
                      from the language servers already started by another lsp_ call.",
        aliases: &[
            "workspace symbols",
            "find symbol",
            "search symbol",
            "find class",
            "find function",
        ],
        tags: &["lsp", "symbols", "search", "definition", "project"],
        hint: "find a class or function by name across the project",
    },
];

struct LspTool {
    spec: &'static Spec,
    service: Arc<LspService>,
    schema: serde_json::Value,
}

/// The six tools over `service` (deferred, read risk, concurrency-safe).
pub fn lsp_tools(service: Arc<LspService>) -> Vec<Arc<dyn Tool>> {
    SPECS
        .iter()
        .map(|spec| {
            let schema = match spec.kind {
                Kind::Diagnostics | Kind::DocumentSymbols => input_schema::<PathInput>(),
                Kind::Definition | Kind::References | Kind::Hover => {
                    input_schema::<LineColumnInput>()
                }
                Kind::WorkspaceSymbols => input_schema::<QueryInput>(),
            };
            Arc::new(LspTool {
                spec,
                service: Arc::clone(&service),
                schema,
            }) as Arc<dyn Tool>
        })
        .collect()
}

/// A failed call: its code and message.
type Failure = (ErrorCode, String);

fn parse<T: DeserializeOwned>(name: &str, input: serde_json::Value) -> Result<T, Failure> {
    serde_json::from_value(input).map_err(|error| {
        (
            ErrorCode::INVALID_ARGUMENTS,
            format!("Invalid arguments for {name}: {error}"),
        )
    })
}

impl LspTool {
    async fn run(&self, input: serde_json::Value) -> Result<String, Failure> {
        let name = self.spec.name;
        let answer = match self.spec.kind {
            Kind::Diagnostics => {
                let input: PathInput = parse(name, input)?;
                self.service.diagnostics(&input.path).await
            }
            Kind::DocumentSymbols => {
                let input: PathInput = parse(name, input)?;
                self.service.document_symbols(&input.path).await
            }
            Kind::Definition | Kind::References | Kind::Hover => {
                let input: LineColumnInput = parse(name, input)?;
                if input.line == 0 || input.column == 0 {
                    return Err((
                        ErrorCode::INVALID_ARGUMENTS,
                        format!("Invalid arguments for {name}: line and column start at 1"),
                    ));
                }
                let (path, line, column) = (&input.path, input.line, input.column);
                match self.spec.kind {
                    Kind::Definition => self.service.definition(path, line, column).await,
                    Kind::References => self.service.references(path, line, column).await,
                    _ => self.service.hover(path, line, column).await,
                }
            }
            Kind::WorkspaceSymbols => {
                let input: QueryInput = parse(name, input)?;
                self.service.workspace_symbols(&input.query).await
            }
        };
        answer.map_err(|error: LspError| (error.code(), error.to_string()))
    }
}

impl Tool for LspTool {
    fn name(&self) -> &str {
        self.spec.name
    }

    fn description(&self) -> &str {
        self.spec.description
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
        let path = input.get("path").and_then(|p| p.as_str());
        let query = input.get("query").and_then(|q| q.as_str());
        match (path, input.get("line"), input.get("column"), query) {
            (Some(path), Some(line), Some(column), _) => {
                format!("{} {path}:{line}:{column}", self.spec.name)
            }
            (Some(path), ..) => format!("{} {path}", self.spec.name),
            (None, _, _, Some(query)) => format!("{} {query:?}", self.spec.name),
            _ => format!("{} (invalid arguments)", self.spec.name),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let result = tokio::select! {
                result = self.run(input) => result,
                () = context.cancellation.cancelled() => Err((
                    ErrorCode::CANCELLED,
                    format!("{} was cancelled", self.spec.name),
                )),
            };
            ToolOutput::Result(match result {
                Ok(text) => ToolExecutionResult::success(text),
                Err((code, message)) => ToolExecutionResult::failure(code, message),
            })
        })
    }

    fn deferred(&self) -> Option<SearchMetadata> {
        Some(SearchMetadata {
            aliases: self.spec.aliases.iter().map(|a| (*a).to_owned()).collect(),
            tags: self.spec.tags.iter().map(|t| (*t).to_owned()).collect(),
            search_hint: Some(self.spec.hint.to_owned()),
        })
    }
}
