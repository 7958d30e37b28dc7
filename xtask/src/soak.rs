//! `cargo xtask soak [--minutes N] [--seed S] [--binary PATH] [--keep]`: the kill -9 soak.
//!
//! A driver runs random turns (writes, edits, renames, deletes, reads, commands) through the real
//! release `clawsmith` binary against a scratch workspace and state dir, and kills the process with
//! SIGKILL at random moments — during turns and during undos. After every run it checks:
//!
//! - **no partial file**: the tree is exactly the tree after some prefix of the turn's calls (each
//!   write is atomic and the writes of a turn run in order), comparing every byte;
//! - **every started call closed**: after a killed turn, a recovery run (a `glob_files` call in
//!   the session) must close it; `session show` must then number events 1..n without a gap, close
//!   every `tool.started` with a `tool.completed`, and answer every assistant tool call with
//!   exactly one tool message;
//! - **undo still works**: now and then the newest turn is undone (`undo files`); it must succeed,
//!   or — only for a killed turn — report conflicts on paths that turn touched; after `undone` the
//!   tree must be the tree before the turn. Undos are killed too; the next undo finishes the
//!   interrupted restore, and the tree must again be the tree before the turn;
//! - **the database is sound**: `PRAGMA integrity_check` (with the `sqlite3` CLI) answers `ok`.
//!
//! It prints counts (turns, kills, recoveries, undos, violations) and fails when a violation was
//! seen. Leftover temp files from writes killed mid-way are counted and reported (they never
//! replace a file), not treated as violations.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The workspace's files: path → content. Directories are not modelled.
type Tree = BTreeMap<String, Vec<u8>>;

const PATHS: &[&str] = &[
    "f0.txt",
    "f1.txt",
    "f2.txt",
    "f3.txt",
    "f4.txt",
    "d/f5.txt",
    "d/f6.txt",
    "d/e/f7.txt",
];
/// Filler lines per file: big enough (~40 KiB) that a torn write would show.
const FILLER_LINES: usize = 1200;
/// A session per this many turns keeps `session show` cheap.
const TURNS_PER_SESSION: u64 = 40;
/// Longest a single run may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

struct Options {
    minutes: f64,
    seed: u64,
    binary: Option<PathBuf>,
    keep: bool,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options {
        minutes: 2.0,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
        binary: None,
        keep: false,
    };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = || iter.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--minutes" => options.minutes = value()?.parse().context("--minutes")?,
            "--seed" => options.seed = value()?.parse().context("--seed")?,
            "--binary" => options.binary = Some(PathBuf::from(value()?)),
            "--keep" => options.keep = true,
            other => bail!(
                "unknown soak option {other:?}; usage: soak [--minutes N] [--seed S] [--binary PATH] [--keep]"
            ),
        }
    }
    Ok(options)
}

/// xorshift64*: reproducible from `--seed`, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len() as u64) as usize])
        }
    }
}

#[derive(Default, Debug)]
struct Counts {
    turns: u64,
    turns_completed: u64,
    kills: u64,
    kills_during_turns: u64,
    kills_during_undo: u64,
    recoveries: u64,
    undos: u64,
    undo_conflicts: u64,
    integrity_checks: u64,
    leftover_temp_files: u64,
    violations: u64,
}

struct Soak {
    binary: PathBuf,
    ws: PathBuf,
    state: PathBuf,
    rng: Rng,
    counts: Counts,
    violations: Vec<String>,
    generation: u64,
    /// Typical duration of a completed turn, to aim the kills.
    typical_turn: Duration,
    known_turns: HashSet<String>,
}

