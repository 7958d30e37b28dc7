//! `clawsmith mcp --http` as a real process, spoken to over HTTP/1.1 from plain sockets: the
//! Streamable HTTP transport (initialize, tools/list, tools/call answered as event streams), its
//! turns undone through the CLI, two clients at once, a call that outlasts its client, and every
//! refusal of the guard — each leaving the workspace and the session as they were.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::Fixture;
use crate::http_client::{Reply, http};

const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `clawsmith mcp --http 127.0.0.1:0`.
struct HttpMcp {
    child: Child,
    port: u16,
    session: String,
}

impl HttpMcp {
    fn start(f: &Fixture, extra: &[&str]) -> HttpMcp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
            .arg("--state-dir")
            .arg(f.state())
            .args(["mcp", "--workspace"])
            .arg(f.ws())
            .args(["--mode", "full", "--http", "127.0.0.1:0"])
            .args(extra)
            .env_remove("CLAWSMITH_STATE_DIR")
            .env("CLAWSMITH_MCP_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let serving = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the server ended before serving"
            );
            if line.contains("serving http://") {
                break line.clone();
            }
        };
        // Keep reading stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        assert!(
            serving.contains("bearer token from $CLAWSMITH_MCP_TOKEN") && !serving.contains(TOKEN),
            "{serving}"
        );
        let port = serving
            .split("http://127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("{serving}"));
        let session = serving
            .split("(session ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap()
            .to_owned();
        HttpMcp {
            child,
            port,
            session,
        }
    }

    /// An MCP client: `initialize` and `notifications/initialized`; its session header.
    fn connect(&self) -> String {
        let reply = self.post(&[], &initialize());
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            message(&reply)["result"]["serverInfo"]["name"],
            "clawsmith",
            "{}",
            reply.body
        );
        let session = reply.header("mcp-session-id").expect("a session header");
        let notified = self.post(
            &[("Mcp-Session-Id", &session)],
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(notified.status, 202, "{}", notified.body);
        session
    }

    fn call(&self, client: &str, id: u64, tool: &str, arguments: Value) -> Value {
        let reply = self.post(
            &[("Mcp-Session-Id", client)],
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments}}),
        );
        assert_eq!(reply.status, 200, "{}", reply.body);
        message(&reply)["result"].clone()
    }

    /// A POST to /mcp with the token and the headers the transport asks for, plus `extra`.
    fn post(&self, extra: &[(&str, &str)], body: &Value) -> Reply {
        let auth = format!("Bearer {TOKEN}");
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        http(
            self.port,
            "POST",
            "/mcp",
            &headers,
            body.to_string().as_bytes(),
        )
    }
}

impl Drop for HttpMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "clawsmith-cli-test", "version": "0"}}})
}

/// The JSON-RPC message of an answer: the body, or the `data:` of an event stream.
fn message(reply: &Reply) -> Value {
    let text = reply
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find(|data| data.starts_with('{'))
        .unwrap_or(&reply.body);
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {}", reply.body))
}

