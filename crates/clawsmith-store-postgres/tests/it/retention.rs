//! Retention in bulk and the blobs' garbage collection, raced against writers storing the same
//! content again.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_store::{CommandCaptureStore, SessionStore, TurnStore};
use clawsmith_store_postgres::{Collected, PgOptions};
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::{migrated, postgres, run_sql};

fn with_objects(objects: &Arc<InMemory>) -> PgOptions {
    PgOptions {
        objects: Some(Arc::clone(objects) as Arc<dyn ObjectStore>),
        ..PgOptions::default()
    }
}

fn large(seed: u32) -> Vec<u8> {
    (0..100_000_u32)
        .map(|n| (n.wrapping_mul(seed + 7) % 251) as u8)
        .collect()
}

fn object_count(objects: &InMemory) -> usize {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        use futures_util::StreamExt;
        objects.list(None).collect::<Vec<_>>().await.len()
    })
}

#[test]
fn old_sessions_go_in_bulk_but_not_one_a_live_writer_holds_and_their_blobs_follow() {
    let Some(base) = postgres("old_sessions_go_in_bulk") else {
        return;
    };
    let objects = Arc::new(InMemory::new());
    let (url, open) = migrated(&base, with_objects(&objects));
    let store = open();
    let sessions = ["old-1", "old-2", "old-held", "new"];
    for (seed, id) in sessions.iter().enumerate() {
        store.create_session(id, "/ws").unwrap();
        store.put_artifact(id, &large(seed as u32)).unwrap();
        store.put_artifact(id, b"small and shared").unwrap();
    }
    run_sql(
        &url,
        &["UPDATE clawsmith_sessions SET created_at_ms = 1000 WHERE id LIKE 'old-%'"],
    );
    let holder = open();
    let _lease = holder.lease_session("old-held").unwrap();
    assert_eq!(store.delete_sessions_created_before(2000).unwrap(), 2);
    let left: Vec<String> = store
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|session| session.id)
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&"old-held".to_owned()) && left.contains(&"new".to_owned()));
    // Nothing is collected within the grace period.
    assert_eq!(
        store.collect_blobs(Duration::from_secs(3600)).unwrap(),
        Collected::default()
    );
    // After it: the deleted sessions' own blobs go, the shared one and the kept ones stay.
    std::thread::sleep(Duration::from_millis(20));
    let collected = store.collect_blobs(Duration::from_millis(10)).unwrap();
    assert_eq!(collected.blobs, 2, "{collected:?}");
    assert_eq!(collected.objects, 2, "{collected:?}");
    assert_eq!(object_count(&objects), 2);
    // (The held session is written by its holder: anyone else is refused while it holds it.)
    for (seed, id, writer) in [(2, "old-held", &holder), (3, "new", &store)] {
        let kept = writer.put_artifact(id, &large(seed)).unwrap();
        assert_eq!(
            writer.read_artifact(id, &kept.artifact_id).unwrap(),
            Some(large(seed))
        );
    }
}

#[test]
fn a_collection_never_takes_the_bytes_of_a_blob_a_writer_stores_again_meanwhile() {
    let Some(base) = postgres("a_collection_never_takes_the_bytes_of_a_blob") else {
        return;
    };
    let objects = Arc::new(InMemory::new());
    let (url, open) = migrated(&base, with_objects(&objects));
    let (collector, writer) = (open(), open());
    let mut lost = Vec::new();
    // Rounds the collection won (it deleted the blob the writer then stored again) and lost
    // (the writer's touch came first and the row was skipped).
    let (mut won, mut skipped) = (0, 0);
    for round in 0..200_u32 {
        let content = large(round);
        let (old, new) = (format!("old-{round}"), format!("new-{round}"));
        writer.create_session(&old, "/ws").unwrap();
        writer.create_session(&new, "/ws").unwrap();
        writer.put_artifact(&old, &content).unwrap();
        // The old session goes, and its blob is past the grace period: a candidate.
        run_sql(
            &url,
            &[
                &format!("UPDATE clawsmith_sessions SET created_at_ms = 0 WHERE id = '{old}'"),
                "UPDATE clawsmith_blobs SET touched_at = now() - interval '1 hour'",
            ],
        );
        collector.delete_sessions_created_before(1).unwrap();
        // Start times spread over a few milliseconds, so that each order (and the writer
        // waiting on the collection's lock between them) comes up.
        let (collector_delay, writer_delay) = (
            Duration::from_micros(u64::from(round % 10) * 250),
            Duration::from_micros(u64::from(round / 10 % 4) * 250),
        );
        let (collected, stored) = std::thread::scope(|scope| {
            let collecting = scope.spawn(|| {
                std::thread::sleep(collector_delay);
                collector.collect_blobs(Duration::from_secs(60))
            });
            let storing = scope.spawn(|| {
                std::thread::sleep(writer_delay);
                writer.put_artifact(&new, &content)
            });
            (collecting.join().unwrap(), storing.join().unwrap())
        });
        if collected.unwrap().objects > 0 {
            won += 1;
        } else {
            skipped += 1;
        }
        let stored = stored.unwrap();
        match writer.read_artifact(&new, &stored.artifact_id) {
            Ok(Some(bytes)) if bytes == content => {}
            other => lost.push((
                round,
                format!("{other:?}").chars().take(120).collect::<String>(),
            )),
        }
    }
    println!(
        "the collection deleted the contested blob first in {won} rounds, the writer came \
         first in {skipped}"
    );
    assert!(lost.is_empty(), "artifacts that lost their bytes: {lost:?}");
    assert!(
        won > 0 && skipped > 0,
        "the race did not come out both ways"
    );
}

