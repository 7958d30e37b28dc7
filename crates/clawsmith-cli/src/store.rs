//! `[store]` in `clawsmith.toml` and `clawsmith store migrate|check`: which session store a
//! machine uses — the embedded SQLite file (the default) or a fleet's PostgreSQL database with
//! its blobs in object storage — and whether it is reachable and ready.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use clawsmith_checkpoint::LeaseWait;
use clawsmith_store_postgres::{PgOptions, PgStore, SCHEMA_VERSION, TlsMode};
use serde::Deserialize;
use serde_json::json;

use crate::{Output, exit, refusal};

/// `clawsmith store …`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Apply the database migrations this build needs (PostgreSQL; under an advisory lock, so
    /// hosts running it together apply each once).
    Migrate {
        /// The configuration file (default: `clawsmith.toml` in the state directory).
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// Say which store the configuration names, what of it was reached and what was not;
    /// exits 1 when a part could not be reached or is not ready.
    Check {
        /// The configuration file (default: `clawsmith.toml` in the state directory).
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
}

/// `[store]` as written.
#[derive(Debug, Default, Deserialize)]
struct StoreFile {
    #[serde(default)]
    store: Option<StoreSection>,
}

/// `[store]`: `kind = "sqlite" | "postgres"`; for PostgreSQL, the variable holding the
/// connection string and where large blobs go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    kind: StoreKind,
    #[serde(default)]
    url_env: Option<String>,
    #[serde(default)]
    blobs: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StoreKind {
    Sqlite,
    Postgres,
}

/// The variable that holds the connection string when `url_env` does not name one.
pub const DEFAULT_URL_ENV: &str = "CLAWSMITH_DATABASE_URL";

/// Withholds the variable that `[store]` of the configuration `text` reads its connection
/// string from (the database's password) from every process this one starts, whatever its name
/// and whatever an allow-list or an MCP server's `env` entry says. Run on every configuration
/// file the CLI reads, before anything is started; a file that does not parse withholds nothing
/// here and is refused by its readers.
pub fn withhold_connection_variable(text: &str) {
    if !text.contains("store") {
        return;
    }
    if let Ok(StoreFile {
        store: Some(section),
    }) = toml::from_str::<StoreFile>(text)
        && section.kind == StoreKind::Postgres
    {
        clawsmith_sandbox::withhold(section.url_env());
    }
}

/// `[store]` of the configuration file, checked; `None` without a file or a section.
pub fn section(path: Option<&Path>) -> Result<Option<StoreSection>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the configuration {}", path.display()))?;
    let file: StoreFile =
        toml::from_str(&text).map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
    let Some(section) = file.store else {
        return Ok(None);
    };
    match (section.kind, &section.url_env, &section.blobs) {
        (StoreKind::Sqlite, Some(_), _) | (StoreKind::Sqlite, _, Some(_)) => bail!(
            "{}: [store]: kind = \"sqlite\" takes no url_env or blobs (the database and its \
             blobs live in the state directory)",
            path.display()
        ),
        _ => Ok(Some(section)),
    }
}

impl StoreSection {
    fn url_env(&self) -> &str {
        self.url_env.as_deref().unwrap_or(DEFAULT_URL_ENV)
    }

    /// The connection string, from the environment.
    fn url(&self) -> Result<String> {
        let name = self.url_env();
        match clawsmith_sandbox::credential(name) {
            Some(url) if !url.trim().is_empty() => Ok(url),
            _ => Err(refusal(
                format!(
                    "[store] kind = \"postgres\" reads its connection string from ${name}, which is not set"
                ),
                format!(
                    "export {name}='postgres://USER:PASSWORD@HOST:PORT/DATABASE' (or name another variable with url_env)"
                ),
            )),
        }
    }
}

