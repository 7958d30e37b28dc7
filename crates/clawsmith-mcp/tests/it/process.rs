//! `serve_stdio` in its own process (`clawsmith-mcp-fixture serve`, what `clawsmith mcp` runs),
//! driven over real pipes: client disconnects, signals, and a client that never reads.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clawsmith_checkpoint::{CheckpointState, Store};
use clawsmith_protocol::{EventPayload, ToolStatus};
use serde_json::{Value, json};
use tempfile::TempDir;

const FIXTURE: &str = env!("CARGO_BIN_EXE_clawsmith-mcp-fixture");
const SESSION: &str = "mcp-process-test";
/// The harness deadline for anything that waits on the server: a hang fails, never a timing.
const DEADLINE: Duration = Duration::from_secs(120);

/// A `serve` process over a temp workspace and a store file beside it.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    _dir: TempDir,
    workspace: PathBuf,
    database: PathBuf,
}

impl Server {
    #[allow(clippy::disallowed_methods)] // Tests may spawn: the server under test.
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::write(workspace.join("a.txt"), "alpha\n".repeat(3000)).unwrap();
        let database = dir.path().join("clawsmith.db");
        let mut child = std::process::Command::new(FIXTURE)
            .arg("serve")
            .arg(&workspace)
            .arg(&database)
            .arg(SESSION)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            stdin,
            stdout,
            _dir: dir,
            workspace,
            database,
        };
        server.send(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }));
        let answer = server.answer();
        assert_eq!(answer["id"], 1, "{answer}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to end (harness deadline) and says whether it exited cleanly.
    fn wait(&mut self) -> bool {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            assert!(start.elapsed() < DEADLINE, "the server did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for_file(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[allow(clippy::disallowed_methods)] // Tests may spawn: `kill` sends the signal.
fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

#[test]
fn disconnects_and_signals_close_the_running_call_like_a_clean_exit() {
    // How the connection ends: the client closes stdin, or a signal arrives.
    for how in ["eof", "TERM", "HUP", "INT"] {
        let mut server = Server::start();
        let started = server.workspace.join("started");
        // A command that ignores SIGTERM: stopping it takes the core's whole cancel grace, so
        // a server that exits without waiting for its running turn leaves the call open.
        let command = "trap '' TERM; touch started; sleep 60";
        server.send(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": command}},
        }));
        wait_for_file(&started);
        match how {
            "eof" => drop(server.stdin.take()),
            name => signal(server.pid(), name),
        }
        assert!(server.wait(), "{how}: a clean exit");

        let store = Store::open(&server.database).unwrap();
        assert!(
            store.unfinished_calls(SESSION).unwrap().is_empty(),
            "{how}: no journal row left open"
        );
        let events = store.events(SESSION).unwrap();
        let started = events
            .iter()
            .filter(|event| matches!(event.payload, EventPayload::ToolStarted(_)))
            .count();
        let completed: Vec<ToolStatus> = events
            .iter()
            .filter_map(|event| match &event.payload {
                EventPayload::ToolCompleted(done) => Some(done.status),
                _ => None,
            })
            .collect();
        assert_eq!(started, 1, "{how}");
        assert_eq!(completed, [ToolStatus::Cancelled], "{how}");
        assert!(
            events
                .iter()
                .any(|event| matches!(event.payload, EventPayload::TurnCompleted(_))),
            "{how}: the turn finished"
        );
        let checkpoints = store.checkpoints(SESSION).unwrap();
        assert!(
            checkpoints
                .iter()
                .all(|checkpoint| checkpoint.state != CheckpointState::Open),
            "{how}: no open checkpoint: {checkpoints:?}"
        );
    }
}

#[test]
fn a_client_that_never_reads_stalls_the_server_instead_of_growing_it() {
    const REQUESTS: usize = 20_000;
    let mut server = Server::start();
    let mut stdin = server.stdin.take().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&written);
    // Writes every request; blocks as soon as the server stops reading (pipe full).
    let writer = std::thread::spawn(move || {
        for id in 0..REQUESTS {
            let request = json!({
                "jsonrpc": "2.0", "id": id + 10, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "a.txt"}},
            });
            if writeln!(stdin, "{request}").is_err() {
                return;
            }
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    // Wait until the writer is done or its count stops moving (the server stopped reading).
    let start = Instant::now();
    let mut last = usize::MAX;
    let mut unchanged = 0;
    while !writer.is_finished() && unchanged < 20 {
        assert!(start.elapsed() < DEADLINE, "neither stalled nor finished");
        std::thread::sleep(Duration::from_millis(100));
        let now = written.load(Ordering::SeqCst);
        unchanged = if now == last { unchanged + 1 } else { 0 };
        last = now;
    }
    let resident = crate::support::resident_bytes(server.pid());
    let sent = written.load(Ordering::SeqCst);
    assert!(
        sent < REQUESTS,
        "the server read all {REQUESTS} requests nobody will read the answers of"
    );
    assert!(
        resident < 100 * 1024 * 1024,
        "{} MiB resident after {sent} unread requests",
        resident / (1024 * 1024)
    );
    // The server was waiting, not stuck: answers flow again once the client reads.
    for _ in 0..100 {
        let answer = server.answer();
        assert!(answer["result"].is_object(), "{answer}");
    }
    let _ = server.child.kill();
    let _ = writer.join();
}

impl Server {
    /// One `read_file` call with request id `id`: its answer.
    fn read_call(&mut self, id: u64) -> Value {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "a.txt"}},
        }));
        let answer = self.answer();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }
}

/// `clawsmith-mcp-fixture lease` on the server's session: a second writer that fails when it
/// cannot have the lease, as `clawsmith undo` does. Its one line of output, read by a thread.
#[allow(clippy::disallowed_methods)] // Tests may spawn: the second process.
fn lessee(database: &Path) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = std::process::Command::new(FIXTURE)
        .arg("lease")
        .arg(database)
        .arg(SESSION)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stdout = stdout;
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = send.send(line.trim().to_owned());
    });
    (child, receive)
}

fn assert_read(answer: &Value) {
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

#[test]
fn another_process_gets_the_session_between_calls_though_the_server_keeps_its_lease() {
    let mut server = Server::start();
    assert_read(&server.read_call(2));

    // The server is idle after a call: it lets go of the lease, and the second writer (which
    // would fail at once on a busy session) gets it.
    let (mut child, line) = lessee(&server.database);
    assert_eq!(line.recv_timeout(DEADLINE).unwrap(), "leased");
    assert!(child.wait().unwrap().success());
    // The server takes the session again for its next call.
    assert_read(&server.read_call(3));

    // Calls keep coming, never idle: the waiter announced itself, and the server yields the
    // lease at its next call (then waits for it, so every call still answers).
    let (mut child, line) = lessee(&server.database);
    let mut id = 4;
    let got = loop {
        assert_read(&server.read_call(id));
        id += 1;
        match line.try_recv() {
            Ok(got) => break got,
            Err(std::sync::mpsc::TryRecvError::Empty) => {}
            Err(error) => panic!("the second writer ended without a word: {error}"),
        }
    };
    assert_eq!(got, "leased");
    assert!(child.wait().unwrap().success());
    assert_read(&server.read_call(id));

    // Every call of the connection was recorded, once.
    drop(server.stdin.take());
    assert!(server.wait(), "a clean exit");
    let store = Store::open(&server.database).unwrap();
    let completed = store
        .events(SESSION)
        .unwrap()
        .iter()
        .filter(|event| matches!(event.payload, EventPayload::ToolCompleted(_)))
        .count();
    assert_eq!(completed as u64, id - 1);
}
