//! Races, actually raced: a directory swapped for a symlink mid-call, and concurrent creators.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clawsmith_protocol::ToolStatus;
use rustix::fs::{CWD, RenameFlags};
use serde_json::json;

use crate::support::{Fixture, Tools};

/// How long the flipper races; bounds the suite's run time, never asserted on.
const RACE_FOR: Duration = Duration::from_secs(2);

#[test]
fn directory_swapped_for_outside_symlink_never_leaks() {
    let fixture = Fixture::new();
    // Outside: files the workspace operations would hit if they followed the swapped symlink.
    std::fs::write(
        fixture.outside.join("dir/f.txt"),
        "counter OUTSIDE-SECRET\n",
    )
    .unwrap();
    std::fs::write(
        fixture.outside.join("dir/outside-only.txt"),
        "OUTSIDE-SECRET\n",
    )
    .unwrap();
    fixture.write("sub/f.txt", "counter\n");
    // `holder` is the symlink that trades places with the real `sub` on every flip.
    fixture.symlink(fixture.outside.join("dir"), "holder");
    let outside_before = fixture.outside_snapshot();

    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let ws = fixture.ws.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut flips = 0u64;
            let deadline = Instant::now() + RACE_FOR;
            while Instant::now() < deadline {
                let flipped = rustix::fs::renameat_with(
                    CWD,
                    ws.join("sub"),
                    CWD,
                    ws.join("holder"),
                    RenameFlags::EXCHANGE,
                );
                if flipped.is_err() {
                    // The test body failed and removed the tree; stop quietly.
                    break;
                }
                flips += 1;
            }
            stop.store(true, Ordering::SeqCst);
            flips
        })
    };

    let tools = Tools::new(&fixture);
    let (mut succeeded, mut refused, mut calls) = (0u64, 0u64, 0u64);
    let mut round = 0u64;
    while !stop.load(Ordering::SeqCst) {
        round += 1;
        let results = [
            tools.call("read_file", json!({"path": "sub/f.txt"})),
            tools.call("read_file", json!({"path": "sub/inner.txt"})),
            tools.call(
                "write_file",
                json!({"path": format!("sub/new-{round}.txt"), "content": "x"}),
            ),
            tools.call(
                "edit_file",
                json!({"path": "sub/f.txt", "oldText": "counter", "newText": "counter"}),
            ),
            tools.call(
                "delete_file",
                json!({"path": format!("sub/new-{round}.txt")}),
            ),
            tools.call("search_files", json!({"query": "SECRET", "path": "sub"})),
            tools.call("glob_files", json!({"pattern": "sub/*"})),
        ];
        for result in results {
            calls += 1;
            let output = serde_json::to_string(&result).unwrap();
            assert!(!output.contains("OUTSIDE-SECRET"), "leak: {output}");
            assert!(
                !output.contains("outside-only"),
                "leaked an outside name: {output}"
            );
            if result.status() == ToolStatus::Success {
                succeeded += 1;
            } else {
                refused += 1;
            }
        }
    }
    let flips = flipper.join().unwrap();
    assert_eq!(
        fixture.outside_snapshot(),
        outside_before,
        "the outside tree changed"
    );
    assert!(
        fixture.temp_files().is_empty(),
        "{:?}",
        fixture.temp_files()
    );
    // The race really happened: both outcomes were observed many times over.
    assert!(flips > 100, "{flips} flips");
    assert!(
        calls > 1_000 && succeeded > 0 && refused > 0,
        "{calls} calls, {succeeded} ok, {refused} refused"
    );
}

#[test]
fn concurrent_creators_exactly_one_wins() {
    let fixture = Fixture::new();
    let tools = Arc::new(Tools::new(&fixture));
    const WRITERS: usize = 4;
    for round in 0..50 {
        let barrier = Arc::new(Barrier::new(WRITERS + 1));
        let path = format!("race-{round}.txt");
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let tools = tools.clone();
                let barrier = barrier.clone();
                let path = path.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    let content = format!("writer {writer}");
                    let result =
                        tools.call("write_file", json!({"path": path, "content": content}));
                    (result, content)
                })
            })
            .collect();
        // A plain creator outside the tools races too.
        let raw_path = fixture.ws.join(&path);
        barrier.wait();
        let raw = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&raw_path)
            .map(|mut file| std::io::Write::write_all(&mut file, b"raw creator").unwrap())
            .is_ok();
        let mut winners: Vec<String> = Vec::new();
        for writer in writers {
            let (result, content) = writer.join().unwrap();
            match result.status() {
                ToolStatus::Success => winners.push(content),
                _ => assert_eq!(
                    result.content,
                    format!(
                        "Error: File already exists: {path} (write_file only creates new files; use edit_file to change it)"
                    )
                ),
            }
        }
        if raw {
            winners.push("raw creator".to_owned());
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(fixture.read(&path), winners[0].as_bytes());
    }
    assert!(fixture.temp_files().is_empty());
}