struct RunOutcome {
    killed: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let options = parse(args)?;
    let binary = match options.binary {
        Some(binary) => binary,
        None => build_binary(root)?,
    };
    ensure_sqlite3()?;
    let base = std::env::temp_dir().join(format!("clawsmith-soak-{}", std::process::id()));
    let ws = base.join("ws");
    let state = base.join("state");
    std::fs::create_dir_all(ws.join("d/e"))
        .with_context(|| format!("creating {}", ws.display()))?;
    std::fs::create_dir_all(&state)?;
    println!(
        "soak: {} minute(s), seed {}, binary {}, scratch {}",
        options.minutes,
        options.seed,
        binary.display(),
        base.display()
    );
    let mut soak = Soak {
        binary,
        ws,
        state,
        rng: Rng(options.seed | 1),
        counts: Counts::default(),
        violations: Vec::new(),
        generation: 0,
        typical_turn: Duration::from_millis(60),
        known_turns: HashSet::new(),
    };
    let deadline = Instant::now() + Duration::from_secs_f64(options.minutes * 60.0);
    let mut last_report = Instant::now();
    while Instant::now() < deadline {
        soak.iteration()?;
        if soak.counts.turns.is_multiple_of(25) {
            soak.integrity_check()?;
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            println!("soak: {:?}", soak.counts);
            last_report = Instant::now();
        }
    }
    soak.integrity_check()?;
    let counts = &soak.counts;
    println!(
        "soak done: turns {} (completed {}), kills {} (turns {}, undos {}), recoveries {}, undos {} (conflicts {}), integrity checks {}, leftover temp files {}, violations {}",
        counts.turns,
        counts.turns_completed,
        counts.kills,
        counts.kills_during_turns,
        counts.kills_during_undo,
        counts.recoveries,
        counts.undos,
        counts.undo_conflicts,
        counts.integrity_checks,
        counts.leftover_temp_files,
        counts.violations
    );
    for violation in soak.violations.iter().take(20) {
        println!("VIOLATION: {violation}");
    }
    if counts.violations > 0 {
        bail!(
            "{} violation(s); state kept in {}",
            counts.violations,
            base.display()
        );
    }
    if !options.keep {
        let _ = std::fs::remove_dir_all(&base);
    }
    Ok(())
}

