//! OTLP export (feature `otlp`): [`OtlpConfig::from_env`] reads the standard `OTEL_*` variables,
//! [`install`] turns them into a [`Tracer`] whose sink hands each finished span to the
//! OpenTelemetry SDK's batch processor.
//!
//! The batch processor owns a bounded queue (2048 spans) and a thread of its own that posts
//! batches with a blocking HTTP client, so [`SpanSink::export`] never waits on the network: a
//! full queue drops the span and the call goes on. [`SpanSink::flush`] sends what is queued;
//! each export request times out after 10 s. [`SpanSink::finish`] is the flush at exit: it waits
//! for the collector at most its bound (the flush runs on a thread of its own, abandoned when the
//! bound passes) and tallies the spans the sink took against those a collector acknowledged, so
//! the front end can say how many were lost (queue full, collector down or too slow).
//!
//! Supported: `http/protobuf` (the default), `http/json` and `grpc`, all over plain HTTP (gRPC
//! over cleartext HTTP/2). For HTTP the endpoint `OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces`
//! appended; for gRPC it is used as-is (the OTLP exporter spec: the collector's address, usually
//! `http://localhost:4317`). `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is always used as-is, and
//! `OTEL_EXPORTER_OTLP_HEADERS` become request headers or gRPC metadata. An unknown protocol and
//! `https://` endpoints are refused with an error naming what is supported (why: the crate
//! essay's "No HTTPS").
//!
//! The gRPC exporter (tonic) needs a tokio runtime for its channel and its requests, which the
//! SDK's batch thread does not have: the sink owns a runtime with one worker thread, the exporter
//! is built inside it and each export runs there while the batch thread waits for its result
//! (`OnRuntime`). Queue, drop counting, [`SpanSink::flush`] and the bounded
//! [`SpanSink::finish`] are the same as for HTTP.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status, TraceState as OtelTraceState};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanEvents, SpanExporter, SpanLinks,
    SpanProcessor,
};

use crate::span::{AttributeValue, ExportTally, FinishedSpan, SpanSink, SpanStatus, Tracer};

/// The transport and wire format of OTLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf`.
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
    /// `grpc` (protobuf over cleartext HTTP/2).
    Grpc,
}

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// Where spans go: the full traces URL (`…/v1/traces`) for HTTP, the collector's address
    /// (`http://host:4317`) for gRPC.
    pub traces_endpoint: String,
    /// The wire format.
    pub protocol: OtlpProtocol,
    /// Extra request headers or gRPC metadata (`OTEL_EXPORTER_OTLP_HEADERS`, e.g. an API key).
    pub headers: Vec<(String, String)>,
    /// `service.name` of the resource.
    pub service_name: String,
}

/// Why the `OTEL_*` settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpConfigError {
    /// A protocol this build does not speak.
    #[error(
        "{variable}={value} is not supported: use http/protobuf (the default), http/json or grpc"
    )]
    Protocol {
        /// The variable that named it.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// Not an `http://` URL.
    #[error(
        "{variable}={value} is not supported: only http:// endpoints (a collector on this host or network)"
    )]
    Endpoint {
        /// The variable that named it.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// A header entry without `=`.
    #[error("OTEL_EXPORTER_OTLP_HEADERS: `{entry}` is not key=value")]
    Header {
        /// The entry.
        entry: String,
    },
    /// The exporter could not be built.
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(String),
}

