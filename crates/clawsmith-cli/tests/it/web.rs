//! `clawsmith web` end to end: the guard over plain HTTP (404 outside the instance's prefix, 401
//! without the token or cookie, a foreign Host or Origin refused, a POST without the CSRF secret
//! refused), the login redirect that never leaves the server, a start from a home directory that
//! holds the default state directory (undo off, and why), and the pages in a real headless
//! Chromium driven over WebDriver (sessions named by what they did, a timeline with every display
//! kind, a diff, the undo flow with a conflict, a live update from a concurrent `clawsmith turn`,
//! and a server on another port that gets no credential and can neither read nor undo), and the
//! view over the fleet store (PostgreSQL) of a session another host writes, told of its commits.
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
use crate::http_client::Reply;

/// A running `clawsmith web`, killed on drop.
struct Web {
    child: Child,
    port: u16,
    /// `/s/<hex>/`: where every page and route of this instance lives.
    prefix: String,
    token: String,
}

impl Web {
    fn start(f: &Fixture) -> Web {
        Web::start_in(f, &f.ws())
    }

    /// `clawsmith web` whose undo may write in `workspace`.
    fn start_in(f: &Fixture, workspace: &Path) -> Web {
        let mut command = Command::new(env!("CARGO_BIN_EXE_clawsmith"));
        command
            .args([
                "--state-dir",
                f.state().to_str().unwrap(),
                "web",
                "--workspace",
            ])
            .arg(workspace)
            .stderr(Stdio::inherit());
        Web::spawn(command)
    }

