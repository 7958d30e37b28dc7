//! `search_files` and `glob_files`: formats, skips, determinism and every budget at its boundary.

use serde_json::json;

use crate::support::{Fixture, Tools};

fn tree(fixture: &Fixture, files: &[(&str, &str)]) {
    for (path, content) in files {
        fixture.write(path, content);
    }
}

#[test]
fn search_formats_names_and_content() {
    let fixture = Fixture::new();
    tree(
        &fixture,
        &[
            ("src/lib.rs", "fn alpha() {}\nlet Beta = 1;\n"),
            ("src/beta_notes.md", "nothing here\n"),
            ("README", "a.b literal\naxb not literal\n"),
            (".hidden/config", "beta hidden\n"),
        ],
    );
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("search_files", json!({"query": "beta"})),
        ".hidden/config:1: beta hidden\nsrc/beta_notes.md\nsrc/lib.rs:2: let Beta = 1;"
    );
    assert_eq!(
        tools.ok(
            "search_files",
            json!({"query": "beta", "caseSensitive": true})
        ),
        ".hidden/config:1: beta hidden\nsrc/beta_notes.md"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "a.b"})),
        "README:1: a.b literal"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "a.b", "regex": true})),
        "README:1: a.b literal\nREADME:2: axb not literal"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "beta", "path": "src"})),
        "src/beta_notes.md\nsrc/lib.rs:2: let Beta = 1;"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "beta", "glob": "*.rs"})),
        "src/lib.rs:2: let Beta = 1;"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "beta", "glob": "src/*.md"})),
        "src/beta_notes.md"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "zeta"})),
        "No results for \"zeta\"."
    );
    let result = tools.call("search_files", json!({"query": "alpha"}));
    let display = result.metadata.display.unwrap();
    assert_eq!(display.kind, clawsmith_protocol::DisplayKind::Search);
    assert_eq!(display.body.as_deref(), Some("src/lib.rs:1: fn alpha() {}"));
    assert_eq!(
        tools.fails("search_files", json!({"query": "x", "path": "src/lib.rs"})),
        "Not a directory: src/lib.rs"
    );
}

#[test]
fn search_skips_ignored_and_linked_entries() {
    let fixture = Fixture::new();
    tree(
        &fixture,
        &[
            ("keep.txt", "needle\n"),
            (".git/config", "needle\n"),
            ("node_modules/x.js", "needle\n"),
            ("dist/x.js", "needle\n"),
            ("coverage/x", "needle\n"),
            ("target/x", "needle\n"),
            ("deep/target/x", "needle\n"),
            ("ignored.log", "needle\n"),
            ("build/out.txt", "needle\n"),
            (".gitignore", "*.log\nbuild/\n"),
            ("bin.dat", "needle\0binary\n"),
        ],
    );
    fixture.symlink("keep.txt", "link_needle.txt");
    let tools = Tools::new(&fixture);
    // What was left out is said, with how to search it.
    let not_searched = "[ignored folders not searched: build/, coverage/, deep/target/, dist/, \
                        node_modules/, … and 1 more (an ignore file or a build/dependency folder); \
                        name one as `path` to search it]";
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle"})),
        format!(
            "keep.txt:1: needle\n[1 binary file(s) were not searched for content]\n{not_searched}"
        )
    );
    assert_eq!(
        tools.ok("glob_files", json!({"pattern": "**/*"})),
        format!(".gitignore\nbin.dat\nkeep.txt\n{not_searched}")
    );
    // A folder named as the scope is searched, whatever the ignore rules say; folders inside it
    // still follow them, and version-control folders are never searched.
    let table = [
        ("node_modules", "node_modules/x.js:1: needle"),
        ("build", "build/out.txt:1: needle"),
        ("deep/target", "deep/target/x:1: needle"),
        (
            "deep",
            "No results for \"needle\".\n[ignored folders not searched: deep/target/ (an ignore file or a build/dependency folder); name one as `path` to search it]",
        ),
    ];
    for (path, expected) in table {
        assert_eq!(
            tools.ok("search_files", json!({"query": "needle", "path": path})),
            expected,
            "{path}"
        );
    }
    assert_eq!(
        tools.ok("glob_files", json!({"pattern": "node_modules/*.js"})),
        "node_modules/x.js"
    );
    let git = tools.ok("search_files", json!({"query": "needle", "path": ".git"}));
    assert!(git.starts_with("No results"), "{git}");
    // A .gitignore in the root applies when a subfolder is searched.
    fixture.write("sub/a.log", "needle\n");
    fixture.write("sub/a.txt", "needle\n");
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle", "path": "sub"})),
        "sub/a.txt:1: needle"
    );
}

#[test]
fn search_cuts_long_lines() {
    let fixture = Fixture::new();
    fixture.write("long.txt", format!("needle{}\n", "x".repeat(5000)));
    let tools = Tools::new(&fixture);
    let content = tools.ok("search_files", json!({"query": "needle"}));
    assert!(content.starts_with("long.txt:1: needle"));
    assert!(content.ends_with('…'));
    assert!(content.len() < 400, "{}", content.len());
}

