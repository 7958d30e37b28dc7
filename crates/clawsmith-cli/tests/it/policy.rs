//! The policy of `clawsmith.toml` through the real binary: rules, hooks, protected paths,
//! refusal of invalid files at start, and `policy check`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::mcp::Server;
use crate::{Fixture, Run};

impl Fixture {
    /// Writes `text` as `clawsmith.toml` beside the workspace (outside it) and returns its path.
    fn config(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("clawsmith.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `call` with `--config FILE` and `extra` flags.
    fn call_with(&self, config: &str, extra: &[&str], tool: &str, arguments: Value) -> Value {
        let path = self.config(config);
        let mut flags = vec!["--config", path.to_str().unwrap()];
        flags.extend_from_slice(extra);
        self.call(&flags, tool, &arguments.to_string())
    }
}

impl Fixture {
    /// `[--json] policy check --workspace <ws> --config CONFIG TOOL ARGUMENTS`, which must succeed.
    fn policy_check(&self, config: &Path, json: bool, tool: &str, arguments: &str) -> Run {
        let ws = self.ws();
        let mut args = vec![
            "policy",
            "check",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            tool,
            arguments,
        ];
        if json {
            args.insert(0, "--json");
        }
        let run = self.run(&args, "");
        assert_eq!(run.code, 0, "{}", run.stderr);
        run
    }
}

fn check(result: &Value, status: &str, code: Option<&str>) {
    assert_eq!(result["status"], status, "{result}");
    assert_eq!(result["code"].as_str(), code, "{result}");
}

/// Commands run with `--sandbox best-effort` so these tests are about the policy, not the kernel.
const BEST_EFFORT: &[&str] = &["--sandbox", "best-effort"];

#[test]
fn an_allow_rule_runs_a_command_in_ask_mode_and_nothing_else() {
    let f = Fixture::new();
    let config = r#"
mode = "ask"

[[rules]]
decision = "allow"
rule = "run_command(echo hello*)"
"#;
    // (command, status, code): no `--yes`, so whatever the rule does not cover is refused.
    let table = [
        ("echo hello world", "success", None),
        ("echo goodbye", "denied", Some("permission_denied")),
        (
            "echo hello; echo smuggled",
            "denied",
            Some("permission_denied"),
        ),
    ];
    for (command, status, code) in table {
        let result = f.call_with(
            config,
            BEST_EFFORT,
            "run_command",
            json!({ "command": command }),
        );
        check(&result, status, code);
        if status == "success" {
            assert!(result["content"].as_str().unwrap().contains("hello world"));
        }
    }
}

#[test]
fn a_deny_rule_refuses_rm_in_full_mode_before_anything_runs() {
    let f = Fixture::new();
    std::fs::create_dir(f.ws().join("build")).unwrap();
    std::fs::write(f.ws().join("build/keep.txt"), "keep").unwrap();
    let config = r#"
mode = "full"

[[rules]]
decision = "deny"
rule = "run_command(rm *)"
"#;
    // Every simple command of the one bash parse (clawsmith-shell) is matched: lists,
    // substitutions, quoting, assignments, nested shells and wrappers.
    let spellings = [
        "rm -rf build",
        "rm a.txt",
        "ls; rm -rf build",
        "ls && rm a.txt",
        "false || rm a.txt",
        "echo $(rm a.txt)",
        "echo `rm a.txt`",
        "ls\nrm a.txt",
        "ls | rm a.txt",
        "\\rm a.txt",
        "'rm' a.txt",
        "/bin/rm a.txt",
        "FOO=1 rm a.txt",
        "bash -c 'rm -rf build'",
        "sh -c \"echo a; rm a.txt\"",
        "eval \"rm a.txt\"",
        "echo a.txt | xargs rm",
        "env A=1 rm a.txt",
        "timeout 5 rm a.txt",
        "nohup nice -n 5 rm a.txt",
        "find . -name a.txt -exec rm {} \\;",
        "sh <<< 'rm a.txt'",
        // Programs the text does not name fail closed.
        "c=rm; $c a.txt",
        "rm${IFS}a.txt",
        "\"$(echo rm)\" a.txt",
        "script -qc 'rm a.txt' /dev/null",
        "script -qc \"$c a.txt\" /dev/null",
        "echo rm a.txt | sh",
    ];
    for command in spellings {
        let result = f.call_with(
            config,
            BEST_EFFORT,
            "run_command",
            json!({ "command": command }),
        );
        check(&result, "denied", Some("permission_denied"));
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("rule `deny run_command(rm *)`"),
            "{command}: {result}"
        );
    }
    assert_eq!(crate::read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    assert_eq!(crate::read(&f.ws().join("build/keep.txt")), "keep");
}

#[test]
fn a_hook_denial_reaches_the_model_with_its_reason() {
    let f = Fixture::new();
    // (the hook's shell script, timeout_ms, what the model reads)
    let table = [
        (
            r#"cat >/dev/null; echo '{\"decision\":\"deny\",\"reason\":\"no writes on Fridays\"}'"#,
            5000,
            "no writes on Fridays",
        ),
        ("sleep 5", 200, "timed out after 200 ms"),
        (
            "echo broken >&2; exit 3",
            5000,
            "exited with status 3: broken",
        ),
        ("echo maybe", 5000, "returned invalid output"),
    ];
    for (script, timeout_ms, reason) in table {
        let config = format!(
            "mode = \"full\"\n[[hooks]]\nname = \"no-fridays\"\ncommand = \"/bin/sh\"\n\
             args = [\"-c\", \"{script}\"]\ntimeout_ms = {timeout_ms}\n"
        );
        let result = f.call_with(
            &config,
            &[],
            "write_file",
            json!({"path": "new.txt", "content": "x"}),
        );
        check(&result, "denied", Some("hook_denied"));
        let content = result["content"].as_str().unwrap();
        assert!(
            content.contains("refused by hook `no-fridays`") && content.contains(reason),
            "{script}: {content}"
        );
        assert!(!f.ws().join("new.txt").exists());
    }
}

#[test]
fn a_relative_hook_command_is_found_beside_the_configuration() {
    let f = Fixture::new();
    let hooks = f.dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let script = hooks.join("deny.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat >/dev/null\necho '{\"decision\":\"deny\",\"reason\":\"beside the file\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = "mode = \"full\"\n[[hooks]]\nname = \"local\"\ncommand = \"./hooks/deny.sh\"\n";
    let result = f.call_with(config, &[], "todo_list", json!({}));
    check(&result, "denied", Some("hook_denied"));
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("beside the file")
    );
}

#[test]
fn git_is_protected_for_file_tools() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws().join(".git/hooks")).unwrap();
    std::fs::write(f.ws().join(".git/config"), "[core]\n").unwrap();
    let fsmonitor = json!({"path": ".git/config", "oldText": "[core]\n",
                           "newText": "[core]\n\tfsmonitor = \"touch pwned\"\n"});
    let hook = json!({"path": "a/../.git/hooks/pre-commit", "content": "#!/bin/sh\n"});
    // (config, flags, tool, arguments): each refused with permission_denied.
    let allow_edits = "";
    let full_with_broad_rule =
        "mode = \"full\"\n[[rules]]\ndecision = \"allow\"\nrule = \"edit_file(**)\"\n";
    let table = [
        (
            allow_edits,
            &["--mode", "accept-edits"][..],
            "edit_file",
            &fsmonitor,
        ),
        (
            allow_edits,
            &["--mode", "accept-edits"][..],
            "write_file",
            &hook,
        ),
        (allow_edits, &["--mode", "full"][..], "write_file", &hook),
        (full_with_broad_rule, &[][..], "edit_file", &fsmonitor),
    ];
    for (config, flags, tool, arguments) in table {
        let result = f.call_with(config, flags, tool, arguments.clone());
        check(&result, "denied", Some("permission_denied"));
        assert!(
            result["content"]
                .as_str()
                .unwrap()
                .contains("a protected path"),
            "{result}"
        );
    }
    assert_eq!(crate::read(&f.ws().join(".git/config")), "[core]\n");
    assert!(!f.ws().join(".git/hooks/pre-commit").exists());
    // An allow rule naming the file lets it be written.
    let named =
        "mode = \"full\"\n[[rules]]\ndecision = \"allow\"\nrule = \"edit_file(.git/config)\"\n";
    let result = f.call_with(named, &[], "edit_file", fsmonitor);
    check(&result, "success", None);
}

