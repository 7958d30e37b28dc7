//! A1: the frozen table, duplicate names, what the model is shown.

use clawsmith_core::{CoreError, ExtensionTool, Origin, canonical_json, schema_list_sha256};
use clawsmith_protocol::{ToolOutput, ToolStatus};

use crate::support::*;

#[test]
fn the_table_merges_every_source_in_order() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.extension_tools.push(ExtensionTool {
            source: "mcp:notes".into(),
            tool: TestTool::answering("note_add", ToolOutput::Text("ok".into())).shared(),
            deferred: false,
        });
    });
    let names = core.tools().names();
    assert_eq!(
        names,
        [
            "read_file",
            "search_files",
            "glob_files",
            "write_file",
            "edit_file",
            "rename_file",
            "delete_file",
            "run_command",
            "todo_write",
            "todo_list",
            "read_artifact",
            "note_add"
        ]
    );
    let origins: Vec<&Origin> = core.tools().entries().iter().map(|e| e.origin()).collect();
    // (origin, its text in listings and errors)
    let expected = [
        (0, Origin::Files, "builtin:fs"),
        (7, Origin::Command, "builtin:command"),
        (8, Origin::Session, "session"),
        (10, Origin::Artifacts, "service:artifacts"),
        (
            11,
            Origin::Extension("mcp:notes".into()),
            "extension:mcp:notes",
        ),
    ];
    for (index, origin, text) in expected {
        assert_eq!(
            (origins[index], origins[index].to_string()),
            (&origin, text.to_owned())
        );
        assert_eq!(origin.is_core(), index != 11);
    }
}

#[test]
fn a_duplicate_name_fails_naming_both_sources() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    config.extension_tools.push(ExtensionTool {
        source: "mcp:evil".into(),
        tool: TestTool::answering("read_file", ToolOutput::Text("x".into())).shared(),
        deferred: false,
    });
    let error = clawsmith_core::AgentCore::new(config).unwrap_err();
    assert!(matches!(error, CoreError::DuplicateTool { .. }));
    assert_eq!(
        error.to_string(),
        "tool `read_file` is defined twice: by builtin:fs and by extension:mcp:evil"
    );
    // Two extensions colliding.
    let mut config = fixture.config();
    for source in ["one", "two"] {
        config.extension_tools.push(ExtensionTool {
            source: source.into(),
            tool: TestTool::answering("same", ToolOutput::Text("x".into())).shared(),
            deferred: true,
        });
    }
    let error = clawsmith_core::AgentCore::new(config).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("extension:one and by extension:two"),
        "{error}"
    );
}

/// A schema of clawsmith's own extension crates is compiled on its tool's first call, as a
/// built-in tool's is: a bad one does not stop construction, and its call fails with
/// `invalid_arguments` naming the schema (no tool runs); the same schema from any other source
/// still fails construction.
#[tokio::test]
async fn in_tree_extension_schemas_compile_on_first_call() {
    let fixture = Fixture::new();
    let bad = || {
        let mut tool = TestTool::answering("lsp_broken", ToolOutput::Text("ran".into()));
        tool.schema = serde_json::json!({"type": "no-such-type"});
        tool.shared()
    };
    for source in clawsmith_core::IN_TREE_SOURCES {
        let mut config = fixture.config();
        config.extension_tools.push(ExtensionTool {
            source: source.into(),
            tool: bad(),
            deferred: false,
        });
        let core = clawsmith_core::AgentCore::new(config)
            .unwrap_or_else(|error| panic!("{source}: {error}"));
        let session = core.open_session(None).unwrap();
        let result = one(&session, "lsp_broken", "{}").await;
        assert_status(&result, ToolStatus::Error, Some("invalid_arguments"));
        assert!(
            result
                .content
                .contains("the tool's own schema does not compile"),
            "{source}: {}",
            result.content
        );
        assert!(!result.content.contains("ran"), "{}", result.content);
    }
    for source in ["mcp:lsp", "plugin:lsp", "lsp2", "extension:lsp"] {
        let mut config = fixture.config();
        config.extension_tools.push(ExtensionTool {
            source: source.into(),
            tool: bad(),
            deferred: false,
        });
        assert!(
            matches!(
                clawsmith_core::AgentCore::new(config),
                Err(CoreError::InvalidSchema { .. })
            ),
            "{source}"
        );
    }
}

