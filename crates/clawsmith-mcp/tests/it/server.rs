//! The MCP server against a real rmcp client.

use std::sync::atomic::Ordering;

use clawsmith_mcp::{NO_ELICITATION, SERVER_NAME, SERVER_VERSION};
use clawsmith_security::PermissionMode;
use rmcp::model::ElicitationAction;
use serde_json::json;

use crate::support::{CoreSpec, TestClient, assert_outcome, connect, setup, structured, text};

#[tokio::test]
async fn server_info_names_clawsmith_and_its_version() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let connection = connect(&setup, TestClient::default()).await;
    let info = connection.client.peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, SERVER_NAME);
    assert_eq!(info.server_info.as_ref().unwrap().version, SERVER_VERSION);
    assert_eq!(SERVER_VERSION, env!("CARGO_PKG_VERSION"));
    let tools = info.capabilities.tools.as_ref().unwrap();
    assert_eq!(tools.list_changed, Some(true));
}

#[tokio::test]
async fn tools_list_is_the_frozen_table_with_annotations_from_effective_risk() {
    let setup = setup(CoreSpec::mode(PermissionMode::Full));
    let connection = connect(&setup, TestClient::default()).await;
    let tools = connection.client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    let expected: Vec<&str> = setup.core.tools().names();
    assert_eq!(names, expected, "every shown tool, in table order");
    // No deferred tools, so no search_tools.
    assert!(!names.contains(&"search_tools"));
    // (tool, readOnlyHint, destructiveHint)
    let table = [
        ("read_file", true, false),
        ("search_files", true, false),
        ("glob_files", true, false),
        ("write_file", false, true),
        ("edit_file", false, true),
        ("rename_file", false, true),
        ("delete_file", false, true),
        ("run_command", false, true),
        ("todo_list", true, false),
        ("read_artifact", true, false),
    ];
    for (name, read_only, destructive) in table {
        let tool = tools
            .iter()
            .find(|tool| tool.name == name)
            .unwrap_or_else(|| panic!("{name} is listed"));
        let annotations = tool.annotations.as_ref().unwrap();
        assert_eq!(annotations.read_only_hint, Some(read_only), "{name}");
        assert_eq!(annotations.destructive_hint, Some(destructive), "{name}");
        let entry = setup.core.tools().get(name).unwrap();
        assert_eq!(
            serde_json::Value::Object(tool.input_schema.as_ref().clone()),
            *entry.input_schema(),
            "{name}: inputSchema is the table's schema"
        );
        assert_eq!(
            tool.description.as_deref(),
            Some(entry.tool().description())
        );
    }
}

#[tokio::test]
async fn each_file_tool_runs_through_the_core_in_one_session() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let connection = connect(&setup, TestClient::default()).await;
    let root = setup.workspace.path();

    let read = connection.call("read_file", json!({"path": "a.txt"})).await;
    assert_outcome(&read, false, "success", None);
    assert!(text(&read).contains("beta"), "{}", text(&read));

    let search = connection
        .call("search_files", json!({"query": "beta"}))
        .await;
    assert_outcome(&search, false, "success", None);
    assert!(text(&search).contains("a.txt"), "{}", text(&search));

    let glob = connection
        .call("glob_files", json!({"pattern": "**/*.rs"}))
        .await;
    assert_outcome(&glob, false, "success", None);
    assert!(text(&glob).contains("lib.rs"), "{}", text(&glob));

    let write = connection
        .call("write_file", json!({"path": "new.txt", "content": "one\n"}))
        .await;
    assert_outcome(&write, false, "success", None);
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "one\n"
    );

    let edit = connection
        .call(
            "edit_file",
            json!({"path": "new.txt", "oldText": "one", "newText": "two"}),
        )
        .await;
    assert_outcome(&edit, false, "success", None);
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "two\n"
    );

    let rename = connection
        .call("rename_file", json!({"from": "new.txt", "to": "moved.txt"}))
        .await;
    assert_outcome(&rename, false, "success", None);
    assert!(root.join("moved.txt").exists() && !root.join("new.txt").exists());

    let delete = connection
        .call("delete_file", json!({"path": "moved.txt"}))
        .await;
    assert_outcome(&delete, false, "success", None);
    assert!(!root.join("moved.txt").exists());

    // One session for the whole connection, one turn per request, each with a checkpoint.
    let results = [&read, &search, &glob, &write, &edit, &rename, &delete];
    let mut turns = Vec::new();
    for result in results {
        assert_eq!(
            structured(result, "sessionId"),
            connection.session_id.as_str()
        );
        turns.push(structured(result, "turnId").as_str().unwrap().to_owned());
    }
    let mut distinct = turns.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), turns.len(), "each request is its own turn");
    let checkpoints = setup
        .core
        .store()
        .checkpoints(&connection.session_id)
        .unwrap();
    let write_turn = structured(&write, "turnId").as_str().unwrap();
    assert!(
        checkpoints
            .iter()
            .any(|checkpoint| checkpoint.turn_id == write_turn),
        "the write's turn has a checkpoint that undo can revert: {checkpoints:?}"
    );
}

