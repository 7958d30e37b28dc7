use clawsmith_protocol::{Capability, CapabilityDeclaration, Risk, Verdict};
use clawsmith_security::*;
use serde_json::{Value, json};

use crate::run_command;

fn tool(name: &str, risk: Risk, capabilities: &[Capability]) -> ToolFacts {
    ToolFacts::from_declaration(
        name,
        risk,
        &CapabilityDeclaration::Declared(capabilities.to_vec()),
    )
}

fn edit_file() -> ToolFacts {
    tool(
        "edit_file",
        Risk::WorkspaceWrite,
        &[Capability::FilesystemRead, Capability::FilesystemWrite],
    )
}

fn read_file() -> ToolFacts {
    tool("read_file", Risk::Read, &[Capability::FilesystemRead])
}

fn policy(mode: PermissionMode, rules: &[(RuleEffect, &str)]) -> PermissionPolicy {
    crate::policy_at("/ws", mode, rules)
}

fn check(policy: &PermissionPolicy, facts: &ToolFacts, input: Value, expected: Verdict) {
    let decision = policy.decide(facts, &input);
    assert_eq!(
        decision.verdict, expected,
        "{} {input}: {}",
        facts.name, decision.reason
    );
    assert_eq!(authorize(&decision).is_some(), expected == Verdict::Allow);
}

#[test]
fn modes_by_effective_risk() {
    use Verdict::*;
    // (mode, read, workspace-write, execute)
    let table = [
        (PermissionMode::ReadOnly, Allow, Deny, Deny),
        (PermissionMode::Ask, Allow, Ask, Ask),
        (PermissionMode::AcceptEdits, Allow, Allow, Ask),
        (PermissionMode::Full, Allow, Allow, Allow),
    ];
    for (mode, read, write, execute) in table {
        let p = policy(mode, &[]);
        check(&p, &read_file(), json!({"path": "a"}), read);
        check(&p, &edit_file(), json!({"path": "a"}), write);
        check(&p, &run_command(), json!({"command": "ls"}), execute);
        assert_eq!(mode.as_str().parse::<PermissionMode>().unwrap(), mode);
    }
    assert!("yolo".parse::<PermissionMode>().is_err());
}

#[test]
fn modes_use_effective_not_declared_risk() {
    // Declares `read` but can reach the network: treated as `execute`.
    let sneaky = tool("fetch", Risk::Read, &[Capability::Network]);
    check(
        &policy(PermissionMode::AcceptEdits, &[]),
        &sneaky,
        json!({}),
        Verdict::Ask,
    );
    check(
        &policy(PermissionMode::ReadOnly, &[]),
        &sneaky,
        json!({}),
        Verdict::Deny,
    );
    let missing =
        ToolFacts::from_declaration("legacy", Risk::Read, &CapabilityDeclaration::Missing);
    check(
        &policy(PermissionMode::AcceptEdits, &[]),
        &missing,
        json!({}),
        Verdict::Ask,
    );
}

#[test]
fn deny_beats_ask_beats_allow() {
    use RuleEffect::*;
    let all_three = [
        (Allow, "run_command"),
        (Ask, "run_command"),
        (Deny, "run_command"),
    ];
    check(
        &policy(PermissionMode::Full, &all_three),
        &run_command(),
        json!({"command": "ls"}),
        Verdict::Deny,
    );
    let ask_allow = [(Allow, "run_command(*)"), (Ask, "run_command")];
    check(
        &policy(PermissionMode::Full, &ask_allow),
        &run_command(),
        json!({"command": "ls"}),
        Verdict::Ask,
    );
    let allow_only = [(Allow, "run_command(ls*)")];
    check(
        &policy(PermissionMode::Ask, &allow_only),
        &run_command(),
        json!({"command": "ls -la"}),
        Verdict::Allow,
    );
    let decision =
        policy(PermissionMode::Full, &all_three).decide(&run_command(), &json!({"command": "ls"}));
    assert_eq!(decision.rule.as_deref(), Some("deny run_command"));
}

#[test]
fn capability_rules_match_any_tool_with_the_capability() {
    let p = policy(PermissionMode::Full, &[(RuleEffect::Deny, "@network")]);
    for name in ["fetch", "mcp__web__get", "run_command", "anything_at_all"] {
        check(
            &p,
            &tool(name, Risk::Execute, &[Capability::Network]),
            json!({}),
            Verdict::Deny,
        );
    }
    // Same name without the capability is untouched.
    check(
        &p,
        &tool("fetch", Risk::Read, &[Capability::FilesystemRead]),
        json!({}),
        Verdict::Allow,
    );
    // A fail-closed declaration has every capability, network included.
    let legacy = ToolFacts::from_declaration(
        "legacy",
        Risk::Read,
        &CapabilityDeclaration::Raw(json!("x")),
    );
    check(&p, &legacy, json!({}), Verdict::Deny);
}

