//! The seven file tools as [`Tool`] implementations (F2–F8).
//!
//! Each tool is a small spec ([`FileTool`]): its input struct (one source of truth for both the
//! JSON Schema the model sees and the deserializer), its name and description, and a synchronous
//! `run`. [`Adapter`] turns a spec into a [`Tool`]: it checks authorization first for write tools
//! (S5), then cancellation, then parses the input, and maps everything to a result.
//!
//! The adapter also vouches for the inputs its parse accepts ([`Tool::vouches_for_input`]), so
//! the core need not compile a schema validator for a well-formed call: the input is a JSON
//! object, the input struct parses it, and the one constraint of these schemas a parse leaves
//! unchecked, an integer's `minimum`/`maximum` (`#[schemars(range(..))]`), holds. A schema with
//! any other keyword a parse does not enforce (`pattern`, `minLength`, `enum`, a nested object,
//! ...) makes its tool vouch for nothing, so every call of it is validated against the schema
//! ([`SchemaBounds::of`]). clawsmith-core's tests check, input by input over many generated
//! ones, that no tool vouches for an input its compiled schema refuses.

mod read;
mod search;
pub(crate) mod walk;
mod write;

use std::cmp::Ordering;
use std::sync::{Arc, OnceLock};

use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ErrorCode, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
// `read` and `search` cut a body or a line with it (`super::clip`).
use clawsmith_protocol::text::clip;
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

/// The adapter keeps no copy of its schema: the core's table asks for it once, when it first
/// needs it, and keeps that (generating all seven at construction, then cloning each
/// into the table and dropping both at exit, was ~3% of a `clawsmith call read_file`).
struct Adapter<T: FileTool> {
    tool: T,
    /// What the schema asks that the input's parse does not check, read from the schema on the
    /// first call that asks ([`Tool::vouches_for_input`]); `None`: more than the adapter checks.
    bounds: OnceLock<Option<SchemaBounds>>,
}

impl<T: FileTool> Adapter<T> {
    fn shared(tool: T) -> Arc<dyn Tool> {
        Arc::new(Adapter {
            tool,
            bounds: OnceLock::new(),
        })
    }
}

/// The part of a file tool's input schema that parsing the input struct does not enforce: the
/// bounds of its integer arguments. Everything else such a schema may say — an object
/// (`type: object`) of known fields (`additionalProperties: false`, the struct's
/// `deny_unknown_fields`), each a string, boolean or integer, maybe `null` (an `Option`), the
/// required ones (the fields without a default) and annotations — is what serde checks when
/// the struct parses a JSON object.
#[derive(Debug, Clone, PartialEq)]
struct SchemaBounds {
    bounds: Vec<IntegerBound>,
}

/// `minimum` and `maximum` of one top-level integer argument.
#[derive(Debug, Clone, PartialEq)]
struct IntegerBound {
    field: String,
    minimum: Option<serde_json::Number>,
    maximum: Option<serde_json::Number>,
}

