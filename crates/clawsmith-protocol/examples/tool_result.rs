//! A tool of your own, on clawsmith-protocol alone: declare it, run it, and read the structured
//! results it answers with, as a runtime or a client would.
//!
//! Run it with `cargo run -p clawsmith-protocol --example tool_result`.

use std::error::Error;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use clawsmith_protocol::{
    CapabilityDeclaration, Display, DisplayKind, ErrorCode, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput, ToolStatus, infer_status_from_content,
};
use serde_json::{Value, json};

/// Counts the words of the `text` argument. Pure: it reads nothing and changes nothing.
struct WordCount;

impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }

    fn description(&self) -> &str {
        "Count the words of a text."
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        // It touches nothing: no files, no processes, no network.
        CapabilityDeclaration::Declared(Vec::new())
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false,
        })
    }

    fn summarize(&self, input: &Value) -> String {
        let length = input["text"].as_str().map_or(0, str::len);
        format!("count the words of {length} bytes")
    }

    fn execute<'a>(&'a self, input: Value, _context: ToolExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            // A failure the model should read is a result, never an `Err` or a panic.
            let Some(text) = input["text"].as_str() else {
                return ToolExecutionResult::failure(
                    ErrorCode::INVALID_ARGUMENTS,
                    "`text` must be a string",
                )
                .into();
            };
            let words = text.split_whitespace().count();
            ToolExecutionResult::success(format!("{words} words"))
                .with_display(
                    Display::new(DisplayKind::Text)
                        .with_title("word_count")
                        .with_field("words", words),
                )
                .into()
        })
    }
}

/// The protocol needs no async runtime: a tool that never waits is ready on its first poll.
fn run_now(future: ToolFuture<'_>) -> Result<ToolOutput, Box<dyn Error>> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => Ok(output),
        Poll::Pending => Err("this example's tool should never wait".into()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let tool = WordCount;
    let context = ToolExecutionContext::new("ses_example", "turn_example", "call_1");

    // A good call: a success whose content is what the model sees, and a display for people.
    let input = json!({"text": "the quick brown fox"});
    println!("{}: {}", tool.name(), tool.summarize(&input));
    let ToolOutput::Result(result) = run_now(tool.execute(input, context.clone()))? else {
        return Err("word_count answers with a ToolExecutionResult".into());
    };
    assert_eq!(result.status(), ToolStatus::Success);
    assert_eq!(result.content, "4 words");
    let wire = serde_json::to_string_pretty(&result)?;
    println!("{wire}");

    // A bad call: the code decides the status and whether a retry can help.
    let ToolOutput::Result(refused) = run_now(tool.execute(json!({"text": 7}), context))? else {
        return Err("word_count answers with a ToolExecutionResult".into());
    };
    assert_eq!(refused.status(), ToolStatus::Error);
    assert_eq!(refused.code(), Some(&ErrorCode::INVALID_ARGUMENTS));
    assert_eq!(refused.metadata.retryable, Some(true));
    println!("{}", serde_json::to_string(&refused)?);

    // Parsing what another runtime sent: the same types read the wire back.
    let received: ToolExecutionResult = serde_json::from_str(
        r#"{"version":1,"status":"denied","code":"permission_denied","retryable":false,
            "content":"Denied: edit_file needs approval in ask mode"}"#,
    )?;
    assert_eq!(received.status(), ToolStatus::Denied);
    assert_eq!(
        received.code().map(ErrorCode::status),
        Some(ToolStatus::Denied)
    );
    // History written before results carried a status is read from the content's prefix.
    assert_eq!(
        infer_status_from_content(&received.content),
        ToolStatus::Denied
    );
    // What a tool message stores: the status without the content or display.
    println!("{}", serde_json::to_string(&received.summary())?);

    // Round trip: what is written is what is read.
    assert_eq!(serde_json::from_str::<ToolExecutionResult>(&wire)?, result);
    Ok(())
}
