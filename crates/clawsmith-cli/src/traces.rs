//! Traces (issue 22): the OTLP exporter from the `OTEL_EXPORTER_OTLP_*` variables and the caller's
//! trace context (`--traceparent`, else `TRACEPARENT`/`TRACESTATE`) as the parent of every turn.
//! Nothing is exported when no endpoint is set; a setting clawsmith cannot honour stops the start
//! with a message naming it.

use std::sync::OnceLock;

use anyhow::{Context, Result};
use clawsmith_core::CoreConfig;
use clawsmith_trace::otlp::{OtlpConfig, install};
use clawsmith_trace::{SpanContext, TraceParent, TraceState};

/// `--traceparent`, set once by `main` before any core is built.
static FLAG: OnceLock<TraceParent> = OnceLock::new();

/// clap's parser of `--traceparent`: strict W3C, the format named in the refusal.
pub fn parse_traceparent(value: &str) -> Result<TraceParent, String> {
    TraceParent::parse(value.trim()).map_err(|error| {
        format!(
            "{error}; a W3C traceparent is 00-<32 hex trace id>-<16 hex parent span id>-<2 hex \
             flags>, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        )
    })
}

/// Records `--traceparent` (it takes precedence over the `TRACEPARENT` variable).
pub fn set_flag(traceparent: Option<TraceParent>) {
    if let Some(traceparent) = traceparent {
        let _ = FLAG.set(traceparent);
    }
}

/// Fills `config.tracer` and `config.trace_parent` from the flag and the environment.
pub fn configure(config: &mut CoreConfig) -> Result<()> {
    let get = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
    };
    if let Some(otlp) = OtlpConfig::from_env(get)? {
        config.tracer = install(&otlp)?;
        tracing::info!(endpoint = %otlp.traces_endpoint, "exporting spans over OTLP");
    }
    if let Some(parent) = FLAG.get() {
        // TRACESTATE belongs to the TRACEPARENT it came with, not to the flag's trace.
        config.trace_parent = Some(SpanContext::from_parent(*parent, None));
    } else if let Some(value) = get("TRACEPARENT") {
        let parent = TraceParent::parse(value.trim()).context("TRACEPARENT")?;
        let state = get("TRACESTATE")
            .map(|value| TraceState::parse(&value))
            .transpose()
            .context("TRACESTATE")?;
        config.trace_parent = Some(SpanContext::from_parent(parent, state));
    }
    Ok(())
}
