use std::sync::Arc;

use clawsmith_checkpoint::MemoryScope;
use clawsmith_protocol::{Tool, ToolStatus};
use clawsmith_skills::{Memory, MemoryConfig, MemorySearchHit, MemorySearchTool};
use serde_json::json;

use crate::{Fixture, call, code, symlink};

fn memory(f: &Fixture) -> Memory {
    Memory::new(MemoryConfig {
        workspace: Some(f.ws()),
        dirs: f.dirs(),
        index_path: f.path("state/memory.db"),
        hidden: None,
    })
}

const ALL: [MemoryScope; 3] = [
    MemoryScope::Workspace,
    MemoryScope::User,
    MemoryScope::Notes,
];

fn search(memory: &Memory, query: &str) -> Vec<MemorySearchHit> {
    memory.search(query, 10, &ALL).unwrap().hits
}

fn sources(hits: &[MemorySearchHit]) -> Vec<String> {
    hits.iter()
        .map(|hit| format!("{}#{}", hit.source, hit.heading))
        .collect()
}

#[test]
fn a_heading_hit_ranks_above_a_body_hit() {
    let f = Fixture::new();
    f.write(
        "ws/AGENTS.md",
        "# Setup\nInstall the tools, then read the deployment notes.\nMore setup text here.\n\n# Deployment\nPush the tag.\n\n# Testing\nRun the suite.\n\n# Style\nFormat the code.\n",
    );
    let hits = search(&memory(&f), "deployment");
    assert_eq!(sources(&hits), ["AGENTS.md#Deployment", "AGENTS.md#Setup"]);
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn snippets_carry_line_ranges_and_marked_matches() {
    let f = Fixture::new();
    f.write(
        "ws/.clawsmith/memory/team/conventions.md",
        "Intro line.\n\n## Errors\nLibraries use thiserror.\nThe CLI uses anyhow with context.\nNever unwrap.\n",
    );
    let hits = search(&memory(&f), "anyhow");
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit.source, ".clawsmith/memory/team/conventions.md");
    assert_eq!(hit.scope, MemoryScope::Workspace);
    assert_eq!(hit.heading, "Errors");
    assert_eq!(hit.lines, [3, 6]);
    assert_eq!(
        hit.snippet,
        "4: Libraries use thiserror.\n5: The CLI uses «anyhow» with context.\n6: Never unwrap."
    );
    assert!(hit.modified_ms > 0);
}

#[test]
fn identifiers_and_parts_of_words_match() {
    let f = Fixture::new();
    f.write(
        "ws/CLAUDE.md",
        "# Config\nCall parse_config_file before MemoryIndex::open.\n\n# Other\nNothing.\n",
    );
    let m = memory(&f);
    for query in [
        "parse_config_file",
        "parse_conf",
        "MemoryIndex",
        "Index",
        "config_fi",
    ] {
        assert_eq!(sources(&search(&m, query)), ["CLAUDE.md#Config"], "{query}");
    }
    // A whole-word hit ranks above a partial one.
    f.write("ws/GEMINI.md", "# Words\nThe index is rebuilt.\n");
    let hits = search(&m, "index");
    assert_eq!(hits[0].source, "GEMINI.md", "{hits:?}");
    // Phrases are exact.
    assert_eq!(
        sources(&search(&m, "\"index is rebuilt\"")),
        ["GEMINI.md#Words"]
    );
    assert!(search(&m, "\"rebuilt index\"").is_empty());
}

#[test]
fn an_edited_file_is_found_at_the_next_search() {
    let f = Fixture::new();
    f.write("ws/AGENTS.md", "# Build\nRun make.\n");
    let m = memory(&f);
    assert_eq!(search(&m, "make").len(), 1);
    f.write("ws/AGENTS.md", "# Build\nRun cargo build.\n");
    assert!(search(&m, "make").is_empty());
    assert_eq!(sources(&search(&m, "cargo")), ["AGENTS.md#Build"]);
    std::fs::remove_file(f.path("ws/AGENTS.md")).unwrap();
    assert!(search(&m, "cargo").is_empty());
}

