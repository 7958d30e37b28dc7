//! The MCP client against a real external MCP server process (`clawsmith-mcp-fixture`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clawsmith_core::sandbox::{SandboxConfig, StateDir};
use clawsmith_core::{ExtensionTool, NullSink};
use clawsmith_mcp::{McpConfig, McpError, McpServerConfig, McpStartup, connect_servers, tool_name};
use clawsmith_protocol::{Risk, ToolCall, ToolStatus};
use clawsmith_security::PermissionMode;
use clawsmith_trace::{MemorySink, Tracer};
use serde_json::json;

use crate::support::{
    CoreSpec, TestClient, assert_outcome, authorized, connect, run, setup, text, tool,
};

/// (configured capabilities, configured risk, expected effective risk)
type RiskCase = (Option<&'static [&'static str]>, Option<Risk>, Risk);

const FIXTURE: &str = env!("CARGO_BIN_EXE_clawsmith-mcp-fixture");

/// The host's sandbox policy the servers are confined by: a workspace under the target
/// directory, no state directory.
/// The tools the well-behaved fixture server lists.
const FIXTURE_TOOLS: usize = 6;

fn sandbox() -> SandboxConfig {
    let workspace = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    SandboxConfig::new(workspace, StateDir::NotKept)
}

fn fixture(capabilities: Option<&[&str]>, risk: Option<Risk>) -> McpServerConfig {
    let mut config = McpConfig::from_toml_str(&format!(
        "[[mcp_servers]]\nname = \"fixture\"\ncommand = {FIXTURE:?}\nenv = [\"CARGO_PKG_NAME\"]\n"
    ))
    .unwrap()
    .mcp_servers
    .remove(0);
    config.capabilities = capabilities.map(|list| list.iter().map(|c| (*c).to_owned()).collect());
    config.risk = risk;
    config
}

async fn connect_fixture(capabilities: Option<&[&str]>, risk: Option<Risk>) -> Vec<ExtensionTool> {
    let config = McpConfig {
        mcp_servers: vec![fixture(capabilities, risk)],
    };
    let startup = connect_servers(&config, &sandbox()).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    startup.tools
}

#[tokio::test]
async fn server_tools_become_deferred_tools_named_by_server() {
    let tools = connect_fixture(None, None).await;
    let names: Vec<&str> = tools.iter().map(|tool| tool.tool.name()).collect();
    assert_eq!(
        names,
        [
            "mcp__fixture__echo",
            "mcp__fixture__getenv",
            "mcp__fixture__trace_meta",
            "mcp__fixture__fail",
            "mcp__fixture__exit",
            "mcp__fixture__progress",
        ]
    );
    for tool in &tools {
        assert!(tool.deferred);
        assert_eq!(tool.source, "mcp:fixture");
        assert!(tool.tool.deferred().is_some());
    }
    let echo = tool_metadata(&tools, "mcp__fixture__echo");
    assert!(echo.aliases.contains(&"echo".to_owned()), "{echo:?}");
    assert!(echo.search_hint.unwrap().contains("Echo text"));
}

fn tool_metadata(tools: &[ExtensionTool], name: &str) -> clawsmith_protocol::SearchMetadata {
    tools
        .iter()
        .find(|tool| tool.tool.name() == name)
        .unwrap()
        .tool
        .deferred()
        .unwrap()
}

#[tokio::test]
async fn effective_risk_comes_from_the_users_declaration_never_from_the_server() {
    // (configured capabilities, configured risk, effective risk). The fixture's `echo` claims
    // `readOnlyHint: true`; that never lowers anything.
    let table: [RiskCase; 5] = [
        (None, None, Risk::Execute),
        (None, Some(Risk::Read), Risk::Execute),
        (Some(&["filesystem.read"]), Some(Risk::Read), Risk::Read),
        (Some(&["network"]), Some(Risk::Read), Risk::Execute),
        (
            Some(&["no.such.capability"]),
            Some(Risk::Read),
            Risk::Execute,
        ),
    ];
    for (capabilities, risk, effective) in table {
        let tools = connect_fixture(capabilities, risk).await;
        let setup = setup(CoreSpec {
            extensions: tools,
            ..CoreSpec::mode(PermissionMode::Full)
        });
        let entry = setup.core.tools().get("mcp__fixture__echo").unwrap();
        assert_eq!(
            entry.facts().effective_risk,
            effective,
            "{capabilities:?} {risk:?}"
        );
        assert!(entry.is_deferred());
    }
}

