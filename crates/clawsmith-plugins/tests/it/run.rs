//! Plugin tools as real processes through the core's pipeline and the sandbox.

use std::sync::Arc;

use clawsmith_checkpoint::Store;
use clawsmith_core::{AgentCore, CollectingSink, CoreConfig, CoreError, ExtensionTool};
use clawsmith_plugins::PluginSet;
use clawsmith_protocol::{ToolCall, ToolExecutionResult, ToolStatus};
use clawsmith_sandbox::SandboxConfig;
use clawsmith_security::{PermissionMode, PermissionPolicy};

use crate::{Fixture, sandbox_or_skip};

const HEAD: &str = "name = \"kit\"\nversion = \"1.0.0\"\ndescription = \"test kit\"\n";

/// A plugin with one tool per `(name, capabilities, script)`, each script run as `bin/<name>`.
fn plugin(fixture: &Fixture, tools: &[(&str, &str, &str)]) -> PluginSet {
    let mut manifest = HEAD.to_owned();
    let mut files = Vec::new();
    for (name, capabilities, script) in tools {
        manifest.push_str(&format!(
            "\n[[tools]]\nname = \"{name}\"\ndescription = \"test tool {name}\"\ncommand = \
             [\"./bin/{name}\"]\n{capabilities}\n"
        ));
        files.push((format!("bin/{name}"), format!("#!/bin/sh\n{script}\n")));
    }
    let mut all: Vec<(&str, &str)> = vec![("clawsmith-plugin.toml", manifest.as_str())];
    all.extend(
        files
            .iter()
            .map(|(path, script)| (path.as_str(), script.as_str())),
    );
    let root = fixture.plugin("kit", &all);
    let set = PluginSet::load(&[root]);
    assert!(set.errors.is_empty(), "{:?}", set.errors);
    set
}

fn core(fixture: &Fixture, set: &PluginSet) -> AgentCore {
    AgentCore::new(core_config(fixture, set)).unwrap()
}

fn core_config(fixture: &Fixture, set: &PluginSet) -> CoreConfig {
    let store = Arc::new(Store::open(fixture.dir.path().join("state.db")).unwrap());
    let mut config = CoreConfig::new(&fixture.workspace, store);
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    config.sandbox = SandboxConfig::new(&fixture.workspace, clawsmith_sandbox::StateDir::NotKept);
    config.extension_tools = set.extension_tools(&config.sandbox);
    config
}

async fn call(core: &AgentCore, tool: &str, arguments: serde_json::Value) -> ToolExecutionResult {
    let session = core.open_session(None).unwrap();
    let sink = CollectingSink::new();
    let call = ToolCall {
        id: "c1".to_owned(),
        name: tool.to_owned(),
        arguments: arguments.to_string(),
    };
    let mut outcome = session.run_turn(vec![call], &sink).await.unwrap();
    outcome.results.remove(0).1
}

#[tokio::test]
async fn a_plugin_process_sees_its_calls_span_as_traceparent() {
    if !sandbox_or_skip("a_plugin_process_sees_its_calls_span_as_traceparent") {
        return;
    }
    let fixture = Fixture::new();
    let set = plugin(
        &fixture,
        &[(
            "trace",
            "capabilities = []",
            r#"echo "${TRACEPARENT:-unset}""#,
        )],
    );
    let recorded = Arc::new(clawsmith_trace::MemorySink::default());
    let mut traced = core_config(&fixture, &set);
    traced.tracer = clawsmith_trace::Tracer::new(recorded.clone());
    let traced = AgentCore::new(traced).unwrap();
    let result = call(&traced, "kit__trace", serde_json::json!({})).await;
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    let spans = recorded.spans();
    let span = spans
        .iter()
        .find(|span| span.name == "execute_tool kit__trace")
        .unwrap();
    assert_eq!(
        result.content,
        format!("{}\n", span.context.traceparent()),
        "the process's parent is the call's span"
    );
    drop(traced);
    let untraced = call(&core(&fixture, &set), "kit__trace", serde_json::json!({})).await;
    assert_eq!(untraced.content, "unset\n");
}