impl OtlpConfig {
    /// Reads the configuration through `get` (`std::env::var` in the CLI); `Ok(None)` when
    /// neither endpoint variable is set (nothing is exported).
    pub fn from_env(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let set = |name: &str| get(name).filter(|value| !value.trim().is_empty());
        let traces = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let base = set("OTEL_EXPORTER_OTLP_ENDPOINT");
        if traces.is_none() && base.is_none() {
            return Ok(None);
        }
        let protocol = match [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|variable| set(variable).map(|value| (variable, value)))
        {
            None => OtlpProtocol::HttpProtobuf,
            Some((_, value)) if value == "http/protobuf" => OtlpProtocol::HttpProtobuf,
            Some((_, value)) if value == "http/json" => OtlpProtocol::HttpJson,
            Some((_, value)) if value == "grpc" => OtlpProtocol::Grpc,
            Some((variable, value)) => return Err(OtlpConfigError::Protocol { variable, value }),
        };
        let (variable, traces_endpoint) = match (traces, base) {
            (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
            // gRPC names the service in the request, not the URL: the base is used as-is.
            (None, Some(base)) if protocol == OtlpProtocol::Grpc => {
                ("OTEL_EXPORTER_OTLP_ENDPOINT", base)
            }
            (None, Some(base)) => (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("{}/v1/traces", base.trim_end_matches('/')),
            ),
            (None, None) => return Ok(None),
        };
        if !traces_endpoint.starts_with("http://") {
            return Err(OtlpConfigError::Endpoint {
                variable,
                value: traces_endpoint,
            });
        }
        let mut headers = Vec::new();
        for source in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for entry in set(source)
                .unwrap_or_default()
                .split(',')
                .filter(|entry| !entry.trim().is_empty())
            {
                let Some((key, value)) = entry.split_once('=') else {
                    return Err(OtlpConfigError::Header {
                        entry: entry.trim().to_owned(),
                    });
                };
                headers.push((key.trim().to_owned(), percent_decode(value.trim())));
            }
        }
        let service_name = set("OTEL_SERVICE_NAME").unwrap_or_else(|| "clawsmith".to_owned());
        Ok(Some(OtlpConfig {
            traces_endpoint,
            protocol,
            headers,
            service_name,
        }))
    }
}

/// A tracer exporting to `config`'s collector.
pub fn install(config: &OtlpConfig) -> Result<Tracer, OtlpConfigError> {
    let exported = Arc::new(AtomicU64::new(0));
    let resource = Resource::builder_empty()
        .with_service_name(config.service_name.clone())
        .build();
    let protocol = match config.protocol {
        OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
        OtlpProtocol::HttpJson => Protocol::HttpJson,
        OtlpProtocol::Grpc => {
            let exporter = OnRuntime::grpc(config)?;
            return Ok(tracer(exporter, &resource, exported));
        }
    };
    let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(config.traces_endpoint.clone())
        .with_protocol(protocol)
        .with_headers(headers)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|error| OtlpConfigError::Exporter(error.to_string()))?;
    Ok(tracer(exporter, &resource, exported))
}

/// The tracer over `exporter`: counted, behind the bounded batch processor.
fn tracer<E: SpanExporter + 'static>(
    exporter: E,
    resource: &Resource,
    exported: Arc<AtomicU64>,
) -> Tracer {
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUE)
        .build();
    let exporter = CountingExporter {
        inner: exporter,
        exported: Arc::clone(&exported),
    };
    let mut processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    processor.set_resource(resource);
    let scope = InstrumentationScope::builder("clawsmith")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    Tracer::new(Arc::new(OtlpSink {
        processor: Arc::new(processor),
        scope,
        finished: AtomicU64::new(0),
        exported,
    }))
}

const MAX_QUEUE: usize = 2048;
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

struct OtlpSink {
    processor: Arc<BatchSpanProcessor>,
    scope: InstrumentationScope,
    /// Spans handed to the processor.
    finished: AtomicU64,
    /// Spans the collector accepted (counted by [`CountingExporter`]).
    exported: Arc<AtomicU64>,
}