#[test]
fn objects_no_row_names_are_swept_once_old_enough() {
    let Some(base) = postgres("objects_no_row_names_are_swept_once_old_enough") else {
        return;
    };
    let objects = Arc::new(InMemory::new());
    let (_, open) = migrated(&base, with_objects(&objects));
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let kept = store.put_artifact("s", &large(1)).unwrap();
    // An object a rolled-back writer left behind.
    let orphan = format!("{:064x}", 42);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        objects
            .put(
                &object_store::path::Path::from(format!("blobs/{}/{}", &orphan[..2], &orphan[2..])),
                object_store::PutPayload::from(b"left behind".to_vec()),
            )
            .await
            .unwrap();
    });
    assert_eq!(object_count(&objects), 2);
    assert_eq!(
        store
            .collect_blobs(Duration::from_secs(3600))
            .unwrap()
            .orphans,
        0,
        "not before the grace period"
    );
    std::thread::sleep(Duration::from_millis(20));
    let collected = store.collect_blobs(Duration::from_millis(10)).unwrap();
    assert_eq!(collected.orphans, 1, "{collected:?}");
    assert_eq!(object_count(&objects), 1);
    assert_eq!(
        store.read_artifact("s", &kept.artifact_id).unwrap(),
        Some(large(1))
    );
}

/// A turn's file contents are blobs too: the state before a change (named by a foreign key) and
/// the state after (kept at the finish, named by hash only) are never collected while their
/// checkpoint lives, and go once its session is gone.
#[test]
fn a_checkpoints_contents_are_kept_while_it_lives_and_go_with_its_session() {
    let Some(base) = postgres("a_checkpoints_contents_are_kept_while_it_lives") else {
        return;
    };
    let objects = Arc::new(InMemory::new());
    let (url, open) = migrated(&base, with_objects(&objects));
    let store = open();
    store.create_session("edits", "/ws").unwrap();
    let (before, after) = (large(1), large(2));
    let after_hash = clawsmith_checkpoint::sha256(&after);
    store
        .record_before("edits", "t1", "big.bin", Some((&before, 0o644)))
        .unwrap();
    store
        .record_after(
            "edits",
            "t1",
            "big.bin",
            Some((after_hash, after.len() as u64, 0o644)),
        )
        .unwrap();
    let completed =
        clawsmith_protocol::EventPayload::TurnCompleted(clawsmith_protocol::TurnCompleted {
            turn_id: "t1".to_owned(),
            tool_calls: 0,
        });
    store
        .finish_turn_reading("edits", "t1", &|_| Some(after.clone()), completed, 1)
        .unwrap();
    assert_eq!(object_count(&objects), 2, "both sides, each an object");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        store.collect_blobs(Duration::from_millis(10)).unwrap(),
        Collected::default(),
        "named by a live checkpoint"
    );
    for content in [&before, &after] {
        let name = clawsmith_checkpoint::sha256(content);
        assert_eq!(
            clawsmith_store::BlobStore::get_blob(&*store, &name)
                .unwrap()
                .as_deref(),
            Some(content.as_slice())
        );
    }
    run_sql(
        &url,
        &["UPDATE clawsmith_sessions SET created_at_ms = 1000 WHERE id = 'edits'"],
    );
    assert_eq!(store.delete_sessions_created_before(2000).unwrap(), 1);
    let collected = store.collect_blobs(Duration::from_millis(10)).unwrap();
    assert_eq!(
        (collected.blobs, collected.objects),
        (2, 2),
        "{collected:?}"
    );
    assert_eq!(object_count(&objects), 0);
}

