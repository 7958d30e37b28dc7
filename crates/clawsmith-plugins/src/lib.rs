//! Plugins: tools, MCP servers, hooks and skills that come in a folder, and enter the core
//! through the same pipeline as every other tool (A10).
//!
//! A plugin is a directory holding `clawsmith-plugin.toml`:
//!
//! ```toml
//! name = "lint-kit"            # kebab-case; tools are `lint-kit__<tool>`
//! version = "1.0.0"
//! description = "Linters as tools"
//!
//! [[tools]]
//! name = "check"
//! description = "Lint the workspace and report problems"
//! command = ["./bin/check", "--json"]      # argv; ./ and ${PLUGIN_ROOT} are the plugin folder
//! input_schema = "schemas/check.json"      # or an inline table
//! capabilities = ["filesystem.read"]       # missing or unknown ⇒ every capability (execute)
//! risk = "read"                            # floored by the capabilities
//! concurrency_safe = true
//! timeout_ms = 30000
//!
//! [[mcp_servers]]                          # as in clawsmith.toml; named `lint-kit-<name>`
//! [[hooks]]                                # command hooks as in clawsmith.toml
//! ```
//!
//! and optionally a `skills/` folder. Folders made for other agents
//! (`.claude-plugin/plugin.json`, `.codex-plugin/plugin.json`, `gemini-extension.json`) are read
//! for their skills and stdio MCP servers; what they hold that clawsmith does not run (slash
//! commands, sub-agents, their hooks, remote servers, servers that need environment values) is
//! listed in [`Plugin::not_run`], which `clawsmith plugins list` shows.
//!
//! Main types: [`load_plugin`] → [`Plugin`] (with [`PluginToolSpec`]s), [`PluginSet`] (every
//! `--plugin` folder and `plugins = […]` entry, with the load errors), [`PluginTool`] (the
//! [`clawsmith_protocol::Tool`] that runs one), [`plugin_dirs_from_config`].
//!
//! Decisions, and why:
//! - **The kernel enforces the declaration.** A plugin tool is a process run by
//!   clawsmith-sandbox's `run_command` runner (disaster check, minimal environment plus
//!   `CLAWSMITH_PLUGIN_ROOT`, rlimits, process group, timeout, output cap, namespaces, Landlock,
//!   seccomp) with the call's arguments as JSON on stdin and the workspace as working directory.
//!   Without `filesystem.write` the workspace is bound read-only and Landlock grants it no writes;
//!   without `network` it has no network. So the risk the permission check sees (declared, floored
//!   by capabilities) is a bound the process cannot exceed, whatever its code does.
//! - **Paths stay in the plugin.** A command's program written as a path, arguments starting with
//!   `./`, `../` or `${PLUGIN_ROOT}`, a schema file: each is resolved with symlinks followed and
//!   refused at load when it leaves the plugin folder. A bare program name (`python3`) is looked
//!   up on the sandbox's `PATH`; an absolute one is the system's.
//! - **Output.** A JSON object on stdout with `content` (string) and optional `status`
//!   (`success`/`error`) and `display` is the structured result; any other stdout is the text of
//!   a success; a non-zero exit is `tool_failed` with the tail of stderr and what the kernel held
//!   the tool to. Large output becomes an artifact in the core, as for every tool.
//! - **Names.** Tools are `<plugin>__<tool>`; a name taken twice fails the table's construction
//!   naming both origins (`extension:plugin:<name>`). Skills are `<plugin>:<skill>`
//!   (clawsmith-skills' plugin roots), MCP servers `<plugin>-<server>`.
//! - **Load errors are precise and fatal to the plugin.** Every error names the file and, where
//!   it sits in the manifest, the line and column; a plugin with an error loads nothing (half a
//!   plugin would be a surprise), and the front end refuses to start rather than run without it.
//!
//! A plugin's MCP servers and hooks are confined as clawsmith-mcp and clawsmith-core confine
//! every MCP server and command hook (profiles of the host's one sandbox configuration); a
//! plugin's declared capabilities or risk for its MCP servers are not used (their tools stay
//! `execute`). What it does not do: it does not install, update or fetch plugins, read
//! marketplaces, or run other agents' slash commands, sub-agents or hooks. Undo: the core
//! captures the workspace around extension tools that declare `process.execute` or
//! `filesystem.write` (and around those whose declaration failed closed), so what a plugin tool
//! changes is in the turn's checkpoint like a command's changes. Plugin skills are
//! offered to clawsmith-skills as roots ([`PluginSet::skill_roots`]); reading them is that crate's.

mod error;
mod foreign;
mod manifest;
mod paths;
mod plugin;
mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawsmith_core::{CommandHook, ExtensionTool};
use clawsmith_mcp::McpConfig;
use clawsmith_sandbox::SandboxConfig;
use clawsmith_skills::SkillRoot;
use serde::Deserialize;
use toml::Spanned;