#[tokio::test]
async fn deferred_until_search_tools_finds_it_then_callable_over_mcp() {
    let tools = connect_fixture(None, None).await;
    let setup = setup(CoreSpec {
        extensions: tools,
        ..CoreSpec::mode(PermissionMode::Full)
    });
    let connection = connect(&setup, TestClient::default()).await;

    let before = connection.tool_names().await;
    assert!(before.contains(&"search_tools".to_owned()), "{before:?}");
    assert!(
        !before.iter().any(|name| name.starts_with("mcp__")),
        "{before:?}"
    );

    let inactive = connection
        .call("mcp__fixture__echo", json!({"text": "too early"}))
        .await;
    assert_outcome(&inactive, true, "error", Some("inactive_tool"));
    assert_eq!(
        crate::support::structured(&inactive, "retryable"),
        &json!(true)
    );

    let search = connection
        .call("search_tools", json!({"query": "echo"}))
        .await;
    assert_outcome(&search, false, "success", None);
    assert!(
        text(&search).contains("mcp__fixture__echo"),
        "{}",
        text(&search)
    );
    tokio::time::timeout(
        Duration::from_secs(10),
        connection.handler.list_changed_notify.notified(),
    )
    .await
    .expect("notifications/tools/list_changed after the search");
    assert!(connection.handler.list_changed.load(Ordering::SeqCst) >= 1);

    let after = connection.tool_names().await;
    assert!(
        after.contains(&"mcp__fixture__echo".to_owned()),
        "{after:?}"
    );
    assert!(
        !after.contains(&"mcp__fixture__fail".to_owned()),
        "only the hits are activated: {after:?}"
    );

    let echo = connection
        .call(
            "mcp__fixture__echo",
            json!({"text": "hello through two servers"}),
        )
        .await;
    assert_outcome(&echo, false, "success", None);
    assert_eq!(text(&echo), "hello through two servers");

    // Arguments are validated against the server's schema before anything is forwarded.
    let invalid = connection
        .call("mcp__fixture__echo", json!({"text": 3}))
        .await;
    assert_outcome(&invalid, true, "error", Some("invalid_arguments"));
}

#[tokio::test]
async fn calls_through_the_core_pipeline_map_results_and_the_environment_allow_list() {
    let tools = connect_fixture(None, None).await;
    let setup = setup(CoreSpec {
        extensions: tools,
        ..CoreSpec::mode(PermissionMode::Full)
    });
    let session = setup.core.open_session(None).unwrap();
    let call = |id: &str, name: &str, arguments: serde_json::Value| ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    };
    let outcome = session
        .run_turn(
            vec![call(
                "c1",
                "search_tools",
                json!({"query": "fixture", "limit": 10}),
            )],
            &NullSink,
        )
        .await
        .unwrap();
    assert_eq!(outcome.results[0].1.status(), ToolStatus::Success);
    session.model_request(&NullSink).unwrap();

    // (call, status, code, content); CARGO_PKG_NAME is allow-listed, CARGO_MANIFEST_DIR is not.
    let table = [
        (
            call(
                "c2",
                "mcp__fixture__getenv",
                json!({"name": "CARGO_PKG_NAME"}),
            ),
            ToolStatus::Success,
            None,
            "clawsmith-mcp",
        ),
        (
            call(
                "c3",
                "mcp__fixture__getenv",
                json!({"name": "CARGO_MANIFEST_DIR"}),
            ),
            ToolStatus::Success,
            None,
            "(unset)",
        ),
        (
            call("c4", "mcp__fixture__fail", json!({})),
            ToolStatus::Error,
            Some("tool_failed"),
            "Error: it failed on purpose",
        ),
    ];
    assert_eq!(
        std::env::var("CARGO_PKG_NAME").as_deref(),
        Ok("clawsmith-mcp")
    );
    for (call, status, code, content) in table {
        let name = call.name.clone();
        let outcome = session.run_turn(vec![call], &NullSink).await.unwrap();
        let result = &outcome.results[0].1;
        assert_eq!(result.status(), status, "{name}: {result:?}");
        assert_eq!(result.code().map(|c| c.as_str()), code, "{name}");
        assert_eq!(result.content, content, "{name}");
    }
}

