//! Retention (K5): each limit, keep-last, protected journals, GC with forks, dry runs.

use std::time::Duration;

use clawsmith_checkpoint::{JournalStart, RetentionPolicy, Store, TurnOpening};
use clawsmith_protocol::ToolStatus;
use sha2::Digest;

use crate::support::{DAY_MS, Fixture, ManualClock, turn_started};

const START: u64 = 1_700_000_000_000;

fn clocked() -> (Fixture, ManualClock) {
    let clock = ManualClock::at(START);
    let for_store = clock.clone();
    let fixture =
        Fixture::with_store(move |_| Store::open_in_memory_with_clock(for_store.clock()).unwrap());
    (fixture, clock)
}

/// A finished turn that rewrites `file` with `size` bytes of `fill`.
fn turn(fixture: &Fixture, turn: &str, file: &str, fill: u8, size: usize) {
    fixture
        .store
        .begin_turn("s", turn, TurnOpening::default())
        .unwrap();
    fixture.put(turn, file, &vec![fill; size]);
    fixture.finish(turn);
}

fn no_limits() -> RetentionPolicy {
    RetentionPolicy {
        max_age: Duration::from_secs(u64::MAX / 4_000),
        per_session_bytes: u64::MAX,
        global_bytes: u64::MAX,
        keep_last: 0,
    }
}

/// Something happens in each of `sessions` at `at_ms`: they are in use, so pruning works on
/// their checkpoints one by one instead of removing them whole.
fn keep_active(fixture: &Fixture, sessions: &[&str], at_ms: u64) {
    for session in sessions {
        fixture
            .store
            .append_event(session, turn_started("elsewhere"), at_ms)
            .unwrap();
    }
}

fn turns_left(fixture: &Fixture) -> Vec<String> {
    fixture
        .store
        .checkpoints("s")
        .unwrap()
        .into_iter()
        .map(|c| c.turn_id)
        .collect()
}

#[test]
fn the_defaults_are_the_spec_values() {
    let policy = RetentionPolicy::default();
    assert_eq!(policy.max_age, Duration::from_secs(30 * 86_400));
    assert_eq!(
        (
            policy.per_session_bytes,
            policy.global_bytes,
            policy.keep_last
        ),
        (100 << 20, 1 << 30, 5)
    );
}

#[test]
fn checkpoints_older_than_max_age_go_but_the_newest_five_stay() {
    let (fixture, clock) = clocked();
    for index in 0..8 {
        turn(
            &fixture,
            &format!("t{index}"),
            "f.txt",
            b'a' + index as u8,
            100,
        );
        clock.advance(DAY_MS);
    }
    // Day 8 + 40: everything is older than 30 days; keep-last-5 protects t3..t7.
    let now = clock.now() + 40 * DAY_MS;
    keep_active(&fixture, &["s"], now);
    let policy = RetentionPolicy::default();
    let dry = fixture.store.prune(&policy, now, true).unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.checkpoints_removed, 3);
    assert_eq!(turns_left(&fixture).len(), 8, "a dry run changes nothing");
    let report = fixture.store.prune(&policy, now, false).unwrap();
    assert_eq!(
        (
            report.checkpoints_removed,
            report.blobs_removed,
            report.bytes_freed
        ),
        (dry.checkpoints_removed, dry.blobs_removed, dry.bytes_freed)
    );
    assert_eq!(turns_left(&fixture), ["t3", "t4", "t5", "t6", "t7"]);
    // t0's prior (absent) and t0..t2's contents 'a','b' are unreferenced now: 'c' is t3's prior.
    assert_eq!((report.blobs_removed, report.bytes_freed), (2, 200));
}

#[test]
fn young_checkpoints_survive_the_age_limit() {
    let (fixture, clock) = clocked();
    for index in 0..8 {
        turn(
            &fixture,
            &format!("t{index}"),
            "f.txt",
            b'a' + index as u8,
            10,
        );
    }
    let policy = RetentionPolicy {
        keep_last: 0,
        ..RetentionPolicy::default()
    };
    let report = fixture
        .store
        .prune(&policy, clock.now() + 29 * DAY_MS, false)
        .unwrap();
    assert_eq!(report.checkpoints_removed, 0);
}

#[test]
fn the_per_session_quota_removes_oldest_first() {
    let (fixture, _clock) = clocked();
    fixture.store.create_session("other", "/elsewhere").unwrap();
    for index in 0..6 {
        // Each turn creates a file of 1000 distinct bytes (nothing before).
        turn(
            &fixture,
            &format!("t{index}"),
            &format!("f{index}.txt"),
            b'a' + index,
            1000,
        );
    }
    let policy = RetentionPolicy {
        per_session_bytes: 7_000,
        keep_last: 1,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, START, false).unwrap();
    // 6 turns × 1000 bytes (created files: 0 before + 1000 after) = 6000 ≤ 7000: nothing goes.
    assert_eq!(report.checkpoints_removed, 0);
    let policy = RetentionPolicy {
        per_session_bytes: 2_500,
        keep_last: 1,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, START, false).unwrap();
    assert_eq!(report.checkpoints_removed, 4);
    assert_eq!(turns_left(&fixture), ["t4", "t5"]);
}