/// A running command's manifest is spared while its note lives, and collected once the command
/// ended; a workspace's last manifest is not kept by its row (the next command makes another).
#[test]
fn a_running_commands_manifest_is_kept_until_it_ends() {
    let Some(base) = postgres("a_running_commands_manifest_is_kept_until_it_ends") else {
        return;
    };
    let (_url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("runs", "/ws").unwrap();
    let (running, last) = (b"running manifest".as_slice(), b"last manifest".as_slice());
    clawsmith_store::BlobStore::put_blobs(&*store, &[running, last]).unwrap();
    let name = clawsmith_checkpoint::sha256;
    store
        .begin_command_capture("runs", "t1", "c1", &name(running))
        .unwrap();
    store
        .remember_workspace_manifest("/ws", &name(last))
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let collected = store.collect_blobs(Duration::from_millis(10)).unwrap();
    assert_eq!(collected.blobs, 1, "only the last manifest: {collected:?}");
    assert_eq!(store.workspace_manifest("/ws").unwrap(), None);
    assert_eq!(
        store.interrupted_captures("runs").unwrap()[0].manifest,
        running
    );
    store.end_command_capture("runs", "t1", "c1").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        store
            .collect_blobs(Duration::from_millis(10))
            .unwrap()
            .blobs,
        1
    );
}

/// The collection's list of what keeps a blob is checked against the database itself: every
/// column of a clawsmith table that names a blob (by its name, or by a foreign key to the blobs)
/// is in `BLOB_REFERENCES` or declared not to keep its blob, and every foreign key to the blobs
/// is in `BLOB_REFERENCES`. A migration that adds such a column and forgets the collection fails
/// here, before a collection takes bytes a row still names.
#[test]
fn every_column_naming_a_blob_is_known_to_the_collection() {
    let Some(base) = postgres("every_column_naming_a_blob_is_known_to_the_collection") else {
        return;
    };
    let (url, _) = migrated(&base, PgOptions::default());
    let pairs = |query: &str| -> Vec<(String, String)> {
        let listed = crate::query_text(url.as_str(), query);
        listed
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (table, column) = pair.split_once('.').unwrap();
                (table.to_owned(), column.to_owned())
            })
            .collect()
    };
    let by_name = pairs(
        "SELECT coalesce(string_agg(table_name || '.' || column_name, ',' ORDER BY 1), '')
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name LIKE 'clawsmith\\_%'
           AND (column_name LIKE '%hash%' OR column_name LIKE '%blob%')
           AND NOT (table_name = 'clawsmith_blobs' AND column_name = 'hash')",
    );
    let by_key = pairs(
        "SELECT coalesce(string_agg(c.conrelid::regclass::text || '.' || a.attname, ',' ORDER BY 1), '')
         FROM pg_constraint c
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
         WHERE c.contype = 'f' AND c.confrelid = 'clawsmith_blobs'::regclass",
    );
    let known = |pair: &(String, String), list: &[(&str, &str)]| {
        list.iter()
            .any(|(table, column)| pair.0 == *table && pair.1 == *column)
    };
    assert!(
        by_key.len() >= 3,
        "the catalog query finds the keys: {by_key:?}"
    );
    for pair in &by_key {
        assert!(
            known(pair, clawsmith_store_postgres::BLOB_REFERENCES),
            "{pair:?} is a foreign key to the blobs the collection does not know"
        );
    }
    for pair in by_name.iter().chain(&by_key) {
        assert!(
            known(pair, clawsmith_store_postgres::BLOB_REFERENCES)
                || known(pair, clawsmith_store_postgres::BLOB_NAMES_NOT_KEPT),
            "{pair:?} names a blob and the collection does not know it"
        );
    }
    // And the other way: every listed column exists (a renamed column would leave the list
    // naming nothing).
    for (table, column) in clawsmith_store_postgres::BLOB_REFERENCES
        .iter()
        .chain(clawsmith_store_postgres::BLOB_NAMES_NOT_KEPT)
    {
        assert!(
            by_name
                .iter()
                .chain(&by_key)
                .any(|pair| pair.0 == *table && pair.1 == *column),
            "{table}.{column} is listed but not in the database"
        );
    }
}