#[tokio::test]
async fn calls_to_external_servers_carry_their_execute_tool_span_in_meta() {
    let sink = Arc::new(MemorySink::default());
    // (tracer, whether the server sees a traceparent)
    let cases = [(Tracer::new(sink.clone()), true), (Tracer::noop(), false)];
    for (tracer, traced) in cases {
        let setup = setup(CoreSpec {
            extensions: connect_fixture(None, None).await,
            tracer,
            ..CoreSpec::mode(PermissionMode::Full)
        });
        let session = setup.core.open_session(None).unwrap();
        let search = ToolCall {
            id: "s1".to_owned(),
            name: "search_tools".to_owned(),
            arguments: json!({"query": "trace_meta"}).to_string(),
        };
        session.run_turn(vec![search], &NullSink).await.unwrap();
        session.model_request(&NullSink).unwrap();
        let call = ToolCall {
            id: "m1".to_owned(),
            name: "mcp__fixture__trace_meta".to_owned(),
            arguments: "{}".to_owned(),
        };
        let outcome = session.run_turn(vec![call], &NullSink).await.unwrap();
        let result = &outcome.results[0].1;
        assert_eq!(result.status(), ToolStatus::Success, "{result:?}");
        let seen: serde_json::Value = serde_json::from_str(&result.content).unwrap();
        if !traced {
            assert_eq!(seen, json!({"traceparent": null, "tracestate": null}));
            continue;
        }
        let spans = sink.spans();
        let span = spans
            .iter()
            .find(|span| span.name == "execute_tool mcp__fixture__trace_meta")
            .unwrap();
        assert_eq!(
            seen["traceparent"],
            format!(
                "00-{}-{}-01",
                span.context.trace_id.to_hex(),
                span.context.span_id.to_hex()
            )
        );
        assert_eq!(seen["tracestate"], json!(null));
    }
}

