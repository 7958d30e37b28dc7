//! Plugins made for other agents — `.claude-plugin/plugin.json`, `.codex-plugin/plugin.json`,
//! `gemini-extension.json` — read for their skills and stdio MCP servers. Everything else they
//! hold is listed in [`Plugin::not_run`] with the reason, never dropped silently.

use clawsmith_mcp::McpServerConfig;
use serde_json::{Map, Value};

use crate::error::{PluginError, SourceFile};
use crate::manifest::{MAX_NAME_BYTES, is_kebab_case};
use crate::paths::PluginRoot;
use crate::plugin::{Plugin, PluginFormat, server_name, skill_names};

/// Keys that only describe the plugin (nothing to run).
const METADATA_KEYS: &[&str] = &[
    "$schema",
    "name",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "interface",
];

/// Folders other agents give a meaning clawsmith does not run, with that meaning.
const FOREIGN_FOLDERS: &[(&str, &str)] = &[
    ("commands", "slash commands"),
    ("agents", "sub-agent definitions"),
    (
        "hooks",
        "the other agent's hooks (their events and answers are not clawsmith's)",
    ),
];

/// Variables passed to every stdio server of another agent's plugin: those agents start servers
/// with their whole environment, and a bare `npx` or `uvx` needs `PATH` to be found.
const FOREIGN_SERVER_ENV: &[&str] = &["PATH", "HOME"];

pub(crate) fn load(root: &PluginRoot, format: PluginFormat) -> Result<Plugin, PluginError> {
    let source = SourceFile::read(&root.path().join(format.manifest()))?;
    let manifest = parse_object(&source)?;
    let name = match manifest.get("name") {
        Some(Value::String(name)) if is_kebab_case(name) => name.clone(),
        Some(Value::String(name)) => {
            return Err(source.error(
                None,
                format!(
                    "plugin name {name:?} must be kebab-case (words of a-z and 0-9 joined by \
                     single `-`, at most {MAX_NAME_BYTES} bytes): clawsmith names its skills \
                     `<plugin>:<skill>` and its servers `<plugin>-<server>`"
                ),
            ));
        }
        _ => return Err(source.error(None, "the manifest needs a `name` string")),
    };
    let text = |key: &str| manifest.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut plugin = Plugin {
        name: name.clone(),
        version: text("version"),
        description: text("description"),
        root: root.path().to_path_buf(),
        format,
        tools: Vec::new(),
        mcp_servers: Vec::new(),
        hooks: Vec::new(),
        skills_dir: None,
        skills: Vec::new(),
        not_run: Vec::new(),
    };
    skills(root, &manifest, &mut plugin);
    let servers = match manifest.get("mcpServers") {
        Some(Value::String(path)) => Some(servers_file(root, path, &mut plugin.not_run)?),
        Some(Value::Object(servers)) => Some(servers.clone()),
        Some(_) => {
            return Err(source.error(
                None,
                "`mcpServers` must be an object of servers or the path of a JSON file",
            ));
        }
        // Claude Code and Codex read `.mcp.json` beside the manifest's folder by default.
        None if format != PluginFormat::Gemini && root.path().join(".mcp.json").is_file() => {
            Some(servers_file(root, ".mcp.json", &mut plugin.not_run)?)
        }
        None => None,
    };
    for (server, definition) in servers.into_iter().flatten() {
        match stdio_server(root, &name, &server, &definition) {
            Ok(config) => plugin.mcp_servers.push(config),
            Err(reason) => plugin
                .not_run
                .push(format!("MCP server `{server}`: {reason}")),
        }
    }
    for key in manifest.keys() {
        if !METADATA_KEYS.contains(&key.as_str())
            && !["skills", "mcpServers"].contains(&key.as_str())
        {
            plugin.not_run.push(format!(
                "`{key}` in {}: not read by clawsmith",
                format.manifest()
            ));
        }
    }
    for (folder, meaning) in FOREIGN_FOLDERS {
        if root.path().join(folder).is_dir() {
            plugin
                .not_run
                .push(format!("{folder}/: {meaning}, not run by clawsmith"));
        }
    }
    Ok(plugin)
}

fn parse_object(source: &SourceFile) -> Result<Map<String, Value>, PluginError> {
    match serde_json::from_str::<Value>(&source.text) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(source.error(None, "the manifest must be a JSON object")),
        Err(error) => Err(PluginError::Invalid {
            path: source.path.clone(),
            line_column: Some((error.line(), error.column())),
            message: format!("not valid JSON: {error}"),
        }),
    }
}