#[test]
fn hidden_paths_are_refused_to_file_tools_in_every_mode() {
    let f = Fixture::new();
    std::fs::write(f.ws().join(".env"), "TOKEN=1\n").unwrap();
    let config = "mode = \"full\"\nhidden_paths = [\".env\"]\n\
                  [[rules]]\ndecision = \"allow\"\nrule = \"read_file\"\n";
    // (tool, arguments)
    let table = [
        ("read_file", json!({"path": ".env"})),
        ("read_file", json!({"path": "x/../.env"})),
        (
            "edit_file",
            json!({"path": ".env", "oldText": "1", "newText": "2"}),
        ),
        ("rename_file", json!({"from": ".env", "to": "leaked.txt"})),
        (
            "write_file",
            json!({"path": ".env", "content": "TOKEN=2\n"}),
        ),
    ];
    for (tool, arguments) in table {
        let result = f.call_with(config, &[], tool, arguments);
        check(&result, "denied", Some("permission_denied"));
        let content = result["content"].as_str().unwrap();
        assert!(content.contains("`.env` is hidden"), "{content}");
        assert!(!content.contains("TOKEN"), "{content}");
    }
    assert_eq!(crate::read(&f.ws().join(".env")), "TOKEN=1\n");
}

/// As the tests' user (root in CI) and again as the unprivileged uid 65534.
#[test]
fn hidden_paths_hold_by_identity_through_every_reader() {
    hidden_paths_hold_by_identity(Fixture::new());
    if let Some(unprivileged) = Fixture::unprivileged() {
        hidden_paths_hold_by_identity(unprivileged);
    }
}

