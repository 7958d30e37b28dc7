//! `[store]` and `clawsmith store migrate|check`: the embedded SQLite default, configuration
//! that does not hold, a PostgreSQL server before and after `migrate` (when
//! `CLAWSMITH_TEST_POSTGRES` names one: `.ci/run` starts it), an S3-compatible blob store
//! (`CLAWSMITH_TEST_S3`), and tools refused while sessions are configured onto the fleet store.

use clawsmith_store_postgres::SCHEMA_VERSION;

use crate::{Fixture, Run, run_binary_with};

/// `clawsmith --state-dir S ARGS` with `env` set.
fn run(fixture: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with_input(fixture, args, "", env)
}

/// [`run`] with `stdin` as its standard input.
fn run_with_input(fixture: &Fixture, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
    let state = fixture.state();
    let mut full = vec!["--state-dir", state.to_str().unwrap()];
    full.extend_from_slice(args);
    run_binary_with(&full, stdin, |command| {
        command.env_remove("CLAWSMITH_DATABASE_URL");
        for (name, value) in env {
            command.env(name, value);
        }
    })
}

/// The connection string of a new, empty database named after `purpose` and this process, on the
/// server `CLAWSMITH_TEST_POSTGRES` names; `None` (the test skips, and says so) without one,
/// unless `CLAWSMITH_REQUIRE_SERVICES` says the servers must be there.
pub(crate) fn fresh_database(purpose: &str) -> Option<String> {
    let Ok(base) = std::env::var("CLAWSMITH_TEST_POSTGRES") else {
        assert!(
            std::env::var_os("CLAWSMITH_REQUIRE_SERVICES").is_none(),
            "CLAWSMITH_REQUIRE_SERVICES is set and CLAWSMITH_TEST_POSTGRES is not"
        );
        eprintln!("SKIP: no PostgreSQL server (CLAWSMITH_TEST_POSTGRES is unset)");
        return None;
    };
    let database = format!("clawsmith_{purpose}_{}", std::process::id());
    for statement in [
        format!("DROP DATABASE IF EXISTS {database}"),
        format!("CREATE DATABASE {database}"),
    ] {
        let made = std::process::Command::new("psql")
            .args([
                "-q",
                "-d",
                &format!("{base} dbname=postgres"),
                "-c",
                &statement,
            ])
            .output()
            .unwrap();
        assert!(made.status.success(), "{made:?}");
    }
    Some(format!("{base} dbname={database}"))
}

/// [`fresh_database`] with clawsmith's schema in it.
pub(crate) fn migrated_database(purpose: &str) -> Option<String> {
    let url = fresh_database(purpose)?;
    clawsmith_store_postgres::PgStore::unchecked(
        &url,
        clawsmith_store_postgres::PgOptions::default(),
    )
    .unwrap()
    .migrate()
    .unwrap();
    Some(url)
}

/// `clawsmith turn` in mode `full` with `calls` on the store `config` names.
fn full_turn(
    fixture: &Fixture,
    workspace: &str,
    config: &str,
    session: &str,
    calls: &serde_json::Value,
    env: &[(&str, &str)],
) -> Run {
    let args = [
        "turn",
        "--workspace",
        workspace,
        "--config",
        config,
        "--mode",
        "full",
        "--session",
        session,
    ];
    run_with_input(fixture, &args, &calls.to_string(), env)
}