#[test]
fn keep_last_wins_over_the_quota() {
    let (fixture, _clock) = clocked();
    for index in 0..6 {
        turn(
            &fixture,
            &format!("t{index}"),
            &format!("f{index}.txt"),
            b'x',
            1000,
        );
    }
    let policy = RetentionPolicy {
        per_session_bytes: 0,
        global_bytes: 0,
        ..no_limits()
    };
    let policy = RetentionPolicy {
        keep_last: 5,
        ..policy
    };
    fixture.store.prune(&policy, START, false).unwrap();
    assert_eq!(turns_left(&fixture), ["t1", "t2", "t3", "t4", "t5"]);
}

#[test]
fn the_global_quota_removes_the_globally_oldest() {
    let (fixture, clock) = clocked();
    fixture
        .store
        .create_session("s2", &fixture.root().display().to_string())
        .unwrap();
    turn(&fixture, "a1", "a1.txt", b'1', 1000);
    clock.advance(10);
    fixture
        .store
        .begin_turn("s2", "b1", TurnOpening::default())
        .unwrap();
    fixture
        .store
        .record_before("s2", "b1", "b1.txt", None)
        .unwrap();
    fixture
        .store
        .record_after("s2", "b1", "b1.txt", Some(([7; 32], 1000, 0o644)))
        .unwrap();
    clock.advance(10);
    turn(&fixture, "a2", "a2.txt", b'2', 1000);
    let policy = RetentionPolicy {
        global_bytes: 2_000,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, clock.now(), false).unwrap();
    assert_eq!(
        report.checkpoints,
        vec![("s".to_string(), "a1".to_string())]
    );
    // b1 is open (its turn never finished): protected even though it is now the oldest.
    let policy = RetentionPolicy {
        global_bytes: 0,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, clock.now(), false).unwrap();
    assert_eq!(
        report.checkpoints,
        vec![("s".to_string(), "a2".to_string())]
    );
    assert_eq!(fixture.store.checkpoints("s2").unwrap().len(), 1);
}

#[test]
fn journals_of_unfinished_turns_are_protected() {
    let (fixture, clock) = clocked();
    let start = |turn: &str, call: &str| JournalStart {
        session_id: "s".into(),
        turn_id: turn.into(),
        call_id: call.into(),
        tool_name: "run_command".into(),
        args_json: "{}".into(),
    };
    turn(&fixture, "done", "d.txt", b'd', 10);
    fixture
        .store
        .journal_start(&start("done", "closed"))
        .unwrap();
    fixture
        .store
        .journal_close("s", "closed", ToolStatus::Success)
        .unwrap();
    fixture
        .store
        .journal_start(&start("done", "never-closed"))
        .unwrap();
    fixture
        .store
        .begin_turn("s", "running", TurnOpening::default())
        .unwrap();
    fixture
        .store
        .journal_start(&start("running", "r1"))
        .unwrap();
    fixture
        .store
        .journal_close("s", "r1", ToolStatus::Success)
        .unwrap();
    let policy = RetentionPolicy {
        keep_last: 0,
        ..RetentionPolicy::default()
    };
    let report = fixture
        .store
        .prune(&policy, clock.now() + 365 * DAY_MS, false)
        .unwrap();
    assert_eq!(report.checkpoints_removed, 1, "only the finished turn");
    assert_eq!(
        report.journal_entries_removed, 1,
        "only the closed call of the finished turn"
    );
    let left: Vec<String> = fixture
        .store
        .journal("s")
        .unwrap()
        .into_iter()
        .map(|e| e.call_id)
        .collect();
    assert_eq!(left, ["never-closed", "r1"]);
    assert_eq!(turns_left(&fixture), ["running"]);
}

