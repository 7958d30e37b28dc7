//! The policy part of `clawsmith.toml`: mode, rules, hooks, sandbox limits, writable roots,
//! protected and hidden paths; and `clawsmith policy check`, which explains a decision without
//! running anything.
//!
//! The file is the one `--config` names, else `clawsmith.toml` in the state directory. Its
//! `[[mcp_servers]]` belong to clawsmith-mcp's parser ([`clawsmith_mcp::McpConfig`]), and the
//! extension sections (`[skills]`, `[memory]`, `plugins`, `[[lsp_servers]]`, `[provider]`,
//! `[agent]`, `[telemetry]`) to the crates that own them; every other top-level key is read here, and an unknown one is an error (a misspelled `[[rule]]` must not
//! silently leave a command allowed). Every error names the file, the line and column (from
//! toml's spans) and what is wrong, and the binary refuses to start.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use clawsmith_core::fs::HiddenPaths;
use clawsmith_core::{CommandHook, HiddenGlobMatches, HookEntry};
use clawsmith_protocol::text::line_column;
use clawsmith_protocol::{Capability, Verdict};
use clawsmith_sandbox::SandboxConfig;
use clawsmith_security::{
    DecidedBy, PathSet, PermissionMode, PermissionPolicy, ProtectedPaths, Rule, RuleEffect, RuleSet,
};
use serde::Deserialize;
use serde_json::json;
use toml::Spanned;

use crate::Output;
use crate::run::{self, CoreOptions, Lifetime};

/// `clawsmith policy …`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Explain which rule or mode decides a call, without running it (hooks are listed, not run).
    Check {
        #[command(flatten)]
        core: CoreOptions,
        /// The tool's name.
        tool: String,
        /// The arguments as a JSON string.
        arguments: String,
    },
}

/// The policy of `clawsmith.toml`, validated. The default (no file) is the built-in policy.
#[derive(Debug, Default)]
pub struct PolicyConfig {
    /// Where it was read from.
    pub path: Option<PathBuf>,
    /// `mode`; `--mode` overrides it.
    pub mode: Option<PermissionMode>,
    /// `[[rules]]`.
    pub rules: RuleSet,
    /// `[[hooks]]`, in file order.
    pub hooks: Vec<CommandHook>,
    sandbox: SandboxSection,
    writable_roots: Vec<PathBuf>,
    protected_paths: Vec<String>,
    /// `hidden_paths`: every tool call naming one is refused (the permission policy); every
    /// reader refuses or leaves out a file that is one by any name (`hidden_set`: resolved path
    /// and identity); the literal ones (relative to the workspace, or absolute) and the files
    /// the globs match when a command starts are covered in its view; shown by `policy check`.
    pub hidden_paths: Vec<String>,
    /// `[network] mode`, when written.
    network_mode: Option<NetworkMode>,
    /// `[network]`'s rules; `None` when it allows no host.
    egress: Option<clawsmith_egress::EgressPolicy>,
}

