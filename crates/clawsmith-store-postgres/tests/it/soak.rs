//! The fleet soak: processes standing for hosts write shared sessions through short leases
//! (600 ms); the coordinator stops one now and then (SIGSTOP) for longer than a lease lasts, so
//! that another takes its session over while it is frozen mid-write, then lets it go on
//! (SIGCONT), and kills them with SIGKILL at random moments (during appends, renewals and
//! takeovers). Afterwards every session's
//! history must be whole: sequences 1..=N with no gap and no duplicate, epochs that never go
//! back (no row from a writer after its lease was taken over), and every journaled call closed —
//! by its writer, or as `unknown` by the next taker (A8).
//!
//! It runs `CLAWSMITH_FLEET_SOAK_SECONDS` seconds (default 12); the test process is the
//! coordinator, and re-runs itself as each worker.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawsmith_protocol::{EventPayload, ModelMessage, Role, ToolStatus, TurnStarted};
use clawsmith_store::{JournalStart, SessionStore, StoreError};
use clawsmith_store_postgres::{PgOptions, PgStore};

use crate::{migrated, postgres};

const SESSIONS: u32 = 3;
const WORKERS: usize = 4;
const WORKER_VARIABLE: &str = "CLAWSMITH_FLEET_WORKER";

/// xorshift64*: enough randomness for choosing, seeded per process.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % sides.max(1)
    }
}

fn started(turn: &str) -> EventPayload {
    EventPayload::TurnStarted(TurnStarted {
        turn_id: turn.to_owned(),
    })
}

/// One worker: forever, lease a session (waiting for it), close what a dead writer left open
/// when the lease is fresh, then run a few calls; a lease lost to a takeover ends the round.
fn work(url: &str) -> ! {
    let options = PgOptions {
        lease_ttl: Duration::from_millis(600),
        wait_for_lease: true,
        ..PgOptions::default()
    };
    let store = PgStore::connect(url, options).unwrap();
    let mut dice = Dice(u64::from(std::process::id()).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut call = 0_u64;
    loop {
        let session = format!("fleet-{}", dice.roll(u64::from(SESSIONS)));
        let lease = store.lease_session(&session).unwrap();
        let mut round = || -> Result<(), StoreError> {
            if lease.is_fresh() {
                for open in store.unfinished_calls(&session)? {
                    store.journal_close(&session, &open.call_id, ToolStatus::Unknown)?;
                }
            }
            for _ in 0..=dice.roll(4) {
                call += 1;
                let call_id = format!("{}-{call}", std::process::id());
                let journal = JournalStart {
                    session_id: session.clone(),
                    turn_id: "t".to_owned(),
                    call_id: call_id.clone(),
                    tool_name: "write_file".to_owned(),
                    args_json: "{}".to_owned(),
                };
                let assistant = ModelMessage::text(Role::Assistant, "writing");
                store.start_call(
                    &session,
                    Some(&assistant),
                    Some(&journal),
                    started(&call_id),
                    1,
                )?;
                if dice.roll(10) == 0 {
                    // A pause past the lease: someone else may take the session over.
                    std::thread::sleep(Duration::from_millis(700 + dice.roll(300)));
                }
                store.append_event(&session, started(&format!("{call_id}-done")), 2)?;
                store.journal_close(&session, &call_id, ToolStatus::Success)?;
            }
            Ok(())
        };
        match round() {
            Ok(()) | Err(StoreError::LeaseLost { .. }) => {}
            Err(error) => panic!("worker {}: {error}", std::process::id()),
        }
        drop(lease);
    }
}

/// A worker: this test binary again, running this test as a worker.
#[allow(clippy::disallowed_methods)] // a test's own processes, not a tool's
fn spawn_worker(url: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "soak::a_fleet_of_writers_killed_at_random_leaves_every_history_whole",
            "--nocapture",
        ])
        .env(WORKER_VARIABLE, url)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Sends `signal` (`STOP`, `CONT`) to the process `pid`, with util-linux's `kill`.
#[allow(clippy::disallowed_methods)] // a test's own processes, not a tool's
fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} {pid}: {sent}");
}

/// At least this many workers are killed with SIGKILL in a soak, and frozen past their lease.
const MIN_KILLS: u32 = 5;
const MIN_FREEZES: u32 = 2;

