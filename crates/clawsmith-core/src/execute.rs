//! Step 10 of the pipeline (and 11, A3): one tool's execution, in a task of its own, with the
//! call's timeout and the turn's cancellation watched. Apart from `pipeline.rs`, which runs a
//! call through the command capture (`capture.rs`), because the capture runs the tool itself:
//! both use this module, and neither the other.

use std::sync::Arc;
use std::time::Duration;

use clawsmith_protocol::{
    CancellationSignal, ErrorCode, ToolExecutionContext, ToolExecutionResult,
};
use tokio::task::JoinHandle;

use crate::normalize::normalize_output;
use crate::table::ToolEntry;

/// How long a call may run and how long a stopped one may take to return
/// ([`crate::CoreConfig::call_timeout`], [`crate::CoreConfig::cancel_grace`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExecutionLimits {
    /// `None`: no limit (cancellation still works).
    pub call_timeout: Option<Duration>,
    pub cancel_grace: Duration,
}

/// Step 10 (and 11, A3): runs the tool in its own task so a panic becomes `tool_failed`, with
/// the turn's cancellation and the call timeout watched. A tool that ignores cancellation is
/// given `cancel_grace` to return, then abandoned (its task aborted).
pub(crate) async fn execute_tool(
    limits: ExecutionLimits,
    entry: &ToolEntry,
    input: serde_json::Value,
    context: ToolExecutionContext,
    turn_cancellation: &CancellationSignal,
) -> ToolExecutionResult {
    let name = entry.name().to_owned();
    if turn_cancellation.is_cancelled() {
        return ToolExecutionResult::failure(
            ErrorCode::CANCELLED,
            format!("{name} was cancelled before it ran."),
        );
    }
    let call_signal = CancellationSignal::new();
    let context = context.with_cancellation(call_signal.clone());
    let tool = Arc::clone(entry.tool());
    let mut handle: JoinHandle<clawsmith_protocol::ToolOutput> =
        tokio::spawn(async move { tool.execute(input, context).await });
    let timeout = limits.call_timeout;
    let deadline = async move {
        match timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending::<()>().await,
        }
    };
    let timed_out = tokio::select! {
        joined = &mut handle => return joined_result(&name, joined),
        () = turn_cancellation.cancelled() => false,
        () = deadline => true,
    };
    call_signal.cancel();
    let late = tokio::time::timeout(limits.cancel_grace, &mut handle).await;
    match late {
        Ok(joined) => {
            let result = joined_result(&name, joined);
            if timed_out && result.status() != clawsmith_protocol::ToolStatus::Success {
                timed_out_result(&name, timeout)
            } else {
                result
            }
        }
        Err(_) => {
            handle.abort();
            if timed_out {
                timed_out_result(&name, timeout)
            } else {
                ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    format!("{name} was cancelled and abandoned after it did not stop."),
                )
            }
        }
    }
}

fn timed_out_result(name: &str, timeout: Option<Duration>) -> ToolExecutionResult {
    let seconds = timeout.map_or(0.0, |limit| limit.as_secs_f64());
    ToolExecutionResult::tool_failed(format!("{name} did not finish within {seconds} s."))
}

fn joined_result(
    name: &str,
    joined: Result<clawsmith_protocol::ToolOutput, tokio::task::JoinError>,
) -> ToolExecutionResult {
    match joined {
        Ok(output) => normalize_output(output),
        Err(error) if error.is_panic() => {
            let payload = error.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            ToolExecutionResult::tool_failed(format!("Tool {name} panicked: {message}"))
        }
        Err(_) => {
            ToolExecutionResult::failure(ErrorCode::CANCELLED, format!("{name} was cancelled."))
        }
    }
}
