//! `clawsmith run` against the scripted provider on 127.0.0.1: the loop, the evidence in
//! `session show`, a resumed session, and the API key kept out of the state directory.

use std::path::{Path, PathBuf};

use clawsmith_agent::fixture::{Scripted, ScriptedReply, ScriptedServer};

use crate::{Fixture, Run, read, run_binary_with};

const KEY_VARIABLE: &str = "CLAWSMITH_TEST_PROVIDER_KEY";
const KEY: &str = "sk-cli-test-0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a";

fn write_config(fixture: &Fixture, server: &ScriptedServer, kind: &str) -> PathBuf {
    let path = fixture.dir.path().join("clawsmith.toml");
    std::fs::write(
        &path,
        format!(
            "[provider]\nkind = \"{kind}\"\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
             api_key_env = \"{KEY_VARIABLE}\"\nretry_base_ms = 1\n",
            server.base_url()
        ),
    )
    .unwrap();
    path
}

fn run(fixture: &Fixture, config: &Path, extra: &[&str], task: &str) -> Run {
    run_with_env(fixture, config, extra, task, &[])
}

/// [`run`] with more environment variables.
fn run_with_env(
    fixture: &Fixture,
    config: &Path,
    extra: &[&str],
    task: &str,
    env: &[(&str, &str)],
) -> Run {
    let ws = fixture.ws();
    let state = fixture.state();
    let mut args = vec![
        "--state-dir",
        state.to_str().unwrap(),
        "--json",
        "run",
        "--workspace",
        ws.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(task);
    run_binary_with(&args, "", |command| {
        command.env(KEY_VARIABLE, KEY).envs(env.iter().copied());
    })
}

/// `clawsmith --json run` as a child with piped output, for tests that signal it.
fn spawn_run(fixture: &Fixture, config: &Path, extra: &[&str], task: &str) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new(env!("CARGO_BIN_EXE_clawsmith"))
        .arg("--state-dir")
        .arg(fixture.state())
        .args(["--json", "run", "--workspace"])
        .arg(fixture.ws())
        .arg("--config")
        .arg(config)
        .args(extra)
        .arg(task)
        .env_remove("CLAWSMITH_STATE_DIR")
        .env(KEY_VARIABLE, KEY)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn scan_for(dir: &Path, needle: &str) -> usize {
    let mut scanned = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            scanned += scan_for(&path, needle);
        } else if let Ok(bytes) = std::fs::read(&path) {
            scanned += 1;
            assert!(
                !bytes
                    .windows(needle.len())
                    .any(|window| window == needle.as_bytes()),
                "{} holds the API key",
                path.display()
            );
        }
    }
    scanned
}

