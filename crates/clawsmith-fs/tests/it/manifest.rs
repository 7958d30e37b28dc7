//! What the command capture is built from: `list_files` (the search walk's files, symlinks in the
//! folders it enters, everything else apart), `snapshot_file`, and the entry-level restores undo
//! uses for files and symlinks.

use std::os::unix::fs::symlink;

use clawsmith_fs::{SYMLINK_MODE, Uncaptured, is_symlink_mode};

use crate::support::Fixture;

/// `(path, where list_files puts it)`: "file", "link", "ignored" or "special".
fn check(fixture: &Fixture, expected: &[(&str, &str)]) {
    let listing = fixture.workspace().list_files();
    for (path, place) in expected {
        let found = if listing.files.contains_key(*path) {
            "file"
        } else if listing.links.contains_key(*path) {
            "link"
        } else {
            match listing.others.get(*path) {
                Some((Uncaptured::Ignored, _)) => "ignored",
                Some((Uncaptured::Special, _)) => "special",
                Some((Uncaptured::Unreadable, _)) => "unreadable",
                None => "absent",
            }
        };
        assert_eq!(found, *place, "{path}");
    }
}

#[test]
fn list_files_follows_the_search_walk_and_lists_the_rest_apart() {
    let fixture = Fixture::new();
    fixture.write(".gitignore", "build/\n*.log\n");
    fixture.write("src/main.rs", "fn main() {}\n");
    fixture.write("build/out.o", "obj");
    fixture.write("target/debug/app", "bin");
    fixture.write("node_modules/x/index.js", "js");
    fixture.write("run.log", "log");
    symlink("src/main.rs", fixture.ws.join("main-link")).unwrap();
    symlink("../out.o", fixture.ws.join("build/link")).unwrap();
    symlink("/etc/passwd", fixture.ws.join("src/outside-link")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.ws.join("src/pipe").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    check(
        &fixture,
        &[
            (".gitignore", "file"),
            ("src/main.rs", "file"),
            ("main-link", "link"),
            // A link is listed, never followed: one leading outside is just a link.
            ("src/outside-link", "link"),
            ("build/out.o", "ignored"),
            ("build/link", "ignored"),
            ("target/debug/app", "ignored"),
            ("node_modules/x/index.js", "ignored"),
            ("run.log", "ignored"),
            ("src/pipe", "special"),
        ],
    );
}

#[test]
fn a_snapshot_reads_small_files_and_hashes_large_ones() {
    let fixture = Fixture::new();
    fixture.write("small.txt", "small\n");
    fixture.write("large.bin", vec![7u8; 4096]);
    let workspace = fixture.workspace();
    let small = workspace.snapshot_file("small.txt", 1024).unwrap().unwrap();
    assert_eq!(small.content.as_deref(), Some(&b"small\n"[..]));
    assert_eq!(small.sha256, clawsmith_sha256(b"small\n"));
    let large = workspace.snapshot_file("large.bin", 1024).unwrap().unwrap();
    assert_eq!(large.content, None);
    assert_eq!(large.sha256, clawsmith_sha256(&[7u8; 4096]));
    assert_eq!(workspace.snapshot_file("absent.txt", 1024).unwrap(), None);
    // A symlink is never read through.
    symlink("small.txt", fixture.ws.join("link")).unwrap();
    assert_eq!(workspace.snapshot_file("link", 1024).unwrap(), None);
}

#[test]
fn entries_restore_files_and_links_atomically_and_hash_them_apart() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "a.txt");
    symlink("a.txt", fixture.ws.join("link")).unwrap();
    let workspace = fixture.workspace();
    let path = |p: &str| workspace.resolve(p).unwrap();
    // A file and a link with the same bytes hash the same but are told apart.
    let file = workspace.hash_entry(&path("a.txt")).unwrap().unwrap();
    let link = workspace.hash_entry(&path("link")).unwrap().unwrap();
    assert_eq!((file.0, file.1), (link.0, false));
    assert!(link.1);
    assert_eq!(
        workspace.read_link(&path("link")).unwrap(),
        Some(b"a.txt".to_vec())
    );
    assert_eq!(workspace.read_link(&path("a.txt")).unwrap(), None);
    // A file over a link, a link over a file, a link in new folders, then removals.
    workspace
        .restore_entry(&path("link"), b"now a file\n", 0o640, false)
        .unwrap();
    assert_eq!(
        std::fs::read(fixture.ws.join("link")).unwrap(),
        b"now a file\n"
    );
    workspace
        .restore_entry(&path("a.txt"), b"link", SYMLINK_MODE | 0o777, false)
        .unwrap();
    assert_eq!(
        std::fs::read_link(fixture.ws.join("a.txt")).unwrap(),
        std::path::Path::new("link")
    );
    workspace
        .restore_entry(&path("d/e/up"), b"../../a.txt", SYMLINK_MODE | 0o777, true)
        .unwrap();
    assert!(fixture.ws.join("d/e/up").is_symlink());
    workspace.remove_entry(&path("d/e/up")).unwrap();
    workspace.remove_entry(&path("a.txt")).unwrap();
    workspace.remove_entry(&path("absent")).unwrap();
    assert!(!fixture.ws.join("d/e/up").exists() && !fixture.ws.join("a.txt").exists());
    // No temp entry is left beside them.
    let names: Vec<String> = std::fs::read_dir(&fixture.ws)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|name| !name.starts_with(".clawsmith-tmp")),
        "{names:?}"
    );
    assert!(is_symlink_mode(SYMLINK_MODE | 0o777) && !is_symlink_mode(0o100644 & 0o7777));
}

fn clawsmith_sha256(content: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(content).into()
}
