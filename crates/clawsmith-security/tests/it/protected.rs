//! Protected paths: tables of attack spellings against every file-writing tool and mode.

use clawsmith_protocol::{Capability, Risk, Verdict};
use clawsmith_security::*;
use serde_json::{Value, json};

fn writer(name: &str) -> ToolFacts {
    let facts = ToolFacts::from_declaration(
        name,
        Risk::WorkspaceWrite,
        &clawsmith_protocol::CapabilityDeclaration::Declared(vec![
            Capability::FilesystemRead,
            Capability::FilesystemWrite,
        ]),
    );
    assert_eq!(facts.effective_risk, Risk::WorkspaceWrite);
    facts
}

fn policy(mode: PermissionMode, allow: &[&str], protected: &[&str]) -> PermissionPolicy {
    let mut rules = RuleSet::new();
    for text in allow {
        rules.push(Rule::parse(RuleEffect::Allow, text).unwrap());
    }
    let mut protected_paths = ProtectedPaths::new();
    for pattern in protected {
        protected_paths = protected_paths.with(pattern).unwrap();
    }
    PermissionPolicy {
        mode,
        rules,
        workspace_root: Some("/ws".into()),
        protected_paths,
        hidden_paths: PathSet::new(),
    }
}

fn check(policy: &PermissionPolicy, tool: &str, input: Value, expected: Verdict) {
    let decision = policy.decide(&writer(tool), &input);
    assert_eq!(
        decision.verdict,
        expected,
        "{} {tool} {input}: {}",
        policy.mode.as_str(),
        decision.reason
    );
}

/// Every spelling of a write into `.git`, by every writing tool (both ends of a rename), with
/// whether it is where git executes from (`Explicit`) or elsewhere in `.git` (`Approval`).
fn git_writes() -> Vec<(&'static str, Value, Protection)> {
    use Protection::*;
    let mut table = Vec::new();
    let paths = [
        (".git/config", Explicit),
        ("./.git/config", Explicit),
        ("a/../.git/config", Explicit),
        (".git/./config", Explicit),
        (".git//config", Explicit),
        ("/ws/.git/config", Explicit),
        (".git/config.worktree", Explicit),
        (".git/commondir", Explicit),
        (".git/hooks/pre-commit", Explicit),
        (".git/hooks", Explicit),
        (".git/worktrees/w/config", Explicit),
        (".git/modules/lib/hooks/post-checkout", Explicit),
        (".git/modules/lib/config", Explicit),
        (".git/modules/a/modules/b/config", Explicit),
        (".git", Explicit),
        ("sub/.git", Explicit),
        ("sub/.git/config", Explicit),
        ("sub/deeper/.git/hooks/pre-push", Explicit),
        (".git/info/exclude", Approval),
        (".git/objects/ab/cdef", Approval),
        (".git/HEAD", Approval),
        ("sub/.git/refs/heads/main", Approval),
    ];
    for (path, level) in paths {
        table.push(("write_file", json!({"path": path, "content": "x"}), level));
        table.push((
            "edit_file",
            json!({"path": path, "oldText": "a", "newText": "b"}),
            level,
        ));
        table.push(("delete_file", json!({"path": path}), level));
        table.push((
            "rename_file",
            json!({"from": "notes.txt", "to": path}),
            level,
        ));
        table.push((
            "rename_file",
            json!({"from": path, "to": "notes.txt"}),
            level,
        ));
        // Any tool that declares filesystem.write (an MCP server's, say) is held to the same rule.
        table.push(("mcp__fs__put", json!({"path": path}), level));
    }
    table
}

#[test]
fn git_writes_need_approval_below_full_and_an_explicit_rule_in_full() {
    for (tool, input, level) in git_writes() {
        check(
            &policy(PermissionMode::ReadOnly, &[], &[]),
            tool,
            input.clone(),
            Verdict::Deny,
        );
        check(
            &policy(PermissionMode::Ask, &[], &[]),
            tool,
            input.clone(),
            Verdict::Ask,
        );
        check(
            &policy(PermissionMode::AcceptEdits, &[], &[]),
            tool,
            input.clone(),
            Verdict::Ask,
        );
        let full = match level {
            Protection::Explicit => Verdict::Deny,
            Protection::Approval => Verdict::Allow,
        };
        check(
            &policy(PermissionMode::Full, &[], &[]),
            tool,
            input.clone(),
            full,
        );
        // Allow rules that do not name `.git` do not lift the protection.
        for rule in [tool.to_owned(), format!("{tool}(**)"), format!("{tool}(*)")] {
            check(
                &policy(PermissionMode::AcceptEdits, &[&rule], &[]),
                tool,
                input.clone(),
                Verdict::Ask,
            );
            check(
                &policy(PermissionMode::Full, &[&rule], &[]),
                tool,
                input.clone(),
                full,
            );
        }
    }
}

