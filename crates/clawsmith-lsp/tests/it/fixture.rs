//! A fixture server that crashes or never answers, and a language without a server.

use clawsmith_lsp::LspServerConfig;
use clawsmith_protocol::ErrorCode;
use serde_json::json;

use crate::{Harness, installed_or_skip};

/// The fixture server's script, copied into a folder of its own (the confined server sees a
/// configured server's own folder, read-only, wherever it is).
fn script() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lsp-fixture");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("clawsmith-lsp-test-fake_lsp.py");
        let partial = dir.join(format!(
            "clawsmith-lsp-test-fake_lsp.py.{}",
            std::process::id()
        ));
        // Written whole, then renamed: test processes running at once never see a part.
        std::fs::write(&partial, include_str!("../fixtures/fake_lsp.py")).unwrap();
        std::fs::rename(&partial, &path).unwrap();
        path.display().to_string()
    })
}

fn fixture(mode: &str, configure: impl FnOnce(&mut LspServerConfig)) -> LspServerConfig {
    let mut server = LspServerConfig::new("fixture", "python3", &[script(), mode], &["fix"]);
    configure(&mut server);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_request_is_restarted_and_the_call_answered() {
    if !installed_or_skip("python3", "a_server_that_crashes_mid_request_is_restarted") {
        return;
    }
    let harness = Harness::new(&[("a.fix", "x\n")], vec![fixture("crash-once", |_| {})]);
    let hover = harness
        .ok(
            "lsp_hover",
            json!({"path": "a.fix", "line": 1, "column": 1}),
        )
        .await;
    assert_eq!(hover, "a.fix:1:1: hover\nfixture hover");
    let statuses = harness.service.servers().await;
    assert_eq!(statuses.len(), 1);
    assert_eq!(
        (statuses[0].running, statuses[0].crashes),
        (true, 1),
        "{statuses:?}"
    );
    // The crash marker was written in the server's private cache, not in the workspace.
    assert!(
        harness
            .dir
            .path()
            .join("state/lsp-cache/fixture/crashed-once")
            .exists()
    );
    assert!(!harness.workspace.join("crashed-once").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_crashing_is_given_up_after_max_restarts() {
    if !installed_or_skip("python3", "a_server_that_keeps_crashing_is_given_up") {
        return;
    }
    let harness = Harness::new(
        &[("a.fix", "x\n")],
        vec![fixture("crash-always", |s| s.max_restarts = 1)],
    );
    let input = json!({"path": "a.fix", "line": 1, "column": 1});
    // Crash, restart, crash again: the call fails, naming the server and its stderr.
    let first = harness
        .fails("lsp_hover", input.clone(), ErrorCode::TOOL_FAILED)
        .await;
    assert!(
        first.contains("language server `fixture` exited"),
        "{first}"
    );
    assert!(
        first.contains("crashing on purpose in mode crash-always"),
        "{first}"
    );
    let gave_up = harness
        .fails("lsp_hover", input, ErrorCode::TOOL_FAILED)
        .await;
    assert!(
        gave_up.contains(
            "language server `fixture` crashed 2 times and is not restarted again \
             (max_restarts = 1 in [[lsp_servers]])"
        ),
        "{gave_up}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_yields_timeout() {
    if !installed_or_skip("python3", "a_server_that_never_answers_yields_timeout") {
        return;
    }
    let harness = Harness::new(
        &[("a.fix", "x\n")],
        vec![fixture("silent", |s| s.request_timeout_ms = 300)],
    );
    let message = harness
        .fails(
            "lsp_hover",
            json!({"path": "a.fix", "line": 1, "column": 1}),
            ErrorCode::TIMEOUT,
        )
        .await;
    assert_eq!(
        message,
        "language server `fixture` did not answer textDocument/hover within 300 ms"
    );
    // A timeout is not a crash: the server is still there for the next call.
    let statuses = harness.service.servers().await;
    assert_eq!((statuses[0].running, statuses[0].crashes), (true, 0));
}

#[tokio::test]
async fn a_language_without_a_server_is_a_clear_error() {
    let harness = Harness::new(&[("notes.zzz", "x\n"), ("Makefile", "all:\n")], vec![]);
    let message = harness
        .fails(
            "lsp_diagnostics",
            json!({"path": "notes.zzz"}),
            ErrorCode::TOOL_FAILED,
        )
        .await;
    assert_eq!(
        message,
        "no language server for zzz files (`.zzz`): none is configured and none of the usual \
         servers for it is on PATH; add one under [[lsp_servers]] in clawsmith.toml with \
         extensions = [\"zzz\"]"
    );
    let message = harness
        .fails(
            "lsp_document_symbols",
            json!({"path": "Makefile"}),
            ErrorCode::INVALID_ARGUMENTS,
        )
        .await;
    assert!(
        message.contains("Makefile has no file extension"),
        "{message}"
    );
    let message = harness
        .fails(
            "lsp_diagnostics",
            json!({"path": "../outside.py"}),
            ErrorCode::INVALID_ARGUMENTS,
        )
        .await;
    assert_eq!(message, "Path is outside the workspace: ../outside.py");
    let message = harness
        .fails(
            "lsp_workspace_symbols",
            json!({"query": "x"}),
            ErrorCode::TOOL_FAILED,
        )
        .await;
    assert!(
        message.contains("no language server is running yet"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_is_shut_down_and_started_again_without_counting_a_crash() {
    if !installed_or_skip("python3", "an_idle_server_is_shut_down") {
        return;
    }
    let options = clawsmith_lsp::ServiceOptions {
        idle_timeout: std::time::Duration::from_millis(200),
        ..clawsmith_lsp::ServiceOptions::default()
    };
    let harness = Harness::with_options(
        &[("a.fix", "x\n")],
        vec![fixture("answer", |_| {})],
        options,
    );
    let input = json!({"path": "a.fix", "line": 1, "column": 1});
    assert_eq!(
        harness.ok("lsp_hover", input.clone()).await,
        "a.fix:1:1: hover\nfixture hover"
    );
    // Waits for the state change (bounded), asserting no duration.
    let mut stopped = false;
    for _ in 0..500 {
        if !harness.service.servers().await[0].running {
            stopped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(stopped, "the idle server is still running");
    assert_eq!(harness.service.servers().await[0].crashes, 0);
    assert_eq!(
        harness.ok("lsp_hover", input).await,
        "a.fix:1:1: hover\nfixture hover"
    );
    let statuses = harness.service.servers().await;
    assert_eq!((statuses[0].running, statuses[0].crashes), (true, 0));
}

#[test]
fn the_usual_servers_on_path_are_looked_up_at_first_use_not_at_construction() {
    use clawsmith_lsp::{LspConfig, LspService, ServiceOptions};
    use clawsmith_sandbox::SandboxConfig;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (workspace, bin) = (dir.path().join("ws"), dir.path().join("bin"));
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let service = LspService::new(
        LspConfig::default(),
        &workspace,
        SandboxConfig::new(&workspace, clawsmith_sandbox::StateDir::NotKept),
        dir.path().join("state/lsp-cache"),
        ServiceOptions::default(),
    )
    .unwrap()
    .with_defaults_on_path(Some(bin.clone().into_os_string()));
    // Installed after the service was made: found, since nothing was looked up yet.
    let program = bin.join("pylsp");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(service.config().server_for("py").unwrap().name, "pylsp");
    assert!(service.config().server_for("go").is_none());
    // Looked up once: a server installed later is not picked up by this service.
    let gopls = bin.join("gopls");
    std::fs::write(&gopls, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&gopls, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(service.config().server_for("go").is_none());
}

/// A language server runs under the host's one configuration: the state directory it lives
/// beside is out of its sight (only its own cache there is bound in), so it cannot read the
/// session database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_language_server_cannot_read_the_state_database() {
    if !installed_or_skip(
        "python3",
        "a_language_server_cannot_read_the_state_database",
    ) {
        return;
    }
    // The harness's state directory, known only once it exists: the server's script reads the
    // database from its own cache's grandparent (`state/lsp-cache/<server>/../..`).
    let spy = fixture("normal", |server| {
        let script = format!(
            "cat \"$HOME/../../clawsmith.db\" > \"$HOME/leak\" 2>&1; ls -a \"$HOME/../..\" >> \
             \"$HOME/leak\"; exec python3 {} normal",
            script()
        );
        server.command = "sh".to_owned();
        server.args = vec!["-c".to_owned(), script];
    });
    let harness = Harness::new(&[("a.fix", "x\n")], vec![spy]);
    let state = harness.dir.path().join("state");
    std::fs::write(state.join("clawsmith.db"), "SQLite format 3 lsp-attack").unwrap();
    harness
        .ok(
            "lsp_hover",
            json!({"path": "a.fix", "line": 1, "column": 1}),
        )
        .await;
    let leak = std::fs::read_to_string(state.join("lsp-cache/fixture/leak")).unwrap();
    assert!(!leak.contains("lsp-attack"), "{leak}");
    assert!(!leak.contains("clawsmith.db\n"), "{leak}");
}
