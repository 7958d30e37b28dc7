//! `session` and `undo` and `prune`: commands over the store alone.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clawsmith_checkpoint::{RetentionPolicy, Store};
use clawsmith_fs::Workspace;
use clawsmith_store::{
    ChangeKind, CheckpointInfo, DiffSide, SessionStore, UndoOutcome, UndoReport, UndoScope,
};
use serde_json::json;

use crate::output::{self, Clock, Table, paint, style};
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

pub fn session_list(store: &dyn SessionStore, out: &Output) -> Result<i32> {
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
        let clock = Clock::system();
        let mut table = Table::with_header(&["session", "created", "workspace"]);
        for session in sessions {
            let parent = session
                .parent_id
                .map(|p| paint(style::DIM, format!(" (fork of {p})")))
                .unwrap_or_default();
            table.row(vec![
                paint(style::ID, &session.id),
                clock.when(session.created_at_ms),
                format!("{}{parent}", session.workspace_root),
            ]);
        }
        out.raw(&table.render())?;
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

pub fn session_show(
    store: &dyn SessionStore,
    id: &str,
    range: ShowRange,
    out: &Output,
) -> Result<i32> {
    let session = store
        .get_session(id)?
        .with_context(|| format!("no session {id:?}"))?;
    let todos = store.todos(id)?;
    let limit = range.limit.unwrap_or(u64::MAX);
    let clock = Clock::system();
    let mut timeline = crate::timeline::Timeline::new(clock.clone());
    // Text for people goes through anstream (styles stripped unless colour is on); JSON is
    // written as is.
    let mut stdout: Box<dyn Write> = if out.json {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(anstream::stdout().lock())
    };
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
            "{} {}",
            paint(style::HEADER, "session"),
            paint(style::ID, &session.id)
        )?;
        let mut facts = Table::new().indented(2);
        facts.row(vec!["workspace".into(), session.workspace_root.clone()]);
        facts.row(vec!["created".into(), clock.when(session.created_at_ms)]);
        if let Some(parent) = &session.parent_id {
            facts.row(vec!["forked from".into(), paint(style::ID, parent)]);
        }
        facts.row(vec!["todos".into(), todo_summary(&todos)]);
        facts.row(vec!["times".into(), clock.zone_name()]);
        write!(stdout, "{}", facts.render())?;
    }
    let mut shown = 0;
    let mut first = true;
    while shown < limit {
        let page = store.messages_page(id, shown, SHOW_PAGE.min(limit - shown))?;
        if page.is_empty() {
            break;
        }
        if shown == 0 && !out.json {
            writeln!(stdout, "\n{}", paint(style::HEADER, "messages"))?;
        }
        shown += page.len() as u64;
        for message in &page {
            if out.json {
                if !std::mem::take(&mut first) {
                    write!(stdout, ",")?;
                }
                serde_json::to_writer(&mut stdout, message)?;
            } else {
                write!(stdout, "{}", message_lines(message))?;
            }
        }
    }
    if out.json {
        write!(stdout, "],\"events\":[")?;
    }
    let (mut after, mut shown, mut first) = (range.since, 0, true);
    if !out.json {
        writeln!(stdout, "\n{}", paint(style::HEADER, "timeline"))?;
    }
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
                write!(stdout, "{}", timeline.event(event))?;
            }
        }
    }
    let more = shown == limit && !store.events_page(id, after, 1)?.is_empty();
    // What undos took out of the history, shown with the first page only (a `--since` page
    // continues the live timeline).
    // A store that cannot undo has undone nothing.
    let undone = match store.undo_store() {
        Ok(undo) if range.since == 0 => undo.undone_history(id)?,
        _ => Vec::new(),
    };
    if out.json {
        write!(stdout, "]")?;
        if more {
            write!(stdout, ",\"nextSince\":{after}")?;
        }
        if !undone.is_empty() {
            write!(stdout, ",\"undone\":")?;
            serde_json::to_writer(&mut stdout, &undone)?;
        }
        writeln!(stdout, "}}")?;
    } else {
        if more {
            writeln!(
                stdout,
                "{}",
                paint(style::DIM, format!("… more events: --since {after}"))
            )?;
        }
        if !undone.is_empty() {
            writeln!(
                stdout,
                "\n{}",
                paint(style::HEADER, "undone (kept for the audit trail)")
            )?;
        }
        for stretch in &undone {
            writeln!(
                stdout,
                "  {} {}: `undo {}` of turn {} and later — {} messages, {} events",
                paint(style::DIM, "undone"),
                clock.when(stretch.undone_at_ms),
                stretch.scope,
                paint(style::ID, &stretch.turn_id),
                stretch.messages.len(),
                stretch.events.len()
            )?;
            let mut undone_timeline = crate::timeline::Timeline::new(clock.clone());
            for event in &stretch.events {
                for line in undone_timeline.event(event).lines() {
                    writeln!(stdout, "  {}", paint(style::DIM, line))?;
                }
            }
        }
    }
    stdout.flush()?;
    Ok(0)
}

