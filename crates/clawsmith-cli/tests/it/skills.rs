//! Skills and memory through the binary: `skills list`, `memory …`, and the `skill_view` and
//! `memory_search` tools through `call`. HOME and XDG_CONFIG_HOME point into the temp dir.

use std::path::Path;

use serde_json::{Value, json};

use crate::{Fixture, Run, run_binary_with};

/// Runs the binary with the fixture's state dir and a home and config home of its own.
fn run(f: &Fixture, args: &[&str]) -> Run {
    let state = f.state();
    let home = f.dir.path().join("home");
    let config = f.dir.path().join("config");
    let mut full = vec!["--state-dir", state.to_str().unwrap()];
    full.extend_from_slice(args);
    run_binary_with(&full, "", |command| {
        command.env("HOME", &home).env("XDG_CONFIG_HOME", &config);
    })
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn skill(f: &Fixture, root: &str, name: &str, description: &str) {
    write(
        &f.dir.path().join(format!("{root}/{name}/SKILL.md")),
        &format!(
            "---\nname: {name}\ndescription: {description}\n---\n# {name}\nSteps for {name}.\n"
        ),
    );
}

fn call(f: &Fixture, tool: &str, arguments: Value) -> Value {
    let ws = f.ws();
    let run = run(
        f,
        &[
            "call",
            "--workspace",
            ws.to_str().unwrap(),
            tool,
            &arguments.to_string(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

#[test]
fn skills_list_shows_every_skill_with_its_source_and_reason() {
    let f = Fixture::new();
    skill(&f, "ws/.clawsmith/skills", "pdf", "Fill PDF forms.");
    skill(&f, "config/clawsmith/skills", "pdf", "User PDF.");
    skill(&f, "home/.agents/skills", "docx", "Word files.");
    write(
        &f.ws().join(".agents/skills/broken/SKILL.md"),
        "---\nname: Broken\ndescription: x\n---\n",
    );
    let ws = f.ws();
    let list = run(
        &f,
        &[
            "--json",
            "skills",
            "list",
            "--workspace",
            ws.to_str().unwrap(),
        ],
    );
    assert_eq!(list.code, 0, "{}", list.stderr);
    let skills = list.json()["skills"].as_array().unwrap().clone();
    let row = |name: &str, source_part: &str| {
        skills
            .iter()
            .find(|s| s["name"] == name && s["source"].as_str().unwrap().contains(source_part))
            .unwrap_or_else(|| panic!("{name} {source_part} in {skills:?}"))
            .clone()
    };
    assert_eq!(row("pdf", "workspace")["status"], "loaded");
    assert_eq!(
        row("pdf", "workspace")["meta"]["description"],
        "Fill PDF forms."
    );
    assert_eq!(row("pdf", "config/clawsmith")["status"], "shadowed");
    assert_eq!(
        row("pdf", "config/clawsmith")["by"],
        "workspace:.clawsmith/skills"
    );
    assert_eq!(row("docx", "home/.agents")["status"], "loaded");
    let broken = row("broken", "workspace:.agents");
    assert_eq!(broken["status"], "invalid");
    assert!(
        broken["reason"].as_str().unwrap().contains("lowercase"),
        "{broken}"
    );
    let people = run(&f, &["skills", "list", "--workspace", ws.to_str().unwrap()]);
    assert!(
        people
            .stdout
            .contains("broken  invalid  workspace:.agents/skills"),
        "{}",
        people.stdout
    );
    // [skills] disabled in the configuration.
    std::fs::create_dir_all(f.state()).unwrap();
    let config = f.dir.path().join("clawsmith.toml");
    std::fs::write(&config, "[skills]\ndisabled = [\"docx\"]\n").unwrap();
    let disabled = run(
        &f,
        &[
            "--json",
            "skills",
            "list",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(disabled.code, 0, "{}", disabled.stderr);
    let skills = disabled.json()["skills"].as_array().unwrap().clone();
    assert!(
        skills
            .iter()
            .any(|s| s["name"] == "docx" && s["status"] == "disabled")
    );
    // A misspelt key stops with the file, line and column.
    std::fs::write(&config, "[skills]\ndisable = [\"docx\"]\n").unwrap();
    let bad = run(
        &f,
        &[
            "skills",
            "list",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("clawsmith.toml") && bad.stderr.contains("line 2"),
        "{}",
        bad.stderr
    );
}

#[test]
fn skill_view_goes_through_the_core() {
    let f = Fixture::new();
    skill(&f, "ws/.clawsmith/skills", "pdf", "Fill PDF forms.");
    write(&f.ws().join(".clawsmith/skills/pdf/forms.md"), "# Forms\n");
    write(&f.dir.path().join("secret.txt"), "secret\n");
    let ws = f.ws();
    let tools = run(
        &f,
        &["--json", "tools", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(tools.code, 0, "{}", tools.stderr);
    let table = tools.json();
    let view = table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "skill_view")
        .expect("skill_view in the table")
        .clone();
    assert_eq!(view["risk"], "read");
    assert_eq!(view["concurrencySafe"], true);
    assert!(
        view["description"]
            .as_str()
            .unwrap()
            .contains("- pdf: Fill PDF forms.")
    );
    let body = call(&f, "skill_view", json!({"name": "pdf"}));
    assert_eq!(body["status"], "success");
    assert!(
        body["content"]
            .as_str()
            .unwrap()
            .starts_with("# pdf\nSteps for pdf.\n")
    );
    let file = call(&f, "skill_view", json!({"name": "pdf", "path": "forms.md"}));
    assert_eq!(file["content"], "# Forms\n");
    let escape = call(
        &f,
        "skill_view",
        json!({"name": "pdf", "path": "../../../../secret.txt"}),
    );
    assert_eq!(escape["code"], "tool_failed");
    let unknown = call(&f, "skill_view", json!({"name": "nope"}));
    assert_eq!(unknown["code"], "invalid_arguments");
    assert!(
        unknown["content"]
            .as_str()
            .unwrap()
            .contains("Available skills: pdf")
    );
}

#[test]
fn memory_notes_and_search_through_the_binary() {
    let f = Fixture::new();
    write(
        &f.ws().join("AGENTS.md"),
        "# Release\nTag releases as vX.Y.Z.\n",
    );
    let added = run(
        &f,
        &[
            "--json",
            "memory",
            "add",
            "Deploy on Fridays never",
            "--tag",
            "ops",
        ],
    );
    assert_eq!(added.code, 0, "{}", added.stderr);
    let id = added.json()["id"].as_i64().unwrap();
    let list = run(&f, &["--json", "memory", "list"]);
    assert_eq!(list.json()["notes"][0]["tags"], json!(["ops"]));
    let people = run(&f, &["memory", "list"]);
    assert!(people.stdout.contains(&format!("note:{id}")) && people.stdout.contains("[ops]"));
    let ws = f.ws();
    let search = run(
        &f,
        &[
            "--json",
            "memory",
            "search",
            "--workspace",
            ws.to_str().unwrap(),
            "deploy releases",
        ],
    );
    assert_eq!(search.code, 0, "{}", search.stderr);
    let hits = search.json()["hits"].as_array().unwrap().clone();
    let sources: Vec<&str> = hits.iter().map(|h| h["source"].as_str().unwrap()).collect();
    assert!(
        sources.contains(&"AGENTS.md") && sources.contains(&format!("note:{id}").as_str()),
        "{sources:?}"
    );
    // The tool sees the same memory, the note included.
    let result = call(
        &f,
        "memory_search",
        json!({"query": "Fridays", "scope": "notes"}),
    );
    assert_eq!(result["status"], "success");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains(&format!("note:{id} lines 1-1 · ops"))
    );
    // Hostile queries answer without an error code, through the whole core.
    for query in ["\"", "*", "NEAR(", "-", "OR OR", &"x".repeat(10_000)] {
        let result = call(&f, "memory_search", json!({ "query": query }));
        assert_eq!(result["status"], "success", "{query}: {result}");
        assert!(result.get("code").is_none());
    }
    assert_eq!(run(&f, &["memory", "rm", &format!("note:{id}")]).code, 0);
    let gone = run(&f, &["memory", "rm", &id.to_string()]);
    assert_eq!(gone.code, 1);
    assert!(
        gone.stderr.contains(&format!("no note:{id}")),
        "{}",
        gone.stderr
    );
    let bad = run(&f, &["memory", "rm", "abc"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("not a note id"));
    let empty = run(&f, &["memory", "add", "   "]);
    assert_eq!(empty.code, 1);
    assert!(empty.stderr.contains("the note is empty"));
    assert_eq!(
        run(&f, &["--json", "memory", "list"]).json()["notes"],
        json!([])
    );
    let after = call(
        &f,
        "memory_search",
        json!({"query": "Fridays", "scope": "notes"}),
    );
    assert!(after["content"].as_str().unwrap().starts_with("No results"));
}

/// The schemas of clawsmith's own extension crates (`lsp_*`, `skill_view`, `memory_search`, the
/// sub-agent tools) are compiled on their tool's first call, not when the table is built,
/// so this is where a broken one is caught: every schema of the table compiles, and every
/// extension tool of a plain configuration comes from those crates.
#[test]
fn every_schema_of_the_table_compiles() {
    let f = Fixture::new();
    skill(&f, "ws/.clawsmith/skills", "pdf", "Fill PDF forms.");
    let config = f.dir.path().join("clawsmith.toml");
    // A provider brings the sub-agent tools; nothing is sent to it while the table is built.
    write(
        &config,
        "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
         api_key_env = \"CLAWSMITH_TEST_SCHEMA_KEY\"\n",
    );
    let state = f.state();
    let ws = f.ws();
    let (home, config_home) = (f.dir.path().join("home"), f.dir.path().join("config"));
    let listed = run_binary_with(
        &[
            "--state-dir",
            state.to_str().unwrap(),
            "--json",
            "tools",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        "",
        |command| {
            command
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", &config_home)
                .env("CLAWSMITH_TEST_SCHEMA_KEY", "sk-test");
        },
    );
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let table = listed.json();
    let mut sources = std::collections::BTreeSet::new();
    for tool in table["tools"].as_array().unwrap() {
        let (name, origin) = (
            tool["name"].as_str().unwrap(),
            tool["origin"].as_str().unwrap(),
        );
        if let Err(error) = jsonschema::validator_for(&tool["inputSchema"]) {
            panic!("{name} ({origin}): {error}");
        }
        if let Some(source) = origin.strip_prefix("extension:") {
            assert!(
                clawsmith_core::IN_TREE_SOURCES.contains(&source),
                "{name} comes from {origin}"
            );
            sources.insert(source.to_owned());
        }
    }
    let expected: std::collections::BTreeSet<String> = clawsmith_core::IN_TREE_SOURCES
        .iter()
        .map(|source| (*source).to_owned())
        .collect();
    assert_eq!(sources, expected);
}