/// How commands reach the network: `off` (loopback only), `allowlist` (the hosts `[network]`
/// allows, through clawsmith's gateway) or `full`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Off,
    Allowlist,
    Full,
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Off => "off",
            NetworkMode::Allowlist => "allowlist",
            NetworkMode::Full => "full",
        }
    }
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    mode: Option<PermissionMode>,
    #[serde(default)]
    rules: Vec<RuleEntry>,
    #[serde(default)]
    hooks: Vec<HookEntry>,
    #[serde(default)]
    sandbox: SandboxSection,
    #[serde(default)]
    writable_roots: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    protected_paths: Vec<Spanned<String>>,
    #[serde(default)]
    hidden_paths: Vec<Spanned<String>>,
    #[serde(default)]
    network: NetworkSection,
    /// Read by clawsmith-mcp's parser; named here so any *other* unknown key is an error.
    #[serde(default, rename = "mcp_servers")]
    _mcp_servers: serde::de::IgnoredAny,
    /// Read by clawsmith-skills (`[skills]`, `[memory]`).
    #[serde(default, rename = "skills")]
    _skills: serde::de::IgnoredAny,
    #[serde(default, rename = "memory")]
    _memory: serde::de::IgnoredAny,
    /// Read by clawsmith-plugins.
    #[serde(default, rename = "plugins")]
    _plugins: serde::de::IgnoredAny,
    /// Read by clawsmith-lsp.
    #[serde(default, rename = "lsp_servers")]
    _lsp_servers: serde::de::IgnoredAny,
    /// Read by clawsmith-agent (`[provider]`, `[agent]`).
    #[serde(default, rename = "provider")]
    _provider: serde::de::IgnoredAny,
    #[serde(default, rename = "agent")]
    _agent: serde::de::IgnoredAny,
    /// Read by clawsmith-trace.
    #[serde(default, rename = "telemetry")]
    _telemetry: serde::de::IgnoredAny,
    /// Read by `store.rs` (`[store]`).
    #[serde(default, rename = "store")]
    _store: serde::de::IgnoredAny,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    decision: RuleEffect,
    rule: Spanned<String>,
}

/// `[sandbox]`: limits of `run_command` (absent keys keep the defaults).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxSection {
    timeout_seconds: Option<Spanned<u64>>,
    max_timeout_seconds: Option<Spanned<u64>>,
    output_cap_bytes: Option<Spanned<usize>>,
    file_size_bytes: Option<u64>,
    open_files: Option<u64>,
    cpu_seconds: Option<u64>,
    address_space_bytes: Option<u64>,
    processes: Option<u64>,
    /// Home entries commands see (replaces the default list).
    home_allow: Option<Vec<Spanned<String>>>,
}

/// `[network]`: how commands reach the network (`mode`; `--network` on the command line wins)
/// and, for `allowlist`, the hosts they may reach. Rules are `HOST[:PORT]`, with a leading `*.`
/// for every name under a domain; deny rules are checked first. Without `mode`, allow rules
/// mean `allowlist` and no rules mean `off`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    #[serde(default)]
    mode: Option<Spanned<NetworkMode>>,
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    /// Whether allowed names may resolve to private addresses (the user's own network).
    #[serde(default)]
    allow_private: bool,
}

/// Reads and validates the policy of the configuration file (the built-in policy when there is
/// none).
pub fn load(state_dir: &Path, options: &CoreOptions) -> Result<PolicyConfig> {
    load_file(run::config_path(state_dir, options)?.as_deref())
}

