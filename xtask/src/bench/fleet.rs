//! `read_file` through `clawsmith mcp` with its session on the fleet store (PostgreSQL, the server
//! `CLAWSMITH_TEST_POSTGRES` names, as the tests) against the same calls on the embedded SQLite
//! file; and eight MCP servers, each writing its own session, at once against one. Without a
//! server this says so and gives no row (`pg_virtualenv .ci/with-services cargo xtask bench`
//! starts one).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::{McpClient, Options, Row, Target, Unit, alternate, tempdir};

/// A new database on the server `base` names, migrated by `clawsmith store migrate`; its
/// connection string.
fn fleet_database(bin: &Path, base: &str, config: &Path) -> Result<String> {
    let name = format!("clawsmith_bench_mcp_{}", std::process::id());
    for statement in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        let made = Command::new("psql")
            .args([
                "-q",
                "-d",
                &format!("{base} dbname=postgres"),
                "-c",
                &statement,
            ])
            .output()
            .context("running psql")?;
        if !made.status.success() {
            bail!("{statement}: {}", String::from_utf8_lossy(&made.stderr));
        }
    }
    let url = format!("{base} dbname={name}");
    let state = tempdir("fleet-migrate")?;
    let migrated = Command::new(bin)
        .arg("--state-dir")
        .arg(&state)
        .args(["store", "migrate", "--config"])
        .arg(config)
        .env("CLAWSMITH_DATABASE_URL", &url)
        .output()?;
    if !migrated.status.success() {
        bail!(
            "clawsmith store migrate: {}",
            String::from_utf8_lossy(&migrated.stderr)
        );
    }
    Ok(url)
}

/// `clawsmith mcp` on `workspace`, its session `session`, on the fleet store when `fleet` names
/// its configuration and connection string.
fn server(
    bin: &Path,
    workspace: &Path,
    session: &str,
    fleet: Option<(&Path, &str)>,
) -> Result<McpClient> {
    let state = tempdir("fleet-mcp-state")?;
    let mut command = Command::new(bin);
    command
        .arg("--state-dir")
        .arg(&state)
        .args(["mcp", "--session", session, "--workspace"])
        .arg(workspace);
    if let Some((config, url)) = fleet {
        command
            .arg("--config")
            .arg(config)
            .env("CLAWSMITH_DATABASE_URL", url);
    }
    McpClient::spawn(command)
}

fn read(client: &mut McpClient, calls: usize) -> Result<()> {
    for _ in 0..calls {
        client.request(
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "ten-kb.txt"}}),
        )?;
    }
    Ok(())
}

pub(super) fn fleet_rows(bin: &Path, data: &Path, options: &Options) -> Result<Vec<Row>> {
    let Ok(base) = std::env::var("CLAWSMITH_TEST_POSTGRES") else {
        println!(
            "    no fleet rows: CLAWSMITH_TEST_POSTGRES is unset (run the bench inside \
             `pg_virtualenv .ci/with-services`)"
        );
        return Ok(Vec::new());
    };
    let workspace = data.join("fleet-read");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(
        workspace.join("ten-kb.txt"),
        "0123456789abcdef\n".repeat(10 * 1024 / 17),
    )?;
    let config = data.join("fleet.toml");
    std::fs::write(&config, "[store]\nkind = \"postgres\"\n")?;
    let url = fleet_database(bin, &base, &config)?;
    let fleet = Some((config.as_path(), url.as_str()));
    let calls = if options.quick { 100 } else { 1000 };

    let mut on_postgres = server(bin, &workspace, "bench-fleet", fleet)?;
    let mut on_sqlite = server(bin, &workspace, "bench-local", None)?;
    let (ours, theirs) = alternate(
        options.rounds(),
        || {
            let started = Instant::now();
            read(&mut on_postgres, calls)?;
            Ok(started.elapsed().as_secs_f64())
        },
        || {
            let started = Instant::now();
            read(&mut on_sqlite, calls)?;
            Ok(started.elapsed().as_secs_f64())
        },
    )?;
    drop((on_postgres, on_sqlite));
    let mut rows = vec![Row {
        name: format!(
            "MCP read_file on the fleet store vs the embedded one (10 KB, {calls} calls)"
        ),
        ours_label: "PostgreSQL".into(),
        theirs_label: "SQLite".into(),
        ours,
        theirs,
        target: Target::RatioAtMost(3.0),
        unit: Unit::Seconds,
        note: "one `clawsmith mcp` each, one session; PostgreSQL 15 on localhost over TCP".into(),
    }];

    // Eight servers, eight sessions, at once, against one: calls per second.
    const SERVERS: usize = 8;
    let each = calls / SERVERS;
    let mut many = (0..SERVERS)
        .map(|n| server(bin, &workspace, &format!("bench-fleet-{n}"), fleet))
        .collect::<Result<Vec<_>>>()?;
    let mut one = server(bin, &workspace, "bench-fleet-alone", fleet)?;
    let (ours, theirs) = alternate(
        options.rounds(),
        || {
            let started = Instant::now();
            std::thread::scope(|scope| -> Result<()> {
                let runs: Vec<_> = many
                    .iter_mut()
                    .map(|client| scope.spawn(move || read(client, each)))
                    .collect();
                for run in runs {
                    run.join()
                        .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
                }
                Ok(())
            })?;
            Ok((each * SERVERS) as f64 / started.elapsed().as_secs_f64())
        },
        || {
            let started = Instant::now();
            read(&mut one, each * SERVERS)?;
            Ok((each * SERVERS) as f64 / started.elapsed().as_secs_f64())
        },
    )?;
    rows.push(Row {
        name: format!(
            "MCP read_file/s on the fleet store, {SERVERS} servers on {SERVERS} sessions vs 1"
        ),
        ours_label: format!("{SERVERS} servers"),
        theirs_label: "1 server".into(),
        ours,
        theirs,
        target: Target::RatioAtLeast(3.0),
        unit: Unit::PerSecond,
        note: format!("{} calls a sample in all", each * SERVERS),
    });
    Ok(rows)
}