/// `skills` (a folder, or a list whose first entry is used) or the default `skills/`.
fn skills(root: &PluginRoot, manifest: &Map<String, Value>, plugin: &mut Plugin) {
    let declared: Vec<String> = match manifest.get("skills") {
        Some(Value::String(path)) => vec![path.clone()],
        Some(Value::Array(paths)) => paths
            .iter()
            .filter_map(|path| path.as_str().map(str::to_owned))
            .collect(),
        Some(_) => {
            plugin
                .not_run
                .push("`skills`: neither a folder nor a list of folders".to_owned());
            Vec::new()
        }
        None => vec!["skills".to_owned()],
    };
    for (index, path) in declared.iter().enumerate() {
        let (expanded, _) = root.expand(path);
        let dir = match root.resolve_inside(&expanded) {
            Ok(dir) if dir.is_dir() => dir,
            Ok(_) => continue,
            // The default folder is simply absent.
            Err(_) if manifest.get("skills").is_none() => continue,
            Err(reason) => {
                plugin.not_run.push(format!("skills `{path}`: {reason}"));
                continue;
            }
        };
        if index > 0 {
            plugin.not_run.push(format!(
                "skills `{path}`: only the first skills folder of a plugin is read"
            ));
            continue;
        }
        plugin.skills = skill_names(&plugin.name, &dir);
        plugin.skills_dir = Some(dir);
    }
}

/// A JSON file of servers inside the plugin: `{"mcpServers": {…}}` or the map itself.
fn servers_file(
    root: &PluginRoot,
    path: &str,
    not_run: &mut Vec<String>,
) -> Result<Map<String, Value>, PluginError> {
    let (expanded, _) = root.expand(path);
    let real = match root.resolve_inside(&expanded) {
        Ok(real) => real,
        Err(reason) => {
            not_run.push(format!("mcpServers `{path}`: {reason}"));
            return Ok(Map::new());
        }
    };
    let file = SourceFile::read(&real)?;
    let object = parse_object(&file)?;
    match object.get("mcpServers") {
        Some(Value::Object(servers)) => Ok(servers.clone()),
        Some(_) => Err(file.error(None, "`mcpServers` must be an object of servers")),
        None => Ok(object),
    }
}

/// One server of another agent's plugin as clawsmith-mcp's configuration, or why it cannot run.
fn stdio_server(
    root: &PluginRoot,
    plugin: &str,
    server: &str,
    definition: &Value,
) -> Result<McpServerConfig, String> {
    let Some(definition) = definition.as_object() else {
        return Err("not an object".to_owned());
    };
    if ["url", "httpUrl"]
        .iter()
        .any(|key| definition.contains_key(*key))
        || definition
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "stdio")
    {
        return Err(
            "a remote (HTTP or SSE) server; clawsmith starts MCP servers over stdio only"
                .to_owned(),
        );
    }
    let Some(command) = definition.get("command").and_then(Value::as_str) else {
        return Err("no `command`".to_owned());
    };
    let args: Vec<String> = match definition.get("args") {
        None => Vec::new(),
        Some(Value::Array(args)) => args
            .iter()
            .map(|arg| {
                arg.as_str()
                    .map(str::to_owned)
                    .ok_or("`args` must be strings")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`args` must be a list of strings".to_owned()),
    };
    let mut env: Vec<String> = FOREIGN_SERVER_ENV
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    if let Some(variables) = definition.get("env").and_then(Value::as_object) {
        let mut set = Vec::new();
        for (name, value) in variables {
            let passed_through = value.as_str().is_some_and(|value| {
                value == format!("${{{name}}}") || value == format!("${name}")
            });
            if passed_through {
                env.push(name.clone());
            } else {
                set.push(name.as_str());
            }
        }
        if !set.is_empty() {
            return Err(format!(
                "it sets environment values ({}); clawsmith passes a server only variables of \
                 its own environment, by name — add the server to clawsmith.toml's \
                 [[mcp_servers]] with `env` naming them",
                set.join(", ")
            ));
        }
    }
    if definition.contains_key("cwd") {
        return Err(
            "it needs its own working directory (`cwd`), which clawsmith's MCP client does not set"
                .to_owned(),
        );
    }
    let mut argv = vec![command.to_owned()];
    argv.extend(args);
    let resolved = root.resolve_command(&argv)?;
    let name = server_name(plugin, server)?;
    let call_timeout_ms = definition
        .get("timeout")
        .and_then(Value::as_u64)
        .filter(|ms| *ms > 0);
    Ok(McpServerConfig {
        name,
        command: resolved[0].clone(),
        args: resolved[1..].to_vec(),
        env,
        capabilities: None,
        risk: None,
        startup_timeout_ms: None,
        call_timeout_ms,
        call_max_ms: None,
        network: false,
        workspace: clawsmith_mcp::WorkspaceAccess::Read,
        writable: Vec::new(),
        unconfined: false,
        url: None,
        bearer_token_env: None,
        oauth: None,
    })
}
