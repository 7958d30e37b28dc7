//! `session` and `undo` and `prune`: commands over the store alone.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clawsmith_checkpoint::{
    CheckpointInfo, DiffSide, RetentionPolicy, Store, UndoOutcome, UndoReport, UndoScope,
};
use clawsmith_fs::Workspace;
use serde_json::json;

use crate::{Help, Output, refusal};

/// Longest session id accepted on the command line.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// Parses a session id given on the command line: non-empty, at most
/// [`MAX_SESSION_ID_BYTES`], no control characters (a newline would forge lines in every
/// listing), no `/` or `\\`, not `.` or `..` (an id must never read as a path).
pub fn session_id(text: &str) -> std::result::Result<String, String> {
    let problem = if text.is_empty() {
        "it is empty"
    } else if text.len() > MAX_SESSION_ID_BYTES {
        "it is longer than 128 bytes"
    } else if text.chars().any(char::is_control) {
        "it contains a control character (newline, tab, …)"
    } else if text.contains(['/', '\\']) || text == "." || text == ".." {
        "it reads as a path (`/`, `\\`, `.` or `..`)"
    } else {
        return Ok(text.to_owned());
    };
    Err(format!(
        "{problem}; a session id is up to 128 printable characters without `/` or `\\`"
    ))
}

/// Which turn an undo rewinds, and the workspace it may write in.
#[derive(Debug, Clone, clap::Args)]
pub struct UndoTarget {
    /// The turn id.
    pub turn: String,
    /// The session, when the turn is in several (forks).
    #[arg(long, value_parser = session_id)]
    pub session: Option<String>,
    /// The workspace to restore in (default: the current directory). Undo writes only here, and
    /// refuses a session that works in another workspace.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub workspace: PathBuf,
}

pub fn session_list(store: &Store, out: &Output) -> Result<i32> {
    let sessions = store.list_sessions()?;
    if out.json {
        let list: Vec<_> = sessions
            .iter()
            .map(|s| {
                json!({"id": s.id, "parentId": s.parent_id, "createdAtMs": s.created_at_ms,
                       "workspaceRoot": s.workspace_root})
            })
            .collect();
        out.json_line(&json!({ "sessions": list }))?;
    } else if sessions.is_empty() {
        out.line("no sessions")?;
    } else {
        for session in sessions {
            let parent = session
                .parent_id
                .map(|p| format!(" (fork of {p})"))
                .unwrap_or_default();
            out.line(&format!(
                "{}  {}  {}{parent}",
                session.id,
                format_time(session.created_at_ms),
                session.workspace_root
            ))?;
        }
    }
    Ok(0)
}

/// Which part of a session `session show` prints.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ShowRange {
    /// Events after this sequence only (page through a long session with the `nextSince` it
    /// printed).
    #[arg(long, value_name = "SEQUENCE", default_value_t = 0)]
    pub since: u64,
    /// At most this many events (and messages) shown.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
}

/// Rows read from the store at a time: `session show` never holds a whole history in memory.
const SHOW_PAGE: u64 = 1_000;

pub fn session_show(store: &Store, id: &str, range: ShowRange, out: &Output) -> Result<i32> {
    let session = store
        .get_session(id)?
        .with_context(|| format!("no session {id:?}"))?;
    let todos = store.todos(id)?;
    let limit = range.limit.unwrap_or(u64::MAX);
    let mut stdout = std::io::stdout().lock();
    if out.json {
        write!(
            stdout,
            "{{\"id\":{},\"parentId\":{},\"createdAtMs\":{},\"workspaceRoot\":{},\"todos\":{},\"messages\":[",
            json!(session.id),
            json!(session.parent_id),
            session.created_at_ms,
            json!(session.workspace_root),
            json!(todos)
        )?;
    } else {
        writeln!(
            stdout,
            "session {}  workspace {}",
            session.id, session.workspace_root
        )?;
        if let Some(parent) = &session.parent_id {
            writeln!(stdout, "forked from {parent}")?;
        }
        writeln!(stdout, "{} todos", todos.len())?;
    }
    let mut shown = 0;
    let mut first = true;
    while shown < limit {
        let page = store.messages_page(id, shown, SHOW_PAGE.min(limit - shown))?;
        if page.is_empty() {
            break;
        }
        shown += page.len() as u64;
        for message in &page {
            if out.json {
                if !std::mem::take(&mut first) {
                    write!(stdout, ",")?;
                }
                serde_json::to_writer(&mut stdout, message)?;
            } else {
                writeln!(stdout, "{}", message_line(message))?;
            }
        }
    }
    if out.json {
        write!(stdout, "],\"events\":[")?;
    }
    let (mut after, mut shown, mut first) = (range.since, 0, true);
    while shown < limit {
        let page = store.events_page(id, after, SHOW_PAGE.min(limit - shown))?;
        let Some(last) = page.last() else { break };
        after = last.sequence;
        shown += page.len() as u64;
        for event in &page {
            if out.json {
                if !std::mem::take(&mut first) {
                    write!(stdout, ",")?;
                }
                serde_json::to_writer(&mut stdout, event)?;
            } else {
                writeln!(stdout, "  #{} {}", event.sequence, event.payload.kind())?;
            }
        }
    }
    let more = shown == limit && !store.events_page(id, after, 1)?.is_empty();
    if out.json {
        write!(stdout, "]")?;
        if more {
            write!(stdout, ",\"nextSince\":{after}")?;
        }
        writeln!(stdout, "}}")?;
    } else if more {
        writeln!(stdout, "  … more events: --since {after}")?;
    }
    stdout.flush()?;
    Ok(0)
}

