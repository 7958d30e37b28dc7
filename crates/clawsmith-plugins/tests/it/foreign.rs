//! Plugins made for other agents: skills and stdio MCP servers read, the rest listed.

use clawsmith_plugins::{PluginFormat, load_plugin};

use crate::Fixture;

#[test]
fn a_claude_code_plugin_gives_its_skills_and_stdio_servers_and_lists_the_rest() {
    let fixture = Fixture::new();
    let root = fixture.plugin(
        "review",
        &[
            (
                ".claude-plugin/plugin.json",
                r#"{"name": "review", "version": "2.0.0", "description": "Reviews",
                    "author": {"name": "someone"}, "outputStyles": "./styles"}"#,
            ),
            (
                ".mcp.json",
                r#"{"mcpServers": {
                    "local": {"command": "${CLAUDE_PLUGIN_ROOT}/server.sh", "args": ["--stdio"],
                              "env": {"API_TOKEN": "${API_TOKEN}"}},
                    "remote": {"type": "http", "url": "https://example.invalid/mcp"},
                    "secretive": {"command": "npx", "env": {"MODE": "fast"}}
                }}"#,
            ),
            ("server.sh", "#!/bin/sh\n"),
            (
                "skills/lint/SKILL.md",
                "---\nname: lint\ndescription: d\n---\n",
            ),
            ("skills/notes.txt", "not a skill"),
            ("commands/review.md", "a slash command"),
            ("agents/reviewer.md", "a sub-agent"),
        ],
    );
    let plugin = load_plugin(&root).unwrap();
    let root = plugin.root.clone();
    assert_eq!(plugin.format, PluginFormat::ClaudeCode);
    assert_eq!(plugin.version.as_deref(), Some("2.0.0"));
    assert!(plugin.tools.is_empty());
    assert_eq!(plugin.skills, vec!["review:lint"]);
    assert_eq!(
        plugin.skills_dir.as_deref(),
        Some(root.join("skills").as_path())
    );
    assert_eq!(plugin.mcp_servers.len(), 1);
    let server = &plugin.mcp_servers[0];
    assert_eq!(server.name, "review-local");
    assert_eq!(server.command, root.join("server.sh").display().to_string());
    assert_eq!(server.args, vec!["--stdio"]);
    assert_eq!(server.env, vec!["PATH", "HOME", "API_TOKEN"]);
    assert_eq!(server.capabilities, None, "fails closed: execute");
    let not_run = plugin.not_run.join("\n");
    for expected in [
        "MCP server `remote`: a remote (HTTP or SSE) server",
        "MCP server `secretive`: it sets environment values (MODE)",
        "`outputStyles` in .claude-plugin/plugin.json: not read by clawsmith",
        "commands/: slash commands, not run by clawsmith",
        "agents/: sub-agent definitions, not run by clawsmith",
    ] {
        assert!(not_run.contains(expected), "{expected:?} in:\n{not_run}");
    }
    assert!(
        !not_run.contains("author"),
        "metadata is not a part to run: {not_run}"
    );
}

#[test]
fn gemini_and_codex_manifests_are_read_and_a_bad_one_names_its_line() {
    let fixture = Fixture::new();
    let gemini = fixture.plugin(
        "gem",
        &[(
            "gemini-extension.json",
            r#"{"name": "gem", "version": "1", "contextFileName": "GEMINI.md",
                "mcpServers": {"tools": {"command": "node", "args": ["${extensionPath}/s.js"], "cwd": "x"},
                               "plain": {"command": "/usr/bin/env", "args": ["true"], "timeout": 5000}}}"#,
        ), ("s.js", "")],
    );
    let plugin = load_plugin(&gemini).unwrap();
    assert_eq!(plugin.format, PluginFormat::Gemini);
    assert_eq!(plugin.mcp_servers.len(), 1);
    assert_eq!(plugin.mcp_servers[0].name, "gem-plain");
    assert_eq!(plugin.mcp_servers[0].call_timeout_ms, Some(5000));
    let not_run = plugin.not_run.join("\n");
    assert!(
        not_run.contains("MCP server `tools`: it needs its own working directory"),
        "{not_run}"
    );
    assert!(
        not_run.contains("`contextFileName` in gemini-extension.json"),
        "{not_run}"
    );

    let codex = fixture.plugin(
        "cx",
        &[
            (
                ".codex-plugin/plugin.json",
                r#"{"name": "cx", "skills": "./my-skills/", "mcpServers": "./servers.json"}"#,
            ),
            (
                "servers.json",
                r#"{"mcpServers": {"s": {"command": "/bin/true"}}}"#,
            ),
            (
                "my-skills/a/SKILL.md",
                "---\nname: a\ndescription: d\n---\n",
            ),
        ],
    );
    let plugin = load_plugin(&codex).unwrap();
    assert_eq!(plugin.format, PluginFormat::Codex);
    assert_eq!(plugin.skills, vec!["cx:a"]);
    assert_eq!(plugin.mcp_servers[0].name, "cx-s");

    let broken = fixture.plugin(
        "broken",
        &[(
            ".claude-plugin/plugin.json",
            "{\n  \"name\": \"broken\",\n  \"version\": 1,,\n}",
        )],
    );
    let error = load_plugin(&broken).unwrap_err().to_string();
    assert!(
        error.contains("plugin.json:3:16: not valid JSON"),
        "{error}"
    );
}
