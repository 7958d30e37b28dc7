//! The escape suite: every attack input through every tool is refused, nothing outside the
//! workspace changes, and no outside content or name appears in any output.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clawsmith_protocol::ToolStatus;
use serde_json::{Value, json};

use crate::support::{Fixture, Tools};

/// Names and content that exist only outside the workspace.
const SECRET: &str = "OUTSIDE-SECRET";
const OUTSIDE_ONLY_NAME: &str = "outside-only-name";

fn attack_fixture() -> Fixture {
    let fixture = Fixture::new();
    let base = fixture.base.clone();
    std::fs::write(
        fixture
            .outside
            .join("dir")
            .join(format!("{OUTSIDE_ONLY_NAME}.txt")),
        SECRET,
    )
    .unwrap();
    // Siblings whose names start with the root's name.
    for sibling in ["ws_evil", "ws\"", "ws ", "ws\t", "ws\n"] {
        std::fs::create_dir(base.join(sibling)).unwrap();
        std::fs::write(
            base.join(sibling).join("secret.txt"),
            format!("{SECRET} {sibling:?}\n"),
        )
        .unwrap();
    }
    fixture.write("inside.txt", "inside content\n");
    fixture.write("sub/keep.txt", "keep\n");
    fixture.symlink(fixture.outside.join("secret.txt"), "link_file");
    fixture.symlink(fixture.outside.join("dir"), "link_dir");
    fixture.symlink("chain2", "chain1");
    fixture.symlink("../outside/secret.txt", "chain2");
    fixture.symlink("chain_dir2", "chain_dir1");
    fixture.symlink("../outside/dir", "chain_dir2");
    fixture.symlink(fixture.outside.join("created-by-attack"), "dangling");
    fixture.symlink("../outside/new-dir", "dangling_dir");
    fixture.symlink("sub/../../outside", "relative_escape");
    fixture
}

/// Everything under the temp dir except the workspace's own regular contents.
fn world(fixture: &Fixture) -> BTreeMap<PathBuf, String> {
    Fixture::snapshot(&fixture.base)
}

/// Path strings that must be refused by every path-taking tool.
fn attack_paths(fixture: &Fixture) -> Vec<(String, bool)> {
    let base = fixture.base.display().to_string();
    // (path, refused by the lexical check with the mission's exact message)
    let mut paths: Vec<(String, bool)> = vec![
        ("../outside/secret.txt".into(), true),
        ("sub/../../outside/secret.txt".into(), true),
        ("./../outside/dir/inner.txt".into(), true),
        ("..".into(), true),
        (format!("{base}/outside/secret.txt"), true),
        (format!("{base}/outside/dir"), true),
        (format!("{base}/ws_evil/secret.txt"), true),
        ("../ws_evil/secret.txt".into(), true),
        ("link_file".into(), false),
        ("link_dir/inner.txt".into(), false),
        (format!("link_dir/{OUTSIDE_ONLY_NAME}.txt"), false),
        ("chain1".into(), false),
        ("chain_dir1/inner.txt".into(), false),
        ("relative_escape/secret.txt".into(), false),
        ("dangling".into(), false),
        ("dangling_dir/new.txt".into(), false),
        ("link_dir/new.txt".into(), false),
        ("inside.txt\0".into(), false),
        ("../outside/secret.txt\0".into(), false),
    ];
    for suffix in ["\"", " ", "\t", "\n"] {
        paths.push((format!("{base}/ws{suffix}/secret.txt"), true));
        paths.push((format!("../ws{suffix}/secret.txt"), true));
    }
    paths
}

/// Folder arguments for `search_files`.
fn attack_folders(fixture: &Fixture) -> Vec<String> {
    let base = fixture.base.display().to_string();
    vec![
        "..".into(),
        "../outside".into(),
        format!("{base}/outside"),
        format!("{base}/ws_evil"),
        "../ws_evil".into(),
        "link_dir".into(),
        "chain_dir1".into(),
        "relative_escape".into(),
        "sub/\0".into(),
        format!("{base}/ws\""),
        "../ws ".into(),
    ]
}

/// (pattern, refused by syntax) — the others name symlinks and simply match nothing.
fn attack_globs(fixture: &Fixture) -> Vec<(String, bool)> {
    let base = fixture.base.display().to_string();
    vec![
        ("../*".into(), true),
        ("../outside/**".into(), true),
        ("**/../../outside/*".into(), true),
        ("sub/../../*".into(), true),
        ("{sub,..}/*".into(), true),
        (format!("{base}/outside/*"), true),
        ("/etc/*".into(), true),
        ("~/*".into(), true),
        ("*\0".into(), true),
        ("link_dir/*".into(), false),
        ("chain_dir1/**".into(), false),
        ("relative_escape/*".into(), false),
    ]
}

