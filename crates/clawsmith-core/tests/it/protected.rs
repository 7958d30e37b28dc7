//! Protected paths through the pipeline: `.git` spelled through a symlinked directory is still
//! `.git`, and the refusal reaches the model.

use clawsmith_protocol::ToolStatus;
use clawsmith_security::{PermissionMode, PermissionPolicy, RuleEffect, RuleSet};

use crate::support::*;

#[tokio::test]
async fn writes_through_a_symlink_into_git_are_protected_writes() {
    // (mode, allow rule, tool, arguments, status, code)
    type Case = (
        PermissionMode,
        Option<&'static str>,
        &'static str,
        &'static str,
        ToolStatus,
        Option<&'static str>,
    );
    let edit = r#"{"path":"link/config","oldText":"[core]","newText":"[core]\n\tfsmonitor = x"}"#;
    let hook = r##"{"path":"link/hooks/pre-commit","content":"#!/bin/sh\n"}"##;
    let nested =
        r#"{"path":"deep/link/./config","oldText":"[core]","newText":"[core]\n\tpager = x"}"#;
    let direct = r#"{"path":".git/config","oldText":"[core]","newText":"[core]\n\tpager = x"}"#;
    let moved = r#"{"from":"notes.txt","to":"link/hooks/post-checkout"}"#;
    let table: [Case; 8] = [
        (
            PermissionMode::AcceptEdits,
            None,
            "edit_file",
            edit,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        (
            PermissionMode::AcceptEdits,
            None,
            "write_file",
            hook,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        (
            PermissionMode::Full,
            None,
            "edit_file",
            edit,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        (
            PermissionMode::Full,
            None,
            "edit_file",
            nested,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        (
            PermissionMode::Full,
            None,
            "rename_file",
            moved,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        // A broad allow rule names neither spelling's `.git`.
        (
            PermissionMode::AcceptEdits,
            Some("edit_file(link/**)"),
            "edit_file",
            edit,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
        // The real place, named and spelled, is allowed; the link spelling needs a rule of its
        // own (an allow covers every spelling of a call or none).
        (
            PermissionMode::Full,
            Some("edit_file(.git/config)"),
            "edit_file",
            direct,
            ToolStatus::Success,
            None,
        ),
        (
            PermissionMode::Full,
            Some("edit_file(.git/config)"),
            "edit_file",
            edit,
            ToolStatus::Denied,
            Some("permission_denied"),
        ),
    ];
    for (mode, allow, tool, arguments, status, code) in table {
        let fixture = Fixture::new();
        fixture.write(".git/config", "[core]\n");
        fixture.write("notes.txt", "notes\n");
        std::fs::create_dir(fixture.workspace.join(".git/hooks")).unwrap();
        std::fs::create_dir(fixture.workspace.join("deep")).unwrap();
        std::os::unix::fs::symlink("../.git", fixture.workspace.join("deep/link")).unwrap();
        std::os::unix::fs::symlink(".git", fixture.workspace.join("link")).unwrap();
        let session = fixture
            .core(|config| {
                config.policy = PermissionPolicy::new(mode);
                if let Some(rule) = allow {
                    config.policy.rules = RuleSet::new().with(RuleEffect::Allow, rule).unwrap();
                }
            })
            .open_session(None)
            .unwrap();
        let result = one(&session, tool, arguments).await;
        assert_status(&result, status, code);
        if status == ToolStatus::Success {
            continue;
        }
        assert!(
            result.content.contains("a protected path"),
            "{tool} {arguments}: {}",
            result.content
        );
        assert_eq!(fixture.read(".git/config"), "[core]\n");
        assert!(!fixture.workspace.join(".git/hooks/pre-commit").exists());
        assert!(!fixture.workspace.join(".git/hooks/post-checkout").exists());
        assert_eq!(fixture.read("notes.txt"), "notes\n");
    }
}