#[tokio::test]
async fn execute_floor_means_read_only_and_accept_edits_refuse_without_asking() {
    for mode in [PermissionMode::ReadOnly, PermissionMode::AcceptEdits] {
        let tools = connect_fixture(None, None).await;
        let setup = setup(CoreSpec {
            extensions: tools,
            ..CoreSpec::mode(mode)
        });
        let session = setup.core.open_session(None).unwrap();
        let search = ToolCall {
            id: "s".to_owned(),
            name: "search_tools".to_owned(),
            arguments: json!({"query": "echo"}).to_string(),
        };
        session.run_turn(vec![search], &NullSink).await.unwrap();
        session.model_request(&NullSink).unwrap();
        let echo = ToolCall {
            id: "e".to_owned(),
            name: "mcp__fixture__echo".to_owned(),
            arguments: json!({"text": "x"}).to_string(),
        };
        let outcome = session.run_turn(vec![echo], &NullSink).await.unwrap();
        let result = &outcome.results[0].1;
        assert_eq!(result.status(), ToolStatus::Denied, "{mode:?}: {result:?}");
    }
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_left_out() {
    let mut missing = fixture(None, None);
    missing.name = "missing".to_owned();
    missing.command = "/nonexistent/clawsmith-no-such-server".to_owned();
    // A program that is not an MCP server: the handshake fails.
    let mut not_mcp = fixture(None, None);
    not_mcp.name = "not-mcp".to_owned();
    not_mcp.command = "/bin/true".to_owned();
    let startup = connect_servers(
        &McpConfig {
            mcp_servers: vec![missing, fixture(None, None), not_mcp],
        },
        &sandbox(),
    )
    .await;
    let [spawn, connect] = &startup.problems[..] else {
        panic!("two problems: {:?}", startup.problems)
    };
    assert!(matches!(spawn, McpError::Spawn { .. }), "{spawn:?}");
    assert!(spawn.to_string().contains("`missing`"), "{spawn}");
    assert!(matches!(connect, McpError::Connect { .. }), "{connect:?}");
    assert!(connect.to_string().contains("`not-mcp`"), "{connect}");
    // The well-behaved server between them still loads.
    assert_eq!(
        startup.tools.len(),
        FIXTURE_TOOLS,
        "{:?}",
        tool_names(&startup)
    );
}

fn tool_names(startup: &McpStartup) -> Vec<&str> {
    startup.tools.iter().map(|tool| tool.tool.name()).collect()
}

#[test]
fn tool_names_are_namespaced_and_sanitized() {
    // (server, remote tool, table name)
    let table = [
        ("github", "create_issue", "mcp__github__create_issue"),
        ("fs", "read.file", "mcp__fs__read_file"),
        ("fs", "with space/é", "mcp__fs__with_space__"),
    ];
    for (server, remote, name) in table {
        assert_eq!(tool_name(server, remote), name);
    }
    assert_eq!(tool_name("s", &"x".repeat(300)).len(), 128);
}

#[test]
fn tools_dropped_after_their_runtime_do_not_panic() {
    // A host may drop the core (and with it the connections) after its runtime is gone.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = runtime.block_on(connect_fixture(None, None));
    drop(runtime);
    drop(tools);
}

#[tokio::test]
async fn a_server_that_died_answers_tool_failed() {
    let tools = connect_fixture(None, None).await;
    let echo = tool(&tools, "mcp__fixture__echo");
    let exit = tool(&tools, "mcp__fixture__exit");
    drop(tools);
    let result = run(echo.as_ref(), json!({"text": "alive"}), authorized()).await;
    assert_eq!(
        result.content, "alive",
        "the connection outlives the dropped tools"
    );
    let result = run(exit.as_ref(), json!({}), authorized()).await;
    assert_eq!(
        result.code().map(|c| c.as_str()),
        Some("tool_failed"),
        "{result:?}"
    );
    let result = run(echo.as_ref(), json!({"text": "dead"}), authorized()).await;
    assert_eq!(
        result.code().map(|c| c.as_str()),
        Some("tool_failed"),
        "{result:?}"
    );
    assert!(result.content.contains("fixture"), "{}", result.content);
}

#[tokio::test]
async fn unauthorized_calls_are_refused_before_forwarding() {
    let tools = connect_fixture(None, None).await;
    let echo = tools
        .iter()
        .find(|tool| tool.tool.name() == "mcp__fixture__echo")
        .unwrap()
        .tool
        .clone();
    // Dropping the other tools keeps the connection: it lives as long as any tool.
    drop(tools);
    let context = clawsmith_protocol::ToolExecutionContext::new("s", "t", "c");
    // Unauthorized: refused before anything is sent.
    let output = echo.execute(json!({"text": "x"}), context).await;
    let clawsmith_protocol::ToolOutput::Result(result) = output else {
        panic!("a typed result")
    };
    assert_eq!(result.code().map(|c| c.as_str()), Some("permission_denied"));
}

/// A hostile fixture server (`clawsmith-mcp-fixture MODE`) named after its mode.
fn hostile(mode: &str) -> McpServerConfig {
    let mut server = fixture(None, None);
    server.name = mode.to_owned();
    server.args = vec![mode.to_owned()];
    server
}

/// Connects `servers`; a harness deadline turns a hang into a failure (never a timing check).
async fn connect_all(servers: Vec<McpServerConfig>) -> McpStartup {
    let config = McpConfig {
        mcp_servers: servers,
    };
    tokio::time::timeout(
        Duration::from_secs(120),
        connect_servers(&config, &sandbox()),
    )
    .await
    .expect("start-up finished (harness deadline)")
}

#[tokio::test]
async fn servers_that_never_answer_start_up_are_left_out_the_rest_loads() {
    // (mode, the step named in the report)
    let table = [("mute", "initialize"), ("mute-list", "tools/list")];
    for (mode, step) in table {
        let mut silent = hostile(mode);
        silent.startup_timeout_ms = Some(300);
        let startup = connect_all(vec![silent, fixture(None, None)]).await;
        let [problem] = &startup.problems[..] else {
            panic!("{mode}: one problem: {:?}", startup.problems)
        };
        assert!(matches!(problem, McpError::Timeout { .. }), "{problem:?}");
        let message = problem.to_string();
        assert!(message.contains(&format!("`{mode}`")), "{message}");
        assert!(message.contains(step), "{message}");
        assert!(message.contains("startup_timeout_ms"), "{message}");
        assert_eq!(
            startup.tools.len(),
            FIXTURE_TOOLS,
            "{mode}: {:?}",
            tool_names(&startup)
        );
    }
}

#[tokio::test]
async fn listing_loops_are_cut_short_and_reported() {
    // (mode, tools kept, words of the report)
    let table = [
        ("endless-cursor", clawsmith_mcp::MAX_LIST_PAGES, "pages"),
        ("repeated-cursor", 2, "repeated the cursor"),
    ];
    for (mode, kept, words) in table {
        let startup = connect_all(vec![hostile(mode)]).await;
        assert_eq!(startup.tools.len(), kept, "{mode}");
        let [problem] = &startup.problems[..] else {
            panic!("{mode}: one problem: {:?}", startup.problems)
        };
        assert!(matches!(problem, McpError::Listing { .. }), "{problem:?}");
        assert!(problem.to_string().contains(words), "{problem}");
    }
}

#[tokio::test]
async fn a_listing_over_the_line_cap_is_reported_and_the_server_left_out() {
    let startup = connect_all(vec![hostile("huge-list"), fixture(None, None)]).await;
    let [problem] = &startup.problems[..] else {
        panic!("one problem: {:?}", startup.problems)
    };
    assert!(matches!(problem, McpError::Connect { .. }), "{problem:?}");
    let message = problem.to_string();
    assert!(
        message.contains("huge-list") && message.contains("16 MiB"),
        "{message}"
    );
    assert_eq!(
        startup.tools.len(),
        FIXTURE_TOOLS,
        "{:?}",
        tool_names(&startup)
    );
}

#[tokio::test]
async fn calls_time_out_and_oversized_answers_are_clear_errors() {
    // The same hostile server twice: with a short call timeout for `slow`, with the default
    // one for the 17 MiB answer (which takes a while to write and discard).
    let mut short = hostile("huge-answer");
    short.name = "short".to_owned();
    short.call_timeout_ms = Some(300);
    let startup = connect_all(vec![short, hostile("huge-answer")]).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    // (tool, code, words of the message): in this order, so the last ones show the connection
    // survived the others.
    let table = [
        ("mcp__short__slow", "timeout", "call_timeout_ms"),
        ("mcp__short__small", "", "small answer"),
        ("mcp__huge-answer__big", "tool_failed", "16 MiB line cap"),
        ("mcp__huge-answer__small", "", "small answer"),
    ];
    for (name, code, words) in table {
        let result = tokio::time::timeout(
            Duration::from_secs(60),
            run(tool(&startup.tools, name).as_ref(), json!({}), authorized()),
        )
        .await
        .expect("the call ended (harness deadline)");
        assert_eq!(
            result.code().map_or("", |c| c.as_str()),
            code,
            "{name}: {result:?}"
        );
        assert!(result.content.contains(words), "{name}: {}", result.content);
    }
}

/// `call_timeout_ms` is how long a call may go without its answer or progress: a server that
/// reports progress keeps a long call alive, one that stays silent as long is timed out, and
/// `call_max_ms` ends a call whatever its progress.
#[tokio::test]
async fn progress_keeps_a_call_alive_until_its_hard_cap() {
    let mut server = fixture(Some(&["filesystem.read"]), None);
    server.call_timeout_ms = Some(500);
    server.call_max_ms = Some(2_500);
    let startup = connect_all(vec![server]).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let progress = tool(&startup.tools, "mcp__fixture__progress");
    // (arguments, code, words of the message)
    let table = [
        (json!({"ms": 1_500, "every_ms": 100}), "", "done after"),
        (
            json!({"ms": 1_500, "every_ms": 0}),
            "timeout",
            "call_timeout_ms",
        ),
        (
            json!({"ms": 5_000, "every_ms": 100}),
            "timeout",
            "call_max_ms",
        ),
        (json!({"ms": 100, "every_ms": 0}), "", "done after 0"),
    ];
    for (arguments, code, words) in table {
        let result = tokio::time::timeout(
            Duration::from_secs(30),
            run(progress.as_ref(), arguments.clone(), authorized()),
        )
        .await
        .expect("the call ended (harness deadline)");
        assert_eq!(
            result.code().map_or("", |c| c.as_str()),
            code,
            "{arguments}: {result:?}"
        );
        assert!(
            result.content.contains(words),
            "{arguments}: {}",
            result.content
        );
    }
}

#[tokio::test]
async fn colliding_names_become_distinct_and_unusable_tools_are_reported() {
    let startup = connect_all(vec![hostile("collisions")]).await;
    let names = tool_names(&startup);
    let long = "x".repeat(130);
    // Each colliding tool gets a suffix hashed from its own remote name: the same on every run.
    let expected = [
        ("a.b", tool_suffixed("a_b", "a.b")),
        ("a/b", tool_suffixed("a_b", "a/b")),
        ("a_b", tool_suffixed("a_b", "a_b")),
        ("plain", "mcp__collisions__plain".to_owned()),
        (
            &format!("{long}1")[..],
            tool_suffixed(&long, &format!("{long}1")),
        ),
        (
            &format!("{long}2")[..],
            tool_suffixed(&long, &format!("{long}2")),
        ),
        ("same", "mcp__collisions__same".to_owned()),
    ];
    let mut distinct = names.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), names.len(), "{names:?}");
    assert_eq!(names.len(), expected.len(), "{names:?}");
    for ((remote, name), tool) in expected.iter().zip(&startup.tools) {
        assert_eq!(tool.tool.name(), name, "{remote}");
        assert!(name.len() <= 128, "{name}");
        let mcp = tool.tool.deferred().unwrap();
        assert!(mcp.aliases.contains(&(*remote).to_owned()), "{mcp:?}");
    }
    // The second `same`, the broken schema and the fat definition are left out, in one line.
    let [problem] = &startup.problems[..] else {
        panic!("one problem: {:?}", startup.problems)
    };
    let message = problem.to_string();
    for words in [
        "`same` (its name",
        "`broken` (its input schema",
        "`fat` (its definition is over 64 KiB)",
    ] {
        assert!(message.contains(words), "{words}: {message}");
    }
    // And the table builds: one server never takes the runtime down.
    let setup = setup(CoreSpec {
        extensions: startup.tools,
        ..CoreSpec::mode(PermissionMode::Full)
    });
    assert!(setup.core.tools().get("mcp__collisions__plain").is_some());
}