#[test]
fn allow_rules_that_name_the_protected_place_lift_it() {
    // (mode, allow rule, tool, input, expected)
    let table = [
        (
            PermissionMode::Full,
            "edit_file(.git/config)",
            "edit_file",
            json!({"path": ".git/config"}),
            Verdict::Allow,
        ),
        (
            PermissionMode::Full,
            "edit_file(.git/config)",
            "edit_file",
            json!({"path": "./.git/config"}),
            Verdict::Allow,
        ),
        (
            PermissionMode::Full,
            "write_file(.git/hooks/*)",
            "write_file",
            json!({"path": ".git/hooks/pre-commit"}),
            Verdict::Allow,
        ),
        (
            PermissionMode::AcceptEdits,
            "write_file(.git/**)",
            "write_file",
            json!({"path": ".git/info/exclude"}),
            Verdict::Allow,
        ),
        // Naming one repository's `.git` does not name another's.
        (
            PermissionMode::Full,
            "edit_file(.git/config)",
            "edit_file",
            json!({"path": "sub/.git/config"}),
            Verdict::Deny,
        ),
        (
            PermissionMode::Full,
            "edit_file(**/config)",
            "edit_file",
            json!({"path": ".git/config"}),
            Verdict::Deny,
        ),
        // A rename needs both protected ends named.
        (
            PermissionMode::Full,
            "rename_file(.git/hooks/*)",
            "rename_file",
            json!({"from": ".git/hooks/a", "to": ".git/hooks/b"}),
            Verdict::Allow,
        ),
        (
            PermissionMode::Full,
            "rename_file(.git/hooks/*)",
            "rename_file",
            json!({"from": "notes", "to": ".git/hooks/b"}),
            Verdict::Deny,
        ),
        // `read-only` stays a ceiling.
        (
            PermissionMode::ReadOnly,
            "edit_file(.git/config)",
            "edit_file",
            json!({"path": ".git/config"}),
            Verdict::Deny,
        ),
    ];
    for (mode, rule, tool, input, expected) in table {
        check(&policy(mode, &[rule], &[]), tool, input, expected);
    }
}

#[test]
fn configured_protected_paths() {
    let protected = [".env*", "deploy", "secrets/**"];
    // (path, protected)
    let table = [
        (".env", true),
        (".env.local", true),
        ("./.env", true),
        ("deploy", true),
        ("deploy/prod.yml", true),
        ("x/../deploy/prod.yml", true),
        ("secrets/a/b", true),
        ("src/.env", false),
        ("deployment.md", false),
        ("src/main.rs", false),
    ];
    for (path, is_protected) in table {
        let input = json!({"path": path});
        let (below_full, full) = if is_protected {
            (Verdict::Ask, Verdict::Deny)
        } else {
            (Verdict::Allow, Verdict::Allow)
        };
        check(
            &policy(PermissionMode::AcceptEdits, &["write_file"], &protected),
            "write_file",
            input.clone(),
            below_full,
        );
        check(
            &policy(PermissionMode::Full, &[], &protected),
            "write_file",
            input.clone(),
            full,
        );
    }
    check(
        &policy(PermissionMode::Full, &["write_file(deploy/*)"], &protected),
        "write_file",
        json!({"path": "deploy/prod.yml"}),
        Verdict::Allow,
    );
    check(
        &policy(
            PermissionMode::Full,
            &["write_file(.env.local)"],
            &protected,
        ),
        "write_file",
        json!({"path": ".env.local"}),
        Verdict::Allow,
    );
    assert!(matches!(
        ProtectedPaths::new().with("  "),
        Err(RuleError::Empty)
    ));
    assert!(matches!(
        ProtectedPaths::new().with("a/[b"),
        Err(RuleError::BadPattern { .. })
    ));
}