fn hidden_paths_hold_by_identity(f: Fixture) {
    let ws = f.ws();
    std::fs::write(ws.join(".env"), "TOKEN=s3cr3t\n").unwrap();
    std::fs::create_dir(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("secrets/x"), "s3cr3t in a glob entry\n").unwrap();
    std::fs::write(ws.join("README.md"), "ordinary\n").unwrap();
    std::os::unix::fs::symlink(".env", ws.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink("secrets/x", ws.join("elsewhere")).unwrap();
    std::fs::hard_link(ws.join(".env"), ws.join("hard.txt")).unwrap();
    std::os::unix::fs::symlink(".env", ws.join("AGENTS.md")).unwrap();
    let config = "mode = \"full\"\nhidden_paths = [\".env\", \"secrets/**\"]\n";
    f.config(config);
    f.give_to_user();
    // (tool, arguments, expected status) — no answer may hold the secret.
    let table = [
        ("read_file", json!({"path": "notes.txt"}), "denied"),
        ("read_file", json!({"path": "hard.txt"}), "denied"),
        ("read_file", json!({"path": "elsewhere"}), "denied"),
        ("read_file", json!({"path": "AGENTS.md"}), "denied"),
        (
            "edit_file",
            json!({"path": "hard.txt", "oldText": "s3cr3t", "newText": "x"}),
            "denied",
        ),
        ("search_files", json!({"query": "TOKEN"}), "success"),
        ("glob_files", json!({"pattern": "**/*"}), "success"),
        ("memory_search", json!({"query": "TOKEN"}), "success"),
        (
            "run_command",
            json!({"command": "cat secrets/x"}),
            "success",
        ),
        (
            "run_command",
            json!({"command": "cat elsewhere hard.txt"}),
            "success",
        ),
        ("read_file", json!({"path": "README.md"}), "success"),
    ];
    let user = f.user;
    for (tool, arguments, status) in table {
        let result = f.call_with(config, &[], tool, arguments.clone());
        let content = result["content"].as_str().unwrap();
        assert!(
            !content.contains("s3cr3t"),
            "{user:?} {tool} {arguments}: {content}"
        );
        assert_eq!(
            result["status"], status,
            "{user:?} {tool} {arguments}: {content}"
        );
    }
    assert_eq!(crate::read(&ws.join(".env")), "TOKEN=s3cr3t\n");
}

#[test]
fn the_mode_comes_from_the_flag_then_the_file() {
    let f = Fixture::new();
    let write = |path: &str| json!({"path": path, "content": "x"});
    let full = "mode = \"full\"\n";
    check(
        &f.call_with(full, &[], "write_file", write("one.txt")),
        "success",
        None,
    );
    check(
        &f.call_with(
            full,
            &["--mode", "read-only"],
            "write_file",
            write("two.txt"),
        ),
        "denied",
        Some("permission_denied"),
    );
    // The state directory's own clawsmith.toml is read when there is no --config.
    std::fs::create_dir_all(f.state()).unwrap();
    std::fs::write(f.state().join("clawsmith.toml"), full).unwrap();
    check(
        &f.call(&[], "write_file", &write("three.txt").to_string()),
        "success",
        None,
    );
}

#[test]
fn invalid_configuration_is_refused_at_start_with_file_line_and_reason() {
    let f = Fixture::new();
    // (file, line:column, what is wrong)
    let table = [
        ("mode = \"yolo\"\n", "1:8", "unknown variant `yolo`"),
        (
            "\n[[rule]]\ndecision = \"allow\"\n",
            "2:3",
            "unknown field `rule`",
        ),
        (
            "[[rules]]\ndecision = \"allow\"\nrule = \"run_command(git\"\n",
            "3:8",
            "missing its closing parenthesis",
        ),
        (
            "[[rules]]\ndecision = \"maybe\"\nrule = \"x\"\n",
            "2:12",
            "unknown variant `maybe`",
        ),
        (
            "[[rules]]\ndecision = \"deny\"\nrule = \"@teleport\"\n",
            "3:8",
            "unknown capability",
        ),
        (
            "[[hooks]]\nname = \"h\"\ncommand = \"/bin/true\"\ntimeout_ms = 0\n",
            "4:14",
            "timeout_ms must be between 1 and 600000",
        ),
        (
            "writable_roots = [\"relative/dir\"]\n",
            "1:19",
            "must be absolute",
        ),
        ("writable_roots = [\"/\"]\n", "1:19", "other than /"),
        (
            "protected_paths = [\"a/[b\"]\n",
            "1:20",
            "protected_paths: invalid pattern",
        ),
        ("hidden_paths = [\"\"]\n", "1:17", "hidden_paths: empty"),
        (
            "[sandbox]\ntimeout_seconds = 0\n",
            "2:19",
            "timeout_seconds must be at least 1",
        ),
        ("[sandbox]\ntimeout = 5\n", "2:1", "unknown field `timeout`"),
        (
            "[sandbox]\nhome_allow = [\"../.ssh\"]\n",
            "2:15",
            "must be a path inside the home directory",
        ),
        (
            "[sandbox]\nhome_allow = [\"/root/.ssh\"]\n",
            "2:15",
            "must be a path inside the home directory",
        ),
        ("mode = ", "1:8", ""),
    ];
    for (text, place, message) in table {
        let path = f.config(text);
        let ws = f.ws();
        let run = f.run(
            &[
                "call",
                "--workspace",
                ws.to_str().unwrap(),
                "--config",
                path.to_str().unwrap(),
                "read_file",
                r#"{"path":"a.txt"}"#,
            ],
            "",
        );
        assert_eq!(run.code, 1, "{text:?} was accepted: {}", run.stdout);
        let expected = format!("{}:{place}: ", path.display());
        assert!(
            run.stderr.contains(&expected) && run.stderr.contains(message),
            "{text:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{text:?}: nothing ran");
    }
}

#[test]
fn policy_check_explains_without_running() {
    let f = Fixture::new();
    let path = f.config(
        "mode = \"accept-edits\"\nhidden_paths = [\"secrets/**\"]\n\
         [[rules]]\ndecision = \"deny\"\nrule = \"run_command(rm *)\"\n\
         [[hooks]]\nname = \"audit\"\ncommand = \"/bin/false\"\n",
    );
    // (tool, arguments, verdict, decided by, part of the reason)
    let table = [
        (
            "run_command",
            r#"{"command":"rm -rf ."}"#,
            "deny",
            "rule `deny run_command(rm *)`",
            "matched run_command",
        ),
        (
            "run_command",
            r#"{"command":"c=rm; $c f"}"#,
            "deny",
            "rule `deny run_command(rm *)`",
            "the program of `$c f` cannot be known from the text (a variable in the command \
             word); it matches every deny and ask rule on run_command",
        ),
        (
            "run_command",
            r#"{"command":"mv .git x"}"#,
            "ask",
            "repository protection",
            "`mv .git x` moves the repository's history (.git); accept-edits mode asks",
        ),
        (
            "run_command",
            r#"{"command":"cd / && find . -delete"}"#,
            "ask",
            "repository protection",
            "(after `cd /` the working directory is the workspace, above it or unknown)",
        ),
        (
            "run_command",
            r#"{"command":"ls"}"#,
            "ask",
            "accept-edits mode",
            "",
        ),
        (
            "edit_file",
            r#"{"path":".git/config","oldText":"a","newText":"b"}"#,
            "ask",
            "protected path",
            "",
        ),
        (
            "write_file",
            r#"{"path":"src/x.rs","content":""}"#,
            "allow",
            "accept-edits mode",
            "",
        ),
        (
            "read_file",
            r#"{"path":"a.txt"}"#,
            "allow",
            "accept-edits mode",
            "",
        ),
        (
            "read_file",
            r#"{"path":"secrets/prod/key.pem"}"#,
            "deny",
            "hidden path",
            "",
        ),
    ];
    for (tool, arguments, verdict, decided_by, reason) in table {
        let explanation = f.policy_check(&path, true, tool, arguments).json();
        assert_eq!(explanation["decision"]["verdict"], verdict, "{explanation}");
        assert_eq!(explanation["decidedBy"], decided_by, "{explanation}");
        let why = explanation["decision"]["reason"].as_str().unwrap();
        assert!(why.contains(reason), "{explanation}");
        assert_eq!(explanation["hooks"], json!(["audit"]));
        assert_eq!(explanation["hiddenPaths"], json!(["secrets/**"]));
    }
    // Nothing ran: the workspace is as the fixture made it, and the hook (which would deny
    // everything) was not consulted.
    assert!(f.ws().join("a.txt").exists());
    assert!(!f.ws().join("src").exists());
    let people = f.policy_check(&path, false, "run_command", r#"{"command":"rm -rf ."}"#);
    assert!(
        people.stdout.contains("run_command: deny")
            && people
                .stdout
                .contains("hooks consulted first (not run here): audit")
            && people.stdout.contains("disaster check"),
        "{}",
        people.stdout
    );
    let people = f.policy_check(&path, false, "run_command", r#"{"command":"rm${IFS}f"}"#);
    assert!(
        people.stdout.contains("run_command: deny")
            && people.stdout.contains(
                "why: rule `deny run_command(rm *)` matched run_command: the program of \
                 `rm${IFS}f` cannot be known from the text (a parameter expansion in the command \
                 word)"
            ),
        "{}",
        people.stdout
    );
}

#[test]
fn the_same_policy_holds_through_mcp() {
    let f = Fixture::new();
    std::fs::create_dir(f.ws().join(".git")).unwrap();
    std::fs::write(f.ws().join(".git/config"), "[core]\n").unwrap();
    let path = f.config(
        "mode = \"full\"\n\
         [[rules]]\ndecision = \"deny\"\nrule = \"run_command(rm *)\"\n\
         [[hooks]]\nname = \"no-secrets\"\ncommand = \"/bin/sh\"\n\
         args = [\"-c\", \"if grep -q secret; then echo '{\\\"decision\\\":\\\"deny\\\",\\\"reason\\\":\\\"secret files are off limits\\\"}'; else echo '{\\\"decision\\\":\\\"allow\\\"}'; fi\"]\n",
    );
    let mut server = Server::start(
        &f,
        &[
            "--config",
            path.to_str().unwrap(),
            "--sandbox",
            "best-effort",
        ],
    );
    // (tool, arguments, code)
    let table = [
        (
            "run_command",
            json!({"command": "ls && rm a.txt"}),
            "permission_denied",
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "oldText": "[core]", "newText": "[core]\n\tpager = x"}),
            "permission_denied",
        ),
        (
            "write_file",
            json!({"path": "secret.txt", "content": "x"}),
            "hook_denied",
        ),
    ];
    for (tool, arguments, code) in table {
        let result = server.call(tool, arguments);
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(result["structuredContent"]["code"], code, "{result}");
    }
    let refused = server.call("write_file", json!({"path": "secret.txt", "content": "x"}));
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("secret files are off limits"),
        "{refused}"
    );
    let allowed = server.call("write_file", json!({"path": "notes.txt", "content": "x"}));
    assert_eq!(allowed["isError"], false, "{allowed}");
    assert_eq!(crate::read(&f.ws().join("a.txt")), "alpha\nbeta\n");
    assert_eq!(crate::read(&f.ws().join(".git/config")), "[core]\n");
}