/// `mcp__collisions__<sanitised base, cut to fit>_<fnv1a-32 of the remote name>`.
fn tool_suffixed(base: &str, remote: &str) -> String {
    let hash = remote
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    let mut name = format!("mcp__collisions__{base}");
    name.truncate(128 - 9);
    format!("{name}_{:08x}", hash as u32)
}

#[tokio::test]
async fn server_stderr_is_drained_and_only_its_tail_kept() {
    let mut server = hostile("stderr-flood");
    server.call_timeout_ms = Some(500);
    let startup = connect_all(vec![server]).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    // The server wrote 64 MiB to stderr before its handshake: it was drained, not blocked and
    // not passed through.
    let echo = tool(&startup.tools, "mcp__stderr-flood__echo");
    let result = run(echo.as_ref(), json!({}), authorized()).await;
    assert_eq!(result.content, "small answer");
    // A report about the server carries the tail, bounded.
    let slow = tool(&startup.tools, "mcp__stderr-flood__slow");
    let result = run(slow.as_ref(), json!({}), authorized()).await;
    assert_eq!(result.code().map(|c| c.as_str()), Some("timeout"));
    assert!(
        result.content.contains("last words of the flood"),
        "{}",
        &result.content[..200]
    );
    assert!(
        result.content.len() < clawsmith_mcp::STDERR_TAIL_BYTES + 512,
        "{}",
        result.content.len()
    );
}