#[test]
fn reads_and_commands_are_not_file_writes() {
    let full = policy(PermissionMode::Full, &[], &[]);
    let reader = ToolFacts::from_declaration(
        "read_file",
        Risk::Read,
        &clawsmith_protocol::CapabilityDeclaration::Declared(vec![Capability::FilesystemRead]),
    );
    let decision = full.decide(&reader, &json!({"path": ".git/config"}));
    assert_eq!(decision.verdict, Verdict::Allow);
    let accept = policy(PermissionMode::AcceptEdits, &[], &[]);
    assert_eq!(
        accept
            .decide(&reader, &json!({"path": ".git/hooks/pre-commit"}))
            .verdict,
        Verdict::Allow
    );
}

#[test]
fn refusals_say_why_and_how_to_allow() {
    let decision = policy(PermissionMode::Full, &[], &[])
        .decide(&writer("edit_file"), &json!({"path": "a/../.git/config"}));
    assert_eq!(
        decision.reason,
        "edit_file would write `.git/config`, a protected path (git runs hooks and config from \
         `.git` outside any sandbox); full mode never writes it without an allow rule naming it, \
         e.g. `allow edit_file(.git/config)`"
    );
    let decision = policy(PermissionMode::AcceptEdits, &[], &["deploy"])
        .decide(&writer("write_file"), &json!({"path": "deploy/x"}));
    assert_eq!(
        decision.reason,
        "write_file would write `deploy/x`, a protected path (it is listed in protected_paths); \
         accept-edits mode asks before it as before a command (an allow rule naming it, e.g. \
         `allow write_file(deploy/x)`, allows it)"
    );
}

#[test]
fn explanations_say_what_decided() {
    let table = [
        (&[][..], json!({"path": "src/a.rs"}), DecidedBy::Mode),
        (
            &[][..],
            json!({"path": ".git/config"}),
            DecidedBy::ProtectedPath,
        ),
        (
            &["edit_file(src/**)"][..],
            json!({"path": "src/a.rs"}),
            DecidedBy::Rule,
        ),
        (
            &["edit_file(.git/config)"][..],
            json!({"path": ".git/config"}),
            DecidedBy::Rule,
        ),
    ];
    for (rules, input, decided_by) in table {
        let explanation =
            policy(PermissionMode::AcceptEdits, rules, &[]).explain(&writer("edit_file"), &input);
        assert_eq!(explanation.decided_by, decided_by, "{input}");
    }
}

#[test]
fn resolved_paths_are_held_to_the_same_rules() {
    // (mode, allow rules, deny rules, tool, input, where the paths really lead, expected)
    type Case = (
        PermissionMode,
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        Value,
        &'static [&'static str],
        Verdict,
    );
    let table: [Case; 7] = [
        // `link -> .git`: the lexical path is harmless, the real one is not.
        (
            PermissionMode::AcceptEdits,
            &[],
            &[],
            "edit_file",
            json!({"path": "link/config"}),
            &[".git/config"],
            Verdict::Ask,
        ),
        (
            PermissionMode::Full,
            &[],
            &[],
            "edit_file",
            json!({"path": "link/config"}),
            &[".git/config"],
            Verdict::Deny,
        ),
        (
            PermissionMode::Full,
            &[],
            &[],
            "rename_file",
            json!({"from": "a", "to": "l/hooks/x"}),
            &["sub/.git/hooks/x"],
            Verdict::Deny,
        ),
        (
            PermissionMode::Full,
            &[],
            &[],
            "edit_file",
            json!({"path": "link/config"}),
            &["/ws/.git/config"],
            Verdict::Deny,
        ),
        // An allow rule must cover the real place as well.
        (
            PermissionMode::Ask,
            &["edit_file(src/**)"],
            &[],
            "edit_file",
            json!({"path": "src/l/x"}),
            &["deploy/x"],
            Verdict::Ask,
        ),
        (
            PermissionMode::Ask,
            &["edit_file(src/**)"],
            &[],
            "edit_file",
            json!({"path": "src/l/x"}),
            &["src/real/x"],
            Verdict::Allow,
        ),
        // A deny rule catches the real place.
        (
            PermissionMode::Full,
            &[],
            &["edit_file(.env*)"],
            "edit_file",
            json!({"path": "e"}),
            &[".env"],
            Verdict::Deny,
        ),
    ];
    for (mode, allow, deny, tool, input, resolved, expected) in table {
        let mut policy = policy(mode, allow, &[]);
        for text in deny {
            policy
                .rules
                .push(Rule::parse(RuleEffect::Deny, text).unwrap());
        }
        let subjects = policy
            .subjects(&input)
            .with_resolved_paths(resolved.iter().map(|p| p.to_string()), Some("/ws".as_ref()));
        let decision = policy.explain_subjects(&writer(tool), &subjects).decision;
        assert_eq!(
            decision.verdict, expected,
            "{input} -> {resolved:?}: {}",
            decision.reason
        );
    }
}