#[test]
fn invalid_schemas_and_names_fail_construction() {
    let fixture = Fixture::new();
    let mut config = fixture.config();
    let mut tool = TestTool::answering("bad_schema", ToolOutput::Text("x".into()));
    tool.schema = serde_json::json!({"type": "no-such-type"});
    config.extension_tools.push(ExtensionTool {
        source: "p".into(),
        tool: tool.shared(),
        deferred: false,
    });
    assert!(matches!(
        clawsmith_core::AgentCore::new(config),
        Err(CoreError::InvalidSchema { .. })
    ));
    let mut config = fixture.config();
    config.extension_tools.push(ExtensionTool {
        source: "p".into(),
        tool: TestTool::answering("bad name", ToolOutput::Text("x".into())).shared(),
        deferred: false,
    });
    assert!(matches!(
        clawsmith_core::AgentCore::new(config),
        Err(CoreError::InvalidToolName { .. })
    ));
}

#[test]
fn the_schema_hash_covers_exactly_the_shown_list() {
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    let shown = core.tools().shown(&Default::default());
    let expected = {
        use sha2::Digest;
        let value = serde_json::to_value(&shown).unwrap();
        hex::encode(sha2::Sha256::digest(canonical_json(&value).as_bytes()))
    };
    assert_eq!(schema_list_sha256(&shown), expected);
    assert_eq!(core.initial_tool_schema_sha256(), expected);
    // Each shown tool carries the schema the pipeline validates against.
    for tool in &shown {
        assert_eq!(
            &tool.input_schema,
            core.tools().get(&tool.name).unwrap().input_schema()
        );
    }
    // Same configuration, same hash (no map-order or formatting dependence).
    let again = fixture.core(|_| {});
    assert_eq!(again.initial_tool_schema_sha256(), expected);
}

#[test]
fn a_session_of_another_workspace_is_refused() {
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    core.open_session(Some("s".into())).unwrap();
    let other = fixture.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut config = fixture.config();
    config.workspace_root = other;
    let core = clawsmith_core::AgentCore::new(config).unwrap();
    assert!(matches!(
        core.open_session(Some("s".into())),
        Err(CoreError::WorkspaceMismatch { .. })
    ));
}

#[test]
fn a_command_service_adds_its_eight_tools() {
    let fixture = Fixture::new();
    let sandbox = clawsmith_sandbox::SandboxConfig::new(
        &fixture.workspace,
        clawsmith_sandbox::StateDir::NotKept,
    );
    let service = clawsmith_sandbox::CommandExecutionService::new(
        clawsmith_sandbox::ServiceConfig::new(sandbox, fixture.dir.path().join("logs")),
    )
    .unwrap();
    let core = fixture.core(|config| config.command_service = Some(std::sync::Arc::new(service)));
    let service_tools: Vec<&str> = core
        .tools()
        .entries()
        .iter()
        .filter(|entry| *entry.origin() == Origin::Commands)
        .map(|entry| entry.name())
        .collect();
    assert_eq!(service_tools.len(), 8, "{service_tools:?}");
    for name in [
        "start_command",
        "list_commands",
        "command_status",
        "command_output",
        "cancel_command",
    ] {
        assert!(
            service_tools.contains(&name),
            "{name} missing from {service_tools:?}"
        );
    }
}

/// The shipped tools' validators are compiled on their first call, not when the table is built:
/// every schema clawsmith ships must compile (file, command, session, artifact, background
/// command and search tools), or a first call would be the first to find out.
#[test]
fn every_shipped_schema_compiles() {
    let fixture = Fixture::new();
    let sandbox = clawsmith_sandbox::SandboxConfig::new(
        &fixture.workspace,
        clawsmith_sandbox::StateDir::NotKept,
    );
    let service = clawsmith_sandbox::CommandExecutionService::new(
        clawsmith_sandbox::ServiceConfig::new(sandbox, fixture.dir.path().join("logs")),
    )
    .unwrap();
    let core = fixture.core(|config| {
        config.command_service = Some(std::sync::Arc::new(service));
        // A deferred tool brings search_tools into the table.
        config.extension_tools.push(ExtensionTool {
            source: "mcp:notes".into(),
            tool: TestTool::answering("note_add", ToolOutput::Text("ok".into())).shared(),
            deferred: true,
        });
    });
    let shipped: Vec<_> = core
        .tools()
        .entries()
        .iter()
        .filter(|entry| entry.origin().is_core())
        .collect();
    assert!(shipped.len() >= 20, "{}", shipped.len());
    assert!(shipped.iter().any(|entry| entry.name() == "search_tools"));
    for entry in shipped {
        if let Err(error) = jsonschema::validator_for(entry.input_schema()) {
            panic!("{} ({}): {error}", entry.name(), entry.origin());
        }
    }
}
