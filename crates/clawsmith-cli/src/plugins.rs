//! `plugins list`, and the plugins of every core this binary builds (clawsmith-plugins):
//! `--plugin DIR` (repeatable) and `plugins = ["DIR", …]` in `clawsmith.toml`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use clawsmith_core::CoreConfig;
use clawsmith_plugins::{Plugin, PluginSet};
use clawsmith_sandbox::SandboxConfig;
use serde_json::json;

use crate::Output;
use crate::output::{Level, Table, notice, paint, style};

/// `clawsmith plugins …`.
#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Each plugin: its tools with their effective risk, skills, MCP servers, hooks, the parts
    /// clawsmith does not run, and load errors. Exits 1 when a plugin could not be loaded.
    List {
        /// A plugin folder (repeatable), besides `plugins = […]` in the configuration.
        #[arg(long = "plugin", value_name = "DIR")]
        plugins: Vec<PathBuf>,
        /// The configuration (`plugins = […]`); default: `clawsmith.toml` in the state directory
        /// when it exists.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// The plugin folders: the configuration's `plugins = […]`, then `--plugin` flags.
fn plugin_dirs(config_file: Option<&Path>, flags: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = match config_file {
        Some(path) => clawsmith_plugins::plugin_dirs_from_config(path)?,
        None => Vec::new(),
    };
    dirs.extend(flags.iter().cloned());
    Ok(dirs)
}

/// The plugins of a core. A plugin that cannot be loaded stops the start: the user asked for
/// it, and running without it (or half of it) would surprise.
pub fn load_for_core(config_file: Option<&Path>, flags: &[PathBuf]) -> Result<PluginSet> {
    let dirs = plugin_dirs(config_file, flags)?;
    let set = PluginSet::load(&dirs);
    if let Some(first) = set.errors.first() {
        let more = match set.errors.len() {
            1 => String::new(),
            n => format!(" (and {} more; `clawsmith plugins list` shows all)", n - 1),
        };
        bail!("loading plugin: {first}{more}");
    }
    Ok(set)
}

/// Adds the plugins' tools, hooks and MCP servers to `config`; plugin tools run under `sandbox`
/// narrowed to what each declared. A plugin MCP server that fails to start is reported on stderr
/// and left out, as a configured one is.
pub fn add_to_core(
    runtime: &tokio::runtime::Runtime,
    plugins: &PluginSet,
    config: &mut CoreConfig,
    sandbox: &SandboxConfig,
) {
    config
        .extension_tools
        .extend(plugins.extension_tools(sandbox));
    config.command_hooks.extend(plugins.hooks());
    let servers = plugins.mcp_config();
    if !servers.mcp_servers.is_empty() {
        let startup = runtime.block_on(clawsmith_mcp::connect_servers(&servers, sandbox));
        for problem in &startup.problems {
            notice(Level::Warning, problem);
        }
        config.extension_tools.extend(startup.tools);
    }
}

/// `clawsmith plugins …`.
pub fn run(state_dir: &Path, command: PluginsCommand, out: &Output) -> Result<i32> {
    let PluginsCommand::List { plugins, config } = command;
    let config_file = crate::run::config_file(state_dir, config.as_deref())?;
    let dirs = plugin_dirs(config_file.as_deref(), &plugins)
        .context("reading `plugins` from the configuration")?;
    let set = PluginSet::load(&dirs);
    let code = if set.errors.is_empty() {
        crate::exit::OK
    } else {
        crate::exit::ERROR
    };
    if out.json {
        out.json_line(&json!({
            "plugins": set.plugins.iter().map(plugin_json).collect::<Vec<_>>(),
            "errors": set.errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }))?;
        return Ok(code);
    }
    if set.plugins.is_empty() && set.errors.is_empty() {
        out.line("no plugins (give --plugin DIR, or plugins = [\"DIR\"] in clawsmith.toml)")?;
    }
    for plugin in &set.plugins {
        print_plugin(plugin, out)?;
    }
    for error in &set.errors {
        out.line(&format!("{}: {error}", paint(style::ERROR, "load error")))?;
    }
    Ok(code)
}

fn plugin_json(plugin: &Plugin) -> serde_json::Value {
    json!({
        "name": plugin.name,
        "version": plugin.version,
        "description": plugin.description,
        "root": plugin.root,
        "format": plugin.format,
        "tools": plugin.tools.iter().map(|tool| {
            let capabilities = tool.normalized_capabilities();
            json!({
                "name": tool.name,
                "risk": tool.effective_risk(),
                "declaredRisk": tool.risk,
                "capabilities": capabilities.to_vec(),
                "capabilitiesFailedClosed": capabilities.failed_closed(),
                "concurrencySafe": tool.concurrency_safe,
                "deferred": tool.deferred,
                "command": tool.argv,
                "description": tool.description,
            })
        }).collect::<Vec<_>>(),
        "skills": plugin.skills,
        "mcpServers": plugin.mcp_servers.iter().map(|server| json!({
            "name": server.name,
            "command": server.command,
            "args": server.args,
            "risk": "execute",
            "deferred": true,
        })).collect::<Vec<_>>(),
        "hooks": plugin.hooks.iter().map(|hook| hook.name().to_owned()).collect::<Vec<_>>(),
        "notRun": plugin.not_run,
    })
}

fn print_plugin(plugin: &Plugin, out: &Output) -> Result<()> {
    let version = plugin.version.as_deref().unwrap_or("?");
    out.line(&format!(
        "{} {version} ({}, {})",
        paint(style::TOOL, &plugin.name),
        plugin.format.manifest(),
        paint(style::PATH, plugin.root.display())
    ))?;
    if let Some(description) = &plugin.description {
        out.line(&format!("  {description}"))?;
    }
    if !plugin.tools.is_empty() {
        let mut table = Table::with_header(&["  tool", "risk", "capabilities"]);
        for tool in &plugin.tools {
            let capabilities = tool.normalized_capabilities();
            let listed = match capabilities.failed_closed() {
                Some(reason) => format!("all ({reason})"),
                None => capabilities
                    .iter()
                    .map(|capability| capability.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            table.row(vec![
                format!("  {}", tool.name),
                tool.effective_risk().to_string(),
                paint(style::DIM, listed),
            ]);
        }
        out.raw(&table.render())?;
    }
    let mut rows: Vec<(&str, String)> = Vec::new();
    for skill in &plugin.skills {
        rows.push(("skill", skill.clone()));
    }
    for server in &plugin.mcp_servers {
        rows.push((
            "MCP server",
            format!(
                "{} (tools deferred, execute: it runs confined, workspace read-only, no network)",
                server.name
            ),
        ));
    }
    for hook in &plugin.hooks {
        rows.push((
            "hook",
            format!(
                "{} (runs confined: workspace read-only, no network)",
                hook.name()
            ),
        ));
    }
    for part in &plugin.not_run {
        rows.push(("not run", part.clone()));
    }
    for (label, text) in rows {
        out.line(&format!("  {}: {text}", paint(style::DIM, label)))?;
    }
    Ok(())
}
