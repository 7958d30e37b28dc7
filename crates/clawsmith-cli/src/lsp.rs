//! The language-server tools of clawsmith-lsp: `[[lsp_servers]]` of clawsmith.toml
//! and the usual servers found on `PATH`, as deferred tools of the core.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use clawsmith_core::fs::HiddenPaths;
use clawsmith_core::{CoreConfig, ExtensionTool};
use clawsmith_lsp::{LspConfig, LspService, ServiceOptions, lsp_tools};
use clawsmith_sandbox::SandboxConfig;

/// Adds the six `lsp_*` tools, deferred: nothing starts until one is called. Servers run under a
/// copy of `sandbox` with the workspace read-only and `<state>/lsp-cache/<server>` as their
/// private writable cache.
pub fn add_to_core(
    state_dir: &Path,
    config_file: Option<&Path>,
    workspace: &Path,
    sandbox: &SandboxConfig,
    hidden: &Arc<HiddenPaths>,
    config: &mut CoreConfig,
) -> Result<()> {
    let servers = match config_file {
        Some(path) => LspConfig::load(path).with_context(|| {
            format!(
                "reading the language-server configuration {}",
                path.display()
            )
        })?,
        None => LspConfig::default(),
    };
    // The usual servers on PATH are looked up at the first lsp_* call, not at every start.
    let service = LspService::new(
        servers,
        workspace,
        sandbox.clone(),
        state_dir.join("lsp-cache"),
        ServiceOptions::default(),
    )
    .context("preparing the language-server tools")?
    .with_hidden(hidden.clone())
    .with_defaults_on_path(std::env::var_os("PATH"));
    config
        .extension_tools
        .extend(
            lsp_tools(Arc::new(service))
                .into_iter()
                .map(|tool| ExtensionTool {
                    source: "lsp".to_owned(),
                    tool,
                    deferred: true,
                }),
        );
    Ok(())
}