/// `clawsmith store …`.
pub fn run(state_dir: &Path, command: StoreCommand, out: &Output) -> Result<i32> {
    match command {
        StoreCommand::Migrate { config } => {
            let path = crate::run::config_file(state_dir, config.as_deref())?;
            let Some(section) = section(path.as_deref())?.filter(|s| s.kind == StoreKind::Postgres)
            else {
                let message = "the store is the embedded SQLite file, which migrates itself when \
                               it opens: nothing to do";
                if out.json {
                    out.json_line(
                        &json!({"kind": "sqlite", "migrated": false, "message": message}),
                    )?;
                } else {
                    out.line(message)?;
                }
                return Ok(exit::OK);
            };
            let store = PgStore::unchecked(&section.url()?, PgOptions::default())?;
            let (before, after) = store.migrate()?;
            if out.json {
                out.json_line(&json!({"kind": "postgres", "from": before, "to": after}))?;
            } else if before == after {
                out.line(&format!(
                    "the database is at schema version {after} already"
                ))?;
            } else {
                out.line(&format!(
                    "migrated the database from schema version {before} to {after}"
                ))?;
            }
            Ok(exit::OK)
        }
        StoreCommand::Check { config } => {
            let path = crate::run::config_file(state_dir, config.as_deref())?;
            let section = section(path.as_deref())?;
            let parts = match section.filter(|s| s.kind == StoreKind::Postgres) {
                None => check_sqlite(state_dir),
                Some(section) => check_postgres(&section),
            };
            let failed = parts.iter().any(|part| !part.ok);
            if out.json {
                out.json_line(&json!({
                    "ok": !failed,
                    "parts": parts.iter().map(|part| json!({
                        "part": part.name, "ok": part.ok, "detail": part.detail,
                    })).collect::<Vec<_>>(),
                }))?;
            } else {
                let text: Vec<String> = parts
                    .iter()
                    .map(|part| {
                        format!(
                            "{}: {} {}",
                            part.name,
                            if part.ok { "ok" } else { "FAILED" },
                            part.detail
                        )
                    })
                    .collect();
                out.line(&text.join("\n"))?;
            }
            Ok(if failed { exit::ERROR } else { exit::OK })
        }
    }
}

/// The fleet store `[store]` names, connected and at this build's schema; `Ok(None)` when the
/// configuration keeps sessions in the embedded SQLite file.
pub fn open_fleet(
    path: Option<&Path>,
    state_dir: &Path,
    lease_wait: LeaseWait,
) -> Result<Option<PgStore>> {
    let Some(section) = section(path)?.filter(|s| s.kind == StoreKind::Postgres) else {
        return Ok(None);
    };
    let mut options = objects_of(&section)?;
    options.wait_for_lease = lease_wait == LeaseWait::Wait;
    // This machine's mirror of its workspaces' git objects, for undo of what commands do to a
    // repository: in the state directory, which no command sees.
    options.repository_mirror = Some(state_dir.join(FLEET_REPOSITORIES));
    let store = PgStore::connect(&section.url()?, options).with_context(|| {
        format!(
            "opening the PostgreSQL store (from ${}) that [store] names",
            section.url_env()
        )
    })?;
    Ok(Some(store))
}

/// The folder of the state directory where the fleet store mirrors this machine's workspaces'
/// git objects.
pub const FLEET_REPOSITORIES: &str = "fleet-repositories";

/// The store the commands over history read (`session`, `undo`): the fleet store when the state
/// directory's configuration names one, else the state directory's SQLite file, which must exist.
pub fn open_history_store(
    state: &crate::state::StateOptions,
) -> Result<std::sync::Arc<dyn clawsmith_store::SessionStore>> {
    let path = crate::run::config_file(&state.dir, None)?;
    if let Some(fleet) = open_fleet(path.as_deref(), &state.dir, state.lease_wait)? {
        return Ok(std::sync::Arc::new(fleet));
    }
    Ok(crate::state::open_existing_store(state)?)
}

/// The store the tools write (`call`, `turn`, `mcp`, `run`): the fleet store when `config`
/// names one, else the state directory's SQLite file, created when missing. The state
/// directory must have been prepared (it holds the configuration either way).
pub fn open_tool_store(
    state: &crate::state::StateOptions,
    config: Option<&Path>,
) -> Result<std::sync::Arc<dyn clawsmith_store::SessionStore>> {
    if let Some(fleet) = open_fleet(config, &state.dir, state.lease_wait)? {
        return Ok(std::sync::Arc::new(fleet));
    }
    Ok(crate::state::open_prepared_store(state)?)
}