/// One message, one line, for people.
fn message_line(message: &clawsmith_protocol::ModelMessage) -> String {
    let status = message
        .tool_status()
        .map(|s| format!(" [{}]", s.as_str()))
        .unwrap_or_default();
    let name = message
        .tool_name
        .as_deref()
        .map(|n| format!(" {n}"))
        .unwrap_or_default();
    let first = message.content.lines().next().unwrap_or_default();
    format!("  {:?}{name}{status}: {}", message.role, clip(first, 100))
}

pub fn session_fork(
    store: &Store,
    parent: &str,
    new_id: Option<String>,
    out: &Output,
) -> Result<i32> {
    let id = new_id.unwrap_or_else(crate::new_id);
    // A fork is a write of both sessions: the parent is copied whole, not mid-call.
    let _parent = store.lease_session(parent)?;
    let _child = store.lease_session(&id)?;
    let child = store.fork_session(parent, &id)?;
    if out.json {
        out.json_line(&json!({"id": child.id, "parentId": child.parent_id}))?;
    } else {
        out.line(&format!("forked {parent} into {}", child.id))?;
    }
    Ok(0)
}

/// Every checkpoint of `session` (or of all sessions), newest first.
fn checkpoints(store: &Store, session: Option<&str>) -> Result<Vec<CheckpointInfo>> {
    let sessions = match session {
        Some(id) => {
            store
                .get_session(id)?
                .with_context(|| format!("no session {id:?}"))?;
            vec![id.to_owned()]
        }
        None => store.list_sessions()?.into_iter().map(|s| s.id).collect(),
    };
    let mut all = Vec::new();
    for id in sessions {
        all.extend(store.checkpoints(&id)?);
    }
    all.sort_by(|a, b| {
        b.created_at_ms
            .cmp(&a.created_at_ms)
            .then(b.turn_id.cmp(&a.turn_id))
    });
    Ok(all)
}

pub fn undo_list(store: &Store, session: Option<&str>, out: &Output) -> Result<i32> {
    let list = checkpoints(store, session)?;
    if out.json {
        let mut items = Vec::new();
        for checkpoint in &list {
            let files = store.change_list(&checkpoint.session_id, &checkpoint.turn_id)?;
            items.push(json!({
                "sessionId": checkpoint.session_id, "turnId": checkpoint.turn_id,
                "createdAtMs": checkpoint.created_at_ms, "state": checkpoint.state.as_str(),
                "filesUndone": checkpoint.files_undone, "sessionUndone": checkpoint.session_undone,
                "files": files,
            }));
        }
        out.json_line(&json!({ "checkpoints": items }))?;
        return Ok(0);
    }
    if list.is_empty() {
        out.line("no checkpoints")?;
    }
    for checkpoint in &list {
        out.line(&format!(
            "{}  session {}  {}  {}  {} file(s){}{}",
            checkpoint.turn_id,
            checkpoint.session_id,
            format_time(checkpoint.created_at_ms),
            checkpoint.state.as_str(),
            checkpoint.file_count,
            if checkpoint.files_undone {
                "  files undone"
            } else {
                ""
            },
            if checkpoint.session_undone {
                "  session undone"
            } else {
                ""
            },
        ))?;
        for change in store.change_list(&checkpoint.session_id, &checkpoint.turn_id)? {
            let lines = match (change.lines_added, change.lines_removed) {
                (Some(added), Some(removed)) => format!(" +{added} -{removed}"),
                _ => String::new(),
            };
            let origin = match (&change.origin, &change.call_id) {
                (Some(origin), Some(call)) => format!("  ({origin} {call})"),
                (Some(origin), None) => format!("  ({origin})"),
                _ => String::new(),
            };
            out.line(&format!(
                "    {:?} {}{lines}{origin}",
                change.kind, change.path
            ))?;
        }
    }
    Ok(0)
}