fn check_no_leak(fixture: &Fixture, tools: &Tools, tool: &str, input: Value) {
    let before = world(fixture);
    let result = tools.call(tool, input.clone());
    let output = serde_json::to_string(&result).unwrap();
    assert!(!output.contains(SECRET), "{tool} {input} leaked: {output}");
    assert!(
        !output.contains(OUTSIDE_ONLY_NAME),
        "{tool} {input} leaked a name: {output}"
    );
    assert!(
        !output.contains("inner.txt"),
        "{tool} {input} leaked a name: {output}"
    );
    assert_eq!(world(fixture), before, "{tool} {input} changed the world");
}

fn check_refused(
    fixture: &Fixture,
    tools: &Tools,
    tool: &str,
    input: Value,
    lexical: Option<&str>,
) {
    let before = world(fixture);
    let result = tools.call(tool, input.clone());
    assert_eq!(
        result.status(),
        ToolStatus::Error,
        "{tool} {input}: {}",
        result.content
    );
    if let Some(requested) = lexical {
        assert_eq!(
            result.content,
            format!(
                "Error: Path is outside the workspace: {}",
                clawsmith_fs::escape_control(requested)
            ),
            "{tool} {input}"
        );
    }
    let output = serde_json::to_string(&result).unwrap();
    assert!(!output.contains(SECRET), "{tool} {input} leaked: {output}");
    assert!(
        !output.contains(OUTSIDE_ONLY_NAME) || input.to_string().contains(OUTSIDE_ONLY_NAME),
        "{tool} {input} leaked a name: {output}"
    );
    assert_eq!(world(fixture), before, "{tool} {input} changed the world");
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn every_tool_refuses_every_escape() {
    let fixture = attack_fixture();
    let tools = Tools::new(&fixture);
    let world_before = world(&fixture);
    for (path, lexical) in attack_paths(&fixture) {
        let lexical = lexical.then_some(path.as_str());
        check_refused(
            &fixture,
            &tools,
            "read_file",
            json!({"path": path}),
            lexical,
        );
        check_refused(
            &fixture,
            &tools,
            "write_file",
            json!({"path": path, "content": "PWNED"}),
            lexical,
        );
        check_refused(
            &fixture,
            &tools,
            "edit_file",
            json!({"path": path, "oldText": "OUTSIDE", "newText": "PWNED"}),
            lexical,
        );
        check_refused(
            &fixture,
            &tools,
            "delete_file",
            json!({"path": path}),
            lexical,
        );
        check_refused(
            &fixture,
            &tools,
            "rename_file",
            json!({"from": path, "to": "stolen.txt"}),
            lexical,
        );
        check_refused(
            &fixture,
            &tools,
            "rename_file",
            json!({"from": "inside.txt", "to": path}),
            lexical,
        );
    }
    for folder in attack_folders(&fixture) {
        check_refused(
            &fixture,
            &tools,
            "search_files",
            json!({"query": "SECRET", "path": folder}),
            None,
        );
    }
    for (pattern, syntactic) in attack_globs(&fixture) {
        check_refused(
            &fixture,
            &tools,
            "glob_files",
            json!({"pattern": pattern}),
            None,
        );
        let search = json!({"query": "SECRET", "glob": pattern});
        if syntactic {
            check_refused(&fixture, &tools, "search_files", search, None);
        } else {
            check_no_leak(&fixture, &tools, "search_files", search);
        }
    }
    assert_eq!(world(&fixture), world_before);
    assert_eq!(fixture.read("inside.txt"), b"inside content\n");
}

#[test]
fn whole_workspace_listings_never_follow_links_outside() {
    let fixture = attack_fixture();
    let tools = Tools::new(&fixture);
    for query in [SECRET, OUTSIDE_ONLY_NAME, "inner", "secret"] {
        assert_eq!(
            tools.ok("search_files", json!({"query": query})),
            format!("No results for {query:?}.")
        );
    }
    assert_eq!(
        tools.ok("glob_files", json!({"pattern": "**"})),
        "inside.txt\nsub/keep.txt"
    );
}

#[test]
fn symlinks_that_stay_inside_work_for_reads() {
    let fixture = attack_fixture();
    fixture.symlink("sub", "sub_link");
    fixture.symlink("inside.txt", "inside_link");
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("read_file", json!({"path": "inside_link"})),
        "inside content\n"
    );
    assert_eq!(
        tools.ok("read_file", json!({"path": "sub_link/keep.txt"})),
        "keep\n"
    );
    let absolute = format!("{}/sub/keep.txt", fixture.ws.display());
    assert_eq!(tools.ok("read_file", json!({"path": absolute})), "keep\n");
    assert_eq!(
        tools.ok("search_files", json!({"query": "keep", "path": "sub_link"})),
        "sub/keep.txt\nsub/keep.txt:1: keep"
    );
    tools.ok(
        "write_file",
        json!({"path": "sub_link/new.txt", "content": "n"}),
    );
    assert_eq!(fixture.read("sub/new.txt"), b"n");
}
