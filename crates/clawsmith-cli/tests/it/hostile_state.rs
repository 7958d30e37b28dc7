//! A damaged state database through the binary: every command that needs the store
//! refuses with the store's clear message, exits 1, and neither the workspace nor the file is
//! changed.

use crate::{Fixture, read};

/// Garbage and truncated contents for `clawsmith.db`.
fn damaged_databases(f: &Fixture) -> Vec<(&'static str, Vec<u8>)> {
    // A real database, cut short, is one of the cases.
    let ws = f.ws();
    let seed = f.run(
        &["--json", "tools", "--workspace", ws.to_str().unwrap()],
        "",
    );
    assert_eq!(seed.code, 0, "{}", seed.stderr);
    let real = std::fs::read(f.state().join("clawsmith.db")).unwrap();
    vec![
        ("text", b"not a database\n".repeat(300)),
        ("zeros", vec![0; 8192]),
        ("header only", b"SQLite format 3\0".to_vec()),
        ("truncated", real[..100.min(real.len())].to_vec()),
    ]
}

#[test]
fn every_store_command_refuses_a_damaged_database_and_changes_nothing() {
    let f = Fixture::new();
    let ws = f.ws();
    let ws = ws.to_str().unwrap();
    let calls = r#"[{"id":"c1","name":"write_file","arguments":"{\"path\":\"new.txt\",\"content\":\"x\"}"}]"#;
    for (name, bytes) in damaged_databases(&f) {
        let database = f.state().join("clawsmith.db");
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(f.state().join(format!("clawsmith.db{suffix}")));
        }
        std::fs::write(&database, &bytes).unwrap();
        let commands: Vec<(Vec<&str>, &str)> = vec![
            (
                vec![
                    "call",
                    "--workspace",
                    ws,
                    "--mode",
                    "full",
                    "write_file",
                    r#"{"path":"new.txt","content":"x"}"#,
                ],
                "",
            ),
            (vec!["turn", "--workspace", ws, "--mode", "full"], calls),
            (
                vec![
                    "call",
                    "--workspace",
                    ws,
                    "read_file",
                    r#"{"path":"a.txt"}"#,
                ],
                "",
            ),
            (vec!["session", "list"], ""),
            (vec!["session", "show", "s"], ""),
            (vec!["undo", "list"], ""),
            (vec!["undo", "files", "t1", "--session", "s"], ""),
            (vec!["prune"], ""),
        ];
        for (args, stdin) in commands {
            let run = f.run(&args, stdin);
            assert_eq!(run.code, 1, "{name} {args:?}: {}", run.stdout);
            assert!(
                run.stderr.contains("not a usable clawsmith database"),
                "{name} {args:?}: {}",
                run.stderr
            );
            assert!(
                !run.stderr.contains("panicked"),
                "{name} {args:?}: {}",
                run.stderr
            );
            assert!(!f.ws().join("new.txt").exists(), "{name} {args:?}");
            assert_eq!(read(&f.ws().join("a.txt")), "alpha\nbeta\n");
            assert_eq!(std::fs::read(&database).unwrap(), bytes, "{name} {args:?}");
        }
    }
}
