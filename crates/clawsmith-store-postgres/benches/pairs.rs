//! Pairs for `cargo xtask bench`, against the PostgreSQL server `CLAWSMITH_TEST_POSTGRES`
//! names (as the tests; `pg_virtualenv .ci/with-services cargo xtask bench` starts one): without
//! it, this prints why and no row.
//! - `append_event` per second on one session: the PostgreSQL store against the SQLite store
//!   (default durability: SQLite commits without fsync, PostgreSQL with `synchronous_commit`);
//! - `append_event` per second, eight sessions written by eight threads against one by one
//!   thread, on PostgreSQL: sessions do not wait for each other there (on SQLite every write
//!   takes the one file's lock).
//!
//!
//! Each session is leased by the bench, as the core leases the session it writes: on
//! PostgreSQL the holder's appends take the one round trip of a write on known numbers.
//!
//! Prints one `CLAWSMITH-BENCH {json}` line per pair; `--quick` runs fewer rounds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

use clawsmith_protocol::{EventPayload, TurnStarted};
use clawsmith_store::SessionStore;
use clawsmith_store_postgres::{PgOptions, PgStore};
use serde_json::json;

fn started(n: usize) -> EventPayload {
    EventPayload::TurnStarted(TurnStarted {
        turn_id: format!("t{n}"),
    })
}

/// Appends per second: `threads` threads each appending `each` events to its own session.
fn rate(store: &Arc<dyn SessionStore>, sessions: &[String], each: usize) -> f64 {
    let started_at = Instant::now();
    std::thread::scope(|scope| {
        for session in sessions {
            let store = Arc::clone(store);
            scope.spawn(move || {
                for n in 0..each {
                    store.append_event(session, started(n), 1).unwrap();
                }
            });
        }
    });
    (sessions.len() * each) as f64 / started_at.elapsed().as_secs_f64()
}

fn database(base: &str) -> String {
    let name = format!("clawsmith_bench_{}", std::process::id());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(&format!("{base} dbname=postgres"), tokio_postgres::NoTls)
                .await
                .unwrap();
        tokio::spawn(connection);
        // One statement each: several in one message run as one transaction, which these
        // cannot.
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client.batch_execute(&statement).await.unwrap();
        }
    });
    format!("{base} dbname={name}")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let Ok(base) = std::env::var("CLAWSMITH_TEST_POSTGRES") else {
        eprintln!(
            "no PostgreSQL pairs: CLAWSMITH_TEST_POSTGRES is unset (run the bench inside \
             `pg_virtualenv .ci/with-services`)"
        );
        return;
    };
    let (rounds, each) = if quick { (3, 100) } else { (7, 300) };
    let url = database(&base);
    PgStore::unchecked(&url, PgOptions::default())
        .unwrap()
        .migrate()
        .unwrap();
    let postgres: Arc<dyn SessionStore> =
        Arc::new(PgStore::connect(&url, PgOptions::default()).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn SessionStore> =
        Arc::new(clawsmith_checkpoint::Store::open(dir.path().join("bench.db")).unwrap());
    let sessions: Vec<String> = (0..8).map(|n| format!("bench-{n}")).collect();
    let mut leases = Vec::new();
    for store in [&postgres, &sqlite] {
        for session in &sessions {
            store.create_session(session, "/ws").unwrap();
            leases.push(store.lease_session(session).unwrap());
        }
    }
    let one = &sessions[..1];
    let (mut pg_one, mut lite_one, mut pg_eight) = (Vec::new(), Vec::new(), Vec::new());
    rate(&postgres, one, 20);
    rate(&sqlite, one, 20);
    for _ in 0..rounds {
        pg_one.push(rate(&postgres, one, each));
        lite_one.push(rate(&sqlite, one, each));
        pg_eight.push(rate(&postgres, &sessions, each));
    }
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": "append_event/s on one session: PostgreSQL vs SQLite",
            "ours": "PgStore",
            "theirs": "SQLite Store",
            "oursSamples": pg_one,
            "theirsSamples": lite_one,
            "unit": "per-second",
            "target": {"perSecondAtLeast": 500.0},
            "note": format!("{each} appends per sample, one thread holding the session's lease; PostgreSQL 15 on localhost over TCP, every commit synchronous; SQLite at its default durability (no fsync per commit)"),
        })
    );
    println!(
        "CLAWSMITH-BENCH {}",
        json!({
            "name": "append_event/s on PostgreSQL: 8 sessions by 8 threads vs 1 by 1",
            "ours": "8 sessions",
            "theirs": "1 session",
            "oursSamples": pg_eight,
            "theirsSamples": pg_one,
            "unit": "per-second",
            "target": {"ratioAtLeast": 3.0},
            "note": format!("{each} appends per thread and sample, each thread's session leased; each session's row orders its own writers only"),
        })
    );
}