#[test]
fn user_memory_notes_and_scopes() {
    let f = Fixture::new();
    f.write("ws/AGENTS.md", "# Style\nPrefer tabs.\n");
    f.write(
        "config/clawsmith/memory/style.md",
        "# Style\nPrefer spaces.\n",
    );
    let m = memory(&f);
    let note = m.add_note("Prefer short commits", &["git".into()]).unwrap();
    let all = search(&m, "prefer");
    let mut names: Vec<String> = all.iter().map(|hit| hit.source.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        ["AGENTS.md", &format!("note:{}", note.id), "user:style.md"]
    );
    let notes_only = m.search("prefer", 10, &[MemoryScope::Notes]).unwrap().hits;
    assert_eq!(notes_only.len(), 1);
    assert_eq!(notes_only[0].heading, "git");
    assert_eq!(notes_only[0].snippet, "1: «Prefer» short commits");
    let user_only = m.search("prefer", 10, &[MemoryScope::User]).unwrap().hits;
    assert_eq!(sources(&user_only), ["user:style.md#Style"]);
    assert_eq!(m.notes().unwrap().len(), 1);
    assert!(m.remove_note(note.id).unwrap());
    assert!(!m.remove_note(note.id).unwrap());
    assert!(m.notes().unwrap().is_empty());
    assert!(m.search("commits", 10, &ALL).unwrap().hits.is_empty());
    // Refused notes change nothing.
    assert!(m.add_note("  ", &[]).is_err());
    assert!(m.add_note("x", &["".into()]).is_err());
    assert!(m.notes().unwrap().is_empty());
}

#[test]
fn memory_outside_the_workspace_is_not_read_through_symlinks() {
    let f = Fixture::new();
    f.write("outside/secret.md", "# Secret\nhunter2 password\n");
    symlink(f.path("outside/secret.md"), f.path("ws/AGENTS.md"));
    std::fs::create_dir_all(f.path("ws/.clawsmith")).unwrap();
    symlink(f.path("outside"), f.path("ws/.clawsmith/memory"));
    let outcome = memory(&f).search("hunter2", 10, &ALL).unwrap();
    assert!(outcome.hits.is_empty(), "{outcome:?}");
    assert!(
        outcome
            .notes
            .iter()
            .any(|note| note.contains("AGENTS.md skipped")),
        "{:?}",
        outcome.notes
    );
    assert!(
        outcome
            .notes
            .iter()
            .any(|note| note.contains("outside the workspace")),
        "{:?}",
        outcome.notes
    );
}

#[tokio::test]
async fn hostile_queries_answer_without_an_error_code() {
    let f = Fixture::new();
    f.write(
        "ws/AGENTS.md",
        "# Tips\nUse NEAR( and OR - \"quotes\" * freely.\n",
    );
    let tool = MemorySearchTool::new(Arc::new(memory(&f)));
    let long = "a".repeat(10_000);
    let long_words = "word ".repeat(2_000);
    for query in [
        "\"",
        "*",
        "NEAR(",
        "-",
        "OR OR",
        "AND",
        "NOT x",
        "a:b",
        "^x",
        "(",
        ")",
        "\"\"\"",
        "{a b}",
        "x*",
        "",
        "   ",
        &long,
        &long_words,
        "\u{0}",
        "NEAR(a b, 2)",
    ] {
        let result = call(&tool, json!({"query": query})).await;
        assert_eq!(code(&result), None, "{query:?}: {}", result.content);
        assert_eq!(result.status(), ToolStatus::Success);
    }
    let result = call(&tool, json!({"query": "NEAR("})).await;
    assert!(
        result
            .content
            .contains("AGENTS.md lines 1-2 · Tips [workspace;"),
        "{}",
        result.content
    );
    assert!(result.content.contains("«NEAR(»"), "{}", result.content);
    let none = call(&tool, json!({"query": "zebra"})).await;
    assert!(
        none.content.starts_with("No results for \"zebra\""),
        "{}",
        none.content
    );
    let long_result = call(&tool, json!({"query": long})).await;
    assert!(
        long_result
            .content
            .contains("only the first 1000 were searched")
    );
    assert!(long_result.content.len() < 2_000);
}

#[tokio::test]
async fn the_tool_limits_and_bounds_its_output() {
    let f = Fixture::new();
    let mut text = String::new();
    for index in 0..80 {
        text.push_str(&format!("# Section {index}\nshared word here\n"));
    }
    f.write("ws/AGENTS.md", &text);
    let tool = MemorySearchTool::new(Arc::new(memory(&f)));
    let default = call(&tool, json!({"query": "shared"})).await;
    assert!(
        default.content.starts_with("10 result(s)"),
        "{}",
        default.content
    );
    let most = call(
        &tool,
        json!({"query": "shared", "limit": 50, "scope": "workspace"}),
    )
    .await;
    assert!(most.content.starts_with("50 result(s)"));
    let notes = call(&tool, json!({"query": "shared", "scope": "notes"})).await;
    assert!(notes.content.starts_with("No results"));
    assert!(tool.input_schema()["properties"]["limit"]["maximum"] == json!(50));
}
