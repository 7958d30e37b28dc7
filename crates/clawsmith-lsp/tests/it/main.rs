//! Integration tests of clawsmith-lsp against real language servers (pylsp, clangd) and a
//! misbehaving fixture server, all spawned confined through clawsmith-sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod clangd;
mod fixture;
mod pylsp;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawsmith_lsp::{LspConfig, LspServerConfig, LspService, ServiceOptions, lsp_tools};
use clawsmith_protocol::{
    Authorization, ErrorCode, PermissionDecision, Tool, ToolExecutionContext, ToolExecutionResult,
    ToolOutput, ToolStatus, Verdict,
};
use clawsmith_sandbox::SandboxConfig;
use serde_json::{Value, json};

/// A workspace and a state dir side by side in a temp dir outside `/tmp` (the sandbox gives
/// servers a private `/tmp`, so a workspace there would be out of their sight).
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub service: Arc<LspService>,
    pub tools: Vec<Arc<dyn Tool>>,
}

impl Harness {
    pub fn new(files: &[(&str, &str)], servers: Vec<LspServerConfig>) -> Harness {
        Harness::with_options(files, servers, ServiceOptions::default())
    }

    pub fn with_options(
        files: &[(&str, &str)],
        servers: Vec<LspServerConfig>,
        options: ServiceOptions,
    ) -> Harness {
        // Where the built view shows the host (not under /tmp or /var/tmp, which it empties).
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lsp-harness");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let workspace = dir.path().join("ws");
        for (path, content) in files {
            let path = workspace.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        std::fs::create_dir_all(&workspace).unwrap();
        let workspace = workspace.canonicalize().unwrap();
        let config = LspConfig {
            lsp_servers: servers,
        };
        let service = Arc::new(
            LspService::new(
                config,
                &workspace,
                // As the CLI runs them: the cache inside the state directory, which the
                // server's view hides but for the cache.
                SandboxConfig::new(
                    &workspace,
                    clawsmith_sandbox::StateDir::At(dir.path().join("state")),
                ),
                dir.path().join("state/lsp-cache"),
                options,
            )
            .unwrap(),
        );
        Harness {
            tools: lsp_tools(Arc::clone(&service)),
            service,
            workspace,
            dir,
        }
    }

    pub async fn call(&self, name: &str, input: Value) -> ToolExecutionResult {
        let tool = self.tools.iter().find(|t| t.name() == name).unwrap();
        match tool
            .execute(input, ToolExecutionContext::new("s", "t", "c"))
            .await
        {
            ToolOutput::Result(result) => result,
            other => panic!("{name}: unexpected output {other:?}"),
        }
    }

    /// The text of a successful call.
    pub async fn ok(&self, name: &str, input: Value) -> String {
        let result = self.call(name, input.clone()).await;
        assert_eq!(
            result.status(),
            ToolStatus::Success,
            "{name} {input}: {}",
            result.content
        );
        result.content
    }

    /// The message of a failed call, after checking its code.
    pub async fn fails(&self, name: &str, input: Value, code: ErrorCode) -> String {
        let result = self.call(name, input.clone()).await;
        assert_eq!(
            result.code(),
            Some(&code),
            "{name} {input}: {}",
            result.content
        );
        // What the model reads is `Error: <message>`.
        result
            .content
            .strip_prefix("Error: ")
            .unwrap_or_else(|| panic!("{name}: {}", result.content))
            .to_owned()
    }

    /// `edit_file` of clawsmith-fs, authorized, on the same workspace.
    pub async fn edit(&self, path: &str, old_text: &str, new_text: &str) {
        let workspace = Arc::new(clawsmith_fs::Workspace::open(&self.workspace).unwrap());
        let tools = clawsmith_fs::builtin_tools(workspace, Arc::new(clawsmith_fs::NoopRecorder));
        let edit = tools.iter().find(|t| t.name() == "edit_file").unwrap();
        let decision = PermissionDecision {
            verdict: Verdict::Allow,
            reason: "test".to_owned(),
            rule: None,
        };
        let context = ToolExecutionContext::new("s", "t", "edit")
            .with_authorization(Authorization::from_decision(&decision).unwrap());
        let input = json!({"path": path, "oldText": old_text, "newText": new_text});
        let ToolOutput::Result(result) = edit.execute(input, context).await else {
            panic!("edit_file gave no typed result");
        };
        assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    }
}

/// Whether `program` is installed; says so when a test skips for want of it.
pub fn installed_or_skip(program: &str, test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    if !found {
        eprintln!("SKIP {test}: {program} is not installed (.ci/run installs it)");
    }
    found
}
