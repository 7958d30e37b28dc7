//! The JSON API under `/api/`: what the pages render, and what scripts and tests read.

// Handlers refuse with the `Response` axum sends as is; boxing it would only add a step on a path
// that ends the request.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clawsmith_fs::Workspace;
use clawsmith_store::{
    CheckpointInfo, SessionInfo, SessionStore, StoreError, UndoOutcome, UndoPreview, UndoReport,
    UndoScope,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::summary::summarize;
use crate::{AppState, MAX_PAGE, UndoWorkspace};

/// The events a page holds unless it asks for fewer.
const DEFAULT_PAGE: u64 = 200;

/// The most bytes of an artifact one request returns.
const ARTIFACT_PAGE_MAX_BYTES: u64 = 64 * 1024;

/// The most lines of an artifact one request returns.
const ARTIFACT_PAGE_MAX_LINES: u64 = 2_000;

/// The API's routes, under the instance's prefix (`/s/<hex>/`).
pub(crate) fn router(prefix: &str) -> Router<Arc<AppState>> {
    let at = |path: &str| format!("{prefix}api/{path}");
    Router::new()
        .route(&at("server"), get(server))
        .route(&at("sessions"), get(sessions))
        .route(&at("sessions/{id}"), get(session))
        .route(&at("sessions/{id}/events"), get(events))
        .route(&at("sessions/{id}/live"), get(live))
        .route(&at("sessions/{id}/turns/{turn}"), get(turn))
        .route(&at("sessions/{id}/turns/{turn}/diff"), get(diff))
        .route(
            &at("sessions/{id}/turns/{turn}/undo-preview"),
            post(undo_preview),
        )
        .route(&at("sessions/{id}/turns/{turn}/undo"), post(undo))
        .route(&at("sessions/{id}/artifacts/{artifact}"), get(artifact))
}

/// A refusal or failure as JSON: `{"error": {"code", "message"}}`.
pub(crate) fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"code": code, "message": message.into()}});
    (status, Json(body)).into_response()
}

/// What a handler returns: JSON, or a response that says what went wrong.
type ApiResult = Result<Json<Value>, Response>;

fn store_error(failure: StoreError) -> Response {
    match failure {
        StoreError::UnknownSession(id) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no session {id:?}"),
        ),
        StoreError::UnknownTurn {
            session_id,
            turn_id,
        } => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no turn {turn_id:?} in session {session_id:?}"),
        ),
        failure @ StoreError::SessionInUse { .. } => {
            error(StatusCode::CONFLICT, "session_in_use", failure.to_string())
        }
        failure @ StoreError::RestoreInProgress(_) => error(
            StatusCode::CONFLICT,
            "restore_in_progress",
            failure.to_string(),
        ),
        other => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_failed",
            other.to_string(),
        ),
    }
}

/// Runs a store read on the blocking pool.
async fn blocking<T: Send + 'static>(
    state: &Arc<AppState>,
    body: impl FnOnce(&dyn SessionStore) -> Result<T, Response> + Send + 'static,
) -> Result<T, Response> {
    let store = state.store.clone();
    tokio::task::spawn_blocking(move || body(&*store))
        .await
        .map_err(|join| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                join.to_string(),
            )
        })?
}

fn require_session(store: &dyn SessionStore, id: &str) -> Result<SessionInfo, Response> {
    store.get_session(id).map_err(store_error)?.ok_or_else(|| {
        error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no session {id:?}"),
        )
    })
}

fn session_json(session: &SessionInfo, children: &[String]) -> Value {
    json!({"id": session.id, "parentId": session.parent_id, "createdAtMs": session.created_at_ms,
           "workspaceRoot": session.workspace_root, "children": children})
}

fn checkpoint_json(checkpoint: &CheckpointInfo) -> Value {
    json!({"turnId": checkpoint.turn_id, "createdAtMs": checkpoint.created_at_ms,
           "finishedAtMs": checkpoint.finished_at_ms, "state": checkpoint.state.as_str(),
           "filesUndone": checkpoint.files_undone, "sessionUndone": checkpoint.session_undone,
           "fileCount": checkpoint.file_count, "eventSequence": checkpoint.event_sequence})
}