/// `3 (1 done, 1 in progress)`.
fn todo_summary(todos: &[clawsmith_checkpoint::Todo]) -> String {
    use clawsmith_checkpoint::TodoStatus;
    if todos.is_empty() {
        return "none".to_owned();
    }
    let count = |status: TodoStatus| todos.iter().filter(|t| t.status == status).count();
    format!(
        "{} ({} done, {} in progress)",
        todos.len(),
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress)
    )
}

/// The name people know a role by (the wire's).
fn role_name(role: clawsmith_protocol::Role) -> &'static str {
    use clawsmith_protocol::Role;
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// One message for people: its role, its first line, an assistant's tool calls (one per line,
/// with their arguments), a tool result's glyph, tool and status.
fn message_lines(message: &clawsmith_protocol::ModelMessage) -> String {
    const ROLE_COLUMN: usize = 10;
    let role = output::pad(&paint(style::HEADER, role_name(message.role)), ROLE_COLUMN);
    let status = message.tool_status();
    // A tool result's text starts with its status (`Error: …`), already said by the glyph.
    let content = status
        .and_then(|status| {
            message
                .content
                .strip_prefix(clawsmith_protocol::status_prefix(status))
        })
        .unwrap_or(&message.content);
    let first = clip(content.lines().next().unwrap_or_default(), 100);
    let mut text = match (status, message.tool_name.as_deref()) {
        (Some(status), tool) => format!(
            "  {role}{} {} {}: {first}\n",
            output::glyph(status),
            paint(style::TOOL, tool.unwrap_or("?")),
            paint(output::status_style(status), status.as_str()),
        ),
        (None, _) if first.is_empty() && !message.tool_calls.is_empty() => String::new(),
        (None, _) => format!("  {role}{first}\n"),
    };
    for (index, call) in message.tool_calls.iter().enumerate() {
        let lead = if index == 0 && text.is_empty() {
            role.clone()
        } else {
            " ".repeat(ROLE_COLUMN)
        };
        text.push_str(&format!(
            "  {lead}→ {} {}\n",
            paint(style::TOOL, &call.name),
            paint(style::DIM, clip(&call.arguments, 100))
        ));
    }
    text
}

