//! Manifests: what loads, what is refused (with file, line and column), effective risk.

use clawsmith_plugins::{PluginError, PluginSet, load_plugin};
use clawsmith_protocol::Risk;

use crate::Fixture;

const HEAD: &str = "name = \"kit\"\nversion = \"1.0.0\"\ndescription = \"test kit\"\n";

fn tool(extra: &str) -> String {
    format!(
        "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"a tool\"\ncommand = [\"./bin/t\"]\n{extra}"
    )
}

/// Loads a plugin made of `manifest` plus an executable `bin/t` and `files`.
fn load(
    manifest: &str,
    files: &[(&str, &str)],
) -> (Fixture, Result<clawsmith_plugins::Plugin, PluginError>) {
    let fixture = Fixture::new();
    let mut all = vec![
        ("clawsmith-plugin.toml", manifest),
        ("bin/t", "#!/bin/sh\necho ok\n"),
    ];
    all.extend_from_slice(files);
    let root = fixture.plugin("kit", &all);
    let loaded = load_plugin(&root);
    (fixture, loaded)
}

#[test]
fn a_missing_capability_list_makes_the_tool_execute() {
    // (extra tool keys, effective risk)
    let table: &[(&str, Risk)] = &[
        ("", Risk::Execute),
        ("risk = \"read\"", Risk::Execute),
        ("capabilities = []", Risk::Read),
        ("capabilities = [\"filesystem.read\"]", Risk::Read),
        (
            "capabilities = [\"filesystem.read\", \"filesystem.write\"]",
            Risk::WorkspaceWrite,
        ),
        (
            "capabilities = [\"filesystem.write\"]\nrisk = \"read\"",
            Risk::WorkspaceWrite,
        ),
        (
            "capabilities = [\"filesystem.read\"]\nrisk = \"execute\"",
            Risk::Execute,
        ),
        ("capabilities = [\"network\"]", Risk::Execute),
        ("capabilities = [\"filesystem.reed\"]", Risk::Execute),
        ("capabilities = [\"Filesystem.Read\"]", Risk::Execute),
        ("capabilities = \"filesystem.read\"", Risk::Execute),
        ("capabilities = [1]", Risk::Execute),
    ];
    for (extra, risk) in table {
        let (_fixture, plugin) = load(&tool(extra), &[]);
        let plugin = plugin.unwrap_or_else(|error| panic!("{extra}: {error}"));
        assert_eq!(plugin.tools[0].effective_risk(), *risk, "{extra}");
        assert_eq!(plugin.tools[0].name, "kit__t");
    }
}

/// Extra files of a case: `(path, content)`.
type Files = &'static [(&'static str, &'static str)];

