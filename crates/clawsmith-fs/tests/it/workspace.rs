//! The workspace handle: lexical check, real check, and the restore API used by checkpoints.

use std::os::unix::fs::PermissionsExt;

use clawsmith_fs::{FsError, PostState, PriorState};

use crate::support::Fixture;

/// (requested, expected normalized form or None for "outside").
fn check_resolve(fixture: &Fixture, requested: &str, expected: Option<&str>) {
    let workspace = fixture.workspace();
    match (workspace.resolve(requested), expected) {
        (Ok(path), Some(expected)) => assert_eq!(path.as_str(), expected, "{requested:?}"),
        (Err(FsError::OutsideWorkspace { requested: echoed }), None) => {
            assert_eq!(echoed, requested);
            let message = workspace.resolve(requested).unwrap_err().to_string();
            // The field keeps the request as given; the message escapes control characters.
            assert_eq!(
                message,
                format!(
                    "Path is outside the workspace: {}",
                    clawsmith_fs::escape_control(requested)
                )
            );
        }
        (other, expected) => panic!("{requested:?}: got {other:?}, expected {expected:?}"),
    }
}

#[test]
fn resolve_lexical_table() {
    let fixture = Fixture::new();
    let ws = fixture.ws.display().to_string();
    let base = fixture.base.display().to_string();
    let cases: Vec<(String, Option<&str>)> = vec![
        ("a.txt".into(), Some("a.txt")),
        ("./a.txt".into(), Some("a.txt")),
        ("src/../a.txt".into(), Some("a.txt")),
        ("src//lib.rs".into(), Some("src/lib.rs")),
        ("src/lib.rs/".into(), Some("src/lib.rs")),
        (".".into(), Some("")),
        (format!("{ws}/src/main.rs"), Some("src/main.rs")),
        (ws.clone(), Some("")),
        (format!("{ws}/./x/../y"), Some("y")),
        ("../ws/a.txt".into(), Some("a.txt")),
        ("..".into(), None),
        ("../outside/secret.txt".into(), None),
        ("a/../../outside".into(), None),
        ("/etc/passwd".into(), None),
        (format!("{base}/outside/secret.txt"), None),
        (format!("{base}/ws_evil/x"), None),
        ("../ws_evil/x".into(), None),
        (format!("{ws}\"/x"), None),
        (format!("{ws} /x"), None),
        (format!("{ws}\t/x"), None),
        (format!("{ws}\n/x"), None),
        (format!("{ws}\""), None),
        ("../ws\"/x".into(), None),
        ("../ws /x".into(), None),
        ("../ws\t/x".into(), None),
        ("../ws\n/x".into(), None),
        ("/".into(), None),
    ];
    for (requested, expected) in &cases {
        check_resolve(&fixture, requested, *expected);
    }
}

#[test]
fn resolve_refuses_nul_and_empty() {
    let fixture = Fixture::new();
    let workspace = fixture.workspace();
    assert!(matches!(workspace.resolve("a\0b"), Err(FsError::NulByte)));
    assert!(matches!(workspace.resolve("../x\0"), Err(FsError::NulByte)));
    assert!(matches!(workspace.resolve(""), Err(FsError::EmptyPath)));
}

#[test]
fn root_is_canonicalized_once() {
    let fixture = Fixture::new();
    std::os::unix::fs::symlink(&fixture.ws, fixture.base.join("ws_link")).unwrap();
    let workspace = clawsmith_fs::Workspace::open(fixture.base.join("ws_link")).unwrap();
    assert_eq!(workspace.root(), fixture.ws.as_path());
    let inside = format!("{}/a", fixture.ws.display());
    assert_eq!(workspace.resolve(&inside).unwrap().as_str(), "a");
}