#[test]
fn gc_keeps_blobs_shared_with_a_fork_until_no_one_refers_to_them() {
    let (fixture, clock) = clocked();
    fixture.write_initial("shared.txt", b"original content", 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "shared.txt", b"agent content");
    fixture.finish("t1");
    fixture.store.fork_session("s", "child").unwrap();
    let later = clock.now() + 31 * DAY_MS;
    keep_active(&fixture, &["s", "child"], later);
    let child_checkpoints = fixture.store.checkpoints("child").unwrap();
    assert_eq!(
        child_checkpoints[0].created_at_ms, START,
        "the fork keeps the parent's timestamps"
    );
    let store = &fixture.store;
    // The parent moves on; keep_last 1 then protects only its new turn, the child's copy of t1
    // is the child's newest restore point.
    store.begin_turn("s", "p2", TurnOpening::default()).unwrap();
    store.finish_turn("s", "p2", &fixture.workspace).unwrap();
    let keep_one = RetentionPolicy {
        keep_last: 1,
        ..RetentionPolicy::default()
    };
    let report = store.prune(&keep_one, later, false).unwrap();
    assert_eq!(
        report.checkpoints,
        vec![("s".to_string(), "t1".to_string())]
    );
    assert_eq!(
        (report.blobs_removed, report.bytes_freed),
        (0, 0),
        "the fork still refers to them"
    );
    let diff = store.diff("child", "t1", "shared.txt").unwrap().unwrap();
    assert!(diff.unified.contains("+agent content"), "{}", diff.unified);
    // Once the child's copy goes too, the blobs are collected.
    let keep_none = RetentionPolicy {
        keep_last: 0,
        ..RetentionPolicy::default()
    };
    let report = store.prune(&keep_none, later, false).unwrap();
    assert_eq!(
        report.checkpoints,
        vec![
            ("child".to_string(), "t1".to_string()),
            ("s".to_string(), "p2".to_string())
        ]
    );
    assert_eq!(
        report.bytes_freed,
        ("original content".len() + "agent content".len()) as u64
    );
}

#[test]
fn gc_keeps_artifact_blobs() {
    let (fixture, clock) = clocked();
    let reference = fixture.store.put_artifact("s", b"artifact body").unwrap();
    fixture.write_initial("f.txt", b"artifact body", 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.delete("t1", "f.txt");
    fixture.finish("t1");
    let policy = RetentionPolicy {
        keep_last: 0,
        ..RetentionPolicy::default()
    };
    let later = clock.now() + 31 * DAY_MS;
    keep_active(&fixture, &["s"], later);
    let report = fixture.store.prune(&policy, later, false).unwrap();
    assert_eq!((report.checkpoints_removed, report.blobs_removed), (1, 0));
    assert_eq!(
        fixture
            .store
            .read_artifact("s", &reference.artifact_id)
            .unwrap()
            .unwrap(),
        b"artifact body"
    );
}

/// What a session looks like when pruning meets it, and whether it must survive.
struct Aged {
    what: &'static str,
    setup: fn(&Fixture, &str),
    survives: bool,
}

#[test]
fn expired_sessions_go_whole_unless_something_still_holds_them() {
    let cases = [
        Aged {
            what: "one old turn (a `call` or an MCP connection)",
            setup: |_, _| {},
            survives: false,
        },
        Aged {
            what: "an event within the age limit",
            setup: |fixture, id| {
                fixture
                    .store
                    .append_event(id, turn_started("late"), START + 50 * DAY_MS)
                    .unwrap();
            },
            survives: true,
        },
        Aged {
            what: "an open turn",
            setup: |fixture, id| {
                drop(
                    fixture
                        .store
                        .begin_turn(id, "open", TurnOpening::default())
                        .unwrap(),
                )
            },
            survives: true,
        },
        Aged {
            what: "an open journal entry",
            setup: |fixture, id| {
                fixture
                    .store
                    .journal_start(&JournalStart {
                        session_id: id.into(),
                        turn_id: "t".into(),
                        call_id: "c".into(),
                        tool_name: "write_file".into(),
                        args_json: "{}".into(),
                    })
                    .unwrap();
            },
            survives: true,
        },
    ];
    for case in cases {
        let (fixture, clock) = clocked();
        let store = &fixture.store;
        store.create_session("old", "/w").unwrap();
        store
            .append_message("old", &crate::support::user("hello"))
            .unwrap();
        store
            .append_event("old", turn_started("t1"), START)
            .unwrap();
        store
            .begin_turn("old", "t1", TurnOpening::default())
            .unwrap();
        store.finish_turn("old", "t1", &fixture.workspace).unwrap();
        store.put_artifact("old", b"a big output").unwrap();
        (case.setup)(&fixture, "old");
        let now = clock.now() + 60 * DAY_MS;
        let report = store
            .prune(&RetentionPolicy::default(), now, false)
            .unwrap();
        let survived = store.get_session("old").unwrap().is_some();
        assert_eq!(survived, case.survives, "{}: {report:?}", case.what);
        if !case.survives {
            assert!(
                report.sessions.contains(&"old".to_string()),
                "{}",
                case.what
            );
            assert!(
                store.checkpoints("old").is_err() || store.checkpoints("old").unwrap().is_empty()
            );
        }
    }
}

#[test]
fn a_session_in_use_by_a_writer_is_not_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::at(START);
    let store = Store::open_with_clock(dir.path().join("db"), clock.clock()).unwrap();
    store.create_session("busy", "/w").unwrap();
    store.create_session("idle", "/w").unwrap();
    let lease = store.lease_session("busy").unwrap();
    let now = START + 60 * DAY_MS;
    let report = store
        .prune(&RetentionPolicy::default(), now, false)
        .unwrap();
    assert_eq!(report.sessions, ["idle"]);
    drop(lease);
    let report = store
        .prune(&RetentionPolicy::default(), now, false)
        .unwrap();
    assert_eq!(report.sessions, ["busy"]);
    // Their lock files went with them: `locks/` does not grow with every session ever made.
    let locks = dir.path().join(clawsmith_checkpoint::LOCK_DIR);
    assert_eq!(std::fs::read_dir(&locks).unwrap().count(), 0);
    // A session of the same name later takes a new lock file.
    store.create_session("busy", "/w").unwrap();
    assert!(store.lease_session("busy").unwrap().is_fresh());
}