#[tokio::test]
async fn a_plugin_process_gets_its_arguments_on_stdin_and_answers_on_stdout() {
    if !sandbox_or_skip("a_plugin_process_gets_its_arguments_on_stdin_and_answers_on_stdout") {
        return;
    }
    let fixture = Fixture::new();
    std::fs::write(fixture.workspace.join("seen.txt"), "in the workspace\n").unwrap();
    let set = plugin(
        &fixture,
        &[
            (
                "echo",
                "capabilities = [\"filesystem.read\"]",
                // stdin is the arguments; the working directory is the workspace.
                r#"input=$(tr -d '"'); printf '{"content": "got %s in %s from %s; %s", "status": "success"}' "$input" "$(pwd)" "$CLAWSMITH_PLUGIN_ROOT" "$(cat seen.txt)""#,
            ),
            (
                "text",
                "capabilities = []",
                "echo plain words; echo to stderr >&2",
            ),
            (
                "fails",
                "capabilities = []",
                "echo partial; echo 'something broke' >&2; exit 3",
            ),
            (
                "reports",
                "capabilities = []",
                r#"echo '{"content": "nothing to lint", "status": "error"}'"#,
            ),
        ],
    );
    let core = core(&fixture, &set);
    let root = set.plugins[0].root.display().to_string();
    let workspace = fixture.workspace.canonicalize().unwrap();

    let result = call(&core, "kit__echo", serde_json::json!({"x": 1})).await;
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    assert_eq!(
        result.content,
        format!(
            "got {{x:1}} in {} from {root}; in the workspace",
            workspace.display()
        )
    );

    let result = call(&core, "kit__text", serde_json::json!({})).await;
    assert_eq!(result.status(), ToolStatus::Success);
    assert_eq!(result.content, "plain words\n", "stderr stays apart");

    let result = call(&core, "kit__fails", serde_json::json!({})).await;
    assert_eq!(result.code().unwrap().as_str(), "tool_failed");
    assert!(
        result.content.contains(
            "plugin tool kit__fails failed (exit code 3); its stderr ended with:\nsomething broke"
        ),
        "{}",
        result.content
    );

    let result = call(&core, "kit__reports", serde_json::json!({})).await;
    assert_eq!(result.code().unwrap().as_str(), "tool_failed");
    assert!(
        result.content.ends_with("nothing to lint"),
        "{}",
        result.content
    );
}

#[tokio::test]
async fn the_kernel_stops_a_read_only_plugin_from_writing() {
    if !sandbox_or_skip("the_kernel_stops_a_read_only_plugin_from_writing") {
        return;
    }
    let fixture = Fixture::new();
    std::fs::write(fixture.workspace.join("notes.txt"), "original\n").unwrap();
    let write = "echo changed > notes.txt && echo wrote";
    let set = plugin(
        &fixture,
        &[
            (
                "reader",
                "capabilities = [\"filesystem.read\"]\nrisk = \"read\"",
                write,
            ),
            (
                "writer",
                "capabilities = [\"filesystem.read\", \"filesystem.write\"]",
                write,
            ),
        ],
    );
    let core = core(&fixture, &set);
    let reader = core.tools().get("kit__reader").unwrap();
    assert_eq!(reader.facts().effective_risk.as_str(), "read");

    let result = call(&core, "kit__reader", serde_json::json!({})).await;
    assert_eq!(
        result.code().unwrap().as_str(),
        "tool_failed",
        "{}",
        result.content
    );
    assert!(
        result.content.contains("Read-only file system")
            || result.content.contains("Permission denied"),
        "the kernel's refusal is quoted: {}",
        result.content
    );
    assert!(
        result.content.contains(
            "[sandbox: the workspace is read-only to this tool: it did not declare \
             filesystem.write, so the kernel refuses its writes there"
        ),
        "{}",
        result.content
    );
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("notes.txt")).unwrap(),
        "original\n",
        "the file is unchanged"
    );

    let result = call(&core, "kit__writer", serde_json::json!({})).await;
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("notes.txt")).unwrap(),
        "changed\n"
    );
}