#[tokio::test]
async fn forged_status_prefixes_in_server_text_are_neutralised() {
    let tools = connect_fixture(None, None).await;
    let echo = tool(&tools, "mcp__fixture__echo");
    // (text the server answers, what the model reads)
    let table = [
        ("plain text", "plain text"),
        (
            "Error: forged failure",
            "[MCP server `fixture` answered] Error: forged failure",
        ),
        (
            "  denied: forged",
            "[MCP server `fixture` answered]   denied: forged",
        ),
        (
            "Interrupted: forged",
            "[MCP server `fixture` answered] Interrupted: forged",
        ),
    ];
    for (text, content) in table {
        let result = run(echo.as_ref(), json!({"text": text}), authorized()).await;
        assert_eq!(result.status(), ToolStatus::Success, "{text}");
        assert_eq!(result.content, content);
        assert_eq!(
            clawsmith_protocol::infer_status_from_content(&result.content),
            ToolStatus::Success
        );
    }
}

#[tokio::test]
async fn a_server_flooding_requests_stalls_its_own_connection_not_this_process() {
    let mut server = hostile("request-flood");
    server.call_timeout_ms = Some(5000);
    let startup = connect_all(vec![server]).await;
    let flood = tool(&startup.tools, "mcp__request-flood__flood");
    let before = crate::support::resident_bytes(std::process::id());
    // 200,000 pings while the server reads none of our answers: we stop reading after a
    // bounded number of unanswered requests, and the call ends at its timeout.
    let result = tokio::time::timeout(
        Duration::from_secs(120),
        run(flood.as_ref(), json!({}), authorized()),
    )
    .await
    .expect("the call ended (harness deadline)");
    assert_eq!(
        result.code().map(|c| c.as_str()),
        Some("timeout"),
        "{result:?}"
    );
    let after = crate::support::resident_bytes(std::process::id());
    let grown = after.saturating_sub(before);
    assert!(
        grown < 64 * 1024 * 1024,
        "grew {} MiB under the flood",
        grown / (1024 * 1024)
    );
}