/// The session a turn belongs to: `session` when given, else the one session holding the turn.
fn session_of(store: &Store, turn: &str, session: Option<&str>) -> Result<String> {
    if let Some(id) = session {
        return Ok(id.to_owned());
    }
    let owners: Vec<String> = checkpoints(store, None)?
        .into_iter()
        .filter(|c| c.turn_id == turn)
        .map(|c| c.session_id)
        .collect();
    match owners.as_slice() {
        [] => Err(refusal(
            format!("no checkpoint for turn {turn:?}"),
            "`clawsmith undo list` shows the turns",
        )),
        [only] => Ok(only.clone()),
        many => Err(refusal(
            format!(
                "turn {turn:?} is in {} sessions (forks share history): {}",
                many.len(),
                many.join(", ")
            ),
            "pass --session to say which",
        )),
    }
}

pub fn undo_diff(
    store: &Store,
    turn: &str,
    path: &str,
    session: Option<&str>,
    out: &Output,
) -> Result<i32> {
    let session = session_of(store, turn, session)?;
    let relative = workspace_relative(store, &session, path)?;
    let Some(diff) = store.diff(&session, turn, &relative)? else {
        let changed: Vec<String> = store
            .change_list(&session, turn)?
            .into_iter()
            .map(|change| change.path)
            .collect();
        let changed = if changed.is_empty() {
            "no files".to_owned()
        } else {
            changed.join(", ")
        };
        return Err(anyhow::anyhow!("turn {turn} did not change {relative}")
            .context(Help(format!("it changed {changed}"))));
    };
    if out.json {
        out.json_line(&diff)?;
        return Ok(0);
    }
    out.line(&format!("{} ({:?}) in turn {turn}", diff.path, diff.kind))?;
    for (label, side) in [("before", &diff.before), ("after", &diff.after)] {
        match side {
            DiffSide::Absent => out.line(&format!("{label}: absent"))?,
            DiffSide::Binary { total_bytes } => {
                out.line(&format!("{label}: binary, {total_bytes} bytes"))?
            }
            DiffSide::Unavailable { reason } => {
                out.line(&format!("{label}: unavailable ({reason})"))?
            }
            DiffSide::Text {
                truncated,
                total_bytes,
                ..
            } => out.line(&format!(
                "{label}: {total_bytes} bytes of text{}",
                if *truncated {
                    " (shown truncated to 64 KiB)"
                } else {
                    ""
                }
            ))?,
        }
    }
    out.raw(&diff.unified)?;
    if diff.unified_truncated {
        out.line("[diff truncated]")?;
    }
    Ok(0)
}

/// `path` as the store names it: relative to the session's workspace, `/`-separated, `./` and
/// `a//b` and `..` resolved, and an absolute path inside the workspace made relative — by the
/// workspace's own resolver, the one every tool call goes through. A path outside the workspace
/// is refused with the resolver's message.
fn workspace_relative(store: &Store, session: &str, path: &str) -> Result<String> {
    let info = store
        .get_session(session)?
        .with_context(|| format!("no session {session:?}"))?;
    // The resolver needs the workspace root open; a workspace removed since the turn can only
    // be asked about in the form the store names paths.
    let Ok(workspace) = Workspace::open(std::path::Path::new(&info.workspace_root)) else {
        return Ok(path.to_owned());
    };
    Ok(workspace.resolve(path)?.as_str().to_owned())
}

pub fn undo(store: &Store, target: &UndoTarget, scope: UndoScope, out: &Output) -> Result<i32> {
    let turn = target.turn.as_str();
    let session_id = session_of(store, turn, target.session.as_deref())?;
    // One writer per session: a turn still running in it, or another undo, is waited for
    // (`--wait`) or refused with its pid.
    let _lease = store.lease_session(&session_id)?;
    let info = store
        .get_session(&session_id)?
        .with_context(|| format!("no session {session_id:?}"))?;
    // Undo writes only in the workspace this command was given, never where a row says.
    let workspace = Workspace::open(&target.workspace)
        .with_context(|| format!("opening the workspace {}", target.workspace.display()))?;
    let root = workspace.root().display().to_string();
    if root != info.workspace_root {
        return Err(refusal(
            format!(
                "session {session_id} works in {}, not in {root}; undo only writes in the \
                 workspace it is given",
                info.workspace_root
            ),
            format!("pass --workspace {} to undo there", info.workspace_root),
        ));
    }
    // An undo killed mid-restore left its plan behind; finish it first (it only touches paths
    // still in the state it recorded), or every later undo of the session is refused.
    for recovered in store.recover_session_restores(&workspace, &session_id)? {
        eprintln!(
            "note: finished an interrupted undo of turn {} (session {}): {} restored now, {} already done, {} left alone",
            recovered.turn_id,
            recovered.session_id,
            recovered.completed.len(),
            recovered.already_done.len(),
            recovered.skipped.len()
        );
    }
    let report = store.undo(&session_id, turn, scope, &workspace)?;
    print_undo(&report, out)
}

