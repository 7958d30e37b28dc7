//! Hidden paths hold by identity: whatever name reaches a hidden file (a symlink, a chain, a
//! link to its folder, a hard link, a replacement inode), no reader returns its content or
//! lists it, and ordinary files stay readable.

use std::sync::Arc;

use clawsmith_fs::{HiddenPaths, Workspace, builtin_tools};
use clawsmith_protocol::ToolStatus;
use serde_json::json;

use clawsmith_fs::NoopRecorder;

use crate::support::{Fixture, Tools};

const SECRET: &str = "TOKEN=s3cr3t-value";
const OUTSIDE: &str = "(outside)";

/// A workspace with `.env` and `secrets/key` holding the secret, `README.md` ordinary, and
/// the tools over a handle that hides `entries`.
fn fixture(entries: &[&str]) -> (Fixture, Tools) {
    let fixture = Fixture::new();
    fixture.write(".env", format!("{SECRET}\n"));
    fixture.write("secrets/key", format!("{SECRET}\n"));
    fixture.write("README.md", "TOKEN is documented here\n");
    let tools = tools(&fixture, entries);
    (fixture, tools)
}

fn tools(fixture: &Fixture, entries: &[&str]) -> Tools {
    let hidden = Arc::new(HiddenPaths::new(&fixture.ws, entries.iter().copied()).unwrap());
    let workspace = Workspace::open(&fixture.ws).unwrap().with_hidden(hidden);
    Tools {
        tools: builtin_tools(Arc::new(workspace), Arc::new(NoopRecorder)),
    }
}

/// Asserts that `read_file path` is refused as hidden, naming `entry`, without the secret
/// (`OUTSIDE`: refused earlier, as leaving the root, like every absolute symlink).
fn refused(tools: &Tools, path: &str, entry: &str) {
    let result = tools.call("read_file", json!({ "path": path }));
    if entry == OUTSIDE {
        assert_eq!(
            result.content,
            format!("Error: Path is outside the workspace: {path}")
        );
        return;
    }
    assert_eq!(
        result.status(),
        ToolStatus::Denied,
        "{path}: {}",
        result.content
    );
    assert!(
        result.content.contains("is hidden (hidden_paths entry")
            && result.content.contains(&format!("`{entry}`")),
        "{path}: {}",
        result.content
    );
    assert!(
        !result.content.contains("s3cr3t"),
        "{path}: {}",
        result.content
    );
    assert_eq!(
        result.code(),
        Some(&clawsmith_protocol::ErrorCode::PERMISSION_DENIED),
        "{path}"
    );
}

/// With `entries` hidden, then `setup` done, `read_file path` is refused naming `entry`, and an
/// ordinary file stays readable through the same handle.
fn check_read(entries: &[&str], setup: fn(&Fixture), path: &str, entry: &str) {
    // The set exists before the attack: what it checks is taken at each call.
    let (fixture, tools) = fixture(entries);
    setup(&fixture);
    refused(&tools, path, entry);
    let ordinary = tools.ok("read_file", json!({"path": "README.md"}));
    assert!(ordinary.contains("documented"), "{ordinary}");
}

