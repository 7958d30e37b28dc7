//! `clawsmith-plugin.toml`: the native manifest, read with spans so every error names its line
//! and column.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use clawsmith_core::{CommandHook, HookEntry};
use clawsmith_mcp::McpServerConfig;
use clawsmith_protocol::{CapabilityDeclaration, Risk, SearchMetadata};
use clawsmith_sandbox::MAX_TIMEOUT;
use clawsmith_security::normalize_capabilities;
use serde::Deserialize;
use toml::Spanned;

use crate::error::{PluginError, SourceFile};
use crate::paths::PluginRoot;
use crate::plugin::{Plugin, PluginFormat, PluginToolSpec, server_name, skill_names};

/// Longest plugin or tool name part.
pub const MAX_NAME_BYTES: usize = 48;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    name: Spanned<String>,
    version: Spanned<String>,
    description: Spanned<String>,
    #[serde(default)]
    tools: Vec<ToolEntry>,
    #[serde(default)]
    mcp_servers: Vec<Spanned<toml::Value>>,
    #[serde(default)]
    hooks: Vec<HookEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolEntry {
    name: Spanned<String>,
    description: Spanned<String>,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    input_schema: Option<Spanned<toml::Value>>,
    #[serde(default)]
    capabilities: Option<Spanned<toml::Value>>,
    #[serde(default)]
    risk: Option<Spanned<Risk>>,
    #[serde(default)]
    concurrency_safe: bool,
    #[serde(default)]
    deferred: bool,
    #[serde(default)]
    search_metadata: Option<SearchEntry>,
    #[serde(default)]
    timeout_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchEntry {
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    search_hint: Option<String>,
}

/// Kebab-case: `[a-z0-9]` words joined by single `-`, at most [`MAX_NAME_BYTES`].
pub(crate) fn is_kebab_case(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.split('-').all(|word| {
            !word.is_empty() && word.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9'))
        })
}

/// A name part: 1–`max` bytes of letters, digits, `-` and single `_`, so that
/// `<plugin>__<tool>` and `mcp__<server>__<tool>` split back (clawsmith-mcp's server rule).
pub(crate) fn is_name_part(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

pub(crate) fn load(root: &PluginRoot) -> Result<Plugin, PluginError> {
    let source = SourceFile::read(&root.path().join(PluginFormat::Clawsmith.manifest()))?;
    let file: ManifestFile = toml::from_str(&source.text)
        .map_err(|error| source.error(error.span(), error.message().trim()))?;
    let name = file.name.get_ref().clone();
    if !is_kebab_case(&name) {
        return Err(source.error(
            Some(file.name.span()),
            format!(
                "plugin name {name:?} must be kebab-case: words of a-z and 0-9 joined by single \
                 `-`, at most {MAX_NAME_BYTES} bytes"
            ),
        ));
    }
    for field in [&file.version, &file.description] {
        if field.get_ref().trim().is_empty() {
            return Err(source.error(Some(field.span()), "must not be empty"));
        }
    }
    let mut tools: Vec<Arc<PluginToolSpec>> = Vec::new();
    for entry in &file.tools {
        let tool = tool(&source, root, &name, entry)?;
        if let Some(first) = tools.iter().find(|other| other.name == tool.name) {
            return Err(source.error(
                Some(entry.name.span()),
                format!("tool `{}` is declared twice", first.name),
            ));
        }
        tools.push(Arc::new(tool));
    }
    let mut mcp_servers: Vec<McpServerConfig> = Vec::new();
    let mut not_run = Vec::new();
    for entry in &file.mcp_servers {
        let (server, note) = mcp_server(&source, root, &name, entry)?;
        if mcp_servers.iter().any(|other| other.name == server.name) {
            return Err(source.error(
                Some(entry.span()),
                format!("MCP server `{}` is declared twice", server.name),
            ));
        }
        not_run.extend(note);
        mcp_servers.push(server);
    }
    let mut hooks = Vec::new();
    for entry in &file.hooks {
        hooks.push(hook(&source, root, &name, entry)?);
    }
    let skills_dir = root.path().join("skills");
    let skills_dir = skills_dir.is_dir().then_some(skills_dir);
    let skills = skills_dir
        .as_deref()
        .map(|dir| skill_names(&name, dir))
        .unwrap_or_default();
    Ok(Plugin {
        name,
        version: Some(file.version.into_inner()),
        description: Some(file.description.into_inner()),
        root: root.path().to_path_buf(),
        format: PluginFormat::Clawsmith,
        tools,
        mcp_servers,
        hooks,
        skills_dir,
        skills,
        not_run,
    })
}

fn tool(
    source: &SourceFile,
    root: &PluginRoot,
    plugin: &str,
    entry: &ToolEntry,
) -> Result<PluginToolSpec, PluginError> {
    let at = |span: Range<usize>, message: String| source.error(Some(span), message);
    let own_name = entry.name.get_ref();
    if !is_name_part(own_name, MAX_NAME_BYTES) {
        return Err(at(
            entry.name.span(),
            format!(
                "tool name {own_name:?} must be 1–{MAX_NAME_BYTES} bytes of letters, digits, `-` \
                 and single `_`"
            ),
        ));
    }
    if entry.description.get_ref().trim().is_empty() {
        return Err(at(
            entry.description.span(),
            "a tool needs a description".to_owned(),
        ));
    }
    let argv = root
        .resolve_command(entry.command.get_ref())
        .map_err(|message| {
            at(
                entry.command.span(),
                format!("tool `{own_name}`: {message}"),
            )
        })?;
    let input_schema = match &entry.input_schema {
        None => serde_json::json!({"type": "object"}),
        Some(schema) => input_schema(source, root, schema)?,
    };
    let capabilities = match &entry.capabilities {
        None => CapabilityDeclaration::Missing,
        Some(value) => CapabilityDeclaration::Raw(
            serde_json::to_value(value.get_ref()).unwrap_or(serde_json::Value::Null),
        ),
    };
    // Absent, the declared risk is the floor of what the capabilities allow: the kernel holds
    // the tool to those (a missing list fails closed to every capability, hence `execute`).
    let risk = match &entry.risk {
        Some(risk) => *risk.get_ref(),
        None => normalize_capabilities(&capabilities).floor(),
    };
    let timeout = match &entry.timeout_ms {
        None => None,
        Some(timeout) => {
            let max = MAX_TIMEOUT.as_millis() as u64;
            if !(1..=max).contains(timeout.get_ref()) {
                return Err(at(
                    timeout.span(),
                    format!("timeout_ms must be between 1 and {max}"),
                ));
            }
            Some(Duration::from_millis(*timeout.get_ref()))
        }
    };
    let search_metadata = entry.search_metadata.as_ref().map(|search| SearchMetadata {
        aliases: search.aliases.clone(),
        tags: search.tags.clone(),
        search_hint: search.search_hint.clone(),
    });
    Ok(PluginToolSpec {
        name: format!("{plugin}__{own_name}"),
        plugin: plugin.to_owned(),
        description: entry.description.get_ref().trim().to_owned(),
        argv,
        input_schema,
        capabilities,
        risk,
        concurrency_safe: entry.concurrency_safe,
        deferred: entry.deferred,
        search_metadata,
        timeout,
        root: root.path().to_path_buf(),
    })
}

/// An inline table, or the path of a JSON file inside the plugin; it must compile and describe
/// an object.
fn input_schema(
    source: &SourceFile,
    root: &PluginRoot,
    value: &Spanned<toml::Value>,
) -> Result<serde_json::Value, PluginError> {
    let (schema, origin) = match value.get_ref() {
        toml::Value::String(path) => {
            let real = root.resolve_inside(path).map_err(|message| {
                source.error(Some(value.span()), format!("input_schema: {message}"))
            })?;
            let file = SourceFile::read(&real)?;
            let schema =
                serde_json::from_str::<serde_json::Value>(&file.text).map_err(|error| {
                    PluginError::Invalid {
                        path: real.clone(),
                        line_column: Some((error.line(), error.column())),
                        message: format!("not valid JSON: {error}"),
                    }
                })?;
            (schema, Some(file))
        }
        toml::Value::Table(_) => (
            serde_json::to_value(value.get_ref()).unwrap_or(serde_json::Value::Null),
            None,
        ),
        _ => {
            return Err(source.error(
                Some(value.span()),
                "input_schema must be a table (the schema inline) or the path of a JSON file in \
                 the plugin",
            ));
        }
    };
    let problem = if schema.get("type").and_then(serde_json::Value::as_str) != Some("object") {
        Some("the input schema must describe an object (\"type\": \"object\")".to_owned())
    } else {
        jsonschema::validator_for(&schema)
            .err()
            .map(|error| format!("the input schema does not compile: {error}"))
    };
    match (problem, origin) {
        (None, _) => Ok(schema),
        (Some(message), Some(file)) => Err(file.error(None, message)),
        (Some(message), None) => Err(source.error(Some(value.span()), message)),
    }
}

/// A `[[mcp_servers]]` entry as in `clawsmith.toml`, renamed `<plugin>-<server>`. Its process
/// runs confined like every MCP server; what the plugin declares about its tools is not trusted
/// (they keep the fail-closed `execute` risk, and the note says so), and a plugin cannot take its
/// server out of the sandbox (`unconfined` is the user's key, in `clawsmith.toml`).
fn mcp_server(
    source: &SourceFile,
    root: &PluginRoot,
    plugin: &str,
    entry: &Spanned<toml::Value>,
) -> Result<(McpServerConfig, Option<String>), PluginError> {
    let at = |message: String| source.error(Some(entry.span()), message);
    let mut server: McpServerConfig =
        entry
            .get_ref()
            .clone()
            .try_into()
            .map_err(|error: toml::de::Error| {
                at(format!("[[mcp_servers]]: {}", error.message().trim()))
            })?;
    let declared = server.name.clone();
    if server.unconfined {
        return Err(at(format!(
            "MCP server `{declared}`: a plugin cannot run a server unconfined; the user can, \
             with `unconfined = true` in an [[mcp_servers]] entry of clawsmith.toml"
        )));
    }
    server.name = server_name(plugin, &declared).map_err(at)?;
    let mut argv = vec![server.command.clone()];
    argv.extend(server.args.iter().cloned());
    let resolved = root
        .resolve_command(&argv)
        .map_err(|message| at(format!("MCP server `{declared}`: {message}")))?;
    server.command = resolved[0].clone();
    server.args = resolved[1..].to_vec();
    let note = (server.capabilities.is_some() || server.risk.is_some()).then(|| {
        format!(
            "MCP server `{declared}`: its declared capabilities and risk are not used (the \
             sandbox bounds the server, not each of its tools); its tools are `execute`"
        )
    });
    server.capabilities = None;
    server.risk = None;
    Ok((server, note))
}

fn hook(
    source: &SourceFile,
    root: &PluginRoot,
    plugin: &str,
    entry: &HookEntry,
) -> Result<CommandHook, PluginError> {
    entry
        .check_name_and_command()
        .map_err(|error| source.error(Some(error.span), error.message))?;
    let mut argv = vec![entry.command.get_ref().clone()];
    argv.extend(entry.args.iter().cloned());
    let resolved = root.resolve_command(&argv).map_err(|message| {
        source.error(
            Some(entry.command.span()),
            format!("hook `{}`: {message}", entry.name.get_ref()),
        )
    })?;
    let name = format!("{plugin}/{}", entry.name.get_ref().trim());
    entry
        .hook(name, &resolved[0], resolved[1..].to_vec())
        .map_err(|error| source.error(Some(error.span), error.message))
}