/// [`load`] of a configuration already found and checked ([`run::config_path`]); `None`: the
/// built-in policy.
pub fn load_file(path: Option<&Path>) -> Result<PolicyConfig> {
    let Some(path) = path else {
        return Ok(PolicyConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the configuration {}", path.display()))?;
    parse(&text, path)
}

/// Parses `text` (read from `path`, which errors name).
pub fn parse(text: &str, path: &Path) -> Result<PolicyConfig> {
    let at = |span: Option<Range<usize>>, message: &str| -> anyhow::Error {
        let place = match span {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                format!("{}:{line}:{column}", path.display())
            }
            None => path.display().to_string(),
        };
        anyhow::anyhow!("{place}: {message}")
    };
    let file: PolicyFile =
        toml::from_str(text).map_err(|error| at(error.span(), error.message().trim()))?;
    let mut rules = RuleSet::new();
    for entry in &file.rules {
        let rule = Rule::parse(entry.decision, entry.rule.get_ref())
            .map_err(|error| at(Some(entry.rule.span()), &error.to_string()))?;
        rules.push(rule);
    }
    let mut hooks = Vec::new();
    for entry in &file.hooks {
        entry
            .check_name_and_command()
            .map_err(|error| at(Some(error.span), &error.message))?;
        // `./check.sh` means beside this file, wherever clawsmith runs from; a bare name is
        // looked up on `PATH`.
        let command = Path::new(entry.command.get_ref());
        let program = match path.parent() {
            Some(directory) if command.is_relative() && command.components().count() > 1 => {
                directory.join(command)
            }
            _ => command.to_path_buf(),
        };
        let hook = entry
            .hook(entry.name.get_ref().trim(), program, entry.args.clone())
            .map_err(|error| at(Some(error.span), &error.message))?;
        hooks.push(hook);
    }
    check_sandbox(&file.sandbox).map_err(|(span, message)| at(Some(span), &message))?;
    let mut writable_roots = Vec::new();
    for root in &file.writable_roots {
        let path = root.get_ref();
        if !path.is_absolute() || path.parent().is_none() {
            return Err(at(
                Some(root.span()),
                "writable_roots entries must be absolute paths other than /",
            ));
        }
        writable_roots.push(path.clone());
    }
    let mut globs = Vec::new();
    for (key, entries) in [
        ("protected_paths", &file.protected_paths),
        ("hidden_paths", &file.hidden_paths),
    ] {
        let mut checked = Vec::new();
        for entry in entries {
            PathSet::new()
                .with(entry.get_ref())
                .map_err(|error| at(Some(entry.span()), &format!("{key}: {error}")))?;
            checked.push(entry.get_ref().clone());
        }
        globs.push(checked);
    }
    let hidden_paths = globs.pop().unwrap_or_default();
    let protected_paths = globs.pop().unwrap_or_default();
    let egress =
        network_policy(&file.network).map_err(|(span, message)| at(Some(span), &message))?;
    Ok(PolicyConfig {
        path: Some(path.to_path_buf()),
        mode: file.mode,
        rules,
        hooks,
        sandbox: file.sandbox,
        writable_roots,
        protected_paths,
        hidden_paths,
        network_mode: file.network.mode.map(Spanned::into_inner),
        egress,
    })
}

/// The allowlist of `[network]`, each rule checked where it is written; `None` when it allows
/// nothing. Rules that the mode would ignore are an error, not a silent no-op.
fn network_policy(
    network: &NetworkSection,
) -> Result<Option<clawsmith_egress::EgressPolicy>, (Range<usize>, String)> {
    let rules = |entries: &[Spanned<String>]| {
        entries
            .iter()
            .map(|entry| {
                entry
                    .get_ref()
                    .parse::<clawsmith_egress::Rule>()
                    .map_err(|error| (entry.span(), error.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let policy = clawsmith_egress::EgressPolicy {
        allow: rules(&network.allow)?,
        deny: rules(&network.deny)?,
        allow_private: network.allow_private,
    };
    let has_rules = !policy.allow.is_empty() || !policy.deny.is_empty();
    match &network.mode {
        Some(mode) if *mode.get_ref() == NetworkMode::Allowlist && policy.allow.is_empty() => {
            Err((
                mode.span(),
                "mode = \"allowlist\" names no host: add `allow = [\"HOST[:PORT]\", …]` to \
                 [network]"
                    .to_owned(),
            ))
        }
        Some(mode) if *mode.get_ref() != NetworkMode::Allowlist && has_rules => Err((
            mode.span(),
            format!(
                "mode = \"{}\" does not use allow or deny rules: set mode = \"allowlist\" or \
                 remove them",
                mode.get_ref().as_str()
            ),
        )),
        None if policy.allow.is_empty() && !policy.deny.is_empty() => Err((
            network.deny[0].span(),
            "deny rules need allow rules: the network is off without any (add `allow = […]`)"
                .to_owned(),
        )),
        _ => Ok((!policy.allow.is_empty()).then_some(policy)),
    }
}

fn check_sandbox(sandbox: &SandboxSection) -> Result<(), (Range<usize>, String)> {
    let positive = [
        ("timeout_seconds", sandbox.timeout_seconds.as_ref()),
        ("max_timeout_seconds", sandbox.max_timeout_seconds.as_ref()),
    ];
    for (key, value) in positive {
        if let Some(value) = value
            && *value.get_ref() == 0
        {
            return Err((value.span(), format!("{key} must be at least 1")));
        }
    }
    if let Some(cap) = &sandbox.output_cap_bytes
        && *cap.get_ref() == 0
    {
        return Err((cap.span(), "output_cap_bytes must be at least 1".to_owned()));
    }
    for entry in sandbox.home_allow.iter().flatten() {
        let relative = Path::new(entry.get_ref());
        let plain = !entry.get_ref().is_empty()
            && relative
                .components()
                .all(|part| matches!(part, std::path::Component::Normal(_)));
        if !plain {
            return Err((
                entry.span(),
                format!(
                    "home_allow entry {:?} must be a path inside the home directory, without `..` \
                     (e.g. \".cargo\" or \".cache/pip\")",
                    entry.get_ref()
                ),
            ));
        }
    }
    if let (Some(timeout), Some(max)) = (&sandbox.timeout_seconds, &sandbox.max_timeout_seconds)
        && timeout.get_ref() > max.get_ref()
    {
        return Err((
            timeout.span(),
            "timeout_seconds must not exceed max_timeout_seconds".to_owned(),
        ));
    }
    Ok(())
}

impl PolicyConfig {
    /// The permission policy: `mode` (from `--mode`, else the file, else `default_mode`), the
    /// rules and the protected paths (made workspace-relative when absolute inside it).
    pub fn permission_policy(
        &self,
        flag: Option<PermissionMode>,
        default_mode: PermissionMode,
        workspace: &Path,
    ) -> Result<PermissionPolicy> {
        // Patterns are workspace-relative; an absolute one inside the workspace is made so.
        let path_set = |patterns: &[String], key: &str| -> Result<PathSet> {
            let mut set = PathSet::new();
            for pattern in patterns {
                let relative = Path::new(pattern)
                    .strip_prefix(workspace)
                    .map(|relative| relative.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| pattern.clone());
                set = set
                    .with(&relative)
                    .with_context(|| format!("{key} {pattern}"))?;
            }
            Ok(set)
        };
        let mut protected = ProtectedPaths::new();
        for pattern in path_set(&self.protected_paths, "protected path")?.patterns() {
            protected = protected.with(pattern)?;
        }
        let mut policy = PermissionPolicy::new(self.mode_for(flag, default_mode));
        policy.rules = self.rules.clone();
        policy.workspace_root = Some(workspace.to_path_buf());
        policy.protected_paths = protected;
        policy.hidden_paths = path_set(&self.hidden_paths, "hidden path")?;
        Ok(policy)
    }

    /// The mode: `--mode`, else the file's, else the front end's default.
    pub fn mode_for(
        &self,
        flag: Option<PermissionMode>,
        default_mode: PermissionMode,
    ) -> PermissionMode {
        flag.or(self.mode).unwrap_or(default_mode)
    }

    /// The hooks, for [`clawsmith_core::CoreConfig::hooks`].
    pub fn core_hooks(&self) -> Vec<CommandHook> {
        self.hooks.clone()
    }

    /// The hidden set every reader enforces by resolved path and identity (the file tools,
    /// skills, memory, documents), and whose glob matches commands do not see.
    pub fn hidden_set(&self, workspace: &Path) -> Result<Arc<HiddenPaths>> {
        HiddenPaths::new(workspace, &self.hidden_paths)
            .map(Arc::new)
            .context("preparing hidden_paths")
    }

    /// Applies `[sandbox]`, `writable_roots`, the literal `protected_paths` and the
    /// `hidden_paths` to `sandbox`: through `hidden`, which lists the literal ones and the files
    /// the glob ones match again for each command's view.
    pub fn apply_to_sandbox(
        &self,
        sandbox: &mut SandboxConfig,
        workspace: &Path,
        hidden: &Arc<HiddenPaths>,
        network: Option<NetworkMode>,
    ) -> Result<()> {
        let limits = &self.sandbox;
        if let Some(seconds) = &limits.timeout_seconds {
            sandbox.default_timeout = Duration::from_secs(*seconds.get_ref());
        }
        if let Some(seconds) = &limits.max_timeout_seconds {
            sandbox.max_timeout = Duration::from_secs(*seconds.get_ref());
        }
        if let Some(bytes) = &limits.output_cap_bytes {
            sandbox.output_cap_bytes = *bytes.get_ref();
        }
        for (slot, value) in [
            (&mut sandbox.limits.file_size_bytes, limits.file_size_bytes),
            (&mut sandbox.limits.open_files, limits.open_files),
            (&mut sandbox.limits.cpu_seconds, limits.cpu_seconds),
            (
                &mut sandbox.limits.address_space_bytes,
                limits.address_space_bytes,
            ),
            (&mut sandbox.limits.processes, limits.processes),
        ] {
            if value.is_some() {
                *slot = value;
            }
        }
        if let Some(home_allow) = &limits.home_allow {
            sandbox.home_allow = home_allow
                .iter()
                .map(|entry| entry.get_ref().clone())
                .collect();
        }
        sandbox
            .extra_writable_roots
            .extend(self.writable_roots.iter().cloned());
        for pattern in &self.protected_paths {
            if pattern.contains(['*', '?', '[', '{']) {
                continue;
            }
            sandbox.protected_paths.push(workspace.join(pattern));
        }
        sandbox.hidden_path_source = Some(Arc::new(HiddenGlobMatches(hidden.clone())));
        let (allowed, egress) = self.network(network)?;
        sandbox.network_allowed = allowed;
        sandbox.egress = egress.map(clawsmith_sandbox::Egress::new);
        Ok(())
    }

    /// The network mode in force: `chosen` on the command line, else `[network] mode`, else
    /// `allowlist` when `[network]` allows a host and `off` when it does not.
    pub fn network_mode(&self, chosen: Option<NetworkMode>) -> NetworkMode {
        chosen.or(self.network_mode).unwrap_or(match self.egress {
            Some(_) => NetworkMode::Allowlist,
            None => NetworkMode::Off,
        })
    }

    /// Whether commands have the whole network, and the allowlist they have otherwise.
    fn network(
        &self,
        chosen: Option<NetworkMode>,
    ) -> Result<(bool, Option<clawsmith_egress::EgressPolicy>)> {
        Ok(match self.network_mode(chosen) {
            NetworkMode::Off => (false, None),
            NetworkMode::Full => (true, None),
            NetworkMode::Allowlist => match &self.egress {
                Some(policy) => (false, Some(policy.clone())),
                None => bail!(
                    "--network allowlist: the configuration allows no host (add `allow = \
                     [\"HOST[:PORT]\", …]` under [network] in {})",
                    self.path.as_ref().map_or_else(
                        || "clawsmith.toml".to_owned(),
                        |path| path.display().to_string()
                    )
                ),
            },
        })
    }

    /// One line for `policy check`: the mode and its rules.
    fn network_summary(&self, chosen: Option<NetworkMode>) -> String {
        match (self.network_mode(chosen), &self.egress) {
            (NetworkMode::Allowlist, Some(policy)) => format!(
                "allowlist: allow {}{}{}",
                policy
                    .allow
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if policy.deny.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; deny first: {}",
                        policy
                            .deny
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                if policy.allow_private {
                    "; private addresses allowed"
                } else {
                    ""
                }
            ),
            (NetworkMode::Allowlist, None) => {
                "allowlist naming no host (refused at start)".to_owned()
            }
            (mode, _) => mode.as_str().to_owned(),
        }
    }
}

/// `clawsmith policy …`.
pub fn run(
    state: &crate::state::StateOptions,
    command: PolicyCommand,
    out: &Output,
) -> Result<i32> {
    match command {
        PolicyCommand::Check {
            core,
            tool,
            arguments,
        } => check(state, &core, &tool, &arguments, out),
    }
}

/// Decides `tool` with `arguments` as `call` would, up to the permission step, and says why.
fn check(
    state: &crate::state::StateOptions,
    options: &CoreOptions,
    tool: &str,
    arguments: &str,
    out: &Output,
) -> Result<i32> {
    let runtime = run::runtime()?;
    let core = run::build_core(&runtime, state, options, Lifetime::OneShot, None)?;
    let config = load(&state.dir, options)?;
    let Some(entry) = core.tools().get(tool) else {
        bail!(
            "unknown tool {tool}; `clawsmith tools --workspace {}` lists them",
            options.workspace.display()
        );
    };
    let input: serde_json::Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).context("the arguments must be one JSON object")?
    };
    let facts = entry.facts();
    let Some(explanation) = core.explain_call(tool, &input) else {
        bail!("unknown tool {tool}");
    };
    let mode = config.mode_for(options.mode.map(Into::into), PermissionMode::Ask);
    let decision = &explanation.decision;
    let decided_by = match (explanation.decided_by, &decision.rule) {
        (DecidedBy::Rule, Some(rule)) => format!("rule `{rule}`"),
        (DecidedBy::ProtectedPath, _) => "protected path".to_owned(),
        (DecidedBy::HiddenPath, _) => "hidden path".to_owned(),
        (DecidedBy::Repository, _) => "repository protection".to_owned(),
        _ => format!("{} mode", mode.as_str()),
    };
    let verdict = match decision.verdict {
        Verdict::Allow => "allow",
        Verdict::Ask => "ask",
        Verdict::Deny => "deny",
    };
    let hooks: Vec<&str> = config.hooks.iter().map(|hook| hook.name()).collect();
    let disaster = input
        .get("command")
        .and_then(serde_json::Value::as_str)
        .filter(|_| facts.capabilities.contains(Capability::ProcessExecute))
        .map(clawsmith_sandbox::classify::check_command);
    let approver = options.yes;
    if out.json {
        out.json_line(&json!({
            "tool": tool,
            "risk": facts.effective_risk,
            "capabilities": facts.capabilities.to_vec(),
            "mode": mode.as_str(),
            "decision": decision,
            "decidedBy": decided_by,
            "approvedByYes": approver && decision.verdict == Verdict::Ask,
            "hooks": hooks,
            "disasterCheck": disaster,
            "config": config.path,
            "hiddenPaths": config.hidden_paths,
            "network": config.network_summary(options.network_choice()),
        }))?;
        return Ok(0);
    }
    let mut text = format!(
        "{tool}: {}\n  decided by: {}\n  why: {}\n  tool: effective risk {}, capabilities {}\n",
        verdict,
        decided_by,
        decision.reason,
        facts.effective_risk,
        facts
            .capabilities
            .iter()
            .map(|capability| capability.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    );
    if decision.verdict == Verdict::Ask {
        let who = if approver {
            "--yes approves it"
        } else {
            "without --yes (or an MCP client that answers) it is refused"
        };
        let _ = writeln!(text, "  ask: {who}");
    }
    if !hooks.is_empty() {
        let _ = writeln!(
            text,
            "  hooks consulted first (not run here): {}",
            hooks.join(", ")
        );
    }
    if let Some(classified) = &disaster {
        let outcome = if classified.rule.is_some() {
            "blocked whatever the policy says (no approval runs it)"
        } else {
            "passes"
        };
        let _ = writeln!(text, "  disaster check: {outcome}: {}", classified.reason);
    }
    let source = config.path.as_ref().map_or_else(
        || "none (built-in policy)".to_owned(),
        |path| path.display().to_string(),
    );
    let _ = writeln!(
        text,
        "  network of commands: {}",
        config.network_summary(options.network_choice())
    );
    let _ = write!(text, "  configuration: {source}");
    out.line(&text)?;
    Ok(0)
}
