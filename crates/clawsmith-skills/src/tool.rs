//! The one `Tool` implementation behind the crate's read tools: read risk, `filesystem.read`,
//! concurrency-safe, the schema from the input type, cancellation and argument errors as
//! results, and the work (file reads, SQLite) on a blocking thread.

use std::sync::Arc;

use clawsmith_protocol::{
    Capability, CapabilityDeclaration, ErrorCode, Risk, Tool, ToolExecutionContext,
    ToolExecutionResult, ToolFuture, ToolOutput,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// What distinguishes one read tool of this crate from another.
pub trait ReadTool: Send + Sync + 'static {
    /// The arguments (`deny_unknown_fields`); their schema is what the model sees.
    type Input: DeserializeOwned + JsonSchema + Send + 'static;
    /// The tool's name.
    const NAME: &'static str;
    /// What the model reads.
    fn description(&self) -> &str;
    /// One line for UIs and approval prompts.
    fn summarize(input: &Self::Input) -> String;
    /// The call; every failure is a result.
    fn run(&self, input: Self::Input) -> ToolExecutionResult;
}

/// A [`ReadTool`] as a [`Tool`].
pub struct ReadOnly<T> {
    inner: Arc<T>,
    schema: serde_json::Value,
}

impl<T: ReadTool> ReadOnly<T> {
    pub(crate) fn wrap(inner: T) -> ReadOnly<T> {
        ReadOnly {
            inner: Arc::new(inner),
            schema: schemars::schema_for!(T::Input).to_value(),
        }
    }

    /// The tool's own state.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for ReadOnly<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(formatter)
    }
}

impl<T: ReadTool> Tool for ReadOnly<T> {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn risk(&self) -> Risk {
        Risk::Read
    }

    fn capabilities(&self) -> CapabilityDeclaration {
        CapabilityDeclaration::Declared(vec![Capability::FilesystemRead])
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    fn input_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    fn summarize(&self, input: &serde_json::Value) -> String {
        match <T::Input as serde::Deserialize>::deserialize(input) {
            Ok(parsed) => T::summarize(&parsed),
            Err(_) => format!("{} (invalid arguments)", T::NAME),
        }
    }

    fn execute<'a>(
        &'a self,
        input: serde_json::Value,
        context: ToolExecutionContext,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            if context.cancellation.is_cancelled() {
                return ToolOutput::Result(ToolExecutionResult::failure(
                    ErrorCode::CANCELLED,
                    format!("{} was cancelled", T::NAME),
                ));
            }
            let input = match serde_json::from_value::<T::Input>(input) {
                Ok(input) => input,
                Err(error) => {
                    return ToolOutput::Result(ToolExecutionResult::failure(
                        ErrorCode::INVALID_ARGUMENTS,
                        format!("Invalid arguments for {}: {error}", T::NAME),
                    ));
                }
            };
            // Reads files (and, for memory, writes the index): off the async workers.
            let inner = self.inner.clone();
            let result = tokio::task::spawn_blocking(move || inner.run(input)).await;
            ToolOutput::Result(result.unwrap_or_else(|error| {
                ToolExecutionResult::tool_failed(format!("{} failed: {error}", T::NAME))
            }))
        })
    }
}
