//! The session store contract against the embedded SQLite store: each handle is a store opened
//! anew on the same file, as a second process would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use clawsmith_checkpoint::Store;
use clawsmith_store::{Backend, SessionStore, contract};

#[test]
fn the_sqlite_store_keeps_the_session_contract() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let open = move || -> Arc<dyn SessionStore> { Arc::new(Store::open(&path).unwrap()) };
    assert_eq!(open().backend(), Backend::Sqlite);
    contract::sessions(&open, "sqlite");
}

#[test]
fn the_sqlite_store_keeps_the_blob_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("state.db")).unwrap();
    contract::blobs(&store);
}

#[test]
fn the_sqlite_store_keeps_the_undo_contract() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let open = move || -> Arc<dyn SessionStore> { Arc::new(Store::open(&path).unwrap()) };
    contract::undo(&open, "sqlite", dir.path());
}
