//! `clawsmith web` end to end: the guard over plain HTTP (401 without the token, a foreign Host
//! refused, a POST without the CSRF token refused), and the pages in a real headless Chromium
//! driven over WebDriver (sessions, a timeline with every display kind, a diff, the undo flow with
//! a conflict, a live update from a concurrent `clawsmith turn`).
//!
//! With `CLAWSMITH_WEB_SCREENSHOTS=DIR` the browser test also saves the README's screenshots there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::Fixture;

/// A running `clawsmith web`, killed on drop.
struct Web {
    child: Child,
    port: u16,
    token: String,
}

impl Web {
    fn start(f: &Fixture) -> Web {
        Web::start_in(f, &f.ws())
    }

    /// `clawsmith web` whose undo may write in `workspace`.
    fn start_in(f: &Fixture, workspace: &Path) -> Web {
        let mut child = Command::new(env!("CARGO_BIN_EXE_clawsmith"))
            .args([
                "--state-dir",
                f.state().to_str().unwrap(),
                "web",
                "--workspace",
            ])
            .arg(workspace)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let rest = line
            .trim()
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("clawsmith web printed {line:?}"));
        let (port, token) = rest.split_once("/?token=").unwrap();
        assert_eq!(token.len(), 32, "128 bits as hex: {token}");
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        Web {
            child,
            port: port.parse().unwrap(),
            token: token.to_owned(),
        }
    }

    /// The CSRF token a page served with the cookie carries.
    fn csrf(&self) -> String {
        let page = http(self.port, "GET", "/", &[("Cookie", &self.cookie())], "");
        page.body
            .split("name=\"csrf-token\" content=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned()
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn cookie(&self) -> String {
        format!("clawsmith_web_{}={}", self.port, self.token)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 exchange over a fresh connection: status, header block (lowercase), body.
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        headers: head.to_lowercase(),
        body: body.to_owned(),
    }
}

/// Runs one turn of session `session` with `calls`; returns the turn id.
fn turn(f: &Fixture, session: &str, mode: &str, calls: &Value) -> String {
    let run = f.run(
        &[
            "turn",
            "--workspace",
            f.ws().to_str().unwrap(),
            "--mode",
            mode,
            "--session",
            session,
        ],
        &calls.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.lines().pop().unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments.to_string()})
}

/// Every file of the workspace with its content: "nothing changed" is this, before and after.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// A session whose one turn wrote `notes.txt`; returns the turn id.
fn session_with_a_write(f: &Fixture) -> String {
    turn(
        f,
        "s",
        "full",
        &json!([call(
            "w1",
            "write_file",
            json!({"path": "notes.txt", "content": "by the agent\n"})
        )]),
    )
}

/// One refused request: method, path, headers, body, then the status and error code expected.
type Refusal<'a> = (
    &'a str,
    &'a str,
    Vec<(&'a str, &'a str)>,
    &'a str,
    u16,
    &'a str,
);