#[test]
fn the_readme_example_is_a_valid_configuration() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = &readme[readme.find("## Policy").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    let end = start + section[start..].find("```").unwrap();
    let f = Fixture::new();
    let path = f.config(&section[start..end]);
    // (tool, arguments, verdict)
    let table = [
        ("run_command", r#"{"command":"cargo test -p x"}"#, "allow"),
        ("run_command", r#"{"command":"rm -rf build"}"#, "deny"),
        (
            "edit_file",
            r#"{"path":"src/a.rs","oldText":"a","newText":"b"}"#,
            "allow",
        ),
        (
            "write_file",
            r#"{"path":"deploy/prod.yml","content":""}"#,
            "ask",
        ),
        ("read_file", r#"{"path":".env"}"#, "deny"),
    ];
    for (tool, arguments, verdict) in table {
        let run = f.policy_check(&path, true, tool, arguments);
        assert_eq!(
            run.json()["decision"]["verdict"],
            verdict,
            "{tool} {arguments}"
        );
    }
}

#[test]
fn sandbox_limits_and_writable_roots_come_from_the_file() {
    let f = Fixture::new();
    let extra = f.dir.path().join("cache");
    std::fs::create_dir(&extra).unwrap();
    let config = format!(
        "mode = \"full\"\nwritable_roots = [{:?}]\n[sandbox]\ntimeout_seconds = 1\n",
        extra.to_str().unwrap()
    );
    let write_extra = format!("echo cached > {}/entry", extra.display());
    // (command, status, code)
    let table = [
        ("sleep 5", "error", Some("timeout")),
        (write_extra.as_str(), "success", None),
    ];
    for (command, status, code) in table {
        let result = f.call_with(
            &config,
            BEST_EFFORT,
            "run_command",
            json!({ "command": command }),
        );
        check(&result, status, code);
    }
    assert_eq!(crate::read(&extra.join("entry")), "cached\n");
}
