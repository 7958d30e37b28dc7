//! The frozen tool table (A1) and what the model is shown (A9 evidence).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use clawsmith_protocol::{SearchMetadata, Tool};
use clawsmith_security::ToolFacts;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::CoreError;

/// A tool contributed by an extension (MCP server, LSP, plugin, host code).
#[derive(Clone)]
pub struct ExtensionTool {
    /// Where it came from, for error messages and audit, e.g. `mcp:github`. The sources in
    /// [`IN_TREE_SOURCES`] (`lsp`, `skills`, `memory`, `agent`) name clawsmith's own crates:
    /// their schemas are compiled on the tool's first call, as the built-in tools' are; any
    /// other source's schema is compiled when it enters the table.
    pub source: String,
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Whether it is hidden until `search_tools` activates it (A9). A tool whose
    /// [`Tool::deferred`] returns metadata is deferred either way.
    pub deferred: bool,
}

impl std::fmt::Debug for ExtensionTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ExtensionTool")
            .field("source", &self.source)
            .field("name", &self.tool.name())
            .field("deferred", &self.deferred)
            .finish()
    }
}

/// One row of the table: the tool, where it came from, its normalized facts and its schema
/// validator.
///
/// An extension tool's schema is compiled when it enters the table, so a bad one fails
/// construction ([`CoreError::InvalidSchema`]). The schemas clawsmith ships — the built-in
/// tools' and those of its own extension crates ([`IN_TREE_SOURCES`]) — are compiled on their
/// tool's first call instead: a process that makes one call compiles one validator, not twenty
/// (about a tenth of a short process's time; the six `lsp_*` and `memory_search` schemas alone
/// were ~15% of a `clawsmith call read_file`), and tests compile every shipped schema.
pub struct ToolEntry {
    tool: Arc<dyn Tool>,
    origin: String,
    facts: ToolFacts,
    schema: serde_json::Value,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
    search: Option<SearchMetadata>,
}

impl std::fmt::Debug for ToolEntry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ToolEntry")
            .field("name", &self.facts.name)
            .field("origin", &self.origin)
            .field("deferred", &self.search.is_some())
            .finish_non_exhaustive()
    }
}

impl ToolEntry {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.facts.name
    }

    /// Where the tool came from (`builtin:fs`, `builtin:command`, `session`, `service:artifacts`,
    /// `service:commands`, `extension:<source>`).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The tool itself.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// Effective risk and normalized capabilities (S1, S2).
    pub fn facts(&self) -> &ToolFacts {
        &self.facts
    }

    /// The input schema, exactly as shown to the model and validated against.
    pub fn input_schema(&self) -> &serde_json::Value {
        &self.schema
    }

    /// Whether the tool is deferred (hidden until activated).
    pub fn is_deferred(&self) -> bool {
        self.search.is_some()
    }

    /// Search metadata of a deferred tool.
    pub fn search_metadata(&self) -> Option<&SearchMetadata> {
        self.search.as_ref()
    }

    /// Validates `input` against the schema; `Err` lists what is wrong, field by field.
    pub(crate) fn validate(&self, input: &serde_json::Value) -> Result<(), String> {
        let validator = self
            .validator
            .get_or_init(|| compile_shipped(&self.schema).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|error| format!("the tool's own schema does not compile: {error}"))?;
        let problems: Vec<String> = validator
            .iter_errors(input)
            .take(MAX_REPORTED_SCHEMA_ERRORS)
            .map(|error| {
                let pointer = error.instance_path().to_string();
                if pointer.is_empty() {
                    format!("arguments: {error}")
                } else {
                    format!("argument `{}`: {error}", pointer_to_field(&pointer))
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

const MAX_REPORTED_SCHEMA_ERRORS: usize = 5;

/// `/todos/0/status` ⇒ `todos[0].status`: the way a model names a field.
fn pointer_to_field(pointer: &str) -> String {
    let mut field = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            field.push('[');
            field.push_str(&segment);
            field.push(']');
        } else {
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(&segment);
        }
    }
    field
}

/// A tool as the model sees it: name, description and input schema.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownTool {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub input_schema: serde_json::Value,
}

/// The frozen table: built once at construction, never changed afterwards. Deferred tools are in
/// the table (so a call to one is `inactive_tool`, not `unknown_tool`) but are shown to the model
/// only once activated.
#[derive(Debug)]
pub struct ToolTable {
    entries: Vec<ToolEntry>,
    index: HashMap<String, usize>,
    /// `toolSchemaSha256` per set of active deferred tools: the table never changes, so each
    /// shown list is hashed once (canonical JSON of every schema: the bulk of a model request's
    /// cost, paid on every MCP call before).
    schema_hashes: std::sync::Mutex<HashMap<Vec<String>, String>>,
}

/// Builds, once per process, what the first compile of a shipped schema needs before it can
/// compile anything (`compile_shipped`: jsonschema's validator of the draft-4 meta-schema
/// that its one-line root is checked against). Nothing is shared with the table: a host that
/// knows a call is coming can run this on another thread while it opens its store, and the
/// call's own compile then finds it built.
pub fn prepare_schema_compiler() {
    let warm_up = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": false
    });
    let _ = compile_shipped(&warm_up);
}