/// The OTLP exporter, counting the spans of every batch the collector accepted.
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
    exported: Arc<AtomicU64>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.inner.export(batch).await;
        if result.is_ok() {
            self.exported.fetch_add(spans, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// An exporter that must run on a tokio runtime (tonic's), driven from the SDK's batch thread:
/// each export is spawned on the runtime's one worker and awaited there, so the batch thread's
/// plain executor only waits for the result.
#[derive(Debug)]
struct OnRuntime<E> {
    inner: Arc<E>,
    /// `None` once dropped (shut down in the background: dropping a runtime blocks).
    runtime: Option<tokio::runtime::Runtime>,
}

impl OnRuntime<opentelemetry_otlp::SpanExporter> {
    /// The gRPC exporter for `config`, on a runtime of its own.
    fn grpc(config: &OtlpConfig) -> Result<Self, OtlpConfigError> {
        use opentelemetry_otlp::WithTonicConfig;
        use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};

        let mut metadata = MetadataMap::new();
        for (key, value) in &config.headers {
            let invalid = || {
                OtlpConfigError::Exporter(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: `{key}` is not usable as gRPC metadata"
                ))
            };
            let name = MetadataKey::from_bytes(key.to_ascii_lowercase().as_bytes())
                .map_err(|_| invalid())?;
            let value = MetadataValue::try_from(value.as_str()).map_err(|_| invalid())?;
            metadata.append(name, value);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("clawsmith-otlp-grpc")
            .enable_all()
            .build()
            .map_err(|error| OtlpConfigError::Exporter(error.to_string()))?;
        // tonic's lazy channel spawns its worker task: build inside the runtime.
        let built = {
            let _entered = runtime.enter();
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(config.traces_endpoint.clone())
                .with_metadata(metadata)
                .with_timeout(EXPORT_TIMEOUT)
                .build()
        };
        match built {
            Ok(exporter) => Ok(OnRuntime {
                inner: Arc::new(exporter),
                runtime: Some(runtime),
            }),
            Err(error) => {
                runtime.shutdown_background();
                Err(OtlpConfigError::Exporter(error.to_string()))
            }
        }
    }
}

impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let Some(runtime) = &self.runtime else {
            return Err(OTelSdkError::AlreadyShutdown);
        };
        let inner = Arc::clone(&self.inner);
        match runtime
            .spawn(async move { inner.export(batch).await })
            .await
        {
            Ok(result) => result,
            Err(error) => Err(OTelSdkError::InternalFailure(error.to_string())),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let _entered = self.runtime.as_ref().map(tokio::runtime::Runtime::enter);
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        // Only shared while an export runs; the processor sets the resource before any.
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}

impl<E> Drop for OnRuntime<E> {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for OtlpSink {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("OtlpSink").finish_non_exhaustive()
    }
}

impl SpanSink for OtlpSink {
    fn export(&self, span: FinishedSpan) {
        self.finished.fetch_add(1, Ordering::Relaxed);
        self.processor.on_end(span_data(span, &self.scope));
    }

    fn flush(&self) {
        // An unreachable collector is not the call's failure: it is logged by the caller's
        // subscriber at most, never returned.
        let _ = self.processor.force_flush();
    }

    fn finish(&self, bound: Duration) -> ExportTally {
        let processor = Arc::clone(&self.processor);
        let (done, flushed) = std::sync::mpsc::channel();
        // On a thread of its own, so a collector that hangs costs at most `bound`: the thread
        // is abandoned (the process is ending).
        let flushing = std::thread::Builder::new()
            .name("clawsmith-otlp-flush".to_owned())
            .spawn(move || {
                let _ = processor.force_flush();
                let _ = done.send(());
            });
        if flushing.is_ok() {
            let _ = flushed.recv_timeout(bound);
        }
        ExportTally {
            finished: self.finished.load(Ordering::Relaxed),
            exported: self.exported.load(Ordering::Relaxed),
        }
    }
}

impl Drop for OtlpSink {
    fn drop(&mut self) {
        let _ = self.processor.shutdown();
    }
}

fn span_data(span: FinishedSpan, scope: &InstrumentationScope) -> SpanData {
    let context = &span.context;
    let trace_state = context
        .trace_state
        .as_ref()
        .and_then(|state| {
            OtelTraceState::from_key_value(
                state
                    .entries()
                    .iter()
                    .map(|(key, value)| (key.as_str(), value.as_str())),
            )
            .ok()
        })
        .unwrap_or_default();
    let span_context = opentelemetry::trace::SpanContext::new(
        opentelemetry::trace::TraceId::from_bytes(context.trace_id.0),
        opentelemetry::trace::SpanId::from_bytes(context.span_id.0),
        opentelemetry::trace::TraceFlags::new(context.flags.0),
        false,
        trace_state,
    );
    let mut events = SpanEvents::default();
    events.events = span
        .events
        .into_iter()
        .map(|event| {
            opentelemetry::trace::Event::new(
                event.name,
                event.time,
                key_values(event.attributes),
                0,
            )
        })
        .collect();
    SpanData {
        span_context,
        parent_span_id: span
            .parent_span_id
            .map_or(opentelemetry::trace::SpanId::INVALID, |parent| {
                opentelemetry::trace::SpanId::from_bytes(parent.0)
            }),
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(span.name),
        start_time: span.start,
        end_time: span.end,
        attributes: key_values(span.attributes),
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: match span.status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Error(description) => Status::error(description),
        },
        instrumentation_scope: scope.clone(),
    }
}

