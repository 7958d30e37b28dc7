//! Trace context and span recording for clawsmith.
//!
//! A tool call should appear in the same distributed trace as the request that caused it. This
//! crate holds the pieces every layer shares:
//!
//! - [`TraceParent`] and [`TraceState`]: the W3C Trace Context headers, parsed strictly (a
//!   malformed header is an error naming the rule it broke, never half-read) and formatted
//!   (always version `00`). [`TraceId`] and [`SpanId`] make fresh random ids.
//! - [`semconv`]: span and attribute names of the OpenTelemetry GenAI semantic conventions
//!   (`execute_tool`, `gen_ai.tool.name`, …) and clawsmith's own (`clawsmith.risk`, …), as
//!   constants, so the core, the MCP sides and the front end name things alike.
//! - [`Tracer`], [`Span`], [`SpanSink`]: a span recorder the core calls without knowing about
//!   OpenTelemetry. A span records into plain data ([`FinishedSpan`]) and hands it to the sink
//!   when it ends (or is dropped, so a refusal that returns early still closes its span).
//!
//! Decisions:
//! - **No OpenTelemetry types in the recorder.** The `opentelemetry` crates bring a global
//!   provider and many dependencies; the core only needs ids, names and a place to put finished
//!   spans. The OTLP exporter is one [`SpanSink`].
//! - **The default costs nothing measurable.** [`Tracer::noop`] holds no sink; starting a span is
//!   one branch, the span name closure is never called, attributes are ignored. Callers that
//!   build costly attribute values check [`Span::is_recording`].
//! - **A tracer without a sink still propagates.** Given an incoming parent, a non-recording span
//!   carries the parent's context unchanged, so `TRACEPARENT` still reaches commands and MCP
//!   servers (the W3C rule for a participant that does not trace). An unsampled parent gives a
//!   fresh span id that is not recorded.
//! - **Ids from the standard library.** 64-bit halves from a randomly keyed SipHash over a counter
//!   and the clock, like clawsmith-protocol's ids: unique, not secret, no `rand`.
//!
//! - **Export behind a feature.** With feature `otlp`, the module `otlp` reads the standard
//!   `OTEL_EXPORTER_OTLP_*` variables and exports through the OpenTelemetry SDK's batch processor
//!   (a bounded queue on its own thread: export never blocks or fails a call). The core builds
//!   this crate without the feature; the CLI turns it on.
//!
//! - **Propagation is text at the seams.** The core hands each call's span to its tool as
//!   `clawsmith_protocol::TraceHeaders` (`traceparent`, `tracestate` strings): the sandbox sets
//!   `TRACEPARENT`/`TRACESTATE` for `run_command` and plugin processes, the MCP client writes
//!   `_meta.traceparent`. Incoming context (an MCP request's `_meta`, `--traceparent`,
//!   `TRACEPARENT`) is parsed here and becomes the parent of a turn.
//! - **Bounded exit.** [`SpanSink::finish`] (the OTLP sink's) waits at most its bound for the
//!   collector and returns an [`ExportTally`] (spans taken vs. acknowledged), which the CLI logs
//!   as a warning when spans were lost.
//! - **Exporters on a runtime of their own.** `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` uses
//!   opentelemetry-otlp's `grpc-tonic` exporter (HTTP/2, cleartext or TLS); HTTP uses its
//!   exporter with this crate's `HttpClient` over reqwest. Both need a tokio runtime for their
//!   connections and requests, and the SDK's batch processor runs a plain thread with a blocking
//!   executor; so the exporter owns a tokio runtime with one worker thread, is built inside it,
//!   and each export is spawned there and awaited from the batch thread. The batch processor,
//!   its bounded queue, the drop counting and the bounded flush at exit are the same for every
//!   protocol. For gRPC the endpoint is the collector's address, used as-is (no `/v1/traces`),
//!   and `OTEL_EXPORTER_OTLP_HEADERS` become gRPC metadata. Cost: one idle thread while
//!   exporting; nothing when no export is configured.
//! - **TLS on the workspace's one stack.** `https://` endpoints use rustls with ring and the
//!   webpki roots, the stack the agent's providers already link (reqwest 0.12), plus the
//!   authorities and client identity the `OTEL_EXPORTER_OTLP_*CERTIFICATE`/`*CLIENT_KEY` files
//!   name. opentelemetry-otlp's own HTTP clients are reqwest 0.13, whose rustls feature brings
//!   aws-lc-rs (a C build with cmake) and the platform verifier, so the HTTP exporter gets an
//!   `HttpClient` of this crate over reqwest 0.12 instead (and reqwest 0.13 left the tree);
//!   tonic's TLS (`tls-ring`, `tls-webpki-roots`) is the same rustls.
//!
//! Not here: sampling beyond the parent's `sampled` flag, baggage, span links, metrics and logs.

mod context;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod semconv;
mod span;

pub use context::{SpanId, TraceContextError, TraceFlags, TraceId, TraceParent, TraceState};
pub use span::{
    Attribute, AttributeValue, ExportTally, FinishedSpan, MemorySink, Span, SpanContext, SpanEvent,
    SpanSink, SpanStatus, Tracer,
};
