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
/// were ~15% of a `clawsmith call read_file`), and tests compile every shipped schema. A call
/// that a shipped tool vouches for ([`Tool::vouches_for_input`]: the file tools, whose typed
/// parse is proven by this module's tests to accept nothing their schema refuses) compiles
/// none: a one-call process's compile was ~13% of its instructions.
pub struct ToolEntry {
    tool: Arc<dyn Tool>,
    origin: Origin,
    facts: ToolFacts,
    /// The tool's [`Tool::input_schema`], asked for when first needed (shown, hashed, listed or
    /// compiled): a process that never shows a deferred tool never builds its schema (the
    /// six `lsp_*` schemas were ~1% of a `clawsmith call read_file`). A schema from
    /// elsewhere is asked for when the tool enters the table, to compile it.
    schema: OnceLock<serde_json::Value>,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
    /// Whether the tool's [`Tool::vouches_for_input`] is taken: a shipped tool's is.
    trusts_vouching: bool,
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

    /// Where the tool came from.
    pub fn origin(&self) -> &Origin {
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
        self.schema.get_or_init(|| self.tool.input_schema())
    }

    /// Whether the tool is deferred (hidden until activated).
    pub fn is_deferred(&self) -> bool {
        self.search.is_some()
    }

    /// Search metadata of a deferred tool.
    pub fn search_metadata(&self) -> Option<&SearchMetadata> {
        self.search.as_ref()
    }

    /// Validates `input` against the schema; `Err` lists what is wrong, field by field. An input
    /// a shipped tool vouches for is accepted without the schema's validator (which is then
    /// never compiled); every other input, a refused one included, goes through it, so what a
    /// refusal says is the schema's word.
    pub(crate) fn validate(&self, input: &serde_json::Value) -> Result<(), String> {
        if self.trusts_vouching && self.tool.vouches_for_input(input) {
            return Ok(());
        }
        let validator = self
            .validator
            .get_or_init(|| compile_shipped(self.input_schema()).map_err(|e| e.to_string()))
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
/// it, ~1.4 ms of processor time against ~12 µs for compiling a tool's schema itself (a
/// quarter of a `clawsmith call read_file`'s samples), and it has no option to skip it. A
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

/// Where a tool of the table comes from. Code that treats tools differently by origin matches
/// on this; its text (`builtin:fs`, `extension:<source>`…) is for people, listings and errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// The seven file tools: `builtin:fs`.
    Files,
    /// `run_command`: `builtin:command`.
    Command,
    /// `todo_write`, `todo_list` and `search_tools`: `session`.
    Session,
    /// `read_artifact`: `service:artifacts`.
    Artifacts,
    /// The background-command tools: `service:commands`.
    Commands,
    /// A tool the host added, with its source: `extension:<source>`.
    Extension(String),
}

impl Origin {
    /// Whether the tool ships with the core (file tools, commands, session and service tools),
    /// as opposed to an extension.
    pub fn is_core(&self) -> bool {
        !matches!(self, Origin::Extension(_))
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Files => formatter.write_str("builtin:fs"),
            Origin::Command => formatter.write_str("builtin:command"),
            Origin::Session => formatter.write_str("session"),
            Origin::Artifacts => formatter.write_str("service:artifacts"),
            Origin::Commands => formatter.write_str("service:commands"),
            Origin::Extension(source) => write!(formatter, "extension:{source}"),
        }
    }
}

/// Whether a tool of `origin` brings a schema written outside this repository, compiled when the
/// tool enters the table.
fn schema_from_elsewhere(origin: &Origin) -> bool {
    match origin {
        Origin::Extension(source) => !IN_TREE_SOURCES.contains(&source.as_str()),
        _ => false,
    }
}

/// Shown lists whose hash is kept (a session activates a handful of sets).
const SCHEMA_HASHES_KEPT: usize = 64;