#[test]
fn refusals_name_file_line_and_column() {
    // (manifest, extra files, expected `line:column: message` fragment)
    let table: &[(String, Files, &str)] = &[
        (
            "name = \"Kit\"\nversion = \"1\"\ndescription = \"d\"\n".to_owned(),
            &[],
            "clawsmith-plugin.toml:1:8: plugin name \"Kit\" must be kebab-case",
        ),
        (
            "name = \"kit\"\nversion = \"1\"\n".to_owned(),
            &[],
            "missing field `description`",
        ),
        (
            format!("{HEAD}colour = 1\n"),
            &[],
            "clawsmith-plugin.toml:4:1: unknown field `colour`",
        ),
        (
            tool("capabilities = [\"filesystem.read\"]\nrisk = \"harmless\""),
            &[],
            "clawsmith-plugin.toml:10:8: unknown variant `harmless`",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"../escape.sh\"]\n"
            ),
            &[],
            "clawsmith-plugin.toml:8:11: tool `t`: `../escape.sh` leaves the plugin folder",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"./link.sh\"]\n"
            ),
            &[],
            "tool `t`: `./link.sh` leaves the plugin folder",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"${{PLUGIN_ROOT}}/../x.sh\"]\n"
            ),
            &[],
            "leaves the plugin folder",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"python3\", \"../tool.py\"]\n"
            ),
            &[],
            "tool `t`: `../tool.py` leaves the plugin folder",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"./missing\"]\n"
            ),
            &[],
            "tool `t`: `./missing` cannot be found in the plugin folder",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"./data.txt\"]\n"
            ),
            &[("data.txt", "not a program")],
            "`./data.txt` is not executable",
        ),
        (
            format!("{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = []\n"),
            &[],
            "clawsmith-plugin.toml:8:11: tool `t`: the command is empty",
        ),
        (
            format!(
                "{HEAD}\n[[tools]]\nname = \"a__b\"\ndescription = \"d\"\ncommand = [\"./bin/t\"]\n"
            ),
            &[],
            "clawsmith-plugin.toml:6:8: tool name \"a__b\" must be",
        ),
        (
            tool("input_schema = { type = \"array\" }"),
            &[],
            "clawsmith-plugin.toml:9:16: the input schema must describe an object",
        ),
        (
            tool("input_schema = { type = \"object\", properties = { x = { type = \"strin\" } } }"),
            &[],
            "the input schema does not compile",
        ),
        (
            tool("input_schema = \"schema.json\""),
            &[("schema.json", "{\n  \"type\": \"object\",\n  oops\n}")],
            "schema.json:3:3: not valid JSON",
        ),
        (
            tool("input_schema = \"../schema.json\""),
            &[],
            "input_schema: `../schema.json` leaves the plugin folder",
        ),
        (
            tool("timeout_ms = 0"),
            &[],
            "clawsmith-plugin.toml:9:14: timeout_ms must be between 1 and 600000",
        ),
        (
            format!(
                "{}\n[[tools]]\nname = \"t\"\ndescription = \"again\"\ncommand = [\"./bin/t\"]\n",
                tool("")
            ),
            &[],
            "tool `kit__t` is declared twice",
        ),
        (
            format!("{HEAD}\n[[hooks]]\nname = \"h\"\ncommand = \"../hook.sh\"\n"),
            &[],
            "clawsmith-plugin.toml:7:11: hook `h`: `../hook.sh` leaves the plugin folder",
        ),
        (
            format!("{HEAD}\n[[mcp_servers]]\nname = \"s\"\ncommand = \"./../server\"\n"),
            &[],
            "MCP server `s`: `./../server` leaves the plugin folder",
        ),
        (
            format!("{HEAD}\n[[mcp_servers]]\nname = \"s\"\ncommand = \"/bin/true\"\nport = 1\n"),
            &[],
            "clawsmith-plugin.toml:5:1: [[mcp_servers]]: unknown field `port`",
        ),
    ];
    let mut wrong = Vec::new();
    for (manifest, files, expected) in table {
        let fixture = Fixture::new();
        // Outside the plugin: what escaping commands and links point at.
        let outside = fixture.dir.path().join("plugins/escape.sh");
        crate::write(&outside, "#!/bin/sh\n");
        let mut all = vec![
            ("clawsmith-plugin.toml", manifest.as_str()),
            ("bin/t", "#!/bin/sh\n"),
        ];
        all.extend_from_slice(files);
        let root = fixture.plugin("kit", &all);
        std::os::unix::fs::symlink(&outside, root.join("link.sh")).unwrap();
        let error = load_plugin(&root).expect_err(expected).to_string();
        if !error.contains(expected) || !error.contains(&root.display().to_string()) {
            wrong.push(format!("expected {expected:?} (and the file) in:\n{error}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn commands_resolve_inside_the_plugin_and_the_root_expands() {
    let manifest = format!(
        "{HEAD}\n[[tools]]\nname = \"t\"\ndescription = \"d\"\ncommand = [\"${{PLUGIN_ROOT}}/bin/t\", \"./data/x\", \"--flag=${{PLUGIN_ROOT}}\", \"plain\"]\ninput_schema = \"schema.json\"\n"
    );
    let (_fixture, plugin) = load(
        &manifest,
        &[
            ("data/x", "x"),
            (
                "schema.json",
                r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#,
            ),
        ],
    );
    let plugin = plugin.unwrap();
    let root = plugin.root.display().to_string();
    let tool = &plugin.tools[0];
    assert_eq!(
        tool.argv,
        vec![
            format!("{root}/bin/t"),
            format!("{root}/data/x"),
            format!("--flag={root}"),
            "plain".to_owned()
        ]
    );
    assert_eq!(tool.input_schema["properties"]["n"]["type"], "integer");
}

#[test]
fn a_folder_without_a_manifest_and_duplicate_plugins_are_errors() {
    let fixture = Fixture::new();
    let empty = fixture.plugin("empty", &[("README", "nothing")]);
    let first = fixture.plugin("one", &[("clawsmith-plugin.toml", HEAD)]);
    let second = fixture.plugin("two", &[("clawsmith-plugin.toml", HEAD)]);
    let set = PluginSet::load(&[empty.clone(), first.clone(), second.clone(), first.clone()]);
    assert_eq!(set.plugins.len(), 1, "the first `kit` loads, once");
    let errors: Vec<String> = set.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("is not a plugin"), "{}", errors[0]);
    assert!(
        errors[1].contains("plugin `kit` is loaded twice")
            && errors[1].contains(&first.canonicalize().unwrap().display().to_string())
            && errors[1].contains(&second.canonicalize().unwrap().display().to_string()),
        "{}",
        errors[1]
    );
}

#[test]
fn plugin_folders_from_clawsmith_toml_are_relative_to_it() {
    let fixture = Fixture::new();
    let config = fixture.dir.path().join("conf/clawsmith.toml");
    crate::write(
        &config,
        "mode = \"ask\"\nplugins = [\"kits/one\", \"/abs/two\"]\n[skills]\nextra_dirs = []\n",
    );
    let dirs = clawsmith_plugins::plugin_dirs_from_config(&config).unwrap();
    assert_eq!(
        dirs,
        vec![fixture.dir.path().join("conf/kits/one"), "/abs/two".into()]
    );
    crate::write(&config, "plugins = \"one\"\n");
    let error = clawsmith_plugins::plugin_dirs_from_config(&config)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("clawsmith.toml:1:11: plugins: invalid type"),
        "{error}"
    );
}