#[test]
fn every_name_of_a_hidden_file_is_refused_to_read_file() {
    // (how the other name is made, the name read, the entry that must be named)
    type Setup = fn(&Fixture);
    let table: &[(&str, Setup, &str, &str)] = &[
        ("the name itself", |_| {}, ".env", ".env"),
        (
            "relative symlink",
            |f| f.symlink(".env", "notes.txt"),
            "notes.txt",
            ".env",
        ),
        (
            "absolute symlink",
            |f| f.symlink(f.ws.join(".env"), "notes.txt"),
            "notes.txt",
            OUTSIDE,
        ),
        (
            "symlink chain",
            |f| {
                f.symlink(".env", "a");
                std::fs::create_dir(f.ws.join("docs")).unwrap();
                f.symlink("../a", "docs/b");
                f.symlink("docs/b", "c");
            },
            "c",
            ".env",
        ),
        (
            "symlink to the hidden file's folder",
            |f| f.symlink("secrets", "open"),
            "open/key",
            "secrets",
        ),
        (
            "symlink to the root, then the hidden name",
            |f| f.symlink(".", "self"),
            "self/.env",
            ".env",
        ),
        (
            "hard link to a literal entry",
            |f| std::fs::hard_link(f.ws.join(".env"), f.ws.join("notes.txt")).unwrap(),
            "notes.txt",
            ".env",
        ),
        (
            "hard link to a file in a hidden folder",
            |f| std::fs::hard_link(f.ws.join("secrets/key"), f.ws.join("copy")).unwrap(),
            "copy",
            "secrets",
        ),
        (
            "hidden file replaced by a new inode, reached by a hard link",
            |f| {
                std::fs::remove_file(f.ws.join(".env")).unwrap();
                f.write("fresh", format!("{SECRET}\n"));
                std::fs::hard_link(f.ws.join("fresh"), f.ws.join(".env")).unwrap();
            },
            "fresh",
            ".env",
        ),
    ];
    for (case, setup, path, entry) in table {
        eprintln!("case: {case}");
        check_read(&[".env", "secrets"], *setup, path, entry);
    }
}

#[test]
fn glob_entries_hide_by_resolved_path_and_by_hard_link() {
    // (entries, setup, the name read, the entry that must be named)
    type Setup = fn(&Fixture);
    let table: &[(&[&str], Setup, &str, &str)] = &[
        (&["secrets/**"], |_| {}, "secrets/key", "secrets/**"),
        (
            &["secrets/**"],
            |f| f.symlink("secrets/key", "elsewhere"),
            "elsewhere",
            "secrets/**",
        ),
        (
            &["secrets/**"],
            |f| f.symlink("secrets", "dir"),
            "dir/key",
            "secrets/**",
        ),
        (
            &["secrets/**"],
            |f| std::fs::hard_link(f.ws.join("secrets/key"), f.ws.join("linked")).unwrap(),
            "linked",
            "secrets/**",
        ),
        (
            &["**/.env*"],
            |f| f.symlink(".env", "plain"),
            "plain",
            "**/.env*",
        ),
    ];
    for (entries, setup, path, entry) in table {
        check_read(entries, *setup, path, entry);
    }
}

#[test]
fn search_and_glob_never_show_hidden_files() {
    // (setup, search hits expected, glob listing expected)
    type Setup = fn(&Fixture);
    let table: &[(Setup, &str, &str)] = &[
        (
            |_| {},
            "README.md:1: TOKEN is documented here\n[2 hidden file(s) skipped (hidden_paths)]",
            "README.md\n[2 hidden file(s) skipped (hidden_paths)]",
        ),
        (
            |f| std::fs::hard_link(f.ws.join(".env"), f.ws.join("notes.txt")).unwrap(),
            "README.md:1: TOKEN is documented here\n[3 hidden file(s) skipped (hidden_paths)]",
            "README.md\n[3 hidden file(s) skipped (hidden_paths)]",
        ),
        (
            // A symlink is never followed by the walk: it adds nothing.
            |f| f.symlink(".env", "notes.txt"),
            "README.md:1: TOKEN is documented here\n[2 hidden file(s) skipped (hidden_paths)]",
            "README.md\n[2 hidden file(s) skipped (hidden_paths)]",
        ),
    ];
    for (setup, search, glob) in table {
        let (fixture, tools) = fixture(&[".env", "secrets/**"]);
        setup(&fixture);
        let found = tools.ok("search_files", json!({"query": "TOKEN"}));
        assert_eq!(found, *search);
        assert!(!found.contains("s3cr3t"));
        assert_eq!(tools.ok("glob_files", json!({"pattern": "**/*"})), *glob);
    }
}