#[test]
fn read_state_hash_and_remove() {
    let fixture = Fixture::new();
    fixture.write("src/a.txt", "hello\n");
    std::fs::set_permissions(
        fixture.ws.join("src/a.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let workspace = fixture.workspace();
    let path = workspace.resolve("src/a.txt").unwrap();
    assert_eq!(
        workspace.read_state(&path).unwrap(),
        PriorState::File {
            content: b"hello\n".to_vec(),
            mode: 0o640
        }
    );
    let hash = workspace.hash_file(&path).unwrap().unwrap();
    assert_eq!(
        hex::encode(hash),
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
    let missing = workspace.resolve("src/missing.txt").unwrap();
    let missing_dir = workspace.resolve("nodir/missing.txt").unwrap();
    assert_eq!(workspace.read_state(&missing).unwrap(), PriorState::Absent);
    assert_eq!(
        workspace.read_state(&missing_dir).unwrap(),
        PriorState::Absent
    );
    assert_eq!(workspace.hash_file(&missing).unwrap(), None);
    assert_eq!(workspace.hash_file(&missing_dir).unwrap(), None);
    workspace.remove_file(&path).unwrap();
    assert!(!fixture.ws.join("src/a.txt").exists());
    workspace.remove_file(&path).unwrap();
    workspace.remove_file(&missing_dir).unwrap();
}

#[test]
fn non_regular_entries_are_errors() {
    let fixture = Fixture::new();
    fixture.write("dir/file.txt", "x");
    fixture.symlink("dir/file.txt", "inside_link");
    fixture.symlink(fixture.outside.join("secret.txt"), "outside_link");
    let workspace = fixture.workspace();
    for name in ["dir", "inside_link", "outside_link"] {
        let path = workspace.resolve(name).unwrap();
        assert!(
            matches!(
                workspace.read_state(&path),
                Err(FsError::NotRegularFile { .. })
            ),
            "{name}"
        );
        assert!(
            matches!(
                workspace.hash_file(&path),
                Err(FsError::NotRegularFile { .. })
            ),
            "{name}"
        );
        assert!(
            matches!(
                workspace.remove_file(&path),
                Err(FsError::NotRegularFile { .. })
            ),
            "{name}"
        );
        assert!(
            matches!(
                workspace.restore_file(&path, b"y", 0o644, false),
                Err(FsError::NotRegularFile { .. })
            ),
            "{name}"
        );
    }
    let root = workspace.resolve(".").unwrap();
    assert!(workspace.read_state(&root).is_err());
    assert!(fixture.ws.join("dir").is_dir());
    assert_eq!(
        std::fs::read_link(fixture.ws.join("outside_link")).unwrap(),
        fixture.outside.join("secret.txt")
    );
    assert_eq!(
        std::fs::read(fixture.outside.join("secret.txt")).unwrap(),
        b"OUTSIDE-SECRET\n"
    );
}

#[test]
fn restore_file_creates_replaces_and_keeps_mode() {
    let fixture = Fixture::new();
    let workspace = fixture.workspace();
    let nested = workspace.resolve("a/b/c.txt").unwrap();
    assert!(matches!(
        workspace.restore_file(&nested, b"x", 0o644, false),
        Err(FsError::ParentMissing { .. })
    ));
    workspace
        .restore_file(&nested, b"first", 0o755, true)
        .unwrap();
    assert_eq!(fixture.read("a/b/c.txt"), b"first");
    let mode = std::fs::metadata(fixture.ws.join("a/b/c.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755);
    workspace
        .restore_file(&nested, b"second", 0o600, false)
        .unwrap();
    assert_eq!(fixture.read("a/b/c.txt"), b"second");
    let mode = std::fs::metadata(fixture.ws.join("a/b/c.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn restore_never_creates_parents_through_an_outside_symlink() {
    let fixture = Fixture::new();
    fixture.symlink(&fixture.outside, "escape");
    let workspace = fixture.workspace();
    let before = fixture.outside_snapshot();
    let path = workspace.resolve("escape/new/file.txt").unwrap();
    let error = workspace
        .restore_file(&path, b"x", 0o644, true)
        .unwrap_err();
    assert!(
        matches!(error, FsError::OutsideWorkspace { .. }),
        "{error:?}"
    );
    let path = workspace.resolve("escape/secret.txt").unwrap();
    assert!(matches!(
        workspace.restore_file(&path, b"x", 0o644, false),
        Err(FsError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        workspace.read_state(&path),
        Err(FsError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        workspace.hash_file(&path),
        Err(FsError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        workspace.remove_file(&path),
        Err(FsError::OutsideWorkspace { .. })
    ));
    assert_eq!(fixture.outside_snapshot(), before);
}

#[test]
fn create_new_never_clobbers() {
    let fixture = Fixture::new();
    fixture.write("exists.txt", "old");
    fixture.symlink(fixture.outside.join("nothing-here"), "dangling");
    let workspace = fixture.workspace();
    for name in ["exists.txt", "dangling"] {
        let path = workspace.resolve(name).unwrap();
        assert!(matches!(
            workspace.check_creatable(&path),
            Err(FsError::AlreadyExists { .. })
        ));
        assert!(matches!(
            workspace.create_new(&path, b"new"),
            Err(FsError::AlreadyExists { .. })
        ));
    }
    assert_eq!(fixture.read("exists.txt"), b"old");
    assert!(!fixture.outside.join("nothing-here").exists());
    let path = workspace.resolve("fresh.txt").unwrap();
    let post = workspace.create_new(&path, b"new").unwrap();
    let PostState::File { sha256, size, .. } = post else {
        panic!("{post:?}")
    };
    assert_eq!(size, 3);
    assert_eq!(Some(sha256), workspace.hash_file(&path).unwrap());
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn rename_no_replace_rules() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "A");
    fixture.write("b.txt", "B");
    fixture.write("dir/x", "x");
    let workspace = fixture.workspace();
    let a = workspace.resolve("a.txt").unwrap();
    let b = workspace.resolve("b.txt").unwrap();
    let dir = workspace.resolve("dir").unwrap();
    let c = workspace.resolve("sub/c.txt").unwrap();
    assert!(matches!(
        workspace.rename_no_replace(&a, &b),
        Err(FsError::AlreadyExists { .. })
    ));
    assert!(matches!(
        workspace.rename_no_replace(&dir, &c),
        Err(FsError::NotRegularFile { .. })
    ));
    assert!(matches!(
        workspace.rename_no_replace(&a, &c),
        Err(FsError::ParentMissing { .. })
    ));
    let d = workspace.resolve("dir/d.txt").unwrap();
    workspace.rename_no_replace(&a, &d).unwrap();
    assert_eq!(fixture.read("dir/d.txt"), b"A");
    assert_eq!(fixture.read("b.txt"), b"B");
    assert!(!fixture.ws.join("a.txt").exists());
}

#[test]
fn stale_temp_files_of_dead_writers_are_swept() {
    let fixture = Fixture::new();
    let live = std::process::id();
    // A pid above the kernel's maximum (4,194,304) never exists.
    let dead = 999_999_999u32;
    fixture.write(&format!("sub/.clawsmith-tmp-{dead}-1-2"), "torn");
    fixture.write(&format!("sub/.clawsmith-tmp-{live}-1-2"), "a live writer's");
    fixture.write(&format!("sub/.clawsmith-tmp-{dead}-x-2"), "not our name");
    fixture.write("sub/.clawsmith-tmp-notes", "not ours");
    fixture.write("sub/kept.txt", "kept");
    std::fs::create_dir(fixture.ws.join(format!("sub/.clawsmith-tmp-{dead}-3-4"))).unwrap();
    fixture.symlink(
        fixture.base.join("outside"),
        &format!("sub/.clawsmith-tmp-{dead}-5-6"),
    );
    let outside = fixture.outside_snapshot();
    let workspace = fixture.workspace();
    let removed = workspace
        .sweep_stale_temp_files(&workspace.resolve("sub/kept.txt").unwrap())
        .unwrap();
    assert_eq!(removed, [format!("sub/.clawsmith-tmp-{dead}-1-2")]);
    assert!(
        !fixture
            .ws
            .join(format!("sub/.clawsmith-tmp-{dead}-1-2"))
            .exists()
    );
    for left in [
        format!("sub/.clawsmith-tmp-{live}-1-2"),
        format!("sub/.clawsmith-tmp-{dead}-x-2"),
        "sub/.clawsmith-tmp-notes".to_owned(),
        "sub/kept.txt".to_owned(),
        format!("sub/.clawsmith-tmp-{dead}-3-4"),
    ] {
        assert!(fixture.ws.join(&left).exists(), "{left} must stay");
    }
    assert!(
        fixture
            .ws
            .join(format!("sub/.clawsmith-tmp-{dead}-5-6"))
            .symlink_metadata()
            .is_ok()
    );
    assert_eq!(fixture.outside_snapshot(), outside);
    // Nothing to sweep beside a path whose directory does not exist; outside paths never resolve.
    assert!(
        workspace
            .sweep_stale_temp_files(&workspace.resolve("nope/x").unwrap())
            .unwrap()
            .is_empty()
    );
    assert!(workspace.resolve("../x").is_err());
}
