//! `[[mcp_servers]]` parsing: accepted shapes and every refusal.

use clawsmith_mcp::{McpConfig, McpError};
use clawsmith_protocol::Risk;

#[test]
fn a_full_entry_parses_and_other_tables_are_ignored() {
    let config = McpConfig::from_toml_str(
        r#"
        [permissions]
        allow = ["read_file"]

        [[mcp_servers]]
        name = "fixture"
        command = "/path/to/server"
        args = ["--stdio"]
        env = ["ONLY_THIS_VAR"]
        capabilities = ["network"]
        risk = "read"

        [[mcp_servers]]
        name = "bare"
        command = "bare-server"
        "#,
    )
    .unwrap();
    assert_eq!(config.mcp_servers.len(), 2);
    let fixture = &config.mcp_servers[0];
    assert_eq!(fixture.name, "fixture");
    assert_eq!(fixture.command, "/path/to/server");
    assert_eq!(fixture.args, ["--stdio"]);
    assert_eq!(fixture.env, ["ONLY_THIS_VAR"]);
    assert_eq!(
        fixture.capabilities.as_deref(),
        Some(&["network".to_owned()][..])
    );
    assert_eq!(fixture.risk, Some(Risk::Read));
    let bare = &config.mcp_servers[1];
    assert!(bare.args.is_empty() && bare.env.is_empty());
    assert_eq!(
        bare.capabilities, None,
        "absent stays absent: fail closed later"
    );
    assert_eq!(bare.risk, None);
    assert!(McpConfig::from_toml_str("").unwrap().mcp_servers.is_empty());
}

#[test]
fn refusals() {
    // (toml, a word the message must contain)
    let table = [
        ("[[mcp_servers]]\nname = \"a\"\n", "command"),
        ("[[mcp_servers]]\ncommand = \"x\"\n", "name"),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\ncapabilites = []\n",
            "capabilites",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nrisk = \"harmless\"\n",
            "harmless",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\ncapabilities = \"network\"\n",
            "capabilities",
        ),
        (
            "[[mcp_servers]]\nname = \"a__b\"\ncommand = \"x\"\n",
            "a__b",
        ),
        ("[[mcp_servers]]\nname = \"a b\"\ncommand = \"x\"\n", "a b"),
        ("[[mcp_servers]]\nname = \"\"\ncommand = \"x\"\n", "name"),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \" \"\n",
            "empty command",
        ),
        (
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
            "twice",
        ),
        ("mcp_servers = 3\n", "mcp_servers"),
        ("not toml [", "invalid"),
    ];
    for (text, word) in table {
        let error = McpConfig::from_toml_str(text).unwrap_err();
        assert!(
            matches!(error, McpError::InvalidConfig { .. }),
            "{text:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(message.contains(word), "{text:?}: {message}");
    }
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawsmith.toml");
    std::fs::write(&path, "[[mcp_servers]]\nname = \"ok\"\ncommand = \"x\"\n").unwrap();
    assert_eq!(McpConfig::load(&path).unwrap().mcp_servers[0].name, "ok");
    std::fs::write(&path, "[[mcp_servers]]\nname = 1\n").unwrap();
    let message = McpConfig::load(&path).unwrap_err().to_string();
    assert!(message.contains("clawsmith.toml"), "{message}");
    let missing = McpConfig::load(&dir.path().join("absent.toml")).unwrap_err();
    assert!(
        matches!(missing, McpError::ReadConfig { .. }),
        "{missing:?}"
    );
}