fn config(fixture: &Fixture, text: &str) -> String {
    let path = fixture.dir.path().join("clawsmith.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn the_embedded_store_needs_nothing_and_bad_store_configuration_is_refused() {
    let f = Fixture::new();
    let check = run(&f, &["store", "check"], &[]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check.stdout.contains("sessions: ok (embedded SQLite)"),
        "{}",
        check.stdout
    );
    let migrate = run(&f, &["store", "migrate"], &[]);
    assert_eq!(migrate.code, 0, "{}", migrate.stderr);
    assert!(
        migrate.stdout.contains("nothing to do"),
        "{}",
        migrate.stdout
    );
    // (configuration, what the refusal says)
    let refusals = [
        ("[store]\nkind = \"oracle\"\n", "unknown variant `oracle`"),
        (
            "[store]\nkind = \"sqlite\"\nblobs = \"s3://b\"\n",
            "takes no url_env or blobs",
        ),
        (
            "[store]\nkind = \"postgres\"\nurl = \"postgres://x\"\n",
            "unknown field `url`",
        ),
    ];
    for (text, says) in refusals {
        let path = config(&f, text);
        let refused = run(&f, &["store", "check", "--config", &path], &[]);
        assert_ne!(refused.code, 0, "{text}");
        assert!(refused.stderr.contains(says), "{text}: {}", refused.stderr);
    }
    // PostgreSQL named, its variable unset: check says which variable, and fails.
    let path = config(&f, "[store]\nkind = \"postgres\"\nurl_env = \"FLEET_DB\"\n");
    let unset = run(&f, &["store", "check", "--config", &path], &[]);
    assert_eq!(unset.code, 1, "{}", unset.stdout);
    assert!(
        unset.stdout.contains("sessions: FAILED (PostgreSQL)")
            && unset.stdout.contains("$FLEET_DB"),
        "{}",
        unset.stdout
    );
    // Unreachable server: said, with the cause.
    let unreachable = run(
        &f,
        &["--json", "store", "check", "--config", &path],
        &[(
            "FLEET_DB",
            "host=127.0.0.1 port=1 user=nobody connect_timeout=2",
        )],
    );
    assert_eq!(unreachable.code, 1);
    let answer = unreachable.json();
    assert_eq!(answer["ok"], false);
    assert!(
        answer["parts"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("not reached"),
        "{answer}"
    );
    // Tools on the fleet store without its connection string: refused, naming the variable,
    // rather than run on the local file.
    let ws = f.ws();
    let call = run(
        &f,
        &[
            "call",
            "--workspace",
            ws.to_str().unwrap(),
            "--config",
            &path,
            "read_file",
            "{\"path\":\"x\"}",
        ],
        &[],
    );
    assert_ne!(call.code, 0);
    assert!(
        call.stderr.contains("$FLEET_DB, which is not set"),
        "{}",
        call.stderr
    );
    assert!(
        !f.state().join("state.db").exists(),
        "no local store was made instead"
    );
}

#[test]
fn a_postgres_store_is_migrated_once_and_checked_with_its_blobs() {
    let Some(url) = fresh_database("cli") else {
        return;
    };
    let f = Fixture::new();
    let path = config(&f, "[store]\nkind = \"postgres\"\n");
    let env = [("CLAWSMITH_DATABASE_URL", url.as_str())];
    let before = run(&f, &["store", "check", "--config", &path], &env);
    assert_eq!(before.code, 1, "{}", before.stdout);
    assert!(
        before.stdout.contains("schema version 0")
            && before.stdout.contains("run `clawsmith store migrate`"),
        "{}",
        before.stdout
    );
    let migrate = run(&f, &["store", "migrate", "--config", &path], &env);
    assert_eq!(migrate.code, 0, "{}", migrate.stderr);
    assert!(
        migrate
            .stdout
            .contains(&format!("from schema version 0 to {SCHEMA_VERSION}")),
        "{}",
        migrate.stdout
    );
    let again = run(&f, &["--json", "store", "migrate", "--config", &path], &env);
    assert_eq!(again.json()["from"], SCHEMA_VERSION);
    let after = run(&f, &["store", "check", "--config", &path], &env);
    assert_eq!(after.code, 0, "{}", after.stdout);
    assert!(
        after.stdout.contains("sessions: ok (PostgreSQL"),
        "{}",
        after.stdout
    );
    // Whether the server offers TLS is the cluster's; the mode and the verdict are said either way.
    assert!(
        after
            .stdout
            .contains("encrypted (sslmode=prefer; the certificate is not checked)")
            || after.stdout.contains("not encrypted (sslmode=prefer)"),
        "{}",
        after.stdout
    );
    let plain = format!("{url} sslmode=disable");
    let plain_env = [("CLAWSMITH_DATABASE_URL", plain.as_str())];
    let plain_check = run(&f, &["store", "check", "--config", &path], &plain_env);
    assert_eq!(plain_check.code, 0, "{}", plain_check.stdout);
    assert!(
        plain_check
            .stdout
            .contains("reached, not encrypted (sslmode=disable)"),
        "{}",
        plain_check.stdout
    );
    let unchecked = format!("{url} sslmode=verify-full");
    let unchecked_env = [("CLAWSMITH_DATABASE_URL", unchecked.as_str())];
    let refused = run(&f, &["store", "check", "--config", &path], &unchecked_env);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stdout.contains(
            "sslmode=verify-full checks the server's certificate, so it needs sslrootcert"
        ),
        "{}",
        refused.stdout
    );
    assert!(
        after.stdout.contains("blobs: ok in the database's rows"),
        "{}",
        after.stdout
    );

    // Retention: a session from long ago goes (with its artifact), a fresh one stays; the blob
    // nothing names any more goes once its grace period is over.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let psql = |statement: &str| {
        let ran = std::process::Command::new("psql")
            .args(["-q", "-t", "-A", "-d", &url, "-c", statement])
            .output()
            .unwrap();
        assert!(ran.status.success(), "{ran:?}");
        String::from_utf8_lossy(&ran.stdout).trim().to_owned()
    };
    psql(&format!(
        "INSERT INTO clawsmith_sessions (id, created_at_ms, workspace_root) VALUES \
         ('ancient', 1000, '/ws'), ('fresh', {now_ms}, '/ws');
         INSERT INTO clawsmith_blobs (hash, size, content, in_object, touched_at) VALUES \
         ('{:064x}', 1, '\\x41', false, now() - interval '2 hours');
         INSERT INTO clawsmith_artifacts VALUES ('ancient', 'art_1', '{:064x}', 1, 1, 1000, 0);",
        1, 1
    ));
    let preview = run(&f, &["store", "check", "--config", &path], &env);
    assert_eq!(preview.code, 0);
    let dry = run(&f, &["prune", "--dry-run", "--config", &path], &env);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout
            .contains("would remove 1 session(s) older than 30 days and 0 unreferenced blob(s)"),
        "{}",
        dry.stdout
    );
    assert_eq!(psql("SELECT count(*) FROM clawsmith_sessions"), "2");
    let pruned = run(&f, &["--json", "prune", "--config", &path], &env);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    let answer = pruned.json();
    assert_eq!(answer["sessionsRemoved"], 1, "{answer}");
    assert_eq!(answer["blobsRemoved"], 1, "{answer}");
    assert_eq!(
        psql("SELECT string_agg(id, ',') FROM clawsmith_sessions"),
        "fresh"
    );
    assert_eq!(psql("SELECT count(*) FROM clawsmith_blobs"), "0");

    let Ok(endpoint) = std::env::var("CLAWSMITH_TEST_S3") else {
        eprintln!("SKIP the blob store part: CLAWSMITH_TEST_S3 is unset");
        return;
    };
    let bucket = format!("clawsmith-cli-{}", std::process::id());
    let address = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let status = std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT"])
        .arg(format!("http://{address}/{bucket}"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "200");
    let path = config(
        &f,
        &format!("[store]\nkind = \"postgres\"\nblobs = \"s3://{bucket}/fleet\"\n"),
    );
    let aws = [
        ("CLAWSMITH_DATABASE_URL", url.as_str()),
        ("AWS_ENDPOINT", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ];
    let with_blobs = run(&f, &["store", "check", "--config", &path], &aws);
    assert_eq!(with_blobs.code, 0, "{}", with_blobs.stdout);
    assert!(
        with_blobs
            .stdout
            .contains(&format!("blobs: ok s3://{bucket}/fleet reached")),
        "{}",
        with_blobs.stdout
    );
    let missing = config(
        &f,
        "[store]\nkind = \"postgres\"\nblobs = \"s3://no-such-bucket-here\"\n",
    );
    let refused = run(&f, &["store", "check", "--config", &missing], &aws);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused
            .stdout
            .contains("blobs: FAILED s3://no-such-bucket-here not reached"),
        "{}",
        refused.stdout
    );
}