/// Where [`compile_shipped`] puts the schema it compiles.
const SHIPPED_SCHEMA_URI: &str = "urn:clawsmith:tool-input-schema";

/// Compiles a schema clawsmith ships (a built-in tool's or one of [`IN_TREE_SOURCES`]'),
/// with the same keywords, draft and error messages as `jsonschema::validator_for`, but
/// without checking the schema against its draft's meta-schema first.
///
/// That check is what made a process's first compile expensive: jsonschema 0.61 builds a
/// validator of the whole 2020-12 meta-schema (its eight vocabularies and their registry) for
/// it, ~1.4 ms of processor time against ~12 µs for compiling a tool's schema itself (issue 15:
/// a quarter of a `clawsmith call read_file`'s samples), and it has no option to skip it. A
/// shipped schema is derived from a Rust type by schemars, and the tests check every one of
/// them against the meta-schema (`jsonschema::validator_for`), so checking it again in every
/// process proves nothing new. The check is skipped the way jsonschema allows: the schema
/// goes into a registry as a resource of its own draft (which a compile never checks against
/// a meta-schema), and the compiled root is `{"$ref": <that resource>}` read as draft 4, whose
/// meta-schema validator is a fraction of the cost (~0.3 ms). The reference compiles its
/// target with the target's own draft and vocabularies, and a `$ref` reports its target's
/// errors at the same instance paths, so arguments are checked exactly as before. A schema
/// from elsewhere (MCP, plugins, host code) is never compiled here: it keeps the full check
/// ([`ToolTable::build`]); neither is one whose `$schema` names a meta-schema jsonschema does
/// not know.
fn compile_shipped(
    schema: &serde_json::Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    let draft = jsonschema::Draft::default().detect(schema);
    if draft == jsonschema::Draft::Unknown || schema.is_boolean() {
        return jsonschema::validator_for(schema);
    }
    let registry = jsonschema::Registry::new()
        .retrieve_known_draft_meta_schemas(false)
        .add(SHIPPED_SCHEMA_URI, draft.create_resource_ref(schema))
        .and_then(jsonschema::RegistryBuilder::prepare)
        .map_err(jsonschema::ValidationError::from)?;
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .with_registry(&registry)
        .build(&serde_json::json!({"$ref": SHIPPED_SCHEMA_URI}))
}

/// The extension sources that are clawsmith's own crates (`clawsmith-lsp`, `clawsmith-skills`'
/// `skill_view` and `memory_search`, `clawsmith-agent`): their schemas are derived from Rust
/// types like the built-in tools', so a bad one is a bug of this repository that tests catch
/// (the CLI's test compiles every schema of its table), not input to refuse at start. Their
/// tools are compiled on first call; every other source (`mcp:…`, `plugin:…`, host code) brings
/// schemas written elsewhere, compiled when they enter the table.
pub const IN_TREE_SOURCES: [&str; 4] = ["lsp", "skills", "memory", "agent"];

/// Whether a table origin (`extension:<source>`) brings a schema written outside this
/// repository, compiled when the tool enters the table.
fn schema_from_elsewhere(origin: &str) -> bool {
    origin
        .strip_prefix("extension:")
        .is_some_and(|source| !IN_TREE_SOURCES.contains(&source))
}

/// Shown lists whose hash is kept (a session activates a handful of sets).
const SCHEMA_HASHES_KEPT: usize = 64;

/// A tool offered to the table with its origin and deferral flag.
pub(crate) struct Candidate {
    pub origin: String,
    pub tool: Arc<dyn Tool>,
    pub deferred: bool,
}

impl ToolTable {
    /// Builds the table in the order given. Fails on the first duplicate name (naming both
    /// origins), an invalid name, or a schema that does not compile.
    pub(crate) fn build(candidates: Vec<Candidate>) -> Result<ToolTable, CoreError> {
        let mut table = ToolTable {
            entries: Vec::with_capacity(candidates.len()),
            index: HashMap::new(),
            schema_hashes: std::sync::Mutex::default(),
        };
        for candidate in candidates {
            table.push(candidate)?;
        }
        Ok(table)
    }

    /// The table with one more tool at the end.
    pub(crate) fn with(mut self, candidate: Candidate) -> Result<ToolTable, CoreError> {
        self.push(candidate)?;
        Ok(self)
    }

