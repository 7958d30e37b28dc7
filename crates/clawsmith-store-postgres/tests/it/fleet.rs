//! Sessions on PostgreSQL: the shared contract, migrations, fenced leases across hosts,
//! followers and recovery on takeover.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_protocol::{EventPayload, ModelMessage, Role, ToolStatus, TurnStarted};
use clawsmith_store::{
    Backend, CommandCaptureStore, JournalStart, PendingApproval, SessionStore, StoreError,
    TurnOpening, TurnStore, contract,
};
use clawsmith_store_postgres::{PgOptions, PgStore, SCHEMA_VERSION};

use crate::{fresh_database, migrated, postgres, run_sql};

fn started(turn: &str) -> EventPayload {
    EventPayload::TurnStarted(TurnStarted {
        turn_id: turn.to_owned(),
    })
}

#[test]
fn the_postgres_store_keeps_the_session_contract() {
    let Some(base) = postgres("the_postgres_store_keeps_the_session_contract") else {
        return;
    };
    let (_, open) = migrated(&base, PgOptions::default());
    assert_eq!(open().backend(), Backend::Postgres);
    let open = move || -> Arc<dyn SessionStore> { open() };
    contract::sessions(&open, "pg");
}

#[test]
fn the_postgres_store_keeps_the_undo_contract() {
    let Some(base) = postgres("the_postgres_store_keeps_the_undo_contract") else {
        return;
    };
    let (_, open) = migrated(&base, PgOptions::default());
    let open = move || -> Arc<dyn SessionStore> { open() };
    let scratch = tempfile::tempdir().unwrap();
    contract::undo(&open, "pg", scratch.path());
}

