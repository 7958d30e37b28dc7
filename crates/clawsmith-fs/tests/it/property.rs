//! Property: for any generated tree of files, directories and symlinks (inside, to the
//! outside directory or file, to `..`, absolute, dangling, chained), `search_files` and
//! `glob_files` never report a path outside the workspace and never show a byte of an outside
//! file, whatever the query, pattern or starting path.

use std::path::Path;

use proptest::prelude::*;
use serde_json::json;

use crate::support::{Fixture, Tools};

const NAMES: &[&str] = &["a", "b", "c.txt", "d.md", "sub"];

#[derive(Debug, Clone)]
enum Entry {
    File { path: Vec<usize>, content: usize },
    Link { path: Vec<usize>, target: usize },
}

/// Link targets: relative inside, relative escapes, absolute ones (filled in per fixture).
const TARGETS: &[&str] = &[
    "a",
    "sub",
    "sub/c.txt",
    "..",
    "../outside",
    "../outside/secret.txt",
    "../../",
    "sub/../../outside/dir",
    "ABS_OUTSIDE",
    "ABS_OUTSIDE_FILE",
    "ABS_WS",
    "missing/nowhere",
    "b",
];

const CONTENTS: &[&str] = &["needle one\n", "no match here\n", "needle\0binary\n", ""];

fn relative(path: &[usize]) -> String {
    path.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join("/")
}

fn entry() -> impl Strategy<Value = Entry> {
    let path = proptest::collection::vec(0..NAMES.len(), 1..4);
    prop_oneof![
        (path.clone(), 0..CONTENTS.len()).prop_map(|(path, content)| Entry::File { path, content }),
        (path, 0..TARGETS.len()).prop_map(|(path, target)| Entry::Link { path, target }),
    ]
}

/// Builds the tree, skipping entries whose place is already taken or whose parent is not a
/// real directory.
fn build(fixture: &Fixture, entries: &[Entry]) {
    for entry in entries {
        let (path, is_file) = match entry {
            Entry::File { path, .. } => (path, true),
            Entry::Link { path, .. } => (path, false),
        };
        let full = fixture.ws.join(relative(path));
        if std::fs::symlink_metadata(&full).is_ok() {
            continue;
        }
        let parent = full.parent().unwrap();
        if std::fs::create_dir_all(parent).is_err()
            || !std::fs::symlink_metadata(parent).is_ok_and(|meta| meta.is_dir())
            || !parent.starts_with(&fixture.ws)
        {
            continue;
        }
        if is_file {
            let Entry::File { content, .. } = entry else {
                unreachable!()
            };
            std::fs::write(&full, CONTENTS[*content]).unwrap();
        } else {
            let Entry::Link { target, .. } = entry else {
                unreachable!()
            };
            let target = match TARGETS[*target] {
                "ABS_OUTSIDE" => fixture.outside.display().to_string(),
                "ABS_OUTSIDE_FILE" => fixture.outside.join("secret.txt").display().to_string(),
                "ABS_WS" => fixture.ws.display().to_string(),
                other => other.to_owned(),
            };
            std::os::unix::fs::symlink(target, &full).unwrap();
        }
    }
}

/// The path a result line names: everything before the first `:` for search lines.
fn reported_paths(content: &str, search: bool) -> Vec<String> {
    content
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('[') && !line.starts_with("No "))
        .filter(|line| !line.starts_with("Error"))
        .map(|line| {
            if search {
                line.split(':').next().unwrap().to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect()
}

/// A reported path must name a regular file that, with every symlink resolved, is inside.
fn assert_inside(ws: &Path, reported: &str, context: &str) {
    assert!(
        !reported.starts_with('/') && !reported.split('/').any(|part| part == ".."),
        "{context}: {reported:?} is not a plain relative path"
    );
    let full = ws.join(reported);
    let resolved = full
        .canonicalize()
        .unwrap_or_else(|error| panic!("{context}: {reported:?} does not resolve: {error}"));
    assert!(
        resolved.starts_with(ws),
        "{context}: {reported:?} resolves to {} outside the workspace",
        resolved.display()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn search_and_glob_stay_inside(
        entries in proptest::collection::vec(entry(), 1..14),
        start in prop_oneof![Just(None), (proptest::collection::vec(0..NAMES.len(), 1..3)).prop_map(Some)],
    ) {
        let fixture = Fixture::new();
        build(&fixture, &entries);
        let outside_before = fixture.outside_snapshot();
        let tools = Tools::new(&fixture);
        let start = start.map(|path| relative(&path));
        for query in ["needle", "OUTSIDE", "SECRET", "e"] {
            let mut input = json!({"query": query});
            if let Some(start) = &start {
                input["path"] = json!(start);
            }
            let result = tools.call("search_files", input.clone());
            let context = format!("search {input}");
            prop_assert!(!result.content.contains("OUTSIDE-SECRET"), "{context}: {}", result.content);
            if result.status() == clawsmith_protocol::ToolStatus::Success {
                for path in reported_paths(&result.content, true) {
                    assert_inside(&fixture.ws, &path, &context);
                }
            }
        }
        for pattern in ["**/*", "*", "**", "**/secret*", "sub/**", "../**", "**/../*", "/**", "**/a/**"] {
            let input = json!({"pattern": pattern});
            let result = tools.call("glob_files", input.clone());
            let context = format!("glob {input}");
            if pattern == "**/*" {
                prop_assert_eq!(result.status(), clawsmith_protocol::ToolStatus::Success, "{}", result.content);
            }
            if result.status() == clawsmith_protocol::ToolStatus::Success {
                for path in reported_paths(&result.content, false) {
                    assert_inside(&fixture.ws, &path, &context);
                }
            }
        }
        prop_assert_eq!(fixture.outside_snapshot(), outside_before);
    }
}
