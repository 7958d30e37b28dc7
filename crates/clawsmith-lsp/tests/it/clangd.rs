//! clangd: diagnostics of the version sent, definition and references across files, hover,
//! document and workspace symbols, and an edit that fixes the error.

use serde_json::json;

use crate::{Harness, installed_or_skip};

const HEADER: &str = "int twice(int value);\n";
const UTIL: &str = "#include \"util.h\"\nint twice(int value) { return value * 2; }\n";
const MAIN: &str =
    "#include \"util.h\"\n\nint main(void) {\n    int x = twice(2);\n    return x + missing;\n}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clangd_answers_for_the_content_on_disk() {
    if !installed_or_skip("clangd", "clangd_answers_for_the_content_on_disk") {
        return;
    }
    let clangd = clawsmith_lsp::default_servers()
        .into_iter()
        .find(|s| s.name == "clangd")
        .unwrap();
    let harness = Harness::new(
        &[
            ("compile_flags.txt", "-std=c11\n"),
            ("util.h", HEADER),
            ("util.c", UTIL),
            ("main.c", MAIN),
        ],
        vec![clangd],
    );

    let diagnostics = harness
        .ok("lsp_diagnostics", json!({"path": "main.c"}))
        .await;
    assert!(
        diagnostics.contains("main.c:5:16: error: Use of undeclared identifier 'missing'"),
        "{diagnostics}"
    );
    assert!(
        diagnostics.contains("(version 1 as on disk"),
        "{diagnostics}"
    );

    let definition = harness
        .ok(
            "lsp_definition",
            json!({"path": "main.c", "line": 4, "column": 13}),
        )
        .await;
    assert!(
        definition.contains("util.h:1:5\n    int twice(int value);"),
        "{definition}"
    );

    // clangd indexes the files it has open (compile_flags.txt gives it no project index): open
    // the other one by asking for its diagnostics, then find the uses across both.
    let other = harness
        .ok("lsp_diagnostics", json!({"path": "util.c"}))
        .await;
    assert!(other.starts_with("util.c: 0 diagnostics"), "{other}");
    let references = harness
        .ok(
            "lsp_references",
            json!({"path": "main.c", "line": 4, "column": 13}),
        )
        .await;
    for place in ["main.c:4:13", "util.c:2:5"] {
        assert!(
            references.contains(place),
            "{place} missing from {references}"
        );
    }

    let hover = harness
        .ok(
            "lsp_hover",
            json!({"path": "main.c", "line": 4, "column": 13}),
        )
        .await;
    assert!(hover.contains("twice"), "{hover}");
    assert!(hover.contains("int value"), "{hover}");

    let symbols = harness
        .ok("lsp_document_symbols", json!({"path": "main.c"}))
        .await;
    assert!(symbols.contains("3:5 function main"), "{symbols}");

    let found = harness
        .ok("lsp_workspace_symbols", json!({"query": "twice"}))
        .await;
    assert!(found.contains("function twice"), "{found}");

    harness.edit("main.c", "x + missing", "x + 1").await;
    let fixed = harness
        .ok("lsp_diagnostics", json!({"path": "main.c"}))
        .await;
    assert!(
        fixed.starts_with("main.c: 0 diagnostics (version 2 as on disk"),
        "{fixed}"
    );
}
