//! The MCP client against remote servers over Streamable HTTP: the Python MCP SDK's server
//! behind OAuth, with the authorization server it trusts (`tests/fixtures/oauth_mcp_server.py`),
//! both on 127.0.0.1 in a process of their own.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawsmith_checkpoint::Store;
use clawsmith_core::sandbox::{SandboxConfig, StateDir};
use clawsmith_core::{AgentCore, CoreConfig, NullSink};
use clawsmith_mcp::{
    CREDENTIALS_DIR, McpConfig, McpError, McpServerConfig, McpStartup, connect_servers, login,
};
use clawsmith_protocol::{ToolCall, ToolStatus};
use clawsmith_sandbox::SandboxPolicy;
use clawsmith_security::{PermissionMode, PermissionPolicy};
use clawsmith_trace::{MemorySink, Tracer};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{authorized, run, tool};

/// The client secret the fixture's authorization server expects: the value of a variable the
/// test process has (`cargo test` sets it), named to the client by `client_secret_env`.
const SECRET_VARIABLE: &str = "CARGO_PKG_VERSION";
/// The static bearer token the fixture's MCP server accepts, likewise from a variable.
const TOKEN_VARIABLE: &str = "CARGO_PKG_NAME";

/// A Python with the MCP SDK: `$CLAWSMITH_TEST_MCP_PYTHON`, else the virtual environment
/// `.ci/run` makes (`target/mcp-python`), else `python3` if it imports `mcp`.
fn python_with_mcp_sdk() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-python/bin/python");
    let candidates = std::env::var_os("CLAWSMITH_TEST_MCP_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv, "python3".into()]);
    candidates.into_iter().find(|python| {
        #[allow(clippy::disallowed_methods)] // The probe runs a Python of the test host.
        Command::new(python)
            .args(["-c", "import mcp.server.mcpserver, uvicorn"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// The fixture's two servers, killed on drop.
struct Remote {
    child: Child,
    mcp_url: String,
    _dir: TempDir,
}

impl Remote {
    /// Starts the fixture (`None` when no Python has the SDK and this is not CI): tokens
    /// expire after `expires_in` seconds, with refresh tokens when `refresh`.
    fn start(expires_in: u32, refresh: bool) -> Option<Remote> {
        let Some(python) = python_with_mcp_sdk() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install the Python MCP SDK (.ci/run makes target/mcp-python)"
            );
            eprintln!(
                "SKIP: no Python with the MCP SDK (run .ci/run's set-up, or set CLAWSMITH_TEST_MCP_PYTHON)"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("ports");
        let stderr = dir.path().join("stderr");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_mcp_server.py");
        #[allow(clippy::disallowed_methods)] // The fixture is a peer server, not a tool process.
        let mut child = Command::new(python)
            .arg(script)
            .arg(&port_file)
            .arg(expires_in.to_string())
            .arg(if refresh { "refresh" } else { "no-refresh" })
            .arg(std::env::var(SECRET_VARIABLE).unwrap())
            .arg(std::env::var(TOKEN_VARIABLE).unwrap())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let ports = loop {
            if let Ok(ports) = std::fs::read_to_string(&port_file) {
                break ports;
            }
            if let Some(status) = child.try_wait().unwrap() {
                let said = std::fs::read_to_string(&stderr).unwrap_or_default();
                panic!("the OAuth fixture exited ({status}): {said}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the OAuth fixture did not start"
            );
            std::thread::sleep(Duration::from_millis(25));
        };
        let mcp_url = ports.split_whitespace().next().unwrap().to_owned();
        Some(Remote {
            child,
            mcp_url,
            _dir: dir,
        })
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The host's sandbox configuration with `state` as the state directory (or none).
fn sandbox(state: Option<&Path>) -> SandboxConfig {
    let workspace = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-remote-workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let state = state.map_or(StateDir::NotKept, |dir| StateDir::At(dir.to_path_buf()));
    SandboxConfig::new(workspace, state)
}

/// The server `[[mcp_servers]]` entry `entry` describes.
fn server(entry: &str) -> McpServerConfig {
    McpConfig::from_toml_str(&format!("[[mcp_servers]]\n{entry}"))
        .unwrap()
        .mcp_servers
        .remove(0)
}

/// Connects to the one server `[[mcp_servers]]` entry `entry` describes.
async fn connect(entry: &str, state: Option<&Path>) -> McpStartup {
    let config = McpConfig {
        mcp_servers: vec![server(entry)],
    };
    connect_servers(&config, &sandbox(state)).await
}

/// An entry for the fixture's MCP server with OAuth client credentials.
fn oauth_entry(remote: &Remote, client_id: &str) -> String {
    format!(
        "name = \"remote\"\nurl = {:?}\n[mcp_servers.oauth]\nclient_id = {client_id:?}\nclient_secret_env = {SECRET_VARIABLE:?}\n",
        remote.mcp_url
    )
}

/// What the fixture's token endpoint has seen, asked through its `grants` tool directly (not
/// through a session, whose record must not hold the tokens it lists).
async fn grants(startup: &McpStartup) -> Value {
    let grants = tool(&startup.tools, "mcp__remote__grants");
    let result = run(grants.as_ref(), json!({}), authorized()).await;
    assert_eq!(result.status(), ToolStatus::Success, "{result:?}");
    serde_json::from_str(&result.content).unwrap()
}

async fn echo(startup: &McpStartup, text: &str) -> clawsmith_protocol::ToolExecutionResult {
    let echo = tool(&startup.tools, "mcp__remote__echo");
    run(echo.as_ref(), json!({ "text": text }), authorized()).await
}

fn only_problem(startup: &McpStartup) -> String {
    assert!(startup.tools.is_empty(), "{:?}", startup.tools.len());
    assert_eq!(startup.problems.len(), 1, "{:?}", startup.problems);
    startup.problems[0].to_string()
}

#[tokio::test]
async fn a_static_bearer_token_from_a_variable_reaches_a_remote_server() {
    let Some(remote) = Remote::start(3600, false) else {
        return;
    };
    let entry = format!(
        "name = \"remote\"\nurl = {:?}\nbearer_token_env = {TOKEN_VARIABLE:?}\n",
        remote.mcp_url
    );
    let startup = connect(&entry, None).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let mut names: Vec<&str> = startup.tools.iter().map(|tool| tool.tool.name()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "mcp__remote__big",
            "mcp__remote__echo",
            "mcp__remote__grants",
            "mcp__remote__slow"
        ]
    );
    assert!(startup.tools.iter().all(|tool| tool.source == "mcp:remote"));
    let result = echo(&startup, "over http").await;
    assert_eq!(result.status(), ToolStatus::Success, "{result:?}");
    assert_eq!(result.content, "over http");
    let seen = grants(&startup).await;
    assert_eq!(
        seen["lastAuthorization"],
        format!("Bearer {}", std::env::var(TOKEN_VARIABLE).unwrap())
    );
    assert_eq!(seen["grants"]["client_credentials"], 0, "{seen}");

    // (entry, what the problem names)
    let refused = [
        (
            format!(
                "name = \"remote\"\nurl = {:?}\nbearer_token_env = \"CLAWSMITH_TEST_NO_SUCH_TOKEN\"\n",
                remote.mcp_url
            ),
            "`CLAWSMITH_TEST_NO_SUCH_TOKEN` is not set",
        ),
        (
            format!("name = \"remote\"\nurl = {:?}\n", remote.mcp_url),
            "remote",
        ),
    ];
    for (entry, named) in &refused {
        let (entry, named) = (entry.as_str(), *named);
        let startup = connect(entry, None).await;
        let problem = only_problem(&startup);
        assert!(problem.contains(named), "{problem}");
    }
    let missing = connect(&refused[0].0, None).await;
    assert!(
        matches!(&missing.problems[..], [McpError::Remote { server, .. }] if server == "remote"),
        "{:?}",
        missing.problems
    );
}

#[tokio::test]
async fn client_credentials_are_stored_0600_reused_and_asked_again_when_they_expire() {
    let Some(remote) = Remote::start(2, false) else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let startup = connect(&oauth_entry(&remote, "clawsmith"), Some(state.path())).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let first = echo(&startup, "first").await;
    assert_eq!(first.status(), ToolStatus::Success, "{first:?}");

    let dir = state.path().join(CREDENTIALS_DIR);
    let file = dir.join("remote.json");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file), 0o600);
    let seen = grants(&startup).await;
    assert_eq!(seen["grants"]["client_credentials"], 1, "{seen}");
    let issued = seen["issued"][0].as_str().unwrap().to_owned();
    assert!(
        std::fs::read_to_string(&file).unwrap().contains(&issued),
        "the stored credentials hold the issued token"
    );

    // Past its expiry the token is neither sent nor refreshable (no refresh token): the grant
    // is asked again and the call goes through.
    tokio::time::sleep(Duration::from_millis(2_600)).await;
    let after = echo(&startup, "after expiry").await;
    assert_eq!(after.status(), ToolStatus::Success, "{after:?}");
    assert_eq!(after.content, "after expiry");
    let seen = grants(&startup).await;
    assert_eq!(seen["grants"]["client_credentials"], 2, "{seen}");
    assert_eq!(seen["grants"]["refused"], 0, "{seen}");
    let newest = seen["issued"].as_array().unwrap().last().unwrap().clone();
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains(newest.as_str().unwrap()),
        "the stored credentials hold the newest token"
    );
    // Nothing but the credentials file is left in the folder (no temporary files).
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["remote.json"]);
}

#[tokio::test]
async fn an_expired_token_is_refreshed_silently_with_its_refresh_token() {
    let Some(remote) = Remote::start(2, true) else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let startup = connect(&oauth_entry(&remote, "clawsmith"), Some(state.path())).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    for round in 0..2 {
        let text = format!("round {round}");
        let result = echo(&startup, &text).await;
        assert_eq!(result.status(), ToolStatus::Success, "{result:?}");
        assert_eq!(result.content, text);
        tokio::time::sleep(Duration::from_millis(2_600)).await;
    }
    let seen = grants(&startup).await;
    assert_eq!(seen["grants"]["client_credentials"], 1, "{seen}");
    assert!(
        seen["grants"]["refresh_token"].as_u64().unwrap() >= 2,
        "{seen}"
    );
    assert_eq!(seen["grants"]["refused"], 0, "{seen}");
}

#[tokio::test]
async fn a_stored_token_is_used_by_the_next_start_and_oauth_failures_are_named() {
    let Some(remote) = Remote::start(3600, false) else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let first = connect(&oauth_entry(&remote, "clawsmith"), Some(state.path())).await;
    assert!(first.problems.is_empty(), "{:?}", first.problems);
    drop(first);
    let second = connect(&oauth_entry(&remote, "clawsmith"), Some(state.path())).await;
    assert!(second.problems.is_empty(), "{:?}", second.problems);
    let seen = grants(&second).await;
    assert_eq!(seen["grants"]["client_credentials"], 1, "{seen}");

    // Without a state directory the token lives in memory: every start asks again.
    let unkept = connect(&oauth_entry(&remote, "clawsmith"), None).await;
    assert!(unkept.problems.is_empty(), "{:?}", unkept.problems);
    assert_eq!(
        grants(&unkept).await["grants"]["client_credentials"],
        2,
        "no file is written without a state directory"
    );

    let empty = tempfile::tempdir().unwrap();
    // (entry, what the problem says)
    let failures = [
        (
            oauth_entry(&remote, "somebody-else"),
            "the OAuth client credentials grant failed",
        ),
        (
            format!(
                "name = \"remote\"\nurl = {:?}\n[mcp_servers.oauth]\nclient_id = \"clawsmith\"\n",
                remote.mcp_url
            ),
            "no token is stored",
        ),
        (
            format!(
                "name = \"remote\"\nurl = {:?}\n[mcp_servers.oauth]\nclient_id = \"clawsmith\"\nclient_secret_env = \"CLAWSMITH_TEST_NO_SUCH_SECRET\"\n",
                remote.mcp_url
            ),
            "`CLAWSMITH_TEST_NO_SUCH_SECRET` is not set",
        ),
    ];
    for (entry, says) in failures {
        let startup = connect(&entry, Some(empty.path())).await;
        let problem = only_problem(&startup);
        assert!(problem.contains(says), "{problem}");
        assert!(problem.contains("MCP server `remote`"), "{problem}");
    }
    assert!(
        !empty
            .path()
            .join(CREDENTIALS_DIR)
            .join("remote.json")
            .exists(),
        "a failed authorization stores nothing"
    );
}

#[tokio::test]
async fn tokens_never_reach_the_session_record_or_the_trace() {
    let Some(remote) = Remote::start(3600, true) else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let startup = connect(&oauth_entry(&remote, "clawsmith"), Some(state.path())).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let seen = grants(&startup).await;
    let tokens: Vec<String> = seen["issued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|token| token.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tokens.len(), 1, "{seen}");

    let workspace = tempfile::tempdir().unwrap();
    let db = workspace.path().join("sessions.db");
    let sink = Arc::new(MemorySink::default());
    let mut config = CoreConfig::new(workspace.path(), Arc::new(Store::open(&db).unwrap()));
    config.policy = PermissionPolicy::new(PermissionMode::Full);
    config.sandbox.policy = SandboxPolicy::BestEffort;
    config.extension_tools = startup.tools;
    config.tracer = Tracer::new(sink.clone());
    let core = AgentCore::new(config).unwrap();
    let session = core.open_session(None).unwrap();
    let call = |id: &str, name: &str, arguments: Value| ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: arguments.to_string(),
    };
    let search = call("s1", "search_tools", json!({"query": "echo"}));
    session.run_turn(vec![search], &NullSink).await.unwrap();
    session.model_request(&NullSink).unwrap();
    let outcome = session
        .run_turn(
            vec![call("e1", "mcp__remote__echo", json!({"text": "recorded"}))],
            &NullSink,
        )
        .await
        .unwrap();
    assert_eq!(outcome.results[0].1.status(), ToolStatus::Success);
    assert_eq!(outcome.results[0].1.content, "recorded");
    drop(session);
    drop(core);

    let mut recorded = Vec::new();
    for entry in std::fs::read_dir(workspace.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.to_string_lossy().contains("sessions.db") {
            recorded.extend(std::fs::read(&path).unwrap());
        }
    }
    let recorded = String::from_utf8_lossy(&recorded);
    assert!(recorded.contains("recorded"), "the call is in the record");
    let traced = format!("{:?}", sink.spans());
    assert!(traced.contains("mcp__remote__echo"), "the call is traced");
    for token in &tokens {
        assert!(
            !recorded.contains(token.as_str()),
            "a token in the sessions"
        );
        assert!(!traced.contains(token.as_str()), "a token in the trace");
    }
}

/// One HTTP/1.1 GET of `url` (`http://127.0.0.1:PORT/...`): the status code and the
/// `Location` header.
fn get(url: &str) -> (u16, Option<String>) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, target) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split(' ').nth(1).unwrap().parse().unwrap();
    let location = answer.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("location")
            .then(|| value.trim().to_owned())
    });
    (status, location)
}