fn hits_tree(fixture: &Fixture, count: usize) {
    let content: String = (0..count).map(|i| format!("hit {i}\n")).collect();
    fixture.write("data.txt", content);
}

#[test]
fn search_result_budget_boundaries() {
    let limited = "[results limited to 50; more matches exist: narrow the query, `path` or `glob`, or raise maxResults (at most 100)]";
    let fixture = Fixture::new();
    hits_tree(&fixture, 50);
    let tools = Tools::new(&fixture);
    let content = tools.ok("search_files", json!({"query": "hit"}));
    assert_eq!(content.lines().count(), 50);
    assert!(!content.contains("[results limited"));
    hits_tree(&fixture, 51);
    let content = tools.ok("search_files", json!({"query": "hit"}));
    assert_eq!(content.lines().count(), 51);
    assert_eq!(content.lines().last(), Some(limited));
    assert_eq!(content.lines().nth(49), Some("data.txt:50: hit 49"));
    hits_tree(&fixture, 100);
    let content = tools.ok("search_files", json!({"query": "hit", "maxResults": 100}));
    assert_eq!(content.lines().count(), 100);
    hits_tree(&fixture, 101);
    let content = tools.ok("search_files", json!({"query": "hit", "maxResults": 100}));
    assert_eq!(content.lines().count(), 101);
    assert!(content.ends_with(
        "[results limited to 100; more matches exist: narrow the query, `path` or `glob`]"
    ));
    let content = tools.ok("search_files", json!({"query": "hit", "maxResults": 5000}));
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 102);
    assert_eq!(lines[101], "[maxResults is capped at 100]");
}

#[test]
fn search_file_budget_boundary() {
    let fixture = Fixture::new();
    for i in 0..2_000 {
        fixture.write(&format!("d{}/f{i:04}.txt", i / 100), "x");
    }
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle"})),
        "No results for \"needle\"."
    );
    fixture.write("zz/last.txt", "needle");
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle"})),
        "No results for \"needle\".\n[search stopped after visiting 2000 files; narrow `path` or `glob` to search the rest]"
    );
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle", "path": "zz"})),
        "zz/last.txt:1: needle"
    );
}

#[test]
fn search_byte_budget_boundaries() {
    let mib = 1024 * 1024;
    let fixture = Fixture::new();
    // A match in the last byte of a 1 MiB file is found; one byte later it is not read.
    fixture.write("a_exact.txt", format!("{}needle", "x".repeat(mib - 6)));
    fixture.write("b_over.txt", format!("{}needle", "x".repeat(mib - 5)));
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle"})),
        "a_exact.txt:1: needle\n[1 file(s) larger than 1048576 bytes were searched only in their first 1048576 bytes]"
            .replace("needle\n", &format!("{}…\n", &format!("{}needle", "x".repeat(mib - 6))[..300]))
    );
    // 2 MiB read in total: the third file is never read.
    std::fs::remove_file(fixture.ws.join("b_over.txt")).unwrap();
    fixture.write("b_full.txt", "y".repeat(mib));
    fixture.write("c_after.txt", "needle");
    let content = tools.ok("search_files", json!({"query": "needle", "glob": "*.txt"}));
    assert!(!content.contains("c_after.txt"), "{content}");
    assert!(content.ends_with(
        "[search stopped after reading 2097152 bytes in total; narrow `path` or `glob` to search the rest]"
    ));
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle", "glob": "c_*"})),
        "c_after.txt:1: needle"
    );
}