#[test]
fn migrations_run_once_under_their_lock_and_an_unmigrated_or_newer_database_is_refused() {
    let Some(base) = postgres("migrations_run_once_under_their_lock") else {
        return;
    };
    let url = fresh_database(&base);
    let refused = PgStore::connect(&url, PgOptions::default()).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("run `clawsmith store migrate`"),
        "{refused}"
    );
    // Four hosts migrate at once: each ends at the current version, the migration ran once.
    let outcomes: Vec<(i32, i32)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                scope.spawn(move || {
                    PgStore::unchecked(&url, PgOptions::default())
                        .unwrap()
                        .migrate()
                        .unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    assert_eq!(
        outcomes.iter().filter(|(before, _)| *before == 0).count(),
        1,
        "{outcomes:?}"
    );
    assert!(outcomes.iter().all(|(_, after)| *after == SCHEMA_VERSION));
    let store = PgStore::connect(&url, PgOptions::default()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(
        store
            .server_version()
            .unwrap()
            .starts_with(char::is_numeric)
    );
    run_sql(&url, &["UPDATE clawsmith_schema SET version = 99"]);
    assert!(matches!(
        PgStore::connect(&url, PgOptions::default()),
        Err(StoreError::SchemaTooNew { found: 99, .. })
    ));
    assert!(matches!(
        PgStore::unchecked(&url, PgOptions::default())
            .unwrap()
            .migrate(),
        Err(StoreError::SchemaTooNew { found: 99, .. })
    ));
}

/// Where the server has LZ4 (Debian's PostgreSQL 15 does), the columns holding a call's
/// arguments, answers and contents compress with it: the rows written after the migration are
/// LZ4, not the default pglz.
#[test]
fn the_columns_holding_a_calls_contents_compress_with_lz4() {
    let Some(base) = postgres("the_columns_holding_a_calls_contents_compress_with_lz4") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let has_lz4: bool = crate::with_client(&url, |client| async move {
        client
            .query_one(
                "SELECT 'lz4' = ANY (enumvals) FROM pg_settings
                 WHERE name = 'default_toast_compression'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    });
    assert!(has_lz4, "the test server is built with LZ4");
    let columns = [
        ("clawsmith_messages", "message_json"),
        ("clawsmith_events", "event_json"),
        ("clawsmith_journal", "args_json"),
        ("clawsmith_blobs", "content"),
        ("clawsmith_todos", "todos_json"),
        ("clawsmith_checkpoints", "todos_json"),
        ("clawsmith_approvals", "request_json"),
        ("clawsmith_restore_plans", "plan_json"),
        ("clawsmith_undone_history", "messages_json"),
        ("clawsmith_undone_history", "events_json"),
    ];
    for (table, column) in columns {
        let method: String = crate::with_client(&url, |client| async move {
            client
                .query_one(
                    "SELECT attcompression::text FROM pg_attribute
                     WHERE attrelid = $1::text::regclass AND attname = $2",
                    &[&table, &column],
                )
                .await
                .unwrap()
                .get(0)
        });
        assert_eq!(method, "l", "{table}.{column}");
    }
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let long = "a line an agent read from a file; ".repeat(1_000);
    store
        .append_message("s", &ModelMessage::text(Role::Tool, long.clone()))
        .unwrap();
    let stored: (String, String) = crate::with_client(&url, |client| async move {
        let row = client
            .query_one(
                "SELECT pg_column_compression(message_json), message_json
                 FROM clawsmith_messages WHERE session_id = 's'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    });
    assert_eq!(stored.0, "lz4");
    assert!(stored.1.contains(&long), "and reads back whole");
}

/// Makes the server refuse every event whose JSON holds `refuse-me` (a trigger raising an
/// error), as it would refuse a write for a reason of its own.
/// Defers a turn of one read on session `s`: the turn's start, then the read's message and
/// start.
fn defer_turn_of_reads(store: &PgStore, turn: &str) {
    use clawsmith_store::DeferredRecords;

    store
        .defer_turn_start("s", turn, vec![started(turn)], 1)
        .unwrap();
    store
        .defer_call_start(
            "s",
            Some(&ModelMessage::text(Role::Assistant, "reading")),
            started(&format!("{turn}-read")),
            2,
        )
        .unwrap();
}

fn refuse_marked_events(url: &str) {
    run_sql(
        url,
        &[
            "CREATE FUNCTION refuse_marked() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.event_json LIKE '%refuse-me%' THEN
                     RAISE EXCEPTION 'refused by the test';
                 END IF;
                 RETURN NEW;
             END $$",
            "CREATE TRIGGER refuse_marked BEFORE INSERT ON clawsmith_events
             FOR EACH ROW EXECUTE FUNCTION refuse_marked()",
        ],
    );
}

/// A turn's finish sends its last statements and COMMIT together: when one of them is refused
/// by the server, nothing of the finish is written (the checkpoint stays open, no event, no
/// number taken), the connection goes back clean, and the next finish goes through.
#[test]
fn a_finish_the_server_refuses_writes_nothing_and_the_next_goes_through() {
    let Some(base) = postgres("a_finish_the_server_refuses_writes_nothing") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    store.begin_turn("s", "t1", TurnOpening::default()).unwrap();
    refuse_marked_events(&url);
    let state = |url: &str| -> (String, i64, i64) {
        crate::with_client(url, |client| async move {
            let row = client
                .query_one(
                    "SELECT (SELECT state FROM clawsmith_checkpoints WHERE turn_id = 't1'),
                            (SELECT count(*) FROM clawsmith_events),
                            (SELECT next_sequence FROM clawsmith_sessions WHERE id = 's')",
                    &[],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1), row.get(2))
        })
    };
    let before = state(&url);
    assert_eq!(before.0, "open");
    for _ in 0..3 {
        let refused = store.finish_turn_reading("s", "t1", &|_| None, started("refuse-me"), 2);
        assert!(
            matches!(&refused, Err(StoreError::Backend { message, .. }) if message.contains("refused by the test")),
            "{refused:?}"
        );
        assert_eq!(state(&url), before, "nothing of the refused finish stays");
    }
    let (_, event) = store
        .finish_turn_reading("s", "t1", &|_| None, started("done"), 2)
        .unwrap();
    assert_eq!(event.sequence, u64::try_from(before.2).unwrap());
    let after = state(&url);
    assert_eq!(
        after,
        ("finished".to_owned(), before.1 + 1, before.2 + 1),
        "closed, one event, one number"
    );
    // The pooled connections are in no transaction: later writes commit on their own.
    for n in 0..4 {
        store
            .append_event("s", started(&format!("a{n}")), 3)
            .unwrap();
    }
    assert_eq!(state(&url).1, before.1 + 5);
}

/// A turn that finishes before its start was written (a turn of reads) is written in one
/// transaction: its checkpoint already finished, its events numbered on from the records before
/// it. A finish the server refuses leaves nothing, and its records wait again as they were (the
/// turn open, no `turn.completed`), so that the next finish writes them once; a turn begun twice
/// is refused whole.
#[test]
fn a_turn_of_reads_is_written_whole_in_its_finish_or_not_at_all() {
    let Some(base) = postgres("a_turn_of_reads_is_written_whole_in_its_finish") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    let counts = |url: &str| -> (i64, i64, i64, Option<String>) {
        crate::with_client(url, |client| async move {
            let row = client
                .query_one(
                    "SELECT (SELECT count(*) FROM clawsmith_events),
                            (SELECT count(*) FROM clawsmith_messages),
                            (SELECT next_sequence FROM clawsmith_sessions WHERE id = 's'),
                            (SELECT string_agg(turn_id || '=' || state || ':' ||
                                               (finished_at_ms IS NOT NULL)::text, ',')
                             FROM clawsmith_checkpoints)",
                    &[],
                )
                .await
                .unwrap();
            (row.get(0), row.get(1), row.get(2), row.get(3))
        })
    };
    refuse_marked_events(&url);
    defer_turn_of_reads(&store, "t1");
    for _ in 0..2 {
        let refused = store.finish_turn_reading("s", "t1", &|_| None, started("refuse-me"), 3);
        assert!(
            matches!(&refused, Err(StoreError::Backend { message, .. }) if message.contains("refused by the test")),
            "{refused:?}"
        );
        assert_eq!(counts(&url), (0, 0, 1, None), "nothing was written");
    }
    let (manifest, event) = store
        .finish_turn_reading("s", "t1", &|_| None, started("done"), 3)
        .unwrap();
    assert!(manifest.files.is_empty());
    assert_eq!(event.sequence, 3, "after the turn's and the read's start");
    assert_eq!(
        counts(&url),
        (3, 1, 4, Some("t1=finished:true".to_owned())),
        "the records once, the checkpoint finished, no refused event"
    );
    let events = store.events_page("s", 0, 10).unwrap();
    let kinds: Vec<(u64, String)> = events
        .iter()
        .map(|event| {
            (
                event.sequence,
                serde_json::to_string(&event.payload).unwrap(),
            )
        })
        .collect();
    assert!(
        kinds[0].1.contains("\"t1\"") && kinds[1].1.contains("t1-read"),
        "{kinds:?}"
    );
    assert!(kinds[2].1.contains("done"), "{kinds:?}");

    // The same turn begun again: refused whole, its records with it; the store goes on.
    defer_turn_of_reads(&store, "t1");
    let twice = store.finish_turn_reading("s", "t1", &|_| None, started("again"), 4);
    assert!(
        matches!(&twice, Err(StoreError::TurnExists { turn_id, .. }) if turn_id == "t1"),
        "{twice:?}"
    );
    assert_eq!(counts(&url), (3, 1, 4, Some("t1=finished:true".to_owned())));
    assert_eq!(
        store
            .append_event("s", started("after"), 5)
            .unwrap()
            .sequence,
        4
    );

    // A refused finish leaves its turn open: another kind of write takes the records next and
    // writes the turn open, and the turn's finish then closes it.
    defer_turn_of_reads(&store, "t2");
    let refused = store.finish_turn_reading("s", "t2", &|_| None, started("refuse-me"), 6);
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        store
            .append_event("s", started("between"), 7)
            .unwrap()
            .sequence,
        7,
        "after the turn's start (5) and its read's (6)"
    );
    let t2 = "SELECT state || ':' || (finished_at_ms IS NOT NULL)::text
              FROM clawsmith_checkpoints WHERE turn_id = 't2'";
    assert_eq!(crate::query_text(&url, t2), "open:false");
    let (_, done) = store
        .finish_turn_reading("s", "t2", &|_| None, started("t2 done"), 8)
        .unwrap();
    assert_eq!(done.sequence, 8);
    assert_eq!(crate::query_text(&url, t2), "finished:true");
}

/// A holder that knows its session's next numbers (its last write left them) sends a turn of
/// reads with its lease check on those numbers. When they moved behind its back the server
/// refuses that check before the rows run, and the turn is written on the server's numbers;
/// when the lease went to another holder, nothing is written.
#[test]
fn a_turn_of_reads_on_numbers_the_holder_knows_follows_the_server_and_the_lease() {
    let Some(base) = postgres("a_turn_of_reads_on_numbers_the_holder_knows") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    let turn_of_reads = |turn: &str| {
        defer_turn_of_reads(&store, turn);
        store
            .finish_turn_reading("s", turn, &|_| None, started(&format!("{turn}-done")), 3)
            .map(|(_, event)| event.sequence)
    };
    let written = |url: &str| -> (Vec<i64>, Vec<i64>, (i64, i64)) {
        crate::with_client(url, |client| async move {
            let numbers = |rows: Vec<tokio_postgres::Row>| -> Vec<i64> {
                rows.iter().map(|row| row.get(0)).collect()
            };
            let events = client
                .query(
                    "SELECT sequence FROM clawsmith_events ORDER BY sequence",
                    &[],
                )
                .await
                .unwrap();
            let messages = client
                .query("SELECT idx FROM clawsmith_messages ORDER BY idx", &[])
                .await
                .unwrap();
            let next = client
                .query_one(
                    "SELECT next_index, next_sequence FROM clawsmith_sessions",
                    &[],
                )
                .await
                .unwrap();
            (
                numbers(events),
                numbers(messages),
                (next.get(0), next.get(1)),
            )
        })
    };
    assert_eq!(turn_of_reads("t1").unwrap(), 3);
    assert_eq!(turn_of_reads("t2").unwrap(), 6);
    assert_eq!(written(&url), ((1..=6).collect(), vec![0, 1], (2, 7)));

    // The counters moved behind the holder's back: the turn takes the server's numbers.
    run_sql(
        &url,
        &["UPDATE clawsmith_sessions SET next_index = next_index + 2,
                                         next_sequence = next_sequence + 5"],
    );
    assert_eq!(turn_of_reads("t3").unwrap(), 14);
    assert_eq!(turn_of_reads("t4").unwrap(), 17);
    let mut sequences: Vec<i64> = (1..=6).collect();
    sequences.extend(12..=17);
    assert_eq!(
        written(&url),
        (sequences.clone(), vec![0, 1, 4, 5], (6, 18))
    );

    // The lease went to another holder: the turn is refused and writes nothing.
    run_sql(
        &url,
        &["UPDATE clawsmith_leases SET epoch = epoch + 1, holder = 'another-host:1:1'"],
    );
    let lost = turn_of_reads("t5");
    assert!(
        matches!(&lost, Err(StoreError::LeaseLost { session_id, .. }) if session_id == "s"),
        "{lost:?}"
    );
    assert_eq!(written(&url), (sequences, vec![0, 1, 4, 5], (6, 18)));
}

/// A turn finished while another thread's write carries its start (taken from the records
/// waiting, not yet committed: the server holds that write for half a second) waits for that
/// write to land, then finishes the turn it wrote.
#[test]
fn a_turn_finished_while_another_write_carries_its_start_waits_for_it() {
    use clawsmith_store::DeferredRecords;

    let Some(base) = postgres("a_turn_finished_while_another_write_carries_its_start") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    run_sql(
        &url,
        &[
            "CREATE FUNCTION slow_checkpoint() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.turn_id = 'slow' THEN
                     PERFORM pg_sleep(0.5);
                 END IF;
                 RETURN NEW;
             END $$",
            "CREATE TRIGGER slow_checkpoint BEFORE INSERT ON clawsmith_checkpoints
             FOR EACH ROW EXECUTE FUNCTION slow_checkpoint()",
        ],
    );
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    store
        .defer_turn_start("s", "slow", vec![started("slow")], 1)
        .unwrap();
    let (appended, finished) = std::thread::scope(|scope| {
        let carrier = scope.spawn(|| store.append_event("s", started("carrier"), 2));
        std::thread::sleep(Duration::from_millis(150));
        let finished = store.finish_turn_reading("s", "slow", &|_| None, started("done"), 3);
        (carrier.join().unwrap(), finished)
    });
    assert_eq!(appended.unwrap().sequence, 2, "after the turn's start");
    let (_, done) = finished.unwrap();
    assert_eq!(done.sequence, 3);
    assert_eq!(
        crate::query_text(
            &url,
            "SELECT state || ':' || (finished_at_ms IS NOT NULL)::text FROM clawsmith_checkpoints"
        ),
        "finished:true"
    );
}

/// Threads of one holder racing on its session: appends and turns of reads at once, each
/// write on the numbers the store last saw (which another thread may just have taken). Every
/// write goes through, and the session's numbers are gap-free and each given once.
#[test]
fn writers_of_one_holder_racing_on_known_numbers_give_each_number_once() {
    use clawsmith_store::DeferredRecords;

    let Some(base) = postgres("writers_of_one_holder_racing_on_known_numbers") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    let (threads, each): (usize, usize) = (4, 40);
    let mut given: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let store = Arc::clone(&store);
                scope.spawn(move || {
                    let mut given = Vec::new();
                    for n in 0..each {
                        let name = format!("{thread}-{n}");
                        if n % 2 == 0 {
                            // A turn of reads deferred and finished by this thread; its records
                            // may be taken by another thread's write in between.
                            store
                                .defer_turn_start("s", &name, vec![started(&name)], 1)
                                .unwrap();
                            let (_, done) = store
                                .finish_turn_reading("s", &name, &|_| None, started("done"), 2)
                                .unwrap();
                            given.push(done.sequence);
                        } else {
                            given
                                .push(store.append_event("s", started(&name), 1).unwrap().sequence);
                        }
                    }
                    given
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    given.sort_unstable();
    let returned = given.len();
    given.dedup();
    assert_eq!(given.len(), returned, "a number given twice");
    let stored: Vec<i64> = crate::with_client(&url, |client| async move {
        client
            .query(
                "SELECT sequence FROM clawsmith_events ORDER BY sequence",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    });
    // Each turn of reads wrote its start and its end.
    let turns = threads * each.div_ceil(2);
    let expected: Vec<i64> = (1..=i64::try_from(returned + turns).unwrap()).collect();
    assert_eq!(stored, expected, "gap-free, each once");
    assert_eq!(
        crate::query_text(&url, "SELECT next_sequence::text FROM clawsmith_sessions"),
        (returned + turns + 1).to_string()
    );
}

/// An append is written with the records waiting before it, at once or not at all: one the
/// server refuses leaves no trace (it does not wait to be written by a later write) while the
/// records before it wait and go with the next append, numbered on without a gap.
#[test]
fn a_refused_append_leaves_no_trace_and_the_records_before_it_wait() {
    use clawsmith_store::DeferredRecords;

    let Some(base) = postgres("a_refused_append_leaves_no_trace") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    refuse_marked_events(&url);
    assert_eq!(
        store
            .append_event("s", started("first"), 1)
            .unwrap()
            .sequence,
        1
    );
    let read = store
        .defer_call_start(
            "s",
            Some(&ModelMessage::text(Role::Assistant, "reading")),
            started("read"),
            2,
        )
        .unwrap();
    for _ in 0..2 {
        let refused = store.append_event("s", started("refuse-me"), 3);
        assert!(
            matches!(&refused, Err(StoreError::Backend { message, .. }) if message.contains("refused by the test")),
            "{refused:?}"
        );
        assert_eq!(
            crate::query_text(
                &url,
                "SELECT (SELECT count(*) FROM clawsmith_events) || ',' ||
                        (SELECT count(*) FROM clawsmith_messages) || ',' ||
                        (SELECT next_sequence FROM clawsmith_sessions)"
            ),
            "1,0,2",
            "nothing of the refused append's transaction"
        );
    }
    assert_eq!(
        store
            .append_event("s", started("next"), 4)
            .unwrap()
            .sequence,
        3
    );
    assert_eq!(
        read.stored().map(|event| event.sequence),
        Some(2),
        "the waiting read went first"
    );
    let kinds: Vec<String> = store
        .events_page("s", 0, 10)
        .unwrap()
        .iter()
        .map(|event| serde_json::to_string(&event.payload).unwrap())
        .collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(
        kinds[0].contains("first") && kinds[1].contains("read") && kinds[2].contains("next"),
        "{kinds:?}"
    );
    assert_eq!(store.messages("s").unwrap().len(), 1);
}

/// The server's lease check on numbers a writer knows (`clawsmith_fence_known_numbers`)
/// refuses, changing nothing, every call but the one naming the lease's epoch and holder and
/// the session's next numbers: CS001 for the lease, CS002 for the numbers.
#[test]
fn the_servers_check_of_known_numbers_refuses_all_but_the_holder_on_the_next_numbers() {
    let Some(base) = postgres("the_servers_check_of_known_numbers") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let store = open();
    store.create_session("s", "/ws").unwrap();
    store.create_session("unleased", "/ws").unwrap();
    let _lease = store.lease_session("s").unwrap();
    let holder = store.holder().to_owned();
    let epoch: i64 = crate::query_text(&url, "SELECT epoch::text FROM clawsmith_leases")
        .parse()
        .unwrap();
    let other = format!("{holder}x");
    // Session, holder, epoch, next index, next sequence, the refusal's code.
    type Case<'a> = (&'a str, &'a str, i64, i64, i64, Option<&'a str>);
    let cases: [Case<'_>; 7] = [
        ("s", &holder, epoch + 1, 0, 1, Some("CS001")),
        ("s", &holder, epoch - 1, 0, 1, Some("CS001")),
        ("s", &other, epoch, 0, 1, Some("CS001")),
        ("unleased", &holder, epoch, 0, 1, Some("CS001")),
        ("s", &holder, epoch, 1, 1, Some("CS002")),
        ("s", &holder, epoch, 0, 2, Some("CS002")),
        ("s", &holder, epoch, 0, 1, None),
    ];
    for (session, who, at, index, sequence, refused) in cases {
        let case = format!("{session} {who} {at} {index} {sequence}");
        let (session, who) = (session.to_owned(), who.to_owned());
        let (answer, next) = crate::with_client(&url, |client| async move {
            let answer = client
                .query_one(
                    "SELECT clawsmith_fence_known_numbers($1, $2, $3, $4, $5, 2, 3)",
                    &[&session, &who, &at, &index, &sequence],
                )
                .await
                .map(|row| row.get::<_, bool>(0))
                .map_err(|error| error.code().map(|code| code.code().to_owned()));
            let next = client
                .query_one(
                    "SELECT next_index, next_sequence FROM clawsmith_sessions WHERE id = 's'",
                    &[],
                )
                .await
                .unwrap();
            (answer, (next.get::<_, i64>(0), next.get::<_, i64>(1)))
        });
        match refused {
            Some(code) => {
                assert_eq!(answer, Err(Some(code.to_owned())), "{case}");
                assert_eq!(next, (0, 1), "a refusal takes no number: {case}");
            }
            None => {
                assert_eq!(answer, Ok(false), "no writer waits");
                assert_eq!(next, (2, 4), "the numbers taken");
            }
        }
    }
}

/// A holder learns that a writer waits for its lease from its writes' lease checks: right after
/// a write, `is_wanted` answers what that check read without asking the server again; once the
/// answer is older than a quarter second, it asks.
#[test]
fn a_writes_lease_check_tells_the_holder_a_writer_waits() {
    let Some(base) = postgres("a_writes_lease_check_tells_the_holder_a_writer_waits") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let keeper = open();
    keeper.create_session("s", "/ws").unwrap();
    let lease = keeper.lease_session("s").unwrap();
    assert!(!lease.is_wanted());
    let say = "UPDATE clawsmith_leases
               SET wanted_by = 'another', wanted_until = now() + interval '10 seconds'";
    let unsay = "UPDATE clawsmith_leases SET wanted_by = NULL, wanted_until = NULL";
    let mut checked = false;
    for n in 0..20 {
        run_sql(&url, &[say]);
        let written = std::time::Instant::now();
        keeper
            .append_event("s", started(&format!("k{n}")), 1)
            .unwrap();
        run_sql(&url, &[unsay]);
        let wanted = lease.is_wanted();
        // Only an answer given within the quarter second proves it came from the write.
        if written.elapsed() < Duration::from_millis(200) {
            assert!(wanted, "the write's lease check saw the waiter");
            checked = true;
            break;
        }
    }
    assert!(checked, "no write and check within 200 ms in 20 tries");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!lease.is_wanted(), "an old answer is asked again");
    run_sql(&url, &[say]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(lease.is_wanted(), "and the server's answer taken");
}

/// The connection string's own `options` reach the server alongside the store's (which asks
/// for generic plans): a store opened with an application name shows under it.
#[test]
fn a_connection_strings_options_reach_the_server() {
    let Some(base) = postgres("a_connection_strings_options_reach_the_server") else {
        return;
    };
    let (url, _) = migrated(&base, PgOptions::default());
    let named = format!("{url} options='-c application_name=clawsmith-options-test'");
    let store = PgStore::connect(&named, PgOptions::default()).unwrap();
    store.create_session("s", "/ws").unwrap();
    let seen: i64 = crate::with_client(&url, |client| async move {
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'clawsmith-options-test'",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    });
    assert!(seen >= 1, "{seen}");
}

/// Expires every lease of the session, as if its holder stopped renewing (killed, or paused
/// longer than a lease lasts).
fn expire(url: &str, session: &str) {
    run_sql(
        url,
        &[&format!(
            "UPDATE clawsmith_leases SET expires_at = now() - interval '1 second' \
             WHERE session_id = '{session}'"
        )],
    );
}

#[test]
fn a_writer_whose_lease_was_taken_over_writes_nothing_more() {
    let Some(base) = postgres("a_writer_whose_lease_was_taken_over_writes_nothing_more") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let (host_a, host_b, host_c) = (open(), open(), open());
    host_a.create_session("s", "/ws").unwrap();
    let lease_a = host_a.lease_session("s").unwrap();
    assert!(lease_a.is_fresh());
    let epoch_a = lease_a.epoch().unwrap();
    host_a.append_event("s", started("a1"), 1).unwrap();
    host_a
        .begin_turn("s", "t-open", TurnOpening::default())
        .unwrap();
    // While A holds it: B cannot take it, and C (no lease) cannot write.
    match host_b.lease_session("s") {
        Err(StoreError::SessionHeldElsewhere { holder, .. }) => {
            assert_eq!(holder, host_a.holder());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        host_c.append_event("s", started("c1"), 1),
        Err(StoreError::SessionHeldElsewhere { .. })
    ));
    // A pauses past its lease; B takes over.
    expire(&url, "s");
    let lease_b = host_b.lease_session("s").unwrap();
    assert!(lease_b.is_fresh());
    assert_eq!(lease_b.epoch().unwrap(), epoch_a + 1);
    // Every kind of write of A's is refused now, and changes nothing.
    let before = host_b.last_event_sequence("s").unwrap();
    let refusals = [
        host_a.append_event("s", started("a2"), 2).map(drop),
        host_a
            .append_message("s", &ModelMessage::text(Role::User, "stale"))
            .map(drop),
        host_a
            .start_call("s", None, None, started("a3"), 3)
            .map(drop),
        host_a
            .journal_close("s", "c", ToolStatus::Success)
            .map(drop),
        host_a
            .begin_turn("s", "t-stale", TurnOpening::default())
            .map(drop),
        host_a.record_before("s", "t-open", "a.txt", None),
        host_a.record_after("s", "t-open", "a.txt", None),
        host_a
            .finish_turn_reading("s", "t-open", &|_| None, started("a4"), 4)
            .map(drop),
        host_a.set_todos("s", Vec::new()),
        host_a.add_pending_approval(
            "s",
            &PendingApproval {
                approval_id: "p".to_owned(),
                turn_id: "t-open".to_owned(),
                call_id: "c".to_owned(),
                request: serde_json::json!({}),
            },
        ),
        host_a.resolve_pending_approval("s", "p").map(drop),
        host_a.put_artifact("s", b"stale").map(drop),
        host_a.attribute_change("s", "t-open", "a.txt", "command", "c"),
        host_a.begin_command_capture("s", "t-open", "c", &clawsmith_checkpoint::sha256(b"m")),
        host_a.end_command_capture("s", "t-open", "c"),
        host_a.record_uncaptured("s", "t-open", "c", &[("a".to_owned(), "why".to_owned())]),
        host_a.record_created_directories("s", "t-open", "c", &["d".to_owned()]),
    ];
    for refused in refusals {
        assert!(
            matches!(refused, Err(StoreError::LeaseLost { epoch, .. }) if epoch == epoch_a),
            "{refused:?}"
        );
    }
    assert_eq!(host_b.last_event_sequence("s").unwrap(), before);
    assert!(host_b.messages_page("s", 0, 10).unwrap().is_empty());
    let checkpoints = host_b.checkpoints("s").unwrap();
    assert_eq!(
        checkpoints.len(),
        1,
        "only the turn A opened while it held the lease"
    );
    assert!(host_b.change_list("s", "t-open").unwrap().is_empty());
    host_b.append_event("s", started("b1"), 4).unwrap();
    // A's own renewal learns it lost the lease; its next lease waits for B like anyone's.
    drop(lease_a);
    assert!(matches!(
        host_a.lease_session("s"),
        Err(StoreError::SessionHeldElsewhere { .. })
    ));
    // Rows carry the epoch they were written under: none of A's after the takeover.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let epochs: Vec<(i64, i64)> = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .query(
                "SELECT sequence, epoch FROM clawsmith_events WHERE session_id = 's' ORDER BY sequence",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    });
    let a = i64::try_from(epoch_a).unwrap();
    assert_eq!(epochs, [(1, a), (2, a + 1)]);
    // Once B is done (its release lands a moment later), C may write without a lease again.
    drop(lease_b);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match host_c.append_event("s", started("c2"), 5) {
            Ok(_) => break,
            Err(StoreError::SessionHeldElsewhere { .. })
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => panic!("{error}"),
        }
    }
}

#[test]
fn a_lease_is_renewed_while_held_and_a_waiting_taker_gets_it_when_released() {
    let Some(base) = postgres("a_lease_is_renewed_while_held") else {
        return;
    };
    let (url, _) = migrated(&base, PgOptions::default());
    let short = PgOptions {
        lease_ttl: Duration::from_millis(600),
        ..PgOptions::default()
    };
    let holder = PgStore::connect(&url, short.clone()).unwrap();
    holder.create_session("s", "/ws").unwrap();
    let lease = holder.lease_session("s").unwrap();
    // Three lifetimes later it is still held: renewal kept it.
    std::thread::sleep(Duration::from_millis(1_800));
    let other = PgStore::connect(&url, short.clone()).unwrap();
    assert!(matches!(
        other.lease_session("s"),
        Err(StoreError::SessionHeldElsewhere { .. })
    ));
    holder.append_event("s", started("t1"), 1).unwrap();
    let waiting = PgStore::connect(
        &url,
        PgOptions {
            wait_for_lease: true,
            ..short
        },
    )
    .unwrap();
    let waiter = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let lease = waiting.lease_session("s").unwrap();
        (lease.epoch(), lease.is_fresh(), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(400));
    let epoch = lease.epoch().unwrap();
    drop(lease);
    let (taken, fresh, waited) = waiter.join().unwrap();
    assert_eq!(taken, Some(epoch + 1));
    assert!(fresh);
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
}

#[test]
fn a_follower_on_another_host_hears_of_new_events() {
    let Some(base) = postgres("a_follower_on_another_host_hears_of_new_events") else {
        return;
    };
    let (_, open) = migrated(&base, PgOptions::default());
    let (writer, reader) = (open(), open());
    writer.create_session("followed", "/ws").unwrap();
    let follower = reader.follow().unwrap();
    assert!(
        follower
            .wait(Duration::from_millis(100))
            .unwrap()
            .is_empty()
    );
    for n in 1..=3 {
        writer
            .append_event("followed", started(&format!("t{n}")), n)
            .unwrap();
    }
    let mut heard = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while heard.last().map(|(_, sequence)| *sequence) != Some(3) {
        assert!(std::time::Instant::now() < deadline, "heard only {heard:?}");
        heard.extend(follower.wait(Duration::from_millis(500)).unwrap());
    }
    assert!(
        heard.iter().all(|(session, _)| session == "followed"),
        "{heard:?}"
    );
    let sequences: Vec<u64> = heard.iter().map(|(_, sequence)| *sequence).collect();
    assert_eq!(sequences, [1, 2, 3]);
    // What it heard, it reads.
    assert_eq!(reader.events_page("followed", 0, 10).unwrap().len(), 3);
}

#[test]
fn the_taker_of_a_dead_writers_session_finds_its_open_calls() {
    let Some(base) = postgres("the_taker_of_a_dead_writers_session_finds_its_open_calls") else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let dead = open();
    dead.create_session("s", "/ws").unwrap();
    let lease = dead.lease_session("s").unwrap();
    let journal = JournalStart {
        session_id: "s".to_owned(),
        turn_id: "t1".to_owned(),
        call_id: "c1".to_owned(),
        tool_name: "write_file".to_owned(),
        args_json: "{}".to_owned(),
    };
    dead.start_call("s", None, Some(&journal), started("t1"), 1)
        .unwrap();
    // The writer dies without releasing: its lease runs out.
    std::mem::forget(lease);
    expire(&url, "s");
    let taker = open();
    let lease = taker.lease_session("s").unwrap();
    assert!(lease.is_fresh());
    let open_calls = taker.unfinished_calls("s").unwrap();
    assert_eq!(open_calls.len(), 1);
    assert_eq!(open_calls[0].call_id, "c1");
    assert!(taker.journal_close("s", "c1", ToolStatus::Unknown).unwrap());
    assert!(taker.unfinished_calls("s").unwrap().is_empty());
    // The dead writer's handle, were it to wake, is fenced off.
    assert!(matches!(
        dead.journal_close("s", "c1", ToolStatus::Success),
        Err(StoreError::LeaseLost { .. })
    ));
}

/// A host keeping a session's lease between turns learns that another host waits for it, yields
/// it, and takes it back, fresh, once that host is done; a lease of another store is refused.
#[test]
fn a_kept_lease_another_host_wants_is_yielded_and_taken_back() {
    let Some(base) = postgres("a_kept_lease_another_host_wants_is_yielded_and_taken_back") else {
        return;
    };
    let waiting = PgOptions {
        wait_for_lease: true,
        ..PgOptions::default()
    };
    let (_url, open) = migrated(&base, waiting);
    let (keeper, other) = (open(), open());
    keeper.create_session("s", "/ws").unwrap();
    let lease = keeper.lease_session("s").unwrap();
    let epoch = lease.epoch().unwrap();
    assert!(!lease.is_wanted(), "nobody waits yet");
    // (The other store outlives its thread: its lease's release is sent from its runtime.)
    let taking = Arc::clone(&other);
    let taker = std::thread::spawn(move || {
        let lease = taking.lease_session("s").unwrap();
        let appended = taking.append_event("s", started("other"), 1).unwrap();
        (lease.is_fresh(), lease.epoch().unwrap(), appended.sequence)
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !lease.is_wanted() {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never said so"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let again = keeper.yield_lease(lease).unwrap();
    assert_eq!(
        taker.join().unwrap(),
        (true, epoch + 1, 1),
        "the waiter had it in between"
    );
    assert!(
        again.is_fresh(),
        "taken back after another writer: look for what it changed"
    );
    assert_eq!(again.epoch().unwrap(), epoch + 2);
    assert!(!again.is_wanted(), "the waiter's word went with its turn");
    assert_eq!(keeper.last_event_sequence("s").unwrap(), 1);
    keeper.append_event("s", started("keeper"), 2).unwrap();
    drop(again);
    drop(other);

    // Leases go back only to the store that made them.
    let sqlite = clawsmith_checkpoint::Store::open_in_memory().unwrap();
    SessionStore::create_session(&sqlite, "x", "/ws").unwrap();
    let foreign = SessionStore::lease_session(&sqlite, "x").unwrap();
    assert!(matches!(
        keeper.yield_lease(foreign),
        Err(StoreError::Backend { .. })
    ));
    let ours = keeper.lease_session("s").unwrap();
    assert!(matches!(
        SessionStore::yield_lease(&sqlite, ours),
        Err(StoreError::Lease { .. })
    ));
}

/// Deferred records wait in the store that deferred them: another host sees none of them until
/// that store's next write, which writes them first in the same transaction; a read of that
/// store writes them first too. Records of a session taken over meanwhile are refused with the
/// write that carries them and dropped, so that the store's writes to its other sessions go on.
#[test]
fn deferred_records_wait_for_the_next_write_and_a_lost_sessions_do_not_stop_the_store() {
    use clawsmith_store::DeferredRecords;

    let Some(base) = postgres(
        "deferred_records_wait_for_the_next_write_and_a_lost_sessions_do_not_stop_the_store",
    ) else {
        return;
    };
    let (url, open) = migrated(&base, PgOptions::default());
    let (host_a, host_b) = (open(), open());
    host_a.create_session("d", "/ws").unwrap();
    host_a.create_session("other", "/ws").unwrap();
    let lease = host_a.lease_session("d").unwrap();
    let opening = host_a
        .defer_turn_start("d", "t1", vec![started("t1")], 1)
        .unwrap();
    let start = host_a
        .defer_call_start("d", None, started("t1-read"), 2)
        .unwrap();
    assert_eq!(host_b.last_event_sequence("d").unwrap(), 0, "nothing yet");
    assert!(opening[0].stored().is_none() && start.stored().is_none());
    // A read of the deferring store writes them first.
    assert_eq!(host_a.last_event_sequence("d").unwrap(), 2);
    assert_eq!(
        (
            opening[0].stored().map(|event| event.sequence),
            start.stored().map(|event| event.sequence)
        ),
        (Some(1), Some(2))
    );
    // Deferred again, then the session is taken over: the next write to it is refused and the
    // records go with it; a write to another session is not stopped by them.
    host_a
        .defer_message("d", &ModelMessage::text(Role::User, "stale"))
        .unwrap();
    let late = host_a
        .defer_call_start("d", None, started("t1-late"), 3)
        .unwrap();
    expire(&url, "d");
    let taken = host_b.lease_session("d").unwrap();
    assert!(matches!(
        host_a.append_event("d", started("a"), 4),
        Err(StoreError::LeaseLost { .. })
    ));
    assert!(late.stored().is_none());
    let other = host_a.append_event("other", started("o"), 5).unwrap();
    assert_eq!(other.sequence, 1);
    assert_eq!(
        host_a.last_event_sequence("d").unwrap(),
        2,
        "nothing of A's landed"
    );
    assert!(host_b.messages("d").unwrap().is_empty());
    drop((lease, taken));
}