/// Keywords that never refuse an input.
const ANNOTATIONS: [&str; 9] = [
    "$schema",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// The formats schemars writes for Rust's integer types: no format jsonschema knows, so none it
/// asserts (and a 2020-12 schema's `format` is an annotation by default).
const INTEGER_FORMATS: [&str; 12] = [
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128",
];

impl SchemaBounds {
    /// Reads `schema`: `Err` names the first keyword (and field) that a parse of the input
    /// struct does not enforce and [`SchemaBounds::hold`] does not check either.
    fn of(schema: &serde_json::Value) -> Result<SchemaBounds, String> {
        let root = schema.as_object().ok_or("the schema is not an object")?;
        if root.get("type").and_then(serde_json::Value::as_str) != Some("object") {
            return Err("the schema is not `type: object`".to_owned());
        }
        let mut bounds = Vec::new();
        for (keyword, value) in root {
            match keyword.as_str() {
                "type" | "required" => {}
                "additionalProperties" if value == &serde_json::Value::Bool(false) => {}
                "properties" => {
                    let properties = value.as_object().ok_or("`properties` is not an object")?;
                    for (field, property) in properties {
                        bounds.extend(IntegerBound::of(field, property)?);
                    }
                }
                annotation if ANNOTATIONS.contains(&annotation) => {}
                other => return Err(format!("`{other}` at the root")),
            }
        }
        Ok(SchemaBounds { bounds })
    }

    /// Whether every bound holds in `input`, a JSON object the input struct parsed.
    fn hold(&self, input: &serde_json::Value) -> bool {
        self.bounds.iter().all(|bound| bound.holds(input))
    }
}

impl IntegerBound {
    /// The bounds of the argument `field`; `Ok(None)` for a string, boolean or unbounded
    /// integer; `Err` for any other schema.
    fn of(field: &str, property: &serde_json::Value) -> Result<Option<IntegerBound>, String> {
        let property = property
            .as_object()
            .ok_or_else(|| format!("`{field}` is not a schema object"))?;
        let kind = match property.get("type") {
            Some(serde_json::Value::String(kind)) => kind.as_str(),
            Some(serde_json::Value::Array(kinds)) => match kinds.as_slice() {
                [
                    serde_json::Value::String(kind),
                    serde_json::Value::String(null),
                ] if null == "null" => kind.as_str(),
                _ => return Err(format!("`type` of `{field}` is not one type or null")),
            },
            _ => return Err(format!("`{field}` has no `type`")),
        };
        if !matches!(kind, "string" | "boolean" | "integer") {
            return Err(format!("`{field}` is of type `{kind}`"));
        }
        let mut bound = IntegerBound {
            field: field.to_owned(),
            minimum: None,
            maximum: None,
        };
        for (keyword, value) in property {
            match (keyword.as_str(), value) {
                ("type", _) => {}
                ("format", serde_json::Value::String(format))
                    if kind == "integer" && INTEGER_FORMATS.contains(&format.as_str()) => {}
                ("minimum", serde_json::Value::Number(minimum)) if kind == "integer" => {
                    bound.minimum = Some(minimum.clone());
                }
                ("maximum", serde_json::Value::Number(maximum)) if kind == "integer" => {
                    bound.maximum = Some(maximum.clone());
                }
                (annotation, _) if ANNOTATIONS.contains(&annotation) => {}
                (other, _) => return Err(format!("`{other}` on `{field}`")),
            }
        }
        Ok((bound.minimum.is_some() || bound.maximum.is_some()).then_some(bound))
    }

    /// Whether the argument, when it is a number, lies within the bounds (`null` and an absent
    /// argument have none to keep).
    fn holds(&self, input: &serde_json::Value) -> bool {
        let Some(serde_json::Value::Number(value)) = input.get(&self.field) else {
            return true;
        };
        let above = self
            .minimum
            .as_ref()
            .is_none_or(|minimum| compare(value, minimum).is_some_and(Ordering::is_ge));
        let below = self
            .maximum
            .as_ref()
            .is_none_or(|maximum| compare(value, maximum).is_some_and(Ordering::is_le));
        above && below
    }
}

/// Two JSON numbers compared exactly when both are integers, else as floats (as JSON Schema
/// compares them).
fn compare(value: &serde_json::Number, bound: &serde_json::Number) -> Option<Ordering> {
    fn integer(number: &serde_json::Number) -> Option<i128> {
        number
            .as_i64()
            .map(i128::from)
            .or_else(|| number.as_u64().map(i128::from))
    }
    match (integer(value), integer(bound)) {
        (Some(value), Some(bound)) => Some(value.cmp(&bound)),
        _ => value.as_f64()?.partial_cmp(&bound.as_f64()?),
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
        schemars::schema_for!(T::Input).to_value()
    }

    /// The input is an object (a struct also parses from an array of its fields, which the
    /// schema refuses), the input struct parses it, and its integer bounds hold; a schema
    /// that asks more than that makes the tool vouch for nothing.
    fn vouches_for_input(&self, input: &serde_json::Value) -> bool {
        let Some(bounds) = self
            .bounds
            .get_or_init(|| SchemaBounds::of(&self.input_schema()).ok())
        else {
            return false;
        };
        input.is_object()
            && <T::Input as serde::Deserialize>::deserialize(input).is_ok()
            && bounds.hold(input)
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

/// A workspace failure as a result: a hidden file is `permission_denied` (no retry helps),
/// anything else `tool_failed`.
fn fs_failure(error: crate::FsError) -> ToolExecutionResult {
    match error {
        crate::FsError::Hidden { .. } => {
            ToolExecutionResult::failure(ErrorCode::PERMISSION_DENIED, error.to_string())
        }
        error => ToolExecutionResult::tool_failed(error.to_string()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::NoopRecorder;
    use serde_json::json;

    /// [`SchemaBounds::of`] of `property` as the one argument `x` (required).
    fn check(property: serde_json::Value) -> Result<SchemaBounds, String> {
        SchemaBounds::of(&json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"x": property},
            "required": ["x"],
            "title": "T",
        }))
    }

    fn bound(minimum: Option<i64>, maximum: Option<u64>) -> Result<SchemaBounds, String> {
        Ok(SchemaBounds {
            bounds: vec![IntegerBound {
                field: "x".to_owned(),
                minimum: minimum.map(serde_json::Number::from),
                maximum: maximum.map(serde_json::Number::from),
            }],
        })
    }

    /// Every keyword a parse does not enforce refuses the schema; what it enforces, annotations
    /// and integer bounds (checked beside the parse) pass.
    #[test]
    fn a_schema_passes_only_with_keywords_the_parse_or_the_bounds_enforce() {
        let none = Ok(SchemaBounds { bounds: Vec::new() });
        let rows: Vec<(serde_json::Value, Result<SchemaBounds, String>)> = vec![
            (json!({"type": "string", "description": "d"}), none.clone()),
            (
                json!({"type": ["string", "null"], "default": null}),
                none.clone(),
            ),
            (json!({"type": "boolean", "default": false}), none.clone()),
            (json!({"type": "integer", "format": "uint64"}), none.clone()),
            (
                json!({"type": ["integer", "null"], "format": "uint64", "minimum": 1}),
                bound(Some(1), None),
            ),
            (
                json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255}),
                bound(Some(0), Some(255)),
            ),
            (
                json!({"type": "string", "minLength": 1}),
                Err("`minLength` on `x`".into()),
            ),
            (
                json!({"type": "string", "maxLength": 9}),
                Err("`maxLength` on `x`".into()),
            ),
            (
                json!({"type": "string", "pattern": "^a"}),
                Err("`pattern` on `x`".into()),
            ),
            (
                json!({"type": "string", "format": "uri"}),
                Err("`format` on `x`".into()),
            ),
            (
                json!({"type": "string", "enum": ["a"]}),
                Err("`enum` on `x`".into()),
            ),
            (
                json!({"type": "string", "minimum": 1}),
                Err("`minimum` on `x`".into()),
            ),
            (
                json!({"type": "integer", "exclusiveMinimum": 0}),
                Err("`exclusiveMinimum` on `x`".into()),
            ),
            (
                json!({"type": "integer", "multipleOf": 2}),
                Err("`multipleOf` on `x`".into()),
            ),
            (
                json!({"type": "integer", "format": "date-time"}),
                Err("`format` on `x`".into()),
            ),
            (
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 3}),
                Err("`x` is of type `array`".into()),
            ),
            (
                json!({"type": "object", "properties": {}}),
                Err("`x` is of type `object`".into()),
            ),
            (
                json!({"type": "number"}),
                Err("`x` is of type `number`".into()),
            ),
            (
                json!({"type": ["string", "integer"]}),
                Err("`type` of `x` is not one type or null".into()),
            ),
            (
                json!({"$ref": "#/$defs/X"}),
                Err("`x` has no `type`".into()),
            ),
            (
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
                Err("`x` has no `type`".into()),
            ),
            (json!(true), Err("`x` is not a schema object".into())),
        ];
        for (property, expected) in rows {
            assert_eq!(check(property.clone()), expected, "{property}");
        }
        let root_rows = [
            (
                json!({"type": "object", "minProperties": 1}),
                "`minProperties` at the root",
            ),
            (
                json!({"type": "object", "$defs": {}}),
                "`$defs` at the root",
            ),
            (
                json!({"type": "object", "additionalProperties": true}),
                "`additionalProperties` at the root",
            ),
            (
                json!({"type": "object", "oneOf": []}),
                "`oneOf` at the root",
            ),
            (
                json!({"type": ["object", "null"]}),
                "the schema is not `type: object`",
            ),
            (
                json!({"properties": {}}),
                "the schema is not `type: object`",
            ),
            (json!(true), "the schema is not an object"),
        ];
        for (schema, expected) in root_rows {
            assert_eq!(
                SchemaBounds::of(&schema),
                Err(expected.to_owned()),
                "{schema}"
            );
        }
    }

    /// Bounds hold on numbers within them, compared exactly, and say nothing of `null`, an
    /// absent argument or another field.
    #[test]
    fn bounds_hold_within_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "x": {"type": ["integer", "null"], "minimum": 1, "maximum": 18446744073709551615u64},
                "y": {"type": "integer", "minimum": -5, "maximum": 0.5}
            }
        });
        let bounds = SchemaBounds::of(&schema).unwrap();
        let rows = [
            (json!({}), true),
            (json!({"x": null}), true),
            (json!({"x": 1}), true),
            (json!({"x": 0}), false),
            (json!({"x": -1}), false),
            (json!({"x": 18446744073709551615u64}), true),
            (json!({"x": 1.0}), true),
            (json!({"x": 0.5}), false),
            (json!({"y": -5}), true),
            (json!({"y": -6}), false),
            (json!({"y": 0}), true),
            (json!({"y": 1}), false),
            (json!({"x": 3, "y": -6}), false),
            (json!({"z": -100}), true),
        ];
        for (input, expected) in rows {
            assert_eq!(bounds.hold(&input), expected, "{input}");
        }
    }

    /// Every file tool vouches for its well-formed calls (else each would compile its schema
    /// again), and for nothing that is not an object or breaks a bound.
    #[test]
    fn every_file_tool_vouches_for_its_well_formed_calls() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Arc::new(Workspace::open(dir.path()).unwrap());
        let tools = builtin_tools(workspace, Arc::new(NoopRecorder));
        let rows = [
            (
                "read_file",
                json!({"path": "a.txt", "offset": 2, "limit": 1}),
                true,
            ),
            ("read_file", json!({"path": "a.txt", "offset": null}), true),
            ("read_file", json!({"path": "a.txt", "offset": 0}), false),
            ("read_file", json!({"path": "a.txt", "limit": 0}), false),
            ("read_file", json!(["a.txt"]), false),
            ("read_file", json!({"path": "a.txt", "extra": 1}), false),
            (
                "search_files",
                json!({"query": "q", "regex": true, "maxResults": 5}),
                true,
            ),
            (
                "search_files",
                json!({"query": "q", "maxResults": 0}),
                false,
            ),
            ("glob_files", json!({"pattern": "*.rs"}), true),
            ("write_file", json!({"path": "a", "content": ""}), true),
            ("write_file", json!({"path": "a"}), false),
            (
                "edit_file",
                json!({"path": "a", "oldText": "x", "newText": "y"}),
                true,
            ),
            ("rename_file", json!({"from": "a", "to": "b"}), true),
            ("delete_file", json!({"path": "a"}), true),
            ("delete_file", json!({"path": 7}), false),
        ];
        for tool in &tools {
            assert_eq!(
                SchemaBounds::of(&tool.input_schema()).map(|_| ()),
                Ok(()),
                "{}",
                tool.name()
            );
            assert!(rows.iter().any(|(name, _, _)| *name == tool.name()));
        }
        for (name, input, expected) in rows {
            let tool = tools.iter().find(|tool| tool.name() == name).unwrap();
            assert_eq!(tool.vouches_for_input(&input), expected, "{name} {input}");
        }
    }
}