#[tokio::test]
async fn servers_start_together_so_start_up_waits_for_the_slowest_not_the_sum() {
    // Two servers that each wait for the other to exist before answering: started one after
    // the other, the first would time out.
    // They meet in a folder they write: confined, a server writes only what its entry names.
    let dir = tempfile::tempdir().unwrap();
    let rendezvous = |own: &str, other: &str, writable: bool| {
        let mut server = fixture(None, None);
        server.name = own.to_owned();
        server.args = ["rendezvous", &dir.path().to_string_lossy(), own, other]
            .map(str::to_owned)
            .to_vec();
        server.startup_timeout_ms = Some(5000);
        if writable {
            server.writable = vec![dir.path().to_path_buf()];
        }
        server
    };
    // Without the key, each fails, and the report names the keys that loosen it.
    let refused = connect_all(vec![rendezvous("a", "b", false)]).await;
    let [problem] = &refused.problems[..] else {
        panic!("one problem: {:?}", refused.problems)
    };
    assert!(
        problem.to_string().contains("it runs confined")
            && problem.to_string().contains("`writable = [...]`"),
        "{problem}"
    );
    let startup = connect_all(vec![rendezvous("a", "b", true), rendezvous("b", "a", true)]).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let names = tool_names(&startup);
    assert_eq!(names.len(), 2 * FIXTURE_TOOLS, "{names:?}");
    assert!(
        names[..FIXTURE_TOOLS]
            .iter()
            .all(|name| name.starts_with("mcp__a__")),
        "{names:?}"
    );
    assert!(
        names[FIXTURE_TOOLS..]
            .iter()
            .all(|name| name.starts_with("mcp__b__")),
        "{names:?}"
    );
}