#[test]
fn sixty_days_of_one_call_sessions_stay_within_thirty_days_of_them() {
    let clock = ManualClock::at(START);
    let store = Store::open_in_memory_with_clock(clock.clock()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = clawsmith_fs::Workspace::open(dir.path()).unwrap();
    let per_day = 10;
    let mut most_sessions = 0;
    for day in 0..60u64 {
        for index in 0..per_day {
            // What one `call` or MCP connection leaves: a session, its messages, events and an
            // artifact with content of its own (a blob).
            let id = format!("d{day}-{index}");
            store.create_session(&id, "/w").unwrap();
            store
                .append_message(&id, &crate::support::user("read it"))
                .unwrap();
            store
                .append_event(&id, turn_started("t"), clock.now())
                .unwrap();
            store.begin_turn(&id, "t", TurnOpening::default()).unwrap();
            store.put_artifact(&id, id.repeat(500).as_bytes()).unwrap();
            store.finish_turn(&id, "t", &workspace).unwrap();
        }
        let report = store
            .prune(&RetentionPolicy::default(), clock.now(), false)
            .unwrap();
        let sessions = store.list_sessions().unwrap().len();
        most_sessions = most_sessions.max(sessions);
        if day >= 31 {
            assert_eq!(report.sessions_removed, per_day as u64, "day {day}");
            // Their artifacts' content is collected the same day.
            assert_eq!(report.blobs_removed, per_day as u64, "day {day}");
        }
        clock.advance(DAY_MS);
    }
    // Thirty days of sessions (and the day being written), never the whole sixty.
    assert_eq!(most_sessions, 31 * per_day);
    let oldest = store.list_sessions().unwrap().last().unwrap().id.clone();
    assert_eq!(oldest, "d29-0");
}

#[test]
fn a_content_counts_once_however_many_checkpoints_share_it() {
    let (fixture, clock) = clocked();
    fixture
        .store
        .create_session("s2", &fixture.root().display().to_string())
        .unwrap();
    // The same 1000 bytes written in three turns of "s" and once in "s2".
    for index in 0..3 {
        turn(
            &fixture,
            &format!("t{index}"),
            &format!("f{index}.txt"),
            b'z',
            1000,
        );
        clock.advance(10);
    }
    // "s2" records the same content (as a fork's turn would): same hash, stored once.
    let hash: [u8; 32] = sha2::Sha256::digest([b'z'; 1000]).into();
    fixture
        .store
        .begin_turn("s2", "u0", TurnOpening::default())
        .unwrap();
    fixture
        .store
        .record_before("s2", "u0", "g.txt", None)
        .unwrap();
    fixture
        .store
        .record_after("s2", "u0", "g.txt", Some((hash, 1000, 0o644)))
        .unwrap();
    keep_active(&fixture, &["s", "s2"], clock.now());
    // Counted once: 1000 bytes in each session and in the store, under every quota here.
    let policy = RetentionPolicy {
        per_session_bytes: 1_500,
        global_bytes: 1_500,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, clock.now(), true).unwrap();
    assert_eq!(report.checkpoints_removed, 0, "{report:?}");
    // Below the one content's size, the oldest go first, and the content stops counting only
    // once no checkpoint names it.
    let policy = RetentionPolicy {
        global_bytes: 500,
        ..no_limits()
    };
    let report = fixture.store.prune(&policy, clock.now(), false).unwrap();
    // u0 is open (its turn never finished) and keeps naming the content: everything else goes.
    assert_eq!(report.checkpoints_removed, 3, "{report:?}");
    assert!(turns_left(&fixture).is_empty());
}