    fn push(&mut self, candidate: Candidate) -> Result<(), CoreError> {
        let name = candidate.tool.name().to_owned();
        if !valid_tool_name(&name) {
            return Err(CoreError::InvalidToolName {
                name,
                origin: candidate.origin,
            });
        }
        if let Some(&existing) = self.index.get(&name) {
            return Err(CoreError::DuplicateTool {
                name,
                first: self.entries[existing].origin.clone(),
                second: candidate.origin,
            });
        }
        let schema = candidate.tool.input_schema();
        let validator = OnceLock::new();
        if schema_from_elsewhere(&candidate.origin) {
            let compiled =
                jsonschema::validator_for(&schema).map_err(|error| CoreError::InvalidSchema {
                    name: name.clone(),
                    origin: candidate.origin.clone(),
                    message: error.to_string(),
                })?;
            let _ = validator.set(Ok(compiled));
        }
        let search = match candidate.tool.deferred() {
            Some(metadata) => Some(metadata),
            None => candidate.deferred.then(SearchMetadata::default),
        };
        let facts = ToolFacts::of(candidate.tool.as_ref());
        self.index.insert(name, self.entries.len());
        self.entries.push(ToolEntry {
            tool: candidate.tool,
            origin: candidate.origin,
            facts,
            schema,
            validator,
            search,
        });
        Ok(())
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&ToolEntry> {
        self.index
            .get(name)
            .map(|&position| &self.entries[position])
    }

    /// Every entry in table order (deferred ones included).
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }

    /// Every tool name in table order (deferred ones included).
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(ToolEntry::name).collect()
    }

    /// The list the model is shown when `activated` deferred tools are active: every
    /// non-deferred tool and the activated deferred ones, in table order.
    pub fn shown(&self, activated: &BTreeSet<String>) -> Vec<ShownTool> {
        self.shown_entries(activated)
            .map(|entry| ShownTool {
                name: entry.name().to_owned(),
                description: entry.tool.description().to_owned(),
                input_schema: entry.schema.clone(),
            })
            .collect()
    }

    /// The names of [`ToolTable::shown`]'s tools, in the same order, without copying their
    /// schemas.
    pub fn shown_names(&self, activated: &BTreeSet<String>) -> Vec<String> {
        self.shown_entries(activated)
            .map(|entry| entry.name().to_owned())
            .collect()
    }

    /// The entries shown with `activated` active: every tool not deferred, and the deferred ones
    /// activated.
    fn shown_entries<'a>(
        &'a self,
        activated: &'a BTreeSet<String>,
    ) -> impl Iterator<Item = &'a ToolEntry> + 'a {
        self.entries
            .iter()
            .filter(|entry| !entry.is_deferred() || activated.contains(entry.name()))
    }

    /// `toolSchemaSha256` of the list shown with `activated` active (computed once per set).
    pub fn tool_schema_sha256(&self, activated: &BTreeSet<String>) -> String {
        let key: Vec<String> = self
            .entries
            .iter()
            .filter(|entry| entry.is_deferred() && activated.contains(entry.name()))
            .map(|entry| entry.name().to_owned())
            .collect();
        let mut hashes = self
            .schema_hashes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hash) = hashes.get(&key) {
            return hash.clone();
        }
        let hash = shown_entries_sha256(self.shown_entries(activated));
        if hashes.len() >= SCHEMA_HASHES_KEPT {
            hashes.clear();
        }
        hashes.insert(key, hash.clone());
        hash
    }
}

/// SHA-256 (lowercase hex) of the canonical JSON of a shown list: object keys sorted, no
/// whitespace, so the hash does not depend on serde_json's map order or on formatting.
pub fn schema_list_sha256(shown: &[ShownTool]) -> String {
    let value = serde_json::to_value(shown).unwrap_or(serde_json::Value::Null);
    hex::encode(Sha256::digest(canonical_json(&value).as_bytes()))
}

/// [`schema_list_sha256`] of the [`ShownTool`]s of `entries`, written straight from the
/// entries: the same canonical text (a shown tool's keys sorted are `description`,
/// `inputSchema`, `name`) without copying every schema into a list and that list into a
/// `serde_json::Value` first (issue 15: a one-call process hashes the whole shown list once,
/// ~2% of its main thread with the copies).
fn shown_entries_sha256<'a>(entries: impl Iterator<Item = &'a ToolEntry>) -> String {
    let mut out = String::from("[");
    for (position, entry) in entries.enumerate() {
        if position > 0 {
            out.push(',');
        }
        out.push_str("{\"description\":");
        write_json_string(entry.tool.description(), &mut out);
        out.push_str(",\"inputSchema\":");
        write_canonical(&entry.schema, &mut out);
        out.push_str(",\"name\":");
        write_json_string(entry.name(), &mut out);
        out.push('}');
    }
    out.push(']');
    hex::encode(Sha256::digest(out.as_bytes()))
}