fn print_undo(report: &UndoReport, out: &Output) -> Result<i32> {
    let scope = match report.scope {
        UndoScope::Files => "files",
        UndoScope::Session => "session",
        UndoScope::All => "all",
    };
    let (outcome, conflicts) = match &report.outcome {
        UndoOutcome::Undone => ("undone", Vec::new()),
        UndoOutcome::AlreadyUndone => ("already_undone", Vec::new()),
        UndoOutcome::Conflicts(list) => ("conflicts", list.clone()),
    };
    if out.json {
        let conflicts: Vec<_> = conflicts
            .iter()
            .map(|c| {
                json!({"path": c.path, "turnId": c.turn_id, "expectedSha256": c.expected_sha256,
                       "foundSha256": c.found_sha256, "reason": c.reason})
            })
            .collect();
        out.json_line(&json!({
            "sessionId": report.session_id, "turnId": report.turn_id, "scope": scope,
            "outcome": outcome, "turns": report.turns, "restored": report.restored,
            "removed": report.removed, "removedDirectories": report.removed_directories,
            "conflicts": conflicts,
        }))?;
    } else {
        match &report.outcome {
            UndoOutcome::Undone => {
                out.line(&format!(
                    "undid {scope} of {} turn(s): {}",
                    report.turns.len(),
                    report.turns.join(", ")
                ))?;
                for path in &report.restored {
                    out.line(&format!("  restored {path}"))?;
                }
                for path in &report.removed {
                    out.line(&format!("  removed {path}"))?;
                }
                for path in &report.removed_directories {
                    out.line(&format!("  removed directory {path}/"))?;
                }
            }
            UndoOutcome::AlreadyUndone => out.line(&format!(
                "turn {} is already undone ({scope}); nothing changed",
                report.turn_id
            ))?,
            UndoOutcome::Conflicts(list) => {
                out.line(&format!(
                    "refused: {} file(s) changed since the agent wrote them; nothing was changed",
                    list.len()
                ))?;
                for conflict in list {
                    out.line(&format!("  {}: {}", conflict.path, conflict.reason))?;
                }
            }
        }
    }
    Ok(if matches!(report.outcome, UndoOutcome::Conflicts(_)) {
        crate::exit::UNDO_REFUSED
    } else {
        0
    })
}

pub fn prune(store: &Store, dry_run: bool, out: &Output) -> Result<i32> {
    let indicator = Progress::start(if dry_run {
        "pruning (dry run)"
    } else {
        "pruning"
    });
    let report = store.prune(&RetentionPolicy::default(), store.now_ms(), dry_run);
    indicator.finish();
    let report = report?;
    if out.json {
        out.json_line(&report)?;
    } else {
        out.line(&format!(
            "{}{} expired session(s), {} checkpoint(s), {} journal entr(ies), {} blob(s); {} freed",
            if dry_run { "would remove " } else { "removed " },
            report.sessions_removed,
            report.checkpoints_removed,
            report.journal_entries_removed,
            report.blobs_removed,
            format_bytes(report.bytes_freed)
        ))?;
    }
    Ok(0)
}

/// A live "still working" line on stderr for long operations, shown only on a terminal and only
/// after a short delay (quick runs print nothing extra). Prune is one transaction with no
/// intermediate milestones, so the line shows the elapsed time rather than a percentage.
struct Progress {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(label: &'static str) -> Progress {
        use std::io::IsTerminal;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let frames = ["|", "/", "-", "\\"];
                let mut shown = false;
                let mut frame = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    if started.elapsed() < std::time::Duration::from_millis(500) {
                        continue;
                    }
                    shown = true;
                    frame = (frame + 1) % frames.len();
                    eprint!(
                        "\r{} {label}… {:.1} s ",
                        frames[frame],
                        started.elapsed().as_secs_f64()
                    );
                }
                if shown {
                    eprint!("\r\x1b[2K");
                }
            })
        });
        Progress { done, thread }
    }

    fn finish(mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn format_time(ms: u64) -> String {
    // Seconds since the epoch, UTC, as YYYY-MM-DD HH:MM:SS (civil-from-days, no time crate).
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_and_sizes() {
        assert_eq!(super::format_time(0), "1970-01-01 00:00:00");
        assert_eq!(super::format_time(1_700_000_000_000), "2023-11-14 22:13:20");
        assert_eq!(super::format_bytes(10), "10 B");
        assert_eq!(super::format_bytes(1536), "1.5 KiB");
    }
}
