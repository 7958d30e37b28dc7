//! Traces (issue 22): the OTLP exporter from the `OTEL_EXPORTER_OTLP_*` variables and the caller's
//! `TRACEPARENT`/`TRACESTATE` as the parent of every turn. Nothing is exported when no endpoint
//! is set; a setting clawsmith cannot honour stops the start with a message naming it.

use anyhow::{Context, Result};
use clawsmith_core::CoreConfig;
use clawsmith_trace::otlp::{OtlpConfig, install};
use clawsmith_trace::{SpanContext, TraceParent, TraceState};

/// Fills `config.tracer` and `config.trace_parent` from the environment.
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
    if let Some(value) = get("TRACEPARENT") {
        let parent = TraceParent::parse(value.trim()).context("TRACEPARENT")?;
        let state = get("TRACESTATE")
            .map(|value| TraceState::parse(&value))
            .transpose()
            .context("TRACESTATE")?;
        config.trace_parent = Some(SpanContext::from_parent(parent, state));
    }
    Ok(())
}