#[test]
fn mcp_over_http_serves_the_guarded_table_and_its_turns_undo() {
    let f = Fixture::new();
    std::fs::write(f.ws().join("a.txt"), "hello over http\n").unwrap();
    let server = HttpMcp::start(&f, &[]);
    let client = server.connect();
    let listed = server.post(
        &[("Mcp-Session-Id", &client)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    let names: Vec<String> = message(&listed)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect();
    for expected in ["read_file", "write_file", "run_command", "start_command"] {
        assert!(names.iter().any(|name| name == expected), "{names:?}");
    }
    let read = server.call(&client, 2, "read_file", json!({"path": "a.txt"}));
    assert_eq!(read["isError"], false, "{read}");
    assert!(
        read["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello over http"),
        "{read}"
    );
    let written = server.call(
        &client,
        3,
        "write_file",
        json!({"path": "new.txt", "content": "made over http\n"}),
    );
    assert_eq!(written["isError"], false, "{written}");
    assert_eq!(written["structuredContent"]["sessionId"], server.session);
    let turn = written["structuredContent"]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        std::fs::read_to_string(f.ws().join("new.txt")).unwrap(),
        "made over http\n"
    );
    // The server keeps running; the CLI undoes the turn in the same state directory.
    let undo = f.undo(true, &["files", &turn, "--session", &server.session]);
    assert_eq!(undo.code, 0, "{}{}", undo.stdout, undo.stderr);
    assert!(!f.ws().join("new.txt").exists());
    // A refused tool call is a result, as over stdio.
    let outside = server.call(&client, 4, "read_file", json!({"path": "../escape"}));
    assert_eq!(outside["isError"], true, "{outside}");
}

/// Two clients at once, each with its own MCP session, share the server's clawsmith session:
/// both are answered, and their calls are turns of one history.
#[test]
fn two_http_clients_at_once_are_both_served() {
    let f = Fixture::new();
    for n in 0..2 {
        std::fs::write(f.ws().join(format!("{n}.txt")), format!("file {n}\n")).unwrap();
    }
    let server = HttpMcp::start(&f, &[]);
    let clients: Vec<String> = (0..2).map(|_| server.connect()).collect();
    assert_ne!(clients[0], clients[1]);
    let results: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(n, client)| {
                let server = &server;
                scope.spawn(move || {
                    (0..5)
                        .map(|round| {
                            server.call(
                                client,
                                10 + round,
                                "read_file",
                                json!({"path": format!("{n}.txt")}),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    assert_eq!(results.len(), 10);
    for (index, result) in results.iter().enumerate() {
        let n = index / 5;
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains(&format!("file {n}")),
            "{result}"
        );
        assert_eq!(result["structuredContent"]["sessionId"], server.session);
    }
}

/// One refused request: what it is, its headers, path and body, then the status and code.
type Refusal<'a> = (
    &'a str,
    Vec<(&'a str, &'a str)>,
    &'a str,
    &'a [u8],
    u16,
    &'a str,
);

/// Every refusal of the guard, each with its status and code, none of which runs anything:
/// the workspace and the session's history are as before.
#[test]
fn mcp_http_refuses_what_the_guard_does_not_admit() {
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &["--http-allow-origin", "http://localhost:5173"]);
    let port = server.port;
    let client = server.connect();
    let write = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "planted.txt", "content": "x"}}})
    .to_string();
    let good_host = format!("127.0.0.1:{port}");
    let localhost = format!("localhost:{port}");
    let other_port = format!("127.0.0.1:{}", port + 1);
    let bearer = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}x");
    let big = (clawsmith_mcp_default_body() + 1).to_string();
    // (what, headers, path, body, status, code)
    let rows: Vec<Refusal<'_>> = vec![
        (
            "no token",
            vec![],
            "/mcp",
            write.as_bytes(),
            401,
            "unauthorized",
        ),
        (
            "a wrong token",
            vec![("Authorization", &wrong)],
            "/mcp",
            write.as_bytes(),
            401,
            "unauthorized",
        ),
        (
            "a token without its scheme",
            vec![("Authorization", TOKEN)],
            "/mcp",
            write.as_bytes(),
            401,
            "unauthorized",
        ),
        (
            "a rebinding Host",
            vec![("Authorization", &bearer), ("Host", "evil.example")],
            "/mcp",
            write.as_bytes(),
            421,
            "host_refused",
        ),
        (
            "a Host with another port",
            vec![("Authorization", &bearer), ("Host", &other_port)],
            "/mcp",
            write.as_bytes(),
            421,
            "host_refused",
        ),
        (
            "a foreign Origin",
            vec![
                ("Authorization", &bearer),
                ("Host", &good_host),
                ("Origin", "http://evil.example"),
            ],
            "/mcp",
            write.as_bytes(),
            403,
            "origin_refused",
        ),
        (
            "an allowed Origin on another port",
            vec![
                ("Authorization", &bearer),
                ("Origin", "http://localhost:5174"),
            ],
            "/mcp",
            write.as_bytes(),
            403,
            "origin_refused",
        ),
        (
            "the null Origin",
            vec![("Authorization", &bearer), ("Origin", "null")],
            "/mcp",
            write.as_bytes(),
            403,
            "origin_refused",
        ),
        (
            "an oversized body",
            vec![
                ("Authorization", &bearer),
                ("Host", &localhost),
                ("Content-Length", &big),
            ],
            "/mcp",
            b"",
            413,
            "body_too_large",
        ),
        (
            "another path",
            vec![("Authorization", &bearer)],
            "/other",
            write.as_bytes(),
            404,
            "not_found",
        ),
    ];
    for (what, mut headers, path, body, status, code) in rows {
        headers.push(("Content-Type", "application/json"));
        headers.push(("Accept", "application/json, text/event-stream"));
        headers.push(("Mcp-Session-Id", &client));
        let reply = http(port, "POST", path, &headers, body);
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (status, code),
            "{what}: {}",
            reply.body
        );
        if status == 401 {
            // The challenge names the protected-resource metadata, at the Host the client used.
            assert_eq!(
                reply.header("www-authenticate").as_deref(),
                Some(
                    format!(
                        "bearer realm=\"clawsmith\", resource_metadata=\"http://127.0.0.1:{port}\
                         /.well-known/oauth-protected-resource/mcp\""
                    )
                    .as_str()
                ),
                "{what}"
            );
        }
    }
    // The metadata is the one thing served without the token (Host and Origin still apply).
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let reply = http(port, "GET", path, &[], b"");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        let metadata: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(
            metadata["resource"],
            format!("http://127.0.0.1:{port}/mcp"),
            "{metadata}"
        );
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
        let rebound = http(port, "GET", path, &[("Host", "evil.example")], b"");
        assert_eq!(rebound.status, 421, "{path}: {}", rebound.body);
        let foreign = http(port, "GET", path, &[("Origin", "http://evil.example")], b"");
        assert_eq!(foreign.status, 403, "{path}: {}", foreign.body);
        let posted = http(port, "POST", path, &[], write.as_bytes());
        assert_eq!(posted.status, 401, "{path}: {}", posted.body);
    }
    assert!(!f.ws().join("planted.txt").exists());
    // The allowed origin passes, and nothing before it ran a call.
    let admitted = server.post(
        &[
            ("Mcp-Session-Id", &client),
            ("Origin", "http://localhost:5173"),
        ],
        &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
    );
    assert_eq!(admitted.status, 200, "{}", admitted.body);
    let show = f
        .run(&["--json", "session", "show", &server.session], "")
        .json();
    let calls = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "tool.started")
        .count();
    assert_eq!(calls, 0, "{show}");
}