pub fn session_fork(
    store: &dyn SessionStore,
    parent: &str,
    new_id: Option<String>,
    out: &Output,
) -> Result<i32> {
    let id = new_id
        .unwrap_or_else(|| clawsmith_protocol::id::new_id(clawsmith_protocol::id::IdKind::Session));
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
fn checkpoints(store: &dyn SessionStore, session: Option<&str>) -> Result<Vec<CheckpointInfo>> {
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

/// What `undo list` shows.
#[derive(Debug, Clone, clap::Args)]
pub struct UndoListOptions {
    /// Only this session.
    #[arg(long)]
    pub session: Option<String>,
    /// At most N turns, newest first (0: all). Default: 20 as text, all with `--json`.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Only turns that changed PATH (a workspace-relative file, or a folder and what is in it).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Turns that changed no file too (as text they are left out; `--json` always has them).
    #[arg(long)]
    pub all: bool,
}

/// The text default of `undo list --limit`.
const UNDO_LIST_LIMIT: usize = 20;

/// Whether `change` is `wanted` or lies inside it (both workspace-relative; `./` and a trailing
/// `/` do not matter).
fn path_matches(change: &str, wanted: &str) -> bool {
    let wanted = wanted.trim_start_matches("./").trim_end_matches('/');
    wanted.is_empty()
        || wanted == "."
        || change == wanted
        || change
            .strip_prefix(wanted)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub fn undo_list(store: &dyn SessionStore, options: &UndoListOptions, out: &Output) -> Result<i32> {
    let mut chosen = Vec::new();
    for checkpoint in checkpoints(store, options.session.as_deref())? {
        if !out.json && !options.all && checkpoint.file_count == 0 {
            continue;
        }
        let files = store.change_list(&checkpoint.session_id, &checkpoint.turn_id)?;
        if let Some(wanted) = &options.path
            && !files
                .iter()
                .any(|change| path_matches(&change.path, wanted))
        {
            continue;
        }
        chosen.push((checkpoint, files));
    }
    let limit = match options.limit {
        Some(0) => usize::MAX,
        Some(limit) => limit,
        None if out.json => usize::MAX,
        None => UNDO_LIST_LIMIT,
    };
    let older = chosen.len().saturating_sub(limit);
    chosen.truncate(limit);
    if out.json {
        let items: Vec<_> = chosen
            .iter()
            .map(|(checkpoint, files)| {
                json!({
                    "sessionId": checkpoint.session_id, "turnId": checkpoint.turn_id,
                    "createdAtMs": checkpoint.created_at_ms, "state": checkpoint.state.as_str(),
                    "filesUndone": checkpoint.files_undone,
                    "sessionUndone": checkpoint.session_undone, "files": files,
                })
            })
            .collect();
        out.json_line(&json!({ "checkpoints": items, "older": older }))?;
        return Ok(0);
    }
    if chosen.is_empty() {
        out.line(match (&options.path, options.all) {
            (Some(_), _) => "no turn changed that path",
            (None, true) => "no checkpoints",
            (None, false) => "no turn changed a file (`--all` lists every turn)",
        })?;
    }
    let clock = Clock::system();
    for (checkpoint, files) in &chosen {
        let mut flags = Vec::new();
        if checkpoint.files_undone {
            flags.push("files undone");
        }
        if checkpoint.session_undone {
            flags.push("session undone");
        }
        let tools = turn_tools(store, checkpoint)?;
        out.line(&format!(
            "{} {}  {}  {}  {}{}{}",
            paint(style::HEADER, "turn"),
            paint(style::ID, &checkpoint.turn_id),
            paint(style::DIM, format!("session {}", checkpoint.session_id)),
            clock.when(checkpoint.created_at_ms),
            checkpoint.state.as_str(),
            if tools.is_empty() {
                String::new()
            } else {
                format!("  calls: {tools}")
            },
            if flags.is_empty() {
                String::new()
            } else {
                paint(style::WARNING, format!("  {}", flags.join(", ")))
            },
        ))?;
        let mut table = Table::new().indented(4);
        for change in files {
            let (mark, mark_style) = match change.kind {
                ChangeKind::Added => ("added", style::ADDED),
                ChangeKind::Modified => ("modified", style::HUNK),
                ChangeKind::Deleted => ("deleted", style::REMOVED),
                ChangeKind::Unchanged => ("unchanged", style::DIM),
            };
            let lines = match (change.lines_added, change.lines_removed) {
                (Some(added), Some(removed)) => format!(
                    "{} {}",
                    paint(style::ADDED, format!("+{added}")),
                    paint(style::REMOVED, format!("-{removed}"))
                ),
                _ => String::new(),
            };
            let origin = match (&change.origin, &change.call_id) {
                (Some(origin), Some(call)) => format!("{origin} {call}"),
                (Some(origin), None) => origin.clone(),
                _ => String::new(),
            };
            table.row(vec![
                paint(mark_style, mark),
                change.path.clone(),
                lines,
                paint(style::DIM, origin),
            ]);
        }
        out.raw(&table.render())?;
        if checkpoint.file_count > 0 && !checkpoint.files_undone {
            out.line(&paint(
                style::DIM,
                format!(
                    "    {} file{} · undo: clawsmith undo files {}",
                    checkpoint.file_count,
                    if checkpoint.file_count == 1 { "" } else { "s" },
                    checkpoint.turn_id
                ),
            ))?;
        }
    }
    if older > 0 {
        out.line(&paint(
            style::DIM,
            format!(
                "… {older} older turn{} (`--limit 0` lists all, `--path P` only those that changed P)",
                if older == 1 { "" } else { "s" }
            ),
        ))?;
    }
    Ok(0)
}

/// The tools a turn called, each once with its count (`edit_file ×2, run_command`), in the
/// order first called; read from the turn's own events (at most [`TURN_EVENTS_READ`]).
fn turn_tools(store: &dyn SessionStore, checkpoint: &CheckpointInfo) -> Result<String> {
    let events = store.events_page(
        &checkpoint.session_id,
        checkpoint.event_sequence,
        TURN_EVENTS_READ,
    )?;
    let mut tools: Vec<(String, usize)> = Vec::new();
    for event in events {
        if let clawsmith_protocol::EventPayload::ToolStarted(started) = event.payload
            && started.turn_id == checkpoint.turn_id
        {
            match tools
                .iter_mut()
                .find(|(name, _)| *name == started.tool_name)
            {
                Some((_, count)) => *count += 1,
                None => tools.push((started.tool_name, 1)),
            }
        }
    }
    Ok(tools
        .into_iter()
        .map(|(name, count)| match count {
            1 => name,
            _ => format!("{name} ×{count}"),
        })
        .collect::<Vec<_>>()
        .join(", "))
}

/// How many events `undo list` reads after a turn's start to name the tools it called.
const TURN_EVENTS_READ: u64 = 512;

/// The session a turn belongs to: `session` when given, else the one session holding the turn.
fn session_of(store: &dyn SessionStore, turn: &str, session: Option<&str>) -> Result<String> {
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
    store: &dyn SessionStore,
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
    let kind = match diff.kind {
        ChangeKind::Added => "added",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Unchanged => "unchanged",
    };
    out.line(&format!(
        "{} {}  {}",
        paint(style::HEADER, &diff.path),
        paint(style::DIM, format!("({kind} in turn {turn})")),
        side_text("before", &diff.before) + " → " + &side_text("after", &diff.after)
    ))?;
    let mut text = String::new();
    for line in diff.unified.lines() {
        match crate::timeline::diff_line_style(line) {
            Some(line_style) => text.push_str(&paint(line_style, line)),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    out.raw(&text)?;
    if diff.unified_truncated {
        out.line(&paint(style::DIM, "[diff truncated]"))?;
    }
    Ok(0)
}

/// One side of a diff in a few words: `absent`, `12 B of text`, `binary, 3.0 KiB`.
fn side_text(label: &str, side: &DiffSide) -> String {
    let what = match side {
        DiffSide::Absent => "absent".to_owned(),
        DiffSide::Binary { total_bytes } => format!("binary, {}", output::bytes(*total_bytes)),
        DiffSide::Unavailable { reason } => format!("unavailable ({reason})"),
        DiffSide::Text {
            truncated,
            total_bytes,
            ..
        } => format!(
            "{} of text{}",
            output::bytes(*total_bytes),
            if *truncated {
                " (shown truncated to 64 KiB)"
            } else {
                ""
            }
        ),
    };
    paint(style::DIM, format!("{label}: {what}"))
}

/// `path` as the store names it: relative to the session's workspace, `/`-separated, `./` and
/// `a//b` and `..` resolved, and an absolute path inside the workspace made relative — by the
/// workspace's own resolver, the one every tool call goes through. A path outside the workspace
/// is refused with the resolver's message.
fn workspace_relative(store: &dyn SessionStore, session: &str, path: &str) -> Result<String> {
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

pub fn undo(
    store: &dyn SessionStore,
    target: &UndoTarget,
    scope: UndoScope,
    out: &Output,
) -> Result<i32> {
    let turn = target.turn.as_str();
    let undoer = store.undo_store().map_err(|reason| {
        refusal(
            reason,
            "undo with a store that keeps undo (the embedded SQLite store and the PostgreSQL store both do)",
        )
    })?;
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
    for recovered in undoer.recover_session_restores(&workspace, &session_id)? {
        output::notice(
            output::Level::Note,
            format_args!(
                "finished an interrupted undo of turn {} (session {}): {} restored now, {} already done, {} left alone",
                recovered.turn_id,
                recovered.session_id,
                recovered.completed.len(),
                recovered.already_done.len(),
                recovered.skipped.len()
            ),
        );
    }
    let report = undoer.undo(&session_id, turn, scope, &workspace)?;
    // What commands of these turns changed that undo cannot give back.
    let mut uncaptured = Vec::new();
    for undone in &report.turns {
        for change in store.uncaptured_changes(&session_id, undone)? {
            uncaptured.push((undone.clone(), change));
        }
    }
    for (_, change) in uncaptured.iter().take(NOT_CAPTURED_SHOWN) {
        output::notice(
            output::Level::Note,
            format_args!("not captured: {}: {}", change.path, change.reason),
        );
    }
    if uncaptured.len() > NOT_CAPTURED_SHOWN {
        output::notice(
            output::Level::Note,
            format_args!(
                "… and {} more paths not captured (`--json` lists every one as notCaptured)",
                uncaptured.len() - NOT_CAPTURED_SHOWN
            ),
        );
    }
    print_undo(&report, &uncaptured, out)
}

/// How many "not captured" notes an undo prints before it counts the rest.
const NOT_CAPTURED_SHOWN: usize = 10;

fn print_undo(
    report: &UndoReport,
    uncaptured: &[(String, clawsmith_checkpoint::UncapturedChange)],
    out: &Output,
) -> Result<i32> {
    let scope = report.scope.name();
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
            "alreadyAsBefore": report.already_as_before, "conflicts": conflicts,
            "notCaptured": uncaptured.iter().map(|(turn, change)| json!({
                "turnId": turn, "path": change.path, "reason": change.reason,
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        match &report.outcome {
            UndoOutcome::Undone => {
                out.line(&format!(
                    "{} undid {scope} of {} turn(s): {}",
                    output::glyph(clawsmith_protocol::ToolStatus::Success),
                    report.turns.len(),
                    paint(style::ID, report.turns.join(", "))
                ))?;
                let mut table = Table::new().indented(2);
                for path in &report.restored {
                    table.row(vec![paint(style::ADDED, "restored"), path.clone()]);
                }
                for path in &report.removed {
                    table.row(vec![paint(style::REMOVED, "removed"), path.clone()]);
                }
                for path in &report.removed_directories {
                    table.row(vec![paint(style::REMOVED, "removed"), format!("{path}/")]);
                }
                for path in &report.already_as_before {
                    table.row(vec![
                        paint(style::DIM, "as before"),
                        format!("{path} (already held its earlier content; left alone)"),
                    ]);
                }
                out.raw(&table.render())?;
            }
            UndoOutcome::AlreadyUndone => out.line(&format!(
                "turn {} is already undone ({scope}); nothing changed",
                report.turn_id
            ))?,
            UndoOutcome::Conflicts(list) => {
                out.line(&format!(
                    "{} {}: {} file(s) changed since the agent wrote them; nothing was changed",
                    output::glyph(clawsmith_protocol::ToolStatus::Denied),
                    paint(style::WARNING, "refused"),
                    list.len()
                ))?;
                for conflict in list {
                    out.line(&format!(
                        "  {}: {}",
                        paint(style::HEADER, &conflict.path),
                        conflict.reason
                    ))?;
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
        let count = |n: u64| paint(style::HEADER, n);
        out.line(&format!(
            "{} {} expired session(s), {} checkpoint(s), {} journal entr(ies), {} blob(s); {} {}",
            if dry_run {
                paint(style::WARNING, "would remove")
            } else {
                paint(style::NOTE, "removed")
            },
            count(report.sessions_removed),
            count(report.checkpoints_removed),
            count(report.journal_entries_removed),
            count(report.blobs_removed),
            paint(style::HEADER, output::bytes(report.bytes_freed)),
            if dry_run { "would be freed" } else { "freed" }
        ))?;
    }
    Ok(0)
}

/// A live "still working" line on stderr for long operations, shown only on a terminal with
/// colour allowed, and erased when done (nothing of it stays on screen or reaches a pipe). Prune
/// is one transaction with no intermediate milestones, so the line shows the elapsed time rather
/// than a percentage.
struct Progress {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(label: &'static str) -> Progress {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = output::stderr_is_live().then(|| {
            let done = done.clone();
            std::thread::spawn(move || {
                let started = std::time::Instant::now();
                let frames = ["|", "/", "-", "\\"];
                let mut frame = 0;
                loop {
                    eprint!(
                        "\r{} {label}… {:.1} s ",
                        paint(style::DIM, frames[frame]),
                        started.elapsed().as_secs_f64()
                    );
                    frame = (frame + 1) % frames.len();
                    for _ in 0..10 {
                        if done.load(std::sync::atomic::Ordering::Relaxed) {
                            eprint!("\r\x1b[2K");
                            return;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
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

fn clip(text: &str, max: usize) -> String {
    output::clip(text, max)
}
