//! Plugins through the binary: a real Python plugin process via `clawsmith call`, the kernel
//! holding a read-only plugin, load refusals, effective risk, plugin MCP servers and skills.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Fixture;

const PYTHON: &str = "/usr/bin/python3";

/// A tool that greets whoever the arguments name, and one that tries to write the workspace.
const TOOL_PY: &str = r#"
import json, os, sys
args = json.load(sys.stdin)
if args.get("write"):
    with open("a.txt", "w") as f:
        f.write("overwritten\n")
    print("wrote a.txt")
else:
    print(json.dumps({
        "content": "hello " + args["name"] + " from " + os.environ["CLAWSMITH_PLUGIN_ROOT"]
                   + " in " + os.getcwd(),
        "status": "success",
        "display": {"kind": "text", "title": "greeting"},
    }))
"#;

fn python_or_skip(test: &str) -> bool {
    if Path::new(PYTHON).exists() {
        return true;
    }
    eprintln!("SKIP {test}: {PYTHON} is not installed");
    false
}

fn sandbox_or_skip(test: &str) -> bool {
    let support = clawsmith_sandbox::KernelSupport::probe();
    if !support.user_namespaces || support.landlock_abi.is_none() {
        eprintln!("SKIP {test}: the kernel cannot build the command sandbox ({support:?})");
        return false;
    }
    true
}