mod spelled_anyhow {
    use clawsmith_protocol::{Capability, Risk, Verdict};
    use clawsmith_security::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn component() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "a", "src", ".git", ".", "..", "", "hooks", "config", "modules", ".gitx", "git",
        ])
    }

    /// Where `components` lead from the workspace root, or `None` when they leave it.
    fn lands_in(components: &[&str]) -> Option<Vec<String>> {
        let mut stack: Vec<String> = Vec::new();
        for component in components {
            match *component {
                "" | "." => {}
                ".." => {
                    stack.pop()?;
                }
                name => stack.push(name.to_owned()),
            }
        }
        Some(stack)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// However a path is spelled, a write that lands in a `.git` is never allowed on the
        /// mode's say-so below `full`, nor under a broad allow rule.
        #[test]
        fn a_write_landing_in_git_is_never_allowed_below_full(
            components in prop::collection::vec(component(), 1..7),
            leading_dot_slash in any::<bool>(),
        ) {
            let mut path = components.join("/");
            if leading_dot_slash {
                path = format!("./{path}");
            }
            let facts = ToolFacts::from_declaration(
                "write_file",
                Risk::WorkspaceWrite,
                &clawsmith_protocol::CapabilityDeclaration::Declared(vec![
                    Capability::FilesystemWrite,
                ]),
            );
            let mut policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
            policy.rules = RuleSet::new().with(RuleEffect::Allow, "write_file(**)").unwrap();
            let verdict = policy.decide(&facts, &json!({"path": path})).verdict;
            if let Some(landed) = lands_in(&components)
                && landed.iter().any(|component| component == ".git")
            {
                prop_assert_ne!(verdict, Verdict::Allow, "{}", path);
            }
        }
    }
}

#[test]
fn hidden_paths_are_refused_to_every_tool_in_every_mode() {
    let hidden = PathSet::new()
        .with(".env*")
        .unwrap()
        .with("secrets")
        .unwrap();
    let reader = ToolFacts::from_declaration(
        "read_file",
        Risk::Read,
        &clawsmith_protocol::CapabilityDeclaration::Declared(vec![Capability::FilesystemRead]),
    );
    // (tool facts, input, where the path really leads, hidden)
    let table = [
        (&reader, json!({"path": ".env"}), None, true),
        (&reader, json!({"path": "./.env.local"}), None, true),
        (&reader, json!({"path": "a/../.env"}), None, true),
        (&reader, json!({"path": "/ws/.env"}), None, true),
        (&reader, json!({"path": "secrets"}), None, true),
        (&reader, json!({"path": "secrets/prod/key.pem"}), None, true),
        (
            &reader,
            json!({"path": "link/key.pem"}),
            Some("secrets/key.pem"),
            true,
        ),
        (&reader, json!({"path": "src/.env"}), None, false),
        (&reader, json!({"path": "secretsauce.md"}), None, false),
        (
            &writer("rename_file"),
            json!({"from": "a", "to": ".env"}),
            None,
            true,
        ),
        (
            &writer("rename_file"),
            json!({"from": "secrets/a", "to": "b"}),
            None,
            true,
        ),
        (&writer("write_file"), json!({"path": ".envrc"}), None, true),
    ];
    for (facts, input, resolved, is_hidden) in table {
        for mode in PermissionMode::ALL {
            let mut policy = policy(mode, &[facts.name.as_str(), "read_file(**)"], &[]);
            policy.hidden_paths = hidden.clone();
            let subjects = policy
                .subjects(&input)
                .with_resolved_paths(resolved.map(str::to_owned), Some("/ws".as_ref()));
            let explanation = policy.explain_subjects(facts, &subjects);
            assert_eq!(
                explanation.decided_by == DecidedBy::HiddenPath,
                is_hidden,
                "{} {input}: {}",
                mode.as_str(),
                explanation.decision.reason
            );
            if is_hidden {
                assert_eq!(explanation.decision.verdict, Verdict::Deny);
                assert!(
                    explanation
                        .decision
                        .reason
                        .contains("is hidden (hidden_paths)")
                );
            }
        }
    }
}