fn clawsmith_mcp_default_body() -> usize {
    4 * 1024 * 1024
}

/// With one request at a time, a second request while a call runs is refused with `503 busy`
/// at once (not queued), and is served once the call is over.
#[test]
fn mcp_http_refuses_requests_over_its_limit_at_once() {
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &["--http-max-requests", "1"]);
    let client = server.connect();
    let started = f.ws().join("started");
    let release = f.ws().join("release");
    std::thread::scope(|scope| {
        let long = scope.spawn(|| {
            server.call(
                &client,
                20,
                "run_command",
                json!({"command": "touch started; for i in $(seq 1 200); do [ -e release ] && break; sleep 0.05; done; echo over"}),
            )
        });
        for _ in 0..400 {
            if started.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert!(started.exists(), "the long call never started");
        let refused = server.post(
            &[("Mcp-Session-Id", &client)],
            &json!({"jsonrpc": "2.0", "id": 21, "method": "tools/list"}),
        );
        assert_eq!(
            (refused.status, refused.code().as_str()),
            (503, "busy"),
            "{}",
            refused.body
        );
        std::fs::write(&release, "").unwrap();
        let result = long.join().unwrap();
        assert!(
            result["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("over"),
            "{result}"
        );
    });
    let after = server.post(
        &[("Mcp-Session-Id", &client)],
        &json!({"jsonrpc": "2.0", "id": 22, "method": "tools/list"}),
    );
    assert_eq!(after.status, 200, "{}", after.body);
}

/// A Python with the MCP SDK: `$CLAWSMITH_TEST_MCP_PYTHON`, else the virtual environment
/// `.ci/run` makes (`target/mcp-python`), else `python3` if it imports `mcp`.
fn python_with_mcp_sdk() -> Option<std::path::PathBuf> {
    let venv =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-python/bin/python");
    let candidates = std::env::var_os("CLAWSMITH_TEST_MCP_PYTHON")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([venv, "python3".into()]);
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import mcp.client.streamable_http"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// The Python MCP SDK's own Streamable HTTP client: it connects with the token, lists the
/// tools, reads and writes through them (the write is a turn of the server's session), and
/// cannot connect with a wrong token. CI installs the SDK (`.ci/run`); elsewhere the test says
/// it did not run.
#[test]
fn the_python_mcp_sdk_speaks_to_the_http_server() {
    let Some(python) = python_with_mcp_sdk() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the Python MCP SDK (.ci/run makes target/mcp-python)"
        );
        eprintln!(
            "SKIP: no Python with the MCP SDK (run .ci/run's set-up, or set CLAWSMITH_TEST_MCP_PYTHON)"
        );
        return;
    };
    let f = Fixture::new();
    std::fs::write(f.ws().join("a.txt"), "hello, python\n").unwrap();
    let server = HttpMcp::start(&f, &[]);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_http_client.py");
    let output = Command::new(python)
        .arg(script)
        .arg(format!("http://127.0.0.1:{}/mcp", server.port))
        .arg(TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(seen["server"], "clawsmith", "{seen}");
    assert!(
        seen["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool == "run_command"),
        "{seen}"
    );
    assert_eq!(seen["read"], "hello, python\n", "{seen}");
    assert_eq!(
        (seen["readError"].as_bool(), seen["writeError"].as_bool()),
        (Some(false), Some(false)),
        "{seen}"
    );
    assert!(
        seen["wrongToken"].as_str().unwrap().starts_with("refused"),
        "{seen}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws().join("from_python.txt")).unwrap(),
        "from python\n"
    );
    let turn = seen["turnId"].as_str().unwrap();
    let undo = f.undo(true, &["files", turn, "--session", &server.session]);
    assert_eq!(undo.code, 0, "{}{}", undo.stdout, undo.stderr);
    assert!(!f.ws().join("from_python.txt").exists());
}

/// A client that declared the tasks extension (SEP-2663): a quick command is answered at once, a
/// long one becomes a task whose result `tasks/get` returns once it is done, and `tasks/cancel`
/// ends another (its turn closed `cancelled`); an unknown task is an error.
#[test]
fn long_calls_become_tasks_for_clients_that_declared_them() {
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &[]);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18",
                   "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                   "clientInfo": {"name": "clawsmith-cli-test", "version": "0"}}});
    let reply = server.post(&[], &init);
    assert!(
        message(&reply)["result"]["capabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{}",
        reply.body
    );
    let client = reply.header("mcp-session-id").unwrap();
    server.post(
        &[("Mcp-Session-Id", &client)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let rpc = |id: u64, method: &str, params: Value| {
        let reply = server.post(
            &[("Mcp-Session-Id", &client)],
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        message(&reply)
    };
    let quick = rpc(
        1,
        "tools/call",
        json!({"name": "run_command", "arguments": {"command": "echo quick"}}),
    );
    assert!(
        quick["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("quick"),
        "{quick}"
    );
    // Long: a task, then its result.
    let long = rpc(
        2,
        "tools/call",
        json!({"name": "run_command",
        "arguments": {"command": "sleep 2; echo finished > done.txt; echo long done"}}),
    );
    assert_eq!(long["result"]["resultType"], "task", "{long}");
    assert_eq!(long["result"]["status"], "working", "{long}");
    let task = long["result"]["taskId"].as_str().unwrap().to_owned();
    let wait_for = |task: &str, first_id: u64| {
        for n in 0..200 {
            let got = rpc(first_id + n, "tasks/get", json!({"taskId": task}));
            if got["result"]["status"] != "working" {
                return got;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("task {task} still working after 20 s");
    };
    let got = wait_for(&task, 100);
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert!(
        got["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("long done"),
        "{got}"
    );
    assert_eq!(
        got["result"]["result"]["structuredContent"]["sessionId"],
        server.session
    );
    assert!(f.ws().join("done.txt").exists());
    // Cancelled: the command is stopped, the task says so.
    let endless = rpc(
        3,
        "tools/call",
        json!({"name": "run_command",
        "arguments": {"command": "sleep 30; echo never > never.txt"}}),
    );
    let endless_task = endless["result"]["taskId"].as_str().unwrap().to_owned();
    let acked = rpc(4, "tasks/cancel", json!({"taskId": endless_task}));
    assert!(acked.get("error").is_none(), "{acked}");
    let got = wait_for(&endless_task, 400);
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    assert!(!f.ws().join("never.txt").exists());
    let unknown = rpc(5, "tasks/get", json!({"taskId": "call_nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

/// A call whose request carries a `progressToken` reports on its answer's stream that it still
/// runs, about once a second, before its result.
#[test]
fn a_call_with_a_progress_token_reports_progress_until_its_result() {
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &[]);
    let client = server.connect();
    let reply = server.post(
        &[("Mcp-Session-Id", &client)],
        &json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                "params": {"name": "run_command",
                           "arguments": {"command": "sleep 2.5; echo slow done"},
                           "_meta": {"progressToken": "p-30"}}}),
    );
    let messages: Vec<Value> = reply
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|message| message["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 2, "{}", reply.body);
    for (n, note) in progress.iter().enumerate() {
        assert_eq!(note["params"]["progressToken"], "p-30");
        assert_eq!(note["params"]["progress"], json!(n as f64 + 1.0), "{note}");
    }
    let last = messages.last().unwrap();
    assert_eq!(last["id"], 30, "the result comes last: {}", reply.body);
    assert!(
        last["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("slow done"),
        "{last}"
    );
}

/// The port and path-and-query of an `http://127.0.0.1:PORT/...` URL.
fn loopback(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let slash = rest.find('/').unwrap();
    (rest[..slash].parse().unwrap(), rest[slash..].to_owned())
}

/// `clawsmith mcp-login`, against the Python SDK's MCP server behind a scripted OAuth
/// authorization server on 127.0.0.1: before it, `call` reports the server needs it; the URL
/// it prints, opened and approved (the test is the browser), leaves tokens where the next
/// `call` finds them, and the remote tool answers.
#[test]
fn mcp_login_authorizes_a_remote_server_for_the_next_calls() {
    use std::os::unix::fs::PermissionsExt;
    let Some(python) = python_with_mcp_sdk() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the Python MCP SDK (.ci/run makes target/mcp-python)"
        );
        eprintln!("SKIP: no Python with the MCP SDK");
        return;
    };
    let f = Fixture::new();
    let ports = f.dir.path().join("ports");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../clawsmith-mcp/tests/fixtures/oauth_mcp_server.py");
    let server = Command::new(python)
        .arg(script)
        .arg(&ports)
        .args(["3600", "refresh", "client-secret", "static-token"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = KillOnDrop(server);
    let started = std::time::Instant::now();
    let mcp_url = loop {
        if let Ok(line) = std::fs::read_to_string(&ports) {
            break line.split_whitespace().next().unwrap().to_owned();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        std::thread::sleep(std::time::Duration::from_millis(25));
    };
    std::fs::create_dir(f.state()).unwrap();
    let config = f.state().join("clawsmith.toml");
    std::fs::write(
        &config,
        format!("[[mcp_servers]]\nname = \"remote\"\nurl = {mcp_url:?}\n[mcp_servers.oauth]\n"),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();

    let search = r#"{"query":"echo"}"#;
    let before = f.try_call(&["--session", "d"], "search_tools", search);
    assert!(
        before
            .stderr
            .contains("no token is stored: run `clawsmith mcp-login remote`"),
        "{}",
        before.stderr
    );
    let unknown = f.run(&["mcp-login", "elsewhere"], "");
    assert_ne!(unknown.code, 0);
    assert!(
        unknown
            .stderr
            .contains("no MCP server named `elsewhere` in"),
        "{}",
        unknown.stderr
    );
    assert!(
        unknown.stderr.contains("(servers: remote)"),
        "{}",
        unknown.stderr
    );

    let mut login = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(f.state())
        .args(["mcp-login", "remote", "--timeout", "60"])
        .env_remove("CLAWSMITH_STATE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(login.stderr.take().unwrap());
    let authorize = loop {
        let mut line = String::new();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "no URL printed");
        if let Some(url) = line.trim().strip_prefix("http://") {
            break format!("http://{url}");
        }
    };
    let (port, target) = loopback(&authorize);
    let (port, target) = loopback(&redirected_to(port, &target));
    let back = http(port, "GET", &target, &[], b"");
    assert_eq!(back.status, 200);
    assert!(back.body.contains("authorized"), "{}", back.body);
    let output = login.wait_with_output().unwrap();
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    assert!(output.status.success(), "{said}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("authorized: the tokens for `remote` are in"),
        "{stdout}"
    );
    let stored = f.state().join("mcp-credentials/remote.json");
    assert_eq!(
        std::fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let found = f.try_call(&["--session", "d"], "search_tools", search);
    assert!(
        found.stdout.contains("mcp__remote__echo"),
        "{}{}",
        found.stdout,
        found.stderr
    );
    let echoed = f.call(
        &["--session", "d", "--yes"],
        "mcp__remote__echo",
        r#"{"text":"hello, remote"}"#,
    );
    assert_eq!(echoed["status"], "success", "{echoed}");
    assert_eq!(echoed["content"], "hello, remote", "{echoed}");
}

/// Where `GET target` on 127.0.0.1:`port` redirects to: its `Location`, case kept (the
/// `state` it carries is compared exactly).
fn redirected_to(port: u16, target: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 302"), "{answer}");
    answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .unwrap()
}

/// Kills the child process on drop.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Server streams are counted apart from requests and closed when idle: with one stream
/// allowed and a 1 s idle limit, a second `GET` is `503 busy` while the first is open, calls
/// are still served, the first ends by itself once idle, and then a new one opens.
#[test]
fn server_streams_are_limited_apart_from_calls_and_closed_when_idle() {
    use std::io::{Read, Write};
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &["--http-max-streams", "1", "--http-stream-idle", "1"]);
    let client = server.connect();
    let auth = format!("Bearer {TOKEN}");
    let stream_headers = [
        ("Authorization", auth.as_str()),
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", client.as_str()),
    ];
    let mut open = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut request = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n",
        server.port
    );
    for (name, value) in stream_headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    open.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(open.read(&mut byte).unwrap(), 1, "the stream closed early");
        head.push(byte[0]);
    }
    let opened = std::time::Instant::now();
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");

    let second = http(server.port, "GET", "/mcp", &stream_headers, b"");
    assert_eq!(second.status, 503, "{}", second.body);
    assert_eq!(second.code(), "busy");
    assert!(
        second.body.contains("1 server streams are open"),
        "{}",
        second.body
    );
    let listed = server.post(
        &[("Mcp-Session-Id", &client)],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    );
    assert_eq!(
        listed.status, 200,
        "calls are served while the stream is open"
    );

    let mut rest = Vec::new();
    open.read_to_end(&mut rest).unwrap();
    let lasted = opened.elapsed();
    assert!(
        lasted >= std::time::Duration::from_millis(900)
            && lasted < std::time::Duration::from_secs(30),
        "the idle stream lasted {lasted:?}"
    );
    let again = http(server.port, "GET", "/mcp", &stream_headers, b"");
    assert_eq!(again.status, 200, "{}", again.body);
}

/// The MCP Inspector's CLI: `$CLAWSMITH_TEST_MCP_INSPECTOR`, else the copy `.ci/run` installs
/// (`target/mcp-inspector`).
fn mcp_inspector() -> Option<std::path::PathBuf> {
    let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/mcp-inspector/node_modules/.bin/mcp-inspector");
    std::env::var_os("CLAWSMITH_TEST_MCP_INSPECTOR")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([installed])
        .find(|path| path.is_file())
}

/// The MCP Inspector (its CLI mode) over HTTP: it lists the tools and calls one, whose
/// result is a turn of the server's session; with a wrong token it fails.
#[test]
fn the_mcp_inspector_speaks_to_the_http_server() {
    let Some(inspector) = mcp_inspector() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the MCP Inspector (.ci/run makes target/mcp-inspector)"
        );
        eprintln!(
            "SKIP: no MCP Inspector (run .ci/run's set-up, or set CLAWSMITH_TEST_MCP_INSPECTOR)"
        );
        return;
    };
    let f = Fixture::new();
    std::fs::write(f.ws().join("a.txt"), "hello, inspector\n").unwrap();
    let server = HttpMcp::start(&f, &[]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let home = f.dir.path().join("inspector-home");
    std::fs::create_dir(&home).unwrap();
    let inspect = |token: &str, method: &[&str]| {
        let output = Command::new(&inspector)
            .args(["--cli", &url, "--transport", "http", "--header"])
            .arg(format!("Authorization: Bearer {token}"))
            .args(["--method"])
            .args(method)
            // Its catalog file lives under $HOME.
            .env("HOME", &home)
            .current_dir(&home)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), stdout, stderr)
    };
    let (listed, stdout, stderr) = inspect(TOKEN, &["tools/list"]);
    assert!(listed, "{stdout}{stderr}");
    let tools: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"run_command"),
        "{names:?}"
    );

    let (called, stdout, stderr) = inspect(
        TOKEN,
        &[
            "tools/call",
            "--tool-name",
            "read_file",
            "--tool-arg",
            "path=a.txt",
        ],
    );
    assert!(called, "{stdout}{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        result["content"][0]["text"], "hello, inspector\n",
        "{result}"
    );
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structuredContent"]["sessionId"],
        server.session.as_str()
    );

    let (refused, stdout, stderr) = inspect("not-the-token", &["tools/list"]);
    assert!(!refused, "a wrong token must fail: {stdout}{stderr}");
}

/// A client that disconnects mid-call: MCP's HTTP transport does not read a disconnect as a
/// cancellation, so the call runs to its end (its command's file appears), and the server goes
/// on serving that client and others.
#[test]
fn a_client_that_disconnects_mid_call_leaves_the_call_to_finish_and_the_server_serving() {
    use std::io::Write;
    let f = Fixture::new();
    let server = HttpMcp::start(&f, &[]);
    let client = server.connect();
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "run_command",
                   "arguments": {"command": "sleep 1; echo done > finished.txt"}}})
    .to_string();
    let mut gone = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        gone,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Mcp-Session-Id: {client}\r\nContent-Length: {}\r\n\r\n{body}",
        server.port,
        body.len()
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(gone);

    let finished = f.ws().join("finished.txt");
    let started = std::time::Instant::now();
    while !finished.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the call of the client that left never finished"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let read = server.call(&client, 6, "read_file", json!({"path": "finished.txt"}));
    assert_eq!(read["content"][0]["text"], "done\n", "{read}");
    let other = server.connect();
    let listed = server.post(
        &[("Mcp-Session-Id", &other)],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
    );
    assert_eq!(listed.status, 200, "{}", listed.body);
}