pub use crate::error::PluginError;
pub use crate::manifest::MAX_NAME_BYTES;
pub use crate::paths::ROOT_VARIABLES;
pub use crate::plugin::{Plugin, PluginFormat, PluginToolSpec, load_plugin};
pub use crate::tool::{PLUGIN_ROOT_VARIABLE, PluginTool, STDERR_TAIL_BYTES};

use crate::error::SourceFile;

/// The source of a plugin's tools in the table (the core prefixes `extension:`).
pub fn plugin_source(plugin: &str) -> String {
    format!("plugin:{plugin}")
}

/// Every plugin asked for, loaded, and the errors of those that could not be.
#[derive(Debug, Default)]
pub struct PluginSet {
    /// The loaded plugins, in the order asked for.
    pub plugins: Vec<Plugin>,
    /// One per plugin that could not be loaded.
    pub errors: Vec<PluginError>,
}

impl PluginSet {
    /// Loads every folder of `dirs`, in order. A folder asked for twice (the same canonical
    /// folder) is loaded once; two folders with one plugin name are an error for the second.
    pub fn load(dirs: &[PathBuf]) -> PluginSet {
        let mut set = PluginSet::default();
        for dir in dirs {
            match load_plugin(dir) {
                Ok(plugin) => {
                    if let Some(first) = set.plugins.iter().find(|p| p.name == plugin.name) {
                        if first.root != plugin.root {
                            set.errors.push(PluginError::Duplicate {
                                name: plugin.name.clone(),
                                first: first.root.clone(),
                                second: plugin.root,
                            });
                        }
                        continue;
                    }
                    set.plugins.push(plugin);
                }
                Err(error) => set.errors.push(error),
            }
        }
        set
    }

    /// Every plugin tool, ready for [`clawsmith_core::CoreConfig::extension_tools`], running
    /// under `sandbox` (run_command's configuration) narrowed to each tool's declaration.
    pub fn extension_tools(&self, sandbox: &SandboxConfig) -> Vec<ExtensionTool> {
        self.plugins
            .iter()
            .flat_map(|plugin| {
                plugin.tools.iter().map(|spec| ExtensionTool {
                    source: plugin_source(&plugin.name),
                    tool: Arc::new(PluginTool::new(Arc::clone(spec), sandbox)),
                    deferred: spec.deferred,
                })
            })
            .collect()
    }

    /// The plugins' MCP servers, for `clawsmith_mcp::connect_servers` (their tools are deferred
    /// and `execute`).
    pub fn mcp_config(&self) -> McpConfig {
        McpConfig {
            mcp_servers: self
                .plugins
                .iter()
                .flat_map(|plugin| plugin.mcp_servers.iter().cloned())
                .collect(),
        }
    }

    /// Each plugin's `skills/` folder as a clawsmith-skills root: its skills are named
    /// `<plugin>:<skill>`, after the workspace's and the user's in discovery order.
    pub fn skill_roots(&self) -> Vec<SkillRoot> {
        self.plugins
            .iter()
            .filter_map(|plugin| {
                plugin.skills_dir.as_ref().map(|dir| SkillRoot {
                    dir: dir.clone(),
                    source: plugin_source(&plugin.name),
                    prefix: Some(plugin.name.clone()),
                })
            })
            .collect()
    }

    /// The plugins' command hooks, for [`clawsmith_core::CoreConfig::command_hooks`] (the core
    /// runs them confined).
    pub fn hooks(&self) -> Vec<CommandHook> {
        self.plugins
            .iter()
            .flat_map(|plugin| plugin.hooks.iter())
            .cloned()
            .collect()
    }
}

#[derive(Debug, Deserialize)]
struct PluginsKey {
    #[serde(default)]
    plugins: Option<Spanned<Vec<Spanned<String>>>>,
}

/// The `plugins = ["DIR", …]` key of `clawsmith.toml` (other keys belong to other readers).
/// Relative folders are relative to the configuration file's folder; `~/` is the home folder.
pub fn plugin_dirs_from_config(path: &Path) -> Result<Vec<PathBuf>, PluginError> {
    let source = SourceFile::read(path)?;
    let key: PluginsKey = toml::from_str(&source.text).map_err(|error| {
        source.error(error.span(), format!("plugins: {}", error.message().trim()))
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut dirs = Vec::new();
    for entry in key.plugins.map(Spanned::into_inner).unwrap_or_default() {
        let text = entry.get_ref();
        if text.trim().is_empty() {
            return Err(source.error(Some(entry.span()), "plugins: an empty folder name"));
        }
        let dir = match text.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME") {
                Some(home) => PathBuf::from(home).join(rest),
                None => {
                    return Err(
                        source.error(Some(entry.span()), "plugins: `~/` needs HOME to be set")
                    );
                }
            },
            None => base.join(text),
        };
        dirs.push(dir);
    }
    Ok(dirs)
}
