//! Hidden paths hold for commands and file tools of a built core: the literal entries and the
//! files the glob entries match *when each command starts* (a match created after the core was
//! built included) are covered in the command's view, and no other name of a hidden file reads
//! it through the file tools.

use clawsmith_security::{PathSet, PermissionMode, PermissionPolicy};
use serde_json::json;

use crate::support::{Fixture, one};

const SECRET: &str = "s3cr3t-value";

fn sandbox_available() -> bool {
    let available = clawsmith_sandbox::KernelSupport::probe().user_namespaces;
    if !available {
        eprintln!("skipped: the command sandbox needs user namespaces, which this kernel refuses");
    }
    available
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_files_stay_hidden_by_every_name_for_commands_and_tools() {
    let fixture = Fixture::new();
    fixture.write(".env", &format!("TOKEN={SECRET}\n"));
    fixture.write("secrets/x", &format!("{SECRET}\n"));
    fixture.write("README.md", "ordinary\n");
    let core = fixture.core(|config| {
        let mut policy = PermissionPolicy::new(PermissionMode::Full);
        policy.hidden_paths = PathSet::new()
            .with(".env")
            .unwrap()
            .with("secrets/**")
            .unwrap()
            .with("**/*.pem")
            .unwrap();
        config.policy = policy;
    });
    let session = core.open_session(None).unwrap();
    // Made after the core was built: covered all the same.
    fixture.write("secrets/late.txt", &format!("{SECRET}\n"));
    fixture.write("deep/dir/key.pem", &format!("{SECRET}\n"));
    std::os::unix::fs::symlink("secrets/late.txt", fixture.workspace.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(".env", fixture.workspace.join("env-link")).unwrap();
    std::fs::hard_link(
        fixture.workspace.join("secrets/x"),
        fixture.workspace.join("hard"),
    )
    .unwrap();

    // (tool, arguments, whether it is a command, what the answer must hold) — none may
    // print the secret.
    let table = [
        (
            "read_file",
            json!({"path": "notes.txt"}),
            false,
            "is hidden",
        ),
        ("read_file", json!({"path": "env-link"}), false, "is hidden"),
        ("read_file", json!({"path": "hard"}), false, "is hidden"),
        (
            "read_file",
            json!({"path": "deep/dir/key.pem"}),
            false,
            "is hidden",
        ),
        (
            "search_files",
            json!({"query": "cr3t-val"}),
            false,
            "hidden file(s) skipped",
        ),
        ("glob_files", json!({"pattern": "**/*"}), false, "README.md"),
        ("run_command", json!({"command": "cat secrets/x"}), true, ""),
        (
            "run_command",
            json!({"command": "cat secrets/late.txt"}),
            true,
            "",
        ),
        (
            "run_command",
            json!({"command": "cat deep/dir/key.pem"}),
            true,
            "",
        ),
        ("run_command", json!({"command": "cat notes.txt"}), true, ""),
        ("run_command", json!({"command": "cat hard"}), true, ""),
        (
            "run_command",
            json!({"command": "cat .env env-link"}),
            true,
            "",
        ),
        // Ordinary files stay readable, by tools and commands.
        ("read_file", json!({"path": "README.md"}), false, "ordinary"),
        (
            "run_command",
            json!({"command": "cat README.md"}),
            true,
            "ordinary",
        ),
    ];
    for (tool, arguments, command, expected) in table {
        if command && !sandbox_available() {
            continue;
        }
        let result = one(&session, tool, &arguments.to_string()).await;
        assert!(
            !result.content.contains(SECRET) && result.content.contains(expected),
            "{tool} {arguments}: {}",
            result.content
        );
    }
}