#[test]
fn a_fleet_of_writers_killed_at_random_leaves_every_history_whole() {
    if let Ok(url) = std::env::var(WORKER_VARIABLE) {
        work(&url);
    }
    let Some(base) = postgres("a_fleet_of_writers_killed_at_random_leaves_every_history_whole")
    else {
        return;
    };
    let seconds: u64 = std::env::var("CLAWSMITH_FLEET_SOAK_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(12);
    let (url, open) = migrated(&base, PgOptions::default());
    let setup = open();
    for n in 0..SESSIONS {
        setup.create_session(&format!("fleet-{n}"), "/ws").unwrap();
    }
    let mut workers: Vec<Child> = (0..WORKERS).map(|_| spawn_worker(&url)).collect();
    let mut dice = Dice(0x5eed_u64 ^ u64::from(std::process::id()));
    let (mut kills, mut freezes) = (0, 0);
    let end = Instant::now() + Duration::from_secs(seconds);
    // The dice choose when and whom; the soak goes on past its time until it has killed and
    // frozen enough workers to say something (a slow machine gets fewer rounds in its time).
    let hard_end = end + Duration::from_secs(60);
    while Instant::now() < end || kills < MIN_KILLS || freezes < MIN_FREEZES {
        assert!(
            Instant::now() < hard_end,
            "the soak could not kill {MIN_KILLS} and freeze {MIN_FREEZES} workers in {seconds} s \
             and a minute more ({kills} killed, {freezes} frozen)"
        );
        std::thread::sleep(Duration::from_millis(200 + dice.roll(600)));
        for worker in &mut workers {
            if let Some(status) = worker.try_wait().unwrap() {
                panic!("a worker ended on its own: {status}");
            }
        }
        let victim = dice.roll(WORKERS as u64) as usize;
        if dice.roll(3) == 0 {
            // Frozen past its lease (renewal included), then thawed: whatever it was writing
            // must now be refused.
            let pid = workers[victim].id();
            signal(pid, "STOP");
            std::thread::sleep(Duration::from_millis(900 + dice.roll(600)));
            signal(pid, "CONT");
            freezes += 1;
        } else {
            workers[victim].kill().unwrap();
            workers[victim].wait().unwrap();
            kills += 1;
            workers[victim] = spawn_worker(&url);
        }
    }
    for worker in &mut workers {
        worker.kill().unwrap();
        worker.wait().unwrap();
    }
    // The last takers: every lease of a killed worker runs out, then recovery closes what it
    // left open.
    let checker = PgStore::connect(
        &url,
        PgOptions {
            wait_for_lease: true,
            ..PgOptions::default()
        },
    )
    .unwrap();
    let mut recovered = 0;
    for n in 0..SESSIONS {
        let session = format!("fleet-{n}");
        let lease = checker.lease_session(&session).unwrap();
        assert!(lease.is_fresh());
        for open in checker.unfinished_calls(&session).unwrap() {
            checker
                .journal_close(&session, &open.call_id, ToolStatus::Unknown)
                .unwrap();
            recovered += 1;
        }
    }
    let figures = measure(&url);
    println!(
        "fleet soak: {seconds} s, {WORKERS} workers, {kills} SIGKILLs, {freezes} freezes past \
         the lease; {} events, {} messages, \
         {} calls ({} closed unknown, {recovered} of them by the final takers), {} leases \
         (epochs) taken; gaps {}, epochs going back {}, calls left open {}",
        figures.events,
        figures.messages,
        figures.calls,
        figures.unknown,
        figures.epochs,
        figures.gaps,
        figures.epochs_back,
        figures.open
    );
    assert!(kills >= MIN_KILLS && freezes >= MIN_FREEZES);
    assert!(figures.events > 50, "{figures:?}");
    assert_eq!(figures.gaps, 0, "{figures:?}");
    assert_eq!(figures.epochs_back, 0, "{figures:?}");
    assert_eq!(figures.open, 0, "{figures:?}");
    assert!(figures.unknown > 0, "no call was interrupted: {figures:?}");
}

#[derive(Debug, Default)]
struct Figures {
    events: i64,
    messages: i64,
    calls: i64,
    unknown: i64,
    epochs: i64,
    gaps: i64,
    epochs_back: i64,
    open: i64,
}

fn measure(url: &str) -> Figures {
    crate::with_client(url, |client| async move {
        let one = |sql: &'static str| {
            let client = &client;
            async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
        };
        Figures {
            events: one("SELECT count(*) FROM clawsmith_events").await,
            messages: one("SELECT count(*) FROM clawsmith_messages").await,
            calls: one("SELECT count(*) FROM clawsmith_journal").await,
            unknown: one("SELECT count(*) FROM clawsmith_journal WHERE status = 'unknown'").await,
            epochs: one("SELECT coalesce(sum(epoch), 0)::bigint FROM clawsmith_leases").await,
            // Per session: as many events and messages as the highest number says, from 1
            // (events) and 0 (messages), and the counters agree.
            gaps: one(
                "SELECT count(*) FROM clawsmith_sessions s WHERE
                   (SELECT count(*) FROM clawsmith_events e WHERE e.session_id = s.id)
                     <> s.next_sequence - 1
                   OR (SELECT coalesce(max(sequence), 0) FROM clawsmith_events e
                       WHERE e.session_id = s.id) <> s.next_sequence - 1
                   OR (SELECT count(*) FROM clawsmith_messages m WHERE m.session_id = s.id)
                     <> s.next_index
                   OR (SELECT coalesce(max(idx), -1) FROM clawsmith_messages m
                       WHERE m.session_id = s.id) <> s.next_index - 1",
            )
            .await,
            epochs_back: one(
                "SELECT count(*) FROM (
                   SELECT epoch, lag(epoch) OVER (PARTITION BY session_id ORDER BY sequence) AS before
                   FROM clawsmith_events) t WHERE epoch < before",
            )
            .await,
            open: one("SELECT count(*) FROM clawsmith_journal WHERE closed_at_ms IS NULL").await,
        }
    })
}
