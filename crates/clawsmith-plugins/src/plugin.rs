//! A loaded plugin: what it declares, resolved and checked, before anything runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clawsmith_core::CommandHook;
use clawsmith_mcp::McpServerConfig;
use clawsmith_protocol::{CapabilityDeclaration, Risk, SearchMetadata};
use clawsmith_security::{NormalizedCapabilities, effective_risk, normalize_capabilities};
use serde::Serialize;

use crate::error::PluginError;
use crate::paths::PluginRoot;

/// The manifest a plugin folder was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginFormat {
    /// `clawsmith-plugin.toml`: tools, MCP servers, hooks and skills.
    Clawsmith,
    /// `.claude-plugin/plugin.json` (Claude Code): skills and MCP servers are read.
    ClaudeCode,
    /// `.codex-plugin/plugin.json` (Codex): skills and MCP servers are read.
    Codex,
    /// `gemini-extension.json` (Gemini CLI): skills and MCP servers are read.
    Gemini,
}

impl PluginFormat {
    /// The manifest's path inside the plugin folder.
    pub fn manifest(self) -> &'static str {
        match self {
            PluginFormat::Clawsmith => "clawsmith-plugin.toml",
            PluginFormat::ClaudeCode => ".claude-plugin/plugin.json",
            PluginFormat::Codex => ".codex-plugin/plugin.json",
            PluginFormat::Gemini => "gemini-extension.json",
        }
    }

    /// Every format, in the order a folder is probed (clawsmith's own first).
    pub const ALL: [PluginFormat; 4] = [
        PluginFormat::Clawsmith,
        PluginFormat::ClaudeCode,
        PluginFormat::Codex,
        PluginFormat::Gemini,
    ];
}

/// One plugin, loaded: every path resolved inside its folder, every schema compiled.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// Its name (kebab-case for clawsmith plugins); tools are `<name>__<tool>`, skills
    /// `<name>:<skill>`.
    pub name: String,
    /// Its version, as declared.
    pub version: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// The plugin folder, canonical.
    pub root: PathBuf,
    /// The manifest read.
    pub format: PluginFormat,
    /// Its tools (clawsmith plugins only).
    pub tools: Vec<Arc<PluginToolSpec>>,
    /// Its MCP servers, named `<plugin>-<server>` (their tools are `mcp__<plugin>-<server>__…`).
    pub mcp_servers: Vec<McpServerConfig>,
    /// Its command hooks, named `<plugin>/<hook>`.
    pub hooks: Vec<CommandHook>,
    /// The folder holding its skills, when there is one.
    pub skills_dir: Option<PathBuf>,
    /// The names of the skill folders found there (`<plugin>:<skill>`), for listing.
    pub skills: Vec<String>,
    /// What the plugin holds that clawsmith does not run, each with the reason: listed by
    /// `clawsmith plugins list`, never dropped silently.
    pub not_run: Vec<String>,
}

/// A plugin tool as declared and resolved; [`crate::PluginTool`] runs it.
#[derive(Debug, Clone)]
pub struct PluginToolSpec {
    /// The name in the table: `<plugin>__<tool>`.
    pub name: String,
    /// The plugin's name.
    pub plugin: String,
    /// What the model reads.
    pub description: String,
    /// The program and its arguments, resolved (paths inside the plugin folder are absolute).
    pub argv: Vec<String>,
    /// The input schema (JSON Schema of an object), compiled once at load.
    pub input_schema: serde_json::Value,
    /// The capabilities as declared (a missing or malformed list fails closed).
    pub capabilities: CapabilityDeclaration,
    /// The declared risk (absent: the floor of the capabilities).
    pub risk: Risk,
    /// Whether calls may run beside other concurrency-safe calls.
    pub concurrency_safe: bool,
    /// Whether the tool is hidden until `search_tools` activates it.
    pub deferred: bool,
    /// How `search_tools` finds it.
    pub search_metadata: Option<SearchMetadata>,
    /// Timeout of one call (absent: run_command's default).
    pub timeout: Option<Duration>,
    /// The plugin folder, canonical (`CLAWSMITH_PLUGIN_ROOT`).
    pub root: PathBuf,
}

impl PluginToolSpec {
    /// The capabilities after normalization (fail-closed).
    pub fn normalized_capabilities(&self) -> NormalizedCapabilities {
        normalize_capabilities(&self.capabilities)
    }

    /// max(declared, capability floor): what the permission check sees.
    pub fn effective_risk(&self) -> Risk {
        effective_risk(self.risk, &self.normalized_capabilities())
    }
}

/// Loads the plugin in `dir`: the first manifest found, in [`PluginFormat::ALL`] order.
pub fn load_plugin(dir: &Path) -> Result<Plugin, PluginError> {
    let canonical = dir.canonicalize().map_err(|cause| PluginError::Read {
        path: dir.to_path_buf(),
        cause,
    })?;
    if !canonical.is_dir() {
        return Err(PluginError::NotAPlugin { dir: canonical });
    }
    let root = PluginRoot::new(canonical);
    let Some(format) = PluginFormat::ALL
        .into_iter()
        .find(|format| root.path().join(format.manifest()).is_file())
    else {
        return Err(PluginError::NotAPlugin {
            dir: root.path().to_path_buf(),
        });
    };
    let mut plugin = match format {
        PluginFormat::Clawsmith => crate::manifest::load(&root)?,
        foreign => crate::foreign::load(&root, foreign)?,
    };
    for other in PluginFormat::ALL {
        if other != format && root.path().join(other.manifest()).is_file() {
            plugin.not_run.push(format!(
                "{}: not read (the folder's {} was read instead)",
                other.manifest(),
                format.manifest()
            ));
        }
    }
    Ok(plugin)
}

/// The skill folder names under `skills_dir` (sub-folders holding a `SKILL.md`), sorted.
pub(crate) fn skill_names(plugin: &str, skills_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(skills_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.path().join("SKILL.md").is_file())
        .map(|entry| format!("{plugin}:{}", entry.file_name().to_string_lossy()))
        .collect();
    names.sort();
    names
}

/// Longest MCP server name clawsmith-mcp takes.
const MAX_SERVER_NAME_BYTES: usize = clawsmith_mcp::MAX_SERVER_NAME_BYTES;

/// The name a plugin's MCP server gets: `<plugin>-<server>`, or why it cannot have one.
pub(crate) fn server_name(plugin: &str, server: &str) -> Result<String, String> {
    let name = format!("{plugin}-{server}");
    if crate::manifest::is_name_part(&name, MAX_SERVER_NAME_BYTES) {
        Ok(name)
    } else {
        Err(format!(
            "MCP server `{server}`: its name in clawsmith, `{name}`, must be at most \
             {MAX_SERVER_NAME_BYTES} bytes of letters, digits, `-` and single `_`"
        ))
    }
}
