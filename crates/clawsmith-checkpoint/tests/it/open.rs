//! Opening files: fresh, reopened, garbage, truncated.

use clawsmith_checkpoint::{Store, StoreError};

#[test]
fn creates_and_reopens_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let store = Store::open(&path).unwrap();
        store.create_session("s1", "/work").unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(
        store.get_session("s1").unwrap().unwrap().workspace_root,
        "/work"
    );
    assert_eq!(store.path(), Some(path.as_path()));
}

#[test]
fn garbage_files_fail_with_a_clear_error() {
    let cases: &[(&str, Vec<u8>)] = &[
        (
            "text",
            b"this is not a database, just some notes\n".repeat(200),
        ),
        ("zeros page", vec![0u8; 4096]),
        (
            "random bytes",
            (0..10_000u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
                .collect(),
        ),
        ("header only", b"SQLite format 3\0".to_vec()),
    ];
    for (name, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        std::fs::write(&path, bytes).unwrap();
        match Store::open(&path) {
            Err(error @ StoreError::NotADatabase { .. }) => {
                let message = error.to_string();
                assert!(message.contains("state.db"), "{name}: {message}");
                assert!(
                    message.contains("not a usable clawsmith database"),
                    "{name}: {message}"
                );
            }
            other => panic!("{name}: expected NotADatabase, got {other:?}"),
        }
    }
}

#[test]
fn truncated_files_fail_or_open_but_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.db");
    {
        let store = Store::open(&original).unwrap();
        for index in 0..50 {
            store
                .create_session(&format!("session-{index}"), "/w")
                .unwrap();
            store
                .put_artifact(&format!("session-{index}"), &vec![b'x'; 3000])
                .unwrap();
        }
        // Closing leaves the commits in the WAL; the pages must be in the file truncated here.
        store.checkpoint_wal().unwrap();
    }
    let bytes = std::fs::read(&original).unwrap();
    assert!(bytes.len() > 8192, "the database must span several pages");
    let mut refused = 0;
    for length in [10, 100, 1000, 4096, 5000, bytes.len() / 2, bytes.len() - 1] {
        let path = dir.path().join(format!("truncated-{length}.db"));
        std::fs::write(&path, &bytes[..length]).unwrap();
        match Store::open(&path) {
            Ok(store) => {
                // Whatever survived must answer with data or an error, never a panic.
                let _ = store.list_sessions();
            }
            Err(error) => {
                refused += 1;
                assert!(
                    error
                        .to_string()
                        .contains(&format!("truncated-{length}.db")),
                    "{error}"
                );
            }
        }
    }
    assert!(
        refused >= 3,
        "short prefixes must be refused, refused {refused}"
    );
}

#[test]
fn an_unopenable_path_is_an_open_error() {
    let dir = tempfile::tempdir().unwrap();
    let error = Store::open(dir.path().join("missing-dir").join("state.db")).unwrap_err();
    assert!(matches!(error, StoreError::Open { .. }), "{error:?}");
}

#[test]
fn closing_leaves_commits_in_the_wal_and_checkpoint_wal_folds_them_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let wal = dir.path().join("state.db-wal");
    {
        let store = Store::open(&path).unwrap();
        store.create_session("s1", "/work").unwrap();
    }
    // No fold on close: the commit is in the log, and a new connection reads it there.
    assert!(std::fs::metadata(&wal).unwrap().len() > 0);
    let store = Store::open(&path).unwrap();
    assert!(store.get_session("s1").unwrap().is_some());
    store.create_session("s2", "/work").unwrap();
    store.checkpoint_wal().unwrap();
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    drop(store);
    // The main file alone now holds both sessions.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    let sessions = Store::open(&copy).unwrap().list_sessions().unwrap();
    assert_eq!(sessions.len(), 2);
    // In memory there is no log: nothing to do.
    Store::open_in_memory().unwrap().checkpoint_wal().unwrap();
}
