//! Two stores on one file, writing at once from threads: no "database is locked".

use std::sync::{Arc, Barrier};

use clawsmith_checkpoint::Store;

use crate::support::{turn_started, user};

#[test]
fn two_stores_on_one_file_write_concurrently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    Store::open(&path)
        .unwrap()
        .create_session("shared", "/w")
        .unwrap();
    const WRITERS: usize = 4;
    const EVENTS: u64 = 40;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let handles: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let path = path.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                // Each thread opens its own store: separate connections, like separate processes.
                let store = Store::open(&path).unwrap();
                store
                    .create_session(&format!("own-{writer}"), "/w")
                    .unwrap();
                barrier.wait();
                for index in 0..EVENTS {
                    store
                        .append_event("shared", turn_started(&format!("{writer}-{index}")), index)
                        .unwrap();
                    store
                        .append_message(&format!("own-{writer}"), &user("x"))
                        .unwrap();
                    let _ = store.events("shared").unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let sequences: Vec<u64> = store
        .events("shared")
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(
        sequences,
        (1..=WRITERS as u64 * EVENTS).collect::<Vec<_>>(),
        "gap-free under contention"
    );
    for writer in 0..WRITERS {
        assert_eq!(
            store.messages(&format!("own-{writer}")).unwrap().len() as u64,
            EVENTS
        );
    }
}