/// Children of every session, by parent id.
fn children_of(sessions: &[SessionInfo]) -> HashMap<&str, Vec<String>> {
    let mut children: HashMap<&str, Vec<String>> = HashMap::new();
    for session in sessions {
        if let Some(parent) = &session.parent_id {
            children
                .entry(parent.as_str())
                .or_default()
                .push(session.id.clone());
        }
    }
    children
}

#[derive(Debug, Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
}

/// What this server is: where undo writes, or why it is off; which store it reads, and whether
/// its timelines are told of commits (`follows`) or poll.
async fn server(State(state): State<Arc<AppState>>) -> Json<Value> {
    let follows = state.feed.as_ref().is_some_and(crate::live::Feed::is_up);
    Json(json!({
        "undo": undo_json(&state.undo),
        "store": state.store.backend().as_str(),
        "follows": follows,
    }))
}

fn undo_json(undo: &UndoWorkspace) -> Value {
    match undo {
        UndoWorkspace::In(root) => json!({"workspace": root.display().to_string(), "off": null}),
        UndoWorkspace::Off(reason) => json!({"workspace": null, "off": reason}),
    }
}

/// Every session, newest first, each with what a person recognises it by (its first request or
/// tool call, turns, changes, last activity); `q` keeps those whose id, workspace or title
/// contains it.
async fn sessions(
    State(state): State<Arc<AppState>>,
    Query(query): Query<SearchQuery>,
) -> ApiResult {
    blocking(&state, move |store| {
        let sessions = store.list_sessions().map_err(store_error)?;
        let children = children_of(&sessions);
        let needle = query.q.to_lowercase();
        let mut list = Vec::new();
        for session in &sessions {
            let summary = summarize(store, session).map_err(store_error)?;
            let matches = needle.is_empty()
                || session.id.to_lowercase().contains(&needle)
                || session.workspace_root.to_lowercase().contains(&needle)
                || summary
                    .title
                    .as_ref()
                    .is_some_and(|title| title.to_lowercase().contains(&needle));
            if !matches {
                continue;
            }
            let mut entry = session_json(
                session,
                children.get(session.id.as_str()).map_or(&[], Vec::as_slice),
            );
            if let (Value::Object(entry), Ok(Value::Object(summary))) =
                (&mut entry, serde_json::to_value(&summary))
            {
                entry.extend(summary);
            }
            list.push(entry);
        }
        Ok(Json(json!({ "sessions": list })))
    })
    .await
}

