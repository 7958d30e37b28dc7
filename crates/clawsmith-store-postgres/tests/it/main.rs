//! The fleet store against a real PostgreSQL server (and, for large blobs, a real
//! S3-compatible server), both started outside the tests: `CLAWSMITH_TEST_POSTGRES` holds the
//! server's connection string without a database (`host=… port=… user=… password=…`; each
//! test makes a database of its own), `CLAWSMITH_TEST_S3` an S3 endpoint on 127.0.0.1
//! (`http://127.0.0.1:PORT`). `.ci/run` starts both (Debian's `pg_virtualenv`, `moto`);
//! without them the tests say so and pass, unless `CLAWSMITH_REQUIRE_SERVICES` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fleet;
mod objects;
mod retention;
mod soak;
mod tls;
mod undo;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use clawsmith_store_postgres::{PgOptions, PgStore};

/// The server's base connection string, or `None` after saying why the test does not run.
pub fn postgres(test: &str) -> Option<String> {
    match std::env::var("CLAWSMITH_TEST_POSTGRES") {
        Ok(base) if !base.trim().is_empty() => Some(base),
        _ => {
            assert!(
                std::env::var_os("CLAWSMITH_REQUIRE_SERVICES").is_none(),
                "CLAWSMITH_REQUIRE_SERVICES is set and CLAWSMITH_TEST_POSTGRES is not"
            );
            eprintln!("SKIP {test}: no PostgreSQL server (CLAWSMITH_TEST_POSTGRES is unset)");
            None
        }
    }
}

/// A new, empty database on the server: its connection string.
pub fn fresh_database(base: &str) -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "clawsmith_test_{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::SeqCst)
    );
    admin(
        base,
        &[
            &format!("DROP DATABASE IF EXISTS {name}"),
            &format!("CREATE DATABASE {name}"),
        ],
    );
    format!("{base} dbname={name}")
}

/// Runs `statements` on the server's `postgres` database.
pub fn admin(base: &str, statements: &[&str]) {
    run_sql(&format!("{base} dbname=postgres"), statements);
}

/// Runs `statements` on the database of `url`, one by one.
pub fn run_sql(url: &str, statements: &[&str]) {
    let statements: Vec<String> = statements.iter().map(|s| (*s).to_owned()).collect();
    with_client(url, |client| async move {
        for statement in statements {
            client.batch_execute(&statement).await.unwrap();
        }
    });
}

/// Runs `work` with a plain connection of its own to the database of `url`, on a runtime of
/// its own (the tests are synchronous, as the store's callers are); the connection closes
/// when `work` is done with it.
pub fn with_client<T, F>(url: &str, work: impl FnOnce(tokio_postgres::Client) -> F) -> T
where
    F: std::future::Future<Output = T>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (client, connection) = runtime
        .block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))
        .unwrap();
    runtime.spawn(connection);
    runtime.block_on(work(client))
}

/// The first column of the first row of `query` on the database of `url`, as text.
pub fn query_text(url: &str, query: &str) -> String {
    let query = query.to_owned();
    with_client(url, |client| async move {
        client
            .query_one(&query, &[])
            .await
            .unwrap()
            .get::<_, String>(0)
    })
}

/// A migrated database and a way to open handles on it.
pub fn migrated(base: &str, options: PgOptions) -> (String, impl Fn() -> Arc<PgStore> + Sync) {
    let url = fresh_database(base);
    PgStore::unchecked(&url, PgOptions::default())
        .unwrap()
        .migrate()
        .unwrap();
    let open_url = url.clone();
    (url, move || {
        Arc::new(PgStore::connect(&open_url, options.clone()).unwrap())
    })
}