/// Budgets on a larger tree: each cuts the answer where it is reached in walk order, the same
/// on every run (a later file is never read and never shown).
#[test]
fn search_read_ahead_keeps_walk_order_and_budgets() {
    let check = |files: &[(String, Vec<u8>)], input: serde_json::Value, expected: &str| {
        let fixture = Fixture::new();
        for (name, content) in files {
            fixture.write(name, content);
        }
        let tools = Tools::new(&fixture);
        for _ in 0..5 {
            assert_eq!(tools.ok("search_files", input.clone()), expected);
        }
    };
    let mib = 1024 * 1024;
    let small = |count: usize| -> Vec<(String, Vec<u8>)> {
        (0..count)
            .map(|i| (format!("d{:02}/f{i:03}.txt", i / 10), b"needle\n".to_vec()))
            .collect()
    };
    let hit = |i: usize| format!("d{:02}/f{i:03}.txt:1: needle", i / 10);
    let hits = |range: std::ops::Range<usize>| range.map(hit).collect::<Vec<_>>().join("\n");

    // The result budget stops at the 51st hit of 300 files.
    check(
        &small(300),
        json!({"query": "needle"}),
        &format!(
            "{}\n[results limited to 50; more matches exist: narrow the query, `path` or `glob`, \
             or raise maxResults (at most 100)]",
            hits(0..50)
        ),
    );

    // The byte budget: 40 files of 7 bytes, then two of 1 MiB minus 150 bytes leave 20 bytes,
    // so the next file is read only up to its first 20 bytes (its second line is not) and the
    // files after it are never read.
    let mut files = small(40);
    files.push(("e/a.txt".into(), vec![b'x'; mib - 150]));
    files.push(("e/b.txt".into(), vec![b'y'; mib - 150]));
    let mut last = b"needle first\n".to_vec();
    last.extend(b"x".repeat(100));
    last.extend(b"\nneedle second\n");
    files.push(("e/c.txt".into(), last));
    files.extend((0..40).map(|i| (format!("f/{i:02}.txt"), b"needle\n".to_vec())));
    check(
        &files,
        json!({"query": "needle", "maxResults": 100}),
        &format!(
            "{}\ne/c.txt:1: needle first\n[search stopped after reading 2097152 bytes in total; \
             narrow `path` or `glob` to search the rest]",
            hits(0..40)
        ),
    );

    // The visited budget counts files the `glob` filter leaves out.
    let mut files = small(60);
    files.extend((0..2_000).map(|i| (format!("z/{i:04}.rs"), b"needle\n".to_vec())));
    check(
        &files,
        json!({"query": "needle", "glob": "*.txt", "maxResults": 100}),
        &format!(
            "{}\n[search stopped after visiting 2000 files; narrow `path` or `glob` to search the \
             rest]",
            hits(0..60)
        ),
    );
}

#[test]
fn search_is_deterministic() {
    let fixture = Fixture::new();
    for name in ["b/2", "a/1", "c", "a/b/3", "B", "a.txt"] {
        fixture.write(name, "same\n");
    }
    let tools = Tools::new(&fixture);
    let first = tools.ok("search_files", json!({"query": "same"}));
    assert_eq!(
        first,
        "B:1: same\na/1:1: same\na/b/3:1: same\na.txt:1: same\nb/2:1: same\nc:1: same"
    );
    for _ in 0..5 {
        assert_eq!(tools.ok("search_files", json!({"query": "same"})), first);
    }
}

#[test]
fn glob_patterns() {
    let fixture = Fixture::new();
    for name in [
        "main.rs",
        "src/lib.rs",
        "src/a/b.rs",
        "src/a/c.txt",
        "x1.rs",
        "x22.rs",
    ] {
        fixture.write(name, "");
    }
    let tools = Tools::new(&fixture);
    let check = |pattern: &str, expected: &str| {
        assert_eq!(
            tools.ok("glob_files", json!({"pattern": pattern})),
            expected,
            "{pattern}"
        );
    };
    check("*.rs", "main.rs\nx1.rs\nx22.rs");
    check("**/*.rs", "main.rs\nsrc/a/b.rs\nsrc/lib.rs\nx1.rs\nx22.rs");
    check("src/**/*.rs", "src/a/b.rs\nsrc/lib.rs");
    check("x?.rs", "x1.rs");
    check("src/*", "src/lib.rs");
    check("./src/*.rs", "src/lib.rs");
    check("nothing/**", "No files match \"nothing/**\".");
    check("*.py", "No files match \"*.py\".");
    let invalid = tools.call("glob_files", json!({"pattern": "src/[a"}));
    assert_eq!(
        invalid.code(),
        Some(&clawsmith_protocol::ErrorCode::INVALID_ARGUMENTS)
    );
}

#[test]
fn glob_result_limits() {
    let fixture = Fixture::new();
    for i in 0..101 {
        fixture.write(&format!("f{i:03}.txt"), "");
    }
    let tools = Tools::new(&fixture);
    let content = tools.ok("glob_files", json!({"pattern": "*.txt"}));
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(lines[99], "f099.txt");
    assert_eq!(
        lines[100],
        "[results limited to 100; more files match: use a narrower pattern or raise maxResults (at most 1000)]"
    );
    let content = tools.ok("glob_files", json!({"pattern": "*.txt", "maxResults": 101}));
    assert_eq!(content.lines().count(), 101);
    assert!(!content.contains('['));
    let content = tools.ok("glob_files", json!({"pattern": "*.txt", "maxResults": 3}));
    assert_eq!(content.lines().count(), 4);
    let content = tools.ok(
        "glob_files",
        json!({"pattern": "*.txt", "maxResults": 100000}),
    );
    assert!(content.ends_with("[maxResults is capped at 1000]"));
}

#[test]
fn non_utf8_names_are_skipped_and_reported() {
    use std::os::unix::ffi::OsStrExt;
    let fixture = Fixture::new();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname.txt");
    std::fs::write(fixture.ws.join(name), "needle\n").unwrap();
    fixture.write("good.txt", "needle\n");
    let tools = Tools::new(&fixture);
    assert_eq!(
        tools.ok("search_files", json!({"query": "needle"})),
        "good.txt:1: needle\n[1 file(s) with names that are not UTF-8 were skipped]"
    );
}
