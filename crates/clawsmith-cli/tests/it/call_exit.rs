//! How a `call` process leaves the state database: it exits without closing its connection,
//! so what closing the store does to the files is checked on the files themselves.

use crate::Fixture;

/// The frames of `database`'s write-ahead log that the next process to open it rebuilds its
/// WAL index from: the frames from the start of the log that carry the log header's salt (a
/// log started over writes its first frames under a new salt, and the rebuild stops at the
/// first frame of the old one).
fn frames_the_next_process_reads(database: &std::path::Path) -> usize {
    let mut log = database.as_os_str().to_owned();
    log.push("-wal");
    let bytes = std::fs::read(log).unwrap_or_default();
    if bytes.len() < 32 {
        return 0;
    }
    let page_size = u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let salt = &bytes[16..24];
    bytes[32..]
        .chunks_exact(24 + page_size)
        .take_while(|frame| &frame[8..16] == salt)
        .count()
}

#[test]
fn a_call_leaves_every_record_committed_and_a_long_log_started_over() {
    let f = Fixture::new();
    // A 20 KB file: each call's commit writes its tool message's overflow pages, so the log
    // reaches the close's threshold (128 frames) in a few calls.
    std::fs::write(f.ws().join("big.txt"), "0123456789abcdef\n".repeat(1200)).unwrap();
    let database = f.state().join("clawsmith.db");
    let mut longest = 0;
    let mut calls = 0;
    let mut started_over = false;
    while calls < 200 && !started_over {
        let result = f.call(&["--session", "s"], "read_file", r#"{"path":"big.txt"}"#);
        assert_eq!(result["status"], "success", "{result}");
        calls += 1;
        let frames = frames_the_next_process_reads(&database);
        // The process whose commit left 128 frames or more folded the log and started it over
        // at one frame before it exited; a shorter log is left as it is (no fsync at exit).
        started_over = frames <= 2 && longest > 0;
        assert!(
            started_over || frames > longest,
            "call {calls}: the log went from {longest} to {frames} frames"
        );
        longest = longest.max(frames);
    }
    assert!(
        started_over,
        "the log never started over ({longest} frames)"
    );
    // The log a process before the fold left was short of 128 frames by less than a call's.
    assert!(longest >= 100, "started over at {longest} frames");
    // Every call's records are in the database for the next process.
    let show = f.run(&["--json", "session", "show", "s"], "").json();
    let completed = show["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| event["type"] == "tool.completed")
        .count();
    assert_eq!(completed, calls);
    // And the next call in the same session goes on from there.
    let result = f.call(&["--session", "s"], "read_file", r#"{"path":"a.txt"}"#);
    assert_eq!(result["status"], "success", "{result}");
}