/// A tool offered to the table with its origin and deferral flag.
pub(crate) struct Candidate {
    pub origin: Origin,
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
                origin: candidate.origin.to_string(),
            });
        }
        if let Some(&existing) = self.index.get(&name) {
            return Err(CoreError::DuplicateTool {
                name,
                first: self.entries[existing].origin.to_string(),
                second: candidate.origin.to_string(),
            });
        }
        let schema = OnceLock::new();
        let validator = OnceLock::new();
        let from_elsewhere = schema_from_elsewhere(&candidate.origin);
        if from_elsewhere {
            let compiled =
                jsonschema::validator_for(schema.get_or_init(|| candidate.tool.input_schema()))
                    .map_err(|error| CoreError::InvalidSchema {
                        name: name.clone(),
                        origin: candidate.origin.to_string(),
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
            trusts_vouching: !from_elsewhere,
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
                input_schema: entry.input_schema().clone(),
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
/// `serde_json::Value` first (a one-call process hashes the whole shown list once,
/// ~2% of its main thread with the copies).
fn shown_entries_sha256<'a>(entries: impl Iterator<Item = &'a ToolEntry>) -> String {
    let mut out = Vec::from(*b"[");
    for (position, entry) in entries.enumerate() {
        if position > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"description\":");
        write_json(entry.tool.description(), &mut out);
        out.extend_from_slice(b",\"inputSchema\":");
        write_canonical(entry.input_schema(), &mut out);
        out.extend_from_slice(b",\"name\":");
        write_json(entry.name(), &mut out);
        out.push(b'}');
    }
    out.push(b']');
    hex::encode(Sha256::digest(&out))
}

/// `value` as compact JSON, as serde_json writes it, appended to `out`.
fn write_json<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing a string, number, boolean or null into a `Vec` cannot fail.
    let _ = serde_json::to_writer(out, value);
}

/// Canonical JSON text: keys sorted, no insignificant whitespace.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // serde_json writes UTF-8 (every piece above is its output or ASCII).
    String::from_utf8(out)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