#[tokio::test]
async fn session_state_survives_across_calls() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let connection = connect(&setup, TestClient::default()).await;
    let todos =
        json!({"todos": [{"id": "1", "content": "ship the MCP server", "status": "in_progress"}]});
    let write = connection.call("todo_write", todos).await;
    assert_outcome(&write, false, "success", None);
    let list = connection.call("todo_list", json!({})).await;
    assert_outcome(&list, false, "success", None);
    assert!(
        text(&list).contains("ship the MCP server"),
        "{}",
        text(&list)
    );
}

#[tokio::test]
async fn run_command_in_full_mode_and_its_artifact_read_back() {
    let setup = setup(CoreSpec::mode(PermissionMode::Full));
    let connection = connect(&setup, TestClient::default()).await;
    let echo = connection
        .call("run_command", json!({"command": "echo hello-from-mcp"}))
        .await;
    assert_outcome(&echo, false, "success", None);
    assert!(text(&echo).contains("hello-from-mcp"), "{}", text(&echo));

    // Over 50 KB of output: the message keeps a preview, the full text goes to an artifact.
    let big = connection
        .call("run_command", json!({"command": "seq 1 20000"}))
        .await;
    assert_outcome(&big, false, "success", None);
    let artifact = structured(&big, "artifact");
    let artifact_id = artifact["artifactId"]
        .as_str()
        .expect("an artifact reference");
    assert!(
        artifact["bytes"].as_u64().unwrap() > 50 * 1024,
        "{artifact}"
    );
    assert!(
        !text(&big).contains("\n12345\n"),
        "the middle is not in the preview"
    );

    let read = connection
        .call(
            "read_artifact",
            json!({"artifactId": artifact_id, "query": "12345"}),
        )
        .await;
    assert_outcome(&read, false, "success", None);
    assert!(text(&read).contains("12345"), "{}", text(&read));
}

/// One row per error kind: (mode, tool, arguments, status, code).
#[tokio::test]
async fn every_error_kind_sets_is_error_with_its_code() {
    let table: [(PermissionMode, &str, serde_json::Value, &str, &str); 6] = [
        (
            PermissionMode::Full,
            "no_such_tool",
            json!({}),
            "error",
            "unknown_tool",
        ),
        (
            PermissionMode::Full,
            "read_file",
            json!({}),
            "error",
            "invalid_arguments",
        ),
        (
            PermissionMode::Full,
            "read_file",
            json!({"path": 7}),
            "error",
            "invalid_arguments",
        ),
        (
            PermissionMode::ReadOnly,
            "write_file",
            json!({"path": "x.txt", "content": "x"}),
            "denied",
            "permission_denied",
        ),
        (
            PermissionMode::Full,
            "run_command",
            json!({"command": "rm -rf /"}),
            "denied",
            "command_blocked",
        ),
        (
            PermissionMode::Full,
            "read_file",
            json!({"path": "../outside.txt"}),
            "error",
            "tool_failed",
        ),
    ];
    for (mode, tool, arguments, status, code) in table {
        let setup = setup(CoreSpec::mode(mode));
        let connection = connect(&setup, TestClient::default()).await;
        let result = connection.call(tool, arguments.clone()).await;
        assert_outcome(&result, true, status, Some(code));
        assert!(
            !text(&result).is_empty(),
            "{tool} {arguments}: the model reads why"
        );
        assert!(!setup.workspace.path().join("x.txt").exists());
    }
}