fn build_binary(root: &Path) -> Result<PathBuf> {
    println!("==> cargo build --release -p clawsmith-cli");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .current_dir(root)
        .args(["build", "--release", "-p", "clawsmith-cli"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("building the release binary failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target = if target.is_absolute() {
        target
    } else {
        root.join(target)
    };
    Ok(target.join("release/clawsmith"))
}

fn ensure_sqlite3() -> Result<()> {
    let present = |_: ()| {
        Command::new("sqlite3")
            .arg("-version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present(()) {
        return Ok(());
    }
    println!("==> sqlite3 is missing; trying apt-get install -y sqlite3");
    let _ = Command::new("apt-get")
        .args(["install", "-y", "sqlite3"])
        .status();
    if present(()) {
        return Ok(());
    }
    bail!("the soak checks the database with the sqlite3 CLI; install it (apt-get install sqlite3)")
}

/// Content of generation `generation`: a header line the edits rewrite, then filler.
fn content(generation: u64) -> Vec<u8> {
    let mut text = format!("header {generation}\n");
    for line in 0..FILLER_LINES {
        text.push_str(&format!(
            "filler {generation} line {line:04} ..............\n"
        ));
    }
    text.into_bytes()
}

fn header_of(content: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(content).ok()?;
    text.lines().next().map(str::to_owned)
}

/// A planned call and the tree after it (when it succeeds).
struct Planned {
    call: Value,
    touched: Vec<String>,
}

impl Soak {
    fn session(&self) -> String {
        format!("soak-{}", self.counts.turns / TURNS_PER_SESSION)
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// Random calls over `tree`; returns them with the tree after each prefix.
    fn plan_turn(&mut self, tree: &Tree) -> (Vec<Planned>, Vec<Tree>) {
        let mut snapshots = vec![tree.clone()];
        let mut current = tree.clone();
        let mut calls = Vec::new();
        let mut seen = HashSet::new();
        let count = 1 + self.rng.below(5);
        for index in 0..count {
            let id = format!("c{}-{index}", self.counts.turns);
            let present: Vec<String> = current.keys().cloned().collect();
            let absent: Vec<String> = PATHS
                .iter()
                .map(|p| (*p).to_owned())
                .filter(|p| !current.contains_key(p))
                .collect();
            let choice = self.rng.below(100);
            let planned = if choice < 30 || present.is_empty() {
                let Some(path) = self.rng.pick(&absent).cloned() else {
                    continue;
                };
                let body = content(self.next_generation());
                current.insert(path.clone(), body.clone());
                Planned {
                    call: json!({"id": id, "name": "write_file", "arguments": json!({"path": path, "content": String::from_utf8_lossy(&body)}).to_string()}),
                    touched: vec![path],
                }
            } else if choice < 60 {
                let path = self.rng.pick(&present).cloned().unwrap_or_default();
                let old = current.get(&path).cloned().unwrap_or_default();
                let Some(header) = header_of(&old) else {
                    continue;
                };
                let replacement = format!("header {}", self.next_generation());
                let new = String::from_utf8_lossy(&old).replacen(&header, &replacement, 1);
                current.insert(path.clone(), new.into_bytes());
                Planned {
                    call: json!({"id": id, "name": "edit_file", "arguments": json!({"path": path, "oldText": header, "newText": replacement}).to_string()}),
                    touched: vec![path],
                }
            } else if choice < 72 {
                let from = self.rng.pick(&present).cloned().unwrap_or_default();
                let Some(to) = self.rng.pick(&absent).cloned() else {
                    continue;
                };
                if let Some(body) = current.remove(&from) {
                    current.insert(to.clone(), body);
                }
                Planned {
                    call: json!({"id": id, "name": "rename_file", "arguments": json!({"from": from, "to": to}).to_string()}),
                    touched: vec![from, to],
                }
            } else if choice < 82 {
                let path = self.rng.pick(&present).cloned().unwrap_or_default();
                current.remove(&path);
                Planned {
                    call: json!({"id": id, "name": "delete_file", "arguments": json!({"path": path}).to_string()}),
                    touched: vec![path],
                }
            } else if choice < 92 {
                Planned {
                    call: json!({"id": id, "name": "run_command", "arguments": json!({"command": "echo soak; sleep 0.02; echo done"}).to_string()}),
                    touched: Vec::new(),
                }
            } else {
                let path = self.rng.pick(&present).cloned().unwrap_or_default();
                Planned {
                    call: json!({"id": id, "name": "read_file", "arguments": json!({"path": path}).to_string()}),
                    touched: Vec::new(),
                }
            };
            // The pipeline refuses a call identical to an earlier one of the same turn (name and
            // arguments); plan only calls it will run.
            let key = planned.call.to_string().replacen(&id, "", 1);
            if !seen.insert(key) {
                current = snapshots[snapshots.len() - 1].clone();
                continue;
            }
            calls.push(planned);
            snapshots.push(current.clone());
        }
        (calls, snapshots)
    }

    fn violation(&mut self, text: String) {
        eprintln!("VIOLATION: {text}");
        self.counts.violations += 1;
        self.violations.push(text);
    }

    /// Runs the binary; with `kill_after`, SIGKILLs it then if it is still running.
    fn run(&self, args: &[&str], stdin: &str, kill_after: Option<Duration>) -> Result<RunOutcome> {
        let mut child = Command::new(&self.binary)
            .arg("--state-dir")
            .arg(&self.state)
            .args(args)
            .env_remove("CLAWSMITH_STATE_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning {}", self.binary.display()))?;
        if let Some(mut input) = child.stdin.take() {
            // A killed child may have closed stdin already.
            let _ = input.write_all(stdin.as_bytes());
        }
        // Drain the pipes on threads so a full pipe never blocks the child.
        let mut stdout = child.stdout.take().context("stdout")?;
        let mut stderr = child.stderr.take().context("stderr")?;
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let started = Instant::now();
        let mut killed = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            let elapsed = started.elapsed();
            if kill_after.is_some_and(|after| elapsed >= after) || elapsed > RUN_TIMEOUT {
                // `Child::kill` is SIGKILL on Unix.
                child.kill()?;
                killed = kill_after.is_some();
                let status = child.wait()?;
                if elapsed > RUN_TIMEOUT && !killed {
                    bail!("clawsmith {args:?} hung for {RUN_TIMEOUT:?}");
                }
                break status;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        Ok(RunOutcome {
            killed,
            code: status.code(),
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })
    }

    /// The workspace as files (temp leftovers counted and left out).
    fn read_tree(&mut self) -> Result<Tree> {
        let mut tree = Tree::new();
        let mut stack = vec![self.ws.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let path = entry.path();
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    stack.push(path);
                    continue;
                }
                let relative = path.strip_prefix(&self.ws)?.to_string_lossy().into_owned();
                if relative.contains(".clawsmith-tmp-") {
                    self.counts.leftover_temp_files += 1;
                    std::fs::remove_file(&path)?;
                    continue;
                }
                tree.insert(relative, std::fs::read(&path)?);
            }
        }
        Ok(tree)
    }

    fn describe(tree: &Tree) -> String {
        tree.iter()
            .map(|(path, body)| format!("{path}={:?}", header_of(body)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn iteration(&mut self) -> Result<()> {
        let session = self.session();
        let before = self.read_tree()?;
        let (planned, snapshots) = self.plan_turn(&before);
        if planned.is_empty() {
            return Ok(());
        }
        let calls: Vec<Value> = planned.iter().map(|p| p.call.clone()).collect();
        let touched: BTreeSet<String> = planned.iter().flat_map(|p| p.touched.clone()).collect();
        let kill = self.rng.chance(45);
        let kill_after = kill.then(|| {
            let span = (self.typical_turn.as_micros() as u64 * 3 / 2).max(1000);
            Duration::from_micros(self.rng.below(span))
        });
        let ws = self.ws.display().to_string();
        let args = [
            "turn",
            "--workspace",
            &ws,
            "--mode",
            "full",
            "--sandbox",
            "best-effort",
            "--session",
            &session,
        ];
        let started = Instant::now();
        let outcome = self.run(&args, &Value::Array(calls).to_string(), kill_after)?;
        self.counts.turns += 1;
        let after = self.read_tree()?;
        if !snapshots.contains(&after) {
            self.violation(format!(
                "turn {} (killed: {}): the tree matches no prefix of the turn's calls: {}",
                self.counts.turns,
                outcome.killed,
                Self::describe(&after)
            ));
        }
        let mut target = None;
        if outcome.killed {
            self.counts.kills += 1;
            self.counts.kills_during_turns += 1;
            // The killed turn's checkpoint (if it got that far) is the newest one not seen yet.
            target = self.register_turns(&session)?;
            self.recover(&session)?;
            // The recovery run is a turn of its own: remember it so it is never taken for a
            // killed one.
            self.register_turns(&session)?;
        } else if outcome.code == Some(0) {
            self.counts.turns_completed += 1;
            let elapsed = started.elapsed();
            self.typical_turn = (self.typical_turn * 7 + elapsed) / 8;
            let last: Value = outcome
                .stdout
                .lines()
                .last()
                .and_then(|line| serde_json::from_str(line).ok())
                .unwrap_or(Value::Null);
            let results = last["results"].as_array().map_or(0, Vec::len);
            if results != planned.len() {
                self.violation(format!(
                    "turn {}: {} result(s) for {} call(s): {}",
                    self.counts.turns,
                    results,
                    planned.len(),
                    outcome.stdout.lines().last().unwrap_or_default()
                ));
            }
            let all_success = last["results"]
                .as_array()
                .is_some_and(|list| list.iter().all(|r| r["result"]["status"] == "success"));
            if all_success && after != snapshots[snapshots.len() - 1] {
                self.violation(format!(
                    "turn {}: every call succeeded but the tree is not the planned one",
                    self.counts.turns
                ));
            }
            target = last["turnId"].as_str().map(str::to_owned);
            if let Some(id) = &target {
                self.known_turns.insert(id.clone());
            }
        } else {
            self.violation(format!(
                "turn {} exited {:?}: {}",
                self.counts.turns, outcome.code, outcome.stderr
            ));
        }
        self.check_session(&session)?;
        if let Some(turn) = target
            && self.rng.chance(25)
        {
            self.undo_turn(&session, &turn, outcome.killed, &before, &touched)?;
        }
        Ok(())
    }

    /// Lists the session's checkpoints, remembers them all, and returns the newest one if it was
    /// not known before.
    fn register_turns(&mut self, session: &str) -> Result<Option<String>> {
        let list = self.run(&["--json", "undo", "list", "--session", session], "", None)?;
        if list.code != Some(0) {
            return Ok(None);
        }
        let listed: Value = serde_json::from_str(list.stdout.trim()).unwrap_or(Value::Null);
        let ids: Vec<String> = listed["checkpoints"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|c| c["turnId"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let newest = ids
            .first()
            .filter(|id| !self.known_turns.contains(*id))
            .cloned();
        self.known_turns.extend(ids);
        Ok(newest)
    }

    /// Opens the session again (a read-only call), which closes what the kill left open.
    fn recover(&mut self, session: &str) -> Result<()> {
        let ws = self.ws.display().to_string();
        let outcome = self.run(
            &[
                "call",
                "--workspace",
                &ws,
                "--mode",
                "full",
                "--session",
                session,
                "glob_files",
                r#"{"pattern":"**/*"}"#,
            ],
            "",
            None,
        )?;
        let status = serde_json::from_str::<Value>(outcome.stdout.trim())
            .map(|v| v["status"].clone())
            .unwrap_or(Value::Null);
        if outcome.code != Some(0) || status != "success" {
            self.violation(format!(
                "recovery run in {session} failed ({:?}): {} {}",
                outcome.code, outcome.stdout, outcome.stderr
            ));
        } else {
            self.counts.recoveries += 1;
        }
        Ok(())
    }

    /// Events gap-free, every started call completed, every tool call answered once.
    fn check_session(&mut self, session: &str) -> Result<()> {
        let outcome = self.run(&["--json", "session", "show", session], "", None)?;
        if outcome.code != Some(0) {
            // A turn killed before it created the session leaves nothing to show.
            if outcome.stderr.contains("no session") || outcome.stderr.contains("unknown session") {
                return Ok(());
            }
            self.violation(format!("session show {session}: {}", outcome.stderr));
            return Ok(());
        }
        let shown: Value = match serde_json::from_str(outcome.stdout.trim()) {
            Ok(shown) => shown,
            Err(error) => {
                self.violation(format!("session show {session}: bad JSON: {error}"));
                return Ok(());
            }
        };
        let empty = Vec::new();
        let events = shown["events"].as_array().unwrap_or(&empty);
        let mut problems = Vec::new();
        let mut started = BTreeSet::new();
        let mut completed = BTreeSet::new();
        for (index, event) in events.iter().enumerate() {
            if event["sequence"] != index as u64 + 1 {
                problems.push(format!("event {index} has sequence {}", event["sequence"]));
                break;
            }
            let key = format!("{}/{}", event["turnId"], event["toolCallId"]);
            match event["type"].as_str() {
                Some("tool.started") => {
                    started.insert(key);
                }
                Some("tool.completed") if !completed.insert(key.clone()) => {
                    problems.push(format!("{key} completed twice"));
                }
                _ => {}
            }
        }
        for open in started.difference(&completed) {
            problems.push(format!("{open} started but never completed"));
        }
        let messages = shown["messages"].as_array().unwrap_or(&empty);
        let mut asked: BTreeMap<String, i64> = BTreeMap::new();
        for message in messages {
            if let Some(calls) = message["toolCalls"].as_array() {
                for call in calls {
                    *asked.entry(call["id"].to_string()).or_default() += 1;
                }
            }
            if message["role"] == "tool" {
                *asked.entry(message["toolCallId"].to_string()).or_default() -= 1;
            }
        }
        for (id, owed) in asked {
            if owed != 0 {
                problems.push(format!(
                    "tool call {id} has {owed} result(s) missing (or extra)"
                ));
            }
        }
        if !problems.is_empty() {
            self.violation(format!("session {session}: {}", problems.join("; ")));
        }
        Ok(())
    }

    /// Undoes `turn` (the one just run, so the newest with file changes) and checks the tree.
    fn undo_turn(
        &mut self,
        session: &str,
        turn: &str,
        killed: bool,
        before: &Tree,
        touched: &BTreeSet<String>,
    ) -> Result<()> {
        let ws = self.ws.display().to_string();
        let args = [
            "--json",
            "undo",
            "files",
            turn,
            "--session",
            session,
            "--workspace",
            &ws,
        ];
        let kill_after = self
            .rng
            .chance(30)
            .then(|| Duration::from_micros(self.rng.below(40_000)));
        let first = self.run(&args, "", kill_after)?;
        let outcome = if first.killed {
            self.counts.kills += 1;
            self.counts.kills_during_undo += 1;
            // The next undo finishes the interrupted restore first.
            self.run(&args, "", None)?
        } else {
            first
        };
        self.counts.undos += 1;
        let answer: Value = serde_json::from_str(outcome.stdout.trim()).unwrap_or(Value::Null);
        let tree = self.read_tree()?;
        match answer["outcome"].as_str() {
            Some("undone") | Some("already_undone") => {
                if tree != *before {
                    self.violation(format!(
                        "undo of {turn} (turn killed: {killed}): the tree is not the tree before the turn: {} vs {}",
                        Self::describe(&tree),
                        Self::describe(before)
                    ));
                }
            }
            Some("conflicts") => {
                self.counts.undo_conflicts += 1;
                let paths: Vec<String> = answer["conflicts"]
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .map(|c| c["path"].as_str().unwrap_or_default().to_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                let foreign: Vec<&String> =
                    paths.iter().filter(|p| !touched.contains(*p)).collect();
                if !killed || !foreign.is_empty() {
                    self.violation(format!(
                        "undo of {turn} (turn killed: {killed}) reported conflicts {paths:?}"
                    ));
                }
            }
            _ => self.violation(format!(
                "undo of {turn} failed ({:?}): {} {}",
                outcome.code, outcome.stdout, outcome.stderr
            )),
        }
        Ok(())
    }

    fn integrity_check(&mut self) -> Result<()> {
        let database = self.state.join("clawsmith.db");
        if !database.exists() {
            return Ok(());
        }
        let output = Command::new("sqlite3")
            .arg(&database)
            .arg("PRAGMA integrity_check;")
            .output()
            .context("running sqlite3")?;
        self.counts.integrity_checks += 1;
        let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() || text != "ok" {
            self.violation(format!(
                "integrity_check: {text} {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }
}