/// Writes `value` canonically into `out`: bytes straight into the buffer (no `String` per string
/// or number), and an object's keys listed and sorted only when they are not in order already
/// (schemars writes schemas' keys sorted, and this text is hashed by every process that
/// opens a turn).
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) {
    match value {
        serde_json::Value::Object(map) => {
            out.push(b'{');
            let write_member =
                |position: usize, key: &String, inner: &serde_json::Value, out: &mut Vec<u8>| {
                    if position > 0 {
                        out.push(b',');
                    }
                    write_json(key.as_str(), out);
                    out.push(b':');
                    write_canonical(inner, out);
                };
            if map.keys().is_sorted() {
                for (position, (key, inner)) in map.iter().enumerate() {
                    write_member(position, key, inner, out);
                }
            } else {
                let mut members: Vec<(&String, &serde_json::Value)> = map.iter().collect();
                members.sort_by_key(|(key, _)| *key);
                for (position, (key, inner)) in members.into_iter().enumerate() {
                    write_member(position, key, inner, out);
                }
            }
            out.push(b'}');
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
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

    /// A core's table with every tool clawsmith-core ships, over a fresh workspace and store,
    /// and `extension` as a deferred extension tool of that source.
    fn shipped_table(
        dir: &std::path::Path,
        extension: Option<(&str, Arc<dyn Tool>)>,
    ) -> crate::AgentCore {
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let store = Arc::new(clawsmith_checkpoint::Store::open(dir.join("state.db")).unwrap());
        let mut config = crate::CoreConfig::new(&workspace, store);
        config.extension_tools = extension
            .into_iter()
            .map(|(source, tool)| ExtensionTool {
                source: source.to_owned(),
                tool,
                deferred: true,
            })
            .collect();
        crate::AgentCore::new(config).unwrap()
    }

    /// Arguments for a tool with `schema`: a well-formed base (the required fields, or every
    /// field) mutated — fields removed, set to values of every JSON type (out-of-range, negative,
    /// fractional and huge integers, nested arrays and objects, null), unknown and misspelt
    /// fields added, a non-object in place of the object (an array of the fields' values
    /// among them, which a serde struct parses) — once each and then at random, two or three
    /// mutations at a time (a fixed seed: the same inputs every run).
    fn generated_inputs(schema: &serde_json::Value) -> Vec<serde_json::Value> {
        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(|name| name.as_str()).collect())
            .unwrap_or_default();
        let well_formed = |property: &serde_json::Value| {
            let kinds = match &property["type"] {
                serde_json::Value::Array(kinds) => kinds.clone(),
                kind => vec![kind.clone()],
            };
            match kinds.first().and_then(serde_json::Value::as_str) {
                Some("integer") => property.get("minimum").cloned().unwrap_or(json!(1)),
                Some("boolean") => json!(true),
                Some("string") => json!("a.txt"),
                _ => json!(null),
            }
        };
        let mut required_only = serde_json::Map::new();
        let mut every_field = serde_json::Map::new();
        for (name, property) in &properties {
            if required.contains(&name.as_str()) {
                required_only.insert(name.clone(), well_formed(property));
            }
            every_field.insert(name.clone(), well_formed(property));
        }
        let values = [
            json!(""),
            json!("a.txt"),
            json!("../outside"),
            json!("ü\n\u{0}"),
            json!(0),
            json!(1),
            json!(2),
            json!(100),
            json!(-1),
            json!(1.5),
            json!(1.0),
            json!(0.0),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1e300),
            json!(-1e300),
            json!(true),
            json!(false),
            json!(null),
            json!([]),
            json!(["a.txt"]),
            json!([1, 2]),
            json!({}),
            json!({"path": "a.txt"}),
        ];
        let mut names: Vec<String> = properties.keys().cloned().collect();
        for name in properties.keys() {
            let snake: String = name
                .chars()
                .flat_map(|c| {
                    if c.is_ascii_uppercase() {
                        vec!['_', c.to_ascii_lowercase()]
                    } else {
                        vec![c]
                    }
                })
                .collect();
            names.push(snake);
            names.push(name.to_ascii_lowercase());
            names.push(format!("{name}s"));
        }
        names.extend(["extra".to_owned(), String::new(), "PATH".to_owned()]);
        names.sort();
        names.dedup();
        let bases = [
            serde_json::Value::Object(required_only.clone()),
            serde_json::Value::Object(every_field.clone()),
        ];
        let mut inputs: Vec<serde_json::Value> = bases.to_vec();
        inputs.extend(values.iter().cloned());
        for base in [&required_only, &every_field] {
            inputs.push(serde_json::Value::Array(base.values().cloned().collect()));
            inputs.push(json!([serde_json::Value::Object(base.clone())]));
            for name in base.keys() {
                let mut without = base.clone();
                without.remove(name);
                inputs.push(serde_json::Value::Object(without));
            }
            for name in &names {
                for value in &values {
                    let mut changed = base.clone();
                    changed.insert(name.clone(), value.clone());
                    inputs.push(serde_json::Value::Object(changed));
                }
            }
        }
        // A fixed linear congruential sequence: reproducible without a random crate.
        let mut state: u64 = 0x5eed_cafe_f00d_0015;
        let mut next = |bound: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(state >> 33).unwrap() % bound
        };
        for _ in 0..3_000 {
            let mut input = bases[next(2)].as_object().cloned().unwrap();
            for _ in 0..2 + next(2) {
                if next(4) == 0 && !input.is_empty() {
                    let name = input.keys().nth(next(input.len())).unwrap().clone();
                    input.remove(&name);
                } else {
                    let name = names[next(names.len())].clone();
                    input.insert(name, values[next(values.len())].clone());
                }
            }
            inputs.push(serde_json::Value::Object(input));
        }
        inputs
    }

    /// The proof [`ToolEntry::validate`] rests on: a tool the table takes the word of never
    /// vouches for an input its compiled schema refuses — every shipped tool that vouches for
    /// anything, over thousands of generated inputs each. It also vouches for its well-formed
    /// calls, or the validator would be compiled for them again.
    #[test]
    fn no_shipped_tool_vouches_for_an_input_its_schema_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let core = shipped_table(dir.path(), None);
        let mut vouching = Vec::new();
        for entry in core.tools().entries() {
            assert!(entry.trusts_vouching, "{}", entry.name());
            let validator = compile_shipped(entry.input_schema()).unwrap();
            let (mut vouched, mut refused_by_schema) = (0, 0);
            for input in generated_inputs(entry.input_schema()) {
                let valid = validator.is_valid(&input);
                refused_by_schema += usize::from(!valid);
                if entry.tool().vouches_for_input(&input) {
                    vouched += 1;
                    assert!(valid, "{} vouches for {input}", entry.name());
                    assert_eq!(entry.validate(&input), Ok(()));
                }
            }
            if vouched > 0 {
                assert!(refused_by_schema >= 100, "{}", entry.name());
                vouching.push((entry.name().to_owned(), vouched));
            }
        }
        // The file tools vouch (the others do not say yet).
        let names: Vec<&str> = vouching.iter().map(|(name, _)| name.as_str()).collect();
        let file_tools: Vec<&str> = core
            .tools()
            .entries()
            .iter()
            .filter(|entry| *entry.origin() == Origin::Files)
            .map(ToolEntry::name)
            .collect();
        assert_eq!((names.len(), names), (7, file_tools));
        assert!(
            vouching.iter().all(|(_, vouched)| *vouched >= 20),
            "{vouching:?}"
        );
    }

    /// A test tool that vouches for every input and counts how often its schema is asked for.
    #[derive(Default)]
    struct VouchesForAll {
        schema_asked: std::sync::atomic::AtomicUsize,
    }

    impl Tool for VouchesForAll {
        fn name(&self) -> &str {
            "vouches_for_all"
        }
        fn description(&self) -> &str {
            "test"
        }
        fn risk(&self) -> clawsmith_protocol::Risk {
            clawsmith_protocol::Risk::Read
        }
        fn capabilities(&self) -> clawsmith_protocol::CapabilityDeclaration {
            clawsmith_protocol::CapabilityDeclaration::Declared(Vec::new())
        }
        fn concurrency_safe(&self) -> bool {
            true
        }
        fn input_schema(&self) -> serde_json::Value {
            self.schema_asked
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
        }
        fn summarize(&self, _input: &serde_json::Value) -> String {
            String::new()
        }
        fn execute<'a>(
            &'a self,
            _input: serde_json::Value,
            _context: clawsmith_protocol::ToolExecutionContext,
        ) -> clawsmith_protocol::ToolFuture<'a> {
            Box::pin(async { clawsmith_protocol::ToolOutput::Text(String::new()) })
        }
        fn vouches_for_input(&self, _input: &serde_json::Value) -> bool {
            true
        }
    }

    /// A shipped tool's schema is asked for once, when first needed: a deferred one that is
    /// never shown is never built, and what was asked once is what the table keeps. A schema
    /// from elsewhere is asked for at construction (it is compiled there).
    #[test]
    fn a_shipped_schema_is_asked_for_once_when_first_needed() {
        let asked =
            |tool: &Arc<VouchesForAll>| tool.schema_asked.load(std::sync::atomic::Ordering::SeqCst);
        let shipped = Arc::new(VouchesForAll::default());
        let dir = tempfile::tempdir().unwrap();
        let core = shipped_table(dir.path(), Some(("lsp", shipped.clone())));
        let table = core.tools();
        let none = BTreeSet::new();
        assert!(
            !table
                .shown_names(&none)
                .contains(&"vouches_for_all".to_owned())
        );
        table.tool_schema_sha256(&none);
        table.shown(&none);
        assert_eq!(asked(&shipped), 0);
        let active = BTreeSet::from(["vouches_for_all".to_owned()]);
        assert!(
            table
                .shown(&active)
                .iter()
                .any(|tool| tool.name == "vouches_for_all")
        );
        table.tool_schema_sha256(&active);
        assert_eq!(
            table.get("vouches_for_all").unwrap().input_schema()["required"],
            json!(["n"])
        );
        assert_eq!(asked(&shipped), 1);

        let elsewhere = Arc::new(VouchesForAll::default());
        let dir = tempfile::tempdir().unwrap();
        let core = shipped_table(dir.path(), Some(("mcp:test", elsewhere.clone())));
        assert_eq!(asked(&elsewhere), 1);
        core.tools().get("vouches_for_all").unwrap().input_schema();
        assert_eq!(asked(&elsewhere), 1);
    }

    /// A refused input still gets the schema's own message, field by field (the validator runs
    /// for every input a tool does not vouch for); a tool from elsewhere is validated even when
    /// it vouches for everything.
    #[test]
    fn refusals_keep_the_schemas_words_and_only_shipped_tools_are_taken_at_their_word() {
        let dir = tempfile::tempdir().unwrap();
        let core = shipped_table(
            dir.path(),
            Some(("mcp:test", Arc::new(VouchesForAll::default()))),
        );
        let table = core.tools();
        let outsider = table.get("vouches_for_all").unwrap();
        assert!(!outsider.trusts_vouching);
        assert!(outsider.validate(&json!({"n": "x"})).is_err());
        assert_eq!(outsider.validate(&json!({"n": 1})), Ok(()));
        let read_file = table.get("read_file").unwrap();
        assert_eq!(read_file.validate(&json!({"path": "a.txt"})), Ok(()));
        assert!(
            read_file.validator.get().is_none(),
            "compiled for a vouched call"
        );
        let rows = [
            (
                json!({"path": "a.txt", "offset": 0}),
                "argument `offset`: 0 is less than the minimum of 1",
            ),
            (
                json!({"path": 3}),
                "argument `path`: 3 is not of type \"string\"",
            ),
            (json!({}), "arguments: \"path\" is a required property"),
            (
                json!(["a.txt"]),
                "arguments: [\"a.txt\"] is not of type \"object\"",
            ),
        ];
        for (input, expected) in rows {
            assert_eq!(
                read_file.validate(&input),
                Err(expected.to_owned()),
                "{input}"
            );
        }
    }

    /// The canonical text is serde_json's compact text of the value with every object's keys
    /// sorted: objects in order or not, nested, with escapes, numbers of every kind, unicode.
    #[test]
    fn canonical_json_is_the_compact_text_with_sorted_keys() {
        fn sorted(value: &serde_json::Value) -> serde_json::Value {
            match value {
                serde_json::Value::Object(map) => {
                    let mut members: Vec<_> = map.iter().collect();
                    members.sort_by_key(|(key, _)| *key);
                    serde_json::Value::Object(
                        members
                            .into_iter()
                            .map(|(key, inner)| (key.clone(), sorted(inner)))
                            .collect(),
                    )
                }
                serde_json::Value::Array(items) => {
                    serde_json::Value::Array(items.iter().map(sorted).collect())
                }
                scalar => scalar.clone(),
            }
        }
        let values = [
            json!({"a": 1, "b": {"c": [true, null, {"e": 1, "d": 2}]}}),
            json!({"z": "\"quoted\"\n\t\u{1}", "é": "ü", "A": -0.5, "a": 1e300, "B": u64::MAX, "b": i64::MIN}),
            json!([{"y": [], "x": {}}, "\u{7f}\\", 0, -1, 1.5, false]),
            json!("just a string"),
            json!(null),
            clawsmith_protocol::schema::protocol_schema(),
        ];
        for value in values {
            assert_eq!(
                canonical_json(&value),
                serde_json::to_string(&sorted(&value)).unwrap(),
                "{value}"
            );
        }
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