#[test]
fn run_answers_records_evidence_resumes_and_keeps_the_key_out_of_the_state() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::queue(vec![
            Scripted::Status {
                status: 429,
                body: r#"{"error":{"message":"busy"}}"#.to_owned(),
                retry_after: Some(0),
            },
            Scripted::Reply(ScriptedReply::calls(&[(
                "read_file",
                r#"{"path":"a.txt"}"#,
            )])),
            Scripted::Reply(ScriptedReply::answer(&format!(
                "a.txt starts with alpha (key {KEY})"
            ))),
            Scripted::Reply(ScriptedReply::answer("second answer")),
        ]))
        .unwrap();
    let fixture = Fixture::new();
    let config = write_config(&fixture, &server, "openai");
    let first = run(&fixture, &config, &[], "read a.txt");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let lines = first.lines();
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "run.result");
    // An answer echoing the key is stored and printed masked.
    assert_eq!(result["answer"], "a.txt starts with alpha (key [REDACTED])");
    assert_eq!(result["turns"], 2);
    assert_eq!(result["stopReason"], "answered");
    assert_eq!(result["usage"]["inputTokens"], 22);
    let kinds: Vec<&str> = lines[..lines.len() - 1]
        .iter()
        .map(|line| line["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "model.request",
            "tool.started",
            "tool.completed",
            "model.request",
            "agent.stopped",
            "turn.completed"
        ]
    );
    let stopped = &lines[lines.len() - 3];
    assert_eq!(stopped["stopReason"], "answered");
    assert_eq!(stopped["turns"], 2);
    assert_eq!(stopped["usage"]["inputTokens"], 22);
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the 429 was retried once");
    assert_eq!(
        requests[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
    // The request evidence is in `session show`, under the id the provider was sent.
    let session = result["sessionId"].as_str().unwrap().to_owned();
    let show = fixture.run(&["--json", "session", "show", &session], "");
    assert_eq!(show.code, 0, "{}", show.stderr);
    for request in &requests[1..] {
        let id = &request.headers["x-request-id"];
        assert!(
            show.stdout.contains(id.as_str()),
            "{id} not in session show"
        );
    }
    assert!(show.stdout.contains("toolSchemaSha256"));
    assert!(show.stdout.contains("activatedTools"));
    assert!(show.stdout.contains(r#""type":"agent.stopped""#));
    // The timeline says why the run ended.
    let timeline = fixture.run(&["session", "show", &session], "");
    assert_eq!(timeline.code, 0, "{}", timeline.stderr);
    assert!(
        timeline
            .stdout
            .contains("agent answered after 2 requests · 22 in / 14 out tokens"),
        "{}",
        timeline.stdout
    );

    // `--session` continues with the stored history.
    let second = run(&fixture, &config, &["--session", &session], "and now?");
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(second.lines().last().unwrap()["answer"], "second answer");
    let sent = server.requests().pop().unwrap();
    let texts = sent.message_texts();
    let task = texts.iter().position(|text| text == "read a.txt").unwrap();
    assert!(
        texts[task + 1..]
            .iter()
            .any(|text| text.contains("alpha\nbeta")),
        "{texts:?}"
    );
    assert_eq!(texts.last().unwrap(), "and now?");

    assert!(scan_for(&fixture.state(), KEY) > 0);
}

/// A short API key (`x`, `k`, `ollama`: what local model servers take) never changes what the
/// model's calls do: the files are the bytes it asked for, the command ran as written, and the
/// stored history masks the key only where it stands as a whole token.
#[test]
fn a_short_api_key_is_masked_in_the_store_and_never_in_what_runs() {
    let cases = [
        ("x", "openai", "ollama k [REDACTED] kx"),
        ("k", "anthropic", "ollama [REDACTED] x kx"),
        ("ollama", "openai", "[REDACTED] k x kx"),
        ("ollama", "anthropic", "[REDACTED] k x kx"),
    ];
    for (key, kind, stored_content) in cases {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime
            .block_on(ScriptedServer::queue(vec![
                Scripted::Reply(ScriptedReply::calls(&[
                    (
                        "write_file",
                        r#"{"path":"box.txt","content":"ollama k x kx"}"#,
                    ),
                    ("run_command", r#"{"command":"mkdir -p made_dir"}"#),
                ])),
                Scripted::Reply(ScriptedReply::answer(&format!("wrote box.txt, key {key}"))),
            ]))
            .unwrap();
        let fixture = Fixture::new();
        let config = write_config(&fixture, &server, kind);
        let outcome = run_with_env(
            &fixture,
            &config,
            &["--yes"],
            "make a box",
            &[(KEY_VARIABLE, key)],
        );
        assert_eq!(outcome.code, 0, "{key}/{kind}: {}", outcome.stderr);
        let answer = outcome.lines().last().unwrap()["answer"].clone();
        assert_eq!(answer, "wrote box.txt, key [REDACTED]", "{key}/{kind}");
        let ws = fixture.ws();
        assert_eq!(
            std::fs::read(ws.join("box.txt")).unwrap(),
            b"ollama k x kx",
            "{key}/{kind}"
        );
        assert!(ws.join("made_dir").is_dir(), "{key}/{kind}");
        let mut names: Vec<String> = std::fs::read_dir(&ws)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a.txt", "b.txt", "box.txt", "made_dir"],
            "{key}/{kind}"
        );
        // The second request carries the stored history: the calls as the store holds them.
        let requests = server.requests();
        // OpenAI sends arguments as JSON text, Anthropic as an object: compare unescaped.
        let sent = requests[1].body.to_string().replace("\\\"", "\"");
        let expected_content = format!(r#""content":"{stored_content}""#);
        assert!(sent.contains(&expected_content), "{key}/{kind}: {sent}");
        assert!(sent.contains(r#""path":"box.txt""#), "{key}/{kind}: {sent}");
        assert!(sent.contains("mkdir -p made_dir"), "{key}/{kind}: {sent}");
    }
}

/// The variable the provider's key was read from reaches no command, even when its name is one
/// every command gets (`LC_*`, as `LANG` and the locale's variables do) and nothing in it looks
/// secret: the key is withheld by the variable it came from, not by a list of names.
#[test]
fn the_providers_key_variable_reaches_no_command_whatever_its_name() {
    for variable in ["LC_PROVIDER_ID", "LC_CLAWSMITH"] {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime
            .block_on(ScriptedServer::queue(vec![
                Scripted::Reply(ScriptedReply::calls(&[(
                    "run_command",
                    r#"{"command":"env > seen.txt"}"#,
                )])),
                Scripted::Reply(ScriptedReply::answer("done")),
            ]))
            .unwrap();
        let fixture = Fixture::new();
        let config = fixture.dir.path().join("clawsmith.toml");
        std::fs::write(
            &config,
            format!(
                "[provider]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"scripted\"\n\
                 api_key_env = \"{variable}\"\nretry_base_ms = 1\n",
                server.base_url()
            ),
        )
        .unwrap();
        let outcome = run_with_env(
            &fixture,
            &config,
            &["--yes"],
            "look around",
            &[(variable, KEY), ("LC_VISIBLE", "kept")],
        );
        assert_eq!(outcome.code, 0, "{variable}: {}", outcome.stderr);
        let seen = std::fs::read_to_string(fixture.ws().join("seen.txt")).unwrap();
        // The pattern itself still passes what it names.
        assert!(seen.contains("LC_VISIBLE=kept"), "{variable}: {seen}");
        assert!(
            !seen.contains(variable) && !seen.contains(KEY),
            "{variable}: a command saw the key: {seen}"
        );
        assert_eq!(server.requests().len(), 2, "{variable}");
    }
}

#[test]
fn run_without_a_provider_says_how_to_configure_one() {
    let fixture = Fixture::new();
    let config = fixture.dir.path().join("clawsmith.toml");
    std::fs::write(&config, "mode = \"ask\"\n").unwrap();
    let outcome = run(&fixture, &config, &[], "anything");
    assert_eq!(outcome.code, 1);
    assert!(
        outcome
            .stderr
            .contains("error: no model provider is configured"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("help: add a [provider] table"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn a_refused_request_is_an_error_quoting_the_provider() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::queue(vec![Scripted::Status {
            status: 404,
            body:
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: scripted"}}"#
                    .to_owned(),
            retry_after: None,
        }]))
        .unwrap();
    let fixture = Fixture::new();
    let config = write_config(&fixture, &server, "anthropic");
    let outcome = run(&fixture, &config, &[], "hello");
    assert_eq!(outcome.code, 1);
    assert!(
        outcome
            .stderr
            .contains("refused the request (HTTP 404): model: scripted"),
        "{}",
        outcome.stderr
    );
    assert_eq!(server.requests().len(), 1);
}

/// Ctrl-C and SIGTERM while a call runs: the call closes `cancelled`, the turn is finished, the
/// run ends with `stopReason: cancelled` and exits 128 + the signal's number, and the session
/// goes on.
#[test]
fn a_signal_mid_batch_closes_every_call_and_the_session_continues() {
    use std::io::BufRead;
    use std::process::Command;

    for (signal, expected_code) in [("INT", 130), ("TERM", 143)] {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime
            .block_on(ScriptedServer::queue(vec![
                Scripted::Reply(ScriptedReply::calls(&[
                    ("run_command", r#"{"command":"sleep 97"}"#),
                    ("read_file", r#"{"path":"a.txt"}"#),
                ])),
                Scripted::Reply(ScriptedReply::answer("resumed")),
            ]))
            .unwrap();
        let fixture = Fixture::new();
        let config = write_config(&fixture, &server, "openai");
        let mut child = spawn_run(&fixture, &config, &["--yes"], "wait");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            let started = line.contains("\"tool.started\"") && line.contains("run_command");
            seen.push(line);
            if started {
                break;
            }
        }
        assert!(
            seen.last()
                .is_some_and(|line| line.contains("tool.started")),
            "SIG{signal}: the call never started: {seen:?}"
        );
        let status = Command::new("kill")
            .args(["-s", signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        seen.extend(lines.map(Result::unwrap));
        let exit = child.wait().unwrap();
        assert_eq!(exit.code(), Some(expected_code), "SIG{signal}: {seen:?}");
        let result: serde_json::Value = serde_json::from_str(seen.last().unwrap()).unwrap();
        assert_eq!(result["type"], "run.result", "SIG{signal}");
        assert_eq!(result["stopReason"], "cancelled", "SIG{signal}");
        let completed: Vec<serde_json::Value> = seen
            .iter()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|event| event["type"] == "tool.completed")
            .collect();
        assert_eq!(
            completed.len(),
            2,
            "SIG{signal}: every call closed: {seen:?}"
        );
        let command = completed
            .iter()
            .find(|event| event["toolName"] == "run_command")
            .unwrap();
        assert_eq!(command["status"], "cancelled", "SIG{signal}");
        assert!(seen.iter().any(|line| line.contains("\"turn.completed\"")));

        // The session continues with a sendable history.
        let session = result["sessionId"].as_str().unwrap().to_owned();
        let next = run(&fixture, &config, &["--session", &session], "go on");
        assert_eq!(next.code, 0, "{}", next.stderr);
        let roles: Vec<String> = server.requests()[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| message["role"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "tool", "user"],
            "SIG{signal}"
        );
    }
}

/// SIGTERM while the provider stalls (no answer for a minute): the request is dropped, the run
/// prints its `run.result` with `stopReason: cancelled` and exits 143, not 0.
#[test]
fn a_sigterm_while_the_provider_stalls_exits_143() {
    use std::process::Command;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::queue(vec![Scripted::Delayed(
            std::time::Duration::from_secs(60),
            Box::new(Scripted::Reply(ScriptedReply::answer("too late"))),
        )]))
        .unwrap();
    let fixture = Fixture::new();
    let config = write_config(&fixture, &server, "openai");
    let child = spawn_run(&fixture, &config, &[], "wait for the model");
    // The request has arrived: the provider is now stalling.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no request arrived");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let status = Command::new("kill")
        .args(["-s", "TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(143),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(result["type"], "run.result");
    assert_eq!(result["stopReason"], "cancelled");
    assert_eq!(result["turns"], 1);
}

/// A fixture whose workspace is a git repository (in /var/tmp: the child's commands run in the
/// sandbox, which hides the host's /tmp) with one commit and an uncommitted change.
fn git_fixture() -> Fixture {
    let dir = tempfile::Builder::new()
        .prefix("clawsmith-run-worktree-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\nbeta\n").unwrap();
    let git = |args: &[&str]| {
        // The test's repository is made with the real git.
        #[allow(clippy::disallowed_methods)]
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(&ws)
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "--quiet"]);
    git(&["add", "a.txt"]);
    git(&["commit", "--quiet", "-m", "first"]);
    std::fs::write(ws.join("b.txt"), "untracked\n").unwrap();
    Fixture { dir, user: None }
}

/// Every file of the workspace outside `.git`, with its bytes.
fn tree(ws: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(ws)
        .unwrap()
        .map(Result::unwrap)
        .filter(|entry| entry.file_name() != ".git")
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

/// `run --yes`: the model delegates a change to a child in a checkout, applies the returned
/// patch with `worktree_apply`, and `clawsmith undo files TURN` gives back every byte.
#[test]
fn run_applies_a_worktree_patch_and_undo_restores_the_workspace() {
    use clawsmith_agent::fixture::RecordedRequest;
    use std::sync::{Arc, Mutex};

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let parent_steps = Mutex::new(0_usize);
    let child_steps = Mutex::new(vec![
        Scripted::Reply(ScriptedReply::answer("capitalized beta, added c.txt")),
        Scripted::Reply(ScriptedReply::calls(&[
            (
                "edit_file",
                r#"{"path":"a.txt","oldText":"beta","newText":"BETA"}"#,
            ),
            ("run_command", r#"{"command":"cp b.txt c.txt"}"#),
        ])),
    ]);
    let server = runtime
        .block_on(ScriptedServer::start(Arc::new(
            move |request: &RecordedRequest| {
                if !request
                    .tool_names()
                    .contains(&"delegate_worktree".to_owned())
                {
                    return child_steps.lock().unwrap().pop().unwrap();
                }
                let mut step = parent_steps.lock().unwrap();
                *step += 1;
                match *step {
                    1 => Scripted::Reply(ScriptedReply::calls(&[(
                        "delegate_worktree",
                        r#"{"task":"capitalize beta"}"#,
                    )])),
                    2 => {
                        let result: serde_json::Value = request
                            .message_texts()
                            .iter()
                            .find_map(|text| serde_json::from_str(text).ok())
                            .filter(|value: &serde_json::Value| value.get("patchId").is_some())
                            .unwrap_or_default();
                        let id = result["patchId"].as_str().unwrap_or("missing").to_owned();
                        Scripted::Reply(ScriptedReply::calls(&[(
                            "worktree_apply",
                            &format!(r#"{{"patchId":"{id}"}}"#),
                        )]))
                    }
                    _ => Scripted::Reply(ScriptedReply::answer("applied")),
                }
            },
        )))
        .unwrap();
    let fixture = git_fixture();
    let config = write_config(&fixture, &server, "openai");
    let before = tree(&fixture.ws());
    let outcome = run(&fixture, &config, &["--yes"], "delegate and apply");
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let lines = outcome.lines();
    assert_eq!(lines.last().unwrap()["answer"], "applied");
    let applied = lines
        .iter()
        .find(|line| line["type"] == "tool.completed" && line["toolName"] == "worktree_apply")
        .unwrap();
    assert_eq!(applied["status"], "success", "{applied}");
    assert_eq!(read(&fixture.ws().join("a.txt")), "alpha\nBETA\n");
    assert_eq!(read(&fixture.ws().join("c.txt")), "untracked\n");
    assert_eq!(
        std::fs::read_dir(fixture.state().join("worktrees"))
            .unwrap()
            .count(),
        0,
        "the checkout is removed"
    );

    let turn = lines
        .iter()
        .find(|line| line["type"] == "turn.started")
        .unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let undo = fixture.undo(true, &["files", &turn]);
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert_eq!(undo.json()["outcome"], "undone", "{}", undo.stdout);
    assert_eq!(tree(&fixture.ws()), before);
}

/// The caller's `TRACEPARENT` reaches the provider: without an exporter clawsmith records no
/// span, so the request carries the caller's context unchanged (the W3C rule).
#[test]
fn run_passes_the_callers_traceparent_to_the_provider() {
    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(ScriptedServer::queue(vec![Scripted::Reply(
            ScriptedReply::answer("traced"),
        )]))
        .unwrap();
    let fixture = Fixture::new();
    let config = write_config(&fixture, &server, "anthropic");
    // No exporter: the variables the test runner may have are not passed on.
    let outcome = run_with_env(
        &fixture,
        &config,
        &[],
        "task",
        &[
            ("TRACEPARENT", PARENT),
            ("TRACESTATE", "rojo=00f067aa0ba902b7"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
        ],
    );
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    let request = &server.requests()[0];
    assert_eq!(request.headers["traceparent"], PARENT);
    assert_eq!(request.headers["tracestate"], "rojo=00f067aa0ba902b7");
}