/// Each request of `cases` answers its status and error code, and sets no cookie.
fn check_refusals(port: u16, cases: &[Refusal<'_>]) {
    for (method, path, headers, body, status, code) in cases {
        let reply = http(port, method, path, headers, body);
        assert_eq!(
            (reply.status, reply.code().as_str()),
            (*status, *code),
            "{method} {path} {headers:?}: {}",
            reply.body
        );
        assert!(!reply.headers.contains("set-cookie"), "{method} {path}");
    }
}

#[test]
fn web_refuses_requests_without_the_token_from_a_foreign_host_and_posts_without_csrf() {
    let f = Fixture::new();
    let turn_id = session_with_a_write(&f);
    let web = Web::start(&f);
    let port = web.port;
    let cookie = web.cookie();
    let cookie = cookie.as_str();
    let csrf = web.csrf();
    assert_eq!(csrf.len(), 64);
    let csrf = csrf.as_str();
    let undo = format!("/api/sessions/s/turns/{turn_id}/undo");
    let undo = undo.as_str();
    let confirmed = r#"{"scope":"files","confirm":true}"#;
    let zeros = format!("clawsmith_web_{port}=00000000000000000000000000000000");
    let zeros = zeros.as_str();
    let evil = format!("evil.example:{port}");
    let next_port = format!("127.0.0.1:{}", port + 1);
    let before = snapshot(&f.ws());
    check_refusals(
        port,
        &[
            // No token, no cookie: 401 on pages, assets and API alike; a wrong one is no better.
            ("GET", "/", vec![], "", 401, "unauthorized"),
            ("GET", "/sessions/s", vec![], "", 401, "unauthorized"),
            ("GET", "/assets/app.js", vec![], "", 401, "unauthorized"),
            ("GET", "/api/sessions", vec![], "", 401, "unauthorized"),
            (
                "GET",
                "/api/sessions",
                vec![("Cookie", zeros)],
                "",
                401,
                "unauthorized",
            ),
            (
                "GET",
                "/?token=00000000000000000000000000000000",
                vec![],
                "",
                401,
                "unauthorized",
            ),
            // DNS rebinding: the right cookie under another name is refused.
            (
                "GET",
                "/api/sessions",
                vec![("Host", "evil.example"), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            (
                "GET",
                "/api/sessions",
                vec![("Host", &evil), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            (
                "GET",
                "/api/sessions",
                vec![("Host", &next_port), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            // A POST without the CSRF token, with another one, or with the cookie's token itself.
            (
                "POST",
                undo,
                vec![("Cookie", cookie)],
                confirmed,
                403,
                "csrf_refused",
            ),
            (
                "POST",
                undo,
                vec![("Cookie", cookie), ("X-CSRF-Token", "not-the-token")],
                confirmed,
                403,
                "csrf_refused",
            ),
            (
                "POST",
                undo,
                vec![("Cookie", cookie), ("X-CSRF-Token", &web.token)],
                confirmed,
                403,
                "csrf_refused",
            ),
            // Other methods are not served; an undo must be confirmed and well formed.
            (
                "DELETE",
                "/api/sessions/s",
                vec![("Cookie", cookie)],
                "",
                405,
                "method_not_allowed",
            ),
            (
                "POST",
                undo,
                vec![("Cookie", cookie), ("X-CSRF-Token", csrf)],
                r#"{"scope":"files"}"#,
                400,
                "confirmation_required",
            ),
            (
                "POST",
                undo,
                vec![("Cookie", cookie), ("X-CSRF-Token", csrf)],
                r#"{"scope":"everything","confirm":true}"#,
                400,
                "bad_request",
            ),
            (
                "GET",
                "/api/sessions/nope",
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
            (
                "GET",
                "/api/sessions/s/turns/nope",
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
        ],
    );
    assert_eq!(snapshot(&f.ws()), before);

    // The token sets an HttpOnly, SameSite=Strict cookie and leaves the address bar.
    let reply = http(port, "GET", &format!("/?token={}", web.token), &[], "");
    assert_eq!(reply.status, 303);
    assert!(
        reply.headers.contains("\r\nlocation: /\r\n"),
        "{}",
        reply.headers
    );
    let set_cookie = format!(
        "set-cookie: {}; httponly; samesite=strict; path=/",
        cookie.to_lowercase()
    );
    assert!(reply.headers.contains(&set_cookie), "{}", reply.headers);

    // With the cookie: served under either name, with a CSP that allows no inline script, and
    // no CORS even when another origin asks.
    let page = http(port, "GET", "/sessions/s", &[("Cookie", cookie)], "");
    assert_eq!(page.status, 200);
    assert!(
        page.headers
            .contains("content-security-policy: default-src 'none'; script-src 'self';")
    );
    assert!(!page.headers.contains("unsafe-inline"));
    assert!(!page.body.contains("<script>"), "no inline script");
    let localhost = format!("localhost:{port}");
    let origin = [
        ("Cookie", cookie),
        ("Origin", "http://evil.example"),
        ("Host", localhost.as_str()),
    ];
    let sessions = http(port, "GET", "/api/sessions", &origin, "");
    assert_eq!(sessions.status, 200);
    assert!(!sessions.headers.contains("access-control-allow"));
    assert_eq!(sessions.json()["sessions"][0]["id"], "s");

    // Events come in pages: `after`, `limit`, `nextAfter`, `more`.
    let page = http(
        port,
        "GET",
        "/api/sessions/s/events?after=1&limit=2",
        &[("Cookie", cookie)],
        "",
    )
    .json();
    let sequences: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, [2, 3]);
    assert_eq!(
        (page["nextAfter"].as_u64(), page["more"].as_bool()),
        (Some(3), Some(true))
    );

    // With the CSRF token, a confirmed undo over a file changed since is refused with its
    // conflict, and nothing changes.
    std::fs::write(f.ws().join("notes.txt"), "edited by a person\n").unwrap();
    let before = snapshot(&f.ws());
    let reply = http(
        port,
        "POST",
        undo,
        &[("Cookie", cookie), ("X-CSRF-Token", csrf)],
        confirmed,
    );
    assert_eq!(reply.status, 409, "{}", reply.body);
    let report = reply.json();
    assert_eq!(report["outcome"], "conflicts");
    assert_eq!(reply.code(), "undo_conflicts");
    assert_eq!(report["conflicts"][0]["path"], "notes.txt");
    assert_eq!(snapshot(&f.ws()), before);
}

#[test]
fn web_undo_is_refused_for_a_session_of_another_workspace() {
    let f = Fixture::new();
    let turn_id = session_with_a_write(&f);
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let web = Web::start_in(&f, &other);
    let cookie = web.cookie();
    let csrf = web.csrf();
    let before = snapshot(&f.ws());
    let reply = http(
        web.port,
        "POST",
        &format!("/api/sessions/s/turns/{turn_id}/undo"),
        &[("Cookie", &cookie), ("X-CSRF-Token", &csrf)],
        r#"{"scope":"files","confirm":true}"#,
    );
    assert_eq!(
        (reply.status, reply.code()),
        (409, "workspace_mismatch".into()),
        "{}",
        reply.body
    );
    assert_eq!(snapshot(&f.ws()), before);
    let session = http(
        web.port,
        "GET",
        "/api/sessions/s",
        &[("Cookie", &cookie)],
        "",
    )
    .json();
    assert_eq!(session["undoAvailable"], false);
}

/// A chromedriver and its headless Chromium, ended on drop.
struct Browser {
    driver: Child,
    client: Client,
}

impl Browser {
    async fn start() -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian `chromium-driver`; .ci/run installs it)");
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                            "--disable-dev-shm-usage", "--window-size=1280,1100"]}),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session in headless Chromium");
        Browser { driver, client }
    }

    async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
    }

    /// Waits until `script` (a function body returning a boolean) is true.
    async fn wait_until(&self, what: &str, script: &str) {
        for _ in 0..300 {
            if self.client.execute(script, vec![]).await.unwrap() == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting until {what}");
    }

    /// The element's text once it has any: the page fills elements from fetches it starts
    /// on a click, so an element can exist a moment before its text does.
    async fn text(&self, css: &str) -> String {
        let element = self.wait_for(css).await;
        for _ in 0..300 {
            let text = element.text().await.unwrap();
            if !text.is_empty() {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{css} stayed empty");
    }

    async fn screenshot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("CLAWSMITH_WEB_SCREENSHOTS") {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let png = self.client.screenshot().await.unwrap();
            std::fs::write(Path::new(&dir).join(name), png).unwrap();
        }
    }

    async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A session with every display kind the built-in tools make, a refusal, a fork, and a turn
/// that changed two files; returns that turn's id.
fn rich_session(f: &Fixture) -> String {
    std::fs::create_dir(f.ws().join("src")).unwrap();
    std::fs::write(
        f.ws().join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .unwrap();
    turn(
        f,
        "s",
        "full",
        &json!([
            call("read1", "read_file", json!({"path": "a.txt"})),
            call("search1", "search_files", json!({"query": "hello"})),
            call(
                "cmd1",
                "run_command",
                json!({"command": "echo built; exit 3"})
            ),
            call("outside1", "read_file", json!({"path": "../secret"})),
        ]),
    );
    let changed = turn(
        f,
        "s",
        "full",
        &json!([
            call(
                "edit1",
                "edit_file",
                json!({"path": "src/main.rs", "oldText": "hello", "newText": "hello, web"})
            ),
            call(
                "write1",
                "write_file",
                json!({"path": "README.md", "content": "# demo\n\nA tiny crate.\n"})
            ),
            call("big1", "run_command", json!({"command": "seq 1 20000"})),
        ]),
    );
    turn(
        f,
        "s",
        "read-only",
        &json!([call(
            "denied1",
            "write_file",
            json!({"path": "x.txt", "content": "x"})
        )]),
    );
    let fork = f.run(&["session", "fork", "s", "--as", "s-fork"], "");
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    changed
}

/// The one display kind no CLI tool makes (the background-command tools of a long-lived server
/// make it), written as the core writes events: a session of its own in the same store.
fn json_display_session(f: &Fixture) {
    let store = clawsmith_checkpoint::Store::open(f.state().join("clawsmith.db")).unwrap();
    let root = f.ws().canonicalize().unwrap();
    store.create_session("bg", root.to_str().unwrap()).unwrap();
    let completed = json!({
        "type": "tool.completed", "toolCallId": "json1", "turnId": "t1", "toolName": "command_status",
        "result": {"version": 1, "status": "success", "display": {"kind": "json", "title": "command 7",
                   "body": "{\"id\":7,\"state\":\"running\"}"}},
        "status": "success", "output": "{\"id\":7,\"state\":\"running\"}"
    });
    for payload in [json!({"type": "turn.started", "turnId": "t1"}), completed] {
        store
            .append_event("bg", serde_json::from_value(payload).unwrap(), 1)
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_pages_in_a_real_browser() {
    let f = Fixture::new();
    let changed_turn = rich_session(&f);
    json_display_session(&f);
    let web = Web::start(&f);
    let browser = Browser::start().await;
    let client = &browser.client;

    // The printed URL lets the browser in; the token leaves the address bar.
    client
        .goto(&web.url(&format!("/?token={}", web.token)))
        .await
        .unwrap();
    browser.wait_for("tr.session[data-id='s-fork']").await;
    assert_eq!(client.current_url().await.unwrap().as_str(), web.url("/"));
    let ids: Vec<String> = client
        .execute(
            "return [...document.querySelectorAll('tr.session')].map(r => r.dataset.id)",
            vec![],
        )
        .await
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["bg", "s-fork", "s"], "newest first");
    assert!(
        browser
            .text("tr.session[data-id='s-fork'] .fork")
            .await
            .contains("fork of s")
    );
    assert!(
        browser
            .text("tr.session[data-id='s'] .children")
            .await
            .contains("s-fork")
    );
    browser.screenshot("web-sessions.png").await;
    browser
        .wait_for("#search")
        .await
        .send_keys("fork")
        .await
        .unwrap();
    browser
        .wait_until(
            "the search keeps one session",
            "return document.querySelectorAll('tr.session').length === 1",
        )
        .await;
    assert_eq!(
        browser.text("tr.session").await.split_whitespace().next(),
        Some("s-fork")
    );

    // The timeline: every call a card, by display kind, with status, code, risk and refusals.
    browser
        .wait_for("tr.session a")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("#timeline .card[data-call='denied1']")
        .await;
    assert_eq!(
        client.current_url().await.unwrap().as_str(),
        web.url("/sessions/s-fork")
    );
    client.goto(&web.url("/sessions/s")).await.unwrap();
    browser
        .wait_for("#timeline .card[data-call='denied1']")
        .await;
    for (call, kind, status) in [
        ("read1", "text", "success"),
        ("search1", "search", "success"),
        ("cmd1", "command", "success"),
        ("edit1", "diff", "success"),
        ("big1", "command", "success"),
    ] {
        let card = format!(".card[data-call='{call}']");
        browser
            .wait_for(&format!(
                "{card}[data-kind='{kind}'][data-status='{status}']"
            ))
            .await;
    }
    assert!(
        browser
            .text(".card[data-call='search1'] .hit-path")
            .await
            .contains("src/main.rs")
    );
    let command = browser.text(".card[data-call='cmd1']").await;
    assert!(command.contains("exit code 3"), "{command}");
    assert!(command.contains("sandbox"), "{command}");
    assert!(command.contains("risk execute"), "{command}");
    assert!(
        browser
            .text(".card[data-call='edit1'] pre.diff .line.add")
            .await
            .contains("hello, web")
    );
    assert!(
        browser
            .text(".card[data-call='edit1'] pre.diff .line.del")
            .await
            .contains("hello")
    );
    let outside = browser.text(".card[data-call='outside1']").await;
    assert!(
        outside.contains("tool_failed") && outside.contains("Path is outside the workspace"),
        "{outside}"
    );
    let denied = browser.text(".card[data-call='denied1']").await;
    assert!(
        denied.contains("permission_denied")
            && denied.contains("refused")
            && denied.contains("read-only mode"),
        "{denied}"
    );
    assert!(
        browser
            .text(".card.request")
            .await
            .contains("model request")
    );
    client
        .execute("window.scrollTo(0, 0)", vec![])
        .await
        .unwrap();
    browser.screenshot("web-timeline.png").await;
    // The artifact, paged by bytes and by lines.
    browser
        .wait_for(".card[data-call='big1'] .artifact-open")
        .await
        .click()
        .await
        .unwrap();
    let first = browser.text(".card[data-call='big1'] .artifact-text").await;
    assert!(first.starts_with("1\n2\n3"), "{first}");
    browser
        .wait_for(".card[data-call='big1'] .artifact-next")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until("the next byte page", "return document.querySelector(\".card[data-call='big1'] .artifact-status\").textContent.startsWith('bytes 4096')")
        .await;
    browser
        .wait_for(".card[data-call='big1'] .artifact-mode")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until("a line page", "return /^lines 1–50 of 2000[01]$/.test(document.querySelector(\".card[data-call='big1'] .artifact-status\").textContent)")
        .await;
    client.goto(&web.url("/sessions/bg")).await.unwrap();
    let json_card = browser
        .text(".card[data-call='json1'][data-kind='json'] pre.json")
        .await;
    assert!(json_card.contains("\"state\": \"running\""), "{json_card}");

    // Live: a concurrent `clawsmith turn` appears without a reload.
    client.goto(&web.url("/sessions/s")).await.unwrap();
    browser
        .wait_for("#timeline .card[data-call='denied1']")
        .await;
    browser
        .wait_until(
            "the live stream is on",
            "return !document.getElementById('live').hidden",
        )
        .await;
    let turn_process = {
        let state = f.state();
        let ws = f.ws();
        tokio::task::spawn_blocking(move || {
            crate::run_binary(
                &[
                    "--state-dir",
                    state.to_str().unwrap(),
                    "turn",
                    "--workspace",
                    ws.to_str().unwrap(),
                    "--session",
                    "s",
                ],
                &json!([call("live1", "read_file", json!({"path": "b.txt"}))]).to_string(),
            )
        })
    };
    let run = turn_process.await.unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    browser
        .wait_for(".card[data-call='live1'][data-status='success'][data-kind='text']")
        .await;
    assert!(
        browser
            .text(".card[data-call='live1']")
            .await
            .contains("gamma")
    );

    // A turn's checkpoint: files, origin, and a diff on demand.
    client
        .goto(&web.url(&format!("/sessions/s/turns/{changed_turn}")))
        .await
        .unwrap();
    browser.wait_for("tr.file[data-path='README.md']").await;
    assert!(
        browser
            .text("tr.file[data-path='src/main.rs']")
            .await
            .contains("modified")
    );
    browser
        .wait_for("tr.file[data-path='src/main.rs'] .show-diff")
        .await
        .click()
        .await
        .unwrap();
    assert!(
        browser
            .text(".diff-holder pre.diff .line.add")
            .await
            .contains("hello, web")
    );

    // Undo with a conflict: the preview lists it, confirming is impossible, nothing changed.
    std::fs::write(f.ws().join("README.md"), "# changed by a person\n").unwrap();
    let before = snapshot(&f.ws());
    browser
        .wait_for("#preview-files")
        .await
        .click()
        .await
        .unwrap();
    let conflicts = browser.text("#undo-conflicts").await;
    assert!(
        conflicts.contains("README.md") && conflicts.contains("1 conflict"),
        "{conflicts}"
    );
    assert_eq!(
        browser
            .wait_for("#undo-confirm")
            .await
            .attr("disabled")
            .await
            .unwrap(),
        Some("true".into())
    );
    browser.screenshot("web-undo-conflict.png").await;
    assert_eq!(snapshot(&f.ws()), before, "a preview changes nothing");

    // Put the agent's version back: the preview is clean, and the confirmed undo restores.
    std::fs::write(f.ws().join("README.md"), "# demo\n\nA tiny crate.\n").unwrap();
    browser
        .wait_for("#preview-files")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until("a clean preview", "const p = document.getElementById('undo-preview'); return !!p && p.dataset.conflicts === '0'")
        .await;
    let preview = browser.text("#undo-preview").await;
    assert!(
        preview.contains("src/main.rs") && preview.contains("README.md"),
        "{preview}"
    );
    browser.screenshot("web-turn.png").await;
    browser
        .wait_for("#undo-confirm")
        .await
        .click()
        .await
        .unwrap();
    let done = browser.text("#undo-done").await;
    assert!(done.contains("Restored 1, removed 1"), "{done}");
    assert!(!f.ws().join("README.md").exists());
    assert_eq!(
        std::fs::read_to_string(f.ws().join("src/main.rs")).unwrap(),
        "fn main() {\n    println!(\"hello\");\n}\n"
    );
    browser.close().await;
}