/// One session: its facts, todos, checkpoints (newest first) and last event sequence.
async fn session(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let shared = state.clone();
    blocking(&state, move |store| {
        let session = require_session(store, &id)?;
        let children: Vec<String> = store
            .list_sessions()
            .map_err(store_error)?
            .into_iter()
            .filter(|s| s.parent_id.as_deref() == Some(id.as_str()))
            .map(|s| s.id)
            .collect();
        let todos = store.todos(&id).map_err(store_error)?;
        let mut checkpoints = store.checkpoints(&id).map_err(store_error)?;
        checkpoints.sort_by_key(|c| std::cmp::Reverse(c.created_at_ms));
        let last_sequence = store.last_event_sequence(&id).map_err(store_error)?;
        // A store that cannot undo has undone nothing.
        let undone = match store.undo_store() {
            Ok(undo) => undo.undone_history(&id).map_err(store_error)?,
            Err(_) => Vec::new(),
        };
        let refusal = undo_refusal(store, &shared.undo, &session);
        Ok(Json(json!({
            "session": session_json(&session, &children),
            "todos": todos,
            "checkpoints": checkpoints.iter().map(checkpoint_json).collect::<Vec<_>>(),
            "lastSequence": last_sequence,
            "undone": undone,
            "undo": undo_json(&shared.undo),
            "undoAvailable": refusal.is_none(),
            "undoRefusal": refusal.map(|(_, message)| message),
        })))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    #[serde(default)]
    after: u64,
    limit: Option<u64>,
}

/// A page of events after a sequence.
async fn events(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(page): Query<PageQuery>,
) -> ApiResult {
    blocking(&state, move |store| {
        let limit = page.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
        Ok(Json(events_page(store, &id, page.after, limit)?))
    })
    .await
}

fn events_page(
    store: &dyn SessionStore,
    id: &str,
    after: u64,
    limit: u64,
) -> Result<Value, Response> {
    // One more than asked says whether there is more without a second query.
    let mut events = store
        .events_page(id, after, limit + 1)
        .map_err(store_error)?;
    let more = events.len() as u64 > limit;
    events.truncate(limit as usize);
    let next_after = events.last().map_or(after, |event| event.sequence);
    Ok(json!({"events": events, "nextAfter": next_after, "more": more}))
}

/// Server-sent events: every event after `after`, as pages, while the session grows.
async fn live(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>>, Response> {
    {
        let id = id.clone();
        blocking(&state, move |store| require_session(store, &id)).await?;
    }
    // Subscribed before the first read, so no commit falls between the read and the wait.
    let news = state.feed.as_ref().map(crate::live::Feed::subscribe);
    let stream = futures_util::stream::unfold(
        (state, id, page.after, news),
        |(state, id, after, mut news)| async move {
            loop {
                let (lookup_id, store) = (id.clone(), state.store.clone());
                let page =
                    tokio::task::spawn_blocking(move || -> Result<Option<Value>, Response> {
                        let last = store.last_event_sequence(&lookup_id).map_err(store_error)?;
                        if last <= after {
                            return Ok(None);
                        }
                        events_page(&*store, &lookup_id, after, MAX_PAGE).map(Some)
                    })
                    .await;
                match page {
                    Ok(Ok(Some(page))) => {
                        let next = page["nextAfter"].as_u64().unwrap_or(after);
                        let event = SseEvent::default().event("events").data(page.to_string());
                        return Some((Ok(event), (state, id, next, news)));
                    }
                    Ok(Ok(None)) => {
                        crate::live::wait_for_events(state.feed.as_ref(), &mut news, &id, after)
                            .await;
                    }
                    // The session is gone (pruned) or the store failed: the stream ends and the
                    // browser's EventSource reconnects later.
                    _ => return None,
                }
            }
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A turn's checkpoint and its change list.
async fn turn(
    State(state): State<Arc<AppState>>,
    Path((id, turn)): Path<(String, String)>,
) -> ApiResult {
    blocking(&state, move |store| {
        require_session(store, &id)?;
        let checkpoint = store
            .checkpoints(&id)
            .map_err(store_error)?
            .into_iter()
            .find(|c| c.turn_id == turn)
            .ok_or_else(|| {
                error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no checkpoint for turn {turn:?} in session {id:?}"),
                )
            })?;
        let files = store.change_list(&id, &turn).map_err(store_error)?;
        Ok(Json(
            json!({"sessionId": id, "checkpoint": checkpoint_json(&checkpoint), "files": files}),
        ))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct DiffQuery {
    path: String,
}

/// One path's diff in one turn (each side ≤ 64 KiB).
async fn diff(
    State(state): State<Arc<AppState>>,
    Path((id, turn)): Path<(String, String)>,
    Query(query): Query<DiffQuery>,
) -> ApiResult {
    blocking(&state, move |store| {
        require_session(store, &id)?;
        match store.diff(&id, &turn, &query.path).map_err(store_error)? {
            Some(diff) => Ok(Json(json!(diff))),
            None => Err(error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("turn {turn} did not change {}", query.path),
            )),
        }
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactQuery {
    offset: Option<u64>,
    length: Option<u64>,
    line: Option<u64>,
    lines: Option<u64>,
}

/// A page of an artifact: by bytes (`offset`, `length`) or by lines (`line` from 1, `lines`).
async fn artifact(
    State(state): State<Arc<AppState>>,
    Path((id, artifact)): Path<(String, String)>,
    Query(query): Query<ArtifactQuery>,
) -> ApiResult {
    blocking(&state, move |store| {
        require_session(store, &id)?;
        let content = store
            .read_artifact(&id, &artifact)
            .map_err(store_error)?
            .ok_or_else(|| {
                error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    format!("no artifact {artifact:?} in session {id:?}"),
                )
            })?;
        Ok(Json(artifact_page(&artifact, &content, &query)?))
    })
    .await
}

fn artifact_page(id: &str, content: &[u8], query: &ArtifactQuery) -> Result<Value, Response> {
    let total_bytes = content.len() as u64;
    let total_lines = content.split(|b| *b == b'\n').count() as u64
        - u64::from(content.ends_with(b"\n") || content.is_empty());
    if query.line.is_some() || query.lines.is_some() {
        if query.offset.is_some() || query.length.is_some() {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "page an artifact by bytes (offset, length) or by lines (line, lines), not both",
            ));
        }
        let first = query.line.unwrap_or(1);
        if first == 0 {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "lines count from 1",
            ));
        }
        let count = query.lines.unwrap_or(200).clamp(1, ARTIFACT_PAGE_MAX_LINES);
        let mut text = Vec::new();
        for line in content
            .split_inclusive(|b| *b == b'\n')
            .skip((first - 1) as usize)
            .take(count as usize)
        {
            text.extend_from_slice(line);
        }
        let last = (first + count - 1).min(total_lines);
        return Ok(json!({
            "artifactId": id, "totalBytes": total_bytes, "totalLines": total_lines,
            "line": first, "lastLine": last, "text": String::from_utf8_lossy(&text),
            "nextLine": (last < total_lines).then_some(last + 1),
        }));
    }
    let offset = query.offset.unwrap_or(0).min(total_bytes);
    let length = query
        .length
        .unwrap_or(16 * 1024)
        .clamp(1, ARTIFACT_PAGE_MAX_BYTES);
    let end = (offset + length).min(total_bytes);
    let slice = &content[offset as usize..end as usize];
    Ok(json!({
        "artifactId": id, "totalBytes": total_bytes, "totalLines": total_lines,
        "offset": offset, "end": end, "text": String::from_utf8_lossy(slice),
        "nextOffset": (end < total_bytes).then_some(end),
    }))
}

#[derive(Debug, Deserialize)]
struct UndoRequest {
    scope: UndoScope,
    #[serde(default)]
    confirm: bool,
}

/// Why undo is refused for this session from this server, as an error code and a message
/// (`None` = allowed).
fn undo_refusal(
    store: &dyn SessionStore,
    undo: &UndoWorkspace,
    session: &SessionInfo,
) -> Option<(&'static str, String)> {
    if let Err(reason) = store.undo_store() {
        return Some(("undo_unsupported", reason.to_owned()));
    }
    match undo {
        UndoWorkspace::Off(reason) => Some(("undo_off", reason.clone())),
        UndoWorkspace::In(root) if root.display().to_string() != session.workspace_root => Some((
            "workspace_mismatch",
            format!(
                "session {} works in {}; this server undoes only in {}: start \
                     `clawsmith web --workspace {}` to undo it",
                session.id,
                session.workspace_root,
                root.display(),
                session.workspace_root
            ),
        )),
        UndoWorkspace::In(_) => None,
    }
}

fn undo_workspace(
    store: &dyn SessionStore,
    state: &AppState,
    session: &SessionInfo,
) -> Result<Workspace, Response> {
    if let Some((code, reason)) = undo_refusal(store, &state.undo, session) {
        return Err(error(StatusCode::CONFLICT, code, reason));
    }
    Workspace::open(std::path::Path::new(&session.workspace_root)).map_err(|e| {
        error(
            StatusCode::CONFLICT,
            "workspace_unavailable",
            format!("opening the workspace {}: {e}", session.workspace_root),
        )
    })
}

/// The store's undo, or the refusal [`undo_refusal`] names.
fn undoer(store: &dyn SessionStore) -> Result<&dyn clawsmith_store::UndoStore, Response> {
    store
        .undo_store()
        .map_err(|reason| error(StatusCode::CONFLICT, "undo_unsupported", reason))
}

fn parse_undo(body: &[u8]) -> Result<UndoRequest, Response> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("the body must be {{\"scope\": \"files\"|\"session\"|\"all\"}}: {e}"),
        )
    })
}

/// The precheck of an undo, without the undo: what it would restore, remove, and refuse.
async fn undo_preview(
    State(state): State<Arc<AppState>>,
    Path((id, turn)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> ApiResult {
    let request = parse_undo(&body)?;
    let shared = state.clone();
    blocking(&state, move |store| {
        let session = require_session(store, &id)?;
        let workspace = undo_workspace(store, &shared, &session)?;
        let preview = undoer(store)?
            .undo_preview(&id, &turn, request.scope, &workspace)
            .map_err(store_error)?;
        Ok(Json(preview_json(&preview)))
    })
    .await
}

fn preview_json(preview: &UndoPreview) -> Value {
    json!({
        "sessionId": preview.session_id, "turnId": preview.turn_id, "scope": preview.scope,
        "alreadyUndone": preview.already_undone, "turns": preview.turns,
        "restore": preview.restore, "remove": preview.remove,
        "alreadyAsBefore": preview.already_as_before,
        "conflicts": conflicts_json(&preview.conflicts),
    })
}

fn conflicts_json(conflicts: &[clawsmith_store::UndoConflict]) -> Vec<Value> {
    conflicts
        .iter()
        .map(|c| {
            json!({"path": c.path, "turnId": c.turn_id, "expectedSha256": c.expected_sha256,
                   "foundSha256": c.found_sha256, "reason": c.reason})
        })
        .collect()
}

/// The undo itself, confirmed: under the session's lease, in the server's workspace only.
async fn undo(
    State(state): State<Arc<AppState>>,
    Path((id, turn)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Result<Response, Response> {
    let request = parse_undo(&body)?;
    if !request.confirm {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "confirmation_required",
            "an undo needs \"confirm\": true (preview it first)",
        ));
    }
    let shared = state.clone();
    let report = blocking(&state, move |store| {
        let session = require_session(store, &id)?;
        let workspace = undo_workspace(store, &shared, &session)?;
        let undo = undoer(store)?;
        // One writer per session, as `clawsmith undo`: a running turn refuses the undo.
        let _lease = store.lease_session(&id).map_err(store_error)?;
        undo.recover_session_restores(&workspace, &id)
            .map_err(store_error)?;
        undo.undo(&id, &turn, request.scope, &workspace)
            .map_err(store_error)
    })
    .await?;
    let status = match report.outcome {
        UndoOutcome::Conflicts(_) => StatusCode::CONFLICT,
        _ => StatusCode::OK,
    };
    Ok((status, Json(report_json(&report))).into_response())
}

fn report_json(report: &UndoReport) -> Value {
    let (outcome, conflicts) = match &report.outcome {
        UndoOutcome::Undone => ("undone", Vec::new()),
        UndoOutcome::AlreadyUndone => ("already_undone", Vec::new()),
        UndoOutcome::Conflicts(list) => ("conflicts", conflicts_json(list)),
    };
    let conflicts_empty = conflicts.is_empty();
    let mut body = json!({
        "sessionId": report.session_id, "turnId": report.turn_id, "scope": report.scope,
        "outcome": outcome, "turns": report.turns, "restored": report.restored,
        "removed": report.removed, "removedDirectories": report.removed_directories,
        "alreadyAsBefore": report.already_as_before, "conflicts": conflicts,
    });
    if !conflicts_empty {
        body["error"] = json!({"code": "undo_conflicts", "message": format!(
            "refused: {} file(s) changed since the agent wrote them; nothing was changed",
            body["conflicts"].as_array().map_or(0, Vec::len)
        )});
    }
    body
}