#[tokio::test]
async fn ask_uses_elicitation_when_the_client_declares_it() {
    // (client answer, expected isError, expected content of the file)
    let table = [
        (ElicitationAction::Accept, false, Some("approved\n")),
        (ElicitationAction::Decline, true, None),
        (ElicitationAction::Cancel, true, None),
    ];
    for (answer, is_error, content) in table {
        let setup = setup(CoreSpec {
            approver: true,
            ..CoreSpec::mode(PermissionMode::Ask)
        });
        let handler = TestClient {
            elicitation: Some(answer.clone()),
            ..TestClient::default()
        };
        let connection = connect(&setup, handler).await;
        let result = connection
            .call(
                "write_file",
                json!({"path": "x.txt", "content": "approved\n"}),
            )
            .await;
        assert_eq!(result.is_error, Some(is_error), "{answer:?}: {result:?}");
        if is_error {
            assert_eq!(structured(&result, "code"), "permission_denied");
        }
        assert_eq!(connection.handler.elicitations.load(Ordering::SeqCst), 1);
        let written = std::fs::read_to_string(setup.workspace.path().join("x.txt")).ok();
        assert_eq!(written.as_deref(), content, "{answer:?}");
        // A read never asks.
        connection.call("read_file", json!({"path": "a.txt"})).await;
        assert_eq!(connection.handler.elicitations.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn without_elicitation_the_mode_decides() {
    let setup = setup(CoreSpec {
        approver: true,
        ..CoreSpec::mode(PermissionMode::AcceptEdits)
    });
    let connection = connect(&setup, TestClient::default()).await;
    // accept-edits: edits run, commands need approval nobody can give.
    let write = connection
        .call("write_file", json!({"path": "x.txt", "content": "x"}))
        .await;
    assert_outcome(&write, false, "success", None);
    let command = connection
        .call("run_command", json!({"command": "echo hi"}))
        .await;
    assert_outcome(&command, true, "denied", Some("permission_denied"));
    assert!(
        text(&command).contains(NO_ELICITATION),
        "{}",
        text(&command)
    );
    assert_eq!(connection.handler.elicitations.load(Ordering::SeqCst), 0);
}

/// Waits (without a deadline of its own: the test harness has one) until `predicate` holds for
/// the session's stored events.
async fn wait_for_events(
    setup: &crate::support::Setup,
    session_id: &str,
    predicate: impl Fn(&[clawsmith_protocol::Event]) -> bool,
) -> Vec<clawsmith_protocol::Event> {
    loop {
        let events = setup.core.store().events(session_id).unwrap();
        if predicate(&events) {
            return events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_cancelled_request_cancels_the_running_call() {
    use clawsmith_protocol::{EventPayload, ToolStatus};
    let setup = setup(CoreSpec::mode(PermissionMode::Full));
    let connection = std::sync::Arc::new(connect(&setup, TestClient::default()).await);
    let caller = connection.clone();
    let running = tokio::spawn(async move {
        caller
            .call("run_command", json!({"command": "sleep 30"}))
            .await
    });
    wait_for_events(&setup, &connection.session_id, |events| {
        events
            .iter()
            .any(|event| matches!(event.payload, EventPayload::ToolStarted(_)))
    })
    .await;
    // Dropping the request future sends `notifications/cancelled`.
    running.abort();
    let events = wait_for_events(&setup, &connection.session_id, |events| {
        events
            .iter()
            .any(|event| matches!(event.payload, EventPayload::TurnCompleted(_)))
    })
    .await;
    let completed = events
        .iter()
        .find_map(|event| match &event.payload {
            EventPayload::ToolCompleted(done) => Some(done),
            _ => None,
        })
        .unwrap();
    assert_eq!(completed.status, ToolStatus::Cancelled, "{completed:?}");
    // The connection still serves.
    let read = connection.call("read_file", json!({"path": "a.txt"})).await;
    assert_outcome(&read, false, "success", None);
}

#[tokio::test]
async fn concurrent_requests_become_separate_serial_turns() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let connection = connect(&setup, TestClient::default()).await;
    let calls = (0..6).map(|index| {
        connection.call(
            "write_file",
            json!({"path": format!("f{index}.txt"), "content": format!("{index}\n")}),
        )
    });
    let results = futures_join_all(calls).await;
    let mut turns: Vec<String> = results
        .iter()
        .map(|result| {
            assert_outcome(result, false, "success", None);
            structured(result, "turnId").as_str().unwrap().to_owned()
        })
        .collect();
    turns.sort();
    turns.dedup();
    assert_eq!(turns.len(), 6);
    // Each turn's checkpoint holds exactly its own file: undo of one never touches another.
    for checkpoint in setup
        .core
        .store()
        .checkpoints(&connection.session_id)
        .unwrap()
    {
        let changes = setup
            .core
            .store()
            .change_list(&connection.session_id, &checkpoint.turn_id)
            .unwrap();
        assert_eq!(changes.len(), 1, "{changes:?}");
    }
}

/// Runs the futures concurrently on this task and returns their outputs in order.
async fn futures_join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let mut set = Vec::new();
    for future in futures {
        set.push(Box::pin(future));
    }
    let mut outputs: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (index, future) in set.iter_mut().enumerate() {
            if outputs[index].is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(output) => outputs[index] = Some(output),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

#[tokio::test]
async fn a_session_can_be_continued_by_a_later_server() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let first = connect(&setup, TestClient::default()).await;
    let todos = json!({"todos": [{"id": "1", "content": "remember me", "status": "pending"}]});
    assert_outcome(
        &first.call("todo_write", todos).await,
        false,
        "success",
        None,
    );
    let session_id = first.session_id.clone();
    drop(first);

    let second = crate::support::connect_with(
        &setup,
        TestClient::default(),
        clawsmith_mcp::ServerOptions {
            session_id: Some(session_id.clone()),
            ..clawsmith_mcp::ServerOptions::default()
        },
    )
    .await;
    assert_eq!(second.session_id, session_id);
    let list = second.call("todo_list", json!({})).await;
    assert!(text(&list).contains("remember me"), "{}", text(&list));
}

/// A client on the stateless 2026-07-28 revision (`server/discover`, per-request metadata).
async fn connect_stateless(
    setup: &crate::support::Setup,
    handler: TestClient,
) -> rmcp::service::RunningService<rmcp::RoleClient, TestClient> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let options = clawsmith_mcp::ServerOptions {
        approver: setup.approver.clone(),
        ..clawsmith_mcp::ServerOptions::default()
    };
    let server = clawsmith_mcp::ClawsmithServer::new(setup.core.clone(), options).unwrap();
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(server.serve_lines(read, write));
    handler
        .serve_with_lifecycle(
            client_io,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

fn write_params(content: &str) -> rmcp::model::CallToolRequestParams {
    let serde_json::Value::Object(arguments) = json!({"path": "x.txt", "content": content}) else {
        unreachable!()
    };
    rmcp::model::CallToolRequestParams::new("write_file").with_arguments(arguments)
}

#[tokio::test]
async fn stateless_clients_are_asked_through_input_required_rounds() {
    // (declares elicitation, answer, expected isError, expected file, expected message part)
    let table = [
        (
            true,
            ElicitationAction::Accept,
            false,
            Some("round trip\n"),
            "",
        ),
        (true, ElicitationAction::Decline, true, None, "declined"),
        (false, ElicitationAction::Accept, true, None, NO_ELICITATION),
    ];
    for (declares, answer, is_error, content, message) in table {
        let setup = setup(CoreSpec {
            approver: true,
            ..CoreSpec::mode(PermissionMode::Ask)
        });
        let handler = TestClient {
            elicitation: declares.then(|| answer.clone()),
            ..TestClient::default()
        };
        let client = connect_stateless(&setup, handler.clone()).await;
        // The high-level helper drives the rounds through the handler.
        let result = client
            .call_tool(write_params("round trip\n"))
            .await
            .unwrap();
        assert_eq!(result.is_error, Some(is_error), "{answer:?}: {result:?}");
        assert!(text(&result).contains(message), "{}", text(&result));
        assert_eq!(
            handler.elicitations.load(Ordering::SeqCst),
            usize::from(declares)
        );
        let written = std::fs::read_to_string(setup.workspace.path().join("x.txt")).ok();
        assert_eq!(written.as_deref(), content, "{answer:?}");
    }
}

/// A core in `ask` mode with the eliciting approver, and a client that accepts every question.
fn asking_setup() -> (crate::support::Setup, TestClient) {
    let setup = setup(CoreSpec {
        approver: true,
        ..CoreSpec::mode(PermissionMode::Ask)
    });
    let handler = TestClient {
        elicitation: Some(ElicitationAction::Accept),
        ..TestClient::default()
    };
    (setup, handler)
}

#[tokio::test]
async fn a_round_trip_answer_only_counts_for_the_call_it_was_asked_about() {
    use rmcp::model::CallToolResponse;
    let (setup, handler) = asking_setup();
    let client = connect_stateless(&setup, handler).await;
    let accept = || {
        let mut responses = rmcp::model::InputResponses::new();
        responses.insert(
            clawsmith_mcp::APPROVAL_INPUT.to_owned(),
            json!({"action": "accept"}),
        );
        responses
    };
    let CallToolResponse::InputRequired(first) =
        client.call_tool_once(write_params("asked")).await.unwrap()
    else {
        panic!("the first round asks")
    };
    let token = first.request_state.clone().unwrap();
    assert!(
        first
            .input_requests
            .as_ref()
            .unwrap()
            .contains_key(clawsmith_mcp::APPROVAL_INPUT)
    );

    // (arguments of the retry, requestState, answered?) — a forged token or different
    // arguments only get asked again; nothing is written.
    let forged = client
        .call_tool_once(
            write_params("asked")
                .with_input_responses(accept())
                .with_request_state("forged"),
        )
        .await
        .unwrap();
    assert!(matches!(forged, CallToolResponse::InputRequired(_)));
    let other_arguments = client
        .call_tool_once(
            write_params("something else")
                .with_input_responses(accept())
                .with_request_state(token.clone()),
        )
        .await
        .unwrap();
    assert!(matches!(
        other_arguments,
        CallToolResponse::InputRequired(_)
    ));
    assert!(!setup.workspace.path().join("x.txt").exists());

    // The token was spent by the mismatched retry: even the right call is asked again.
    let spent = client
        .call_tool_once(
            write_params("asked")
                .with_input_responses(accept())
                .with_request_state(token),
        )
        .await
        .unwrap();
    let CallToolResponse::InputRequired(again) = spent else {
        panic!("a spent token asks again")
    };
    let answered = client
        .call_tool_once(
            write_params("asked")
                .with_input_responses(accept())
                .with_request_state(again.request_state.unwrap()),
        )
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = answered else {
        panic!("answered")
    };
    assert_outcome(&result, false, "success", None);
    assert_eq!(
        std::fs::read_to_string(setup.workspace.path().join("x.txt")).unwrap(),
        "asked"
    );
}

#[tokio::test]
async fn the_event_sink_sees_each_turn_as_it_happens() {
    let setup = setup(CoreSpec::mode(PermissionMode::AcceptEdits));
    let sink = std::sync::Arc::new(clawsmith_core::CollectingSink::new());
    let connection = crate::support::connect_with(
        &setup,
        TestClient::default(),
        clawsmith_mcp::ServerOptions {
            event_sink: Some(sink.clone()),
            ..clawsmith_mcp::ServerOptions::default()
        },
    )
    .await;
    connection.call("read_file", json!({"path": "a.txt"})).await;
    let kinds: Vec<&str> = sink
        .events()
        .iter()
        .map(|event| event.payload.kind())
        .skip_while(|kind| *kind != "turn.started")
        .collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "model.request",
            "tool.started",
            "tool.completed",
            "turn.completed"
        ]
    );
}

/// A client speaking raw lines to the server over a duplex pipe.
struct RawClient {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    read: tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
}

impl RawClient {
    async fn connect(setup: &crate::support::Setup) -> RawClient {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server = clawsmith_mcp::ClawsmithServer::new(
            setup.core.clone(),
            clawsmith_mcp::ServerOptions::default(),
        )
        .unwrap();
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(server.serve_lines(read, write));
        let (read, write) = tokio::io::split(client_io);
        RawClient {
            write,
            read: tokio::io::BufReader::new(read),
        }
    }

    async fn send(&mut self, line: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.write.write_all(line).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
    }

    /// The next answer (harness deadline: a missing answer fails instead of hanging).
    async fn answer(&mut self) -> serde_json::Value {
        use tokio::io::AsyncBufReadExt;
        let mut line = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(60),
            self.read.read_line(&mut line),
        )
        .await
        .expect("an answer (harness deadline)")
        .unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

fn initialize(id: u64) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    })
    .to_string()
}

#[tokio::test]
async fn every_bad_line_gets_its_json_rpc_error_and_the_connection_survives() {
    let setup = setup(CoreSpec::mode(PermissionMode::Full));
    let mut client = RawClient::connect(&setup).await;
    client.send(initialize(1).as_bytes()).await;
    assert_eq!(client.answer().await["id"], 1);
    client
        .send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    let over_cap = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(clawsmith_mcp::MAX_REQUEST_LINE_BYTES)
    );
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    // (line, error code, id of the answer)
    let table: Vec<(Vec<u8>, i64, serde_json::Value)> = vec![
        (b"garbage".to_vec(), -32700, json!(null)),
        (deep.into_bytes(), -32700, json!(null)),
        (
            br#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#.to_vec(),
            -32600,
            json!(null),
        ),
        (
            br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#.to_vec(),
            -32600,
            json!(4),
        ),
        (
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":["read_file"]}}"#
                .to_vec(),
            -32602,
            json!(5),
        ),
        (initialize(6).into_bytes(), -32600, json!(6)),
        (over_cap.into_bytes(), -32600, json!(null)),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"no/such/method"}"#.to_vec(),
            -32601,
            json!(7),
        ),
    ];
    for (line, code, id) in table {
        let shown = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        client.send(&line).await;
        let answer = client.answer().await;
        assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
        assert_eq!(answer["id"], id, "{shown}: {answer}");
    }
    // Still serving.
    client
        .send(br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}"#)
        .await;
    let answer = client.answer().await;
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