#[test]
fn edits_of_a_hidden_file_are_refused_by_any_name() {
    // (tool, input)
    let table = [
        (
            "edit_file",
            json!({"path": ".env", "oldText": "s3cr3t", "newText": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "linked", "oldText": "s3cr3t", "newText": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "via/.env", "oldText": "s3cr3t", "newText": "x"}),
        ),
        ("delete_file", json!({"path": "linked"})),
    ];
    for (tool, input) in table {
        let (fixture, tools) = fixture(&[".env"]);
        std::fs::hard_link(fixture.ws.join(".env"), fixture.ws.join("linked")).unwrap();
        fixture.symlink(".", "via");
        let result = tools.call(tool, input.clone());
        assert_eq!(result.status(), ToolStatus::Denied, "{tool} {input}");
        let message = result.content;
        assert!(
            message.contains("is hidden (hidden_paths entry `.env`)"),
            "{tool} {input}: {message}"
        );
        assert_eq!(
            String::from_utf8(fixture.read(".env")).unwrap(),
            format!("{SECRET}\n")
        );
    }
}

#[test]
fn restores_and_checkpoint_reads_still_work_on_hidden_files() {
    let fixture = Fixture::new();
    fixture.write(".env", "old\n");
    let hidden = Arc::new(HiddenPaths::new(&fixture.ws, [".env"]).unwrap());
    let workspace = Workspace::open(&fixture.ws).unwrap().with_hidden(hidden);
    let path = workspace.resolve(".env").unwrap();
    workspace
        .restore_file(&path, b"restored\n", 0o600, false)
        .unwrap();
    assert_eq!(fixture.read(".env"), b"restored\n");
    assert!(matches!(
        workspace.read_state(&path).unwrap(),
        clawsmith_fs::PriorState::File { .. }
    ));
    assert!(workspace.hash_file(&path).unwrap().is_some());
}

#[test]
fn hidden_matches_name_what_commands_must_not_see() {
    // (entries, files present, hard links (existing, new name), expected relative paths)
    type Case = (
        &'static [&'static str],
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
    );
    let table: &[Case] = &[
        (&[".env"], &[".env"], &[], &[".env"]),
        (&["absent"], &[], &[], &["absent"]),
        (
            &["secrets/**"],
            &["secrets/a", "secrets/b/c"],
            &[],
            &["secrets/a", "secrets/b"],
        ),
        (
            &["**/*.pem"],
            &["a.pem", "x/y/b.pem", "c.txt"],
            &[],
            &["a.pem", "x/y/b.pem"],
        ),
        (
            &["keys/*"],
            &["keys/one", "keys/sub/two"],
            &[],
            &["keys/one", "keys/sub"],
        ),
        (&["nothing/**"], &["c.txt"], &[], &[]),
        // Another name of a hidden file is covered too.
        (
            &[".env"],
            &[".env"],
            &[(".env", "d/copy")],
            &[".env", "d/copy"],
        ),
        (
            &["secrets/**"],
            &["secrets/a", "other"],
            &[("secrets/a", "x/linked")],
            &["secrets/a", "x/linked"],
        ),
        (
            &["secrets"],
            &["secrets/a"],
            &[("secrets/a", "top")],
            &["secrets", "top"],
        ),
    ];
    for (entries, files, links, expected) in table {
        let fixture = Fixture::new();
        for file in *files {
            fixture.write(file, "x");
        }
        for (existing, name) in *links {
            let target = fixture.ws.join(name);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::hard_link(fixture.ws.join(existing), target).unwrap();
        }
        let hidden = Arc::new(HiddenPaths::new(&fixture.ws, entries.iter().copied()).unwrap());
        let workspace = Workspace::open(&fixture.ws).unwrap().with_hidden(hidden);
        let mut found = workspace.hidden_matches();
        found.sort();
        let expected: Vec<_> = expected.iter().map(|path| fixture.ws.join(path)).collect();
        assert_eq!(found, expected, "{entries:?} {links:?}");
    }
}

#[test]
fn bad_hidden_globs_are_named() {
    let fixture = Fixture::new();
    let error = HiddenPaths::new(&fixture.ws, ["a/[b"]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("hidden_paths entry `a/[b` is not a valid glob"),
        "{error}"
    );
}
