//! Long calls as MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663).
//!
//! For a client that declared the extension, a call of a long-running tool ([`TASK_TOOLS`])
//! that has not finished after [`TASK_AFTER`] is answered with a task handle instead of making
//! the request wait: the call goes on as the same turn, and the client polls `tasks/get` for its
//! status and, once done, its result, or ends it with `tasks/cancel` (the turn's cancellation,
//! as `notifications/cancelled` would before the handle). A call that ends sooner is answered as
//! any other. Finished tasks are kept [`TASK_TTL`] for `tasks/get`, at most [`MAX_TASKS`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload,
    TaskStatus,
};
use tokio_util::sync::CancellationToken;

/// Tools whose calls may become tasks.
pub const TASK_TOOLS: &[&str] = &["run_command", "delegate_task"];

/// How long a call runs before it becomes a task.
pub const TASK_AFTER: Duration = Duration::from_secs(1);

/// How long a task is kept after it was created, for `tasks/get`.
pub const TASK_TTL: Duration = Duration::from_secs(30 * 60);

/// Tasks kept at most (the oldest finished ones go first).
pub const MAX_TASKS: usize = 256;

/// The polling interval suggested to clients.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A task's state.
enum State {
    Working,
    Done(Result<CallToolResponse, ErrorData>),
}

struct Entry {
    created: SystemTime,
    updated: SystemTime,
    state: State,
    cancel: CancellationToken,
    cancelled: bool,
}

/// The tasks of one server.
#[derive(Default)]
pub(crate) struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Tasks {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a working task whose call is cancelled through `cancel`; its handle.
    pub(crate) fn start(&self, id: &str, cancel: CancellationToken) -> CreateTaskResult {
        let now = SystemTime::now();
        let mut entries = self.entries();
        entries.retain(|_, entry| {
            now.duration_since(entry.created)
                .is_ok_and(|age| age < TASK_TTL)
                || matches!(entry.state, State::Working)
        });
        while entries.len() >= MAX_TASKS {
            let oldest = entries
                .iter()
                .filter(|(_, entry)| matches!(entry.state, State::Done(_)))
                .min_by_key(|(_, entry)| entry.created)
                .map(|(id, _)| id.clone());
            let Some(oldest) = oldest else { break };
            entries.remove(&oldest);
        }
        entries.insert(
            id.to_owned(),
            Entry {
                created: now,
                updated: now,
                state: State::Working,
                cancel,
                cancelled: false,
            },
        );
        CreateTaskResult::new(task(id, TaskStatus::Working, now, now))
    }

    /// Records the call's end.
    pub(crate) fn finish(&self, id: &str, outcome: Result<CallToolResponse, ErrorData>) {
        if let Some(entry) = self.entries().get_mut(id) {
            entry.updated = SystemTime::now();
            entry.state = State::Done(outcome);
        }
    }

    /// `tasks/get`.
    pub(crate) fn get(&self, id: &str) -> Result<GetTaskResult, ErrorData> {
        let entries = self.entries();
        let entry = entries.get(id).ok_or_else(|| unknown(id))?;
        let payload = match &entry.state {
            State::Working => TaskPayload::Working,
            State::Done(Ok(CallToolResponse::Complete(result))) => {
                let cancelled = entry.cancelled
                    && result
                        .structured_content
                        .as_ref()
                        .and_then(|content| content.get("status"))
                        .is_some_and(|status| status == "cancelled");
                if cancelled {
                    TaskPayload::Cancelled
                } else {
                    TaskPayload::Completed {
                        result: as_object(serde_json::to_value(result)),
                    }
                }
            }
            State::Done(Ok(_)) => TaskPayload::Failed {
                error: as_object(serde_json::to_value(ErrorData::internal_error(
                    "the call needs an answer a task cannot ask for: call it again without \
                     the tasks extension",
                    None,
                ))),
            },
            State::Done(Err(error)) => TaskPayload::Failed {
                error: as_object(serde_json::to_value(error)),
            },
        };
        let base = task(id, payload.status(), entry.created, entry.updated);
        Ok(GetTaskResult::new(DetailedTask::new(base, payload)))
    }

    /// `tasks/cancel`: asks the call to end; `tasks/get` shows when it has.
    pub(crate) fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let mut entries = self.entries();
        let entry = entries.get_mut(id).ok_or_else(|| unknown(id))?;
        if matches!(entry.state, State::Working) {
            entry.cancelled = true;
            entry.cancel.cancel();
        }
        Ok(())
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("no task {id:?} (finished tasks are kept 30 minutes)"),
        None,
    )
}

fn as_object(value: Result<serde_json::Value, serde_json::Error>) -> JsonObject {
    match value {
        Ok(serde_json::Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

fn task(id: &str, status: TaskStatus, created: SystemTime, updated: SystemTime) -> Task {
    Task::new(id, status, utc_timestamp(created), utc_timestamp(updated))
        .with_ttl_ms(u64::try_from(TASK_TTL.as_millis()).unwrap_or(u64::MAX))
        .with_poll_interval_ms(u64::try_from(POLL_INTERVAL.as_millis()).unwrap_or(250))
}

/// `2026-12-06T03:21:14.123Z` (ISO 8601, UTC).
fn utc_timestamp(at: SystemTime) -> String {
    let ms = at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
    });
    clawsmith_core::time::utc_time(ms, true)
}