/// The person's browser, approving at once: opens the authorization URL and follows its
/// redirect back to clawsmith's loopback listener. The listener's status code.
fn browse(authorization_url: &str) -> std::thread::JoinHandle<u16> {
    let url = authorization_url.to_owned();
    std::thread::spawn(move || {
        let (status, location) = get(&url);
        assert_eq!(status, 302, "the authorization server redirects back");
        get(&location.unwrap()).0
    })
}

/// An entry for the fixture's MCP server authorized by a login (no client secret).
fn login_entry(remote: &Remote, oauth: &str) -> String {
    format!(
        "name = \"remote\"\nurl = {:?}\n[mcp_servers.oauth]\n{oauth}",
        remote.mcp_url
    )
}

#[tokio::test]
async fn a_login_stores_tokens_that_the_next_start_uses_and_refreshes() {
    let Some(remote) = Remote::start(2, true) else {
        return;
    };
    // (oauth table, registrations the login makes): dynamic registration, then a client
    // registered beforehand.
    let cases = [("", 1), ("client_id = \"clawsmith-public\"\n", 0)];
    let mut registered = 0;
    let mut codes = 0;
    for (oauth, registers) in cases {
        let state = tempfile::tempdir().unwrap();
        let entry = login_entry(&remote, oauth);
        let before = connect(&entry, Some(state.path())).await;
        let problem = only_problem(&before);
        assert!(
            problem.contains("run `clawsmith mcp-login remote`"),
            "{problem}"
        );

        let dir = state.path().join(CREDENTIALS_DIR);
        let mut browser = None;
        login(
            &server(&entry),
            &dir,
            |url| browser = Some(browse(url)),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        assert_eq!(browser.unwrap().join().unwrap(), 200);
        let mode = std::fs::metadata(dir.join("remote.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let startup = connect(&entry, Some(state.path())).await;
        assert!(startup.problems.is_empty(), "{:?}", startup.problems);
        for round in 0..2 {
            let text = format!("after login, round {round}");
            let result = echo(&startup, &text).await;
            assert_eq!(result.status(), ToolStatus::Success, "{result:?}");
            assert_eq!(result.content, text);
            tokio::time::sleep(Duration::from_millis(2_600)).await;
        }
        registered += registers;
        codes += 1;
        let seen = grants(&startup).await;
        assert_eq!(seen["grants"]["registered"], registered, "{seen}");
        assert_eq!(seen["grants"]["authorization_code"], codes, "{seen}");
        assert_eq!(seen["grants"]["client_credentials"], 0, "{seen}");
        assert_eq!(seen["grants"]["refused"], 0, "{seen}");
        assert!(
            seen["grants"]["refresh_token"].as_u64().unwrap() >= 1,
            "{seen}"
        );
    }
}

#[tokio::test]
async fn a_login_that_cannot_happen_says_why_and_stores_nothing() {
    let Some(remote) = Remote::start(3600, false) else {
        return;
    };
    // (entry, whether a browser goes to the authorization server, what the error says)
    let cases = [
        (
            "name = \"remote\"\ncommand = \"/bin/true\"\n".to_owned(),
            false,
            "nothing to log in to",
        ),
        (
            format!("name = \"remote\"\nurl = {:?}\n", remote.mcp_url),
            false,
            "no `[mcp_servers.oauth]` table",
        ),
        (oauth_entry(&remote, "clawsmith"), false, "needs no login"),
        (
            login_entry(&remote, "scopes = [\"deny\"]\n"),
            true,
            "the authorization server refused: access_denied",
        ),
        (
            login_entry(&remote, "client_id = \"nobody\"\n"),
            false,
            "no redirect came back within 2 s",
        ),
    ];
    for (entry, browsed, says) in cases {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join(CREDENTIALS_DIR);
        let mut browser = None;
        let error = login(
            &server(&entry),
            &dir,
            |url| {
                if browsed {
                    browser = Some(browse(url));
                }
            },
            Duration::from_secs(2),
        )
        .await
        .unwrap_err();
        assert!(error.to_string().contains(says), "{says}: {error}");
        assert!(error.to_string().contains("MCP server `remote`"), "{error}");
        if let Some(browser) = browser {
            assert_eq!(browser.join().unwrap(), 200);
        }
        assert!(!dir.join("remote.json").exists(), "{says}: nothing stored");
    }
}

#[tokio::test]
async fn a_remote_server_is_held_to_the_call_deadline_and_the_answer_cap() {
    let Some(remote) = Remote::start(3600, false) else {
        return;
    };
    let entry = |timeout_ms: u64| {
        format!(
            "name = \"remote\"\nurl = {:?}\nbearer_token_env = {TOKEN_VARIABLE:?}\ncall_timeout_ms = {timeout_ms}\n",
            remote.mcp_url
        )
    };
    let startup = connect(&entry(500), None).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let slow = tool(&startup.tools, "mcp__remote__slow");
    let started = Instant::now();
    let result = run(slow.as_ref(), json!({"seconds": 30}), authorized()).await;
    assert_eq!(
        result.code().map(|code| code.as_str()),
        Some("timeout"),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // The cap on its own deadline: 17 MiB from the scripted server can take longer than 500 ms
    // on a loaded machine, which would test the deadline again instead of the cap.
    let startup = connect(&entry(30_000), None).await;
    assert!(startup.problems.is_empty(), "{:?}", startup.problems);
    let big = tool(&startup.tools, "mcp__remote__big");
    let result = run(big.as_ref(), json!({"mebibytes": 17}), authorized()).await;
    assert_eq!(
        result.status(),
        ToolStatus::Error,
        "{}",
        &result.content[..result.content.len().min(300)]
    );
    assert!(
        result.content.len() < 4096,
        "the oversized answer is not passed on"
    );
    assert!(
        result
            .content
            .contains("exceeded the maximum size of 16777216 bytes"),
        "the error names the cap: {}",
        result.content
    );
    let after = echo(&startup, "still here").await;
    assert_eq!(after.status(), ToolStatus::Success, "{after:?}");
    assert_eq!(after.content, "still here");
}