fn key_values(attributes: Vec<crate::span::Attribute>) -> Vec<KeyValue> {
    attributes
        .into_iter()
        .map(|(key, value)| {
            let value = match value {
                AttributeValue::String(text) => Value::from(text.into_owned()),
                AttributeValue::Bool(flag) => Value::Bool(flag),
                AttributeValue::Int(number) => Value::I64(number),
            };
            KeyValue::new(key, value)
        })
        .collect()
}

/// `%XX` escapes of header values (the OTLP exporter spec says values are URL-encoded).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|digits| u8::from_str_radix(digits, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                index += 3;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<OtlpConfig>, OtlpConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::from_env(|name| map.get(name).cloned())
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(
            config(&[
                ("OTEL_SERVICE_NAME", "x"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", " ")
            ]),
            Ok(None)
        );
    }

    #[test]
    fn the_environment_is_read_as_the_exporter_spec_says() {
        let read = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, x-team=core"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(read.traces_endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(read.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(
            read.headers,
            vec![
                ("api-key".into(), "a b".into()),
                ("x-team".into(), "core".into())
            ]
        );
        assert_eq!(read.service_name, "clawsmith");
        let traces = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:9/custom",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_SERVICE_NAME", "agent-7"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(traces.traces_endpoint, "http://127.0.0.1:9/custom");
        assert_eq!(traces.protocol, OtlpProtocol::HttpJson);
        assert_eq!(traces.service_name, "agent-7");
        // gRPC: the endpoint is the collector's address, used as-is; headers become metadata.
        let grpc = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(grpc.traces_endpoint, "http://127.0.0.1:4317/");
        assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
        assert_eq!(grpc.headers, vec![("api-key".into(), "k".into())]);
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        let table: [(&[(&str, &str)], &str); 6] = [
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc/tls"),
                ],
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc/tls is not supported: use http/protobuf (the default), http/json or grpc",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
                    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/xml"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/xml is not supported: use http/protobuf (the default), http/json or grpc",
            ),
            (
                &[
                    (
                        "OTEL_EXPORTER_OTLP_ENDPOINT",
                        "https://collector.example:4317",
                    ),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "OTEL_EXPORTER_OTLP_ENDPOINT=https://collector.example:4317 is not supported: only http:// endpoints (a collector on this host or network)",
            ),
            (
                &[
                    (
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "collector.example:4317",
                    ),
                    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector.example:4317 is not supported: only http:// endpoints (a collector on this host or network)",
            ),
            (
                &[(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "https://collector.example/v1/traces",
                )],
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://collector.example/v1/traces is not supported: only http:// endpoints (a collector on this host or network)",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS: `novalue` is not key=value",
            ),
        ];
        for (pairs, expected) in table {
            assert_eq!(config(pairs).unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn a_header_that_is_no_grpc_metadata_is_refused_at_install() {
        let read = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "bad key=v"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            install(&read).unwrap_err().to_string(),
            "cannot set up the OTLP exporter: OTEL_EXPORTER_OTLP_HEADERS: `bad key` is not usable as gRPC metadata"
        );
    }
}