    /// Starts `command` (a `clawsmith web`) and reads the URL it prints.
    fn spawn(mut command: Command) -> Web {
        let mut child = command
            .env_remove("CLAWSMITH_STATE_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
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
        let (port, rest) = rest.split_once('/').unwrap();
        let (prefix, token) = rest.split_once("?token=").unwrap();
        let secret = prefix
            .strip_prefix("s/")
            .and_then(|p| p.strip_suffix('/'))
            .unwrap_or_else(|| panic!("the prefix is /s/<hex>/: {line:?}"));
        for value in [secret, token] {
            assert_eq!(value.len(), 32, "128 bits as hex: {value}");
            assert!(value.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        assert_ne!(secret, token, "the prefix and the token are drawn apart");
        Web {
            child,
            port: port.parse().unwrap(),
            prefix: format!("/{prefix}"),
            token: token.to_owned(),
        }
    }

    /// The CSRF secret a page served with the cookie carries.
    fn csrf(&self) -> String {
        let page = http(
            self.port,
            "GET",
            &self.path("/"),
            &[("Cookie", &self.cookie())],
            "",
        );
        page.body
            .split("name=\"csrf-token\" content=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_owned()
    }

    /// `path` under this instance's prefix.
    fn path(&self, path: &str) -> String {
        format!("{}{}", self.prefix, path.trim_start_matches('/'))
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.path(path))
    }

    /// The URL `clawsmith web` printed.
    fn login_url(&self) -> String {
        self.url(&format!("/?token={}", self.token))
    }

    fn cookie(&self) -> String {
        format!("clawsmith_web={}", self.token)
    }

    /// `GET path` (under the prefix) with the cookie, as JSON.
    fn get(&self, path: &str) -> Value {
        http(
            self.port,
            "GET",
            &self.path(path),
            &[("Cookie", &self.cookie())],
            "",
        )
        .json()
    }

    /// `POST path` (under the prefix) with the cookie and the CSRF secret.
    fn post(&self, path: &str, body: &str) -> Reply {
        let headers = [("Cookie", self.cookie()), ("X-CSRF-Token", self.csrf())];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        http(self.port, "POST", &self.path(path), &headers, body)
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// [`crate::http_client::http`] with a text body.
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    crate::http_client::http(port, method, path, headers, body.as_bytes())
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
    assert_eq!(csrf.len(), 32);
    assert_ne!(csrf, web.token, "the CSRF secret is not the token");
    let csrf = csrf.as_str();
    let p = |path: &str| web.path(path);
    let undo_outside = format!("/api/sessions/s/turns/{turn_id}/undo");
    let undo = p(&undo_outside);
    let undo = undo.as_str();
    let confirmed = r#"{"scope":"files","confirm":true}"#;
    let zeros = "clawsmith_web=00000000000000000000000000000000";
    let evil = format!("evil.example:{port}");
    let next_port = format!("127.0.0.1:{}", port + 1);
    let other_origin = format!("http://127.0.0.1:{}", port + 1);
    let (root, page, script, sessions) = (
        p("/"),
        p("/sessions/s"),
        p("/assets/app.js"),
        p("/api/sessions"),
    );
    let login_zeros = p("/?token=00000000000000000000000000000000");
    let other_prefix = format!(
        "/s/00000000000000000000000000000000/api/sessions?token={}",
        web.token
    );
    let before = snapshot(&f.ws());
    check_refusals(
        port,
        &[
            // Outside the prefix nothing is served, with or without the token or the cookie.
            ("GET", "/", vec![], "", 404, "not_found"),
            ("GET", "/", vec![("Cookie", cookie)], "", 404, "not_found"),
            (
                "GET",
                "/api/sessions",
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
            (
                "GET",
                &format!("/?token={}", web.token),
                vec![],
                "",
                404,
                "not_found",
            ),
            (
                "POST",
                &undo_outside,
                vec![("Cookie", cookie), ("X-CSRF-Token", csrf)],
                confirmed,
                404,
                "not_found",
            ),
            ("GET", &other_prefix, vec![], "", 404, "not_found"),
            ("GET", "/favicon.ico", vec![], "", 404, "not_found"),
            // Under the prefix, no cookie: 401 on pages, assets and API alike; a wrong one or a
            // wrong token is no better.
            ("GET", &root, vec![], "", 401, "unauthorized"),
            ("GET", &page, vec![], "", 401, "unauthorized"),
            ("GET", &script, vec![], "", 401, "unauthorized"),
            ("GET", &sessions, vec![], "", 401, "unauthorized"),
            (
                "GET",
                &sessions,
                vec![("Cookie", zeros)],
                "",
                401,
                "unauthorized",
            ),
            ("GET", &login_zeros, vec![], "", 401, "unauthorized"),
            // DNS rebinding: the right cookie under another name is refused.
            (
                "GET",
                &sessions,
                vec![("Host", "evil.example"), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            (
                "GET",
                &sessions,
                vec![("Host", &evil), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            (
                "GET",
                &sessions,
                vec![("Host", &next_port), ("Cookie", cookie)],
                "",
                403,
                "foreign_host",
            ),
            // A page of another origin (another port of this host included) is refused, even
            // with the cookie and the CSRF secret.
            (
                "GET",
                &sessions,
                vec![("Cookie", cookie), ("Origin", "http://evil.example")],
                "",
                403,
                "foreign_origin",
            ),
            (
                "POST",
                undo,
                vec![
                    ("Cookie", cookie),
                    ("X-CSRF-Token", csrf),
                    ("Origin", &other_origin),
                ],
                confirmed,
                403,
                "foreign_origin",
            ),
            (
                "POST",
                undo,
                vec![
                    ("Cookie", cookie),
                    ("X-CSRF-Token", csrf),
                    ("Origin", "null"),
                ],
                confirmed,
                403,
                "foreign_origin",
            ),
            // A POST without the CSRF secret, with another one, or with the token itself.
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
            // The CSRF secret without the cookie.
            (
                "POST",
                undo,
                vec![("X-CSRF-Token", csrf)],
                confirmed,
                401,
                "unauthorized",
            ),
            // Other methods are not served; an undo must be confirmed and well formed.
            (
                "DELETE",
                &p("/api/sessions/s"),
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
                &p("/api/sessions/nope"),
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
            (
                "GET",
                &p("/api/sessions/s/turns/nope"),
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
            (
                "GET",
                &p("/api/nothing"),
                vec![("Cookie", cookie)],
                "",
                404,
                "not_found",
            ),
        ],
    );
    assert_eq!(snapshot(&f.ws()), before);

    // The token sets an HttpOnly, SameSite=Strict cookie that only URLs under the prefix receive,
    // and leaves the address bar.
    let reply = http(port, "GET", &p(&format!("/?token={}", web.token)), &[], "");
    assert_eq!(reply.status, 303);
    assert!(
        reply
            .headers
            .contains(&format!("\r\nlocation: {}\r\n", web.prefix)),
        "{}",
        reply.headers
    );
    let set_cookie = format!(
        "set-cookie: clawsmith_web={}; path={}; httponly; samesite=strict\r\n",
        web.token, web.prefix
    );
    assert!(reply.headers.contains(&set_cookie), "{}", reply.headers);

    // With the cookie: served under either name, with a CSP that allows no inline script, and
    // no CORS headers ever.
    let page = http(port, "GET", &p("/sessions/s"), &[("Cookie", cookie)], "");
    assert_eq!(page.status, 200);
    assert!(
        page.headers
            .contains("content-security-policy: default-src 'none'; script-src 'self';")
    );
    assert!(page.headers.contains("referrer-policy: no-referrer"));
    assert!(!page.headers.contains("unsafe-inline"));
    assert!(!page.body.contains("<script>"), "no inline script");
    assert!(page.body.contains(&format!("content=\"{}\"", web.prefix)));
    let localhost = format!("localhost:{port}");
    let own_origin = format!("http://localhost:{port}");
    let origin = [
        ("Cookie", cookie),
        ("Origin", own_origin.as_str()),
        ("Host", localhost.as_str()),
    ];
    let sessions = http(port, "GET", &p("/api/sessions"), &origin, "");
    assert_eq!(sessions.status, 200);
    assert!(!sessions.headers.contains("access-control-allow"));
    assert_eq!(sessions.json()["sessions"][0]["id"], "s");

    // Events come in pages: `after`, `limit`, `nextAfter`, `more`.
    let page = http(
        port,
        "GET",
        &p("/api/sessions/s/events?after=1&limit=2"),
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

    // With the CSRF secret, a confirmed undo over a file changed since is refused with its
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

    // Put back, the file no longer conflicts: `undo all` rewinds the files and the session, and
    // the session page still shows the turn's events, kept and marked undone.
    std::fs::write(f.ws().join("notes.txt"), "by the agent\n").unwrap();
    let events_before = http(
        port,
        "GET",
        &p("/api/sessions/s/events?after=0&limit=100"),
        &[("Cookie", cookie)],
        "",
    )
    .json()["events"]
        .clone();
    let reply = http(
        port,
        "POST",
        undo,
        &[("Cookie", cookie), ("X-CSRF-Token", csrf)],
        r#"{"scope":"all","confirm":true}"#,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!f.ws().join("notes.txt").exists());
    let page = http(
        port,
        "GET",
        &p("/api/sessions/s"),
        &[("Cookie", cookie)],
        "",
    )
    .json();
    let undone = page["undone"].as_array().unwrap();
    assert_eq!(undone.len(), 1, "{page}");
    assert_eq!(undone[0]["turnId"], turn_id.as_str());
    assert_eq!(undone[0]["scope"], "all");
    assert_eq!(undone[0]["events"], events_before, "kept as they were");
    let live = http(
        port,
        "GET",
        &p("/api/sessions/s/events?after=0&limit=100"),
        &[("Cookie", cookie)],
        "",
    )
    .json();
    assert_eq!(live["events"], json!([]));
}

/// The login's redirect never leaves the prefix, whatever the path carries: outside the prefix
/// there is no redirect at all (and no cookie), inside it the target is ours.
#[test]
fn web_login_redirect_never_leaves_the_server() {
    let f = Fixture::new();
    session_with_a_write(&f);
    let web = Web::start(&f);
    let token = web.token.as_str();
    let prefix = web.prefix.as_str();
    let under = |rest: &str| format!("{prefix}{rest}?token={token}");
    // (request target, status, where the redirect goes; None = no redirect)
    let cases: Vec<(String, u16, Option<String>)> = vec![
        (format!("//evil.example/?token={token}"), 404, None),
        (format!("/%2F%2Fevil.example/?token={token}"), 404, None),
        (format!("/%5Cevil.example/?token={token}"), 404, None),
        (format!("/http://evil.example/?token={token}"), 404, None),
        (format!("http://evil.example/?token={token}"), 404, None),
        (
            format!("http://evil.example{prefix}?token={token}"),
            303,
            Some(prefix.to_owned()),
        ),
        (under("/evil.example/"), 303, Some(prefix.to_owned())),
        (under("//evil.example/"), 303, Some(prefix.to_owned())),
        (under("%2F%2Fevil.example"), 303, Some(prefix.to_owned())),
        (under("%5Cevil.example"), 303, Some(prefix.to_owned())),
        (
            under("sessions/..//evil.example"),
            303,
            Some(prefix.to_owned()),
        ),
        (
            under("sessions/s/turns/../../../../evil.example"),
            303,
            Some(prefix.to_owned()),
        ),
        (under("https:/evil.example"), 303, Some(prefix.to_owned())),
        (under("\\evil.example"), 303, Some(prefix.to_owned())),
        (
            under("sessions/\\evil.example"),
            303,
            Some(prefix.to_owned()),
        ),
        (format!("/\\evil.example/?token={token}"), 404, None),
        (under(""), 303, Some(prefix.to_owned())),
        (
            under("sessions/s"),
            303,
            Some(format!("{prefix}sessions/s")),
        ),
    ];
    for (target, status, location) in cases {
        let reply = http(web.port, "GET", &target, &[], "");
        let found = reply
            .headers
            .lines()
            .find_map(|line| line.strip_prefix("location: "))
            .map(str::to_owned);
        assert_eq!(
            (reply.status, found.as_deref()),
            (
                status,
                location.as_deref().map(str::to_lowercase).as_deref()
            ),
            "{target}: {}",
            reply.body
        );
        assert_eq!(
            reply.headers.contains("set-cookie"),
            location.is_some(),
            "a cookie only with a redirect under the prefix: {target}"
        );
        if status == 404 {
            assert_eq!(reply.code(), "not_found", "{target}");
        }
    }
}

#[test]
fn web_undo_is_refused_for_a_session_of_another_workspace() {
    let f = Fixture::new();
    let turn_id = session_with_a_write(&f);
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let web = Web::start_in(&f, &other);
    let before = snapshot(&f.ws());
    let reply = web.post(
        &format!("/api/sessions/s/turns/{turn_id}/undo"),
        r#"{"scope":"files","confirm":true}"#,
    );
    assert_eq!(
        (reply.status, reply.code()),
        (409, "workspace_mismatch".into()),
        "{}",
        reply.body
    );
    assert_eq!(snapshot(&f.ws()), before);
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("clawsmith web --workspace") && message.contains("works in"),
        "{message}"
    );
    let session = web.get("/api/sessions/s");
    assert_eq!(session["undoAvailable"], false);
    assert_eq!(session["undoRefusal"], message.as_str());
    let other = other.canonicalize().unwrap();
    assert_eq!(session["undo"]["workspace"], other.to_str().unwrap());
}

/// A home directory of its own (never the real one), under the target directory: the state
/// directory is the default one inside it, and a project sits next to it.
struct FakeHome {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl FakeHome {
    /// A home with `project/` whose session `s` wrote `notes.txt` in one turn (returned).
    fn with_a_session() -> (FakeHome, String) {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-home");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::tempdir_in(&base).unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir(home.join("project")).unwrap();
        let fake = FakeHome { _dir: dir, home };
        let calls = json!([call(
            "w1",
            "write_file",
            json!({"path": "notes.txt", "content": "by the agent\n"})
        )]);
        let project = fake.project();
        let run = crate::run_binary_with(
            &[
                "turn",
                "--workspace",
                project.to_str().unwrap(),
                "--mode",
                "full",
                "--session",
                "s",
            ],
            &calls.to_string(),
            |command| {
                fake.environment(command);
            },
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let turn = run.lines().pop().unwrap()["turnId"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            fake.home
                .join(".local/state/clawsmith/clawsmith.db")
                .exists()
        );
        (fake, turn)
    }

    fn project(&self) -> PathBuf {
        self.home.join("project")
    }

    /// HOME is this one, the state directory its default, the current directory the home.
    fn environment(&self, command: &mut Command) {
        command
            .env("HOME", &self.home)
            .env_remove("XDG_STATE_HOME")
            .env_remove("CLAWSMITH_STATE_DIR")
            .current_dir(&self.home);
    }

    /// `clawsmith web EXTRA...` started in the home; its stderr goes to `stderr.txt` there.
    fn web(&self, extra: &[&str]) -> Web {
        let mut command = Command::new(env!("CARGO_BIN_EXE_clawsmith"));
        command.arg("web").args(extra);
        self.environment(&mut command);
        command.stderr(std::fs::File::create(self.home.join("stderr.txt")).unwrap());
        Web::spawn(command)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.home.join("stderr.txt")).unwrap()
    }
}

#[test]
fn web_starts_from_home_and_says_why_undo_is_off() {
    let (home, turn_id) = FakeHome::with_a_session();
    let web = home.web(&[]);
    let reason = format!(
        "undo is off: the current directory {} holds the state directory {}",
        home.home.display(),
        home.home.join(".local/state/clawsmith").display()
    );
    assert!(home.stderr().contains(&reason), "{}", home.stderr());
    let server = web.get("/api/server");
    assert_eq!(server["undo"]["workspace"], Value::Null);
    assert!(
        server["undo"]["off"].as_str().unwrap().starts_with(&reason),
        "{server}"
    );

    // The list names the session by what it did, where, how much and when.
    let sessions = web.get("/api/sessions");
    let session = &sessions["sessions"][0];
    assert_eq!(session["id"], "s");
    assert_eq!(session["title"], "write_file: Create notes.txt (13 bytes)");
    assert_eq!(session["titleSource"], "tool");
    assert_eq!(
        (session["turns"].as_u64(), session["changes"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(session["workspaceRoot"], home.project().to_str().unwrap());
    assert!(
        session["lastActivityMs"].as_u64().unwrap() >= session["createdAtMs"].as_u64().unwrap()
    );
    let found = web.get("/api/sessions?q=NOTES.txt");
    assert_eq!(
        found["sessions"].as_array().unwrap().len(),
        1,
        "the title is searched"
    );

    // Undo and its preview are refused with the reason; nothing changes.
    let before = snapshot(&home.project());
    for route in ["undo-preview", "undo"] {
        let reply = web.post(
            &format!("/api/sessions/s/turns/{turn_id}/{route}"),
            r#"{"scope":"files","confirm":true}"#,
        );
        assert_eq!(
            (reply.status, reply.code()),
            (409, "undo_off".into()),
            "{}",
            reply.body
        );
        assert!(
            reply.body.contains("clawsmith web --workspace DIR"),
            "{}",
            reply.body
        );
    }
    assert_eq!(snapshot(&home.project()), before);
    drop(web);

    // Naming the home itself as the workspace is refused at once: it holds the state directory.
    let run = crate::run_binary_with(&["web", "--workspace", "."], "", |command| {
        home.environment(command);
    });
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("is inside the workspace"),
        "{}",
        run.stderr
    );

    // From the home with the project named, undo works there.
    let project = home.project();
    let web = home.web(&["--workspace", project.to_str().unwrap()]);
    let reply = web.post(
        &format!("/api/sessions/s/turns/{turn_id}/undo"),
        r#"{"scope":"files","confirm":true}"#,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["outcome"], "undone");
    assert!(!project.join("notes.txt").exists());
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
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for payload in [json!({"type": "turn.started", "turnId": "t1"}), completed] {
        store
            .append_event("bg", serde_json::from_value(payload).unwrap(), now_ms)
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
    client.goto(&web.login_url()).await.unwrap();
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
        browser
            .wait_for("tr.session")
            .await
            .attr("data-id")
            .await
            .unwrap()
            .as_deref(),
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

/// A server on another port of 127.0.0.1, as a dev server or another user's process would be:
/// it records the head of every request it receives and answers `GET /` with `page`.
struct OtherServer {
    port: u16,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl OtherServer {
    fn start(page: String) -> OtherServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(value) = line.to_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    head.push_str(&line);
                }
                let mut body = vec![0; length];
                let _ = reader.read_exact(&mut body);
                let answer = if head.starts_with("GET / ") {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                        page.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_owned()
                };
                recorded.lock().unwrap().push(head);
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        OtherServer { port, requests }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// The other server's page: with everything but the credentials (the server's port, and even its
/// prefix, the worst case), it tries to read the API and to post an undo, and shows what it got.
fn other_page(web: &Web, turn: &str) -> String {
    let origin = format!("http://127.0.0.1:{}", web.port);
    format!(
        r#"<!doctype html><title>another server</title><body><script>
const origin = "{origin}", prefix = "{prefix}", turn = "{turn}";
const results = {{ cookie: document.cookie }};
async function read(name, url) {{
  try {{ const r = await fetch(url, {{ credentials: "include" }}); results[name] = "read " + r.status + " " + await r.text(); }}
  catch (e) {{ results[name] = "blocked"; }}
}}
async function post(name, url) {{
  try {{
    await fetch(url, {{ method: "POST", mode: "no-cors", credentials: "include",
      headers: {{ "Content-Type": "text/plain" }}, body: JSON.stringify({{ scope: "files", confirm: true }}) }});
    results[name] = "sent";
  }} catch (e) {{ results[name] = "failed"; }}
}}
(async () => {{
  await read("api", origin + "/api/sessions");
  await read("apiUnderPrefix", origin + prefix + "api/sessions");
  await read("page", origin + prefix);
  await post("undo", origin + "/api/sessions/s/turns/" + turn + "/undo");
  await post("undoUnderPrefix", origin + prefix + "api/sessions/s/turns/" + turn + "/undo");
  document.body.dataset.results = JSON.stringify(results);
}})();
</script></body>"#,
        prefix = web.prefix,
    )
}

/// After a browser has logged in to `clawsmith web`, a server on another port of 127.0.0.1
/// receives no credential (no cookie, no token, no prefix in a Referer), cannot read the API
/// from its page, and cannot undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_credentials_stay_with_their_server_in_a_real_browser() {
    let (home, turn_id) = FakeHome::with_a_session();
    let project = home.project();
    // Started from the home, the default state directory inside it: undo armed for the project.
    let web = home.web(&["--workspace", project.to_str().unwrap()]);
    let other = OtherServer::start(other_page(&web, &turn_id));
    let browser = Browser::start().await;
    let client = &browser.client;

    client.goto(&web.login_url()).await.unwrap();
    browser.wait_for("tr.session[data-id='s']").await;
    assert_eq!(client.current_url().await.unwrap().as_str(), web.url("/"));
    assert_eq!(
        browser.text("tr.session[data-id='s'] a.title").await,
        "write_file: Create notes.txt (13 bytes)"
    );
    assert_eq!(
        browser.text("tr.session[data-id='s'] .counts").await,
        "1 turn · 1 change"
    );
    assert!(
        browser
            .text("#undo-workspace")
            .await
            .contains(project.to_str().unwrap())
    );
    // The cookie is out of reach of scripts, and scoped to the prefix.
    let cookie = client.get_named_cookie("clawsmith_web").await.unwrap();
    assert_eq!(cookie.value(), web.token);
    assert_eq!(cookie.path(), Some(web.prefix.as_str()));
    assert_eq!(cookie.http_only(), Some(true));
    let script_cookies = client
        .execute("return document.cookie", vec![])
        .await
        .unwrap();
    assert_eq!(script_cookies, json!(""));

    // The page sends the browser to the other server (as a link would), which then probes.
    let before = snapshot(&project);
    client
        .execute(
            &format!("location.href = 'http://127.0.0.1:{}/'", other.port),
            vec![],
        )
        .await
        .unwrap();
    browser
        .wait_until(
            "the other server's page has probed",
            "return !!document.body && !!document.body.dataset.results",
        )
        .await;
    let results: Value = serde_json::from_str(
        client
            .execute("return document.body.dataset.results", vec![])
            .await
            .unwrap()
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        results,
        json!({"cookie": "", "api": "blocked", "apiUnderPrefix": "blocked", "page": "blocked",
               "undo": "sent", "undoUnderPrefix": "sent"}),
        "the other page reads nothing (its posts go out, opaque)"
    );
    let requests = other.requests();
    let arrival = requests
        .iter()
        .find(|r| r.starts_with("GET / "))
        .unwrap_or_else(|| panic!("{requests:?}"));
    // No Referer names the page the browser came from (`no-referrer`).
    assert!(!arrival.to_lowercase().contains("\nreferer:"), "{arrival}");
    for request in &requests {
        let lower = request.to_lowercase();
        assert!(!lower.contains("cookie:"), "{request}");
        assert!(!lower.contains("clawsmith_web"), "{request}");
        assert!(!request.contains(&web.token), "{request}");
        assert!(!request.contains(&web.prefix), "{request}");
        assert!(
            !lower.contains(&format!("127.0.0.1:{}", web.port)),
            "{request}"
        );
    }

    // Nothing was undone: the file is the agent's, and the turn is not marked undone.
    assert_eq!(snapshot(&project), before);
    let turn = web.get(&format!("/api/sessions/s/turns/{turn_id}"));
    assert_eq!(turn["checkpoint"]["filesUndone"], false);

    // Back at clawsmith web, the browser is still logged in (the cookie was not lost) and an
    // open redirect in the printed URL's place goes nowhere else.
    client.goto(&web.url("/")).await.unwrap();
    browser.wait_for("tr.session[data-id='s']").await;
    for target in [
        format!("//evil.example/?token={}", web.token),
        format!("/\\evil.example/?token={}", web.token),
        format!("{}/evil.example/?token={}", web.prefix, web.token),
        format!("{}%2F%2Fevil.example?token={}", web.prefix, web.token),
    ] {
        client
            .goto(&format!("http://127.0.0.1:{}{target}", web.port))
            .await
            .unwrap();
        let url = client.current_url().await.unwrap();
        assert_eq!(
            (url.host_str(), url.port()),
            (Some("127.0.0.1"), Some(web.port)),
            "{target} went to {url}"
        );
    }
    browser.close().await;
}

/// `clawsmith web` over the fleet store: a session another host writes (here a store of the
/// test's own) is listed, named, opened with its checkpoint and diff, and its live timeline is
/// told of a new event by the database's notification, well before its fallback read would have
/// found it; in the session's workspace, its turn is previewed and undone.
#[test]
fn web_shows_and_follows_a_session_another_host_writes_to_the_fleet_store() {
    use clawsmith_protocol::{EventPayload, ModelMessage, Role, TurnStarted};
    use clawsmith_store::{SessionStore, TurnOpening, TurnStore};
    use clawsmith_store_postgres::{PgOptions, PgStore};

    let Some(url) = crate::store::migrated_database("web") else {
        return;
    };
    let host = PgStore::connect(&url, PgOptions::default()).unwrap();
    let id = "fleet-web-1";
    let f = Fixture::new();
    let workspace = f.dir.path().join("shared-checkout");
    std::fs::create_dir(&workspace).unwrap();
    let root = clawsmith_fs::Workspace::open(&workspace)
        .unwrap()
        .root()
        .display()
        .to_string();
    host.create_session(id, &root).unwrap();
    host.append_message(id, &ModelMessage::text(Role::User, "tidy the fleet docs"))
        .unwrap();
    host.begin_turn(id, "t1", TurnOpening::default()).unwrap();
    let (old, new) = (b"one\ntwo\n".as_slice(), b"one\n2\n".as_slice());
    host.record_before(id, "t1", "a.txt", Some((old, 0o644)))
        .unwrap();
    let post = (clawsmith_checkpoint::sha256(new), new.len() as u64, 0o644);
    host.record_after(id, "t1", "a.txt", Some(post)).unwrap();
    let finished = EventPayload::TurnStarted(TurnStarted {
        turn_id: "t1-done".to_owned(),
    });
    host.finish_turn_reading(id, "t1", &|_| Some(new.to_vec()), finished, 5)
        .unwrap();
    std::fs::write(workspace.join("a.txt"), new).unwrap();

    let config = f.dir.path().join("fleet.toml");
    std::fs::write(&config, "[store]\nkind = \"postgres\"\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawsmith"));
    command
        .args([
            "--state-dir",
            f.state().to_str().unwrap(),
            "web",
            "--workspace",
            &root,
            "--config",
        ])
        .arg(&config)
        .env("CLAWSMITH_DATABASE_URL", &url)
        .stderr(Stdio::inherit());
    let web = Web::spawn(command);

    let server = web.get("/api/server");
    assert_eq!(server["store"], "postgres", "{server}");
    assert_eq!(server["follows"], true, "{server}");
    assert_eq!(server["undo"]["workspace"], root.as_str(), "{server}");
    let sessions = web.get("/api/sessions");
    let listed = &sessions["sessions"][0];
    assert_eq!(listed["id"], id, "{sessions}");
    assert_eq!(listed["title"], "tidy the fleet docs", "{sessions}");
    assert_eq!(
        (&listed["turns"], &listed["changes"]),
        (&json!(1), &json!(1))
    );
    let session = web.get(&format!("/api/sessions/{id}"));
    assert_eq!(session["undoAvailable"], true, "{session}");
    assert_eq!(session["checkpoints"][0]["state"], "finished", "{session}");
    let diff = web.get(&format!("/api/sessions/{id}/turns/t1/diff?path=a.txt"));
    assert!(
        diff["unified"]
            .as_str()
            .is_some_and(|u| u.contains("-two\n") && u.contains("+2\n")),
        "{diff}"
    );
    let preview = web.post(
        &format!("/api/sessions/{id}/turns/t1/undo-preview"),
        r#"{"scope": "files"}"#,
    );
    assert_eq!(preview.status, 200, "{}", preview.body);
    let previewed: serde_json::Value = serde_json::from_str(&preview.body).unwrap();
    assert_eq!(
        (&previewed["restore"], &previewed["conflicts"]),
        (&json!(["a.txt"]), &json!([])),
        "{previewed}"
    );
    assert_eq!(std::fs::read(workspace.join("a.txt")).unwrap(), new);

    // The live timeline from the last event: the next one another host commits arrives as a
    // server-sent event.
    let last = session["lastSequence"].as_u64().unwrap();
    let mut live = TcpStream::connect(("127.0.0.1", web.port)).unwrap();
    live.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    write!(
        live,
        "GET {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nCookie: {}\r\nAccept: text/event-stream\r\n\r\n",
        web.path(&format!("/api/sessions/{id}/live?after={last}")),
        web.port,
        web.cookie()
    )
    .unwrap();
    let mut received = String::new();
    let mut buffer = [0_u8; 4096];
    // The answer's head is sent once the stream exists, and the stream listens from then on.
    while !received.contains("\r\n\r\n") {
        let n = live.read(&mut buffer).unwrap();
        assert!(n > 0, "the live stream closed: {received}");
        received.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    assert!(received.starts_with("HTTP/1.1 200"), "{received}");
    let appended = host
        .append_event(
            id,
            EventPayload::TurnStarted(TurnStarted {
                turn_id: "t2".to_owned(),
            }),
            6,
        )
        .unwrap();
    // Well inside the fallback read (`FOLLOWED_RECHECK`, 30 s): only the notification is this
    // quick.
    read_until_sequence(&mut live, &mut received, appended.sequence);
    assert!(received.contains("event: events"), "{received}");

    // The follower's connection dies (a restart, a failover): the timeline is not left deaf.
    // It polls while the follower reconnects, and the server follows again.
    let killed = std::process::Command::new("psql")
        .args(["-q", "-t", "-A", "-d", &url, "-c"])
        .arg(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE query = 'LISTEN clawsmith_events' AND datname = current_database()",
        )
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&killed.stdout).trim(),
        "1",
        "{killed:?}"
    );
    let again = host
        .append_event(
            id,
            EventPayload::TurnStarted(TurnStarted {
                turn_id: "t3".to_owned(),
            }),
            7,
        )
        .unwrap();
    read_until_sequence(&mut live, &mut received, again.sequence);
    let start = std::time::Instant::now();
    while web.get("/api/server")["follows"] != true {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server did not follow again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Confirmed, the undo puts the file back in the session's workspace and flags the turn.
    let undone = web.post(
        &format!("/api/sessions/{id}/turns/t1/undo"),
        r#"{"scope": "files", "confirm": true}"#,
    );
    assert_eq!(undone.status, 200, "{}", undone.body);
    assert_eq!(std::fs::read(workspace.join("a.txt")).unwrap(), old);
    assert_eq!(
        host.checkpoints(id).unwrap()[0].state,
        clawsmith_store::CheckpointState::Undone
    );
}

/// Reads the live stream into `received` until it holds the event numbered `sequence`, for at
/// most a third of the fallback read's period.
fn read_until_sequence(live: &mut TcpStream, received: &mut String, sequence: u64) {
    let start = std::time::Instant::now();
    let mut buffer = [0_u8; 4096];
    while !received.contains(&format!("\"sequence\":{sequence}")) {
        assert!(
            start.elapsed() < clawsmith_web::FOLLOWED_RECHECK / 3,
            "no live event {sequence} after {:?}: {received}",
            start.elapsed()
        );
        match live.read(&mut buffer) {
            Ok(0) => panic!("the live stream closed: {received}"),
            Ok(n) => received.push_str(&String::from_utf8_lossy(&buffer[..n])),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(error) => panic!("{error}"),
        }
    }
}