/// How long an unreferenced blob of the fleet store is kept after it was last touched: longer
/// than any writer's transaction between storing a blob and naming it.
const BLOB_GRACE: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// `clawsmith prune` when `[store]` names PostgreSQL: sessions older than the retention
/// policy's age (unless a live writer holds one) go with their history, then the blobs nothing
/// names any more once their grace period is over; `Ok(None)` for the embedded store.
pub fn prune_fleet(path: Option<&Path>, dry_run: bool, out: &Output) -> Result<Option<i32>> {
    let Some(section) = section(path)?.filter(|s| s.kind == StoreKind::Postgres) else {
        return Ok(None);
    };
    let store = PgStore::connect(&section.url()?, objects_of(&section)?)?;
    let max_age = clawsmith_checkpoint::RetentionPolicy::default().max_age;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let cutoff = u64::try_from(now.saturating_sub(max_age).as_millis()).unwrap_or(0);
    let (sessions, blobs, objects) = if dry_run {
        let (sessions, blobs) = store.retention_preview(cutoff, BLOB_GRACE)?;
        (sessions, blobs, None)
    } else {
        let sessions = store.delete_sessions_created_before(cutoff)?;
        let collected = store.collect_blobs(BLOB_GRACE)?;
        (
            sessions,
            collected.blobs,
            Some(collected.objects + collected.orphans),
        )
    };
    if out.json {
        out.json_line(&json!({
            "kind": "postgres",
            "dryRun": dry_run,
            "sessionsRemoved": sessions,
            "blobsRemoved": blobs,
            "objectsRemoved": objects,
        }))?;
    } else {
        out.line(&format!(
            "{} {sessions} session(s) older than {} days and {blobs} unreferenced blob(s){}              (PostgreSQL)",
            if dry_run { "would remove" } else { "removed" },
            max_age.as_secs() / 86_400,
            objects.map_or_else(String::new, |n| format!(", {n} object(s)")),
        ))?;
    }
    Ok(Some(exit::OK))
}

/// The options of a store with `[store] blobs`, when it names one.
fn objects_of(section: &StoreSection) -> Result<PgOptions> {
    let mut options = PgOptions::default();
    if let Some(location) = &section.blobs {
        options.objects = Some(clawsmith_store_postgres::object_store_at(location)?);
    }
    Ok(options)
}

/// One part of a store and what became of reaching it.
struct Part {
    name: &'static str,
    ok: bool,
    detail: String,
}

fn check_sqlite(state_dir: &Path) -> Vec<Part> {
    let database = state_dir.join(crate::state::DATABASE_FILE);
    let detail = match std::fs::metadata(&database) {
        Ok(metadata) => format!(
            "(embedded SQLite) {} ({} bytes); it migrates itself when it opens",
            database.display(),
            metadata.len()
        ),
        Err(_) => format!(
            "(embedded SQLite) {} is made at the first call",
            database.display()
        ),
    };
    vec![Part {
        name: "sessions",
        ok: true,
        detail,
    }]
}

fn check_postgres(section: &StoreSection) -> Vec<Part> {
    let mut parts = Vec::new();
    let url = match section.url() {
        Ok(url) => url,
        Err(error) => {
            parts.push(Part {
                name: "sessions",
                ok: false,
                detail: format!("(PostgreSQL) {error:#}"),
            });
            return parts;
        }
    };
    match PgStore::unchecked(&url, PgOptions::default()).and_then(|store| {
        let version = store.server_version()?;
        let schema = store.schema_version()?;
        let mode = store.tls_mode().as_str();
        let tls = match (store.encrypted()?, store.tls_mode()) {
            (false, _) => format!("not encrypted (sslmode={mode})"),
            (true, TlsMode::VerifyCa | TlsMode::VerifyFull) => {
                format!("encrypted, the server's certificate checked (sslmode={mode})")
            }
            (true, _) => format!("encrypted (sslmode={mode}; the certificate is not checked)"),
        };
        Ok((version, schema, tls))
    }) {
        Ok((version, schema, tls)) if schema == SCHEMA_VERSION => parts.push(Part {
            name: "sessions",
            ok: true,
            detail: format!(
                "(PostgreSQL {version}, from ${}) reached, {tls}; schema version {schema}, as this \
                 build needs",
                section.url_env()
            ),
        }),
        Ok((version, schema, tls)) => parts.push(Part {
            name: "sessions",
            ok: false,
            detail: format!(
                "(PostgreSQL {version}, from ${}) reached, {tls}; schema version {schema}, this \
                 build needs {SCHEMA_VERSION}{}",
                section.url_env(),
                if schema < SCHEMA_VERSION {
                    ": run `clawsmith store migrate`"
                } else {
                    ": the database is newer than this clawsmith"
                }
            ),
        }),
        Err(error) => parts.push(Part {
            name: "sessions",
            ok: false,
            detail: format!(
                "(PostgreSQL, from ${}) not reached: {error}",
                section.url_env()
            ),
        }),
    }
    parts.push(match &section.blobs {
        None => Part {
            name: "blobs",
            ok: true,
            detail: "in the database's rows (no `blobs` object store configured)".to_owned(),
        },
        Some(location) => match clawsmith_store_postgres::object_store_at(location)
            .and_then(|objects| clawsmith_store_postgres::probe_objects(&Arc::clone(&objects)))
        {
            Ok(()) => Part {
                name: "blobs",
                ok: true,
                detail: format!("{location} reached (wrote, read and deleted a probe object)"),
            },
            Err(error) => Part {
                name: "blobs",
                ok: false,
                detail: format!("{location} not reached: {error}"),
            },
        },
    });
    parts
}