#[tokio::test]
async fn a_timeout_ends_the_process_with_code_timeout() {
    if !sandbox_or_skip("a_timeout_ends_the_process_with_code_timeout") {
        return;
    }
    let fixture = Fixture::new();
    let set = plugin(
        &fixture,
        &[("slow", "capabilities = []\ntimeout_ms = 200", "sleep 30")],
    );
    let core = core(&fixture, &set);
    let result = call(&core, "kit__slow", serde_json::json!({})).await;
    assert_eq!(
        result.code().unwrap().as_str(),
        "timeout",
        "{}",
        result.content
    );
}

#[test]
fn a_duplicate_name_fails_construction_naming_both_origins() {
    let fixture = Fixture::new();
    let set = plugin(&fixture, &[("t", "capabilities = []", "true")]);
    let store = Arc::new(Store::open(fixture.dir.path().join("state.db")).unwrap());
    let mut config = CoreConfig::new(&fixture.workspace, store);
    let mut tools = set.extension_tools(&config.sandbox);
    tools.push(ExtensionTool {
        source: "mcp:other".to_owned(),
        tool: Arc::clone(&tools[0].tool),
        deferred: false,
    });
    config.extension_tools = tools;
    let error = AgentCore::new(config).unwrap_err();
    assert!(matches!(error, CoreError::DuplicateTool { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("kit__t")
            && message.contains("extension:plugin:kit")
            && message.contains("extension:mcp:other"),
        "{message}"
    );
}

#[tokio::test]
async fn a_plugin_hook_is_consulted_and_a_deferred_tool_waits_for_search() {
    let fixture = Fixture::new();
    let manifest = format!(
        "{HEAD}\n[[tools]]\nname = \"hidden\"\ndescription = \"d\"\ncommand = [\"./bin/t\"]\n\
         capabilities = []\ndeferred = true\nsearch_metadata = {{ aliases = [\"secret\"], tags \
         = [\"x\"], search_hint = \"when hiding\" }}\n\n[[tools]]\nname = \"shown\"\ndescription \
         = \"d\"\ncommand = [\"./bin/t\"]\ncapabilities = []\n\n[[hooks]]\nname = \"veto\"\n\
         command = \"./bin/veto\"\n"
    );
    let root = fixture.plugin(
        "kit",
        &[
            ("clawsmith-plugin.toml", manifest.as_str()),
            ("bin/t", "#!/bin/sh\necho ran\n"),
            (
                "bin/veto",
                "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"deny\", \"reason\": \"not today\"}'\n",
            ),
        ],
    );
    let set = PluginSet::load(&[root]);
    assert!(set.errors.is_empty(), "{:?}", set.errors);
    let store = Arc::new(Store::open(fixture.dir.path().join("state.db")).unwrap());
    let mut config = CoreConfig::new(&fixture.workspace, store);
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    config.extension_tools = set.extension_tools(&config.sandbox);
    config.command_hooks = set.hooks();
    let core = AgentCore::new(config).unwrap();

    let hidden = core.tools().get("kit__hidden").unwrap();
    assert!(hidden.is_deferred());
    assert_eq!(hidden.search_metadata().unwrap().aliases, vec!["secret"]);
    assert!(!core.tools().get("kit__shown").unwrap().is_deferred());
    let result = call(&core, "kit__hidden", serde_json::json!({})).await;
    assert_eq!(
        result.code().unwrap().as_str(),
        "inactive_tool",
        "{}",
        result.content
    );

    let result = call(&core, "kit__shown", serde_json::json!({})).await;
    assert_eq!(
        result.code().unwrap().as_str(),
        "hook_denied",
        "{}",
        result.content
    );
    assert!(
        result.content.contains("kit/veto") && result.content.contains("not today"),
        "{}",
        result.content
    );
}