/// With `[store] kind = "postgres"` in the state directory's configuration, `session` and
/// `undo list|diff` read the fleet's sessions (one another host wrote), `undo files` puts the
/// turn's file back in the session's workspace, `session fork` forks there; without the
/// connection string they refuse rather than read the local file.
#[test]
fn session_and_undo_commands_read_the_fleet_store() {
    use std::os::unix::fs::PermissionsExt;

    use clawsmith_protocol::{EventPayload, ModelMessage, Role, TurnStarted};
    use clawsmith_store::{SessionStore, TurnOpening, TurnStore};
    use clawsmith_store_postgres::{PgOptions, PgStore};

    let Some(url) = migrated_database("history") else {
        return;
    };
    let f = Fixture::new();
    let workspace = f.ws().canonicalize().unwrap();
    let root = workspace.to_str().unwrap();
    let host = PgStore::connect(&url, PgOptions::default()).unwrap();
    let id = "fleet-history";
    host.create_session(id, root).unwrap();
    host.append_message(id, &ModelMessage::text(Role::User, "from another host"))
        .unwrap();
    let started = EventPayload::TurnStarted(TurnStarted {
        turn_id: "t1".to_owned(),
    });
    host.begin_turn(
        id,
        "t1",
        TurnOpening {
            events: vec![started.clone()],
            timestamp_ms: 1,
        },
    )
    .unwrap();
    let (old, new) = (b"one\ntwo\n".as_slice(), b"one\n2\n".as_slice());
    host.record_before(id, "t1", "a.txt", Some((old, 0o644)))
        .unwrap();
    let post = (clawsmith_checkpoint::sha256(new), new.len() as u64, 0o644);
    host.record_after(id, "t1", "a.txt", Some(post)).unwrap();
    host.finish_turn_reading(id, "t1", &|_| Some(new.to_vec()), started, 2)
        .unwrap();
    std::fs::write(workspace.join("a.txt"), new).unwrap();

    std::fs::create_dir(f.state()).unwrap();
    let config = f.state().join("clawsmith.toml");
    std::fs::write(&config, "[store]\nkind = \"postgres\"\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let env = [("CLAWSMITH_DATABASE_URL", url.as_str())];

    let list = run(&f, &["--json", "session", "list"], &env);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(list.stdout.contains(id), "{}", list.stdout);
    let show = run(&f, &["--json", "session", "show", id], &env);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("from another host"), "{}", show.stdout);
    let diff = run(
        &f,
        &["--json", "undo", "diff", "t1", "a.txt", "--session", id],
        &env,
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let unified = diff.json()["unified"].as_str().unwrap().to_owned();
    assert!(unified.contains("-two\n+2\n"), "{unified}");
    let listed = run(&f, &["--json", "undo", "list", "--session", id], &env);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(listed.stdout.contains("a.txt"), "{}", listed.stdout);

    let undo = run(
        &f,
        &["undo", "files", "t1", "--session", id, "--workspace", root],
        &env,
    );
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert_eq!(std::fs::read(workspace.join("a.txt")).unwrap(), old);
    assert_eq!(
        host.checkpoints(id).unwrap()[0].state,
        clawsmith_store::CheckpointState::Undone
    );

    let fork = run(
        &f,
        &["--json", "session", "fork", id, "--as", "fleet-fork"],
        &env,
    );
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    let forked = host.get_session("fleet-fork").unwrap().unwrap();
    assert_eq!(forked.parent_id.as_deref(), Some(id));
    assert_eq!(host.events("fleet-fork").unwrap().len(), 2);

    // Without the connection string: refused, not the local file read instead.
    let unset = run(&f, &["session", "list"], &[]);
    assert_ne!(unset.code, 0);
    assert!(
        unset
            .stderr
            .contains("$CLAWSMITH_DATABASE_URL, which is not set"),
        "{}",
        unset.stderr
    );
}

/// `turn` and `call` with `[store] kind = "postgres"`: the session, its checkpoint (a file
/// tool's change and a command's) and every call are written to the fleet store, where another
/// host reads them; the connection string never reaches a command; a lease another host holds
/// refuses the call; and a second machine (another state directory) continues the session.
#[test]
fn tools_write_their_sessions_to_the_fleet_store() {
    use clawsmith_store::{SessionStore, TurnStore};
    use clawsmith_store_postgres::{PgOptions, PgStore};

    let Some(url) = migrated_database("tools") else {
        return;
    };
    let f = Fixture::new();
    let path = config(&f, "[store]\nkind = \"postgres\"\n");
    let env = [("CLAWSMITH_DATABASE_URL", url.as_str())];
    let ws = f.ws().canonicalize().unwrap();
    let ws_text = ws.to_str().unwrap();
    let id = "fleet-tools";
    let calls = serde_json::json!([
        {"id": "c1", "name": "write_file",
         "arguments": serde_json::json!({"path": "fleet.txt", "content": "one\ntwo\n"}).to_string()},
        {"id": "c2", "name": "run_command",
         "arguments": serde_json::json!({"command": "printf made > b.txt; env"}).to_string()},
    ]);
    let turn = full_turn(&f, ws_text, &path, id, &calls, &env);
    assert_eq!(turn.code, 0, "{}", turn.stderr);
    assert!(
        !turn.stdout.contains("CLAWSMITH_DATABASE_URL") && !turn.stdout.contains(&url),
        "a command saw the connection string: {}",
        turn.stdout
    );
    assert!(
        !f.state().join("state.db").exists(),
        "nothing went to the local file"
    );

    let host = PgStore::connect(&url, PgOptions::default()).unwrap();
    let session = host.get_session(id).unwrap().unwrap();
    assert_eq!(session.workspace_root, ws_text);
    let checkpoints = host.checkpoints(id).unwrap();
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    let turn_id = checkpoints[0].turn_id.clone();
    let changes: Vec<(String, Option<String>)> = host
        .change_list(id, &turn_id)
        .unwrap()
        .into_iter()
        .map(|change| (change.path, change.origin))
        .collect();
    assert_eq!(
        changes,
        [
            ("fleet.txt".to_owned(), None),
            ("b.txt".to_owned(), Some("command".to_owned()))
        ]
    );
    let diff = host.diff(id, &turn_id, "fleet.txt").unwrap().unwrap();
    assert!(diff.unified.contains("+two"), "{}", diff.unified);
    let completed = |store: &PgStore| -> usize {
        store
            .events(id)
            .unwrap()
            .iter()
            .filter(|event| event.payload.kind() == "tool.completed")
            .count()
    };
    assert_eq!(completed(&host), 2);
    assert!(host.unfinished_calls(id).unwrap().is_empty());

    // A lease another host holds refuses the call, and the session is unchanged.
    let held = host.lease_session(id).unwrap();
    let busy = run(
        &f,
        &[
            "call",
            "--workspace",
            ws_text,
            "--config",
            &path,
            "--session",
            id,
            "read_file",
            "{\"path\":\"fleet.txt\"}",
        ],
        &env,
    );
    assert_ne!(busy.code, 0, "{}", busy.stdout);
    assert!(busy.stderr.contains("in use"), "{}", busy.stderr);
    assert_eq!(completed(&host), 2);
    drop(held);

    // Another machine (its own state directory) continues the session where it stands.
    let other = Fixture::new();
    let other_config = config(&other, "[store]\nkind = \"postgres\"\n");
    let read = run(
        &other,
        &[
            "call",
            "--workspace",
            ws_text,
            "--config",
            &other_config,
            "--session",
            id,
            "read_file",
            "{\"path\":\"fleet.txt\"}",
        ],
        &env,
    );
    assert_eq!(read.code, 0, "{}", read.stderr);
    assert!(read.stdout.contains("two"), "{}", read.stdout);
    assert_eq!(completed(&host), 3);
    let sequences: Vec<u64> = host
        .events(id)
        .unwrap()
        .iter()
        .map(|e| e.sequence)
        .collect();
    assert_eq!(
        sequences,
        (1..=sequences.len() as u64).collect::<Vec<_>>(),
        "one gap-free history across both machines"
    );
}

/// The variable `[store]` reads the connection string from reaches no process clawsmith starts,
/// even when its name is one every command gets (`LC_*`), nothing in it looks secret, and MCP
/// servers' entries (confined and unconfined) list it by name: it is withheld by what it holds,
/// not by a list of names. A variable of the same pattern that holds no credential still passes.
#[test]
fn the_connection_string_reaches_no_process_whatever_names_it() {
    let Some(url) = migrated_database("withheld") else {
        return;
    };
    let f = Fixture::new();
    let spy = f.dir.path().join("spy.py");
    // Its tool is named after whether it got the variable `argv[1]`.
    std::fs::write(
        &spy,
        crate::one_tool_mcp_server(
            r#"name = "leaked" if os.environ.get(sys.argv[1]) else "sealed""#,
        ),
    )
    .unwrap();
    let mut servers = String::new();
    for (name, unconfined) in [("confined", false), ("unconfined", true)] {
        servers.push_str(&format!(
            "[[mcp_servers]]\nname = \"{name}\"\ncommand = \"/usr/bin/python3\"\n\
             args = [\"{}\", \"LC_FLEET_URL\"]\nenv = [\"LC_FLEET_URL\", \"LC_VISIBLE\"]\n\
             unconfined = {unconfined}\n",
            spy.display()
        ));
    }
    let path = config(
        &f,
        &format!("[store]\nkind = \"postgres\"\nurl_env = \"LC_FLEET_URL\"\n\n{servers}"),
    );
    let env = [("LC_FLEET_URL", url.as_str()), ("LC_VISIBLE", "kept")];
    let ws = f.ws().canonicalize().unwrap();
    let ws_text = ws.to_str().unwrap();

    let call = run(
        &f,
        &[
            "call",
            "--workspace",
            ws_text,
            "--config",
            &path,
            "--yes",
            "run_command",
            r#"{"command":"env > seen.txt"}"#,
        ],
        &env,
    );
    assert_eq!(call.code, 0, "{}{}", call.stdout, call.stderr);
    let seen = std::fs::read_to_string(ws.join("seen.txt")).unwrap();
    assert!(seen.contains("LC_VISIBLE=kept"), "{seen}");
    assert!(
        !seen.contains("LC_FLEET_URL") && !seen.contains(&url),
        "a command saw the connection string: {seen}"
    );

    // Both servers start (they are listed) and neither got the variable.
    let tools = run(
        &f,
        &["tools", "--workspace", ws_text, "--config", &path],
        &env,
    );
    assert_eq!(tools.code, 0, "{}", tools.stderr);
    for server in ["confined", "unconfined"] {
        assert!(
            tools.stdout.contains(&format!("{server}__sealed")),
            "{server}: {}",
            tools.stdout
        );
    }
    assert!(!tools.stdout.contains("leaked"), "{}", tools.stdout);
}

/// On the fleet store a command that destroys the workspace's repository is undone like on the
/// embedded one: `.git`'s files are kept as the store's blobs and its objects in this machine's
/// mirror (in the state directory), so `undo files` gives back a repository `git fsck` passes,
/// and the command's output names nothing of `.git` as not captured.
#[test]
fn a_repository_a_command_destroys_on_the_fleet_store_is_whole_after_undo() {
    use std::os::unix::fs::PermissionsExt;

    let Some(url) = migrated_database("repository") else {
        return;
    };
    let f = Fixture::new();
    let ws = f.ws().canonicalize().unwrap();
    let ws_text = ws.to_str().unwrap();
    let git = |arguments: &[&str]| {
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(["-c", "commit.gpgsign=false"])
            .args(arguments)
            .current_dir(&ws)
            .output()
            .unwrap()
    };
    for arguments in [
        &["init", "-q"][..],
        &["add", "a.txt"],
        &["commit", "-q", "-m", "init"],
    ] {
        let output = git(arguments);
        assert!(output.status.success(), "git {arguments:?}: {output:?}");
    }
    let head = String::from_utf8(git(&["rev-parse", "HEAD"]).stdout).unwrap();
    let path = config(&f, "[store]\nkind = \"postgres\"\n");
    let env = [("CLAWSMITH_DATABASE_URL", url.as_str())];
    let destroy = "python3 -c 'import shutil; shutil.rmtree(\".git\", ignore_errors=True)'";
    let calls = serde_json::json!([
        {"id": "c1", "name": "run_command",
         "arguments": serde_json::json!({"command": destroy}).to_string()},
    ]);
    let turn = full_turn(&f, ws_text, &path, "fleet-git", &calls, &env);
    assert_eq!(turn.code, 0, "{}", turn.stderr);
    assert!(
        !turn.stdout.contains("not captured for undo: .git"),
        "the repository is kept: {}",
        turn.stdout
    );
    // What the sandbox keeps read-only (`.git/config`, hooks) survives; the rest is gone.
    assert!(
        !git(&["rev-parse", "HEAD"]).status.success() && !ws.join(".git/HEAD").exists(),
        "the command destroyed nothing: {}",
        turn.stdout
    );
    assert!(
        f.state().join("fleet-repositories").is_dir(),
        "the objects are mirrored in the state directory"
    );
    let turn_id = turn.lines().pop().unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();

    let state_config = f.state().join("clawsmith.toml");
    std::fs::write(&state_config, "[store]\nkind = \"postgres\"\n").unwrap();
    std::fs::set_permissions(&state_config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let undo = run(
        &f,
        &[
            "--json",
            "undo",
            "files",
            &turn_id,
            "--session",
            "fleet-git",
            "--workspace",
            ws_text,
        ],
        &env,
    );
    assert_eq!(undo.code, 0, "{}", undo.stderr);
    assert!(undo.stdout.contains(".git/HEAD"), "{}", undo.stdout);
    let fsck = git(&["fsck", "--full", "--strict"]);
    assert!(fsck.status.success(), "{fsck:?}");
    assert_eq!(
        String::from_utf8(git(&["rev-parse", "HEAD"]).stdout).unwrap(),
        head
    );
}