#[tokio::test]
async fn elicitation_answers_get_through_while_every_request_slot_is_taken() {
    let (setup, handler) = asking_setup();
    let connection = connect(&setup, handler).await;
    // As many calls as there are slots: each asks the client, whose answers need reading while
    // all the slots are taken by calls waiting for their turn.
    let calls = (0..clawsmith_mcp::MAX_UNANSWERED_REQUESTS).map(|index| {
        connection.call(
            "write_file",
            json!({"path": format!("f{index}.txt"), "content": "x"}),
        )
    });
    let results =
        tokio::time::timeout(std::time::Duration::from_secs(120), futures_join_all(calls))
            .await
            .expect("every call answered (harness deadline)");
    for result in &results {
        assert_outcome(result, false, "success", None);
    }
    assert_eq!(
        connection.handler.elicitations.load(Ordering::SeqCst),
        clawsmith_mcp::MAX_UNANSWERED_REQUESTS
    );
}

#[tokio::test]
async fn more_asking_calls_than_slots_are_answered_or_refused_busy_never_stuck() {
    let (setup, handler) = asking_setup();
    let connection = connect(&setup, handler).await;
    let calls = (0..clawsmith_mcp::MAX_UNANSWERED_REQUESTS + 8).map(|index| {
        let params = rmcp::model::CallToolRequestParams::new("write_file").with_arguments(
            json!({"path": format!("f{index}.txt"), "content": "x"})
                .as_object()
                .unwrap()
                .clone(),
        );
        connection.client.peer().call_tool(params)
    });
    let answers =
        tokio::time::timeout(std::time::Duration::from_secs(120), futures_join_all(calls))
            .await
            .expect("every call answered (harness deadline)");
    let mut succeeded = 0;
    for answer in answers {
        match answer {
            Ok(result) => {
                assert_outcome(&result, false, "success", None);
                succeeded += 1;
            }
            Err(rmcp::ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32000, "{error:?}");
                assert!(error.message.contains("Server busy"), "{error:?}");
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(succeeded >= 1);
}
