//! Traces: the OTLP exporter from the `OTEL_EXPORTER_OTLP_*` variables and the caller's
//! trace context (`--traceparent`, else `TRACEPARENT`/`TRACESTATE`) as the parent of every turn.
//! Nothing is exported when no endpoint is set; a setting clawsmith cannot honour stops the start
//! with a message naming it.

use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result};
use clawsmith_core::CoreConfig;
use clawsmith_trace::otlp::{OtlpConfig, install};
use clawsmith_trace::{SpanContext, TraceParent, TraceState, Tracer};

/// `--traceparent`, set once by `main` before any core is built.
static FLAG: OnceLock<TraceParent> = OnceLock::new();

/// The exporting tracer, kept for [`finish`].
static EXPORTER: OnceLock<Tracer> = OnceLock::new();

/// How long the process waits at exit for the collector to take the last spans. A collector
/// that is down or hangs delays the exit of `call`, `turn`, `run` and `mcp` by at most this.
pub const EXIT_FLUSH_BOUND: Duration = Duration::from_secs(3);

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
        let _ = EXPORTER.set(config.tracer.clone());
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

/// At exit: sends the spans still queued (waiting at most [`EXIT_FLUSH_BOUND`]) and logs a
/// warning naming how many never reached the collector. Nothing when nothing was exported.
pub fn finish() {
    let Some(tally) = EXPORTER
        .get()
        .and_then(|tracer| tracer.finish(EXIT_FLUSH_BOUND))
    else {
        return;
    };
    if tally.lost() > 0 {
        tracing::warn!(
            lost = tally.lost(),
            finished = tally.finished,
            "{} of {} spans were not exported (the OTLP collector was unreachable, refused them, \
             or did not answer within {} s)",
            tally.lost(),
            tally.finished,
            EXIT_FLUSH_BOUND.as_secs()
        );
    }
}
