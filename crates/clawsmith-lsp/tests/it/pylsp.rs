//! pylsp (with pyflakes): diagnostics of the version on disk, definition and references across
//! two files, hover, symbols, and an edit that fixes the error.

use clawsmith_lsp::{LspConfig, LspServerConfig};
use serde_json::json;

use crate::{Harness, installed_or_skip};

const LIB: &str = "def helper(value):\n    \"\"\"Double the value.\"\"\"\n    return value * 2\n";
const MAIN: &str = "from lib import helper\n\nresult = helper(2)\nprint(undefined_name)\n";

fn pylsp() -> LspServerConfig {
    // The default entry, as used when pylsp is found on PATH without configuration.
    clawsmith_lsp::default_servers()
        .into_iter()
        .find(|s| s.name == "pylsp")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pylsp_answers_for_the_content_on_disk() {
    if !installed_or_skip("pylsp", "pylsp_answers_for_the_content_on_disk") {
        return;
    }
    let harness = Harness::new(&[("lib.py", LIB), ("main.py", MAIN)], vec![pylsp()]);

    let diagnostics = harness
        .ok("lsp_diagnostics", json!({"path": "main.py"}))
        .await;
    assert!(
        diagnostics.starts_with("main.py: 1 diagnostic (version 1"),
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains("main.py:4:7: error: undefined name 'undefined_name' [pyflakes]"),
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains("\n    print(undefined_name)"),
        "{diagnostics}"
    );

    let definition = harness
        .ok(
            "lsp_definition",
            json!({"path": "main.py", "line": 3, "column": 10}),
        )
        .await;
    assert!(
        definition.contains("lib.py:1:5\n    def helper(value):"),
        "{definition}"
    );

    let references = harness
        .ok(
            "lsp_references",
            json!({"path": "lib.py", "line": 1, "column": 5}),
        )
        .await;
    for place in ["lib.py:1:5", "main.py:1:17", "main.py:3:10"] {
        assert!(
            references.contains(place),
            "{place} missing from {references}"
        );
    }
    assert!(
        references.contains("\n    result = helper(2)"),
        "{references}"
    );

    let hover = harness
        .ok(
            "lsp_hover",
            json!({"path": "main.py", "line": 3, "column": 10}),
        )
        .await;
    assert!(hover.contains("helper(value)"), "{hover}");
    assert!(hover.contains("Double the value."), "{hover}");

    let symbols = harness
        .ok("lsp_document_symbols", json!({"path": "lib.py"}))
        .await;
    assert!(symbols.contains("function helper"), "{symbols}");

    // Fix the error with edit_file: the next call sends version 2 and reports its diagnostics,
    // not the old ones.
    harness
        .edit("main.py", "print(undefined_name)", "print(result)")
        .await;
    let fixed = harness
        .ok("lsp_diagnostics", json!({"path": "main.py"}))
        .await;
    assert!(
        fixed.starts_with("main.py: 0 diagnostics (version 2 as on disk"),
        "{fixed}"
    );

    // Lines are checked against the file as it is.
    let message = harness
        .fails(
            "lsp_hover",
            json!({"path": "main.py", "line": 40, "column": 1}),
            clawsmith_protocol::ErrorCode::INVALID_ARGUMENTS,
        )
        .await;
    assert!(
        message.contains("main.py has 5 lines; line 40 does not exist"),
        "{message}"
    );
    let statuses = harness.service.servers().await;
    assert_eq!(statuses.len(), 1);
    assert!(
        statuses[0].running && statuses[0].crashes == 0,
        "{statuses:?}"
    );
    harness.service.shutdown().await;
    assert!(!harness.service.servers().await[0].running);
}

#[test]
fn the_default_python_server_is_pylsp_when_it_is_on_path() {
    let path = std::env::var_os("PATH");
    if !installed_or_skip(
        "pylsp",
        "the_default_python_server_is_pylsp_when_it_is_on_path",
    ) {
        return;
    }
    let config = LspConfig::default().with_defaults_on_path(path.as_deref());
    assert_eq!(config.server_for("py").unwrap().name, "pylsp");
}

/// pylsp without pyflakes reports no undefined name; the answer says why instead of passing for
/// a clean file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pylsp_without_pyflakes_says_what_it_cannot_report() {
    if !installed_or_skip("pylsp", "pylsp_without_pyflakes_says_what_it_cannot_report") {
        return;
    }
    // A `pyflakes` package that fails to import, first on the server's path (under the target
    // directory, which the server's sandbox view shows).
    let blocker = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir(blocker.path().join("pyflakes")).unwrap();
    std::fs::write(
        blocker.path().join("pyflakes/__init__.py"),
        "raise ImportError('pyflakes is not installed here')\n",
    )
    .unwrap();
    let mut server = pylsp();
    server.env.insert(
        "PYTHONPATH".to_owned(),
        blocker.path().display().to_string(),
    );
    let harness = Harness::new(&[("main.py", MAIN), ("lib.py", LIB)], vec![server]);
    let diagnostics = harness
        .ok("lsp_diagnostics", json!({"path": "main.py"}))
        .await;
    assert!(
        diagnostics.starts_with("main.py: 0 diagnostics") && !diagnostics.contains("[pyflakes]"),
        "the blocker did not take: {diagnostics}"
    );
    assert!(
        diagnostics.contains(
            "[pylsp could not load pyflakes, so undefined names, unused imports and syntax errors \
             are not reported; install pyflakes (Debian: python3-pyflakes) and restart clawsmith]"
        ),
        "{diagnostics}"
    );
    // With pyflakes, no such line.
    let harness = Harness::new(&[("main.py", MAIN), ("lib.py", LIB)], vec![pylsp()]);
    let diagnostics = harness
        .ok("lsp_diagnostics", json!({"path": "main.py"}))
        .await;
    assert!(!diagnostics.contains("could not load"), "{diagnostics}");
}