/// `text` as a JSON string, escaped as serde_json escapes it (serialising a `str` cannot fail).
fn write_json_string(text: &str, out: &mut String) {
    out.push_str(&serde_json::to_string(text).unwrap_or_default());
}

/// Canonical JSON text: keys sorted, no insignificant whitespace.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (position, key) in keys.into_iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                if let Some(inner) = map.get(key) {
                    write_canonical(inner, out);
                }
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Provider APIs accept `^[a-zA-Z0-9_-]{1,64}$` (OpenAI) or a superset; we also allow `.` and `:`
/// for namespaced extension tools.
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_read_like_fields() {
        assert_eq!(pointer_to_field("/path"), "path");
        assert_eq!(pointer_to_field("/todos/0/status"), "todos[0].status");
        assert_eq!(pointer_to_field("/a~1b"), "a/b");
    }

    /// Errors of `validator` for `instance`: instance path and message, as `validate` reports.
    fn errors(validator: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
        validator
            .iter_errors(instance)
            .map(|error| format!("{} {error}", error.instance_path()))
            .collect()
    }

    /// The way shipped schemas are compiled (no meta-schema check) checks arguments exactly as
    /// `jsonschema::validator_for` does: same errors, same paths, same order, for schemas
    /// schemars derives (nested `$defs`, enums, options, bounds) and the protocol's whole schema.
    #[test]
    fn shipped_schemas_check_arguments_as_validator_for_does() {
        #[derive(schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            /// A bounded count.
            #[schemars(range(min = 1, max = 9))]
            count: u32,
            kind: Kind,
        }
        #[derive(schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        #[allow(dead_code)]
        enum Kind {
            /// One.
            First,
            /// Two.
            Second,
        }
        #[derive(schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Arguments {
            path: String,
            offset: Option<u64>,
            items: Vec<Inner>,
            #[schemars(length(min = 2), regex(pattern = "^[a-z]+$"))]
            label: Option<String>,
        }
        let derived = schemars::schema_for!(Arguments).to_value();
        let instances = [
            json!({"path": "a", "items": []}),
            json!({"path": "a", "items": [{"count": 3, "kind": "first"}], "label": "ab"}),
            json!({}),
            json!([]),
            json!({"path": 7, "offset": -1, "extra": true, "items": {}}),
            json!({"path": "a", "items": [{"count": 0, "kind": "third"}, {"count": 10}]}),
            json!({"path": "a", "items": [{"count": 1.5, "kind": "second", "x": 1}]}),
            json!({"path": "a", "items": [], "label": "A", "offset": "1"}),
        ];
        let protocol = clawsmith_protocol::schema::protocol_schema();
        let protocol_instances = [
            json!({"version": 1, "status": "success", "content": "x"}),
            json!({"type": "tool.started"}),
            json!({"role": "assistant", "content": 3}),
            json!(null),
        ];
        for (schema, instances) in [
            (&derived, &instances[..]),
            (&protocol, &protocol_instances[..]),
        ] {
            let full = jsonschema::validator_for(schema).unwrap();
            let shipped = compile_shipped(schema).unwrap();
            let mut invalid = 0;
            for instance in instances {
                let expected = errors(&full, instance);
                invalid += usize::from(!expected.is_empty());
                assert_eq!(errors(&shipped, instance), expected, "{instance}");
                assert_eq!(shipped.is_valid(instance), full.is_valid(instance));
            }
            assert!(invalid >= 2, "the instances must include invalid ones");
        }
    }

    /// A shipped schema that does not compile still fails to compile (the keywords' own checks
    /// run; only the meta-schema check is skipped), and a schema naming a meta-schema
    /// jsonschema does not know goes through the full check.
    #[test]
    fn a_broken_shipped_schema_still_fails_to_compile() {
        assert!(compile_shipped(&json!({"type": "no-such-type"})).is_err());
        assert!(compile_shipped(&json!({"pattern": "(unclosed"})).is_err());
        assert!(compile_shipped(&json!({"$ref": "#/$defs/missing"})).is_err());
        let custom = json!({"$schema": "https://example.invalid/meta", "type": "object"});
        assert_eq!(
            compile_shipped(&custom).is_err(),
            jsonschema::validator_for(&custom).is_err()
        );
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let value = serde_json::json!({"b": 1, "a": {"d": [1, {"z": null, "y": "x"}], "c": true}});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":{"c":true,"d":[1,{"y":"x","z":null}]},"b":1}"#
        );
    }
}