/// Writes the `greet` plugin (with `manifest_tail` appended) beside the workspace.
fn greet_plugin(fixture: &Fixture, manifest_tail: &str) -> PathBuf {
    let root = fixture.dir.path().join("greet");
    std::fs::create_dir_all(root.join("skills/wave")).unwrap();
    let manifest = format!(
        r#"name = "greet"
version = "0.1.0"
description = "Greetings"

[[tools]]
name = "hello"
description = "Say hello to someone"
command = ["{PYTHON}", "./tool.py"]
input_schema = {{ type = "object", properties = {{ name = {{ type = "string" }}, write = {{ type = "boolean" }} }}, required = ["name"] }}
capabilities = ["filesystem.read"]
concurrency_safe = true

[[tools]]
name = "unsure"
description = "A tool that declares nothing"
command = ["./tool.py"]

[[mcp_servers]]
name = "docs"
command = "{PYTHON}"
args = ["./server.py"]
{manifest_tail}"#
    );
    std::fs::write(root.join("clawsmith-plugin.toml"), manifest).unwrap();
    std::fs::write(root.join("tool.py"), format!("#!{PYTHON}\n{TOOL_PY}")).unwrap();
    std::fs::set_permissions(root.join("tool.py"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        root.join("server.py"),
        crate::one_tool_mcp_server(r#"name = "lookup""#),
    )
    .unwrap();
    std::fs::write(
        root.join("skills/wave/SKILL.md"),
        "---\nname: wave\ndescription: How to wave at people\n---\nWave.\n",
    )
    .unwrap();
    root
}

#[test]
fn a_python_plugin_answers_through_call_and_cannot_write_what_it_did_not_declare() {
    let test = "a_python_plugin_answers_through_call_and_cannot_write_what_it_did_not_declare";
    if !python_or_skip(test) || !sandbox_or_skip(test) {
        return;
    }
    let fixture = Fixture::new();
    let root = greet_plugin(&fixture, "");
    let plugin = ["--plugin", root.to_str().unwrap()];
    let root = root.canonicalize().unwrap();
    let ws = fixture.ws().canonicalize().unwrap();

    // A read tool runs in the default `ask` mode without approval.
    let result = fixture.call(&plugin, "greet__hello", r#"{"name": "Ada"}"#);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(
        result["content"],
        format!("hello Ada from {} in {}", root.display(), ws.display())
    );
    assert_eq!(result["display"]["title"], "greeting");

    // It declared only filesystem.read: the kernel refuses its write, and the result says so.
    let result = fixture.call(&plugin, "greet__hello", r#"{"name": "Ada", "write": true}"#);
    assert_eq!(result["code"], "tool_failed", "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(content.contains("Read-only file system"), "{content}");
    assert!(
        content.contains(
            "the workspace is read-only to this tool: it did not declare filesystem.write"
        ),
        "{content}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.ws().join("a.txt")).unwrap(),
        "alpha\nbeta\n",
        "the file is unchanged"
    );

    // Arguments are checked against the plugin's schema before anything runs.
    let result = fixture.call(&plugin, "greet__hello", r#"{"nom": "Ada"}"#);
    assert_eq!(result["code"], "invalid_arguments", "{result}");
}

#[test]
fn tools_show_effective_risk_deferred_mcp_tools_and_plugin_skills() {
    let test = "tools_show_effective_risk_deferred_mcp_tools_and_plugin_skills";
    if !python_or_skip(test) {
        return;
    }
    let fixture = Fixture::new();
    let root = greet_plugin(&fixture, "");
    let ws = fixture.ws();
    let run = fixture.run(
        &[
            "--json",
            "tools",
            "--workspace",
            ws.to_str().unwrap(),
            "--plugin",
            root.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tools = run.json()["tools"].as_array().unwrap().clone();
    let find = |name: &str| -> Value {
        tools
            .iter()
            .find(|tool| tool["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in {tools:?}"))
            .clone()
    };
    let hello = find("greet__hello");
    assert_eq!(hello["risk"], "read");
    assert_eq!(hello["origin"], "extension:plugin:greet");
    // No capability list: every capability, so `execute`.
    assert_eq!(find("greet__unsure")["risk"], "execute");
    let lookup = find("mcp__greet-docs__lookup");
    assert_eq!(lookup["deferred"], true);
    assert_eq!(lookup["risk"], "execute");
    // The plugin's skill is in skill_view's catalog as `<plugin>:<skill>`.
    let skill_view = find("skill_view");
    assert!(
        skill_view["description"]
            .as_str()
            .unwrap()
            .contains("greet:wave"),
        "{skill_view}"
    );

    let list = fixture.run(
        &[
            "--json",
            "plugins",
            "list",
            "--plugin",
            root.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(list.code, 0, "{}", list.stderr);
    let listed = list.json();
    let plugin = &listed["plugins"][0];
    assert_eq!(plugin["name"], "greet");
    assert_eq!(plugin["tools"][0]["risk"], "read");
    assert_eq!(plugin["tools"][1]["risk"], "execute");
    assert_eq!(
        plugin["tools"][1]["capabilitiesFailedClosed"],
        "capabilities are missing"
    );
    assert_eq!(plugin["skills"][0], "greet:wave");
    assert_eq!(plugin["mcpServers"][0]["name"], "greet-docs");
    assert_eq!(listed["errors"].as_array().unwrap().len(), 0);
}

#[test]
fn a_command_leaving_the_plugin_folder_is_refused_at_load() {
    let fixture = Fixture::new();
    let root = fixture.dir.path().join("sneaky");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("clawsmith-plugin.toml"),
        "name = \"sneaky\"\nversion = \"1\"\ndescription = \"d\"\n\n[[tools]]\nname = \"t\"\n\
         description = \"d\"\ncommand = [\"../../bin/sh\", \"-c\", \"true\"]\n",
    )
    .unwrap();
    let config = fixture.dir.path().join("clawsmith.toml");
    std::fs::write(&config, "plugins = [\"sneaky\"]\n").unwrap();
    let manifest = root.canonicalize().unwrap().join("clawsmith-plugin.toml");
    let expected = format!(
        "{}:8:11: tool `t`: `../../bin/sh` leaves the plugin folder",
        manifest.display()
    );

    // Named on the command line or in clawsmith.toml: the core is not built.
    for extra in [
        vec!["--plugin", root.to_str().unwrap()],
        vec!["--config", config.to_str().unwrap()],
    ] {
        let run = fixture.try_call(&extra, "read_file", r#"{"path": "a.txt"}"#);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(run.stderr.contains(&expected), "{}", run.stderr);
        assert!(run.stdout.is_empty());
    }

    let list = fixture.run(
        &["plugins", "list", "--config", config.to_str().unwrap()],
        "",
    );
    assert_eq!(list.code, 1);
    assert!(list.stdout.contains(&expected), "{}", list.stdout);
}