#[test]
fn argument_patterns() {
    // (rules, tool, input, expected) under `ask` mode.
    let cmd = run_command;
    type Case = (Vec<(RuleEffect, &'static str)>, ToolFacts, Value, Verdict);
    let table: Vec<Case> = vec![
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status --short"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git push"}),
            Verdict::Ask,
        ),
        // Allow never covers compound commands.
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status; rm -rf x"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status && curl x | sh"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status $(curl x)"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "run_command(git status*)")],
            cmd(),
            json!({"command": "git status > /etc/x"}),
            Verdict::Ask,
        ),
        // Deny catches any segment.
        (
            vec![(RuleEffect::Deny, "run_command(rm *)")],
            cmd(),
            json!({"command": "ls; rm -rf build"}),
            Verdict::Deny,
        ),
        (
            vec![(RuleEffect::Deny, "run_command(rm *)")],
            cmd(),
            json!({"command": "ls && rm x"}),
            Verdict::Deny,
        ),
        (
            vec![(RuleEffect::Deny, "run_command(rm *)")],
            cmd(),
            json!({"command": "echo $(rm x)"}),
            Verdict::Deny,
        ),
        (
            vec![(RuleEffect::Deny, "run_command(rm *)")],
            cmd(),
            json!({"command": "ls"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Deny, "run_command(git push*)")],
            cmd(),
            json!({"command": "git push --force"}),
            Verdict::Deny,
        ),
        // Paths.
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "src/a/b.rs"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "./src/a.rs"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "/ws/src/a.rs"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "src/../secrets.txt"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "src/../../etc/passwd"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"path": "/etc/src/a.rs"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/*)")],
            edit_file(),
            json!({"path": "src/a/b.rs"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/*)")],
            edit_file(),
            json!({"path": "src/b.rs"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "edit_file(src/**)")],
            edit_file(),
            json!({"oldText": "x"}),
            Verdict::Ask,
        ),
        // A rename needs both ends covered to be allowed; either end triggers a deny.
        (
            vec![(RuleEffect::Allow, "rename_file(src/**)")],
            tool(
                "rename_file",
                Risk::WorkspaceWrite,
                &[Capability::FilesystemWrite],
            ),
            json!({"from": "src/a", "to": "src/b"}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "rename_file(src/**)")],
            tool(
                "rename_file",
                Risk::WorkspaceWrite,
                &[Capability::FilesystemWrite],
            ),
            json!({"from": "src/a", "to": "bin/b"}),
            Verdict::Ask,
        ),
        (
            vec![(RuleEffect::Deny, "rename_file(.github/**)")],
            tool(
                "rename_file",
                Risk::WorkspaceWrite,
                &[Capability::FilesystemWrite],
            ),
            json!({"from": "a", "to": ".github/workflows/x.yml"}),
            Verdict::Deny,
        ),
        // Tool name globs.
        (
            vec![(RuleEffect::Allow, "mcp__github__*")],
            tool("mcp__github__list", Risk::Execute, &[Capability::Network]),
            json!({}),
            Verdict::Allow,
        ),
        (
            vec![(RuleEffect::Allow, "mcp__github__*")],
            tool("mcp__gitlab__list", Risk::Execute, &[Capability::Network]),
            json!({}),
            Verdict::Ask,
        ),
    ];
    for (rules, facts, input, expected) in table {
        check(
            &policy(PermissionMode::Ask, &rules),
            &facts,
            input,
            expected,
        );
    }
}

#[test]
fn read_only_is_a_ceiling() {
    let p = policy(
        PermissionMode::ReadOnly,
        &[
            (RuleEffect::Allow, "edit_file"),
            (RuleEffect::Ask, "run_command"),
        ],
    );
    check(&p, &edit_file(), json!({"path": "a"}), Verdict::Deny);
    check(&p, &run_command(), json!({"command": "ls"}), Verdict::Deny);
    check(&p, &read_file(), json!({"path": "a"}), Verdict::Allow);
    let deny_read = policy(
        PermissionMode::ReadOnly,
        &[(RuleEffect::Deny, "read_file(.env*)")],
    );
    check(
        &deny_read,
        &read_file(),
        json!({"path": ".env.local"}),
        Verdict::Deny,
    );
}

#[test]
fn bad_rules_are_refused_with_reasons() {
    let table = [
        ("", "empty permission rule"),
        ("   ", "empty permission rule"),
        (
            "@teleport",
            "unknown capability \"teleport\" in permission rule",
        ),
        (
            "run_command(git",
            "permission rule \"run_command(git\" is missing its closing parenthesis",
        ),
    ];
    for (text, message) in table {
        let error = Rule::parse(RuleEffect::Deny, text).unwrap_err();
        assert_eq!(error.to_string(), message, "{text:?}");
    }
    assert!(matches!(
        Rule::parse(RuleEffect::Deny, "edit_file([)"),
        Err(RuleError::BadPattern { .. })
    ));
    let config: RuleConfig =
        serde_json::from_value(json!({"deny": ["@network"], "allow": ["read_file"]})).unwrap();
    let set = RuleSet::from_config(&config).unwrap();
    assert!(!set.is_empty());
    assert!(serde_json::from_value::<RuleConfig>(json!({"permit": []})).is_err());
}

#[test]
fn command_rules_see_every_simple_command_of_the_one_bash_parse() {
    // (rule, command, expected) under `ask` mode: a refusal matches when any simple command
    // does, an allow must cover every one, and never a script that did not parse completely.
    let table = [
        (RuleEffect::Deny, "rm *", "rm -rf x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "\\rm x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "'rm' x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "\"r\"m x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "/bin/rm x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "FOO=1 rm x", Verdict::Deny),
        (
            RuleEffect::Deny,
            "rm *",
            "bash -c 'rm -rf x'",
            Verdict::Deny,
        ),
        (
            RuleEffect::Deny,
            "rm *",
            "sh -c \"echo a; rm x\"",
            Verdict::Deny,
        ),
        (RuleEffect::Deny, "rm *", "echo $(rm x)", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "true && rm x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "xargs rm < list", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "env A=1 rm x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "timeout 5 rm x", Verdict::Deny),
        (
            RuleEffect::Deny,
            "rm *",
            "nohup nice -n 5 rm x",
            Verdict::Deny,
        ),
        (RuleEffect::Deny, "rm *", "sudo -u root rm x", Verdict::Deny),
        (
            RuleEffect::Deny,
            "rm *",
            "find . -exec rm {} \\;",
            Verdict::Deny,
        ),
        (RuleEffect::Deny, "rm *", "eval \"rm x\"", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "echo 'rm x' | sh", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "sh <<< 'rm x'", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "$(which rm) x", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "f() { rm x; }; f", Verdict::Deny),
        (RuleEffect::Deny, "rm *", "echo rm", Verdict::Ask),
        (RuleEffect::Deny, "rm *", "echo \"rm -rf x\"", Verdict::Ask),
        (RuleEffect::Deny, "rm *", "grep rm file", Verdict::Ask),
        (RuleEffect::Deny, "rm *", "git rm x", Verdict::Ask),
        (
            RuleEffect::Ask,
            "git push*",
            "cd x && git push",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test -p x",
            Verdict::Allow,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "'cargo' test",
            Verdict::Allow,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test 2>&1",
            Verdict::Allow,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test > /dev/null",
            Verdict::Allow,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test; rm x",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test $(rm x)",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test && cargo test",
            Verdict::Allow,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test > log",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "LD_PRELOAD=x.so cargo test",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "PATH=/tmp; cargo test",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "export PATH=/tmp; cargo test",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "/tmp/cargo test",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "timeout 5 cargo test",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "bash -c 'cargo test'",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test (",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo test*",
            "cargo test; if",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "cargo() { rm x; }*",
            "cargo() { rm x; }",
            Verdict::Ask,
        ),
        (
            RuleEffect::Allow,
            "git status",
            "echo . | xargs git status",
            Verdict::Ask,
        ),
        (RuleEffect::Allow, "*", "a; b | c", Verdict::Allow),
        (RuleEffect::Allow, "*", "a; b (", Verdict::Ask),
    ];
    for (effect, pattern, command, expected) in table {
        let rule = format!("run_command({pattern})");
        check(
            &policy(PermissionMode::Ask, &[(effect, &rule)]),
            &run_command(),
            json!({ "command": command }),
            expected,
        );
    }
}

#[test]
fn a_deny_rule_holds_in_every_frame_and_wrapper() {
    // Every wrapper inside every frame: `deny run_command(rm *)` refuses each in `full` mode.
    let wrappers = [
        "",
        "\\",
        "FOO=1 ",
        "env ",
        "env A=1 ",
        "nohup ",
        "nice -n 5 ",
        "timeout -s KILL 5 ",
        "command ",
        "builtin ",
        "exec ",
        "time ",
        "stdbuf -oL ",
        "setsid ",
        "sudo -u root ",
        "xargs ",
        "busybox ",
    ];
    let frames = [
        "{}",
        "true && {}",
        "false || {}",
        "echo a; {}",
        "ls | {}",
        "( {} )",
        "{ {}; }",
        "echo $({})",
        "echo `{}`",
        "bash -c '{}'",
        "sh -c \"{}\"",
        "if true; then {}; fi",
        "for i in 1; do {}; done",
        "eval '{}'",
        "f() { {}; }",
        "trap '{}' EXIT",
    ];
    let p = policy(
        PermissionMode::Full,
        &[(RuleEffect::Deny, "run_command(rm *)")],
    );
    for frame in frames {
        for wrapper in wrappers {
            let command = frame.replacen("{}", &format!("{wrapper}rm -rf x"), 1);
            check(
                &p,
                &run_command(),
                json!({ "command": command }),
                Verdict::Deny,
            );
        }
    }
}
